/* Direct reads of the kernel's coarse clock; see kdata.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "kdata.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "counter.h"
#include "kclock.h"
#include "record.h"

/* the private words of "no direct read": an odd count */
static const uint32_t off_seq = 1;
/* Every base before it too, and the shift before those: a reader on the
 * kernel's line loads REALTIME_COARSE and the fine MONOTONIC base with the
 * shift (th__coarse_kv) before it checks the count. */
static const uint64_t off_bases[2 * CLOCK_MONOTONIC_COARSE + 4];
#define off_base (off_bases + 2 * CLOCK_MONOTONIC_COARSE + 2)
struct th_kdata th_kdata = {&off_seq, off_base, NULL};

static int kdata_on(void)
{
	return __atomic_load_n(&th_kdata.seq, __ATOMIC_RELAXED) != &off_seq;
}

#define NS_PER_S 1000000000u

static uint32_t ld32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof v);
	return v;
}

static uint64_t ld64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof v);
	return v;
}

int th_kdata_locate(const unsigned char *page, size_t size, const struct timespec *mono,
		    const struct timespec *real, size_t *seq_off, size_t *mono_off)
{
	/* Where the clock data starts (x86 before 6.13 kept it 128 bytes into
	 * the page), and how long the header before the bases is: seq, mode,
	 * cycle_last, mask, mult, shift (32), plus max_cycles where the kernel
	 * has overflow protection (40). */
	static const size_t starts[] = {0, 128};
	static const size_t headers[] = {40, 32};
	for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++) {
		for (size_t j = 0; j < sizeof headers / sizeof headers[0]; j++) {
			size_t s = starts[i], h = headers[j];
			size_t mo = s + h + 16 * (size_t)CLOCK_MONOTONIC_COARSE;
			size_t ro = s + h + 16 * (size_t)CLOCK_REALTIME_COARSE;
			if (mo + 16 > size)
				continue;
			uint32_t seq = ld32(page + s);
			int32_t mode = (int32_t)ld32(page + s + 4);
			uint64_t mask = ld64(page + s + h - 16);
			uint32_t mult = ld32(page + s + h - 8), shift = ld32(page + s + h - 4);
			if ((seq & 1) || mode < 0 || mode > 15)
				continue;
			if (mask == 0 || (mask & (mask + 1)) != 0 || mult == 0 || shift >= 64)
				continue;
			if (ld64(page + mo) != (uint64_t)mono->tv_sec || ld64(page + mo + 8) != (uint64_t)mono->tv_nsec)
				continue;
			if (ld64(page + ro) != (uint64_t)real->tv_sec || ld64(page + ro + 8) != (uint64_t)real->tv_nsec)
				continue;
			*seq_off = s;
			*mono_off = mo;
			return 0;
		}
	}
	return -1;
}

/* Start of the [vvar] mapping if it is readable, else 0. Streams the maps
 * file through a small buffer (no allocation: attach may run anywhere). */
/* Starts of the readable mappings [vvar] (returned) and [vvar_vclock]
 * (*vclock), 0 where none: one pass over the process's maps. */
static uintptr_t find_vvar(uintptr_t *vclock)
{
	*vclock = 0;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[4096];
	size_t have = 0;
	uintptr_t found = 0;
	for (;;) {
		ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		have += (size_t)r;
		buf[have] = 0;
		char *line = buf, *nl;
		while ((nl = memchr(line, '\n', have - (size_t)(line - buf))) != NULL) {
			*nl = 0;
			size_t n = (size_t)(nl - line);
			int vv = n > 7 && memcmp(nl - 7, " [vvar]", 7) == 0;
			int vc = n > 14 && memcmp(nl - 14, " [vvar_vclock]", 14) == 0;
			if (vv || vc) {
				uintptr_t a = 0;
				const char *p = line;
				for (; *p && *p != '-'; p++) {
					int d = *p >= '0' && *p <= '9'   ? *p - '0'
						: *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
									 : -1;
					if (d < 0)
						break;
					a = a * 16 + (uintptr_t)d;
				}
				/* perms follow the range: "start-end rw.p" */
				const char *perm = strchr(line, ' ');
				if (*p == '-' && perm && perm[1] == 'r') {
					if (vv)
						found = a;
					else
						*vclock = a;
				}
			}
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == sizeof buf - 1)
			have = 0; /* a line longer than the buffer: not ours */
	}
	close(fd);
	return found;
}

