/*
 * test_metric.c: canonical scores, keys, gates and error bounds.
 *
 * References are independent: long double sums (64-bit mantissa) for the
 * scores, checked with abs + |ref| * eps; the bounds are checked against
 * float computations done the way the backend does them (cblas_sgemm, float
 * norms), on random, offset (cancelling) and near-duplicate data.
 */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TESTDATA_SEED 0x9e3779b97f4a7c15ull
#include "unit.h"
#include "testdata.h"
#include "config/status.h"
#include "kernels/metric.h"

/* ---- data ---------------------------------------------------------- */

static void fill(float *x, int64_t n, double offset, double scale)
{
	for (int64_t i = 0; i < n; i++)
		x[i] = (float)(offset + scale * rng_gauss());
}

/* ---- long double references ------------------------------------------ */

static long double ref_dot(const float *q, const float *b, int64_t d)
{
	long double s = 0;

	for (int64_t i = 0; i < d; i++)
		s += (long double)q[i] * (long double)b[i];
	return s;
}

static long double ref_sqdist(const float *q, const float *b, int64_t d)
{
	long double s = 0;

	for (int64_t i = 0; i < d; i++) {
		long double t = (long double)q[i] - (long double)b[i];

		s += t * t;
	}
	return s;
}

/* Reference score in the metric's key units (smaller is better). */
static long double ref_key(xj_metric m, const float *q, const float *b,
			   int64_t d)
{
	long double qq, bb;

	switch (m) {
	case XJ_METRIC_L2:
		return sqrtl(ref_sqdist(q, b, d));
	case XJ_METRIC_SQEUCLIDEAN:
		return ref_sqdist(q, b, d);
	case XJ_METRIC_IP:
		return -ref_dot(q, b, d);
	case XJ_METRIC_COSINE:
		qq = ref_dot(q, q, d);
		bb = ref_dot(b, b, d);
		return 1 - ref_dot(q, b, d) / sqrtl(qq * bb);
	}
	return NAN;
}

/* Exact (to long double) approx-space value: squared distance, 1 - cos,
 * or -q.b. */
static long double ref_approx(xj_metric m, const float *q, const float *b,
			      int64_t d)
{
	switch (m) {
	case XJ_METRIC_L2:
	case XJ_METRIC_SQEUCLIDEAN:
		return ref_sqdist(q, b, d);
	default:
		return ref_key(m, q, b, d);
	}
}

/* Absolute scale of the canonical score's error for tolerance checks. */
static long double ref_scale(xj_metric m, const float *q, const float *b,
			     int64_t d)
{
	long double nq = sqrtl(ref_dot(q, q, d)), nb = sqrtl(ref_dot(b, b, d));

	switch (m) {
	case XJ_METRIC_L2:
		return 0;
	case XJ_METRIC_SQEUCLIDEAN:
		return 0;
	case XJ_METRIC_IP:
		return nq * nb;
	case XJ_METRIC_COSINE:
		return 1;
	}
	return 0;
}

/* ---- tests ----------------------------------------------------------- */

static void test_norm2(void)
{
	enum { D = 257 };
	float x[D];
	int bad = 0;

	for (int rep = 0; rep < 200; rep++) {
		fill(x, D, rep % 3 ? 0.0 : 1e3, rep % 5 + 0.5);
		long double r = ref_dot(x, x, D);
		double s = metric_norm2(x, D);

		if (fabsl((long double)s - r) > r * (D + 2) * 0x1p-53L) {
			if (bad++ < 5)
				printf("\n  norm2 rep %d: got %.17g ref %.17Lg", rep,
				       s, r);
		}
	}
	CU_ASSERT_EQUAL(bad, 0);
	/* exact small cases */
	float y[3] = { 1, 2, 3 };

	CU_ASSERT_EQUAL(metric_norm2(y, 3), 14.0);
	CU_ASSERT_EQUAL(metric_norm2(y, 0), 0.0);
}

