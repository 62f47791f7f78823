/*
 * timehands(1): run a program with the timehands clocks, report what a process
 * gets, diagnose the machine. See doc/man/timehands.1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "timehands.h"

#define PRELOAD_NAME "libtimehands-preload.so"
#define BENCH_NAME "timehands-bench"

static void usage(FILE *f)
{
	fputs("usage: timehands COMMAND [ARGS...]\n"
	      "  run [OPTIONS] [--] CMD [ARGS...]  run CMD with the timehands clocks (LD_PRELOAD)\n"
	      "  status [--json]                   what a process started now would get\n"
	      "  check [--json]                    diagnose this machine's clocks\n"
	      "  bench [ARGS...]                   compare with the kernel's clocks (timehands-bench)\n"
	      "  enable --system [--preload PATH]  list the preload in /etc/ld.so.preload (every new process)\n"
	      "  disable --system                  remove it from there again\n"
	      "  --help, --version\n"
	      "run options:\n"
	      "  -r, --relaxed           REALTIME/MONOTONIC per-thread monotonic only (TIMEHANDS_RELAXED=1)\n"
	      "  -d, --disable           pass every read to the kernel (TIMEHANDS_DISABLE=1)\n"
	      "  -c, --cputime MODE      times()/clock(): exact (default) or coarse (TIMEHANDS_CPUTIME)\n"
	      "  -p, --page PATH         shared page of timehandsd, or none (TIMEHANDS_PAGE)\n"
	      "      --counter MODE      auto (default), off or force (TIMEHANDS_COUNTER)\n"
	      "      --preload PATH      use this preload instead of the installed one\n"
	      "  -n, --dry-run           print the environment and the command, run nothing\n"
	      "See timehands(1).\n",
	      f);
}

/* ------------------------------------------------------------ locations */

/* Directory of this executable, or "" if /proc is not there. */
static void exe_dir(char *out, size_t size)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
	out[0] = 0;
	if (n <= 0 || (size_t)n >= size)
		return;
	buf[n] = 0;
	char *slash = strrchr(buf, '/');
	if (!slash)
		return;
	*slash = 0;
	memcpy(out, buf, (size_t)(slash - buf) + 1);
}

static int same_dir(const char *a, const char *b)
{
	char ra[PATH_MAX], rb[PATH_MAX];
	if (!realpath(a, ra) || !realpath(b, rb))
		return 0;
	return strcmp(ra, rb) == 0;
}

/* Is the tool running from the build tree (then the build tree's preload and
 * bench are the ones that belong to it)? */
static int in_build_tree(const char *dir)
{
	return dir[0] && same_dir(dir, TH_BUILD_TOOLS_DIR);
}

static int try_file(const char *path, char *out, size_t size)
{
	char real[PATH_MAX];
	if (access(path, R_OK) != 0 || !realpath(path, real) || strlen(real) >= size)
		return 0;
	strcpy(out, real);
	return 1;
}

/*
 * If `file` lies in the per-architecture library directory that the dynamic
 * loader names $LIB (Debian: lib/x86_64-linux-gnu, Fedora: lib64), write the
 * same path spelled with $LIB, so that a child of another architecture looks
 * in its own directory instead of failing on this one's ELF class. Only used
 * after the loader itself has resolved that spelling to this very file: a
 * wrong guess would make the preload silently ignored.
 */
static int lib_token_entry(const char *file, char *entry, size_t size)
{
	Dl_info di;
	if (!dladdr((void *)&fputs, &di) || !di.dli_fname || di.dli_fname[0] != '/')
		return 0;
	char libdir[PATH_MAX];
	snprintf(libdir, sizeof libdir, "%s", di.dli_fname);
	char *slash = strrchr(libdir, '/');
	if (!slash)
		return 0;
	*slash = 0;
	const char *lib = libdir;
	if (strncmp(lib, "/usr/", 5) == 0)
		lib += 4;
	lib++; /* "lib/x86_64-linux-gnu" */
	char tail[PATH_MAX];
	snprintf(tail, sizeof tail, "/%s/timehands/" PRELOAD_NAME, lib);
	size_t fl = strlen(file), tl = strlen(tail);
	if (fl <= tl || strcmp(file + fl - tl, tail) != 0)
		return 0;
	int n = snprintf(entry, size, "%.*s/$LIB/timehands/" PRELOAD_NAME, (int)(fl - tl), file);
	if (n < 0 || (size_t)n >= size)
		return 0;
	void *h = dlopen(entry, RTLD_LAZY | RTLD_LOCAL);
	if (!h)
		return 0;
	struct link_map *lm = NULL;
	char real[PATH_MAX];
	int ok = dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && realpath(lm->l_name, real) &&
		 strcmp(real, file) == 0;
	dlclose(h);
	return ok;
}

