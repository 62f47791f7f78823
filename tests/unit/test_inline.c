/*
 * The header's inline fine read (timehands.h, th__fine_rec) against the
 * library's records: the same value as the record's line where it reads, and
 * the library call wherever the library's own fast read would not serve
 * (record being written or superseded, kernel-mode record, counter outside
 * the window, a G3 floor to raise), and the daemon's page, which is the
 * library's to read. Then, on the real
 * machine, inline readings sandwiched between library readings.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdatomic.h>
#include <string.h>

#include "check.h"
#include "record.h"
#include "timehands.h"

#ifndef TH__FINE_INLINE
int main(void)
{
	printf("test_inline: no inline fine reads on this architecture\n");
	return 77;
}
#else

static struct th_timeline tl __attribute__((aligned(64)));
static uint64_t fake_c;
static long fake_reads; /* counter reads the inline read made */

static uint64_t fake_ctr(void)
{
	fake_reads++;
	return fake_c;
}



static const int line_of[5] = {TH_MONO, TH_MONO, TH_MONO, TH_MONO, TH_RAW};

static int64_t offset_of(const struct th_snap *s, int ck)
{
	switch (ck) {
	case 1: return s->off_real;
	case 2: return s->off_boot;
	case 3: return s->off_tai;
	default: return 0;
	}
}

static int short_windows;

/* A LINE record with random slopes, fractions, offsets and window. */
static void make_line(struct th_snap *v)
{
	memset(v, 0, sizeof *v);
	v->kind = TH_REC_LINE;
	v->epoch = (uint16_t)(rnd() % 5);
	v->anchor = rnd() >> 1;
	for (int l = 0; l < TH_NLINES; l++) {
		v->ns[l] = 1000000000ULL * (1 + rnd() % 100000) + rnd() % 1000000000ULL;
		v->frac[l] = (uint32_t)rnd();
		int64_t rate = ((int64_t)1 << 31) + (int64_t)(rnd() % 2000000) - 1000000; /* ~0.5 ns a count */
		v->lo[l] = rate - (int64_t)(rnd() % 1000);
		v->hi[l] = rate + (int64_t)(rnd() % 1000);
		v->bound[l] = 1000;
	}
	v->off_real = (int64_t)(1700000000ULL * 1000000000ULL + rnd() % 1000000000000ULL);
	v->off_boot = (int64_t)(rnd() % 100000000000ULL);
	v->off_tai = v->off_real + 37000000000LL;
	v->dmin = v->dlo = -(int64_t)(rnd() % 100000);
	v->ddue = 1 + (int64_t)(rnd() % 8000000);
	/* test_values: now and then a window that ends at or below the anchor
	 * (a leave makes one: a windup is due from there on) */
	if (short_windows && rnd() % 6 == 0)
		v->ddue = v->dlo + (int64_t)(rnd() % (uint64_t)(1 - v->dlo));
	v->dhi = v->ddue + (int64_t)(rnd() % 8000000);
	v->coarse = v->ns[TH_MONO];
}

static struct th_timeline ptl __attribute__((aligned(64))); /* a daemon's page */

static int read_rec(int ck, const uint64_t *g3, int64_t *ns)
{
	struct th__fine_ctx x = {(const struct th_abi_timeline *)(const void *)&tl, g3, &th__kcount_none, 1, 0};
	int64_t sec = 0, n = 0;
	int ok = th__fine_rec(x.tl, &x, ck, 1, 2, fake_ctr, &sec, &n);
	if (ok) {
		CHECK(n >= 0 && n < 1000000000, "nsec %lld out of range", (long long)n);
		*ns = sec * 1000000000LL + n;
	}
	return ok;
}

/* The generation is the sequence's complement (th_abi_gen_for): the zero
 * timeline before its first commit names nothing a reader takes, and the
 * sequence wraps past the value whose generation would be 0, a record
 * being written. */
static void test_sequences(void)
{
	uint64_t g3 = 0;
	int64_t ns;
	for (int ck = 0; ck < 5; ck++) {
		fake_c = (uint64_t)ck * 12345;
		CHECK(read_rec(ck, &g3, &ns) == 0, "the zero timeline was read (clock %d)", ck);
	}
	struct th_snap v;
	make_line(&v);
	atomic_store(&tl.cur, TH_CUR_MAKE(0xfffffffeu, 3, 0));
	for (int i = 0; i < 3; i++) {
		uint64_t w = th_commit_force(&tl, &v);
		CHECK(TH_CUR_SEQ(w) == (uint32_t)i, "sequence %u after the wrap (commit %d)", TH_CUR_SEQ(w), i);
		struct th_snap s;
		unsigned r = 0;
		CHECK(th_snapshot(&tl, &s, &r) == 0, "snapshot after the wrap (commit %d)", i);
		fake_c = s.anchor + 10;
		CHECK(read_rec(0, &g3, &ns) == 1, "no read after the wrap (commit %d)", i);
		struct th_rec *rec = &tl.ring[TH_CUR_SLOT(w) % TH_RING];
		uint32_t gen = atomic_load(&rec->gen);
		atomic_store(&rec->gen, 0);
		CHECK(read_rec(0, &g3, &ns) == 0, "a record being written was read after the wrap (commit %d)", i);
		atomic_store(&rec->gen, gen);
	}
}

