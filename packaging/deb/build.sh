#!/usr/bin/env bash
# make deb: the Debian packages of timehands, built out of the source tree.
#
#   packaging/deb/build.sh [OUTDIR]      (default build-deb, relative to the tree's root)
#
# writes OUTDIR/libtimehands1_V_A.deb, libtimehands-dev_V_A.deb and
# timehands_V_A.deb, where V is the CMake project version with a Debian
# revision (DEB_REVISION, default 1: 1.0.0-1) and A is
# `dpkg-architecture -qDEB_HOST_ARCH`. Everything else stays under OUTDIR too:
#   OUTDIR/cmake    the CMake build: prefix /usr, libdir lib/<multiarch>, Debian's
#                   compiler flags (dpkg-buildflags, hardening=+all), no tests
#   OUTDIR/root     `cmake --install` staged with DESTDIR
#   OUTDIR/debian   control, changelog and one tree per package, in the layout
#                   dpkg-shlibdeps, dpkg-gensymbols and dpkg-gencontrol expect
#
# No debhelper and no dpkg-buildpackage: those want a debian/ directory in the
# source tree and write next to it; here the only tools are dpkg-dev's and
# dpkg-deb --root-owner-group (no root, no fakeroot). Every file
# `cmake --install` produces must be assigned to a package below, or the
# build fails (a new install rule cannot be dropped silently).
set -euo pipefail
umask 022
export LC_ALL=C

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
out=${1:-build-deb}
case $out in /*) ;; *) out=$src/$out ;; esac
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

say() { printf '[deb] %s\n' "$*"; }
die() {
	printf '[deb] FAILED: %s\n' "$*" >&2
	exit 1
}
for tool in cmake readelf dpkg-architecture dpkg-buildflags dpkg-gencontrol dpkg-gensymbols dpkg-shlibdeps dpkg-deb gzip strip md5sum; do
	command -v "$tool" >/dev/null 2>&1 || die "'$tool' is not installed (Debian packages: cmake dpkg-dev binutils gzip)"
done
# OUTDIR's subdirectories are replaced: only in a directory of ours (or a new one).
if [ -e "$out" ] && [ ! -e "$out/.timehands-deb" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
	die "$out exists and is not an output directory of make deb (no .timehands-deb in it): choose another"
fi
mkdir -p "$out"
: >"$out/.timehands-deb"

MA=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
ARCH=$(dpkg-architecture -qDEB_HOST_ARCH)
REV=${DEB_REVISION:-1}
# Timestamps of the packages' files, the changelog's date and the man pages
# generated here: the last commit's, so that a rebuild of the same tree gives
# the same packages.
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git -C "$src" log -1 --format=%ct 2>/dev/null || true)
	[ -n "$SOURCE_DATE_EPOCH" ] || SOURCE_DATE_EPOCH=$(date +%s)
fi
export SOURCE_DATE_EPOCH

# ---------------------------------------------------------------- build
# Debian's flags (what dh_auto_configure would pass): the preprocessor's go
# with the compiler's, since CMake has no CPPFLAGS. Computed in the tree's
# root, so that -ffile-prefix-map maps the tree to ".". CMAKE_BUILD_TYPE None:
# these flags alone (the project's RelWithDebInfo default would add its own).
export DEB_BUILD_MAINT_OPTIONS=${DEB_BUILD_MAINT_OPTIONS:-hardening=+all}
flags() { (cd "$src" && dpkg-buildflags --get "$1"); }
CFLAGS="$(flags CFLAGS) $(flags CPPFLAGS)"
CXXFLAGS="$(flags CXXFLAGS) $(flags CPPFLAGS)"
LDFLAGS=$(flags LDFLAGS)

say "configure and build in $out/cmake"
mkdir -p "$out/cmake"
# CMAKE_SKIP_INSTALL_RPATH: the benchmark programs' $ORIGIN run path is for
# relocatable installs; under /usr the library is in the loader's own path.
cmake -S "$src" -B "$out/cmake" \
	-DCMAKE_BUILD_TYPE=None \
	-DCMAKE_INSTALL_PREFIX=/usr \
	-DCMAKE_INSTALL_LIBDIR="lib/$MA" \
	-DCMAKE_INSTALL_SYSCONFDIR=/etc \
	-DCMAKE_INSTALL_LOCALSTATEDIR=/var \
	-DCMAKE_INSTALL_RUNSTATEDIR=/run \
	-DCMAKE_SKIP_INSTALL_RPATH=ON \
	-DBUILD_TESTING=OFF \
	-DCMAKE_C_FLAGS="$CFLAGS" \
	-DCMAKE_CXX_FLAGS="$CXXFLAGS" \
	-DCMAKE_EXE_LINKER_FLAGS="$LDFLAGS" \
	-DCMAKE_SHARED_LINKER_FLAGS="$LDFLAGS" \
	-DCMAKE_MODULE_LINKER_FLAGS="$LDFLAGS" \
	>"$out/cmake/configure.log" 2>&1 || {
	cat "$out/cmake/configure.log"
	die "configure"
}
cmake --build "$out/cmake" -j "$JOBS" >"$out/cmake/build.log" 2>&1 || {
	tail -n 60 "$out/cmake/build.log"
	die "build (whole log: $out/cmake/build.log)"
}

# The version CMake computed (PROJECT_VERSION, as the pkg-config file has it).
UPSTREAM=$(sed -n 's/^Version: *//p' "$out/cmake/timehands.pc")
[[ $UPSTREAM =~ ^[0-9][0-9.]*$ ]] || die "no project version in $out/cmake/timehands.pc"
VERSION=$UPSTREAM-$REV

