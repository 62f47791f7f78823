/*
 * libtimehands-preload.so: the libc entry points that read the clocks, served
 * by timehands, for programs that were never built against it.
 *
 *   LD_PRELOAD=/usr/lib/x86_64-linux-gnu/timehands/libtimehands-preload.so CMD
 *   timehands run CMD            (the same, with the path resolved)
 *
 * The library is linked in statically (its objects are hidden), so this file
 * is only the libc-shaped boundary: each entry point is one branch on the mode
 * and a call into the library's per-clock fast path. What the library does not
 * accelerate (CPU-time clocks, other processes' and fd clocks, unknown ids)
 * reaches the kernel unchanged through the vDSO or a raw system call, with the
 * kernel's result and errno; never through dlsym, which can allocate and
 * recurse into an interposed allocator (jemalloc, ASan).
 *
 * Every entry point is safe before the constructor below has run (the library
 * attaches on its first read), from another library's constructor, from a
 * signal handler, and in a fork child of any thread (the library's
 * MADV_WIPEONFORK page). The constructor attaches early, so that a program
 * that later closes every fd or installs a seccomp filter never sees this
 * library open a file or make any system call but the clock reads.
 *
 * The exported names are unversioned (preload.map): a definition under a
 * version of our own would not satisfy the GLIBC_2.x references of programs,
 * and the loader would silently bind them to libc.
 *
 * Built twice: as the preload, and with TH_PRELOAD_COUNT for the tests, which
 * then count the calls that landed here (tests/compat).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/times.h>
#include <time.h>
#include <unistd.h>

#if __has_include(<sys/timeb.h>)
#include <sys/timeb.h>
#define TH_HAVE_FTIME 1
#endif

#include "attach/proc.h"
#include "kclock.h"
#include "timehands.h"

#define TH_EXPORT __attribute__((visibility("default")))

/*
 * What the constructor found in the environment. Before it has run, and in a
 * process that dlopen()ed this library while other threads were reading, the
 * value is PRELOAD_FULL: full guarantees, the safe default (the library itself
 * honours TIMEHANDS_DISABLE from its first read on). Each value selects
 * between clocks that are all correct for that configuration, so the mode is
 * read with relaxed loads: nothing else is published with it.
 */
enum { PRELOAD_FULL = 0, PRELOAD_RELAXED = 1, PRELOAD_KERNEL = 2 };
static _Atomic int preload_mode;
/* TIMEHANDS_CPUTIME=coarse: times() and clock() from the coarse cache. */
static _Atomic int preload_cputime_coarse;

#ifdef TH_PRELOAD_COUNT
/* Test build only: calls per entry point, and whether the constructor ran. */
#include "count.h"
_Static_assert(TH_PC_N <= TH_PC_SLOTS, "count.h: too many entry points");
TH_EXPORT _Atomic unsigned long th_preload_calls[TH_PC_SLOTS];
TH_EXPORT _Atomic int th_preload_ctor_ran;
/* Relaxed: the counting thread reads its own increments. */
#define COUNT(sym) atomic_fetch_add_explicit(&th_preload_calls[TH_PC_##sym], 1, memory_order_relaxed)
#else
#define COUNT(sym) ((void)0)
#endif

/*
 * libc declares some of these pointers nonnull, and the compiler drops a NULL
 * check on such a parameter whatever -fno-delete-null-pointer-checks says.
 * The kernel answers NULL (EFAULT, or a valid call for gettimeofday's tv), so
 * the entry points launder the pointer: an empty asm the compiler cannot see
 * through, no instruction.
 */
#define LAUNDER(p) __asm__("" : "+r"(p))

static inline int mode_now(void)
{
	return atomic_load_explicit(&preload_mode, memory_order_relaxed);
}

/* ------------------------------------------------------------ clock_gettime */

/*
 * The clocks programs read most, straight from the library's one reader
 * (proc.h: the local records or timehandsd's page; a REALTIME reading raises
 * the G3 floor that time() and the coarse REALTIME clock are held to), the
 * same functions per clock as api.c's (TH_FINE_FUNCS), so that each gets a
 * lean prologue.
 */