static uint64_t ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * NS_PER_S + (uint64_t)ts->tv_nsec;
}

/* Two vDSO reads around a direct one: 1 agrees, 0 disagrees, -1 the kernel
 * was updating every time (no verdict). */
static int sandwich(void)
{
	for (int i = 0; i < 4; i++) {
		struct timespec a, b;
		uint64_t v;
		if (th_kclock_gettime(CLOCK_MONOTONIC_COARSE, &a) != 0)
			return 0;
		int got = th_kdata_mono_coarse(&v);
		if (th_kclock_gettime(CLOCK_MONOTONIC_COARSE, &b) != 0)
			return 0;
		if (got)
			return ts_ns(&a) <= v && v <= ts_ns(&b);
	}
	return -1;
}

void th_kdata_off(void)
{
	__atomic_store_n(&th_kdata.real_sec, NULL, __ATOMIC_RELAXED);
	__atomic_store_n(&th_kdata.seq, &off_seq, __ATOMIC_RELAXED);
	__atomic_store_n(&th_kdata.mono_coarse, off_base, __ATOMIC_RELAXED);
}

/* The coarse bases (MONOTONIC's, REALTIME's), the fine MONOTONIC base with
 * its shift and the clock mode of one kernel update, read from the page of
 * the direct read under its count: 1, or 0 (no direct read, or the kernel
 * updating at each of `tries` passes; never a wait). */
struct coarse_copy {
	uint32_t seq;
	int32_t mode;
	uint64_t mono, real; /* ns */
	uint64_t fsec, fnsec; /* nsec in ns << shift */
	uint32_t shift;
};

static int coarse_copy(struct coarse_copy *c, int tries)
{
	if (!kdata_on())
		return 0;
	const uint32_t *sq = __atomic_load_n(&th_kdata.seq, __ATOMIC_RELAXED);
	const uint64_t *b = __atomic_load_n(&th_kdata.mono_coarse, __ATOMIC_RELAXED);
	for (int t = 0; t < tries; t++) {
		/* Acquire, the fields, fence, count again: as
		 * th_kdata_mono_coarse. The mode is the word after the count in
		 * every layout th_kdata_locate accepts. */
		uint32_t s = __atomic_load_n(sq, __ATOMIC_ACQUIRE);
		c->mode = (int32_t)__atomic_load_n(sq + 1, __ATOMIC_RELAXED);
		uint64_t msec = __atomic_load_n(&b[0], __ATOMIC_RELAXED), mnsec = __atomic_load_n(&b[1], __ATOMIC_RELAXED);
		uint64_t rsec = __atomic_load_n(&b[-2], __ATOMIC_RELAXED), rnsec = __atomic_load_n(&b[-1], __ATOMIC_RELAXED);
		c->fsec = __atomic_load_n(&b[TH_KDATA_MONO_FROM_COARSE], __ATOMIC_RELAXED);
		c->fnsec = __atomic_load_n(&b[TH_KDATA_MONO_FROM_COARSE + 1], __ATOMIC_RELAXED);
		c->shift = __atomic_load_n(th_kdata_shift_of(b), __ATOMIC_RELAXED) & 63;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(sq, __ATOMIC_RELAXED) != (s & ~1u))
			continue;
		c->seq = s;
		c->mono = msec * NS_PER_S + mnsec;
		c->real = rsec * NS_PER_S + rnsec;
		return 1;
	}
	return 0;
}

int th_kdata_coarse(struct th_kcoarse *k)
{
	struct coarse_copy c;
	if (!coarse_copy(&c, 4) || c.mode <= 0 || c.mode > 15)
		return 0;
	k->seq = c.seq;
	k->mono = c.mono;
	k->real = c.real;
	return th_kcoarse_ok(c.mono, c.fsec, c.fnsec, c.shift) ? 1 : -1;
}

int th_kdata_coarse_check(uint64_t *ns)
{
	struct coarse_copy c;
	/* VDSO_CLOCKMODE_NONE (0): the kernel updates the coarse bases only;
	 * every other mode the fine ones too (the time namespace's marker is
	 * far above 15: refused at locate). */
	if (!coarse_copy(&c, 1) || c.mode <= 0 || c.mode > 15)
		return 0;
	*ns = c.mono;
	return th_kcoarse_ok(c.mono, c.fsec, c.fnsec, c.shift) ? 1 : -1;
}

int th_kdata_real_offset(int64_t *off)
{
	uint32_t seq;
	return th_kdata_real_offset_seq(off, &seq) > 0;
}

