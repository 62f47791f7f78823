#!/usr/bin/env bash
# make test-faults: the real-kernel fault tier. As root, changes the kernel's
# clock the way time daemons and operators do (adjtimex frequency, tick and PLL
# slews, ADJ_SETOFFSET and clock_settime steps of 100 ms, steps taken back
# within 2 ms, clocksource switches; every change undone, every step paired)
# while readers check G1-G5
# on every clock id (tests/faults/faults.c): through the library (also with
# the counter off) and through the preload under a program that reads libc's
# clocks, each without and with
# a timehandsd of its own (shared mode where a process uses its page; where
# the records are the kernel's own line, processes do not, and say why).
#
# Runs alone: it moves the clock under everything else on the machine. Without
# root, or where the kernel refuses adjtimex, it says why and exits 0.
#   FAULTS="freq step" make test-faults   (a subset; default: all)
set -euo pipefail
source "$(dirname "$0")/common.sh"

if [ "$(id -u)" -ne 0 ]; then
	tier_log "SKIP: changing the kernel's clock needs root (CAP_SYS_TIME)"
	exit 0
fi
need cmake
dir=$TH_ROOT/${TH_TIER_PREFIX}faults
tier_build "$dir"
f=$dir/tests/faults/timehands-faults
fl=$dir/tests/faults/timehands-faults-libc
cli=$dir/tools/timehands
preload=$dir/preload/libtimehands-preload.so
read -r -a scenarios <<<"${FAULTS:-all}"

# Refused (a container without CAP_SYS_TIME): the program says so, exit 77.
rc=0
TIMEHANDS_PAGE=none "$f" --probe || rc=$?
[ $rc -ne 77 ] || exit 0
[ $rc -eq 0 ] || die "the probe failed"

tmp=$(mktemp -d)
daemon=
cleanup() {
	[ -z "$daemon" ] || kill "$daemon" 2>/dev/null || true
	[ -z "$daemon" ] || wait "$daemon" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

failed=()
failed_lines=()
run() { # name, command...
	local name=$1
	shift
	tier_log "$name"
	local rc try
	for try in 1 2 3; do
		set +e
		timeout -s TERM 600 "$@" 2>&1 | tee "$tmp/run.log"
		rc=${PIPESTATUS[0]}
		set -e
		# 75: the daemon did not answer the first reading within its
		# millisecond (the process stays local for good): a new process
		[ "$rc" -eq 75 ] && [ "$try" -lt 3 ] || break
		tier_log "$name: not joined at start (run $try of 3): again in a new process"
	done
	if [ "$rc" -ne 0 ]; then
		failed+=("$name")
		# kept for the summary, which is what the end of a long log shows
		failed_lines+=("$name (exit $rc):")
		while IFS= read -r l; do
			failed_lines+=("$l")
		done < <(grep -E 'FAIL|AGAIN|first:|reason now:' "$tmp/run.log" || true)
	fi
}

run "library, no daemon" env TIMEHANDS_PAGE=none "$f" "${scenarios[@]}"
# A process that does not read the counter (TIMEHANDS_COUNTER=off; where the
# counter is refused, every process): the kernel's own fine clocks, by system
# call where the vDSO makes one, so not "at most 1 % from the kernel"; its
# coarse clocks the kernel's, from its data page.
run "library, counter off" env TIMEHANDS_PAGE=none TIMEHANDS_COUNTER=off "$f" --expect kernel "${scenarios[@]}"
run "preload, no daemon" "$cli" run --preload "$preload" --page none -- "$fl" "${scenarios[@]}"
# timehands' own line (where the kernel reads no counter itself: HPET, Xen,
# kvm-clock without its stable bit; TIMEHANDS_LINE=own elsewhere), tied to
# the kernel's updates: the steps, which it follows at once. The kernel's
# rate changes it follows only by measuring them (doc/limits.md): those
# scenarios are not run for it.
own=()
for sc in "${scenarios[@]}"; do
	case "$sc" in
	all) own+=(setoffset step steppair) ;;
	setoffset | step | steppair) own+=("$sc") ;;
	esac
