/*
 * The per-process state readers read, and the read fast paths. One reader
 * (th__fine, on th_abi_eval) serves every fine clock; th__coarse every
 * coarse one. Everything that is not the common case lives out of line in
 * attach.c, windup.c, shared.c and slow.c; the writer's own state is in
 * wstate.h.
 */
#ifndef TH_ATTACH_PROC_H
#define TH_ATTACH_PROC_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/time.h>

#include "config.h"
#include "hw.h"
#include "kdata.h"
#include "page.h"
#include "page_client.h"
#include "record.h"
#include "trust.h"

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

#define TH_G3_SECMASK TH_ABI_G3_SECMASK
#define TH_G3_NONE TH_ABI_G3_NONE

/*
 * Shared mode. timehandsd's page is mapped read-only over this page-aligned
 * area of the library's own memory (a zero page otherwise), so that a reader
 * finds its timeline at a link-time address, as it finds the local one. The
 * local timeline's `cur` names the slot TH_SLOT_SHARED while the process
 * reads the page.
 */
#define TH_SLOT_SHARED TH_ABI_SLOT_SHARED
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
	/* 1 while the current record is the kernel's own conversion (kseq,
	 * record.h): coarse reads then read the kernel's coarse clocks from
	 * its data page (th__coarse_kv). kv_off_real: REALTIME - MONOTONIC of
	 * the epoch in force; a kernel offset that differs is a step no record
	 * has followed yet. Written by the windup (relaxed: a reader that sees
	 * an older value reads the kernel's clock, which is right either way,
	 * or goes to the slow path). */
	_Atomic uint32_t kv_on;
	_Atomic int64_t kv_off_real;
	/* The kernel's count of the update the current kernel-line record
	 * was copied from: coarse reads serve an update's coarse clocks only
	 * after its windup (which raises the coarse floor where the update's
	 * coarse clocks lie below the previous one's: th__kv_windup). Stored
	 * with release after that raise; loaded with acquire before the
	 * floor. */
	_Atomic uint32_t kv_seq;
	/* Before this process's first measurement of its REALTIME and
	 * BOOTTIME offsets (the first windup), readers get the kernel's own
	 * clock; each such reading bounds the offset from below (the reading
	 * minus a MONOTONIC read after it), and the measurement never takes
	 * less than that bound, so that the records' readings do not undercut
	 * those readings (G2). koff_begun: the writer has begun that
	 * measurement (kernel_first, th__take_sample: a store, a fence and a load
	 * on either side, so that one of them sees the other's). */
	_Atomic int64_t koff_lb[2];
	_Atomic uint32_t koff_begun;
	/* Windup try-lock: 0 free, else its holder's thread number (th_hw_self,
	 * 2 on; 1 is anybody's). A signal handler that finds its own thread
	 * holding it waits for no windup: the one it interrupted cannot go on
	 * before the handler returns (th__lock_mine). */
	_Atomic uint32_t lock;
	struct th_shared_floor sh_floor[TH_NCLOCKS];
	/* The page numbers its REALTIME steps (epochs) itself; this process
	 * reads them as page epoch + sh_delta, so that its own numbering goes
	 * on across switches (the G3 floor orders by epoch). sh_epoch: the
	 * epoch, in this numbering, of the floors of the last switch. */
	_Atomic uint32_t sh_delta;
	_Atomic uint32_t sh_epoch;
	/* The counter at which the switch to shared mode found the page's
	 * line above its floors (page_above_floors), set before the switch's
	 * release CAS, which publishes it. A fast read of the page serves a
	 * counter it took before the copy only at or above it: the page's
	 * line is above the floors from there on, and a counter taken before
	 * the reader found the switch may lie below (th__read_tl_v). Only
	 * raised: switches are serialised under `lock`, each with a later
	 * counter. */
	_Atomic uint64_t sh_ctr;
	/* A page record whose kernel tick is this far behind the kernel's
	 * coarse clock is stale for coarse readers (the publisher's tick, or
	 * the kernel's if longer, plus half a kernel tick). Set before the
	 * release CAS of a switch to shared mode, which publishes it. */
	_Atomic uint64_t sh_fresh_ns;
	/* What the coarse fast path compares with: 0 (every record stale:
	 * the slow path, which applies the floors) from a switch to shared
	 * mode until a coarse reader saw a page record whose coarse values
	 * are above the floors of the switch; then sh_fresh_ns. Set to 0
	 * before the release CAS of the switch; set with a release store. */
	_Atomic uint64_t sh_fresh_fast;

	/* Nonzero while fast readers may read the counter before they copy
	 * their record (th__read_ctr; a read of the daemon's page serves it
	 * only at or above sh_ctr, th__read_tl_v), and how an ordered read
	 * reads it: TH_CTR_FENCED (x86 LFENCE;RDTSC; elsewhere the fence
	 * before the word, then the counter) or TH_CTR_RDTSCP (x86 RDTSCP,
	 * where the CPU has it and does not declare LFENCE serializing); or
	 * TH_CTR_FENCE_COPY: an ordered read takes the fence after the word
	 * (x86 LFENCE; elsewhere before it, as always), copies, then reads the
	 * counter unordered, which then overlaps the copy (Intel, where that
	 * costs less than an ordered read before the copy; unordered reads
	 * still read first). Set
	 * at attach where the trust allows the counter, so that a process whose counter may not be read
	 * (PR_SET_TSC, an untrusted counter, TIMEHANDS_DISABLE) or that has
	 * not attached yet never reads it on a path that ends in the kernel.
	 * Relaxed: it orders nothing; either value gives a correct read (the
	 * counter taken before or after the copy, both served by the
	 * protocol, tests/model/timehands.pml). The header's inline reads
	 * find it through th__fast(). */
	_Atomic uint32_t ctr_early;

	/* Set at attach, read-only afterwards (published by the release
	 * store of th_wipe.state). */
	int inited;
	int passthrough;       /* TIMEHANDS_DISABLE: every read is the kernel's */
	int kv_ok;             /* the kernel's conversion is readable (kdata.h): its own line */
	int have_kcoarse, have_ktime;
	uint64_t tick_ns;
	struct th_config cfg;
	struct th_trust trust;

	_Atomic uint64_t windups, retries, slow_reads, fallbacks;
};

