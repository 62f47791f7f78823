/*
 * The time record ("timehands") and the timeline that publishes it.
 *
 * Dependency order of the sources: core <- counter <- attach <- preload,
 * daemon, tools. Nothing in core does I/O or reads a clock: it is pure
 * arithmetic and memory protocol, driven by the simulation in tests/sim as
 * well as by the real counter.
 *
 * A record describes one piece of a single, process-wide, piecewise-linear
 * function F from counter values to nanoseconds of MONOTONIC (line 0) and
 * MONOTONIC_RAW (line 1). Every record is valid on a counter window around its
 * anchor s:
 *
 *      value(c) = ns + (frac + (c - s) * rate) / 2^32        (Q32.32 fixed point)
 *      rate = rate_lo below s, rate_hi from s on
 *
 * for dlo <= c - s <= dhi. A new record (windup) places its anchor at the
 * previous record's expiry and copies the previous slope below it, so where
 * both are valid they give bit-identical values: a rate change takes effect
 * only where no older record can still be used. The arithmetic is exact (the
 * anchor carries 32 fractional bits), so no rounding can make two records
 * disagree by a nanosecond. A counter outside the window is never
 * extrapolated: below dmin (a backward jump) or beyond dhi (expiry) the read
 * takes the slow path.
 *
 * The layout is fixed-width and position-independent: the same bytes are
 * published in process memory (local mode) and in timehandsd's shared page.
 * Fields are C11 atomics so that the copies made inside a reader's retry loop
 * are relaxed atomic loads (no data race for the compiler or ThreadSanitizer);
 * on x86-64 and arm64 they compile to plain loads.
 *
 * Protocol steps are named TH_STEP(...) in the code; the Spin model in
 * tests/model uses the same names.
 */
#ifndef TH_CORE_RECORD_H
#define TH_CORE_RECORD_H

#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>

#include "timehands/abi.h"

#ifdef TH_SIM
void th_sim_step(const char *name); /* the simulation's scheduler may switch threads here */
#define TH_STEP(name) th_sim_step(name)
#else
#define TH_STEP(name) ((void)0)
#endif

#define TH_RING 8 /* records in a timeline; a writer never touches the current one */
#define TH_MAX_WINDOW_NS 500000000LL /* keeps d * rate inside 2^62 in the fast window */

enum th_rec_kind {
	TH_REC_EMPTY = 0,
	TH_REC_LINE = 1,    /* counter-based line, the fast path */
	TH_REC_KERNEL = 2,  /* kernel clock, floored: counter not in use */
	TH_REC_TRANSIT = 3  /* kernel clock while a writer installs a line: see guard */
};

/* Record flags (th_rec.flags). A daemon's page never carries one: they are
 * for a process's own timeline. */
enum {
	/* A kernel-mode record whose coarse value may be older than coarse
	 * values already served (a leave of shared mode: see th__leave_shared):
	 * coarse reads of it take a fine reading and raise the coarse floor. */
	TH_RECF_COARSE_FINE = 1,
	/* A kernel-mode record planned while the writer's REALTIME and
	 * BOOTTIME offsets were not yet measured to within
	 * max_offset_err_ns (th_disc_offsets_wide): its readers of REALTIME,
	 * BOOTTIME and TAI read the kernel's own clock, fine and coarse,
	 * instead of MONOTONIC plus the record's offset. */
	TH_RECF_KERNEL_OFFSETS = 2,
	/* A line a little below the kernel's pvclock reading (th_kconv_record):
	 * a reader that serves the kernel's own clock after it announces
	 * itself, so that the next such line starts above what it served. */
	TH_RECF_KPV = 4,
	/* A record of the process's own discipline tied to the kernel's
	 * update count (kseq; th_rec_tie): a line's REALTIME and TAI are
	 * served only while that update is the kernel's latest, so that a
	 * step of the kernel's REALTIME offset sends their readers to a
	 * windup at once; readers of a tied record the kernel moved on from
	 * serve REALTIME and TAI with the kernel's offset of now. The other
	 * clocks, which no kernel update steps, are the line's whatever the
	 * count. Unlike a kernel's line (kseq without this flag) its readings
	 * are the record's, not the kernel's. */
	TH_RECF_TIED = 8
};

