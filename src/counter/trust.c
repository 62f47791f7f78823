/* Counter trust policy and published frequency; see trust.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "trust.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "counter.h"
#include "kclock.h"
#include "timehands.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

long th_read_small_file(const char *path, char *buf, unsigned long size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	unsigned long n = 0;
	while (n + 1 < size) {
		ssize_t r = read(fd, buf + n, size - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (unsigned long)r;
	}
	close(fd);
	buf[n] = 0;
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return (long)n;
}

static void copy_str(char *dst, unsigned long size, const char *src)
{
	unsigned long n = strlen(src);
	if (n >= size)
		n = size - 1;
	memcpy(dst, src, n);
	dst[n] = 0;
}

static void set_reason(struct th_trust *t, const char *a, const char *b, const char *c)
{
	t->reason[0] = 0;
	const char *parts[] = {a, b, c};
	unsigned long n = 0;
	for (int i = 0; i < 3; i++)
		for (const char *p = parts[i]; p && *p && n + 1 < sizeof t->reason; p++)
			t->reason[n++] = *p;
	t->reason[n] = 0;
}

/* Locale-free decimal parse of "2096.029". */
static double parse_decimal(const char *p)
{
	double v = 0, scale = 0;
	for (; (*p >= '0' && *p <= '9') || *p == '.'; p++) {
		if (*p == '.') {
			if (scale)
				break;
			scale = 1;
			continue;
		}
		v = v * 10 + (*p - '0');
		if (scale)
			scale *= 10;
	}
	return scale ? v / scale : v;
}

double th_cpuinfo_tsc_hz(const char *text)
{
	/* Only the first CPU's block; only when the kernel says it knows the
	 * TSC frequency (from CPUID or the hypervisor) rather than having
	 * calibrated it, and only if "cpu MHz" is plausible. */
	const char *flags = strstr(text, "\nflags");
	if (!flags)
		return 0;
	const char *eol = strchr(flags + 1, '\n');
	const char *known = strstr(flags, " tsc_known_freq");
	if (!known || (eol && known > eol))
		return 0;
	const char *mhz = strstr(text, "\ncpu MHz");
	if (!mhz)
		return 0;
	const char *colon = strchr(mhz, ':');
	if (!colon)
		return 0;
	colon++;
	while (*colon == ' ' || *colon == '\t')
		colon++;
	double v = parse_decimal(colon);
	if (v < 1.0 || v > 100000.0)
		return 0;
	return v * 1e6;
}

