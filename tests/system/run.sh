#!/bin/sh
# timehands enable --system / disable --system; one CTest per argument.
#   file     the list's edits on files of every shape (--file: no root needed),
#            and the refusal of a preload that fails its self-test
#   battery  as root, in a private mount namespace whose /etc is an overlay
#            of the real one (the real /etc/ld.so.preload is never written):
#            enable, then real programs, each of which must load the preload
#            and have its clock reads counted by it; then disable restores
#            the file byte for byte
#   unit     the daemon's systemd unit: systemd-analyze security's exposure
# Environment (CMakeLists.txt): TH_CLI, TH_PRELOAD, TH_PRELOAD_COUNT, TH_UNIT.
# Exit 0: pass, 1: fail, 77: skipped (with the reason).
set -u
TMP=$(mktemp -d "${TMPDIR:-/tmp}/th-system.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

case ${1:-} in
file)
	F=$TMP/ld.so.preload
	P=$(realpath "$TH_PRELOAD")
	# absent, empty, ending in a newline, not ending in one, several lines
	for shape in absent empty nl nonl multi; do
		rm -f "$F"
		case $shape in
		absent) ;;
		empty) : >"$F" ;;
		nl) printf '/usr/lib/other.so\n' >"$F" ;;
		nonl) printf '/usr/lib/other.so' >"$F" ;;
		multi) printf '/usr/lib/a.so /usr/lib/b.so\n\n/usr/lib/c.so:/usr/lib/d.so\n' >"$F" ;;
		esac
		[ -e "$F" ] && cp "$F" "$TMP/before"
		"$TH_CLI" enable --system --file "$F" >"$TMP/out" 2>&1 || fail "$shape: enable: $(cat "$TMP/out")"
		grep -qx "$P" "$F" || fail "$shape: $F does not list $P as a line: $(cat "$F")"
		if [ -e "$TMP/before" ]; then
			head -c "$(wc -c <"$TMP/before")" "$F" | cmp -s - "$TMP/before" ||
				fail "$shape: enable changed what the file held"
		fi
		# a second enable changes nothing
		cp "$F" "$TMP/once"
		"$TH_CLI" enable --system --file "$F" >"$TMP/out" 2>&1 || fail "$shape: second enable"
		grep -q "already enabled" "$TMP/out" || fail "$shape: second enable: $(cat "$TMP/out")"
		cmp -s "$F" "$TMP/once" || fail "$shape: the second enable changed the file"
		"$TH_CLI" disable --system --file "$F" >"$TMP/out" 2>&1 || fail "$shape: disable: $(cat "$TMP/out")"
		if [ -e "$TMP/before" ]; then
			cmp -s "$F" "$TMP/before" || fail "$shape: disable did not restore the file byte for byte"
			rm -f "$TMP/before"
		else
			[ ! -e "$F" ] || fail "$shape: disable left a file enable had created"
		fi
		"$TH_CLI" disable --system --file "$F" >"$TMP/out" 2>&1 || fail "$shape: second disable"
		grep -q "not enabled" "$TMP/out" || fail "$shape: second disable: $(cat "$TMP/out")"
		echo "ok: $shape"
	done
	# Refusals, the file untouched: a preload that is not a shared object
	# (the loader complains, nothing is interposed), a path to something
	# else, no --system.
	mkdir "$TMP/bad"
	printf 'not an ELF file\n' >"$TMP/bad/libtimehands-preload.so"
	printf '/usr/lib/other.so\n' >"$F"
	cp "$F" "$TMP/before"
	if "$TH_CLI" enable --system --file "$F" --preload "$TMP/bad/libtimehands-preload.so" >"$TMP/out" 2>&1; then
		fail "a preload that is not a shared object was enabled"
	fi
	grep -q "self-test" "$TMP/out" || fail "no self-test reason: $(cat "$TMP/out")"
	cmp -s "$F" "$TMP/before" || fail "a refused enable changed the file"
	if "$TH_CLI" enable --system --file "$F" --preload /bin/true >"$TMP/out" 2>&1; then
		fail "a path that is not the preload was enabled"
	fi
	if "$TH_CLI" enable --file "$F" >"$TMP/out" 2>&1; then
		fail "enable without --system"
	fi
	cmp -s "$F" "$TMP/before" || fail "a refused enable changed the file"
	echo "ok: refusals ($(head -n 1 "$TMP/out"))"
	;;
