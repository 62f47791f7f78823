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
	/* The least kernel time seen from a TRANSIT guard's kernel reading to
	 * the check after the commit (0: none yet): on a kernel whose reads
	 * are slow (a vDSO that makes the system call) they alone outrun the
	 * configured guard, and the guard is set past them (th_writer_install). */
	uint64_t min_cost;
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

/* The most a fresh line may start above the kernel's reading of its own
 * sample (its lead, which G1 and page readers' TH_PAGE_LAG_NS budget for):
 * what the widest guard allowed when the guard alone bounded it. */
static inline uint64_t th_max_lead(const struct th_disc *d)
{
	return 2 * d->cfg.guard_ns;
}

/* The guard of a first attempt: the configured one, or past the least time
 * the commit and the kernel reads around it have taken (min_cost). */
static inline uint64_t th_guard_first(const struct th_writer *w)
{
	uint64_t g = w->disc->cfg.guard_ns;
	return w->min_cost && g < w->min_cost + w->disc->cfg.guard_ns ? w->min_cost + w->disc->cfg.guard_ns : g;
}

/* After a TRANSIT record with guards `guard` (from the kernel readings in
 * g) was committed and the kernel read again (am, ar): 1 when the kernel is
 * past a guard (the writer was stalled, or the reads are slower than the
 * guard), with *gns widened for the next attempt; 0 when the guard held.
 * Either way the time the reads took is remembered (min_cost). */
int th_guard_outrun(struct th_writer *w, const struct th_sample *g, const uint64_t guard[TH_NLINES], int64_t am,
		    int64_t ar, uint64_t *gns);

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

/* Counter discontinuities (jumps) a writer saw, kernel MONOTONIC ns: three
 * within 60 s and the counter is not used until `until`, for 10 s the
 * first time and twice as long each time after, at most 600 s. */
struct th_distrust {
	uint64_t jumps[3];
	uint64_t until, ns;
};

/* Note a jump at `now`: 1 when it begins a period of distrust. */
int th_distrust_note(struct th_distrust *d, uint64_t now);

#endif
