/*
 * timehands' record ABI: the layout of a timeline and of its records, and the
 * operations of the protocol by which they are read without a lock. Internal
 * and versioned, not API: the library lays its records out so (its record.h
 * asserts every field's offset against these declarations) and publishes
 * TH_ABI_VERSION to the readers compiled into programs by <timehands.h>,
 * which read inline only where the library's version is theirs. The version
 * changes with any change to the layout or to the protocol (what a reader
 * loads, in which order, and what it must check before it serves a value).
 *
 * The protocol, in short (the full account: doc/design.md):
 *  - the timeline word `cur` names the current record: slot (bits 0-7, 0xff:
 *    the daemon's page instead), sequence (8-39), announce count (40-63);
 *  - a record's generation `gen` is th_abi_gen_for(sequence), the
 *    sequence's complement, once committed and 0 while it is being written
 *    (no sequence is all ones: th_abi_seq_next); a reader loads `cur`
 *    (acquire), the generation (th_abi_read_begin: acquire) and compares it
 *    with the one `cur` names, copies the fields it needs (relaxed), then
 *    checks that the generation did not change (th_abi_read_end or _retry:
 *    an acquire fence, then the generation again), and serves nothing from
 *    a copy that fails either check. Pairs with the writer's release store of the generation, its
 *    release fence after setting it to 0, and the release commit of `cur`;
 *  - a record tied to a kernel update (kseq = the kernel data page's count
 *    | TH_ABI_KSEQ_LINE, every clock; or | TH_ABI_KSEQ_RT, REALTIME and TAI
 *    only) is served only while the kernel's count is still that count;
 *  - the fast window is the counter interval [dlo, ddue) around the anchor
 *    (an empty window, dlo = ddue = 0: a kernel-mode record, never served
 *    fast); at and above the anchor a clock's value is
 *    at[ck].nsec_q32 + d * hi >> 32 ns past at[ck].sec, below it the same
 *    with lo, where hi and lo are the line's Q32.32 slopes (line 1, raw_*,
 *    for MONOTONIC_RAW; line 0, mono_*, for the others);
 *  - the counter is read right after the process's word, before the record
 *    it names is loaded (ordered reads: RDTSCP or LFENCE;RDTSC on x86-64, a
 *    fence before the word on arm64); a read of the daemon's page re-checks
 *    the process's word after the copy and serves only counters from the
 *    switch to the page on (th__fast.sh_ctr).
 */
#ifndef TIMEHANDS_ABI_H
#define TIMEHANDS_ABI_H

#include <stdint.h>

/* 3: the counter read after the process's word, records tied to kernel
 * updates (kseq), the page's first-read counter (sh_ctr), windows that may
 * end below their anchor. 4: kseq's flags in its top bits; the generation
 * the sequence's complement. */
#define TH_ABI_VERSION 4
#define TH_ABI_RING 8u
#define TH_ABI_SLOT_SHARED 0xffu

/* The clocks of a record, in its order. */
enum { TH_ABI_CK_MONO = 0, TH_ABI_CK_REAL = 1, TH_ABI_CK_BOOT = 2, TH_ABI_CK_TAI = 3, TH_ABI_CK_RAW = 4 };

/* A clock at the anchor: seconds, and nanoseconds in Q32.32. */
struct th_abi_ts {
	int64_t sec;
	int64_t nsec_q32;
};

/* One record: 320 bytes, five cache lines. */
struct th_abi_rec {
	uint32_t gen;        /* 0 while written; th_abi_gen_for(sequence) once committed */
	uint16_t kind;       /* line, kernel-mode, transition */
	uint16_t epoch;      /* REALTIME step epoch */
	uint64_t anchor;     /* counter value the deltas are taken from */
	int64_t dlo, ddue;   /* fast window [dlo, ddue) */
	int64_t mono_lo;     /* line 0 Q32.32 ns per count below the anchor */
	int64_t mono_hi;     /* and from the anchor on */
	uint32_t mono_frac, raw_frac;
	uint64_t kseq;       /* 0, or the kernel update's count | TH_ABI_KSEQ_* */
	struct th_abi_ts at[5];
	int64_t raw_lo, raw_hi;
	uint64_t mono_ns, raw_ns;
	int64_t off_real, off_boot, off_tai;
	int64_t dhi, dmin;
	uint64_t due_ns;
	uint64_t coarse, tick;
	uint64_t ceil[2], guard[2];
	struct th_abi_ts coarse_at[2];
	uint32_t bound[2];
	uint64_t flags;
};

