/*
 * test_cuda_precision.c: the error bound of the lower-precision candidate
 * GEMM (--precision tf32|bf16|fp16) against emulated and real roundings.
 *
 *   test_cuda_precision              host suite, then the device suite;
 *                                    with no usable device prints
 *                                    "SKIPPED: <reason>" and exits 77
 *   test_cuda_precision --host-only  host suite only (no GPU needed)
 *
 * Host suite:
 *   - metric_err_bound_prec (metric.c) and the device copy
 *     (canonical.cuh) give the same bits; fp32 is metric_err_bound; the
 *     bound grows with both norms.
 *   - the rounding emulations below equal CUDA's own conversions
 *     (__float2bfloat16_rn, __float2half_rn, on the host) and stay within
 *     the |r(x) - x| <= up |x| + eta of metric.c; the fp16 range test.
 *   - on random rows (d = 1 .. 1024, scales from 1e-6 to 1e6, offsets)
 *     and on GloVe rows, every pair's approx-space value, computed as the
 *     backend computes it from inputs rounded as each precision may round
 *     them (tf32: to nearest even, toward zero, to nearest away; bf16 and
 *     fp16: as CUDA converts; fp16 with subnormals flushed too) and
 *     accumulated in float32 three ways (in order to nearest, in order
 *     toward zero, blocks of 16 summed in double then truncated: the
 *     tensor-core model), is within the bound of the exact value; the
 *     tightness (bound / largest error) is printed and must stay below a
 *     limit.
 * Device suite:
 *   - the backend's own GEMM (backend_cuda_test_gemm) in each precision
 *     is within the bound on the same data: the model checked on the
 *     hardware;
 *   - top-k through the CUDA backend in each precision has the CPU
 *     backend's bits for every metric, with data that needs rescoring,
 *     fp16 subnormals and a chunk beyond fp16's range, and self-joins
 *     (each pair of shared rows scored once, in every precision).
 * Output buffers are poisoned before every call.
 */
#include <CUnit/Basic.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/backend_cuda.h"
#include "kernels/metric.h"
#define TESTDATA_SEED 0x7e57c0de5eedull
#include "tests/unit/testdata.h"
#include "tests/backend/contract.h"
#include "tests/gpu/gpu_test.h"
#include "tests/unit/gemm_emul.h"
#include "tests/unit/glove.h"
#include "tests/unit/unit.h"

static const xj_precision precs[] = { XJ_PREC_TF32, XJ_PREC_BF16,
				      XJ_PREC_FP16 };

/* ---- roundings ---------------------------------------------------------- */

/* gemm_emul.h's modes, and CUDA's own conversions */
enum { R_CUDA = R_MODES, R_CUDA_FTZ };

typedef struct variant {
	const char *name;
	xj_precision p;
	rmode mode;
} variant;

/* Every way the GEMM's inputs may be rounded (metric.c): cuBLAS rounds
 * tf32 itself, in a way it does not document. */
static const variant variants[] = {
	{ "tf32 nearest-even", XJ_PREC_TF32, R_NEAREST_EVEN },
	{ "tf32 toward zero", XJ_PREC_TF32, R_ZERO },
	{ "tf32 nearest-away", XJ_PREC_TF32, R_NEAREST_AWAY },
	{ "bf16", XJ_PREC_BF16, R_CUDA },
	{ "fp16", XJ_PREC_FP16, R_CUDA },
	{ "fp16 flush-to-zero", XJ_PREC_FP16, R_CUDA_FTZ },
};
#define NVAR ((int)(sizeof(variants) / sizeof(variants[0])))

static float vround(const variant *v, float x)
{
	float r;

	switch (v->mode) {
	case R_CUDA:
		return backend_cuda_host_round(v->p, x);
	case R_CUDA_FTZ:
		r = backend_cuda_host_round(v->p, x);
		return fabsf(r) < 0x1p-14f ? copysignf(0.0f, r) : r;
	default:
		return round_bits(x, 10, v->mode);
	}
}

/* ---- rows and the exact values ------------------------------------------ */

/* nq query and nb base rows of GloVe (glove.h). */
static void rows_glove(rows *Q, int64_t nq, rows *B, int64_t nb)
{
	float *q = NULL, *b = NULL;
	int64_t d = 0;

	CU_ASSERT_FATAL(glove_rows(&q, nq, &b, nb, &d) == 0);
	CU_ASSERT_FATAL(rows_make(Q, q, nq, d) == 0);
	CU_ASSERT_FATAL(rows_make(B, b, nb, d) == 0);
}

/* fp16 cannot hold the rows of Q or B: that chunk runs the float32 GEMM
 * (the normalised rows of cosine always fit). */
static int fp16_falls_back(const rows *Q, const rows *B)
{
	return !backend_cuda_host_fp16_fits(Q->x, Q->n * Q->d) ||
	       !backend_cuda_host_fp16_fits(B->x, B->n * B->d);
}

