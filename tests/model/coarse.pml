/*
 * Spin model of the coarse block (struct th_coarse_block in
 * src/core/record.h): its writer publish_coarse (src/core/record.c, after
 * every commit) and its reader th__coarse_blk (src/attach/proc.h), with the
 * coarse slow path (th__coarse_slow, src/attach/slow.c) abstracted.
 *
 * The record protocol itself (ring, generations, windup) is checked by
 * timehands.pml; here a record is what its sequence names: ghost arrays
 * indexed by the sequence give each committed record's coarse value, its
 * tick and whether it is a counter line, and `cur` is the sequence alone.
 *
 * Modelled, step by step as in the code:
 *   - writers, one at a time (the windup lock, or the daemon): sample the
 *     clock, commit a record (a counter line or a kernel-mode record, either
 *     way), then copy its coarse values into the block: the count made odd
 *     from whatever it was, the fields one at a time, the count made even.
 *     A writer may stop for good at any of those steps (a thread frozen by
 *     fork() in the parent's copy of memory, a daemon killed); the next one
 *     carries on from what is in memory, as a fork child's re-attached writer
 *     does, up to DEATHS times in a run;
 *   - readers: the fast path loads `cur`, the kernel's coarse clock, the
 *     count, then each field with its check (the block is the record `cur`
 *     names, is fresh, is not below the coarse floor), then the count again;
 *     anything unusual goes to the slow path;
 *   - the slow path: the current record's coarse value (at least the floor)
 *     while that record is a fresh line, else a fine reading (the clock now)
 *     that raises the floor; a fine reading is at least every coarse value
 *     committed before it, and it is what a later, older-sampled record must
 *     not undercut (the reason for the floor).
 *
 * Time is abstract: `now` is the kernel's clock (fine and coarse alike); a
 * record's coarse value and tick are the clock at its writer's sample, so
 * the records' coarse values never decrease along the sequence.
 *
 * Checked (assertions, in one exhaustive search):
 *   - no torn copy: every field a fast read accepts comes from one write of
 *     the block (each field carries the id of the write that stored it);
 *   - a fast read returns the coarse value of exactly the record `cur` named
 *     when it began, a counter line whose tick is less than FRESH behind a
 *     kernel coarse reading taken during the read (G5, no stale values);
 *   - coarse readings never step back: a read returns at least the largest
 *     value of every read that completed before it began (G2, across
 *     threads and between the fast and the slow path).
 *
 * Sequentially consistent, like timehands.pml: the orders the fences give on
 * hardware are argued next to them in the code.
 *
 * -DUSER_ONLY drops the assertion that names the record (a ghost check),
 * leaving what a caller can see: no torn copy, G2 and the lag. Every break
 * below still fails then.
 *
 * Deliberate breaks (each makes tests/tiers/model.sh's coarse check fail;
 * results in doc/mutations.md, section Model):
 *   -DBREAK_CB_NO_RSEQ     accept a block of another record than `cur`'s
 *   -DBREAK_CB_NO_RECHECK  no second load of the count
 *   -DBREAK_CB_PLUS_ONE    the writer makes the count odd as count + 1
 *                          instead of count | 1 (wrong after a writer that
 *                          stopped with the count odd)
 *   -DBREAK_CB_NO_FLOOR    no comparison with the coarse floor
 *   -DBREAK_CB_NO_TICK     no freshness check
 */

#ifndef NR
#define NR 2            /* readers */
#endif
#ifndef NREADS
#define NREADS 2        /* reads per reader */
#endif
#ifndef NWINDUPS
#define NWINDUPS 3      /* records the writers commit in all */
#endif
#ifndef DEATHS
#define DEATHS 2        /* writers that stop for good mid-way */
#endif
#define FRESH 2         /* a block tick this far behind the kernel's is stale */
#define T0 (FRESH + 1)  /* the clock at the start: tick 0 (no coarse values) is stale */
#ifndef MAXT
#define MAXT (T0 + 3)   /* time horizon */
#endif
#define NQ (NWINDUPS + 2)

byte now = T0;
byte cur = 1;                 /* the sequence `cur` names */
byte rec_coarse[NQ], rec_tick[NQ];
bool rec_line[NQ];            /* ghost: the committed records, by sequence */

/* the block; t_*: ghost id of the write that stored each field */
byte b_seq, b_rseq, b_tick, b_coarse, b_val;
byte t_rseq, t_tick, t_coarse, t_val;
byte wid;                     /* ghost: id of the last block write */
byte floor;                   /* th__P.coarse_floor */
byte deaths;
byte hb_max;                  /* ghost: largest result of a completed read */

