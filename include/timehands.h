/*
 * timehands — the time on Linux as cheap as the hardware allows, with every
 * guarantee the kernel makes and the ones it forgot.
 *
 * The th_ functions behave like their libc twins: same return values, same
 * errno, EINVAL for unknown clock ids. Clock ids that timehands does not
 * accelerate (CPU-time clocks, dynamic/PTP fd clocks) go to the kernel
 * unchanged. See timehands(3) and timehands(7).
 */
#ifndef TIMEHANDS_H
#define TIMEHANDS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* clockid_t, also in strict ISO C modes */
#include <time.h>
#include <sys/time.h>
#include <sys/times.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TIMEHANDS_VERSION_MAJOR 1
#define TIMEHANDS_VERSION_MINOR 0

/*
 * Extension clock ids. The kernel encodes CPU-time clocks of other processes
 * and fd clocks as negative ids whose low three bits are 0..6; a negative id
 * with (id & 7) == 7 is never valid there, so these can never collide with a
 * kernel clock. A fallback translates them to their base id; they are never
 * handed to the kernel.
 */
/* REALTIME / MONOTONIC from an unordered counter read: monotonic per thread
 * only (a read may be taken slightly before earlier instructions retire, so
 * ordering against another thread's read is not promised). */
#define TH_CLOCK_REALTIME_RELAXED        ((clockid_t)-9)
#define TH_CLOCK_MONOTONIC_RELAXED       ((clockid_t)-17)
/* Process / thread CPU time served from memory, refreshed once per tick. */
#define TH_CLOCK_PROCESS_CPUTIME_COARSE  ((clockid_t)-25)
#define TH_CLOCK_THREAD_CPUTIME_COARSE   ((clockid_t)-33)

int th_clock_gettime(clockid_t clock_id, struct timespec *ts);
int th_clock_getres(clockid_t clock_id, struct timespec *res);
int th_gettimeofday(struct timeval *tv, void *tz);
time_t th_time(time_t *t);
clock_t th_times(struct tms *buf);
clock_t th_clock(void);

/* Where this process reads its time from. */
enum th_mode {
	TH_MODE_KERNEL = 0, /* every read goes to the kernel's clocks */
	TH_MODE_LOCAL = 1,  /* counter + records published in this process */
	TH_MODE_SHARED = 2  /* counter + records published by timehandsd */
};

enum th_counter {
	TH_COUNTER_NONE = 0,
	TH_COUNTER_TSC = 1,    /* x86-64 time stamp counter */
	TH_COUNTER_CNTVCT = 2  /* arm64 virtual counter */
};

/*
 * th_status() fills at most `size` bytes of this structure and returns 0, or
 * -1 with errno EINVAL when size is too small for the first fields. New fields
 * are only ever appended, so a program built against an older header keeps
 * working (pass sizeof(struct th_status)).
 */
