/* The exported th_ functions: thin wrappers over the one reader. */
#ifndef TIMEHANDS_NO_INLINE
#define TIMEHANDS_NO_INLINE /* this file defines th_time() itself */
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "attach/proc.h"
#include "attach/wstate.h"
#include "cputime/cputime.h"
#include "kclock.h"
#include "kdata.h"
#include "timehands.h"

#define TH_API __attribute__((visibility("default")))
#define NS_PER_S 1000000000LL

/* One small function per clock (TH_FINE_FUNCS, proc.h), so that each fast
 * path gets its own lean prologue; th_clock_gettime reads the counter and
 * jumps to them. */
TH_FINE_FUNCS(get_monotonic, TH_CK_MONO, 1)
TH_FINE_FUNCS(get_realtime, TH_CK_REAL, 1)
TH_FINE_FUNCS(get_raw, TH_CK_RAW, 1)
TH_FINE_FUNCS(get_boottime, TH_CK_BOOT, 1)
TH_FINE_FUNCS(get_tai, TH_CK_TAI, 1)
TH_FINE_FUNCS(get_monotonic_relaxed, TH_CK_MONO, 0)
TH_FINE_FUNCS(get_realtime_relaxed, TH_CK_REAL, 0)

static __attribute__((noinline)) int get_monotonic_coarse(struct timespec *ts)
{
	return th__coarse_ts(TH_CK_MONO, ts);
}

/* G3 for coarse REALTIME: never a second below one a fine read has
 * returned in this epoch (th__coarse_ts checks the floor's second and leaves
 * the rare case to th__coarse_real_slow). */
static __attribute__((noinline)) int get_realtime_coarse(struct timespec *ts)
{
	return th__coarse_ts(TH_CK_REAL, ts);
}

static __attribute__((noinline)) int null_timespec(clockid_t id)
{
	switch (id) {
	case CLOCK_REALTIME: case CLOCK_MONOTONIC: case CLOCK_MONOTONIC_RAW: case CLOCK_BOOTTIME:
	case CLOCK_TAI: case CLOCK_REALTIME_COARSE: case CLOCK_MONOTONIC_COARSE:
	case TH_CLOCK_REALTIME_RELAXED: case TH_CLOCK_MONOTONIC_RELAXED:
	case TH_CLOCK_PROCESS_CPUTIME_COARSE: case TH_CLOCK_THREAD_CPUTIME_COARSE:
		errno = EFAULT;
		return -1;
	default:
		/* the system call checks the id first, as the kernel does */
		return (int)syscall(SYS_clock_gettime, id, NULL);
	}
}

/* The ids th_clock_gettime does not read inline: a jump table. */
static __attribute__((noinline)) int gettime_other(clockid_t id, struct timespec *ts)
{
	switch (id) {
	case TH_CLOCK_PROCESS_CPUTIME_COARSE:
	case TH_CLOCK_THREAD_CPUTIME_COARSE:
		return th__cputime_coarse(id, ts);
	default:
		return th_kclock_gettime(id, ts);
	}
}

/* The full-guarantee fine ids take the word and the counter here
 * (name##_in) and jump once, to the timeline's read; the coarse ones are
 * direct calls; a compare chain, not a table (TH_ENTRY_LAYOUT). */
TH_API TH_ENTRY_LAYOUT int th_clock_gettime(clockid_t id, struct timespec *ts)
{
	if (TH_UNLIKELY(!ts))
		return null_timespec(id);
	if (TH_LIKELY(id == CLOCK_MONOTONIC))
		return get_monotonic_in(ts);
	if (id == CLOCK_REALTIME)
		return get_realtime_in(ts);
	TH_GETTIME_CHAIN(id, ts, get_, _in, gettime_other, 0);
}