static void test_values(void)
{
	uint64_t g3 = ~(uint64_t)0; /* a floor never below a reading: no G3 raise */
	long fast = 0, calls = 0;
	short_windows = 1;
	for (int rec = 0; rec < 300; rec++) {
		struct th_snap v;
		make_line(&v);
		th_commit_force(&tl, &v);
		struct th_snap s;
		unsigned r = 0;
		CHECK(th_snapshot(&tl, &s, &r) == 0, "snapshot");
		for (int i = 0; i < 200; i++) {
			int64_t d;
			switch (i % 4) {
			case 0: d = s.dlo + (int64_t)(rnd() % (uint64_t)(s.ddue - s.dlo + 1)); break;
			case 1: d = s.dlo - 1 - (int64_t)(rnd() % 1000); break;
			case 2: d = s.ddue + (int64_t)(rnd() % 1000); break;
			default: d = (int64_t)(rnd() % 3) - 1 + (i & 1 ? s.dlo : s.ddue - 1); break;
			}
			fake_c = s.anchor + (uint64_t)d;
			int ck = (int)(rnd() % 5);
			int64_t got = 0;
			int ok = read_rec(ck, &g3, &got);
			int want = d >= s.dlo && d < s.ddue;
			CHECK(ok == want, "record %d d %lld (window [%lld, %lld)): inline %s", rec, (long long)d,
			      (long long)s.dlo, (long long)s.ddue, ok ? "read" : "called the library");
			if (ok && want) {
				int64_t ref = (int64_t)th_line_eval(&s, line_of[ck], d) + offset_of(&s, ck);
				CHECK(got == ref, "record %d clock %d d %lld: inline %lld, line %lld", rec, ck,
				      (long long)d, (long long)got, (long long)ref);
				fast++;
			} else {
				calls++;
			}
		}
	}
	short_windows = 0;
	CHECK(fast > 10000 && calls > 10000, "fast %ld, library %ld", fast, calls);
	printf("  values: %ld inline readings equal the record's line, %ld outside the window go to the library\n",
	       fast, calls);
}

