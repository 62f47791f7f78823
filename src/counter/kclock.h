/*
 * The kernel's clocks, read without going through libc: the vDSO entry points
 * found from the auxiliary vector, else raw system calls. Never dlsym, never
 * allocation, safe before any constructor and from a signal handler, and
 * immune to an LD_PRELOAD that interposes libc's clock functions.
 */
#ifndef TH_COUNTER_KCLOCK_H
#define TH_COUNTER_KCLOCK_H

#include <time.h>
#include <sys/time.h>

typedef int (*th_vdso_clock_gettime_fn)(clockid_t, struct timespec *);
typedef int (*th_vdso_gettimeofday_fn)(struct timeval *, void *);
typedef time_t (*th_vdso_time_fn)(time_t *);
typedef int (*th_vdso_clock_getres_fn)(clockid_t, struct timespec *);

struct th_vdso {
	th_vdso_clock_gettime_fn clock_gettime;
	th_vdso_gettimeofday_fn gettimeofday;
	th_vdso_time_fn time;
	th_vdso_clock_getres_fn clock_getres;
};

/* Filled by th_kclock_init(); all NULL where there is no vDSO. Threads may
 * read an entry while another thread's first attach fills it in: every access
 * is a relaxed atomic one (TH_VDSO). Relaxed is enough: an entry points into
 * the vDSO, mapped before the process ran, and publishes nothing else; a
 * reader that sees NULL uses the system call. */
extern struct th_vdso th_vdso;
#define TH_VDSO(f) __atomic_load_n(&th_vdso.f, __ATOMIC_RELAXED)

void th_kclock_init(void);

/* 1 where this process may not read the counter (x86: PR_SET_TSC set to
 * SIGSEGV), asked of the kernel now. */
int th_kclock_counter_forbidden(void);
/* 1 where th_kclock_init found the counter forbidden: the functions below
 * then read every clock the vDSO would compute from the counter by system
 * call (time() and the coarse clocks still come from the vDSO). */
int th_kclock_fine_by_syscall(void);

/* The kernel's clock_gettime, exact result; sets errno like libc on error. */
int th_kclock_gettime(clockid_t id, struct timespec *ts);
int th_kclock_getres(clockid_t id, struct timespec *ts);
int th_kgettimeofday(struct timeval *tv, void *tz);
time_t th_ktime(time_t *t);

/* Raw system calls, for a caller that must not touch the vDSO. */
int th_sys_clock_gettime(clockid_t id, struct timespec *ts);

/* Look a symbol up in an ELF image mapped like the vDSO (tests). */
void *th_vdso_lookup(const void *base, const char *name);

#endif
