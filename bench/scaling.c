/*
 * Scalability table (seed 002 style): every thread issues the same number of
 * clock_gettime(CLOCK_MONOTONIC) calls; WALL is the time from the common
 * start until the last thread finishes. If reads scale, WALL stays flat up to
 * the core count and WALL/threads falls. The contenders are the vDSO,
 * timehands, and a clock that enforces monotonicity with a global
 * compare-and-swap on the last value returned: the design seed 002 removed
 * because every reader writes the same cache line.
 *
 * The per-call cost is the thread's own CPU time divided by its calls, so a
 * thread preempted by the host or by a neighbour's build does not count the
 * time it did not run; with more threads than cores it still shows what
 * sharing costs (the CAS line bouncing between cores).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "timehands.h"

#define NOINLINE __attribute__((noinline))
#define SCALE_OP "clock_gettime(CLOCK_MONOTONIC)"

static _Atomic int64_t naive_last;

/* Never returns less than any value returned before, by any thread: one
 * shared word, written by (nearly) every call. */
static NOINLINE int naive_cas_monotonic(struct timespec *ts)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	int64_t v = (int64_t)ts->tv_sec * NS_PER_S + ts->tv_nsec;
	int64_t last = atomic_load_explicit(&naive_last, memory_order_relaxed);
	do {
		if (v <= last) {
			v = last;
			break;
		}
	} while (!atomic_compare_exchange_weak_explicit(&naive_last, &last, v, memory_order_acq_rel,
						       memory_order_relaxed));
	ts->tv_sec = (time_t)(v / NS_PER_S);
	ts->tv_nsec = (long)(v % NS_PER_S);
	return 0;
}

static NOINLINE uint64_t loop_vdso(uint64_t n)
{
	uint64_t acc = 0;
	struct timespec ts = {0};
	for (uint64_t i = 0; i < n; i++) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		acc += (uint64_t)ts.tv_nsec;
	}
	return acc;
}

static NOINLINE uint64_t loop_th(uint64_t n)
{
	uint64_t acc = 0;
	struct timespec ts = {0};
	for (uint64_t i = 0; i < n; i++) {
		th_clock_gettime(CLOCK_MONOTONIC, &ts);
		acc += (uint64_t)ts.tv_nsec;
	}
	return acc;
}

static NOINLINE uint64_t loop_cas(uint64_t n)
{
	uint64_t acc = 0;
	struct timespec ts = {0};
	for (uint64_t i = 0; i < n; i++) {
		naive_cas_monotonic(&ts);
		acc += (uint64_t)ts.tv_nsec;
	}
	return acc;
}

enum { S_VDSO, S_TH, S_CAS, NSCALE };
static const char *const scale_name[NSCALE] = {"vdso", "timehands", "naive-cas"};
static uint64_t (*const scale_fn[NSCALE])(uint64_t) = {loop_vdso, loop_th, loop_cas};

extern volatile uint64_t bench_sink;

struct worker {
	pthread_t tid;
	pthread_barrier_t *start;
	uint64_t (*fn)(uint64_t);
	uint64_t calls;
	int cpu;
	int64_t end_ns, cpu_ns;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	bench_pin(w->cpu);
	pthread_barrier_wait(w->start);
	int64_t c0 = bench_thread_cpu_ns();
	uint64_t acc = w->fn(w->calls);
	int64_t c1 = bench_thread_cpu_ns();
	w->end_ns = bench_now_ns();
	w->cpu_ns = c1 - c0;
	__atomic_store_n(&bench_sink, acc, __ATOMIC_RELAXED); /* several workers: atomic, no ordering needed */
	return NULL;
}

