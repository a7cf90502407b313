/*
 * options_parse.c: argv and job files into an xj_job: the command line
 * through getopt_long, a job file named by -c through config_load and
 * options_set, and the checks of each value (syntax, range) on the way.
 */
#define _POSIX_C_SOURCE 200809L

#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../config/config.h"
#include "options_int.h"
#include "version.h"

/* --- lookups --- */

static const struct command *command_find(const char *name)
{
	size_t i;

	for (i = 0; i < N_COMMANDS; i++)
		if (strcmp(options_commands[i].name, name) == 0)
			return &options_commands[i];
	return NULL;
}

static const struct opt *opt_find(const char *name)
{
	size_t i;

	for (i = 0; i < N_OPTS; i++)
		if (strcmp(options_table[i].name, name) == 0)
			return &options_table[i];
	return NULL;
}

/* getopt_long reports an option by its val: the short letter, or 256 +
 * the table index for options that have none. */
static int opt_val(const struct opt *o)
{
	return o->short_name ? o->short_name : 256 + (int)(o - options_table);
}

static const struct opt *opt_by_val(int val)
{
	size_t i;

	for (i = 0; i < N_OPTS; i++)
		if (opt_val(&options_table[i]) == val)
			return &options_table[i];
	return NULL;
}

static int opt_takes_value(const struct opt *o)
{
	return o->kind != K_FLAG && o->kind != K_NOT_FLAG &&
	       o->kind != K_HELP && o->kind != K_VERSION;
}

/* Commands whose options the job accepts now: plan takes those of the
 * command it plans, or of both while that is not yet known; no command
 * (options_set from tests) takes all. */
static unsigned job_accepts(const xj_job *job)
{
	if (job->command == XJ_CMD_PLAN)
		return job->plan_of == XJ_CMD_NONE ? (T | M) :
						     1u << job->plan_of;
	if (job->command == XJ_CMD_NONE)
		return T | M | G | D | I | R;
	return 1u << job->command;
}

/* "topk", "plan", "plan matrix": the command named in messages. */
static void job_command_label(const xj_job *job, char *buf, size_t size)
{
	if (job->command == XJ_CMD_PLAN && job->plan_of != XJ_CMD_NONE)
		snprintf(buf, size, "plan %s",
			 options_command_name(job->plan_of));
	else
		snprintf(buf, size, "%s", options_command_name(job->command));
}

/* --- values --- */

static int parse_int64(const char *shown, const char *s, int64_t lo,
		       int64_t hi, int64_t *out, xj_status *st)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (end == s || *end != '\0')
		return xj_fail(st, XJ_EXIT_USAGE, "%s: '%s' is not an integer",
			       shown, s);
	if (errno == ERANGE)
		return xj_fail(st, XJ_EXIT_USAGE, "%s: %s is out of range",
			       shown, s);
	if (v < lo)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "%s: must be at least %lld, got %lld", shown,
			       (long long)lo, v);
	if (v > hi)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "%s: must be at most %lld, got %lld", shown,
			       (long long)hi, v);
	*out = v;
	return XJ_OK;
}

static int parse_finite(const char *shown, const char *s, double *out,
			xj_status *st)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0')
		return xj_fail(st, XJ_EXIT_USAGE, "%s: '%s' is not a number",
			       shown, s);
	if (!isfinite(v))
		return xj_fail(st, XJ_EXIT_USAGE,
			       "%s: '%s' is not a finite number", shown, s);
	*out = v;
	return XJ_OK;
}

/* "512M" -> 512 << 20. Binary units only, so that "G" means one thing. */
static int parse_size(const char *shown, const char *s, int64_t *out,
		      xj_status *st)
{
	static const char suffixes[] = "KMGT";
	const char *pos;
	char *end;
	long long v;
	int shift = 0;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (end == s)
		return xj_fail(st, XJ_EXIT_USAGE, "%s: '%s' is not a size",
			       shown, s);
	if (*end != '\0') {
		pos = strchr(suffixes, toupper((unsigned char)*end));
		if (!pos || (end[1] != '\0' && strcmp(end + 1, "iB") != 0))
			return xj_fail(st, XJ_EXIT_USAGE,
				       "%s: bad size '%s' (bytes, or with a K, M, G or T suffix: 512M, 2G)",
				       shown, s);
		shift = 10 * (int)(pos - suffixes + 1);
	}
	if (errno == ERANGE || v > (INT64_MAX >> shift))
		return xj_fail(st, XJ_EXIT_USAGE, "%s: %s is too large", shown,
			       s);
	if (v <= 0)
		return xj_fail(st, XJ_EXIT_USAGE, "%s: must be > 0, got %s",
			       shown, s);
	*out = (int64_t)v << shift;
	return XJ_OK;
}

