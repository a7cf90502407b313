/*
 * backend_cuda.cu: the CUDA backend, float32 cuBLAS candidates +
 * canonical rescoring (top-k), canonical scores (matrix), on one GPU.
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
 * where CUBLAS_DEFAULT_MATH keeps float32 arithmetic as metric_err_bound()
 * assumes; tf32, bf16 or fp16 on tensor cores, with float32 accumulation
 * and metric_err_bound_prec()'s wider bound, bf16/fp16 reading 16-bit
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
 * Matrix: matrix.cuh computes TQ x TB tiles of canonical values into two
 * tile buffers in turn, on the compute stream; a copy stream moves each
 * finished tile (2-D) into the caller's block, pinned memory from
 * block_alloc, while the next tile is computed. Events order the pair: a
 * tile buffer is rewritten only after its copy is done. matrix_start
 * returns once the rows are checked and the tiles are queued, so the
 * caller writes the block before while this one is computed and copied;
 * matrix_wait waits for the copy stream.
 *
 * Errors: every CUDA and cuBLAS call is checked (check.cuh), every launch
 * too. Rows that fail metric_check_rows are flagged on the device; query
 * rows and matrix blocks are reported at once with the CPU's message,
 * base rows of topk_add by topk_end.
 */
#include "backend_cuda.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "nccl_transport.h"

extern "C" {
#include "../../config/split.h"
#include "../metric.h"
}

#include "canonical.cuh"
#include "check.cuh"
#include "matrix.cuh"
#include "merge.cuh"
#include "prep.cuh"
#include "rescore.cuh"
#include "select.cuh"

#ifndef XJ_CUDA_TQ
#define XJ_CUDA_TQ 512      /* query rows per tile */
#endif
#ifndef XJ_CUDA_TB
#define XJ_CUDA_TB 4096     /* base rows per tile (sub-tile of a chunk) */
#endif

static_assert(XJ_CUDA_TB <= SEL_SORT_CAP,
	      "a row's candidates of one tile must fit the block sort");
static_assert(XJ_CUDA_TB <= (int)XJC_COL_MASK + 1,
	      "a tile column must fit the sort key");
static_assert(XJ_CUDA_TQ >= 1 && XJ_CUDA_TQ <= 65535,
	      "tile rows: one block per row, grid.y of the matrix kernel");

#define MIN64(a, b) ((a) < (b) ? (a) : (b))

typedef struct cuda_backend {
	xj_backend be;          /* first: the driver sees this */
	xj_backend_cfg cfg;
	int device;
	int lowp;               /* bf16/fp16: GEMM on 16-bit copies */
	double gate0;           /* approx-space gate of the threshold */
	cudaStream_t stream;
	cublasHandle_t blas;

	/* query rows: the chunk of topk_begin or the block of matrix_start */
	int64_t qalloc;
	float *q;               /* qalloc x d, as given */
	float *qhat;            /* cosine: normalised in float */
	double *qq;             /* canonical squared norms */
	float *qnorm;           /* float norms (error bounds) */
	double *gate;           /* approx-space gate per query */
	float *ekey;            /* exact lists, qalloc x k, sorted, padded */
	int64_t *eidx;
	int64_t *ecount;        /* entries per list */
	uint16_t *qlow;         /* bf16/fp16 copy of the GEMM's query rows */
	int q_fp32;             /* fp16: this chunk needs the float32 GEMM */

	/* base rows */
	int64_t balloc;
	float *braw[2];         /* uploaded chunks, in turn */
	float *b;               /* the current chunk: braw[0] or braw[1] */
	float *bhat;
	double *bb;
	float *bn2;             /* float squared norms (l2 family) */
	float *bnorm;
	float *submax;          /* largest bnorm per TB sub-tile */
	uint16_t *blow;         /* bf16/fp16 copy of the GEMM's base rows */
	int b_fp32;             /* fp16: this chunk needs the float32 GEMM */
	float *stage[2];        /* pinned host, balloc x d */
	cudaEvent_t staged[2];  /* upload out of stage[s] into braw[s] done */
	cudaEvent_t consumed[2]; /* tiles reading braw[s] done */
	int next_stage;

	/* tile work */
	float *g;               /* TQ x TB: GEMM tile, matrix tile */
	float *g2;              /* TQ x TB: the matrix's second tile */
	cudaStream_t cstream;   /* copies: base uploads, matrix tiles out */
	cudaEvent_t tiled[2];   /* matrix tile in g / g2 computed */
	cudaEvent_t copied[2];  /* ... and copied out: buffer free */
	int mqueued;            /* a matrix block is queued */
	int *cand;              /* TQ x TB: scanned columns */
	int *ncand;             /* TQ */
	uint64_t *skey;         /* TQ x TB: rescored sort keys */
	float *ckey;            /* TQ x TB: rescored keys */
	int *nvalid;            /* TQ */
	float *tkey;            /* TQ x k: merge scratch */
	int64_t *tidx;
	unsigned long long *bad; /* [0] query rows, [1] base rows */

	/* the merge of topk_end_merged: received lists and their counts */
	int64_t ralloc;         /* entries */
	float *rkey;
	int64_t *ridx;
	int64_t *rvalid;        /* ralloc / k */

	int active;             /* between topk_begin and topk_end */
	int64_t qrows, qfirst;
} cuda_backend;

