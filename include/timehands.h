/*
 * timehands — the time on Linux as cheap as the hardware allows, with every
 * guarantee the kernel makes and the ones it forgot.
 *
 * The th_ functions behave like their libc twins: same return values, same
 * errno, EINVAL for unknown clock ids. Clock ids that timehands does not
 * accelerate (CPU-time clocks, dynamic/PTP fd clocks) go to the kernel
 * unchanged. See timehands(3) and timehands(7).
 */
#ifndef TIMEHANDS_H
#define TIMEHANDS_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/time.h>
#include <sys/times.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TIMEHANDS_VERSION_MAJOR 1
#define TIMEHANDS_VERSION_MINOR 0

/*
 * Extension clock ids. The kernel encodes CPU-time clocks of other processes
 * and fd clocks as negative ids whose low three bits are 0..6; a negative id
 * with (id & 7) == 7 is never valid there, so these can never collide with a
 * kernel clock. A fallback translates them to their base id; they are never
 * handed to the kernel.
 */
/* REALTIME / MONOTONIC from an unordered counter read: monotonic per thread
 * only (a read may be taken slightly before earlier instructions retire, so
 * ordering against another thread's read is not promised). */
#define TH_CLOCK_REALTIME_RELAXED        ((clockid_t)-9)
#define TH_CLOCK_MONOTONIC_RELAXED       ((clockid_t)-17)
/* Process / thread CPU time served from memory, refreshed once per tick. */
#define TH_CLOCK_PROCESS_CPUTIME_COARSE  ((clockid_t)-25)
#define TH_CLOCK_THREAD_CPUTIME_COARSE   ((clockid_t)-33)

int th_clock_gettime(clockid_t clock_id, struct timespec *ts);
int th_clock_getres(clockid_t clock_id, struct timespec *res);
int th_gettimeofday(struct timeval *tv, void *tz);
time_t th_time(time_t *t);
clock_t th_times(struct tms *buf);
clock_t th_clock(void);

/* Where this process reads its time from. */
enum th_mode {
	TH_MODE_KERNEL = 0, /* every read goes to the kernel's clocks */
	TH_MODE_LOCAL = 1,  /* counter + records published in this process */
	TH_MODE_SHARED = 2  /* counter + records published by timehandsd */
};

enum th_counter {
	TH_COUNTER_NONE = 0,
	TH_COUNTER_TSC = 1,    /* x86-64 time stamp counter */
	TH_COUNTER_CNTVCT = 2  /* arm64 virtual counter */
};

/*
 * th_status() fills at most `size` bytes of this structure and returns 0, or
 * -1 with errno EINVAL when size is too small for the first fields. New fields
 * are only ever appended, so a program built against an older header keeps
 * working (pass sizeof(struct th_status)).
 */
struct th_status {
	uint32_t size;          /* bytes filled in */
	uint32_t mode;          /* enum th_mode */
	uint32_t counter;       /* enum th_counter actually in use (NONE in kernel mode) */
	uint32_t counter_available; /* enum th_counter the CPU has, trusted or not */
	double freq_hz;         /* counter ticks per MONOTONIC second, as estimated now */
	double freq_nominal_hz; /* published frequency, 0 if none was found */
	double freq_uncertainty_ppm; /* relative uncertainty of freq_hz */
	char freq_source[32];   /* "cpuid-15h", "hypervisor-leaf", "cpuinfo", "cntfrq", "measured", "none" */
	char clocksource[32];   /* the kernel's current clocksource */
	int64_t error_ns;       /* MONOTONIC minus the kernel's, measured by this call */
	int64_t error_bound_ns; /* half the width of the kernel sandwich around that read */
	char reason[192];       /* why the mode is not the fastest available; "" if it is */
	uint64_t windups;       /* records published by this process */
	uint64_t retries;       /* reads that saw a record change under them */
	uint64_t slow_reads;    /* reads served by the kernel path */
	uint64_t fallbacks;     /* times the counter was given up */
	uint64_t resyncs;       /* counter discontinuities detected (jump, suspend, migration) */
	uint64_t tick_ns;       /* the kernel's coarse clock resolution */
	uint64_t window_ns;     /* validity window of the current record */
	char page_path[96];     /* shared page in use or looked for */
	/* where coarse clocks and th_time() read the kernel's tick from:
	 * "data page" (read directly), "vdso", "system call" */
	char kernel_tick[32];
};

