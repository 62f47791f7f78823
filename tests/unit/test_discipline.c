/*
 * The windup discipline fed by hand: what it makes of the rate measured
 * after a counter discontinuity. Two counter readings taken on CPUs whose
 * counters disagree look like a rate that is wrong by any factor; the
 * discipline must not build a line on such a rate (it used to, and lines ran
 * at a twentieth of the kernel's rate for a whole window), yet must learn a
 * genuinely new frequency (another host) and keep a matching one at once.
 */
#define _GNU_SOURCE
#include <string.h>

#include "check.h"
#include "attach/writer.h"
#include "core/discipline.h"

#define US 1000LL
#define MS 1000000LL

static struct th_disc d;
static uint64_t ctr; /* the counter as the writer reads it (1 count = 1 ns nominal) */
static int64_t mono; /* the kernel's MONOTONIC */

static int sample(void)
{
	struct th_sample s;
	memset(&s, 0, sizeof s);
	s.counter_ok = 1;
	s.c = s.c_raw = ctr;
	s.width = s.width_raw = 20;
	s.mono = s.raw = mono;
	s.off_real = 1700000000LL * 1000000000LL;
	s.off_real_hw = 20;
	s.tick = (uint64_t)mono;
	return th_disc_observe(&d, &s, NULL);
}

/* Advance the kernel by dk ns and the counter by dk * ratio counts. */
static int step(int64_t dk, double ratio)
{
	mono += dk;
	ctr += (uint64_t)((double)dk * ratio);
	return sample();
}

static void setup(void)
{
	struct th_disc_config cfg;
	th_disc_config_default(&cfg, 4 * MS);
	cfg.nominal_rate = 1.0;
	th_disc_init(&d, &cfg);
	ctr = 1ULL << 40;
	mono = 5000 * MS;
	sample();
	for (int i = 0; i < 5; i++)
		step(4 * MS, 1.0);
}

/* The writers' rule for repeated counter jumps (th_distrust_note): the
 * third within 60 s distrusts the counter for 10 s, then 20 s, ... 600 s. */
static void distrust(void)
{
	const uint64_t S = 1000000000u;
	struct th_distrust dt;
	memset(&dt, 0, sizeof dt);
	uint64_t t = 1000 * S;
	CHECK(!th_distrust_note(&dt, t) && !th_distrust_note(&dt, t + 20 * S), "two jumps distrust nothing");
	CHECK(th_distrust_note(&dt, t + 40 * S) && dt.until == t + 50 * S, "the third within 60 s: 10 s (until %llu)",
	      (unsigned long long)dt.until);
	CHECK(!th_distrust_note(&dt, t + 100 * S) && !th_distrust_note(&dt, t + 170 * S) &&
		      !th_distrust_note(&dt, t + 240 * S),
	      "three jumps 70 s apart distrust nothing");
	CHECK(!th_distrust_note(&dt, t + 250 * S), "the third within 80 s distrusts nothing");
	CHECK(th_distrust_note(&dt, t + 255 * S) && dt.ns == 20 * S, "the next period doubles (%llu ns)",
	      (unsigned long long)dt.ns);
	for (int i = 0; i < 18; i++) { /* six more periods: 40, 80, 160, 320, 600, 600 s */
		uint64_t n = t + (uint64_t)(300 + 10 * i) * S;
		th_distrust_note(&dt, n);
	}
	CHECK(dt.ns == 600 * S, "at most 600 s (%llu ns)", (unsigned long long)dt.ns);
}

