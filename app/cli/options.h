/*
 * options.h: the one option table behind the command line, INI job files
 * and --help.
 *
 * app/cli/ owns the command line: the option table (options_table.c),
 * argv and INI job files into an xj_job (options_parse.c) and --help
 * (options_help.c). Nothing here touches MPI, files or devices.
 *
 * defines: options_parse, options_set, options_help, options_man,
 *          options_version
 *
 * Usage: xjoin COMMAND [options]; COMMAND is topk, matrix, plan, gen.
 * `xjoin plan [topk|matrix|range] ...` prints the plan of that command (topk when
 * -k is given and no command is named, else matrix).
 */
#ifndef XJ_OPTIONS_H
#define XJ_OPTIONS_H

#include <stdio.h>

#include "../../config/job.h"
#include "../../config/status.h"

/* What the caller should do after options_parse. */
enum { OPTIONS_RUN = 0, OPTIONS_HELP_SHOWN = 1, OPTIONS_VERSION_SHOWN = 2 };

/* Resolve argv into job: defaults, then the INI file named by --config (if
 * any), then the other command-line options, then job_check(). Prints
 * --help / --version to out when asked and returns OPTIONS_HELP_SHOWN /
 * OPTIONS_VERSION_SHOWN in *action. Errors: XJ_EXIT_USAGE with a message
 * naming the option (and file:line for INI). Resets getopt state so it can
 * be called more than once (tests). */
int options_parse(int argc, char **argv, xj_job *job, int *action, FILE *out,
		  xj_status *st);

/* Set one option by long name from text (the INI path and tests use it). */
int options_set(xj_job *job, const char *name, const char *value,
		xj_status *st);

/* Print help for cmd (XJ_CMD_NONE: top level) from the option table. */
void options_help(FILE *out, xj_command cmd);
/* The manual page (man(7) troff), from the same table: every command,
 * option, default, exit status and environment variable. */
void options_man(FILE *out);

#endif
