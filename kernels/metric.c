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

/*
 * Lower-precision candidate GEMMs (--precision, GPU backend only). The GEMM
 * only proposes candidates; its error bound must stay a true worst case.
 *
 * Input rounding. Each float x fed to the GEMM becomes r(x) with
 *     |r(x) - x| <= up |x| + eta
 * tf32  up = 2^-10  10 stored bits. cuBLAS does not document how it turns
 *                   float operands into tf32 (the tensor core may simply
 *                   drop the low 13 bits), so we take truncation's 1 ulp,
 *                   which also covers round to nearest (even or away).
 * bf16  up = 2^-8   7 stored bits, round to nearest even (__float2bfloat16_rn)
 * fp16  up = 2^-11  10 stored bits, round to nearest even (__float2half_rn)
 * eta covers values below the format's smallest normal, whether kept as
 * subnormals or flushed to zero: 2^-126 (tf32, bf16: float's range) and
 * 2^-14 for fp16, whose subnormals start at 6.1e-5. fp16 also overflows
 * above 65504; the backend checks every chunk on the host and runs the
 * float32 GEMM (and bound) on a chunk that holds such a value, so r never
 * overflows. Rows pass metric_check_rows (|x|^2 <= 1e37), far inside
 * tf32's and bf16's range.
 *
 * Rounded dot product. With Q = |q|, B = |b| (Euclidean), componentwise
 * errors give |r(q) - q| <= up Q + eta sqrt(d) =: dq (triangle inequality)
 * and |r(b)| <= B + db, so by Cauchy-Schwarz
 *     |r(q).r(b) - q.b| = |(r(q) - q).r(b) + q.(r(b) - b)|
 *                       <= dq (B + db) + Q db                       (E_in)
 *
 * Accumulation in float32, possibly on tensor cores. Model: products of
 * the rounded inputs are exact or rounded toward zero, and any reduction
 * tree (sequential, split-k, or the tensor core's fused multi-term adds)
 * combines c values with an error below 1 ulp of float32 at the largest
 * of them for each value (alignment by truncation) plus 1 ulp of the
 * result (normalisation by truncation): at most (c + 1) 2u T, u = 2^-24,
 * T the sum of the magnitudes combined. Over a tree with d leaves and
 * N <= d - 1 inner nodes the c's sum to d + N - 1, so all nodes together
 * lose at most (3d - 3) 2u of the running magnitudes, and with the
 * product roundings and the growth of those magnitudes
 *     |acc - r(q).r(b)| <= 6 d u / (1 - 6 d u) S,  S = sum |r(q_i) r(b_i)|
 *                                               <= (Q + dq)(B + db)  (E_acc)
 * The model is 2 to 6 times wider than IEEE float32 round to nearest
 * (d u); E_in dominates it unless d is in the thousands for tf32/fp16.
 *
 * Approx space, E = E_in + E_acc, u = 2^-24 (see metric_err_bound for the
 * float32 terms that do not depend on the precision):
 *   l2, sqeuclidean: a = qq + fl(fl(|b|^2) - 2 acc)
 *                    |a - exact| <= 2 (1 + u) E + 2u (Q + B)^2
 *                    (the -2 is exact; fl(|b|^2) and the addition add
 *                    u B^2 + u (B^2 + 2 Q B + 2 E))
 *   ip:              a = -acc, |a - exact| <= E
 *   cosine:          a = 1 - acc on rows normalised in float, each within
 *                    u + 2^-50 of the unit row componentwise, so their
 *                    norms are <= 1 + 2^-20 and their dot product is
 *                    within 3u of the cosine: |a - exact| <= E + 3u
 * plus, for every metric, the double error of the canonical score
 * ((d + 8) 2^-50 (Q + B)^2, Q B or 1: far more than (d + 5) 2^-53) and
 * 8 (d + 8) FLT_MIN for products and sums that underflow. The norms the
 * callers pass are float roundings of the exact ones (or 1 for cosine);
 * they are raised by 2^-20 relative before use, which covers that
 * rounding. Every term grows with qnorm and bnorm, so the bound at the
 * largest base norm of a tile holds for every row of the tile.
 *
 * Measured (tests/gpu/test_cuda_precision.c, emulated roundings and
 * accumulations): the bound is 3.4 to 6.0 times the largest error seen on
 * Gaussian rows with d >= 16 and 5.2 to 17 times on GloVe rows; at d = 1
 * two inputs truncated the same way reach it (ratio 1.0), as a worst case
 * should.
 */
#define PREC_SLACK (1.0 + 0x1p-20)

