/*
 * topk_pass.cu: top-k's passes (XJ_CUDA_SELECT=rowsel, the default): a
 * GEMM of up to P = c->prows query rows (XJ_CUDA_PASS_ROWS) against up
 * to pass_cols base rows, and rowsel.cuh's kernel over it; and the host
 * run of that kernel for the tests (backend_cuda_host_topk).
 *
 * topk_add (topk_cuda.cu) walks a chunk's tiles as before (plain tiles of
 * P rows and a self-join's block pairs); consecutive plain tiles of the
 * same query rows are gathered into one pass, so a pass is one cuBLAS call
 * and one kernel launch for up to pass_cols / TB tiles.
 *
 * Streams (tune.pipeline): a pass's GEMM runs on gstream into one of two
 * tile buffers gp[s], its selection on the compute stream behind it:
 *
 *   gstream   wait sel_done[s] | GEMM -> gp[s] | record gemm_done[s]
 *   stream    wait gemm_done[s] | rowsel(gp[s]) | record sel_done[s]
 *
 * so the GEMM of pass p + 1 runs while the selection of pass p does, and
 * a buffer is written again only once the selection that read it is
 * done. The selections stay in order on the compute stream (each reads
 * the gates and lists the one before left). The chunk's rows and norms,
 * prepared on the compute stream, are what the GEMMs read: gstream waits
 * for prep_done first. Everything the GEMMs read of a chunk is read
 * before the last selection of that chunk starts, which is what the
 * chunk's consumed event (recorded on the compute stream) then covers.
 * Without the pipeline both run on the compute stream into gp[0].
 *
 * Cost per pass: one cublasSgemm (or GemmEx) of P x W x d and one
 * kernel of P blocks (rowsel.cuh's counts); the tile, P x W floats
 * (128 MiB at 2048 x 16384), is written by the GEMM and read once by the
 * scan.
 */
#include "backend_cuda_int.h"

#include <cstdlib>
#include <cstring>

#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include "../selfjoin.h"
}

#include "canonical.cuh"
#include "check.cuh"
#include "once.cuh"
#include "rowsel.cuh"

static_assert(RS_ROWS_MAX == XJ_CUDA_RS_ROWS, "a joint block's rows");

static cudaStream_t gemm_stream(const cuda_backend *c)
{
	return c->tune.pipeline ? c->gstream : c->stream;
}

static cublasHandle_t gemm_blas(const cuda_backend *c)
{
	return c->tune.pipeline ? c->gblas : c->blas;
}

int cuda_pass_chunk(cuda_backend *c, xj_status *st)
{
	if (!c->tune.pipeline)
		return XJ_OK;
	CUDA_CHECK(st, cudaEventRecord(c->prep_done, c->stream));
	CUDA_CHECK(st, cudaStreamWaitEvent(c->gstream, c->prep_done, 0));
	return XJ_OK;
}

/* The next tile buffer; the GEMM stream first waits until the
 * selection that last read it is done. */
static int slot_take(cuda_backend *c, int *slot, xj_status *st)
{
	int s = c->next_gp;

	*slot = s;
	if (!c->tune.pipeline)
		return XJ_OK;
	c->next_gp = 1 - s;
	CUDA_CHECK(st, cudaStreamWaitEvent(c->gstream, c->sel_done[s], 0));
	return XJ_OK;
}

/* The selection of slot s waits for its GEMM. */
static int slot_ready(cuda_backend *c, int s, xj_status *st)
{
	if (!c->tune.pipeline)
		return XJ_OK;
	CUDA_CHECK(st, cudaEventRecord(c->gemm_done[s], c->gstream));
	CUDA_CHECK(st, cudaStreamWaitEvent(c->stream, c->gemm_done[s], 0));
	return XJ_OK;
}

static int slot_done(cuda_backend *c, int s, xj_status *st)
{
	if (c->tune.pipeline)
		CUDA_CHECK(st, cudaEventRecord(c->sel_done[s], c->stream));
	return XJ_OK;
}

