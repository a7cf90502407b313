/*
 * inspect_print.c: how `xjoin inspect` writes: numbers that read back
 * as the stored values, JSON strings, "| a | b |" tables, and the
 * listings of root attributes and datasets that every HDF5 file gets.
 */
#define _GNU_SOURCE
#include "inspect_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers ---------------------------------------------------- */

/* The shortest of %.15g .. %.17g that reads back as v. */
void inspect_fmt_f64(char *buf, size_t size, double v)
{
	for (int digits = 15; digits <= 17; digits++) {
		snprintf(buf, size, "%.*g", digits, v);
		if (!isfinite(v) || strtod(buf, NULL) == v)
			return;
	}
}

/* The shortest of %.6g .. %.9g that reads back as the float v. */
void inspect_fmt_f32(char *buf, size_t size, float v)
{
	for (int digits = 6; digits <= 9; digits++) {
		snprintf(buf, size, "%.*g", digits, (double)v);
		if (!isfinite(v) || strtof(buf, NULL) == v)
			return;
	}
}

void inspect_json_str(FILE *f, const char *s)
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

/* JSON has no inf or NaN: they are null. */
void inspect_json_f64(FILE *f, double v)
{
	char buf[40];

	if (!isfinite(v)) {
		fputs("null", f);
		return;
	}
	inspect_fmt_f64(buf, sizeof(buf), v);
	fputs(buf, f);
}

void inspect_json_f32(FILE *f, float v)
{
	char buf[32];

	if (!isfinite(v)) {
		fputs("null", f);
		return;
	}
	inspect_fmt_f32(buf, sizeof(buf), v);
	fputs(buf, f);
}

/* "1000 x 100", "scalar" */
static void shape_text(char *buf, size_t size, int rank, const hsize_t *dims)
{
	size_t len = 0;

	buf[0] = '\0';
	if (rank == 0)
		snprintf(buf, size, "scalar");
	if (rank > INSPECT_RANK_MAX)
		snprintf(buf, size, "%d-D", rank);
	for (int i = 0; rank <= INSPECT_RANK_MAX && i < rank && len < size;
	     i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%llu",
					i ? " x " : "",
					(unsigned long long)dims[i]);
}

static void json_dims(FILE *f, int rank, const hsize_t *dims)
{
	fputc('[', f);
	for (int i = 0; i < rank && i < INSPECT_RANK_MAX; i++)
		fprintf(f, "%s%llu", i ? ", " : "",
			(unsigned long long)dims[i]);
	fputc(']', f);
}

/* ---- tables ----------------------------------------------------------- */

void inspect_table_init(struct table *t, int ncols, const char *h0,
			const char *h1, const char *h2, const char *h3,
			const char *h4)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	t->head[0] = h0;
	t->head[1] = h1;
	t->head[2] = h2;
	t->head[3] = h3;
	t->head[4] = h4;
}

/* Adds a row of t->ncols strings. */
static void table_put(struct table *t, ...)
{
	va_list ap;
	char **row;

	if (t->nrows == t->cap) {
		int cap = t->cap ? 2 * t->cap : 32;
		char **p = realloc(t->cell, (size_t)cap * (size_t)t->ncols *
				   sizeof(*p));

		if (!p) {
			t->oom = 1;
			return;
		}
		t->cell = p;
		t->cap = cap;
	}
	row = t->cell + (size_t)t->nrows * (size_t)t->ncols;
	va_start(ap, t);
	for (int c = 0; c < t->ncols; c++) {
		row[c] = strdup(va_arg(ap, const char *));
		t->oom |= !row[c];
	}
	va_end(ap);
	t->nrows++;
}

