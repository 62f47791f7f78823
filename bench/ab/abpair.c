/*
 * abpair: two builds of the same reads in one process, timed in paired,
 * interleaved rounds, so that a difference of a few tenths of a nanosecond
 * shows on a machine whose per-call cost moves by more than that from one
 * run (or one process) to the next. Each round times the hardware floors,
 * then every read of A and of B (order alternating) over a short loop; the
 * report is, per read, the median over rounds of A's and B's cost over the
 * floor and of the paired difference B - A, with its quartiles.
 *
 *   abpair lib A.so B.so [ROUNDS]       th_clock_gettime, th_gettimeofday, th_time of
 *                                       two libtimehands.so (dlopen, local)
 *   abpair preload A.so B.so [ROUNDS]   clock_gettime, gettimeofday, time of two
 *                                       libtimehands-preload.so
 *   abpair inline [ROUNDS]              (built with -DAB_INLINE) the header's
 *                                       inline reads of two revisions
 *
 * Two copies of the library in one process each attach on their own; with
 * TIMEHANDS_RELAXED=1 the preloads serve MONOTONIC and REALTIME relaxed.
 * bench/ab/ab.sh builds two revisions and runs every mode.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "timehands.h"

typedef uint64_t (*loop_fn)(uint64_t);

#if defined(__x86_64__)
#include <x86intrin.h>
#define CTR() __rdtsc()
#define CTR_FENCE() __asm__ volatile("lfence" ::: "memory")
#elif defined(__aarch64__)
static inline uint64_t CTR(void)
{
	uint64_t v;
	__asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
	return v;
}
#define CTR_FENCE() __asm__ volatile("isb" ::: "memory")
#endif

/* the bench's floors (bench/percall.c): the counter, unordered or ordered,
 * then a multiply-add-shift by values loaded each time */
static struct {
	uint64_t k, m;
} conv = {12345, (uint64_t)1 << 31};
#define CONV(c) ((__atomic_load_n(&conv.k, __ATOMIC_RELAXED) + (c) * __atomic_load_n(&conv.m, __ATOMIC_RELAXED)) >> 32)
static __attribute__((noinline)) uint64_t floor_unordered(uint64_t n)
{
	uint64_t a = 0;
	for (uint64_t i = 0; i < n; i++)
		a += CONV(CTR());
	return a;
}
static __attribute__((noinline)) uint64_t floor_ordered(uint64_t n)
{
	uint64_t a = 0;
	for (uint64_t i = 0; i < n; i++) {
		CTR_FENCE();
		a += CONV(CTR());
	}
	return a;
}

enum { NREAD = 11 };
static const char *const names[NREAD] = {"MONOTONIC",	      "REALTIME",	  "TAI",
					 "BOOTTIME",	      "MONOTONIC_RAW",	  "gettimeofday",
					 "MONOTONIC_RELAXED", "REALTIME_RELAXED", "MONOTONIC_COARSE",
					 "REALTIME_COARSE",   "time"};
#ifndef AB_INLINE
static const clockid_t ids[NREAD] = {CLOCK_MONOTONIC,	     CLOCK_REALTIME,	       CLOCK_TAI,
				     CLOCK_BOOTTIME,	     CLOCK_MONOTONIC_RAW,      0,
				     TH_CLOCK_MONOTONIC_RELAXED, TH_CLOCK_REALTIME_RELAXED, CLOCK_MONOTONIC_COARSE,
				     CLOCK_REALTIME_COARSE,  0};
#endif
/* the floor of each read: 0 the ordered counter read, 1 the unordered one,
 * 2 none (the coarse reads: their cost as it is) */
static const int floor_of[NREAD] = {0, 0, 0, 0, 0, 0, 1, 1, 2, 2, 2};