int th_kdata_real_offset_seq(int64_t *off, uint32_t *seq)
{
	struct coarse_copy c;
	if (!coarse_copy(&c, 4))
		return kdata_on() ? -1 : 0;
	*off = (int64_t)(c.real - c.mono);
	*seq = c.seq;
	return 1;
}

/* Where th_kdata_init found the clock data, for th_kdata_conv_init. */
static const unsigned char *kv_page;
static size_t kv_so, kv_mo;
/* the mappings' starts, for the pvclock page (pv_find): found with [vvar] so
 * that a later windup reads no file */
static uintptr_t kv_vvar, kv_vclock;

void th_kdata_init(void)
{
	if (kdata_on() || TH_VDSO(clock_gettime) == NULL)
		return;
	uintptr_t base = find_vvar(&kv_vclock);
	if (!base)
		return;
	kv_vvar = base;
	const unsigned char *page = (const unsigned char *)base;
	for (int attempt = 0; attempt < 4; attempt++) {
		struct timespec m1, r1, m2;
		size_t so, mo;
		if (th_kclock_gettime(CLOCK_MONOTONIC_COARSE, &m1) != 0 || th_kclock_gettime(CLOCK_REALTIME_COARSE, &r1) != 0)
			return;
		/* The page is read with plain loads while the kernel may write
		 * it: copy it with atomic loads first. The copy is consistent
		 * when the vDSO's reading did not change around it. */
		unsigned char copy[512];
		for (size_t k = 0; k < sizeof copy; k += 8) {
			uint64_t w = __atomic_load_n((const uint64_t *)(const void *)(page + k), __ATOMIC_RELAXED);
			memcpy(copy + k, &w, 8);
		}
		if (th_kclock_gettime(CLOCK_MONOTONIC_COARSE, &m2) != 0)
			return;
		if (ts_ns(&m1) != ts_ns(&m2))
			continue; /* a tick in between: look again */
		if (th_kdata_locate(copy, sizeof copy, &m1, &r1, &so, &mo) != 0)
			return;
		const uint64_t *rs = (const uint64_t *)(const void *)(page + th_kdata_real_off(mo));
		time_t t1 = th_ktime(NULL);
		uint64_t sec = __atomic_load_n(rs, __ATOMIC_RELAXED);
		time_t t2 = th_ktime(NULL);
		if (!((uint64_t)t1 <= sec && sec <= (uint64_t)t2))
			return;
		__atomic_store_n(&th_kdata.mono_coarse, (const uint64_t *)(const void *)(page + mo), __ATOMIC_RELAXED);
		__atomic_store_n(&th_kdata.seq, (const uint32_t *)(const void *)(page + so), __ATOMIC_RELAXED);
		__atomic_store_n(&th_kdata.real_sec, rs, __ATOMIC_RELAXED);
		if (sandwich() != 1)
			th_kdata_off();
		else {
			kv_page = page;
			kv_so = so;
			kv_mo = mo;
		}
		return;
	}
}

/* ---- the kernel's conversion (kdata.h, struct th_kconv) ---- */

/* Set by th_kdata_init before the attach that publishes it; read by
 * writers only. hdr: bytes before the bases (32, or 40 with max_cycles). */
static const unsigned char *kv_hres;
/* The copy of the conversion is x86-64's (the TSC's and pvclock's clock
 * modes) and arm64's (the generic timer's); elsewhere kv_hres stays NULL. */
#if defined(__x86_64__) || defined(__aarch64__)
#define TH_KCONV 1
#else
#define TH_KCONV 0
#endif
#if TH_KCONV
static const unsigned char *kv_raw;
static size_t kv_hdr;
/* vCPU 0's pvclock_vcpu_time_info where the vDSO reads it, once checked */
static const unsigned char *kv_pvti;
/* Looking for that page: 2 x the attempts made, plus 1 while one is made */
static int kv_pv_tries;
#define KV_PV_TRIES 8

#if defined(__x86_64__)
/* The vDSO's clock modes on x86 (VDSO_CLOCKMODE_TSC, _PVCLOCK). */
enum { KMODE_TSC = 1, KMODE_PVCLOCK = 2 };
#define PVCLOCK_TSC_STABLE 1u
/* A clock mode in which the vDSO computes time from the counter itself. */
static int kmode_counter(int32_t m)
{
	return m == KMODE_TSC;
}
/* The TSC is 64 bits wide: the kernel's mask is all ones. */
static int kmask_ok(uint64_t m)
{
	return m == ~(uint64_t)0;
}
#else
/* arm64's (VDSO_CLOCKMODE_ARCHTIMER, _ARCHTIMER_NOCOMPAT: the latter only
 * keeps 32-bit tasks away from the counter), both read from CNTVCT_EL0 by
 * the 64-bit vDSO; no paravirtual clock. */
