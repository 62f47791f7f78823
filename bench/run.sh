#!/usr/bin/env bash
# make bench: run timehands-bench from a build directory, check its vDSO
# figure against an independent measurement, plot, and write the results
# report (doc/results-MACHINE.md) and the README's short table.
#
#   bench/run.sh [BUILD_DIR] [timehands-bench options...]
#   make bench [BENCH_ARGS="--quick --threads 1,2,4,8,16"]
#
# Writes bench/results/latest.json (and scaling.png, percall.png when
# gnuplot is installed).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
[ $# -gt 0 ] && shift
build=$(cd "$build" 2>/dev/null && pwd) || { echo "bench/run.sh: no build directory ${1:-build}; run make first" >&2; exit 1; }
bench=$build/bench/timehands-bench
if [ ! -x "$bench" ]; then
	echo "bench/run.sh: $bench is not built; run make first" >&2
	exit 1
fi
results=$here/results
mkdir -p "$results"
json=$results/latest.json

# shellcheck disable=SC2086 # BENCH_ARGS is a list of options
"$bench" --json "$json" ${BENCH_ARGS:-} "$@"

if ! command -v python3 >/dev/null 2>&1; then
	echo "bench/run.sh: python3 not found: no independent check, plot or README section" >&2
	exit 0
fi
report() { python3 "$here/report.py" "$@"; }

# --- An independent measurement of vDSO clock_gettime(CLOCK_MONOTONIC):
# another program, no shared code, timed from outside: (t(N) - t(0)) / N.
loop=$build/bench/timehands-bench-vdsoloop
# many short runs: on a busy machine some land in quiet moments
n=5000000 runs=15
case " ${BENCH_ARGS:-} $* " in *" --quick "*) runs=8 ;; esac
if [ -x "$loop" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	if command -v hyperfine >/dev/null 2>&1; then
		tool=hyperfine
		hyperfine -N --style none --warmup 2 --runs "$runs" --export-json "$tmp/h.json" \
			"$loop $n" "$loop 0" >/dev/null 2>&1 || tool=
		[ -n "$tool" ] && report independent --hyperfine "$tmp/h.json" --calls "$n" --json "$json"
	else
		tool=
	fi
	if [ -z "$tool" ]; then
		# no hyperfine: the shell's clock around five runs of each
		for arg in "$n" 0; do
			for _ in $(seq "$runs"); do
				s=$(date +%s%N)
				"$loop" "$arg"
				e=$(date +%s%N)
				echo $((e - s))
			done >"$tmp/t$arg"
		done
		report independent --times "$tmp/t$n" --times0 "$tmp/t0" --calls "$n" --json "$json"
	fi
fi

# --- Plot.
if command -v gnuplot >/dev/null 2>&1; then
	report plot-data "$json" "$results"
	if gnuplot -e "dir='$results'" "$here/plot.gp"; then
		echo "plots: $results/scaling.png $results/percall.png"
	else
		echo "bench/run.sh: gnuplot failed; no plot" >&2
	fi
	rm -f "$results/scaling.dat" "$results/percall.dat" "$results/plot.vars"
else
	echo "no plot: gnuplot is not installed (Debian/Ubuntu: apt-get install gnuplot-nox)"
fi

# --- Results report and the README's table.
"$here/update-readme.sh" "$json"
