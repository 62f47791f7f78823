#!/usr/bin/env bash
# make fuzz: every libFuzzer target of the tree (tests/fuzz, and the shared
# page validator's in tests/daemon) for FUZZ_SECONDS each (default 60),
# built by clang in build-fuzz. New inputs are kept in build-fuzz/corpus/<target>
# (seeded from the source tree's corpus/<target> directories), crashes in
# build-fuzz/artifacts/.
#
#   FUZZ_SECONDS=600 make fuzz       longer, on demand
#   FUZZ_TARGETS="fuzz_env" make fuzz
set -euo pipefail
. "$(dirname "$0")/common.sh"
cd "$TH_ROOT"

SECONDS_EACH=${FUZZ_SECONDS:-60}
CC=${FUZZ_CC:-clang}
CXX=${FUZZ_CXX:-clang++}
need cmake "$CC" "$CXX"

dir=${TH_TIER_PREFIX}fuzz
t0=$(now_s)
mkdir -p "$dir"
cmake -S "$TH_ROOT" -B "$dir" -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
	${TH_TIER_CMAKE_ARGS:-} >"$dir/configure.log" 2>&1 || {
	cat "$dir/configure.log"
	die "configure $dir"
}
grep -q "TH_HAVE_LIBFUZZER:INTERNAL=1" "$dir/CMakeCache.txt" ||
	die "$CC cannot link -fsanitize=fuzzer (libclang-rt-14-dev)"

# Only the fuzz targets are built here: the clang build of the whole tree is
# another stage's business.
mapfile -t targets < <(cmake --build "$dir" --target help | sed -n 's/^\.\.\. \(fuzz_[A-Za-z0-9_]*\).*/\1/p' | sort)
if [ -n "${FUZZ_TARGETS:-}" ]; then
	read -r -a targets <<<"$FUZZ_TARGETS"
fi
[ ${#targets[@]} -gt 0 ] || die "no fuzz target"
cmake --build "$dir" -j "$JOBS" --target "${targets[@]}" || die "build"

mkdir -p "$dir/artifacts"
failed=()
for t in "${targets[@]}"; do
	exe=$(find "$dir" -type f -perm -u+x -name "$t" | head -n 1)
	[ -n "$exe" ] || die "$t was not built"
	work="$dir/corpus/$t"
	mkdir -p "$work"
	seeds=()
	for s in tests/*/corpus/"$t"; do
		[ -d "$s" ] && seeds+=("$s")
	done
	opts=(-max_total_time="$SECONDS_EACH" -print_final_stats=1 -artifact_prefix="$dir/artifacts/$t-")
	for d in tests/*/"${t#fuzz_}".dict; do
		[ -f "$d" ] && opts+=(-dict="$d")
	done
	tier_log "$t: $SECONDS_EACH s"
	if ! "$exe" "${opts[@]}" "$work" "${seeds[@]}" >"$dir/$t.log" 2>&1; then
		tail -n 60 "$dir/$t.log"
		failed+=("$t")
	else
		grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$dir/$t.log" | sed "s/^/[fuzz] $t /" || true
		tier_log "$t: $(ls "$work" | wc -l) inputs in the corpus"
	fi
done
[ ${#failed[@]} -eq 0 ] || die "crashes in: ${failed[*]} (inputs in $dir/artifacts/)"
tier_log "passed in $(($(now_s) - t0)) s"
