/*
 * The test seam: everything the attach layer reads from the machine. In the
 * library these are the counter and the kernel's clocks; tests/sim compiles the
 * same attach code with TH_SIM defined and supplies a virtual counter, a
 * virtual kernel and a scheduler that can stop any thread at any TH_STEP.
 */
#ifndef TH_ATTACH_HW_H
#define TH_ATTACH_HW_H

#ifdef TH_SIM
#include "sim_hw.h"
#else
#include <time.h>
#include "counter.h"
#include "kclock.h"
#include "kdata.h"

/* This thread's number, the windup lock's value while it holds it
 * (th__self_id, windup.c) */
#define th_hw_self() th__self_id()
#define th_hw_ctr_ordered() th_counter_ordered()
#define th_hw_ctr_relaxed() th_counter_relaxed()
#define th_hw_ctr_fence() th_counter_fence()
#define th_hw_kread(id, ts) th_kclock_gettime((id), (ts))
#define th_hw_ktime() th_ktime(NULL)
/* time() entry point, or NULL: th_time() calls it directly */
#define th_hw_ktime_fn() TH_VDSO(time)
#define th_hw_order_after_kread() th_order_after_kernel_read()
#define th_hw_have_ktime() (TH_VDSO(time) != NULL)
#define th_hw_have_kcoarse() (TH_VDSO(clock_gettime) != NULL)
/* MONOTONIC_COARSE from the kernel's data page: 1 and *ns, or 0 (then
 * th_hw_kread it) */
#define th_hw_kcoarse_direct(ns) th_kdata_mono_coarse(ns)
/* The same, checked against the kernel's fine line: 1 and *ns, -1 a second
 * off (no coarse clock now), 0 cannot tell (then th_hw_kread it) */
#define th_hw_kcoarse_check(ns) th_kdata_coarse_check(ns)
/* REALTIME - MONOTONIC exactly from the kernel's data page: 1 and *off, or 0 */
#define th_hw_koff_real(off) th_kdata_real_offset(off)
/* The same with the count of the kernel's update it is from: 1; 0 where the
 * page is not read; -1 where it is but no consistent copy was had now */
#define th_hw_kpage_real(off, seq) th_kdata_real_offset_seq((off), (seq))
/* Where the address of the kernel's data page count is kept, against which
 * a record tied to a kernel update is checked (kdata.h; a private odd word
 * while there is none); th_abi_eval loads it where it needs it. */
#define th_hw_kcount_ref() ((const uint32_t *const *)&th_kdata.seq)
/* one iteration of a bounded wait for another thread */
#if defined(__x86_64__) || defined(__i386__)
#define th_hw_pause() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define th_hw_pause() __asm__ volatile("yield" ::: "memory")
#else
#define th_hw_pause() ((void)0)
#endif
#endif

/*
 * Where an ordered fast read is ordered (th__read_cur, th__read_ctr), `op`
 * the process's th_proc.ctr_early. x86: by its counter read (LFENCE;RDTSC,
 * or RDTSCP where the CPU has it), right after the process's word: x86
 * keeps loads in program order, so the word is loaded after every earlier
 * load of the thread either way, and the counter after both. Elsewhere
 * (arm64, the simulation): by the fence before the word, the counter read
 * itself plain.
 */
#if !defined(TH_SIM) && defined(__x86_64__)
#define TH_HW_FENCE_AT_COUNTER 1
/* RDTSCP (2) is the rarest: only where LFENCE does not serialize */
#define th_hw_ctr_early_ordered(op) (TH_UNLIKELY((op) == 2) ? th_counter_rdtscp() : th_counter_ordered())
#else
#define TH_HW_FENCE_AT_COUNTER 0
#define th_hw_ctr_early_ordered(op) ((void)(op), th_hw_ctr_relaxed())
#endif

#endif
