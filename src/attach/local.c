/*
 * Local mode: the process publishes its own records. There is no thread: the
 * first reader that finds the record due winds it up under a try-lock, and a
 * reader that finds the lock held keeps using the current record (still valid
 * until its expiry) or, past the expiry, takes the kernel's clock through the
 * announce protocol (record.h) so that the stalled writer cannot publish a
 * line below what was returned. Nobody ever waits for the writer.
 *
 * Mode changes keep G2 by construction:
 *   line -> kernel: a KERNEL record carries the old line's largest value as a
 *     floor; kernel readings below it are raised to it (a line that ran ahead
 *     of the kernel by up to its error bound hands over without a step back);
 *   kernel -> line: a TRANSIT record is published first with a guard a little
 *     above the kernel's present value; readers that see a kernel value above
 *     the guard announce themselves; the line is committed with a
 *     compare-and-swap and starts at or above the guard.
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

#include "proc.h"
#include "sample.h"
#include "timehands.h"

struct th_proc th__P __attribute__((aligned(64)));
struct th_page_area th__page_area;
static struct th_wipe wipe_static;
struct th_wipe *_Atomic th__wipe = &wipe_static;

#define NS_PER_S 1000000000LL

static inline int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * NS_PER_S + t->tv_nsec;
}

static clockid_t line_clock(int line)
{
	return line == TH_RAW ? CLOCK_MONOTONIC_RAW : CLOCK_MONOTONIC;
}

static int ck_of(int line, int sel)
{
	if (line == TH_RAW)
		return TH_CK_RAW;
	switch (sel) {
	case TH_SEL_REAL: return TH_CK_REAL;
	case TH_SEL_BOOT: return TH_CK_BOOT;
	case TH_SEL_TAI: return TH_CK_TAI;
	default: return TH_CK_MONO;
	}
}

/* The kernel's clock for (line, sel), i.e. for clock ck_of(line, sel). */
static clockid_t exact_clock(int line, int sel)
{
	static const clockid_t kernel_id[TH_NCLOCKS] = {
		[TH_CK_MONO] = CLOCK_MONOTONIC, [TH_CK_REAL] = CLOCK_REALTIME, [TH_CK_BOOT] = CLOCK_BOOTTIME,
		[TH_CK_TAI] = CLOCK_TAI,        [TH_CK_RAW] = CLOCK_MONOTONIC_RAW};
	return kernel_id[ck_of(line, sel)];
}

static int64_t kread_ns(clockid_t id)
{
	struct timespec ts = {0, 0};
	th_hw_kread(id, &ts);
	return ts_ns(&ts);
}

/* The kernel's own clock for (line, sel): before attach, and in pass-through. */
static int kernel_exact(int line, int sel, uint64_t *ns)
{
	*ns = (uint64_t)kread_ns(exact_clock(line, sel));
	return 0;
}

static void raise_i64(_Atomic int64_t *a, int64_t v)
{
	int64_t cur = atomic_load_explicit(a, memory_order_relaxed);
	while (cur < v &&
	       !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_seq_cst, memory_order_relaxed))
		;
}

/*
 * The kernel's clock for a reading made while no record exists yet (another
 * thread is attaching): 1 with *ns, or 0 when the caller must read again
 * (the first record is there now). A REALTIME or BOOTTIME reading raises the
 * bound its offset sets (th_proc.koff_lb), then looks whether the writer has
 * begun measuring the offsets: if so, the writer may have missed the bound,
 * and the reading is not served; the first record is waited for (bounded) and
 * read instead.
 */
static int kernel_first(struct th_proc *p, int line, int sel, uint64_t *ns)
{
	int i = sel == TH_SEL_REAL ? 0 : sel == TH_SEL_BOOT ? 1 : -1;
	if (i < 0 || line != TH_MONO)
		return kernel_exact(line, sel, ns) == 0;
	uint64_t r = (uint64_t)kread_ns(exact_clock(line, sel));
	int64_t m = kread_ns(CLOCK_MONOTONIC);
	/* Seq_cst raise and fence: the load of koff_begun comes after the
	 * raise; pairs with take_sample's store, fence and loads. */
	raise_i64(&p->koff_lb[i], (int64_t)(r - (uint64_t)m));
	atomic_thread_fence(memory_order_seq_cst);
	TH_STEP("first_look");
	if (!atomic_load_explicit(&p->koff_begun, memory_order_relaxed)) {
		*ns = r;
		return 1;
	}
	for (int k = 0; k < 4096; k++) {
		TH_STEP("first_wait");
		if (TH_CUR_SEQ(atomic_load_explicit(&p->tl.cur, memory_order_acquire)) != 0)
			return 0;
		th_hw_pause();
	}
	*ns = r; /* the writer stalled in its first windup: the kernel's clock */
	return 1;
}

static int64_t snap_offset(const struct th_snap *s, int sel)
{
	switch (sel) {
	case TH_SEL_REAL: return s->off_real;
	case TH_SEL_BOOT: return s->off_boot;
	case TH_SEL_TAI: return s->off_tai;
	default: return 0;
	}
}

void th__account_retries(unsigned n)
{
	atomic_fetch_add_explicit(&th__P.retries, n, memory_order_relaxed);
}

/* ------------------------------------------------------------------ sample */

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

static void take_sample(struct th_proc *p, struct th_sample *s, int ctr, int full)
{
	th_take_sample(&p->sp, s, ctr, full);
	if (full && !p->disc.have_offsets) {
		/* Seq_cst store, then the fence: the loads of the bounds below
		 * come after it; pairs with kernel_first's raise, fence and load
		 * of koff_begun: a reader this load misses sees koff_begun set
		 * and does not serve its reading. After the sample, so that
		 * such readers wait for the commit only, not for the sample's
		 * kernel reads. */
		atomic_store_explicit(&p->koff_begun, 1, memory_order_seq_cst);
		atomic_thread_fence(memory_order_seq_cst);
		/* The first offsets not below what the kernel's readings have
		 * shown (inside the measurement's bracket: a bound outside it
		 * means the kernel stepped meanwhile, which the next windup
		 * sees). Relaxed: ordered by the fence above. */
		int64_t lr = atomic_load_explicit(&p->koff_lb[0], memory_order_relaxed);
		int64_t lb = atomic_load_explicit(&p->koff_lb[1], memory_order_relaxed);
		if (lr > s->off_real && lr <= s->off_real + s->off_real_hw)
			s->off_real = lr;
		if (lb > s->off_boot && lb <= s->off_boot + s->off_boot_hw)
			s->off_boot = lb;
	}
}

static void quick_sample(struct th_proc *p, struct th_sample *s)
{
	th_quick_sample(&p->sp, s);
}

/* ------------------------------------------------------------------ windup */

static void set_reason(struct th_proc *p, const char *msg, uint64_t n)
{
	char num[24];
	int k = 0;
	char tmp[24];
	do {
		tmp[k++] = (char)('0' + n % 10);
		n /= 10;
	} while (n);
	for (int i = 0; i < k; i++)
		num[i] = tmp[k - 1 - i];
	num[k] = 0;
	size_t j = 0;
	for (const char *m = msg; *m && j + 1 < sizeof p->reason; m++) {
		if (*m == '%') {
			for (const char *q = num; *q && j + 1 < sizeof p->reason; q++)
				p->reason[j++] = *q;
		} else {
			p->reason[j++] = *m;
		}
	}
	p->reason[j] = 0;
}

static void note_jump(struct th_proc *p, uint64_t now)
{
	p->jumps[0] = p->jumps[1];
	p->jumps[1] = p->jumps[2];
	p->jumps[2] = now ? now : 1;
	if (p->jumps[0] && now - p->jumps[0] < 60 * (uint64_t)NS_PER_S) {
		p->distrust_ns = p->distrust_ns ? p->distrust_ns * 2 : 10 * (uint64_t)NS_PER_S;
		if (p->distrust_ns > 600 * (uint64_t)NS_PER_S)
			p->distrust_ns = 600 * (uint64_t)NS_PER_S;
		p->distrust_until = now + p->distrust_ns;
		p->jumps[0] = p->jumps[1] = p->jumps[2] = 0;
		atomic_fetch_add_explicit(&p->fallbacks, 1, memory_order_relaxed);
		set_reason(p, "the counter diverged from the kernel 3 times within 60 s: kernel clocks for % s",
			   p->distrust_ns / NS_PER_S);
	}
}

static void publish_kernel(struct th_proc *p, const struct th_snap *prev, const struct th_sample *s,
			   uint64_t due_in)
{
	struct th_rec_val v;
	th_writer_kernel(&p->wr, prev, s, due_in, 0, &v);
}

/* A fresh line after `prev` (writer.c). */
static int install_line(struct th_proc *p, const struct th_snap *prev, int have_prev)
{
	return th_writer_install(&p->wr, have_prev ? prev : NULL);
}

/* Test seam: called by a windup while it holds the lock (tests raise a signal
 * here to read the clocks from a handler that interrupted a windup). */
void (*th__test_windup_hook)(void) TH_HIDDEN;

static void raise_coarse_floor(struct th_proc *p, uint64_t v);
static void ns_to_ts(int64_t ns, struct timespec *ts);

#ifndef TH_SIM
/*
 * The kernel's own line: where the kernel computes time from the counter and
 * publishes its conversion at each of its updates (kdata.h, th_kconv), the
 * record is that conversion, exactly (its Q32 rates are mult << (32 - shift),
 * its bases the kernel's), tied to the update by the kernel's count (kseq):
 * readers serve it only while the kernel has not updated since, so every
 * reading is the one the kernel's vDSO would compute at that counter, through
 * rate changes, ticks, PLL slews and steps alike. Nothing is measured or
 * steered. Returns 1 when it published (or had to leave the kernel's line for
 * a kernel-mode record), 0 when the discipline's line is to go on, 2 when it
 * is to run out first (then the kernel's line follows it).
 */
