/*
 * cpu_gemm.h: the CPU backend's candidate GEMM through oneDNN's matmul,
 * in float32, bf16 or int8 (--precision), and the rounded rows it reads.
 *
 * defines: cpu_gemm, cpu_gemm_rows, cpu_gemm_caps, cpu_gemm_caps_get,
 *          cpu_gemm_resolve, cpu_gemm_create, cpu_gemm_free,
 *          cpu_gemm_tile, cpu_gemm_tile_sums, cpu_gemm_scale,
 *          cpu_gemm_alpha, cpu_gemm_rows_reserve, cpu_gemm_rows_free,
 *          cpu_gemm_pack, cpu_gemm_round_bf16, cpu_gemm_impl,
 *          CPU_GEMM_INT8_MAX_D
 *
 * The tile it computes is what cpu_topk.c's sgemm computes,
 *   G[r][j] = crow[j] + alpha * r(a_r) . r(b_j)      (crow NULL: 0)
 * with r() the rounding of the precision: none (fp32), round to nearest
 * even bf16 with values below 2^-126 flushed to zero (bf16), or per-row
 * symmetric int8, r(x_i) = s * round(x_i / s), s = max|x_i| / 127, with
 * exact int32 dot products (int8). cpu_gemm_pack() rounds the rows once
 * per chunk and records, per row, an upper bound of |r(x) - x|
 * (Euclidean, computed in double from the rounded row), the input error
 * of the bound metric_err_bound_rows() (metric.h, derivation in
 * metric.c), and x.(x - r(x)), which l2's folded bound moves into the
 * row's constants (metric_err_bound_folded). The GEMM only proposes candidates; whatever it rounds, the
 * canonical rescoring gives every reported value.
 *
 * Usage (one object per backend, one slot per OpenMP thread):
 *   cpu_gemm_resolve(req, &p, why, ...)    auto -> a precision, checks
 *   cpu_gemm_create(p, d, alpha, crow?, threads, &g, st)
 *   cpu_gemm_rows_reserve(&rows, p, n, d); cpu_gemm_pack(p, x, n, d, &rows)
 *   cpu_gemm_tile(g, thread, &qrows, i0, &brows, j0, tq, nb, crow, out, st)
 *   cpu_gemm_free(g)
 * Without oneDNN at build time only fp32 resolves, and cpu_gemm_create
 * fails: the caller keeps its BLAS sgemm.
 */
#ifndef XJ_CPU_GEMM_H
#define XJ_CPU_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "../../config/job.h"
#include "../../config/status.h"

/* int8's int32 accumulation: d 255 127 < 2^31 (oneDNN shifts the s8
 * query to u8 on VNNI and subtracts a compensation). */
#define CPU_GEMM_INT8_MAX_D 65536
/* auto's int8 ends here: int8 rescored 2.4 to 2.9 times bf16's candidates
 * and ran 1.6x fp32 at k = 10 (syn-128) but 1.08x slower than fp32 at
 * k = 100 (GloVe cosine), where bf16 ran 1.05x faster (docs/performance.md) */
#define CPU_GEMM_INT8_MAX_K 32

typedef struct cpu_gemm_caps {
	int dnnl;          /* built with oneDNN */
	int bf16;          /* bf16 dot products in hardware (AVX512-BF16, AMX) */
	int int8;          /* exact int8 dot products (VNNI, AMX) */
	char isa[64];      /* oneDNN's highest ISA here, or why none */
	char version[16];  /* oneDNN's version, "" without it */
} cpu_gemm_caps;

/* What this build and CPU offer (oneDNN's dispatcher decides the ISA). */
void cpu_gemm_caps_get(cpu_gemm_caps *caps);

