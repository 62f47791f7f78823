/*
 * timehands check: what this machine's clocks cost and whether they can be
 * trusted, and what timehands makes of them.
 *
 *   1. the kernel's clocksource and its alternatives;
 *   2. per clock id, the cost of the kernel's clock through the vDSO and as a
 *      raw system call, and whether the vDSO falls back to the system call
 *      (the CPU-time clocks always; every clock on Xen, Hyper-V without the
 *      TSC page, an unstable pvclock), found under a seccomp filter in a
 *      child, else from the costs; next to timehands' cost for the same read
 *      and the counter floor;
 *   3. the counter: present, invariant, trusted by the policy, frequency;
 *   4. cross-CPU synchronisation: ping-pong between threads pinned to two
 *      CPUs bounds the counter offset between them, and shows any backward
 *      step of the kernel's and timehands' MONOTONIC across CPUs;
 *   5. the kernel's own time()/gettimeofday() incoherence over one second
 *      (time() returning a second below the one gettimeofday() just gave),
 *      next to timehands' (which must be zero);
 *   6. a one-line verdict.
 * It takes about two seconds. Costs are medians of interleaved batches.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/times.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "counter.h"
#include "kclock.h"
#include "timehands.h"
#include "trust.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield" ::: "memory")
#else
#define cpu_relax() ((void)0)
#endif

static double mono_ns(void)
{
	struct timespec ts;
	th_kclock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ---------------------------------------------------------------- costs */

/* Each loop sums its results into a register and returns them once. */
typedef uint64_t (*loop_fn)(clockid_t id, uint64_t n);

static uint64_t loop_vdso(clockid_t id, uint64_t n)
{
	struct timespec ts = {0, 0};
	uint64_t s = 0;
	for (uint64_t i = 0; i < n; i++) {
		th_kclock_gettime(id, &ts);
		s += (uint64_t)ts.tv_nsec;
	}
	return s;
}

static uint64_t loop_sys(clockid_t id, uint64_t n)
{
	struct timespec ts = {0, 0};
	uint64_t s = 0;
	for (uint64_t i = 0; i < n; i++) {
		syscall(SYS_clock_gettime, id, &ts);
		s += (uint64_t)ts.tv_nsec;
	}
	return s;
}

static uint64_t loop_th(clockid_t id, uint64_t n)
{
	struct timespec ts = {0, 0};
	uint64_t s = 0;
	for (uint64_t i = 0; i < n; i++) {
		th_clock_gettime(id, &ts);
		s += (uint64_t)ts.tv_nsec;
	}
	return s;
}

static uint64_t loop_ktime(clockid_t id, uint64_t n)
{
	(void)id;
	uint64_t s = 0;
	for (uint64_t i = 0; i < n; i++)
		s += (uint64_t)th_ktime(NULL);
	return s;
}

static uint64_t loop_systime(clockid_t id, uint64_t n)
{
	(void)id;
	uint64_t s = 0;
	for (uint64_t i = 0; i < n; i++) {
#ifdef SYS_time
		s += (uint64_t)syscall(SYS_time, NULL);
#else
		struct timespec ts;
		syscall(SYS_clock_gettime, CLOCK_REALTIME_COARSE, &ts);
		s += (uint64_t)ts.tv_sec;
#endif
	}
	return s;
}

static uint64_t loop_thtime(clockid_t id, uint64_t n)
{
	(void)id;
	uint64_t s = 0;
	for (uint64_t i = 0; i < n; i++)
		s += (uint64_t)th_time(NULL);
	return s;
}

static uint64_t loop_kgtod(clockid_t id, uint64_t n)
{
	(void)id;
	struct timeval tv = {0, 0};
	uint64_t s = 0;
	for (uint64_t i = 0; i < n; i++) {
		th_kgettimeofday(&tv, NULL);
		s += (uint64_t)tv.tv_usec;
	}
	return s;
}

static uint64_t loop_sysgtod(clockid_t id, uint64_t n)
{
	(void)id;
	struct timeval tv = {0, 0};
	uint64_t s = 0;
	for (uint64_t i = 0; i < n; i++) {
		syscall(SYS_gettimeofday, &tv, NULL);
		s += (uint64_t)tv.tv_usec;
	}
	return s;
}

