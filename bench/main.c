/*
 * timehands-bench [--quick] [--json PATH] [--threads LIST] [options]
 *
 * Prints the machine context, then the per-call table (every operation x
 * syscall / vdso / timehands / timehands-preload / timehands-shared, next to
 * the hardware floor), the scalability table, the guarantee table and the
 * performance targets of doc/design.md measured in this run; writes the same
 * figures as JSON. `timehands bench` execs this program.
 *
 * The preload and shared-page figures come from child processes: this very
 * program re-executed with --child, under the preload (through `timehands
 * run`, else LD_PRELOAD) or with TIMEHANDS_PAGE naming a timehandsd page.
 * A child prints tab-separated lines on its stdout ("row", "check", "info"),
 * which the parent merges. The CPU-time table is a separate program
 * (bench/cputime/): it is run with --json PATH and writes one JSON object
 * per line there, each a result row, merged verbatim.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "bench.h"
#include "timehands.h"

extern char **environ;

#define PREFIX "timehands-bench: "
#ifdef __clang__
#define COMPILER "clang " __clang_version__
#else
#define COMPILER "gcc " __VERSION__
#endif

struct target {
	char what[320];
	char impl[32];
	double value, limit;
	const char *unit; /* "ns" (value <= limit), "x" (ratio <= limit), "x>=" */
	int met;
};

struct machine {
	char cpu[128], hypervisor[32], kernel[160], clocksource[64], clocksources[160];
	char libc[32], date[32], loadavg[64];
	int online, usable;
	struct th_status st;
};

static struct {
	struct bench_opts o;
	char exe[PATH_MAX], dir[PATH_MAX];
	char preload[PATH_MAX], cli[PATH_MAX], daemon[PATH_MAX], cputime[PATH_MAX];
	const char *json_path;
	int no_daemon, no_children;
	char user_page[PATH_MAX]; /* TIMEHANDS_PAGE as given by the user, or "" */
	struct machine m;
	struct bench_rows rows;
	struct bench_checks checks;
	char **extra;             /* JSON rows from the CPU-time program */
	size_t nextra;
	char notes[16][240];
	int nnotes;
	struct target targets[128];
	int ntargets;
	int shared_ok;
} B;

/* Truncating string copy. */
static void copy(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);
	if (n >= size)
		n = size - 1;
	memcpy(dst, src, n);
	dst[n] = 0;
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *n = B.nnotes < 16 ? B.notes[B.nnotes++] : B.notes[15];
	vsnprintf(n, sizeof B.notes[0], fmt, ap);
	va_end(ap);
	printf("note: %s\n", n);
	fflush(stdout);
}

static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void progress(const char *fmt, ...)
{
	static int64_t t0;
	int64_t now = bench_now_ns();
	if (!t0)
		t0 = now;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, PREFIX "[%5.1f s] ", (double)(now - t0) / 1e9);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* ------------------------------------------------------------------ files, processes */

static int read_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char *ok = fgets(buf, (int)size, f);
	fclose(f);
	if (!ok)
		return -1;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

static int is_exec(const char *p)
{
	struct stat s;
	return stat(p, &s) == 0 && S_ISREG(s.st_mode) && access(p, X_OK) == 0;
}

static int is_file(const char *p)
{
	struct stat s;
	return stat(p, &s) == 0 && S_ISREG(s.st_mode);
}

/* First candidate (relative to this program's directory, or absolute) that
 * passes `ok`; "" if none. */
static void find_near(char *out, const char *const *cands, int (*ok)(const char *))
{
	char p[PATH_MAX];
	out[0] = 0;
	for (; *cands; cands++) {
		if ((*cands)[0] == '/')
			copy(p, sizeof p, *cands);
		else if (snprintf(p, sizeof p, "%s/%s", B.dir, *cands) >= (int)sizeof p)
			continue;
		char real[PATH_MAX];
		if (ok(p) && realpath(p, real)) {
			snprintf(out, PATH_MAX, "%s", real);
			return;
		}
	}
}

/* A copy of the environment with the NAME=VALUE entries of `set` replacing
 * or adding to it (VALUE NULL: removed). */
static char **env_with(const char *const *set)
{
	size_t n = 0, k = 0;
	while (environ[n])
		n++;
	while (set[k])
		k += 2;
	char **e = calloc(n + k / 2 + 1, sizeof *e);
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		int replaced = 0;
		for (size_t j = 0; j < k; j += 2) {
			size_t l = strlen(set[j]);
			if (strncmp(environ[i], set[j], l) == 0 && environ[i][l] == '=')
				replaced = 1;
		}
		if (!replaced)
			e[m++] = environ[i];
	}
	for (size_t j = 0; j < k; j += 2) {
		if (!set[j + 1])
			continue;
		size_t l = strlen(set[j]) + strlen(set[j + 1]) + 2;
		e[m] = malloc(l);
		snprintf(e[m++], l, "%s=%s", set[j], set[j + 1]);
	}
	e[m] = NULL;
	return e;
}

/* Frees what env_with made: the array and the strings it added (those that
 * are not the caller's environment's). */
static void env_free(char **e)
{
	for (size_t i = 0; e && e[i]; i++) {
		int ours = 0;
		for (size_t j = 0; environ[j] && !ours; j++)
			ours = e[i] == environ[j];
		if (!ours)
			free(e[i]);
	}
	free(e);
}

/* Run argv with envp; its stdout is captured into *out (NUL-terminated,
 * caller frees) when out is not NULL, else inherited. Killed after timeout_s.
 * Returns the wait status, or -1. */