/* The kernel update count (as TH_KSEQ_TIE) that write_record ties the
 * records it writes without a kseq of their own to (TH_RECF_TIED), or 0:
 * set by the writer before it writes them (a process's windup under its
 * lock, timehandsd's windup; in the simulation, each writer's own,
 * tests/sim). */
extern uint64_t th_rec_tie;
/* A tie to an odd count, which no finished kernel update shows: every
 * REALTIME or TAI reader of such a record finds it moved on from and
 * compares the kernel's offset of now with the record's (a writer that
 * could not read the kernel's count, or its offset, consistently). */
#define TH_REC_TIE_UNFINISHED (TH_ABI_KSEQ_RT | 1u)
/* A kernel count as kseq: a tie of REALTIME and TAI (timehands' own line);
 * the kernel's line at that update. */
#define TH_KSEQ_TIE(count) ((uint64_t)(uint32_t)(count) | TH_ABI_KSEQ_RT)
#define TH_KSEQ_LINE(count) ((uint64_t)(uint32_t)(count) | TH_ABI_KSEQ_LINE)
/* Whether kseq ks is a tie of timehands' own line (TH_KSEQ_TIE), not a
 * kernel's line nor untied. */
static inline int th_kseq_own_tie(uint64_t ks)
{
	return (ks & TH_ABI_KSEQ_LINE) == TH_ABI_KSEQ_RT;
}

enum { TH_MONO = 0, TH_RAW = 1, TH_NLINES = 2 };

/*
 * Clocks a record serves, each as (sec, nsec) at the anchor so that a read
 * adds a small delta instead of dividing: MONOTONIC, REALTIME, BOOTTIME, TAI
 * on line 0, MONOTONIC_RAW on line 1.
 */
enum { TH_CK_MONO = 0, TH_CK_REAL = 1, TH_CK_BOOT = 2, TH_CK_TAI = 3, TH_CK_RAW = 4, TH_NCLOCKS = 5 };

struct th_ts {
	_Atomic int64_t sec;
	/* nsec in Q32.32 with the line's fractional ns: a read inside the fast
	 * window adds d * rate (|d * rate| < 2^62 there, the writer bounds
	 * the window) and shifts once. */
	_Atomic int64_t nsec_q32;
};

/* 320 bytes, five cache lines; the first holds everything a MONOTONIC read
 * touches, the second REALTIME and the other clocks. */
struct th_rec {
	/* --- line 1: hot --- */
	_Atomic uint32_t gen;      /* 0 while written; changes on every rewrite */
	_Atomic uint16_t kind;     /* enum th_rec_kind */
	_Atomic uint16_t epoch;    /* REALTIME step epoch (see the G3 floor in attach) */
	_Atomic uint64_t anchor;   /* counter value s */
	_Atomic int64_t dlo;       /* fast window is [dlo, ddue) relative to s */
	_Atomic int64_t ddue;      /* a windup is due from here on */
	_Atomic int64_t mono_lo;   /* line 0 Q32.32 ns per count below the anchor */
	_Atomic int64_t mono_hi;   /* line 0 Q32.32 ns per count from the anchor on */
	_Atomic uint32_t mono_frac; /* line 0 fractional ns at the anchor, / 2^32 */
	_Atomic uint32_t raw_frac;
	/* 0, or the kernel's update this line is the conversion of, as its
	 * data page's count (TH_KSEQ_LINE): served only while the kernel's
	 * count is still (uint32_t)kseq (the kernel moved on: the slow path);
	 * or, for a record tied to an update (TH_RECF_TIED), the count as
	 * TH_KSEQ_TIE, which only REALTIME and TAI readers check
	 * (th_abi_tie_mask). */
	_Atomic uint64_t kseq;
	/* --- line 2: the anchor as each clock's (sec, nsec), raw slopes --- */
	struct th_ts at[TH_NCLOCKS]; /* 80 bytes */
	_Atomic int64_t raw_lo;
	_Atomic int64_t raw_hi;
	/* --- line 4 --- */
	_Atomic uint64_t mono_ns;  /* line 0 at the anchor, whole ns */
	_Atomic uint64_t raw_ns;   /* line 1 at the anchor */
	_Atomic int64_t off_real;  /* REALTIME - MONOTONIC, ns */
	_Atomic int64_t off_boot;  /* BOOTTIME - MONOTONIC */
	_Atomic int64_t off_tai;   /* TAI - MONOTONIC */
	_Atomic int64_t dhi;       /* expiry: largest delta served */
	_Atomic int64_t dmin;      /* smallest delta served; [dmin, dlo) clamps to dlo */
	_Atomic uint64_t due_ns;   /* KERNEL/TRANSIT: kernel MONOTONIC at which a windup is due */
	/* --- line 5: coarse, kernel-mode and transition data --- */
	_Atomic uint64_t coarse;   /* line 0 value at the writer's sample, ns */
	_Atomic uint64_t tick;     /* kernel MONOTONIC_COARSE at the sample (local freshness) */
	_Atomic uint64_t ceil[TH_NLINES];  /* KERNEL/TRANSIT: C, the old line's largest value */
	_Atomic uint64_t guard[TH_NLINES]; /* TRANSIT: values above must be announced */
	struct th_ts coarse_at[2]; /* coarse as MONOTONIC and REALTIME (sec, nsec) */
	_Atomic uint32_t bound[TH_NLINES]; /* how far the line may be from the kernel, ns */
	_Atomic uint64_t flags;    /* TH_RECF_*; 0 in every record a daemon publishes */
};