static void test_refusals(void)
{
	uint64_t g3 = 0;
	struct th_snap v;
	make_line(&v);
	uint64_t w = th_commit_force(&tl, &v);
	struct th_snap s;
	unsigned r = 0;
	th_snapshot(&tl, &s, &r);
	fake_c = s.anchor + 10;
	int64_t ns;
	CHECK(read_rec(0, &g3, &ns) == 1, "a plain read");

	/* cur names a later sequence than the slot holds: superseded */
	atomic_store(&tl.cur, TH_CUR_MAKE(TH_CUR_SEQ(w) + 1, TH_CUR_SLOT(w), 0));
	CHECK(read_rec(0, &g3, &ns) == 0, "a record rewritten since cur named it was read");
	atomic_store(&tl.cur, w);

	/* being written */
	struct th_rec *rec = &tl.ring[TH_CUR_SLOT(w) % TH_RING];
	uint32_t gen = atomic_load(&rec->gen);
	atomic_store(&rec->gen, 0);
	CHECK(read_rec(0, &g3, &ns) == 0, "a record being written was read");
	atomic_store(&rec->gen, gen);
	CHECK(read_rec(0, &g3, &ns) == 1, "restored");

	/* a kernel-mode record: empty window, whatever the counter (a process
	 * whose counter may not be read never reaches here: th__fine_fill
	 * caches no timeline for it, test_modes prtsc) */
	struct th_snap k;
	memset(&k, 0, sizeof k);
	k.kind = TH_REC_KERNEL;
	k.dhi = -1;
	th_commit_force(&tl, &k);
	for (int ck = 0; ck < 5; ck++)
		CHECK(read_rec(ck, &g3, &ns) == 0, "a kernel-mode record was read (clock %d)", ck);

	/* G3: REALTIME is read inline only if its second is not above the
	 * floor of its epoch (else the library raises the floor) */
	w = th_commit_force(&tl, &v);
	th_snapshot(&tl, &s, &r);
	fake_c = s.anchor + 10;
	int64_t real = (int64_t)th_line_eval(&s, TH_MONO, 10) + s.off_real, sec = real / 1000000000LL;
	uint64_t ep = s.epoch;
	g3 = (ep << 48) | (uint64_t)sec;
	CHECK(read_rec(1, &g3, &ns) == 1 && ns == real, "REALTIME at the floor's second");
	g3 = (ep << 48) | (uint64_t)(sec - 1);
	CHECK(read_rec(1, &g3, &ns) == 0, "REALTIME above the floor was read inline (floor not raised)");
	CHECK(read_rec(0, &g3, &ns) == 1, "MONOTONIC has no G3 floor");
	g3 = ((ep + 1) << 48);
	CHECK(read_rec(1, &g3, &ns) == 1, "a floor of a later epoch");
	CHECK(read_rec(1, NULL, &ns) == 0, "REALTIME without the floor's address");

	/* G3 across a second: REALTIME 1 us before a second boundary at the
	 * anchor; a reading 2 us later carries into the next second, which
	 * a floor at the anchor's second does not cover. */
	struct th_snap c2 = v;
	int64_t at = (int64_t)c2.ns[TH_MONO] + c2.off_real;
	c2.off_real += 999999000 - at % 1000000000LL;
	c2.off_tai = c2.off_real + 37000000000LL;
	c2.ddue = 8000000;
	c2.dhi = 16000000;
	th_commit_force(&tl, &c2);
	th_snapshot(&tl, &s, &r);
	int64_t d_late = (int64_t)(2000.0 * 4294967296.0 / (double)s.hi[TH_MONO]); /* 2 us */
	int64_t r0 = (int64_t)th_line_eval(&s, TH_MONO, 10) + s.off_real;
	int64_t r1 = (int64_t)th_line_eval(&s, TH_MONO, d_late) + s.off_real;
	CHECK(r1 / 1000000000LL == r0 / 1000000000LL + 1, "the test line does not cross a second");
	ep = s.epoch;
	g3 = (ep << 48) | (uint64_t)(r0 / 1000000000LL);
	fake_c = s.anchor + 10;
	CHECK(read_rec(1, &g3, &ns) == 1 && ns == r0, "REALTIME at the floor's second, before the boundary");
	fake_c = s.anchor + (uint64_t)d_late;
	CHECK(read_rec(1, &g3, &ns) == 0, "a REALTIME reading carried past the floor's second was read inline");
	g3 = (ep << 48) | (uint64_t)(r1 / 1000000000LL);
	CHECK(read_rec(1, &g3, &ns) == 1 && ns == r1, "REALTIME carried into the floor's second");
	printf("  refusals: superseded, being written, kernel-mode records, G3 (also across a second): library\n");
}

/* The process's word names the shared slot: the library reads the daemon's
 * page (with its re-checks that the process still reads it), so the inline
 * read refuses every clock there, with a valid page record in its window, and
 * without reading the counter. */
static void test_shared(void)
{
	struct th_snap v;
	make_line(&v);
	th_commit_force(&ptl, &v);
	struct th_snap s;
	unsigned r = 0;
	th_snapshot(&ptl, &s, &r);
	uint64_t lw = TH_CUR_MAKE(1234, 0xff, 0);
	uint64_t before = atomic_load(&tl.cur);
	atomic_store(&tl.cur, lw);
	uint64_t g3 = ~(uint64_t)0;
	long fast = 0;
	fake_reads = 0;
	for (int i = 0; i < 2000; i++) {
		int64_t d = s.dlo + (int64_t)(rnd() % (uint64_t)(s.ddue - s.dlo));
		fake_c = s.anchor + (uint64_t)d;
		int64_t got = 0;
		fast += read_rec(i % 5, &g3, &got);
	}
	CHECK(fast == 0, "%ld of 2000 readings with the word on the shared slot served inline", fast);
	CHECK(fake_reads == 0, "the counter read %ld times for readings the library makes", fake_reads);
	atomic_store(&tl.cur, before);
	printf("  shared slot: 2000 readings left to the library, no counter read for them\n");
}

/* The process's own timeline, read inline between two library readings,
 * with the ordered counter read `op` (the library's th_proc.ctr_early: 1
 * LFENCE;RDTSC, 2 RDTSCP on x86-64, 3 the fence after the word and the
 * counter after the copy) in the library and inline. */
