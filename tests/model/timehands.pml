/*
 * Spin model of timehands' publication protocol (src/core/record.h,
 * src/core/record.c, src/attach/windup.c, shared.c and slow.c, the fast path in src/attach/proc.h
 * and its record reader th_abi_eval in include/timehands/abi.h).
 *
 * What is modelled, step by step as in the code (each label below is the
 * TH_STEP name the code uses at that point):
 *   - a ring of RING records, each with a generation (0 while written) and
 *     three groups of fields written one group at a time;
 *   - the timeline word `cur` = (slot, sequence, announce count);
 *   - readers: the fast path (th__fine_ts), the slow path (th__fine_slow,
 *     th_snapshot, kernel_value, th_announce), and in local mode the windup a
 *     reader runs under the try-lock when it finds the record due or expired;
 *   - the windup (windup_locked): continuation of a line at the old record's
 *     expiry (th_plan_next), refresh, kernel records that carry the old
 *     line's ceiling (th_plan_kernel, phi), the kernel -> line transition
 *     with the TRANSIT guard and the compare-and-swap commit (install_line);
 *   - a publisher that may die at any of its steps and never come back: in
 *     local mode a thread frozen while it holds the windup lock, in daemon
 *     mode (-DDAEMON) timehandsd, the only writer, killed mid-update.
 *
 * Time is abstract: `now` is both the counter and the kernel's MONOTONIC
 * (a synchronised counter, read exactly). A line is F(c) = base + (c - anchor)
 * * slope, the slope below the anchor `lo`, from it on `hi`, each 0, 1 or 2
 * counts per tick: the discipline's rate changes, exaggerated. The writer
 * steers so that a line stays within LMAX of the kernel at its window's
 * ends, and records the exact largest lead as the record's bound.
 *
 * Checked:
 *   assertions  no torn record: a copy a reader accepts comes from one write
 *               (every field group carries the id of the write that stored
 *               it); every result lies within EPS of the kernel's clock
 *               around the read (no extrapolation, no stale record);
 *   ltl monotonic      a read never returns less than a read that completed
 *                      before it started (G2 across threads);
 *   ltl bounded_retries a read retries at most 2 x (commits made while it
 *                      runs) + PASSES times: every failed snapshot attempt and
 *                      every failed pass needs a commit after the `cur` it
 *                      read, so retries are bounded by the writer's progress
 *                      (G6: lock-free, readers never wait for a stalled
 *                      writer), not by a constant;
 *   ltl progress       every read completes, also when the publisher died
 *                      (checked under weak fairness).
 *
 * Readers follow the code: a record is accepted only
 * with the generation of the sequence `cur` named (TH_CUR_GEN), and the slow
 * path's snapshot is retried while `cur` moves (th_snapshot_progress), giving
 * up to the kernel's clock (kernel_exact) only when it did not move.
 *
 * -DFIX_PASS_RETRY lifts th__fine_slow's limit of PASSES passes, as the code
 * does since it keeps going while records change (a failed pass here always
 * follows a commit). Without it (the code before that change) ltl monotonic
 * fails: after PASSES failed passes phi of the last snapshot (>= the raw
 * kernel reading) was served without announcing, and a line committed
 * meanwhile that lags the kernel returned less afterwards.
 * tests/tiers/model.sh checks with the define.
 *
 * Daemon mode (-DDAEMON): readers never announce (the page is read-only);
 * they serve th_phi_page of the page record (shared_value: the kernel's
 * reading less LAG, the most a fresh line lags the kernel, unless the
 * record's ceiling is higher), and read again when the page's word moved
 * during their kernel read. leave_shared and the switch floors are not
 * modelled (the simulation's shared-early-ctr covers a counter taken before
 * the switch); the daemon is modelled as the local windup. The safety and
 * progress claims hold (tests/tiers/model.sh, world `daemon`; progress is
 * not run by default), and with -DDAEMON_PROMPT (a daemon never preempted
 * between its sample and its last commit), world `prompt`.
 * -DBREAK_PAGE_NO_LAG (phi of the kernel, the code before th_phi_page) fails
 * ltl monotonic in world `daemon`: a reader of a TRANSIT record reads the
 * kernel after the daemon's sample and before its commit, serves that, and
 * the committed line, lagging the kernel, returns less afterwards (in local
 * mode that reader would have announced itself and failed the commit).
 * -DBREAK_PAGE_NO_RECHECK (no second look at the page's word) fails in world
 * `prompt` without the lag only; with it, that look is a second line of
 * defence (a continuation committed past the old line's expiry, whose lag
 * only steering bounds).
 *
 * -DEARLY_COUNTER: readers take the counter right after the ordered read's
 * fence, before they load `cur`, instead of after the copy: any number of
 * commits may come between the counter and the record. The code (th__read_ctr,
 * and the header's inline read, where the process may read the counter:
 * th_proc.ctr_early) takes it right after `cur`, before the copy, and the
 * hardware may take it before `cur` (RDTSC is not ordered with loads). -DCOUNTER_EITHER: each read takes one of the two orders (a
 * thread that has not yet seen ctr_early set reads late). Without either,
 * the order of a process whose counter may not be read early. The hardware
 * may also take the counter anywhere between the two (RDTSC is not ordered
 * with later loads); the tier checks the two ends. (Serving a counter below
 * a record's window, which only an early counter can be, breaks no claim
 * here: it was taken after the read started; the code refuses it for the
 * line's precision and its 64-bit arithmetic.)
 *
 * Spin is sequentially consistent: the model checks the protocol's logic,
 * not its memory ordering; the fences are argued next to the code.
 *
 * Deliberate breaks (each should make tests/tiers/model.sh fail; run one with
 * MODEL_WORLDS=local MODEL_DEFINES=-DBREAK_... ./tests/tiers/model.sh; the
 * results are in doc/mutations.md, section Model; the tier does not run them
 * by itself):
 *   -DBREAK_ANY_GEN       the reader before 9be5db9: any generation != 0
 *   -DBREAK_NO_PROGRESS   the slow path gives up to the kernel after one
 *                         failed round of th_snapshot (before 9be5db9)
 *   -DBREAK_GEN_EARLY     store the new generation before the fields
 *   -DBREAK_PUBLISH_EARLY swing `cur` to the new record before writing it
 *   -DBREAK_SAME_SLOT     write the slot `cur` names instead of the next one
 *   -DBREAK_SWITCH_PAST   anchor a continuation at the sample, not at the old
 *                         record's expiry
 *   -DBREAK_NO_CLAMP      a fresh line extrapolates below its anchor instead
 *                         of clamping counters below it to the base
 *   -DBREAK_NO_RANGE      serve counters beyond a record's window
 *   -DBREAK_PAGE_NO_RECHECK  (daemon mode) no second look at the page's word
 *                         after the kernel read (with -DBREAK_PAGE_NO_LAG)
 *   -DBREAK_PAGE_NO_LAG   (daemon mode) page readers serve phi of the kernel
 *
 * Bounds (defines): RING, NR readers, NREADS, MAXT, NWINDUPS (windups in all:
 * the daemon's, or in local mode those of readers 0 .. WINDERS-1), TRIES,
 * PASSES, ATTEMPTS. Every writer is finite, so every retry loop is too.
 */