static int run_child(char *const argv[], char **envp, char **out, double timeout_s)
{
	int fd[2] = {-1, -1};
	if (out && pipe2(fd, O_CLOEXEC) != 0)
		return -1;
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (out)
			dup2(fd[1], 1);
		execve(argv[0], argv, envp);
		fprintf(stderr, PREFIX "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	size_t len = 0, cap = 4096;
	char *buf = out ? malloc(cap) : NULL;
	int64_t deadline = bench_now_ns() + (int64_t)(timeout_s * 1e9);
	int status = -1, killed = 0;
	if (out) {
		close(fd[1]);
		for (;;) {
			struct pollfd p = {fd[0], POLLIN, 0};
			int64_t left = (deadline - bench_now_ns()) / 1000000;
			if (left <= 0) {
				kill(pid, SIGKILL);
				killed = 1;
				break;
			}
			if (poll(&p, 1, (int)(left > 1000 ? 1000 : left)) <= 0)
				continue;
			if (len + 1024 > cap)
				buf = realloc(buf, cap *= 2);
			ssize_t r = read(fd[0], buf + len, cap - len - 1);
			if (r <= 0)
				break;
			len += (size_t)r;
		}
		close(fd[0]);
		buf[len] = 0;
		*out = buf;
		waitpid(pid, &status, 0);
	} else {
		while (waitpid(pid, &status, WNOHANG) == 0) {
			if (bench_now_ns() > deadline) {
				kill(pid, SIGKILL);
				killed = 1;
				waitpid(pid, &status, 0);
				break;
			}
			usleep(20000);
		}
	}
	if (killed)
		progress("%s did not finish within %.0f s; killed", argv[0], timeout_s);
	return status;
}

/* ------------------------------------------------------------------ machine context */

static void machine_context(struct machine *m)
{
	snprintf(m->cpu, sizeof m->cpu, "unknown CPU");
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	if (f) {
		while (fgets(line, sizeof line, f)) {
			if (strncmp(line, "model name", 10) == 0 || strncmp(line, "Model", 5) == 0) {
				char *c = strchr(line, ':');
				if (c) {
					c += 1 + strspn(c + 1, " \t");
					c[strcspn(c, "\n")] = 0;
					copy(m->cpu, sizeof m->cpu, c);
					break;
				}
			}
		}
		fclose(f);
	}
	m->online = (int)sysconf(_SC_NPROCESSORS_ONLN);
	int cpus[1024];
	m->usable = bench_cpus(cpus, 1024);
	snprintf(m->hypervisor, sizeof m->hypervisor, "none");
#if defined(__x86_64__)
	unsigned a, b, c, d;
	__cpuid(1, a, b, c, d);
	if (c & (1u << 31)) {
		char sig[13] = {0};
		__cpuid(0x40000000, a, b, c, d);
		memcpy(sig, &b, 4);
		memcpy(sig + 4, &c, 4);
		memcpy(sig + 8, &d, 4);
		for (int i = 11; i >= 0 && (sig[i] == ' ' || sig[i] == 0); i--)
			sig[i] = 0;
		copy(m->hypervisor, sizeof m->hypervisor, sig[0] ? sig : "present");
	}
#endif
#if defined(__x86_64__)
	{
		/* the family tells apart CPU generations a guest's model name
		 * hides ("AMD EPYC"): one results file per kind */
		unsigned fa, fb, fc, fd;
		__cpuid(1, fa, fb, fc, fd);
		unsigned fam = (fa >> 8) & 15, mod = (fa >> 4) & 15;
		if (fam == 15)
			fam += (fa >> 20) & 255;
		if (fam == 6 || fam >= 15)
			mod |= ((fa >> 16) & 15) << 4;
		size_t n = strlen(m->cpu);
		snprintf(m->cpu + n, sizeof m->cpu - n, " (family %xh, model %xh)", fam, mod);
	}
#endif
	struct utsname u;
	if (uname(&u) == 0 &&
	    snprintf(m->kernel, sizeof m->kernel, "%s %s %s", u.sysname, u.release, u.machine) >= (int)sizeof m->kernel)
		m->kernel[sizeof m->kernel - 1] = 0;
	const char *cs = "/sys/devices/system/clocksource/clocksource0/";
	char path[160];
	snprintf(path, sizeof path, "%scurrent_clocksource", cs);
	if (read_line(path, m->clocksource, sizeof m->clocksource) != 0)
		snprintf(m->clocksource, sizeof m->clocksource, "unknown");
	snprintf(path, sizeof path, "%savailable_clocksource", cs);
	if (read_line(path, m->clocksources, sizeof m->clocksources) != 0)
		m->clocksources[0] = 0;
	for (size_t n = strlen(m->clocksources); n && m->clocksources[n - 1] == ' ';)
		m->clocksources[--n] = 0;
	snprintf(m->libc, sizeof m->libc, "glibc %s", gnu_get_libc_version());
	if (read_line("/proc/loadavg", line, sizeof line) == 0) {
		/* the three load averages */
		char *p = line;
		for (int i = 0; i < 3 && p; i++)
			p = strchr(p + 1, ' ');
		if (p)
			*p = 0;
		copy(m->loadavg, sizeof m->loadavg, line);
	}
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	time_t now = rt.tv_sec;
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(m->date, sizeof m->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
	memset(&m->st, 0, sizeof m->st);
	th_status(&m->st, sizeof m->st);
}

static const char *mode_name(uint32_t mode)
{
	return mode == TH_MODE_SHARED ? "shared" : mode == TH_MODE_LOCAL ? "local" : "kernel";
}

static const char *counter_name(uint32_t c)
{
	return c == TH_COUNTER_TSC ? "tsc" : c == TH_COUNTER_CNTVCT ? "cntvct" : "none";
}

static void print_machine(const struct machine *m)
{
	const struct th_status *s = &m->st;
	printf("timehands-bench %d.%d, %s%s\n", TIMEHANDS_VERSION_MAJOR, TIMEHANDS_VERSION_MINOR, m->date,
	       B.o.quick ? " (--quick: fewer rounds, shorter loops)" : "");
	printf("  cpu          %s, %d CPUs online, %d usable, hypervisor signature \"%s\"\n", m->cpu, m->online, m->usable,
	       m->hypervisor);
	printf("  kernel       %s, clocksource %s (available: %s)\n", m->kernel, m->clocksource,
	       m->clocksources[0] ? m->clocksources : "?");
	printf("  libc         %s, compiler %s\n", m->libc, COMPILER);
	printf("  timehands    mode %s, counter %s (available %s) at %.6f MHz, frequency source %s"
	       " (+-%.2f ppm)%s%s\n",
	       mode_name(s->mode), counter_name(s->counter), counter_name(s->counter_available), s->freq_hz / 1e6,
	       s->freq_source, s->freq_uncertainty_ppm, s->reason[0] ? "; reason: " : "", s->reason);
	printf("  load average %s (a busy machine makes every figure noisier; ratios are taken per round)\n",
	       m->loadavg);
	printf("\n");
	fflush(stdout);
}

/* ------------------------------------------------------------------ child processes */

static void emit_rows(const struct bench_rows *r, const struct bench_checks *k, FILE *f)
{
	for (size_t i = 0; i < r->n; i++) {
		const struct bench_row *x = &r->v[i];
		fprintf(f,
			"row\t%s\t%s\t%s\t%d\t%.4f\t%.4f\t%.5f\t%.4f\t%s\t%.4f\t%.5f\t%.4f\t%d\t%llu\t%s"
			"\t%.2f\t%.2f\t%.2f\t%.2f\n",
			x->table, x->op, x->impl, x->threads, x->ns_per_call, x->ns_min, x->ratio_vdso, x->vdso_ref_ns,
			x->floor, x->floor_ns, x->ratio_floor, x->over_floor_ns, x->runs, (unsigned long long)x->calls,
			x->note, x->p50, x->p99, x->p999, x->max_ns);
	}
	for (size_t i = 0; k && i < k->n; i++) {
		const struct bench_check *c = &k->v[i];
		fprintf(f, "check\t%s\t%s\t%s\t%llu\t%llu\t%lld\t%s\n", c->check, c->impl, c->guarantee,
			(unsigned long long)c->reads, (unsigned long long)c->violations, (long long)c->max_step_ns,
			c->note);
	}
}

/* Split on tabs, keeping empty fields. */
static int split_tabs(char *s, char **f, int max)
{
	int n = 0;
	while (n < max) {
		f[n++] = s;
		char *t = strchr(s, '\t');
		if (!t)
			break;
		*t = 0;
		s = t + 1;
	}
	return n;
}

/* Merge a child's output; returns its "info" value for `key` in info. */
static void merge_child(char *out, const char *key, char *info, size_t info_size)
{
	if (info)
		info[0] = 0;
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		char *f[20];
		int n = split_tabs(line, f, 20);
		if (n == 20 && strcmp(f[0], "row") == 0) {
			if (strcmp(f[1], "floor") == 0)
				continue; /* the child's floors sit in its rows */
			struct bench_row *r = rows_add(&B.rows);
			copy(r->table, sizeof r->table, f[1]);
			copy(r->op, sizeof r->op, f[2]);
			copy(r->impl, sizeof r->impl, f[3]);
			r->threads = atoi(f[4]);
			r->ns_per_call = strtod(f[5], NULL);
			r->ns_min = strtod(f[6], NULL);
			r->ratio_vdso = strtod(f[7], NULL);
			r->vdso_ref_ns = strtod(f[8], NULL);
			copy(r->floor, sizeof r->floor, f[9]);
			r->floor_ns = strtod(f[10], NULL);
			r->ratio_floor = strtod(f[11], NULL);
			r->over_floor_ns = strtod(f[12], NULL);
			r->runs = atoi(f[13]);
			r->calls = strtoull(f[14], NULL, 10);
			copy(r->note, sizeof r->note, f[15]);
			r->p50 = strtod(f[16], NULL);
			r->p99 = strtod(f[17], NULL);
			r->p999 = strtod(f[18], NULL);
			r->max_ns = strtod(f[19], NULL);
		} else if (n == 8 && strcmp(f[0], "check") == 0 && B.checks.n < 32) {
			struct bench_check *c = &B.checks.v[B.checks.n++];
			copy(c->check, sizeof c->check, f[1]);
			copy(c->impl, sizeof c->impl, f[2]);
			copy(c->guarantee, sizeof c->guarantee, f[3]);
			c->reads = strtoull(f[4], NULL, 10);
			c->violations = strtoull(f[5], NULL, 10);
			c->max_step_ns = strtoll(f[6], NULL, 10);
			copy(c->note, sizeof c->note, f[7]);
		} else if (n == 3 && strcmp(f[0], "info") == 0 && info && strcmp(f[1], key) == 0) {
			copy(info, info_size, f[2]);
		}
	}
}

/* Runs this program as a child in `mode` with extra environment; returns
 * the wait status and leaves the child's "info <key>" value in info. */
static int spawn_self(const char *via_cli, const char *mode, const char *impl, const char *ops,
		      const char *const *env, const char *key, char *info, size_t info_size)
{
	char rounds[16], target[32];
	snprintf(rounds, sizeof rounds, "%d", B.o.rounds);
	snprintf(target, sizeof target, "%g", B.o.target_ms);
	const char *argv[24];
	int n = 0;
	if (via_cli) {
		argv[n++] = via_cli;
		argv[n++] = "run";
		argv[n++] = "--preload";
		argv[n++] = B.preload;
		argv[n++] = "--";
	}
	argv[n++] = B.exe;
	argv[n++] = "--child";
	argv[n++] = mode;
	argv[n++] = "--impl";
	argv[n++] = impl;
	argv[n++] = "--rounds";
	argv[n++] = rounds;
	argv[n++] = "--target-ms";
	argv[n++] = target;
	if (ops) {
		argv[n++] = "--ops";
		argv[n++] = ops;
	}
	char loop_calls[24];
	if (B.o.loop_calls) {
		snprintf(loop_calls, sizeof loop_calls, "%llu", (unsigned long long)B.o.loop_calls);
		argv[n++] = "--loop-calls";
		argv[n++] = loop_calls;
	}
	if (B.o.quick)
		argv[n++] = "--quick";
	argv[n] = NULL;
	char **envp = env_with(env);
	char *out = NULL;
	int st = run_child((char *const *)argv, envp, &out, B.o.quick ? 60 : 180);
	if (out)
		merge_child(out, key, info, info_size); /* a failing child still says why */
	free(out);
	env_free(envp);
	return st;
}

static int child_ok(int st)
{
	return st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void preload_rows(void)
{
	if (!B.preload[0]) {
		note("no libtimehands-preload.so next to this program (looked in ../preload, ../lib/timehands, ../lib): "
		     "timehands-preload rows skipped");
		return;
	}
	char pre[PATH_MAX * 2];
	const char *old = getenv("LD_PRELOAD");
	snprintf(pre, sizeof pre, "%s%s%s", B.preload, old && *old ? ":" : "", old && *old ? old : "");
	static const struct {
		const char *impl, *relaxed, *ops;
	} runs[] = {
		{"timehands-preload", "0", NULL},
		{"timehands-preload-relaxed", "1", "realtime,monotonic,gettimeofday,timespec_get"},
	};
	for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
		progress("per-call: %s (child process)", runs[i].impl);
		char info[256];
		int st = -1;
		const char *how = "LD_PRELOAD";
		if (B.cli[0]) {
			const char *env[] = {"TIMEHANDS_PAGE", "none", "TIMEHANDS_RELAXED", runs[i].relaxed, NULL};
			st = spawn_self(B.cli, "preload", runs[i].impl, runs[i].ops, env, "interposed", info,
					sizeof info);
			how = "timehands run";
			if (!child_ok(st)) {
				note("`%s run` did not run the preload child (%s); using LD_PRELOAD=%s", B.cli,
				     info[0] ? info : "no output", B.preload);
				how = "LD_PRELOAD";
			}
		}
		if (!child_ok(st)) {
			const char *env[] = {"TIMEHANDS_PAGE", "none", "TIMEHANDS_RELAXED", runs[i].relaxed,
					     "LD_PRELOAD", pre, NULL};
			st = spawn_self(NULL, "preload", runs[i].impl, runs[i].ops, env, "interposed", info,
					sizeof info);
		}
		if (!child_ok(st))
			note("%s rows missing: the child under %s failed (%s)", runs[i].impl, how,
			     info[0] ? info : "no reason given");
		else if (i == 0)
			note("timehands-preload: libc calls of a child process under %s (%s), local mode", how, info);
	}
}

static int wait_for_path(const char *p, pid_t pid, double seconds)
{
	int64_t end = bench_now_ns() + (int64_t)(seconds * 1e9);
	struct stat s;
	while (bench_now_ns() < end) {
		if (stat(p, &s) == 0)
			return 0;
		int st;
		if (pid > 0 && waitpid(pid, &st, WNOHANG) == pid)
			return -1;
		usleep(10000);
	}
	return -1;
}

static void shared_rows(void)
{
	char page[PATH_MAX] = "", dir[PATH_MAX] = "", log[PATH_MAX + 16] = "";
	pid_t daemon = -1;
	int rt = 0;
	struct stat sb;
	if (B.user_page[0] && strcmp(B.user_page, "none") != 0)
		copy(page, sizeof page, B.user_page);
	else if (!B.user_page[0])
		copy(page, sizeof page, "/run/timehands/page");
	if (!page[0] || stat(page, &sb) != 0) {
		if (page[0])
			note("no timehandsd page at %s", page);
		else
			note("TIMEHANDS_PAGE=none: no shared page");
		if (!B.daemon[0] || B.no_daemon) {
			note("%s: timehands-shared rows skipped",
			     B.no_daemon ? "--no-daemon" : "no timehandsd next to this program (../daemon, ../sbin, .)");
			return;
		}
		snprintf(dir, sizeof dir, "%s/timehands-bench-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		if (!mkdtemp(dir)) {
			note("cannot create a directory for the daemon: %s", strerror(errno));
			return;
		}
		snprintf(page, sizeof page, "%s/page", dir);
		snprintf(log, sizeof log, "%s/timehandsd.log", dir);
		fflush(stdout);
		daemon = fork();
		if (daemon == 0) {
			int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			if (fd >= 0) {
				dup2(fd, 1);
				dup2(fd, 2);
			}
			setpgid(0, 0);
			/* as its packaged service runs it: real-time priority
			 * (where permitted) keeps its ticks on time while the
			 * bench's threads keep every CPU busy */
			execl(B.daemon, B.daemon, "--page", page, "--foreground", "--rt-priority", "1", (char *)NULL);
			_exit(127);
		}
		progress("started %s --page %s --foreground (pid %d) for this run", B.daemon, page, (int)daemon);
		if (daemon < 0 || wait_for_path(page, daemon, 5) != 0) {
			char l[200] = "";
			read_line(log, l, sizeof l);
			note("timehandsd did not publish %s within 5 s%s%s", page, l[0] ? ": " : "", l);
			goto stop;
		}
		usleep(100000); /* a few publisher ticks */
		int pol = sched_getscheduler(daemon);
		rt = pol >= 0 && (pol & ~SCHED_RESET_ON_FORK) == SCHED_FIFO;
	}
	progress("per-call: timehands-shared (child process, TIMEHANDS_PAGE=%s)", page);
	char mode[256];
	/* The page serves processes that do not read the kernel's own
	 * conversion of the counter: the child asks for timehands' own line,
	 * so that the page is measured also where that is read. */
	const char *env[] = {"TIMEHANDS_PAGE", page, "TIMEHANDS_LINE", "own", NULL};
	int st = spawn_self(NULL, "shared", "timehands-shared", NULL, env, "mode", mode, sizeof mode);
	/* the child waits for its join; a failed one runs again, twice at most */
	for (int again = 0; again < 2 && !child_ok(st) && (daemon <= 0 || waitpid(daemon, NULL, WNOHANG) == 0);
	     again++) {
		progress("timehands-shared: the child did not run in shared mode (%s); once more", mode[0] ? mode : "failed");
		usleep(500000);
		st = spawn_self(NULL, "shared", "timehands-shared", NULL, env, "mode", mode, sizeof mode);
	}
	if (child_ok(st)) {
		B.shared_ok = 1;
		note("timehands-shared: th_ API in a child process attached to %s%s, TIMEHANDS_LINE=own", page,
		     daemon <= 0 ? ""
		     : rt	 ? " (a timehandsd started by the bench for this run, SCHED_FIFO priority 1 as its service runs it)"
				 : " (a timehandsd started by the bench for this run, without real-time priority: "
				   "its ticks may be late while the bench keeps every CPU busy)");
	} else {
		note("timehands-shared rows skipped: the page at %s was not used (%s)", page,
		     mode[0] ? mode : "child failed");
	}
stop:
	if (daemon > 0) {
		kill(daemon, SIGTERM);
		int s = 0, waited = 0;
		for (int i = 0; i < 200 && !(waited = waitpid(daemon, &s, WNOHANG) == daemon); i++)
			usleep(10000);
		if (!waited) {
			kill(-daemon, SIGKILL);
			kill(daemon, SIGKILL);
			waitpid(daemon, &s, 0);
		}
	}
	if (dir[0]) {
		unlink(page);
		unlink(log);
		rmdir(dir);
	}
}

static void cputime_rows(void)
{
	if (!B.cputime[0]) {
		note("no CPU-time table program (bench/cputime) built: its rows are skipped");
		return;
	}
	char tmp[] = "/tmp/timehands-bench-cputime-XXXXXX";
	int fd = mkstemp(tmp);
	if (fd < 0)
		return;
	close(fd);
	progress("CPU-time table: %s", B.cputime);
	printf("CPU-time clocks (%s)\n", B.cputime);
	const char *argv[] = {B.cputime, "--json", tmp, B.o.quick ? "--quick" : NULL, NULL};
	char **envp = env_with((const char *const[]){NULL});
	int st = run_child((char *const *)argv, envp, NULL, B.o.quick ? 60 : 180);
	env_free(envp);
	printf("\n");
	if (!child_ok(st)) {
		note("%s failed (status %d): CPU-time rows skipped", B.cputime, st);
	} else {
		FILE *f = fopen(tmp, "r");
		char line[4096];
		while (f && fgets(line, sizeof line, f)) {
			/* one JSON object per line, a result row (also accepted:
			 * such lines inside a "results" array, with their commas) */
			char *o = line + strspn(line, " \t");
			size_t n = strcspn(o, "\r\n");
			while (n && (o[n - 1] == ',' || o[n - 1] == ' '))
				n--;
			o[n] = 0;
			if (n < 2 || o[0] != '{' || o[n - 1] != '}' || !strstr(o, "\"ns_per_call\""))
				continue;
			B.extra = realloc(B.extra, (B.nextra + 1) * sizeof *B.extra);
			B.extra[B.nextra++] = strdup(o);
		}
		if (f)
			fclose(f);
		if (!B.nextra)
			note("%s wrote no JSON rows to --json", B.cputime);
	}
	unlink(tmp);
}

/* ------------------------------------------------------------------ tables */

static const char *const impl_order[] = {"syscall", "vdso", "timehands", "timehands-preload",
					 "timehands-preload-relaxed", "timehands-shared", NULL};

static struct bench_row *find(const char *table, const char *op, const char *impl, int threads)
{
	for (size_t i = 0; i < B.rows.n; i++) {
		struct bench_row *r = &B.rows.v[i];
		if (strcmp(r->table, table) == 0 && (!op || strcmp(r->op, op) == 0) && strcmp(r->impl, impl) == 0 &&
		    (threads <= 0 || r->threads == threads))
			return r;
	}
	return NULL;
}

/* The vDSO's tails row measured in the same process as `r`. */
static const struct bench_row *tails_ref(const struct bench_row *r)
{
	for (size_t i = 0; i < B.rows.n; i++) {
		const struct bench_row *v = &B.rows.v[i];
		if (strcmp(v->table, "tails") == 0 && strcmp(v->op, r->op) == 0 && strcmp(v->impl, "vdso") == 0 &&
		    strcmp(v->note, r->note) == 0)
			return v;
	}
	return NULL;
}

static void print_tails(void)
{
	printf("Tails: single reads, each timed between two ordered counter reads (\"empty\": that pair alone),\n"
	       "implementations interleaved in blocks; ns. publishing: a second thread reads the same clock meanwhile\n"
	       "(the kernel's updates every tick, timehands' windups; the shared child's daemon)\n\n");
	printf("%-45s %-28s %8s %8s %8s %9s %-s\n", "read, condition", "implementation", "p50", "p99", "p99.9", "max",
	       "process");
	for (size_t i = 0; i < B.rows.n; i++) {
		const struct bench_row *r = &B.rows.v[i];
		if (strcmp(r->table, "tails") != 0)
			continue;
		printf("%-45s %-28s %8.1f %8.1f %8.1f %9.1f %s\n", r->op, r->impl, r->p50, r->p99, r->p999, r->max_ns,
		       r->note[0] ? r->note : "");
	}
	printf("\n");
}

static void print_percall(void)
{
	printf("Per-call cost: median ns per call (thread CPU time) over %d interleaved runs of 10^6..10^7 calls\n"
	       "(system calls: fewer calls, as long a loop);\n"
	       "x vdso, x floor and +floor (ns) are medians of per-run ratios and differences against the vDSO and\n"
	       "the hardware floor measured in the same round\n\n",
	       B.o.rounds);
	printf("%-42s %-26s %9s %9s %7s %7s %8s  %s\n", "operation", "implementation", "ns/call", "min", "x vdso",
	       "x floor", "+floor", "floor");
	const char *last = "";
	for (size_t i = 0; i < B.rows.n; i++) {
		const struct bench_row *first = &B.rows.v[i];
		if (strcmp(first->table, "percall") != 0 || strcmp(first->op, last) == 0)
			continue;
		/* each operation once, in the order measured, its rows in impl order */
		int seen = 0;
		for (size_t j = 0; j < i; j++)
			if (strcmp(B.rows.v[j].table, "percall") == 0 && strcmp(B.rows.v[j].op, first->op) == 0)
				seen = 1;
		if (seen)
			continue;
		last = first->op;
		int line = 0;
		for (const char *const *im = impl_order; *im; im++) {
			const struct bench_row *r = find("percall", first->op, *im, 0);
			if (!r)
				continue;
			char rv[16] = "", rf[16] = "", df[16] = "", fl[40] = "";
			if (r->ratio_vdso > 0)
				snprintf(rv, sizeof rv, "%.2f", r->ratio_vdso);
			if (r->ratio_floor > 0) {
				snprintf(rf, sizeof rf, "%.2f", r->ratio_floor);
				snprintf(df, sizeof df, "%+.1f", r->over_floor_ns);
				snprintf(fl, sizeof fl, "%s %.1f", r->floor, r->floor_ns);
			}
			printf("%-42s %-26s %9.1f %9.1f %7s %7s %8s  %s\n", line++ ? "" : r->op, r->impl,
			       r->ns_per_call, r->ns_min, rv, rf, df, fl);
		}
	}
	printf("hardware floor\n");
	for (size_t i = 0; i < B.rows.n; i++) {
		const struct bench_row *r = &B.rows.v[i];
		if (strcmp(r->table, "floor") == 0)
			printf("  %-40s %-26s %9.1f %9.1f\n", r->op, "floor", r->ns_per_call, r->ns_min);
	}
	printf("\n");
}

static void print_scaling(void)
{
	static const char *const impls[] = {"vdso", "timehands", "naive-cas"};
	printf("Scalability (seed 002): %llu calls of clock_gettime(CLOCK_MONOTONIC) per thread, %d CPUs usable;\n"
	       "WALL = seconds from the common start to the last thread's end (median of %d runs), ns/call = the\n"
	       "threads' own CPU time per call; naive-cas = the vDSO plus a global compare-and-swap on the last value\n\n",
	       (unsigned long long)B.o.scale_calls, B.m.usable, B.o.scale_rounds);
	printf("%7s", "THREADS");
	for (int a = 0; a < 3; a++)
		printf(" | %-30s", impls[a]);
	printf("\n%7s", "");
	for (int a = 0; a < 3; a++)
		printf(" | %8s %10s %9s", "WALL", "WALL/THR", "ns/call");
	printf("\n");
	for (int t = 0; t < B.o.nthreads; t++) {
		printf("%7d", B.o.threads[t]);
		for (int a = 0; a < 3; a++) {
			const struct bench_row *r = find("scaling", NULL, impls[a], B.o.threads[t]);
			if (r)
				printf(" | %8.3f %10.4f %9.1f", r->wall_s, r->wall_s / r->threads, r->ns_per_call);
			else
				printf(" | %30s", "");
		}
		printf("\n");
	}
	const struct bench_row *v2 = find("scaling", NULL, "vdso", 2);
	if (v2 && v2->ratio_1t > 0) {
		printf("\nper-call cost at 2 threads vs 1:");
		for (int a = 0; a < 3; a++) {
			const struct bench_row *r = find("scaling", NULL, impls[a], 2);
			if (r)
				printf("  %s %.3fx%s", impls[a], r->ratio_1t, a < 2 ? "," : "");
		}
		printf("\n");
	}
	printf("\n");
}

static void print_guarantees(void)
{
	static const char *const impls[] = {"kernel", "timehands", "timehands-shared"};
	int na = B.shared_ok ? 3 : 2;
	printf("Guarantees: violations counted over the same number of reads (0 is the promise; the kernel has\n"
	       "none of G3/G4 for time() and coarse clocks)\n\n");
	printf("%-50s %-3s %11s", "check", "", "reads");
	for (int a = 0; a < na; a++)
		printf(" %17s", impls[a]);
	printf("\n");
	for (size_t i = 0; i < B.checks.n; i++) {
		const struct bench_check *c = &B.checks.v[i];
		int seen = 0;
		for (size_t j = 0; j < i; j++)
			seen |= strcmp(B.checks.v[j].check, c->check) == 0;
		if (seen)
			continue;
		printf("%-50s %-3s %11llu", c->check, c->guarantee, (unsigned long long)c->reads);
		char n[160] = "";
		for (int a = 0; a < na; a++) {
			const struct bench_check *x = NULL;
			for (size_t j = 0; j < B.checks.n; j++)
				if (strcmp(B.checks.v[j].check, c->check) == 0 && strcmp(B.checks.v[j].impl, impls[a]) == 0)
					x = &B.checks.v[j];
			char cell[40] = "-";
			if (x && x->violations)
				snprintf(cell, sizeof cell, "%llu (%.3f%%)", (unsigned long long)x->violations,
					 100.0 * (double)x->violations / (double)(x->reads ? x->reads : 1));
			else if (x)
				snprintf(cell, sizeof cell, "0");
			size_t l = strlen(n);
			if (x && x->note[0] && !strstr(n, x->note))
				snprintf(n + l, sizeof n - l, "%s%s", l ? "; " : "", x->note);
			l = strlen(n);
			if (x && x->max_step_ns)
				snprintf(n + l, sizeof n - l, "%s%s: largest step %lld ns", l ? "; " : "", impls[a],
					 (long long)x->max_step_ns);
			printf(" %17s", cell);
		}
		printf("%s%s\n", n[0] ? "  " : "", n);
	}
	printf("\n");
}

/* ------------------------------------------------------------------ targets */

static void target(const char *what, const char *impl, double value, double limit, const char *unit)
{
	if (B.ntargets >= (int)(sizeof B.targets / sizeof *B.targets))
		return;
	struct target *t = &B.targets[B.ntargets++];
	copy(t->what, sizeof t->what, what);
	copy(t->impl, sizeof t->impl, impl);
	t->value = value;
	t->limit = limit;
	t->unit = unit;
	t->met = strcmp(unit, "x>=") == 0 ? value >= limit : value <= limit;
}

/* A field of one flat JSON object (the CPU-time program's rows): a string
 * copied into out, or a number parsed into *num. Returns 0 if found. */
static int json_field(const char *obj, const char *key, char *out, size_t size, double *num)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\"", key);
	const char *p = strstr(obj, pat);
	if (!p)
		return -1;
	p += strlen(pat);
	p += strspn(p, " \t");
	if (*p++ != ':')
		return -1;
	p += strspn(p, " \t");
	if (*p == '"' && out) {
		size_t n = strcspn(p + 1, "\"");
		copy(out, n + 1 < size ? n + 1 : size, p + 1);
		return 0;
	}
	if (num) {
		char *e;
		*num = strtod(p, &e);
		return e == p ? -1 : 0;
	}
	return -1;
}

