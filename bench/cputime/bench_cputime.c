/*
 * timehands-bench-cputime: the CPU-time table. The kernel's
 * times(), clock(), clock_gettime(CLOCK_PROCESS_CPUTIME_ID) and
 * clock_gettime(CLOCK_THREAD_CPUTIME_ID), each a system call, against
 * th_times(), th_clock() and the coarse ids, at 1 and many threads.
 *
 *   timehands-bench-cputime [--json PATH] [--quick] [--threads 1,2,8,64] [--rounds N]
 *
 * Cost per call = the calling threads' CPU time / their calls (thread CPU
 * time from the raw system call, so that nothing under test times itself),
 * the median over rounds; in each round the two implementations run one
 * after the other, and timehands' own CLOCK_MONOTONIC_COARSE with them, in
 * turn before and after timehands' call: the reference of the target (a
 * coarse read, a tick check and a load), measured in the same rounds. Every
 * loop sums its results into a register and stores the sum once. --json
 * writes one JSON object per line, a result row for timehands-bench
 * (bench/README.md): table, op, impl, threads, ns_per_call, ratio_kernel
 * (ns_per_call / the kernel call's in the same run), runs, calls, and for
 * timehands' rows floor ("timehands CLOCK_MONOTONIC_COARSE"), floor_ns (its
 * median) and over_floor_ns (the median of the per-round differences).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/times.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "timehands.h"

#define NS_PER_S 1000000000LL

static int64_t thread_cpu_ns(void)
{
	struct timespec t;
	syscall(SYS_clock_gettime, CLOCK_THREAD_CPUTIME_ID, &t);
	return (int64_t)t.tv_sec * NS_PER_S + t.tv_nsec;
}

/* ------------------------------------------------------------ the loops */

/* Keeps each loop's result alive; relaxed atomic: the threads of a round
 * store to it at once. */
static _Atomic uint64_t sink;

#define LOOP(name, decl, expr)                      \
	static void name(long n)                    \
	{                                           \
		uint64_t acc = 0;                   \
		decl;                               \
		for (long i = 0; i < n; i++) {      \
			expr;                       \
		}                                   \
		atomic_store_explicit(&sink, acc, memory_order_relaxed); \
	}

LOOP(k_times, struct tms t, acc += (uint64_t)times(&t) + (uint64_t)t.tms_utime)
LOOP(h_times, struct tms t, acc += (uint64_t)th_times(&t) + (uint64_t)t.tms_utime)
LOOP(k_clock, (void)0, acc += (uint64_t)clock())
LOOP(h_clock, (void)0, acc += (uint64_t)th_clock())
LOOP(k_proc, struct timespec ts, clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); acc += (uint64_t)ts.tv_nsec)
LOOP(h_proc, struct timespec ts, th_clock_gettime(TH_CLOCK_PROCESS_CPUTIME_COARSE, &ts); acc += (uint64_t)ts.tv_nsec)
LOOP(k_thread, struct timespec ts, clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); acc += (uint64_t)ts.tv_nsec)
LOOP(h_thread, struct timespec ts, th_clock_gettime(TH_CLOCK_THREAD_CPUTIME_COARSE, &ts); acc += (uint64_t)ts.tv_nsec)
/* the reference: timehands' own coarse clock, read the same way */
LOOP(h_coarse, struct timespec ts, th_clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); acc += (uint64_t)ts.tv_nsec)

struct op {
	const char *name;          /* "op" in the JSON rows */
	const char *kernel, *th;   /* for people */
	void (*loop[2])(long);     /* [0] the kernel's call, [1] timehands' */
};

static const struct op ops[] = {
	{"times", "times()", "th_times()", {k_times, h_times}},
	{"clock", "clock()", "th_clock()", {k_clock, h_clock}},
	{"clock_gettime(PROCESS_CPUTIME)", "CLOCK_PROCESS_CPUTIME_ID", "TH_CLOCK_PROCESS_CPUTIME_COARSE", {k_proc, h_proc}},
	{"clock_gettime(THREAD_CPUTIME)", "CLOCK_THREAD_CPUTIME_ID", "TH_CLOCK_THREAD_CPUTIME_COARSE", {k_thread, h_thread}},
};
#define NOPS (int)(sizeof ops / sizeof ops[0])
static const char *const impl_name[2] = {"syscall", "timehands"};

