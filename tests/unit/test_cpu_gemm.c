/*
 * test_cpu_gemm.c: the CPU's bf16 and int8 candidate GEMMs
 * (kernels/cpu/cpu_gemm.h) and their error bound (metric_err_bound_rows).
 *
 *   - rounding rows: bf16 is round to nearest even with results below
 *     2^-126 flushed to zero (checked against gemm_emul.h's rounding);
 *     int8 values are within half a step of the row's scale; the error
 *     norm recorded per row is an upper bound of the exact one (long
 *     double) and no more than a hair above it (rows so small that their
 *     int8 scale is subnormal round coarsely: the measured norm covers it);
 *     the row's rounding product x.(x - r(x)) within its double sum's
 *     error of the exact one.
 *   - the bound against emulated GEMMs on adversarial rows (magnitudes
 *     over many orders, within and across rows; subnormal rows that
 *     round to zero; one large value among tiny ones; duplicates), on
 *     Gaussian and on GloVe rows: bf16 products accumulated in float32
 *     three ways (gemm_emul.h, as the GPU test does), int8 with the exact
 *     integer dot product and cpu_gemm.c's scaling; every metric's
 *     approx-space value within the bound of the exact value, and l2's
 *     value with the rounding folded into the rows' constants within
 *     metric_err_bound_folded. The tightness (bound / largest error) is
 *     printed, and how much narrower the folded bound is at each query's
 *     nearest row.
 *   - the same check on oneDNN's own tiles (cpu_gemm_tile), where this
 *     CPU runs the precision (else the reason is printed).
 *   - top-k through the CPU backend in bf16 and int8 gives the bits of
 *     fp32 on the adversarial rows, every metric, with and without a
 *     threshold, in odd chunks, with l2's folded bound as decided,
 *     forced off and forced on (XJ_CPU_FOLD).
 * Outputs are poisoned before every call.
 */
#include <CUnit/Basic.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/status.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_gemm.h"
#include "kernels/metric.h"
#define TESTDATA_SEED 0xc0de16b16ull
#include "tests/unit/testdata.h"
#include "tests/backend/contract.h"
#include "tests/unit/gemm_emul.h"
#include "tests/unit/glove.h"
#include "tests/unit/unit.h"

static const xj_precision lowps[] = { XJ_PREC_BF16, XJ_PREC_INT8 };
#define NLOW 2

/* 1 when this build and CPU run p; else prints why. */
static int runs_here(xj_precision p, int64_t d)
{
	xj_precision got;
	xj_status st;
	char why[96];

	xj_ok(&st);
	if (cpu_gemm_resolve(p, d, 1, &got, why, sizeof(why), &st) ||
	    got != p) {
		printf("\n  skipped %s: %s", precision_name(p), st.msg);
		return 0;
	}
	return 1;
}

/* ---- adversarial rows ---------------------------------------------- */

enum { K_GAUSS, K_SCALES, K_SPREAD, K_TINY, K_SPIKE, K_FLAT, K_SMALL,
       NKIND };
static const char *const kind_names[] = {
	"gaussian", "row scales 1e-8..1e8", "values over 30 orders",
	"subnormal rows", "one spike among tiny values",
	"integer rows near 127 (int8 sums past 2^24 at d = 2000)",
	"rows near 1e-20 (int8's scale products subnormal)",
};

/* n rows of kind; with dups, every 5th row repeats the row before it and
 * every 7th differs from it by one ulp in one value (near ties). */
