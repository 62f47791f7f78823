/*
 * Architecture hooks: the counter read and its ordering. An architecture
 * supplies
 *   th_counter_ordered()  a read that happens after every earlier load of this
 *                         thread and before every later memory access;
 *   th_counter_relaxed()  a plain read (may be taken a few instructions early);
 *   TH_COUNTER_KIND       enum th_counter of the counter.
 * Anything else falls back to no counter (kernel mode).
 */
#ifndef TH_COUNTER_COUNTER_H
#define TH_COUNTER_COUNTER_H

#include <stdint.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#define TH_COUNTER_KIND 1 /* TH_COUNTER_TSC */

static inline uint64_t th_counter_ordered(void)
{
	/* LFENCE does not let RDTSC execute until every earlier instruction
	 * (the record copy, and any acquire load the caller synchronised on)
	 * has completed, so a read that happens-after another thread's read
	 * takes a counter value that is not earlier (what Linux's
	 * rdtsc_ordered() does where RDTSCP is not advertised). Later stores
	 * cannot become visible before RDTSC has executed: x86 stores are
	 * made visible in program order after retirement. */
	_mm_lfence();
	return __rdtsc();
}

static inline uint64_t th_counter_relaxed(void)
{
	return __rdtsc();
}

/* An ordered read by RDTSCP, where the CPU has it (th_trust.rdtscp): it
 * reads the counter only after every earlier instruction has executed and
 * every earlier load is globally visible, so it orders like LFENCE;RDTSC
 * against everything before it, and costs less (Linux's rdtsc_ordered()
 * prefers it for that reason). Later instructions may start before it: the
 * reads that use it copy their record after the counter, in either order
 * (tests/model/timehands.pml, COUNTER_EITHER), and later stores still
 * become visible only after it has retired. */
static inline uint64_t th_counter_rdtscp(void)
{
	uint32_t lo, hi;
	/* asm rather than __rdtscp(): the processor id it also returns would
	 * be stored to memory */
	__asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi) : : "ecx");
	return (uint64_t)hi << 32 | lo;
}

/*
 * The fence of an ordered read, issued *before* the record copy: nothing
 * after it (the copy, the RDTSC) executes until every earlier instruction of
 * this thread has completed, in particular an acquire load by which the
 * caller synchronised with another thread's reading. The record copy and the
 * counter read then proceed in parallel: the counter may be taken a few
 * nanoseconds before the copy completes, which the record's window tolerates
 * by construction (it reaches below the writer's sample, record.h), so the
 * fence need not sit between them. The "memory" clobber keeps the compiler
 * from moving the copy's loads above it.
 */
static inline void th_counter_fence(void)
{
	__asm__ volatile("lfence" ::: "memory");
}

/* After a kernel clock read (the vDSO's RDTSC): later loads wait for it.
 * RDTSC is not ordered with later loads without a following LFENCE. */
static inline void th_order_after_kernel_read(void)
{
	_mm_lfence();
}

#elif defined(__aarch64__)
#define TH_COUNTER_KIND 2 /* TH_COUNTER_CNTVCT */

static inline uint64_t th_counter_ordered(void)
{
	uint64_t v, tmp;
	/* ISB: the counter is not read speculatively before the preceding
	 * instructions (which end with the record copy's acquire fence).
	 * Then, as Linux's arch_counter_enforce_ordering(), a dummy load whose
	 * address depends on the value: later loads and stores (the caller's
	 * release store that another thread synchronises on) cannot be
	 * performed before the counter has been read. */
	__asm__ volatile("isb\n\t"
			 "mrs %0, cntvct_el0\n\t"
			 "eor %1, %0, %0\n\t"
			 "add %1, sp, %1\n\t"
			 "ldr xzr, [%1]"
			 : "=r"(v), "=&r"(tmp)
			 :
			 : "memory");
	return v;
}

static inline uint64_t th_counter_relaxed(void)
{
	uint64_t v;
	__asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
	return v;
}

/* Fence of an ordered read (see the x86 version): earlier loads are
 * performed before later ones (DMB ISHLD), and the counter read that follows
 * is not executed before the fence completes (ISB). */
static inline void th_counter_fence(void)
{
	__asm__ volatile("dmb ishld\n\tisb" ::: "memory");
}

/* The vDSO's counter read ends with a dependency on the value
 * (arch_counter_enforce_ordering); a load-load barrier after it orders our
 * later loads after that dependent load, hence after the counter read. */
static inline void th_order_after_kernel_read(void)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
}

static inline uint64_t th_counter_frequency(void)
{
	uint64_t v;
	__asm__ volatile("mrs %0, cntfrq_el0" : "=r"(v));
	return v;
}

#else
#define TH_COUNTER_KIND 0
static inline void th_counter_fence(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}
static inline void th_order_after_kernel_read(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}
static inline uint64_t th_counter_ordered(void)
{
	return 0;
}
static inline uint64_t th_counter_relaxed(void)
{
	return 0;
}
#endif

#endif