enum { KMODE_PVCLOCK = -1 };
static int kmode_counter(int32_t m)
{
	return m == 1 || m == 2;
}
/* The generic timer is at least 56 bits wide, and the kernel masks the
 * counter's distance from cycle_last to that width: the same distance as
 * the records' for every counter less than 2^56 past cycle_last, which the
 * kernel's updates keep it (a counter that wrapped lies below the record's
 * window and is never served). */
static int kmask_ok(uint64_t m)
{
	return m >= ((uint64_t)1 << 56) - 1 && (m & (m + 1)) == 0;
}
#endif

static const int kc_id[TH_KC_N] = {CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME, CLOCK_TAI, CLOCK_MONOTONIC_RAW,
				   CLOCK_REALTIME_COARSE, CLOCK_MONOTONIC_COARSE};

static uint32_t kld32(const unsigned char *p)
{
	return __atomic_load_n((const uint32_t *)(const void *)p, __ATOMIC_RELAXED);
}

static uint64_t kld64(const unsigned char *p)
{
	return __atomic_load_n((const uint64_t *)(const void *)p, __ATOMIC_RELAXED);
}

/* One copy under the kernel's count of the structures at hres and raw (and
 * of the pvclock fields at pv): 0; -1 when the kernel's clock is not one a
 * record can be (a hard no); -2 when every try found the kernel between or
 * inside updates (the kernel bumps the two structures' counts one after the
 * other); -3 when its clock mode is pvclock and pv is not known. */
/* One copy of the pvclock fields under their version: 0, or -1 when the
 * hypervisor was updating them (pairs as the vDSO's own reader does). */
#if defined(__x86_64__)
static int pv_copy(const unsigned char *pv, struct th_kconv *k)
{
	/* Acquire: the fields after the version; pairs with the hypervisor's
	 * write of the odd version before it rewrites them. */
	uint32_t v = __atomic_load_n((const uint32_t *)(const void *)pv, __ATOMIC_ACQUIRE);
	k->pv_tsc = kld64(pv + 8);
	k->pv_time = kld64(pv + 16);
	k->pv_mul = kld32(pv + 24);
	uint32_t w = kld32(pv + 28);
	k->pv_shift = (int8_t)(w & 0xff);
	uint32_t flags = (w >> 8) & 0xff;
	/* The loads complete before the version is read again. */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if ((v & 1) || __atomic_load_n((const uint32_t *)(const void *)pv, __ATOMIC_RELAXED) != v)
		return -1;
	/* Without a stable TSC the vDSO itself asks the kernel (no line). */
	if (!(flags & PVCLOCK_TSC_STABLE) || k->pv_mul == 0 || k->pv_shift <= -32 || k->pv_shift >= 32)
		return -2;
	return 0;
}
#else
static int pv_copy(const unsigned char *pv, struct th_kconv *k)
{
	(void)pv, (void)k;
	return -2;
}
#endif

