/*
 * cpu_topk.c: top-k on the CPU backend: float32 GEMM candidates +
 * canonical rescoring into exact lists.
 *
 * Top-k. For a query chunk Q (n x d) and each streamed base chunk B
 * (m x d), every thread owns a tile of up to TQ_MAX query rows and walks
 * B in sub-tiles of TB rows:
 *
 *   G = alpha Q_tile B_sub^T + C                  cblas_sgemm, TQ x TB
 *     l2, sqeuclidean: alpha = -2, C[i][j] = |b_j|^2 (float)
 *     cosine:          alpha = -1, C = 1, rows normalised in float
 *     ip:              alpha = -1, C = 0
 *   keep (i, j) when G[i][j] <= T_i = up(gate_i - c_i + err_i)
 *
 * with c_i = |q_i|^2 for the l2 family and 0 otherwise, so G + c_i is the
 * approx-space value (metric.h); err_i = metric_err_bound() with the
 * largest base norm of the sub-tile bounds |G + c_i - exact|; gate_i is
 * the approx-space gate (metric_gate_approx) of the query's k-th exact
 * key, or of the threshold; up() rounds up to float. So no pair whose
 * canonical key could still enter the top-k is ever dropped, however the
 * GEMM rounds. (l2 on rows rounded to bf16 or int8 may fold each row's
 * rounding into its constants, C and c_i: then err_i grows with the
 * pair's distance, err_i = lin sqrt(gate_i) + abs at the gate; see
 * "Folded rounding" below.)
 *
 * Kept pairs are pushed on the query's pending list with two bounds
 * derived from their tile value g and the sub-tile's err_i, and are not
 * rescored yet ("Deferred rescoring" below): the gate tightens from the
 * bounds alone, pending pairs the tighter gate rules out are dropped, and
 * only the survivors are rescored, at the end of the chunk (or when
 * pruning a full list frees less than a quarter of it), with the
 * arithmetic of metric_key() (double, index order; one SIMD lane per
 * pair, MW pairs of any of the tile's queries per batch) and merged into
 * the query's exact list by (key, index). A query with no gate yet is
 * seeded with the best approx pair of each of k column groups, pushed and
 * pruned at once, so the first sub-tile does not push everything. The
 * lists are the exact canonical top-k: identical for any chunking of Q
 * and B, any thread count, any tile size.
 *
 * Deferred rescoring. Write s for a pair's canonical double score before
 * its final rounding (l2: before the sqrt) and a = g + c_i for its
 * approx value; metric_err_bound() gives |a - s| <= err_i (metric.c: its
 * factor 2 absorbs the double error of the canonical path; this is what
 * the scan test above already relies on). Per pending pair we store
 *   up = float_up(s+)     l2: float_up(sqrt(s+))
 *   lo = float_down(g - err_i - slack)
 * with s+ = g + c_i + err_i + slack, the slack 2^-40 (|g| + c_i + err_i)
 * covering the roundings of these few double operations. The key is s
 * rounded to nearest (l2: after a correctly rounded sqrt), and rounding
 * and sqrt are monotone, so key <= up. Then:
 *  1. Let K be the k-th smallest of the up and exact keys of distinct
 *     pairs the query met (bound_add keeps the k smallest as each pair
 *     is pushed, and the exact list's after each merge).
 *     At least k pairs seen so far have key <= K, so a pair with key > K
 *     is beaten by k pairs in the (key, index) order and can never be in
 *     the top-k; metric_gate_approx(K) is then a valid gate exactly as
 *     the k-th exact key's is. That stays true for the rest of the query
 *     chunk, whatever becomes of those k pairs, so gate_i (the smallest
 *     of the threshold's gate and every such gate) only decreases;
 *     kbound keeps the K behind it.
 *  2. A pending pair with lo > float_up(gate_i - c_i + slack) has
 *     g + c_i - err_i > gate_i, hence s > gate_i and key > K (or above
 *     the threshold): the scan's own test, with the error bound moved to
 *     the other side. It is dropped. Every pair that can still be in
 *     the top-k is rescored before its chunk ends.
 * Keeping K costs O(log k) per push; a prune, O(pending) compares and no
 * base row reads, runs when k/2 + 1 pairs arrived since the last one
 * (after a sub-tile) or when the list is full. (Finding K again from
 * the pending list at each prune, as before, cost 13% more of a 200,000
 * row self-join: docs/performance.md.)
 *
 * Costs per base element: 2d GEMM FLOPs, one float compare in the scan.
 * Per kept pair: a few double operations for its bounds, O(log k) for K,
 * O(1) amortised in the prunes; about k (1 + ln(m / k)) kept pairs per
 * query and chunk.
 * Per survivor (about k + the pairs within 2 err_i of the k-th key per
 * query and chunk): 3d double FLOPs and a base row read (4d bytes,
 * usually from DRAM). At k = 100, m = 1e5 that is ~100 rescored pairs
 * per query instead of ~900. The G tile (TQ_MAX x TB x 4 = 1 MiB) stays
 * in L2 between sgemm and scan; base rows are read once per query tile
 * (4 m d n / TQ_MAX bytes per chunk pair).
 *
 * Precision (cfg->precision, resolved by cpu_gemm_resolve): with bf16 or
 * int8 the tile G comes from oneDNN (cpu_gemm.h) on rows rounded once per
 * chunk (topk_begin, topk_add), and err_i is metric_err_bound_rows() with
 * the query's and the sub-tile's largest measured rounding errors; the
 * rest is as above, so the lists are the fp32 lists, bit for bit.
 *
 * Folded rounding (l2 family, bf16 and int8; cpu_folded). Each row's
 * rounding product x.(x - r(x)) (cpu_gemm_rows.dot) moves into its
 * constants: C[j] = fl(|b_j|^2 - 2 b_j.(b_j - r(b_j))) (fold_n2) and c_i
 * = |q_i|^2 - 2 q_i.(q_i - r(q_i)). Then |a - s| <= lin sqrt(s) + abs
 * (metric_err_bound_folded): the input error scales with the pair's
 * distance instead of the rows' norms. The tests above become: keep
 * (i, j) when G <= up(gate_i - c_i + lin sqrt(gate_i) + abs) (s <= gate_i
 * implies that, as the bound grows with s), and per pending pair s lies
 * between (max(0, sqrt(h^2 + a - abs) - h))^2 and (h + sqrt(h^2 + a +
 * abs))^2, h = lin / 2, which give lo (less c_i) and up. Where the
 * neighbours lie closer to each other than to the origin (clustered rows)
 * the window of candidates narrows by about |b| / |q - b|; elsewhere it
 * widens, so the first base chunk of each query chunk decides
 * (fold_decide), unless XJ_CPU_FOLD says. Either way the same lists.
 *
 * Threads: OpenMP over query tiles; OpenBLAS is set to one thread so each
 * OpenMP thread runs its own sgemm calls. A thread owns whole query rows,
 * so the selection state needs no locks.
 *
 * topk_begin keeps a pointer to the query rows; they must stay valid and
 * unchanged until topk_end. Base rows are only used inside topk_add.
 *
 * Self-joins: a base chunk that shares rows with the query chunk goes to
 * cpu_topk_sym.c, which scores each pair of those rows (and of them with
 * the query rows later chunks bring) once and feeds both lists through
 * the same scans and pending lists; a pending pair may then name a query
 * row (j < 0), rescored against the query chunk's copy.
 */
#include "cpu_backend_int.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../metric.h"
#include "../topk.h"

/* ---- rescoring lanes ----------------------------------------------- */

