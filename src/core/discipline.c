/* Windup planning; see discipline.h. */
#include "discipline.h"

#include <math.h>
#include <string.h>

#define Q32 4294967296.0
#define ROTATE_NS 1000000000LL /* the rate baseline is 1-2 s once warmed up */
#define DRIFT_ALLOWANCE 500e-6 /* how far the kernel's rate may move between two samples (NTP) */

void th_disc_config_default(struct th_disc_config *cfg, uint64_t tick_ns)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->nominal_unc = 1000e-6;
	cfg->max_window_ns = tick_ns ? tick_ns : 4000000;
	cfg->min_window_ns = 50000;
	cfg->budget_ns = 300.0;
	cfg->guard_ns = 250;
	cfg->tol_ns = TH_TOL_NS;
	cfg->max_slew = 500e-6;
	cfg->calib_ns = 50000;
	cfg->jump_ns = 20000;
	cfg->max_sample_err_ns = 400.0;
	cfg->max_offset_err_ns = 500;
}

void th_disc_init(struct th_disc *d, const struct th_disc_config *cfg)
{
	memset(d, 0, sizeof *d);
	d->cfg = *cfg;
	for (int l = 0; l < TH_NLINES; l++) {
		if (cfg->nominal_rate > 0) {
			d->line[l].have = 1;
			d->line[l].rate = cfg->nominal_rate;
			d->line[l].unc = cfg->nominal_unc;
		}
	}
}

static double rate_guess(const struct th_disc *d, const struct th_line_disc *L)
{
	if (L->have)
		return L->rate;
	if (d->cfg.nominal_rate > 0)
		return d->cfg.nominal_rate;
	return 1.0;
}

static void line_restart(struct th_disc *d, struct th_line_disc *L, uint64_t c, int64_t k, double e)
{
	/* After a discontinuity the old rate may be wrong (another host, another
	 * frequency): no line until it has been measured again. */
	(void)d;
	L->have = 0;
	L->confirm = 1;
	L->cand_rate = 0;
	L->ref_c = L->mid_c = c;
	L->ref_k = L->mid_k = k;
	L->ref_e = L->mid_e = L->last_e = e;
}

static double sample_err(const struct th_disc *d, const struct th_line_disc *L, uint64_t width)
{
	return (double)width * 0.5 * rate_guess(d, L) + 1.0;
}

/*
 * A rate measured since a discontinuity (see th_line_disc.confirm): 1 to use
 * it, 0 to wait for another interval, -1 when the intervals disagree (another
 * discontinuity: the counter is not one clock across the CPUs we ran on, or it
 * jumped again). It is used at once when it matches the published frequency;
 * otherwise (a new host with another frequency, or a reading across skewed
 * CPUs) the rate over the next interval of at least calib_ns must agree with
 * it within both uncertainties and the kernel's possible drift.
 */
static int confirm_rate(struct th_disc *d, struct th_line_disc *L, double r, double unc, int64_t dk, int64_t dc,
			double e)
{
	double nom = d->cfg.nominal_rate;
	if (nom > 0 && fabs(r - nom) / nom <= d->cfg.nominal_unc + 3.0 * unc)
		return 1;
	if (L->cand_rate <= 0) {
		L->cand_rate = r;
		L->cand_unc = unc;
		return 0;
	}
	if (dk < (int64_t)d->cfg.calib_ns || dc <= 0)
		return 0; /* too short to say: the candidate stays */
	double rs = (double)dk / (double)dc, us = (L->last_e + e) / (double)dk;
	if (fabs(rs - L->cand_rate) / L->cand_rate > 3.0 * (us + L->cand_unc) + DRIFT_ALLOWANCE)
		return -1;
	return 1;
}

