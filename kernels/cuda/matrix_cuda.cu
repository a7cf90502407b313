/*
 * matrix_cuda.cu: matrix blocks on the CUDA backend, on one GPU.
 *
 * Matrix: the block is computed in TQ x TB tiles into two tile buffers in
 * turn, on the compute stream; a copy stream moves each finished tile
 * (2-D) into the caller's block, pinned memory from block_alloc, while
 * the next tile is computed. Events order the pair: a tile buffer is
 * rewritten only after its copy is done. matrix_start returns once the
 * rows are checked and the tiles are queued, so the caller writes the
 * block before while this one is computed and copied; matrix_wait waits
 * for the copy stream.
 *
 * A matrix-only backend (k = 0, as the driver makes it) proposes and
 * verifies, as the CPU does (cpu_matrix.c): the base block is widened to
 * double once per block, each query tile once per block (a fixed TQ x d
 * buffer: the planner's matrix formula has no per-query work term, and
 * the widening costs 12 bytes an element against the tile's 2 nb d
 * FLOPs), cublasDgemm gives the tile's dot products, matrix.cuh's
 * verify_kernel decides them with the CPU's bound, and matrix_kernel
 * computes the 32 x 32 squares holding an undecided pair canonically.
 * The handle keeps XJ_CUBLAS_MATH (default math), under which cublasDgemm
 * does IEEE double products and sums (on the FP64 tensor cores, with FMA, in
 * an order of its own): what the bound allows; the fixed-point emulation
 * of FP64 is opt-in (CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH) and not taken.
 * A backend made for top-k computes every pair canonically
 * (matrix_kernel) and needs no double buffers.
 *
 * The query block of a driver's round stays on the device across its
 * base blocks (xj_rows.tag): uploaded and checked once per query chunk.
 *
 * The math, layout and costs of a tile are matrix.cuh's.
 */
#include "backend_cuda_int.h"

#include <cuda_runtime.h>

#include "check.cuh"
#include "matrix.cuh"

static_assert(MAT_ROWS == XJ_CUDA_SQ, "one flag per matrix_kernel block");

/* ---- matrix ------------------------------------------------------------ */

/* The tile's values into g: on a matrix-only backend from the double
 * GEMM of the query tile (c->qd, already widened) and base rows j0..,
 * verified, the undecided squares computed canonically; otherwise every
 * pair canonically. */
static int matrix_tile_values(cuda_backend *c, int64_t i0, int tq,
			      int64_t j0, int tb, float *g, xj_status *st)
{
	xj_metric m = c->cfg.metric;
	int64_t d = c->cfg.d;
	const double one = 1.0, zero = 0.0;

	if (!c->dgemm)
		return matrix_tile(m, d, c->q + i0 * d, tq, c->qq + i0,
				   c->b + j0 * d, tb, c->bb + j0, g, tb, NULL,
				   NULL, c->stream, st);
	/* row-major gd (tq x tb) = qd bd^T is column-major gd^T = bd^T' qd:
	 * bd's rows are the columns of a d x tb column-major matrix (op T),
	 * qd's of a d x tq one (op N) */
	CUBLAS_CHECK(st, cublasDgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, tb, tq,
				     (int)d, &one, c->bd + j0 * d, (int)d,
				     c->qd, (int)d, &zero, c->gd, tb));
	if (matrix_verify_tile(m, d, c->gd, tb, tq, c->qq + i0, tb, c->bb + j0,
			       g, tb, c->sqflags, c->stream, st))
		return st->code;
	return matrix_tile(m, d, c->q + i0 * d, tq, c->qq + i0, c->b + j0 * d,
			   tb, c->bb + j0, g, tb, c->sqflags, c->mdone,
			   c->stream, st);
}

/* Tile t of the block into buffer t % 2, then its copy into out. c->gd,
 * c->qd and c->sqflags serve every tile: the compute stream orders their
 * reuse. */
