/*
 * metric.c: canonical scores, ranking keys, gates and GEMM error bounds.
 *
 * Canonical score of a pair (metric.h): double accumulation over the
 * dimension in index order, no contraction (built with -ffp-contract=off,
 * never fma()), one final rounding to float32. Per pair and dimension:
 *   l2, sqeuclidean: 1 sub + 1 mul + 1 add (double)
 *   ip:              1 mul + 1 add
 *   cosine:          1 mul + 1 add, plus qq, bb computed once per row
 * The loops below are strictly sequential reductions; without
 * -fassociative-math the compiler cannot reorder them, which is what makes
 * the result depend only on the two rows.
 *
 * Error analysis (u = 2^-24 float unit roundoff, gamma_n = n u / (1 - n u)):
 * see metric_err_bound() and metric_gate_approx().
 */
#include "metric.h"

#include <float.h>
#include <math.h>

/* float32 unit roundoff */
#define U32 0x1p-24

double metric_norm2(const float *x, int64_t d)
{
	double s = 0.0;

	for (int64_t i = 0; i < d; i++) {
		double v = x[i];

		s += v * v;
	}
	return s;
}

static double dot_canonical(const float *q, const float *b, int64_t d)
{
	double p = 0.0;

	for (int64_t i = 0; i < d; i++)
		p += (double)q[i] * (double)b[i];
	return p;
}

static double sqdist_canonical(const float *q, const float *b, int64_t d)
{
	double s = 0.0;

	for (int64_t i = 0; i < d; i++) {
		double t = (double)q[i] - (double)b[i];

		s += t * t;
	}
	return s;
}

float metric_key(xj_metric m, const float *q, const float *b, int64_t d,
		 double qq, double bb)
{
	double s, c;

	switch (m) {
	case XJ_METRIC_SQEUCLIDEAN:
		return (float)sqdist_canonical(q, b, d);
	case XJ_METRIC_L2:
		s = sqdist_canonical(q, b, d);
		return (float)sqrt(s);
	case XJ_METRIC_IP:
		return -(float)dot_canonical(q, b, d);
	case XJ_METRIC_COSINE:
		c = dot_canonical(q, b, d) / sqrt(qq * bb);
		return (float)(1.0 - c);
	}
	return NAN;
}

float metric_key_to_value(xj_metric m, float key)
{
	return m == XJ_METRIC_IP ? -key : key;
}

/*
 * The threshold is applied in float32, like every reported value: a pair
 * passes when its key <= (float)t (ip: -(float)t, the same rounding since
 * it is symmetric). Values beyond float range become +-inf.
 */
/* The largest float key not above the threshold's key, so "keep when
 * key <= threshold key" means exactly value <= t (ip: value >= t) for the
 * user's t, not for t rounded to the nearest float. */
float metric_value_to_key(xj_metric m, double value)
{
	double want = m == XJ_METRIC_IP ? -value : value;
	float f = (float)want;

	if ((double)f > want)
		f = nextafterf(f, -INFINITY);
	return f;
}

/*
 * Gate: an upper bound on the exact approx-space value a of any pair whose
 * canonical key is <= key. Two error sources separate a from the key:
 *   - the final rounding to float: relative 2^-24, or absolute 2^-150 in
 *     the subnormal range;
 *   - the double accumulation: for l2/sqeuclidean a sum of non-negative
 *     terms, relative error <= gamma_{d+2} in double (< 2^-30 for
 *     d < 2^20); for ip and cosine the double error is absolute, of order
 *     (d+5) 2^-53 |q||b|, and is covered instead by metric_err_bound(),
 *     which is 2^28 times larger (see there).
 * The relative slack 2^-20 covers 2^-24 + the double error with 8x room.
 */
