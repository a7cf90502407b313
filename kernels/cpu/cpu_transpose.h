/*
 * cpu_transpose.h: a float matrix transposed on the host, 16 x 16 tiles in
 * registers. The self-join's column tiles (kernels/cpu/cpu_topk_sym.c) and
 * the transposed blocks of a set's matrix with itself
 * (app/driver/driver_matrix.c) go through it.
 *
 * defines: cpu_transpose
 */
#ifndef XJ_CPU_TRANSPOSE_H
#define XJ_CPU_TRANSPOSE_H

#include <stdint.h>

/* t (nb x na) = the transpose of g (na x nb), plus col[r] on g's row r
 * when col is given (one float addition, as sgemm's beta = 1 does). The
 * same bits as the element-by-element definition, at any shape. */
void cpu_transpose(const float *g, int64_t na, int64_t nb, const float *col,
		   float *t);

#endif
