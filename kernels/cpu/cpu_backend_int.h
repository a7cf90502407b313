/*
 * cpu_backend_int.h: what the files of the CPU backend share; private to
 * kernels/cpu/cpu_*.c (the driver sees backend.h only).
 *
 * defines: cpu_backend, cpu_thread, cand, pend_ent, the tile sizes,
 *          XJ_CLONES, cpu_of, lanes_key, float_up, float_down, and
 *          declares the functions one file of the backend defines for
 *          another (cpu_ prefix)
 *
 *   cpu_backend.c  the xj_backend object: create, release, the vtable,
 *                  the working-memory formula, allocation helpers
 *   cpu_rows.c     the rows a call is given: shape check, canonical and
 *                  float norms, normalised copies, bad rows
 *   cpu_topk.c     top-k: GEMM tiles, the gate and its pruning, deferred
 *                  rescoring, the exact lists
 *   cpu_topk_sym.c top-k of a self-join: the rows a base chunk shares
 *                  with the query chunk, each pair of tiles once
 *   cpu_matrix.c   matrix blocks: dgemm values verified by their
 *                  bound, canonical ones where it does not decide
 *   cpu_range.c    range join: the top-k's GEMM tiles and gate, every
 *                  pair within the threshold kept
 *   cpu_gemm.c     top-k's candidate GEMM through oneDNN (cpu_gemm.h)
 *
 * The two functions defined here are static inline: cpu_of is the cast
 * every file makes, and lanes_key runs per pair in the rescoring and per
 * value in the matrix, where a call into another file would not be
 * inlined.
 */
#ifndef XJ_CPU_BACKEND_INT_H
#define XJ_CPU_BACKEND_INT_H

#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../backend.h"
#include "cpu_gemm.h"
#include "../metric.h"      /* metric_err2; metric_dgemm.h */

/*
 * Tile sizes, measured on a 2-core AVX-512 machine (d = 128, OpenBLAS
 * SkylakeX kernels): the TQ x TB float tile (1 MiB) stays in L2 between
 * sgemm and scan; 256 x 1024 and 128 x 1024 ran 5-15% slower, 512 x 1024 and
 * 1024 x 512 within noise of this.
 */
#define TQ_MAX 512      /* query rows per thread tile */
#define TB 512          /* base rows per GEMM sub-tile */
#define MW 16           /* base rows per vector block (lanes) */
#define MQ 4            /* matrix: query rows per pass */
#define MTQ 256         /* matrix: query rows per dgemm item (x TB base
			 * rows: a 1 MiB double tile, as the float one) */
/* Below this many row elements (or 4x as many pair-dimension products)
 * a thread team costs more than it saves. */
#define PAR_MIN_ELEMS (1 << 16)

/*
 * The project builds for x86-64-v2; these clones give the scan and the
 * matrix kernel AVX2/AVX-512 code picked at load time. The clones do the
 * same IEEE operations in the same order (no contraction), so the results
 * are identical whichever runs.
 */
#if !defined(XJ_CLONES) && defined(__x86_64__) && defined(__GNUC__) && \
	defined(__has_attribute)
#if __has_attribute(target_clones)
#define XJ_CLONES __attribute__((target_clones("arch=x86-64-v4", \
					       "arch=x86-64-v3", "default")))
#endif
#endif
#ifndef XJ_CLONES
#define XJ_CLONES       /* -DXJ_CLONES= builds the plain code only */
#endif

typedef struct cand {
	float key;
	int64_t idx;
} cand;

/*
 * A pending pair of a query: candidate j (chunk row j >= 0, or in a
 * self-join's pairs across chunks query row -1 - j), bounds of its tile
 * value and of its key (cpu_topk.c, "Deferred rescoring"); once
 * rescored, up holds the canonical key.
 */
typedef struct pend_ent {
	float up;          /* key upper bound, then the canonical key */
	float lo;          /* lower bound of G - err, G the tile value */
	int64_t j;
} pend_ent;

typedef struct cpu_thread {
	float *g;          /* TQ_MAX x TB GEMM tile */
	float *gt;         /* self-join: TB x TB transposed tile */
	cand *cands;       /* cap rescored candidates */
	double *bt;        /* matrix: d x MW transposed base block */
	float *qpad;       /* matrix: MQ x d zero-padded query rows */
	double *qd, *bd;   /* matrix: MTQ x d, TB x d rows in double */
	double *gd;        /* matrix: MTQ x TB dgemm tile */
	unsigned char *amb;  /* matrix: MTQ x TB, pairs left undecided */
	double flops;
	double rescored;   /* pairs rescored (candidates) */
	double rescore_s;  /* seconds pruning, rescoring and merging them */
} cpu_thread;