#if defined(__x86_64__)
static void probe_x86(struct th_trust *t)
{
	unsigned a, b, c, d;
	unsigned max = (unsigned)__get_cpuid_max(0, NULL);
	__cpuid(0, a, b, c, d);
	t->intel = b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu; /* "GenuineIntel" */
	if (max >= 1) {
		__cpuid(1, a, b, c, d);
		if (d & (1u << 4))
			t->available = TH_COUNTER_TSC;
	}
	if ((unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x80000007u) {
		__cpuid(0x80000007u, a, b, c, d);
		t->invariant = (d >> 8) & 1;
		__cpuid(0x80000001u, a, b, c, d);
		t->rdtscp = (d >> 27) & 1;
	}
	/* AMD's "LFENCE always serializing" bit; Intel defines no such leaf
	 * (its LFENCE is serializing by the architecture: `intel`). */
	if ((unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x80000021u) {
		__cpuid_count(0x80000021u, 0, a, b, c, d);
		t->lfence_serializes = (a >> 2) & 1;
	}
	/* Frequency, most exact source first. */
	if (max >= 0x15) {
		__cpuid(0x15, a, b, c, d);
		if (a && b && c) {
			t->nominal_hz = (double)c * b / a;
			copy_str(t->freq_source, sizeof t->freq_source, "cpuid-15h");
			return;
		}
	}
	__cpuid(1, a, b, c, d);
	if (c & (1u << 31)) { /* running under a hypervisor */
		__cpuid(0x40000000u, a, b, c, d);
		if (a >= 0x40000010u && a < 0x40010000u) {
			__cpuid(0x40000010u, a, b, c, d);
			if (a) {
				t->nominal_hz = (double)a * 1000.0;
				copy_str(t->freq_source, sizeof t->freq_source, "hypervisor-leaf");
				return;
			}
		}
	}
	char buf[8192];
	if (th_read_small_file("/proc/cpuinfo", buf, sizeof buf) > 0) {
		double hz = th_cpuinfo_tsc_hz(buf);
		if (hz > 0) {
			t->nominal_hz = hz;
			copy_str(t->freq_source, sizeof t->freq_source, "cpuinfo");
		}
	}
}

#endif

#if defined(__x86_64__) || defined(__aarch64__)
/* Does the vDSO read the counter (the TSC through a paravirtual clock, the
 * generic timer), or fall back to a system call (a hypervisor that does not
 * declare its clock stable; an arm64 timer erratum, for which the kernel
 * turns the vDSO's counter reads off)? A vDSO that falls back costs a system
 * call plus its own work, so its best time cannot beat the best time of a
 * trivial system call; one that reads the counter is several times cheaper.
 * Compared in counter ticks, by minima, within one call: no absolute
 * threshold. Five tries, more (up to 20) until the vDSO's best is under half
 * the system call's: a slow counter, such as a 24 MHz generic timer, may
 * take them to show the difference, and a vDSO that falls back never does. */
int th_vdso_reads_counter(void)
{
	th_vdso_clock_gettime_fn vdso_gettime = TH_VDSO(clock_gettime);
	if (!vdso_gettime)
		return -1;
	uint64_t best_vdso = ~(uint64_t)0, best_sys = ~(uint64_t)0;
	for (int i = 0; i < 20; i++) {
		struct timespec ts;
		uint64_t c0 = th_counter_ordered();
		vdso_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t c1 = th_counter_ordered();
		syscall(SYS_getppid);
		uint64_t c2 = th_counter_ordered();
		if (c1 - c0 < best_vdso)
			best_vdso = c1 - c0;
		if (c2 - c1 < best_sys)
			best_sys = c2 - c1;
		/* a vDSO that reads the counter shows it within a few tries */
		if (i >= 4 && 2 * best_vdso < best_sys)
			break;
	}
	return best_vdso < best_sys;
}
#else
int th_vdso_reads_counter(void)
{
	return -1;
}
#endif

void th_trust_probe(struct th_trust *t, int counter_mode)
{
	memset(t, 0, sizeof *t);
	copy_str(t->freq_source, sizeof t->freq_source, "none");
	if (th_read_small_file("/sys/devices/system/clocksource/clocksource0/current_clocksource",
			       t->clocksource, sizeof t->clocksource) < 0)
		copy_str(t->clocksource, sizeof t->clocksource, "unknown");

#if defined(__x86_64__)
	probe_x86(t);
	if (t->available == TH_COUNTER_NONE) {
		set_reason(t, "the CPU has no time stamp counter", "", "");
		return;
	}
	if (th_kclock_counter_forbidden()) {
		set_reason(t, "PR_SET_TSC forbids reading the TSC in this process: the kernel's clocks by system call", "", "");
		return;
	}
	if (counter_mode == TH_CTR_OFF) {
		set_reason(t, "counter disabled by TIMEHANDS_COUNTER=off", "", "");
		return;
	}
	if (!t->invariant && counter_mode != TH_CTR_FORCE) {
		set_reason(t, "the TSC is not invariant (CPUID 80000007h EDX[8] is 0)", "", "");
		return;
	}
	if (counter_mode == TH_CTR_FORCE) {
		t->usable = 1;
		return;
	}
	if (strcmp(t->clocksource, "tsc") == 0) {
		t->usable = 1;
	} else if (strcmp(t->clocksource, "kvm-clock") == 0 ||
		   strcmp(t->clocksource, "hyperv_clocksource_tsc_page") == 0) {
		if (th_vdso_reads_counter() == 1) {
			t->usable = 1;
		} else {
			set_reason(t, "clocksource ", t->clocksource,
				   " is not read from the TSC by the vDSO (the hypervisor does not declare it stable)");
			t->clocksource_only = 1;
		}
	} else {
		set_reason(t, "clocksource ", t->clocksource,
			   ": the kernel does not read time from the TSC (timehandsd can vouch for it after a cross-CPU check)");
		t->clocksource_only = 1;
	}
#elif defined(__aarch64__)
	t->available = TH_COUNTER_CNTVCT;
	t->invariant = 1;
	t->nominal_hz = (double)th_counter_frequency();
	if (t->nominal_hz > 0)
		copy_str(t->freq_source, sizeof t->freq_source, "cntfrq");
	if (counter_mode == TH_CTR_OFF) {
		set_reason(t, "counter disabled by TIMEHANDS_COUNTER=off", "", "");
		return;
	}
	if (t->nominal_hz <= 0) {
		set_reason(t, "CNTFRQ_EL0 is 0", "", "");
		return;
	}
	if (counter_mode == TH_CTR_FORCE) {
		t->usable = 1;
	} else if (strcmp(t->clocksource, "arch_sys_counter") != 0) {
		set_reason(t, "clocksource ", t->clocksource, ": the kernel does not read time from CNTVCT_EL0");
	} else if (th_vdso_reads_counter() == 0) {
		set_reason(t, "the vDSO does not read CNTVCT_EL0 (the kernel turned its counter reads off: a timer erratum)",
			   "", ""); /* not for a daemon to vouch for: an erratum's bad reads are rare, not skew */
	} else {
		t->usable = 1;
	}
#else
	(void)counter_mode;
	set_reason(t, "no supported counter on this architecture", "", "");
#endif
}