int th_status(struct th_status *st, size_t size);

/*
 * Inline fast path for th_time() (define TIMEHANDS_NO_INLINE to call the
 * library function instead). The kernel's cached second is accepted when it
 * equals the largest second a fine REALTIME reading of this process returned,
 * exactly as th_time() does; anything else goes to th_time(). The kernel's
 * second is read from its data page where the library found it there (the
 * word the kernel's own time() reads, accepted only while the page's sequence
 * count is even: a time namespace's page has it odd), else from the kernel's
 * time(). The structure below is internal and versioned; it is not part of
 * the API: fields are only appended, `minor` says how many exist.
 */
#define TH__FAST_ABI 1
struct th__fast {
	uint32_t abi;                    /* TH__FAST_ABI */
	uint32_t minor;                  /* 1: ksec and kseq exist */
	time_t (*time_fn)(time_t *);     /* the kernel's time(); NULL until attached */
	const uint64_t *g3;              /* [47:0] seconds floor, [63:48] REALTIME epoch */
	const uint64_t *ksec;            /* minor >= 1: the kernel's REALTIME seconds, or NULL */
	const uint32_t *kseq;            /* minor >= 1: its data page's sequence count */
};
const struct th__fast *th__fast(void);

#if !defined(TIMEHANDS_NO_INLINE) && (defined(__GNUC__) || defined(__clang__))
static inline time_t th__time_inline(time_t *t)
{
	/* One cached pointer per translation unit; relaxed atomics: every
	 * thread computes the same value, the race is only about which store
	 * wins. The pointed-to structure lives as long as the process. */
	static const struct th__fast *cache;
	const struct th__fast *f = __atomic_load_n(&cache, __ATOMIC_RELAXED);
	if (__builtin_expect(f == 0, 0)) {
		f = th__fast();
		__atomic_store_n(&cache, f, __ATOMIC_RELAXED);
	}
	/* Acquire pairs with the library's release store of time_fn at attach:
	 * g3, ksec and kseq are valid once time_fn is seen. */
	time_t (*fn)(time_t *) = __atomic_load_n(&f->time_fn, __ATOMIC_ACQUIRE);
	if (__builtin_expect(fn != 0 && f->abi == TH__FAST_ABI, 1)) {
		const uint64_t *ks = f->minor >= 1 ? __atomic_load_n(&f->ksec, __ATOMIC_RELAXED) : 0;
		uint64_t w;
		if (__builtin_expect(ks != 0, 1)) {
			/* Relaxed loads: the kernel writes the second as one
			 * word, and its time() reads it the same way. */
			uint32_t sq = __atomic_load_n(__atomic_load_n(&f->kseq, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
			uint64_t tk = __atomic_load_n(ks, __ATOMIC_RELAXED);
			w = __atomic_load_n(f->g3, __ATOMIC_RELAXED);
			if (__builtin_expect((sq & 1) == 0 && tk == (w & 0xffffffffffffULL), 1)) {
				if (t)
					*t = (time_t)tk;
				return (time_t)tk;
			}
		} else {
			time_t tk = fn(t);
			w = __atomic_load_n(f->g3, __ATOMIC_RELAXED);
			if (__builtin_expect((uint64_t)tk == (w & 0xffffffffffffULL), 1))
				return tk;
		}
	}
	return th_time(t);
}
#define th_time(t) th__time_inline(t)
#endif

#ifdef __cplusplus
}
#endif

#endif /* TIMEHANDS_H */
