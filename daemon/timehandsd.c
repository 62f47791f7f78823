/*
 * timehandsd: one publisher of time records for every process on the machine
 * (FreeBSD's shared-page timehands, in user space). See timehandsd(8).
 *
 * The page: a memfd of TH_PAGE_SIZE bytes (core/page.h), mode 0644, mapped
 * read-write here and sealed against shrinking and growing (a mapping of it
 * can never fault). Whoever connects to the Unix socket at the page path gets
 * a read-only descriptor of it (a reopen through /proc/self/fd): a reader can
 * neither write it nor map it writable, nor reopen it for writing (the mode),
 * unless it is the page's owner (root, when started as root) or root
 * (attach/page_client.c is the other end). Nothing is ever written to the
 * file system but the socket (and an optional pid file).
 *
 * Restart: under systemd (FileDescriptorStoreMax=) the writable descriptor
 * goes to the service manager's descriptor store (sd_notify FDSTORE=1), which
 * hands it to the next timehandsd of the service (LISTEN_FDS, name "page").
 * That one continues the same page (th_page_adopt): running programs, which
 * left the page when its heartbeat stopped, find it alive again and rejoin
 * without a system call, as they do after a SIGSTOP.
 *
 * The records: the same ring, records and publication protocol as local mode
 * (record.h), planned by the same discipline (discipline.h). One thread, one
 * loop: every tick (timerfd on MONOTONIC) it samples the kernel and publishes
 * a record — a continuation of the line when on time (th_plan_next, or
 * th_plan_refresh before the anchor), else the install path (KERNEL floor,
 * TRANSIT guard, fresh line) — then a heartbeat. A REALTIME step wakes it at
 * once (timerfd with TFD_TIMER_CANCEL_ON_SET); a resume shows as a jump of
 * BOOTTIME - MONOTONIC and a counter discontinuity.
 *
 * Readers cannot announce into the page (it is read-only for them), so the
 * daemon is the only writer of `cur` and its compare-and-swaps never fail;
 * a reader that finds a record expired treats the daemon as late
 * (page_client.h). To keep that rare, a continuation is only committed while
 * the current record has LATE_MARGIN_NS of validity left.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "counter.h"
#include "cross_cpu.h"
#include "discipline.h"
#include "kclock.h"
#include "kdata.h"
#include "page.h"
#include "sample.h"
#include "writer.h"
#include "page_client.h"
#include "record.h"
#include "timehands.h"
#include "trust.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

#define NS_PER_S 1000000000LL
#define MAX_ACCEPTS 64           /* clients served per wakeup, so ticks are never starved */
#define CROSS_CPU_ROUNDS 2000
#define LATE_MARGIN_NS 10000     /* a continuation needs this much validity left on the current record */

struct daemon {
	/* options */
	const char *page_path;
	const char *user;
	const char *pidfile;
	uint64_t tick_ns;
	int foreground;
	int counter_mode;
	int test_seam;
	int verbose;
	int skip_cross_cpu;
	int rt_priority;
	int window_ticks;

	/* resources */
	struct th_page_hdr *hdr;
	struct th_timeline *tl;
	int memfd, rofd, lfd, tick_fd, due_fd, rt_fd, sig_fd;
	int socket_bound;
	int stored_fd;            /* the page from the descriptor store (LISTEN_FDS), -1 if none */
	int adopted;              /* the page is the previous publisher's (th_page_adopt) */

	/* writer state */
	struct th_trust trust;
	struct th_cross_cpu xcpu;
	int lines;                /* publish counter lines (else kernel records) */
	int wide_logged;          /* "offsets not measured closely" was logged */
	int counter_usable;       /* lines, possibly suspended after repeated jumps */
	struct th_disc disc;
	struct th_sampler sp;     /* sampling shared with local mode (sample.h) */
	struct th_writer wr;      /* transitions shared with local mode (writer.h) */
	struct th_distrust dt;    /* counter discontinuities (writer.h) */
	int64_t realtime_bias;    /* test seam: added to REALTIME and TAI readings */
	int slow_offsets;         /* test seam: the sampler's REALTIME/BOOTTIME reads sleep first */
	int seam_brackets;        /* test seam: offsets from brackets only, not the kernel's page */
	uint64_t ktie;            /* the kernel's update count as TH_KSEQ_TIE the records are tied to, 0: none */
	uint32_t prev_tie;        /* the count the previous tick's windup tied to */
	uint64_t phase_at;        /* MONOTONIC when a tick last saw the kernel's update come (0: never) */
	int64_t last_off_boot;
	uint64_t grid0;           /* the ticks are grid0 + k * tick_ns (a periodic timer) */
	uint64_t due_armed;       /* one-shot wakeup before the next tick, 0 when none */
	uint64_t flags;

	/* statistics (kernel records and installs are in wr) */
	uint64_t windups, late, clients;
};

static struct daemon D;

/* ------------------------------------------------------------ logging */

