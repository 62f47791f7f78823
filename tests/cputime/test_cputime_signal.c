/*
 * Signal handlers read the CPU-time clocks while the thread they interrupted
 * is in the middle of a read or a refresh of the same caches (G6). A timer
 * interrupts the single thread tens of thousands of times a second; both the
 * handler and the interrupted loop check every value against the largest
 * value any read completed before theirs began, and raise that floor after.
 * (A read that a handler interrupts may return a smaller value than the
 * handler did: the kernel's own system calls behave so, a signal being
 * delivered after the value is taken. Reads that begin after a handler
 * returned must not.)
 */
#include "cpt.h"

#include <signal.h>

enum { C_PROC, C_THREAD, C_CLOCK, C_UTIME, C_STIME, C_N };
static const char *cname[C_N] = {"process coarse", "thread coarse", "th_clock", "utime", "stime"};

static _Atomic int64_t floor_v[C_N];
static _Atomic long handled, handler_bad, loop_bad;

static void raise_floor(int i, int64_t v)
{
	int64_t f = atomic_load(&floor_v[i]);
	while (f < v && !atomic_compare_exchange_weak(&floor_v[i], &f, v))
		;
}

/* One read of every clock, checked against the floors taken before it. */
static int read_all(void)
{
	int64_t before[C_N], v[C_N];
	for (int i = 0; i < C_N; i++)
		before[i] = atomic_load(&floor_v[i]);
	struct tms t;
	v[C_PROC] = th_ns(TH_CLOCK_PROCESS_CPUTIME_COARSE);
	v[C_THREAD] = th_ns(TH_CLOCK_THREAD_CPUTIME_COARSE);
	v[C_CLOCK] = (int64_t)th_clock();
	th_times(&t);
	v[C_UTIME] = (int64_t)t.tms_utime;
	v[C_STIME] = (int64_t)t.tms_stime;
	int bad = 0;
	for (int i = 0; i < C_N; i++) {
		if (v[i] < before[i] || v[i] < 0)
			bad = i + 1;
		raise_floor(i, v[i]);
	}
	return bad;
}

static void on_timer(int sig)
{
	(void)sig;
	int e = errno;
	if (read_all())
		atomic_fetch_add(&handler_bad, 1);
	atomic_fetch_add(&handled, 1);
	errno = e;
}

int main(void)
{
	/* Warm up outside any handler: attach, create the page. */
	read_all();
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_timer;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	timer_t tm;
	struct sigevent ev;
	memset(&ev, 0, sizeof ev);
	ev.sigev_notify = SIGEV_SIGNAL;
	ev.sigev_signo = SIGALRM;
	if (timer_create(CLOCK_MONOTONIC, &ev, &tm) != 0) {
		printf("cputime_signal: no POSIX timers, skipped\n");
		return 77;
	}
	struct itimerspec it = {{0, 23000}, {0, 23000}};
	timer_settime(tm, 0, &it, NULL);

	/* 2 s, or longer on a busy machine until 20000 signals came (at most
	 * 20 s): how often the timer gets this thread is the scheduler's. */
	int64_t t0 = raw_ns();
	long reads = 0;
	int last_bad = 0;
	for (;;) {
		if (!(reads & 63)) {
			int64_t el = raw_ns() - t0;
			if (el > 20 * NS || (el > 2 * NS && atomic_load(&handled) >= 20000))
				break;
		}
		int b = read_all();
		if (b) {
			atomic_fetch_add(&loop_bad, 1);
			last_bad = b;
		}
		reads++;
	}
	struct itimerspec off = {{0, 0}, {0, 0}};
	timer_settime(tm, 0, &off, NULL);
	timer_delete(tm);
	CHECK(atomic_load(&loop_bad) == 0, "%ld loop reads below a completed read (last: %s)", atomic_load(&loop_bad),
	      last_bad ? cname[last_bad - 1] : "-");
	CHECK(atomic_load(&handler_bad) == 0, "%ld handler reads below a completed read", atomic_load(&handler_bad));
	CHECK(atomic_load(&handled) > 100, "only %ld signals handled", atomic_load(&handled));
	printf("cputime_signal: %ld reads, %ld in signal handlers\n", reads, atomic_load(&handled));
	return cpt_done("cputime_signal");
}
