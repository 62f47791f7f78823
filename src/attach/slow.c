/*
 * The slow paths: the reads the fast paths of proc.h and the header hand
 * over (a record due, expired, being replaced, or none), fine and coarse.
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

/* ------------------------------------------------------------ slow paths */

/*
 * The kernel's clock for a reading made while no record exists yet (another
 * thread is attaching): 1 with *ns, or 0 when the caller must read again
 * (the first record is there now). A REALTIME or BOOTTIME reading raises the
 * bound its offset sets (th_proc.koff_lb), then looks whether the writer has
 * begun measuring the offsets: if so, the writer may have missed the bound,
 * and the reading is not served; the first record is waited for (bounded) and
 * read instead.
 */
static int kernel_first(struct th_proc *p, int ck, uint64_t *ns)
{
	int i = ck == TH_CK_REAL ? 0 : ck == TH_CK_BOOT ? 1 : -1;
	if (i < 0)
		return kernel_exact(ck, ns) == 0;
	uint64_t r = (uint64_t)kread_ns(exact_clock(ck));
	int64_t m = kread_ns(CLOCK_MONOTONIC);
	/* Seq_cst raise and fence: the load of koff_begun comes after the
	 * raise; pairs with th__take_sample's store, fence and loads. */
	raise_i64(&p->koff_lb[i], (int64_t)(r - (uint64_t)m));
	atomic_thread_fence(memory_order_seq_cst);
	TH_STEP("first_look");
	if (!atomic_load_explicit(&p->koff_begun, memory_order_relaxed)) {
		*ns = r;
		return 1;
	}
	for (int k = 0; k < 4096 && !th__lock_mine(p); k++) {
		TH_STEP("first_wait");
		if (TH_CUR_SEQ(atomic_load_explicit(&p->tl.cur, memory_order_acquire)) != 0)
			return 0;
		th_hw_pause();
	}
	*ns = r; /* the writer stalled in its first windup: the kernel's clock */
	return 1;
}
int th__g3_raise_slow(uint64_t sec, uint16_t epoch)
{
	uint64_t w = atomic_load_explicit(&th__P.g3, memory_order_relaxed);
	uint64_t want = ((uint64_t)epoch << 48) | sec;
	/* Relaxed is enough: G3 is about reads ordered by happens-before, and
	 * coherence orders the accesses to this one word. (epoch, second)
	 * only ever increases (see th__g3_raise). */
	while (w < want)
		if (atomic_compare_exchange_weak_explicit(&th__P.g3, &w, want, memory_order_relaxed,
							  memory_order_relaxed))
			return 0;
	return 0;
}

/* A record whose offsets may not be served: the kernel's own clock for
 * REALTIME, BOOTTIME and TAI (TH_RECF_KERNEL_OFFSETS). */
static int exact_offsets(const struct th_snap *s, int ck)
{
	return (s->flags & TH_RECF_KERNEL_OFFSETS) && th__ck_line(ck) == TH_MONO && th__ck_sel(ck) != TH_SEL_NONE;
}

/* Readings of record s that are the kernel's own clock ck: a kernel's line
 * the kernel moved on from (its readings were the kernel's), a record whose
 * offsets may not be served, and, in a process that does not use the
 * counter itself (TIMEHANDS_COUNTER=off, a counter the policy refused), a
 * kernel-mode record that follows no line (ceiling 0: everything served was
 * the kernel's own), whose offsets would lag a kernel step until the next
 * windup. Such a process only ever leaves kernel mode for the daemon's page,
 * whose floors are taken above the kernel's clocks at the switch. */
static int kernel_own(const struct th_proc *p, const struct th_snap *s, int ck)
{
	return exact_offsets(s, ck) || th_snap_kline(s) ||
	       (s->kind == TH_REC_KERNEL && !p->trust.usable && th_snap_ceiling(s, th__ck_line(ck)) == 0);
}

/*
 * A fine REALTIME reading with an offset no record has followed yet (a step)
 * raises no G3 floor (its epoch is not known yet); the record that follows
 * the step carries the step's offset with coarse values that may lie below
 * the reading's (the daemon's tick, or a retie's counter after it). The
 * coarse floor, MONOTONIC `m` of the reading, holds every later coarse
 * REALTIME of that offset at or above it (G3), and stays below every later
 * fine reading (G2, so G4 holds).
 */
static void stepped_floor(struct th_proc *p, uint64_t m)
{
	th__raise_coarse_floor(p, m);
}

/*
 * Counter delta `d` of a slow-path reading of line record s, its window's
 * start where d lies below the window by less than TH_TOL_NS on the line.
 * An ordered counter read after s was found is read after the kernel's
 * update s is tied to (s's offset is the kernel's there while that update
 * is the latest), so below a window its writer cut at the writer's own
 * counter (th_snap_cut) it is another CPU's counter lagging the writer's,
 * served as a counter a little below a record's base is: the kernel's
 * clock (phi) it would go to may lie above the line's later readings.
 */
