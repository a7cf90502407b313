/*
 * cpu_matrix.c: matrix blocks on the CPU backend.
 *
 * Propose and verify (metric.h, "Exact values from a double GEMM"). A
 * work item is MTQ query rows x TB base rows: both widened to double, one
 * cblas_dgemm gives every pair's dot product (2d FLOPs a pair), and the
 * error bound decides the canonical key of almost every pair (a few
 * FLOPs and two roundings a pair). The pairs it leaves undecided (near
 * a float32 rounding boundary, near-duplicate rows under l2) are
 * computed canonically: one at a time by metric_key() when few, or the
 * whole item by the vector kernel below when many (rows far from the
 * origin with small spreads): one SIMD lane per base row, accumulating
 * over the dimension in index order (MW base rows transposed to
 * doubles), MQ query rows at a time, 3d double FLOPs a pair (l2 family),
 * 2d (ip, cosine). 4 bytes written a pair.
 *
 * A large block is computed by a worker thread, so that the driver (two
 * buffers, its default) writes the block before meanwhile.
 */
#include "cpu_backend_int.h"

#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../metric.h"

/* An item with more than 1 / LANES_SHARE of its pairs undecided is
 * computed whole by the vector kernel: metric_key() alone costs about
 * 20 times as much a pair (one dependency chain). */
#define LANES_SHARE 16
/* A block of fewer pair-dimensions than this (about a millisecond of
 * dgemm) is computed in matrix_start: a worker thread would cost more,
 * far more on a loaded machine, where each start waits for a time slice
 * (--chunk-rows 3 under two ranks took 5 times as long). */
#define WORKER_MIN ((double)(1 << 24))

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
static void lanes_item(cpu_backend *c, cpu_thread *t, const xj_rows *q,
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

/* ---- propose and verify ----------------------------------------------- */

static void widen(const float *x, int64_t n, double *y)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = x[i];
}

/*
 * One query row (canonical squared norm qq) against nb base rows, from
 * their dot products p: o[w] gets the value wherever the bound decides
 * it, amb[w] says where it does not. Returns how many it does not. The
 * decision is metric_dgemm_decide (metric_dgemm.h), the CUDA matrix's
 * too. Inlined with a constant metric, so that the loop has no branch
 * and vectorises (this file is built with -fno-math-errno: sqrt()
 * without the errno branch, the same correctly rounded result).
 */
static inline __attribute__((always_inline)) int64_t
verify_row_of(xj_metric m, int64_t d, const double *p, int64_t nb, double qq,
	      const double *bb, float *o, unsigned char *amb)
{
	int64_t n = 0;

	for (int64_t w = 0; w < nb; w++) {
		int u = metric_dgemm_decide(m, d, p[w], qq, bb[w], &o[w]);

		amb[w] = (unsigned char)u;
		n += u;
	}
	return n;
}

XJ_CLONES
static int64_t verify_row(xj_metric m, int64_t d, const double *p,
			  int64_t nb, double qq, const double *bb, float *o,
			  unsigned char *amb)
{
	switch (m) {
	case XJ_METRIC_L2:
		return verify_row_of(XJ_METRIC_L2, d, p, nb, qq, bb, o, amb);
	case XJ_METRIC_SQEUCLIDEAN:
		return verify_row_of(XJ_METRIC_SQEUCLIDEAN, d, p, nb, qq, bb,
				     o, amb);
	case XJ_METRIC_IP:
		return verify_row_of(XJ_METRIC_IP, d, p, nb, qq, bb, o, amb);
	case XJ_METRIC_COSINE:
		return verify_row_of(XJ_METRIC_COSINE, d, p, nb, qq, bb, o,
				     amb);
	}
	for (int64_t w = 0; w < nb; w++)
		amb[w] = 1;     /* not reached: every pair canonically */
	return nb;
}

/* Query rows [i0, i1) against base rows [j0, j1) into out (stride
 * b->rows). Returns the pairs computed canonically. */
static int64_t gemm_item(cpu_backend *c, cpu_thread *t, const xj_rows *q,
			 const xj_rows *b, int64_t i0, int64_t i1, int64_t j0,
			 int64_t j1, float *out)
{
	xj_metric m = c->cfg.metric;
	int64_t d = c->cfg.d, tq = i1 - i0, nb = j1 - j0, amb = 0;

	widen(q->x + i0 * d, tq * d, t->qd);
	widen(b->x + j0 * d, nb * d, t->bd);
	cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)tq, (int)nb,
		    (int)d, 1.0, t->qd, (int)d, t->bd, (int)d, 0.0, t->gd,
		    (int)nb);
	for (int64_t r = 0; r < tq; r++)
		amb += verify_row(m, d, t->gd + r * nb, nb, c->mqq[i0 + r],
				  c->mbb + j0, out + (i0 + r) * b->rows + j0,
				  t->amb + r * nb);
	if (amb * LANES_SHARE > tq * nb) {
		for (int64_t j = j0; j < j1; j += MW)
			lanes_item(c, t, q, b, i0, i1, j,
				   j1 - j < MW ? j1 - j : MW, out);
		return tq * nb;
	}
	for (int64_t r = 0; amb && r < tq; r++)
		for (int64_t w = 0; w < nb; w++) {
			const float *qr = q->x + (i0 + r) * d;
			const float *br = b->x + (j0 + w) * d;

			if (!t->amb[r * nb + w])
				continue;
			out[(i0 + r) * b->rows + j0 + w] =
				metric_key_to_value(m, metric_key(m, qr, br, d,
					c->mqq[i0 + r], c->mbb[j0 + w]));
		}
	return amb;
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

