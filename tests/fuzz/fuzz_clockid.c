/*
 * libFuzzer target for clock-id parsing (th_parse_clockid, src/core/config.c).
 *
 * Whatever the string: a decimal number (optionally negative) is accepted
 * exactly when it fits an int, and gives that number; anything else that is
 * accepted must be one of the clock ids the parser knows by name (kernel ids
 * and the timehands extension ids); a rejected string leaves the output
 * untouched; accepting is deterministic.
 */
/* the checks are the target: kept in every build type */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "timehands.h"

static int known(long id)
{
	static const long ids[] = {
		CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID,
		CLOCK_MONOTONIC_RAW, CLOCK_REALTIME_COARSE, CLOCK_MONOTONIC_COARSE, CLOCK_BOOTTIME,
		CLOCK_REALTIME_ALARM, CLOCK_BOOTTIME_ALARM, CLOCK_TAI, (long)TH_CLOCK_REALTIME_RELAXED,
		(long)TH_CLOCK_MONOTONIC_RELAXED, (long)TH_CLOCK_PROCESS_CPUTIME_COARSE,
		(long)TH_CLOCK_THREAD_CPUTIME_COARSE,
	};
	for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
		if (ids[i] == id)
			return 1;
	return 0;
}

/* 1 if s is -?[0-9]+ */
static int decimal(const char *s)
{
	if (*s == '-')
		s++;
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[128];
	size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
	memcpy(s, data, n);
	s[n] = 0;

	long id = 0x7eadbeefL, again = 0;
	int r = th_parse_clockid(s, &id);
	assert(r == 0 || r == -1);
	if (r != 0) {
		assert(id == 0x7eadbeefL);
	} else {
		assert(th_parse_clockid(s, &again) == 0 && again == id);
		assert(id >= INT_MIN && id <= INT_MAX);
	}
	if (decimal(s)) {
		errno = 0;
		long long ref = strtoll(s, NULL, 10);
		int fits = errno == 0 && ref >= INT_MIN && ref <= INT_MAX;
		assert((r == 0) == fits);
		assert(!fits || id == ref);
	} else if (r == 0) {
		assert(known(id));
	}
	assert(th_parse_clockid(NULL, &id) == -1 && th_parse_clockid("", &id) == -1);
	return 0;
}