static cuda_backend *cuda_of(xj_backend *be)
{
	return (cuda_backend *)be;
}

/* a * b, or INT64_MAX when it overflows (an allocation that then fails) */
static int64_t mul_sat(int64_t a, int64_t b)
{
	if (a > 0 && b > INT64_MAX / a)
		return INT64_MAX;
	return a * b;
}

/* ---- memory ------------------------------------------------------------ */

static int alloc_fail(xj_status *st, cudaError_t e, int64_t bytes,
		      const char *kind, const char *what)
{
	(void)cudaGetLastError();
	return xj_fail(st, e == cudaErrorMemoryAllocation ? XJ_EXIT_RESOURCE
							  : XJ_EXIT_INTERNAL,
		       "cannot allocate %lld bytes of %s memory for %s (%s: %s)",
		       (long long)bytes, kind, what, cudaGetErrorName(e),
		       cudaGetErrorString(e));
}

/* n elements of device memory; NULL for n = 0. */
template <typename T>
static int dev_alloc(T **p, int64_t n, const char *what, xj_status *st)
{
	int64_t bytes = mul_sat(n, (int64_t)sizeof(T));
	void *v = NULL;
	cudaError_t e;

	*p = NULL;
	if (n <= 0)
		return XJ_OK;
	e = cudaMalloc(&v, (size_t)bytes);
	if (e != cudaSuccess)
		return alloc_fail(st, e, bytes, "device", what);
	*p = (T *)v;
	return XJ_OK;
}

template <typename T>
static void dev_free(T **p)
{
	if (*p)
		(void)cudaFree(*p);
	*p = NULL;
}

static int pinned_alloc(float **p, int64_t n, const char *what,
			xj_status *st)
{
	int64_t bytes = mul_sat(n, (int64_t)sizeof(float));
	void *v = NULL;
	cudaError_t e;

	*p = NULL;
	if (n <= 0)
		return XJ_OK;
	e = cudaHostAlloc(&v, (size_t)bytes, cudaHostAllocDefault);
	if (e != cudaSuccess)
		return alloc_fail(st, e, bytes, "pinned host", what);
	*p = (float *)v;
	return XJ_OK;
}

static void query_free(cuda_backend *c)
{
	dev_free(&c->q);
	dev_free(&c->qhat);
	dev_free(&c->qq);
	dev_free(&c->qnorm);
	dev_free(&c->gate);
	dev_free(&c->ekey);
	dev_free(&c->eidx);
	dev_free(&c->ecount);
	dev_free(&c->qlow);
	c->qalloc = 0;
}

/* Buffers for query chunks of up to rows rows; waits for queued work
 * before it frees smaller ones. */
static int query_reserve(cuda_backend *c, int64_t rows, xj_status *st)
{
	int64_t d = c->cfg.d, k = c->cfg.k > 0 ? c->cfg.k : 0;
	int cosine = c->cfg.metric == XJ_METRIC_COSINE;

	if (rows <= c->qalloc)
		return XJ_OK;
	CUDA_CHECK(st, cudaStreamSynchronize(c->stream));
	query_free(c);
	if (dev_alloc(&c->q, mul_sat(rows, d), "query rows", st) ||
	    (cosine && dev_alloc(&c->qhat, mul_sat(rows, d),
				 "normalised query rows", st)) ||
	    dev_alloc(&c->qq, rows, "query norms", st) ||
	    dev_alloc(&c->qnorm, rows, "query norms", st) ||
	    dev_alloc(&c->gate, rows, "query gates", st) ||
	    dev_alloc(&c->ekey, mul_sat(rows, k), "k-list keys", st) ||
	    dev_alloc(&c->eidx, mul_sat(rows, k), "k-list indices", st) ||
	    dev_alloc(&c->ecount, rows, "k-list counts", st) ||
	    (c->lowp && dev_alloc(&c->qlow, mul_sat(rows, d),
				  "16-bit query rows", st))) {
		query_free(c);
		return st->code;
	}
	c->qalloc = rows;
	return XJ_OK;
}

static void base_free(cuda_backend *c)
{
	dev_free(&c->braw[0]);
	dev_free(&c->braw[1]);
	c->b = NULL;
	dev_free(&c->bhat);
	dev_free(&c->bb);
	dev_free(&c->bn2);
	dev_free(&c->bnorm);
	dev_free(&c->submax);
	dev_free(&c->blow);
	for (int s = 0; s < 2; s++) {
		if (c->stage[s])
			(void)cudaFreeHost(c->stage[s]);
		c->stage[s] = NULL;
	}
	c->balloc = 0;
}

static int base_reserve(cuda_backend *c, int64_t rows, xj_status *st)
{
	int64_t d = c->cfg.d;
	int cosine = c->cfg.metric == XJ_METRIC_COSINE;

	if (rows <= c->balloc)
		return XJ_OK;
	CUDA_CHECK(st, cudaStreamSynchronize(c->stream));
	CUDA_CHECK(st, cudaStreamSynchronize(c->cstream));
	base_free(c);
	if (dev_alloc(&c->braw[0], mul_sat(rows, d), "base rows", st) ||
	    (c->cfg.k >= 1 &&   /* top-k only: a matrix uploads in place */
	     dev_alloc(&c->braw[1], mul_sat(rows, d), "base rows", st)) ||
	    (cosine && dev_alloc(&c->bhat, mul_sat(rows, d),
				 "normalised base rows", st)) ||
	    dev_alloc(&c->bb, rows, "base norms", st) ||
	    dev_alloc(&c->bn2, rows, "base norms", st) ||
	    dev_alloc(&c->bnorm, rows, "base norms", st) ||
	    dev_alloc(&c->submax, rows / XJ_CUDA_TB + 1, "sub-tile norms", st) ||
	    (c->lowp && dev_alloc(&c->blow, mul_sat(rows, d),
				  "16-bit base rows", st)) ||
	    pinned_alloc(&c->stage[0], mul_sat(rows, d), "base staging", st) ||
	    pinned_alloc(&c->stage[1], mul_sat(rows, d), "base staging", st)) {
		base_free(c);
		return st->code;
	}
	c->b = c->braw[0];
	c->balloc = rows;
	return XJ_OK;
}

