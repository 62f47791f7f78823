/*
 * Every libc clock entry point, called the way a program calls it, against a
 * raw-syscall sandwich: k1 <= value <= k2 within 1 us for the fine clocks, the
 * coarse ones lagging by no more than two kernel ticks, pass-through ids with
 * the kernel's exact result and errno. Under the preload also: each symbol
 * binds to it (dladdr; and call by call under the counting build), the
 * extension ids work, NULL answers EFAULT, time() never lags a second that
 * gettimeofday() has returned (G3, across a second boundary).
 *
 *   compat_symbols [--quick] [--cputime-coarse] [--expect-mapped NAME]
 */
#include "compat.h"

#include <fcntl.h>
#include <sys/time.h>
#include <sys/times.h>

#if __has_include(<sys/timeb.h>)
#include <sys/timeb.h>
#define HAVE_FTIME 1
#endif

#include "timehands.h"

#define ITER 300

typedef int (*gettime_fn)(clockid_t, struct timespec *);
typedef int (*gtod_fn)(struct timeval *, void *);

static int preload;
static int64_t tick_ns;

/* ------------------------------------------------------------ fine clocks */

static void sandwich_fine(const char *name, gettime_fn fn, clockid_t id)
{
	int64_t last = 0;
	for (int i = 0; i < ITER; i++) {
		struct timespec ts = {0, 0};
		int64_t k1 = sys_ns(id);
		int r = fn(id, &ts);
		int64_t k2 = sys_ns(id);
		int64_t v = ts_ns(&ts);
		CHECK(r == 0, "%s(%d) returned %d errno %d", name, id, r, errno);
		CHECK(ts.tv_nsec >= 0 && ts.tv_nsec < NS, "%s(%d) nsec %ld", name, id, ts.tv_nsec);
		CHECK(v >= k1 - SLACK_NS && v <= k2 + SLACK_NS,
		      "%s(%d): %lld outside the kernel's [%lld, %lld]", name, id, (long long)v, (long long)k1,
		      (long long)k2);
		if (id != CLOCK_REALTIME && id != CLOCK_TAI)
			CHECK(v >= last, "%s(%d) went back %lld -> %lld", name, id, (long long)last, (long long)v);
		last = v;
	}
}

/* A coarse clock is never behind the kernel's own coarse clock by more than
 * two ticks (G5: the kernel's tick is late by tens of ms on a busy VM, so
 * the bound is against the kernel's coarse value, not its fine one) and
 * never exceeds a later fine reading (G4). */
static void sandwich_coarse(const char *name, gettime_fn fn, clockid_t id, clockid_t fine)
{
	int64_t last = 0;
	for (int i = 0; i < ITER; i++) {
		struct timespec ts = {0, 0};
		int64_t kc = sys_ns(id);
		int r = fn(id, &ts);
		int64_t k2 = sys_ns(fine);
		int64_t v = ts_ns(&ts);
		CHECK(r == 0, "%s(%d) returned %d", name, id, r);
		CHECK(v >= kc - 2 * tick_ns - SLACK_NS && v <= k2 + SLACK_NS,
		      "%s(%d): %lld outside [kernel coarse %lld - 2 ticks, fine %lld]", name, id, (long long)v,
		      (long long)kc, (long long)k2);
		if (id == CLOCK_MONOTONIC_COARSE)
			CHECK(v >= last, "%s went back", name);
		last = v;
	}
}