static void test_machine(uint32_t op)
{
	struct timespec a, b, t;
	th_clock_gettime(CLOCK_MONOTONIC, &a); /* attach */
	__atomic_store_n((uint32_t *)(uintptr_t)th__fast()->ctr_early, op, __ATOMIC_RELAXED);
	CHECK(th__fine_cache.ctr_op != 0, "the inline reads' cache not filled after the first call");
	if (th__fine_cache.ctr_op != 4)
		th__fine_cache.ctr_op = op;
	const clockid_t ids[5] = {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME, CLOCK_TAI, CLOCK_MONOTONIC_RAW};
	long inl = 0, total = 0, bad = 0;
	int64_t end = raw_now_ns() + 150000000;
	while (raw_now_ns() < end) {
		for (int ck = 0; ck < 5; ck++) {
			(th_clock_gettime)(ids[ck], &a);
			int64_t sec, n;
			const struct th__fast *f = th__fast();
			struct th__fine_ctx x = {f->tl, f->g3, f->kseq ? f->kseq : &th__kcount_none, *f->ctr_early, 0};
			TH__PRE_FENCE();
			int ok = th__fine_rec(x.tl, &x, ck, 1, op, 0, &sec, &n);
			(th_clock_gettime)(ids[ck], &b);
			total++;
			if (ok) {
				inl++;
				t.tv_sec = (time_t)sec;
				t.tv_nsec = (long)n;
				if (ts_to_ns(&t) < ts_to_ns(&a) || ts_to_ns(&t) > ts_to_ns(&b))
					bad++;
			}
		}
		/* gettimeofday, inline: microseconds of a REALTIME reading */
		(th_clock_gettime)(CLOCK_REALTIME, &a);
		struct timeval tv;
		th_gettimeofday(&tv, NULL);
		(th_clock_gettime)(CLOCK_REALTIME, &b);
		int64_t us = (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
		if (us < ts_to_ns(&a) / 1000 || us > ts_to_ns(&b) / 1000 || tv.tv_usec < 0 || tv.tv_usec >= 1000000)
			bad++;
		/* the macro itself, with a constant id */
		(th_clock_gettime)(CLOCK_MONOTONIC, &a);
		th_clock_gettime(CLOCK_MONOTONIC, &t);
		(th_clock_gettime)(CLOCK_MONOTONIC, &b);
		if (ts_to_ns(&t) < ts_to_ns(&a) || ts_to_ns(&t) > ts_to_ns(&b))
			bad++;
	}
	struct th_status st;
	th_status(&st, sizeof st);
	CHECK(bad == 0, "%ld inline readings outside their library sandwich", bad);
	if (st.mode == TH_MODE_LOCAL)
		CHECK(inl > total / 2, "only %ld of %ld readings inline in local mode", inl, total);
	printf("  machine (mode %u, counter op %u): %ld of %ld readings inline, all inside their library sandwich\n",
	       st.mode, op, inl, total);
	CHECK(th_clock_gettime(CLOCK_MONOTONIC, NULL) == -1, "a NULL timespec");
	CHECK(th_gettimeofday(NULL, NULL) == 0, "gettimeofday without a timeval");
}

/* The process's first timehands call is an inline read, before the library
 * has attached: once the library has attached, the inline reads serve. */
static void test_first_call_inline(void)
{
	struct timespec t;
	CHECK(th_clock_gettime(CLOCK_MONOTONIC, &t) == 0, "first inline read");
	long inl = 0, total = 0;
	for (int i = 0; i < 20000; i++) {
		th_clock_gettime(CLOCK_MONOTONIC, &t);
		int64_t sec, n;
		total++;
		if (th__fine_cache.ctr_op - 1u >= 3u)
			continue; /* a process that may not read the counter first */
		TH__PRE_FENCE();
		if (th__fine_rec(th__fine_cache.tl, &th__fine_cache, 0, 1, th__fine_cache.ctr_op, 0, &sec, &n))
			inl++;
	}
	struct th_status st;
	th_status(&st, sizeof st);
	if (st.mode == TH_MODE_LOCAL)
		CHECK(inl > total / 2, "first call inline: then only %ld of %ld readings inline in local mode", inl,
		      total);
	printf("  first call inline (mode %u): then %ld of %ld readings inline\n", st.mode, inl, total);
}

int main(void)
{
	test_first_call_inline();
	test_sequences();
	test_values();
	test_refusals();
	test_shared();
	/* the op the library chose, then the others: LFENCE;RDTSC and the
	 * fence with the counter after the copy (where LFENCE is serializing:
	 * wherever the library did not choose RDTSCP for want of it, and on
	 * Intel), and RDTSCP where the CPU has it (where the library chose it,
	 * or the late read) */
	uint32_t op = *th__fast()->ctr_early;
	CHECK(op <= 3, "counter op %u", op);
	test_machine(op);
	if (op != 0) {
		test_machine(1);
		test_machine(3);
		if (op >= 2)
			test_machine(2);
		test_machine(op);
	}
	return check_done("test_inline");
}
#endif