int th_cli_find_preload(char *entry, size_t entry_size, char *file, size_t file_size, int spell_lib)
{
	char dir[PATH_MAX], path[PATH_MAX + 64];
	exe_dir(dir, sizeof dir);
	int found = 0;
	/* 1. next to this executable's own prefix (a relocated install too) */
	if (dir[0]) {
		snprintf(path, sizeof path, "%s/%s/" PRELOAD_NAME, dir, TH_REL_PRELOAD_DIR);
		found = try_file(path, file, file_size);
	}
	/* 2. the build tree, when this is the build tree's tool */
	if (!found && in_build_tree(dir))
		found = try_file(TH_BUILD_PRELOAD, file, file_size);
	/* 3. the configured prefix */
	if (!found)
		found = try_file(TH_FULL_PRELOAD_DIR "/" PRELOAD_NAME, file, file_size);
	if (!found) {
		snprintf(file, file_size, "%s/%s, %s", dir[0] ? dir : "?", TH_REL_PRELOAD_DIR, TH_FULL_PRELOAD_DIR);
		return -1;
	}
	if (!spell_lib || !lib_token_entry(file, entry, entry_size))
		snprintf(entry, entry_size, "%s", file);
	return 0;
}

/* ------------------------------------------------------------------ run */

/* Is `entry` (or the file it names) already in the LD_PRELOAD list? */
static int preload_listed(const char *list, const char *entry, const char *file)
{
	char buf[8192];
	snprintf(buf, sizeof buf, "%s", list);
	for (char *save = NULL, *tok = strtok_r(buf, " :", &save); tok; tok = strtok_r(NULL, " :", &save)) {
		if (strcmp(tok, entry) == 0 || strcmp(tok, file) == 0)
			return 1;
	}
	return 0;
}

static const char *env_get(const char *name, void *ctx)
{
	(void)ctx;
	return getenv(name);
}

/* The environment reduced to the one variable named by ctx. */
static const char *env_get_one(const char *name, void *ctx)
{
	return strcmp(name, (const char *)ctx) == 0 ? getenv(name) : NULL;
}

/*
 * A bad value in the environment is reported once, here, and removed, so that
 * the command and its children run with the safe default and do not each
 * repeat the warning.
 */
static void sanitize_env(void)
{
	struct th_config c;
	th_config_parse(&c, env_get, NULL);
	if (!c.warning[0])
		return;
	fprintf(stderr, "%s\n", c.warning);
	for (const char *const *v = th_config_vars; *v; v++) {
		th_config_parse(&c, env_get_one, (void *)*v);
		if (c.warning[0])
			unsetenv(*v);
	}
}

static int bad_option(const char *opt, const char *value)
{
	fprintf(stderr, "timehands run: invalid value '%s' for %s\n", value, opt);
	return 2;
}

