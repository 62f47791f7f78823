/*
 * The header's inline reads as loops, compiled twice by ab.sh against two
 * revisions' <timehands.h> (-DAB_PFX=a_ and b_) and linked into one abpair.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <sys/time.h>
#include <time.h>

#include "timehands.h"

#define AB_CAT(a, b) a##b
#define AB_NAME(p, n) AB_CAT(p, n)
#define AB_LOOP(name, decl, call, val)                          \
	uint64_t AB_NAME(AB_PFX, name)(uint64_t n);             \
	uint64_t AB_NAME(AB_PFX, name)(uint64_t n)              \
	{                                                       \
		uint64_t acc = 0;                               \
		decl;                                           \
		for (uint64_t i = 0; i < n; i++) {              \
			call;                                   \
			acc += (uint64_t)(val);                 \
		}                                               \
		return acc;                                     \
	}

AB_LOOP(mono, struct timespec ts = {0}, th_clock_gettime(CLOCK_MONOTONIC, &ts), ts.tv_nsec)
AB_LOOP(real, struct timespec ts = {0}, th_clock_gettime(CLOCK_REALTIME, &ts), ts.tv_nsec)
AB_LOOP(tai, struct timespec ts = {0}, th_clock_gettime(CLOCK_TAI, &ts), ts.tv_nsec)
AB_LOOP(boot, struct timespec ts = {0}, th_clock_gettime(CLOCK_BOOTTIME, &ts), ts.tv_nsec)
AB_LOOP(raw, struct timespec ts = {0}, th_clock_gettime(CLOCK_MONOTONIC_RAW, &ts), ts.tv_nsec)
AB_LOOP(tod, struct timeval tv = {0}, th_gettimeofday(&tv, 0), tv.tv_usec)
AB_LOOP(monor, struct timespec ts = {0}, th_clock_gettime(TH_CLOCK_MONOTONIC_RELAXED, &ts), ts.tv_nsec)
AB_LOOP(realr, struct timespec ts = {0}, th_clock_gettime(TH_CLOCK_REALTIME_RELAXED, &ts), ts.tv_nsec)
AB_LOOP(monoc, struct timespec ts = {0}, th_clock_gettime(CLOCK_MONOTONIC_COARSE, &ts), ts.tv_nsec)
AB_LOOP(realc, struct timespec ts = {0}, th_clock_gettime(CLOCK_REALTIME_COARSE, &ts), ts.tv_nsec)
AB_LOOP(time, (void)0, (void)0, th_time(NULL))
