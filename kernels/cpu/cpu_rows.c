/*
 * cpu_rows.c: the rows a call of the CPU backend is given, for top-k and
 * the matrix alike: the shape check, canonical squared norms (as
 * metric_norm2(), MW rows per SIMD step), float norms, the normalised
 * copy for cosine, and the status of a row that cannot be used.
 *
 * Per row: 2d double FLOPs and 4d bytes read for the norm; cosine reads
 * 4d bytes again and writes its 4d-byte normalised copy.
 */
#include "cpu_backend_int.h"

#include <math.h>
#include <string.h>

#include "../metric.h"

#define NORM2_MAX 1e37  /* as metric_check_rows() */

/* ---- row preparation ---------------------------------------------- */

/* Canonical squared norms of MW rows at offsets off[w], as metric_norm2(). */
XJ_CLONES
static void lanes_norm2_at(const float *x, const int64_t *off, int64_t d,
			   double *acc)
{
	double a[MW] = { 0 };

	for (int64_t i = 0; i < d; i++)
		for (int w = 0; w < MW; w++) {
			double v = x[off[w] + i];

			a[w] += v * v;
		}
	memcpy(acc, a, sizeof(a));
}

/* Row r of x with canonical squared norm s: float norms, normalised copy;
 * returns 0, or -1 when cosine cannot use the row or its norm overflows
 * float32. */
static int row_prepare(xj_metric m, const float *xr, int64_t d, double s,
		       int64_t r, float *fn2, float *fnorm, float *hat)
{
	if (fn2)
		fn2[r] = (float)s;
	if (fnorm)
		fnorm[r] = (float)sqrt(s);
	if (!(s <= NORM2_MAX) || (m == XJ_METRIC_COSINE && s == 0))
		return -1;
	if (hat) {
		double inv = 1.0 / sqrt(s);

		for (int64_t i = 0; i < d; i++)
			hat[r * d + i] = (float)(xr[i] * inv);
	}
	return 0;
}

/* Norms (and the normalised copy for cosine) of rows x, MW rows per step;
 * returns -1 or the first row that cosine cannot use or whose norm
 * overflows float32. */
int64_t cpu_rows_prepare(xj_metric m, const float *x, int64_t rows,
			 int64_t d, double *n2, float *fn2, float *fnorm,
			 float *hat, int threads)
{
	int64_t bad = -1, nblk = (rows + MW - 1) / MW;

#pragma omp parallel for schedule(static) num_threads(threads) \
	if (rows * d >= PAR_MIN_ELEMS)
	for (int64_t blk = 0; blk < nblk; blk++) {
		int64_t r0 = blk * MW, nw = rows - r0 < MW ? rows - r0 : MW;
		int64_t off[MW];
		double s[MW];

		for (int64_t w = 0; w < MW; w++)
			off[w] = (r0 + (w < nw ? w : 0)) * d;
		lanes_norm2_at(x, off, d, s);
		for (int64_t w = 0; w < nw; w++) {
			int64_t r = r0 + w;

			n2[r] = s[w];
			if (!row_prepare(m, x + r * d, d, s[w], r, fn2, fnorm,
					 hat))
				continue;
#pragma omp critical(xj_cpu_bad_row)
			if (bad < 0 || r < bad)
				bad = r;
		}
	}
	return bad;
}

/* Status for a row cpu_rows_prepare() refused, in metric_check_rows()
 * words. */
int cpu_bad_row(xj_metric m, const float *x, int64_t d, int64_t r,
		int64_t first_row, xj_status *st)
{
	if (metric_check_rows(m, x + r * d, 1, d, first_row + r, st))
		return st->code;
	return xj_fail(st, XJ_EXIT_INTERNAL, "row %lld: norm check disagrees",
		       (long long)(first_row + r));
}

int cpu_query_prepare(cpu_backend *c, const xj_rows *q, xj_status *st)
{
	int cosine = c->cfg.metric == XJ_METRIC_COSINE;
	int l2 = c->cfg.metric == XJ_METRIC_L2 ||
		 c->cfg.metric == XJ_METRIC_SQEUCLIDEAN;
	/* a self-join's query rows are base rows too (cpu_topk_sym.c) */
	int64_t bad = cpu_rows_prepare(c->cfg.metric, q->x, q->rows, c->cfg.d,
				       c->qq, l2 ? c->qn2 : NULL, c->qnorm,
				       cosine ? c->qhat : NULL, c->threads);

	if (bad >= 0)
		return cpu_bad_row(c->cfg.metric, q->x, c->cfg.d, bad,
				   q->first_row, st);
	return XJ_OK;
}

int cpu_check_rows_arg(const cpu_backend *c, const xj_rows *r,
		       const char *what, xj_status *st)
{
	if (r->rows < 0 || r->d != c->cfg.d || (r->rows > 0 && !r->x))
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "cpu backend: %s chunk has %lld rows of dimension %lld, expected dimension %lld",
			       what, (long long)r->rows, (long long)r->d,
			       (long long)c->cfg.d);
	return XJ_OK;
}
