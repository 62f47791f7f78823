#!/usr/bin/env bash
# make test-deb: the Debian packages of `make deb`, built in their own
# directory (${TH_TIER_PREFIX}deb-test, default build-deb-test), checked with
# lintian (errors fail, warnings are shown), then, as root only:
#   dpkg -i all of them; the installed files are there and work: pkg-config,
#   a C program compiled against the installed header and linked with
#   -ltimehands (and statically), `timehands status`, `timehands run` with the
#   installed preload mapped, `timehandsd --help`, `timehands-bench --help`
#   (it links libtimehands.so.1); the unit is not enabled (nor active, where
#   systemd runs);
#   dpkg -i again (the upgrade path), the same checks once more;
#   a link as `systemctl enable timehandsd` makes it, by hand (nothing starts);
#   dpkg -P all of them: none of the files `dpkg -L` listed is left, no new
#   directory, no /run/timehands, nothing of theirs under /etc or in
#   deb-systemd-helper's state.
# Without root: the build and lintian only (the install checks say they need
# root). It refuses to run where any of the packages is installed already (it
# would purge them), and purges whatever it installed on any exit.
#
# Not for a machine in use: it installs into /usr and runs the maintainer
# scripts (they never enable or start timehandsd).
set -euo pipefail
. "$(dirname "$0")/common.sh"
cd "$TH_ROOT"

PACKAGES=(libtimehands1 libtimehands-dev timehands)
dir=${TH_TIER_PREFIX}deb-test
t0=$(now_s)

# The tier's Debian packages (tests/packages.txt, tier deb), as make test does.
"$TH_ROOT/tests/tiers/setup.sh" build deb
need make dpkg dpkg-deb dpkg-architecture lintian

tier_log "make deb DEB_BUILD=$dir"
make --no-print-directory deb DEB_BUILD="$dir" || die "make deb"
MA=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
ARCH=$(dpkg-architecture -qDEB_HOST_ARCH)
debs=()
for p in "${PACKAGES[@]}"; do
	f=$(find "$dir" -maxdepth 1 -name "${p}_*_${ARCH}.deb" | sort | tail -n 1)
	[ -n "$f" ] || die "no ${p}_*_${ARCH}.deb in $dir"
	[ "$(dpkg-deb -f "$f" Package)" = "$p" ] || die "$f is not package $p"
	debs+=("$f")
done
VERSION=$(dpkg-deb -f "${debs[0]}" Version)
UPSTREAM=${VERSION%-*}
cmake_version=$(sed -n 's/^project(timehands VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[ "$UPSTREAM" = "$cmake_version" ] || die "package version $VERSION is not the CMake project's $cmake_version"
tier_log "packages: ${debs[*]##*/}"

# ------------------------------------------------------------------ lintian
# Errors fail; warnings and the rest are shown. Expected, and why (see
# packaging/deb/build.sh): W initial-upload-closes-no-bugs (no Debian ITP bug:
# these packages are not uploads to Debian).
tier_log "lintian"
lint=$dir/lintian.txt
rc=0
lintian --fail-on error --display-info --pedantic "${debs[@]}" >"$lint" 2>&1 || rc=$?
grep -v '^running with root privileges' "$lint" || true
errors=$(grep -c '^E: ' "$lint" || true)
warnings=$(grep -c '^W: ' "$lint" || true)
tier_log "lintian: $errors errors, $warnings warnings (exit $rc)"
if [ "$rc" -ne 0 ] || [ "$errors" -ne 0 ]; then
	die "lintian reports errors (or failed, exit $rc): $lint"
fi

# The unit must never be enabled or started by the package itself.
for s in postinst preinst; do
	body=$(dpkg-deb --ctrl-tarfile "${debs[2]}" | tar -xOf - "./$s" 2>/dev/null || true)
	code=$(grep -v '^[[:space:]]*#' <<<"$body" || true)
	if grep -Eq 'deb-systemd-helper +(enable|reenable)|deb-systemd-invoke +(start|restart)|systemctl .*(enable|[^-]start)' <<<"$code"; then
		die "the $s of timehands enables or starts timehandsd"
	fi
done

if [ "$(id -u)" -ne 0 ]; then
	tier_log "not root: the install, upgrade and purge checks need root; built and linted only"
	tier_log "passed (build + lintian) in $(($(now_s) - t0)) s"
	exit 0
fi

# ------------------------------------------------------------------ as root
need pkg-config cc ldd
for p in "${PACKAGES[@]}"; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	case $st in '' | not-installed) ;; *) die "$p is already on this machine ($st): this test would purge it; remove it first" ;; esac
done