static int conv_copy(const unsigned char *hres, const unsigned char *raw, size_t h, const unsigned char *pv,
		     struct th_kconv *k)
{
	for (int t = 0; t < 8; t++) {
		/* Acquire: the fields after the count; pairs with the kernel's
		 * vdso_write_end, as in th_kdata_mono_coarse. */
		uint32_t s = __atomic_load_n((const uint32_t *)(const void *)hres, __ATOMIC_ACQUIRE);
		if (s & 1)
			continue;
		int32_t mode = (int32_t)kld32(hres + 4), rmode = (int32_t)kld32(raw + 4);
		k->cycle_last = kld64(hres + 8);
		uint64_t rlast = kld64(raw + 8);
		uint64_t mask = kld64(hres + h - 16), rmask = kld64(raw + h - 16);
		k->mult = kld32(hres + h - 8);
		k->shift = kld32(hres + h - 4);
		k->raw_mult = kld32(raw + h - 8);
		k->raw_shift = kld32(raw + h - 4);
		uint32_t rs = kld32(raw);
		/* pvclock's page where the mode names it; what that says is
		 * acted on once the count shows the mode was no torn read */
		int pvr = mode != KMODE_PVCLOCK ? 1 : pv ? pv_copy(pv, k) : -3;
		k->pv = pvr == 0;
		for (int i = 0; i < TH_KC_N; i++) {
			const unsigned char *b = (i == TH_KC_RAW ? raw : hres) + h + 16 * (size_t)kc_id[i];
			k->sec[i] = kld64(b);
			k->nsec[i] = kld64(b + 8);
		}
		/* The loads complete before the count is read again; pairs
		 * with the kernel's vdso_write_begin. */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n((const uint32_t *)(const void *)hres, __ATOMIC_RELAXED) != s)
			continue;
		if (pvr == -1)
			continue; /* the hypervisor rewriting its page */
		if (pvr == -3)
			return -3; /* pvclock, its page not known yet */
		if (pvr == -2)
			return -1; /* no stable TSC: the vDSO asks the kernel */
		/* The TSC's clock mode, or pvclock's where its page is known; a
		 * full 64-bit counter; shifts the records' Q32 rates carry. */
		if ((!kmode_counter(mode) && !k->pv) || rmode != mode || !kmask_ok(mask) || rmask != mask || k->mult == 0 ||
		    k->raw_mult == 0 || k->shift > 32 || k->raw_shift > 32)
			return -1;
		/* both structures of one update */
		if (rs != s || rlast != k->cycle_last)
			continue;
		k->seq = s;
		return 0;
	}
	return -2;
}
#endif

uint64_t th_kconv_cycles(const struct th_kconv *k, uint64_t c)
{
	if (!k->pv)
		return c;
	uint64_t d = c - k->pv_tsc;
	d = k->pv_shift < 0 ? d >> -k->pv_shift : d << k->pv_shift;
	return k->pv_time + (uint64_t)(((unsigned __int128)d * k->pv_mul) >> 32);
}

uint64_t th_kconv_ns(const struct th_kconv *k, int kc, uint64_t c)
{
	int raw = kc == TH_KC_RAW;
	unsigned __int128 x =
		(unsigned __int128)(th_kconv_cycles(k, c) - k->cycle_last) * (raw ? k->raw_mult : k->mult) + k->nsec[kc];
	return k->sec[kc] * NS_PER_S + (uint64_t)(x >> (raw ? k->raw_shift : k->shift));
}

/*
 * A line below the kernel's pvclock reading of one clock (mult m, shift sh,
 * base sec and nsec << sh), anchored at counter c: its value there as (ns,
 * fraction) and its Q32 rate. The paravirtual nanoseconds are taken 2 ns
 * below their exact value at c (the kernel's two floors lose less than 1.5),
 * and every rounding goes down: below the kernel at every counter from c on.
 */
static int kpv_line(const struct th_kconv *k, uint32_t m, uint32_t sh, uint64_t sec, uint64_t nsec, uint64_t c,
		    uint64_t *ns, uint32_t *frac, int64_t *rate)
{
	uint64_t d = c - k->pv_tsc;
	if ((int64_t)d < 0)
		return -2;
	unsigned __int128 p = (unsigned __int128)d * k->pv_mul; /* Q32, before the shift */
	p = k->pv_shift < 0 ? p >> -k->pv_shift : p << k->pv_shift;
	p += (unsigned __int128)k->pv_time << 32;
	unsigned __int128 lq = (unsigned __int128)(k->cycle_last + 2) << 32;
	if (p < lq)
		return -2; /* c not (yet) past the kernel's update */
	p -= lq;
	if (p >> 90)
		return -1; /* years past it: not a conversion to use */
	unsigned __int128 y = (p * m + ((unsigned __int128)nsec << 32)) >> sh;
	*ns = sec * NS_PER_S + (uint64_t)(y >> 32);
	*frac = (uint32_t)y;
	unsigned __int128 r = (unsigned __int128)k->pv_mul * m;
	int e = (int)sh - k->pv_shift;
	r = e >= 0 ? r >> e : r << -e;
	if (r == 0 || r >= ((unsigned __int128)1 << 40))
		return -1;
	*rate = (int64_t)r;
	return 0;
}

/* Counts from c until the line (ns, frac, rate) reaches the whole ns k. */
static int64_t kpv_reach(uint64_t ns, uint32_t frac, int64_t rate, uint64_t k)
{
	if (k <= ns)
		return 0;
	unsigned __int128 need = ((unsigned __int128)(k - ns) << 32) - frac;
	return (int64_t)((need + (uint64_t)rate - 1) / (uint64_t)rate);
}