TH_FINE_FUNCS(read_monotonic, TH_CK_MONO, 1)
TH_FINE_FUNCS(read_realtime, TH_CK_REAL, 1)
TH_FINE_FUNCS(read_boottime, TH_CK_BOOT, 1)
TH_FINE_FUNCS(read_tai, TH_CK_TAI, 1)
TH_FINE_FUNCS(read_raw, TH_CK_RAW, 1)
TH_FINE_FUNCS(read_monotonic_relaxed, TH_CK_MONO, 0)
TH_FINE_FUNCS(read_realtime_relaxed, TH_CK_REAL, 0)

/* The coarse clocks cost about as much as a dispatch: theirs are direct
 * (th__coarse_ts also holds REALTIME to the G3 floor). */
static __attribute__((noinline)) int read_monotonic_coarse(struct timespec *ts)
{
	return th__coarse_ts(TH_CK_MONO, ts);
}

static __attribute__((noinline)) int read_realtime_coarse(struct timespec *ts)
{
	return th__coarse_ts(TH_CK_REAL, ts);
}

/* Not the common case: TIMEHANDS_DISABLE=1, a NULL pointer, or an id the
 * entry point does not dispatch itself. */
static __attribute__((noinline)) int gettime_mode(clockid_t id, struct timespec *ts)
{
	if (mode_now() == PRELOAD_KERNEL) {
		/* Extension ids (negative) and a NULL pointer still go through
		 * the library, which never hands an extension id to the kernel
		 * and answers NULL with EFAULT like the system call. */
		if (id >= 0 && ts)
			return th_kclock_gettime(id, ts);
	}
	return th_clock_gettime(id, ts);
}

/* The one clock read every other entry point here uses: each fine id, the
 * coarse ones and, under TIMEHANDS_RELAXED=1, the relaxed REALTIME and
 * MONOTONIC straight to its reader. The full-guarantee fine ids take the
 * word and the counter here (name##_in), so that the exported function
 * jumps once, to the timeline's read, instead of through a per-clock entry
 * first; a compare chain, not a table (TH_ENTRY_LAYOUT on the callers). */
static inline __attribute__((always_inline)) int serve_gettime(clockid_t id, struct timespec *ts)
{
	/* NULL first: one test and branch each, where the pair of tests in
	 * one condition costs a flag register and two more instructions. */
	if (TH_UNLIKELY(!ts))
		return gettime_mode(id, ts);
	int mode = mode_now();
	if (TH_LIKELY(mode == PRELOAD_FULL)) {
		if (TH_LIKELY(id == CLOCK_MONOTONIC))
			return read_monotonic_in(ts);
		if (id == CLOCK_REALTIME)
			return read_realtime_in(ts);
	} else if (mode == PRELOAD_RELAXED) {
		/* TIMEHANDS_RELAXED=1: these two relaxed, the counter here
		 * and one jump, as for the full reads; every other id as in
		 * full mode */
		if (id == CLOCK_MONOTONIC)
			return read_monotonic_relaxed_in(ts);
		if (id == CLOCK_REALTIME)
			return read_realtime_relaxed_in(ts);
	} else {
		return gettime_mode(id, ts);
	}
	/* the relaxed extension ids, rare through libc, by their own entries
	 * (which read the word and the counter themselves) */
	TH_GETTIME_CHAIN(id, ts, read_, , th_clock_gettime, 1);
}

TH_EXPORT TH_ENTRY_LAYOUT int clock_gettime(clockid_t id, struct timespec *ts)
{
	COUNT(CLOCK_GETTIME);
	LAUNDER(ts);
	return serve_gettime(id, ts);
}

/* glibc exports its internal name too (GLIBC_PRIVATE); older libraries of the
 * C runtime call it. A function, not an alias: libc's declaration carries
 * attributes an alias would have to copy. */
TH_EXPORT int __clock_gettime(clockid_t id, struct timespec *ts);
TH_EXPORT TH_ENTRY_LAYOUT int __clock_gettime(clockid_t id, struct timespec *ts)
{
	COUNT(CLOCK_GETTIME);
	LAUNDER(ts);
	return serve_gettime(id, ts);
}

