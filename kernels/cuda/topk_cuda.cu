/*
 * topk_cuda.cu: top-k on the CUDA backend, on one GPU: float32 cuBLAS
 * candidates + canonical rescoring into exact lists; and the entry points
 * the tests call to run its pieces alone.
 *
 * Top-k: the design of cpu_topk.c, one tile at a time on the compute
 * stream (uploads on the copy stream: see Streaming).
 * For a query chunk Q (n x d, resident from topk_begin to topk_end) and
 * each streamed base chunk B (m x d), for every tile of TQ query rows and
 * TB base rows:
 *
 *   G = alpha Q_tile B_sub^T   cublasSgemm, TQ x TB floats (row-major G
 *                              is column-major G^T = B_sub Q_tile^T:
 *                              op(A) = T on B rows, op(B) = N on Q rows)
 *   sel_scan   keep j when v = [|b_j|^2 +] G[i][j] <= T_i  (select.cuh)
 *   rescore    canonical keys of the kept pairs            (rescore.cuh)
 *   sel_merge  sort them, merge into the exact k-lists, update the gates
 *
 * with alpha = -2 on raw rows (l2 family), -1 on raw rows (ip) or -1 on
 * rows normalised in float (cosine), and the gate test, error bounds and
 * rescoring of metric.h. Each tile's candidates are merged before the
 * next tile is scanned, so a row never holds more than TB candidates and
 * the gates tighten tile by tile (the first tile of a row, with no gate
 * yet, keeps all its TB columns: that is the seeding of the CPU
 * backend). The k-lists are the exact canonical top-k whatever the
 * chunking: the same bits as the CPU backend.
 *
 * Per base element: 2d GEMM FLOPs (cfg->precision: float32 by default,
 * where XJ_CUBLAS_MATH (check.cuh) keeps float32 arithmetic as
 * metric_err_bound() assumes; tf32, bf16 or fp16 on tensor cores, with
 * float32 accumulation and metric_err_bound_prec()'s wider bound, bf16/fp16 reading 16-bit
 * copies made once per chunk); 8 bytes and one float add + compare in
 * the scan; per kept pair 4d bytes and 3d double FLOPs of rescoring.
 *
 * Merge (topk_end_merged, with nccl_transport.h): the chunk's lists go
 * to the ranks of the grid row straight from device memory and are
 * merged there (merge.cuh); see backend_cuda.h.
 *
 * Streaming: topk_add copies the caller's rows into one of two pinned
 * buffers (after the upload that last used that buffer has finished),
 * queues its upload on the copy stream into one of two device buffers,
 * queues the chunk's tiles on the compute stream behind that upload, and
 * returns. So the caller reads chunk c + 1 from disk while the GPU works
 * on chunk c, and chunk c + 1 travels over PCIe while chunk c's tiles
 * run. Events order the two streams: staged[s] (the upload out of
 * stage[s] into braw[s] is done: the tiles may read it, the host may
 * refill stage[s]) and consumed[s] (the tiles that read braw[s] are done:
 * the next upload may overwrite it). Everything derived from a chunk
 * (norms, cosine and 16-bit copies) is made on the compute stream, after
 * the previous chunk's tiles.
 *
 * The kernel headers prep, select, rescore and merge are compiled here and
 * in no other file (backend_cuda_int.h says why); the host builds and
 * device pieces the tests call are here with them.
 */
#include "backend_cuda_int.h"

#include <cstdlib>
#include <cstring>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "nccl_transport.h"

extern "C" {
#include "../../config/split.h"
#include "../selfjoin.h"
}

#include "canonical.cuh"
#include "check.cuh"
#include "merge.cuh"
#include "prep.cuh"
#include "rescore.cuh"
#include "select.cuh"

static_assert(XJ_CUDA_TB <= SEL_SORT_CAP,
	      "a row's candidates of one tile must fit the block sort");
static_assert(XJ_CUDA_TB <= (int)XJC_COL_MASK + 1,
	      "a tile column must fit the sort key");

/* ---- rows ---------------------------------------------------------------- */

/* A flag of prep_norms, for rows no longer on the host (same messages
 * as metric_check_rows). */
int cuda_flag_bad(unsigned long long flag, xj_status *st)
{
	long long row = (long long)(flag >> 1);

	if (flag & 1)
		return xj_fail(st, XJ_EXIT_INPUT,
			       "row %lld: values too large (squared norm overflows float32)",
			       row);
	return xj_fail(st, XJ_EXIT_INPUT,
		       "row %lld is all zeros (cosine is undefined)", row);
}

/* Copy the base chunk to the device through a pinned buffer, on the copy
 * stream; the compute stream waits for it. Returns its slot in *slot,
 * for base_consumed. (Events never recorded are complete.) */
static int base_upload(cuda_backend *c, const xj_rows *b, int *slot,
		       xj_status *st)
{
	int s = c->next_stage, kt;
	size_t bytes = (size_t)(b->rows * c->cfg.d) * sizeof(float);

	CUDA_CHECK(st, cudaEventSynchronize(c->staged[s]));
	memcpy(c->stage[s], b->x, bytes);
	CUDA_CHECK(st, cudaStreamWaitEvent(c->cstream, c->consumed[s], 0));
	if (cuda_kt_start(c, KT_UPLOAD, c->cstream, &kt, st))
		return st->code;
	CUDA_CHECK(st, cudaMemcpyAsync(c->braw[s], c->stage[s], bytes,
				       cudaMemcpyHostToDevice, c->cstream));
	if (cuda_kt_stop(c, kt, c->cstream, st))
		return st->code;
	CUDA_CHECK(st, cudaEventRecord(c->staged[s], c->cstream));
	CUDA_CHECK(st, cudaStreamWaitEvent(c->stream, c->staged[s], 0));
	c->b = c->braw[s];
	c->next_stage = 1 - s;
	*slot = s;
	return XJ_OK;
}

/* The work queued so far on the compute stream is the last to read
 * braw[slot]. */
static int base_consumed(cuda_backend *c, int slot, xj_status *st)
{
	CUDA_CHECK(st, cudaEventRecord(c->consumed[slot], c->stream));
	return XJ_OK;
}

/*
 * Under fp16, the largest |x_i| of the rows its GEMM reads of a chunk
 * (host copy x, n rows; 0 under other precisions): the chunk takes the
 * float32 GEMM when it is above 65504, which fp16 cannot hold (metric.c),
 * and the 16-bit tile's scale starts from it (xjc_tile16_exp). The
 * normalised rows of cosine are within 1 + 2^-24 (1 + 2^-20 here); bf16
 * has float's range.
 */
static float lowp_max_abs(const cuda_backend *c, const float *x, int64_t n)
{
	if (!c->lowp || c->cfg.precision != XJ_PREC_FP16)
		return 0.0f;
	if (c->cfg.metric == XJ_METRIC_COSINE)
		return 1.0f + 0x1p-20f;
	return xjc_max_abs(x, n * c->cfg.d);
}

/* Norms, the cosine copy, the sub-tile maxima and the 16-bit copy of the
 * base chunk (when its tiles use one). */
