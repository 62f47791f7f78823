/*
 * Process CPU time from memory: th_times(), th_clock() and the coarse clocks
 * TH_CLOCK_PROCESS_CPUTIME_COARSE and TH_CLOCK_THREAD_CPUTIME_COARSE.
 *
 * The kernel has these values only behind a system call (about 1.2 us here),
 * and times() has clock-tick resolution anyway. Each value is therefore kept
 * in a cache stamped with timehands' MONOTONIC_COARSE time, refreshed about
 * once per tick (tick = resolution of CLOCK_MONOTONIC_COARSE): a call costs a
 * coarse read and a few loads.
 *
 * Process caches (times() fields; CLOCK_PROCESS_CPUTIME_ID for th_clock()
 * and the process coarse clock), shared by all threads:
 *
 *   - Every value field is only ever raised (compare-and-swap to the
 *     maximum). The kernel's times() has let utime go backwards when a thread
 *     exited (seed 004); the max of everything the kernel returned cannot. By
 *     coherence of each field, a load that happens after another load of the
 *     same field returns the same or a larger value: utime, stime, their sum
 *     and clock() never decrease, in any thread and across threads.
 *   - The stamp is timehands' MONOTONIC_COARSE taken *before* the kernel reading it
 *     vouches for, raised (never lowered) with release after the fields. A
 *     reader that acquires stamp S sees fields at least as large as a kernel
 *     reading that began at or after S.
 *   - A reader whose stamp is younger than one tick returns the fields: no
 *     store, no retry, no lock (wait-free; the fast path writes no shared
 *     memory). At one tick or older it tries the refresh lock; the holder
 *     re-checks the stamp (one refresh per tick however many threads arrive),
 *     reads the kernel and merges. A reader that finds the lock held keeps
 *     serving while the stamp is younger than two ticks; older than that (the
 *     holder was preempted) it reads the kernel itself and merges, so nobody
 *     waits for a stalled holder and its late, older reading changes nothing.
 *
 *   Bound: a value returned by a call whose MONOTONIC_COARSE reading is T is
 *   at least the exact kernel value of a reading begun at or after T - 2
 *   ticks (normally T - 1 tick), and at most the largest value the kernel has
 *   returned. So it lags the exact value by at most what the kernel counted
 *   for the process in the last two ticks before T (T itself lags the fine
 *   clock by up to about a tick): <= 2 ticks x the number of CPUs, plus
 *   runtime the kernel had not yet accounted to threads on other CPUs.
 *
 * Thread caches (TH_CLOCK_THREAD_CPUTIME_COARSE) are thread-local: the thread
 * refreshes its own value when the stamp is a tick old; no lock, nothing
 * shared. Bound: at least the thread's exact value at T - 1 tick. The fields
 * are raised with compare-and-swap too, so that a signal handler that
 * interrupts a refresh in the same thread can neither lose a larger value nor
 * be followed by a smaller one.
 *
 * fork: the process caches live in a MADV_WIPEONFORK page. A child of fork()
 * from any thread, also of a raw clone or syscall(SYS_fork), finds it zeroed:
 * no stamp, no values, lock free, no incarnation. Its CPU times restart near
 * zero and so do the caches; nothing is clamped to the parent's values. The
 * forking thread's thread cache is tagged with the incarnation of the process
 * that filled it; a new incarnation (a counter in ordinary memory, inherited
 * and only ever increased, so a child's is larger than any its parent used)
 * makes it reset. A pthread_atfork handler clears the page too: where
 * MADV_WIPEONFORK is missing (kernels before 4.14; a static page serves) or
 * accepted and ignored (qemu-user), fork() still works, a raw fork does not.
 *
 * th_times() returns MONOTONIC_COARSE in clock ticks (sysconf(_SC_CLK_TCK)) plus an
 * offset fixed per process at the first call so that it matches the kernel's
 * times() then (the kernel counts jiffies since shortly before boot). The
 * return is a pure function of the coarse reading the call takes, so it is
 * coherent with th_clock_gettime(CLOCK_MONOTONIC_COARSE) and never ahead of a
 * later CLOCK_MONOTONIC (G4); it stays within a tick of
 * the kernel's value, whose tick boundaries have another phase.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cputime.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "attach/proc.h"
#include "kclock.h"
#include "timehands.h"

#define NS_PER_S 1000000000LL
#define TH_CPU_NVAL 4

struct th_cpu_cache {
	/* MONOTONIC_COARSE ns taken before the kernel reading that the values are at
	 * least; 0: no reading yet. Only ever raised. */
	_Atomic uint64_t stamp;
	_Atomic uint64_t val[TH_CPU_NVAL]; /* only ever raised */
	/* The refresh try-lock sits on its own line: a refresher taking it does
	 * not take the readers' line away once more per tick. */
	_Atomic uint32_t lock __attribute__((aligned(64))); /* 0 free, 1 held */
};