/* The block q x b into out, rows prepared: matrix_start's work, on the
 * worker thread (or the caller's where none could start). */
static void matrix_compute(cpu_backend *c, const xj_rows *q,
			   const xj_rows *b, float *out)
{
	xj_metric m = c->cfg.metric;
	int64_t d = c->cfg.d, exact = 0;
	int64_t nqt = (q->rows + MTQ - 1) / MTQ, nbt = (b->rows + TB - 1) / TB;

#pragma omp parallel for collapse(2) schedule(dynamic, 1) \
	num_threads(c->threads) reduction(+ : exact) \
	if (nqt * nbt > 1 && (double)q->rows * b->rows * d >= PAR_MIN_ELEMS)
	for (int64_t it = 0; it < nqt; it++) {
		for (int64_t jt = 0; jt < nbt; jt++) {
			cpu_thread *t = &c->th[omp_get_thread_num()];
			int64_t i0 = it * MTQ, j0 = jt * TB;
			int64_t i1 = i0 + MTQ < q->rows ? i0 + MTQ : q->rows;
			int64_t j1 = j0 + TB < b->rows ? j0 + TB : b->rows;

			exact += gemm_item(c, t, q, b, i0, i1, j0, j1, out);
		}
	}
	/* the GEMM, and the canonical pairs at 3d (l2 family) or 2d */
	c->be.gemm_flops += 2.0 * (double)d * (double)q->rows *
			    (double)b->rows +
			    (m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN ?
			     3.0 : 2.0) * (double)d * (double)exact;
	c->be.matrix_exact_pairs += exact;
}

static void *matrix_worker(void *arg)
{
	cpu_backend *c = arg;

	matrix_compute(c, &c->mq, &c->mb, c->mout);
	return NULL;
}

/* Rows checked and their norms taken here; the block is computed by a
 * worker thread (its own OpenMP team) while the caller writes the block
 * before, and matrix_wait joins it (a small block is computed here).
 * Nothing in the worker can fail. */
int cpu_matrix_start(xj_backend *be, const xj_rows *q, const xj_rows *b,
		     float *out, xj_status *st)
{
	cpu_backend *c = cpu_of(be);
	xj_metric m = c->cfg.metric;
	int64_t d = c->cfg.d, bad;

	if (c->mqueued)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "cpu backend: matrix_start with a block queued");
	if (cpu_check_rows_arg(c, q, "query", st) ||
	    cpu_check_rows_arg(c, b, "base", st))
		return st->code;
	if (q->rows == 0 || b->rows == 0)
		return XJ_OK;
	if (grow_doubles(&c->mqq, &c->mqalloc, q->rows, "query norms", st) ||
	    grow_doubles(&c->mbb, &c->mballoc, b->rows, "base norms", st))
		return st->code;
	/* on the caller's thread alone: the norms cost about 1 / n of the
	 * block's GEMM (n: the other side's rows), and a team here would
	 * spin idle through the write that follows (libgomp's wait after a
	 * region): 11% of the CPU samples of a set's matrix with itself */
	bad = cpu_rows_prepare(m, q->x, q->rows, d, c->mqq, NULL, NULL, NULL,
			       1);
	if (bad >= 0)
		return cpu_bad_row(m, q->x, d, bad, q->first_row, st);
	bad = cpu_rows_prepare(m, b->x, b->rows, d, c->mbb, NULL, NULL, NULL,
			       1);
	if (bad >= 0)
		return cpu_bad_row(m, b->x, d, bad, b->first_row, st);
	c->mq = *q;
	c->mb = *b;
	c->mout = out;
	/* queued until matrix_wait, wherever it was computed */
	c->mqueued = 1;
	c->mthreaded = (double)q->rows * (double)b->rows * (double)d >=
		       WORKER_MIN &&
		       pthread_create(&c->mthread, NULL, matrix_worker, c) == 0;
	if (!c->mthreaded)
		matrix_compute(c, q, b, out);   /* small, or no thread */
	return XJ_OK;
}

int cpu_matrix_wait(xj_backend *be, xj_status *st)
{
	cpu_backend *c = cpu_of(be);

	(void)st;
	if (c->mqueued && c->mthreaded)
		pthread_join(c->mthread, NULL);
	c->mqueued = c->mthreaded = 0;
	return XJ_OK;
}

float *cpu_block_alloc(xj_backend *be, int64_t n, xj_status *st)
{
	float *p = NULL;

	(void)be;
	/* page-aligned: the output writes its chunks from here with
	 * O_DIRECT (h5out_set_direct) */
	if (cpu_size_ok(n, (int64_t)sizeof(float)))
		p = aligned_alloc(4096, ((size_t)(n > 0 ? n : 1) *
					 sizeof(float) + 4095) / 4096 * 4096);
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