static void check_gettimeofday(const char *name, gtod_fn fn)
{
	for (int i = 0; i < ITER; i++) {
		struct timeval tv = {0, 0};
		int64_t k1 = sys_ns(CLOCK_REALTIME);
		int r = fn(&tv, NULL);
		int64_t k2 = sys_ns(CLOCK_REALTIME);
		int64_t v = (int64_t)tv.tv_sec * NS + (int64_t)tv.tv_usec * 1000;
		CHECK(r == 0, "%s returned %d", name, r);
		CHECK(tv.tv_usec >= 0 && tv.tv_usec < 1000000, "%s usec %ld", name, (long)tv.tv_usec);
		/* truncated to the microsecond */
		CHECK(v >= k1 - SLACK_NS - 1000 && v <= k2 + SLACK_NS, "%s: %lld outside [%lld, %lld]", name,
		      (long long)v, (long long)k1, (long long)k2);
	}
	/* the obsolete timezone argument is still filled in */
	struct timezone tz = {-1, -1}, ktz = {-2, -2};
	struct timeval tv;
	CHECK(fn(&tv, &tz) == 0, "%s with tz", name);
	syscall(SYS_gettimeofday, NULL, &ktz);
	CHECK(tz.tz_minuteswest == ktz.tz_minuteswest && tz.tz_dsttime == ktz.tz_dsttime, "%s tz differs",
	      name);
	/* a NULL timeval is valid: only the timezone, or nothing */
	gtod_fn volatile f = fn;
	struct timezone tz2 = {-1, -1};
	CHECK(f(NULL, &tz2) == 0 && tz2.tz_minuteswest == ktz.tz_minuteswest, "%s(NULL, tz)", name);
	CHECK(f(NULL, NULL) == 0, "%s(NULL, NULL)", name);
}

static void check_time(void)
{
	for (int i = 0; i < ITER; i++) {
		int64_t kc = sys_ns(CLOCK_REALTIME_COARSE);
		time_t t2 = 0;
		time_t t = time(&t2);
		int64_t k2 = sys_ns(CLOCK_REALTIME);
		CHECK(t == t2, "time() %lld != *t %lld", (long long)t, (long long)t2);
		/* not behind the kernel's own cached second, not ahead of a
		 * later fine reading */
		CHECK((int64_t)t * NS <= k2 && t >= kc / NS, "time() %lld outside [%lld, %lld]", (long long)t,
		      (long long)kc, (long long)k2);
	}
	CHECK(time(NULL) > 0, "time(NULL)");
}

static void check_timespec_get(void)
{
	for (int i = 0; i < ITER; i++) {
		struct timespec ts;
		int64_t k1 = sys_ns(CLOCK_REALTIME);
		int r = timespec_get(&ts, TIME_UTC);
		int64_t k2 = sys_ns(CLOCK_REALTIME);
		CHECK(r == TIME_UTC, "timespec_get returned %d", r);
		CHECK(ts_ns(&ts) >= k1 - SLACK_NS && ts_ns(&ts) <= k2 + SLACK_NS, "timespec_get outside");
	}
	struct timespec ts;
	CHECK(timespec_get(&ts, 12345) == 0, "timespec_get with an unknown base");
	CHECK(timespec_getres(&ts, 12345) == 0, "timespec_getres with an unknown base");
	struct timespec r1, r2;
	CHECK(timespec_getres(&r1, TIME_UTC) == TIME_UTC, "timespec_getres");
	CHECK(clock_getres(CLOCK_REALTIME, &r2) == 0 && ts_ns(&r1) == ts_ns(&r2),
	      "timespec_getres(TIME_UTC) %lld != clock_getres(REALTIME) %lld", (long long)ts_ns(&r1),
	      (long long)ts_ns(&r2));
	CHECK(timespec_getres(NULL, TIME_UTC) == TIME_UTC, "timespec_getres(NULL)");
}

#ifdef HAVE_FTIME
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void check_ftime(void)
{
	for (int i = 0; i < ITER; i++) {
		struct timeb tb;
		memset(&tb, 0x55, sizeof tb);
		int64_t k1 = sys_ns(CLOCK_REALTIME);
		int r = ftime(&tb);
		int64_t k2 = sys_ns(CLOCK_REALTIME);
		int64_t v = (int64_t)tb.time * NS + (int64_t)tb.millitm * 1000000;
		CHECK(r == 0, "ftime returned %d", r);
		CHECK(tb.millitm < 1000 && tb.timezone == 0 && tb.dstflag == 0, "ftime fields");
		CHECK(v >= k1 - SLACK_NS - 1000000 && v <= k2 + SLACK_NS, "ftime outside");
	}
}
#pragma GCC diagnostic pop
#endif

