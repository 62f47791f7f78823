/* Virtual world, scheduler and oracle of the simulation; see world.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "world.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <ucontext.h>

#include "attach/proc.h"
#include "attach/wstate.h"
#include "vdaemon.h"
#include "timehands.h"

void th_sim_reset_process(void);
void th_sim_fork_child(void);

#define NS 1000000000LL

/* ------------------------------------------------------------ the world */

static struct {
	const struct sim_config *cfg;
	int64_t T;
	/* counter: base + (T - T0) * hz / 1e9 (+ per-thread skew) */
	uint64_t ctr_base;
	int64_t ctr_T0;
	uint64_t ctr_hz;
	/* kernel clocks */
	int64_t mono_base, mono_T0, mono_ppb;
	int64_t raw_base, raw_T0, raw_ppb;
	int64_t off_real, off_boot, tai_sec;
	int64_t tick;
	int step_epoch;        /* REALTIME steps so far */
	/* offset (clock - MONOTONIC) history per family, for the oracle */
	int64_t fam_off[5][32];
	int fam_epoch[5];
	int64_t fam_change_T[5];
	/* the line (mono_at) where each epoch began: one that ended serves
	 * no value of the line past its end (do_read) */
	int64_t fam_start_line[5][32];
	int64_t last_disc_T;   /* last counter discontinuity or suspend */
	int64_t last_step_T, last_suspend_T, last_rate_T;
	int64_t last_rate_delta_ppb;
	uint64_t kreads;
	uint64_t rng;
	struct sim_event ev[SIM_MAX_EVENTS];
	int nev;
	struct sim_stall stalls[8];
	int nstalls;
	int64_t skew_ns;       /* largest counter difference between two CPUs, ns */
	int64_t death_T;       /* a thread died (SIM_FOREVER) at this time */
	uint64_t wide;         /* windups that found the offsets too wide to serve */
	uint64_t kupd;         /* the kernel's updates other than its ticks (cfg->kpage) */
} W;

/* The data page's count (sim_hw.h): even, 2 x (updates so far), the ticks
 * among them counted from MONOTONIC; set as time advances, so every load
 * after a kernel change sees it. 1 (never moving) without a page. */
static uint32_t kcount_word = 1;
const uint32_t *th_sim_kcount_ref = &kcount_word;

static uint64_t rnd(void)
{
	/* xorshift64* */
	W.rng ^= W.rng >> 12;
	W.rng ^= W.rng << 25;
	W.rng ^= W.rng >> 27;
	return W.rng * 2685821657736338717ULL;
}

static double rndf(void)
{
	return (double)(rnd() >> 11) / 9007199254740992.0;
}

static int64_t mono_at(int64_t T)
{
	__int128 dt = (__int128)(T - W.mono_T0);
	return W.mono_base + (int64_t)(dt + dt * W.mono_ppb / 1000000000);
}

static int64_t raw_at(int64_t T)
{
	__int128 dt = (__int128)(T - W.raw_T0);
	return W.raw_base + (int64_t)(dt + dt * W.raw_ppb / 1000000000);
}

static uint64_t ctr_at(int64_t T)
{
	__int128 dt = (__int128)(T - W.ctr_T0);
	return W.ctr_base + (uint64_t)(int64_t)(dt * (__int128)W.ctr_hz / 1000000000);
}

static void rebase_mono(void)
{
	W.mono_base = mono_at(W.T);
	W.raw_base = raw_at(W.T);
	W.mono_T0 = W.raw_T0 = W.T;
}

static void note_offsets(void)
{
	int64_t off[5] = {0, W.off_real, 0, W.off_boot, W.off_real + W.tai_sec * NS};
	for (int f = 0; f < 5; f++) {
		if (W.fam_off[f][W.fam_epoch[f]] != off[f] && W.fam_epoch[f] < 31) {
			W.fam_off[f][++W.fam_epoch[f]] = off[f];
			W.fam_change_T[f] = W.T;
			W.fam_start_line[f][W.fam_epoch[f]] = mono_at(W.T);
		}
	}
}

static void daemon_event(const struct sim_event *e);
static int trace, in_trace;

static void apply_events(void)
{
	for (int i = 0; i < W.nev; i++) {
		struct sim_event *e = &W.ev[i];
		if (e->done || e->at > W.T)
			continue;
		e->done = 1;
		switch (e->kind) {
		case EV_MONO_RATE:
			rebase_mono();
			W.last_rate_delta_ppb = e->arg - W.mono_ppb;
			W.mono_ppb = e->arg;
			W.last_rate_T = W.T;
			break;
		case EV_RAW_RATE:
			rebase_mono();
			W.raw_ppb = e->arg;
			break;
		case EV_STEP_REAL:
			W.off_real += e->arg;
			W.step_epoch++;
			W.last_step_T = W.T;
			if (trace)
				printf("  KERNEL T=%lld REALTIME step %+lld ns: offset %lld\n", (long long)W.T,
				       (long long)e->arg, (long long)W.off_real);
			break;
		case EV_SUSPEND:
			rebase_mono();
			if (!e->arg2) {
				W.ctr_base = ctr_at(W.T);
				W.ctr_T0 = W.T + e->arg;
			}
			W.T += e->arg;
			W.mono_T0 = W.raw_T0 = W.T; /* MONOTONIC and RAW stand still */
			W.off_boot += e->arg;
			W.last_suspend_T = W.T;
			break;
		case EV_CTR_JUMP:
			W.ctr_base += (uint64_t)e->arg;
			break;
		case EV_CTR_RATE:
			W.ctr_base = ctr_at(W.T);
			W.ctr_T0 = W.T;
			W.ctr_hz = (uint64_t)e->arg;
			break;
		case EV_TAI_OFFSET:
			W.tai_sec = e->arg;
			break;
		case EV_DAEMON_STOP:
		case EV_DAEMON_KILL:
		case EV_DAEMON_START:
			daemon_event(e);
			break;
		}
		if (e->kind == EV_SUSPEND || e->kind == EV_CTR_JUMP || e->kind == EV_CTR_RATE)
			W.last_disc_T = W.T;
		/* the kernel publishes each change of its clocks at an update */
		if (e->kind == EV_MONO_RATE || e->kind == EV_RAW_RATE || e->kind == EV_STEP_REAL ||
		    e->kind == EV_SUSPEND || e->kind == EV_TAI_OFFSET)
			W.kupd++;
		note_offsets();
	}
}

