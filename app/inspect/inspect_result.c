/*
 * inspect_result.c: what `xjoin inspect` shows of a result, as tables or
 * as one JSON object: the job and run its attributes describe, its
 * datasets, the first rows, the check of every row and the verdict.
 */
#define _GNU_SOURCE
#include "inspect_int.h"

#include <inttypes.h>
#include <string.h>
#include <stdlib.h>

#include "version.h"

#define INSPECT_PAIRS_SHOWN 10      /* topk pairs shown per row */
#define INSPECT_VALUES_SHOWN 8      /* matrix values shown per row */
#define INSPECT_SHOW_SLAB_ROWS 256  /* rows read at once for showing */

static const struct {
	const char *label;   /* text summary */
	const char *key;     /* JSON */
} checks[CK_COUNT] = {
	[CK_ORDER] = { "sorted best first", "sorted" },
	[CK_GAP] = { "-1 padding only at the end", "padding_at_end" },
	[CK_PADVAL] = { "padding valued", "padding_value" },
	[CK_INDEX] = { "base indices in range", "indices_in_range" },
	[CK_SELF] = { "no pair (i, i)", "no_self_pairs" },
	[CK_THRESHOLD] = { "within the threshold", "within_threshold" },
	[CK_NAN] = { "no NaN", "no_nan" },
	[CK_NEGATIVE] = { "no negative distance", "no_negative" },
};

/* ---- results: the first rows ------------------------------------------ */

static void text_row(struct insp *in, int64_t row, const int64_t *idx,
		     const float *val, int64_t nc)
{
	char v[32];

	fprintf(in->out, "row %" PRId64 ":", row);
	for (int64_t j = 0; j < nc; j++) {
		snprintf(v, sizeof(v), "%.6g", (double)val[j]);
		if (in->topk)
			fprintf(in->out, " (%" PRId64 ", %s)", idx[j], v);
		else
			fprintf(in->out, " %s", v);
	}
	if (in->cols > nc)
		fprintf(in->out, " ... +%" PRId64 " more", in->cols - nc);
	fputc('\n', in->out);
}

static void json_row(struct insp *in, int64_t row, const int64_t *idx,
		     const float *val, int64_t nc, int first)
{
	FILE *f = in->out;

	fprintf(f, "%s{\"row\": %" PRId64, first ? "\n    " : ",\n    ", row);
	if (in->topk) {
		fputs(", \"neighbors\": [", f);
		for (int64_t j = 0; j < nc; j++)
			fprintf(f, "%s%" PRId64, j ? ", " : "", idx[j]);
		fputc(']', f);
	}
	fputs(", \"distances\": [", f);
	for (int64_t j = 0; j < nc; j++) {
		fputs(j ? ", " : "", f);
		inspect_json_f32(f, val[j]);
	}
	fputs("]}", f);
}

static void rows_head(struct insp *in, int64_t show, int64_t nc)
{
	const char *what = in->larger ? "inner product" : "distance";

	if (in->o->json) {
		fprintf(in->out, "  \"columns_shown\": %" PRId64 ",\n"
			"  \"rows_shown\": [", nc);
		return;
	}
	fprintf(in->out, "\n# first %" PRId64 " of %" PRId64 " query rows",
		show, in->n);
	if (in->topk)
		fprintf(in->out, ": (base row, %s), best first", what);
	else
		fprintf(in->out, ": %s to base rows 0..%" PRId64, what,
			nc ? nc - 1 : 0);
	if (in->cols > nc)
		fprintf(in->out, " (the first %" PRId64 " of %" PRId64 ")",
			nc, in->cols);
	fputc('\n', in->out);
}

static int emit_rows(struct insp *in, xj_status *st)
{
	int64_t show = inspect_min64(in->o->rows, in->n),
		slab = INSPECT_SHOW_SLAB_ROWS;
	int64_t nc = inspect_min64(in->cols, in->topk ? INSPECT_PAIRS_SHOWN :
				   INSPECT_VALUES_SHOWN);
	int64_t *idx = calloc((size_t)(slab * nc + 1), sizeof(*idx));
	float *val = calloc((size_t)(slab * nc + 1), sizeof(*val));

	rows_head(in, show, nc);
	if (!idx || !val)
		xj_fail(st, XJ_EXIT_RESOURCE, "%s: out of memory", in->path);
	for (int64_t r0 = 0; !st->code && nc && r0 < show; r0 += slab) {
		int64_t nr = inspect_min64(slab, show - r0);

		if (inspect_read_both(in, r0, nr, 0, nc, idx, val, st))
			break;
		for (int64_t i = 0; i < nr; i++) {
			if (in->o->json)
				json_row(in, r0 + i, idx + i * nc,
					 val + i * nc, nc, r0 + i == 0);
			else
				text_row(in, r0 + i, idx + i * nc,
					 val + i * nc, nc);
		}
	}
	if (in->o->json)
		fputs(show && nc ? "\n  ],\n" : "],\n", in->out);
	free(idx);
	free(val);
	return st->code;
}