static void test_key_known_values(void)
{
	float q[3] = { 1, 2, 3 }, b[3] = { 4, 6, 3 };
	double qq = 14, bb = 61;

	CU_ASSERT_EQUAL(metric_key(XJ_METRIC_SQEUCLIDEAN, q, b, 3, qq, bb), 25.0f);
	CU_ASSERT_EQUAL(metric_key(XJ_METRIC_L2, q, b, 3, qq, bb), 5.0f);
	CU_ASSERT_EQUAL(metric_key(XJ_METRIC_IP, q, b, 3, qq, bb), -25.0f);
	CU_ASSERT_EQUAL(metric_key(XJ_METRIC_COSINE, q, b, 3, qq, bb),
			(float)(1.0 - 25.0 / sqrt(14.0 * 61.0)));
	/* identical rows: distance exactly 0 */
	CU_ASSERT_EQUAL(metric_key(XJ_METRIC_L2, q, q, 3, qq, qq), 0.0f);
	CU_ASSERT_EQUAL(metric_key(XJ_METRIC_SQEUCLIDEAN, b, b, 3, bb, bb), 0.0f);
	/* cosine of parallel rows is 1 - 1 up to rounding */
	float b2[3] = { 2, 4, 6 };

	CU_ASSERT(fabsf(metric_key(XJ_METRIC_COSINE, q, b2, 3, qq, 56)) < 1e-7f);
}

/* metric_key against the long double reference: every metric, random,
 * offset and small-scale data; tolerance abs + |ref| * eps. */
static void test_key_vs_reference(void)
{
	enum { D = 100, N = 300 };
	float q[D], b[D];
	int bad = 0;

	for (size_t mi = 0; mi < 4; mi++) {
		xj_metric m = metrics[mi];

		for (int rep = 0; rep < N; rep++) {
			double off = rep % 3 == 0 ? 1e4 : 0, sc = rep % 7 + 1e-3;

			fill(q, D, off, sc);
			fill(b, D, off, sc);
			if (rep % 11 == 0)
				memcpy(b, q, sizeof(q));   /* duplicate pair */
			double qq = metric_norm2(q, D), bb = metric_norm2(b, D);
			float k = metric_key(m, q, b, D, qq, bb);
			long double r = ref_key(m, q, b, D);
			long double tol = fabsl(r) * 0x1p-23L +
					  ref_scale(m, q, b, D) * 0x1p-40L +
					  0x1p-140L;

			if (!(fabsl((long double)k - r) <= tol)) {
				if (bad++ < 8)
					printf("\n  %s rep %d: key %.9g ref %.12Lg tol %.3Lg",
					       metric_names[mi], rep, k, r, tol);
			}
			/* same call, same bits */
			float k2 = metric_key(m, q, b, D, qq, bb);

			CU_ASSERT_EQUAL(memcmp(&k, &k2, sizeof(k)), 0);
		}
	}
	CU_ASSERT_EQUAL(bad, 0);
}

static void test_values_and_keys(void)
{
	CU_ASSERT_EQUAL(metric_key_to_value(XJ_METRIC_IP, -3.5f), 3.5f);
	CU_ASSERT_EQUAL(metric_key_to_value(XJ_METRIC_L2, 3.5f), 3.5f);
	CU_ASSERT_EQUAL(metric_key_to_value(XJ_METRIC_COSINE, 0.25f), 0.25f);
	CU_ASSERT(isinf(metric_key_to_value(XJ_METRIC_IP, INFINITY)) &&
		  metric_key_to_value(XJ_METRIC_IP, INFINITY) < 0);
	CU_ASSERT(isinf(metric_key_to_value(XJ_METRIC_L2, INFINITY)) &&
		  metric_key_to_value(XJ_METRIC_L2, INFINITY) > 0);
	CU_ASSERT_EQUAL(metric_value_to_key(XJ_METRIC_IP, 2.5), -2.5f);
	CU_ASSERT_EQUAL(metric_value_to_key(XJ_METRIC_SQEUCLIDEAN, 2.5), 2.5f);
	/* (float)0.1 is above 0.1: the key steps down to stay <= 0.1 */
	CU_ASSERT_EQUAL(metric_value_to_key(XJ_METRIC_L2, 0.1),
			nextafterf(0.1f, 0.0f));
	CU_ASSERT((double)metric_value_to_key(XJ_METRIC_L2, 0.1) <= 0.1);
	CU_ASSERT_EQUAL(metric_value_to_key(XJ_METRIC_IP, 0.1), -0.1f);
	/* beyond float range: the largest float, which every finite key
	 * passes, as every finite value passes 1e300 */
	CU_ASSERT_EQUAL(metric_value_to_key(XJ_METRIC_L2, 1e300), FLT_MAX);
	CU_ASSERT_EQUAL(metric_value_to_key(XJ_METRIC_IP, -1e300), FLT_MAX);
	/* round trip of representable values */
	for (size_t mi = 0; mi < 4; mi++) {
		float v = 0.375f;

		CU_ASSERT_EQUAL(metric_key_to_value(metrics[mi],
				metric_value_to_key(metrics[mi], v)), v);
	}
}