extern struct th_proc th__P TH_HIDDEN;
/* api.c: the reads per clock, for th__fast (attach.c) */
extern const struct th__fine_fns th__fine_fns_tbl TH_HIDDEN;
extern struct th_wipe *_Atomic th__wipe TH_HIDDEN;

/* Out of line (attach.c, windup.c, slow.c). */
int th__attach(void) TH_HIDDEN;
int th__warn_to_stderr(void) TH_HIDDEN;
/* The slow path of a fine reading: *ns and its REALTIME epoch *epoch;
 * returns 1 where the reading is of no epoch's G3 floor (an offset of the
 * kernel's that no record has followed yet: a step, maybe taken back before
 * the records follow it, which must not leave its second as the floor of
 * the epoch before it), else 0. */
int th__fine_slow(int ck, int ordered, uint64_t *ns, uint16_t *epoch) TH_HIDDEN;
int th__coarse_slow(int ck, uint64_t *ns, uint16_t *epoch) TH_HIDDEN;
int th__g3_raise_slow(uint64_t sec, uint16_t epoch) TH_HIDDEN; /* 0 */
int th__windup_try(void) TH_HIDDEN;

/* This thread's number (2 on), assigned at its first call. */
uint32_t th__self_id(void) TH_HIDDEN;

/* The windup lock is held by this very thread: a signal handler that
 * interrupted its holder. Relaxed: the thread sees its own store. */
static inline int th__lock_mine(struct th_proc *p)
{
	return atomic_load_explicit(&p->lock, memory_order_relaxed) == th_hw_self();
}
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

/* A reading as two registers (returned in rax:rdx on x86-64). */
struct th_tv {
	int64_t sec;
	int64_t nsec;
};
struct th_tv th__fine_slow_v(int ck, int ordered) TH_HIDDEN;
/* A REALTIME or TAI reading of the daemon's page whose record the kernel
 * moved on from (slow.c): the record's reading where the kernel's offset is
 * still its own, else the slow path's. */
struct th_tv th__page_moved_v(int ck, int ordered, uint64_t lc, uint64_t c, int early) TH_HIDDEN;
struct th_tv th__fine_shared_v(int ck, int ordered, uint64_t lc, uint64_t c, int early) TH_HIDDEN;
int th__coarse_ts_slow(int ck, struct timespec *ts, uint16_t *epoch) TH_HIDDEN;
/* Coarse REALTIME with the G3 floor applied (the slow path of a reading
 * that wants no epoch). */
int th__coarse_real_slow(struct timespec *ts) TH_HIDDEN;
/* th_kdata_check(), also turning the header's inline th_time() off the
 * kernel's data page on a disagreement; 1 while the direct reads are on. */
int th__kdata_recheck(void) TH_HIDDEN;

/* G3: remember the REALTIME second a fine read is about to return. The word
 * orders (epoch, second): a reading of a newer epoch (the kernel stepped
 * REALTIME, the record followed) replaces a floor of an older one, whatever
 * its second; a reading of an older epoch never touches a newer floor. */
static inline int th__g3_raise0(int64_t sec, uint16_t epoch)
{
	uint64_t w = atomic_load_explicit(&th__P.g3, memory_order_relaxed);
	/* The floor's compare first: the common case falls through to the
	 * return (a negative second, before 1970, never raises the floor; its
	 * key has the top bits set and rarely passes the compare). */
	if (TH_LIKELY(w >= (((uint64_t)epoch << 48) | (uint64_t)sec)) || sec < 0)
		return 0;
	/* a tail call where the caller returns this 0 too */
	return th__g3_raise_slow((uint64_t)sec, epoch);
}
static inline void th__g3_raise(int64_t sec, uint16_t epoch)
{
	(void)th__g3_raise0(sec, epoch);
}

/* Nonzero when a record tied to a kernel update (kseq, record.h) is no
 * longer the kernel's for clock ck (TH_CK_*) at counter c, read before
 * (th_abi_kseq_moved with the kernel's count). */
static inline __attribute__((always_inline)) uint32_t th__kseq_moved(uint64_t ks, int ck, uint64_t c)
{
	return th_abi_kseq_moved(ks, ck, th_hw_kcount_ref(), c);
}

/* The counter read after the copy (th_abi_eval's late_ctr), the
 * simulation's scheduling points inside it, and where the counter from
 * which the page serves a counter taken first, and the page's REALTIME
 * epoch's shift, are kept. */
#define TH__SH_CTR ((const uint64_t *)(const void *)&th__P.sh_ctr)
#define TH__SH_DELTA ((const uint32_t *)(const void *)&th__P.sh_delta)
static inline uint64_t th__late_ctr(void)
{
	return th_hw_ctr_relaxed();
}
#ifdef TH_SIM
#define TH__EVAL_STEP th_sim_step
#else
#define TH__EVAL_STEP 0
#endif

