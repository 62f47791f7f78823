/*
 * The in-process publisher, in four files: windup.c (this process's own
 * records), shared.c (joining and leaving timehandsd's page), attach.c
 * (attach, fork, th__fast) and slow.c (the reads the fast paths hand over).
 * This header holds what they share: small kernel-clock helpers and the
 * functions one calls in another. Private to src/attach.
 */
#ifndef TH_ATTACH_LOCAL_H
#define TH_ATTACH_LOCAL_H

#include <time.h>

#include "proc.h"
#include "sample.h"
#include "wstate.h"

#define NS_PER_S 1000000000LL

static inline int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * NS_PER_S + t->tv_nsec;
}

static inline clockid_t line_clock(int line)
{
	return line == TH_RAW ? CLOCK_MONOTONIC_RAW : CLOCK_MONOTONIC;
}

/* The kernel's clock ck (TH_CK_*). */
static inline clockid_t exact_clock(int ck)
{
	static const clockid_t kernel_id[TH_NCLOCKS] = {
		[TH_CK_MONO] = CLOCK_MONOTONIC, [TH_CK_REAL] = CLOCK_REALTIME, [TH_CK_BOOT] = CLOCK_BOOTTIME,
		[TH_CK_TAI] = CLOCK_TAI,        [TH_CK_RAW] = CLOCK_MONOTONIC_RAW};
	return kernel_id[ck];
}

static inline int64_t kread_ns(clockid_t id)
{
	struct timespec ts = {0, 0};
	th_hw_kread(id, &ts);
	return ts_ns(&ts);
}

/* The kernel's own clock ck: before attach, and in pass-through. */
static inline int kernel_exact(int ck, uint64_t *ns)
{
	*ns = (uint64_t)kread_ns(exact_clock(ck));
	return 0;
}

static inline void raise_i64(_Atomic int64_t *a, int64_t v)
{
	int64_t cur = atomic_load_explicit(a, memory_order_relaxed);
	while (cur < v &&
	       !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_seq_cst, memory_order_relaxed))
		;
}

static inline int64_t snap_offset(const struct th_snap *s, int sel)
{
	switch (sel) {
	case TH_SEL_REAL: return s->off_real;
	case TH_SEL_BOOT: return s->off_boot;
	case TH_SEL_TAI: return s->off_tai;
	default: return 0;
	}
}

static inline void ns_to_ts(int64_t ns, struct timespec *ts)
{
	int64_t sec = ns / NS_PER_S, rem = ns % NS_PER_S;
	if (rem < 0) {
		rem += NS_PER_S;
		sec--;
	}
	ts->tv_sec = (time_t)sec;
	ts->tv_nsec = (long)rem;
}


/* windup.c: this process's records: samples and windups */
void th__take_sample(struct th_proc *p, struct th_sample *s, int ctr, int full);
void th__quick_sample(struct th_sample *s);
void th__publish_kernel(const struct th_snap *prev, const struct th_sample *s,
			uint64_t due_in);
int th__install_line(const struct th_snap *prev, int have_prev);
#ifndef TH_SIM
int th__kv_windup(struct th_proc *p, const struct th_snap *prev, uint64_t x);
#endif
void th__local_windup(struct th_proc *p, int joining);
void th__windup_locked(struct th_proc *p);
/* The lock holder's records tied to no update the kernel may finish (where
 * its data page is read), until th__tie_end: see th__windup_locked. */
void th__tie_begin(void);
void th__tie_end(void);

/* shared.c: timehandsd's page: floors, usability, join and leave */
uint64_t th__floor_ns(const struct th_proc *p, int ck);
void th__copy_reason(char *dst, size_t size, const char *a, const char *b);
int th__page_usable(struct th_proc *p, uint64_t now, struct th_snap *ps, int *dead);
int th__page_offsets_agree(const struct th_snap *ps);
void th__leave_shared(struct th_proc *p, uint64_t now, int dead);
int th__try_shared(struct th_proc *p, int timeout_ms);

/* slow.c: values the slow paths compute, and the coarse floor */
/* A kernel-served value of record s (phi, or the kernel's own): 1, or 0
 * when the record changed meanwhile or the kernel's offset could not be read
 * (read again). */
int th__kernel_value(struct th_proc *p, const struct th_snap *s, int ck, uint64_t *v);
uint64_t th__above_floor(struct th_proc *p, uint64_t v, int ck, uint16_t epoch);
void th__raise_coarse_floor(struct th_proc *p, uint64_t v);

#endif
