/*
 * 64 busy threads plus threads exiting all the time:
 * no value ever decreases in any thread, and th_clock() stays within 30 ms of
 * clock(): every check brackets th_clock() between two clock() calls,
 * c1 - 30 ms <= th_clock() <= c2. The documented bound is what the kernel
 * counts for the process in two ticks (8 ms here), at most 2 x 8 ms on two
 * CPUs plus the other CPU's not yet accounted runtime, whatever the
 * scheduler does to the checking thread between its calls.
 */
#include "cpt.h"

#include <pthread.h>

#define BUSY 64

static _Atomic int stop;
static _Atomic long reads;

struct seq {
	int64_t u, s, clk, proc, thr;
};

static void step(struct seq *p)
{
	struct tms t;
	th_times(&t);
	clock_t c = th_clock();
	int64_t pc = th_ns(TH_CLOCK_PROCESS_CPUTIME_COARSE), tc = th_ns(TH_CLOCK_THREAD_CPUTIME_COARSE);
	CHECK(t.tms_utime >= p->u && t.tms_stime >= p->s, "times decreased: %lld/%lld -> %ld/%ld", (long long)p->u,
	      (long long)p->s, (long)t.tms_utime, (long)t.tms_stime);
	CHECK(c != (clock_t)-1 && (int64_t)c >= p->clk, "th_clock decreased: %lld -> %ld", (long long)p->clk,
	      (long)c);
	CHECK(pc >= p->proc && tc >= p->thr, "coarse id decreased");
	p->u = t.tms_utime, p->s = t.tms_stime, p->clk = (int64_t)c, p->proc = pc, p->thr = tc;
}

static void *busy(void *arg)
{
	(void)arg;
	struct seq p = {0, 0, 0, 0, 0};
	long n = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		work(20000);
		step(&p);
		n++;
	}
	atomic_fetch_add(&reads, n);
	return NULL;
}

static void *short_lived(void *arg)
{
	(void)arg;
	struct seq p = {0, 0, 0, 0, 0};
	for (int i = 0; i < 20; i++) {
		work(2000);
		step(&p);
	}
	return NULL;
}

static void *spawner(void *arg)
{
	long *made = arg;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 * 1024);
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		pthread_t b[8];
		int ok[8];
		for (int i = 0; i < 8; i++)
			ok[i] = pthread_create(&b[i], &a, short_lived, NULL) == 0;
		for (int i = 0; i < 8; i++)
			if (ok[i]) {
				pthread_join(b[i], NULL);
				++*made;
			}
	}
	pthread_attr_destroy(&a);
	return NULL;
}

int main(void)
{
	pthread_t th[BUSY], sp;
	long made = 0;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 * 1024);
	for (int i = 0; i < BUSY; i++)
		CHECK(pthread_create(&th[i], &a, busy, NULL) == 0, "pthread_create");
	pthread_attr_destroy(&a);
	pthread_create(&sp, NULL, spawner, &made);

	int64_t end = raw_ns() + 4 * NS;
	long checks = 0;
	clock_t worst = 0;
	struct seq p = {0, 0, 0, 0, 0};
	while (raw_ns() < end) {
		clock_t c1 = clock();
		clock_t t = th_clock();
		clock_t c2 = clock();
		CHECK(t >= c1 - CLK_MS(30) && t <= c2, "th_clock %ld not within [clock - 30 ms, later clock] = [%ld, %ld]",
		      (long)t, (long)(c1 - CLK_MS(30)), (long)c2);
		if (c1 - t > worst)
			worst = c1 - t;
		step(&p);
		checks++;
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < BUSY; i++)
		pthread_join(th[i], NULL);
	pthread_join(sp, NULL);
	printf("cputime_busy_threads: %ld clock() brackets, th_clock() at most %.1f ms behind; %ld reads in busy threads, %ld threads exited\n",
	       checks, (double)worst * 1000.0 / CLOCKS_PER_SEC, atomic_load(&reads), made);
	CHECK(checks > 10, "too few checks");
	return cpt_done("cputime_busy_threads");
}
