/*
 * backend_cuda.cu: the CUDA backend's object, on one GPU: create and
 * release, the buffers of both paths (allocated at create for the largest
 * chunks), the memory formulas the planner uses, the row checks both
 * paths share, and the probe and description of devices. The work is in
 * topk_cuda.cu (float32 cuBLAS candidates + canonical rescoring),
 * range_cuda.cu (the same candidates, every pair within the threshold)
 * and matrix_cuda.cu (double cuBLAS values verified, canonical ones where
 * the bound does not decide); what they share is in
 * backend_cuda_int.h.
 *
 * Errors: every CUDA and cuBLAS call is checked (check.cuh), every launch
 * too. Rows that fail metric_check_rows are flagged on the device; query
 * rows and matrix blocks are reported at once with the CPU's message,
 * base rows of topk_add by topk_end.
 */
#include "backend_cuda_int.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include "../metric.h"
#include "../selfjoin.h"
}

#include "check.cuh"

/* ---- memory ------------------------------------------------------------ */

int cuda_alloc_fail(xj_status *st, cudaError_t e, int64_t bytes,
		    const char *kind, const char *what)
{
	(void)cudaGetLastError();
	return xj_fail(st, e == cudaErrorMemoryAllocation ? XJ_EXIT_RESOURCE
							  : XJ_EXIT_INTERNAL,
		       "cannot allocate %lld bytes of %s memory for %s (%s: %s)",
		       (long long)bytes, kind, what, cudaGetErrorName(e),
		       cudaGetErrorString(e));
}

int cuda_pinned_alloc(float **p, int64_t n, const char *what,
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
		return cuda_alloc_fail(st, e, bytes, "pinned host", what);
	*p = (float *)v;
	return XJ_OK;
}

static void query_free(cuda_backend *c)
{
	c->qtag = 0;
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
int cuda_query_reserve(cuda_backend *c, int64_t rows, xj_status *st)
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
	dev_free(&c->subfmin);
	dev_free(&c->blow);
	dev_free(&c->bd);
	for (int s = 0; s < 2; s++) {
		if (c->stage[s])
			(void)cudaFreeHost(c->stage[s]);
		c->stage[s] = NULL;
	}
	c->balloc = 0;
}

