/*
 * A signal storm: an interval timer and a thread sending signals to both
 * reading threads as fast as it can, so that handlers interrupt reads and
 * windups at every point. The handler reads every clock; in one thread, a
 * read in the handler is never below the read the interrupted code made
 * before it, nor the code's next read below the handler's; time() stays
 * coherent with gettimeofday(); errno survives.
 */
#include "compat.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/time.h>

#define SECONDS_NS 400000000LL

static _Atomic int stop;
static _Atomic unsigned long handled, failures;
/* Per thread, shared with that thread's signal handler only: relaxed
 * atomics plus signal fences order them against the interrupted code. */
static _Thread_local _Atomic int64_t code_last, handler_last;

static void note_fail(void)
{
	atomic_fetch_add_explicit(&failures, 1, memory_order_relaxed);
}

static void handler(int sig)
{
	(void)sig;
	int saved = errno;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t v = ts_ns(&ts);
	atomic_signal_fence(memory_order_acquire);
	if (v < atomic_load_explicit(&code_last, memory_order_relaxed))
		note_fail();
	if (v > atomic_load_explicit(&handler_last, memory_order_relaxed))
		atomic_store_explicit(&handler_last, v, memory_order_relaxed);
	atomic_signal_fence(memory_order_release);
	struct timeval tv;
	gettimeofday(&tv, NULL);
	if (time(NULL) < tv.tv_sec)
		note_fail();
	clock_gettime(CLOCK_REALTIME, &ts);
	/* G4: a coarse reading never exceeds a later fine one */
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	int64_t c = ts_ns(&ts);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (c > ts_ns(&ts))
		note_fail();
	clock_gettime(CLOCK_BOOTTIME, &ts);
	atomic_fetch_add_explicit(&handled, 1, memory_order_relaxed);
	errno = saved;
}

static void read_loop(void)
{
	int64_t deadline = sys_ns(CLOCK_MONOTONIC) + SECONDS_NS;
	unsigned long n = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		struct timespec ts;
		/* Only handlers that finished before this read began bound it
		 * from below: one that interrupts the read itself may see a
		 * later time than the read returns. */
		int64_t h = atomic_load_explicit(&handler_last, memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst);
		errno = 1234;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		if (errno != 1234)
			note_fail();
		int64_t v = ts_ns(&ts);
		atomic_signal_fence(memory_order_acquire);
		if (v < h || v < atomic_load_explicit(&code_last, memory_order_relaxed))
			note_fail();
		atomic_store_explicit(&code_last, v, memory_order_relaxed);
		atomic_signal_fence(memory_order_release);
		clock_gettime(CLOCK_REALTIME, &ts);
		struct timeval tv;
		gettimeofday(&tv, NULL);
		if (time(NULL) < tv.tv_sec)
			note_fail();
		if ((++n & 1023) == 0 && sys_ns(CLOCK_MONOTONIC) > deadline)
			atomic_store(&stop, 1);
	}
}

static void *reader(void *arg)
{
	(void)arg;
	read_loop();
	return NULL;
}

struct targets {
	pthread_t t[2];
};

static void *sender(void *arg)
{
	struct targets *tg = arg;
	unsigned i = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		pthread_kill(tg->t[i++ & 1], SIGUSR1);
		if ((i & 63) == 0)
			sched_yield();
	}
	return NULL;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGALRM, &sa, NULL);

	struct itimerval it = {{0, 200}, {0, 200}};
	setitimer(ITIMER_REAL, &it, NULL);

	struct targets tg;
	tg.t[0] = pthread_self();
	pthread_create(&tg.t[1], NULL, reader, NULL);
	pthread_t s;
	pthread_create(&s, NULL, sender, &tg);
	read_loop();
	pthread_join(tg.t[1], NULL);
	pthread_join(s, NULL);
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);

	unsigned long h = atomic_load(&handled), f = atomic_load(&failures);
	CHECK(f == 0, "%lu failed checks in %lu handled signals", f, h);
	CHECK(h >= 200, "only %lu signals handled", h);
	if (compat_failures)
		return 1;
	printf("compat_signals: ok (%lu signals handled)\n", h);
	return 0;
}
