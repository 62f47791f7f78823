/*
 * The public header in strict ISO C (no POSIX feature macros: no CLOCK_*
 * names, no inline fine reads) and, built with the project's flags, as the
 * library's users compile it. Built with C_EXTENSIONS OFF; run, it checks
 * that the calls it makes work.
 */
#include "timehands.h"

#include <stdio.h>

int main(void)
{
	struct timespec a, b;
	struct timeval tv;
	if (th_clock_gettime(1, &a) != 0 || th_gettimeofday(&tv, NULL) != 0 || th_clock_gettime(1, &b) != 0)
		return 1;
	if (b.tv_sec < a.tv_sec || (b.tv_sec == a.tv_sec && b.tv_nsec < a.tv_nsec))
		return 1;
	time_t t = th_time(NULL);
	if (t < tv.tv_sec)
		return 1;
	printf("header_strict: ok (strict ISO C17)\n");
	return 0;
}
