/*
 * timehands-preload-ab: what a program pays per call of libc's clock entry
 * points, in this process (served by the preload when it is loaded). Run it
 * plainly, under `timehands run` and under `timehands run --relaxed`,
 * interleaved: ab.sh does that and reports medians and ratios.
 *
 *   timehands-preload-ab            one line of key=ns pairs
 *   timehands-preload-ab coherence SECONDS
 *                                   gettimeofday(); time() pairs whose
 *                                   time() shows an earlier second
 *
 * Each loop sums its results into a register and stores once; time is taken
 * with raw system calls (no interposer can touch them); the contenders are
 * interleaved inside the process and the median of 7 rounds is printed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#define CALLS 1000000
#define ROUNDS 7

static double raw_ns(void)
{
	struct timespec ts;
	syscall(SYS_clock_gettime, CLOCK_MONOTONIC_RAW, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static volatile uint64_t sink;

static uint64_t l_mono(long n)
{
	struct timespec ts;
	uint64_t s = 0;
	for (long i = 0; i < n; i++) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		s += (uint64_t)ts.tv_nsec;
	}
	return s;
}

static uint64_t l_real(long n)
{
	struct timespec ts;
	uint64_t s = 0;
	for (long i = 0; i < n; i++) {
		clock_gettime(CLOCK_REALTIME, &ts);
		s += (uint64_t)ts.tv_nsec;
	}
	return s;
}

static uint64_t l_gtod(long n)
{
	struct timeval tv;
	uint64_t s = 0;
	for (long i = 0; i < n; i++) {
		gettimeofday(&tv, NULL);
		s += (uint64_t)tv.tv_usec;
	}
	return s;
}

static uint64_t l_time(long n)
{
	uint64_t s = 0;
	for (long i = 0; i < n; i++)
		s += (uint64_t)time(NULL);
	return s;
}

static uint64_t l_coarse(long n)
{
	struct timespec ts;
	uint64_t s = 0;
	for (long i = 0; i < n; i++) {
		clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
		s += (uint64_t)ts.tv_nsec;
	}
	return s;
}

static uint64_t l_floor(long n)
{
	uint64_t s = 0;
#if defined(__x86_64__)
	for (long i = 0; i < n; i++) {
		_mm_lfence();
		s += __rdtsc();
	}
#else
	(void)n;
#endif
	return s;
}

static uint64_t l_floor_relaxed(long n)
{
	uint64_t s = 0;
#if defined(__x86_64__)
	for (long i = 0; i < n; i++)
		s += __rdtsc();
#else
	(void)n;
#endif
	return s;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "coherence") == 0) {
		double secs = argc > 2 ? atof(argv[2]) : 2.0;
		double end = raw_ns() + secs * 1e9;
		unsigned long pairs = 0, bad = 0;
		while (raw_ns() < end) {
			for (int i = 0; i < 1024; i++) {
				struct timeval tv;
				gettimeofday(&tv, NULL);
				bad += time(NULL) < tv.tv_sec;
			}
			pairs += 1024;
		}
		printf("pairs=%lu incoherent=%lu\n", pairs, bad);
		return 0;
	}
	static const struct {
		const char *name;
		uint64_t (*fn)(long);
	} c[] = {
		{"monotonic", l_mono}, {"realtime", l_real},   {"gettimeofday", l_gtod},
		{"time", l_time},      {"monotonic_coarse", l_coarse}, {"floor", l_floor},
		{"floor_relaxed", l_floor_relaxed},
	};
	enum { N = sizeof c / sizeof *c };
	double v[N][ROUNDS];
	for (size_t k = 0; k < N; k++)
		sink = c[k].fn(CALLS / 10); /* warm up */
	for (int r = 0; r < ROUNDS; r++)
		for (size_t k = 0; k < N; k++) {
			double t0 = raw_ns();
			sink = c[k].fn(CALLS);
			v[k][r] = (raw_ns() - t0) / CALLS;
		}
	for (size_t k = 0; k < N; k++) {
		qsort(v[k], ROUNDS, sizeof(double), cmp);
		printf("%s%s=%.2f", k ? " " : "", c[k].name, v[k][ROUNDS / 2]);
	}
	printf("\n");
	return 0;
}
