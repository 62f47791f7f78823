/*
 * Per-process state and the read fast paths. One reader (th__fine) serves every
 * fine clock; th__coarse every coarse one. Everything that is not the common
 * case lives out of line in local.c.
 */
#ifndef TH_ATTACH_PROC_H
#define TH_ATTACH_PROC_H

#include <stdatomic.h>
#include <stdint.h>

#include "config.h"
#include "discipline.h"
#include "hw.h"
#include "page.h"
#include "page_client.h"
#include "record.h"
#include "sample.h"
#include "trust.h"
#include "writer.h"

#define TH_LIKELY(x) __builtin_expect(!!(x), 1)
#define TH_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TH_HIDDEN __attribute__((visibility("hidden")))

/* Offsets a fine or coarse read adds to its line. */
enum th_sel { TH_SEL_NONE = 0, TH_SEL_REAL = 1, TH_SEL_BOOT = 2, TH_SEL_TAI = 3 };

enum { TH_UNATTACHED = 0, TH_ATTACHING = 1, TH_ATTACHED = 2 };

/* Lives in a MADV_WIPEONFORK page: a child of fork() (also a raw clone or
 * syscall(SYS_fork) that bypasses pthread_atfork) finds state 0 and attaches
 * again, resetting the windup lock and the writer state it inherited. */
struct th_wipe {
	_Atomic uint32_t state;
};

#define TH_G3_SECMASK (((uint64_t)1 << 48) - 1)

/*
 * Shared mode. timehandsd's page is mapped read-only over this page-aligned
 * area of the library's own memory (a zero page otherwise), so that a reader
 * finds its timeline at a link-time address, as it finds the local one. The
 * local timeline's `cur` names the slot TH_SLOT_SHARED while the process
 * reads the page.
 */
#define TH_SLOT_SHARED 0xffu
struct th_page_area {
	unsigned char bytes[TH_PAGE_SIZE];
} __attribute__((aligned(TH_PAGE_SIZE)));
extern struct th_page_area th__page_area TH_HIDDEN;

static inline struct th_timeline *th__page_tl(void)
{
	return (struct th_timeline *)(void *)(th__page_area.bytes + TH_PAGE_HDR_SIZE);
}

/* The least value of each clock in shared mode: what this process may have
 * returned before it switched to the page (set before the switch is
 * published; only ever raised). REALTIME and TAI floors hold only while the
 * page's REALTIME epoch is the one at the switch. */
struct th_shared_floor {
	_Atomic int64_t sec;
	_Atomic uint32_t nsec;
	_Atomic uint32_t pad;
};

struct th_proc {
	struct th_timeline tl;
	/* G3: REALTIME seconds a fine read has returned, with the REALTIME
	 * step epoch in the top 16 bits. Raised at most once per second. */
	_Atomic uint64_t g3 __attribute__((aligned(64)));
	/* Least MONOTONIC coarse value, raised only by a coarse reader that
	 * found the record stale while another thread held the windup lock. */
	_Atomic uint64_t coarse_floor;
	_Atomic uint32_t lock; /* windup try-lock: 0 free, 1 held */
	struct th_shared_floor sh_floor[TH_NCLOCKS];
	_Atomic uint32_t sh_epoch;  /* the page's REALTIME epoch at the switch */

	/* Set at attach, read-only afterwards (published by the release
	 * store of th_wipe.state). */
	int inited;
	int passthrough;       /* TIMEHANDS_DISABLE: every read is the kernel's */
	int have_kcoarse, have_ktime;
	uint64_t tick_ns;
	struct th_config cfg;
	struct th_trust trust;

