/*
 * The lag bound (cputime.c, th_times(3)): a value returned by a call whose
 * MONOTONIC_COARSE reading is C is at least the exact value of a kernel
 * reading begun at or after C - 2 ticks (process caches) or C - 1 tick
 * (thread cache), and never more than a later exact reading. Each round takes
 * an exact reading e0, burns CPU until the coarse clock has passed the bound,
 * reads the coarse value c and another exact reading e1, and checks
 * e0 <= c <= e1. Burning CPU moves the values by about a tick per tick, so a
 * cache allowed to grow one tick older than promised fails the check.
 *
 * Run plain, with reader threads competing for the refresh, and with the
 * refresh lock held by nobody who will ever release it (a stalled holder):
 * then the readers must refresh past it once the stamp is two ticks old,
 * never wait, and a stalled holder's old reading landing late must not lower
 * anything. Also: at most one refresh per tick under the lock.
 */
#include "cpt.h"

#include <pthread.h>

#include "cputime/cputime.h"

static int64_t tick;

enum kind { K_PROC, K_CLOCK, K_THREAD, K_TIMES, K_N };
static const char *kname[K_N] = {"process coarse", "th_clock", "thread coarse", "th_times"};

/* A reading as up to two numbers (times: utime, stime). */
struct rd {
	int64_t a, b;
};

static struct rd exact(enum kind k)
{
	struct rd r = {0, 0};
	struct tms t;
	switch (k) {
	case K_PROC: r.a = k_cpu(CLOCK_PROCESS_CPUTIME_ID); break;
	case K_CLOCK: r.a = (int64_t)clock(); break;
	case K_THREAD: r.a = k_cpu(CLOCK_THREAD_CPUTIME_ID); break;
	default:
		k_times(&t);
		r.a = t.tms_utime, r.b = t.tms_stime;
		break;
	}
	return r;
}

static struct rd coarse(enum kind k)
{
	struct rd r = {0, 0};
	struct tms t;
	switch (k) {
	case K_PROC: r.a = th_ns(TH_CLOCK_PROCESS_CPUTIME_COARSE); break;
	case K_CLOCK: r.a = (int64_t)th_clock(); break;
	case K_THREAD: r.a = th_ns(TH_CLOCK_THREAD_CPUTIME_COARSE); break;
	default:
		th_times(&t);
		r.a = t.tms_utime, r.b = t.tms_stime;
		break;
	}
	return r;
}

static long lag_rounds(const char *what, int rounds)
{
	long bad = 0;
	for (int i = 0; i < rounds; i++) {
		for (int k = 0; k < K_N; k++) {
			int64_t bound = (k == K_THREAD ? 1 : 2) * tick;
			struct rd e0 = exact(k);
			int64_t m0 = th_ns(CLOCK_MONOTONIC);
			/* the calls date themselves with the coarse clock */
			while (th_ns(CLOCK_MONOTONIC_COARSE) < m0 + bound)
				work(200);
			struct rd c = coarse(k);
			struct rd e1 = exact(k);
			int ok = c.a >= e0.a && c.a <= e1.a && c.b >= e0.b && c.b <= e1.b;
			if (!ok && bad++ < 5)
				CHECK(ok, "%s, %s: exact %lld/%lld, then %lld ns later coarse %lld/%lld, exact %lld/%lld",
				      what, kname[k], (long long)e0.a, (long long)e0.b, (long long)bound,
				      (long long)c.a, (long long)c.b, (long long)e1.a, (long long)e1.b);
		}
	}
	return bad;
}

/* Background readers: compete for the refresh and check monotonicity. */
static _Atomic int stop;
static _Atomic long bg_reads;

static void *reader(void *arg)
{
	(void)arg;
	int64_t pp = 0;
	clock_t pc = 0;
	struct tms pt = {0, 0, 0, 0};
	long n = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		int64_t p = th_ns(TH_CLOCK_PROCESS_CPUTIME_COARSE);
		clock_t c = th_clock();
		struct tms t;
		th_times(&t);
		CHECK(p >= pp && c >= pc && t.tms_utime >= pt.tms_utime && t.tms_stime >= pt.tms_stime,
		      "background reader saw a decrease");
		pp = p, pc = c, pt = t;
		n++;
	}
	atomic_fetch_add(&bg_reads, n);
	return NULL;
}

static void start_readers(pthread_t *th, int n)
{
	atomic_store(&stop, 0);
	for (int i = 0; i < n; i++)
		pthread_create(&th[i], NULL, reader, NULL);
}

static void stop_readers(pthread_t *th, int n)
{
	atomic_store(&stop, 1);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
}