static int kv_windup(struct th_proc *p, const struct th_snap *prev, uint64_t x)
{
	struct th_kconv k;
	struct th_rec_val v;
	int rc = th_kdata_conv(&k);
	if (rc == -2 && prev && prev->kseq)
		return 1; /* the kernel mid-update: its clock serves until the next try */
	/* The counter after the copy: the pvclock line is anchored there. */
	uint64_t c = th_hw_ctr_ordered();
	int rr = rc == 0 ? th_kconv_record(&k, c, &v) : -1;
	if (rr == -2 && prev && prev->kseq)
		return 1; /* a counter behind the kernel's update: as above */
	int conv = rr == 0;
	if (!conv) {
		if (!prev || !prev->kseq)
			return 0;
		/* Leaving the kernel's line (its clock mode changed, a switch
		 * of clocksource): it was the kernel's clock, so a kernel-mode
		 * record with no ceiling follows it without a step. */
		TH_STEP("kv_leave");
		/* The discipline knows the kernel's old rate exactly; the new
		 * clock's may differ by the ppm two clocksources disagree by:
		 * a new baseline, with the uncertainty of a fresh estimate. */
		for (int l = 0; l < TH_NLINES; l++) {
			p->disc.line[l].unc = 20e-6;
			p->disc.line[l].have_last = 0;
		}
		/* The discipline's offsets are the kernel's exact ones (the
		 * last observation above): replaced by a measurement only where
		 * they moved by more than its error (a process that entered
		 * another time namespace: its page 0 is the namespace's now),
		 * else REALTIME would move by that error. */
		struct th_sample smp;
		take_sample(p, &smp, 0, 1);
		const int64_t slack = 2000;
		if (llabs(smp.off_real - p->disc.off_real) > smp.off_real_hw + slack ||
		    llabs(smp.off_boot - p->disc.off_boot) > smp.off_boot_hw + slack) {
			int fl = th_disc_observe(&p->disc, &smp, NULL);
			if (fl & TH_OBS_STEP)
				atomic_store_explicit(&p->g3, (uint64_t)p->disc.epoch << 48, memory_order_relaxed);
		}
		publish_kernel(p, NULL, &smp, p->tick_ns);
		atomic_store_explicit(&p->kv_on, 0, memory_order_relaxed);
		return 1;
	}
	const int below_update = th_kconv_cycles(&k, c) < k.cycle_last;
	if (prev && !prev->kseq && prev->kind == TH_REC_LINE) {
		/* The discipline's line may be served up to its expiry (by a
		 * reader that copied it and reads the counter late): left to
		 * run out, never due before, it is followed where the kernel
		 * has reached its ceiling, a line's error from it at most. */
		int64_t d = (int64_t)(c - prev->anchor);
		if (d >= prev->dmin && d <= prev->dhi)
			return 2;
	}
	if (prev && !prev->kseq) {
		/* From the discipline's records: only once the kernel has passed
		 * everything they may have served (their ceilings), else a
		 * kernel-mode record holds them until it has. */
		int below = below_update || th_kconv_ns(&k, TH_KC_MONO, c) < th_snap_ceiling(prev, TH_MONO) ||
			    th_kconv_ns(&k, TH_KC_RAW, c) < th_snap_ceiling(prev, TH_RAW) ||
			    (prev->kind == TH_REC_TRANSIT && (th_kconv_ns(&k, TH_KC_MONO, c) < prev->guard[TH_MONO] ||
							      th_kconv_ns(&k, TH_KC_RAW, c) < prev->guard[TH_RAW]));
		if (below) {
			if (prev->kind == TH_REC_LINE) {
				struct th_sample smp;
				take_sample(p, &smp, 0, 1);
				publish_kernel(p, prev, &smp, p->tick_ns);
			}
			return 1;
		}
		/* coarse values served so far stay below what follows */
		raise_coarse_floor(p, th_snap_ceiling(prev, TH_MONO));
	}
	/* The discipline follows the kernel's line as an exact sample (no
	 * sandwich): should the kernel stop publishing it (another
	 * clocksource), the discipline's own line goes on from the kernel's
	 * rate and offsets instead of calibrating anew. It also numbers the
	 * REALTIME steps: a new epoch, and the seconds floor of the old one
	 * forgotten before a record of the new one is visible (the commit is
	 * a release). */
	struct th_sample smp;
	memset(&smp, 0, sizeof smp);
	smp.counter_ok = !below_update;
	smp.c = smp.c_raw = c;
	smp.mono = (int64_t)th_kconv_ns(&k, TH_KC_MONO, c);
	smp.raw = (int64_t)th_kconv_ns(&k, TH_KC_RAW, c);
	smp.off_real = v.off_real;
	smp.off_boot = v.off_boot;
	smp.tai_sec = (v.off_tai - v.off_real) / NS_PER_S;
	smp.tai_ok = 1;
	smp.tick = v.tick;
	int fl = th_disc_observe(&p->disc, &smp, prev);
	if (!prev || (fl & TH_OBS_STEP))
		atomic_store_explicit(&p->g3, (uint64_t)p->disc.epoch << 48, memory_order_relaxed);
	v.epoch = p->disc.epoch;
	atomic_store_explicit(&p->kv_off_real, v.off_real, memory_order_relaxed);
	TH_STEP("kv_commit");
	if (v.flags & TH_RECF_KPV) {
		/* A line below the kernel: it starts at or above the kernel's
		 * reading at its anchor, so it must not follow a kernel reading
		 * taken after that. A reader that served one of those announced
		 * itself (kernel_value) after it read it; then the compare-and-
		 * swap fails, and the line is anchored anew after a new load of
		 * the word (acquire: the counter is read after it, so after the
		 * announced reading), a few times, in as short a window as can
		 * be (readers of the stale line wait a moment for it first:
		 * th__fine_slow). */
		int done = th_commit(&p->tl, x, &v) == 0;
		for (int t = 0; !done && t < 6; t++) {
			x = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
			c = th_hw_ctr_ordered();
			uint16_t ep = v.epoch;
			if (th_kconv_record(&k, c, &v) != 0)
				break;
			v.epoch = ep;
			done = th_commit(&p->tl, x, &v) == 0;
		}
		if (!done)
			return 1;
	} else {
		th_commit_force(&p->tl, &v);
	}
	atomic_store_explicit(&p->kv_on, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->windups, 1, memory_order_relaxed);
	return 1;
}
#endif

static void local_windup(struct th_proc *p, int joining)
{
	struct th_snap s;
	unsigned retries = 0;
	/* Acquire: the sample below is taken after this load. An announcing
	 * reader whose fetch-add comes later in cur's modification order makes
	 * the commit's compare-and-swap fail. */
	uint64_t x = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
	int have = th_snapshot(&p->tl, &s, &retries) == 0;
	if (have && TH_CUR_ID(s.cur) != TH_CUR_ID(x))
		have = 0; /* cannot happen with a single writer */
#ifndef TH_SIM
	if (p->kv_ok && p->counter_usable && !joining) {
		int kv = kv_windup(p, have ? &s : NULL, x);
		if (kv == 1)
			return;
		joining = kv == 2; /* the discipline's line runs out first */
	}
#endif

	uint64_t now = (uint64_t)p->disc.line[TH_MONO].last_k;
	int ctr = p->counter_usable && (p->distrust_until == 0 || now >= p->distrust_until);
	if (ctr && p->distrust_until) {
		p->distrust_until = 0;
		p->reason[0] = 0;
	}

	struct th_sample smp;
	take_sample(p, &smp, ctr, 1);
	TH_STEP("observe");
	int fl = th_disc_observe(&p->disc, &smp, have ? &s : NULL);
	atomic_fetch_add_explicit(&p->windups, 1, memory_order_relaxed);
	if (fl & TH_OBS_JUMP) {
		TH_STEP("jump");
		note_jump(p, (uint64_t)smp.mono);
		if (p->distrust_until)
			ctr = 0;
	}
	if (fl & TH_OBS_STEP) {
		/* REALTIME was stepped: forget the seconds floor of the old
		 * epoch before any record of the new epoch is visible (the
		 * commit below is a release). */
		atomic_store_explicit(&p->g3, (uint64_t)p->disc.epoch << 48, memory_order_relaxed);
	}

	if (!ctr) {
		publish_kernel(p, have ? &s : NULL, &smp, p->tick_ns);
		return;
	}
	if (th_disc_offsets_wide(&p->disc)) {
		/* Offsets not measured closely enough to be served (a step
		 * found by a wide bracket, or the first one). A valid line
		 * runs out with its own offsets and epoch, due only at its
		 * expiry: a kernel-mode record now would carry its ceiling,
		 * up to a window ahead of the kernel, and serve up to its
		 * error bound ahead. Then kernel-mode records flagged for it
		 * (th_plan_kernel); the next read after a quarter tick
		 * measures again. */
		TH_STEP("wide");
		if (have && s.kind == TH_REC_LINE && !(fl & TH_OBS_JUMP)) {
			int64_t d = (int64_t)(smp.c - s.anchor);
			if (d >= s.dmin && d <= s.dhi) {
				struct th_rec_val v;
				th_plan_refresh(&p->disc, &s, &smp, &v);
				v.off_real = s.off_real;
				v.off_boot = s.off_boot;
				v.off_tai = s.off_tai;
				v.epoch = s.epoch;
				v.ddue = v.dhi;
				if (th_commit(&p->tl, x, &v) == 0)
					return;
			}
		}
		publish_kernel(p, have ? &s : NULL, &smp, p->tick_ns / 4);
		return;
	}
	if (!th_disc_ready(&p->disc)) {
		TH_STEP("calibrate");
		/* No frequency yet: the kernel serves until a second sample,
		 * calib_ns later, gives the rate. No blocking calibration. */
		publish_kernel(p, have ? &s : NULL, &smp, p->disc.cfg.calib_ns);
		return;
	}
	if (have && s.kind == TH_REC_LINE && !(fl & TH_OBS_JUMP)) {
		int64_t d = (int64_t)(smp.c - s.anchor);
		if (d >= s.dmin && d <= s.dhi) {
			struct th_rec_val v;
			TH_STEP("plan");
			/* A sample too wide to steer by only refreshes; so does a
			 * line that is left to run out (joining the page), whose
			 * due point stays at its expiry. */
			if (d >= 0 && !(fl & TH_OBS_BAD) && !joining) {
				th_plan_next(&p->disc, &s, &smp, &v);
			} else {
				th_plan_refresh(&p->disc, &s, &smp, &v);
				if (joining)
					v.ddue = v.dhi;
			}
			if (th_commit(&p->tl, x, &v) == 0)
				return;
			/* An announcement: the record expired while we worked. */
		}
	}
	if (fl & TH_OBS_BAD) {
		/* No line is started from a wide sandwich; the next read
		 * after the due time tries again. */
		publish_kernel(p, have ? &s : NULL, &smp, p->tick_ns / 4);
		return;
	}
	install_line(p, &s, have);
}