	/* Writer state: only under `lock`. */
	int counter_usable;    /* trust, possibly revoked while running */
	struct th_disc disc;
	struct th_sampler sp;  /* kernel/counter sampling (sample.h) */
	struct th_writer wr;   /* transitions of the local timeline (writer.h) */
	uint64_t jumps[3];     /* kernel MONOTONIC of the last discontinuities */
	uint64_t distrust_until; /* kernel MONOTONIC; counter not used before */
	uint64_t distrust_ns;
	char reason[192];
	/* shared page (under `lock`) */
	struct th_page_map page;     /* attached page, or zeroed */
	int page_wanted;             /* look for a daemon: configured or seen once */
	uint64_t page_next_try;      /* kernel MONOTONIC of the next attach attempt */
	uint64_t page_backoff;
	char page_reason[160];       /* why not shared */

	_Atomic uint64_t windups, retries, slow_reads, fallbacks;
};

extern struct th_proc th__P TH_HIDDEN;
extern struct th_wipe *_Atomic th__wipe TH_HIDDEN;

/* Out of line (local.c). */
int th__attach(void) TH_HIDDEN;
int th__fine_slow(int line, int sel, int ordered, uint64_t *ns, uint16_t *epoch) TH_HIDDEN;
int th__coarse_slow(int sel, uint64_t *ns, uint16_t *epoch) TH_HIDDEN;
void th__g3_raise_slow(uint64_t sec, uint16_t epoch) TH_HIDDEN;
int th__windup_try(void) TH_HIDDEN;
void th__account_retries(unsigned n) TH_HIDDEN;

static inline int th__ready(void)
{
	struct th_wipe *w = atomic_load_explicit(&th__wipe, memory_order_relaxed);
	/* Acquire pairs with the release store ending th__attach: the
	 * configuration above is visible once the state reads ATTACHED. */
	return TH_LIKELY(atomic_load_explicit(&w->state, memory_order_acquire) == TH_ATTACHED);
}

/* Clock -> (line, offset) of the slow paths. */
static inline int th__ck_line(int ck)
{
	return ck == TH_CK_RAW ? TH_RAW : TH_MONO;
}
static inline int th__ck_sel(int ck)
{
	switch (ck) {
	case TH_CK_REAL: return TH_SEL_REAL;
	case TH_CK_BOOT: return TH_SEL_BOOT;
	case TH_CK_TAI: return TH_SEL_TAI;
	default: return TH_SEL_NONE;
	}
}

int th__fine_ts_slow(int ck, int ordered, struct timespec *ts, uint16_t *epoch) TH_HIDDEN;
int th__coarse_ts_slow(int ci, struct timespec *ts, uint16_t *epoch) TH_HIDDEN;

/*
 * Fine read of clock `ck` (TH_CK_*). Copies only the fields this clock needs
 * under the generation protocol (see th_snapshot for the pairing of each
 * fence), then reads the counter outside the retry loop: a record stays
 * exact over its whole window even after it has been superseded, so the
 * counter need not be taken inside the window; it must only be taken after
 * the copy, which the ordered read guarantees. The result is the anchor's
 * (sec, nsec) plus a delta of at most a window: no division.
 */
