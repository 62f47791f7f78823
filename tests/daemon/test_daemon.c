/*
 * timehandsd end to end: the daemon (argv[1]) is started on a socket in a
 * fresh directory, as the user running the test (as root it drops to nobody),
 * and its page is read with page_client + the record math of record.h.
 *
 *   test_daemon DAEMON publish    accuracy (kernel sandwich), monotonicity
 *                                 within and across threads, coarse <= fine
 *   test_daemon DAEMON stop       SIGSTOP at random moments hundreds of
 *                                 times, then SIGKILL, readers running
 *   test_daemon DAEMON step       a REALTIME step through the test seam
 *   test_daemon DAEMON lifecycle  clean shutdown, restart, second instance,
 *                                 background mode, privilege drop
 *   test_daemon DAEMON kernel     --counter off: kernel records only
 *   test_daemon DAEMON timens     a reader in another time namespace refuses
 *   test_daemon DAEMON cpu SECS   CPU used while idle-ticking (a measurement)
 *
 * No assertion is about speed. Properties that depend on the daemon being
 * scheduled at all (a tick is followed within a tick) are retried, and
 * every loop is bounded.
 */
#include "reap.h"
#include "tcommon.h"
#include "kclock.h"
#include "kdata.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#define NS_PER_MS 1000000LL

/* Under ThreadSanitizer the daemon's kernel sandwiches are wider than the
 * discipline accepts, so it rightly publishes kernel records only. */
#if defined(__SANITIZE_THREAD__)
#define SLOW_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLOW_BUILD 1
#endif
#endif
#ifndef SLOW_BUILD
#define SLOW_BUILD 0
#endif
#define EPS_NS 1000 /* G1: 1 us around the kernel sandwich */

static const char *daemon_bin;
static char tmpdir[64], sockpath[128], logpath[128];

/* ------------------------------------------------------------ helpers */

