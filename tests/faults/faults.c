/*
 * The real-kernel fault tier (make test-faults): change the kernel's clock the
 * way time daemons and operators do, while reader threads sandwich every
 * timehands reading between the kernel's own readings of the same clock.
 *
 *   timehands-faults [--expect MODE] SCENARIO...
 *   timehands-faults --probe      exit 0 if the kernel's clock may be changed, else 77
 *   SCENARIO: freq tick tick10 pll setoffset step steppair clocksource (or all)
 *   exit 75 (--expect shared): the daemon did not answer the first reading
 *   within its millisecond, so this process stays local; a new one may join
 *
 * Two reader threads: each winds up the records in turn and finds the other's
 * windup under way. Built twice: timehands-faults reads through the th_ API of
 * the library; timehands-faults-libc (FAULTS_LIBC) through libc's clock
 * functions, to be run under the preload, and finds th_status in the preload.
 *
 * Checked for every reading, as the guarantees G1-G5 state them:
 *   G1 a fine reading lies within 1 us of [min(k1,k2), max(k1,k2)], k1 and k2
 *      the kernel's readings just before and after it (each by system call
 *      and through the vDSO: the envelope of the four), widened by the
 *      time the sandwich took where the kernel stepped back inside it (a
 *      reading made before the step may be later than k1, one made after
 *      it earlier than k2);
 *   G2 MONOTONIC, RAW, BOOTTIME (fine and coarse) never go back; REALTIME
 *      and TAI only where the kernel's went back in between;
 *   G3 time() is never below the second of an earlier REALTIME reading unless
 *      the kernel stepped REALTIME back in between;
 *   G4 a coarse reading never exceeds the fine reading that follows it;
 *   G5 coarse readings lag the kernel by no more than the kernel's own coarse
 *      clocks do in the same run, plus one tick;
 * and per scenario: at most 1 % of the readings (fine, coarse and time())
 * served by the kernel (th_status's slow_reads; not with --expect kernel, a
 * process that does not read the counter, whose fine readings are the
 * kernel's by design), the mode at the end the mode at the start.
 *
 * Every change is undone: steps are paired (each +d followed by -d), slews
 * alternate in sign, and the kernel's frequency, tick, status and clocksource
 * are restored at the end of each scenario, at exit and on SIGINT, SIGTERM,
 * SIGALRM, SIGSEGV and SIGABRT. Steps are at most 100 ms.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

#include "kclock.h"
#include "timehands.h"

#define NS 1000000000LL
#define US 1000LL
#define MS 1000000LL
#define G1_SLACK_NS 1000

/* ---- reading the clocks ---- */

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * NS + t->tv_nsec;
}

/* The kernel's reading: a system call, never interposed. */
static int64_t kread(clockid_t id)
{
	struct timespec t;
	syscall(SYS_clock_gettime, id, &t);
	return ts_ns(&t);
}

/* The kernel's other reading, its vDSO's, found without libc (which the
 * preload interposes): the two may disagree by a microsecond or so for a
 * moment after a step, and each is the kernel's clock. */
static int64_t vread(clockid_t id)
{
	struct timespec t;
	th_kclock_gettime(id, &t);
	return ts_ns(&t);
}

static int64_t min4(int64_t a, int64_t b, int64_t c, int64_t d)
{
	int64_t m = a < b ? a : b, n = c < d ? c : d;
	return m < n ? m : n;
}

static int64_t max4(int64_t a, int64_t b, int64_t c, int64_t d)
{
	int64_t m = a > b ? a : b, n = c > d ? c : d;
	return m > n ? m : n;
}

#ifdef FAULTS_LIBC
#define PATH_NAME "libc (the preload)"
static int (*status_fn)(struct th_status *, size_t);
static int tread(clockid_t id, struct timespec *t)
{
	return clock_gettime(id, t);
}
static int tgettimeofday(struct timeval *tv)
{
	return gettimeofday(tv, NULL);
}
static time_t ttime(void)
{
	return time(NULL);
}
static int tstatus(struct th_status *st)
{
	memset(st, 0, sizeof *st);
	return status_fn ? status_fn(st, sizeof *st) : -1;
}
static void path_init(void)
{
	status_fn = (int (*)(struct th_status *, size_t))dlsym(RTLD_DEFAULT, "th_status");
}
#else
#define PATH_NAME "the library (th_ API)"
static _Thread_local unsigned round_no;
/* Alternate rounds: the library call, and the header's inline read (a
 * clock id the compiler sees). */