static inline __attribute__((always_inline)) int th__fine_ts(int ck, int ordered, struct timespec *ts,
							     uint16_t *epoch)
{
	/* No attach or fork check here: before the first attach the timeline
	 * is empty (gen 0, slow path), and a fork child's inherited records
	 * stay exact; the slow path and every windup check for a fork. */
	struct th_timeline *tl = &th__P.tl;
	if (ordered)
		th_hw_ctr_fence();
	TH_STEP("read_cur");
	uint64_t cur = atomic_load_explicit(&tl->cur, memory_order_acquire);
	/* Acquire (both loads): the page area is mapped and the shared floors
	 * are set before the local word names the shared slot (th_commit's
	 * release); the page's records before its own cur (the daemon's). */
	const int shared = TH_CUR_SLOT(cur) == TH_SLOT_SHARED;
	if (shared) {
		tl = th__page_tl();
		cur = atomic_load_explicit(&tl->cur, memory_order_acquire);
	}
	struct th_rec *r = &tl->ring[TH_CUR_SLOT(cur) % TH_RING];
	TH_STEP("read_gen");
	uint32_t g = atomic_load_explicit(&r->gen, memory_order_acquire);
	TH_STEP("read_fields");
	uint64_t anchor = atomic_load_explicit(&r->anchor, memory_order_relaxed);
	int64_t dlo = atomic_load_explicit(&r->dlo, memory_order_relaxed);
	int64_t ddue = atomic_load_explicit(&r->ddue, memory_order_relaxed);
	int64_t lo, hi;
	if (ck == TH_CK_RAW) {
		lo = atomic_load_explicit(&r->raw_lo, memory_order_relaxed);
		hi = atomic_load_explicit(&r->raw_hi, memory_order_relaxed);
	} else {
		lo = atomic_load_explicit(&r->mono_lo, memory_order_relaxed);
		hi = atomic_load_explicit(&r->mono_hi, memory_order_relaxed);
	}
	int64_t sec = atomic_load_explicit(&r->at[ck].sec, memory_order_relaxed);
	int64_t q = atomic_load_explicit(&r->at[ck].nsec_q32, memory_order_relaxed);
	uint16_t ep = ck == TH_CK_REAL || (shared && ck == TH_CK_TAI)
			      ? atomic_load_explicit(&r->epoch, memory_order_relaxed)
			      : 0;
	/* Orders the copies before the re-load of gen; pairs with the writer's
	 * release fence after it stored gen = 0. */
	atomic_thread_fence(memory_order_acquire);
	TH_STEP("recheck_gen");
	uint32_t g2 = atomic_load_explicit(&r->gen, memory_order_relaxed);
	/* A record being rewritten (g == 0 or changed: retried on the slow
	 * path), or a kernel-mode record (empty window: never touch the counter
	 * there, PR_SET_TSC may forbid it). */
	uint64_t span = (uint64_t)(ddue - dlo);
	if (TH_UNLIKELY(g == 0 || g2 != g || span == 0))
		return th__fine_ts_slow(ck, ordered, ts, epoch);
	TH_STEP("read_counter");
	/* Ordered reads issued the fence above, before the copy. */
	uint64_t c = th_hw_ctr_relaxed();
	int64_t d = (int64_t)(c - anchor);
	if (TH_UNLIKELY((uint64_t)(d - dlo) >= span))
		return th__fine_ts_slow(ck, ordered, ts, epoch);
	/* Inside the fast window |d * rate| < 2^62 (TH_MAX_WINDOW_NS): one
	 * 64-bit multiply per slope, both in parallel, the sign of d picks. */
	int64_t ql = q + d * lo, qh = q + d * hi;
	int64_t n = (d < 0 ? ql : qh) >> 32;
	if (TH_UNLIKELY((uint64_t)n >= 1000000000u)) {
		int64_t k = n / 1000000000 - (n < 0);
		sec += k;
		n -= k * 1000000000;
	}
	if (shared) {
		/* never below what this process returned before the switch */
		struct th_shared_floor *f = &th__P.sh_floor[ck];
		int64_t fs = atomic_load_explicit(&f->sec, memory_order_relaxed);
		int64_t fn = atomic_load_explicit(&f->nsec, memory_order_relaxed);
		if (TH_UNLIKELY(sec < fs || (sec == fs && n < fn)) &&
		    ((ck != TH_CK_REAL && ck != TH_CK_TAI) ||
		     ep == atomic_load_explicit(&th__P.sh_epoch, memory_order_relaxed))) {
			sec = fs;
			n = fn;
		}
	}
	ts->tv_sec = (time_t)sec;
	ts->tv_nsec = (long)n;
	*epoch = ep;
	return 0;
}

