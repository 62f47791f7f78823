/* Process CPU time: times(), clock() and the coarse CPU-time clocks. */
#ifndef TH_CPUTIME_CPUTIME_H
#define TH_CPUTIME_CPUTIME_H

#include <sys/times.h>
#include <time.h>

#define TH_HIDDEN_CPU __attribute__((visibility("hidden")))

clock_t th__times(struct tms *buf) TH_HIDDEN_CPU;
clock_t th__clock(void) TH_HIDDEN_CPU;
int th__cputime_coarse(clockid_t id, struct timespec *ts) TH_HIDDEN_CPU;
int th__cputime_getres(clockid_t id, struct timespec *res) TH_HIDDEN_CPU;

#endif