/* exact_of every pair of Q x B, row-major. */
static exact *exact_table(const rows *Q, const rows *B)
{
	int64_t d = Q->d;
	exact *ex = malloc(sizeof(exact) * (size_t)(Q->n * B->n + 1));

	CU_ASSERT_FATAL(ex != NULL);
	for (int64_t i = 0; i < Q->n; i++)
		for (int64_t j = 0; j < B->n; j++)
			ex[i * B->n + j] = exact_of(Q->x + i * d, B->x + j * d,
						    d, Q->n2[i], B->n2[j]);
	return ex;
}

/* ---- the check ---------------------------------------------------------------- */

/* Largest |approx - exact| / bound seen, per variant and metric. */
typedef struct tally {
	double worst[NVAR][4];
	double worst_err[NVAR][4];
	double worst_bound[NVAR][4];
	int64_t pairs, bad;
	int fallback;      /* fp16 chunks that took the float32 path */
} tally;

static void tally_init(tally *t)
{
	memset(t, 0, sizeof(*t));
}

static void tally_add(tally *t, int v, int mi, double err, double bound,
		      const char *where)
{
	double r = err / bound;

	if (!(err <= bound)) {
		if (t->bad++ < 6)
			printf("\n  %s %s %s: |approx - exact| = %.6g > bound %.6g",
			       variants[v].name, metric_names[mi], where, err,
			       bound);
	}
	if (r > t->worst[v][mi]) {
		t->worst[v][mi] = r;
		t->worst_err[v][mi] = err;
		t->worst_bound[v][mi] = bound;
	}
}

/* The approx-space value the backend's scan sees for each metric, from
 * the accumulated dot product (acc of the raw rows, hacc of the
 * normalised ones), as topk_cuda.cu and select.cuh compute it. */
static void check_pair(tally *t, int v, xj_precision p, xj_precision ph,
		       int64_t d, const rows *Q, int64_t i, const rows *B,
		       int64_t j, float acc, float hacc, const exact *ex,
		       const char *where)
{
	for (size_t mi = 0; mi < 4; mi++) {
		xj_metric m = metrics[mi];
		double bound, a;
		long double want;

		if (m == XJ_METRIC_COSINE) {
			bound = metric_err_bound_prec(m, d, 1, 1, ph);
			a = 1.0 + (double)(-1.0f * hacc);
			want = ex->cosd;
		} else if (m == XJ_METRIC_IP) {
			bound = metric_err_bound_prec(m, d, Q->fnorm[i],
						      B->fnorm[j], p);
			a = (double)(-1.0f * acc);
			want = -ex->dot;
		} else {
			float g = -2.0f * acc;
			float vv = B->fn2[j] + g;

			bound = metric_err_bound_prec(m, d, Q->fnorm[i],
						      B->fnorm[j], p);
			a = Q->n2[i] + (double)vv;
			want = ex->sq;
		}
		tally_add(t, v, (int)mi,
			  (double)fabsl((long double)a - want), bound, where);
	}
}

/* Room for the rows of R, rounded. */
static float *rows_buf(const rows *R)
{
	return malloc(sizeof(float) * (size_t)(R->n * R->d + 1));
}

/* Every pair of Q x B, every variant and accumulation. */
static void check_rows(tally *t, const rows *Q, const rows *B, int nacc,
		       const char *where)
{
	int64_t d = Q->d;
	float *rq = rows_buf(Q), *rb = rows_buf(B);
	float *hq = rows_buf(Q), *hb = rows_buf(B);
	exact *ex = exact_table(Q, B);

	CU_ASSERT_FATAL(rq && rb && hq && hb);
	for (int v = 0; v < NVAR; v++) {
		const variant *var = &variants[v];
		xj_precision p = var->p;

		/* a chunk beyond fp16 runs the float32 GEMM, and bound */
		if (p == XJ_PREC_FP16 && fp16_falls_back(Q, B)) {
			t->fallback++;
			p = XJ_PREC_FP32;
		}
		for (int64_t e = 0; e < Q->n * d; e++) {
			rq[e] = p == XJ_PREC_FP32 ? Q->x[e] : vround(var, Q->x[e]);
			hq[e] = vround(var, Q->hat[e]);
		}
		for (int64_t e = 0; e < B->n * d; e++) {
			rb[e] = p == XJ_PREC_FP32 ? B->x[e] : vround(var, B->x[e]);
			hb[e] = vround(var, B->hat[e]);
		}
		for (int a = 0; a < nacc; a++) {
			/* the float32 fallback is cublasSgemm: round to nearest */
			accmode am = p == XJ_PREC_FP32 ? ACC_NEAREST :
				     (accmode)a;

			for (int64_t i = 0; i < Q->n; i++)
				for (int64_t j = 0; j < B->n; j++) {
					float acc = dot_acc(rq + i * d,
							    rb + j * d, d, am);
					float hacc = dot_acc(hq + i * d,
							     hb + j * d, d,
							     (accmode)a);

					check_pair(t, v, p, var->p, d, Q, i, B,
						   j, acc, hacc,
						   &ex[i * B->n + j], where);
					t->pairs++;
				}
		}
	}
	free(rq);
	free(rb);
	free(hq);
	free(hb);
	free(ex);
}

