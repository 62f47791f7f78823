/* Environment parsing; see config.h. No allocation, no locale. */
#include "config.h"

#include <string.h>
#include <time.h>

#include "timehands.h"

const char *const th_config_vars[] = {
	"TIMEHANDS_DISABLE", "TIMEHANDS_RELAXED", "TIMEHANDS_PAGE_RECONNECT", "TIMEHANDS_COUNTER",
	"TIMEHANDS_CPUTIME", "TIMEHANDS_LINE",	  "TIMEHANDS_PAGE",	      "TIMEHANDS_COUNTER_READ",
	NULL,
};

static int lower(int ch)
{
	return ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch;
}

static int eq_nocase(const char *a, const char *b)
{
	for (; *a && *b; a++, b++)
		if (lower((unsigned char)*a) != lower((unsigned char)*b))
			return 0;
	return *a == *b;
}

int th_parse_bool(const char *v, int *out)
{
	static const char *const yes[] = {"1", "yes", "true", "on"};
	static const char *const no[] = {"0", "no", "false", "off", ""};
	if (!v)
		return -1;
	for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
		if (eq_nocase(v, yes[i])) {
			*out = 1;
			return 0;
		}
	for (size_t i = 0; i < sizeof no / sizeof *no; i++)
		if (eq_nocase(v, no[i])) {
			*out = 0;
			return 0;
		}
	return -1;
}

static void warn_append(struct th_config *c, const char *name, const char *value)
{
	size_t n = strlen(c->warning);
	const char *prefix = n ? "; " : "timehands: ignoring ";
	const char *parts[] = {prefix, name, "=", value};
	for (size_t i = 0; i < 4; i++) {
		for (const char *p = parts[i]; *p && n + 1 < sizeof c->warning; p++) {
			unsigned char ch = (unsigned char)*p;
			/* keep the line printable whatever the value holds */
			c->warning[n++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
		}
	}
	c->warning[n] = 0;
}

static void parse_flag(struct th_config *c, th_getenv_fn get, void *ctx, const char *name, int *out)
{
	const char *v = get(name, ctx);
	if (!v)
		return;
	if (th_parse_bool(v, out) != 0) {
		*out = 0;
		warn_append(c, name, v);
	}
}

void th_config_parse(struct th_config *c, th_getenv_fn get, void *ctx)
{
	memset(c, 0, sizeof *c);
	strcpy(c->page, TH_DEFAULT_PAGE);
	parse_flag(c, get, ctx, "TIMEHANDS_DISABLE", &c->disable);
	parse_flag(c, get, ctx, "TIMEHANDS_RELAXED", &c->relaxed);
	parse_flag(c, get, ctx, "TIMEHANDS_PAGE_RECONNECT", &c->page_reconnect);

	const char *v = get("TIMEHANDS_COUNTER", ctx);
	if (v) {
		if (eq_nocase(v, "auto") || !*v)
			c->counter = TH_CTR_AUTO;
		else if (eq_nocase(v, "off"))
			c->counter = TH_CTR_OFF;
		else if (eq_nocase(v, "force"))
			c->counter = TH_CTR_FORCE;
		else
			warn_append(c, "TIMEHANDS_COUNTER", v);
	}

	v = get("TIMEHANDS_COUNTER_READ", ctx);
	if (v) {
		if (eq_nocase(v, "early"))
			c->counter_read = TH_CTR_READ_EARLY;
		else if (eq_nocase(v, "late"))
			c->counter_read = TH_CTR_READ_LATE;
		else if (!eq_nocase(v, "auto") && *v)
			warn_append(c, "TIMEHANDS_COUNTER_READ", v);
	}

	v = get("TIMEHANDS_CPUTIME", ctx);
	if (v) {
		if (eq_nocase(v, "coarse"))
			c->cputime_coarse = 1;
		else if (!eq_nocase(v, "exact") && *v)
			warn_append(c, "TIMEHANDS_CPUTIME", v);
	}

	v = get("TIMEHANDS_LINE", ctx);
	if (v) {
		if (eq_nocase(v, "own"))
			c->own_line = 1;
		else if (!eq_nocase(v, "auto") && *v)
			warn_append(c, "TIMEHANDS_LINE", v);
	}

	v = get("TIMEHANDS_PAGE", ctx);
	if (v) {
		size_t n = strlen(v);
		if (n == 0 || n >= sizeof c->page || (v[0] != '/' && !eq_nocase(v, "none")))
			warn_append(c, "TIMEHANDS_PAGE", v);
		else
			memcpy(c->page, v, n + 1);
	}
}

static const struct {
	const char *name;
	long id;
} clock_names[] = {
	{"realtime", CLOCK_REALTIME},
	{"monotonic", CLOCK_MONOTONIC},
	{"process_cputime_id", CLOCK_PROCESS_CPUTIME_ID},
	{"thread_cputime_id", CLOCK_THREAD_CPUTIME_ID},
	{"monotonic_raw", CLOCK_MONOTONIC_RAW},
	{"realtime_coarse", CLOCK_REALTIME_COARSE},
	{"monotonic_coarse", CLOCK_MONOTONIC_COARSE},
	{"boottime", CLOCK_BOOTTIME},
	{"realtime_alarm", CLOCK_REALTIME_ALARM},
	{"boottime_alarm", CLOCK_BOOTTIME_ALARM},
	{"tai", CLOCK_TAI},
	{"realtime_relaxed", (long)TH_CLOCK_REALTIME_RELAXED},
	{"monotonic_relaxed", (long)TH_CLOCK_MONOTONIC_RELAXED},
	{"process_cputime_coarse", (long)TH_CLOCK_PROCESS_CPUTIME_COARSE},
	{"thread_cputime_coarse", (long)TH_CLOCK_THREAD_CPUTIME_COARSE},
};

int th_parse_clockid(const char *v, long *out)
{
	if (!v || !*v)
		return -1;
	const char *p = v;
	if (strncmp(p, "TH_", 3) == 0 || strncmp(p, "th_", 3) == 0)
		p += 3;
	if (strncmp(p, "CLOCK_", 6) == 0 || strncmp(p, "clock_", 6) == 0)
		p += 6;
	for (size_t i = 0; i < sizeof clock_names / sizeof *clock_names; i++)
		if (eq_nocase(p, clock_names[i].name)) {
			*out = clock_names[i].id;
			return 0;
		}
	/* decimal, optionally negative, fitting an int */
	const char *q = v;
	int neg = 0;
	if (*q == '-') {
		neg = 1;
		q++;
	}
	if (!*q)
		return -1;
	long n = 0;
	for (; *q; q++) {
		if (*q < '0' || *q > '9')
			return -1;
		n = n * 10 + (*q - '0');
		if (n > 2147483648L)
			return -1;
	}
	if (!neg && n > 2147483647L)
		return -1;
	*out = neg ? -n : n;
	return 0;
}
