/* Writer transitions; see writer.h. */
#include "writer.h"
#include "hw.h"

#include <string.h>

void th_val_to_snap(const struct th_snap *v, uint64_t cur, struct th_snap *out)
{
	memset(out, 0, sizeof *out);
	out->kind = v->kind;
	out->epoch = v->epoch;
	out->coarse = v->coarse;
	out->tick = v->tick;
	out->due_ns = v->due_ns;
	out->flags = v->flags;
	for (int l = 0; l < TH_NLINES; l++) {
		out->ceil[l] = v->ceil[l];
		out->guard[l] = v->guard[l];
		out->bound[l] = v->bound[l];
	}
	out->cur = cur;
}

uint64_t th_writer_commit_kernel(struct th_writer *w, const struct th_sample *s, struct th_snap *v)
{
	/* The coarse value of a kernel-mode record: what a fine read through
	 * it returns at the sample, phi(k), never below the previous coarse
	 * value; phi is non-decreasing in k and C, so a later fine read is
	 * never below it (G4). A page's readers take coarse clocks from the
	 * record alone, so it must keep moving. */
	uint64_t c = th_phi((uint64_t)s->mono, v->ceil[TH_MONO], v->bound[TH_MONO]);
	if (c > v->coarse)
		v->coarse = c;
	w->kernel_records++;
	return th_commit_force(w->tl, v);
}

uint64_t th_writer_kernel(struct th_writer *w, const struct th_snap *prev, const struct th_sample *s,
			  uint64_t due_in_ns, uint64_t guard_ns, struct th_snap *out)
{
	th_plan_kernel(w->disc, prev, s, due_in_ns, guard_ns, out);
	return th_writer_commit_kernel(w, s, out);
}

/*
 * Install a fresh line (kernel -> line, or after a line expired before its
 * successor was committed).
 *
 * 1. The old ceiling C must not be ahead of the kernel, or the line would
 *    start ahead of it: if it is (a counter jump, a line that ran ahead),
 *    publish KERNEL due when the kernel reaches C.
 * 2. Publish TRANSIT with guard G = phi(k_g) + guard_ns, k_g read before.
 * 3. Read the kernel again: if it is already past G the writer was stalled
 *    between k_g and the publication, and a reader of the older record may
 *    have returned up to that: start over with a higher guard. Otherwise
 *    every reader of an older record read the kernel before TRANSIT was
 *    visible, hence below G.
 * 4. Sample and commit the line (starting at max(kernel, G)) with a
 *    compare-and-swap: a TRANSIT reader that saw more than G announced
 *    itself and makes it fail (in a read-only page nobody can announce, and
 *    the commit cannot fail).
 */
