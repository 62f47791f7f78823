/*
 * The processes a test forks (timehandsd, stand-in servers, tickers) end with
 * it, also when it fails a check, crashes or is stopped by a signal: the test
 * makes itself the leader of a process group of its own, which its children
 * inherit (timehandsd keeps it: it drops privileges, which would clear a
 * parent-death signal, but does not leave its group), and on the way out
 * signals that group. A daemon left running would keep publishing beside the
 * timing tests and benchmarks that follow.
 */
#ifndef TH_TESTS_DAEMON_REAP_H
#define TH_TESTS_DAEMON_REAP_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* 1 once this process leads its own group: only then is the group signalled
 * (without it, the group is the caller's: a shell's, ctest's, make's). */
static volatile sig_atomic_t reap_own_group;

/* SIGTERM to the group (this process ignores it), then SIGCONT for a child
 * a test stopped, so that it sees the SIGTERM; async-signal-safe. */
static void reap_group(void)
{
	if (!reap_own_group)
		return;
	reap_own_group = 0;
	signal(SIGTERM, SIG_IGN);
	kill(0, SIGTERM);
	kill(0, SIGCONT);
}

static void reap_on_signal(int sig)
{
	reap_group();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Call first thing in main, before any fork. */
static inline void reap_children_at_exit(void)
{
	/* Already a group's leader (a shell's job, with the rest of its
	 * pipeline in it): that group is not this test's alone. */
	if (getpgrp() == getpid() || setpgid(0, 0) != 0)
		return;
	reap_own_group = 1;
	atexit(reap_group);
	/* A sanitizer's build keeps its own handlers of the faults, which
	 * report them. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define REAP_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(REAP_SANITIZED)
	static const int sigs[] = {SIGABRT, SIGINT, SIGTERM, SIGALRM, SIGHUP};
#else
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGINT, SIGTERM, SIGALRM, SIGHUP};
#endif
	for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = reap_on_signal;
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = SA_RESETHAND;
		sigaction(sigs[i], &sa, NULL);
	}
}

#endif
