/*
 * inspect_check.c: whether a result keeps the output's rules: its
 * attributes and shapes first, then every row, read in tiles, then the
 * verdict that names the first row at fault.
 *
 * The rules checked are the output's own (README, Output): each topk row
 * best first (ascending distances, descending ip), -1 padding only at its
 * end and valued +inf (-inf for ip), base indices in [0, base_rows), no
 * pair (i, i) under self exclusion, no value past the threshold (the
 * stored float is at least as good as the threshold itself, see
 * metric_value_to_key), no NaN; matrix values not NaN, and not negative
 * for l2 and sqeuclidean. Equal values may come in any index order: the
 * tie rule orders double-precision scores, which can round to one float.
 */
#define _GNU_SOURCE
#include "inspect_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../../io/h5check.h"

#define INSPECT_SLAB_BYTES ((int64_t)16 << 20)

/* One row's walk through its columns (possibly over several tiles). */
struct rowstate {
	float last;              /* last real value */
	int64_t last_col;        /* its column; -1: none yet */
	int64_t pad_col;         /* first -1; -1: none */
	int64_t pads;
	unsigned failed;         /* bits of the checks it already failed */
};

/* ---- results: what they should be ------------------------------------- */

__attribute__((format(printf, 2, 3)))
static void problem(struct insp *in, const char *fmt, ...)
{
	va_list ap;

	if (in->nproblems++ == 0) {
		va_start(ap, fmt);
		vsnprintf(in->problem, sizeof(in->problem), fmt, ap);
		va_end(ap);
	}
}

/* "schema_version" and a command this xjoin writes. */
int inspect_is_result(struct insp *in)
{
	struct attr *v = inspect_attr_find(in, "schema_version");
	struct attr *c = inspect_attr_find(in, "command");

	return v && v->kind == AK_INT && c && c->kind == AK_STR &&
	       (!strcmp(c->text, "topk") || !strcmp(c->text, "matrix"));
}

/* A dataset that was listed but does not open is a problem of the file,
 * reported with the rest of its description. */
static int open_result_dset(struct insp *in, const char *name, hid_t *id)
{
	xj_status why;

	xj_ok(&why);
	if (H5_TRY(*id = H5Dopen2(in->file, name, H5P_DEFAULT), &why,
		   XJ_EXIT_INPUT, "cannot open %s", name)) {
		problem(in, "%s", why.msg);
		return -1;
	}
	return 0;
}

/* A 2-D dataset of class cls, or a problem named. */
static const struct dset *expect_dset(struct insp *in, const char *name,
				      H5T_class_t cls)
{
	const struct dset *d = inspect_dset_find(in, name);

	if (!d) {
		problem(in, "no dataset %s", name);
		return NULL;
	}
	if (d->rank != 2 || d->cls != cls) {
		problem(in, "%s is %s %d-D, expected a 2-D %s matrix", name,
			d->type, d->rank, h5check_class_name(cls));
		return NULL;
	}
	return d;
}

/* Shapes against each other and against the attributes. */
static void expect_shapes(struct insp *in, const struct dset *nbr,
			  const struct dset *dist)
{
	int64_t v;

	in->n = (int64_t)dist->dims[0];
	in->cols = (int64_t)dist->dims[1];
	if (nbr && (nbr->dims[0] != dist->dims[0] ||
		    nbr->dims[1] != dist->dims[1]))
		problem(in, "/neighbors is %llu x %llu but /distances %llu x "
			"%llu", (unsigned long long)nbr->dims[0],
			(unsigned long long)nbr->dims[1],
			(unsigned long long)dist->dims[0],
			(unsigned long long)dist->dims[1]);
	if (inspect_attr_i64(in, "query_rows", &v) && v != in->n)
		problem(in, "/distances has %" PRId64 " rows but the attribute "
			"query_rows says %" PRId64, in->n, v);
	if (in->topk && inspect_attr_i64(in, "k", &v) && v != in->cols)
		problem(in, "/distances has %" PRId64 " columns but the "
			"attribute k says %" PRId64, in->cols, v);
	if (!in->topk && in->m > 0 && in->m != in->cols)
		problem(in, "/distances has %" PRId64 " columns but the "
			"attribute base_rows says %" PRId64, in->cols, in->m);
}

