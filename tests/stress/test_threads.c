/*
 * Multi-threaded properties on the real machine:
 *  - G2 across threads, streaming shape: one thread publishes each reading
 *    with a release store, the other acquires the latest and reads its own
 *    clock right after (catches unordered counter reads where turn-taking
 *    shapes see nothing);
 *  - G3/G4 across threads: time() and coarse clocks against fine readings
 *    published by another thread;
 *  - G6: reads from a signal handler that interrupted a windup in the same
 *    thread;
 *  - G9: fork() and a raw SYS_fork from a thread while others read.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "timehands.h"

#define MS 1000000LL

/* Negative: the library call; positive: the header's inline path for the
 * fine clocks that have one (a constant id at the call). */
static int inline_reads;

static int64_t read_clock(clockid_t id)
{
	struct timespec t;
	if (id == (clockid_t)-1000) /* time() in ns */
		return (int64_t)th_time(NULL) * 1000000000LL;
	if (inline_reads) {
		switch (id) {
		case CLOCK_MONOTONIC: th_clock_gettime(CLOCK_MONOTONIC, &t); return ts_to_ns(&t);
		case CLOCK_REALTIME: th_clock_gettime(CLOCK_REALTIME, &t); return ts_to_ns(&t);
		case CLOCK_MONOTONIC_RAW: th_clock_gettime(CLOCK_MONOTONIC_RAW, &t); return ts_to_ns(&t);
		case CLOCK_BOOTTIME: th_clock_gettime(CLOCK_BOOTTIME, &t); return ts_to_ns(&t);
		case CLOCK_TAI: th_clock_gettime(CLOCK_TAI, &t); return ts_to_ns(&t);
		default: break;
		}
	}
	(th_clock_gettime)(id, &t);
	return ts_to_ns(&t);
}

/* ------------------------------------------------------------ streaming */

struct stream {
	clockid_t pub_id, read_id;
	_Atomic int64_t latest;
	_Atomic int stop;
	long checks, back;
	int64_t worst;
};

static void *publisher(void *arg)
{
	struct stream *s = arg;
	while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
		int64_t v = read_clock(s->pub_id);
		/* Release: this reading happens-before the consumer's read
		 * that acquires it. */
		atomic_store_explicit(&s->latest, v, memory_order_release);
	}
	return NULL;
}

static void run_stream(const char *name, clockid_t pub_id, clockid_t read_id, int64_t ms)
{
	struct stream s;
	memset(&s, 0, sizeof s);
	s.pub_id = pub_id;
	s.read_id = read_id;
	atomic_store(&s.latest, INT64_MIN);
	pthread_t t;
	pthread_create(&t, NULL, publisher, &s);
	int64_t end = raw_now_ns() + ms * MS;
	while (raw_now_ns() < end) {
		for (int i = 0; i < 1000; i++) {
			/* Acquire pairs with the publisher's release store. */
			int64_t seen = atomic_load_explicit(&s.latest, memory_order_acquire);
			int64_t mine = read_clock(read_id);
			s.checks++;
			if (seen != INT64_MIN && mine < seen) {
				s.back++;
				if (seen - mine > s.worst)
					s.worst = seen - mine;
			}
		}
	}
	atomic_store(&s.stop, 1);
	pthread_join(t, NULL);
	CHECK(s.back == 0, "%s: %ld of %ld reads behind the other thread's (worst %lld ns)", name, s.back, s.checks,
	      (long long)s.worst);
	printf("  %-44s %9ld checks, %ld backward\n", name, s.checks, s.back);
}

/* ------------------------------------------------------------ signal in a windup */

extern void (*th__test_windup_hook)(void);
extern int th__test_no_wipe;
static volatile sig_atomic_t in_handler;
static volatile int64_t last_main, handler_max;
static volatile long hook_calls, handler_reads, handler_bad;

static void on_signal(int sig)
{
	(void)sig;
	in_handler = 1;
	int64_t h = read_clock(CLOCK_MONOTONIC);
	int64_t r = read_clock(CLOCK_REALTIME);
	(void)r;
	if (h < last_main)
		handler_bad++;
	if (h > handler_max)
		handler_max = h;
	handler_reads++;
	in_handler = 0;
}

static void windup_hook(void)
{
	/* Runs inside a windup holding the lock: interrupt it with a signal
	 * whose handler reads the clocks in the same thread. */
	if (!in_handler) {
		hook_calls++;
		raise(SIGUSR1);
	}
}