/* rowsel's arguments for query-chunk rows [i0, i0 + tq) against chunk
 * rows [j0, j0 + ncols), the values in g (row stride ldg). */
static rowsel_args pass_args(const cuda_backend *c, const xj_rows *b,
			     const float *g, int64_t ldg, int64_t i0,
			     int64_t j0, int ncols, xj_precision p)
{
	const xj_backend_cfg *cfg = &c->cfg;
	int64_t d = cfg->d, k = cfg->k;
	rowsel_args a;

	memset(&a, 0, sizeof(a));
	a.g = g;
	a.ldg = ldg;
	a.ncols = ncols;
	a.j0 = j0;
	a.tb = XJ_CUDA_TB;
	a.fn2 = xjc_is_sq(cfg->metric) ? c->bn2 : NULL;
	a.subfmin = a.fn2 && c->tune.fmin ? c->subfmin : NULL;
	a.submax = c->submax;
	a.m = (int)cfg->metric;
	a.d = d;
	a.prec = (int)p;
	a.qx = c->q + i0 * d;
	a.qq = c->qq + i0;
	a.qnorm = c->qnorm + i0;
	a.gate = c->gate + i0;
	a.bx = c->b;
	a.bb = c->bb;
	a.self = cfg->self;
	a.qfirst = c->qfirst + i0;
	a.bfirst = b->first_row;
	a.has_thr = cfg->has_threshold;
	a.thr_key = cfg->threshold_key;
	a.gate0 = c->gate0;
	a.k = k;
	a.ekey = c->ekey + i0 * k;
	a.eidx = c->eidx + i0 * k;
	a.ecount = c->ecount + i0;
	a.tkey = c->tkey;
	a.tidx = c->tidx;
	a.cand = c->cand;
	a.whole = c->tune.whole;
	a.cap = a.whole ? c->tune.pass_cols : XJ_CUDA_TB;
	a.seed = c->tune.seed;
	a.rows = c->tune.rs_rows;
	a.stats = c->stats;
	return a;
}

/* The GEMM's operands for rows x0 (queries) and y0 (base), as the
 * precision p reads them. */
static void gemm_operands(const cuda_backend *c, xj_precision p, int64_t q0,
			  int64_t b0, int sym, const void **qa,
			  const void **ba)
{
	int64_t d = c->cfg.d;
	int cosine = c->cfg.metric == XJ_METRIC_COSINE;
	const float *q = sym ? (cosine ? c->bhat : c->b) :
			       (cosine ? c->qhat : c->q);
	const float *x = cosine ? c->bhat : c->b;

	if (p == XJ_PREC_BF16 || p == XJ_PREC_FP16) {
		*qa = (sym ? c->blow : c->qlow) + q0 * d;
		*ba = c->blow + b0 * d;
		return;
	}
	*qa = q + q0 * d;
	*ba = x + b0 * d;
}

/*
 * The exponent e of the 16-bit tile's scale (canonical.cuh): with
 * |alpha| 2^e P <= 2^15, P = (1 + acc)(1 + 2^-20) d (qmax (1 + 2^-11) +
 * 2^-14)(bmax (1 + 2^-11) + 2^-14) for the largest |x_i| qmax and bmax
 * the GEMM reads, |alpha' acc| stays below 2^15: by Cauchy-Schwarz |acc|
 * <= (1 + acc)(Q + dq)(B + db) of metric.c's bound, and Q + dq <=
 * sqrt(d) (qmax (1 + up) + eta) with fp16's up = 2^-11, eta = 2^-14. As
 * qmax, bmax <= 65504, e lies in about [-40, 43]; the tile's unit 2^-e
 * times any fp16 value other than 0 is then a normal float.
 */
