/*
 * prep.cuh: per-row preparation of a chunk on the device (norms, the
 * normalised copy for cosine, the largest norm and smallest squared norm
 * of each sub-tile) and plain fills.
 *
 * defines: prep_norms, prep_hat, prep_submax, prep_subfmin, prep_lowp,
 *          prep_fill_f32, prep_fill_f64, xjc_max_abs, xjc_fp16_fits,
 *          XJC_FP16_MAX, XJC_BAD_NONE
 *
 * Math, for a row x of dimension d (as cpu_rows.c, cpu_rows_prepare):
 *   n2    = sum_i (double)x_i^2 in index order     (canonical, double)
 *   fn2   = (float)n2                  (l2 family: |b|^2 for the scan)
 *   fnorm = (float)sqrt(n2)            (for the GEMM error bound)
 *   hat_i = (float)((double)x_i * (1 / sqrt(n2)))   (cosine)
 * with the rounding of each operation pinned (canonical.cuh), so every
 * value has the bits the CPU computes.
 *
 * Layout: x rows x d row-major float32; per-row outputs are arrays of
 * rows entries. Bytes: 4d read per row (norms; hat reads 4d and writes
 * 4d more); FLOPs: 2d double per row (norms), 1 double mul + 1 div and
 * sqrt per element (hat; the per-row inverse is recomputed rather than
 * stored, the cost is negligible next to the GEMM).
 *
 * 16-bit copies for the bf16/fp16 candidate GEMM (--precision): each
 * element rounded to nearest even (__float2bfloat16_rn, __float2half_rn),
 * 4 bytes read and 2 written per element. fp16 overflows above 65504;
 * xjc_fp16_fits tells the host whether a chunk may use it (metric.c).
 *
 * Bad rows (metric_check_rows: cosine rejects zero rows, every metric
 * rows whose squared norm exceeds 1e37) are not rejected here: the first
 * one is recorded as (global row << 1 | reason) by atomicMin in *bad,
 * reason 0 = zero row, 1 = too large, and the host reports it.
 */
#ifndef XJ_CUDA_PREP_CUH
#define XJ_CUDA_PREP_CUH

#include <cub/block/block_reduce.cuh>
#include <cuda/functional>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "canonical.cuh"
#include "check.cuh"

#define PREP_THREADS 256
#define XJC_NORM2_MAX 1e37           /* as metric_check_rows() */
#define XJC_BAD_NONE (~0ull)         /* *bad when no row is bad */
#define PREP_MAX_BLOCKS 65536        /* grid-stride kernels */
#define XJC_FP16_MAX 65504.0f        /* largest finite fp16 */

/* The largest |x_i| (+inf where one is NaN). */
static inline float xjc_max_abs(const float *x, int64_t n)
{
	float m = 0.0f;
	int nan = 0;

	for (int64_t i = 0; i < n; i++) {
		float a = fabsf(x[i]);

		m = a > m ? a : m;
		nan |= x[i] != x[i];
	}
	return nan ? INFINITY : m;
}

/* Every |x_i| <= 65504: the rows round to finite fp16 values. */
static inline int xjc_fp16_fits(const float *x, int64_t n)
{
	return xjc_max_abs(x, n) <= XJC_FP16_MAX;
}

/* One thread per row: the sum is one sequential chain per row. */
__global__ void __launch_bounds__(PREP_THREADS)
prep_norms_kernel(const float *x, int64_t rows, int64_t d, int m,
		  int64_t first_row, double *n2, float *fn2, float *fnorm,
		  unsigned long long *bad)
{
	int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	double s;
	int zero;

	if (r >= rows)
		return;
	s = xjc_norm2(x + r * d, d);
	n2[r] = s;
	if (fn2)
		fn2[r] = XJC_F32(s);
	if (fnorm)
		fnorm[r] = XJC_F32(XJC_SQRT(s));
	zero = m == XJ_METRIC_COSINE && s == 0.0;
	if (zero || !(s <= XJC_NORM2_MAX))
		atomicMin(bad, ((unsigned long long)(first_row + r) << 1) |
			       (zero ? 0ull : 1ull));
}