static float *adv_rows(int64_t n, int64_t d, int kind, int dups)
{
	float *x = malloc(sizeof(float) * (size_t)(n * d + 1));

	CU_ASSERT_FATAL(x != NULL);
	for (int64_t r = 0; r < n; r++) {
		double rs = kind == K_SCALES ?
			    pow(10.0, (double)(rng_next() % 17) - 8) : 1;
		float *o = x + r * d;

		for (int64_t i = 0; i < d; i++) {
			double g = rng_gauss();

			switch (kind) {
			case K_SPREAD:
				g *= pow(10.0, -(double)(rng_next() % 31));
				break;
			case K_TINY:      /* subnormal: bf16 and int8 give 0 */
				g *= 1e-40;
				break;
			case K_SPIKE:
				g = i == (int64_t)(r % d) ? 1e3 * g : 1e-9 * g;
				break;
			case K_SMALL:     /* s_q s_b near 1e-44 */
				g *= 1e-20;
				break;
			case K_FLAT:      /* integers 120..127, the first 127:
					   int8 exactly (scale 1) */
				g = i == 0 ? 127.0 :
				    (double)(120 + rng_next() % 8);
				break;
			default:
				break;
			}
			o[i] = (float)(g * rs);
		}
		if (kind == K_TINY && o[0] == 0)
			o[0] = 1e-40f;    /* cosine needs a non-zero row */
		if (dups && r > 0 && r % 5 == 0)
			memcpy(o, o - d, sizeof(float) * (size_t)d);
		if (dups && r > 0 && r % 7 == 0) {
			memcpy(o, o - d, sizeof(float) * (size_t)d);
			o[r % d] = nextafterf(o[r % d], INFINITY);
		}
	}
	return x;
}

/* The rounded value of packed element e as a float (int8: scaled). */
static double packed_value(xj_precision p, const cpu_gemm_rows *r,
			   int64_t d, int64_t e)
{
	if (p == XJ_PREC_INT8)
		return (double)r->scale[e / d] * ((const int8_t *)r->x)[e];
	return (double)u2f((uint32_t)((const uint16_t *)r->x)[e] << 16);
}

/* ---- rounding rows ------------------------------------------------- */

static int64_t check_pack(xj_precision p, const float *x, int64_t n,
			  int64_t d)
{
	cpu_gemm_rows r = { 0 };
	int64_t bad = 0;

	CU_ASSERT_FATAL(cpu_gemm_rows_reserve(&r, p, n, d) == 0);
	for (int64_t e = 0; e < n; e++) {
		r.err[e] = NAN;
		r.dot[e] = NAN;
	}
	cpu_gemm_pack(p, x, n, d, &r, 2);
	for (int64_t i = 0; i < n; i++) {
		long double s = 0, xe = 0, mag = 0;

		for (int64_t e = i * d; e < (i + 1) * d; e++) {
			double v = packed_value(p, &r, d, e);
			long double t = (long double)v - x[e];

			s += t * t;
			xe -= x[e] * t;
			mag += fabsl(x[e] * t);
			if (p == XJ_PREC_BF16) {
				float w = round_bits(x[e], 7, R_NEAREST_EVEN);

				if (fabsf(w) < 0x1p-126f)
					w = copysignf(0.0f, w);
				if (!same_f32((float)v, w) && bad++ < 4)
					printf("\n  bf16 of %.9g: %.9g, want %.9g",
					       x[e], v, w);
			} else if (r.scale[i] >= FLT_MIN &&
				   !(fabs(v - x[e]) <=
				     r.scale[i] * (0.5 + 0x1p-20)) && bad++ < 4) {
				/* a subnormal scale is coarse: only the error
				 * norm below, measured, must hold */
				printf("\n  int8 of %.9g: %.9g (scale %.9g)", x[e],
				       v, r.scale[i]);
			}
		}
		/* x.(x - r(x)): exact products, a double sum */
		if (!(fabsl((long double)r.dot[i] - xe) <=
		      (long double)(d + 1) * 0x1p-53L * mag) && bad++ < 4)
			printf("\n  %s row %lld: rounding product %.17g, exact %.17Lg",
			       precision_name(p), (long long)i, r.dot[i], xe);
		s = sqrtl(s);
		if (!((long double)r.err[i] >= s &&
		      (long double)r.err[i] <= s * (1 + 0x1p-22L) + 0x1p-149L) &&
		    bad++ < 4)
			printf("\n  %s row %lld: error bound %.9g, exact %.9Lg",
			       precision_name(p), (long long)i, r.err[i], s);
	}
	cpu_gemm_rows_free(&r);
	return bad;
}

