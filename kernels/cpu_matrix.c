/*
 * cpu_matrix.c: matrix blocks on the CPU backend.
 *
 * Matrix. Canonical values for every pair, computed as metric_key() does:
 * one SIMD lane per base row, accumulating over the dimension in index
 * order (MW base rows transposed to doubles), MQ query rows at a time for
 * independent dependency chains. 3d double FLOPs per pair (l2 family), 2d
 * (ip, cosine); 4 bytes written per pair.
 */
#include "cpu_backend_int.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "metric.h"

#define MQT 64          /* matrix: query rows per work item */

/* ---- canonical scores, one SIMD lane per base row ------------------- */

/*
 * Lane w accumulates the pair (query row, base row w) over the dimension
 * in index order with the operations of metric_key(), so its result has
 * the same bits (lanes are independent: vectorising across them reorders
 * nothing). bt holds MW base rows transposed to d x MW doubles.
 */

/*
 * Eight double lanes. GCC vector extensions give lane-wise IEEE
 * operations, so the result does not depend on the vector width the
 * clone compiles them to (one zmm, two ymm or four xmm registers).
 */
typedef double vd8 __attribute__((vector_size(64)));
#define MV (MW / 8)     /* vd8 per lane block */

/* acc[r][w]: squared distance of query row r (MQ rows, stride d) and
 * lane w: MQ x MV independent dependency chains. */
XJ_CLONES
static void lanes_sqdist(const float *q, const double *bt, int64_t d,
			 double acc[MQ][MW])
{
	vd8 a[MQ][MV];

	memset(a, 0, sizeof(a));
	for (int64_t i = 0; i < d; i++) {
		vd8 r[MV];

		for (int v = 0; v < MV; v++)
			memcpy(&r[v], bt + i * MW + 8 * v, sizeof(vd8));
		for (int k = 0; k < MQ; k++) {
			double qi = q[k * d + i];

			for (int v = 0; v < MV; v++) {
				vd8 t = qi - r[v];

				a[k][v] += t * t;
			}
		}
	}
	memcpy(acc, a, sizeof(a));
}

/* As lanes_sqdist for the dot product. */
XJ_CLONES
static void lanes_dot(const float *q, const double *bt, int64_t d,
		      double acc[MQ][MW])
{
	vd8 a[MQ][MV];

	memset(a, 0, sizeof(a));
	for (int64_t i = 0; i < d; i++) {
		vd8 r[MV];

		for (int v = 0; v < MV; v++)
			memcpy(&r[v], bt + i * MW + 8 * v, sizeof(vd8));
		for (int k = 0; k < MQ; k++) {
			double qi = q[k * d + i];

			for (int v = 0; v < MV; v++)
				a[k][v] += qi * r[v];
		}
	}
	memcpy(acc, a, sizeof(a));
}

/* Rows [j0, j0 + nw) of bx, transposed to d x MW doubles, zero padded. */
static void lanes_load(const float *bx, int64_t d, int64_t j0, int64_t nw,
		       double *bt)
{
	for (int64_t i = 0; i < d; i++)
		for (int w = 0; w < MW; w++)
			bt[i * MW + w] = w < nw ? bx[(j0 + w) * d + i] : 0.0;
}

/* ---- matrix ---------------------------------------------------------- */

/* Query rows [i0, i1) against base rows [j0, j0 + nw): MQ rows per kernel
 * call, the last group padded with zero rows (computed, not stored). */
static void mat_item(cpu_backend *c, cpu_thread *t, const xj_rows *q,
		     const xj_rows *b, int64_t i0, int64_t i1, int64_t j0,
		     int64_t nw, float *out)
{
	xj_metric m = c->cfg.metric;
	int64_t d = c->cfg.d;
	int sq = m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN;
	double acc[MQ][MW];

	lanes_load(b->x, d, j0, nw, t->bt);
	for (int64_t i = i0; i < i1; i += MQ) {
		int64_t nq = i1 - i < MQ ? i1 - i : MQ;
		const float *qr = q->x + i * d;

		if (nq < MQ) {
			memset(t->qpad, 0, (size_t)(MQ * d) * sizeof(float));
			memcpy(t->qpad, qr, (size_t)(nq * d) * sizeof(float));
			qr = t->qpad;
		}
		if (sq)
			lanes_sqdist(qr, t->bt, d, acc);
		else
			lanes_dot(qr, t->bt, d, acc);
		for (int64_t r = 0; r < nq; r++) {
			float *o = out + (i + r) * b->rows + j0;

			for (int w = 0; w < nw; w++)
				o[w] = metric_key_to_value(m,
					lanes_key(m, acc[r][w], c->mqq[i + r],
						  c->mbb[j0 + w]));
		}
	}
}

