/*
 * The shared time page published by timehandsd: a header followed by the
 * same timeline (ring of records, publication protocol) that local mode keeps
 * in process memory (record.h). Pure: no I/O here; the transport is in
 * attach/page_client.c (reader) and daemon/timehandsd.c (publisher).
 *
 *   offset 0    struct th_page_hdr   (TH_PAGE_HDR_SIZE bytes)
 *   offset 256  struct th_timeline   (cur word, coarse block, TH_RING records)
 *   ...         zero up to TH_PAGE_SIZE
 *
 * Every field is fixed-width and the page holds no pointer, so it means the
 * same at any address. The identity fields (magic .. clocksource) are written
 * once before the page is handed to anyone; a restarted publisher that
 * continues the same page (th_page_adopt) rewrites only its own pid,
 * frequency and start time, before it serves the page. The live fields
 * (flags, heartbeat, counters) are atomics written by the publisher only.
 *
 * Versioning: `abi` names the layout of the header and of the timeline,
 * records included. A reader accepts exactly its own TH_PAGE_ABI and the exact
 * sizes that go with it, so an older library never misreads a newer page: any
 * change of meaning or layout bumps TH_PAGE_ABI. Flag bits a reader does not
 * know are ignored (they may only add information, never change a field's
 * meaning); reserved bytes are zero.
 *
 * The page is read-only for readers: they never write to it (no
 * announcements, record.h), which is why the publisher commits only with
 * th_commit/th_commit_force as a single writer, and a reader that finds the
 * current LINE record expired while `cur` has not moved must treat the
 * publisher as late (see attach/page_client.h).
 */
#ifndef TH_CORE_PAGE_H
#define TH_CORE_PAGE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "record.h"

/* "thndpage" as the bytes of a little-endian word. */
#define TH_PAGE_MAGIC UINT64_C(0x65676170646e6874)
#define TH_PAGE_ABI 2u /* 2: the records of TH_ABI_VERSION 4 */
#define TH_PAGE_HDR_SIZE 256u
#define TH_PAGE_SIZE 4096u

/* flags */
#define TH_PAGE_VALID 1u             /* publishing; cleared on clean shutdown */
#define TH_PAGE_COUNTER_KERNEL 2u    /* the kernel itself reads time from the counter */
#define TH_PAGE_CROSS_CPU_CHECKED 4u /* the daemon's cross-CPU check of the counter passed */
#define TH_PAGE_COUNTER_LINES 8u     /* the daemon publishes counter lines (else kernel records) */
#define TH_PAGE_KNOWN_FLAGS 15u

/* A page is stale when its heartbeat is older than this many ticks, and never
 * before TH_PAGE_STALE_MIN_NS (a tick of 100 us must not make every scheduling
 * hiccup a mode change). The publisher heartbeats every tick. */
#define TH_PAGE_STALE_TICKS 4u
#define TH_PAGE_STALE_MIN_NS 20000000u
/* A heartbeat this far ahead of the reader's MONOTONIC comes from another
 * time namespace (or a broken publisher). Generous: a reader preempted
 * between reading its clock and the check sees a heartbeat newer than its
 * "now"; smaller namespace offsets are caught at attach (timens offsets). */
#define TH_PAGE_FUTURE_NS 1000000000u

/* Sane publisher parameters. */
#define TH_PAGE_MIN_TICK_NS 10000u         /* 100 kHz */
#define TH_PAGE_MAX_TICK_NS 1000000000u    /* 1 Hz */
#define TH_PAGE_MIN_HZ 1000000u            /* counter frequency, when published */
#define TH_PAGE_MAX_HZ UINT64_C(100000000000)

struct th_page_hdr {
	/* --- identity: written before the page is served; a restarted
	 * publisher that adopts the page (th_page_adopt) rewrites only
	 * publisher_pid, nominal_hz and start_ns, before it serves it --- */
	uint64_t magic;          /* TH_PAGE_MAGIC */
	uint32_t abi;            /* TH_PAGE_ABI */
	uint32_t page_size;      /* bytes of the page, = the size of the memfd */
	uint32_t header_size;    /* offset of the timeline */
	uint32_t timeline_size;  /* sizeof(struct th_timeline) */
	uint32_t ring;           /* TH_RING */
	uint32_t record_size;    /* sizeof(struct th_rec) */
	uint32_t counter_kind;   /* enum th_counter the records' anchors count */
	uint32_t publisher_pid;  /* in the publisher's pid namespace */
	uint64_t nominal_hz;     /* the counter's published frequency, 0 if none */
	uint64_t tick_ns;        /* the publisher's tick */
	uint8_t boot_id[16];     /* /proc/sys/kernel/random/boot_id, binary */
	int64_t timens_mono_ns;  /* the publisher's time-namespace offsets */
	int64_t timens_boot_ns;
	uint64_t start_ns;       /* kernel MONOTONIC when the publisher started */
	char clocksource[32];    /* the kernel's clocksource at start, NUL-terminated */
	uint8_t reserved0[64];
	/* --- live: written by the publisher only --- */
	_Atomic uint64_t flags;      /* TH_PAGE_* */
	_Atomic uint64_t heartbeat;  /* kernel MONOTONIC ns of the last publish; 0 after shutdown */
	_Atomic uint64_t publishes;  /* records committed */
	_Atomic uint64_t resyncs;    /* counter discontinuities (jump, suspend, migration) */
	_Atomic uint64_t steps;      /* REALTIME steps followed */
	_Atomic uint64_t last_step_ns; /* kernel MONOTONIC when the last step was noticed */
	uint8_t reserved1[16];
};