struct th_cpu_page {
	/* Tag of this process's thread caches; 0 until the first slow path. */
	_Atomic uint64_t incarnation;
	/* th_times() origin: (kernel ticks - MONOTONIC_COARSE ticks) ^ 2^63, so that
	 * 0 (a fresh or wiped page) means "not calibrated yet". */
	_Atomic uint64_t elapsed_off;
	struct th_cpu_cache c[TH_CPU_NCACHES] __attribute__((aligned(64)));
};

_Static_assert(sizeof(struct th_cpu_page) <= 4096, "the cache page is one page");

struct th_cpu_thread {
	_Atomic uint64_t tag;   /* incarnation that filled it; TH_TAG_RESET while reset */
	_Atomic uint64_t stamp; /* as in th_cpu_cache */
	_Atomic uint64_t val;   /* CLOCK_THREAD_CPUTIME_ID packed (ns_pack), only raised (except reset) */
};

#define TH_TAG_RESET UINT64_MAX
#define TH_OFF_BIAS ((uint64_t)1 << 63)

/* Set once per process, published by the release CAS of the pointer. */
static struct th_cpu_page *_Atomic cpu_page;
static struct th_cpu_page cpu_static __attribute__((aligned(4096)));
static _Atomic uint64_t incarnations;
static _Atomic uint32_t atfork_done;
static _Atomic uint32_t clk_hz; /* sysconf(_SC_CLK_TCK), set before cpu_page */

/* Initial-exec: no __tls_get_addr call on the fast path (24 bytes of static
 * TLS; the library is linked at start or preloaded). */
static _Thread_local struct th_cpu_thread cpu_self __attribute__((tls_model("initial-exec")));

/* ------------------------------------------------------------ helpers */

static inline uint64_t ts_to_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * (uint64_t)NS_PER_S + (uint64_t)ts->tv_nsec;
}

/*
 * The coarse clock ids' values are kept as a timespec packed into one word,
 * seconds above 30 bits of nanoseconds: converted once per refresh instead of
 * divided on every read, and still one word that compare-and-swap can raise
 * (nanoseconds stay below 2^30, so the packed order is the numeric one).
 * 2^34 s of CPU time saturate.
 */
#define TH_PK_NS_BITS 30
#define TH_PK_SEC_MAX (((uint64_t)1 << (64 - TH_PK_NS_BITS)) - 1)

static inline uint64_t ns_pack(uint64_t ns)
{
	uint64_t sec = ns / (uint64_t)NS_PER_S;
	if (TH_UNLIKELY(sec > TH_PK_SEC_MAX))
		return (TH_PK_SEC_MAX << TH_PK_NS_BITS) | (uint64_t)(NS_PER_S - 1);
	return (sec << TH_PK_NS_BITS) | (ns % (uint64_t)NS_PER_S);
}