static int base_prepare_run(cuda_backend *c, const xj_rows *b, xj_status *st)
{
	xj_metric m = c->cfg.metric;
	int cosine = m == XJ_METRIC_COSINE;

	if (prep_norms(c->b, b->rows, c->cfg.d, m, b->first_row, c->bb,
		       xjc_is_sq(m) ? c->bn2 : NULL, c->bnorm, &c->bad[1],
		       c->stream, st) ||
	    (cosine &&
	     prep_hat(c->b, c->bb, b->rows, c->cfg.d, c->bhat, c->stream,
		      st)) ||
	    prep_submax(c->bnorm, b->rows, XJ_CUDA_TB, c->submax, c->stream,
			st) ||
	    (c->tune.fmin && xjc_is_sq(m) &&
	     prep_subfmin(c->bn2, b->rows, XJ_CUDA_TB, c->subfmin, c->stream,
			  st)))
		return st->code;
	if (c->lowp && !c->q_fp32 && !c->b_fp32 &&
	    prep_lowp(cosine ? c->bhat : c->b, b->rows * c->cfg.d,
		      c->cfg.precision, c->blow, c->stream, st))
		return st->code;
	return XJ_OK;
}

static int base_prepare(cuda_backend *c, const xj_rows *b, xj_status *st)
{
	int kt;

	if (cuda_kt_start(c, KT_PREP, c->stream, &kt, st) ||
	    base_prepare_run(c, b, st) || cuda_kt_stop(c, kt, c->stream, st))
		return st->code;
	return XJ_OK;
}

/* prep.cuh is compiled in this file only: the matrix's norms come
 * through here. */
int cuda_prep_norms(const float *x, int64_t rows, int64_t d, xj_metric m,
		    int64_t first_row, double *n2, float *fn2, float *fnorm,
		    unsigned long long *bad, cudaStream_t s, xj_status *st)
{
	return prep_norms(x, rows, d, m, first_row, n2, fn2, fnorm, bad, s, st);
}

/* ---- top-k ----------------------------------------------------------- */

/*
 * Queue the query chunk's upload and everything derived from it (norms,
 * the cosine and 16-bit copies, the gates at the threshold's) on the
 * compute stream, and the copy of its row flag into *bad; the caller
 * synchronises. Shared by top-k and the range join (range_cuda.cu).
 */
int cuda_query_load(cuda_backend *c, const xj_rows *q,
		    unsigned long long *bad, xj_status *st)
{
	xj_metric m = c->cfg.metric;
	int64_t d = c->cfg.d, n = q->rows;

	if (cuda_query_reserve(c, n, st) || cuda_flags_reset(c, st))
		return st->code;
	if (n == 0)
		return XJ_OK;
	CUDA_CHECK(st, cudaMemcpyAsync(c->q, q->x,
				       (size_t)(n * d) * sizeof(float),
				       cudaMemcpyHostToDevice, c->stream));
	c->qmax16 = lowp_max_abs(c, q->x, n);
	c->q_fp32 = !(c->qmax16 <= XJC_FP16_MAX);
	if (prep_norms(c->q, n, d, m, q->first_row, c->qq, NULL, c->qnorm,
		       &c->bad[0], c->stream, st) ||
	    (m == XJ_METRIC_COSINE &&
	     prep_hat(c->q, c->qq, n, d, c->qhat, c->stream, st)) ||
	    (c->lowp && !c->q_fp32 &&
	     prep_lowp(m == XJ_METRIC_COSINE ? c->qhat : c->q, n * d,
		       c->cfg.precision, c->qlow, c->stream, st)) ||
	    prep_fill_f64(c->gate, n, c->gate0, c->stream, st))
		return st->code;
	CUDA_CHECK(st, cudaMemcpyAsync(bad, &c->bad[0], sizeof(*bad),
				       cudaMemcpyDeviceToHost, c->stream));
	return XJ_OK;
}

static int topk_begin_run(cuda_backend *c, const xj_rows *q, xj_status *st)
{
	int64_t k = c->cfg.k, n = q->rows;
	unsigned long long bad = XJC_BAD_NONE;

	c->active = 0;
	c->qx = NULL;
	c->ractive = 0;     /* a range session's query rows are replaced */
	c->qtag = 0;        /* c->q is about to hold other rows */
	if (k < 1)
		return xj_fail(st, XJ_EXIT_INTERNAL, "top-k with k = %lld",
			       (long long)k);
	if (c->mqueued)     /* its copies still read the tile buffers */
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "topk_begin with a matrix block queued");
	if (cuda_check_rows_arg(c, q, "query", st))
		return st->code;
	CUDA_CHECK(st, cudaSetDevice(c->device));
	if (cuda_query_load(c, q, &bad, st))
		return st->code;
	if (n > 0) {
		if (prep_fill_f32(c->ekey, n * k, INFINITY, c->stream, st))
			return st->code;
		/* all-ones bytes: index -1 (padding); zero counts */
		CUDA_CHECK(st, cudaMemsetAsync(c->eidx, 0xff,
					       (size_t)(n * k) * sizeof(int64_t),
					       c->stream));
		CUDA_CHECK(st, cudaMemsetAsync(c->ecount, 0,
					       (size_t)n * sizeof(int64_t),
					       c->stream));
	}
	CUDA_CHECK(st, cudaStreamSynchronize(c->stream));
	if (bad != XJC_BAD_NONE)
		return cuda_rows_bad(c, q, st);
	c->qrows = n;
	c->qfirst = q->first_row;
	c->qx = q->x;
	c->active = 1;
	return XJ_OK;
}

/*
 * g = alpha B A^T in the GEMM precision p: A (nb x d) base rows and B
 * (tq x d) query rows, both row-major, so g is tq x nb row-major, which
 * is column-major g^T = alpha A B^T (op(A) = T on the base rows, op(B) =
 * N on the query rows). a and b are float rows for fp32 and tf32, 16-bit
 * copies (prep_lowp) for bf16 and fp16. Accumulation is float32 in every
 * case: cublasSgemm under XJ_CUBLAS_MATH (no tensor cores), tf32
 * tensor cores with CUBLAS_COMPUTE_32F_FAST_TF32, and CUBLAS_COMPUTE_32F
 * for 16-bit inputs (metric_err_bound_prec's model).
 */
int cuda_gemm_run(cublasHandle_t h, xj_precision p, int nb, int tq,
		  int64_t d, float alpha, const void *a, const void *b,
		  float *g, xj_status *st)
{
	cudaDataType_t t16 = p == XJ_PREC_BF16 ? CUDA_R_16BF : CUDA_R_16F;
	float beta = 0.0f;

	switch (p) {
	case XJ_PREC_FP32:
		CUBLAS_CHECK(st, cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, nb, tq,
					     (int)d, &alpha, (const float *)a,
					     (int)d, (const float *)b, (int)d,
					     &beta, g, nb));
		return XJ_OK;
	case XJ_PREC_TF32:
		CUBLAS_CHECK(st, cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, nb, tq,
					      (int)d, &alpha, a, CUDA_R_32F,
					      (int)d, b, CUDA_R_32F, (int)d,
					      &beta, g, CUDA_R_32F, nb,
					      CUBLAS_COMPUTE_32F_FAST_TF32,
					      CUBLAS_GEMM_DEFAULT));
		return XJ_OK;
	case XJ_PREC_BF16:
	case XJ_PREC_FP16:
		CUBLAS_CHECK(st, cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, nb, tq,
					      (int)d, &alpha, a, t16, (int)d, b,
					      t16, (int)d, &beta, g, CUDA_R_32F,
					      nb, CUBLAS_COMPUTE_32F,
					      CUBLAS_GEMM_DEFAULT));
		return XJ_OK;
	case XJ_PREC_INT8:   /* CPU only; app/plan/device.c never passes them */
	case XJ_PREC_AUTO:
		break;
	}
	return xj_fail(st, XJ_EXIT_INTERNAL, "cuda_gemm_run: precision %d",
		       (int)p);
}

