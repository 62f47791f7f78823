/*
 * The direct read of the kernel's coarse clock (src/counter/kdata.h).
 *
 *   layouts   th_kdata_locate on hand-built pages: both known places of the
 *             clock data are found; a page with an odd count, the time
 *             namespace marker, an implausible mask or shift, or bases that
 *             differ from the vDSO's readings by a nanosecond is refused.
 *   live      on this machine: where the kernel maps [vvar] and this process
 *             is not in another time namespace, the direct read must be found
 *             (x86-64 and arm64 kernels since 5.3 lay the page out so); every
 *             direct reading lies between two vDSO readings, across ticks, and
 *             the count it reads is seen to move; the REALTIME offset read
 *             from it (th_kdata_real_offset) is the coarse clocks' difference
 *             and lies in a bracket of fine readings.
 *             Run as `test_kdata timens` in another time namespace, the
 *             direct read must be off (page 0 is the namespace's).
 *   setns     a process that attached, then moved itself into a new time
 *             namespace (setns: its page 0 becomes the namespace's, whose
 *             count is odd and whose REALTIME "base" is an offset of 0):
 *             th_time(), inline and library, still equals the kernel's
 *             time(), and the direct coarse read reports "updating" (root);
 *             the same for a fresh process that attached without any fine
 *             REALTIME reading (no G3 second yet) and calls th_time() first
 *             thing after setns (`test_kdata setns-fresh`, root).
 *   off       th_kdata_off: reads report "no direct read" and coarse clocks
 *             stay correct through the vDSO.
 *   record    th_kconv_record on random conversions: the record's readings,
 *             by the fast path's formula and by the slow path's, equal the
 *             kernel's formula (th_kconv_ns) to the nanosecond at every
 *             counter of its window; conversions a record cannot be are
 *             refused.
 *   exact     on this machine, where the records are the kernel's own
 *             conversion (th_status line "kernel"): every fine reading lies
 *             between two readings of the kernel, with no slack at all; on
 *             kvm-clock (line "kernel-pvclock") at most TH_KPV_BELOW_NS below.
 *   pvrecord  th_kconv_record on random pvclock conversions: at every counter
 *             of the window each clock's line is below the kernel's two-stage
 *             reading by at most TH_KPV_BELOW_NS, never above it; the clamp
 *             at the anchor is no smaller than the kernel's reading there.
 *   glitch    the kernel's coarse clocks a second off its fine line (what an
 *             adjtimex rate change does to them on Linux 6.15 and later when
 *             it borrows a second: kdata.h, th_kcoarse_ok): th_kcoarse_ok on
 *             values either side of the bound; and, where the kernel's page
 *             is read directly (on the kernel's line or timehands' own), a
 *             copy of the kernel's data page with its coarse bases a second
 *             behind, then ahead, read in its place: the coarse readings
 *             never go back (G2) nor above a later fine reading (G4), and
 *             th_kdata_coarse_check (the slow paths' check) refuses it.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attach/proc.h"
#include "check.h"
#include "counter/kclock.h"
#include "counter/kdata.h"
#include "counter/trust.h"
#include "core/record.h"
#include "timehands.h"

static void put32(unsigned char *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void put64(unsigned char *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

/* A page in the generic vDSO layout: clock data at `start`, `hdr` bytes of
 * header before the per-clock bases. */
static void build(unsigned char *page, size_t start, size_t hdr, const struct timespec *mono,
		  const struct timespec *real)
{
	memset(page, 0xa5, 4096);
	unsigned char *c = page + start;
	put32(c, 1234);             /* seq, even */
	put32(c + 4, 2);            /* clock mode: pvclock */
	put64(c + 8, 987654321);    /* cycle_last */
	if (hdr == 40)
		put64(c + 16, 1u << 30); /* max_cycles */
	put64(c + hdr - 16, ~0ULL); /* mask */
	put32(c + hdr - 8, 8388608); /* mult */
	put32(c + hdr - 4, 23);     /* shift */
	for (int i = 0; i < 12; i++) {
		put64(c + hdr + 16 * (size_t)i, 1000 + (uint64_t)i);
		put64(c + hdr + 16 * (size_t)i + 8, 7 + (uint64_t)i);
	}
	put64(c + hdr + 16 * CLOCK_MONOTONIC_COARSE, (uint64_t)mono->tv_sec);
	put64(c + hdr + 16 * CLOCK_MONOTONIC_COARSE + 8, (uint64_t)mono->tv_nsec);
	put64(c + hdr + 16 * CLOCK_REALTIME_COARSE, (uint64_t)real->tv_sec);
	put64(c + hdr + 16 * CLOCK_REALTIME_COARSE + 8, (uint64_t)real->tv_nsec);
}

static void layouts(void)
{
	static unsigned char page[4096];
	const struct timespec m = {86400, 123456789}, r = {1790000000, 987654321};
	const size_t starts[] = {0, 128}, hdrs[] = {32, 40};
	for (int i = 0; i < 2; i++) {
		for (int j = 0; j < 2; j++) {
			size_t so = 1, mo = 1, s = starts[i], h = hdrs[j];
			build(page, s, h, &m, &r);
			CHECK(th_kdata_locate(page, sizeof page, &m, &r, &so, &mo) == 0, "start %zu header %zu", s, h);
			CHECK(so == s && mo == s + h + 16 * CLOCK_MONOTONIC_COARSE, "start %zu header %zu: %zu %zu", s,
			      h, so, mo);
			struct timespec m1 = m, r1 = r;
			m1.tv_nsec++;
			CHECK(th_kdata_locate(page, sizeof page, &m1, &r, &so, &mo) != 0, "mono off by 1 ns");
			r1.tv_sec--;
			CHECK(th_kdata_locate(page, sizeof page, &m, &r1, &so, &mo) != 0, "realtime off by 1 s");
			/* each implausible header field alone */
			struct {
				size_t off;
				int wide;
				uint64_t v;
				const char *what;
			} bad[] = {
				{0, 0, 1235, "odd count"},
				{4, 0, INT_MAX, "time namespace marker"},
				{4, 0, 99, "unknown clock mode"},
				{h - 16, 1, 0x1234, "mask not 2^k-1"},
				{h - 16, 1, 0, "zero mask"},
				{h - 8, 0, 0, "zero mult"},
				{h - 4, 0, 64, "shift 64"},
			};
			for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
				build(page, s, h, &m, &r);
				if (bad[k].wide)
					put64(page + s + bad[k].off, bad[k].v);
				else
					put32(page + s + bad[k].off, (uint32_t)bad[k].v);
				CHECK(th_kdata_locate(page, sizeof page, &m, &r, &so, &mo) != 0,
				      "start %zu header %zu: accepted with %s", s, h, bad[k].what);
			}
		}
	}
	/* clock data anywhere else is not looked for */
	build(page, 64, 40, &m, &r);
	size_t so, mo;
	CHECK(th_kdata_locate(page, sizeof page, &m, &r, &so, &mo) != 0, "clock data at 64 accepted");
	/* a page too short for the bases */
	build(page, 0, 40, &m, &r);
	CHECK(th_kdata_locate(page, 100, &m, &r, &so, &mo) != 0, "truncated page accepted");
}

/* Start of [vvar] (0 if none) and whether its page 0 is a time namespace's. */
static uintptr_t vvar_start(int *timens)
{
	*timens = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return 0;
	char line[512];
	uintptr_t a = 0;
	while (fgets(line, sizeof line, f)) {
		if (strstr(line, " [vvar]\n")) {
			unsigned long lo;
			if (sscanf(line, "%lx-", &lo) == 1)
				a = (uintptr_t)lo;
		}
	}
	fclose(f);
	if (a) {
		const unsigned char *p = (const unsigned char *)a;
		for (size_t s = 0; s <= 128; s += 128) {
			int32_t mode;
			memcpy(&mode, p + s + 4, 4);
			if (mode == INT_MAX)
				*timens = 1;
		}
	}
	return a;
}

static uint64_t vdso_coarse(void)
{
	struct timespec t;
	CHECK(th_kclock_gettime(CLOCK_MONOTONIC_COARSE, &t) == 0, "vDSO coarse");
	return (uint64_t)ts_to_ns(&t);
}

