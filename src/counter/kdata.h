/*
 * The kernel's own time data ([vvar] page 0), read directly for one value:
 * CLOCK_MONOTONIC_COARSE. A coarse read must tell a stale record from a fresh
 * one, and the only clock that can tell it is the kernel's coarse one; calling
 * the vDSO for it costs as much as the vDSO's whole coarse read, so a coarse
 * read that calls it can never be cheaper than the kernel's. Reading the two
 * words under the kernel's own sequence count costs a few loads.
 *
 * The layout is not a kernel ABI, so nothing is assumed that is not checked:
 * at attach th_kdata_init() finds the [vvar] mapping in /proc/self/maps and
 * accepts page 0 only if, at one of the offsets where Linux has placed its
 * clock data (the generic vDSO's struct vdso_data / vdso_clock: 32-bit
 * sequence count first, then the clock mode, counter fields, and a (sec, nsec)
 * base per clock id; at the page start since 6.13, 128 bytes in on x86 before),
 *   - the sequence count is even and the clock mode is a small number (not the
 *     time-namespace marker),
 *   - the counter mask is 2^k - 1 and the shift is below 64,
 *   - the MONOTONIC_COARSE and REALTIME_COARSE bases equal what the vDSO
 *     returns for those clocks, read with no kernel update in between,
 *   - a read through the sequence count lies between two vDSO reads, and the
 *     REALTIME base's seconds between two readings of the kernel's time().
 * Anything else (another layout, a time namespace, qemu-user, no [vvar]) leaves
 * the direct read off and coarse reads call the vDSO, as before. A read that
 * finds the count odd or changed also calls the vDSO: one try, never a spin.
 * th_kdata_check() repeats the sandwich while running (the windup calls it)
 * and turns the direct read off for good if it ever disagrees, or finds the
 * count odd four times running with the clock mode of a time namespace (a
 * process that moved itself into one: its page 0 is now the namespace's).
 */
#ifndef TH_COUNTER_KDATA_H
#define TH_COUNTER_KDATA_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct th_kdata {
	/* Inside [vvar] page 0 once found; until then (and for good after a
	 * disagreement) a private count that is always odd, so that a reader
	 * needs no NULL test: it finds the kernel "updating" and calls the
	 * vDSO. Written by attach and th_kdata_check() with relaxed atomic
	 * stores. A reader that pairs the kernel's count with the private
	 * base (a switch under it) reads 0 ns: older than any record, so
	 * "stale", the slow path; the private count with any base is odd. */
	const uint32_t *seq;
	const uint64_t *mono_coarse; /* sec, nsec */
	/* The REALTIME base's seconds: what the kernel's time() returns (it
	 * reads this word alone, without the count). NULL while off. */
	const uint64_t *real_sec;
};
extern struct th_kdata th_kdata;

/* Where page 0 of [vvar] holds the clock data, given the vDSO's readings of
 * MONOTONIC_COARSE and REALTIME_COARSE taken with no kernel update between
 * them and the page read: 0 and the byte offsets of the sequence count and
 * of the MONOTONIC_COARSE base, or -1. Pure (tests feed it pages). */
int th_kdata_locate(const unsigned char *page, size_t size, const struct timespec *mono,
		    const struct timespec *real, size_t *seq_off, size_t *mono_off);

/*
 * The kernel's own conversion of the counter, as published at one of its
 * timekeeping updates (x86-64, clocksource read from the TSC: the clock mode
 * its vDSO computes time from the TSC in). For every clock the kernel's
 * reading at counter c >= cycle_last is
 *     sec + ((nsec + (c - cycle_last) * mult) >> shift)    (ns carried into sec)
 * with the bases (sec, nsec) of that clock (nsec in ns << shift), the
 * MONOTONIC_RAW clock with its own mult and shift. A record made of these
 * values is the kernel's line exactly, for as long as `seq` is the kernel's
 * count. Bases are indexed by TH_KC_*; the coarse ones are whole ns.
 */
enum { TH_KC_REAL, TH_KC_MONO, TH_KC_BOOT, TH_KC_TAI, TH_KC_RAW, TH_KC_REAL_COARSE, TH_KC_MONO_COARSE, TH_KC_N };
/*
 * Where the clocksource is kvm-clock with a stable TSC (the vDSO's pvclock
 * mode), the kernel's "cycles" are the paravirtual clock's nanoseconds, which
 * the vDSO computes from the TSC with the hypervisor's parameters (KVM's
 * pvclock ABI: struct pvclock_vcpu_time_info of vCPU 0):
 *     cycles = system_time + (((c - tsc_timestamp) << tsc_shift) * mul >> 32)
 * (a negative shift shifts right), then applies the formula above to them.
 * `pv` says which; the pvclock fields are copied under its version.
 */