int cuda_gemm_run16(cublasHandle_t h, int nb, int tq, int64_t d, float alpha,
		    const void *a, const void *b, void *g, xj_status *st)
{
	float beta = 0.0f;

	CUBLAS_CHECK(st, cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, nb, tq,
				      (int)d, &alpha, a, CUDA_R_16F, (int)d, b,
				      CUDA_R_16F, (int)d, &beta, g, CUDA_R_16F,
				      nb, CUBLAS_COMPUTE_32F,
				      CUBLAS_GEMM_DEFAULT));
	return XJ_OK;
}

/* The GEMM precision of the current chunk's tiles. */
xj_precision cuda_tile_prec(const cuda_backend *c)
{
	if (c->lowp && (c->q_fp32 || c->b_fp32))
		return XJ_PREC_FP32;   /* fp16 cannot hold this chunk */
	return c->cfg.precision;
}

/*
 * The scan of the GEMM tile g (tq x nb, row-major, computed in precision
 * p) under the rows' gates: query rows [i0, i0 + tq) against chunk rows
 * [j0, j0 + nb), inside one TB sub-tile of the chunk (its largest norm
 * bounds the scan's error). The kept columns of each row in (c->cand,
 * c->ncand), TB slots per row.
 */
static int tile_scan(cuda_backend *c, const xj_rows *b, const float *g,
		     int64_t i0, int tq, int64_t j0, int nb, xj_precision p,
		     xj_status *st)
{
	const xj_backend_cfg *cfg = &c->cfg;
	xj_metric m = cfg->metric;

	int kt;

	if (cuda_kt_start(c, KT_SCAN, c->stream, &kt, st) ||
	    sel_scan(g, tq, nb, xjc_is_sq(m) ? c->bn2 + j0 : NULL, m,
		     cfg->d, c->gate + i0, c->qq + i0, c->qnorm + i0,
		     c->submax + j0 / XJ_CUDA_TB, p, cfg->self,
		     c->qfirst + i0, b->first_row + j0, c->cand,
		     XJ_CUDA_TB, c->ncand, c->stream, st) ||
	    cuda_kt_stop(c, kt, c->stream, st))
		return st->code;
	return XJ_OK;
}

/* The GEMM of query rows [i0, i0 + tq) against base chunk rows [j0, j0 +
 * nb) into c->g, in the chunk's precision; returns that precision. */
static int tile_gemm(cuda_backend *c, int64_t i0, int tq, int64_t j0, int nb,
		     xj_precision *p, xj_status *st)
{
	xj_metric m = c->cfg.metric;
	int64_t d = c->cfg.d;
	int cosine = m == XJ_METRIC_COSINE;
	const float *qa = cosine ? c->qhat : c->q;
	const float *ba = cosine ? c->bhat : c->b;
	float alpha = xjc_is_sq(m) ? -2.0f : -1.0f;
	const void *ga = ba + j0 * d, *gb = qa + i0 * d;

	int kt;

	*p = cuda_tile_prec(c);
	if (*p == XJ_PREC_BF16 || *p == XJ_PREC_FP16) {
		ga = c->blow + j0 * d;
		gb = c->qlow + i0 * d;
	}
	if (cuda_kt_start(c, KT_GEMM, c->stream, &kt, st) ||
	    cuda_gemm_run(c->blas, *p, nb, tq, d, alpha, ga, gb, c->g, st) ||
	    cuda_kt_stop(c, kt, c->stream, st))
		return st->code;
	return XJ_OK;
}

/*
 * The GEMM of query rows [i0, i0 + tq) against base chunk rows [j0, j0 +
 * nb) and its scan under the rows' gates: the kept columns of each row
 * in (c->cand, c->ncand), TB slots per row. Shared by top-k and the range
 * join (range_cuda.cu), which rescore what it keeps.
 */
int cuda_tile_scan(cuda_backend *c, const xj_rows *b, int64_t i0, int tq,
		   int64_t j0, int nb, xj_status *st)
{
	xj_precision p;

	if (tile_gemm(c, i0, tq, j0, nb, &p, st))
		return st->code;
	return tile_scan(c, b, c->g, i0, tq, j0, nb, p, st);
}

/*
 * Scan, rescore and merge the GEMM tile g (tq x nb, row-major, computed
 * in precision p): query rows [i0, i0 + tq) against chunk rows [j0, j0 +
 * nb), inside one TB sub-tile of the chunk.
 */
static int tile_select(cuda_backend *c, const xj_rows *b, const float *g,
		       int64_t i0, int tq, int64_t j0, int nb, xj_precision p,
		       xj_status *st)
{
	const xj_backend_cfg *cfg = &c->cfg;
	xj_metric m = cfg->metric;
	int64_t d = cfg->d, k = cfg->k, bfirst = b->first_row + j0;

	int kr, km;

	if (tile_scan(c, b, g, i0, tq, j0, nb, p, st) ||
	    cuda_kt_start(c, KT_RESCORE, c->stream, &kr, st) ||
	    rescore(tq, m, d, c->q + i0 * d, c->qq + i0, c->b + j0 * d,
		    c->bb + j0, bfirst, c->cand, c->ncand, XJ_CUDA_TB,
		    cfg->has_threshold, cfg->threshold_key, c->ekey + i0 * k,
		    c->eidx + i0 * k, c->ecount + i0, k, c->skey, c->ckey,
		    c->nvalid, c->stats, c->stream, st) ||
	    cuda_kt_stop(c, kr, c->stream, st) ||
	    cuda_kt_start(c, KT_MERGE, c->stream, &km, st) ||
	    sel_merge(tq, m, k, c->gate0, c->skey, c->ckey, c->nvalid,
		      XJ_CUDA_TB, bfirst, c->ekey + i0 * k, c->eidx + i0 * k,
		      c->ecount + i0, c->gate + i0, c->tkey, c->tidx,
		      c->stream, st) ||
	    cuda_kt_stop(c, km, c->stream, st))
		return st->code;
	return XJ_OK;
}

/* Query rows [i0, i0 + tq) against base chunk rows [j0, j0 + nb). */
static int topk_tile(cuda_backend *c, const xj_rows *b, int64_t i0, int tq,
		     int64_t j0, int nb, xj_status *st)
{
	xj_precision p;

	if (tile_gemm(c, i0, tq, j0, nb, &p, st))
		return st->code;
	return tile_select(c, b, c->g, i0, tq, j0, nb, p, st);
}

/* ---- top-k of a self-join: each pair of shared rows once ---------------- */