/* Grow *p to hold rows doubles. */
static int grow_doubles(double **p, int64_t *have, int64_t rows,
			const char *what, xj_status *st)
{
	if (rows <= *have)
		return XJ_OK;
	free(*p);
	*have = 0;
	*p = malloc((size_t)rows * sizeof(double));
	if (!*p)
		return cpu_oom(st, what, rows * (int64_t)sizeof(double));
	*have = rows;
	return XJ_OK;
}

/* The block is computed here: matrix_wait has nothing to wait for. */
int cpu_matrix_start(xj_backend *be, const xj_rows *q, const xj_rows *b,
		     float *out, xj_status *st)
{
	cpu_backend *c = cpu_of(be);
	xj_metric m = c->cfg.metric;
	int64_t d = c->cfg.d;
	int64_t nqt, nbt, bad;

	if (cpu_check_rows_arg(c, q, "query", st) ||
	    cpu_check_rows_arg(c, b, "base", st))
		return st->code;
	if (q->rows == 0 || b->rows == 0)
		return XJ_OK;
	if (grow_doubles(&c->mqq, &c->mqalloc, q->rows, "query norms", st) ||
	    grow_doubles(&c->mbb, &c->mballoc, b->rows, "base norms", st))
		return st->code;
	bad = cpu_rows_prepare(m, q->x, q->rows, d, c->mqq, NULL, NULL, NULL,
			       c->threads);
	if (bad >= 0)
		return cpu_bad_row(m, q->x, d, bad, q->first_row, st);
	bad = cpu_rows_prepare(m, b->x, b->rows, d, c->mbb, NULL, NULL, NULL,
			       c->threads);
	if (bad >= 0)
		return cpu_bad_row(m, b->x, d, bad, b->first_row, st);
	nqt = (q->rows + MQT - 1) / MQT;
	nbt = (b->rows + MW - 1) / MW;
#pragma omp parallel for collapse(2) schedule(static) \
	num_threads(c->threads) \
	if (nqt * nbt > 1 && (double)q->rows * b->rows * d >= PAR_MIN_ELEMS)
	for (int64_t it = 0; it < nqt; it++) {
		for (int64_t jt = 0; jt < nbt; jt++) {
			cpu_thread *t = &c->th[omp_get_thread_num()];
			int64_t i0 = it * MQT, j0 = jt * MW;
			int64_t i1 = i0 + MQT < q->rows ? i0 + MQT : q->rows;
			int64_t nw = b->rows - j0 < MW ? b->rows - j0 : MW;

			mat_item(c, t, q, b, i0, i1, j0, nw, out);
		}
	}
	be->gemm_flops += (m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN ?
			   3.0 : 2.0) * (double)d * (double)q->rows *
			  (double)b->rows;
	return XJ_OK;
}

int cpu_matrix_wait(xj_backend *be, xj_status *st)
{
	(void)be;
	(void)st;
	return XJ_OK;
}

float *cpu_block_alloc(xj_backend *be, int64_t n, xj_status *st)
{
	float *p = NULL;

	(void)be;
	if (cpu_size_ok(n, (int64_t)sizeof(float)))
		p = malloc(n > 0 ? (size_t)n * sizeof(float) : 1);
	if (!p)
		cpu_oom(st, "a matrix block",
			cpu_size_ok(n, 4) ? n * 4 : INT64_MAX);
	return p;
}

void cpu_block_free(xj_backend *be, float *p)
{
	(void)be;
	free(p);
}