static void test_pack(void)
{
	static const int64_t dims[] = { 1, 7, 100, 300 };
	int64_t bad = 0;

	for (int k = 0; k < NKIND; k++)
		for (size_t di = 0; di < UNIT_COUNT(dims); di++) {
			float *x = adv_rows(30, dims[di], k, 1);

			for (int pi = 0; pi < NLOW; pi++)
				bad += check_pack(lowps[pi], x, 30, dims[di]);
			free(x);
		}
	/* the rows the tests call adversarial are: tiny rows become 0 */
	CU_ASSERT(same_f32(cpu_gemm_round_bf16(1e-40f), 0.0f));
	CU_ASSERT(same_f32(cpu_gemm_round_bf16(-1e-40f), -0.0f));
	CU_ASSERT(same_f32(cpu_gemm_round_bf16(1.00390625f), 1.0f));
	CU_ASSERT(same_f32(cpu_gemm_round_bf16(1.01171875f), 1.015625f));
	CU_ASSERT_EQUAL(bad, 0);
}

/* ---- the bound ----------------------------------------------------- */

typedef struct tally {
	double worst[NLOW][4];     /* largest error / bound */
	double fworst[NLOW];       /* the same, folded (l2's tiles) */
	double fgain[NLOW][2];     /* bound / folded bound: sum, count over
				    * each query's nearest pair */
	int64_t pairs, bad;
} tally;

/* One pair's approx-space value for metric mi from its dot product
 * (bf16: the float accumulation; int8: crow + alpha s_q s_b acc as
 * cpu_gemm.c computes it), checked against the exact value. */
static void check_value(tally *t, int pi, int mi, const rows *Q, int64_t i,
			const rows *B, int64_t j, float g, double qerr,
			double berr, const char *where)
{
	xj_metric m = metrics[mi];
	int cosine = m == XJ_METRIC_COSINE;
	int64_t d = Q->d;
	exact ex = exact_of(Q->x + i * d, B->x + j * d, d, Q->n2[i],
			    B->n2[j]);
	double bound = metric_err_bound_rows(m, d, cosine ? 1 : Q->fnorm[i],
					     cosine ? 1 : B->fnorm[j], qerr,
					     berr, lowps[pi]);
	long double want = m == XJ_METRIC_IP ? -ex.dot :
			   cosine ? ex.cosd : ex.sq;
	double a = m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN ?
		   Q->n2[i] + (double)g : (double)g;
	double err = (double)fabsl((long double)a - want);

	t->pairs++;
	if (!(err <= bound) && t->bad++ < 6)
		printf("\n  %s %s %s (%lld, %lld): |approx - exact| = %.6g > bound %.6g",
		       precision_name(lowps[pi]), metric_names[mi], where,
		       (long long)i, (long long)j, err, bound);
	if (err / bound > t->worst[pi][mi])
		t->worst[pi][mi] = err / bound;
}

/*
 * The folded bound (metric_err_bound_folded) on the pair's l2 tile value g
 * computed with crow = fl(|b|^2 - 2 b.(b - r(b))): the approx value is
 * (|q|^2 - 2 q.(q - r(q))) + g. near: the pair is the query's nearest in
 * B, whose bounds are compared with metric_err_bound_rows's (printed).
 */
static void check_folded(tally *t, int pi, const rows *Q, int64_t i,
			 const rows *B, int64_t j, float g, double qdot,
			 double qerr, double berr, int near,
			 const char *where)
{
	int64_t d = Q->d;
	exact ex = exact_of(Q->x + i * d, B->x + j * d, d, Q->n2[i],
			    B->n2[j]);
	metric_err2 e = metric_err_bound_folded(d, Q->fnorm[i], B->fnorm[j],
						qerr, berr, lowps[pi]);
	double bound = e.lin * sqrt((double)ex.sq) + e.abs;
	double a = (Q->n2[i] - 2.0 * qdot) + (double)g;
	double err = (double)fabsl((long double)a - ex.sq);

	t->pairs++;
	if (!(err <= bound) && t->bad++ < 6)
		printf("\n  %s folded l2 %s (%lld, %lld): |approx - exact| = %.6g > bound %.6g",
		       precision_name(lowps[pi]), where, (long long)i,
		       (long long)j, err, bound);
	if (err / bound > t->fworst[pi])
		t->fworst[pi] = err / bound;
	if (near) {
		t->fgain[pi][0] += metric_err_bound_rows(XJ_METRIC_L2, d,
				Q->fnorm[i], B->fnorm[j], qerr, berr,
				lowps[pi]) / bound;
		t->fgain[pi][1]++;
	}
}