__attribute__((format(printf, 3, 4)))
void inspect_table_kv(struct table *t, const char *name, const char *fmt, ...)
{
	char value[INSPECT_ROW_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(value, sizeof(value), fmt, ap);
	va_end(ap);
	table_put(t, name, value);
}

static void table_rule(FILE *f, const int *w, int ncols)
{
	for (int c = 0; c < ncols; c++) {
		fputc('+', f);
		for (int i = 0; i < w[c] + 2; i++)
			fputc('-', f);
	}
	fputs("+\n", f);
}

static void table_line(FILE *f, const int *w, int ncols, char *const *cells,
		       const char *const *head)
{
	for (int c = 0; c < ncols; c++)
		fprintf(f, "| %-*s ", w[c], cells ? cells[c] : head[c]);
	fputs("|\n", f);
}

static void table_print(const struct table *t, FILE *f)
{
	int w[TABLE_COLS];

	for (int c = 0; c < t->ncols; c++) {
		w[c] = (int)strlen(t->head[c]);
		for (int r = 0; r < t->nrows; r++) {
			int len = (int)strlen(t->cell[r * t->ncols + c]);

			w[c] = len > w[c] ? len : w[c];
		}
	}
	table_rule(f, w, t->ncols);
	table_line(f, w, t->ncols, NULL, t->head);
	table_rule(f, w, t->ncols);
	for (int r = 0; r < t->nrows; r++)
		table_line(f, w, t->ncols, t->cell + r * t->ncols, NULL);
	table_rule(f, w, t->ncols);
}

static void table_free(struct table *t)
{
	for (int i = 0; i < t->nrows * t->ncols; i++)
		free(t->cell[i]);
	free(t->cell);
	memset(t, 0, sizeof(*t));
}

/* Print t (unless out of memory) and free it. */
int inspect_table_done(struct insp *in, struct table *t, xj_status *st)
{
	int oom = t->oom;

	if (!oom)
		table_print(t, in->out);
	table_free(t);
	if (oom)
		return xj_fail(st, XJ_EXIT_RESOURCE, "%s: out of memory for "
			       "a table", in->path);
	return XJ_OK;
}

/* ---- listing root attributes ------------------------------------------ */

static void attr_text(const struct attr *a, char *buf, size_t size)
{
	if (a->kind == AK_INT)
		snprintf(buf, size, "%" PRId64, a->i);
	else if (a->kind == AK_FLOAT)
		inspect_fmt_f64(buf, size, a->f);
	else
		snprintf(buf, size, "%s", a->text);
}

static void json_attr(FILE *f, const struct attr *a)
{
	if (a->kind == AK_INT)
		fprintf(f, "%" PRId64, a->i);
	else if (a->kind == AK_FLOAT)
		inspect_json_f64(f, a->f);
	else
		inspect_json_str(f, a->text);
}

void inspect_json_attrs(struct insp *in)
{
	fputs("  \"attributes\": {", in->out);
	for (int i = 0; i < in->nattr; i++) {
		fputs(i ? ",\n    " : "\n    ", in->out);
		inspect_json_str(in->out, in->attr[i].name);
		fputs(": ", in->out);
		json_attr(in->out, &in->attr[i]);
	}
	fputs(in->nattr ? "\n  },\n" : "},\n", in->out);
}

/* Every attribute not shown yet, as it is. */
void inspect_table_raw_attrs(struct insp *in, struct table *t)
{
	char value[INSPECT_TEXT_MAX + 32];

	for (int i = 0; i < in->nattr; i++) {
		if (in->attr[i].shown)
			continue;
		attr_text(&in->attr[i], value, sizeof(value));
		table_put(t, in->attr[i].name, value);
	}
}

/* ---- listing datasets ------------------------------------------------- */

static void layout_text(const struct dset *d, char *buf, size_t size)
{
	char chunk[128];
	int len = snprintf(buf, size, "%s", d->layout);

	if (d->chunked) {
		shape_text(chunk, sizeof(chunk), d->rank, d->chunk);
		len += snprintf(buf + len, size - (size_t)len, " %s", chunk);
	}
	if (d->filters[0] && len > 0 && (size_t)len < size)
		snprintf(buf + len, size - (size_t)len, ", %s", d->filters);
}

int inspect_text_dsets(struct insp *in, xj_status *st)
{
	struct table t;
	char shape[160], layout[256], bytes[32];

	fprintf(in->out, "\n# datasets\n");
	inspect_table_init(&t, 5, "dataset", "type", "shape", "layout",
			   "stored bytes");
	for (int i = 0; i < in->ndset; i++) {
		const struct dset *d = &in->dset[i];

		if (d->rank < 0)
			snprintf(shape, sizeof(shape), "?");
		else
			shape_text(shape, sizeof(shape), d->rank, d->dims);
		layout_text(d, layout, sizeof(layout));
		snprintf(bytes, sizeof(bytes), "%" PRIu64, d->stored_bytes);
		table_put(&t, d->name, d->type, shape, layout, bytes);
	}
	if (inspect_table_done(in, &t, st))
		return st->code;
	if (in->ndset_all > in->ndset)
		fprintf(in->out, "# ... and %" PRId64 " more datasets\n",
			in->ndset_all - in->ndset);
	if (in->ndset_all == 0)
		fprintf(in->out, "# (none)\n");
	return XJ_OK;
}

void inspect_json_dsets(struct insp *in)
{
	FILE *f = in->out;

	fputs("  \"datasets\": [", f);
	for (int i = 0; i < in->ndset; i++) {
		const struct dset *d = &in->dset[i];

		fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", f);
		inspect_json_str(f, d->name);
		fputs(", \"type\": ", f);
		inspect_json_str(f, d->type);
		fputs(", \"shape\": ", f);
		json_dims(f, d->rank, d->dims);
		fputs(", \"layout\": ", f);
		inspect_json_str(f, d->layout);
		fputs(", \"chunks\": ", f);
		if (d->chunked)
			json_dims(f, d->rank, d->chunk);
		else
			fputs("null", f);
		fputs(", \"filters\": ", f);
		inspect_json_str(f, d->filters);
		fprintf(f, ", \"stored_bytes\": %" PRIu64 "}", d->stored_bytes);
	}
	fprintf(f, "%s],\n  \"datasets_total\": %" PRId64 ",\n",
		in->ndset ? "\n  " : "", in->ndset_all);
}

int inspect_emit_dsets(struct insp *in, xj_status *st)
{
	if (in->o->json) {
		inspect_json_dsets(in);
		return XJ_OK;
	}
	return inspect_text_dsets(in, st);
}