/* ------------------------------------------------------------ shared mode */

static uint64_t floor_ns(const struct th_proc *p, int ck)
{
	const struct th_shared_floor *f = &p->sh_floor[ck];
	return (uint64_t)(atomic_load_explicit(&f->sec, memory_order_relaxed) * NS_PER_S +
			  atomic_load_explicit(&f->nsec, memory_order_relaxed));
}

static void set_floor(struct th_proc *p, int ck, int64_t v)
{
	int64_t sec = v / NS_PER_S, nsec = v % NS_PER_S;
	if (nsec < 0) {
		nsec += NS_PER_S;
		sec--;
	}
	/* Relaxed: published by the release CAS that names the shared slot. */
	atomic_store_explicit(&p->sh_floor[ck].sec, sec, memory_order_relaxed);
	atomic_store_explicit(&p->sh_floor[ck].nsec, (uint32_t)nsec, memory_order_relaxed);
}

/* The counter may be read in shared mode: the local policy trusts it, or
 * refused it only for the clocksource and the daemon vouched for it. */
static int page_counter_ok(const struct th_proc *p, uint64_t flags)
{
	if (p->passthrough || p->cfg.counter == TH_CTR_OFF)
		return 0;
	if (p->trust.usable)
		return 1;
	return p->trust.clocksource_only && (flags & TH_PAGE_CROSS_CPU_CHECKED);
}

static void copy_reason(char *dst, size_t size, const char *a, const char *b)
{
	size_t n = 0;
	for (const char *q = a; q && *q && n + 1 < size; q++)
		dst[n++] = *q;
	for (const char *q = b; q && *q && n + 1 < size; q++)
		dst[n++] = *q;
	dst[n] = 0;
}

/*
 * May this process read the page now? 1 with the page's current record in
 * *ps; 0 with the reason in p->page_reason, and *dead set when the page
 * itself is gone or untrustworthy (not merely late).
 */
static int page_usable(struct th_proc *p, uint64_t now, struct th_snap *ps, int *dead)
{
	char why[128];
	*dead = 0;
	if (!p->page.hdr)
		return 0;
	if (th_page_check(&p->page, now, why, sizeof why) != 0) {
		copy_reason(p->page_reason, sizeof p->page_reason, "timehandsd page: ", why);
		*dead = 1;
		return 0;
	}
	p->page_dead = 0; /* live again (the daemon went on) */
	/* Acquire: pairs with the daemon's release store of the flags. */
	uint64_t flags = atomic_load_explicit(&p->page.hdr->flags, memory_order_acquire);
	if (!(flags & TH_PAGE_COUNTER_LINES)) {
		copy_reason(p->page_reason, sizeof p->page_reason,
			    "timehandsd publishes kernel records (it does not trust the counter)", "");
		return 0;
	}
	if (!page_counter_ok(p, flags)) {
		copy_reason(p->page_reason, sizeof p->page_reason, "the counter may not be read here: ",
			    p->trust.reason);
		return 0;
	}
	unsigned r = 0;
	if (th_snapshot(th__page_tl(), ps, &r) != 0 || ps->kind != TH_REC_LINE) {
		copy_reason(p->page_reason, sizeof p->page_reason, "the page's current record is not a counter line",
			    "");
		return 0;
	}
	int64_t d = (int64_t)(th_hw_ctr_ordered() - ps->anchor);
	if (d < ps->dmin || d > ps->dhi) {
		copy_reason(p->page_reason, sizeof p->page_reason, "the page's record expired: timehandsd is late", "");
		return 0;
	}
	return 1;
}

/*
 * Try to map the daemon's page (at most every page_backoff). The first
 * attempt is made at attach; later ones, from a windup, only in a process
 * that has used a page before (to pick up a restarted daemon): a process that
 * never found one makes no further system calls for it, since a program may
 * lock itself down (seccomp) once its clocks work (G9).
 */
static void page_attach(struct th_proc *p, uint64_t now, int timeout_ms)
{
	if (!p->page_wanted || now < p->page_next_try)
		return;
	/* A page that went stale stays mapped; a new one is looked for only
	 * when the program allows it (TIMEHANDS_PAGE_RECONNECT, config.h). */
	if (p->page.hdr && !(p->page_dead && p->cfg.page_reconnect))
		return;
	char why[128];
	TH_STEP("page_attach");
	/* Mapped over the area (and over a stale page) in one mmap: the area
	 * never becomes unmapped. Only this process's own slow paths read it,
	 * and only while cur names the shared slot, which it does not now. */
	struct th_page_map m;
	int rc = th_page_attach_at(p->cfg.page, timeout_ms, th__page_area.bytes, &m, why, sizeof why);
	if (rc == 0) {
		p->page = m;
		p->page_dead = 0;
		p->page_backoff = 0;
		p->page_reason[0] = 0;
		p->page_seen = 1;
		return;
	}
	copy_reason(p->page_reason, sizeof p->page_reason, "no timehandsd page: ", why);
	if (!p->page_seen)
		p->page_wanted = 0;
	p->page_backoff = p->page_backoff ? p->page_backoff * 2 : p->page_retry_ns;
	if (p->page_backoff > 30 * p->page_retry_ns)
		p->page_backoff = 30 * p->page_retry_ns;
	p->page_next_try = now + p->page_backoff;
}

/*
 * The page failed its liveness check (timehandsd stopped or died). It stays
 * mapped, untouched: leaving it needs no system call (a program locked down
 * by seccomp after attach must not be killed for a stopped daemon, G9), and
 * if the same daemon goes on (SIGCONT), or a restarted one continues the
 * same page (systemd's descriptor store, timehandsd.c), the page is used
 * again. A restarted daemon that publishes a new page is looked for from a
 * running program only with TIMEHANDS_PAGE_RECONNECT=1.
 */
static void page_drop(struct th_proc *p, uint64_t now)
{
	if (!p->page_dead && p->cfg.page_reconnect) {
		p->page_backoff = p->page_backoff ? p->page_backoff : p->page_retry_ns;
		p->page_next_try = now + p->page_backoff;
	}
	p->page_dead = 1;
	if (!p->cfg.page_reconnect) {
		size_t n = strlen(p->page_reason);
		copy_reason(p->page_reason + n, sizeof p->page_reason - n,
			    " (a restarted timehandsd serves programs started after it, unless it continues this page)", "");
	}
}

/* 1 once the page's line, at the counter now (*at), is at least 1 us above
 * every floor of the switch; waits at most 200 us for it. */
static int page_above_floors(struct th_proc *p, uint64_t *at)
{
	const int64_t margin = 1000;
	for (int i = 0; i < 2000; i++) {
		struct th_snap ps;
		unsigned r = 0;
		if (th_snapshot(th__page_tl(), &ps, &r) != 0 || ps.kind != TH_REC_LINE)
			return 0;
		*at = th_hw_ctr_ordered();
		int64_t d = (int64_t)(*at - ps.anchor);
		if (d < ps.dlo || d > ps.dhi)
			return 0;
		int ok = 1;
		for (int ck = 0; ck < TH_NCLOCKS && ok; ck++) {
			int64_t v = (int64_t)th_line_eval(&ps, th__ck_line(ck), d) + snap_offset(&ps, th__ck_sel(ck));
			ok = v >= (int64_t)floor_ns(p, ck) + margin;
		}
		if (ok)
			return 1;
		TH_STEP("share_wait");
		for (volatile int spin = 0; spin < 20; spin++)
			;
	}
	return 0;
}

/*
 * Local (or kernel) -> shared: a TRANSIT record first (the guard argument of
 * install_line), then floors at the guard for every clock, then the shared
 * slot is named with a compare-and-swap that a TRANSIT reader's announcement
 * makes fail. Shared readers return max(page line, floor), so nothing this
 * process returned before the switch is ever undercut; the floors cost at
 * most the guard plus the offset difference, once.
 */