static int64_t lagging_ctr(const struct th_snap *s, int64_t d, int ordered)
{
	int64_t r = s->hi[TH_MONO];
	if (!ordered || d >= s->dmin || !(s->flags & TH_RECF_TIED) || th_snap_kline(s) || r <= 0)
		return d;
	return (__int128)(s->dmin - d) * r <= (__int128)TH_TOL_NS << 32 ? s->dmin : d;
}

/* The kernel's count `seq` as a tie of every clock, for tied_still. */
static inline uint64_t kcount_tie(uint32_t seq)
{
	return TH_KSEQ_LINE(seq);
}

/* The offset of clock `sel` from record s's MONOTONIC into *off; for a tied
 * record (TH_RECF_TIED), which the kernel may have moved on from by a step
 * not yet wound up, REALTIME's and TAI's with the kernel's REALTIME offset
 * now, and in *kc the kernel's count it was read under (as a tie of every
 * clock; 0 where no kernel offset was read), for tied_still. 0 when
 * that offset cannot be read now (the kernel updating at every try): the
 * caller reads again rather than serve an offset from before a step. */
static int tied_offset(const struct th_snap *s, int sel, int64_t *off, uint64_t *kc)
{
	int64_t kor;
	uint32_t seq;
	*off = snap_offset(s, sel);
	*kc = 0;
	if (!(s->flags & TH_RECF_TIED) || (sel != TH_SEL_REAL && sel != TH_SEL_TAI))
		return 1;
	if (th_hw_kpage_real(&kor, &seq) <= 0)
		return 0;
	*off += kor - s->off_real;
	*kc = kcount_tie(seq);
	return 1;
}

/* After the counter c, or the kernel's reading, that a kernel offset read
 * under count kc (tied_offset, page_offset, page_tied_try) is served with:
 * 1 while the kernel's count is still that one (kc 0: nothing to check),
 * as the kernel's vDSO re-reads its own after its counter. A step between
 * the two reads would otherwise be served on the line of after it with the
 * offset of before it. */
static int tied_still(uint64_t kc, uint64_t c)
{
	return kc == 0 || th_abi_kseq_moved(kc, TH_CK_REAL, th_hw_kcount_ref(), c) == 0;
}

/* A kernel's line the kernel moved on from, while another thread holds the
 * writer's lock: a moment (bounded: G6) for its windup to commit the next
 * one, rather than a kernel reading (which, for a pvclock line, would also
 * make that commit's compare-and-swap fail: th__kv_windup). 1 once the word names
 * another record. */
static int kv_wait(struct th_proc *p, uint64_t cur)
{
	if (th__lock_mine(p))
		return 0;
	for (int i = 0; i < 256; i++) {
		th_hw_pause();
		if (TH_CUR_ID(atomic_load_explicit(&p->tl.cur, memory_order_acquire)) != TH_CUR_ID(cur))
			return 1;
	}
	return 0;
}

/*
 * Kernel-served value of clock ck for a KERNEL/TRANSIT record or an
 * expired LINE: phi of the kernel's reading (record.h) plus the record's
 * offset, or the kernel's own clock where the record's offsets may not be
 * served (its MONOTONIC equivalent, minus the offset, then stands in for the
 * kernel reading in the checks below). Returns 1 with *v set, 0 if the caller
 * must read again (a new record appeared).
 */