#ifdef AB_INLINE
#define AB_DECL(p)                                                                                       \
	uint64_t p##mono(uint64_t), p##real(uint64_t), p##tai(uint64_t), p##boot(uint64_t), p##raw(uint64_t), \
		p##tod(uint64_t), p##monor(uint64_t), p##realr(uint64_t);
AB_DECL(a_)
AB_DECL(b_)
uint64_t a_monoc(uint64_t), a_realc(uint64_t), b_monoc(uint64_t), b_realc(uint64_t), a_time(uint64_t),
	b_time(uint64_t);
static loop_fn loops[2][NREAD] = {
	{a_mono, a_real, a_tai, a_boot, a_raw, a_tod, a_monor, a_realr, a_monoc, a_realc, a_time},
	{b_mono, b_real, b_tai, b_boot, b_raw, b_tod, b_monor, b_realr, b_monoc, b_realc, b_time}};
#else
typedef int (*gettime_fn)(clockid_t, struct timespec *);
typedef int (*tod_fn)(struct timeval *, void *);
typedef time_t (*time_fn)(time_t *);
static gettime_fn gt[2];
static tod_fn td[2];
static time_fn tm[2];
#define AB_SIDE(s)                                                                         \
	static uint64_t run_##s(clockid_t id, uint64_t n)                                  \
	{                                                                                  \
		struct timespec ts = {0, 0};                                               \
		uint64_t acc = 0;                                                          \
		gettime_fn f = gt[s];                                                      \
		for (uint64_t i = 0; i < n; i++) {                                         \
			f(id, &ts);                                                        \
			acc += (uint64_t)ts.tv_nsec;                                       \
		}                                                                          \
		return acc;                                                                \
	}                                                                                  \
	static uint64_t tod_##s(uint64_t n)                                                \
	{                                                                                  \
		struct timeval tv = {0, 0};                                                \
		uint64_t acc = 0;                                                          \
		tod_fn f = td[s];                                                          \
		for (uint64_t i = 0; i < n; i++) {                                         \
			f(&tv, NULL);                                                      \
			acc += (uint64_t)tv.tv_usec;                                       \
		}                                                                          \
		return acc;                                                                \
	}                                                                                  \
	static uint64_t time_##s(uint64_t n)                                               \
	{                                                                                  \
		uint64_t acc = 0;                                                          \
		time_fn f = tm[s];                                                         \
		for (uint64_t i = 0; i < n; i++)                                           \
			acc += (uint64_t)f(NULL);                                          \
		return acc;                                                                \
	}
AB_SIDE(0)
AB_SIDE(1)
#endif

static volatile uint64_t sink;

static __attribute__((noinline)) uint64_t run_read(int side, int r, uint64_t n)
{
#ifdef AB_INLINE
	return loops[side][r](n);
#else
	if (r == 5)
		return side ? tod_1(n) : tod_0(n);
	if (r == 10)
		return side ? time_1(n) : time_0(n);
	return side ? run_1(ids[r], n) : run_0(ids[r], n);
#endif
}

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double at(double *v, int n, double q)
{
	return v[(int)(q * (n - 1) + 0.5)];
}

/* The mode each side's library ended in (local, shared, kernel), so that a
 * run meant to read timehandsd's page shows that it did. */