static void sleep_ns(int64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static uint64_t rng_state;
static uint64_t rnd(void)
{
	uint64_t x = rng_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static void make_tmp(void)
{
	strcpy(tmpdir, "/tmp/th-daemon-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		exit(1);
	}
	chmod(tmpdir, 0755);
	snprintf(sockpath, sizeof sockpath, "%s/page", tmpdir);
	snprintf(logpath, sizeof logpath, "%s/log", tmpdir);
}

static void show_log(void)
{
	FILE *f = fopen(logpath, "re");
	if (!f)
		return;
	char line[512];
	fprintf(stderr, "--- daemon log ---\n");
	while (fgets(line, sizeof line, f))
		fputs(line, stderr);
	fclose(f);
}

static void cleanup_tmp(void)
{
	char p[200];
	unlink(sockpath);
	unlink(logpath);
	snprintf(p, sizeof p, "%s/pid", tmpdir);
	unlink(p);
	snprintf(p, sizeof p, "%s/pid.tmp", tmpdir);
	unlink(p);
	rmdir(tmpdir);
}

/* Start the daemon on sockpath; extra arguments end with NULL. */
static pid_t spawn(int foreground, const char *const *extra)
{
	const char *argv[24];
	int n = 0;
	argv[n++] = daemon_bin;
	argv[n++] = "--page";
	argv[n++] = sockpath;
	if (foreground)
		argv[n++] = "--foreground";
	argv[n++] = "--verbose";
	for (int i = 0; extra && extra[i] && n < 20; i++)
		argv[n++] = extra[i];
	/* TH_TEST_DAEMON_ARGS="--rt-priority 1": up to two more arguments */
	static char more[128];
	const char *env = getenv("TH_TEST_DAEMON_ARGS");
	if (env && strlen(env) < sizeof more) {
		strcpy(more, env);
		for (char *tok = strtok(more, " "); tok && n < 22; tok = strtok(NULL, " "))
			argv[n++] = tok;
	}
	argv[n] = NULL;
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(daemon_bin, (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/* Attach, retrying while the daemon starts (bounded). */
static int attach_wait(struct th_page_map *m, int64_t limit_ns)
{
	char why[200] = "";
	int64_t end = kns(CLOCK_MONOTONIC) + limit_ns;
	int rc;
	do {
		rc = th_page_attach_timeout(sockpath, 200, m, why, sizeof why);
		if (rc == 0)
			return 0;
		sleep_ns(5 * NS_PER_MS);
	} while (kns(CLOCK_MONOTONIC) < end);
	fprintf(stderr, "attach failed: %s\n", why);
	return rc;
}

static int wait_exit(pid_t pid, int64_t limit_ns, int *status)
{
	int64_t end = kns(CLOCK_MONOTONIC) + limit_ns;
	do {
		pid_t r = waitpid(pid, status, WNOHANG);
		if (r == pid)
			return 0;
		sleep_ns(2 * NS_PER_MS);
	} while (kns(CLOCK_MONOTONIC) < end);
	return -1;
}

static void stop_daemon(pid_t pid)
{
	int st;
	kill(pid, SIGCONT);
	kill(pid, SIGTERM);
	if (wait_exit(pid, 5000 * NS_PER_MS, &st) != 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
}

/* Process state letter from /proc/PID/stat ('T' when stopped). */
static char proc_state(pid_t pid)
{
	char p[64], buf[512];
	snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(p, "re");
	if (!f)
		return 0;
	size_t k = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[k] = 0;
	char *rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' ? rp[2] : 0;
}

static int wait_state(pid_t pid, char want, int64_t limit_ns)
{
	int64_t end = kns(CLOCK_MONOTONIC) + limit_ns;
	do {
		if (proc_state(pid) == want)
			return 0;
		sched_yield();
	} while (kns(CLOCK_MONOTONIC) < end);
	return -1;
}

static long proc_uid(pid_t pid)
{
	char p[64], line[256];
	snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
	FILE *f = fopen(p, "re");
	if (!f)
		return -1;
	long uid = -1;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, "Uid:", 4) == 0) {
			long r, e;
			if (sscanf(line + 4, "%ld %ld", &r, &e) == 2)
				uid = e;
		}
	fclose(f);
	return uid;
}

static uint64_t hb_of(const struct th_page_map *m)
{
	return atomic_load_explicit(&m->hdr->heartbeat, memory_order_acquire);
}

/* ------------------------------------------------------------ readers */

struct reader_ctl {
	const struct th_page_map *m;
	_Atomic int stop;
	int id;
	int mix;                 /* also read RAW, REALTIME, BOOTTIME */
	struct page_reader r;
	_Atomic uint64_t reads;
	_Atomic uint64_t line_reads, kernel_reads; /* for the main thread while running */
	uint64_t err_line, err_krec, cross_back, coarse_above;
	int64_t worst_line, worst_krec; /* largest distance outside the sandwich, ns */
	int64_t worst_line_bound;
	uint64_t lag_hist[8];    /* coarse lag: <tick/4, <tick/2, <tick, <2 ticks, <4, <8, <16, more */
	uint64_t tick_ns;
};

static _Atomic uint64_t latest[2]; /* streaming cross-thread check: each reader's last page value */

static void note_outside(struct reader_ctl *c, int src, int64_t out, uint32_t bound)
{
	if (src == SRC_LINE) {
		if (out > c->worst_line)
			c->worst_line = out;
		if (out > EPS_NS)
			c->err_line++;
	} else if (src == SRC_KREC) {
		if (out > c->worst_krec)
			c->worst_krec = out;
		if (out > (int64_t)(bound > EPS_NS ? bound : EPS_NS))
			c->err_krec++;
	}
}

static void *reader_main(void *arg)
{
	struct reader_ctl *c = arg;
	struct th_snap s, cs = {0};
	unsigned rt = 0;
	uint64_t n = 0;
	c->r.m = c->m;
	while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
		/* Coarse first: a record's coarse value must not exceed a
		 * later fine reading (G4). */
		int have_coarse = th_snapshot((struct th_timeline *)c->m->tl, &cs, &rt) == 0;
		/* Streaming check: a value another reader published (release)
		 * is acquired before our read; a page-served reading of ours
		 * must not be below it. */
		uint64_t other = atomic_load_explicit(&latest[1 - c->id], memory_order_acquire);
		int src;
		int64_t k1 = kns(CLOCK_MONOTONIC);
		uint64_t v = reader_read(&c->r, TH_MONO, &src, &s);
		int64_t k2 = kns(CLOCK_MONOTONIC);
		int64_t out = (int64_t)v < k1 ? k1 - (int64_t)v : (int64_t)v > k2 ? (int64_t)v - k2 : 0;
		note_outside(c, src, out, s.bound[TH_MONO]);
		if (src == SRC_LINE)
			atomic_fetch_add_explicit(&c->line_reads, 1, memory_order_relaxed);
		else
			atomic_fetch_add_explicit(&c->kernel_reads, 1, memory_order_relaxed);
		if (src != SRC_FALLBACK) {
			if (v < other)
				c->cross_back++;
			atomic_store_explicit(&latest[c->id], v, memory_order_release);
			if (have_coarse && cs.kind != TH_REC_EMPTY) {
				if (cs.coarse > v)
					c->coarse_above++;
				uint64_t lag = v - cs.coarse, t = c->tick_ns;
				int b = lag < t / 4 ? 0 : lag < t / 2 ? 1 : lag < t ? 2 : lag < 2 * t ? 3 : lag < 4 * t ? 4
					: lag < 8 * t ? 5 : lag < 16 * t ? 6 : 7;
				if (cs.coarse <= v)
					c->lag_hist[b]++;
			}
		}
		if (c->mix) {
			/* The other clocks straight from the page (no floor
			 * logic): RAW, and REALTIME/BOOTTIME as MONOTONIC plus
			 * the record's offsets. */
			static const clockid_t ids[3] = {CLOCK_MONOTONIC_RAW, CLOCK_REALTIME, CLOCK_BOOTTIME};
			clockid_t id = ids[n % 3];
			int l = id == CLOCK_MONOTONIC_RAW ? TH_RAW : TH_MONO;
			int64_t a = kns(id);
			uint64_t w;
			int rc = page_value(c->m->tl, l, &w, &s, &rt);
			int64_t b = kns(id);
			if (rc > 0) {
				if (id == CLOCK_REALTIME)
					w += (uint64_t)s.off_real;
				else if (id == CLOCK_BOOTTIME)
					w += (uint64_t)s.off_boot;
				int64_t o = (int64_t)w < a ? a - (int64_t)w : (int64_t)w > b ? (int64_t)w - b : 0;
				note_outside(c, rc, o, s.bound[l]);
			}
		}
		atomic_store_explicit(&c->reads, ++n, memory_order_relaxed);
	}
	return NULL;
}

static void start_readers(struct reader_ctl *rc, pthread_t *t, int nr, const struct th_page_map *m, int mix)
{
	atomic_store(&latest[0], 0);
	atomic_store(&latest[1], 0);
	for (int i = 0; i < nr; i++) {
		memset(&rc[i], 0, sizeof rc[i]);
		rc[i].m = m;
		rc[i].id = i;
		rc[i].mix = mix;
		rc[i].tick_ns = m->tick_ns;
		pthread_create(&t[i], NULL, reader_main, &rc[i]);
	}
}

static void stop_readers(struct reader_ctl *rc, pthread_t *t, int nr)
{
	for (int i = 0; i < nr; i++)
		atomic_store(&rc[i].stop, 1);
	for (int i = 0; i < nr; i++)
		pthread_join(t[i], NULL);
}

static void report_readers(const char *what, struct reader_ctl *rc, int nr, int expect_lines)
{
	uint64_t reads = 0, line = 0, krec = 0, fb = 0, left = 0, rejoin = 0;
	for (int i = 0; i < nr; i++) {
		struct reader_ctl *c = &rc[i];
		reads += atomic_load(&c->reads);
		line += c->r.n_line;
		krec += c->r.n_krec;
		fb += c->r.n_fallback;
		left += c->r.n_left;
		rejoin += c->r.n_rejoin;
		CHECK(c->r.back_steps == 0, "%s: reader %d: %llu backward steps on the page", what, i,
		      (unsigned long long)c->r.back_steps);
		CHECK(c->cross_back == 0, "%s: reader %d: %llu backward steps across threads", what, i,
		      (unsigned long long)c->cross_back);
		CHECK(c->err_line == 0, "%s: reader %d: %llu line readings outside the kernel sandwich by > 1 us (worst %lld ns)",
		      what, i, (unsigned long long)c->err_line, (long long)c->worst_line);
		CHECK(c->err_krec == 0, "%s: reader %d: %llu kernel-record readings beyond their bound (worst %lld ns)", what,
		      i, (unsigned long long)c->err_krec, (long long)c->worst_krec);
		CHECK(c->coarse_above == 0, "%s: reader %d: coarse above a later fine reading %llu times", what, i,
		      (unsigned long long)c->coarse_above);
		CHECK(atomic_load(&c->reads) > 0, "%s: reader %d made no progress", what, i);
	}
	printf("%s: %llu reads: %llu line, %llu kernel-record, %llu fallback; left the page %llu times, rejoined %llu;"
	       " worst outside sandwich: line %lld ns, kernel-record %lld ns\n",
	       what, (unsigned long long)reads, (unsigned long long)line, (unsigned long long)krec,
	       (unsigned long long)fb, (unsigned long long)left, (unsigned long long)rejoin,
	       (long long)(rc[0].worst_line > rc[nr - 1].worst_line ? rc[0].worst_line : rc[nr - 1].worst_line),
	       (long long)(rc[0].worst_krec > rc[nr - 1].worst_krec ? rc[0].worst_krec : rc[nr - 1].worst_krec));
	uint64_t h[8] = {0};
	for (int i = 0; i < nr; i++)
		for (int b = 0; b < 8; b++)
			h[b] += rc[i].lag_hist[b];
	printf("%s: coarse lag behind fine (ticks): <1/4 %llu, <1/2 %llu, <1 %llu, <2 %llu, <4 %llu, <8 %llu, <16 %llu, more %llu\n",
	       what, (unsigned long long)h[0], (unsigned long long)h[1], (unsigned long long)h[2],
	       (unsigned long long)h[3], (unsigned long long)h[4], (unsigned long long)h[5],
	       (unsigned long long)h[6], (unsigned long long)h[7]);
	if (expect_lines && !SLOW_BUILD)
		CHECK(line > 0, "%s: no reading was served by a counter line", what);
}

/* ------------------------------------------------------------ modes */

static int counter_lines(const struct th_page_map *m)
{
	return (m->flags & TH_PAGE_COUNTER_LINES) != 0;
}

/* The daemon's discipline needs a few undisturbed windups before its first
 * counter line, which a loaded machine (a sanitizer build next to other
 * tests) may stretch to seconds; the readers, which compete with it for
 * the CPUs, start once it serves one (bounded: 5 s). */
static void wait_for_line(const char *what, const struct th_page_map *m)
{
	if (!counter_lines(m) || SLOW_BUILD)
		return;
	int64_t lim = kns(CLOCK_MONOTONIC) + 5000 * NS_PER_MS;
	struct th_snap s;
	unsigned rr = 0;
	memset(&s, 0, sizeof s);
	while (!(th_snapshot((struct th_timeline *)m->tl, &s, &rr) == 0 && s.kind == TH_REC_LINE) &&
	       kns(CLOCK_MONOTONIC) < lim)
		sleep_ns(NS_PER_MS);
	CHECK(s.kind == TH_REC_LINE, "%s: no counter line published within 5 s of the start", what);
}

static void mode_publish(void)
{
	pid_t pid = spawn(1, NULL);
	struct th_page_map m;
	CHECK(attach_wait(&m, 10000 * NS_PER_MS) == 0, "attach");
	if (!m.hdr) {
		stop_daemon(pid);
		return;
	}
	if (geteuid() == 0)
		CHECK(proc_uid(pid) == 65534, "started as root, the daemon runs as uid %ld", proc_uid(pid));
	else
		CHECK(proc_uid(pid) == (long)geteuid(), "daemon uid %ld", proc_uid(pid));
	CHECK(m.publisher_pid == (uint32_t)pid, "publisher pid %u, daemon %d", m.publisher_pid, (int)pid);
	CHECK(m.peer_uid == 0 || m.peer_uid == geteuid(), "peer uid %u", m.peer_uid);
	CHECK(m.flags & TH_PAGE_VALID, "flags %llx", (unsigned long long)m.flags);
	struct timespec res;
	clock_getres(CLOCK_MONOTONIC_COARSE, &res);
	CHECK(m.tick_ns == (uint64_t)(res.tv_sec * 1000000000LL + res.tv_nsec), "default tick %llu ns is not the coarse resolution",
	      (unsigned long long)m.tick_ns);
	printf("publish: tick %llu us, flags %s%s%s%s, frequency %llu Hz, clocksource %s\n",
	       (unsigned long long)(m.tick_ns / 1000), m.flags & TH_PAGE_VALID ? "VALID " : "",
	       m.flags & TH_PAGE_COUNTER_KERNEL ? "COUNTER_KERNEL " : "",
	       m.flags & TH_PAGE_CROSS_CPU_CHECKED ? "CROSS_CPU_CHECKED " : "",
	       m.flags & TH_PAGE_COUNTER_LINES ? "COUNTER_LINES" : "", (unsigned long long)m.nominal_hz,
	       m.hdr->clocksource);

	/* The daemon publishes: the record sequence and the heartbeat move. */
	uint64_t p0 = atomic_load(&m.hdr->publishes), h0 = hb_of(&m);
	sleep_ns(50 * NS_PER_MS);
	CHECK(atomic_load(&m.hdr->publishes) > p0 && hb_of(&m) > h0, "no publish in 50 ms");

	wait_for_line("publish", &m);
	struct reader_ctl rc[2];
	pthread_t t[2];
	start_readers(rc, t, 2, &m, 1);
	uint64_t stale = 0, checks = 0;
	int64_t end = kns(CLOCK_MONOTONIC) + 2500 * NS_PER_MS;
	while (kns(CLOCK_MONOTONIC) < end) {
		char why[200];
		if (th_page_check(&m, (uint64_t)kns(CLOCK_MONOTONIC), why, sizeof why) != 0)
			stale++;
		checks++;
		sleep_ns(NS_PER_MS);
	}
	stop_readers(rc, t, 2);
	report_readers("publish", rc, 2, counter_lines(&m));
	printf("publish: th_page_check stale in %llu of %llu checks over 2.5 s (the daemon is scheduled late now and then)\n",
	       (unsigned long long)stale, (unsigned long long)checks);
	th_page_detach(&m);
	stop_daemon(pid);
}

static void mode_stop(void)
{
	pid_t pid = spawn(1, NULL);
	struct th_page_map m;
	CHECK(attach_wait(&m, 10000 * NS_PER_MS) == 0, "attach");
	if (!m.hdr) {
		stop_daemon(pid);
		return;
	}
	rng_state = (uint64_t)kns(CLOCK_MONOTONIC) | 1;
	printf("stop: seed %llu\n", (unsigned long long)rng_state);
	/* The stops start once the daemon serves a counter line, so that
	 * they interrupt lines. */
	wait_for_line("stop", &m);
	struct reader_ctl rc[2];
	pthread_t t[2];
	start_readers(rc, t, 2, &m, 0);
	uint64_t T = m.tick_ns;
	int cycles = 300, long_stops = 0, recovered = 0;
	char why[200];
	for (int i = 0; i < cycles; i++) {
		sleep_ns((int64_t)(rnd() % (3 * T)));
		kill(pid, SIGSTOP);
		if (i % 50 == 25) {
			/* A long stop: the page goes stale; readers keep going. */
			CHECK(wait_state(pid, 'T', 2000 * NS_PER_MS) == 0, "daemon did not stop");
			uint64_t t_stop = (uint64_t)kns(CLOCK_MONOTONIC);
			uint64_t r0 = atomic_load(&rc[0].reads), r1 = atomic_load(&rc[1].reads);
			sleep_ns((int64_t)(m.max_age_ns + 2 * T));
			uint64_t now = (uint64_t)kns(CLOCK_MONOTONIC);
			int rcode = th_page_check(&m, now, why, sizeof why);
			CHECK(rcode == TH_PAGE_ESTALE, "stopped %llu ms: th_page_check %d (%s)",
			      (unsigned long long)((now - t_stop) / NS_PER_MS), rcode, why);
			CHECK(hb_of(&m) <= t_stop, "heartbeat after the stop");
			/* Readers never wait for the stopped daemon: both make
			 * progress while it stays stopped (bounded wait, for
			 * a loaded machine). */
			int64_t lim = kns(CLOCK_MONOTONIC) + 3000 * NS_PER_MS;
			while ((atomic_load(&rc[0].reads) == r0 || atomic_load(&rc[1].reads) == r1) &&
			       kns(CLOCK_MONOTONIC) < lim)
				sleep_ns(NS_PER_MS);
			CHECK(proc_state(pid) == 'T', "daemon no longer stopped");
			CHECK(atomic_load(&rc[0].reads) > r0 && atomic_load(&rc[1].reads) > r1,
			      "a reader made no progress in 3 s while the daemon was stopped");
			long_stops++;
			kill(pid, SIGCONT);
			/* Picked up again once it runs (bounded). */
			lim = kns(CLOCK_MONOTONIC) + 2000 * NS_PER_MS;
			while (th_page_check(&m, (uint64_t)kns(CLOCK_MONOTONIC), why, sizeof why) != 0 &&
			       kns(CLOCK_MONOTONIC) < lim)
				sleep_ns(NS_PER_MS);
			recovered += th_page_check(&m, (uint64_t)kns(CLOCK_MONOTONIC), why, sizeof why) == 0;
			continue;
		}
		sleep_ns((int64_t)(rnd() % (4 * T)));
		kill(pid, SIGCONT);
	}
	CHECK(recovered == long_stops, "page live again after %d of %d long stops", recovered, long_stops);
	/* Killed at a random moment. */
	sleep_ns((int64_t)(rnd() % (3 * T)));
	kill(pid, SIGKILL);
	int st;
	waitpid(pid, &st, 0);
	uint64_t t_kill = (uint64_t)kns(CLOCK_MONOTONIC);
	sleep_ns((int64_t)(m.max_age_ns + 2 * T));
	uint64_t now = (uint64_t)kns(CLOCK_MONOTONIC);
	int rcode = th_page_check(&m, now, why, sizeof why);
	CHECK(rcode == TH_PAGE_ESTALE && strstr(why, "stopped or dead"), "killed %llu ms ago: th_page_check %d (%s)",
	      (unsigned long long)((now - t_kill) / NS_PER_MS), rcode, why);
	/* Readers still run on the dead page: its last record has expired
	 * (a line) or never expires (a kernel record): every read is now
	 * served by the kernel, none by the counter. */
	uint64_t l0 = atomic_load(&rc[0].line_reads) + atomic_load(&rc[1].line_reads);
	uint64_t k0 = atomic_load(&rc[0].kernel_reads) + atomic_load(&rc[1].kernel_reads);
	sleep_ns(50 * NS_PER_MS);
	uint64_t l1 = atomic_load(&rc[0].line_reads) + atomic_load(&rc[1].line_reads);
	uint64_t k1 = atomic_load(&rc[0].kernel_reads) + atomic_load(&rc[1].kernel_reads);
	stop_readers(rc, t, 2);
	/* (a reader preempted in the middle of a read taken before the
	 * expiry may count it late: at most one each) */
	CHECK(l1 - l0 <= 2, "%llu reads served by an expired line after the kill", (unsigned long long)(l1 - l0));
	CHECK(k1 > k0, "no reads after the kill");
	report_readers("stop", rc, 2, counter_lines(&m));
	printf("stop: %d stop/continue cycles (%d long), killed; th_page_check: %s\n", cycles, long_stops, why);
	/* A new attach refuses the dead daemon's socket at once. */
	struct th_page_map m2;
	int64_t t0 = kns(CLOCK_MONOTONIC);
	int a = th_page_attach(sockpath, &m2, why, sizeof why);
	CHECK(a == -ECONNREFUSED, "attach to a killed daemon: %d (%s)", a, why);
	CHECK(kns(CLOCK_MONOTONIC) - t0 < 1000 * NS_PER_MS, "attach to a killed daemon took too long");
	th_page_detach(&m);
}

/* Oldest and newest records of the ring by sequence (the generation's
 * complement: th_abi_gen_for). */
static int first_with_epoch(const struct th_page_map *m, uint16_t epoch, struct th_snap *out, int *complete)
{
	struct th_timeline *tl = (struct th_timeline *)m->tl;
	uint32_t best = 0, oldest = UINT32_MAX;
	uint16_t oldest_epoch = 0;
	int found = 0;
	for (int i = 0; i < TH_RING; i++) {
		struct th_rec *r = &tl->ring[i];
		uint32_t g = atomic_load_explicit(&r->gen, memory_order_acquire);
		uint16_t e = atomic_load_explicit(&r->epoch, memory_order_relaxed);
		uint64_t coarse = atomic_load_explicit(&r->coarse, memory_order_relaxed);
		uint16_t kind = atomic_load_explicit(&r->kind, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (g == 0 || atomic_load_explicit(&r->gen, memory_order_relaxed) != g)
			continue;
		uint32_t q = ~g;
		if (q < oldest) {
			oldest = q;
			oldest_epoch = e;
		}
		if (e == epoch && (!found || q < best)) {
			found = 1;
			best = q;
			memset(out, 0, sizeof *out);
			out->gen = g;
			out->coarse = coarse;
			out->kind = kind;
			out->epoch = e;
		}
	}
	/* The first record of the new epoch is still in the ring only if the
	 * oldest one there is from before it. */
	*complete = found && oldest_epoch != epoch;
	return found;
}

/* The daemon with its test seam, and its page attached; -1 (checked) if
 * the page could not be attached. */
/* brackets: the daemon measures the offsets in brackets only, as on a
 * kernel whose data page it cannot read */
static pid_t spawn_seam_as(struct th_page_map *m, int brackets)
{
	const char *extra[] = {brackets ? "--test-seam=brackets" : "--test-seam", NULL};
	pid_t pid = spawn(1, extra);
	CHECK(attach_wait(m, 10000 * NS_PER_MS) == 0, "attach");
	if (!m->hdr) {
		stop_daemon(pid);
		return -1;
	}
	return pid;
}

static pid_t spawn_seam(struct th_page_map *m)
{
	return spawn_seam_as(m, 0);
}

/* s1 follows s0 by one REALTIME step of the seam (+1 s): the next epoch,
 * the offset moved by 1 s to within two narrow brackets. */
static int64_t check_seam_step(const struct th_snap *s0, const struct th_snap *s1)
{
	int64_t doff = s1->off_real - s0->off_real;
	CHECK(s1->epoch == (uint16_t)(s0->epoch + 1), "epoch %u -> %u", s0->epoch, s1->epoch);
	CHECK(doff > 1000000000LL - 2000 && doff < 1000000000LL + 2000, "REALTIME offset moved by %lld ns, want 1 s",
	      (long long)doff);
	return doff;
}

static void mode_step(void)
{
	struct th_page_map m;
	pid_t pid = spawn_seam(&m);
	if (pid < 0)
		return;
	int ok = 0;
	for (int attempt = 0; attempt < 3 && !ok; attempt++) {
		struct th_snap s0 = {0}, s1 = {0};
		unsigned rt = 0;
		sleep_ns(20 * NS_PER_MS);
		CHECK(th_snapshot((struct th_timeline *)m.tl, &s0, &rt) == 0, "snapshot");
		uint64_t steps0 = atomic_load(&m.hdr->steps);
		int64_t t_sig = kns(CLOCK_MONOTONIC);
		kill(pid, SIGUSR1);
		int64_t lim = t_sig + 2000 * NS_PER_MS;
		while (atomic_load(&m.hdr->steps) == steps0 && kns(CLOCK_MONOTONIC) < lim)
			sched_yield();
		int64_t t_seen = kns(CLOCK_MONOTONIC);
		CHECK(atomic_load(&m.hdr->steps) == steps0 + 1, "the step was not followed within 2 s");
		/* acquire (seq_cst) load of steps above: last_step_ns is the
		 * daemon's, stored before its release increment */
		uint64_t noticed = atomic_load_explicit(&m.hdr->last_step_ns, memory_order_relaxed);
		/* wait for the record carrying it */
		while (kns(CLOCK_MONOTONIC) < lim) {
			if (th_snapshot((struct th_timeline *)m.tl, &s1, &rt) == 0 && s1.epoch != s0.epoch)
				break;
			sched_yield();
		}
		/* an upper bound of the commit of the new epoch's first record,
		 * whatever its kind (a daemon slowed down, under a sanitizer,
		 * publishes kernel-mode records, whose samples are not kept) */
		int64_t t_epoch = kns(CLOCK_MONOTONIC);
		check_seam_step(&s0, &s1);
		/* A reader sees the stepped REALTIME at once. */
		int64_t a = kns(CLOCK_REALTIME);
		uint64_t w;
		struct th_snap s;
		int rc = page_value(m.tl, TH_MONO, &w, &s, &rt);
		int64_t b = kns(CLOCK_REALTIME);
		if (rc > 0 && s.epoch == s1.epoch) {
			int64_t v = (int64_t)w + s.off_real - 1000000000LL * (attempt + 1);
			CHECK(v >= a - EPS_NS && v <= b + EPS_NS, "stepped REALTIME off by %lld ns",
			      (long long)(v < a ? a - v : v - b));
		}
		/* Followed within one tick: the first record of the new epoch
		 * was sampled within a tick of the moment the step was noticed. */
		struct th_snap first;
		int complete = 0;
		int found = first_with_epoch(&m, s1.epoch, &first, &complete);
		CHECK(found, "no record of the new epoch in the ring");
		int64_t lag = (int64_t)first.coarse - (int64_t)noticed;
		printf("step %d: signal -> noticed %lld us, noticed -> first record's sample %lld us (kind %u), "
		       "noticed -> new epoch read %lld us (tick %llu us), seen after %lld us\n",
		       attempt, (long long)(((int64_t)noticed - t_sig) / 1000), (long long)(lag / 1000), first.kind,
		       (long long)((t_epoch - (int64_t)noticed) / 1000), (unsigned long long)(m.tick_ns / 1000),
		       (long long)((t_seen - t_sig) / 1000));
		CHECK((int64_t)noticed >= t_sig, "noticed before the signal");
		if (complete && first.kind == TH_REC_LINE && lag >= -EPS_NS && lag <= (int64_t)m.tick_ns)
			ok = 1;
		if (s1.epoch != s0.epoch && t_epoch - (int64_t)noticed <= (int64_t)m.tick_ns)
			ok = 1;
	}
	CHECK(ok, "a REALTIME step was not followed within one tick in 3 tries");
	th_page_detach(&m);
	stop_daemon(pid);
}

/* 1 when the daemon's log contains `what`. */
static int log_has(const char *what)
{
	FILE *f = fopen(logpath, "re");
	if (!f)
		return 0;
	char line[512];
	int found = 0;
	while (!found && fgets(line, sizeof line, f))
		found = strstr(line, what) != NULL;
	fclose(f);
	return found;
}

/*
 * Offsets measured only within wide brackets are not published: where the
 * daemon measures them in brackets only (as on a kernel whose data page it
 * cannot read), with the test seam's sleep before every REALTIME and
 * BOOTTIME read of its samples (SIGUSR2), a REALTIME step (SIGUSR1) is
 * found by a wide bracket; the
 * daemon then publishes nothing and beats no heartbeat (clients see it
 * late) rather than an offset that may be off by the bracket, and once its
 * brackets are narrow again (SIGUSR2) publishes the step: one new epoch,
 * the offset moved by the step to within a narrow bracket.
 */
/* A seam daemon (brackets: see spawn_seam_as) serving a while, its current
 * record in *s0 and its step count in *steps0, then made to take wide
 * brackets (SIGUSR2); -1 if it could not be started. */
static pid_t seam_wide(struct th_page_map *m, int brackets, struct th_snap *s0, uint64_t *steps0)
{
	pid_t pid = spawn_seam_as(m, brackets);
	if (pid < 0)
		return -1;
	unsigned rt = 0;
	sleep_ns(20 * NS_PER_MS);
	CHECK(th_snapshot((struct th_timeline *)m->tl, s0, &rt) == 0, "snapshot");
	*steps0 = atomic_load(&m->hdr->steps);
	kill(pid, SIGUSR2); /* wide brackets */
	sleep_ns(50 * NS_PER_MS);
	return pid;
}

static void mode_wide(void)
{
	struct th_page_map m;
	struct th_snap s0 = {0}, s1 = {0};
	uint64_t steps0;
	unsigned rt = 0;
	pid_t pid = seam_wide(&m, 1, &s0, &steps0);
	if (pid < 0)
		return;
	kill(pid, SIGUSR1); /* a step of +1 s, found by a wide bracket */
	int64_t lim = kns(CLOCK_MONOTONIC) + 5000 * NS_PER_MS;
	while (!log_has("not measured to within") && kns(CLOCK_MONOTONIC) < lim)
		sleep_ns(5 * NS_PER_MS);
	CHECK(log_has("not measured to within"), "no warning about wide offsets within 5 s");
	/* Nothing published meanwhile: no heartbeat, no record of the new
	 * epoch, for ten ticks. */
	uint64_t hb = hb_of(&m);
	uint64_t cur = atomic_load(&((struct th_timeline *)m.tl)->cur);
	sleep_ns(10 * (int64_t)m.tick_ns);
	CHECK(hb_of(&m) == hb, "heartbeat beaten while the offsets were wide");
	CHECK(atomic_load(&((struct th_timeline *)m.tl)->cur) == cur, "a record published while the offsets were wide");
	CHECK(th_snapshot((struct th_timeline *)m.tl, &s1, &rt) == 0 && s1.epoch == s0.epoch,
	      "epoch %u published while wide (was %u)", s1.epoch, s0.epoch);
	kill(pid, SIGUSR2); /* narrow again */
	lim = kns(CLOCK_MONOTONIC) + 5000 * NS_PER_MS;
	while (hb_of(&m) == hb && kns(CLOCK_MONOTONIC) < lim)
		sleep_ns(NS_PER_MS);
	CHECK(hb_of(&m) != hb, "no heartbeat within 5 s of narrow brackets");
	while (kns(CLOCK_MONOTONIC) < lim &&
	       !(th_snapshot((struct th_timeline *)m.tl, &s1, &rt) == 0 && s1.epoch != s0.epoch))
		sleep_ns(NS_PER_MS);
	int64_t doff = check_seam_step(&s0, &s1);
	CHECK(atomic_load(&m.hdr->steps) == steps0 + 1, "steps %llu -> %llu", (unsigned long long)steps0,
	      (unsigned long long)atomic_load(&m.hdr->steps));
	printf("wide: step published after narrow brackets, offset moved by %lld ns\n", (long long)doff);
	th_page_detach(&m);
	stop_daemon(pid);
}

/*
 * Where the daemon reads the kernel's data page, the REALTIME offset is the
 * kernel's own (REALTIME_COARSE - MONOTONIC_COARSE of one update), with no
 * bracket: a REALTIME step made while every bracket is wide (the seam's
 * sleeps) is followed at once, the offset moved by exactly the step, the
 * heartbeat never stops, and no wide offsets are reported.
 */
static void mode_wide_exact(void)
{
	int64_t off;
	th_kclock_init();
	th_kdata_init();
	if (!th_kdata_real_offset(&off)) {
		printf("wide-exact: the kernel's data page is not readable here: not run\n");
		exit(77);
	}
	struct th_page_map m;
	struct th_snap s0 = {0}, s1 = {0};
	uint64_t steps0;
	unsigned rt = 0;
	pid_t pid = seam_wide(&m, 0, &s0, &steps0);
	if (pid < 0)
		return;
	uint64_t hb = hb_of(&m);
	kill(pid, SIGUSR1); /* a step of +1 s */
	int64_t lim = kns(CLOCK_MONOTONIC) + 2000 * NS_PER_MS;
	while (atomic_load(&m.hdr->steps) == steps0 && kns(CLOCK_MONOTONIC) < lim)
		sleep_ns(NS_PER_MS);
	CHECK(atomic_load(&m.hdr->steps) == steps0 + 1, "the step was not followed within 2 s with wide brackets");
	while (kns(CLOCK_MONOTONIC) < lim &&
	       !(th_snapshot((struct th_timeline *)m.tl, &s1, &rt) == 0 && s1.epoch != s0.epoch))
		sleep_ns(NS_PER_MS);
	int64_t doff = check_seam_step(&s0, &s1);
	CHECK(doff == 1000000000LL, "REALTIME offset moved by %lld ns, want exactly 1 s", (long long)doff);
	sleep_ns(10 * (int64_t)m.tick_ns);
	CHECK(hb_of(&m) != hb, "no heartbeat while the brackets were wide");
	CHECK(!log_has("not measured to within"), "wide offsets reported although the kernel's page gives them");
	kill(pid, SIGUSR2); /* narrow again */
	printf("wide-exact: step followed with wide brackets, offset moved by %lld ns\n", (long long)doff);
	th_page_detach(&m);
	stop_daemon(pid);
}

static void mode_lifecycle(void)
{
	char why[200];
	pid_t a = spawn(1, NULL);
	struct th_page_map m;
	CHECK(attach_wait(&m, 10000 * NS_PER_MS) == 0, "attach A");
	if (!m.hdr) {
		stop_daemon(a);
		return;
	}
	/* A second daemon on the same path refuses to start. */
	pid_t b = spawn(1, NULL);
	int st = 0;
	CHECK(wait_exit(b, 10000 * NS_PER_MS, &st) == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 1,
	      "second daemon: status %d", st);
	CHECK(th_page_check(&m, (uint64_t)kns(CLOCK_MONOTONIC), why, sizeof why) == 0, "A disturbed: %s", why);

	/* Clean shutdown: VALID cleared, heartbeat 0, the last record in
	 * force until its expiry; the mapping stays readable. */
	kill(a, SIGTERM);
	CHECK(wait_exit(a, 5000 * NS_PER_MS, &st) == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "A exit status %d", st);
	uint64_t flags = atomic_load(&m.hdr->flags);
	CHECK(!(flags & TH_PAGE_VALID) && hb_of(&m) == 0, "after shutdown: flags %llx heartbeat %llu",
	      (unsigned long long)flags, (unsigned long long)hb_of(&m));
	int rc = th_page_check(&m, (uint64_t)kns(CLOCK_MONOTONIC), why, sizeof why);
	CHECK(rc == TH_PAGE_ESTALE && strstr(why, "not valid"), "check after shutdown: %d %s", rc, why);
	struct th_snap s;
	unsigned rt = 0;
	uint64_t v;
	int64_t k1 = kns(CLOCK_MONOTONIC);
	int src = page_value(m.tl, TH_MONO, &v, &s, &rt);
	int64_t k2 = kns(CLOCK_MONOTONIC);
	/* -1: the line expired meanwhile (nothing more to serve: readers
	 * have left the page) */
	CHECK(src == -1 || ((int64_t)v >= k1 - 1000 && (int64_t)v <= k2 + 1000),
	      "value after shutdown outside the sandwich: %lld not in [%lld, %lld] +- 1 us (src %d kind %u)",
	      (long long)v, (long long)k1, (long long)k2, src, s.kind);
	th_page_detach(&m);
	rc = th_page_attach(sockpath, &m, why, sizeof why);
	CHECK(rc == -ENOENT || rc == -ECONNREFUSED, "attach after shutdown: %d %s", rc, why);

	/* Restart: picked up again (a stale socket left by a daemon that
	 * dropped privileges is replaced). */
	pid_t c = spawn(1, NULL);
	CHECK(attach_wait(&m, 10000 * NS_PER_MS) == 0, "attach after restart");
	if (m.hdr) {
		CHECK(m.publisher_pid == (uint32_t)c, "restarted page from pid %u, want %d", m.publisher_pid, (int)c);
		th_page_detach(&m);
	}
	kill(c, SIGKILL);
	waitpid(c, &st, 0);

	/* Background mode with a pid file: the parent returns once the page
	 * is served. */
	char pidfile[160];
	snprintf(pidfile, sizeof pidfile, "%s/pid", tmpdir);
	const char *extra[] = {"--pidfile", pidfile, NULL};
	pid_t d = spawn(0, extra);
	CHECK(wait_exit(d, 10000 * NS_PER_MS, &st) == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "background start: status %d", st);
	rc = th_page_attach(sockpath, &m, why, sizeof why);
	CHECK(rc == 0, "attach to the background daemon right after it returned: %s", why);
	FILE *f = fopen(pidfile, "re");
	long bpid = 0;
	CHECK(f && fscanf(f, "%ld", &bpid) == 1 && bpid > 1, "pid file");
	if (f)
		fclose(f);
	if (m.hdr) {
		CHECK(m.publisher_pid == (uint32_t)bpid, "background publisher %u, pid file %ld", m.publisher_pid, bpid);
		th_page_detach(&m);
	}
	if (bpid > 1) {
		kill((pid_t)bpid, SIGTERM);
		int64_t lim = kns(CLOCK_MONOTONIC) + 5000 * NS_PER_MS;
		while (kill((pid_t)bpid, 0) == 0 && kns(CLOCK_MONOTONIC) < lim)
			sleep_ns(2 * NS_PER_MS);
		CHECK(kill((pid_t)bpid, 0) != 0, "background daemon did not stop");
	}
	/* Bad options fail fast. */
	const char *bad[] = {"--hz", "0", NULL};
	pid_t e = spawn(1, bad);
	CHECK(wait_exit(e, 5000 * NS_PER_MS, &st) == 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0, "--hz 0 accepted");
	printf("lifecycle: second instance refused, clean shutdown marks the page, restart and background mode work\n");
}

static void mode_kernel(void)
{
	const char *extra[] = {"--counter", "off", NULL};
	pid_t pid = spawn(1, extra);
	struct th_page_map m;
	CHECK(attach_wait(&m, 10000 * NS_PER_MS) == 0, "attach");
	if (!m.hdr) {
		stop_daemon(pid);
		return;
	}
	CHECK(!(m.flags & TH_PAGE_COUNTER_LINES), "counter off, yet lines");
	struct th_snap s0, s1;
	unsigned rt = 0;
	th_snapshot((struct th_timeline *)m.tl, &s0, &rt);
	struct reader_ctl rc[2];
	pthread_t t[2];
	start_readers(rc, t, 2, &m, 1);
	sleep_ns(500 * NS_PER_MS);
	stop_readers(rc, t, 2);
	th_snapshot((struct th_timeline *)m.tl, &s1, &rt);
	CHECK(s1.kind == TH_REC_KERNEL, "record kind %u", s1.kind);
	CHECK(s1.coarse > s0.coarse + 100 * NS_PER_MS, "coarse did not move with kernel records (%llu -> %llu)",
	      (unsigned long long)s0.coarse, (unsigned long long)s1.coarse);
	for (int i = 0; i < 2; i++)
		CHECK(rc[i].r.n_line == 0, "a line reading without a counter");
	report_readers("kernel", rc, 2, 0);
	th_page_detach(&m);
	stop_daemon(pid);
}

/* In another time namespace (MONOTONIC shifted by a day): the page is refused. */
static void mode_timens(void)
{
	if (geteuid() != 0 || system("unshare -T --monotonic=86400 --boottime=86400 --fork true 2>/dev/null") != 0) {
		printf("timens: no time namespaces here (needs root and unshare -T): skipped\n");
		cleanup_tmp();
		exit(77);
	}
	pid_t pid = spawn(1, NULL);
	struct th_page_map m;
	CHECK(attach_wait(&m, 10000 * NS_PER_MS) == 0, "attach");
	th_page_detach(&m);
	char cmd[512];
	snprintf(cmd, sizeof cmd, "unshare -T --monotonic=86400 --boottime=86400 --fork /proc/%d/exe %s timens-client %s",
		 (int)getpid(), daemon_bin, sockpath);
	int st = system(cmd);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the reader in another time namespace did not refuse the page");
	stop_daemon(pid);
}

static int mode_timens_client(const char *path)
{
	struct th_page_map m;
	char why[200];
	int rc = th_page_attach(path, &m, why, sizeof why);
	printf("timens: reader with MONOTONIC shifted by a day: %d (%s)\n", rc, why);
	return rc == TH_PAGE_EOTHER ? 0 : 1;
}

/* A bare timerfd loop at the same rate: what waking a thread this often
 * costs on this machine, measured next to the daemon. */
static pid_t spawn_bare_ticker(uint64_t tick_ns, int secs)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	struct itimerspec its;
	memset(&its, 0, sizeof its);
	its.it_value.tv_nsec = its.it_interval.tv_nsec = (long)tick_ns;
	timerfd_settime(fd, 0, &its, NULL);
	int64_t end = kns(CLOCK_MONOTONIC) + (int64_t)(secs + 1) * 1000000000LL;
	while (kns(CLOCK_MONOTONIC) < end) {
		uint64_t n;
		if (read(fd, &n, sizeof n) < 0)
			break;
	}
	_exit(0);
}

static int read_schedstat(pid_t pid, unsigned long long *run, unsigned long long *wakeups)
{
	char p[64];
	unsigned long long x;
	snprintf(p, sizeof p, "/proc/%d/schedstat", (int)pid);
	FILE *f = fopen(p, "re");
	if (!f)
		return -1;
	int k = fscanf(f, "%llu %llu %llu", run, &x, wakeups);
	fclose(f);
	return k == 3 ? 0 : -1;
}

static void mode_cpu(int secs)
{
	pid_t pid = spawn(1, NULL);
	struct th_page_map m;
	CHECK(attach_wait(&m, 10000 * NS_PER_MS) == 0, "attach");
	uint64_t tick = m.tick_ns ? m.tick_ns : 4000000;
	th_page_detach(&m);
	sleep_ns(500 * NS_PER_MS); /* past the start-up */
	pid_t bare = spawn_bare_ticker(tick, secs);
	sleep_ns(200 * NS_PER_MS);
	unsigned long long run0 = 0, run1 = 0, w0 = 0, w1 = 0, b0 = 0, b1 = 0, bw0 = 0, bw1 = 0;
	read_schedstat(pid, &run0, &w0);
	read_schedstat(bare, &b0, &bw0);
	int64_t t0 = kns(CLOCK_MONOTONIC);
	sleep_ns((int64_t)secs * 1000000000LL - 200 * NS_PER_MS);
	int64_t t1 = kns(CLOCK_MONOTONIC);
	read_schedstat(pid, &run1, &w1);
	read_schedstat(bare, &b1, &bw1);
	int bst;
	waitpid(bare, &bst, 0);
	struct rusage ru;
	double wall = (double)(t1 - t0) / 1e9;
	printf("cpu: bare timerfd loop at the same rate, same time: %.3f ms CPU, %.4f %% of one CPU, %.2f us per wakeup (%llu wakeups)\n",
	       (double)(b1 - b0) / 1e6, (double)(b1 - b0) / 1e9 / wall * 100.0,
	       bw1 > bw0 ? (double)(b1 - b0) / 1e3 / (double)(bw1 - bw0) : 0.0, bw1 - bw0);
	kill(pid, SIGTERM);
	int dst;
	memset(&ru, 0, sizeof ru);
	wait4(pid, &dst, 0, &ru); /* the daemon's own, over its whole life */
	double life_cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
			  ru.ru_stime.tv_usec / 1e6;
	printf("cpu: idle-ticking %.1f s at %llu Hz: %.3f ms CPU (schedstat), %.4f %% of one CPU, %.2f us per wakeup (%llu wakeups)\n",
	       wall, (unsigned long long)(1000000000ull / tick), (double)(run1 - run0) / 1e6,
	       (double)(run1 - run0) / 1e9 / wall * 100.0, w1 > w0 ? (double)(run1 - run0) / 1e3 / (double)(w1 - w0) : 0.0,
	       w1 - w0);
	printf("cpu: getrusage of the daemon (wait4) over its whole life, %.1f s with start-up and cross-CPU check: "
	       "user %.3f s, system %.3f s, total %.3f s; %ld voluntary / %ld involuntary context switches\n",
	       (double)secs + 0.7, (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
	       life_cpu, ru.ru_nvcsw, ru.ru_nivcsw);
}

int main(int argc, char **argv)
{
	if (argc >= 4 && strcmp(argv[2], "timens-client") == 0)
		return mode_timens_client(argv[3]);
	if (argc < 3) {
		fprintf(stderr, "usage: test_daemon DAEMON publish|stop|step|lifecycle|kernel|timens|cpu [SECS]\n");
		return 2;
	}
	daemon_bin = argv[1];
	const char *mode = argv[2];
	reap_children_at_exit();
	signal(SIGPIPE, SIG_IGN);
	make_tmp();
	if (!strcmp(mode, "publish"))
		mode_publish();
	else if (!strcmp(mode, "stop"))
		mode_stop();
	else if (!strcmp(mode, "step"))
		mode_step();
	else if (!strcmp(mode, "wide"))
		mode_wide();
	else if (!strcmp(mode, "wide-exact"))
		mode_wide_exact();
	else if (!strcmp(mode, "lifecycle"))
		mode_lifecycle();
	else if (!strcmp(mode, "kernel"))
		mode_kernel();
	else if (!strcmp(mode, "timens"))
		mode_timens();
	else if (!strcmp(mode, "cpu"))
		mode_cpu(argc > 3 ? atoi(argv[3]) : 10);
	else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	if (atomic_load(&check_failures))
		show_log();
	cleanup_tmp();
	char name[64];
	snprintf(name, sizeof name, "test_daemon %s", mode);
	return check_done(name);
}