/* The record is laid out as <timehands/abi.h> declares it, field by field
 * (the header's inline reader and other processes read it so). */
#define TH_ABI_SAME(type, abitype, f) \
	_Static_assert(offsetof(struct type, f) == offsetof(struct abitype, f) && \
			       sizeof(((struct type *)0)->f) == sizeof(((struct abitype *)0)->f), \
		       "layout of " #f " differs from <timehands/abi.h>")
TH_ABI_SAME(th_ts, th_abi_ts, sec);
TH_ABI_SAME(th_ts, th_abi_ts, nsec_q32);
TH_ABI_SAME(th_rec, th_abi_rec, gen);
TH_ABI_SAME(th_rec, th_abi_rec, kind);
TH_ABI_SAME(th_rec, th_abi_rec, epoch);
TH_ABI_SAME(th_rec, th_abi_rec, anchor);
TH_ABI_SAME(th_rec, th_abi_rec, dlo);
TH_ABI_SAME(th_rec, th_abi_rec, ddue);
TH_ABI_SAME(th_rec, th_abi_rec, mono_lo);
TH_ABI_SAME(th_rec, th_abi_rec, mono_hi);
TH_ABI_SAME(th_rec, th_abi_rec, mono_frac);
TH_ABI_SAME(th_rec, th_abi_rec, raw_frac);
TH_ABI_SAME(th_rec, th_abi_rec, kseq);
TH_ABI_SAME(th_rec, th_abi_rec, at);
TH_ABI_SAME(th_rec, th_abi_rec, raw_lo);
TH_ABI_SAME(th_rec, th_abi_rec, raw_hi);
TH_ABI_SAME(th_rec, th_abi_rec, mono_ns);
TH_ABI_SAME(th_rec, th_abi_rec, raw_ns);
TH_ABI_SAME(th_rec, th_abi_rec, off_real);
TH_ABI_SAME(th_rec, th_abi_rec, off_boot);
TH_ABI_SAME(th_rec, th_abi_rec, off_tai);
TH_ABI_SAME(th_rec, th_abi_rec, dhi);
TH_ABI_SAME(th_rec, th_abi_rec, dmin);
TH_ABI_SAME(th_rec, th_abi_rec, due_ns);
TH_ABI_SAME(th_rec, th_abi_rec, coarse);
TH_ABI_SAME(th_rec, th_abi_rec, tick);
TH_ABI_SAME(th_rec, th_abi_rec, ceil);
TH_ABI_SAME(th_rec, th_abi_rec, guard);
TH_ABI_SAME(th_rec, th_abi_rec, coarse_at);
TH_ABI_SAME(th_rec, th_abi_rec, bound);
TH_ABI_SAME(th_rec, th_abi_rec, flags);
_Static_assert(sizeof(struct th_ts) == sizeof(struct th_abi_ts) && sizeof(struct th_rec) == sizeof(struct th_abi_rec) &&
		       sizeof(struct th_rec) == 320,
	       "record layout is ABI");
_Static_assert((int)TH_CK_MONO == (int)TH_ABI_CK_MONO && (int)TH_CK_REAL == (int)TH_ABI_CK_REAL &&
		       (int)TH_CK_BOOT == (int)TH_ABI_CK_BOOT && (int)TH_CK_TAI == (int)TH_ABI_CK_TAI &&
		       (int)TH_CK_RAW == (int)TH_ABI_CK_RAW,
	       "clock order of <timehands/abi.h>");

/* A record's contents as plain integers: a reader's private copy, taken
 * under the generation protocol by th_snapshot() (gen and cur say where it
 * was found), and what a writer builds and commits (gen and cur unused). */
struct th_snap {
	uint32_t gen;
	uint16_t kind, epoch;
	uint64_t anchor;
	int64_t dlo, ddue, dhi, dmin;
	uint64_t ns[TH_NLINES];
	uint32_t frac[TH_NLINES];
	int64_t lo[TH_NLINES], hi[TH_NLINES];
	int64_t off_real, off_boot, off_tai;
	uint64_t coarse, tick;
	uint64_t ceil[TH_NLINES], guard[TH_NLINES];
	uint32_t bound[TH_NLINES];
	uint64_t due_ns;
	uint64_t flags;
	uint64_t kseq;
	uint64_t cur; /* the timeline word the record was found through */
	/* The writer's, not in the record: a counter at which the kernel
	 * had made the step into `epoch` (th_disc.epoch_from; 0: none).
	 * th_commit cuts a line's window there (th_snap_cut). */
	uint64_t from;
};

/*
 * The timeline word `cur` packs: slot (bits 0-7) | sequence (8-39) |
 * announce count (40-63). Readers find the current record through the slot.
 * The announce count is bumped by slow-path readers that return a kernel value
 * a pending windup may not know of (see th_announce); it sits in the top bits
 * so that it wraps without touching the rest. A writer commits with a
 * compare-and-swap against the word it read *before* taking its kernel sample,
 * so a commit and an announcement are linearised: either the reader's value is
 * older than the writer's sample, or the commit fails and the writer samples
 * again.
 */
#define TH_CUR_SLOT(w) th_abi_cur_slot(w)
#define TH_CUR_SEQ(w) th_abi_cur_seq(w)
#define TH_CUR_ANN_ONE ((uint64_t)1 << 40)
#define TH_CUR_ID(w) th_abi_cur_id(w) /* slot and sequence */
/* The generation a record committed as sequence `seq` carries, its
 * complement (0 means "being written"). A reader accepts a record only with
 * the generation of the sequence its `cur` named: a slot rewritten since (a
 * later sequence, or an attempt not yet committed or abandoned) is never
 * taken for the record the word named (tests/model/timehands.pml checks it;
 * -DBREAK_ANY_GEN removes it). */
#define TH_GEN_FOR(seq) th_abi_gen_for((uint32_t)(seq))
#define TH_CUR_GEN(w) TH_GEN_FOR(TH_CUR_SEQ(w))
#define TH_CUR_MAKE(seq, slot, ann) (((uint64_t)(uint32_t)(seq) << 8) | ((slot) & 0xffu) | ((ann) & ~(((uint64_t)1 << 40) - 1)))

/*
 * The coarse block: the current record's coarse values, copied by the writer
 * after each commit (th_commit, th_commit_force) under a sequence count of
 * its own, so that a coarse read needs no record: the count, the sequence of
 * the record the values are from, the kernel tick they belong to, the
 * values. A reader takes them only for the record `cur` names (`rseq` equal
 * to cur's sequence): a block that lags `cur` (its writer stalled between
 * the commit and the copy) or is ahead of the `cur` the reader loaded sends
 * it to the slow path, so a coarse reading is always the current record's,
 * as when it was read from the record. `tick` is 0 when the record is not a
 * counter line (a coarse read of a kernel or TRANSIT record takes the slow
 * path). The block shares the cache line of `cur`, which every read loads
 * anyway. In the daemon's page it is the daemon's (page.h); all zero (tick
 * 0: never fresh) from a publisher that does not write it.
 */
struct th_coarse_block {
	_Atomic uint32_t seq;      /* odd while the block is written */
	_Atomic uint32_t rseq;     /* TH_CUR_SEQ of the record the values are from */
	_Atomic uint64_t tick;     /* the record's tick (kernel MONOTONIC_COARSE), 0: no coarse values */
	_Atomic uint64_t coarse;   /* the record's coarse MONOTONIC value, ns */
	_Atomic int64_t sec[2];    /* coarse MONOTONIC and REALTIME: seconds */
	_Atomic int64_t nsec[2];   /* and nanoseconds */
};
/* indexed by the clock, TH_CK_MONO or TH_CK_REAL, as every coarse read's ck */
_Static_assert(TH_CK_MONO == 0 && TH_CK_REAL == 1, "coarse block order");

struct th_timeline {
	_Atomic uint64_t cur;
	struct th_coarse_block cb;
	struct th_rec ring[TH_RING];
};

_Static_assert(sizeof(struct th_coarse_block) == 56, "timeline layout is ABI");
_Static_assert(offsetof(struct th_timeline, ring) == 64, "timeline layout is ABI");
_Static_assert(sizeof(struct th_timeline) == 64 + TH_RING * sizeof(struct th_rec), "timeline layout is ABI");
TH_ABI_SAME(th_coarse_block, th_abi_coarse_block, seq);
TH_ABI_SAME(th_coarse_block, th_abi_coarse_block, rseq);
TH_ABI_SAME(th_coarse_block, th_abi_coarse_block, tick);
TH_ABI_SAME(th_coarse_block, th_abi_coarse_block, coarse);
TH_ABI_SAME(th_coarse_block, th_abi_coarse_block, sec);
TH_ABI_SAME(th_coarse_block, th_abi_coarse_block, nsec);
TH_ABI_SAME(th_timeline, th_abi_timeline, cur);
TH_ABI_SAME(th_timeline, th_abi_timeline, cb);
TH_ABI_SAME(th_timeline, th_abi_timeline, ring);
_Static_assert(sizeof(struct th_timeline) == sizeof(struct th_abi_timeline) && TH_RING == TH_ABI_RING,
	       "timeline layout of <timehands/abi.h>");

/* ------------------------------------------------------------------ math */

/* A kernel's line: the kernel's own conversion at one of its updates (a
 * kseq without TH_RECF_TIED), whose readings are the kernel's clock. */
static inline int th_snap_kline(const struct th_snap *s)
{
	return s->kseq != 0 && !(s->flags & TH_RECF_TIED);
}

/* F on line l of a snapshot at counter delta d (already inside the window). */
static inline uint64_t th_line_eval(const struct th_snap *s, int l, int64_t d)
{
	int64_t rate = d < 0 ? s->lo[l] : s->hi[l];
	__int128 x = (__int128)d * rate + s->frac[l];
	/* Arithmetic shift floors, also for negative products: the writer's
	 * carry of the fraction into the next anchor uses the same floor, which
	 * is what makes consecutive records agree exactly. */
	return s->ns[l] + (uint64_t)(int64_t)(x >> 32);
}

/* Anchor of a continuation: F at delta d from s, as (ns, frac). */
static inline void th_line_at(uint64_t ns, uint32_t frac, int64_t rate, int64_t d,
			      uint64_t *out_ns, uint32_t *out_frac)
{
	__int128 x = (__int128)d * rate + frac;
	*out_ns = ns + (uint64_t)(int64_t)(x >> 32);
	*out_frac = (uint32_t)(x & 0xffffffffu);
}

/* ------------------------------------------------------------ reader side */

/*
 * The generation protocol's read operations, <timehands/abi.h>'s (the ones
 * the header's inline reader uses), on the library's records (laid out as
 * declared there, above). The sim's scheduling points come before each.
 */
static inline __attribute__((always_inline)) uint32_t th_rec_read_begin(struct th_rec *r)
{
	TH_STEP("read_gen");
	return th_abi_read_begin((const struct th_abi_rec *)(const void *)r);
}

static inline __attribute__((always_inline)) uint32_t th_rec_read_end(struct th_rec *r)
{
	TH_STEP("recheck_gen");
	return th_abi_read_end((const struct th_abi_rec *)(const void *)r);
}

#define TH_READ_TRIES 16 /* then the slow path: a reader never waits for a writer */

/*
 * Copy the current record of a timeline. Returns 0, or -1 when no consistent
 * copy was obtained within TH_READ_TRIES (a writer rewriting the slot under
 * us every time, or an empty timeline). *retries counts the failed attempts.
 *
 * Pairing: the acquire load of `cur` pairs with the writer's release CAS in
 * th_commit (the record's contents are visible once the slot is named); the
 * acquire load of `gen` (th_rec_read_begin) pairs with the writer's release
 * store of the new gen; the acquire fence before the re-load of `gen`
 * (th_rec_read_end) pairs with the writer's release fence after it set
 * gen = 0, so a copy that overlapped a rewrite
 * always sees the generation change (seqlock protocol, C11 fences).
 */
static inline int th_snapshot(struct th_timeline *tl, struct th_snap *s, unsigned *retries)
{
	for (unsigned t = 0; t < TH_READ_TRIES; t++) {
		TH_STEP("read_cur");
		uint64_t cur = atomic_load_explicit(&tl->cur, memory_order_acquire);
		struct th_rec *r = &tl->ring[TH_CUR_SLOT(cur) % TH_RING];
		uint32_t g = th_rec_read_begin(r);
		if (g != TH_CUR_GEN(cur)) { /* being rewritten, or rewritten since */
			++*retries;
			continue;
		}
		TH_STEP("read_fields");
		s->kind = atomic_load_explicit(&r->kind, memory_order_relaxed);
		s->epoch = atomic_load_explicit(&r->epoch, memory_order_relaxed);
		s->anchor = atomic_load_explicit(&r->anchor, memory_order_relaxed);
		s->dlo = atomic_load_explicit(&r->dlo, memory_order_relaxed);
		s->ddue = atomic_load_explicit(&r->ddue, memory_order_relaxed);
		s->ns[TH_MONO] = atomic_load_explicit(&r->mono_ns, memory_order_relaxed);
		s->lo[TH_MONO] = atomic_load_explicit(&r->mono_lo, memory_order_relaxed);
		s->hi[TH_MONO] = atomic_load_explicit(&r->mono_hi, memory_order_relaxed);
		s->frac[TH_MONO] = atomic_load_explicit(&r->mono_frac, memory_order_relaxed);
		s->frac[TH_RAW] = atomic_load_explicit(&r->raw_frac, memory_order_relaxed);
		s->off_real = atomic_load_explicit(&r->off_real, memory_order_relaxed);
		s->off_boot = atomic_load_explicit(&r->off_boot, memory_order_relaxed);
		s->off_tai = atomic_load_explicit(&r->off_tai, memory_order_relaxed);
		s->dhi = atomic_load_explicit(&r->dhi, memory_order_relaxed);
		s->dmin = atomic_load_explicit(&r->dmin, memory_order_relaxed);
		s->ns[TH_RAW] = atomic_load_explicit(&r->raw_ns, memory_order_relaxed);
		s->lo[TH_RAW] = atomic_load_explicit(&r->raw_lo, memory_order_relaxed);
		s->hi[TH_RAW] = atomic_load_explicit(&r->raw_hi, memory_order_relaxed);
		s->coarse = atomic_load_explicit(&r->coarse, memory_order_relaxed);
		s->tick = atomic_load_explicit(&r->tick, memory_order_relaxed);
		for (int l = 0; l < TH_NLINES; l++) {
			s->ceil[l] = atomic_load_explicit(&r->ceil[l], memory_order_relaxed);
			s->guard[l] = atomic_load_explicit(&r->guard[l], memory_order_relaxed);
			s->bound[l] = atomic_load_explicit(&r->bound[l], memory_order_relaxed);
		}
		s->due_ns = atomic_load_explicit(&r->due_ns, memory_order_relaxed);
		s->flags = atomic_load_explicit(&r->flags, memory_order_relaxed);
		s->kseq = atomic_load_explicit(&r->kseq, memory_order_relaxed);
		/* The field loads above before the gen re-load; pairs with the
		 * release fence in th_commit after gen = 0. */
		if (th_rec_read_end(r) == g && s->kind != TH_REC_EMPTY) {
			s->gen = g;
			s->cur = cur;
			return 0;
		}
		++*retries;
	}
	return -1;
}

/*
 * th_snapshot for readers that have nothing safe to fall back on: retried for
 * as long as the writer makes progress. An attempt fails only when the slot
 * `cur` named was rewritten (TH_RING - 1 commits since) or is being rewritten
 * for the TH_RING-th time: a writer stalled anywhere cannot make it fail, as it
 * only ever writes the slot after the current one. Gives up (-1) when `cur`
 * did not move across a failed round: an empty timeline (nothing committed
 * yet) or one that no writer maintains. Lock-free: it never waits for a
 * stalled writer (G6), it only retries while another writer commits. Model:
 * snapshot_progress in tests/model/timehands.pml (-DBREAK_NO_PROGRESS: the
 * give-up after one round it replaced).
 */
static inline int th_snapshot_progress(struct th_timeline *tl, struct th_snap *s, unsigned *retries)
{
	uint64_t before = atomic_load_explicit(&tl->cur, memory_order_relaxed);
	while (th_snapshot(tl, s, retries) != 0) {
		uint64_t after = atomic_load_explicit(&tl->cur, memory_order_relaxed);
		if (TH_CUR_ID(after) == TH_CUR_ID(before))
			return -1;
		before = after;
	}
	return 0;
}

/* C: the largest line value a LINE record can ever return (at its expiry);
 * for KERNEL/TRANSIT records the C they carry forward. */
static inline uint64_t th_snap_ceiling(const struct th_snap *s, int l)
{
	if (s->kind == TH_REC_LINE)
		return th_line_eval(s, l, s->dhi);
	return s->ceil[l];
}

/*
 * phi(k) = max(k, min(C, k + bound)): what every read served by the kernel
 * returns for a kernel reading k. A line reading F(c) taken earlier is at most
 * C (the line never exceeds its expiry value) and at most k + bound (the line
 * stays within `bound` of the kernel: a windup that finds it further ahead,
 * after a kernel rate change it had not followed, raises the bound of the
 * records it plans to that lead, th_disc_cover_lead), so phi
 * never returns less than a line reading that happened before; phi is
 * non-decreasing in k and in C, so kernel-served reads are monotonic among
 * themselves; and phi(k + d) <= phi(k) + d, which bounds what a reader can
 * have returned in the few nanoseconds a writer's transition takes. After a
 * counter jump that left C far ahead of the kernel, phi runs `bound` ahead of
 * the kernel until it catches up with C, instead of freezing at C.
 */
static inline uint64_t th_phi(uint64_t k, uint64_t C, uint64_t bound)
{
	uint64_t m = C < k + bound ? C : k + bound;
	return m > k ? m : k;
}

/*
 * The most a fresh line lags the kernel within its window: half the width of
 * its sample's sandwich (th_writer_install takes none wider than
 * 2 * (TH_PAGE_LAG_NS - 200) ns) plus the rate's uncertainty over the window
 * (the window is chosen so that it stays under budget_ns / 1.5 = 200 ns).
 */
#define TH_PAGE_LAG_NS 600

/* How far below its sample a line's window reaches (th_disc_cfg.tol_ns):
 * a counter of another CPU lagging the writer's, or read before the record
 * was found, is clamped to the window's start rather than refused. The slow
 * path takes an ordered counter that far below a window cut at its writer's
 * counter for another CPU's too (slow.c, lagging_ctr). */
#define TH_TOL_NS 10000

/* The kernel's update count moves by this much per update (odd while the
 * kernel writes its page): a tie that moved by more missed an update. */
#define TH_KSEQ_PER_UPDATE 2u

/*
 * phi for a reader of the daemon's page: max(k - TH_PAGE_LAG_NS, min(C, k +
 * bound)). A page reader cannot announce itself, so a daemon preempted
 * between its sample and its commit publishes its line whatever the page's
 * readers served from the kernel meanwhile. Served TH_PAGE_LAG_NS behind the
 * kernel, those values stay at or below the line: it starts at or above the
 * TRANSIT guard (itself at or above C: install publishes a TRANSIT record
 * only when C is within the guard of the kernel), and lags the kernel by no
 * more than TH_PAGE_LAG_NS. A continuation committed late (past the old
 * line's expiry) starts at C and lags by the old line's error, which
 * steering keeps within the budget while the kernel's rate holds.
 * Non-decreasing in k and C, as phi. tests/model/timehands.pml, daemon
 * world (-DBREAK_PAGE_NO_LAG: phi).
 */
static inline uint64_t th_phi_page(uint64_t k, uint64_t C, uint64_t bound)
{
	uint64_t m = C < k + bound ? C : k + bound;
	uint64_t lo = k > TH_PAGE_LAG_NS ? k - TH_PAGE_LAG_NS : 0;
	return m > lo ? m : lo;
}

/* ------------------------------------------------------------ writer side */

/* The contents of a snapshot as a writer commits them: gen and cur, which
 * name where a snapshot was found, cleared. */
void th_snap_to_val(const struct th_snap *s, struct th_snap *v);

/*
 * A line record v of the discipline's serves no counter below v->from, a
 * counter at which the kernel had made the step into v's REALTIME epoch:
 * a reader may have read its counter before the commit (the window reaches
 * below the anchor for it), and one read before the step would be served
 * the new offset on the line of before it. Where v->from lies above the
 * anchor the line is re-anchored there, the same line (exact in Q32.32),
 * with nothing served below it. The kernel's lines (kseq without
 * TH_RECF_TIED) are left alone: each begins at its own update. A window
 * that ends at or before v->from (a record planned from a sample taken at
 * its end) becomes a kernel-mode record, due at once, whose ceiling is the
 * line's end: the records after it start no lower. Returns v, or `out`
 * holding the cut copy.
 */
const struct th_snap *th_snap_cut(const struct th_snap *v, struct th_snap *out);

/*
 * Publish v as the successor of the timeline word `expect`. The record is
 * written into the slot after the current one (never the slot `cur` names,
 * so no reader is told to use a record while it is written), then `cur` is
 * swung with a compare-and-swap against `expect`. Returns 0 on success, -1 if
 * `cur` changed since `expect` was read (a commit or an announcement): the
 * record was written into a slot nobody uses and is simply abandoned.
 * Only one writer per timeline at a time (the caller holds the windup lock,
 * or is the daemon). The record written is th_snap_cut's of v.
 */
int th_commit(struct th_timeline *tl, uint64_t expect, const struct th_snap *v);

/*
 * th_commit again after it failed on announcements alone: `expect` is the
 * word now, naming the same record (TH_CUR_ID) as the word that commit was
 * made against, so the slot it wrote, under the generation of the same
 * sequence, still holds v (nothing else writes it: one writer). Only the
 * compare-and-swap is made again; -1 as th_commit.
 */
int th_recommit(struct th_timeline *tl, uint64_t expect, const struct th_snap *v);

/* Publish v whatever `cur` holds now (kernel-mode records, which are valid
 * whatever slow-path readers returned). Returns the new word. */
uint64_t th_commit_force(struct th_timeline *tl, const struct th_snap *v);

/*
 * A slow-path reader that returns a kernel value above what the record it
 * holds guarantees (a LINE past its expiry, or a TRANSIT above its guard)
 * announces itself: it bumps the announce count, but only while `cur` still
 * names the record the reader used, so that a writer that loaded `cur` before
 * taking its kernel sample cannot commit. Returns 1 if announced (the value may
 * be returned), 0 if a new record was committed meanwhile (read again through
 * it). The caller orders its kernel read before this call.
 */
static inline int th_announce(struct th_timeline *tl, uint64_t seen)
{
	TH_STEP("announce");
	uint64_t c = atomic_load_explicit(&tl->cur, memory_order_relaxed);
	while (TH_CUR_ID(c) == TH_CUR_ID(seen)) {
		/* acq_rel: the kernel reading before is ordered before the
		 * bump; a writer whose acquire load of cur sees the bump takes
		 * its sample after it. */
		if (atomic_compare_exchange_weak_explicit(&tl->cur, &c, c + TH_CUR_ANN_ONE, memory_order_acq_rel,
							  memory_order_relaxed))
			return 1;
	}
	return 0;
}

#endif /* TH_CORE_RECORD_H */
