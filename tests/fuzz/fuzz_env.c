/*
 * libFuzzer target for the environment parsing (src/core/config.c).
 *
 * The input is a list of NAME=VALUE lines served by the getenv callback (the
 * first line naming a variable wins, as getenv would see one environment);
 * whatever the bytes, th_config_parse must produce a configuration inside its
 * documented ranges: flags 0 or 1, a counter mode it knows, a page path that
 * is the default, "none" or absolute, a printable one-line warning, and a
 * flag equal to what th_parse_bool says of its value (or 0, with a warning).
 * th_parse_bool is also checked on the whole input against its definition.
 */
/* the checks are the target: kept in every build type */
#undef NDEBUG
#include <assert.h>
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define MAX_LINES 16

struct env {
	char text[4096];
	const char *name[MAX_LINES], *value[MAX_LINES];
	int n;
	int lookups;
};

static const char *get(const char *name, void *ctx)
{
	struct env *e = ctx;
	e->lookups++;
	for (int i = 0; i < e->n; i++)
		if (strcmp(e->name[i], name) == 0)
			return e->value[i];
	return NULL;
}

static void split(struct env *e, const uint8_t *data, size_t size)
{
	size_t n = size < sizeof e->text - 1 ? size : sizeof e->text - 1;
	memcpy(e->text, data, n);
	e->text[n] = 0;
	e->n = 0;
	char *p = e->text;
	while (*p && e->n < MAX_LINES) {
		char *end = strchr(p, '\n');
		if (end)
			*end = 0;
		char *eq = strchr(p, '=');
		if (eq) {
			*eq = 0;
			e->name[e->n] = p;
			e->value[e->n] = eq + 1;
			e->n++;
		}
		if (!end)
			break;
		p = end + 1;
	}
}

static int ieq(const char *a, const char *b)
{
	for (; *a && *b; a++, b++)
		if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
			return 0;
	return *a == *b;
}

/* th_parse_bool's definition, independently. */
static int bool_ref(const char *v, int *out)
{
	static const char *const yes[] = {"1", "yes", "true", "on"};
	static const char *const no[] = {"0", "no", "false", "off", ""};
	for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
		if (ieq(v, yes[i]))
			return *out = 1, 0;
	for (size_t i = 0; i < sizeof no / sizeof *no; i++)
		if (ieq(v, no[i]))
			return *out = 0, 0;
	return -1;
}

static void check_flag(const struct th_config *c, struct env *e, const char *name, int flag)
{
	assert(flag == 0 || flag == 1);
	const char *v = get(name, e);
	if (!v) {
		assert(flag == 0);
		return;
	}
	int want = -1;
	if (bool_ref(v, &want) == 0)
		assert(flag == want);
	else
		assert(flag == 0 && c->warning[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct env e;
	split(&e, data, size);

	struct th_config c, again;
	memset(&c, 0xa5, sizeof c); /* the parser must set every field */
	th_config_parse(&c, get, &e);
	memset(&again, 0x5a, sizeof again);
	th_config_parse(&again, get, &e);
	assert(memcmp(&c, &again, sizeof c) == 0); /* every byte set, deterministically */

	check_flag(&c, &e, "TIMEHANDS_DISABLE", c.disable);
	check_flag(&c, &e, "TIMEHANDS_RELAXED", c.relaxed);
	assert(c.counter == TH_CTR_AUTO || c.counter == TH_CTR_OFF || c.counter == TH_CTR_FORCE);
	assert(c.cputime_coarse == 0 || c.cputime_coarse == 1);
	assert(c.counter_read >= TH_CTR_READ_AUTO && c.counter_read <= TH_CTR_READ_LATE);

	assert(memchr(c.page, 0, sizeof c.page) != NULL);
	assert(strcmp(c.page, TH_DEFAULT_PAGE) == 0 || c.page[0] == '/' || ieq(c.page, "none"));
	const char *pv = get("TIMEHANDS_PAGE", &e);
	if (pv && (pv[0] == '/' || ieq(pv, "none")) && strlen(pv) < sizeof c.page)
		assert(strcmp(c.page, pv) == 0);

	assert(memchr(c.warning, 0, sizeof c.warning) != NULL);
	for (const char *w = c.warning; *w; w++)
		assert(*w >= 0x20 && *w < 0x7f); /* one printable line, whatever the values hold */

	/* th_parse_bool on the raw input, NUL-terminated */
	char s[64];
	size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
	memcpy(s, data, n);
	s[n] = 0;
	int got = -7, want = -7;
	int r = th_parse_bool(s, &got), rr = bool_ref(s, &want);
	assert(r == rr);
	assert(r != 0 || got == want);
	assert(r == 0 || got == -7); /* untouched on failure */
	assert(th_parse_bool(NULL, &got) == -1);
	return 0;
}