int cuda_base_reserve(cuda_backend *c, int64_t rows, xj_status *st)
{
	int64_t d = c->cfg.d;
	int cosine = c->cfg.metric == XJ_METRIC_COSINE;
	/* top-k and range joins upload into two slots in turn (a range join
	 * on a backend made without cfg.range too); a matrix in place */
	int two = c->cfg.k >= 1 || c->cfg.range || c->ractive;

	if (rows <= c->balloc && (!two || c->braw[1]))
		return XJ_OK;
	if (rows < c->balloc)
		rows = c->balloc;
	CUDA_CHECK(st, cudaStreamSynchronize(c->stream));
	CUDA_CHECK(st, cudaStreamSynchronize(c->cstream));
	base_free(c);
	if (dev_alloc(&c->braw[0], mul_sat(rows, d), "base rows", st) ||
	    (two && dev_alloc(&c->braw[1], mul_sat(rows, d), "base rows", st)) ||
	    (cosine && dev_alloc(&c->bhat, mul_sat(rows, d),
				 "normalised base rows", st)) ||
	    dev_alloc(&c->bb, rows, "base norms", st) ||
	    dev_alloc(&c->bn2, rows, "base norms", st) ||
	    dev_alloc(&c->bnorm, rows, "base norms", st) ||
	    dev_alloc(&c->submax, rows / XJ_CUDA_TB + 1, "sub-tile norms", st) ||
	    dev_alloc(&c->subfmin, rows / XJ_CUDA_TB + 1, "sub-tile norms",
		      st) ||
	    (c->lowp && dev_alloc(&c->blow, mul_sat(rows, d),
				  "16-bit base rows", st)) ||
	    (c->dgemm && dev_alloc(&c->bd, mul_sat(rows, d),
				   "base rows in double", st)) ||
	    cuda_pinned_alloc(&c->stage[0], mul_sat(rows, d), "base staging",
			      st) ||
	    cuda_pinned_alloc(&c->stage[1], mul_sat(rows, d), "base staging",
			      st)) {
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
	dev_free(&c->qd);
	dev_free(&c->gd);
	dev_free(&c->sqflags);
	dev_free(&c->mdone);
	dev_free(&c->cand);
	dev_free(&c->ncand);
	dev_free(&c->skey);
	dev_free(&c->ckey);
	dev_free(&c->nvalid);
	dev_free(&c->tkey);
	dev_free(&c->tidx);
	dev_free(&c->once_cand);
	dev_free(&c->once_n);
	dev_free(&c->once_tcol);
	dev_free(&c->stats);
	dev_free(&c->gp[0]);
	dev_free(&c->gp[1]);
	dev_free(&c->bad);
	dev_free(&c->rkey);
	dev_free(&c->ridx);
	dev_free(&c->rvalid);
	c->ralloc = 0;
}

int64_t cuda_pass_rows(const cuda_tuning *t, int64_t qrows)
{
	int64_t up = ((qrows > 1 ? qrows : 1) + XJ_CUDA_TQ - 1) /
		     XJ_CUDA_TQ * XJ_CUDA_TQ;

	return t->rowsel ? MIN64(t->pass_rows, up) : XJ_CUDA_TQ;
}

extern "C" int64_t backend_cuda_host_pass_rows(int64_t qrows, xj_status *st)
{
	cuda_tuning t;

	if (cuda_tuning_get(&t, st))
		return -1;
	return cuda_pass_rows(&t, qrows);
}

/* Candidate slots: a sub-tile's per tile row, a pass's for rowsel's
 * pass-wide scan. */
static int64_t cand_slots(const cuda_backend *c)
{
	return c->tune.rowsel && c->tune.whole ?
	       mul_sat(c->prows, c->tune.pass_cols) :
	       c->prows * XJ_CUDA_TB;
}

static int work_alloc(cuda_backend *c, xj_status *st)
{
	int64_t tile = (int64_t)XJ_CUDA_TQ * XJ_CUDA_TB;
	int64_t k = c->cfg.k;

	if (dev_alloc(&c->g, tile, "the GEMM tile", st) ||
	    dev_alloc(&c->g2, tile, "the second matrix tile", st) ||
	    dev_alloc(&c->bad, 2, "row flags", st))
		return st->code;
	if (c->dgemm &&
	    (dev_alloc(&c->qd, mul_sat(XJ_CUDA_TQ, c->cfg.d),
		       "a query tile in double", st) ||
	     dev_alloc(&c->gd, tile, "the double GEMM tile", st) ||
	     dev_alloc(&c->sqflags, XJ_CUDA_SQUARES, "undecided squares", st) ||
	     dev_alloc(&c->mdone, 1, "the canonical pair count", st)))
		return st->code;
	if (k < 1)          /* a matrix-only backend */
		return XJ_OK;
	if (dev_alloc(&c->cand, cand_slots(c), "candidate slots", st) ||
	    dev_alloc(&c->ncand, XJ_CUDA_TQ, "candidate counts", st) ||
	    dev_alloc(&c->tkey, mul_sat(c->prows, k), "merge scratch", st) ||
	    dev_alloc(&c->tidx, mul_sat(c->prows, k), "merge scratch", st) ||
	    dev_alloc(&c->stats, 5, "selection counts", st))
		return st->code;
	if (c->tune.sym == 2 && c->tune.rowsel && c->tune.whole &&
	    (dev_alloc(&c->once_cand,
		       mul_sat(c->tune.pass_cols, SYM_BLOCK),
		       "column slots", st) ||
	     dev_alloc(&c->once_n, SYM_BLOCK + c->tune.pass_cols,
		       "kept counts", st) ||
	     dev_alloc(&c->once_tcol, c->tune.pass_cols,
		       "column thresholds", st)))
		return st->code;
	CUDA_CHECK(st, cudaMemsetAsync(c->stats, 0, 5 * sizeof(*c->stats),
				       c->stream));
	if (!c->tune.rowsel)
		return dev_alloc(&c->skey, tile, "candidate sort keys", st) ||
		       dev_alloc(&c->ckey, tile, "candidate keys", st) ||
		       dev_alloc(&c->nvalid, XJ_CUDA_TQ, "candidate counts",
				 st) ? st->code : XJ_OK;
	for (int s = 0; s < (c->tune.pipeline ? 2 : 1); s++)
		if (dev_alloc(&c->gp[s],
			      mul_sat(c->prows, c->tune.pass_cols),
			      "a pass's GEMM tile", st))
			return st->code;
	return XJ_OK;
}

/* ---- tuning and timers --------------------------------------------------- */

/* An integer variable: def when unset or empty, else its value in [lo,
 * hi], else XJ_EXIT_USAGE. */
static int env_int(const char *name, int64_t def, int64_t lo, int64_t hi,
		   int64_t *out, xj_status *st)
{
	const char *v = getenv(name);
	char *end = NULL;
	long long x;

	*out = def;
	if (!v || !*v)
		return XJ_OK;
	x = strtoll(v, &end, 10);
	if (*end || x < lo || x > hi)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "%s=%s: expected an integer in [%lld, %lld]",
			       name, v, (long long)lo, (long long)hi);
	*out = x;
	return XJ_OK;
}