static int tread(clockid_t id, struct timespec *t)
{
	if (round_no % 2 == 0)
		return (th_clock_gettime)(id, t);
	switch (id) {
	case CLOCK_REALTIME: return th_clock_gettime(CLOCK_REALTIME, t);
	case CLOCK_MONOTONIC: return th_clock_gettime(CLOCK_MONOTONIC, t);
	case CLOCK_MONOTONIC_RAW: return th_clock_gettime(CLOCK_MONOTONIC_RAW, t);
	case CLOCK_BOOTTIME: return th_clock_gettime(CLOCK_BOOTTIME, t);
	case CLOCK_TAI: return th_clock_gettime(CLOCK_TAI, t);
	case CLOCK_REALTIME_COARSE: return th_clock_gettime(CLOCK_REALTIME_COARSE, t);
	case CLOCK_MONOTONIC_COARSE: return th_clock_gettime(CLOCK_MONOTONIC_COARSE, t);
	default: return (th_clock_gettime)(id, t);
	}
}
static int tgettimeofday(struct timeval *tv)
{
	return th_gettimeofday(tv, NULL);
}
static time_t ttime(void)
{
	return round_no % 2 ? th_time(NULL) : (th_time)(NULL);
}
static int tstatus(struct th_status *st)
{
	memset(st, 0, sizeof *st);
	return th_status(st, sizeof *st);
}
static void path_init(void)
{
}
#endif

/* ---- undoing every change ---- */

/* What the kernel's clock was before the first change; written once before
 * any change, read by the restore paths (also from a signal handler). */
static struct timex orig_tx;
static int have_orig;
static char orig_cs[64];
static char cs_path[] = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
/* Net REALTIME step applied and not yet paired, in ns: undone on restore. */
static volatile sig_atomic_t net_step_ms;

static int set_offset_ns(int64_t d)
{
	struct timex tx;
	memset(&tx, 0, sizeof tx);
	tx.modes = ADJ_SETOFFSET | ADJ_NANO;
	int64_t s = d / NS, n = d % NS;
	if (n < 0) {
		n += NS;
		s--;
	}
	tx.time.tv_sec = s;
	tx.time.tv_usec = n; /* ns under ADJ_NANO */
	return adjtimex(&tx) < 0 ? -1 : 0;
}

/* A REALTIME step of `ms` by ADJ_SETOFFSET, counted for restore_all. */
static int step_by_ms(int ms)
{
	if (set_offset_ns((int64_t)ms * MS) != 0) {
		fprintf(stderr, "faults: ADJ_SETOFFSET: %s\n", strerror(errno));
		return -1;
	}
	net_step_ms += ms;
	return 0;
}

static void write_cs(const char *name)
{
	int fd = open(cs_path, O_WRONLY);
	if (fd < 0)
		return;
	ssize_t w = write(fd, name, strlen(name));
	(void)w;
	close(fd);
}

/* Async-signal-safe: adjtimex, open, write. */
static void restore_all(void)
{
	if (!have_orig)
		return;
	if (net_step_ms) {
		set_offset_ns(-(int64_t)net_step_ms * MS);
		net_step_ms = 0;
	}
	struct timex tx;
	memset(&tx, 0, sizeof tx);
	/* ADJ_NANO (the PLL scenario) leaves STA_NANO set: back to the units
	 * the kernel had */
	tx.modes = ADJ_FREQUENCY | ADJ_TICK | ADJ_STATUS | ADJ_OFFSET |
		   ((orig_tx.status & STA_NANO) ? ADJ_NANO : ADJ_MICRO);
	tx.freq = orig_tx.freq;
	tx.tick = orig_tx.tick;
	tx.status = orig_tx.status & ~(STA_INS | STA_DEL);
	tx.offset = 0;
	adjtimex(&tx);
	if (orig_cs[0])
		write_cs(orig_cs);
}

