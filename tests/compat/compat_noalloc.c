/*
 * No read allocates: this program is its own allocator (malloc and friends
 * defined here take precedence over libc's for every object in the process,
 * the preload included) and counts every call. After a warm-up, two threads
 * and a fork child call every clock entry point many times, pass-through ids
 * included; the count must not move.
 */
#include "compat.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/time.h>
#include <sys/times.h>
#include <sys/wait.h>

#include "timehands.h"

/* ------------------------------------------------------- bump allocator */

static _Alignas(64) unsigned char arena[64 << 20];
static _Atomic size_t arena_used;
static _Atomic unsigned long alloc_calls;

struct hdr {
	size_t size;
	size_t pad; /* keeps the payload 16-byte aligned */
};

static void *bump(size_t size, size_t align)
{
	atomic_fetch_add_explicit(&alloc_calls, 1, memory_order_relaxed);
	if (align < 16)
		align = 16;
	size_t need = size + sizeof(struct hdr) + align;
	size_t at = atomic_fetch_add_explicit(&arena_used, need, memory_order_relaxed);
	if (at + need > sizeof arena) {
		errno = ENOMEM;
		return NULL;
	}
	uintptr_t p = (uintptr_t)(arena + at + sizeof(struct hdr));
	p = (p + align - 1) & ~(uintptr_t)(align - 1);
	((struct hdr *)p)[-1].size = size;
	return (void *)p;
}

void *malloc(size_t size)
{
	return bump(size, 16);
}

void free(void *p)
{
	(void)p;
}

void *calloc(size_t n, size_t size)
{
	if (size && n > (size_t)-1 / size) {
		errno = ENOMEM;
		return NULL;
	}
	return bump(n * size, 16); /* the arena starts zeroed and is never reused */
}

void *realloc(void *old, size_t size)
{
	void *p = bump(size, 16);
	if (p && old) {
		size_t n = ((struct hdr *)old)[-1].size;
		memcpy(p, old, n < size ? n : size);
	}
	return p;
}

void *aligned_alloc(size_t align, size_t size)
{
	return bump(size, align);
}

void *memalign(size_t align, size_t size)
{
	return bump(size, align);
}

int posix_memalign(void **out, size_t align, size_t size)
{
	void *p = bump(size, align);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *valloc(size_t size)
{
	return bump(size, 4096);
}

void *pvalloc(size_t size)
{
	return bump((size + 4095) & ~(size_t)4095, 4096);
}

/* ---------------------------------------------------------------- reads */

static void read_everything(int rounds)
{
	static const clockid_t ids[] = {
		CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME, CLOCK_TAI,
		CLOCK_REALTIME_COARSE, CLOCK_MONOTONIC_COARSE, CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID,
		4242, TH_CLOCK_MONOTONIC_RELAXED, TH_CLOCK_PROCESS_CPUTIME_COARSE,
	};
	for (int r = 0; r < rounds; r++) {
		struct timespec ts;
		struct timeval tv;
		struct tms tm;
		for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
			clock_gettime(ids[i], &ts);
			clock_getres(ids[i], &ts);
		}
		gettimeofday(&tv, NULL);
		time(NULL);
		timespec_get(&ts, TIME_UTC);
		timespec_getres(&ts, TIME_UTC);
		times(&tm);
		clock();
	}
}

static _Atomic int go, done;

static void *worker(void *arg)
{
	(void)arg;
	while (!atomic_load(&go))
		;
	read_everything(3000);
	atomic_fetch_add(&done, 1);
	return NULL;
}

int main(void)
{
	read_everything(10); /* warm-up: first-use work may allocate */
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	unsigned long before = atomic_load(&alloc_calls);
	atomic_store(&go, 1);
	read_everything(3000);
	while (atomic_load(&done) < 2)
		;
	unsigned long during = atomic_load(&alloc_calls) - before;
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);

	pid_t pid = fork();
	if (pid == 0) {
		unsigned long b = atomic_load(&alloc_calls);
		read_everything(1000);
		_exit(atomic_load(&alloc_calls) == b ? 0 : 1);
	}
	int st = 0;
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "the fork child allocated while reading the clocks (status %d)", st);
	CHECK(during == 0, "%lu allocations while reading the clocks", during);
	CHECK(!expect_preload() || in_preload((void *)&clock_gettime), "not running under the preload");
	if (compat_failures)
		return 1;
	printf("compat_noalloc: ok (%lu allocations in all, none while reading)\n", atomic_load(&alloc_calls));
	return 0;
}