static int tile16_exp(int m, int64_t d, float qmax, float bmax)
{
	double n = (double)d, u = 0x1p-24;
	double acc = 6.0 * n * u / (1.0 - 6.0 * n * u);
	double p = (xjc_is_sq(m) ? 2.0 : 1.0) * (1.0 + acc) *
		   (1.0 + 0x1p-20) * n *
		   ((double)qmax * (1.0 + 0x1p-11) + 0x1p-14) *
		   ((double)bmax * (1.0 + 0x1p-11) + 0x1p-14);
	int x;

	if (!(acc >= 0 && acc < 1) || !(p < DBL_MAX))
		return 0;   /* the bound is infinite: every column is kept
			     * (an overflow gives +-inf, kept, never NaN) */
	frexp(p, &x);              /* p < 2^x */
	return 15 - x;
}

static int sel_run(cuda_backend *c, const rowsel_args &a, int tq,
		   xj_status *st)
{
	int kt;

	if (cuda_kt_start(c, KT_ROWSEL, c->stream, &kt, st) ||
	    rowsel(a, tq, c->tune.rs_blocks, c->stream, st) ||
	    cuda_kt_stop(c, kt, c->stream, st))
		return st->code;
	return XJ_OK;
}

/* A pass's GEMM on the GEMM stream into the next tile buffer (its slot
 * in *slot): tq x nb values alpha qa ba^T, row-major, as floats or (t16)
 * as the 16-bit tile of scale 2^e; the selection's stream then waits for
 * it. */
static int pass_gemm(cuda_backend *c, xj_precision p, int t16, int e,
		     float alpha, int tq, int nb, const void *qa,
		     const void *ba, int *slot, xj_status *st)
{
	int kt;

	if (slot_take(c, slot, st) ||
	    cuda_kt_start(c, KT_GEMM, gemm_stream(c), &kt, st) ||
	    (t16 ? cuda_gemm_run16(gemm_blas(c), nb, tq, c->cfg.d,
				   ldexpf(alpha, e), ba, qa, c->gp[*slot],
				   st) :
		   cuda_gemm_run(gemm_blas(c), p, nb, tq, c->cfg.d, alpha, ba,
				 qa, c->gp[*slot], st)) ||
	    cuda_kt_stop(c, kt, gemm_stream(c), st) ||
	    slot_ready(c, *slot, st))
		return st->code;
	return XJ_OK;
}

int cuda_pass_plain(cuda_backend *c, const xj_rows *b, int64_t i0, int tq,
		    int64_t j0, int nb, xj_status *st)
{
	xj_precision p = cuda_tile_prec(c);
	float alpha = xjc_is_sq(c->cfg.metric) ? -2.0f : -1.0f;
	int t16 = p == XJ_PREC_FP16 && c->tune.tile16;
	int e = t16 ? tile16_exp(c->cfg.metric, c->cfg.d, c->qmax16,
				 c->bmax16) : 0;
	const void *qa, *ba;
	rowsel_args a;
	int s;

	if (nb > c->tune.pass_cols || tq > c->prows)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "a pass of %d x %d (at most %lld x %lld)", tq,
			       nb, (long long)c->prows,
			       (long long)c->tune.pass_cols);
	gemm_operands(c, p, i0, j0, 0, &qa, &ba);
	if (pass_gemm(c, p, t16, e, alpha, tq, nb, qa, ba, &s, st))
		return st->code;
	a = pass_args(c, b, c->gp[s], nb, i0, j0, nb, p);
	if (t16) {
		a.g = NULL;
		a.gh = (const __half *)c->gp[s];
		a.gunit = ldexpf(1.0f, -e);
	}
	if (sel_run(c, a, tq, st) || slot_done(c, s, st))
		return st->code;
	return XJ_OK;
}

/*
 * A self-join's block pair (topk_cuda.cu's argument): D = alpha X_a X_b^T
 * (na x nb, chunk rows sa = i0 - off and sb = j0) and its transpose (nb x
 * na) in one tile buffer, then the row tile (queries i0.., base sb..) and
 * the column tile (queries sb + off.., base sa..).
 */
