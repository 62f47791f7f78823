/*
 * Records tied to the kernel's updates: the REALTIME offset a reader serves
 * is the one the kernel had in force at the reader's counter.
 *
 * The kernel updates its data page (count + 1, maybe a REALTIME step either
 * way); a writer (a process's windup, or timehandsd's) ties each record it
 * commits to the count it read with the offset (record.h th_rec_tie), cuts
 * the record's window at a counter read after that count
 * (th_writer_tie_from, th_snap_cut), and reties a line the kernel moved on
 * from (windup.c retie: the same line, the next update's offset; cut at its
 * counter after a step, or where more than one update lies between the two
 * ties). Readers take the counter before or after the record's word (an
 * unordered read may run ahead of the load; a page reader takes it first),
 * serve the record's offset only while the kernel's count is still the
 * record's tie and the counter lies in the window, and otherwise take the
 * slow path: the kernel's offset with its count, the counter after it, and
 * the count again (slow.c tied_still) before serving.
 *
 * Abstracted: a record is published whole (the generation protocol is
 * timehands.pml's), the line itself is exact (only offsets are checked),
 * and a fresh record's window reaches arbitrarily far below its sample.
 * Every counter read and every kernel update advances the counter T;
 * offat[t] is the offset in force at counter t.
 *
 * Deliberately broken variants (each must fail; tests/tiers/model.sh):
 *   -DBREAK_NO_CUT        windups cut no window (th_writer_tie_from a no-op)
 *   -DBREAK_RETIE_NO_CUT  a retie across more than one update keeps the
 *                         line's whole window
 *   -DBREAK_UNTIE         a windup whose sampled offset is not the kernel's
 *                         of its count commits it untied (timehandsd before
 *                         th_writer_page_tie)
 *   -DBREAK_NO_RECHECK    the slow path serves the kernel's offset without
 *                         the count's re-check after its counter
 */
#ifndef NUPD
#define NUPD 3
#endif
#ifndef NWIND
#define NWIND 3
#endif
#ifndef NR
#define NR 2
#endif
#ifndef NREADS
#define NREADS 2
#endif
#define MAXT 32
#define UNTIED 255

byte T = 1;
bit offat[MAXT];
byte kcount = 0;
bit koff = 0;
byte ndone = 0;

/* the current record: its tie, REALTIME offset and the lowest counter it
 * serves */
byte rtie = 0;
bit roff = 0;
byte rlo = 0;

/* a counter read: the next counter value, at the offset now in force */
inline ctr(c)
{
	atomic {
		T++;
		offat[T] = koff;
		c = T
	}
}

proctype kernel()
{
	byte n = 0;
	do
	:: n < NUPD ->
		atomic {
			T++;
			if
			:: koff = 1 - koff /* a step, one way or back */
			:: skip           /* a tick, a rate change */
			fi;
			offat[T] = koff;
			kcount++;
			n++
		}
	:: else -> break
	od;
	ndone++
}

inline maxb(a, b, r)
{
	if
	:: a > b -> r = a
	:: else -> r = b
	fi
}

proctype writer()
{
	byte n = 0, kc, c, lo;
	bit ko, so;
	do
	:: n < NWIND ->
		n++;
		if
		:: rtie != UNTIED && rtie != kcount ->
			/* retie: the kernel's offset with its count, the
			 * counter after them */
			atomic { kc = kcount; ko = koff };
			ctr(c);
			if
			:: ko != roff -> maxb(rlo, c, lo) /* a step: from it on */
			:: ko == roff && kc == rtie + 1 -> lo = rlo
			:: ko == roff && kc != rtie + 1 ->
#ifdef BREAK_RETIE_NO_CUT
				lo = rlo
#else
				maxb(rlo, c, lo)
#endif
			fi;
			atomic { rtie = kc; roff = ko; rlo = lo }
		:: true ->
			/* windup: the count and offset, the counter after
			 * them (where the records begin), then the sample,
			 * whose offset may be of a later update */
			atomic { kc = kcount; ko = koff };
			ctr(c);
			so = koff;
#ifdef BREAK_NO_CUT
			c = 0;
#endif
			if
			:: so == ko -> atomic { rtie = kc; roff = ko; rlo = c }
			:: so != ko ->
#ifdef BREAK_UNTIE
				atomic { rtie = UNTIED; roff = so; rlo = c }
#else
				/* th_writer_page_tie: the offset again, exactly,
				 * with its count, cut after it */
				atomic { kc = kcount; ko = koff };
				ctr(c);
#ifdef BREAK_NO_CUT
				c = 0;
#endif
				atomic { rtie = kc; roff = ko; rlo = c }
#endif
			fi
		fi;
		/* no stale locals: fewer states */
		d_step { kc = 0; c = 0; lo = 0; ko = 0; so = 0 }
	:: else -> break
	od;
	ndone++
}

proctype reader()
{
	byte n = 0, c, t, l, kc;
	bit o, ko, first;
	do
	:: n < NREADS ->
		n++;
		if
		:: first = 1; ctr(c) /* the counter before the word */
		:: first = 0
		fi;
		atomic { t = rtie; o = roff; l = rlo };
		if
		:: !first -> ctr(c)
		:: else
		fi;
		if
		:: (t == UNTIED || kcount == t) && c >= l ->
			assert(o == offat[c])
		:: else ->
			/* the slow path: the kernel's offset with its count,
			 * the counter after them, the count again */
			atomic { kc = kcount; ko = koff };
			ctr(c);
#ifdef BREAK_NO_RECHECK
			assert(ko == offat[c])
#else
			if
			:: kcount == kc -> assert(ko == offat[c])
			:: else /* read again */
			fi
#endif
		fi;
		d_step { c = 0; t = 0; l = 0; kc = 0; o = 0; ko = 0; first = 0 }
	:: else -> break
	od;
	ndone++
}

init
{
	byte i = 0;
	atomic {
		run kernel();
		run writer();
		do
		:: i < NR -> run reader(); i++
		:: else -> break
		od
	}
	(ndone == NR + 2);
	assert(T < MAXT)
}