# ---------------------------------------------------------------- stage
root=$out/root
deb=$out/debian
rm -rf "$root" "$deb"
rm -f "$out"/libtimehands1_*.deb "$out"/libtimehands-dev_*.deb "$out"/timehands_*.deb
DESTDIR=$root cmake --install "$out/cmake" >"$out/cmake/install.log" 2>&1 || {
	cat "$out/cmake/install.log"
	die "cmake --install"
}

PACKAGES=(libtimehands1 libtimehands-dev timehands)
mkdir -p "$deb"
cp "$here/control" "$deb/control"
for p in "${PACKAGES[@]}"; do mkdir -p "$deb/$p/DEBIAN"; done

# Which package each installed path goes to.
package_of() {
	case $1 in
	usr/lib/"$MA"/libtimehands.so.*) echo libtimehands1 ;;
	usr/lib/"$MA"/libtimehands.so | usr/lib/"$MA"/libtimehands.a | usr/lib/"$MA"/pkgconfig/timehands.pc | \
		usr/include/* | usr/share/man/man3/*) echo libtimehands-dev ;;
	usr/bin/* | usr/sbin/* | usr/lib/"$MA"/timehands/* | usr/lib/systemd/system/* | \
		usr/share/man/man[178]/*) echo timehands ;;
	*) return 1 ;;
	esac
}
while IFS= read -r -d '' f; do
	rel=${f#"$root"/}
	p=$(package_of "$rel") || die "installed file assigned to no package: /$rel (packaging/deb/build.sh, package_of)"
	mkdir -p "$deb/$p/$(dirname "$rel")"
	mv "$f" "$deb/$p/$rel"
done < <(find "$root" \( -type f -o -type l \) -print0 | sort -z)

# Manual pages for the two benchmark programs, which the sources do not have
# (lintian: no-manual-page): their own --help, under a NAME line. Generated from
# the program just built, so that they cannot drift from it.
bench_page() {
	local prog=$1 summary=$2 help
	help=$("$out/cmake/$3" --help) || die "$prog --help"
	local page=$deb/timehands/usr/share/man/man1/$prog.1
	[ -e "$page" ] && return 0
	{
		printf '.TH %s 1 %s "timehands %s" "User Commands"\n' "${prog^^}" \
			"$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)" "$UPSTREAM"
		printf '.SH NAME\n%s \\- %s\n' "${prog//-/\\-}" "$summary"
		printf '.SH SYNOPSIS\n.B %s\n[\\fIoptions\\fR]\n' "${prog//-/\\-}"
		printf '.SH DESCRIPTION\nPart of the benchmark that\n.B timehands bench\nruns (see\n.BR timehands (1)).\n'
		printf 'Its options, as\n.B %s \\-\\-help\nprints them:\n.PP\n.nf\n' "${prog//-/\\-}"
		printf '%s\n' "$help" | sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^[.']/\\\\\\&&/"
		printf '.fi\n.SH SEE ALSO\n.BR timehands (1),\n.BR timehands (7)\n'
	} >"$page"
}
if [ -x "$deb/timehands/usr/bin/timehands-bench" ]; then
	bench_page timehands-bench "compare timehands with the kernel's clocks on this machine" bench/timehands-bench
fi
if [ -x "$deb/timehands/usr/bin/timehands-bench-cputime" ]; then
	bench_page timehands-bench-cputime "the CPU-time table of timehands-bench" bench/cputime/timehands-bench-cputime
fi

# Manual pages as Debian has them: gzip -9n, and a page that is only
# ".so manN/other.N" becomes a symbolic link to other.N.gz (as dh_installman
# does), since a link is what man-db and lintian expect.
while IFS= read -r -d '' page; do
	if [ "$(wc -l <"$page")" -le 1 ] && target=$(sed -n 's|^\.so  *man[0-9a-z]*/\([^/ ]*\)$|\1|p' "$page") &&
		[ -n "$target" ]; then
		rm "$page"
		ln -s "$target.gz" "$page.gz"
	else
		gzip -9n "$page"
	fi