#ifndef RING
#define RING 3          /* TH_RING (8 in the code; 3 makes wrap-around reachable) */
#endif
#ifndef NR
#define NR 2            /* readers */
#endif
#ifndef NREADS
#define NREADS 2        /* reads of reader 0; the others read once */
#endif
#ifndef WINDERS
#define WINDERS NR      /* local mode: readers WFIRST .. WINDERS-1 may wind up;
			 * the others always find the lock held (by a thread not
			 * modelled) */
#endif
#ifndef WFIRST
#define WFIRST 0        /* WFIRST=1 WINDERS=2: only reader 1 winds up, so reader 0
			 * (two reads) can be stalled anywhere while records are
			 * committed under it */
#endif
#ifndef MAXT
#define MAXT 7          /* time horizon, ticks */
#endif
#ifndef NWINDUPS
#define NWINDUPS 3      /* windups the publisher attempts */
#endif
#ifndef TRIES
#define TRIES 2         /* TH_READ_TRIES (16 in the code) */
#endif
#ifndef PASSES
#define PASSES 3        /* th__fine_slow's passes (4 in the code) */
#endif
#ifndef ATTEMPTS
#define ATTEMPTS 2      /* install_line's attempts (4 in the code) */
#endif
#define WIN 2           /* a line record's window: dhi */
#define DUE 1           /* ddue: a windup is due from here on */
#define TOL 1           /* counters this far below a new anchor are served */
#define GUARD 1         /* TRANSIT guard above phi of the kernel */
#define LMAX 1          /* steering keeps a line within this of the kernel */
#define EPS (LMAX + GUARD + TOL + WIN)
#ifndef LAG
#define LAG LMAX        /* TH_PAGE_LAG_NS: the most a fresh line lags the kernel */
#endif

#define K_EMPTY 0
#define K_LINE 1
#define K_KERNEL 2
#define K_TRANSIT 3

#define IDLE 0
#define READING 1
#define DONE 2

typedef rec {
	byte gen;
	/* group A: the window */
	byte kind; short anchor; short dlo; short ddue; byte tagA;
	/* group B: the line */
	short base; byte lo; byte hi; short dhi; byte tagB;
	/* group C: kernel-mode and transition data */
	short ceil; short guard; short bound; short due; byte tagC;
};