inline tick(x)
{
	atomic {
		if
		:: now < MAXT -> now++
		:: true -> skip
		fi;
		x = now
	}
}

/* A writer step: the writer may stop here for good; the next one goes on. */
inline wstep()
{
	if
	:: deaths < DEATHS -> deaths++; printf("writer stops\n"); goto next_writer
	:: true -> skip
	fi
}

proctype writers()
{
	byte n, s, q, odd;
	bool line;
	do
	:: n >= NWINDUPS -> break
	:: n < NWINDUPS ->
		n++;
		/* sample */
		tick(s);
		if
		:: line = true
		:: line = false
		fi;
		/* the record, complete before `cur` names it (timehands.pml) */
		d_step { q = cur + 1; rec_coarse[q] = s; rec_tick[q] = s; rec_line[q] = line };
		wstep();
		/* commit */
		cur = q;
		printf("commit seq %d coarse %d line %d\n", q, s, line);
		/* publish_coarse */
		wstep();
#ifdef BREAK_CB_PLUS_ONE
		odd = b_seq + 1;
#else
		odd = b_seq | 1;
#endif
		b_seq = odd;
		wstep();
		d_step { wid++; b_rseq = q; t_rseq = wid };
		wstep();
		d_step { b_tick = (line -> s : 0); t_tick = wid };
		wstep();
		d_step { b_coarse = s; t_coarse = wid };
		wstep();
		d_step { b_val = s; t_val = wid };
		wstep();
		b_seq = odd + 1;
next_writer:
		skip;
		d_step { s = 0; q = 0; odd = 0; line = false }
	od
}

proctype reader(byte me)
{
	byte n, t0, r_floor, lc, fresh, s, tag, v, k, q, cf;
	bool torn, out;
	do
	:: n >= NREADS -> break
	:: n < NREADS ->
		n++;
		d_step { r_floor = hb_max; t0 = now };
		/* th__coarse_ts: cur, then the kernel's coarse clock */
		lc = cur;
		tick(fresh);
		/* th__coarse_blk: each field loaded and compared in one step
		 * (the comparison is local); `out` sends the read to the slow
		 * path */
		s = b_seq;
		d_step { tag = t_rseq; out = b_rseq != lc };
#ifndef BREAK_CB_NO_RSEQ
		if
		:: out -> goto slow
		:: else -> skip
		fi;
#endif
		d_step { torn = t_tick != tag; out = fresh - b_tick >= FRESH };
#ifndef BREAK_CB_NO_TICK
		if
		:: out -> goto slow
		:: else -> skip
		fi;
#endif
		d_step { torn = torn || t_coarse != tag; out = floor > b_coarse };
#ifndef BREAK_CB_NO_FLOOR
		if
		:: out -> goto slow
		:: else -> skip
		fi;
#endif
		d_step { torn = torn || t_val != tag; v = b_val; out = false };
#ifndef BREAK_CB_NO_RECHECK
		if
		:: b_seq != (s & 254) -> goto slow
		:: else -> skip
		fi;
#endif
		assert(!torn);
		/* the record `cur` named, a fresh counter line */
#ifndef USER_ONLY
		assert(rec_line[lc] && v == rec_coarse[lc] && fresh - rec_tick[lc] < FRESH);
#endif
		printf("reader %d: fast %d (seq %d)\n", me, v, lc);
		goto done;
slow:		skip;
		/* th__coarse_slow: the floor, then the current record */
		d_step { s = 0; tag = 0; torn = false; out = false; v = 0; cf = floor };
		tick(k);
		q = cur;
		if
		:: rec_line[q] && k - rec_tick[q] < FRESH ->
			v = (rec_coarse[q] > cf -> rec_coarse[q] : cf);
			printf("reader %d: slow %d (seq %d)\n", me, v, q)
		:: else ->
			/* a fine reading, then raise_coarse_floor */
			tick(v);
			atomic { if
				 :: floor < v -> floor = v
				 :: else -> skip
				 fi };
			printf("reader %d: fine %d\n", me, v)
		fi;
done:
		/* G2 across reads, and never below the kernel at the start by
		 * more than a stale tick */
		assert(v >= r_floor);
		assert(v + FRESH > t0);
		d_step {
			hb_max = (v > hb_max -> v : hb_max);
			t0 = 0; r_floor = 0; lc = 0; fresh = 0; s = 0; tag = 0; v = 0; k = 0; q = 0;
			cf = 0; torn = false; out = false
		}
	od
}

init
{
	/* attach: a kernel-mode record, no coarse values in the block */
	atomic {
		rec_coarse[1] = now; rec_tick[1] = now; rec_line[1] = false;
		run writers();
		byte i;
		for (i : 0 .. NR - 1) {
			run reader(i)
		}
	}
}