static void test_signal_in_windup(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, NULL);
	th__test_windup_hook = windup_hook;
	int64_t end = raw_now_ns() + 600 * MS;
	long bad = 0, reads = 0;
	while (raw_now_ns() < end) {
		int64_t hm = handler_max;
		int64_t v = read_clock(CLOCK_MONOTONIC);
		reads++;
		if (v < hm || v < last_main)
			bad++;
		last_main = v;
	}
	th__test_windup_hook = NULL;
	CHECK(hook_calls > 10, "only %ld windups interrupted", hook_calls);
	CHECK(handler_reads == hook_calls, "handler ran %ld times for %ld signals", handler_reads, hook_calls);
	CHECK(handler_bad == 0 && bad == 0, "backward around a handler: in handler %ld, after %ld", handler_bad, bad);
	printf("  %ld windups interrupted by a signal whose handler read the clocks, %ld reads\n", hook_calls, reads);
}

/* ------------------------------------------------------------ fork */

static _Atomic int fork_stop;
static _Atomic int64_t fork_last;

static void *fork_reader(void *arg)
{
	(void)arg;
	while (!atomic_load(&fork_stop)) {
		int64_t v = read_clock(CLOCK_MONOTONIC);
		read_clock(CLOCK_REALTIME_COARSE);
		int64_t l = atomic_load_explicit(&fork_last, memory_order_relaxed);
		while (v > l && !atomic_compare_exchange_weak(&fork_last, &l, v))
			;
	}
	return NULL;
}

/* The child: only async-signal-safe calls (a raw fork may leave other
 * threads' locks held). Exit codes tell the parent what failed. */
static int child_checks(int64_t parent_last, int need_windup)
{
	int64_t first = read_clock(CLOCK_MONOTONIC);
	if (first < parent_last)
		return 10;
	struct th_status st;
	th_status(&st, sizeof st);
	uint64_t w0 = st.windups;
	int64_t last = first;
	/* At least 40 ms of reads, and on until the child has wound up once
	 * (a line is due within a tick; a loaded machine or an emulator may
	 * not run the child for a tick's worth of wall time in 40 ms). A
	 * windup lock inherited held never lets it: 3 s is the verdict. */
	int64_t start = raw_now_ns(), end = start + 40 * MS;
	for (;;) {
		int64_t now = raw_now_ns();
		if (now >= end) {
			if (!need_windup)
				break;
			th_status(&st, sizeof st);
			if (st.windups > w0 || now >= start + 3000 * MS)
				break;
		}
		int64_t v = read_clock(CLOCK_MONOTONIC);
		if (v < last)
			return 11;
		last = v;
		struct timespec a, t, b;
		clock_gettime(CLOCK_REALTIME, &a);
		th_clock_gettime(CLOCK_REALTIME, &t);
		clock_gettime(CLOCK_REALTIME, &b);
		if (ts_to_ns(&t) < ts_to_ns(&a) - 2000 || ts_to_ns(&t) > ts_to_ns(&b) + 2000)
			return 12;
	}
	if (!need_windup)
		return 0;
	th_status(&st, sizeof st);
	if (st.windups <= w0)
		return 13; /* the inherited windup lock was not reset */
	return 0;
}

/*
 * A raw SYS_fork runs no pthread_atfork handler: the child starts afresh
 * only because the process state lives on a MADV_WIPEONFORK page. Where
 * the advice is missing (Linux before 4.14) or accepted and ignored
 * (qemu-user), a child forked while another thread held the windup lock
 * keeps that lock held, and reads the kernel's clocks for ever: correct,
 * but never faster (no system call can tell it whose the lock is: the
 * programs that lock themselves down with seccomp allow only clock calls).
 * Such children must read correctly; they must wind up only where the
 * advice works. Whether it works here, asked of the kernel directly.
 */
static int wipe_works = -1;

static int wipe_honoured(void)
{
	if (wipe_works >= 0)
		return wipe_works;
	wipe_works = 0;
	volatile int *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 0;
	if (madvise((void *)m, 4096, MADV_WIPEONFORK) == 0) {
		*m = 7;
		pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
		if (pid == 0)
			_exit(*m == 0 ? 0 : 1);
		int status = 0;
		waitpid(pid, &status, 0);
		wipe_works = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	}
	munmap((void *)m, 4096);
	return wipe_works;
}

