/*
 * The direct read of the kernel's coarse clock (src/counter/kdata.h).
 *
 *   layouts   th_kdata_locate on hand-built pages: both known places of the
 *             clock data are found; a page with an odd count, the time
 *             namespace marker, an implausible mask or shift, or bases that
 *             differ from the vDSO's readings by a nanosecond is refused.
 *   live      on this machine: where the kernel maps [vvar] and this process
 *             is not in another time namespace, the direct read must be found
 *             (x86-64 and arm64 kernels since 5.3 lay the page out so); every
 *             direct reading lies between two vDSO readings, across ticks, and
 *             the count it reads is seen to move.
 *             Run as `test_kdata timens` in another time namespace, the
 *             direct read must be off (page 0 is the namespace's).
 *   setns     a process that attached, then moved itself into a new time
 *             namespace (setns: its page 0 becomes the namespace's, whose
 *             count is odd and whose REALTIME "base" is an offset of 0):
 *             th_time(), inline and library, still equals the kernel's
 *             time(), and the direct coarse read reports "updating" (root).
 *   off       th_kdata_off: reads report "no direct read" and coarse clocks
 *             stay correct through the vDSO.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "counter/kclock.h"
#include "counter/kdata.h"
#include "timehands.h"

static void put32(unsigned char *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void put64(unsigned char *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

/* A page in the generic vDSO layout: clock data at `start`, `hdr` bytes of
 * header before the per-clock bases. */
static void build(unsigned char *page, size_t start, size_t hdr, const struct timespec *mono,
		  const struct timespec *real)
{
	memset(page, 0xa5, 4096);
	unsigned char *c = page + start;
	put32(c, 1234);             /* seq, even */
	put32(c + 4, 2);            /* clock mode: pvclock */
	put64(c + 8, 987654321);    /* cycle_last */
	if (hdr == 40)
		put64(c + 16, 1u << 30); /* max_cycles */
	put64(c + hdr - 16, ~0ULL); /* mask */
	put32(c + hdr - 8, 8388608); /* mult */
	put32(c + hdr - 4, 23);     /* shift */
	for (int i = 0; i < 12; i++) {
		put64(c + hdr + 16 * (size_t)i, 1000 + (uint64_t)i);
		put64(c + hdr + 16 * (size_t)i + 8, 7 + (uint64_t)i);
	}
	put64(c + hdr + 16 * CLOCK_MONOTONIC_COARSE, (uint64_t)mono->tv_sec);
	put64(c + hdr + 16 * CLOCK_MONOTONIC_COARSE + 8, (uint64_t)mono->tv_nsec);
	put64(c + hdr + 16 * CLOCK_REALTIME_COARSE, (uint64_t)real->tv_sec);
	put64(c + hdr + 16 * CLOCK_REALTIME_COARSE + 8, (uint64_t)real->tv_nsec);
}

static void layouts(void)
{
	static unsigned char page[4096];
	const struct timespec m = {86400, 123456789}, r = {1790000000, 987654321};
	const size_t starts[] = {0, 128}, hdrs[] = {32, 40};
	for (int i = 0; i < 2; i++) {
		for (int j = 0; j < 2; j++) {
			size_t so = 1, mo = 1, s = starts[i], h = hdrs[j];
			build(page, s, h, &m, &r);
			CHECK(th_kdata_locate(page, sizeof page, &m, &r, &so, &mo) == 0, "start %zu header %zu", s, h);
			CHECK(so == s && mo == s + h + 16 * CLOCK_MONOTONIC_COARSE, "start %zu header %zu: %zu %zu", s,
			      h, so, mo);
			struct timespec m1 = m, r1 = r;
			m1.tv_nsec++;
			CHECK(th_kdata_locate(page, sizeof page, &m1, &r, &so, &mo) != 0, "mono off by 1 ns");
			r1.tv_sec--;
			CHECK(th_kdata_locate(page, sizeof page, &m, &r1, &so, &mo) != 0, "realtime off by 1 s");
			/* each implausible header field alone */
			struct {
				size_t off;
				int wide;
				uint64_t v;
				const char *what;
			} bad[] = {
				{0, 0, 1235, "odd count"},
				{4, 0, INT_MAX, "time namespace marker"},
				{4, 0, 99, "unknown clock mode"},
				{h - 16, 1, 0x1234, "mask not 2^k-1"},
				{h - 16, 1, 0, "zero mask"},
				{h - 8, 0, 0, "zero mult"},
				{h - 4, 0, 64, "shift 64"},
			};
			for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
				build(page, s, h, &m, &r);
				if (bad[k].wide)
					put64(page + s + bad[k].off, bad[k].v);
				else
					put32(page + s + bad[k].off, (uint32_t)bad[k].v);
				CHECK(th_kdata_locate(page, sizeof page, &m, &r, &so, &mo) != 0,
				      "start %zu header %zu: accepted with %s", s, h, bad[k].what);
			}
		}
	}
	/* clock data anywhere else is not looked for */
	build(page, 64, 40, &m, &r);
	size_t so, mo;
	CHECK(th_kdata_locate(page, sizeof page, &m, &r, &so, &mo) != 0, "clock data at 64 accepted");
	/* a page too short for the bases */
	build(page, 0, 40, &m, &r);
	CHECK(th_kdata_locate(page, 100, &m, &r, &so, &mo) != 0, "truncated page accepted");
}

