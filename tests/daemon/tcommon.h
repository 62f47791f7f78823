/*
 * Shared pieces of the daemon and page tests: checks, kernel clocks, a page
 * built by hand, and a reference reader of the shared page that follows the
 * rules page_client.h states for readers (no writes into the page; an expired
 * record with `cur` unchanged, or a TRANSIT value above its guard, means the
 * publisher is late: leave the page, rejoin only at a value not below what
 * was returned).
 */
#ifndef TH_TESTS_DAEMON_TCOMMON_H
#define TH_TESTS_DAEMON_TCOMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "counter.h"
#include "page.h"
#include "page_client.h"
#include "record.h"

static _Atomic int check_failures;

#define CHECK(cond, ...)                                                                          \
	do {                                                                                      \
		if (!(cond)) {                                                                    \
			if (atomic_fetch_add(&check_failures, 1) < 30) {                          \
				fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
				fprintf(stderr, __VA_ARGS__);                                     \
				fputc('\n', stderr);                                              \
			}                                                                         \
		}                                                                                 \
	} while (0)

static inline int check_done(const char *name)
{
	int n = atomic_load(&check_failures);
	if (n) {
		fprintf(stderr, "%s: %d check(s) failed\n", name, n);
		return 1;
	}
	printf("%s: ok\n", name);
	return 0;
}

static inline int64_t kns(clockid_t id)
{
	struct timespec t;
	clock_gettime(id, &t);
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static inline clockid_t line_clock(int line)
{
	return line == TH_RAW ? CLOCK_MONOTONIC_RAW : CLOCK_MONOTONIC;
}

/* ------------------------------------------------------------ hand-made pages */

/* A plausible page: identity of this machine, and a LINE record anchored at
 * the counter now with a 2 ms window, or a KERNEL record. */
static inline void make_page(void *page, int line_record, uint32_t pid)
{
	struct th_page_ident id;
	memset(&id, 0, sizeof id);
	id.counter_kind = TH_COUNTER_KIND;
	id.publisher_pid = pid;
	id.nominal_hz = 0;
	id.tick_ns = 4000000;
	th__page_read_boot_id(id.boot_id);
	th__page_read_timens(&id.timens_mono_ns, &id.timens_boot_ns);
	id.start_ns = (uint64_t)kns(CLOCK_MONOTONIC);
	id.clocksource = "test";
	th_page_init(page, &id);
	struct th_page_hdr *h = page;
	struct th_snap v;
	memset(&v, 0, sizeof v);
	uint64_t now = (uint64_t)kns(CLOCK_MONOTONIC);
	if (line_record) {
		v.kind = TH_REC_LINE;
		v.anchor = th_counter_ordered();
		for (int l = 0; l < TH_NLINES; l++) {
			v.ns[l] = l == TH_MONO ? now : (uint64_t)kns(CLOCK_MONOTONIC_RAW);
			v.lo[l] = v.hi[l] = (int64_t)1 << 31; /* 0.5 ns per count */
			v.bound[l] = 1000;
		}
		v.dmin = v.dlo = -1000;
		v.ddue = 2000000;
		v.dhi = 4000000;
		v.coarse = now;
	} else {
		v.kind = TH_REC_KERNEL;
		v.dlo = v.ddue = v.dmin = 0;
		v.dhi = -1;
		v.bound[0] = v.bound[1] = 1000;
		v.due_ns = now + 4000000;
		v.coarse = now;
	}
	th_commit_force(th_page_timeline(h), &v);
	th_page_beat(h, now);
	th_page_set_flags(h, TH_PAGE_VALID);
}

static inline void expect_here(struct th_page_expect *e)
{
	memset(e, 0, sizeof *e);
	e->now_mono_ns = (uint64_t)kns(CLOCK_MONOTONIC);
	th__page_read_boot_id(e->boot_id);
	e->counter_kind = TH_COUNTER_KIND;
	e->have_timens = th__page_read_timens(&e->timens_mono_ns, &e->timens_boot_ns) == 0;
}

/* ------------------------------------------------------------ reference reader */

enum { SRC_LINE = 1, SRC_KREC = 2, SRC_FALLBACK = 3 };

/*
 * Line l from the page: SRC_LINE or SRC_KREC with *v set (and the record in
 * *s), or -1 when the page cannot serve this read without an announcement
 * (publisher late). Loads only; every loop bounded.
 */
static inline int page_value(const struct th_timeline *tlc, int l, uint64_t *v, struct th_snap *s,
			     unsigned *retries)
{
	struct th_timeline *tl = (struct th_timeline *)tlc; /* th_snapshot only loads */
	for (int pass = 0; pass < 4; pass++) {
		if (th_snapshot(tl, s, retries) != 0)
			return -1;
		if (s->kind == TH_REC_LINE) {
			uint64_t c = th_counter_ordered();
			int64_t d = (int64_t)(c - s->anchor);
			if (d >= s->dmin && d <= s->dhi) {
				if (d < s->dlo)
					d = s->dlo;
				*v = th_line_eval(s, l, d);
				return SRC_LINE;
			}
			/* Expired (or the counter went back). The counter read
			 * happens before the re-load of cur (LFENCE / barrier):
			 * if cur has not moved, no record newer than this one
			 * was visible when the counter was already past it. */
			th_order_after_kernel_read();
			uint64_t now = atomic_load_explicit(&tl->cur, memory_order_acquire);
			if (TH_CUR_ID(now) != TH_CUR_ID(s->cur))
				continue;
			return -1;
		}
		struct timespec ts;
		clock_gettime(line_clock(l), &ts);
		uint64_t k = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		/* The kernel's counter read happens before the re-load of cur. */
		th_order_after_kernel_read();
		uint64_t val = th_phi(k, th_snap_ceiling(s, l), s->bound[l]);
		uint64_t now = atomic_load_explicit(&tl->cur, memory_order_acquire);
		if (TH_CUR_ID(now) != TH_CUR_ID(s->cur))
			continue; /* a record committed meanwhile may start below val */
		if (s->kind == TH_REC_TRANSIT && val > s->guard[l])
			return -1; /* would need an announcement */
		*v = val;
		return SRC_KREC;
	}
	return -1;
}

struct page_reader {
	const struct th_page_map *m;
	int shared[TH_NLINES];
	uint64_t last[TH_NLINES];
	uint64_t n_line, n_krec, n_fallback, n_left, n_rejoin, back_steps;
	unsigned retries;
};

/*
 * One read of line l as a process would serve it: from the page while this
 * reader trusts it, else from the kernel floored at the last value returned;
 * back to the page once its value is not below that. A page value below the
 * last one while trusting the page is a protocol failure (counted).
 */
static inline uint64_t reader_read(struct page_reader *r, int l, int *src, struct th_snap *s)
{
	uint64_t v = 0;
	int rc = page_value(r->m->tl, l, &v, s, &r->retries);
	if (rc > 0) {
		if (r->shared[l]) {
			if (v < r->last[l])
				r->back_steps++;
		} else if (v >= r->last[l]) {
			r->shared[l] = 1;
			r->n_rejoin++;
		} else {
			rc = -1;
		}
	} else if (r->shared[l]) {
		r->shared[l] = 0;
		r->n_left++;
	}
	if (rc < 0) {
		uint64_t k = (uint64_t)kns(line_clock(l));
		v = k > r->last[l] ? k : r->last[l];
		rc = SRC_FALLBACK;
		r->n_fallback++;
	} else if (rc == SRC_LINE) {
		r->n_line++;
	} else {
		r->n_krec++;
	}
	if (v > r->last[l])
		r->last[l] = v;
	*src = rc;
	return v;
}

#endif