struct th_kconv {
	uint32_t seq;
	uint64_t cycle_last;
	uint32_t mult, shift, raw_mult, raw_shift;
	uint64_t sec[TH_KC_N], nsec[TH_KC_N];
	int pv;
	uint32_t pv_mul;
	int32_t pv_shift;
	uint64_t pv_tsc, pv_time;
};

/* The kernel's cycles at counter c (c itself but for pvclock). */
uint64_t th_kconv_cycles(const struct th_kconv *k, uint64_t c);

/* Find the kernel's conversion next to the direct coarse read and check it
 * against the vDSO for every fine clock; reads the counter, so only where the
 * process may (after th_kdata_init). */
void th_kdata_conv_init(void);

/* 1 where th_kdata_conv_init found it (then th_kdata_conv may succeed). */
int th_kdata_conv_known(void);

/* Test seam (tests/unit/test_kdata.c): copies of the conversion read from
 * `to`, a copy of the kernel's data page (the same offsets), or from the
 * kernel's page again (to == NULL). Returns where the copy holds the
 * MONOTONIC_RAW structure, NULL where no conversion is known or on restore.
 * Single-threaded use only. */
unsigned char *th_kdata_conv_test_page(unsigned char *to);

/* A consistent copy of the kernel's conversion now: 0; -1 when there is none
 * (no such data, its clock mode not the TSC's now, a shift the records cannot
 * carry); -2 when the kernel was updating it at every try (bounded: it never
 * waits for the kernel; ask again later). */
int th_kdata_conv(struct th_kconv *k);

/* The kernel's reading of clock TH_KC_* (fine ones) at counter c from k, in
 * ns; th_kconv_cycles(k, c) must not be below k->cycle_last. */
uint64_t th_kconv_ns(const struct th_kconv *k, int kc, uint64_t c);

struct th_snap;
/*
 * The record that is k, for counters from c on (the TSC clocksource: from
 * cycle_last; c is not used): Q32 rates mult << (32 - shift), the bases as
 * (ns, fraction) and whole-ns offsets, a window inside TH_MAX_WINDOW_NS, the
 * coarse values, kseq; epoch 0. Its readings equal th_kconv_ns at every
 * counter of the window.
 *
 * pvclock: the kernel's two roundings (of the paravirtual nanoseconds, then of
 * the clock's) make its reading no line; the record is a line below it by at
 * most TH_KPV_BELOW_NS at every counter of the window, anchored at c, whose
 * readings from c to the start of its window (dlo) are its value there, no
 * smaller than the kernel's reading at c (so nothing the kernel returned
 * before c is undercut), and it carries TH_RECF_KPV.
 *
 * 0, or -1 where the kernel's values do not fit one (offsets not whole ns, a
 * rate too large), -2 where c is not past the kernel's update.
 */
int th_kconv_record(const struct th_kconv *k, uint64_t c, struct th_snap *v);
#define TH_KPV_BELOW_NS 6

/* Byte offset of the REALTIME base's seconds, from the MONOTONIC_COARSE
 * base's (the bases are an array indexed by clock id). */
static inline size_t th_kdata_real_off(size_t mono_off)
{
	return mono_off - 16 * (size_t)CLOCK_MONOTONIC_COARSE + 16 * (size_t)CLOCK_REALTIME;
}

/* Find, check and publish the direct read; no-op if already done (a fork
 * child keeps its parent's mapping). Needs the vDSO (th_kclock_init). */
void th_kdata_init(void);

/* Sandwich the direct read between two vDSO reads; on disagreement turn it
 * off. Returns 1 if the direct read is (still) in use. */
int th_kdata_check(void);

/* Forget the direct read (tests, and a disagreement). */
void th_kdata_off(void);

/*
 * CLOCK_MONOTONIC_COARSE in ns from the kernel's data page: 1 and *ns, or 0
 * when there is no direct read or the kernel was updating it (the caller then
 * asks the vDSO). Exactly the vDSO's own reader protocol, one pass:
 */
