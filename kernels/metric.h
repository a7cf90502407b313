/*
 * metric.h: canonical scores, ranking keys and GEMM error bounds.
 *
 * defines: metric_key, metric_norm2, metric_key_to_value,
 *          metric_value_to_key, metric_gate_approx, metric_err_bound,
 *          metric_err_bound_prec, metric_err_bound_rows,
 *          metric_err2, metric_err_bound_folded, metric_check_rows; metric_dgemm.h (included) the double
 *          GEMM's metric_dot_err, metric_sqdist_err, metric_dgemm_decide
 *
 * Every result xjoin reports is a *canonical* score: computed from the
 * float32 values as read, in double precision, accumulating over the
 * dimension in index order 0..d-1 with no contraction (the file is compiled
 * with -ffp-contract=off), then rounded once to float32:
 *
 *   sqeuclidean  s  = sum_i ((double)q_i - (double)b_i)^2      key = (float)s
 *   l2           s  as above                                    key = (float)sqrt(s)
 *   ip           p  = sum_i (double)q_i * (double)b_i          key = -(float)p
 *   cosine       p, qq = sum q_i^2, bb = sum b_i^2 (same order)
 *                c  = p / sqrt(qq * bb)                         key = (float)(1 - c)
 *
 * The ranking *key* is "smaller is better" for every metric (ip is negated);
 * the total order is (key, base index), lower index first on ties. The value
 * written to the output is metric_key_to_value(key) (ip: -key).
 *
 * Because the canonical score depends only on the two rows, results are
 * bit-identical whatever the chunking, rank count or backend. The GPU
 * backend implements the same formulas with __dadd_rn/__dmul_rn.
 *
 * Candidate generation uses a float32 GEMM in an "approx space":
 *   l2, sqeuclidean:  a = |q|^2 + |b|^2 - 2 q.b   (squared distance)
 *   cosine:           a = 1 - qn.bn  with rows normalised in float32
 *   ip:               a = -q.b
 * metric_err_bound() bounds |a - exact| (worst case, not typical) so a pair
 * can be discarded only when a - err > gate, where the gate comes from an
 * exact canonical key by metric_gate_approx(). That makes the selection
 * provably exact, not "exact with high probability".
 */
#ifndef XJ_METRIC_H
#define XJ_METRIC_H

#include <math.h>
#include <stdint.h>

#include "../config/job.h"
#include "../config/status.h"
/* the double GEMM's bounds and decision (the matrix), in a header the
 * CUDA backend's device code includes too */
#include "metric_dgemm.h"

/* Canonical squared norm: sum of (double)x_i^2 in index order. */
double metric_norm2(const float *x, int64_t d);

/* Canonical key of the pair (q, b). For cosine, qq and bb are the
 * metric_norm2() of q and b (ignored for other metrics). */
float metric_key(xj_metric m, const float *q, const float *b, int64_t d,
		 double qq, double bb);

/* Output value of a key (ip: -key, others: key). Padding key +inf maps to
 * +inf for distances and -inf for ip. */
float metric_key_to_value(xj_metric m, float key);

/* Key of a user threshold value t: the largest float <= t (ip: <= -t),
 * so that key <= threshold key holds exactly when the value passes t. */
float metric_value_to_key(xj_metric m, double value);

/* An upper bound, in approx space, of the exact approx-space value of any
 * pair whose canonical key is <= key. Used as the gate for candidates. */
double metric_gate_approx(xj_metric m, float key);

/* Upper bound on |approx - exact| in approx space for rows of dimension d
 * with Euclidean norms qnorm and bnorm (as computed in float; for cosine
 * pass 1, 1). */
double metric_err_bound(xj_metric m, int64_t d, double qnorm, double bnorm);

