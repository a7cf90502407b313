/*
 * fuzz_options.c: libFuzzer harness for the command line and INI job
 * files (options_parse, config_load through --config, job_check).
 *
 * Input: ARGV [ "\n--ini--\n" INI ]
 *
 *   ARGV  words split at NUL or newline; the first is the command (argv[1]),
 *         "@" stands for the path of the job file below. Fed to
 *         options_parse() with help and version text going to /dev/null.
 *   INI   the job file text (the whole input when there is no divider),
 *         written to a scratch file and loaded as `xjoin CMD -c FILE` for
 *         every command, which is the path --config takes in xjoin: libinih,
 *         the line-counting reader, options_set(), then job_check().
 *
 * So the example job files of config/examples are seeds as they are, and a
 * command line seed can also carry a job file for `-c @`.
 *
 * Beyond "no crash, no leak, no undefined behaviour" it checks what
 * options.h promises: the code is success, usage or resource (never
 * internal), an error has a message, help and version are successes, and
 * a job that parsed is one job_check() accepts, with every text field
 * terminated.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/job.h"
#include "app/cli/options.h"
#include "fuzz_util.h"

#define FUZZ_DIVIDER "\n--ini--\n"
#define FUZZ_WORDS_MAX 256

static FILE *fuzz_sink;
static struct fuzz_file fuzz_ini;

static void fuzz_options_setup(void)
{
	if (fuzz_sink)
		return;
	fuzz_sink = fopen("/dev/null", "w");
	if (!fuzz_sink) {
		perror("/dev/null");
		exit(1);
	}
	fuzz_file_open(&fuzz_ini, ".ini");
}

static void fuzz_check_text(const char *name, const char *field, size_t size)
{
	if (!memchr(field, '\0', size))
		fuzz_die("job.%s is not terminated", name);
}

#define FUZZ_TEXT(job, f) fuzz_check_text(#f, (job)->f, sizeof((job)->f))

/* What a successful parse must hold. */
static void fuzz_check_job(const xj_job *job, int action)
{
	xj_status st;
	int rc;

	FUZZ_TEXT(job, query_file);
	FUZZ_TEXT(job, query_dset);
	FUZZ_TEXT(job, base_file);
	FUZZ_TEXT(job, base_dset);
	FUZZ_TEXT(job, output);
	FUZZ_TEXT(job, config);
	FUZZ_TEXT(job, report_json);
	FUZZ_TEXT(job, inspect_file);
	if (action != OPTIONS_RUN)
		return;
	if (job->command == XJ_CMD_NONE)
		fuzz_die("a job to run without a command");
	if (job->command == XJ_CMD_PLAN && job->plan_of != XJ_CMD_TOPK &&
	    job->plan_of != XJ_CMD_MATRIX)
		fuzz_die("plan of command %d", (int)job->plan_of);
	xj_ok(&st);
	rc = job_check(job, &st);
	if (rc != XJ_OK)
		fuzz_die("options_parse accepted a job job_check refuses: %s",
			 st.msg);
}

static void fuzz_parse(int argc, char **argv)
{
	xj_status st;
	xj_job job;
	int action = -1, rc;

	/* poison: options_parse must set every field it reports through */
	memset(&job, 0xA5, sizeof(job));
	memset(&st, 0xA5, sizeof(st));
	rc = options_parse(argc, argv, &job, &action, fuzz_sink, &st);
	fuzz_check_status("options_parse", rc, &st,
			  FUZZ_CODE(XJ_OK) | FUZZ_CODE(XJ_EXIT_USAGE) |
			  FUZZ_CODE(XJ_EXIT_RESOURCE));
	if (action != OPTIONS_RUN && action != OPTIONS_HELP_SHOWN &&
	    action != OPTIONS_VERSION_SHOWN)
		fuzz_die("options_parse left action %d", action);
	if (rc == XJ_OK)
		fuzz_check_job(&job, action);
}

/* ARGV words into argv[1..]; returns argc. */
static int fuzz_split(char *text, size_t len, char **argv, int max)
{
	int argc = 1;
	char *word = text;

	argv[0] = "xjoin";
	for (size_t i = 0; i <= len && argc < max - 1; i++) {
		if (i < len && text[i] != '\0' && text[i] != '\n')
			continue;
		if (i == len && !word[0] && argc > 1)
			break;   /* a trailing newline ends the last word */
		text[i] = '\0';
		argv[argc++] = strcmp(word, "@") == 0 ? fuzz_ini.path : word;
		word = text + i + 1;
	}
	argv[argc] = NULL;
	return argc;
}

/* The job file as `xjoin CMD -c FILE`, for every command. */
static void fuzz_job_file(void)
{
	static const char *const cmds[] = {
		"topk", "matrix", "plan", "gen", "devices", "inspect",
	};
	char *argv[5];

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		argv[0] = "xjoin";
		argv[1] = (char *)cmds[i];
		argv[2] = "-c";
		argv[3] = fuzz_ini.path;
		argv[4] = NULL;
		fuzz_parse(4, argv);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *argv[FUZZ_WORDS_MAX];
	const char *div;
	size_t argv_len = size, ini_off = 0;
	char *text;
	int argc;

	fuzz_options_setup();
	div = memmem(data, size, FUZZ_DIVIDER, strlen(FUZZ_DIVIDER));
	if (div) {
		argv_len = (size_t)(div - (const char *)data);
		ini_off = argv_len + strlen(FUZZ_DIVIDER);
	}
	fuzz_file_write(&fuzz_ini, data + ini_off, size - ini_off);

	/* exactly the words' bytes plus one terminator: ASan sees overreads */
	text = malloc(argv_len + 1);
	if (!text)
		return 0;
	memcpy(text, data, argv_len);
	text[argv_len] = '\0';
	argc = fuzz_split(text, argv_len, argv, FUZZ_WORDS_MAX);
	fuzz_parse(argc, argv);
	free(text);

	fuzz_job_file();
	return 0;
}