static void work_free(cuda_backend *c)
{
	dev_free(&c->g);
	dev_free(&c->g2);
	dev_free(&c->cand);
	dev_free(&c->ncand);
	dev_free(&c->skey);
	dev_free(&c->ckey);
	dev_free(&c->nvalid);
	dev_free(&c->tkey);
	dev_free(&c->tidx);
	dev_free(&c->bad);
	dev_free(&c->rkey);
	dev_free(&c->ridx);
	dev_free(&c->rvalid);
	c->ralloc = 0;
}

static int work_alloc(cuda_backend *c, xj_status *st)
{
	int64_t tile = (int64_t)XJ_CUDA_TQ * XJ_CUDA_TB;
	int64_t k = c->cfg.k;

	if (dev_alloc(&c->g, tile, "the GEMM tile", st) ||
	    dev_alloc(&c->g2, tile, "the second matrix tile", st) ||
	    dev_alloc(&c->bad, 2, "row flags", st))
		return st->code;
	if (k < 1)          /* a matrix-only backend */
		return XJ_OK;
	if (dev_alloc(&c->cand, tile, "candidate slots", st) ||
	    dev_alloc(&c->ncand, XJ_CUDA_TQ, "candidate counts", st) ||
	    dev_alloc(&c->skey, tile, "candidate sort keys", st) ||
	    dev_alloc(&c->ckey, tile, "candidate keys", st) ||
	    dev_alloc(&c->nvalid, XJ_CUDA_TQ, "candidate counts", st) ||
	    dev_alloc(&c->tkey, mul_sat(XJ_CUDA_TQ, k), "merge scratch", st) ||
	    dev_alloc(&c->tidx, mul_sat(XJ_CUDA_TQ, k), "merge scratch", st))
		return st->code;
	return XJ_OK;
}

/* ---- rows ---------------------------------------------------------------- */

static int check_rows_arg(const cuda_backend *c, const xj_rows *r,
			  const char *what, xj_status *st)
{
	if (r->rows < 0 || r->d != c->cfg.d || (r->rows > 0 && !r->x))
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "%s chunk has %lld rows of dimension %lld, expected dimension %lld",
			       what, (long long)r->rows, (long long)r->d,
			       (long long)c->cfg.d);
	return XJ_OK;
}

/* The device flagged a row of r (still on the host): the CPU's check
 * names it with the CPU's message. */
static int rows_bad(const cuda_backend *c, const xj_rows *r, xj_status *st)
{
	if (metric_check_rows(c->cfg.metric, r->x, r->rows, c->cfg.d,
			      r->first_row, st))
		return st->code;
	return xj_fail(st, XJ_EXIT_INTERNAL,
		       "the device flags a row of %lld .. %lld that the host check accepts",
		       (long long)r->first_row,
		       (long long)(r->first_row + r->rows - 1));
}

/* A flag of prep_norms, for rows no longer on the host (same messages
 * as metric_check_rows). */
static int flag_bad(unsigned long long flag, xj_status *st)
{
	long long row = (long long)(flag >> 1);

	if (flag & 1)
		return xj_fail(st, XJ_EXIT_INPUT,
			       "row %lld: values too large (squared norm overflows float32)",
			       row);
	return xj_fail(st, XJ_EXIT_INPUT,
		       "row %lld is all zeros (cosine is undefined)", row);
}

static int flags_reset(cuda_backend *c, xj_status *st)
{
	CUDA_CHECK(st, cudaMemsetAsync(c->bad, 0xff, 2 * sizeof(*c->bad),
				       c->stream));
	return XJ_OK;
}

/* Copy the base chunk to the device through a pinned buffer, on the copy
 * stream; the compute stream waits for it. Returns its slot in *slot,
 * for base_consumed. (Events never recorded are complete.) */