/* G3: remember the REALTIME second a fine read is about to return. */
static inline void th__g3_raise(int64_t sec, uint16_t epoch)
{
	uint64_t w = atomic_load_explicit(&th__P.g3, memory_order_relaxed);
	if (TH_LIKELY((int64_t)(w & TH_G3_SECMASK) >= sec))
		return;
	if (sec >= 0)
		th__g3_raise_slow((uint64_t)sec, epoch);
}

/*
 * Coarse MONOTONIC (ci 0) or REALTIME (ci 1): the line's value at the last
 * windup, kept fresh by the kernel's own tick.
 */
static inline __attribute__((always_inline)) int th__coarse_ts(int ci, struct timespec *ts, uint16_t *epoch)
{
	if (TH_UNLIKELY(!th__ready() || !th_hw_have_kcoarse()))
		return th__coarse_ts_slow(ci, ts, epoch);
	struct timespec kts;
	th_hw_kread(CLOCK_MONOTONIC_COARSE, &kts);
	uint64_t kc = (uint64_t)kts.tv_sec * 1000000000u + (uint64_t)kts.tv_nsec;
	struct th_timeline *tl = &th__P.tl;
	uint64_t coarse = 0, tick = 0;
	int64_t dlo = 0, ddue = 0, sec = 0;
	uint32_t nsec = 0;
	uint16_t ep = 0;
	unsigned t;
	/* local records are refreshed each kernel tick, the page's each
	 * publisher tick (which may land up to a kernel tick later) */
	uint64_t stale = th__P.tick_ns / 2;
	for (t = 0; t < TH_READ_TRIES; t++) {
		uint64_t cur = atomic_load_explicit(&th__P.tl.cur, memory_order_acquire);
		if (TH_CUR_SLOT(cur) == TH_SLOT_SHARED) {
			/* as in th__fine_ts */
			tl = th__page_tl();
			cur = atomic_load_explicit(&tl->cur, memory_order_acquire);
			stale = 2 * th__P.tick_ns;
		}
		struct th_rec *r = &tl->ring[TH_CUR_SLOT(cur) % TH_RING];
		uint32_t g = atomic_load_explicit(&r->gen, memory_order_acquire);
		if (TH_UNLIKELY(g == 0))
			continue;
		dlo = atomic_load_explicit(&r->dlo, memory_order_relaxed);
		ddue = atomic_load_explicit(&r->ddue, memory_order_relaxed);
		coarse = atomic_load_explicit(&r->coarse, memory_order_relaxed);
		tick = atomic_load_explicit(&r->tick, memory_order_relaxed);
		sec = atomic_load_explicit(&r->coarse_at[ci].sec, memory_order_relaxed);
		nsec = (uint32_t)((uint64_t)atomic_load_explicit(&r->coarse_at[ci].nsec_q32, memory_order_relaxed) >> 32);
		if (ci)
			ep = atomic_load_explicit(&r->epoch, memory_order_relaxed);
		/* as in th__fine_ts */
		atomic_thread_fence(memory_order_acquire);
		if (TH_LIKELY(atomic_load_explicit(&r->gen, memory_order_relaxed) == g))
			break;
	}
	uint64_t cf = atomic_load_explicit(&th__P.coarse_floor, memory_order_relaxed);
	if (TH_UNLIKELY(t == TH_READ_TRIES || dlo == ddue || kc - tick >= stale || cf > coarse))
		return th__coarse_ts_slow(ci, ts, epoch);
	if (stale != th__P.tick_ns / 2) { /* shared: the floors of the switch */
		struct th_shared_floor *f = &th__P.sh_floor[ci ? TH_CK_REAL : TH_CK_MONO];
		int64_t fs = atomic_load_explicit(&f->sec, memory_order_relaxed);
		if (TH_UNLIKELY(sec <= fs))
			return th__coarse_ts_slow(ci, ts, epoch);
	}
	ts->tv_sec = (time_t)sec;
	ts->tv_nsec = (long)nsec;
	*epoch = ep;
	return 0;
}

#endif