/* ------------------------------------------------------------ threads */

struct run {
	void (*loop)(long);
	long calls;
	pthread_barrier_t *go;
	int64_t cpu;
};

static void *worker(void *arg)
{
	struct run *r = arg;
	pthread_barrier_wait(r->go);
	int64_t c0 = thread_cpu_ns();
	r->loop(r->calls);
	r->cpu = thread_cpu_ns() - c0;
	return NULL;
}

/* One round: `threads` threads run `calls` calls each; CPU ns per call. */
static double round_ns(void (*loop)(long), long calls, int threads)
{
	if (threads == 1) {
		int64_t c0 = thread_cpu_ns();
		loop(calls);
		return (double)(thread_cpu_ns() - c0) / (double)calls;
	}
	pthread_t *th = calloc((size_t)threads, sizeof *th);
	struct run *r = calloc((size_t)threads, sizeof *r);
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, (unsigned)threads);
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 256 * 1024);
	int started = 0;
	for (int i = 0; i < threads; i++) {
		r[i] = (struct run){loop, calls, &go, 0};
		if (pthread_create(&th[i], &a, worker, &r[i]) != 0) {
			fprintf(stderr, "pthread_create failed at %d threads\n", i);
			exit(1);
		}
		started++;
	}
	int64_t cpu = 0;
	for (int i = 0; i < started; i++) {
		pthread_join(th[i], NULL);
		cpu += r[i].cpu;
	}
	pthread_attr_destroy(&a);
	pthread_barrier_destroy(&go);
	free(th);
	free(r);
	return (double)cpu / ((double)calls * threads);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ------------------------------------------------------------ context */

static void first_line(const char *path, const char *key, char *out, size_t size)
{
	out[0] = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof line, f)) {
		if (key && strncmp(line, key, strlen(key)) != 0)
			continue;
		char *s = key ? strchr(line, ':') : line;
		if (!s)
			continue;
		if (key)
			s++;
		while (*s == ' ' || *s == '\t')
			s++;
		s[strcspn(s, "\n")] = 0;
		size_t n = strlen(s);
		if (n >= size)
			n = size - 1;
		memcpy(out, s, n);
		out[n] = 0;
		break;
	}
	fclose(f);
}

static void print_context(int rounds)
{
	char cpu[256], cs[64], date[64];
	struct utsname u;
	first_line("/proc/cpuinfo", "model name", cpu, sizeof cpu);
	first_line("/sys/devices/system/clocksource/clocksource0/current_clocksource", NULL, cs, sizeof cs);
	uname(&u);
	time_t now = time(NULL);
	strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
	struct timespec res;
	th_clock_getres(TH_CLOCK_PROCESS_CPUTIME_COARSE, &res);
	printf("CPU-time clocks: the kernel's call vs timehands, %s\n", date);
	printf("machine: %s, %ld CPUs online, clocksource %s, Linux %s %s\n", cpu[0] ? cpu : "?",
	       sysconf(_SC_NPROCESSORS_ONLN), cs[0] ? cs : "?", u.release, u.machine);
	printf("cost: CPU ns per call (calling threads' CPU time / calls), median of %d rounds; over coarse:\n"
	       "median of the per-round differences to timehands' CLOCK_MONOTONIC_COARSE in the same rounds;\n"
	       "timehands refreshes each value once per tick (%ld ns)\n\n",
	       rounds, (long)res.tv_nsec + (long)res.tv_sec * 1000000000L);
}

/* ------------------------------------------------------------ main */

static void usage(FILE *f)
{
	fprintf(f, "usage: timehands-bench-cputime [--json PATH] [--quick] [--threads 1,2,8,64] [--rounds N]\n");
}