/*
 * A base chunk whose rows [b0, b0 + len) are also rows of the query chunk
 * (cfg.same_rows with cfg.self, the same global indices and the same
 * bits) is a self-join's: score(i, j) = score(j, i). As on the CPU
 * (cpu_topk_sym.c, whose file comment has the argument), the shared rows
 * are cut into blocks of SYM_BLOCK = TQ rows (selfjoin.h: the same blocks
 * and the same deal of pairs to parts as the CPU) and each block pair
 * a < b is one GEMM
 *
 *   D = alpha X_a X_b^T          na x nb, in c->g
 *   row tile     D               queries of a, base rows of b
 *   column tile  D^T             queries of b, base rows of a: an exact
 *                                copy (cublasSgeam, alpha 1, beta 0) in
 *                                c->g + SYM_BLOCK^2
 *
 * and both tiles go through tile_select as they are, the kernels
 * unchanged: sel_scan adds the base row's float squared norm to the
 * tile value, fn2[j] + D[r][j] in the row tile and fn2[r] + D[r][j] in
 * the column tile, each the float addition the plain tile of that query
 * and base row does, to the float dot product of the two rows scaled
 * exactly (the GEMM's own order, one of those metric_err_bound_prec()
 * bounds whichever row is the query: the bound is for any order of the
 * same products). The bound's base norm is the largest of the block's TB
 * sub-tile (a block never crosses a multiple of TB). A transposed -0
 * may read +0 if cuBLAS adds beta's term; fn2 >= 0 and the compare
 * cannot tell them apart. A pair then only enters a list through the
 * canonical rescoring of its own query against its own base row: the
 * lists have the plain path's bits. Diagonal blocks are one ordinary
 * tile; the other pairs (query rows outside the shared rows, shared rows
 * against the chunk's other rows) run the plain tiles.
 *
 * Every precision takes this path (the 16-bit copies of both sides are
 * the same rows rounded alike); the CPU's bf16 and int8 GEMMs do not.
 *
 * Costs: the GEMM of the shared rows drops from len^2 d to about
 * len^2 d / 2 (+ TQ len d for the diagonal); a transposed copy of each
 * off-diagonal tile (8 bytes per pair moved in device memory), and the
 * selection kernels run on TQ x TQ tiles instead of TQ x TB (more, shorter
 * launches: 8 per block pair).
 *
 * Parts (cfg.parts > 1): block pairs and diagonal blocks dealt as on the
 * CPU (selfjoin.h), the plain pairs split by query row.
 */
static_assert(SYM_BLOCK == XJ_CUDA_TQ,
	      "a self-join block is one tile's query rows");
static_assert(XJ_CUDA_TB % SYM_BLOCK == 0,
	      "a self-join block lies inside one base sub-tile");
static_assert(2 * SYM_BLOCK * SYM_BLOCK <= XJ_CUDA_TQ * XJ_CUDA_TB,
	      "a block pair's tile and its transpose share c->g");

/* What topk_add does with a base chunk (chunk row + off = query row). */
typedef struct sym_geom {
	int64_t qrows, brows, off;
	int64_t b0, len;        /* shared chunk rows; len 0: none */
	int64_t part, parts;
	int64_t step;           /* query rows per plain tile or pass */
} sym_geom;

/* One step of topk_add: query rows [i0, i0 + tq) against chunk rows [j0,
 * j0 + nb), one GEMM; a pair also scans the transposed tile: query rows
 * [j0 + off, + nb) against chunk rows [i0 - off, + tq). */
typedef struct sym_item {
	int pair;
	int64_t i0, j0;
	int tq, nb;
	int64_t off;
} sym_item;

typedef int (*sym_visit)(void *ctx, const sym_item *it, xj_status *st);

/*
 * The geometry of base chunk b against the query chunk (qx, qfirst, qrows:
 * host rows): shared rows when cfg asks for a self-join and at least
 * SYM_MIN_ROWS rows have the same global index and the same bits
 * (memcmp, as on the CPU: a --self over two copies of a file takes the
 * plain path).
 */
static void sym_geometry(const xj_backend_cfg *cfg, const float *qx,
			 int64_t qfirst, int64_t qrows, const xj_rows *b,
			 sym_geom *g)
{
	int64_t g0, g1, d = cfg->d;

	g->qrows = qrows;
	g->brows = b->rows;
	g->off = b->first_row - qfirst;
	g->b0 = 0;
	g->len = 0;
	g->part = cfg->parts > 1 ? cfg->part : 0;
	g->parts = cfg->parts > 1 ? cfg->parts : 1;
	g->step = XJ_CUDA_TQ;
	if (!cfg->self || !cfg->same_rows || !qx)
		return;
	sym_shared(qfirst, qrows, b->first_row, b->rows, &g0, &g1);
	if (g1 - g0 < SYM_MIN_ROWS ||
	    memcmp(qx + (g0 - qfirst) * d, b->x + (g0 - b->first_row) * d,
		   (size_t)((g1 - g0) * d) * sizeof(float)))
		return;
	g->b0 = g0 - b->first_row;
	g->len = g1 - g0;
}

/* Query rows [i0, i1) against chunk rows [jb, je), in tiles of step rows
 * and column pieces that do not cross a multiple of TB (submax is per TB
 * rows). */
static int sym_cols(int64_t i0, int64_t i1, int64_t jb, int64_t je,
		    int64_t step, sym_visit fn, void *ctx, xj_status *st)
{
	for (int64_t i = i0; i < i1; i += step)
		for (int64_t j = jb; j < je; ) {
			int64_t end = MIN64((j / XJ_CUDA_TB + 1) * XJ_CUDA_TB,
					    je);
			sym_item it = { 0, i, j, (int)MIN64(step, i1 - i),
					(int)(end - j), 0 };

			if (fn(ctx, &it, st))
				return st->code;
			j = end;
		}
	return XJ_OK;
}

/*
 * Every step of topk_add for geometry g, in order: the plain tiles of the
 * part's query rows, then for each block x its diagonal tile and its
 * pairs (x, y > x), those of the part. Without shared rows and parts,
 * the plain tiles are all step x TB tiles of the chunk.
 */
static int sym_walk(const sym_geom *g, sym_visit fn, void *ctx,
		    xj_status *st)
{
	int64_t q0 = g->len ? g->b0 + g->off : g->qrows, q1 = q0 + g->len;
	int64_t nblk = sym_block_count(g->b0, g->len);
	sym_plain_rows pr;

	sym_plain_rows_of(&pr, q0, q1, g->qrows, g->part, g->parts,
			  XJ_CUDA_TQ);
	for (int s = 0; s < 3; s++) {
		int64_t a = pr.seg[s][0], e = pr.seg[s][1];

		if (s != 1 ? sym_cols(a, e, 0, g->brows, g->step, fn, ctx,
				      st) :
			     sym_cols(a, e, 0, g->b0, g->step, fn, ctx, st) ||
			     sym_cols(a, e, g->b0 + g->len, g->brows, g->step,
				      fn, ctx, st))
			return st->code;
	}
	for (int64_t x = 0; x < nblk; x++) {
		int64_t sx, nx, sy, ny;

		sym_block_of(g->b0, g->len, x, &sx, &nx);
		if (sym_diag_mine(x, g->part, g->parts)) {
			sym_item it = { 0, sx + g->off, sx, (int)nx, (int)nx,
					0 };

			if (fn(ctx, &it, st))
				return st->code;
		}
		for (int64_t y = x + 1; y < nblk; y++) {
			if (!sym_pair_mine(x, y, nblk, g->part, g->parts))
				continue;
			sym_block_of(g->b0, g->len, y, &sy, &ny);
			sym_item it = { 1, sx + g->off, sy, (int)nx, (int)ny,
					g->off };

			if (fn(ctx, &it, st))
				return st->code;
		}
	}
	return XJ_OK;
}

/* Block pair it: one GEMM, the row tile and the transposed column tile
 * scanned (see above). */
