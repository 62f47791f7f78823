#!/usr/bin/env bash
# make test-aarch64: cross-build for arm64 with Debian's toolchain
# (cmake/aarch64-linux-gnu.cmake) and run the unit, simulation and stress
# tests under qemu-aarch64, reading the cntvct_el0 counter.
#
# The trust policy refuses the counter unless the kernel's clocksource is
# arch_sys_counter; under qemu-user the host's /sys names the host's
# clocksource, so the tier forces the counter (TIMEHANDS_COUNTER=force) and
# checks with th_status() that it is in use.
#
# qemu-user runs arm64 code with the host's x86 (TSO) memory ordering: this
# tier executes the ARM barriers and the counter read, it cannot show that one
# is missing (the argument for each barrier is written next to it, in
# src/counter/counter.h and src/core/record.h).
set -euo pipefail
. "$(dirname "$0")/common.sh"
cd "$TH_ROOT"

TRIPLE=aarch64-linux-gnu
SYSROOT=/usr/$TRIPLE
need cmake ctest python3 "$TRIPLE-gcc" qemu-aarch64
[ -e "$SYSROOT/lib/ld-linux-aarch64.so.1" ] || die "no arm64 C library in $SYSROOT (libc6-dev-arm64-cross)"

dir=${TH_TIER_PREFIX}aarch64
t0=$(now_s)
tier_build "$dir" -DCMAKE_TOOLCHAIN_FILE="$TH_ROOT/cmake/aarch64-linux-gnu.cmake"

export TIMEHANDS_COUNTER=force
export QEMU_LD_PREFIX=$SYSROOT
# The simulation's hardware is virtual, so emulation adds little to it
# beyond time: each sweep of a single scenario runs its first 60 seeds
# here (make test runs every seed natively).
export SIM_MAX_SEEDS=60
qemu="qemu-aarch64 -L $SYSROOT"

# The counter is in use: a program linked against the cross-built library
# reports local mode on cntvct_el0 and reads sane time.
"$TRIPLE-gcc" -std=c17 -O2 -Wall -Wextra -Werror -I include -I src -I src/core -I src/counter -I src/attach \
	tests/tiers/counter_check.c "$dir/libtimehands.a" -lpthread -lm -o "$dir/counter_check"
$qemu "$dir/counter_check" || die "counter check under qemu-aarch64"

# Tests whose command is a target binary run through the emulator
# (CMAKE_CROSSCOMPILING_EMULATOR); a test whose command is a host script
# would exec arm64 binaries natively, so it is listed and skipped.
mapfile -t picked < <(cd "$dir" && ctest --show-only=json-v1 | python3 -c '
import json, re, sys
skip = re.compile(r"^(long|no-cross)$")
for t in json.load(sys.stdin)["tests"]:
    labels = []
    for p in t.get("properties", []):
        if p["name"] == "LABELS":
            labels = p["value"]
    cmd = t.get("command") or [""]
    emulated = "qemu-aarch64" in cmd[0]
    if any(skip.match(l) for l in labels):
        print("skip\t%s\tlabel" % t["name"])
    elif not emulated:
        print("skip\t%s\thost command %s" % (t["name"], cmd[0]))
    else:
        print("run\t%s\t" % t["name"])
')
names=()
for line in "${picked[@]}"; do
	IFS=$'\t' read -r what name why <<<"$line"
	if [ "$what" = run ]; then
		names+=("$name")
	else
		tier_log "skipping $name ($why)"
	fi
done
[ ${#names[@]} -gt 0 ] || die "no test to run"
regex="^($(printf '%s|' "${names[@]}" | sed 's/|$//; s/[.+]/\\&/g'))\$"
(cd "$dir" && ctest --output-on-failure -j "$JOBS" -R "$regex") || die "tests failed under qemu-aarch64"
tier_log "passed in $(($(now_s) - t0)) s"