static void tally_print(const tally *t, const char *title)
{
	printf("\n  %s: %lld pair checks, %d fp16 fallback(s); bound / largest error:",
	       title, (long long)t->pairs, t->fallback);
	for (int v = 0; v < NVAR; v++) {
		printf("\n    %-20s", variants[v].name);
		for (size_t mi = 0; mi < 4; mi++)
			printf("  %s %7.1f", metric_names[mi],
			       t->worst[v][mi] > 0 ? 1 / t->worst[v][mi] : INFINITY);
	}
}

/* ---- host suite ----------------------------------------------------------- */

static void test_bound_bits(void)
{
	int64_t bad = 0;

	for (int i = 0; i < 3000; i++) {
		int64_t d = 1 + (int64_t)(rng_next() % 5000);
		double qn = rng_unit() * pow(10.0, (double)(i % 24) - 12);
		double bn = rng_unit() * pow(10.0, (double)(i % 17) - 8);

		for (size_t mi = 0; mi < 4; mi++) {
			xj_metric m = metrics[mi];
			double g = metric_gate_approx(m, (float)(rng_unit() * 4));
			double qq = qn * qn;

			for (int pi = 0; pi < 4; pi++) {
				xj_precision p = (xj_precision)pi;
				double want = metric_err_bound_prec(m, d, qn, bn, p);
				double got = backend_cuda_host_err_bound_prec(m, d,
						qn, bn, p);

				if (!same_f64(want, got) && bad++ < 4)
					printf("\n  %s %s d=%lld: device bound %.17g, host %.17g",
					       metric_names[mi],
					       precision_name(p), (long long)d,
					       got, want);
				if (!(want > 0) ||
				    !(metric_err_bound_prec(m, d, qn * 1.5, bn, p) >= want) ||
				    !(metric_err_bound_prec(m, d, qn, bn * 1.5, p) >= want))
					bad++;
			}
			if (!same_f64(metric_err_bound_prec(m, d, qn, bn,
							    XJ_PREC_FP32),
				      metric_err_bound(m, d, qn, bn)))
				bad++;
			if (!same_f32(backend_cuda_host_threshold_prec(m, d, g,
					qq, (float)qn, (float)bn, XJ_PREC_FP32),
				      backend_cuda_host_threshold(m, d, g, qq,
					(float)qn, (float)bn)))
				bad++;
		}
	}
	/* past the model's dimension: no bound, keep everything */
	CU_ASSERT(isinf(metric_err_bound_prec(XJ_METRIC_L2, 1 << 21, 1, 1,
					      XJ_PREC_BF16)));
	CU_ASSERT_EQUAL(bad, 0);
}

/* A float of every kind: random magnitudes, ties, edges of the ranges. */
static float value_sample(int i)
{
	static const float fixed[] = {
		0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, -65504.0f, 65519.996f,
		65520.0f, 1e-45f, 6.1035156e-05f, 6.0975552e-05f, 5.9604645e-08f,
		2.9802322e-08f, 2.9802326e-08f, 1.0009766f, 1.0029297f,
		1.0019531f, 3.0e38f, 1.17549435e-38f, 1.0e-39f,
	};
	int nf = (int)(sizeof(fixed) / sizeof(fixed[0]));
	uint32_t u;

	if (i < nf)
		return fixed[i];
	if (i % 3 == 0) {
		/* a tie of tf32/fp16 (13 dropped bits: 0x1000) or bf16 */
		u = (uint32_t)(rng_next() & 0x7fffe000u) |
		    (i % 2 ? 0x1000u : 0x8000u);
		return u2f(u & 0x7f7fffffu);
	}
	return (float)(rng_gauss() * pow(10.0, (double)(i % 50) - 25));
}

