/*
 * backend_cuda_int.h: what the files of the CUDA backend share; private
 * to the .cu files of kernels/cuda (C++: app/ sees backend_cuda.h only).
 *
 * defines: XJ_CUDA_TQ, XJ_CUDA_TB, MIN64, XJC_BAD_NONE, cuda_tuning,
 *          cuda_ktimer, KT_*, cuda_backend,
 *          cuda_of, mul_sat, dev_alloc, dev_free, and declares the
 *          functions one file of the backend defines for another
 *          (cuda_ prefix)
 *
 *   backend_cuda.cu  the object: its buffers, create and release, the
 *                    memory formulas, the row checks of both paths,
 *                    devices
 *   topk_cuda.cu     top-k: topk_begin, topk_add, topk_end and
 *                    topk_end_merged, the tile kernels of
 *                    XJ_CUDA_SELECT=tile; the host builds and device
 *                    pieces the tests call
 *   topk_pass.cu     top-k's passes (XJ_CUDA_SELECT=rowsel, the default):
 *                    the GEMM of a pass on its stream into one of two
 *                    tile buffers, rowsel.cuh's kernel behind it; the
 *                    host run of that kernel for the tests
 *   matrix_cuda.cu   matrix blocks: matrix_start, matrix_wait, block
 *                    memory
 *   range_cuda.cu    range join: range_begin, range_add, range_end,
 *                    range_take (top-k's tiles and scan, its own rescoring
 *                    into a bounded pair buffer, the rows ordered on the
 *                    host); the host build of that ordering for the tests
 *
 * The kernel headers define their __global__ kernels outside templates, so
 * each can be compiled into one .cu only: a second one would define the
 * same symbols again, and relocatable device code (-rdc), which could
 * share them, changes the code generated. merge.cuh includes prep.cuh and
 * select.cuh, so topk_cuda.cu takes prep, select, rescore and merge (and
 * with them the tests' entry points to those pieces), matrix_cuda.cu takes
 * matrix, and the matrix reaches prep_norms through cuda_prep_norms.
 * canonical.cuh and check.cuh hold inline functions only and go anywhere.
 *
 * The helpers defined here are static inline or templates, which every
 * file needs in its own copy; they keep their names.
 */
#ifndef XJ_BACKEND_CUDA_INT_H
#define XJ_BACKEND_CUDA_INT_H

#include <cstdint>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "backend_cuda.h"

#ifndef XJ_CUDA_TQ
#define XJ_CUDA_TQ 512      /* query rows per tile */
#endif
#ifndef XJ_CUDA_TB
#define XJ_CUDA_TB 4096     /* base rows per tile (sub-tile of a chunk) */
#endif
#define XJ_CUDA_RS_ROWS 8   /* the most rows of a joint rowsel block
			     * (rowsel.cuh's RS_ROWS_MAX) */

static_assert(XJ_CUDA_TQ >= 1 && XJ_CUDA_TQ <= 65535,
	      "tile rows: one block per row, grid.y of the matrix kernel");

/* The matrix kernels' square of pairs (matrix.cuh's MAT_ROWS): one flag
 * per square of a tile. */
#define XJ_CUDA_SQ 32
#define XJ_CUDA_SQUARES (((int64_t)XJ_CUDA_TQ + XJ_CUDA_SQ - 1) / XJ_CUDA_SQ * \
			 (((int64_t)XJ_CUDA_TB + XJ_CUDA_SQ - 1) / XJ_CUDA_SQ))

#ifndef XJ_CUDA_RANGE_TILES
#define XJ_CUDA_RANGE_TILES 4   /* range pair buffer: tiles of pairs */
#endif

static_assert(XJ_CUDA_RANGE_TILES >= 1,
	      "the range pair buffer holds at least one tile's pairs");

#define MIN64(a, b) ((a) < (b) ? (a) : (b))

struct cuda_range;

/*
 * How top-k runs (backend_cuda.h lists the variables): the A/B switches
 * of one binary, read once from the environment.
 */