struct th_status {
	uint32_t size;          /* bytes filled in */
	uint32_t mode;          /* enum th_mode */
	uint32_t counter;       /* enum th_counter actually in use (NONE in kernel mode) */
	uint32_t counter_available; /* enum th_counter the CPU has, trusted or not */
	double freq_hz;         /* counter ticks per MONOTONIC second, as estimated now */
	double freq_nominal_hz; /* published frequency, 0 if none was found */
	double freq_uncertainty_ppm; /* relative uncertainty of freq_hz */
	char freq_source[32];   /* "cpuid-15h", "hypervisor-leaf", "cpuinfo", "cntfrq", "measured", "none" */
	char clocksource[32];   /* the kernel's current clocksource */
	int64_t error_ns;       /* MONOTONIC minus the kernel's, measured by this call */
	int64_t error_bound_ns; /* half the width of the kernel sandwich around that read */
	char reason[192];       /* why the mode is not the fastest available; "" if it is */
	uint64_t windups;       /* records published by this process */
	uint64_t retries;       /* reads that saw a record change under them */
	uint64_t slow_reads;    /* reads served by the kernel path */
	uint64_t fallbacks;     /* times the counter was given up */
	uint64_t resyncs;       /* counter discontinuities detected (jump, suspend, migration) */
	uint64_t tick_ns;       /* the kernel's coarse clock resolution */
	uint64_t window_ns;     /* validity window of the current record */
	char page_path[96];     /* shared page in use or looked for */
	/* where coarse clocks and th_time() read the kernel's tick from:
	 * "data page" (read directly), "vdso", "system call" */
	char kernel_tick[32];
	/* where fine readings come from: "kernel" (the kernel's own
	 * conversion of the counter, read from its data page: exact),
	 * "kernel-pvclock" (the same where the kernel's clock is kvm-clock's
	 * pvclock: a line at most a few ns below its two-stage reading),
	 * "timehands" (timehands' line, steered to the kernel's clock),
	 * "timehandsd" (the daemon's page), "none" (the kernel's clocks) */
	char line[32];
	/* how an ordered read takes the counter: "rdtscp", "lfence;rdtsc",
	 * "isb;cntvct" (before the copy of the record); "late rdtsc", "late
	 * cntvct" (after a fence and the copy); or "none" where this process
	 * does not read it */
	char counter_read[16];
};

int th_status(struct th_status *st, size_t size);

/*
 * Inline fast path for th_time() (define TIMEHANDS_NO_INLINE to call the
 * library function instead). The kernel's cached second is accepted when it
 * equals the largest second a fine REALTIME reading of this process returned,
 * exactly as th_time() does; anything else goes to th_time(). The kernel's
 * second is read from its data page where the library found it there (the
 * word the kernel's own time() reads, accepted only while the page's sequence
 * count is even: a time namespace's page has it odd), else from the kernel's
 * time(). The structure below is internal and versioned; it is not part of
 * the API: fields are only appended, `minor` says how many exist.
 */
#define TH__FAST_ABI 1
struct th__fast {
	uint32_t abi;                    /* TH__FAST_ABI */
	uint32_t minor;                  /* 1: ksec and kseq exist; 6: g3's seconds never 0; 7: fns */
	time_t (*time_fn)(time_t *);     /* the kernel's time(); NULL until attached */
	const uint64_t *g3;              /* [47:0] seconds floor, [63:48] REALTIME epoch */
	const uint64_t *ksec;            /* minor >= 1: the kernel's REALTIME seconds, or NULL */
	const uint32_t *kseq;            /* minor >= 1: the kernel's data page count (also without ksec) */
	uint32_t tl_abi;                 /* minor >= 2: TH_ABI_VERSION if `tl` may be read inline, else 0 */
	uint32_t tl_pad;
	const void *tl;                  /* minor >= 2: this process's own timeline */
	/* page_tl, sh_delta, sh_ctr: for the inline readers of older headers,
	 * which read timehandsd's page themselves; this one leaves it to the
	 * library. */
	const void *page_tl;             /* minor >= 2: timehandsd's timeline, where it is mapped */
	const uint32_t *sh_delta;        /* minor >= 2: page REALTIME epoch -> this process's */
	const uint32_t *ctr_early;       /* minor >= 3: nonzero: read the counter first; 2: by RDTSCP */
	const uint64_t *sh_ctr;          /* minor >= 4: the page serves a first-read counter from here */
	uint32_t attached;               /* minor >= 5: nonzero once the library has attached */
	uint32_t pad5;
	const struct th__fine_fns *fns;  /* minor >= 7: the library's reads per clock */
};
/* The library's reads of one clock each, which th_clock_gettime and
 * th_gettimeofday dispatch to: the inline reads call them where the library
 * must read (a refusal, a process reading timehandsd's page), without the
 * dispatch over clock ids. fine[] in TH_ABI_CK_* order. */