static int sym_pair(cuda_backend *c, const xj_rows *b, const sym_item *it,
		    xj_status *st)
{
	xj_metric m = c->cfg.metric;
	int64_t d = c->cfg.d, sa = it->i0 - it->off, sb = it->j0;
	int na = it->tq, nb = it->nb;
	float alpha = xjc_is_sq(m) ? -2.0f : -1.0f, one = 1.0f, zero = 0.0f;
	xj_precision p = cuda_tile_prec(c);
	const float *x = m == XJ_METRIC_COSINE ? c->bhat : c->b;
	const void *xa = x + sa * d, *xb = x + sb * d;
	float *gt = c->g + (int64_t)SYM_BLOCK * SYM_BLOCK;
	int kt;

	if (p == XJ_PREC_BF16 || p == XJ_PREC_FP16) {
		xa = c->blow + sa * d;
		xb = c->blow + sb * d;
	}
	/* c->g = alpha X_a X_b^T, na x nb row-major */
	if (cuda_kt_start(c, KT_GEMM, c->stream, &kt, st) ||
	    cuda_gemm_run(c->blas, p, nb, na, d, alpha, xb, xa, c->g, st) ||
	    cuda_kt_stop(c, kt, c->stream, st) ||
	    tile_select(c, b, c->g, it->i0, na, sb, nb, p, st))
		return st->code;
	/* gt = c->g^T, nb x na row-major: column-major, c->g is nb x na
	 * (ld nb) and gt na x nb (ld na). alpha 1 and beta 0 transpose A
	 * (cuBLAS's documented special case); B = C is its in-place form. */
	if (cuda_kt_start(c, KT_TRANSPOSE, c->stream, &kt, st))
		return st->code;
	CUBLAS_CHECK(st, cublasSgeam(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, na, nb,
				     &one, c->g, nb, &zero, gt, na, gt, na));
	if (cuda_kt_stop(c, kt, c->stream, st))
		return st->code;
	return tile_select(c, b, gt, sb + it->off, nb, sa, na, p, st);
}

typedef struct add_ctx {
	cuda_backend *c;
	const xj_rows *b;
	double flops;
} add_ctx;

/* The plain pass gathered so far (rowsel), queued. */
static int pass_flush(cuda_backend *c, const xj_rows *b, xj_status *st)
{
	int nb = c->pend_nb;

	if (nb == 0)
		return XJ_OK;
	c->pend_nb = 0;
	return cuda_pass_plain(c, b, c->pend_i0, c->pend_tq, c->pend_j0, nb,
			       st);
}

/* rowsel: consecutive plain tiles of the same query rows go into one
 * pass of up to pass_cols chunk rows; a block pair is a pass of its own. */
static int pass_step(cuda_backend *c, const xj_rows *b, const sym_item *it,
		     xj_status *st)
{
	if (it->pair)
		return pass_flush(c, b, st) ||
		       cuda_pass_pair(c, b, it->i0, it->tq, it->j0, it->nb,
				      it->off, st) ? st->code : XJ_OK;
	if (c->pend_nb &&
	    (c->pend_i0 != it->i0 || c->pend_tq != it->tq ||
	     c->pend_j0 + c->pend_nb != it->j0 ||
	     c->pend_nb + it->nb > c->tune.pass_cols) &&
	    pass_flush(c, b, st))
		return st->code;
	if (c->pend_nb == 0) {
		c->pend_i0 = it->i0;
		c->pend_tq = it->tq;
		c->pend_j0 = it->j0;
	}
	c->pend_nb += it->nb;
	return XJ_OK;
}

static int add_step(void *ctx, const sym_item *it, xj_status *st)
{
	add_ctx *a = (add_ctx *)ctx;

	a->flops += 2.0 * it->tq * (double)it->nb * (double)a->c->cfg.d;
	if (a->c->tune.rowsel)
		return pass_step(a->c, a->b, it, st);
	if (it->pair)
		return sym_pair(a->c, a->b, it, st);
	return topk_tile(a->c, a->b, it->i0, it->tq, it->j0, it->nb, st);
}

/*
 * Stage, upload and prepare the base chunk b (the upload on the copy
 * stream, the rest queued on the compute stream behind it); its slot,
 * for cuda_base_done once its tiles are queued. Shared by top-k and the
 * range join.
 */
int cuda_base_load(cuda_backend *c, const xj_rows *b, int *slot,
		   xj_status *st)
{
	c->bmax16 = lowp_max_abs(c, b->x, b->rows);
	c->b_fp32 = !(c->bmax16 <= XJC_FP16_MAX);
	if (cuda_base_reserve(c, b->rows, st) || base_upload(c, b, slot, st) ||
	    base_prepare(c, b, st))
		return st->code;
	return XJ_OK;
}

int cuda_base_done(cuda_backend *c, int slot, xj_status *st)
{
	return base_consumed(c, slot, st);
}

/* XJ_CUDA_SYM=2's first walk: everything but the block pairs (the plain
 * tiles and every diagonal block). */
static int diag_step(void *ctx, const sym_item *it, xj_status *st)
{
	return it->pair ? XJ_OK : add_step(ctx, it, st);
}

/*
 * XJ_CUDA_SYM=2 (rowsel, one rank): the plain tiles and the diagonal
 * blocks first, so every shared row has its gate (k < SYM_BLOCK), then
 * each block's rows against the shared rows after it in passes read once
 * for both sides (cuda_pass_once): each pair of shared rows in one GEMM.
 */
static int once_walk(const sym_geom *g, add_ctx *a, xj_status *st)
{
	cuda_backend *c = a->c;
	int64_t nblk = sym_block_count(g->b0, g->len), end = g->b0 + g->len;
	int64_t w = cuda_once_cols(c);

	if (sym_walk(g, diag_step, a, st) || pass_flush(c, a->b, st))
		return st->code;
	for (int64_t x = 0; x < nblk; x++) {
		int64_t sx, nx;

		sym_block_of(g->b0, g->len, x, &sx, &nx);
		for (int64_t j = sx + nx; j < end; j += w) {
			int nb = (int)MIN64(w, end - j);

			a->flops += 2.0 * (double)nx * nb * (double)c->cfg.d;
			if (cuda_pass_once(c, a->b, sx + g->off, (int)nx, j, nb,
					   g->off, st))
				return st->code;
		}
	}
	return XJ_OK;
}

static int topk_add_run(cuda_backend *c, const xj_rows *b, xj_status *st)
{
	int64_t nq = c->qrows, nb = b->rows;
	add_ctx a = { c, b, 0 };
	sym_geom g;
	int slot = 0, once;

	if (!c->active)
		return xj_fail(st, XJ_EXIT_INTERNAL, "called before topk_begin");
	if (cuda_check_rows_arg(c, b, "base", st))
		return st->code;
	if (nb == 0 || nq == 0)
		return XJ_OK;
	CUDA_CHECK(st, cudaSetDevice(c->device));
	sym_geometry(&c->cfg, c->qx, c->qfirst, nq, b, &g);
	if (!c->tune.sym && g.parts == 1)
		g.len = 0;      /* the plain passes (XJ_CUDA_SYM) */
	once = c->tune.sym == 2 && c->once_cand && g.parts == 1 && g.len > 0;
	if (c->tune.rowsel)
		g.step = c->prows;      /* XJ_CUDA_PASS_ROWS */
	c->pend_nb = 0;
	if (cuda_base_load(c, b, &slot, st) ||
	    (c->tune.rowsel && cuda_pass_chunk(c, st)) ||
	    (once ? once_walk(&g, &a, st) : sym_walk(&g, add_step, &a, st)) ||
	    (c->tune.rowsel && pass_flush(c, b, st)) ||
	    cuda_base_done(c, slot, st))
		return st->code;
	c->be.gemm_flops += a.flops;
	return XJ_OK;
}

