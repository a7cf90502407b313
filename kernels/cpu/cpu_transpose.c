/*
 * cpu_transpose.c: see cpu_transpose.h.
 */
#include "cpu_transpose.h"

#include <string.h>

#include "cpu_backend_int.h"     /* XJ_CLONES */

/*
 * A 16 x 16 float transpose in registers: four stages, each pairing rows
 * i and i + b (b = 8, 4, 2, 1) and exchanging their b-element blocks, the
 * recursive block transpose ([[A, B], [C, D]] -> [[A, C], [B, D]], then
 * each block). One two-source shuffle per row and stage (vpermt2ps with
 * AVX-512). LO(b)/HI(b): of each 2b-element group, the first (second) b
 * elements of row i, then those of row i + b.
 */
typedef float vf16 __attribute__((vector_size(64)));
typedef int vi16 __attribute__((vector_size(64)));

#define TK(b, k, h) ((k) % (2 * (b)) < (b) ?				\
	(k) / (2 * (b)) * 2 * (b) + (h) * (b) + (k) % (2 * (b)) :	\
	16 + (k) / (2 * (b)) * 2 * (b) + (h) * (b) + (k) % (2 * (b)) - (b))
#define TV(b, h) { TK(b, 0, h), TK(b, 1, h), TK(b, 2, h), TK(b, 3, h),	\
	TK(b, 4, h), TK(b, 5, h), TK(b, 6, h), TK(b, 7, h), TK(b, 8, h),	\
	TK(b, 9, h), TK(b, 10, h), TK(b, 11, h), TK(b, 12, h),		\
	TK(b, 13, h), TK(b, 14, h), TK(b, 15, h) }

static const vi16 tr_lo[4] = { TV(8, 0), TV(4, 0), TV(2, 0), TV(1, 0) };
static const vi16 tr_hi[4] = { TV(8, 1), TV(4, 1), TV(2, 1), TV(1, 1) };

/* gt[j * ldt + r] = g[r * ldg + j] (+ col[r] when col is given: the one
 * float addition sgemm's beta = 1 does), r, j < 16. */
XJ_CLONES
static void transpose16(const float *g, int64_t ldg, const float *col,
			float *gt, int64_t ldt)
{
	vf16 r[16];

	/* unrolled whole, r stays in registers and the (i & b) tests fold */
#pragma GCC unroll 16
	for (int i = 0; i < 16; i++)
		memcpy(&r[i], g + i * ldg, sizeof(vf16));
#pragma GCC unroll 4
	for (int s = 0; s < 4; s++)
#pragma GCC unroll 16
		for (int i = 0; i < 16; i++) {
			int b = 8 >> s;
			vf16 a, c;

			if (i & b)
				continue;
			a = r[i];
			c = r[i + b];
			r[i] = __builtin_shuffle(a, c, tr_lo[s]);
			r[i + b] = __builtin_shuffle(a, c, tr_hi[s]);
		}
	if (col) {
		vf16 cv;

		memcpy(&cv, col, sizeof(cv));
#pragma GCC unroll 16
		for (int j = 0; j < 16; j++)
			r[j] += cv;
	}
#pragma GCC unroll 16
	for (int j = 0; j < 16; j++)
		memcpy(gt + j * ldt, &r[j], sizeof(vf16));
}

/*
 * 16 x 16 tiles in registers, the edges element by element: a 16-row
 * strip of g is read once and each tile's 16 output rows are whole 64-byte
 * lines. (A plain column walk touches a new cache line per element and
 * cost as much as the GEMM it saves in a self-join; 16 x 16 tiles of
 * scalar copies still cost 9% of a self-join, and 14% of the samples of
 * a set's matrix with itself in 32 x 32 tiles: docs/performance.md.)
 */
void cpu_transpose(const float *g, int64_t na, int64_t nb, const float *col,
		   float *gt)
{
	int64_t na16 = na / 16 * 16, nb16 = nb / 16 * 16;

	for (int64_t r0 = 0; r0 < na16; r0 += 16)
		for (int64_t j0 = 0; j0 < nb16; j0 += 16)
			transpose16(g + r0 * nb + j0, nb, col ? col + r0 : NULL,
				    gt + j0 * na + r0, na);
	for (int64_t r = 0; r < na; r++)
		for (int64_t j = r < na16 ? nb16 : 0; j < nb; j++)
			gt[j * na + r] = col ? g[r * nb + j] + col[r] :
					       g[r * nb + j];
}
