/*
 * The library in shared mode, against a real timehandsd:
 *   - with the daemon running the process reads the page (mode shared), every
 *     clock within the kernel sandwich;
 *   - the daemon SIGSTOPped and SIGCONTed many times, then SIGKILLed, while
 *     two threads read: no backward step within or across threads (streaming
 *     shape), readings stay within the kernel sandwich, status leaves shared
 *     mode with a reason within 2 s of the kill;
 *   - a new daemon on the same path is picked up again (with
 *     TIMEHANDS_PAGE_RECONNECT=1; "noreconnect": not without it);
 *   - "fdstore": this test plays the service manager (NOTIFY_SOCKET, the
 *     descriptor store, LISTEN_FDS): the daemon stores its page, a restarted
 *     daemon continues it, and the running process rejoins it without
 *     TIMEHANDS_PAGE_RECONNECT, after a SIGKILL and after a clean stop; the
 *     descriptor readers get is read-only.
 * Usage: test_shared_mode PATH-OF-TIMEHANDSD [noreconnect|fdstore]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "reap.h"
#include "timehands.h"

#define MS 1000000LL

static int failures;
#define CHECK(c, ...)                                                                 \
	do {                                                                          \
		if (!(c) && failures++ < 20) {                                        \
			fprintf(stderr, "%s:%d: CHECK(%s): ", __FILE__, __LINE__, #c); \
			fprintf(stderr, __VA_ARGS__);                                 \
			fputc('\n', stderr);                                          \
		}                                                                     \
	} while (0)

static char dir[64], sock[96], logf[96], notify_path[96];
static const char *daemon_bin;
static int notify_fd = -1; /* the service manager's end, in fdstore mode */

