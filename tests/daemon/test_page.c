/*
 * The shared page without the daemon: the validator and the liveness check on
 * pages built by hand, the trust policy, and the transport against fake
 * servers (this test) serving hostile pages: each must be refused with its
 * reason, quickly, leaking no descriptor.
 */
#include "reap.h"
#include "tcommon.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

static char page_buf[TH_PAGE_SIZE] __attribute__((aligned(4096)));

static int validate_buf(void *p, size_t size, const struct th_page_expect *e, char *why)
{
	return th_page_validate(p, size, e, why, 200);
}

#define EXPECT_REFUSED(rc, why, code, text)                                                         \
	do {                                                                                        \
		CHECK((rc) == (code), "rc %d, want %d (%s)", (rc), (code), (why));                  \
		CHECK(strstr((why), (text)) != NULL, "reason \"%s\" lacks \"%s\"", (why), (text)); \
	} while (0)

/* ------------------------------------------------------------ validator */

static void test_validator(void)
{
	char why[200];
	struct th_page_expect e;
	struct th_page_hdr *h = (struct th_page_hdr *)page_buf;

	for (int kind = 0; kind < 2; kind++) {
		make_page(page_buf, kind, 0);
		expect_here(&e);
		int rc = validate_buf(page_buf, TH_PAGE_SIZE, &e, why);
		CHECK(rc == 0, "good page (line %d) refused: %s", kind, why);
	}

	make_page(page_buf, 1, 0);
	expect_here(&e);
	int rc = validate_buf(page_buf + 8, TH_PAGE_SIZE - 8, &e, why);
	EXPECT_REFUSED(rc, why, TH_PAGE_EFORMAT, "aligned");
	rc = validate_buf(page_buf, 100, &e, why);
	EXPECT_REFUSED(rc, why, TH_PAGE_EFORMAT, "smaller than a header");
	rc = validate_buf(page_buf, 2048, &e, why);
	EXPECT_REFUSED(rc, why, TH_PAGE_EFORMAT, "bytes");
	rc = validate_buf(NULL, TH_PAGE_SIZE, &e, why);
	EXPECT_REFUSED(rc, why, TH_PAGE_EFORMAT, "no page");

	/* Each field spoiled in turn on a fresh good page. */
	struct {
		const char *name;
		int code;
		const char *text;
	} cases[] = {
		{"magic", TH_PAGE_EFORMAT, "not a timehands page"},
		{"abi-newer", TH_PAGE_EFORMAT, "newer timehandsd"},
		{"abi-older", TH_PAGE_EFORMAT, "older timehandsd"},
		{"page_size", TH_PAGE_EFORMAT, "says"},
		{"ring", TH_PAGE_EFORMAT, "layout sizes"},
		{"record_size", TH_PAGE_EFORMAT, "layout sizes"},
		{"counter_kind", TH_PAGE_EFORMAT, "unknown counter kind"},
		{"counter_other", TH_PAGE_EFORMAT, "counts counter kind"},
		{"hz", TH_PAGE_EFORMAT, "frequency"},
		{"tick0", TH_PAGE_EFORMAT, "tick"},
		{"tickbig", TH_PAGE_EFORMAT, "tick"},
		{"clocksource", TH_PAGE_EFORMAT, "not terminated"},
		{"reserved", TH_PAGE_EFORMAT, "reserved"},
		{"boot", TH_PAGE_EOTHER, "another boot"},
		{"timens", TH_PAGE_EOTHER, "time namespace"},
		{"pid", TH_PAGE_EFORMAT, "publisher pid"},
		{"slot", TH_PAGE_EFORMAT, "outside its ring"},
		{"gen0", TH_PAGE_EFORMAT, "no consistent record"},
		{"kind", TH_PAGE_EFORMAT, "unknown kind"},
		{"window", TH_PAGE_EFORMAT, "inconsistent window"},
		{"slope", TH_PAGE_EFORMAT, "implausible slope"},
		{"span", TH_PAGE_EFORMAT, "longer than a reader"},
		{"bound", TH_PAGE_EFORMAT, "error bound"},
		{"kwindow", TH_PAGE_EFORMAT, "kernel-mode record"},
		{"invalid", TH_PAGE_ESTALE, "not valid"},
		{"stale", TH_PAGE_ESTALE, "ms old"},
		{"nobeat", TH_PAGE_ESTALE, "no heartbeat"},
		{"future", TH_PAGE_EOTHER, "ahead"},
		{"zero", TH_PAGE_EFORMAT, "not a timehands page"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const char *n = cases[i].name;
		int kernel_rec = strcmp(n, "kwindow") == 0;
		make_page(page_buf, !kernel_rec, 1234);
		expect_here(&e);
		e.peer_pid = 1234;
		struct th_timeline *tl = th_page_timeline(h);
		struct th_rec *r = &tl->ring[TH_CUR_SLOT(atomic_load(&tl->cur))];
		if (!strcmp(n, "magic"))
			h->magic ^= 1;
		else if (!strcmp(n, "abi-newer"))
			h->abi = TH_PAGE_ABI + 1;
		else if (!strcmp(n, "abi-older"))
			h->abi = 0;
		else if (!strcmp(n, "page_size"))
			h->page_size = 8192;
		else if (!strcmp(n, "ring"))
			h->ring = TH_RING * 2;
		else if (!strcmp(n, "record_size"))
			h->record_size = 256;
		else if (!strcmp(n, "counter_kind"))
			h->counter_kind = 9;
		else if (!strcmp(n, "counter_other"))
			e.counter_kind = TH_COUNTER_KIND == 1 ? 2 : 1;
		else if (!strcmp(n, "hz"))
			h->nominal_hz = 12;
		else if (!strcmp(n, "tick0"))
			h->tick_ns = 0;
		else if (!strcmp(n, "tickbig"))
			h->tick_ns = 5000000000ull;
		else if (!strcmp(n, "clocksource"))
			memset(h->clocksource, 'x', sizeof h->clocksource);
		else if (!strcmp(n, "reserved"))
			h->reserved0[3] = 1;
		else if (!strcmp(n, "boot"))
			h->boot_id[5] ^= 0x40;
		else if (!strcmp(n, "timens")) {
			e.have_timens = 1;
			e.timens_mono_ns = h->timens_mono_ns + 86400 * 1000000000LL;
		} else if (!strcmp(n, "pid"))
			e.peer_pid = 4321;
		else if (!strcmp(n, "slot"))
			atomic_store(&tl->cur, TH_CUR_MAKE(7, 200, 0));
		else if (!strcmp(n, "gen0"))
			atomic_store(&r->gen, 0);
		else if (!strcmp(n, "kind"))
			atomic_store(&r->kind, 77);
		else if (!strcmp(n, "window"))
			atomic_store(&r->ddue, atomic_load(&r->dhi) + 1);
		else if (!strcmp(n, "slope"))
			atomic_store(&r->mono_hi, -5);
		else if (!strcmp(n, "span"))
			atomic_store(&r->dhi, (int64_t)1 << 40);
		else if (!strcmp(n, "bound"))
			atomic_store(&r->bound[0], 5000000);
		else if (!strcmp(n, "kwindow"))
			atomic_store(&r->dhi, 100);
		else if (!strcmp(n, "invalid"))
			th_page_set_flags(h, 0);
		else if (!strcmp(n, "stale"))
			e.now_mono_ns += 1000000000ull;
		else if (!strcmp(n, "nobeat"))
			atomic_store(&h->heartbeat, 0);
		else if (!strcmp(n, "future"))
			atomic_store(&h->heartbeat, e.now_mono_ns + 2000000000ull);
		else if (!strcmp(n, "zero"))
			memset(page_buf, 0, sizeof page_buf);
		rc = validate_buf(page_buf, TH_PAGE_SIZE, &e, why);
		CHECK(rc == cases[i].code && strstr(why, cases[i].text), "case %s: rc %d, reason \"%s\"", n, rc,
		      why);
	}

	/* Unknown boot id / time namespace of the reader: not checked. */
	make_page(page_buf, 1, 0);
	expect_here(&e);
	h->boot_id[0] ^= 1;
	memset(e.boot_id, 0, sizeof e.boot_id);
	e.have_timens = 0;
	rc = validate_buf(page_buf, TH_PAGE_SIZE, &e, why);
	CHECK(rc == 0, "unknown boot id must not refuse: %s", why);

	/* Unknown flag bits are ignored (they only add information). */
	make_page(page_buf, 1, 0);
	expect_here(&e);
	th_page_set_flags(h, TH_PAGE_VALID | (1u << 30));
	rc = validate_buf(page_buf, TH_PAGE_SIZE, &e, why);
	CHECK(rc == 0, "unknown flag refused: %s", why);

	/* th_page_live on its own, at the edge of the staleness limit. */
	make_page(page_buf, 1, 0);
	uint64_t hb = atomic_load(&h->heartbeat);
	uint64_t age = th_page_max_age_ns(h->tick_ns);
	CHECK(th_page_live(h, hb + age, 0, why, sizeof why) == 0, "at the limit: %s", why);
	rc = th_page_live(h, hb + age + 1, 0, why, sizeof why);
	EXPECT_REFUSED(rc, why, TH_PAGE_ESTALE, "timehandsd stopped or dead");
	CHECK(age >= TH_PAGE_STALE_MIN_NS && age >= TH_PAGE_STALE_TICKS * h->tick_ns, "age %llu",
	      (unsigned long long)age);
	/* a tiny reason buffer is still terminated */
	char tiny[5];
	rc = th_page_live(h, hb + age + 1, 0, tiny, sizeof tiny);
	CHECK(rc == TH_PAGE_ESTALE && strlen(tiny) == 4, "tiny reason \"%s\"", tiny);

	uint8_t id[16];
	CHECK(th_page_parse_boot_id("0123abcd-4567-89ef-ABCD-0123456789ab\n", id) == 0 && id[0] == 0x01 &&
		      id[3] == 0xcd && id[15] == 0xab,
	      "boot id parse");
	CHECK(th_page_parse_boot_id("0123abcd-4567-89ef-ABCD-0123456789a", id) != 0, "short boot id");
	CHECK(th_page_parse_boot_id("0123abcd+4567-89ef-ABCD-0123456789ab", id) != 0, "bad dash");
	CHECK(th_page_parse_boot_id("0123abcg-4567-89ef-ABCD-0123456789ab", id) != 0, "bad hex");
}

static void test_policy(void)
{
	char why[200];
	struct th_page_ids u = {1000, 1000, TH_PAGE_NO_OUTSIDE}, ue = {1000, 2000, TH_PAGE_NO_OUTSIDE},
				 root = {0, 0, TH_PAGE_NO_OUTSIDE}, userns = {0, 0, 65534};
	CHECK(th__page_trust_uid(0, &u), "root");
	CHECK(th__page_trust_uid(1000, &u), "self");
	CHECK(th__page_trust_uid(1000, &ue), "real uid");
	CHECK(th__page_trust_uid(2000, &ue), "effective uid");
	CHECK(!th__page_trust_uid(1001, &u), "another user");
	CHECK(!th__page_trust_uid(65534, &root), "nobody, for root");
	CHECK(th__page_trust_uid(65534, &userns), "an owner outside the user namespace");
	CHECK(!th__page_trust_uid(1001, &userns), "another user, in a user namespace");
	/* the overflow uid counts as "outside" only where no range maps it */
	CHECK(th__page_outside_uid("         0          0 4294967295\n", 65534) == TH_PAGE_NO_OUTSIDE,
	      "initial namespace");
	CHECK(th__page_outside_uid("         0       1001          1\n", 65534) == 65534, "one uid mapped");
	CHECK(th__page_outside_uid("0 100000 65536\n", 65534) == TH_PAGE_NO_OUTSIDE, "a range holding 65534");
	CHECK(th__page_outside_uid("0 100000 65534\n", 65534) == 65534, "a range ending below 65534");
	CHECK(th__page_outside_uid("0 1000 1\n65534 165534 1\n", 65534) == TH_PAGE_NO_OUTSIDE,
	      "65534 mapped on a second line");
	CHECK(th__page_outside_uid("", 65534) == 65534, "no mapping at all (a fresh namespace)");
	CHECK(th__page_outside_uid("garbage\n", 65534) == TH_PAGE_NO_OUTSIDE, "not a uid_map");
	CHECK(th__page_outside_uid("0 0\n", 65534) == TH_PAGE_NO_OUTSIDE, "a short line");
	struct th_page_ids here;
	th__page_ids(&here);
	CHECK(here.uid == (uint32_t)getuid() && here.euid == (uint32_t)geteuid() &&
		      here.outside == TH_PAGE_OUTSIDE_UNREAD,
	      "th__page_ids: uids, the overflow uid left unread");
	/* an owner that is neither root nor us makes the check read it
	 * (1001 is refused wherever this runs: the overflow uid is 65534) */
	if (here.uid != 1001 && here.euid != 1001) {
		CHECK(!th__page_trust_uid(1001, &here) && here.outside != TH_PAGE_OUTSIDE_UNREAD,
		      "another user: refused, the overflow uid read");
	}
	CHECK(th__page_trust_dir(0, S_IFDIR | 0755, &u, why, sizeof why) == 0, "root 0755");
	CHECK(th__page_trust_dir(1000, S_IFDIR | 0700, &u, why, sizeof why) == 0, "own 0700");
	int rc = th__page_trust_dir(0, S_IFDIR | 01777, &u, why, sizeof why);
	EXPECT_REFUSED(rc, why, -EPERM, "world-writable (mode 1777)");
	rc = th__page_trust_dir(0, S_IFDIR | 0775, &u, why, sizeof why);
	EXPECT_REFUSED(rc, why, -EPERM, "group- or world-writable");
	rc = th__page_trust_dir(1001, S_IFDIR | 0755, &u, why, sizeof why);
	EXPECT_REFUSED(rc, why, -EPERM, "owned by uid 1001");
	rc = th__page_trust_dir(65534, S_IFDIR | 0775, &userns, why, sizeof why);
	EXPECT_REFUSED(rc, why, -EPERM, "group- or world-writable");
	rc = th__page_trust_dir(0, S_IFREG | 0755, &u, why, sizeof why);
	EXPECT_REFUSED(rc, why, -EPERM, "not a directory");
	int all = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL;
	int daemon_seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	CHECK(th__page_trust_fd(all, O_RDWR, 0777, why, sizeof why) == 0, "all seals");
	CHECK(th__page_trust_fd(F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE, O_RDWR, 0666, why, sizeof why) == 0,
	      "write seal");
	CHECK(th__page_trust_fd(daemon_seals, O_RDONLY, 0644, why, sizeof why) == 0, "read-only, 0644: %s", why);
	CHECK(th__page_trust_fd(daemon_seals, O_RDONLY, 0600, why, sizeof why) == 0, "read-only, 0600: %s", why);
	rc = th__page_trust_fd(-1, O_RDONLY, 0644, why, sizeof why);
	EXPECT_REFUSED(rc, why, -EPERM, "not a memfd");
	rc = th__page_trust_fd(all & ~F_SEAL_SHRINK, O_RDWR, 0644, why, sizeof why);
	EXPECT_REFUSED(rc, why, -EPERM, "F_SEAL_SHRINK");
	rc = th__page_trust_fd(all & ~F_SEAL_GROW, O_RDWR, 0644, why, sizeof why);
	EXPECT_REFUSED(rc, why, -EPERM, "F_SEAL_GROW");
	rc = th__page_trust_fd(daemon_seals & ~F_SEAL_SHRINK, O_RDONLY, 0644, why, sizeof why);
	EXPECT_REFUSED(rc, why, -EPERM, "F_SEAL_SHRINK");
	rc = th__page_trust_fd(daemon_seals, O_RDWR, 0644, why, sizeof why);
	EXPECT_REFUSED(rc, why, -EPERM, "descriptor is writable");
	rc = th__page_trust_fd(daemon_seals, O_WRONLY, 0644, why, sizeof why);
	EXPECT_REFUSED(rc, why, -EPERM, "descriptor is writable");
	rc = th__page_trust_fd(daemon_seals, -1, 0644, why, sizeof why);
	EXPECT_REFUSED(rc, why, -EPERM, "descriptor is writable");
	rc = th__page_trust_fd(daemon_seals, O_RDONLY, 0664, why, sizeof why);
	EXPECT_REFUSED(rc, why, -EPERM, "group- or world-writable (mode 664)");
	rc = th__page_trust_fd(daemon_seals, O_RDONLY, 0646, why, sizeof why);
	EXPECT_REFUSED(rc, why, -EPERM, "group- or world-writable (mode 646)");
	rc = th__page_trust_fd(daemon_seals, O_RDONLY, 01777, why, sizeof why);
	EXPECT_REFUSED(rc, why, -EPERM, "group- or world-writable (mode 1777)");
}

/* ------------------------------------------------------------ fake servers */

enum serve {
	SERVE_PAGE,        /* the descriptor prepared by the parent */
	SERVE_PAGE_RO,     /* a read-only reopen of it, as timehandsd serves it */
	SERVE_NOTHING,     /* accept, send nothing (a stopped daemon) */
	SERVE_NO_FD,       /* greeting without a descriptor */
	SERVE_TWO_FDS,
	SERVE_BAD_HELLO,
	SERVE_NEXT_ABI_HELLO,
	SERVE_PIPE,        /* a descriptor that is not a memfd */
	SERVE_AS_NOBODY,   /* listen() after dropping to uid 65534 (root only) */
	SERVE_NOBODY_MEMFD /* listen as root, then create the memfd as uid 65534 (root only) */
};

struct server {
	pid_t pid;
	int done_w; /* closing it lets the server exit */
};

static int listen_at(const char *path, int bind_only)
{
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa;
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, path);
	unlink(path);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof sa) != 0)
		return -1;
	if (!bind_only && listen(s, 8) != 0)
		return -1;
	return s;
}

