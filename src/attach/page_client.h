/*
 * Reader side of the shared page: get the page from timehandsd, check where
 * it came from, map it read-only, validate it, and re-check it cheaply while
 * running.
 *
 * Transport. timehandsd keeps the page in a memfd of mode 0644 sealed against
 * shrinking and growing (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) and hands
 * a read-only descriptor of it to whoever connects to its Unix stream socket
 * (the page path, TIMEHANDS_PAGE). A sealed memfd cannot be truncated under a
 * reader, so a mapping of it can never raise SIGBUS; a read-only descriptor
 * can neither write nor map it writable, and the mode keeps anyone but its
 * owner (root, or the user running the daemon) from reopening it for writing.
 * The daemon keeps it writable so that a restarted daemon can continue the
 * same page (the writable descriptor waits in systemd's descriptor store).
 * A page sealed against writes (F_SEAL_FUTURE_WRITE) is accepted too.
 *
 * Trust, checked in this order, each failure with a reason:
 *   the socket's directory is owned by root or us and not group/world-
 *   writable; the socket file is a socket owned by root or us; the peer's
 *   SO_PEERCRED uid is root or us; exactly one descriptor arrived; it is a
 *   regular file with F_SEAL_SHRINK and F_SEAL_GROW, either sealed against
 *   writes or a read-only descriptor of a file not group/world-writable,
 *   owned by root or us, of exactly TH_PAGE_SIZE bytes; then th_page_validate (magic,
 *   ABI, layout, boot id, time namespace, publisher pid = peer pid, sane
 *   parameters and current record, VALID, fresh heartbeat).
 *
 * Every descriptor is closed before th_page_attach returns; nothing is
 * allocated but the mapping; every wait is bounded (a stopped daemon costs at
 * most the timeout, never a hang).
 *
 * While running, th_page_check (magic, VALID, heartbeat age) is the cheap
 * re-validation.
 *
 * What the library must do when it reads the records (the page is read-only:
 * no th_announce, no windup; tests/daemon/tcommon.h page_value() is a
 * reference reader that follows these rules):
 *   - LINE record, counter delta in [dmin, dhi]: the line's value (clamp to
 *     dlo below it), exactly as in local mode.
 *   - LINE record, delta outside: order the counter read before a re-load
 *     of `cur` (th_order_after_kernel_read); if `cur` moved, read again;
 *     if not, the daemon is late: the value returned must come from outside
 *     the page (local mode or the kernel, floored), because the daemon may
 *     still commit a continuation of the old line, which readers that could
 *     not announce would then see below that value. Coming back to the page
 *     needs a monotonic handover (its value not below what was returned).
 *   - KERNEL record: phi(kernel, ceiling, bound), then re-load `cur` after
 *     the kernel read; if it moved, read again (the same check as local
 *     mode; no write needed).
 *   - TRANSIT record: as KERNEL while phi <= guard; above the guard (a
 *     fresh line is being installed, it lasts a microsecond or two) read
 *     again a bounded number of times, else treat the daemon as late.
 *   - coarse clocks: the record's coarse value (coarse_at[]), refreshed every
 *     tick; `tick` is the kernel's coarse clock at that sample, as in local
 *     mode, and the heartbeat says when the daemon last published.
 * Values of the page never go back across threads (the daemon's commits
 * keep the line continuous); only the hand-overs above need care.
 */
#ifndef TH_ATTACH_PAGE_CLIENT_H
#define TH_ATTACH_PAGE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "page.h"
#include "record.h"

#define TH_PAGE_ATTACH_TIMEOUT_MS 100 /* connect + receive, all together */

struct th_page_map {
	const struct th_page_hdr *hdr; /* the read-only mapping (NULL when detached) */
	const struct th_timeline *tl;  /* the ring inside it, for th_snapshot & co. */
	size_t size;                   /* bytes mapped (TH_PAGE_SIZE) */
	uint64_t tick_ns;              /* the publisher's tick */
	uint64_t max_age_ns;           /* staleness limit used by th_page_check */
	uint64_t flags;                /* TH_PAGE_* at attach */
	uint64_t nominal_hz;           /* counter frequency published by the daemon, 0 if none */
	uint32_t counter_kind;         /* enum th_counter of the records' anchors */
	uint32_t publisher_pid;        /* as seen from this process (SO_PEERCRED) */
	uint32_t peer_uid;
	int fixed;                     /* mapped over a caller's area (th_page_attach_at) */
};