int main(void)
{
	distrust();

	/* 1. Steady: the published rate holds, no flags. */
	setup();
	CHECK(d.line[TH_MONO].have && d.line[TH_MONO].rate > 0.999 && d.line[TH_MONO].rate < 1.001, "rate %g",
	      d.line[TH_MONO].rate);

	/* 2. A jump (the counter moved 1 ms ahead), then readings alternating
	 * between CPUs 1.4 ms apart: the first interval after the jump looks
	 * like a rate of ~30 (the counter barely moved); the next, on the same
	 * CPU, a rate of 1 measured from a baseline on the other CPU. No line
	 * may be built on either; the disagreement is a discontinuity. */
	setup();
	ctr += 1 * MS;
	int f = step(4 * MS, 1.0);
	CHECK(f & TH_OBS_JUMP, "a 1 ms counter jump is flagged (flags %d)", f);
	CHECK(!d.line[TH_MONO].have, "no line right after a jump");
	uint64_t resyncs = d.resyncs;
	mono += 1450 * US;
	ctr += 1450 * US - 1400 * US; /* on the CPU 1.4 ms behind */
	f = sample();
	CHECK(!d.line[TH_MONO].have, "a rate of %g measured across CPUs is not used (flags %d)",
	      d.line[TH_MONO].rate, f);
	f = step(4 * MS, 1.0); /* still on the CPU behind */
	CHECK(!d.line[TH_MONO].have, "still no line (rate %g)", d.line[TH_MONO].rate);
	CHECK((f & TH_OBS_JUMP) && d.resyncs > resyncs, "disagreeing intervals are a discontinuity (flags %d)", f);
	/* Back on the first CPU: another disagreement, then readings that
	 * agree give a line again with the published rate. */
	mono += 4 * MS;
	ctr += 4 * MS + 1400 * US;
	sample();
	f = step(4 * MS, 1.0);
	CHECK(!d.line[TH_MONO].have && (f & TH_OBS_JUMP), "moving back is a discontinuity too (flags %d)", f);
	f = step(4 * MS, 1.0);
	CHECK(d.line[TH_MONO].have && !(f & TH_OBS_JUMP), "a line again once readings agree (flags %d)", f);

	/* 3. A jump followed by the published rate: used at the first interval. */
	setup();
	ctr += 3 * MS;
	step(4 * MS, 1.0);
	f = step(4 * MS, 1.0);
	CHECK(d.line[TH_MONO].have && !(f & TH_OBS_JUMP), "the published rate is taken back at once (flags %d)", f);

	/* 4. A jump to a host whose counter runs 2.5x faster: learned after a
	 * confirming interval, without further discontinuities. */
	setup();
	ctr += 7 * MS;
	step(4 * MS, 2.5);
	resyncs = d.resyncs;
	step(4 * MS, 2.5);
	CHECK(!d.line[TH_MONO].have, "an unpublished rate waits for confirmation");
	f = step(4 * MS, 2.5);
	CHECK(d.line[TH_MONO].have && d.resyncs == resyncs, "confirmed (flags %d, resyncs %llu)", f,
	      (unsigned long long)(d.resyncs - resyncs));
	CHECK(d.line[TH_MONO].rate > 0.3999 && d.line[TH_MONO].rate < 0.4001, "rate %g ns per count",
	      d.line[TH_MONO].rate);

	/* 5. A step read exactly from the kernel's page (a retie, windup.c):
	 * a new epoch, the offset held with no uncertainty, TAI's moved with
	 * it; the same offset again is no step, and the next sample, whose
	 * bracket holds it, finds none either. */
	setup();
	const int64_t off0 = d.off_real, tai0 = d.off_tai;
	const uint16_t ep0 = d.epoch;
	CHECK(th_disc_step_to(&d, off0, 1000) == 0 && d.epoch == ep0, "the held offset again is a step");
	CHECK(th_disc_step_to(&d, off0 - 100 * MS, 5000) == 1 && d.epoch_from == 5000, "a step of -100 ms not taken");
	CHECK(d.epoch == (uint16_t)(ep0 + 1) && d.off_real == off0 - 100 * MS && d.off_real_hw == 0 &&
		      d.off_tai == tai0 - 100 * MS,
	      "after a step: epoch %u (was %u), offset %lld ns moved, TAI's %lld, half width %lld", d.epoch, ep0,
	      (long long)(d.off_real - off0), (long long)(d.off_tai - tai0), (long long)d.off_real_hw);
	CHECK(th_disc_step_to(&d, off0 - 100 * MS, 6000) == 0 && d.epoch_from == 5000, "the stepped offset again is a step");
	struct th_sample o;
	memset(&o, 0, sizeof o);
	o.off_real = off0 - 100 * MS + 10;
	o.off_real_hw = 20;
	f = th_disc_observe_offsets(&d, &o);
	CHECK(!(f & TH_OBS_STEP) && d.epoch == (uint16_t)(ep0 + 1) && d.off_real == off0 - 100 * MS,
	      "a sample after the step moved the exact offset (flags %d, %lld ns)", f,
	      (long long)(d.off_real - (off0 - 100 * MS)));

	/* 6. A step's records serve no counter before it: a sample that finds
	 * a step dates it by the counter read after its offsets (c_off), the
	 * records planned in its epoch carry that counter (from), and a
	 * commit cuts the window there (th_snap_cut): below the anchor by
	 * raising dlo, above it by anchoring the same line there. */
	setup();
	{
		struct th_sample st;
		memset(&st, 0, sizeof st);
		st.counter_ok = 1;
		mono += 4 * MS;
		ctr += 4 * MS;
		st.c = st.c_raw = ctr;
		st.width = st.width_raw = 20;
		st.mono = st.raw = mono;
		st.off_real = 1700000000LL * 1000000000LL - 250 * MS;
		st.off_real_hw = 20;
		st.tick = (uint64_t)mono;
		st.c_off = ctr + 3000;
		f = th_disc_observe(&d, &st, NULL);
		CHECK((f & TH_OBS_STEP) && d.epoch_from == ctr + 3000, "a step dated at %llu, not at c_off %llu (flags %d)",
		      (unsigned long long)d.epoch_from, (unsigned long long)(ctr + 3000), f);
		struct th_snap fresh;
		th_plan_fresh(&d, &st, NULL, &fresh);
		CHECK(fresh.from == ctr + 3000 && fresh.epoch == d.epoch, "a record of the step's epoch from %llu",
		      (unsigned long long)fresh.from);
		struct th_snap cut;
		const struct th_snap *w = th_snap_cut(&fresh, &cut);
		CHECK(w != &fresh && w->anchor == ctr + 3000 && w->dlo == 0 && w->dmin == 0 &&
			      w->ddue == fresh.ddue - 3000 && w->dhi == fresh.dhi - 3000,
		      "a fresh line anchored before the step's counter: anchor +%lld, window [%lld, %lld) of %lld",
		      (long long)(w->anchor - fresh.anchor), (long long)w->dlo, (long long)w->ddue, (long long)w->dhi);
		for (int64_t c = 3000; c < fresh.dhi; c += 997)
			for (int l = 0; l < TH_NLINES; l++)
				CHECK(th_line_eval(w, l, c - 3000) == th_line_eval(&fresh, l, c),
				      "the re-anchored line differs at +%lld on line %d", (long long)c, l);
	}
	{
		struct th_snap v, cut;
		memset(&v, 0, sizeof v);
		v.kind = TH_REC_LINE;
		v.anchor = 1000000;
		v.dlo = v.dmin = -1000;
		v.ddue = 4000;
		v.dhi = 8000;
		v.ns[TH_MONO] = v.ns[TH_RAW] = 5000 * MS;
		v.hi[TH_MONO] = v.lo[TH_MONO] = v.hi[TH_RAW] = v.lo[TH_RAW] = (int64_t)1 << 32;
		v.from = 0;
		CHECK(th_snap_cut(&v, &cut) == &v, "a record with no step's counter cut");
		v.from = v.anchor - 2000;
		CHECK(th_snap_cut(&v, &cut) == &v, "a window above the step's counter cut");
		v.from = v.anchor - 500;
		const struct th_snap *w = th_snap_cut(&v, &cut);
		CHECK(w->anchor == v.anchor && w->dlo == -500 && w->dmin == -500 && w->ddue == 4000,
		      "below the anchor: window [%lld, %lld), dmin %lld", (long long)w->dlo, (long long)w->ddue,
		      (long long)w->dmin);
		for (int64_t past = 8000; past <= 9000; past += 1000) {
			v.from = v.anchor + (uint64_t)past;
			w = th_snap_cut(&v, &cut);
			CHECK(w != &v && w->kind == TH_REC_KERNEL && w->dhi < w->dmin && w->dlo == 0 && w->ddue == 0 &&
				      w->due_ns != 0 && w->due_ns <= 1,
			      "a window over by the step's counter (+%lld): kind %d, window [%lld, %lld] due at %llu",
			      (long long)past, w->kind, (long long)w->dmin, (long long)w->dhi,
			      (unsigned long long)w->due_ns);
			for (int l = 0; l < TH_NLINES; l++)
				CHECK(th_snap_ceiling(w, l) == th_snap_ceiling(&v, l),
				      "its ceiling on line %d moved: %llu, the line's end %llu", l,
				      (unsigned long long)th_snap_ceiling(w, l),
				      (unsigned long long)th_snap_ceiling(&v, l));
		}
		v.from = v.anchor + 500;
		v.kseq = TH_KSEQ_LINE(7u); /* the kernel's line */
		CHECK(th_snap_cut(&v, &cut) == &v, "a kernel's line cut");
		v.flags = TH_RECF_TIED;
		v.kseq = TH_KSEQ_TIE(7u);
		CHECK(th_snap_cut(&v, &cut) != &v, "a tied line of the discipline's not cut");
		/* th_commit writes the cut record */
		static struct th_timeline tl;
		memset(&tl, 0, sizeof tl);
		CHECK(th_commit(&tl, atomic_load(&tl.cur), &v) == 0, "commit");
		struct th_snap back = {0};
		unsigned retries = 0;
		CHECK(th_snapshot(&tl, &back, &retries) == 0 && back.anchor == v.from && back.dlo == 0 &&
			      back.ddue == 3500,
		      "the committed record: anchor +%lld, window [%lld, %lld)", (long long)(back.anchor - v.anchor),
		      (long long)back.dlo, (long long)back.ddue);
	}
	return check_done("test_discipline");
}