struct th__fine_fns {
	int (*fine[5])(struct timespec *);
	int (*relaxed[2])(struct timespec *); /* MONOTONIC, REALTIME */
	int (*tod)(struct timeval *);
};
const struct th__fast *th__fast(void);

#if !defined(TIMEHANDS_NO_INLINE) && (defined(__GNUC__) || defined(__clang__))
#include "timehands/abi.h"
/* The slow half of th__time_inline: the layout check, once, and the
 * kernel's time() where its second cannot be read from memory. */
static __attribute__((noinline, unused)) time_t th__time_call(time_t *t, const struct th__fast **cache)
{
	static const struct th__fast none = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}; /* ksec NULL */
	const struct th__fast *f = __atomic_load_n(cache, __ATOMIC_RELAXED);
	if (f == 0) {
		f = th__fast();
		/* minor 6: th_abi_time_read may read ksec without kseq */
		if (f->abi != TH__FAST_ABI || f->minor < 6)
			f = &none;
		__atomic_store_n(cache, f, __ATOMIC_RELAXED);
	}
	/* Acquire pairs with the library's release store of time_fn at
	 * attach: g3 is valid once time_fn is seen. */
	time_t (*fn)(time_t *) = __atomic_load_n(&f->time_fn, __ATOMIC_ACQUIRE);
	if (fn != 0 && f != &none && __atomic_load_n(&f->ksec, __ATOMIC_ACQUIRE) == 0) {
		time_t tk = fn(t);
		if (th_abi_time_ok((uint64_t)tk, f->g3))
			return tk;
	}
	return th_time(t);
}

static inline time_t th__time_inline(time_t *t)
{
	/* One cached pointer per translation unit, set once its layout is
	 * known (th__time_call); relaxed atomics: every thread computes the
	 * same value, the race is only about which store wins. The
	 * pointed-to structure lives as long as the process. */
	static const struct th__fast *cache;
	const struct th__fast *f = __atomic_load_n(&cache, __ATOMIC_RELAXED);
	if (__builtin_expect(f != 0, 1)) {
		/* Acquire: pairs with the library's release store of ksec;
		 * g3 is a fixed address. ksec is NULL until the library has
		 * attached, and again if its direct reads stop agreeing with
		 * the vDSO. */
		const uint64_t *ks = __atomic_load_n(&f->ksec, __ATOMIC_ACQUIRE);
		uint64_t tk;
		if (__builtin_expect(ks != 0 && th_abi_time_read(ks, f->g3, &tk), 1)) {
			if (t)
				*t = (time_t)tk;
			return (time_t)tk;
		}
	}
	return th__time_call(t, &cache);
}
#define th_time(t) th__time_inline(t)

/*
 * Inline fast path for the fine clocks: th_clock_gettime() with a constant
 * clock id (REALTIME, MONOTONIC, MONOTONIC_RAW, BOOTTIME, TAI and the
 * *_RELAXED ids) and th_gettimeofday() without a timezone read the current
 * record where they are called, without the call into the library, on
 * x86-64 and arm64. It is the library's own fast read of the process's
 * timeline (src/attach/proc.h, th__read_ctr and th__read_tl_v), step for
 * step: the same ordered counter read, first, the same generation protocol,
 * the same window, the same arithmetic. Anything else (a process that reads
 * timehandsd's page, whose reads the library makes, with the re-checks that
 * the process still reads the page; a process that may not read the counter
 * first, or not yet attached; a record being written or superseded, a
 * kernel-mode record, a counter outside the window, a G3 floor to raise, a
 * library whose record ABI is not this header's) is the library's read of
 * that clock (th__fast()->fns), or the exported call. The records and the
 * protocol are declared in <timehands/abi.h>, versioned (TH_ABI_VERSION);
 * the library's records are laid out as declared there (src/core/record.h
 * checks every field).
 */
