/* Cross-CPU counter check; see cross_cpu.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cross_cpu.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "counter.h"

#define SPIN_LIMIT 200000000ul /* a partner that does not answer within this many polls fails the check */

struct pair {
	/* The reading handed over and whose turn it is share one cache line,
	 * apart from the rest, so that a handoff is one line transfer. */
	_Atomic uint64_t value __attribute__((aligned(64)));
	_Atomic uint32_t turn; /* odd: the partner's turn, even: the main thread's */
	int cpu __attribute__((aligned(64)));
	unsigned rounds;
	_Atomic int failed; /* the partner gave up waiting */
	int64_t min_gap;    /* partner's smallest (its reading - handed value) */
};

static int wait_turn(_Atomic uint32_t *turn, uint32_t want, _Atomic int *failed)
{
	for (unsigned long i = 0; i < SPIN_LIMIT; i++) {
		/* Acquire: pairs with the release store of `turn` by the other
		 * thread, which follows its store of `value`, so the value
		 * read next is the one handed over. */
		if (atomic_load_explicit(turn, memory_order_acquire) == want)
			return 0;
		/* Relaxed: a give-up flag; only its own value matters. */
		if (atomic_load_explicit(failed, memory_order_relaxed))
			return -1;
		if ((i & 1023) == 1023)
			sched_yield();
	}
	atomic_store_explicit(failed, 1, memory_order_relaxed);
	return -1;
}

static int pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *partner(void *arg)
{
	struct pair *p = arg;
	if (pin(p->cpu) != 0) {
		atomic_store_explicit(&p->failed, 1, memory_order_relaxed);
		return NULL;
	}
	p->min_gap = INT64_MAX;
	for (unsigned i = 0; i < p->rounds; i++) {
		if (wait_turn(&p->turn, 2 * i + 1, &p->failed))
			return NULL;
		/* Relaxed: ordered after the acquire of turn above. */
		uint64_t v = atomic_load_explicit(&p->value, memory_order_relaxed);
		/* Ordered read: taken after the acquire above (LFENCE / ISB),
		 * so it is later than the handed-over reading in real time. */
		uint64_t c = th_counter_ordered();
		int64_t gap = (int64_t)(c - v);
		if (gap < p->min_gap)
			p->min_gap = gap;
		/* Take a fresh reading to hand back, after the comparison;
		 * relaxed: published by the release store of turn below. */
		atomic_store_explicit(&p->value, th_counter_ordered(), memory_order_relaxed);
		/* Release: the value above is visible to the main thread when
		 * it acquires this turn. */
		atomic_store_explicit(&p->turn, 2 * i + 2, memory_order_release);
	}
	return NULL;
}

int th_cross_cpu_check(struct th_cross_cpu *r, unsigned rounds)
{
	memset(r, 0, sizeof *r);
	r->rounds = rounds;
	r->min_gap = INT64_MAX;
	r->worst_cpu = -1;
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	r->cpus_online = online > 0 ? (int)online : 1;
#if TH_COUNTER_KIND == 0
	snprintf(r->reason, sizeof r->reason, "no counter on this architecture");
	return 0;
#else
	cpu_set_t allowed, saved;
	if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
		snprintf(r->reason, sizeof r->reason, "sched_getaffinity failed");
		return 0;
	}
	saved = allowed;
	int first = -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &allowed)) {
			first = c;
			break;
		}
	if (first < 0 || pin(first) != 0) {
		snprintf(r->reason, sizeof r->reason, "cannot pin to a CPU");
		return 0;
	}
	r->cpus_checked = 1;
	int ok = 1;
	for (int c = first + 1; c < CPU_SETSIZE && ok; c++) {
		if (!CPU_ISSET(c, &allowed))
			continue;
		static struct pair p;
		memset(&p, 0, sizeof p);
		p.cpu = c;
		p.rounds = rounds;
		pthread_t t;
		if (pthread_create(&t, NULL, partner, &p) != 0) {
			snprintf(r->reason, sizeof r->reason, "cannot start a thread for CPU %d", c);
			ok = 0;
			break;
		}
		for (unsigned i = 0; i < rounds; i++) {
			/* Relaxed store, published by the release store of turn;
			 * pairs with the partner's acquire of turn. */
			atomic_store_explicit(&p.value, th_counter_ordered(), memory_order_relaxed);
			atomic_store_explicit(&p.turn, 2 * i + 1, memory_order_release);
			if (wait_turn(&p.turn, 2 * i + 2, &p.failed))
				break;
			/* Relaxed: ordered after the acquire in wait_turn. */
			uint64_t v = atomic_load_explicit(&p.value, memory_order_relaxed);
			uint64_t m = th_counter_ordered(); /* after the acquire in wait_turn */
			int64_t gap = (int64_t)(m - v);
			if (gap < r->min_gap) {
				r->min_gap = gap;
				r->worst_cpu = first;
			}
		}
		pthread_join(t, NULL);
		if (atomic_load_explicit(&p.failed, memory_order_relaxed)) {
			snprintf(r->reason, sizeof r->reason, "CPU %d did not answer the counter handoff in time", c);
			ok = 0;
			break;
		}
		if (p.min_gap < r->min_gap) {
			r->min_gap = p.min_gap;
			r->worst_cpu = c;
		}
		r->cpus_checked++;
		if (r->min_gap < 0) {
			snprintf(r->reason, sizeof r->reason,
				 "the counter went back by %lld counts between CPU %d and CPU %d",
				 (long long)-r->min_gap, first, c);
			ok = 0;
		}
	}
	sched_setaffinity(0, sizeof saved, &saved);
	if (ok && r->cpus_checked < r->cpus_online) {
		snprintf(r->reason, sizeof r->reason, "only %d of %d online CPUs may be used by timehandsd",
			 r->cpus_checked, r->cpus_online);
		ok = 0;
	}
	r->passed = ok;
	return ok;
#endif
}