/* One thread per element, grid-stride: coalesced reads and writes. */
__global__ void __launch_bounds__(PREP_THREADS)
prep_hat_kernel(const float *x, const double *n2, int64_t rows, int64_t d,
		float *hat)
{
	int64_t n = rows * d;

	for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
	     e += (int64_t)gridDim.x * blockDim.x) {
		double inv = XJC_DIV(1.0, XJC_SQRT(n2[e / d]));

		hat[e] = XJC_F32(XJC_MUL((double)x[e], inv));
	}
}

/* One block per sub-tile of tile_rows rows: out[tile] = the largest (lo:
 * smallest) x of its rows; a NaN is passed over (fmaxf, fminf). */
template <bool lo>
__global__ void __launch_bounds__(PREP_THREADS)
prep_sub_kernel(const float *x, int64_t rows, int64_t tile_rows,
		float *out)
{
	using reduce = cub::BlockReduce<float, PREP_THREADS>;
	__shared__ typename reduce::TempStorage tmp;
	int64_t j0 = (int64_t)blockIdx.x * tile_rows;
	int64_t j1 = j0 + tile_rows < rows ? j0 + tile_rows : rows;
	float r = lo ? INFINITY : 0.0f;

	for (int64_t j = j0 + threadIdx.x; j < j1; j += PREP_THREADS)
		r = lo ? fminf(r, x[j]) : fmaxf(r, x[j]);
	if (lo)
		r = reduce(tmp).Reduce(r, ::cuda::minimum<float>{});
	else
		r = reduce(tmp).Reduce(r, ::cuda::maximum<float>{});
	if (threadIdx.x == 0)
		out[blockIdx.x] = r;
}

__device__ __forceinline__ void prep_round(float x, __nv_bfloat16 *out)
{
	*out = __float2bfloat16_rn(x);
}

__device__ __forceinline__ void prep_round(float x, __half *out)
{
	*out = __float2half_rn(x);
}

/* One thread per element, grid-stride. */
template <typename T>
__global__ void __launch_bounds__(PREP_THREADS)
prep_lowp_kernel(const float *x, int64_t n, T *out)
{
	for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
	     e += (int64_t)gridDim.x * blockDim.x)
		prep_round(x[e], out + e);
}

template <typename T>
__global__ void __launch_bounds__(PREP_THREADS)
prep_fill_kernel(T *p, int64_t n, T v)
{
	for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
	     e += (int64_t)gridDim.x * blockDim.x)
		p[e] = v;
}

static inline unsigned prep_blocks(int64_t n)
{
	int64_t b = (n + PREP_THREADS - 1) / PREP_THREADS;

	return (unsigned)(b < 1 ? 1 : b > PREP_MAX_BLOCKS ? PREP_MAX_BLOCKS : b);
}

/* ---- launchers ------------------------------------------------------- */

/* Norms of rows x (device); fn2 and fnorm may be NULL. */
static int prep_norms(const float *x, int64_t rows, int64_t d, xj_metric m,
		      int64_t first_row, double *n2, float *fn2, float *fnorm,
		      unsigned long long *bad, cudaStream_t s, xj_status *st)
{
	int64_t blocks = (rows + PREP_THREADS - 1) / PREP_THREADS;

	if (rows <= 0)
		return XJ_OK;
	if (blocks > INT32_MAX)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "prep_norms: %lld rows is too many for one grid",
			       (long long)rows);
	prep_norms_kernel<<<(unsigned)blocks, PREP_THREADS, 0, s>>>(
		x, rows, d, (int)m, first_row, n2, fn2, fnorm, bad);
	CUDA_LAUNCH_CHECK(st, prep_norms_kernel);
	return XJ_OK;
}