static int send_fds(int c, const int *fds, int n, uint32_t abi, uint64_t magic)
{
	struct {
		uint64_t magic;
		uint32_t abi;
		uint32_t size;
	} hello = {magic, abi, TH_PAGE_SIZE};
	union {
		char buf[CMSG_SPACE(sizeof(int) * 2)];
		struct cmsghdr align;
	} ctl;
	memset(&ctl, 0, sizeof ctl);
	struct iovec iov = {.iov_base = &hello, .iov_len = sizeof hello};
	struct msghdr msg;
	memset(&msg, 0, sizeof msg);
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	if (n) {
		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)n);
	}
	return sendmsg(c, &msg, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

static int sealed_copy_as_nobody(const void *src)
{
	int fd = memfd_create("other", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, TH_PAGE_SIZE) != 0)
		return -1;
	void *m = mmap(NULL, TH_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return -1;
	memcpy(m, src, TH_PAGE_SIZE);
	fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE);
	return fd;
}

/* Fork a server at `path` that answers one connection. The page descriptor
 * (if any) and its mapping `page` are inherited. */
static struct server start_server(const char *path, enum serve how, int page_fd, const void *page)
{
	int ready[2], done[2];
	struct server sv = {-1, -1};
	if (pipe(ready) != 0 || pipe(done) != 0)
		return sv;
	pid_t pid = fork();
	if (pid == 0) {
		close(ready[0]);
		close(done[1]);
		int s;
		if (how == SERVE_AS_NOBODY) {
			s = listen_at(path, 1);
			if (s < 0 || setgid(65534) != 0 || setuid(65534) != 0 || listen(s, 8) != 0)
				_exit(3);
		} else {
			s = listen_at(path, 0);
			if (s < 0)
				_exit(3);
			if (how == SERVE_NOBODY_MEMFD) {
				if (setgid(65534) != 0 || setuid(65534) != 0)
					_exit(3);
				page_fd = sealed_copy_as_nobody(page);
			}
		}
		char one = 1;
		if (write(ready[1], &one, 1) != 1)
			_exit(3);
		/* a connection, or the parent is done with us (a refusal
		 * before connecting) */
		struct pollfd p[2] = {{.fd = s, .events = POLLIN, .revents = 0},
				      {.fd = done[0], .events = POLLIN, .revents = 0}};
		if (poll(p, 2, 5000) >= 1 && (p[0].revents & POLLIN)) {
			int c = accept(s, NULL, NULL);
			int fds[2] = {page_fd, page_fd};
			int pp[2];
			switch (how) {
			case SERVE_PAGE_RO: {
				char pth[64];
				snprintf(pth, sizeof pth, "/proc/self/fd/%d", page_fd);
				int ro = open(pth, O_RDONLY | O_CLOEXEC);
				if (ro < 0)
					_exit(4);
				send_fds(c, &ro, 1, TH_PAGE_ABI, TH_PAGE_MAGIC);
				break;
			}
			case SERVE_PAGE:
			case SERVE_AS_NOBODY:
			case SERVE_NOBODY_MEMFD: send_fds(c, fds, 1, TH_PAGE_ABI, TH_PAGE_MAGIC); break;
			case SERVE_NO_FD: send_fds(c, fds, 0, TH_PAGE_ABI, TH_PAGE_MAGIC); break;
			case SERVE_TWO_FDS: send_fds(c, fds, 2, TH_PAGE_ABI, TH_PAGE_MAGIC); break;
			case SERVE_BAD_HELLO: send_fds(c, fds, 1, TH_PAGE_ABI, 42); break;
			case SERVE_NEXT_ABI_HELLO: send_fds(c, fds, 1, TH_PAGE_ABI + 1, TH_PAGE_MAGIC); break;
			case SERVE_PIPE:
				if (pipe(pp) == 0)
					send_fds(c, pp, 1, TH_PAGE_ABI, TH_PAGE_MAGIC);
				break;
			case SERVE_NOTHING: break;
			}
			/* keep the connection open until told, as a stopped
			 * daemon would */
			char b;
			struct pollfd q = {.fd = done[0], .events = POLLIN, .revents = 0};
			poll(&q, 1, 10000);
			ssize_t k = read(done[0], &b, 1);
			(void)k;
		}
		_exit(0);
	}
	close(ready[1]);
	close(done[0]);
	char b = 0;
	struct pollfd q = {.fd = ready[0], .events = POLLIN, .revents = 0};
	if (poll(&q, 1, 5000) != 1 || read(ready[0], &b, 1) != 1)
		b = 0;
	close(ready[0]);
	sv.pid = pid;
	sv.done_w = done[1];
	if (b != 1) {
		close(done[1]);
		waitpid(pid, NULL, 0);
		sv.pid = -1;
	}
	return sv;
}