/* Returns TH_OBS_JUMP or TH_OBS_RATE flags. */
static int observe_line(struct th_disc *d, int l, uint64_t c, uint64_t width, int64_t k,
			const struct th_snap *cur)
{
	struct th_line_disc *L = &d->line[l];
	double e = sample_err(d, L, width);
	int jump = 0, flags = 0;

	if (cur && cur->kind == TH_REC_LINE) {
		int64_t dc = (int64_t)(c - cur->anchor);
		if (dc >= cur->dmin && dc <= cur->dhi) {
			if (dc < cur->dlo)
				dc = cur->dlo;
			L->err_ns = (double)(int64_t)(th_line_eval(cur, l, dc) - (uint64_t)k);
		}
	}

	if (!L->have_last) {
		L->have_last = 1;
		L->ref_c = L->mid_c = c;
		L->ref_k = L->mid_k = k;
		L->ref_e = L->mid_e = e;
	} else {
		int64_t dc = (int64_t)(c - L->last_c);
		int64_t dk = k - L->last_k;
		if (dc <= 0 || dk < 0) {
			jump = 1;
		} else if (L->have) {
			double dev = (double)dk - (double)dc * L->rate;
			double allowed = (double)d->cfg.jump_ns + L->last_e + e +
					 (L->unc + DRIFT_ALLOWANCE) * (double)dk;
			if (fabs(dev) > allowed) {
				jump = 1;
			} else if (dk >= (int64_t)d->cfg.calib_ns) {
				/* The kernel's rate changed (a slew started or
				 * stopped) if the rate since the last sample is
				 * outside what both uncertainties explain: restart
				 * the baseline there instead of averaging the old
				 * rate in for another second or two. */
				double rs = (double)dk / (double)dc;
				double us = (L->last_e + e) / (double)dk;
				if (fabs(rs - L->rate) / L->rate > 3.0 * (us + L->unc) + 2e-6) {
					L->ref_c = L->mid_c = L->last_c;
					L->ref_k = L->mid_k = L->last_k;
					L->ref_e = L->mid_e = L->last_e;
					L->rate = rs;
					L->unc = us;
					flags |= TH_OBS_RATE;
				}
			}
		}
		if (jump) {
			line_restart(d, L, c, k, e);
			flags |= TH_OBS_JUMP;
		} else {
			int64_t dkr = k - L->ref_k;
			int64_t dcr = (int64_t)(c - L->ref_c);
			if (dkr >= (int64_t)d->cfg.calib_ns && dcr > 0 && !L->have && L->confirm) {
				switch (confirm_rate(d, L, (double)dkr / (double)dcr, (L->ref_e + e) / (double)dkr,
						     dk, dc, e)) {
				case 1:
					L->rate = (double)dkr / (double)dcr;
					L->unc = (L->ref_e + e) / (double)dkr;
					L->have = 1;
					L->confirm = 0;
					break;
				case -1:
					line_restart(d, L, c, k, e);
					flags |= TH_OBS_JUMP;
					break;
				default:
					break; /* candidate kept, wait for the next interval */
				}
			} else if (dkr >= (int64_t)d->cfg.calib_ns && dcr > 0) {
				double unc = (L->ref_e + e) / (double)dkr;
				/* A measured rate replaces a published one only when it
				 * is at least as certain. */
				if (!L->have || unc <= L->unc || dkr >= ROTATE_NS / 4) {
					L->rate = (double)dkr / (double)dcr;
					L->unc = unc;
					L->have = 1;
				}
			}
			if (k - L->mid_k >= ROTATE_NS) {
				L->ref_c = L->mid_c;
				L->ref_k = L->mid_k;
				L->ref_e = L->mid_e;
				L->mid_c = c;
				L->mid_k = k;
				L->mid_e = e;
			}
		}
	}
	L->last_c = c;
	L->last_k = k;
	L->last_e = e;
	return flags;
}