int cuda_pass_pair(cuda_backend *c, const xj_rows *b, int64_t i0, int na,
		   int64_t j0, int nb, int64_t off, xj_status *st)
{
	xj_precision p = cuda_tile_prec(c);
	float alpha = xjc_is_sq(c->cfg.metric) ? -2.0f : -1.0f;
	float one = 1.0f, zero = 0.0f, *g, *gt;
	int64_t sa = i0 - off, sb = j0;
	const void *xa, *xb;
	int s, kg, kt;

	if (2 * (int64_t)SYM_BLOCK * SYM_BLOCK >
	    (int64_t)XJ_CUDA_TQ * c->tune.pass_cols)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "a block pair does not fit the pass tile");
	gemm_operands(c, p, sa, sb, 1, &xa, &xb);
	if (slot_take(c, &s, st))
		return st->code;
	g = c->gp[s];
	gt = g + (int64_t)SYM_BLOCK * SYM_BLOCK;
	if (cuda_kt_start(c, KT_GEMM, gemm_stream(c), &kg, st) ||
	    cuda_gemm_run(gemm_blas(c), p, nb, na, c->cfg.d, alpha, xb, xa, g,
			  st) ||
	    cuda_kt_stop(c, kg, gemm_stream(c), st) ||
	    cuda_kt_start(c, KT_TRANSPOSE, gemm_stream(c), &kt, st))
		return st->code;
	/* gt = g^T (column-major: g is nb x na, ld nb; gt na x nb, ld na) */
	CUBLAS_CHECK(st, cublasSgeam(gemm_blas(c), CUBLAS_OP_T, CUBLAS_OP_N,
				     na, nb, &one, g, nb, &zero, gt, na, gt,
				     na));
	if (cuda_kt_stop(c, kt, gemm_stream(c), st) || slot_ready(c, s, st) ||
	    sel_run(c, pass_args(c, b, g, nb, i0, sb, nb, p), na, st) ||
	    sel_run(c, pass_args(c, b, gt, na, sb + off, sa, na, p), nb, st) ||
	    slot_done(c, s, st))
		return st->code;
	return XJ_OK;
}

/* Columns of a pass read once (XJ_CUDA_SYM=2): G and its transposed
 * tile, SYM_BLOCK rows each way, share a pass's tile buffer. */
int64_t cuda_once_cols(const cuda_backend *c)
{
	int t16 = cuda_tile_prec(c) == XJ_PREC_FP16 && c->tune.tile16;
	int64_t fit = c->prows * c->tune.pass_cols * (int64_t)sizeof(float) /
		      (2 * (int64_t)SYM_BLOCK *
		       (int64_t)(t16 ? sizeof(__half) : sizeof(float)));

	return MIN64(c->tune.pass_cols, fit);
}

/*
 * A self-join's pass read once (once.cuh): query-chunk rows [i0, i0 + na)
 * of one block (chunk rows sa = i0 - off) against chunk rows [j0, j0 +
 * nb) of the shared rows after it: one GEMM, one scan for both sides,
 * then each side's batches.
 */