static int parse_flag(const char *shown, const char *s, int *out,
		      xj_status *st)
{
	static const char *const yes[] = { "true", "yes", "on", "1" };
	static const char *const no[] = { "false", "no", "off", "0" };
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = 1;
			return XJ_OK;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = 0;
			return XJ_OK;
		}
	}
	return xj_fail(st, XJ_EXIT_USAGE,
		       "%s: '%s' is not a boolean (true/false, yes/no, 1/0)",
		       shown, s);
}

static int set_text(const char *shown, const char *s, char *field,
		    size_t size, xj_status *st)
{
	size_t len = strlen(s);

	if (len == 0)
		return xj_fail(st, XJ_EXIT_USAGE, "%s: empty value", shown);
	if (len >= size)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "%s: longer than %zu characters", shown,
			       size - 1);
	memcpy(field, s, len + 1);
	return XJ_OK;
}

static int set_metric(const char *shown, const char *s, xj_metric *out,
		      xj_status *st)
{
	if (metric_parse(s, out) != 0)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "%s: unknown metric '%s' (l2, sqeuclidean, cosine or ip)",
			       shown, s);
	return XJ_OK;
}

static int set_threshold(const char *shown, const char *s, xj_job *job,
			 xj_status *st)
{
	double v = 0.0;

	if (strcmp(s, "none") == 0) {   /* lets a command line undo a file */
		job->has_threshold = 0;
		job->threshold = 0.0;
		return XJ_OK;
	}
	if (parse_finite(shown, s, &v, st))
		return st->code;
	job->has_threshold = 1;
	job->threshold = v;
	return XJ_OK;
}

static int set_device(const char *shown, const char *s, xj_device_mode *out,
		      xj_status *st)
{
	if (device_mode_parse(s, out) != 0)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "%s: unknown device '%s' (auto, gpu or cpu)",
			       shown, s);
	return XJ_OK;
}

static int set_precision(const char *shown, const char *s,
			 xj_precision *out, xj_status *st)
{
	if (precision_parse(s, out) != 0)
		return xj_fail(st, XJ_EXIT_USAGE, "%s: unknown precision '%s' "
			       "(auto, fp32, tf32, bf16, fp16 or int8)", shown, s);
	return XJ_OK;
}

static int set_fraction(const char *shown, const char *s, double *out,
			xj_status *st)
{
	double v = 0.0;

	if (parse_finite(shown, s, &v, st))
		return st->code;
	if (!(v > 0.0 && v <= 1.0))
		return xj_fail(st, XJ_EXIT_USAGE,
			       "%s: must be in (0, 1], got %s", shown, s);
	*out = v;
	return XJ_OK;
}

static int set_integer(const struct opt *o, const char *shown, const char *s,
		       void *field, xj_status *st)
{
	int64_t v = 0;

	if (parse_int64(shown, s, o->lo, o->hi, &v, st))
		return st->code;
	if (o->kind == K_INT)
		*(int *)field = (int)v;   /* hi <= INT_MAX */
	else if (o->kind == K_SEED)
		*(uint64_t *)field = (uint64_t)v;
	else
		*(int64_t *)field = v;
	return XJ_OK;
}

/* Of the rows named like o (gen's and inspect's --rows), the one that
 * applies to the job's command; o itself when none does. */
static const struct opt *opt_for_job(const struct opt *o, const xj_job *job)
{
	unsigned accepts = job_accepts(job);
	size_t i;

	if (o->cmds & accepts)
		return o;
	for (i = 0; i < N_OPTS; i++)
		if (strcmp(options_table[i].name, o->name) == 0 &&
		    (options_table[i].cmds & accepts))
			return &options_table[i];
	return o;
}

/* Set o from text. shown is the name as the user wrote it ("-k", "--k",
 * or the INI key "k"); value NULL sets a flag. */