/* The coarse values of the current record, under a count of their own. */
struct th_abi_coarse_block {
	uint32_t seq, rseq;
	uint64_t tick, coarse;
	int64_t sec[2], nsec[2];
};

struct th_abi_timeline {
	uint64_t cur;
	struct th_abi_coarse_block cb;
	struct th_abi_rec ring[TH_ABI_RING];
};

/* The timeline word. */
static inline unsigned th_abi_cur_slot(uint64_t cur)
{
	return (unsigned)(cur & 0xffu);
}
static inline uint32_t th_abi_cur_seq(uint64_t cur)
{
	return (uint32_t)(cur >> 8);
}
/* slot and sequence, without the announce count */
static inline uint64_t th_abi_cur_id(uint64_t cur)
{
	return cur & (((uint64_t)1 << 40) - 1);
}
/* Nonzero where words a and b name different records: th_abi_cur_id of
 * a ^ b as a shift, which needs no register for a 40-bit mask. */
static inline uint64_t th_abi_cur_differ(uint64_t a, uint64_t b)
{
	return (a ^ b) << 24;
}
/* The generation of the record committed as sequence seq: its complement,
 * one instruction for a reader. Never 0, the generation of a record being
 * written, nor that of the zero record a timeline before its first commit
 * names with sequence 0, since no sequence is all ones. */
static inline uint32_t th_abi_gen_for(uint32_t seq)
{
	return ~seq;
}
/* The sequence after seq, skipping the one all ones. */
static inline uint32_t th_abi_seq_next(uint32_t seq)
{
	return seq + 1u == 0xffffffffu ? 0u : seq + 1u;
}

/* The record `cur` names in timeline `tl` (not the page's: see the slot). */
static inline const struct th_abi_rec *th_abi_rec_of(const struct th_abi_timeline *tl, uint64_t cur)
{
	return &tl->ring[th_abi_cur_slot(cur) % TH_ABI_RING];
}

/* The generation before a copy. Acquire: the fields are loaded after it;
 * pairs with the writer's release store of the generation. */
static inline uint32_t th_abi_read_begin(const struct th_abi_rec *r)
{
	return __atomic_load_n(&r->gen, __ATOMIC_ACQUIRE);
}

/* The generation after a copy: the copy stands if it equals the one
 * th_abi_read_begin returned. The acquire fence orders the copy's loads
 * (and any later load) before the generation's re-load; pairs with the
 * writer's release fence after it stored 0 there. */
static inline uint32_t th_abi_read_end(const struct th_abi_rec *r)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(&r->gen, __ATOMIC_RELAXED);
}

/* Nonzero when a copy begun at generation g must be discarded. */
static inline int th_abi_read_retry(const struct th_abi_rec *r, uint32_t g)
{
	return th_abi_read_end(r) != g;
}

/* A field of a record, copied (relaxed: the generation orders it). */
#define TH_ABI_LD(r, field) __atomic_load_n(&(r)->field, __ATOMIC_RELAXED)

/* A reading's two words held in registers before they are stored into the
 * caller's timespec or timeval, each by its own store. Where the reading
 * came back from a call, a compiler otherwise spills the pair, or copies
 * the library's local one, as one 16-byte load, which no CPU forwards from
 * two 8-byte stores: the load waits for both to reach the cache. */
#define TH_ABI_PIN2(a, b) __asm__("" : "+r"(a), "+r"(b))

/* The flags of kseq above its count (bits 0-31): bit 62, a tie of REALTIME
 * and TAI, the clocks whose offsets a kernel update may step (timehands' own
 * line tied to an update); bits 63 and 62 together, a kernel's line, whose
 * readings of every clock are the kernel's. */