static void logmsg(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logmsg(int prio, const char *fmt, ...)
{
	if (prio == LOG_DEBUG && !D.verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	if (D.foreground) {
		char line[512];
		vsnprintf(line, sizeof line, fmt, ap);
		fprintf(stderr, "timehandsd: %s\n", line);
	} else {
		vsyslog(prio, fmt, ap);
	}
	va_end(ap);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	logmsg(LOG_ERR, "%s", line);
	if (!D.foreground)
		fprintf(stderr, "timehandsd: %s\n", line);
	exit(1);
}

/* ------------------------------------------------------------ kernel clocks */

static inline int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * NS_PER_S + t->tv_nsec;
}

static int64_t kread_ns(clockid_t id)
{
	struct timespec ts = {0, 0};
	th_kclock_gettime(id, &ts);
	int64_t v = ts_ns(&ts);
	if (id == CLOCK_REALTIME || id == CLOCK_TAI)
		v += D.realtime_bias; /* 0 unless the test seam stepped it */
	return v;
}

/* ------------------------------------------------------------ sampling */

/* Sampling as in local mode (attach/sample.c), through this file's kernel
 * reads (which carry the test seam's REALTIME bias). */
static int64_t sampler_kread(void *ctx, clockid_t id)
{
	(void)ctx;
	if (D.slow_offsets && (id == CLOCK_REALTIME || id == CLOCK_BOOTTIME)) {
		/* test seam: as if preempted inside every offset bracket */
		struct timespec pause = {0, 200000};
		nanosleep(&pause, NULL);
	}
	return kread_ns(id);
}

static uint64_t sampler_ctr(void *ctx)
{
	(void)ctx;
	return th_counter_ordered();
}

/* REALTIME - MONOTONIC from the kernel's data page (plus the seam's bias) */
static int sampler_koff_real(void *ctx, int64_t *off)
{
	(void)ctx;
	if (D.seam_brackets || !th_kdata_real_offset(off))
		return 0;
	*off += D.realtime_bias;
	return 1;
}

static void take_sample(struct th_sample *s, int ctr, int full)
{
	th_take_sample(&D.sp, s, ctr, full);
}

/* ------------------------------------------------------------ publishing */

static uint64_t publish_kernel(const struct th_snap *prev, const struct th_sample *s, uint64_t due_in,
			       uint64_t guard_ns, struct th_snap *v)
{
	return th_writer_kernel(&D.wr, prev, s, due_in, guard_ns, v);
}

/* Install a fresh line (writer.c, whose comment gives the argument step by
 * step); in the page nobody can announce, so the commits cannot fail, and the
 * re-read of the kernel after TRANSIT is what keeps a stalled daemon from
 * starting the line below a value a reader of the older record returned. */
static int install_line(const struct th_snap *prev, int have_prev)
{
	return th_writer_install(&D.wr, have_prev ? prev : NULL);
}

static void note_jump(uint64_t now)
{
	if (th_distrust_note(&D.dt, now))
		logmsg(LOG_WARNING, "the counter diverged from the kernel 3 times within 60 s: kernel records for %llu s",
		       (unsigned long long)(D.dt.ns / NS_PER_S));
}

/* Sample, plan, publish. `noticed` is the kernel MONOTONIC at which a
 * REALTIME step was noticed (0: an ordinary tick). Returns 0 when nothing was
 * published (no heartbeat either: clients treat the page as late). */
static int windup(uint64_t noticed)
{
	struct th_snap s;
	unsigned retries = 0;
	/* Acquire: the sample below is taken after this load; th_commit
	 * compares against it (single writer: it cannot have changed). */
	uint64_t x = atomic_load_explicit(&D.tl->cur, memory_order_acquire);
	int have = th_snapshot(D.tl, &s, &retries) == 0;

	uint64_t now = (uint64_t)D.disc.line[TH_MONO].last_k;
	int ctr = D.counter_usable && (D.dt.until == 0 || now >= D.dt.until);
	if (ctr && D.dt.until) {
		D.dt.until = 0;
		logmsg(LOG_NOTICE, "counter trusted again");
	}

	/* The page's records are tied to the kernel's update count, as a
	 * process's own (th_rec_tie, windup.c): the count read before the
	 * sample, so that an update during the windup leaves the record
	 * already moved on from; a REALTIME or TAI reader of a record the
	 * kernel moved on from serves the kernel's offset of now until the
	 * next tick reties it (shared_value). A count that cannot be read now
	 * keeps the last one read (or, before any, an odd count no finished
	 * update shows). Untied while a test seam moves this daemon's REALTIME
	 * away from the kernel's. */
	int64_t koff = 0;
	uint32_t kcount;
	int kpage = D.realtime_bias || D.seam_brackets ? 0 : th_kdata_real_offset_seq(&koff, &kcount);
	/* the counter after the count's read, where the records begin */
	uint64_t kc = kpage > 0 && ctr ? th_counter_ordered() : 0;
	if (kpage >= 0)
		D.ktie = kpage ? TH_KSEQ_TIE(kcount) : 0;
	else if (!D.ktie)
		D.ktie = TH_REC_TIE_UNFINISHED;
	th_rec_tie = D.ktie;

	struct th_sample smp;
	take_sample(&smp, ctr, 1);
	int64_t old_off_real = D.disc.off_real;
	int fl = th_disc_observe(&D.disc, &smp, have ? &s : NULL);
	D.windups++;
	/* A tied record's readers take the kernel's offset for a step wherever
	 * it differs from the record's: tied only while the held offset is the
	 * kernel's exactly; one that is not the kernel's of the count read
	 * above (a step since, or a bracket's when the page could not be read
	 * at the sample) is replaced by the kernel's read again, with its
	 * count. */
	th_writer_page_tie(&D.disc, kpage, koff, kc, ctr, &fl, &D.ktie);
	if (have)
		th_disc_cover_lead(&s, &smp);
	/* Offsets known only to within a wide bracket (every retry of the
	 * sample preempted): measured again now, and if still wide, nothing
	 * is published this tick: a page record carries no flags, and its
	 * offsets would be served as they are (th_disc_offsets_wide). */
	fl |= th_sample_offsets_again(&D.sp, &D.disc, ctr);
	if (D.last_off_boot && smp.off_boot - D.last_off_boot > 1000000) {
		logmsg(LOG_NOTICE, "resume detected: BOOTTIME - MONOTONIC grew by %lld ms",
		       (long long)((smp.off_boot - D.last_off_boot) / 1000000));
	}
	D.last_off_boot = smp.off_boot;
	if (fl & TH_OBS_JUMP) {
		/* A statistic: nothing is ordered by it. */
		atomic_fetch_add_explicit(&D.hdr->resyncs, 1, memory_order_relaxed);
		logmsg(LOG_NOTICE, "counter discontinuity (jump, suspend or migration): line re-anchored");
		note_jump((uint64_t)smp.mono);
		if (D.dt.until)
			ctr = 0;
	}
	if (fl & TH_OBS_STEP) {
		/* Relaxed: published by the release increment below. */
		atomic_store_explicit(&D.hdr->last_step_ns, noticed ? noticed : (uint64_t)smp.mono,
				      memory_order_relaxed);
		/* Release: whoever acquires the new count sees the time above. */
		atomic_fetch_add_explicit(&D.hdr->steps, 1, memory_order_release);
		logmsg(LOG_INFO, "REALTIME stepped by %lld us: followed (epoch %u)",
		       (long long)((D.disc.off_real - old_off_real) / 1000), (unsigned)D.disc.epoch);
	}
	if (th_disc_offsets_wide(&D.disc)) {
		if (!D.wide_logged)
			logmsg(LOG_WARNING, "REALTIME/BOOTTIME offsets not measured to within %lld ns "
			       "(the kernel's reads are slow or preempted): not publishing until they are",
			       (long long)D.disc.cfg.max_offset_err_ns);
		D.wide_logged = 1;
		return 0;
	}
	D.wide_logged = 0;

	struct th_snap v;
	if (!ctr) {
		publish_kernel(have ? &s : NULL, &smp, D.tick_ns, 0, &v);
		return 1;
	}
	if (!th_disc_ready(&D.disc)) {
		publish_kernel(have ? &s : NULL, &smp, D.disc.cfg.calib_ns, 0, &v);
		return 1;
	}
	if (have && s.kind == TH_REC_LINE && !(fl & TH_OBS_JUMP)) {
		int64_t d = (int64_t)(smp.c - s.anchor);
		/* Commit a continuation only while the current record still
		 * has LATE_MARGIN_NS of validity left, checked once more right
		 * before the commit: readers cannot announce, so a continuation
		 * that lands after the expiry would follow kernel values that
		 * readers which found the record expired returned meanwhile
		 * (they leave the page for that reason, page_client.h). Past
		 * it, the install path starts a fresh line above the kernel. */
		int64_t margin = (int64_t)((double)LATE_MARGIN_NS / D.disc.line[TH_MONO].rate);
		if (d >= s.dmin && d <= s.dhi - margin) {
			if (d >= 0 && !(fl & TH_OBS_BAD))
				th_plan_next(&D.disc, &s, &smp, &v);
			else
				th_plan_refresh(&D.disc, &s, &smp, &v);
			/* Last look at the counter before the commit. */
			int64_t dn = (int64_t)(th_counter_ordered() - s.anchor);
			if (dn <= s.dhi - margin && th_commit(D.tl, x, &v) == 0)
				return 1;
		}
		D.late++;
		logmsg(LOG_DEBUG, "late: current record %s (d %lld, dhi %lld, margin %lld, window %llu us)", d > s.dhi ? "expired" : "too close to its expiry", (long long)d, (long long)s.dhi, (long long)margin, (unsigned long long)(D.disc.window_ns / 1000));
	}
	if (fl & TH_OBS_BAD) {
		publish_kernel(have ? &s : NULL, &smp, D.tick_ns / 4, 0, &v);
		return 1;
	}
	install_line(&s, have);
	return 1;
}

/* Kernel MONOTONIC at which the current record wants a windup. */
static uint64_t record_due(void)
{
	struct th_snap s;
	unsigned retries = 0;
	if (th_snapshot(D.tl, &s, &retries) != 0)
		return 0;
	if (s.kind != TH_REC_LINE)
		return s.due_ns;
	return th_line_eval(&s, TH_MONO, s.ddue);
}

static void beat(void)
{
	th_page_beat(D.hdr, (uint64_t)kread_ns(CLOCK_MONOTONIC));
}

/* ------------------------------------------------------------ timers */

static void arm_realtime_watch(void)
{
	/* An absolute REALTIME timer far in the future that the kernel
	 * cancels (read() fails with ECANCELED) whenever REALTIME is set. */
	struct itimerspec its;
	memset(&its, 0, sizeof its);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	its.it_value.tv_sec = now.tv_sec + 10 * 366 * 86400L;
	if (timerfd_settime(D.rt_fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &its, NULL) != 0)
		logmsg(LOG_WARNING, "cannot watch for REALTIME steps: %s (steps are noticed at the next tick)",
		       strerror(errno));
}

static void arm_abs(int fd, uint64_t when, uint64_t interval)
{
	struct itimerspec its;
	memset(&its, 0, sizeof its);
	its.it_value.tv_sec = (time_t)(when / NS_PER_S);
	its.it_value.tv_nsec = (long)(when % NS_PER_S);
	its.it_interval.tv_sec = (time_t)(interval / NS_PER_S);
	its.it_interval.tv_nsec = (long)(interval % NS_PER_S);
	if (timerfd_settime(fd, TFD_TIMER_ABSTIME, &its, NULL) != 0)
		die("timerfd_settime: %s", strerror(errno));
}

/* The ticks: one periodic timer on a fixed grid, armed once, so that an
 * ordinary tick costs one wakeup and no timer syscall (missed ticks after a
 * stop or a suspend are simply skipped). */
static void start_ticks(void)
{
	D.grid0 = (uint64_t)kread_ns(CLOCK_MONOTONIC) + D.tick_ns;
	arm_abs(D.tick_fd, D.grid0, D.tick_ns);
}

/* The kernel's update count now (an even count of a consistent copy of its
 * data page), 0 where it cannot be read. */
static uint32_t kcount_now(void)
{
	int64_t off;
	uint32_t c;
	return th_kdata_real_offset_seq(&off, &c) > 0 ? c : 0;
}

/*
 * The ticks follow the kernel's own updates: a tied record (windup) is
 * served on the fast path only until the kernel's next update, so the
 * daemon's tick should come just after each. The kernel updates at a fixed
 * phase of its tick (MONOTONIC, every tick_ns, while any CPU ticks), which
 * a tick learns when it wakes before that update: it waits for it (at most
 * TICK_WAIT_NS, for a kernel whose CPUs idle without ticking) and moves the
 * grid to just after it. A tick that finds the update already made moves
 * the grid a little earlier once a second since the last one learned, so a
 * grid that came late (the kernel's tick was late once) creeps back.
 * Returns the count to tie this tick's windup to (0: none).
 */
#define TICK_AFTER_NS 5000   /* the grid this far after the kernel's update */
#define TICK_WAIT_NS 200000  /* the longest a tick waits for the kernel's update */
#define TICK_CREEP_NS 20000  /* a late grid's step back */
/* Waits up to `limit` ns for the kernel's update after count c; when it
 * comes, the ticks' grid just after it. 1 if it came. */
static int wait_kernel_update(uint32_t c, uint64_t limit)
{
	uint64_t t0 = (uint64_t)kread_ns(CLOCK_MONOTONIC), t = t0;
	while (t - t0 < limit) {
		uint32_t n = kcount_now();
		t = (uint64_t)kread_ns(CLOCK_MONOTONIC);
		if (n && n != c) {
			D.grid0 = t + D.tick_ns + TICK_AFTER_NS;
			arm_abs(D.tick_fd, D.grid0, D.tick_ns);
			D.phase_at = t;
			return 1;
		}
	}
	return 0;
}

static void tick_follow_kernel(void)
{
	if (!D.ktie || (D.ktie & 1) || D.realtime_bias || D.seam_brackets)
		return;
	uint32_t c = kcount_now();
	if (!c)
		return;
	uint64_t now = (uint64_t)kread_ns(CLOCK_MONOTONIC);
	if (c == D.prev_tie) {
		/* Early: the kernel has not updated since the last tick. */
		wait_kernel_update(c, TICK_WAIT_NS);
		return;
	}
	if (now - D.phase_at > (uint64_t)NS_PER_S) {
		/* Late maybe: the next tick a little earlier. */
		uint64_t next = D.grid0 + ((now - D.grid0) / D.tick_ns + 1) * D.tick_ns;
		D.grid0 = next - TICK_CREEP_NS;
		arm_abs(D.tick_fd, D.grid0, D.tick_ns);
		D.phase_at = now - (uint64_t)NS_PER_S + D.tick_ns * 4; /* again after a few ticks */
	}
}

/* A record that wants a windup before the next tick (while the window is
 * still short, a kernel record due at a set time): a one-shot timer,
 * touched only when that time changes. */
static void arm_due(void)
{
	uint64_t now = (uint64_t)kread_ns(CLOCK_MONOTONIC);
	uint64_t next = now < D.grid0 ? D.grid0 : D.grid0 + ((now - D.grid0) / D.tick_ns + 1) * D.tick_ns;
	uint64_t due = record_due();
	uint64_t want = 0;
	if (due && due + 20000 < next) /* (a due within 20 us of a tick waits for it) */
		want = due < now + 20000 ? now + 20000 : due; /* never spin: 20 us at least */
	if (want == D.due_armed)
		return;
	if (want)
		arm_abs(D.due_fd, want, 0);
	else {
		struct itimerspec off;
		memset(&off, 0, sizeof off);
		timerfd_settime(D.due_fd, 0, &off, NULL);
	}
	D.due_armed = want;
}

/* ------------------------------------------------------------ serving */

/* One message of `len` bytes on socket s (to `to` when not NULL), with the
 * descriptor fd (none if fd < 0). Returns sendmsg's result. */
static ssize_t send_with_fd(int s, const struct sockaddr_un *to, socklen_t tolen, const void *buf, size_t len,
			    int fd, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	memset(&ctl, 0, sizeof ctl);
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr msg;
	memset(&msg, 0, sizeof msg);
	msg.msg_name = (void *)to;
	msg.msg_namelen = to ? tolen : 0;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	if (fd >= 0) {
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof ctl.buf;
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	return sendmsg(s, &msg, flags);
}

static void serve_clients(void)
{
	for (int i = 0; i < MAX_ACCEPTS; i++) {
		int c = accept4(D.lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
				logmsg(LOG_WARNING, "accept: %s", strerror(errno));
			return;
		}
		struct {
			uint64_t magic;
			uint32_t abi;
			uint32_t size;
		} hello = {TH_PAGE_MAGIC, TH_PAGE_ABI, TH_PAGE_SIZE};
		/* The read-only descriptor, never the writable one. Never
		 * blocks: a fresh socket's buffer holds the greeting. */
		if (send_with_fd(c, NULL, 0, &hello, sizeof hello, D.rofd, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			logmsg(LOG_DEBUG, "sendmsg: %s", strerror(errno));
		else
			D.clients++;
		close(c);
	}
}

/* ------------------------------------------------------------ setup */

/* The previous publisher's page, kept by the service manager: the ring and
 * its records go on (th_page_adopt checks the rest). The discipline starts
 * from the current record's REALTIME epoch and offsets, as a process that
 * leaves the page does, so that a step while no publisher ran shows as a
 * step (a new epoch) and no offset moves without one. */
static int adopt_page(int fd, const struct th_page_ident *id)
{
	char why[200] = "";
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	int acc = fcntl(fd, F_GETFL);
	void *m = MAP_FAILED;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != (off_t)TH_PAGE_SIZE)
		snprintf(why, sizeof why, "not a file of %u bytes", TH_PAGE_SIZE);
	else if (seals < 0 || !(seals & F_SEAL_SHRINK) || !(seals & F_SEAL_GROW))
		snprintf(why, sizeof why, "not sealed against shrinking and growing");
	else if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE))
		snprintf(why, sizeof why, "sealed against writes (an older timehandsd's page)");
	else if (acc < 0 || (acc & O_ACCMODE) != O_RDWR)
		snprintf(why, sizeof why, "the descriptor is not writable");
	else if ((m = mmap(NULL, TH_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
		snprintf(why, sizeof why, "mmap: %s", strerror(errno));
	else if (th_page_adopt(m, id, why, sizeof why) == 0) {
		D.memfd = fd;
		D.hdr = m;
		D.tl = th_page_timeline(D.hdr);
		D.wr.tl = D.tl;
		D.adopted = 1;
		if (mlock(m, TH_PAGE_SIZE) != 0)
			logmsg(LOG_DEBUG, "mlock: %s", strerror(errno));
		struct th_snap s;
		unsigned retries = 0;
		if (th_snapshot(D.tl, &s, &retries) == 0)
			th_disc_continue(&D.disc, &s);
		logmsg(LOG_INFO, "continuing the previous timehandsd's page (from the descriptor store): %llu records so far",
		       (unsigned long long)atomic_load_explicit(&D.hdr->publishes, memory_order_relaxed));
		return 0;
	}
	logmsg(LOG_WARNING, "the stored page cannot be continued (%s): a new page (running programs rejoin it only with TIMEHANDS_PAGE_RECONNECT=1)", why);
	if (m != MAP_FAILED)
		munmap(m, TH_PAGE_SIZE);
	close(fd);
	return -1;
}

static void make_page(void)
{
	struct th_page_ident id;
	memset(&id, 0, sizeof id);
	id.counter_kind = D.lines ? TH_COUNTER_KIND : 0;
	id.publisher_pid = (uint32_t)getpid();
	id.nominal_hz = D.trust.nominal_hz > 0 ? (uint64_t)llround(D.trust.nominal_hz) : 0;
	if (id.nominal_hz && (id.nominal_hz < TH_PAGE_MIN_HZ || id.nominal_hz > TH_PAGE_MAX_HZ))
		id.nominal_hz = 0;
	id.tick_ns = D.tick_ns;
	if (th__page_read_boot_id(id.boot_id) != 0)
		logmsg(LOG_WARNING, "cannot read the boot id: clients will rely on the heartbeat alone");
	if (th__page_read_timens(&id.timens_mono_ns, &id.timens_boot_ns) != 0)
		logmsg(LOG_WARNING, "cannot read this process's time-namespace offsets");
	id.start_ns = (uint64_t)kread_ns(CLOCK_MONOTONIC);
	id.clocksource = D.trust.clocksource;
	if (D.stored_fd >= 0) {
		int fd = D.stored_fd;
		D.stored_fd = -1;
		if (adopt_page(fd, &id) == 0)
			return;
	}

	D.memfd = memfd_create("timehands-page", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (D.memfd < 0)
		die("memfd_create: %s", strerror(errno));
	if (ftruncate(D.memfd, TH_PAGE_SIZE) != 0)
		die("ftruncate: %s", strerror(errno));
	/* Readers get a read-only descriptor; the mode keeps everybody but
	 * the owner (and root) from reopening it for writing. */
	if (fchmod(D.memfd, 0644) != 0)
		die("fchmod on the page: %s", strerror(errno));
	void *m = mmap(NULL, TH_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, D.memfd, 0);
	if (m == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	if (mlock(m, TH_PAGE_SIZE) != 0)
		logmsg(LOG_DEBUG, "mlock: %s", strerror(errno));
	th_page_init(m, &id);
	D.hdr = m;
	D.tl = th_page_timeline(D.hdr);
	D.wr.tl = D.tl;
	/* After this, nobody can shrink or grow the file (a mapping can never
	 * fault); F_SEAL_SEAL: no seal can be added or removed (a write seal
	 * would keep the next publisher from continuing the page). */
	if (fcntl(D.memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
		die("sealing the page: %s", strerror(errno));
}

/* The descriptor readers get: a new open file description of the page,
 * read-only (a reader could otherwise write the page through the descriptor
 * it was given). */
static void make_readonly_fd(void)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", D.memfd);
	D.rofd = open(path, O_RDONLY | O_CLOEXEC);
	if (D.rofd < 0)
		die("cannot reopen the page read-only through %s: %s (is /proc mounted?)", path, strerror(errno));
	int acc = fcntl(D.rofd, F_GETFL);
	if (acc < 0 || (acc & O_ACCMODE) != O_RDONLY)
		die("the reopened page descriptor is not read-only");
}

/* ------------------------------------------------------------ service manager */

/* The descriptors passed by the service manager (sd_listen_fds(3)'s
 * protocol): the one named "page" (or the only one, unnamed) is kept for
 * make_page, the others closed. Read before daemonize (LISTEN_PID is the
 * pid the manager started). */
static void take_stored_fds(void)
{
	D.stored_fd = -1;
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	const char *names = getenv("LISTEN_FDNAMES");
	if (pid && fds) {
		char *end;
		long p = strtol(pid, &end, 10);
		int mine = *end == 0 && p == (long)getpid();
		long n = strtol(fds, &end, 10);
		if (*end || n < 0 || n > 64)
			n = 0;
		const char *name = names;
		for (long i = 0; mine && i < n; i++) {
			int fd = 3 + (int)i;
			size_t len = name ? strcspn(name, ":") : 0;
			int is_page = name ? (len == 4 && strncmp(name, "page", 4) == 0) : n == 1;
			if (fcntl(fd, F_SETFD, FD_CLOEXEC) == 0) {
				if (is_page && D.stored_fd < 0)
					D.stored_fd = fd;
				else
					close(fd);
			}
			if (name)
				name = name[len] ? name + len + 1 : NULL;
		}
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
}

/* sd_notify(3)'s protocol, without libsystemd: one datagram to
 * $NOTIFY_SOCKET, with a descriptor if fd >= 0. Returns 0 when sent. */
static int notify_manager(const char *text, int fd)
{
	const char *e = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa;
	if (!e || !*e || strlen(e) >= sizeof sa.sun_path || (e[0] != '/' && e[0] != '@'))
		return -1;
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	size_t len = strlen(e);
	memcpy(sa.sun_path, e, len);
	if (e[0] == '@')
		sa.sun_path[0] = 0; /* abstract namespace */
	int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	int rc = send_with_fd(s, &sa, salen, text, strlen(text), fd, MSG_NOSIGNAL) < 0 ? -1 : 0;
	if (rc != 0)
		logmsg(LOG_WARNING, "cannot notify the service manager: %s", strerror(errno));
	close(s);
	return rc;
}

static int connectable(const char *path)
{
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return 0;
	struct sockaddr_un sa;
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int ok = connect(s, (struct sockaddr *)&sa, sizeof sa) == 0;
	close(s);
	return ok;
}

static void make_socket(void)
{
	const char *path = D.page_path;
	struct sockaddr_un sa;
	size_t len = strlen(path);
	if (path[0] != '/' || len >= sizeof sa.sun_path)
		die("page path must be absolute and shorter than %zu bytes: %s", sizeof sa.sun_path, path);
	char dir[sizeof sa.sun_path];
	memcpy(dir, path, len + 1);
	char *slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = 0;
	else
		*slash = 0;
	struct stat st;
	if (stat(dir, &st) != 0) {
		if (errno != ENOENT || mkdir(dir, 0755) != 0 || stat(dir, &st) != 0)
			die("cannot create the socket directory %s: %s", dir, strerror(errno));
	}
	char why[160];
	struct th_page_ids ids;
	th__page_ids(&ids);
	if (th__page_trust_dir((uint32_t)st.st_uid, (uint32_t)st.st_mode, &ids, why, sizeof why) != 0)
		die("%s (%s): clients would refuse it", why, dir);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			die("%s exists and is not a socket", path);
		if (connectable(path))
			die("another timehandsd is serving %s", path);
		if (unlink(path) != 0)
			die("cannot remove the stale socket %s: %s", path, strerror(errno));
	}
	D.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (D.lfd < 0)
		die("socket: %s", strerror(errno));
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, len + 1);
	/* The socket is created with 0666 & ~umask; anyone may connect (the
	 * page is public), nobody but us may replace it (the directory). */
	mode_t old = umask(0);
	int rc = bind(D.lfd, (struct sockaddr *)&sa, sizeof sa);
	umask(old);
	if (rc != 0)
		die("bind %s: %s", path, strerror(errno));
	D.socket_bound = 1;
	/* SO_PEERCRED on a client's socket reports our credentials as of this
	 * listen(): root's when started as root, even after the drop. */
	if (listen(D.lfd, 128) != 0)
		die("listen: %s", strerror(errno));
}

static void make_fds(void)
{
	D.tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	D.due_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	D.rt_fd = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK);
	if (D.tick_fd < 0 || D.due_fd < 0 || D.rt_fd < 0)
		die("timerfd_create: %s", strerror(errno));
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
		die("sigprocmask: %s", strerror(errno));
	D.sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (D.sig_fd < 0)
		die("signalfd: %s", strerror(errno));
	signal(SIGPIPE, SIG_IGN);
	arm_realtime_watch();
}

static void write_pidfile(void)
{
	if (!D.pidfile)
		return;
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof tmp, "%s.tmp", D.pidfile);
	FILE *f = fopen(tmp, "we");
	if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0 || rename(tmp, D.pidfile) != 0)
		die("cannot write the pid file %s: %s", D.pidfile, strerror(errno));
}

static void drop_privileges(void)
{
	if (geteuid() != 0)
		return;
	if (strcmp(D.user, "root") == 0) {
		logmsg(LOG_WARNING, "running as root (--user root)");
		return;
	}
	uid_t uid;
	gid_t gid;
	struct passwd *pw = getpwnam(D.user);
	if (pw) {
		uid = pw->pw_uid;
		gid = pw->pw_gid;
	} else if (strcmp(D.user, "nobody") == 0) {
		uid = 65534;
		gid = 65534;
	} else {
		die("no user %s", D.user);
	}
	if (uid == 0)
		die("--user %s is root", D.user);
	if (setgroups(1, &gid) != 0 || setgid(gid) != 0 || setuid(uid) != 0)
		die("dropping privileges to %s: %s", D.user, strerror(errno));
	if (setuid(0) == 0)
		die("could regain root after dropping privileges");
	/* Not dumpable: another process of the same user cannot ptrace us
	 * or write our writable mapping of the page through /proc. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	logmsg(LOG_INFO, "running as %s (uid %u), keeping the page mapping and the socket", D.user, (unsigned)uid);
}

/* Real-time scheduling keeps the ticks on time when every CPU is busy (the
 * moment fast clocks matter most): a late tick sends every reader of the page
 * to its slow path. The daemon runs ~10 us per tick and never spins. */
static void set_rt_priority(void)
{
	/* No timer slack (50 us by default): each tick comes just after the
	 * kernel's update it follows (tick_follow_kernel). */
	if (prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) != 0)
		logmsg(LOG_DEBUG, "timer slack: %s", strerror(errno));
	if (!D.rt_priority)
		return;
	struct sched_param sp;
	memset(&sp, 0, sizeof sp);
	sp.sched_priority = D.rt_priority;
	if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) != 0)
		logmsg(LOG_WARNING, "cannot use SCHED_FIFO priority %d: %s (ticks may be late on a busy machine)",
		       D.rt_priority, strerror(errno));
	else
		logmsg(LOG_INFO, "SCHED_FIFO priority %d", D.rt_priority);
}

static void decide_counter(void)
{
	th_trust_probe(&D.trust, D.counter_mode);
	int tsc_forbidden = 0;
#if defined(__x86_64__)
	int mode = 0;
	tsc_forbidden = prctl(PR_GET_TSC, &mode, 0, 0, 0) == 0 && mode == PR_TSC_SIGSEGV;
#endif
	if (!D.skip_cross_cpu && D.trust.available && !tsc_forbidden && D.counter_mode != TH_CTR_OFF) {
		th_cross_cpu_check(&D.xcpu, CROSS_CPU_ROUNDS);
		if (D.xcpu.passed)
			logmsg(LOG_INFO, "cross-CPU check passed on %d CPUs (%llu handoffs each way, least gap %lld counts)",
			       D.xcpu.cpus_checked, (unsigned long long)D.xcpu.rounds, (long long)D.xcpu.min_gap);
		else
			logmsg(LOG_WARNING, "cross-CPU check failed: %s", D.xcpu.reason);
	}
	if (D.trust.usable) {
		D.lines = 1;
		if (D.counter_mode == TH_CTR_AUTO)
			D.flags |= TH_PAGE_COUNTER_KERNEL;
	} else if (D.trust.available && D.trust.invariant && D.xcpu.passed && !tsc_forbidden &&
		   D.counter_mode != TH_CTR_OFF) {
		D.lines = 1;
		logmsg(LOG_NOTICE, "clocksource %s: vouching for the counter after the cross-CPU check",
		       D.trust.clocksource);
	} else {
		logmsg(LOG_NOTICE, "publishing kernel records only: %s", D.trust.reason);
	}
	if (D.xcpu.passed)
		D.flags |= TH_PAGE_CROSS_CPU_CHECKED;
	if (D.lines)
		D.flags |= TH_PAGE_COUNTER_LINES;
	D.counter_usable = D.lines;
}

static void init_discipline(void)
{
	struct th_disc_config dc;
	/* Record window: two ticks by default. A record is published every
	 * tick whatever the window (a continuation, or a refresh of the same
	 * line before its anchor), so coarse values are at most a tick old;
	 * the window only sets how late the daemon may be before readers
	 * find the record expired: window - 1 ticks. */
	th_disc_config_default(&dc, (uint64_t)D.window_ticks * D.tick_ns);
	if (D.trust.nominal_hz > 0)
		dc.nominal_rate = 1e9 / D.trust.nominal_hz;
	th_disc_init(&D.disc, &dc);
	D.sp = (struct th_sampler){sampler_kread, sampler_ctr, NULL, ~(uint64_t)0, D.disc.cfg.max_sample_err_ns,
				   sampler_koff_real};
	D.wr = (struct th_writer){.tl = D.tl, .disc = &D.disc, .sp = &D.sp, .tick_ns = D.tick_ns};
}

/* Fork into the background; the parent exits once the child serves the page
 * (or with the child's failure). Returns the write end of the readiness pipe
 * in the child. */
static int daemonize(void)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		die("pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid > 0) {
		close(p[1]);
		char ok = 0;
		ssize_t k;
		do
			k = read(p[0], &ok, 1);
		while (k < 0 && errno == EINTR);
		_exit(k == 1 && ok == 1 ? 0 : 1);
	}
	close(p[0]);
	if (setsid() < 0)
		die("setsid: %s", strerror(errno));
	pid = fork(); /* not a session leader: can never acquire a terminal */
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid > 0)
		_exit(0);
	if (chdir("/") != 0)
		die("chdir /: %s", strerror(errno));
	openlog("timehandsd", LOG_PID, LOG_DAEMON);
	return p[1];
}

