/*
 * fuzz_h5path.h: xjoin's input validation path, as the HDF5 fuzz
 * harnesses drive it (header only).
 *
 * defines: fuzz_h5_result, fuzz_h5_probe, fuzz_h5_read,
 *          fuzz_h5_no_open_ids
 *
 * The path is the one app/main.c and app/driver/driver.c take for an input spec:
 *
 *   h5in_parse_spec -> h5in_probe -> h5in_open -> h5in_read, slab by slab,
 *   over every row -> metric_check_rows for every metric -> h5in_close
 *
 * and it is checked against what io/h5in.h and kernels/metric.h promise:
 * the allowed status codes, a probe that reports a 2-D shape of at least
 * one row and column and a dataset path starting with '/', reads that
 * fill the slab with finite values only (the buffer is poisoned with NaN
 * bytes first), a read of zero rows that succeeds, a read past the end
 * that fails without touching memory, and no HDF5 identifier left open.
 *
 * Work is bounded so one input stays in the millisecond range: at most
 * FUZZ_H5_SLAB_VALUES values per slab and FUZZ_H5_READ_VALUES in all
 * (the rows past that are not read; a decompression bomb can declare
 * far more than a small file holds).
 */
#ifndef XJ_FUZZ_H5PATH_H
#define XJ_FUZZ_H5PATH_H

#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "config/job.h"
#include "fuzz_util.h"
#include "io/h5in.h"
#include "kernels/metric.h"

#define FUZZ_H5_SLAB_VALUES ((int64_t)1 << 20)
#define FUZZ_H5_READ_VALUES ((int64_t)1 << 22)

/* Called with every slab read and checked; ctx is the caller's. */
typedef void (*fuzz_h5_slab_fn)(void *ctx, int64_t row0, int64_t rows,
				int64_t cols, const float *x);

struct fuzz_h5_result {
	int probe;             /* status code of parse + probe */
	h5in_info info;        /* valid when probe == XJ_OK */
	int read;              /* status code of open + reads */
	int64_t rows_read;     /* rows read and found finite */
	int complete;          /* every row was read (no budget cut) */
	xj_status st;          /* the last failure's message */
};

#define FUZZ_H5_INPUT (FUZZ_CODE(XJ_OK) | FUZZ_CODE(XJ_EXIT_INPUT))

/* Every HDF5 identifier our code opened must be closed again. */
static inline void fuzz_h5_no_open_ids(const char *when)
{
	ssize_t n = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);

	if (n != 0)
		fuzz_die("%zd HDF5 identifiers left open after %s", n, when);
}

static inline void fuzz_h5_check_slab(const h5in_info *info, int64_t row0,
				      int64_t rows, const float *x)
{
	int64_t count = rows * info->cols;
	xj_status st;

	for (int64_t i = 0; i < count; i++)
		if (!isfinite(x[i]))
			fuzz_die("%s:%s: h5in_read passed row %lld column %lld "
				 "= %g", info->file, info->dset,
				 (long long)(row0 + i / info->cols),
				 (long long)(i % info->cols), (double)x[i]);
	for (int m = XJ_METRIC_L2; m <= XJ_METRIC_IP; m++) {
		int rc;

		memset(&st, 0xA5, sizeof(st));
		xj_ok(&st);
		rc = metric_check_rows((xj_metric)m, x, rows, info->cols, row0,
				       &st);
		fuzz_check_status("metric_check_rows", rc, &st,
				  FUZZ_H5_INPUT);
	}
}

/* The probe's promises about a dataset it accepted (0 rows is an empty
 * input, refused by app/ only for the base). */
static inline void fuzz_h5_check_info(const h5in_info *info)
{
	if (info->rows < 0 || info->cols < 1)
		fuzz_die("%s: probe accepted %lld x %lld", info->file,
			 (long long)info->rows, (long long)info->cols);
	if (info->dset[0] != '/' ||
	    !memchr(info->dset, '\0', sizeof(info->dset)) ||
	    !memchr(info->type_desc, '\0', sizeof(info->type_desc)) ||
	    !info->type_desc[0])
		fuzz_die("%s: probe left a bad dataset name or type", info->file);
}