rec ring[RING];
byte cslot, cseq = 1, cann;   /* the timeline word `cur` */
byte now = 1;                 /* counter = kernel MONOTONIC */
bool lock;                    /* windup try-lock (local mode) */
byte nwind;                   /* windups started (local mode), at most NWINDUPS */
byte wid = 1;                 /* ghost: id of the last record write */
bool died;                    /* ghost: the publisher died */
byte dier = 255;              /* ghost: the reader that died (local mode) */
short hb_max;                 /* ghost: largest result of a completed read */

/* per reader, global so that the LTL formulas can name them */
byte r_phase[NR];
short r_val[NR], r_floor[NR];
byte r_retries[NR];

/* Ghost: the sequence `cur` held when read i started. Every failed snapshot
 * attempt needs a commit after the `cur` it read (the writer rewrites only
 * the slot after the current one), so a read retries at most once per commit
 * made while it runs, plus once per pass of the slow path. */
byte r_q0[NR];

#define MONO(i) (r_phase[i] != DONE || r_val[i] >= r_floor[i])
#define BOUNDED(i) (r_phase[i] != READING || r_retries[i] <= 2 * (cseq - r_q0[i]) + PASSES)
#define PROGRESS(i) (r_phase[i] == READING -> <> (r_phase[i] == DONE || dier == i))
#if NR == 1
#define ALL(P) (P(0))
#else
#define ALL(P) (P(0) && P(1))
#endif

ltl monotonic { [] ALL(MONO) }
ltl bounded_retries { [] ALL(BOUNDED) }
ltl progress { [] ALL(PROGRESS) }
/* the two safety properties in one search (make test-model) */
ltl safety { [] (ALL(MONO) && ALL(BOUNDED)) }

/* Read the clock (counter or kernel): a tick may have passed since anyone
 * last looked (-DBIGSTEP: any number of ticks up to the horizon). Longer
 * pauses are several reads by others, or a process that is not scheduled. */
inline tick(x)
{
	atomic {
#ifdef BIGSTEP
		do
		:: now < MAXT -> now++
		:: true -> break
		od;
#else
		if
		:: now < MAXT -> now++
		:: true -> skip
		fi;
#endif
		x = now
	}
}

inline phi(out, k, C, b)
{
	/* th_phi: max(k, min(C, k + b)) */
	out = (C < k + b -> C : k + b);
	out = (out > k -> out : k)
}

/* ------------------------------------------------------------ writer side */

/* The record a writer builds (struct th_snap). */
#define VAL_DECL short v_anchor, v_dlo, v_ddue, v_base, v_dhi, v_ceil, v_guard, v_bound, v_due; \
	byte v_kind, v_lo, v_hi

/*
 * A writer step: the publisher may die here, for good (-DDEATH). For the
 * safety properties a death needs no modelling (a publisher that is never
 * scheduled again is already one of the interleavings, and a violation is a
 * finite prefix); it matters for progress, where weak fairness would
 * otherwise force a live publisher to move on.
 */
inline wstep()
{
#ifdef DEATH
	if
	:: may_die && !died -> d_step { died = true; dier = me }; goto end_dead
	:: true -> skip
	fi
#else
	skip
#endif
}

inline write_record(p_slot, p_gen)
{
	/* write_gen0 */
	wstep();
#ifdef BREAK_GEN_EARLY
	ring[p_slot].gen = p_gen;      /* the new generation before the fields */
#else
	ring[p_slot].gen = 0;
#endif
	/* write_fields */
	wstep();
	d_step { wid++; ring[p_slot].kind = v_kind; ring[p_slot].anchor = v_anchor; ring[p_slot].dlo = v_dlo;
		 ring[p_slot].ddue = v_ddue; ring[p_slot].tagA = wid }
	wstep();
	d_step { ring[p_slot].base = v_base; ring[p_slot].lo = v_lo; ring[p_slot].hi = v_hi; ring[p_slot].dhi = v_dhi;
		 ring[p_slot].tagB = wid }
	wstep();
	d_step { ring[p_slot].ceil = v_ceil; ring[p_slot].guard = v_guard; ring[p_slot].bound = v_bound;
		 ring[p_slot].due = v_due; ring[p_slot].tagC = wid }
	/* write_gen */
	wstep();
	ring[p_slot].gen = p_gen
}

/* -DDAEMON_PROMPT: a publisher never preempted inside a windup (from its
 * sample to its last commit, one atomic sequence); readers still interleave
 * between windups and may be stalled anywhere in a read across them. */
#ifdef DAEMON_PROMPT
#define PROMPT_BEGIN atomic {
#define PROMPT_END }
#else
#define PROMPT_BEGIN
#define PROMPT_END
#endif