typedef struct cuda_tuning {
	int rowsel;             /* XJ_CUDA_SELECT: 1 rowsel, 0 tile */
	int pipeline;           /* XJ_CUDA_PIPELINE: GEMMs on their own
				 * stream, two tile buffers */
	int64_t pass_cols;      /* XJ_CUDA_PASS_COLS: base rows per pass,
				 * a multiple of XJ_CUDA_TB */
	int64_t pass_rows;      /* XJ_CUDA_PASS_ROWS: query rows per pass,
				 * a multiple of XJ_CUDA_TQ */
	int rs_blocks;          /* XJ_CUDA_RS_BLOCKS: rowsel's kernel built
				 * for at least 4 or 8 blocks an SM */
	int rs_rows;            /* XJ_CUDA_RS_ROWS: query rows a rowsel
				 * block, 1, 2, 4 or 8 (rowsel_rows) */
	int seed;               /* XJ_CUDA_SEED: gates seeded from G */
	int whole;              /* XJ_CUDA_SCAN: 1 pass, 0 sub */
	int tile16;             /* XJ_CUDA_TILE16: fp16 passes write a
				 * 16-bit tile */
	int fmin;               /* XJ_CUDA_FMIN: rowsel's pass-wide scan
				 * tests a column against its sub-tile's
				 * smallest fn2 before reading its own */
	int sym;                /* XJ_CUDA_SYM: 1 block pairs on one rank,
				 * 2 passes read once (once.cuh) */
	int timing;             /* XJ_CUDA_TIMING: events around kernels */
} cuda_tuning;

/* Reads and checks the variables (XJ_EXIT_USAGE naming a bad value). */
int cuda_tuning_get(cuda_tuning *t, xj_status *st);

/* Query rows of a pass for query chunks of up to qrows rows: rowsel's
 * pass_rows, no more than qrows rounded up to XJ_CUDA_TQ; XJ_CUDA_TQ for
 * the tile kernels. */
int64_t cuda_pass_rows(const cuda_tuning *t, int64_t qrows);

/* Kernel classes timed with events (xj_backend.ktime, in this order). */
enum {
	KT_GEMM, KT_ROWSEL, KT_SCAN, KT_RESCORE, KT_MERGE, KT_TRANSPOSE,
	KT_PREP, KT_UPLOAD, KT_NCLASS
};
#define KT_RING 256             /* event pairs in flight */

/* Event pairs around launches, read back (summed per class) when the
 * ring is full and at topk_end. */
typedef struct cuda_ktimer {
	int on;
	cudaEvent_t ev[KT_RING][2];
	int cls[KT_RING];
	int tail, n;            /* pending pairs: tail .. tail + n - 1 */
	double ms[KT_NCLASS];
	int64_t calls[KT_NCLASS];
} cuda_ktimer;

/* A row flag with no bad row, as prep.cuh defines it, for the files that
 * do not include prep.cuh; topk_cuda.cu includes both, so the compiler
 * sees any difference between the two. */