static int64_t kns(clockid_t id)
{
	struct timespec t;
	clock_gettime(id, &t);
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The library call. */
static int64_t tns_lib(clockid_t id)
{
	struct timespec t;
	(th_clock_gettime)(id, &t);
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* What a program calling th_clock_gettime() with a constant id gets: the
 * header's inline read for the fine clocks (where it has one). */
static int64_t tns(clockid_t id)
{
	struct timespec t;
	switch (id) {
	case CLOCK_MONOTONIC: th_clock_gettime(CLOCK_MONOTONIC, &t); break;
	case CLOCK_REALTIME: th_clock_gettime(CLOCK_REALTIME, &t); break;
	case CLOCK_BOOTTIME: th_clock_gettime(CLOCK_BOOTTIME, &t); break;
	case CLOCK_TAI: th_clock_gettime(CLOCK_TAI, &t); break;
	case CLOCK_MONOTONIC_RAW: th_clock_gettime(CLOCK_MONOTONIC_RAW, &t); break;
	default: return tns_lib(id);
	}
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Starts timehandsd; in fdstore mode with NOTIFY_SOCKET, and `stored` (>= 0)
 * passed as the service manager passes a stored descriptor. */
static pid_t start_daemon(int stored)
{
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(logf, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		unsetenv("NOTIFY_SOCKET");
		if (notify_fd >= 0)
			setenv("NOTIFY_SOCKET", notify_path, 1);
		if (stored >= 0) {
			if (stored == 3)
				fcntl(3, F_SETFD, 0);
			else if (dup2(stored, 3) != 3)
				_exit(126);
			char pid_s[24];
			snprintf(pid_s, sizeof pid_s, "%ld", (long)getpid());
			setenv("LISTEN_PID", pid_s, 1);
			setenv("LISTEN_FDS", "1", 1);
			setenv("LISTEN_FDNAMES", "page", 1);
		}
		execl(daemon_bin, daemon_bin, "--foreground", "--page", sock, (char *)NULL);
		_exit(127);
	}
	/* wait until it serves: one more "serving" line in its log (a client
	 * connecting earlier may wait in the listen backlog longer than the
	 * library's attach timeout on a loaded machine) */
	static int started;
	started++;
	for (int i = 0; i < 1000; i++) {
		int n = 0;
		FILE *f = fopen(logf, "r");
		char line[512];
		while (f && fgets(line, sizeof line, f))
			n += strstr(line, "serving ") != NULL;
		if (f)
			fclose(f);
		if (n >= started)
			return pid;
		usleep(10000);
	}
	return pid;
}

static int mode_now(char *reason, size_t n)
{
	struct th_status st;
	th_status(&st, sizeof st);
	if (reason)
		snprintf(reason, n, "%s", st.reason);
	return (int)st.mode;
}

/* Reads (several clocks) until the mode is `want` or the limit passes. */
static int wait_mode(int want, int64_t limit_ms)
{
	int64_t end = kns(CLOCK_MONOTONIC) + limit_ms * MS;
	while (kns(CLOCK_MONOTONIC) < end) {
		for (int i = 0; i < 1000; i++) {
			tns(CLOCK_MONOTONIC);
			tns(CLOCK_REALTIME_COARSE);
		}
		if (mode_now(NULL, 0) == want)
			return 1;
		usleep(1000);
	}
	return 0;
}

/* ------------------------------------------------------------ service manager */

/* One message on socket `s`: up to n - 1 bytes into buf (terminated), and
 * the first descriptor it carried into *fd (-1 if none; any others are
 * closed). Returns the byte count, or -1. */
static ssize_t receive_with_fd(int s, char *buf, size_t n, int *fd)
{
	*fd = -1;
	buf[0] = 0;
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = buf, .iov_len = n - 1};
	struct msghdr msg;
	memset(&msg, 0, sizeof msg);
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = ctl.buf;
	msg.msg_controllen = sizeof ctl.buf;
	ssize_t k = recvmsg(s, &msg, MSG_CMSG_CLOEXEC);
	if (k < 0)
		return -1;
	buf[k] = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int got[4];
		size_t m = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		memcpy(got, CMSG_DATA(c), m * sizeof(int));
		for (size_t i = 0; i < m; i++) {
			if (*fd < 0)
				*fd = got[i];
			else
				close(got[i]);
		}
	}
	return k;
}

/* One notification from the daemon (within 5 s): its text, and the descriptor
 * it carried (-1 if none). */
static int receive_notify(char *text, size_t n, int *fd)
{
	*fd = -1;
	text[0] = 0;
	struct pollfd q = {.fd = notify_fd, .events = POLLIN, .revents = 0};
	if (poll(&q, 1, 5000) != 1)
		return -1;
	return receive_with_fd(notify_fd, text, n, fd) < 0 ? -1 : 0;
}

/* The daemon said READY=1 and stored its page: the stored descriptor, or
 * -1 (a failed check). */
static int expect_store(const char *when)
{
	char text[256];
	int fd = -1;
	int rc = receive_notify(text, sizeof text, &fd);
	CHECK(rc == 0 && strstr(text, "READY=1") && strstr(text, "FDSTORE=1") && strstr(text, "FDNAME=page") &&
		      fd >= 0,
	      "%s: notification \"%s\", descriptor %d", when, text, fd);
	if (fd >= 0) {
		int acc = fcntl(fd, F_GETFL);
		CHECK(acc >= 0 && (acc & O_ACCMODE) == O_RDWR, "%s: stored descriptor not writable", when);
	}
	return fd;
}

/* The descriptor a reader gets from the socket: read-only, mode 0644, and
 * neither writable nor mappable for writing. */
static void check_served_descriptor(void)
{
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa;
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
	CHECK(s >= 0 && connect(s, (struct sockaddr *)&sa, sizeof sa) == 0, "connect to %s", sock);
	char hello[64];
	int fd = -1;
	receive_with_fd(s, hello, sizeof hello, &fd);
	close(s);
	CHECK(fd >= 0, "no descriptor from the daemon");
	if (fd < 0)
		return;
	struct stat st;
	int acc = fcntl(fd, F_GETFL);
	CHECK(acc >= 0 && (acc & O_ACCMODE) == O_RDONLY, "served descriptor is not read-only (flags %#x)", acc);
	CHECK(fstat(fd, &st) == 0 && (st.st_mode & 07777) == 0644, "served page has mode %o", st.st_mode & 07777);
	void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m == MAP_FAILED, "the served page can be mapped writable");
	if (m != MAP_FAILED)
		munmap(m, 4096);
	char z = 0;
	CHECK(pwrite(fd, &z, 1, 0) < 0, "the served page can be written");
	CHECK(ftruncate(fd, 0) != 0, "the served page can be truncated");
	close(fd);
}