/* ------------------------------------------------------------- clock_getres */

static int serve_getres(clockid_t id, struct timespec *res)
{
	if (TH_UNLIKELY(mode_now() == PRELOAD_KERNEL) && id >= 0) {
		/* exactly what the kernel answers, NULL included */
		if (!res)
			return (int)syscall(SYS_clock_getres, id, NULL);
		return th_kclock_getres(id, res);
	}
	/* The resolution of what the library returns: 1 ns for the fine
	 * clocks (exact nanoseconds of the line), the tick for the coarse
	 * ones; the kernel's for what it passes through. */
	return th_clock_getres(id, res);
}

TH_EXPORT int clock_getres(clockid_t id, struct timespec *res)
{
	COUNT(CLOCK_GETRES);
	return serve_getres(id, res);
}

/* ------------------------------------------------------------- gettimeofday */

/* Split as clock_gettime's reads are (TH_FINE_FUNCS): the entry's common
 * path takes the counter first and jumps to the own timeline's read, which
 * pays neither the late counter's registers nor the page's. Under
 * TIMEHANDS_RELAXED=1, a relaxed reader of its own, which stores
 * microseconds as this one does (not a relaxed clock_gettime into a
 * timespec, converted after its return). */
TH_FINE_FUNCS_TO(read_tod, TH_CK_REAL, 1, struct timeval, th__tv_tv)
TH_FINE_FUNCS_TO(read_tod_relaxed, TH_CK_REAL, 0, struct timeval, th__tv_tv)

/* Not the common case: a timezone or no timeval asked for, or
 * TIMEHANDS_DISABLE=1. */
static __attribute__((noinline)) int gettimeofday_mode(struct timeval *tv, void *tz)
{
	int mode = mode_now();
	if (mode == PRELOAD_RELAXED && tv && !tz)
		return read_tod_relaxed(tv);
	if (mode == PRELOAD_KERNEL)
		return th_kgettimeofday(tv, tz);
	return th_gettimeofday(tv, tz); /* the timezone from the kernel */
}

static inline __attribute__((always_inline)) int serve_gettimeofday(struct timeval *tv, void *tz)
{
	if (TH_UNLIKELY(tz || !tv))
		return gettimeofday_mode(tv, tz);
	int mode = mode_now();
	if (TH_LIKELY(mode == PRELOAD_FULL))
		return read_tod_in(tv);
	/* the counter here and one jump, as for the full read */
	if (mode == PRELOAD_RELAXED)
		return read_tod_relaxed_in(tv);
	return gettimeofday_mode(tv, tz);
}

TH_EXPORT TH_ENTRY_LAYOUT int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
	COUNT(GETTIMEOFDAY);
	LAUNDER(tv);
	return serve_gettimeofday(tv, tz);
}

TH_EXPORT int __gettimeofday(struct timeval *restrict tv, void *restrict tz);
TH_EXPORT TH_ENTRY_LAYOUT int __gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
	COUNT(GETTIMEOFDAY);
	LAUNDER(tv);
	return serve_gettimeofday(tv, tz);
}

/* --------------------------------------------------------------------- time */

static __attribute__((noinline)) time_t time_other(time_t *t)
{
	if (mode_now() == PRELOAD_KERNEL)
		return th_ktime(t);
	return th_time(t);
}

/*
 * The kernel's time() for the fast path below, set by the constructor unless
 * TIMEHANDS_DISABLE=1; NULL before it, where there is no vDSO time(), and in
 * pass-through, all of which take time_other(). Relaxed: a pointer to code
 * that exists for the life of the process; nothing else is published with it.
 */
static time_t (*_Atomic preload_ktime)(time_t *);

/* The kernel's second through its time() where the data page cannot be
 * read; out of line, so that the fast path below makes no call and needs no
 * callee-saved register. */