static char targets_note[512];

/* The floor row `name` that the process of row r measured, or NULL. */
static const struct bench_row *floor_row(const struct bench_row *r, const char *name)
{
	for (size_t i = 0; i < B.rows.n; i++) {
		const struct bench_row *x = &B.rows.v[i];
		if (strcmp(x->table, "floor") == 0 && strcmp(x->note, r->note) == 0 && strcmp(x->op, name) == 0)
			return x;
	}
	return NULL;
}

/* A fine or relaxed row's target text: the op over its floor, and what the
 * second floor the same process measured costs over the first: for
 * gettimeofday its division to microseconds (lfence;rdtsc;mul;/1000), for
 * a timespec the minimal sequence-locked reader (seq;...;timespec), the
 * least any reader returning one costs there. */
static void over_floor_what(char *w, size_t size, const char *op, const struct bench_row *r, const char *path)
{
	char name[48], second[160] = "";
	int usec = strcmp(op, "gettimeofday") == 0;
	if (usec)
		snprintf(name, sizeof name, "%s;/1000", r->floor);
	else
		snprintf(name, sizeof name, "seq;%s;timespec", r->floor);
	const struct bench_row *f0 = floor_row(r, r->floor), *f1 = floor_row(r, name);
	if (f0 && f1)
		snprintf(second, sizeof second, "%s, %s, costs %+.1f ns more",
			 usec ? "the floor with its division to microseconds"
			      : "a minimal sequence-locked reader returning a timespec",
			 name, f1->ns_per_call - f0->ns_per_call);
	snprintf(w, size, "%s over the %s floor%s%s%s%s", op, r->floor, path[0] || second[0] ? " (" : "", path,
		 path[0] && second[0] ? "; " : "", second);
	if (path[0] || second[0])
		snprintf(w + strlen(w), size - strlen(w), ")");
}

