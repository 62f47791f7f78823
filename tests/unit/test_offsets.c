/*
 * The held REALTIME and BOOTTIME offsets fed by hand. A held offset never
 * moves back (REALTIME would step back), so one measured with a wide bracket
 * (every retry of the sample preempted) must not be served: the discipline
 * reports it as wide until a narrow bracket replaces it, by the bracket's
 * upper end, at or above the kernel's offset (what the kernel served
 * meanwhile is not undercut). Kernel-mode records planned meanwhile carry
 * TH_RECF_KERNEL_OFFSETS.
 *
 * Then the sampler's brackets (th_sample_offsets) against a virtual kernel
 * whose every read takes 600 ns: REALTIME's offset from the kernel's data
 * page is taken exactly (half width 0); BOOTTIME's, on a machine that never
 * slept, is a bracket that holds 0 and so exactly 0; after a suspend it is a
 * bracket (wide here), never 0.
 */
#define _GNU_SOURCE
#include <string.h>

#include "attach/sample.h"
#include "check.h"
#include "core/discipline.h"

#define MS 1000000LL
#define S 1000000000LL

static struct th_disc d;
static const int64_t REAL = 1700000000LL * S + 123456789; /* the kernel's REALTIME - MONOTONIC */
static const int64_t BOOT = 42 * S + 777;                  /* BOOTTIME - MONOTONIC */

/* A sample whose brackets have half width hw and whose midpoints are off
 * the kernel's offsets by err. */
static int offsets(int64_t real, int64_t err, int64_t hw)
{
	struct th_sample s;
	memset(&s, 0, sizeof s);
	s.mono = s.raw = 5000 * MS;
	s.off_real = real + err;
	s.off_real_hw = hw;
	s.off_boot = BOOT + err;
	s.off_boot_hw = hw;
	return th_disc_observe_offsets(&d, &s);
}

static void setup(void)
{
	struct th_disc_config cfg;
	th_disc_config_default(&cfg, 4 * MS);
	th_disc_init(&d, &cfg);
}

static int planned_flags(void)
{
	struct th_sample s;
	struct th_snap v;
	memset(&s, 0, sizeof s);
	s.mono = s.raw = 5000 * MS;
	th_plan_kernel(&d, NULL, &s, MS, 0, &v);
	return (int)v.flags;
}

/* A virtual kernel for the sampler: every read takes 600 ns. */
static struct {
	int64_t now, off_real, off_boot;
	int page;    /* the data page gives the REALTIME offset */
	int updating; /* ... after that many tries that found it mid-update */
} K;

static int64_t k_read(void *ctx, clockid_t id)
{
	(void)ctx;
	K.now += 300; /* the clock is read halfway through the call */
	int64_t v = K.now + (id == CLOCK_REALTIME ? K.off_real : id == CLOCK_BOOTTIME ? K.off_boot : 0);
	K.now += 300;
	return v;
}

static uint64_t k_ctr(void *ctx)
{
	(void)ctx;
	return (uint64_t)K.now;
}

static int k_page(void *ctx, int64_t *off)
{
	(void)ctx;
	if (!K.page)
		return 0;
	if (K.updating > 0) {
		K.updating--;
		return 0;
	}
	*off = K.off_real;
	return 1;
}

static void sampler(void)
{
	struct th_sampler sp = {k_read, k_ctr, NULL, ~(uint64_t)0, 400.0, k_page};
	struct th_sample s;
	/* never slept, with the page: both exact */
	K.now = 5000 * S;
	K.off_real = REAL;
	K.off_boot = 0;
	K.page = 1;
	memset(&s, 0, sizeof s);
	th_sample_offsets(&sp, &s);
	CHECK(s.off_real == REAL && s.off_real_hw == 0, "REALTIME from the page: %lld, half width %lld",
	      (long long)(s.off_real - REAL), (long long)s.off_real_hw);
	CHECK(s.off_boot == 0 && s.off_boot_hw == 0, "BOOTTIME of a machine that never slept: %lld, half width %lld",
	      (long long)s.off_boot, (long long)s.off_boot_hw);
	/* the page found mid-update at the first tries: still exact (a
	 * bracket's error would look like a step to readers that compare the
	 * kernel's offset with a record's) */
	K.updating = 3;
	memset(&s, 0, sizeof s);
	th_sample_offsets(&sp, &s);
	CHECK(s.off_real == REAL && s.off_real_hw == 0, "REALTIME from a page updating at first: %lld, half width %lld",
	      (long long)(s.off_real - REAL), (long long)s.off_real_hw);
	K.updating = 0;
	/* no page: REALTIME bracketed (and wide: 600 ns reads) */
	K.page = 0;
	memset(&s, 0, sizeof s);
	th_sample_offsets(&sp, &s);
	CHECK(s.off_real_hw > 500 && s.off_real - s.off_real_hw <= REAL && REAL <= s.off_real + s.off_real_hw,
	      "REALTIME without the page: %lld +- %lld", (long long)(s.off_real - REAL), (long long)s.off_real_hw);
	/* after a suspend of 3 ms: BOOTTIME bracketed, never taken as 0 */
	K.page = 1;
	K.off_boot = 3 * MS;
	memset(&s, 0, sizeof s);
	th_sample_offsets(&sp, &s);
	CHECK(s.off_boot_hw > 0 && s.off_boot - s.off_boot_hw <= K.off_boot && K.off_boot <= s.off_boot + s.off_boot_hw,
	      "BOOTTIME after a suspend: %lld +- %lld", (long long)(s.off_boot - K.off_boot), (long long)s.off_boot_hw);
	/* and the discipline: never wide with both exact */
	setup();
	K.off_boot = 0;
	memset(&s, 0, sizeof s);
	th_sample_offsets(&sp, &s);
	th_disc_observe_offsets(&d, &s);
	CHECK(!th_disc_offsets_wide(&d), "exact offsets are not wide, whatever the kernel's reads cost");
}