static void kpage_update(void)
{
	if (W.cfg->kpage)
		kcount_word = (uint32_t)(2 * (W.kupd + (uint64_t)(mono_at(W.T) / W.tick)));
}

static void advance(int64_t dt)
{
	W.T += dt;
	apply_events();
	kpage_update();
}

/* kernel value of a clock at true time T, ns */
static int64_t kernel_at(clockid_t id, int64_t T)
{
	int64_t m = mono_at(T);
	switch (id) {
	case CLOCK_MONOTONIC: return m;
	case CLOCK_MONOTONIC_RAW: return raw_at(T);
	case CLOCK_REALTIME: return m + W.off_real;
	case CLOCK_BOOTTIME: return m + W.off_boot;
	case CLOCK_TAI: return m + W.off_real + W.tai_sec * NS;
	case CLOCK_MONOTONIC_COARSE: return m - (m % W.tick);
	case CLOCK_REALTIME_COARSE: return m - (m % W.tick) + W.off_real;
	default: return -1;
	}
}

/* ------------------------------------------------------------ scheduler */

struct vthread {
	ucontext_t ctx;
	char *stack;
	int id, done, frozen;
	int cpu;               /* with cfg->cpus: the CPU whose counter it reads */
	int64_t stall_until;
	int64_t fence_T;       /* virtual time of the ordered read's fence, until its counter read */
	uint64_t fence_c;      /* the counter then (before the skews) */
	uint64_t fence_base;   /* W.ctr_base then: a counter event since makes no early value */
	uint64_t rec_tie;      /* its th_rec_tie (each writer's own: the process's windup, the daemon's) */
};

static struct vthread TH[SIM_MAX_THREADS];
static int nthreads, cur = -1;
static ucontext_t sched_ctx;

static void trace_records(void);
static int trace_on(void);

static void maybe_switch(const char *step)
{
	if (trace_on()) {
		trace_records();
		if (cur >= 0 && (!strcmp(step, "transit") || !strcmp(step, "plan") || !strcmp(step, "announce") ||
				 !strcmp(step, "observe") || !strcmp(step, "jump") || !strcmp(step, "calibrate")))
			printf("  T=%lld th%d step %s\n", (long long)W.T, cur, step);
	}
	if (cur < 0)
		return;
	if (!strcmp(step, "wide"))
		W.wide++;
	struct vthread *t = &TH[cur];
	for (int i = 0; i < W.nstalls; i++) {
		struct sim_stall *s = &W.stalls[i];
		if ((s->thread >= 0 && s->thread != cur) || strcmp(s->step, step) != 0)
			continue;
		s->hits++;
		if (s->to_T && (W.T < s->from_T || W.T >= s->to_T))
			continue;
		if (s->occurrence == 0 || s->hits == s->occurrence ||
		    (s->occurrence < 0 && s->hits % -s->occurrence == 0)) {
			s->fired++;
			if (s->busy) {
				advance(s->duration);
			} else if (s->duration == SIM_FOREVER) {
				/* the thread dies here, whatever it holds */
				if (trace)
					printf("  T=%lld th%d dies at step %s\n", (long long)W.T, cur, step);
				t->frozen = 1;
				if (!W.death_T)
					W.death_T = W.T;
			} else {
				t->stall_until = W.T + s->duration;
			}
		}
	}
	if (t->frozen || t->stall_until > W.T || rndf() < W.cfg->switch_prob) {
		/* a thread switched out may come back on another CPU */
		if (W.cfg->cpus > 1 && rndf() < W.cfg->migrate_prob)
			t->cpu = (int)(rnd() % (uint64_t)W.cfg->cpus);
		swapcontext(&t->ctx, &sched_ctx);
	}
}

void th_sim_step(const char *name)
{
	if (in_trace)
		return; /* tracing must not perturb the run */
	advance(1);
	maybe_switch(name);
}

uint32_t th_sim_self(void)
{
	return (uint32_t)(cur + 3); /* cur is -1 outside any thread */
}

void th_sim_fence(void)
{
	if (cur >= 0) {
		TH[cur].fence_T = W.T;
		TH[cur].fence_c = ctr_at(W.T);
		TH[cur].fence_base = W.ctr_base;
	}
}

uint64_t th_sim_ctr(int ordered)
{
	maybe_switch("ctr");
	advance(8);
	uint64_t c = ctr_at(W.T);
	if (cur >= 0) {
		/* The hardware may run an unordered counter read as early as
		 * the fence before it, past the loads between (the reader may
		 * have been switched out among them meanwhile): a value the
		 * counter passed since the fence, often the fence's own (none
		 * across a jump or a rate change of the counter). */
		uint64_t f = TH[cur].fence_c;
		if (!ordered && TH[cur].fence_T > 0 && TH[cur].fence_base == W.ctr_base && f < c &&
		    rndf() < W.cfg->ctr_early_prob)
			c = (rnd() & 1) ? f : f + rnd() % (c - f + 1); /* half of them at the extreme */
		TH[cur].fence_T = 0;
	}
	if (cur >= 0) {
		c += (uint64_t)W.cfg->skew[cur];
		if (W.cfg->cpus > 0)
			c += (uint64_t)W.cfg->cpu_skew[TH[cur].cpu];
	}
	return c;
}