static void detach_stdio(int ready_fd)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	char ok = 1;
	if (write(ready_fd, &ok, 1) != 1)
		logmsg(LOG_WARNING, "cannot tell the parent we are ready");
	close(ready_fd);
}

/* ------------------------------------------------------------ main */

static void usage(FILE *f)
{
	fprintf(f, "usage: timehandsd [--page PATH] [--hz N] [--foreground] [--user NAME] [--pidfile PATH]\n"
		   "                  [--rt-priority N] [--window-ticks N] [--counter auto|off|force]\n"
		   "                  [--no-cross-cpu] [--verbose]"
" [--test-seam[=brackets]]\n"
		   "Publishes the shared time page at PATH (default %s). See timehandsd(8).\n",
		TH_DEFAULT_PAGE);
}

static void parse_args(int argc, char **argv)
{
	D.page_path = TH_DEFAULT_PAGE;
	D.user = "nobody";
	D.counter_mode = TH_CTR_AUTO;
	D.window_ticks = 2;
	long hz = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--page") == 0 && val) {
			D.page_path = val;
			i++;
		} else if (strcmp(a, "--hz") == 0 && val) {
			char *end;
			hz = strtol(val, &end, 10);
			if (*end || hz < 1 || hz > (long)(NS_PER_S / TH_PAGE_MIN_TICK_NS))
				die("--hz wants 1..%lld", (long long)(NS_PER_S / TH_PAGE_MIN_TICK_NS));
			i++;
		} else if (strcmp(a, "--user") == 0 && val) {
			D.user = val;
			i++;
		} else if (strcmp(a, "--pidfile") == 0 && val) {
			D.pidfile = val;
			i++;
		} else if (strcmp(a, "--window-ticks") == 0 && val) {
			char *end;
			long w = strtol(val, &end, 10);
			if (*end || w < 2 || w > 16)
				die("--window-ticks wants 2..16");
			D.window_ticks = (int)w;
			i++;
		} else if (strcmp(a, "--rt-priority") == 0 && val) {
			char *end;
			long p = strtol(val, &end, 10);
			if (*end || p < 0 || p > 99)
				die("--rt-priority wants 0..99");
			D.rt_priority = (int)p;
			i++;
		} else if (strcmp(a, "--counter") == 0 && val) {
			if (strcmp(val, "auto") == 0)
				D.counter_mode = TH_CTR_AUTO;
			else if (strcmp(val, "off") == 0)
				D.counter_mode = TH_CTR_OFF;
			else if (strcmp(val, "force") == 0)
				D.counter_mode = TH_CTR_FORCE;
			else
				die("--counter wants auto, off or force");
			i++;
		} else if (strcmp(a, "--foreground") == 0 || strcmp(a, "-f") == 0) {
			D.foreground = 1;
		} else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
			D.verbose = 1;
		} else if (strcmp(a, "--no-cross-cpu") == 0) {
			D.skip_cross_cpu = 1;
		} else if (strcmp(a, "--test-seam") == 0 || strcmp(a, "--test-seam=brackets") == 0) {
			D.test_seam = 1;
			D.seam_brackets = a[11] == '=';
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			exit(0);
		} else {
			usage(stderr);
			exit(2);
		}
	}
	if (hz) {
		D.tick_ns = (uint64_t)(NS_PER_S / hz);
	} else {
		/* Default: the kernel's coarse clock resolution (its tick), so
		 * that coarse clocks from the page are never staler than the
		 * kernel's own. */
		struct timespec res = {0, 0};
		D.tick_ns = 4000000;
		if (th_kclock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && ts_ns(&res) > 0)
			D.tick_ns = (uint64_t)ts_ns(&res);
	}
	if (D.tick_ns < TH_PAGE_MIN_TICK_NS)
		D.tick_ns = TH_PAGE_MIN_TICK_NS;
	if (D.tick_ns > TH_PAGE_MAX_TICK_NS)
		D.tick_ns = TH_PAGE_MAX_TICK_NS;
}

