/*
 * Tails: the distribution of single reads (p50, p99, p99.9, max), not only
 * their mean. A median per loop hides the reads that retry, wait or take a
 * slow path; doc/design.md asks that timehands' p99.9 and max be no higher than
 * the vDSO's, also while records are being published.
 *
 * Each read is timed on its own with the ordered counter on either side
 * (the same fence pair for every implementation; the "empty" row is that
 * pair with no read between). Implementations are interleaved in blocks,
 * so that a disturbance of the machine falls on all of them alike; each
 * block starts after a few hundred unrecorded reads. Two
 * conditions:
 *   quiet       one thread reads;
 *   publishing  a second thread reads the same clock in a loop meanwhile:
 *               the kernel updates its data every tick (the vDSO's readers
 *               retry across an update), and timehands' records are wound
 *               up as those updates come due, by either thread; in the
 *               shared child the daemon publishes as well.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "timehands.h"

#if defined(__x86_64__)
#include <x86intrin.h>
static inline uint64_t stamp(void)
{
	_mm_lfence();
	uint64_t c = __rdtsc();
	_mm_lfence();
	return c;
}
#define HAVE_STAMP 1
#elif defined(__aarch64__)
static inline uint64_t stamp(void)
{
	uint64_t v;
	__asm__ volatile("isb\n\tmrs %0, cntvct_el0\n\tisb" : "=r"(v)::"memory");
	return v;
}
#define HAVE_STAMP 1
#else
#define HAVE_STAMP 0
#endif

#if HAVE_STAMP

typedef int (*read_fn)(clockid_t, struct timespec *);

static int (*vdso_fn)(clockid_t, struct timespec *);

static int rd_empty(clockid_t id, struct timespec *ts)
{
	(void)id;
	(void)ts;
	return 0;
}
static int rd_vdso(clockid_t id, struct timespec *ts)
{
	return vdso_fn(id, ts);
}
/* the header's inline read of a constant id, one function per id */
static int rd_th_mono(clockid_t id, struct timespec *ts)
{
	(void)id;
	return th_clock_gettime(CLOCK_MONOTONIC, ts);
}
static int rd_th_real(clockid_t id, struct timespec *ts)
{
	(void)id;
	return th_clock_gettime(CLOCK_REALTIME, ts);
}
static int rd_th_call(clockid_t id, struct timespec *ts)
{
	return (th_clock_gettime)(id, ts);
}
/* libc's clock_gettime as the program calls it: the preload's, under it */
static int rd_libc(clockid_t id, struct timespec *ts)
{
	return clock_gettime(id, ts);
}

struct impl {
	const char *name; /* NULL: the set's own name; "(call)": that name and " (call)" */
	read_fn fn[2];    /* MONOTONIC, REALTIME */
};

static const clockid_t ids[2] = {CLOCK_MONOTONIC, CLOCK_REALTIME};
static const char *const id_names[2] = {"clock_gettime(CLOCK_MONOTONIC)", "clock_gettime(CLOCK_REALTIME)"};

/* The helper of the publishing condition. */
static struct {
	_Atomic int stop;
	read_fn fn;
	clockid_t id;
} helper;