/* Start of [vvar] (0 if none) and whether its page 0 is a time namespace's. */
static uintptr_t vvar_start(int *timens)
{
	*timens = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return 0;
	char line[512];
	uintptr_t a = 0;
	while (fgets(line, sizeof line, f)) {
		if (strstr(line, " [vvar]\n")) {
			unsigned long lo;
			if (sscanf(line, "%lx-", &lo) == 1)
				a = (uintptr_t)lo;
		}
	}
	fclose(f);
	if (a) {
		const unsigned char *p = (const unsigned char *)a;
		for (size_t s = 0; s <= 128; s += 128) {
			int32_t mode;
			memcpy(&mode, p + s + 4, 4);
			if (mode == INT_MAX)
				*timens = 1;
		}
	}
	return a;
}

static uint64_t vdso_coarse(void)
{
	struct timespec t;
	CHECK(th_kclock_gettime(CLOCK_MONOTONIC_COARSE, &t) == 0, "vDSO coarse");
	return (uint64_t)ts_to_ns(&t);
}

static void live(int in_timens)
{
	int timens;
	uintptr_t vv = vvar_start(&timens);
	th_kclock_init();
	th_kdata_init();
	int on = th_kdata_check();
	printf("live: [vvar] %s%s, direct read %s\n", vv ? "mapped" : "absent", timens ? " (time namespace)" : "",
	       on ? "on" : "off");
#if defined(__x86_64__) || defined(__aarch64__)
	if (vv && !timens && TH_VDSO(clock_gettime))
		CHECK(on, "the kernel maps [vvar] but its clock data was not found");
#endif
	if (in_timens)
		CHECK(timens && !on, "run in a time namespace: page 0 %s, direct read %s",
		      timens ? "the namespace's" : "not the namespace's", on ? "on" : "off");
	struct th_status st;
	th_status(&st, sizeof st);
	const char *want = on ? "data page" : TH_VDSO(clock_gettime) ? "vdso" : "system call";
	CHECK(strcmp(st.kernel_tick, want) == 0, "status says the kernel tick is read from %s, not %s",
	      st.kernel_tick, want);
	if (!on)
		return;
	CHECK((uintptr_t)th_kdata.seq >= vv && (uintptr_t)th_kdata.seq < vv + 4096, "count outside [vvar] page 0");
	/* sandwiches for ~30 ms (several kernel ticks) */
	uint32_t seq0 = __atomic_load_n(th_kdata.seq, __ATOMIC_RELAXED);
	uint64_t first = 0, last = 0, n = 0, misses = 0;
	int64_t end = raw_now_ns() + 30000000;
	while (raw_now_ns() < end || n < 100000) {
		uint64_t a = vdso_coarse(), v;
		int got = th_kdata_mono_coarse(&v);
		uint64_t b = vdso_coarse();
		if (!got) {
			misses++;
			continue;
		}
		CHECK(a <= v && v <= b, "direct %llu not within [%llu, %llu]", (unsigned long long)v,
		      (unsigned long long)a, (unsigned long long)b);
		if (!first)
			first = v;
		last = v;
		n++;
	}
	uint32_t seq1 = __atomic_load_n(th_kdata.seq, __ATOMIC_RELAXED);
	CHECK(last > first, "the direct reading did not advance over 30 ms");
	CHECK(seq1 != seq0 && (seq1 - seq0) % 2 == 0, "count %u -> %u", seq0, seq1);
	CHECK(misses * 100 < n, "%llu of %llu direct reads found the kernel updating", (unsigned long long)misses,
	      (unsigned long long)n);
	printf("live: %llu sandwiches, %llu retries to the vDSO, count +%u\n", (unsigned long long)n,
	       (unsigned long long)misses, seq1 - seq0);
}