int th_disc_observe(struct th_disc *d, const struct th_sample *s, const struct th_snap *cur)
{
	int flags = 0;
	if (s->counter_ok) {
		if (sample_err(d, &d->line[TH_MONO], s->width) > d->cfg.max_sample_err_ns ||
		    sample_err(d, &d->line[TH_RAW], s->width_raw) > d->cfg.max_sample_err_ns) {
			/* preempted inside the sandwich: this sample says little */
			flags |= TH_OBS_BAD;
		} else {
			int f0 = observe_line(d, TH_MONO, s->c, s->width, s->mono, cur);
			int f1 = observe_line(d, TH_RAW, s->c_raw, s->width_raw, s->raw, cur);
			if ((f0 | f1) & TH_OBS_JUMP) {
				/* Both lines share one anchor: relearn both. */
				if (!(f0 & TH_OBS_JUMP))
					line_restart(d, &d->line[TH_MONO], s->c, s->mono, 1.0);
				if (!(f1 & TH_OBS_JUMP))
					line_restart(d, &d->line[TH_RAW], s->c_raw, s->raw, 1.0);
				d->resyncs++;
				/* a counter from before the jump says nothing
				 * about the counter after it: no cut from it */
				d->epoch_from = 0;
			}
			flags |= f0 | f1;
		}
	}
	return flags | th_disc_observe_offsets(d, s);
}

/* The better of a held offset known only to within more than the limit
 * (never served: th_disc_offsets_wide) and a narrower bracket: once the
 * bracket is within the limit, its upper end, at or above the kernel's
 * offset, so that values the kernel served meanwhile are not undercut. */
static void replace_wide(int64_t *off, int64_t *hw, int64_t s_off, int64_t s_hw, int64_t max)
{
	*off = s_hw <= max ? s_off + s_hw : s_off;
	*hw = s_hw;
}

int th_disc_observe_offsets(struct th_disc *d, const struct th_sample *s)
{
	int flags = 0;
	if (!d->have_offsets) {
		d->have_offsets = 1;
		d->off_real = s->off_real;
		d->off_real_hw = s->off_real_hw;
		d->off_boot = s->off_boot;
		d->off_boot_hw = s->off_boot_hw;
		d->off_tai = s->off_real + (s->tai_ok ? s->tai_sec : 0) * 1000000000LL;
		d->tai_sec = s->tai_ok ? s->tai_sec : 0;
		return flags;
	}
	/* Offsets are held constant unless the new bracket excludes the held
	 * value (the kernel changed it): measurement noise must never move
	 * REALTIME backwards. A much tighter bracket may move a held value
	 * forwards, never backwards. */
	const int64_t max = d->cfg.max_offset_err_ns;
	int64_t dr = s->off_real - d->off_real;
	int64_t tol = s->off_real_hw + d->off_real_hw + 2;
	if (dr > tol || dr < -tol) {
		d->off_real = s->off_real;
		d->off_real_hw = s->off_real_hw;
		d->epoch++;
		d->epoch_from = s->counter_ok ? s->c_off : 0;
		flags |= TH_OBS_STEP;
	} else if (d->off_real_hw > max && s->off_real_hw < d->off_real_hw) {
		replace_wide(&d->off_real, &d->off_real_hw, s->off_real, s->off_real_hw, max);
	} else if (dr > 0 && s->off_real_hw * 2 < d->off_real_hw) {
		d->off_real = s->off_real;
		d->off_real_hw = s->off_real_hw;
	}
	int64_t db = s->off_boot - d->off_boot;
	if (db > s->off_boot_hw + d->off_boot_hw + 2) { /* BOOTTIME only ever moves forward (resume) */
		d->off_boot = s->off_boot;
		d->off_boot_hw = s->off_boot_hw;
		flags |= TH_OBS_OFFSETS;
	} else if (d->off_boot_hw > max && s->off_boot_hw < d->off_boot_hw) {
		replace_wide(&d->off_boot, &d->off_boot_hw, s->off_boot, s->off_boot_hw, max);
		flags |= TH_OBS_OFFSETS;
	} else if (db > 0 && s->off_boot_hw * 2 < d->off_boot_hw) {
		d->off_boot = s->off_boot;
		d->off_boot_hw = s->off_boot_hw;
	}
	if (s->tai_ok)
		d->tai_sec = s->tai_sec;
	int64_t off_tai = d->off_real + d->tai_sec * 1000000000LL;
	if (off_tai != d->off_tai) {
		d->off_tai = off_tai;
		flags |= TH_OBS_OFFSETS;
	}
	return flags;
}

