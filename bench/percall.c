/*
 * Per-call table (FreeBSD syscall_timing style, seed 003): median ns per call
 * of every operation under every implementation, next to the hardware floor.
 *
 * Each round runs, for every operation, its contenders and then the floor
 * that operation is compared with (A B F, A B F, ...); the start of the
 * sequence rotates from round to round so that no contender always follows
 * the same neighbour. Ratios are taken per round (contender / reference of
 * the same round) and their median reported, which cancels slow drifts of a
 * shared, noisy machine better than a ratio of medians.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "bench.h"
#include "timehands.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#define NOINLINE __attribute__((noinline))

typedef uint64_t (*loop_fn)(uint64_t n);

/* libc's own entry points, found in libc itself rather than through the
 * global scope: under the preload these still reach the vDSO. */
static struct {
	int (*clock_gettime)(clockid_t, struct timespec *);
	int (*gettimeofday)(struct timeval *, void *);
	time_t (*time)(time_t *);
	int (*timespec_get)(struct timespec *, int);
} libc_fn;

static void libc_fn_init(void)
{
	void *h = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return;
	*(void **)&libc_fn.clock_gettime = dlsym(h, "clock_gettime");
	*(void **)&libc_fn.gettimeofday = dlsym(h, "gettimeofday");
	*(void **)&libc_fn.time = dlsym(h, "time");
	*(void **)&libc_fn.timespec_get = dlsym(h, "timespec_get");
}

/* ------------------------------------------------------------------ loops */

/* A tight loop of n calls; the results are summed into a register and the
 * sum returned (the caller stores it once). */
#define LOOP(name, decl, call, value)                                  \
	static NOINLINE uint64_t name(uint64_t n)                      \
	{                                                              \
		uint64_t acc = 0;                                      \
		decl;                                                  \
		for (uint64_t i = 0; i < n; i++) {                     \
			call;                                          \
			acc += (uint64_t)(value);                      \
		}                                                      \
		return acc;                                            \
	}

#define TS_DECL struct timespec ts = {0}
#define TV_DECL struct timeval tv = {0}