/* Replaying a trail (spin -t) prints the records and the results. */
#define TRACE_COMMIT(ok) \
	printf("now %d: %d commits slot %d seq %d ok %d: kind %d anchor %d base %d lo %d hi %d window [%d,%d,%d] ceil %d guard %d bound %d due %d\n", \
	       now, _pid, wslot, x_seq + 1, ok, v_kind, v_anchor, v_base, v_lo, v_hi, v_dlo, v_ddue, v_dhi, v_ceil, \
	       v_guard, v_bound, v_due);

/* th_commit: write the slot after the one `x` names, then swing `cur` with a
 * compare-and-swap against x. */
inline commit(ok)
{
	wslot = (x_slot + 1) % RING;
#ifdef BREAK_SAME_SLOT
	wslot = x_slot;
#endif
#ifdef BREAK_PUBLISH_EARLY
	/* commit */
	wstep();
	atomic { if
		 :: cslot == x_slot && cseq == x_seq && cann == x_ann -> cslot = wslot; cseq = x_seq + 1; ok = true
		 :: else -> ok = false
		 fi }
	write_record(wslot, x_seq + 1);
#else
	write_record(wslot, x_seq + 1);
	/* commit */
	wstep();
	atomic { if
		 :: cslot == x_slot && cseq == x_seq && cann == x_ann -> cslot = wslot; cseq = x_seq + 1; ok = true
		 :: else -> ok = false
		 fi }
#endif
	TRACE_COMMIT(ok)
}

/* th_commit_force: publish whatever `cur` holds (kernel-mode records). */
inline commit_force()
{
	d_step { x_slot = cslot; x_seq = cseq };
	wslot = (x_slot + 1) % RING;
#ifdef BREAK_SAME_SLOT
	wslot = x_slot;
#endif
#ifdef BREAK_PUBLISH_EARLY
	wstep();
	d_step { cslot = wslot; cseq = x_seq + 1 };
	write_record(wslot, x_seq + 1);
#else
	write_record(wslot, x_seq + 1);
	/* commit: only announcements can change `cur` meanwhile (single writer) */
	wstep();
	d_step { cslot = wslot; cseq = x_seq + 1 }
#endif
	TRACE_COMMIT(1)
}

/* F of the writer's copy of the current record at delta d. */
#define WF(d) (w_base + (d) * ((d) < 0 -> w_lo : w_hi))
/* th_snap_ceiling of the writer's copy */
#define WCEIL (w_kind == K_LINE -> WF(w_dhi) : w_ceil)

/* Steering (th_plan_next / th_plan_fresh): the slope above the anchor brings
 * the lead (line minus kernel) at the end of the window within LMAX, or as
 * close as a slope can; any slope that does is possible. */
inline steer(lead0)
{
	if
	:: (lead0 - WIN <= LMAX && lead0 - WIN >= -LMAX) -> v_hi = 0
	:: (lead0 <= LMAX && lead0 >= -LMAX) -> v_hi = 1
	:: (lead0 + WIN <= LMAX && lead0 + WIN >= -LMAX) -> v_hi = 2
	:: (lead0 - WIN > LMAX) -> v_hi = 0
	:: (lead0 + WIN < -LMAX) -> v_hi = 2
	fi
}

/* bound: the largest lead over the window [dlo, dhi] (at its corners) */
inline line_bound()
{
	lead = v_base - v_anchor;
	v_bound = (lead > 0 -> lead : 0);
	lead = v_base + v_dlo * v_lo - (v_anchor + v_dlo);
	v_bound = (lead > v_bound -> lead : v_bound);
	lead = v_base + v_dhi * v_hi - (v_anchor + v_dhi);
	v_bound = (lead > v_bound -> lead : v_bound)
}

/* th_plan_next: anchored at the old record's expiry, the old slope below. */
inline plan_next()
{
	atomic { /* local to the writer: one step */
		v_kind = K_LINE;
#ifdef BREAK_SWITCH_PAST
		v_anchor = cs;
		v_base = WF(cs - w_anchor);
#else
		v_anchor = w_anchor + w_dhi;
		v_base = WF(w_dhi);
#endif
		v_lo = w_hi;
		lead = v_base - v_anchor;
		steer(lead);
		v_dlo = cs - v_anchor - TOL;
		v_dlo = (v_dlo < -w_dhi -> -w_dhi : v_dlo);   /* never below the old anchor */
		v_ddue = DUE; v_dhi = WIN;
		v_ceil = 0; v_guard = 0; v_due = 0;
		line_bound()
	}
}

/* th_plan_refresh: the same line, republished. */
inline plan_refresh()
{
	d_step { /* local to the writer: one step */
		v_kind = w_kind; v_anchor = w_anchor; v_dlo = w_dlo; v_ddue = w_ddue; v_base = w_base;
		v_lo = w_lo; v_hi = w_hi; v_dhi = w_dhi; v_ceil = w_ceil; v_guard = w_guard; v_bound = w_bound;
		v_due = w_due
	}
}