int th__kernel_value(struct th_proc *p, const struct th_snap *s, int ck, uint64_t *v)
{
	const int line = th__ck_line(ck), sel = th__ck_sel(ck);
	/* The kernel's own clock, of the very clock asked for (kernel_own: the
	 * record's offsets may be those before a step). */
	int exact = kernel_own(p, s, ck);
	int64_t toff;
	uint64_t kc;
	if (!tied_offset(s, sel, &toff, &kc))
		return 0; /* read again */
	uint64_t off = (uint64_t)toff;
	uint64_t ke = (uint64_t)kread_ns(exact ? exact_clock(ck) : line_clock(line));
	uint64_t k = exact ? ke - off : ke;
	uint64_t C = th_snap_ceiling(s, line);
	uint64_t m = exact ? k : th_phi(k, C, s->bound[line]);
	atomic_fetch_add_explicit(&p->slow_reads, 1, memory_order_relaxed);
	/* The kernel's counter read happens before what follows. */
	th_hw_order_after_kread();
	if (!tied_still(kc, 0))
		return 0; /* a step since the offset: read again */
	switch (s->kind) {
	case TH_REC_LINE: /* expired: a windup may be pending with an older sample */
		/* A pvclock line below the kernel: the next one must start
		 * above this reading (th__kv_windup) */
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
	/* an offset of the kernel's the record has not followed (a step):
	 * of no epoch's G3 floor */
	if (toff != snap_offset(s, sel)) {
		stepped_floor(p, m);
		return 2;
	}
	return 1;
}

/* The offset of clock `sel` from page record s's MONOTONIC into *off: 1;
 * 2 where s is tied to a kernel update (TH_RECF_TIED, the daemon's windup)
 * and REALTIME's offset has changed since (a step the daemon has not
 * followed yet): REALTIME's and TAI's then the kernel's of now; 0 when that
 * cannot be read now (the kernel updating: read again). A process that does
 * not read the kernel's page cannot tell a step: the record's offset. *kc:
 * as tied_offset's. */
static int page_offset(const struct th_snap *s, int sel, int64_t *off, uint64_t *kc)
{
	int64_t kor;
	uint32_t kseq;
	*off = snap_offset(s, sel);
	*kc = 0;
	if (!(s->flags & TH_RECF_TIED) || (sel != TH_SEL_REAL && sel != TH_SEL_TAI))
		return 1;
	int r = th_hw_kpage_real(&kor, &kseq);
	if (r <= 0)
		return r < 0 ? 0 : 1;
	*kc = kcount_tie(kseq);
	if (kor == s->off_real)
		return 1;
	*off += kor - s->off_real;
	return 2;
}

/* After a copy of the page: the process still reads it, through the word
 * `lc` that named the shared slot (as in th__read_tl_v). The acquire fence
 * orders the copy before the re-load; see th__leave_shared. */
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
uint64_t th__above_floor(struct th_proc *p, uint64_t v, int ck, uint16_t epoch)
{
	if ((ck == TH_CK_REAL || ck == TH_CK_TAI) &&
	    epoch != atomic_load_explicit(&p->sh_epoch, memory_order_relaxed))
		return v;
	uint64_t f = th__floor_ns(p, ck);
	return v > f ? v : f;
}

/*
 * Slow path while the process reads the page (`lc` names the shared slot).
 * Returns 1 with *ns set, 0 to read again. A reader never writes to the page,
 * so an expired page record cannot be announced: the local writer leaves
 * shared mode (th__leave_shared), and while another thread is doing that, the
 * value is phi of the kernel against the page record's ceiling and the
 * floors, checked like a KERNEL record's (no writer of the local timeline can
 * have started a transition before our kernel read unless cur changed).
 * `last`: the caller's passes are over; no windup and no second look at the
 * page's word (th__fine_slow's fallback).
 */
static int shared_value(struct th_proc *p, uint64_t lc, int ck, int ordered, uint64_t *ns, uint16_t *epoch,
			int last)
{
	const int line = th__ck_line(ck), sel = th__ck_sel(ck);
	struct th_snap ps = {0};
	unsigned retries = 0;
	int have = th_snapshot_progress(th__page_tl(), &ps, &retries) == 0;
	/* The offset served with the page's record: for a tied one, REALTIME's
	 * and TAI's the kernel's of now (a step the daemon has not followed
	 * yet); then the floors of the switch, of the epoch before the step,
	 * no longer apply. */
	int64_t off = 0;
	uint64_t kc = 0;
	int stepped = 0;
	if (have) {
		int t = page_offset(&ps, sel, &off, &kc);
		if (t == 0)
			return 0; /* the kernel updating: read again (or, last, the kernel's clock) */
		stepped = t == 2;
		*epoch = page_epoch(p, ps.epoch);
		if (ps.kind == TH_REC_LINE) {
			uint64_t c = ordered ? th_hw_ctr_ordered() : th_hw_ctr_relaxed();
			int64_t d = (int64_t)(c - ps.anchor);
			if (!tied_still(kc, c))
				return 0; /* a step since the offset: read again */
			d = lagging_ctr(&ps, d, ordered);
			if (d >= ps.dmin && d <= ps.dhi) {
				if (d >= ps.ddue)
					th__windup_try(); /* the daemon is late: check on it */
				if (d < ps.dlo)
					d = ps.dlo;
				uint64_t m = th_line_eval(&ps, line, d), v = m + (uint64_t)off;
				if (!page_still_read(p, lc))
					return 0; /* read again */
				if (stepped)
					stepped_floor(p, m);
				*ns = stepped ? v : th__above_floor(p, v, ck, page_epoch(p, ps.epoch));
				return 1 + stepped;
			}
		}
	}
	if (!last && th__windup_try())
		return 0;
	uint64_t k = (uint64_t)kread_ns(line_clock(line));
	const int lines[TH_NLINES] = {TH_CK_MONO, TH_CK_RAW};
	uint64_t C = have ? th_snap_ceiling(&ps, line) : 0, f = th__floor_ns(p, lines[line]);
	uint64_t v = th_phi_page(k, C > f ? C : f, have && ps.bound[line] ? ps.bound[line] : 1000);
	atomic_fetch_add_explicit(&p->slow_reads, 1, memory_order_relaxed);
	th_hw_order_after_kread();
	if (TH_CUR_ID(atomic_load_explicit(&p->tl.cur, memory_order_acquire)) != TH_CUR_ID(lc) || !tied_still(kc, 0))
		return 0;
	/* The page's word still names the record copied, after the kernel
	 * read (ordered before this load above; acquire, as any load of the
	 * page's word): else the daemon committed since, maybe a line that
	 * lags the kernel, which later reads would return below this one;
	 * read again (as th__kernel_value does for a KERNEL record).
	 * tests/model/timehands.pml, daemon world: -DBREAK_PAGE_NO_RECHECK. */
	if (!last && have && TH_CUR_ID(atomic_load_explicit(&th__page_tl()->cur, memory_order_acquire)) != TH_CUR_ID(ps.cur))
		return 0;
	if (!have)
		off = sel == TH_SEL_REAL ? th__W.disc.off_real
		    : sel == TH_SEL_BOOT ? th__W.disc.off_boot
		    : sel == TH_SEL_TAI	 ? th__W.disc.off_tai
					 : 0;
	if (stepped)
		stepped_floor(p, v);
	*ns = stepped ? v + (uint64_t)off : th__above_floor(p, v + (uint64_t)off, ck, have ? page_epoch(p, ps.epoch) : 0);
	return 1 + stepped;
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

int th__fine_slow(int ck, int ordered, uint64_t *ns, uint16_t *epoch)
{
	struct th_proc *p = &th__P;
	const int line = th__ck_line(ck), sel = th__ck_sel(ck);
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
	int rounds = 0;
again:;
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
			int sv = shared_value(p, lc, ck, ordered, ns, epoch, 0);
			if (sv)
				return sv == 2;
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
			return kernel_exact(ck, ns);
		if (!ok) {
			if (kernel_first(p, ck, ns))
				return 0;
			continue;
		}
		have = 1;
		*epoch = s.epoch;
		uint64_t v;
		if (s.kind == TH_REC_LINE) {
			uint64_t c = ordered ? th_hw_ctr_ordered() : th_hw_ctr_relaxed();
			int64_t d = lagging_ctr(&s, (int64_t)(c - s.anchor), ordered);
			/* the kernel's line is served only while its update is
			 * the kernel's latest (record.h, kseq) */
			if (d >= s.dmin && d <= s.dhi && !th__kseq_moved(s.kseq, ck, c)) {
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
			if (s.kseq && th__kseq_moved(s.kseq, ck, c) && kv_wait(p, s.cur))
				continue;
			/* A tied line the kernel moved on from, while another
			 * thread's windup goes on: the line still (the tie only
			 * asks for a windup), with the kernel's offset now,
			 * announced: a windup that would commit another line
			 * (th__install_line, the kernel's own) from a sample
			 * taken before this reading fails and samples again. */
			int64_t toff;
			uint64_t kc;
			if ((s.flags & TH_RECF_TIED) && d >= s.dmin && d <= s.dhi) {
				if (!tied_offset(&s, sel, &toff, &kc))
					continue; /* the kernel's offset: read again */
				if (!th_announce(&p->tl, s.cur))
					continue; /* committed meanwhile: read it */
				/* the counter again, after the offset (tied_still) */
				c = ordered ? th_hw_ctr_ordered() : th_hw_ctr_relaxed();
				d = (int64_t)(c - s.anchor);
				if (!tied_still(kc, c) || d < s.dmin || d > s.dhi)
					continue;
				if (d < s.dlo)
					d = s.dlo;
				uint64_t m = th_line_eval(&s, line, d);
				*ns = m + (uint64_t)toff;
				if (toff == snap_offset(&s, sel))
					return 0;
				stepped_floor(p, m);
				return 1;
			}
		}
		int kv = th__kernel_value(p, &s, ck, &v);
		if (kv) {
			*ns = v;
			return kv == 2;
		}
	}
	/* Four passes failed and no commit since the last one began. When
	 * every pass read the page: phi of the page's current record, with the
	 * floors, taken as it is (no windup, no second look at the page's
	 * word); the kernel's own clock if the process left the page
	 * meanwhile. */
	if (!have) { /* the last pass read the page */
		uint64_t lc = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
		int sv = TH_CUR_SLOT(lc) == TH_SLOT_SHARED ? shared_value(p, lc, ck, ordered, ns, epoch, 1) : 0;
		if (sv)
			return sv == 2;
		*epoch = 0;
		return kernel_exact(ck, ns);
	}
	/* Else phi of the last local record, the current one (never below
	 * anything returned before it); the kernel's own clock after the
	 * kernel's line. */
	int64_t toff;
	uint64_t kc;
	if (kernel_own(p, &s, ck) || !tied_offset(&s, sel, &toff, &kc))
		return kernel_exact(ck, ns);
	if (s.kind == TH_REC_LINE && (s.flags & TH_RECF_TIED)) {
		/* A tied line is still the line inside its window (the tie
		 * only asks for a windup): its value, announced as above. */
		uint64_t c = ordered ? th_hw_ctr_ordered() : th_hw_ctr_relaxed();
		int64_t d = (int64_t)(c - s.anchor);
		if (!tied_still(kc, c)) {
			if (++rounds < 8)
				goto again; /* a step since the offset */
			return kernel_exact(ck, ns);
		}
		if (d >= s.dmin && d <= s.dhi) {
			if (th_announce(&p->tl, s.cur)) {
				if (d < s.dlo)
					d = s.dlo;
				*ns = th_line_eval(&s, line, d) + (uint64_t)toff;
				return toff != snap_offset(&s, sel);
			}
			if (++rounds < 8)
				goto again; /* committed meanwhile: read it */
		}
	}
	uint64_t k = (uint64_t)kread_ns(line_clock(line));
	th_hw_order_after_kread();
	if (!tied_still(kc, 0)) {
		if (++rounds < 8)
			goto again; /* a step since the offset */
		return kernel_exact(ck, ns);
	}
	*ns = th_phi(k, th_snap_ceiling(&s, line), s.bound[line]) + (uint64_t)toff;
	return toff != snap_offset(&s, sel);
}

static uint64_t fine_ns(int ck)
{
	struct timespec ts;
	uint16_t ep;
	th__fine_ts(ck, 1, &ts, &ep);
	return (uint64_t)ts_ns(&ts);
}

/*
 * G3 for a coarse REALTIME reading *ts: the floor's second (g3 word `w`, the
 * largest second a fine REALTIME reading returned) where it lies above *ts,
 * once a fine reading now shows that second too. A fine reading below it
 * means the kernel stepped REALTIME back since the floor was raised, which
 * the floor's epoch does not always show (readings the kernel served while
 * this process attached carry the epoch its first records start with, and
 * *ts may be of the epoch before the step): then that fine reading, which
 * shows the step, with the coarse floor raised to a MONOTONIC reading after
 * it, so that no coarse reading that follows goes back below it.
 */
static void g3_floor(struct timespec *ts, uint64_t w)
{
	int64_t fs = (int64_t)(w & TH_G3_SECMASK);
	if (fs <= (int64_t)ts->tv_sec || fs > INT64_MAX / NS_PER_S)
		return;
	int64_t f = (int64_t)fine_ns(TH_CK_REAL);
	if (f >= fs * NS_PER_S) {
		ts->tv_sec = (time_t)fs;
		ts->tv_nsec = 0;
		return;
	}
	ns_to_ts(f, ts);
	if (__atomic_load_n(&th__P.have_kcoarse, __ATOMIC_RELAXED))
		th__raise_coarse_floor(&th__P, fine_ns(TH_CK_MONO));
}

/* Release: the reading `v` came from (the load of cur that chose the local
 * records or the page) comes before the raise; pairs with the acquire load
 * of th__coarse_slow. */
void th__raise_coarse_floor(struct th_proc *p, uint64_t v)
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
	if (!atomic_compare_exchange_strong_explicit(&p->lock, &z, th_hw_self(), memory_order_acquire,
						     memory_order_relaxed))
		return;
	if (TH_CUR_ID(atomic_load_explicit(&p->tl.cur, memory_order_acquire)) == TH_CUR_ID(lc))
		atomic_store_explicit(&p->sh_fresh_fast, atomic_load_explicit(&p->sh_fresh_ns, memory_order_relaxed),
				      memory_order_release);
	/* Release: as in th__windup_try. */
	atomic_store_explicit(&p->lock, 0, memory_order_release);
}

/* Returns 1 when *ns is a REALTIME reading that needs no G3 floor
 * (th__coarse_real_slow): a fine reading taken now (the kernel's own where
 * the record's offsets may not be served), or the kernel's offset of now
 * that a kernel-mode record has not followed yet. The kernel's REALTIME goes
 * back only where the kernel stepped it, which the floor's epoch may not
 * show yet. 0 otherwise. */
int th__coarse_slow(int ck, uint64_t *ns, uint16_t *epoch)
{
	const int sel = th__ck_sel(ck);
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
		/* The kernel's coarse clock, unless it is a second off its own
		 * fine line (kdata.h): then none, as where there is no such
		 * clock (a fine reading serves, below). */
		uint64_t kc = 0;
		int kc_ok = have_kcoarse;
		if (have_kcoarse) {
			int ck_r = th_hw_kcoarse_check(&kc);
			if (ck_r == 0)
				kc = (uint64_t)kread_ns(CLOCK_MONOTONIC_COARSE);
			kc_ok = ck_r >= 0;
		}
		/* Acquire, before the load of cur: pairs with the release of
		 * th__raise_coarse_floor, so that a floor raised from a reading of
		 * the page comes with a cur that names the page (a floor from
		 * the page plus a local record's offset could be above the
		 * page's coarse REALTIME after it). */
		uint64_t cf = atomic_load_explicit(&p->coarse_floor, memory_order_acquire);
		uint64_t lc = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
		if (TH_CUR_SLOT(lc) == TH_SLOT_SHARED) {
			/* The page's coarse value while the daemon ticks; else
			 * check on it (th__leave_shared) or, while another thread
			 * does, a fine reading. */
			int got = th_snapshot_progress(th__page_tl(), &s, &retries) == 0;
			if (!page_still_read(p, lc))
				continue; /* read again */
			/* A tied record the kernel moved on from (th__coarse_blk):
			 * where the kernel's REALTIME offset is no longer the
			 * record's (a step the daemon has not followed yet), a
			 * fine reading, below, of the kernel's offset of now
			 * (shared_value); an update that changed no offset (its
			 * tick) leaves the page's coarse values as they are. */
			if (got && sel == TH_SEL_REAL && (s.flags & TH_RECF_TIED) &&
			    th__kseq_moved(s.kseq, TH_CK_REAL, 0)) {
				int64_t o;
				uint64_t okc;
				int t = page_offset(&s, TH_SEL_REAL, &o, &okc);
				if (t == 0)
					continue; /* the kernel updating: read again */
				if (t == 2)
					break;
			}
			if (got && s.kind == TH_REC_LINE && kc_ok &&
			    kc - s.tick < atomic_load_explicit(&p->sh_fresh_ns, memory_order_relaxed)) {
				*epoch = page_epoch(p, s.epoch);
				uint64_t v = s.coarse > cf ? s.coarse : cf;
				v = th__above_floor(p, v, TH_CK_MONO, page_epoch(p, s.epoch));
				uint64_t vr = th__above_floor(p, v + (uint64_t)s.off_real, TH_CK_REAL, page_epoch(p, s.epoch));
				if (atomic_load_explicit(&p->sh_fresh_fast, memory_order_relaxed) == 0 && s.coarse > cf &&
				    s.coarse > th__floor_ns(p, TH_CK_MONO) &&
				    (page_epoch(p, s.epoch) != atomic_load_explicit(&p->sh_epoch, memory_order_relaxed) ||
				     s.coarse + (uint64_t)s.off_real > th__floor_ns(p, TH_CK_REAL)))
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
				break; /* a fine reading, below (th__leave_shared) */
			if ((s.flags & TH_RECF_KERNEL_OFFSETS) && sel == TH_SEL_REAL) {
				exact = 1; /* the kernel's REALTIME, below */
				break;
			}
			/* Kernel mode: phi of the kernel's coarse clock, never below
			 * an earlier coarse value. */
			uint64_t k = kc_ok ? kc : (uint64_t)kread_ns(CLOCK_MONOTONIC);
			uint64_t v = th_phi(k, s.ceil[TH_MONO], s.bound[TH_MONO]);
			/* A switch in progress must not start its line below
			 * this value (as th__kernel_value for fine reads): kc was
			 * read before the snapshot, the guard maybe before kc. */
			if (s.kind == TH_REC_TRANSIT && v > s.guard[TH_MONO] && !th_announce(&p->tl, s.cur))
				continue;
			if (v < s.coarse)
				v = s.coarse;
			if (v < cf)
				v = cf;
			/* Where fine readings are the kernel's own (kernel_own),
			 * a REALTIME offset the kernel has changed since this
			 * record's windup (a step; the record's is the kernel's
			 * exact one, th__take_sample) is the kernel's now: the
			 * reading is the kernel's, no G3 floor of the old epoch
			 * applies, and a windup follows the step. A tied record
			 * (its fine readings serve the kernel's offset of now)
			 * winds up, else takes a fine reading, below: one of the
			 * step's offset, at or above every second served with it
			 * (G3). */
			int64_t koff;
			int own = sel == TH_SEL_REAL && kernel_own(p, &s, ck);
			int tied = sel == TH_SEL_REAL && (s.flags & TH_RECF_TIED) && !own;
			if (own || tied) {
				if (!th_hw_koff_real(&koff)) {
					if (tied)
						continue; /* the kernel's offset: read again */
				} else if (koff != s.off_real) {
					if (th__windup_try() && tied)
						continue;
					if (tied)
						break;
					*ns = v + (uint64_t)koff;
					return 1;
				}
			}
			if (k >= s.due_ns)
				th__windup_try();
			*ns = v + (uint64_t)snap_offset(&s, sel);
			return 0;
		}
		/* A tied line the kernel moved on from (th__coarse_blk): its
		 * REALTIME offset may be from before a step. A windup first (a
		 * retie), or the one another thread is making; else a fine
		 * reading, below, with the kernel's offset of now
		 * (th__fine_slow). */
		if (sel == TH_SEL_REAL && (s.flags & TH_RECF_TIED) && th__kseq_moved(s.kseq, TH_CK_REAL, 0)) {
			if (th__windup_try() || kv_wait(p, s.cur))
				continue;
			break;
		}
		if (kc_ok && kc - s.tick < tick_ns / 2) {
			uint64_t v = s.coarse > cf ? s.coarse : cf;
			*ns = v + (uint64_t)snap_offset(&s, sel);
			return 0;
		}
		if (kc_ok && th__windup_try())
			continue;
		/* Stale and the writer is busy (or no kernel coarse clock): a
		 * fine reading, below. Not a fine MONOTONIC reading plus this
		 * record's offset: the fine reading may come from the page,
		 * whose offsets may differ from this record's by a few
		 * nanoseconds (th__page_offsets_agree), and the sum could then be
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
		th__raise_coarse_floor(p, m);
	*ns = sel == TH_SEL_REAL ? r : m;
	/* A fine reading is at or above the G3 floor of its own epoch (G2),
	 * and a reading in an epoch the records have not reached yet (a step
	 * a tied record's reader served) belongs to no floor: none is
	 * applied to it. */
	return sel == TH_SEL_REAL;
}

struct th_tv th__fine_slow_v(int ck, int ordered)
{
	uint64_t ns;
	uint16_t ep;
	struct timespec ts;
	int none = th__fine_slow(ck, ordered, &ns, &ep);
	ns_to_ts((int64_t)ns, &ts);
	if (ck == TH_CK_REAL && !none)
		th__g3_raise(ts.tv_sec, ep);
	return (struct th_tv){ts.tv_sec, ts.tv_nsec};
}

/*
 * REALTIME or TAI from the daemon's page whose current record the kernel has
 * moved on from (its tie, record.h) while the daemon has not tied it again
 * yet: where the kernel's REALTIME offset is still the record's (an update
 * that stepped nothing: its tick, a rate change), the record's reading, as
 * if the kernel's count were still its tie; 0 otherwise (a step the daemon
 * has not followed, the kernel updating, another record: the slow path).
 * The offset is read from the kernel's page before the counter (ordered
 * reads: th_hw_ctr_ordered), so the reading's counter comes after an update
 * with that offset; or, where the kernel has made exactly one update since
 * the record's tie and its offset is the record's, the counter the caller
 * took first (c0, early 1) is served: the update in force when it was read
 * is the tie's or that one (tied_still: the count read after it is still
 * that one's), and both have the record's offset. That saves the second
 * ordered counter read on the reads that fall between the kernel's tick and
 * the daemon's next. The record's offset and tie are copied under its
 * generation, which th_abi_eval checks again against the same word.
 */
static int page_tied_try(int ck, int ordered, uint64_t lc, uint64_t c0, int early, struct th_tv *out,
			 uint16_t *oep)
{
	struct th_timeline *tl = th__page_tl();
	/* Acquire: pairs with the daemon's release commit. */
	uint64_t pcur = atomic_load_explicit(&tl->cur, memory_order_acquire);
	const struct th_rec *r = &tl->ring[TH_CUR_SLOT(pcur) % TH_RING];
	/* Acquire, the fields, fence, generation again: as th_snapshot. */
	uint32_t g = atomic_load_explicit(&r->gen, memory_order_acquire);
	uint64_t ks = atomic_load_explicit(&r->kseq, memory_order_relaxed);
	int64_t ro = atomic_load_explicit(&r->off_real, memory_order_relaxed);
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&r->gen, memory_order_relaxed) != g || g != th_abi_gen_for(th_abi_cur_seq(pcur)) ||
	    !th_kseq_own_tie(ks))
		return 0;
	int64_t kor;
	uint32_t kseq;
	TH_STEP("page_moved");
	if (th_hw_kpage_real(&kor, &kseq) <= 0 || kor != ro)
		return 0;
	TH_STEP("page_tied");
	/* The kernel's counts step by 2 per update (even: a finished one). */
	uint64_t c = early == 1 && kseq == (uint32_t)ks + 2u ? c0
		     : ordered ? th_hw_ctr_ordered() : th_hw_ctr_relaxed();
	/* still the update whose offset was compared, after c */
	if (!tied_still(kcount_tie(kseq), c))
		return 0;
	const uint32_t tie = (uint32_t)ks, *tiep = &tie;
	int64_t sec, n;
	uint64_t ep;
	if (!th_abi_eval(th_abi_rec_of((const struct th_abi_timeline *)(const void *)tl, pcur), pcur, NULL, ck, 1, c,
			 th__late_ctr, &tiep, TH__EVAL_STEP, 1, (const uint64_t *)(const void *)&th__P.tl.cur, lc,
			 TH__SH_CTR, TH__SH_DELTA, &sec, &n, &ep))
		return 0;
	*out = (struct th_tv){sec, n};
	*oep = (uint16_t)ep;
	return 1;
}