/* Index of query i's nearest row in B (exact squared distances). */
static int64_t nearest(const rows *Q, int64_t i, const rows *B)
{
	int64_t d = Q->d, best = 0;
	long double bv = INFINITY;

	for (int64_t j = 0; j < B->n; j++) {
		exact ex = exact_of(Q->x + i * d, B->x + j * d, d, Q->n2[i],
				    B->n2[j]);

		if (ex.sq < bv) {
			bv = ex.sq;
			best = j;
		}
	}
	return best;
}

static float alpha_of(xj_metric m)
{
	return m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN ? -2.0f : -1.0f;
}

/* crow[j] of the tile: the float |b|^2, 1 or nothing. */
static float crow_of(xj_metric m, const rows *B, int64_t j)
{
	if (m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN)
		return B->fn2[j];
	return m == XJ_METRIC_COSINE ? 1.0f : 0.0f;
}

/* Every pair of Q x B through emulated GEMMs. */
static void check_emulated(tally *t, const rows *Q, const rows *B,
			   const char *where)
{
	int64_t d = Q->d;

	for (int pi = 0; pi < NLOW; pi++) {
		xj_precision p = lowps[pi];
		cpu_gemm_rows rq[2] = { { 0 } }, rb[2] = { { 0 } };
		float *fq[2], *fb[2];

		/* [0]: the rows, [1]: the normalised rows (cosine) */
		for (int h = 0; h < 2; h++) {
			CU_ASSERT_FATAL(!cpu_gemm_rows_reserve(&rq[h], p, Q->n, d) &&
					!cpu_gemm_rows_reserve(&rb[h], p, B->n, d));
			cpu_gemm_pack(p, h ? Q->hat : Q->x, Q->n, d, &rq[h], 1);
			cpu_gemm_pack(p, h ? B->hat : B->x, B->n, d, &rb[h], 1);
			fq[h] = malloc(sizeof(float) * (size_t)(Q->n * d));
			fb[h] = malloc(sizeof(float) * (size_t)(B->n * d));
			CU_ASSERT_FATAL(fq[h] && fb[h]);
			for (int64_t e = 0; e < Q->n * d; e++)
				fq[h][e] = (float)packed_value(p, &rq[h], d, e);
			for (int64_t e = 0; e < B->n * d; e++)
				fb[h][e] = (float)packed_value(p, &rb[h], d, e);
		}
		for (int64_t i = 0; i < Q->n; i++) {
			int64_t jn = nearest(Q, i, B);

			for (int64_t j = 0; j < B->n; j++)
				/* mi = 4: l2's tile folded */
				for (int mi = 0; mi < 5; mi++) {
					int fold = mi == 4;
					xj_metric m = metrics[fold ? 0 : mi];
					int h = m == XJ_METRIC_COSINE;
					const int8_t *q8 = (const int8_t *)rq[h].x + i * d;
					const int8_t *b8 = (const int8_t *)rb[h].x + j * d;
					float crow = fold ? (float)(B->n2[j] - 2.0 * rb[0].dot[j]) :
						     crow_of(m, B, j);

					if (p == XJ_PREC_INT8) {
						int64_t acc = 0;
						float ar = alpha_of(m) *
							   rq[h].scale[i];
						float g;

						for (int64_t e = 0; e < d; e++)
							acc += (int64_t)q8[e] * b8[e];
						/* oneDNN's float tile, scaled
						 * as cpu_gemm.c does */
						g = crow + (float)acc *
						    (rb[h].scale[j] * ar);
						if (fold)
							check_folded(t, pi, Q, i, B, j, g,
								     rq[0].dot[i],
								     rq[0].err[i],
								     rb[0].err[j],
								     j == jn, where);
						else
							check_value(t, pi, mi, Q, i, B, j,
								    g, rq[h].err[i],
								    rb[h].err[j], where);
						continue;
					}
					for (int a = 0; a < NACC; a++) {
						float acc = dot_acc(fq[h] + i * d,
								    fb[h] + j * d,
								    d, (accmode)a);
						float g = alpha_of(m) * acc + crow;

						if (fold)
							check_folded(t, pi, Q, i, B, j, g,
								     rq[0].dot[i],
								     rq[0].err[i],
								     rb[0].err[j],
								     j == jn && a == 0,
								     where);
						else
							check_value(t, pi, mi, Q, i, B, j,
								    g, rq[h].err[i],
								    rb[h].err[j], where);
					}
				}
		}
		for (int h = 0; h < 2; h++) {
			cpu_gemm_rows_free(&rq[h]);
			cpu_gemm_rows_free(&rb[h]);
			free(fq[h]);
			free(fb[h]);
		}
	}
}

