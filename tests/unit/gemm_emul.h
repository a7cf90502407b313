/*
 * gemm_emul.h: emulated roundings and float32 accumulations of a candidate
 * GEMM, and exact pair values, for the tests of the error bounds
 * (metric_err_bound_prec on GPUs: tests/gpu/test_cuda_precision.c;
 * metric_err_bound_rows on CPUs: tests/unit/test_cpu_gemm.c).
 *
 * defines: f2u, u2f, rmode, round_bits, round_fp16, round_out16, accmode,
 *          add_rz, double_rz, dot_acc, exact, exact_of, rows, rows_make,
 *          rows_free
 */
#ifndef XJ_TEST_GEMM_EMUL_H
#define XJ_TEST_GEMM_EMUL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/metric.h"

static inline uint32_t f2u(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof(u));
	return u;
}

static inline float u2f(uint32_t u)
{
	float x;

	memcpy(&x, &u, sizeof(x));
	return x;
}

/* Input roundings; a test may number its own modes from R_MODES on. */
enum { R_NEAREST_EVEN, R_ZERO, R_NEAREST_AWAY, R_MODES };
typedef int rmode;

/* x to `bits` stored mantissa bits in float's exponent range. */
static inline float round_bits(float x, int bits, rmode mode)
{
	int drop = 23 - bits;
	uint32_t u = f2u(x), mask = (1u << drop) - 1, half = 1u << (drop - 1);

	switch (mode) {
	case R_ZERO:
		break;
	case R_NEAREST_AWAY:
		u += half;
		break;
	default:        /* nearest even */
		u += half - 1 + ((u >> drop) & 1);
		break;
	}
	return u2f(u & ~mask);
}

/* fp16, round to nearest even, from its definition: 11 bits in the
 * normal range, steps of 2^-24 below 2^-14, infinity from 65520 up. */
static inline float round_fp16(float x)
{
	float a = fabsf(x), r;

	if (a < 0x1p-14f)
		r = rintf(a * 0x1p24f) * 0x1p-24f;
	else
		r = round_bits(a, 10, R_NEAREST_EVEN);
	if (r > 65504.0f)
		r = INFINITY;
	return copysignf(r, x);
}

/* The 16-bit tile's output (XJ_CUDA_TILE16): the GEMM's float y =
 * alpha 2^e acc to fp16 to nearest even, toward zero, or to nearest with
 * subnormals flushed (|y| <= 2^15 there). */
enum { O_NEAREST, O_ZERO, O_FLUSH, NOUT };

static inline float round_out16(float y, int mode)
{
	float a = fabsf(y), r;

	switch (mode) {
	case O_ZERO:
		r = a < 0x1p-14f ? truncf(a * 0x1p24f) * 0x1p-24f :
				   round_bits(a, 10, R_ZERO);
		return copysignf(r, y);
	case O_FLUSH:
		r = round_fp16(y);
		return fabsf(r) < 0x1p-14f ? copysignf(0.0f, y) : r;
	default:
		return round_fp16(y);
	}
}

/* in order to nearest, in order toward zero, blocks of 16 truncated */
typedef enum { ACC_NEAREST, ACC_ZERO, ACC_BLOCKS, NACC } accmode;

/* a + b rounded toward zero, exactly: the float sum and its error
 * (TwoSum, exact in round to nearest), then one step toward zero when
 * the sum overshot. */
static inline float add_rz(float a, float b)
{
	float s = a + b, bb = s - a;
	float err = (a - (s - bb)) + (b - bb);

	if (err != 0 && (err < 0) != (s < 0))
		return nextafterf(s, 0.0f);
	return s;
}

/* v (double) rounded toward zero to float. */
static inline float double_rz(double v)
{
	float f = (float)v;

	if (fabs((double)f) > fabs(v))
		f = nextafterf(f, 0.0f);
	return f;
}

/* Dot product of rows whose products are exact in float (rounded
 * inputs), accumulated as m says. */
static inline float dot_acc(const float *q, const float *b, int64_t d,
			    accmode m)
{
	float s = 0.0f;

	for (int64_t i = 0; i < d; i++) {
		float p = q[i] * b[i];   /* exact for these inputs */

		if (m == ACC_NEAREST) {
			s = s + p;
		} else if (m == ACC_ZERO) {
			s = add_rz(s, p);
		} else {
			double blk = 0.0;
			int64_t e = i + 16 < d ? i + 16 : d;

			for (; i < e; i++)
				blk += (double)q[i] * (double)b[i];
			i--;
			s = double_rz((double)s + blk);
		}
	}
	return s;
}

/* Exact approx-space values of a pair, in long double (each product of
 * floats is exact in double; the sums lose about d 2^-64). */
typedef struct exact {
	long double sq, dot, cosd;    /* |q - b|^2, q.b, 1 - cos */
} exact;

static inline exact exact_of(const float *q, const float *b, int64_t d,
			     double qq, double bb)
{
	long double sq = 0, dot = 0;
	exact e;

	for (int64_t i = 0; i < d; i++) {
		long double t = (long double)q[i] - (long double)b[i];

		sq += t * t;
		dot += (long double)q[i] * (long double)b[i];
	}
	e.sq = sq;
	e.dot = dot;
	e.cosd = 1.0L - dot / sqrtl((long double)qq * (long double)bb);
	return e;
}

/* ---- rows and what the backends derive from them ---- */

typedef struct rows {
	int64_t n, d;
	float *x;        /* the rows (rows_free frees them) */
	double *n2;      /* canonical squared norms */
	float *fnorm;    /* float norms, as prep_norms */
	float *fn2;      /* float squared norms, as prep_norms */
	float *hat;      /* normalised as prep_hat */
} rows;

/* Rows over x, which r then owns. */
static inline int rows_make(rows *r, float *x, int64_t n, int64_t d)
{
	memset(r, 0, sizeof(*r));
	r->n = n;
	r->d = d;
	r->x = x;
	r->n2 = malloc(sizeof(double) * (size_t)(n + 1));
	r->fnorm = malloc(sizeof(float) * (size_t)(n + 1));
	r->fn2 = malloc(sizeof(float) * (size_t)(n + 1));
	r->hat = malloc(sizeof(float) * (size_t)(n * d + 1));
	if (!x || !r->n2 || !r->fnorm || !r->fn2 || !r->hat)
		return -1;
	for (int64_t i = 0; i < n; i++) {
		double s = metric_norm2(x + i * d, d);
		double inv = 1.0 / sqrt(s);

		r->n2[i] = s;
		r->fnorm[i] = (float)sqrt(s);
		r->fn2[i] = (float)s;
		for (int64_t e = 0; e < d; e++)
			r->hat[i * d + e] = (float)((double)x[i * d + e] * inv);
	}
	return 0;
}

static inline void rows_free(rows *r)
{
	free(r->x);
	free(r->n2);
	free(r->fnorm);
	free(r->fn2);
	free(r->hat);
}

#endif
