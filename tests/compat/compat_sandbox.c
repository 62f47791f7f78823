/*
 * Programs that lock themselves down after start: one closes every file
 * descriptor, one installs a seccomp filter that kills the process on any
 * system call but the clock reads and a few of its own (write, sleeping,
 * exit). Both then read the clocks over many record windows, so that windups
 * and slow paths run under the restriction. The preload attached in its
 * constructor: afterwards it must need nothing else. Failures are reported
 * through the exit status (there may be no stderr left).
 *
 *   compat_sandbox closefds | seccomp
 */
#include "compat.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/times.h>
#include <sys/wait.h>

/* Reads every clock for `ms` milliseconds, sleeping a little now and then so
 * that records come due; returns the number of failed checks. */
static int read_for(int ms)
{
	/* TIMEHANDS_DISABLE=1 passes time() and gettimeofday() to the kernel,
	 * whose seconds are not coherent (the point of G3) */
	const char *dis = getenv("TIMEHANDS_DISABLE");
	int g3 = !(dis && strcmp(dis, "1") == 0);
	int bad = 0;
	int64_t end = sys_ns(CLOCK_MONOTONIC) + (int64_t)ms * 1000000, last = 0;
	struct timespec pause = {0, 300000};
	for (int i = 0; sys_ns(CLOCK_MONOTONIC) < end; i++) {
		static const clockid_t ids[] = {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME,
						CLOCK_TAI};
		for (size_t j = 0; j < sizeof ids / sizeof *ids; j++) {
			struct timespec ts;
			int64_t k1 = sys_ns(ids[j]);
			bad += clock_gettime(ids[j], &ts) != 0;
			int64_t k2 = sys_ns(ids[j]);
			bad += ts_ns(&ts) < k1 - SLACK_NS || ts_ns(&ts) > k2 + SLACK_NS;
			if (ids[j] == CLOCK_MONOTONIC) {
				bad += ts_ns(&ts) < last;
				last = ts_ns(&ts);
			}
		}
		struct timespec ts;
		struct timeval tv;
		struct tms tm;
		clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
		clock_gettime(CLOCK_REALTIME_COARSE, &ts);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
		clock_getres(CLOCK_MONOTONIC, &ts);
		timespec_get(&ts, TIME_UTC);
		gettimeofday(&tv, NULL);
		bad += g3 && time(NULL) < tv.tv_sec;
		bad += times(&tm) == (clock_t)-1;
		bad += clock() == (clock_t)-1;
		if (i % 16 == 0)
			nanosleep(&pause, NULL);
	}
	return bad;
}

static void *reader(void *arg)
{
	*(int *)arg = read_for(150);
	return NULL;
}

static int closefds(void)
{
	struct rlimit rl;
	int max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 ? (int)rl.rlim_cur : 65536;
	for (int fd = 0; fd < max; fd++)
		close(fd);
	int r1 = 0, r2 = 0;
	pthread_t t;
	if (pthread_create(&t, NULL, reader, &r1) != 0)
		return 10;
	r2 = read_for(150);
	pthread_join(t, NULL);
	/* and in a child */
	pid_t pid = fork();
	if (pid == 0)
		_exit(read_for(50) ? 1 : 0);
	int st = 0;
	int child_bad = pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	return (r1 || r2) ? 1 : child_bad ? 2 : 0;
}

#if defined(__x86_64__)
#define TH_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define TH_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#ifndef SECCOMP_RET_KILL_PROCESS
#define SECCOMP_RET_KILL_PROCESS SECCOMP_RET_KILL
#endif

#define ALLOW(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

static int seccomp_mode(void)
{
#ifdef TH_AUDIT_ARCH
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TH_AUDIT_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		ALLOW(__NR_clock_gettime),
		ALLOW(__NR_clock_getres),
		ALLOW(__NR_gettimeofday),
#ifdef __NR_time
		ALLOW(__NR_time),
#endif
		ALLOW(__NR_times),
		ALLOW(__NR_clock_nanosleep),
#ifdef __NR_nanosleep
		ALLOW(__NR_nanosleep),
#endif
		ALLOW(__NR_write),
		ALLOW(__NR_exit_group),
		ALLOW(__NR_exit),
		ALLOW(__NR_rt_sigreturn),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	};
	struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof *f), f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		return 20;
	const char *ms = getenv("TH_COMPAT_SANDBOX_MS");
	return read_for(ms ? atoi(ms) : 200) ? 1 : 0;
#else
	return 0;
#endif
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	/* stdout must not allocate its buffer under the filter */
	setvbuf(stdout, NULL, _IONBF, 0);
	if (strcmp(argv[1], "closefds") == 0)
		return closefds();
	if (strcmp(argv[1], "seccomp") == 0) {
		int r = seccomp_mode();
		if (r == 0) {
			static const char ok[] = "compat_sandbox seccomp: ok\n";
			ssize_t w = write(1, ok, sizeof ok - 1);
			(void)w;
		}
		return r;
	}
	return 2;
}
