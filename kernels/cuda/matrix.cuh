/*
 * matrix.cuh: the values of every (query, base) pair of a tile: proposed
 * by a double GEMM and verified, or computed canonically.
 *
 * defines: matrix_widen, matrix_verify_tile, matrix_tile
 *
 * Math: out[i][j] = metric_key_to_value(metric_key(q_i, b_j)), bit for bit
 * the CPU's. Two ways to it, as on the CPU (kernels/cpu/cpu_matrix.c):
 *
 *   verified   the rows widened to double (matrix_widen, exact), one
 *              cublasDgemm gives every pair's dot product p, and
 *              verify_kernel applies metric_dgemm_decide (metric_dgemm.h,
 *              the same function the CPU calls): where the bound's
 *              interval gives one key, that key is the canonical one.
 *              Each 32 x 32 square of the tile notes how many of its
 *              pairs it left undecided; matrix_kernel then computes the
 *              squares that have any, whole, canonically (their decided
 *              pairs get the same bits again), and returns at once in the
 *              others. 2d FLOPs a pair on the tensor cores' FP64, a few
 *              to verify, 8 bytes read and 4 written a pair.
 *   canonical  matrix_kernel on every square: each pair accumulated over
 *              the dimension in index order 0..d-1 in double with pinned
 *              rounding (canonical.cuh), 3d double FLOPs a pair (l2
 *              family), 2d (ip, cosine), at the FP64 units' rate.
 *
 * matrix_kernel's layout: q (nq x d), b (nb x d) row-major float32 as
 * read; out nq x nb row-major with leading dimension ldo. A block of
 * 32 x 8 threads owns 32 query rows x 32 base rows; it walks the
 * dimension in slabs of 32, staging both row slabs in shared memory (rows
 * padded to 33 floats so that the 32 threads of a warp, one per base row,
 * read 32 different banks; the query element is the same for the warp, a
 * broadcast). Each thread keeps MAT_RPT = 4 independent chains (query rows
 * ty, ty + 8, ...) for one base row: one thread per pair, the sum never
 * split. Each input element is read once per 32 partner rows. verify_kernel
 * has the same grid and thread layout, so square (bx, by) of the one is
 * block (bx, by) of the other.
 */
#ifndef XJ_CUDA_MATRIX_CUH
#define XJ_CUDA_MATRIX_CUH

#include "canonical.cuh"
#include "check.cuh"

#define MAT_ROWS 32     /* query rows and base rows per block */
#define MAT_SLAB 32     /* dimension elements per shared-memory stage */
#define MAT_TY 8        /* threads in y; each owns MAT_ROWS / MAT_TY rows */
#define MAT_RPT (MAT_ROWS / MAT_TY)

/* Canonical values of the squares of the tile; with flags, only of the
 * squares whose flag is not 0 (the others return at once, the whole
 * block, so no barrier waits on them), adding their pairs to *done. */
__global__ void __launch_bounds__(MAT_ROWS * MAT_TY)
matrix_kernel(int m, int64_t d, const float *q, int nq, const double *qq,
	      const float *b, int nb, const double *bb, float *out,
	      int64_t ldo, const int *flags, unsigned long long *done)
{
	__shared__ float sq[MAT_ROWS][MAT_SLAB + 1];
	__shared__ float sb[MAT_ROWS][MAT_SLAB + 1];
	int tx = threadIdx.x, ty = threadIdx.y;
	int i0 = blockIdx.y * MAT_ROWS, j0 = blockIdx.x * MAT_ROWS;
	int sq_metric = xjc_is_sq(m);
	double acc[MAT_RPT];

	if (flags && !flags[blockIdx.y * gridDim.x + blockIdx.x])
		return;
	if (done && tx == 0 && ty == 0)
		atomicAdd(done, (unsigned long long)min(MAT_ROWS, nq - i0) *
				(unsigned long long)min(MAT_ROWS, nb - j0));

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

/* x (n floats) widened to double into y: exact, the GEMM's input. */
__global__ void matrix_widen_kernel(const float *x, int64_t n, double *y)
{
	for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
	     e += (int64_t)gridDim.x * blockDim.x)
		y[e] = (double)x[e];
}

