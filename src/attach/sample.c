/* Windup sampling; see sample.h. */
#include "sample.h"

#include <string.h>

#include "record.h"

#define NS_PER_S 1000000000LL

static void sandwich(struct th_sampler *sp, clockid_t id, int ctr, uint64_t *c, uint64_t *width, int64_t *k)
{
	uint64_t best = ~(uint64_t)0;
	for (int i = 0; i < 3; i++) {
		uint64_t c0 = ctr ? sp->ctr(sp->ctx) : 0;
		int64_t v = sp->kread(sp->ctx, id);
		uint64_t c1 = ctr ? sp->ctr(sp->ctx) : 0;
		uint64_t w = c1 - c0;
		if (i == 0 || w < best) {
			best = w;
			*c = c0 + w / 2;
			*k = v;
		}
		/* A preempted or interrupted sandwich is taken again, at most
		 * twice: the narrowest one wins. */
		if (!ctr || w <= sp->min_width + sp->min_width / 2 + 1)
			break;
	}
	*width = best;
	if (ctr && best < sp->min_width)
		sp->min_width = best;
}

void th_quick_sample(struct th_sampler *sp, struct th_sample *s)
{
	memset(s, 0, sizeof *s);
	s->mono = sp->kread(sp->ctx, CLOCK_MONOTONIC);
	s->raw = sp->kread(sp->ctx, CLOCK_MONOTONIC_RAW);
	s->tick = (uint64_t)sp->kread(sp->ctx, CLOCK_MONOTONIC_COARSE);
}

void th_take_sample(struct th_sampler *sp, struct th_sample *s, int ctr, int full)
{
	memset(s, 0, sizeof *s);
	s->counter_ok = ctr;
	TH_STEP("sample");
	/* The kernel's tick first: a record's coarse value (the line at the
	 * sandwich) is then never older than the tick it is tagged with. */
	if (full)
		s->tick = (uint64_t)sp->kread(sp->ctx, CLOCK_MONOTONIC_COARSE);
	sandwich(sp, CLOCK_MONOTONIC, ctr, &s->c, &s->width, &s->mono);
	sandwich(sp, CLOCK_MONOTONIC_RAW, ctr, &s->c_raw, &s->width_raw, &s->raw);
	if (!full)
		return;
	th_sample_offsets(sp, s);
	/* TAI - REALTIME is a whole number of seconds in the kernel; bracket
	 * the TAI reading so that a preemption between the two reads cannot
	 * add seconds to it. */
	for (int i = 0; i < 4 && !s->tai_ok; i++) {
		int64_t r1 = sp->kread(sp->ctx, CLOCK_REALTIME);
		int64_t t = sp->kread(sp->ctx, CLOCK_TAI);
		int64_t r2 = sp->kread(sp->ctx, CLOCK_REALTIME);
		if (r2 - r1 >= 0 && r2 - r1 < NS_PER_S / 10) {
			int64_t d = t - r1 + NS_PER_S / 2;
			s->tai_sec = d >= 0 ? d / NS_PER_S : -((-d + NS_PER_S - 1) / NS_PER_S);
			s->tai_ok = 1;
		}
	}
	/* After every offset read: a step they show happened before it. */
	if (ctr)
		s->c_off = sp->ctr(sp->ctx);
}

int th_sample_offsets_again(struct th_sampler *sp, struct th_disc *d, int ctr)
{
	int fl = 0;
	for (int i = 0; i < 8 && th_disc_offsets_wide(d); i++) {
		struct th_sample o;
		memset(&o, 0, sizeof o);
		th_sample_offsets(sp, &o);
		o.counter_ok = ctr;
		if (ctr)
			o.c_off = sp->ctr(sp->ctx);
		fl |= th_disc_observe_offsets(d, &o);
	}
	return fl;
}

void th_sample_offsets(struct th_sampler *sp, struct th_sample *s)
{
	int64_t maxhw = (int64_t)sp->max_err_ns;
	/* The kernel keeps REALTIME and MONOTONIC a whole number of ns apart
	 * and publishes both at every update: that difference, read under
	 * its count, is the offset itself, with no bracket (a slow or
	 * preempted kernel read cannot widen it); then only BOOTTIME is
	 * bracketed. */
	int64_t exact;
	int have_exact = 0;
	/* A few tries: a bracket is what a page found mid-update (the kernel
	 * updating) would leave, and readers that compare the kernel's offset
	 * with a record's would take its error for a step (page_offset). */
	for (int k = 0; k < 4 && !have_exact && sp->koff_real; k++)
		have_exact = sp->koff_real(sp->ctx, &exact);
	if (have_exact) {
		s->off_real = exact;
		s->off_real_hw = 0;
	}
	for (int i = 0; i < 8; i++) {
		int64_t m1 = 0, r = 0;
		if (!have_exact) {
			m1 = sp->kread(sp->ctx, CLOCK_MONOTONIC);
			r = sp->kread(sp->ctx, CLOCK_REALTIME);
		}
		int64_t m2 = sp->kread(sp->ctx, CLOCK_MONOTONIC);
		int64_t b = sp->kread(sp->ctx, CLOCK_BOOTTIME);
		int64_t m3 = sp->kread(sp->ctx, CLOCK_MONOTONIC);
		int64_t hw_r = (m2 - m1) / 2 + 1, hw_b = (m3 - m2) / 2 + 1;
		if (!have_exact && (i == 0 || hw_r < s->off_real_hw)) {
			s->off_real = r - (m1 + m2) / 2;
			s->off_real_hw = hw_r;
		}
		if (i == 0 || hw_b < s->off_boot_hw) {
			s->off_boot = b - (m2 + m3) / 2;
			s->off_boot_hw = hw_b;
		}
		/* BOOTTIME - MONOTONIC is the time the machine slept: 0 until
		 * its first suspend, then at least the length of one
		 * (milliseconds). A bracket that holds 0 means 0, exactly: on
		 * machines that never slept (servers, virtual machines) no slow
		 * kernel read can widen it. (A time namespace whose BOOTTIME and
		 * MONOTONIC offsets differ by less than the bracket would be read
		 * as 0, within twice the bracket's half width.) */
		if (s->off_boot <= s->off_boot_hw && s->off_boot >= -s->off_boot_hw) {
			s->off_boot = 0;
			s->off_boot_hw = 0;
		}
		if (s->off_real_hw <= maxhw && s->off_boot_hw <= maxhw)
			break;
	}
}