/*
 * W pairs (rescoring): lane w is query row qx + qo[w] against base row
 * bx + bo[w], read where they lie, one element of each per step, instead
 * of being transposed first (as the matrix's lanes are, cpu_matrix.c,
 * which accumulate the same way: metric_key()'s operations in index
 * order, so the same bits). The pairs of a batch come from different
 * queries, so the W dependency chains are independent. Two widths: MW,
 * and RW4 for the few pairs left at the end of a batch.
 */
#define RW4 4
#define LANES_PAIRS(name, W, update)					\
XJ_CLONES								\
static void name(const float *qx, const int64_t *qo, const float *bx,	\
		 const int64_t *bo, int64_t d, double *acc)		\
{									\
	double a[W] = { 0 };						\
									\
	for (int64_t i = 0; i < d; i++) {				\
		for (int w = 0; w < W; w++) {				\
			double qv = qx[qo[w] + i];			\
			double bv = bx[bo[w] + i];			\
									\
			update;						\
		}							\
	}								\
	memcpy(acc, a, sizeof(a));					\
}

LANES_PAIRS(pairs_sqdist, MW, double t = qv - bv; a[w] += t * t)
LANES_PAIRS(pairs_sqdist4, RW4, double t = qv - bv; a[w] += t * t)
LANES_PAIRS(pairs_dot, MW, a[w] += qv * bv)
LANES_PAIRS(pairs_dot4, RW4, a[w] += qv * bv)

void cpu_pairs_acc(xj_metric m, const float *qx, int64_t *qo,
		   const float *bx, int64_t *bo, int64_t n, int64_t d,
		   double *acc)
{
	int sq = m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN;

	if (n <= 0)
		return;
	/* lanes past n repeat lane 0; their results are not used */
	for (int64_t w = n; w < MW; w++) {
		qo[w] = qo[0];
		bo[w] = bo[0];
	}
	if (n <= RW4 && sq)
		pairs_sqdist4(qx, qo, bx, bo, d, acc);
	else if (n <= RW4)
		pairs_dot4(qx, qo, bx, bo, d, acc);
	else if (sq)
		pairs_sqdist(qx, qo, bx, bo, d, acc);
	else
		pairs_dot(qx, qo, bx, bo, d, acc);
}

/* ---- selection state ---------------------------------------------- */

void cpu_free_query(cpu_backend *c)
{
	free(c->qq);
	free(c->qnorm);
	free(c->qhat);
	free(c->gate);
	free(c->ekey);
	free(c->eidx);
	free(c->ecount);
	free(c->pend);
	free(c->npend);
	free(c->nkept);
	free(c->kbound);
	free(c->hk);
	free(c->hn);
	free(c->gsq);
	free(c->qn2);
	free(c->qsubmax);
	free(c->qsubemax);
	free(c->given);
	cpu_gemm_rows_free(&c->ql);
	c->qq = NULL;
	c->qnorm = NULL;
	c->qhat = NULL;
	c->gate = NULL;
	c->ekey = NULL;
	c->eidx = NULL;
	c->ecount = NULL;
	c->pend = NULL;
	c->npend = NULL;
	c->nkept = NULL;
	c->kbound = NULL;
	c->hk = NULL;
	c->hn = NULL;
	c->gsq = NULL;
	c->qn2 = NULL;
	c->qsubmax = NULL;
	c->qsubemax = NULL;
	c->given = NULL;
	c->qalloc = 0;
}

/* The candidate GEMM reads rows rounded to bf16 or int8. */
static int lowp(const cpu_backend *c)
{
	return c->prec == XJ_PREC_BF16 || c->prec == XJ_PREC_INT8;
}

static int query_reserve(cpu_backend *c, int64_t rows, xj_status *st)
{
	int64_t k = c->cfg.k, d = c->cfg.d;
	int cosine = c->cfg.metric == XJ_METRIC_COSINE;
	int sym = c->cfg.self && c->cfg.same_rows;

	if (rows <= c->qalloc)
		return XJ_OK;
	if (!cpu_size_ok(rows, 8 * (2 * c->cap + 2 * k + d + 10)))
		return xj_fail(st, XJ_EXIT_RESOURCE,
			       "cpu backend: %lld query rows: selection state too large",
			       (long long)rows);
	cpu_free_query(c);
	c->qq = malloc((size_t)rows * sizeof(double));
	c->qnorm = malloc((size_t)rows * sizeof(float));
	c->qhat = cosine ? cpu_alloc_aligned((size_t)(rows * d) *
					     sizeof(float)) : NULL;
	c->gate = malloc((size_t)rows * sizeof(double));
	c->ekey = malloc((size_t)(rows * k) * sizeof(float));
	c->eidx = malloc((size_t)(rows * k) * sizeof(int64_t));
	c->ecount = malloc((size_t)rows * sizeof(int64_t));
	c->pend = malloc((size_t)(rows * c->cap) * sizeof(pend_ent));
	c->npend = malloc((size_t)rows * sizeof(int64_t));
	c->nkept = malloc((size_t)rows * sizeof(int64_t));
	c->kbound = malloc((size_t)rows * sizeof(float));
	c->hk = malloc((size_t)(rows * k) * sizeof(float));
	c->hn = malloc((size_t)rows * sizeof(int64_t));
	c->gsq = malloc((size_t)rows * sizeof(double));
	if (sym) {
		c->qn2 = malloc((size_t)rows * sizeof(float));
		c->qsubmax = malloc((size_t)(rows / TB + 1) * sizeof(float));
		c->qsubemax = malloc((size_t)(rows / TB + 1) * sizeof(float));
		c->given = malloc((size_t)rows);
	}
	if (!c->qq || !c->qnorm || (cosine && !c->qhat) || !c->gate ||
	    !c->ekey || !c->eidx || !c->ecount || !c->pend ||
	    !c->npend || !c->nkept || !c->kbound || !c->hk || !c->hn ||
	    !c->gsq ||
	    (sym && (!c->qn2 || !c->qsubmax || !c->qsubemax || !c->given)) ||
	    (lowp(c) && cpu_gemm_rows_reserve(&c->ql, c->prec, rows, d))) {
		cpu_free_query(c);
		return cpu_oom(st, "the query selection state",
			       backend_cpu_work_bytes(&c->cfg, rows,
						      c->threads));
	}
	c->qalloc = rows;
	return XJ_OK;
}

void cpu_free_base(cpu_backend *c)
{
	free(c->bb);
	free(c->bn2);
	free(c->bnorm);
	free(c->bhat);
	free(c->submax);
	free(c->subemax);
	cpu_gemm_rows_free(&c->bl);
	c->subemax = NULL;
	c->bb = NULL;
	c->bn2 = NULL;
	c->bnorm = NULL;
	c->bhat = NULL;
	c->submax = NULL;
	c->balloc = 0;
}

static int base_reserve(cpu_backend *c, int64_t rows, xj_status *st)
{
	int64_t d = c->cfg.d;
	int cosine = c->cfg.metric == XJ_METRIC_COSINE;

	if (rows <= c->balloc)
		return XJ_OK;
	if (!cpu_size_ok(rows, 4 * d + 32))
		return xj_fail(st, XJ_EXIT_RESOURCE,
			       "cpu backend: %lld base rows: norms too large",
			       (long long)rows);
	cpu_free_base(c);
	c->bb = malloc((size_t)rows * sizeof(double));
	c->bn2 = cpu_alloc_aligned((size_t)rows * sizeof(float));
	c->bnorm = malloc((size_t)rows * sizeof(float));
	c->bhat = cosine ? cpu_alloc_aligned((size_t)(rows * d) *
					     sizeof(float)) : NULL;
	c->submax = malloc((size_t)(rows / TB + 1) * sizeof(float));
	c->subemax = malloc((size_t)(rows / TB + 1) * sizeof(float));
	if (!c->bb || !c->bn2 || !c->bnorm || (cosine && !c->bhat) ||
	    !c->submax || !c->subemax ||
	    (lowp(c) && cpu_gemm_rows_reserve(&c->bl, c->prec, rows, d))) {
		cpu_free_base(c);
		return cpu_oom(st, "base norms", rows * (int64_t)(8 + 4 + 4 +
				(cosine ? 4 * d : 0)));
	}
	c->balloc = rows;
	return XJ_OK;
}

