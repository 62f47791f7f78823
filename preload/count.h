/*
 * Test build of the preload (TH_PRELOAD_COUNT): the entry points count the
 * calls that land in them, so that tests/compat can prove, call by call, that
 * a program's clock reads bind here and not to libc. The counters are
 * exported as `th_preload_calls` (unsigned long[TH_PC_SLOTS], indexed by the
 * enum) and `th_preload_ctor_ran` (int: the preload's constructor has run).
 */
#ifndef TH_PRELOAD_COUNT_H
#define TH_PRELOAD_COUNT_H

enum th_preload_counted {
	TH_PC_CLOCK_GETTIME,
	TH_PC_CLOCK_GETRES,
	TH_PC_GETTIMEOFDAY,
	TH_PC_TIME,
	TH_PC_TIMESPEC_GET,
	TH_PC_TIMESPEC_GETRES,
	TH_PC_FTIME,
	TH_PC_TIMES,
	TH_PC_CLOCK,
	TH_PC_N
};

#define TH_PC_SLOTS 16

#endif