int th_disc_step_to(struct th_disc *d, int64_t off_real, uint64_t from)
{
	if (d->have_offsets && off_real == d->off_real)
		return 0;
	d->off_tai += off_real - d->off_real;
	d->off_real = off_real;
	d->off_real_hw = 0;
	d->epoch++;
	d->epoch_from = from;
	return 1;
}

void th_disc_hold_offsets(struct th_disc *d, const struct th_snap *s)
{
	d->off_real = s->off_real;
	d->off_boot = s->off_boot;
	d->off_tai = s->off_tai;
	d->tai_sec = (s->off_tai - s->off_real) / 1000000000LL;
	/* another writer's: served by it, so not wide here either */
	if (d->off_real_hw < 50 || d->off_real_hw > d->cfg.max_offset_err_ns)
		d->off_real_hw = 50;
	if (d->off_boot_hw < 50 || d->off_boot_hw > d->cfg.max_offset_err_ns)
		d->off_boot_hw = 50;
	d->have_offsets = 1;
}

int th_disc_offsets_wide(const struct th_disc *d)
{
	return d->have_offsets &&
	       (d->off_real_hw > d->cfg.max_offset_err_ns || d->off_boot_hw > d->cfg.max_offset_err_ns);
}

void th_disc_continue(struct th_disc *d, const struct th_snap *s)
{
	if (s->kind == TH_REC_EMPTY)
		return;
	d->epoch = s->epoch;
	d->epoch_from = 0; /* the other writer's records of it were cut by it */
	th_disc_hold_offsets(d, s);
}

int th_disc_ready(const struct th_disc *d)
{
	return d->line[TH_MONO].have && d->line[TH_RAW].have;
}

uint64_t th_disc_window_ns(const struct th_disc *d)
{
	double unc = d->line[TH_MONO].unc;
	if (d->line[TH_RAW].unc > unc)
		unc = d->line[TH_RAW].unc;
	double w = unc > 0 ? d->cfg.budget_ns / (1.5 * unc) : (double)d->cfg.max_window_ns;
	if (w > (double)d->cfg.max_window_ns)
		w = (double)d->cfg.max_window_ns;
	if (w > (double)TH_MAX_WINDOW_NS)
		w = (double)TH_MAX_WINDOW_NS;
	if (w < (double)d->cfg.min_window_ns)
		w = (double)d->cfg.min_window_ns;
	return (uint64_t)w;
}

static int64_t q32(double rate)
{
	return (int64_t)llround(rate * Q32);
}

/* Slope that removes `err_ns` (line minus kernel) over a horizon, bounded. */
static double steer(const struct th_disc *d, double rate, double err_ns, double window_ns)
{
	double horizon = 2.0 * window_ns;
	if (horizon < 2e6)
		horizon = 2e6;
	double slew = -err_ns / horizon;
	if (slew > d->cfg.max_slew)
		slew = d->cfg.max_slew;
	if (slew < -d->cfg.max_slew)
		slew = -d->cfg.max_slew;
	return rate * (1.0 + slew);
}

/* How far line l may drift from the kernel while this record can be used:
 * 1 us, the residual error, and what the rate's uncertainty plus a kernel
 * frequency change of up to DRIFT_ALLOWANCE can add over `span_ns`. */
static uint32_t err_bound(const struct th_disc *d, int l, double err_ns, double span_ns)
{
	double b = 1000.0 + fabs(err_ns) + (d->line[l].unc + DRIFT_ALLOWANCE) * span_ns;
	if (b > 1e6)
		b = 1e6;
	return (uint32_t)b;
}