static int cand_cmp(const void *pa, const void *pb)
{
	const cand *a = pa, *b = pb;

	if (topk_less(a->key, a->idx, b->key, b->idx))
		return -1;
	if (topk_less(b->key, b->idx, a->key, a->idx))
		return 1;
	return 0;
}

/*
 * Merge n sorted new entries into the sorted list key/idx of ne entries,
 * keeping the best k, in place from the back: the largest of the union
 * are dropped first, then entries move only if a new one goes before
 * them. Returns the new length.
 */
static int64_t merge_sorted(float *key, int64_t *idx, int64_t ne,
			    const cand *nw, int64_t n, int64_t k)
{
	int64_t total = ne + n < k ? ne + n : k;
	int64_t a = ne - 1, b = n - 1;

	for (int64_t drop = ne + n - total; drop > 0; drop--) {
		if (b >= 0 && (a < 0 || topk_less(key[a], idx[a], nw[b].key,
						  nw[b].idx)))
			b--;
		else
			a--;
	}
	for (int64_t o = total - 1; b >= 0; o--) {
		if (a >= 0 && topk_less(nw[b].key, nw[b].idx, key[a], idx[a])) {
			key[o] = key[a];
			idx[o] = idx[a--];
		} else {
			key[o] = nw[b].key;
			idx[o] = nw[b--].idx;
		}
	}
	return total;
}

/*
 * A batch of up to MW pending pairs, possibly of different queries,
 * rescored together; each key lands in its pending slot's up.
 */
typedef struct pair_batch {
	int64_t n;
	int64_t qo[MW], bo[MW];   /* element offsets of the rows */
	int64_t qi[MW], bj[MW];   /* query row, base row */
	int64_t slot[MW];         /* index into pend */
	const float *bx;          /* the base rows: the chunk's, or in a */
	const double *bb;         /* self-join across chunks the query
				   * chunk's; their canonical norms */
} pair_batch;

/* Two empty batches: pairs with chunk rows (pb[0]) and with query rows
 * (pb[1], candidates j < 0). */
static void batches_init(cpu_backend *c, pair_batch *pb, const xj_rows *b)
{
	pb[0].n = pb[1].n = 0;
	pb[0].bx = b->x;
	pb[0].bb = c->bb;
	pb[1].bx = c->qx;
	pb[1].bb = c->qq;
}

static void batch_score(cpu_backend *c, pair_batch *pb)
{
	xj_metric m = c->cfg.metric;
	double acc[MW];
	int64_t n = pb->n;

	if (n == 0)
		return;
	cpu_pairs_acc(m, c->qx, pb->qo, pb->bx, pb->bo, n, c->cfg.d, acc);
	for (int64_t w = 0; w < n; w++)
		c->pend[pb->slot[w]].up = lanes_key(m, acc[w], c->qq[pb->qi[w]],
						 pb->bb[pb->bj[w]]);
	pb->n = 0;
}

/* Add the pending pairs of query i to the batches, scoring full ones. */
static void batch_add_query(cpu_backend *c, pair_batch *pb, int64_t i)
{
	int64_t d = c->cfg.d;

	for (int64_t p = 0; p < c->npend[i]; p++) {
		int64_t slot = i * c->cap + p, j = c->pend[slot].j;
		pair_batch *x = &pb[j < 0];

		j = j < 0 ? -1 - j : j;
		x->qo[x->n] = i * d;
		x->bo[x->n] = j * d;
		x->qi[x->n] = i;
		x->bj[x->n] = j;
		x->slot[x->n++] = slot;
		if (x->n == MW)
			batch_score(c, x);
	}
}

/* The global index of candidate j (cpu_side). */
static int64_t cand_global(const cpu_backend *c, const xj_rows *b, int64_t j)
{
	return j >= 0 ? b->first_row + j : c->qfirst + (-1 - j);
}

/* ---- the k smallest key bounds ------------------------------------ */

/*
 * K of the file comment ("Deferred rescoring", 1). Each query keeps the
 * k smallest upper bounds of the keys of the pairs it met in this
 * stream, as a max-heap (hk, hn): pending pairs' up when pushed, the
 * exact keys after a merge. Their largest is a K once there are k of
 * them: distinct pairs, each key below its bound; a pair dropped later
 * still counts (it was seen, its key is below its bound). A prune takes
 * it (kbound_set). (Before, each prune selected K anew from the exact
 * list and the pending pairs' up: 13% more of a 200,000-row self-join,
 * the same time at k = 1,000: docs/performance.md.)
 */
static void heap_down(float *h, int64_t n, int64_t p)
{
	float v = h[p];

	for (;;) {
		int64_t ch = 2 * p + 1;

		if (ch >= n)
			break;
		if (ch + 1 < n && h[ch + 1] > h[ch])
			ch++;
		if (!(h[ch] > v))
			break;
		h[p] = h[ch];
		p = ch;
	}
	h[p] = v;
}

static void heap_up(float *h, int64_t p)
{
	float v = h[p];

	while (p > 0 && h[(p - 1) / 2] < v) {
		h[p] = h[(p - 1) / 2];
		p = (p - 1) / 2;
	}
	h[p] = v;
}

/* sqrt(max(gate, 0)): the square root the folded bound takes at a gate
 * (kept with each query's gate in gsq). */
static double gate_sqrt(double gate)
{
	return sqrt(gate > 0 ? gate : 0);
}

/* A new K for query i: its gate, when tighter (every gate ever derived
 * stays valid: keep the tightest). Returns 1 when the gate moved. */
static int kbound_set(cpu_backend *c, int64_t i, float kth)
{
	double g;

	if (!(kth < c->kbound[i]))
		return 0;
	c->kbound[i] = kth;
	g = metric_gate_approx(c->cfg.metric, kth);
	if (!(g < c->gate[i]))
		return 0;
	c->gate[i] = g;
	c->gsq[i] = gate_sqrt(g);
	return 1;
}

/* Key bound u of a pair query i meets. */
static void bound_add(cpu_backend *c, int64_t i, float u)
{
	int64_t k = c->cfg.k, n = c->hn[i];
	float *h = c->hk + i * k;

	if (n < k) {
		h[n] = u;
		heap_up(h, n);
		c->hn[i] = n + 1;
	} else if (u < h[0]) {
		h[0] = u;
		heap_down(h, k, 0);
	}
}

/*
 * Merge the rescored pending pairs of query i into its exact list; then
 * tighten its gate. Exact for any pending content: the list is the best
 * k by (key, index) of everything seen.
 */