int cuda_pass_once(cuda_backend *c, const xj_rows *b, int64_t i0, int na,
		   int64_t j0, int nb, int64_t off, xj_status *st)
{
	xj_precision p = cuda_tile_prec(c);
	float alpha = xjc_is_sq(c->cfg.metric) ? -2.0f : -1.0f;
	int t16 = p == XJ_PREC_FP16 && c->tune.tile16;
	/* both sides are chunk rows: bmax16 bounds them */
	int e = t16 ? tile16_exp(c->cfg.metric, c->cfg.d, c->bmax16,
				 c->bmax16) : 0;
	int64_t sa = i0 - off;
	const void *xa, *xb;
	once_args o;
	int s, kt;

	if (na > SYM_BLOCK || nb > cuda_once_cols(c) || !c->once_cand)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "a pass read once of %d x %d (at most %d x %lld)",
			       na, nb, SYM_BLOCK,
			       (long long)cuda_once_cols(c));
	gemm_operands(c, p, sa, j0, 1, &xa, &xb);
	if (pass_gemm(c, p, t16, e, alpha, na, nb, xa, xb, &s, st))
		return st->code;
	o.ra = pass_args(c, b, c->gp[s], nb, i0, j0, nb, p);
	o.ca = pass_args(c, b, c->gp[s] + (int64_t)na * nb, na, j0 + off, sa,
			 na, p);
	if (t16) {
		const __half *gh = (const __half *)c->gp[s];

		o.ra.g = o.ca.g = NULL;
		o.ra.gh = gh;
		o.ca.gh = gh + (int64_t)na * nb;
		o.ra.gunit = o.ca.gunit = ldexpf(1.0f, -e);
	}
	o.ca.cand = c->once_cand;
	o.ca.cap = SYM_BLOCK;
	o.na = na;
	o.nb = nb;
	o.rn = c->once_n;
	o.cn = c->once_n + SYM_BLOCK;
	o.tcol = c->once_tcol;
	o.xbmax = c->submax + sa / XJ_CUDA_TB;
	CUDA_CHECK(st, cudaMemsetAsync(c->once_n, 0,
				       (size_t)(SYM_BLOCK + nb) * sizeof(int),
				       c->stream));
	if (cuda_kt_start(c, KT_SCAN, c->stream, &kt, st) ||
	    once_scan(o, c->prows, c->stream, st) ||
	    cuda_kt_stop(c, kt, c->stream, st) ||
	    cuda_kt_start(c, KT_ROWSEL, c->stream, &kt, st) ||
	    once_lists(o, c->prows, c->stream, st) ||
	    cuda_kt_stop(c, kt, c->stream, st) || slot_done(c, s, st))
		return st->code;
	return XJ_OK;
}

/* ---- the pass on the host (tests) --------------------------------------- */

extern "C" void backend_cuda_host_topk_init(xj_metric m, int has_threshold,
					    float threshold_key, int64_t nq,
					    int64_t k, float *key,
					    int64_t *idx, int64_t *count,
					    double *gate)
{
	double g0 = has_threshold ? xjc_gate_approx((int)m, threshold_key)
				  : INFINITY;

	for (int64_t e = 0; e < nq * k; e++) {
		key[e] = INFINITY;
		idx[e] = -1;
	}
	for (int64_t r = 0; r < nq; r++) {
		count[r] = 0;
		gate[r] = g0;
	}
}

extern "C" int backend_cuda_host_tile16_exp(xj_metric m, int64_t d,
					   float qmax, float bmax)
{
	return tile16_exp((int)m, d, qmax, bmax);
}

extern "C" double backend_cuda_host_seed_gate(xj_metric m, int64_t d,
					      float t, double qq, float qnorm,
					      float bmax, xj_precision p,
					      double gunit)
{
	return xjc_seed_gate((int)m, d, t, qq, qnorm, bmax, (int)p, gunit);
}

/* Norms as prep_norms makes them. */
static void host_norms(const float *x, int64_t n, int64_t d, double *n2,
		       float *fn2, float *fnorm)
{
	for (int64_t r = 0; r < n; r++) {
		n2[r] = xjc_norm2(x + r * d, d);
		fn2[r] = XJC_F32(n2[r]);
		fnorm[r] = XJC_F32(XJC_SQRT(n2[r]));
	}
}

/* Rows' norms and sub-tile maxima, as prep_norms and base_prepare make
 * them. */
struct host_rows {
	double *n2;
	float *fn2, *fnorm, *submax;
};

static void host_rows_free(host_rows *h)
{
	free(h->n2);
	free(h->fn2);
	free(h->fnorm);
	free(h->submax);
}