static uint64_t loop_thgtod(clockid_t id, uint64_t n)
{
	(void)id;
	struct timeval tv = {0, 0};
	uint64_t s = 0;
	for (uint64_t i = 0; i < n; i++) {
		th_gettimeofday(&tv, NULL);
		s += (uint64_t)tv.tv_usec;
	}
	return s;
}

static uint64_t loop_systimes(clockid_t id, uint64_t n)
{
	(void)id;
	struct tms t;
	uint64_t s = 0;
	for (uint64_t i = 0; i < n; i++)
		s += (uint64_t)syscall(SYS_times, &t);
	return s;
}

static uint64_t loop_thtimes(clockid_t id, uint64_t n)
{
	(void)id;
	struct tms t;
	uint64_t s = 0;
	for (uint64_t i = 0; i < n; i++)
		s += (uint64_t)th_times(&t);
	return s;
}

static uint64_t loop_thclock(clockid_t id, uint64_t n)
{
	(void)id;
	uint64_t s = 0;
	for (uint64_t i = 0; i < n; i++)
		s += (uint64_t)th_clock();
	return s;
}

#if TH_COUNTER_KIND
static uint64_t loop_floor_ordered(clockid_t id, uint64_t n)
{
	(void)id;
	uint64_t s = 0;
	for (uint64_t i = 0; i < n; i++)
		s += th_counter_ordered();
	return s;
}

static uint64_t loop_floor_relaxed(clockid_t id, uint64_t n)
{
	(void)id;
	uint64_t s = 0;
	for (uint64_t i = 0; i < n; i++)
		s += th_counter_relaxed();
	return s;
}
#endif

static volatile uint64_t sink; /* one store per batch keeps the loops alive */

/* Calls per batch so that one batch takes about 0.5 ms. */
static uint64_t batch_size(loop_fn f, clockid_t id)
{
	uint64_t n = 16;
	for (;;) {
		double t0 = mono_ns();
		sink = f(id, n);
		double dt = mono_ns() - t0;
		if (dt >= 250e3 || n >= (1u << 22))
			return dt < 500e3 ? n * 2 : n;
		n *= 2;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

#define REPS 7
#define MAXC 4

/* ns per call of each contender, measured interleaved A B C A B C ... */
static void measure(const loop_fn *f, const clockid_t *id, int nc, double *out)
{
	uint64_t n[MAXC];
	double v[MAXC][REPS];
	for (int c = 0; c < nc; c++)
		n[c] = f[c] ? batch_size(f[c], id[c]) : 0;
	for (int r = 0; r < REPS; r++)
		for (int c = 0; c < nc; c++) {
			if (!f[c])
				continue;
			double t0 = mono_ns();
			sink = f[c](id[c], n[c]);
			v[c][r] = (mono_ns() - t0) / (double)n[c];
		}
	for (int c = 0; c < nc; c++) {
		if (!f[c]) {
			out[c] = NAN;
			continue;
		}
		qsort(v[c], REPS, sizeof(double), cmp_double);
		out[c] = v[c][REPS / 2];
	}
}

struct row {
	const char *name;
	clockid_t id;      /* kernel id */
	clockid_t alt;     /* timehands' faster variant, or 0 */
	const char *alt_name;
	loop_fn kernel, sys, th, thalt;
	/* results */
	double k_ns, sys_ns, th_ns, alt_ns;
	int fallback; /* the kernel's entry point costs a system call */
};

static const char *kernel_path(const struct row *r)
{
	return r->fallback ? "syscall" : "vdso";
}

/* Which of the kernel's entry points make a system call, found without a
 * clock: a child process installs a seccomp filter under which the clock
 * system calls fail with a marker errno (everything else is allowed), calls
 * each row's kernel entry point once and reports the rows whose call failed
 * with the marker. The vDSO falls back to the system call for clock ids it
 * does not serve (the CPU-time clocks) and for every id when the clocksource
 * has no vDSO mode; a timing test cannot tell that apart from a preempted
 * batch on a loaded machine. Returns 0 and fills fell[] (one byte a row), or
 * -1 where the filter cannot be installed (no seccomp, an emulator): the
 * caller then falls back to comparing costs. */
#define PROBE_MARK ENOTRECOVERABLE
#if defined(__x86_64__)
#define PROBE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define PROBE_ARCH AUDIT_ARCH_AARCH64
#endif

#ifdef PROBE_ARCH
static int probe_filter(void)
{
#define PROBE_FAIL(nr) \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | PROBE_MARK)
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROBE_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		PROBE_FAIL(__NR_clock_gettime),
		PROBE_FAIL(__NR_gettimeofday),
#ifdef __NR_time
		PROBE_FAIL(__NR_time),
#endif
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
#undef PROBE_FAIL
	struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof *f), f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		return -1;
	/* The filter works: a raw system call fails with the marker. */
	struct timespec ts;
	errno = 0;
	if (syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts) == 0 || errno != PROBE_MARK)
		return -1;
	return 0;
}
#endif