static int matrix_widen(const float *x, int64_t n, double *y,
			cudaStream_t s, xj_status *st)
{
	int64_t blocks = (n + 255) / 256;

	if (n <= 0)
		return XJ_OK;
	/* a grid-stride loop past 65535 blocks of 256 */
	matrix_widen_kernel<<<(unsigned)(blocks < 65535 ? blocks : 65535), 256,
			      0, s>>>(x, n, y);
	CUDA_LAUNCH_CHECK(st, matrix_widen_kernel);
	return XJ_OK;
}

/*
 * The decision of every pair of the tile from its dot product p (row i at
 * p + i * ldp): out gets the value wherever the bound decides it, and
 * flags[square] how many pairs of the square it did not decide (their out
 * is to be replaced by matrix_kernel).
 */
__global__ void __launch_bounds__(MAT_ROWS * MAT_TY)
verify_kernel(int m, int64_t d, const double *p, int64_t ldp, int nq,
	      const double *qq, int nb, const double *bb, float *out,
	      int64_t ldo, int *flags)
{
	__shared__ int undecided;
	int tx = threadIdx.x, ty = threadIdx.y;
	int i0 = blockIdx.y * MAT_ROWS, j0 = blockIdx.x * MAT_ROWS;
	int j = j0 + tx, n = 0;

	if (tx == 0 && ty == 0)
		undecided = 0;
	__syncthreads();
#pragma unroll
	for (int a = 0; a < MAT_RPT; a++) {
		int i = i0 + ty + a * MAT_TY;
		float v;

		if (i >= nq || j >= nb)
			continue;
		n += metric_dgemm_decide((xj_metric)m, d, p[(int64_t)i * ldp + j],
					 qq[i], bb[j], &v);
		out[(int64_t)i * ldo + j] = v;
	}
	if (n)
		atomicAdd(&undecided, n);
	__syncthreads();
	if (tx == 0 && ty == 0)
		flags[blockIdx.y * gridDim.x + blockIdx.x] = undecided;
}

static int matrix_grid(int nq, int nb, int64_t ldo, dim3 *grid,
		       xj_status *st)
{
	*grid = dim3((unsigned)((nb + MAT_ROWS - 1) / MAT_ROWS),
		     (unsigned)((nq + MAT_ROWS - 1) / MAT_ROWS));
	if (ldo < nb || grid->y > 65535)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "matrix tile: %d x %d block, leading dimension %lld",
			       nq, nb, (long long)ldo);
	return XJ_OK;
}

/* Verified values of the tile from p (device, nq x nb doubles at leading
 * dimension ldp), the undecided count of each 32 x 32 square into flags
 * (one int a square, row-major over the squares). */
static int matrix_verify_tile(xj_metric m, int64_t d, const double *p,
			      int64_t ldp, int nq, const double *qq, int nb,
			      const double *bb, float *out, int64_t ldo,
			      int *flags, cudaStream_t s, xj_status *st)
{
	dim3 block(MAT_ROWS, MAT_TY), grid;

	if (nq <= 0 || nb <= 0)
		return XJ_OK;
	if (matrix_grid(nq, nb, ldo, &grid, st))
		return st->code;
	verify_kernel<<<grid, block, 0, s>>>((int)m, d, p, ldp, nq, qq, nb, bb,
					     out, ldo, flags);
	CUDA_LAUNCH_CHECK(st, verify_kernel);
	return XJ_OK;
}

/* Canonical values of q (nq rows) x b (nb rows) into out (device, leading
 * dimension ldo >= nb); qq, bb: canonical squared norms (cosine). With
 * flags (matrix_verify_tile's), only the squares it left undecided, their
 * pairs counted into *done. */
static int matrix_tile(xj_metric m, int64_t d, const float *q, int nq,
		       const double *qq, const float *b, int nb,
		       const double *bb, float *out, int64_t ldo,
		       const int *flags, unsigned long long *done,
		       cudaStream_t s, xj_status *st)
{
	dim3 block(MAT_ROWS, MAT_TY), grid;

	if (nq <= 0 || nb <= 0)
		return XJ_OK;
	if (matrix_grid(nq, nb, ldo, &grid, st))
		return st->code;
	matrix_kernel<<<grid, block, 0, s>>>((int)m, d, q, nq, qq, b, nb, bb,
					     out, ldo, flags, done);
	CUDA_LAUNCH_CHECK(st, matrix_kernel);
	return XJ_OK;
}

#endif
