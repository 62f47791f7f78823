/*
 * Process CPU time: times(), clock() and the coarse CPU-time clocks, served
 * from memory (see cputime.c for the protocol and the bounds).
 *
 * Dependency order: core <- counter <- attach <- cputime. The fast paths read
 * timehands' own MONOTONIC line (attach/proc.h) to judge how old a cached
 * value is; nothing below attach knows about CPU time.
 */
#ifndef TH_CPUTIME_CPUTIME_H
#define TH_CPUTIME_CPUTIME_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/times.h>
#include <time.h>

#define TH_HIDDEN_CPU __attribute__((visibility("hidden")))

clock_t th__times(struct tms *buf) TH_HIDDEN_CPU;
clock_t th__clock(void) TH_HIDDEN_CPU;
int th__cputime_coarse(clockid_t id, struct timespec *ts) TH_HIDDEN_CPU;
int th__cputime_getres(clockid_t id, struct timespec *res) TH_HIDDEN_CPU;

/* The process-wide caches. */
enum th_cpu_which {
	TH_CPU_PROC = 0,  /* CLOCK_PROCESS_CPUTIME_ID: th_clock() and the coarse id */
	TH_CPU_TIMES = 1, /* times(): utime, stime, cutime, cstime in clock ticks */
	TH_CPU_NCACHES = 2
};
/* The process cache's values: the ns (th_clock()), and the same packed as
 * a timespec (the coarse id; cputime.c, ns_pack). The test seam's merge
 * takes the ns and packs them itself. */
enum { TH_PROC_NS = 0, TH_PROC_PK = 1 };

/*
 * Test seams (tests/cputime): the refresh try-lock of a process cache, so that
 * a test can play a refresher stalled while holding it; and the merge a
 * refresher performs, so that a test can land a stalled refresher's old
 * reading late. Both create this process's cache page if needed.
 */
_Atomic uint32_t *th__cputime_lock_word(int which) TH_HIDDEN_CPU;
void th__cputime_merge(int which, const uint64_t *vals, uint64_t stamp_ns) TH_HIDDEN_CPU;
/* Refreshes of a process cache so far: under the try-lock (at most one per
 * tick) and past a holder found stalled (stamp older than two ticks). */
void th__cputime_stats(int which, uint64_t *locked, uint64_t *stale) TH_HIDDEN_CPU;

#endif