int main(void)
{
	/* 1. A narrow first bracket: held as measured, not wide, records
	 * unflagged. */
	setup();
	offsets(REAL, 15, 30);
	CHECK(!th_disc_offsets_wide(&d), "a 30 ns bracket is not wide");
	CHECK(d.off_real == REAL + 15, "held at the midpoint (%lld)", (long long)(d.off_real - REAL));
	CHECK(planned_flags() == 0, "no flag while narrow (%d)", planned_flags());

	/* 2. A wide first bracket (2 ms, its midpoint 1.8 us high): wide, and
	 * flagged; a narrow bracket later replaces it (even downwards: the
	 * wide value was never served) by its upper end, and no step. */
	setup();
	offsets(REAL, 1800, 2 * MS);
	CHECK(th_disc_offsets_wide(&d), "a 2 ms bracket is wide");
	CHECK(planned_flags() & TH_RECF_KERNEL_OFFSETS, "kernel records flagged while wide");
	uint16_t ep = d.epoch;
	int f = offsets(REAL, -10, 40);
	CHECK(!th_disc_offsets_wide(&d), "replaced by a 40 ns bracket");
	CHECK(!(f & TH_OBS_STEP) && d.epoch == ep, "no step (flags %d)", f);
	CHECK(d.off_real == REAL - 10 + 40, "the upper end of the narrow bracket (%lld)", (long long)(d.off_real - REAL));
	CHECK(d.off_real >= REAL, "at or above the kernel's offset");
	CHECK(d.off_boot == BOOT - 10 + 40, "BOOTTIME likewise (%lld)", (long long)(d.off_boot - BOOT));
	CHECK(planned_flags() == 0, "no flag once narrow");
	/* and then held: a later, narrower bracket below does not move it back */
	offsets(REAL, -20, 10);
	CHECK(d.off_real == REAL + 30, "held (%lld)", (long long)(d.off_real - REAL));

	/* 3. Wide, then a narrower but still wide bracket: taken (nothing was
	 * served from it), still wide. */
	setup();
	offsets(REAL, 900000, 2 * MS);
	offsets(REAL, 3000, 5000);
	CHECK(th_disc_offsets_wide(&d) && d.off_real == REAL + 3000, "narrower wide bracket taken (%lld)",
	      (long long)(d.off_real - REAL));
	offsets(REAL, 0, 9000);
	CHECK(d.off_real == REAL + 3000, "a wider one is not (%lld)", (long long)(d.off_real - REAL));

	/* 4. A step found by a wide bracket: a new epoch, wide; then narrow. */
	setup();
	offsets(REAL, 0, 20);
	ep = d.epoch;
	f = offsets(REAL + 3600 * S, 700, MS);
	CHECK((f & TH_OBS_STEP) && d.epoch == (uint16_t)(ep + 1), "the step is seen (flags %d)", f);
	CHECK(th_disc_offsets_wide(&d), "wide after a step measured with a 1 ms bracket");
	f = offsets(REAL + 3600 * S, 5, 25);
	CHECK(!(f & TH_OBS_STEP) && !th_disc_offsets_wide(&d) && d.off_real == REAL + 3600 * S + 30,
	      "narrow again, same epoch (flags %d, off %lld)", f, (long long)(d.off_real - REAL - 3600 * S));

	/* 5. A wide BOOTTIME bracket alone makes the offsets wide too. */
	setup();
	offsets(REAL, 0, 20);
	struct th_sample s;
	memset(&s, 0, sizeof s);
	s.off_real = REAL;
	s.off_real_hw = 20;
	s.off_boot = BOOT + 3 * S; /* a resume, measured badly */
	s.off_boot_hw = MS;
	f = th_disc_observe_offsets(&d, &s);
	CHECK((f & TH_OBS_OFFSETS) && th_disc_offsets_wide(&d), "wide BOOTTIME (flags %d)", f);

	/* 6. Held from another writer's record (a page): not wide, whatever
	 * this writer measured before. */
	setup();
	offsets(REAL, 1800, 2 * MS);
	struct th_snap ps;
	memset(&ps, 0, sizeof ps);
	ps.off_real = REAL;
	ps.off_boot = BOOT;
	ps.off_tai = REAL + 37 * S;
	th_disc_hold_offsets(&d, &ps);
	CHECK(!th_disc_offsets_wide(&d) && d.off_real == REAL, "the page's offsets held, not wide");
	sampler();
	return check_done("test_offsets");
}
