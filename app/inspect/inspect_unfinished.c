/*
 * inspect_unfinished.c: `xjoin inspect` on an unfinished run (no
 * result yet): OUT.partial's size, the progress record in OUT.progress,
 * and the command that continues it.
 */
#define _GNU_SOURCE
#include "inspect_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../io/h5out.h"
#include "../run/resume.h"

#define INSPECT_SPANS_SHOWN 8

/* A word the shell reads back as itself: bare when safe, else quoted. */
static void shell_word(char *buf, size_t size, const char *word)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyz"
				   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
				   "_./:+-=,@%";
	size_t len = strlen(buf);

	if (word[0] && strspn(word, safe) == strlen(word)) {
		snprintf(buf + len, size - len, " %s", word);
		return;
	}
	len += (size_t)snprintf(buf + len, size - len, " '");
	for (; *word && len + 5 < size; word++) {
		if (*word == '\'')
			len += (size_t)snprintf(buf + len, size - len, "'\\''");
		else
			buf[len++] = *word;
	}
	snprintf(buf + len, size - len, "'");
}

struct unfinished {
	const char *output;
	char partial[XJ_PATH_MAX + 16];
	char progress[XJ_PATH_MAX + 16];
	int64_t partial_bytes;   /* -1: absent */
	int have_record;
	int output_exists;
	resume_record rec;
	char resume_cmd[4 * XJ_PATH_MAX];
};

static void input_spec(char *buf, size_t size, const resume_input *in)
{
	snprintf(buf, size, "%s:%s", in->file, in->dset);
}

/* The command that continues the recorded job. */
static void resume_command(struct unfinished *u)
{
	const resume_record *r = &u->rec;
	char *b = u->resume_cmd, spec[XJ_PATH_MAX + XJ_NAME_MAX + 2], num[40];
	size_t size = sizeof(u->resume_cmd);

	snprintf(b, size, "xjoin %s", r->command);
	input_spec(spec, sizeof(spec), &r->q);
	shell_word(b, size, "-q");
	shell_word(b, size, spec);
	input_spec(spec, sizeof(spec), &r->b);
	shell_word(b, size, "-b");
	shell_word(b, size, spec);
	if (strcmp(r->command, "topk") == 0) {
		snprintf(num, sizeof(num), "%" PRId64, r->k);
		shell_word(b, size, "-k");
		shell_word(b, size, num);
	}
	shell_word(b, size, "-m");
	shell_word(b, size, r->metric);
	if (r->has_threshold) {
		inspect_fmt_f64(num, sizeof(num), r->threshold);
		shell_word(b, size, "-t");
		shell_word(b, size, num);
	}
	if (r->self)
		shell_word(b, size, "--self");
	shell_word(b, size, "-o");
	shell_word(b, size, u->output);
	shell_word(b, size, "--resume");
}

static void spans_text(char *buf, size_t size, const xj_spans *sp)
{
	size_t len = 0;

	buf[0] = '\0';
	for (int64_t i = 0; i < sp->n && i < INSPECT_SPANS_SHOWN &&
	     len < size; i++)
		len += (size_t)snprintf(buf + len, size - len,
					"%s[%" PRId64 ", %" PRId64 ")",
					i ? " " : "", sp->s[i][0],
					sp->s[i][1]);
	if (sp->n > INSPECT_SPANS_SHOWN && len < size)
		snprintf(buf + len, size - len, " ... (%" PRId64 " spans)",
			 sp->n);
	if (sp->n == 0)
		snprintf(buf, size, "none");
}

/* The round in progress: what its lists hold, and where. */
static void table_inround(struct table *t, const struct unfinished *u)
{
	const resume_inround *in = &u->rec.inround;
	int64_t held = spans_rows(&in->rows), folded = spans_rows(&in->base);
	char text[INSPECT_ROW_MAX];

	if (!in->valid) {
		inspect_table_kv(t, "round in progress", "none recorded");
		return;
	}
	inspect_table_kv(t, "round in progress", "lists of %" PRId64 " query "
			 "rows over %" PRId64 " of %" PRId64 " base rows "
			 "(%.1f%%)", held, folded, u->rec.b.rows,
			 u->rec.b.rows ? 100.0 * (double)folded /
			 (double)u->rec.b.rows : 0.0);
	spans_text(text, sizeof(text), &in->rows);
	inspect_table_kv(t, "its query rows", "%s", text);
	spans_text(text, sizeof(text), &in->base);
	inspect_table_kv(t, "base rows folded in", "%s", text);
	resume_lists_path(u->progress, in->slot, text, sizeof(text));
	inspect_table_kv(t, "lists file", "%s (generation %" PRId64 ")", text,
			 in->generation);
}