/*
 * Attach to the page served at `path` (a Unix socket). Returns 0 with *out
 * filled, or a negative errno with a one-line reason:
 *   -ENOENT / -ECONNREFUSED  no daemon there;  -ETIMEDOUT  it did not answer;
 *   -EPERM  an untrusted directory, socket, peer or descriptor;
 *   -EPROTO / -ESTALE / -EXDEV  th_page_validate's verdict.
 * On failure *out is zeroed and nothing stays open or mapped.
 */
int th_page_attach(const char *path, struct th_page_map *out, char *reason, size_t n);
int th_page_attach_timeout(const char *path, int timeout_ms, struct th_page_map *out, char *reason, size_t n);
/* The same, mapping the page over `at` (TH_PAGE_SIZE bytes, page-aligned, of
 * the caller's own memory) instead of a new address; on failure, and on
 * th_page_detach, a private zero page is put back over `at`. */
int th_page_attach_at(const char *path, int timeout_ms, void *at, struct th_page_map *out, char *reason,
		      size_t n);

/* Cheap re-validation while running: magic, VALID, heartbeat not older than
 * m->max_age_ns at `now_mono_ns` (the reader's MONOTONIC) nor ahead of it.
 * Loads only; signal-safe. Returns 0 or a TH_PAGE_E* code with a reason. */
int th_page_check(const struct th_page_map *m, uint64_t now_mono_ns, char *reason, size_t n);

/* Unmap; *m is zeroed. Safe on a zeroed map. */
void th_page_detach(struct th_page_map *m);

/* --- trust policy, exposed for tests --- */

/*
 * Whom a process trusts to publish its page: root, its real or effective uid,
 * and, inside a user namespace, an owner outside it. The kernel shows every
 * uid the namespace does not map as the overflow uid (65534); no process
 * inside can own such an object, so it was made outside — by root, or by
 * whoever created the namespace and chose what it mounts (a container's bind
 * of /run/timehands). Where the overflow uid is itself mapped (the initial
 * namespace: there it is the user nobody), it is trusted no more than any
 * other user.
 */
#define TH_PAGE_NO_OUTSIDE UINT32_MAX
#define TH_PAGE_OUTSIDE_UNREAD (UINT32_MAX - 1)
struct th_page_ids {
	uint32_t uid, euid;
	/* the overflow uid where it means "not mapped here", else
	 * TH_PAGE_NO_OUTSIDE; TH_PAGE_OUTSIDE_UNREAD until an owner check
	 * needs it (then read from /proc/self/uid_map and
	 * /proc/sys/kernel/overflowuid) */
	uint32_t outside;
};
/* This process's uids; `outside` left to be read when needed. */
void th__page_ids(struct th_page_ids *ids);
/* `overflow` when no range of `uid_map` (the file's text) maps it, else
 * TH_PAGE_NO_OUTSIDE; also TH_PAGE_NO_OUTSIDE for text that is not a uid_map. */
uint32_t th__page_outside_uid(const char *uid_map, uint32_t overflow);
/* 1 when an object owned by `owner` may be trusted. */
int th__page_trust_uid(uint32_t owner, struct th_page_ids *ids);
/* 0 when a socket directory with this owner and mode is acceptable, else
 * -EPERM with a reason. */
int th__page_trust_dir(uint32_t owner, uint32_t mode, struct th_page_ids *ids, char *reason, size_t n);
/* 0 when a page memfd with these seals, descriptor access mode (O_RDONLY,
 * O_RDWR) and file mode is safe to map, else -EPERM with a reason: sealed
 * against shrinking and growing, and either sealed against writes or held
 * read-only and writable by its owner alone. */
int th__page_trust_fd(int seals, int accmode, uint32_t mode, char *reason, size_t n);

/* The machine facts a page is checked against (also used by timehandsd):
 * boot id (all zero and -1 when unreadable) and this process's time-namespace
 * offsets (-1 when unknown). */
int th__page_read_boot_id(uint8_t out[16]);
int th__page_read_timens(int64_t *mono_ns, int64_t *boot_ns);

#endif /* TH_ATTACH_PAGE_CLIENT_H */
