/*
 * A library whose constructor reads every clock: it may run before the
 * preload's own constructor (the loader initialises the preload after the
 * libraries it was loaded next to, depending on the order), so the preload
 * must attach lazily and correctly from here.
 */
#include "compat.h"

#include <sys/time.h>
#include <sys/times.h>

int compat_ctor_failures = -1;   /* checks failed in the constructor */
int compat_ctor_saw_preload_ctor = -2; /* th_preload_ctor_ran when we ran */
int compat_ctor_bound = -1;      /* clock_gettime bound to the preload */
unsigned long compat_ctor_counted; /* calls the counting preload saw */

static unsigned long count_sum(void)
{
	_Atomic unsigned long *n = preload_counters();
	unsigned long s = 0;
	for (int i = 0; n && i < TH_PC_N; i++)
		s += n[i];
	return s;
}

__attribute__((constructor)) static void compat_ctor(void)
{
	compat_ctor_saw_preload_ctor = preload_ctor_ran();
	compat_ctor_bound = in_preload((void *)&clock_gettime);
	unsigned long before = count_sum();
	static const clockid_t ids[] = {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME,
					CLOCK_TAI};
	for (int round = 0; round < 50; round++) {
		for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
			struct timespec ts;
			int64_t k1 = sys_ns(ids[i]);
			int r = clock_gettime(ids[i], &ts);
			int64_t k2 = sys_ns(ids[i]);
			CHECK(r == 0 && ts_ns(&ts) >= k1 - SLACK_NS && ts_ns(&ts) <= k2 + SLACK_NS,
			      "constructor: clock_gettime(%d) %lld outside [%lld, %lld]", ids[i],
			      (long long)ts_ns(&ts), (long long)k1, (long long)k2);
		}
		struct timeval tv;
		int64_t k1 = sys_ns(CLOCK_REALTIME);
		CHECK(gettimeofday(&tv, NULL) == 0, "constructor: gettimeofday");
		int64_t k2 = sys_ns(CLOCK_REALTIME);
		int64_t v = (int64_t)tv.tv_sec * NS + tv.tv_usec * 1000;
		CHECK(v >= k1 - SLACK_NS - 1000 && v <= k2 + SLACK_NS, "constructor: gettimeofday outside");
		time_t t = time(NULL);
		/* G3 under the preload; libc's own time() lags gettimeofday() for
		 * a few milliseconds after each second boundary (the defect the
		 * preload removes), so without it the check would fail there */
		CHECK(!compat_ctor_bound || t >= tv.tv_sec, "constructor: time() %lld behind gettimeofday %lld",
		      (long long)t, (long long)tv.tv_sec);
		struct timespec ts;
		CHECK(timespec_get(&ts, TIME_UTC) == TIME_UTC, "constructor: timespec_get");
		CHECK(clock_getres(CLOCK_MONOTONIC, &ts) == 0, "constructor: clock_getres");
		struct tms tm;
		CHECK(times(&tm) != (clock_t)-1, "constructor: times");
		CHECK(clock() != (clock_t)-1, "constructor: clock");
		errno = 0;
		CHECK(clock_gettime(4242, &ts) == -1 && errno == EINVAL, "constructor: unknown id errno %d", errno);
	}
	compat_ctor_counted = count_sum() - before;
	compat_ctor_failures = compat_failures;
}