typedef struct cpu_backend {
	xj_backend be;     /* first: the driver sees this */
	xj_backend_cfg cfg;
	int threads;
	int64_t cap;       /* pending slots per query */
	double gate0;      /* gate from the threshold, +inf without */
	cpu_thread *th;
	xj_precision prec; /* candidate GEMM (never auto) */
	cpu_gemm *gemm;    /* oneDNN tiles; NULL: BLAS sgemm */
	cpu_gemm *gemm_pair;   /* a self-join's block pairs in bf16/int8:
				* the same GEMM with no row added */
	cpu_gemm_rows ql;  /* query chunk rounded for a bf16/int8 gemm */
	int fold;          /* l2 on rounded rows: fold the rounding into the
			    * rows' constants (cpu_folded); -1 until the
			    * query chunk's first base chunk decides */
	int fold_env;      /* XJ_CPU_FOLD: 0 or 1 decides instead; -1 */
	cpu_gemm_rows bl;  /* base chunk likewise */
	float *subemax;    /* largest base rounding error per TB sub-tile */

	/* query chunk, between topk_begin and topk_end */
	int active;
	const float *qx;
	int64_t qrows, qfirst, qalloc;
	double *qq;        /* canonical squared norms */
	float *qnorm;      /* float norms, for the error bounds */
	float *qhat;       /* cosine: rows normalised in float */
	double *gate;      /* approx-space gate per query */
	float *ekey;       /* exact lists, qrows x k */
	int64_t *eidx;
	int64_t *ecount;
	pend_ent *pend;    /* pending pairs, qrows x cap */
	int64_t *npend;
	int64_t *nkept;    /* pending pairs that survived the last prune */
	float *kbound;     /* key bound behind the gate (cpu_topk.c) */
	float *hk;         /* the k smallest key bounds met, qrows x k */
	int64_t *hn;       /* ... how many */
	double *gsq;       /* sqrt(max(gate, 0)) */
	/* a self-join's pairs once across chunks (cpu_topk_sym.c) */
	int cross;         /* on for this query chunk */
	uint64_t qtag;     /* the stream's query rows' tag (xj_rows) */
	float *qn2;        /* float squared norms (l2 family) */
	float *qsubmax;    /* largest qnorm per TB block of query rows */
	float *qsubemax;   /* largest rounding error likewise */
	unsigned char *given;  /* query rows given as base rows since
				* topk_begin */

	/* base chunk (topk_add) or matrix operands */
	int64_t balloc;
	double *bb;        /* canonical squared norms */
	float *bn2;        /* float squared norms (l2 family) */
	float *bnorm;      /* float norms */
	float *bhat;       /* cosine: normalised rows */
	float *submax;     /* largest bnorm per TB sub-tile */
	float *ones;       /* TB ones: the constant row of cosine tiles */
	int64_t mqalloc, mballoc;
	double *mqq;       /* matrix: query squared norms */
	double *mbb;       /* matrix: base squared norms */
	struct cpu_range *range;   /* range join state (cpu_range.c) */
	/* the queued matrix block, computed by mthread until matrix_wait */
	int mqueued;       /* started, not yet waited for */
	int mthreaded;     /* ... and computed by mthread */
	pthread_t mthread;
	xj_rows mq, mb;
	float *mout;
} cpu_backend;

static inline cpu_backend *cpu_of(xj_backend *be)
{
	return (cpu_backend *)be;
}

/* l2 or sqeuclidean: the tiles add squared norms. */
static inline int cpu_l2(const cpu_backend *c)
{
	return c->cfg.metric == XJ_METRIC_L2 ||
	       c->cfg.metric == XJ_METRIC_SQEUCLIDEAN;
}

/* Candidates from rows rounded to bf16 or int8 with the rounding folded
 * into each row's constants (metric_err_bound_folded): the l2 family's
 * tiles add fl(|b|^2 - 2 b.(b - r(b))) (fold_n2, cpu_topk.c) and its
 * offsets are |q|^2 - 2 q.(q - r(q)). Where the rows' neighbours lie
 * closer to each other than to the origin that bound is the narrower
 * one; fold_decide (cpu_topk.c) looks. */
static inline int cpu_folded(const cpu_backend *c)
{
	return cpu_l2(c) && c->fold > 0 &&
	       (c->prec == XJ_PREC_BF16 || c->prec == XJ_PREC_INT8);
}

/* Smallest float >= x (x finite or +inf): nextafterf(f, INFINITY) of the
 * nearest float f when f is below x, without branches (the scan's bounds
 * take these for every pushed pair and every row of a pair tile, where a
 * branch went either way: 6-11% of an int8 self-join's compute). The float
 * after f is one unit of the bit pattern further from zero for f > 0,
 * nearer for f < 0, and the smallest positive subnormal after a zero. */
