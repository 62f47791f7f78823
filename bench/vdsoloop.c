/*
 * An independent measurement of vDSO clock_gettime(CLOCK_MONOTONIC): no
 * timing inside, no interleaving, no shared code with timehands-bench. It
 * makes N calls and exits; bench/run.sh times `vdsoloop N` and `vdsoloop 0`
 * from outside (hyperfine) and divides the difference by N.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 0;
	struct timespec now;
	unsigned long mix = 0;
	while (n--) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		mix ^= (unsigned long)now.tv_nsec;
	}
	/* the value is used, so the calls cannot be dropped; the exit status
	 * carries nothing */
	if (mix == 1)
		puts("");
	return 0;
}
