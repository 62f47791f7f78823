#!/bin/sh
# Compatibility tests of the preload and the CLI; one CTest per argument.
# Environment (set by CMakeLists.txt): TH_CLI, TH_PRELOAD, TH_PRELOAD_COUNT,
# TH_COMPAT_BIN, TH_BUILD, TH_JEMALLOC, TH_ASAN.
# Exit 0: pass, 1: fail, 77: skipped (a facility this machine cannot have).
set -u
B=$TH_COMPAT_BIN
TMP=$(mktemp -d "${TMPDIR:-/tmp}/th-compat.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# Run a command under `timehands run` with the preload expected.
th() {
	TH_COMPAT_PRELOAD=1 "$TH_CLI" run "$@"
}

# The system's python3 where there is one (a version manager's shim in PATH
# would add its own exec chain and seconds of start-up).
if [ -x /usr/bin/python3 ]; then PY=/usr/bin/python3; else PY=python3; fi

# A Debian package this test needs and the machine lacks: SKIP, with the
# reason (make test installs them as root; tests/packages.txt).
skip_without() {
	echo "SKIP: $1 is needed (Debian package: $2)"
	exit 77
}

need() {
	command -v "$1" >/dev/null 2>&1 || skip_without "$1" "$2"
}

# Every libc symbol the preload exports and a program links to binds to it.
bindings_of() { # log file, program name, symbols...
	log=$1 prog=$2
	shift 2
	for s in "$@"; do
		grep -q "binding file [^ ]*$prog \[0\] to [^ ]*libtimehands-preload[^ ]*\.so \[0\]: normal symbol \`$s'" "$log" ||
			fail "$prog: $s not bound to the preload"
	done
}

case ${1:-} in
symbols)
	# without the preload: libc's own answers pass the same checks
	"$B/compat_symbols" --quick || fail "without the preload"
	th "$B/compat_symbols" || fail "under timehands run"
	th --preload "$TH_PRELOAD_COUNT" "$B/compat_symbols" --quick | grep -q "calls counted" ||
		fail "under the counting preload"
	th --relaxed "$B/compat_symbols" --quick || fail "TIMEHANDS_RELAXED=1"
	th --disable "$B/compat_symbols" --quick || fail "TIMEHANDS_DISABLE=1"
	th --cputime coarse "$B/compat_symbols" --quick --cputime-coarse || fail "TIMEHANDS_CPUTIME=coarse"
	th --counter off "$B/compat_symbols" --quick || fail "TIMEHANDS_COUNTER=off"
	;;
bindings)
	LD_DEBUG=bindings LD_DEBUG_OUTPUT="$TMP/b" th "$B/compat_symbols" --quick >/dev/null ||
		fail "compat_symbols under LD_DEBUG"
	cat "$TMP"/b.* >"$TMP/all"
	bindings_of "$TMP/all" compat_symbols clock_gettime clock_getres gettimeofday time timespec_get \
		timespec_getres times clock
	need date coreutils
	LD_DEBUG=bindings LD_DEBUG_OUTPUT="$TMP/d" "$TH_CLI" run date >/dev/null || fail "date under LD_DEBUG"
	cat "$TMP"/d.* >"$TMP/dall"
	bindings_of "$TMP/dall" date clock_gettime
	# and nothing of ours is bound to libc's copy instead
	if grep -E "binding file [^ ]*(compat_symbols|date) \[0\] to [^ ]*libc\.so[^ ]* \[0\]: normal symbol \`(clock_gettime|gettimeofday|time|clock_getres|timespec_get|times|clock)'" "$TMP/all" "$TMP/dall"; then
		fail "a clock symbol bound to libc"
	fi
	;;