/* Queue the copy of the first n entries of the k-lists into key/idx. */
static int lists_to_host(cuda_backend *c, int64_t n, float *key,
			 int64_t *idx, xj_status *st)
{
	if (n <= 0)
		return XJ_OK;
	CUDA_CHECK(st, cudaMemcpyAsync(key, c->ekey, (size_t)n * sizeof(float),
				       cudaMemcpyDeviceToHost, c->stream));
	CUDA_CHECK(st, cudaMemcpyAsync(idx, c->eidx,
				       (size_t)n * sizeof(int64_t),
				       cudaMemcpyDeviceToHost, c->stream));
	return XJ_OK;
}

/* The selection's counters and the kernels' times, into c->be (waits
 * for the queued work). */
static int topk_account(cuda_backend *c, xj_status *st)
{
	unsigned long long h[4];

	CUDA_CHECK(st, cudaMemcpyAsync(h, c->stats, sizeof(h),
				       cudaMemcpyDeviceToHost, c->stream));
	CUDA_CHECK(st, cudaStreamSynchronize(c->stream));
	c->be.rescored_pairs = (double)h[0];
	c->be.rescore_undecided = (double)h[1];
	return cuda_kt_collect(c, st);
}

static int topk_end_run(cuda_backend *c, float *key, int64_t *idx,
			xj_status *st)
{
	int64_t n = c->qrows * c->cfg.k;
	unsigned long long bad = XJC_BAD_NONE;

	if (!c->active)
		return xj_fail(st, XJ_EXIT_INTERNAL, "called before topk_begin");
	CUDA_CHECK(st, cudaSetDevice(c->device));
	if (lists_to_host(c, n, key, idx, st))
		return st->code;
	CUDA_CHECK(st, cudaMemcpyAsync(&bad, &c->bad[1], sizeof(bad),
				       cudaMemcpyDeviceToHost, c->stream));
	CUDA_CHECK(st, cudaStreamSynchronize(c->stream));
	c->active = 0;
	if (topk_account(c, st))
		return st->code;
	if (bad != XJC_BAD_NONE)
		return cuda_flag_bad(bad, st);
	return XJ_OK;
}

/* ---- top-k merged across the grid row on the device ------------------- */

/* Receive buffers of the merge for n list entries (n / k lists). */
static int merge_reserve(cuda_backend *c, int64_t n, xj_status *st)
{
	int64_t lists = n / c->cfg.k + 1;

	if (n <= c->ralloc)
		return XJ_OK;
	CUDA_CHECK(st, cudaStreamSynchronize(c->stream));
	dev_free(&c->rkey);
	dev_free(&c->ridx);
	dev_free(&c->rvalid);
	c->ralloc = 0;
	if (dev_alloc(&c->rkey, n, "received k-lists", st) ||
	    dev_alloc(&c->ridx, n, "received k-lists", st) ||
	    dev_alloc(&c->rvalid, lists, "received list counts", st)) {
		dev_free(&c->rkey);
		dev_free(&c->ridx);
		dev_free(&c->rvalid);
		return st->code;
	}
	c->ralloc = n;
	return XJ_OK;
}

/* Everything this rank must do before the exchange: the chunk's work
 * done (its base-row flag in *bad), room for nrecv received entries. */
static int merged_prepare(cuda_backend *c, int64_t nrecv,
			  unsigned long long *bad, xj_status *st)
{
	CUDA_CHECK(st, cudaSetDevice(c->device));
	CUDA_CHECK(st, cudaMemcpyAsync(bad, &c->bad[1], sizeof(*bad),
				       cudaMemcpyDeviceToHost, c->stream));
	CUDA_CHECK(st, cudaStreamSynchronize(c->stream));
	return merge_reserve(c, nrecv, st);
}

/* The received lists merged into ekey/eidx (whose own lists were sent
 * and are no longer needed), copied to key/idx. */
static int merged_finish(cuda_backend *c, int p, int64_t myrows, float *key,
			 int64_t *idx, xj_status *st)
{
	int64_t k = c->cfg.k, n = myrows * k;

	if (merge_lists(p, myrows, k, c->rkey, c->ridx, c->rvalid, c->ekey,
			c->eidx, c->stream, st))
		return st->code;
	if (lists_to_host(c, n, key, idx, st))
		return st->code;
	CUDA_CHECK(st, cudaStreamSynchronize(c->stream));
	return XJ_OK;
}

/*
 * topk_end and exchange_topk_reduce_scatter in one, over a NCCL transport:
 * the same counts (exchange_topk_counts), the exchange on device buffers, the
 * merge of merge.cuh. Every rank of the row must take part in the
 * exchange: a base row flagged by the device is reported after it, and a
 * rank that cannot take part at all ends the job (nccl_transport_abandon)
 * rather than leave its peers waiting for the timeout.
 */
static int topk_end_merged_run(cuda_backend *c, const xj_transport *t,
			       float *key, int64_t *idx, int64_t *out_row0,
			       int64_t *out_rows, xj_status *st)
{
	int64_t k = c->cfg.k, rows = c->qrows, my0, myrows, *cnt;
	unsigned long long bad = XJC_BAD_NONE;
	int p = t->size, rc;

	*out_row0 = 0;
	*out_rows = 0;
	if (!c->active)
		return xj_fail(st, XJ_EXIT_INTERNAL, "called before topk_begin");
	if (!nccl_transport_is(t))
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "needs the NCCL transport, not '%s'",
			       t->name ? t->name : "?");
	c->active = 0;
	split_block(rows, p, t->rank, &my0, &myrows);
	cnt = (int64_t *)calloc(4 * (size_t)p, sizeof(int64_t));
	if (!cnt) {
		xj_fail(st, XJ_EXIT_RESOURCE, "out of memory (%d counts)", p);
		return nccl_transport_abandon(t, st);
	}
	exchange_topk_counts(rows, k, p, t->rank, cnt);
	if (merged_prepare(c, (int64_t)p * myrows * k, &bad, st)) {
		free(cnt);
		return nccl_transport_abandon(t, st);
	}
	if (topk_account(c, st)) {
		free(cnt);
		return nccl_transport_abandon(t, st);
	}
	rc = t->alltoallv(t, XJ_T_F32, c->ekey, cnt, cnt + p, c->rkey,
			  cnt + 2 * p, cnt + 3 * p, st);
	if (!rc)
		rc = t->alltoallv(t, XJ_T_I64, c->eidx, cnt, cnt + p, c->ridx,
				  cnt + 2 * p, cnt + 3 * p, st);
	free(cnt);
	if (rc || merged_finish(c, p, myrows, key, idx, st))
		return st->code;
	*out_row0 = my0;
	*out_rows = myrows;
	if (bad != XJC_BAD_NONE)
		return cuda_flag_bad(bad, st);
	return XJ_OK;
}

/* ---- entry points ------------------------------------------------------ */

int cuda_topk_begin(xj_backend *be, const xj_rows *q, xj_status *st)
{
	int rc = topk_begin_run(cuda_of(be), q, st);

	return rc ? cuda_entry_fail(cuda_of(be), rc, "topk_begin", st) : XJ_OK;
}

/* A failed add may leave tiles queued that no consumed event covers:
 * drain both streams, so no later upload can overwrite what they read. */
