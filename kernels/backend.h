/*
 * backend.h: the compute interface the driver sees. Two implementations:
 * CPU (BLAS + OpenMP, kernels/cpu_*.c) and CUDA (kernels/cuda/).
 *
 * defines: xj_backend, xj_backend_cfg, xj_rows, backend_cpu_create,
 *          backend_tile_bytes
 *
 * The driver does not know which backend runs. For top-k it feeds one query
 * chunk, then streams base chunks through it, then collects the exact
 * sorted top-k of that query chunk against everything streamed:
 *
 *   be->topk_begin(be, &q, st);          // q: query chunk, global rows
 *   for each base chunk b: be->topk_add(be, &b, st);
 *   be->topk_end(be, keys, idx, st);     // q.rows x k, sorted, padded
 *
 * With a device transport (NCCL), topk_end_merged replaces topk_end and
 * exchange_topk_reduce_scatter: the lists never leave the GPU before the merge.
 *
 * For the matrix it computes blocks of canonical values, one queued at a
 * time, so that the caller writes block i while the backend computes
 * block i + 1:
 *
 *   out = be->block_alloc(be, n, st);        // pinned on the CUDA backend
 *   be->matrix_start(be, &q, &b, out, st);   // out: q.rows x b.rows
 *   ... write the block before, read the next rows ...
 *   be->matrix_wait(be, st);                 // out holds the block
 *
 * backend_matrix_block() does both at once. Where matrix_start computes
 * the block itself (the CPU backend, matrix_async = 0) one buffer does:
 * the caller writes each block before it starts the next.
 *
 * All row data are float32, row-major, exactly as read from the input (the
 * backend makes its own normalised copies for cosine). Results are canonical
 * (metric.h), so every backend returns the same bits.
 */
#ifndef XJ_BACKEND_H
#define XJ_BACKEND_H

#include <stdint.h>

#include "../config/job.h"
#include "../config/status.h"

typedef struct xj_rows {
	const float *x;        /* rows x d, row-major */
	int64_t rows;          /* may be 0 */
	int64_t d;
	int64_t first_row;     /* global index of row 0 in its dataset */
	uint64_t tag;          /* 0, or a promise: rows passed again with the
				* same tag, first_row and rows hold the same
				* values, so a backend may keep its copy (the
				* CUDA matrix keeps the query block on the
				* device across the base blocks) */
} xj_rows;

typedef struct xj_backend_cfg {
	xj_metric metric;
	int64_t k;             /* top-k size (topk only) */
	int64_t d;
	int has_threshold;
	float threshold_key;   /* metric_value_to_key(threshold) */
	int self;              /* skip pairs with equal global index */
	int same_rows;         /* queries and base are the same rows: with
				* self, a backend may score each pair of
				* them once (a self-join) */
	int part, parts;       /* parts > 1 (self-joins on the CPU): every
				* rank gets the same chunks and topk_add
				* scores only share `part` of their pairs;
				* the lists of the parts, merged, are the
				* lists of all the pairs. 0 or 1: all. */
	int threads;           /* 0: OpenMP default */
	int64_t max_query_rows;  /* largest query chunk topk_begin will get */
	int64_t max_base_rows;   /* largest base chunk topk_add will get */
	xj_precision precision;  /* candidate GEMM (CUDA; the CPU ignores it) */
} xj_backend_cfg;

typedef struct xj_backend xj_backend;
struct xj_transport;
struct xj_backend {
	const char *name;      /* "cpu", "cuda" */
	int (*topk_begin)(xj_backend *be, const xj_rows *q, xj_status *st);
	int (*topk_add)(xj_backend *be, const xj_rows *b, xj_status *st);
	int (*topk_end)(xj_backend *be, float *key, int64_t *idx, xj_status *st);
	/* Optional (NULL: not offered): topk_end and the grid row's merge in
	 * one, for lists that stay on the device: as exchange_topk_reduce_scatter
	 * over t (a transport this backend accepts, e.g. NCCL's) on the
	 * chunk's lists, writing this rank's merged part to key/idx. */
	int (*topk_end_merged)(xj_backend *be, const struct xj_transport *t,
			       float *key, int64_t *idx, int64_t *out_row0,
			       int64_t *out_rows, xj_status *st);
	/* Queue the block q x b into out (q.rows x b.rows floats). The
	 * rows of q and b may be reused when it returns; out must be left
	 * alone until matrix_wait returns. One block at most is queued: a
	 * started block is waited for, whatever happens, before out is
	 * freed or another block starts. An error of the queued work comes
	 * from matrix_wait. The CPU backend computes the block here. */
	int (*matrix_start)(xj_backend *be, const xj_rows *q, const xj_rows *b,
			    float *out, xj_status *st);
	int (*matrix_wait)(xj_backend *be, xj_status *st);
	/* Host memory for n floats of matrix blocks (page-locked where the
	 * device copies into it); NULL with st set when it fails. */
	float *(*block_alloc)(xj_backend *be, int64_t n, xj_status *st);
	void (*block_free)(xj_backend *be, float *p);
	void (*release)(xj_backend *be);   /* frees be itself too */
	int matrix_async;      /* matrix_start returns before the block is
				* done (CUDA): worth a second block buffer */
	double gemm_flops;     /* FLOPs done by GEMM so far (for the report) */
};

/* One matrix block, computed when it returns. */
static inline int backend_matrix_block(xj_backend *be, const xj_rows *q,
				       const xj_rows *b, float *out,
				       xj_status *st)
{
	if (be->matrix_start(be, q, b, out, st))
		return st->code;
	return be->matrix_wait(be, st);
}

/* Create the CPU backend. Returns XJ_OK and *out, or an error. */
int backend_cpu_create(const xj_backend_cfg *cfg, xj_backend **out,
		       xj_status *st);

/* Bytes the CPU backend needs beyond the query/base chunks themselves, for
 * the planner's memory formula: per-thread GEMM tiles plus the selection
 * state of a query chunk of qrows rows. */
int64_t backend_cpu_work_bytes(const xj_backend_cfg *cfg, int64_t qrows,
			       int threads);

#endif