int th_kconv_record(const struct th_kconv *k, uint64_t c, struct th_snap *v)
{
	if (k->shift > 32 || k->raw_shift > 32)
		return -1;
	uint64_t mm = ((uint64_t)1 << k->shift) - 1, mr = ((uint64_t)1 << k->raw_shift) - 1;
	int64_t rm = (int64_t)((uint64_t)k->mult << (32 - k->shift));
	int64_t rr = (int64_t)((uint64_t)k->raw_mult << (32 - k->raw_shift));
	uint64_t mono = k->sec[TH_KC_MONO] * NS_PER_S + (k->nsec[TH_KC_MONO] >> k->shift);
	uint64_t fm = k->nsec[TH_KC_MONO] & mm;
	int64_t off[3];
	static const int kc[3] = {TH_KC_REAL, TH_KC_BOOT, TH_KC_TAI};
	for (int i = 0; i < 3; i++) {
		/* whole ns apart, so every clock shares MONOTONIC's fraction */
		if ((k->nsec[kc[i]] & mm) != fm)
			return -1;
		off[i] = (int64_t)(k->sec[kc[i]] * NS_PER_S + (k->nsec[kc[i]] >> k->shift) - mono);
	}
	uint64_t cm = k->sec[TH_KC_MONO_COARSE] * NS_PER_S + k->nsec[TH_KC_MONO_COARSE];
	uint64_t cr = k->sec[TH_KC_REAL_COARSE] * NS_PER_S + k->nsec[TH_KC_REAL_COARSE];
	if ((int64_t)(cr - cm) != off[0] || rm <= 0 || rr <= 0 || rm >= ((int64_t)1 << 40) || rr >= ((int64_t)1 << 40))
		return -1;
	if (k->pv) {
		uint64_t mn, rn;
		uint32_t mf, rf;
		int64_t mq, rq;
		int e = kpv_line(k, k->mult, k->shift, k->sec[TH_KC_MONO], k->nsec[TH_KC_MONO], c, &mn, &mf, &mq);
		if (e == 0)
			e = kpv_line(k, k->raw_mult, k->raw_shift, k->sec[TH_KC_RAW], k->nsec[TH_KC_RAW], c, &rn, &rf,
				     &rq);
		if (e != 0)
			return e;
		memset(v, 0, sizeof *v);
		v->kind = TH_REC_LINE;
		v->flags = TH_RECF_KPV;
		v->anchor = c;
		v->ns[TH_MONO] = mn;
		v->frac[TH_MONO] = mf;
		v->ns[TH_RAW] = rn;
		v->frac[TH_RAW] = rf;
		v->lo[TH_MONO] = v->hi[TH_MONO] = mq;
		v->lo[TH_RAW] = v->hi[TH_RAW] = rq;
		/* Counters from c up to where both lines have reached the
		 * kernel's readings at c read the lines' values there. */
		int64_t a = kpv_reach(mn, mf, mq, th_kconv_ns(k, TH_KC_MONO, c));
		int64_t b = kpv_reach(rn, rf, rq, th_kconv_ns(k, TH_KC_RAW, c));
		v->dmin = 0;
		v->dlo = a > b ? a : b;
		v->dhi = v->ddue = (int64_t)(((__int128)TH_MAX_WINDOW_NS << 32) / (mq > rq ? mq : rq));
		if (v->dlo >= v->ddue)
			return -1;
	} else {
		memset(v, 0, sizeof *v);
		v->kind = TH_REC_LINE;
		v->anchor = k->cycle_last;
		v->ns[TH_MONO] = mono;
		v->frac[TH_MONO] = (uint32_t)(fm << (32 - k->shift));
		v->ns[TH_RAW] = k->sec[TH_KC_RAW] * NS_PER_S + (k->nsec[TH_KC_RAW] >> k->raw_shift);
		v->frac[TH_RAW] = (uint32_t)((k->nsec[TH_KC_RAW] & mr) << (32 - k->raw_shift));
		v->lo[TH_MONO] = v->hi[TH_MONO] = rm;
		v->lo[TH_RAW] = v->hi[TH_RAW] = rr;
		/* Counters below the kernel's cycle_last are the kernel's to
		 * serve; the window keeps d * rate inside TH_MAX_WINDOW_NS. */
		v->dlo = v->dmin = 0;
		v->dhi = v->ddue = (int64_t)(((__int128)TH_MAX_WINDOW_NS << 32) / (rm > rr ? rm : rr));
	}
	v->off_real = off[0];
	v->off_boot = off[1];
	v->off_tai = off[2];
	v->coarse = v->tick = cm;
	v->kseq = TH_KSEQ_LINE(k->seq);
	return 0;
}