static void live(int in_timens)
{
	int timens;
	uintptr_t vv = vvar_start(&timens);
	th_kclock_init();
	th_kdata_init();
	int on = th_kdata_check();
	printf("live: [vvar] %s%s, direct read %s\n", vv ? "mapped" : "absent", timens ? " (time namespace)" : "",
	       on ? "on" : "off");
#if defined(__x86_64__) || defined(__aarch64__)
	/* (where the vDSO does not read the counter, the kernel leaves the
	 * conversion the layout is found by unwritten) */
	if (vv && !timens && TH_VDSO(clock_gettime) && th_vdso_reads_counter() == 1)
		CHECK(on, "the kernel maps [vvar] but its clock data was not found");
#endif
	if (in_timens)
		CHECK(timens && !on, "run in a time namespace: page 0 %s, direct read %s",
		      timens ? "the namespace's" : "not the namespace's", on ? "on" : "off");
	struct th_status st;
	th_status(&st, sizeof st);
	const char *want = on ? "data page" : TH_VDSO(clock_gettime) ? "vdso" : "system call";
	CHECK(strcmp(st.kernel_tick, want) == 0, "status says the kernel tick is read from %s, not %s",
	      st.kernel_tick, want);
	if (!on)
		return;
	CHECK((uintptr_t)th_kdata.seq >= vv && (uintptr_t)th_kdata.seq < vv + 4096, "count outside [vvar] page 0");
	/* sandwiches for ~30 ms (several kernel ticks) */
	uint32_t seq0 = __atomic_load_n(th_kdata.seq, __ATOMIC_RELAXED);
	uint64_t first = 0, last = 0, n = 0, misses = 0;
	int64_t end = raw_now_ns() + 30000000;
	while (raw_now_ns() < end || n < 100000) {
		uint64_t a = vdso_coarse(), v;
		int got = th_kdata_mono_coarse(&v);
		uint64_t b = vdso_coarse();
		if (!got) {
			misses++;
			continue;
		}
		CHECK(a <= v && v <= b, "direct %llu not within [%llu, %llu]", (unsigned long long)v,
		      (unsigned long long)a, (unsigned long long)b);
		if (!first)
			first = v;
		last = v;
		n++;
	}
	uint32_t seq1 = __atomic_load_n(th_kdata.seq, __ATOMIC_RELAXED);
	CHECK(last > first, "the direct reading did not advance over 30 ms");
	CHECK(seq1 != seq0 && (seq1 - seq0) % 2 == 0, "count %u -> %u", seq0, seq1);
	CHECK(misses * 100 < n, "%llu of %llu direct reads found the kernel updating", (unsigned long long)misses,
	      (unsigned long long)n);
	printf("live: %llu sandwiches, %llu retries to the vDSO, count +%u\n", (unsigned long long)n,
	       (unsigned long long)misses, seq1 - seq0);
	/* The exact REALTIME offset: the vDSO's coarse REALTIME minus its
	 * coarse MONOTONIC of one update (the same coarse MONOTONIC before and
	 * after), and inside a bracket of fine vDSO readings. */
	int exact = 0, inside = 0;
	for (int i = 0; i < 1000; i++) {
		struct timespec m1, r, m2, fm1, fr, fm2;
		int64_t off;
		th_kclock_gettime(CLOCK_MONOTONIC_COARSE, &m1);
		th_kclock_gettime(CLOCK_REALTIME_COARSE, &r);
		int got = th_kdata_real_offset(&off);
		th_kclock_gettime(CLOCK_MONOTONIC_COARSE, &m2);
		if (got && ts_to_ns(&m1) == ts_to_ns(&m2)) {
			CHECK(off == ts_to_ns(&r) - ts_to_ns(&m1), "REALTIME offset %lld, the coarse clocks say %lld",
			      (long long)off, (long long)(ts_to_ns(&r) - ts_to_ns(&m1)));
			exact++;
		}
		th_kclock_gettime(CLOCK_MONOTONIC, &fm1);
		th_kclock_gettime(CLOCK_REALTIME, &fr);
		got = th_kdata_real_offset(&off);
		th_kclock_gettime(CLOCK_MONOTONIC, &fm2);
		if (got) {
			int64_t lo = ts_to_ns(&fr) - ts_to_ns(&fm2), hi = ts_to_ns(&fr) - ts_to_ns(&fm1);
			CHECK(off >= lo && off <= hi, "REALTIME offset %lld outside its bracket [%lld, %lld]",
			      (long long)off, (long long)lo, (long long)hi);
			inside++;
		}
		if (check_failures)
			break;
	}
	CHECK(exact > 900 && inside > 900, "REALTIME offset read %d and %d times of 1000", exact, inside);
	printf("live: the REALTIME offset equal to the coarse clocks' %d times, inside a fine bracket %d times\n",
	       exact, inside);
}

/* A child's exit: 0 passes, 77 is "not run here" (`why`), anything else fails. */
static void child_verdict(pid_t pid, const char *name, const char *why)
{
	if (pid < 0)
		return;
	int st = 0;
	waitpid(pid, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		printf("%s: %s\n", name, why);
		return;
	}
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s child status %#x", name, st);
}

/* Moves this (single-threaded) process into a new time namespace with a
 * MONOTONIC offset and checks that its page 0 is now the namespace's: 0,
 * or 77 where time namespaces are refused here. */
static int join_new_timens(void)
{
	if (unshare(CLONE_NEWTIME) != 0)
		return 77;
	int fd = open("/proc/self/timens_offsets", O_WRONLY);
	if (fd < 0 || write(fd, "monotonic 86400 0", 17) != 17)
		return 77;
	close(fd);
	fd = open("/proc/self/ns/time_for_children", O_RDONLY);
	if (fd < 0 || setns(fd, CLONE_NEWTIME) != 0)
		return 77;
	close(fd);
	int timens;
	vvar_start(&timens);
	CHECK(timens, "after setns page 0 is not the namespace's");
	return 0;
}

/* The seconds of a fine REALTIME reading of the kernel, rounded up where
 * G1's microsecond reaches the next second. */
static time_t kernel_real_sec_up(void)
{
	struct timespec f;
	clock_gettime(CLOCK_REALTIME, &f);
	return f.tv_nsec + 1000 >= 1000000000 ? f.tv_sec + 1 : f.tv_sec;
}

/*
 * A fresh process that attached without any fine REALTIME reading (its G3
 * floor holds no second yet), then joined a new time namespace, whose page
 * now lies where the direct time() read looks: its REALTIME slot reads 0.
 * The first th_time() calls, library and inline, before anything turns the
 * direct read off, must still be the kernel's second (run as
 * `test_kdata setns-fresh`, root).
 */
static int setns_fresh_child(void)
{
	struct timespec m;
	th_clock_gettime(CLOCK_MONOTONIC, &m); /* attach; no REALTIME reading */
	int direct = th_kdata_mono_coarse(&(uint64_t){0});
	int r = join_new_timens();
	if (r != 0)
		return r;
	time_t a = th_ktime(NULL);
	time_t x = (th_time)(NULL); /* the library's */
	time_t y = th_time(NULL);   /* inline: its first call goes through the library */
	time_t z = th_time(NULL);   /* inline, from memory */
	time_t b = kernel_real_sec_up();
	printf("setns fresh: direct read %s before setns; th_time %lld %lld %lld in [%lld, %lld]\n",
	       direct ? "on" : "off", (long long)x, (long long)y, (long long)z, (long long)a, (long long)b);
	CHECK(a <= x && x <= y && y <= z && z <= b, "th_time %lld/%lld/%lld outside [%lld, %lld]", (long long)x,
	      (long long)y, (long long)z, (long long)a, (long long)b);
	return check_done("setns fresh") ? 1 : 0;
}

static int setns_child(void)
{
	time_t t0 = th_time(NULL); /* attach, and a fine read sets the G3 floor */
	(void)t0;
	int r = join_new_timens();
	if (r != 0)
		return r;
	uint64_t v;
	CHECK(!th_kdata_mono_coarse(&v), "direct coarse read from a time namespace's page");
	struct th_status st;
	th_status(&st, sizeof st);
	CHECK(strcmp(st.kernel_tick, "vdso") == 0, "after setns status says %s", st.kernel_tick);
	int64_t end = raw_now_ns() + 1500000000; /* across a second boundary */
	while (raw_now_ns() < end) {
		/* Not below the kernel's time() before it, nor above the second
		 * of the kernel's fine REALTIME after it (G4; the kernel's
		 * time() after it may still show the older second: th_time()
		 * holds a second a fine reading of this process has returned,
		 * G3, for up to the kernel's tick before its time() shows it). */
		time_t a = th_ktime(NULL);
		time_t x = th_time(NULL);
		time_t y;
		th_time(&y);
		time_t b = kernel_real_sec_up();
		CHECK(a <= x && x <= y && y <= b, "th_time %lld/%lld outside [%lld, %lld]", (long long)x, (long long)y,
		      (long long)a, (long long)b);
		if (check_failures)
			break;
	}
	r = check_done("setns") ? 1 : 0;
	fflush(stdout);
	return r;
}