/* up and eta of the input rounding of p (above); 0 for fp32. */
static int prec_rounding(xj_precision p, double *up, double *eta)
{
	switch (p) {
	case XJ_PREC_TF32:
		*up = 0x1p-10;
		*eta = 0x1p-126;
		return 1;
	case XJ_PREC_BF16:
		*up = 0x1p-8;
		*eta = 0x1p-126;
		return 1;
	case XJ_PREC_FP16:
		*up = 0x1p-11;
		*eta = 0x1p-14;
		return 1;
	case XJ_PREC_FP32:
	case XJ_PREC_INT8:   /* CPU only: metric_err_bound_rows */
	case XJ_PREC_AUTO:
		break;
	}
	return 0;
}

/* The approx-space bound from the input error norms dq, db (E_in) and the
 * accumulation factor acc (E_acc = acc (qn + dq)(bn + db)), shared by the
 * GPU precisions (above) and the CPU's rounded rows (below). */
static double err_from_inputs(xj_metric m, double n, double qn, double bn,
			      double dq, double db, double acc)
{
	double tiny = 8.0 * (n + 8.0) * FLT_MIN, s;
	double bt = bn + db;
	double g = dq * bt + qn * db + acc * (qn + dq) * bt;
	double dbl = (n + 8.0) * 0x1p-50;

	switch (m) {
	case XJ_METRIC_L2:
	case XJ_METRIC_SQEUCLIDEAN:
		s = qn + bn;
		return 2.0 * (1.0 + U32) * g + (2.0 * U32 + dbl) * s * s + tiny;
	case XJ_METRIC_IP:
		return g + dbl * qn * bn + tiny;
	case XJ_METRIC_COSINE:
		return g + 3.0 * U32 + dbl + tiny;
	}
	return INFINITY;
}

double metric_err_bound_prec(xj_metric m, int64_t d, double qnorm,
			     double bnorm, xj_precision p)
{
	double up, eta, n = (double)d, qn, bn, r;

	if (!prec_rounding(p, &up, &eta))
		return metric_err_bound(m, d, qnorm, bnorm);
	if (12.0 * n * U32 >= 1.0)
		return INFINITY;
	qn = qnorm * PREC_SLACK;
	bn = bnorm * PREC_SLACK;
	r = eta * sqrt(n);
	return err_from_inputs(m, n, qn, bn, up * qn + r, up * bn + r,
			       6.0 * n * U32 / (1.0 - 6.0 * n * U32));
}

/*
 * The CPU's rounded rows (--precision bf16, int8; kernels/cpu/cpu_gemm.h).
 * The rows are rounded on the host, so the input errors need no model:
 * qerr = |r(q) - q| and berr = |r(b) - b| are measured per row (upper
 * bounds computed in double), and E_in = qerr (B + berr) + Q berr as for
 * the GPU (Cauchy-Schwarz; Q, B the rows' norms, raised by 2^-20).
 *   bf16: oneDNN accumulates the exact products of bf16 values in float32
 *         (AVX512-BF16's dot product instructions or AMX tiles, which
 *         treat bf16 subnormals as zero: the rounding flushes them first,
 *         so qerr counts them), in an order and tree of its own: the
 *         GPU's accumulation model, 6 d u / (1 - 6 d u), covers any.
 *   int8: r(x) = s * int8, the int32 dot product is exact (d 255 127 <
 *         2^31); oneDNN writes it as a float (exact below 2^24, d <= 1040;
 *         above, within 1 ulp: relative 2u), then cpu_gemm.c computes
 *         crow + acc (s_b (alpha s_q)) in float (alpha s_q exact, one
 *         rounding for each product: relative (1 + 2u)(1 + u)^2 - 1 <
 *         4.01u of |r(q).r(b)|), and rounds the sum: relative u of at
 *         most |crow| + 2 |r(q).r(b)|, with |crow| <= the terms the
 *         float32 part below already counts (|b|^2, or 1 for cosine,
 *         which is <= (Q + qerr)(B + berr) there), 2u of
 *         (Q + qerr)(B + berr) in all. acc = 7u > 4.01u + 2u. Where
 *         s_b (alpha s_q) is subnormal (rows near 1e-20) its error is
 *         absolute, below 2^-149 |acc| <= 2^-149 127^2 d: far inside the
 *         underflow term, 8 (d + 8) FLT_MIN.
 * The terms that do not depend on the GEMM (fl(|b|^2), the normalisation
 * of cosine rows, the canonical double path, underflow) are those of
 * metric_err_bound_prec. INFINITY when d is too large for the model.
 */
/* The accumulation factor of the CPU's rounded rows (above): int8's
 * exact sums and float scaling, or bf16's float32 accumulation. */