static void evaluate_targets(void)
{
	/* doc/design.md's targets. Fine clocks: never slower than the vDSO (the
	 * libc call under the preload); over the ordered floor
	 * (lfence;rdtsc;mul) at most 1 ns inline, 2.5 ns by library call and
	 * through the preload. Relaxed: at most 1 ns over the unordered floor
	 * inline, 0.65x the libc call through the preload. */
	static const char *const fine[] = {"clock_gettime(CLOCK_MONOTONIC)", "clock_gettime(CLOCK_REALTIME)",
					   "clock_gettime(CLOCK_MONOTONIC_RAW)", "clock_gettime(CLOCK_BOOTTIME)",
					   "clock_gettime(CLOCK_TAI)", "gettimeofday", "timespec_get(TIME_UTC)"};
	enum { NFINE = sizeof fine / sizeof *fine };
	static const char *const relaxed[] = {"clock_gettime(TH_CLOCK_MONOTONIC_RELAXED)",
					      "clock_gettime(TH_CLOCK_REALTIME_RELAXED)"};
	static const char *const cheap[] = {"clock_gettime(CLOCK_MONOTONIC_COARSE)",
					    "clock_gettime(CLOCK_REALTIME_COARSE)", "time",
					    "time (th_time library call)"};
	static const char *const th[] = {"timehands", "timehands-shared"};
	static const char *const calls[] = {"clock_gettime(CLOCK_MONOTONIC) (th_clock_gettime library call)",
					    "clock_gettime(CLOCK_REALTIME) (th_clock_gettime library call)"};
	char w[320];
#ifdef TH__FINE_INLINE
	const int inline_fine = 1;
#else
	const int inline_fine = 0;
#endif
	const struct bench_row *r;
	for (int i = 0; i < 2; i++) {
		for (int k = 0; k < NFINE; k++) {
			if (!(r = find("percall", fine[k], th[i], 0)))
				continue;
			/* th_clock_gettime() with a constant id and
			 * th_gettimeofday() are the header's inline read */
			over_floor_what(w, sizeof w, fine[k], r, inline_fine ? "inline header path" : "");
			if (r->floor[0])
				target(w, th[i], r->over_floor_ns, inline_fine ? 1.0 : 2.5, "ns");
			snprintf(w, sizeof w, "%s vs vdso", fine[k]);
			target(w, th[i], r->ratio_vdso, 1.0, "x");
		}
		for (int k = 0; k < 2; k++) {
			if (!(r = find("percall", calls[k], th[i], 0)))
				continue;
			over_floor_what(w, sizeof w, calls[k], r, "");
			if (r->floor[0])
				target(w, th[i], r->over_floor_ns, 2.5, "ns");
			snprintf(w, sizeof w, "%s vs vdso", calls[k]);
			target(w, th[i], r->ratio_vdso, 1.0, "x");
		}
		for (int k = 0; k < 2; k++) {
			if (!(r = find("percall", relaxed[k], th[i], 0)) || !r->floor[0])
				continue;
			over_floor_what(w, sizeof w, relaxed[k], r, "");
			target(w, th[i], r->over_floor_ns, 1.0, "ns");
		}
		for (size_t k = 0; k < sizeof cheap / sizeof *cheap; k++)
			if ((r = find("percall", cheap[k], th[i], 0))) {
				snprintf(w, sizeof w, "%s vs vdso", cheap[k]);
				target(w, th[i], r->ratio_vdso, 1.0, "x");
			}
	}
	/* Through the preload: every clock it serves against the libc call of
	 * the same process, and the fine ones against that process's floor. */
	const char *pl = "timehands-preload", *plr = "timehands-preload-relaxed";
	for (int k = 0; k < NFINE; k++) {
		if ((r = find("percall", fine[k], pl, 0))) {
			snprintf(w, sizeof w, "%s vs the libc call", fine[k]);
			target(w, pl, r->ratio_vdso, 1.0, "x");
			over_floor_what(w, sizeof w, fine[k], r, "");
			if (r->floor[0])
				target(w, pl, r->over_floor_ns, 2.5, "ns");
		}
		if ((r = find("percall", fine[k], plr, 0))) {
			snprintf(w, sizeof w, "%s vs the libc call", fine[k]);
			target(w, plr, r->ratio_vdso, 0.65, "x");
		}
	}
	for (size_t k = 0; k < 3; k++)
		if ((r = find("percall", cheap[k], pl, 0))) {
			snprintf(w, sizeof w, "%s vs the libc call", cheap[k]);
			target(w, pl, r->ratio_vdso, 1.0, "x");
		}
	/* What a vDSO that falls back to the system call gains: a target
	 * where system calls cost 1 us or more. */
	const struct bench_row *s = find("percall", fine[0], "syscall", 0), *t = find("percall", fine[0], "timehands", 0);
	if (s && t && t->ns_per_call > 0) {
		snprintf(w, sizeof w, "%s: system call / timehands (what a vDSO falling back to the syscall gains)",
			 fine[0]);
		if (s->ns_per_call >= 1000)
			target(w, "timehands", s->ns_per_call / t->ns_per_call, 40, "x>=");
		else
			snprintf(targets_note, sizeof targets_note,
				 "  (no target for %s: %.2fx; system calls cost %.0f ns here, the target applies from 1 us)\n",
				 w, s->ns_per_call / t->ns_per_call, s->ns_per_call);
	}
	/* Tails: p99.9 and max of single reads no higher than the vDSO's in
	 * the same process and condition. */
	for (size_t i = 0; i < B.rows.n; i++) {
		const struct bench_row *x = &B.rows.v[i], *v;
		if (strcmp(x->table, "tails") != 0 || strncmp(x->impl, "timehands", 9) != 0 || !(v = tails_ref(x)))
			continue;
		snprintf(w, sizeof w, "%s: p99.9 over the vDSO's (%.1f ns)", x->op, v->p999);
		target(w, x->impl, x->p999 - v->p999, 0.0, "ns");
		snprintf(w, sizeof w, "%s: max over the vDSO's (%.1f ns)", x->op, v->max_ns);
		target(w, x->impl, x->max_ns - v->max_ns, 0.0, "ns");
	}
	/* CPU-time clocks (bench/cputime, one thread): at most 3 ns over
	 * timehands' own MONOTONIC_COARSE, read by the same program in the same
	 * rounds (its floor); a program that does not measure it is compared
	 * with the per-call table's */
	const struct bench_row *mc = find("percall", "clock_gettime(CLOCK_MONOTONIC_COARSE)", "timehands", 0);
	for (size_t i = 0; i < B.nextra; i++) {
		char op[64] = "", impl[32] = "";
		double ns = 0, threads = 0, ref = 0, over = 0;
		if (json_field(B.extra[i], "op", op, sizeof op, NULL) != 0 ||
		    json_field(B.extra[i], "impl", impl, sizeof impl, NULL) != 0 || strncmp(impl, "timehands", 9) != 0 ||
		    json_field(B.extra[i], "threads", NULL, 0, &threads) != 0 || threads != 1 ||
		    json_field(B.extra[i], "ns_per_call", NULL, 0, &ns) != 0)
			continue;
		if (json_field(B.extra[i], "floor_ns", NULL, 0, &ref) == 0 &&
		    json_field(B.extra[i], "over_floor_ns", NULL, 0, &over) == 0 && ref > 0) {
			snprintf(w, sizeof w, "%s over timehands' CLOCK_MONOTONIC_COARSE in the same rounds (%.1f ns), 1 thread",
				 op, ref);
		} else if (mc) {
			over = ns - mc->ns_per_call;
			snprintf(w, sizeof w, "%s over timehands' CLOCK_MONOTONIC_COARSE (%.1f ns), 1 thread", op,
				 mc->ns_per_call);
		} else {
			continue;
		}
		target(w, impl, over, 3.0, "ns");
	}
	/* CPU-time clocks, from the rows of bench/cputime: >= 30x the system
	 * call; per operation, its worst thread count */
	for (size_t i = 0; i < B.nextra; i++) {
		char op[64] = "", impl[32] = "", op2[64], impl2[32];
		double rk = 0, worst = 0, threads = 1, worst_threads = 1;
		if (json_field(B.extra[i], "op", op, sizeof op, NULL) != 0 ||
		    json_field(B.extra[i], "impl", impl, sizeof impl, NULL) != 0 || strncmp(impl, "timehands", 9) != 0)
			continue;
		int seen = 0;
		for (size_t j = 0; j < B.nextra; j++) {
			if (json_field(B.extra[j], "op", op2, sizeof op2, NULL) != 0 || strcmp(op, op2) != 0 ||
			    json_field(B.extra[j], "impl", impl2, sizeof impl2, NULL) != 0 || strcmp(impl, impl2) != 0 ||
			    json_field(B.extra[j], "ratio_kernel", NULL, 0, &rk) != 0 || rk <= 0)
				continue;
			if (j < i) {
				seen = 1;
				break;
			}
			json_field(B.extra[j], "threads", NULL, 0, &threads);
			if (rk > worst) {
				worst = rk;
				worst_threads = threads;
			}
		}
		if (!seen && worst > 0) {
			snprintf(w, sizeof w, "%s: kernel call / timehands, worst thread count (%d)", op,
				 (int)worst_threads);
			target(w, impl, 1 / worst, 30, "x>=");
		}
	}
	const struct bench_row *v2 = find("scaling", NULL, "vdso", 2), *t2 = find("scaling", NULL, "timehands", 2);
	if (v2 && t2 && v2->ratio_1t > 0)
		target("per-call cost at 2 threads vs 1, relative to the vDSO's own ratio", "timehands",
		       t2->ratio_1t / v2->ratio_1t, 1.05, "x");
}

