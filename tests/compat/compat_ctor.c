/* Runs the clock reads of libcompat_ctor.so's constructor (see there) and
 * reports what it found. */
#include "compat.h"

extern int compat_ctor_failures, compat_ctor_saw_preload_ctor, compat_ctor_bound;
extern unsigned long compat_ctor_counted;

int main(void)
{
	int preload = expect_preload();
	CHECK(compat_ctor_failures == 0, "%d checks failed in the library constructor", compat_ctor_failures);
	CHECK(compat_ctor_bound == expect_bound(), "clock_gettime in the library %s bound to the preload",
	      preload ? "not" : "unexpectedly");
	if (preload_counters())
		/* 50 rounds x 12 calls, each counted once */
		CHECK(compat_ctor_counted == 50 * 12, "the preload counted %lu calls from the constructor",
		      compat_ctor_counted);
	if (compat_failures)
		return 1;
	printf("compat_ctor: ok (%s; the preload's constructor had %s)\n", preload ? "preload" : "no preload",
	       compat_ctor_saw_preload_ctor == 1 ? "run" : compat_ctor_saw_preload_ctor == 0 ? "not run yet" : "n/a");
	return 0;
}
