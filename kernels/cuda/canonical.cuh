/*
 * canonical.cuh: the arithmetic of kernels/metric.c, operation for
 * operation, for the device (and the host, for tests).
 *
 * defines: xjc_norm2, xjc_sqdist, xjc_dot, xjc_step, xjc_key_of_sum,
 *          xjc_key, xjc_is_sq, xjc_is_inf,
 *          xjc_err_bound, xjc_err_bound_prec, xjc_gate_approx,
 *          xjc_scan_threshold, xjc_seed_gate,
 *          xjc_key_order, xjc_order_value, xjc_sortkey, xjc_less
 *
 * Math (metric.h): with q, b float32 rows of dimension d,
 *   s = sum_i ((double)q_i - (double)b_i)^2     p = sum_i (double)q_i b_i
 * accumulated sequentially in index order 0..d-1 in double, then
 *   sqeuclidean (float)s   l2 (float)sqrt(s)   ip -(float)p
 *   cosine      (float)(1 - p / sqrt(qq * bb))
 * Every operation is a correctly rounded IEEE operation in round-to-
 * nearest. On the device each one is written as an intrinsic
 * (__dadd_rn, __dmul_rn, __dsub_rn, __ddiv_rn, __dsqrt_rn,
 * __double2float_rn) because the compiler never fuses those into an FMA
 * or reorders them, whatever -fmad says; on the host the plain operators
 * are used, compiled with -ffp-contract=off like metric.c. The result is
 * then the same bits as metric_key() for every input.
 *
 * Cost per pair: d loads of q and b (8d bytes from cache or memory),
 * 3d double FLOPs (l2 family) or 2d (ip, cosine); the loop is one
 * dependency chain, so one thread does one pair and many pairs run side by
 * side.
 *
 * The gate and error-bound functions copy metric_gate_approx(),
 * metric_err_bound() and metric_err_bound_prec(), bit for bit. The scan
 * threshold follows cpu_topk.c's row_threshold() for the l2 family and
 * ip; for cosine the two backends scan different GEMM values (the CPU's
 * GEMM adds the 1 of 1 - qn.bn, the GPU's gives -qn.bn), so the CPU's
 * threshold is up(gate + err) and the GPU's up(gate - 1 + err): the same
 * bound in two forms, not the same bits. Neither needs to match the other
 * for the answer to be exact (any valid upper bound keeps every pair that
 * can enter the top k). The rounding up to float uses __double2float_ru,
 * which is exactly cpu_topk.c's float_up().
 */
#ifndef XJ_CUDA_CANONICAL_CUH
#define XJ_CUDA_CANONICAL_CUH

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

extern "C" {
#include "../../config/job.h"
}
#include "../metric_dgemm.h"

#define XJC_HD __host__ __device__ __forceinline__

#ifdef __CUDA_ARCH__
#define XJC_ADD(a, b) __dadd_rn((a), (b))
#define XJC_SUB(a, b) __dsub_rn((a), (b))
#define XJC_MUL(a, b) __dmul_rn((a), (b))
#define XJC_DIV(a, b) __ddiv_rn((a), (b))
#define XJC_SQRT(a) __dsqrt_rn(a)
#define XJC_F32(a) __double2float_rn(a)
#define XJC_F32_UP(a) __double2float_ru(a)
#else
#define XJC_ADD(a, b) ((a) + (b))
#define XJC_SUB(a, b) ((a) - (b))
#define XJC_MUL(a, b) ((a) * (b))
#define XJC_DIV(a, b) ((a) / (b))
#define XJC_SQRT(a) sqrt(a)
#define XJC_F32(a) ((float)(a))
#define XJC_F32_UP(a) xjc_f32_up_host(a)

/* Smallest float >= x, as cpu_topk.c's float_up(). */
static inline float xjc_f32_up_host(double x)
{
	float f = (float)x;

	if ((double)f < x)
		f = nextafterf(f, INFINITY);
	return f;
}
#endif