static void test_roundings(void)
{
	int64_t bad = 0;

	for (int i = 0; i < 200000; i++) {
		float x = value_sample(i);
		float b16 = backend_cuda_host_round(XJ_PREC_BF16, x);
		float f16 = backend_cuda_host_round(XJ_PREC_FP16, x);

		if (!isnan(x) && !same_f32(b16, round_bits(x, 7, R_NEAREST_EVEN)) &&
		    !(isinf(b16) && fabsf(x) > 3.3e38f) && bad++ < 4)
			printf("\n  bf16 of %.9g: CUDA %.9g, emulated %.9g", x,
			       b16, round_bits(x, 7, R_NEAREST_EVEN));
		if (!same_f32(f16, round_fp16(x)) && bad++ < 4)
			printf("\n  fp16 of %.9g: CUDA %.9g, emulated %.9g", x,
			       f16, round_fp16(x));
		if (!same_f32(backend_cuda_host_round(XJ_PREC_TF32, x), x) ||
		    !same_f32(backend_cuda_host_round(XJ_PREC_FP32, x), x))
			bad++;
		/* metric.c's |r(x) - x| <= up |x| + eta where the backend
		 * uses r (|x| below 1e19 after metric_check_rows; fp16 only
		 * up to 65504) */
		for (int v = 0; v < NVAR; v++) {
			double up = variants[v].p == XJ_PREC_BF16 ? 0x1p-8 :
				    variants[v].p == XJ_PREC_FP16 ? 0x1p-11 :
				    0x1p-10;
			double eta = variants[v].p == XJ_PREC_FP16 ? 0x1p-14 :
				     0x1p-126;
			float r = vround(&variants[v], x);

			if (fabsf(x) > 1e19f || (variants[v].p == XJ_PREC_FP16 &&
						 fabsf(x) > 65504.0f))
				continue;
			if (!(fabs((double)r - x) <= up * fabs((double)x) + eta) &&
			    bad++ < 4)
				printf("\n  %s of %.9g is %.9g", variants[v].name,
				       x, r);
		}
	}
	CU_ASSERT_EQUAL(bad, 0);
}

static void test_fp16_range(void)
{
	float x[4] = { 1.0f, -65504.0f, 65504.0f, 0.5f };

	CU_ASSERT(backend_cuda_host_fp16_fits(x, 4));
	x[3] = nextafterf(65504.0f, INFINITY);
	CU_ASSERT(!backend_cuda_host_fp16_fits(x, 4));
	CU_ASSERT(backend_cuda_host_fp16_fits(x, 3));
	x[3] = -1e30f;
	CU_ASSERT(!backend_cuda_host_fp16_fits(x, 4));
	CU_ASSERT(backend_cuda_host_fp16_fits(x, 0));
	/* the largest |x_i|, the 16-bit tile's start; +inf with a NaN */
	CU_ASSERT_EQUAL(backend_cuda_host_max_abs(x, 4), 1e30f);
	CU_ASSERT_EQUAL(backend_cuda_host_max_abs(x, 3), 65504.0f);
	CU_ASSERT_EQUAL(backend_cuda_host_max_abs(x, 0), 0.0f);
	x[0] = NAN;
	CU_ASSERT(isinf(backend_cuda_host_max_abs(x, 2)));
	CU_ASSERT(!backend_cuda_host_fp16_fits(x, 2));
	/* what fits rounds to a finite fp16 */
	CU_ASSERT(isfinite(backend_cuda_host_round(XJ_PREC_FP16, 65504.0f)));
	CU_ASSERT(isinf(backend_cuda_host_round(XJ_PREC_FP16, 65520.0f)));
}

/* (offset, scale) of the random rows: cancellation, fp16 subnormals,
 * fp16 overflow (the float32 fallback), plain. */
static const double scales[][2] = {
	{ 0, 1 }, { 0, 1e-3 }, { 0, 1e-6 }, { 0, 300 }, { 0, 3e4 },
	{ 10, 1 }, { 0, 1e6 },
};
#define NSCALE ((int)(sizeof(scales) / sizeof(scales[0])))
static const int64_t dims[] = { 1, 2, 3, 5, 8, 16, 31, 64, 100, 128, 257,
				512, 1024 };
#define NDIM ((int)(sizeof(dims) / sizeof(dims[0])))

/* n rows of scale si, d wide. */
static void rows_random(rows *r, int64_t n, int64_t d, int si)
{
	CU_ASSERT_FATAL(rows_make(r, gauss_rows(n, d, scales[si][0],
						scales[si][1]), n, d) == 0);
}

static void test_bound_random(void)
{
	tally all, main_case;
	const int64_t nq = 16, nb = 24;

	tally_init(&all);
	tally_init(&main_case);
	for (int di = 0; di < NDIM; di++)
		for (int si = 0; si < NSCALE; si++) {
			int64_t d = dims[di];
			rows Q, B;
			char where[64];

			rows_random(&Q, nq, d, si);
			rows_random(&B, nb, d, si);
			snprintf(where, sizeof(where), "d=%lld rows %g+%g N(0,1)",
				 (long long)d, scales[si][0], scales[si][1]);
			check_rows(&all, &Q, &B, NACC, where);
			/* the tightness that must hold: plain rows, d >= 16 */
			if (d >= 16 && si == 0)
				check_rows(&main_case, &Q, &B, NACC, where);
			rows_free(&Q);
			rows_free(&B);
		}
	tally_print(&all, "random rows, every d and scale");
	tally_print(&main_case, "random N(0,1) rows, d >= 16");
	CU_ASSERT_EQUAL(all.bad, 0);
	CU_ASSERT(all.fallback > 0);
	for (int v = 0; v < NVAR; v++)
		for (int mi = 0; mi < 4; mi++)
			CU_ASSERT(main_case.worst[v][mi] * 64 > 1);
}