/* metric_err_bound() for a GEMM whose inputs are rounded to precision p
 * (tf32, bf16, fp16) and accumulated in float32, possibly on tensor cores
 * (the model and its derivation are in metric.c). p = XJ_PREC_FP32 gives
 * metric_err_bound() itself. fp16 holds only |x| <= 65504: a chunk with a
 * larger value must use the float32 GEMM (and bound). INFINITY when d is
 * too large for the model (12 d >= 2^24), which keeps every pair. */
double metric_err_bound_prec(xj_metric m, int64_t d, double qnorm,
			     double bnorm, xj_precision p);

/* The bound for the CPU's bf16 or int8 candidate GEMM (kernels/cpu/cpu_gemm.h)
 * on rows whose rounding errors |r(q) - q| <= qerr and |r(b) - b| <= berr
 * were measured when they were rounded; other p give metric_err_bound().
 * Monotone in every argument, so the largest bnorm and berr of a tile
 * bound all its pairs. Derivation in metric.c. */
double metric_err_bound_rows(xj_metric m, int64_t d, double qnorm,
			     double bnorm, double qerr, double berr,
			     xj_precision p);
/* A bound that grows with the pair's own score: |a - s| <= lin sqrt(s)
 * + abs for every pair whose canonical score (before its final rounding;
 * l2: before the sqrt) is s. lin = 0 is a bound of the kind above. */
typedef struct metric_err2 {
	double lin, abs;
} metric_err2;

/* l2 and sqeuclidean on the CPU's rounded rows (bf16, int8) with each
 * row's rounding folded into its constants: the approx value is
 *   a = (qq - 2 c_q) + fl(fl(bb - 2 c_b) - 2 acc),  c_x = x.(x - r(x))
 * (cpu_gemm_rows.dot, computed in double), and |a - s| is bounded by
 * 2 (qerr + berr) |q - b| plus small terms, instead of 2 (qerr |b| + |q|
 * berr) (metric_err_bound_rows): narrower by |b| / |q - b| for the pairs
 * that matter. Other precisions: lin = 0, abs = INFINITY. Monotone in
 * every argument, as metric_err_bound_rows. Derivation in metric.c. */
metric_err2 metric_err_bound_folded(int64_t d, double qnorm, double bnorm,
				    double qerr, double berr,
				    xj_precision p);

/* The same bound in two steps, for many query rows against one base
 * side: metric_folded_side takes the base side's terms (bnorm, berr:
 * the largest of a tile's base rows), metric_folded_row each query row's
 * bound from them, inline (a loop over a tile's rows calls nothing).
 * The same operations as metric_err_bound_folded, which is the two in
 * turn, so the same bits (no contraction: CMakeLists.txt). */
typedef struct metric_folded {
	int ok;                  /* 0: lin = 0, abs = INFINITY */
	double slack, acc, bn, db, dbl, c2, n8, tiny;
} metric_folded;

metric_folded metric_folded_side(int64_t d, double bnorm, double berr,
				 xj_precision p);

static inline metric_err2 metric_folded_row(const metric_folded *f,
					    double qnorm, double qerr)
{
	double qn = qnorm * f->slack, dq = qerr * f->slack;
	double st = qn + dq + f->bn + f->db;
	metric_err2 e = { 0.0, INFINITY };

	if (!f->ok)
		return e;
	e.lin = 2.0 * (dq + f->db) * f->slack;
	e.abs = 2.0 * dq * f->db + 2.0 * f->acc * (qn + dq) * (f->bn + f->db) +
		f->c2 * st * st + 2.0 * f->dbl * (qn * dq + f->bn * f->db) +
		e.lin * f->n8 * st + f->tiny;
	return e;
}

/* Metric-specific input checks on rows already known to be finite:
 * cosine rejects zero rows; every metric rejects rows whose squared norm
 * overflows float32. On failure names "row R" (global index first_row + i)
 * and returns XJ_EXIT_INPUT. */
int metric_check_rows(xj_metric m, const float *x, int64_t rows, int64_t d,
		      int64_t first_row, xj_status *st);

#endif