/* Out-of-contract reads fail as internal errors and touch nothing. */
static inline void fuzz_h5_check_edges(h5in *h, const h5in_info *info)
{
	xj_status st;
	float canary = 1.0f;
	int rc;

	rc = h5in_read(h, 0, 0, NULL, &st);
	fuzz_check_status("h5in_read of 0 rows", rc, &st, FUZZ_CODE(XJ_OK));
	rc = h5in_read(h, info->rows, 1, &canary, &st);
	fuzz_check_status("h5in_read past the end", rc, &st,
			  FUZZ_CODE(XJ_EXIT_INTERNAL));
	rc = h5in_read(h, -1, 1, &canary, &st);
	fuzz_check_status("h5in_read before the start", rc, &st,
			  FUZZ_CODE(XJ_EXIT_INTERNAL));
	if (canary != 1.0f)
		fuzz_die("a refused h5in_read wrote to its buffer");
}

/* Every row of an open dataset, slab by slab; budget-bounded. */
static inline void fuzz_h5_read_all(h5in *h, const h5in_info *info,
				    int64_t slab_rows, fuzz_h5_slab_fn fn,
				    void *ctx, struct fuzz_h5_result *r)
{
	int64_t cols = info->cols, budget = FUZZ_H5_READ_VALUES;
	float *buf;

	if (cols > FUZZ_H5_SLAB_VALUES)
		return;   /* one row would pass the budget */
	if (slab_rows < 1)
		slab_rows = 1;
	if (slab_rows > FUZZ_H5_SLAB_VALUES / cols)
		slab_rows = FUZZ_H5_SLAB_VALUES / cols;
	if (slab_rows > info->rows)
		slab_rows = info->rows;
	buf = malloc((size_t)(slab_rows * cols) * sizeof(float));
	if (!buf)
		return;
	for (int64_t row0 = 0; row0 < info->rows; row0 += slab_rows) {
		int64_t n = info->rows - row0 < slab_rows ?
			    info->rows - row0 : slab_rows;

		if (n * cols > budget)
			break;
		budget -= n * cols;
		memset(buf, 0xFF, (size_t)(n * cols) * sizeof(float));
		r->read = h5in_read(h, row0, n, buf, &r->st);
		fuzz_check_status("h5in_read", r->read, &r->st, FUZZ_H5_INPUT);
		if (r->read)
			break;
		fuzz_h5_check_slab(info, row0, n, buf);
		if (fn)
			fn(ctx, row0, n, cols, buf);
		r->rows_read += n;
	}
	r->complete = r->read == XJ_OK && r->rows_read == info->rows;
	free(buf);
}

/*
 * Parse and probe one input spec: "FILE[:DATASET]" with default_dset
 * standing for the "test"/"train" defaults of queries and base ("" for
 * the search of the only 2-D dataset). Sets r->probe and r->info.
 */
static inline void fuzz_h5_probe(const char *spec, const char *default_dset,
				 struct fuzz_h5_result *r)
{
	char file[XJ_PATH_MAX], dset[XJ_NAME_MAX];
	int rc;

	memset(r, 0, sizeof(*r));
	memset(&r->info, 0xA5, sizeof(r->info));
	r->read = -1;
	rc = h5in_parse_spec(spec, file, dset, &r->st);
	fuzz_check_status("h5in_parse_spec", rc, &r->st,
			  FUZZ_CODE(XJ_OK) | FUZZ_CODE(XJ_EXIT_USAGE));
	if (!rc) {
		rc = h5in_probe(file, dset, default_dset, &r->info, &r->st);
		fuzz_check_status("h5in_probe", rc, &r->st, FUZZ_H5_INPUT);
	}
	fuzz_h5_no_open_ids("h5in_probe");
	r->probe = rc;
	if (!rc)
		fuzz_h5_check_info(&r->info);
}

/*
 * Open the dataset r->probe accepted and read every row, slab_rows at a
 * time (the slab height the driver's plan would choose). fn (may be NULL)
 * sees every slab read. Sets r->read, r->rows_read, r->complete.
 */
static inline void fuzz_h5_read(struct fuzz_h5_result *r, int64_t slab_rows,
				fuzz_h5_slab_fn fn, void *ctx)
{
	h5in *h = NULL;

	if (r->probe)
		return;
	r->read = h5in_open(&r->info, &h, &r->st);
	fuzz_check_status("h5in_open", r->read, &r->st, FUZZ_H5_INPUT);
	if (r->read == XJ_OK) {
		fuzz_h5_check_edges(h, &r->info);
		fuzz_h5_read_all(h, &r->info, slab_rows, fn, ctx, r);
	} else if (h) {
		fuzz_die("h5in_open failed but returned a handle");
	}
	h5in_close(h);
	fuzz_h5_no_open_ids("h5in_close");
}

#endif