static double rows_acc(xj_precision p, double n)
{
	return p == XJ_PREC_INT8 ? 7.0 * U32 :
	       6.0 * n * U32 / (1.0 - 6.0 * n * U32);
}

double metric_err_bound_rows(xj_metric m, int64_t d, double qnorm,
			     double bnorm, double qerr, double berr,
			     xj_precision p)
{
	double n = (double)d, acc;

	if (p != XJ_PREC_BF16 && p != XJ_PREC_INT8)
		return metric_err_bound(m, d, qnorm, bnorm);
	if (12.0 * n * U32 >= 1.0)
		return INFINITY;
	acc = rows_acc(p, n);
	return err_from_inputs(m, n, qnorm * PREC_SLACK, bnorm * PREC_SLACK,
			       qerr * PREC_SLACK, berr * PREC_SLACK, acc);
}

/*
 * The rounding folded into the constants (l2, sqeuclidean; CPU bf16 and
 * int8). Write e_x = x - r(x) and c_x = x.e_x. Then, exactly,
 *     q.b = r(q).r(b) + c_q + c_b + R,
 *     R   = (e_q - e_b).(b - q) - e_q.e_b
 * (expand r(x) = x - e_x), so the squared distance is
 *     s' = |q - b|^2 = (|q|^2 - 2 c_q) + (|b|^2 - 2 c_b) - 2 r(q).r(b) - 2 R
 * with |R| <= (qerr + berr) X + qerr berr, X = |q - b| = sqrt(s'). The
 * two constants are each row's own (computed once, in double), so the
 * only term that depends on the pair is R, which shrinks with the pair's
 * distance: for neighbours far from the origin (|q - b| << |b|) much
 * narrower than E_in = qerr (B + berr) + Q berr. The tile computes
 *     a = off + fl(C - 2 acc),  off = qq - 2 c^_q,  C = fl(bb - 2 c^_b)
 * with qq, bb the canonical double squared norms and c^ the double sums
 * of the exact products x_i e_i (cpu_gemm.c: e_i is exact in double, and
 * so is x_i e_i, 24 + 25 bits; the sum errs by d 2^-53 Q qerr at most).
 * Its errors against s':
 *   2 R                      2 (qerr + berr) X + 2 qerr berr
 *   acc against r(q).r(b)    2 acc (Q + qerr)(B + berr)   (E_acc, as above)
 *   fl(C) and the addition   u |C| + u |C - 2 acc| <= 2u (1 + acc) st^2,
 *                            st = Q + qerr + B + berr (|c_b| <= B berr)
 *   qq, bb, off, C in double (d + 8) 2^-50 st^2 and, for c^, the same
 *                            factor times 2 (Q qerr + B berr)
 *   underflow                8 (d + 8) FLT_MIN, as above
 * and the canonical score s differs from s' by less than (d + 8) 2^-50
 * st^2 =: t^2, so X <= sqrt(s) + t. Hence |a - s| <= lin sqrt(s) + abs,
 * lin = 2 (qerr + berr) (raised by 2^-20) and abs the rest plus lin t
 * (t <= (d + 8) 2^-25 st: no square root).
 * The norms and errors are raised by 2^-20 as for metric_err_bound_rows.
 * Callers use it through the pair's score bounds: s <= g implies a <= g
 * + lin sqrt(g) + abs (the scan threshold), and from a, s lies between
 * (max(0, sqrt(h^2 + a - abs) - h))^2 and (h + sqrt(h^2 + a + abs))^2,
 * h = lin / 2 (kernels/cpu/cpu_topk.c).
 */
metric_folded metric_folded_side(int64_t d, double bnorm, double berr,
				 xj_precision p)
{
	double n = (double)d;
	metric_folded f = { 0 };

	if ((p != XJ_PREC_BF16 && p != XJ_PREC_INT8) || 12.0 * n * U32 >= 1.0)
		return f;
	f.ok = 1;
	f.slack = PREC_SLACK;
	f.acc = rows_acc(p, n);
	f.bn = bnorm * PREC_SLACK;
	f.db = berr * PREC_SLACK;
	f.dbl = (n + 8.0) * 0x1p-50;
	f.c2 = 2.0 * U32 * (1.0 + f.acc) + f.dbl;
	f.n8 = (n + 8.0) * 0x1p-25;
	f.tiny = 8.0 * (n + 8.0) * FLT_MIN;
	return f;
}

metric_err2 metric_err_bound_folded(int64_t d, double qnorm, double bnorm,
				    double qerr, double berr, xj_precision p)
{
	metric_folded f = metric_folded_side(d, bnorm, berr, p);

	return metric_folded_row(&f, qnorm, qerr);
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