static int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{"relaxed", no_argument, NULL, 'r'},   {"disable", no_argument, NULL, 'd'},
		{"cputime", required_argument, NULL, 'c'}, {"page", required_argument, NULL, 'p'},
		{"counter", required_argument, NULL, 'C'}, {"preload", required_argument, NULL, 'P'},
		{"dry-run", no_argument, NULL, 'n'},   {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *preload = NULL;
	int dry = 0, ch;
	optind = 1;
	/* '+': stop at the first non-option, which is the command */
	while ((ch = getopt_long(argc, argv, "+rdc:p:nh", opts, NULL)) != -1) {
		switch (ch) {
		case 'r': setenv("TIMEHANDS_RELAXED", "1", 1); break;
		case 'd': setenv("TIMEHANDS_DISABLE", "1", 1); break;
		case 'c':
			if (strcmp(optarg, "exact") != 0 && strcmp(optarg, "coarse") != 0)
				return bad_option("--cputime", optarg);
			setenv("TIMEHANDS_CPUTIME", optarg, 1);
			break;
		case 'p':
			if (optarg[0] != '/' && strcmp(optarg, "none") != 0)
				return bad_option("--page", optarg);
			if (strlen(optarg) >= sizeof(((struct th_config *)0)->page))
				return bad_option("--page", optarg);
			setenv("TIMEHANDS_PAGE", optarg, 1);
			break;
		case 'C':
			if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "off") != 0 && strcmp(optarg, "force") != 0)
				return bad_option("--counter", optarg);
			setenv("TIMEHANDS_COUNTER", optarg, 1);
			break;
		case 'P': preload = optarg; break;
		case 'n': dry = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		fputs("timehands run: no command given\n", stderr);
		usage(stderr);
		return 2;
	}
	sanitize_env();

	char entry[PATH_MAX * 2], file[PATH_MAX * 2];
	if (preload) {
		if (!try_file(preload, file, sizeof file)) {
			fprintf(stderr, "timehands run: cannot read %s: %s\n", preload, strerror(errno));
			return 127;
		}
		if (!lib_token_entry(file, entry, sizeof entry))
			snprintf(entry, sizeof entry, "%s", file);
	} else if (th_cli_find_preload(entry, sizeof entry, file, sizeof file, 1) != 0) {
		fprintf(stderr, "timehands run: cannot find " PRELOAD_NAME " (looked in %s); is timehands installed?\n",
			file);
		return 127;
	}

	const char *old = getenv("LD_PRELOAD");
	if (!old || !*old) {
		setenv("LD_PRELOAD", entry, 1);
	} else if (!preload_listed(old, entry, file)) {
		size_t n = strlen(entry) + strlen(old) + 2;
		char *list = malloc(n);
		if (!list) {
			perror("timehands run");
			return 127;
		}
		/* first, so that our clocks win over any other interposer's */
		snprintf(list, n, "%s:%s", entry, old);
		setenv("LD_PRELOAD", list, 1);
		free(list);
	}

	if (dry) {
		const char *preload = getenv("LD_PRELOAD");
		if (preload)
			printf("LD_PRELOAD=%s\n", preload);
		for (const char *const *name = th_config_vars; *name; name++) {
			const char *v = getenv(*name);
			if (v)
				printf("%s=%s\n", *name, v);
		}
		for (int i = optind; i < argc; i++)
			printf("%s%s", argv[i], i + 1 < argc ? " " : "\n");
		return 0;
	}
	/* Replace ourselves: signals, the pid and the exit status are CMD's. */
	execvp(argv[optind], argv + optind);
	int e = errno;
	fprintf(stderr, "timehands run: %s: %s\n", argv[optind], strerror(e));
	return e == ENOENT ? 127 : 126;
}

/* ---------------------------------------------------------------- bench */

static int cmd_bench(int argc, char **argv)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	exe_dir(dir, sizeof dir);
	argv[0] = (char *)BENCH_NAME;
	(void)argc;
	/* next to this executable, then the build tree's, then PATH */
	if (dir[0]) {
		snprintf(path, sizeof path, "%s/" BENCH_NAME, dir);
		if (access(path, X_OK) == 0)
			execv(path, argv);
	}
	if (in_build_tree(dir) && access(TH_BUILD_BENCH, X_OK) == 0)
		execv(TH_BUILD_BENCH, argv);
	execvp(BENCH_NAME, argv);
	int e = errno;
	if (e == ENOENT)
		fprintf(stderr,
			"timehands bench: " BENCH_NAME " is not installed (looked in %s and in PATH);\n"
			"build it with the bench/ directory of the timehands sources (make; make install)\n",
			dir[0] ? dir : "the tool's directory");
	else
		fprintf(stderr, "timehands bench: " BENCH_NAME ": %s\n", strerror(e));
	return e == ENOENT ? 127 : 126;
}

/* -------------------------------------------------------------- shared */

const char *th_cli_mode_name(unsigned mode)
{
	switch (mode) {
	case TH_MODE_SHARED: return "shared";
	case TH_MODE_LOCAL: return "local";
	default: return "kernel";
	}
}

const char *th_cli_counter_name(unsigned counter)
{
	switch (counter) {
	case TH_COUNTER_TSC: return "tsc";
	case TH_COUNTER_CNTVCT: return "cntvct";
	default: return "none";
	}
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "run") == 0)
		return cmd_run(argc - 1, argv + 1);
	if (strcmp(cmd, "status") == 0)
		return th_cli_status(argc - 1, argv + 1);
	if (strcmp(cmd, "check") == 0)
		return th_cli_check(argc - 1, argv + 1);
	if (strcmp(cmd, "bench") == 0)
		return cmd_bench(argc - 1, argv + 1);
	if (strcmp(cmd, "enable") == 0)
		return th_cli_enable(argc - 1, argv + 1);
	if (strcmp(cmd, "disable") == 0)
		return th_cli_disable(argc - 1, argv + 1);
	if (strcmp(cmd, "__preload-selftest") == 0)
		return th_cli_preload_selftest();
	if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
		printf("timehands %s\n", TH_VERSION);
		return 0;
	}
	fprintf(stderr, "timehands: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