/* The direct read of the kernel's coarse clock (src/counter/kdata.h): the
 * virtual kernel's coarse clock, or, one time in four, "the kernel was
 * updating its page", after which the reader asks the vDSO path
 * (th__coarse_ts_k): both paths meet every scenario. */
int th_sim_kcoarse_direct(uint64_t *ns)
{
	if ((rnd() & 3) == 0)
		return 0;
	struct timespec ts = {0, 0};
	th_sim_kread(CLOCK_MONOTONIC_COARSE, &ts);
	*ns = (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
	return 1;
}

int th_sim_kpage_real(int64_t *off, uint32_t *seq)
{
	if (!W.cfg->kpage)
		return 0;
	maybe_switch("kpage");
	advance(5);
	if ((rnd() & 7) == 0)
		return -1;
	*off = W.off_real;
	*seq = kcount_word;
	return 1;
}

int th_sim_koff_real(int64_t *off)
{
	uint32_t seq;
	return th_sim_kpage_real(off, &seq) > 0;
}

int th_sim_kread(clockid_t id, struct timespec *ts)
{
	if (cur >= 0)
		TH[cur].fence_T = 0; /* the kernel's read orders its own counter */
	maybe_switch("kread");
	advance(12);
	int64_t v = kernel_at(id, W.T);
	advance(13);
	W.kreads++;
	if (v < 0 && id != CLOCK_REALTIME && id != CLOCK_TAI)
		return -1;
	int64_t s = v / NS, r = v % NS;
	if (r < 0) {
		r += NS;
		s--;
	}
	ts->tv_sec = s;
	ts->tv_nsec = r;
	return 0;
}

time_t th_sim_time(time_t *t)
{
	maybe_switch("kread");
	advance(1);
	int64_t v = kernel_at(CLOCK_REALTIME_COARSE, W.T);
	time_t s = (time_t)(v >= 0 ? v / NS : (v - NS + 1) / NS);
	if (t)
		*t = s;
	return s;
}

void th_sim_first_attach(struct th_proc *p)
{
	memset(&p->cfg, 0, sizeof p->cfg);
	strcpy(p->cfg.page, "none");
	p->cfg.counter_read = W.cfg->ctr_late ? TH_CTR_READ_LATE : TH_CTR_READ_AUTO;
	p->passthrough = 0;
	memset(&p->trust, 0, sizeof p->trust);
	p->trust.available = TH_COUNTER_TSC;
	p->trust.usable = 1;
	p->trust.invariant = 1;
	p->trust.nominal_hz = W.cfg->nominal_hz;
	strcpy(p->trust.freq_source, W.cfg->nominal_hz > 0 ? "sim" : "none");
	strcpy(p->trust.clocksource, "sim");
	p->tick_ns = (uint64_t)W.tick;
	p->have_kcoarse = 1;
	p->have_ktime = 1;
	th__W.page_wanted = W.cfg->daemon;
	th__W.page_retry_ns = 20000000; /* 20 ms: runs are a few hundred ms long */
	strcpy(p->cfg.page, "sim");
}

/* ------------------------------------------------------------ oracle */

/*
 * Families of clocks checked together; a value of a family with offsets
 * (REALTIME, BOOTTIME, TAI) is first attributed to the offset epoch that
 * explains it, since after a kernel step the library follows at its next
 * windup: values of one epoch are compared with each other, epochs must never
 * go back, and an epoch older than the kernel's is an error once the follow
 * window (a tick and two windows) has passed.
 */
enum { F_MONO, F_REAL, F_RAW, F_BOOT, F_TAI, F_N };
#define EPOCHS 32

static struct {
	int64_t max_fine[F_N][EPOCHS], max_coarse[F_N][EPOCHS], max_time[EPOCHS];
	int max_epoch[F_N];
	int64_t max_fine_real_sec[EPOCHS];
	uint64_t reads;
	struct sim_result *res;
	/* CPUs with skewed counters: until the library has given the counter
	 * up (phase 0), values may be off by the skew; from a little after it
	 * did (phase 1), the checks are exact again, against phase-1 values. */
	int phase;
	int64_t detect_T;
} O;

#define SETTLE_TICKS 4 /* phase 1 starts this long after the library distrusted the counter */

static void reset_maxima(void)
{
	for (int f = 0; f < F_N; f++)
		for (int e = 0; e < EPOCHS; e++)
			O.max_fine[f][e] = O.max_coarse[f][e] = INT64_MIN;
	for (int e = 0; e < EPOCHS; e++)
		O.max_time[e] = O.max_fine_real_sec[e] = INT64_MIN;
}

/* Tolerance of the checks for a read starting now: the CPUs' skew in phase 0. */
static int64_t skew_tolerance(void)
{
	if (!W.skew_ns)
		return 0;
	if (!O.detect_T && th__W.dt.until) {
		O.detect_T = W.T;
		O.res->detect_ns = W.T;
	}
	if (O.phase == 0 && O.detect_T && W.T > O.detect_T + SETTLE_TICKS * W.tick) {
		O.phase = 1;
		reset_maxima();
	}
	return O.phase == 0 ? W.skew_ns : 0;
}

static void violation(uint64_t *counter, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void violation(uint64_t *counter, const char *fmt, ...)
{
	(*counter)++;
	if (counter == &O.res->soft)
		return; /* measured only */
	O.res->violations++;
	if (trace) {
		va_list aq;
		va_start(aq, fmt);
		printf("VIOLATION: ");
		vprintf(fmt, aq);
		printf("\n");
		va_end(aq);
	}
	if (!O.res->first[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(O.res->first, sizeof O.res->first, fmt, ap);
		va_end(ap);
	}
}

enum op { OP_MONO, OP_REAL, OP_RAW, OP_BOOT, OP_TAI, OP_MONO_REL, OP_REAL_REL, OP_MONO_CO, OP_REAL_CO, OP_TIME,
	  OP_GTOD, OP_N };
static const char *const op_name[OP_N] = {"MONOTONIC", "REALTIME", "MONOTONIC_RAW", "BOOTTIME", "TAI",
					  "MONOTONIC_RELAXED", "REALTIME_RELAXED", "MONOTONIC_COARSE",
					  "REALTIME_COARSE", "time()", "gettimeofday"};
static const int op_weight[OP_N] = {25, 20, 8, 5, 5, 5, 4, 8, 8, 8, 4};

static int op_family(int op)
{
	switch (op) {
	case OP_REAL: case OP_REAL_REL: case OP_REAL_CO: case OP_TIME: case OP_GTOD: return F_REAL;
	case OP_RAW: return F_RAW;
	case OP_BOOT: return F_BOOT;
	case OP_TAI: return F_TAI;
	default: return F_MONO;
	}
}

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * NS + t->tv_nsec;
}

static int trace_on(void)
{
	return trace && !in_trace;
}

static uint64_t trace_cur;

static uint64_t trace_page_cur;

static void trace_records(void)
{
	uint64_t c = atomic_load(&th__P.tl.cur);
	uint64_t pc = atomic_load(&th__page_tl()->cur);
	if (!trace || in_trace || (TH_CUR_ID(c) == TH_CUR_ID(trace_cur) && TH_CUR_ID(pc) == TH_CUR_ID(trace_page_cur)))
		return;
	int page = TH_CUR_ID(c) == TH_CUR_ID(trace_cur);
	if (page)
		trace_page_cur = pc;
	else
		trace_cur = c;
	if (!page && TH_CUR_SLOT(c) == TH_SLOT_SHARED) {
		printf("  T=%lld local seq %u: SHARED\n", (long long)W.T, TH_CUR_SEQ(c));
		return;
	}
	in_trace = 1;
	struct th_snap s;
	unsigned r = 0;
	int bad = th_snapshot(page ? th__page_tl() : &th__P.tl, &s, &r);
	in_trace = 0;
	if (bad)
		return;
	printf("  %s", page ? "PAGE" : "local");
	int64_t ctr_now = (int64_t)(ctr_at(W.T) - s.anchor);
	printf(" T=%lld rec seq %u kind %u anchor-now %lld dlo %lld ddue %lld dhi %lld dmin %lld mono %llu "
	       "lo %lld hi %lld ceil %llu guard %llu bound %u coarse %llu tick %llu epoch %u off_real %lld flags %llu "
	       "kseq %llx | kernel mono %lld count %x\n",
	       (long long)W.T, TH_CUR_SEQ(page ? pc : c), s.kind, (long long)-ctr_now, (long long)s.dlo, (long long)s.ddue,
	       (long long)s.dhi, (long long)s.dmin, (unsigned long long)s.ns[0], (long long)s.lo[0],
	       (long long)s.hi[0], (unsigned long long)s.ceil[0], (unsigned long long)s.guard[0], s.bound[0],
	       (unsigned long long)s.coarse, (unsigned long long)s.tick, (unsigned)s.epoch, (long long)s.off_real,
	       (unsigned long long)s.flags, (unsigned long long)s.kseq, (long long)mono_at(W.T), kcount_word);
}

/* Offset epoch of family f explaining v read between line values l0..l1
 * (with `below` of allowed lag): the epoch, -1 if none, -2 if ambiguous. */
static int attribute(int f, int64_t v, int64_t l0, int64_t l1, int64_t below, int64_t above)
{
	int found = -1;
	for (int e = 0; e <= W.fam_epoch[f]; e++) {
		int64_t x = v - W.fam_off[f][e];
		if (x >= l0 - below && x <= l1 + above) {
			if (found >= 0 && W.fam_off[f][e] != W.fam_off[f][found])
				return -2;
			found = e; /* equal offsets: the latest epoch */
		}
	}
	return found;
}

/* A value that `attribute` gave the latest of epochs with equal offsets
 * (a step the kernel took back) lies on the line inside an earlier one of
 * them: that epoch's offset, from where it began to where the next began. */
static int earlier_epoch_fits(int f, int ep, int64_t v, int64_t eps)
{
	for (int e = ep - 1; e >= 0; e--) {
		if (W.fam_off[f][e] != W.fam_off[f][ep])
			continue;
		int64_t x = v - W.fam_off[f][e];
		if ((e == 0 || x >= W.fam_start_line[f][e] - eps) && x <= W.fam_start_line[f][e + 1] + eps)
			return 1;
	}
	return 0;
}

static void do_read(int op)
{
	trace_records();
	int f = op_family(op);
	int coarse = op == OP_MONO_CO || op == OP_REAL_CO || op == OP_TIME;
	int line_raw = f == F_RAW;
	int64_t t0 = W.T;
	int64_t l0 = line_raw ? raw_at(t0) : mono_at(t0);
	int snap_epoch = O.max_epoch[f];
	int64_t snap_fine[EPOCHS], snap_coarse[EPOCHS], snap_time[EPOCHS], snap_fsec[EPOCHS];
	memcpy(snap_fine, O.max_fine[f], sizeof snap_fine);
	memcpy(snap_coarse, O.max_coarse[f], sizeof snap_coarse);
	memcpy(snap_time, O.max_time, sizeof snap_time);
	memcpy(snap_fsec, O.max_fine_real_sec, sizeof snap_fsec);
	int phase = O.phase;
	int64_t tol = skew_tolerance();
	if (phase != O.phase) { /* phase 1 starts with this read */
		phase = O.phase;
		for (int e = 0; e < EPOCHS; e++)
			snap_fine[e] = snap_coarse[e] = snap_time[e] = snap_fsec[e] = INT64_MIN;
	}
	for (int e = 0; tol && e < EPOCHS; e++) {
		/* values of other CPUs may be ahead by the skew */
		if (snap_fine[e] != INT64_MIN)
			snap_fine[e] -= tol;
		if (snap_coarse[e] != INT64_MIN)
			snap_coarse[e] -= tol;
		if (snap_time[e] != INT64_MIN)
			snap_time[e] -= 1 + tol / NS;
		if (snap_fsec[e] != INT64_MIN)
			snap_fsec[e] -= 1 + tol / NS;
	}
	struct timespec ts = {0, 0};
	struct timeval tv;
	switch (op) {
	case OP_MONO: th_clock_gettime(CLOCK_MONOTONIC, &ts); break;
	case OP_REAL: th_clock_gettime(CLOCK_REALTIME, &ts); break;
	case OP_RAW: th_clock_gettime(CLOCK_MONOTONIC_RAW, &ts); break;
	case OP_BOOT: th_clock_gettime(CLOCK_BOOTTIME, &ts); break;
	case OP_TAI: th_clock_gettime(CLOCK_TAI, &ts); break;
	case OP_MONO_REL: th_clock_gettime(TH_CLOCK_MONOTONIC_RELAXED, &ts); break;
	case OP_REAL_REL: th_clock_gettime(TH_CLOCK_REALTIME_RELAXED, &ts); break;
	case OP_MONO_CO: th_clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); break;
	case OP_REAL_CO: th_clock_gettime(CLOCK_REALTIME_COARSE, &ts); break;
	case OP_TIME: ts.tv_sec = th_time(NULL); break;
	case OP_GTOD:
		th_gettimeofday(&tv, NULL);
		ts.tv_sec = tv.tv_sec;
		ts.tv_nsec = tv.tv_usec * 1000;
		break;
	}
	int64_t v = ts_ns(&ts);
	int64_t t1 = W.T;
	if (W.death_T && t0 > W.death_T)
		O.res->reads_after_death++;
	int64_t l1 = line_raw ? raw_at(t1) : mono_at(t1);
	O.reads++;
	const char *name = op_name[op];
	if (trace)
		printf("T=%lld..%lld th%d %s = %lld (line %lld..%lld) cf %llu\n", (long long)t0, (long long)t1, cur, name,
		       (long long)v, (long long)l0, (long long)l1, (unsigned long long)atomic_load(&th__P.coarse_floor));

	/* epsilon: 1 us; plus what a change of the kernel's rate explains until
	 * the discipline has absorbed it (the new slope starts half a window
	 * after the windup that sees it; the offset is steered out over a few
	 * windows); plus gettimeofday's microsecond truncation; plus, after a
	 * counter discontinuity, the record's error bound (phi leads the kernel
	 * by at most that until the kernel reaches the old line's ceiling). */
	int64_t window = 2 * W.tick;
	int64_t eps = 1000;
	if (W.last_rate_T && t1 - W.last_rate_T < 8 * window) {
		int64_t d = W.last_rate_delta_ppb < 0 ? -W.last_rate_delta_ppb : W.last_rate_delta_ppb;
		int64_t span = t1 - W.last_rate_T < 2 * window ? t1 - W.last_rate_T : 2 * window;
		eps += (int64_t)((double)d * 1e-9 * (double)span) + 1;
	}
	if (W.last_disc_T && t0 - W.last_disc_T < 3 * W.tick)
		eps += 5000;
	if (op == OP_GTOD)
		eps += 1000;
	eps += tol;
	int64_t lag = coarse ? 2 * W.tick + (op == OP_TIME ? NS : 0) : 0;

	/* which offset epoch explains the value */
	int ep = 0;
	if (f == F_REAL || f == F_TAI || f == F_BOOT) {
		/* Under an undetected skew (accuracy measured, not enforced)
		 * the error bound of a kernel-mode record after a jump can pass
		 * 100 us (115 us in `sim --scenario skew-small --seed
		 * 122834332717903`): attribution then allows 10 ms, still far
		 * below any two offsets' distance. */
		int64_t attr = tol && W.cfg->accuracy_soft ? 10000000 : 100000;
		ep = attribute(f, v, l0, l1, lag + eps + attr, eps + attr);
		if (ep == -1) {
			violation(W.cfg->rate_soft ? &O.res->soft : &O.res->g1,
				  "G1 %s T=%lld: %lld explained by no offset (line %lld..%lld)", name,
				  (long long)t0, (long long)v, (long long)l0, (long long)l1);
			return;
		}
		if (ep == -2)
			return; /* two epochs fit (a step smaller than the resolution) */
		if (ep < snap_epoch)
			violation(&O.res->g2, "G2 %s T=%lld: offset epoch %d after epoch %d", name, (long long)t0, ep,
				  snap_epoch);
		if (ep < W.fam_epoch[f] && t0 - W.fam_change_T[f] > W.tick + 2 * window)
			violation(&O.res->g1, "G1 %s T=%lld: kernel change of %lld ns ago not followed", name,
				  (long long)t0, (long long)(t0 - W.fam_change_T[f]));
		/* Where the kernel's data page is read, a fine REALTIME
		 * reading that starts after the kernel's step shows it. */
		if (W.cfg->kpage && f == F_REAL && !coarse && ep < W.fam_epoch[f] && t0 > W.fam_change_T[f])
			violation(&O.res->g1, "G1 %s T=%lld: the kernel's step of %lld ns ago not shown (epoch %d of %d)", name,
				  (long long)t0, (long long)(t0 - W.fam_change_T[f]), ep, W.fam_epoch[f]);
		/* ... and one that shows an epoch the kernel had left shows it
		 * at a line value of that epoch's time: the offset and the line
		 * of one instant of the read, not an offset from before a step
		 * on the line of after it. */
		if (W.cfg->kpage && f == F_REAL && !coarse && ep < W.fam_epoch[f] &&
		    v - W.fam_off[f][ep] > W.fam_start_line[f][ep + 1] + eps)
			violation(&O.res->g1, "G1 %s T=%lld: epoch %d's offset on the line %lld ns past its end", name,
				  (long long)t0, ep, (long long)(v - W.fam_off[f][ep] - W.fam_start_line[f][ep + 1]));
		/* ... and, with or without the kernel's page, no earlier on
		 * the line than where its epoch began: a record of a step
		 * serves no counter from before it (an early counter read,
		 * th_snap_cut). */
		if (f == F_REAL && !coarse && ep > 0 && ep <= W.fam_epoch[f] &&
		    v - W.fam_off[f][ep] < W.fam_start_line[f][ep] - eps && !earlier_epoch_fits(f, ep, v, eps))
			violation(&O.res->g1, "G1 %s T=%lld: epoch %d's offset on the line %lld ns before its start", name,
				  (long long)t0, ep, (long long)(W.fam_start_line[f][ep] - (v - W.fam_off[f][ep])));
		if (ep > O.max_epoch[f])
			O.max_epoch[f] = ep;
	}
	int64_t x = v - W.fam_off[f][ep]; /* on the line */
	if (op == OP_GTOD) {
		snap_fine[ep] -= snap_fine[ep] % 1000;
		snap_coarse[ep] -= snap_coarse[ep] % 1000;
	}
	/* undetected skew (cfg->accuracy_soft): accuracy is measured, not enforced */
	int soft = (tol && W.cfg->accuracy_soft) || W.cfg->rate_soft;
	uint64_t *g1 = soft ? &O.res->soft : &O.res->g1;
	uint64_t *g5 = soft ? &O.res->soft : &O.res->g5;
	if (!coarse) {
		if (x < l0 - eps || x > l1 + eps)
			violation(g1, "G1 %s T=%lld: %lld not in [%lld, %lld] +- %lld (off %lld)", name,
				  (long long)t0, (long long)x, (long long)l0, (long long)l1, (long long)eps,
				  (long long)(x < l0 ? x - l0 : x - l1));
		int64_t err = x < l0 ? l0 - x : x > l1 ? x - l1 : 0;
		if (err > O.res->worst_g1_ns)
			O.res->worst_g1_ns = err;
		if (v < snap_fine[ep])
			violation(&O.res->g2, "G2 %s T=%lld: %lld after %lld (back %lld ns)", name, (long long)t0,
				  (long long)v, (long long)snap_fine[ep], (long long)(snap_fine[ep] - v));
		int64_t cmax = snap_coarse[ep];
		if (f == F_REAL && snap_time[ep] != INT64_MIN && snap_time[ep] * NS > cmax)
			cmax = snap_time[ep] * NS;
		if (op == OP_GTOD)
			cmax -= cmax % 1000;
		if (v < cmax)
			violation(&O.res->g4, "G4 %s T=%lld: fine %lld below earlier coarse %lld", name,
				  (long long)t0, (long long)v, (long long)cmax);
		if (phase == O.phase && v > O.max_fine[f][ep])
			O.max_fine[f][ep] = v;
		if (phase == O.phase && f == F_REAL && ts.tv_sec > O.max_fine_real_sec[ep])
			O.max_fine_real_sec[ep] = ts.tv_sec;
	} else {
		if (x < l0 - lag - eps || x > l1 + eps)
			violation(g5, "G5 %s T=%lld: %lld vs line [%lld, %lld]", name, (long long)t0,
				  (long long)x, (long long)l0, (long long)l1);
		if (op == OP_TIME) {
			if (ts.tv_sec < snap_time[ep])
				violation(&O.res->g2, "G2 time() T=%lld: %lld after %lld", (long long)t0,
					  (long long)ts.tv_sec, (long long)snap_time[ep]);
			if (phase == O.phase && ts.tv_sec > O.max_time[ep])
				O.max_time[ep] = ts.tv_sec;
		} else {
			if (v < snap_coarse[ep])
				violation(&O.res->g2, "G2 %s T=%lld: %lld after %lld", name, (long long)t0,
					  (long long)v, (long long)snap_coarse[ep]);
			if (phase == O.phase && v > O.max_coarse[f][ep])
				O.max_coarse[f][ep] = v;
		}
		if (f == F_REAL && ts.tv_sec < snap_fsec[ep])
			violation(&O.res->g3, "G3 %s T=%lld: second %lld after fine second %lld", name,
				  (long long)t0, (long long)ts.tv_sec, (long long)snap_fsec[ep]);
	}
}

/* ------------------------------------------------------------ threads */

static int forked;

static int was_shared; /* the process's cur named the page at the last read */

static void reader_main(int id)
{
	if (W.cfg->daemon) { /* the daemon publishes before processes start */
		TH[cur].stall_until = W.T + 1000000;
		swapcontext(&TH[cur].ctx, &sched_ctx);
	}
	int weight[OP_N], total = 0;
	for (int i = 0; i < OP_N; i++) {
		int coarse = i == OP_MONO_CO || i == OP_REAL_CO || i == OP_TIME;
		weight[i] = W.cfg->coarse_only && !coarse ? 0 : op_weight[i];
		total += weight[i];
	}
	uint64_t n = 0;
	while (W.T < W.cfg->duration_ns) {
		int r = (int)(rnd() % (uint64_t)total), op = 0;
		while (r >= weight[op])
			r -= weight[op++];
		do_read(op);
		n++;
		int sh = TH_CUR_SLOT(atomic_load(&th__P.tl.cur)) == TH_SLOT_SHARED;
		if (sh && !was_shared)
			O.res->joins++;
		was_shared = sh;
		if (W.cfg->fork_at_read && !forked && O.reads >= (uint64_t)W.cfg->fork_at_read) {
			/* fork() from this thread: every other thread stops where
			 * it is, possibly holding the windup lock */
			forked = 1;
			for (int i = 0; i < nthreads; i++)
				if (i != id)
					TH[i].frozen = 1;
			th_sim_fork_child();
		}
		int64_t gap = id == 0 && W.cfg->gap0_ns ? W.cfg->gap0_ns : W.cfg->gap_ns;
		if (gap)
			advance((int64_t)(rnd() % (uint64_t)gap));
		if (W.cfg->long_pause_every && n % (uint64_t)W.cfg->long_pause_every == 0)
			advance(W.cfg->long_pause_ns);
	}
	TH[id].done = 1;
}

/* ------------------------------------------------------------ virtual daemon */

static int daemon_id = -1;
static int daemon_adopt; /* the next daemon continues the page (EV_DAEMON_START arg 1) */

static void daemon_main(void)
{
	if (vd_init((uint64_t)W.tick, W.cfg->nominal_hz, daemon_adopt, W.cfg->daemon_lag_ns) != 0 && daemon_adopt) {
		fprintf(stderr, "sim: the restarted daemon could not continue the page\n");
		O.res->violations++;
	}
	while (W.T < W.cfg->duration_ns) {
		vd_windup();
		/* sleep until the next tick of the virtual kernel */
		TH[cur].stall_until = W.T - (W.T % W.tick) + W.tick;
		swapcontext(&TH[cur].ctx, &sched_ctx);
	}
	TH[cur].done = 1;
}

static void trampoline(unsigned lo, unsigned hi)
{
	int id = (int)lo;
	(void)hi;
	if (id == daemon_id)
		daemon_main();
	else
		reader_main(id);
	swapcontext(&TH[id].ctx, &sched_ctx);
}

static void make_thread(int i)
{
	struct vthread *t = &TH[i];
	char *stack = t->stack;
	memset(t, 0, sizeof *t);
	t->id = i;
	t->cpu = W.cfg->cpus > 0 ? i % W.cfg->cpus : 0;
	t->stack = stack ? stack : malloc(1 << 18);
	getcontext(&t->ctx);
	t->ctx.uc_stack.ss_sp = t->stack;
	t->ctx.uc_stack.ss_size = 1 << 18;
	t->ctx.uc_link = &sched_ctx;
	makecontext(&t->ctx, (void (*)(void))trampoline, 2, (unsigned)i, 0u);
}

static void daemon_event(const struct sim_event *e)
{
	if (daemon_id < 0)
		return;
	struct vthread *t = &TH[daemon_id];
	switch (e->kind) {
	case EV_DAEMON_STOP: /* SIGSTOP now, SIGCONT arg ns later */
		t->stall_until = W.T + e->arg;
		break;
	case EV_DAEMON_KILL: /* wherever it is, even in the middle of a publication */
		t->frozen = 1;
		vd_kill();
		break;
	case EV_DAEMON_START:
		/* a new process, fresh state: a new page, or (arg 1) the dead
		 * one's page continued */
		if (t->frozen) {
			daemon_adopt = e->arg == 1;
			make_thread(daemon_id);
		}
		break;
	}
}

const char *const sim_writer_steps[] = {"lock", "sample", "observe", "plan", "transit", "write_gen0",
					"write_fields", "write_gen", "commit", "coarse_block", "unlock", "announce", "join",
					"share", "share_wait", "unshare", "unshare-line", "unshare-kernel", "unshare-look",
					"unshare-cover", NULL};

void sim_config_default(struct sim_config *cfg, uint64_t seed)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->seed = seed ? seed : 1;
	cfg->threads = 3;
	cfg->duration_ns = 200 * 1000000LL;
	cfg->ctr_hz = 2096029000.0;
	cfg->ctr_start = 123456789012345ULL;
	cfg->nominal_hz = 2096029000.0;
	cfg->gap_ns = 20000;
	cfg->switch_prob = 0.05;
	cfg->ctr_early_prob = 0.25;
}

