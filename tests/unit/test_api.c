/*
 * The public API against the kernel on this machine: sandwich tests for every
 * accelerated clock id (G1), identical results and errno for every other id,
 * resolutions, status, coherence of time() with gettimeofday() (G3), coarse
 * never above a later fine reading (G4), and the pure pieces (record math,
 * environment parsing, vDSO lookup).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "kclock.h"
#include "record.h"
#include "timehands.h"

#define US 1000LL
#define MS 1000000LL

static int64_t tick_ns(void)
{
	struct timespec r;
	clock_getres(CLOCK_MONOTONIC_COARSE, &r);
	return ts_to_ns(&r) ? ts_to_ns(&r) : 4 * MS;
}

/* k1 <= th <= k2 within eps (fine) or within the coarse lag below (coarse). */
static int64_t sandwich(const char *name, clockid_t th_id, clockid_t k_id, int64_t below, int n)
{
	int64_t worst = 0;
	const int64_t eps = 1 * US;
	for (int i = 0; i < n; i++) {
		struct timespec a, t, b, kc = {0, 0};
		/* coarse: the kernel's own coarse clock first (same id), whose
		 * lag behind its fine clock is what G5 is measured against when
		 * the kernel's tick runs late (a loaded guest) */
		if (below)
			clock_gettime(th_id, &kc);
		clock_gettime(k_id, &a);
		int r = th_clock_gettime(th_id, &t);
		clock_gettime(k_id, &b);
		CHECK(r == 0, "%s: returned %d", name, r);
		CHECK(t.tv_nsec >= 0 && t.tv_nsec < 1000000000L, "%s: tv_nsec %ld", name, t.tv_nsec);
		int64_t k1 = ts_to_ns(&a), v = ts_to_ns(&t), k2 = ts_to_ns(&b);
		int64_t lim = below;
		if (below && k1 - ts_to_ns(&kc) + below / 2 > lim)
			lim = k1 - ts_to_ns(&kc) + below / 2; /* the kernel's lag plus a tick */
		CHECK(v >= k1 - lim - eps && v <= k2 + eps, "%s #%d: %lld not in [%lld, %lld] (%+lld, kernel coarse lag %lld)",
		      name, i, (long long)v, (long long)k1, (long long)k2, (long long)(v < k1 ? v - k1 : v - k2),
		      (long long)(below ? k1 - ts_to_ns(&kc) : 0));
		int64_t err = v < k1 ? k1 - v : v > k2 ? v - k2 : 0;
		if (err > worst && !below)
			worst = err;
	}
	printf("  %-28s worst distance outside the kernel sandwich: %lld ns\n", name, (long long)worst);
	return worst;
}