#define XJC_U32 0x1p-24     /* float32 unit roundoff */

/* ---- canonical sums ------------------------------------------------ */

/* sum of (double)x_i^2, i = 0..d-1 in order (metric_norm2) */
XJC_HD double xjc_norm2(const float *x, int64_t d)
{
	double s = 0.0;

	for (int64_t i = 0; i < d; i++) {
		double v = (double)x[i];

		s = XJC_ADD(s, XJC_MUL(v, v));
	}
	return s;
}

XJC_HD double xjc_sqdist(const float *q, const float *b, int64_t d)
{
	double s = 0.0;

	for (int64_t i = 0; i < d; i++) {
		double t = XJC_SUB((double)q[i], (double)b[i]);

		s = XJC_ADD(s, XJC_MUL(t, t));
	}
	return s;
}

XJC_HD double xjc_dot(const float *q, const float *b, int64_t d)
{
	double p = 0.0;

	for (int64_t i = 0; i < d; i++)
		p = XJC_ADD(p, XJC_MUL((double)q[i], (double)b[i]));
	return p;
}

/* One step i of the sum: squared difference (sq, the l2 family) or
 * product, added to acc. For kernels that walk the dimension themselves
 * (matrix.cuh); the order of the steps is theirs to keep. */
XJC_HD double xjc_step(int sq, double acc, double q, double b)
{
	if (sq) {
		double t = XJC_SUB(q, b);

		return XJC_ADD(acc, XJC_MUL(t, t));
	}
	return XJC_ADD(acc, XJC_MUL(q, b));
}

/* Key from the accumulated sum s (squared distance for the l2 family, dot
 * product otherwise), with the final operations of metric_key():
 * metric_dgemm.h's, the CPU's own. */
XJC_HD float xjc_key_of_sum(int m, double s, double qq, double bb)
{
	return metric_sum_key((xj_metric)m, s, qq, bb);
}

XJC_HD int xjc_is_sq(int m)
{
	return m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN;
}

/* metric_key(m, q, b, d, qq, bb) */
XJC_HD float xjc_key(int m, const float *q, const float *b, int64_t d,
		     double qq, double bb)
{
	double s = xjc_is_sq(m) ? xjc_sqdist(q, b, d) : xjc_dot(q, b, d);

	return xjc_key_of_sum(m, s, qq, bb);
}

/* ---- gates ----------------------------------------------------------- */

XJC_HD int xjc_is_inf(double x)
{
	return x > DBL_MAX || x < -DBL_MAX;
}

/* metric_err_bound(m, d, qnorm, bnorm) */
XJC_HD double xjc_err_bound(int m, int64_t d, double qnorm, double bnorm)
{
	double n = XJC_ADD((double)d, 8.0);
	double tiny = XJC_MUL(XJC_MUL(4.0, n), (double)FLT_MIN);
	double s;

	switch (m) {
	case XJ_METRIC_L2:
	case XJ_METRIC_SQEUCLIDEAN:
		s = XJC_ADD(qnorm, bnorm);
		return XJC_ADD(XJC_MUL(XJC_MUL(XJC_MUL(XJC_MUL(2.0, n), XJC_U32),
						s), s), tiny);
	case XJ_METRIC_IP:
		return XJC_ADD(XJC_MUL(XJC_MUL(XJC_MUL(XJC_MUL(2.0, n), XJC_U32),
						qnorm), bnorm), tiny);
	case XJ_METRIC_COSINE:
		return XJC_ADD(XJC_MUL(XJC_MUL(XJC_MUL(XJC_MUL(16.0, n), XJC_U32),
						qnorm), bnorm), tiny);
	}
	return INFINITY;
}