static inline void pk_to_ts(uint64_t pk, struct timespec *ts)
{
	ts->tv_sec = (time_t)(pk >> TH_PK_NS_BITS);
	ts->tv_nsec = (long)(pk & (((uint64_t)1 << TH_PK_NS_BITS) - 1));
}

/* timehands' MONOTONIC_COARSE, the clock every stamp is taken on and every
 * freshness test made with: what the cached values are good for is a tick,
 * and the coarse read tells the tick for a few loads (G4: it is never ahead
 * of a fine reading that follows, so a stamp is not later than the kernel
 * reading after it). */
static inline __attribute__((always_inline)) uint64_t coarse_now(void)
{
	struct timespec ts;
	th__coarse_ts(TH_CK_MONO, &ts);
	return ts_to_ns(&ts);
}

static inline uint64_t stamp_now(void)
{
	uint64_t s = coarse_now();
	return s ? s : 1; /* 0 means "no reading" */
}

/* Fresh: a stamp younger than `limit` ns at `now`. A stamp taken by another
 * thread after our `now` may lie ahead of it: fresher still. The
 * limit (th__P.tick_ns, set by the first attach) is only read once a stamp
 * exists: a stamp is written after an attach, and acquiring it makes the
 * attach visible. */
#define TH_FRESH(stamp, now, limit) ((stamp) != 0 && (int64_t)((now) - (stamp)) < (int64_t)(limit))

/* Raise *a to at least v; returns the value it holds afterwards as seen by
 * this thread. `mo` is the order of a successful raise. */
static inline uint64_t raise_to(_Atomic uint64_t *a, uint64_t v, memory_order mo)
{
	uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
	while (cur < v) {
		if (atomic_compare_exchange_weak_explicit(a, &cur, v, mo, memory_order_relaxed))
			return v;
	}
	return cur;
}

/* MONOTONIC in clock ticks: floor(ns * hz / 1e9), exactly. */
static inline int64_t mono_ticks(const struct timespec *ts, uint32_t hz)
{
	if (TH_LIKELY(hz == 100))
		return (int64_t)ts->tv_sec * 100 + ts->tv_nsec / 10000000;
	return (int64_t)ts->tv_sec * hz + (int64_t)ts->tv_nsec * hz / NS_PER_S;
}

/* ------------------------------------------------------------ the page */

static void cache_page_clear(struct th_cpu_page *pg)
{
	atomic_store_explicit(&pg->incarnation, 0, memory_order_relaxed);
	atomic_store_explicit(&pg->elapsed_off, 0, memory_order_relaxed);
	for (int w = 0; w < TH_CPU_NCACHES; w++) {
		atomic_store_explicit(&pg->c[w].stamp, 0, memory_order_relaxed);
		for (int i = 0; i < TH_CPU_NVAL; i++)
			atomic_store_explicit(&pg->c[w].val[i], 0, memory_order_relaxed);
		atomic_store_explicit(&pg->c[w].lock, 0, memory_order_relaxed);
	}
}

/* Runs in the single-threaded child of fork(). Redundant where the kernel
 * honours MADV_WIPEONFORK; needed where it is missing (before 4.14) or
 * accepted and ignored (qemu-user). A raw fork skips it. */
static void cpu_atfork_child(void)
{
	struct th_cpu_page *pg = atomic_load_explicit(&cpu_page, memory_order_relaxed);
	if (pg)
		cache_page_clear(pg);
}

static uint32_t read_clk_tck(void)
{
	unsigned long hz = getauxval(AT_CLKTCK);
	if (hz == 0 || hz > 1000000) {
		long s = sysconf(_SC_CLK_TCK);
		hz = s > 0 ? (unsigned long)s : 100;
	}
	return (uint32_t)hz;
}