#define TH_ABI_KSEQ_RT ((uint64_t)1 << 62)
#define TH_ABI_KSEQ_LINE ((uint64_t)3 << 62)

/* All ones where kseq ks ties clock ck, else 0: the flag that applies to ck
 * shifted into the sign bit and spread by one arithmetic shift (the flags
 * sit at the top for that). */
static inline __attribute__((always_inline)) uint32_t th_abi_tie_mask(uint64_t ks, int ck)
{
	uint64_t t = ck == TH_ABI_CK_REAL || ck == TH_ABI_CK_TAI ? ks << 1 : ks;
	return (uint32_t)(uint64_t)((int64_t)t >> 63);
}

/* Nonzero when a record tied to a kernel update (kseq) is no longer the
 * kernel's for clock ck, the kernel's count read now through the pointer at
 * *kcp (relaxed, both: they order nothing else; loaded where needed, not
 * kept in a register across the read), after the counter c was read.
 * Branch-free: where records are the kernel's every read asks, elsewhere
 * the mask is 0. On arm64 the count's address depends on c (a zero
 * computed from it), so the count is loaded only after the counter was
 * read, as the kernel's own vDSO orders its re-read there; x86-64 orders
 * it no more than the kernel's vDSO does (neither RDTSC nor RDTSCP holds
 * later loads back). */
static inline __attribute__((always_inline)) uint32_t th_abi_kseq_moved(uint64_t ks, int ck,
									 const uint32_t *const *kcp, uint64_t c)
{
	const uint32_t *kc = __atomic_load_n(kcp, __ATOMIC_RELAXED);
#if defined(__aarch64__)
	uint64_t z;
	__asm__("eor %0, %1, %1" : "=r"(z) : "r"(c));
	kc = (const uint32_t *)(const void *)((const char *)kc + z);
#else
	(void)c;
#endif
	return ((uint32_t)ks ^ __atomic_load_n(kc, __ATOMIC_RELAXED)) & th_abi_tie_mask(ks, ck);
}

/*
 * The one reader of a record, behind every fine read of the library and of
 * <timehands.h>: clock ck (TH_ABI_CK_*) from record r, which the timeline
 * word `cur` named. The counter: `c`, read by the caller right after the
 * process's word (early 1), or read here by late_ctr() after the copy:
 * early 0 where the process may not read it first, and then only for a line
 * (a kernel-mode record's window is empty: PR_SET_TSC may forbid the read);
 * early 2 where it may, but the fence after the word, then the copy, then an
 * unordered counter read costs less than an ordered read before the copy
 * (late_ctr's read may run anywhere after that fence; an empty window
 * refuses whatever it reads).
 * kcp: where the kernel's update count is, read after the counter. step: the
 * simulation's scheduling points (NULL elsewhere). shared: r is the
 * daemon's page's, found through the process's word *own_cur, loaded as lc
 * (acquire) before the counter: served only if that word is unchanged
 * after the copy (the process may have left the page meanwhile), and a
 * counter (either way) only at or above *sh_ctr, the counter from which
 * the switch to the page found its line above everything this process had
 * served (an earlier one could lie where the page's line is below that).
 * A page numbers its REALTIME epochs itself: the process's is the page's
 * plus *sh_delta (both words at fixed addresses: one load each).
 * again: the timeline r lies in, or NULL. With it the part below the
 * anchor finds r again from `cur` (the same record, and the generation
 * checked at the start), so that neither r nor its generation need stay in
 * a register across the counter read where the timeline's address is a
 * constant (the process's own; the page's area).
 * 1 with (*osec, *onsec in [0, 1e9)) and the REALTIME epoch *oep (16 bits,
 * held in 64); 0 where the caller's slow path must read, with *osec
 * written all the same (the seconds are stored as soon as they are copied:
 * a caller may pass its caller's timespec, whose slow path then overwrites
 * them). The G3 floor is the caller's.
 */
