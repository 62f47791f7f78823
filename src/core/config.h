/*
 * Environment variables, parsed by a pure function (no getenv inside, so the
 * parser can be fuzzed and unit-tested). A bad value never changes behaviour
 * beyond falling back to the safe default, and is reported once.
 *
 *   TIMEHANDS_DISABLE=0|1        1: every read goes to the kernel unchanged
 *   TIMEHANDS_COUNTER=auto|off|force
 *                                off: never read the counter; force: skip the
 *                                clocksource check (testing, emulators)
 *   TIMEHANDS_COUNTER_READ=auto|early|late
 *                                where an ordered fine read takes the counter:
 *                                early, right after the process's word, by
 *                                an ordered read (RDTSCP or LFENCE;RDTSC);
 *                                late, a fence after the word, then the
 *                                record, then the counter. auto: late where
 *                                that is the cheaper (Intel), else early.
 *                                Both are exact; for comparisons and tests
 *   TIMEHANDS_RELAXED=0|1        preload: serve REALTIME/MONOTONIC with the
 *                                relaxed (per-thread monotonic) read
 *   TIMEHANDS_CPUTIME=exact|coarse
 *                                preload: times()/clock() from the coarse cache
 *   TIMEHANDS_PAGE=PATH          shared page published by timehandsd
 *                                ("none": do not look for one)
 *   TIMEHANDS_PAGE_RECONNECT=0|1 1: when the page goes stale (timehandsd
 *                                stopped), look for a restarted daemon from a
 *                                clock read (socket, connect, mmap system
 *                                calls). Off by default: a program may have
 *                                locked itself down (seccomp) since it
 *                                attached, and after attach the library makes
 *                                no system call but clock reads (G9). A page
 *                                that comes back to life (the same daemon
 *                                continued) is used again either way.
 *   TIMEHANDS_LINE=auto|own      own: timehands' own line even where the
 *                                kernel's can be followed
 *
 * Where the warning goes is the attaching code's choice (attach.c): a program
 * that asked for timehands (linked it, or named the preload in LD_PRELOAD)
 * gets it on stderr; every process gets it in th_status().
 */
#ifndef TH_CORE_CONFIG_H
#define TH_CORE_CONFIG_H

#include <stddef.h>

enum { TH_CTR_AUTO = 0, TH_CTR_OFF = 1, TH_CTR_FORCE = 2 };
enum { TH_CTR_READ_AUTO = 0, TH_CTR_READ_EARLY = 1, TH_CTR_READ_LATE = 2 };

#define TH_DEFAULT_PAGE "/run/timehands/page"

struct th_config {
	int disable;
	int counter;
	int relaxed;
	int cputime_coarse;
	int page_reconnect;
	/* TIMEHANDS_LINE=own: timehands' own disciplined line even where the
	 * kernel publishes its conversion of the counter (comparisons, and
	 * tests of the daemon's page, which such machines do not need) */
	int own_line;
	int counter_read; /* TH_CTR_READ_* */
	char page[200];
	char warning[256]; /* "" or one line naming every bad variable */
};

typedef const char *(*th_getenv_fn)(const char *name, void *ctx);

/* Every variable th_config_parse reads, NULL-terminated (for the CLI, which
 * shows and cleans them). */
extern const char *const th_config_vars[];

/* Parse every variable through `get`; never fails. */
void th_config_parse(struct th_config *c, th_getenv_fn get, void *ctx);

/* Parse one boolean ("0", "1", "yes", "no", "true", "false", "on", "off",
 * case-insensitive). Returns 0 and sets *out, or -1 for anything else. */
int th_parse_bool(const char *v, int *out);

/* Parse a clock id given as a decimal or symbolic name ("CLOCK_MONOTONIC",
 * "monotonic", "TH_CLOCK_MONOTONIC_RELAXED"...). Returns 0 or -1. */
int th_parse_clockid(const char *v, long *out);

#endif
