/*
 * fork from a thread of a process that has used a lot of CPU: the child's CPU
 * times restart near zero, and so must everything timehands serves it. A
 * cache clamped to the parent's values (or a thread cache that kept the
 * forking thread's) would show the parent's hundreds of ms. Three ways:
 * fork(); a raw syscall(SYS_fork), which no pthread_atfork handler sees; and
 * fork() while the refresh locks are held by threads that do not exist in
 * the child. The child uses write(2) only (a raw fork leaves libc's locks as
 * the parent's other threads held them).
 */
#include "cpt.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "cputime/cputime.h"

static _Atomic int stop;

static void *burner(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		work(100000);
	return NULL;
}

/* The parent's values just before the fork. */
struct before {
	clock_t clk;
	int64_t proc, thr;
	long sum;
};

static int64_t tick;

static void child_checks(const struct before *b, int locks_held)
{
	/* First thing: the forking thread's cache was refreshed just before
	 * the fork, so its stamp is still fresh here. */
	int64_t t = th_ns(TH_CLOCK_THREAD_CPUTIME_COARSE), kt = k_cpu(CLOCK_THREAD_CPUTIME_ID);
	CHECK(t >= 0 && t <= kt && t < b->thr / 4, "child thread coarse %lld (exact %lld, forking thread %lld)",
	      (long long)t, (long long)kt, (long long)b->thr);
	if (locks_held)
		CHECK(atomic_load(th__cputime_lock_word(TH_CPU_PROC)) == 0 &&
			      atomic_load(th__cputime_lock_word(TH_CPU_TIMES)) == 0,
		      "child inherited a held refresh lock");
	clock_t c = th_clock();
	clock_t kc = clock();
	CHECK(c != (clock_t)-1 && c <= kc, "child th_clock %ld above its clock %ld", (long)c, (long)kc);
	CHECK(c < b->clk / 4, "child th_clock %ld not restarted (parent %ld)", (long)c, (long)b->clk);

	int64_t p = th_ns(TH_CLOCK_PROCESS_CPUTIME_COARSE), kp = k_cpu(CLOCK_PROCESS_CPUTIME_ID);
	CHECK(p >= 0 && p <= kp && p < b->proc / 4, "child process coarse %lld (exact %lld, parent %lld)",
	      (long long)p, (long long)kp, (long long)b->proc);

	struct tms tt, kk;
	long k1 = k_times(&kk);
	clock_t r = th_times(&tt);
	long k2 = k_times(&kk);
	CHECK(tt.tms_utime <= kk.tms_utime && tt.tms_stime <= kk.tms_stime &&
		      (long)(tt.tms_utime + tt.tms_stime) < b->sum / 4,
	      "child times %ld/%ld (kernel %ld/%ld, parent sum %ld)", (long)tt.tms_utime, (long)tt.tms_stime,
	      (long)kk.tms_utime, (long)kk.tms_stime, b->sum);
	CHECK(r >= k1 - 1 && r <= k2 + 1, "child elapsed %ld vs kernel [%ld, %ld]", (long)r, k1, k2);

	/* The child's caches then follow the child's own CPU time. */
	int64_t e0 = k_cpu(CLOCK_PROCESS_CPUTIME_ID), te0 = k_cpu(CLOCK_THREAD_CPUTIME_ID);
	spin_until(th_ns(CLOCK_MONOTONIC) + 2 * tick + 2000);
	int64_t p2 = th_ns(TH_CLOCK_PROCESS_CPUTIME_COARSE), t2 = th_ns(TH_CLOCK_THREAD_CPUTIME_COARSE);
	CHECK(p2 >= e0 && p2 >= p && p2 <= k_cpu(CLOCK_PROCESS_CPUTIME_ID), "child process coarse after work");
	CHECK(t2 >= te0 && t2 >= t && t2 <= k_cpu(CLOCK_THREAD_CPUTIME_ID), "child thread coarse after work");
}