static void setns_case(void)
{
	if (getuid() != 0) {
		printf("setns: not root, not run\n");
		return;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		_exit(setns_child());
	child_verdict(pid, "setns", "no time namespaces here");
}

static void off(void)
{
	th_kdata_off();
	uint64_t v;
	CHECK(!th_kdata_mono_coarse(&v), "direct read after off");
	CHECK(!th_kdata_check(), "check after off");
	struct th_status st;
	th_status(&st, sizeof st);
	CHECK(strcmp(st.kernel_tick, TH_VDSO(clock_gettime) ? "vdso" : "system call") == 0, "status after off: %s",
	      st.kernel_tick);
	/* coarse clocks through the vDSO: still within the kernel's */
	struct timespec res;
	th_kclock_getres(CLOCK_MONOTONIC_COARSE, &res);
	for (int i = 0; i < 10000; i++) {
		struct timespec a, t, b;
		th_kclock_gettime(CLOCK_MONOTONIC_COARSE, &a);
		th_clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
		th_kclock_gettime(CLOCK_MONOTONIC, &b);
		CHECK(ts_to_ns(&t) <= ts_to_ns(&b), "coarse %lld above a later fine %lld", (long long)ts_to_ns(&t),
		      (long long)ts_to_ns(&b));
		/* no more behind than the kernel's own coarse clock, plus a
		 * tick (the record of the tick before) */
		CHECK(ts_to_ns(&t) >= ts_to_ns(&a) - 2 * ts_to_ns(&res), "coarse %lld ns behind the kernel's",
		      (long long)(ts_to_ns(&a) - ts_to_ns(&t)));
	}
}


/* A conversion as the kernel publishes one: bases of whole-ns offsets from
 * MONOTONIC's, normalised nsec (< 1e9 << shift). */
static void random_conv(struct th_kconv *k)
{
	memset(k, 0, sizeof *k);
	k->seq = (uint32_t)rnd() & ~1u;
	k->cycle_last = rnd() >> 1;
	k->shift = 1 + (uint32_t)(rnd() % 32);
	k->raw_shift = 1 + (uint32_t)(rnd() % 32);
	/* 0.2 to 2 ns per count */
	double npc = 0.2 + (double)(rnd() % 1800) / 1000.0;
	k->mult = (uint32_t)(npc * (double)((uint64_t)1 << k->shift));
	k->raw_mult = (uint32_t)(npc * (1 + (double)(rnd() % 100) * 1e-6) * (double)((uint64_t)1 << k->raw_shift));
	if (k->mult == 0)
		k->mult = 1;
	if (k->raw_mult == 0)
		k->raw_mult = 1;
	uint64_t one = 1000000000ull << k->shift;
	uint64_t mono_s = 1000 + rnd() % 10000000, mono_n = rnd() % one;
	k->sec[TH_KC_MONO] = mono_s;
	k->nsec[TH_KC_MONO] = mono_n;
	uint64_t frac = mono_n & (((uint64_t)1 << k->shift) - 1);
	int64_t offs[3] = {(int64_t)(1700000000ull * 1000000000ull + rnd() % 1000000000000ull),
			   (int64_t)(rnd() % 100000000000ull), 0};
	offs[2] = offs[0] + 37000000000LL;
	static const int kc[3] = {TH_KC_REAL, TH_KC_BOOT, TH_KC_TAI};
	uint64_t mono_ns = mono_s * 1000000000ull + (mono_n >> k->shift);
	for (int i = 0; i < 3; i++) {
		uint64_t t = mono_ns + (uint64_t)offs[i];
		k->sec[kc[i]] = t / 1000000000ull;
		k->nsec[kc[i]] = ((t % 1000000000ull) << k->shift) | frac;
	}
	k->sec[TH_KC_RAW] = 500 + rnd() % 10000000;
	k->nsec[TH_KC_RAW] = rnd() % (1000000000ull << k->raw_shift);
	uint64_t cm = mono_ns - rnd() % 4000000, cr = cm + (uint64_t)offs[0];
	k->sec[TH_KC_MONO_COARSE] = cm / 1000000000ull;
	k->nsec[TH_KC_MONO_COARSE] = cm % 1000000000ull;
	k->sec[TH_KC_REAL_COARSE] = cr / 1000000000ull;
	k->nsec[TH_KC_REAL_COARSE] = cr % 1000000000ull;
}

static void record(void)
{
	static struct th_timeline tl;
	static const int kc_of_ck[TH_NCLOCKS] = {TH_KC_MONO, TH_KC_REAL, TH_KC_BOOT, TH_KC_TAI, TH_KC_RAW};
	long checked = 0;
	for (int i = 0; i < 2000; i++) {
		struct th_kconv k;
		struct th_snap v;
		random_conv(&k);
		int ok = th_kconv_record(&k, 0, &v) == 0;
		CHECK(ok, "conversion %d refused (shift %u, mult %u)", i, k.shift, k.mult);
		if (!ok)
			continue;
		CHECK(v.kseq == TH_KSEQ_LINE(k.seq) && v.anchor == k.cycle_last && v.dlo == 0,
		      "kseq, anchor, window");
		th_commit_force(&tl, &v);
		struct th_snap s;
		memset(&s, 0, sizeof s);
		unsigned r = 0;
		CHECK(th_snapshot(&tl, &s, &r) == 0 && s.kseq == v.kseq, "snapshot");
		uint64_t cur = atomic_load(&tl.cur);
		struct th_rec *rec = &tl.ring[TH_CUR_SLOT(cur) % TH_RING];
		for (int j = 0; j < 20; j++) {
			int64_t d = j == 0 ? 0 : j == 1 ? v.dhi : (int64_t)(rnd() % (uint64_t)(v.dhi + 1));
			uint64_t c = k.cycle_last + (uint64_t)d;
			for (int ck = 0; ck < TH_NCLOCKS; ck++) {
				uint64_t want = th_kconv_ns(&k, kc_of_ck[ck], c);
				int line = ck == TH_CK_RAW ? TH_RAW : TH_MONO;
				int64_t off = ck == TH_CK_REAL ? s.off_real : ck == TH_CK_BOOT ? s.off_boot
									: ck == TH_CK_TAI ? s.off_tai : 0;
				uint64_t slow = th_line_eval(&s, line, d) + (uint64_t)off;
				int64_t sec = atomic_load(&rec->at[ck].sec), q = atomic_load(&rec->at[ck].nsec_q32);
				int64_t rate = line == TH_RAW ? s.hi[TH_RAW] : s.hi[TH_MONO];
				uint64_t fast = (uint64_t)sec * 1000000000ull + (uint64_t)((q + d * rate) >> 32);
				CHECK(slow == want && fast == want, "clock %d at d %lld: kernel %llu, slow %llu, fast %llu", ck,
				      (long long)d, (unsigned long long)want, (unsigned long long)slow,
				      (unsigned long long)fast);
				checked++;
			}
		}
		/* the coarse values: the kernel's coarse clocks */
		CHECK(v.coarse == k.sec[TH_KC_MONO_COARSE] * 1000000000ull + k.nsec[TH_KC_MONO_COARSE], "coarse");
	}
	/* what a record cannot be */
	struct th_kconv k;
	struct th_snap v;
	random_conv(&k);
	k.nsec[TH_KC_REAL] ^= 1; /* REALTIME not a whole ns from MONOTONIC */
	CHECK(th_kconv_record(&k, 0, &v) != 0, "a fractional offset accepted");
	random_conv(&k);
	k.shift = 33;
	CHECK(th_kconv_record(&k, 0, &v) != 0, "shift 33 accepted");
	random_conv(&k);
	k.sec[TH_KC_REAL_COARSE] += 1;
	CHECK(th_kconv_record(&k, 0, &v) != 0, "coarse REALTIME off by a second accepted");
	printf("record: %ld readings equal the kernel's formula\n", checked);
}

/* A pvclock conversion as kvm-clock publishes one: the paravirtual clock's
 * parameters (a 0.3-4 GHz TSC), the kernel's mult within 1000 ppm of 1 ns per
 * paravirtual ns, cycle_last its reading at an update at counter u. */
static void random_pvconv(struct th_kconv *k, uint64_t *u)
{
	do /* mult near 1 << shift must fit in 32 bits */
		random_conv(k);
	while (k->shift > 30 || k->raw_shift > 30);
	k->pv = 1;
	k->pv_shift = (int32_t)(rnd() % 4) - 2;
	k->pv_mul = (uint32_t)(0x80000000u + rnd() % 0x80000000u);
	k->pv_tsc = rnd() >> 2;
	k->pv_time = rnd() >> 4;
	double ppm = (double)(rnd() % 2001) - 1000.0;
	k->mult = (uint32_t)((double)((uint64_t)1 << k->shift) * (1 + ppm * 1e-6));
	k->raw_mult = (uint32_t)((double)((uint64_t)1 << k->raw_shift) * (1 + ppm * 0.5e-6));
	if (k->mult == 0)
		k->mult = 1;
	if (k->raw_mult == 0)
		k->raw_mult = 1;
	*u = k->pv_tsc + rnd() % 4000000000ull;
	k->cycle_last = th_kconv_cycles(k, *u);
}

static void pvrecord(void)
{
	static struct th_timeline tl;
	static const int kc_of_ck[TH_NCLOCKS] = {TH_KC_MONO, TH_KC_REAL, TH_KC_BOOT, TH_KC_TAI, TH_KC_RAW};
	long checked = 0;
	int64_t worst = 0;
	for (int i = 0; i < 2000; i++) {
		struct th_kconv k;
		struct th_snap v;
		uint64_t u;
		random_pvconv(&k, &u);
		uint64_t c = u + rnd() % 20000000;
		int rc = th_kconv_record(&k, c, &v);
		if (rc == -2) {
			/* only where c is within the 2 ns margin of the update */
			CHECK(th_kconv_cycles(&k, c) < k.cycle_last + 3, "counter %d past the update refused", i);
			continue;
		}
		CHECK(rc == 0, "pvclock conversion %d refused (shift %u, mult %u, pv %d/%u)", i, k.shift, k.mult,
		      k.pv_shift, k.pv_mul);
		if (rc != 0)
			continue;
		CHECK(v.anchor == c && v.dmin == 0 && v.dlo >= 0 && v.dlo < v.ddue && (v.flags & TH_RECF_KPV),
		      "anchor, window, flag");
		th_commit_force(&tl, &v);
		struct th_snap s;
		memset(&s, 0, sizeof s);
		unsigned r = 0;
		CHECK(th_snapshot(&tl, &s, &r) == 0, "snapshot");
		uint64_t cur = atomic_load(&tl.cur);
		struct th_rec *rec = &tl.ring[TH_CUR_SLOT(cur) % TH_RING];
		for (int j = 0; j < 24; j++) {
			int64_t d = j == 0 ? 0 : j == 1 ? v.dlo : j == 2 ? v.dhi
				: j < 8 ? (int64_t)(rnd() % (uint64_t)(v.dlo + 1))
					: (int64_t)(rnd() % (uint64_t)(v.dhi + 1));
			for (int ck = 0; ck < TH_NCLOCKS; ck++) {
				int line = ck == TH_CK_RAW ? TH_RAW : TH_MONO;
				int64_t off = ck == TH_CK_REAL ? s.off_real : ck == TH_CK_BOOT ? s.off_boot
									: ck == TH_CK_TAI ? s.off_tai : 0;
				int64_t dd = d < v.dlo ? v.dlo : d;
				uint64_t got = th_line_eval(&s, line, dd) + (uint64_t)off;
				uint64_t want = th_kconv_ns(&k, kc_of_ck[ck], c + (uint64_t)d);
				if (d < v.dlo) {
					/* the clamp: not below the kernel at the anchor */
					uint64_t k0 = th_kconv_ns(&k, kc_of_ck[ck], c);
					CHECK(got >= k0 && got <= want + TH_KPV_BELOW_NS,
					      "clock %d clamp at d %lld: %llu, kernel %llu at the anchor, %llu here", ck,
					      (long long)d, (unsigned long long)got, (unsigned long long)k0,
					      (unsigned long long)want);
				} else {
					int64_t below = (int64_t)(want - got);
					if (below > worst)
						worst = below;
					CHECK(below >= 0 && below <= TH_KPV_BELOW_NS,
					      "clock %d at d %lld: line %llu, kernel %llu", ck, (long long)d,
					      (unsigned long long)got, (unsigned long long)want);
					int64_t sec = atomic_load(&rec->at[ck].sec), q = atomic_load(&rec->at[ck].nsec_q32);
					int64_t rate = s.hi[line];
					uint64_t fast = (uint64_t)sec * 1000000000ull + (uint64_t)((q + d * rate) >> 32);
					CHECK(fast == got, "clock %d at d %lld: fast %llu, slow %llu", ck, (long long)d,
					      (unsigned long long)fast, (unsigned long long)got);
				}
				checked++;
			}
		}
	}
	printf("pvrecord: %ld readings at most %lld ns below the kernel's two-stage formula, never above\n", checked,
	       (long long)worst);
}

/* The records are the kernel's conversion here: readings without slack. */
static void exact(void)
{
	struct th_status st;
	struct timespec t;
	th_clock_gettime(CLOCK_MONOTONIC, &t);
	th_status(&st, sizeof st);
	/* pvclock: a line below the kernel's reading by a few ns at most */
	int pv = strcmp(st.line, "kernel-pvclock") == 0;
	if (strcmp(st.line, "kernel") != 0 && !pv) {
		printf("exact: the records are not the kernel's conversion here (line %s): not checked\n", st.line);
		return;
	}
	const int64_t slack = pv ? TH_KPV_BELOW_NS : 0;
	static const clockid_t ids[] = {CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME, CLOCK_TAI};
	long bad = 0, n = 0;
	for (int i = 0; i < 200000; i++) {
		clockid_t id = ids[i % 5];
		struct timespec a, b;
		th_kclock_gettime(id, &a);
		(th_clock_gettime)(id, &t);
		th_kclock_gettime(id, &b);
		n++;
		if (ts_to_ns(&t) < ts_to_ns(&a) - slack || ts_to_ns(&t) > ts_to_ns(&b)) {
			if (bad++ < 5)
				CHECK(0, "clock %d: %lld not in [%lld, %lld]", (int)id, (long long)ts_to_ns(&t),
				      (long long)ts_to_ns(&a), (long long)ts_to_ns(&b));
		}
	}
	CHECK(bad == 0, "%ld of %ld readings outside the kernel's", bad, n);
	printf("exact: %ld readings inside the kernel's own, %lld ns slack below (line %s)\n", n, (long long)slack,
	       st.line);
}

/*
 * A coarse REALTIME reading on the kernel's line that finds the kernel's
 * coarse offset moved (a step) and no windup coming (another thread holds
 * the lock past the wait) falls back to a fine reading; the coarse readings
 * after it, the kernel's coarse clock up to a tick behind, must not be below
 * it (G2), nor above a fine reading after them (G4).
 */
static void coarse_fallback(void)
{
	struct timespec t;
	th_clock_gettime(CLOCK_REALTIME, &t); /* attach */
	if (!atomic_load_explicit(&th__P.kv_on, memory_order_relaxed)) {
		printf("coarse fallback: not on the kernel's line here: not run\n");
		return;
	}
	for (int round = 0; round < 20; round++) {
		uint32_t z = 0;
		if (!atomic_compare_exchange_strong_explicit(&th__P.lock, &z, 1, memory_order_acquire,
							     memory_order_relaxed))
			continue; /* a windup of this process's own: try again */
		int64_t off = atomic_load_explicit(&th__P.kv_off_real, memory_order_relaxed);
		atomic_store_explicit(&th__P.kv_off_real, off + 12345, memory_order_relaxed);
		struct timespec c1, c2, m2, f;
		th_clock_gettime(CLOCK_REALTIME_COARSE, &c1);
		atomic_store_explicit(&th__P.kv_off_real, off, memory_order_relaxed);
		atomic_store_explicit(&th__P.lock, 0, memory_order_release);
		th_clock_gettime(CLOCK_REALTIME_COARSE, &c2);
		th_clock_gettime(CLOCK_MONOTONIC_COARSE, &m2);
		th_clock_gettime(CLOCK_REALTIME, &f);
		int64_t v1 = (int64_t)c1.tv_sec * 1000000000 + c1.tv_nsec, v2 = (int64_t)c2.tv_sec * 1000000000 + c2.tv_nsec;
		int64_t vf = (int64_t)f.tv_sec * 1000000000 + f.tv_nsec;
		CHECK(v2 >= v1, "coarse REALTIME after the fallback %lld ns below it", (long long)(v1 - v2));
		CHECK(v2 <= vf, "coarse REALTIME %lld ns above a later fine one", (long long)(v2 - vf));
		if (check_failures)
			break;
		struct timespec slp = {0, 1000000 + 300000 * round}; /* at other points of the tick */
		nanosleep(&slp, NULL);
	}
}

/* A consistent copy of the kernel's data page that holds the count (the
 * count even and unchanged around it): 1, else 0. */
/* A round skipped because the kernel was updating: a moment before the
 * next, so that the rounds of a test span the kernel's ticks rather than a
 * few microseconds of a busy one. */
static void pause_us(long us)
{
	struct timespec pause = {0, us * 1000};
	nanosleep(&pause, NULL);
}
static void skip_pause(void)
{
	pause_us(200);
}

static int copy_kpage(unsigned char *dst, const unsigned char *page, const uint32_t *sq)
{
	for (int t = 0; t < 10000; t++) {
		/* A kernel whose vCPU the host stopped mid-update keeps its
		 * count odd for as long: every 100 tries, a millisecond's
		 * pause, so that a loaded machine does not fail the copy. */
		if (t > 0 && t % 100 == 0)
			pause_us(1000);
		uint32_t s = __atomic_load_n(sq, __ATOMIC_ACQUIRE);
		for (size_t k = 0; k < 4096; k += 8) {
			uint64_t w = __atomic_load_n((const uint64_t *)(const void *)(page + k), __ATOMIC_RELAXED);
			memcpy(dst + k, &w, 8);
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (!(s & 1) && __atomic_load_n(sq, __ATOMIC_RELAXED) == s)
			return 1;
	}
	return 0;
}

static int64_t coarse_ns(clockid_t id)
{
	struct timespec t;
	th_clock_gettime(id, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/*
 * Before Linux 6.15 the kernel's coarse clocks are its fine base at
 * cycle_last, which an adjtimex rate change moves back (seen on Linux 6.1:
 * coarse clocks hundreds of us below the update before's under ADJ_TICK).
 * Here the kernel's page is replaced by a copy of a later update whose coarse
 * bases lie D below the current ones: coarse readings on the kernel's line
 * must not go back (G2) nor pass a later fine reading (G4). The windups meanwhile
 * see the kernel's own page for their check of the direct read against the
 * vDSO, the copy for the rest.
 */
extern void (*th__test_windup_hook)(void);
extern void (*th__test_windup_hook_after)(void);
static const uint32_t *cb_seq, *cb_fseq;
static const uint64_t *cb_base, *cb_fbase;
static void cb_hook(void)
{
	__atomic_store_n(&th_kdata.seq, cb_seq, __ATOMIC_RELAXED);
	__atomic_store_n(&th_kdata.mono_coarse, cb_base, __ATOMIC_RELAXED);
}
static void cb_fake(void)
{
	__atomic_store_n(&th_kdata.seq, cb_fseq, __ATOMIC_RELAXED);
	__atomic_store_n(&th_kdata.mono_coarse, cb_fbase, __ATOMIC_RELAXED);
}

static void coarse_back(void)
{
	struct timespec t;
	th_clock_gettime(CLOCK_REALTIME, &t); /* attach */
	if (!atomic_load_explicit(&th__P.kv_on, memory_order_relaxed) ||
	    __atomic_load_n(&th_kdata.real_sec, __ATOMIC_RELAXED) == NULL) {
		printf("coarse back: not on the kernel's line here: not run\n");
		return;
	}
	const int64_t D = 300000;
	static unsigned char fake[4096] __attribute__((aligned(64)));
	long n = 0;
	for (int round = 0; round < 20 && !check_failures; round++) {
		cb_seq = th_kdata.seq;
		cb_base = th_kdata.mono_coarse;
		const unsigned char *page = (const unsigned char *)((uintptr_t)cb_seq & ~(uintptr_t)4095);
		int64_t m0 = coarse_ns(CLOCK_MONOTONIC_COARSE), r0 = coarse_ns(CLOCK_REALTIME_COARSE);
		if (!copy_kpage(fake, page, cb_seq))
			continue;
		uint32_t *fs = (uint32_t *)(void *)(fake + ((const unsigned char *)cb_seq - page));
		uint64_t *fb = (uint64_t *)(void *)(fake + ((const unsigned char *)cb_base - page));
		if (fb[1] < (uint64_t)D || fb[-1] < (uint64_t)D)
			continue; /* no second to borrow: another round */
		unsigned char *raw = th_kdata_conv_test_page(fake);
		if (!raw) {
			printf("coarse back: no conversion copy to replace here: not run\n");
			return;
		}
		/* a later update (far from the kernel's own counts), its coarse
		 * clocks D back */
		*fs += 0x10000;
		*(uint32_t *)(void *)raw += 0x10000;
		fb[1] -= (uint64_t)D;  /* MONOTONIC_COARSE */
		fb[-1] -= (uint64_t)D; /* REALTIME_COARSE */
		cb_fseq = fs;
		cb_fbase = fb;
		th__test_windup_hook = cb_hook;
		th__test_windup_hook_after = cb_fake;
		cb_fake();
		int64_t m1 = coarse_ns(CLOCK_MONOTONIC_COARSE), r1 = coarse_ns(CLOCK_REALTIME_COARSE);
		cb_hook();
		th__test_windup_hook = NULL;
		th__test_windup_hook_after = NULL;
		th_kdata_conv_test_page(NULL);
		int64_t fm = coarse_ns(CLOCK_MONOTONIC), fr = coarse_ns(CLOCK_REALTIME);
		int64_t m2 = coarse_ns(CLOCK_MONOTONIC_COARSE), r2 = coarse_ns(CLOCK_REALTIME_COARSE);
		n++;
		CHECK(m1 >= m0 && r1 >= r0, "coarse of an update %lld ns back: MONOTONIC %lld ns, REALTIME %lld ns back",
		      (long long)D, (long long)(m0 - m1), (long long)(r0 - r1));
		CHECK(m1 <= fm && r1 <= fr, "coarse of an update %lld ns back: %lld / %lld ns above a later fine reading",
		      (long long)D, (long long)(m1 - fm), (long long)(r1 - fr));
		CHECK(m2 >= m1 && r2 >= r1, "coarse after the kernel's page came back: %lld / %lld ns back",
		      (long long)(m1 - m2), (long long)(r1 - r2));
		struct timespec slp = {0, 700000 + 100000 * round};
		nanosleep(&slp, NULL);
	}
	CHECK(n > 0, "no consistent copy of the kernel's page");
	printf("coarse back: %ld rounds of an update whose coarse clocks lie %lld ns below the one before\n", n,
	       (long long)D);
}

/*
 * Leaving the kernel's line (a clock mode the records cannot follow: another
 * clocksource) and coming back to it. The kernel-mode records in between
 * serve coarse values from a fine reading at their windup, up to a tick
 * above the kernel's coarse clock; when the records are the kernel's line
 * again, its coarse clocks must not go below those (G2). The conversion's
 * copy of the kernel's page carries clock mode 0 (none) while the process is
 * off the line.
 */
static void coarse_rejoin(void)
{
	struct timespec t;
	th_clock_gettime(CLOCK_REALTIME, &t); /* attach */
	if (!atomic_load_explicit(&th__P.kv_on, memory_order_relaxed) ||
	    __atomic_load_n(&th_kdata.real_sec, __ATOMIC_RELAXED) == NULL) {
		printf("coarse rejoin: not on the kernel's line here: not run\n");
		return;
	}
	static unsigned char fake[4096] __attribute__((aligned(64)));
	long n = 0, left = 0;
	for (int round = 0; round < 20 && !check_failures; round++) {
		const uint32_t *sq = th_kdata.seq;
		const unsigned char *page = (const unsigned char *)((uintptr_t)sq & ~(uintptr_t)4095);
		if (!copy_kpage(fake, page, sq))
			continue;
		unsigned char *raw = th_kdata_conv_test_page(fake);
		if (!raw) {
			printf("coarse rejoin: no conversion copy to replace here: not run\n");
			return;
		}
		uint32_t *fs = (uint32_t *)(void *)(fake + ((const unsigned char *)sq - page));
		fs[1] = 0;			 /* clock mode: none */
		((uint32_t *)(void *)raw)[1] = 0; /* the raw structure's */
		if (!th__windup_try() || atomic_load_explicit(&th__P.kv_on, memory_order_relaxed)) {
			th_kdata_conv_test_page(NULL);
			th__windup_try();
			skip_pause();
			continue; /* another thread's windup, or not left: again */
		}
		left++;
		int64_t m1 = coarse_ns(CLOCK_MONOTONIC_COARSE), r1 = coarse_ns(CLOCK_REALTIME_COARSE);
		th_kdata_conv_test_page(NULL);
		th__windup_try();
		int back = atomic_load_explicit(&th__P.kv_on, memory_order_relaxed);
		int64_t m2 = coarse_ns(CLOCK_MONOTONIC_COARSE), r2 = coarse_ns(CLOCK_REALTIME_COARSE);
		int64_t fm = coarse_ns(CLOCK_MONOTONIC), fr = coarse_ns(CLOCK_REALTIME);
		if (!back) {
			skip_pause();
			continue;
		}
		n++;
		CHECK(m2 >= m1 && r2 >= r1, "coarse back on the kernel's line below the kernel-mode ones: MONOTONIC %lld ns, REALTIME %lld ns",
		      (long long)(m1 - m2), (long long)(r1 - r2));
		CHECK(m2 <= fm && r2 <= fr, "coarse back on the kernel's line %lld / %lld ns above a later fine reading",
		      (long long)(m2 - fm), (long long)(r2 - fr));
		struct timespec slp = {0, 700000 + 100000 * round};
		nanosleep(&slp, NULL);
	}
	CHECK(left > 0 && n > 0, "never left and rejoined the kernel's line (%ld left, %ld back)", left, n);
	printf("coarse rejoin: %ld rounds off the kernel's line and back\n", n);
}

/*
 * A process that does not use the counter (TIMEHANDS_COUNTER=off) serves the
 * kernel's own fine clocks, and its coarse clocks are the kernel's coarse
 * clocks from its data page, tied to the update a windup copied (kv_seq).
 * Run in a child started with the counter off, with the kernel's page
 * replaced by a copy (the windups' check of the direct read against the vDSO
 * sees the real page):
 * - on the records' path (as before the first windup, or after one that
 *   found no copy of the kernel's coarse clocks), while a step of the
 *   kernel's offset has not been followed (the windup lock held): coarse
 *   REALTIME minus coarse MONOTONIC is the kernel's offset of the copy, a
 *   second back (not the offset of the last windup: a coarse REALTIME above
 *   the fine one after it, G4);
 * - after windups: a later update whose REALTIME offset is a second back (a
 *   step) is served at once with it; one whose coarse clocks lie D below the
 *   update before's (Linux before 6.15, after a rate change) does not take
 *   the coarse clocks back (G2).
 */
/* The kernel's page where the direct read finds it, and a copy to read in
 * its place (cb_fake): the copy's count and coarse bases, for the hooks. */
struct fake_page {
	const unsigned char *page;
	unsigned char *fake;
	uint32_t *fs;
	uint64_t *fb;
};

static struct fake_page fake_page(void)
{
	static unsigned char fake[4096] __attribute__((aligned(64)));
	cb_seq = th_kdata.seq;
	cb_base = th_kdata.mono_coarse;
	struct fake_page f = {(const unsigned char *)((uintptr_t)cb_seq & ~(uintptr_t)4095), fake, NULL, NULL};
	f.fs = (uint32_t *)(void *)(fake + ((const unsigned char *)cb_seq - f.page));
	f.fb = (uint64_t *)(void *)(fake + ((const unsigned char *)cb_base - f.page));
	cb_fseq = f.fs;
	cb_fbase = f.fb;
	return f;
}

static int64_t koff_of(const uint64_t *fb)
{
	return (int64_t)(fb[-2] * 1000000000u + fb[-1]) - (int64_t)(fb[0] * 1000000000u + fb[1]);
}

static int coarse_step_child(void)
{
	struct timespec t;
	th_clock_gettime(CLOCK_REALTIME, &t); /* attach */
	if (th__P.trust.usable || __atomic_load_n(&th_kdata.real_sec, __ATOMIC_RELAXED) == NULL) {
		printf("coarse step: the counter in use, or no direct read of the kernel's page: not run\n");
		return 0;
	}
	struct fake_page f = fake_page();
	const unsigned char *page = f.page;
	unsigned char *fake = f.fake;
	uint32_t *fs = f.fs;
	uint64_t *fb = f.fb;
	long held = 0, stepped = 0, back = 0, skip_copy = 0, skip_lock = 0, skip_off = 0;
	const int64_t D = 300000;
	const long want = 10;
	for (int round = 0; round < 400 && !check_failures && (held < want || stepped < want || back < want); round++) {
		int64_t k0;
		if (!copy_kpage(fake, page, cb_seq) || !th_kdata_real_offset(&k0) || koff_of(fb) != k0 ||
		    fb[1] < (uint64_t)D || fb[-1] < (uint64_t)D) {
			/* the kernel updated between the copies; no ns to borrow */
			skip_copy++;
			skip_pause();
			continue;
		}
		/* each kind in turn, among those still short */
		int kind = round % 3;
		while ((kind == 0 && held >= want) || (kind == 1 && stepped >= want) || (kind == 2 && back >= want))
			kind = (kind + 1) % 3;
		uint32_t z = 0;
		if (kind == 0) {
			/* the windup lock held: no windup follows the step. On the
			 * records' path (kv_on 0: before the first windup, or
			 * after one that found no copy of the kernel's coarse
			 * clocks), set here under the lock: after a windup, a
			 * coarse reading that cannot wind up is a fine one, the
			 * vDSO's, which this copy does not change. */
			if (!atomic_compare_exchange_strong_explicit(&th__P.lock, &z, 1, memory_order_acquire,
								     memory_order_relaxed)) {
				skip_lock++;
				continue;
			}
			atomic_store_explicit(&th__P.kv_on, 0, memory_order_relaxed);
		} else {
			/* a later update */
			th__windup_try();
			if (!atomic_load_explicit(&th__P.kv_on, memory_order_relaxed)) {
				struct th_kcoarse kc;
				CHECK(th_kdata_coarse(&kc) != 1, "coarse clocks not the kernel's after a windup");
				skip_off++;
				continue;
			}
			*fs += 0x10000;
		}
		if (kind == 2) {
			fb[1] -= (uint64_t)D;  /* MONOTONIC_COARSE */
			fb[-1] -= (uint64_t)D; /* REALTIME_COARSE */
		} else {
			fb[-2] -= 1; /* REALTIME_COARSE seconds */
		}
		int64_t kf = koff_of(fb);
		int64_t m0 = coarse_ns(CLOCK_MONOTONIC_COARSE);
		if (kind != 0) {
			th__test_windup_hook = cb_hook;
			th__test_windup_hook_after = cb_fake;
		}
		cb_fake();
		int64_t r1 = coarse_ns(CLOCK_REALTIME_COARSE), m1 = coarse_ns(CLOCK_MONOTONIC_COARSE);
		cb_hook();
		th__test_windup_hook = NULL;
		th__test_windup_hook_after = NULL;
		if (kind == 0) {
			atomic_store_explicit(&th__P.lock, 0, memory_order_release);
			th__windup_try(); /* back on the kernel's coarse clocks */
		}
		if (kind == 2) {
			int64_t fm = coarse_ns(CLOCK_MONOTONIC);
			back++;
			CHECK(m1 >= m0, "coarse of an update %lld ns back, counter off: MONOTONIC %lld ns back", (long long)D,
			      (long long)(m0 - m1));
			CHECK(m1 <= fm, "coarse %lld ns above a later fine reading", (long long)(m1 - fm));
		} else {
			held += kind == 0;
			stepped += kind == 1;
			CHECK(r1 - m1 == kf, "coarse REALTIME after a step of the kernel's offset (%s): %lld ns from the kernel's",
			      kind == 0 ? "not followed" : "a later update", (long long)(r1 - m1 - kf));
		}
		struct timespec slp = {0, 300000 + 100000 * round};
		nanosleep(&slp, NULL);
	}
	CHECK(held == want && stepped == want && back == want,
	      "rounds: %ld held, %ld stepped, %ld back; skipped: %ld copies, %ld lock taken, %ld windups without the "
	      "kernel's coarse clocks (direct read of its page %s)",
	      held, stepped, back, skip_copy, skip_lock, skip_off,
	      __atomic_load_n(&th_kdata.real_sec, __ATOMIC_RELAXED) ? "on" : "off");
	printf("coarse step: counter off, %ld rounds of a step not followed, %ld of a step in a later update, %ld of an "
	       "update %lld ns back\n",
	       held, stepped, back, (long long)D);
	return check_done("coarse step") ? 1 : 0;
}

/* Runs this program again as `self arg` with TIMEHANDS_PAGE=none and one
 * more variable set (`var`=`val`), and checks its verdict. */
static void run_child(const char *self, const char *arg, const char *var, const char *val, const char *name)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		setenv(var, val, 1);
		setenv("TIMEHANDS_PAGE", "none", 1);
		execl(self, self, arg, (char *)NULL);
		_exit(77); /* no exec of this program here (an emulator without binfmt) */
	}
	child_verdict(pid, name, "this program cannot start itself again here: not run");
}

static void coarse_step(const char *self)
{
	run_child(self, "coarse-step", "TIMEHANDS_COUNTER", "off", "coarse step");
}

static int64_t fine_ns(clockid_t id)
{
	struct timespec t;
	th_clock_gettime(id, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/*
 * A process on timehands' own line (TIMEHANDS_LINE=own) that reads the
 * kernel's page directly ties its lines to the kernel's update count
 * (TH_RECF_TIED). Run in a child with the kernel's page replaced by a copy
 * whose count moved on (the windups' check of the direct read against the
 * vDSO sees the real page), alternately:
 * - a step: the copy's REALTIME offset a second back. The very next fine
 *   REALTIME reading is MONOTONIC plus the copy's offset (between the
 *   MONOTONIC readings around it), and the record after it is tied to the
 *   copy's update;
 * - a tick: only the count moved. The next reading keeps the offset, the
 *   record is tied to the copy's update;
 * then the kernel's own page again: its offset at once. Nothing of this
 * depends on the kernel changing anything.
 */
/*
 * A step in the fake page while the windup lock is held (another thread
 * winding up, preempted): no windup follows it, yet a coarse REALTIME
 * reading shows it, a fine one too (the tied line with the kernel's offset
 * of now), and a coarse one after that, at or above the fine reading's
 * second (G3) and below a later fine reading (G4). 1 when the round ran.
 */
static int held_step(uint64_t *fb, uint32_t *fs)
{
	uint32_t z = 0;
	if (!atomic_compare_exchange_strong_explicit(&th__P.lock, &z, 1, memory_order_acquire, memory_order_relaxed))
		return 0;
	struct th_snap s;
	unsigned r = 0;
	int line = th_snapshot(&th__P.tl, &s, &r) == 0 && s.kind == TH_REC_LINE && (s.flags & TH_RECF_TIED);
	int64_t tick = (int64_t)th__P.tick_ns;
	fb[-2] += 1; /* REALTIME_COARSE seconds: the offset a second ahead */
	*fs += 0x10000;
	int64_t kf = koff_of(fb);
	int64_t m0 = fine_ns(CLOCK_MONOTONIC);
	cb_fake();
	int64_t c0 = coarse_ns(CLOCK_REALTIME_COARSE);
	int64_t r1 = fine_ns(CLOCK_REALTIME), m1 = fine_ns(CLOCK_MONOTONIC);
	int64_t c2 = coarse_ns(CLOCK_REALTIME_COARSE), r3 = fine_ns(CLOCK_REALTIME);
	cb_hook();
	atomic_store_explicit(&th__P.lock, 0, memory_order_release);
	th__windup_try(); /* back on the kernel's page */
	if (!line)
		return 0; /* a windup due meanwhile left the line: not this case */
	CHECK(r1 - kf >= m0 && r1 - kf <= m1,
	      "tied line, a step while the lock is held: REALTIME minus the step's offset %lld ns outside the "
	      "MONOTONIC readings around it",
	      (long long)(r1 - kf < m0 ? r1 - kf - m0 : r1 - kf - m1));
	CHECK(c0 - kf >= m0 - 2 * tick && c0 <= r1,
	      "tied line, a step while the lock is held: the first coarse REALTIME after it %lld ns from the step's "
	      "offset's MONOTONIC before it (G5), %lld ns above the fine reading after it (G4)",
	      (long long)(c0 - kf - m0), (long long)(c0 - r1));
	CHECK(c2 / 1000000000 >= r1 / 1000000000 && c2 <= r3 && c2 - kf >= m0 - 2 * tick,
	      "tied line, a step while the lock is held: coarse REALTIME %lld after fine %lld, before fine %lld "
	      "(G3, G4, G5 with the step's offset)",
	      (long long)c2, (long long)r1, (long long)r3);
	return 1;
}

static int tied_step_child(void)
{
	th_clock_gettime(CLOCK_REALTIME, &(struct timespec){0}); /* attach */
	if (!th__P.trust.usable || __atomic_load_n(&th_kdata.real_sec, __ATOMIC_RELAXED) == NULL) {
		printf("tied step: the counter not in use, or no direct read of the kernel's page: not run\n");
		return 0;
	}
	struct th_snap s;
	unsigned r = 0;
	int tied = 0, line = 0;
	for (int i = 0; i < 3000 && !tied; i++) {
		fine_ns(CLOCK_REALTIME);
		int got = th_snapshot(&th__P.tl, &s, &r) == 0 && s.kind == TH_REC_LINE;
		line |= got;
		tied = got && (s.flags & TH_RECF_TIED);
		if (!tied)
			nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	CHECK(tied || !line, "timehands' own line is not tied to the kernel's updates");
	if (!tied) {
		/* calibrating for good: kernel reads too slow to start a line
		 * (a sanitizer's runtime, a loaded machine) */
		printf("tied step: no line of timehands' own within 3 s here: not run\n");
		return check_done("tied step") ? 1 : 0;
	}
	struct fake_page f = fake_page();
	const unsigned char *page = f.page;
	unsigned char *fake = f.fake;
	uint32_t *fs = f.fs;
	uint64_t *fb = f.fb;
	long steps = 0, ticks = 0, held = 0, mono_quiet = 0, mono_rounds = 0;
	for (int round = 0; round < 300 && !check_failures && (steps < 10 || ticks < 10 || held < 10); round++) {
		int64_t k0;
		if (!copy_kpage(fake, page, cb_seq) || !th_kdata_real_offset(&k0) || koff_of(fb) != k0) {
			skip_pause(); /* the kernel updated between the copies */
			continue;
		}
		if (round % 3 == 2) {
			if (held_step(fb, fs))
				held++;
			continue;
		}
		int step = round % 3;
		if (step)
			fb[-2] -= 1; /* REALTIME_COARSE seconds: the offset a second back */
		*fs += 0x10000;
		int64_t kf = koff_of(fb);
		th__test_windup_hook = cb_hook;
		th__test_windup_hook_after = cb_fake;
		int64_t m0 = fine_ns(CLOCK_MONOTONIC);
		cb_fake();
		/* MONOTONIC readers are not sent to a windup by the update (the
		 * tie is REALTIME's and TAI's): the record stays tied to the
		 * count before it, unless a windup came due meanwhile */
		uint64_t w0 = atomic_load_explicit(&th__P.windups, memory_order_relaxed);
		for (int k = 0; k < 10; k++)
			fine_ns(CLOCK_MONOTONIC);
		mono_quiet += atomic_load_explicit(&th__P.windups, memory_order_relaxed) == w0;
		mono_rounds++;
		int64_t r1 = fine_ns(CLOCK_REALTIME), m1 = fine_ns(CLOCK_MONOTONIC);
		int have = th_snapshot(&th__P.tl, &s, &r) == 0;
		cb_hook();
		th__test_windup_hook = NULL;
		th__test_windup_hook_after = NULL;
		int64_t m2 = fine_ns(CLOCK_MONOTONIC), r3 = fine_ns(CLOCK_REALTIME), m3 = fine_ns(CLOCK_MONOTONIC);
		int64_t k3;
		if (!have || s.kind != TH_REC_LINE)
			continue; /* a windup due meanwhile left the line: not this test's case */
		steps += step;
		ticks += !step;
		CHECK(r1 - kf >= m0 && r1 - kf <= m1,
		      "tied line, %s in the kernel's page: REALTIME minus its offset %lld ns outside the MONOTONIC "
		      "readings around it",
		      step ? "a step" : "a tick", (long long)(r1 - kf < m0 ? r1 - kf - m0 : r1 - kf - m1));
		CHECK((s.flags & TH_RECF_TIED) && (uint32_t)s.kseq == *fs,
		      "tied line, %s: the record after it is not tied to the page's update (flags %#llx, count %u, "
		      "page's %u)",
		      step ? "a step" : "a tick", (unsigned long long)s.flags, (unsigned)s.kseq, *fs);
		if (th_kdata_real_offset(&k3))
			CHECK(r3 - k3 >= m2 && r3 - k3 <= m3,
			      "tied line, the kernel's page back: REALTIME minus its offset %lld ns outside", 
			      (long long)(r3 - k3 < m2 ? r3 - k3 - m2 : r3 - k3 - m3));
		nanosleep(&(struct timespec){0, 300000 + 50000 * (round % 10)}, NULL);
	}
	CHECK(steps >= 10 && ticks >= 10 && held >= 10, "tied line: %ld rounds of a step, %ld of a tick, %ld held",
	      steps, ticks, held);
	CHECK(mono_rounds - mono_quiet <= 2, "tied line: MONOTONIC readings wound up after %ld of %ld kernel updates",
	      mono_rounds - mono_quiet, mono_rounds);
	printf("tied step: timehands' own line, %ld rounds of a step of the page's REALTIME offset followed at once, "
	       "%ld of an update without one, %ld of a step while the windup lock is held (fine and coarse "
	       "REALTIME show it); MONOTONIC readings wound up after %ld of %ld updates\n",
	       steps, ticks, held, mono_rounds - mono_quiet, mono_rounds);
	return check_done("tied step") ? 1 : 0;
}

static void glitch(void)
{
	const uint64_t S = 1000000000u;
	/* fine base 100.5 s, shift 8 */
	uint64_t fsec = 100, fnsec = (uint64_t)500000000 << 8;
	CHECK(th_kcoarse_ok(100500000000u, fsec, fnsec, 8), "coarse equal to the fine base refused");
	CHECK(th_kcoarse_ok(100499000000u, fsec, fnsec, 8), "coarse 1 ms below refused");
	CHECK(th_kcoarse_ok(100501000000u, fsec, fnsec, 8), "coarse 1 ms above refused");
	CHECK(th_kcoarse_ok(100500000000u - TH_KCOARSE_SLACK_NS, fsec, fnsec, 8), "coarse at the bound refused");
	CHECK(!th_kcoarse_ok(99500000000u + 202795, fsec, fnsec, 8), "coarse a second behind accepted");
	CHECK(!th_kcoarse_ok(101500000000u, fsec, fnsec, 8), "coarse a second ahead accepted");
	/* the kernel's borrowed second: fine (99, 1.4999e9 << 8), coarse (99, 0.5e9) */
	CHECK(!th_kcoarse_ok(99 * S + 500000000u, 99, (uint64_t)1499999000 << 8, 8),
	      "coarse a second behind a non-normalised fine base accepted");

	th_clock_gettime(CLOCK_REALTIME, &(struct timespec){0}); /* attach */
	if (__atomic_load_n(&th_kdata.real_sec, __ATOMIC_RELAXED) == NULL) {
		printf("glitch: no direct read of the kernel's page here: only th_kcoarse_ok checked\n");
		return;
	}
	const uint32_t *sq = th_kdata.seq;
	const uint64_t *b = th_kdata.mono_coarse;
	const unsigned char *page = (const unsigned char *)((uintptr_t)sq & ~(uintptr_t)4095);
	static unsigned char fake[4096] __attribute__((aligned(64)));
	long n = 0;
	for (int round = 0; round < 40 && !check_failures; round++) {
		if (!copy_kpage(fake, page, sq))
			continue;
		const int64_t d = round & 1 ? 1 : -1; /* seconds */
		uint64_t *fb = (uint64_t *)(void *)(fake + ((const unsigned char *)b - page));
		fb[0] += (uint64_t)d;  /* MONOTONIC_COARSE seconds */
		fb[-2] += (uint64_t)d; /* REALTIME_COARSE seconds */
		int64_t m0 = coarse_ns(CLOCK_MONOTONIC_COARSE), r0 = coarse_ns(CLOCK_REALTIME_COARSE);
		/* No windup while the copy is in place: its check of the direct
		 * read against the vDSO would turn the read off. */
		uint32_t z = 0;
		if (!atomic_compare_exchange_strong_explicit(&th__P.lock, &z, 1, memory_order_acquire,
							     memory_order_relaxed))
			continue;
		__atomic_store_n(&th_kdata.seq, (const uint32_t *)(const void *)(fake + ((const unsigned char *)sq - page)),
				 __ATOMIC_RELAXED);
		__atomic_store_n(&th_kdata.mono_coarse, (const uint64_t *)fb, __ATOMIC_RELAXED);
		int64_t m1 = coarse_ns(CLOCK_MONOTONIC_COARSE), r1 = coarse_ns(CLOCK_REALTIME_COARSE);
		uint64_t kc;
		int verdict = th_kdata_coarse_check(&kc);
		__atomic_store_n(&th_kdata.seq, sq, __ATOMIC_RELAXED);
		__atomic_store_n(&th_kdata.mono_coarse, b, __ATOMIC_RELAXED);
		atomic_store_explicit(&th__P.lock, 0, memory_order_release);
		int64_t fm = coarse_ns(CLOCK_MONOTONIC), fr = coarse_ns(CLOCK_REALTIME);
		int64_t m2 = coarse_ns(CLOCK_MONOTONIC_COARSE), r2 = coarse_ns(CLOCK_REALTIME_COARSE);
		n++;
		CHECK(m1 >= m0 && r1 >= r0, "coarse %s a second off: MONOTONIC %lld ns, REALTIME %lld ns back",
		      d < 0 ? "behind" : "ahead", (long long)(m0 - m1), (long long)(r0 - r1));
		CHECK(m1 <= fm && r1 <= fr, "coarse %s a second off: MONOTONIC %lld ns, REALTIME %lld ns above a later fine reading",
		      d < 0 ? "behind" : "ahead", (long long)(m1 - fm), (long long)(r1 - fr));
		CHECK(m2 >= m1 && r2 >= r1, "coarse after the kernel's page came back: %lld / %lld ns back",
		      (long long)(m1 - m2), (long long)(r1 - r2));
		/* the slow paths' check: a second off, and the kernel's own page */
		CHECK(verdict == -1, "th_kdata_coarse_check on a page a second %s: %d", d < 0 ? "behind" : "ahead",
		      verdict);
		int again = th_kdata_coarse_check(&kc);
		CHECK(again == 1 || again == 0, "th_kdata_coarse_check on the kernel's page: %d", again);
		struct timespec slp = {0, 700000 + 100000 * round};
		nanosleep(&slp, NULL);
	}
	CHECK(n > 0, "no consistent copy of the kernel's page");
	printf("glitch: th_kcoarse_ok; %ld rounds of coarse readings from a page a second off (%s)\n", n,
	       atomic_load_explicit(&th__P.kv_on, memory_order_relaxed) ? "the kernel's line" : "timehands' own line");
}

/*
 * timehandsd's page records are tied to the kernel's update count too (the
 * daemon's windup): a process reading the page serves REALTIME with the
 * kernel's offset of now once the kernel moved on, before the daemon follows
 * a step. Run in a child on timehands' own line with the daemon's page
 * (TIMEHANDS_LINE=own, TIMEHANDS_PAGE), the kernel's page replaced by a copy
 * whose count moved on, alternately with REALTIME's offset a second back
 * (a step the daemon, which reads the real page, never follows) and
 * without: the next fine REALTIME reading is MONOTONIC plus the copy's
 * offset, a coarse one after it shows the copy's offset too (G4, G5), and
 * with the kernel's page back, its offset at once.
 */
static int shared_tied_child(void)
{
	fine_ns(CLOCK_REALTIME); /* attach */
	if (__atomic_load_n(&th_kdata.real_sec, __ATOMIC_RELAXED) == NULL) {
		printf("shared tied step: no direct read of the kernel's page: not run\n");
		return 0;
	}
	int shared = 0;
	for (int i = 0; i < 500 && !shared; i++) {
		fine_ns(CLOCK_REALTIME);
		shared = TH_CUR_SLOT(atomic_load_explicit(&th__P.tl.cur, memory_order_acquire)) == TH_SLOT_SHARED;
		if (!shared)
			nanosleep(&(struct timespec){0, 10000000}, NULL);
	}
	if (!shared) {
		/* calibrating for good (kernel reads too slow for a line: a
		 * sanitizer's runtime, a loaded machine) */
		printf("shared tied step: the process did not reach shared mode within 5 s here: not run\n");
		return 0;
	}
	struct th_snap s;
	unsigned r = 0;
	int got = th_snapshot(th__page_tl(), &s, &r) == 0;
	CHECK(got && (s.flags & TH_RECF_TIED) && (s.kseq & TH_ABI_KSEQ_LINE) == TH_ABI_KSEQ_RT,
	      "the daemon's page record is not tied to the kernel's updates (flags %#llx, kseq %#llx)",
	      (unsigned long long)s.flags, (unsigned long long)s.kseq);
	const int64_t tick = 100000000; /* generous: G5 is the daemon's two ticks */
	struct fake_page f = fake_page();
	long steps = 0, ticks = 0, left = 0;
	for (int round = 0; round < 300 && !check_failures && (steps < 10 || ticks < 10); round++) {
		int64_t k0;
		if (!copy_kpage(f.fake, f.page, cb_seq) || !th_kdata_real_offset(&k0) || koff_of(f.fb) != k0) {
			skip_pause(); /* the kernel updated between the copies */
			continue;
		}
		int step = round % 2;
		if (step)
			f.fb[-2] -= 1; /* REALTIME_COARSE seconds: the offset a second back */
		*f.fs += 0x10000;
		int64_t kf = koff_of(f.fb);
		th__test_windup_hook = cb_hook;
		th__test_windup_hook_after = cb_fake;
		coarse_ns(CLOCK_REALTIME_COARSE); /* the page's coarse clocks in use (th__coarse_blk) */
		int64_t m0 = fine_ns(CLOCK_MONOTONIC);
		cb_fake();
		int64_t c0 = coarse_ns(CLOCK_REALTIME_COARSE);
		int64_t r1 = fine_ns(CLOCK_REALTIME), m1 = fine_ns(CLOCK_MONOTONIC);
		int64_t c1 = coarse_ns(CLOCK_REALTIME_COARSE), r2 = fine_ns(CLOCK_REALTIME);
		int still = TH_CUR_SLOT(atomic_load_explicit(&th__P.tl.cur, memory_order_acquire)) == TH_SLOT_SHARED;
		cb_hook();
		th__test_windup_hook = NULL;
		th__test_windup_hook_after = NULL;
		int64_t m2 = fine_ns(CLOCK_MONOTONIC), r3 = fine_ns(CLOCK_REALTIME), m3 = fine_ns(CLOCK_MONOTONIC);
		if (!still) {
			left++; /* the process left the page meanwhile: not this case */
			continue;
		}
		steps += step;
		ticks += !step;
		CHECK(r1 - kf >= m0 && r1 - kf <= m1,
		      "shared mode, %s in the kernel's page: REALTIME minus its offset %lld ns outside the MONOTONIC "
		      "readings around it",
		      step ? "a step" : "an update", (long long)(r1 - kf < m0 ? r1 - kf - m0 : r1 - kf - m1));
		CHECK(c0 - kf >= m0 - tick && c0 <= r1,
		      "shared mode, %s in the kernel's page: the first coarse REALTIME minus its offset %lld ns from "
		      "the MONOTONIC before it (G5), %lld ns above the fine reading after it (G4)",
		      step ? "a step" : "an update", (long long)(c0 - kf - m0), (long long)(c0 - r1));
		CHECK(c1 - kf >= m0 - tick && c1 <= r2,
		      "shared mode, %s in the kernel's page: coarse REALTIME minus its offset %lld ns from the "
		      "MONOTONIC before it (G5), %lld ns above the fine reading after it (G4)",
		      step ? "a step" : "an update", (long long)(c1 - kf - m0), (long long)(c1 - r2));
		int64_t k3;
		if (th_kdata_real_offset(&k3))
			CHECK(r3 - k3 >= m2 && r3 - k3 <= m3,
			      "shared mode, the kernel's page back: REALTIME minus its offset %lld ns outside",
			      (long long)(r3 - k3 < m2 ? r3 - k3 - m2 : r3 - k3 - m3));
		nanosleep(&(struct timespec){0, 300000 + 50000 * (round % 10)}, NULL);
	}
	CHECK(steps >= 10 && ticks >= 10, "shared tied step: %ld rounds of a step, %ld of an update (%ld left the page)",
	      steps, ticks, left);
	printf("shared tied step: the daemon's records tied; %ld rounds of a step of the kernel page's REALTIME "
	       "offset shown at once by fine and coarse readings of the page, %ld of an update without one\n",
	       steps, ticks);
	return check_done("shared tied step") ? 1 : 0;
}

/* The child above, beside a timehandsd of its own (`daemon`) in a fresh
 * directory. */
static int shared_tied(const char *self, const char *daemon)
{
	char dir[] = "/tmp/th-kdata-XXXXXX", page[64], logf[64];
	if (!mkdtemp(dir))
		return check_done("shared tied step");
	snprintf(page, sizeof page, "%s/page", dir);
	snprintf(logf, sizeof logf, "%s/log", dir);
	fflush(stdout);
	pid_t d = fork();
	if (d == 0) {
		int fd = open(logf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(daemon, daemon, "--foreground", "--page", page, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500 && access(page, F_OK) != 0; i++)
		nanosleep(&(struct timespec){0, 10000000}, NULL);
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		setenv("TIMEHANDS_LINE", "own", 1);
		setenv("TIMEHANDS_PAGE", page, 1);
		execl(self, self, "shared-tied-step", (char *)NULL);
		_exit(77);
	}
	child_verdict(c, "shared tied step", "this program cannot start itself again here: not run");
	kill(d, SIGTERM);
	waitpid(d, NULL, 0);
	unlink(page);
	unlink(logf);
	rmdir(dir);
	return check_done("kdata shared");
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "shared-tied-step") == 0)
		return shared_tied_child();
	if (argc > 2 && strcmp(argv[1], "shared-tied") == 0)
		return shared_tied("/proc/self/exe", argv[2]);
	if (argc > 1 && strcmp(argv[1], "coarse-step") == 0)
		return coarse_step_child();
	if (argc > 1 && strcmp(argv[1], "tied-step") == 0)
		return tied_step_child();
	if (argc > 1 && strcmp(argv[1], "setns-fresh") == 0)
		return setns_fresh_child();
	record();
	pvrecord();
	exact();
	layouts();
	live(argc > 1 && strcmp(argv[1], "timens") == 0);
	glitch(); /* before coarse_fallback raises the coarse floor */
	coarse_fallback();
	coarse_back();
	coarse_rejoin();
	coarse_step("/proc/self/exe");
	run_child("/proc/self/exe", "tied-step", "TIMEHANDS_LINE", "own", "tied step");
	setns_case();
	if (getuid() == 0)
		run_child("/proc/self/exe", "setns-fresh", "TIMEHANDS_LINE", "auto", "setns fresh");
	off();
	return check_done("kdata");
}
