/* Kernel clock access through the vDSO; see kclock.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "kclock.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

struct th_vdso th_vdso;

/* Set once by th_kclock_init, before any read that depends on it; relaxed
 * atomics like th_vdso (it orders nothing else). */
static int fine_by_syscall;

int th_kclock_counter_forbidden(void)
{
#if defined(__x86_64__)
	int mode = 0;
	return prctl(PR_GET_TSC, &mode, 0, 0, 0) == 0 && mode == PR_TSC_SIGSEGV;
#else
	return 0;
#endif
}

int th_kclock_fine_by_syscall(void)
{
	return __atomic_load_n(&fine_by_syscall, __ATOMIC_RELAXED);
}

/* The vDSO reads the counter for every clock but the coarse ones (their
 * value is the tick's, in the data page). */
static int reads_counter(clockid_t id)
{
	return id != CLOCK_REALTIME_COARSE && id != CLOCK_MONOTONIC_COARSE;
}

static unsigned long sysv_hash_count(const ElfW(Word) *hash)
{
	return hash[1]; /* nchain == number of symbols */
}

static unsigned long gnu_hash_count(const uint32_t *gh)
{
	/* GNU hash: nbuckets, symoffset, bloom_size, bloom_shift, bloom[],
	 * buckets[], chain[]. The highest bucket entry starts the last chain;
	 * its end (bit 0 set) is the last symbol. */
	uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2];
	const ElfW(Addr) *bloom = (const ElfW(Addr) *)(gh + 4);
	const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size);
	const uint32_t *chain = buckets + nbuckets;
	uint32_t last = 0;
	for (uint32_t i = 0; i < nbuckets; i++)
		if (buckets[i] > last)
			last = buckets[i];
	if (last < symoffset)
		return symoffset;
	while (!(chain[last - symoffset] & 1))
		last++;
	return last + 1;
}

void *th_vdso_lookup(const void *base, const char *name)
{
	if (!base)
		return NULL;
	const ElfW(Ehdr) *eh = base;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
		return NULL;
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)((const char *)base + eh->e_phoff);
	uintptr_t load_offset = 0;
	const ElfW(Dyn) *dyn = NULL;
	int have_load = 0;
	for (int i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD && !have_load) {
			load_offset = (uintptr_t)base + ph[i].p_offset - ph[i].p_vaddr;
			have_load = 1;
		} else if (ph[i].p_type == PT_DYNAMIC) {
			dyn = (const ElfW(Dyn) *)((const char *)base + ph[i].p_offset);
		}
	}
	if (!have_load || !dyn)
		return NULL;
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL;
	const ElfW(Word) *hash = NULL;
	const uint32_t *gnu_hash = NULL;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		uintptr_t p = dyn->d_un.d_ptr + load_offset;
		switch (dyn->d_tag) {
		case DT_SYMTAB: symtab = (const ElfW(Sym) *)p; break;
		case DT_STRTAB: strtab = (const char *)p; break;
		case DT_HASH: hash = (const ElfW(Word) *)p; break;
		case DT_GNU_HASH: gnu_hash = (const uint32_t *)p; break;
		default: break;
		}
	}
	if (!symtab || !strtab || (!hash && !gnu_hash))
		return NULL;
	unsigned long n = hash ? sysv_hash_count(hash) : gnu_hash_count(gnu_hash);
	for (unsigned long i = 0; i < n; i++) {
		const ElfW(Sym) *s = &symtab[i];
		if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_shndx == SHN_UNDEF)
			continue;
		if (ELF64_ST_BIND(s->st_info) != STB_GLOBAL && ELF64_ST_BIND(s->st_info) != STB_WEAK)
			continue;
		if (strcmp(strtab + s->st_name, name) == 0)
			return (void *)(s->st_value + load_offset);
	}
	return NULL;
}

void th_kclock_init(void)
{
	const void *base = (const void *)getauxval(AT_SYSINFO_EHDR);
	/* relaxed atomic stores: see TH_VDSO in kclock.h */
#define TH_VDSO_SET(f, name) __atomic_store_n(&th_vdso.f, (th_vdso_##f##_fn)th_vdso_lookup(base, name), __ATOMIC_RELAXED)
#if defined(__x86_64__)
	TH_VDSO_SET(clock_gettime, "__vdso_clock_gettime");
	TH_VDSO_SET(gettimeofday, "__vdso_gettimeofday");
	TH_VDSO_SET(time, "__vdso_time");
	TH_VDSO_SET(clock_getres, "__vdso_clock_getres");
#elif defined(__aarch64__)
	TH_VDSO_SET(clock_gettime, "__kernel_clock_gettime");
	TH_VDSO_SET(gettimeofday, "__kernel_gettimeofday");
	TH_VDSO_SET(clock_getres, "__kernel_clock_getres");
#else
	(void)base;
#endif
#undef TH_VDSO_SET
	/* Under PR_SET_TSC the vDSO's RDTSC(P) would raise SIGSEGV wherever
	 * the kernel's clocksource is read from the TSC (tsc, kvm-clock and
	 * the Hyper-V page with a stable TSC): such reads go by system call. */
	__atomic_store_n(&fine_by_syscall, th_kclock_counter_forbidden(), __ATOMIC_RELAXED);
}

static int ret_errno(long r)
{
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return -1;
	}
	return (int)r;
}

int th_sys_clock_gettime(clockid_t id, struct timespec *ts)
{
	return (int)syscall(SYS_clock_gettime, id, ts);
}

int th_kclock_gettime(clockid_t id, struct timespec *ts)
{
	th_vdso_clock_gettime_fn clock_gettime_fn = TH_VDSO(clock_gettime);
	if (clock_gettime_fn && (!reads_counter(id) || !th_kclock_fine_by_syscall())) {
		/* The vDSO returns -errno instead of setting errno. */
		return ret_errno(clock_gettime_fn(id, ts));
	}
	return (int)syscall(SYS_clock_gettime, id, ts);
}

int th_kclock_getres(clockid_t id, struct timespec *ts)
{
	th_vdso_clock_getres_fn clock_getres_fn = TH_VDSO(clock_getres);
	if (clock_getres_fn)
		return ret_errno(clock_getres_fn(id, ts));
	return (int)syscall(SYS_clock_getres, id, ts);
}

int th_kgettimeofday(struct timeval *tv, void *tz)
{
	th_vdso_gettimeofday_fn gettimeofday_fn = TH_VDSO(gettimeofday);
	if (gettimeofday_fn && !th_kclock_fine_by_syscall())
		return ret_errno(gettimeofday_fn(tv, tz));
	return (int)syscall(SYS_gettimeofday, tv, tz);
}

time_t th_ktime(time_t *t)
{
	th_vdso_time_fn time_fn = TH_VDSO(time);
	if (time_fn)
		return time_fn(t);
	struct timespec ts;
	if (th_kclock_gettime(CLOCK_REALTIME_COARSE, &ts) != 0)
		th_kclock_gettime(CLOCK_REALTIME, &ts);
	if (t)
		*t = ts.tv_sec;
	return ts.tv_sec;
}
