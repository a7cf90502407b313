/*
 * metric_dgemm.h: the double GEMM's error bounds and the decision they
 * make, one source for the CPU (C) and the CUDA backend (host and device).
 *
 * defines: METRIC_U53, METRIC_SLACK, metric_dot_err, metric_sqdist_err,
 *          metric_sum_key, metric_dgemm_decide, metric_sum_err,
 *          metric_sum_decide
 *
 * Exact values from a double GEMM (the matrix). A GEMM in double on the
 * float32 rows, summing in any order with or without FMA, gives each
 * pair's dot product p; the canonical accumulator (sum of squares for
 * l2/sqeuclidean, dot product for ip/cosine) lies within the bound below
 * of the value derived from p. The key is a monotone function of the
 * accumulator (metric_sum_key: a rounding, sqrt, negation, 1 - x / const),
 * so when both ends of the interval give the same key bits, that is the
 * canonical key; otherwise the pair is computed canonically. The bounds
 * include the rounding of the interval's ends (x -+ err computed in
 * double stays outside the exact interval). Derivation: docs/design.md,
 * "Exact matrix values from a double GEMM". Valid for d < 2^31.
 *
 * metric_dot_err: |p - canonical dot| for rows with canonical squared
 *   norms qq and bb, plus the rounding of p -+ err.
 * metric_sqdist_err: |s - canonical sum of squares| for
 *   s = (qq + bb) - 2 p, computed so in double.
 *
 * Exact keys from a sum in another order (the GPU's rescoring). The
 * canonical accumulator is a sum of d terms in index order: squared
 * differences (l2 family) or products. The same terms summed in any
 * other order or tree (one warp's lanes, then a butterfly) give s with
 * |s - canonical| <= metric_sum_err(d, a), a being a sum of the terms'
 * absolute values in any order (s itself for the l2 family, whose terms
 * are >= 0); metric_sum_decide then decides the key as above.
 * Derivation: docs/design.md, "Exact keys from a sum in another order".
 *
 * Why one header for both: the CPU's and the GPU's matrices must decide
 * the same pairs from the same GEMM value, so the bound is written once.
 * Each operation is a correctly rounded double operation in a fixed
 * order: on the host the plain operators (every file is compiled with
 * -ffp-contract=off, so nothing is fused into an FMA), on the device the
 * _rn intrinsics, which the compiler never fuses or reorders whatever
 * -fmad says. The same inputs then give the same bits on both.
 */
#ifndef XJ_METRIC_DGEMM_H
#define XJ_METRIC_DGEMM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "../config/job.h"
#ifdef __cplusplus
}
#endif

#if defined(__CUDACC__)
#define METRIC_HD static __host__ __device__ __forceinline__
#elif defined(__GNUC__)
/* inlined into cpu_matrix.c's loop with a constant metric, so that the
 * loop has no branch and vectorises */
#define METRIC_HD static inline __attribute__((always_inline))
#else
#define METRIC_HD static inline
#endif

#ifdef __CUDA_ARCH__
#define METRIC_ADD(a, b) __dadd_rn((a), (b))
#define METRIC_SUB(a, b) __dsub_rn((a), (b))
#define METRIC_MUL(a, b) __dmul_rn((a), (b))
#define METRIC_DIV(a, b) __ddiv_rn((a), (b))
#define METRIC_SQRT(a) __dsqrt_rn(a)
#define METRIC_F32(a) __double2float_rn(a)
#else
#define METRIC_ADD(a, b) ((a) + (b))
#define METRIC_SUB(a, b) ((a) - (b))
#define METRIC_MUL(a, b) ((a) * (b))
#define METRIC_DIV(a, b) ((a) / (b))
#define METRIC_SQRT(a) sqrt(a)
#define METRIC_F32(a) ((float)(a))
#endif

#define METRIC_U53 0x1p-53
#define METRIC_SLACK (1.0 + 0x1p-18)

/* 2 d u sqrt(qq) sqrt(bb) (1 + 2^-18) + 2^-50 |p| */
METRIC_HD double metric_dot_err(int64_t d, double p, double qq, double bb)
{
	double e = METRIC_MUL(METRIC_MUL(2.0, (double)d), METRIC_U53);

	e = METRIC_MUL(METRIC_MUL(e, METRIC_SQRT(qq)), METRIC_SQRT(bb));
	return METRIC_ADD(METRIC_MUL(e, METRIC_SLACK),
			  METRIC_MUL(0x1p-50, fabs(p)));
}