work=$(mktemp -d)
installed=0
made_link=
cleanup() {
	local rc=$?
	if [ $installed -eq 1 ]; then
		local left=()
		for p in "${PACKAGES[@]}"; do
			st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
			case $st in '' | not-installed) ;; *) left+=("$p") ;; esac
		done
		if [ ${#left[@]} -gt 0 ]; then
			tier_log "cleanup: purging ${left[*]}"
			dpkg_retry -P "${left[@]}" >/dev/null 2>&1 ||
				dpkg_retry -P --force-remove-reinstreq "${left[@]}" >/dev/null 2>&1 ||
				tier_log "cleanup: could not purge ${left[*]}: dpkg -P ${left[*]}" >&2
		fi
	fi
	# the hand-made enable link, if a failed purge left it
	if [ -n "$made_link" ] && [ -L "$made_link" ]; then
		rm -f "$made_link"
	fi
	rm -rf "$work"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# dpkg refuses at once while another dpkg or apt holds its lock.
dpkg_retry() {
	local n out
	for n in 1 2 3 4 5 6 7 8 9 10; do
		if out=$(dpkg "$@" 2>&1); then
			printf '%s\n' "$out"
			return 0
		fi
		case $out in *"lock"*) sleep $((n * 3)) ;; *)
			printf '%s\n' "$out" >&2
			return 1
			;;
		esac
	done
	printf '%s\n' "$out" >&2
	return 1
}

# What is there before: every path the packages hold (directories among them
# may exist already, /usr/share/doc say) and what of ours /etc, /run and
# deb-systemd-helper's state could hold.
mapfile -t paths < <(for f in "${debs[@]}"; do dpkg-deb --fsys-tarfile "$f" | tar -tf -; done |
	sed -e 's|^\./|/|' -e 's|/$||' | grep -v '^\.\?$' | sort -u)
: >"$work/existed"
for path in "${paths[@]}"; do
	[ -e "$path" ] || [ -L "$path" ] && echo "$path" >>"$work/existed"
done
ours() {
	find /etc /var/lib/systemd -xdev -name '*timehands*' 2>/dev/null | sort
	[ -e /run/timehands ] && echo /run/timehands
	return 0
}
ours >"$work/ours-before"

