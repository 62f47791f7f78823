/*
 * Shared mode: joining timehandsd's page (the switch, above every floor this
 * process has served) and leaving it (back to this process's own records,
 * never below what the page served).
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

/* ------------------------------------------------------------ shared mode */

uint64_t th__floor_ns(const struct th_proc *p, int ck)
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

void th__copy_reason(char *dst, size_t size, const char *a, const char *b)
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
 * *ps; 0 with the reason in th__W.page_reason, and *dead set when the page
 * itself is gone or untrustworthy (not merely late).
 */
int th__page_usable(struct th_proc *p, uint64_t now, struct th_snap *ps, int *dead)
{
	char why[128];
	*dead = 0;
	if (!th__W.page.hdr)
		return 0;
	if (th_page_check(&th__W.page, now, why, sizeof why) != 0) {
		th__copy_reason(th__W.page_reason, sizeof th__W.page_reason, "timehandsd page: ", why);
		*dead = 1;
		return 0;
	}
	th__W.page_dead = 0; /* live again (the daemon went on) */
	/* Acquire: pairs with the daemon's release store of the flags. */
	uint64_t flags = atomic_load_explicit(&th__W.page.hdr->flags, memory_order_acquire);
	if (!(flags & TH_PAGE_COUNTER_LINES)) {
		th__copy_reason(th__W.page_reason, sizeof th__W.page_reason,
			    "timehandsd publishes kernel records (it does not trust the counter)", "");
		return 0;
	}
	if (th_distrust_on(&th__W.dt, now)) {
		/* This process saw the counter diverge from the kernel (a
		 * counter skewed between CPUs, or one that jumps): the daemon's
		 * line, measured on its own CPU, is no better here than a local
		 * one, so the kernel serves until the distrust ends. */
		th__copy_reason(th__W.page_reason, sizeof th__W.page_reason,
			    "this process saw the counter diverge from the kernel: kernel clocks for now", "");
		return 0;
	}
	if (!page_counter_ok(p, flags)) {
		th__copy_reason(th__W.page_reason, sizeof th__W.page_reason, "the counter may not be read here: ",
			    p->trust.reason);
		return 0;
	}
	unsigned r = 0;
	if (th_snapshot(th__page_tl(), ps, &r) != 0 || ps->kind != TH_REC_LINE) {
		th__copy_reason(th__W.page_reason, sizeof th__W.page_reason, "the page's current record is not a counter line",
			    "");
		return 0;
	}
	int64_t d = (int64_t)(th_hw_ctr_ordered() - ps->anchor);
	if (d < ps->dmin || d > ps->dhi) {
		th__copy_reason(th__W.page_reason, sizeof th__W.page_reason, "the page's record expired: timehandsd is late", "");
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
	if (!th__W.page_wanted || now < th__W.page_next_try)
		return;
	/* A page that went stale stays mapped; a new one is looked for only
	 * when the program allows it (TIMEHANDS_PAGE_RECONNECT, config.h). */
	if (th__W.page.hdr && !(th__W.page_dead && p->cfg.page_reconnect))
		return;
	char why[128];
	TH_STEP("page_attach");
	/* Mapped over the area (and over a stale page) in one mmap: the area
	 * never becomes unmapped. Only this process's own slow paths read it,
	 * and only while cur names the shared slot, which it does not now. */
	struct th_page_map m;
	int rc = th_page_attach_at(p->cfg.page, timeout_ms, th__page_area.bytes, &m, why, sizeof why);
	if (rc == 0) {
		th__W.page = m;
		th__W.page_dead = 0;
		th__W.page_backoff = 0;
		th__W.page_reason[0] = 0;
		th__W.page_seen = 1;
		return;
	}
	th__copy_reason(th__W.page_reason, sizeof th__W.page_reason, "no timehandsd page: ", why);
	if (!th__W.page_seen)
		th__W.page_wanted = 0;
	th__W.page_backoff = th__W.page_backoff ? th__W.page_backoff * 2 : th__W.page_retry_ns;
	if (th__W.page_backoff > 30 * th__W.page_retry_ns)
		th__W.page_backoff = 30 * th__W.page_retry_ns;
	th__W.page_next_try = now + th__W.page_backoff;
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
	if (!th__W.page_dead && p->cfg.page_reconnect) {
		th__W.page_backoff = th__W.page_backoff ? th__W.page_backoff : th__W.page_retry_ns;
		th__W.page_next_try = now + th__W.page_backoff;
	}
	th__W.page_dead = 1;
	if (!p->cfg.page_reconnect) {
		size_t n = strlen(th__W.page_reason);
		th__copy_reason(th__W.page_reason + n, sizeof th__W.page_reason - n,
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
			ok = v >= (int64_t)th__floor_ns(p, ck) + margin;
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
 * th__install_line), then floors at the guard for every clock, then the shared
 * slot is named with a compare-and-swap that a TRANSIT reader's announcement
 * makes fail. Shared readers return max(page line, floor), so nothing this
 * process returned before the switch is ever undercut; the floors cost at
 * most the guard plus the offset difference, once.
 */
static int switch_to_shared(struct th_proc *p, const struct th_snap *ps)
{
	/* Coarse readers leave the kernel's coarse clocks (kown_coarse) for
	 * the records' path before the page serves: the switch's floors lie
	 * above the kernel's clocks, so above what they served. */
	atomic_store_explicit(&p->kv_on, 0, memory_order_relaxed);
	struct th_snap base;
	unsigned r = 0;
	int have = th_snapshot(&p->tl, &base, &r) == 0;
	struct th_sample g;
	/* The guard, widened after an attempt the kernel outran (as in
	 * th_writer_install). */
	uint64_t gns = th__W.disc.cfg.guard_ns;
	for (int attempt = 0; attempt < 3; attempt++) {
		th__quick_sample(&g);
		struct th_snap t;
		th_plan_kernel(&th__W.disc, have ? &base : NULL, &g, p->tick_ns, gns, &t);
		TH_STEP("transit");
		uint64_t tw = th_commit_force(&p->tl, &t);
		th__W.wr.kernel_records++;
		th_val_to_snap(&t, tw, &base);
		have = 1;
		int64_t am = kread_ns(CLOCK_MONOTONIC), ar = kread_ns(CLOCK_MONOTONIC_RAW);
		if ((uint64_t)am > t.guard[TH_MONO] || (uint64_t)ar > t.guard[TH_RAW]) {
			gns = th_guard_widen(&th__W.disc, gns);
			continue; /* stalled since the guard was read */
		}
		uint64_t x = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
		int64_t gm = (int64_t)t.guard[TH_MONO];
		set_floor(p, TH_CK_MONO, gm);
		set_floor(p, TH_CK_REAL, gm + th__W.disc.off_real);
		set_floor(p, TH_CK_BOOT, gm + th__W.disc.off_boot);
		set_floor(p, TH_CK_TAI, gm + th__W.disc.off_tai);
		set_floor(p, TH_CK_RAW, (int64_t)t.guard[TH_RAW]);
		/* The page's epochs continue this process's numbering: its
		 * epoch now is ours now (same REALTIME offset, as far as either
		 * knows). Relaxed: published by the release CAS below. */
		atomic_store_explicit(&p->sh_delta, (uint16_t)(th__W.disc.epoch - ps->epoch), memory_order_relaxed);
		atomic_store_explicit(&p->sh_epoch, th__W.disc.epoch, memory_order_relaxed);
		uint64_t pt = th__W.page.tick_ns > p->tick_ns ? th__W.page.tick_ns : p->tick_ns;
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
		uint64_t nw = TH_CUR_MAKE(th_abi_seq_next(TH_CUR_SEQ(x)), TH_SLOT_SHARED, x);
		if (atomic_compare_exchange_strong_explicit(&p->tl.cur, &x, nw, memory_order_release,
							    memory_order_relaxed)) {
			/* The coarse floor at the guard only now: raised before
			 * the switch, a coarse read of the TRANSIT record would
			 * return the guard, above a fine read of the same record
			 * (phi of the kernel, up to the guard) that follows it
			 * (G4). Coarse reads of the page are held to the floors
			 * of the switch meanwhile (th__above_floor; the fast path
			 * waits for sh_fresh_fast); this floor is for the local
			 * records after a later leave. */
			uint64_t cf = atomic_load_explicit(&p->coarse_floor, memory_order_relaxed);
			while (cf < (uint64_t)gm &&
			       !atomic_compare_exchange_weak_explicit(&p->coarse_floor, &cf, (uint64_t)gm,
								      memory_order_relaxed, memory_order_relaxed))
				;
			th__W.page_reason[0] = 0;
			return 0;
		}
	}
	/* Could not switch: back to a local line (or kernel records). */
	th__copy_reason(th__W.page_reason, sizeof th__W.page_reason,
		    "joining timehandsd's page was interrupted (this thread was preempted while switching): "
		    "tried again at the next windup", "");
	if (th_disc_ready(&th__W.disc) && th__W.counter_usable)
		th__install_line(&base, 1);
	else
		th__publish_kernel(&base, &g, p->tick_ns);
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
int th__page_offsets_agree(const struct th_snap *ps)
{
	const struct th_disc *d = &th__W.disc;
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
		uint64_t c = have ? th_snap_ceiling(ps, l) : 0, f = th__floor_ns(p, lines[l]);
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
			struct th_line_disc *L = &th__W.disc.line[l];
			if (ps->hi[l] > 0) {
				L->rate = (double)ps->hi[l] / 4294967296.0;
				L->unc = 20e-6;
				L->have = 1;
				L->have_last = 0;
			}
		}
	}
	th_disc_hold_offsets(&th__W.disc, ps);
	th__W.disc.epoch = (uint16_t)(ps->epoch + atomic_load_explicit(&p->sh_delta, memory_order_relaxed));
}

/* The page's line `ps`, valid at the counter now, as a local record due now
 * (so that the next windup goes on from it like from any local line).
 * 0 if it is not a line or not valid now. */
static int leave_line(const struct th_snap *ps, struct th_snap *v)
{
	if (ps->kind != TH_REC_LINE || !th_disc_ready(&th__W.disc) || !th__W.counter_usable)
		return 0;
	int64_t d = (int64_t)(th_hw_ctr_ordered() - ps->anchor);
	if (d < ps->dmin || d > ps->dhi)
		return 0;
	th_snap_to_val(ps, v);
	v->epoch = th__W.disc.epoch;
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
static void leave_cover(struct th_proc *p, const struct th_snap *k1)
{
	struct th_snap ps, base;
	unsigned r = 0;
	if (th_snapshot_progress(th__page_tl(), &ps, &r) != 0 || ps.kind == TH_REC_EMPTY)
		return;
	struct th_sample g;
	th__quick_sample(&g);
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
	struct th_snap v;
	TH_STEP("unshare-cover");
	th_writer_kernel(&th__W.wr, &base, &g, k1->due_ns > (uint64_t)g.mono ? k1->due_ns - (uint64_t)g.mono : 0, 0, &v);
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
 *    a page kernel record served; a local line follows (th__install_line).
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
 * their re-check (see th__leave_shared). */
static int page_moved_since_commit(const struct th_timeline *pt, const struct th_snap *ps)
{
	atomic_thread_fence(memory_order_seq_cst);
	TH_STEP("unshare-look");
	return page_moved(pt, ps);
}

void th__leave_shared(struct th_proc *p, uint64_t now, int dead)
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
		struct th_snap v;
		if (have && leave_line(&ps, &v)) {
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
		th__quick_sample(&g);
		uint64_t due = th_disc_ready(&th__W.disc) && th__W.counter_usable ? 0
			       : th__W.disc.line[TH_MONO].have		       ? p->tick_ns
									       : th__W.disc.cfg.calib_ns;
		th_plan_kernel(&th__W.disc, &base, &g, due, 0, &v);
		/* Its coarse value is the snapshot's, and the page may have
		 * moved on before the commit (a leaver stalled here): coarse
		 * readers of this record take a fine reading instead, which is
		 * at least the kernel now (th__coarse_slow). */
		v.flags |= TH_RECF_COARSE_FINE;
		if (have && !last && page_moved(pt, &ps))
			continue;
		TH_STEP("unshare-kernel");
		th_writer_commit_kernel(&th__W.wr, &g, &v);
		kernel = 1;
		if (have && page_moved_since_commit(pt, &ps))
			leave_cover(p, &v);
		break;
	}
	/* A local line now, as after any kernel-mode record. */
	unsigned r = 0;
	if (kernel && th_disc_ready(&th__W.disc) && th__W.counter_usable && th_snapshot(&p->tl, &base, &r) == 0)
		th__install_line(&base, 1);
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
int th__try_shared(struct th_proc *p, int timeout_ms)
{
	if (p->passthrough || !th__W.page_wanted)
		return 0;
	if (p->kv_ok && atomic_load_explicit(&p->kv_on, memory_order_relaxed)) {
		/* the kernel's own line is exact and costs no windup that a
		 * page would save */
		th__copy_reason(th__W.page_reason, sizeof th__W.page_reason,
			    "not using timehandsd's page: the records are the kernel's own conversion of the counter", "");
		return 0;
	}
	uint64_t now = (uint64_t)kread_ns(CLOCK_MONOTONIC);
	page_attach(p, now, timeout_ms);
	struct th_snap ps;
	int dead;
	if (!th__page_usable(p, now, &ps, &dead)) {
		if (dead)
			page_drop(p, now);
		return 0;
	}
	if (th_disc_offsets_wide(&th__W.disc)) {
		/* The floors of a switch are this process's offsets plus the
		 * guard: not from offsets that may be off by their bracket. */
		th__copy_reason(th__W.page_reason, sizeof th__W.page_reason,
			    "this process has not yet measured the kernel's REALTIME and BOOTTIME offsets closely", "");
		return 0;
	}
	if (!th__page_offsets_agree(&ps)) {
		th__copy_reason(th__W.page_reason, sizeof th__W.page_reason,
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
			th__copy_reason(th__W.page_reason, sizeof th__W.page_reason,
				    "joining timehandsd's page: the local line serves until it runs out", "");
			th__local_windup(p, 1);
			return 1;
		}
	}
	switch_to_shared(p, &ps);
	return 1;
}
