/*
 * cpu_backend.c: the CPU backend's xj_backend object: create and release,
 * the vtable, per-thread tiles, the working-memory formula and the
 * allocation helpers of its files. The work is elsewhere: cpu_topk.c
 * (float32 GEMM candidates + canonical rescoring), cpu_matrix.c
 * (double GEMM values verified by their bound), cpu_rows.c (row norms); what they share
 * is in cpu_backend_int.h.
 *
 * kernels/cpu/ is the CPU backend (BLAS + OpenMP, oneDNN for bf16 and
 * int8), one implementation of kernels/backend.h beside kernels/cuda/;
 * the two never include each other, and what both use (metrics, k-lists,
 * the exchange, the self-join geometry) sits in kernels/.
 */
#include "../backend.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_backend_int.h"
#include "../metric.h"

#define PEND_MIN 64     /* pending slots beyond k, at least */
#define ALIGN_BYTES 64

/* ---- allocation ------------------------------------------------------ */

void *cpu_alloc_aligned(size_t bytes)
{
	if (bytes == 0)
		bytes = ALIGN_BYTES;
	bytes = (bytes + ALIGN_BYTES - 1) / ALIGN_BYTES * ALIGN_BYTES;
	return aligned_alloc(ALIGN_BYTES, bytes);
}

static int64_t pending_cap(int64_t k)
{
	return k + (k > PEND_MIN ? k : PEND_MIN);
}

/* rows x per_row bytes is representable (allocation sizes). */
int cpu_size_ok(int64_t rows, int64_t per_row)
{
	return rows >= 0 && (per_row <= 0 || rows <= INT64_MAX / per_row);
}

int cpu_oom(xj_status *st, const char *what, int64_t bytes)
{
	return xj_fail(st, XJ_EXIT_RESOURCE,
		       "cpu backend: cannot allocate %lld bytes for %s",
		       (long long)bytes, what);
}

/* ---- the object ---------------------------------------------------- */

static void cpu_release(xj_backend *be)
{
	cpu_backend *c = cpu_of(be);

	if (!c)
		return;
	cpu_matrix_wait(be, NULL);     /* a queued block writes to its out */
	for (int t = 0; c->th && t < c->threads; t++) {
		free(c->th[t].g);
		free(c->th[t].gt);
		free(c->th[t].cands);
		free(c->th[t].bt);
		free(c->th[t].qpad);
		free(c->th[t].qd);
		free(c->th[t].bd);
		free(c->th[t].gd);
		free(c->th[t].amb);
	}
	free(c->th);
	cpu_range_free(c);
	cpu_gemm_free(c->gemm);
	cpu_gemm_free(c->gemm_pair);
	cpu_free_query(c);
	cpu_free_base(c);
	free(c->mqq);
	free(c->mbb);
	free(c->ones);
	free(c);
}

static int threads_of(const xj_backend_cfg *cfg, int threads)
{
	if (threads > 0)
		return threads;
	if (cfg->threads > 0)
		return cfg->threads;
	return omp_get_max_threads();
}

static int thread_alloc(cpu_backend *c)
{
	int64_t d = c->cfg.d;

	c->th = calloc((size_t)c->threads, sizeof(*c->th));
	if (!c->th)
		return -1;
	for (int t = 0; t < c->threads; t++) {
		cpu_thread *th = &c->th[t];

		th->g = cpu_alloc_aligned((size_t)TQ_MAX * TB * sizeof(float));
		th->cands = malloc((size_t)c->cap * sizeof(cand));
		th->bt = cpu_alloc_aligned((size_t)(d * MW) * sizeof(double));
		th->qpad = cpu_alloc_aligned((size_t)(d * MQ) * sizeof(float));
		th->qd = cpu_alloc_aligned((size_t)(MTQ * d) * sizeof(double));
		th->bd = cpu_alloc_aligned((size_t)(TB * d) * sizeof(double));
		th->gd = cpu_alloc_aligned((size_t)MTQ * TB * sizeof(double));
		th->amb = malloc((size_t)MTQ * TB);
		/* the transposed tile of a self-join (cpu_topk_sym.c) */
		th->gt = c->cfg.same_rows ? cpu_alloc_aligned((size_t)TB * TB *
							      sizeof(float)) : NULL;
		if (!th->g || !th->cands || !th->bt ||
		    !th->qpad || !th->qd || !th->bd || !th->gd || !th->amb ||
		    (c->cfg.same_rows && !th->gt))
			return -1;
	}
	return 0;
}