static int switch_to_shared(struct th_proc *p, const struct th_snap *ps)
{
	struct th_snap base;
	unsigned r = 0;
	int have = th_snapshot(&p->tl, &base, &r) == 0;
	struct th_sample g;
	/* The guard, widened after an attempt the kernel outran (as in
	 * th_writer_install). */
	uint64_t gns = p->disc.cfg.guard_ns;
	for (int attempt = 0; attempt < 3; attempt++) {
		quick_sample(p, &g);
		struct th_rec_val t;
		th_plan_kernel(&p->disc, have ? &base : NULL, &g, p->tick_ns, gns, &t);
		TH_STEP("transit");
		uint64_t tw = th_commit_force(&p->tl, &t);
		p->wr.kernel_records++;
		th_val_to_snap(&t, tw, &base);
		have = 1;
		int64_t am = kread_ns(CLOCK_MONOTONIC), ar = kread_ns(CLOCK_MONOTONIC_RAW);
		if ((uint64_t)am > t.guard[TH_MONO] || (uint64_t)ar > t.guard[TH_RAW]) {
			gns = th_guard_widen(&p->disc, gns);
			continue; /* stalled since the guard was read */
		}
		uint64_t x = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
		int64_t gm = (int64_t)t.guard[TH_MONO];
		set_floor(p, TH_CK_MONO, gm);
		set_floor(p, TH_CK_REAL, gm + p->disc.off_real);
		set_floor(p, TH_CK_BOOT, gm + p->disc.off_boot);
		set_floor(p, TH_CK_TAI, gm + p->disc.off_tai);
		set_floor(p, TH_CK_RAW, (int64_t)t.guard[TH_RAW]);
		/* The page's epochs continue this process's numbering: its
		 * epoch now is ours now (same REALTIME offset, as far as either
		 * knows). Relaxed: published by the release CAS below. */
		atomic_store_explicit(&p->sh_delta, (uint16_t)(p->disc.epoch - ps->epoch), memory_order_relaxed);
		atomic_store_explicit(&p->sh_epoch, p->disc.epoch, memory_order_relaxed);
		uint64_t pt = p->page.tick_ns > p->tick_ns ? p->page.tick_ns : p->tick_ns;
		atomic_store_explicit(&p->sh_fresh_ns, pt + p->tick_ns / 2, memory_order_relaxed);
		atomic_store_explicit(&p->sh_fresh_fast, 0, memory_order_relaxed);
		/* The page's line must have passed the floors (plus a margin for
		 * a counter read a little early) before anyone is sent to it, so
		 * that a fast shared read needs no floor: wait for it here, the
		 * writer, a few microseconds at most, once per switch. */
		uint64_t at;
		if (!page_above_floors(p, &at))
			continue;
		/* Relaxed: published by the release CAS below (th_proc.sh_ctr).
		 * A reader of the previous switch that loads it finds its own
		 * word changed (the leave since), or a larger counter: either
		 * way its read goes to the slow path. */
		atomic_store_explicit(&p->sh_ctr, at, memory_order_relaxed);
		TH_STEP("share");
		/* Release: the floors above, and the page mapping, are visible to
		 * a reader whose acquire load of cur sees the shared slot. Fails
		 * if a TRANSIT reader announced a value above the guard. */
		uint64_t nw = TH_CUR_MAKE(TH_CUR_SEQ(x) + 1, TH_SLOT_SHARED, x);
		if (atomic_compare_exchange_strong_explicit(&p->tl.cur, &x, nw, memory_order_release,
							    memory_order_relaxed)) {
			/* The coarse floor at the guard only now: raised before
			 * the switch, a coarse read of the TRANSIT record would
			 * return the guard, above a fine read of the same record
			 * (phi of the kernel, up to the guard) that follows it
			 * (G4). Coarse reads of the page are held to the floors
			 * of the switch meanwhile (above_floor; the fast path
			 * waits for sh_fresh_fast); this floor is for the local
			 * records after a later leave. */
			uint64_t cf = atomic_load_explicit(&p->coarse_floor, memory_order_relaxed);
			while (cf < (uint64_t)gm &&
			       !atomic_compare_exchange_weak_explicit(&p->coarse_floor, &cf, (uint64_t)gm,
								      memory_order_relaxed, memory_order_relaxed))
				;
			p->page_reason[0] = 0;
			return 0;
		}
	}
	/* Could not switch: back to a local line (or kernel records). */
	copy_reason(p->page_reason, sizeof p->page_reason,
		    "joining timehandsd's page was interrupted (this thread was preempted while switching): "
		    "tried again at the next windup", "");
	if (th_disc_ready(&p->disc) && p->counter_usable)
		install_line(p, &base, 1);
	else
		publish_kernel(p, &base, &g, p->tick_ns);
	return -1;
}

/*
 * Joining the page adopts its REALTIME, BOOTTIME and TAI offsets. When the
 * kernel stepped one of them, this process's windup and the daemon's tick see
 * the step at different moments: a process that has already served the new
 * value must not join a page that still serves the old one (REALTIME would
 * step back to the old value and forward again, twice where the kernel
 * stepped once). Nor does it join a page that is ahead of it: its own next
 * windup follows the step first. Either way it stays local until both agree,
 * a daemon tick at most.
 */
static int page_offsets_agree(const struct th_proc *p, const struct th_snap *ps)
{
	const struct th_disc *d = &p->disc;
	if (!d->have_offsets)
		return 1;
	const int64_t slack = 4000; /* two measurements' noise (sandwich half-widths) */
	int64_t dr = ps->off_real - d->off_real, db = ps->off_boot - d->off_boot, dt = ps->off_tai - d->off_tai;
	return llabs(dr) <= d->off_real_hw + slack && llabs(db) <= d->off_boot_hw + slack &&
	       llabs(dt) <= d->off_real_hw + slack;
}

/* The page's record `ps` (if `have`) as the base of a local kernel-mode
 * record: its ceilings, never below the floors of the switch. */
static void leave_base(struct th_proc *p, const struct th_snap *ps, int have, struct th_snap *base)
{
	memset(base, 0, sizeof *base);
	base->kind = TH_REC_KERNEL;
	const int lines[TH_NLINES] = {TH_CK_MONO, TH_CK_RAW};
	for (int l = 0; l < TH_NLINES; l++) {
		uint64_t c = have ? th_snap_ceiling(ps, l) : 0, f = floor_ns(p, lines[l]);
		base->ceil[l] = c > f ? c : f;
		base->bound[l] = have && ps->bound[l] ? ps->bound[l] : 1000;
	}
	base->coarse = have ? ps->coarse : 0;
}

/* Adopt what the page's record `ps` served: its offsets and REALTIME epoch
 * (every record carries the daemon's, a KERNEL or TRANSIT one too: going on
 * with older ones would step REALTIME back to before a step the page had
 * already followed), and its slope, the freshest estimate of the kernel's
 * rate (the local one may be as old as the shared period), as the start of
 * the local discipline with a new baseline. */
static void leave_adopt(struct th_proc *p, const struct th_snap *ps)
{
	if (ps->kind == TH_REC_LINE) {
		for (int l = 0; l < TH_NLINES; l++) {
			struct th_line_disc *L = &p->disc.line[l];
			if (ps->hi[l] > 0) {
				L->rate = (double)ps->hi[l] / 4294967296.0;
				L->unc = 20e-6;
				L->have = 1;
				L->have_last = 0;
			}
		}
	}
	th_disc_hold_offsets(&p->disc, ps);
	p->disc.epoch = (uint16_t)(ps->epoch + atomic_load_explicit(&p->sh_delta, memory_order_relaxed));
}

/* The page's line `ps`, valid at the counter now, as a local record due now
 * (so that the next windup goes on from it like from any local line).
 * 0 if it is not a line or not valid now. */
static int leave_line(struct th_proc *p, const struct th_snap *ps, struct th_rec_val *v)
{
	if (ps->kind != TH_REC_LINE || !th_disc_ready(&p->disc) || !p->counter_usable)
		return 0;
	int64_t d = (int64_t)(th_hw_ctr_ordered() - ps->anchor);
	if (d < ps->dmin || d > ps->dhi)
		return 0;
	th_snap_to_val(ps, v);
	v->epoch = p->disc.epoch;
	if (v->ddue > d)
		v->ddue = d > v->dlo ? d : v->dlo;
	return 1;
}

/*
 * The page moved on between a leave's last look and its kernel-mode record
 * `k1` becoming visible (the leaver was preempted in between): a reader may
 * hold the newer record and serve its line, at any later counter value, up
 * to the line's ceiling and within G1's 1 us of the kernel. A second
 * kernel-mode record covers that: the larger ceilings, and a bound of 1 us
 * (the line's error bound, several us, would serve that far ahead of the
 * kernel until the kernel reaches the ceiling); k1's bound is kept while k1's
 * ceiling is still ahead of the kernel, so that phi never decreases.
 */
static void leave_cover(struct th_proc *p, const struct th_rec_val *k1)
{
	struct th_snap ps, base;
	unsigned r = 0;
	if (th_snapshot_progress(th__page_tl(), &ps, &r) != 0 || ps.kind == TH_REC_EMPTY)
		return;
	struct th_sample g;
	quick_sample(p, &g);
	leave_base(p, &ps, 1, &base);
	const uint64_t k[TH_NLINES] = {(uint64_t)g.mono, (uint64_t)g.raw};
	for (int l = 0; l < TH_NLINES; l++) {
		uint32_t b = base.bound[l] < 1000 ? base.bound[l] : 1000;
		if (k1->ceil[l] > k[l] && k1->bound[l] > b)
			b = k1->bound[l];
		base.bound[l] = b;
		if (k1->ceil[l] > base.ceil[l])
			base.ceil[l] = k1->ceil[l];
	}
	if (k1->coarse > base.coarse)
		base.coarse = k1->coarse;
	struct th_rec_val v;
	TH_STEP("unshare-cover");
	th_writer_kernel(&p->wr, &base, &g, k1->due_ns > (uint64_t)g.mono ? k1->due_ns - (uint64_t)g.mono : 0, 0, &v);
}

/*
 * Shared -> local. Readers that found the shared slot in this process's word
 * copy a page record, re-check the word, then read the counter: one that
 * re-checked before the leave's commit became visible may evaluate its copy
 * of the page's line at any later counter value. What the leave commits must
 * not undercut that, so it is built from the newest page record such a
 * reader can hold:
 *
 *  - a page line still valid now (the daemon stopped, or its page failed a
 *    check, before the line expired) is continued as the local record
 *    itself: it gives the page's very values at every counter value, and the
 *    page's records never undercut one another, however late a reader of an
 *    older one reads the counter (record.h; a line after a TRANSIT starts
 *    above the older line's ceiling). A kernel-mode record instead would
 *    serve the kernel plus the line's error bound until the kernel reached
 *    the line's value at its expiry, up to a window ahead;
 *  - otherwise a kernel-mode record whose ceilings C are the page record's
 *    (and the floors of the switch): phi never undercuts what a page line or
 *    a page kernel record served; a local line follows (install_line).
 *
 * The page's word is compared with the snapshot's just before the commit (a
 * leaver stalled after its snapshot may find it long expired while readers
 * serve a newer line), and after a line copy it is read again behind a
 * seq_cst fence that orders the commit before that load. A reader that
 * re-checked before the commit was visible copied its record before that
 * load (copy, acquire fence, re-check; the re-check read the word before our
 * store, which precedes our fence and load): the second look sees that
 * record or a newer one, and a newer valid line is continued in turn, a
 * newer record of another kind covered (leave_cover). The kernel-mode
 * record's coarse value is the snapshot's: its coarse reads take a fine
 * reading (TH_RECF_COARSE_FINE), at least the kernel at the read, above the
 * page's coarse values of before the commit. Not covered: a daemon line
 * committed between the comparison and a kernel-mode commit (a preempted
 * leaver) may be read up to its lead over the kernel above what readers of
 * the kernel-mode record get until the cover (README, Limits).
 */