/* Independent double-precision error of the canonical score, absolute,
 * for ip and cosine; the gate leaves it to metric_err_bound() (metric.c). */
static long double double_err(xj_metric m, const float *q, const float *b,
			      int64_t d)
{
	long double nq = sqrtl(ref_dot(q, q, d)), nb = sqrtl(ref_dot(b, b, d));

	if (m == XJ_METRIC_IP)
		return (d + 2) * 0x1p-53L * nq * nb;
	if (m == XJ_METRIC_COSINE)
		return (d + 6) * 0x1p-53L;
	return 0;
}

/* The gate of a pair's own key bounds its exact approx-space value. */
static void test_gate_covers_own_key(void)
{
	enum { D = 64 };
	float q[D], b[D];
	int bad = 0;

	for (size_t mi = 0; mi < 4; mi++) {
		xj_metric m = metrics[mi];

		for (int rep = 0; rep < 2000; rep++) {
			int kind = rep % 5;

			fill(q, D, kind == 1 ? 1e4 : 0, kind == 2 ? 1e-30 : 1);
			memcpy(b, q, sizeof(q));
			if (kind == 3) {
				/* near duplicate: one ulp apart in one place */
				b[rep % D] = nextafterf(b[rep % D], INFINITY);
			} else if (kind == 4) {
				/* subnormal differences */
				for (int i = 0; i < D; i++)
					b[i] = q[i] = (float)(rng_gauss() * 1e-41);
				b[0] = nextafterf(b[0], INFINITY);
			} else if (kind != 0 || rep % 2) {
				fill(b, D, kind == 1 ? 1e4 : 0,
				     kind == 2 ? 1e-30 : 1);
			}
			double qq = metric_norm2(q, D), bb = metric_norm2(b, D);
			if (m == XJ_METRIC_COSINE && (qq == 0 || bb == 0))
				continue;
			float key = metric_key(m, q, b, D, qq, bb);
			long double a = ref_approx(m, q, b, D);
			long double g = metric_gate_approx(m, key) +
					double_err(m, q, b, D);

			if (!(a <= g)) {
				if (bad++ < 8)
					printf("\n  %s kind %d: key %.9g approx %.12Lg gate %.12Lg",
					       metric_names[mi], kind, key, a, g);
			}
		}
	}
	CU_ASSERT_EQUAL(bad, 0);
	/* monotone, +inf stays +inf, slack is small */
	for (size_t mi = 0; mi < 4; mi++) {
		xj_metric m = metrics[mi];

		CU_ASSERT(isinf(metric_gate_approx(m, INFINITY)) &&
			  metric_gate_approx(m, INFINITY) > 0);
		CU_ASSERT(isinf(metric_gate_approx(m, -INFINITY)) &&
			  metric_gate_approx(m, -INFINITY) < 0);
		CU_ASSERT(metric_gate_approx(m, 1.0f) <
			  metric_gate_approx(m, 1.5f));
		CU_ASSERT(metric_gate_approx(m, 2.0f) < 4.0 * (1 + 0x1p-18));
	}
	CU_ASSERT(metric_gate_approx(XJ_METRIC_L2, 2.0f) >= 4.0);
	CU_ASSERT(metric_gate_approx(XJ_METRIC_SQEUCLIDEAN, 0.0f) > 0.0);
	CU_ASSERT(metric_gate_approx(XJ_METRIC_IP, -3.0f) >= -3.0);
	CU_ASSERT(metric_gate_approx(XJ_METRIC_IP, -3.0f) < -3.0 + 1e-5);
}