static inline float float_up(double x)
{
	float f = (float)x;
	uint32_t u, neg, bump = (double)f < x;

	memcpy(&u, &f, sizeof(u));
	u = f == 0 && bump ? 0 : u;
	neg = u >> 31;
	u += bump * (1u - 2u * neg);
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Largest float <= x (x finite or -inf), as float_up: nextafterf(f,
 * -INFINITY) when f is above x; the largest negative subnormal before a
 * zero. */
static inline float float_down(double x)
{
	float f = (float)x;
	uint32_t u, neg, bump = (double)f > x;

	memcpy(&u, &f, sizeof(u));
	u = f == 0 && bump ? 0x80000000u : u;
	neg = u >> 31;
	u += bump * (2u * neg - 1u);
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Key from an accumulated sum, with the final operations of metric_key()
 * (metric_dgemm.h's, which the CUDA matrix shares). */
static inline float lanes_key(xj_metric m, double s, double qq, double bb)
{
	return metric_sum_key(m, s, qq, bb);
}

/* ---- cpu_topk.c (shared) -------------------------------------------- */

#define SCAN_W 32       /* scan block: elements tested before a branch */

/* The first block start j >= from of g[0, n) holding an element <= t,
 * or the start of the tail too short for a block: a hit lies in [j, j +
 * SCAN_W). */
int64_t cpu_scan_block(const float *g, float t, int64_t from, int64_t n);
/* Bit w set when g[w] <= t, for a block of SCAN_W elements. */
uint32_t cpu_scan_hits(const float *g, float t);

/* The canonical accumulators of n <= MW pairs (query row at qx + qo[w],
 * base row at bx + bo[w]) in acc, one SIMD lane each, metric_key()'s
 * operations in index order (lanes_key finishes them); qo and bo hold MW
 * entries, those past n overwritten. */
void cpu_pairs_acc(xj_metric m, const float *qx, int64_t *qo,
		   const float *bx, int64_t *bo, int64_t n, int64_t d,
		   double *acc);

/* ---- cpu_backend.c ------------------------------------------------- */

void *cpu_alloc_aligned(size_t bytes);
int cpu_size_ok(int64_t rows, int64_t per_row);
int cpu_oom(xj_status *st, const char *what, int64_t bytes);

/* ---- cpu_rows.c ---------------------------------------------------- */

int cpu_check_rows_arg(const cpu_backend *c, const xj_rows *r,
		       const char *what, xj_status *st);
int64_t cpu_rows_prepare(xj_metric m, const float *x, int64_t rows,
			 int64_t d, double *n2, float *fn2, float *fnorm,
			 float *hat, int threads);
int cpu_bad_row(xj_metric m, const float *x, int64_t d, int64_t r,
		int64_t first_row, xj_status *st);
/* Query chunk q's norms and normalised copy into c->qq, qnorm, qhat
 * (reserved for q->rows); a bad row is an error naming it. */
int cpu_query_prepare(cpu_backend *c, const xj_rows *q, xj_status *st);

/* ---- cpu_topk.c ---------------------------------------------------- */

void cpu_free_query(cpu_backend *c);
void cpu_free_base(cpu_backend *c);
int cpu_topk_begin(xj_backend *be, const xj_rows *q, xj_status *st);
int cpu_topk_add(xj_backend *be, const xj_rows *b, xj_status *st);
int cpu_topk_end(xj_backend *be, float *key, int64_t *idx, xj_status *st);
/* Check base chunk b; unless it or the query chunk is empty, its norms,
 * normalised copy and sub-tile maxima (c->bb ...). */
int cpu_base_prepare(cpu_backend *c, const xj_rows *b, xj_status *st);
/* After cpu_query_prepare: the query rows rounded for a bf16 or int8
 * candidate GEMM (nothing in fp32). */
int cpu_query_pack(cpu_backend *c, const xj_rows *q, xj_status *st);
/* The GEMM tile of query rows [i0, i1) against the TB-row sub-tile of b
 * at j0, into t->g (returns its columns), and the scan threshold of
 * query i against sub-tile s for an approx-space gate (cpu_topk.c's file
 * comment): no pair whose score is <= gate has a tile value above it. */
int cpu_subtile_gemm(cpu_backend *c, cpu_thread *t, int64_t i0, int64_t i1,
		     const xj_rows *b, int64_t j0, int64_t *nb, xj_status *st);
float cpu_row_thr(const cpu_backend *c, int64_t i, int64_t s, double gate);
/* Run fn on every query tile [i0, i1) of the chunk against base chunk b,
 * the tiles spread over the threads (a team when the chunk is worth it);
 * adds the GEMM FLOPs and rescored pairs. fn returns a status; the first
 * failure's status is returned and the tiles not yet started are
 * skipped. */
typedef int (*cpu_tile_fn)(cpu_backend *c, cpu_thread *t, int64_t i0,
			   int64_t i1, const xj_rows *b, xj_status *st);
int cpu_tiles_run(cpu_backend *c, const xj_rows *b, cpu_tile_fn fn,
		  xj_status *st);

/* ---- cpu_range.c --------------------------------------------------- */

int cpu_range_begin(xj_backend *be, const xj_rows *q, xj_status *st);
int cpu_range_add(xj_backend *be, const xj_rows *b, xj_status *st);
int cpu_range_end(xj_backend *be, int64_t *count, xj_status *st);
int cpu_range_take(xj_backend *be, int64_t *idx, float *val,
		   xj_status *st);
void cpu_range_free(cpu_backend *c);
/* for cpu_topk_sym.c (cpu_topk.c): prune; a thread's query tile against
 * the chunk rows [jb, je) (scanned, pruned, rescored and merged); the
 * rescoring of a tile's survivors once the chunk is done; query rows per
 * tile */
#define PRUNE_MIN(k) ((k) / 2 + 1)  /* pending pairs worth a prune */
void cpu_query_prune(cpu_backend *c, int64_t i);
/* One side of a self-join's pair tile: its rows are the queries q0 + r
 * and, for the other side's queries, the candidates cand0 + step r
 * (chunk rows: cand0 = j, step 1; query rows: cand0 = -1 - i, step -1);
 * nmax and emax, its largest norm and rounding error, bound the other
 * side's tile values (its rows lie in one TB block). */
typedef struct cpu_side {
	int64_t q0, cand0, step;
	float nmax, emax;
} cpu_side;
/* Scan a self-join's pair tile g (na x nb: the scaled dot products G of
 * side a's rows with side bs's) for both sides in one pass: row r is
 * query a->q0 + r against bs's candidates with values G[r][k] + cb[k],
 * column k query bs->q0 + k against a's with values G[r][k] + ca[r] (ca,
 * cb NULL: no constant). With sa, sb (int8's row scales of the two
 * sides) g holds the GEMM's unscaled sums (cpu_gemm_tile_sums) and G =
 * g[r][k] * (sb[k] * (alpha sa[r])), scaled as it is read; sa, sb NULL:
 * g is G. Returns 0, scanning nothing, when one of those queries has no
 * gate yet (cpu_scan_row_side seeds it). */
int cpu_scan_sides(cpu_backend *c, cpu_thread *t, const float *g,
		   const float *sa, const float *sb, float alpha,
		   const cpu_side *a, int64_t na, const cpu_side *bs,
		   int64_t nb, const float *ca, const float *cb,
		   const xj_rows *b);
/* cpu_scan_row for a row whose candidates are side s's (err: its bound
 * against s) */
void cpu_scan_row_side(cpu_backend *c, cpu_thread *t, int64_t i, float *g,
		       const cpu_side *s, int64_t nb, const xj_rows *b);
/* The error bound of query i's tile values against rows of largest norm
 * nmax and rounding error emax. */
metric_err2 cpu_side_err(const cpu_backend *c, int64_t i, float nmax,
			 float emax);
int cpu_tile_cols(cpu_backend *c, cpu_thread *t, int64_t i0, int64_t i1,
		  int64_t jb, int64_t je, const xj_rows *b, xj_status *st);
void cpu_tile_finish(cpu_backend *c, cpu_thread *t, int64_t i0, int64_t i1,
		     const xj_rows *b);
int64_t cpu_tile_rows(int64_t rows, int threads);

/* ---- cpu_topk_sym.c ------------------------------------------------ */

/* Rows of the base chunk b that are also query rows, [*b0, *b0 + *len)
 * in b's rows, when a self-join shares enough of them to be worth the
 * symmetric path (any of them when its pairs run across chunks: 1);
 * else 0; -1 when such rows differ from the query rows (across chunks
 * an error: the rows' earlier partners hold their pairs). */
int cpu_sym_overlap(const cpu_backend *c, const xj_rows *b, int64_t *b0,
		    int64_t *len);
/* topk_add for such a chunk, or for any chunk of a part (cfg.parts > 1). */
int cpu_sym_add(cpu_backend *c, const xj_rows *b, int64_t b0, int64_t len,
		xj_status *st);

/* ---- cpu_matrix.c -------------------------------------------------- */

int cpu_matrix_start(xj_backend *be, const xj_rows *q, const xj_rows *b,
		     float *out, xj_status *st);
int cpu_matrix_wait(xj_backend *be, xj_status *st);
float *cpu_block_alloc(xj_backend *be, int64_t n, xj_status *st);
void cpu_block_free(xj_backend *be, float *p);

#endif