static void test_bound_glove(void)
{
	rows Q, B;
	tally t;

	rows_glove(&Q, 40, &B, 250);
	tally_init(&t);
	check_rows(&t, &Q, &B, NACC, "GloVe");
	tally_print(&t, "GloVe rows");
	CU_ASSERT_EQUAL(t.bad, 0);
	for (int v = 0; v < NVAR; v++)
		for (int mi = 0; mi < 4; mi++)
			CU_ASSERT(t.worst[v][mi] * 64 > 1);
	rows_free(&Q);
	rows_free(&B);
}

/* ---- the 16-bit tile (XJ_CUDA_TILE16) ------------------------------------ */

typedef struct t16tally {
	double worst[4];     /* largest error / bound per metric */
	int64_t checks, bad, over;
} t16tally;

/* The scan's value of a 16-bit tile entry h (unit 2^-e) against the exact
 * one, for metric mi, within backend_cuda_host_err_bound_tile16. */
static void t16_check(t16tally *t, int mi, int64_t d, const rows *Q,
		      int64_t i, const rows *B, int64_t j, float acc, int e,
		      int mode, const exact *ex, const char *where)
{
	xj_metric m = metrics[mi];
	float alpha = m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN ?
		      -2.0f : -1.0f;
	float y = ldexpf(alpha, e) * acc;
	float g = round_out16(y, mode) * ldexpf(1.0f, -e);
	double gunit = ldexp(1.0, -e), bound, a;
	long double want;

	t->over += !(fabsf(y) <= 0x1p15f);
	if (m == XJ_METRIC_COSINE) {
		bound = backend_cuda_host_err_bound_tile16(m, d, 1, 1, gunit);
		a = 1.0 + (double)g;
		want = ex->cosd;
	} else if (m == XJ_METRIC_IP) {
		bound = backend_cuda_host_err_bound_tile16(m, d, Q->fnorm[i],
							   B->fnorm[j], gunit);
		a = (double)g;
		want = -ex->dot;
	} else {
		bound = backend_cuda_host_err_bound_tile16(m, d, Q->fnorm[i],
							   B->fnorm[j], gunit);
		a = Q->n2[i] + (double)(B->fn2[j] + g);
		want = ex->sq;
	}
	t->checks++;
	if (!((double)fabsl((long double)a - want) <= bound) && t->bad++ < 6)
		printf("\n  tile16 %s %s: |approx - exact| = %.6g > bound %.6g",
		       metric_names[mi], where,
		       (double)fabsl((long double)a - want), bound);
	if ((double)fabsl((long double)a - want) / bound > t->worst[mi])
		t->worst[mi] = (double)fabsl((long double)a - want) / bound;
}

/* Every pair of Q x B: fp16 inputs as CUDA converts them (subnormals
 * kept and flushed), three accumulations, three output roundings. */
static void t16_rows(t16tally *t, const rows *Q, const rows *B,
		     const char *where)
{
	int64_t d = Q->d;
	float *rq = rows_buf(Q), *rb = rows_buf(B);
	float *hq = rows_buf(Q), *hb = rows_buf(B);
	exact *ex = exact_table(Q, B);
	float one = 1.0f + 0x1p-20f;
	int e16[4];

	CU_ASSERT_FATAL(rq && rb && hq && hb && ex);
	for (int mi = 0; mi < 4; mi++) {
		int cos = metrics[mi] == XJ_METRIC_COSINE;

		e16[mi] = backend_cuda_host_tile16_exp(metrics[mi], d,
				cos ? one : backend_cuda_host_max_abs(Q->x, Q->n * d),
				cos ? one : backend_cuda_host_max_abs(B->x, B->n * d));
	}
	for (int v = 4; v < NVAR; v++) {   /* fp16, fp16 flush-to-zero */
		for (int64_t e = 0; e < Q->n * d; e++) {
			rq[e] = vround(&variants[v], Q->x[e]);
			hq[e] = vround(&variants[v], Q->hat[e]);
		}
		for (int64_t e = 0; e < B->n * d; e++) {
			rb[e] = vround(&variants[v], B->x[e]);
			hb[e] = vround(&variants[v], B->hat[e]);
		}
		for (int am = 0; am < NACC; am++)
			for (int64_t i = 0; i < Q->n; i++)
				for (int64_t j = 0; j < B->n; j++) {
					float acc = dot_acc(rq + i * d,
							    rb + j * d, d,
							    (accmode)am);
					float hacc = dot_acc(hq + i * d,
							     hb + j * d, d,
							     (accmode)am);

					for (int o = 0; o < NOUT; o++)
						for (int mi = 0; mi < 4; mi++)
							t16_check(t, mi, d, Q, i, B, j,
								  metrics[mi] == XJ_METRIC_COSINE ?
								  hacc : acc, e16[mi], o,
								  &ex[i * B->n + j], where);
				}
	}
	free(rq);
	free(rb);
	free(hq);
	free(hb);
	free(ex);
}