/* ---- results: the check and the verdict ------------------------------- */

static void check_label(const struct insp *in, int ck, char *buf,
			size_t size)
{
	char t[40];

	switch (ck) {
	case CK_ORDER:
		snprintf(buf, size, "%s (%s)", checks[ck].label,
			 in->larger ? "descending" : "ascending");
		break;
	case CK_PADVAL:
		snprintf(buf, size, "%s %s", checks[ck].label,
			 in->larger ? "-inf" : "+inf");
		break;
	case CK_INDEX:
		snprintf(buf, size, "base indices in [0, %" PRId64 ")", in->m);
		break;
	case CK_THRESHOLD:
		inspect_fmt_f64(t, sizeof(t), in->threshold);
		snprintf(buf, size, "within the threshold (%s %s)",
			 in->larger ? ">=" : "<=", t);
		break;
	default:
		snprintf(buf, size, "%s", checks[ck].label);
		break;
	}
}

static void table_checks(struct insp *in, struct table *t)
{
	char label[96];

	for (int i = 0; i < CK_COUNT; i++) {
		if (!(in->applies & (1u << i)))
			continue;
		check_label(in, i, label, sizeof(label));
		if (!in->ck[i].rows)
			inspect_table_kv(t, label, "every row");
		else
			inspect_table_kv(t, label, "FAILED in %" PRId64
					 " row%s; %s", in->ck[i].rows,
					 in->ck[i].rows == 1 ? "" : "s",
					 in->ck[i].first);
	}
}

static int text_check(struct insp *in, xj_status *st)
{
	struct table t;
	char a[32], b[32];

	fprintf(in->out, "\n# check of every row (read in slabs of %" PRId64
		" rows x %" PRId64 " columns)\n", in->tile_rows,
		in->tile_cols);
	inspect_table_init(&t, 2, "check", "result", NULL, NULL, NULL);
	inspect_table_kv(&t, "rows checked", "%" PRId64 " of %" PRId64
			 " (x %" PRId64 " columns)", in->rows_checked, in->n,
			 in->cols);
	if (in->topk) {
		inspect_table_kv(&t, "rows fully padded (-1)", "%" PRId64,
				 in->padded_rows);
		inspect_table_kv(&t, "padding entries (-1)", "%" PRId64
				 " of %" PRId64, in->pad_entries,
				 in->n * in->cols);
	} else {
		inspect_fmt_f32(a, sizeof(a), (float)in->vmin);
		inspect_fmt_f32(b, sizeof(b), (float)in->vmax);
		inspect_table_kv(&t, "finite values in", "[%s, %s]", a, b);
		inspect_table_kv(&t, "infinite values", "%" PRId64, in->ninf);
	}
	table_checks(in, &t);
	return inspect_table_done(in, &t, st);
}

static void json_checks(struct insp *in)
{
	FILE *f = in->out;
	int any = 0;

	fputs("    \"checks\": {", f);
	for (int i = 0; i < CK_COUNT; i++) {
		if (!(in->applies & (1u << i)))
			continue;
		fprintf(f, "%s\"%s\": {\"failed_rows\": %" PRId64
			", \"first\": ", any++ ? ",\n      " : "\n      ",
			checks[i].key, in->ck[i].rows);
		if (in->ck[i].rows)
			inspect_json_str(f, in->ck[i].first);
		else
			fputs("null", f);
		fputc('}', f);
	}
	fputs(any ? "\n    }\n" : "}\n", f);
}