int cuda_topk_add(xj_backend *be, const xj_rows *b, xj_status *st)
{
	cuda_backend *c = cuda_of(be);
	int rc = topk_add_run(c, b, st);

	if (!rc)
		return XJ_OK;
	(void)cudaStreamSynchronize(c->stream);
	(void)cudaStreamSynchronize(c->cstream);
	if (c->gstream)
		(void)cudaStreamSynchronize(c->gstream);
	return cuda_entry_fail(c, rc, "topk_add", st);
}

int cuda_topk_end(xj_backend *be, float *key, int64_t *idx, xj_status *st)
{
	int rc = topk_end_run(cuda_of(be), key, idx, st);

	return rc ? cuda_entry_fail(cuda_of(be), rc, "topk_end", st) : XJ_OK;
}

int cuda_topk_end_merged(xj_backend *be, const struct xj_transport *t,
			 float *key, int64_t *idx, int64_t *out_row0,
			 int64_t *out_rows, xj_status *st)
{
	int rc = topk_end_merged_run(cuda_of(be), t, key, idx, out_row0,
				     out_rows, st);

	return rc ? cuda_entry_fail(cuda_of(be), rc, "topk_end_merged", st)
		  : XJ_OK;
}

/* ---- host builds of the device arithmetic (tests) ---------------------- */

extern "C" double backend_cuda_host_norm2(const float *x, int64_t d)
{
	return xjc_norm2(x, d);
}

extern "C" float backend_cuda_host_key(xj_metric m, const float *q,
				       const float *b, int64_t d, double qq,
				       double bb)
{
	return xjc_key((int)m, q, b, d, qq, bb);
}

extern "C" double backend_cuda_host_gate(xj_metric m, float key)
{
	return xjc_gate_approx((int)m, key);
}

extern "C" double backend_cuda_host_err_bound(xj_metric m, int64_t d,
					      double qnorm, double bnorm)
{
	return xjc_err_bound((int)m, d, qnorm, bnorm);
}

extern "C" float backend_cuda_host_threshold(xj_metric m, int64_t d,
					     double gate, double qq,
					     float qnorm, float bmax)
{
	return xjc_scan_threshold((int)m, d, gate, qq, qnorm, bmax,
				  XJ_PREC_FP32);
}

extern "C" float backend_cuda_host_threshold_prec(xj_metric m, int64_t d,
						  double gate, double qq,
						  float qnorm, float bmax,
						  xj_precision p)
{
	return xjc_scan_threshold((int)m, d, gate, qq, qnorm, bmax, (int)p);
}

extern "C" double backend_cuda_host_err_bound_prec(xj_metric m, int64_t d,
						   double qnorm, double bnorm,
						   xj_precision p)
{
	return xjc_err_bound_prec((int)m, d, qnorm, bnorm, (int)p);
}

extern "C" double backend_cuda_host_err_bound_tile16(xj_metric m, int64_t d,
						     double qnorm,
						     double bnorm,
						     double gunit)
{
	return xjc_err_bound_prec((int)m, d, qnorm, bnorm, XJ_PREC_FP16,
				  gunit);
}

extern "C" float backend_cuda_host_round(xj_precision p, float x)
{
	switch (p) {
	case XJ_PREC_BF16:
		return __bfloat162float(__float2bfloat16_rn(x));
	case XJ_PREC_FP16:
		return __half2float(__float2half_rn(x));
	default:
		return x;
	}
}

extern "C" int backend_cuda_host_fp16_fits(const float *x, int64_t n)
{
	return xjc_fp16_fits(x, n);
}

extern "C" float backend_cuda_host_max_abs(const float *x, int64_t n)
{
	return xjc_max_abs(x, n);
}

extern "C" int backend_cuda_host_merge_lists(int p, int64_t rows, int64_t k,
					     const float *key,
					     const int64_t *idx, float *okey,
					     int64_t *oidx)
{
	int64_t *nvalid = (int64_t *)malloc(sizeof(int64_t) *
					    (size_t)(rows * p + 1));

	if (!nvalid)
		return XJ_EXIT_RESOURCE;
	for (int64_t r = 0; r < rows; r++)
		for (int j = 0; j < p; j++)
			nvalid[r * p + j] = xjc_list_valid(
				idx + ((int64_t)j * rows + r) * k, k);
	for (int64_t e = 0; e < rows * k; e++) {
		okey[e] = INFINITY;
		oidx[e] = -1;
	}
	for (int64_t r = 0; r < rows; r++) {
		merge_lists_view v = { key, idx, nvalid + r * p, rows, k, r, p };

		for (int j = 0; j < p; j++)
			for (int64_t e = 0; e < v.nvalid[j]; e++) {
				int64_t o = xjc_merged_position(v, j, e);

				if (o < k) {
					okey[r * k + o] = v.list(j).key_at(e);
					oidx[r * k + o] = v.list(j).idx_at(e);
				}
			}
	}
	free(nvalid);
	return XJ_OK;
}

extern "C" uint64_t backend_cuda_host_sortkey(float key, uint32_t col)
{
	return xjc_sortkey(key, col);
}

extern "C" int64_t backend_cuda_host_merge(const float *akey,
					   const int64_t *aidx, int64_t na,
					   const uint64_t *skey,
					   const float *ckey, int64_t nb,
					   int64_t bfirst, int64_t k,
					   float *okey, int64_t *oidx)
{
	sel_list_view a = { akey, aidx };
	sel_cand_view b = { skey, ckey, bfirst };
	int64_t nout = MIN64(k, na + nb);
	int64_t keep = nb > 0 ? xjc_count_before(a, na, b.key_at(0),
						 b.idx_at(0)) : na;

	for (int64_t p = 0; p < keep && p < nout; p++) {
		okey[p] = akey[p];
		oidx[p] = aidx[p];
	}
	if (nb > 0)
		xjc_merge_part(a, na, b, nb, keep, k, okey, oidx, 0, 1);
	return nout;
}

typedef struct steps_ctx {
	int64_t *out, cap, n;
} steps_ctx;

static int steps_record(void *ctx, const sym_item *it, xj_status *st)
{
	steps_ctx *a = (steps_ctx *)ctx;
	int64_t *o = a->out + 6 * a->n;

	(void)st;
	if (a->n++ >= a->cap)
		return XJ_OK;
	o[0] = it->pair;
	o[1] = it->i0;
	o[2] = it->tq;
	o[3] = it->j0;
	o[4] = it->nb;
	o[5] = it->off;
	return XJ_OK;
}

extern "C" int64_t backend_cuda_host_topk_steps(const xj_backend_cfg *cfg,
						const float *qx,
						int64_t qfirst, int64_t qrows,
						const xj_rows *b,
						int64_t *steps, int64_t cap)
{
	steps_ctx a = { steps, cap, 0 };
	sym_geom g;
	xj_status st;

	xj_ok(&st);
	if (qrows <= 0 || b->rows <= 0)
		return 0;
	sym_geometry(cfg, qx, qfirst, qrows, b, &g);
	(void)sym_walk(&g, steps_record, &a, &st);
	return a.n;
}

/* ---- device pieces on their own (gpu tests) ----------------------------- */

/* Device buffers of the test entry points, freed in one place. */
typedef struct test_bufs {
	float *q, *b, *g, *key, *okey;
	uint16_t *ql, *bl;
	int64_t *idx, *oidx, *nvalid;
	cudaStream_t s;
	cublasHandle_t h;
} test_bufs;