/*
 * metric_err_bound_prec(m, d, qnorm, bnorm, p), operation for operation
 * (the derivation is in metric.c), for a tile of float values (gunit 0).
 *
 * The 16-bit tile (gunit > 0; fp16 only, XJ_CUDA_TILE16, topk_pass.cu):
 * the GEMM writes h = fl16(fl(alpha' acc)) with alpha' = alpha 2^e (alpha
 * -2 or -1, e from xjc_tile16_exp so that |alpha' acc| <= 2^15 < 65504)
 * and the scan reads G = h gunit, gunit = 2^-e, an exact product. alpha'
 * acc is exact in float32 but below FLT_MIN, and any conversion to fp16
 * (to nearest or toward zero, subnormals kept or flushed) loses at most
 * 2^-10 |y| + 2^-14 of y = alpha' acc (10 stored bits; 2^-14 is fp16's
 * smallest normal). In units of the dot product (divided by |alpha| 2^e,
 * |alpha| >= 1) that is 2^-10 |acc| + 2^-14 gunit, with |acc| <= (1 +
 * acc) (Q + dq)(B + db): the accumulation factor acc becomes acc +
 * 2^-10 (1 + acc) and E_acc gains 2^-14 gunit. The rest of the bound
 * (fn2's addition, the metric's form) reads G as before.
 */
XJC_HD double xjc_err_bound_prec(int m, int64_t d, double qnorm,
				 double bnorm, int p, double gunit = 0.0)
{
	const double slack = 1.0 + 0x1p-20;
	double up, eta, n = (double)d, qn, bn, r, dq, db, bt, g, acc, dbl;
	double tiny = XJC_MUL(XJC_MUL(8.0, XJC_ADD(n, 8.0)), (double)FLT_MIN);
	double s;

	switch (p) {
	case XJ_PREC_TF32:
		up = 0x1p-10;
		eta = 0x1p-126;
		break;
	case XJ_PREC_BF16:
		up = 0x1p-8;
		eta = 0x1p-126;
		break;
	case XJ_PREC_FP16:
		up = 0x1p-11;
		eta = 0x1p-14;
		break;
	default:
		return xjc_err_bound(m, d, qnorm, bnorm);
	}
	if (XJC_MUL(XJC_MUL(12.0, n), XJC_U32) >= 1.0)
		return INFINITY;
	qn = XJC_MUL(qnorm, slack);
	bn = XJC_MUL(bnorm, slack);
	r = XJC_MUL(eta, XJC_SQRT(n));
	dq = XJC_ADD(XJC_MUL(up, qn), r);
	db = XJC_ADD(XJC_MUL(up, bn), r);
	bt = XJC_ADD(bn, db);
	acc = XJC_DIV(XJC_MUL(XJC_MUL(6.0, n), XJC_U32),
		      XJC_SUB(1.0, XJC_MUL(XJC_MUL(6.0, n), XJC_U32)));
	if (gunit > 0)
		acc = XJC_ADD(acc, XJC_MUL(0x1p-10, XJC_ADD(1.0, acc)));
	g = XJC_ADD(XJC_ADD(XJC_MUL(dq, bt), XJC_MUL(qn, db)),
		    XJC_MUL(XJC_MUL(acc, XJC_ADD(qn, dq)), bt));
	if (gunit > 0)
		g = XJC_ADD(g, XJC_MUL(0x1p-14, gunit));
	dbl = XJC_MUL(XJC_ADD(n, 8.0), 0x1p-50);
	switch (m) {
	case XJ_METRIC_L2:
	case XJ_METRIC_SQEUCLIDEAN:
		s = XJC_ADD(qn, bn);
		return XJC_ADD(XJC_ADD(XJC_MUL(XJC_MUL(2.0, 1.0 + XJC_U32), g),
				       XJC_MUL(XJC_MUL(XJC_ADD(2.0 * XJC_U32, dbl),
						       s), s)),
			       tiny);
	case XJ_METRIC_IP:
		return XJC_ADD(XJC_ADD(g, XJC_MUL(XJC_MUL(dbl, qn), bn)), tiny);
	case XJ_METRIC_COSINE:
		return XJC_ADD(XJC_ADD(XJC_ADD(g, 3.0 * XJC_U32), dbl), tiny);
	}
	return INFINITY;
}

