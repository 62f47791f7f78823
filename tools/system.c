/*
 * timehands enable --system / disable --system: the preload in
 * /etc/ld.so.preload, for every dynamically linked process the machine
 * starts from then on.
 *
 * enable lists the preload by its absolute path and keeps every byte of what
 * the file held; disable removes that line, and only it, so that a file that
 * was not touched in between is restored byte for byte: an absent file is
 * created as "PATH\n" and removed again; an empty one gets "PATH"; one that
 * ends in a newline gets "PATH\n" appended; one that does not gets "\nPATH".
 * Before it writes anything, enable runs the preload in child processes (a
 * self-test of this tool, and /bin/true): a preload that does not load, does
 * not interpose the clocks, reads a clock wrong or prints anything is
 * refused. The file is replaced by rename where it can be (a reader sees the
 * old list or the new one), else rewritten in place (a file bind-mounted
 * over it, as in a container).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define SYSTEM_FILE "/etc/ld.so.preload"
#define PRELOAD_BASENAME "libtimehands-preload.so"
#define FILE_MAX (1u << 20)

/* ------------------------------------------------------------ the list */

struct buf {
	char *p;
	size_t n;
};

/* The whole file: 1 and its bytes, 0 if it does not exist, -1 on error. */
static int read_all(const char *path, struct buf *b)
{
	b->p = NULL;
	b->n = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	size_t cap = 4096;
	b->p = malloc(cap);
	for (;;) {
		if (!b->p) {
			close(fd);
			errno = ENOMEM;
			return -1;
		}
		ssize_t r = read(fd, b->p + b->n, cap - b->n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (r == 0)
			break;
		b->n += (size_t)r;
		if (b->n == cap) {
			if (cap >= FILE_MAX) {
				close(fd);
				errno = EFBIG;
				return -1;
			}
			cap *= 2;
			char *q = realloc(b->p, cap);
			if (!q)
				free(b->p);
			b->p = q;
		}
	}
	close(fd);
	return 1;
}

static int write_fd_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Replace `path` with the bytes (mode 0644 where it is created): a new file
 * renamed over it, or, where rename cannot replace it (a bind mount), the
 * same file rewritten. */
static int write_all(const char *path, const char *p, size_t n)
{
	char tmp[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int dl = slash ? (int)(slash - path + 1) : 0;
	snprintf(tmp, sizeof tmp, "%.*s.%s.timehands-XXXXXX", dl, path, slash ? slash + 1 : path);
	struct stat st;
	mode_t mode = stat(path, &st) == 0 ? (st.st_mode & 07777) : 0644;
	int fd = mkstemp(tmp);
	if (fd >= 0) {
		int ok = fchmod(fd, mode) == 0 && write_fd_all(fd, p, n) == 0 && fsync(fd) == 0;
		ok = close(fd) == 0 && ok;
		if (ok && rename(tmp, path) == 0)
			return 0;
		int e = errno;
		unlink(tmp);
		if (e != EBUSY && e != EXDEV && e != EPERM) {
			errno = e;
			return -1;
		}
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	int ok = write_fd_all(fd, p, n) == 0 && fsync(fd) == 0;
	return close(fd) == 0 && ok ? 0 : -1;
}

/* Is the line [s, s + n) a timehands preload (any directory)? */
static int is_our_line(const char *s, size_t n)
{
	size_t bl = strlen(PRELOAD_BASENAME);
	return n > bl && s[0] == '/' && s[n - bl - 1] == '/' && memcmp(s + n - bl, PRELOAD_BASENAME, bl) == 0 &&
	       memchr(s, ' ', n) == NULL && memchr(s, '\t', n) == NULL && memchr(s, ':', n) == NULL;
}

/* The first timehands preload line of the list: its offset and length, or
 * -1. */
static long find_ours(const struct buf *b, size_t *len)
{
	size_t i = 0;
	while (i < b->n) {
		const char *nl = memchr(b->p + i, '\n', b->n - i);
		size_t e = nl ? (size_t)(nl - b->p) : b->n;
		if (is_our_line(b->p + i, e - i)) {
			*len = e - i;
			return (long)i;
		}
		i = e + 1;
	}
	return -1;
}

/* The list with `entry` added as enable adds it (see the top). */
static int list_add(const struct buf *in, int exists, const char *entry, struct buf *out)
{
	size_t el = strlen(entry);
	out->p = malloc(in->n + el + 2);
	if (!out->p)
		return -1;
	if (in->n)
		memcpy(out->p, in->p, in->n);
	out->n = in->n;
	if (exists && in->n > 0 && in->p[in->n - 1] != '\n')
		out->p[out->n++] = '\n';
	memcpy(out->p + out->n, entry, el);
	out->n += el;
	if (!exists || (in->n > 0 && in->p[in->n - 1] == '\n'))
		out->p[out->n++] = '\n';
	return 0;
}

/* The list without its timehands lines, as disable removes them: 1 and
 * *out (*remove_file: nothing is left of a file enable created), 0 if none
 * is there. */
static int list_remove(const struct buf *in, struct buf *out, int *remove_file)
{
	*remove_file = 0;
	out->p = malloc(in->n + 1);
	if (!out->p)
		return -1;
	memcpy(out->p, in->p, in->n);
	out->n = in->n;
	int removed = 0;
	size_t len;
	long at;
	while ((at = find_ours(out, &len)) >= 0) {
		size_t a = (size_t)at, e = a + len;
		if (a == 0 && e + 1 == out->n && out->p[e] == '\n' && !removed) {
			/* the whole file is the line enable created */
			*remove_file = 1;
			out->n = 0;
			return 1;
		}
		if (e < out->n) {
			e++; /* the line and its newline */
		} else if (a > 0) {
			a--; /* the last line, and the newline enable put before it */
		}
		memmove(out->p + a, out->p + e, out->n - e);
		out->n -= e - a;
		removed = 1;
	}
	return removed;
}

/* ----------------------------------------------------------- self-test */

static int64_t sys_ns(clockid_t id)
{
	struct timespec ts;
	syscall(SYS_clock_gettime, id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* `timehands __preload-selftest`, run by enable with the preload: 0 when the
 * preload serves this process's clocks, and serves them right. */
int th_cli_preload_selftest(void)
{
	Dl_info di;
	void *f = dlsym(RTLD_DEFAULT, "clock_gettime");
	if (!f || !dladdr(f, &di) || !di.dli_fname || !strstr(di.dli_fname, "timehands-preload")) {
		fprintf(stderr, "clock_gettime is not the preload's (%s)\n", f && di.dli_fname ? di.dli_fname : "?");
		return 1;
	}
	/* G1 as the tests check it: every reading between the kernel's
	 * around it (1 us of slack), time() never behind gettimeofday(). */
	const clockid_t ids[] = {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME};
	for (int i = 0; i < 3000; i++) {
		clockid_t id = ids[i % 3];
		struct timespec ts;
		int64_t k1 = sys_ns(id);
		if (clock_gettime(id, &ts) != 0) {
			fprintf(stderr, "clock_gettime(%d) failed\n", (int)id);
			return 1;
		}
		int64_t k2 = sys_ns(id), v = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
		if (v < k1 - 1000 || v > k2 + 1000) {
			fprintf(stderr, "clock_gettime(%d) %lld outside the kernel's [%lld, %lld]\n", (int)id,
				(long long)v, (long long)k1, (long long)k2);
			return 1;
		}
		struct timeval tv;
		gettimeofday(&tv, NULL);
		time_t t = time(NULL);
		if (t < tv.tv_sec) {
			fprintf(stderr, "time() %lld behind gettimeofday() %lld\n", (long long)t, (long long)tv.tv_sec);
			return 1;
		}
	}
	return 0;
}

/* Run argv with LD_PRELOAD=preload and nothing else of ours in the
 * environment; 0 if it exited 0 and printed nothing. */
static int run_with(const char *preload, char *const argv[], char *out, size_t out_size)
{
	int pfd[2];
	out[0] = 0;
	if (pipe2(pfd, O_CLOEXEC) != 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		setenv("LD_PRELOAD", preload, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	close(pfd[1]);
	size_t n = 0;
	for (;;) {
		ssize_t r = read(pfd[0], out + n, out_size - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
		if (n >= out_size - 1) {
			char sink[256];
			while (read(pfd[0], sink, sizeof sink) > 0)
				;
			break;
		}
	}
	out[n] = 0;
	close(pfd[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFSIGNALED(st)) {
		snprintf(out + n, out_size - n, "%skilled by signal %d", n ? "; " : "", WTERMSIG(st));
		return 1;
	}
	return WEXITSTATUS(st) != 0 || n > 0;
}

static int self_test(const char *preload)
{
	char self[PATH_MAX], out[2048];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0) {
		fprintf(stderr, "timehands enable: cannot find this program (/proc/self/exe) for the self-test\n");
		return -1;
	}
	self[n] = 0;
	char *t1[] = {self, (char *)"__preload-selftest", NULL};
	char *t2[] = {(char *)"/bin/true", NULL};
	char *const *tests[] = {t1, t2};
	for (int i = 0; i < 2; i++) {
		if (i == 1 && access(t2[0], X_OK) != 0)
			continue;
		if (run_with(preload, tests[i], out, sizeof out) != 0) {
			fprintf(stderr, "timehands enable: %s fails its self-test under %s: %s\n", preload, tests[i][0],
				out[0] ? out : "exit status not 0");
			return -1;
		}
	}
	return 0;
}

/* -------------------------------------------------------------- commands */

struct sys_args {
	const char *file;    /* the list: /etc/ld.so.preload */
	const char *preload; /* --preload, or NULL */
};

/* The arguments: -1 to go on, else the exit status. */
static int parse(const char *cmd, int argc, char **argv, struct sys_args *a)
{
	int system = 0;
	a->file = SYSTEM_FILE;
	a->preload = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--system") == 0) {
			system = 1;
		} else if (strcmp(argv[i], "--preload") == 0 && i + 1 < argc && strcmp(cmd, "enable") == 0) {
			a->preload = argv[++i];
		} else if (strcmp(argv[i], "--file") == 0 && i + 1 < argc) {
			a->file = argv[++i];
			if (a->file[0] != '/') {
				fprintf(stderr, "timehands %s: --file wants an absolute path, not '%s'\n", cmd, a->file);
				return 2;
			}
		} else {
			fprintf(stderr, "usage: timehands %s --system%s [--file PATH]\n", cmd,
				strcmp(cmd, "enable") == 0 ? " [--preload PATH]" : "");
			return strcmp(argv[i], "--help") == 0 ? 0 : 2;
		}
	}
	if (!system) {
		fprintf(stderr,
			"timehands %s: say --system: it %s the preload %s %s, for every program started from then on\n",
			cmd, strcmp(cmd, "enable") == 0 ? "lists" : "removes", strcmp(cmd, "enable") == 0 ? "in" : "from",
			a->file);
		return 2;
	}
	return -1;
}

/* read_all, the error reported as `cmd`'s. */
static int read_list(const char *cmd, const char *path, struct buf *in)
{
	int exists = read_all(path, in);
	if (exists < 0)
		fprintf(stderr, "timehands %s: %s: %s\n", cmd, path, strerror(errno));
	return exists;
}

int th_cli_enable(int argc, char **argv)
{
	struct sys_args a;
	int rc = parse("enable", argc, argv, &a);
	if (rc >= 0)
		return rc;
	char entry[PATH_MAX * 2], file[PATH_MAX * 2];
	if (a.preload) {
		if (!realpath(a.preload, file)) {
			fprintf(stderr, "timehands enable: %s: %s\n", a.preload, strerror(errno));
			return 1;
		}
	} else if (th_cli_find_preload(entry, sizeof entry, file, sizeof file, 0) != 0) {
		fprintf(stderr, "timehands enable: cannot find " PRELOAD_BASENAME " (looked in %s)\n", file);
		return 1;
	}
	if (!is_our_line(file, strlen(file))) {
		fprintf(stderr, "timehands enable: %s: not a path to " PRELOAD_BASENAME "\n", file);
		return 1;
	}
	struct buf in, out;
	int exists = read_list("enable", a.file, &in);
	if (exists < 0)
		return 1;
	size_t len;
	long at = find_ours(&in, &len);
	if (at >= 0) {
		int same = len == strlen(file) && memcmp(in.p + at, file, len) == 0;
		if (same)
			printf("timehands: already enabled: %s lists %s\n", a.file, file);
		else
			fprintf(stderr, "timehands enable: %s already lists %.*s; run timehands disable --system first\n",
				a.file, (int)len, in.p + at);
		free(in.p);
		return same ? 0 : 1;
	}
	if (self_test(file) != 0) {
		fprintf(stderr, "timehands enable: %s left as it was\n", a.file);
		free(in.p);
		return 1;
	}
	if (list_add(&in, exists, file, &out) != 0 || write_all(a.file, out.p, out.n) != 0) {
		fprintf(stderr, "timehands enable: %s: %s%s\n", a.file, strerror(errno),
			errno == EACCES || errno == EPERM ? " (run as root)" : "");
		free(in.p);
		free(out.p);
		return 1;
	}
	printf("timehands: enabled: %s lists %s; programs started from now on read timehands' clocks\n"
	       "(undo: timehands disable --system)\n",
	       a.file, file);
	free(in.p);
	free(out.p);
	return 0;
}

int th_cli_disable(int argc, char **argv)
{
	struct sys_args a;
	int rc = parse("disable", argc, argv, &a);
	if (rc >= 0)
		return rc;
	struct buf in, out;
	int exists = read_list("disable", a.file, &in);
	if (exists < 0)
		return 1;
	int remove_file = 0;
	int found = exists ? list_remove(&in, &out, &remove_file) : 0;
	if (found < 0) {
		perror("timehands disable");
		free(in.p);
		return 1;
	}
	if (found == 0) {
		printf("timehands: not enabled: %s does not list " PRELOAD_BASENAME "\n", a.file);
		free(in.p);
		if (exists)
			free(out.p);
		return 0;
	}
	int w = remove_file ? unlink(a.file) : write_all(a.file, out.p, out.n);
	if (w != 0 && remove_file && (errno == EBUSY || errno == EPERM))
		w = write_all(a.file, "", 0); /* a bind-mounted file stays, empty */
	if (w != 0) {
		fprintf(stderr, "timehands disable: %s: %s%s\n", a.file, strerror(errno),
			errno == EACCES || errno == EPERM ? " (run as root)" : "");
		free(in.p);
		free(out.p);
		return 1;
	}
	printf("timehands: disabled: %s no longer lists the preload (%s); running programs keep it until they "
	       "exit\n",
	       a.file, remove_file ? "removed, as enable had created it" : "restored");
	free(in.p);
	free(out.p);
	return 0;
}

/* What /etc/ld.so.preload lists of ours, for `timehands status`: the path
 * in `out`, or "off". */
void th_cli_system_preload(char *out, size_t size)
{
	struct buf in;
	size_t len;
	long at;
	if (read_all(SYSTEM_FILE, &in) == 1 && (at = find_ours(&in, &len)) >= 0)
		snprintf(out, size, "on (%s lists %.*s)", SYSTEM_FILE, (int)len, in.p + at);
	else
		snprintf(out, size, "off");
	free(in.p);
}
