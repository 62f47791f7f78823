/*
 * A virtual timehandsd for the simulation: it publishes into the library's
 * page area with the same discipline, sampler and writer as the real daemon
 * (daemon/timehandsd.c windup), every tick of the virtual kernel, and can be
 * stalled at any protocol step (SIGSTOP) or killed; a new one either starts
 * a new page or continues the dead one's (th_page_adopt, as timehandsd does
 * with the page from systemd's descriptor store). The transport is replaced
 * by th_page_attach_at/th_page_check/th_page_detach below (the sim does not
 * link attach/page_client.c): attaching succeeds while the virtual daemon
 * publishes, and liveness is the real th_page_live on the virtual heartbeat.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "vdaemon.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "attach/proc.h"
#include "page.h"
#include "page_client.h"
#include "sample.h"
#include "writer.h"
#include "timehands.h"

static struct {
	int running;      /* has published and not been killed */
	struct th_disc disc;
	struct th_sampler sp;
	struct th_writer wr;
	uint64_t tick_ns;
	int64_t lag_ns; /* its fine clock readings lag the kernel's that much */
	uint64_t ktie; /* the kernel's count as TH_KSEQ_TIE its records are tied to (as timehandsd's) */
} V;

static int64_t vd_kread(void *ctx, clockid_t id)
{
	(void)ctx;
	struct timespec ts = {0, 0};
	th_sim_kread(id, &ts);
	int64_t lag = id == CLOCK_MONOTONIC_COARSE || id == CLOCK_REALTIME_COARSE ? 0 : V.lag_ns;
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec - lag;
}

/* REALTIME - MONOTONIC from the kernel's page where it has one, as
 * timehandsd's sampler reads it: the offsets its tied records carry are
 * the kernel's exactly */
static int vd_koff_real(void *ctx, int64_t *off)
{
	(void)ctx;
	int64_t o;
	uint32_t seq;
	if (th_hw_kpage_real(&o, &seq) <= 0)
		return 0;
	*off = o;
	return 1;
}

static uint64_t vd_ctr(void *ctx)
{
	(void)ctx;
	return th_sim_ctr(1);
}

static struct th_page_hdr *hdr(void)
{
	return (struct th_page_hdr *)(void *)th__page_area.bytes;
}

int vd_init(uint64_t tick_ns, double nominal_hz, int adopt, int64_t lag_ns)
{
	memset(&V, 0, sizeof V);
	V.tick_ns = tick_ns;
	V.lag_ns = lag_ns;
	struct th_page_ident id;
	memset(&id, 0, sizeof id);
	id.counter_kind = TH_COUNTER_TSC;
	id.publisher_pid = 4242;
	id.nominal_hz = (uint64_t)nominal_hz;
	id.tick_ns = tick_ns;
	id.clocksource = "sim";
	struct th_disc_config dc;
	th_disc_config_default(&dc, 2 * tick_ns); /* a record window of two ticks */
	if (nominal_hz > 0)
		dc.nominal_rate = 1e9 / nominal_hz;
	th_disc_init(&V.disc, &dc);
	char why[160];
	int rc = -1;
	if (adopt && (rc = th_page_adopt(hdr(), &id, why, sizeof why)) == 0) {
		/* as timehandsd's adopt_page: the ring goes on, the discipline
		 * starts from the current record's epoch and offsets */
		struct th_snap s;
		unsigned retries = 0;
		if (th_snapshot(th__page_tl(), &s, &retries) == 0)
			th_disc_continue(&V.disc, &s);
	} else {
		if (adopt)
			fprintf(stderr, "sim: page not adopted: %s\n", why);
		th_page_init(th__page_area.bytes, &id);
	}
	/* no kernel data page in the simulation: offsets in brackets */
	V.sp = (struct th_sampler){vd_kread, vd_ctr, NULL, ~(uint64_t)0, dc.max_sample_err_ns, vd_koff_real};
	V.wr = (struct th_writer){.tl = th__page_tl(), .disc = &V.disc, .sp = &V.sp, .tick_ns = tick_ns};
	return rc;
}