static int host_rows_make(host_rows *h, const float *x, int64_t n, int64_t d,
			  int64_t tb)
{
	h->n2 = (double *)malloc(sizeof(double) * (size_t)(n + 1));
	h->fn2 = (float *)malloc(sizeof(float) * (size_t)(n + 1));
	h->fnorm = (float *)malloc(sizeof(float) * (size_t)(n + 1));
	h->submax = (float *)calloc((size_t)(n / tb + 1), sizeof(float));
	if (!h->n2 || !h->fn2 || !h->fnorm || !h->submax)
		return -1;
	host_norms(x, n, d, h->n2, h->fn2, h->fnorm);
	for (int64_t j = 0; j < n; j++)
		h->submax[j / tb] = fmaxf(h->submax[j / tb], h->fnorm[j]);
	return 0;
}

/* rowsel's arguments on the host for query rows q0.. of p (norms qr)
 * against the base rows (norms br) from chunk row j0, the lists and
 * gates from row q0; the caller adds the tile, its slots and the scan's
 * settings. */
static rowsel_args host_args(const backend_cuda_host_pass *p,
			     const host_rows *qr, const host_rows *br,
			     int64_t q0, int64_t j0, float *key, int64_t *idx,
			     int64_t *count, double *gate, float *tkey,
			     int64_t *tidx, unsigned long long *stats)
{
	rowsel_args a;

	memset(&a, 0, sizeof(a));
	a.j0 = j0;
	a.tb = p->tb;
	a.fn2 = xjc_is_sq(p->metric) ? br->fn2 : NULL;
	a.submax = br->submax;
	a.m = (int)p->metric;
	a.d = p->d;
	a.prec = (int)p->p;
	a.qx = p->q + q0 * p->d;
	a.qq = qr->n2 + q0;
	a.qnorm = qr->fnorm + q0;
	a.gate = gate + q0;
	a.bx = p->b;
	a.bb = br->n2;
	a.self = p->self;
	a.qfirst = p->qfirst + q0;
	a.bfirst = p->bfirst;
	a.has_thr = p->has_threshold;
	a.thr_key = p->threshold_key;
	a.gate0 = p->has_threshold ?
		  xjc_gate_approx((int)p->metric, p->threshold_key) : INFINITY;
	a.k = p->k;
	a.ekey = key + q0 * p->k;
	a.eidx = idx + q0 * p->k;
	a.ecount = count + q0;
	a.tkey = tkey;
	a.tidx = tidx;
	a.rows = 1;
	a.stats = stats;
	return a;
}