static void print_targets(void)
{
	printf("Performance targets (doc/design.md), measured in this run:\n");
	for (int i = 0; i < B.ntargets; i++) {
		const struct target *t = &B.targets[i];
		if (strcmp(t->unit, "ns") == 0)
			printf("  %-6s %-25s %s: %+.1f ns (target <= %+.1f ns)\n", t->met ? "met" : "MISSED", t->impl,
			       t->what, t->value, t->limit);
		else
			printf("  %-6s %-25s %s: %.2fx (target %s %.2fx)\n", t->met ? "met" : "MISSED", t->impl, t->what,
			       t->value, strcmp(t->unit, "x") == 0 ? "<=" : ">=", t->limit);
	}
	fputs(targets_note, stdout);
	printf("\n");
}

/* ------------------------------------------------------------------ JSON */

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void json_num(FILE *f, const char *key, double v)
{
	if (v != 0)
		fprintf(f, ", \"%s\": %.6g", key, v);
}

static int write_json(const char *path)
{
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, PREFIX "cannot write %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	const struct machine *m = &B.m;
	const struct th_status *s = &m->st;
	fprintf(f, "{\n  \"machine\": {\"date\": ");
	json_str(f, m->date);
	fprintf(f, ", \"cpu\": ");
	json_str(f, m->cpu);
	fprintf(f, ", \"cpus_online\": %d, \"cpus_usable\": %d, \"hypervisor\": ", m->online, m->usable);
	json_str(f, m->hypervisor);
	fprintf(f, ", \"kernel\": ");
	json_str(f, m->kernel);
	fprintf(f, ", \"clocksource\": ");
	json_str(f, m->clocksource);
	fprintf(f, ", \"libc\": ");
	json_str(f, m->libc);
	fprintf(f, ", \"compiler\": ");
	json_str(f, COMPILER);
	fprintf(f, ", \"loadavg\": ");
	json_str(f, m->loadavg);
	fprintf(f, ",\n    \"timehands\": {\"mode\": \"%s\", \"counter\": \"%s\", \"freq_hz\": %.1f, \"freq_source\": ",
		mode_name(s->mode), counter_name(s->counter), s->freq_hz);
	json_str(f, s->freq_source);
	fprintf(f, ", \"freq_uncertainty_ppm\": %.3f, \"reason\": ", s->freq_uncertainty_ppm);
	json_str(f, s->reason);
	fprintf(f, "}},\n  \"settings\": {\"quick\": %s, \"rounds\": %d, \"target_ms\": %g, \"scale_calls\": %llu, "
		   "\"scale_rounds\": %d, \"guarantee_s\": %g, \"stream_reads\": %llu},\n",
		B.o.quick ? "true" : "false", B.o.rounds, B.o.target_ms, (unsigned long long)B.o.scale_calls,
		B.o.scale_rounds, B.o.guarantee_s, (unsigned long long)B.o.stream_reads);
	fprintf(f, "  \"results\": [");
	int first = 1;
	for (size_t i = 0; i < B.rows.n; i++, first = 0) {
		const struct bench_row *r = &B.rows.v[i];
		fprintf(f, "%s\n    {\"table\": \"%s\", \"op\": ", first ? "" : ",", r->table);
		json_str(f, r->op);
		fprintf(f, ", \"impl\": ");
		json_str(f, r->impl);
		fprintf(f, ", \"threads\": %d, \"ns_per_call\": %.3f", r->threads, r->ns_per_call);
		json_num(f, "ns_min", r->ns_min);
		json_num(f, "ratio_vdso", r->ratio_vdso);
		json_num(f, "vdso_ref_ns", r->vdso_ref_ns);
		if (r->floor[0]) {
			fprintf(f, ", \"floor\": ");
			json_str(f, r->floor);
		}
		json_num(f, "floor_ns", r->floor_ns);
		json_num(f, "ratio_floor", r->ratio_floor);
		json_num(f, "over_floor_ns", r->over_floor_ns);
		json_num(f, "wall_s", r->wall_s);
		if (r->wall_s > 0)
			json_num(f, "wall_per_thread_s", r->wall_s / r->threads);
		json_num(f, "ratio_1t", r->ratio_1t);
		json_num(f, "p50_ns", r->p50);
		json_num(f, "p99_ns", r->p99);
		json_num(f, "p999_ns", r->p999);
		json_num(f, "max_ns", r->max_ns);
		fprintf(f, ", \"runs\": %d, \"calls\": %llu", r->runs, (unsigned long long)r->calls);
		if (r->note[0]) {
			fprintf(f, ", \"note\": ");
			json_str(f, r->note);
		}
		fprintf(f, "}");
	}
	for (size_t i = 0; i < B.nextra; i++, first = 0)
		fprintf(f, "%s\n    %s", first ? "" : ",", B.extra[i]);
	fprintf(f, "\n  ],\n  \"guarantees\": [");
	for (size_t i = 0; i < B.checks.n; i++) {
		const struct bench_check *c = &B.checks.v[i];
		fprintf(f, "%s\n    {\"check\": ", i ? "," : "");
		json_str(f, c->check);
		fprintf(f, ", \"impl\": ");
		json_str(f, c->impl);
		fprintf(f, ", \"guarantee\": \"%s\", \"reads\": %llu, \"violations\": %llu", c->guarantee,
			(unsigned long long)c->reads, (unsigned long long)c->violations);
		if (c->max_step_ns)
			fprintf(f, ", \"max_step_ns\": %lld", (long long)c->max_step_ns);
		if (c->note[0]) {
			fprintf(f, ", \"note\": ");
			json_str(f, c->note);
		}
		fprintf(f, "}");
	}
	fprintf(f, "\n  ],\n  \"targets\": [");
	for (int i = 0; i < B.ntargets; i++) {
		const struct target *t = &B.targets[i];
		fprintf(f, "%s\n    {\"target\": ", i ? "," : "");
		json_str(f, t->what);
		fprintf(f, ", \"impl\": ");
		json_str(f, t->impl);
		fprintf(f, ", \"value\": %.4g, \"limit\": %.4g, \"unit\": \"%s\", \"met\": %s}", t->value, t->limit,
			t->unit, t->met ? "true" : "false");
	}
	fprintf(f, "\n  ],\n  \"notes\": [");
	for (int i = 0; i < B.nnotes; i++) {
		fprintf(f, "%s\n    ", i ? "," : "");
		json_str(f, B.notes[i]);
	}
	fprintf(f, "\n  ]\n}\n");
	if (fclose(f) != 0 || rename(tmp, path) != 0) {
		fprintf(stderr, PREFIX "cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ options */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: timehands-bench [--quick] [--json PATH] [--threads LIST] [options]\n"
		"  --quick            fewer rounds and shorter loops (about a third of the time)\n"
		"  --json PATH        write every figure as JSON to PATH\n"
		"  --threads LIST     thread counts of the scalability table (default 1,2,4,8)\n"
		"  --calls N          calls per thread in the scalability table (default 1000000)\n"
		"  --rounds N         interleaved rounds of the per-call table (default 5, quick 3)\n"
		"  --target-ms MS     length of a per-call loop (default 15, quick 8; at least 10^6 fast calls)\n"
		"  --loop-calls N     calls per per-call loop instead (a smoke test; figures then mean little)\n"
		"  --guarantee-seconds S  length of the same-thread guarantee loop (default 2.2, quick 1.2)\n"
		"  --stream-reads N   reads per cross-thread stream (default 3000000, quick 1000000)\n"
		"  --preload PATH     libtimehands-preload.so (default: found next to this program)\n"
		"  --cli PATH         the timehands CLI used for `timehands run` (default: found likewise)\n"
		"  --daemon PATH      timehandsd to start when no shared page exists (default: found likewise)\n"
		"  --no-daemon        never start a daemon\n"
		"  --cputime PATH     the CPU-time table program (default: found likewise)\n"
		"  --no-children      only what this process measures (no preload, shared or CPU-time rows)\n");
}

static int parse_threads(const char *s)
{
	B.o.nthreads = 0;
	while (*s && B.o.nthreads < 16) {
		char *e;
		long v = strtol(s, &e, 10);
		if (e == s || v < 1 || v > 1024)
			return -1;
		B.o.threads[B.o.nthreads++] = (int)v;
		s = *e == ',' ? e + 1 : e;
		if (*e && *e != ',')
			return -1;
	}
	return B.o.nthreads ? 0 : -1;
}

static void self_paths(void)
{
	ssize_t n = readlink("/proc/self/exe", B.exe, sizeof B.exe - 1);
	B.exe[n > 0 ? n : 0] = 0;
	copy(B.dir, sizeof B.dir, B.exe);
	char *slash = strrchr(B.dir, '/');
	if (slash)
		*slash = 0;
}

static void discover(void)
{
	static const char *const preload[] = {"../preload/libtimehands-preload.so",
					      "../lib/timehands/libtimehands-preload.so",
					      "../" TH_BENCH_LIBDIR "/timehands/libtimehands-preload.so",
					      "../" TH_BENCH_LIBDIR "/libtimehands-preload.so",
					      "../lib/libtimehands-preload.so", NULL};
	static const char *const cli[] = {"../tools/timehands", "timehands", NULL};
	static const char *const daemon[] = {"../daemon/timehandsd", "timehandsd", "../sbin/timehandsd", NULL};
	static const char *const cputime[] = {"cputime/timehands-bench-cputime", "timehands-bench-cputime", NULL};
	if (!B.preload[0])
		find_near(B.preload, preload, is_file);
	if (!B.cli[0])
		find_near(B.cli, cli, is_exec);
	if (!B.daemon[0])
		find_near(B.daemon, daemon, is_exec);
	if (!B.cputime[0])
		find_near(B.cputime, cputime, is_exec);
	if (!B.cputime[0]) {
		/* bench/cputime built under another name: its one program */
		char d[PATH_MAX], p[PATH_MAX + 256];
		snprintf(d, sizeof d, "%.*s/cputime", PATH_MAX - 16, B.dir);
		DIR *dir = opendir(d);
		struct dirent *e;
		while (dir && (e = readdir(dir)))
			if (e->d_name[0] != '.' && snprintf(p, sizeof p, "%s/%s", d, e->d_name) < (int)sizeof p &&
			    is_exec(p) && !B.cputime[0])
				copy(B.cputime, sizeof B.cputime, p);
		if (dir)
			closedir(dir);
	}
}

static int child_main(const char *mode, const char *impl, const char *ops)
{
	struct bench_rows rows = {0};
	struct bench_checks checks = {0};
	if (strcmp(mode, "preload") == 0) {
		/* Is libc's clock_gettime the preload's here? */
		void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
		void *mine = dlsym(RTLD_DEFAULT, "clock_gettime");
		void *theirs = libc ? dlsym(libc, "clock_gettime") : NULL;
		Dl_info di;
		const char *where = dladdr(mine, &di) && di.dli_fname ? di.dli_fname : "?";
		if (!mine || mine == theirs) {
			printf("info\tinterposed\tclock_gettime is libc's own: the preload is not in effect\n");
			return 3;
		}
		printf("info\tinterposed\tclock_gettime from %s\n", where);
		percall_run(&B.o, SET_PRELOAD, impl, ops, &rows);
		if (!ops)
			tails_run(&B.o, SET_PRELOAD, impl, &rows);
	} else if (strcmp(mode, "shared") == 0) {
		/* A process joins the page at its first read and, where the
		 * page is not ready yet (a daemon just started, a busy machine),
		 * tries again about once a second: wait for it, bounded. */
		struct th_status st;
		int64_t give_up = bench_now_ns() + 15 * (int64_t)1000000000;
		for (;;) {
			memset(&st, 0, sizeof st);
			th_status(&st, sizeof st);
			if (st.mode == TH_MODE_SHARED || bench_now_ns() > give_up)
				break;
			struct timespec ts;
			th_clock_gettime(CLOCK_MONOTONIC, &ts);
			usleep(20000);
		}
		if (st.mode != TH_MODE_SHARED) {
			printf("info\tmode\tmode %s%s%s\n", mode_name(st.mode), st.reason[0] ? ": " : "", st.reason);
			return 3;
		}
		printf("info\tmode\tshared\n");
		percall_run(&B.o, SET_SHARED, impl, ops, &rows);
		if (!ops)
			tails_run(&B.o, SET_SHARED, impl, &rows);
		guarantee_run(&B.o, impl, 0, &checks);
	} else {
		fprintf(stderr, PREFIX "unknown --child %s\n", mode);
		return 2;
	}
	emit_rows(&rows, &checks, stdout);
	free(rows.v);
	return 0;
}

int main(int argc, char **argv)
{
	const char *child = NULL, *child_impl = "", *child_ops = NULL;
	int rounds = 0;
	double target_ms = 0, guarantee_s = 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	parse_threads("1,2,4,8");
	B.o.scale_calls = 1000000;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (strcmp(a, name) == 0 && v && (i++, 1))
		if (strcmp(a, "--quick") == 0)
			B.o.quick = 1;
		else if (ARG("--json"))
			B.json_path = v;
		else if (ARG("--threads")) {
			if (parse_threads(v) != 0) {
				fprintf(stderr, PREFIX "bad --threads %s (want e.g. 1,2,4,8)\n", v);
				return 2;
			}
		} else if (ARG("--calls"))
			B.o.scale_calls = strtoull(v, NULL, 10);
		else if (ARG("--rounds"))
			rounds = atoi(v);
		else if (ARG("--target-ms"))
			target_ms = strtod(v, NULL);
		else if (ARG("--loop-calls"))
			B.o.loop_calls = strtoull(v, NULL, 10);
		else if (ARG("--guarantee-seconds"))
			guarantee_s = strtod(v, NULL);
		else if (ARG("--stream-reads"))
			B.o.stream_reads = strtoull(v, NULL, 10);
		else if (ARG("--preload"))
			copy(B.preload, sizeof B.preload, v);
		else if (ARG("--cli"))
			copy(B.cli, sizeof B.cli, v);
		else if (ARG("--daemon"))
			copy(B.daemon, sizeof B.daemon, v);
		else if (ARG("--cputime"))
			copy(B.cputime, sizeof B.cputime, v);
		else if (strcmp(a, "--no-daemon") == 0)
			B.no_daemon = 1;
		else if (strcmp(a, "--no-children") == 0)
			B.no_children = 1;
		else if (ARG("--child"))
			child = v;
		else if (ARG("--impl"))
			child_impl = v;
		else if (ARG("--ops"))
			child_ops = v;
		else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, PREFIX "unknown or incomplete option %s\n", a);
			usage(stderr);
			return 2;
		}
