/* Writer side of the publication protocol; see record.h. */
#include "record.h"

uint64_t th_rec_tie;

void th_snap_to_val(const struct th_snap *s, struct th_snap *v)
{
	*v = *s;
	v->gen = 0;
	v->cur = 0;
	/* not in the record (th_snapshot leaves it as it was): a copy
	 * dates no step unless its caller sets it */
	v->from = 0;
}

/* v ns as whole seconds (rounded down) and ns in [0, 1e9). */
static int64_t sec_of(int64_t v, int64_t *nsec)
{
	int64_t sec = v / 1000000000LL, n = v % 1000000000LL;
	if (n < 0) {
		n += 1000000000LL;
		sec--;
	}
	*nsec = n;
	return sec;
}

static void split(int64_t v, uint32_t frac, struct th_ts *out)
{
	int64_t nsec, sec = sec_of(v, &nsec);
	atomic_store_explicit(&out->sec, sec, memory_order_relaxed);
	atomic_store_explicit(&out->nsec_q32, (int64_t)(((uint64_t)nsec << 32) | frac), memory_order_relaxed);
}

static void write_record(struct th_rec *r, uint32_t gen, const struct th_snap *v)
{
	TH_STEP("write_gen0");
	atomic_store_explicit(&r->gen, 0, memory_order_relaxed);
	/* Orders gen = 0 before every field store below; pairs with the
	 * reader's acquire fence before its gen re-check, so a reader whose
	 * copy saw any new field also sees gen change. */
	atomic_thread_fence(memory_order_release);
	TH_STEP("write_fields");
	atomic_store_explicit(&r->kind, v->kind, memory_order_relaxed);
	atomic_store_explicit(&r->epoch, v->epoch, memory_order_relaxed);
	atomic_store_explicit(&r->anchor, v->anchor, memory_order_relaxed);
	atomic_store_explicit(&r->dlo, v->dlo, memory_order_relaxed);
	atomic_store_explicit(&r->ddue, v->ddue, memory_order_relaxed);
	atomic_store_explicit(&r->mono_ns, v->ns[TH_MONO], memory_order_relaxed);
	atomic_store_explicit(&r->mono_lo, v->lo[TH_MONO], memory_order_relaxed);
	atomic_store_explicit(&r->mono_hi, v->hi[TH_MONO], memory_order_relaxed);
	atomic_store_explicit(&r->mono_frac, v->frac[TH_MONO], memory_order_relaxed);
	atomic_store_explicit(&r->raw_frac, v->frac[TH_RAW], memory_order_relaxed);
	atomic_store_explicit(&r->off_real, v->off_real, memory_order_relaxed);
	atomic_store_explicit(&r->off_boot, v->off_boot, memory_order_relaxed);
	atomic_store_explicit(&r->off_tai, v->off_tai, memory_order_relaxed);
	atomic_store_explicit(&r->dhi, v->dhi, memory_order_relaxed);
	atomic_store_explicit(&r->dmin, v->dmin, memory_order_relaxed);
	atomic_store_explicit(&r->raw_ns, v->ns[TH_RAW], memory_order_relaxed);
	atomic_store_explicit(&r->raw_lo, v->lo[TH_RAW], memory_order_relaxed);
	atomic_store_explicit(&r->raw_hi, v->hi[TH_RAW], memory_order_relaxed);
	atomic_store_explicit(&r->coarse, v->coarse, memory_order_relaxed);
	atomic_store_explicit(&r->tick, v->tick, memory_order_relaxed);
	for (int l = 0; l < TH_NLINES; l++) {
		atomic_store_explicit(&r->ceil[l], v->ceil[l], memory_order_relaxed);
		atomic_store_explicit(&r->guard[l], v->guard[l], memory_order_relaxed);
		atomic_store_explicit(&r->bound[l], v->bound[l], memory_order_relaxed);
	}
	atomic_store_explicit(&r->due_ns, v->due_ns, memory_order_relaxed);
	/* A kernel's line keeps its own kseq; any other record (also a copy
	 * of an earlier tied one) is tied to th_rec_tie's update, if any: a
	 * line so that its readers see the kernel move on, a kernel-mode or
	 * TRANSIT record so that its readers (all on the slow path) serve
	 * REALTIME and TAI with the kernel's offset of now. */
	int own = v->kseq == 0 || (v->flags & TH_RECF_TIED);
	int tie = own && th_rec_tie != 0 && v->kind != TH_REC_EMPTY;
	atomic_store_explicit(&r->flags, (v->flags & ~(uint64_t)TH_RECF_TIED) | (tie ? TH_RECF_TIED : 0),
			      memory_order_relaxed);
	atomic_store_explicit(&r->kseq, tie ? th_rec_tie : own ? 0 : v->kseq, memory_order_relaxed);
	/* The anchor of each clock as (sec, nsec); the fractional ns are
	 * shared by all clocks of a line. */
	int64_t mono = (int64_t)v->ns[TH_MONO];
	uint32_t f = v->frac[TH_MONO];
	split(mono, f, &r->at[TH_CK_MONO]);
	split(mono + v->off_real, f, &r->at[TH_CK_REAL]);
	split(mono + v->off_boot, f, &r->at[TH_CK_BOOT]);
	split(mono + v->off_tai, f, &r->at[TH_CK_TAI]);
	split((int64_t)v->ns[TH_RAW], v->frac[TH_RAW], &r->at[TH_CK_RAW]);
	split((int64_t)v->coarse, 0, &r->coarse_at[0]);
	split((int64_t)v->coarse + v->off_real, 0, &r->coarse_at[1]);
	TH_STEP("write_gen");
	/* Release: every field store above is visible to a reader whose
	 * acquire load of gen returns this value. */
	atomic_store_explicit(&r->gen, gen, memory_order_release);
}