/*
 * Fine read of clock `ck` (TH_CK_*) through timeline `tl`, whose word the
 * caller loaded (after the ordered read's fence): th_abi_eval, the reader
 * <timehands.h> compiles into programs too (its comment has the protocol).
 * The counter `c` was read right after the word, before the copy
 * (th__read_ctr, `early`), or is read there after the copy: a record stays
 * exact over its whole window even after it has been superseded, so the
 * counter need not be taken inside the copy's window, and the window
 * reaches below the writer's sample, so a counter taken before the record
 * was published is served where it lies inside it (and is the slow path's
 * otherwise). Either way the counter is read after the fence and before
 * the read returns, which is all G1 and G2 need (the Spin model checks both
 * positions). 1 with *out and the record's REALTIME epoch *oep (the caller
 * raises the G3 floor), 0 where the slow path must read.
 * `shared`: reading the daemon's page; the switch to it waited until the
 * page's line was above everything this process had returned, so no floor
 * is needed here (the slow paths still apply the floors), for a counter at
 * or above the one at which the switch saw that (th_proc.sh_ctr). `lc` is
 * then the local word that named the shared slot: the value is served only
 * if the local word still names it after the copy (the process may have
 * left the page meanwhile, see th__leave_shared).
 */
static inline __attribute__((always_inline)) int th__read_tl_to(struct th_timeline *tl, uint64_t cur, int ck,
								 int ordered, const int shared, uint64_t lc,
								 uint64_t c, int early, int64_t *osec, int64_t *onsec,
								 uint16_t *oep)
{
	(void)ordered;
	uint64_t ep;
	const struct th_abi_timeline *at = (const struct th_abi_timeline *)(const void *)tl;
	if (TH_UNLIKELY(!th_abi_eval(th_abi_rec_of(at, cur), cur, at, ck, early, c, th__late_ctr,
				     th_hw_kcount_ref(), TH__EVAL_STEP, shared,
				     (const uint64_t *)(const void *)&th__P.tl.cur, lc, TH__SH_CTR, TH__SH_DELTA, osec,
				     onsec, &ep)))
		return 0;
	*oep = (uint16_t)ep;
	return 1;
}

static inline __attribute__((always_inline)) int th__read_tl_try(struct th_timeline *tl, uint64_t cur, int ck,
								  int ordered, const int shared, uint64_t lc,
								  uint64_t c, int early, struct th_tv *out,
								  uint16_t *oep)
{
	int64_t sec, n;
	if (!th__read_tl_to(tl, cur, ck, ordered, shared, lc, c, early, &sec, &n, oep))
		return 0;
	*out = (struct th_tv){sec, n};
	return 1;
}

/* th__read_tl_try, else the slow path; a REALTIME reading raises the G3
 * floor. */
static inline __attribute__((always_inline)) struct th_tv th__read_tl_v(struct th_timeline *tl, uint64_t cur,
									int ck, int ordered, const int shared,
									uint64_t lc, uint64_t c, int early)
{
	struct th_tv v;
	uint16_t ep;
	if (TH_UNLIKELY(!th__read_tl_try(tl, cur, ck, ordered, shared, lc, c, early, &v, &ep)))
		return th__fine_slow_v(ck, ordered);
	if (ck == TH_CK_REAL)
		th__g3_raise(v.sec, ep);
	return v;
}


/* A reading into the caller's timespec, word by word (TH_ABI_PIN2); 0, as
 * clock_gettime returns. */
static inline __attribute__((always_inline)) int th__tv_ts(struct th_tv v, struct timespec *ts)
{
	TH_ABI_PIN2(v.sec, v.nsec);
	ts->tv_sec = (time_t)v.sec;
	ts->tv_nsec = (long)v.nsec;
	return 0;
}

/* The same into a timeval, with two scalar stores: the caller reads tv_usec
 * right away, and a 16-byte vector store of the pair cannot forward its
 * upper half to that load on some CPUs, which costs more than the
 * conversion. */
static inline __attribute__((always_inline)) int th__tv_tv(struct th_tv v, struct timeval *tv)
{
	tv->tv_sec = (time_t)v.sec;
	tv->tv_usec = (suseconds_t)th_abi_usec(v.nsec);
	return 0;
}

/* The nanoseconds of a reading whose seconds the reader stored already. */
static inline __attribute__((always_inline)) void th__ts_ns(struct timespec *ts, int64_t n)
{
	ts->tv_nsec = (long)n;
}
static inline __attribute__((always_inline)) void th__tv_ns(struct timeval *tv, int64_t n)
{
	tv->tv_usec = (suseconds_t)th_abi_usec(n);
}
_Static_assert(sizeof(time_t) == sizeof(int64_t), "the readers store a reading's seconds as int64_t");
#define th__store_ns(out, n) _Generic((out), struct timespec * : th__ts_ns, struct timeval * : th__tv_ns)((out), (n))

/* th_proc.ctr_early */
#define TH_CTR_LATE 0u
#define TH_CTR_FENCED 1u
#define TH_CTR_RDTSCP 2u
#define TH_CTR_FENCE_COPY 3u

/* The first step of a fast read: the local word, after the ordered read's
 * fence where the fence is not the counter read's (!TH_HW_FENCE_AT_COUNTER;
 * issued before any load of the read). Acquire: the page area is mapped
 * and the shared floors set before the word names the shared slot (the
 * switch's release CAS). */
static inline __attribute__((always_inline)) uint64_t th__read_cur(int ordered)
{
	if (ordered && !TH_HW_FENCE_AT_COUNTER)
		th_hw_ctr_fence();
	TH_STEP("read_cur");
	return atomic_load_explicit(&th__P.tl.cur, memory_order_acquire);
}