#undef ARG
	}
	/* defaults sized for `make bench` in about two minutes with the build,
	 * on a 2-CPU machine */
	B.o.rounds = rounds > 0 ? rounds : B.o.quick ? 3 : 5;
	B.o.target_ms = target_ms > 0 ? target_ms : B.o.quick ? 8 : 15;
	B.o.scale_rounds = B.o.quick ? 2 : 3;
	B.o.guarantee_s = guarantee_s > 0 ? guarantee_s : B.o.quick ? 1.2 : 2.2;
	if (!B.o.stream_reads)
		B.o.stream_reads = B.o.quick ? 1000000 : 3000000;
	if (B.o.scale_calls == 0)
		B.o.scale_calls = 1000000;
	self_paths();
	if (child)
		return child_main(child, child_impl, child_ops);

	/* This process measures timehands in local mode; the shared page, if
	 * any, is measured in a child (timehands-shared). */
	const char *page = getenv("TIMEHANDS_PAGE");
	copy(B.user_page, sizeof B.user_page, page ? page : "");
	setenv("TIMEHANDS_PAGE", "none", 1);
	discover();

	/* attach and let the local discipline settle (its first records are
	 * short) before anything is measured */
	struct timespec ts;
	int64_t settle = bench_now_ns() + 300000000;
	while (bench_now_ns() < settle)
		for (int i = 0; i < 10000; i++)
			th_clock_gettime(CLOCK_MONOTONIC, &ts);
	machine_context(&B.m);
	print_machine(&B.m);

	progress("per-call: syscall, vdso, timehands (%d rounds)", B.o.rounds);
	percall_run(&B.o, SET_MAIN, NULL, NULL, &B.rows);
	progress("tails: single reads");
	tails_run(&B.o, SET_MAIN, NULL, &B.rows);
	if (!B.no_children) {
		preload_rows();
		shared_rows();
	}
	print_percall();
	print_tails();

	progress("scalability: threads");
	scaling_run(&B.o, &B.rows);
	print_scaling();

	progress("guarantees (%.1f s same-thread, %llu streamed reads per clock)", B.o.guarantee_s,
		 (unsigned long long)B.o.stream_reads);
	guarantee_run(&B.o, "timehands", 1, &B.checks);
	print_guarantees();

	if (!B.no_children)
		cputime_rows();

	evaluate_targets();
	print_targets();
	if (B.json_path && write_json(B.json_path) == 0)
		printf("wrote %s\n", B.json_path);
	return 0;
}