date)
	need date coreutils
	a=$(date +%s) b=$(th date +%s) c=$(date +%s)
	[ "$a" -le "$b" ] && [ "$b" -le "$c" ] || fail "date under the preload: $a <= $b <= $c does not hold"
	[ "$(th date -u -d @86400 +%Y-%m-%d)" = 1970-01-02 ] || fail "date formatting"
	th date >/dev/null 2>"$TMP/err" || fail "date failed"
	[ -s "$TMP/err" ] && fail "date wrote to stderr: $(cat "$TMP/err")"
	# nanoseconds, from clock_gettime(CLOCK_REALTIME)
	a=$(date +%s%N) b=$(th date +%s%N) c=$(date +%s%N)
	[ "$a" -le "$b" ] && [ "$b" -le "$c" ] || fail "date +%s%N: $a <= $b <= $c does not hold"
	;;
python)
	need "$PY" python3
	cat >"$TMP/t.py" <<'EOF'
import ctypes, os, platform, sys, time
nr = {"x86_64": 228, "aarch64": 113}.get(platform.machine())
libc = ctypes.CDLL(None, use_errno=True)
class ts(ctypes.Structure):
    _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
def sysclock(cid):
    t = ts()
    libc.syscall(ctypes.c_long(nr), ctypes.c_int(cid), ctypes.byref(t))
    return t.s * 10**9 + t.ns
maps = open("/proc/self/maps").read()
assert ("libtimehands-preload" in maps) == (os.environ.get("TH_COMPAT_PRELOAD") == "1"), "preload mapping"
bad = 0
last = 0
for i in range(20000):
    k1 = sysclock(time.CLOCK_REALTIME) if nr else 0
    v = time.time_ns()
    k2 = sysclock(time.CLOCK_REALTIME) if nr else v
    if nr and not (k1 - 1000 <= v <= k2 + 1000):
        bad += 1
    m = time.monotonic_ns()
    if m < last:
        bad += 1
    last = m
    if nr and i % 10 == 0:
        k1 = sysclock(time.CLOCK_MONOTONIC)
        m = time.monotonic_ns()
        k2 = sysclock(time.CLOCK_MONOTONIC)
        if not (k1 - 1000 <= m <= k2 + 1000):
            bad += 1
    t = time.time()
    if int(time.time()) < int(t):
        bad += 1
assert bad == 0, "%d bad readings" % bad
print("python ok", time.get_clock_info("monotonic"))
EOF
	"$PY" "$TMP/t.py" || fail "python3 without the preload"
	th "$PY" "$TMP/t.py" || fail "python3 under timehands run"
	th --relaxed "$PY" "$TMP/t.py" || fail "python3 relaxed"
	# through PATH too (a version manager's shim is an exec chain of its own)
	th python3 -c 'import time; assert time.time() > 0' || fail "python3 from PATH"
	;;
sh)
	out=$(th sh -c '
		date +%s%N | cat | wc -c
		grep -c libtimehands-preload /proc/$$/maps >/dev/null && echo mapped
		"$0/compat_exec" 0 | tr a-z A-Z
		for i in 1 2 3; do date +%s; done | sort -n | uniq | wc -l
		(sleep 0.05; date +%s) & wait
	' "$B") || fail "sh pipeline failed: $out"
	echo "$out" | grep -q '^20$' || fail "date +%s%N through a pipe: $out"
	echo "$out" | grep -q '^mapped$' || fail "the shell did not load the preload: $out"
	echo "$out" | grep -q '^COMPAT_EXEC: OK$' || fail "a program in the pipeline: $out"
	;;
ctor)
	th "$B/compat_ctor" || fail "library constructor under the preload"
	th --preload "$TH_PRELOAD_COUNT" "$B/compat_ctor" || fail "library constructor, counted"
	"$B/compat_ctor" || fail "library constructor without the preload"
	# The constructing library preloaded next to ours, in both orders: one of
	# them runs its constructor before the preload's.
	lib=$B/libcompat_ctor_lib.so
	seen=
	for order in "$TH_PRELOAD_COUNT:$lib" "$lib:$TH_PRELOAD_COUNT"; do
		o=$(TH_COMPAT_PRELOAD=1 LD_PRELOAD=$order "$B/compat_ctor") || fail "LD_PRELOAD=$order: $o"
		seen="$seen $o"
	done
	echo "$seen" | grep -q "not run yet" || fail "no order ran a constructor before the preload's: $seen"
	;;