/*
 * The candidate GEMM: cfg->precision resolved for this CPU (auto, or a
 * direct caller's choice; tf32 and fp16 are the GPU's, fp32 here as
 * before), and oneDNN's tiles for bf16 and int8, and for fp32 when
 * cfg->fp32_dnnl asks (else fp32 stays on the BLAS sgemm).
 */
static int gemm_setup(cpu_backend *c, xj_status *st)
{
	xj_metric m = c->cfg.metric;
	int l2 = m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN;
	xj_precision p = c->cfg.precision;
	char why[96];

	if (p == XJ_PREC_TF32 || p == XJ_PREC_FP16)
		p = XJ_PREC_FP32;
	if (cpu_gemm_resolve(p, c->cfg.d, c->cfg.k, &c->prec, why, sizeof(why),
			     st))
		return st->code;
	if (c->prec == XJ_PREC_FP32 && !c->cfg.fp32_dnnl)
		return XJ_OK;
	if (cpu_gemm_create(c->prec, c->cfg.d, l2 ? -2.0f : -1.0f,
			    m != XJ_METRIC_IP, c->threads, &c->gemm, st))
		return st->code;
	/* a self-join's block pairs (cpu_topk_sym.c): fp32 ones stay on
	 * the BLAS sgemm */
	if (c->prec == XJ_PREC_FP32 || !c->cfg.self || !c->cfg.same_rows)
		return XJ_OK;
	return cpu_gemm_create(c->prec, c->cfg.d, l2 ? -2.0f : -1.0f, 0,
			       c->threads, &c->gemm_pair, st);
}

/* XJ_CPU_FOLD: 1 or 0 folds l2's rounding into the rows' constants on
 * every job, or on none (A/B runs and tests); unset, each query chunk's
 * first base chunk decides (cpu_folded). */
static int fold_setting(int *out, xj_status *st)
{
	const char *v = getenv("XJ_CPU_FOLD");

	*out = -1;
	if (!v || !*v)
		return XJ_OK;
	if (strcmp(v, "0") && strcmp(v, "1"))
		return xj_fail(st, XJ_EXIT_USAGE,
			       "XJ_CPU_FOLD=%s: expected 0 or 1", v);
	*out = v[0] - '0';
	return XJ_OK;
}

int backend_cpu_create(const xj_backend_cfg *cfg, xj_backend **out,
		       xj_status *st)
{
	cpu_backend *c;

	*out = NULL;
	if (cfg->d < 1 || cfg->k < 0 || cfg->threads < 0)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "cpu backend: bad configuration (d = %lld, k = %lld, threads = %d)",
			       (long long)cfg->d, (long long)cfg->k,
			       cfg->threads);
	if (!cpu_size_ok(cfg->k, 64))
		return xj_fail(st, XJ_EXIT_RESOURCE,
			       "cpu backend: k = %lld is too large",
			       (long long)cfg->k);
	if (cfg->d > INT32_MAX)
		return xj_fail(st, XJ_EXIT_INPUT,
			       "cpu backend: dimension %lld exceeds the BLAS limit",
			       (long long)cfg->d);
	c = calloc(1, sizeof(*c));
	if (!c)
		return cpu_oom(st, "the backend", (int64_t)sizeof(*c));
	c->ones = malloc(TB * sizeof(float));
	if (!c->ones) {
		free(c);
		return cpu_oom(st, "the backend", TB * (int64_t)sizeof(float));
	}
	for (int64_t j = 0; j < TB; j++)
		c->ones[j] = 1.0f;
	c->cfg = *cfg;
	c->threads = threads_of(cfg, 0);
	c->cap = pending_cap(cfg->k);
	if (fold_setting(&c->fold_env, st) || gemm_setup(c, st)) {
		cpu_release(&c->be);
		return st->code;
	}
	c->gate0 = INFINITY;
	if (cfg->has_threshold)
		c->gate0 = metric_gate_approx(cfg->metric, cfg->threshold_key);
	c->be.name = "cpu";
	c->be.topk_begin = cpu_topk_begin;
	c->be.topk_add = cpu_topk_add;
	c->be.topk_end = cpu_topk_end;
	c->be.matrix_start = cpu_matrix_start;
	c->be.matrix_wait = cpu_matrix_wait;
	c->be.block_alloc = cpu_block_alloc;
	c->be.block_free = cpu_block_free;
	c->be.range_begin = cpu_range_begin;
	c->be.range_add = cpu_range_add;
	c->be.range_end = cpu_range_end;
	c->be.range_take = cpu_range_take;
	c->be.release = cpu_release;
	c->be.gemm_flops = 0;
	c->be.rescored_pairs = 0;
	c->be.rescore_seconds = 0;
	c->be.rows_seconds = 0;
	c->be.matrix_exact_pairs = 0;
	/* matrix_start queues a large block on a worker thread, but the
	 * driver's default stays one buffer, each block computed, then
	 * written: on 2 cores the write starved beside the compute team
	 * and the overlap measured slower (docs/performance.md) */
	c->be.matrix_async = 0;
	if (thread_alloc(c)) {
		int64_t bytes = backend_cpu_work_bytes(cfg, 0, c->threads);

		cpu_release(&c->be);
		return cpu_oom(st, "per-thread tiles", bytes);
	}
	/* each OpenMP thread runs its own sgemm: no BLAS threads inside */
	openblas_set_num_threads(1);
	*out = &c->be;
	return XJ_OK;
}