static void query_merge(cpu_backend *c, cpu_thread *t, int64_t i,
			const xj_rows *b)
{
	const xj_backend_cfg *cfg = &c->cfg;
	int64_t k = cfg->k;
	const pend_ent *pend = c->pend + i * c->cap;
	float *ekey = c->ekey + i * k;
	int64_t *eidx = c->eidx + i * k;
	int64_t ne = c->ecount[i];
	int64_t n = 0;

	t->rescored += (double)c->npend[i];

	for (int64_t p = 0; p < c->npend[i]; p++) {
		int64_t gj = cand_global(c, b, pend[p].j);
		float key = pend[p].up;

		if (cfg->has_threshold && !(key <= cfg->threshold_key))
			continue;
		if (ne == k && !topk_less(key, gj, ekey[k - 1], eidx[k - 1]))
			continue;
		t->cands[n].key = key;
		t->cands[n].idx = gj;
		n++;
	}
	c->npend[i] = 0;
	c->nkept[i] = 0;
	if (n == 0)
		return;
	qsort(t->cands, (size_t)n, sizeof(cand), cand_cmp);
	n = merge_sorted(ekey, eidx, ne, t->cands, n, k);
	c->ecount[i] = n;
	/* nothing is pending now: the k smallest bounds are the list's
	 * keys (descending: a max-heap) */
	for (int64_t e = 0; e < n; e++)
		c->hk[i * k + e] = ekey[n - 1 - e];
	c->hn[i] = n;
	if (n == k)
		kbound_set(c, i, ekey[k - 1]);
}

/* Rescore and merge the pending pairs of query i alone. */
static void query_flush(cpu_backend *c, cpu_thread *t, int64_t i,
			const xj_rows *b)
{
	pair_batch pb[2];
	double t0 = omp_get_wtime();

	batches_init(c, pb, b);
	batch_add_query(c, pb, i);
	batch_score(c, &pb[0]);
	batch_score(c, &pb[1]);
	query_merge(c, t, i, b);
	t->rescore_s += omp_get_wtime() - t0;
}

/*
 * Rescore and merge the pending pairs of the queries [i0, i1) that have
 * at least min_pend of them, in shared batches: many short pending lists
 * cost no more than one long one.
 */
static void tile_flush(cpu_backend *c, cpu_thread *t, int64_t i0, int64_t i1,
		       int64_t min_pend, const xj_rows *b)
{
	pair_batch pb[2];
	double t0 = omp_get_wtime();

	batches_init(c, pb, b);
	for (int64_t i = i0; i < i1; i++)
		if (c->npend[i] && c->npend[i] >= min_pend)
			batch_add_query(c, pb, i);
	batch_score(c, &pb[0]);
	batch_score(c, &pb[1]);
	for (int64_t i = i0; i < i1; i++)
		if (c->npend[i] && c->npend[i] >= min_pend)
			query_merge(c, t, i, b);
	t->rescore_s += omp_get_wtime() - t0;
}

/* ---- deferred rescoring -------------------------------------------- */

/* c_i of the file comment: the part of the approx value sgemm leaves out
 * (folded: less twice the row's rounding product, fold_n2). */
static double row_offset(const cpu_backend *c, int64_t i)
{
	if (cpu_folded(c))
		return c->qq[i] - 2.0 * c->ql.dot[i];
	return cpu_l2(c) ? c->qq[i] : 0;
}

/* Error bound of the tile values of query i against sub-tile s (its
 * largest float base norm, and rounding error for bf16/int8). */
metric_err2 cpu_side_err(const cpu_backend *c, int64_t i, float nmax,
			 float emax)
{
	int cosine = c->cfg.metric == XJ_METRIC_COSINE;
	double qn = cosine ? 1 : c->qnorm[i], bn = cosine ? 1 : nmax;
	metric_err2 e = { 0.0, 0.0 };

	if (cpu_folded(c))
		return metric_err_bound_folded(c->cfg.d, qn, bn, c->ql.err[i],
					       emax, c->prec);
	if (lowp(c))
		e.abs = metric_err_bound_rows(c->cfg.metric, c->cfg.d, qn, bn,
					      c->ql.err[i], emax, c->prec);
	else
		e.abs = metric_err_bound(c->cfg.metric, c->cfg.d, qn, bn);
	return e;
}

static metric_err2 row_err(const cpu_backend *c, int64_t i, int64_t s)
{
	return cpu_side_err(c, i, c->submax[s], c->subemax[s]);
}

/* The bound e at scores up to a gate whose gate_sqrt is sg: every pair
 * with score <= gate has |a - s| <= this (e.lin sqrt(s) grows with s). */
static double err_at(metric_err2 e, double sg)
{
	return e.lin == 0 ? e.abs : e.abs + e.lin * sg;
}

/* x plus a relative 2^-40 of mag: covers the rounding of the few double
 * operations that computed x from terms of total magnitude mag. */
static double slack_up(double x, double mag)
{
	return x + mag * 0x1p-40;
}

/* The folded bound's part of pend_bounds: a - s within lin sqrt(s) + abs
 * (metric_err_bound_folded), so s lies between the squares below, h =
 * lin / 2; both sums are of terms below mag, each operation's error below
 * 2^-52 of it. Returns the upper bound of s; *lo gets the lower one less
 * off, rounded down. */
static __attribute__((noinline)) double folded_bounds(float g, double off,
						      metric_err2 err,
						      float *lo)
{
	double a = (double)g + off, h = err.lin / 2;
	double hi = a + err.abs, lw = a - err.abs;
	double r = h + sqrt(h * h + (hi > 0 ? hi : 0));
	double q = lw > 0 ? sqrt(h * h + lw) - h : 0;
	double mag = fabs((double)g) + fabs(off) + err.abs + h * h + r * r;

	q = q > 0 ? q * q : 0;
	*lo = float_down(-slack_up(off - q, mag));
	return slack_up(r * r, mag);
}

/*
 * Bounds of a pair with tile value g, for query offset off and error
 * bound err (file comment): the canonical double score is <= g + off +
 * err; the key is that score rounded to nearest (l2: after a correctly
 * rounded sqrt), both monotone, so key <= up.
 */
static pend_ent pend_bounds(xj_metric m, int64_t j, float g, double off,
			    metric_err2 err)
{
	double u;
	pend_ent e;

	if (err.lin == 0) {
		u = slack_up((double)g + off + err.abs, fabs((double)g) +
			     fabs(off) + err.abs);
		e.lo = float_down(-slack_up(err.abs - (double)g,
					    err.abs + fabs((double)g)));
	} else {
		u = folded_bounds(g, off, err, &e.lo);
	}
	if (m == XJ_METRIC_L2)
		u = sqrt(u > 0 ? u : 0);
	e.up = float_up(u);
	e.j = j;
	return e;
}

/*
 * Tighten the gate of query i from the bounds of the pairs it met, then
 * drop the pending pairs the tighter gate rules out (file comment,
 * "Deferred rescoring"), without rescoring any.
 */
void cpu_query_prune(cpu_backend *c, int64_t i)
{
	int64_t np = c->npend[i], keep = 0;
	pend_ent *pend = c->pend + i * c->cap;
	int64_t k = c->cfg.k;
	double gate, off = row_offset(c, i);
	float thr;

	if (c->hn[i] == k)
		kbound_set(c, i, c->hk[i * k]);
	gate = c->gate[i];
	thr = float_up(slack_up(gate - off, fabs(gate) + fabs(off)));
	for (int64_t p = 0; p < np; p++)
		if (pend[p].lo <= thr)
			pend[keep++] = pend[p];
	c->npend[i] = keep;
	c->nkept[i] = keep;
}

/* ---- the scan ------------------------------------------------------ */

/*
 * First block start j >= from holding an element with g[j] <= t, or the
 * start of the tail too short for a block. A hit lies in [j, j + SCAN_W);
 * the caller checks those elements one by one.
 */
XJ_CLONES
int64_t cpu_scan_block(const float *g, float t, int64_t from, int64_t n)
{
	int64_t j = from;

	for (; j + SCAN_W <= n; j += SCAN_W) {
		int any = 0;

		for (int w = 0; w < SCAN_W; w++)
			any |= g[j + w] <= t;
		if (any)
			return j;
	}
	return j;
}