static void *helper_main(void *arg)
{
	(void)arg;
	struct timespec ts;
	uint64_t acc = 0;
	while (!atomic_load_explicit(&helper.stop, memory_order_relaxed)) {
		read_fn f = __atomic_load_n(&helper.fn, __ATOMIC_RELAXED);
		clockid_t id = __atomic_load_n(&helper.id, __ATOMIC_RELAXED);
		for (int i = 0; i < 64; i++) {
			f(id, &ts);
			acc += (uint64_t)ts.tv_nsec;
		}
	}
	volatile uint64_t sink = acc;
	(void)sink;
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Counter ticks per ns, against the raw MONOTONIC system call. */
static double ticks_per_ns(void)
{
	int64_t t0 = bench_now_ns();
	uint64_t c0 = stamp();
	while (bench_now_ns() - t0 < 20000000)
		;
	int64_t t1 = bench_now_ns();
	uint64_t c1 = stamp();
	return (double)(c1 - c0) / (double)(t1 - t0);
}

/* The counter's step: the greatest common divisor of the differences of
 * successive stamps (1 where the counter counts every tick; some CPUs
 * advance it in steps of a slower reference clock). */
static uint64_t stamp_quantum(void)
{
	uint64_t g = 0, prev = stamp();
	for (int i = 0; i < 4096; i++) {
		uint64_t c = stamp(), d = c - prev;
		prev = c;
		while (d) {
			uint64_t t = g % d;
			g = d;
			d = t;
		}
	}
	return g ? g : 1;
}

/* The p-quantile (num/den) of n sorted durations counted in whole steps qt
 * of the stamp: a read's duration is counted as the step below or the
 * step above it, with the odds of where it fell between them, so a value
 * that holds the quantile is taken as spread evenly over the step around
 * it and the quantile placed at its share of the run of equal values
 * (with qt = 1 the value itself, to within a tick). */
static double quantile(const uint32_t *v, size_t n, size_t num, size_t den, uint64_t qt)
{
	size_t i = n * num / den;
	if (i >= n)
		i = n - 1;
	size_t lo = i, hi = i;
	while (lo > 0 && v[lo - 1] == v[i])
		lo--;
	while (hi + 1 < n && v[hi + 1] == v[i])
		hi++;
	double f = ((double)(i - lo) + 0.5) / (double)(hi - lo + 1);
	return (double)v[i] + (f - 0.5) * (double)qt;
}

void tails_run(const struct bench_opts *o, enum percall_set set, const char *impl_name, struct bench_rows *out)
{
	void *h = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	*(void **)&vdso_fn = h ? dlsym(h, "clock_gettime") : NULL;
	if (!vdso_fn)
		return;
	struct impl impls[4];
	int ni = 0;
	impls[ni++] = (struct impl){"empty", {rd_empty, rd_empty}};
	impls[ni++] = (struct impl){"vdso", {rd_vdso, rd_vdso}};
	if (set == SET_PRELOAD) {
		impls[ni++] = (struct impl){NULL, {rd_libc, rd_libc}};
	} else {
		impls[ni++] = (struct impl){NULL, {rd_th_mono, rd_th_real}};
		impls[ni++] = (struct impl){"(call)", {rd_th_call, rd_th_call}};
	}
	const int block = o->quick ? 1000 : 1000, blocks = o->quick ? 20 : 1000;
	const size_t per = (size_t)block * (size_t)blocks;
	uint32_t *d = malloc(sizeof *d * per * (size_t)ni);
	if (!d)
		return;
	double tpn = ticks_per_ns();
	uint64_t qt = stamp_quantum();
	for (int cond = 0; cond < 2; cond++) {
		pthread_t t;
		int helper_on = 0;
		for (int k = 0; k < 2; k++) {
			if (cond == 1 && !helper_on) {
				atomic_store(&helper.stop, 0);
				__atomic_store_n(&helper.fn, impls[ni - 1].fn[k], __ATOMIC_RELAXED);
				__atomic_store_n(&helper.id, ids[k], __ATOMIC_RELAXED);
				helper_on = pthread_create(&t, NULL, helper_main, NULL) == 0;
			}
			size_t n[4] = {0, 0, 0, 0};
			for (int b = 0; b < blocks; b++) {
				for (int j = 0; j < ni; j++) {
					int i = (j + b) % ni; /* rotate the order */
					read_fn f = impls[i].fn[k];
					if (helper_on)
						__atomic_store_n(&helper.fn, f == rd_empty ? impls[1].fn[k] : f,
								 __ATOMIC_RELAXED);
					struct timespec ts;
					uint32_t *dst = d + per * (size_t)i + n[i];
					/* warm-up: the first reads after another
					 * implementation's block find its code and
					 * branch history cold; not its tail */
					for (int r = 0; r < 128; r++)
						f(ids[k], &ts);
					for (int r = 0; r < block; r++) {
						uint64_t a = stamp();
						f(ids[k], &ts);
						uint64_t z = stamp();
						uint64_t dt = z - a;
						dst[r] = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
					}
					n[i] += (size_t)block;
				}
			}
			for (int i = 0; i < ni; i++) {
				uint32_t *v = d + per * (size_t)i;
				qsort(v, n[i], sizeof *v, cmp_u32);
				struct bench_row *row = rows_add(out);
				snprintf(row->table, sizeof row->table, "tails");
				snprintf(row->op, sizeof row->op, "%s, %s", id_names[k], cond ? "publishing" : "quiet");
				const char *own = set == SET_MAIN ? "timehands" : impl_name;
				if (!impls[i].name)
					snprintf(row->impl, sizeof row->impl, "%s", own);
				else if (strcmp(impls[i].name, "(call)") == 0)
					snprintf(row->impl, sizeof row->impl, "%s (call)", own);
				else
					snprintf(row->impl, sizeof row->impl, "%s", impls[i].name);
				row->threads = cond ? 2 : 1;
				row->p50 = quantile(v, n[i], 1, 2, qt) / tpn;
				row->p99 = quantile(v, n[i], 99, 100, qt) / tpn;
				row->p999 = quantile(v, n[i], 999, 1000, qt) / tpn;
				row->max_ns = v[n[i] - 1] / tpn;
				row->ns_per_call = row->p50;
				row->ns_min = v[0] / tpn;
				row->runs = blocks;
				row->calls = n[i];
				if (set != SET_MAIN)
					snprintf(row->note, sizeof row->note, "measured in the %s process", impl_name);
			}
			if (helper_on && k == 1) {
				atomic_store(&helper.stop, 1);
				pthread_join(t, NULL);
				helper_on = 0;
			} else if (helper_on) {
				/* the next clock: the helper reads it from now on */
				__atomic_store_n(&helper.id, ids[k + 1], __ATOMIC_RELAXED);
			}
		}
	}
	free(d);
}

#else
void tails_run(const struct bench_opts *o, enum percall_set set, const char *impl_name, struct bench_rows *out)
{
	(void)o;
	(void)set;
	(void)impl_name;
	(void)out;
}
#endif