int cuda_tuning_get(cuda_tuning *t, xj_status *st)
{
	const char *sel = getenv("XJ_CUDA_SELECT");
	const char *scan = getenv("XJ_CUDA_SCAN");
	int64_t pipe, cols, rows, blocks, seed, timing, sym, t16, fmin, rsr;

	if (!sel || !*sel || !strcmp(sel, "rowsel"))
		t->rowsel = 1;
	else if (!strcmp(sel, "tile"))
		t->rowsel = 0;
	else
		return xj_fail(st, XJ_EXIT_USAGE,
			       "XJ_CUDA_SELECT=%s: expected rowsel or tile", sel);
	if (env_int("XJ_CUDA_PIPELINE", 1, 0, 1, &pipe, st) ||
	    env_int("XJ_CUDA_PASS_COLS", 4 * XJ_CUDA_TB, XJ_CUDA_TB,
		    64 * XJ_CUDA_TB, &cols, st) ||
	    env_int("XJ_CUDA_PASS_ROWS", 4 * XJ_CUDA_TQ, XJ_CUDA_TQ,
		    16 * XJ_CUDA_TQ, &rows, st) ||
	    env_int("XJ_CUDA_RS_BLOCKS", 8, 4, 8, &blocks, st) ||
	    env_int("XJ_CUDA_SEED", 1, 0, 1, &seed, st) ||
	    env_int("XJ_CUDA_TIMING", 1, 0, 1, &timing, st) ||
	    env_int("XJ_CUDA_SYM", 0, 0, 2, &sym, st) ||
	    env_int("XJ_CUDA_TILE16", 1, 0, 1, &t16, st) ||
	    env_int("XJ_CUDA_FMIN", 0, 0, 1, &fmin, st) ||
	    env_int("XJ_CUDA_RS_ROWS", 1, 1, XJ_CUDA_RS_ROWS, &rsr, st))
		return st->code;
	if (rsr & (rsr - 1))
		return xj_fail(st, XJ_EXIT_USAGE,
			       "XJ_CUDA_RS_ROWS=%lld: expected 1, 2, 4 or 8",
			       (long long)rsr);
	if (rsr > 1 && fmin)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "XJ_CUDA_RS_ROWS=%lld and XJ_CUDA_FMIN=1: one or the other",
			       (long long)rsr);
	if (cols % XJ_CUDA_TB)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "XJ_CUDA_PASS_COLS=%lld: expected a multiple of %d",
			       (long long)cols, XJ_CUDA_TB);
	if (blocks != 4 && blocks != 8)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "XJ_CUDA_RS_BLOCKS=%lld: expected 4 or 8",
			       (long long)blocks);
	if (rows % XJ_CUDA_TQ)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "XJ_CUDA_PASS_ROWS=%lld: expected a multiple of %d",
			       (long long)rows, XJ_CUDA_TQ);
	if (!scan || !*scan || !strcmp(scan, "pass"))
		t->whole = 1;
	else if (!strcmp(scan, "sub"))
		t->whole = 0;
	else
		return xj_fail(st, XJ_EXIT_USAGE,
			       "XJ_CUDA_SCAN=%s: expected pass or sub", scan);
	t->pipeline = (int)pipe;
	t->pass_cols = cols;
	t->pass_rows = rows;
	t->rs_blocks = (int)blocks;
	t->seed = (int)seed;
	t->timing = (int)timing;
	t->sym = (int)sym;
	t->tile16 = (int)t16;
	t->fmin = (int)fmin;
	t->rs_rows = (int)rsr;
	return XJ_OK;
}