/* Random rows of every d and scale fp16 holds, and GloVe rows: every
 * value the scan forms from the 16-bit tile lies within the bound, no
 * y passes 2^15, and the bound stays within 64x of the largest error on
 * plain rows. */
static void test_tile16_bound(void)
{
	t16tally all, plain;
	rows Q, B;

	memset(&all, 0, sizeof(all));
	memset(&plain, 0, sizeof(plain));
	for (int di = 0; di < NDIM; di++)
		for (int si = 0; si < NSCALE; si++) {
			int64_t d = dims[di];
			char where[64];

			rows_random(&Q, 12, d, si);
			rows_random(&B, 16, d, si);
			snprintf(where, sizeof(where), "d=%lld rows %g+%g N(0,1)",
				 (long long)d, scales[si][0], scales[si][1]);
			if (!fp16_falls_back(&Q, &B)) {
				t16_rows(&all, &Q, &B, where);
				if (d >= 16 && si == 0)
					t16_rows(&plain, &Q, &B, where);
			}
			rows_free(&Q);
			rows_free(&B);
		}
	rows_glove(&Q, 20, &B, 120);
	t16_rows(&all, &Q, &B, "GloVe");
	t16_rows(&plain, &Q, &B, "GloVe");
	rows_free(&Q);
	rows_free(&B);
	printf("\n  16-bit tile: %lld checks; bound / largest error:",
	       (long long)all.checks);
	for (int mi = 0; mi < 4; mi++)
		printf("  %s %.1f (plain rows %.1f)", metric_names[mi],
		       1 / all.worst[mi], 1 / plain.worst[mi]);
	CU_ASSERT_EQUAL(all.bad, 0);
	CU_ASSERT_EQUAL(all.over, 0);
	for (int mi = 0; mi < 4; mi++)
		CU_ASSERT(plain.worst[mi] * 64 > 1);
}

/* ---- device suite --------------------------------------------------------- */

/* The backend's GEMM on the device against the bound (ip on the raw
 * rows, cosine on the normalised ones). */
static int64_t gemm_case(const rows *Q, const rows *B, tally *t,
			 t16tally *t16, const char *where)
{
	int64_t d = Q->d, n = Q->n * B->n, bad = 0;
	float *g = malloc(sizeof(float) * (size_t)(n + 1));
	float *h = malloc(sizeof(float) * (size_t)(n + 1));
	exact *ex = exact_table(Q, B);
	xj_status st;

	CU_ASSERT_FATAL(g && h);
	for (size_t pi = 0; pi < 3; pi++) {
		xj_precision p = precs[pi];
		int v = p == XJ_PREC_TF32 ? 0 : p == XJ_PREC_BF16 ? 3 : 4;

		if (p == XJ_PREC_FP16 && fp16_falls_back(Q, B))
			continue;
		memset(g, 0xff, sizeof(float) * (size_t)n);
		memset(h, 0xff, sizeof(float) * (size_t)n);
		xj_ok(&st);
		if (backend_cuda_test_gemm(gpu_device, p, Q->x, Q->n, B->x, B->n,
					   d, -1.0f, g, &st) ||
		    backend_cuda_test_gemm(gpu_device, p, Q->hat, Q->n, B->hat,
					   B->n, d, -1.0f, h, &st)) {
			printf("\n  %s: %s", precision_name(p), st.msg);
			bad++;
			continue;
		}
		for (int64_t i = 0; i < Q->n; i++)
			for (int64_t j = 0; j < B->n; j++) {
				const exact *e = &ex[i * B->n + j];
				double bi = metric_err_bound_prec(XJ_METRIC_IP, d,
						Q->fnorm[i], B->fnorm[j], p);
				double bc = metric_err_bound_prec(XJ_METRIC_COSINE,
						d, 1, 1, p);
				double gi = g[i * B->n + j];
				double gc = 1.0 + (double)h[i * B->n + j];

				tally_add(t, v, 3, (double)fabsl(gi + e->dot),
					  bi, where);
				tally_add(t, v, 2, (double)fabsl(gc - e->cosd),
					  bc, where);
				t->pairs++;
			}
	}
	/* the 16-bit tile (XJ_CUDA_TILE16): fp16 output scaled by 2^e */
	if (!fp16_falls_back(Q, B)) {
		float one = 1.0f + 0x1p-20f;
		int ei = backend_cuda_host_tile16_exp(XJ_METRIC_IP, d,
				backend_cuda_host_max_abs(Q->x, Q->n * d),
				backend_cuda_host_max_abs(B->x, B->n * d));
		int ec = backend_cuda_host_tile16_exp(XJ_METRIC_COSINE, d, one,
						      one);

		memset(g, 0xff, sizeof(float) * (size_t)n);
		memset(h, 0xff, sizeof(float) * (size_t)n);
		xj_ok(&st);
		if (backend_cuda_test_gemm16(gpu_device, Q->x, Q->n, B->x, B->n,
					     d, ldexpf(-1.0f, ei), g, &st) ||
		    backend_cuda_test_gemm16(gpu_device, Q->hat, Q->n, B->hat,
					     B->n, d, ldexpf(-1.0f, ec), h,
					     &st)) {
			printf("\n  fp16 16-bit tile: %s", st.msg);
			return bad + 1;
		}
		for (int64_t i = 0; i < Q->n; i++)
			for (int64_t j = 0; j < B->n; j++) {
				const exact *e = &ex[i * B->n + j];
				double gi = (double)g[i * B->n + j] * ldexp(1, -ei);
				double gc = 1.0 + (double)h[i * B->n + j] *
						  ldexp(1, -ec);
				double bi = backend_cuda_host_err_bound_tile16(
					XJ_METRIC_IP, d, Q->fnorm[i], B->fnorm[j],
					ldexp(1, -ei));
				double bc = backend_cuda_host_err_bound_tile16(
					XJ_METRIC_COSINE, d, 1, 1, ldexp(1, -ec));

				t16->over += !(fabsf(g[i * B->n + j]) <= 0x1p15f) +
					     !(fabsf(h[i * B->n + j]) <= 0x1p15f);
				t16->checks += 2;
				if (!((double)fabsl(gi + e->dot) <= bi) ||
				    !((double)fabsl(gc - e->cosd) <= bc))
					if (t16->bad++ < 6)
						printf("\n  16-bit tile %s (%lld, %lld): ip %.6g (bound %.6g; tile %g, 2^%d), cosine %.6g (%.6g; tile %g, 2^%d)",
						       where, (long long)i,
						       (long long)j,
						       (double)fabsl(gi + e->dot), bi,
						       (double)g[i * B->n + j], ei,
						       (double)fabsl(gc - e->cosd), bc,
						       (double)h[i * B->n + j], ec);
				if ((double)fabsl(gi + e->dot) / bi > t16->worst[3])
					t16->worst[3] = (double)fabsl(gi + e->dot) / bi;
				if ((double)fabsl(gc - e->cosd) / bc > t16->worst[2])
					t16->worst[2] = (double)fabsl(gc - e->cosd) / bc;
			}
	}
	free(g);
	free(h);
	free(ex);
	return bad;
}