/* The job the attributes describe, and the rules that follow from it. */
static void result_job(struct insp *in)
{
	const char *metric = inspect_attr_str(in, "metric");
	int64_t v;

	in->topk = strcmp(inspect_attr_str(in, "command"), "topk") == 0;
	if (!metric || metric_parse(metric, &in->metric) != 0) {
		problem(in, "attribute metric is %s%s%s, not one of l2, "
			"sqeuclidean, cosine, ip", metric ? "'" : "missing",
			metric ? metric : "", metric ? "'" : "");
		return;
	}
	in->metric_ok = 1;
	in->larger = metric_larger_is_better(in->metric);
	in->pad_value = in->larger ? -INFINITY : INFINITY;
	if (inspect_attr_i64(in, "base_rows", &v) && v > 0)
		in->m = v;
	if (inspect_attr_i64(in, "has_threshold", &v) && v)
		in->has_threshold = inspect_attr_f64(in, "threshold",
						     &in->threshold);
	if (inspect_attr_i64(in, "self_excluded", &v))
		in->self = v != 0;
	in->applies = 1u << CK_NAN;
	if (in->topk)
		in->applies |= 1u << CK_ORDER | 1u << CK_GAP |
			       1u << CK_PADVAL | 1u << CK_INDEX |
			       (in->self ? 1u << CK_SELF : 0) |
			       (in->has_threshold ? 1u << CK_THRESHOLD : 0);
	else if (in->metric == XJ_METRIC_L2 ||
		 in->metric == XJ_METRIC_SQEUCLIDEAN)
		in->applies |= 1u << CK_NEGATIVE;
}

void inspect_result_open(struct insp *in)
{
	const struct dset *nbr = NULL, *dist;

	for (int i = 0; i < CK_COUNT; i++)
		in->ck[i].first_row = -1;
	result_job(in);
	if (in->nproblems)
		return;
	if (in->topk && !(nbr = expect_dset(in, "/neighbors", H5T_INTEGER)))
		return;
	if (!(dist = expect_dset(in, "/distances", H5T_FLOAT)))
		return;
	expect_shapes(in, nbr, dist);
	if (in->nproblems ||
	    (in->topk && open_result_dset(in, "/neighbors", &in->nbr_id)) ||
	    open_result_dset(in, "/distances", &in->dist_id))
		return;
	in->readable = 1;
}

/* ---- results: the check of every row ---------------------------------- */

/* The phrase after "row R " for each check. */
static void check_phrase(const struct insp *in, int ck, char *buf,
			 size_t size)
{
	switch (ck) {
	case CK_ORDER:
		snprintf(buf, size, "is not sorted best first (%s for %s)",
			 in->larger ? "descending" : "ascending",
			 metric_name(in->metric));
		break;
	case CK_GAP:
		snprintf(buf, size, "has a neighbour after its -1 padding");
		break;
	case CK_PADVAL:
		snprintf(buf, size, "has -1 padding not valued %s",
			 in->larger ? "-inf" : "+inf");
		break;
	case CK_INDEX:
		snprintf(buf, size, "has a base index out of range");
		break;
	case CK_SELF:
		snprintf(buf, size, "lists itself (self exclusion is on)");
		break;
	case CK_THRESHOLD:
		snprintf(buf, size, "has a value past the threshold");
		break;
	case CK_NAN:
		snprintf(buf, size, "has a NaN value");
		break;
	default:
		snprintf(buf, size, "has a negative distance");
		break;
	}
}

__attribute__((format(printf, 5, 6)))
static void row_fail(struct insp *in, struct rowstate *s, int ck, int64_t row,
		     const char *fmt, ...)
{
	struct check *c = &in->ck[ck];
	char phrase[96], detail[256];
	va_list ap;

	if (s->failed & (1u << ck))
		return;
	s->failed |= 1u << ck;
	if (c->rows++ > 0)
		return;
	c->first_row = row;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	check_phrase(in, ck, phrase, sizeof(phrase));
	snprintf(c->first, sizeof(c->first), "row %" PRId64 " %s: %s", row,
		 phrase, detail);
}