battery)
	[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (a private mount namespace over /etc)"; exit 77; }
	command -v unshare >/dev/null 2>&1 || { echo "SKIP: unshare is needed (Debian package: util-linux)"; exit 77; }
	# The counting build of the preload, under the preload's own name
	# (enable lists only that name): each process appends its pid and
	# what it read to $TH_PRELOAD_COUNT_FILE when it exits.
	mkdir "$TMP/lib" "$TMP/up" "$TMP/work"
	cp "$TH_PRELOAD_COUNT" "$TMP/lib/libtimehands-preload.so"
	chmod 755 "$TMP" "$TMP/lib"
	if [ -e /etc/ld.so.preload ]; then cp -p /etc/ld.so.preload "$TMP/real-before"; fi
	export TH_PRELOAD_COUNT_FILE=/dev/null TH_CLI TMP
	unshare --mount --propagation private sh -eu -c '
		mount -t overlay overlay -o "lowerdir=/etc,upperdir=$TMP/up,workdir=$TMP/work" /etc ||
			{ echo "SKIP: no overlay mount over /etc here"; exit 77; }
		if [ -e /etc/ld.so.preload ]; then cp -p /etc/ld.so.preload "$TMP/before"; fi
		"$TH_CLI" enable --system --preload "$TMP/lib/libtimehands-preload.so"
		grep -qx "$TMP/lib/libtimehands-preload.so" /etc/ld.so.preload
		"$TH_CLI" status | grep "^system_preload: on"
		n=0
		# Each program counts into a file of its own; this shell and
		# its helpers into /dev/null.
		run() { # name, command...
			name=$1
			shift
			n=$((n + 1))
			f=$TMP/count.$n
			: >"$f"
			chmod 666 "$f"
			TH_PRELOAD_COUNT_FILE=$f "$@" >"$TMP/prog.out" 2>&1 ||
				{ echo "FAIL: $name failed: $(cat "$TMP/prog.out")"; exit 1; }
			procs=$(wc -l <"$f")
			[ "$procs" -gt 0 ] || { echo "FAIL: $name: no process of it loaded the preload"; exit 1; }
			reads=$(tr " " "\n" <"$f" |
				sed -n "s/^\(clock_gettime\|gettimeofday\|time\|timespec_get\|times\|clock\)=//p" |
				awk "{ s += \$1 } END { print s + 0 }")
			echo "ok: $name: $procs processes loaded the preload, $reads clock reads served by it"
			eval "reads_$n=$reads"
		}
		run "bash and coreutils" bash -c "date; ls /etc >/dev/null; sleep 0.01; date +%s%N"
		run "an sh pipeline" sh -c "date +%s | cat | wc -c; seq 3 | sort -r | head -n 1"
		if command -v python3 >/dev/null; then
			run python3 python3 -c "import time; [time.time() for _ in range(100)]; print(time.monotonic())"
		fi
		run perl perl -e "my \$t = time; print scalar localtime(\$t), qq(\n)"
		if command -v apt-get >/dev/null; then
			run "apt-get --simulate" apt-get --simulate --quiet --quiet install coreutils
		fi
		# A setuid program run by an unprivileged user (the loader honours
		# /etc/ld.so.preload in secure mode too).
		if command -v setpriv >/dev/null && [ -u /usr/bin/mount ]; then
			run "setuid mount, as nobody" setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/mount
		fi
		run "date, counted" date
		[ "$reads_1" -gt 0 ] || { echo "FAIL: bash and date read no clock through the preload"; exit 1; }
		"$TH_CLI" disable --system
		if [ -e "$TMP/before" ]; then
			cmp /etc/ld.so.preload "$TMP/before" || { echo "FAIL: disable did not restore the file"; exit 1; }
		else
			[ ! -e /etc/ld.so.preload ] || { echo "FAIL: disable left /etc/ld.so.preload"; exit 1; }
		fi
		"$TH_CLI" status | grep "^system_preload: off"
		: >"$TMP/count.after"
		TH_PRELOAD_COUNT_FILE=$TMP/count.after date >/dev/null
		[ ! -s "$TMP/count.after" ] || { echo "FAIL: a process loaded the preload after disable"; exit 1; }
		echo "ok: disabled, the file as it was, new processes without the preload"
	'
	rc=$?
	[ "$rc" = 0 ] || exit "$rc"
	# the machine's own file, outside the namespace, as it was
	if [ -e "$TMP/real-before" ]; then
		cmp -s /etc/ld.so.preload "$TMP/real-before" || fail "the real /etc/ld.so.preload changed"
	else
		[ ! -e /etc/ld.so.preload ] || fail "the real /etc/ld.so.preload was created"
	fi
	;;
unit)
	# The daemon's systemd unit, sandboxed as systemd-analyze security asks
	# (where it applies: see the unit's comments).
	command -v systemd-analyze >/dev/null 2>&1 ||
		{ echo "SKIP: systemd-analyze is needed (Debian package: systemd)"; exit 77; }
	systemd-analyze security --offline=true "$TH_UNIT" >"$TMP/sec" 2>&1 ||
		fail "systemd-analyze security: $(cat "$TMP/sec")"
	level=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$TMP/sec")
	[ -n "$level" ] || fail "no exposure level: $(tail -n 3 "$TMP/sec")"
	awk -v l="$level" 'BEGIN { exit !(l <= 3.0) }' || fail "exposure $level above 3.0: $(grep '✗' "$TMP/sec")"
	for d in NoNewPrivileges ProtectSystem=strict PrivateNetwork PrivateDevices ProtectKernelLogs \
		PrivateMounts RestrictSUIDSGID MemoryDenyWriteExecute; do
		grep -q "^$d" "$TH_UNIT" || fail "the unit lacks $d"
	done
	echo "ok: exposure $level"
	;;
*)
	echo "usage: run.sh file|battery|unit" >&2
	exit 2
	;;
esac