#if TH_KCONV
/* Every fine clock computed from a copy lies between two vDSO readings. */
static int conv_agrees(const unsigned char *hres, const unsigned char *raw, size_t h, const unsigned char *pv)
{
	static const int fine[] = {TH_KC_REAL, TH_KC_MONO, TH_KC_BOOT, TH_KC_TAI, TH_KC_RAW};
	for (size_t i = 0; i < sizeof fine / sizeof *fine; i++) {
		int good = 0;
		for (int t = 0; t < 8 && good < 3; t++) {
			struct th_kconv k;
			struct timespec a, b;
			if (th_kclock_gettime(kc_id[fine[i]], &a) != 0 || conv_copy(hres, raw, h, pv, &k) != 0)
				return 0;
			uint64_t c = th_counter_ordered();
			if (th_kconv_cycles(&k, c) < k.cycle_last || th_kclock_gettime(kc_id[fine[i]], &b) != 0)
				return 0;
			uint64_t v = th_kconv_ns(&k, fine[i], c);
			if (v < ts_ns(&a) || v > ts_ns(&b))
				return 0;
			good++;
		}
		if (good < 3)
			return 0;
	}
	return 1;
}


/*
 * vCPU 0's pvclock_vcpu_time_info, where the vDSO reads it: the first page of
 * [vvar_vclock] (Linux 6.13 on), else the page after the first of [vvar].
 * Called only while the kernel's clock mode is pvclock (the kernel maps the
 * page once that mode has been used; before, a read of it is SIGBUS). A
 * candidate must look like one (even version, a stable TSC, a multiplier);
 * conv_agrees then checks the readings it gives.
 */
static const unsigned char *pv_find(void)
{
	uintptr_t a = kv_vclock;
	if (!a) {
		/* Before Linux 6.13 the page sits in [vvar]; where a kernel
		 * lays that mapping out otherwise, the page may be one that
		 * faults. The kernel reads it first (a write to a pipe: a
		 * fault there is EFAULT, not a signal). */
		int fd[2];
		if (!kv_vvar || pipe2(fd, O_CLOEXEC) != 0)
			return NULL;
		a = kv_vvar + 4096;
		ssize_t w = write(fd[1], (const void *)a, 32);
		close(fd[0]);
		close(fd[1]);
		if (w != 32)
			return NULL;
	}
	const unsigned char *pv = (const unsigned char *)a;
	struct th_kconv k;
	for (int t = 0; t < 4; t++) {
		int r = pv_copy(pv, &k);
		if (r == 0)
			return pv;
		if (r == -2)
			return NULL;
	}
	return NULL;
}
#endif

/* The structure of the MONOTONIC_RAW clock follows the one at hres: its size
 * is the header, twelve bases and, before Linux 6.13, 16 bytes more. */
static void conv_find(const unsigned char *page, size_t so, size_t mo)
{
#if TH_KCONV
	size_t h = mo - so - 16 * (size_t)CLOCK_MONOTONIC_COARSE;
	const unsigned char *hres = page + so;
	static const size_t tails[] = {0, 16};
	for (size_t i = 0; i < sizeof tails / sizeof *tails; i++) {
		const unsigned char *raw = hres + h + 16 * 12 + tails[i];
		if ((size_t)(raw - page) + h + 16 * 12 > 4096)
			continue;
		struct th_kconv k;
		const unsigned char *pv = NULL;
		int r = conv_copy(hres, raw, h, NULL, &k);
		if (r == -3 && (pv = pv_find()) != NULL)
			r = conv_copy(hres, raw, h, pv, &k);
		if (r == 0 && conv_agrees(hres, raw, h, pv)) {
			kv_pvti = pv;
			kv_raw = raw;
			kv_hdr = h;
			/* Release: the two fields above are visible to a thread
			 * whose acquire load (th_kdata_conv) sees kv_hres. */
			__atomic_store_n(&kv_hres, hres, __ATOMIC_RELEASE);
			return;
		}
	}
#else
	(void)page, (void)so, (void)mo;
#endif
}

