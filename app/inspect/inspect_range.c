/*
 * inspect_range.c: `xjoin inspect` of a range join's CSR output.
 *
 * The invariants every such file keeps, each checked over the whole file:
 *   shape      /indptr has n + 1 entries, /indices and /distances nnz =
 *              indptr[n]; indptr[0] = 0 and indptr never decreases
 *   index      every index in [0, m)
 *   order      each row in (key, index) order, strictly (no pair twice);
 *              key = value, or -value for ip
 *   threshold  every value within the threshold (<=, ip: >=), none NaN
 *   self       no pair (i, i) when self_excluded
 * Memory is bounded: /indptr and the pairs are read in pieces of
 * PIECE entries, the state of the row in progress carried over.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "../../io/h5check.h"
#include "inspect_int.h"

#define PIECE ((int64_t)1 << 20)

enum rck { RK_INDEX, RK_ORDER, RK_THRESHOLD, RK_SELF, RK_COUNT };
static const char *const rck_name[RK_COUNT] = {
	"index in range", "sorted by (value, index)", "within threshold",
	"no (i, i) pair",
};

struct csr {
	struct insp *in;
	hid_t ptr_id, idx_id, val_id;
	int64_t n, m, nnz;
	int larger, self;
	double threshold;
	int64_t rows_bad[RK_COUNT], last_bad[RK_COUNT];
	char first[RK_COUNT][256];
	char problem[384];
	int64_t *ptr;          /* a window of /indptr: [p0, p0 + np) */
	int64_t p0, np;
};

static int read_1d(hid_t id, hid_t mtype, int64_t off, int64_t cnt,
		   void *buf, xj_status *st)
{
	hsize_t start = (hsize_t)off, count = (hsize_t)cnt;
	hid_t fs = H5I_INVALID_HID, ms = H5I_INVALID_HID;

	if (cnt == 0)
		return XJ_OK;
	if (!H5_TRY(fs = H5Dget_space(id), st, XJ_EXIT_INPUT, "dataspace") &&
	    !H5_TRY(ms = H5Screate_simple(1, &count, NULL), st, XJ_EXIT_INPUT,
		    "memory space") &&
	    !H5_TRY(H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL,
					&count, NULL), st, XJ_EXIT_INPUT,
		    "selection"))
		H5_TRY(H5Dread(id, mtype, ms, fs, H5P_DEFAULT, buf), st,
		       XJ_EXIT_INPUT, "reading [%" PRId64 ", %" PRId64 ")",
		       off, off + cnt);
	if (ms >= 0)
		H5Sclose(ms);
	if (fs >= 0)
		H5Sclose(fs);
	return st->code;
}

/* indptr[i], through the window. */
static int ptr_at(struct csr *c, int64_t i, int64_t *v, xj_status *st)
{
	if (i < c->p0 || i >= c->p0 + c->np) {
		c->p0 = i;
		c->np = inspect_min64(PIECE, c->n + 1 - i);
		if (read_1d(c->ptr_id, H5T_NATIVE_INT64, c->p0, c->np, c->ptr,
			    st))
			return st->code;
	}
	*v = c->ptr[i - c->p0];
	return XJ_OK;
}

static int64_t dset_len(const struct insp *in, const char *name)
{
	const struct dset *d = inspect_dset_find(in, name);

	return d && d->rank == 1 ? (int64_t)d->dims[0] : -1;
}

/* Shapes, indptr[0] = 0, indptr monotone and ending at nnz. */
static int csr_shape(struct csr *c, xj_status *st)
{
	int64_t lp = dset_len(c->in, "/indptr");
	int64_t li = dset_len(c->in, "/indices");
	int64_t lv = dset_len(c->in, "/distances");
	int64_t prev = 0, v = 0;

	c->nnz = li;
	if (lp != c->n + 1 || li < 0 || lv != li) {
		snprintf(c->problem, sizeof(c->problem), "shapes: /indptr %"
			 PRId64 " (expected n + 1 = %" PRId64 "), /indices %"
			 PRId64 ", /distances %" PRId64 " (1-D, equal)", lp,
			 c->n + 1, li, lv);
		return XJ_OK;
	}
	for (int64_t i = 0; i <= c->n; i++) {
		if (ptr_at(c, i, &v, st))
			return st->code;
		if ((i == 0 && v != 0) || v < prev || (i == c->n && v != li)) {
			snprintf(c->problem, sizeof(c->problem), "/indptr[%"
				 PRId64 "] = %" PRId64 " after %" PRId64
				 " (must start at 0, never decrease and end "
				 "at nnz = %" PRId64 ")", i, v, prev, li);
			return XJ_OK;
		}
		prev = v;
	}
	return XJ_OK;
}