/* The page's word names another record than the snapshot `ps`'s. Acquire:
 * as any load of the page's word. */
static int page_moved(const struct th_timeline *pt, const struct th_snap *ps)
{
	return TH_CUR_ID(atomic_load_explicit(&pt->cur, memory_order_acquire)) != TH_CUR_ID(ps->cur);
}

/* The second look, after a commit of the leave. Seq_cst: orders the commit
 * (a release store of the word the readers re-check) before the load of the
 * page's word; pairs with the readers' acquire fence between their copy and
 * their re-check (see leave_shared). */
static int page_moved_since_commit(const struct th_timeline *pt, const struct th_snap *ps)
{
	atomic_thread_fence(memory_order_seq_cst);
	TH_STEP("unshare-look");
	return page_moved(pt, ps);
}

static void leave_shared(struct th_proc *p, uint64_t now, int dead)
{
	enum { ROUNDS = 8 };
	struct th_timeline *pt = th__page_tl();
	struct th_snap ps, base;
	int lines = 0, kernel = 0;
	atomic_fetch_add_explicit(&p->fallbacks, 1, memory_order_relaxed);
	/* Each round starts from a fresh snapshot; one that finds the page
	 * moved on before its commit starts again, except the last, which
	 * commits anyway. A line copy cannot fail to commit before the first
	 * one (nobody announces on the shared slot). */
	for (int round = 0; round < ROUNDS; round++) {
		int last = round == ROUNDS - 1;
		unsigned r = 0;
		int have = th_snapshot_progress(pt, &ps, &r) == 0 && ps.kind != TH_REC_EMPTY;
		if (have)
			leave_adopt(p, &ps);
		TH_STEP("unshare");
		struct th_rec_val v;
		if (have && leave_line(p, &ps, &v)) {
			uint64_t x = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
			if (!last && page_moved(pt, &ps))
				continue;
			TH_STEP("unshare-line");
			if (th_commit(&p->tl, x, &v) != 0)
				continue; /* an announcement: a reader found an earlier copy expired */
			lines++;
			if (!page_moved_since_commit(pt, &ps))
				break;
			continue;
		}
		if (lines)
			break; /* no kernel-mode record after line copies */
		leave_base(p, &ps, have, &base);
		struct th_sample g;
		quick_sample(p, &g);
		uint64_t due = th_disc_ready(&p->disc) && p->counter_usable ? 0
			       : p->disc.line[TH_MONO].have		       ? p->tick_ns
									       : p->disc.cfg.calib_ns;
		th_plan_kernel(&p->disc, &base, &g, due, 0, &v);
		/* Its coarse value is the snapshot's, and the page may have
		 * moved on before the commit (a leaver stalled here): coarse
		 * readers of this record take a fine reading instead, which is
		 * at least the kernel now (th__coarse_slow). */
		v.flags |= TH_RECF_COARSE_FINE;
		if (have && !last && page_moved(pt, &ps))
			continue;
		TH_STEP("unshare-kernel");
		th_writer_commit_kernel(&p->wr, &g, &v);
		kernel = 1;
		if (have && page_moved_since_commit(pt, &ps))
			leave_cover(p, &v);
		break;
	}
	/* A local line now, as after any kernel-mode record. */
	unsigned r = 0;
	if (kernel && th_disc_ready(&p->disc) && p->counter_usable && th_snapshot(&p->tl, &base, &r) == 0)
		install_line(p, &base, 1);
	if (dead)
		page_drop(p, now); /* nobody is told to read it any more */
}

/*
 * Look for the daemon's page and switch to it when it is usable. Returns 1
 * when the page is in use or being joined (nothing else to publish), 0 when
 * the local line goes on.
 *
 * A local line that is still valid may be served up to its ceiling, up to a
 * window ahead of the kernel: switching then would hold the floors of the
 * switch that far up. It is left to run out instead (its due point is moved
 * to its expiry, so no reader winds it up); the first reader past the expiry
 * comes back here and switches from a ceiling the kernel has reached.
 */
static int try_shared(struct th_proc *p, int timeout_ms)
{
	if (p->passthrough || !p->page_wanted)
		return 0;
	if (atomic_load_explicit(&p->kv_on, memory_order_relaxed)) {
		/* the kernel's own line is exact and costs no windup that a
		 * page would save */
		copy_reason(p->page_reason, sizeof p->page_reason,
			    "not using timehandsd's page: the records are the kernel's own conversion of the counter", "");
		return 0;
	}
	uint64_t now = (uint64_t)kread_ns(CLOCK_MONOTONIC);
	page_attach(p, now, timeout_ms);
	struct th_snap ps;
	int dead;
	if (!page_usable(p, now, &ps, &dead)) {
		if (dead)
			page_drop(p, now);
		return 0;
	}
	if (th_disc_offsets_wide(&p->disc)) {
		/* The floors of a switch are this process's offsets plus the
		 * guard: not from offsets that may be off by their bracket. */
		copy_reason(p->page_reason, sizeof p->page_reason,
			    "this process has not yet measured the kernel's REALTIME and BOOTTIME offsets closely", "");
		return 0;
	}
	if (!page_offsets_agree(p, &ps)) {
		copy_reason(p->page_reason, sizeof p->page_reason,
			    "the page has not yet followed a step of the kernel's REALTIME, BOOTTIME or TAI", "");
		return 0;
	}
	struct th_snap cur;
	unsigned r = 0;
	if (th_snapshot(&p->tl, &cur, &r) == 0 && cur.kind == TH_REC_LINE) {
		int64_t d = (int64_t)(th_hw_ctr_ordered() - cur.anchor);
		if (d <= cur.dhi) {
			/* joining: the same line with fresh offsets and coarse
			 * value (a REALTIME step is still followed), never due */
			TH_STEP("join");
			copy_reason(p->page_reason, sizeof p->page_reason,
				    "joining timehandsd's page: the local line serves until it runs out", "");
			local_windup(p, 1);
			return 1;
		}
	}
	switch_to_shared(p, &ps);
	return 1;
}

static void windup_locked(struct th_proc *p)
{
	if (th__test_windup_hook)
		th__test_windup_hook();
#ifndef TH_SIM
	th__kdata_recheck();
#endif
	uint64_t x = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
	if (TH_CUR_SLOT(x) == TH_SLOT_SHARED) {
		/* The daemon publishes; this process only checks on it when a
		 * reader found its record due, expired or stale. */
		uint64_t now = (uint64_t)kread_ns(CLOCK_MONOTONIC);
		struct th_snap ps;
		int dead;
		if (!page_usable(p, now, &ps, &dead))
			leave_shared(p, now, dead);
		return;
	}
	if (try_shared(p, 2))
		return;
	local_windup(p, 0);
}

int th__windup_try(void)
{
	struct th_proc *p = &th__P;
	uint32_t z = 0;
	/* A fork child: its inherited lock may be held by a thread that does
	 * not exist here; attaching again resets the writer state. */
	if (!th__ready())
		return th__attach() == 0;
	if (atomic_load_explicit(&p->lock, memory_order_relaxed) != 0)
		return 0;
	TH_STEP("lock");
	/* Acquire pairs with the release below: the writer state left by the
	 * previous holder is visible. */
	if (!atomic_compare_exchange_strong_explicit(&p->lock, &z, 1, memory_order_acquire,
						     memory_order_relaxed))
		return 0;
	windup_locked(p);
	TH_STEP("unlock");
	atomic_store_explicit(&p->lock, 0, memory_order_release);
	return 1;
}

/* ------------------------------------------------------------------ attach */

static void reset_writer(struct th_proc *p)
{
	struct th_disc_config dc;
	th_disc_config_default(&dc, p->tick_ns);
	if (p->trust.nominal_hz > 0)
		dc.nominal_rate = 1e9 / p->trust.nominal_hz;
	th_disc_init(&p->disc, &dc);
	p->counter_usable = p->trust.usable;
	/* Relaxed: see th_proc.ctr_early (a fork child recomputes it here from
	 * the same trust). Where the CPU declares LFENCE serializing, LFENCE;RDTSC
	 * is the cheaper ordered read (AMD Zen: RDTSCP costs more); elsewhere
	 * RDTSCP is (Intel), and LFENCE;RDTSC is what is left without it. */
	uint32_t op = !p->counter_usable || p->passthrough ? TH_CTR_LATE
		      : TH_HW_FENCE_AT_COUNTER && p->trust.rdtscp && !p->trust.lfence_serializes
			      ? TH_CTR_RDTSCP
			      : TH_CTR_FENCED;
	atomic_store_explicit(&p->ctr_early, op, memory_order_relaxed);
	p->sp = (struct th_sampler){sampler_kread, sampler_ctr, NULL, ~(uint64_t)0, dc.max_sample_err_ns};
	p->wr = (struct th_writer){.tl = &p->tl, .disc = &p->disc, .sp = &p->sp, .tick_ns = p->tick_ns};
	memset(p->jumps, 0, sizeof p->jumps);
	p->distrust_until = 0;
	p->distrust_ns = 0;
	p->reason[0] = 0;
	atomic_store_explicit(&p->lock, 0, memory_order_relaxed);
}

/* The inline th_time() of the public header reads this. */
/* minor 2: the timeline and the G3 floor, for the header's inline fine
 * reads (fixed addresses: set here, before any read); minor 3: whether they
 * may read the counter first (th_proc.ctr_early; at and after the first
 * attach, how); minor 5: attached, set at the first attach (release) after
 * everything else here; minor 4: the counter from
 * which the page serves an early one (th_proc.sh_ctr). The simulation has
 * its own counter: no inline reads there. */