/* --------------------------------------------------------- resolution */

static void check_getres(void)
{
	static const clockid_t ids[] = {CLOCK_REALTIME,         CLOCK_MONOTONIC,         CLOCK_MONOTONIC_RAW,
					CLOCK_BOOTTIME,         CLOCK_TAI,               CLOCK_REALTIME_COARSE,
					CLOCK_MONOTONIC_COARSE, CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID};
	for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
		struct timespec res = {-1, -1};
		int r = clock_getres(ids[i], &res);
		CHECK(r == 0, "clock_getres(%d) = %d", ids[i], r);
		int64_t k = sys_res_ns(ids[i]);
		if (ids[i] == CLOCK_REALTIME_COARSE || ids[i] == CLOCK_MONOTONIC_COARSE)
			/* coarse values move in kernel ticks */
			CHECK(ts_ns(&res) == k, "clock_getres(%d) %lld, kernel %lld", ids[i], (long long)ts_ns(&res),
			      (long long)k);
		else
			/* fine values are exact nanoseconds: never coarser than the kernel says */
			CHECK(ts_ns(&res) >= 1 && ts_ns(&res) <= (k > 1 ? k : 1), "clock_getres(%d) %lld vs kernel %lld",
			      ids[i], (long long)ts_ns(&res), (long long)k);
		CHECK(clock_getres(ids[i], NULL) == 0, "clock_getres(%d, NULL)", ids[i]);
	}
	struct timespec res;
	errno = 0;
	CHECK(clock_getres(4242, &res) == -1 && errno == EINVAL, "clock_getres(4242) errno %d", errno);
}

/* ------------------------------------------------- pass-through and errors */

/* The kernel's answer through the interposed entry point: same return value,
 * same errno, and (for a successful read) a value inside the sandwich. */
static void same_as_kernel(clockid_t id, int sandwich)
{
	struct timespec a = {0, 0}, b = {0, 0};
	errno = 0;
	int64_t k1 = sys_ns(CLOCK_MONOTONIC);
	long rk = syscall(SYS_clock_gettime, id, &b);
	int ek = errno;
	errno = 0;
	int r = clock_gettime(id, &a);
	int e = errno;
	CHECK(r == (int)rk && (r == 0 || e == ek), "clock_gettime(%d): %d/%d, kernel %ld/%d", id, r, e, rk, ek);
	if (r == 0 && sandwich) {
		struct timespec c;
		syscall(SYS_clock_gettime, id, &c);
		CHECK(ts_ns(&a) >= ts_ns(&b) && ts_ns(&a) <= ts_ns(&c), "clock_gettime(%d) outside its sandwich", id);
	}
	/* clock_getres answers like the kernel for a pass-through id */
	errno = 0;
	rk = syscall(SYS_clock_getres, id, &b);
	ek = errno;
	errno = 0;
	r = clock_getres(id, &a);
	e = errno;
	CHECK(r == (int)rk && (r == 0 || e == ek), "clock_getres(%d): %d/%d, kernel %ld/%d", id, r, e, rk, ek);
	(void)k1;
}

