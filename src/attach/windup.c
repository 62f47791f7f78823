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

#include "local.h"
#include "timehands.h"

void th__take_sample(struct th_proc *p, struct th_sample *s, int ctr, int full)
{
	th_take_sample(&th__W.sp, s, ctr, full);
	if (full && !th__W.disc.have_offsets) {
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

void th__quick_sample(struct th_sample *s)
{
	th_quick_sample(&th__W.sp, s);
}

/* ------------------------------------------------------------------ windup */

static void set_reason(const char *msg, uint64_t n)
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
	for (const char *m = msg; *m && j + 1 < sizeof th__W.reason; m++) {
		if (*m == '%') {
			for (const char *q = num; *q && j + 1 < sizeof th__W.reason; q++)
				th__W.reason[j++] = *q;
		} else {
			th__W.reason[j++] = *m;
		}
	}
	th__W.reason[j] = 0;
}

static void note_jump(struct th_proc *p, uint64_t now)
{
	if (!th_distrust_note(&th__W.dt, now))
		return;
	atomic_fetch_add_explicit(&p->fallbacks, 1, memory_order_relaxed);
	set_reason("the counter diverged from the kernel 3 times within 60 s: kernel clocks for % s",
		   th__W.dt.ns / NS_PER_S);
}

void th__publish_kernel(const struct th_snap *prev, const struct th_sample *s,
			uint64_t due_in)
{
	struct th_snap v;
	th_writer_kernel(&th__W.wr, prev, s, due_in, 0, &v);
}

/* A fresh line after `prev` (writer.c). */
int th__install_line(const struct th_snap *prev, int have_prev)
{
	return th_writer_install(&th__W.wr, have_prev ? prev : NULL);
}

/* Test seams: called by a windup while it holds the lock (tests raise a signal
 * here to read the clocks from a handler that interrupted a windup), before
 * and after its check of the direct read of the kernel's page. */
void (*th__test_windup_hook)(void) TH_HIDDEN;
void (*th__test_windup_hook_after)(void) TH_HIDDEN;

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
int th__kv_windup(struct th_proc *p, const struct th_snap *prev, uint64_t x)
{
	struct th_kconv k;
	struct th_snap v;
	int rc = th_kdata_conv(&k);
	if (rc == -2 && prev && th_snap_kline(prev))
		return 1; /* the kernel mid-update: its clock serves until the next try */
	/* The counter after the copy: the pvclock line is anchored there. */
	uint64_t c = th_hw_ctr_ordered();
	int rr = rc == 0 ? th_kconv_record(&k, c, &v) : -1;
	if (rr == -2 && prev && th_snap_kline(prev))
		return 1; /* a counter behind the kernel's update: as above */
	int conv = rr == 0;
	if (!conv) {
		if (!prev || !th_snap_kline(prev))
			return 0;
		/* Leaving the kernel's line (its clock mode changed, a switch
		 * of clocksource): it was the kernel's clock, so a kernel-mode
		 * record with no ceiling follows it without a step. */
		TH_STEP("kv_leave");
		/* The discipline knows the kernel's old rate exactly; the new
		 * clock's may differ by the ppm two clocksources disagree by:
		 * a new baseline, with the uncertainty of a fresh estimate. */
		for (int l = 0; l < TH_NLINES; l++) {
			th__W.disc.line[l].unc = 20e-6;
			th__W.disc.line[l].have_last = 0;
		}
		/* The discipline's offsets are the kernel's exact ones (the
		 * last observation above): replaced by a measurement only where
		 * they moved by more than its error (a process that entered
		 * another time namespace: its page 0 is the namespace's now),
		 * else REALTIME would move by that error. */
		struct th_sample smp;
		th__take_sample(p, &smp, 0, 1);
		const int64_t slack = 2000;
		if (llabs(smp.off_real - th__W.disc.off_real) > smp.off_real_hw + slack ||
		    llabs(smp.off_boot - th__W.disc.off_boot) > smp.off_boot_hw + slack) {
			int fl = th_disc_observe(&th__W.disc, &smp, NULL);
			if (fl & TH_OBS_STEP)
				atomic_store_explicit(&p->g3, (uint64_t)th__W.disc.epoch << 48 | TH_G3_NONE, memory_order_relaxed);
		}
		th__publish_kernel(NULL, &smp, p->tick_ns);
		atomic_store_explicit(&p->kv_on, 0, memory_order_relaxed);
		return 1;
	}
	const int below_update = th_kconv_cycles(&k, c) < k.cycle_last;
	if (prev && !th_snap_kline(prev) && prev->kind == TH_REC_LINE) {
		/* The discipline's line may be served up to its expiry (by a
		 * reader that copied it and reads the counter late): left to
		 * run out, never due before, it is followed where the kernel
		 * has reached its ceiling, a line's error from it at most. */
		int64_t d = (int64_t)(c - prev->anchor);
		if (d >= prev->dmin && d <= prev->dhi)
			return 2;
	}
	if (prev && !th_snap_kline(prev)) {
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
				th__take_sample(p, &smp, 0, 1);
				th__publish_kernel(prev, &smp, p->tick_ns);
			}
			return 1;
		}
		/* Coarse values served so far stay below what follows: up to
		 * the ceiling from a line, and a kernel-mode record's coarse
		 * value (a fine reading at its windup, up to a tick above the
		 * kernel's coarse clock that serves next). */
		uint64_t served = th_snap_ceiling(prev, TH_MONO);
		th__raise_coarse_floor(p, prev->coarse > served ? prev->coarse : served);
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
	smp.c = smp.c_raw = smp.c_off = c;
	smp.mono = (int64_t)th_kconv_ns(&k, TH_KC_MONO, c);
	smp.raw = (int64_t)th_kconv_ns(&k, TH_KC_RAW, c);
	smp.off_real = v.off_real;
	smp.off_boot = v.off_boot;
	smp.tai_sec = (v.off_tai - v.off_real) / NS_PER_S;
	smp.tai_ok = 1;
	smp.tick = v.tick;
	int fl = th_disc_observe(&th__W.disc, &smp, prev);
	if (!prev || (fl & TH_OBS_STEP))
		atomic_store_explicit(&p->g3, (uint64_t)th__W.disc.epoch << 48 | TH_G3_NONE, memory_order_relaxed);
	v.epoch = th__W.disc.epoch;
	atomic_store_explicit(&p->kv_off_real, v.off_real, memory_order_relaxed);
	/* Before Linux 6.15 the kernel's coarse clocks are its fine base at
	 * cycle_last, which an adjtimex rate change moves back by the cycles
	 * not yet accumulated times the change of mult (seen on Linux 6.1: up
	 * to hundreds of us under ADJ_TICK): this update's may lie below the
	 * previous one's, which coarse readers served (they serve an update
	 * only after its windup, kv_seq). The coarse floor holds them until
	 * the kernel's coarse clock is above it again. */
	if (prev && th_snap_kline(prev) && v.coarse < prev->coarse)
		th__raise_coarse_floor(p, prev->coarse);
	TH_STEP("kv_commit");
	if (v.flags & TH_RECF_KPV) {
		/* A line below the kernel: it starts at or above the kernel's
		 * reading at its anchor, so it must not follow a kernel reading
		 * taken after that. A reader that served one of those announced
		 * itself (th__kernel_value) after it read it; then the compare-and-
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
	/* Release: pairs with the coarse readers' acquire load of kv_seq; the
	 * floor raised above is visible to a reader that sees this update's
	 * count. */
	atomic_store_explicit(&p->kv_seq, k.seq, memory_order_release);
	atomic_fetch_add_explicit(&p->windups, 1, memory_order_relaxed);
	return 1;
}
#endif

#ifndef TH_SIM
/*
 * Coarse clocks where the fine readings are the kernel's own (kernel-mode
 * records that follow no line in a process that does not read the counter:
 * kernel_own, slow.c): the kernel's coarse clocks straight from its data page
 * (th__coarse_kv), as on the kernel's line, tied to the update `k` copied
 * before this windup's sample (kv_seq: a later update sends coarse readers
 * to a windup first). They never exceed a later fine reading, the kernel's
 * (G4). What this process served before (the records' coarse value, a fine
 * reading at their windup) and an update's coarse clocks below the previous
 * copied one's (before Linux 6.15, after a rate change) are held by the
 * coarse floor. `own` 0, or no such copy: coarse readers take the records'
 * path again.
 */
static void kown_coarse(struct th_proc *p, int own, int kr, const struct th_kcoarse *k, uint64_t served)
{
	if (!own || kr != 1) {
		atomic_store_explicit(&p->kv_on, 0, memory_order_relaxed);
		return;
	}
	if (!atomic_load_explicit(&p->kv_on, memory_order_relaxed))
		th__raise_coarse_floor(p, served);
	else if (k->mono < th__W.kown_coarse)
		th__raise_coarse_floor(p, th__W.kown_coarse);
	if (k->mono > th__W.kown_coarse)
		th__W.kown_coarse = k->mono;
	atomic_store_explicit(&p->kv_off_real, (int64_t)(k->real - k->mono), memory_order_relaxed);
	/* Release: pairs with the coarse readers' acquire load of kv_seq; the
	 * floor raised above (and the G3 floor of a step this windup's sample
	 * found) are visible to a reader that sees this update's count. */
	atomic_store_explicit(&p->kv_seq, k->seq, memory_order_release);
	atomic_store_explicit(&p->kv_on, 1, memory_order_relaxed);
}
#endif

/*
 * A commit of v, a continuation of the line the word `x` named, that failed
 * on announcements of readers serving that line (th__fine_slow: it is tied
 * and the kernel moved on): made again, the compare-and-swap alone
 * (th_recommit), while the counter has not reached `dend` from `anchor`.
 * Each failure needs another announcement between the load of the word and
 * the swap; a bounded number of tries (the writer never waits long for
 * readers either), then the next read winds up again. 1 once committed.
 */
static int recommit(struct th_proc *p, uint64_t x, const struct th_snap *v, uint64_t anchor, int64_t dend)
{
	for (int t = 0; t < 64; t++) {
		/* Acquire: the counter below is read after the word; a reader
		 * that announced after reading the counter past `dend` is
		 * seen by the stop. */
		uint64_t w = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
		if (TH_CUR_ID(w) != TH_CUR_ID(x) || (int64_t)(th_hw_ctr_ordered() - anchor) > dend)
			return 0;
		if (th_recommit(&p->tl, w, v) == 0)
			return 1;
	}
	return 0;
}

/*
 * A tied line (TH_RECF_TIED) the kernel has moved on from, which it was not
 * yet due to leave: the same line on, tied to the kernel's latest update
 * (count `seq`, read by the caller), with that update's REALTIME offset `off`
 * (a step: the page's, exactly, in a new epoch). Nothing is sampled: a kernel update that changed no offset (its
 * tick, a rate change, an adjtimex call that set nothing) is left to the
 * discipline's next due windup, which measures the line against the kernel
 * as ever. A reader that served the line past the update while this windup
 * went on announced itself (th__fine_slow): the commit then fails and is
 * made again, the same line. 1 when this windup is over.
 */
static int retie(struct th_proc *p, const struct th_snap *s, uint64_t x, int64_t off, uint32_t seq)
{
	/* A step is taken relative to the offsets the discipline holds (a
	 * fork child's are those of its records: th__attach). */
	if (s->kind != TH_REC_LINE || !(s->flags & TH_RECF_TIED) || (uint32_t)s->kseq == seq ||
	    th_disc_offsets_wide(&th__W.disc))
		return 0;
	for (int t = 0; t < 16; t++) {
		if (t)
			x = atomic_load_explicit(&p->tl.cur, memory_order_relaxed);
		/* after the offset's read: the step had happened by it */
		uint64_t c = th_hw_ctr_ordered();
		int64_t d = (int64_t)(c - s->anchor);
		if (d < 0 || d >= s->ddue)
			return 0;
		/* the same line again: no ordering needed for the values */
		struct th_snap v;
		th_snap_to_val(s, &v);
		if (off != s->off_real) {
			TH_STEP("step");
			if (th_disc_step_to(&th__W.disc, off, c))
				/* the seconds floor of the old epoch forgotten
				 * before the record of the new one is visible (the
				 * commit is a release) */
				atomic_store_explicit(&p->g3, (uint64_t)th__W.disc.epoch << 48 | TH_G3_NONE, memory_order_relaxed);
			v.off_real = th__W.disc.off_real;
			v.off_tai = th__W.disc.off_tai;
			v.epoch = th__W.disc.epoch;
			/* the same line from the step on only (th_snap_cut) */
			v.from = th__W.disc.epoch_from;
			/* Coarse values from the line now: readers of the
			 * moved line served the step before this commit (with
			 * G3 floors of the old epoch, forgotten above) at
			 * counters before this one, so REALTIME_COARSE of the
			 * new epoch starts at or above every second they
			 * returned (G3), and below every later fine reading
			 * (G4). */
			uint64_t lc = th_line_eval(s, TH_MONO, d < s->dlo ? s->dlo : d);
			if (lc > v.coarse)
				v.coarse = lc;
		}
		/* More than the one update since the line's tie: one of
		 * those between may have stepped REALTIME and another stepped
		 * it back, and a counter read then is not of this offset. The
		 * line from this windup's counter on only, read after the
		 * count (th_snap_cut); after the one update, the line's offset
		 * was the kernel's at every counter of its window. */
		if ((uint32_t)s->kseq + TH_KSEQ_PER_UPDATE != seq) {
			th_writer_tie_from(&th__W.disc, c, 0);
			v.from = th__W.disc.epoch_from;
		}
		TH_STEP("retie");
		if (th_commit(&p->tl, x, &v) == 0)
			return 1;
	}
	return 1; /* announced at every try: the next read winds up again */
}

static void local_windup(struct th_proc *p, int joining);

void th__local_windup(struct th_proc *p, int joining)
{
	/* local_windup ties its own commits to the count it reads; what its
	 * caller commits afterwards keeps the caller's tie */
	uint64_t outer = th_rec_tie;
	local_windup(p, joining);
	th_rec_tie = outer;
}

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
	if (p->kv_ok && th__W.counter_usable && !joining) {
		int kv = th__kv_windup(p, have ? &s : NULL, x);
		if (kv == 1)
			return;
		joining = kv == 2; /* the discipline's line runs out first */
	}
#endif
	/* The discipline's lines are tied to the kernel's update count where
	 * this process reads the kernel's data page (TH_RECF_TIED,
	 * th_rec_tie): the count read before the sample, so that an update
	 * during the windup leaves the record already moved on from (another
	 * windup, never a missed update). A read that finds the kernel
	 * updating every time ties them to the last update read, which the
	 * page's count has left or is leaving, or, before any, to an odd
	 * count, which an updated page never shows: the next reader winds up
	 * again. */
	int64_t koff;
	uint32_t kcount;
	int kpage = th_hw_kpage_real(&koff, &kcount);
	if (kpage >= 0)
		th__W.ktie = kpage ? TH_KSEQ_TIE(kcount) : 0;
	else if (!th__W.ktie)
		th__W.ktie = TH_REC_TIE_UNFINISHED;
	th_rec_tie = th__W.ktie;
	if (have && kpage > 0 && retie(p, &s, x, koff, kcount))
		return;

	uint64_t now = (uint64_t)th__W.disc.line[TH_MONO].last_k;
	int ctr = th__W.counter_usable && !th_distrust_on(&th__W.dt, now);
	if (ctr && th__W.dt.until) {
		th__W.dt.until = 0;
		th__W.reason[0] = 0;
	}
	/* after the count's read: where this windup's records begin */
	uint64_t kctr = kpage > 0 && ctr ? th_hw_ctr_ordered() : 0;

#ifndef TH_SIM
	/* the kernel's update before the sample, for kown_coarse */
	struct th_kcoarse kc;
	int kr = !p->trust.usable ? th_kdata_coarse(&kc) : 0;
#endif
	struct th_sample smp;
	th__take_sample(p, &smp, ctr, 1);
	TH_STEP("observe");
	int fl = th_disc_observe(&th__W.disc, &smp, have ? &s : NULL);
	th_writer_tie_from(&th__W.disc, kctr, fl);
	atomic_fetch_add_explicit(&p->windups, 1, memory_order_relaxed);
	if (have)
		th_disc_cover_lead(&s, &smp);
	if (fl & TH_OBS_JUMP) {
		TH_STEP("jump");
		note_jump(p, (uint64_t)smp.mono);
		if (th__W.dt.until)
			ctr = 0;
	}
	if (fl & TH_OBS_STEP) {
		/* REALTIME was stepped: forget the seconds floor of the old
		 * epoch before any record of the new epoch is visible (the
		 * commit below is a release). */
		atomic_store_explicit(&p->g3, (uint64_t)th__W.disc.epoch << 48 | TH_G3_NONE, memory_order_relaxed);
	}

	if (!ctr) {
		struct th_snap v;
		th_writer_kernel(&th__W.wr, have ? &s : NULL, &smp, p->tick_ns, 0, &v);
#ifndef TH_SIM
		kown_coarse(p, !p->trust.usable && th_snap_ceiling(&v, TH_MONO) == 0, kr, &kc, v.coarse);
#endif
		return;
	}
	if (th_disc_offsets_wide(&th__W.disc)) {
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
				struct th_snap v;
				th_plan_refresh(&th__W.disc, &s, &smp, &v);
				v.off_real = s.off_real;
				v.off_boot = s.off_boot;
				v.off_tai = s.off_tai;
				v.epoch = s.epoch;
				v.from = 0; /* its epoch's step, if any, is behind it */
				v.ddue = v.dhi;
				if (th_commit(&p->tl, x, &v) == 0)
					return;
			}
		}
		th__publish_kernel(have ? &s : NULL, &smp, p->tick_ns / 4);
		return;
	}
	if (!th_disc_ready(&th__W.disc)) {
		TH_STEP("calibrate");
		/* No frequency yet: the kernel serves until a second sample,
		 * calib_ns later, gives the rate. No blocking calibration. */
		th__publish_kernel(have ? &s : NULL, &smp, th__W.disc.cfg.calib_ns);
		return;
	}
	if (have && s.kind == TH_REC_LINE && !(fl & TH_OBS_JUMP)) {
		int64_t d = (int64_t)(smp.c - s.anchor);
		if (d >= s.dmin && d <= s.dhi) {
			struct th_snap v;
			TH_STEP("plan");
			/* A sample too wide to steer by only refreshes; so does a
			 * line that is left to run out (joining the page), whose
			 * due point stays at its expiry. */
			if (d >= 0 && !(fl & TH_OBS_BAD) && !joining) {
				th_plan_next(&th__W.disc, &s, &smp, &v);
			} else {
				th_plan_refresh(&th__W.disc, &s, &smp, &v);
				if (joining)
					v.ddue = v.dhi;
			}
			if (th_commit(&p->tl, x, &v) == 0)
				return;
			/* Announcements while the counter has not passed the
			 * line's expiry come from readers of a tied line the
			 * kernel moved on from meanwhile, which served the line
			 * (th__fine_slow): v continues it unchanged below its
			 * anchor, so it is committed again. */
			if ((s.flags & TH_RECF_TIED) && recommit(p, x, &v, s.anchor, s.dhi))
				return;
			/* An announcement: the record expired while we worked. */
		}
	}
	if (fl & TH_OBS_BAD) {
		/* No line is started from a wide sandwich; the next read
		 * after the due time tries again. */
		th__publish_kernel(have ? &s : NULL, &smp, p->tick_ns / 4);
		return;
	}
	th__install_line(&s, have);
}