check_installed() {
	local what=$1 p
	for p in "${PACKAGES[@]}"; do
		[ "$(dpkg-query -W -f='${db:Status-Status} ${Version}' "$p")" = "installed $VERSION" ] ||
			die "$what: $p is not installed at $VERSION"
		dpkg --verify "$p" || die "$what: dpkg --verify $p"
	done
	# pkg-config and the header, the shared and the static library.
	local pc
	pc=$(pkg-config --cflags --libs timehands) || die "$what: pkg-config --cflags --libs timehands"
	[[ " $pc " == *" -ltimehands "* ]] || die "$what: pkg-config gives '$pc'"
	[ "$(pkg-config --modversion timehands)" = "$UPSTREAM" ] || die "$what: pkg-config --modversion"
	[ "$(pkg-config --variable=libdir timehands)" = "/usr/lib/$MA" ] || die "$what: pkg-config libdir"
	cat >"$work/t.c" <<-'EOF'
		#include <timehands.h>
		#include <stdio.h>
		#include <string.h>
		#include <time.h>
		int main(void)
		{
			struct timespec a, b;
			struct th_status st;
			if (th_clock_gettime(CLOCK_MONOTONIC, &a) || th_clock_gettime(CLOCK_MONOTONIC, &b) ||
			    (b.tv_sec < a.tv_sec || (b.tv_sec == a.tv_sec && b.tv_nsec < a.tv_nsec)))
				return 1;
			if (th_time(NULL) < 1000000000 || th_status(&st, sizeof st) != 0)
				return 2;
			printf("th_status: mode %u, counter %u, clocksource %s\n", st.mode, st.counter, st.clocksource);
			return 0;
		}
	EOF
	# The installed header (not one in /usr/local or the tree).
	# shellcheck disable=SC2046 # pkg-config's output is words
	cc $(pkg-config --cflags timehands) -H -fsyntax-only "$work/t.c" >"$work/includes" 2>&1 ||
		die "$what: t.c does not compile: $(cat "$work/includes")"
	grep -qx '\. /usr/include/timehands\.h' "$work/includes" ||
		die "$what: t.c does not include /usr/include/timehands.h: $(grep timehands "$work/includes")"
	# shellcheck disable=SC2046 # pkg-config's output is words
	cc -O2 -Wall -Werror $(pkg-config --cflags timehands) "$work/t.c" -o "$work/t" $(pkg-config --libs timehands) ||
		die "$what: compile and link with -ltimehands"
	ldd "$work/t" >"$work/ldd" || die "$what: ldd"
	# (/lib is /usr/lib on a merged-/usr system: the same file either way)
	local loaded
	loaded=$(sed -n 's/^[[:space:]]*libtimehands\.so\.1 => \([^ ]*\) .*/\1/p' "$work/ldd")
	if [ -z "$loaded" ] || [ "$(realpath "$loaded")" != "$(realpath "/usr/lib/$MA/libtimehands.so.1")" ]; then
		die "$what: the program does not load /usr/lib/$MA/libtimehands.so.1: $(cat "$work/ldd")"
	fi
	"$work/t" || die "$what: the program linked with -ltimehands (exit $?)"
	# shellcheck disable=SC2046
	cc -O2 $(pkg-config --cflags timehands) "$work/t.c" -o "$work/t-static" \
		"/usr/lib/$MA/libtimehands.a" $(pkg-config --static --libs-only-l timehands | sed 's/-ltimehands//') ||
		die "$what: link with libtimehands.a"
	"$work/t-static" >/dev/null || die "$what: the program linked with libtimehands.a"

	# The tools, by their installed paths (PATH may have /usr/local first).
	[ "$(/usr/bin/timehands --version)" = "timehands $UPSTREAM" ] || die "$what: timehands --version is not $UPSTREAM"
	/usr/bin/timehands status >"$work/status" 2>&1 || {
		cat "$work/status"
		die "$what: timehands status"
	}
	sed 's/^/  status: /' "$work/status" | head -n 8
	/usr/bin/timehands run date >/dev/null || die "$what: timehands run date"
	local preload=/usr/lib/$MA/timehands/libtimehands-preload.so
	/usr/bin/timehands run -- cat /proc/self/maps >"$work/maps" || die "$what: timehands run -- cat /proc/self/maps"
	grep -q " $preload\$" "$work/maps" ||
		die "$what: the installed preload ($preload) is not mapped under timehands run: $(grep -i timehands "$work/maps" || echo none)"
	/usr/sbin/timehandsd --help >"$work/help" 2>&1 || die "$what: timehandsd --help"
	grep -q '^usage: timehandsd' "$work/help" || die "$what: timehandsd --help prints no usage"
	/usr/bin/timehands-bench --help >/dev/null || die "$what: timehands-bench --help"
	man -w timehands timehandsd th_clock_gettime >/dev/null 2>&1 || ! command -v man >/dev/null ||
		die "$what: man -w finds no page"

	# The unit: installed, never enabled (no link made) nor started.
	[ -f /usr/lib/systemd/system/timehandsd.service ] || die "$what: no unit file"
	grep -q "^ExecStart=/usr/sbin/timehandsd " /usr/lib/systemd/system/timehandsd.service ||
		die "$what: the unit does not run /usr/sbin/timehandsd"
	local linked
	linked=$(find /etc/systemd -name 'timehandsd.service' 2>/dev/null || true)
	[ -z "$linked" ] || die "$what: timehandsd.service is linked under /etc/systemd: $linked"
	if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
		local en act
		en=$(systemctl is-enabled timehandsd.service 2>&1 || true)
		act=$(systemctl is-active timehandsd.service 2>&1 || true)
		tier_log "$what: systemctl is-enabled: $en, is-active: $act"
		case $en in enabled*) die "$what: timehandsd is enabled" ;; esac
		[ "$act" != active ] || die "$what: timehandsd is running"
	else
		tier_log "$what: systemd is not running here: systemctl is-enabled/is-active skipped (no link under /etc/systemd checked instead)"
	fi
}