static void table_record(struct table *t, const struct unfinished *u)
{
	const resume_record *r = &u->rec;
	char text[INSPECT_ROW_MAX];
	int64_t done = spans_rows(&r->done);
	xj_metric m;

	inspect_table_kv(t, "command", "%s", r->command);
	if (metric_parse(r->metric, &m) == 0)
		inspect_table_kv(t, "metric", "%s (%s is better)", r->metric,
				 metric_larger_is_better(m) ? "larger" :
				 "smaller");
	else
		inspect_table_kv(t, "metric", "%s", r->metric);
	if (strcmp(r->command, "topk") == 0) {
		inspect_table_kv(t, "k", "%" PRId64, r->k);
		inspect_fmt_f64(text, sizeof(text), r->threshold);
		inspect_table_kv(t, "threshold", "%s",
				 r->has_threshold ? text : "none");
		inspect_table_kv(t, "self excluded", "%s",
				 r->self ? "yes" : "no");
	}
	inspect_table_kv(t, "query", "%s:%s, %" PRId64 " x %" PRId64 " %s",
			 r->q.file, r->q.dset, r->q.rows, r->q.cols, r->q.type);
	inspect_table_kv(t, "base", "%s:%s, %" PRId64 " x %" PRId64 " %s",
			 r->b.file, r->b.dset, r->b.rows, r->b.cols, r->b.type);
	inspect_table_kv(t, "rows done", "%" PRId64 " of %" PRId64
			 " (%.1f%%)", done, r->q.rows, r->q.rows ?
			 100.0 * (double)done / (double)r->q.rows : 0.0);
	spans_text(text, sizeof(text), &r->done);
	inspect_table_kv(t, "done spans", "%s", text);
	table_inround(t, u);
	inspect_table_kv(t, "runs so far", "%" PRId64, r->runs);
}

static int text_unfinished(struct insp *in, struct unfinished *u,
			   xj_status *st)
{
	FILE *f = in->out;
	struct table t;

	fprintf(f, "# %s: an unfinished xjoin run (interrupted, or still "
		"running): no result yet\n", u->output);
	inspect_table_init(&t, 2, "item", "value", NULL, NULL, NULL);
	inspect_table_kv(&t, "output", "%s (%s)", u->output, u->output_exists ?
			 "exists: a finished result is there too" : "absent");
	if (u->partial_bytes >= 0)
		inspect_table_kv(&t, "partial output", "%s, %" PRId64 " bytes",
				 u->partial, u->partial_bytes);
	else
		inspect_table_kv(&t, "partial output", "none (%s is missing)",
				 u->partial);
	inspect_table_kv(&t, "progress record", "%s",
			 u->have_record ? u->progress : "none");
	if (u->have_record)
		table_record(&t, u);
	if (inspect_table_done(in, &t, st))
		return st->code;
	if (u->have_record && u->partial_bytes >= 0)
		fprintf(f, "# continue it (ranks, chunk sizes, memory and "
			"device may differ):\n#   %s\n# or start over with "
			"--force\n", u->resume_cmd);
	else if (u->have_record)
		fprintf(f, "# the partial output is gone, so this run cannot "
			"be resumed: start over with --force\n");
	else
		fprintf(f, "# no progress record: no rows of %s are recorded "
			"as final (a run may still be writing it, or stopped "
			"before its first checkpoint); running the command "
			"again starts fresh\n", u->partial);
	return XJ_OK;
}

static void json_input(FILE *f, const char *key, const resume_input *in)
{
	fprintf(f, "    \"%s\": {\"file\": ", key);
	inspect_json_str(f, in->file);
	fputs(", \"dataset\": ", f);
	inspect_json_str(f, in->dset);
	fputs(", \"type\": ", f);
	inspect_json_str(f, in->type);
	fprintf(f, ", \"shape\": [%" PRId64 ", %" PRId64 "], "
		"\"fingerprint\": \"0x%016" PRIx64 "\"},\n", in->rows,
		in->cols, in->fingerprint);
}

static void json_spans(FILE *f, const xj_spans *sp)
{
	fputc('[', f);
	for (int64_t i = 0; i < sp->n; i++)
		fprintf(f, "%s[%" PRId64 ", %" PRId64 "]", i ? ", " : "",
			sp->s[i][0], sp->s[i][1]);
	fputc(']', f);
}