/*
 * The approx-space value computed as the CPU backend does: cblas_sgemm
 * G = alpha Q B^T + C with alpha -2 and C = |b_j|^2 (l2 family), alpha -1
 * and C = 1 on rows normalised in float (cosine), alpha -1 and C = 0 (ip);
 * G + |q|^2 (l2 family) must lie within metric_err_bound() of the exact
 * value, on random, offset (cancelling) and small-scale data.
 */
enum { EB_NQ = 40, EB_NB = 60 };

typedef struct eb_data {
	int64_t d;
	float *q, *b, *qh, *bh;      /* raw and normalised rows */
	float g[EB_NQ * EB_NB];
	float qn[EB_NQ], bn[EB_NB];  /* float norms */
} eb_data;

static void eb_norms(const float *x, int64_t n, int64_t d, float *nrm,
		     float *hat)
{
	for (int64_t r = 0; r < n; r++) {
		double s = metric_norm2(x + r * d, d);

		nrm[r] = (float)sqrt(s);
		for (int64_t i = 0; i < d; i++)
			hat[r * d + i] = (float)(x[r * d + i] / sqrt(s));
	}
}

static void eb_gemm(xj_metric m, eb_data *e)
{
	int64_t d = e->d;
	int l2 = m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN;
	int cosine = m == XJ_METRIC_COSINE;
	float beta = m == XJ_METRIC_IP ? 0.0f : 1.0f;

	eb_norms(e->q, EB_NQ, d, e->qn, e->qh);
	eb_norms(e->b, EB_NB, d, e->bn, e->bh);
	for (int i = 0; i < EB_NQ; i++)
		for (int j = 0; j < EB_NB; j++)
			e->g[i * EB_NB + j] = l2 ?
				(float)metric_norm2(e->b + j * d, d) : 1.0f;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, EB_NQ, EB_NB,
		    (int)d, l2 ? -2.0f : -1.0f, cosine ? e->qh : e->q, (int)d,
		    cosine ? e->bh : e->b, (int)d, beta, e->g, EB_NB);
}

/* |approx - exact| / bound for the pair (i, j); prints when above 1. */
static double eb_ratio(xj_metric m, const eb_data *e, int i, int j)
{
	int64_t d = e->d;
	const float *qi = e->q + i * d, *bj = e->b + j * d;
	long double exact = ref_approx(m, qi, bj, d);
	long double v = e->g[i * EB_NB + j];
	double bound;

	if (m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN)
		v += metric_norm2(qi, d);
	if (m == XJ_METRIC_COSINE)
		bound = metric_err_bound(m, d, 1, 1);
	else
		bound = metric_err_bound(m, d, e->qn[i], e->bn[j]);
	double r = (double)(fabsl(v - exact) / bound);

	if (!(r <= 1))
		printf("\n  %s d=%lld pair (%d,%d): approx %.12Lg exact %.12Lg bound %.3g",
		       metric_names[m], (long long)d, i, j, v, exact, bound);
	return r;
}

