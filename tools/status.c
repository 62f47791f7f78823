/*
 * timehands status: what a process started now, with this environment, would
 * get. The tool attaches exactly as a program does (it links the same
 * objects), reads its clocks for a moment as a running program would, and
 * reports th_status().
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "config.h"
#include "timehands.h"

static const char *env_get(const char *name, void *ctx)
{
	(void)ctx;
	return getenv(name);
}

int th_cli_status(int argc, char **argv)
{
	int json = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			json = 1;
		} else {
			fprintf(stderr, "usage: timehands status [--json]\n");
			return strcmp(argv[i], "--help") == 0 ? 0 : 2;
		}
	}

	struct th_status start, st;
	if (th_status(&start, sizeof start) != 0) {
		perror("timehands status");
		return 1;
	}
	/* 100 ms of reads, as a running program makes them: the frequency is
	 * refined, windups settle. */
	struct timespec ts, pause = {0, 5000000};
	for (int i = 0; i < 20; i++) {
		nanosleep(&pause, NULL);
		th_clock_gettime(CLOCK_MONOTONIC, &ts);
		th_clock_gettime(CLOCK_REALTIME, &ts);
	}
	th_status(&st, sizeof st);

	struct th_config cfg;
	th_config_parse(&cfg, env_get, NULL);
	char entry[PATH_MAX * 2], file[PATH_MAX * 2];
	int have_preload = th_cli_find_preload(entry, sizeof entry, file, sizeof file, 0) == 0;

	struct th_emit e;
	th_emit_begin(&e, stdout, json);
	th_emit_str(&e, "mode", th_cli_mode_name(st.mode));
	if (start.mode != st.mode)
		th_emit_str(&e, "mode_at_start", th_cli_mode_name(start.mode));
	th_emit_str(&e, "counter", th_cli_counter_name(st.counter));
	th_emit_str(&e, "counter_available", th_cli_counter_name(st.counter_available));
	th_emit_str(&e, "counter_read", st.counter_read);
	th_emit_num(&e, "frequency", st.freq_hz, 1, "Hz");
	th_emit_str(&e, "frequency_source", st.freq_source);
	th_emit_num(&e, "frequency_nominal", st.freq_nominal_hz, 1, "Hz");
	th_emit_num(&e, "frequency_uncertainty", st.freq_uncertainty_ppm, 3, "ppm");
	th_emit_str(&e, "clocksource", st.clocksource);
	th_emit_str(&e, "line", st.line);
	th_emit_int(&e, "error", (long long)st.error_ns, "ns");
	th_emit_int(&e, "error_bound", (long long)st.error_bound_ns, "ns");
	th_emit_int(&e, "tick", (long long)st.tick_ns, "ns");
	th_emit_int(&e, "window", (long long)st.window_ns, "ns");
	th_emit_str(&e, "page", st.page_path);
	th_emit_str(&e, "kernel_tick", st.kernel_tick);
	th_emit_bool(&e, "disabled", cfg.disable);
	th_emit_bool(&e, "relaxed", cfg.relaxed && !cfg.disable);
	th_emit_str(&e, "cputime", cfg.cputime_coarse && !cfg.disable ? "coarse" : "exact");
	if (json || st.reason[0])
		th_emit_str(&e, "reason", st.reason);
	th_emit_str(&e, "preload", have_preload ? file : "not found");
	char sys[PATH_MAX + 64];
	th_cli_system_preload(sys, sizeof sys);
	th_emit_str(&e, "system_preload", sys);
	th_emit_group(&e, "counters");
	th_emit_int(&e, "windups", (long long)st.windups, "");
	th_emit_int(&e, "retries", (long long)st.retries, "");
	th_emit_int(&e, "slow_reads", (long long)st.slow_reads, "");
	th_emit_int(&e, "fallbacks", (long long)st.fallbacks, "");
	th_emit_int(&e, "resyncs", (long long)st.resyncs, "");
	th_emit_group_end(&e);
	th_emit_end(&e);
	return 0;
}
