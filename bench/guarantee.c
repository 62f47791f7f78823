/*
 * Guarantee table: how often the kernel's clocks and timehands' clocks break
 * the guarantees G2-G4 (README, doc/design.md), counted over the same number of reads.
 *
 * Same thread (one loop, the kernel's and timehands' reads interleaved, so
 * both see the same second boundaries and ticks):
 *   G3  time() below the second of an earlier gettimeofday(); the same for
 *       CLOCK_REALTIME_COARSE after CLOCK_REALTIME (seed 000's promise)
 *   G4  a coarse reading (time(), *_COARSE) above a later fine reading
 * Across threads (streaming shape): one thread reads its clock and publishes
 * the value with a release store; another acquires the latest value and
 * reads its own clock right after, which must not be smaller (G2). This
 * finds unordered counter reads in millions of reads where turn-taking finds
 * none.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "bench.h"
#include "timehands.h"

struct clocks {
	const char *impl;
	int (*gettime)(clockid_t, struct timespec *);
	int (*gtod)(struct timeval *, void *);
	time_t (*time)(time_t *);
};

static int64_t ns_of(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * NS_PER_S + ts->tv_nsec;
}

enum { C_TIME_LT_GTOD, C_RCOARSE_LT_REAL, C_TIME_GT_GTOD, C_RCOARSE_GT_REAL, C_MCOARSE_GT_MONO, NSAME };
static const struct {
	const char *check, *g;
} same_check[NSAME] = {
	{"time() < second of an earlier gettimeofday()", "G3"},
	{"REALTIME_COARSE second < an earlier REALTIME's", "G3"},
	{"time() > second of a later gettimeofday()", "G4"},
	{"REALTIME_COARSE > a later REALTIME", "G4"},
	{"MONOTONIC_COARSE > a later MONOTONIC", "G4"},
};

static void same_thread_step(const struct clocks *c, uint64_t *bad)
{
	struct timeval g1, g2;
	struct timespec f1, co, f2, mc, m;
	c->gtod(&g1, NULL);
	time_t t = c->time(NULL);
	c->gtod(&g2, NULL);
	bad[C_TIME_LT_GTOD] += t < g1.tv_sec;
	bad[C_TIME_GT_GTOD] += t > g2.tv_sec;
	c->gettime(CLOCK_REALTIME, &f1);
	c->gettime(CLOCK_REALTIME_COARSE, &co);
	c->gettime(CLOCK_REALTIME, &f2);
	bad[C_RCOARSE_LT_REAL] += co.tv_sec < f1.tv_sec;
	bad[C_RCOARSE_GT_REAL] += ns_of(&co) > ns_of(&f2);
	c->gettime(CLOCK_MONOTONIC_COARSE, &mc);
	c->gettime(CLOCK_MONOTONIC, &m);
	bad[C_MCOARSE_GT_MONO] += ns_of(&mc) > ns_of(&m);
}

static struct bench_check *add(struct bench_checks *out, const char *check, const char *impl,
			       const char *g, uint64_t reads, uint64_t bad, const char *note)
{
	if (out->n >= sizeof out->v / sizeof *out->v)
		return NULL;
	struct bench_check *k = &out->v[out->n++];
	memset(k, 0, sizeof *k);
	snprintf(k->check, sizeof k->check, "%s", check);
	snprintf(k->impl, sizeof k->impl, "%s", impl);
	snprintf(k->guarantee, sizeof k->guarantee, "%s", g);
	k->reads = reads;
	k->violations = bad;
	snprintf(k->note, sizeof k->note, "%s", note ? note : "");
	return k;
}

/* ------------------------------------------------------------------ streaming */

struct stream {
	int (*gettime)(clockid_t, struct timespec *);
	clockid_t id;
	uint64_t reads;
	_Atomic int64_t latest;
	atomic_int stop;
	int cpu_pub, cpu_obs;
	uint64_t backward, self_backward;
	int64_t max_back, max_self_back;
};

static void *publisher(void *arg)
{
	struct stream *s = arg;
	struct timespec ts;
	bench_pin(s->cpu_pub);
	while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
		s->gettime(s->id, &ts);
		/* pairs with the observer's acquire load: the observer's read
		 * then happens after this read */
		atomic_store_explicit(&s->latest, ns_of(&ts), memory_order_release);
	}
	return NULL;
}

