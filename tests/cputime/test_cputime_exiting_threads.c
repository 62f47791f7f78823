/*
 * Seed 004's program (Spencer Candland's 2009 report, as Rik van Riel
 * changed it): hundreds of threads, each calling times() in a loop between
 * bursts of work and checking that utime never decreases, with threads
 * exiting throughout, here through th_times(). Every thread also checks
 * stime, utime + stime, th_clock() and both coarse ids.
 *
 * Then churn with readers across threads: short-lived threads are created and
 * exit continuously while long-lived readers check their own sequences, and a
 * streaming pair checks order across threads (one thread publishes each
 * reading with a release store, the other acquires the latest and reads its
 * own right after: its own must not be smaller).
 *
 * The kernel's own times() is sampled too and its decreases reported, not
 * judged (modern kernels keep it monotonic; timehands must not rely on it).
 */
#include "cpt.h"

#include <pthread.h>

#define NUM_THREADS 500
#define ITERS 2000
#define WORK 1500

static struct tms start;
static _Atomic long kernel_decreases, kernel_samples;

struct seq {
	int64_t u, s, sum, clk, proc, thr;
};

/* Reads everything once; checks it against the previous reading. */
static void step(struct seq *p, const char *who)
{
	struct tms t;
	th_times(&t);
	int64_t u = (int64_t)t.tms_utime - (int64_t)start.tms_utime;
	int64_t s = (int64_t)t.tms_stime - (int64_t)start.tms_stime;
	clock_t c = th_clock();
	int64_t pc = th_ns(TH_CLOCK_PROCESS_CPUTIME_COARSE), tc = th_ns(TH_CLOCK_THREAD_CPUTIME_COARSE);
	CHECK(u >= p->u, "%s: utime decreased, was %lld, now %lld!", who, (long long)p->u, (long long)u);
	CHECK(s >= p->s, "%s: stime decreased, was %lld, now %lld!", who, (long long)p->s, (long long)s);
	CHECK(u + s >= p->sum, "%s: utime+stime decreased", who);
	CHECK(c != (clock_t)-1 && (int64_t)c >= p->clk, "%s: th_clock decreased, was %lld, now %ld", who,
	      (long long)p->clk, (long)c);
	CHECK(pc >= p->proc, "%s: process coarse decreased", who);
	CHECK(tc >= p->thr, "%s: thread coarse decreased", who);
	p->u = u, p->s = s, p->sum = u + s, p->clk = (int64_t)c, p->proc = pc, p->thr = tc;
}

static void *pound(void *arg)
{
	(void)arg;
	struct seq p = {0, 0, 0, 0, 0, 0};
	long kold = -1, kdec = 0, ks = 0;
	/* A new thread's first thread-coarse value is its own, never a
	 * predecessor's (thread caches are per thread). */
	int64_t t0 = th_ns(TH_CLOCK_THREAD_CPUTIME_COARSE), e0 = k_cpu(CLOCK_THREAD_CPUTIME_ID);
	CHECK(t0 <= e0, "a new thread's coarse time %lld above its exact %lld", (long long)t0, (long long)e0);
	for (int i = 0; i < ITERS; i++) {
		work(WORK);
		step(&p, "pound");
		if ((i & 63) == 0) {
			struct tms k;
			k_times(&k);
			long ku = (long)k.tms_utime;
			if (ku < kold)
				kdec++;
			kold = ku;
			ks++;
		}
	}
	atomic_fetch_add(&kernel_decreases, kdec);
	atomic_fetch_add(&kernel_samples, ks);
	return NULL;
}

static pthread_t *spawn(void *(*fn)(void *), void *arg, pthread_t *t)
{
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 * 1024);
	int rc = pthread_create(t, &a, fn, arg);
	pthread_attr_destroy(&a);
	CHECK(rc == 0, "pthread_create: %d", rc);
	return rc == 0 ? t : NULL;
}