static void on_signal(int sig)
{
	restore_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* ---- the reader ---- */

static const clockid_t fine_ids[] = {CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME,
				     CLOCK_TAI};
static const char *const fine_names[] = {"REALTIME", "MONOTONIC", "MONOTONIC_RAW", "BOOTTIME", "TAI"};
#define NFINE (sizeof fine_ids / sizeof *fine_ids)

struct stats {
	uint64_t reads, g1_bad, g2_bad, g3_bad, g4_bad, g5_bad;
	int64_t g1_worst;
	int g1_worst_id;
	int64_t th_coarse_lag, k_coarse_lag;
	char first[256];
};

static atomic_int reader_stop;
#define NREADERS 2
/* Each reader thread counts in its own (the scenario adds them up). */
static struct stats S_each[NREADERS];
static _Thread_local struct stats *SS;
static int64_t tick_ns = 4 * MS;

/* --expect kernel: the fine readings are the kernel's by design */
static int kernel_mode_expected;

static void note_first(const char *what, int64_t a, int64_t b, int64_t c)
{
	if (!SS->first[0])
		snprintf(SS->first, sizeof SS->first, "%s: %lld not in/after [%lld, %lld]", what, (long long)b,
			 (long long)a, (long long)c);
}

/* The kernel stepped the clock back between the readings before a reading
 * and those after it. The lowest of them was taken after the step, but
 * later than the reading may have been (a reading made right after the step
 * lies below it); the highest before the step, but earlier than the reading
 * may have been (a reading made right before the step lies above it). Each
 * bound is then off by at most the time the whole sandwich took, from m1
 * (MONOTONIC, taken before it) to now. */
static void widen_for_step_back(int64_t *lo, int64_t *hi, int64_t m1)
{
	int64_t span = vread(CLOCK_MONOTONIC) - m1;
	*lo -= span;
	*hi += span;
}

/* One round: every fine clock, gettimeofday, the coarse clocks, time(). */
static void reader_round(int64_t *prev, int64_t *prev_k, int64_t *prev_coarse, int64_t *prev_kcoarse)
{
	for (size_t i = 0; i < NFINE; i++) {
		struct timespec t;
		int steppable = fine_ids[i] == CLOCK_REALTIME || fine_ids[i] == CLOCK_TAI;
		int64_t m1 = steppable ? vread(CLOCK_MONOTONIC) : 0;
		int64_t k1 = kread(fine_ids[i]), v1 = vread(fine_ids[i]);
		tread(fine_ids[i], &t);
		int64_t v2 = vread(fine_ids[i]), k2 = kread(fine_ids[i]);
		int64_t v = ts_ns(&t), lo = min4(k1, k2, v1, v2), hi = max4(k1, k2, v1, v2);
		if (steppable && (k2 < k1 || v2 < v1))
			widen_for_step_back(&lo, &hi, m1);
		/* the kernel's readings before and after, by either path */
		k1 = k1 < v1 ? k1 : v1;
		k2 = k2 > v2 ? k2 : v2;
		SS->reads++;
		int64_t off = v < lo ? lo - v : v > hi ? v - hi : 0;
		if (off > G1_SLACK_NS) {
			SS->g1_bad++;
			if (off > SS->g1_worst) {
				SS->g1_worst = off;
				SS->g1_worst_id = (int)i;
			}
			note_first(fine_names[i], lo, v, hi);
		}
		/* G2: REALTIME and TAI may go back only where the kernel did */
		if (prev[i] && v < prev[i] && !(steppable && (k1 < prev_k[i] || k2 < prev_k[i]))) {
			SS->g2_bad++;
			note_first(fine_names[i], prev[i], v, prev[i]);
		}
		prev[i] = v;
		/* the kernel went back since a reading began if a later kernel
		 * reading is below either of its two */
		prev_k[i] = k1 > k2 ? k1 : k2;
		if (fine_ids[i] == CLOCK_REALTIME) {
			/* G3: time() after this reading */
			int64_t s = (int64_t)ttime();
			int64_t k3 = kread(CLOCK_REALTIME);
			SS->reads++;
			/* allowed where the kernel stepped back since the
			 * REALTIME reading began */
			if (s < v / NS && !(k3 < (k1 > k2 ? k1 : k2))) {
				SS->g3_bad++;
				note_first("G3 time() below an earlier REALTIME second", v / NS, s, v / NS);
			}
			/* gettimeofday: G1 at microsecond resolution */
			struct timeval tv;
			int64_t gm = vread(CLOCK_MONOTONIC);
			int64_t g1 = kread(CLOCK_REALTIME), w1 = vread(CLOCK_REALTIME);
			tgettimeofday(&tv);
			int64_t w2 = vread(CLOCK_REALTIME), g2 = kread(CLOCK_REALTIME);
			int64_t gv = (int64_t)tv.tv_sec * NS + tv.tv_usec * US;
			int64_t glo = min4(g1, g2, w1, w2), ghi = max4(g1, g2, w1, w2);
			if (g2 < g1 || w2 < w1)
				widen_for_step_back(&glo, &ghi, gm);
			glo = glo / US * US;
			SS->reads++;
			if (gv < glo - G1_SLACK_NS || gv > ghi + G1_SLACK_NS) {
				SS->g1_bad++;
				note_first("gettimeofday", glo, gv, ghi);
			}
		}
	}
	/* coarse: G4 against the fine reading after, G5 lag, G2 */
	static const clockid_t cids[2] = {CLOCK_REALTIME_COARSE, CLOCK_MONOTONIC_COARSE};
	static const clockid_t fids[2] = {CLOCK_REALTIME, CLOCK_MONOTONIC};
	for (int c = 0; c < 2; c++) {
		struct timespec t, f;
		int64_t k1 = kread(fids[c]);
		int64_t kc = kread(cids[c]);
		tread(cids[c], &t);
		tread(fids[c], &f);
		SS->reads += 2;
		int64_t v = ts_ns(&t);
		int64_t k3 = kread(fids[c]);
		/* REALTIME may have been stepped back in between */
		if (v > ts_ns(&f) && !(c == 0 && k3 < k1)) {
			SS->g4_bad++;
			note_first("G4 coarse above the fine reading after it", v, v, ts_ns(&f));
		}
		int stepped = c == 0 && (k1 < prev_kcoarse[c] || k3 < prev_kcoarse[c]);
		if (prev_coarse[c] && v < prev_coarse[c] && !stepped) {
			SS->g2_bad++;
			note_first(c == 0 ? "G2 REALTIME_COARSE backwards" : "G2 MONOTONIC_COARSE backwards",
				   prev_coarse[c], v, prev_coarse[c]);
		}
		prev_coarse[c] = v;
		prev_kcoarse[c] = k1;
		if (c == 1) {
			if (k1 - v > SS->th_coarse_lag)
				SS->th_coarse_lag = k1 - v;
			if (k1 - kc > SS->k_coarse_lag)
				SS->k_coarse_lag = k1 - kc;
		}
	}
}

static void *reader(void *arg)
{
	SS = &S_each[(intptr_t)arg];
	int64_t prev[NFINE] = {0}, prev_k[NFINE] = {0}, pc[2] = {0}, pk[2] = {0};
	while (!atomic_load_explicit(&reader_stop, memory_order_relaxed)) {
		reader_round(prev, prev_k, pc, pk);
#ifndef FAULTS_LIBC
		round_no++;
#endif
	}
	return NULL;
}

/* ---- the scenarios ---- */

#define CHANGES 20
#define PERIOD_MS 250

static int tx_apply(struct timex *tx, const char *what)
{
	if (adjtimex(tx) < 0) {
		fprintf(stderr, "faults: adjtimex (%s): %s\n", what, strerror(errno));
		return -1;
	}
	return 0;
}

/* One change of scenario `name`, number i (even: up, odd: down). */
static int change(const char *name, int i, char **cs_list, int ncs)
{
	int up = (i % 2) == 0;
	struct timex tx;
	memset(&tx, 0, sizeof tx);
	if (!strcmp(name, "freq")) {
		tx.modes = ADJ_FREQUENCY;
		tx.freq = (up ? 500L : -500L) << 16; /* ppm, 16-bit fraction */
		return tx_apply(&tx, "frequency");
	}
	if (!strcmp(name, "tick") || !strcmp(name, "tick10")) {
		long pct = !strcmp(name, "tick") ? 1 : 10;
		tx.modes = ADJ_TICK;
		tx.tick = orig_tx.tick + (up ? 1 : -1) * orig_tx.tick * pct / 100;
		return tx_apply(&tx, "tick");
	}
	if (!strcmp(name, "pll")) {
		tx.modes = ADJ_STATUS | ADJ_OFFSET | ADJ_NANO;
		tx.status = (orig_tx.status | STA_PLL) & ~(STA_UNSYNC | STA_FLL | STA_INS | STA_DEL);
		tx.offset = (up ? 1 : -1) * 1000000L; /* 1 ms, slewed by the kernel's PLL */
		return tx_apply(&tx, "PLL offset");
	}
	int step_ms = up ? 100 : -100;
	if (!strcmp(name, "setoffset"))
		return step_by_ms(step_ms);
	if (!strcmp(name, "steppair")) {
		/* A step of 100 ms taken back 50 us to 2 ms later: sooner
		 * than a daemon or a windup may follow either. */
		if (step_by_ms(step_ms) != 0)
			return -1;
		struct timespec pause = {0, 50000 + (long)((i * 389) % 1951) * 1000};
		nanosleep(&pause, NULL);
		return step_by_ms(-step_ms);
	}
	if (!strcmp(name, "step")) {
		int64_t t = kread(CLOCK_REALTIME) + (int64_t)step_ms * MS;
		struct timespec to = {(time_t)(t / NS), (long)(t % NS)};
		if (clock_settime(CLOCK_REALTIME, &to) != 0) {
			fprintf(stderr, "faults: clock_settime: %s\n", strerror(errno));
			return -1;
		}
		net_step_ms += step_ms;
		return 0;
	}
	if (!strcmp(name, "clocksource")) {
		/* up: another clocksource, in turn; down: the original */
		if (up)
			write_cs(cs_list[(i / 2) % ncs]);
		else
			write_cs(orig_cs);
		return 0;
	}
	fprintf(stderr, "faults: unknown scenario %s\n", name);
	return -1;
}

static int read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return 0;
}