static int set_option(xj_job *job, const struct opt *o, const char *value,
		      const char *shown, xj_status *st)
{
	void *field;
	char label[32];
	int b;

	o = opt_for_job(o, job);
	field = (char *)job + o->offset;
	if (!(o->cmds & job_accepts(job))) {
		job_command_label(job, label, sizeof(label));
		return xj_fail(st, XJ_EXIT_USAGE, "%s does not apply to %s",
			       shown, label);
	}
	if (!value && opt_takes_value(o))
		return xj_fail(st, XJ_EXIT_USAGE, "%s needs a value", shown);
	switch (o->kind) {
	case K_INPUT:
		if (set_text(shown, value, field, XJ_PATH_MAX, st))
			return st->code;
		/* split later by h5in_parse_spec(), which can look at files */
		((char *)job + o->dset_offset)[0] = '\0';
		return XJ_OK;
	case K_PATH:
		return set_text(shown, value, field, XJ_PATH_MAX, st);
	case K_INT64:
	case K_INT:
	case K_SEED:
		return set_integer(o, shown, value, field, st);
	case K_SIZE:
		return parse_size(shown, value, field, st);
	case K_FRACTION:
		return set_fraction(shown, value, field, st);
	case K_THRESHOLD:
		return set_threshold(shown, value, job, st);
	case K_METRIC:
		return set_metric(shown, value, field, st);
	case K_DEVICE:
		return set_device(shown, value, field, st);
	case K_PRECISION:
		return set_precision(shown, value, field, st);
	case K_FLAG:
	case K_NOT_FLAG:
		b = 1;
		if (value && parse_flag(shown, value, &b, st))
			return st->code;
		*(int *)field = o->kind == K_FLAG ? b : !b;
		return XJ_OK;
	case K_CONFIG:
	case K_HELP:
	case K_VERSION:
		break;
	}
	return xj_fail(st, XJ_EXIT_INTERNAL, "%s is not a job setting", shown);
}

static int unknown_option(const char *name, xj_status *st)
{
	char alt[64];
	size_t i;

	/* mem_limit for mem-limit: INI habits */
	snprintf(alt, sizeof(alt), "%s", name);
	for (i = 0; alt[i]; i++)
		if (alt[i] == '_')
			alt[i] = '-';
	if (strcmp(alt, name) != 0 && opt_find(alt))
		return xj_fail(st, XJ_EXIT_USAGE,
			       "unknown option '%s' (did you mean '%s'?)", name,
			       alt);
	return xj_fail(st, XJ_EXIT_USAGE, "unknown option '%s'", name);
}

int options_set(xj_job *job, const char *name, const char *value,
		xj_status *st)
{
	const struct opt *o = opt_find(name);

	if (!o)
		return unknown_option(name, st);
	switch (o->kind) {
	case K_CONFIG:
		return xj_fail(st, XJ_EXIT_USAGE,
			       "%s: a job file cannot name another job file (give -c/--config on the command line)",
			       name);
	case K_HELP:
	case K_VERSION:
		return xj_fail(st, XJ_EXIT_USAGE,
			       "%s: a command-line action, not a job setting",
			       name);
	default:
		return set_option(job, o, value, name, st);
	}
}

/* --- command line --- */

/* One option as found on the command line, applied after the job file. */
struct pending {
	const struct opt *o;
	const char *value;
	int is_long;     /* written as --name, not -c */
};

struct scan {
	struct pending *list;
	int count;
	const char *config;
	int help, version;
	char **operands;   /* the words that are not options */
	int noperands;
};

static void shown_name(const struct pending *p, char *buf, size_t size)
{
	if (p->is_long || !p->o->short_name)
		snprintf(buf, size, "--%s", p->o->name);
	else
		snprintf(buf, size, "-%c", p->o->short_name);
}

/* A name shared by several rows is given to getopt once (as its first
 * row); set_option() picks the row of the job's command. */
static void build_getopt(struct option *longopts, char *shortopts)
{
	size_t i, n = 0;
	char *s = shortopts;

	*s++ = ':';   /* report a missing value as ':', not '?' */
	for (i = 0; i < N_OPTS; i++) {
		if (opt_find(options_table[i].name) != &options_table[i])
			continue;
		longopts[n].name = options_table[i].name;
		longopts[n].has_arg = opt_takes_value(&options_table[i]) ?
				      required_argument : no_argument;
		longopts[n].flag = NULL;
		longopts[n].val = opt_val(&options_table[i]);
		n++;
		if (options_table[i].short_name) {
			*s++ = (char)options_table[i].short_name;
			if (opt_takes_value(&options_table[i]))
				*s++ = ':';
		}
	}
	*s = '\0';
	memset(&longopts[n], 0, sizeof(longopts[n]));
}

/* getopt_long takes any unique start of a long name ("--thr"). */
static int prefix_matches(const char *text, size_t len)
{
	size_t i;
	int n = 0;

	for (i = 0; i < N_OPTS; i++)
		n += strncmp(options_table[i].name, text, len) == 0 &&
		     opt_find(options_table[i].name) == &options_table[i];
	return n;
}

/* The message for getopt's '?': an unknown option, or a value given to
 * a flag as --flag=value. */
