/*
 * Process-wide conditions that decide the mode at attach, each in a child
 * process of its own (attach happens once per process):
 *   prtsc    PR_SET_TSC forbids RDTSC: kernel mode with a reason, no SIGSEGV
 *            from any th_ function with any clock id
 *   disable  TIMEHANDS_DISABLE=1: every read is the kernel's
 *   badenv   bad variable values: a warning, then the defaults
 *   attach   the first read costs a handful of system calls (G8), counted
 *            with ptrace between two marker calls
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/times.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "timehands.h"

static const clockid_t ids[] = {CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME, CLOCK_TAI,
				CLOCK_REALTIME_COARSE, CLOCK_MONOTONIC_COARSE, TH_CLOCK_REALTIME_RELAXED,
				TH_CLOCK_MONOTONIC_RELAXED};

/* The kernel's reading by system call: under PR_SET_TSC the vDSO itself may
 * execute RDTSC(P) and die (clocksource tsc, kvm-clock with a stable TSC). */
static int kread(clockid_t id, struct timespec *ts)
{
	return (int)syscall(SYS_clock_gettime, id, ts);
}

static clockid_t base_id(clockid_t id)
{
	if (id == TH_CLOCK_REALTIME_RELAXED || id == CLOCK_REALTIME_COARSE)
		return CLOCK_REALTIME;
	if (id == TH_CLOCK_MONOTONIC_RELAXED || id == CLOCK_MONOTONIC_COARSE)
		return CLOCK_MONOTONIC;
	return id;
}

static void sandwich_all(int rounds)
{
	for (int r = 0; r < rounds; r++)
		for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
			struct timespec a, t, b;
			int coarse = ids[i] == CLOCK_REALTIME_COARSE || ids[i] == CLOCK_MONOTONIC_COARSE;
			/* A coarse reading is held to the kernel's coarse clock
			 * read before it (less 10 ms), not to its fine one: on a
			 * loaded guest the kernel's own tick can be more than
			 * 10 ms late. */
			kread(coarse ? ids[i] : base_id(ids[i]), &a);
			CHECK(th_clock_gettime(ids[i], &t) == 0, "id %d", (int)ids[i]);
			kread(base_id(ids[i]), &b);
			int64_t below = coarse ? 10000000 : 2000;
			CHECK(ts_to_ns(&t) >= ts_to_ns(&a) - below && ts_to_ns(&t) <= ts_to_ns(&b) + 2000,
			      "id %d: %lld not in [%lld, %lld]", (int)ids[i], (long long)ts_to_ns(&t),
			      (long long)ts_to_ns(&a), (long long)ts_to_ns(&b));
		}
}

/* Every th_ function with every clock id, each one's result checked. */
static void every_function(void)
{
	static const clockid_t more[] = {CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID,
					 TH_CLOCK_PROCESS_CPUTIME_COARSE, TH_CLOCK_THREAD_CPUTIME_COARSE,
					 CLOCK_BOOTTIME_ALARM, CLOCK_REALTIME_ALARM};
	struct timespec t, r;
	for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
		CHECK(th_clock_getres(ids[i], &r) == 0 && ts_to_ns(&r) > 0, "getres id %d", (int)ids[i]);
		CHECK(th_clock_getres(ids[i], NULL) == 0, "getres id %d NULL", (int)ids[i]);
	}
	for (size_t i = 0; i < sizeof more / sizeof *more; i++) {
		errno = 0;
		int rc = th_clock_gettime(more[i], &t);
		/* the alarm clocks exist on kernels with an RTC; where they do not,
		 * EINVAL is the kernel's own answer */
		CHECK(rc == 0 || errno == EINVAL, "id %d: rc %d errno %d", (int)more[i], rc, errno);
		if (rc == 0)
			CHECK(t.tv_nsec >= 0 && t.tv_nsec < 1000000000, "id %d: tv_nsec %ld", (int)more[i], t.tv_nsec);
		th_clock_getres(more[i], &r);
	}
	errno = 0;
	CHECK(th_clock_gettime((clockid_t)12345, &t) == -1 && errno == EINVAL, "unknown id: EINVAL");
	errno = 0;
	CHECK(th_clock_gettime((clockid_t)-1, &t) == -1 && errno == EINVAL, "id -1: EINVAL");
	errno = 0;
	CHECK(th_clock_getres((clockid_t)12345, &r) == -1 && errno == EINVAL, "getres unknown id: EINVAL");
	struct timeval tv;
	struct timespec a;
	kread(CLOCK_REALTIME, &a);
	CHECK(th_gettimeofday(&tv, NULL) == 0 && tv.tv_sec >= a.tv_sec, "gettimeofday");
	time_t s = 0;
	CHECK(th_time(&s) >= a.tv_sec && s >= a.tv_sec, "time");
	struct tms tm;
	CHECK(th_times(&tm) != (clock_t)-1, "times");
	CHECK(th_clock() != (clock_t)-1, "clock");
}