done
if [ ${#own[@]} -gt 0 ]; then
	# Started after a clocksource switch, a process may still serve the
	# kernel's clock while its line's first samples are taken: the
	# scenarios begin once it reads its own line (bounded wait, as for the
	# daemon's page), so that the mode each one ends in is compared with
	# the settled one, not with the start's.
	run "library, timehands' own line" env TIMEHANDS_PAGE=none TIMEHANDS_LINE=own "$f" --expect local "${own[@]}"
fi

# A daemon of its own for each shared run: the state one run's changes left
# in a daemon is not the next run's starting point.
start_daemon() {
	rm -f "$tmp/page"
	"$dir/daemon/timehandsd" --page "$tmp/page" --foreground >"$tmp/daemon.log" 2>&1 &
	daemon=$!
	for _ in $(seq 100); do
		[ -e "$tmp/page" ] && break
		sleep 0.05
	done
	if [ ! -e "$tmp/page" ]; then
		cat "$tmp/daemon.log" >&2
		die "timehandsd did not publish $tmp/page"
	fi
	# shared where the daemon publishes counter lines this process may
	# read; where it does not, the readers run in the mode they get
	expect=()
	sleep 1
	if TIMEHANDS_PAGE=$tmp/page "$cli" status | grep -q '^mode: shared'; then
		expect=(--expect shared)
	else
		local st
		st=$(TIMEHANDS_PAGE=$tmp/page "$cli" status)
		if grep -q '^line: kernel' <<<"$st"; then
			tier_log "no shared mode here: processes read the kernel's own line ($(grep '^line:' <<<"$st")), not the page; the runs below are local"
		else
			tier_log "no shared mode here: $(grep -E '^(mode|line|reason):' <<<"$st" | tr '\n' ' ')"
		fi
	fi
}
stop_daemon() {
	kill "$daemon"
	wait "$daemon" 2>/dev/null || true
	daemon=
	tier_log "timehandsd's log (the end):"
	tail -n 5 "$tmp/daemon.log" | sed 's/^/    /'
}

start_daemon
run "library, with timehandsd" env TIMEHANDS_PAGE="$tmp/page" "$f" "${expect[@]}" "${scenarios[@]}"
stop_daemon
# timehands' own line from the daemon's page (shared mode where the kernel
# reads no counter itself): the page's records are tied to the kernel's
# updates, so the steps are followed before the daemon republishes.
if [ ${#own[@]} -gt 0 ]; then
	start_daemon
	own_expect=()
	if TIMEHANDS_PAGE=$tmp/page TIMEHANDS_LINE=own "$cli" status | grep -q '^mode: shared'; then
		own_expect=(--expect shared)
	fi
	run "library, timehands' own line, with timehandsd" env TIMEHANDS_PAGE="$tmp/page" TIMEHANDS_LINE=own "$f" "${own_expect[@]}" "${own[@]}"
	stop_daemon
fi
start_daemon
run "preload, with timehandsd" "$cli" run --preload "$preload" --page "$tmp/page" -- "$fl" "${expect[@]}" "${scenarios[@]}"
stop_daemon

# The other clocksource the kernel's line is built for, where the machine has
# it: the library's scenarios once more with it as the base (kvm-clock's
# pvclock line on a tsc machine, the TSC's line on a kvm-clock one).
cs=/sys/devices/system/clocksource/clocksource0
orig_cs=$(cat "$cs/current_clocksource" 2>/dev/null || true)
for other in tsc kvm-clock; do
	[ "$other" != "$orig_cs" ] || continue
	grep -qw -- "$other" "$cs/available_clocksource" 2>/dev/null || continue
	restore_cs() { echo "$orig_cs" >"$cs/current_clocksource" 2>/dev/null || true; }
	trap 'restore_cs; cleanup' EXIT
	if echo "$other" >"$cs/current_clocksource" 2>/dev/null; then
		sleep 0.5
		run "library, no daemon, on $other" env TIMEHANDS_PAGE=none "$f" "${scenarios[@]}"
	else
		tier_log "the kernel refused clocksource $other: not run on it"
	fi
	restore_cs
	trap cleanup EXIT
done

if [ ${#failed[@]} -gt 0 ]; then
	tier_log "what failed:"
	printf '    %s\n' "${failed_lines[@]}"
	die "failed: ${failed[*]}"
fi
tier_log "ok"
