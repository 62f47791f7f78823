/*
 * fork() from several threads while other threads keep reading (and winding
 * up) the clocks; every other fork is a raw system call that bypasses
 * pthread_atfork. A child may inherit the windup lock held by a thread that
 * does not exist in it: it must neither hang nor return a wrong value. Each
 * child reads every clock against a raw-syscall sandwich, checks that
 * MONOTONIC is not below what its parent thread read just before the fork,
 * that time() is coherent with gettimeofday(), forks a grandchild that does
 * the same, and reports through its exit status only (no stdio: another
 * thread may have held its lock at the fork).
 */
#include "compat.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/time.h>
#include <sys/wait.h>

#define FORKERS 3
#define FORKS 16
#define READERS 2

static _Atomic int stop;
static _Atomic int reader_failures;

static pid_t raw_fork(void)
{
#ifdef SYS_fork
	return (pid_t)syscall(SYS_fork);
#else
	return (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
#endif
}

/* Returns the number of failed checks; touches nothing but the clocks. */
static int child_checks(int64_t parent_mono, int depth)
{
	int bad = 0;
	int64_t last = parent_mono;
	for (int i = 0; i < 200; i++) {
		struct timespec ts;
		int64_t k1 = sys_ns(CLOCK_MONOTONIC);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		int64_t k2 = sys_ns(CLOCK_MONOTONIC);
		int64_t v = ts_ns(&ts);
		bad += v < last;
		bad += v < k1 - SLACK_NS || v > k2 + SLACK_NS;
		last = v;
		k1 = sys_ns(CLOCK_REALTIME);
		clock_gettime(CLOCK_REALTIME, &ts);
		k2 = sys_ns(CLOCK_REALTIME);
		bad += ts_ns(&ts) < k1 - SLACK_NS || ts_ns(&ts) > k2 + SLACK_NS;
		struct timeval tv;
		gettimeofday(&tv, NULL);
		bad += time(NULL) < tv.tv_sec;
		clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
		bad += ts_ns(&ts) > sys_ns(CLOCK_MONOTONIC) + SLACK_NS;
	}
	if (depth == 0) {
		pid_t pid = raw_fork();
		if (pid == 0)
			_exit(child_checks(last, 1) ? 1 : 0);
		int st = 0;
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad++;
	}
	return bad;
}

static void *reader(void *arg)
{
	(void)arg;
	int64_t last = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		if (ts_ns(&ts) < last)
			atomic_fetch_add(&reader_failures, 1);
		last = ts_ns(&ts);
		clock_gettime(CLOCK_REALTIME_COARSE, &ts);
		time(NULL);
	}
	return NULL;
}

struct forker_result {
	int forks, failed;
};

static void *forker(void *arg)
{
	struct forker_result *res = arg;
	for (int i = 0; i < FORKS; i++) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		int64_t before = ts_ns(&ts);
		pid_t pid = (i & 1) ? raw_fork() : fork();
		if (pid == 0)
			_exit(child_checks(before, 0) ? 1 : 0);
		int st = 0;
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			res->failed++;
		res->forks++;
	}
	return NULL;
}

int main(void)
{
	pthread_t r[READERS], f[FORKERS];
	struct forker_result res[FORKERS];
	memset(res, 0, sizeof res);
	for (int i = 0; i < READERS; i++)
		pthread_create(&r[i], NULL, reader, NULL);
	for (int i = 0; i < FORKERS; i++)
		pthread_create(&f[i], NULL, forker, &res[i]);
	for (int i = 0; i < FORKERS; i++)
		pthread_join(f[i], NULL);
	atomic_store(&stop, 1);
	for (int i = 0; i < READERS; i++)
		pthread_join(r[i], NULL);
	int forks = 0;
	for (int i = 0; i < FORKERS; i++) {
		forks += res[i].forks;
		CHECK(res[i].failed == 0, "forker %d: %d of %d children failed", i, res[i].failed, res[i].forks);
	}
	CHECK(atomic_load(&reader_failures) == 0, "readers saw MONOTONIC go back %d times",
	      atomic_load(&reader_failures));
	if (compat_failures)
		return 1;
	printf("compat_fork: ok (%d forks from %d threads, half of them raw)\n", forks, FORKERS);
	return 0;
}