static const char *const kt_names[KT_NCLASS] = {
	"gemm", "rowsel", "scan", "rescore", "merge", "transpose", "prep",
	"upload"
};

static int kt_setup(cuda_backend *c, xj_status *st)
{
	cuda_ktimer *k = &c->kt;

	k->on = c->tune.timing;
	for (int i = 0; i < KT_NCLASS; i++) {
		c->be.ktime[i].name = kt_names[i];
		c->be.ktime[i].ms = 0;
		c->be.ktime[i].calls = 0;
	}
	c->be.nktime = k->on ? KT_NCLASS : 0;
	if (!k->on)
		return XJ_OK;
	for (int s = 0; s < KT_RING; s++)
		for (int e = 0; e < 2; e++)
			CUDA_CHECK(st, cudaEventCreate(&k->ev[s][e]));
	return XJ_OK;
}

static void kt_free(cuda_backend *c)
{
	for (int s = 0; s < KT_RING; s++)
		for (int e = 0; e < 2; e++)
			if (c->kt.ev[s][e])
				(void)cudaEventDestroy(c->kt.ev[s][e]);
}

/* Read back the oldest pending pair (waits for its end). */
static int kt_pop(cuda_backend *c, xj_status *st)
{
	cuda_ktimer *k = &c->kt;
	int s = k->tail;
	float ms = 0;

	CUDA_CHECK(st, cudaEventSynchronize(k->ev[s][1]));
	CUDA_CHECK(st, cudaEventElapsedTime(&ms, k->ev[s][0], k->ev[s][1]));
	k->ms[k->cls[s]] += ms;
	k->calls[k->cls[s]]++;
	k->tail = (s + 1) % KT_RING;
	k->n--;
	return XJ_OK;
}

int cuda_kt_start(cuda_backend *c, int cls, cudaStream_t s, int *slot,
		  xj_status *st)
{
	cuda_ktimer *k = &c->kt;
	int i;

	*slot = -1;
	if (!k->on)
		return XJ_OK;
	if (k->n == KT_RING && kt_pop(c, st))
		return st->code;
	i = (k->tail + k->n) % KT_RING;
	k->cls[i] = cls;
	CUDA_CHECK(st, cudaEventRecord(k->ev[i][0], s));
	k->n++;
	*slot = i;
	return XJ_OK;
}

int cuda_kt_stop(cuda_backend *c, int slot, cudaStream_t s, xj_status *st)
{
	if (slot >= 0)
		CUDA_CHECK(st, cudaEventRecord(c->kt.ev[slot][1], s));
	return XJ_OK;
}

int cuda_kt_collect(cuda_backend *c, xj_status *st)
{
	while (c->kt.n > 0)
		if (kt_pop(c, st))
			return st->code;
	for (int i = 0; i < c->be.nktime; i++) {
		c->be.ktime[i].ms = c->kt.ms[i];
		c->be.ktime[i].calls = c->kt.calls[i];
	}
	return XJ_OK;
}

/* ---- rows ---------------------------------------------------------------- */