static int bad_option(char **argv, xj_status *st)
{
	const struct opt *o = optopt ? opt_by_val(optopt) : NULL;
	const char *arg = argv[optind - 1];
	size_t len;

	if (o)
		return xj_fail(st, XJ_EXIT_USAGE, "--%s takes no value",
			       o->name);
	if (optopt)
		return xj_fail(st, XJ_EXIT_USAGE, "unknown option '-%c'",
			       optopt);
	len = strcspn(arg, "=");
	if (strncmp(arg, "--", 2) == 0 && prefix_matches(arg + 2, len - 2) > 1)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "ambiguous option '%.*s' (the start of several long options)",
			       (int)len, arg);
	return xj_fail(st, XJ_EXIT_USAGE, "unknown option '%.*s'", (int)len,
		       arg);
}

static int missing_value(xj_status *st)
{
	const struct opt *o = opt_by_val(optopt);

	if (!o)
		return xj_fail(st, XJ_EXIT_USAGE, "an option needs a value");
	if (o->short_name)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "-%c/--%s needs a value (%s)", o->short_name,
			       o->name, o->metavar);
	return xj_fail(st, XJ_EXIT_USAGE, "--%s needs a value (%s)", o->name,
		       o->metavar);
}

static int scan_one(struct scan *sc, const struct opt *o, int is_long,
		    xj_status *st)
{
	switch (o->kind) {
	case K_HELP:
		sc->help = 1;
		return XJ_OK;
	case K_VERSION:
		sc->version = 1;
		return XJ_OK;
	case K_CONFIG:
		if (sc->config)
			return xj_fail(st, XJ_EXIT_USAGE,
				       "-c/--config given twice (one job file per run)");
		sc->config = optarg;
		return XJ_OK;
	default:
		sc->list[sc->count].o = o;
		sc->list[sc->count].value = optarg;
		sc->list[sc->count].is_long = is_long;
		sc->count++;
		return XJ_OK;
	}
}

/* Walk argv (argv[0] is the command word) with getopt_long, recording
 * options without applying them: the job file named anywhere on the line
 * must be applied before every other option. */
static int scan_args(int argc, char **argv, struct scan *sc, xj_status *st)
{
	struct option longopts[N_OPTS + 1];
	char shortopts[2 + 2 * N_OPTS];
	const struct opt *o;
	int c, li;

	build_getopt(longopts, shortopts);
	optind = 0;   /* glibc: 0 re-initialises getopt, so calls can repeat */
	opterr = 0;   /* our messages, not getopt's */
	for (;;) {
		li = -1;
		c = getopt_long(argc, argv, shortopts, longopts, &li);
		if (c == -1)
			break;
		if (c == '?')
			return bad_option(argv, st);
		if (c == ':')
			return missing_value(st);
		o = opt_by_val(c);
		if (!o)
			return xj_fail(st, XJ_EXIT_INTERNAL,
				       "getopt returned unknown option %d", c);
		if (scan_one(sc, o, li >= 0, st))
			return st->code;
	}
	sc->operands = argv + optind;
	sc->noperands = argc - optind;
	return XJ_OK;
}

/* inspect takes one FILE; no other command takes a word that is not an
 * option. A missing FILE is job_check()'s to report (after --help). */
static int take_operands(const struct scan *sc, xj_job *job, xj_status *st)
{
	int used = 0;

	if (job->command == XJ_CMD_INSPECT && sc->noperands > 0) {
		if (set_text("FILE", sc->operands[0], job->inspect_file,
			     sizeof(job->inspect_file), st))
			return st->code;
		used = 1;
	}
	if (sc->noperands > used)
		return xj_fail(st, XJ_EXIT_USAGE, "unexpected argument '%s'",
			       sc->operands[used]);
	return XJ_OK;
}

static int config_setter_job(void *ctx, const char *key, const char *value,
			     xj_status *st)
{
	return options_set(ctx, key, value, st);
}

static int apply_args(const struct scan *sc, xj_job *job, xj_status *st)
{
	char shown[64];
	int i;

	if (sc->config) {
		if (config_load(sc->config, config_setter_job, job, st))
			return st->code;
		if (set_text("--config", sc->config, job->config,
			     sizeof(job->config), st))
			return st->code;
	}
	for (i = 0; i < sc->count; i++) {
		shown_name(&sc->list[i], shown, sizeof(shown));
		if (set_option(job, sc->list[i].o, sc->list[i].value, shown,
			       st))
			return st->code;
	}
	return XJ_OK;
}

static void print_version(FILE *out)
{
	fprintf(out, "xjoin %s\n", XJOIN_VERSION);
}