#if (defined(__x86_64__) || defined(__aarch64__)) && defined(CLOCK_MONOTONIC) && defined(CLOCK_REALTIME) &&   \
	defined(CLOCK_BOOTTIME) && defined(CLOCK_TAI) && defined(CLOCK_MONOTONIC_RAW)
#define TH__FINE_INLINE 1

/* What the inline reads need from the library, cached per translation unit
 * (every thread computes the same values; ctr_op, below, says when they are
 * all there). */
struct th__fine_ctx {
	const struct th_abi_timeline *tl;
	const uint64_t *g3;
	const uint32_t *kcount;
	uint32_t ctr_op;
	const struct th__fine_fns *fns; /* NULL: the exported calls */
};
/* kcount: the kernel's data page count, where the library found it; until
 * then an odd word, which no tied record matches. */
static const uint32_t th__kcount_none = 1;
/* ctr_op: 0 until the cache is filled (th__fine_fill, once the library has
 * attached); then how this process reads the counter, from the library's
 * word that says whether the counter may be read first (th__fast minor >=
 * 3), which it sets at its first attach and never changes: 1 LFENCE;RDTSC
 * for an ordered read on x86-64 (the fence, then the counter, elsewhere),
 * 2 RDTSCP (x86-64, where the CPU has it), both right after the word; 3 an
 * ordered read's fence after the word (x86-64; before it elsewhere), then
 * the copy, then the counter unordered (a library that says 3 is one that
 * knows it; an older header takes it as 4); 4 a process that may not read
 * the counter first, or a library whose timeline the header does not know:
 * every read is the library call. Stored last, with release (pairs with the
 * acquire load in th__fine_inline): a reader that sees 1 to 3 sees the
 * rest. */
static struct th__fine_ctx th__fine_cache = {0, 0, &th__kcount_none, 0, 0};
static inline void th__fine_fill(void)
{
	if (__atomic_load_n(&th__fine_cache.ctr_op, __ATOMIC_RELAXED) != 0)
		return;
	const struct th__fast *f = th__fast();
	uint32_t op = 4;
	if (f->abi == TH__FAST_ABI) {
		/* Nothing is cached before the library has attached (acquire:
		 * pairs with its release store of `attached`, after kseq and
		 * ctr_early): a kernel count cached as missing would send
		 * every read of a record tied to the kernel to the library for
		 * good. An older library: inline reads only where its time_fn
		 * (set at attach where the vDSO has time()) says so. */
		if (f->minor >= 5 ? __atomic_load_n(&f->attached, __ATOMIC_ACQUIRE) == 0
				  : __atomic_load_n(&f->time_fn, __ATOMIC_ACQUIRE) == 0)
			return;
		if (f->minor >= 3 && f->tl_abi == TH_ABI_VERSION && f->tl && f->g3 && f->ctr_early) {
			op = __atomic_load_n(f->ctr_early, __ATOMIC_RELAXED);
			if (op - 1u >= 3u)
				op = 4;
		}
	}
	if (f->minor >= 7 && f->fns)
		__atomic_store_n(&th__fine_cache.fns, f->fns, __ATOMIC_RELAXED);
	if (op != 4) {
		if (f->kseq)
			__atomic_store_n(&th__fine_cache.kcount, f->kseq, __ATOMIC_RELAXED);
		__atomic_store_n(&th__fine_cache.g3, f->g3, __ATOMIC_RELAXED);
		__atomic_store_n(&th__fine_cache.tl, (const struct th_abi_timeline *)f->tl, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&th__fine_cache.ctr_op, op, __ATOMIC_RELEASE);
}

/*
 * The counter, as a fast read takes it: right after the process's word,
 * before the loads that depend on the word (as the library's th__read_ctr
 * does; the record found after it is served only on a line valid at that
 * counter). An ordered read takes it after every earlier instruction of this
 * thread, the load by which the caller synchronised with another thread's
 * reading included: on x86-64 by the counter read itself, RDTSCP where the
 * library found it (op 2) or LFENCE;RDTSC (x86-64 keeps loads in program
 * order, so the word is loaded after every earlier load either way, and the
 * counter after both); on arm64 by the fence before the word
 * (TH__PRE_FENCE). `op`: ctr_op, 1 or 2. With op 3 an ordered read is
 * ordered by the fence after the word (TH__LATE_FENCE; on arm64 the one
 * before it), and the counter is read unordered after the copy
 * (th__ctr_late), where it overlaps the copy's loads.
 */
#if defined(__x86_64__)
#define TH__PRE_FENCE() ((void)0)
#define TH__LATE_FENCE() __asm__ volatile("lfence" ::: "memory")
static inline __attribute__((always_inline)) uint64_t th__ctr_late(void)
{
	return __builtin_ia32_rdtsc();
}
static inline __attribute__((always_inline)) uint64_t th__ctr_op(int ordered, uint32_t op)
{
	if (ordered && __builtin_expect(op == 2, 0)) {
		uint32_t lo, hi;
		__asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi) : : "ecx");
		return (uint64_t)hi << 32 | lo;
	}
	if (ordered)
		__asm__ volatile("lfence" ::: "memory");
	return __builtin_ia32_rdtsc();
}
#else
#define TH__PRE_FENCE() __asm__ volatile("dmb ishld\n\tisb" ::: "memory")
#define TH__LATE_FENCE() ((void)0)
static inline __attribute__((always_inline)) uint64_t th__ctr_late(void)
{
	uint64_t v;
	__asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
	return v;
}
static inline __attribute__((always_inline)) uint64_t th__ctr_op(int ordered, uint32_t op)
{
	uint64_t v;
	(void)ordered;
	(void)op;
	__asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
	return v;
}
#endif

