/* Reader side of the shared page; see page_client.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "page_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "counter.h"
#include "kclock.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

#define NS_PER_MS 1000000LL
#define MAX_FDS 4         /* room to see (and close) a peer that sends several */
#define MAX_PAGE_BYTES (1u << 20) /* larger descriptors are not even mapped */

/* The greeting timehandsd sends with the descriptor. */
struct th_page_hello {
	uint64_t magic;
	uint32_t abi;
	uint32_t size;
};

static int64_t mono_ns(void)
{
	struct timespec ts = {0, 0};
	th_kclock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* errno as text without strerror (which may translate and allocate). */
static void reason_errno(struct th_reason *r, int e)
{
	static const struct {
		int e;
		const char *s;
	} names[] = {
		{ENOENT, "no such file"}, {EACCES, "permission denied"}, {ECONNREFUSED, "connection refused"},
		{ENOTDIR, "not a directory"}, {ENOMEM, "out of memory"}, {EMFILE, "too many open files"},
		{ENFILE, "too many open files in the system"}, {EPERM, "operation not permitted"},
		{ECONNRESET, "connection reset"}, {EINVAL, "invalid argument"}, {ENOTSOCK, "not a socket"},
	};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (names[i].e == e) {
			th_reason_str(r, names[i].s);
			return;
		}
	th_reason_str(r, "errno ");
	th_reason_u64(r, (uint64_t)e);
}

static void close_keep_errno(int fd)
{
	int e = errno;
	if (fd >= 0)
		close(fd);
	errno = e;
}

/* ------------------------------------------------------------ policy */

#define TH_UNTRUSTED " (neither root, this user, nor an owner outside this user namespace)"

static uint32_t read_outside(void);

int th__page_trust_uid(uint32_t owner, struct th_page_ids *ids)
{
	if (owner == 0 || owner == ids->uid || owner == ids->euid)
		return 1;
	/* read only where it decides: most processes never get here */
	if (ids->outside == TH_PAGE_OUTSIDE_UNREAD)
		ids->outside = read_outside();
	return ids->outside != TH_PAGE_NO_OUTSIDE && owner == ids->outside;
}

uint32_t th__page_outside_uid(const char *uid_map, uint32_t overflow)
{
	/* lines "first-inside first-outside count"; overflow is mapped when
	 * some range holds it */
	const char *p = uid_map;
	while (*p) {
		uint64_t v[3] = {0, 0, 0};
		for (int i = 0; i < 3; i++) {
			while (*p == ' ' || *p == '\t')
				p++;
			if (*p < '0' || *p > '9')
				return TH_PAGE_NO_OUTSIDE; /* not a uid_map: trust nothing more */
			while (*p >= '0' && *p <= '9' && v[i] <= UINT32_MAX)
				v[i] = v[i] * 10 + (uint64_t)(*p++ - '0');
		}
		if (overflow >= v[0] && overflow - v[0] < v[2])
			return TH_PAGE_NO_OUTSIDE;
		while (*p && *p != '\n')
			p++;
		if (*p)
			p++;
	}
	return overflow;
}

/* The whole of a small /proc file, NUL-terminated; its length or -1. */
static ssize_t read_proc(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t k = read(fd, buf, size - 1);
	int e = errno;
	close(fd);
	errno = e;
	if (k < 0)
		return -1;
	buf[k] = 0;
	return k;
}

void th__page_ids(struct th_page_ids *ids)
{
	ids->uid = (uint32_t)getuid();
	ids->euid = (uint32_t)geteuid();
	ids->outside = TH_PAGE_OUTSIDE_UNREAD;
}

/* The overflow uid where this process's user namespace does not map it,
 * else TH_PAGE_NO_OUTSIDE (also when /proc cannot tell). */
static uint32_t read_outside(void)
{
	char buf[1024], of[16];
	/* A uid_map longer than the buffer (many ranges) counts as mapping the
	 * overflow uid: nothing more is trusted. */
	ssize_t k = read_proc("/proc/self/uid_map", buf, sizeof buf);
	if (k <= 0 || (size_t)k >= sizeof buf - 1 || read_proc("/proc/sys/kernel/overflowuid", of, sizeof of) <= 0)
		return TH_PAGE_NO_OUTSIDE;
	uint64_t v = 0;
	const char *p = of;
	while (*p >= '0' && *p <= '9' && v <= UINT32_MAX)
		v = v * 10 + (uint64_t)(*p++ - '0');
	if (p == of || v >= TH_PAGE_OUTSIDE_UNREAD)
		return TH_PAGE_NO_OUTSIDE;
	return th__page_outside_uid(buf, (uint32_t)v);
}

static void reason_mode(struct th_reason *r, uint32_t mode)
{
	if (mode & 07000)
		th_reason_u64(r, (mode >> 9) & 7);
	th_reason_u64(r, (mode >> 6) & 7);
	th_reason_u64(r, (mode >> 3) & 7);
	th_reason_u64(r, mode & 7);
}

int th__page_trust_dir(uint32_t owner, uint32_t mode, struct th_page_ids *ids, char *reason, size_t n)
{
	struct th_reason r;
	th_reason_init(&r, reason, n);
	if (!S_ISDIR(mode)) {
		th_reason_str(&r, "the page socket's parent is not a directory");
		return -EPERM;
	}
	if (!th__page_trust_uid(owner, ids)) {
		th_reason_str(&r, "the page socket's directory is owned by uid ");
		th_reason_u64(&r, owner);
		th_reason_str(&r, TH_UNTRUSTED);
		return -EPERM;
	}
	if (mode & (S_IWGRP | S_IWOTH)) {
		th_reason_str(&r, "the page socket's directory is group- or world-writable (mode ");
		reason_mode(&r, mode);
		th_reason_str(&r, ")");
		return -EPERM;
	}
	return 0;
}

int th__page_trust_fd(int seals, int accmode, uint32_t mode, char *reason, size_t n)
{
	struct th_reason r;
	th_reason_init(&r, reason, n);
	if (seals < 0) {
		th_reason_str(&r, "the page descriptor cannot be sealed (not a memfd)");
		return -EPERM;
	}
	if (!(seals & F_SEAL_SHRINK)) {
		th_reason_str(&r, "the page is not sealed against shrinking (F_SEAL_SHRINK): a mapping could fault");
		return -EPERM;
	}
	if (!(seals & F_SEAL_GROW)) {
		th_reason_str(&r, "the page is not sealed against growing (F_SEAL_GROW)");
		return -EPERM;
	}
	if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE))
		return 0; /* nobody can write it any more */
	/* Writable by its owner (the daemon), who keeps it so that a restarted
	 * daemon can continue it: readers must not be able to write it. */
	if (accmode != O_RDONLY) {
		th_reason_str(&r, "the page descriptor is writable and the page not sealed against writes: any reader could change it");
		return -EPERM;
	}
	if (mode & (S_IWGRP | S_IWOTH)) {
		th_reason_str(&r, "the page is group- or world-writable (mode ");
		reason_mode(&r, mode);
		th_reason_str(&r, ") and not sealed against writes: a reader could reopen it for writing");
		return -EPERM;
	}
	return 0;
}