static void check_passthrough(void)
{
	same_as_kernel(CLOCK_PROCESS_CPUTIME_ID, 1);
	same_as_kernel(CLOCK_THREAD_CPUTIME_ID, 1);
	same_as_kernel(4242, 0);
	same_as_kernel(-4242, 0);
	same_as_kernel(CLOCK_REALTIME_ALARM, 0);
	same_as_kernel(CLOCK_BOOTTIME_ALARM, 0);
	/* another process's CPU clock (negative, low bits 2) */
	clockid_t cpu;
	if (clock_getcpuclockid(getppid(), &cpu) == 0)
		same_as_kernel(cpu, 0);
	/* a thread CPU clock of a thread that does not exist */
	same_as_kernel((clockid_t)((~999999u << 3) | 6u), 0);
	/* an fd clock on a file that is not a clock device */
	int fd = open("/dev/null", O_RDONLY);
	if (fd >= 0) {
		same_as_kernel((clockid_t)((~(unsigned)fd << 3) | 3u), 0);
		close(fd);
	}

	/* extension ids: served by timehands under the preload, unknown to
	 * the kernel otherwise; never handed to the kernel (which would say
	 * EINVAL) */
	static const clockid_t ext[] = {TH_CLOCK_REALTIME_RELAXED, TH_CLOCK_MONOTONIC_RELAXED,
					TH_CLOCK_PROCESS_CPUTIME_COARSE, TH_CLOCK_THREAD_CPUTIME_COARSE};
	for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
		struct timespec ts;
		errno = 0;
		int r = clock_gettime(ext[i], &ts);
		if (preload)
			CHECK(r == 0, "extension id %d: %d errno %d", ext[i], r, errno);
		else
			CHECK(r == -1 && errno == EINVAL, "extension id %d without the preload: %d", ext[i], r);
	}
	if (preload) {
		sandwich_fine("clock_gettime", clock_gettime, CLOCK_MONOTONIC);
		struct timespec ts;
		int64_t k1 = sys_ns(CLOCK_MONOTONIC);
		clock_gettime(TH_CLOCK_MONOTONIC_RELAXED, &ts);
		int64_t k2 = sys_ns(CLOCK_MONOTONIC);
		CHECK(ts_ns(&ts) >= k1 - SLACK_NS && ts_ns(&ts) <= k2 + SLACK_NS, "MONOTONIC_RELAXED outside");
		k1 = sys_ns(CLOCK_REALTIME);
		clock_gettime(TH_CLOCK_REALTIME_RELAXED, &ts);
		k2 = sys_ns(CLOCK_REALTIME);
		CHECK(ts_ns(&ts) >= k1 - SLACK_NS && ts_ns(&ts) <= k2 + SLACK_NS, "REALTIME_RELAXED outside");

		/* NULL: EFAULT like the system call (libc itself would crash in
		 * the vDSO); an unknown id with NULL: EINVAL first */
		/* through a pointer: libc declares the argument nonnull */
		gettime_fn volatile fn = clock_gettime;
		errno = 0;
		CHECK(fn(CLOCK_MONOTONIC, NULL) == -1 && errno == EFAULT, "NULL: errno %d", errno);
		errno = 0;
		CHECK(fn(4242, NULL) == -1 && errno == EINVAL, "4242, NULL: errno %d", errno);
	}
}

/* --------------------------------------------------------- times, clock */

static volatile uint64_t spin; /* CPU time burnt between readings */

static void check_cputime(int coarse)
{
	/* exact: within the sandwich; coarse: may lag by a few ticks */
	int64_t lag = coarse ? 3 * tick_ns + 1000000 : 0;
	for (int i = 0; i < 50; i++) {
		for (int j = 0; j < 20000; j++)
			spin += (uint64_t)j;
		int64_t k1 = sys_ns(CLOCK_PROCESS_CPUTIME_ID);
		clock_t c = clock();
		int64_t k2 = sys_ns(CLOCK_PROCESS_CPUTIME_ID);
		int64_t v = (int64_t)c * (NS / CLOCKS_PER_SEC);
		CHECK(c != (clock_t)-1, "clock() failed");
		CHECK(v >= k1 - 1000 - lag && v <= k2, "clock() %lld outside [%lld, %lld]", (long long)v, (long long)k1,
		      (long long)k2);

		struct tms t1, t, t2;
		clock_t r1 = (clock_t)syscall(SYS_times, &t1);
		clock_t r = times(&t);
		clock_t r2 = (clock_t)syscall(SYS_times, &t2);
		long hz = sysconf(_SC_CLK_TCK);
		long lag_ticks = coarse ? (long)((3 * tick_ns + 1000000) * hz / NS) + 1 : 0;
		/* coarse: the elapsed ticks come from MONOTONIC with an offset
		 * fixed at the first call; the kernel's tick has another phase */
		long phase = coarse ? 2 : 0;
		CHECK(r >= r1 - lag_ticks && r <= r2 + phase, "times() %ld outside [%ld, %ld]", (long)r, (long)r1,
		      (long)r2);
		CHECK(t.tms_utime + t.tms_stime >= t1.tms_utime + t1.tms_stime - lag_ticks &&
			      t.tms_utime + t.tms_stime <= t2.tms_utime + t2.tms_stime,
		      "times() CPU %ld outside [%ld, %ld]", (long)(t.tms_utime + t.tms_stime),
		      (long)(t1.tms_utime + t1.tms_stime), (long)(t2.tms_utime + t2.tms_stime));
	}
	/* a bad pointer: the kernel's EFAULT (libc probes the pointer itself
	 * and crashes, so only under the preload, and only where the value
	 * comes from the system call) */
	if (preload && !coarse) {
		errno = 0;
		struct tms *volatile bad = (struct tms *)8;
		CHECK(times(bad) == (clock_t)-1 && errno == EFAULT, "times(bad) errno %d", errno);
	}
}

