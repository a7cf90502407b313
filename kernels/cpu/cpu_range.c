/*
 * cpu_range.c: the range join on the CPU backend: every pair whose
 * canonical key is <= the threshold key, with no cap.
 *
 * Candidates come from the top-k's tiles (cpu_topk.c's file comment):
 *
 *   G = alpha Q_tile B_sub^T + C                  cpu_tile_gemm, TQ x TB
 *   keep (i, j) when G[i][j] <= T_i = up(gate - c_i + err_i)
 *
 * with gate = metric_gate_approx(threshold key), fixed for the whole run
 * (there is no k-th key to tighten it), c_i the query's offset and err_i
 * the error bound of the sub-tile. So no pair whose canonical key can be
 * <= the threshold key is dropped, however the GEMM rounds. Each kept pair
 * is rescored with metric_key()'s arithmetic (double, index order, no
 * contraction), MW of a row's candidates at once in SIMD lanes (the
 * top-k's cpu_pairs_acc: MW independent chains instead of one), and
 * enters the query's list only when that canonical key is <= the
 * threshold key: membership is decided by the canonical value alone,
 * exactly as the top-k's threshold decides it.
 *
 * Each query row owns a growing list of (key, global base index); a
 * thread owns whole query tiles, so no locks. range_end sorts each row by
 * (key, index) with topk_sort (the library's qsort): the lists, and so the
 * output, are identical for any chunking of queries and base, any thread
 * count and any rank count.
 *
 * Costs per base element: 2d GEMM FLOPs, one compare. Per candidate (the
 * pairs within the threshold plus those within 2 err_i of it): 3d double
 * FLOPs and a base row read. Memory: 12 bytes per pair kept (key + index),
 * up to twice that while a list grows by doubling.
 *
 * range_begin keeps a pointer to the query rows; they must stay valid and
 * unchanged until range_end. Base rows are only used inside range_add.
 */
#include "cpu_backend_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../metric.h"
#include "../topk.h"

#define LIST_MIN 16     /* first allocation of a row's list */

typedef struct range_row {
	float *key;
	int64_t *idx;
	int64_t n, cap;
} range_row;

struct cpu_range {
	int64_t alloc;     /* rows of rows[] (and of c->qq, qnorm, qhat) */
	range_row *rows;
	int64_t qrows;
	int active;        /* between range_begin and range_end */
	int ended;         /* range_end sorted the lists */
};

static void rows_clear(struct cpu_range *r, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		free(r->rows[i].key);
		free(r->rows[i].idx);
		memset(&r->rows[i], 0, sizeof(r->rows[i]));
	}
}

void cpu_range_free(cpu_backend *c)
{
	struct cpu_range *r = c->range;

	if (!r)
		return;
	rows_clear(r, r->alloc);
	free(r->rows);
	free(r);
	c->range = NULL;
}

/*
 * Query state: the canonical and float norms and the normalised copy the
 * tiles read (c->qq, c->qnorm, c->qhat, shared with top-k; a run does
 * one or the other) and one list per row.
 */
static int range_reserve(cpu_backend *c, int64_t rows, xj_status *st)
{
	struct cpu_range *r = c->range;
	int64_t d = c->cfg.d;
	int cosine = c->cfg.metric == XJ_METRIC_COSINE;

	if (!r && !(r = c->range = calloc(1, sizeof(*r))))
		return cpu_oom(st, "the range state", (int64_t)sizeof(*r));
	rows_clear(r, r->alloc);
	if (rows <= r->alloc && c->qq)
		return XJ_OK;
	if (!cpu_size_ok(rows, 8 * d + 64))
		return xj_fail(st, XJ_EXIT_RESOURCE, "cpu backend: %lld query "
			       "rows: range state too large", (long long)rows);
	cpu_free_query(c);
	free(r->rows);
	r->alloc = 0;
	r->rows = calloc((size_t)(rows > 0 ? rows : 1), sizeof(range_row));
	c->qq = malloc((size_t)(rows > 0 ? rows : 1) * sizeof(double));
	c->qnorm = malloc((size_t)(rows > 0 ? rows : 1) * sizeof(float));
	c->qhat = cosine ? cpu_alloc_aligned((size_t)(rows * d) *
					     sizeof(float)) : NULL;
	if (!r->rows || !c->qq || !c->qnorm || (cosine && !c->qhat)) {
		cpu_free_query(c);
		free(r->rows);
		r->rows = NULL;
		return cpu_oom(st, "the range query state",
			       rows * (int64_t)(sizeof(range_row) + 12 +
						(cosine ? 4 * d : 0)));
	}
	r->alloc = rows;
	return XJ_OK;
}

int cpu_range_begin(xj_backend *be, const xj_rows *q, xj_status *st)
{
	cpu_backend *c = cpu_of(be);

	if (!c->cfg.has_threshold)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "cpu backend: range join without a threshold");
	if (cpu_check_rows_arg(c, q, "query", st) ||
	    range_reserve(c, q->rows, st) || cpu_query_prepare(c, q, st) ||
	    cpu_query_pack(c, q, st))
		return st->code;
	c->qx = q->x;
	c->qrows = q->rows;
	c->qfirst = q->first_row;
	c->qtag = 0;   /* not a top-k stream to continue */
	c->range->qrows = q->rows;
	c->range->active = 1;
	c->range->ended = 0;
	return XJ_OK;
}