/*
 * One fast read of clock ck (TH_ABI_CK_*) from this process's timeline
 * x->tl, with the counter read right after the process's word by
 * th__ctr_op(ordered, op) (or by `ctr`, where a test supplies one; early
 * 1), or after the copy of the record (early 2: op 3's fence after the
 * word), the record read by th_abi_eval, as the library reads it: 1 with
 * (*sec, *nsec), or 0 when the library must read, also whenever the word
 * names the shared slot: the daemon's page is the library's to read (its
 * split reader of the page costs less than a second reader here, and this
 * one stays a single straight path).
 */
static inline __attribute__((always_inline)) int th__fine_rec_at(const struct th_abi_timeline *tl,
								 const struct th__fine_ctx *x, int ck, int ordered,
								 uint32_t op, uint64_t (*ctr)(void), int early,
								 int64_t *osec, int64_t *onsec)
{
	/* An ordered read's fence before the word where it has one (arm64),
	 * here, after the op was found one of an inline read. */
	if (ordered)
		TH__PRE_FENCE();
	/* Acquire: the record is loaded after the word that names it; pairs
	 * with the writer's release commit. */
	uint64_t cur = __atomic_load_n(&tl->cur, __ATOMIC_ACQUIRE);
	/* Before the counter, which a page read would not use. */
	if (__builtin_expect(th_abi_cur_slot(cur) == TH_ABI_SLOT_SHARED, 0))
		return 0;
	/* The counter now, before the record is found (the compiler barrier
	 * keeps the loads below after it in program order); or, with op 3,
	 * the fence now and the counter after the copy (th_abi_eval). */
	uint64_t c = 0;
	if (early == 1)
		c = ctr ? ctr() : th__ctr_op(ordered, op);
	else
		TH__LATE_FENCE();
	__asm__ volatile("" ::: "memory");
	int64_t sec, n;
	uint64_t ep;
	if (__builtin_expect(!th_abi_eval(th_abi_rec_of(tl, cur), cur, NULL, ck, early, c, th__ctr_late, &x->kcount, 0,
					  0, 0, 0, 0, 0, &sec, &n, &ep),
			     0))
		return 0;
	if (ck == TH_ABI_CK_REAL) {
		/* G3: a second above the floor is the library's to raise
		 * (relaxed, as in the library: one word). */
		const uint64_t *g3 = __atomic_load_n(&x->g3, __ATOMIC_RELAXED);
		if (__builtin_expect(g3 == 0, 0))
			return 0;
		uint64_t w = __atomic_load_n(g3, __ATOMIC_RELAXED);
		if (__builtin_expect(sec >= 0 && w < ((ep << 48) | (uint64_t)sec), 0))
			return 0;
	}
	*osec = sec;
	*onsec = n;
	return 1;
}