static void json_check(struct insp *in)
{
	FILE *f = in->out;

	fprintf(f, "  \"check\": {\n    \"rows\": %" PRId64 ", \"columns\": %"
		PRId64 ", \"rows_checked\": %" PRId64 ",\n    \"order\": \"%s\""
		",\n", in->n, in->cols, in->rows_checked,
		!in->topk ? "none" : in->larger ? "descending" : "ascending");
	if (in->topk) {
		fprintf(f, "    \"rows_fully_padded\": %" PRId64 ", "
			"\"padding_entries\": %" PRId64 ",\n",
			in->padded_rows, in->pad_entries);
	} else {
		fputs("    \"min\": ", f);
		inspect_json_f32(f, (float)in->vmin);
		fputs(", \"max\": ", f);
		inspect_json_f32(f, (float)in->vmax);
		fprintf(f, ", \"infinite_values\": %" PRId64 ",\n", in->ninf);
	}
	json_checks(in);
	fputs("  },\n", f);
}

static void text_verdict(struct insp *in, const xj_status *st)
{
	if (!st->code)
		fprintf(in->out, "# OK: %s keeps every rule of an xjoin %s "
			"result\n", in->path, in->topk ? "topk" : "matrix");
	else
		fprintf(in->out, "# FAILED: %s\n", st->msg);
}

static void json_verdict(struct insp *in, const xj_status *st)
{
	fprintf(in->out, "  \"ok\": %s,\n  \"problem\": ",
		st->code ? "false" : "true");
	if (st->code)
		inspect_json_str(in->out, st->msg);
	else
		fputs("null", in->out);
	fputs("\n}\n", in->out);
}

/* ---- results: the description ----------------------------------------- */

/* The shards of a pattern or list input (ROLE_shard_count, and
 * ROLE_shards: one "FILE:DATASET" a line, perhaps only the first ones):
 * how many, the first and the last listed. */
static void table_shards(struct insp *in, struct table *t, const char *role)
{
	char name[64], label[64];
	const char *list, *last, *end;
	int64_t count = 0;

	snprintf(name, sizeof(name), "%s_shard_count", role);
	inspect_attr_i64(in, name, &count);
	snprintf(name, sizeof(name), "%s_shards", role);
	list = inspect_attr_str(in, name);
	if (!list || !list[0])
		return;
	end = list + strlen(list);
	if (end > list && end[-1] == '\n')
		end--;
	for (last = end; last > list && last[-1] != '\n'; last--)
		;
	snprintf(label, sizeof(label), "%s shards", role);
	inspect_table_kv(t, label, "%" PRId64 ": %.*s%s%.*s", count,
			 (int)strcspn(list, "\n"), list, count > 1 ? " .. " :
			 "", count > 1 ? (int)(end - last) : 0, last);
}

static void table_input(struct insp *in, struct table *t, const char *role)
{
	char name[64];
	const char *file, *dset, *type;
	int64_t rows = -1, d = -1;

	snprintf(name, sizeof(name), "%s_file", role);
	file = inspect_attr_str(in, name);
	snprintf(name, sizeof(name), "%s_dataset", role);
	dset = inspect_attr_str(in, name);
	snprintf(name, sizeof(name), "%s_type", role);
	type = inspect_attr_str(in, name);
	snprintf(name, sizeof(name), "%s_rows", role);
	inspect_attr_i64(in, name, &rows);
	inspect_attr_i64(in, "dimension", &d);
	if (!file)
		return;
	/* a list of shards ("@list.txt") names no dataset of its own */
	inspect_table_kv(t, role, "%s%s%s, %" PRId64 " x %" PRId64 " %s", file,
			 dset && !dset[0] ? "" : ":", dset ? dset : "?", rows, d,
			 type ? type : "?");
	table_shards(in, t, role);
}

/* One row per phase of the last run, in the order they run. */
static void table_seconds(struct insp *in, struct table *t)
{
	static const char *const phases[] = {
		"setup", "validate", "read", "compute", "merge", "write",
	};
	char name[64], label[64];
	double s, total = 0;
	int any = 0;

	for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
		snprintf(name, sizeof(name), "seconds_%s", phases[i]);
		if (!inspect_attr_f64(in, name, &s))
			continue;
		snprintf(label, sizeof(label), "seconds: %s", phases[i]);
		inspect_table_kv(t, label, "%.3f", s);
		total += s;
		any = 1;
	}
	if (any)
		inspect_table_kv(t, "seconds: sum", "%.3f", total);
}