/* Row fails check k: 1 when it is the first failing row (to describe). */
static int bad(struct csr *c, enum rck k, int64_t row)
{
	if (c->last_bad[k] == row)
		return 0;
	c->last_bad[k] = row;
	return c->rows_bad[k]++ == 0;
}

/* Every pair, in pieces, against the rules of its row. */
static int csr_pairs(struct csr *c, xj_status *st)
{
	int64_t *idx = malloc((size_t)PIECE * sizeof(int64_t));
	float *val = malloc((size_t)PIECE * sizeof(float));
	int64_t row = 0, end = 0, pidx = -1;
	float pkey = 0;

	if (!idx || !val) {
		free(idx);
		free(val);
		return xj_fail(st, XJ_EXIT_RESOURCE, "inspect: out of memory");
	}
	for (int64_t p0 = 0; p0 < c->nnz && !st->code; p0 += PIECE) {
		int64_t np = inspect_min64(PIECE, c->nnz - p0);

		if (read_1d(c->idx_id, H5T_NATIVE_INT64, p0, np, idx, st) ||
		    read_1d(c->val_id, H5T_NATIVE_FLOAT, p0, np, val, st))
			break;
		for (int64_t p = 0; p < np; p++) {
			int64_t j = idx[p];
			float v = val[p], key = c->larger ? -v : v;
			int first = 0;

			while (p0 + p >= end && !st->code) {
				if (ptr_at(c, ++row, &end, st))
					break;
				first = 1;
			}
			if ((j < 0 || j >= c->m) && bad(c, RK_INDEX, row - 1))
				snprintf(c->first[RK_INDEX], 256, "row %" PRId64
					 ": index %" PRId64 " outside [0, %"
					 PRId64 ")", row - 1, j, c->m);
			if (!first && !(pkey < key || (pkey == key &&
							pidx < j)) &&
			    bad(c, RK_ORDER, row - 1))
				snprintf(c->first[RK_ORDER], 256, "row %" PRId64
					 ": index %" PRId64 " (value %.9g) out "
					 "of (value, index) order", row - 1, j,
					 v);
			if (!(c->larger ? v >= c->threshold :
					  v <= c->threshold) &&
			    bad(c, RK_THRESHOLD, row - 1))
				snprintf(c->first[RK_THRESHOLD], 256, "row %"
					 PRId64 ": index %" PRId64 " has value "
					 "%.9g, past the threshold %.9g",
					 row - 1, j, v, c->threshold);
			if (c->self && j == row - 1 && bad(c, RK_SELF, row - 1))
				snprintf(c->first[RK_SELF], 256, "row %" PRId64
					 ": the pair (i, i)", row - 1);
			pkey = key;
			pidx = j;
		}
	}
	free(idx);
	free(val);
	return st->code;
}

static int csr_open(struct csr *c, xj_status *st)
{
	struct insp *in = c->in;
	int64_t self = 0;

	if (!inspect_attr_i64(in, "query_rows", &c->n) ||
	    !inspect_attr_i64(in, "base_rows", &c->m) ||
	    !inspect_attr_f64(in, "threshold", &c->threshold))
		return xj_fail(st, XJ_EXIT_INPUT, "%s: a range output without "
			       "query_rows, base_rows or threshold attributes",
			       in->path);
	inspect_attr_i64(in, "self_excluded", &self);
	c->self = self != 0;
	c->larger = !strcmp(inspect_attr_str(in, "metric") ?
			    inspect_attr_str(in, "metric") : "", "ip");
	if (H5_TRY(c->ptr_id = H5Dopen2(in->file, "/indptr", H5P_DEFAULT),
		   st, XJ_EXIT_INPUT, "%s: cannot open /indptr", in->path) ||
	    H5_TRY(c->idx_id = H5Dopen2(in->file, "/indices", H5P_DEFAULT),
		   st, XJ_EXIT_INPUT, "%s: cannot open /indices", in->path))
		return st->code;
	H5_TRY(c->val_id = H5Dopen2(in->file, "/distances", H5P_DEFAULT), st,
	       XJ_EXIT_INPUT, "%s: cannot open /distances", in->path);
	return st->code;
}