/* ------------------------------------------------------------ attach */

static int check_paths(const char *path, struct th_page_ids *ids, struct th_reason *r, char *reason, size_t n)
{
	size_t len = strlen(path);
	struct sockaddr_un sa;
	if (path[0] != '/') {
		th_reason_str(r, "the page path is not absolute");
		return -EINVAL;
	}
	if (len >= sizeof sa.sun_path) {
		th_reason_str(r, "the page path is longer than a socket address allows");
		return -ENAMETOOLONG;
	}
	char dir[sizeof sa.sun_path];
	memcpy(dir, path, len + 1);
	char *slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = 0;
	else
		*slash = 0;
	struct stat st;
	if (stat(dir, &st) != 0) {
		int e = errno;
		th_reason_str(r, "no page socket directory ");
		th_reason_str(r, dir);
		th_reason_str(r, ": ");
		reason_errno(r, e);
		return -e;
	}
	int rc = th__page_trust_dir((uint32_t)st.st_uid, (uint32_t)st.st_mode, ids, reason, n);
	if (rc) {
		r->len = strlen(reason);
		return rc;
	}
	if (lstat(path, &st) != 0) {
		int e = errno;
		th_reason_str(r, "no timehandsd socket at ");
		th_reason_str(r, path);
		return -e;
	}
	if (!S_ISSOCK(st.st_mode)) {
		th_reason_str(r, path);
		th_reason_str(r, " is not a socket");
		return -EPERM;
	}
	if (!th__page_trust_uid((uint32_t)st.st_uid, ids)) {
		th_reason_str(r, "the page socket is owned by uid ");
		th_reason_u64(r, (uint64_t)st.st_uid);
		th_reason_str(r, TH_UNTRUSTED);
		return -EPERM;
	}
	return 0;
}