static void print_modes(char **argv)
{
	static const char *const names_m[] = {"kernel", "local", "shared"};
	for (int s = 0; s < 2; s++) {
		int (*st_fn)(struct th_status *, size_t) = th_status;
#ifndef AB_INLINE
		void *h = dlopen(argv[2 + s], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
		st_fn = h ? (int (*)(struct th_status *, size_t))dlsym(h, "th_status") : NULL;
#else
		(void)argv;
		if (s == 1)
			break; /* one library behind both sides */
#endif
		struct th_status st;
		if (st_fn && st_fn(&st, sizeof st) == 0)
			printf("mode %s: %s\n", s ? "B" : "A", st.mode < 3 ? names_m[st.mode] : "?");
	}
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	int arg = 2;
#ifndef AB_INLINE
	const char *sym_gt = NULL, *sym_td = NULL, *sym_tm = NULL;
	if (!strcmp(mode, "lib")) {
		sym_gt = "th_clock_gettime";
		sym_td = "th_gettimeofday";
		sym_tm = "th_time";
	} else if (!strcmp(mode, "preload")) {
		sym_gt = "clock_gettime";
		sym_td = "gettimeofday";
		sym_tm = "time";
	}
	if (!sym_gt || argc < 4) {
		fprintf(stderr, "usage: abpair lib|preload A.so B.so [ROUNDS]\n");
		return 2;
	}
	for (int s = 0; s < 2; s++) {
		void *h = dlopen(argv[2 + s], RTLD_NOW | RTLD_LOCAL);
		if (!h || !(gt[s] = (gettime_fn)dlsym(h, sym_gt)) || !(td[s] = (tod_fn)dlsym(h, sym_td)) ||
		    !(tm[s] = (time_fn)dlsym(h, sym_tm))) {
			fprintf(stderr, "abpair: %s: %s\n", argv[2 + s], dlerror());
			return 1;
		}
	}
	arg = 4;
#else
	if (strcmp(mode, "inline") != 0) {
		fprintf(stderr, "usage: abpair inline [ROUNDS]\n");
		return 2;
	}
#endif
	int rounds = argc > arg ? atoi(argv[arg]) : 1001;
	if (rounds < 5)
		rounds = 5;
	const uint64_t n = 5000;
	double *da = calloc((size_t)rounds * NREAD, sizeof *da), *db = calloc((size_t)rounds * NREAD, sizeof *db),
	       *dd = calloc((size_t)rounds * NREAD, sizeof *dd);
	if (!da || !db || !dd) {
		free(da);
		free(db);
		free(dd);
		return 1;
	}
	for (int r = 0; r < NREAD; r++) /* attach both, warm up */
		sink += run_read(0, r, n) + run_read(1, r, n);
	for (int k = 0; k < rounds; k++) {
		double t0 = now_ns();
		sink += floor_unordered(n);
		double fu = (now_ns() - t0) / (double)n;
		t0 = now_ns();
		sink += floor_ordered(n);
		double fo = (now_ns() - t0) / (double)n;
		for (int r = 0; r < NREAD; r++) {
			double f = floor_of[r] == 0 ? fo : floor_of[r] == 1 ? fu : 0, v[2];
			for (int j = 0; j < 2; j++) {
				int side = (j + k + r) & 1;
				t0 = now_ns();
				sink += run_read(side, r, n);
				v[side] = (now_ns() - t0) / (double)n - f;
			}
			da[r * rounds + k] = v[0];
			db[r * rounds + k] = v[1];
			dd[r * rounds + k] = v[1] - v[0];
		}
	}
	print_modes(argv);
	printf("%-18s %8s %8s %8s  %s\n", "read", "A", "B", "B-A", "B-A quartiles (ns over the floor, medians of rounds)");
	for (int r = 0; r < NREAD; r++) {
		double *a = da + r * rounds, *b = db + r * rounds, *d = dd + r * rounds;
		qsort(a, (size_t)rounds, sizeof *a, cmp_double);
		qsort(b, (size_t)rounds, sizeof *b, cmp_double);
		qsort(d, (size_t)rounds, sizeof *d, cmp_double);
		printf("%-18s %+8.2f %+8.2f %+8.2f  [%+.2f, %+.2f]\n", names[r], at(a, rounds, 0.5), at(b, rounds, 0.5),
		       at(d, rounds, 0.5), at(d, rounds, 0.25), at(d, rounds, 0.75));
	}
	printf("floors: the relaxed reads over the unordered counter read and multiply, the coarse ones none, the "
	       "others over the ordered counter read and multiply\n");
	free(da);
	free(db);
	free(dd);
	return 0;
}