static void test_device_gemm(void)
{
	const int64_t nq = 64, nb = 300;
	int64_t bad = 0;
	rows Q, B;
	tally t;
	t16tally t16;

	tally_init(&t);
	memset(&t16, 0, sizeof(t16));
	for (int di = 0; di < NDIM; di++)
		for (int si = 0; si < NSCALE; si++) {
			int64_t d = dims[di];
			char where[64];

			rows_random(&Q, nq, d, si);
			rows_random(&B, nb, d, si);
			snprintf(where, sizeof(where), "device d=%lld %g+%g",
				 (long long)d, scales[si][0], scales[si][1]);
			bad += gemm_case(&Q, &B, &t, &t16, where);
			rows_free(&Q);
			rows_free(&B);
		}
	rows_glove(&Q, 200, &B, 2000);
	bad += gemm_case(&Q, &B, &t, &t16, "device GloVe");
	tally_print(&t, "device GEMM (ip, cosine columns)");
	printf("\n  device 16-bit tile: %lld checks, bound / largest error: ip %.1f, cosine %.1f",
	       (long long)t16.checks, 1 / t16.worst[3], 1 / t16.worst[2]);
	rows_free(&Q);
	rows_free(&B);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(t.bad, 0);
	CU_ASSERT_EQUAL(t16.bad, 0);
	CU_ASSERT_EQUAL(t16.over, 0);
}

static int64_t topk_case(const char *what, const float *q, int64_t nq,
			 const float *b, int64_t nb, int64_t d)
{
	const int64_t ks[] = { 1, 10, 100 };
	const int64_t chunks[][2] = { { 0, 0 }, { 100, 3000 } };
	int64_t bad = 0, n = nq * 100;
	float *rk = malloc(sizeof(float) * (size_t)n);
	float *gk = malloc(sizeof(float) * (size_t)n);
	int64_t *ri = malloc(sizeof(int64_t) * (size_t)n);
	int64_t *gi = malloc(sizeof(int64_t) * (size_t)n);

	CU_ASSERT_FATAL(rk && gk && ri && gi);
	for (size_t mi = 0; mi < 4; mi++)
		for (size_t ki = 0; ki < 3; ki++) {
			xj_backend_cfg cfg;

			memset(&cfg, 0, sizeof(cfg));
			cfg.metric = metrics[mi];
			cfg.k = ks[ki];
			cfg.d = d;
			cfg.self = q == b;
			/* the same rows on both sides: a self-join, whose
			 * shared rows both backends score once per pair */
			cfg.same_rows = q == b;
			if (contract_topk(backend_cpu_create, &cfg, q, nq, b, nb,
					  0, 0, 0, rk, ri, NULL)) {
				bad++;
				continue;
			}
			/* pi = 3: fp16 with the 16-bit tile (XJ_CUDA_TILE16) */
			for (size_t pi = 0; pi < 4; pi++)
				for (size_t c = 0; c < 2; c++) {
					int64_t qc = chunks[c][0] ? chunks[c][0] : nq;
					int64_t bc = chunks[c][1] ? chunks[c][1] : nb;
					int rc;

					cfg.precision = precs[pi < 3 ? pi : 2];
					if (pi == 3)
						setenv("XJ_CUDA_TILE16", "1", 1);
					rc = contract_topk(gpu_backend_create, &cfg,
							   q, nq, b, nb, qc, bc, 0,
							   gk, gi, NULL);
					unsetenv("XJ_CUDA_TILE16");
					if (rc) {
						bad++;
						continue;
					}
					for (int64_t e = 0; e < nq * cfg.k; e++)
						if ((!same_f32(gk[e], rk[e]) ||
						     gi[e] != ri[e]) && bad++ < 4)
							printf("\n  %s %s %s%s k=%lld chunks %lldx%lld: entry %lld (%.9g, %lld) want (%.9g, %lld)",
							       what, metric_names[mi],
							       precision_name(cfg.precision),
							       pi == 3 ? " 16-bit tile" : "",
							       (long long)cfg.k,
							       (long long)qc,
							       (long long)bc,
							       (long long)e, gk[e],
							       (long long)gi[e], rk[e],
							       (long long)ri[e]);
				}
		}
	free(rk);
	free(gk);
	free(ri);
	free(gi);
	return bad;
}

