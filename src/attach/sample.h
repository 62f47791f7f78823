/*
 * One windup's reading of the kernel's clocks against the counter, shared by
 * the in-process publisher (windup.c) and timehandsd. The kernel and counter
 * reads are the caller's (the simulation and the daemon's test seam supply
 * their own).
 */
#ifndef TH_ATTACH_SAMPLE_H
#define TH_ATTACH_SAMPLE_H

#include <stdint.h>
#include <time.h>

#include "discipline.h"

struct th_sampler {
	int64_t (*kread)(void *ctx, clockid_t id); /* kernel clock, ns */
	uint64_t (*ctr)(void *ctx);                /* ordered counter read */
	void *ctx;
	uint64_t min_width;    /* narrowest counter sandwich seen (start with ~0) */
	double max_err_ns;     /* brackets wider than this are taken again */
	/* REALTIME - MONOTONIC exactly, where the kernel publishes it (its
	 * data page's coarse bases: th_kdata_real_offset): 1 and *off, else 0;
	 * NULL where there is no such source */
	int (*koff_real)(void *ctx, int64_t *off);
};

/*
 * Counter sandwiches around MONOTONIC and MONOTONIC_RAW (the narrowest of up
 * to three each); with `full`, the kernel tick first, then REALTIME and
 * BOOTTIME bracketed by MONOTONIC readings (retaken while wider than
 * max_err_ns, at most 8 times) and TAI - REALTIME bracketed by REALTIME
 * readings (whole seconds, valid only when the bracket was narrow).
 */
void th_take_sample(struct th_sampler *sp, struct th_sample *s, int ctr, int full);

/* Only the REALTIME and BOOTTIME brackets of th_take_sample; REALTIME exact
 * (half width 0) where sp->koff_real gives it, BOOTTIME exactly 0 where its
 * bracket holds 0 (a machine that never slept). */
void th_sample_offsets(struct th_sampler *sp, struct th_sample *s);

/* A publisher whose page records carry no flags (timehandsd): the offsets
 * measured again, up to 8 times, while th_disc_offsets_wide. Returns the
 * TH_OBS_* flags of those observations. `ctr`: the counter may be read (a
 * step found is dated by it: th_sample.c_off). */
int th_sample_offsets_again(struct th_sampler *sp, struct th_disc *d, int ctr);

/* Just the kernel's values a TRANSIT guard needs. */
void th_quick_sample(struct th_sampler *sp, struct th_sample *s);

#endif