static void test_err_bound(void)
{
	const int64_t dims[] = { 1, 3, 100, 960 };
	double worst = 0;
	int bad = 0;

	for (size_t di = 0; di < 4; di++) {
		eb_data e;
		int64_t d = dims[di];

		e.d = d;
		e.q = malloc(sizeof(float) * EB_NQ * d);
		e.b = malloc(sizeof(float) * EB_NB * d);
		e.qh = malloc(sizeof(float) * EB_NQ * d);
		e.bh = malloc(sizeof(float) * EB_NB * d);
		CU_ASSERT_FATAL(e.q && e.b && e.qh && e.bh);
		for (int kind = 0; kind < 3; kind++) {
			double off = kind == 1 ? 1e4 : 0, sc = kind == 2 ? 1e-3 : 1;

			fill(e.q, EB_NQ * d, off, sc);
			fill(e.b, EB_NB * d, off, sc);
			memcpy(e.b, e.q, sizeof(float) * d);   /* a duplicate */
			for (size_t mi = 0; mi < 4; mi++) {
				eb_gemm(metrics[mi], &e);
				for (int i = 0; i < EB_NQ; i++)
					for (int j = 0; j < EB_NB; j++) {
						double r = eb_ratio(metrics[mi],
								    &e, i, j);

						worst = r > worst ? r : worst;
						bad += !(r <= 1);
					}
			}
		}
		free(e.q);
		free(e.b);
		free(e.qh);
		free(e.bh);
	}
	printf("\n  largest error / bound seen: %.3g ", worst);
	CU_ASSERT_EQUAL(bad, 0);
	/* bound grows with d and norms, and is positive for zero norms */
	CU_ASSERT(metric_err_bound(XJ_METRIC_L2, 10, 0, 0) > 0);
	CU_ASSERT(metric_err_bound(XJ_METRIC_IP, 10, 0, 1) > 0);
	CU_ASSERT(metric_err_bound(XJ_METRIC_L2, 100, 1, 1) >
		  metric_err_bound(XJ_METRIC_L2, 10, 1, 1));
	CU_ASSERT(metric_err_bound(XJ_METRIC_IP, 10, 2, 1) >
		  metric_err_bound(XJ_METRIC_IP, 10, 1, 1));
}

/* ---- the double GEMM's decision (metric_dgemm.h) ---------------------- */

/* The CPU's decision as cpu_matrix.c wrote it before metric_dgemm.h
 * (plain C, this file compiled with -ffp-contract=off): the shared
 * header must decide every pair as it did, to the bit. */
static int old_decide(xj_metric m, int64_t d, double p, double qq, double bb,
		      float *value)
{
	int sq = m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN;
	double x, e, lo, hi;
	float klo, khi;
	uint32_t a, z;

	if (sq) {
		x = qq + bb - 2.0 * p;
		double ea = (2.0 * (double)d + 4.0) * 0x1p-53 * (qq + bb);

		e = (ea + ((double)d + 3.0) * 0x1p-53 * (fabs(x) + ea)) *
		    (1.0 + 0x1p-18) + 0x1p-50 * fabs(x);
	} else {
		x = p;
		e = 2.0 * (double)d * 0x1p-53 * sqrt(qq) * sqrt(bb) *
		    (1.0 + 0x1p-18) + 0x1p-50 * fabs(x);
	}
	lo = x - e;
	hi = x + e;
	switch (m) {
	case XJ_METRIC_SQEUCLIDEAN:
		klo = (float)lo;
		khi = (float)hi;
		break;
	case XJ_METRIC_L2:
		klo = (float)sqrt(lo);
		khi = (float)sqrt(hi);
		break;
	case XJ_METRIC_IP:
		klo = -(float)lo;
		khi = -(float)hi;
		break;
	default:
		klo = (float)(1.0 - lo / sqrt(qq * bb));
		khi = (float)(1.0 - hi / sqrt(qq * bb));
	}
	memcpy(&a, &klo, sizeof(a));
	memcpy(&z, &khi, sizeof(z));
	*value = m == XJ_METRIC_IP ? -klo : klo;
	return a != z;
}

/*
 * On dgemm_pair's adversarial pairs (rounding boundaries, duplicates and
 * near-duplicates, magnitudes 1e-20..1e18) with the dot product summed in
 * the orders a GEMM may take: the decision is the old one bit for bit,
 * and a decided value is the canonical one. Both outcomes occur.
 */
