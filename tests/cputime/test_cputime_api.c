/*
 * th_times(), th_clock() and the coarse CPU-time ids against the kernel, one
 * thread (also run with TIMEHANDS_DISABLE=1, where every value is the
 * kernel's):
 *  - the extension ids through th_clock_gettime and th_clock_getres: result,
 *    resolution (the tick), NULL arguments;
 *  - every value lies between 0 and a later exact kernel reading (never ahead);
 *  - th_times() fields never ahead of a later times(); its return within a
 *    tick of the kernel's and coherent with th_clock_gettime: floor(
 *    MONOTONIC_COARSE in ticks) + a fixed offset, sandwiched between the
 *    coarse readings taken before and after, and never ahead of a fine
 *    MONOTONIC reading after it;
 *  - in one thread nothing decreases while it burns CPU.
 */
#include "cpt.h"

static int64_t hz;

static int64_t mono_ticks(int64_t ns)
{
	return ns / (NS / hz);
}

static void test_ids(void)
{
	struct timespec ts, r, kr;
	CHECK(clock_getres(CLOCK_MONOTONIC_COARSE, &kr) == 0, "kernel getres");
	clockid_t ids[] = {TH_CLOCK_PROCESS_CPUTIME_COARSE, TH_CLOCK_THREAD_CPUTIME_COARSE};
	for (int i = 0; i < 2; i++) {
		CHECK(th_clock_gettime(ids[i], &ts) == 0, "gettime id %d", (int)ids[i]);
		CHECK(ts.tv_nsec >= 0 && ts.tv_nsec < NS && ts.tv_sec >= 0, "normalised");
		memset(&r, 0xff, sizeof r);
		CHECK(th_clock_getres(ids[i], &r) == 0, "getres id %d", (int)ids[i]);
		CHECK(r.tv_sec == kr.tv_sec && r.tv_nsec == kr.tv_nsec,
		      "resolution is the tick: %lld.%09ld vs %lld.%09ld", (long long)r.tv_sec, r.tv_nsec,
		      (long long)kr.tv_sec, kr.tv_nsec);
		CHECK(th_clock_getres(ids[i], NULL) == 0, "getres NULL");
		errno = 0;
		CHECK(th_clock_gettime(ids[i], NULL) == -1 && errno == EFAULT, "gettime NULL: EFAULT");
	}
	/* The exact ids still go to the kernel. */
	CHECK(th_clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0, "exact process id");
	CHECK(th_clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0, "exact thread id");
	CHECK(th_clock_getres(CLOCK_PROCESS_CPUTIME_ID, &r) == 0 && r.tv_sec == 0 && r.tv_nsec == 1,
	      "exact getres");
	/* The coarse ids are distinct from every kernel id. */
	errno = 0;
	CHECK(clock_gettime(TH_CLOCK_PROCESS_CPUTIME_COARSE, &ts) == -1 && errno == EINVAL,
	      "the kernel rejects the extension id");
}

/* Every coarse reading is bracketed by 0 and a later exact reading. */
static void test_sandwich(int rounds)
{
	for (int i = 0; i < rounds; i++) {
		int64_t c = th_ns(TH_CLOCK_PROCESS_CPUTIME_COARSE);
		int64_t e = k_cpu(CLOCK_PROCESS_CPUTIME_ID);
		CHECK(c >= 0 && c <= e, "process coarse %lld ahead of exact %lld", (long long)c, (long long)e);
		c = th_ns(TH_CLOCK_THREAD_CPUTIME_COARSE);
		e = k_cpu(CLOCK_THREAD_CPUTIME_ID);
		CHECK(c >= 0 && c <= e, "thread coarse %lld ahead of exact %lld", (long long)c, (long long)e);
		clock_t tc = th_clock(), kc = clock();
		CHECK(tc != (clock_t)-1 && tc >= 0 && tc <= kc, "th_clock %ld ahead of clock %ld", (long)tc,
		      (long)kc);
		struct tms t, k;
		long k0 = k_times(&k);
		clock_t r = th_times(&t);
		long kr = k_times(&k);
		CHECK(r != (clock_t)-1, "th_times failed");
		CHECK(t.tms_utime <= k.tms_utime && t.tms_stime <= k.tms_stime && t.tms_cutime <= k.tms_cutime &&
			      t.tms_cstime <= k.tms_cstime,
		      "th_times fields ahead of times(): %ld %ld %ld %ld vs %ld %ld %ld %ld", (long)t.tms_utime,
		      (long)t.tms_stime, (long)t.tms_cutime, (long)t.tms_cstime, (long)k.tms_utime,
		      (long)k.tms_stime, (long)k.tms_cutime, (long)k.tms_cstime);
		CHECK(r >= k0 - 1 && r <= kr + 1, "th_times elapsed %ld, kernel [%ld, %ld]", (long)r, k0, kr);
		spin_ns(200000);
	}
}

