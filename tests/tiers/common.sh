# Shared by the test tiers (sourced, not run). Each tier builds the tree in its
# own directory, named $TH_TIER_PREFIX<tier> (default build-<tier>), and runs
# CTest there.
#
# Labels a test can carry to opt out of a tier (set_tests_properties LABELS):
#   long         only in `make test-long`
#   no-asan      not under AddressSanitizer/UndefinedBehaviorSanitizer
#   no-tsan      not under ThreadSanitizer
#   no-sanitize  under neither sanitizer
#   no-cross     not in the aarch64/qemu-user tier (tests whose command is a
#                host script, not a target binary, are skipped there anyway)

TH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TH_TIER_PREFIX=${TH_TIER_PREFIX:-build-}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

tier_log() {
	printf '[%s] %s\n' "$(basename "$0" .sh)" "$*"
}

die() {
	tier_log "FAILED: $*" >&2
	exit 1
}

need() {
	for tool in "$@"; do
		command -v "$tool" >/dev/null 2>&1 || die "'$tool' is not installed (see .ci/run for the package list)"
	done
}

# TH_TIER_CMAKE_ARGS adds configure arguments to every tier build.
#
# tier_build DIR [cmake args...]: configure (again) and build everything.
tier_build() {
	local dir=$1
	shift
	mkdir -p "$dir"
	# shellcheck disable=SC2086 # extra arguments are words
	cmake -S "$TH_ROOT" -B "$dir" "$@" ${TH_TIER_CMAKE_ARGS:-} >"$dir/configure.log" 2>&1 || {
		cat "$dir/configure.log"
		die "configure $dir"
	}
	cmake --build "$dir" -j "$JOBS" || die "build $dir"
}

# Seconds since the epoch, for stage timings.
now_s() {
	date +%s
}