/*
 * Working memory, bytes, with q = qrows, m = cfg->max_base_rows, T threads,
 * cap = k + max(k, 64) pending slots per query:
 *   per thread   TQ_MAX*TB*4 (G tile, 1 MiB) + 16 cap (rescored
 *                candidates) + 8 d MW (matrix block) + 4 d MQ (matrix query rows)
 *                + 8 d (MTQ + TB) (matrix rows in double) + 9 MTQ*TB
 *                (dgemm tile and its undecided pairs)
 *                + TB*TB*4 for a self-join (transposed tile, 1 MiB)
 *   per query    8 (qq) + 4 (norm) + 8 (gate) + 4 (key bound) + 8
 *                (count) + 16 (pending counts) + 12 k (exact list) +
 *                4 k + 8 (the k smallest key bounds) + 8 (the gate's
 *                square root) + 16 cap (pending pairs)
 *                + 8 (matrix norms); + 4 d for cosine (normalised copy);
 *                + 6 in a self-join (float squared norm, given flag,
 *                block maxima rounded up)
 *   per base row 8 (bb) + 4 (bn2) + 4 (norm) + 4 (sub-tile max, rounded
 *                up) + 8 (matrix norms); + 4 d for cosine
 *   fixed        TB*4 (ones) + the backend struct + alignment slack
 * bf16 and int8 (cpu_gemm.h) add, per query and base row, the rounded row
 * (2 d or d) + 8 (error bound, scale) + 8 (rounding product) + 4
 * (sub-tile error, rounded up).
 * The query and base rows themselves are the caller's.
 */
int64_t backend_cpu_work_bytes(const xj_backend_cfg *cfg, int64_t qrows,
			       int threads)
{
	int64_t k = cfg->k > 0 ? cfg->k : 0;
	int64_t d = cfg->d;
	int64_t cap = pending_cap(k);
	int64_t cos_row = cfg->metric == XJ_METRIC_COSINE ? 4 * d : 0;
	int64_t mrows = cfg->max_base_rows > 0 ? cfg->max_base_rows : 0;
	int64_t per_thread, per_query, per_base, fixed;
	int t = threads_of(cfg, threads);

	per_thread = (int64_t)TQ_MAX * TB * 4 + 16 * cap + 8 * d * MW +
		     4 * d * MQ + 8 * d * (MTQ + TB) + 9 * (int64_t)MTQ * TB +
		     8 * ALIGN_BYTES +
		     (cfg->same_rows ? (int64_t)TB * TB * 4 + ALIGN_BYTES : 0);
	per_query = 8 + 4 + 4 + 8 + 8 + 8 + 8 + 16 * k + 16 + 16 * cap + 8 +
		    cos_row +
		    (cfg->self && cfg->same_rows ? 6 : 0);
	per_base = 8 + 4 + 4 + 4 + 8 + cos_row;
	if (cfg->precision == XJ_PREC_BF16 || cfg->precision == XJ_PREC_INT8 ||
	    cfg->precision == XJ_PREC_AUTO) {
		/* auto: the widest, bf16 rows */
		int64_t low = cfg->precision == XJ_PREC_INT8 ? d : 2 * d;

		per_query += low + 20;
		per_base += low + 20;
	}
	fixed = TB * 4 + (int64_t)sizeof(cpu_backend) + 8 * ALIGN_BYTES;
	return t * per_thread + qrows * per_query + mrows * per_base + fixed;
}