#if defined(TH_SIM) || !(defined(__x86_64__) || defined(__aarch64__))
#define TH_INLINE_TL_ABI 0
#else
#define TH_INLINE_TL_ABI TH_ABI_VERSION
#endif
static struct th__fast fast_state = {TH__FAST_ABI, 5, NULL, (const uint64_t *)(const void *)&th__P.g3, NULL, NULL, TH_INLINE_TL_ABI, 0, &th__P.tl,
				      th__page_area.bytes + TH_PAGE_HDR_SIZE,
				      (const uint32_t *)(const void *)&th__P.sh_delta,
				      (const uint32_t *)(const void *)&th__P.ctr_early,
				      (const uint64_t *)(const void *)&th__P.sh_ctr, 0, 0};

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
	 * ksec non-NULL (acquire) finds kseq valid. ksec only ever goes to
	 * NULL afterwards. */
	const uint32_t *kseq = __atomic_load_n(&th_kdata.seq, __ATOMIC_RELAXED);
	if (kseq)
		__atomic_store_n(&fast_state.kseq, kseq, __ATOMIC_RELAXED);
	if (kseq && __atomic_load_n(&th_kdata.real_sec, __ATOMIC_RELAXED) != NULL)
		/* Release: the header's inline th_time() finds kseq (and g3)
		 * once it sees ksec. */
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
	p->page_retry_ns = NS_PER_S;
	p->page_wanted = !p->passthrough && strcmp(p->cfg.page, "none") != 0 &&
			 (getenv("TIMEHANDS_PAGE") != NULL || stat(p->cfg.page, &st) == 0);
	if (!p->page_wanted && !p->passthrough)
		copy_reason(p->page_reason, sizeof p->page_reason, "no timehandsd page at ", p->cfg.page);
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
	if (!p->inited) {
		first_attach(p);
		nw = map_wipe_page();
		p->inited = 1;
	}
	/* A fork child lands here too: the lock may be held by a thread that
	 * does not exist in this process, and the writer state may be half
	 * updated. The records themselves stay valid (same counter, same
	 * kernel clocks) and become the floor of what follows. */
	reset_writer(p);
	atomic_store_explicit(&p->lock, 1, memory_order_relaxed);
	uint64_t x = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
	if (TH_CUR_SLOT(x) == TH_SLOT_SHARED) {
		windup_locked(p); /* a fork child of a process reading the page */
	} else if (p->passthrough || !p->counter_usable) {
		struct th_sample s;
		memset(&s, 0, sizeof s);
		take_sample(p, &s, 0, 1);
		th_disc_observe(&p->disc, &s, NULL);
		struct th_snap prev;
		unsigned r = 0;
		int have = th_snapshot(&p->tl, &prev, &r) == 0;
		publish_kernel(p, have ? &prev : NULL, &s, p->tick_ns);
		try_shared(p, 1); /* the daemon may vouch for the counter */
	} else {
		local_windup(p, 0);
		try_shared(p, 1); /* at most a millisecond at start (G8); joins */
	}
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

/* ------------------------------------------------------------ slow paths */

void th__g3_raise_slow(uint64_t sec, uint16_t epoch)
{
	uint64_t w = atomic_load_explicit(&th__P.g3, memory_order_relaxed);
	uint64_t want = ((uint64_t)epoch << 48) | sec;
	/* Relaxed is enough: G3 is about reads ordered by happens-before, and
	 * coherence orders the accesses to this one word. (epoch, second)
	 * only ever increases (see th__g3_raise). */
	while (w < want)
		if (atomic_compare_exchange_weak_explicit(&th__P.g3, &w, want, memory_order_relaxed,
							  memory_order_relaxed))
			return;
}

/* A record whose offsets may not be served: the kernel's own clock for
 * REALTIME, BOOTTIME and TAI (TH_RECF_KERNEL_OFFSETS). */
static int exact_offsets(const struct th_snap *s, int line, int sel)
{
	return (s->flags & TH_RECF_KERNEL_OFFSETS) && line == TH_MONO && sel != TH_SEL_NONE;
}

/* A kernel's line the kernel moved on from, while another thread holds the
 * writer's lock: a moment (bounded: G6) for its windup to commit the next
 * one, rather than a kernel reading (which, for a pvclock line, would also
 * make that commit's compare-and-swap fail: kv_windup). 1 once the word names
 * another record. */
static int kv_wait(struct th_proc *p, uint64_t cur)
{
	for (int i = 0; i < 256; i++) {
		th_hw_pause();
		if (TH_CUR_ID(atomic_load_explicit(&p->tl.cur, memory_order_acquire)) != TH_CUR_ID(cur))
			return 1;
	}
	return 0;
}

/*
 * Kernel-served value of clock (line, sel) for a KERNEL/TRANSIT record or an
 * expired LINE: phi of the kernel's reading (record.h) plus the record's
 * offset, or the kernel's own clock where the record's offsets may not be
 * served (its MONOTONIC equivalent, minus the offset, then stands in for the
 * kernel reading in the checks below). Returns 1 with *v set, 0 if the caller
 * must read again (a new record appeared).
 */
static int kernel_value(struct th_proc *p, const struct th_snap *s, int line, int sel, uint64_t *v)
{
	/* The kernel's line that the kernel has moved on from: its readings
	 * were the kernel's, so is this one, of the very clock asked for (its
	 * offsets may be those before a step). */
	int exact = exact_offsets(s, line, sel) || s->kseq != 0;
	uint64_t off = (uint64_t)snap_offset(s, sel);
	uint64_t ke = (uint64_t)kread_ns(exact ? exact_clock(line, sel) : line_clock(line));
	uint64_t k = exact ? ke - off : ke;
	uint64_t C = th_snap_ceiling(s, line);
	uint64_t m = exact ? k : th_phi(k, C, s->bound[line]);
	atomic_fetch_add_explicit(&p->slow_reads, 1, memory_order_relaxed);
	/* The kernel's counter read happens before what follows. */
	th_hw_order_after_kread();
	switch (s->kind) {
	case TH_REC_LINE: /* expired: a windup may be pending with an older sample */
		/* A pvclock line below the kernel: the next one must start
		 * above this reading (kv_windup) */
		if ((k > C || (s->flags & TH_RECF_KPV)) && !th_announce(&p->tl, s->cur))
			return 0;
		break;
	case TH_REC_TRANSIT:
		if (m > s->guard[line] && !th_announce(&p->tl, s->cur))
			return 0;
		break;
	default: { /* KERNEL: no writer pending; make sure none started before our read */
		uint64_t now = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
		if (TH_CUR_ID(now) != TH_CUR_ID(s->cur))
			return 0;
		if (k >= s->due_ns)
			th__windup_try();
		break;
	}
	}
	*v = exact ? ke : m + off;
	return 1;
}

/* After a copy of the page: the process still reads it, through the word
 * `lc` that named the shared slot (as in th__read_tl_v). The acquire fence
 * orders the copy before the re-load; see leave_shared. */
static int page_still_read(struct th_proc *p, uint64_t lc)
{
	atomic_thread_fence(memory_order_acquire);
	return TH_CUR_ID(atomic_load_explicit(&p->tl.cur, memory_order_relaxed)) == TH_CUR_ID(lc);
}

/* A page record's REALTIME epoch in this process's numbering. */
static uint16_t page_epoch(struct th_proc *p, uint16_t e)
{
	return (uint16_t)(e + atomic_load_explicit(&p->sh_delta, memory_order_relaxed));
}

/* A shared-mode value never below the floor of the switch (REALTIME and
 * TAI: only while the page's epoch is the one of the switch). */
static uint64_t above_floor(struct th_proc *p, uint64_t v, int ck, uint16_t epoch)
{
	if ((ck == TH_CK_REAL || ck == TH_CK_TAI) &&
	    epoch != atomic_load_explicit(&p->sh_epoch, memory_order_relaxed))
		return v;
	uint64_t f = floor_ns(p, ck);
	return v > f ? v : f;
}

/*
 * Slow path while the process reads the page (`lc` names the shared slot).
 * Returns 1 with *ns set, 0 to read again. A reader never writes to the page,
 * so an expired page record cannot be announced: the local writer leaves
 * shared mode (leave_shared), and while another thread is doing that, the
 * value is phi of the kernel against the page record's ceiling and the
 * floors, checked like a KERNEL record's (no writer of the local timeline can
 * have started a transition before our kernel read unless cur changed).
 * `last`: the caller's passes are over; no windup and no second look at the
 * page's word (th__fine_slow's fallback).
 */
static int shared_value(struct th_proc *p, uint64_t lc, int line, int sel, int ordered, uint64_t *ns,
			uint16_t *epoch, int last)
{
	struct th_snap ps = {0};
	unsigned retries = 0;
	int ck = ck_of(line, sel);
	int have = th_snapshot_progress(th__page_tl(), &ps, &retries) == 0;
	if (have) {
		*epoch = page_epoch(p, ps.epoch);
		if (ps.kind == TH_REC_LINE) {
			uint64_t c = ordered ? th_hw_ctr_ordered() : th_hw_ctr_relaxed();
			int64_t d = (int64_t)(c - ps.anchor);
			if (d >= ps.dmin && d <= ps.dhi) {
				if (d >= ps.ddue)
					th__windup_try(); /* the daemon is late: check on it */
				if (d < ps.dlo)
					d = ps.dlo;
				uint64_t v = th_line_eval(&ps, line, d) + (uint64_t)snap_offset(&ps, sel);
				if (!page_still_read(p, lc))
					return 0; /* read again */
				*ns = above_floor(p, v, ck, page_epoch(p, ps.epoch));
				return 1;
			}
		}
	}
	if (!last && th__windup_try())
		return 0;
	uint64_t k = (uint64_t)kread_ns(line_clock(line));
	const int lines[TH_NLINES] = {TH_CK_MONO, TH_CK_RAW};
	uint64_t C = have ? th_snap_ceiling(&ps, line) : 0, f = floor_ns(p, lines[line]);
	uint64_t v = th_phi_page(k, C > f ? C : f, have && ps.bound[line] ? ps.bound[line] : 1000);
	atomic_fetch_add_explicit(&p->slow_reads, 1, memory_order_relaxed);
	th_hw_order_after_kread();
	if (TH_CUR_ID(atomic_load_explicit(&p->tl.cur, memory_order_acquire)) != TH_CUR_ID(lc))
		return 0;
	/* The page's word still names the record copied, after the kernel
	 * read (ordered before this load above; acquire, as any load of the
	 * page's word): else the daemon committed since, maybe a line that
	 * lags the kernel, which later reads would return below this one;
	 * read again (as kernel_value does for a KERNEL record).
	 * tests/model/timehands.pml, daemon world: -DBREAK_PAGE_NO_RECHECK. */
	if (!last && have && TH_CUR_ID(atomic_load_explicit(&th__page_tl()->cur, memory_order_acquire)) != TH_CUR_ID(ps.cur))
		return 0;
	int64_t off = have ? snap_offset(&ps, sel)
			   : sel == TH_SEL_REAL ? p->disc.off_real
			   : sel == TH_SEL_BOOT ? p->disc.off_boot
			   : sel == TH_SEL_TAI  ? p->disc.off_tai
						: 0;
	*ns = above_floor(p, v + (uint64_t)off, ck, have ? page_epoch(p, ps.epoch) : 0);
	return 1;
}