static void json_inround(FILE *f, const struct unfinished *u)
{
	const resume_inround *in = &u->rec.inround;
	char lists[XJ_PATH_MAX + 32];

	fputs(",\n    \"inround\": ", f);
	if (!in->valid) {
		fputs("null", f);
		return;
	}
	fprintf(f, "{\"rows_held\": %" PRId64 ", \"rows\": ",
		spans_rows(&in->rows));
	json_spans(f, &in->rows);
	fprintf(f, ", \"base_folded\": %" PRId64 ", \"base\": ",
		spans_rows(&in->base));
	json_spans(f, &in->base);
	fprintf(f, ", \"slot\": %d, \"generation\": %" PRId64 ", "
		"\"lists\": ", in->slot, in->generation);
	resume_lists_path(u->progress, in->slot, lists, sizeof(lists));
	inspect_json_str(f, lists);
	fputc('}', f);
}

static void json_record(FILE *f, const struct unfinished *u)
{
	const resume_record *r = &u->rec;

	fputs("  \"progress\": {\n    \"path\": ", f);
	inspect_json_str(f, u->progress);
	fputs(",\n    \"command\": ", f);
	inspect_json_str(f, r->command);
	fputs(", \"metric\": ", f);
	inspect_json_str(f, r->metric);
	fprintf(f, ", \"k\": %" PRId64 ", \"threshold\": ", r->k);
	if (r->has_threshold)
		inspect_json_f64(f, r->threshold);
	else
		fputs("null", f);
	fprintf(f, ", \"self_excluded\": %s,\n", r->self ? "true" : "false");
	json_input(f, "query", &r->q);
	json_input(f, "base", &r->b);
	fprintf(f, "    \"rows_done\": %" PRId64 ", \"rows\": %" PRId64
		", \"runs\": %" PRId64 ",\n    \"done\": ",
		spans_rows(&r->done), r->q.rows, r->runs);
	json_spans(f, &r->done);
	json_inround(f, u);
	fputs("\n  },\n", f);
}

static void json_unfinished(struct insp *in, const struct unfinished *u)
{
	FILE *f = in->out;
	int resumable = u->have_record && u->partial_bytes >= 0;

	fputs("{\n  \"file\": ", f);
	inspect_json_str(f, u->output);
	fprintf(f, ",\n  \"kind\": \"unfinished\",\n  \"output_exists\": "
		"%s,\n  \"partial\": ", u->output_exists ? "true" : "false");
	if (u->partial_bytes >= 0) {
		fputs("{\"path\": ", f);
		inspect_json_str(f, u->partial);
		fprintf(f, ", \"bytes\": %" PRId64 "}", u->partial_bytes);
	} else {
		fputs("null", f);
	}
	fputs(",\n", f);
	if (u->have_record)
		json_record(f, u);
	else
		fputs("  \"progress\": null,\n", f);
	fprintf(f, "  \"resumable\": %s,\n  \"resume_command\": ",
		resumable ? "true" : "false");
	if (resumable)
		inspect_json_str(f, u->resume_cmd);
	else
		fputs("null", f);
	fputs("\n}\n", f);
}

int inspect_unfinished(struct insp *in, const char *output,
		       xj_status *st)
{
	struct unfinished *u = calloc(1, sizeof(*u));
	struct stat sb;

	if (!u)
		return xj_fail(st, XJ_EXIT_RESOURCE, "%s: out of memory",
			       output);
	u->output = output;
	u->partial_bytes = -1;
	h5out_partial_path(output, u->partial, sizeof(u->partial));
	resume_path(output, u->progress, sizeof(u->progress));
	if (stat(u->partial, &sb) == 0)
		u->partial_bytes = (int64_t)sb.st_size;
	u->output_exists = access(output, F_OK) == 0;
	u->have_record = access(u->progress, F_OK) == 0;
	if (u->have_record && resume_load(u->progress, &u->rec, st)) {
		/* gone since access(): unreadable all the same */
		st->code = XJ_EXIT_INPUT;
		xj_wrap(st, "%s: unfinished run", output);
		goto out;
	}
	if (u->have_record)
		resume_command(u);
	if (in->o->json)
		json_unfinished(in, u);
	else
		text_unfinished(in, u, st);
out:
	resume_free(&u->rec);
	free(u);
	return st->code;
}