/* Bit w set when g[w] <= t, for a block of SCAN_W elements. */
XJ_CLONES
uint32_t cpu_scan_hits(const float *g, float t)
{
	uint32_t hits = 0;

	for (int w = 0; w < SCAN_W; w++)
		hits |= (uint32_t)(g[w] <= t) << w;
	return hits;
}

/*
 * int8's tile from its unscaled sums, as read (cpu_gemm_tile_sums): G[j]
 * = crow[j] + g[j] * (s[j] * ar), ar = alpha s_a of the row, the float
 * operations int8_scale would have stored (crow NULL: the product).
 */
#define SUMS_P(g, s, ar, j) ((g)[j] * ((s)[j] * (ar)))
#define SUMS_G(g, crow, s, ar, j)					\
	((crow) ? (crow)[j] + SUMS_P(g, s, ar, j) : SUMS_P(g, s, ar, j))

/* cpu_scan_block on such sums. */
XJ_CLONES
static int64_t sums_block(const float *g, const float *crow, const float *s,
			  float ar, float t, int64_t from, int64_t n)
{
	int64_t j = from;

	for (; j + SCAN_W <= n; j += SCAN_W) {
		int any = 0;

		for (int w = 0; w < SCAN_W; w++)
			any |= SUMS_G(g, crow, s, ar, j + w) <= t;
		if (any)
			return j;
	}
	return j;
}

/* cpu_scan_hits on such sums (block at j). */
XJ_CLONES
static uint32_t sums_hits(const float *g, const float *crow, const float *s,
			  float ar, float t, int64_t j)
{
	uint32_t hits = 0;

	for (int w = 0; w < SCAN_W; w++)
		hits |= (uint32_t)(SUMS_G(g, crow, s, ar, j + w) <= t) << w;
	return hits;
}

/* The int8 sums of a tile row: their scales (cpu_tile_cols), or s NULL
 * when the row holds G itself. */
typedef struct row_sums {
	const float *crow, *s;
	float ar;
} row_sums;

/* Scan threshold T_i of query i against a sub-tile whose largest base
 * norm is bmax (see the file comment). */
static float row_threshold(const cpu_backend *c, int64_t i, metric_err2 err)
{
	double gate = c->gate[i];

	if (gate == INFINITY)
		return INFINITY;
	return float_up(gate - row_offset(c, i) + err_at(err, c->gsq[i]));
}

/*
 * Push chunk row j, tile value g, as a candidate of query i (off, err:
 * its offset and error bound). A full list is pruned, and rescored only
 * when pruning freed less than a quarter of it. Returns 1 when the gate
 * may have moved.
 */
static int query_push(cpu_backend *c, cpu_thread *t, int64_t i, int64_t j,
		      float g, double off, metric_err2 err, const xj_rows *b)
{
	pend_ent e;

	if (c->cfg.self && cand_global(c, b, j) == c->qfirst + i)
		return 0;
	e = pend_bounds(c->cfg.metric, j, g, off, err);
	c->pend[i * c->cap + c->npend[i]++] = e;
	bound_add(c, i, e.up);
	if (c->npend[i] < c->cap)
		return 0;
	cpu_query_prune(c, i);
	if (c->npend[i] > c->cap - c->cap / 4)
		query_flush(c, t, i, b);
	return 1;
}

/*
 * A query without any gate yet (no threshold, fewer than k key bounds)
 * would push every element until its first prune. Seed it instead: the
 * smallest approx value of each of k column groups is pushed and pruned
 * at once, which gives k key bounds and a gate near the final one
 * without rescoring anything. Any seeds keep the selection exact; good
 * ones only make it cheaper. Seeded columns are set to NaN in g so that
 * the scan does not push them again.
 */
static void seed_row(cpu_backend *c, cpu_thread *t, int64_t i, float *g,
		     int64_t j0, int64_t step, int64_t nb, metric_err2 err,
		     const xj_rows *b)
{
	double off = row_offset(c, i);

	int64_t ng = c->cfg.k < nb ? c->cfg.k : nb;

	for (int64_t gi = 0; gi < ng; gi++) {
		int64_t lo = gi * nb / ng, hi = (gi + 1) * nb / ng, best = lo;
		float bv = INFINITY;

		for (int64_t j = lo; j < hi; j++) {
			if (g[j] < bv) {
				bv = g[j];
				best = j;
			}
		}
		query_push(c, t, i, j0 + step * best, g[best], off, err, b);
		g[best] = NAN;
	}
	cpu_query_prune(c, i);
}

/* Scan row i of the tile g: its nb values are the candidates j0 + step
 * w, with error bound err; with rs->s, g holds int8's sums (SUMS_G). */
static void scan_row(cpu_backend *c, cpu_thread *t, int64_t i, float *g,
		     int64_t j0, int64_t step, int64_t nb, metric_err2 err,
		     const row_sums *rs, const xj_rows *b)
{
	double off = row_offset(c, i);
	const float *crow = rs ? rs->crow : NULL, *s = rs ? rs->s : NULL;
	float ar = rs ? rs->ar : 1.0f, thr;
	int64_t j = 0;

	if (s && c->gate[i] == INFINITY) {
		/* seeding reads the values themselves */
		for (int64_t e = 0; e < nb; e++)
			g[e] = SUMS_G(g, crow, s, ar, e);
		s = NULL;
	}
	if (c->gate[i] == INFINITY)
		seed_row(c, t, i, g, j0, step, nb, err, b);
	thr = row_threshold(c, i, err);
	while (j < nb) {
		/* hits of a block as bits; a gate that moved meanwhile only
		 * lowers thr, so set bits are tested again, clear ones never */
		uint32_t hits;

		j = s ? sums_block(g, crow, s, ar, thr, j, nb) :
			cpu_scan_block(g, thr, j, nb);
		if (j + SCAN_W > nb)
			break;
		hits = s ? sums_hits(g, crow, s, ar, thr, j) :
			   cpu_scan_hits(g + j, thr);
		for (; hits; hits &= hits - 1) {
			int64_t w = j + __builtin_ctz(hits);
			float v = s ? SUMS_G(g, crow, s, ar, w) : g[w];

			if (v <= thr &&
			    query_push(c, t, i, j0 + step * w, v, off, err, b))
				thr = row_threshold(c, i, err);
		}
		j += SCAN_W;
	}
	for (; j < nb; j++) {
		float v = s ? SUMS_G(g, crow, s, ar, j) : g[j];

		if (v <= thr &&
		    query_push(c, t, i, j0 + step * j, v, off, err, b))
			thr = row_threshold(c, i, err);
	}
}

void cpu_scan_row_side(cpu_backend *c, cpu_thread *t, int64_t i, float *g,
		       const cpu_side *s, int64_t nb, const xj_rows *b)
{
	scan_row(c, t, i, g, s->cand0, s->step, nb,
		 cpu_side_err(c, i, s->nmax, s->emax), NULL, b);
}

/*
 * First block start j >= from of a pair tile's row holding an element
 * that passes either side: G[j] + cb[j] <= t (the row's query) or G[j] +
 * ca <= tc[j] (column j's query). As scan_block. G[j] = SUMS_P(g, s, ar,
 * j): int8's sums times s_b[j] (alpha s_a[r]) (no row added), folded
 * into the scan's one read of the tile; a tile already scaled comes with
 * s = ones and ar = 1, exact.
 */
XJ_CLONES
static int64_t pair_block(const float *g, const float *s, float ar,
			  const float *cb, float ca, float t, const float *tc,
			  int64_t from, int64_t n)
{
	int64_t j = from;

	for (; j + SCAN_W <= n; j += SCAN_W) {
		int any = 0;

		for (int w = 0; w < SCAN_W; w++) {
			float v = SUMS_P(g, s, ar, j + w);

			any |= (v + cb[j + w] <= t) | (v + ca <= tc[j + w]);
		}
		if (any)
			return j;
	}
	return j;
}

