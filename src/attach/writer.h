/*
 * The writer's transitions, shared by the in-process publisher (windup.c, shared.c) and
 * timehandsd: kernel-mode records and the installation of a fresh line
 * through a TRANSIT record (the argument is in writer.c).
 */
#ifndef TH_ATTACH_WRITER_H
#define TH_ATTACH_WRITER_H

#include <stdint.h>

#include "discipline.h"
#include "record.h"
#include "sample.h"

struct th_writer {
	struct th_timeline *tl;
	struct th_disc *disc;
	struct th_sampler *sp;
	uint64_t tick_ns;
	uint64_t kernel_records, installs; /* counters for status and logs */
	/* install attempts that failed: the kernel passed the guard before
	 * the TRANSIT record was seen (stalled or a slow machine), a sample
	 * too wide, the commit lost to an announcement */
	uint64_t inst_stalled, inst_wide, inst_raced;
};

/* The TRANSIT guard for the next attempt after one that the kernel outran
 * (the commit and the kernel reads after it took longer than the guard: a
 * slow machine, sanitizers, a loaded host, or a preemption): doubled, up to
 * twice the configured one (half of G1's microsecond). Used by every writer
 * that starts a line behind a TRANSIT record. */
static inline uint64_t th_guard_widen(const struct th_disc *d, uint64_t gns)
{
	return gns < 2 * d->cfg.guard_ns ? 2 * gns : gns;
}

/* The fields of a written record a later transition needs, as a snapshot. */
void th_val_to_snap(const struct th_snap *v, uint64_t cur, struct th_snap *out);

/* Publish a KERNEL (guard_ns 0) or TRANSIT record after `prev`; *out receives
 * it. Returns the new timeline word. */
uint64_t th_writer_kernel(struct th_writer *w, const struct th_snap *prev, const struct th_sample *s,
			  uint64_t due_in_ns, uint64_t guard_ns, struct th_snap *out);

/* Publish a kernel-mode record planned by th_plan_kernel from sample `s`
 * (its coarse value set here). Returns the new timeline word. */
uint64_t th_writer_commit_kernel(struct th_writer *w, const struct th_sample *s, struct th_snap *v);

/* Install a fresh line after `prev` (NULL: none). Returns 0 once the line is
 * committed, -1 if a KERNEL record was left in force (due again later). */
int th_writer_install(struct th_writer *w, const struct th_snap *prev);

/*
 * A record tied to a kernel count holds the kernel's offset of that count,
 * not of the counters before it: a step the kernel took back before that
 * count lies between them, and a reader of the daemon's page, which takes
 * its counter before it loads the page's word, may hold such a counter
 * with the record. The discipline's records therefore serve no counter
 * below kc, a counter read after the count they are tied to was read (the
 * cut at th_snap.from, raised to kc; 0: none read). Not where the
 * windup's observation `fl` found the counter jumped (kc may be of the
 * counter before the jump; the discipline then drops its cut).
 */
void th_writer_tie_from(struct th_disc *d, uint64_t kc, int fl);

/*
 * The tie of a page record (timehandsd's windup, and the simulation's
 * daemon), after the discipline observed its sample: the windup read the
 * kernel's page before the sample (kpage: th_hw_kpage_real's result, koff
 * its REALTIME offset; kc: a counter read after it, 0 if none) and tied
 * th_rec_tie to that count. Its records serve no counter below kc
 * (th_writer_tie_from). Where the offset the discipline now holds is not
 * koff (a step between the two reads, or an offset the sample could only
 * bracket), the kernel's offset is read again with its count and taken
 * exactly, a step into a new epoch where it differs from the held one
 * (*fl gets TH_OBS_STEP; `ctr`: the counter may be read), and th_rec_tie
 * and *ktie (the writer's last tie) become that count as TH_KSEQ_TIE, so that
 * readers see any later update of the kernel's (a step) at once; where the
 * page cannot be read again, th_rec_tie is an odd count (TH_REC_TIE_UNFINISHED), which
 * no finished update shows: every REALTIME or TAI reader of the record then
 * compares the kernel's offset of now with the record's.
 */
void th_writer_page_tie(struct th_disc *d, int kpage, int64_t koff, uint64_t kc, int ctr, int *fl, uint64_t *ktie);

/* Counter discontinuities (jumps) a writer saw, kernel MONOTONIC ns: three
 * within 60 s and the counter is not used until `until`, for 10 s the
 * first time and twice as long each time after, at most 600 s. */
struct th_distrust {
	uint64_t jumps[3];
	uint64_t until, ns;
};

/* Note a jump at `now`: 1 when it begins a period of distrust. */
int th_distrust_note(struct th_distrust *d, uint64_t now);

/* Nonzero while a period of distrust lasts at `now`. */
static inline int th_distrust_on(const struct th_distrust *d, uint64_t now)
{
	return d->until != 0 && now < d->until;
}

#endif
