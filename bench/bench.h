/*
 * timehands-bench: the comparison a user asks for.
 *
 *   main.c       options, machine context, child processes (preload, shared
 *                page, CPU-time table), tables for people, JSON for machines
 *   percall.c    per-call cost of every operation x implementation, with the
 *                hardware floor, interleaved A B F A B F ... (seed 003 style)
 *   tails.c      single-read percentiles, quiet and while records are published
 *   scaling.c    1 M calls per thread for 1, 2, 4, 8 threads (seed 002 style)
 *   guarantee.c  counts of kernel / timehands guarantee violations
 *
 * Every measured loop sums its results into a register and stores the sum
 * once (a volatile store per call would cost as much as a coarse read).
 * The loops are timed with raw clock_gettime system calls (the thread's CPU
 * time for per-call loops, MONOTONIC for WALL), so that no implementation
 * under test times itself.
 */
#ifndef TH_BENCH_H
#define TH_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define NS_PER_S 1000000000LL

/* One result row, the unit of the JSON "results" array. */
struct bench_row {
	char table[16];      /* "percall", "floor", "scaling" */
	char op[64];
	char impl[32];
	int threads;
	double ns_per_call;  /* median */
	double ns_min;
	double ratio_vdso;   /* median of per-round ratios; 0 = n/a */
	double vdso_ref_ns;  /* the vDSO figure the ratio is taken against */
	char floor[24];      /* floor name; "" = none */
	double floor_ns;
	double ratio_floor;  /* median of per-round ratios; 0 = n/a */
	double over_floor_ns; /* median of per-round differences */
	int runs;
	uint64_t calls;      /* per run (per thread for scaling) */
	double wall_s;       /* scaling: median WALL */
	double ratio_1t;     /* scaling: per-call cost / the same at 1 thread */
	double p50, p99, p999, max_ns; /* tails: single reads */
	char note[96];
};

struct bench_rows {
	struct bench_row *v;
	size_t n, cap;
};

struct bench_row *rows_add(struct bench_rows *r);

/* A guarantee check: violations counted over the same number of reads. */
struct bench_check {
	char check[80];
	char impl[32];
	char guarantee[8];
	uint64_t reads;      /* comparisons made */
	uint64_t violations;
	int64_t max_step_ns; /* largest backward step seen, 0 if none */
	char note[64];
};

struct bench_checks {
	struct bench_check v[32];
	size_t n;
};

struct bench_opts {
	int quick;
	int rounds;          /* per-call rounds */
	double target_ms;    /* per-call loop length */
	uint64_t loop_calls; /* calls per per-call loop; 0: calibrated */
	int threads[16];
	int nthreads;
	uint64_t scale_calls; /* calls per thread in the scaling table */
	int scale_rounds;
	double guarantee_s;  /* duration of the same-thread guarantee loop */
	uint64_t stream_reads;
	int verbose;
};

/* Raw-syscall clocks for timing the loops. */
int64_t bench_now_ns(void);
int64_t bench_thread_cpu_ns(void);

double median(double *v, int n);
double minimum(const double *v, int n);

/* CPUs this process may run on, in order; returns how many. */
int bench_cpus(int *cpus, int max);
/* Pin the calling thread to one CPU (ignored on failure). */
void bench_pin(int cpu);

/*
 * Per-call table. `set` chooses the implementations measured in this
 * process: the parent measures syscall, vdso and timehands; a child under the
 * preload measures the libc calls (interposed) against libc's own entry
 * points; a child attached to a shared page measures the th_ API.
 * only_ops: NULL, or a comma-separated list of operation keys (percall.c).
 */
enum percall_set { SET_MAIN, SET_PRELOAD, SET_SHARED };
/* tails.c: single-read percentiles, quiet and while records are published. */
void tails_run(const struct bench_opts *o, enum percall_set set, const char *impl_name, struct bench_rows *out);
void percall_run(const struct bench_opts *o, enum percall_set set, const char *impl_name,
		 const char *only_ops, struct bench_rows *out);

void scaling_run(const struct bench_opts *o, struct bench_rows *out);

void guarantee_run(const struct bench_opts *o, const char *th_impl, int with_kernel,
		   struct bench_checks *out);

#endif
