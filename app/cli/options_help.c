/*
 * options_help.c: --help for the program and for each command, written
 * from the option table, so that what --help lists is what parses.
 */
#define _POSIX_C_SOURCE 200809L

#include "options.h"

#include <string.h>

#include "options_int.h"
#include "version.h"

/* Why each exit code happens; the names come from xj_exit_name(). */
static const struct {
	int code;
	const char *why;
} exit_codes[] = {
	{ XJ_OK, "the job ran to the end" },
	{ XJ_EXIT_INTERNAL, "a bug or an unexpected library failure" },
	{ XJ_EXIT_USAGE, "bad option, bad job file, existing output" },
	{ XJ_EXIT_INPUT, "missing or invalid input file or values" },
	{ XJ_EXIT_RESOURCE, "memory, disk, output not writable" },
	{ XJ_EXIT_INTERRUPTED, "stopped by a signal; rerun with --resume" },
	{ XJ_EXIT_LOST, "a rank stopped answering (dead node or link);\n"
			"rerun with --resume once it is back" },
};

/* Options shown for cmd: those of both commands for plan. */
static unsigned help_mask(xj_command cmd)
{
	return cmd == XJ_CMD_PLAN ? (T | M) : 1u << cmd;
}

/* "-q, --query QUERIES" or "    --self" */
static void help_left(const struct opt *o, char *buf, size_t size)
{
	char shortpart[8] = "    ";

	if (o->short_name)
		snprintf(shortpart, sizeof(shortpart), "-%c, ", o->short_name);
	snprintf(buf, size, "%s--%s%s%s", shortpart, o->name,
		 o->metavar ? " " : "", o->metavar ? o->metavar : "");
}

/* "-q QUERIES", "--self" */
static void usage_word(const struct opt *o, char *buf, size_t size)
{
	if (o->short_name)
		snprintf(buf, size, "-%c", o->short_name);
	else
		snprintf(buf, size, "--%s", o->name);
	if (o->metavar)
		snprintf(buf + strlen(buf), size - strlen(buf), " %s",
			 o->metavar);
}

/* Prints " word" (or "\n   ... word" past 79 columns); returns the column. */
static int usage_put(FILE *out, int col, int indent, const char *word)
{
	int len = (int)strlen(word) + 1;

	if (col + len > 79) {
		fprintf(out, "\n%*s", indent, "");
		col = indent;
	}
	fprintf(out, " %s", word);
	return col + len;
}

static void help_usage(FILE *out, xj_command cmd)
{
	unsigned mask = help_mask(cmd), req = 1u << cmd;
	char word[64], shown[72];
	int col, indent;
	size_t i;

	col = fprintf(out, "usage: xjoin %s", options_command_name(cmd));
	indent = col;
	if (cmd == XJ_CMD_PLAN)
		col = usage_put(out, col, indent, "[topk|matrix|range]");
	if (cmd == XJ_CMD_INSPECT)
		col = usage_put(out, col, indent, "FILE");
	for (i = 0; i < N_OPTS; i++) {
		if (options_table[i].group != GROUP_JOB ||
		    !(options_table[i].cmds & mask))
			continue;
		usage_word(&options_table[i], word, sizeof(word));
		snprintf(shown, sizeof(shown),
			 options_table[i].required & req ? "%s" : "[%s]", word);
		col = usage_put(out, col, indent, shown);
	}
	usage_put(out, col, indent, "[options]");
	fputc('\n', out);
}

/* Prints text, continuing each '\n' on a line indented by indent. */
static void print_indented(FILE *out, const char *text, int indent)
{
	const char *nl;

	while ((nl = strchr(text, '\n')) != NULL) {
		fprintf(out, "%.*s\n%*s", (int)(nl - text), text, indent, "");
		text = nl + 1;
	}
	fputs(text, out);
}

static int help_width(unsigned mask)
{
	char left[128];
	int w = 0;
	size_t i;

	for (i = 0; i < N_OPTS; i++) {
		if (!(options_table[i].cmds & mask))
			continue;
		help_left(&options_table[i], left, sizeof(left));
		if ((int)strlen(left) > w)
			w = (int)strlen(left);
	}
	return w;
}

/* " [default: X]" after the help, or under it when the line would pass
 * 79 columns. */
static void help_default(FILE *out, const struct opt *o, int indent)
{
	const char *last = strrchr(o->help, '\n');
	size_t used = (size_t)indent + strlen(last ? last + 1 : o->help);

	if (!o->def)
		return;
	if (used + strlen(" [default: ]") + strlen(o->def) > 79)
		fprintf(out, "\n%*s", indent - 1, "");
	fprintf(out, " [default: %s]", o->def);
}