int th_writer_install(struct th_writer *w, const struct th_snap *prev)
{
	struct th_snap base;
	memset(&base, 0, sizeof base);
	int have = prev != NULL;
	if (have)
		base = *prev;
	w->installs++;
	double max_w = 2 * w->disc->cfg.max_sample_err_ns;
	/* a fresh line's lag behind the kernel, which page readers rely on
	 * (th_phi_page) */
	if (max_w > 2.0 * (TH_PAGE_LAG_NS - 200))
		max_w = 2.0 * (TH_PAGE_LAG_NS - 200);
	/* The guard: how far above the kernel at the first sample a TRANSIT
	 * reader may go without announcing, and so how far ahead the line may
	 * start. The TRANSIT commit and the two kernel reads after it must fit
	 * in it; th_guard_widen after an attempt where they did not. */
	uint64_t gns = w->disc->cfg.guard_ns;
	for (int attempt = 0; attempt < 4; attempt++) {
		struct th_sample g;
		th_quick_sample(w->sp, &g);
		struct th_snap v;
		uint64_t ahead = 0;
		if (have) {
			uint64_t cm = th_snap_ceiling(&base, TH_MONO), cr = th_snap_ceiling(&base, TH_RAW);
			uint64_t am = cm > (uint64_t)g.mono ? cm - (uint64_t)g.mono : 0;
			uint64_t ar = cr > (uint64_t)g.raw ? cr - (uint64_t)g.raw : 0;
			ahead = am > ar ? am : ar;
		}
		if (ahead > w->disc->cfg.guard_ns) {
			th_writer_kernel(w, have ? &base : NULL, &g, ahead, 0, &v);
			return -1;
		}
		TH_STEP("transit");
		uint64_t tw = th_writer_kernel(w, have ? &base : NULL, &g, w->tick_ns, gns, &v);
		th_val_to_snap(&v, tw, &base);
		have = 1;
		int64_t am = w->sp->kread(w->sp->ctx, CLOCK_MONOTONIC), ar = w->sp->kread(w->sp->ctx, CLOCK_MONOTONIC_RAW);
		if ((uint64_t)am > v.guard[TH_MONO] || (uint64_t)ar > v.guard[TH_RAW]) {
			/* stalled since k_g */
			w->inst_stalled++;
			gns = th_guard_widen(w->disc, gns);
			continue;
		}
		/* Acquire: the sample below comes after this load; a TRANSIT
		 * reader that announces after it makes the commit fail, one that
		 * announced before it read the kernel before our sample. */
		uint64_t x = atomic_load_explicit(&w->tl->cur, memory_order_acquire);
		struct th_sample s;
		th_take_sample(w->sp, &s, 1, 0);
		s.tick = g.tick;
		if ((double)s.width * w->disc->line[TH_MONO].rate > max_w ||
		    (double)s.width_raw * w->disc->line[TH_RAW].rate > max_w) {
			w->inst_wide++;
			continue; /* preempted inside the sandwich */
		}
		uint64_t guard[TH_NLINES] = {v.guard[TH_MONO], v.guard[TH_RAW]};
		th_plan_fresh(w->disc, &s, guard, &v);
		if (th_commit(w->tl, x, &v) == 0)
			return 0;
		w->inst_raced++;
	}
	struct th_sample g;
	struct th_snap k;
	th_quick_sample(w->sp, &g);
	th_writer_kernel(w, &base, &g, w->tick_ns, 0, &k);
	return -1;
}

int th_distrust_note(struct th_distrust *d, uint64_t now)
{
	const uint64_t s = 1000000000u;
	d->jumps[0] = d->jumps[1];
	d->jumps[1] = d->jumps[2];
	d->jumps[2] = now ? now : 1;
	if (!d->jumps[0] || now - d->jumps[0] >= 60 * s)
		return 0;
	d->ns = d->ns ? d->ns * 2 : 10 * s;
	if (d->ns > 600 * s)
		d->ns = 600 * s;
	d->until = now + d->ns;
	d->jumps[0] = d->jumps[1] = d->jumps[2] = 0;
	return 1;
}

void th_writer_tie_from(struct th_disc *d, uint64_t kc, int fl)
{
	if (!(fl & TH_OBS_JUMP) && kc > d->epoch_from)
		d->epoch_from = kc;
}

/* The kernel's offset read again with its count, taken exactly (a step
 * where the held one differs): that count as TH_KSEQ_TIE, or 0 where the page
 * cannot be read now. */
static uint64_t exact_tie(struct th_disc *d, int ctr, int *fl)
{
	int64_t off;
	uint32_t seq;
	if (th_hw_kpage_real(&off, &seq) <= 0)
		return 0;
	/* the counter after the count's read: the update it names, and any
	 * step in it, had happened by then */
	uint64_t kc = ctr ? th_hw_ctr_ordered() : 0;
	if (off != d->off_real && th_disc_step_to(d, off, kc))
		*fl |= TH_OBS_STEP;
	th_writer_tie_from(d, kc, *fl);
	return TH_KSEQ_TIE(seq);
}

void th_writer_page_tie(struct th_disc *d, int kpage, int64_t koff, uint64_t kc, int ctr, int *fl, uint64_t *ktie)
{
	th_writer_tie_from(d, kc, *fl);
	if (kpage > 0 && d->off_real != koff) {
		uint64_t t = exact_tie(d, ctr, fl);
		if (t)
			*ktie = t;
		/* Not read again: tied to an odd count, which no finished
		 * update shows, so that every REALTIME or TAI reader compares
		 * the kernel's offset of now with the record's (an untied
		 * record would serve its offset through a later step). */
		th_rec_tie = t ? t : TH_REC_TIE_UNFINISHED;
	}
}