static int base_upload(cuda_backend *c, const xj_rows *b, int *slot,
		       xj_status *st)
{
	int s = c->next_stage;
	size_t bytes = (size_t)(b->rows * c->cfg.d) * sizeof(float);

	CUDA_CHECK(st, cudaEventSynchronize(c->staged[s]));
	memcpy(c->stage[s], b->x, bytes);
	CUDA_CHECK(st, cudaStreamWaitEvent(c->cstream, c->consumed[s], 0));
	CUDA_CHECK(st, cudaMemcpyAsync(c->braw[s], c->stage[s], bytes,
				       cudaMemcpyHostToDevice, c->cstream));
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
 * Whether a chunk of rows (host copy x, n rows) must take the float32
 * GEMM although a 16-bit precision is set: fp16 holds no |x_i| > 65504
 * (metric.c). The normalised rows of cosine are within 1 + 2^-24 and
 * always fit; bf16 has float's range.
 */
static int lowp_needs_fp32(const cuda_backend *c, const float *x, int64_t n)
{
	if (!c->lowp || c->cfg.precision != XJ_PREC_FP16 ||
	    c->cfg.metric == XJ_METRIC_COSINE)
		return 0;
	return !xjc_fp16_fits(x, n * c->cfg.d);
}

/* Norms, the cosine copy, the sub-tile maxima and the 16-bit copy of the
 * base chunk (when its tiles use one). */
static int base_prepare(cuda_backend *c, const xj_rows *b, xj_status *st)
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
			st))
		return st->code;
	if (c->lowp && !c->q_fp32 && !c->b_fp32 &&
	    prep_lowp(cosine ? c->bhat : c->b, b->rows * c->cfg.d,
		      c->cfg.precision, c->blow, c->stream, st))
		return st->code;
	return XJ_OK;
}

/* ---- top-k ----------------------------------------------------------- */

static int topk_begin_run(cuda_backend *c, const xj_rows *q, xj_status *st)
{
	xj_metric m = c->cfg.metric;
	int64_t k = c->cfg.k, d = c->cfg.d, n = q->rows;
	unsigned long long bad = XJC_BAD_NONE;

	c->active = 0;
	if (k < 1)
		return xj_fail(st, XJ_EXIT_INTERNAL, "top-k with k = %lld",
			       (long long)k);
	if (c->mqueued)     /* its copies still read the tile buffers */
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "topk_begin with a matrix block queued");
	if (check_rows_arg(c, q, "query", st))
		return st->code;
	CUDA_CHECK(st, cudaSetDevice(c->device));
	if (query_reserve(c, n, st) || flags_reset(c, st))
		return st->code;
	if (n > 0) {
		CUDA_CHECK(st, cudaMemcpyAsync(c->q, q->x,
					       (size_t)(n * d) * sizeof(float),
					       cudaMemcpyHostToDevice,
					       c->stream));
		c->q_fp32 = lowp_needs_fp32(c, q->x, n);
		if (prep_norms(c->q, n, d, m, q->first_row, c->qq, NULL,
			       c->qnorm, &c->bad[0], c->stream, st) ||
		    (m == XJ_METRIC_COSINE &&
		     prep_hat(c->q, c->qq, n, d, c->qhat, c->stream, st)) ||
		    (c->lowp && !c->q_fp32 &&
		     prep_lowp(m == XJ_METRIC_COSINE ? c->qhat : c->q, n * d,
			       c->cfg.precision, c->qlow, c->stream, st)) ||
		    prep_fill_f32(c->ekey, n * k, INFINITY, c->stream, st) ||
		    prep_fill_f64(c->gate, n, c->gate0, c->stream, st))
			return st->code;
		/* all-ones bytes: index -1 (padding); zero counts */
		CUDA_CHECK(st, cudaMemsetAsync(c->eidx, 0xff,
					       (size_t)(n * k) * sizeof(int64_t),
					       c->stream));
		CUDA_CHECK(st, cudaMemsetAsync(c->ecount, 0,
					       (size_t)n * sizeof(int64_t),
					       c->stream));
		CUDA_CHECK(st, cudaMemcpyAsync(&bad, &c->bad[0], sizeof(bad),
					       cudaMemcpyDeviceToHost,
					       c->stream));
	}
	CUDA_CHECK(st, cudaStreamSynchronize(c->stream));
	if (bad != XJC_BAD_NONE)
		return rows_bad(c, q, st);
	c->qrows = n;
	c->qfirst = q->first_row;
	c->active = 1;
	return XJ_OK;
}

/*
 * g = alpha B A^T in the GEMM precision p: A (nb x d) base rows and B
 * (tq x d) query rows, both row-major, so g is tq x nb row-major, which
 * is column-major g^T = alpha A B^T (op(A) = T on the base rows, op(B) =
 * N on the query rows). a and b are float rows for fp32 and tf32, 16-bit
 * copies (prep_lowp) for bf16 and fp16. Accumulation is float32 in every
 * case: cublasSgemm under CUBLAS_DEFAULT_MATH (no tensor cores), tf32
 * tensor cores with CUBLAS_COMPUTE_32F_FAST_TF32, and CUBLAS_COMPUTE_32F
 * for 16-bit inputs (metric_err_bound_prec's model).
 */
static int gemm_run(cublasHandle_t h, xj_precision p, int nb, int tq,
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
	}
	return xj_fail(st, XJ_EXIT_INTERNAL, "gemm_run: precision %d",
		       (int)p);
}