/* --------------------------------------------------------------- G3 */

/* Across one second boundary: time() after gettimeofday() never shows the
 * previous second. Only the preload promises it (the kernel breaks it). */
static void check_coherence(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	time_t start = tv.tv_sec;
	uint64_t pairs = 0, bad = 0, bad_coarse = 0;
	for (;;) {
		gettimeofday(&tv, NULL);
		time_t t = time(NULL);
		bad += t < tv.tv_sec;
		struct timespec f, c;
		clock_gettime(CLOCK_REALTIME, &f);
		clock_gettime(CLOCK_REALTIME_COARSE, &c);
		bad_coarse += c.tv_sec < f.tv_sec;
		pairs++;
		/* 20 ms past the boundary: the kernel's incoherence is over */
		if (tv.tv_sec > start + 1 || (tv.tv_sec == start + 1 && tv.tv_usec > 20000))
			break;
	}
	CHECK(bad == 0, "time() behind gettimeofday() in %llu of %llu pairs", (unsigned long long)bad,
	      (unsigned long long)pairs);
	CHECK(bad_coarse == 0, "REALTIME_COARSE behind REALTIME in %llu of %llu pairs",
	      (unsigned long long)bad_coarse, (unsigned long long)pairs);
}

/* ------------------------------------------------------------- binding */

static int (*sym_clock_gettime_internal)(clockid_t, struct timespec *);
static int (*sym_gettimeofday_internal)(struct timeval *, void *);

static void check_binding(void)
{
	struct {
		const char *name;
		void *addr;
	} syms[] = {
		{"clock_gettime", (void *)&clock_gettime}, {"clock_getres", (void *)&clock_getres},
		{"gettimeofday", (void *)&gettimeofday},   {"time", (void *)&time},
		{"timespec_get", (void *)&timespec_get},   {"timespec_getres", (void *)&timespec_getres},
		{"times", (void *)&times},                 {"clock", (void *)&clock},
		{"__clock_gettime", (void *)sym_clock_gettime_internal},
		{"__gettimeofday", (void *)sym_gettimeofday_internal},
#ifdef HAVE_FTIME
		{"ftime", dlsym(RTLD_DEFAULT, "ftime")},
#endif
	};
	const char *w = getenv("TH_COMPAT_WRAPPED");
	if (preload && w && strcmp(w, "1") == 0)
		return; /* another interposer wraps some of them; the counts prove arrival */
	for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
		if (!syms[i].addr)
			continue; /* not exported by this libc */
		CHECK(in_preload(syms[i].addr) == expect_bound(), "%s %s bound to the preload", syms[i].name,
		      expect_bound() ? "not" : "unexpectedly");
	}
	CHECK(!preload || sym_clock_gettime_internal, "__clock_gettime not found");
}

