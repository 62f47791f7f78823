/*
 * th_clock() returns (clock_t)-1 exactly when clock() would: when the kernel
 * refuses CLOCK_PROCESS_CPUTIME_ID. A seccomp filter plays that kernel, in a
 * child each time:
 *  - from the start (nothing cached): -1 at once, like clock(); the coarse
 *    ids fail with clock_gettime()'s errno; th_times() returns what glibc's
 *    times() returns for the refused system call;
 *  - after values were cached: -1 once the cache is two ticks old (the
 *    documented delay), and from then on every time;
 *  - a filter that refuses only the process clock leaves the thread clock
 *    working.
 * Exits 77 (skipped) where seccomp filters are not available.
 */
#include "cpt.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

static int64_t tick;

/* Refuse times() and clock_gettime() of the CPU-time ids (process always,
 * thread if asked) with errno `e`. 0, or -1 if seccomp is unavailable. */
static int refuse(int e, int thread_too)
{
#ifdef NATIVE_ARCH
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_times, 4, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clock_gettime, 0, 4),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, CLOCK_PROCESS_CPUTIME_ID, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, thread_too ? CLOCK_THREAD_CPUTIME_ID : 0xffffffffu, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)e & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		return -1;
	return 0;
#else
	(void)e;
	(void)thread_too;
	return -1;
#endif
}

/* Both refused: th_ results equal the libc ones. */
static void expect_refused(int e, int thread_too, const char *when)
{
	clock_t kc = clock();
	CHECK(kc == (clock_t)-1, "%s: clock() = %ld under the filter", when, (long)kc);
	for (int i = 0; i < 20; i++) {
		clock_t c = th_clock();
		CHECK(c == (clock_t)-1, "%s: th_clock() = %ld where clock() = -1", when, (long)c);
	}
	struct timespec ts;
	errno = 0;
	int kr = clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	int ke = errno;
	errno = 0;
	int r = th_clock_gettime(TH_CLOCK_PROCESS_CPUTIME_COARSE, &ts);
	CHECK(kr == -1 && r == -1 && errno == ke && ke == e, "%s: process coarse %d errno %d, exact %d errno %d", when,
	      r, errno, kr, ke);
	errno = 0;
	r = th_clock_gettime(TH_CLOCK_THREAD_CPUTIME_COARSE, &ts);
	if (thread_too)
		CHECK(r == -1 && errno == e, "%s: thread coarse %d errno %d", when, r, errno);
	else
		CHECK(r == 0, "%s: thread coarse refused with only the process clock filtered", when);
	struct tms a, b;
	errno = 0;
	clock_t kt = times(&a);
	int kte = errno;
	errno = 0;
	clock_t tt = th_times(&b);
	CHECK(tt == kt && errno == kte, "%s: th_times() = %ld errno %d, times() = %ld errno %d", when, (long)tt, errno,
	      (long)kt, kte);
	CHECK(th_times(NULL) == times(NULL), "%s: th_times(NULL) differs from times(NULL)", when);
}

static int run_child(int warm, int e, int thread_too)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (warm) {
			/* Values cached in this process (the page is new here). */
			struct tms t;
			CHECK(th_clock() != (clock_t)-1 && th_times(&t) != (clock_t)-1, "warm-up");
		}
		int64_t m = th_ns(CLOCK_MONOTONIC);
		if (refuse(e, thread_too) != 0)
			_exit(77);
		if (warm)
			spin_until(m + 2 * tick + 2000);
		expect_refused(e, thread_too, warm ? "after caching" : "from the start");
		_exit(atomic_load(&cpt_failures) ? 1 : 0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

int main(void)
{
	tick = cpt_tick();
	/* Nothing used in this process yet: the first child starts cold. */
	int rc = run_child(0, EPERM, 1);
	if (rc == 77) {
		printf("cputime_refused: seccomp filters unavailable, skipped\n");
		return 77;
	}
	CHECK(rc == 0, "cold child, EPERM");
	struct tms t;
	CHECK(th_clock() != (clock_t)-1 && th_times(&t) != (clock_t)-1, "parent");
	CHECK(run_child(0, EINVAL, 0) == 0, "child, EINVAL, process clock only");
	CHECK(run_child(1, EPERM, 1) == 0, "warm child, EPERM");
	CHECK(run_child(1, EINVAL, 0) == 0, "warm child, EINVAL");
	/* And where the kernel answers, never -1. */
	for (int i = 0; i < 1000; i++)
		CHECK(th_clock() != (clock_t)-1, "th_clock() = -1 with a working clock");
	return cpt_done("cputime_refused");
}
