/* The shared page: layout, publisher helpers, validator; see page.h. Pure. */
#include "page.h"

#include <string.h>

/* ------------------------------------------------------------ reasons */

void th_reason_init(struct th_reason *r, char *buf, size_t size)
{
	r->buf = buf;
	r->size = buf ? size : 0;
	r->len = 0;
	if (r->size)
		r->buf[0] = 0;
}

void th_reason_str(struct th_reason *r, const char *s)
{
	if (!r->size)
		return;
	for (; s && *s && r->len + 1 < r->size; s++)
		r->buf[r->len++] = *s;
	r->buf[r->len] = 0;
}

void th_reason_u64(struct th_reason *r, uint64_t v)
{
	char tmp[24];
	int k = 0;
	do {
		tmp[k++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	char out[24];
	for (int i = 0; i < k; i++)
		out[i] = tmp[k - 1 - i];
	out[k] = 0;
	th_reason_str(r, out);
}

void th_reason_i64(struct th_reason *r, int64_t v)
{
	if (v < 0) {
		th_reason_str(r, "-");
		th_reason_u64(r, (uint64_t)0 - (uint64_t)v);
	} else {
		th_reason_u64(r, (uint64_t)v);
	}
}

void th_reason_hex(struct th_reason *r, uint64_t v)
{
	static const char digits[] = "0123456789abcdef";
	char out[19];
	out[0] = '0';
	out[1] = 'x';
	for (int i = 0; i < 16; i++)
		out[2 + i] = digits[(v >> (60 - 4 * i)) & 15];
	out[18] = 0;
	th_reason_str(r, out);
}

/* ------------------------------------------------------------ publisher */

void th_page_init(void *page, const struct th_page_ident *id)
{
	memset(page, 0, TH_PAGE_SIZE);
	struct th_page_hdr *h = page;
	h->magic = TH_PAGE_MAGIC;
	h->abi = TH_PAGE_ABI;
	h->page_size = TH_PAGE_SIZE;
	h->header_size = TH_PAGE_HDR_SIZE;
	h->timeline_size = (uint32_t)sizeof(struct th_timeline);
	h->ring = TH_RING;
	h->record_size = (uint32_t)sizeof(struct th_rec);
	h->counter_kind = id->counter_kind;
	h->publisher_pid = id->publisher_pid;
	h->nominal_hz = id->nominal_hz;
	h->tick_ns = id->tick_ns;
	memcpy(h->boot_id, id->boot_id, sizeof h->boot_id);
	h->timens_mono_ns = id->timens_mono_ns;
	h->timens_boot_ns = id->timens_boot_ns;
	h->start_ns = id->start_ns;
	if (id->clocksource) {
		size_t n = strlen(id->clocksource);
		if (n >= sizeof h->clocksource)
			n = sizeof h->clocksource - 1;
		memcpy(h->clocksource, id->clocksource, n);
	}
}

int th_page_adopt(struct th_page_hdr *h, const struct th_page_ident *id, char *reason, size_t reason_size)
{
	struct th_reason r;
	th_reason_init(&r, reason, reason_size);
	struct th_page_expect exp;
	memset(&exp, 0, sizeof exp);
	memcpy(exp.boot_id, id->boot_id, sizeof exp.boot_id);
	exp.counter_kind = id->counter_kind;
	exp.have_timens = 1;
	exp.timens_mono_ns = id->timens_mono_ns;
	exp.timens_boot_ns = id->timens_boot_ns;
	char why[160];
	int rc = th_page_validate(h, TH_PAGE_SIZE, &exp, why, sizeof why);
	/* Not VALID is what a clean shutdown leaves: the one refusal that
	 * does not matter here (validation ends with it). */
	if (rc == TH_PAGE_ESTALE && !(atomic_load_explicit(&h->flags, memory_order_relaxed) & TH_PAGE_VALID))
		rc = 0;
	if (rc != 0) {
		th_reason_str(&r, why);
		return rc;
	}
	if (h->counter_kind != id->counter_kind || h->tick_ns != id->tick_ns) {
		/* Readers keep the tick (their staleness limits) and the
		 * counter kind from their attach. */
		th_reason_str(&r, "the page was published with tick ");
		th_reason_u64(&r, h->tick_ns);
		th_reason_str(&r, " ns and counter kind ");
		th_reason_u64(&r, h->counter_kind);
		th_reason_str(&r, ", this publisher has ");
		th_reason_u64(&r, id->tick_ns);
		th_reason_str(&r, " ns and kind ");
		th_reason_u64(&r, id->counter_kind);
		return TH_PAGE_EFORMAT;
	}
	/* The publisher's own fields. Readers read them only at attach, and
	 * nobody attaches before this publisher serves the page; __atomic
	 * stores because readers that attached to the previous publisher may
	 * still look at them (status). */
	__atomic_store_n(&h->publisher_pid, id->publisher_pid, __ATOMIC_RELAXED);
	__atomic_store_n(&h->nominal_hz, id->nominal_hz, __ATOMIC_RELAXED);
	__atomic_store_n(&h->start_ns, id->start_ns, __ATOMIC_RELAXED);
	return 0;
}

void th_page_beat(struct th_page_hdr *h, uint64_t now_mono_ns)
{
	/* Single writer: a plain increment of the counter is enough. */
	uint64_t n = atomic_load_explicit(&h->publishes, memory_order_relaxed);
	atomic_store_explicit(&h->publishes, n + 1, memory_order_relaxed);
	/* Release: the records committed before (th_commit's release CAS
	 * already publishes them through `cur`) are visible to a reader whose
	 * acquire load of the heartbeat returns this value, so "fresh
	 * heartbeat" implies "the record current at that beat is visible".
	 * Pairs with the acquire load in th_page_live. */
	atomic_store_explicit(&h->heartbeat, now_mono_ns, memory_order_release);
}

void th_page_set_flags(struct th_page_hdr *h, uint64_t flags)
{
	/* Release: what was published before a flag change (the first record
	 * before VALID is set; the final kernel record before VALID is
	 * cleared) is visible to a reader that acquires the new flags.
	 * Pairs with the acquire load in th_page_live. */
	atomic_store_explicit(&h->flags, flags, memory_order_release);
}

/* ------------------------------------------------------------ validation */

int th_page_parse_boot_id(const char *text, uint8_t out[16])
{
	int n = 0;
	for (int i = 0; i < 36; i++) {
		char ch = text[i];
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (ch != '-')
				return -1;
			continue;
		}
		int v;
		if (ch >= '0' && ch <= '9')
			v = ch - '0';
		else if (ch >= 'a' && ch <= 'f')
			v = ch - 'a' + 10;
		else if (ch >= 'A' && ch <= 'F')
			v = ch - 'A' + 10;
		else
			return -1;
		if (n % 2 == 0)
			out[n / 2] = (uint8_t)(v << 4);
		else
			out[n / 2] |= (uint8_t)v;
		n++;
	}
	return text[36] == 0 || text[36] == '\n' ? 0 : -1;
}

static int fail(struct th_reason *r, int code, const char *what)
{
	th_reason_str(r, what);
	return code;
}

static int is_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

int th_page_live(const struct th_page_hdr *h, uint64_t now_mono_ns, uint64_t max_age_ns, char *reason,
		 size_t reason_size)
{
	struct th_reason r;
	th_reason_init(&r, reason, reason_size);
	if (h->magic != TH_PAGE_MAGIC)
		return fail(&r, TH_PAGE_EFORMAT, "shared page lost its magic");
	/* Acquire: pairs with th_page_set_flags (release). */
	uint64_t flags = atomic_load_explicit(&h->flags, memory_order_acquire);
	if (!(flags & TH_PAGE_VALID))
		return fail(&r, TH_PAGE_ESTALE, "shared page not valid: timehandsd shut down or not ready");
	/* Acquire: pairs with th_page_beat (release): records committed before
	 * that beat are visible to what this thread reads next. */
	uint64_t hb = atomic_load_explicit(&h->heartbeat, memory_order_acquire);
	if (!max_age_ns)
		max_age_ns = th_page_max_age_ns(h->tick_ns);
	if (hb == 0)
		return fail(&r, TH_PAGE_ESTALE, "shared page has no heartbeat: timehandsd shut down");
	if (hb > now_mono_ns + TH_PAGE_FUTURE_NS) {
		th_reason_str(&r, "shared page heartbeat is ");
		th_reason_u64(&r, (hb - now_mono_ns) / 1000);
		th_reason_str(&r, " us ahead of this process's MONOTONIC: another time namespace?");
		return TH_PAGE_EOTHER;
	}
	if (now_mono_ns > hb && now_mono_ns - hb > max_age_ns) {
		th_reason_str(&r, "shared page heartbeat is ");
		th_reason_u64(&r, (now_mono_ns - hb) / 1000000);
		th_reason_str(&r, " ms old (limit ");
		th_reason_u64(&r, max_age_ns / 1000000);
		th_reason_str(&r, " ms): timehandsd stopped or dead");
		return TH_PAGE_ESTALE;
	}
	return 0;
}

/* Largest |d| * rate a record may serve: the fast path needs |d * rate| <
 * 2^62 in Q32.32, i.e. about 1.07 s; the writer keeps windows under
 * TH_MAX_WINDOW_NS. */
#define MAX_SPAN_Q32 ((__int128)(2 * TH_MAX_WINDOW_NS) << 32)
/* Slopes are ns per count in Q32.32: a counter of at least 1 MHz. */
#define MAX_RATE_Q32 ((int64_t)1000 << 32)

static int check_record(struct th_reason *r, const struct th_snap *s)
{
	switch (s->kind) {
	case TH_REC_LINE:
		if (!(s->dmin <= s->dlo && s->dlo <= 0 && s->dlo <= s->ddue && s->ddue <= s->dhi && s->dhi > 0))
			return fail(r, TH_PAGE_EFORMAT, "current record has an inconsistent window");
		for (int l = 0; l < TH_NLINES; l++) {
			if (s->hi[l] <= 0 || s->hi[l] > MAX_RATE_Q32 || s->lo[l] < 0 || s->lo[l] > MAX_RATE_Q32)
				return fail(r, TH_PAGE_EFORMAT, "current record has an implausible slope");
			if ((__int128)s->dhi * s->hi[l] > MAX_SPAN_Q32 ||
			    (__int128)(-(__int128)s->dmin) * s->lo[l] > MAX_SPAN_Q32)
				return fail(r, TH_PAGE_EFORMAT, "current record's window is longer than a reader can serve");
		}
		break;
	case TH_REC_KERNEL:
	case TH_REC_TRANSIT:
		if (s->dlo != 0 || s->ddue != 0 || s->dhi >= s->dmin)
			return fail(r, TH_PAGE_EFORMAT, "kernel-mode record with a counter window");
		break;
	default:
		th_reason_str(r, "current record has unknown kind ");
		th_reason_u64(r, s->kind);
		return TH_PAGE_EFORMAT;
	}
	for (int l = 0; l < TH_NLINES; l++)
		if (s->bound[l] > 1000000u)
			return fail(r, TH_PAGE_EFORMAT, "current record's error bound exceeds 1 ms");
	return 0;
}

int th_page_validate(const void *map, size_t size, const struct th_page_expect *exp, char *reason,
		     size_t reason_size)
{
	struct th_reason r;
	th_reason_init(&r, reason, reason_size);
	if (!map)
		return fail(&r, TH_PAGE_EFORMAT, "no page");
	if ((uintptr_t)map % 64 != 0)
		return fail(&r, TH_PAGE_EFORMAT, "page is not aligned to a cache line");
	if (size < TH_PAGE_HDR_SIZE) {
		th_reason_str(&r, "page is ");
		th_reason_u64(&r, size);
		th_reason_str(&r, " bytes, smaller than a header");
		return TH_PAGE_EFORMAT;
	}
	const struct th_page_hdr *h = map;
	if (h->magic != TH_PAGE_MAGIC) {
		th_reason_str(&r, "not a timehands page (magic ");
		th_reason_hex(&r, h->magic);
		th_reason_str(&r, ")");
		return TH_PAGE_EFORMAT;
	}
	if (h->abi != TH_PAGE_ABI) {
		th_reason_str(&r, "page ABI ");
		th_reason_u64(&r, h->abi);
		th_reason_str(&r, ", this library reads ABI ");
		th_reason_u64(&r, TH_PAGE_ABI);
		th_reason_str(&r, h->abi > TH_PAGE_ABI ? " (newer timehandsd)" : " (older timehandsd)");
		return TH_PAGE_EFORMAT;
	}
	if (h->page_size != size || size != TH_PAGE_SIZE) {
		th_reason_str(&r, "page is ");
		th_reason_u64(&r, size);
		th_reason_str(&r, " bytes and says ");
		th_reason_u64(&r, h->page_size);
		th_reason_str(&r, "; ABI 1 pages are ");
		th_reason_u64(&r, TH_PAGE_SIZE);
		return TH_PAGE_EFORMAT;
	}
	if (h->header_size != TH_PAGE_HDR_SIZE || h->timeline_size != sizeof(struct th_timeline) ||
	    h->ring != TH_RING || h->record_size != sizeof(struct th_rec))
		return fail(&r, TH_PAGE_EFORMAT, "page layout sizes do not match its ABI");
	if (h->counter_kind > 2) {
		th_reason_str(&r, "page names unknown counter kind ");
		th_reason_u64(&r, h->counter_kind);
		return TH_PAGE_EFORMAT;
	}
	if (exp && h->counter_kind != 0 && h->counter_kind != exp->counter_kind) {
		th_reason_str(&r, "page counts counter kind ");
		th_reason_u64(&r, h->counter_kind);
		th_reason_str(&r, ", this process reads kind ");
		th_reason_u64(&r, exp->counter_kind);
		return TH_PAGE_EFORMAT;
	}
	if (h->nominal_hz != 0 && (h->nominal_hz < TH_PAGE_MIN_HZ || h->nominal_hz > TH_PAGE_MAX_HZ)) {
		th_reason_str(&r, "page gives an implausible counter frequency of ");
		th_reason_u64(&r, h->nominal_hz);
		th_reason_str(&r, " Hz");
		return TH_PAGE_EFORMAT;
	}
	if (h->tick_ns < TH_PAGE_MIN_TICK_NS || h->tick_ns > TH_PAGE_MAX_TICK_NS) {
		th_reason_str(&r, "page gives an implausible tick of ");
		th_reason_u64(&r, h->tick_ns);
		th_reason_str(&r, " ns");
		return TH_PAGE_EFORMAT;
	}
	if (memchr(h->clocksource, 0, sizeof h->clocksource) == NULL)
		return fail(&r, TH_PAGE_EFORMAT, "page's clocksource name is not terminated");
	if (!is_zero(h->reserved0, sizeof h->reserved0) || !is_zero(h->reserved1, sizeof h->reserved1))
		return fail(&r, TH_PAGE_EFORMAT, "page has non-zero reserved bytes");

	if (exp && !is_zero(exp->boot_id, sizeof exp->boot_id) &&
	    memcmp(exp->boot_id, h->boot_id, sizeof h->boot_id) != 0)
		return fail(&r, TH_PAGE_EOTHER, "page is from another boot (boot id differs)");
	if (exp && exp->have_timens &&
	    (exp->timens_mono_ns != h->timens_mono_ns || exp->timens_boot_ns != h->timens_boot_ns)) {
		th_reason_str(&r, "this process is in another time namespace (MONOTONIC offset ");
		th_reason_i64(&r, exp->timens_mono_ns);
		th_reason_str(&r, " ns, the publisher's ");
		th_reason_i64(&r, h->timens_mono_ns);
		th_reason_str(&r, " ns)");
		return TH_PAGE_EOTHER;
	}
	if (exp && exp->peer_pid && h->publisher_pid != exp->peer_pid) {
		th_reason_str(&r, "page names publisher pid ");
		th_reason_u64(&r, h->publisher_pid);
		th_reason_str(&r, " but was served by pid ");
		th_reason_u64(&r, exp->peer_pid);
		return TH_PAGE_EFORMAT;
	}

	/* The timeline: the slot named by `cur`, and the record there. The
	 * page is read-only for us, and th_snapshot only loads. */
	const struct th_timeline *tl = th_page_timeline_const(h);
	/* Acquire, as in th_snapshot: pairs with the publisher's release CAS
	 * in th_commit (only the slot is used here). */
	uint64_t cur = atomic_load_explicit(&tl->cur, memory_order_acquire);
	if (TH_CUR_SLOT(cur) >= TH_RING) {
		th_reason_str(&r, "page's current slot ");
		th_reason_u64(&r, TH_CUR_SLOT(cur));
		th_reason_str(&r, " is outside its ring");
		return TH_PAGE_EFORMAT;
	}
	struct th_snap s;
	unsigned retries = 0;
	if (th_snapshot((struct th_timeline *)tl, &s, &retries) != 0)
		return fail(&r, TH_PAGE_EFORMAT, "page holds no consistent record");
	int rc = check_record(&r, &s);
	if (rc)
		return rc;

	if (exp && exp->now_mono_ns)
		return th_page_live(h, exp->now_mono_ns, exp->max_age_ns, reason, reason_size);
	/* Acquire: pairs with th_page_set_flags (release). */
	uint64_t flags = atomic_load_explicit(&h->flags, memory_order_acquire);
	if (!(flags & TH_PAGE_VALID))
		return fail(&r, TH_PAGE_ESTALE, "shared page not valid: timehandsd shut down or not ready");
	return 0;
}