static void shutdown_page(void)
{
	close(D.lfd);
	D.lfd = -1;
	/* The last line stays in force until its expiry (at most a window):
	 * it is as exact as ever, and a reader that finds the page no longer
	 * valid carries on with that very line in its own records (a kernel
	 * record here would have to lead the kernel by the line's error bound
	 * until the kernel passed the line's ceiling). */
	th_page_set_flags(D.hdr, D.flags & ~(uint64_t)TH_PAGE_VALID);
	/* Release: orders the flag change before; a reader that sees the
	 * heartbeat 0 also sees VALID cleared. */
	atomic_store_explicit(&D.hdr->heartbeat, 0, memory_order_release);
	if (D.socket_bound && unlink(D.page_path) != 0 && errno != ENOENT)
		logmsg(LOG_DEBUG, "cannot remove %s: %s", D.page_path, strerror(errno));
	if (D.pidfile)
		unlink(D.pidfile);
	logmsg(LOG_INFO,
	       "stopped: %llu windups, %llu installs (attempts failed: %llu stalled, %llu wide, %llu raced), %llu late, "
	       "%llu kernel records, %llu clients",
	       (unsigned long long)D.windups, (unsigned long long)D.wr.installs, (unsigned long long)D.wr.inst_stalled,
	       (unsigned long long)D.wr.inst_wide, (unsigned long long)D.wr.inst_raced, (unsigned long long)D.late,
	       (unsigned long long)D.wr.kernel_records, (unsigned long long)D.clients);
}