/* th_plan_fresh: a line from the sample, at least at the guard. */
inline plan_fresh()
{
	atomic { /* local to the writer: one step */
		v_kind = K_LINE;
		v_anchor = cs;
		v_base = (cs > b_guard -> cs : b_guard);
#ifdef BREAK_NO_CLAMP
		v_lo = 1;                      /* counters below the anchor extrapolate below the base */
#else
		v_lo = 0;                      /* counters just below the anchor clamp to it (d < dlo: d = dlo) */
#endif
		lead = v_base - cs;
		steer(lead);
		v_dlo = -TOL; v_ddue = DUE; v_dhi = WIN;
		v_ceil = 0; v_guard = 0; v_due = 0;
		line_bound()
	}
}

/* th_plan_kernel from the writer's base record b_* (have: one exists). */
inline plan_kernel(k, due_in, transit)
{
	atomic { /* local to the writer: one step */
		v_kind = (transit -> K_TRANSIT : K_KERNEL);
		v_ceil = (b_have -> b_ceil : 0);
		v_bound = (b_have -> b_bound : 0);
		if
		:: transit -> phi(v_guard, k, v_ceil, v_bound); v_guard = v_guard + GUARD
		:: else -> v_guard = 0
		fi;
		v_due = k + due_in;
		v_anchor = 0; v_dlo = 0; v_ddue = 0; v_dhi = -1; v_base = 0; v_lo = 0; v_hi = 0
	}
}

/* The base of install_line: the writer's copy, or the TRANSIT it published. */
inline base_from_copy()
{
	d_step { /* local to the writer: one step */
		b_have = (w_kind != K_EMPTY);
		b_ceil = WCEIL; b_bound = w_bound; b_guard = w_guard
	}
}

inline base_from_val()
{
	d_step { /* local to the writer: one step */
		b_have = true; b_ceil = v_ceil; b_bound = v_bound; b_guard = v_guard
	}
}

/*
 * install_line: kernel -> line through a TRANSIT record.
 */
inline install_line()
{
	att = 0;
	do
	:: att >= ATTEMPTS -> break
	:: att < ATTEMPTS ->
		att++;
		tick(gk);
		lead = (b_have -> b_ceil - gk : 0);   /* how far the old ceiling is ahead */
		if
		:: lead > GUARD ->
			plan_kernel(gk, lead, false);
			commit_force();
			goto windup_end
		:: else -> skip
		fi;
		plan_kernel(gk, 1, true);
		/* transit */
		wstep();
		commit_force();
		base_from_val();
		/* stalled since gk: the kernel is past the guard already */
		tick(am);
		if
		:: am > v_guard -> goto next_attempt
		:: else -> skip
		fi;
		/* acquire load of cur before the sample */
		d_step { x_slot = cslot; x_seq = cseq; x_ann = cann };
		/* sample */
		wstep();
		tick(cs);
		plan_fresh();
		commit(ok);
		if
		:: ok -> goto windup_end
		:: else -> skip
		fi;
next_attempt:	skip
	od;
	tick(gk);
	plan_kernel(gk, 1, false);
	commit_force()
}

/* windup_locked */
inline windup()
{
	/* acquire load of cur; the writer's copy of the current record (no
	 * other writer: no torn copy possible) */
	d_step { x_slot = cslot; x_seq = cseq; x_ann = cann;
		 w_kind = ring[x_slot].kind; w_anchor = ring[x_slot].anchor; w_dlo = ring[x_slot].dlo; w_ddue = ring[x_slot].ddue;
		 w_base = ring[x_slot].base; w_lo = ring[x_slot].lo; w_hi = ring[x_slot].hi; w_dhi = ring[x_slot].dhi;
		 w_ceil = ring[x_slot].ceil; w_guard = ring[x_slot].guard; w_bound = ring[x_slot].bound; w_due = ring[x_slot].due };
	PROMPT_BEGIN
	/* sample */
	wstep();
	tick(cs);
	/* observe: a sample may be too wide to steer by (bad), or show a jump
	 * that makes the counter untrusted (kernel mode) */
	wstep();
	if
	:: obs = 0
	:: nbad < 1 -> nbad++; obs = 1
	:: njump < 1 -> njump++; obs = 2
	fi;
	base_from_copy();
	if
	:: obs == 2 ->
		/* jump */
		gk = cs;
		plan_kernel(gk, 1, false);
		commit_force();
		goto windup_end
	:: else -> skip
	fi;
	if
	:: w_kind == K_LINE && cs - w_anchor >= w_dlo && cs - w_anchor <= w_dhi ->
		/* plan */
		wstep();
		if
		:: cs - w_anchor >= 0 && obs == 0 -> plan_next()
		:: else -> plan_refresh()
		fi;
		commit(ok);
		if
		:: ok -> goto windup_end
		:: else -> skip       /* an announcement: the record expired meanwhile */
		fi
	:: else -> skip
	fi;
	if
	:: obs == 1 ->
		gk = cs;
		plan_kernel(gk, 1, false);
		commit_force();
		goto windup_end
	:: else -> skip
	fi;
	install_line();
windup_end:
	skip
	PROMPT_END;
	/* forget the scratch values (fewer distinct states) */
	d_step {
		x_slot = 0; x_seq = 0; x_ann = 0; wslot = 0; att = 0; obs = 0; cs = 0; gk = 0; am = 0; lead = 0;
		ok = false; w_kind = 0; w_lo = 0; w_hi = 0; w_anchor = 0; w_dlo = 0; w_ddue = 0; w_base = 0;
		w_dhi = 0; w_ceil = 0; w_guard = 0; w_bound = 0; w_due = 0; b_have = false; b_ceil = 0;
		b_bound = 0; b_guard = 0; v_anchor = 0; v_dlo = 0; v_ddue = 0; v_base = 0; v_dhi = 0; v_ceil = 0;
		v_guard = 0; v_bound = 0; v_due = 0; v_kind = 0; v_lo = 0; v_hi = 0
	}
}