/* Records written on the way to the daemon's page or away from it
 * (transitions, copies of the page's line, a line after a switch that failed,
 * the first records of an attach) carry offsets no windup read from the
 * kernel's page just before: the page's, which may be from before a step the
 * daemon has not followed, or this process's last. Where that page is read
 * they are tied to an odd count no finished update shows, so that the next
 * REALTIME or TAI reader serves the kernel's offset of now and winds up
 * (local_windup ties its own records to the count it reads). Every holder of
 * the windup lock brackets its commits with these two. */
void th__tie_begin(void)
{
	int64_t koff;
	uint32_t kcount;
	th_rec_tie = th_hw_kpage_real(&koff, &kcount) != 0 ? TH_REC_TIE_UNFINISHED : 0;
}

void th__tie_end(void)
{
	th_rec_tie = 0;
}

static void windup_locked(struct th_proc *p)
{
	uint64_t x = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
	if (TH_CUR_SLOT(x) == TH_SLOT_SHARED) {
		/* The daemon publishes; this process only checks on it when a
		 * reader found its record due, expired or stale. */
		uint64_t now = (uint64_t)kread_ns(CLOCK_MONOTONIC);
		struct th_snap ps;
		int dead;
		if (!th__page_usable(p, now, &ps, &dead))
			th__leave_shared(p, now, dead);
		return;
	}
	if (th__try_shared(p, 2))
		return;
	th__local_windup(p, 0);
}

