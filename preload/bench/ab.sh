#!/bin/sh
# Through the preload vs without it, interleaved A B C A B C ... in separate
# processes: per-call cost of clock_gettime(MONOTONIC/REALTIME),
# gettimeofday, time, MONOTONIC_COARSE; medians and ratios; then the
# time()/gettimeofday() incoherence count. A benchmark, not a test.
#
#   preload/bench/ab.sh BUILD_DIR [ROUNDS]
set -eu
BUILD=${1:-build}
ROUNDS=${2:-9}
AB=$BUILD/preload/timehands-preload-ab
TH=$BUILD/tools/timehands
[ -x "$AB" ] && [ -x "$TH" ] || { echo "build first: $AB, $TH" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs," \
	"clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)," \
	"Linux $(uname -r), $(ldd --version | head -1 | sed 's/.*) //;s/^/glibc /')"
i=0
while [ $i -lt "$ROUNDS" ]; do
	"$AB" >>"$out/libc"
	"$TH" run "$AB" >>"$out/preload"
	"$TH" run --relaxed "$AB" >>"$out/relaxed"
	i=$((i + 1))
done

# median of key over the lines of a file
med() {
	tr ' ' '\n' <"$2" | sed -n "s/^$1=//p" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

printf '%-18s %10s %10s %10s %8s %8s\n' "per call (ns)" libc preload relaxed ratio relaxed
for k in monotonic realtime gettimeofday time monotonic_coarse; do
	a=$(med $k "$out/libc") b=$(med $k "$out/preload") c=$(med $k "$out/relaxed")
	printf '%-18s %10s %10s %10s %8s %8s\n' "$k" "$a" "$b" "$c" \
		"$(echo "$b $a" | awk '{printf "%.2f", $1/$2}')" "$(echo "$c $a" | awk '{printf "%.2f", $1/$2}')"
done
printf '%-18s %10s\n' "lfence;rdtsc" "$(med floor "$out/libc")"
printf '%-18s %10s\n' "rdtsc" "$(med floor_relaxed "$out/libc")"
echo "($ROUNDS interleaved processes each, median of their 7-round medians)"
echo "time() behind gettimeofday(), 3 s of pairs:"
echo "  libc:    $("$AB" coherence 3)"
echo "  preload: $("$TH" run "$AB" coherence 3)"