/* This process's cache page, created on first use; its incarnation set. */
static struct th_cpu_page *page_get(void)
{
	/* Acquire pairs with the release CAS below: clk_hz is set. */
	struct th_cpu_page *pg = atomic_load_explicit(&cpu_page, memory_order_acquire);
	if (TH_UNLIKELY(!pg)) {
		atomic_store_explicit(&clk_hz, read_clk_tck(), memory_order_relaxed);
		size_t len = (size_t)sysconf(_SC_PAGESIZE);
		if (len < sizeof(struct th_cpu_page))
			len = 4096;
		struct th_cpu_page *want = &cpu_static;
		void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m != MAP_FAILED) {
			if (madvise(m, len, MADV_WIPEONFORK) == 0) {
				want = m;
			} else {
				munmap(m, len);
				m = MAP_FAILED;
			}
		}
		if (!atomic_exchange_explicit(&atfork_done, 1, memory_order_relaxed))
			pthread_atfork(NULL, NULL, cpu_atfork_child);
		struct th_cpu_page *expect = NULL;
		/* Release: clk_hz above is visible to whoever acquires the
		 * pointer; acquire on failure: the winner's store likewise. */
		if (atomic_compare_exchange_strong_explicit(&cpu_page, &expect, want, memory_order_acq_rel,
							    memory_order_acquire)) {
			pg = want;
		} else {
			if (m != MAP_FAILED)
				munmap(m, len);
			pg = expect;
		}
	}
	if (TH_UNLIKELY(atomic_load_explicit(&pg->incarnation, memory_order_relaxed) == 0)) {
		/* First use in this process (a fork child's page is wiped). The
		 * counter is inherited, so the new value exceeds every tag the
		 * parent's thread caches can carry. Relaxed: the incarnation is
		 * compared, never used to publish other data. */
		uint64_t inc = atomic_fetch_add_explicit(&incarnations, 1, memory_order_relaxed) + 1;
		uint64_t zero = 0;
		atomic_compare_exchange_strong_explicit(&pg->incarnation, &zero, inc, memory_order_relaxed,
							memory_order_relaxed);
	}
	return pg;
}

/* Whether caches may be served (attached, not TIMEHANDS_DISABLE). -1: the
 * kernel only (pass-through); 0: attach in progress in another thread (merge
 * exact readings, stamp nothing); 1: serve. */
static int cache_mode(void)
{
	int ready = th__ready() || th__attach() == 0;
	if (!ready)
		return 0;
	return th__P.passthrough ? -1 : 1;
}

/* ------------------------------------------------------------ process caches */

