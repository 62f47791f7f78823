/*
 * Windup planning: turns the writer's readings of the kernel's clocks into the
 * next record. Pure: the caller (attach/windup.c, the daemon, the simulation)
 * takes the sample and publishes the result.
 *
 * MONOTONIC is the disciplined line: its rate is estimated against the
 * kernel's MONOTONIC over a baseline of up to two seconds and the remaining
 * offset is steered away by changing the rate of the next segment (never by a
 * step). MONOTONIC_RAW is a second line disciplined the same way against the
 * kernel's raw clock. REALTIME, BOOTTIME and TAI are MONOTONIC plus offsets
 * measured at each windup and held constant unless the kernel changed them
 * (a step, a resume, a leap second).
 */
#ifndef TH_CORE_DISCIPLINE_H
#define TH_CORE_DISCIPLINE_H

#include <stdint.h>
#include "record.h"

/* One windup's reading of the kernel, taken by the caller. */
struct th_sample {
	int counter_ok;        /* c/c_raw/width are valid */
	uint64_t c;            /* counter at the MONOTONIC reading (sandwich midpoint) */
	uint64_t width;        /* sandwich width around it, counts */
	uint64_t c_raw;        /* counter at the MONOTONIC_RAW reading */
	uint64_t width_raw;
	int64_t mono, raw;     /* kernel readings, ns */
	int64_t off_real;      /* REALTIME - MONOTONIC, midpoint estimate */
	int64_t off_real_hw;   /* its half width */
	int64_t off_boot, off_boot_hw;
	int64_t tai_sec;       /* TAI - REALTIME, whole seconds */
	int tai_ok;            /* tai_sec was measured (else the held offset stays) */
	uint64_t tick;         /* kernel MONOTONIC_COARSE, ns */
	/* An ordered counter read after the offsets were read (a sample
	 * with the counter and the offsets; else 0): a step they show
	 * had happened by this counter. */
	uint64_t c_off;
};

struct th_line_disc {
	int have;          /* rate known */
	double rate;       /* kernel ns per count */
	double unc;        /* relative uncertainty of rate */
	uint64_t ref_c, mid_c, last_c;
	int64_t ref_k, mid_k, last_k;
	double ref_e, mid_e, last_e; /* sample errors, ns */
	int have_last;
	double err_ns;     /* line minus kernel at the last sample */
	/* After a discontinuity, a rate measured across it is not trusted
	 * until a second interval confirms it (or it matches the published
	 * frequency): two counter readings taken on CPUs whose counters
	 * disagree look like a rate that is wrong by any factor. */
	int confirm;       /* the next measured rate needs confirming */
	double cand_rate, cand_unc; /* the rate waiting for confirmation (0: none yet) */
};

struct th_disc_config {
	double nominal_rate;     /* ns per count from a published frequency, 0 if none */
	double nominal_unc;      /* its relative uncertainty against the kernel's rate */
	uint64_t max_window_ns;  /* windup cadence: local mode one tick, daemon its period */
	uint64_t min_window_ns;
	double budget_ns;        /* prediction error allowed across one window */
	uint64_t guard_ns;       /* lead of a fresh line over the kernel (TRANSIT guard) */
	uint64_t tol_ns;         /* counter below a record's base clamped rather than refused */
	double max_slew;         /* relative rate change allowed for steering */
	uint64_t calib_ns;       /* first samples at least this far apart when no frequency is published */
	uint64_t jump_ns;        /* deviation that is a discontinuity, not drift */
	double max_sample_err_ns; /* a wider counter/kernel sandwich is not used */
	int64_t max_offset_err_ns; /* offsets held with a wider bracket are not served (th_disc_offsets_wide) */
};

struct th_disc {
	struct th_disc_config cfg;
	struct th_line_disc line[TH_NLINES];
	int have_offsets;
	int64_t off_real, off_boot, off_tai;
	int64_t off_real_hw, off_boot_hw; /* uncertainty of the held offsets */
	int64_t tai_sec;          /* TAI - REALTIME, whole seconds */
	uint16_t epoch;          /* bumped when REALTIME was stepped */
	/* A counter at which the kernel had made the step into `epoch`
	 * (0: not known): no record of the epoch serves a counter below it
	 * (th_snap.from). */
	uint64_t epoch_from;
	uint64_t resyncs;        /* discontinuities seen */
	uint64_t window_ns;      /* window of the last planned line record */
};

