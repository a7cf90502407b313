/*
 * matrix.cuh: canonical values of every (query, base) pair of a block.
 *
 * defines: matrix_tile
 *
 * Math: out[i][j] = metric_key_to_value(metric_key(q_i, b_j)), each pair
 * accumulated over the dimension in index order 0..d-1 in double with
 * pinned rounding (canonical.cuh), so the bits equal the CPU's.
 *
 * Layout: q (nq x d), b (nb x d) row-major float32 as read; out nq x nb
 * row-major with leading dimension ldo. A block of 32 x 8 threads owns
 * 32 query rows x 32 base rows; it walks the dimension in slabs of 32,
 * staging both row slabs in shared memory (rows padded to 33 floats so
 * that the 32 threads of a warp, one per base row, read 32 different
 * banks; the query element is the same for the warp, a broadcast). Each
 * thread keeps MAT_RPT = 4 independent chains (query rows ty, ty + 8,
 * ...) for one base row: one thread per pair, the sum never split.
 * Bytes: each input element is read once per 32 partner rows (block
 * reuse); 4 bytes written per pair. FLOPs: 3d double per pair (l2
 * family), 2d (ip, cosine); double throughput bounds the kernel.
 */
#ifndef XJ_CUDA_MATRIX_CUH
#define XJ_CUDA_MATRIX_CUH

#include "canonical.cuh"
#include "check.cuh"

#define MAT_ROWS 32     /* query rows and base rows per block */
#define MAT_SLAB 32     /* dimension elements per shared-memory stage */
#define MAT_TY 8        /* threads in y; each owns MAT_ROWS / MAT_TY rows */
#define MAT_RPT (MAT_ROWS / MAT_TY)

__global__ void __launch_bounds__(MAT_ROWS * MAT_TY)
matrix_kernel(int m, int64_t d, const float *q, int nq, const double *qq,
	      const float *b, int nb, const double *bb, float *out,
	      int64_t ldo)
{
	__shared__ float sq[MAT_ROWS][MAT_SLAB + 1];
	__shared__ float sb[MAT_ROWS][MAT_SLAB + 1];
	int tx = threadIdx.x, ty = threadIdx.y;
	int i0 = blockIdx.y * MAT_ROWS, j0 = blockIdx.x * MAT_ROWS;
	int sq_metric = xjc_is_sq(m);
	double acc[MAT_RPT];

#pragma unroll
	for (int a = 0; a < MAT_RPT; a++)
		acc[a] = 0.0;
	for (int64_t e0 = 0; e0 < d; e0 += MAT_SLAB) {
		int ne = d - e0 < MAT_SLAB ? (int)(d - e0) : MAT_SLAB;

		/* zero fill is never summed: the loop below stops at ne */
		for (int rr = ty; rr < MAT_ROWS; rr += MAT_TY) {
			int64_t e = e0 + tx;

			sq[rr][tx] = i0 + rr < nq && tx < ne ?
				     q[(int64_t)(i0 + rr) * d + e] : 0.0f;
			sb[rr][tx] = j0 + rr < nb && tx < ne ?
				     b[(int64_t)(j0 + rr) * d + e] : 0.0f;
		}
		__syncthreads();
		for (int e = 0; e < ne; e++) {
			double bv = sb[tx][e];

#pragma unroll
			for (int a = 0; a < MAT_RPT; a++)
				acc[a] = xjc_step(sq_metric, acc[a],
						  (double)sq[ty + a * MAT_TY][e],
						  bv);
		}
		__syncthreads();
	}
#pragma unroll
	for (int a = 0; a < MAT_RPT; a++) {
		int i = i0 + ty + a * MAT_TY, j = j0 + tx;
		float key;

		if (i >= nq || j >= nb)
			continue;
		key = xjc_key_of_sum(m, acc[a], qq[i], bb[j]);
		out[(int64_t)i * ldo + j] = m == XJ_METRIC_IP ? -key : key;
	}
}

/* Canonical values of q (nq rows) x b (nb rows) into out (device, leading
 * dimension ldo >= nb); qq, bb: canonical squared norms (cosine). */
static int matrix_tile(xj_metric m, int64_t d, const float *q, int nq,
		       const double *qq, const float *b, int nb,
		       const double *bb, float *out, int64_t ldo,
		       cudaStream_t s, xj_status *st)
{
	dim3 block(MAT_ROWS, MAT_TY);
	dim3 grid((unsigned)((nb + MAT_ROWS - 1) / MAT_ROWS),
		  (unsigned)((nq + MAT_ROWS - 1) / MAT_ROWS));

	if (nq <= 0 || nb <= 0)
		return XJ_OK;
	if (ldo < nb || grid.y > 65535)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "matrix_tile: %d x %d block, leading dimension %lld",
			       nq, nb, (long long)ldo);
	matrix_kernel<<<grid, block, 0, s>>>((int)m, d, q, nq, qq, b, nb, bb,
					     out, ldo);
	CUDA_LAUNCH_CHECK(st, matrix_kernel);
	return XJ_OK;
}

#endif