int cuda_check_rows_arg(const cuda_backend *c, const xj_rows *r,
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
int cuda_rows_bad(const cuda_backend *c, const xj_rows *r, xj_status *st)
{
	if (metric_check_rows(c->cfg.metric, r->x, r->rows, c->cfg.d,
			      r->first_row, st))
		return st->code;
	return xj_fail(st, XJ_EXIT_INTERNAL,
		       "the device flags a row of %lld .. %lld that the host check accepts",
		       (long long)r->first_row,
		       (long long)(r->first_row + r->rows - 1));
}

int cuda_flags_reset(cuda_backend *c, xj_status *st)
{
	CUDA_CHECK(st, cudaMemsetAsync(c->bad, 0xff, 2 * sizeof(*c->bad),
				       c->stream));
	return XJ_OK;
}

/* ---- entry points ------------------------------------------------------ */

/* Internal and resource errors name the backend and the call; input
 * errors keep the CPU's message, which names the row. */
int cuda_entry_fail(const cuda_backend *c, int rc, const char *call,
		    xj_status *st)
{
	if (rc != XJ_EXIT_INPUT)
		xj_wrap(st, "cuda backend (device %d): %s", c->device, call);
	return rc;
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
	if (c->gstream)
		(void)cudaStreamSynchronize(c->gstream);
	query_free(c);
	base_free(c);
	cuda_range_free(c);
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
		if (c->gemm_done[s])
			(void)cudaEventDestroy(c->gemm_done[s]);
		if (c->sel_done[s])
			(void)cudaEventDestroy(c->sel_done[s]);
	}
	if (c->prep_done)
		(void)cudaEventDestroy(c->prep_done);
	kt_free(c);
	if (c->gblas)
		(void)cublasDestroy(c->gblas);
	if (c->gstream)
		(void)cudaStreamDestroy(c->gstream);
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
		CUDA_CHECK(st, cudaEventCreateWithFlags(&c->gemm_done[s],
							cudaEventDisableTiming));
		CUDA_CHECK(st, cudaEventCreateWithFlags(&c->sel_done[s],
							cudaEventDisableTiming));
	}
	CUDA_CHECK(st, cudaEventCreateWithFlags(&c->prep_done,
						cudaEventDisableTiming));
	if (kt_setup(c, st))
		return st->code;
	CUBLAS_CHECK(st, cublasCreate(&c->blas));
	CUBLAS_CHECK(st, cublasSetStream(c->blas, c->stream));
	CUBLAS_CHECK(st, cublasSetMathMode(c->blas, XJ_CUBLAS_MATH));
	if (c->cfg.k >= 1 && c->tune.rowsel && c->tune.pipeline) {
		CUDA_CHECK(st, cudaStreamCreateWithFlags(&c->gstream,
							 cudaStreamNonBlocking));
		CUBLAS_CHECK(st, cublasCreate(&c->gblas));
		CUBLAS_CHECK(st, cublasSetStream(c->gblas, c->gstream));
		CUBLAS_CHECK(st, cublasSetMathMode(c->gblas, XJ_CUBLAS_MATH));
	}
	if (memory_check(c, mem_fraction, st) || work_alloc(c, st) ||
	    cuda_query_reserve(c, c->cfg.max_query_rows, st) ||
	    cuda_base_reserve(c, c->cfg.max_base_rows, st) ||
	    (c->cfg.range && cuda_range_reserve(c, st)))
		return st->code;
	return XJ_OK;
}

