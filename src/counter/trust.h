/*
 * Trust policy for the counter, decided once at attach and re-checked while
 * running by the windup (divergence from the kernel, jumps).
 *
 * The kernel's verdict comes first: the counter is used where the kernel
 * itself reads the time from it: clocksource "tsc" or "arch_sys_counter", or
 * a TSC-based paravirtual clock (kvm-clock, the Hyper-V TSC page) that the
 * vDSO reads without a system call, which the kernel only does when the
 * hypervisor declares the TSC stable. An invariant TSC is required on x86.
 * PR_SET_TSC forbidding RDTSC wins over everything. Any other clocksource
 * (xen, hpet, acpi_pm) is refused here; timehandsd can vouch for the TSC on
 * such machines after a cross-CPU check (see timehandsd(8)).
 */
#ifndef TH_COUNTER_TRUST_H
#define TH_COUNTER_TRUST_H

struct th_trust {
	int available;        /* enum th_counter the CPU has */
	int usable;           /* 1: read it */
	int invariant;        /* x86: CPUID says the TSC is invariant */
	int rdtscp;           /* x86: CPUID says the CPU has RDTSCP */
	int lfence_serializes; /* x86: CPUID says LFENCE is always dispatch serializing
				  (AMD Fn8000_0021 EAX[2]), so LFENCE;RDTSC is ordered */
	int intel;            /* x86: GenuineIntel, whose LFENCE is dispatch serializing by
				  the architecture */
	double nominal_hz;    /* published frequency, 0 if none */
	char freq_source[32];
	char clocksource[32];
	char reason[192];     /* why not usable; "" when usable */
	int clocksource_only; /* refused only because of the clocksource: a daemon's
				 cross-CPU check may vouch for the counter */
};

/* counter_mode: TH_CTR_AUTO / TH_CTR_OFF / TH_CTR_FORCE (config.h). */
void th_trust_probe(struct th_trust *t, int counter_mode);

/* 1 where the kernel's vDSO reads the counter itself (x86-64, arm64), 0 where
 * it falls back to a system call (its clock mode is none), -1 where there is
 * no vDSO to tell (an emulator's process) or no counter. */
int th_vdso_reads_counter(void);

/* Small helpers shared with tools: read a whole small file into buf
 * (NUL-terminated, trailing newline removed). Returns length or -1. */
long th_read_small_file(const char *path, char *buf, unsigned long size);

/* Parse "cpu MHz" and the tsc_known_freq flag out of /proc/cpuinfo text.
 * Returns the frequency in Hz, or 0. */
double th_cpuinfo_tsc_hz(const char *text);

#endif