done < <(find "$deb"/*/usr/share/man -type f ! -name '*.gz' -print0)

# Strip as dh_strip does; shared objects and archives are not executable.
is_elf() { [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }
while IFS= read -r -d '' f; do
	case $f in
	*.a)
		strip --strip-debug --remove-section=.comment --remove-section=.note --enable-deterministic-archives "$f"
		chmod 0644 "$f"
		;;
	*.so | *.so.*)
		is_elf "$f" || continue
		strip --remove-section=.comment --remove-section=.note --strip-unneeded "$f"
		chmod 0644 "$f"
		;;
	*)
		is_elf "$f" || continue
		strip --remove-section=.comment --remove-section=.note "$f"
		;;
	esac
done < <(find "$deb"/*/usr -type f -print0)

# ---------------------------------------------------------------- metadata
maintainer=$(sed -n 's/^Maintainer: *//p' "$deb/control")
commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || true)
{
	printf 'timehands (%s) unstable; urgency=medium\n\n' "$VERSION"
	printf '  * Built from the timehands source tree with make deb%s.\n\n' "${commit:+ (git $commit)}"
	printf ' -- %s  %s\n' "$maintainer" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} >"$deb/changelog"

for p in "${PACKAGES[@]}"; do
	doc=$deb/$p/usr/share/doc/$p
	mkdir -p "$doc"
	install -m 0644 "$here/copyright" "$doc/copyright"
	gzip -9n <"$deb/changelog" >"$doc/changelog.Debian.gz"
	chmod 0644 "$doc/changelog.Debian.gz"
done

# The library's ABI: symbols (every th_ symbol of version node TIMEHANDS_1,
# from this upstream version on) and shlibs, and the ldconfig trigger.
(cd "$out" && dpkg-gensymbols -q -plibtimehands1 -Pdebian/libtimehands1 -v"$UPSTREAM" \
	-Odebian/libtimehands1/DEBIAN/symbols) || die dpkg-gensymbols
soname=$(readelf -d "$deb/libtimehands1/usr/lib/$MA/libtimehands.so.1" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libtimehands.so.1 ] ||
	die "the library's SONAME is '$soname', not libtimehands.so.1: the package names (libtimehands1), shlibs and package_of need the new number"
sed -i '1a * Build-Depends-Package: libtimehands-dev' "$deb/libtimehands1/DEBIAN/symbols"
echo "libtimehands 1 libtimehands1 (>= $UPSTREAM)" >"$deb/libtimehands1/DEBIAN/shlibs"
echo "activate-noawait ldconfig" >"$deb/libtimehands1/DEBIAN/triggers"

for s in postinst prerm postrm; do
	install -m 0755 "$here/timehands.$s" "$deb/timehands/DEBIAN/$s"
done

# Dependencies of the ELF objects (the benchmark programs' on libtimehands1
# comes from the symbols file just written), then the control files.
for p in "${PACKAGES[@]}"; do
	: >"$deb/$p.substvars"
	mapfile -d '' elves < <(find "$deb/$p/usr" -type f ! -name '*.a' -print0 |
		while IFS= read -r -d '' f; do is_elf "$f" && printf '%s\0' "$f"; done)
	if [ ${#elves[@]} -gt 0 ]; then
		(cd "$out" && dpkg-shlibdeps -Tdebian/"$p".substvars "${elves[@]#"$out"/}") || die "dpkg-shlibdeps $p"
	fi
	(cd "$out" && dpkg-gencontrol -p"$p" -ldebian/changelog -cdebian/control -Tdebian/"$p".substvars \
		-Pdebian/"$p" -fdebian/files) || die "dpkg-gencontrol $p"
	(cd "$deb/$p" && find usr -type f -print0 | sort -z | xargs -0 md5sum >DEBIAN/md5sums)
	chmod 0644 "$deb/$p/DEBIAN/control" "$deb/$p/DEBIAN/md5sums"
done

for p in "${PACKAGES[@]}"; do
	dpkg-deb --root-owner-group -Zxz --build "$deb/$p" "$out" >/dev/null || die "dpkg-deb $p"
done
for p in "${PACKAGES[@]}"; do
	say "built $out/${p}_${VERSION}_${ARCH}.deb"
done