/* Call by call, under the counting build of the preload. */
static void check_counts(void)
{
	_Atomic unsigned long *n = preload_counters();
	if (!n)
		return;
	struct timespec ts;
	struct timeval tv;
	struct tms tm;
#define ONE(slot, call)                                                                              \
	do {                                                                                         \
		unsigned long before = n[slot];                                                      \
		call;                                                                                \
		CHECK(n[slot] == before + 1, "%s: counted %lu calls, expected 1", #call, n[slot] - before); \
	} while (0)
	ONE(TH_PC_CLOCK_GETTIME, clock_gettime(CLOCK_MONOTONIC, &ts));
	ONE(TH_PC_CLOCK_GETTIME, clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts));
	ONE(TH_PC_CLOCK_GETTIME, clock_gettime(4242, &ts));
	ONE(TH_PC_CLOCK_GETTIME, sym_clock_gettime_internal(CLOCK_REALTIME, &ts));
	ONE(TH_PC_CLOCK_GETRES, clock_getres(CLOCK_MONOTONIC, &ts));
	ONE(TH_PC_GETTIMEOFDAY, gettimeofday(&tv, NULL));
	ONE(TH_PC_GETTIMEOFDAY, sym_gettimeofday_internal(&tv, NULL));
	ONE(TH_PC_TIME, time(NULL));
	ONE(TH_PC_TIMESPEC_GET, timespec_get(&ts, TIME_UTC));
	ONE(TH_PC_TIMESPEC_GETRES, timespec_getres(&ts, TIME_UTC));
	ONE(TH_PC_TIMES, times(&tm));
	ONE(TH_PC_CLOCK, clock());
#ifdef HAVE_FTIME
	int (*ft)(struct timeb *) = (int (*)(struct timeb *))dlsym(RTLD_DEFAULT, "ftime");
	struct timeb tb;
	if (ft)
		ONE(TH_PC_FTIME, ft(&tb));
#endif
	CHECK(preload_ctor_ran() == 1, "the preload's constructor has not run");
#undef ONE
}

int main(int argc, char **argv)
{
	int quick = 0, coarse = 0;
	const char *need_mapped = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0)
			quick = 1;
		else if (strcmp(argv[i], "--cputime-coarse") == 0)
			coarse = 1;
		else if (strcmp(argv[i], "--expect-mapped") == 0 && i + 1 < argc)
			need_mapped = argv[++i];
	}
	preload = expect_preload();
	tick_ns = sys_res_ns(CLOCK_MONOTONIC_COARSE);
	if (tick_ns <= 0)
		tick_ns = 4000000;
	sym_clock_gettime_internal = (gettime_fn)dlsym(RTLD_DEFAULT, "__clock_gettime");
	sym_gettimeofday_internal = (gtod_fn)dlsym(RTLD_DEFAULT, "__gettimeofday");

	if (need_mapped)
		CHECK(mapped(need_mapped), "%s is not loaded", need_mapped);
	check_binding();
	check_counts();

	static const clockid_t fine[] = {CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME,
					 CLOCK_TAI};
	for (size_t i = 0; i < sizeof fine / sizeof *fine; i++) {
		sandwich_fine("clock_gettime", clock_gettime, fine[i]);
		if (sym_clock_gettime_internal)
			sandwich_fine("__clock_gettime", sym_clock_gettime_internal, fine[i]);
	}
	sandwich_coarse("clock_gettime", clock_gettime, CLOCK_MONOTONIC_COARSE, CLOCK_MONOTONIC);
	sandwich_coarse("clock_gettime", clock_gettime, CLOCK_REALTIME_COARSE, CLOCK_REALTIME);
	check_gettimeofday("gettimeofday", gettimeofday);
	if (sym_gettimeofday_internal)
		check_gettimeofday("__gettimeofday", sym_gettimeofday_internal);
	check_time();
	check_timespec_get();
#ifdef HAVE_FTIME
	check_ftime();
#endif
	check_getres();
	check_passthrough();
	check_cputime(coarse);
	if (preload && !quick)
		check_coherence();

	if (compat_failures) {
		fprintf(stderr, "compat_symbols: %d checks failed\n", compat_failures);
		return 1;
	}
	printf("compat_symbols: ok (%s%s)\n", preload ? "preload" : "no preload",
	       preload_counters() ? ", calls counted" : "");
	return 0;
}