static void common_fields(struct th_disc *d, const struct th_sample *s, struct th_snap *out)
{
	out->epoch = d->epoch;
	out->from = d->epoch_from;
	out->off_real = d->off_real;
	out->off_boot = d->off_boot;
	out->off_tai = d->off_tai;
	out->tick = s->tick;
}

static void window_fields(struct th_disc *d, struct th_snap *out, double *wns)
{
	uint64_t w = th_disc_window_ns(d);
	double wc = (double)w / d->line[TH_MONO].rate;
	if (wc < 2)
		wc = 2;
	out->dhi = (int64_t)wc;
	out->ddue = out->dhi / 2;
	d->window_ns = w;
	*wns = (double)w;
}

void th_plan_next(struct th_disc *d, const struct th_snap *cur, const struct th_sample *s,
		  struct th_snap *out)
{
	memset(out, 0, sizeof *out);
	out->kind = TH_REC_LINE;
	common_fields(d, s, out);
	int64_t e = cur->dhi;
	uint64_t anchor = cur->anchor + (uint64_t)e;
	out->anchor = anchor;
	double wns;
	window_fields(d, out, &wns);

	for (int l = 0; l < TH_NLINES; l++) {
		struct th_line_disc *L = &d->line[l];
		uint64_t ns;
		uint32_t frac;
		th_line_at(cur->ns[l], cur->frac[l], cur->hi[l], e, &ns, &frac);
		out->ns[l] = ns;
		out->frac[l] = frac;
		out->lo[l] = cur->hi[l];
		uint64_t cl = l == TH_MONO ? s->c : s->c_raw;
		int64_t kl = l == TH_MONO ? s->mono : s->raw;
		/* line minus predicted kernel at the new anchor, in ns */
		double lead = (double)(int64_t)(anchor - cl) * L->rate;
		double err = (double)(int64_t)(ns - (uint64_t)kl) + (double)frac / Q32 - lead;
		out->hi[l] = q32(steer(d, L->rate, err, wns));
		out->bound[l] = err_bound(d, l, err, (lead > 0 ? lead : 0) + wns);
	}

	int64_t tol = (int64_t)((double)d->cfg.tol_ns / d->line[TH_MONO].rate);
	int64_t dlo = (int64_t)(s->c - anchor) - tol;
	if (dlo < -e) /* the copied slope is only right above the old anchor */
		dlo = -e;
	out->dlo = dlo;
	out->dmin = dlo;

	int64_t dc = (int64_t)(s->c - cur->anchor);
	if (dc < cur->dlo)
		dc = cur->dlo;
	if (dc > cur->dhi)
		dc = cur->dhi;
	out->coarse = th_line_eval(cur, TH_MONO, dc);
}

void th_plan_refresh(struct th_disc *d, const struct th_snap *cur, const struct th_sample *s,
		     struct th_snap *out)
{
	th_snap_to_val(cur, out);
	out->kseq = 0; /* the discipline's line: not the kernel's */
	common_fields(d, s, out);
	int64_t dc = (int64_t)(s->c - cur->anchor);
	if (dc < cur->dlo)
		dc = cur->dlo;
	if (dc > cur->dhi)
		dc = cur->dhi;
	out->coarse = th_line_eval(cur, TH_MONO, dc);
}

