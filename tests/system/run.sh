#!/bin/sh
# timehands enable --system / disable --system; one CTest per argument.
#   file     the list's edits on files of every shape (--file: no root needed),
#            and the refusal of a preload that fails its self-test
#   battery  as root, in a private mount namespace whose /etc is an overlay
#            of the real one (the real /etc/ld.so.preload is never written):
#            enable, then real programs, each of which must load the preload
#            and have its clock reads counted by it; then disable restores
#            the file byte for byte
#   container  a user and mount namespace (a container) that binds the
#            daemon's /run/timehands and reads its page in shared mode
#   unit     the daemon's systemd unit: systemd-analyze security's exposure
# Environment (CMakeLists.txt): TH_CLI, TH_PRELOAD, TH_PRELOAD_COUNT, TH_DAEMON,
# TH_UNIT.
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
	command -v setpriv >/dev/null 2>&1 || { echo "SKIP: setpriv is needed (Debian package: util-linux)"; exit 77; }
	if [ -e /etc/ld.so.preload ]; then cp -p /etc/ld.so.preload "$TMP/real-before"; fi
	export TH_PRELOAD_COUNT_FILE=/dev/null TH_CLI TH_SANDBOX TMP
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
			! grep -q "^timehands" "$TMP/prog.out" ||
				{ echo "FAIL: $name: the preload printed: $(cat "$TMP/prog.out")"; exit 1; }
			counted "$name" "$f"
			eval "reads_$n=$reads"
		}
		counted() { # name, count file: each process that loaded the preload left a line
			procs=$(wc -l <"$2")
			[ "$procs" -gt 0 ] || { echo "FAIL: $1: no process of it loaded the preload"; exit 1; }
			reads=$(tr " " "\n" <"$2" |
				sed -n "s/^\(clock_gettime\|gettimeofday\|time\|timespec_get\|times\|clock\)=//p" |
				awk "{ s += \$1 } END { print s + 0 }")
			echo "ok: $1: $procs processes loaded the preload, $reads clock reads served by it"
		}
		nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
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
		if [ -u /usr/bin/mount ]; then
			run "setuid mount, as nobody" nobody /usr/bin/mount
		fi
		run "date, counted" date
		run "su, to nobody" su -s /bin/sh -c "id -u; date +%s" nobody
		# Programs that lock themselves down after start (the preload
		# attached in its constructor). Under seccomp the counting build
		# may not open its file at exit: not counted, only run.
		run "a program that closes every fd" "$TH_SANDBOX" closefds
		env -u TH_PRELOAD_COUNT_FILE "$TH_SANDBOX" seccomp >"$TMP/prog.out" 2>&1 ||
			{ echo "FAIL: a program under a seccomp filter: status $? $(cat "$TMP/prog.out")"; exit 1; }
		echo "ok: a program under a seccomp filter of clock reads only"
		# A program that chroots: it counts into /count of its new root.
		if command -v python3 >/dev/null; then
			mkdir -m 755 "$TMP/croot"
			: >"$TMP/croot/count"
			TH_PRELOAD_COUNT_FILE=/count python3 -c "import os, time