int main(int argc, char **argv)
{
	D.lfd = D.memfd = D.rofd = D.tick_fd = D.due_fd = D.rt_fd = D.sig_fd = -1;
	th_kclock_init();
	/* the kernel's data page, for the exact REALTIME offset of every sample */
	th_kdata_init();
	parse_args(argc, argv);
	take_stored_fds();
	int ready_fd = -1;
	if (!D.foreground)
		ready_fd = daemonize();

	decide_counter();
	set_rt_priority();
	init_discipline();
	/* The socket first: it refuses to start while another timehandsd
	 * serves the path, before anything is written to a stored page. */
	make_socket();
	make_page();
	make_readonly_fd();
	make_fds();
	write_pidfile();
	drop_privileges();
	/* The first record before the page is marked valid and served (a
	 * client that connects earlier waits in the listen backlog). */
	if (windup(0))
		beat();
	th_page_set_flags(D.hdr, D.flags | TH_PAGE_VALID);
	start_ticks();
	/* The grid just after the kernel's next update, and the records tied
	 * to it (tick_follow_kernel). */
	uint32_t kc0 = D.ktie && !(D.ktie & 1) && !D.realtime_bias ? kcount_now() : 0;
	if (kc0 && wait_kernel_update(kc0, D.tick_ns + D.tick_ns / 4) && windup(0))
		beat();
	logmsg(LOG_INFO, "serving %s: tick %llu us, %s, clocksource %s%s", D.page_path,
	       (unsigned long long)(D.tick_ns / 1000), D.lines ? "counter lines" : "kernel records",
	       D.trust.clocksource, D.adopted ? ", continuing the previous page" : "");
	/* Ready, and the writable page to the descriptor store, so that the
	 * next timehandsd of the service continues it (a second store of the
	 * same page is ignored by the manager). */
	notify_manager("READY=1\nFDSTORE=1\nFDNAME=page", D.memfd);
	if (ready_fd >= 0)
		detach_stdio(ready_fd);

	/* One epoll set, registered once: an ordinary tick is an epoll_wait
	 * and a read of the tick timer. */
	enum { EV_TICK, EV_DUE, EV_RT, EV_SIG, EV_LISTEN, EV_N };
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int evfd[EV_N] = {D.tick_fd, D.due_fd, D.rt_fd, D.sig_fd, D.lfd};
	for (int i = 0; ep >= 0 && i < EV_N; i++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
		if (epoll_ctl(ep, EPOLL_CTL_ADD, evfd[i], &ev) != 0)
			die("epoll_ctl: %s", strerror(errno));
	}
	if (ep < 0)
		die("epoll_create1: %s", strerror(errno));
	for (;;) {
		arm_due();
		struct epoll_event evs[EV_N];
		int k = epoll_wait(ep, evs, EV_N, -1);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait: %s", strerror(errno));
		}
		int ready[EV_N] = {0};
		for (int i = 0; i < k; i++)
			if (evs[i].data.u32 < EV_N)
				ready[evs[i].data.u32] = 1;
		int wind = 0, stop = 0;
		uint64_t noticed = 0;
		if (ready[EV_SIG]) {
			struct signalfd_siginfo si;
			while (read(D.sig_fd, &si, sizeof si) == (ssize_t)sizeof si) {
				if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
					stop = 1;
				} else if (si.ssi_signo == SIGUSR1 && D.test_seam) {
					/* Test seam: a REALTIME step of +1 s as this
					 * daemon sees it, noticed like a real one. */
					D.realtime_bias += NS_PER_S;
					noticed = (uint64_t)kread_ns(CLOCK_MONOTONIC);
					wind = 1;
				} else if (si.ssi_signo == SIGUSR2 && D.test_seam) {
					/* Test seam: offset brackets wide (or
					 * narrow again). */
					D.slow_offsets = !D.slow_offsets;
				}
			}
		}
		if (stop)
			break;
		if (ready[EV_RT]) {
			uint64_t n;
			if (read(D.rt_fd, &n, sizeof n) < 0 && errno == ECANCELED) {
				noticed = (uint64_t)kread_ns(CLOCK_MONOTONIC);
				wind = 1;
			}
			arm_realtime_watch();
		}
		if (ready[EV_TICK]) {
			uint64_t n;
			if (read(D.tick_fd, &n, sizeof n) == (ssize_t)sizeof n)
				wind = 1;
		}
		if (ready[EV_DUE]) {
			uint64_t n;
			if (read(D.due_fd, &n, sizeof n) == (ssize_t)sizeof n)
				wind = 1;
			D.due_armed = 0;
		}
		if (wind) {
			if (ready[EV_TICK])
				tick_follow_kernel();
			if (windup(noticed))
				beat();
			/* The kernel updated during the windup: its record is
			 * moved on from at once; tied again now. */
			uint32_t c = D.ktie && !(D.ktie & 1) ? kcount_now() : 0;
			if (c && c != (uint32_t)D.ktie && windup(0))
				beat();
			if (ready[EV_TICK])
				D.prev_tie = (uint32_t)D.ktie;
		}
		if (ready[EV_LISTEN])
			serve_clients();
	}
	close(ep);
	shutdown_page();
	return 0;
}
