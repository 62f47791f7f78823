/*
 * The timehands command line tool: shared declarations.
 *
 *   timehands.c  dispatch, `run`, `bench`, locating the preload
 *   status.c     `status`: what a process started now would get
 *   check.c      `check`: a diagnosis of the machine's clocks
 *   system.c     `enable --system`, `disable --system`: /etc/ld.so.preload
 *   emit.c       output as `key: value` lines or one JSON object
 *
 * The tool links the library's objects, so `status` and `check` exercise the
 * same code a program gets, with the same environment.
 */
#ifndef TH_TOOLS_CLI_H
#define TH_TOOLS_CLI_H

#include <stddef.h>
#include <stdio.h>

/* ------------------------------------------------------------------ emit */

/* A flat record of named values; nested objects for groups (JSON) or dotted
 * key prefixes (text). */
struct th_emit {
	FILE *f;
	int json;
	int depth;
	int first[8];      /* per depth: nothing emitted at this level yet */
	char prefix[8][48]; /* text mode: key prefix per depth */
};

void th_emit_begin(struct th_emit *e, FILE *f, int json);
void th_emit_end(struct th_emit *e);
void th_emit_group(struct th_emit *e, const char *key);
void th_emit_group_end(struct th_emit *e);
void th_emit_str(struct th_emit *e, const char *key, const char *value);
/* Numbers: JSON gets the bare number; text gets it with the unit. */
void th_emit_num(struct th_emit *e, const char *key, double value, int decimals, const char *unit);
void th_emit_int(struct th_emit *e, const char *key, long long value, const char *unit);
void th_emit_bool(struct th_emit *e, const char *key, int value);
/* A text-only line (a human summary JSON does not need). */
void th_emit_text(struct th_emit *e, const char *key, const char *value);

/* -------------------------------------------------------------- commands */

int th_cli_status(int argc, char **argv);
int th_cli_check(int argc, char **argv);
int th_cli_enable(int argc, char **argv);
int th_cli_disable(int argc, char **argv);
int th_cli_preload_selftest(void);
/* "off", or "on (/etc/ld.so.preload lists PATH)" */
void th_cli_system_preload(char *out, size_t size);

/* The preload `timehands run` would use: 0 and the absolute path of the
 * file in `file` and the LD_PRELOAD entry naming it in `entry` (spelt with
 * $LIB where that resolves to the same file, see timehands.c; checking that
 * loads the preload into this process, so only if `spell_lib`); -1 if none
 * was found (`file` then lists where it looked). */
int th_cli_find_preload(char *entry, size_t entry_size, char *file, size_t file_size, int spell_lib);

const char *th_cli_mode_name(unsigned mode);
const char *th_cli_counter_name(unsigned counter);

#endif