static void check_pair(struct insp *in, struct rowstate *s, int64_t row,
		       int64_t col, int64_t idx, float v)
{
	if (idx == -1) {
		if (s->pad_col < 0)
			s->pad_col = col;
		s->pads++;
		if (v != in->pad_value)
			row_fail(in, s, CK_PADVAL, row, "column %" PRId64
				 " has %.9g", col, (double)v);
		return;
	}
	if (s->pad_col >= 0)
		row_fail(in, s, CK_GAP, row, "base row %" PRId64 " in column %"
			 PRId64 ", padding from column %" PRId64, idx, col,
			 s->pad_col);
	if (idx < 0 || (in->m > 0 && idx >= in->m))
		row_fail(in, s, CK_INDEX, row, "column %" PRId64 " holds %"
			 PRId64 ", base rows are [0, %" PRId64 ")", col, idx,
			 in->m);
	if (in->self && idx == row)
		row_fail(in, s, CK_SELF, row, "column %" PRId64, col);
	if (isnan(v)) {
		row_fail(in, s, CK_NAN, row, "column %" PRId64 " (base row %"
			 PRId64 ")", col, idx);
		return;
	}
	if (in->has_threshold && (in->larger ? (double)v < in->threshold :
				  (double)v > in->threshold))
		row_fail(in, s, CK_THRESHOLD, row, "column %" PRId64 " has "
			 "%.9g, the threshold is %.17g", col, (double)v,
			 in->threshold);
	if (s->last_col >= 0 && (in->larger ? v > s->last : v < s->last))
		row_fail(in, s, CK_ORDER, row, "column %" PRId64 " (%.9g) "
			 "after column %" PRId64 " (%.9g)", col, (double)v,
			 s->last_col, (double)s->last);
	s->last = v;
	s->last_col = col;
}

static void check_value(struct insp *in, struct rowstate *s, int64_t row,
			int64_t col, float v)
{
	if (isnan(v)) {
		row_fail(in, s, CK_NAN, row, "column %" PRId64, col);
		return;
	}
	if (v < 0 && (in->applies & (1u << CK_NEGATIVE)))
		row_fail(in, s, CK_NEGATIVE, row, "column %" PRId64 " has "
			 "%.9g", col, (double)v);
	if (isinf(v)) {
		in->ninf++;
		return;
	}
	in->vmin = v < in->vmin ? v : in->vmin;
	in->vmax = v > in->vmax ? v : in->vmax;
}

static void check_tile(struct insp *in, struct rowstate *state, int64_t r0,
		       int64_t nr, int64_t c0, int64_t nc, const int64_t *idx,
		       const float *val)
{
	for (int64_t i = 0; i < nr; i++) {
		for (int64_t j = 0; j < nc; j++) {
			if (in->topk)
				check_pair(in, &state[i], r0 + i, c0 + j,
					   idx[i * nc + j], val[i * nc + j]);
			else
				check_value(in, &state[i], r0 + i, c0 + j,
					    val[i * nc + j]);
		}
	}
}

/* Tile of at most slab_bytes: whole rows when one fits, else a piece of
 * one row. */
static void tile_shape(struct insp *in)
{
	int64_t budget = in->o->slab_bytes > 0 ? in->o->slab_bytes :
			 INSPECT_SLAB_BYTES;
	int64_t per = in->topk ? 12 : 4, w, r;

	if (in->cols == 0) {   /* nothing to read: rows only counted */
		in->tile_cols = 0;
		in->tile_rows = inspect_min64(in->n, 4096);
		return;
	}
	w = budget / per < 1 ? 1 : budget / per;
	w = inspect_min64(w, in->cols);
	r = w < in->cols ? 1 : budget / (w * per);
	in->tile_cols = w;
	in->tile_rows = inspect_min64(r < 1 ? 1 : r, in->n);
}