/*
 * Then, where the process may read the counter first (ctr_early), the
 * counter at once, before the record is found: 1 with *c. A record stays
 * exact over its whole window after it is superseded, so a counter taken
 * before the copy is served on a line valid at it (or refused). Taken after
 * the word and before the loads that depend on it, the counter read
 * overlaps them (a counter before the word, or an ordered one after the
 * copy, waits for them; on Intel an unordered one after the copy, behind a
 * fence after the word, overlaps them better: TH_CTR_FENCE_COPY). An
 * ordered read takes it after every earlier instruction of the thread (the load by which the caller synchronised with another thread's
 * reading included): on x86 by the counter read itself (RDTSCP or
 * LFENCE;RDTSC, as ctr_early says; x86 keeps loads in program order, so the
 * word is loaded after every earlier load either way), elsewhere by the
 * fence before the word. 0: th__read_tl_v reads it after the copy, and only
 * for a line (the counter may not be read first); 2: after the copy, an
 * ordered read of TH_CTR_FENCE_COPY. An x86 ordered read's fence is then
 * issued here.
 */
static inline __attribute__((always_inline)) int th__read_ctr(int ordered, uint64_t *c)
{
	uint32_t op = atomic_load_explicit(&th__P.ctr_early, memory_order_relaxed);
	if (TH_UNLIKELY(op == TH_CTR_LATE || (ordered && op == TH_CTR_FENCE_COPY))) {
		if (ordered && TH_HW_FENCE_AT_COUNTER)
			th_hw_ctr_fence();
		*c = 0;
		return op == TH_CTR_LATE ? 0 : 2;
	}
	TH_STEP("read_counter");
	*c = ordered ? th_hw_ctr_early_ordered(op) : th_hw_ctr_relaxed();
	/* A compiler barrier: the loads that find the record stay after the
	 * counter in program order. */
	atomic_signal_fence(memory_order_seq_cst);
	return 1;
}

/*
 * th__read_ctr as an entry point's tail: each way of reading the counter
 * runs on into its own copy of `go` (a statement returning the entry's
 * value), so that neither pays a jump back to a common tail (the compiler
 * lays one of them out of line). LFENCE;RDTSC comes first, where the
 * entry falls through to it: it is the read wherever LFENCE serializes
 * (AMD Zen), and the fence-then-copy read (Intel) is reached without a
 * taken branch either; RDTSCP, for a CPU whose LFENCE does not serialize,
 * pays them; `late`: where the counter is read after
 * the copy (0), `after` (2): likewise. The same choice and orders as
 * th__read_ctr (each compiler barrier keeps the loads that find the record
 * after the counter in program order); x86 only, elsewhere th__read_ctr
 * itself.
 */
#if TH_HW_FENCE_AT_COUNTER
#define TH_READ_CTR_SPLIT(ordered, c, go, late, after)                                                         \
	do {                                                                                                   \
		uint32_t op_ = atomic_load_explicit(&th__P.ctr_early, memory_order_relaxed);                   \
		if (!(ordered)) {                                                                              \
			if (TH_UNLIKELY(op_ == TH_CTR_LATE))                                                   \
				return late;                                                                   \
			TH_STEP("read_counter");                                                               \
			(c) = th_hw_ctr_relaxed();                                                             \
			atomic_signal_fence(memory_order_seq_cst);                                             \
			return go;                                                                             \
		}                                                                                              \
		if (TH_LIKELY(op_ == TH_CTR_FENCED)) {                                                         \
			(c) = th_counter_ordered();                                                            \
			atomic_signal_fence(memory_order_seq_cst);                                             \
			return go;                                                                             \
		}                                                                                              \
		if (op_ == TH_CTR_RDTSCP) {                                                                    \
			(c) = th_counter_rdtscp();                                                             \
			atomic_signal_fence(memory_order_seq_cst);                                             \
			return go;                                                                             \
		}                                                                                              \
		th_hw_ctr_fence();                                                                             \
		if (TH_LIKELY(op_ == TH_CTR_FENCE_COPY))                                                       \
			return after;                                                                          \
		return late;                                                                                   \
	} while (0)
/* GCC merges identical tails into one (cross-jumping), which would
 * re-create the jump back; and it turns a dispatch over clock ids into a
 * jump table, an indirect branch for every clock */
#if defined(__GNUC__) && !defined(__clang__)
#define TH_ENTRY_LAYOUT __attribute__((optimize("no-crossjumping", "no-jump-tables")))
#else
#define TH_ENTRY_LAYOUT
#endif
#else
#define TH_READ_CTR_SPLIT(ordered, c, go, late, after)                                                         \
	do {                                                                                                   \
		int e_ = th__read_ctr((ordered), &(c));                                                        \
		if (TH_UNLIKELY(e_ != 1))                                                                      \
			return e_ ? after : late;                                                              \
		return go;                                                                                     \
	} while (0)
#define TH_ENTRY_LAYOUT
#endif

/* The read of the daemon's page; `lc`: the local word, which named the
 * shared slot; (c, early): th__read_ctr's. 1 with *v and its REALTIME epoch
 * *ep, 0 where th__page_refused_v must read. */
static inline __attribute__((always_inline)) int th__read_page_try(int ck, int ordered, uint64_t lc, uint64_t c,
								    int early, int64_t *osec, int64_t *onsec,
								    uint16_t *ep)
{
	struct th_timeline *tl = th__page_tl();
	TH_STEP("page_cur");
	/* Acquire: pairs with the daemon's release commit. */
	return th__read_tl_to(tl, atomic_load_explicit(&tl->cur, memory_order_acquire), ck, ordered, 1, lc, c, early,
			      osec, onsec, ep);
}

/* A read of the daemon's page that th__read_page_try refused: REALTIME and
 * TAI maybe only the kernel's tick since the record's tie
 * (th__page_moved_v, with the refused read's counter c where it was taken
 * first, early 1), else the slow path. */
static inline __attribute__((always_inline)) struct th_tv th__page_refused_v(int ck, int ordered, uint64_t lc,
									     uint64_t c, int early)
{
	return ck == TH_CK_REAL || ck == TH_CK_TAI ? th__page_moved_v(ck, ordered, lc, c, early)
						   : th__fine_slow_v(ck, ordered);
}

