#!/bin/sh
# Smoke test of timehands-bench (ctest "bench_smoke"): a very short run must
# print every table and write JSON of the documented shape. It asserts no
# timing: this is a benchmark, its figures are not test results.
#   bench/smoke.sh BENCH_BINARY [PRELOAD]
set -eu
bench=$1
here=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null 2>&1 || { echo "no python3: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect=
if [ -n "${2:-}" ] && [ -f "$2" ]; then
	set -- --preload "$2"
	expect=timehands-preload
else
	set -- --no-children
fi
"$bench" --quick --rounds 1 --loop-calls 20000 --calls 20000 --threads 1,2,3 --no-daemon \
	--guarantee-seconds 0.2 --stream-reads 20000 \
	--json "$tmp/out.json" "$@" >"$tmp/out.txt"
for section in "cpu " "Per-call cost" "Scalability" "Guarantees" "Performance targets"; do
	grep -q "$section" "$tmp/out.txt" || { echo "no '$section' in the output"; cat "$tmp/out.txt"; exit 1; }
done
# shellcheck disable=SC2086 # expect is empty or one word
python3 "$here/report.py" validate "$tmp/out.json" $expect
# the README's table and the machine's full report (bench/update-readme.sh)
printf '# t\n\n<!-- bench:begin -->\nold\n<!-- bench:end -->\n' >"$tmp/README.md"
python3 "$here/report.py" readme "$tmp/out.json" "$tmp/README.md" "$tmp/doc" >/dev/null
set -- "$tmp"/doc/results-*.md
[ -f "$1" ] || { echo "no doc/results-MACHINE.md written"; exit 1; }
grep -q "results-" "$tmp/README.md" && ! grep -q '^old$' "$tmp/README.md" ||
	{ echo "README section not replaced"; cat "$tmp/README.md"; exit 1; }
