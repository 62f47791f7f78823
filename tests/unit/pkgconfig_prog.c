/* Built as C and as C++ against the installed header. */
#include <stdio.h>
#include <timehands.h>

int main(void)
{
	struct timespec t;
	struct timeval tv;
	struct th_status st;
	if (th_clock_gettime(CLOCK_MONOTONIC, &t) != 0 || th_gettimeofday(&tv, NULL) != 0 || th_time(NULL) <= 0 ||
	    th_status(&st, sizeof st) != 0)
		return 1;
	printf("mode %u, MONOTONIC %lld.%09ld\n", st.mode, (long long)t.tv_sec, t.tv_nsec);
	return 0;
}