static void seed_shape(void)
{
	static pthread_t th[NUM_THREADS];
	int ok[NUM_THREADS];
	th_times(&start);
	int64_t t0 = raw_ns();
	for (int i = 0; i < NUM_THREADS; i++)
		ok[i] = spawn(pound, NULL, &th[i]) != NULL;
	for (int i = 0; i < NUM_THREADS; i++)
		if (ok[i])
			pthread_join(th[i], NULL);
	printf("seed 004 shape: %d threads x %d th_times() in %.2f s; kernel times() utime decreased %ld times in %ld samples\n",
	       NUM_THREADS, ITERS, (double)(raw_ns() - t0) / NS, atomic_load(&kernel_decreases),
	       atomic_load(&kernel_samples));
}

/* ------------------------------------------------------------ churn */

static _Atomic int stop;

static void *short_lived(void *arg)
{
	(void)arg;
	struct seq p = {0, 0, 0, 0, 0, 0};
	for (int i = 0; i < 50; i++) {
		work(WORK);
		step(&p, "short-lived");
	}
	return NULL;
}

static void *long_lived(void *arg)
{
	(void)arg;
	struct seq p = {0, 0, 0, 0, 0, 0};
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		work(WORK / 4);
		step(&p, "long-lived");
	}
	return NULL;
}

/* Streaming: the publisher's readings, each published with release. */
static _Atomic int64_t pub_u, pub_s, pub_sum, pub_clk, pub_proc;
static _Atomic long stream_checks;

static void *publisher(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		struct tms t;
		th_times(&t);
		int64_t c = (int64_t)th_clock(), p = th_ns(TH_CLOCK_PROCESS_CPUTIME_COARSE);
		/* Release: these readings happen-before the consumer's own,
		 * taken after its acquire of the latest value. */
		atomic_store_explicit(&pub_u, (int64_t)t.tms_utime, memory_order_release);
		atomic_store_explicit(&pub_s, (int64_t)t.tms_stime, memory_order_release);
		atomic_store_explicit(&pub_sum, (int64_t)(t.tms_utime + t.tms_stime), memory_order_release);
		atomic_store_explicit(&pub_clk, c, memory_order_release);
		atomic_store_explicit(&pub_proc, p, memory_order_release);
	}
	return NULL;
}

static void *consumer(void *arg)
{
	(void)arg;
	long n = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		int64_t u = atomic_load_explicit(&pub_u, memory_order_acquire);
		int64_t s = atomic_load_explicit(&pub_s, memory_order_acquire);
		int64_t sum = atomic_load_explicit(&pub_sum, memory_order_acquire);
		int64_t c = atomic_load_explicit(&pub_clk, memory_order_acquire);
		int64_t p = atomic_load_explicit(&pub_proc, memory_order_acquire);
		struct tms t;
		th_times(&t);
		int64_t mc = (int64_t)th_clock(), mp = th_ns(TH_CLOCK_PROCESS_CPUTIME_COARSE);
		CHECK(t.tms_utime >= u && t.tms_stime >= s && t.tms_utime + t.tms_stime >= sum,
		      "across threads: times below a published reading");
		CHECK(mc >= c, "across threads: th_clock %lld below published %lld", (long long)mc, (long long)c);
		CHECK(mp >= p, "across threads: process coarse below a published reading");
		n++;
	}
	atomic_fetch_add(&stream_checks, n);
	return NULL;
}

static void churn(int64_t dur)
{
	pthread_t lp[4], pub, con;
	for (int i = 0; i < 4; i++)
		spawn(long_lived, NULL, &lp[i]);
	spawn(publisher, NULL, &pub);
	spawn(consumer, NULL, &con);
	int64_t end = raw_ns() + dur;
	long made = 0;
	while (raw_ns() < end) {
		pthread_t b[16];
		int ok[16];
		for (int i = 0; i < 16; i++)
			ok[i] = spawn(short_lived, NULL, &b[i]) != NULL;
		for (int i = 0; i < 16; i++)
			if (ok[i]) {
				pthread_join(b[i], NULL);
				made++;
			}
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(lp[i], NULL);
	pthread_join(pub, NULL);
	pthread_join(con, NULL);
	printf("churn: %ld short-lived threads, %ld cross-thread checks\n", made, atomic_load(&stream_checks));
	CHECK(atomic_load(&stream_checks) > 0, "no cross-thread checks ran");
}

int main(void)
{
	seed_shape();
	churn(3 * NS);
	return cpt_done("cputime_exiting_threads");
}