/* One tick of the daemon: its windup (see timehandsd.c). */
void vd_windup(void)
{
	struct th_timeline *tl = th__page_tl();
	struct th_snap s;
	unsigned retries = 0;
	uint64_t x = atomic_load_explicit(&tl->cur, memory_order_acquire);
	int have = th_snapshot(tl, &s, &retries) == 0;
	/* As timehandsd: the records tied to the kernel's count read before
	 * the sample (the last one read, or an odd one, while it cannot be). */
	int64_t koff = 0;
	uint32_t kcount;
	int kpage = th_hw_kpage_real(&koff, &kcount);
	uint64_t kc = kpage > 0 ? th_hw_ctr_ordered() : 0;
	if (kpage >= 0)
		V.ktie = kpage ? TH_KSEQ_TIE(kcount) : 0;
	else if (!V.ktie)
		V.ktie = TH_REC_TIE_UNFINISHED;
	th_rec_tie = V.ktie;
	struct th_sample smp;
	th_take_sample(&V.sp, &smp, 1, 1);
	int fl = th_disc_observe(&V.disc, &smp, have ? &s : NULL);
	/* As timehandsd: tied only while the offset held is the kernel's of
	 * the count exactly. */
	th_writer_page_tie(&V.disc, kpage, koff, kc, 1, &fl, &V.ktie);
	/* As timehandsd: offsets measured again while wide, and no
	 * publication (no heartbeat) while they stay wide. */
	fl |= th_sample_offsets_again(&V.sp, &V.disc, 1);
	if (th_disc_offsets_wide(&V.disc))
		return;
	struct th_snap v;
	if (!th_disc_ready(&V.disc)) {
		th_writer_kernel(&V.wr, have ? &s : NULL, &smp, V.disc.cfg.calib_ns, 0, &v);
	} else {
		int done = 0;
		if (have && s.kind == TH_REC_LINE && !(fl & TH_OBS_JUMP)) {
			int64_t d = (int64_t)(smp.c - s.anchor);
			if (d >= s.dmin && d <= s.dhi) {
				if (d >= 0 && !(fl & TH_OBS_BAD))
					th_plan_next(&V.disc, &s, &smp, &v);
				else
					th_plan_refresh(&V.disc, &s, &smp, &v);
				done = th_commit(tl, x, &v) == 0;
			}
		}
		if (!done) {
			if (fl & TH_OBS_BAD)
				th_writer_kernel(&V.wr, have ? &s : NULL, &smp, V.tick_ns / 4, 0, &v);
			else
				th_writer_install(&V.wr, have ? &s : NULL);
		}
	}
	th_page_beat(hdr(), (uint64_t)vd_kread(NULL, CLOCK_MONOTONIC));
	if (!V.running) {
		th_page_set_flags(hdr(), TH_PAGE_VALID | TH_PAGE_COUNTER_KERNEL | TH_PAGE_COUNTER_LINES);
		V.running = 1;
	}
}

void vd_kill(void)
{
	V.running = 0; /* the page stays as the dead daemon left it */
}

/* ------------------------------------------------------------ transport */

int th_page_attach_at(const char *path, int timeout_ms, void *at, struct th_page_map *out, char *reason,
		      size_t n)
{
	(void)path;
	(void)timeout_ms;
	memset(out, 0, sizeof *out);
	if (!V.running || at != (void *)th__page_area.bytes) {
		if (n)
			strncpy(reason, "no virtual daemon", n - 1);
		return -ENOENT;
	}
	out->hdr = hdr();
	out->tl = th__page_tl();
	out->size = TH_PAGE_SIZE;
	out->tick_ns = V.tick_ns;
	out->max_age_ns = th_page_max_age_ns(V.tick_ns);
	out->flags = atomic_load(&hdr()->flags);
	out->counter_kind = TH_COUNTER_TSC;
	out->fixed = 1;
	return 0;
}

int th_page_check(const struct th_page_map *m, uint64_t now_mono_ns, char *reason, size_t n)
{
	if (!m->hdr)
		return TH_PAGE_ESTALE;
	return th_page_live(m->hdr, now_mono_ns, m->max_age_ns, reason, n);
}

void th_page_detach(struct th_page_map *m)
{
	/* The real detach maps a zero page over the area; the simulated
	 * process keeps seeing the page (as a reader that still holds the
	 * old mapping would until it re-reads cur). */
	memset(m, 0, sizeof *m);
}