void sim_add_event(struct sim_config *cfg, int64_t at, int kind, int64_t arg, int64_t arg2)
{
	if (cfg->nevents < SIM_MAX_EVENTS)
		cfg->events[cfg->nevents++] = (struct sim_event){at, kind, arg, arg2, 0};
}

static void add_stall(struct sim_config *cfg, int thread, const char *step, int occurrence, int64_t duration,
		      int busy)
{
	if (cfg->nstalls < 8)
		cfg->stalls[cfg->nstalls++] = (struct sim_stall){
			.thread = thread, .step = step, .occurrence = occurrence, .duration = duration, .busy = busy};
}

void sim_add_window(struct sim_config *cfg, int thread, const char *step, int64_t duration, int busy, int64_t from,
		    int64_t to)
{
	int n = cfg->nstalls;
	add_stall(cfg, thread, step, 0, duration, busy);
	if (cfg->nstalls > n) {
		cfg->stalls[cfg->nstalls - 1].from_T = from;
		cfg->stalls[cfg->nstalls - 1].to_T = to;
	}
}

void sim_add_stall(struct sim_config *cfg, int thread, const char *step, int occurrence, int64_t duration)
{
	add_stall(cfg, thread, step, occurrence, duration, 0);
}

void sim_add_slow(struct sim_config *cfg, int thread, const char *step, int occurrence, int64_t duration)
{
	add_stall(cfg, thread, step, occurrence, duration, 1);
}