/* th__fine_rec_at with early chosen once: each way of reading the counter
 * gets its own straight copy of the read, rather than one copy that tests
 * the way again around the copy of the record (a fourth register live
 * through it, three more branches). LFENCE;RDTSC or RDTSCP first, where the
 * read falls through to it, as in the library's entries (TH_READ_CTR_SPLIT).
 * 0 for an op of no inline read (0: the cache not filled; 4), tested after
 * op 3, whose ordered read thus makes one test. */
static inline __attribute__((always_inline)) int th__fine_rec(const struct th_abi_timeline *tl,
							      const struct th__fine_ctx *x, int ck, int ordered, uint32_t op,
							      uint64_t (*ctr)(void), int64_t *osec, int64_t *onsec)
{
	if (__builtin_expect(ordered && op == 3 && !ctr, 0))
		return th__fine_rec_at(tl, x, ck, ordered, op, ctr, 2, osec, onsec);
	if (__builtin_expect(op - 1u >= 3u, 0))
		return 0;
	return th__fine_rec_at(tl, x, ck, ordered, op, ctr, 1, osec, onsec);
}

/* A reading the library wrote into a local copy, stored into the caller's
 * word by word (TH_ABI_PIN2). */
#define th__copy2(a, b, da, db)                                              \
	do {                                                                 \
		__typeof__(*(a)) th__a_ = *(a);                              \
		__typeof__(*(b)) th__b_ = *(b);                              \
		TH_ABI_PIN2(th__a_, th__b_);                                 \
		*(da) = th__a_;                                              \
		*(db) = th__b_;                                              \
	} while (0)

/* The library call behind an inline read before the cache is filled, which
 * then fills it (the first call attaches the library). */
static __attribute__((noinline, unused)) int th__fine_call(clockid_t id, struct timespec *ts)
{
	int r = (th_clock_gettime)(id, ts);
	th__fine_fill();
	return r;
}

static inline __attribute__((always_inline)) int th__fine_inline(clockid_t id, int ck, int ordered,
								 struct timespec *ts)
{
	int64_t sec, n;
	/* Acquire: pairs with th__fine_fill's release store. */
	uint32_t op = __atomic_load_n(&th__fine_cache.ctr_op, __ATOMIC_ACQUIRE);
	if (__builtin_expect(ts != 0, 1)) {
		if (__builtin_expect(th__fine_rec(__atomic_load_n(&th__fine_cache.tl, __ATOMIC_RELAXED), &th__fine_cache,
						  ck, ordered, op, 0, &sec, &n),
				     1)) {
			ts->tv_sec = (time_t)sec;
			ts->tv_nsec = (long)n;
			return 0;
		}
	}
	if (__builtin_expect(ts == 0, 0))
		return (th_clock_gettime)(id, ts);
	/* The library's reading, into a local copy stored below as the inline
	 * one is: every way out of here then leaves *ts as two stores of
	 * values the caller's compiler knows, which it need not load back
	 * (clang did, on the read's critical path, when *ts was the library's
	 * to write). The library cannot fail for these ids and a non-null ts;
	 * its result is returned all the same. */
	struct timespec t = {0, 0};
	int r;
	if (__builtin_expect(op != 0, 1)) {
		/* the cache filled (a refusal, a process reading timehandsd's
		 * page): the library's read of this clock, directly */
		const struct th__fine_fns *fn = __atomic_load_n(&th__fine_cache.fns, __ATOMIC_RELAXED);
		if (__builtin_expect(fn != 0, 1))
			r = ordered ? fn->fine[ck](&t) : fn->relaxed[ck == TH_ABI_CK_REAL](&t);
		else
			r = (th_clock_gettime)(id, &t);
	} else {
		r = th__fine_call(id, &t);
	}
	th__copy2(&t.tv_sec, &t.tv_nsec, &ts->tv_sec, &ts->tv_nsec);
	return r;
}