static void test_bufs_free(test_bufs *t)
{
	dev_free(&t->q);
	dev_free(&t->b);
	dev_free(&t->g);
	dev_free(&t->key);
	dev_free(&t->okey);
	dev_free(&t->ql);
	dev_free(&t->bl);
	dev_free(&t->idx);
	dev_free(&t->oidx);
	dev_free(&t->nvalid);
	if (t->h)
		(void)cublasDestroy(t->h);
	if (t->s)
		(void)cudaStreamDestroy(t->s);
	(void)cudaGetLastError();
}

static int test_gemm_run(int device, xj_precision p, const float *q,
			 int64_t nq, const float *b, int64_t nb, int64_t d,
			 float alpha, int out16, float *g, test_bufs *t,
			 xj_status *st)
{
	int lowp = p == XJ_PREC_BF16 || p == XJ_PREC_FP16;
	const void *a = NULL, *bq = NULL;

	if (nq < 1 || nb < 1 || d < 1 || nq > INT32_MAX || nb > INT32_MAX ||
	    d > INT32_MAX)
		return xj_fail(st, XJ_EXIT_INTERNAL, "test gemm: %lld x %lld x %lld",
			       (long long)nq, (long long)nb, (long long)d);
	if (p == XJ_PREC_FP16 &&
	    (!xjc_fp16_fits(q, nq * d) || !xjc_fp16_fits(b, nb * d)))
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "test gemm: values beyond fp16 (the backend runs such chunks in float32)");
	CUDA_CHECK(st, cudaSetDevice(device));
	CUDA_CHECK(st, cudaStreamCreateWithFlags(&t->s, cudaStreamNonBlocking));
	CUBLAS_CHECK(st, cublasCreate(&t->h));
	CUBLAS_CHECK(st, cublasSetStream(t->h, t->s));
	CUBLAS_CHECK(st, cublasSetMathMode(t->h, XJ_CUBLAS_MATH));
	if (dev_alloc(&t->q, nq * d, "test rows", st) ||
	    dev_alloc(&t->b, nb * d, "test rows", st) ||
	    dev_alloc(&t->g, nq * nb, "test tile", st) ||
	    (lowp && (dev_alloc(&t->ql, nq * d, "test rows", st) ||
		      dev_alloc(&t->bl, nb * d, "test rows", st))))
		return st->code;
	CUDA_CHECK(st, cudaMemcpyAsync(t->q, q, (size_t)(nq * d) * sizeof(float),
				       cudaMemcpyHostToDevice, t->s));
	CUDA_CHECK(st, cudaMemcpyAsync(t->b, b, (size_t)(nb * d) * sizeof(float),
				       cudaMemcpyHostToDevice, t->s));
	a = t->b;
	bq = t->q;
	if (lowp) {
		if (prep_lowp(t->q, nq * d, p, t->ql, t->s, st) ||
		    prep_lowp(t->b, nb * d, p, t->bl, t->s, st))
			return st->code;
		a = t->bl;
		bq = t->ql;
	}
	if (out16) {
		/* the halves into g's first half, widened from the end */
		__half *h = (__half *)g;

		if (p != XJ_PREC_FP16)
			return xj_fail(st, XJ_EXIT_INTERNAL,
				       "test gemm: a 16-bit tile is fp16's");
		if (cuda_gemm_run16(t->h, (int)nb, (int)nq, d, alpha, a, bq,
				    t->g, st))
			return st->code;
		CUDA_CHECK(st, cudaMemcpyAsync(h, t->g, (size_t)(nq * nb) *
					       sizeof(__half),
					       cudaMemcpyDeviceToHost, t->s));
		CUDA_CHECK(st, cudaStreamSynchronize(t->s));
		for (int64_t e = nq * nb - 1; e >= 0; e--)
			g[e] = __half2float(h[e]);
		return XJ_OK;
	}
	if (cuda_gemm_run(t->h, p, (int)nb, (int)nq, d, alpha, a, bq, t->g, st))
		return st->code;
	CUDA_CHECK(st, cudaMemcpyAsync(g, t->g, (size_t)(nq * nb) * sizeof(float),
				       cudaMemcpyDeviceToHost, t->s));
	CUDA_CHECK(st, cudaStreamSynchronize(t->s));
	return XJ_OK;
}

extern "C" int backend_cuda_test_gemm(int device, xj_precision p,
				      const float *q, int64_t nq,
				      const float *b, int64_t nb, int64_t d,
				      float alpha, float *g, xj_status *st)
{
	test_bufs t;
	int rc;

	memset(&t, 0, sizeof(t));
	rc = test_gemm_run(device, p, q, nq, b, nb, d, alpha, 0, g, &t, st);
	test_bufs_free(&t);
	return rc;
}

extern "C" int backend_cuda_test_gemm16(int device, const float *q,
					int64_t nq, const float *b, int64_t nb,
					int64_t d, float alpha, float *g,
					xj_status *st)
{
	test_bufs t;
	int rc;

	memset(&t, 0, sizeof(t));
	rc = test_gemm_run(device, XJ_PREC_FP16, q, nq, b, nb, d, alpha, 1, g,
			   &t, st);
	test_bufs_free(&t);
	return rc;
}

static int test_merge_run(int device, int p, int64_t rows, int64_t k,
			  const float *key, const int64_t *idx, float *okey,
			  int64_t *oidx, test_bufs *t, xj_status *st)
{
	int64_t n = (int64_t)p * rows * k;

	CUDA_CHECK(st, cudaSetDevice(device));
	CUDA_CHECK(st, cudaStreamCreateWithFlags(&t->s, cudaStreamNonBlocking));
	if (dev_alloc(&t->key, n, "test lists", st) ||
	    dev_alloc(&t->idx, n, "test lists", st) ||
	    dev_alloc(&t->okey, rows * k, "test lists", st) ||
	    dev_alloc(&t->oidx, rows * k, "test lists", st) ||
	    dev_alloc(&t->nvalid, rows * p + 1, "test counts", st))
		return st->code;
	if (n > 0) {
		CUDA_CHECK(st, cudaMemcpyAsync(t->key, key, (size_t)n * sizeof(float),
					       cudaMemcpyHostToDevice, t->s));
		CUDA_CHECK(st, cudaMemcpyAsync(t->idx, idx,
					       (size_t)n * sizeof(int64_t),
					       cudaMemcpyHostToDevice, t->s));
	}
	if (merge_lists(p, rows, k, t->key, t->idx, t->nvalid, t->okey, t->oidx,
			t->s, st))
		return st->code;
	if (rows * k > 0) {
		CUDA_CHECK(st, cudaMemcpyAsync(okey, t->okey,
					       (size_t)(rows * k) * sizeof(float),
					       cudaMemcpyDeviceToHost, t->s));
		CUDA_CHECK(st, cudaMemcpyAsync(oidx, t->oidx,
					       (size_t)(rows * k) * sizeof(int64_t),
					       cudaMemcpyDeviceToHost, t->s));
	}
	CUDA_CHECK(st, cudaStreamSynchronize(t->s));
	return XJ_OK;
}

extern "C" int backend_cuda_test_merge(int device, int p, int64_t rows,
				       int64_t k, const float *key,
				       const int64_t *idx, float *okey,
				       int64_t *oidx, xj_status *st)
{
	test_bufs t;
	int rc;

	memset(&t, 0, sizeof(t));
	rc = test_merge_run(device, p, rows, k, key, idx, okey, oidx, &t, st);
	test_bufs_free(&t);
	return rc;
}