void sim_run(const struct sim_config *cfg, struct sim_result *res)
{
	memset(&W, 0, sizeof W);
	memset(&O, 0, sizeof O);
	memset(res, 0, sizeof *res);
	O.res = res;
	forked = 0;
	trace = getenv("SIM_TRACE") != NULL;
	trace_cur = 0;
	W.cfg = cfg;
	W.rng = cfg->seed * 0x9E3779B97F4A7C15ULL + 1;
	W.tick = 4000000;
	W.ctr_base = cfg->ctr_start;
	W.ctr_hz = (uint64_t)cfg->ctr_hz;
	W.mono_base = 5000 * NS + 123456789;
	W.raw_base = 5000 * NS + 987654;
	W.off_real = 1790000000LL * NS + 555555555;
	W.off_boot = 7 * NS + 42;
	W.tai_sec = 37;
	W.T = 1000;
	memcpy(W.ev, cfg->events, sizeof W.ev);
	W.nev = cfg->nevents;
	memcpy(W.stalls, cfg->stalls, sizeof W.stalls);
	W.nstalls = cfg->nstalls;
	reset_maxima();
	for (int i = 0; i < cfg->cpus && i < SIM_MAX_CPUS; i++)
		for (int j = 0; j < cfg->cpus && j < SIM_MAX_CPUS; j++) {
			/* The skew in ns at the line's slope: an undetected
			 * skew bends the measured rate (0.8 % in record 16 of
			 * `sim --scenario skew-small --seed 57321255271888`,
			 * whose 2 us skew then read as 2017 ns); 2 % allowed. */
			int64_t d = (int64_t)((double)(cfg->cpu_skew[i] - cfg->cpu_skew[j]) * 1.02e9 / cfg->ctr_hz);
			if (d > W.skew_ns)
				W.skew_ns = d + 1;
		}
	note_offsets();
	kcount_word = 1;
	kpage_update();
	th_sim_reset_process();
	if (cfg->first_read_only) {
		/* G8: the first read of a process, alone: how many kernel
		 * clock reads and how much time it costs */
		int64_t t0 = W.T;
		struct timespec ts;
		th_clock_gettime(CLOCK_MONOTONIC, &ts);
		res->kreads = W.kreads;
		res->reads = 1;
		res->first_read_ns = W.T - t0;
		return;
	}

	nthreads = cfg->threads < SIM_MAX_THREADS - 1 ? cfg->threads : SIM_MAX_THREADS - 1;
	daemon_id = cfg->daemon ? nthreads : -1;
	if (cfg->daemon)
		nthreads++;
	memset(&th__page_area, 0, sizeof th__page_area);
	daemon_adopt = 0;
	was_shared = 0;
	for (int i = 0; i < nthreads; i++) {
		TH[i].stack = NULL;
		make_thread(i);
	}
	for (;;) {
		int runnable[SIM_MAX_THREADS], nr = 0, alive = 0;
		int64_t next = INT64_MAX;
		for (int i = 0; i < nthreads; i++) {
			if (TH[i].done || TH[i].frozen)
				continue;
			alive++;
			if (TH[i].stall_until <= W.T)
				runnable[nr++] = i;
			else if (TH[i].stall_until < next)
				next = TH[i].stall_until;
		}
		if (!alive)
			break;
		if (!nr) { /* everyone stalled: time passes */
			advance(next - W.T);
			continue;
		}
		cur = runnable[rnd() % (uint64_t)nr];
		/* th_rec_tie is a writer's between its read of the kernel's
		 * count and its commits; the process's windup and the virtual
		 * daemon, one process here, keep their own */
		th_rec_tie = TH[cur].rec_tie;
		swapcontext(&sched_ctx, &TH[cur].ctx);
		TH[cur].rec_tie = th_rec_tie;
		cur = -1;
	}
	for (int i = 0; i < nthreads; i++)
		free(TH[i].stack);
	res->reads = O.reads;
	res->kreads = W.kreads;
	res->windups = atomic_load(&th__P.windups);
	res->slow_reads = atomic_load(&th__P.slow_reads);
	res->retries = atomic_load(&th__P.retries);
	res->fallbacks = atomic_load(&th__P.fallbacks);
	res->wide = W.wide;
	if (cfg->expect_distrust && !O.detect_T)
		violation(&res->g1, "CPU counters skewed by up to %lld ns: the library never gave the counter up",
			  (long long)W.skew_ns);
	if (cfg->need_lines && res->slow_reads * 2 > res->reads) {
		fprintf(stderr,
			"sim: %llu of %llu reads took the slow path: the process did not run on a counter line "
			"(line installs %llu: stalled %llu, wide %llu, raced %llu)\n",
			(unsigned long long)res->slow_reads, (unsigned long long)res->reads,
			(unsigned long long)th__W.wr.installs, (unsigned long long)th__W.wr.inst_stalled,
			(unsigned long long)th__W.wr.inst_wide, (unsigned long long)th__W.wr.inst_raced);
		res->violations++;
	}
	if (cfg->need_wide && !res->wide) {
		fprintf(stderr, "sim: no windup found the offsets too wide to serve: the run tested nothing\n");
		res->violations++;
	}
	if (cfg->need_wide == 2) {
		/* what `timehands status` shows (the threads are gone: no lock
		 * holder, no switch): the reason while the offsets are still
		 * too wide and no line runs out, never once they are narrow (a
		 * lucky bracket can narrow them: res->wide_at_end says which
		 * case a run checked) */
		struct th_status st;
		memset(&st, 0, sizeof st);
		int rc = th_status(&st, sizeof st);
		int says = rc == 0 && strstr(st.reason, "offsets not yet measured closely") != NULL;
		res->wide_at_end = th_disc_offsets_wide(&th__W.disc);
		if (rc != 0 || says != (res->wide_at_end && st.mode == TH_MODE_KERNEL)) {
			fprintf(stderr, "sim: offsets %s, mode %u, but status says \"%s\"\n",
				res->wide_at_end ? "still too wide to serve" : "measured closely", st.mode, st.reason);
			res->violations++;
		}
	}
	if (res->joins < (uint64_t)cfg->min_joins) {
		fprintf(stderr, "sim: the process switched to the page %llu times, fewer than %d\n",
			(unsigned long long)res->joins, cfg->min_joins);
		res->violations++;
	}
}