static void stop_server(struct server *sv)
{
	if (sv->pid <= 0)
		return;
	close(sv->done_w);
	waitpid(sv->pid, NULL, 0);
	sv->pid = -1;
}

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static int count_page_maps(void)
{
	/* memfd mappings show as "/memfd:NAME (deleted)" */
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return -1;
	char line[512];
	int n = 0;
	while (fgets(line, sizeof line, f))
		if (strstr(line, "/memfd:"))
			n++;
	fclose(f);
	return n;
}

/* The file mode of the next page_memfd (timehandsd's: 0644). */
static unsigned page_fmode = 0644;

/* A page in a memfd made like the daemon makes it, then cut to `size`
 * bytes, then sealed with `seals`. *map is a writable mapping of the page
 * when it was left whole, else NULL. */
static int page_memfd(int seals, size_t size, void **map)
{
	*map = NULL;
	int fd = memfd_create("timehands-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, TH_PAGE_SIZE) != 0 || fchmod(fd, page_fmode) != 0)
		return -1;
	void *m = mmap(NULL, TH_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return -1;
	make_page(m, 1, 0);
	if (size != TH_PAGE_SIZE) {
		munmap(m, TH_PAGE_SIZE);
		m = NULL;
		if (ftruncate(fd, (off_t)size) != 0)
			return -1;
	}
	if (seals && fcntl(fd, F_ADD_SEALS, seals) != 0)
		return -1;
	*map = m;
	return fd;
}

static char tmpdir[64];
static char sockpath[128];
static void spoil_dead(void *p, pid_t pid);

static void attach_case(const char *name, enum serve how, int seals, size_t size, void (*spoil)(void *, pid_t),
			int want, const char *text)
{
	void *map = NULL;
	int fd = page_memfd(seals, size, &map);
	int fds_before = count_fds();
	CHECK(fd >= 0, "%s: memfd", name);
	if (fd < 0)
		return;
	struct server sv = start_server(sockpath, how, fd, map);
	CHECK(sv.pid > 0, "%s: server did not start", name);
	if (map) {
		struct th_page_hdr *h = map;
		h->publisher_pid = (uint32_t)sv.pid;
		if (spoil)
			spoil(map, sv.pid);
	}
	struct th_page_map m;
	char why[200];
	int64_t t0 = kns(CLOCK_MONOTONIC);
	/* The publisher beats just before the attach: a page made before a
	 * slow fork must not look stale (a dead publisher is a case of its own). */
	if (map && spoil != spoil_dead)
		th_page_beat(map, (uint64_t)kns(CLOCK_MONOTONIC));
	int rc = th_page_attach_timeout(sockpath, 300, &m, why, sizeof why);
	int64_t took = kns(CLOCK_MONOTONIC) - t0;
	if (rc == TH_PAGE_ESTALE && want == 0 && strstr(why, "ms old")) {
		/* the machine paused us for longer than the staleness limit
		 * between the beat and the check: not what is tested here */
		printf("  (%s: %s; retried)\n", name, why);
		stop_server(&sv);
		munmap(map, TH_PAGE_SIZE);
		close(fd);
		attach_case(name, how, seals, size, spoil, want, text);
		return;
	}
	if (want == 0) {
		CHECK(rc == 0, "%s: refused: %s", name, why);
		if (rc == 0) {
			CHECK(m.hdr && m.tl && m.size == TH_PAGE_SIZE, "%s: map", name);
			CHECK(th_page_check(&m, (uint64_t)kns(CLOCK_MONOTONIC), why, sizeof why) == 0, "%s: check: %s",
			      name, why);
			/* read-only: the mapping refuses a write */
			CHECK(mprotect((void *)m.hdr, m.size, PROT_READ | PROT_WRITE) != 0, "%s: mapping can be made writable",
			      name);
			/* the publisher stops: stale; shuts down: invalid */
			struct th_page_hdr *h = map;
			uint64_t now = (uint64_t)kns(CLOCK_MONOTONIC);
			CHECK(th_page_check(&m, now + m.max_age_ns + 1000000, why, sizeof why) == TH_PAGE_ESTALE,
			      "%s: stale not seen", name);
			th_page_set_flags(h, 0);
			CHECK(th_page_check(&m, now, why, sizeof why) == TH_PAGE_ESTALE && strstr(why, "not valid"),
			      "%s: invalid not seen: %s", name, why);
			th_page_detach(&m);
			CHECK(m.hdr == NULL, "detach");
		}
	} else {
		CHECK(rc == want && strstr(why, text), "%s: rc %d (want %d), reason \"%s\" (want \"%s\")", name, rc,
		      want, why, text);
		CHECK(m.hdr == NULL, "%s: map left set", name);
	}
	CHECK(took < 2000000000LL, "%s: attach took %lld ms", name, (long long)(took / 1000000));
	stop_server(&sv);
	CHECK(count_fds() == fds_before, "%s: %d descriptors before, %d after", name, fds_before, count_fds());
	if (map)
		munmap(map, TH_PAGE_SIZE);
	close(fd);
	printf("  %-22s %s%s\n", name, want ? "refused: " : "accepted", want ? why : "");
}

static void spoil_magic(void *p, pid_t pid)
{
	(void)pid;
	((struct th_page_hdr *)p)->magic = 0x1122334455667788ull;
}
static void spoil_abi(void *p, pid_t pid)
{
	(void)pid;
	((struct th_page_hdr *)p)->abi = TH_PAGE_ABI + 1;
}
static void spoil_boot(void *p, pid_t pid)
{
	(void)pid;
	((struct th_page_hdr *)p)->boot_id[0] ^= 0xff;
}
static void spoil_dead(void *p, pid_t pid)
{
	(void)pid;
	/* a publisher that stopped a second ago */
	atomic_store(&((struct th_page_hdr *)p)->heartbeat, (uint64_t)kns(CLOCK_MONOTONIC) - 1000000000ull);
}
static void spoil_pid(void *p, pid_t pid)
{
	((struct th_page_hdr *)p)->publisher_pid = (uint32_t)pid + 1;
}
static void spoil_random(void *p, pid_t pid)
{
	(void)pid;
	unsigned char *b = p;
	uint64_t x = 0x9e3779b97f4a7c15ull ^ (uint64_t)kns(CLOCK_MONOTONIC);
	for (size_t i = 0; i < TH_PAGE_SIZE; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (unsigned char)x;
	}
}

static void test_transport(void)
{
	strcpy(tmpdir, "/tmp/th-page-XXXXXX");
	CHECK(mkdtemp(tmpdir) != NULL, "mkdtemp");
	chmod(tmpdir, 0755);
	snprintf(sockpath, sizeof sockpath, "%s/page", tmpdir);
	int all = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL;
	int maps_before = count_page_maps();

	attach_case("good page", SERVE_PAGE, all, TH_PAGE_SIZE, NULL, 0, "");
	attach_case("unsealed", SERVE_PAGE, 0, TH_PAGE_SIZE, NULL, -EPERM, "F_SEAL_SHRINK");
	/* timehandsd's own way: a page writable by its owner only, served
	 * read-only */
	int dseals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	attach_case("read-only, no write seal", SERVE_PAGE_RO, dseals, TH_PAGE_SIZE, NULL, 0, "");
	attach_case("writable descriptor", SERVE_PAGE, dseals, TH_PAGE_SIZE, NULL, -EPERM, "descriptor is writable");
	attach_case("read-only, unsealed", SERVE_PAGE_RO, 0, TH_PAGE_SIZE, NULL, -EPERM, "F_SEAL_SHRINK");
	page_fmode = 0664;
	attach_case("group-writable page", SERVE_PAGE_RO, dseals, TH_PAGE_SIZE, NULL, -EPERM, "(mode 664)");
	page_fmode = 0666;
	attach_case("world-writable page", SERVE_PAGE_RO, dseals, TH_PAGE_SIZE, NULL, -EPERM, "(mode 666)");
	attach_case("sealed, mode 0666", SERVE_PAGE, all, TH_PAGE_SIZE, NULL, 0, "");
	page_fmode = 0644;
	attach_case("truncated", SERVE_PAGE, all, 1000, NULL, TH_PAGE_EFORMAT, "1000 bytes");
	attach_case("short", SERVE_PAGE, all, 2048, NULL, TH_PAGE_EFORMAT, "2048 bytes");
	attach_case("tiny", SERVE_PAGE, all, 100, NULL, -EPROTO, "100 bytes");
	attach_case("empty", SERVE_PAGE, all, 0, NULL, -EPROTO, "0 bytes");
	attach_case("random bytes", SERVE_PAGE, all, TH_PAGE_SIZE, spoil_random, TH_PAGE_EFORMAT, "not a timehands page");
	attach_case("wrong magic", SERVE_PAGE, all, TH_PAGE_SIZE, spoil_magic, TH_PAGE_EFORMAT, "magic 0x1122334455667788");
	attach_case("newer ABI", SERVE_PAGE, all, TH_PAGE_SIZE, spoil_abi, TH_PAGE_EFORMAT, "newer timehandsd");
	attach_case("previous boot", SERVE_PAGE, all, TH_PAGE_SIZE, spoil_boot, TH_PAGE_EOTHER, "another boot");
	attach_case("dead publisher", SERVE_PAGE, all, TH_PAGE_SIZE, spoil_dead, TH_PAGE_ESTALE, "stopped or dead");
	attach_case("other publisher pid", SERVE_PAGE, all, TH_PAGE_SIZE, spoil_pid, TH_PAGE_EFORMAT, "publisher pid");
	attach_case("silent server", SERVE_NOTHING, all, TH_PAGE_SIZE, NULL, -ETIMEDOUT, "did not send");
	attach_case("no descriptor", SERVE_NO_FD, all, TH_PAGE_SIZE, NULL, -EPROTO, "no descriptor");
	attach_case("two descriptors", SERVE_TWO_FDS, all, TH_PAGE_SIZE, NULL, -EPROTO, "more than one");
	attach_case("bad greeting", SERVE_BAD_HELLO, all, TH_PAGE_SIZE, NULL, -EPROTO, "does not speak");
	char next_abi[40];
	snprintf(next_abi, sizeof next_abi, "serves page ABI %u", TH_PAGE_ABI + 1);
	attach_case("greeting of the next ABI", SERVE_NEXT_ABI_HELLO, all, TH_PAGE_SIZE, NULL, -EPROTO, next_abi);
	attach_case("pipe descriptor", SERVE_PIPE, all, TH_PAGE_SIZE, NULL, -EPERM, "not a memfd");
	if (geteuid() == 0) {
		attach_case("peer uid 65534", SERVE_AS_NOBODY, all, TH_PAGE_SIZE, NULL, -EPERM, "served by uid 65534");
		attach_case("memfd uid 65534", SERVE_NOBODY_MEMFD, all, TH_PAGE_SIZE, NULL, -EPERM,
			    "memfd is owned by uid 65534");
	} else {
		printf("  (peer/memfd owned by another uid: needs root; covered by the policy checks)\n");
	}

	/* Path-level refusals. */
	struct th_page_map m;
	char why[200];
	unlink(sockpath);
	int rc = th_page_attach(sockpath, &m, why, sizeof why);
	CHECK(rc == -ENOENT && strstr(why, "no timehandsd socket"), "missing socket: %d %s", rc, why);
	int s = listen_at(sockpath, 1); /* bound, never listening: a stale socket */
	rc = th_page_attach(sockpath, &m, why, sizeof why);
	CHECK(rc == -ECONNREFUSED && strstr(why, "stale"), "stale socket: %d %s", rc, why);
	close(s);
	unlink(sockpath);
	int f = open(sockpath, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	close(f);
	rc = th_page_attach(sockpath, &m, why, sizeof why);
	CHECK(rc == -EPERM && strstr(why, "is not a socket"), "regular file: %d %s", rc, why);
	unlink(sockpath);
	rc = th_page_attach("relative/page", &m, why, sizeof why);
	CHECK(rc == -EINVAL, "relative path: %d %s", rc, why);
	char longp[200];
	memset(longp, 'a', sizeof longp);
	longp[0] = '/';
	longp[sizeof longp - 1] = 0;
	rc = th_page_attach(longp, &m, why, sizeof why);
	CHECK(rc == -ENAMETOOLONG, "long path: %d %s", rc, why);

	/* A world-writable (sticky or not) or group-writable directory. */
	int modes[] = {0777, 01777, 0775};
	for (int i = 0; i < 3; i++) {
		chmod(tmpdir, (mode_t)modes[i]);
		attach_case(i == 0 ? "world-writable dir" : i == 1 ? "sticky /tmp-like dir" : "group-writable dir",
			    SERVE_PAGE, all, TH_PAGE_SIZE, NULL, -EPERM, "group- or world-writable");
	}
	chmod(tmpdir, 0755);
	if (geteuid() == 0) {
		/* a directory owned by another user */
		if (chown(tmpdir, 65534, 65534) == 0) {
			attach_case("dir of uid 65534", SERVE_PAGE, all, TH_PAGE_SIZE, NULL, -EPERM, "owned by uid 65534");
			CHECK(chown(tmpdir, 0, 0) == 0, "chown back");
		}
	}
	CHECK(count_page_maps() == maps_before, "page mappings leaked: %d before, %d after", maps_before,
	      count_page_maps());
	unlink(sockpath);
	rmdir(tmpdir);
}

int main(void)
{
	reap_children_at_exit();
	signal(SIGPIPE, SIG_IGN);
	test_validator();
	test_policy();
	test_transport();
	return check_done("test_page");
}