/* metric_gate_approx(m, key) */
XJC_HD double xjc_gate_approx(int m, float key)
{
	double k = key;
	double r;

	if (key != key || key > FLT_MAX)
		return INFINITY;    /* no bound: keep everything */
	if (key < -FLT_MAX)
		return -INFINITY;   /* nothing can pass */
	switch (m) {
	case XJ_METRIC_L2:
		if (k < 0)
			return k;
		r = XJC_ADD(XJC_ADD(k, XJC_MUL(k, 0x1p-21)), 0x1p-148);
		return XJC_MUL(XJC_MUL(r, r), 1.0 + 0x1p-40);
	case XJ_METRIC_SQEUCLIDEAN:
		if (k < 0)
			return k;
		return XJC_ADD(XJC_ADD(k, XJC_MUL(k, 0x1p-20)), 0x1p-148);
	case XJ_METRIC_COSINE:
		return XJC_ADD(XJC_ADD(k, XJC_MUL(fabs(k), 0x1p-20)), 0x1p-40);
	case XJ_METRIC_IP:
		return XJC_ADD(XJC_ADD(k, XJC_MUL(fabs(k), 0x1p-20)), 0x1p-148);
	}
	return INFINITY;
}

/*
 * Scan threshold of a query (cpu_topk.c, row_threshold): keep a GEMM
 * value v (v = |b|^2 - 2 q.b for the l2 family, -q.b for ip, -qn.bn for
 * cosine) when v <= T, with
 *   T = up(gate - c + err),  c = |q|^2 (l2 family), 1 (cosine), 0 (ip)
 * and err the error bound of the GEMM's precision p for the largest base
 * norm bmax of the sub-tile. A gate of +inf (no list yet, no threshold)
 * keeps all, one of -inf (a threshold whose key is -inf) none. For
 * p = fp32 this is the CPU's threshold for the l2 family and ip; for
 * cosine it is the CPU's bound shifted by the 1 the CPU's GEMM adds (see
 * the top of this file).
 */
XJC_HD float xjc_scan_threshold(int m, int64_t d, double gate, double qq,
				float qnorm, float bmax, int p,
				double gunit = 0.0)
{
	if (xjc_is_inf(gate))
		return gate > 0 ? INFINITY : -INFINITY;
	switch (m) {
	case XJ_METRIC_L2:
	case XJ_METRIC_SQEUCLIDEAN:
		return XJC_F32_UP(XJC_ADD(XJC_SUB(gate, qq),
					  xjc_err_bound_prec(m, d, qnorm, bmax,
							     p, gunit)));
	case XJ_METRIC_COSINE:
		return XJC_F32_UP(XJC_ADD(XJC_SUB(gate, 1.0),
					  xjc_err_bound_prec(m, d, 1, 1, p,
							     gunit)));
	case XJ_METRIC_IP:
		return XJC_F32_UP(XJC_ADD(gate, xjc_err_bound_prec(m, d, qnorm,
								   bmax, p,
								   gunit)));
	}
	return INFINITY;
}

/*
 * The gate a query row may take once k base rows, none the row itself,
 * have GEMM values v <= t (v as the scan forms it: |b|^2 - 2 q.b for the
 * l2 family, -q.b for ip, -qn.bn for cosine; err the bound of the GEMM's
 * precision p for the largest base norm bmax of those rows). Each of the
 * k pairs has exact approx-space value <= S = t + c + err (c = |q|^2, 1
 * or 0, as in xjc_scan_threshold), so canonical key <= K = the key of
 * S rounded up: S is first raised by 2^-20 (|S| + err), which covers the
 * double roundings of S and the canonical sum's own error against the
 * exact value (at most d 2^-53 relative for the l2 family, and 2^-30 of
 * err for ip and cosine), then sqrt (l2, raised by 2^-40 for its
 * rounding) and float both round up. The k-th best key of the row is
 * <= K, so metric_gate_approx(K) is a valid gate: every pair that can
 * still enter the list has a key <= K and an approx-space value below
 * it. +inf (no gate) when the bound is infinite or t is not finite.
 */