/* fork without libc: no pthread_atfork handler runs. */
static pid_t raw_fork(void)
{
#ifdef SYS_fork
	return (pid_t)syscall(SYS_fork);
#else
	return (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
#endif
}

enum how { VIA_FORK, VIA_RAW, VIA_FORK_LOCKED };
static const char *hname[] = {"fork()", "syscall(SYS_fork)", "fork() with the refresh locks held"};

struct job {
	enum how how;
	int status;
};

static void *forker(void *arg)
{
	struct job *j = arg;
	/* This thread's own CPU time, for the thread cache to carry. */
	spin_cpu(100 * MS);
	struct before b;
	struct tms t;
	th_times(&t);
	b.sum = (long)(t.tms_utime + t.tms_stime);
	b.clk = th_clock();
	b.proc = th_ns(TH_CLOCK_PROCESS_CPUTIME_COARSE);
	b.thr = th_ns(TH_CLOCK_THREAD_CPUTIME_COARSE);
	CHECK(b.thr > 50 * MS && b.clk > CLK_MS(200) && b.sum > 20, "parent values too small: %lld %ld %ld",
	      (long long)b.thr, (long)b.clk, b.sum);
	_Atomic uint32_t *lp = th__cputime_lock_word(TH_CPU_PROC), *lt = th__cputime_lock_word(TH_CPU_TIMES);
	if (j->how == VIA_FORK_LOCKED) {
		atomic_store(lp, 1);
		atomic_store(lt, 1);
	}
	/* Fork right after this thread's cache refreshed (its value moved),
	 * so that an inherited stamp would still look fresh in the child. */
	int64_t v0 = th_ns(TH_CLOCK_THREAD_CPUTIME_COARSE);
	while (th_ns(TH_CLOCK_THREAD_CPUTIME_COARSE) == v0)
		;
	fflush(NULL); /* nothing buffered twice */
	pid_t pid = j->how == VIA_RAW ? raw_fork() : fork();
	if (pid == 0) {
		atomic_store(&cpt_failures, 0); /* the child's own count */
		child_checks(&b, j->how == VIA_FORK_LOCKED);
		_exit(atomic_load(&cpt_failures) ? 1 : 0);
	}
	if (j->how == VIA_FORK_LOCKED) {
		atomic_store(lp, 0);
		atomic_store(lt, 0);
	}
	CHECK(pid > 0, "fork failed: %d", errno);
	int st = 0;
	waitpid(pid, &st, 0);
	j->status = st;
	/* The parent's values carry on from where they were. */
	CHECK(th_clock() >= b.clk && th_ns(TH_CLOCK_THREAD_CPUTIME_COARSE) >= b.thr, "parent went back after fork");
	return NULL;
}

/* Whether this kernel wipes a MADV_WIPEONFORK page in a child: qemu-user
 * accepts the advice and ignores it; kernels before 4.14 refuse it. Either
 * way only fork() (through pthread_atfork) is covered, not a raw fork. */
static int wipe_works(void)
{
	long len = sysconf(_SC_PAGESIZE);
	volatile char *m = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 0;
	int ok = madvise((void *)m, (size_t)len, MADV_WIPEONFORK) == 0;
	m[0] = 1;
	if (ok) {
		pid_t pid = fork();
		if (pid == 0)
			_exit(m[0] == 0 ? 0 : 1);
		int st = 0;
		waitpid(pid, &st, 0);
		ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	}
	munmap((void *)m, (size_t)len);
	return ok;
}

int main(void)
{
	tick = cpt_tick();
	int wipe = wipe_works();
	if (!wipe)
		printf("MADV_WIPEONFORK is not honoured here: a raw fork is not covered, not tried\n");
	pthread_t bt[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&bt[i], NULL, burner, NULL);
	while (k_cpu(CLOCK_PROCESS_CPUTIME_ID) < 300 * MS)
		spin_ns(MS);
	for (int h = VIA_FORK; h <= VIA_FORK_LOCKED; h++) {
		if (h == VIA_RAW && !wipe)
			continue;
		struct job j = {(enum how)h, -1};
		pthread_t f;
		pthread_create(&f, NULL, forker, &j);
		pthread_join(f, NULL);
		CHECK(WIFEXITED(j.status) && WEXITSTATUS(j.status) == 0, "child after %s failed (status %#x)", hname[h],
		      j.status);
		if (WIFEXITED(j.status) && WEXITSTATUS(j.status) == 0)
			printf("child after %s from a thread: restarted\n", hname[h]);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(bt[i], NULL);
	return cpt_done("cputime_fork");
}