jemalloc)
	# installed after the build was configured: ask the loader's cache
	[ -r "${TH_JEMALLOC:-}" ] || TH_JEMALLOC=$({ ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null |
		awk '/libjemalloc\.so\.2 /{print $NF; exit}')
	[ -n "$TH_JEMALLOC" ] && [ -r "$TH_JEMALLOC" ] || skip_without libjemalloc.so.2 libjemalloc2
	export MALLOC_CONF=background_thread:true
	# ours first (timehands run prepends), then jemalloc first
	TH_COMPAT_PRELOAD=1 LD_PRELOAD=$TH_JEMALLOC "$TH_CLI" run "$B/compat_symbols" --quick --expect-mapped libjemalloc ||
		fail "preload, jemalloc"
	TH_COMPAT_PRELOAD=1 LD_PRELOAD="$TH_JEMALLOC:$TH_PRELOAD_COUNT" "$B/compat_symbols" --quick \
		--expect-mapped libjemalloc | grep -q "calls counted" || fail "jemalloc, preload"
	TH_COMPAT_PRELOAD=1 LD_PRELOAD=$TH_JEMALLOC "$TH_CLI" run "$B/compat_fork" || fail "fork with jemalloc"
	if command -v "$PY" >/dev/null; then
		TH_COMPAT_PRELOAD=1 LD_PRELOAD="$TH_JEMALLOC" "$TH_CLI" run "$PY" -c \
			'import time; l=[bytearray(1000) for i in range(100000)]; assert time.monotonic() > 0' ||
			fail "python3 with jemalloc"
	fi
	;;
asan)
	[ -n "$TH_ASAN" ] && [ -r "$TH_ASAN" ] || { echo "no libasan for this compiler"; exit 77; }
	export ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0
	# ASan after ours: the program binds to the preload
	TH_COMPAT_PRELOAD=1 LD_PRELOAD="$TH_PRELOAD_COUNT:$TH_ASAN" "$B/compat_symbols" --quick --expect-mapped libasan |
		grep -q "calls counted" || fail "preload, asan"
	# ASan first: its interceptors wrap the clock functions and forward to
	# ours (the counting build shows every call arriving)
	export TH_COMPAT_WRAPPED=1
	TH_COMPAT_PRELOAD=1 LD_PRELOAD="$TH_ASAN:$TH_PRELOAD_COUNT" "$B/compat_symbols" --quick --expect-mapped libasan |
		grep -q "calls counted" || fail "asan, preload"
	TH_COMPAT_PRELOAD=1 LD_PRELOAD="$TH_ASAN:$TH_PRELOAD" "$B/compat_exec" 2 || fail "asan, preload: exec chain"
	TH_COMPAT_PRELOAD=1 LD_PRELOAD="$TH_ASAN:$TH_PRELOAD" "$B/compat_fork" || fail "asan, preload: fork"
	;;
fork)
	th "$B/compat_fork" || fail "fork in threads"
	th --relaxed "$B/compat_fork" || fail "fork in threads, relaxed"
	;;
exec)
	th "$B/compat_exec" 9 || fail "exec chain under the preload"
	"$B/compat_exec" 5 || fail "exec chain without the preload"
	# a child that drops the preload from its environment loses it, and back
	# a link that drops LD_PRELOAD loses the preload (the test notices)
	th env -u LD_PRELOAD "$B/compat_exec" 0 2>/dev/null && fail "LD_PRELOAD removed but the preload is still there"
	;;
signals)
	th "$B/compat_signals" || fail "signal storm"
	th --relaxed "$B/compat_signals" || fail "signal storm, relaxed"
	;;
sandbox)
	th "$B/compat_sandbox" closefds || fail "closed fds: status $?"
	th "$B/compat_sandbox" seccomp || fail "seccomp: status $? (137/159: killed for a forbidden system call)"
	th --cputime coarse "$B/compat_sandbox" seccomp || fail "seccomp, coarse CPU time"
	th --disable "$B/compat_sandbox" seccomp || fail "seccomp, disabled"
	;;