/*
 * The coarse block after the commit of `v` as sequence `rseq` (record.h).
 * One writer at a time
 * (the windup lock, or the daemon); the count is made odd from whatever it
 * was, so that a copy cut short (a fork child, a daemon killed in the middle)
 * is repaired by the next one.
 */
static void publish_coarse(struct th_timeline *tl, uint32_t rseq, const struct th_snap *v)
{
	struct th_coarse_block *b = &tl->cb;
	uint32_t odd = atomic_load_explicit(&b->seq, memory_order_relaxed) | 1u;
	TH_STEP("coarse_block");
	atomic_store_explicit(&b->seq, odd, memory_order_relaxed);
	/* Orders the odd count before the field stores; pairs with the
	 * reader's acquire fence before its re-load of the count, so that a
	 * reader whose copy saw any new field sees the count changed. */
	atomic_thread_fence(memory_order_release);
	int line = v->kind == TH_REC_LINE && v->dlo != v->ddue;
	atomic_store_explicit(&b->rseq, rseq, memory_order_relaxed);
	atomic_store_explicit(&b->tick, line ? v->tick : 0, memory_order_relaxed);
	atomic_store_explicit(&b->coarse, v->coarse, memory_order_relaxed);
	int64_t mn, rn, ms = sec_of((int64_t)v->coarse, &mn), rs = sec_of((int64_t)v->coarse + v->off_real, &rn);
	atomic_store_explicit(&b->sec[0], ms, memory_order_relaxed);
	atomic_store_explicit(&b->nsec[0], mn, memory_order_relaxed);
	atomic_store_explicit(&b->sec[1], rs, memory_order_relaxed);
	atomic_store_explicit(&b->nsec[1], rn, memory_order_relaxed);
	/* Release: the fields above are visible to a reader whose acquire
	 * load of the count returns this even value. */
	atomic_store_explicit(&b->seq, odd + 1, memory_order_release);
}

const struct th_snap *th_snap_cut(const struct th_snap *v, struct th_snap *out)
{
	if (!v->from || v->kind != TH_REC_LINE || v->dlo == v->ddue || th_snap_kline(v))
		return v;
	int64_t e = (int64_t)(v->from - v->anchor);
	if (e <= v->dlo)
		return v;
	*out = *v;
	if (e >= v->dhi) {
		/* Nothing of the window is the step's: a kernel-mode record,
		 * due at once, that carries the line's end forward as its
		 * ceiling, so that no record after it starts lower. */
		out->kind = TH_REC_KERNEL;
		for (int l = 0; l < TH_NLINES; l++) {
			out->ceil[l] = th_snap_ceiling(v, l);
			out->guard[l] = 0;
		}
		out->due_ns = 1;
		out->dlo = out->ddue = out->dmin = 0;
		out->dhi = -1;
		return out;
	}
	if (e <= 0) {
		out->dlo = e;
		if (out->dmin < e)
			out->dmin = e;
		return out;
	}
	for (int l = 0; l < TH_NLINES; l++) {
		th_line_at(v->ns[l], v->frac[l], v->hi[l], e, &out->ns[l], &out->frac[l]);
		out->lo[l] = v->hi[l];
	}
	out->anchor = v->from;
	out->dlo = out->dmin = 0;
	out->ddue = v->ddue - e > 0 ? v->ddue - e : 1;
	out->dhi = v->dhi - e;
	return out;
}

static uint32_t gen_for(uint32_t seq)
{
	return TH_GEN_FOR(seq);
}

int th_recommit(struct th_timeline *tl, uint64_t expect, const struct th_snap *v)
{
	unsigned slot = (TH_CUR_SLOT(expect) + 1) % TH_RING;
	uint32_t seq = th_abi_seq_next(TH_CUR_SEQ(expect));
	TH_STEP("commit");
	/* Release: the record written into the slot after `expect`'s is
	 * visible to any reader whose acquire load of cur sees the new word.
	 * Fails, leaving that record unused, if a slow-path reader announced
	 * itself or another commit happened since `expect` was read. */
	if (!atomic_compare_exchange_strong_explicit(&tl->cur, &expect, TH_CUR_MAKE(seq, slot, expect),
						     memory_order_release, memory_order_relaxed))
		return -1;
	publish_coarse(tl, seq, v);
	return 0;
}

int th_commit(struct th_timeline *tl, uint64_t expect, const struct th_snap *v)
{
	uint32_t seq = th_abi_seq_next(TH_CUR_SEQ(expect));
	struct th_snap cut;
	const struct th_snap *w = th_snap_cut(v, &cut);
	write_record(&tl->ring[(TH_CUR_SLOT(expect) + 1) % TH_RING], gen_for(seq), w);
	return th_recommit(tl, expect, w);
}

uint64_t th_commit_force(struct th_timeline *tl, const struct th_snap *v)
{
	uint64_t x = atomic_load_explicit(&tl->cur, memory_order_relaxed);
	unsigned slot = (TH_CUR_SLOT(x) + 1) % TH_RING;
	uint32_t seq = th_abi_seq_next(TH_CUR_SEQ(x));
	struct th_snap cut;
	const struct th_snap *w = th_snap_cut(v, &cut);
	write_record(&tl->ring[slot], gen_for(seq), w);
	TH_STEP("commit");
	uint64_t nw;
	/* Only announcements can change `cur` under the single writer; they
	 * touch the announce bits alone, so the slot chosen above stays right.
	 * Release as in th_commit. */
	do {
		nw = TH_CUR_MAKE(seq, slot, x);
	} while (!atomic_compare_exchange_weak_explicit(&tl->cur, &x, nw, memory_order_release,
							memory_order_relaxed));
	publish_coarse(tl, seq, w);
	return nw;
}