static int probe_kernel_paths(const struct row *rows, size_t n, unsigned char *fell)
{
#ifdef PROBE_ARCH
	int fd[2];
	if (n > 64 || pipe(fd) != 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(fd[0]);
		close(fd[1]);
		return -1;
	}
	if (pid == 0) {
		unsigned char out[1 + 64] = {0};
		close(fd[0]);
		if (probe_filter() == 0) {
			out[0] = 1;
			for (size_t i = 0; i < n; i++) {
				if (!rows[i].kernel)
					continue;
				errno = 0;
				rows[i].kernel(rows[i].id, 1);
				out[1 + i] = errno == PROBE_MARK;
			}
		}
		ssize_t w = write(fd[1], out, 1 + n);
		_exit(w == (ssize_t)(1 + n) ? 0 : 1);
	}
	close(fd[1]);
	unsigned char in[1 + 64];
	size_t got = 0;
	while (got < 1 + n) {
		ssize_t r = read(fd[0], in + got, 1 + n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (got != 1 + n || !in[0] || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -1;
	memcpy(fell, in + 1, n);
	return 0;
#else
	(void)rows, (void)n, (void)fell;
	return -1;
#endif
}

/* --------------------------------------------------------------- counter */

struct counter_info {
	int present, invariant, rdtscp_cpuid;
	char flags[160];     /* cpuinfo flags about the counter */
	char hypervisor[16];
	struct th_trust trust;
};

static void counter_probe(struct counter_info *ci, int counter_mode)
{
	memset(ci, 0, sizeof *ci);
	th_trust_probe(&ci->trust, counter_mode);
	ci->present = ci->trust.available != TH_COUNTER_NONE;
	ci->invariant = ci->trust.invariant;
#if defined(__x86_64__)
	unsigned a, b, c, d;
	if ((unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x80000001u) {
		__cpuid(0x80000001u, a, b, c, d);
		ci->rdtscp_cpuid = (d >> 27) & 1;
	}
	__cpuid(1, a, b, c, d);
	if (c & (1u << 31)) {
		__cpuid(0x40000000u, a, b, c, d);
		memcpy(ci->hypervisor, &b, 4);
		memcpy(ci->hypervisor + 4, &c, 4);
		memcpy(ci->hypervisor + 8, &d, 4);
		ci->hypervisor[12] = 0;
		for (int i = 11; i >= 0 && (ci->hypervisor[i] == ' ' || ci->hypervisor[i] == 0); i--)
			ci->hypervisor[i] = 0;
	}
	static char buf[65536];
	if (th_read_small_file("/proc/cpuinfo", buf, sizeof buf) > 0) {
		const char *fl = strstr(buf, "\nflags");
		const char *eol = fl ? strchr(fl + 1, '\n') : NULL;
		static const char *const names[] = {"constant_tsc", "nonstop_tsc", "tsc_known_freq",
						    "tsc_reliable", "rdtscp", "tsc_adjust"};
		for (size_t i = 0; fl && i < sizeof names / sizeof *names; i++) {
			char pat[40];
			snprintf(pat, sizeof pat, " %s", names[i]);
			size_t pl = strlen(pat);
			for (const char *p = strstr(fl, pat); p && (!eol || p < eol); p = strstr(p + 1, pat)) {
				if (p[pl] == ' ' || p[pl] == '\n' || p[pl] == 0) {
					size_t n = strlen(ci->flags);
					snprintf(ci->flags + n, sizeof ci->flags - n, "%s%s", n ? " " : "", names[i]);
					break;
				}
			}
		}
	}
#endif
}

/* ----------------------------------------------------- cross-CPU ping-pong */

enum { PP_COUNTER = 0, PP_KERNEL = 1, PP_TIMEHANDS = 2, PP_KINDS = 3 };
static const char *const pp_names[PP_KINDS] = {"counter", "kernel_monotonic", "timehands_monotonic"};

struct pingpong {
	/* turn: 2k for A's k-th read, 2k+1 for B's. Release on store, acquire
	 * on load: the value in `val` and the read that produced it happen
	 * before the peer's own read. */
	_Atomic uint64_t turn;
	_Atomic uint64_t val;
	_Atomic int stop;
	int kind, cpu[2];
	double deadline;
	/* results, each written by one thread and read after join */
	int64_t min_d[2];      /* [0]: B - A, [1]: A - B (next round) */
	uint64_t backward[2], rounds[2];
	int pinned[2];
};

/* The counter, read after every earlier load of this thread has completed.
 * On x86 the LFENCE is written as an asm with a memory clobber: the
 * _mm_lfence() intrinsic is no compiler barrier, and GCC may schedule it
 * before the acquire load it must follow. */
static inline uint64_t counter_after_loads(void)
{
#if defined(__x86_64__)
	__asm__ volatile("lfence" ::: "memory");
	return __rdtsc();
#else
	return th_counter_ordered();
#endif
}

static inline uint64_t pp_read(int kind)
{
	struct timespec ts;
	switch (kind) {
	case PP_COUNTER:
		/* taken after the acquire load of turn, and before the release
		 * store that hands the turn over (x86 stores become visible
		 * after the RDTSC before them has executed) */
		return counter_after_loads();
	case PP_KERNEL:
		th_kclock_gettime(CLOCK_MONOTONIC, &ts);
		break;
	default:
		th_clock_gettime(CLOCK_MONOTONIC, &ts);
		break;
	}
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct pp_arg {
	struct pingpong *pp;
	int side;
};

static int pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

static void *pp_thread(void *arg)
{
	struct pp_arg *a = arg;
	struct pingpong *pp = a->pp;
	int side = a->side;
	pp->pinned[side] = pin(pp->cpu[side]);
	pp->min_d[side] = INT64_MAX;
	for (uint64_t k = 0;; k++) {
		uint64_t want = 2 * k + (uint64_t)side;
		unsigned spins = 0;
		while (atomic_load_explicit(&pp->turn, memory_order_acquire) != want) {
			if (atomic_load_explicit(&pp->stop, memory_order_relaxed))
				return NULL;
			if ((++spins & 0xfff) == 0 && mono_ns() > pp->deadline) {
				atomic_store_explicit(&pp->stop, 1, memory_order_relaxed);
				return NULL;
			}
			cpu_relax();
		}
		/* Relaxed: ordered by the acquire load of turn above, which
		 * read the peer's release store made after this value. */
		uint64_t peer = atomic_load_explicit(&pp->val, memory_order_relaxed);
		uint64_t mine = pp_read(pp->kind);
		if (want > 0) {
			int64_t d = (int64_t)(mine - peer);
			if (d < pp->min_d[side])
				pp->min_d[side] = d;
			if (d < 0)
				pp->backward[side]++;
			pp->rounds[side]++;
		}
		if ((k & 255) == 0 && mono_ns() > pp->deadline) {
			atomic_store_explicit(&pp->stop, 1, memory_order_relaxed);
			return NULL;
		}
		atomic_store_explicit(&pp->val, mine, memory_order_relaxed);
		/* Release: the peer that acquires this turn sees `val`. */
		atomic_store_explicit(&pp->turn, want + 1, memory_order_release);
	}
}

static int pingpong_run(struct pingpong *pp, int kind, int cpu_a, int cpu_b, double ms)
{
	memset(pp, 0, sizeof *pp);
	pp->kind = kind;
	pp->cpu[0] = cpu_a;
	pp->cpu[1] = cpu_b;
	pp->deadline = mono_ns() + ms * 1e6;
	pthread_t t[2];
	struct pp_arg args[2] = {{pp, 0}, {pp, 1}};
	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, pp_thread, &args[i]) != 0)
			return -1;
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return pp->pinned[0] && pp->pinned[1] ? 0 : -1;
}

struct sync_result {
	int cpu_a, cpu_b, ok;
	/* counter offset of cpu_b minus cpu_a lies in [lo, hi] ticks */
	int64_t lo, hi;
	uint64_t rounds[PP_KINDS], backward[PP_KINDS];
	int64_t min_step[PP_KINDS];
};

static void sync_pair(int a, int b, double ms_per_kind, struct sync_result *res)
{
	struct pingpong pp;
	memset(res, 0, sizeof *res);
	res->cpu_a = a;
	res->cpu_b = b;
	res->ok = 1;
	for (int kind = 0; kind < PP_KINDS; kind++) {
#if !TH_COUNTER_KIND
		if (kind == PP_COUNTER)
			continue;
#endif
		if (pingpong_run(&pp, kind, a, b, ms_per_kind) != 0) {
			res->ok = 0;
			return;
		}
		res->rounds[kind] = pp.rounds[0] + pp.rounds[1];
		res->backward[kind] = pp.backward[0] + pp.backward[1];
		res->min_step[kind] = pp.min_d[0] < pp.min_d[1] ? pp.min_d[0] : pp.min_d[1];
		if (kind == PP_COUNTER) {
			/* B - A = latency + offset >= offset; A' - B = latency -
			 * offset >= -offset. */
			res->hi = pp.min_d[1] == INT64_MAX ? 0 : pp.min_d[0];
			res->lo = pp.min_d[1] == INT64_MAX ? 0 : -pp.min_d[1];
		}
	}
}

/* ------------------------------------------------------------ coherence */

struct coherence {
	uint64_t k_calls, k_bad, t_calls, t_bad;
	double seconds;
};

/* One second of gettimeofday(); time() pairs, the kernel's and timehands'
 * interleaved: any one-second window holds exactly one second boundary. */
static void coherence_run(struct coherence *c, double ms)
{
	memset(c, 0, sizeof *c);
	double t0 = mono_ns(), end = t0 + ms * 1e6;
	struct timeval tv;
	for (;;) {
		for (int i = 0; i < 256; i++) {
			th_kgettimeofday(&tv, NULL);
			time_t k = th_ktime(NULL);
			c->k_bad += k < tv.tv_sec;
			th_gettimeofday(&tv, NULL);
			time_t t = th_time(NULL);
			c->t_bad += t < tv.tv_sec;
		}
		c->k_calls += 256;
		c->t_calls += 256;
		if (mono_ns() >= end)
			break;
	}
	c->seconds = (mono_ns() - t0) / 1e9;
}

/* ----------------------------------------------------------------- main */

static const char *env_get(const char *name, void *ctx)
{
	(void)ctx;
	return getenv(name);
}

static void emit_cost(struct th_emit *e, const char *key, double ns)
{
	if (!isnan(ns))
		th_emit_num(e, key, ns, 1, "ns");
}

int th_cli_check(int argc, char **argv)
{
	int json = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			json = 1;
		} else {
			fprintf(stderr, "usage: timehands check [--json]\n");
			return strcmp(argv[i], "--help") == 0 ? 0 : 2;
		}
	}

	struct th_config cfg;
	th_config_parse(&cfg, env_get, NULL);
	struct th_status st;
	th_status(&st, sizeof st); /* attaches: the vDSO entry points are known */

	/* 1. clocksource */
	char cs[64] = "unknown", avail[256] = "";
	th_read_small_file("/sys/devices/system/clocksource/clocksource0/current_clocksource", cs, sizeof cs);
	th_read_small_file("/sys/devices/system/clocksource/clocksource0/available_clocksource", avail,
			   sizeof avail);

	/* 2. costs */
	struct row rows[] = {
		{"CLOCK_REALTIME", CLOCK_REALTIME, TH_CLOCK_REALTIME_RELAXED, "relaxed", loop_vdso, loop_sys, loop_th, loop_th, 0, 0, 0, 0, 0},
		{"CLOCK_MONOTONIC", CLOCK_MONOTONIC, TH_CLOCK_MONOTONIC_RELAXED, "relaxed", loop_vdso, loop_sys, loop_th, loop_th, 0, 0, 0, 0, 0},
		{"CLOCK_MONOTONIC_RAW", CLOCK_MONOTONIC_RAW, 0, NULL, loop_vdso, loop_sys, loop_th, NULL, 0, 0, 0, 0, 0},
		{"CLOCK_BOOTTIME", CLOCK_BOOTTIME, 0, NULL, loop_vdso, loop_sys, loop_th, NULL, 0, 0, 0, 0, 0},
		{"CLOCK_TAI", CLOCK_TAI, 0, NULL, loop_vdso, loop_sys, loop_th, NULL, 0, 0, 0, 0, 0},
		{"CLOCK_REALTIME_COARSE", CLOCK_REALTIME_COARSE, 0, NULL, loop_vdso, loop_sys, loop_th, NULL, 0, 0, 0, 0, 0},
		{"CLOCK_MONOTONIC_COARSE", CLOCK_MONOTONIC_COARSE, 0, NULL, loop_vdso, loop_sys, loop_th, NULL, 0, 0, 0, 0, 0},
		{"CLOCK_PROCESS_CPUTIME_ID", CLOCK_PROCESS_CPUTIME_ID, TH_CLOCK_PROCESS_CPUTIME_COARSE, "coarse", loop_vdso, loop_sys, loop_th, loop_th, 0, 0, 0, 0, 0},
		{"CLOCK_THREAD_CPUTIME_ID", CLOCK_THREAD_CPUTIME_ID, TH_CLOCK_THREAD_CPUTIME_COARSE, "coarse", loop_vdso, loop_sys, loop_th, loop_th, 0, 0, 0, 0, 0},
		{"time", 0, 0, NULL, loop_ktime, loop_systime, loop_thtime, NULL, 0, 0, 0, 0, 0},
		{"gettimeofday", 0, 0, NULL, loop_kgtod, loop_sysgtod, loop_thgtod, NULL, 0, 0, 0, 0, 0},
		{"times", 0, 0, NULL, NULL, loop_systimes, loop_thtimes, NULL, 0, 0, 0, 0, 0},
		{"clock", CLOCK_PROCESS_CPUTIME_ID, 0, NULL, NULL, loop_sys, loop_thclock, NULL, 0, 0, 0, 0, 0},
	};
	const size_t nrows = sizeof rows / sizeof *rows;
	unsigned char fell[sizeof rows / sizeof *rows];
	int probed = probe_kernel_paths(rows, nrows, fell) == 0;
	for (size_t i = 0; i < nrows; i++) {
		struct row *r = &rows[i];
		loop_fn f[4] = {r->kernel, r->sys, r->th, r->thalt};
		clockid_t id[4] = {r->id, r->id, r->id, r->alt};
		double out[4];
		measure(f, id, 4, out);
		r->k_ns = out[0];
		r->sys_ns = out[1];
		r->th_ns = out[2];
		r->alt_ns = out[3];
		/* Without the probe: a vDSO that falls back pays the system call
		 * and its own work; one that reads the counter is several times
		 * cheaper. */
		if (probed)
			r->fallback = fell[i];
		else
			r->fallback = isnan(r->k_ns) || r->k_ns >= 0.5 * r->sys_ns;
	}
	double floor_ord = NAN, floor_rel = NAN;
#if TH_COUNTER_KIND
	{
		loop_fn f[2] = {loop_floor_ordered, loop_floor_relaxed};
		clockid_t id[2] = {0, 0};
		double out[2];
		measure(f, id, 2, out);
		floor_ord = out[0];
		floor_rel = out[1];
	}
#endif

	/* 3. counter */
	struct counter_info ci;
	counter_probe(&ci, cfg.counter);
	double freq = st.freq_hz > 0 ? st.freq_hz : ci.trust.nominal_hz;

	/* 4. cross-CPU synchronisation: CPU pairs (first, each other) */
	cpu_set_t allowed;
	int cpus[1024], ncpu = 0;
	if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
		for (int c = 0; c < CPU_SETSIZE && ncpu < 1024; c++)
			if (CPU_ISSET(c, &allowed))
				cpus[ncpu++] = c;
	int npairs = ncpu > 1 ? ncpu - 1 : 0;
	if (npairs > 64)
		npairs = 64;
	struct sync_result *sync = calloc(npairs ? (size_t)npairs : 1, sizeof *sync);
	double ms_per_kind = npairs ? 600.0 / PP_KINDS / npairs : 0;
	if (ms_per_kind < 5)
		ms_per_kind = 5;
	int64_t skew_ticks = 0;
	uint64_t backward_kernel = 0, backward_th = 0;
	for (int i = 0; sync && i < npairs; i++) {
		sync_pair(cpus[0], cpus[i + 1], ms_per_kind, &sync[i]);
		if (!sync[i].ok)
			continue;
		int64_t s = sync[i].lo > 0 ? sync[i].lo : (sync[i].hi < 0 ? -sync[i].hi : 0);
		if (s > skew_ticks)
			skew_ticks = s;
		backward_kernel += sync[i].backward[PP_KERNEL];
		backward_th += sync[i].backward[PP_TIMEHANDS];
	}
	double skew_ns = freq > 0 ? (double)skew_ticks * 1e9 / freq : NAN;

	/* 5. time() / gettimeofday() coherence over one second */
	struct coherence coh;
	coherence_run(&coh, 1000);

	/* the library's view after all that */
	th_status(&st, sizeof st);

	/* ------------------------------------------------------------ output */
	struct th_emit e;
	th_emit_begin(&e, stdout, json);
	th_emit_str(&e, "clocksource", cs);
	th_emit_str(&e, "clocksources_available", avail);
	th_emit_str(&e, "mode", th_cli_mode_name(st.mode));
	if (json || st.reason[0])
		th_emit_str(&e, "reason", st.reason);

	th_emit_str(&e, "kernel_path_probe", probed ? "seccomp" : "timing");
	th_emit_group(&e, "cost");
	for (size_t i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		th_emit_group(&e, r->name);
		if (r->kernel) {
			emit_cost(&e, "kernel", r->k_ns);
			th_emit_str(&e, "kernel_path", kernel_path(r));
		}
		emit_cost(&e, "syscall", r->sys_ns);
		emit_cost(&e, "timehands", r->th_ns);
		if (r->thalt)
			emit_cost(&e, r->alt_name, r->alt_ns);
		double base = r->kernel ? r->k_ns : r->sys_ns;
		if (base > 0)
			th_emit_num(&e, "ratio", r->th_ns / base, 2, "x");
		th_emit_group_end(&e);
	}
	if (!isnan(floor_ord)) {
		th_emit_group(&e, "floor");
		th_emit_num(&e, "ordered", floor_ord, 1, "ns");
		th_emit_num(&e, "relaxed", floor_rel, 1, "ns");
		th_emit_group_end(&e);
	}
	th_emit_group_end(&e);

	th_emit_group(&e, "counter");
	th_emit_str(&e, "kind", th_cli_counter_name((unsigned)ci.trust.available));
	th_emit_bool(&e, "present", ci.present);
	th_emit_bool(&e, "invariant", ci.invariant);
#if defined(__x86_64__)
	th_emit_bool(&e, "rdtscp_in_cpuid", ci.rdtscp_cpuid);
	th_emit_str(&e, "cpuinfo_flags", ci.flags);
	th_emit_str(&e, "hypervisor", ci.hypervisor);
#endif
	th_emit_num(&e, "frequency_nominal", ci.trust.nominal_hz, 1, "Hz");
	th_emit_str(&e, "frequency_source", ci.trust.freq_source);
	th_emit_num(&e, "frequency_measured", st.freq_hz, 1, "Hz");
	th_emit_bool(&e, "trusted", ci.trust.usable);
	if (json || ci.trust.reason[0])
		th_emit_str(&e, "reason", ci.trust.reason);
	th_emit_group_end(&e);

	th_emit_group(&e, "cpu_sync");
	th_emit_int(&e, "cpus", ncpu, "");
	if (npairs == 0)
		th_emit_str(&e, "note", "one CPU available: no cross-CPU test");
	for (int i = 0; i < npairs; i++) {
		const struct sync_result *s = &sync[i];
		char name[32];
		snprintf(name, sizeof name, "cpu%d-cpu%d", s->cpu_a, s->cpu_b);
		th_emit_group(&e, name);
		th_emit_bool(&e, "ran", s->ok);
		if (s->ok) {
#if TH_COUNTER_KIND
			th_emit_int(&e, "counter_offset_lo", (long long)s->lo, "ticks");
			th_emit_int(&e, "counter_offset_hi", (long long)s->hi, "ticks");
#endif
			for (int k = 0; k < PP_KINDS; k++) {
				if (!s->rounds[k])
					continue;
				char key[64];
				snprintf(key, sizeof key, "%s_handovers", pp_names[k]);
				th_emit_int(&e, key, (long long)s->rounds[k], "");
				snprintf(key, sizeof key, "%s_backward", pp_names[k]);
				th_emit_int(&e, key, (long long)s->backward[k], "");
			}
		}
		th_emit_group_end(&e);
	}
	th_emit_int(&e, "max_skew_ticks", (long long)skew_ticks, "ticks");
	th_emit_num(&e, "max_skew", skew_ns, 1, "ns");
	th_emit_group_end(&e);

	th_emit_group(&e, "coherence");
	th_emit_num(&e, "seconds", coh.seconds, 2, "s");
	th_emit_int(&e, "kernel_pairs", (long long)coh.k_calls, "");
	th_emit_int(&e, "kernel_incoherent", (long long)coh.k_bad, "");
	th_emit_num(&e, "kernel_rate", coh.k_calls ? 100.0 * (double)coh.k_bad / (double)coh.k_calls : 0, 3, "%");
	th_emit_int(&e, "timehands_pairs", (long long)coh.t_calls, "");
	th_emit_int(&e, "timehands_incoherent", (long long)coh.t_bad, "");
	th_emit_group_end(&e);

	/* 6. verdict */
	const struct row *mono = &rows[1];
	char verdict[512];
	int line = st.mode != TH_MODE_KERNEL;
	int bad = coh.t_bad > 0 || backward_th > 0;
	if (mono->fallback && line)
		snprintf(verdict, sizeof verdict,
			 "the kernel's clocks fall back to system calls here (MONOTONIC %.0f ns); timehands serves them "
			 "from the counter in %.1f ns (%.0fx faster)",
			 mono->k_ns, mono->th_ns, mono->k_ns / mono->th_ns);
	else if (mono->fallback)
		snprintf(verdict, sizeof verdict,
			 "the kernel's clocks fall back to system calls here (MONOTONIC %.0f ns) and timehands stays on "
			 "them: %s",
			 mono->k_ns, st.reason[0] ? st.reason : ci.trust.reason);
	else if (line)
		snprintf(verdict, sizeof verdict,
			 "the vDSO reads the counter (MONOTONIC %.1f ns); timehands %.1f ns (%.2fx), relaxed %.1f ns "
			 "(%.2fx); kernel time() incoherent in %.3f%% of calls, timehands in %llu",
			 mono->k_ns, mono->th_ns, mono->th_ns / mono->k_ns, mono->alt_ns, mono->alt_ns / mono->k_ns,
			 coh.k_calls ? 100.0 * (double)coh.k_bad / (double)coh.k_calls : 0,
			 (unsigned long long)coh.t_bad);
	else
		snprintf(verdict, sizeof verdict,
			 "the vDSO reads the counter (MONOTONIC %.1f ns); timehands uses the kernel's clocks: %s",
			 mono->k_ns, st.reason[0] ? st.reason : ci.trust.reason);
	char full[768];
	snprintf(full, sizeof full, "%s%s%s%s", bad ? "FAILED: timehands went backwards or was incoherent; " : "",
		 skew_ticks > 0 ? "counter skew observed across CPUs; " : "",
		 backward_kernel ? "the kernel's MONOTONIC went backwards across CPUs; " : "", verdict);
	th_emit_str(&e, "verdict", full);
	th_emit_end(&e);
	free(sync);
	return bad ? 1 : 0;
}