static void help_group(FILE *out, xj_command cmd, enum opt_group group,
		       const char *title)
{
	unsigned mask = help_mask(cmd);
	int width = help_width(mask), any = 0;
	char left[128];
	size_t i;

	for (i = 0; i < N_OPTS; i++)
		any |= options_table[i].group == group &&
		       (options_table[i].cmds & mask);
	if (!any)
		return;   /* devices has no job options */
	fprintf(out, "\n%s:\n", title);
	for (i = 0; i < N_OPTS; i++) {
		const struct opt *o = &options_table[i];

		if (o->group != group || !(o->cmds & mask))
			continue;
		help_left(o, left, sizeof(left));
		fprintf(out, "  %-*s  ", width, left);
		print_indented(out, o->help, width + 4);
		help_default(out, o, width + 4);
		fputc('\n', out);
	}
}

static void help_commands(FILE *out)
{
	size_t i;

	fprintf(out, "\ncommands:\n");
	for (i = 0; i < N_COMMANDS; i++) {
		fprintf(out, "  %-8s ", options_commands[i].name);
		print_indented(out, options_commands[i].summary, 11);
		fputc('\n', out);
	}
}

static void help_exit_codes(FILE *out)
{
	size_t i;

	fprintf(out, "\nexit status:\n");
	for (i = 0; i < sizeof(exit_codes) / sizeof(exit_codes[0]); i++)
		fprintf(out, "  %d  %-15s %s\n", exit_codes[i].code,
			xj_exit_name(exit_codes[i].code), exit_codes[i].why);
}

static void help_top(FILE *out)
{
	fprintf(out,
		"usage: xjoin COMMAND [options]\n"
		"       xjoin help COMMAND | xjoin COMMAND --help\n"
		"       xjoin --version\n"
		"\n"
		"Exact top-k joins and distance matrices between two sets of\n"
		"dense vectors stored in HDF5, on one CPU or many MPI ranks,\n"
		"with a GPU per rank where there are GPUs.\n");
	help_commands(out);
	fprintf(out,
		"\n"
		"Options come from the command line and from an INI job file\n"
		"(-c FILE) whose keys are the long option names; the command\n"
		"line wins over the file, the file over the defaults.\n");
	help_exit_codes(out);
}

void options_help(FILE *out, xj_command cmd)
{
	size_t i;

	if (cmd == XJ_CMD_NONE) {
		help_top(out);
		return;
	}
	help_usage(out, cmd);
	for (i = 0; i < N_COMMANDS; i++) {
		if (options_commands[i].cmd != cmd)
			continue;
		fputc('\n', out);
		print_indented(out, options_commands[i].summary, 0);
		fputc('\n', out);
	}
	if (cmd == XJ_CMD_PLAN)
		fprintf(out,
			"\nIt takes the options of the command it plans (topk\n"
			"when -k is given and no command is named, else matrix);\n"
			"-o is optional. `plan range` also estimates the pairs and\n"
			"the output size from a sample of the inputs.\n");
	if (cmd == XJ_CMD_INSPECT)
		fprintf(out,
			"\nFILE is an xjoin output (OUT.h5); where there is none,\n"
			"the OUT.h5.partial and OUT.h5.progress of an unfinished\n"
			"run are described. Other HDF5 files are listed. Rank 0\n"
			"reads, in slabs; exit 3 when FILE cannot be read or a row\n"
			"breaks the output's rules (order, padding, indices).\n");
	help_group(out, cmd, GROUP_JOB, "job");
	help_group(out, cmd, GROUP_RESOURCES, "resources");
	help_group(out, cmd, GROUP_GENERAL, "general");
	if (cmd != XJ_CMD_INSPECT)   /* it describes a file, runs no job */
		fprintf(out,
			"\nEvery option but config, help and version can stand in a\n"
			"job file as `name = value` (flags: true or false).\n");
}

/* ---- the man page ------------------------------------------------------ */

/* text with troff's specials escaped and '\n' (a help line's break)
 * as a space. */
static void man_text(FILE *out, const char *text)
{
	for (const char *p = text; *p; p++) {
		if (*p == '\\')
			fputs("\\e", out);
		else if (*p == '-')
			fputs("\\-", out);
		else if (*p == '\n')
			fputc(' ', out);
		else if (*p == '`')
			fputc('\'', out);
		else if ((*p == '.' || *p == '\'') &&
			 (p == text || p[-1] == '\n'))
			fprintf(out, "\\&%c", *p);
		else
			fputc(*p, out);
	}
}

static void man_commands_of(FILE *out, unsigned cmds)
{
	int first = 1;

	for (size_t i = 0; i < N_COMMANDS; i++)
		if (cmds & (1u << options_commands[i].cmd)) {
			fprintf(out, "%s%s", first ? "" : ", ",
				options_commands[i].name);
			first = 0;
		}
}

