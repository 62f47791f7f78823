/*
 * Attach: the process state (th__P, on a page a fork child does not
 * inherit), the first attach, fork children, and th__fast(), the header's
 * view of it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "local.h"
#include "timehands.h"

/* The G3 floor starts at TH_G3_NONE, never 0 (th_abi_time_read). */
struct th_proc th__P __attribute__((aligned(64))) = {.g3 = TH_G3_NONE};
struct th_wstate th__W;
struct th_page_area th__page_area;
static struct th_wipe wipe_static;
struct th_wipe *_Atomic th__wipe = &wipe_static;

void th__account_retries(unsigned n)
{
	atomic_fetch_add_explicit(&th__P.retries, n, memory_order_relaxed);
}

static int64_t sampler_kread(void *ctx, clockid_t id)
{
	(void)ctx;
	return kread_ns(id);
}

static uint64_t sampler_ctr(void *ctx)
{
	(void)ctx;
	return th_hw_ctr_ordered();
}

static int sampler_koff_real(void *ctx, int64_t *off)
{
	(void)ctx;
	return th_hw_koff_real(off);
}

/* ------------------------------------------------------------------ attach */

static void reset_writer(struct th_proc *p)
{
	struct th_disc_config dc;
	th_disc_config_default(&dc, p->tick_ns);
	if (p->trust.nominal_hz > 0)
		dc.nominal_rate = 1e9 / p->trust.nominal_hz;
	th_disc_init(&th__W.disc, &dc);
	th__W.counter_usable = p->trust.usable;
	/* Relaxed: see th_proc.ctr_early (a fork child recomputes it here from
	 * the same trust). Where the CPU declares LFENCE serializing, LFENCE;RDTSC
	 * is the cheaper ordered read (AMD Zen: RDTSCP costs more); elsewhere
	 * RDTSCP is, and LFENCE;RDTSC is what is left without it. On Intel
	 * (LFENCE serializing by the architecture) the fence after the word
	 * with the counter after the copy costs less than either
	 * (TH_CTR_FENCE_COPY); TIMEHANDS_COUNTER_READ chooses, where the fence
	 * orders the read (on x86, where LFENCE is serializing). */
	int fence_ok = !TH_HW_FENCE_AT_COUNTER || p->trust.intel || p->trust.lfence_serializes;
	int late = p->cfg.counter_read == TH_CTR_READ_LATE ? fence_ok
		   : p->cfg.counter_read == TH_CTR_READ_EARLY ? 0
							     : TH_HW_FENCE_AT_COUNTER && p->trust.intel;
	uint32_t op = !th__W.counter_usable || p->passthrough ? TH_CTR_LATE
		      : late ? TH_CTR_FENCE_COPY
		      : TH_HW_FENCE_AT_COUNTER && p->trust.rdtscp && !p->trust.lfence_serializes
			      ? TH_CTR_RDTSCP
			      : TH_CTR_FENCED;
	atomic_store_explicit(&p->ctr_early, op, memory_order_relaxed);
	th__W.sp = (struct th_sampler){sampler_kread, sampler_ctr, NULL, ~(uint64_t)0, dc.max_sample_err_ns,
				       sampler_koff_real};
	th__W.wr = (struct th_writer){.tl = &p->tl, .disc = &th__W.disc, .sp = &th__W.sp, .tick_ns = p->tick_ns};
	memset(&th__W.dt, 0, sizeof th__W.dt);
	th__W.reason[0] = 0;
	atomic_store_explicit(&p->lock, 0, memory_order_relaxed);
}

/* The inline th_time() of the public header reads this. */
/* minor 2: the timeline and the G3 floor, for the header's inline fine
 * reads (fixed addresses: set here, before any read); minor 3: whether they
 * may read the counter first (th_proc.ctr_early; at and after the first
 * attach, how); minor 4: the counter from which the page serves an early
 * one (th_proc.sh_ctr); minor 5: attached, set at the first attach
 * (release) after everything else here; minor 6: the G3 floor's seconds are
 * never 0 (TH_G3_NONE before a first fine REALTIME reading of an epoch), so
 * that a time namespace's page refuses itself to th_abi_time_read. The simulation has
 * its own counter: no inline reads there. */
#if defined(TH_SIM) || !(defined(__x86_64__) || defined(__aarch64__))
#define TH_INLINE_TL_ABI 0
#else
#define TH_INLINE_TL_ABI TH_ABI_VERSION
#endif
static struct th__fast fast_state = {TH__FAST_ABI, 7, NULL, (const uint64_t *)(const void *)&th__P.g3, NULL, NULL, TH_INLINE_TL_ABI, 0, &th__P.tl,
				      th__page_area.bytes + TH_PAGE_HDR_SIZE,
				      (const uint32_t *)(const void *)&th__P.sh_delta,
				      (const uint32_t *)(const void *)&th__P.ctr_early,
				      (const uint64_t *)(const void *)&th__P.sh_ctr, 0, 0, &th__fine_fns_tbl};