static const char *mode_name(uint32_t m)
{
	return m == TH_MODE_SHARED ? "shared" : m == TH_MODE_LOCAL ? "local" : "kernel";
}

/* Runs one scenario; 0 passed, 1 failed, 77 not possible here. */
static int scenario(const char *name)
{
	char avail[256] = "", *cs_list[8];
	int ncs = 0;
	if (!strcmp(name, "clocksource")) {
		if (read_file("/sys/devices/system/clocksource/clocksource0/available_clocksource", avail,
			      sizeof avail) != 0 ||
		    !orig_cs[0]) {
			printf("  %-12s SKIP: no clocksource files\n", name);
			return 77;
		}
		/* Only the clocksources the kernel computes time from the TSC
		 * with: under another (hpet, acpi_pm) the counter is not used
		 * (G7) and every reading is the kernel's, which the 1 % rule
		 * would count against a run that is right. */
		char other[128] = "";
		for (char *sv = NULL, *tok = strtok_r(avail, " \n", &sv); tok && ncs < 8;
		     tok = strtok_r(NULL, " \n", &sv)) {
			if (!strcmp(tok, orig_cs))
				continue;
			if (!strcmp(tok, "tsc") || !strcmp(tok, "kvm-clock"))
				cs_list[ncs++] = tok;
			else if (strlen(other) + strlen(tok) + 2 < sizeof other) {
				strcat(other, " ");
				strcat(other, tok);
			}
		}
		if (other[0])
			printf("  %-12s not switched to (the counter is not read there):%s\n", name, other);
		if (ncs == 0) {
			printf("  %-12s SKIP: no other TSC-based clocksource than %s\n", name, orig_cs);
			return 77;
		}
	}
	struct th_status st0, st1;
	tstatus(&st0);
	memset(S_each, 0, sizeof S_each);
	atomic_store(&reader_stop, 0);
	pthread_t th[NREADERS];
	for (intptr_t r = 0; r < NREADERS; r++)
		pthread_create(&th[r], NULL, reader, (void *)r);
	usleep(PERIOD_MS * 1000);
	int rc = 0;
	for (int i = 0; i < CHANGES && rc == 0; i++) {
		rc = change(name, i, cs_list, ncs);
		usleep(PERIOD_MS * 1000);
	}
	restore_all();
	usleep(PERIOD_MS * 1000); /* readings across the restore too */
	atomic_store(&reader_stop, 1);
	for (int r = 0; r < NREADERS; r++)
		pthread_join(th[r], NULL);
	struct stats S;
	memset(&S, 0, sizeof S);
	for (int r = 0; r < NREADERS; r++) {
		const struct stats *e = &S_each[r];
		S.reads += e->reads;
		S.g1_bad += e->g1_bad;
		S.g2_bad += e->g2_bad;
		S.g3_bad += e->g3_bad;
		S.g4_bad += e->g4_bad;
		if (e->g1_worst > S.g1_worst) {
			S.g1_worst = e->g1_worst;
			S.g1_worst_id = e->g1_worst_id;
		}
		if (e->th_coarse_lag > S.th_coarse_lag)
			S.th_coarse_lag = e->th_coarse_lag;
		if (e->k_coarse_lag > S.k_coarse_lag)
			S.k_coarse_lag = e->k_coarse_lag;
		if (!S.first[0] && e->first[0])
			memcpy(S.first, e->first, sizeof S.first);
	}
	tstatus(&st1);
	/* A process that left the daemon's page during the last change may be
	 * rejoining it when the readers stop, and a join completes only on a
	 * read once the local line runs out: read on, up to two seconds, for
	 * the mode to settle. A mode that does not come back still fails. */
	int settle_ms = 0;
	while (st1.mode != st0.mode && settle_ms < 2000) {
		struct timespec t, pause = {0, 10 * 1000000};
		for (int k = 0; k < 1000; k++)
			tread(CLOCK_MONOTONIC, &t);
		nanosleep(&pause, NULL);
		settle_ms += 10;
		tstatus(&st1);
	}
	if (rc != 0) {
		printf("  %-12s FAIL: the change could not be made\n", name);
		return 1;
	}
	uint64_t slow = st1.slow_reads - st0.slow_reads;
	double slow_pct = S.reads ? 100.0 * (double)slow / (double)S.reads : 0;
	int bad = S.g1_bad || S.g2_bad || S.g3_bad || S.g4_bad || (slow_pct > 1.0 && !kernel_mode_expected) ||
		  st1.mode != st0.mode ||
		  S.th_coarse_lag > S.k_coarse_lag + tick_ns;
	printf("  %-12s %s: %llu readings; G1 %llu off by > 1 us (worst %.3f us, %s); G2 %llu, G3 %llu, G4 %llu; "
	       "coarse lag %.3f ms (kernel %.3f ms); %.2f %% from the kernel; mode %s -> %s\n",
	       name, bad ? "FAIL" : "ok", (unsigned long long)S.reads, (unsigned long long)S.g1_bad,
	       (double)S.g1_worst / 1e3, S.g1_bad ? fine_names[S.g1_worst_id] : "-", (unsigned long long)S.g2_bad,
	       (unsigned long long)S.g3_bad, (unsigned long long)S.g4_bad, (double)S.th_coarse_lag / 1e6,
	       (double)S.k_coarse_lag / 1e6, slow_pct, mode_name(st0.mode), mode_name(st1.mode));
	if (bad && S.first[0])
		printf("  %-12s first: %s\n", "", S.first);
	if (st1.mode != st0.mode)
		printf("  %-12s reason now: %s\n", "", st1.reason);
	else if (settle_ms > 0)
		printf("  %-12s mode back after %d ms of reads past the end\n", "", settle_ms);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	th_kclock_init();
	path_init();
	const char *expect = NULL;
	int first = 1;
	if (argc > 2 && !strcmp(argv[1], "--expect")) {
		expect = argv[2];
		first = 3;
		kernel_mode_expected = !strcmp(expect, "kernel");
	}
	if (first >= argc && strcmp(argv[argc - 1], "--probe") != 0) {
		fprintf(stderr, "usage: %s [--expect local|shared|kernel] SCENARIO... (freq tick tick10 pll "
				"setoffset step steppair clocksource, or all)\n",
			argv[0]);
		return 2;
	}
	memset(&orig_tx, 0, sizeof orig_tx);
	if (adjtimex(&orig_tx) < 0) {
		printf("faults: SKIP: adjtimex cannot be read: %s\n", strerror(errno));
		return 77;
	}
	/* Is changing it allowed? Set the frequency to what it is. */
	struct timex probe = {.modes = ADJ_FREQUENCY, .freq = orig_tx.freq};
	if (adjtimex(&probe) < 0) {
		printf("faults: SKIP: the kernel refuses adjtimex changes here (%s): run as root, outside a "
		       "container that drops CAP_SYS_TIME\n",
		       strerror(errno));
		return 77;
	}
	if (!strcmp(argv[1], "--probe")) {
		printf("faults: the kernel accepts adjtimex changes here\n");
		return 0;
	}
	read_file(cs_path, orig_cs, sizeof orig_cs);
	have_orig = 1;
	atexit(restore_all);
	int sigs[] = {SIGINT, SIGTERM, SIGALRM, SIGSEGV, SIGABRT, SIGHUP};
	for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
		signal(sigs[i], on_signal);
	struct timespec res;
	if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && ts_ns(&res) > 0)
		tick_ns = ts_ns(&res);

	/* warm up: attach, and the first records */
	struct timespec t;
	for (int i = 0; i < 1000; i++)
		tread(CLOCK_MONOTONIC, &t);
	struct th_status st;
	if (tstatus(&st) != 0) {
		printf("faults: FAIL: no th_status (%s not in effect?)\n", PATH_NAME);
		return 1;
	}
	if (expect) {
		/* a process joins the daemon's page at its first read or a
		 * windup soon after: wait for it, bounded */
		for (int i = 0; i < 300 && strcmp(mode_name(st.mode), expect) != 0; i++) {
			if (strstr(st.reason, "in time")) {
				/* The daemon did not answer within the millisecond
				 * of the first reading (G8; a loaded machine, a
				 * vCPU slow to wake): this process stays local for
				 * good, a new one may join. */
				printf("faults: AGAIN: mode %s, expected %s: %s\n", mode_name(st.mode), expect,
				       st.reason);
				return 75;
			}
			usleep(50000);
			tread(CLOCK_MONOTONIC, &t);
			tstatus(&st);
		}
		if (strcmp(mode_name(st.mode), expect) != 0) {
			printf("faults: FAIL: mode %s, expected %s: %s\n", mode_name(st.mode), expect, st.reason);
			return 1;
		}
	}
	printf("faults: %s, mode %s, clocksource %s, tick %.1f ms, kernel tick %ld us, freq %+.3f ppm\n", PATH_NAME,
	       mode_name(st.mode), orig_cs, (double)tick_ns / 1e6, orig_tx.tick, (double)orig_tx.freq / 65536.0);
	if (st.mode == TH_MODE_KERNEL)
		printf("faults: kernel mode at the start: %s\n", st.reason);
	static const char *const all[] = {"freq", "tick", "tick10", "pll", "setoffset", "step", "steppair", "clocksource"};
	int failed = 0, ran = 0;
	for (int a = first; a < argc; a++) {
		int is_all = !strcmp(argv[a], "all");
		size_t n = is_all ? sizeof all / sizeof *all : 1;
		for (size_t k = 0; k < n; k++) {
			int r = scenario(is_all ? all[k] : argv[a]);
			if (r == 1)
				failed++;
			if (r != 77)
				ran++;
		}
	}
	restore_all();
	printf("faults: %s: %d of %d scenarios failed\n", PATH_NAME, failed, ran);
	return failed ? 1 : 0;
}
