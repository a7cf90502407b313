/*
 * options_int.h: what the parts of the option module share (private to
 * app/options*.c; the public API is options.h).
 *
 * defines: struct opt, enum opt_kind, enum opt_group, struct command,
 *          options_table, options_commands, N_OPTS, N_COMMANDS,
 *          options_command_name, and the command bits T, M, P, G, D, I, R
 *
 * The parts:
 *   options_table.c  the rows: every option and every command
 *   options_parse.c  the command line (getopt_long), job files through
 *                    config_load, and the checks of each value
 *   options_help.c   --help for the program and for each command
 * Include it after the system headers: the command bits are one letter.
 */
#ifndef XJ_OPTIONS_INT_H
#define XJ_OPTIONS_INT_H

#include <stddef.h>
#include <stdint.h>

#include "options.h"

/* Command bits: which commands accept an option, and for which it is
 * required (for the usage line). 'plan' accepts what its target accepts. */
#define T (1u << XJ_CMD_TOPK)
#define M (1u << XJ_CMD_MATRIX)
#define P (1u << XJ_CMD_PLAN)
#define G (1u << XJ_CMD_GEN)
#define D (1u << XJ_CMD_DEVICES)
#define I (1u << XJ_CMD_INSPECT)
#define R (1u << XJ_CMD_RANGE)

enum opt_kind {
	K_INPUT,      /* FILE[:DATASET] spec, kept raw; clears the dataset */
	K_PATH,       /* a path */
	K_INT64,      /* integer in [lo, hi] */
	K_INT,        /* int field, integer in [lo, hi] */
	K_SEED,       /* uint64 field, integer in [lo, hi] */
	K_SIZE,       /* bytes, optional K/M/G/T binary suffix, > 0 */
	K_FRACTION,   /* double in (0, 1] */
	K_THRESHOLD,  /* finite double, or "none" */
	K_METRIC,
	K_DEVICE,     /* auto, gpu or cpu */
	K_PRECISION,  /* auto, fp32, tf32, bf16, fp16 or int8 */
	K_FLAG,       /* int field set to 1 (command line) or a boolean */
	K_NOT_FLAG,   /* int field set to 0: --quiet clears progress */
	K_CONFIG,     /* command line only: the job file */
	K_HELP,       /* command line only */
	K_VERSION,    /* command line only */
};

enum opt_group { GROUP_JOB, GROUP_RESOURCES, GROUP_GENERAL };

struct opt {
	const char *name;         /* long option and INI key */
	int short_name;           /* 0: none */
	enum opt_kind kind;
	size_t offset;            /* field in xj_job */
	size_t dset_offset;       /* K_INPUT: the dataset field it clears */
	int64_t lo, hi;           /* integer kinds */
	unsigned cmds;            /* commands accepting it (T, M, G, D) */
	unsigned required;        /* commands needing it (T, M, P, G) */
	enum opt_group group;
	const char *metavar;      /* NULL for flags */
	const char *help;         /* '\n' continues on an indented line */
	const char *def;          /* default shown by --help, or NULL */
};

struct command {
	const char *name;
	xj_command cmd;
	const char *summary;
};

/* Rows of each table. getopt's arrays are sized by N_OPTS, so it must be
 * a constant; options_table.c fails to compile when a count is off. */
#define N_OPTS 34
#define N_COMMANDS 7

extern const struct opt options_table[];
extern const struct command options_commands[];

const char *options_command_name(xj_command cmd);

#endif