static int matrix_tile_queue(cuda_backend *c, int64_t t, int64_t i0, int tq,
			     int64_t j0, int tb, int64_t nb, float *out,
			     xj_status *st)
{
	int s = (int)(t & 1);
	float *g = s ? c->g2 : c->g;

	/* an event never recorded is complete: the first two tiles pass */
	CUDA_CHECK(st, cudaStreamWaitEvent(c->stream, c->copied[s], 0));
	if (matrix_tile_values(c, i0, tq, j0, tb, g, st))
		return st->code;
	CUDA_CHECK(st, cudaEventRecord(c->tiled[s], c->stream));
	CUDA_CHECK(st, cudaStreamWaitEvent(c->cstream, c->tiled[s], 0));
	CUDA_CHECK(st, cudaMemcpy2DAsync(out + i0 * nb + j0,
					 (size_t)nb * sizeof(float), g,
					 (size_t)tb * sizeof(float),
					 (size_t)tb * sizeof(float), (size_t)tq,
					 cudaMemcpyDeviceToHost, c->cstream));
	CUDA_CHECK(st, cudaEventRecord(c->copied[s], c->cstream));
	return XJ_OK;
}

static int matrix_start_run(cuda_backend *c, const xj_rows *q,
			    const xj_rows *b, float *out, xj_status *st)
{
	xj_metric m = c->cfg.metric;
	int64_t d = c->cfg.d, nq = q->rows, nb = b->rows;
	unsigned long long bad[2] = { XJC_BAD_NONE, XJC_BAD_NONE };
	int kept;

	if (cuda_check_rows_arg(c, q, "query", st) ||
	    cuda_check_rows_arg(c, b, "base", st))
		return st->code;
	if (nq == 0 || nb == 0)
		return XJ_OK;
	if (c->active || c->ractive)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "matrix_start between %s_begin and %s_end",
			       c->active ? "topk" : "range",
			       c->active ? "topk" : "range");
	CUDA_CHECK(st, cudaSetDevice(c->device));
	if (cuda_query_reserve(c, nq, st) || cuda_base_reserve(c, nb, st) ||
	    cuda_flags_reset(c, st))
		return st->code;
	/* the query block of a round stays on the device for all its base
	 * blocks (xj_rows.tag) */
	kept = q->tag && q->tag == c->qtag && q->first_row == c->qtag_first &&
	       nq == c->qtag_rows;
	c->qtag = 0;
	if (!kept) {
		CUDA_CHECK(st, cudaMemcpyAsync(c->q, q->x,
					       (size_t)(nq * d) * sizeof(float),
					       cudaMemcpyHostToDevice,
					       c->stream));
		if (cuda_prep_norms(c->q, nq, d, m, q->first_row, c->qq, NULL,
				    NULL, &c->bad[0], c->stream, st))
			return st->code;
	}
	CUDA_CHECK(st, cudaMemcpyAsync(c->b, b->x, (size_t)(nb * d) * sizeof(float),
				       cudaMemcpyHostToDevice, c->stream));
	if (cuda_prep_norms(c->b, nb, d, m, b->first_row, c->bb, NULL, NULL,
			    &c->bad[1], c->stream, st))
		return st->code;
	CUDA_CHECK(st, cudaMemcpyAsync(bad, c->bad, sizeof(bad),
				       cudaMemcpyDeviceToHost, c->stream));
	CUDA_CHECK(st, cudaStreamSynchronize(c->stream));
	if (bad[0] != XJC_BAD_NONE)
		return cuda_rows_bad(c, q, st);
	if (bad[1] != XJC_BAD_NONE)
		return cuda_rows_bad(c, b, st);
	c->qtag = q->tag;
	c->qtag_first = q->first_row;
	c->qtag_rows = nq;
	c->mqueued = 1;
	/* the double GEMM's 2d FLOPs a pair (matrix_wait adds the canonical
	 * pairs'), or matrix_kernel's 3d (l2 family), 2d (ip, cosine) */
	c->be.gemm_flops += (c->dgemm ? 2.0 :
			     m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN ?
			     3.0 : 2.0) * (double)d * (double)nq * (double)nb;
	if (c->dgemm) {
		CUDA_CHECK(st, cudaMemsetAsync(c->mdone, 0, sizeof(*c->mdone),
					       c->stream));
		if (matrix_widen(c->b, nb * d, c->bd, c->stream, st))
			return st->code;
	}
	for (int64_t i0 = 0, t = 0; i0 < nq; i0 += XJ_CUDA_TQ) {
		int tq = (int)MIN64(XJ_CUDA_TQ, nq - i0);

		/* after the tiles of the query tile before (stream order) */
		if (c->dgemm && matrix_widen(c->q + i0 * d, tq * d, c->qd,
					     c->stream, st))
			return st->code;
		for (int64_t j0 = 0; j0 < nb; j0 += XJ_CUDA_TB, t++)
			if (matrix_tile_queue(c, t, i0, tq, j0,
					      (int)MIN64(XJ_CUDA_TB, nb - j0),
					      nb, out, st))
				return st->code;
	}
	return XJ_OK;
}

