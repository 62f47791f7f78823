/*
 * Process CPU time. These are the kernel's values, read with one system call
 * each; the coarse extension ids are translated to their base ids and never
 * handed to the kernel.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cputime.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kclock.h"
#include "timehands.h"

clock_t th__times(struct tms *buf)
{
	return (clock_t)syscall(SYS_times, buf);
}

clock_t th__clock(void)
{
	struct timespec ts;
	if (th_sys_clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
		return (clock_t)-1;
	return (clock_t)(ts.tv_sec * CLOCKS_PER_SEC + ts.tv_nsec / (1000000000 / CLOCKS_PER_SEC));
}

static clockid_t base_id(clockid_t id)
{
	return id == TH_CLOCK_THREAD_CPUTIME_COARSE ? CLOCK_THREAD_CPUTIME_ID : CLOCK_PROCESS_CPUTIME_ID;
}

int th__cputime_coarse(clockid_t id, struct timespec *ts)
{
	return th_sys_clock_gettime(base_id(id), ts);
}

int th__cputime_getres(clockid_t id, struct timespec *res)
{
	return (int)syscall(SYS_clock_getres, base_id(id), res);
}