/* The same pairs through oneDNN's tiles (cpu_gemm_tile). */
static void check_onednn(tally *t, const rows *Q, const rows *B,
			 const char *where)
{
	int64_t d = Q->d, n = Q->n * B->n;
	float *out = malloc(sizeof(float) * (size_t)n);
	float *crow = malloc(sizeof(float) * (size_t)B->n);

	CU_ASSERT_FATAL(out && crow);
	for (int pi = 0; pi < NLOW; pi++) {
		xj_precision p = lowps[pi];

		if (!runs_here(p, d))
			continue;
		/* mi = 4: l2's tile folded */
		for (int mi = 0; mi < 5; mi++) {
			int fold = mi == 4;
			xj_metric m = metrics[fold ? 0 : mi];
			int h = m == XJ_METRIC_COSINE;
			cpu_gemm_rows rq = { 0 }, rb = { 0 };
			cpu_gemm *g = NULL;
			xj_status st;

			xj_ok(&st);
			CU_ASSERT_FATAL(!cpu_gemm_rows_reserve(&rq, p, Q->n, d) &&
					!cpu_gemm_rows_reserve(&rb, p, B->n, d));
			cpu_gemm_pack(p, h ? Q->hat : Q->x, Q->n, d, &rq, 1);
			cpu_gemm_pack(p, h ? B->hat : B->x, B->n, d, &rb, 1);
			for (int64_t j = 0; j < B->n; j++)
				crow[j] = fold ? (float)(B->n2[j] - 2.0 * rb.dot[j]) :
					  crow_of(m, B, j);
			for (int64_t e = 0; e < n; e++)
				out[e] = NAN;
			CU_ASSERT_FATAL(cpu_gemm_create(p, d, alpha_of(m),
							m != XJ_METRIC_IP, 1, &g,
							&st) == XJ_OK);
			if (cpu_gemm_tile(g, 0, NULL, &rq, 0, NULL, &rb, 0, Q->n,
					  B->n, crow, out, &st))
				printf("\n  %s", st.msg);
			for (int64_t i = 0; i < Q->n; i++) {
				int64_t jn = fold ? nearest(Q, i, B) : -1;

				for (int64_t j = 0; j < B->n; j++)
					if (fold)
						check_folded(t, pi, Q, i, B, j,
							     out[i * B->n + j],
							     rq.dot[i], rq.err[i],
							     rb.err[j], j == jn, where);
					else
						check_value(t, pi, mi, Q, i, B, j,
							    out[i * B->n + j],
							    rq.err[i], rb.err[j],
							    where);
			}
			cpu_gemm_free(g);
			cpu_gemm_rows_free(&rq);
			cpu_gemm_rows_free(&rb);
		}
	}
	free(out);
	free(crow);
}

static void tally_print(const tally *t, const char *title)
{
	printf("\n  %s: %lld pair checks; bound / largest error:", title,
	       (long long)t->pairs);
	for (int pi = 0; pi < NLOW; pi++) {
		printf("\n    %-5s", precision_name(lowps[pi]));
		for (int mi = 0; mi < 4; mi++)
			printf("  %s %9.3g", metric_names[mi],
			       t->worst[pi][mi] > 0 ? 1 / t->worst[pi][mi] :
			       INFINITY);
		printf("  l2 folded %9.3g (nearest pairs: %.3gx narrower)",
		       t->fworst[pi] > 0 ? 1 / t->fworst[pi] : INFINITY,
		       t->fgain[pi][1] > 0 ? t->fgain[pi][0] / t->fgain[pi][1] :
		       NAN);
	}
}