#define XJC_BAD_NONE (~0ull)

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
	float qmax16;           /* fp16: the largest |x_i| the GEMM reads */

	/* base rows */
	int64_t balloc;
	float *braw[2];         /* uploaded chunks, in turn */
	float *b;               /* the current chunk: braw[0] or braw[1] */
	float *bhat;
	double *bb;
	float *bn2;             /* float squared norms (l2 family) */
	float *bnorm;
	float *submax;          /* largest bnorm per TB sub-tile */
	float *subfmin;         /* smallest bn2 per TB sub-tile
				 * (XJ_CUDA_FMIN, l2 family) */
	uint16_t *blow;         /* bf16/fp16 copy of the GEMM's base rows */
	int b_fp32;             /* fp16: this chunk needs the float32 GEMM */
	float bmax16;           /* fp16: the largest |x_i| the GEMM reads */
	double *bd;             /* matrix-only backend: the base block in
				 * double (balloc x d), the double GEMM's */
	float *stage[2];        /* pinned host, balloc x d */
	cudaEvent_t staged[2];  /* upload out of stage[s] into braw[s] done */
	cudaEvent_t consumed[2]; /* tiles reading braw[s] done */
	int next_stage;

	/* tile work */
	float *g;               /* TQ x TB: GEMM tile, matrix tile */
	float *g2;              /* TQ x TB: the matrix's second tile */
	/* the matrix's double GEMM, on a matrix-only backend (k = 0; a
	 * backend for top-k computes matrix blocks canonically) */
	int dgemm;
	double *qd;             /* TQ x d: a query tile in double */
	double *gd;             /* TQ x TB: its dot products */
	int *sqflags;           /* undecided pairs per 32 x 32 square */
	unsigned long long *mdone; /* pairs computed canonically, this block */
	cudaStream_t cstream;   /* copies: base uploads, matrix tiles out */
	cudaEvent_t tiled[2];   /* matrix tile in g / g2 computed */
	cudaEvent_t copied[2];  /* ... and copied out: buffer free */
	int mqueued;            /* a matrix block is queued */
	uint64_t qtag;          /* c->q holds the checked query rows of this
				 * xj_rows tag (0: none) ... */
	int64_t qtag_first, qtag_rows;   /* ... at this first row, count */
	int *cand;              /* TQ x TB: scanned columns */
	int *ncand;             /* TQ */
	uint64_t *skey;         /* TQ x TB: rescored sort keys */
	float *ckey;            /* TQ x TB: rescored keys */
	int *nvalid;            /* TQ */
	float *tkey;            /* TQ x k: merge scratch */
	int64_t *tidx;
	int *once_cand;         /* XJ_CUDA_SYM=2: pass_cols x SYM_BLOCK
				 * column slots */
	int *once_n;            /* SYM_BLOCK + pass_cols kept counts */
	float *once_tcol;       /* pass_cols column thresholds */
	unsigned long long *bad; /* [0] query rows, [1] base rows */

	/* the merge of topk_end_merged: received lists and their counts */
	int64_t ralloc;         /* entries */
	float *rkey;
	int64_t *ridx;
	int64_t *rvalid;        /* ralloc / k */

	/* the range join (range_cuda.cu): pairs within the threshold,
	 * (key, row of the chunk, global base index), appended on the
	 * device in any order and drained to host blocks */
	int64_t pcap;           /* pairs the device buffer holds */
	float *pkey;
	int32_t *prow;
	int64_t *pidx;
	unsigned long long *pcount;  /* pairs in the buffer (device) */
	int64_t pbound;         /* an upper bound of *pcount (host) */
	struct cuda_range *range;    /* host blocks, the ordered rows */

	/* top-k's passes (topk_pass.cu) */
	cuda_tuning tune;
	char detail[128];        /* be.detail: the tuning in words */
	cudaStream_t gstream;   /* the passes' GEMMs (tune.pipeline) */
	cublasHandle_t gblas;   /* cuBLAS on gstream */
	int64_t prows;          /* query rows per pass (cuda_pass_rows) */
	float *gp[2];           /* prows x pass_cols: a pass's tile, in
				 * turn */
	cudaEvent_t gemm_done[2];   /* the GEMM into gp[s] done */
	cudaEvent_t sel_done[2];    /* the kernels reading gp[s] done */
	cudaEvent_t prep_done;  /* the chunk's norms and copies made */
	int next_gp;
	int64_t pend_i0, pend_j0;   /* a plain pass being gathered */
	int pend_tq, pend_nb;       /* pend_nb 0: none */
	unsigned long long *stats;  /* device: rowsel_args.stats's five */
	cuda_ktimer kt;

	int active;             /* between topk_begin and topk_end */
	int ractive;            /* between range_begin and range_end */
	int64_t qrows, qfirst;
	const float *qx;        /* the caller's query rows (host), which a
				 * self-join compares with a base chunk's:
				 * valid and unchanged until topk_end, as
				 * the CPU backend needs them too */
} cuda_backend;

static inline cuda_backend *cuda_of(xj_backend *be)
{
	return (cuda_backend *)be;
}

/* a * b, or INT64_MAX when it overflows (an allocation that then fails) */
static inline int64_t mul_sat(int64_t a, int64_t b)
{
	if (a > 0 && b > INT64_MAX / a)
		return INT64_MAX;
	return a * b;
}

/* ---- backend_cuda.cu ------------------------------------------------- */

int cuda_alloc_fail(xj_status *st, cudaError_t e, int64_t bytes,
		    const char *kind, const char *what);

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
		return cuda_alloc_fail(st, e, bytes, "device", what);
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

int cuda_pinned_alloc(float **p, int64_t n, const char *what,
		      xj_status *st);
int cuda_query_reserve(cuda_backend *c, int64_t rows, xj_status *st);
int cuda_base_reserve(cuda_backend *c, int64_t rows, xj_status *st);
int cuda_check_rows_arg(const cuda_backend *c, const xj_rows *r,
			const char *what, xj_status *st);
int cuda_rows_bad(const cuda_backend *c, const xj_rows *r, xj_status *st);
int cuda_flags_reset(cuda_backend *c, xj_status *st);
int cuda_entry_fail(const cuda_backend *c, int rc, const char *call,
		    xj_status *st);