__attribute__((visibility("default"))) const struct th__fast *th__fast(void)
{
	return &fast_state;
}

#ifndef TH_SIM
/* The direct reads of the kernel's data page still agree with the vDSO;
 * if not, they stop, for the inline th_time() of the header too. */
int th__kdata_recheck(void)
{
	if (th_kdata_check())
		return 1;
	__atomic_store_n(&fast_state.ksec, NULL, __ATOMIC_RELAXED);
	return 0;
}
#else
int th__kdata_recheck(void)
{
	return 0; /* the simulated kernel has no data page */
}
#endif

static void publish_fast_state(void)
{
#ifndef TH_SIM
	/* kseq before ksec, which is stored with release: a reader that sees
	 * ksec non-NULL (acquire) finds kseq valid (programs built with a
	 * header before minor 6 read it for time()). ksec only ever goes to
	 * NULL afterwards. */
	const uint32_t *kseq = __atomic_load_n(&th_kdata.seq, __ATOMIC_RELAXED);
	if (kseq)
		__atomic_store_n(&fast_state.kseq, kseq, __ATOMIC_RELAXED);
	if (kseq && __atomic_load_n(&th_kdata.real_sec, __ATOMIC_RELAXED) != NULL)
		/* Release: the header's inline th_time() finds kseq once it
		 * sees ksec. */
		__atomic_store_n(&fast_state.ksec, __atomic_load_n(&th_kdata.real_sec, __ATOMIC_RELAXED),
				 __ATOMIC_RELEASE);
#endif
	/* Release: g3 is set before the inline path can see time_fn; the
	 * rest before the inline fine reads can see `attached`. */
	__atomic_store_n(&fast_state.time_fn, th_hw_ktime_fn(), __ATOMIC_RELEASE);
	__atomic_store_n(&fast_state.attached, 1, __ATOMIC_RELEASE);
}

#ifndef TH_SIM
static const char *env_get(const char *name, void *ctx)
{
	(void)ctx;
	return getenv(name);
}

static void atfork_child(void)
{
	/* The child of a libc fork() attaches again, whichever page is in use:
	 * where MADV_WIPEONFORK is missing (the static page), and where it is
	 * accepted but not honoured (qemu-user); a MADV_WIPEONFORK page is
	 * already zero here. Raw SYS_fork children rely on the wiped page. */
	atomic_store_explicit(&atomic_load_explicit(&th__wipe, memory_order_relaxed)->state, TH_UNATTACHED,
			      memory_order_relaxed);
}

/* Test seam: no MADV_WIPEONFORK page (as before Linux 4.14). */
int th__test_no_wipe TH_HIDDEN;

static struct th_wipe *map_wipe_page(void)
{
	static int atfork_registered; /* inherited by children: registered once */
	if (!atfork_registered) {
		atfork_registered = 1;
		pthread_atfork(NULL, NULL, atfork_child);
	}
	void *m = th__test_no_wipe ? MAP_FAILED
				   : mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m != MAP_FAILED) {
		if (madvise(m, 4096, MADV_WIPEONFORK) == 0)
			return m;
		munmap(m, 4096);
	}
	return &wipe_static;
}

/*
 * Whether a bad TIMEHANDS_* value may be reported on stderr: yes for a program
 * that linked the library. The preload overrides this (preload.c): a process
 * it was loaded into from /etc/ld.so.preload did not ask for timehands and
 * must not see its output. th_status() carries the warning in every case.
 */
__attribute__((weak)) int th__warn_to_stderr(void)
{
	return 1;
}

static void first_attach(struct th_proc *p)
{
	th_kclock_init();
	th_config_parse(&p->cfg, env_get, NULL);
	if (p->cfg.warning[0] && th__warn_to_stderr()) {
		size_t n = strlen(p->cfg.warning);
		p->cfg.warning[n] = '\n';
		ssize_t w = write(2, p->cfg.warning, n + 1);
		(void)w;
		p->cfg.warning[n] = 0;
	}
	/* Relaxed stores: th__coarse_slow may load these while this runs. */
	__atomic_store_n(&p->passthrough, p->cfg.disable, __ATOMIC_RELAXED);
	if (!p->passthrough) {
		th_trust_probe(&p->trust, p->cfg.counter);
	} else {
		memset(&p->trust, 0, sizeof p->trust);
		strcpy(p->trust.reason, "disabled by TIMEHANDS_DISABLE=1");
		strcpy(p->trust.freq_source, "none");
	}
	struct timespec res = {0, 0};
	uint64_t tick = 4000000;
	if (th_kclock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && ts_ns(&res) > 0)
		tick = (uint64_t)ts_ns(&res);
	/* Relaxed, one store: th__coarse_ts_at and th__coarse_slow load it
	 * before they know whether a record exists (no ordering needed: the
	 * value only matters once a record published after it is seen). */
	__atomic_store_n(&p->tick_ns, tick, __ATOMIC_RELAXED);
	__atomic_store_n(&p->have_kcoarse, th_hw_have_kcoarse(), __ATOMIC_RELAXED);
	p->have_ktime = th_hw_have_ktime();
	/* the direct coarse read, found now: later a confined program may
	 * not open files */
	if (!p->passthrough && p->have_kcoarse)
		th_kdata_init();
	if (!p->passthrough && p->trust.usable && !p->cfg.own_line)
		th_kdata_conv_init();
	p->kv_ok = !p->passthrough && p->trust.usable && !p->cfg.own_line && th_kdata_conv_known();
	/* Look for timehandsd when a page was named, or when the default
	 * socket exists: a process on a machine without the daemon makes no
	 * further system calls for it (seccomp-confined programs). */
	struct stat st;
	th__W.page_retry_ns = NS_PER_S;
	th__W.page_wanted = !p->passthrough && strcmp(p->cfg.page, "none") != 0 &&
			 (getenv("TIMEHANDS_PAGE") != NULL || stat(p->cfg.page, &st) == 0);
	if (!th__W.page_wanted && !p->passthrough)
		th__copy_reason(th__W.page_reason, sizeof th__W.page_reason, "no timehandsd page at ", p->cfg.page);
}
#else
/* The simulation configures th__P itself (tests/sim). */
static struct th_wipe *map_wipe_page(void)
{
	return &wipe_static;
}
void th_sim_first_attach(struct th_proc *p);
static void first_attach(struct th_proc *p)
{
	th_sim_first_attach(p);
}