extern "C" int backend_cuda_host_topk(const backend_cuda_host_pass *p,
				      float *key, int64_t *idx,
				      int64_t *count, double *gate,
				      unsigned long long stats[5],
				      xj_status *st)
{
	int64_t k = p->k, nq = p->nq, nb = p->nb, tb = p->tb;
	int64_t nsub = nb / tb + 1;
	int64_t cap = p->whole && p->pass_cols > tb ? p->pass_cols : tb;
	host_rows qr = { NULL, NULL, NULL, NULL }, br = qr;
	float *subfmin = (float *)malloc(sizeof(float) * (size_t)nsub);
	int *cand = (int *)malloc(sizeof(int) * (size_t)(p->tq * cap));
	float *tkey = (float *)malloc(sizeof(float) * (size_t)(p->tq * k));
	int64_t *tidx = (int64_t *)malloc(sizeof(int64_t) *
					  (size_t)(p->tq * k));
	__half *gh = p->tile16 ? (__half *)malloc(sizeof(__half) *
						   (size_t)(nq * nb + 1)) :
				 NULL;
	int rc = XJ_OK;

	if (!subfmin || !cand || !tkey || !tidx || (p->tile16 && !gh) ||
	    host_rows_make(&qr, p->q, nq, p->d, tb) ||
	    host_rows_make(&br, p->b, nb, p->d, tb)) {
		rc = xj_fail(st, XJ_EXIT_RESOURCE, "host pass: out of memory");
		goto done;
	}
	for (int64_t e = 0; p->tile16 && e < nq * nb; e++) {
		gh[e] = __float2half_rn(p->g[e]);
		if (!(__half2float(gh[e]) == p->g[e]) || p->p != XJ_PREC_FP16) {
			rc = xj_fail(st, XJ_EXIT_INTERNAL,
				     "host pass: %a is no fp16 value", p->g[e]);
			goto done;
		}
	}
	/* poison what the kernel must write before it reads */
	memset(cand, 0xa5, sizeof(int) * (size_t)(p->tq * cap));
	memset(tkey, 0xa5, sizeof(float) * (size_t)(p->tq * k));
	memset(tidx, 0xa5, sizeof(int64_t) * (size_t)(p->tq * k));
	for (int64_t j = 0; j < nsub; j++)
		subfmin[j] = INFINITY;
	for (int64_t j = 0; j < nb; j++)
		subfmin[j / tb] = fminf(subfmin[j / tb], br.fn2[j]);
	for (int64_t i0 = 0; i0 < nq && !rc; i0 += p->tq)
		for (int64_t j0 = 0; j0 < nb && !rc; j0 += p->pass_cols) {
			int tq = (int)MIN64(p->tq, nq - i0);
			rowsel_args a = host_args(p, &qr, &br, i0, j0, key, idx,
						  count, gate, tkey, tidx,
						  stats);

			a.g = gh ? NULL : p->g + i0 * nb + j0;
			a.gh = gh ? gh + i0 * nb + j0 : NULL;
			a.gunit = gh ? ldexpf(1.0f, -p->e16) : 0.0f;
			a.ldg = nb;
			a.ncols = (int)MIN64(p->pass_cols, nb - j0);
			a.subfmin = a.fn2 && p->fmin ? subfmin : NULL;
			a.cand = cand;
			a.cap = cap;
			a.seed = p->seed;
			a.whole = p->whole;
			a.rows = p->rows ? p->rows : 1;
			rc = rowsel_host(a, tq, st);
		}
done:
	host_rows_free(&qr);
	host_rows_free(&br);
	free(subfmin);
	free(cand);
	free(tkey);
	free(tidx);
	free(gh);
	return rc;
}

/* Block [x0, x0 + nx) against its own rows: backend_cuda_host_topk on a
 * copy of g's diagonal block. */
static int host_diag(const backend_cuda_host_pass *p, int64_t x0, int64_t nx,
		     float *key, int64_t *idx, int64_t *count, double *gate,
		     unsigned long long stats[5], xj_status *st)
{
	backend_cuda_host_pass dp = *p;
	float *gd = (float *)malloc(sizeof(float) * (size_t)(nx * nx));
	int rc;

	if (!gd)
		return xj_fail(st, XJ_EXIT_RESOURCE, "host pass: out of memory");
	for (int64_t i = 0; i < nx; i++)
		memcpy(gd + i * nx, p->g + (x0 + i) * p->nb + x0,
		       sizeof(float) * (size_t)nx);
	dp.q = dp.b = p->q + x0 * p->d;
	dp.nq = dp.nb = nx;
	dp.qfirst = dp.bfirst = x0;
	dp.g = gd;
	dp.tq = nx;
	rc = backend_cuda_host_topk(&dp, key + x0 * p->k, idx + x0 * p->k,
				    count + x0, gate + x0, stats, st);
	free(gd);
	return rc;
}

