/* Small helpers shared by the tables. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench.h"

/* The raw system call: no implementation under test (the vDSO, timehands,
 * the preload's interposed libc call) times itself. A loop lasts ~10 ms or
 * more, so the ~1 us of a system call is noise. */
int64_t bench_now_ns(void)
{
	struct timespec ts;
	syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

int64_t bench_thread_cpu_ns(void)
{
	struct timespec ts;
	syscall(SYS_clock_gettime, CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Sorts v in place. */
double median(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double minimum(const double *v, int n)
{
	double m = n > 0 ? v[0] : 0;
	for (int i = 1; i < n; i++)
		if (v[i] < m)
			m = v[i];
	return m;
}

int bench_cpus(int *cpus, int max)
{
	cpu_set_t set;
	int n = 0;
	if (sched_getaffinity(0, sizeof set, &set) == 0)
		for (int c = 0; c < CPU_SETSIZE && n < max; c++)
			if (CPU_ISSET(c, &set))
				cpus[n++] = c;
	if (n == 0) {
		cpus[0] = 0;
		n = 1;
	}
	return n;
}

void bench_pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

struct bench_row *rows_add(struct bench_rows *r)
{
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 64;
		r->v = realloc(r->v, r->cap * sizeof *r->v);
		if (!r->v) {
			perror("timehands-bench");
			exit(1);
		}
	}
	struct bench_row *row = &r->v[r->n++];
	memset(row, 0, sizeof *row);
	return row;
}