/* Bit w set when element w of a pair tile's block passes either side. */
XJ_CLONES
static uint32_t pair_hits(const float *g, const float *s, float ar,
			  const float *cb, float ca, float t, const float *tc)
{
	uint32_t hits = 0;

	for (int w = 0; w < SCAN_W; w++) {
		float v = SUMS_P(g, s, ar, w);

		hits |= (uint32_t)((v + cb[w] <= t) | (v + ca <= tc[w])) << w;
	}
	return hits;
}

/* Scan state of the rows or the columns of a pair tile: each one's query
 * threshold, error bound and offset. */
typedef struct pair_cols {
	float thr[TB];
	metric_err2 err[TB];
	double off[TB];
} pair_cols;

/*
 * The scan state of queries q0 .. q0 + n - 1 against a side of largest
 * norm nmax and rounding emax: what cpu_side_err, row_offset and
 * row_threshold give each one. A folded bound takes its base side's
 * terms once (metric_folded_side): as calls for every row and column of
 * every 512 x 512 pair tile, the bounds were 7% of an int8 self-join's
 * samples (docs/performance.md).
 */
static void side_state(const cpu_backend *c, int64_t q0, int64_t n,
		       float nmax, float emax, pair_cols *ps)
{
	int folded = cpu_folded(c);
	metric_folded f = metric_folded_side(c->cfg.d, nmax, emax, c->prec);

	for (int64_t k = 0; k < n; k++) {
		int64_t q = q0 + k;

		ps->err[k] = folded ? metric_folded_row(&f, c->qnorm[q],
							c->ql.err[q])
				    : cpu_side_err(c, q, nmax, emax);
		ps->off[k] = row_offset(c, q);
		ps->thr[k] = row_threshold(c, q, ps->err[k]);
	}
}

int cpu_scan_sides(cpu_backend *c, cpu_thread *t, const float *g,
		   const float *sa, const float *sb, float alpha,
		   const cpu_side *a, int64_t na, const cpu_side *bs,
		   int64_t nb, const float *ca, const float *cb,
		   const xj_rows *b)
{
	static const float zero[TB];
	pair_cols pc, pr;

	for (int64_t r = 0; r < na; r++)
		if (c->gate[a->q0 + r] == INFINITY)
			return 0;
	for (int64_t k = 0; k < nb; k++)
		if (c->gate[bs->q0 + k] == INFINITY)
			return 0;
	/* a row's gate moves only through its own pushes, none before its
	 * turn: its state is taken here with the columns' */
	side_state(c, bs->q0, nb, a->nmax, a->emax, &pc);
	side_state(c, a->q0, na, bs->nmax, bs->emax, &pr);
	if (!cb)
		cb = zero;
	if (!sb)
		sb = c->ones;
	for (int64_t r = 0; r < na; r++) {
		int64_t i = a->q0 + r;
		const float *gr = g + r * nb;
		float cr = ca ? ca[r] : 0.0f, ar = sa ? alpha * sa[r] : 1.0f;
		metric_err2 err = pr.err[r];
		double roff = pr.off[r];
		float thr = pr.thr[r];

		for (int64_t j = 0; j < nb; j += SCAN_W) {
			uint32_t hits;

			j = pair_block(gr, sb, ar, cb, cr, thr, pc.thr, j, nb);
			if (j + SCAN_W <= nb)
				hits = pair_hits(gr + j, sb + j, ar, cb + j, cr,
						 thr, pc.thr + j);
			else    /* the tail: every element */
				hits = j < nb ? (uint32_t)((1ull << (nb - j)) - 1)
					      : 0;
			/* a moved gate only lowers a threshold: set bits are
			 * tested again, clear ones never */
			for (; hits; hits &= hits - 1) {
				int64_t w = j + __builtin_ctz(hits);
				int64_t q = bs->q0 + w;
				float v = SUMS_P(gr, sb, ar, w);
				float vr = v + cb[w], vc = v + cr;

				if (vr <= thr &&
				    query_push(c, t, i, bs->cand0 + bs->step * w,
					       vr, roff, err, b))
					thr = row_threshold(c, i, err);
				if (vc <= pc.thr[w] &&
				    query_push(c, t, q, a->cand0 + a->step * r,
					       vc, pc.off[w], pc.err[w], b))
					pc.thr[w] = row_threshold(c, q,
								  pc.err[w]);
			}
		}
	}
	return 1;
}

/*
 * The tile G = alpha Q_tile B_sub^T + beta C. For l2 and cosine C holds
 * the constant part of the approx-space value in every row (|b_j|^2, or
 * 1), added by sgemm with beta = 1: this costs what sgemm's own zeroing
 * for beta = 0 costs, and leaves the scan one compare per element.
 */
static int tile_gemm(cpu_backend *c, cpu_thread *t, const float *qa,
		     const float *ba, int64_t i0, int64_t tq, int64_t nb,
		     int64_t j0, int sums, xj_status *st)
{
	xj_metric m = c->cfg.metric;
	int64_t d = c->cfg.d;
	float alpha = -1.0f, beta = 1.0f;
	const float *row = c->ones;

	if (m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN) {
		alpha = -2.0f;
		row = c->bn2 + j0;
	} else if (m == XJ_METRIC_IP) {
		beta = 0.0f;
		row = NULL;
	}
	t->flops += 2.0 * (double)tq * (double)nb * (double)d;
	if (sums)
		return cpu_gemm_tile_sums(c->gemm, (int)(t - c->th), &c->ql, i0,
					  &c->bl, j0, tq, nb, t->g, st);
	if (c->gemm)
		return cpu_gemm_tile(c->gemm, (int)(t - c->th), qa, &c->ql, i0,
				     ba, &c->bl, j0, tq, nb, row, t->g, st);
	for (int64_t r = 0; row && r < tq; r++)
		memcpy(t->g + r * nb, row, (size_t)nb * sizeof(float));
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)tq, (int)nb,
		    (int)d, alpha, qa + i0 * d, (int)d, ba + j0 * d, (int)d, beta,
		    t->g, (int)nb);
	return XJ_OK;
}

int cpu_subtile_gemm(cpu_backend *c, cpu_thread *t, int64_t i0, int64_t i1,
		     const xj_rows *b, int64_t j0, int64_t *nb, xj_status *st)
{
	int cosine = c->cfg.metric == XJ_METRIC_COSINE;
	const float *qa = cosine ? c->qhat : c->qx;
	const float *ba = cosine ? c->bhat : b->x;

	*nb = b->rows - j0 < TB ? b->rows - j0 : TB;
	return tile_gemm(c, t, qa, ba, i0, i1 - i0, *nb, j0, 0, st);
}

/*
 * One thread's query tile [i0, i1) against the chunk rows [jb, je), in
 * sub-tiles that do not cross a multiple of TB (submax is per TB rows).
 * int8's sums are scaled as the scan reads them (SUMS_G), not in a pass
 * of their own (5% of an int8 job's samples).
 */