/* The first rows' pairs (up to 10 each). */
static int csr_rows(struct csr *c, xj_status *st)
{
	int64_t rows = inspect_min64(c->in->o->rows, c->n);

	for (int64_t i = 0; i < rows; i++) {
		int64_t a = 0, b = 0, show, idx[10];
		float val[10];

		if (ptr_at(c, i, &a, st) || ptr_at(c, i + 1, &b, st))
			return st->code;
		show = inspect_min64(10, b - a);
		if (read_1d(c->idx_id, H5T_NATIVE_INT64, a, show, idx, st) ||
		    read_1d(c->val_id, H5T_NATIVE_FLOAT, a, show, val, st))
			return st->code;
		fprintf(c->in->out, "# row %" PRId64 ": %" PRId64 " pairs",
			i, b - a);
		for (int64_t p = 0; p < show; p++)
			fprintf(c->in->out, "%s %" PRId64 " (%.9g)",
				p ? "," : ":", idx[p], val[p]);
		fprintf(c->in->out, "%s\n", b - a > show ? ", ..." : "");
	}
	return XJ_OK;
}

static void csr_print(struct csr *c, int ok)
{
	FILE *f = c->in->out;

	if (c->in->o->json) {
		fputs("{\n  \"file\": ", f);
		inspect_json_str(f, c->in->path);
		fprintf(f, ",\n  \"kind\": \"range\",\n  \"query_rows\": %"
			PRId64 ",\n  \"base_rows\": %" PRId64 ",\n  \"nnz\": %"
			PRId64 ",\n  \"threshold\": ", c->n, c->m, c->nnz);
		inspect_json_f64(f, c->threshold);
		fputs(",\n  \"checks\": {", f);
		for (int k = 0; k < RK_COUNT; k++)
			fprintf(f, "%s\n    \"%s\": %" PRId64, k ? "," : "",
				rck_name[k], c->rows_bad[k]);
		fprintf(f, "\n  },\n  \"ok\": %s,\n  \"problem\": ",
			ok ? "true" : "false");
		if (c->problem[0])
			inspect_json_str(f, c->problem);
		else
			fputs("null", f);
		fputs("\n}\n", f);
		return;
	}
	fprintf(f, "# %s: range join (CSR), %" PRId64 " query x %" PRId64
		" base rows, %" PRId64 " pairs within %.9g (%.2f per row)\n",
		c->in->path, c->n, c->m, c->nnz, c->threshold,
		c->n ? (double)c->nnz / c->n : 0.0);
	if (c->problem[0])
		return;
	fprintf(f, "| %-26s | %14s |\n| %-26s | %14s |\n", "check",
		"rows failing", "-----", "------------");
	for (int k = 0; k < RK_COUNT; k++)
		fprintf(f, "| %-26s | %14" PRId64 " |\n", rck_name[k],
			c->rows_bad[k]);
}

int inspect_range(struct insp *in, xj_status *st)
{
	struct csr c = { .in = in, .ptr_id = H5I_INVALID_HID,
			 .idx_id = H5I_INVALID_HID,
			 .val_id = H5I_INVALID_HID, .p0 = -1 };
	int ok = 0, k;

	for (k = 0; k < RK_COUNT; k++)
		c.last_bad[k] = -1;
	c.ptr = malloc((size_t)PIECE * sizeof(int64_t));
	if (!c.ptr)
		return xj_fail(st, XJ_EXIT_RESOURCE, "inspect: out of memory");
	if (csr_open(&c, st) || csr_shape(&c, st) ||
	    (!c.problem[0] && csr_pairs(&c, st)))
		goto out;
	for (k = 0; k < RK_COUNT && !c.rows_bad[k]; k++)
		;
	ok = !c.problem[0] && k == RK_COUNT;
	csr_print(&c, ok);
	if (!in->o->json && !c.problem[0] && csr_rows(&c, st))
		goto out;
	if (c.problem[0])
		xj_fail(st, XJ_EXIT_INPUT, "%s: %s", in->path, c.problem);
	else if (!ok)
		xj_fail(st, XJ_EXIT_INPUT, "%s: %s (%" PRId64 " %s this check)",
			in->path, c.first[k], c.rows_bad[k],
			c.rows_bad[k] == 1 ? "row fails" : "rows fail");
	else if (!in->o->json)
		fprintf(in->out, "# OK: every row keeps the CSR invariants\n");
out:
	if (c.ptr_id >= 0)
		H5Dclose(c.ptr_id);
	if (c.idx_id >= 0)
		H5Dclose(c.idx_id);
	if (c.val_id >= 0)
		H5Dclose(c.val_id);
	free(c.ptr);
	return st->code;
}