/* The CPU's candidate precision for request req (--precision) and top-k
 * size k: auto is the fastest one the CPU runs natively, else fp32: int8
 * for k <= CPU_GEMM_INT8_MAX_K, where its faster GEMM outweighs its wider
 * bound, bf16 above (and int8 where bf16 is not native);
 * fp32 always; bf16 needs oneDNN (emulated where the CPU lacks BF16: slow,
 * but allowed when asked for); int8 needs oneDNN, VNNI or AMX and
 * d <= CPU_GEMM_INT8_MAX_D. tf32 and fp16 are GPU precisions. why gets a
 * short reason (n bytes). XJ_EXIT_USAGE when req cannot run here. */
int cpu_gemm_resolve(xj_precision req, int64_t d, int64_t k,
		     xj_precision *out,
		     char *why, size_t n, xj_status *st);

/* Rows rounded for the GEMM: x is rows x d bf16 (uint16_t) or int8. */
typedef struct cpu_gemm_rows {
	void *x;
	float *scale;      /* int8: s per row; NULL otherwise */
	float *err;        /* upper bound of |r(x) - x| per row */
	double *dot;       /* x.(x - r(x)) per row, in double (the folded
			    * bound, metric_err_bound_folded) */
	int64_t alloc;
} cpu_gemm_rows;

int cpu_gemm_rows_reserve(cpu_gemm_rows *r, xj_precision p, int64_t rows,
			  int64_t d);
void cpu_gemm_rows_free(cpu_gemm_rows *r);

/* Round rows x (rows x d floats) into r (reserved for p: bf16 or int8). */
void cpu_gemm_pack(xj_precision p, const float *x, int64_t rows, int64_t d,
		   cpu_gemm_rows *r, int threads);

/* r(x) for bf16 (the rounding cpu_gemm_pack applies), as a float. */
float cpu_gemm_round_bf16(float x);

typedef struct cpu_gemm cpu_gemm;

/* A GEMM of precision p for rows of dimension d, G = crow + alpha A B^T
 * with crow given to each cpu_gemm_tile call (has_crow: crow is added;
 * else 0). threads: the OpenMP threads that call cpu_gemm_tile. */
int cpu_gemm_create(xj_precision p, int64_t d, float alpha, int has_crow,
		    int threads, cpu_gemm **out, xj_status *st);
void cpu_gemm_free(cpu_gemm *g);

/* oneDNN's implementation of the last tile GEMM created (e.g.
 * "brg:avx512_core_bf16"), "" before any. */
const char *cpu_gemm_impl(const cpu_gemm *g);

/*
 * out (tq x nb, row stride nb) = crow[0..nb) + alpha A B^T for the rows
 * i0 .. i0 + tq of a (fp32: the float rows af; else the packed rows ar)
 * and j0 .. j0 + nb of b likewise. Called by OpenMP thread `thread`
 * only; different threads may call at once.
 */
int cpu_gemm_tile(cpu_gemm *g, int thread, const float *af,
		  const cpu_gemm_rows *ar, int64_t i0, const float *bf,
		  const cpu_gemm_rows *br, int64_t j0, int64_t tq, int64_t nb,
		  const float *crow, float *out, xj_status *st);

/*
 * int8 left for the caller to scale: out[r][j] = the exact int32 sum
 * r(a).r(b) / (s_a s_b) written as a float, and G[r][j] = crow[j] +
 * out[r][j] * (s_b[j] * (alpha s_a[r])) in float (no crow: the product
 * alone), what cpu_gemm_tile computes (cpu_gemm_scale does it in place
 * without crow; a caller that reads the tile once may fold it into that
 * pass, the same bits).
 */
int cpu_gemm_tile_sums(cpu_gemm *g, int thread, const cpu_gemm_rows *ar,
		       int64_t i0, const cpu_gemm_rows *br, int64_t j0,
		       int64_t tq, int64_t nb, float *out, xj_status *st);
void cpu_gemm_scale(const cpu_gemm *g, const cpu_gemm_rows *ar, int64_t i0,
		    const cpu_gemm_rows *br, int64_t j0, int64_t tq,
		    int64_t nb, float *out);
float cpu_gemm_alpha(const cpu_gemm *g);

#endif