/* (E_g + (d + 3) u (|s| + E_g)) (1 + 2^-18) + 2^-50 |s|, with
 * E_g = (2d + 4) u (qq + bb) */
METRIC_HD double metric_sqdist_err(int64_t d, double s, double qq,
				   double bb)
{
	double ea = METRIC_MUL(METRIC_MUL(METRIC_ADD(METRIC_MUL(2.0, (double)d),
						     4.0), METRIC_U53),
			       METRIC_ADD(qq, bb));
	double g = METRIC_MUL(METRIC_ADD((double)d, 3.0), METRIC_U53);

	return METRIC_ADD(METRIC_MUL(METRIC_ADD(ea,
					METRIC_MUL(g, METRIC_ADD(fabs(s), ea))),
				     METRIC_SLACK),
			  METRIC_MUL(0x1p-50, fabs(s)));
}

/* Key from an accumulated sum s (squared distance for the l2 family, dot
 * product otherwise), with the final operations of metric_key(). */
METRIC_HD float metric_sum_key(xj_metric m, double s, double qq, double bb)
{
	switch (m) {
	case XJ_METRIC_SQEUCLIDEAN:
		return METRIC_F32(s);
	case XJ_METRIC_L2:
		return METRIC_F32(METRIC_SQRT(s));
	case XJ_METRIC_IP:
		return -METRIC_F32(s);
	case XJ_METRIC_COSINE:
		return METRIC_F32(METRIC_SUB(1.0, METRIC_DIV(s,
				  METRIC_SQRT(METRIC_MUL(qq, bb)))));
	}
	return NAN;
}

METRIC_HD uint32_t metric_f32_bits(float f)
{
#ifdef __CUDA_ARCH__
	return __float_as_uint(f);
#else
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
#endif
}

/*
 * One pair from its GEMM dot product p (query and base rows of dimension
 * d, canonical squared norms qq and bb): returns 0 and sets *value to the
 * canonical output value (metric_key_to_value of the canonical key) when
 * the bound decides it, 1 when it does not (*value is then the low end's,
 * to be replaced). The keys of the interval's ends are compared bit for
 * bit (-0 is not +0). An end below 0 under l2 gives NaN, which decides
 * nothing, as it should: the interval then holds 0.
 */
METRIC_HD int metric_dgemm_decide(xj_metric m, int64_t d, double p,
				  double qq, double bb, float *value)
{
	int sq = m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN;
	double x, e, lo, hi;
	float klo, khi;

	if (sq) {
		x = METRIC_SUB(METRIC_ADD(qq, bb), METRIC_MUL(2.0, p));
		e = metric_sqdist_err(d, x, qq, bb);
	} else {
		x = p;
		e = metric_dot_err(d, x, qq, bb);
	}
	lo = METRIC_SUB(x, e);
	hi = METRIC_ADD(x, e);
	klo = metric_sum_key(m, lo, qq, bb);
	khi = metric_sum_key(m, hi, qq, bb);
	*value = m == XJ_METRIC_IP ? -klo : klo;
	return metric_f32_bits(klo) != metric_f32_bits(khi);
}

/*
 * |s - s_c| for two sums s and s_c (the canonical one) of the same d
 * double terms in different orders, plus the rounding of s -+ err:
 * (2d + 2) u a (1 + 2^-18), where a >= 0 is a sum of the terms'
 * absolute values in any order.
 */
METRIC_HD double metric_sum_err(int64_t d, double a)
{
	double e = METRIC_MUL(METRIC_ADD(METRIC_MUL(2.0, (double)d), 2.0),
			      METRIC_U53);

	return METRIC_MUL(METRIC_MUL(e, fabs(a)), METRIC_SLACK);
}

/*
 * A pair's canonical key from s, the sum of its canonical terms in
 * another order (squared differences for the l2 family, each computed
 * as metric_key() does; products (double)q_i * (double)b_i, exact, with
 * or without FMA, otherwise), and a, a sum of their absolute values (a =
 * s for the l2 family). Returns 0 and sets *key when the interval's ends
 * give the same key bits, 1 when they do not (*key is then the low
 * end's, to be replaced by the canonical sum's).
 */
METRIC_HD int metric_sum_decide(xj_metric m, int64_t d, double s, double a,
				double qq, double bb, float *key)
{
	double e = metric_sum_err(d, a);
	float klo = metric_sum_key(m, METRIC_SUB(s, e), qq, bb);
	float khi = metric_sum_key(m, METRIC_ADD(s, e), qq, bb);

	*key = klo;
	return metric_f32_bits(klo) != metric_f32_bits(khi);
}

#endif