XJC_HD double xjc_seed_gate(int m, int64_t d, float t, double qq, float qnorm,
			    float bmax, int p, double gunit = 0.0)
{
	double err, c, s;
	float key;

	if (!(t < FLT_MAX && t > -FLT_MAX))
		return INFINITY;
	switch (m) {
	case XJ_METRIC_L2:
	case XJ_METRIC_SQEUCLIDEAN:
		c = qq;
		err = xjc_err_bound_prec(m, d, qnorm, bmax, p, gunit);
		break;
	case XJ_METRIC_COSINE:
		c = 1.0;
		err = xjc_err_bound_prec(m, d, 1, 1, p, gunit);
		break;
	case XJ_METRIC_IP:
		c = 0.0;
		err = xjc_err_bound_prec(m, d, qnorm, bmax, p, gunit);
		break;
	default:
		return INFINITY;
	}
	if (xjc_is_inf(err))
		return INFINITY;
	s = XJC_ADD(XJC_ADD((double)t, c), err);
	s = XJC_ADD(s, XJC_MUL(0x1p-20, XJC_ADD(fabs(s), err)));
	if (xjc_is_inf(s))
		return INFINITY;
	if (m == XJ_METRIC_L2) {
		if (!(s >= 0))
			return INFINITY;
		key = XJC_F32_UP(XJC_SQRT(XJC_MUL(s, 1.0 + 0x1p-40)));
	} else {
		key = XJC_F32_UP(s);
	}
	return xjc_gate_approx(m, key);
}

/* ---- the total order ------------------------------------------------- */

/* (ka, ia) before (kb, ib): key, then index (topk_less without padding;
 * -0 and +0 are equal keys, as for the CPU's float comparison). */
XJC_HD int xjc_less(float ka, int64_t ia, float kb, int64_t ib)
{
	return ka < kb || (ka == kb && ia < ib);
}

/*
 * Radix-sortable image of a float key: unsigned comparison of the images
 * is float comparison of the keys (NaN excluded). Negative floats are
 * bit-inverted, others get the sign bit set; -0 is mapped as +0 first, so
 * that equal keys have equal images and ties fall to the index.
 */
XJC_HD uint32_t xjc_key_order(float key)
{
	uint32_t u;

	if (key == 0.0f)
		key = 0.0f;
	memcpy(&u, &key, sizeof(u));
	return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* The float whose image is u (the inverse of xjc_key_order on the
 * images of floats other than -0). */
XJC_HD float xjc_order_value(uint32_t u)
{
	uint32_t b = (u & 0x80000000u) ? (u & 0x7fffffffu) : ~u;
	float f;

	memcpy(&f, &b, sizeof(f));
	return f;
}

/*
 * Sort key of a candidate: (key image, column of the sub-tile) in one
 * unsigned integer of 32 + XJC_COL_BITS bits. Within a sub-tile the global
 * base index is first_row + column, so ascending sort keys are ascending
 * (key, index), the total order of topk.h. A valid candidate never has
 * the all-ones value, which marks empty slots.
 */
#define XJC_COL_BITS 13
#define XJC_COL_MASK ((1u << XJC_COL_BITS) - 1u)
#define XJC_SORTKEY_BITS (32 + XJC_COL_BITS)

XJC_HD uint64_t xjc_sortkey(float key, uint32_t col)
{
	return ((uint64_t)xjc_key_order(key) << XJC_COL_BITS) |
	       (col & XJC_COL_MASK);
}

XJC_HD uint32_t xjc_sortkey_col(uint64_t s)
{
	return (uint32_t)(s & XJC_COL_MASK);
}

#endif