static void test_sandwiches(void)
{
	int64_t tick = tick_ns();
	const int n = 200000;
	sandwich("CLOCK_MONOTONIC", CLOCK_MONOTONIC, CLOCK_MONOTONIC, 0, n);
	sandwich("CLOCK_REALTIME", CLOCK_REALTIME, CLOCK_REALTIME, 0, n);
	sandwich("CLOCK_MONOTONIC_RAW", CLOCK_MONOTONIC_RAW, CLOCK_MONOTONIC_RAW, 0, n);
	sandwich("CLOCK_BOOTTIME", CLOCK_BOOTTIME, CLOCK_BOOTTIME, 0, n);
	sandwich("CLOCK_TAI", CLOCK_TAI, CLOCK_TAI, 0, n);
	sandwich("TH_CLOCK_MONOTONIC_RELAXED", TH_CLOCK_MONOTONIC_RELAXED, CLOCK_MONOTONIC, 0, n);
	sandwich("TH_CLOCK_REALTIME_RELAXED", TH_CLOCK_REALTIME_RELAXED, CLOCK_REALTIME, 0, n);
	/* G5 without the daemon: no more than the kernel's own coarse lag */
	sandwich("CLOCK_MONOTONIC_COARSE", CLOCK_MONOTONIC_COARSE, CLOCK_MONOTONIC, 2 * tick, n);
	sandwich("CLOCK_REALTIME_COARSE", CLOCK_REALTIME_COARSE, CLOCK_REALTIME, 2 * tick, n);

	for (int i = 0; i < 100000; i++) {
		struct timeval tv;
		struct timespec a, b;
		clock_gettime(CLOCK_REALTIME, &a);
		CHECK(th_gettimeofday(&tv, NULL) == 0, "gettimeofday");
		clock_gettime(CLOCK_REALTIME, &b);
		int64_t v = (int64_t)tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL;
		CHECK(tv.tv_usec >= 0 && tv.tv_usec < 1000000, "tv_usec %ld", (long)tv.tv_usec);
		CHECK(v >= ts_to_ns(&a) - 2 * US && v <= ts_to_ns(&b) + US, "gettimeofday %lld not in [%lld, %lld]",
		      (long long)v, (long long)ts_to_ns(&a), (long long)ts_to_ns(&b));
		/* the library call itself, with the timezone asked for on
		 * every other read (the kernel's, as the system call's) */
		struct timezone tz = {-1, -1}, ktz;
		clock_gettime(CLOCK_REALTIME, &a);
		CHECK((th_gettimeofday)(&tv, i % 2 ? &tz : NULL) == 0, "gettimeofday (library call)");
		clock_gettime(CLOCK_REALTIME, &b);
		v = (int64_t)tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL;
		CHECK(tv.tv_usec >= 0 && tv.tv_usec < 1000000, "tv_usec %ld (library call)", (long)tv.tv_usec);
		CHECK(v >= ts_to_ns(&a) - 2 * US && v <= ts_to_ns(&b) + US,
		      "gettimeofday (library call) %lld not in [%lld, %lld]", (long long)v, (long long)ts_to_ns(&a),
		      (long long)ts_to_ns(&b));
		if (i % 2) {
			CHECK(syscall(SYS_gettimeofday, NULL, &ktz) == 0, "kernel timezone");
			CHECK(tz.tz_minuteswest == ktz.tz_minuteswest && tz.tz_dsttime == ktz.tz_dsttime,
			      "timezone %d/%d, the kernel's %d/%d", tz.tz_minuteswest, tz.tz_dsttime,
			      ktz.tz_minuteswest, ktz.tz_dsttime);
		}
		if (i == 0) {
			struct timezone tz2 = {-1, -1};
			CHECK((th_gettimeofday)(NULL, NULL) == 0, "gettimeofday without a timeval (library call)");
			CHECK((th_gettimeofday)(NULL, &tz2) == 0 && tz2.tz_minuteswest != -1,
			      "gettimeofday of the timezone alone (library call)");
		}
		time_t t1 = time(NULL);
		time_t tt, tr = th_time(&tt);
		clock_gettime(CLOCK_REALTIME, &b);
		CHECK(tr == tt, "th_time stores what it returns");
		/* never behind the kernel's second by more than its own lag,
		 * never ahead of a later fine reading */
		CHECK(tr >= t1 - 1 && tr <= b.tv_sec, "th_time %lld vs kernel %lld..%lld", (long long)tr, (long long)t1,
		      (long long)b.tv_sec);
	}
}

static int kernel_gettime(clockid_t id, struct timespec *ts)
{
	return (int)syscall(SYS_clock_gettime, id, ts);
}

#define CPUCLOCK(pid, which) ((clockid_t)((~(unsigned)(pid) << 3) | (which)))