static void man_group(FILE *out, enum opt_group group, const char *title)
{
	fprintf(out, ".SS %s\n", title);
	for (size_t i = 0; i < N_OPTS; i++) {
		const struct opt *o = &options_table[i];

		if (o->group != group)
			continue;
		fputs(".TP\n", out);
		if (o->short_name)
			fprintf(out, "\\fB\\-%c\\fR, ", o->short_name);
		fprintf(out, "\\fB\\-\\-");
		man_text(out, o->name);
		fputs("\\fR", out);
		if (o->metavar) {
			fputs(" \\fI", out);
			man_text(out, o->metavar);
			fputs("\\fR", out);
		}
		fputc('\n', out);
		man_text(out, o->help);
		if (o->def) {
			fputs(" [default: ", out);
			man_text(out, o->def);
			fputc(']', out);
		}
		fputs(" (", out);
		man_commands_of(out, o->cmds);
		fputs(")\n", out);
	}
}

void options_man(FILE *out)
{
	fprintf(out, ".\\\" xjoin's manual page, written from its option table "
		"(app/cli/options_table.c)\n.TH XJOIN 1 \"\" \"xjoin %s\" "
		"\"User Commands\"\n", XJOIN_VERSION);
	fputs(".SH NAME\nxjoin \\- exact top\\-k joins, range joins and "
	      "distance matrices of dense vectors\n.SH SYNOPSIS\n", out);
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(out, ".B xjoin %s\n[\\fIoptions\\fR]\n.br\n",
			options_commands[i].name);
	fputs(".B xjoin\n\\-\\-help | \\-\\-version\n.SH DESCRIPTION\n", out);
	fputs("Exact top\\-k joins, range joins and distance matrices between "
	      "two sets of dense vectors stored in HDF5, on one CPU or many "
	      "MPI ranks (mpirun, srun), with a GPU per rank where there are "
	      "GPUs. Every reported value is rescored canonically in double "
	      "precision, so results are the same bits whatever the rank "
	      "count, chunking, device or candidate precision.\n"
	      ".PP\nOptions come from the command line and from an INI job "
	      "file (\\fB\\-c\\fR \\fIFILE\\fR) whose keys are the long "
	      "option names; the command line wins over the file, the file "
	      "over the defaults.\n.SH COMMANDS\n", out);
	for (size_t i = 0; i < N_COMMANDS; i++) {
		fprintf(out, ".TP\n.B %s\n", options_commands[i].name);
		man_text(out, options_commands[i].summary);
		fputc('\n', out);
	}
	fputs(".SH OPTIONS\n", out);
	man_group(out, GROUP_JOB, "Job");
	man_group(out, GROUP_RESOURCES, "Resources");
	man_group(out, GROUP_GENERAL, "General");
	fputs(".SH EXIT STATUS\n", out);
	for (size_t i = 0; i < sizeof(exit_codes) / sizeof(exit_codes[0]);
	     i++) {
		fprintf(out, ".TP\n.B %d\n%s: ", exit_codes[i].code,
			xj_exit_name(exit_codes[i].code));
		man_text(out, exit_codes[i].why);
		fputc('\n', out);
	}
	fputs(".SH ENVIRONMENT\n"
	      ".TP\n.B XJOIN_CACHE_DIR\nwhere \\-\\-precision auto keeps its "
	      "measurements (else $XDG_CACHE_HOME/xjoin, ~/.cache/xjoin)\n"
	      ".TP\n.B XJOIN_CALIB_MIN_GFLOP\njobs below this many GFLOP "
	      "are not measured (the cached model, else bf16 where the CPU "
	      "multiplies it natively, else fp32)\n"
	      ".TP\n.B XJOIN_CUDA_MODULE\nthe CUDA backend module to load "
	      "(else libxjoin_cuda.so next to the binary or in its ../lib)\n"
	      ".TP\n.B XJ_CUDA_SELECT, XJ_CUDA_PASS_COLS, XJ_CUDA_PIPELINE, "
	      "XJ_CUDA_SEED, XJ_CUDA_SCAN, XJ_CUDA_SYM, XJ_CUDA_TIMING\nthe GPU top\\-k's A/B switches\n"
	      ".TP\n.B XJ_NCCL, XJ_NCCL_LIBRARY, XJ_NCCL_TIMEOUT\nmerging "
	      "over NCCL\n"
	      ".TP\n.B XJ_MATRIX_OVERLAP, XJ_MATRIX_IO\nhow the matrix is "
	      "written\n"
	      ".SH SEE ALSO\n.BR xjoin\\-mpirun ,\n.BR mpirun (1),\n"
	      ".BR h5dump (1);\nREADME.md and docs/ (installed in "
	      "share/doc/xjoin)\n", out);
}