static int setns_child(void)
{
	time_t t0 = th_time(NULL); /* attach, and a fine read sets the G3 floor */
	(void)t0;
	if (unshare(CLONE_NEWTIME) != 0)
		return 77;
	int fd = open("/proc/self/timens_offsets", O_WRONLY);
	if (fd < 0 || write(fd, "monotonic 86400 0", 17) != 17)
		return 77;
	close(fd);
	fd = open("/proc/self/ns/time_for_children", O_RDONLY);
	if (fd < 0 || setns(fd, CLONE_NEWTIME) != 0)
		return 77;
	close(fd);
	int timens;
	vvar_start(&timens);
	CHECK(timens, "after setns page 0 is not the namespace's");
	uint64_t v;
	CHECK(!th_kdata_mono_coarse(&v), "direct coarse read from a time namespace's page");
	struct th_status st;
	th_status(&st, sizeof st);
	CHECK(strcmp(st.kernel_tick, "vdso") == 0, "after setns status says %s", st.kernel_tick);
	int64_t end = raw_now_ns() + 1500000000; /* across a second boundary */
	while (raw_now_ns() < end) {
		time_t a = th_ktime(NULL);
		time_t x = th_time(NULL);
		time_t y;
		th_time(&y);
		time_t b = th_ktime(NULL);
		CHECK(a <= x && x <= b && a <= y && y <= b, "th_time %lld/%lld outside [%lld, %lld]", (long long)x,
		      (long long)y, (long long)a, (long long)b);
		if (check_failures)
			break;
	}
	int r = check_done("setns") ? 1 : 0;
	fflush(stdout);
	return r;
}

static void setns_case(void)
{
	if (getuid() != 0) {
		printf("setns: not root, not run\n");
		return;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		_exit(setns_child());
	if (pid < 0)
		return;
	int st = 0;
	waitpid(pid, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		printf("setns: no time namespaces here\n");
		return;
	}
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "setns child status %#x", st);
}

static void off(void)
{
	th_kdata_off();
	uint64_t v;
	CHECK(!th_kdata_mono_coarse(&v), "direct read after off");
	CHECK(!th_kdata_check(), "check after off");
	struct th_status st;
	th_status(&st, sizeof st);
	CHECK(strcmp(st.kernel_tick, TH_VDSO(clock_gettime) ? "vdso" : "system call") == 0, "status after off: %s",
	      st.kernel_tick);
	/* coarse clocks through the vDSO: still within the kernel's */
	struct timespec res;
	th_kclock_getres(CLOCK_MONOTONIC_COARSE, &res);
	for (int i = 0; i < 10000; i++) {
		struct timespec a, t, b;
		th_kclock_gettime(CLOCK_MONOTONIC_COARSE, &a);
		th_clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
		th_kclock_gettime(CLOCK_MONOTONIC, &b);
		CHECK(ts_to_ns(&t) <= ts_to_ns(&b), "coarse %lld above a later fine %lld", (long long)ts_to_ns(&t),
		      (long long)ts_to_ns(&b));
		/* no more behind than the kernel's own coarse clock, plus a
		 * tick (the record of the tick before) */
		CHECK(ts_to_ns(&t) >= ts_to_ns(&a) - 2 * ts_to_ns(&res), "coarse %lld ns behind the kernel's",
		      (long long)(ts_to_ns(&a) - ts_to_ns(&t)));
	}
}

int main(int argc, char **argv)
{
	layouts();
	live(argc > 1 && strcmp(argv[1], "timens") == 0);
	setns_case();
	off();
	return check_done("kdata");
}