static void check_sets(int onednn)
{
	/* 2000: int8's int32 sums pass 2^24 (the float tile rounds them) */
	static const int64_t dims[] = { 1, 16, 100, 300, 2000 };
	tally t, tk[NKIND];
	rows Q, B;

	memset(&t, 0, sizeof(t));
	memset(tk, 0, sizeof(tk));
	for (int k = 0; k < NKIND; k++)
		for (size_t di = 0; di < UNIT_COUNT(dims); di++) {
			int64_t d = dims[di];
			/* d = 1 apart: there the bound is reached */
			tally *to = d == 1 ? &t : &tk[k];

			CU_ASSERT_FATAL(rows_make(&Q, adv_rows(12, d, k, 0), 12, d) == 0);
			CU_ASSERT_FATAL(rows_make(&B, adv_rows(40, d, k, 1), 40, d) == 0);
			if (onednn)
				check_onednn(to, &Q, &B, kind_names[k]);
			else
				check_emulated(to, &Q, &B, kind_names[k]);
			rows_free(&Q);
			rows_free(&B);
		}
	printf("\n  %s", onednn ? "oneDNN tiles" : "emulated");
	tally_print(&t, "d = 1, every kind");
	CU_ASSERT_EQUAL(t.bad, 0);
	for (int k = 0; k < NKIND; k++) {
		tally_print(&tk[k], kind_names[k]);
		CU_ASSERT_EQUAL(tk[k].bad, 0);
	}

	/* real rows */
	{
		float *q = NULL, *b = NULL;
		int64_t d = 0;

		memset(&t, 0, sizeof(t));
		CU_ASSERT_FATAL(glove_rows(&q, 20, &b, 200, &d) == 0);
		CU_ASSERT_FATAL(rows_make(&Q, q, 20, d) == 0);
		CU_ASSERT_FATAL(rows_make(&B, b, 200, d) == 0);
		if (onednn)
			check_onednn(&t, &Q, &B, "glove");
		else
			check_emulated(&t, &Q, &B, "glove");
		tally_print(&t, "GloVe rows");
		CU_ASSERT_EQUAL(t.bad, 0);
		rows_free(&Q);
		rows_free(&B);
	}
}

static void test_bound_emulated(void)
{
	check_sets(0);
}

static void test_bound_onednn(void)
{
	check_sets(1);
}

/*
 * int8 without a row added (a self-join's pair tiles): the unscaled sums
 * of cpu_gemm_tile_sums, scaled in place by cpu_gemm_scale or as the
 * scan reads them (out * (s_b * (alpha s_a)), cpu_topk.c's PAIR_G), are
 * cpu_gemm_tile's bits, for every kind of row and alpha.
 */