void th__windup_locked(struct th_proc *p)
{
	if (th__test_windup_hook)
		th__test_windup_hook();
#ifndef TH_SIM
	th__kdata_recheck();
#endif
	if (th__test_windup_hook_after)
		th__test_windup_hook_after();
	th__tie_begin();
	windup_locked(p);
	th__tie_end();
}

#ifndef TH_SIM
/* Thread numbers for the windup lock: initial-exec, as cpu_self
 * (src/cputime/cputime.c), so that a signal handler may read it. A handler
 * that numbers the thread while the code it interrupted does too leaves one
 * of the two numbers, and that code's compare-and-swap uses the one it
 * returns: either way the lock's value is the thread's when it is taken. */
static _Thread_local uint32_t self_id __attribute__((tls_model("initial-exec")));
static _Atomic uint32_t next_id = 1;

uint32_t th__self_id(void)
{
	uint32_t v = self_id;
	while (v < 2)
		v = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed) + 1;
	self_id = v;
	return v;
}
#endif

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
	if (!atomic_compare_exchange_strong_explicit(&p->lock, &z, th_hw_self(), memory_order_acquire,
						     memory_order_relaxed))
		return 0;
	th__windup_locked(p);
	TH_STEP("unlock");
	atomic_store_explicit(&p->lock, 0, memory_order_release);
	return 1;
}