/* th__windup_try: 1 if this caller wound up. */
inline windup_try(did)
{
#ifdef DAEMON
	did = false     /* the daemon is the only writer */
#else
	/* lock (the model bounds the windups of all threads together:
	 * nwind < NWINDUPS, as if the lock were held from then on) */
	atomic { if
		 :: !lock && nwind < NWINDUPS && me >= WFIRST && me < WINDERS -> lock = true; did = true; nwind++
		 :: else -> did = false
		 fi };
	if
	:: did ->
		windup();
		/* unlock */
		wstep();
		lock = false
	:: else -> skip
	fi
#endif
}

#define WRITER_LOCALS VAL_DECL; \
	byte x_slot, x_seq, x_ann, wslot, att, obs, nbad, njump; \
	short cs, gk, am, lead; bool ok; \
	byte w_kind, w_lo, w_hi; \
	short w_anchor, w_dlo, w_ddue, w_base, w_dhi, w_ceil, w_guard, w_bound, w_due; \
	bool b_have; short b_ceil, b_bound, b_guard

/* timehandsd (daemon mode): the only writer; it may die at any step. In
 * local mode there is no publisher: readers wind up. */
proctype publisher()
{
	WRITER_LOCALS;
	bool may_die = true, did;
	byte me = 254;
	byte n;
	do
	:: n < NWINDUPS ->
		n++;
#ifdef DAEMON
		windup()
#else
		windup_try(did)
#endif
	:: n >= NWINDUPS -> break
	:: n < NWINDUPS -> break        /* stops publishing for good */
	od;
end_dead:
	false
}

/* ------------------------------------------------------------ reader side */

/* The generation a reader accepts: only that of the sequence `cur` named
 * (TH_CUR_GEN(cur) = TH_GEN_FOR(seq), the sequence's complement in the code;
 * here the sequence itself, which starts at 1 and stays far below the
 * byte's range: the same one-to-one map onto generations other than that of
 * a record being written), never an older or newer record found in the same
 * slot. -DBREAK_ANY_GEN makes the reader accept
 * any record not being written (g != 0), which the model shows unsafe. */
#ifdef BREAK_ANY_GEN
#define GEN_OK (g != 0)
#else
#define GEN_OK (g == lq)
#endif

#define CF(d) (c_base + (d) * ((d) < 0 -> c_lo : c_hi))

/* Copy one field group of slot ls (relaxed loads), noting which write it
 * came from. */
inline copy_A()
{
	d_step { c_kind = ring[ls].kind; c_anchor = ring[ls].anchor; c_dlo = ring[ls].dlo; c_ddue = ring[ls].ddue;
		 ftag = ring[ls].tagA }
}
inline copy_B()
{
	d_step { c_base = ring[ls].base; c_lo = ring[ls].lo; c_hi = ring[ls].hi; c_dhi = ring[ls].dhi;
		 torn = torn || ring[ls].tagB != ftag }
}
inline copy_C()
{
	d_step { c_ceil = ring[ls].ceil; c_guard = ring[ls].guard; c_bound = ring[ls].bound; c_due = ring[ls].due;
		 torn = torn || ring[ls].tagC != ftag }
}

/* th_snapshot */
inline snapshot(ok)
{
	t = 0;
	ok = false;
	do
	:: t >= TRIES -> break
	:: t < TRIES ->
		/* read_cur */
		d_step { ls = cslot; lq = cseq };
		/* read_gen */
		g = ring[ls].gen;
		if
		:: !GEN_OK -> t++; r_retries[me]++
		:: else ->
			torn = false;
			/* read_fields */
			copy_A(); copy_B(); copy_C();
			/* recheck_gen */
			if
			:: ring[ls].gen == g && c_kind != K_EMPTY -> ok = true; break
			:: else -> t++; r_retries[me]++
			fi
		fi
	od;
	assert(!ok || !torn)
}