#define TH__FINE_CK(id)                                                                              \
	((id) == CLOCK_MONOTONIC || (id) == TH_CLOCK_MONOTONIC_RELAXED ? TH_ABI_CK_MONO             \
	 : (id) == CLOCK_REALTIME || (id) == TH_CLOCK_REALTIME_RELAXED ? TH_ABI_CK_REAL              \
	 : (id) == CLOCK_BOOTTIME ? TH_ABI_CK_BOOT                                                   \
	 : (id) == CLOCK_TAI ? TH_ABI_CK_TAI                                                         \
	 : (id) == CLOCK_MONOTONIC_RAW ? TH_ABI_CK_RAW                                               \
				       : -1)
#define TH__FINE_ORDERED(id) ((id) != TH_CLOCK_MONOTONIC_RELAXED && (id) != TH_CLOCK_REALTIME_RELAXED)
#define th_clock_gettime(id, ts)                                                                     \
	(__builtin_constant_p(id) && TH__FINE_CK(id) >= 0                                              \
		 ? th__fine_inline((id), TH__FINE_CK(id) & 7, TH__FINE_ORDERED(id), (ts))             \
		 : (th_clock_gettime)((id), (ts)))

/* gettimeofday without a timezone: REALTIME inline, in microseconds. */
static __attribute__((noinline, unused)) int th__gettimeofday_call(struct timeval *tv, void *tz)
{
	int r = (th_gettimeofday)(tv, tz);
	th__fine_fill();
	return r;
}

static inline __attribute__((always_inline)) int th__gettimeofday_inline(struct timeval *tv, void *tz)
{
	int64_t sec, n;
	uint32_t op = __atomic_load_n(&th__fine_cache.ctr_op, __ATOMIC_ACQUIRE); /* as th__fine_inline */
	if (__builtin_expect(tv != 0 && tz == 0, 1)) {
		if (__builtin_expect(th__fine_rec(__atomic_load_n(&th__fine_cache.tl, __ATOMIC_RELAXED), &th__fine_cache,
						  TH_ABI_CK_REAL, 1, op, 0, &sec, &n),
				     1)) {
			tv->tv_sec = (time_t)sec;
			tv->tv_usec = (__typeof__(tv->tv_usec))th_abi_usec(n);
			return 0;
		}
	}
	if (__builtin_expect(tv == 0 || tz != 0, 0))
		return (th_gettimeofday)(tv, tz);
	/* into a local copy, stored as the inline reading is (th__fine_inline) */
	struct timeval t = {0, 0};
	int r;
	if (__builtin_expect(op != 0, 1)) {
		const struct th__fine_fns *fn = __atomic_load_n(&th__fine_cache.fns, __ATOMIC_RELAXED);
		r = __builtin_expect(fn != 0, 1) ? fn->tod(&t) : (th_gettimeofday)(&t, 0);
	} else {
		r = th__gettimeofday_call(&t, 0);
	}
	th__copy2(&t.tv_sec, &t.tv_usec, &tv->tv_sec, &tv->tv_usec);
	return r;
}
#define th_gettimeofday(tv, tz) th__gettimeofday_inline((tv), (tz))
#endif /* x86-64, arm64 */
#endif

#ifdef __cplusplus
}
#endif

#endif /* TIMEHANDS_H */