seccomp-page)
	# A page was asked for (or the daemon's socket exists) but none is
	# usable: the library must not look for it again from a read once the
	# program may have locked itself down (G9: after attach, nothing but
	# clock reads). Longer than the library's first retry backoff (1 s).
	TH_COMPAT_SANDBOX_MS=2500 th --page "$TMP/no-such-page" "$B/compat_sandbox" seccomp ||
		fail "seccomp with TIMEHANDS_PAGE set and no daemon: status $? (159: killed by the filter)"
	;;
seccomp-daemon)
	# Shared mode, then timehandsd stops while the program runs under a
	# seccomp filter: the library must leave the page and go on with its own
	# clocks without a system call beyond the clock reads (G9, G7). Its own
	# line: where the kernel's conversion can be read, the page is not used.
	export TIMEHANDS_LINE=own
	D=$TH_BUILD/daemon/timehandsd
	[ -x "$D" ] || fail "no $D (built with the tree)"
	mkdir -m 755 "$TMP/run"
	"$D" --page "$TMP/run/page" --foreground >"$TMP/daemon.log" 2>&1 &
	dpid=$!
	i=0
	until [ -S "$TMP/run/page" ]; do
		i=$((i + 1))
		[ $i -lt 100 ] || { kill $dpid; fail "timehandsd did not start: $(cat "$TMP/daemon.log")"; }
		sleep 0.1
	done
	sleep 0.3
	# a new process each time: one whose first reading found the daemon
	# slower than a millisecond (a loaded machine) stays local for good
	for i in 1 2 3 4 5; do
		mode=$(TIMEHANDS_PAGE=$TMP/run/page "$TH_CLI" status | sed -n 's/^mode: //p')
		[ "$mode" = shared ] && break
		sleep 0.2
	done
	[ "$mode" = shared ] || { kill $dpid; fail "not in shared mode with timehandsd running: $mode"; }
	(sleep 1; kill $dpid) &
	TH_COMPAT_SANDBOX_MS=3000 th --page "$TMP/run/page" "$B/compat_sandbox" seccomp
	st=$?
	wait
	[ $st -eq 0 ] || fail "seccomp, timehandsd stopped under the program: status $st (159: killed by the filter)"
	;;
noalloc)
	"$B/compat_noalloc" || fail "without the preload"
	th "$B/compat_noalloc" || fail "under the preload"
	th --relaxed "$B/compat_noalloc" || fail "relaxed"
	th --cputime coarse "$B/compat_noalloc" || fail "coarse CPU time"
	th --disable "$B/compat_noalloc" || fail "disabled"
	;;
timens)
	# In another time namespace the kernel's MONOTONIC and BOOTTIME are shifted.
	if [ "$(id -u)" -ne 0 ] || ! unshare -T --monotonic=86400 --boottime=172800 --fork true 2>/dev/null; then
		echo "no time namespaces here (needs root and Linux 5.6)"
		exit 77
	fi
	unshare -T --monotonic=86400 --boottime=172800 --fork \
		env TH_COMPAT_PRELOAD=1 "$TH_CLI" run "$B/compat_symbols" --quick || fail "time namespace"
	unshare -T --monotonic=86400 --fork env TH_COMPAT_PRELOAD=1 "$TH_CLI" run "$B/compat_fork" ||
		fail "time namespace, fork"
	;;
shm)
	# The preload never creates shared memory objects or files.
	if nm -D --undefined-only "$TH_PRELOAD" 2>/dev/null | grep -E ' (shm_open|shm_unlink|sem_open|mkstemp|memfd_create)'; then
		fail "the preload imports a shared-memory or file-creating call"
	fi
	ls -A /dev/shm >"$TMP/before" 2>/dev/null || true
	th "$B/compat_fork" >/dev/null || fail "fork"
	th "$B/compat_exec" 4 >/dev/null || fail "exec"
	th sh -c 'date; date' >/dev/null || fail "sh"
	th "$B/compat_signals" >/dev/null || fail "signals"
	ls -A /dev/shm >"$TMP/after" 2>/dev/null || true
	new=$(comm -13 "$TMP/before" "$TMP/after" | grep -i -E 'timehands|^th[._-]' || true)
	[ -z "$new" ] || fail "left in /dev/shm: $new"
	;;