/* th_snapshot_progress: th_snapshot again for as long as `cur` (its slot and
 * sequence: TH_CUR_ID) moves; -1 only when it did not move across a failed
 * round. -DBREAK_NO_PROGRESS: a single round (the model shows it can give up
 * to the kernel's clock while a writer makes progress). */
inline snapshot_progress(ok)
{
	d_step { bs = cslot; bq = cseq };
	do
	:: snapshot(ok);
		if
		:: ok -> break
#ifdef BREAK_NO_PROGRESS
		:: else -> break
#else
		:: else ->
			d_step {
				if
				:: cslot == bs && cseq == bq -> bs = 255
				:: else -> bs = cslot; bq = cseq
				fi
			};
			if
			:: bs == 255 -> break
			:: else -> skip
			fi
#endif
		fi
	od;
	bs = 0; bq = 0
}

/* th_announce: bump the announce count while `cur` still names the record */
inline announce(ok)
{
	atomic { if
		 :: cslot == ls && cseq == lq -> cann++; ok = true
		 :: else -> ok = false
		 fi }
}

/* kernel_value: phi of the kernel's reading; ok = false: read again */
inline kernel_value(ok)
{
	atomic {
		tick(k);
		C = (c_kind == K_LINE -> CF(c_dhi) : c_ceil);
		phi(val, k, C, c_bound);
		ok = true
	};
#ifdef DAEMON
	/* shared_value: a reader never writes the read-only page (no
	 * announcement); it serves phi of the kernel against the page record's
	 * ceiling, if the page's word still names the record after the kernel
	 * read (-DBREAK_PAGE_NO_RECHECK: not checked, the code before that
	 * check). The check that the local timeline's cur did not move (a
	 * thread leaving shared mode: leave_shared) is not modelled: it never
	 * moves here. */
#ifdef BREAK_PAGE_NO_RECHECK
	skip
#else
	if
	:: cslot != ls || cseq != lq -> ok = false
	:: else -> skip
	fi;
#endif
#ifndef BREAK_PAGE_NO_LAG
	/* th_phi_page: a page reader cannot announce, so what it serves from
	 * the kernel stays LAG behind it (max(k - LAG, min(C, k + bound))):
	 * a line the daemon commits later, however late, lags the kernel by
	 * at most LAG and starts at or above the guard, which is at or above
	 * C. -DBREAK_PAGE_NO_LAG: phi of the kernel, the code before. */
	d_step {
		val = (C < k + c_bound -> C : k + c_bound);
		val = (val > k - LAG -> val : k - LAG)
	}
#endif
#else
	if
	:: c_kind == K_LINE ->
		if
		:: k > C ->
			/* announce */
			announce(ok)
		:: else -> skip
		fi
	:: c_kind == K_TRANSIT ->
		if
		:: val > c_guard -> announce(ok)
		:: else -> skip
		fi
	:: else ->
		/* KERNEL: no writer pending; none started before our read */
		if
		:: cslot != ls || cseq != lq -> ok = false
		:: else ->
			if
			:: k >= c_due -> ret = 3; goto wind; back3: skip
			:: else -> skip
			fi
		fi
	fi
#endif
}

