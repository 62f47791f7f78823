/* Helpers shared by the CPU-time tests (tests/cputime). */
#ifndef TH_TEST_CPT_H
#define TH_TEST_CPT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/times.h>
#include <time.h>
#include <unistd.h>

#include "timehands.h"

static _Atomic int cpt_failures;

#define CHECK(cond, ...)                                                                      \
	do {                                                                                  \
		if (!(cond)) {                                                                \
			if (atomic_fetch_add(&cpt_failures, 1) < 20) {                        \
				char msg_[256];                                               \
				int n_ = snprintf(msg_, sizeof msg_, "%.60s:%d: CHECK(%.120s) failed: ", \
						  __FILE__, __LINE__, #cond);                 \
				if (n_ > 0 && n_ < (int)sizeof msg_)                          \
					snprintf(msg_ + n_, sizeof msg_ - (size_t)n_, __VA_ARGS__); \
				cpt_say(msg_);                                                \
			}                                                                     \
		}                                                                             \
	} while (0)

/* write(2) only: usable in a child of a raw fork and from many threads. */
static inline void cpt_say(const char *msg)
{
	size_t n = strlen(msg);
	ssize_t w = write(2, msg, n);
	w = write(2, "\n", 1);
	(void)w;
}

static inline int cpt_done(const char *name)
{
	int f = atomic_load(&cpt_failures);
	if (f) {
		fprintf(stderr, "%s: %d check(s) failed\n", name, f);
		return 1;
	}
	printf("%s: ok\n", name);
	return 0;
}

#define NS 1000000000LL
#define MS 1000000LL

static inline int64_t cpt_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * NS + t->tv_nsec;
}

/* The kernel's values, by raw system call (never through timehands). */
static inline int64_t k_cpu(clockid_t id)
{
	struct timespec t;
	if (syscall(SYS_clock_gettime, id, &t) != 0)
		return -1;
	return cpt_ns(&t);
}

static inline long k_times(struct tms *t)
{
	return syscall(SYS_times, t);
}

/* The kernel's CLOCK_MONOTONIC_RAW: budgets for loops, not under test. */
static inline int64_t raw_ns(void)
{
	struct timespec t;
	syscall(SYS_clock_gettime, CLOCK_MONOTONIC_RAW, &t);
	return cpt_ns(&t);
}

/* timehands' values. */
static inline int64_t th_ns(clockid_t id)
{
	struct timespec t;
	if (th_clock_gettime(id, &t) != 0)
		return -1;
	return cpt_ns(&t);
}

/* The tick the caches refresh on: the resolution of the coarse ids. */
static inline int64_t cpt_tick(void)
{
	struct timespec r;
	if (th_clock_getres(TH_CLOCK_PROCESS_CPUTIME_COARSE, &r) != 0)
		return 4 * MS;
	return cpt_ns(&r);
}

/* Burn CPU: n iterations the compiler cannot drop. */
static inline void work(int n)
{
	unsigned x = 0;
	for (int c = 0; c < n; c++) {
		x += (unsigned)c;
		__asm__ volatile("" : "+r"(x));
	}
}

/* Burn CPU until timehands' MONOTONIC reaches `until`. */
static inline void spin_until(int64_t until)
{
	while (th_ns(CLOCK_MONOTONIC) < until)
		work(200);
}

static inline void spin_ns(int64_t ns)
{
	spin_until(th_ns(CLOCK_MONOTONIC) + ns);
}

/* Burn `ns` of this thread's CPU time, however busy the machine. */
static inline void spin_cpu(int64_t ns)
{
	int64_t end = k_cpu(CLOCK_THREAD_CPUTIME_ID) + ns;
	while (k_cpu(CLOCK_THREAD_CPUTIME_ID) < end)
		spin_ns(100000);
}

/* ms of CLOCKS_PER_SEC */
#define CLK_MS(x) ((clock_t)((x) * (CLOCKS_PER_SEC / 1000)))

#endif