/* The kernel's values behind cache `which`; -1 with errno if it refuses. */
static int read_kernel(int which, uint64_t k[TH_CPU_NVAL])
{
	if (which == TH_CPU_PROC) {
		struct timespec ts;
		if (th_sys_clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
			return -1;
		k[0] = ts_to_ns(&ts);
		k[1] = ns_pack(k[0]);
		return 0;
	}
	struct tms t;
	/* times() returns jiffies: never in the error range on 64 bits. */
	if (syscall(SYS_times, &t) == -1)
		return -1;
	k[0] = (uint64_t)t.tms_utime;
	k[1] = (uint64_t)t.tms_stime;
	k[2] = (uint64_t)t.tms_cutime;
	k[3] = (uint64_t)t.tms_cstime;
	return 0;
}

static void merge(struct th_cpu_cache *c, const uint64_t k[TH_CPU_NVAL], uint64_t stamp,
		  uint64_t out[TH_CPU_NVAL])
{
	/* Relaxed raises: each field is ordered for readers by the stamp's
	 * release below; for this thread by coherence. */
	for (int i = 0; i < TH_CPU_NVAL; i++)
		out[i] = raise_to(&c->val[i], k[i], memory_order_relaxed);
	/* Release: the raises above happen before any reader that acquires
	 * this stamp (or a later one in its release sequence: all stamp writes
	 * are read-modify-writes) reads the fields. */
	if (stamp)
		raise_to(&c->stamp, stamp, memory_order_release);
}

/* Read the kernel and merge; stamp = 0 merges without vouching for freshness. */
static int refresh(struct th_cpu_cache *c, int which, int stamped, uint64_t out[TH_CPU_NVAL])
{
	uint64_t k[TH_CPU_NVAL] = {0, 0, 0, 0};
	uint64_t stamp = stamped ? stamp_now() : 0;
	if (read_kernel(which, k) != 0)
		return -1;
	merge(c, k, stamp, out);
	return 0;
}

/* Refreshes under the lock and refreshes past a stalled holder, per cache:
 * statistics for tests, written on the slow path only. */
static _Atomic uint64_t refresh_count[2][TH_CPU_NCACHES];

static void serve(struct th_cpu_cache *c, uint64_t out[TH_CPU_NVAL])
{
	for (int i = 0; i < TH_CPU_NVAL; i++)
		out[i] = atomic_load_explicit(&c->val[i], memory_order_relaxed);
}

/* The slow half of a process-cache read at MONOTONIC_COARSE `now`. */
static int cache_get(struct th_cpu_page *pg, int which, int mode, uint64_t now, uint64_t out[TH_CPU_NVAL])
{
	struct th_cpu_cache *c = &pg->c[which];
	if (mode == 0)
		return refresh(c, which, 0, out);
	uint64_t tick = th__P.tick_ns;
	/* Acquire pairs with the release raise in merge(). */
	uint64_t s = atomic_load_explicit(&c->stamp, memory_order_acquire);
	if (TH_FRESH(s, now, tick)) {
		serve(c, out);
		return 0;
	}
	if (atomic_load_explicit(&c->lock, memory_order_relaxed) == 0) {
		uint32_t z = 0;
		/* Acquire pairs with the previous holder's release store of 0:
		 * its stamp is visible to the re-check below, so one refresh per
		 * tick however many readers found the stamp old. */
		if (atomic_compare_exchange_strong_explicit(&c->lock, &z, 1, memory_order_acquire,
							    memory_order_relaxed)) {
			int rc = 0;
			s = atomic_load_explicit(&c->stamp, memory_order_acquire);
			if (TH_FRESH(s, now, tick))
				serve(c, out);
			else {
				atomic_fetch_add_explicit(&refresh_count[0][which], 1, memory_order_relaxed);
				rc = refresh(c, which, 1, out);
			}
			/* Release pairs with the acquire of the next holder. */
			atomic_store_explicit(&c->lock, 0, memory_order_release);
			return rc;
		}
	}
	if (TH_FRESH(s, now, 2 * tick)) {
		serve(c, out); /* a refresh is under way */
		return 0;
	}
	/* Older than two ticks and the holder has not finished: it may have been
	 * preempted. Read the kernel ourselves; the merge keeps it monotonic. */
	atomic_fetch_add_explicit(&refresh_count[1][which], 1, memory_order_relaxed);
	return refresh(c, which, 1, out);
}

/* Value `i` of the process cache: TH_PROC_NS or TH_PROC_PK. */
static __attribute__((noinline)) int proc_val_slow(int i, uint64_t *v)
{
	int mode = cache_mode();
	if (mode < 0) {
		struct timespec ts;
		if (th_sys_clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
			return -1;
		*v = i == TH_PROC_PK ? ns_pack(ts_to_ns(&ts)) : ts_to_ns(&ts);
		return 0;
	}
	uint64_t out[TH_CPU_NVAL];
	if (cache_get(page_get(), TH_CPU_PROC, mode, coarse_now(), out) != 0)
		return -1;
	*v = out[i];
	return 0;
}

/* CLOCK_PROCESS_CPUTIME_ID from the cache, in ns (TH_PROC_NS) or packed
 * (TH_PROC_PK): 0, or -1 with errno. */
static inline __attribute__((always_inline)) int proc_val(int i, uint64_t *v)
{
	/* Acquire pairs with the CAS publishing the page (clk_hz is set).
	 * th__P.tick_ns is read only once a stamp exists (TH_FRESH). */
	struct th_cpu_page *pg = atomic_load_explicit(&cpu_page, memory_order_acquire);
	if (TH_LIKELY(pg != NULL)) {
		uint64_t now = coarse_now();
		struct th_cpu_cache *c = &pg->c[TH_CPU_PROC];
		/* Acquire pairs with the release raise of the stamp in merge():
		 * the value loaded below is at least that refresher's reading. */
		uint64_t s = atomic_load_explicit(&c->stamp, memory_order_acquire);
		if (TH_LIKELY(TH_FRESH(s, now, th__P.tick_ns))) {
			*v = atomic_load_explicit(&c->val[i], memory_order_relaxed);
			return 0;
		}
	}
	return proc_val_slow(i, v);
}

clock_t th__clock(void)
{
	uint64_t v;
	/* clock() is CLOCK_PROCESS_CPUTIME_ID in CLOCKS_PER_SEC, and
	 * (clock_t)-1 exactly when that clock cannot be read. */
	if (TH_UNLIKELY(proc_val(TH_PROC_NS, &v) != 0))
		return (clock_t)-1;
	return (clock_t)(v / (uint64_t)(NS_PER_S / CLOCKS_PER_SEC));
}

/* ------------------------------------------------------------ times() */

/* Fix this process's th_times() origin: the kernel's times() minus MONOTONIC_COARSE
 * in ticks, from a sandwich that does not straddle a tick boundary. One value
 * per process: the first compare-and-swap wins. */
static int calibrate(struct th_cpu_page *pg, uint64_t *off)
{
	uint64_t e = atomic_load_explicit(&pg->elapsed_off, memory_order_relaxed);
	if (e) {
		*off = e;
		return 0;
	}
	uint32_t hz = atomic_load_explicit(&clk_hz, memory_order_relaxed);
	int64_t o = 0;
	for (int i = 0; i < 4; i++) {
		struct timespec a, b;
		th__coarse_ts(TH_CK_MONO, &a);
		long k = syscall(SYS_times, NULL);
		if (k == -1)
			return -1;
		th__coarse_ts(TH_CK_MONO, &b);
		int64_t ta = mono_ticks(&a, hz), tb = mono_ticks(&b, hz);
		o = (int64_t)k - tb;
		if (ta == tb)
			break;
	}
	e = (uint64_t)o ^ TH_OFF_BIAS;
	uint64_t zero = 0;
	/* Relaxed: the offset is one self-contained word. */
	if (!atomic_compare_exchange_strong_explicit(&pg->elapsed_off, &zero, e, memory_order_relaxed,
						     memory_order_relaxed))
		e = zero;
	*off = e;
	return 0;
}

/*
 * What glibc's times() returns when the kernel refuses (only a seccomp filter
 * can make it, or a bad pointer): the raw result -errno, except that -1
 * becomes 0; errno untouched. A bad non-NULL buffer faults in the caller, as
 * glibc makes it do.
 */
static clock_t times_refused(int e, int saved_errno, struct tms *buf)
{
	errno = saved_errno;
	if (e == EFAULT && buf) {
		volatile clock_t *u = &buf->tms_utime;
		*u = *u;
	}
	return e == EPERM ? 0 : (clock_t)-e; /* -EPERM is -1 */
}

static clock_t kernel_times(struct tms *buf)
{
	int saved = errno;
	long r = syscall(SYS_times, buf);
	if (r == -1)
		return times_refused(errno, saved, buf);
	return (clock_t)r;
}

static __attribute__((noinline)) clock_t times_slow(struct tms *buf, const struct timespec *now)
{
	int mode = cache_mode();
	if (mode < 0)
		return kernel_times(buf);
	int saved = errno;
	struct th_cpu_page *pg = page_get();
	uint64_t off;
	if (calibrate(pg, &off) != 0)
		return times_refused(errno, saved, buf);
	uint64_t v[TH_CPU_NVAL];
	if (cache_get(pg, TH_CPU_TIMES, mode, ts_to_ns(now), v) != 0)
		return times_refused(errno, saved, buf);
	if (buf) {
		buf->tms_utime = (clock_t)v[0];
		buf->tms_stime = (clock_t)v[1];
		buf->tms_cutime = (clock_t)v[2];
		buf->tms_cstime = (clock_t)v[3];
	}
	uint32_t hz = atomic_load_explicit(&clk_hz, memory_order_relaxed);
	return (clock_t)(mono_ticks(now, hz) + (int64_t)(off ^ TH_OFF_BIAS));
}

clock_t th__times(struct tms *buf)
{
	/* The elapsed ticks come from this MONOTONIC_COARSE reading (the
	 * kernel's times() counts ticks too), which also dates the cache. */
	struct timespec ts;
	th__coarse_ts(TH_CK_MONO, &ts);
	/* Acquire: as in proc_val. */
	struct th_cpu_page *pg = atomic_load_explicit(&cpu_page, memory_order_acquire);
	if (TH_UNLIKELY(pg == NULL))
		return times_slow(buf, &ts);
	uint64_t off = atomic_load_explicit(&pg->elapsed_off, memory_order_relaxed);
	if (TH_UNLIKELY(off == 0))
		return times_slow(buf, &ts);
	/* Also without a buffer: a kernel that starts refusing times() is
	 * noticed within two ticks either way. */
	struct th_cpu_cache *c = &pg->c[TH_CPU_TIMES];
	/* Acquire pairs with the release raise of the stamp in merge(). */
	uint64_t s = atomic_load_explicit(&c->stamp, memory_order_acquire);
	if (TH_UNLIKELY(!TH_FRESH(s, ts_to_ns(&ts), th__P.tick_ns)))
		return times_slow(buf, &ts);
	if (buf) {
		buf->tms_utime = (clock_t)atomic_load_explicit(&c->val[0], memory_order_relaxed);
		buf->tms_stime = (clock_t)atomic_load_explicit(&c->val[1], memory_order_relaxed);
		buf->tms_cutime = (clock_t)atomic_load_explicit(&c->val[2], memory_order_relaxed);
		buf->tms_cstime = (clock_t)atomic_load_explicit(&c->val[3], memory_order_relaxed);
	}
	uint32_t hz = atomic_load_explicit(&clk_hz, memory_order_relaxed);
	return (clock_t)(mono_ticks(&ts, hz) + (int64_t)(off ^ TH_OFF_BIAS));
}

/* ------------------------------------------------------------ thread cache */

/* CLOCK_THREAD_CPUTIME_ID from the kernel, packed. */
static int thread_exact(uint64_t *v)
{
	struct timespec ts;
	if (th_sys_clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return -1;
	*v = ns_pack(ts_to_ns(&ts));
	return 0;
}

/*
 * Only this thread writes its cache, but a signal handler may run between
 * any two of its instructions and read or refresh the cache itself; the
 * atomic_signal_fence()s order the accesses as that handler sees them (the
 * handler runs on this CPU: only the compiler could reorder them).
 */
static __attribute__((noinline)) int thread_pk_slow(uint64_t *v)
{
	int mode = cache_mode();
	if (mode < 0)
		return thread_exact(v);
	struct th_cpu_page *pg = page_get();
	uint64_t inc = atomic_load_explicit(&pg->incarnation, memory_order_relaxed);
	struct th_cpu_thread *t = &cpu_self;
	uint64_t tag = atomic_load_explicit(&t->tag, memory_order_relaxed);
	while (tag != inc) {
		/* A handler that interrupted our reset: read the kernel and
		 * leave the cache alone. The reset we interrupted reads the
		 * kernel after we return, so it stores no smaller value. */
		if (tag == TH_TAG_RESET)
			return thread_exact(v);
		/* A new thread (tag 0) or a fork child's forking thread (the
		 * parent's tag): claim the reset; a handler that claimed it
		 * between our load and here has finished it (tag == inc now). */
		if (atomic_compare_exchange_strong_explicit(&t->tag, &tag, TH_TAG_RESET, memory_order_relaxed,
							    memory_order_relaxed)) {
			atomic_signal_fence(memory_order_seq_cst);
			atomic_store_explicit(&t->stamp, 0, memory_order_relaxed);
			atomic_store_explicit(&t->val, 0, memory_order_relaxed);
			/* The clearing is done before the tag says so. */
			atomic_signal_fence(memory_order_release);
			atomic_store_explicit(&t->tag, inc, memory_order_relaxed);
			tag = inc;
		}
	}
	uint64_t stamp = mode > 0 ? stamp_now() : 0;
	uint64_t e;
	if (thread_exact(&e) != 0)
		return -1;
	*v = raise_to(&t->val, e, memory_order_relaxed);
	/* The value is raised before the stamp vouches for it (pairs with the
	 * signal fence in thread_pk between its stamp and value loads). */
	atomic_signal_fence(memory_order_release);
	if (stamp)
		raise_to(&t->stamp, stamp, memory_order_relaxed);
	return 0;
}

static inline __attribute__((always_inline)) int thread_pk(uint64_t *v)
{
	/* Acquire: as in proc_val. */
	struct th_cpu_page *pg = atomic_load_explicit(&cpu_page, memory_order_acquire);
	if (TH_LIKELY(pg != NULL)) {
		struct th_cpu_thread *t = &cpu_self;
		uint64_t inc = atomic_load_explicit(&pg->incarnation, memory_order_relaxed);
		uint64_t now = coarse_now();
		uint64_t s = atomic_load_explicit(&t->stamp, memory_order_relaxed);
		if (TH_LIKELY(atomic_load_explicit(&t->tag, memory_order_relaxed) == inc &&
			      TH_FRESH(s, now, th__P.tick_ns))) {
			/* The value is loaded after the stamp that vouches for it
			 * (pairs with the signal fence in thread_pk_slow). */
			atomic_signal_fence(memory_order_acquire);
			*v = atomic_load_explicit(&t->val, memory_order_relaxed);
			return 0;
		}
	}
	return thread_pk_slow(v);
}

/* ------------------------------------------------------------ clock ids */

int th__cputime_coarse(clockid_t id, struct timespec *ts)
{
	uint64_t v;
	int rc = id == TH_CLOCK_THREAD_CPUTIME_COARSE ? thread_pk(&v) : proc_val(TH_PROC_PK, &v);
	if (TH_UNLIKELY(rc != 0))
		return -1;
	pk_to_ts(v, ts);
	return 0;
}

/* The coarse ids change once per refresh: their resolution is the tick, as
 * for the kernel's coarse clocks. */
int th__cputime_getres(clockid_t id, struct timespec *res)
{
	(void)id;
	if (!res)
		return 0;
	return th_kclock_getres(CLOCK_MONOTONIC_COARSE, res);
}

/* ------------------------------------------------------------ test seams */

_Atomic uint32_t *th__cputime_lock_word(int which)
{
	return &page_get()->c[which].lock;
}

void th__cputime_merge(int which, const uint64_t *vals, uint64_t stamp_ns)
{
	uint64_t k[TH_CPU_NVAL] = {0, 0, 0, 0}, out[TH_CPU_NVAL];
	int n = which == TH_CPU_PROC ? 1 : TH_CPU_NVAL;
	for (int i = 0; i < n; i++)
		k[i] = vals[i];
	if (which == TH_CPU_PROC)
		k[TH_PROC_PK] = ns_pack(k[TH_PROC_NS]);
	merge(&page_get()->c[which], k, stamp_ns, out);
}

void th__cputime_stats(int which, uint64_t *locked, uint64_t *stale)
{
	*locked = atomic_load_explicit(&refresh_count[0][which], memory_order_relaxed);
	*stale = atomic_load_explicit(&refresh_count[1][which], memory_order_relaxed);
}