static void *observer(void *arg)
{
	struct stream *s = arg;
	struct timespec ts;
	bench_pin(s->cpu_obs);
	while (atomic_load_explicit(&s->latest, memory_order_acquire) == 0)
		;
	int64_t prev = 0;
	for (uint64_t i = 0; i < s->reads; i++) {
		int64_t seen = atomic_load_explicit(&s->latest, memory_order_acquire);
		s->gettime(s->id, &ts);
		int64_t now = ns_of(&ts);
		if (now < seen) {
			s->backward++;
			if (seen - now > s->max_back)
				s->max_back = seen - now;
		}
		if (now < prev) {
			s->self_backward++;
			if (prev - now > s->max_self_back)
				s->max_self_back = prev - now;
		}
		prev = now;
	}
	atomic_store_explicit(&s->stop, 1, memory_order_relaxed);
	return NULL;
}

static void stream_run(struct stream *s)
{
	int cpus[2];
	int n = bench_cpus(cpus, 2);
	s->cpu_pub = cpus[0];
	s->cpu_obs = cpus[n > 1 ? 1 : 0];
	pthread_t p, q;
	pthread_create(&p, NULL, publisher, s);
	pthread_create(&q, NULL, observer, s);
	pthread_join(q, NULL);
	pthread_join(p, NULL);
}

static int kernel_gettime(clockid_t id, struct timespec *ts)
{
	return clock_gettime(id, ts);
}

void guarantee_run(const struct bench_opts *o, const char *th_impl, int with_kernel,
		   struct bench_checks *out)
{
	const struct clocks kernel = {"kernel", kernel_gettime, gettimeofday, time};
	const struct clocks th = {th_impl, th_clock_gettime, th_gettimeofday, th_time};
	uint64_t kbad[NSAME] = {0}, tbad[NSAME] = {0}, iters = 0;

	/* Same thread: run across second boundaries, where time() and the
	 * coarse clocks lag the fine ones. */
	struct timespec r0, r1;
	clock_gettime(CLOCK_REALTIME, &r0);
	int64_t end = bench_now_ns() + (int64_t)(o->guarantee_s * 1e9);
	do {
		for (int i = 0; i < 1024; i++, iters++) {
			if (with_kernel)
				same_thread_step(&kernel, kbad);
			same_thread_step(&th, tbad);
		}
	} while (bench_now_ns() < end);
	clock_gettime(CLOCK_REALTIME, &r1);
	char note[64];
	snprintf(note, sizeof note, "%lld second boundaries", (long long)(r1.tv_sec - r0.tv_sec));
	for (int k = 0; k < NSAME; k++) {
		if (with_kernel)
			add(out, same_check[k].check, "kernel", same_check[k].g, iters, kbad[k], note);
		add(out, same_check[k].check, th_impl, same_check[k].g, iters, tbad[k], note);
	}

	/* Across threads, then within the observing thread. */
	static const struct {
		clockid_t id;
		const char *name;
		int kernel;
		const char *note;
	} streams[] = {
		{CLOCK_MONOTONIC, "MONOTONIC", 1, ""},
		{CLOCK_MONOTONIC_COARSE, "MONOTONIC_COARSE", 1, ""},
		{TH_CLOCK_MONOTONIC_RELAXED, "MONOTONIC_RELAXED", 0, "promised per thread only"},
	};
	for (size_t i = 0; i < sizeof streams / sizeof *streams; i++) {
		for (int k = with_kernel && streams[i].kernel ? 0 : 1; k < 2; k++) {
			struct stream s;
			memset(&s, 0, sizeof s);
			s.gettime = k == 0 ? kernel_gettime : th_clock_gettime;
			s.id = streams[i].id;
			s.reads = o->stream_reads;
			stream_run(&s);
			char check[80];
			snprintf(check, sizeof check, "%s cross-thread backward step", streams[i].name);
			struct bench_check *c =
				add(out, check, k == 0 ? "kernel" : th_impl, "G2", s.reads, s.backward, streams[i].note);
			if (c)
				c->max_step_ns = s.max_back;
			snprintf(check, sizeof check, "%s same-thread backward step", streams[i].name);
			c = add(out, check, k == 0 ? "kernel" : th_impl, "G2", s.reads, s.self_backward, "");
			if (c)
				c->max_step_ns = s.max_self_back;
		}
	}
}