/* A commit since a pass of th__fine_slow began: to the process's word
 * (`pass_cur` at the start of the pass), or, while that word named the
 * shared slot, to the page's (`pass_page`; shared_value reads again when the
 * daemon commits during its kernel read). Relaxed: a hint to go on; every
 * pass loads the words again with acquire. */
static int records_moved(struct th_proc *p, uint64_t pass_cur, uint64_t pass_page)
{
	if (TH_CUR_ID(atomic_load_explicit(&p->tl.cur, memory_order_relaxed)) != TH_CUR_ID(pass_cur))
		return 1;
	return TH_CUR_SLOT(pass_cur) == TH_SLOT_SHARED &&
	       TH_CUR_ID(atomic_load_explicit(&th__page_tl()->cur, memory_order_relaxed)) != TH_CUR_ID(pass_page);
}

int th__fine_slow(int line, int sel, int ordered, uint64_t *ns, uint16_t *epoch)
{
	struct th_proc *p = &th__P;
	*epoch = 0;
	/* Another thread may be attaching: the records it has published so
	 * far are used like any others (its windup holds the lock); with none
	 * yet, the kernel's clock is what every reader got so far. The
	 * configuration (passthrough) is read only once attached: the acquire
	 * load in th__ready pairs with the release that ends the attach. */
	int ready = th__ready();
	if (!ready) {
		th__attach();
		ready = th__ready();
	}
	struct th_snap s = {0};
	int have = 0;
	/* Four passes, then more only while records keep changing (each pass
	 * past the fourth needs a commit since the previous one began: a
	 * stalled writer cannot keep a reader here). Serving phi of a snapshot
	 * that a commit has superseded could undercut the new line, which may
	 * lag the kernel (tests/model/timehands.pml: FIX_PASS_RETRY). Announcements
	 * change only the announce bits, not TH_CUR_ID. */
	uint64_t pass_cur = 0, pass_page = 0;
	for (int pass = 0; pass < 4 || records_moved(p, pass_cur, pass_page); pass++) {
		unsigned retries = 0;
		uint64_t lc = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
		pass_cur = lc;
		if (TH_CUR_SLOT(lc) == TH_SLOT_SHARED) {
			have = 0; /* a local snapshot of an earlier pass is superseded */
			pass_page = atomic_load_explicit(&th__page_tl()->cur, memory_order_relaxed);
			if (shared_value(p, lc, line, sel, ordered, ns, epoch, 0))
				return 0;
			continue;
		}
		int ok = th_snapshot_progress(&p->tl, &s, &retries) == 0;
		if (retries)
			th__account_retries(retries);
		/* The word moved on since `lc` (to the shared slot, which has no
		 * local record): read again, from the page. Values of the lines
		 * were served, so the kernel's clock is not exact here: between
		 * a REALTIME step and the daemon's next tick it would serve the
		 * new offset while the page still serves the old one. */
		if (!ok && TH_CUR_ID(atomic_load_explicit(&p->tl.cur, memory_order_acquire)) != TH_CUR_ID(lc))
			continue;
		/* No record (nothing committed yet, or pass-through): nothing
		 * was served from a line, the kernel's clock is exact. */
		if (ready && p->passthrough)
			return kernel_exact(line, sel, ns);
		if (!ok) {
			if (kernel_first(p, line, sel, ns))
				return 0;
			continue;
		}
		have = 1;
		*epoch = s.epoch;
		uint64_t v;
		if (s.kind == TH_REC_LINE) {
			uint64_t c = ordered ? th_hw_ctr_ordered() : th_hw_ctr_relaxed();
			int64_t d = (int64_t)(c - s.anchor);
			/* the kernel's line is served only while its update is
			 * the kernel's latest (record.h, kseq) */
			if (d >= s.dmin && d <= s.dhi && !th__kseq_moved(s.kseq)) {
				if (d >= s.ddue)
					th__windup_try(); /* due; the record stays valid meanwhile */
				if (d < s.dlo)
					d = s.dlo; /* counter a little below the base: clamp */
				*ns = th_line_eval(&s, line, d) + (uint64_t)snap_offset(&s, sel);
				return 0;
			}
			/* expired, or the counter went backwards */
			if (th__windup_try())
				continue;
			if (s.kseq && th__kseq_moved(s.kseq) && kv_wait(p, s.cur))
				continue;
		}
		if (kernel_value(p, &s, line, sel, &v)) {
			*ns = v;
			return 0;
		}
	}
	/* Four passes failed and no commit since the last one began. When
	 * every pass read the page: phi of the page's current record, with the
	 * floors, taken as it is (no windup, no second look at the page's
	 * word); the kernel's own clock if the process left the page
	 * meanwhile. */
	if (!have) { /* the last pass read the page */
		uint64_t lc = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
		if (TH_CUR_SLOT(lc) == TH_SLOT_SHARED && shared_value(p, lc, line, sel, ordered, ns, epoch, 1))
			return 0;
		*epoch = 0;
		return kernel_exact(line, sel, ns);
	}
	/* Else phi of the last local record, the current one (never below
	 * anything returned before it); the kernel's own clock after the
	 * kernel's line. */
	if (exact_offsets(&s, line, sel) || s.kseq)
		return kernel_exact(line, sel, ns);
	uint64_t k = (uint64_t)kread_ns(line_clock(line));
	*ns = th_phi(k, th_snap_ceiling(&s, line), s.bound[line]) + (uint64_t)snap_offset(&s, sel);
	return 0;
}

static uint64_t fine_ns(int ck)
{
	struct timespec ts;
	uint16_t ep;
	th__fine_ts(ck, 1, &ts, &ep);
	return (uint64_t)ts_ns(&ts);
}

/* Release: the reading `v` came from (the load of cur that chose the local
 * records or the page) comes before the raise; pairs with the acquire load
 * of th__coarse_slow. */
static void raise_coarse_floor(struct th_proc *p, uint64_t v)
{
	uint64_t f = atomic_load_explicit(&p->coarse_floor, memory_order_relaxed);
	while (f < v && !atomic_compare_exchange_weak_explicit(&p->coarse_floor, &f, v, memory_order_release,
							       memory_order_relaxed))
		;
}

/*
 * A coarse reader found a page record whose coarse values are above the
 * floors of the switch that `lc` names; so are every later record's (the
 * daemon's coarse values never decrease within an epoch, and the REALTIME
 * floor holds only in the epoch of the switch): coarse fast reads may skip
 * the floors. Under the windup lock, so that no switch (which sets the floors
 * and sh_fresh_fast = 0) can come between the check that `lc` is still
 * current and the store; a reader that does not get the lock leaves it to a
 * later one. Release: pairs with the fast path's acquire load, which then
 * reads this record or a later one.
 */
static void coarse_floors_passed(struct th_proc *p, uint64_t lc)
{
	uint32_t z = 0;
	if (!atomic_compare_exchange_strong_explicit(&p->lock, &z, 1, memory_order_acquire, memory_order_relaxed))
		return;
	if (TH_CUR_ID(atomic_load_explicit(&p->tl.cur, memory_order_acquire)) == TH_CUR_ID(lc))
		atomic_store_explicit(&p->sh_fresh_fast, atomic_load_explicit(&p->sh_fresh_ns, memory_order_relaxed),
				      memory_order_release);
	/* Release: as in th__windup_try. */
	atomic_store_explicit(&p->lock, 0, memory_order_release);
}

/* Returns 1 when *ns is the kernel's own REALTIME, read now (a record whose
 * offsets may not be served): no G3 floor applies to it (th__coarse_real_slow),
 * the kernel's REALTIME going back only where the kernel stepped it, which
 * the floor's epoch may not show yet. 0 otherwise. */
