/*
 * Cross-CPU check of the counter: is a reading taken on one CPU after
 * another CPU's reading (ordered by a release/acquire handoff) never smaller?
 * timehandsd runs it at start; where it passes on every online CPU, the page
 * carries TH_PAGE_CROSS_CPU_CHECKED and clients on a clocksource the kernel
 * does not read from the counter (xen, hpet) may trust it, with the daemon's
 * continuous validation against the kernel behind it.
 */
#ifndef TH_DAEMON_CROSS_CPU_H
#define TH_DAEMON_CROSS_CPU_H

#include <stdint.h>

struct th_cross_cpu {
	int passed;          /* 1: no backward reading on any pair */
	int cpus_online;
	int cpus_checked;    /* CPUs paired with the first allowed one */
	uint64_t rounds;     /* handoffs per direction per pair */
	int64_t min_gap;     /* smallest later-minus-earlier reading seen, counts (negative: backwards) */
	int worst_cpu;       /* CPU of that reading */
	char reason[160];    /* why not passed; "" when passed */
};

/* Pairs the first CPU this process may run on with every other one, `rounds`
 * handoffs each way. Every wait is bounded. Returns r->passed. */
int th_cross_cpu_check(struct th_cross_cpu *r, unsigned rounds);

#endif