int cpu_tile_cols(cpu_backend *c, cpu_thread *t, int64_t i0, int64_t i1,
		  int64_t jb, int64_t je, const xj_rows *b, xj_status *st)
{
	xj_metric m = c->cfg.metric;
	int cosine = m == XJ_METRIC_COSINE;
	int l2 = m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN;
	const float *qa = cosine ? c->qhat : c->qx;
	const float *ba = cosine ? c->bhat : b->x;
	int sums = c->gemm && c->prec == XJ_PREC_INT8;

	for (int64_t j0 = jb; j0 < je; ) {
		int64_t end = (j0 / TB + 1) * TB < je ? (j0 / TB + 1) * TB : je;
		int64_t nb = end - j0;

		if (tile_gemm(c, t, qa, ba, i0, i1 - i0, nb, j0, sums, st))
			return st->code;
		for (int64_t i = i0; i < i1; i++) {
			row_sums rs = { l2 ? c->bn2 + j0 : cosine ? c->ones :
					NULL, c->bl.scale + j0, 0.0f };

			if (sums)
				rs.ar = cpu_gemm_alpha(c->gemm) * c->ql.scale[i];
			scan_row(c, t, i, t->g + (i - i0) * nb, j0, 1, nb,
				 row_err(c, i, j0 / TB), sums ? &rs : NULL, b);
		}
		/* tighten the gates for the next sub-tile */
		for (int64_t i = i0; i < i1; i++)
			if (c->npend[i] - c->nkept[i] >= PRUNE_MIN(c->cfg.k))
				cpu_query_prune(c, i);
		j0 = end;
	}
	return XJ_OK;
}

/* The chunk's rows are gone after topk_add: rescore the survivors of the
 * query rows [i0, i1). */
void cpu_tile_finish(cpu_backend *c, cpu_thread *t, int64_t i0, int64_t i1,
		     const xj_rows *b)
{
	for (int64_t i = i0; i < i1; i++)
		if (c->npend[i])
			cpu_query_prune(c, i);
	tile_flush(c, t, i0, i1, 1, b);
}

/* One thread's query tile [i0, i1) against the whole base chunk. */
static int tile_run(cpu_backend *c, cpu_thread *t, int64_t i0, int64_t i1,
		    const xj_rows *b, xj_status *st)
{
	if (cpu_tile_cols(c, t, i0, i1, 0, b->rows, b, st))
		return st->code;
	cpu_tile_finish(c, t, i0, i1, b);
	return XJ_OK;
}

/* ---- backend entry points ----------------------------------------- */

/* The largest norm and rounding error (0 without err) of each TB block
 * of rows rows. */
static void block_maxima(int64_t rows, const float *norm, const float *err,
			 float *mx, float *emx)
{
	for (int64_t j0 = 0; j0 < rows; j0 += TB) {
		float m = 0, e = 0;

		for (int64_t j = j0; j < rows && j < j0 + TB; j++) {
			m = norm[j] > m ? norm[j] : m;
			if (err)
				e = err[j] > e ? err[j] : e;
		}
		mx[j0 / TB] = m;
		emx[j0 / TB] = e;
	}
}

int cpu_topk_begin(xj_backend *be, const xj_rows *q, xj_status *st)
{
	cpu_backend *c = cpu_of(be);
	int same;

	if (c->cfg.k < 1)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "cpu backend: top-k with k = %lld",
			       (long long)c->cfg.k);
	if (cpu_check_rows_arg(c, q, "query", st))
		return st->code;
	if (query_reserve(c, q->rows, st) || cpu_query_prepare(c, q, st) ||
	    cpu_query_pack(c, q, st))
		return st->code;
	/* the same tagged rows again: the caller merges this stream's
	 * lists with the last one's, so the gates derived from its pairs
	 * stay valid (a pair they rule out is beaten by k pairs of those
	 * lists), and a self-join's rows given then have their pairs
	 * (cpu_topk_sym.c) */
	same = q->tag && q->tag == c->qtag && q->first_row == c->qfirst &&
	       q->rows == c->qrows;
	for (int64_t i = 0; i < q->rows; i++) {
		if (!same) {
			c->gate[i] = c->gate0;
			c->gsq[i] = gate_sqrt(c->gate0);
			c->kbound[i] = INFINITY;
		}
		c->hn[i] = 0;
		c->ecount[i] = 0;
		c->npend[i] = 0;
		c->nkept[i] = 0;
	}
	c->qx = q->x;
	c->qrows = q->rows;
	c->qfirst = q->first_row;
	c->qtag = q->tag;
	c->active = 1;
	c->cross = c->cfg.self && c->cfg.same_rows && c->cfg.parts <= 1 &&
		   c->cfg.shard_rows > 0 && c->given;
	if (c->cross) {
		if (!same)
			memset(c->given, 0, (size_t)q->rows);
		/* the query rows as the base side of a pair tile */
		block_maxima(q->rows, c->qnorm, lowp(c) ? c->ql.err : NULL,
			     c->qsubmax, c->qsubemax);
	}
	return XJ_OK;
}

/* The float constant a folded row adds to the tiles as a candidate:
 * fl(|x|^2 - 2 x.(x - r(x))) from its canonical squared norm and
 * rounding product (cpu_folded). */
static void fold_n2(const double *n2, const double *dot, int64_t rows,
		    float *out)
{
	for (int64_t r = 0; r < rows; r++)
		out[r] = (float)(n2[r] - 2.0 * dot[r]);
}

/*
 * Whether the folded bound (metric_err_bound_folded) is the narrower one
 * for the query chunk against base rows like b's: both bounds summed
 * over FOLD_Q query rows, the folded one at each row's estimated k-th
 * nearest distance: its k'-th nearest among FOLD_B of b's rows, k' = k
 * FOLD_B / (the rows streamed) rounded up, an estimate that is too large
 * rather than too small (so folding is chosen only where it pays on the
 * estimate), never above the threshold's distance (a range join's: the
 * threshold's). The sample's distances come from one small sgemm; any
 * answer gives the same results.
 */
#define FOLD_Q 32
#define FOLD_B 512
static int fold_decide(const cpu_backend *c, const xj_rows *b)
{
	int64_t d = c->cfg.d, nq = c->qrows < FOLD_Q ? c->qrows : FOLD_Q;
	int64_t nb = b->rows < FOLD_B ? b->rows : FOLD_B;
	int64_t total = c->cfg.shard_rows > b->rows ? c->cfg.shard_rows :
			b->rows;
	int64_t kk = (c->cfg.k * nb + total - 1) / total;
	float bmax = 0, emax = 0, h[FOLD_B];
	float *qs = NULL, *bs = NULL, *dot = NULL;
	double folded = 0, plain = 0;

	if (nq == 0 || nb == 0)
		return 0;
	kk = kk < 1 ? 1 : kk > nb ? nb : kk;
	for (int64_t t = 0; t < nb; t++) {
		int64_t j = t * b->rows / nb;

		bmax = c->bnorm[j] > bmax ? c->bnorm[j] : bmax;
		emax = c->bl.err[j] > emax ? c->bl.err[j] : emax;
	}
	/* the sample's dot products in one sgemm (a top-k; a range join's
	 * pairs lie within its threshold, which is all it needs) */
	if (c->cfg.k > 0) {
		qs = malloc((size_t)(nq * d) * sizeof(float));
		bs = malloc((size_t)(nb * d) * sizeof(float));
		dot = malloc((size_t)(nq * nb) * sizeof(float));
		if (!qs || !bs || !dot) {
			free(qs);
			free(bs);
			free(dot);
			return 0;    /* any answer gives the same lists */
		}
		for (int64_t s = 0; s < nq; s++)
			memcpy(qs + s * d, c->qx + s * c->qrows / nq * d,
			       (size_t)d * sizeof(float));
		for (int64_t t = 0; t < nb; t++)
			memcpy(bs + t * d, b->x + t * b->rows / nb * d,
			       (size_t)d * sizeof(float));
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq,
			    (int)nb, (int)d, 1.0f, qs, (int)d, bs, (int)d,
			    0.0f, dot, (int)nb);
	}
	for (int64_t s = 0; s < nq; s++) {
		int64_t i = s * c->qrows / nq, n = 0;
		metric_err2 e = metric_err_bound_folded(d, c->qnorm[i], bmax,
							c->ql.err[i], emax,
							c->prec);
		double x = c->gate0;

		/* the kk smallest squared distances in a max-heap */
		for (int64_t t = 0; dot && t < nb; t++) {
			int64_t j = t * b->rows / nb;
			float v = (float)(c->qq[i] + c->bb[j] -
					  2.0 * dot[s * nb + t]);

			if (c->cfg.self && b->first_row + j == c->qfirst + i)
				continue;
			if (n < kk) {
				h[n] = v;
				heap_up(h, n++);
			} else if (v < h[0]) {
				h[0] = v;
				heap_down(h, n, 0);
			}
		}
		if (n > 0 && h[0] < x)
			x = h[0];
		folded += e.lin * gate_sqrt(x) + e.abs;
		plain += metric_err_bound_rows(c->cfg.metric, d, c->qnorm[i],
					       bmax, c->ql.err[i], emax,
					       c->prec);
	}
	free(qs);
	free(bs);
	free(dot);
	return folded < plain;
}