static void test_int8_sums(void)
{
	static const int64_t dims[] = { 1, 16, 100, 2000 };
	int64_t checked = 0, bad = 0;

	if (!runs_here(XJ_PREC_INT8, 16)) {
		printf("\n  no int8 here: skipped");
		return;
	}
	for (int k = 0; k < NKIND; k++)
		for (size_t di = 0; di < UNIT_COUNT(dims); di++)
			for (int ai = 0; ai < 2; ai++) {
				int64_t d = dims[di], nq = 12, nb = 40, n = nq * nb;
				float alpha = ai ? -1.0f : -2.0f;
				float *q = adv_rows(nq, d, k, 0);
				float *b = adv_rows(nb, d, k, 1);
				float *want = malloc(sizeof(float) * (size_t)n);
				float *sums = malloc(sizeof(float) * (size_t)n);
				float *got = malloc(sizeof(float) * (size_t)n);
				cpu_gemm_rows rq = { 0 }, rb = { 0 };
				cpu_gemm *g = NULL;
				xj_status st;

				CU_ASSERT_FATAL(q && b && want && sums && got);
				CU_ASSERT_FATAL(!cpu_gemm_rows_reserve(&rq, XJ_PREC_INT8, nq, d) &&
						!cpu_gemm_rows_reserve(&rb, XJ_PREC_INT8, nb, d));
				cpu_gemm_pack(XJ_PREC_INT8, q, nq, d, &rq, 1);
				cpu_gemm_pack(XJ_PREC_INT8, b, nb, d, &rb, 1);
				xj_ok(&st);
				CU_ASSERT_FATAL(cpu_gemm_create(XJ_PREC_INT8, d, alpha, 0,
								1, &g, &st) == XJ_OK);
				for (int64_t e = 0; e < n; e++)
					want[e] = sums[e] = NAN;
				CU_ASSERT_FATAL(cpu_gemm_tile(g, 0, NULL, &rq, 0, NULL,
							      &rb, 0, nq, nb, NULL,
							      want, &st) == XJ_OK);
				CU_ASSERT_FATAL(cpu_gemm_tile_sums(g, 0, &rq, 0, &rb, 0,
								   nq, nb, sums,
								   &st) == XJ_OK);
				CU_ASSERT_EQUAL(cpu_gemm_alpha(g), alpha);
				memcpy(got, sums, sizeof(float) * (size_t)n);
				cpu_gemm_scale(g, &rq, 0, &rb, 0, nq, nb, got);
				for (int64_t i = 0; i < nq; i++)
					for (int64_t j = 0; j < nb; j++) {
						int64_t e = i * nb + j;
						float ar = alpha * rq.scale[i];
						float v = sums[e] * (rb.scale[j] * ar);

						checked++;
						bad += !same_f32(got[e], want[e]) ||
						       !same_f32(v, want[e]);
					}
				cpu_gemm_free(g);
				cpu_gemm_rows_free(&rq);
				cpu_gemm_rows_free(&rb);
				free(q);
				free(b);
				free(want);
				free(sums);
				free(got);
			}
	printf("\n  %lld values, %lld differ", (long long)checked,
	       (long long)bad);
	CU_ASSERT(checked > 0);
	CU_ASSERT_EQUAL(bad, 0);
}

/* ---- top-k: the bits of fp32 ---------------------------------------- */

static xj_precision want_prec;

static int create_prec(const xj_backend_cfg *cfg, xj_backend **out,
		       xj_status *st)
{
	xj_backend_cfg c = *cfg;

	c.precision = want_prec;
	return backend_cpu_create(&c, out, st);
}

static void test_topk_bits(void)
{
	const int64_t nq = 30, nb = 700, k = 10;
	float *key0 = malloc(sizeof(float) * (size_t)(nq * k));
	float *key1 = malloc(sizeof(float) * (size_t)(nq * k));
	int64_t *idx0 = malloc(sizeof(int64_t) * (size_t)(nq * k));
	int64_t *idx1 = malloc(sizeof(int64_t) * (size_t)(nq * k));
	int64_t bad = 0, runs = 0;

	CU_ASSERT_FATAL(key0 && key1 && idx0 && idx1);
	for (int k8 = 0; k8 < NKIND; k8++)
		for (int64_t d = 3; d <= 64; d += 61) {
			float *q = adv_rows(nq, d, k8, 0);
			float *b = adv_rows(nb, d, k8, 1);

			/* queries that are base rows: exact ties at 0 */
			memcpy(q, b + 10 * d, sizeof(float) * (size_t)d);
			for (int mi = 0; mi < 4; mi++)
				for (int thr = 0; thr < 2; thr++) {
					xj_backend_cfg cfg;

					memset(&cfg, 0, sizeof(cfg));
					cfg.metric = metrics[mi];
					cfg.k = k;
					cfg.d = d;
					cfg.threads = 2;
					want_prec = XJ_PREC_FP32;
					CU_ASSERT_FATAL(!contract_topk(create_prec,
						&cfg, q, nq, b, nb, 7, 233, 0,
						key0, idx0, NULL));
					if (thr) {
						/* a threshold inside the lists */
						cfg.has_threshold = 1;
						cfg.threshold_key = key0[k / 2];
						CU_ASSERT_FATAL(!contract_topk(create_prec,
							&cfg, q, nq, b, nb, 7, 233,
							0, key0, idx0, NULL));
					}
					/* fo: l2's folded bound decided, off, on */
					for (int r = 0; r < 3 * NLOW; r++) {
						int pi = r / 3, fo = r % 3;

						if (!runs_here(lowps[pi], d))
							continue;
						want_prec = lowps[pi];
						if (fo)
							setenv("XJ_CPU_FOLD",
							       fo == 1 ? "0" : "1", 1);
						CU_ASSERT_FATAL(!contract_topk(create_prec,
							&cfg, q, nq, b, nb, 7, 233, 0,
							key1, idx1, NULL));
						unsetenv("XJ_CPU_FOLD");
						runs++;
						for (int64_t e = 0; e < nq * k; e++) {
							if (same_f32(key0[e], key1[e]) &&
							    idx0[e] == idx1[e])
								continue;
							if (bad++ < 4)
								printf("\n  %s fold %d %s %s d=%lld thr=%d entry %lld: (%.9g, %lld) vs fp32 (%.9g, %lld)",
								       precision_name(lowps[pi]), fo,
								       metric_names[mi],
								       kind_names[k8], (long long)d,
								       thr, (long long)e, key1[e],
								       (long long)idx1[e], key0[e],
								       (long long)idx0[e]);
						}
					}
				}
			free(q);
			free(b);
		}
	printf("\n  %lld runs against fp32", (long long)runs);
	CU_ASSERT_EQUAL(bad, 0);
	free(key0);
	free(key1);
	free(idx0);
	free(idx1);
}