/* th__fine_ts, then th__fine_slow when the fast path does not serve */
inline fine_read()
{
#if defined(EARLY_COUNTER)
	/* read_counter, right after the ordered read's fence: the counter
	 * may be taken any time before the record is found */
	tick(c);
#elif defined(COUNTER_EITHER)
	if
	:: tick(c); early = true
	:: early = false
	fi;
#endif
	/* fast path: read_cur */
	d_step { ls = cslot; lq = cseq };
	/* read_gen */
	g = ring[ls].gen;
	torn = false;
	/* read_fields: the window and the line */
	copy_A(); copy_B();
	/* recheck_gen */
	if
	:: GEN_OK && ring[ls].gen == g && c_ddue - c_dlo != 0 ->
		assert(!torn);
#if defined(COUNTER_EITHER)
		if
		:: !early -> tick(c) /* read_counter */
		:: else -> skip
		fi;
#elif !defined(EARLY_COUNTER)
		/* read_counter */
		tick(c);
#endif
		d = c - c_anchor;
#ifdef BREAK_NO_RANGE
		if
		:: d >= c_dlo -> d_step { v = CF(d); printf("fast path, counter %d, slot %d seq %d\n", c, ls, lq) }; goto read_end
		:: else -> skip
		fi
#else
		if
		:: d >= c_dlo && d < c_ddue -> d_step { v = CF(d); printf("fast path, counter %d, slot %d seq %d\n", c, ls, lq) }; goto read_end
		:: else -> skip
		fi
#endif
	:: else -> skip
	fi;
	/* slow path */
	have = false;
	pass = 0;
	do
#ifdef FIX_PASS_RETRY
	/* as the code (see the top): no limit on the passes; every failed
	 * pass needs a commit, so the writer's progress bounds them */
	:: true ->
#else
	:: pass >= PASSES -> break
	:: pass < PASSES ->
#endif
		snapshot_progress(ok);
		if
		:: !ok -> tick(v); printf("kernel_exact\n"); goto read_end
		:: else -> skip
		fi;
		have = true;
		if
		:: c_kind == K_LINE ->
			tick(c);
			d = c - c_anchor;
#ifdef BREAK_NO_RANGE
			if
			:: d >= c_dlo ->
#else
			if
			:: d >= c_dlo && d <= c_dhi ->
#endif
				if
				:: d >= c_ddue -> ret = 1; goto wind; back1: skip
				:: else -> skip
				fi;
				d_step { v = CF(d); printf("slow path line, counter %d, slot %d seq %d\n", c, ls, lq) };
				goto read_end
			:: else ->
				/* expired, or the counter went backwards */
				ret = 2; goto wind; back2:
				if
				:: did -> goto next_pass
				:: else -> skip
				fi
			fi
		:: else -> skip
		fi;
		kernel_value(ok);
		if
		:: ok -> d_step { v = val; printf("kernel_value k %d C %d bound %d kind %d slot %d seq %d\n", k, C, c_bound, c_kind, ls, lq) }; goto read_end
		:: else -> skip
		fi;
next_pass:	pass++;
		r_retries[me]++
	od;
	/* records changed under us every time: phi of the last one */
	tick(k);
	if
	:: have -> C = (c_kind == K_LINE -> CF(c_dhi) : c_ceil); phi(v, k, C, c_bound)
	:: else -> v = k
	fi;
read_end:
	skip
}

proctype reader(byte me)
{
	WRITER_LOCALS;
#ifdef DAEMON
	bool may_die = false;
#else
	/* local mode: the last reader may freeze for good in a windup,
	 * holding the lock (a thread stopped by fork, or killed) */
	bool may_die = (me == WINDERS - 1);
#endif
	byte ls, lq, g, t, pass, ftag, c_kind, c_lo, c_hi, n, ret, bs, bq;
	short c_anchor, c_dlo, c_ddue, c_base, c_dhi, c_ceil, c_guard, c_bound, c_due;
	short c, d, k, C, val, v, t0;
	bool torn, have, did, early;
	do
	:: n < (me == 0 -> NREADS : 1) ->
		n++;
		d_step { r_phase[me] = READING; r_floor[me] = hb_max; r_retries[me] = 0; r_q0[me] = cseq; t0 = now };
		fine_read();
		/* G1-like: within EPS of the kernel's clock around the read */
		assert(v >= t0 - EPS && v <= now + EPS);
		printf("now %d: reader %d returns %d (started at %d, floor %d)\n", now, me, v, t0, r_floor[me]);
		d_step {
			r_val[me] = v; r_phase[me] = DONE; hb_max = (v > hb_max -> v : hb_max); r_retries[me] = 0; r_q0[me] = 0;
			/* forget the scratch values (fewer distinct states) */
			ls = 0; lq = 0; g = 0; t = 0; pass = 0; ftag = 0; c_kind = 0; c_lo = 0; c_hi = 0; ret = 0;
			c_anchor = 0; c_dlo = 0; c_ddue = 0; c_base = 0; c_dhi = 0; c_ceil = 0; c_guard = 0;
			c_bound = 0; c_due = 0; c = 0; d = 0; k = 0; C = 0; val = 0; v = 0; t0 = 0; torn = false;
			have = false; did = false
		}
	:: n >= (me == 0 -> NREADS : 1) -> break
	od;
	goto end_dead;

	/* th__windup_try as a subroutine (one copy of the writer's code per
	 * reader), returning to back<ret> */
wind:
	windup_try(did);
	if
	:: ret == 1 -> goto back1
	:: ret == 2 -> goto back2
#ifndef DAEMON
	:: ret == 3 -> goto back3
#endif
	fi;
end_dead:
	false
}

init
{
	/* attach: a KERNEL record due at once */
	d_step {
		ring[0].gen = 1; ring[0].kind = K_KERNEL; ring[0].dhi = -1; ring[0].due = now;
		ring[0].tagA = 1; ring[0].tagB = 1; ring[0].tagC = 1
	}
	atomic {
#ifdef DAEMON
		run publisher();
#endif
		byte i;
		for (i : 0 .. NR - 1) {
			run reader(i)
		}
	}
}
