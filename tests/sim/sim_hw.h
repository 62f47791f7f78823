/*
 * The simulation's side of the seam in src/attach/hw.h: a virtual counter, a
 * virtual kernel, and a scheduler that may switch threads at every TH_STEP and
 * every clock read.
 */
#ifndef TH_SIM_HW_H
#define TH_SIM_HW_H

#include <stdint.h>
#include <time.h>

uint64_t th_sim_ctr(int ordered);
/* The ordered read's fence: the next unordered counter read of the thread
 * may take the counter anywhere between it and its own place (RDTSC and MRS
 * are not ordered with the loads between), as the hardware may. */
void th_sim_fence(void);
int th_sim_kread(clockid_t id, struct timespec *ts);
time_t th_sim_time(time_t *t);

/* the running simulated thread's number (all run on one system thread), 2 on */
uint32_t th_sim_self(void);
#define th_hw_self() th_sim_self()
#define th_hw_ctr_ordered() th_sim_ctr(1)
#define th_hw_ctr_relaxed() th_sim_ctr(0)
#define th_hw_ctr_fence() th_sim_fence()
#define th_hw_kread(id, ts) th_sim_kread((id), (ts))
#define th_hw_ktime() th_sim_time(NULL)
#define th_hw_ktime_fn() (&th_sim_time)
#define th_hw_have_ktime() 1
#define th_hw_have_kcoarse() 1
#define th_hw_order_after_kread() ((void)0)
/* The direct read of the kernel's coarse clock (src/counter/kdata.h), in
 * world.c: the virtual kernel's coarse clock, or "the kernel was updating". */
int th_sim_kcoarse_direct(uint64_t *ns);
#define th_hw_kcoarse_direct(ns) th_sim_kcoarse_direct(ns)
/* the virtual kernel's coarse clock never leaves its fine line: no verdict */
#define th_hw_kcoarse_check(ns) ((void)(ns), 0)
/* The virtual kernel's data page (world.c, sim_config.kpage): the count
 * of its updates (each tick, rate change, step, suspend), which records tied
 * to an update are checked against, and REALTIME's offset of the latest
 * one, exactly; or, one time in eight, "the kernel was updating" (-1). With
 * no page (kpage 0): 0, offsets are measured in brackets as on a kernel
 * without one, and the count never moves. The simulated kernel publishes no
 * conversion of its own: no kernel's line. */
int th_sim_kpage_real(int64_t *off, uint32_t *seq);
int th_sim_koff_real(int64_t *off);
#define th_hw_koff_real(off) th_sim_koff_real(off)
#define th_hw_kpage_real(off, seq) th_sim_kpage_real((off), (seq))
extern const uint32_t *th_sim_kcount_ref;
#define th_hw_kcount_ref() ((const uint32_t *const *)&th_sim_kcount_ref)
#define th_hw_pause() ((void)0)

#endif