/* One run: WALL in seconds; *per_call: mean thread CPU ns per call. */
static double run_threads(uint64_t (*fn)(uint64_t), int nthreads, uint64_t calls, const int *cpus,
			  int ncpus, double *per_call)
{
	struct worker *w = calloc((size_t)nthreads, sizeof *w);
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, (unsigned)nthreads + 1);
	int started = 0;
	for (int i = 0; i < nthreads; i++) {
		w[i] = (struct worker){0, &start, fn, calls, cpus[i % ncpus], 0, 0};
		if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]) != 0) {
			fprintf(stderr, "timehands-bench: cannot create thread %d\n", i);
			exit(1);
		}
		started++;
	}
	pthread_barrier_wait(&start);
	int64_t t0 = bench_now_ns(), end = t0;
	double cpu = 0;
	for (int i = 0; i < started; i++) {
		pthread_join(w[i].tid, NULL);
		if (w[i].end_ns > end)
			end = w[i].end_ns;
		cpu += (double)w[i].cpu_ns;
	}
	pthread_barrier_destroy(&start);
	free(w);
	*per_call = cpu / ((double)nthreads * (double)calls);
	return (double)(end - t0) / 1e9;
}

void scaling_run(const struct bench_opts *o, struct bench_rows *out)
{
	int cpus[1024];
	int ncpus = bench_cpus(cpus, 1024);
	/* 1 and 2 threads get three times the rounds: the per-call cost at 2
	 * threads vs 1 is the most noise-sensitive figure, and the cheapest. */
	int R = 3 * o->scale_rounds, T = o->nthreads;
	size_t cells = (size_t)NSCALE * (size_t)T * (size_t)R;
	double *wall = calloc(cells, sizeof(double)), *pc = calloc(cells, sizeof(double));
#define CELL(a, t, r) (((size_t)(a) * (size_t)T + (size_t)(t)) * (size_t)R + (size_t)(r))

	/* warm every path once (attach, page faults) */
	for (int a = 0; a < NSCALE; a++)
		bench_sink = scale_fn[a](100000);

	int runs[64] = {0};
	for (int r = 0; r < R; r++)
		for (int t = 0; t < T; t++) {
			if (o->threads[t] > 2 && r >= o->scale_rounds)
				continue;
			runs[t]++;
			for (int k = 0; k < NSCALE; k++) {
				int a = (k + r) % NSCALE;
				wall[CELL(a, t, r)] = run_threads(scale_fn[a], o->threads[t], o->scale_calls, cpus,
								  ncpus, &pc[CELL(a, t, r)]);
			}
		}

	int t1 = -1;
	for (int t = 0; t < T; t++)
		if (o->threads[t] == 1)
			t1 = t;
	double *tmp = calloc((size_t)R, sizeof(double));
	for (int a = 0; a < NSCALE; a++)
		for (int t = 0; t < T; t++) {
			int n = runs[t];
			struct bench_row *row = rows_add(out);
			snprintf(row->table, sizeof row->table, "scaling");
			snprintf(row->op, sizeof row->op, SCALE_OP);
			snprintf(row->impl, sizeof row->impl, "%s", scale_name[a]);
			row->threads = o->threads[t];
			row->calls = o->scale_calls;
			row->runs = n;
			memcpy(tmp, &wall[CELL(a, t, 0)], (size_t)n * sizeof(double));
			row->wall_s = median(tmp, n);
			memcpy(tmp, &pc[CELL(a, t, 0)], (size_t)n * sizeof(double));
			row->ns_per_call = median(tmp, n);
			row->ns_min = minimum(tmp, n);
			if (t1 >= 0) {
				/* rounds that ran both (the 1-thread runs are a superset) */
				for (int r = 0; r < n; r++)
					tmp[r] = pc[CELL(a, t, r)] / pc[CELL(a, t1, r)];
				row->ratio_1t = median(tmp, n);
			}
			for (int r = 0; r < n; r++)
				tmp[r] = pc[CELL(a, t, r)] / pc[CELL(S_VDSO, t, r)];
			row->ratio_vdso = median(tmp, n);
			row->vdso_ref_ns = 0;
			if (o->threads[t] > ncpus)
				snprintf(row->note, sizeof row->note, "more threads than the %d CPUs", ncpus);
		}
#undef CELL
	free(tmp);
	free(wall);
	free(pc);
}