static void test_dgemm_decide(void)
{
	const int64_t ds[] = { 4, 24, 100 };
	int64_t bad = 0, wrong = 0, decided = 0, undecided = 0;

	for (size_t a = 0; a < UNIT_COUNT(ds); a++) {
		int64_t d = ds[a];
		float *q = malloc(sizeof(float) * (size_t)d);
		float *b = malloc(sizeof(float) * (size_t)d);

		CU_ASSERT_FATAL(q && b);
		for (int64_t i = 0; i < 1200; i++) {
			double qq, bb, p[DGEMM_ORDERS];

			dgemm_pair(i, d, q, b);
			qq = metric_norm2(q, d);
			bb = metric_norm2(b, d);
			dgemm_dots(q, b, d, p);
			for (size_t mi = 0; mi < 4; mi++) {
				xj_metric m = metrics[mi];
				float want = metric_key_to_value(m,
					metric_key(m, q, b, d, qq, bb));

				for (int o = 0; o < DGEMM_ORDERS; o++) {
					float v, w;
					int u = metric_dgemm_decide(m, d, p[o],
								    qq, bb, &v);

					if (u != old_decide(m, d, p[o], qq, bb,
							    &w) ||
					    !same_f32(v, w))
						bad++;
					if (!u && !same_f32(v, want) &&
					    wrong++ < 4)
						printf("\n  %s d=%lld pair %lld order %d: %a, canonical %a",
						       metric_names[m],
						       (long long)d,
						       (long long)i, o, v, want);
					decided += !u;
					undecided += u;
				}
			}
		}
		free(q);
		free(b);
	}
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(wrong, 0);
	CU_ASSERT(decided > 0 && undecided > 0);
	printf("\n  %lld decided, %lld undecided ", (long long)decided,
	       (long long)undecided);
}

/* The canonical terms of a pair (squared differences for the l2 family,
 * products otherwise) summed in another order o, as a device may: 0
 * reverse, 1 the 32 lanes of a warp (element i to lane i % 32, each lane
 * in index order) then a butterfly, 2 pairwise halves, 3 with FMA (dot
 * products only; the l2 family's terms as 1). *a gets the sum of the
 * terms' absolute values in the same order. */
#define SUM_ORDERS 4
static double sum_other_order(xj_metric m, const float *q, const float *b,
			      int64_t d, int o, double *a)
{
	int sq = m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN;
	double lane[32] = { 0 }, alane[32] = { 0 }, s = 0, as = 0;

	for (int64_t n = 0; n < d; n++) {
		int64_t i = o == 0 ? d - 1 - n : n;
		double t = sq ? ((double)q[i] - (double)b[i]) *
				((double)q[i] - (double)b[i]) :
			   (double)q[i] * (double)b[i];
		int l = o == 2 ? (i < d / 2 ? 0 : 1) : o == 0 ? 0 : (int)(i % 32);

		if (o == 3 && !sq)
			lane[l] = fma((double)q[i], (double)b[i], lane[l]);
		else
			lane[l] += t;
		alane[l] += fabs(t);
	}
	for (int off = 16; off >= 1; off /= 2)
		for (int l = 0; l < 32; l++) {
			double x = lane[l] + lane[l ^ off];
			double y = alane[l] + alane[l ^ off];

			if (l < (l ^ off)) {
				lane[l] = lane[l ^ off] = x;
				alane[l] = alane[l ^ off] = y;
			}
		}
	s = lane[0];
	as = alane[0];
	*a = sq ? s : as;
	return s;
}

/*
 * metric_sum_decide on dgemm_pair's adversarial pairs and on plain
 * Gaussian pairs, each summed in SUM_ORDERS orders: a decided key is the
 * canonical one, and Gaussian pairs are almost all decided.
 */