/* Query rows [i0, i0 + tq) against base chunk rows [j0, j0 + nb). */
static int topk_tile(cuda_backend *c, const xj_rows *b, int64_t i0, int tq,
		     int64_t j0, int nb, xj_status *st)
{
	const xj_backend_cfg *cfg = &c->cfg;
	xj_metric m = cfg->metric;
	int64_t d = cfg->d, k = cfg->k, bfirst = b->first_row + j0;
	int cosine = m == XJ_METRIC_COSINE, sq = xjc_is_sq(m);
	const float *qa = cosine ? c->qhat : c->q;
	const float *ba = cosine ? c->bhat : c->b;
	float alpha = sq ? -2.0f : -1.0f;
	xj_precision p = cfg->precision;
	const void *ga = ba + j0 * d, *gb = qa + i0 * d;

	if (c->lowp && (c->q_fp32 || c->b_fp32))
		p = XJ_PREC_FP32;      /* fp16 cannot hold this chunk */
	if (p == XJ_PREC_BF16 || p == XJ_PREC_FP16) {
		ga = c->blow + j0 * d;
		gb = c->qlow + i0 * d;
	}
	if (gemm_run(c->blas, p, nb, tq, d, alpha, ga, gb, c->g, st))
		return st->code;
	if (sel_scan(c->g, tq, nb, sq ? c->bn2 + j0 : NULL, m, d,
		     c->gate + i0, c->qq + i0, c->qnorm + i0,
		     c->submax + j0 / XJ_CUDA_TB, p, cfg->self, c->qfirst + i0,
		     bfirst, c->cand, XJ_CUDA_TB, c->ncand, c->stream, st) ||
	    rescore(tq, m, d, c->q + i0 * d, c->qq + i0, c->b + j0 * d,
		    c->bb + j0, bfirst, c->cand, c->ncand, XJ_CUDA_TB,
		    cfg->has_threshold, cfg->threshold_key, c->ekey + i0 * k,
		    c->eidx + i0 * k, c->ecount + i0, k, c->skey, c->ckey,
		    c->nvalid, c->stream, st) ||
	    sel_merge(tq, m, k, c->gate0, c->skey, c->ckey, c->nvalid,
		      XJ_CUDA_TB, bfirst, c->ekey + i0 * k, c->eidx + i0 * k,
		      c->ecount + i0, c->gate + i0, c->tkey, c->tidx,
		      c->stream, st))
		return st->code;
	return XJ_OK;
}

static int topk_add_run(cuda_backend *c, const xj_rows *b, xj_status *st)
{
	int64_t nq = c->qrows, nb = b->rows;
	int slot = 0;

	if (!c->active)
		return xj_fail(st, XJ_EXIT_INTERNAL, "called before topk_begin");
	if (check_rows_arg(c, b, "base", st))
		return st->code;
	if (nb == 0 || nq == 0)
		return XJ_OK;
	CUDA_CHECK(st, cudaSetDevice(c->device));
	c->b_fp32 = lowp_needs_fp32(c, b->x, nb);
	if (base_reserve(c, nb, st) || base_upload(c, b, &slot, st) ||
	    base_prepare(c, b, st))
		return st->code;
	for (int64_t i0 = 0; i0 < nq; i0 += XJ_CUDA_TQ)
		for (int64_t j0 = 0; j0 < nb; j0 += XJ_CUDA_TB)
			if (topk_tile(c, b, i0, (int)MIN64(XJ_CUDA_TQ, nq - i0),
				      j0, (int)MIN64(XJ_CUDA_TB, nb - j0), st))
				return st->code;
	if (base_consumed(c, slot, st))
		return st->code;
	c->be.gemm_flops += 2.0 * (double)nq * (double)nb * (double)c->cfg.d;
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
	if (bad != XJC_BAD_NONE)
		return flag_bad(bad, st);
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
		return flag_bad(bad, st);
	return XJ_OK;
}

/* ---- matrix ------------------------------------------------------------ */

/* Tile t of the block into buffer t % 2, then its copy into out. */
static int matrix_tile_queue(cuda_backend *c, int64_t t, int64_t i0, int tq,
			     int64_t j0, int tb, int64_t nb, float *out,
			     xj_status *st)
{
	int s = (int)(t & 1);
	float *g = s ? c->g2 : c->g;
	int64_t d = c->cfg.d;

	/* an event never recorded is complete: the first two tiles pass */
	CUDA_CHECK(st, cudaStreamWaitEvent(c->stream, c->copied[s], 0));
	if (matrix_tile(c->cfg.metric, d, c->q + i0 * d, tq, c->qq + i0,
			c->b + j0 * d, tb, c->bb + j0, g, tb, c->stream, st))
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

	if (check_rows_arg(c, q, "query", st) ||
	    check_rows_arg(c, b, "base", st))
		return st->code;
	if (nq == 0 || nb == 0)
		return XJ_OK;
	if (c->active)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "matrix_start between topk_begin and topk_end");
	CUDA_CHECK(st, cudaSetDevice(c->device));
	if (query_reserve(c, nq, st) || base_reserve(c, nb, st) ||
	    flags_reset(c, st))
		return st->code;
	CUDA_CHECK(st, cudaMemcpyAsync(c->q, q->x, (size_t)(nq * d) * sizeof(float),
				       cudaMemcpyHostToDevice, c->stream));
	CUDA_CHECK(st, cudaMemcpyAsync(c->b, b->x, (size_t)(nb * d) * sizeof(float),
				       cudaMemcpyHostToDevice, c->stream));
	if (prep_norms(c->q, nq, d, m, q->first_row, c->qq, NULL, NULL,
		       &c->bad[0], c->stream, st) ||
	    prep_norms(c->b, nb, d, m, b->first_row, c->bb, NULL, NULL,
		       &c->bad[1], c->stream, st))
		return st->code;
	CUDA_CHECK(st, cudaMemcpyAsync(bad, c->bad, sizeof(bad),
				       cudaMemcpyDeviceToHost, c->stream));
	CUDA_CHECK(st, cudaStreamSynchronize(c->stream));
	if (bad[0] != XJC_BAD_NONE)
		return rows_bad(c, q, st);
	if (bad[1] != XJC_BAD_NONE)
		return rows_bad(c, b, st);
	c->mqueued = 1;
	for (int64_t i0 = 0, t = 0; i0 < nq; i0 += XJ_CUDA_TQ) {
		int tq = (int)MIN64(XJ_CUDA_TQ, nq - i0);

		for (int64_t j0 = 0; j0 < nb; j0 += XJ_CUDA_TB, t++)
			if (matrix_tile_queue(c, t, i0, tq, j0,
					      (int)MIN64(XJ_CUDA_TB, nb - j0),
					      nb, out, st))
				return st->code;
	}
	return XJ_OK;
}