int main(int argc, char **argv)
{
	const char *json = NULL;
	int quick = 0, rounds = 0;
	int threads[16], nthreads = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
			json = argv[++i];
		} else if (strcmp(argv[i], "--quick") == 0) {
			quick = 1;
		} else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
			rounds = atoi(argv[++i]);
		} else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
			for (char *s = argv[++i]; *s && nthreads < 16;) {
				int t = (int)strtol(s, &s, 10);
				if (t > 0 && t <= 4096)
					threads[nthreads++] = t;
				if (*s == ',')
					s++;
				else
					break;
			}
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (!nthreads) {
		static const int def[] = {1, 2, 8, 64}, defq[] = {1, 8};
		const int *d = quick ? defq : def;
		nthreads = quick ? 2 : 4;
		memcpy(threads, d, (size_t)nthreads * sizeof *d);
	}
	if (rounds <= 0)
		rounds = quick ? 3 : 7;
	if (rounds > 63)
		rounds = 63;
	FILE *jf = NULL;
	if (json && !(jf = fopen(json, "w"))) {
		perror(json);
		return 1;
	}
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu < 1)
		ncpu = 1;
	/* Calls per thread per round: about 20 ms of one CPU (5 with --quick)
	 * for one thread, the same total work spread over more threads. */
	const long base[2] = {quick ? 4000 : 16000, quick ? 250000 : 1000000};

	print_context(rounds);
	printf("%-32s %7s %12s %14s %9s %14s\n", "call (kernel / timehands)", "threads", "kernel ns", "timehands ns",
	       "speedup", "over coarse ns");
	/* Warm up: attach, create the caches. */
	for (int k = 0; k < NOPS; k++)
		ops[k].loop[1](1000);
	for (int ti = 0; ti < nthreads; ti++) {
		int nt = threads[ti];
		for (int k = 0; k < NOPS; k++) {
			double v[2][64], med[2], ref[64], over[64];
			long calls[2];
			for (int m = 0; m < 2; m++) {
				double share = nt > ncpu ? (double)ncpu / nt : 1.0;
				calls[m] = (long)(base[m] * share);
				if (calls[m] < base[m] / 32)
					calls[m] = base[m] / 32;
			}
			for (int r = 0; r < rounds; r++) {
				v[0][r] = round_ns(ops[k].loop[0], calls[0], nt);
				/* the reference before timehands' call in odd
				 * rounds, after it in even ones */
				if (r & 1)
					ref[r] = round_ns(h_coarse, calls[1], nt);
				v[1][r] = round_ns(ops[k].loop[1], calls[1], nt);
				if (!(r & 1))
					ref[r] = round_ns(h_coarse, calls[1], nt);
				over[r] = v[1][r] - ref[r];
			}
			for (int m = 0; m < 2; m++)
				med[m] = median(v[m], rounds);
			double ref_med = median(ref, rounds), over_med = median(over, rounds);
			printf("%-32s %7d %12.1f %14.1f %8.0fx %+14.1f\n", ops[k].name, nt, med[0], med[1],
			       med[1] > 0 ? med[0] / med[1] : 0, over_med);
			if (jf)
				for (int m = 0; m < 2; m++) {
					fprintf(jf,
						"{\"table\": \"cputime\", \"op\": \"%s\", \"impl\": \"%s\", \"threads\": %d, "
						"\"ns_per_call\": %.2f, \"ratio_kernel\": %.5f, \"runs\": %d, \"calls\": %ld",
						ops[k].name, impl_name[m], nt, med[m], med[0] > 0 ? med[m] / med[0] : 0, rounds,
						calls[m]);
					if (m == 1)
						fprintf(jf,
							", \"floor\": \"timehands CLOCK_MONOTONIC_COARSE\", \"floor_ns\": %.2f, "
							"\"over_floor_ns\": %.2f",
							ref_med, over_med);
					fprintf(jf, "}\n");
				}
		}
	}
	printf("\nkernel: %s, %s, %s, %s (each a system call)\ntimehands: %s, %s, %s, %s\n", ops[0].kernel,
	       ops[1].kernel, ops[2].kernel, ops[3].kernel, ops[0].th, ops[1].th, ops[2].th, ops[3].th);
	if (jf)
		fclose(jf);
	return 0;
}