static inline __attribute__((always_inline)) struct th_tv th__read_page_v(int ck, int ordered, uint64_t lc,
									  uint64_t c, int early)
{
	struct th_tv v;
	uint16_t ep;
	if (TH_UNLIKELY(!th__read_page_try(ck, ordered, lc, c, early, &v.sec, &v.nsec, &ep)))
		return th__page_refused_v(ck, ordered, lc, c, early);
	if (ck == TH_CK_REAL)
		th__g3_raise(v.sec, ep);
	return v;
}

/* The read of the timeline the local word `cur` names: this process's own,
 * or the daemon's page (out of line, th__fine_shared_v). */
static inline __attribute__((always_inline)) struct th_tv th__read_word_v(uint64_t cur, int ck, int ordered,
									  uint64_t c, int early)
{
	if (TH_UNLIKELY(TH_CUR_SLOT(cur) == TH_SLOT_SHARED))
		return th__fine_shared_v(ck, ordered, cur, c, early);
	return th__read_tl_v(&th__P.tl, cur, ck, ordered, 0, 0, c, early);
}

/* _page and _own (sfx: "" with the counter taken first, _a with it taken
 * after the copy by an ordered read of TH_CTR_FENCE_COPY): the caller's
 * value written before the G3 floor's raise, which then needs nothing kept
 * across its call, and a refusal a tail call: no register to save on the
 * way. */
#define TH__FINE_TAILS(name, sfx, ck, ordered, type, store, early)                                             \
	static __attribute__((noinline)) int name##_page##sfx(type *out, uint64_t lc, uint64_t c)              \
	{                                                                                                      \
		int64_t n;                                                                                     \
		uint16_t ep;                                                                                   \
		if (TH_UNLIKELY(!th__read_page_try(ck, ordered, lc, c, early, (int64_t *)(void *)&out->tv_sec, \
						   &n, &ep)))                                                  \
			return name##_refused(out, lc, c, early);                                              \
		th__store_ns(out, n);                                                                          \
		return ck == TH_CK_REAL ? th__g3_raise0(out->tv_sec, ep) : 0;                                  \
	}                                                                                                      \
	static __attribute__((noinline)) int name##_own##sfx(type *out, uint64_t cur, uint64_t c)              \
	{                                                                                                      \
		int64_t n;                                                                                     \
		uint16_t ep;                                                                                   \
		if (TH_UNLIKELY(!th__read_tl_to(&th__P.tl, cur, ck, ordered, 0, 0, c, early,                   \
						(int64_t *)(void *)&out->tv_sec, &n, &ep)))                    \
			return name##_slow(out);                                                               \
		th__store_ns(out, n);                                                                          \
		return ck == TH_CK_REAL ? th__g3_raise0(out->tv_sec, ep) : 0;                                  \
	}

/*
 * The fast read of one clock as the functions of an entry point (the
 * library's th_clock_gettime, the preload's clock_gettime): `name` takes the
 * fence, the process's word and the counter, and jumps to the read of the
 * timeline the word names (its own, name##_own, or the daemon's page,
 * name##_page) or, where the counter may not be read first, to the read that
 * takes it after the copy (name##_late): none of the three pays the others'
 * registers, and the entry saves none before the fence. name##_in is the
 * same read to be inlined into an exported function (which then needs
 * TH_ENTRY_LAYOUT itself).
 */
#define TH_FINE_FUNCS(name, ck, ordered) TH_FINE_FUNCS_TO(name, ck, ordered, struct timespec, th__tv_ts)

/* The same, storing the reading into a `type` with store(v, out) (the
 * preload's gettimeofday: a timeval). */