/* Both streams idle: the queued block is in out. Both are waited for
 * even when the first wait fails, so nothing writes to out afterwards. */
static int matrix_wait_run(cuda_backend *c, xj_status *st)
{
	cudaError_t tiles, copies;

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
	return XJ_OK;
}

/* ---- entry points ------------------------------------------------------ */

/* Internal and resource errors name the backend and the call; input
 * errors keep the CPU's message, which names the row. */
static int entry_fail(const cuda_backend *c, int rc, const char *call,
		      xj_status *st)
{
	if (rc != XJ_EXIT_INPUT)
		xj_wrap(st, "cuda backend (device %d): %s", c->device, call);
	return rc;
}

static int cuda_topk_begin(xj_backend *be, const xj_rows *q, xj_status *st)
{
	int rc = topk_begin_run(cuda_of(be), q, st);

	return rc ? entry_fail(cuda_of(be), rc, "topk_begin", st) : XJ_OK;
}

/* A failed add may leave tiles queued that no consumed event covers:
 * drain both streams, so no later upload can overwrite what they read. */
static int cuda_topk_add(xj_backend *be, const xj_rows *b, xj_status *st)
{
	cuda_backend *c = cuda_of(be);
	int rc = topk_add_run(c, b, st);

	if (!rc)
		return XJ_OK;
	(void)cudaStreamSynchronize(c->stream);
	(void)cudaStreamSynchronize(c->cstream);
	return entry_fail(c, rc, "topk_add", st);
}

static int cuda_topk_end(xj_backend *be, float *key, int64_t *idx,
			 xj_status *st)
{
	int rc = topk_end_run(cuda_of(be), key, idx, st);

	return rc ? entry_fail(cuda_of(be), rc, "topk_end", st) : XJ_OK;
}

static int cuda_topk_end_merged(xj_backend *be, const struct xj_transport *t,
				float *key, int64_t *idx, int64_t *out_row0,
				int64_t *out_rows, xj_status *st)
{
	int rc = topk_end_merged_run(cuda_of(be), t, key, idx, out_row0,
				     out_rows, st);

	return rc ? entry_fail(cuda_of(be), rc, "topk_end_merged", st) : XJ_OK;
}

/* A failed start leaves nothing running that could still write to out. */
static int cuda_matrix_start(xj_backend *be, const xj_rows *q,
			     const xj_rows *b, float *out, xj_status *st)
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
	return entry_fail(c, rc, "matrix_start", st);
}

static int cuda_matrix_wait(xj_backend *be, xj_status *st)
{
	int rc = matrix_wait_run(cuda_of(be), st);

	return rc ? entry_fail(cuda_of(be), rc, "matrix_wait", st) : XJ_OK;
}

static float *cuda_block_alloc(xj_backend *be, int64_t n, xj_status *st)
{
	cuda_backend *c = cuda_of(be);
	float *p = NULL;
	cudaError_t e = cudaSetDevice(c->device);

	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		xj_fail(st, XJ_EXIT_INTERNAL, "cudaSetDevice(%d): %s",
			c->device, cudaGetErrorString(e));
	} else if (pinned_alloc(&p, n > 0 ? n : 1, "a matrix block", st)) {
		p = NULL;
	}
	if (!p)
		entry_fail(c, st->code, "block_alloc", st);
	return p;
}

static void cuda_block_free(xj_backend *be, float *p)
{
	if (!p)
		return;
	(void)cudaSetDevice(cuda_of(be)->device);
	(void)cudaFreeHost(p);
	(void)cudaGetLastError();
}

/* Frees everything, after the queued work (errors cannot be reported
 * here and are dropped). */
static void cuda_release(xj_backend *be)
{
	cuda_backend *c = cuda_of(be);

	if (!c)
		return;
	(void)cudaSetDevice(c->device);
	if (c->stream)
		(void)cudaStreamSynchronize(c->stream);
	if (c->cstream)
		(void)cudaStreamSynchronize(c->cstream);
	query_free(c);
	base_free(c);
	work_free(c);
	for (int s = 0; s < 2; s++) {
		if (c->staged[s])
			(void)cudaEventDestroy(c->staged[s]);
		if (c->consumed[s])
			(void)cudaEventDestroy(c->consumed[s]);
		if (c->tiled[s])
			(void)cudaEventDestroy(c->tiled[s]);
		if (c->copied[s])
			(void)cudaEventDestroy(c->copied[s]);
	}
	if (c->cstream)
		(void)cudaStreamDestroy(c->cstream);
	if (c->blas)
		(void)cublasDestroy(c->blas);
	if (c->stream)
		(void)cudaStreamDestroy(c->stream);
	(void)cudaGetLastError();
	free(c);
}