/* Result flags of th_disc_observe. */
enum {
	TH_OBS_JUMP = 1,        /* counter and kernel disagree: re-anchor, relearn the rate */
	TH_OBS_STEP = 2,        /* REALTIME offset changed (epoch bumped) */
	TH_OBS_OFFSETS = 4,     /* BOOTTIME or TAI offset changed */
	TH_OBS_BAD = 8,         /* sandwich too wide: not used for the lines */
	TH_OBS_RATE = 16        /* the kernel's rate changed: baseline restarted */
};

void th_disc_init(struct th_disc *d, const struct th_disc_config *cfg);
void th_disc_config_default(struct th_disc_config *cfg, uint64_t tick_ns);

/* Feed one sample. `cur` is the record in force (NULL if none); used to
 * measure the line's error. Returns TH_OBS_* flags. */
int th_disc_observe(struct th_disc *d, const struct th_sample *s, const struct th_snap *cur);

/* Feed only the offsets of a sample (th_sample_offsets): for a publisher
 * measuring them again in the same windup (th_disc_offsets_wide).
 * Returns TH_OBS_STEP / TH_OBS_OFFSETS. */
int th_disc_observe_offsets(struct th_disc *d, const struct th_sample *s);

/*
 * 1 while the held REALTIME or BOOTTIME offset is known only to within more
 * than cfg.max_offset_err_ns: its first measurement, or the one that found a
 * step, was a bracket that every retry found wide (the writer preempted or
 * its kernel reads slow). MONOTONIC plus such an offset could be off by the
 * bracket's half width, and a held offset is never moved back (REALTIME
 * would step back), so it must not be served: the process publishes only
 * kernel-mode records flagged TH_RECF_KERNEL_OFFSETS (their readers read
 * those clocks from the kernel) and the daemon publishes nothing, until a
 * narrow bracket replaces it with its upper end (at or above the kernel's
 * offset, so that nothing read from the kernel meanwhile is undercut).
 */
int th_disc_offsets_wide(const struct th_disc *d);

/* Hold the REALTIME, BOOTTIME and TAI offsets of record `s` (another
 * writer's: a process leaving the daemon's page, a daemon continuing its
 * predecessor's page) as if measured to within 50 ns, so that they continue
 * without a step and a later sample moves them only when the kernel stepped
 * them (th_disc_observe). The REALTIME epoch is the caller's to set. */
void th_disc_hold_offsets(struct th_disc *d, const struct th_snap *s);

/* A new publisher continuing the timeline whose current record is `s` (a
 * restarted timehandsd on its predecessor's page): its REALTIME epoch and
 * held offsets, so that a step made while nobody published is seen as one
 * (a new epoch) and no offset moves without one. Nothing if `s` is empty. */
void th_disc_continue(struct th_disc *d, const struct th_snap *s);

/* REALTIME's offset read exactly (the kernel's data page) at an update of the
 * kernel's that changed it (a step): held with no uncertainty, TAI's moved
 * with it, a new epoch from counter `from` (read after the offset). 1 when
 * it differs from the held one. */
int th_disc_step_to(struct th_disc *d, int64_t off_real, uint64_t from);

/* 1 when the rate of both lines is known well enough to publish a line. */
int th_disc_ready(const struct th_disc *d);

/* On-time continuation of a LINE record: anchored at its expiry, same slope
 * below, steered slope above. */
void th_plan_next(struct th_disc *d, const struct th_snap *cur, const struct th_sample *s,
		  struct th_snap *out);

/* Same line as `cur` (the sample is before its anchor, where no rate change
 * can be added), with fresh coarse value, tick and offsets. */
void th_plan_refresh(struct th_disc *d, const struct th_snap *cur, const struct th_sample *s,
		     struct th_snap *out);

/* A line starting at the sample, at least at guard[] (values below the sample's
 * counter clamp to the anchor value). */
void th_plan_fresh(struct th_disc *d, const struct th_sample *s, const uint64_t guard[TH_NLINES],
		   struct th_snap *out);

/* Raise the bound of line record `cur` (a copy) to the line's lead over the
 * kernel measured at sample `s`, so that kernel-mode records planned from it
 * stay above what the line returned (discipline.c). */
void th_disc_cover_lead(struct th_snap *cur, const struct th_sample *s);

/* Kernel-mode record: C and bound carried from the previous record, a windup
 * due `due_in_ns` after the sample. guard_ns == 0: a plain KERNEL record;
 * otherwise a TRANSIT record whose guards are phi(sample) + guard_ns. */
void th_plan_kernel(struct th_disc *d, const struct th_snap *prev, const struct th_sample *s,
		    uint64_t due_in_ns, uint64_t guard_ns, struct th_snap *out);

/* Current window in counts for a line record (for the simulation and status). */
uint64_t th_disc_window_ns(const struct th_disc *d);

#endif