static void table_job(struct insp *in, struct table *t)
{
	char text[64];
	int64_t v;
	double f;

	const char *metric = inspect_attr_str(in, "metric");

	inspect_table_kv(t, "command", "%s", inspect_attr_str(in, "command"));
	if (in->metric_ok)
		inspect_table_kv(t, "metric", "%s (%s is better)", metric,
				 in->larger ? "larger" : "smaller");
	else
		inspect_table_kv(t, "metric", "%s",
				 metric ? metric : "(missing)");
	if (!in->topk)
		return;
	if (inspect_attr_i64(in, "k", &v))
		inspect_table_kv(t, "k", "%" PRId64, v);
	/* both are shown in the next row */
	inspect_attr_i64(in, "has_threshold", &v);
	inspect_attr_f64(in, "threshold", &f);
	if (in->has_threshold) {
		inspect_fmt_f64(text, sizeof(text), in->threshold);
		inspect_table_kv(t, "threshold", "%s (%s)", text, in->larger ?
				 "kept: value >= threshold" :
				 "kept: value <= threshold");
	} else {
		inspect_table_kv(t, "threshold", "none");
	}
	if (inspect_attr_i64(in, "self_excluded", &v))
		inspect_table_kv(t, "self excluded", "%s", v ? "yes" : "no");
}

static void table_run(struct insp *in, struct table *t)
{
	const char *s;
	int64_t v, w;

	if (inspect_attr_i64(in, "ranks", &v))
		inspect_table_kv(t, "ranks", "%" PRId64, v);
	if ((s = inspect_attr_str(in, "grid")))
		inspect_table_kv(t, "grid", "%s", s);
	if ((s = inspect_attr_str(in, "backends")))
		inspect_table_kv(t, "backend", "%s", s);
	if (inspect_attr_i64(in, "threads_per_rank", &v))
		inspect_table_kv(t, "threads per rank", "%" PRId64, v);
	if (inspect_attr_i64(in, "query_chunk_rows", &v) &&
	    inspect_attr_i64(in, "base_chunk_rows", &w))
		inspect_table_kv(t, "chunk rows", "query %" PRId64
				 ", base %" PRId64, v, w);
	if (inspect_attr_i64(in, "runs", &v))
		inspect_table_kv(t, "runs", "%" PRId64 "%s", v, v > 1 ?
				 " (resumed after an interruption)" : "");
	if ((s = inspect_attr_str(in, "created")))
		inspect_table_kv(t, "created", "%s", s);
	table_seconds(in, t);
	if (inspect_attr_i64(in, "schema_version", &v))
		inspect_table_kv(t, "schema version", "%" PRId64 "%s", v,
				 v > XJOIN_SCHEMA_VERSION ? " (newer than this "
				 "xjoin reads: some checks may not apply)" :
				 "");
	if ((s = inspect_attr_str(in, "xjoin_version")))
		inspect_table_kv(t, "xjoin version", "%s", s);
}

static int text_attrs(struct insp *in, xj_status *st)
{
	struct table t;

	fprintf(in->out, "\n# root attributes\n");
	inspect_table_init(&t, 2, "attribute", "value", NULL, NULL, NULL);
	inspect_attrs_unmark(in);
	table_job(in, &t);
	table_input(in, &t, "query");
	table_input(in, &t, "base");
	table_run(in, &t);
	inspect_table_raw_attrs(in, &t);
	return inspect_table_done(in, &t, st);
}

static void text_result_head(struct insp *in)
{
	const char *cmd = inspect_attr_str(in, "command");
	const char *ver = inspect_attr_str(in, "xjoin_version");
	int64_t schema = 0;

	inspect_attr_i64(in, "schema_version", &schema);
	fprintf(in->out, "# %s: a finished xjoin %s result (schema %" PRId64
		", written by xjoin %s)\n", in->path, cmd, schema,
		ver ? ver : "?");
}

static void json_result_head(struct insp *in)
{
	fputs("{\n  \"file\": ", in->out);
	inspect_json_str(in->out, in->path);
	fputs(",\n  \"kind\": \"result\",\n  \"command\": ", in->out);
	inspect_json_str(in->out, inspect_attr_str(in, "command"));
	fputs(",\n", in->out);
	inspect_json_attrs(in);
}

int inspect_result(struct insp *in, xj_status *st)
{
	inspect_result_open(in);
	if (in->o->json) {
		json_result_head(in);
	} else {
		text_result_head(in);
		if (text_attrs(in, st))
			return st->code;
	}
	if (inspect_emit_dsets(in, st))
		return st->code;
	if (in->readable && !emit_rows(in, st) &&
	    !inspect_scan_result(in, st)) {
		if (in->o->json)
			json_check(in);
		else if (text_check(in, st))
			return st->code;
	}
	if (!st->code)
		inspect_verdict(in, st);
	if (in->o->json)
		json_verdict(in, st);
	else
		text_verdict(in, st);
	return st->code;
}