#define TH_FINE_FUNCS_TO(name, ck, ordered, type, store)                                                       \
	static __attribute__((noinline)) int name##_refused(type *out, uint64_t lc, uint64_t c, int early)     \
	{                                                                                                      \
		return store(th__page_refused_v(ck, ordered, lc, c, early), out);                              \
	}                                                                                                      \
	static __attribute__((noinline)) int name##_slow(type *out)                                            \
	{                                                                                                      \
		return store(th__fine_slow_v(ck, ordered), out);                                               \
	}                                                                                                      \
	TH__FINE_TAILS(name, , ck, ordered, type, store, 1)                                                    \
	TH__FINE_TAILS(name, _a, ck, ordered, type, store, 2)                                                  \
	/* the counter after the copy: a process that may not read it first   \
	 * (th__read_ctr's 0), an ordered read of TH_CTR_FENCE_COPY (2) */      \
	static __attribute__((noinline)) int name##_late(type *out, uint64_t cur)                              \
	{                                                                                                      \
		return store(th__read_word_v(cur, ck, ordered, 0, 0), out);                                    \
	}                                                                                                      \
	static inline __attribute__((always_inline)) int name##_after(type *out, uint64_t cur)                \
	{                                                                                                      \
		if (TH_UNLIKELY(TH_CUR_SLOT(cur) == TH_SLOT_SHARED))                                           \
			return name##_page_a(out, cur, 0);                                                     \
		return name##_own_a(out, cur, 0);                                                              \
	}                                                                                                      \
	static inline __attribute__((always_inline)) int name##_go(type *out, uint64_t cur, uint64_t c)       \
	{                                                                                                      \
		if (TH_UNLIKELY(TH_CUR_SLOT(cur) == TH_SLOT_SHARED))                                           \
			return name##_page(out, cur, c);                                                       \
		return name##_own(out, cur, c);                                                                \
	}                                                                                                      \
	static inline __attribute__((always_inline, unused)) int name##_in(type *out)                         \
	{                                                                                                      \
		uint64_t cur = th__read_cur(ordered);                                                          \
		uint64_t c;                                                                                    \
		TH_READ_CTR_SPLIT(ordered, c, name##_go(out, cur, c), name##_late(out, cur),                   \
				  name##_after(out, cur));                                                     \
	}                                                                                                      \
	static __attribute__((noinline, unused)) TH_ENTRY_LAYOUT int name(type *out)                          \
	{                                                                                                      \
		return name##_in(out);                                                                         \
	}

/*
 * The clock ids after MONOTONIC and REALTIME in an entry point's chain of
 * compares (th_clock_gettime, the preload's clock_gettime), in one order for
 * both: the other full-guarantee ids first (their targets are the
 * tightest), then the coarse ones, then the relaxed extension ids, then
 * `other`. pfx##boottime_in ... pfx##realtime_coarse are the entry's reads
 * of each clock (TH_FINE_FUNCS and its coarse functions); `rsfx` ends the
 * names of its relaxed reads (_in where it reads the counter itself). The
 * empty asm statements keep the compiler from turning the tests into a tree
 * of its own (REALTIME's five deep, TAI's and MONOTONIC_RAW's four); the
 * second one where `barrier2` is 1 (the preload's entry needs it, the
 * library's is one register move longer with it).
 */
#define TH_GETTIME_CHAIN(id, ts, pfx, rsfx, other, barrier2)                                                   \
	do {                                                                                                   \
		__asm__("" : "+r"(id));                                                                        \
		if ((id) == CLOCK_BOOTTIME)                                                                    \
			return pfx##boottime_in(ts);                                                           \
		if ((id) == CLOCK_TAI)                                                                         \
			return pfx##tai_in(ts);                                                                \
		if (barrier2)                                                                                  \
			__asm__("" : "+r"(id));                                                                \
		if ((id) == CLOCK_MONOTONIC_RAW)                                                               \
			return pfx##raw_in(ts);                                                                \
		if ((id) == CLOCK_MONOTONIC_COARSE)                                                            \
			return pfx##monotonic_coarse(ts);                                                      \
		if ((id) == CLOCK_REALTIME_COARSE)                                                             \
			return pfx##realtime_coarse(ts);                                                       \
		if ((id) == TH_CLOCK_MONOTONIC_RELAXED)                                                        \
			return pfx##monotonic_relaxed##rsfx(ts);                                               \
		if ((id) == TH_CLOCK_REALTIME_RELAXED)                                                         \
			return pfx##realtime_relaxed##rsfx(ts);                                                \
		return other(id, ts);                                                                          \
	} while (0)

/*
 * Fine read of clock `ck`: the one reader behind every fine clock. No attach
 * or fork check here: before the first attach the timeline is empty (gen 0,
 * slow path), and a fork child's inherited records stay exact; the slow path
 * and every windup check for a fork.
 */
static inline __attribute__((always_inline)) struct th_tv th__fine_v(int ck, int ordered)
{
	uint64_t cur = th__read_cur(ordered);
	uint64_t c;
	int early = th__read_ctr(ordered, &c);
	return th__read_word_v(cur, ck, ordered, c, early);
}

static inline __attribute__((always_inline)) int th__fine(int ck, int ordered, struct timespec *ts)
{
	return th__tv_ts(th__fine_v(ck, ordered), ts);
}

/* th__fine, also returning the REALTIME epoch of the G3 floor (for callers
 * that raise the floor themselves; th__fine already did). */
static inline __attribute__((always_inline)) int th__fine_ts(int ck, int ordered, struct timespec *ts,
							     uint16_t *epoch)
{
	th__fine(ck, ordered, ts);
	*epoch = (uint16_t)(atomic_load_explicit(&th__P.g3, memory_order_relaxed) >> 48);
	return 0;
}

/*
 * Coarse MONOTONIC (ck 0) or REALTIME (ck 1): the line's value at the last
 * windup. Local records are refreshed at each kernel tick, so the kernel's
 * coarse clock tells a stale one (any tick since the record's). The daemon
 * refreshes its page every tick, some time after the kernel's: a page record
 * whose tick is more than one publisher tick behind is stale (timehandsd
 * stopped or late: the slow path checks on it and leaves shared mode), so a
 * shared coarse reading lags by less than two ticks (G5) even when the
 * daemon stalls. No cheaper clock than the kernel's coarse one can tell
 * that; it is read from the kernel's data page (kdata.h), or, where that
 * read is not available, through the vDSO (th__coarse_ts_k, out of line).
 * `fresh` is that reading, taken after `cur`. One attempt; anything unusual
 * goes to the slow path.
 */
/* The coarse reading from the coarse block of timeline `tl` (record.h),
 * given the kernel's coarse clock now (`fresh`) and how far behind it the
 * block's tick is stale. */
int th__coarse_page_moved(struct timespec *ts, uint64_t lc, uint64_t fresh, uint64_t fresh_ns) TH_HIDDEN;

/* `kcp`: where the kernel's count is (th_hw_kcount_ref), or, for
 * th__coarse_page_moved, a word holding the record's own tie (`again`: no
 * second look then). */
static inline __attribute__((always_inline)) int th__coarse_blk_k(int ck, struct timespec *ts,
								  const struct th_timeline *tl, uint64_t cur,
								  uint64_t fresh, uint64_t fresh_ns, const int shared,
								  uint64_t lc, const uint32_t *const *kcp, const int again)
{
	const struct th_coarse_block *b = &tl->cb;
	/* Acquire: the fields are loaded after the count. Pairs with the
	 * writer's release store of the even count (publish_coarse). */
	uint32_t s = atomic_load_explicit(&b->seq, memory_order_acquire);
	/* Each value is compared as soon as it is loaded (few live registers:
	 * the read needs no callee-saved one), and the reading goes into the
	 * caller's buffer at once (the slow path overwrites it if the copy
	 * turns out inconsistent). To the slow path when the block does not
	 * hold the values of the record `cur` names, is stale (a tick since
	 * the block's, or no coarse values: tick 0), or is below a coarse
	 * value already returned. */
	if (TH_UNLIKELY(atomic_load_explicit(&b->rseq, memory_order_relaxed) != TH_CUR_SEQ(cur)))
		goto slow;
	if (TH_UNLIKELY(fresh - atomic_load_explicit(&b->tick, memory_order_relaxed) >= fresh_ns))
		goto slow;
	if (TH_UNLIKELY(atomic_load_explicit(&th__P.coarse_floor, memory_order_relaxed) >
			atomic_load_explicit(&b->coarse, memory_order_relaxed)))
		goto slow;
	/* REALTIME of a record tied to a kernel update (TH_RECF_TIED: the
	 * process's own, or the daemon's) the kernel has moved on from: its
	 * offset may be from before a step (the slow path winds up, or serves
	 * the kernel's offset of now). The record's count is read between the
	 * block's two loads of its count, so a slot rewritten since `cur`
	 * named it makes the copy fail. */
	if (ck == TH_CK_REAL &&
	    TH_UNLIKELY(th_abi_kseq_moved(atomic_load_explicit(&tl->ring[TH_CUR_SLOT(cur) % TH_RING].kseq,
							       memory_order_relaxed),
					  TH_CK_REAL, kcp, 0))) {
		/* the page's: maybe only the kernel's tick since its tie */
		if (shared && !again)
			return th__coarse_page_moved(ts, lc, fresh, fresh_ns);
		goto slow;
	}
	int64_t sec = atomic_load_explicit(&b->sec[ck], memory_order_relaxed);
	ts->tv_sec = (time_t)sec;
	ts->tv_nsec = (long)atomic_load_explicit(&b->nsec[ck], memory_order_relaxed);
	/* REALTIME: the G3 floor (the largest second a fine REALTIME reading
	 * returned) above this second is left to th__coarse_real_slow, which
	 * knows the floor's epoch. */
	if (ck == TH_CK_REAL && TH_UNLIKELY((int64_t)(atomic_load_explicit(&th__P.g3, memory_order_relaxed) & TH_G3_SECMASK) > sec))
		goto slow;
	/* Orders the copies before the re-load of the count; pairs with the
	 * writer's release fence after it made the count odd. */
	atomic_thread_fence(memory_order_acquire);
	/* The page: the local word `lc` that named it still does (as in
	 * th__read_tl_v). */
	if (shared && TH_UNLIKELY(TH_CUR_ID(atomic_load_explicit(&th__P.tl.cur, memory_order_relaxed)) != TH_CUR_ID(lc)))
		goto slow;
	/* odd (being written) or changed: one compare, as in kdata.h */
	if (TH_LIKELY(atomic_load_explicit(&b->seq, memory_order_relaxed) == (s & ~1u)))
		return 0;
slow:
	return ck == TH_CK_REAL ? th__coarse_real_slow(ts) : th__coarse_ts_slow(TH_CK_MONO, ts, NULL);
}

static inline __attribute__((always_inline)) int th__coarse_blk(int ck, struct timespec *ts,
								const struct th_timeline *tl, uint64_t cur,
								uint64_t fresh, uint64_t fresh_ns, const int shared,
								uint64_t lc)
{
	return th__coarse_blk_k(ck, ts, tl, cur, fresh, fresh_ns, shared, lc, th_hw_kcount_ref(), 0);
}

static inline __attribute__((always_inline)) int th__coarse_ts_at(int ck, struct timespec *ts, uint64_t cur,
								  uint64_t fresh)
{
	if (TH_CUR_SLOT(cur) == TH_SLOT_SHARED) {
		/* Acquire: pairs with the release store that set it non-zero
		 * (th__coarse_slow): the page's coarse values from the record
		 * that store saw on are above the floors of the switch. While
		 * it is 0, every block is stale: the slow path. */
		uint64_t fresh_ns = atomic_load_explicit(&th__P.sh_fresh_fast, memory_order_acquire);
		/* Acquire: pairs with the daemon's release commit. */
		uint64_t pcur = atomic_load_explicit(&th__page_tl()->cur, memory_order_acquire);
		return th__coarse_blk(ck, ts, th__page_tl(), pcur, fresh, fresh_ns, 1, cur);
	}
	/* Relaxed: another thread's first attach may be storing the tick
	 * while this one reads a record word that names no record yet (the
	 * block then sends it to the slow path whatever the value). */
	return th__coarse_blk(ck, ts, &th__P.tl, cur, fresh, __atomic_load_n(&th__P.tick_ns, __ATOMIC_RELAXED) / 2,
			      0, 0);
}

int th__coarse_ts_k(int ck, struct timespec *ts, uint64_t cur) TH_HIDDEN;

/*
 * th_time()'s fast path where the kernel's seconds are read from its data
 * page (kdata.h): 1 (and *t set) when the kernel's second equals the G3
 * floor, the largest second a fine REALTIME reading of this process
 * returned; 0 otherwise (no direct read, another second, or a time
 * namespace's page, whose REALTIME slot reads 0: th_abi_time_read).
 */
static inline __attribute__((always_inline)) int th__time_kdata(time_t *t, time_t *out)
{
	const uint64_t *rs = __atomic_load_n(&th_kdata.real_sec, __ATOMIC_RELAXED);
	uint64_t tk;
	if (TH_UNLIKELY(rs == NULL) ||
	    TH_UNLIKELY(!th_abi_time_read(rs, (const uint64_t *)(const void *)&th__P.g3, &tk)))
		return 0;
	if (TH_UNLIKELY(t != NULL)) /* time(NULL), the common call, branches nowhere */
		*t = (time_t)tk;
	*out = (time_t)tk;
	return 1;
}

/* th__time_kdata through the kernel's time() `kt` (non-NULL) instead, where
 * its data page cannot be read: 1 when its second, *out, equals the G3
 * floor (then also in *t); 0 with the kernel's second in *out otherwise. */
static inline __attribute__((always_inline)) int th__time_kfn(time_t (*kt)(time_t *), time_t *t, time_t *out)
{
	time_t tk = kt(NULL);
	*out = tk;
	if (TH_UNLIKELY(!th_abi_time_ok((uint64_t)tk, (const uint64_t *)(const void *)&th__P.g3)))
		return 0;
	if (t)
		*t = tk;
	return 1;
}

int th__coarse_kv_slow(int ck, struct timespec *ts) TH_HIDDEN;

/*
 * Coarse MONOTONIC (ck 0) or REALTIME (ck 1) while the records are the
 * kernel's own conversion: the kernel's coarse clocks themselves, from its
 * data page under its count (as th_kdata_mono_coarse). A fine reading is the
 * kernel's, so the kernel's coarse value never exceeds a later one (G4) and
 * lags as the kernel's does (G5). To the slow path: the kernel updating,
 * MONOTONIC below the coarse floor (values served before the records became
 * the kernel's) or a second away from the kernel's own line (th_kcoarse_ok),
 * REALTIME with an offset no record has followed yet (a step) or below the G3
 * floor.
 */
static inline __attribute__((always_inline)) int th__coarse_kv(int ck, struct timespec *ts)
{
#ifndef TH_SIM
	const uint32_t *sq = __atomic_load_n(&th_kdata.seq, __ATOMIC_RELAXED);
	const uint64_t *b = __atomic_load_n(&th_kdata.mono_coarse, __ATOMIC_RELAXED);
	/* Acquire: the bases after the count; pairs with the kernel's
	 * vdso_write_end (kdata.h). */
	uint32_t s = __atomic_load_n(sq, __ATOMIC_ACQUIRE);
	uint64_t msec = __atomic_load_n(&b[0], __ATOMIC_RELAXED), mnsec = __atomic_load_n(&b[1], __ATOMIC_RELAXED);
	/* REALTIME_COARSE is the base before MONOTONIC_COARSE (clock ids 5, 6) */
	uint64_t rsec = ck == TH_CK_REAL ? __atomic_load_n(&b[-2], __ATOMIC_RELAXED) : 0;
	uint64_t rnsec = ck == TH_CK_REAL ? __atomic_load_n(&b[-1], __ATOMIC_RELAXED) : 0;
	/* the fine MONOTONIC base of the same update, to check the coarse one by */
	uint64_t fsec = __atomic_load_n(&b[TH_KDATA_MONO_FROM_COARSE], __ATOMIC_RELAXED);
	uint64_t fnsec = __atomic_load_n(&b[TH_KDATA_MONO_FROM_COARSE + 1], __ATOMIC_RELAXED);
	uint32_t shift = __atomic_load_n(th_kdata_shift_of(b), __ATOMIC_RELAXED);
	/* The loads complete before the count is read again; pairs with the
	 * kernel's vdso_write_begin. */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (TH_UNLIKELY(__atomic_load_n(sq, __ATOMIC_RELAXED) != (s & ~1u)))
		return th__coarse_kv_slow(ck, ts);
	/* An update no windup has seen yet (acquire: pairs with the windup's
	 * release store of kv_seq, after its raise of the coarse floor). */
	if (TH_UNLIKELY(s != atomic_load_explicit(&th__P.kv_seq, memory_order_acquire)))
		return th__coarse_kv_slow(ck, ts);
	uint64_t m = msec * 1000000000u + mnsec;
	if (TH_UNLIKELY(m < atomic_load_explicit(&th__P.coarse_floor, memory_order_relaxed)) ||
	    TH_UNLIKELY(!th_kcoarse_ok(m, fsec, fnsec, shift & 63)))
		return th__coarse_kv_slow(ck, ts);
	if (ck == TH_CK_MONO) {
		ts->tv_sec = (time_t)msec;
		ts->tv_nsec = (long)mnsec;
		return 0;
	}
	int64_t off = (int64_t)(rsec * 1000000000u + rnsec - m);
	if (TH_UNLIKELY(off != atomic_load_explicit(&th__P.kv_off_real, memory_order_relaxed)) ||
	    TH_UNLIKELY((atomic_load_explicit(&th__P.g3, memory_order_relaxed) & TH_G3_SECMASK) > rsec))
		return th__coarse_kv_slow(ck, ts);
	ts->tv_sec = (time_t)rsec;
	ts->tv_nsec = (long)rnsec;
	return 0;
#else
	return th__coarse_kv_slow(ck, ts);
#endif
}

/* Coarse MONOTONIC (TH_CK_MONO) or REALTIME (TH_CK_REAL, held to the G3 floor). */
static inline __attribute__((always_inline)) int th__coarse_ts(int ck, struct timespec *ts)
{
	if (atomic_load_explicit(&th__P.kv_on, memory_order_relaxed))
		return th__coarse_kv(ck, ts);
	/* Acquire: as in th__read_cur. */
	uint64_t cur = atomic_load_explicit(&th__P.tl.cur, memory_order_acquire);
	uint64_t fresh;
	if (TH_UNLIKELY(!th_hw_kcoarse_direct(&fresh)))
		return th__coarse_ts_k(ck, ts, cur);
	return th__coarse_ts_at(ck, ts, cur, fresh);
}

#endif