static inline __attribute__((always_inline)) int th_kdata_mono_coarse(uint64_t *ns)
{
	const uint32_t *sq = __atomic_load_n(&th_kdata.seq, __ATOMIC_RELAXED);
	const uint64_t *b = __atomic_load_n(&th_kdata.mono_coarse, __ATOMIC_RELAXED);
	/* Acquire: the base is loaded after the count. Pairs with the
	 * kernel's write barrier between writing the base and making the
	 * count even again (vdso_write_end): an even count read here means
	 * the base below is at least that update's. */
	uint32_t s = __atomic_load_n(sq, __ATOMIC_ACQUIRE);
	uint64_t sec = __atomic_load_n(&b[0], __ATOMIC_RELAXED);
	uint64_t nsec = __atomic_load_n(&b[1], __ATOMIC_RELAXED);
	/* The base loads complete before the count is read again. Pairs with
	 * the kernel's write barrier between making the count odd and
	 * writing the base (vdso_write_begin): a base written by a later
	 * update implies a changed count below. */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	/* odd (the kernel was writing) or changed: one compare, as the count
	 * only grows (an odd s never equals the count with its low bit
	 * cleared again) */
	if (__builtin_expect(__atomic_load_n(sq, __ATOMIC_RELAXED) != (s & ~1u), 0))
		return 0;
	*ns = sec * 1000000000u + nsec;
	return 1;
}

/*
 * Whether the kernel's coarse MONOTONIC value `m` (ns) is its clock: within
 * half a second of the fine MONOTONIC base of the same update (`sec`, `nsec`
 * in ns << `shift`). Normally the two differ by what a rate change moved the
 * fine base by since the last tick, a fraction of a tick. Linux (6.15 on)
 * keeps the coarse nanoseconds apart from the fine base's (coarse_nsec); an
 * adjtimex rate change whose adjustment makes the fine base's nanoseconds
 * underflow borrows a second from the seconds both share and keeps the
 * coarse nanoseconds, so the kernel's coarse clocks, REALTIME and MONOTONIC,
 * and its time() read a second behind until its next tick.
 * Unsigned arithmetic: one compare for both directions.
 */
#define TH_KCOARSE_SLACK_NS 500000000u
static inline int th_kcoarse_ok(uint64_t m, uint64_t sec, uint64_t nsec, uint32_t shift)
{
	uint64_t f = sec * 1000000000u + (nsec >> shift);
	return f - m + TH_KCOARSE_SLACK_NS <= 2 * (uint64_t)TH_KCOARSE_SLACK_NS;
}

/* The kernel's MONOTONIC_COARSE now, checked against the fine MONOTONIC base
 * of the same update where its clock mode keeps the fine bases (every mode
 * but VDSO_CLOCKMODE_NONE): 1 with *ns when it agrees (th_kcoarse_ok), -1
 * when it is a second off, 0 where this cannot tell (no direct read, another
 * clock mode, the kernel updating): the caller reads the kernel's coarse
 * clock as it would without it. For slow paths. */
int th_kdata_coarse_check(uint64_t *ns);

/* One kernel update's coarse clocks from the page of the direct read, with
 * its count: 1 where they agree with the fine MONOTONIC base of the same
 * update (th_kcoarse_ok), -1 where they are a second off it (*k set either
 * way), 0 where this cannot tell (no direct read, the kernel updating at
 * every try, clock mode none: no fine base to check by). */
struct th_kcoarse {
	uint32_t seq;
	uint64_t mono, real; /* ns */
};
int th_kdata_coarse(struct th_kcoarse *k);

/* REALTIME - MONOTONIC now, exactly: the difference of the kernel's
 * REALTIME_COARSE and MONOTONIC_COARSE bases of one update (the kernel
 * keeps the two clocks a whole number of ns apart, the negated
 * wall_to_monotonic, and updates both coarse bases in every clock mode). 1
 * and *off, or 0 (no direct read, or the kernel updating at every try). */
int th_kdata_real_offset(int64_t *off);
/* The same with the count of the update it is from (even): 1; 0 without a
 * direct read; -1 where the page is read but the kernel was updating at
 * every try. */
int th_kdata_real_offset_seq(int64_t *off, uint32_t *seq);

/* Where, from the MONOTONIC_COARSE base `b` (th_kdata.mono_coarse), the fine
 * MONOTONIC base and the shift lie: the bases are an array indexed by clock
 * id, and the shift is the header's last word, right before the array. */
#define TH_KDATA_MONO_FROM_COARSE (-2 * (CLOCK_MONOTONIC_COARSE - CLOCK_MONOTONIC))
static inline const uint32_t *th_kdata_shift_of(const uint64_t *b)
{
	return (const uint32_t *)(const void *)(b - 2 * CLOCK_MONOTONIC_COARSE) - 1;
}

#endif
