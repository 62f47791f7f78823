/*
 * Deterministic simulation of timehands' publish/read protocol and windup
 * math: one OS thread runs virtual threads (coroutines) over a virtual
 * counter and a virtual kernel; the scheduler switches threads at every
 * protocol step (TH_STEP) and clock read, at random from a seed, and can stall
 * any thread at any named step for any virtual duration. An oracle checks
 * G1-G5 on every read.
 */
#ifndef TH_SIM_WORLD_H
#define TH_SIM_WORLD_H

#include <stdint.h>
#include <time.h>

#define SIM_MAX_THREADS 8
#define SIM_MAX_EVENTS 128
#define SIM_MAX_CPUS 4
#define SIM_FOREVER (-1) /* a stall duration: the thread never runs again (it died) */

enum sim_event_kind {
	EV_MONO_RATE,    /* kernel MONOTONIC rate: arg = ppb (NTP slew / frequency) */
	EV_RAW_RATE,     /* kernel MONOTONIC_RAW rate: arg = ppb */
	EV_STEP_REAL,    /* REALTIME stepped by arg ns */
	EV_SUSPEND,      /* suspend for arg ns; arg2: 1 = counter keeps running, 0 = it stops */
	EV_CTR_JUMP,     /* counter jumps by arg counts (snapshot restore, migration) */
	EV_CTR_RATE,     /* counter frequency becomes arg Hz (migration to another host) */
	EV_TAI_OFFSET,   /* TAI - REALTIME becomes arg seconds */
	EV_DAEMON_STOP,  /* the virtual timehandsd stops for arg ns (SIGSTOP ... SIGCONT) */
	EV_DAEMON_KILL,  /* the virtual timehandsd dies */
	EV_DAEMON_START, /* a new virtual timehandsd starts (after a kill) */
};

struct sim_event {
	int64_t at;      /* true time, ns */
	int kind;
	int64_t arg, arg2;
	int done;
};

struct sim_stall {
	int thread;          /* -1: any thread */
	const char *step;    /* TH_STEP name, or "kread"/"ctr" */
	int occurrence;      /* which hit of that step (1-based); 0: every hit; -n: every n-th hit */
	int64_t from_T, to_T; /* if to_T: only hits at virtual times in [from_T, to_T) */
	int64_t duration;    /* ns, or SIM_FOREVER */
	int busy;            /* the thread keeps running, that much slower (no switch) */
	int hits;
	int fired;
};

struct sim_config {
	uint64_t seed;
	int threads;             /* reader threads */
	int64_t duration_ns;     /* true time to simulate */
	double ctr_hz;           /* counter frequency */
	uint64_t ctr_start;      /* counter value at T = 0 (near 2^64 tests the wrap) */
	double nominal_hz;       /* published frequency given to the library (0: none) */
	int64_t skew[SIM_MAX_THREADS]; /* per-thread counter offset, counts */
	int cpus;                /* CPUs the threads run on (0: one counter for all) */
	int64_t cpu_skew[SIM_MAX_CPUS]; /* counter offset of each CPU, counts */
	double migrate_prob;     /* chance that a thread moves to another CPU when switched out */
	int expect_distrust;     /* the skew is large: the library must give up the counter */
	int accuracy_soft;       /* with skew: G1/G5 beyond epsilon + skew are counted, not failed */
	/* G1/G5 beyond epsilon counted, not failed: the own line learns of a
	 * kernel rate change at its next windup (doc/limits.md); G2-G4 hold */
	int rate_soft;
	int64_t gap_ns;          /* max pause between a thread's reads */
	int64_t gap0_ns;         /* thread 0's, if set (0: gap_ns) */
	int64_t daemon_lag_ns;   /* the virtual daemon's kernel readings lag this much: its lines do */
	int64_t long_pause_every; /* every N reads a pause of long_pause_ns (0: never) */
	int64_t long_pause_ns;
	double switch_prob;      /* probability of a thread switch at each step */
	double ctr_early_prob;   /* chance that an unordered counter read after the fence takes the
				    counter at a random earlier moment since the fence (th_sim_fence) */
	struct sim_event events[SIM_MAX_EVENTS];
	int nevents;
	struct sim_stall stalls[8];
	int nstalls;
	int fork_at_read;        /* simulate fork in the middle (0: never) */
	int first_read_only;     /* only the first read of a fresh process (G8) */
	int daemon;              /* run a virtual timehandsd; the process may read its page */
	int ctr_late;            /* ordered reads take the counter after the copy
				    (TIMEHANDS_COUNTER_READ=late: th_proc.ctr_early 3) */
	int kpage;               /* the virtual kernel publishes a data page (sim_hw.h): the
				    process ties its lines to its updates, and a fine REALTIME
				    reading that starts after a step shows it (no daemon) */
	int coarse_only;         /* readers call only coarse clocks and time() (G5: they must
				    see them advance, with nothing else refreshing the records) */
	int min_joins;           /* the process must switch to the page at least this often */
	int need_lines;          /* most reads must be served by a counter line (not kernel records) */
	int need_wide;           /* the process must have held offsets too wide to serve (windup step "wide");
				  * 2: and still at the end, th_status saying why */
};

struct sim_result {
	uint64_t reads, violations, kreads, windups, slow_reads, retries;
	uint64_t g1, g2, g3, g4, g5;
	int64_t worst_g1_ns;
	int64_t first_read_ns;   /* first_read_only: virtual time the first read took */
	uint64_t fallbacks;      /* times the library gave up the counter */
	int64_t detect_ns;       /* cpus with skew: virtual time the counter was distrusted (0: never) */
	uint64_t reads_after_death; /* reads completed after a thread died (SIM_FOREVER) */
	uint64_t soft;           /* accuracy_soft: G1/G5 misses counted but not failed */
	uint64_t joins;          /* switches of the process to the page */
	uint64_t wide;           /* windups that found the offsets too wide to serve */
	int wide_at_end;         /* need_wide == 2: the offsets were still too wide when status was asked */
	char first[512];
};

void sim_run(const struct sim_config *cfg, struct sim_result *res);
void sim_config_default(struct sim_config *cfg, uint64_t seed);
void sim_add_event(struct sim_config *cfg, int64_t at, int kind, int64_t arg, int64_t arg2);
void sim_add_stall(struct sim_config *cfg, int thread, const char *step, int occurrence, int64_t duration);
/* As a stall, but the thread takes the time itself, running (slow code, not
 * a preemption): no other thread runs meanwhile. */
void sim_add_slow(struct sim_config *cfg, int thread, const char *step, int occurrence, int64_t duration);
/* Every hit of `step` at virtual times in [from, to) stalls the thread for
 * `duration` (busy: slows it down by that much, as sim_add_slow). */
void sim_add_window(struct sim_config *cfg, int thread, const char *step, int64_t duration, int busy, int64_t from,
		    int64_t to);

/* The protocol steps a writer passes through (for stall sweeps). */
extern const char *const sim_writer_steps[];

#endif