/* Append (key, gj) to a row's list; 0 when memory ran out. */
static int row_push(range_row *w, float key, int64_t gj)
{
	if (w->n == w->cap) {
		int64_t cap = w->cap ? 2 * w->cap : LIST_MIN;
		float *k = realloc(w->key, (size_t)cap * sizeof(float));
		int64_t *x;

		if (!k)
			return 0;
		w->key = k;
		x = realloc(w->idx, (size_t)cap * sizeof(int64_t));
		if (!x)
			return 0;
		w->idx = x;
		w->cap = cap;
	}
	w->key[w->n] = key;
	w->idx[w->n++] = gj;
	return 1;
}

/*
 * Row i of the tile g (columns j0 .. j0 + nb of the chunk): rescore
 * every element under the row's scan threshold, keep those within the
 * threshold key. Returns 0 when memory ran out.
 */
static int scan_row(cpu_backend *c, int64_t i, const float *g, int64_t j0,
		    int64_t nb, const xj_rows *b, double gate)
{
	const xj_backend_cfg *cfg = &c->cfg;
	double acc[MW];
	float thr = cpu_row_thr(c, i, j0 / TB, gate);
	range_row *w = &c->range->rows[i];
	int64_t self = cfg->self ? c->qfirst + i - b->first_row : -1;
	int64_t qo[MW], bo[MW], bj[MW], n = 0, d = cfg->d;

	/* blocks of SCAN_W compared at once (few hold a candidate), their
	 * hits gathered MW at a time and rescored in lanes */
	for (int64_t j = 0; j < nb || n > 0; j += SCAN_W) {
		uint32_t hits = 0;

		j = j < nb ? cpu_scan_block(g, thr, j, nb) : nb;
		if (j + SCAN_W <= nb)
			hits = cpu_scan_hits(g + j, thr);
		else
			for (int64_t x = j; x < nb; x++)
				hits |= (uint32_t)(g[x] <= thr) << (x - j);
		while (hits || (j >= nb && n > 0)) {
			if (hits) {
				int64_t x = j + __builtin_ctz(hits);

				hits &= hits - 1;
				if (j0 + x == self)
					continue;
				qo[n] = i * d;
				bo[n] = (j0 + x) * d;
				bj[n++] = j0 + x;
				if (n < MW)
					continue;
			}
			/* a batch of MW candidates, or the row's last ones */
			cpu_pairs_acc(cfg->metric, c->qx, qo, b->x, bo, n, d,
				      acc);
			for (int64_t l = 0; l < n; l++) {
				float key = lanes_key(cfg->metric, acc[l],
						      c->qq[i], c->bb[bj[l]]);

				if (key <= cfg->threshold_key &&
				    !row_push(w, key, b->first_row + bj[l]))
					return 0;
			}
			n = 0;
		}
	}
	return 1;
}

/* One thread's query tile [i0, i1) against the whole base chunk. */
static int tile_run(cpu_backend *c, cpu_thread *t, int64_t i0, int64_t i1,
		    const xj_rows *b, xj_status *st)
{
	int64_t pairs = 0;

	for (int64_t j0 = 0; j0 < b->rows; j0 += TB) {
		int64_t nb;

		if (cpu_subtile_gemm(c, t, i0, i1, b, j0, &nb, st))
			return st->code;
		for (int64_t i = i0; i < i1; i++)
			if (!scan_row(c, i, t->g + (i - i0) * nb, j0, nb, b,
				      c->gate0))
				goto oom;
	}
	return XJ_OK;
oom:
	for (int64_t i = i0; i < i1; i++)
		pairs += c->range->rows[i].n;
	return cpu_oom(st, "the pairs within the threshold", 2 * 12 * pairs);
}

int cpu_range_add(xj_backend *be, const xj_rows *b, xj_status *st)
{
	cpu_backend *c = cpu_of(be);

	if (!c->range || !c->range->active)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "cpu backend: range_add before range_begin");
	if (cpu_base_prepare(c, b, st) || b->rows == 0 || c->qrows == 0)
		return st->code;
	return cpu_tiles_run(c, b, tile_run, st);
}

int cpu_range_end(xj_backend *be, int64_t *count, xj_status *st)
{
	cpu_backend *c = cpu_of(be);
	struct cpu_range *r = c->range;

	if (!r || !r->active)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "cpu backend: range_end before range_begin");
#pragma omp parallel for schedule(dynamic, 16) num_threads(c->threads)
	for (int64_t i = 0; i < r->qrows; i++)
		topk_sort(r->rows[i].key, r->rows[i].idx, r->rows[i].n);
	for (int64_t i = 0; i < r->qrows; i++)
		count[i] = r->rows[i].n;
	r->active = 0;
	r->ended = 1;
	c->qx = NULL;
	return XJ_OK;
}

int cpu_range_take(xj_backend *be, int64_t *idx, float *val, xj_status *st)
{
	cpu_backend *c = cpu_of(be);
	struct cpu_range *r = c->range;
	xj_metric m = c->cfg.metric;
	int64_t at = 0;

	if (!r || !r->ended)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "cpu backend: range_take before range_end");
	for (int64_t i = 0; i < r->qrows; i++) {
		const range_row *w = &r->rows[i];

		memcpy(idx + at, w->idx, (size_t)w->n * sizeof(int64_t));
		for (int64_t p = 0; p < w->n; p++)
			val[at + p] = metric_key_to_value(m, w->key[p]);
		at += w->n;
	}
	return XJ_OK;
}