TH_API int th_clock_getres(clockid_t id, struct timespec *res)
{
	switch (id) {
	case CLOCK_REALTIME: case CLOCK_MONOTONIC: case CLOCK_MONOTONIC_RAW: case CLOCK_BOOTTIME:
	case CLOCK_TAI: case TH_CLOCK_REALTIME_RELAXED: case TH_CLOCK_MONOTONIC_RELAXED:
		/* values are exact nanoseconds of the line */
		if (res) {
			res->tv_sec = 0;
			res->tv_nsec = 1;
		}
		return 0;
	case CLOCK_REALTIME_COARSE: case CLOCK_MONOTONIC_COARSE:
		return th_kclock_getres(CLOCK_MONOTONIC_COARSE, res);
	case TH_CLOCK_PROCESS_CPUTIME_COARSE:
	case TH_CLOCK_THREAD_CPUTIME_COARSE:
		return th__cputime_getres(id, res);
	default:
		if (!res)
			return (int)syscall(SYS_clock_getres, id, NULL);
		return th_kclock_getres(id, res);
	}
}

/* REALTIME from the library's reader (which raises the G3 floor), split as
 * th_clock_gettime's reads are (TH_FINE_FUNCS): the common call takes the
 * counter here and jumps once, to the timeline's read. */
TH_FINE_FUNCS_TO(get_tod, TH_CK_REAL, 1, struct timeval, th__tv_tv)

/* Not the common case: the obsolete timezone (from the kernel), or no
 * timeval asked for. */
static __attribute__((noinline)) int gettimeofday_other(struct timeval *tv, void *tz)
{
	if (tz != NULL && th_kgettimeofday(NULL, tz) != 0)
		return -1;
	return tv ? get_tod(tv) : 0;
}

/* For the header's inline reads, where the library must read (th__fast). */
const struct th__fine_fns th__fine_fns_tbl = {
	{get_monotonic, get_realtime, get_boottime, get_tai, get_raw},
	{get_monotonic_relaxed, get_realtime_relaxed},
	get_tod,
};

TH_API TH_ENTRY_LAYOUT int th_gettimeofday(struct timeval *tv, void *tz)
{
	if (TH_UNLIKELY(tz != NULL || !tv))
		return gettimeofday_other(tv, tz);
	return get_tod_in(tv);
}

static __attribute__((noinline)) time_t time_slow(time_t *t, time_t tk, int have_tk)
{
	struct timespec ts;
	if (th__ready() && th__P.passthrough && have_tk) {
		if (t)
			*t = tk;
		return tk;
	}
	th__fine(TH_CK_REAL, 1, &ts);
	if (have_tk && tk < ts.tv_sec - 1) {
		/* The kernel's second is well behind the line's: REALTIME may
		 * have been stepped back; a windup finds out. */
		th__windup_try();
		th__fine(TH_CK_REAL, 1, &ts);
	}
	if (t)
		*t = ts.tv_sec;
	return ts.tv_sec;
}

/* th_time() where the kernel's data page cannot be read: the kernel's
 * time(). Out of line, so that th_time()'s fast path makes no call and needs
 * no callee-saved register. */
static __attribute__((noinline)) time_t time_call(time_t *t)
{
	time_t (*kt)(time_t *) = th_hw_ktime_fn();
	time_t tk;
	if (TH_LIKELY(kt != NULL)) {
		if (TH_LIKELY(th__time_kfn(kt, t, &tk)))
			return tk;
		return time_slow(t, tk, 1);
	}
	return time_slow(t, 0, 0);
}

/*
 * time(): the kernel's cached second (one vDSO load) when it equals the
 * largest second a fine REALTIME read has returned; otherwise, about once per
 * second, a fine read decides and raises that floor. So th_time() never lags
 * a second that gettimeofday() already showed (G3), and never runs ahead of a
 * later fine read (G4), at the cost of the kernel's time() plus one load.
 */
TH_API time_t th_time(time_t *t)
{
	/* Valid in a fork child too: the floor is the same process history,
	 * and the kernel's second is the kernel's. From the kernel's data
	 * page where it was found (kdata.h; as the inline th_time() of the
	 * header does), else from the kernel's time(). */
	time_t r;
	if (TH_LIKELY(th__time_kdata(t, &r)))
		return r;
	return time_call(t);
}

TH_API clock_t th_times(struct tms *buf)
{
	return th__times(buf);
}

TH_API clock_t th_clock(void)
{
	return th__clock();
}