/* th_times() = floor(MONOTONIC_COARSE in ticks) + offset, sandwiched, and
 * not ahead of the fine clock read after it. */
static void test_elapsed(int rounds)
{
	int64_t off = 0;
	int have = 0;
	long bad = 0;
	for (int i = 0; i < rounds * 50; i++) {
		int64_t m1 = th_ns(CLOCK_MONOTONIC_COARSE);
		struct tms t;
		clock_t r = (i & 1) ? th_times(&t) : th_times(NULL);
		int64_t m2 = th_ns(CLOCK_MONOTONIC_COARSE);
		int64_t f = th_ns(CLOCK_MONOTONIC);
		int64_t a = mono_ticks(m1), b = mono_ticks(m2);
		if (!have) {
			if (a == b) {
				off = (int64_t)r - a;
				have = 1;
			}
			continue;
		}
		if (!((int64_t)r >= a + off && (int64_t)r <= b + off && (int64_t)r <= mono_ticks(f) + off))
			bad++;
		if (i % 500 == 0)
			spin_ns(3 * MS);
	}
	CHECK(have, "no sandwich inside one tick");
	/* With TIMEHANDS_DISABLE=1 the return is the kernel's own (jiffies,
	 * another tick phase): only the bound below applies. */
	if (!getenv("TIMEHANDS_DISABLE"))
		CHECK(bad == 0, "%ld th_times() returns outside MONOTONIC_COARSE ticks + offset", bad);
	/* The offset makes th_times() the kernel's times() within a tick. */
	struct tms k;
	long k1 = k_times(&k);
	clock_t r = th_times(NULL);
	long k2 = k_times(&k);
	CHECK(r >= k1 - 1 && r <= k2 + 1, "elapsed %ld vs kernel [%ld, %ld]", (long)r, k1, k2);
}

/* Nothing decreases in one thread while it burns CPU. */
static void test_monotonic(int64_t dur)
{
	int64_t end = raw_ns() + dur;
	int64_t pp = 0, pt = 0;
	clock_t pc = 0;
	struct tms prev = {0, 0, 0, 0};
	long n = 0;
	while (raw_ns() < end) {
		int64_t p = th_ns(TH_CLOCK_PROCESS_CPUTIME_COARSE), t = th_ns(TH_CLOCK_THREAD_CPUTIME_COARSE);
		clock_t c = th_clock();
		struct tms m;
		th_times(&m);
		CHECK(p >= pp && t >= pt && c >= pc, "decrease: process %lld->%lld thread %lld->%lld clock %ld->%ld",
		      (long long)pp, (long long)p, (long long)pt, (long long)t, (long)pc, (long)c);
		CHECK(m.tms_utime >= prev.tms_utime && m.tms_stime >= prev.tms_stime &&
			      m.tms_utime + m.tms_stime >= prev.tms_utime + prev.tms_stime,
		      "times decreased");
		pp = p, pt = t, pc = c, prev = m;
		n++;
	}
	/* Burning CPU for `dur` moves the values. */
	CHECK(pp > 0 && pt > 0 && pc > 0, "values advanced (%lld %lld %ld) over %ld reads", (long long)pp,
	      (long long)pt, (long)pc, n);
}

int main(void)
{
	hz = sysconf(_SC_CLK_TCK);
	test_ids();
	test_sandwich(200);
	test_elapsed(40);
	test_monotonic(300 * MS);
	test_sandwich(50);
	return cpt_done(getenv("TIMEHANDS_DISABLE") ? "cputime_api (TIMEHANDS_DISABLE=1)" : "cputime_api");
}