/* argv[0] is the command word. */
static int parse_command(int argc, char **argv, xj_job *job, int *action,
			 FILE *out, xj_status *st)
{
	struct scan sc = { 0 };
	int rc;

	sc.list = calloc((size_t)argc + 1, sizeof(*sc.list));
	if (!sc.list)
		return xj_fail(st, XJ_EXIT_RESOURCE,
			       "out of memory parsing the command line");
	rc = scan_args(argc, argv, &sc, st);
	if (rc == XJ_OK)
		rc = take_operands(&sc, job, st);
	if (rc == XJ_OK && sc.help) {
		options_help(out, job->command);
		*action = OPTIONS_HELP_SHOWN;
	} else if (rc == XJ_OK && sc.version) {
		print_version(out);
		*action = OPTIONS_VERSION_SHOWN;
	} else if (rc == XJ_OK) {
		rc = apply_args(&sc, job, st);
	}
	free(sc.list);
	return rc;
}

/* `xjoin help [COMMAND]` */
static int parse_help(int argc, char **argv, int *action, FILE *out,
		      xj_status *st)
{
	const struct command *c = NULL;

	if (argc > 3)
		return xj_fail(st, XJ_EXIT_USAGE, "unexpected argument '%s'",
			       argv[3]);
	if (argc == 3) {
		c = command_find(argv[2]);
		if (!c)
			return xj_fail(st, XJ_EXIT_USAGE,
				       "unknown command '%s'", argv[2]);
	}
	options_help(out, c ? c->cmd : XJ_CMD_NONE);
	*action = OPTIONS_HELP_SHOWN;
	return XJ_OK;
}

/* `plan [topk|matrix]`: returns how many words name the command. */
static int parse_plan_target(int argc, char **argv, xj_job *job,
			     xj_status *st)
{
	const struct command *c;

	if (argc < 3 || argv[2][0] == '-')
		return 1;
	c = command_find(argv[2]);
	if (!c)
		return 1;   /* not a command: getopt reports it */
	if (c->cmd != XJ_CMD_TOPK && c->cmd != XJ_CMD_MATRIX &&
	    c->cmd != XJ_CMD_RANGE) {
		xj_fail(st, XJ_EXIT_USAGE,
			"plan applies to topk, matrix or range, not %s",
			c->name);
		return -1;
	}
	job->plan_of = c->cmd;
	return 2;
}

/* " (see xjoin topk --help)" after every usage message. */
static void add_hint(const xj_job *job, xj_status *st)
{
	size_t len = strlen(st->msg);

	if (st->code != XJ_EXIT_USAGE)
		return;
	if (job->command == XJ_CMD_NONE)
		snprintf(st->msg + len, sizeof(st->msg) - len,
			 " (see xjoin --help)");
	else
		snprintf(st->msg + len, sizeof(st->msg) - len,
			 " (see xjoin %s --help)",
			 options_command_name(job->command));
}

static int parse_argv(int argc, char **argv, xj_job *job, int *action,
		      FILE *out, xj_status *st)
{
	const struct command *c;
	const char *word;
	int first;

	if (argc < 2)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "no command (topk, matrix, range, plan, gen, "
			       "devices or inspect)");
	word = argv[1];
	if (strcmp(word, "--help") == 0 || strcmp(word, "-h") == 0 ||
	    strcmp(word, "help") == 0)
		return parse_help(argc, argv, action, out, st);
	if (strcmp(word, "--version") == 0) {
		print_version(out);
		*action = OPTIONS_VERSION_SHOWN;
		return XJ_OK;
	}
	c = command_find(word);
	if (!c && word[0] == '-')
		return xj_fail(st, XJ_EXIT_USAGE,
			       "'%s' before the command: write xjoin COMMAND [options]",
			       word);
	if (!c)
		return xj_fail(st, XJ_EXIT_USAGE, "unknown command '%s'", word);
	job->command = c->cmd;
	first = 1;
	if (c->cmd == XJ_CMD_PLAN) {
		first = parse_plan_target(argc, argv, job, st);
		if (first < 0)
			return st->code;
	}
	if (parse_command(argc - first, argv + first, job, action, out, st))
		return st->code;
	if (*action != OPTIONS_RUN)
		return XJ_OK;
	if (job->command == XJ_CMD_PLAN && job->plan_of == XJ_CMD_NONE)
		job->plan_of = job->k > 0 ? XJ_CMD_TOPK : XJ_CMD_MATRIX;
	return job_check(job, st);
}

int options_parse(int argc, char **argv, xj_job *job, int *action, FILE *out,
		  xj_status *st)
{
	xj_ok(st);
	job_defaults(job);
	*action = OPTIONS_RUN;
	if (parse_argv(argc, argv, job, action, out, st))
		add_hint(job, st);
	return st->code;
}
