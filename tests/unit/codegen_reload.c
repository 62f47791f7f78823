/*
 * Callers of the header's inline reads as programs write them: the reading
 * used right after the call. codegen.sh --reload checks that none of them
 * loads the timespec (or timeval) back from memory after storing it, which
 * would put a store-to-load forward on the read's critical path (clang did
 * while *ts was the library's to write on the read's slow path).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/time.h>
#include <time.h>

#include "timehands.h"

long th_cg_monotonic(void);
long th_cg_realtime(void);
long th_cg_tai(void);
long th_cg_relaxed(void);
long th_cg_gettimeofday(void);
long th_cg_loop(long n);

long th_cg_monotonic(void)
{
	struct timespec ts;
	th_clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

long th_cg_realtime(void)
{
	struct timespec ts;
	th_clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

long th_cg_tai(void)
{
	struct timespec ts;
	th_clock_gettime(CLOCK_TAI, &ts);
	return ts.tv_nsec;
}

long th_cg_relaxed(void)
{
	struct timespec ts;
	th_clock_gettime(TH_CLOCK_REALTIME_RELAXED, &ts);
	return ts.tv_nsec;
}

long th_cg_gettimeofday(void)
{
	struct timeval tv;
	th_gettimeofday(&tv, 0);
	return tv.tv_sec * 1000000L + tv.tv_usec;
}

long th_cg_loop(long n)
{
	long a = 0;
	struct timespec ts;
	for (long i = 0; i < n; i++) {
		th_clock_gettime(CLOCK_MONOTONIC, &ts);
		a += ts.tv_nsec;
	}
	return a;
}

/* Readings stored through the caller's pointer: where the library wrote
 * the reading (the daemon's page, the first call), the header copies it
 * word by word, not as one 16-byte load the library's stores cannot
 * forward to (codegen.sh without --reload). */
int th_cg_into(struct timespec *ts);
int th_cg_realtime_into(struct timespec *ts);
int th_cg_tv_into(struct timeval *tv);

int th_cg_into(struct timespec *ts)
{
	return th_clock_gettime(CLOCK_MONOTONIC, ts);
}

int th_cg_realtime_into(struct timespec *ts)
{
	return th_clock_gettime(CLOCK_REALTIME, ts);
}

int th_cg_tv_into(struct timeval *tv)
{
	return th_gettimeofday(tv, 0);
}