extern "C" int backend_cuda_create(const xj_backend_cfg *cfg, int device,
				   double mem_fraction, xj_backend **out,
				   xj_status *st)
{
	cuda_backend *c;
	char rows[24] = "";
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
	if (cuda_tuning_get(&c->tune, st)) {
		free(c);
		return st->code;
	}
	c->prows = cuda_pass_rows(&c->tune, cfg->max_query_rows);
	if (c->tune.rowsel && c->tune.rs_rows > 1)
		snprintf(rows, sizeof(rows), " %d rows/block",
			 c->tune.rs_rows);
	snprintf(c->detail, sizeof(c->detail),
		 "%s%s%s%s%s%s%s, pass %lld x %lld%s%s%s%s",
		 c->tune.rowsel ? "rowsel" : "tile",
		 c->tune.rowsel && c->tune.rs_blocks == 8 ? " 8/SM" : "", rows,
		 c->tune.rowsel && c->tune.tile16 &&
		 cfg->precision == XJ_PREC_FP16 ? " 16-bit tile" : "",
		 c->tune.rowsel && c->tune.seed ? " seeded" : "",
		 c->tune.rowsel && c->tune.fmin &&
		 (cfg->metric == XJ_METRIC_L2 ||
		  cfg->metric == XJ_METRIC_SQEUCLIDEAN) ? " fn2-min" : "",
		 c->tune.rowsel && !c->tune.whole ? " sub-tile scan" : "",
		 (long long)c->prows,
		 (long long)(c->tune.rowsel ? c->tune.pass_cols : XJ_CUDA_TB),
		 c->tune.rowsel && c->tune.pipeline ? ", pipelined" : "",
		 c->tune.timing ? ", timed" : "",
		 c->tune.sym == 2 ? ", passes read once" :
		 c->tune.sym ? ", block pairs" : "",
		 cfg->k < 1 ? " (top-k only)" : "");
	c->be.detail = c->detail;
	c->lowp = cfg->precision == XJ_PREC_BF16 ||
		  cfg->precision == XJ_PREC_FP16;
	/* what the driver makes for a matrix (app/main.c passes k = 0, and
	 * no range): values from a double GEMM, with its buffers; one for
	 * top-k or a range join keeps its memory and computes any matrix
	 * block canonically */
	c->dgemm = cfg->k < 1 && !cfg->range;
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
	c->be.range_begin = cuda_range_begin;
	c->be.range_add = cuda_range_add;
	c->be.range_end = cuda_range_end;
	c->be.range_take = cuda_range_take;
	c->be.matrix_async = 1;
	c->be.release = cuda_release;
	c->be.gemm_flops = 0;
	c->be.matrix_exact_pairs = 0;
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
	/* top-k and range: two uploaded chunks (cuda_base_load alternates);
	 * matrix: one, and its copy in double */
	double per_b = (k >= 1 || cfg->range ? 8 : 12) * d + cos_row +
		       low_row + 16;
	/* the sub-tiles' largest norm and smallest fn2 */
	double fixed = tile * 8 + 16 + 8 * (double)(brows / XJ_CUDA_TB + 1);
	double total;

	if (k >= 1) {
		cuda_tuning tu;
		xj_status ignore;

		double pr;

		/* a bad variable fails backend_cuda_create; count the defaults */
		if (cuda_tuning_get(&tu, &ignore)) {
			tu.rowsel = 1;
			tu.pipeline = 1;
			tu.pass_cols = 4 * XJ_CUDA_TB;
			tu.pass_rows = 4 * XJ_CUDA_TQ;
			tu.whole = 1;
		}
		pr = (double)cuda_pass_rows(&tu, qrows);
		/* candidate slots and counts, merge scratch, counters */
		fixed += (tu.rowsel && tu.whole ? pr * (double)tu.pass_cols :
			  pr * XJ_CUDA_TB) * 4 +
			 XJ_CUDA_TQ * 4.0 + pr * k * 12 + 32;
		if (tu.rowsel)   /* the passes' tiles */
			fixed += (tu.pipeline ? 2 : 1) * 4.0 * pr *
				 (double)tu.pass_cols;
		else             /* sort keys, keys, counts */
			fixed += tile * 12 + XJ_CUDA_TQ * 4.0;
	}
	else if (cfg->range)   /* candidate slots, the pair buffer */
		fixed += tile * 4 + XJ_CUDA_TQ * 4.0 + 8 +
			 tile * XJ_CUDA_RANGE_TILES * 16;
	else    /* a matrix's double GEMM: a query tile, its tile of dot
		 * products, the squares' flags, the count */
		fixed += XJ_CUDA_TQ * d * 8 + tile * 8 +
			 4 * (double)XJ_CUDA_SQUARES + 8;
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