#define CLOCK_LOOPS(tag, id)                                                            \
	LOOP(sys_##tag, TS_DECL, syscall(SYS_clock_gettime, id, &ts), ts.tv_nsec)       \
	LOOP(libc_##tag, TS_DECL, clock_gettime(id, &ts), ts.tv_nsec)                   \
	LOOP(th_##tag, TS_DECL, th_clock_gettime(id, &ts), ts.tv_nsec)                  \
	LOOP(ptr_##tag, TS_DECL; int (*f)(clockid_t, struct timespec *) = libc_fn.clock_gettime, \
	     f(id, &ts), ts.tv_nsec)

CLOCK_LOOPS(realtime, CLOCK_REALTIME)
CLOCK_LOOPS(monotonic, CLOCK_MONOTONIC)
CLOCK_LOOPS(raw, CLOCK_MONOTONIC_RAW)
CLOCK_LOOPS(boottime, CLOCK_BOOTTIME)
CLOCK_LOOPS(tai, CLOCK_TAI)
CLOCK_LOOPS(realtime_coarse, CLOCK_REALTIME_COARSE)
CLOCK_LOOPS(monotonic_coarse, CLOCK_MONOTONIC_COARSE)
/* The extension ids: only timehands (and the preload, which serves them
 * through libc's clock_gettime) knows them. */
LOOP(th_realtime_relaxed, TS_DECL, th_clock_gettime(TH_CLOCK_REALTIME_RELAXED, &ts), ts.tv_nsec)
LOOP(libc_realtime_relaxed, TS_DECL, clock_gettime(TH_CLOCK_REALTIME_RELAXED, &ts), ts.tv_nsec)
LOOP(th_monotonic_relaxed, TS_DECL, th_clock_gettime(TH_CLOCK_MONOTONIC_RELAXED, &ts), ts.tv_nsec)
LOOP(libc_monotonic_relaxed, TS_DECL, clock_gettime(TH_CLOCK_MONOTONIC_RELAXED, &ts), ts.tv_nsec)

LOOP(sys_gettimeofday, TV_DECL, syscall(SYS_gettimeofday, &tv, NULL), tv.tv_usec)
LOOP(libc_gettimeofday, TV_DECL, gettimeofday(&tv, NULL), tv.tv_usec)
LOOP(th_gettimeofday_loop, TV_DECL, th_gettimeofday(&tv, NULL), tv.tv_usec)
LOOP(ptr_gettimeofday, TV_DECL; int (*f)(struct timeval *, void *) = libc_fn.gettimeofday,
     f(&tv, NULL), tv.tv_usec)

#ifdef SYS_time
LOOP(sys_time, time_t t = 0, t = (time_t)syscall(SYS_time, NULL), t)
#define SYS_TIME_LOOP sys_time
#else
#define SYS_TIME_LOOP NULL
#endif
LOOP(libc_time, time_t t = 0, t = time(NULL), t)
/* th_time() is an inline header fast path where the compiler allows; the
 * parenthesised name is the library call behind it. */
LOOP(th_time_loop, time_t t = 0, t = th_time(NULL), t)
LOOP(th_time_call, time_t t = 0, t = (th_time)(NULL), t)
/* th_clock_gettime() with a constant id is the header's inline path where it
 * has one; the parenthesised name is the library call behind it. */
LOOP(th_monotonic_call, TS_DECL, (th_clock_gettime)(CLOCK_MONOTONIC, &ts), ts.tv_nsec)
LOOP(th_realtime_call, TS_DECL, (th_clock_gettime)(CLOCK_REALTIME, &ts), ts.tv_nsec)
LOOP(ptr_time, time_t t = 0; time_t (*f)(time_t *) = libc_fn.time, t = f(NULL), t)

/* timespec_get(TIME_UTC) is clock_gettime(CLOCK_REALTIME) underneath; the
 * linked API has no twin of it. */
LOOP(libc_timespec_get, TS_DECL, timespec_get(&ts, TIME_UTC), ts.tv_nsec)
LOOP(ptr_timespec_get, TS_DECL; int (*f)(struct timespec *, int) = libc_fn.timespec_get,
     f(&ts, TIME_UTC), ts.tv_nsec)

/* ------------------------------------------------------------------ floors */

static uint64_t floor_word = 1;

LOOP(floor_load, , , *(volatile uint64_t *)&floor_word)
#if defined(__x86_64__)
#define CTR_READ() __rdtsc()
#define CTR_FENCE() _mm_lfence()
#define FLOOR_NAMES                                                                                 \
	{"load", "rdtsc;mul", "lfence;rdtsc;mul", "lfence;rdtsc;mul;/1000", "seq;rdtsc;mul;timespec", \
	 "seq;lfence;rdtsc;mul;timespec"}
#define HAVE_COUNTER_FLOOR 1
#elif defined(__aarch64__)
static inline uint64_t cntvct(void)
{
	uint64_t v;
	__asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
	return v;
}
#define CTR_READ() cntvct()
#define CTR_FENCE() __asm__ volatile("isb" ::: "memory")
#define FLOOR_NAMES                                                                                 \
	{"load", "cntvct;mul", "isb;cntvct;mul", "isb;cntvct;mul;/1000", "seq;cntvct;mul;timespec", \
	 "seq;isb;cntvct;mul;timespec"}
#define HAVE_COUNTER_FLOOR 1
#else
#define FLOOR_NAMES {"load", "", "", "", "", ""}
#define HAVE_COUNTER_FLOOR 0
#endif

#if HAVE_COUNTER_FLOOR
/* What any reader that scales the counter costs at least (doc/design.md's
 * floors): the counter read, unordered or ordered, then one
 * multiply-add-shift by a rate and offset loaded each time. */
static struct {
	uint64_t k, m;
} conv_params = {12345, (uint64_t)1 << 31};
#define CONV(c) \
	((__atomic_load_n(&conv_params.k, __ATOMIC_RELAXED) + (c) * __atomic_load_n(&conv_params.m, __ATOMIC_RELAXED)) >> 32)
LOOP(floor_conv_unordered, , , CONV(CTR_READ()))
LOOP(floor_conv, , CTR_FENCE(), CONV(CTR_READ()))
/* gettimeofday's own part of the floor: the same, then the division to
 * microseconds that every gettimeofday ends with (reported beside its
 * target, which is stated against the floor above). */
LOOP(floor_conv_usec, , CTR_FENCE(), (uint32_t)CONV(CTR_READ()) / 1000u)

/*
 * The least a reader returning a timespec does, beside the floors above (a
 * target that this one misses cannot be met by any such reader here): a
 * sequence count read before and checked after, the counter, one
 * multiply-add-shift from a base loaded under it, the carry of the
 * nanoseconds into the seconds, and the two stores. No writer runs; the
 * rate keeps the nanoseconds far below a second, so the carry is never
 * taken.
 */
static struct {
	_Atomic uint32_t seq;
	uint64_t base, mult, sec, nsec;
} seq_rec = {0, 0, 1, 1700000000, 12345};

static inline __attribute__((always_inline)) void seq_read(struct timespec *ts, int ordered)
{
	uint32_t s;
	uint64_t c, sec, ns;
	do {
		/* Acquire: the copy below comes after the count, as a
		 * writer's record would need. */
		s = atomic_load_explicit(&seq_rec.seq, memory_order_acquire);
		if (ordered)
			CTR_FENCE();
		c = CTR_READ();
		sec = __atomic_load_n(&seq_rec.sec, __ATOMIC_RELAXED);
		ns = __atomic_load_n(&seq_rec.nsec, __ATOMIC_RELAXED) +
		     (((c - __atomic_load_n(&seq_rec.base, __ATOMIC_RELAXED)) *
		       __atomic_load_n(&seq_rec.mult, __ATOMIC_RELAXED)) >>
		      32);
		/* the copy before the check of the count */
		atomic_thread_fence(memory_order_acquire);
	} while (atomic_load_explicit(&seq_rec.seq, memory_order_relaxed) != s);
	if (ns >= 1000000000u) {
		ns -= 1000000000u;
		sec++;
	}
	ts->tv_sec = (time_t)sec;
	ts->tv_nsec = (long)ns;
}
LOOP(floor_seq_unordered, TS_DECL, seq_read(&ts, 0), ts.tv_nsec)
LOOP(floor_seq, TS_DECL, seq_read(&ts, 1), ts.tv_nsec)
#endif

enum floor_kind { F_LOAD, F_CONV_UNORDERED, F_CONV, F_CONV_USEC, F_SEQ_UNORDERED, F_SEQ, NFLOOR };
static const char *const floor_name[NFLOOR] = FLOOR_NAMES;
static const loop_fn floor_fn[NFLOOR] = {
#if HAVE_COUNTER_FLOOR
	floor_load, floor_conv_unordered, floor_conv, floor_conv_usec, floor_seq_unordered, floor_seq
#else
	floor_load, NULL, NULL, NULL, NULL, NULL
#endif
};

/* ------------------------------------------------------------------ operations */

enum impl { I_SYS, I_LIBC, I_TH, I_PTR, NIMPL };

struct op {
	const char *key;   /* for --ops */
	const char *name;
	clockid_t id;      /* probed before measuring; -1: nothing to probe */
	int floor;         /* enum floor_kind */
	int floor2;        /* a second floor measured beside it, 0: none */
	int ref;           /* op whose vDSO figure is the reference */
	loop_fn fn[NIMPL];
};

enum {
	OP_REALTIME, OP_MONOTONIC, OP_RAW, OP_BOOTTIME, OP_TAI, OP_REALTIME_COARSE,
	OP_MONOTONIC_COARSE, OP_MONOTONIC_CALL, OP_REALTIME_CALL, OP_GETTIMEOFDAY, OP_TIME, OP_TIME_CALL,
	OP_TIMESPEC_GET, OP_REALTIME_RELAXED,
	OP_MONOTONIC_RELAXED, NOP
};

/* Floors (doc/design.md): a fine reading's is the ordered counter read and one
 * scaling, a relaxed one's the unordered read and one scaling; beside them,
 * a fine or relaxed timespec's minimal sequence-locked reader. */
#define CLOCK_OP(key, name, id, floor, self, tag) \
	{key, name, id, floor, (floor) == F_CONV ? F_SEQ : 0, self, {sys_##tag, libc_##tag, th_##tag, ptr_##tag}}

static const struct op ops[NOP] = {
	CLOCK_OP("realtime", "clock_gettime(CLOCK_REALTIME)", CLOCK_REALTIME, F_CONV, OP_REALTIME, realtime),
	CLOCK_OP("monotonic", "clock_gettime(CLOCK_MONOTONIC)", CLOCK_MONOTONIC, F_CONV, OP_MONOTONIC, monotonic),
	CLOCK_OP("raw", "clock_gettime(CLOCK_MONOTONIC_RAW)", CLOCK_MONOTONIC_RAW, F_CONV, OP_RAW, raw),
	CLOCK_OP("boottime", "clock_gettime(CLOCK_BOOTTIME)", CLOCK_BOOTTIME, F_CONV, OP_BOOTTIME, boottime),
	CLOCK_OP("tai", "clock_gettime(CLOCK_TAI)", CLOCK_TAI, F_CONV, OP_TAI, tai),
	CLOCK_OP("realtime_coarse", "clock_gettime(CLOCK_REALTIME_COARSE)", CLOCK_REALTIME_COARSE, F_LOAD,
		 OP_REALTIME_COARSE, realtime_coarse),
	CLOCK_OP("monotonic_coarse", "clock_gettime(CLOCK_MONOTONIC_COARSE)", CLOCK_MONOTONIC_COARSE, F_LOAD,
		 OP_MONOTONIC_COARSE, monotonic_coarse),
	{"monotonic_call", "clock_gettime(CLOCK_MONOTONIC) (th_clock_gettime library call)", CLOCK_MONOTONIC, F_CONV, F_SEQ,
	 OP_MONOTONIC, {NULL, NULL, th_monotonic_call, NULL}},
	{"realtime_call", "clock_gettime(CLOCK_REALTIME) (th_clock_gettime library call)", CLOCK_REALTIME, F_CONV, F_SEQ,
	 OP_REALTIME, {NULL, NULL, th_realtime_call, NULL}},
	{"gettimeofday", "gettimeofday", (clockid_t)-1, F_CONV, F_CONV_USEC, OP_GETTIMEOFDAY,
	 {sys_gettimeofday, libc_gettimeofday, th_gettimeofday_loop, ptr_gettimeofday}},
	{"time", "time", (clockid_t)-1, F_LOAD, 0, OP_TIME, {SYS_TIME_LOOP, libc_time, th_time_loop, ptr_time}},
	{"time_call", "time (th_time library call)", (clockid_t)-1, F_LOAD, 0, OP_TIME, {NULL, NULL, th_time_call, NULL}},
	{"timespec_get", "timespec_get(TIME_UTC)", (clockid_t)-1, F_CONV, F_SEQ, OP_TIMESPEC_GET,
	 {sys_realtime, libc_timespec_get, NULL, ptr_timespec_get}},
	{"realtime_relaxed", "clock_gettime(TH_CLOCK_REALTIME_RELAXED)", TH_CLOCK_REALTIME_RELAXED,
	 F_CONV_UNORDERED, F_SEQ_UNORDERED, OP_REALTIME, {NULL, libc_realtime_relaxed, th_realtime_relaxed, NULL}},
	{"monotonic_relaxed", "clock_gettime(TH_CLOCK_MONOTONIC_RELAXED)", TH_CLOCK_MONOTONIC_RELAXED,
	 F_CONV_UNORDERED, F_SEQ_UNORDERED, OP_MONOTONIC, {NULL, libc_monotonic_relaxed, th_monotonic_relaxed, NULL}},
};

static int probe(int op, int impl)
{
	clockid_t id = ops[op].id;
	struct timespec ts;
	if (!ops[op].fn[impl])
		return 0;
	if (impl == I_PTR && !libc_fn.clock_gettime)
		return 0;
	if (id == (clockid_t)-1)
		return 1;
	switch (impl) {
	case I_SYS: return syscall(SYS_clock_gettime, id, &ts) == 0;
	case I_LIBC: return clock_gettime(id, &ts) == 0;
	case I_TH: return th_clock_gettime(id, &ts) == 0;
	default: return libc_fn.clock_gettime(id, &ts) == 0;
	}
}

/* ------------------------------------------------------------------ engine */

volatile uint64_t bench_sink;

struct contender {
	int op, impl;      /* impl -1: the op's floor, -2: its second floor */
	int report;        /* a row of its own (else only a reference) */
	uint64_t n;
	double *ns;        /* one sample per run */
	int nsamples;
};

/* Each floor contender's loop and the pool it adds to. */
static int floor_of(const struct contender *x)
{
	return x->impl == -2 ? ops[x->op].floor2 : ops[x->op].floor;
}

static loop_fn loop_of(const struct contender *x)
{
	return x->impl < 0 ? floor_fn[floor_of(x)] : ops[x->op].fn[x->impl];
}

/* Timed by the thread's CPU time: a loop that a neighbour's process
 * preempts does not count the time it did not run (on an idle machine the
 * two clocks agree to 0.1 %). */
static double run_once(loop_fn f, uint64_t n)
{
	int64_t t0 = bench_thread_cpu_ns();
	uint64_t acc = f(n);
	int64_t t1 = bench_thread_cpu_ns();
	bench_sink = acc;
	return (double)(t1 - t0) / (double)n;
}

/* Loop length: about target_ms, and 10^6..10^7 calls for anything fast
 * (under 200 ns); slow calls (system calls) get as long a loop with fewer
 * calls. */
static uint64_t calibrate(loop_fn f, double target_ms)
{
	run_once(f, 10000);
	double cost = run_once(f, 10000);
	double n = target_ms * 1e6 / (cost > 0.05 ? cost : 0.05);
	double lo = cost < 200 ? 1e6 : 1e4;
	if (n < lo)
		n = lo;
	if (n > 1e7)
		n = 1e7;
	return (uint64_t)n;
}

static int op_selected(const char *only, int op)
{
	if (!only || !*only)
		return 1;
	size_t k = strlen(ops[op].key);
	for (const char *p = only; *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == k && strncmp(p, ops[op].key, k) == 0)
			return 1;
		p += len + (e ? 1 : 0);
	}
	return 0;
}

/* Per-round a/b (or a-b): both ran in the same round, side by side. */
static int ratio_samples(const struct contender *a, const struct contender *b, double *out, int diff)
{
	int n = a->nsamples < b->nsamples ? a->nsamples : b->nsamples;
	for (int i = 0; i < n; i++)
		out[i] = diff ? a->ns[i] - b->ns[i] : a->ns[i] / b->ns[i];
	return n;
}

void percall_run(const struct bench_opts *o, enum percall_set set, const char *impl_name,
		 const char *only, struct bench_rows *out)
{
	static const char *const main_names[NIMPL] = {"syscall", "vdso", "timehands", "vdso"};
	int measured[NIMPL] = {0}, ref_impl;
	libc_fn_init();
	switch (set) {
	case SET_MAIN:
		measured[I_SYS] = measured[I_LIBC] = measured[I_TH] = 1;
		ref_impl = I_LIBC;
		break;
	case SET_PRELOAD:
		measured[I_LIBC] = 1;
		ref_impl = I_PTR;
		break;
	default:
		measured[I_TH] = 1;
		ref_impl = I_LIBC;
		break;
	}

	/* The contenders of each op, its vDSO reference, then its floors (the
	 * op's own last). */
	struct contender *c = calloc(NOP * (NIMPL + 2), sizeof *c);
	int first[NOP], count[NOP], refc[NOP], nc = 0;
	int rounds = o->rounds;
	int needed[NOP] = {0};
	for (int op = 0; op < NOP; op++)
		if (op_selected(only, op))
			needed[ops[op].ref] = 1;
	for (int op = 0; op < NOP; op++) {
		first[op] = nc;
		refc[op] = -1;
		int sel = op_selected(only, op), reported = 0;
		for (int im = 0; im < NIMPL; im++) {
			int report = sel && measured[im];
			if (!report && !(im == ref_impl && (sel || needed[op])))
				continue;
			if (!probe(op, im))
				continue;
			if (im == ref_impl)
				refc[op] = nc;
			reported |= report;
			c[nc++] = (struct contender){op, im, report, 0, NULL, 0};
		}
		if (reported && ops[op].floor2 && floor_fn[ops[op].floor2])
			c[nc++] = (struct contender){op, -2, 0, 0, NULL, 0};
		if (reported && floor_fn[ops[op].floor])
			c[nc++] = (struct contender){op, -1, 0, 0, NULL, 0};
		count[op] = nc - first[op];
	}
	for (int i = 0; i < nc; i++) {
		loop_fn f = loop_of(&c[i]);
		c[i].n = o->loop_calls ? o->loop_calls : calibrate(f, o->target_ms);
		c[i].ns = calloc((size_t)rounds, sizeof(double));
	}

	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < NOP; k++) {
			int op = (k + r) % NOP;
			int m = count[op];
			/* contenders rotated, the floors (last) always right after them */
			int nf = 0;
			while (nf < m && c[first[op] + m - 1 - nf].impl < 0)
				nf++;
			for (int j = 0; j < m; j++) {
				int idx = j < m - nf ? first[op] + (j + r) % (m - nf) : first[op] + j;
				struct contender *x = &c[idx];
				x->ns[x->nsamples++] = run_once(loop_of(x), x->n);
			}
		}
	}

	/* Floors pooled over every op that used them. */
	double *pool[NFLOOR];
	int npool[NFLOOR] = {0};
	for (int f = 0; f < NFLOOR; f++)
		pool[f] = calloc((size_t)(rounds * NOP), sizeof(double));
	for (int i = 0; i < nc; i++)
		if (c[i].impl < 0)
			for (int s = 0; s < c[i].nsamples; s++)
				pool[floor_of(&c[i])][npool[floor_of(&c[i])]++] = c[i].ns[s];
	double floor_med[NFLOOR];
	for (int f = 0; f < NFLOOR; f++)
		floor_med[f] = npool[f] ? median(pool[f], npool[f]) : 0;

	double *tmp = calloc((size_t)rounds, sizeof(double));
	for (int i = 0; i < nc; i++) {
		struct contender *x = &c[i];
		if (!x->report)
			continue;
		const struct op *p = &ops[x->op];
		struct bench_row *row = rows_add(out);
		snprintf(row->table, sizeof row->table, "percall");
		snprintf(row->op, sizeof row->op, "%s", p->name);
		snprintf(row->impl, sizeof row->impl, "%s", set == SET_MAIN ? main_names[x->impl] : impl_name);
		row->threads = 1;
		memcpy(tmp, x->ns, (size_t)x->nsamples * sizeof(double));
		row->ns_per_call = median(tmp, x->nsamples);
		row->ns_min = minimum(x->ns, x->nsamples);
		row->runs = x->nsamples;
		row->calls = x->n;
		int rc = refc[p->ref];
		if (rc >= 0 && x->impl != ref_impl) {
			int n = ratio_samples(x, &c[rc], tmp, 0);
			row->ratio_vdso = median(tmp, n);
			memcpy(tmp, c[rc].ns, (size_t)c[rc].nsamples * sizeof(double));
			row->vdso_ref_ns = median(tmp, c[rc].nsamples);
		} else if (rc >= 0) {
			row->ratio_vdso = 1.0;
			row->vdso_ref_ns = row->ns_per_call;
		}
		int fc = first[x->op] + count[x->op] - 1;
		if (count[x->op] > 0 && c[fc].impl < 0) {
			int n = ratio_samples(x, &c[fc], tmp, 0);
			snprintf(row->floor, sizeof row->floor, "%s", floor_name[p->floor]);
			row->floor_ns = floor_med[p->floor];
			row->ratio_floor = median(tmp, n);
			n = ratio_samples(x, &c[fc], tmp, 1);
			row->over_floor_ns = median(tmp, n);
		}
		if (x->op == OP_TIMESPEC_GET && x->impl == I_SYS)
			snprintf(row->note, sizeof row->note, "clock_gettime(CLOCK_REALTIME) system call");
	}
	for (int f = 0; f < NFLOOR; f++) {
		if (npool[f]) {
			struct bench_row *row = rows_add(out);
			snprintf(row->table, sizeof row->table, "floor");
			snprintf(row->op, sizeof row->op, "%s", floor_name[f]);
			snprintf(row->impl, sizeof row->impl, "floor");
			row->threads = 1;
			row->ns_per_call = floor_med[f];
			row->ns_min = minimum(pool[f], npool[f]);
			row->runs = npool[f];
			for (int i = 0; i < nc; i++)
				if (c[i].impl < 0 && floor_of(&c[i]) == f)
					row->calls = c[i].n;
			if (set != SET_MAIN)
				snprintf(row->note, sizeof row->note, "measured in the %s process", impl_name);
		}
		free(pool[f]);
	}
	free(tmp);
	for (int i = 0; i < nc; i++)
		free(c[i].ns);
	free(c);
}
