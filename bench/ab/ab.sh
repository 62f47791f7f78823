#!/bin/sh
# Two revisions of timehands, their reads timed in one process, in paired
# interleaved rounds (abpair.c): the library call, the preload (full and
# TIMEHANDS_RELAXED=1), the header's inline reads, and the library call and
# the inline reads of a process reading timehandsd's page (B's daemon, for
# this run, TIMEHANDS_LINE=own). For a change worth a fraction of a
# nanosecond on a machine whose figures move by more than that between runs.
# A benchmark, not a test.
#
#   bench/ab/ab.sh REV_A [REV_B]     REV_B: the working tree when left out
#   ROUNDS=N (default 1001), CC=... (default cc),
#   MODES="lib preload relaxed inline" (the default; also: shared)
set -eu
[ $# -ge 1 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
top=$(git rev-parse --show-toplevel)
here=$top/bench/ab
ROUNDS=${ROUNDS:-1001}
CC=${CC:-cc}
MODES=${MODES:-lib preload relaxed inline}
w=$(mktemp -d /tmp/timehands-ab.XXXXXX)
dpid=
trap '[ -z "$dpid" ] || kill "$dpid" 2>/dev/null; rm -rf "$w"' EXIT

# a revision's sources into $w/$1: a commit, or the working tree (tracked
# and untracked files that git does not ignore)
fetch() {
	mkdir -p "$w/$1"
	if [ -n "$2" ]; then
		git -C "$top" archive "$2" | tar -x -C "$w/$1"
	else
		(cd "$top" && git ls-files -z -c -o --exclude-standard | xargs -0 tar -c -f -) | tar -x -C "$w/$1"
	fi
	cmake -S "$w/$1" -B "$w/$1/b" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build "$w/$1/b" -j "$(nproc)" --target timehands timehands_static libtimehands-preload timehandsd >/dev/null
}
fetch a "$1"
fetch b "${2:-}"

echo "A: $1 ($(git -C "$top" rev-parse --short "$1"))   B: ${2:-the working tree}"
echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')" \
	"(family $(grep -m1 'cpu family' /proc/cpuinfo | sed 's/.*: //'), model $(grep -m1 '^model' /proc/cpuinfo | sed 's/.*: //'))," \
	"$(nproc) CPUs, clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource), Linux $(uname -r)"
"$CC" -O2 -I "$top/include" "$here/abpair.c" -ldl -o "$w/abpair"
for m in $MODES; do
	case $m in
	lib) echo "== library call (th_clock_gettime, th_gettimeofday)"
		"$w/abpair" lib "$w/a/b/libtimehands.so" "$w/b/b/libtimehands.so" "$ROUNDS" ;;
	preload) echo "== preload (clock_gettime, gettimeofday)"
		"$w/abpair" preload "$w/a/b/preload/libtimehands-preload.so" "$w/b/b/preload/libtimehands-preload.so" "$ROUNDS" ;;
	relaxed) echo "== preload, TIMEHANDS_RELAXED=1 (MONOTONIC, REALTIME and gettimeofday relaxed)"
		TIMEHANDS_RELAXED=1 "$w/abpair" preload "$w/a/b/preload/libtimehands-preload.so" \
			"$w/b/b/preload/libtimehands-preload.so" "$ROUNDS" ;;
	inline) echo "== inline (<timehands.h> of each, compiled by $CC, with B's library)"
		"$CC" -O2 -DAB_PFX=a_ -I "$w/a/include" -c "$here/abloops.c" -o "$w/la.o"
		"$CC" -O2 -DAB_PFX=b_ -I "$w/b/include" -c "$here/abloops.c" -o "$w/lb.o"
		"$CC" -O2 -DAB_INLINE -I "$top/include" "$here/abpair.c" "$w/la.o" "$w/lb.o" "$w/b/b/libtimehands.a" \
			-ldl -lm -lpthread -o "$w/abinline"
		"$w/abinline" inline "$ROUNDS" ;;
	shared) echo "== timehandsd's page, TIMEHANDS_LINE=own (library call, then inline)"
		"$w/b/b/daemon/timehandsd" --page "$w/page" --foreground >"$w/daemon.log" 2>&1 &
		dpid=$!
		i=0
		while [ ! -S "$w/page" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
		[ -S "$w/page" ] || { echo "ab.sh: timehandsd did not publish:" >&2; cat "$w/daemon.log" >&2; exit 1; }
		TIMEHANDS_PAGE=$w/page TIMEHANDS_LINE=own \
			"$w/abpair" lib "$w/a/b/libtimehands.so" "$w/b/b/libtimehands.so" "$ROUNDS"
		if [ -x "$w/abinline" ]; then
			TIMEHANDS_PAGE=$w/page TIMEHANDS_LINE=own "$w/abinline" inline "$ROUNDS"
		fi
		kill "$dpid"; wait "$dpid" 2>/dev/null || true; dpid= ;;
	*) echo "ab.sh: unknown mode $m" >&2; exit 2 ;;
	esac
done