/* auto never picks what the CPU would emulate; GPU precisions refused */
static void test_resolve(void)
{
	cpu_gemm_caps caps;
	xj_precision p;
	xj_status st;
	char why[96];

	cpu_gemm_caps_get(&caps);
	xj_ok(&st);
	CU_ASSERT_EQUAL(cpu_gemm_resolve(XJ_PREC_AUTO, 128, 10, &p, why,
					 sizeof(why), &st), XJ_OK);
	CU_ASSERT(p == (caps.int8 ? XJ_PREC_INT8 :
			caps.bf16 ? XJ_PREC_BF16 : XJ_PREC_FP32));
	CU_ASSERT_EQUAL(cpu_gemm_resolve(XJ_PREC_AUTO, 128, 100, &p, why,
					 sizeof(why), &st), XJ_OK);
	CU_ASSERT(p == (caps.bf16 ? XJ_PREC_BF16 :
			caps.int8 ? XJ_PREC_INT8 : XJ_PREC_FP32));
	CU_ASSERT_EQUAL(cpu_gemm_resolve(XJ_PREC_AUTO, 100000, 10, &p, why,
					 sizeof(why), &st), XJ_OK);
	CU_ASSERT(p != XJ_PREC_INT8);
	CU_ASSERT_EQUAL(cpu_gemm_resolve(XJ_PREC_FP32, 128, 10, &p, why,
					 sizeof(why), &st), XJ_OK);
	CU_ASSERT_EQUAL(p, XJ_PREC_FP32);
	CU_ASSERT_EQUAL(cpu_gemm_resolve(XJ_PREC_TF32, 128, 10, &p, why,
					 sizeof(why), &st), XJ_EXIT_USAGE);
	xj_ok(&st);
	CU_ASSERT_EQUAL(cpu_gemm_resolve(XJ_PREC_INT8, 100000, 10, &p, why,
					 sizeof(why), &st), XJ_EXIT_USAGE);
	CU_ASSERT(strstr(st.msg, caps.dnnl ? "65536" : "oneDNN") != NULL);
	xj_ok(&st);
	CU_ASSERT_EQUAL(cpu_gemm_resolve(XJ_PREC_INT8, 128, 10, &p, why,
					 sizeof(why), &st),
			caps.int8 ? XJ_OK : XJ_EXIT_USAGE);
	printf("\n  oneDNN %s: bf16 %s, int8 %s", caps.isa,
	       caps.bf16 ? "native" : "no", caps.int8 ? "native" : "no");
}

int main(void)
{
	static const unit_test tests[] = {
		{ "auto and the checks of --precision", test_resolve },
		{ "rounding rows: values and error norms", test_pack },
		{ "bound vs emulated GEMMs, adversarial and GloVe rows",
		  test_bound_emulated },
		{ "bound vs oneDNN's tiles", test_bound_onednn },
		{ "int8 sums scaled later: the tile's bits", test_int8_sums },
		{ "top-k in bf16 and int8: the bits of fp32", test_topk_bits },
	};

	return unit_run("cpu_gemm", tests, UNIT_COUNT(tests));
}
