/* Output as `key: value` lines or as one JSON object; see cli.h. */
#include <math.h>
#include <string.h>

#include "cli.h"

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch == '\n')
			fputs("\\n", f);
		else if (ch < 0x20 || ch == 0x7f)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void indent(struct th_emit *e)
{
	for (int i = 0; i <= e->depth; i++)
		fputs("  ", e->f);
}

/* Start a member: the separator and the key. */
static void key(struct th_emit *e, const char *k)
{
	if (e->json) {
		fputs(e->first[e->depth] ? "\n" : ",\n", e->f);
		e->first[e->depth] = 0;
		indent(e);
		json_string(e->f, k);
		fputs(": ", e->f);
	} else {
		for (int i = 1; i <= e->depth; i++)
			fputs(e->prefix[i], e->f);
		fprintf(e->f, "%s: ", k);
	}
}

void th_emit_begin(struct th_emit *e, FILE *f, int json)
{
	memset(e, 0, sizeof *e);
	e->f = f;
	e->json = json;
	e->first[0] = 1;
	if (json)
		fputc('{', f);
}

void th_emit_end(struct th_emit *e)
{
	if (e->json)
		fputs("\n}\n", e->f);
	fflush(e->f);
}

void th_emit_group(struct th_emit *e, const char *k)
{
	if (e->depth + 1 >= (int)(sizeof e->first / sizeof *e->first))
		return;
	if (e->json) {
		key(e, k);
		fputc('{', e->f);
	}
	e->depth++;
	e->first[e->depth] = 1;
	snprintf(e->prefix[e->depth], sizeof e->prefix[e->depth], "%s.", k);
}

void th_emit_group_end(struct th_emit *e)
{
	if (e->depth == 0)
		return;
	e->depth--;
	if (e->json) {
		fputc('\n', e->f);
		indent(e);
		fputc('}', e->f);
	}
}

void th_emit_str(struct th_emit *e, const char *k, const char *v)
{
	key(e, k);
	if (e->json)
		json_string(e->f, v);
	else
		fprintf(e->f, "%s\n", v);
}

void th_emit_num(struct th_emit *e, const char *k, double v, int decimals, const char *unit)
{
	key(e, k);
	if (e->json) {
		if (isfinite(v))
			fprintf(e->f, "%.*f", decimals, v);
		else
			fputs("null", e->f);
	} else if (unit && *unit) {
		fprintf(e->f, "%.*f %s\n", decimals, v, unit);
	} else {
		fprintf(e->f, "%.*f\n", decimals, v);
	}
}

void th_emit_int(struct th_emit *e, const char *k, long long v, const char *unit)
{
	key(e, k);
	if (e->json)
		fprintf(e->f, "%lld", v);
	else if (unit && *unit)
		fprintf(e->f, "%lld %s\n", v, unit);
	else
		fprintf(e->f, "%lld\n", v);
}

void th_emit_bool(struct th_emit *e, const char *k, int v)
{
	key(e, k);
	if (e->json)
		fputs(v ? "true" : "false", e->f);
	else
		fputs(v ? "yes\n" : "no\n", e->f);
}

void th_emit_text(struct th_emit *e, const char *k, const char *v)
{
	if (!e->json)
		th_emit_str(e, k, v);
}