void th_kdata_conv_init(void)
{
	if (kv_page && !__atomic_load_n(&kv_hres, __ATOMIC_RELAXED) && kdata_on())
		conv_find(kv_page, kv_so, kv_mo);
}

int th_kdata_conv_known(void)
{
	return __atomic_load_n(&kv_hres, __ATOMIC_RELAXED) != NULL && kdata_on();
}

int th_kdata_conv(struct th_kconv *k)
{
#if !TH_KCONV
	(void)k;
	return -1;
#else
	/* Acquire: pairs with conv_find's release store; another thread's
	 * first attach may be finding the layout while this one reads. */
	const unsigned char *hres = __atomic_load_n(&kv_hres, __ATOMIC_ACQUIRE);
	if (!hres || !kdata_on())
		return -1;
	const unsigned char *pv = __atomic_load_n(&kv_pvti, __ATOMIC_ACQUIRE);
	int r = conv_copy(hres, kv_raw, kv_hdr, pv, k);
	if (r != -3)
		return r;
	/* Switched to kvm-clock since the layout was found: one thread looks
	 * for its page, checks it as conv_find does and publishes it, a few
	 * times at most (a check that met the kernel updating fails). Meanwhile
	 * another thread's conversion is -2, as while the kernel updates: its
	 * clock serves, and the records stay on its line. */
	int st = __atomic_load_n(&kv_pv_tries, __ATOMIC_RELAXED);
	if (st & 1)
		return -2;
	/* Acquire: pairs with the release store below (a page another thread
	 * published before it counted its attempt). */
	pv = __atomic_load_n(&kv_pvti, __ATOMIC_ACQUIRE);
	if (pv)
		return conv_copy(hres, kv_raw, kv_hdr, pv, k);
	if (st >= 2 * KV_PV_TRIES)
		return -1;
	if (!__atomic_compare_exchange_n(&kv_pv_tries, &st, st + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return -2;
	pv = pv_find();
	if (pv && conv_agrees(hres, kv_raw, kv_hdr, pv)) {
		/* Release: pairs with the acquire loads of kv_pvti. */
		__atomic_store_n(&kv_pvti, pv, __ATOMIC_RELEASE);
		r = conv_copy(hres, kv_raw, kv_hdr, pv, k);
	}
	/* Release: the page's store above comes before the attempt's end. */
	__atomic_store_n(&kv_pv_tries, st + 2, __ATOMIC_RELEASE);
	return r == 0 ? 0 : r == -3 ? -1 : r;
#endif
}

unsigned char *th_kdata_conv_test_page(unsigned char *to)
{
#if TH_KCONV
	static const unsigned char *hres0, *raw0;
	if (!hres0) {
		hres0 = __atomic_load_n(&kv_hres, __ATOMIC_ACQUIRE);
		raw0 = kv_raw;
	}
	if (!hres0 || !kv_page)
		return NULL;
	if (!to) {
		kv_raw = raw0;
		__atomic_store_n(&kv_hres, hres0, __ATOMIC_RELEASE);
		return NULL;
	}
	kv_raw = to + (raw0 - kv_page);
	__atomic_store_n(&kv_hres, to + (hres0 - kv_page), __ATOMIC_RELEASE);
	return to + (raw0 - kv_page);
#else
	(void)to;
	return NULL;
#endif
}

int th_kdata_check(void)
{
	if (!kdata_on())
		return 0;
	const uint64_t *rs = __atomic_load_n(&th_kdata.real_sec, __ATOMIC_RELAXED);
	time_t t1 = th_ktime(NULL);
	uint64_t sec = rs ? __atomic_load_n(rs, __ATOMIC_RELAXED) : 0;
	time_t t2 = th_ktime(NULL);
	int sw = sandwich();
	if (sw < 0) {
		/* No verdict: the count was odd or changed at every try. A
		 * time namespace's page keeps it odd for good and carries the
		 * namespace's clock mode (far above 15); a page of a plausible
		 * mode was only being updated at each try (this thread
		 * preempted across updates): checked again at the next windup. */
		const uint32_t *sq = __atomic_load_n(&th_kdata.seq, __ATOMIC_RELAXED);
		int32_t mode = (int32_t)__atomic_load_n(sq + 1, __ATOMIC_RELAXED);
		if (mode >= 0 && mode <= 15)
			sw = 1;
	}
	if (sw != 1 || !rs || sec < (uint64_t)t1 || sec > (uint64_t)t2) {
		th_kdata_off();
		return 0;
	}
	return 1;
}