/* Event pair around work queued on s for kernel class cls: start
 * returns its slot (-1 when timing is off) for stop. */
int cuda_kt_start(cuda_backend *c, int cls, cudaStream_t s, int *slot,
		  xj_status *st);
int cuda_kt_stop(cuda_backend *c, int slot, cudaStream_t s, xj_status *st);
/* Every pending pair read back into c->be.ktime (waits for them). */
int cuda_kt_collect(cuda_backend *c, xj_status *st);

/* ---- topk_cuda.cu ---------------------------------------------------- */

int cuda_gemm_run(cublasHandle_t h, xj_precision p, int nb, int tq,
		  int64_t d, float alpha, const void *a, const void *b,
		  float *g, xj_status *st);
/* The fp16 GEMM with fp16 output (the 16-bit tile, canonical.cuh). */
int cuda_gemm_run16(cublasHandle_t h, int nb, int tq, int64_t d, float alpha,
		    const void *a, const void *b, void *g, xj_status *st);
xj_precision cuda_tile_prec(const cuda_backend *c);

int cuda_prep_norms(const float *x, int64_t rows, int64_t d, xj_metric m,
		    int64_t first_row, double *n2, float *fn2, float *fnorm,
		    unsigned long long *bad, cudaStream_t s, xj_status *st);
int cuda_topk_begin(xj_backend *be, const xj_rows *q, xj_status *st);
int cuda_topk_add(xj_backend *be, const xj_rows *b, xj_status *st);
int cuda_topk_end(xj_backend *be, float *key, int64_t *idx, xj_status *st);
int cuda_topk_end_merged(xj_backend *be, const struct xj_transport *t,
			 float *key, int64_t *idx, int64_t *out_row0,
			 int64_t *out_rows, xj_status *st);

int cuda_query_load(cuda_backend *c, const xj_rows *q,
		    unsigned long long *bad, xj_status *st);
int cuda_base_load(cuda_backend *c, const xj_rows *b, int *slot,
		   xj_status *st);
int cuda_base_done(cuda_backend *c, int slot, xj_status *st);
int cuda_tile_scan(cuda_backend *c, const xj_rows *b, int64_t i0, int tq,
		   int64_t j0, int nb, xj_status *st);
int cuda_flag_bad(unsigned long long flag, xj_status *st);

/* ---- topk_pass.cu ---------------------------------------------------- */

/* The chunk's prepared rows are what the passes' GEMMs read. */
int cuda_pass_chunk(cuda_backend *c, xj_status *st);
/* Query rows [i0, i0 + tq) against chunk rows [j0, j0 + nb), one pass. */
int cuda_pass_plain(cuda_backend *c, const xj_rows *b, int64_t i0, int tq,
		    int64_t j0, int nb, xj_status *st);
/* A self-join's block pair: query rows [i0, i0 + na) (chunk rows i0 -
 * off ...) against chunk rows [j0, j0 + nb), and the transposed tile. */
int cuda_pass_pair(cuda_backend *c, const xj_rows *b, int64_t i0, int na,
		   int64_t j0, int nb, int64_t off, xj_status *st);
/* XJ_CUDA_SYM=2: the same rows against chunk rows [j0, j0 + nb), up to
 * cuda_once_cols of them, the tile read once for both sides (once.cuh). */
int cuda_pass_once(cuda_backend *c, const xj_rows *b, int64_t i0, int na,
		   int64_t j0, int nb, int64_t off, xj_status *st);
int64_t cuda_once_cols(const cuda_backend *c);

/* ---- range_cuda.cu --------------------------------------------------- */

int cuda_range_reserve(cuda_backend *c, xj_status *st);
void cuda_range_free(cuda_backend *c);
int cuda_range_begin(xj_backend *be, const xj_rows *q, xj_status *st);
int cuda_range_add(xj_backend *be, const xj_rows *b, xj_status *st);
int cuda_range_end(xj_backend *be, int64_t *count, xj_status *st);
int cuda_range_take(xj_backend *be, int64_t *idx, float *val,
		    xj_status *st);

/* ---- matrix_cuda.cu -------------------------------------------------- */

int cuda_matrix_start(xj_backend *be, const xj_rows *q, const xj_rows *b,
		      float *out, xj_status *st);
int cuda_matrix_wait(xj_backend *be, xj_status *st);
float *cuda_block_alloc(xj_backend *be, int64_t n, xj_status *st);
void cuda_block_free(xj_backend *be, float *p);

#endif