/* Normalised copy of rows x (cosine), from n2 of prep_norms. */
static int prep_hat(const float *x, const double *n2, int64_t rows,
		    int64_t d, float *hat, cudaStream_t s, xj_status *st)
{
	if (rows <= 0)
		return XJ_OK;
	prep_hat_kernel<<<prep_blocks(rows * d), PREP_THREADS, 0, s>>>(
		x, n2, rows, d, hat);
	CUDA_LAUNCH_CHECK(st, prep_hat_kernel);
	return XJ_OK;
}

/* out[t] = largest (lo: smallest) x of rows [t tile_rows, (t+1)
 * tile_rows). */
static int prep_sub(const float *x, int64_t rows, int64_t tile_rows,
		    bool lo, float *out, cudaStream_t s, xj_status *st)
{
	int64_t tiles = (rows + tile_rows - 1) / tile_rows;

	if (rows <= 0)
		return XJ_OK;
	if (tile_rows < 1 || tiles > INT32_MAX)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "prep_sub: %lld rows in tiles of %lld",
			       (long long)rows, (long long)tile_rows);
	if (lo)
		prep_sub_kernel<true><<<(unsigned)tiles, PREP_THREADS, 0, s>>>(
			x, rows, tile_rows, out);
	else
		prep_sub_kernel<false><<<(unsigned)tiles, PREP_THREADS, 0, s>>>(
			x, rows, tile_rows, out);
	CUDA_LAUNCH_CHECK(st, prep_sub_kernel);
	return XJ_OK;
}

/* submax[t] = largest fnorm of rows [t tile_rows, (t+1) tile_rows). */
static int prep_submax(const float *fnorm, int64_t rows, int64_t tile_rows,
		       float *submax, cudaStream_t s, xj_status *st)
{
	return prep_sub(fnorm, rows, tile_rows, false, submax, s, st);
}

/* subfmin[t] = smallest fn2 of rows [t tile_rows, (t+1) tile_rows)
 * (XJ_CUDA_FMIN, rowsel.cuh). */
static int prep_subfmin(const float *fn2, int64_t rows, int64_t tile_rows,
			float *subfmin, cudaStream_t s, xj_status *st)
{
	return prep_sub(fn2, rows, tile_rows, true, subfmin, s, st);
}

/* The n elements of x rounded to bf16 or fp16 (p) into out, 2 bytes
 * each (uint16_t storage: the GEMM reads them as CUDA_R_16BF/16F). */
static int prep_lowp(const float *x, int64_t n, xj_precision p,
		     uint16_t *out, cudaStream_t s, xj_status *st)
{
	if (n <= 0)
		return XJ_OK;
	switch (p) {
	case XJ_PREC_BF16:
		prep_lowp_kernel<__nv_bfloat16><<<prep_blocks(n), PREP_THREADS, 0,
						  s>>>(x, n, (__nv_bfloat16 *)out);
		CUDA_LAUNCH_CHECK(st, prep_lowp_kernel<__nv_bfloat16>);
		return XJ_OK;
	case XJ_PREC_FP16:
		prep_lowp_kernel<__half><<<prep_blocks(n), PREP_THREADS, 0, s>>>(
			x, n, (__half *)out);
		CUDA_LAUNCH_CHECK(st, prep_lowp_kernel<__half>);
		return XJ_OK;
	default:
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "prep_lowp: precision %d has no 16-bit copy",
			       (int)p);
	}
}

static int prep_fill_f32(float *p, int64_t n, float v, cudaStream_t s,
			 xj_status *st)
{
	if (n <= 0)
		return XJ_OK;
	prep_fill_kernel<float><<<prep_blocks(n), PREP_THREADS, 0, s>>>(p, n, v);
	CUDA_LAUNCH_CHECK(st, prep_fill_kernel<float>);
	return XJ_OK;
}

static int prep_fill_f64(double *p, int64_t n, double v, cudaStream_t s,
			 xj_status *st)
{
	if (n <= 0)
		return XJ_OK;
	prep_fill_kernel<double><<<prep_blocks(n), PREP_THREADS, 0, s>>>(p, n,
									   v);
	CUDA_LAUNCH_CHECK(st, prep_fill_kernel<double>);
	return XJ_OK;
}

#endif
