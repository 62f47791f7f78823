/* The in-process publisher's state (windup.c, shared.c, attach.c), apart
 * from what readers read (struct th_proc, proc.h). */
#ifndef TH_ATTACH_WSTATE_H
#define TH_ATTACH_WSTATE_H

#include <stdint.h>

#include "discipline.h"
#include "page_client.h"
#include "proc.h"
#include "sample.h"
#include "writer.h"

/* The writer's state, apart from what readers read (th_proc, proc.h): only
 * under th__P.lock, or at attach (attach.c). */
struct th_wstate {
	int counter_usable;    /* trust, possibly revoked while running */
	struct th_disc disc;
	struct th_sampler sp;  /* kernel/counter sampling (sample.h) */
	struct th_writer wr;   /* transitions of the local timeline (writer.h) */
	struct th_distrust dt; /* counter discontinuities (writer.h) */
	char reason[192];
	/* the largest MONOTONIC_COARSE of the kernel's updates whose coarse
	 * clocks kown_coarse let readers serve */
	uint64_t kown_coarse;
	/* The kernel's update count (TH_KSEQ_TIE) the windups' records are tied to
	 * (th_rec_tie): the last one read from its data page, kept while a
	 * read finds the kernel updating; 0 where the page is not read. */
	uint64_t ktie;
	/* the shared page */
	struct th_page_map page;     /* attached page, or zeroed */
	int page_wanted;             /* look for a daemon */
	int page_seen;               /* a page was attached once: look again after a restart */
	int page_dead;               /* the mapped page went stale (it stays mapped) */
	uint64_t page_next_try;      /* kernel MONOTONIC of the next attach attempt */
	uint64_t page_backoff;
	uint64_t page_retry_ns;      /* first backoff after a failed attempt (1 s) */
	char page_reason[192];       /* why not shared */
};
extern struct th_wstate th__W TH_HIDDEN;

#endif
