/*
 * The held REALTIME and BOOTTIME offsets fed by hand. A held offset never
 * moves back (REALTIME would step back), so one measured with a wide bracket
 * (every retry of the sample preempted) must not be served: the discipline
 * reports it as wide until a narrow bracket replaces it, by the bracket's
 * upper end, at or above the kernel's offset (what the kernel served
 * meanwhile is not undercut). Kernel-mode records planned meanwhile carry
 * TH_RECF_KERNEL_OFFSETS.
 */
#define _GNU_SOURCE
#include <string.h>

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
	return check_done("test_offsets");
}