cli)
	out=$("$TH_CLI" status) || fail "status failed"
	for k in mode counter frequency error clocksource preload; do
		echo "$out" | grep -q "^$k: " || fail "status has no '$k:' line: $out"
	done
	echo "$out" | grep -qE '^mode: (shared|local|kernel)$' || fail "status mode: $out"
	out=$(TIMEHANDS_DISABLE=1 "$TH_CLI" status) || fail "status (disabled)"
	echo "$out" | grep -q '^mode: kernel$' || fail "disabled: mode is not kernel: $out"
	echo "$out" | grep -q '^reason: .*TIMEHANDS_DISABLE' || fail "disabled: no reason: $out"
	need "$PY" python3
	if true; then
		"$TH_CLI" status --json | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
assert d["mode"] in ("shared", "local", "kernel"), d
for k in ("counter", "frequency", "error", "reason", "clocksource", "counters"):
    assert k in d, k
' || fail "status --json"
		"$TH_CLI" check --json >"$TMP/check.json" || fail "check --json exited $?"
		"$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("clocksource", "cost", "counter", "cpu_sync", "coherence", "verdict"):
    assert k in d, k
assert d["coherence"]["timehands_incoherent"] == 0
for c in ("CLOCK_MONOTONIC", "CLOCK_REALTIME", "time", "gettimeofday", "CLOCK_PROCESS_CPUTIME_ID"):
    assert d["cost"][c]["timehands"] > 0, c
assert d["kernel_path_probe"] == "seccomp", d["kernel_path_probe"]
for c in ("CLOCK_PROCESS_CPUTIME_ID", "CLOCK_THREAD_CPUTIME_ID"):
    assert d["cost"][c]["kernel_path"] == "syscall", c