static inline __attribute__((always_inline)) int th_abi_eval(const struct th_abi_rec *r, uint64_t cur,
							   const struct th_abi_timeline *again, int ck,
							   int early, uint64_t c, uint64_t (*late_ctr)(void),
							   const uint32_t *const *kcp, void (*step)(const char *),
							   int shared, const uint64_t *own_cur, uint64_t lc,
							   const uint64_t *sh_ctr, const uint32_t *sh_delta,
							   int64_t *osec, int64_t *onsec, uint64_t *oep)
{
	/* one base register for every field (the compiler would keep the
	 * timeline and the slot's offset apart, a register more) */
	__asm__("" : "+r"(r));
	uint32_t g = th_abi_read_begin(r);
	/* The generation of cur's sequence; each check as early as it can be
	 * made, so that little stays live. */
	if (__builtin_expect(g != th_abi_gen_for(th_abi_cur_seq(cur)), 0))
		return 0;
	if (step)
		step("read_fields");
	/* A record that is the kernel's conversion at one of its updates is
	 * the kernel's clock only while that update is the kernel's latest:
	 * the count is loaded after the counter was read (program order, as
	 * the vDSO re-reads its count after its counter read); a counter taken
	 * first is compared at once, one taken after the copy once it is
	 * read. */
	uint64_t ks = TH_ABI_LD(r, kseq);
	if (early == 1 && __builtin_expect(th_abi_kseq_moved(ks, ck, kcp, c) != 0, 0))
		return 0;
	/* The window at and above the anchor, [0, ddue), and its slope; the
	 * part below the anchor and its slope are copied only where the
	 * counter falls there (below), which keeps the registers of the
	 * common read few. A late counter needs dlo before it is read. A
	 * kernel-mode record's window is empty (dlo = ddue = 0; src/core/page.c
	 * checks a page's): never served. */
	uint64_t anchor = TH_ABI_LD(r, anchor);
	int64_t dlo = early == 0 ? TH_ABI_LD(r, dlo) : 0;
	int64_t ddue = TH_ABI_LD(r, ddue);
	int64_t hi = ck == TH_ABI_CK_RAW ? TH_ABI_LD(r, raw_hi) : TH_ABI_LD(r, mono_hi);
	/* The seconds go out at once, before the copy is known to stand, so
	 * that no register holds them across the counter read. */
	*osec = TH_ABI_LD(r, at[ck].sec);
	int64_t q = TH_ABI_LD(r, at[ck].nsec_q32);
	/* Full width (the epoch is 16 bits), and opaque to the compiler
	 * (the empty asm): knowing the upper bits zero, it spills the value
	 * 16 bits wide and reloads it 64 bits wide for the G3 compare, a
	 * load store-to-load forwarding cannot serve on x86. */
	uint64_t ep = 0;
	if (ck == TH_ABI_CK_REAL) {
		ep = TH_ABI_LD(r, epoch);
		__asm__("" : "+r"(ep));
	}
	/* The generation unchanged across the copy. */
	if (__builtin_expect(th_abi_read_end(r) != g, 0))
		return 0;
	if (shared) {
		/* th_abi_read_end's fence orders the copy before these loads
		 * (relaxed: the acquire load of lc that saw the switch orders
		 * sh_ctr's value, that switch's or a later, larger one). */
		if (th_abi_cur_differ(__atomic_load_n(own_cur, __ATOMIC_RELAXED), lc) != 0)
			return 0;
		if (ck == TH_ABI_CK_REAL)
			ep = (ep + __atomic_load_n(sh_delta, __ATOMIC_RELAXED)) & 0xffff;
	}
	/* Inside the window |d * rate| < 2^62, so q + d * rate is exact in
	 * 64 bits, and so is its value modulo 2^64 taken as q - anchor * rate
	 * (computed while the counter is read; the empty asm keeps the
	 * compiler from folding it back after the counter) plus c * rate: one
	 * multiply and one add after the counter. */
	uint64_t kh = (uint64_t)q - anchor * (uint64_t)hi;
	uint64_t due = (uint64_t)(ddue > 0 ? ddue : 0);
	__asm__("" : "+r"(kh));
	if (early != 1) {
		if (early == 0 && __builtin_expect(ddue == dlo, 0))
			return 0;
		if (step)
			step("read_counter");
		c = late_ctr();
	}
	/* The page serves a counter only at or above *sh_ctr: one taken
	 * first, or one read after the copy (an unordered read may run as
	 * early as the fence, before the word that named the page). */
	if (shared && c < __atomic_load_n(sh_ctr, __ATOMIC_RELAXED))
		return 0;
	int64_t n;
	if (__builtin_expect(c - anchor < due, 1)) {
		n = (int64_t)(kh + c * (uint64_t)hi) >> 32;
	} else {
		/* Below the anchor, [dlo, min(ddue, 0)) (a window can end
		 * below its anchor): the slope below it and the anchor's
		 * value (copied again rather than kept in a register across
		 * the counter read), checked by the generation once more. */
		int64_t d = (int64_t)(c - anchor);
		uint32_t gb = g;
		if (again) {
			/* opaque, or the compiler keeps r and g after all */
			uint64_t cu = cur;
			__asm__("" : "+r"(cu));
			r = th_abi_rec_of(again, cu);
			gb = th_abi_gen_for(th_abi_cur_seq(cu));
		}
		int64_t dl = TH_ABI_LD(r, dlo);
		int64_t lo = ck == TH_ABI_CK_RAW ? TH_ABI_LD(r, raw_lo) : TH_ABI_LD(r, mono_lo);
		uint64_t qb = (uint64_t)TH_ABI_LD(r, at[ck].nsec_q32);
		if (d >= 0 || d >= ddue || d < dl || th_abi_read_retry(r, gb))
			return 0;
		n = (int64_t)(qb + (uint64_t)d * (uint64_t)lo) >> 32;
	}
	if (early != 1 && __builtin_expect(th_abi_kseq_moved(ks, ck, kcp, c) != 0, 0))
		return 0;
	if (__builtin_expect((uint64_t)n >= 1000000000u, 0)) {
		int64_t k = n / 1000000000 - (n < 0);
		*osec += k;
		n -= k * 1000000000;
	}
	*onsec = n;
	*oep = ep;
	return 1;
}