os.chroot(\"$TMP/croot\"); os.chdir(\"/\")
t = [time.time() for _ in range(1000)]
assert t == sorted(t) and abs(t[-1] - time.time()) < 1
print(time.monotonic())" >"$TMP/prog.out" 2>&1 ||
				{ echo "FAIL: a program that chroots: $(cat "$TMP/prog.out")"; exit 1; }
			counted "a program that chroots (python3)" "$TMP/croot/count"
		fi
		# Before /run exists (early boot; a fresh container): no page, no
		# daemon, the process keeps its own clocks.
		run "an empty /run" unshare --mount sh -c "mount -t tmpfs tmpfs /run && date && ls -A /run"
		# A bad TIMEHANDS_* value: nothing on stderr from a system-wide
		# preload; timehands status names it.
		: >"$TMP/count.bad"
		TIMEHANDS_RELAXED=banana TH_PRELOAD_COUNT_FILE=$TMP/count.bad date >"$TMP/prog.out" 2>"$TMP/prog.err" ||
			{ echo "FAIL: date with a bad TIMEHANDS_RELAXED"; exit 1; }
		[ ! -s "$TMP/prog.err" ] ||
			{ echo "FAIL: the system-wide preload printed: $(cat "$TMP/prog.err")"; exit 1; }
		counted "date with TIMEHANDS_RELAXED=banana, silent" "$TMP/count.bad"
		TIMEHANDS_RELAXED=banana "$TH_CLI" status 2>/dev/null | grep "^reason: .*TIMEHANDS_RELAXED=banana" ||
			{ echo "FAIL: status does not name the bad value"; exit 1; }
		# Servers and their benchmark clients.
		if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
			: >"$TMP/count.redis"
			TH_PRELOAD_COUNT_FILE=$TMP/count.redis redis-server --port 0 --unixsocket "$TMP/redis.sock" \
				--save "" --appendonly no --daemonize no >"$TMP/redis.log" 2>&1 &
			rpid=$!
			i=0
			until [ -S "$TMP/redis.sock" ]; do
				i=$((i + 1))
				[ $i -lt 100 ] || { echo "FAIL: redis-server did not start: $(cat "$TMP/redis.log")"; exit 1; }
				sleep 0.1
			done
			run "redis-benchmark" redis-benchmark -s "$TMP/redis.sock" -n 5000 -q -t set,get,incr
			redis-cli -s "$TMP/redis.sock" shutdown nosave >/dev/null 2>&1 || true
			wait $rpid || true
			counted "redis-server" "$TMP/count.redis"
		else
			echo "SKIP part: redis (Debian packages: redis-server redis-tools)"
		fi
		PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
		if [ -n "$PGBIN" ] && [ -x "$PGBIN/initdb" ] && [ -x "$PGBIN/pgbench" ]; then
			# as nobody: PostgreSQL refuses to run as root
			mkdir -m 700 "$TMP/pg"
			chown 65534:65534 "$TMP/pg"
			run "PostgreSQL initdb" nobody "$PGBIN/initdb" -D "$TMP/pg/data" -A trust -U postgres --no-sync
			: >"$TMP/count.pg"
			chmod 666 "$TMP/count.pg"
			TH_PRELOAD_COUNT_FILE=$TMP/count.pg nobody "$PGBIN/pg_ctl" -D "$TMP/pg/data" -l "$TMP/pg/log" -w \
				-o "-k $TMP/pg -c listen_addresses= -c fsync=off" start >"$TMP/prog.out" 2>&1 ||
				{ echo "FAIL: pg_ctl start: $(cat "$TMP/prog.out") $(cat "$TMP/pg/log")"; exit 1; }
			run "pgbench -i" nobody "$PGBIN/pgbench" -h "$TMP/pg" -U postgres -i -s 1 -q postgres
			run "pgbench" nobody "$PGBIN/pgbench" -h "$TMP/pg" -U postgres -c 2 -t 200 postgres
			TH_PRELOAD_COUNT_FILE=$TMP/count.pg nobody "$PGBIN/pg_ctl" -D "$TMP/pg/data" -m fast -w stop \
				>"$TMP/prog.out" 2>&1 || { echo "FAIL: pg_ctl stop: $(cat "$TMP/prog.out")"; exit 1; }
			! grep -E "PANIC|FATAL" "$TMP/pg/log" || { echo "FAIL: errors in the server log"; exit 1; }
			counted "the PostgreSQL server (pg_ctl, postgres)" "$TMP/count.pg"
		else
			echo "SKIP part: PostgreSQL (Debian package: postgresql)"
		fi
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
container)
	# A container: a new user and mount namespace, its own /run, the host's
	# /run/timehands bound into it, the preload by its environment. As root
	# the daemon runs as root and the container as nobody, so that the
	# daemon's socket, its directory and the page are owned by a uid the
	# container does not map (the kernel shows it as the overflow uid).
	command -v unshare >/dev/null 2>&1 || { echo "SKIP: unshare is needed (Debian package: util-linux)"; exit 77; }
	as=""
	if [ "$(id -u)" = 0 ]; then
		command -v setpriv >/dev/null 2>&1 || { echo "SKIP: setpriv is needed (Debian package: util-linux)"; exit 77; }
		as="setpriv --reuid=65534 --regid=65534 --clear-groups"
	fi
	$as unshare --user --map-root-user --mount true 2>"$TMP/err" ||
		{ echo "SKIP: this kernel refuses a user namespace here: $(cat "$TMP/err")"; exit 77; }
	for f in "$TH_CLI" "$TH_PRELOAD" "$TH_DAEMON"; do
		$as test -r "$f" ||
			{ echo "SKIP: $f is not readable by the container's user (a private build directory)"; exit 77; }
	done
	chmod 755 "$TMP"
	mkdir -m 755 "$TMP/run"
	"$TH_DAEMON" --page "$TMP/run/page" --foreground >"$TMP/daemon.log" 2>&1 &
	dpid=$!
	trap 'kill $dpid 2>/dev/null; wait $dpid 2>/dev/null; rm -rf "$TMP"' EXIT
	i=0
	until [ -S "$TMP/run/page" ]; do
		i=$((i + 1))
		[ $i -lt 100 ] || fail "timehandsd did not start: $(cat "$TMP/daemon.log")"
		sleep 0.1
	done
	export TMP TH_CLI TH_PRELOAD
	# TIMEHANDS_LINE=own: where the kernel's conversion can be read, a
	# process does not need the daemon's page and would not join it.
	$as unshare --user --map-root-user --mount sh -eu -c '
		mount -t tmpfs -o mode=755 tmpfs /run
		mkdir /run/timehands
		mount --bind "$TMP/run" /run/timehands
		echo "uid_map: $(cat /proc/self/uid_map | tr -s " ")"
		echo "the page directory: $(stat -c "%u:%g %a" /run/timehands)"
		export LD_PRELOAD=$TH_PRELOAD TIMEHANDS_LINE=own
		i=0
		# a process whose first reading found the daemon slow (a loaded
		# machine) stays local: a new one each time
		until "$TH_CLI" status >/run/status && grep -qx "mode: shared" /run/status; do
			i=$((i + 1))
			[ $i -lt 10 ] || { echo "FAIL: not in shared mode in the container:"; cat /run/status; exit 1; }
			sleep 0.3
		done
		grep "^page:" /run/status
		# the preload in a process of the container: its clocks, served
		# from the page, within 1 us of the kernel
		"$TH_CLI" __preload-selftest || { echo "FAIL: the preload self-test in the container"; exit 1; }
		date >/dev/null
		echo "ok: the container reads the daemon'"'"'s page in shared mode"
	' || fail "the container"
	kill -0 $dpid 2>/dev/null || fail "timehandsd exited: $(cat "$TMP/daemon.log")"
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
	echo "usage: run.sh file|battery|container|unit" >&2
	exit 2
	;;
esac