static void test_device_topk(void)
{
	const int64_t d = 40, nq = 300, nb = 9000;
	float *q = gauss_rows(nq, d, 0.1, 1), *b = gauss_rows(nb, d, 0, 1);
	float *tq = gauss_rows(nq, d, 0, 1e-6), *tb = gauss_rows(nb, d, 0, 1e-6);
	float *oq = gauss_rows(nq, d, 1e4, 1), *ob = gauss_rows(nb, d, 1e4, 1);
	float *g = NULL, *gb = NULL;
	int64_t gd = 0;
	int64_t bad = 0;

	float *bigq = malloc(sizeof(float) * (size_t)(nq * d));

	CU_ASSERT_FATAL(q && b && tq && tb && oq && ob && bigq);
	bad += topk_case("gaussian", q, nq, b, nb, d);
	/* one query row beyond fp16: the whole query chunk takes float32 */
	memcpy(bigq, q, sizeof(float) * (size_t)(nq * d));
	for (int64_t e = 5 * d; e < 6 * d; e++)
		bigq[e] *= 1e5f;
	bad += topk_case("one query beyond fp16", bigq, nq, b, nb, d);
	bad += topk_case("fp16 subnormals", tq, nq, tb, nb, d);
	/* offsets of 1e4: float cancellation, fp16 still fits */
	bad += topk_case("offset 1e4", oq, 100, ob, 5000, d);
	/* one base chunk beyond fp16 (rows 3000..5999 with chunks of 3000):
	 * that chunk takes the float32 GEMM, the others fp16 */
	for (int64_t e = 3500 * d; e < 3501 * d; e++)
		b[e] *= 1e5f;
	bad += topk_case("one chunk beyond fp16", q, nq, b, nb, d);
	/* a self-join of 4000 rows holding that row: its block pairs take
	 * the float32 GEMM on one chunk (fp16), the 16-bit one otherwise */
	bad += topk_case("self-join, a row beyond fp16", b, 4000, b, 4000, d);
	CU_ASSERT_FATAL(glove_rows(&g, 200, &gb, 12000, &gd) == 0);
	bad += topk_case("GloVe", g, 200, gb, 12000, gd);
	bad += topk_case("GloVe self", gb, 200, gb, 12000, gd);
	/* all 2100 rows one chunk: block pairs of 16-bit and tf32 GEMMs */
	bad += topk_case("GloVe self-join", gb, 2100, gb, 2100, gd);
	CU_ASSERT_EQUAL(bad, 0);
	free(bigq);
	free(q);
	free(b);
	free(tq);
	free(tb);
	free(oq);
	free(ob);
	free(g);
	free(gb);
}

/* ---- main ------------------------------------------------------------------ */

static const unit_test host_tests[] = {
	{ "bound: host and device bits, monotone", test_bound_bits },
	{ "roundings equal CUDA's, within up |x| + eta", test_roundings },
	{ "fp16 range check", test_fp16_range },
	{ "bound holds on random rows", test_bound_random },
	{ "bound holds on GloVe rows", test_bound_glove },
	{ "16-bit tile within its bound", test_tile16_bound },
};

static const unit_test device_tests[] = {
	{ "device GEMM within the bound", test_device_gemm },
	{ "top-k in every precision equals the CPU", test_device_topk },
};

int main(int argc, char **argv)
{
	return gpu_test_main(argc, argv, "cuda_precision_host", host_tests,
			     UNIT_COUNT(host_tests), "cuda_precision_device",
			     device_tests, UNIT_COUNT(device_tests));
}