static int mode_prtsc(void)
{
	if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0) != 0) {
		printf("prtsc: PR_SET_TSC not supported here\n");
		return 77;
	}
	every_function(); /* a SIGSEGV ends the test */
	sandwich_all(20000);
	/* the header's inline reads (constant ids) read the counter only where
	 * the library says the process may */
	for (int i = 0; i < 1000; i++) {
		struct timespec a, t;
		kread(CLOCK_MONOTONIC, &a);
		CHECK(th_clock_gettime(CLOCK_MONOTONIC, &t) == 0 && ts_to_ns(&t) >= ts_to_ns(&a) - 2000,
		      "inline MONOTONIC");
		CHECK(th_clock_gettime(CLOCK_REALTIME, &t) == 0, "inline REALTIME");
		CHECK(th_clock_gettime(TH_CLOCK_MONOTONIC_RELAXED, &t) == 0, "inline MONOTONIC_RELAXED");
	}
	every_function();
	const struct th__fast *f = th__fast();
	CHECK(f->minor >= 3 && f->ctr_early && *f->ctr_early == 0, "the counter may be read first under PR_SET_TSC");
	struct th_status st;
	th_status(&st, sizeof st);
	CHECK(st.mode == TH_MODE_KERNEL, "mode %u", st.mode);
	CHECK(strstr(st.reason, "PR_SET_TSC") != NULL && strstr(st.reason, "system call") != NULL, "reason: %s",
	      st.reason);
	return check_done("prtsc");
}

static int mode_disable(void)
{
	sandwich_all(20000);
	struct th_status st;
	th_status(&st, sizeof st);
	CHECK(st.mode == TH_MODE_KERNEL, "mode %u", st.mode);
	CHECK(strstr(st.reason, "TIMEHANDS_DISABLE") != NULL, "reason: %s", st.reason);
	struct timespec t;
	CHECK(th_clock_gettime(CLOCK_MONOTONIC, &t) == 0, "inline MONOTONIC");
	const struct th__fast *f = th__fast();
	CHECK(f->minor >= 3 && f->ctr_early && *f->ctr_early == 0, "the counter may be read first when disabled");
	return check_done("disable");
}

static int mode_badenv(void)
{
	sandwich_all(20000);
	struct th_status st;
	th_status(&st, sizeof st);
	CHECK(strstr(st.reason, "TIMEHANDS_COUNTER=sideways") != NULL, "reason names the bad variable: %s", st.reason);
	return check_done("badenv");
}

/* Count the system calls the traced child makes between its two marker calls, around its very first timehands read. */
static int mode_attach(char *self)
{
	pid_t pid = fork();
	if (pid == 0) {
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		raise(SIGSTOP);
		syscall(SYS_sched_getscheduler, 0);
		struct timespec t;
		th_clock_gettime(CLOCK_MONOTONIC, &t);
		syscall(SYS_sched_getscheduler, 0);
		_exit(0);
	}
	(void)self;
	int status, in_window = 0, markers = 0, calls = 0, entry = 1;
	waitpid(pid, &status, 0);
	ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL);
	for (;;) {
		if (ptrace(PTRACE_SYSCALL, pid, 0, 0) != 0)
			break;
		if (waitpid(pid, &status, 0) < 0 || WIFEXITED(status) || WIFSIGNALED(status))
			break;
		if (!(WIFSTOPPED(status) && WSTOPSIG(status) == (SIGTRAP | 0x80)))
			continue;
		if (entry) {
			long nr;
#if defined(__x86_64__)
			struct user_regs_struct regs;
			ptrace(PTRACE_GETREGS, pid, 0, &regs);
			nr = (long)regs.orig_rax;
#else
			nr = -1;
#endif
			if (nr == SYS_sched_getscheduler) {
				markers++;
				in_window = markers == 1;
			} else if (in_window) {
				calls++;
			}
		}
		entry = !entry;
	}
	waitpid(pid, &status, 0);
#if defined(__x86_64__)
	CHECK(markers == 2, "markers %d", markers);
	/* clocksource and cpuinfo files, PR_GET_TSC, the vDSO probe's
	 * reference system calls, the fork-detection page, the shared page
	 * lookup: a bounded handful, no calibration loop */
	CHECK(calls > 0 && calls <= 30, "%d system calls for the first read", calls);
	printf("attach: the first read made %d system calls\n", calls);
#else
	printf("attach: syscall counting only on x86-64\n");
#endif
	return check_done("attach");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s prtsc|disable|badenv|attach\n", argv[0]);
		return 2;
	}
	if (!strcmp(argv[1], "prtsc"))
		return mode_prtsc();
	if (!strcmp(argv[1], "disable"))
		return mode_disable();
	if (!strcmp(argv[1], "badenv"))
		return mode_badenv();
	if (!strcmp(argv[1], "attach"))
		return mode_attach(argv[0]);
	return 2;
}