' "$TMP/check.json" || fail "check --json content"
	fi
	"$TH_CLI" check | grep -q '^verdict: ' || fail "check has no verdict"
	# run: options map to the environment, LD_PRELOAD is prepended once
	out=$(LD_PRELOAD=$TH_PRELOAD_COUNT "$TH_CLI" run -n -r -c coarse -p none --counter off -- true)
	echo "$out" | grep -q "^LD_PRELOAD=/.*libtimehands-preload\.so:$TH_PRELOAD_COUNT\$" || fail "dry run: $out"
	for kv in TIMEHANDS_RELAXED=1 TIMEHANDS_CPUTIME=coarse TIMEHANDS_PAGE=none TIMEHANDS_COUNTER=off; do
		echo "$out" | grep -q "^$kv$" || fail "dry run lacks $kv: $out"
	done
	out=$(th "$TH_CLI" run -n true) || fail "nested run"
	[ "$(echo "$out" | grep -o libtimehands-preload | wc -l)" -eq 1 ] || fail "nested run listed the preload twice: $out"
	# exec: the exit status and the pid are the command's
	th sh -c 'exit 7'
	[ $? -eq 7 ] || fail "exit status not passed through"
	pids=$(sh -c 'echo $$; exec "$0" run sh -c "echo \$\$"' "$TH_CLI")
	[ "$(echo "$pids" | uniq | wc -l)" -eq 1 ] || fail "run did not replace itself: $pids"
	"$TH_CLI" run /nonexistent/cmd 2>/dev/null
	[ $? -eq 127 ] || fail "missing command: status not 127"
	"$TH_CLI" run --cputime sideways true 2>/dev/null
	[ $? -eq 2 ] || fail "bad option value: status not 2"
	"$TH_CLI" run 2>/dev/null
	[ $? -eq 2 ] || fail "no command: status not 2"
	# a bad value in the environment: one warning line for the whole run,
	# also when the program execs others
	TIMEHANDS_RELAXED=banana TIMEHANDS_LINE=sideways TH_COMPAT_PRELOAD=1 "$TH_CLI" run sh -c '"$0/compat_exec" 3' "$B" \
		>/dev/null 2>"$TMP/err" || fail "bad env value broke the run"
	[ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q 'TIMEHANDS_RELAXED=banana; TIMEHANDS_LINE=sideways' "$TMP/err" ||
		fail "expected one warning line: $(cat "$TMP/err")"
	# the preload alone: one line per process, the safe default
	TIMEHANDS_CPUTIME=bogus TH_COMPAT_PRELOAD=1 LD_PRELOAD=$TH_PRELOAD "$B/compat_symbols" --quick \
		>/dev/null 2>"$TMP/err" || fail "bad env value under the bare preload"
	[ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q 'TIMEHANDS_CPUTIME=bogus' "$TMP/err" ||
		fail "bare preload: expected one warning line: $(cat "$TMP/err")"
	# bench: a clear error where timehands-bench is not installed
	cp "$TH_CLI" "$TMP/timehands"
	PATH=/nonexistent "$TMP/timehands" bench 2>"$TMP/err"
	[ $? -eq 127 ] && grep -q 'timehands-bench' "$TMP/err" || fail "bench without timehands-bench: $(cat "$TMP/err")"
	# ... and runs it where it is
	printf '#!/bin/sh\necho bench-ran "$@"\n' >"$TMP/timehands-bench"
	chmod +x "$TMP/timehands-bench"
	[ "$("$TMP/timehands" bench --x)" = "bench-ran --x" ] || fail "bench did not run timehands-bench"
	# a copied tool cannot find a preload: clear error, status 127
	PATH=/nonexistent "$TMP/timehands" run true 2>"$TMP/err"
	st=$?
	if [ ! -r "$(dirname "$TH_CLI")/../lib/timehands/libtimehands-preload.so" ] && [ $st -ne 0 ]; then
		[ $st -eq 127 ] && grep -q 'cannot find' "$TMP/err" || fail "no preload: $(cat "$TMP/err")"
	fi
	;;
install)
	# make install PREFIX=/usr/local DESTDIR=...: the staged tree works and its
	# tool finds its own preload.
	D=$TMP/stage
	DESTDIR=$D cmake --install "$TH_BUILD" >/dev/null || fail "cmake --install"
	prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$TH_BUILD/CMakeCache.txt")
	libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$TH_BUILD/CMakeCache.txt")
	P=$D$prefix
	[ -x "$P/bin/timehands" ] || fail "no bin/timehands"
	[ -r "$P/$libdir/timehands/libtimehands-preload.so" ] || fail "no $libdir/timehands/libtimehands-preload.so"
	[ -r "$P/share/man/man1/timehands.1" ] || fail "no man1/timehands.1"
	out=$("$P/bin/timehands" run -n true) || fail "installed run -n"
	echo "$out" | grep -q "^LD_PRELOAD=$P/$libdir/timehands/libtimehands-preload.so$" ||
		fail "the staged tool did not pick its own preload: $out"
	TH_COMPAT_PRELOAD=1 "$P/bin/timehands" run "$B/compat_exec" 2 || fail "staged tool run"
	# Where the preload lies in the loader's $LIB directory it is named
	# through $LIB (checked against the loader itself).
	libc=$(ldd "$B/compat_exec" | sed -n 's/.*libc\.so\.6 => \([^ ]*\) .*/\1/p')
	L=$(dirname "$libc" | sed -e 's|^/usr/|/|' -e 's|^/||')
	mkdir -p "$TMP/mp/$L/timehands"
	cp "$TH_PRELOAD" "$TMP/mp/$L/timehands/libtimehands-preload.so"
	out=$("$TH_CLI" run -n --preload "$TMP/mp/$L/timehands/libtimehands-preload.so" true) || fail "run -n \$LIB"
	echo "$out" | grep -qF "LD_PRELOAD=$TMP/mp/\$LIB/timehands/libtimehands-preload.so" ||
		fail "not named through \$LIB: $out"
	TH_COMPAT_PRELOAD=1 "$TH_CLI" run --preload "$TMP/mp/$L/timehands/libtimehands-preload.so" \
		"$B/compat_exec" 2 || fail "preload named through \$LIB not loaded"
	;;
*)
	echo "usage: run.sh TEST" >&2
	exit 2
	;;
esac
exit 0