/* Start a new simulated process: no records, nothing attached. */
void th_sim_reset_process(void)
{
	memset(&th__P, 0, sizeof th__P);
	atomic_store_explicit(&th__P.g3, TH_G3_NONE, memory_order_relaxed);
	memset(&th__W, 0, sizeof th__W);
	atomic_store_explicit(&wipe_static.state, TH_UNATTACHED, memory_order_relaxed);
	atomic_store_explicit(&th__wipe, &wipe_static, memory_order_relaxed);
}

/* A fork: the child keeps the records and loses its other threads. */
void th_sim_fork_child(void)
{
	atomic_store_explicit(&wipe_static.state, TH_UNATTACHED, memory_order_relaxed);
}
#endif

int th__attach(void)
{
	struct th_wipe *w = atomic_load_explicit(&th__wipe, memory_order_acquire);
	uint32_t z = TH_UNATTACHED;
	/* One thread attaches; the others read the kernel's clocks meanwhile
	 * instead of waiting. */
	if (!atomic_compare_exchange_strong_explicit(&w->state, &z, TH_ATTACHING, memory_order_acquire,
						     memory_order_acquire))
		return z == TH_ATTACHED ? 0 : -1;
	struct th_proc *p = &th__P;
	struct th_wipe *nw = w;
	int child = p->inited;
	if (!p->inited) {
		first_attach(p);
		nw = map_wipe_page();
		p->inited = 1;
	}
	/* A fork child lands here too: the lock may be held by a thread that
	 * does not exist in this process, and the writer state may be half
	 * updated. The records themselves stay valid (same counter, same
	 * kernel clocks) and become the floor of what follows; the discipline
	 * goes on from their offsets and REALTIME epoch, so that the epochs
	 * keep counting up (the G3 floor and the floors of a switch are kept
	 * per epoch) and a step is measured from the offsets served. */
	reset_writer(p);
	atomic_store_explicit(&p->lock, th_hw_self(), memory_order_relaxed);
	uint64_t x = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
	if (child && TH_CUR_SLOT(x) != TH_SLOT_SHARED) {
		struct th_snap cs;
		unsigned r = 0;
		if (th_snapshot(&p->tl, &cs, &r) == 0)
			th_disc_continue(&th__W.disc, &cs);
	}
	th__tie_begin();
	if (TH_CUR_SLOT(x) == TH_SLOT_SHARED) {
		th__windup_locked(p); /* a fork child of a process reading the page */
	} else if (p->passthrough || !th__W.counter_usable) {
		struct th_sample s;
		memset(&s, 0, sizeof s);
		th__take_sample(p, &s, 0, 1);
		th_disc_observe(&th__W.disc, &s, NULL);
		struct th_snap prev;
		unsigned r = 0;
		int have = th_snapshot(&p->tl, &prev, &r) == 0;
		th__publish_kernel(have ? &prev : NULL, &s, p->tick_ns);
		th__try_shared(p, 1); /* the daemon may vouch for the counter */
	} else {
		th__local_windup(p, 0);
		th__try_shared(p, 1); /* at most a millisecond at start (G8); joins */
	}
	th__tie_end();
	atomic_store_explicit(&p->lock, 0, memory_order_release);
	publish_fast_state();
	/* Release: everything above is visible to a reader whose acquire load
	 * of state returns ATTACHED (th__ready). */
	if (nw != w) {
		atomic_store_explicit(&nw->state, TH_ATTACHED, memory_order_release);
		atomic_store_explicit(&th__wipe, nw, memory_order_release);
	}
	atomic_store_explicit(&w->state, TH_ATTACHED, memory_order_release);
	return 0;
}