struct th_tv th__page_moved_v(int ck, int ordered, uint64_t lc, uint64_t c, int early)
{
	struct th_tv v;
	uint16_t ep;
	if (!page_tied_try(ck, ordered, lc, c, early, &v, &ep))
		return th__fine_slow_v(ck, ordered);
	if (ck == TH_CK_REAL)
		th__g3_raise(v.sec, ep);
	return v;
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
int th__coarse_ts_k(int ck, struct timespec *ts, uint64_t cur)
{
	if (!th_hw_have_kcoarse())
		return ck == TH_CK_REAL ? th__coarse_real_slow(ts) : th__coarse_ts_slow(TH_CK_MONO, ts, NULL);
	struct timespec kts;
	th_hw_kread(CLOCK_MONOTONIC_COARSE, &kts);
	return th__coarse_ts_at(ck, ts, cur, (uint64_t)ts_ns(&kts));
}

/* th__coarse_kv's slow path: the kernel's coarse clocks from one consistent
 * copy of its data, after a windup follows a step no record has followed yet
 * (this thread's, or, while another thread holds the windup lock, that
 * thread's: a bounded wait, kv_wait); never below the coarse floor, REALTIME
 * never below the G3 floor of the epoch in force. When no copy agrees (the
 * kernel mid-update every time, the records leaving the kernel's line, a
 * windup that does not come in the wait, the kernel's coarse clocks a second
 * off its own line): a fine reading of the same clock,
 * which no coarse reading served before exceeds and no later fine one
 * undercuts (G2-G4; the kernel's coarse clock alone would ignore both
 * floors), with the coarse floor raised to a fine MONOTONIC reading taken
 * after it, so that the later coarse readings, the kernel's coarse clock up
 * to a tick behind, are not below it either (G2). */
int th__coarse_kv_slow(int ck, struct timespec *ts)
{
#ifndef TH_SIM
	struct th_proc *p = &th__P;
	for (int pass = 0; pass < 3; pass++) {
		struct th_kcoarse k;
		uint64_t cur = atomic_load_explicit(&p->tl.cur, memory_order_acquire);
		int r = th_kdata_coarse(&k);
		if (r == 0) {
			if (!th__windup_try())
				kv_wait(p, cur);
			continue;
		}
		/* An update no windup has seen: the windup first, which raises
		 * the coarse floor where this update's coarse clocks lie below
		 * the previous one's (acquire: pairs with its release store). */
		if (k.seq != atomic_load_explicit(&p->kv_seq, memory_order_acquire)) {
			if (!th__windup_try())
				kv_wait(p, cur);
			continue;
		}
		/* The kernel's coarse clocks a second off its own line (a rate
		 * change's underflow, kdata.h): not the kernel's time until its
		 * next tick; the fine reading below serves and floors them. */
		if (r < 0)
			break;
		uint64_t m = k.mono;
		int64_t off = (int64_t)(k.real - k.mono);
		if (off != atomic_load_explicit(&p->kv_off_real, memory_order_relaxed)) {
			if (!th__windup_try())
				kv_wait(p, cur);
			continue;
		}
		uint64_t f = atomic_load_explicit(&p->coarse_floor, memory_order_relaxed);
		if (m < f)
			m = f;
		if (ck == TH_CK_MONO) {
			ns_to_ts((int64_t)m, ts);
			return 0;
		}
		ns_to_ts((int64_t)(m + (uint64_t)off), ts);
		g3_floor(ts, atomic_load_explicit(&p->g3, memory_order_relaxed));
		return 0;
	}
	th__fine(ck, 1, ts);
	struct timespec mt;
	if (ck != TH_CK_MONO)
		th__fine(TH_CK_MONO, 1, &mt);
	th__raise_coarse_floor(p, (uint64_t)ts_ns(ck == TH_CK_MONO ? ts : &mt));
	return 0;
#else
	return th__fine(ck, 1, ts);
#endif
}

/*
 * Coarse REALTIME from the daemon's page whose current record the kernel
 * moved on from (th__coarse_blk): where the kernel's REALTIME offset is
 * still the record's (its tick), the page's coarse block as it is, with the
 * record's tie standing in for the kernel's count; else the slow path (which
 * takes a fine reading with the kernel's offset of now after a step). `lc`,
 * `fresh`, `fresh_ns`: th__coarse_ts_at's.
 */
int th__coarse_page_moved(struct timespec *ts, uint64_t lc, uint64_t fresh, uint64_t fresh_ns)
{
	struct th_timeline *tl = th__page_tl();
	/* Acquire: pairs with the daemon's release commit. */
	uint64_t pcur = atomic_load_explicit(&tl->cur, memory_order_acquire);
	const struct th_rec *r = &tl->ring[TH_CUR_SLOT(pcur) % TH_RING];
	/* Acquire, the fields, fence, generation again: as th_snapshot. */
	uint32_t g = atomic_load_explicit(&r->gen, memory_order_acquire);
	uint64_t ks = atomic_load_explicit(&r->kseq, memory_order_relaxed);
	int64_t ro = atomic_load_explicit(&r->off_real, memory_order_relaxed);
	atomic_thread_fence(memory_order_acquire);
	int64_t kor;
	uint32_t kseq;
	if (atomic_load_explicit(&r->gen, memory_order_relaxed) != g || g != th_abi_gen_for(th_abi_cur_seq(pcur)) ||
	    !th_kseq_own_tie(ks) || th_hw_kpage_real(&kor, &kseq) <= 0 || kor != ro)
		return th__coarse_real_slow(ts);
	const uint32_t tie = (uint32_t)ks, *tiep = &tie;
	return th__coarse_blk_k(TH_CK_REAL, ts, tl, pcur, fresh, fresh_ns, 1, lc, &tiep, 1);
}

int th__coarse_real_slow(struct timespec *ts)
{
	uint16_t ep;
	uint64_t ns;
	int exact = th__coarse_slow(TH_CK_REAL, &ns, &ep);
	ns_to_ts((int64_t)ns, ts);
	uint64_t w = atomic_load_explicit(&th__P.g3, memory_order_relaxed);
	if (!exact && (uint16_t)(w >> 48) == ep)
		g3_floor(ts, w);
	return 0;
}

int th__coarse_ts_slow(int ck, struct timespec *ts, uint16_t *epoch)
{
	uint64_t ns;
	uint16_t ep;
	th__coarse_slow(ck, &ns, epoch ? epoch : &ep);
	ns_to_ts((int64_t)ns, ts);
	return 0;
}
