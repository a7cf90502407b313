/*
 * backend.h: the compute interface the driver sees. Two implementations:
 * CPU (BLAS + OpenMP, kernels/cpu/cpu_*.c) and CUDA (kernels/cuda/).
 *
 * defines: xj_backend, xj_backend_cfg, xj_rows, xj_ktime, XJ_KTIME_MAX,
 *          backend_cpu_create, backend_tile_bytes
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
 * For the matrix it computes blocks of canonical values (every value the
 * bits of metric_key(); how is the backend's: a double GEMM verified by
 * its error bound, metric.h), one queued at a
 * time, so that the caller writes block i while the backend computes
 * block i + 1:
 *
 *   out = be->block_alloc(be, n, st);        // pinned on the CUDA backend
 *   be->matrix_start(be, &q, &b, out, st);   // out: q.rows x b.rows
 *   ... write the block before, read the next rows ...
 *   be->matrix_wait(be, st);                 // out holds the block
 *
 * backend_matrix_block() does both at once. The driver takes two
 * buffers and writes block i - 1 while block i is computed (the CUDA
 * backend's streams, the CPU's worker thread for a large block);
 * matrix_async says the backend computes on the device.
 *
 * For the range join it collects every pair within the threshold of a
 * query chunk against everything streamed, each row sorted by (value,
 * base index), then hands them over in row order:
 *
 *   be->range_begin(be, &q, st);
 *   for each base chunk b: be->range_add(be, &b, st);
 *   be->range_end(be, count, st);           // count: q.rows pairs per row
 *   be->range_take(be, idx, val, st);       // sum(count) pairs, row order
 *
 * range_begin may be NULL: the backend offers no range join.
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
				* device across the base blocks); a
				* topk_begin with the last one's tag
				* continues its stream: the caller merges
				* the lists of both (the CPU's self-join
				* then skips pairs the first scored) */
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
	int part, parts;       /* parts > 1 (a split self-join, either
				* backend; kernels/selfjoin.h deals the
				* pairs): every rank gets the same chunks
				* and topk_add scores only share `part` of
				* their pairs; the lists of the parts,
				* merged, are the lists of all the pairs.
				* 0 or 1: all. */
	int threads;           /* 0: OpenMP default */
	int64_t shard_first, shard_rows;  /* the global base rows this rank
				* streams (a self-join scores the pairs of
				* query rows inside them once across its
				* chunks: kernels/cpu/cpu_topk_sym.c);
				* shard_rows 0: not known, not done */
	int64_t max_query_rows;  /* largest query chunk topk_begin will get */
	int64_t max_base_rows;   /* largest base chunk topk_add will get */
	xj_precision precision;  /* candidate GEMM (both backends; auto: the
				  * CPU resolves it, cpu_gemm.h) */
	int fp32_dnnl;         /* CPU fp32: oneDNN's matmul, not OpenBLAS */
	int range;             /* a range join will run: the CUDA backend
				* allocates its pair buffer at create (and
				* counts it in its work bytes); otherwise at
				* the first range_begin */
} xj_backend_cfg;

/* Device time of one class of kernels (the CUDA backend times its GEMMs,
 * selection kernels, copies, ... with events around each launch). */
#define XJ_KTIME_MAX 10
typedef struct xj_ktime {
	const char *name;      /* "gemm", "rowsel", ...: static strings */
	double ms;             /* summed over the calls so far */
	int64_t calls;
} xj_ktime;

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
	 * rows of q and b, and out, must be left alone until matrix_wait
	 * returns (the CPU reads the rows while it computes). One block at most is queued: a
	 * started block is waited for, whatever happens, before out is
	 * freed or another block starts. An error of the queued work comes
	 * from matrix_wait. */
	int (*matrix_start)(xj_backend *be, const xj_rows *q, const xj_rows *b,
			    float *out, xj_status *st);
	int (*matrix_wait)(xj_backend *be, xj_status *st);
	/* Host memory for n floats of matrix blocks (page-locked where the
	 * device copies into it); NULL with st set when it fails. */
	float *(*block_alloc)(xj_backend *be, int64_t n, xj_status *st);
	void (*block_free)(xj_backend *be, float *p);
	void (*release)(xj_backend *be);   /* frees be itself too */
	/* Range join (optional): the pairs with canonical key <= the
	 * threshold key, found by the GEMM under the error bound and kept
	 * by their canonical key alone. range_take writes output values
	 * (metric_key_to_value) and global base indices, row by row, each
	 * row in (key, index) order; the pairs stay with the backend until
	 * the next range_begin. */
	int (*range_begin)(xj_backend *be, const xj_rows *q, xj_status *st);
	int (*range_add)(xj_backend *be, const xj_rows *b, xj_status *st);
	int (*range_end)(xj_backend *be, int64_t *count, xj_status *st);
	int (*range_take)(xj_backend *be, int64_t *idx, float *val,
			  xj_status *st);
	int matrix_async;      /* matrix_start returns before the block is
				* done, and a second block buffer pays */
	double gemm_flops;     /* FLOPs done by GEMM so far (for the report) */
	double rescored_pairs; /* candidate pairs rescored so far */
	double rescore_seconds; /* of the compute's wall time, the part
				 * spent on candidates: pruning, rescoring
				 * and merging them (CPU top-k; 0 where not
				 * timed) */
	double rows_seconds;   /* of the compute's wall time, the part
				* spent preparing base rows (norms,
				* packing; CPU; 0 where not timed) */
	double rescore_undecided; /* of them, pairs a parallel sum's bound
				   * left to the canonical sum (CUDA) */
	xj_ktime ktime[XJ_KTIME_MAX];   /* device time by kernel class */
	int nktime;            /* 0: the backend does not time its kernels */
	const char *detail;    /* how it runs, for the report, or NULL
				* ("rowsel, pass 16384, pipeline, seed") */
	int64_t matrix_exact_pairs;  /* matrix pairs the GEMM's bound left
				      * undecided, computed canonically */
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