/* The seconds of the G3 floor word (th__fast.g3: [47:0] seconds, [63:48]
 * REALTIME epoch), the largest second a fine REALTIME reading of the
 * process has returned; TH_ABI_G3_NONE before the first one of an epoch,
 * never 0 (th_abi_time_read). */
#define TH_ABI_G3_SECMASK 0xffffffffffffULL
#define TH_ABI_G3_NONE 1ULL

/*
 * time() from memory, behind the library's, the preload's and
 * <timehands.h>'s: the kernel's cached second *ksec is served where it
 * equals the floor's second in *g3 (a second above it is the library's to
 * serve, below it cannot follow a REALTIME reading: G3). 1 with *out, 0
 * where the caller must ask further. Relaxed loads: the kernel writes the
 * second as one word and its own time() reads it so, without its count;
 * the floor is one word too, raised at most once per second. A time
 * namespace's data page, which replaces the kernel's page 0 in a process
 * that joins one, carries offsets where the kernel's page has bases and
 * none for REALTIME: its REALTIME slot reads 0, which no floor equals
 * (TH_ABI_G3_NONE), so no count needs reading to refuse it.
 */
static inline __attribute__((always_inline)) int th_abi_time_read(const uint64_t *ksec, const uint64_t *g3,
								  uint64_t *out)
{
	uint64_t tk = __atomic_load_n(ksec, __ATOMIC_RELAXED);
	uint64_t w = __atomic_load_n(g3, __ATOMIC_RELAXED);
	*out = tk;
	return __builtin_expect(tk == (w & TH_ABI_G3_SECMASK), 1);
}

/* The same for a second `tk` the kernel's time() returned. */
static inline __attribute__((always_inline)) int th_abi_time_ok(uint64_t tk, const uint64_t *g3)
{
	return tk == (__atomic_load_n(g3, __ATOMIC_RELAXED) & TH_ABI_G3_SECMASK);
}

/* Microseconds of a normalised nanosecond count in [0, 1e9): 32 bits
 * wide, so that the division is one multiply and a shift (gettimeofday's
 * conversion ends every such read). */
static inline uint32_t th_abi_usec(int64_t nsec)
{
	return (uint32_t)nsec / 1000u;
}

#endif