static void test_other_ids(void)
{
	int fd = open("/dev/null", O_RDONLY);
	clockid_t ids[] = {
		CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID, CLOCK_REALTIME_ALARM, CLOCK_BOOTTIME_ALARM,
		16, 100, 12345, INT_MAX, INT_MIN, -1, -2, -3, -4, -5, -6, -7, -8, -15, -23, -31, -39, -41,
		CPUCLOCK(getpid(), 2), CPUCLOCK(getpid(), 0), CPUCLOCK(gettid(), 6), CPUCLOCK(1, 2),
		CPUCLOCK(999999, 2), CPUCLOCK(fd, 3), CPUCLOCK(12345, 3),
	};
	for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
		struct timespec a = {0, 0}, b = {0, 0};
		errno = 0;
		int rk = kernel_gettime(ids[i], &a);
		int ek = errno;
		errno = 0;
		int rt = th_clock_gettime(ids[i], &b);
		int et = errno;
		CHECK(rk == rt, "id %d: kernel %d, timehands %d", (int)ids[i], rk, rt);
		if (rk != 0)
			CHECK(ek == et, "id %d: kernel errno %d, timehands errno %d", (int)ids[i], ek, et);
		/* resolution: what libc (through the vDSO) answers; a kernel may
		 * answer differently through the vDSO and the system call for
		 * ids it does not know (auxiliary clocks, Linux 6.17+) */
		errno = 0;
		rk = clock_getres(ids[i], &a);
		ek = errno;
		errno = 0;
		rt = th_clock_getres(ids[i], &b);
		et = errno;
		CHECK(rk == rt && (rk == 0 || ek == et), "getres id %d: kernel %d/%d, timehands %d/%d", (int)ids[i],
		      rk, ek, rt, et);
		if (rk == 0)
			CHECK(ts_to_ns(&a) == ts_to_ns(&b), "getres id %d differs", (int)ids[i]);
		/* NULL pointer: same verdict as the kernel */
		errno = 0;
		rk = (int)syscall(SYS_clock_gettime, ids[i], NULL);
		ek = errno;
		errno = 0;
		rt = th_clock_gettime(ids[i], NULL);
		et = errno;
		CHECK(rk == rt && ek == et, "NULL id %d: kernel %d/%d, timehands %d/%d", (int)ids[i], rk, ek, rt, et);
	}
	close(fd);

	/* accelerated ids and extension ids with a NULL pointer: EFAULT */
	clockid_t acc[] = {CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME, CLOCK_TAI,
			   CLOCK_REALTIME_COARSE, CLOCK_MONOTONIC_COARSE, TH_CLOCK_REALTIME_RELAXED,
			   TH_CLOCK_MONOTONIC_RELAXED, TH_CLOCK_PROCESS_CPUTIME_COARSE, TH_CLOCK_THREAD_CPUTIME_COARSE};
	for (size_t i = 0; i < sizeof acc / sizeof *acc; i++) {
		errno = 0;
		CHECK(th_clock_gettime(acc[i], NULL) == -1 && errno == EFAULT, "id %d NULL: errno %d", (int)acc[i],
		      errno);
	}
	/* extension ids are never valid kernel ids */
	clockid_t ext[] = {TH_CLOCK_REALTIME_RELAXED, TH_CLOCK_MONOTONIC_RELAXED, TH_CLOCK_PROCESS_CPUTIME_COARSE,
			   TH_CLOCK_THREAD_CPUTIME_COARSE};
	for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
		struct timespec t;
		CHECK((ext[i] & 7) == 7 && ext[i] < 0, "id %d shape", (int)ext[i]);
		errno = 0;
		CHECK(kernel_gettime(ext[i], &t) == -1 && errno == EINVAL, "kernel accepts extension id %d",
		      (int)ext[i]);
		CHECK(th_clock_gettime(ext[i], &t) == 0, "extension id %d fails", (int)ext[i]);
	}

	/* resolutions consistent with what is returned */
	struct timespec r, k;
	clockid_t fine[] = {CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME, CLOCK_TAI,
			    TH_CLOCK_REALTIME_RELAXED, TH_CLOCK_MONOTONIC_RELAXED};
	for (size_t i = 0; i < sizeof fine / sizeof *fine; i++) {
		CHECK(th_clock_getres(fine[i], &r) == 0 && r.tv_sec == 0 && r.tv_nsec == 1, "getres %d", (int)fine[i]);
		CHECK(th_clock_getres(fine[i], NULL) == 0, "getres %d NULL", (int)fine[i]);
	}
	CHECK(th_clock_getres(CLOCK_MONOTONIC_COARSE, &r) == 0 && clock_getres(CLOCK_MONOTONIC_COARSE, &k) == 0 &&
		      ts_to_ns(&r) == ts_to_ns(&k),
	      "coarse resolution");
	CHECK(th_clock_getres(CLOCK_REALTIME_COARSE, &r) == 0 && clock_getres(CLOCK_REALTIME_COARSE, &k) == 0 &&
		      ts_to_ns(&r) == ts_to_ns(&k),
	      "realtime coarse resolution");
}