/* A refresher stalled forever: the lock is taken and never released. */
static void test_stalled_holder(void)
{
	_Atomic uint32_t *lp = th__cputime_lock_word(TH_CPU_PROC);
	_Atomic uint32_t *lt = th__cputime_lock_word(TH_CPU_TIMES);
	uint64_t l0p, s0p, l0t, s0t;
	th__cputime_stats(TH_CPU_PROC, &l0p, &s0p);
	th__cputime_stats(TH_CPU_TIMES, &l0t, &s0t);
	uint32_t z = 0;
	CHECK(atomic_compare_exchange_strong(lp, &z, 1), "process lock free");
	z = 0;
	CHECK(atomic_compare_exchange_strong(lt, &z, 1), "times lock free");

	pthread_t th[3];
	start_readers(th, 3);
	lag_rounds("lock held", 12);

	/* The stalled holder's reading, taken now, lands after the readers
	 * have moved on: nothing may go down. */
	uint64_t stamp = (uint64_t)th_ns(CLOCK_MONOTONIC);
	uint64_t old_ns = (uint64_t)k_cpu(CLOCK_PROCESS_CPUTIME_ID);
	struct tms ot;
	k_times(&ot);
	uint64_t old_t[4] = {(uint64_t)ot.tms_utime, (uint64_t)ot.tms_stime, (uint64_t)ot.tms_cutime,
			     (uint64_t)ot.tms_cstime};
	spin_ns(6 * tick);
	int64_t c1 = th_ns(TH_CLOCK_PROCESS_CPUTIME_COARSE);
	struct tms t1, t2;
	th_times(&t1);
	th__cputime_merge(TH_CPU_PROC, &old_ns, stamp);
	th__cputime_merge(TH_CPU_TIMES, old_t, stamp);
	int64_t c2 = th_ns(TH_CLOCK_PROCESS_CPUTIME_COARSE);
	th_times(&t2);
	CHECK(c2 >= c1 && c1 > (int64_t)old_ns, "late merge: %lld then %lld (old reading %llu)", (long long)c1,
	      (long long)c2, (unsigned long long)old_ns);
	CHECK(t2.tms_utime >= t1.tms_utime && t2.tms_stime >= t1.tms_stime, "late merge lowered times");
	lag_rounds("lock held, after a late merge", 4);
	stop_readers(th, 3);

	uint64_t l1p, s1p, l1t, s1t;
	th__cputime_stats(TH_CPU_PROC, &l1p, &s1p);
	th__cputime_stats(TH_CPU_TIMES, &l1t, &s1t);
	CHECK(l1p == l0p && l1t == l0t, "refreshed under a lock that was held");
	CHECK(s1p > s0p && s1t > s0t, "no reader refreshed past the stalled holder");
	atomic_store(lp, 0);
	atomic_store(lt, 0);
}

/* Under the lock, at most one refresh per tick however many readers. */
static void test_one_per_tick(void)
{
	pthread_t th[4];
	uint64_t l0, s0, l1, s1, tl0, ts0, tl1, ts1;
	th__cputime_stats(TH_CPU_PROC, &l0, &s0);
	th__cputime_stats(TH_CPU_TIMES, &tl0, &ts0);
	int64_t m0 = th_ns(CLOCK_MONOTONIC);
	start_readers(th, 4);
	spin_ns(100 * tick);
	stop_readers(th, 4);
	int64_t m1 = th_ns(CLOCK_MONOTONIC);
	th__cputime_stats(TH_CPU_PROC, &l1, &s1);
	th__cputime_stats(TH_CPU_TIMES, &tl1, &ts1);
	int64_t most = (m1 - m0) / tick + 2;
	CHECK((int64_t)(l1 - l0) <= most && (int64_t)(tl1 - tl0) <= most,
	      "refreshes under the lock: %llu and %llu in %lld ticks", (unsigned long long)(l1 - l0),
	      (unsigned long long)(tl1 - tl0), (long long)((m1 - m0) / tick));
	CHECK(l1 > l0 && tl1 > tl0, "no refresh at all");
	printf("one refresh per tick: %llu / %llu locked, %llu / %llu past a stalled holder, %lld ticks, %ld reads\n",
	       (unsigned long long)(l1 - l0), (unsigned long long)(tl1 - tl0), (unsigned long long)(s1 - s0),
	       (unsigned long long)(ts1 - ts0), (long long)((m1 - m0) / tick), atomic_load(&bg_reads));
}

int main(void)
{
	tick = cpt_tick();
	printf("tick %lld ns\n", (long long)tick);
	lag_rounds("alone", 20);
	pthread_t th[3];
	start_readers(th, 3);
	lag_rounds("with 3 readers", 12);
	stop_readers(th, 3);
	test_stalled_holder();
	test_one_per_tick();
	return cpt_done("cputime_lag");
}