double metric_gate_approx(xj_metric m, float key)
{
	double k = key;
	double r;

	if (isnan(key) || (isinf(key) && key > 0))
		return INFINITY;    /* no bound: keep everything */
	if (isinf(key))
		return -INFINITY;   /* nothing can pass */
	switch (m) {
	case XJ_METRIC_L2:
		if (k < 0)
			return k;    /* no distance is negative: vacuous */
		/* bound the exact distance, then square it */
		r = k + k * 0x1p-21 + 0x1p-148;
		return r * r * (1 + 0x1p-40);
	case XJ_METRIC_SQEUCLIDEAN:
		if (k < 0)
			return k;
		return k + k * 0x1p-20 + 0x1p-148;
	case XJ_METRIC_COSINE:
		return k + fabs(k) * 0x1p-20 + 0x1p-40;
	case XJ_METRIC_IP:
		return k + fabs(k) * 0x1p-20 + 0x1p-148;
	}
	return INFINITY;
}

/*
 * Worst-case |approx - exact| in approx space. A float32 dot product of
 * length d, summed in any order, with or without FMA, has error at most
 * gamma_d sum|q_i b_i| <= gamma_d |q||b| (Cauchy-Schwarz), and
 * gamma_d = d u / (1 - d u) <= 2 d u while d <= 2^23.
 *
 * l2, sqeuclidean: a = bn - 2 q.b + qq with bn the float squared norm of b
 *   (one rounding of a double, error u |b|^2), q.b from the GEMM (error
 *   d u |q||b|, the factor -2 is exact), one float addition (error
 *   u (|q|+|b|)^2) and qq in double (negligible). Total
 *   <= (d+2) u (|q|+|b|)^2; we return 2 (d+8) u (|q|+|b|)^2. The factor 2
 *   absorbs that |q|, |b| are themselves float approximations, gamma_d vs
 *   d u, and the double error of the canonical score.
 * ip: a = -q.b, error d u |q||b| (+ double error (d+2) 2^-53 |q||b|);
 *   we return 2 (d+8) u |q||b|.
 * cosine: rows normalised in float (each element one rounding, so the
 *   normalised rows are within u of unit vectors, norms <= 1 + u): error
 *   of 1 - qn.bn is <= d u (1+u)^2 + 2u + (d+5) 2^-53 for the canonical
 *   double path; we return 16 (d+8) u (callers pass norms 1, 1).
 * Absolute term: products and sums that fall into the subnormal range (or
 * are flushed to zero) lose at most FLT_MIN each, d of them per dot
 * product, times 2 for the l2 scaling; 4 (d+8) FLT_MIN covers that.
 */
double metric_err_bound(xj_metric m, int64_t d, double qnorm, double bnorm)
{
	double n = (double)d + 8.0;
	double tiny = 4.0 * n * FLT_MIN;
	double s;

	switch (m) {
	case XJ_METRIC_L2:
	case XJ_METRIC_SQEUCLIDEAN:
		s = qnorm + bnorm;
		return 2.0 * n * U32 * s * s + tiny;
	case XJ_METRIC_IP:
		return 2.0 * n * U32 * qnorm * bnorm + tiny;
	case XJ_METRIC_COSINE:
		return 16.0 * n * U32 * qnorm * bnorm + tiny;
	}
	return INFINITY;
}

/* Squared norms above this overflow float32 in the GEMM path (|q.b|,
 * |b|^2 and their sums must stay below FLT_MAX ~ 3.4e38). */
#define NORM2_MAX 1e37

int metric_check_rows(xj_metric m, const float *x, int64_t rows, int64_t d,
		      int64_t first_row, xj_status *st)
{
	for (int64_t r = 0; r < rows; r++) {
		double s = metric_norm2(x + r * d, d);

		if (m == XJ_METRIC_COSINE && s == 0.0)
			return xj_fail(st, XJ_EXIT_INPUT,
				       "row %lld is all zeros (cosine is undefined)",
				       (long long)(first_row + r));
		if (!(s <= NORM2_MAX))
			return xj_fail(st, XJ_EXIT_INPUT,
				       "row %lld: values too large (squared norm overflows float32)",
				       (long long)(first_row + r));
	}
	return XJ_OK;
}