static int memory_check(const cuda_backend *c, double mem_fraction,
			xj_status *st)
{
	const xj_backend_cfg *cfg = &c->cfg;
	int64_t need = backend_cuda_work_bytes(cfg, cfg->max_query_rows,
					       cfg->max_base_rows);
	size_t free_bytes = 0, total_bytes = 0;

	CUDA_CHECK(st, cudaMemGetInfo(&free_bytes, &total_bytes));
	if ((double)need > mem_fraction * (double)free_bytes)
		return xj_fail(st, XJ_EXIT_RESOURCE,
			       "%lld query and %lld base rows per chunk need %.3f GiB of device memory; %.0f%% of the %.3f GiB free is %.3f GiB",
			       (long long)cfg->max_query_rows,
			       (long long)cfg->max_base_rows,
			       (double)need / (1 << 30), mem_fraction * 100,
			       (double)free_bytes / (1 << 30),
			       mem_fraction * (double)free_bytes / (1 << 30));
	return XJ_OK;
}

static int cuda_setup(cuda_backend *c, double mem_fraction, xj_status *st)
{
	CUDA_CHECK(st, cudaSetDevice(c->device));
	CUDA_CHECK(st, cudaStreamCreateWithFlags(&c->stream,
						 cudaStreamNonBlocking));
	CUDA_CHECK(st, cudaStreamCreateWithFlags(&c->cstream,
						 cudaStreamNonBlocking));
	for (int s = 0; s < 2; s++) {
		CUDA_CHECK(st, cudaEventCreateWithFlags(&c->staged[s],
							cudaEventDisableTiming));
		CUDA_CHECK(st, cudaEventCreateWithFlags(&c->consumed[s],
							cudaEventDisableTiming));
		CUDA_CHECK(st, cudaEventCreateWithFlags(&c->tiled[s],
							cudaEventDisableTiming));
		CUDA_CHECK(st, cudaEventCreateWithFlags(&c->copied[s],
							cudaEventDisableTiming));
	}
	CUBLAS_CHECK(st, cublasCreate(&c->blas));
	CUBLAS_CHECK(st, cublasSetStream(c->blas, c->stream));
	/* float32 arithmetic for cublasSgemm (no TF32 or BF16x9 emulation):
	 * the GEMM error bound of metric.h assumes it; the other precisions
	 * name their compute type in cublasGemmEx */
	CUBLAS_CHECK(st, cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH));
	if (memory_check(c, mem_fraction, st) || work_alloc(c, st) ||
	    query_reserve(c, c->cfg.max_query_rows, st) ||
	    base_reserve(c, c->cfg.max_base_rows, st))
		return st->code;
	return XJ_OK;
}

extern "C" int backend_cuda_create(const xj_backend_cfg *cfg, int device,
				   double mem_fraction, xj_backend **out,
				   xj_status *st)
{
	cuda_backend *c;
	int rc;

	*out = NULL;
	if (cfg->d < 1 || cfg->k < 0 || cfg->max_query_rows < 0 ||
	    cfg->max_base_rows < 0 || !(mem_fraction > 0 && mem_fraction <= 1))
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "cuda backend: bad configuration (d = %lld, k = %lld, chunks of %lld and %lld rows, memory fraction %g)",
			       (long long)cfg->d, (long long)cfg->k,
			       (long long)cfg->max_query_rows,
			       (long long)cfg->max_base_rows, mem_fraction);
	if (cfg->d > INT32_MAX)
		return xj_fail(st, XJ_EXIT_INPUT,
			       "cuda backend: dimension %lld exceeds the cuBLAS limit",
			       (long long)cfg->d);
	if (cfg->precision < XJ_PREC_FP32 || cfg->precision > XJ_PREC_FP16)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "cuda backend: unknown precision %d",
			       (int)cfg->precision);
	c = (cuda_backend *)calloc(1, sizeof(*c));
	if (!c)
		return xj_fail(st, XJ_EXIT_RESOURCE,
			       "cuda backend: cannot allocate %zu bytes",
			       sizeof(*c));
	c->cfg = *cfg;
	c->device = device;
	c->lowp = cfg->precision == XJ_PREC_BF16 ||
		  cfg->precision == XJ_PREC_FP16;
	c->gate0 = cfg->has_threshold ?
		   metric_gate_approx(cfg->metric, cfg->threshold_key) : INFINITY;
	c->be.name = "cuda";
	c->be.topk_begin = cuda_topk_begin;
	c->be.topk_add = cuda_topk_add;
	c->be.topk_end = cuda_topk_end;
	c->be.topk_end_merged = cuda_topk_end_merged;
	c->be.matrix_start = cuda_matrix_start;
	c->be.matrix_wait = cuda_matrix_wait;
	c->be.block_alloc = cuda_block_alloc;
	c->be.block_free = cuda_block_free;
	c->be.matrix_async = 1;
	c->be.release = cuda_release;
	c->be.gemm_flops = 0;
	rc = cuda_setup(c, mem_fraction, st);
	if (rc) {
		cuda_release(&c->be);
		xj_wrap(st, "cuda backend (device %d)", device);
		return rc;
	}
	*out = &c->be;
	return XJ_OK;
}