static __attribute__((noinline)) time_t time_call(time_t *t)
{
	time_t (*kt)(time_t *) = atomic_load_explicit(&preload_ktime, memory_order_relaxed);
	time_t tk;
	if (kt != NULL && TH_LIKELY(th__time_kfn(kt, t, &tk)))
		return tk;
	return time_other(t);
}

/*
 * th_time()'s fast path, inlined here (the header's th__time_inline() does
 * the same for programs): the kernel's cached second when it equals the G3
 * floor, the largest second a fine REALTIME read of this process returned;
 * anything else (another second, before the constructor, a mode) goes to
 * th_time(), which decides with a fine read. Each instruction saved counts
 * here: the kernel's own time() is a single load. The kernel's second comes
 * from its data page where the library found it there (th__time_kdata).
 */
TH_EXPORT time_t time(time_t *t)
{
	COUNT(TIME);
	/* Without a look at the mode: the data page's second is served only
	 * when it equals the G3 floor, and it is the kernel's own time() then
	 * (TIMEHANDS_DISABLE=1 included); the page is found by the library's
	 * attach, so never before it. */
	time_t r;
	if (TH_LIKELY(th__time_kdata(t, &r)))
		return r;
	return time_call(t);
}

/* ------------------------------------------------- timespec_get, _getres */

/* C11's time bases onto clock ids; 0 for a base this libc does not know. */
static clockid_t base_clock(int base)
{
	switch (base) {
	case TIME_UTC: return CLOCK_REALTIME;
#ifdef TIME_MONOTONIC
	case TIME_MONOTONIC: return CLOCK_MONOTONIC;
#endif
#ifdef TIME_ACTIVE
	case TIME_ACTIVE: return CLOCK_PROCESS_CPUTIME_ID;
#endif
#ifdef TIME_THREAD_ACTIVE
	case TIME_THREAD_ACTIVE: return CLOCK_THREAD_CPUTIME_ID;
#endif
	default: return (clockid_t)-1;
	}
}

static int serve_timespec_get(struct timespec *ts, int base)
{
	clockid_t id = base_clock(base);
	if (id == (clockid_t)-1)
		return 0;
	/* libc returns the base whatever the clock said */
	serve_gettime(id, ts);
	return base;
}

static int serve_timespec_getres(struct timespec *ts, int base)
{
	clockid_t id = base_clock(base);
	if (id == (clockid_t)-1)
		return 0;
	serve_getres(id, ts);
	return base;
}

TH_EXPORT TH_ENTRY_LAYOUT int timespec_get(struct timespec *ts, int base)
{
	COUNT(TIMESPEC_GET);
	LAUNDER(ts);
	return serve_timespec_get(ts, base);
}

TH_EXPORT int timespec_getres(struct timespec *ts, int base)
{
	COUNT(TIMESPEC_GETRES);
	return serve_timespec_getres(ts, base);
}

/* -------------------------------------------------------------------- ftime */

#ifdef TH_HAVE_FTIME
TH_EXPORT int ftime(struct timeb *tb)
{
	COUNT(FTIME);
	struct timespec ts;
	serve_gettime(CLOCK_REALTIME, &ts);
	tb->time = ts.tv_sec;
	tb->millitm = (unsigned short)(ts.tv_nsec / 1000000);
	tb->timezone = 0; /* what libc has returned since 2.33 */
	tb->dstflag = 0;
	return 0;
}
#endif

/* ---------------------------------------------------------- times, clock */

TH_EXPORT clock_t times(struct tms *buf)
{
	COUNT(TIMES);
	if (atomic_load_explicit(&preload_cputime_coarse, memory_order_relaxed))
		return th_times(buf);
	/* exact: the system call, its value and errno (EFAULT) */
	return (clock_t)syscall(SYS_times, buf);
}