int th__coarse_slow(int sel, uint64_t *ns, uint16_t *epoch)
{
	struct th_proc *p = &th__P;
	int exact = 0;
	*epoch = 0;
	if (!th__ready())
		th__attach(); /* as in th__fine_slow */
	/* Relaxed loads of the fields first_attach sets (it stores them so):
	 * while another thread is attaching they may still read 0, which
	 * reads the kernel's clock below with every floor applied. */
	const int have_kcoarse = __atomic_load_n(&p->have_kcoarse, __ATOMIC_RELAXED);
	const uint64_t tick_ns = __atomic_load_n(&p->tick_ns, __ATOMIC_RELAXED);
	if (__atomic_load_n(&p->passthrough, __ATOMIC_RELAXED)) {
		*ns = (uint64_t)kread_ns(sel == TH_SEL_REAL ? CLOCK_REALTIME_COARSE : CLOCK_MONOTONIC_COARSE);
		return 0;
	}
	for (int pass = 0; pass < 3; pass++) {
		struct th_snap s = {0};
		unsigned retries = 0;
		uint64_t kc = have_kcoarse ? (uint64_t)kread_ns(CLOCK_MONOTONIC_COARSE) : 0;
		/* Acquire, before the load of cur: pairs with the release of
		 * raise_coarse_floor, so that a floor raised from a reading of
		 * the page comes with a cur that names the page (a floor from
		 * the page plus a local record's offset could be above the
		 * page's coarse REALTIME after it). */
		uint64_t cf = atomic_load_explicit(&p->coarse_floor, memory_order_acquire);
		uint64_t lc = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
		if (TH_CUR_SLOT(lc) == TH_SLOT_SHARED) {
			/* The page's coarse value while the daemon ticks; else
			 * check on it (leave_shared) or, while another thread
			 * does, a fine reading. */
			int got = th_snapshot_progress(th__page_tl(), &s, &retries) == 0;
			if (!page_still_read(p, lc))
				continue; /* read again */
			if (got && s.kind == TH_REC_LINE && have_kcoarse &&
			    kc - s.tick < atomic_load_explicit(&p->sh_fresh_ns, memory_order_relaxed)) {
				*epoch = page_epoch(p, s.epoch);
				uint64_t v = s.coarse > cf ? s.coarse : cf;
				v = above_floor(p, v, TH_CK_MONO, page_epoch(p, s.epoch));
				uint64_t vr = above_floor(p, v + (uint64_t)s.off_real, TH_CK_REAL, page_epoch(p, s.epoch));
				if (atomic_load_explicit(&p->sh_fresh_fast, memory_order_relaxed) == 0 && s.coarse > cf &&
				    s.coarse > floor_ns(p, TH_CK_MONO) &&
				    (page_epoch(p, s.epoch) != atomic_load_explicit(&p->sh_epoch, memory_order_relaxed) ||
				     s.coarse + (uint64_t)s.off_real > floor_ns(p, TH_CK_REAL)))
					coarse_floors_passed(p, lc);
				*ns = sel == TH_SEL_REAL ? vr : v;
				return 0;
			}
			if (th__windup_try())
				continue;
			break;
		}
		if (th_snapshot_progress(&p->tl, &s, &retries) != 0)
			break;
		*epoch = s.epoch;
		if (s.kind != TH_REC_LINE) {
			if (s.flags & TH_RECF_COARSE_FINE)
				break; /* a fine reading, below (leave_shared) */
			if ((s.flags & TH_RECF_KERNEL_OFFSETS) && sel == TH_SEL_REAL) {
				exact = 1; /* the kernel's REALTIME, below */
				break;
			}
			/* Kernel mode: phi of the kernel's coarse clock, never below
			 * an earlier coarse value. */
			uint64_t k = have_kcoarse ? kc : (uint64_t)kread_ns(CLOCK_MONOTONIC);
			uint64_t v = th_phi(k, s.ceil[TH_MONO], s.bound[TH_MONO]);
			/* A switch in progress must not start its line below
			 * this value (as kernel_value for fine reads): kc was
			 * read before the snapshot, the guard maybe before kc. */
			if (s.kind == TH_REC_TRANSIT && v > s.guard[TH_MONO] && !th_announce(&p->tl, s.cur))
				continue;
			if (v < s.coarse)
				v = s.coarse;
			if (v < cf)
				v = cf;
			if (k >= s.due_ns)
				th__windup_try();
			*ns = v + (uint64_t)snap_offset(&s, sel);
			return 0;
		}
		if (have_kcoarse && kc - s.tick < tick_ns / 2) {
			uint64_t v = s.coarse > cf ? s.coarse : cf;
			*ns = v + (uint64_t)snap_offset(&s, sel);
			return 0;
		}
		if (have_kcoarse && th__windup_try())
			continue;
		/* Stale and the writer is busy (or no kernel coarse clock): a
		 * fine reading, below. Not a fine MONOTONIC reading plus this
		 * record's offset: the fine reading may come from the page,
		 * whose offsets may differ from this record's by a few
		 * nanoseconds (page_offsets_agree), and the sum could then be
		 * above the page's coarse REALTIME that follows it. */
		break;
	}
	/* A fine reading is a valid coarse one; remember it so that coarse
	 * stays monotonic when an older coarse value is published later. The
	 * floor is in MONOTONIC: for REALTIME, take it after the returned
	 * reading, so that floor + offset is not below it. */
	uint64_t r = exact ? (uint64_t)kread_ns(CLOCK_REALTIME) : sel == TH_SEL_REAL ? fine_ns(TH_CK_REAL) : 0;
	uint64_t m = fine_ns(TH_CK_MONO);
	if (have_kcoarse)
		raise_coarse_floor(p, m);
	*ns = sel == TH_SEL_REAL ? r : m;
	return exact;
}

static void ns_to_ts(int64_t ns, struct timespec *ts)
{
	int64_t sec = ns / NS_PER_S, rem = ns % NS_PER_S;
	if (rem < 0) {
		rem += NS_PER_S;
		sec--;
	}
	ts->tv_sec = (time_t)sec;
	ts->tv_nsec = (long)rem;
}

struct th_tv th__fine_slow_v(int ck, int ordered)
{
	uint64_t ns;
	uint16_t ep;
	struct timespec ts;
	th__fine_slow(th__ck_line(ck), th__ck_sel(ck), ordered, &ns, &ep);
	ns_to_ts((int64_t)ns, &ts);
	if (ck == TH_CK_REAL)
		th__g3_raise(ts.tv_sec, ep);
	return (struct th_tv){ts.tv_sec, ts.tv_nsec};
}

/* The fine read from the daemon's page, one copy per clock. */
struct th_tv th__fine_shared_v(int ck, int ordered, uint64_t lc, uint64_t c, int early)
{
	switch (ck) {
	case TH_CK_REAL: return th__read_page_v(TH_CK_REAL, ordered, lc, c, early);
	case TH_CK_BOOT: return th__read_page_v(TH_CK_BOOT, ordered, lc, c, early);
	case TH_CK_TAI: return th__read_page_v(TH_CK_TAI, ordered, lc, c, early);
	case TH_CK_RAW: return th__read_page_v(TH_CK_RAW, ordered, lc, c, early);
	default: return th__read_page_v(TH_CK_MONO, ordered, lc, c, early);
	}
}

/* th__coarse_ts where the kernel's coarse clock is read through the vDSO:
 * no direct read (kdata.h), or the kernel was updating its page. */
int th__coarse_ts_k(int ci, struct timespec *ts, uint64_t cur)
{
	if (!th_hw_have_kcoarse())
		return ci ? th__coarse_real_slow(ts) : th__coarse_ts_slow(0, ts, NULL);
	struct timespec kts;
	th_hw_kread(CLOCK_MONOTONIC_COARSE, &kts);
	return th__coarse_ts_at(ci, ts, cur, (uint64_t)ts_ns(&kts));
}

/* th__coarse_kv's slow path: the kernel's coarse clocks from one consistent
 * copy of its data, after a windup follows a step no record has followed yet
 * (this thread's, or, while another thread holds the windup lock, that
 * thread's: a bounded wait, kv_wait); never below the coarse floor, REALTIME
 * never below the G3 floor of the epoch in force. When no copy agrees (the
 * kernel mid-update every time, the records leaving the kernel's line, a
 * windup that does not come): a fine reading of the same clock, which no
 * coarse reading served before exceeds and no later fine one undercuts
 * (G2-G4; the kernel's coarse clock alone would ignore both floors), though
 * a later coarse reading, the kernel's, may (hence the wait). */
int th__coarse_kv_slow(int ci, struct timespec *ts)
{
#ifndef TH_SIM
	struct th_proc *p = &th__P;
	for (int pass = 0; pass < 3; pass++) {
		struct th_kconv k;
		uint64_t cur = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
		if (th_kdata_conv(&k) != 0) {
			if (!th__windup_try())
				kv_wait(p, cur);
			continue;
		}
		uint64_t m = k.sec[TH_KC_MONO_COARSE] * NS_PER_S + k.nsec[TH_KC_MONO_COARSE];
		int64_t off = (int64_t)(k.sec[TH_KC_REAL_COARSE] * NS_PER_S + k.nsec[TH_KC_REAL_COARSE] - m);
		if (off != atomic_load_explicit(&p->kv_off_real, memory_order_relaxed)) {
			if (!th__windup_try())
				kv_wait(p, cur);
			continue;
		}
		uint64_t f = atomic_load_explicit(&p->coarse_floor, memory_order_relaxed);
		if (m < f)
			m = f;
		if (!ci) {
			ns_to_ts((int64_t)m, ts);
			return 0;
		}
		ns_to_ts((int64_t)(m + (uint64_t)off), ts);
		uint64_t w = atomic_load_explicit(&p->g3, memory_order_relaxed);
		if ((int64_t)(w & TH_G3_SECMASK) > (int64_t)ts->tv_sec) {
			ts->tv_sec = (time_t)(w & TH_G3_SECMASK);
			ts->tv_nsec = 0;
		}
		return 0;
	}
#endif
	return th__fine(ci ? TH_CK_REAL : TH_CK_MONO, 1, ts);
}

int th__coarse_real_slow(struct timespec *ts)
{
	uint16_t ep;
	uint64_t ns;
	int exact = th__coarse_slow(TH_SEL_REAL, &ns, &ep);
	ns_to_ts((int64_t)ns, ts);
	uint64_t w = atomic_load_explicit(&th__P.g3, memory_order_relaxed);
	if (!exact && (uint16_t)(w >> 48) == ep && (int64_t)(w & TH_G3_SECMASK) > (int64_t)ts->tv_sec) {
		ts->tv_sec = (time_t)(w & TH_G3_SECMASK);
		ts->tv_nsec = 0;
	}
	return 0;
}

int th__coarse_ts_slow(int ci, struct timespec *ts, uint16_t *epoch)
{
	uint64_t ns;
	uint16_t ep;
	th__coarse_slow(ci ? TH_SEL_REAL : TH_SEL_NONE, &ns, epoch ? epoch : &ep);
	ns_to_ts((int64_t)ns, ts);
	return 0;
}