extern "C" int64_t backend_cuda_work_bytes(const xj_backend_cfg *cfg,
					   int64_t qrows, int64_t brows)
{
	double d = (double)cfg->d, k = cfg->k > 0 ? (double)cfg->k : 0;
	double cos_row = cfg->metric == XJ_METRIC_COSINE ? 4 * d : 0;
	double low_row = cfg->precision == XJ_PREC_BF16 ||
			 cfg->precision == XJ_PREC_FP16 ? 2 * d : 0;
	double tile = (double)XJ_CUDA_TQ * XJ_CUDA_TB;
	double per_q = 4 * d + cos_row + low_row + 28 + 12 * k;
	double per_b = (k >= 1 ? 8 : 4) * d + cos_row + low_row + 16;
	double fixed = tile * 8 + 16 + 4 * (double)(brows / XJ_CUDA_TB + 1);
	double total;

	if (k >= 1)
		fixed += tile * 16 + XJ_CUDA_TQ * 8.0 + XJ_CUDA_TQ * k * 12;
	total = (double)qrows * per_q + (double)brows * per_b + fixed;
	return total >= 0x1p62 ? INT64_MAX : (int64_t)total;
}

extern "C" int64_t backend_cuda_merge_bytes(const xj_backend_cfg *cfg,
					    int64_t qrows, int pc)
{
	double k = cfg->k > 0 ? (double)cfg->k : 0;
	double lists = (double)qrows + (pc > 1 ? pc : 0);
	double total = pc > 1 && k >= 1 ? lists * (12 * k + 8) : 0;

	return total >= 0x1p62 ? INT64_MAX : (int64_t)total;
}

extern "C" int64_t backend_cuda_pinned_bytes(const xj_backend_cfg *cfg,
					     int64_t brows)
{
	return mul_sat(mul_sat(brows, cfg->d), 2 * (int64_t)sizeof(float));
}

/* ---- devices ------------------------------------------------------------- */

static const char *cuda_why(cudaError_t e)
{
	switch (e) {
	case cudaErrorInsufficientDriver:
		return "no NVIDIA driver, or one older than the CUDA runtime";
	case cudaErrorNoDevice:
		return "no CUDA device visible";
	default:
		return "the CUDA runtime cannot start";
	}
}

extern "C" int backend_cuda_probe(int *ndevices, char *reason,
				  size_t reason_size)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	*ndevices = 0;
	if (reason_size)
		reason[0] = '\0';
	if (e != cudaSuccess) {
		snprintf(reason, reason_size, "%s (%s: %s)", cuda_why(e),
			 cudaGetErrorName(e), cudaGetErrorString(e));
		(void)cudaGetLastError();
		return XJ_OK;
	}
	if (n == 0) {
		snprintf(reason, reason_size, "no CUDA device visible");
		return XJ_OK;
	}
	/* kernels are built for compute capability 8.0 and 9.0 (+ PTX) */
	for (int dev = 0; dev < n; dev++) {
		int major = 0, minor = 0;

		e = cudaDeviceGetAttribute(&major,
					   cudaDevAttrComputeCapabilityMajor,
					   dev);
		if (e == cudaSuccess)
			e = cudaDeviceGetAttribute(&minor,
					cudaDevAttrComputeCapabilityMinor, dev);
		if (e != cudaSuccess) {
			snprintf(reason, reason_size,
				 "device %d: %s (%s: %s)", dev, cuda_why(e),
				 cudaGetErrorName(e), cudaGetErrorString(e));
			(void)cudaGetLastError();
			return XJ_OK;
		}
		if (major < 8) {
			snprintf(reason, reason_size,
				 "device %d has compute capability %d.%d; this build needs 8.0 or newer",
				 dev, major, minor);
			return XJ_OK;
		}
	}
	*ndevices = n;
	return XJ_OK;
}

extern "C" int backend_cuda_device_info(int device, char *line, size_t size)
{
	cudaDeviceProp p;
	char bus[64] = "?";
	size_t free_bytes = 0, total_bytes = 0;
	int prev = 0;
	cudaError_t e;

	e = cudaGetDeviceProperties(&p, device);
	if (e == cudaSuccess)
		e = cudaDeviceGetPCIBusId(bus, (int)sizeof(bus), device);
	if (e == cudaSuccess)
		e = cudaGetDevice(&prev);
	if (e == cudaSuccess)
		e = cudaSetDevice(device);
	if (e == cudaSuccess) {
		e = cudaMemGetInfo(&free_bytes, &total_bytes);
		(void)cudaSetDevice(prev);
	}
	if (e != cudaSuccess) {
		snprintf(line, size, "device %d: %s (%s)", device,
			 cudaGetErrorString(e), cudaGetErrorName(e));
		(void)cudaGetLastError();
		return XJ_EXIT_INTERNAL;
	}
	snprintf(line, size,
		 "[%s] %s, compute capability %d.%d, %.1f of %.1f GiB free",
		 bus, p.name, p.major, p.minor,
		 (double)free_bytes / (1 << 30), (double)total_bytes / (1 << 30));
	return XJ_OK;
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
			 float alpha, float *g, test_bufs *t, xj_status *st)
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
	CUBLAS_CHECK(st, cublasSetMathMode(t->h, CUBLAS_DEFAULT_MATH));
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
	if (gemm_run(t->h, p, (int)nb, (int)nq, d, alpha, a, bq, t->g, st))
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
	rc = test_gemm_run(device, p, q, nq, b, nb, d, alpha, g, &t, st);
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