static void rows_start(struct rowstate *state, int64_t nr)
{
	for (int64_t i = 0; i < nr; i++) {
		memset(&state[i], 0, sizeof(state[i]));
		state[i].last_col = -1;
		state[i].pad_col = -1;
	}
}

static void rows_end(struct insp *in, const struct rowstate *state,
		     int64_t nr)
{
	for (int64_t i = 0; i < nr; i++) {
		in->pad_entries += state[i].pads;
		in->padded_rows += in->cols > 0 && state[i].pads == in->cols;
	}
	in->rows_checked += nr;
}

static int scan_rows(struct insp *in, int64_t r0, int64_t nr,
		     struct rowstate *state, int64_t *idx, float *val,
		     xj_status *st)
{
	rows_start(state, nr);
	for (int64_t c0 = 0; c0 < in->cols; c0 += in->tile_cols) {
		int64_t nc = inspect_min64(in->tile_cols, in->cols - c0);

		if (inspect_read_both(in, r0, nr, c0, nc, idx, val, st))
			return st->code;
		check_tile(in, state, r0, nr, c0, nc, idx, val);
	}
	rows_end(in, state, nr);
	return XJ_OK;
}

int inspect_scan_result(struct insp *in, xj_status *st)
{
	size_t cells;
	struct rowstate *state;
	int64_t *idx;
	float *val;

	in->vmin = INFINITY;
	in->vmax = -INFINITY;
	tile_shape(in);
	cells = (size_t)(in->tile_rows * in->tile_cols) + 1;
	state = calloc((size_t)in->tile_rows + 1, sizeof(*state));
	idx = in->topk ? calloc(cells, sizeof(*idx)) : NULL;
	val = calloc(cells, sizeof(*val));
	if (!state || !val || (in->topk && !idx))
		xj_fail(st, XJ_EXIT_RESOURCE, "%s: out of memory for a "
			"%" PRId64 " x %" PRId64 " slab", in->path,
			in->tile_rows, in->tile_cols);
	for (int64_t r0 = 0; !st->code && r0 < in->n; r0 += in->tile_rows) {
		/* a long check stops on Ctrl-C (main watches signals) */
		if (comm_interrupted()) {
			xj_fail(st, XJ_EXIT_INTERRUPTED, "%s: stopped by "
				"signal %d after %" PRId64 " of %" PRId64
				" rows", in->path, comm_interrupted(), r0,
				in->n);
			break;
		}
		scan_rows(in, r0, inspect_min64(in->tile_rows, in->n - r0),
			  state, idx, val, st);
	}
	free(state);
	free(idx);
	free(val);
	return st->code;
}

/* ---- results: the verdict --------------------------------------------- */

/* The check whose first failing row is lowest, or -1. */
static int first_failed(const struct insp *in)
{
	int best = -1;

	for (int i = 0; i < CK_COUNT; i++)
		if (in->ck[i].rows && (best < 0 || in->ck[i].first_row <
					       in->ck[best].first_row))
			best = i;
	return best;
}

static int failed_checks(const struct insp *in)
{
	int n = 0;

	for (int i = 0; i < CK_COUNT; i++)
		n += in->ck[i].rows > 0;
	return n;
}

/* The first problem, by the lowest row, into st. */
int inspect_verdict(struct insp *in, xj_status *st)
{
	int ck = first_failed(in), n = failed_checks(in);

	if (in->nproblems)
		return xj_fail(st, XJ_EXIT_INPUT, "%s: %s%s", in->path,
			       in->problem, in->nproblems > 1 ?
			       " (and more problems)" : "");
	if (ck < 0)
		return XJ_OK;
	return xj_fail(st, XJ_EXIT_INPUT, "%s: %s (%" PRId64 " %s this "
		       "check%s)", in->path, in->ck[ck].first, in->ck[ck].rows,
		       in->ck[ck].rows == 1 ? "row fails" : "rows fail",
		       n > 1 ? "; others fail too" : "");
}
