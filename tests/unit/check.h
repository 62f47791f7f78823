/* Minimal assertion helpers shared by the unit and stress tests. */
#ifndef TH_TEST_CHECK_H
#define TH_TEST_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int check_failures;

#define CHECK(cond, ...)                                                              \
	do {                                                                          \
		if (!(cond)) {                                                        \
			if (check_failures++ < 20) {                                  \
				fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, \
					__LINE__, #cond);                             \
				fprintf(stderr, __VA_ARGS__);                         \
				fputc('\n', stderr);                                  \
			}                                                             \
		}                                                                     \
	} while (0)

static inline int check_done(const char *name)
{
	if (check_failures) {
		fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
		return 1;
	}
	printf("%s: ok\n", name);
	return 0;
}

static inline int64_t ts_to_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

/* A fixed-seed xorshift generator: the same sequence in every run. */
static uint64_t check_rng = 0x9e3779b97f4a7c15ULL;
static inline uint64_t rnd(void)
{
	check_rng ^= check_rng << 13;
	check_rng ^= check_rng >> 7;
	check_rng ^= check_rng << 17;
	return check_rng;
}

/* Wall-clock budget for loops, from the kernel's raw clock (not timehands). */
static inline int64_t raw_now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC_RAW, &t);
	return ts_to_ns(&t);
}

#endif