extern "C" int backend_cuda_host_selfjoin_once(const backend_cuda_host_pass *p,
					       float *key, int64_t *idx,
					       int64_t *count, double *gate,
					       unsigned long long stats[5],
					       xj_status *st)
{
	int64_t n = p->nb, d = p->d, k = p->k, bs = p->tq, w = p->pass_cols;
	int64_t rows = bs > w ? bs : w;
	host_rows h = { NULL, NULL, NULL, NULL };
	int *rcand = (int *)malloc(sizeof(int) * (size_t)(bs * w));
	int *ccand = (int *)malloc(sizeof(int) * (size_t)(w * bs));
	int *cnt = (int *)malloc(sizeof(int) * (size_t)(bs + w));
	float *tcol = (float *)malloc(sizeof(float) * (size_t)w);
	float *tkey = (float *)malloc(sizeof(float) * (size_t)(rows * k));
	int64_t *tidx = (int64_t *)malloc(sizeof(int64_t) *
					  (size_t)(rows * k));
	float *gt = (float *)malloc(sizeof(float) * (size_t)(w * bs));
	__half *gh = p->tile16 ? (__half *)malloc(sizeof(__half) *
						   (size_t)(n * n + 1)) :
				 NULL;
	int rc = XJ_OK;

	if (!p->self || p->q != p->b || p->nq != n || p->qfirst != 0 ||
	    p->bfirst != 0 || bs < 1 || p->tb % bs || w < 1 ||
	    (p->tile16 && p->p != XJ_PREC_FP16)) {
		rc = xj_fail(st, XJ_EXIT_INTERNAL, "host once: not a self-join");
		goto done;
	}
	if (!rcand || !ccand || !cnt || !tcol || !tkey || !tidx || !gt ||
	    (p->tile16 && !gh) || host_rows_make(&h, p->b, n, d, p->tb)) {
		rc = xj_fail(st, XJ_EXIT_RESOURCE, "host once: out of memory");
		goto done;
	}
	for (int64_t e = 0; p->tile16 && e < n * n; e++) {
		gh[e] = __float2half_rn(p->g[e]);
		if (!(__half2float(gh[e]) == p->g[e])) {
			rc = xj_fail(st, XJ_EXIT_INTERNAL,
				     "host once: %a is no fp16 value", p->g[e]);
			goto done;
		}
	}
	for (int64_t x0 = 0; x0 < n && !rc; x0 += bs)
		rc = host_diag(p, x0, MIN64(bs, n - x0), key, idx, count, gate,
			       stats, st);
	for (int64_t x0 = 0; x0 < n && !rc; x0 += bs) {
		int64_t nx = MIN64(bs, n - x0);

		for (int64_t j0 = x0 + nx; j0 < n && !rc; j0 += w) {
			int64_t nb = MIN64(w, n - j0);
			once_args o;

			memset(&o, 0, sizeof(o));
			/* poison what the pass must write before it reads */
			memset(rcand, 0xa5, sizeof(int) * (size_t)(bs * w));
			memset(ccand, 0xa5, sizeof(int) * (size_t)(w * bs));
			memset(cnt, 0, sizeof(int) * (size_t)(bs + w));
			memset(tcol, 0xa5, sizeof(float) * (size_t)w);
			memset(tkey, 0xa5, sizeof(float) * (size_t)(rows * k));
			memset(tidx, 0xa5, sizeof(int64_t) * (size_t)(rows * k));
			memset(gt, 0xa5, sizeof(float) * (size_t)(w * bs));
			for (int side = 0; side < 2; side++) {
				rowsel_args *a = side ? &o.ca : &o.ra;
				int64_t q0 = side ? j0 : x0, b0 = side ? x0 : j0;

				*a = host_args(p, &h, &h, q0, b0, key, idx, count,
					       gate, tkey, tidx, stats);
				a->ldg = side ? nx : n;
				if (gh)
					a->gh = side ? (const __half *)gt :
						       gh + x0 * n + j0;
				else
					a->g = side ? gt : p->g + x0 * n + j0;
				a->gunit = gh ? ldexpf(1.0f, -p->e16) : 0.0f;
				a->ncols = (int)(side ? nx : nb);
				a->cand = side ? ccand : rcand;
				a->cap = side ? bs : w;
				a->whole = 1;
			}
			o.na = (int)nx;
			o.nb = (int)nb;
			o.rn = cnt;
			o.cn = cnt + bs;
			o.tcol = tcol;
			o.xbmax = h.submax + x0 / p->tb;
			rc = once_pass_host(o, st);
		}
	}
done:
	host_rows_free(&h);
	free(rcand);
	free(ccand);
	free(cnt);
	free(tcol);
	free(tkey);
	free(tidx);
	free(gt);
	free(gh);
	return rc;
}