TH_EXPORT clock_t clock(void)
{
	COUNT(CLOCK);
	if (atomic_load_explicit(&preload_cputime_coarse, memory_order_relaxed))
		return th_clock();
	/* exact: what libc computes, from the system call the vDSO would
	 * make anyway for a CPU-time clock */
	struct timespec ts;
	if (th_sys_clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
		return (clock_t)-1;
	return (clock_t)(ts.tv_sec * CLOCKS_PER_SEC + ts.tv_nsec / (1000000000 / CLOCKS_PER_SEC));
}

/* ----------------------------------------------- 32-bit time64 entry points */

/*
 * Where time_t is 32 bits, glibc (2.34 and later) also exports 64-bit-time
 * twins that programs built with _TIME_BITS=64 call. Their structures are
 * glibc's __timespec64 / __timeval64. There are none on x86-64 or arm64.
 */
#if defined(__GLIBC__) && defined(__TIMESIZE) && __TIMESIZE == 32
#if defined(__USE_TIME_BITS64)
#error "build the preload with the native time_t; it defines both the 32- and the 64-bit names"
#endif
#include <endian.h>
struct th_timespec64 {
	int64_t tv_sec;
#if __BYTE_ORDER == __BIG_ENDIAN
	int32_t pad, tv_nsec;
#else
	int32_t tv_nsec, pad;
#endif
};
struct th_timeval64 {
	int64_t tv_sec;
	int64_t tv_usec;
};

/* The library computes in the native struct; its seconds fit until 2038,
 * and a read that fails has left *ts unspecified, like the kernel. */
static void ts_to64(const struct timespec *a, struct th_timespec64 *b)
{
	b->tv_sec = a->tv_sec;
	b->tv_nsec = (int32_t)a->tv_nsec;
	b->pad = 0;
}

TH_EXPORT int __clock_gettime64(clockid_t id, struct th_timespec64 *ts)
{
	COUNT(CLOCK_GETTIME);
	struct timespec t;
	int r = serve_gettime(id, ts ? &t : NULL);
	if (r == 0 && ts)
		ts_to64(&t, ts);
	return r;
}

TH_EXPORT int __clock_getres64(clockid_t id, struct th_timespec64 *res)
{
	COUNT(CLOCK_GETRES);
	struct timespec t;
	int r = serve_getres(id, res ? &t : NULL);
	if (r == 0 && res)
		ts_to64(&t, res);
	return r;
}

TH_EXPORT int __gettimeofday64(struct th_timeval64 *tv, void *tz)
{
	COUNT(GETTIMEOFDAY);
	struct timeval t;
	int r = serve_gettimeofday(tv ? &t : NULL, tz);
	if (r == 0 && tv) {
		tv->tv_sec = t.tv_sec;
		tv->tv_usec = t.tv_usec;
	}
	return r;
}

TH_EXPORT int64_t __time64(int64_t *t)
{
	COUNT(TIME);
	time_t s = mode_now() == PRELOAD_KERNEL ? th_ktime(NULL) : th_time(NULL);
	if (t)
		*t = s;
	return s;
}

TH_EXPORT int __timespec_get64(struct th_timespec64 *ts, int base)
{
	COUNT(TIMESPEC_GET);
	struct timespec t;
	int r = serve_timespec_get(&t, base);
	if (r)
		ts_to64(&t, ts);
	return r;
}

TH_EXPORT int __timespec_getres64(struct th_timespec64 *ts, int base)
{
	COUNT(TIMESPEC_GETRES);
	struct timespec t;
	int r = serve_timespec_getres(ts ? &t : NULL, base);
	if (r && ts)
		ts_to64(&t, ts);
	return r;
}
#endif

#ifdef TH_PRELOAD_COUNT
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
/* Test build: at exit, append "pid name=calls ..." to $TH_PRELOAD_COUNT_FILE
 * (how often a real program reads each clock; preload/bench/db.sh). */
__attribute__((destructor)) static void preload_count_report(void)
{
	static const char *const names[TH_PC_N] = {"clock_gettime", "clock_getres", "gettimeofday",
						   "time", "timespec_get", "timespec_getres",
						   "ftime", "times", "clock"};
	const char *path = getenv("TH_PRELOAD_COUNT_FILE");
	if (!path)
		return;
	char line[512];
	int n = snprintf(line, sizeof line, "%d", (int)getpid());
	for (int i = 0; i < TH_PC_N && n > 0 && (size_t)n < sizeof line; i++)
		n += snprintf(line + n, sizeof line - (size_t)n, " %s=%lu", names[i],
			      atomic_load_explicit(&th_preload_calls[i], memory_order_relaxed));
	if (n <= 0 || (size_t)n >= sizeof line - 1)
		return;
	line[n++] = '\n';
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
	if (fd >= 0) {
		ssize_t w = write(fd, line, (size_t)n);
		(void)w;
		close(fd);
	}
}
#endif

/* ------------------------------------------------------------- diagnostics */

/*
 * A bad TIMEHANDS_* value is reported on stderr only where this process asked
 * for the preload: LD_PRELOAD names it (timehands run, or by hand). Loaded
 * from /etc/ld.so.preload, the preload is silent (a system-wide preload must
 * not add output to every program); `timehands status` still shows the value.
 * The loader removes LD_PRELOAD from a setuid program's environment, so those
 * are silent too. Called once, at the first attach.
 */
int th__warn_to_stderr(void)
{
	static const char name[] = "libtimehands-preload";
	const char *list = getenv("LD_PRELOAD");
	if (!list)
		return 0;
	/* the loader separates entries with spaces or colons */
	for (const char *p = list; *p;) {
		const char *end = p;
		while (*end && *end != ':' && *end != ' ')
			end++;
		const char *base = p;
		for (const char *q = p; q < end; q++)
			if (*q == '/')
				base = q + 1;
		if ((size_t)(end - base) >= sizeof name - 1 && memcmp(base, name, sizeof name - 1) == 0)
			return 1;
		p = *end ? end + 1 : end;
	}
	return 0;
}

/* -------------------------------------------------------------- constructor */

/*
 * Attach now, while the program can still open files (the trust probe reads
 * sysfs and /proc) and before it can install a seccomp filter, then touch every
 * accelerated path once so that no later read does first-time work.
 */
__attribute__((constructor)) static void preload_attach(void)
{
	struct timespec ts;
	struct timeval tv;
	th_clock_gettime(CLOCK_MONOTONIC, &ts);

	int mode = PRELOAD_FULL, coarse = 0;
	/* th__ready()'s acquire load makes the configuration parsed at
	 * attach visible (it is read-only afterwards). Not ready: another
	 * thread is attaching (a dlopen() into a running program); keep the
	 * safe defaults. */
	if (th__ready()) {
		const struct th_config *c = &th__P.cfg;
		if (c->disable)
			mode = PRELOAD_KERNEL;
		else if (c->relaxed)
			mode = PRELOAD_RELAXED;
		coarse = c->cputime_coarse && !c->disable;
	}

	static const clockid_t warm[] = {
		CLOCK_REALTIME, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME, CLOCK_TAI, CLOCK_MONOTONIC_COARSE,
		CLOCK_REALTIME_COARSE, TH_CLOCK_MONOTONIC_RELAXED, TH_CLOCK_REALTIME_RELAXED,
	};
	for (size_t i = 0; i < sizeof warm / sizeof *warm; i++)
		th_clock_gettime(warm[i], &ts);
	th_clock_getres(CLOCK_MONOTONIC_COARSE, &ts);
	th_gettimeofday(&tv, NULL);
	th_time(NULL);
	if (coarse) {
		struct tms tm;
		th_times(&tm);
		th_clock();
		th_clock_gettime(TH_CLOCK_PROCESS_CPUTIME_COARSE, &ts);
		th_clock_gettime(TH_CLOCK_THREAD_CPUTIME_COARSE, &ts);
	}

	/* Relaxed stores: see preload_mode. Threads the program creates later
	 * are ordered after them by pthread_create. */
	atomic_store_explicit(&preload_cputime_coarse, coarse, memory_order_relaxed);
	atomic_store_explicit(&preload_mode, mode, memory_order_relaxed);
	if (mode != PRELOAD_KERNEL)
		atomic_store_explicit(&preload_ktime, TH_VDSO(time), memory_order_relaxed);
#ifdef TH_PRELOAD_COUNT
	atomic_store_explicit(&th_preload_ctor_ran, 1, memory_order_relaxed);
#endif
}