void th_plan_fresh(struct th_disc *d, const struct th_sample *s, const uint64_t guard[TH_NLINES],
		   struct th_snap *out)
{
	memset(out, 0, sizeof *out);
	out->kind = TH_REC_LINE;
	common_fields(d, s, out);
	out->anchor = s->c;
	double wns;
	window_fields(d, out, &wns);
	for (int l = 0; l < TH_NLINES; l++) {
		struct th_line_disc *L = &d->line[l];
		uint64_t cl = l == TH_MONO ? s->c : s->c_raw;
		int64_t kl = l == TH_MONO ? s->mono : s->raw;
		double lead = (double)(int64_t)(s->c - cl) * L->rate;
		uint64_t v = (uint64_t)(kl + (int64_t)llround(lead));
		if (guard && v < guard[l])
			v = guard[l];
		out->ns[l] = v;
		out->frac[l] = 0;
		out->lo[l] = 0; /* counters just below the anchor clamp to it */
		double err = (double)(int64_t)(v - (uint64_t)kl) - lead;
		out->hi[l] = q32(steer(d, L->rate, err, wns));
		out->bound[l] = err_bound(d, l, err, wns);
	}
	int64_t tol = (int64_t)((double)d->cfg.tol_ns / d->line[TH_MONO].rate);
	out->dlo = -tol;
	out->dmin = -tol;
	out->coarse = out->ns[TH_MONO];
}

/*
 * The kernel-mode records after a line serve phi(k) = max(k, min(C, k +
 * bound)) (record.h), which stays above everything the line returned only
 * while the line ran at most `bound` ahead of the kernel. A kernel rate change
 * the line has not followed yet (an ADJ_TICK slew: 1 % is 10 us per ms) can
 * carry it further before a windup sees it. So the line's lead at a sample
 * whose counter lies in the line's window (where readers were served the
 * line) raises the bound of the copy `cur` that the next records are planned
 * from. The lead at the kernel's reading is at most the line at the
 * sandwich's far end minus that reading; TH_LEAD_SLACK_NS covers what it
 * gains until the commit. A counter past the window says nothing of what
 * readers were served (a discontinuity, or readers already on phi): the
 * bound stays as it was.
 */
#define TH_LEAD_SLACK_NS 200

void th_disc_cover_lead(struct th_snap *cur, const struct th_sample *s)
{
	if (!cur || cur->kind != TH_REC_LINE || !s->counter_ok)
		return;
	for (int l = 0; l < TH_NLINES; l++) {
		uint64_t c = l == TH_MONO ? s->c : s->c_raw;
		uint64_t w = l == TH_MONO ? s->width : s->width_raw;
		int64_t k = l == TH_MONO ? s->mono : s->raw;
		int64_t dc = (int64_t)(c - cur->anchor) + (int64_t)(w / 2 + 1);
		if (dc < cur->dlo || dc > cur->dhi)
			continue;
		int64_t lead = (int64_t)(th_line_eval(cur, l, dc) - (uint64_t)k) + TH_LEAD_SLACK_NS;
		if (lead > (int64_t)cur->bound[l])
			cur->bound[l] = lead > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)lead;
	}
}

void th_plan_kernel(struct th_disc *d, const struct th_snap *prev, const struct th_sample *s,
		    uint64_t due_in_ns, uint64_t guard_ns, struct th_snap *out)
{
	memset(out, 0, sizeof *out);
	out->kind = guard_ns ? TH_REC_TRANSIT : TH_REC_KERNEL;
	common_fields(d, s, out);
	if (th_disc_offsets_wide(d))
		out->flags = TH_RECF_KERNEL_OFFSETS;
	int have = prev && prev->kind != TH_REC_EMPTY;
	for (int l = 0; l < TH_NLINES; l++) {
		/* C and bound carry forward, so that phi never decreases */
		out->ceil[l] = have ? th_snap_ceiling(prev, l) : 0;
		out->bound[l] = have ? prev->bound[l] : 1000;
		if (guard_ns) {
			uint64_t k = (uint64_t)(l == TH_MONO ? s->mono : s->raw);
			out->guard[l] = th_phi(k, out->ceil[l], out->bound[l]) + guard_ns;
		}
	}
	out->coarse = have ? prev->coarse : 0;
	out->due_ns = (uint64_t)s->mono + due_in_ns;
	/* empty fast window: every read goes through the kernel path */
	out->dlo = 0;
	out->ddue = 0;
	out->dhi = -1;
	out->dmin = 0;
}
