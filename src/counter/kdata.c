/* Direct reads of the kernel's coarse clock; see kdata.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "kdata.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "kclock.h"

/* the private words of "no direct read": an odd count */
static const uint32_t off_seq = 1;
static const uint64_t off_base[2];
struct th_kdata th_kdata = {&off_seq, off_base, NULL};

static int kdata_on(void)
{
	return __atomic_load_n(&th_kdata.seq, __ATOMIC_RELAXED) != &off_seq;
}

#define NS_PER_S 1000000000u

static uint32_t ld32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof v);
	return v;
}

static uint64_t ld64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof v);
	return v;
}

int th_kdata_locate(const unsigned char *page, size_t size, const struct timespec *mono,
		    const struct timespec *real, size_t *seq_off, size_t *mono_off)
{
	/* Where the clock data starts (x86 before 6.13 kept it 128 bytes into
	 * the page), and how long the header before the bases is: seq, mode,
	 * cycle_last, mask, mult, shift (32), plus max_cycles where the kernel
	 * has overflow protection (40). */
	static const size_t starts[] = {0, 128};
	static const size_t headers[] = {40, 32};
	for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++) {
		for (size_t j = 0; j < sizeof headers / sizeof headers[0]; j++) {
			size_t s = starts[i], h = headers[j];
			size_t mo = s + h + 16 * (size_t)CLOCK_MONOTONIC_COARSE;
			size_t ro = s + h + 16 * (size_t)CLOCK_REALTIME_COARSE;
			if (mo + 16 > size)
				continue;
			uint32_t seq = ld32(page + s);
			int32_t mode = (int32_t)ld32(page + s + 4);
			uint64_t mask = ld64(page + s + h - 16);
			uint32_t mult = ld32(page + s + h - 8), shift = ld32(page + s + h - 4);
			if ((seq & 1) || mode < 0 || mode > 15)
				continue;
			if (mask == 0 || (mask & (mask + 1)) != 0 || mult == 0 || shift >= 64)
				continue;
			if (ld64(page + mo) != (uint64_t)mono->tv_sec || ld64(page + mo + 8) != (uint64_t)mono->tv_nsec)
				continue;
			if (ld64(page + ro) != (uint64_t)real->tv_sec || ld64(page + ro + 8) != (uint64_t)real->tv_nsec)
				continue;
			*seq_off = s;
			*mono_off = mo;
			return 0;
		}
	}
	return -1;
}

/* Start of the [vvar] mapping if it is readable, else 0. Streams the maps
 * file through a small buffer (no allocation: attach may run anywhere). */
static uintptr_t find_vvar(void)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[4096];
	size_t have = 0;
	uintptr_t found = 0;
	for (;;) {
		ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		have += (size_t)r;
		buf[have] = 0;
		char *line = buf, *nl;
		while ((nl = memchr(line, '\n', have - (size_t)(line - buf))) != NULL) {
			*nl = 0;
			size_t n = (size_t)(nl - line);
			if (n > 7 && memcmp(nl - 7, " [vvar]", 7) == 0) {
				uintptr_t a = 0;
				const char *p = line;
				for (; *p && *p != '-'; p++) {
					int d = *p >= '0' && *p <= '9'   ? *p - '0'
						: *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
									 : -1;
					if (d < 0)
						break;
					a = a * 16 + (uintptr_t)d;
				}
				/* perms follow the range: "start-end rw.p" */
				const char *perm = strchr(line, ' ');
				if (*p == '-' && perm && perm[1] == 'r')
					found = a;
			}
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == sizeof buf - 1)
			have = 0; /* a line longer than the buffer: not ours */
	}
	close(fd);
	return found;
}

static uint64_t ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * NS_PER_S + (uint64_t)ts->tv_nsec;
}

/* Two vDSO reads around a direct one: 1 agrees, 0 disagrees, -1 the kernel
 * was updating every time (no verdict). */
static int sandwich(void)
{
	for (int i = 0; i < 4; i++) {
		struct timespec a, b;
		uint64_t v;
		if (th_kclock_gettime(CLOCK_MONOTONIC_COARSE, &a) != 0)
			return 0;
		int got = th_kdata_mono_coarse(&v);
		if (th_kclock_gettime(CLOCK_MONOTONIC_COARSE, &b) != 0)
			return 0;
		if (got)
			return ts_ns(&a) <= v && v <= ts_ns(&b);
	}
	return -1;
}

void th_kdata_off(void)
{
	__atomic_store_n(&th_kdata.real_sec, NULL, __ATOMIC_RELAXED);
	__atomic_store_n(&th_kdata.seq, &off_seq, __ATOMIC_RELAXED);
	__atomic_store_n(&th_kdata.mono_coarse, off_base, __ATOMIC_RELAXED);
}

void th_kdata_init(void)
{
	if (kdata_on() || TH_VDSO(clock_gettime) == NULL)
		return;
	uintptr_t base = find_vvar();
	if (!base)
		return;
	const unsigned char *page = (const unsigned char *)base;
	for (int attempt = 0; attempt < 4; attempt++) {
		struct timespec m1, r1, m2;
		size_t so, mo;
		if (th_kclock_gettime(CLOCK_MONOTONIC_COARSE, &m1) != 0 || th_kclock_gettime(CLOCK_REALTIME_COARSE, &r1) != 0)
			return;
		/* The page is read with plain loads while the kernel may write
		 * it: copy it with atomic loads first. The copy is consistent
		 * when the vDSO's reading did not change around it. */
		unsigned char copy[512];
		for (size_t k = 0; k < sizeof copy; k += 8) {
			uint64_t w = __atomic_load_n((const uint64_t *)(const void *)(page + k), __ATOMIC_RELAXED);
			memcpy(copy + k, &w, 8);
		}
		if (th_kclock_gettime(CLOCK_MONOTONIC_COARSE, &m2) != 0)
			return;
		if (ts_ns(&m1) != ts_ns(&m2))
			continue; /* a tick in between: look again */
		if (th_kdata_locate(copy, sizeof copy, &m1, &r1, &so, &mo) != 0)
			return;
		const uint64_t *rs = (const uint64_t *)(const void *)(page + th_kdata_real_off(mo));
		time_t t1 = th_ktime(NULL);
		uint64_t sec = __atomic_load_n(rs, __ATOMIC_RELAXED);
		time_t t2 = th_ktime(NULL);
		if (!((uint64_t)t1 <= sec && sec <= (uint64_t)t2))
			return;
		__atomic_store_n(&th_kdata.mono_coarse, (const uint64_t *)(const void *)(page + mo), __ATOMIC_RELAXED);
		__atomic_store_n(&th_kdata.seq, (const uint32_t *)(const void *)(page + so), __ATOMIC_RELAXED);
		__atomic_store_n(&th_kdata.real_sec, rs, __ATOMIC_RELAXED);
		if (sandwich() != 1)
			th_kdata_off();
		return;
	}
}

int th_kdata_check(void)
{
	if (!kdata_on())
		return 0;
	const uint64_t *rs = __atomic_load_n(&th_kdata.real_sec, __ATOMIC_RELAXED);
	time_t t1 = th_ktime(NULL);
	uint64_t sec = rs ? __atomic_load_n(rs, __ATOMIC_RELAXED) : 0;
	time_t t2 = th_ktime(NULL);
	if (sandwich() != 1 || !rs || sec < (uint64_t)t1 || sec > (uint64_t)t2) {
		th_kdata_off();
		return 0;
	}
	return 1;
}