static void test_status(void)
{
	struct th_status st;
	memset(&st, 0xa5, sizeof st);
	CHECK(th_status(&st, sizeof st) == 0, "th_status");
	CHECK(st.size == sizeof st, "size %u", st.size);
	CHECK(st.mode == TH_MODE_LOCAL || st.mode == TH_MODE_KERNEL || st.mode == TH_MODE_SHARED, "mode %u", st.mode);
	/* not the fastest mode -> a reason, always */
	CHECK(st.mode != TH_MODE_KERNEL || st.reason[0], "kernel mode without a reason");
	CHECK(st.reason[sizeof st.reason - 1] == 0 || memchr(st.reason, 0, sizeof st.reason), "reason terminated");
	if (st.mode == TH_MODE_LOCAL) {
		CHECK(st.counter != TH_COUNTER_NONE, "local mode without a counter");
		CHECK(st.freq_hz > 1e6 && st.freq_hz < 1e11, "frequency %f", st.freq_hz);
		CHECK(st.error_ns <= st.error_bound_ns + 1000 && st.error_ns >= -st.error_bound_ns - 1000,
		      "error %lld bound %lld", (long long)st.error_ns, (long long)st.error_bound_ns);
	}
	CHECK(st.tick_ns > 0, "tick");
	/* the ordered counter read: the one the status names is the one the
	 * fast paths use, and on x86 the cheaper one the CPU declares ordered
	 * (RDTSCP, unless LFENCE is declared always serializing; on Intel the
	 * late read) */
	const char *want = "none";
	uint32_t op = *th__fast()->ctr_early;
	if (op) {
#if defined(__x86_64__)
		unsigned a, b, c, d, rdtscp = 0, lfence = 0;
		if ((unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x80000001u) {
			__cpuid(0x80000001u, a, b, c, d);
			rdtscp = (d >> 27) & 1;
		}
		if ((unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x80000021u) {
			__cpuid_count(0x80000021u, 0, a, b, c, d);
			lfence = (a >> 2) & 1;
		}
		/* Intel's LFENCE is serializing by the architecture: there the
		 * fence after the word and the counter after the copy, unless
		 * TIMEHANDS_COUNTER_READ says otherwise */
		__cpuid(0, a, b, c, d);
		unsigned intel = b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;
		const char *order = getenv("TIMEHANDS_COUNTER_READ");
		unsigned late = order && strcmp(order, "late") == 0	 ? intel || lfence
				: order && strcmp(order, "early") == 0 ? 0
								       : intel;
		unsigned wop = late ? 3u : rdtscp && !lfence ? 2u : 1u;
		want = wop == 3 ? "late rdtsc" : wop == 2 ? "rdtscp" : "lfence;rdtsc";
		CHECK(op == wop, "ctr_early %u, rdtscp %u lfence serializing %u intel %u", op, rdtscp, lfence, intel);
#elif defined(__aarch64__)
		want = op == 3 ? "late cntvct" : "isb;cntvct";
#endif
	}
	CHECK(strcmp(st.counter_read, want) == 0, "status counter_read \"%s\", expected \"%s\"", st.counter_read, want);
	CHECK(st.mode == TH_MODE_KERNEL || op != 0, "mode %u without a counter read", st.mode);
	printf("  status: mode %u counter %u freq %.3f Hz (%s, +-%.3f ppm) error %lld ns +- %lld reason \"%s\"\n",
	       st.mode, st.counter, st.freq_hz, st.freq_source, st.freq_uncertainty_ppm, (long long)st.error_ns,
	       (long long)st.error_bound_ns, st.reason);

	/* an older caller's smaller struct is filled up to its size only */
	unsigned char buf[sizeof st + 16];
	memset(buf, 0x5a, sizeof buf);
	size_t small = offsetof(struct th_status, freq_source);
	CHECK(th_status((struct th_status *)(void *)buf, small) == 0, "small status");
	for (size_t i = small; i < sizeof buf; i++)
		CHECK(buf[i] == 0x5a, "byte %zu written beyond size", i);
	errno = 0;
	CHECK(th_status(&st, 4) == -1 && errno == EINVAL, "tiny size");
	CHECK(th_status(NULL, sizeof st) == -1 && errno == EINVAL, "NULL status");
}

/* G3 and G4 in one thread: time() never behind a second gettimeofday()
 * showed, coarse never above a later fine reading. */
static void test_coherence(void)
{
	/* The window where time() and gettimeofday() disagree is the first
	 * few milliseconds of each second: run across several boundaries. */
	long pairs = 0, incoherent = 0, coarse_above = 0, kpairs = 0, kernel_incoherent = 0;
	int boundaries = 0;
	time_t first = th_time(NULL);
	int64_t end = raw_now_ns() + 2600 * MS;
	while (raw_now_ns() < end) {
		for (int i = 0; i < 1000; i++) {
			struct timeval tv;
			th_gettimeofday(&tv, NULL);
			time_t t = th_time(NULL);
			pairs++;
			if (t < tv.tv_sec)
				incoherent++;
			struct timespec c, f;
			th_clock_gettime(CLOCK_REALTIME_COARSE, &c);
			th_clock_gettime(CLOCK_REALTIME, &f);
			if (ts_to_ns(&c) > ts_to_ns(&f))
				coarse_above++;
			th_clock_gettime(CLOCK_MONOTONIC_COARSE, &c);
			th_clock_gettime(CLOCK_MONOTONIC, &f);
			if (ts_to_ns(&c) > ts_to_ns(&f))
				coarse_above++;
			t = th_time(NULL);
			th_gettimeofday(&tv, NULL);
			if (tv.tv_sec < t)
				coarse_above++;
			gettimeofday(&tv, NULL);
			kpairs++;
			if (time(NULL) < tv.tv_sec)
				kernel_incoherent++;
		}
	}
	boundaries = (int)(th_time(NULL) - first);
	CHECK(boundaries >= 2, "only %d second boundaries crossed", boundaries);
	CHECK(incoherent == 0, "time() behind gettimeofday() %ld times", incoherent);
	CHECK(coarse_above == 0, "coarse above a later fine reading %ld times", coarse_above);
	printf("  coherence over %d second boundaries: timehands %ld of %ld pairs incoherent; "
	       "the kernel's time()/gettimeofday(): %ld of %ld (%.3f %%)\n",
	       boundaries, incoherent, pairs, kernel_incoherent, kpairs, 100.0 * (double)kernel_incoherent / (double)kpairs);
}

/* G3's floor follows every REALTIME reading: once a reading has returned
 * second S, the floor (th__fast()->g3) holds at least S in the same epoch,
 * also for a reading whose line carried into S from the record's second
 * (the first readings after each second boundary). Library calls and the
 * header's inline reads, over more than two boundaries. */
static void test_g3_floor(void)
{
	const struct th__fast *f = th__fast();
	CHECK(f && f->g3, "no G3 floor published");
	if (!f || !f->g3)
		return;
	const uint64_t mask = ((uint64_t)1 << 48) - 1;
	long reads = 0, below = 0, boundaries = 0;
	int64_t last = -1;
	int64_t end = raw_now_ns() + 2300 * MS;
	while (raw_now_ns() < end) {
		for (int i = 0; i < 1000; i++) {
			struct timespec ts;
			struct timeval tv;
			int64_t sec;
			/* a REALTIME step (a new epoch) resets the floor: skipped */
			uint64_t w0 = __atomic_load_n(f->g3, __ATOMIC_RELAXED);
			if (i % 3 == 0) {
				(th_clock_gettime)(CLOCK_REALTIME, &ts);
				sec = ts.tv_sec;
			} else if (i % 3 == 1) {
				th_clock_gettime(CLOCK_REALTIME, &ts);
				sec = ts.tv_sec;
			} else {
				(th_gettimeofday)(&tv, NULL);
				sec = tv.tv_sec;
			}
			uint64_t w = __atomic_load_n(f->g3, __ATOMIC_RELAXED);
			reads++;
			if ((w >> 48) == (w0 >> 48) && (int64_t)(w & mask) < sec)
				below++;
			if (last >= 0 && sec > last)
				boundaries++;
			last = sec;
		}
	}
	CHECK(boundaries >= 2, "only %ld second boundaries crossed", boundaries);
	CHECK(below == 0, "G3 floor below a returned REALTIME second %ld times of %ld", below, reads);
	printf("  G3 floor: at or above the second of each of %ld REALTIME readings over %ld boundaries\n", reads,
	       boundaries);
}

/* The library's reads per clock that the header's inline reads call where
 * the library must read (th__fast()->fns): each within the kernel's
 * sandwich of its own clock, so that the table maps every clock to its read. */
static void test_fine_fns(void)
{
	struct timespec t;
	th_clock_gettime(CLOCK_MONOTONIC, &t); /* attach */
	const struct th__fast *f = th__fast();
	CHECK(f->minor >= 7 && f->fns != NULL, "th__fast: no table of reads (minor %u)", f->minor);
	if (!f->fns)
		return;
	const clockid_t ids[5] = {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME, CLOCK_TAI, CLOCK_MONOTONIC_RAW};
	for (int i = 0; i < 20000; i++) {
		struct timespec a, b;
		int k = i % 8;
		clockid_t id = k < 5 ? ids[k] : k == 5 ? CLOCK_MONOTONIC : CLOCK_REALTIME;
		int64_t v;
		clock_gettime(id, &a);
		if (k < 5) {
			CHECK(f->fns->fine[k](&t) == 0, "fns->fine[%d]", k);
			v = ts_to_ns(&t);
		} else if (k < 7) {
			CHECK(f->fns->relaxed[k - 5](&t) == 0, "fns->relaxed[%d]", k - 5);
			v = ts_to_ns(&t);
		} else {
			struct timeval tv;
			CHECK(f->fns->tod(&tv) == 0, "fns->tod");
			v = (int64_t)tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL;
		}
		clock_gettime(id, &b);
		CHECK(v >= ts_to_ns(&a) - (k == 7 ? 1000 : 0) - US && v <= ts_to_ns(&b) + US,
		      "fns entry %d: %lld not in [%lld, %lld]", k, (long long)v, (long long)ts_to_ns(&a),
		      (long long)ts_to_ns(&b));
	}
	printf("  the reads per clock of th__fast(): each inside its clock's kernel sandwich\n");
}

static void test_relaxed_per_thread(void)
{
	struct timespec t;
	int64_t last_m = 0, last_r = 0;
	for (int i = 0; i < 2000000; i++) {
		th_clock_gettime(TH_CLOCK_MONOTONIC_RELAXED, &t);
		CHECK(ts_to_ns(&t) >= last_m, "relaxed monotonic went back %lld", (long long)(last_m - ts_to_ns(&t)));
		last_m = ts_to_ns(&t);
		th_clock_gettime(TH_CLOCK_REALTIME_RELAXED, &t);
		CHECK(ts_to_ns(&t) >= last_r, "relaxed realtime went back");
		last_r = ts_to_ns(&t);
	}
}

/* Consecutive records agree exactly where both are valid. */
static void test_record_math(void)
{
	uint64_t seed = 12345;
	for (int i = 0; i < 200000; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		struct th_snap a;
		memset(&a, 0, sizeof a);
		a.anchor = seed;
		a.ns[0] = seed >> 8;
		a.frac[0] = (uint32_t)(seed >> 13);
		a.lo[0] = (int64_t)(seed % ((uint64_t)1 << 40)) + 1000;
		a.hi[0] = a.lo[0] + (int64_t)(seed % 100000) - 50000;
		int64_t e = (int64_t)(seed % 20000000) + 1;
		struct th_snap b = a;
		b.anchor = a.anchor + (uint64_t)e;
		th_line_at(a.ns[0], a.frac[0], a.hi[0], e, &b.ns[0], &b.frac[0]);
		b.lo[0] = a.hi[0];
		b.hi[0] = a.hi[0] + 777;
		for (int j = 0; j < 8; j++) {
			int64_t dc = (int64_t)((seed >> (j * 5)) % (uint64_t)(e + 1));
			uint64_t va = th_line_eval(&a, 0, dc), vb = th_line_eval(&b, 0, dc - e);
			CHECK(va == vb, "records disagree at %lld: %llu vs %llu", (long long)dc, (unsigned long long)va,
			      (unsigned long long)vb);
		}
	}
	/* phi: never below k, never above max(k, C), non-decreasing, slope <= 1 */
	for (uint64_t C = 0; C < 3000; C += 250)
		for (uint64_t k = 0; k < 3000; k += 7) {
			uint64_t p = th_phi(k, C, 1000), q = th_phi(k + 1, C, 1000);
			CHECK(p >= k && p <= (k > C ? k : C) && p <= k + 1000, "phi(%llu, %llu)", (unsigned long long)k,
			      (unsigned long long)C);
			CHECK(q >= p && q <= p + 1, "phi slope at %llu", (unsigned long long)k);
		}
}

struct env {
	const char *name[8], *value[8];
};

static const char *fake_getenv(const char *name, void *ctx)
{
	struct env *e = ctx;
	for (int i = 0; i < 8 && e->name[i]; i++)
		if (!strcmp(e->name[i], name))
			return e->value[i];
	return NULL;
}

static void test_config(void)
{
	struct th_config c;
	struct env none = {{NULL}, {NULL}};
	th_config_parse(&c, fake_getenv, &none);
	CHECK(!c.disable && !c.relaxed && c.counter == TH_CTR_AUTO && !c.warning[0], "defaults");
	CHECK(!strcmp(c.page, TH_DEFAULT_PAGE), "default page");
	CHECK(c.counter_read == TH_CTR_READ_AUTO, "default counter read");
	struct env good = {{"TIMEHANDS_DISABLE", "TIMEHANDS_RELAXED", "TIMEHANDS_COUNTER", "TIMEHANDS_PAGE",
			    "TIMEHANDS_CPUTIME", "TIMEHANDS_COUNTER_READ"},
			   {"yes", "1", "force", "/tmp/p", "coarse", "Late"}};
	th_config_parse(&c, fake_getenv, &good);
	CHECK(c.disable && c.relaxed && c.counter == TH_CTR_FORCE && c.cputime_coarse && !c.warning[0],
	      "good values: %s", c.warning);
	CHECK(c.counter_read == TH_CTR_READ_LATE, "counter read late: %d", c.counter_read);
	good.value[5] = "early";
	th_config_parse(&c, fake_getenv, &good);
	CHECK(c.counter_read == TH_CTR_READ_EARLY, "counter read early: %d", c.counter_read);
	CHECK(!strcmp(c.page, "/tmp/p"), "page");
	struct env bad = {{"TIMEHANDS_DISABLE", "TIMEHANDS_RELAXED", "TIMEHANDS_COUNTER", "TIMEHANDS_PAGE",
			   "TIMEHANDS_CPUTIME", "TIMEHANDS_COUNTER_READ"},
			  {"maybe", "2", "fast", "relative/path", "\x01\xff", "sooner"}};
	th_config_parse(&c, fake_getenv, &bad);
	CHECK(!c.disable && !c.relaxed && c.counter == TH_CTR_AUTO && !c.cputime_coarse &&
		      c.counter_read == TH_CTR_READ_AUTO,
	      "bad values -> defaults");
	CHECK(strstr(c.warning, "TIMEHANDS_COUNTER_READ=sooner") != NULL, "bad counter read named: %s", c.warning);
	CHECK(!strcmp(c.page, TH_DEFAULT_PAGE), "bad page -> default");
	CHECK(strstr(c.warning, "TIMEHANDS_DISABLE=maybe") && strstr(c.warning, "TIMEHANDS_COUNTER=fast") &&
		      strstr(c.warning, "TIMEHANDS_PAGE=relative/path") && strstr(c.warning, "TIMEHANDS_CPUTIME=??"),
	      "warning names every bad variable: %s", c.warning);
	CHECK(!strchr(c.warning, '\n'), "one line");

	long id;
	CHECK(th_parse_clockid("CLOCK_MONOTONIC", &id) == 0 && id == CLOCK_MONOTONIC, "symbolic id");
	CHECK(th_parse_clockid("monotonic_raw", &id) == 0 && id == CLOCK_MONOTONIC_RAW, "lower-case id");
	CHECK(th_parse_clockid("TH_CLOCK_MONOTONIC_RELAXED", &id) == 0 && id == TH_CLOCK_MONOTONIC_RELAXED, "ext id");
	CHECK(th_parse_clockid("-17", &id) == 0 && id == -17, "negative id");
	CHECK(th_parse_clockid("2147483648", &id) == -1, "overflow");
	CHECK(th_parse_clockid("", &id) == -1 && th_parse_clockid("-", &id) == -1 && th_parse_clockid("1x", &id) == -1,
	      "garbage");
}

static void test_vdso_lookup(void)
{
	const void *base = (const void *)getauxval(AT_SYSINFO_EHDR);
	if (!base) {
		printf("  no vDSO in this process: lookup not tested\n");
		return;
	}
#if defined(__x86_64__)
	CHECK(th_vdso_lookup(base, "__vdso_clock_gettime") != NULL, "vdso clock_gettime");
	CHECK(th_vdso_lookup(base, "__vdso_time") != NULL, "vdso time");
#elif defined(__aarch64__)
	CHECK(th_vdso_lookup(base, "__kernel_clock_gettime") != NULL, "vdso clock_gettime");
#endif
	CHECK(th_vdso_lookup(base, "no_such_symbol") == NULL, "absent symbol");
}

int main(void)
{
	test_record_math();
	test_config();
	test_vdso_lookup();
	test_sandwiches();
	test_other_ids();
	test_status();
	test_coherence();
	test_g3_floor();
	test_fine_fns();
	test_relaxed_per_thread();
	return check_done("test_api");
}