/*
 * The process's mode (enum th_mode), derived from the two things that make
 * it: whose records its word `cur` names (its own, or the daemon's page:
 * slot TH_SLOT_SHARED), and whether the current one, *s (copied when
 * `have`), is a line; a kernel-mode or TRANSIT record, none, or a process
 * in pass-through is kernel mode. The transitions: doc/design.md.
 */
static unsigned mode_of(uint64_t cur, int have, const struct th_snap *s, int passthrough)
{
	if (!have || s->kind != TH_REC_LINE || passthrough)
		return TH_MODE_KERNEL;
	return TH_CUR_SLOT(cur) == TH_SLOT_SHARED ? TH_MODE_SHARED : TH_MODE_LOCAL;
}

static void copy_str(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);
	if (n >= size)
		n = size - 1;
	memcpy(dst, src, n);
	dst[n] = 0;
}

TH_API int th_status(struct th_status *out, size_t size)
{
	if (!out || size < offsetof(struct th_status, freq_hz)) {
		errno = EINVAL;
		return -1;
	}
	struct th_proc *p = &th__P;
	struct timespec dummy;
	th_clock_gettime(CLOCK_MONOTONIC, &dummy); /* attach if not yet */

	struct th_status st;
	memset(&st, 0, sizeof st);
	st.size = (uint32_t)(size < sizeof st ? size : sizeof st);

	/* error against the kernel: a sandwich around one read */
	uint16_t ep;
	struct timespec k1, k2, mid;
	th_kclock_gettime(CLOCK_MONOTONIC, &k1);
	th__fine_ts(TH_CK_MONO, 1, &mid, &ep);
	th_kclock_gettime(CLOCK_MONOTONIC, &k2);
	int64_t v = (int64_t)mid.tv_sec * NS_PER_S + mid.tv_nsec;
	int64_t a = (int64_t)k1.tv_sec * NS_PER_S + k1.tv_nsec, b = (int64_t)k2.tv_sec * NS_PER_S + k2.tv_nsec;
	st.error_ns = v - (a + (b - a) / 2);
	st.error_bound_ns = (b - a) / 2 + 1;

	struct th_snap s;
	memset(&s, 0, sizeof s);
	unsigned r = 0;
	uint64_t lc = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
	int shared = TH_CUR_SLOT(lc) == TH_SLOT_SHARED;
	int have = th_snapshot(shared ? th__page_tl() : &p->tl, &s, &r) == 0;
	st.mode = mode_of(lc, have, &s, p->passthrough);
	int line = st.mode != TH_MODE_KERNEL;
	st.counter_available = (uint32_t)p->trust.available;
	st.counter = line ? (uint32_t)p->trust.available : TH_COUNTER_NONE;
	st.freq_nominal_hz = p->trust.nominal_hz;
	copy_str(st.clocksource, sizeof st.clocksource, p->trust.clocksource);
	st.tick_ns = p->tick_ns;
	copy_str(st.line, sizeof st.line,
		 !line			     ? "none"
		 : shared		     ? "timehandsd"
		 : (s.flags & TH_RECF_KPV) ? "kernel-pvclock"
		 : th_snap_kline(&s)	     ? "kernel"
					     : "timehands");

	/* Writer state: take the windup lock briefly (never from a read). */
	uint32_t z = 0;
	int locked = 0;
	/* A windup holds it for microseconds; a thread stopped inside one
	 * could hold it for ever: wait a second at most, then report no
	 * writer state rather than read it under a running writer. */
	for (int i = 0; !locked; i++) {
		z = 0;
		locked = atomic_compare_exchange_weak_explicit(&p->lock, &z, 1, memory_order_acquire,
							       memory_order_relaxed);
		if (locked || i >= 1000)
			break;
		struct timespec pause = {0, 1000000};
		nanosleep(&pause, NULL);
	}
	if (!locked) {
		copy_str(st.reason, sizeof st.reason, "a windup holds the writer's lock: writer state not shown");
		goto counters;
	}
	const struct th_line_disc *L = &th__W.disc.line[TH_MONO];
	if (shared && line && s.hi[TH_MONO] > 0) {
		/* the daemon's line */
		st.freq_hz = 4294967296.0 * 1e9 / (double)s.hi[TH_MONO];
		st.freq_uncertainty_ppm = L->have ? L->unc * 1e6 : 0;
	} else if (L->have && L->rate > 0) {
		st.freq_hz = 1e9 / L->rate;
		st.freq_uncertainty_ppm = L->unc * 1e6;
	}
	int measured = L->have && (p->trust.nominal_hz <= 0 || L->unc < th__W.disc.cfg.nominal_unc);
	copy_str(st.freq_source, sizeof st.freq_source,
		 shared && line ? "timehandsd" : measured ? "measured" : p->trust.freq_source);
	if (measured && p->trust.nominal_hz > 0 && !(shared && line)) {
		char buf[32];
		size_t n = strlen(p->trust.freq_source);
		if (n + 10 < sizeof buf) {
			memcpy(buf, "measured+", 9);
			memcpy(buf + 9, p->trust.freq_source, n + 1);
			copy_str(st.freq_source, sizeof st.freq_source, buf);
		}
	}
	st.window_ns = th__W.disc.window_ns;
	st.resyncs = th__W.disc.resyncs;
	if (p->passthrough)
		copy_str(st.reason, sizeof st.reason, p->trust.reason);
	else if ((shared && line) || (line && th_snap_kline(&s)))
		st.reason[0] = 0; /* the fastest modes */
	else if (!p->trust.usable && !(shared && line))
		copy_str(st.reason, sizeof st.reason, p->trust.reason);
	else if (th__W.reason[0])
		copy_str(st.reason, sizeof st.reason, th__W.reason);
	else if (!line && th_disc_offsets_wide(&th__W.disc))
		copy_str(st.reason, sizeof st.reason,
			 "REALTIME and BOOTTIME offsets not yet measured closely (the kernel's reads were slow or "
			 "preempted): those clocks are the kernel's own until they are");
	else if (!line && !th_disc_ready(&th__W.disc))
		copy_str(st.reason, sizeof st.reason, "calibrating: the counter frequency is being measured");
	else if (th__W.page_reason[0])
		copy_str(st.reason, sizeof st.reason, th__W.page_reason); /* local or kernel: why not shared */
	else if (!line)
		copy_str(st.reason, sizeof st.reason,
			 "between lines: the kernel's clocks serve until a kernel sample narrow enough to start one");
	atomic_store_explicit(&p->lock, 0, memory_order_release);
counters:
	if (p->cfg.warning[0]) {
		size_t n = strlen(st.reason);
		if (n && n + 2 < sizeof st.reason) {
			memcpy(st.reason + n, "; ", 3);
			n += 2;
		}
		copy_str(st.reason + n, sizeof st.reason - n, p->cfg.warning);
	}
	copy_str(st.page_path, sizeof st.page_path, p->cfg.page);
	uint32_t op = atomic_load_explicit(&p->ctr_early, memory_order_relaxed);
	copy_str(st.counter_read, sizeof st.counter_read,
		 op == TH_CTR_LATE	   ? "none"
		 : op == TH_CTR_RDTSCP	   ? "rdtscp"
		 : op == TH_CTR_FENCE_COPY ? (TH_HW_FENCE_AT_COUNTER ? "late rdtsc" : "late cntvct")
#if defined(__aarch64__)
				       : "isb;cntvct");
#else
				       : "lfence;rdtsc");
#endif
	copy_str(st.kernel_tick, sizeof st.kernel_tick,
		 th__kdata_recheck() ? "data page" : TH_VDSO(clock_gettime) ? "vdso" : "system call");

	st.windups = atomic_load_explicit(&p->windups, memory_order_relaxed);
	st.retries = atomic_load_explicit(&p->retries, memory_order_relaxed);
	st.slow_reads = atomic_load_explicit(&p->slow_reads, memory_order_relaxed);
	st.fallbacks = atomic_load_explicit(&p->fallbacks, memory_order_relaxed);
	memcpy(out, &st, st.size);
	return 0;
}