tier_log "dpkg -i"
installed=1
dpkg_retry -i "${debs[@]}" || die "dpkg -i"
check_installed install
mapfile -t listed < <(dpkg -L "${PACKAGES[@]}" | grep '^/' | grep -vx '/\.' | sort -u)
[ ${#listed[@]} -gt 10 ] || die "dpkg -L lists only ${#listed[@]} paths"

tier_log "dpkg -i again (upgrade path)"
dpkg_retry -i "${debs[@]}" || die "dpkg -i (again)"
check_installed reinstall

# System-wide: the installed CLI lists the installed preload in the
# /etc/ld.so.preload of a private mount namespace (an overlay of /etc; the
# machine's own file is never written), every program started there maps it,
# its clocks are the preload's (the CLI's self-test), and disable restores
# the file. tests/system's battery counts the reads of many more programs
# with the counting build.
if command -v unshare >/dev/null 2>&1; then
	tier_log "enable --system in a private mount namespace"
	mkdir "$work/up" "$work/ovl"
	[ -e /etc/ld.so.preload ] && cp -p /etc/ld.so.preload "$work/real-preload"
	export work MA
	unshare --mount --propagation private bash -euo pipefail -c '
		mount -t overlay overlay -o "lowerdir=/etc,upperdir=$work/up,workdir=$work/ovl" /etc
		[ -e /etc/ld.so.preload ] && cp -p /etc/ld.so.preload "$work/before"
		/usr/bin/timehands enable --system >/dev/null
		p=/usr/lib/$MA/timehands/libtimehands-preload.so
		grep -qx "$p" /etc/ld.so.preload
		/usr/bin/timehands status | grep -qx "system_preload: on (/etc/ld.so.preload lists $p)"
		maps() { # name, command that prints its own maps
			name=$1
			shift
			"$@" >"$work/maps" 2>&1 || { echo "$name failed: $(cat "$work/maps")"; exit 1; }
			grep -q " $p\$" "$work/maps" || { echo "$name does not map $p"; exit 1; }
			echo "  $name maps the preload"
		}
		maps cat cat /proc/self/maps
		maps bash bash -c "cat /proc/\$\$/maps"
		maps sh sh -c "cat /proc/\$\$/maps"
		command -v python3 >/dev/null && maps python3 python3 -c "print(open(\"/proc/self/maps\").read())"
		maps perl perl -e "open(my \$f, q(<), q(/proc/self/maps)) or die; print <\$f>"
		/usr/bin/timehands __preload-selftest || { echo "the preload self-test failed"; exit 1; }
		/usr/bin/timehands disable --system >/dev/null
		if [ -e "$work/before" ]; then cmp /etc/ld.so.preload "$work/before"; else [ ! -e /etc/ld.so.preload ]; fi
		cat /proc/self/maps | { ! grep -q "libtimehands-preload"; }
	' || die "enable --system with the installed package"
	if [ -e "$work/real-preload" ]; then
		cmp -s /etc/ld.so.preload "$work/real-preload" || die "the real /etc/ld.so.preload changed"
	else
		[ ! -e /etc/ld.so.preload ] || die "the real /etc/ld.so.preload was created"
	fi
else
	tier_log "no unshare: enable --system with the installed package not checked (Debian package: util-linux)"
fi

# An operator's `systemctl enable timehandsd` (the link its [Install] section
# names, made by hand so that nothing starts): the purge must take it away.
wants=/etc/systemd/system/multi-user.target.wants
if [ -d "$wants" ]; then
	made_link=$wants/timehandsd.service
	ln -s /usr/lib/systemd/system/timehandsd.service "$made_link"
else
	tier_log "no $wants here: the purge of an operator's enable link is not checked"
fi

tier_log "dpkg -P"
dpkg_retry -P "${PACKAGES[@]}" || die "dpkg -P"
left=()
for path in "${listed[@]}"; do
	if [ -e "$path" ] || [ -L "$path" ]; then
		# a directory that was there before may stay; nothing else may
		if ! grep -qxF "$path" "$work/existed" || [ ! -d "$path" ] || [ -L "$path" ]; then
			left+=("$path")
		fi
	fi
done
[ ${#left[@]} -eq 0 ] || die "left after purge: ${left[*]}"
for p in "${PACKAGES[@]}"; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	case $st in '' | not-installed) ;; *) die "$p is still known to dpkg after purge ($st)" ;; esac
done
ours >"$work/ours-after"
new=$(comm -13 "$work/ours-before" "$work/ours-after")
[ -z "$new" ] || die "left after purge: $new"
installed=0

tier_log "passed: built, lintian, installed, reinstalled and purged ${#listed[@]} paths in $(($(now_s) - t0)) s"