static void test_sum_decide(void)
{
	const int64_t ds[] = { 4, 24, 100, 128, 769 };
	int64_t wrong = 0, decided = 0, undecided = 0, gauss_undecided = 0,
		gauss = 0;

	for (size_t a = 0; a < UNIT_COUNT(ds); a++) {
		int64_t d = ds[a];
		float *q = malloc(sizeof(float) * (size_t)d);
		float *b = malloc(sizeof(float) * (size_t)d);

		CU_ASSERT_FATAL(q && b);
		for (int64_t i = 0; i < 1600; i++) {
			int plain = i >= 1200;
			double qq, bb;

			if (plain) {
				fill(q, d, 0, 1);
				fill(b, d, i % 2 ? 3 : 0, 1);
			} else {
				dgemm_pair(i, d, q, b);
			}
			qq = metric_norm2(q, d);
			bb = metric_norm2(b, d);
			for (size_t mi = 0; mi < 4; mi++) {
				xj_metric m = metrics[mi];
				float want = metric_key(m, q, b, d, qq, bb);

				for (int o = 0; o < SUM_ORDERS; o++) {
					double as, s = sum_other_order(m, q, b,
								       d, o, &as);
					float key;
					int u = metric_sum_decide(m, d, s, as,
								  qq, bb, &key);

					if (!u && !same_f32(key, want) &&
					    wrong++ < 4)
						printf("\n  %s d=%lld pair %lld order %d: %a, canonical %a",
						       metric_names[m],
						       (long long)d,
						       (long long)i, o, key,
						       want);
					decided += !u;
					undecided += u;
					gauss += plain;
					gauss_undecided += plain && u;
				}
			}
		}
		free(q);
		free(b);
	}
	CU_ASSERT_EQUAL(wrong, 0);
	CU_ASSERT(decided > 0 && undecided > 0);
	/* Gaussian rows leave the bound's interval inside one float key
	 * but for rounding boundaries: a few in a million */
	CU_ASSERT(gauss_undecided * 1000 < gauss);
	printf("\n  %lld decided, %lld undecided (%lld of %lld Gaussian) ",
	       (long long)decided, (long long)undecided,
	       (long long)gauss_undecided, (long long)gauss);
}

static void test_check_rows(void)
{
	enum { D = 5 };
	float x[4 * D];
	xj_status st;

	fill(x, 4 * D, 0, 1);
	for (size_t mi = 0; mi < 4; mi++) {
		xj_ok(&st);
		CU_ASSERT_EQUAL(metric_check_rows(metrics[mi], x, 4, D, 0, &st),
				XJ_OK);
		CU_ASSERT_EQUAL(st.code, XJ_OK);
	}
	/* zero row: cosine only */
	memset(x + 2 * D, 0, sizeof(float) * D);
	xj_ok(&st);
	CU_ASSERT_EQUAL(metric_check_rows(XJ_METRIC_L2, x, 4, D, 100, &st),
			XJ_OK);
	xj_ok(&st);
	CU_ASSERT_EQUAL(metric_check_rows(XJ_METRIC_COSINE, x, 4, D, 100, &st),
			XJ_EXIT_INPUT);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg,
			       "row 102 is all zeros (cosine is undefined)"));
	/* overflowing squared norm, every metric */
	fill(x, 4 * D, 0, 1);
	x[3 * D + 1] = 1e19f;
	for (size_t mi = 0; mi < 4; mi++) {
		xj_ok(&st);
		CU_ASSERT_EQUAL(metric_check_rows(metrics[mi], x, 4, D, 7, &st),
				XJ_EXIT_INPUT);
		CU_ASSERT_PTR_NOT_NULL(strstr(st.msg,
			"row 10: values too large (squared norm overflows float32)"));
	}
	/* just below the limit passes */
	x[3 * D + 1] = 3e18f;
	xj_ok(&st);
	CU_ASSERT_EQUAL(metric_check_rows(XJ_METRIC_IP, x, 4, D, 7, &st), XJ_OK);
	/* zero rows: nothing to check */
	xj_ok(&st);
	CU_ASSERT_EQUAL(metric_check_rows(XJ_METRIC_COSINE, x, 0, D, 0, &st),
			XJ_OK);
}

int main(void)
{
	static const unit_test tests[] = {
		{ "norm2", test_norm2 },
		{ "key known values", test_key_known_values },
		{ "key vs long double", test_key_vs_reference },
		{ "values and keys", test_values_and_keys },
		{ "gate covers own key", test_gate_covers_own_key },
		{ "err bound", test_err_bound },
		{ "check rows", test_check_rows },
		{ "double GEMM decision", test_dgemm_decide },
		{ "decision from a sum in another order", test_sum_decide },
	};

	return unit_run("metric", tests, UNIT_COUNT(tests));
}