/* fork without glibc's wrapper (no pthread_atfork handlers run) */
static pid_t raw_fork(void)
{
#ifdef SYS_fork
	return (pid_t)syscall(SYS_fork);
#else
	return (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
#endif
}

static void test_fork(int raw)
{
	atomic_store(&fork_stop, 0);
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, fork_reader, NULL);
	/* A raw fork's child may inherit the windup lock held (see above). */
	int need_windup = !raw || (wipe_honoured() && !th__test_no_wipe);
	int forks = 0, failed = 0;
	int64_t end = raw_now_ns() + 800 * MS;
	while (raw_now_ns() < end && forks < 24) {
		usleep(20000);
		int64_t before = atomic_load(&fork_last);
		pid_t pid = raw ? raw_fork() : fork();
		if (pid == 0) {
			alarm(10); /* a hang is a failure */
			_exit(child_checks(before, need_windup));
		}
		int status = 0;
		waitpid(pid, &status, 0);
		forks++;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			failed++;
			fprintf(stderr, "  %s child: %s %d\n", raw ? "SYS_fork" : "fork",
				WIFEXITED(status) ? "exit" : "signal",
				WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		}
	}
	atomic_store(&fork_stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK(failed == 0, "%d of %d %s children failed", failed, forks, raw ? "SYS_fork" : "fork");
	printf("  %d children of %s from a thread while others read: ok%s\n", forks, raw ? "raw SYS_fork" : "fork()",
	       need_windup ? "" : " (no wipe-on-fork here: not required to wind up)");
}

/* Fork while another thread holds the windup lock (stopped in the middle of
 * a windup): the child has no such thread, so the lock must be reset there. */
static _Atomic int holding, forked_flag;

static void hold_hook(void)
{
	atomic_store(&holding, 1);
	int64_t end = raw_now_ns() + 2000 * MS;
	while (!atomic_load(&forked_flag) && raw_now_ns() < end)
		;
}

static void *lock_holder(void *arg)
{
	(void)arg;
	int64_t end = raw_now_ns() + 3000 * MS;
	while (!atomic_load(&forked_flag) && raw_now_ns() < end)
		read_clock(CLOCK_MONOTONIC); /* some read winds up and parks in the hook */
	return NULL;
}

static void test_fork_lock_held(int raw)
{
	atomic_store(&holding, 0);
	atomic_store(&forked_flag, 0);
	th__test_windup_hook = hold_hook;
	pthread_t t;
	pthread_create(&t, NULL, lock_holder, NULL);
	int64_t end = raw_now_ns() + 2000 * MS;
	while (!atomic_load(&holding) && raw_now_ns() < end)
		;
	CHECK(atomic_load(&holding), "no windup seen");
	int64_t before = read_clock(CLOCK_MONOTONIC);
	int need_windup = !raw || (wipe_honoured() && !th__test_no_wipe);
	pid_t pid = raw ? raw_fork() : fork();
	if (pid == 0) {
		th__test_windup_hook = NULL;
		alarm(10);
		_exit(child_checks(before, need_windup));
	}
	atomic_store(&forked_flag, 1);
	int status = 0;
	waitpid(pid, &status, 0);
	pthread_join(t, NULL);
	th__test_windup_hook = NULL;
	int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	const char *how = raw ? "raw SYS_fork" : "fork()";
	CHECK(ok, "child of a %s with the windup lock held: %s %d", how, WIFEXITED(status) ? "exit" : "signal",
	      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	printf("  %s while another thread held the windup lock: child %s\n", how,
	       !ok ? "FAILED" : need_windup ? "winds up: ok" : "reads the kernel's clocks (no wipe-on-fork): ok");
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--no-wipe") == 0) {
		/* Forks only, with the process state on a page that fork does
		 * not wipe (Linux before 4.14; qemu-user ignores the advice):
		 * the child of a raw fork must find its windup lock orphaned. */
		th__test_no_wipe = 1;
		read_clock(CLOCK_MONOTONIC);
		test_fork(0);
		test_fork_lock_held(0);
#if !defined(__SANITIZE_THREAD__)
		test_fork(1);
		test_fork_lock_held(1);
#endif
		return check_done("test_threads --no-wipe");
	}
	const int64_t ms = 400;
	struct {
		const char *name;
		clockid_t pub, rd;
	} s[] = {
		{"MONOTONIC -> MONOTONIC", CLOCK_MONOTONIC, CLOCK_MONOTONIC},
		{"MONOTONIC_RAW -> MONOTONIC_RAW", CLOCK_MONOTONIC_RAW, CLOCK_MONOTONIC_RAW},
		{"BOOTTIME -> BOOTTIME", CLOCK_BOOTTIME, CLOCK_BOOTTIME},
		{"REALTIME -> REALTIME", CLOCK_REALTIME, CLOCK_REALTIME},
		{"TAI -> TAI", CLOCK_TAI, CLOCK_TAI},
		{"MONOTONIC_COARSE -> MONOTONIC_COARSE", CLOCK_MONOTONIC_COARSE, CLOCK_MONOTONIC_COARSE},
		{"REALTIME_COARSE -> REALTIME_COARSE", CLOCK_REALTIME_COARSE, CLOCK_REALTIME_COARSE},
		{"MONOTONIC_COARSE -> MONOTONIC (G4)", CLOCK_MONOTONIC_COARSE, CLOCK_MONOTONIC},
		{"REALTIME_COARSE -> REALTIME (G4)", CLOCK_REALTIME_COARSE, CLOCK_REALTIME},
		{"time() -> REALTIME (G4)", (clockid_t)-1000, CLOCK_REALTIME},
	};
	for (size_t i = 0; i < sizeof s / sizeof *s; i++)
		run_stream(s[i].name, s[i].pub, s[i].rd, ms);
#ifdef TH__FINE_INLINE
	/* The same with the header's inline reads: one side inline, the other
	 * the library, then both inline. */
	{
		static const struct {
			const char *name;
			clockid_t id;
		} fine[] = {{"inline MONOTONIC -> MONOTONIC", CLOCK_MONOTONIC},
			    {"inline REALTIME -> REALTIME", CLOCK_REALTIME},
			    {"inline MONOTONIC_RAW -> MONOTONIC_RAW", CLOCK_MONOTONIC_RAW},
			    {"inline BOOTTIME -> BOOTTIME", CLOCK_BOOTTIME},
			    {"inline TAI -> TAI", CLOCK_TAI}};
		inline_reads = 1;
		for (size_t i = 0; i < sizeof fine / sizeof *fine; i++)
			run_stream(fine[i].name, fine[i].id, fine[i].id, ms / 2);
		run_stream("inline MONOTONIC_COARSE -> MONOTONIC (G4)", CLOCK_MONOTONIC_COARSE, CLOCK_MONOTONIC, ms / 2);
		run_stream("inline REALTIME_COARSE -> REALTIME (G4)", CLOCK_REALTIME_COARSE, CLOCK_REALTIME, ms / 2);
		run_stream("time() -> inline REALTIME (G4)", (clockid_t)-1000, CLOCK_REALTIME, ms / 2);
		inline_reads = 0;
	}
#endif

	/* G3 across threads: seconds only (time() has no more) */
	{
		struct stream g;
		memset(&g, 0, sizeof g);
		g.pub_id = CLOCK_REALTIME;
		atomic_store(&g.latest, INT64_MIN);
		pthread_t t;
		pthread_create(&t, NULL, publisher, &g);
		long back = 0, checks = 0;
		time_t first = th_time(NULL);
		int64_t end = raw_now_ns() + 2200 * MS;
		while (raw_now_ns() < end) {
			int64_t seen = atomic_load_explicit(&g.latest, memory_order_acquire);
			time_t t1 = th_time(NULL);
			struct timespec c;
			th_clock_gettime(CLOCK_REALTIME_COARSE, &c);
			checks++;
			if (seen != INT64_MIN && (t1 < seen / 1000000000LL || c.tv_sec < seen / 1000000000LL))
				back++;
		}
		atomic_store(&g.stop, 1);
		pthread_join(t, NULL);
		CHECK(th_time(NULL) - first >= 2, "G3 test crossed fewer than 2 seconds");
		CHECK(back == 0, "G3 across threads: %ld of %ld coarse seconds behind another thread's fine second", back,
		      checks);
		printf("  %-44s %9ld checks, %ld behind\n", "REALTIME seconds -> time(), REALTIME_COARSE", checks, back);
	}

	test_signal_in_windup();
	test_fork(0);
#if defined(__SANITIZE_THREAD__)
	/* ThreadSanitizer's runtime needs its fork() interceptor: a child of a
	 * raw SYS_fork inherits its locks held by other threads and may hang or
	 * abort in the runtime. The other builds run this part. */
	printf("  raw SYS_fork: not under ThreadSanitizer\n");
#else
	test_fork(1);
	test_fork_lock_held(1);
#endif
	test_fork_lock_held(0);
	return check_done("test_threads");
}