/* Both streams idle: the queued block is in out. Both are waited for
 * even when the first wait fails, so nothing writes to out afterwards.
 * Then the pairs computed canonically are counted, and their FLOPs:
 * 3d a pair (l2 family), 2d (ip, cosine). */
static int matrix_wait_run(cuda_backend *c, xj_status *st)
{
	cudaError_t tiles, copies;
	unsigned long long done = 0;
	xj_metric m = c->cfg.metric;

	if (!c->mqueued)
		return XJ_OK;
	c->mqueued = 0;
	CUDA_CHECK(st, cudaSetDevice(c->device));
	tiles = cudaStreamSynchronize(c->stream);
	copies = cudaStreamSynchronize(c->cstream);
	if (tiles != cudaSuccess)
		return cuda_fail(st, tiles, "cudaStreamSynchronize(tiles)",
				 __FILE__, __LINE__);
	if (copies != cudaSuccess)
		return cuda_fail(st, copies, "cudaStreamSynchronize(copies)",
				 __FILE__, __LINE__);
	if (!c->dgemm)
		return XJ_OK;
	CUDA_CHECK(st, cudaMemcpyAsync(&done, c->mdone, sizeof(done),
				       cudaMemcpyDeviceToHost, c->stream));
	CUDA_CHECK(st, cudaStreamSynchronize(c->stream));
	c->be.matrix_exact_pairs += (int64_t)done;
	c->be.gemm_flops += (m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN ?
			     3.0 : 2.0) * (double)c->cfg.d * (double)done;
	return XJ_OK;
}

/* ---- host builds for the tests ------------------------------------------ */

extern "C" int backend_cuda_host_dgemm_decide(xj_metric m, int64_t d,
					      double p, double qq, double bb,
					      float *value)
{
	return metric_dgemm_decide(m, d, p, qq, bb, value);
}

/* ---- entry points ------------------------------------------------------ */

/* A failed start leaves nothing running that could still write to out. */
int cuda_matrix_start(xj_backend *be, const xj_rows *q, const xj_rows *b,
		      float *out, xj_status *st)
{
	cuda_backend *c = cuda_of(be);
	int rc;

	if (c->mqueued)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "cuda backend: matrix_start with a block queued");
	rc = matrix_start_run(c, q, b, out, st);
	if (!rc)
		return XJ_OK;
	(void)cudaStreamSynchronize(c->stream);
	(void)cudaStreamSynchronize(c->cstream);
	c->mqueued = 0;
	return cuda_entry_fail(c, rc, "matrix_start", st);
}

int cuda_matrix_wait(xj_backend *be, xj_status *st)
{
	int rc = matrix_wait_run(cuda_of(be), st);

	return rc ? cuda_entry_fail(cuda_of(be), rc, "matrix_wait", st) : XJ_OK;
}

float *cuda_block_alloc(xj_backend *be, int64_t n, xj_status *st)
{
	cuda_backend *c = cuda_of(be);
	float *p = NULL;
	cudaError_t e = cudaSetDevice(c->device);

	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		xj_fail(st, XJ_EXIT_INTERNAL, "cudaSetDevice(%d): %s",
			c->device, cudaGetErrorString(e));
	} else if (cuda_pinned_alloc(&p, n > 0 ? n : 1, "a matrix block", st)) {
		p = NULL;
	}
	if (!p)
		cuda_entry_fail(c, st->code, "block_alloc", st);
	return p;
}

void cuda_block_free(xj_backend *be, float *p)
{
	if (!p)
		return;
	(void)cudaSetDevice(cuda_of(be)->device);
	(void)cudaFreeHost(p);
	(void)cudaGetLastError();
}
