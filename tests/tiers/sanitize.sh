#!/usr/bin/env bash
# make test-sanitize: the default test suite under AddressSanitizer +
# UndefinedBehaviorSanitizer, then under ThreadSanitizer, each in its own
# build directory (build-asan, build-tsan). Any report fails the test that
# produced it (-fno-sanitize-recover=all, halt_on_error).
#
#   SANITIZERS="tsan" make test-sanitize   (only one of asan, tsan)
#   SANITIZE_CC=clang make test-sanitize   (default: gcc)
#
# GCC by default: it links its sanitizer runtime into shared objects too, so
# libtimehands.so and the LD_PRELOAD interposer (linked with --no-undefined)
# build and load unchanged; clang leaves the runtime symbols of a shared
# object undefined. Neither ThreadSanitizer models atomic_thread_fence (GCC
# says so with -Wtsan, silenced here): harmless for timehands, whose every
# field shared under a fence-based protocol is itself an atomic, so no
# report can hinge on a fence.
set -euo pipefail
. "$(dirname "$0")/common.sh"
cd "$TH_ROOT"

CC=${SANITIZE_CC:-gcc}
case "$CC" in
clang*) CXX=${SANITIZE_CXX:-clang++} ;;
*) CXX=${SANITIZE_CXX:-g++} ;;
esac
need cmake ctest "$CC" "$CXX"

# verify_asan_link_order=0: tests that load the instrumented library into a
# program built without ASan (the pkg-config consumer, LD_PRELOAD into system
# programs) get the runtime as a dependency of the library, not first.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:verify_asan_link_order=0:detect_stack_use_after_return=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:report_signal_unsafe=1}

# ThreadSanitizer runtimes of this generation cannot map their shadow under
# the larger mmap randomisation of recent kernels ("unexpected memory
# mapping"): run the tests without address randomisation there.
tsan_runner() {
	local probe=$1
	if "$probe" >/dev/null 2>&1; then
		echo ""
	elif setarch "$(uname -m)" -R "$probe" >/dev/null 2>&1; then
		echo "setarch $(uname -m) -R"
	else
		"$probe" || true
		die "ThreadSanitizer does not start on this machine"
	fi
}

run_variant() {
	local name=$1 flags=$2 exclude=$3
	local dir=${TH_TIER_PREFIX}$name t0
	t0=$(now_s)
	local cflags=""
	case "$name/$CC" in
	tsan/gcc* | tsan/*-gcc*) cflags=-Wno-tsan ;;
	esac
	tier_log "$name: -DTH_SANITIZE=$flags with $CC"
	tier_build "$dir" -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTH_SANITIZE="$flags" \
		-DCMAKE_C_FLAGS="$cflags" -DCMAKE_CXX_FLAGS="$cflags"
	local prefix=""
	if [ "$name" = tsan ]; then
		printf 'int main(void){return 0;}\n' >"$dir/tsan-probe.c"
		"$CC" -fsanitize=thread "$dir/tsan-probe.c" -o "$dir/tsan-probe"
		prefix=$(tsan_runner "$dir/tsan-probe")
		[ -n "$prefix" ] && tier_log "$name: running the tests under '$prefix'"
	fi
	(cd "$dir" && $prefix ctest --output-on-failure -j "$JOBS" -LE "$exclude") ||
		die "$name: tests failed"
	tier_log "$name: passed in $(($(now_s) - t0)) s"
}

for s in ${SANITIZERS:-asan tsan}; do
	case $s in
	asan) run_variant asan address,undefined '^(long|no-asan|no-sanitize)$' ;;
	tsan) run_variant tsan thread '^(long|no-tsan|no-sanitize)$' ;;
	*) die "unknown sanitizer '$s' (asan, tsan)" ;;
	esac
done