int cpu_query_pack(cpu_backend *c, const xj_rows *q, xj_status *st)
{
	if (!lowp(c))
		return XJ_OK;
	if (cpu_gemm_rows_reserve(&c->ql, c->prec, q->rows, c->cfg.d))
		return cpu_oom(st, "the rounded query rows",
			       q->rows * c->cfg.d * 2);
	cpu_gemm_pack(c->prec, c->cfg.metric == XJ_METRIC_COSINE ? c->qhat :
		      q->x, q->rows, c->cfg.d, &c->ql, c->threads);
	c->fold = -1;   /* the first base chunk decides */
	return XJ_OK;
}

/* Tiles per thread team: enough to keep every thread busy, at most TQ_MAX
 * rows each. */
int64_t cpu_tile_rows(int64_t rows, int threads)
{
	int64_t nt = (rows + TQ_MAX - 1) / TQ_MAX;

	if (nt < threads)
		nt = threads;
	nt = (nt + threads - 1) / threads * threads;
	if (nt > rows)
		nt = rows;
	return (rows + nt - 1) / nt;
}

static int base_prepare(cpu_backend *c, const xj_rows *b, xj_status *st)
{
	int cosine = c->cfg.metric == XJ_METRIC_COSINE;
	int l2 = c->cfg.metric == XJ_METRIC_L2 ||
		 c->cfg.metric == XJ_METRIC_SQEUCLIDEAN;
	int64_t bad;

	if (cpu_check_rows_arg(c, b, "base", st))
		return st->code;
	if (b->rows == 0 || c->qrows == 0)
		return XJ_OK;   /* nothing to compute */
	if (base_reserve(c, b->rows, st))
		return st->code;
	bad = cpu_rows_prepare(c->cfg.metric, b->x, b->rows, c->cfg.d, c->bb,
			       l2 ? c->bn2 : NULL, c->bnorm,
			       cosine ? c->bhat : NULL, c->threads);
	if (bad >= 0)
		return cpu_bad_row(c->cfg.metric, b->x, c->cfg.d, bad,
				   b->first_row, st);
	if (lowp(c))
		cpu_gemm_pack(c->prec, cosine ? c->bhat : b->x, b->rows,
			      c->cfg.d, &c->bl, c->threads);
	if (cpu_l2(c) && lowp(c)) {
		if (c->fold < 0) {
			c->fold = c->fold_env >= 0 ? c->fold_env :
				  fold_decide(c, b);
			/* a self-join's query rows as candidates
			 * (cpu_topk_sym.c) */
			if (c->fold && c->qn2)
				fold_n2(c->qq, c->ql.dot, c->qrows, c->qn2);
		}
		if (c->fold)
			fold_n2(c->bb, c->bl.dot, b->rows, c->bn2);
	}
	block_maxima(b->rows, c->bnorm, lowp(c) ? c->bl.err : NULL,
		     c->submax, c->subemax);
	return XJ_OK;
}

int cpu_base_prepare(cpu_backend *c, const xj_rows *b, xj_status *st)
{
	double t0 = omp_get_wtime();
	int rc = base_prepare(c, b, st);

	c->be.rows_seconds += omp_get_wtime() - t0;
	return rc;
}

int cpu_tiles_run(cpu_backend *c, const xj_rows *b, cpu_tile_fn fn,
		  xj_status *st)
{
	int64_t tq = cpu_tile_rows(c->qrows, c->threads);
	int64_t ntiles = (c->qrows + tq - 1) / tq;
	double flops = 0, rescored = 0, rescore_s = 0;
	int team, failed = 0;

	team = ntiles > 1 &&
	       (double)c->qrows * b->rows * c->cfg.d >= PAR_MIN_ELEMS * 4.0;
#pragma omp parallel num_threads(c->threads) \
	reduction(+ : flops, rescored, rescore_s) if (team)
	{
		cpu_thread *t = &c->th[omp_get_thread_num()];
		xj_status tst = { 0 };

		t->flops = 0;
		t->rescored = 0;
		t->rescore_s = 0;
#pragma omp for schedule(dynamic, 1)
		for (int64_t it = 0; it < ntiles; it++) {
			int64_t i0 = it * tq;
			int64_t i1 = i0 + tq < c->qrows ? i0 + tq : c->qrows;
			int bad_tile;

#pragma omp atomic read
			bad_tile = failed;
			if (bad_tile || !fn(c, t, i0, i1, b, &tst))
				continue;
#pragma omp critical(cpu_tiles_fail)
			if (!failed) {
				*st = tst;
#pragma omp atomic write
				failed = 1;
			}
		}
		flops += t->flops;
		rescored += t->rescored;
		rescore_s += t->rescore_s;
	}
	c->be.gemm_flops += flops;
	c->be.rescored_pairs += rescored;
	c->be.rescore_seconds += rescore_s / (team ? c->threads : 1);
	return failed ? st->code : XJ_OK;
}

int cpu_topk_add(xj_backend *be, const xj_rows *b, xj_status *st)
{
	cpu_backend *c = cpu_of(be);
	int64_t s0, slen;
	int shared;

	if (!c->active)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "cpu backend: topk_add before topk_begin");
	if (cpu_base_prepare(c, b, st) || b->rows == 0 || c->qrows == 0)
		return st->code;
	shared = cpu_sym_overlap(c, b, &s0, &slen);
	if (shared < 0)
		return xj_fail(st, XJ_EXIT_INTERNAL, "cpu backend: base rows "
			       "%lld.. of a self-join differ from the same "
			       "query rows", (long long)b->first_row);
	if (shared || c->cfg.parts > 1)
		return cpu_sym_add(c, b, s0, slen, st);
	return cpu_tiles_run(c, b, tile_run, st);
}

int cpu_topk_end(xj_backend *be, float *key, int64_t *idx, xj_status *st)
{
	cpu_backend *c = cpu_of(be);
	int64_t k = c->cfg.k;

	if (!c->active)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "cpu backend: topk_end before topk_begin");
	for (int64_t i = 0; i < c->qrows; i++) {
		int64_t n = c->ecount[i];

		memcpy(key + i * k, c->ekey + i * k, (size_t)n * sizeof(*key));
		memcpy(idx + i * k, c->eidx + i * k, (size_t)n * sizeof(*idx));
		topk_pad(key + i * k, idx + i * k, n, k);
	}
	c->active = 0;
	c->qx = NULL;
	return XJ_OK;
}

/* ---- shared with the range join (cpu_range.c) ---------------------- */

float cpu_row_thr(const cpu_backend *c, int64_t i, int64_t s, double gate)
{
	return float_up(gate - row_offset(c, i) + err_at(row_err(c, i, s),
							 gate_sqrt(gate)));
}
