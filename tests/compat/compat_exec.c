/*
 * An exec chain: each link checks that the preload is (or is not) there and
 * bound, reads MONOTONIC against a raw-syscall sandwich and not below the
 * value its predecessor handed over, then replaces itself with the next link:
 * directly, through /bin/sh, through env(1), and once as a posix_spawn()ed
 * child (vfork-style) that the link waits for.
 *
 *   compat_exec LEVEL [PREVIOUS_NS]
 */
#include "compat.h"

#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: compat_exec LEVEL [PREVIOUS_NS]\n");
		return 2;
	}
	int level = atoi(argv[1]);
	long long prev = argc > 2 ? atoll(argv[2]) : 0;
	int preload = expect_preload();

	CHECK(in_preload((void *)&clock_gettime) == expect_bound(), "level %d: clock_gettime %s bound to the preload",
	      level, expect_bound() ? "not" : "unexpectedly");
	CHECK(mapped("libtimehands-preload") == preload, "level %d: preload %s mapped", level,
	      preload ? "not" : "unexpectedly");
	struct timespec ts;
	int64_t k1 = sys_ns(CLOCK_MONOTONIC);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t k2 = sys_ns(CLOCK_MONOTONIC);
	int64_t v = ts_ns(&ts);
	CHECK(v >= k1 - SLACK_NS && v <= k2 + SLACK_NS, "level %d: outside the sandwich", level);
	CHECK(v >= prev, "level %d: MONOTONIC %lld below the previous link's %lld", level, (long long)v, prev);
	if (compat_failures)
		return 1;
	if (level == 0) {
		printf("compat_exec: ok\n");
		return 0;
	}

	char self[4096], lv[16], now[32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return 3;
	self[n] = 0;
	snprintf(lv, sizeof lv, "%d", level - 1);
	snprintf(now, sizeof now, "%lld", (long long)v);
	switch (level % 4) {
	case 0: {
		pid_t pid;
		char *args[] = {self, lv, now, NULL};
		if (posix_spawn(&pid, self, NULL, NULL, args, environ) != 0)
			return 4;
		int st = 0;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
			return 5;
		return WEXITSTATUS(st);
	}
	case 1:
		execl("/bin/sh", "sh", "-c", "exec \"$0\" \"$@\"", self, lv, now, (char *)NULL);
		break;
	case 2:
		execlp("env", "env", self, lv, now, (char *)NULL);
		break;
	default:
		execl(self, self, lv, now, (char *)NULL);
		break;
	}
	perror("compat_exec: exec");
	return 6;
}