_Static_assert(offsetof(struct th_page_hdr, nominal_hz) == 40, "page layout is ABI");
_Static_assert(offsetof(struct th_page_hdr, boot_id) == 56, "page layout is ABI");
_Static_assert(offsetof(struct th_page_hdr, clocksource) == 96, "page layout is ABI");
_Static_assert(offsetof(struct th_page_hdr, flags) == 192, "page layout is ABI");
_Static_assert(sizeof(struct th_page_hdr) == TH_PAGE_HDR_SIZE, "page layout is ABI");
_Static_assert(TH_PAGE_HDR_SIZE % 64 == 0, "the timeline starts on a cache line");
_Static_assert(TH_PAGE_HDR_SIZE + sizeof(struct th_timeline) <= TH_PAGE_SIZE, "page layout is ABI");

static inline struct th_timeline *th_page_timeline(struct th_page_hdr *h)
{
	return (struct th_timeline *)((char *)h + TH_PAGE_HDR_SIZE);
}

static inline const struct th_timeline *th_page_timeline_const(const struct th_page_hdr *h)
{
	return (const struct th_timeline *)((const char *)h + TH_PAGE_HDR_SIZE);
}

/* Identity of a publisher, as th_page_init writes it. */
struct th_page_ident {
	uint32_t counter_kind;
	uint32_t publisher_pid;
	uint64_t nominal_hz;
	uint64_t tick_ns;
	uint8_t boot_id[16];
	int64_t timens_mono_ns, timens_boot_ns;
	uint64_t start_ns;
	const char *clocksource;
};

/* Zero `size` (>= TH_PAGE_SIZE) bytes at `page` and write the identity; flags
 * and heartbeat stay 0 until the publisher has committed its first record. */
void th_page_init(void *page, const struct th_page_ident *id);

/* A restarted publisher takes over the page `h` of its predecessor (same
 * boot, time namespace, tick and counter kind; every check of
 * th_page_validate but the heartbeat and VALID): 0 with the publisher's pid,
 * frequency and start time written, the ring and the records untouched; else
 * a TH_PAGE_E* code with the reason, and nothing written. */
int th_page_adopt(struct th_page_hdr *h, const struct th_page_ident *id, char *reason, size_t reason_size);

/* Publisher: heartbeat and flags, each a release store (see page.c). */
void th_page_beat(struct th_page_hdr *h, uint64_t now_mono_ns);
void th_page_set_flags(struct th_page_hdr *h, uint64_t flags);

/* How old a heartbeat may be before the page is stale. */
static inline uint64_t th_page_max_age_ns(uint64_t tick_ns)
{
	uint64_t a = tick_ns * TH_PAGE_STALE_TICKS;
	return a > TH_PAGE_STALE_MIN_NS ? a : TH_PAGE_STALE_MIN_NS;
}

/* What a reader expects of a page it is about to trust. */
struct th_page_expect {
	uint64_t now_mono_ns;    /* the reader's MONOTONIC; 0: heartbeat not checked */
	uint64_t max_age_ns;     /* 0: th_page_max_age_ns(the page's tick) */
	uint8_t boot_id[16];     /* all zero: unknown, not checked */
	uint32_t peer_pid;       /* pid of the socket peer, 0 if unknown */
	uint32_t counter_kind;   /* the reader's TH_COUNTER_KIND */
	int have_timens;         /* the reader knows its time-namespace offsets */
	int64_t timens_mono_ns, timens_boot_ns;
};

/* Error codes (negated errno values) of the validator and the liveness check. */
#define TH_PAGE_EFORMAT (-71) /* -EPROTO: not a page of this ABI, or insane */
#define TH_PAGE_ESTALE (-116) /* -ESTALE: heartbeat too old, or not VALID */
#define TH_PAGE_EOTHER (-18)  /* -EXDEV: another boot or another time namespace */

/*
 * Check a mapped page before trusting it: size, alignment, magic, ABI, layout
 * sizes, boot id, time namespace, publisher pid, parameters (frequency, tick,
 * counter kind), the current record (slot, kind, window and slopes within the
 * bounds a reader's arithmetic relies on), VALID and a fresh heartbeat.
 * Pure and bounded (a few dozen loads; th_snapshot's bounded retries).
 * Returns 0, or one of the TH_PAGE_E* codes with a one-line reason (always
 * NUL-terminated when reason_size > 0).
 */
int th_page_validate(const void *map, size_t size, const struct th_page_expect *exp, char *reason,
		     size_t reason_size);

/*
 * The cheap re-check while running: magic, VALID, heartbeat not older than
 * max_age_ns (0: the page's own limit) nor in the future. Loads only: safe in
 * a signal handler, allocates nothing. Returns 0 or a TH_PAGE_E* code.
 */
int th_page_live(const struct th_page_hdr *h, uint64_t now_mono_ns, uint64_t max_age_ns, char *reason,
		 size_t reason_size);

/* Parse the 36-character text form of a boot id. Returns 0 or -1. */
int th_page_parse_boot_id(const char *text, uint8_t out[16]);

/* --- reason strings without stdio (signal-safe, allocation-free) --- */
struct th_reason {
	char *buf;
	size_t size, len;
};
void th_reason_init(struct th_reason *r, char *buf, size_t size);
void th_reason_str(struct th_reason *r, const char *s);
void th_reason_u64(struct th_reason *r, uint64_t v);
void th_reason_i64(struct th_reason *r, int64_t v);
void th_reason_hex(struct th_reason *r, uint64_t v);

#endif /* TH_CORE_PAGE_H */