static int log_count(const char *what)
{
	int n = 0;
	FILE *f = fopen(logf, "r");
	char line[512];
	while (f && fgets(line, sizeof line, f))
		n += strstr(line, what) != NULL;
	if (f)
		fclose(f);
	return n;
}

/* ------------------------------------------------------------ readers */

static _Atomic int stop;
static _Atomic int64_t published;
static _Atomic long back, outside, reads;

static void *reader(void *arg)
{
	int publisher = arg != NULL;
	int64_t last = 0, last_real = 0, last_coarse = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		int64_t seen = atomic_load_explicit(&published, memory_order_acquire);
		int64_t k1 = kns(CLOCK_MONOTONIC);
		int64_t v = tns(CLOCK_MONOTONIC);
		int64_t k2 = kns(CLOCK_MONOTONIC);
		int64_t r = tns(CLOCK_REALTIME);
		int64_t c = tns(CLOCK_MONOTONIC_COARSE);
		/* the library call after the inline read, before the next
		 * inline read */
		int64_t vl = tns_lib(CLOCK_MONOTONIC);
		if (v < last || v < seen || r < last_real || c < last_coarse)
			atomic_fetch_add(&back, 1);
		/* readings lead the kernel by at most a record's error bound
		 * around a handover; 1 us in steady state */
		if (v < k1 - 1000 || v > k2 + 20000)
			atomic_fetch_add(&outside, 1);
		if (c > tns(CLOCK_MONOTONIC))
			atomic_fetch_add(&back, 1); /* G4 */
		if (vl < v)
			atomic_fetch_add(&back, 1);
		last = vl;
		last_real = r;
		last_coarse = c;
		if (publisher)
			atomic_store_explicit(&published, v, memory_order_release);
		atomic_fetch_add_explicit(&reads, 1, memory_order_relaxed);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s TIMEHANDSD\n", argv[0]);
		return 2;
	}
	daemon_bin = argv[1];
	reap_children_at_exit();
	/* "noreconnect": the default, a running program does not look for a
	 * restarted daemon; otherwise TIMEHANDS_PAGE_RECONNECT=1 and it does.
	 * "fdstore": the default, and the restarted daemon continues the page. */
	const char *variant = argc > 2 ? argv[2] : "";
	int fdstore = strcmp(variant, "fdstore") == 0;
	int reconnect = !(strcmp(variant, "noreconnect") == 0 || fdstore);
	setenv("TIMEHANDS_PAGE_RECONNECT", reconnect ? "1" : "0", 1);
	snprintf(dir, sizeof dir, "/tmp/th-shared-XXXXXX");
	if (!mkdtemp(dir))
		return 2;
	chmod(dir, 0755);
	snprintf(sock, sizeof sock, "%s/page", dir);
	snprintf(logf, sizeof logf, "%s/log", dir);
	setenv("TIMEHANDS_PAGE", sock, 1);
	if (fdstore) {
		snprintf(notify_path, sizeof notify_path, "%s/notify", dir);
		notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		struct sockaddr_un sa;
		memset(&sa, 0, sizeof sa);
		sa.sun_family = AF_UNIX;
		snprintf(sa.sun_path, sizeof sa.sun_path, "%s", notify_path);
		if (notify_fd < 0 || bind(notify_fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
			perror("notify socket");
			return 2;
		}
		/* writable for the daemon after it drops to nobody, like
		 * systemd's own notification socket */
		chmod(notify_path, 0666);
	}

	pid_t d = start_daemon(-1);
	int stored = fdstore ? expect_store("first start") : -1;
	/* The first reading attaches this process: shared mode. The library
	 * gives the daemon a millisecond to answer (G8) and stays local for
	 * good when it does not, which a loaded machine can cause: then the
	 * whole test starts again in a new process, three times at most. */
	if (!wait_mode(TH_MODE_SHARED, 3000)) {
		const char *again = getenv("TH_TEST_ATTACH_AGAIN");
		int n = again ? atoi(again) : 0;
		char why0[200];
		mode_now(why0, sizeof why0);
		if (n < 3) {
			fprintf(stderr, "not shared at start (%s): starting again\n", why0);
			kill(d, SIGTERM);
			waitpid(d, NULL, 0);
			unlink(sock);
			unlink(logf);
			if (fdstore)
				unlink(notify_path);
			rmdir(dir);
			char nb[16];
			snprintf(nb, sizeof nb, "%d", n + 1);
			setenv("TH_TEST_ATTACH_AGAIN", nb, 1);
			execv("/proc/self/exe", argv);
		}
		CHECK(0, "not shared with the daemon running (%s)", why0);
	}
	char why[200];
	printf("with the daemon: mode %d (%s)\n", mode_now(why, sizeof why), why);

	/* every clock within the sandwich while shared */
	long sand = 0;
	int64_t worst = 0;
	clockid_t worst_id = 0;
	for (int i = 0; i < 100000; i++) {
		clockid_t ids[] = {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME, CLOCK_TAI, CLOCK_MONOTONIC_RAW};
		for (size_t j = 0; j < 5; j++) {
			for (int lib = 0; lib < 2; lib++) {
				int64_t a = kns(ids[j]), v = lib ? tns_lib(ids[j]) : tns(ids[j]), b = kns(ids[j]);
				int64_t out = v < a ? a - v : v > b ? v - b : 0;
				if (out > 1000)
					sand++;
				if (out > worst)
					worst = out, worst_id = ids[j];
			}
		}
	}
	CHECK(sand == 0, "%ld readings outside the kernel sandwich in shared mode (worst %lld ns outside, clock id %d)",
	      sand, (long long)worst, (int)worst_id);
#ifdef TH__FINE_INLINE
	/* The header's read leaves the page to the library (its readings
	 * above are the library's page reads): none served inline. */
	{
		const struct th__fast *f = th__fast();
		struct th__fine_ctx x = {f->tl, f->g3, f->kseq ? f->kseq : &th__kcount_none, *f->ctr_early, 0};
		long inl = 0, n = 0;
		th__fine_fill();
		/* a loaded machine can make the daemon late, and the process
		 * leave the page meanwhile: batches until one met the page
		 * (a library read in between, by which the process joins it
		 * again) */
		for (int batch = 0; batch < 100 && n == 0; batch++) {
			if (batch) {
				struct timespec q;
				usleep(30000);
				(th_clock_gettime)(CLOCK_MONOTONIC, &q);
			}
			for (int i = 0; i < 100000; i++) {
				int64_t sec, ns;
				/* counted where the word named the page before and after */
				uint64_t w0 = __atomic_load_n(&x.tl->cur, __ATOMIC_ACQUIRE);
				TH__PRE_FENCE();
				int ok = th__fine_rec(x.tl, &x, i % 5, 1, *f->ctr_early, 0, &sec, &ns);
				uint64_t w1 = __atomic_load_n(&x.tl->cur, __ATOMIC_ACQUIRE);
				if (th_abi_cur_slot(w0) == TH_ABI_SLOT_SHARED && th_abi_cur_slot(w1) == TH_ABI_SLOT_SHARED) {
					n++;
					inl += ok;
				}
			}
		}
		CHECK(n > 0 && inl == 0, "shared mode: %ld of %ld page readings served inline", inl, n);
		printf("shared mode: %ld of %ld page readings served inline (the library's)\n", inl, n);
	}
	/* Programs built with a header before minor 7 read the page inline
	 * themselves, from what th__fast still publishes for them (page_tl,
	 * sh_ctr, sh_delta): that read, as those headers made it, serves the
	 * page, inside the kernel's sandwich. A batch during which the daemon
	 * was late is refused to the library as it should be; taken again, 100
	 * times at most (3 s). */
	{
		const struct th__fast *f = th__fast();
		const clockid_t kid[5] = {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME, CLOCK_TAI, CLOCK_MONOTONIC_RAW};
		long served = 0, n = 0, outside = 0;
		/* those headers read inline only where the counter is read
		 * first (ctr_early 1 to 3), as this process may here */
		uint32_t op = *f->ctr_early;
		CHECK(f->minor >= 4 && f->page_tl && f->sh_ctr && f->sh_delta, "th__fast lacks what older headers read");
		if (op - 1u >= 3u)
			printf("older headers' page read: none here (ctr_early %u: they call the library)\n", op);
		for (int batch = 0; batch < 100 && !(served > n / 2) && f->page_tl && f->sh_ctr && f->sh_delta && op - 1u < 3u;
		     batch++) {
			if (batch)
				usleep(30000);
			served = n = outside = 0;
			for (int i = 0; i < 100000; i++) {
				int ck = i % 5;
				int64_t a = kns(kid[ck]);
				const struct th_abi_timeline *own = (const struct th_abi_timeline *)f->tl;
				uint64_t lc = __atomic_load_n(&own->cur, __ATOMIC_ACQUIRE);
				if (th_abi_cur_slot(lc) != TH_ABI_SLOT_SHARED)
					continue;
				n++;
				uint64_t c = th__ctr_op(1, op == 3 ? 1 : op);
				__asm__ volatile("" ::: "memory");
				const struct th_abi_timeline *pt = (const struct th_abi_timeline *)f->page_tl;
				uint64_t cur = __atomic_load_n(&pt->cur, __ATOMIC_ACQUIRE);
				const uint32_t *kc = f->kseq ? f->kseq : &th__kcount_none;
				int64_t sec, ns;
				uint64_t ep;
				if (!th_abi_eval(th_abi_rec_of(pt, cur), cur, NULL, ck, 1, c, th__ctr_late, &kc, 0, 1, &own->cur, lc,
						 f->sh_ctr, f->sh_delta, &sec, &ns, &ep))
					continue;
				int64_t b = kns(kid[ck]), v = sec * 1000000000LL + ns;
				served++;
				if (v < a - 1000 || v > b + 1000)
					outside++;
			}
		}
		if (op - 1u < 3u) {
			CHECK(served > n / 2 && outside == 0,
			      "older headers' page read: %ld of %ld served, %ld outside the sandwich", served, n, outside);
			printf("older headers' page read: %ld of %ld served, all inside the kernel's sandwich\n", served, n);
		}
	}
#endif

	pthread_t t[2];
	pthread_create(&t[0], NULL, reader, (void *)1);
	pthread_create(&t[1], NULL, reader, NULL);

	/* stop and continue the daemon at random moments */
	unsigned seed = 7;
	int stops = 0, left = 0, back_shared = 0;
	for (int i = 0; i < (reconnect ? 60 : 15); i++) {
		usleep(1000 + rand_r(&seed) % 20000);
		kill(d, SIGSTOP);
		stops++;
		int long_stop = i % 15 == 7;
		usleep(long_stop ? 300000 : (useconds_t)(rand_r(&seed) % 12000));
		if (long_stop && mode_now(NULL, 0) != TH_MODE_SHARED)
			left++;
		kill(d, SIGCONT);
		if (long_stop && wait_mode(TH_MODE_SHARED, 5000))
			back_shared++;
		else if (long_stop) {
			char why_not[200];
			int m = mode_now(why_not, sizeof why_not);
			fprintf(stderr, "long stop %d: not back in shared mode 5 s after SIGCONT: mode %d (%s)\n", i, m,
				why_not);
		}
	}
	int longs = reconnect ? 4 : 1;
	CHECK(left >= longs - 1 && left >= 1, "left shared mode only %d times in %d long stops", left, longs);
	CHECK(back_shared >= longs - 1 && back_shared >= 1, "came back to shared mode %d times in %d", back_shared,
	      longs);

	/* kill: leave shared within 2 s, with a reason */
	kill(d, SIGKILL);
	waitpid(d, NULL, 0);
	int64_t killed = kns(CLOCK_MONOTONIC);
	int ok = 0;
	while (kns(CLOCK_MONOTONIC) - killed < 2000 * MS) {
		if (mode_now(why, sizeof why) != TH_MODE_SHARED && why[0]) {
			ok = 1;
			break;
		}
		usleep(10000);
	}
	CHECK(ok, "still shared 2 s after the daemon was killed");
	printf("after SIGKILL: mode %d after %lld ms (%s)\n", mode_now(NULL, 0),
	       (long long)((kns(CLOCK_MONOTONIC) - killed) / MS), why);

	/* a new daemon on the same path is picked up again */
	unlink(sock);
	d = start_daemon(stored);
	if (fdstore) {
		/* twice: after the SIGKILL above, then after a clean stop */
		for (int round = 0; round < 2; round++) {
			int again = expect_store("restart");
			struct stat a, b;
			CHECK(again >= 0 && fstat(stored, &a) == 0 && fstat(again, &b) == 0 && a.st_ino == b.st_ino &&
				      a.st_dev == b.st_dev,
			      "the restarted daemon stored another page");
			if (again >= 0)
				close(again);
			CHECK(log_count("continuing the previous page") == round + 1, "restart %d: page not continued",
			      round + 1);
			int64_t t0 = kns(CLOCK_MONOTONIC);
			CHECK(wait_mode(TH_MODE_SHARED, 20000), "restart %d: the continued page was not rejoined (%s)",
			      round + 1, (mode_now(why, sizeof why), why));
			printf("restart %d: page continued, shared again after %lld ms\n", round + 1,
			       (long long)((kns(CLOCK_MONOTONIC) - t0) / MS));
			check_served_descriptor();
			if (round == 1)
				break;
			kill(d, SIGTERM);
			waitpid(d, NULL, 0);
			int64_t stopped = kns(CLOCK_MONOTONIC);
			int left_now = 0;
			while (kns(CLOCK_MONOTONIC) - stopped < 2000 * MS && !left_now) {
				left_now = mode_now(why, sizeof why) != TH_MODE_SHARED && why[0];
				usleep(10000);
			}
			CHECK(left_now, "still shared 2 s after the daemon stopped");
			printf("after SIGTERM: mode %d (%s)\n", mode_now(NULL, 0), why);
			d = start_daemon(stored);
		}
		close(stored);
	} else if (reconnect) {
		CHECK(wait_mode(TH_MODE_SHARED, 40000), "a restarted daemon was not picked up");
	} else {
		/* past the first reconnect backoff (1 s): still local, and the
		 * status says why */
		CHECK(!wait_mode(TH_MODE_SHARED, 3000), "reconnected without TIMEHANDS_PAGE_RECONNECT");
		mode_now(why, sizeof why);
		CHECK(strstr(why, "restarted timehandsd") != NULL, "no hint about the restarted daemon: %s", why);
	}
	printf("restarted daemon: mode %d (%s)\n", mode_now(why, sizeof why), why);

	atomic_store(&stop, 1);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	kill(d, SIGTERM);
	waitpid(d, NULL, 0);
	CHECK(atomic_load(&back) == 0, "%ld backward steps", atomic_load(&back));
	CHECK(atomic_load(&outside) == 0, "%ld readings outside the kernel sandwich", atomic_load(&outside));
	printf("%d stops, %ld reads, %ld backward, %ld outside\n", stops, atomic_load(&reads), atomic_load(&back),
	       atomic_load(&outside));
	unlink(sock);
	unlink(logf);
	if (fdstore) {
		close(notify_fd);
		unlink(notify_path);
	}
	rmdir(dir);
	if (failures) {
		fprintf(stderr, "shared-mode: %d checks failed\n", failures);
		return 1;
	}
	printf("shared-mode: ok\n");
	return 0;
}
