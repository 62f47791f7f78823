/*
 * Helpers of the compatibility tests: raw-syscall reference clocks (immune to
 * any interposer and to the vDSO), checks that count failures, and the proof
 * that a symbol binds to the preload (dladdr, and the counting preload's
 * per-entry-point counters, see preload/count.h).
 *
 * The programs run with and without the preload; TH_COMPAT_PRELOAD=1 in the
 * environment (set by run.sh) says the preload is expected.
 */
#ifndef TH_COMPAT_H
#define TH_COMPAT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "count.h"

#define NS 1000000000LL
#define SLACK_NS 1000 /* the brief's "agrees with the kernel within 1 us" */

static int compat_failures __attribute__((unused));

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			if (compat_failures++ < 20) {                                      \
				fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
				fprintf(stderr, __VA_ARGS__);                              \
				fputc('\n', stderr);                                       \
			}                                                                  \
		}                                                                          \
	} while (0)

static inline int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * NS + t->tv_nsec;
}

/* The kernel's clock through the system call itself. */
static inline int64_t sys_ns(clockid_t id)
{
	struct timespec ts = {0, 0};
	syscall(SYS_clock_gettime, id, &ts);
	return ts_ns(&ts);
}

static inline int64_t sys_res_ns(clockid_t id)
{
	struct timespec ts = {0, 0};
	syscall(SYS_clock_getres, id, &ts);
	return ts_ns(&ts);
}

static inline int expect_preload(void)
{
	const char *v = getenv("TH_COMPAT_PRELOAD");
	return v && strcmp(v, "1") == 0;
}

/* Is the program expected to bind to the preload directly? Not when another
 * interposer placed before it (ASan) wraps the clock functions and forwards
 * to it: TH_COMPAT_WRAPPED=1. */
static inline int expect_bound(void)
{
	const char *v = getenv("TH_COMPAT_WRAPPED");
	return expect_preload() && !(v && strcmp(v, "1") == 0);
}

/* Does the address lie in the preload (either build of it)? */
static inline int in_preload(void *fn)
{
	Dl_info di;
	return fn && dladdr(fn, &di) && di.dli_fname && strstr(di.dli_fname, "libtimehands-preload");
}

/* The counting preload's counters, or NULL under the production one. */
static inline _Atomic unsigned long *preload_counters(void)
{
	return (_Atomic unsigned long *)dlsym(RTLD_DEFAULT, "th_preload_calls");
}

static inline int preload_ctor_ran(void)
{
	_Atomic int *p = (_Atomic int *)dlsym(RTLD_DEFAULT, "th_preload_ctor_ran");
	return p ? *p : -1;
}

/* Is a library whose path contains `name` mapped into this process? */
static inline int mapped(const char *name)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096];
	int found = 0;
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof line, f))
		found = strstr(line, name) != NULL;
	fclose(f);
	return found;
}

#endif