/* Wait for `events` on fd until `deadline` (MONOTONIC ns). 0, or -ETIMEDOUT. */
/* Wait for `events` until `deadline`. Past the deadline, one last poll
 * without waiting: a client preempted while the daemon answered (a loaded
 * machine, a budget of a millisecond at attach) still finds the answer. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - mono_ns();
		int ms = left > 0 ? (int)((left + NS_PER_MS - 1) / NS_PER_MS) : 0;
		struct pollfd p = {.fd = fd, .events = events, .revents = 0};
		int k = poll(&p, 1, ms);
		if (k > 0)
			return 0;
		if (k < 0 && errno != EINTR)
			return -errno;
		if (k == 0 && ms == 0)
			return -ETIMEDOUT;
	}
}

/* Connect, check the peer, receive one descriptor. Returns the descriptor or
 * a negative errno; the socket is closed either way. */
static int receive_fd(const char *path, int timeout_ms, struct th_page_ids *ids, struct th_reason *r,
		      uint32_t *peer_pid, uint32_t *peer_uid)
{
	int64_t deadline = mono_ns() + (int64_t)timeout_ms * NS_PER_MS;
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0) {
		int e = errno;
		th_reason_str(r, "socket: ");
		reason_errno(r, e);
		return -e;
	}
	struct sockaddr_un sa;
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int rc;
	if (connect(s, (struct sockaddr *)&sa, sizeof sa) != 0) {
		int e = errno;
		if (e == EINPROGRESS || e == EINTR) {
			rc = wait_fd(s, POLLOUT, deadline);
			int soe = 0;
			socklen_t sl = sizeof soe;
			if (rc == 0 && getsockopt(s, SOL_SOCKET, SO_ERROR, &soe, &sl) == 0 && soe)
				rc = -soe;
		} else {
			rc = -e;
		}
		if (rc) {
			close(s);
			if (rc == -ETIMEDOUT)
				th_reason_str(r, "timehandsd did not accept the connection in time");
			else if (rc == -EAGAIN)
				th_reason_str(r, "timehandsd's socket backlog is full");
			else if (rc == -ECONNREFUSED)
				th_reason_str(r, "no timehandsd listening (stale socket)");
			else {
				th_reason_str(r, "connect: ");
				reason_errno(r, -rc);
			}
			return rc == -EAGAIN ? -ETIMEDOUT : rc;
		}
	}
	struct ucred cred;
	socklen_t cl = sizeof cred;
	memset(&cred, 0, sizeof cred);
	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 || cl != sizeof cred) {
		close(s);
		th_reason_str(r, "cannot read the credentials of the page socket's peer");
		return -EPERM;
	}
	*peer_pid = (uint32_t)cred.pid;
	*peer_uid = (uint32_t)cred.uid;
	if (!th__page_trust_uid((uint32_t)cred.uid, ids)) {
		close(s);
		th_reason_str(r, "the page socket is served by uid ");
		th_reason_u64(r, (uint64_t)cred.uid);
		th_reason_str(r, TH_UNTRUSTED);
		return -EPERM;
	}

	struct th_page_hello hello;
	union {
		char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	ssize_t got;
	struct msghdr msg;
	for (;;) {
		struct iovec iov = {.iov_base = &hello, .iov_len = sizeof hello};
		memset(&msg, 0, sizeof msg);
		memset(&ctl, 0, sizeof ctl);
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof ctl.buf;
		got = recvmsg(s, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (got >= 0)
			break;
		if (errno != EAGAIN && errno != EINTR) {
			int e = errno;
			close(s);
			th_reason_str(r, "recvmsg: ");
			reason_errno(r, e);
			return -e;
		}
		rc = wait_fd(s, POLLIN, deadline);
		if (rc) {
			close(s);
			th_reason_str(r, rc == -ETIMEDOUT ? "timehandsd did not send the page in time (stopped?)"
							   : "poll failed on the page socket");
			return rc;
		}
	}
	close(s);

	/* Take every descriptor that arrived, so that none leaks whatever the
	 * verdict; use one only if it came alone. */
	int fds[MAX_FDS], nfd = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k && nfd < MAX_FDS; i++)
			memcpy(&fds[nfd++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	}
	int bad = 0;
	if (msg.msg_flags & MSG_CTRUNC) {
		th_reason_str(r, "timehandsd sent more descriptors than expected");
		bad = 1;
	} else if (nfd != 1) {
		th_reason_str(r, nfd ? "timehandsd sent more than one descriptor" : "timehandsd sent no descriptor");
		bad = 1;
	} else if (got < (ssize_t)sizeof hello || hello.magic != TH_PAGE_MAGIC) {
		th_reason_str(r, "the page socket's peer does not speak the timehandsd protocol");
		bad = 1;
	} else if (hello.abi != TH_PAGE_ABI) {
		th_reason_str(r, "timehandsd serves page ABI ");
		th_reason_u64(r, hello.abi);
		th_reason_str(r, ", this library reads ABI ");
		th_reason_u64(r, TH_PAGE_ABI);
		bad = 1;
	}
	if (bad) {
		for (int i = 0; i < nfd; i++)
			close(fds[i]);
		return -EPROTO;
	}
	return fds[0];
}

int th__page_read_boot_id(uint8_t out[16])
{
	char buf[64];
	memset(out, 0, 16);
	if (read_proc("/proc/sys/kernel/random/boot_id", buf, sizeof buf) < 36)
		return -1;
	if (th_page_parse_boot_id(buf, out) != 0) {
		memset(out, 0, 16);
		return -1;
	}
	return 0;
}

/* "monotonic <sec> <nsec>\nboottime <sec> <nsec>\n" */
static int parse_offsets(const char *p, int64_t *mono, int64_t *boot)
{
	int have = 0;
	while (*p) {
		int64_t *dst = NULL;
		if (strncmp(p, "monotonic", 9) == 0)
			dst = mono;
		else if (strncmp(p, "boottime", 8) == 0)
			dst = boot;
		while (*p && *p != ' ' && *p != '\t' && *p != '\n')
			p++;
		int64_t v[2] = {0, 0};
		for (int i = 0; i < 2; i++) {
			while (*p == ' ' || *p == '\t')
				p++;
			int neg = *p == '-';
			if (neg)
				p++;
			while (*p >= '0' && *p <= '9')
				v[i] = v[i] * 10 + (*p++ - '0');
			if (neg)
				v[i] = -v[i];
		}
		if (dst) {
			*dst = v[0] * 1000000000LL + v[1];
			have++;
		}
		while (*p && *p != '\n')
			p++;
		if (*p)
			p++;
	}
	return have == 2 ? 0 : -1;
}

int th__page_read_timens(int64_t *mono, int64_t *boot)
{
	*mono = *boot = 0;
	char buf[256];
	ssize_t k = read_proc("/proc/self/timens_offsets", buf, sizeof buf);
	if (k < 0) {
		/* No such file on a kernel without time namespaces: every
		 * process has zero offsets there. Without /proc we do not know. */
		if (errno != ENOENT)
			return -1;
		return access("/proc/self/stat", F_OK) == 0 ? 0 : -1;
	}
	if (k == 0)
		return -1;
	return parse_offsets(buf, mono, boot);
}

int th_page_attach_timeout(const char *path, int timeout_ms, struct th_page_map *out, char *reason, size_t n)
{
	return th_page_attach_at(path, timeout_ms, NULL, out, reason, n);
}

/* Put a private zero page back over a fixed mapping (readers of the area
 * then see generation 0 and leave it; the area never becomes unmapped, so no
 * access to it can fault). */
static void unmap_at(void *at, size_t size)
{
	void *m = mmap(at, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	(void)m;
}

int th_page_attach_at(const char *path, int timeout_ms, void *at, struct th_page_map *out, char *reason,
		      size_t n)
{
	struct th_reason r;
	th_reason_init(&r, reason, n);
	memset(out, 0, sizeof *out);
	if (!path || !*path) {
		th_reason_str(&r, "no page path");
		return -EINVAL;
	}
	struct th_page_ids ids;
	th__page_ids(&ids);
	int rc = check_paths(path, &ids, &r, reason, n);
	if (rc)
		return rc;
	uint32_t peer_pid = 0, peer_uid = 0;
	int fd = receive_fd(path, timeout_ms, &ids, &r, &peer_pid, &peer_uid);
	if (fd < 0)
		return fd;

	int seals = fcntl(fd, F_GET_SEALS);
	int acc = fcntl(fd, F_GETFL);
	struct stat st;
	if (fstat(fd, &st) != 0) {
		th_reason_str(&r, "fstat on the page descriptor failed");
		rc = -EPERM;
	} else {
		rc = th__page_trust_fd(seals, acc < 0 ? -1 : (acc & O_ACCMODE), (uint32_t)st.st_mode & 07777, reason,
				       n);
	}
	if (rc == 0 && !S_ISREG(st.st_mode)) {
		th_reason_str(&r, "the page descriptor is not a regular file");
		rc = -EPERM;
	}
	if (rc == 0 && !th__page_trust_uid((uint32_t)st.st_uid, &ids)) {
		th_reason_str(&r, "the page memfd is owned by uid ");
		th_reason_u64(&r, (uint64_t)st.st_uid);
		th_reason_str(&r, TH_UNTRUSTED);
		rc = -EPERM;
	}
	if (rc == 0 && (st.st_size < (off_t)TH_PAGE_HDR_SIZE || st.st_size > (off_t)MAX_PAGE_BYTES)) {
		th_reason_str(&r, "the page is ");
		th_reason_u64(&r, (uint64_t)st.st_size);
		th_reason_str(&r, " bytes; ABI 1 pages are ");
		th_reason_u64(&r, TH_PAGE_SIZE);
		rc = -EPROTO;
	}
	void *map = MAP_FAILED;
	size_t size = rc == 0 ? (size_t)st.st_size : 0;
	if (rc == 0) {
		/* Safe to map: F_SEAL_SHRINK (checked above) means the file can
		 * never become shorter than `size`, so no access to the mapping
		 * can fault. Read-only, and the write seal or the read-only
		 * descriptor of a page others cannot write keeps it so. */
		if (at && size != TH_PAGE_SIZE) {
			th_reason_str(&r, "the page is not exactly one page long");
			rc = -EPROTO;
		} else {
			map = mmap(at, size, PROT_READ, MAP_SHARED | (at ? MAP_FIXED : 0), fd, 0);
		}
		if (rc == 0 && map == MAP_FAILED) {
			int e = errno;
			if (at) /* a failed MAP_FIXED may have dropped the area */
				unmap_at(at, size);
			th_reason_str(&r, "mmap of the page failed: ");
			reason_errno(&r, e);
			rc = -e;
		}
	}
	close_keep_errno(fd);
	if (rc)
		return rc;

	struct th_page_expect exp;
	memset(&exp, 0, sizeof exp);
	exp.now_mono_ns = (uint64_t)mono_ns();
	th__page_read_boot_id(exp.boot_id);
	exp.peer_pid = peer_pid;
	exp.counter_kind = TH_COUNTER_KIND;
	exp.have_timens = th__page_read_timens(&exp.timens_mono_ns, &exp.timens_boot_ns) == 0;
	rc = th_page_validate(map, size, &exp, reason, n);
	if (rc) {
		if (at)
			unmap_at(at, size);
		else
			munmap(map, size);
		return rc;
	}
	const struct th_page_hdr *h = map;
	out->hdr = h;
	out->fixed = at != NULL;
	out->tl = th_page_timeline_const(h);
	out->size = size;
	out->tick_ns = h->tick_ns;
	out->max_age_ns = th_page_max_age_ns(h->tick_ns);
	/* Acquire: pairs with th_page_set_flags (release) in the daemon. */
	out->flags = atomic_load_explicit(&h->flags, memory_order_acquire);
	out->nominal_hz = h->nominal_hz;
	out->counter_kind = h->counter_kind;
	out->publisher_pid = peer_pid;
	out->peer_uid = peer_uid;
	return 0;
}

int th_page_attach(const char *path, struct th_page_map *out, char *reason, size_t n)
{
	return th_page_attach_timeout(path, TH_PAGE_ATTACH_TIMEOUT_MS, out, reason, n);
}

int th_page_check(const struct th_page_map *m, uint64_t now_mono_ns, char *reason, size_t n)
{
	if (!m->hdr) {
		struct th_reason r;
		th_reason_init(&r, reason, n);
		th_reason_str(&r, "no shared page attached");
		return TH_PAGE_ESTALE;
	}
	return th_page_live(m->hdr, now_mono_ns, m->max_age_ns, reason, n);
}

void th_page_detach(struct th_page_map *m)
{
	if (m->hdr && m->fixed)
		unmap_at((void *)m->hdr, m->size);
	else if (m->hdr)
		munmap((void *)m->hdr, m->size);
	memset(m, 0, sizeof *m);
}
