/*
 * cpu_topk_sym.c: top-k of a self-join on the CPU backend: the rows that
 * a base chunk shares with the query chunk are joined with each other,
 * and with the query rows that later chunks bring, once per pair of
 * tiles instead of twice.
 *
 * When queries and base are the same rows (one file's one dataset on both
 * sides: cfg.same_rows) and pairs (i, i) are skipped (cfg.self),
 * score(i, j) and score(j, i) come from the same dot product. (A --self
 * over two copies of a file takes the plain path: the benchmark's and the
 * tests' baseline.) For a base chunk B whose rows [b0, b0 + len) are also
 * rows of the query chunk Q (same global index, and same bits: checked
 * here, it costs a memcmp of the rows), cut those rows into blocks
 * that do not cross a multiple of TB (the sub-tiles of submax):
 *
 *   D = alpha X_a X_b^T                    one GEMM per block pair a < b
 *   row tile    D[r][c] + C_b[c]           queries of block a, base rows of b
 *   column tile D[r][c] + C_a[r], transposed  queries of block b, base rows of a
 *
 * with alpha and C as in cpu_topk.c (l2 family: -2 and the float squared
 * norms; cosine: -1 and 1 on the normalised rows; ip: -1 and none). Each
 * tile value is the float dot product, scaled exactly, plus one float
 * addition: the computation metric_err_bound() bounds, whichever side
 * is the query. In bf16 and int8 the GEMM reads the chunk's rounded rows
 * (both blocks are rows of it, rounded as the query chunk's same rows
 * are) and the bound is metric_err_bound_rows(), symmetric in the two
 * rows' norms and rounding errors, so it too holds whichever side is
 * the query (int8's scaling by the two rows' steps may round its double
 * product in the other order: within the bound's 2^-50). Both tiles are
 * scanned as the plain path scans its tiles
 * (gate, pending pairs, deferred rescoring): a pair only enters a list
 * through the canonical rescoring of its own query row against its own
 * base row, so the lists are the exact canonical top-k, the same bits as
 * the plain path's, in whatever order the pairs were pushed. The scan
 * reads D once for both sides (cpu_scan_sides: each element plus C_b[c]
 * against its row's threshold and plus C_a[r] against its column's);
 * while a query of the pair has no gate yet, the tiles are built whole
 * (the column tile by a transpose) and scanned by cpu_scan_row_side, which
 * seeds it. Diagonal blocks
 * (a = a) are one plain tile each. Rows of Q outside the shared rows,
 * and the shared rows against B's other rows, run the plain tiles.
 *
 * Parts (cfg.parts > 1, a self-join split over ranks, app/plan/plan.h): every
 * rank gets the same chunks and scores share cfg.part of their pairs:
 * block pair (x, y), x < y, when (x nblk + y) mod parts = part, diagonal
 * block x when x mod parts = part, and the plain
 * pairs of the query rows split_block() gives the part. Each pair is then
 * scored on exactly one rank, and the merge of the parts' lists is the
 * lists of all pairs. The split depends on the chunk only, never on a
 * rank's threads. Without shared rows every pair is a plain one. The
 * blocks, the deal and the plain rows are selfjoin.h's, shared with the
 * CUDA backend.
 *
 * Threads own query rows (cpu_topk.c), and a block pair touches the rows
 * of two blocks, so the blocks are cut into 2T groups (T threads) and the
 * group pairs run in the rounds of a round-robin tournament: in each
 * round every group is in at most one pair, the threads share the
 * round's T pairs, and a barrier ends it; a last round runs each group
 * with itself (its inner pairs and diagonal blocks). 2T barriers in all,
 * not one per block: a thread that the OS deschedules on a busy machine
 * stalls the others at every barrier. Then every row's survivors are
 * rescored.
 *
 * Across chunks (c->cross: one rank's stream of a self-join that is not
 * split into parts, cfg.shard_* known). The shared rows S of each chunk
 * are also joined, as block pairs of the same kind, with the query rows
 * after them that the rank streams as base rows later (partners, [q1,
 * p1): its shard's rows in the query chunk), whose float squared norms,
 * rounded rows and block maxima the query chunk keeps (cpu_topk.c,
 * topk_begin): both lists fed, the partner side's candidates naming query
 * rows (cpu_side: rescored against the query chunk's copy of the row,
 * the same bits as the base chunk's). A row given as a base row earlier
 * in this stream (c->given) has S already and a partner gets it here, so
 * both take only the chunk rows outside S as plain tiles; every other
 * row takes the whole chunk. After chunk c every row has seen the stream's
 * chunks 0 .. c, as on the plain path, so a snapshot between chunks keeps
 * its meaning; its lists may hold pairs past it, which a resumed round
 * (whose rows before its first chunk take plain tiles) meets again, and
 * topk_merge takes such a pair once. Every shared row must go this way
 * (no SYM_MIN_ROWS floor), as its earlier partners hold its pairs. The
 * shared and partner blocks run in rounds: shared group g with partner
 * group (g + r) mod gp in round r, no row in two pairs of a round. GEMM
 * FLOPs of a query chunk of n rows streamed in any base chunks: about n^2
 * d instead of 2 n^2 d.
 *
 * Costs: the GEMM of the shared rows drops from len^2 d to about
 * len^2 d / 2 FLOPs (+ TB len d for the diagonal); the scans stay
 * len^2 compares, in one pass over each off-diagonal tile. (Building the
 * column tile by a transpose, and the row tile by adding C_b in place,
 * then scanning each, cost 8% more of a self-join: docs/performance.md.)
 * The transposed tile of the seeding tiles is a second TB x TB float
 * buffer per thread (1 MiB).
 */
#include "cpu_backend_int.h"

#include <cblas.h>
#include <omp.h>
#include <string.h>

#include "cpu_transpose.h"
#include "../selfjoin.h"

/* the blocks are the CPU's sgemm sub-tiles: one row tile scans inside one
 * TB sub-tile, and the transposed tile fits t->gt (TB x TB) */
_Static_assert(SYM_BLOCK == TB, "self-join blocks are TB rows");

int cpu_sym_overlap(const cpu_backend *c, const xj_rows *b, int64_t *b0,
		    int64_t *len)
{
	int64_t g0, g1, d = c->cfg.d;

	sym_shared(c->qfirst, c->qrows, b->first_row, b->rows, &g0, &g1);
	*b0 = 0;
	*len = 0;
	/* across chunks every shared row must take this path: its earlier
	 * partners have its pairs with them already */
	if (!c->cfg.self || !c->cfg.same_rows ||
	    g1 - g0 < (c->cross ? 1 : SYM_MIN_ROWS))
		return 0;
	/* the same indices must be the same rows */
	if (memcmp(c->qx + (g0 - c->qfirst) * d, b->x + (g0 - b->first_row) * d,
		   (size_t)((g1 - g0) * d) * sizeof(float)))
		return c->cross ? -1 : 0;
	*b0 = g0 - b->first_row;
	*len = g1 - g0;
	return 1;
}

/* g[j] += row[j]: the row tile's constant part. */
XJ_CLONES
static void tile_add_row(float *g, const float *row, int64_t n)
{
	for (int64_t j = 0; j < n; j++)
		g[j] += row[j];
}

/* Prune the rows [i0, i1) that gathered enough pending pairs. */
static void rows_prune(cpu_backend *c, int64_t i0, int64_t i1)
{
	for (int64_t i = i0; i < i1; i++)
		if (c->npend[i] - c->nkept[i] >= PRUNE_MIN(c->cfg.k))
			cpu_query_prune(c, i);
}

/*
 * One block of a pair tile: rows r0 .. r0 + n of float rows x (cosine:
 * normalised) and of their rounding low, the constants its values get
 * as the other side's candidates (l2: float squared norms; cosine: ones;
 * ip: none) from cst[0], and its side of the scan.
 */
typedef struct pair_blk {
	const float *x, *cst;
	const cpu_gemm_rows *low;
	int64_t r0, n;
	cpu_side side;
} pair_blk;

/* Rows [s, s + n) of the chunk b (query rows s + off), or with query set
 * of the query chunk (the partners of a chunk's shared rows). */
static pair_blk block_of(const cpu_backend *c, const xj_rows *b, int query,
			 int64_t s, int64_t n, int64_t off)
{
	xj_metric m = c->cfg.metric;
	int l2 = m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN;
	int cosine = m == XJ_METRIC_COSINE;
	const float *n2 = query ? c->qn2 : c->bn2;
	pair_blk k = { query ? (cosine ? c->qhat : c->qx)
			     : (cosine ? c->bhat : b->x),
		       l2 ? n2 + s : cosine ? c->ones : NULL,
		       query ? &c->ql : &c->bl, s, n,
		       { s + off, s, 1, 0, 0 } };

	if (query) {
		k.side = (cpu_side){ s, -1 - s, -1, c->qsubmax[s / TB],
				     c->qsubemax[s / TB] };
	} else {
		k.side.nmax = c->submax[s / TB];
		k.side.emax = c->subemax[s / TB];
	}
	return k;
}

/*
 * Blocks a and e of different rows: one GEMM into t->g (sgemm, or in
 * bf16/int8 oneDNN's on the rounded rows), both sides scanned.
 */
static int blocks_run(cpu_backend *c, cpu_thread *t, const pair_blk *a,
		      const pair_blk *e, const xj_rows *b, xj_status *st)
{
	xj_metric m = c->cfg.metric;
	int64_t d = c->cfg.d, na = a->n, nb = e->n;
	float alpha = m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN ? -2.0f
								       : -1.0f;
	/* int8: the sums scaled as the scan reads them, not in a pass of
	 * their own (5% of an int8 self-join's samples) */
	int sums = c->gemm_pair && c->prec == XJ_PREC_INT8;

	if (sums) {
		if (cpu_gemm_tile_sums(c->gemm_pair, (int)(t - c->th), a->low,
				       a->r0, e->low, e->r0, na, nb, t->g, st))
			return st->code;
	} else if (c->gemm_pair) {
		if (cpu_gemm_tile(c->gemm_pair, (int)(t - c->th), NULL, a->low,
				  a->r0, NULL, e->low, e->r0, na, nb, NULL,
				  t->g, st))
			return st->code;
	} else {
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)na,
			    (int)nb, (int)d, alpha, a->x + a->r0 * d, (int)d,
			    e->x + e->r0 * d, (int)d, 0.0f, t->g, (int)nb);
	}
	t->flops += 2.0 * (double)na * (double)nb * (double)d;
	if (!cpu_scan_sides(c, t, t->g, sums ? a->low->scale + a->r0 : NULL,
			    sums ? e->low->scale + e->r0 : NULL,
			    sums ? cpu_gemm_alpha(c->gemm_pair) : 1.0f,
			    &a->side, na, &e->side, nb, a->cst, e->cst, b)) {
		/* a query without a gate: whole tiles, which seed it */
		if (sums)
			cpu_gemm_scale(c->gemm_pair, a->low, a->r0, e->low,
				       e->r0, na, nb, t->g);
		cpu_transpose(t->g, na, nb, a->cst, t->gt);
		for (int64_t r = 0; e->cst && r < na; r++)
			tile_add_row(t->g + r * nb, e->cst, nb);
		for (int64_t r = 0; r < na; r++)
			cpu_scan_row_side(c, t, a->side.q0 + r, t->g + r * nb,
					  &e->side, nb, b);
		for (int64_t j = 0; j < nb; j++)
			cpu_scan_row_side(c, t, e->side.q0 + j, t->gt + j * na,
					  &a->side, na, b);
	}
	rows_prune(c, a->side.q0, a->side.q0 + na);
	rows_prune(c, e->side.q0, e->side.q0 + nb);
	return XJ_OK;
}

/*
 * The block pairs of groups gx and gy (ng groups of consecutive blocks
 * over the nblk blocks of the shared rows [b0, b0 + len)) that belong to
 * this part: every x in gx with every y in gy, or for gx = gy the pairs
 * x < y inside the group and its diagonal blocks. Pair (x, y), x < y, is
 * part (x nblk + y) mod parts's, diagonal block x part x mod parts's: a
 * deal that depends on the chunk only.
 */
static int group_run(cpu_backend *c, cpu_thread *t, int64_t gx, int64_t gy,
		     int64_t ng, int64_t nblk, int64_t b0, int64_t len,
		     const xj_rows *b, xj_status *st)
{
	int64_t off = b->first_row - c->qfirst;
	int64_t part = c->cfg.parts > 1 ? c->cfg.part : 0;
	int64_t parts = c->cfg.parts > 1 ? c->cfg.parts : 1;
	int64_t y0 = gy * nblk / ng, y1 = (gy + 1) * nblk / ng;

	for (int64_t x = gx * nblk / ng; x < (gx + 1) * nblk / ng; x++) {
		int64_t sx, nx, sy, ny;

		sym_block_of(b0, len, x, &sx, &nx);
		if (gx == gy && sym_diag_mine(x, part, parts) &&
		    cpu_tile_cols(c, t, sx + off, sx + nx + off, sx, sx + nx,
				  b, st))
			return st->code;
		for (int64_t y = gx == gy ? x + 1 : y0; y < y1; y++) {
			pair_blk bx, by;

			if (!sym_pair_mine(x, y, nblk, part, parts))
				continue;
			sym_block_of(b0, len, y, &sy, &ny);
			bx = block_of(c, b, 0, sx, nx, off);
			by = block_of(c, b, 0, sy, ny, off);
			if (blocks_run(c, t, &bx, &by, b, st))
				return st->code;
		}
	}
	return XJ_OK;
}

/* ---- pairs across chunks ------------------------------------------ */

/* Every shared block of group gx (gs groups over nblk) with every partner
 * block of group gy (gp groups over np, query rows read from the query
 * chunk: its float squared norms, rounded rows and block maxima, the
 * same bits as a base chunk's), candidates naming query rows (cpu_side):
 * each partner block against the group's shared blocks in turn, so that
 * the partner rows (up to the whole query chunk) are read once a chunk
 * and the shared ones stay in the cache. */
static int cross_group(cpu_backend *c, cpu_thread *t, int64_t gx, int64_t gs,
		       int64_t nblk, int64_t b0, int64_t len, int64_t gy,
		       int64_t gp, int64_t np, int64_t p0, int64_t p1,
		       const xj_rows *b, xj_status *st)
{
	int64_t off = b->first_row - c->qfirst;

	for (int64_t y = gy * np / gp; y < (gy + 1) * np / gp; y++) {
		int64_t sy, ny;
		pair_blk bx, by;

		sym_block_of(p0, p1 - p0, y, &sy, &ny);
		by = block_of(c, b, 1, sy, ny, 0);
		for (int64_t x = gx * nblk / gs; x < (gx + 1) * nblk / gs;
		     x++) {
			int64_t sx, nx;

			sym_block_of(b0, len, x, &sx, &nx);
			bx = block_of(c, b, 0, sx, nx, off);
			if (blocks_run(c, t, &bx, &by, b, st))
				return st->code;
		}
	}
	return XJ_OK;
}

/* Whether query row i has this chunk's shared rows already or gets them
 * here: itself shared ([q0, q1)), given as a base row earlier in the
 * stream, or a partner ([q1, p1)). */
static int has_shared(const cpu_backend *c, int64_t i, int64_t q0, int64_t p1)
{
	return (i >= q0 && i < p1) || c->given[i];
}

/* Query tile it (tq rows) against the chunk when the pairs across chunks
 * run: a row that has_shared takes the chunk rows outside [b0, b0 +
 * len), any other row all of them. */
static int plain_tile_cross(cpu_backend *c, cpu_thread *t, int64_t it,
			    int64_t tq, int64_t q0, int64_t p1, int64_t b0,
			    int64_t len, const xj_rows *b, xj_status *st)
{
	int64_t i0 = it * tq, end = i0 + tq < c->qrows ? i0 + tq : c->qrows;

	while (i0 < end) {
		int out = has_shared(c, i0, q0, p1);
		int64_t i1 = i0 + 1;

		while (i1 < end && has_shared(c, i1, q0, p1) == out)
			i1++;
		if (!out) {
			if (cpu_tile_cols(c, t, i0, i1, 0, b->rows, b, st))
				return st->code;
		} else if (cpu_tile_cols(c, t, i0, i1, 0, b0, b, st) ||
			   cpu_tile_cols(c, t, i0, i1, b0 + len, b->rows, b,
					 st)) {
			return st->code;
		}
		i0 = i1;
	}
	return XJ_OK;
}

/* Tile it of those rows against the plain part of B. */
static int plain_tile(cpu_backend *c, cpu_thread *t, int64_t it,
		      const sym_plain_rows *pr, int64_t b0, int64_t len,
		      const xj_rows *b, xj_status *st)
{
	int64_t tq = pr->tq;

	for (int s = 0; s < 3; s++) {
		const int64_t *seg = pr->seg[s];
		int64_t n = (seg[1] - seg[0] + tq - 1) / tq;
		int64_t i0 = seg[0] + it * tq, i1;

		if (it >= n) {
			it -= n;
			continue;
		}
		i1 = i0 + tq < seg[1] ? i0 + tq : seg[1];
		if (s != 1)
			return cpu_tile_cols(c, t, i0, i1, 0, b->rows, b, st);
		if (cpu_tile_cols(c, t, i0, i1, 0, b0, b, st))
			return st->code;
		return cpu_tile_cols(c, t, i0, i1, b0 + len, b->rows, b, st);
	}
	return XJ_OK;
}

/* The first failure of the threads' steps becomes the call's status; the
 * steps after it are skipped. */
static void note_failure(int rc, const xj_status *tst, int *failed,
			 xj_status *st)
{
	if (rc == XJ_OK)
		return;
#pragma omp critical(cpu_sym_fail)
	if (!*failed) {
		*st = *tst;
#pragma omp atomic write
		*failed = 1;
	}
}

int cpu_sym_add(cpu_backend *c, const xj_rows *b, int64_t b0, int64_t len,
		xj_status *st)
{
	int64_t off = b->first_row - c->qfirst;
	int64_t q0 = len ? b0 + off : c->qrows, q1 = q0 + len;
	int64_t tq = cpu_tile_rows(c->qrows, c->threads);
	int64_t nfin = (c->qrows + tq - 1) / tq;
	int64_t nblk = sym_block_count(b0, len);
	int64_t ng = nblk < 2 * c->threads ? nblk : 2 * c->threads;
	int64_t ngb = ng + (ng & 1);    /* with the bye */
	int64_t part = c->cfg.parts > 1 ? c->cfg.part : 0;
	int64_t parts = c->cfg.parts > 1 ? c->cfg.parts : 1;
	int64_t p1 = q1, np = 0, gs = 0, gp = 0;
	sym_plain_rows pr;
	double flops = 0, rescored = 0, rescore_s = 0;
	int team, failed = 0;

	team = nfin > 1 &&
	       (double)c->qrows * b->rows * c->cfg.d >= PAR_MIN_ELEMS * 4.0;
	/* the plain pairs split by query row, the block pairs and diagonal
	 * blocks dealt in turn: the same on every rank, whatever its threads */
	sym_plain_rows_of(&pr, q0, q1, c->qrows, part, parts, tq);
	if (c->cross && len) {
		/* partners: the query rows after the shared ones that this
		 * rank's stream gives as base rows later */
		int64_t end = c->cfg.shard_first + c->cfg.shard_rows -
			      c->qfirst;

		p1 = end < c->qrows ? end : c->qrows;
		p1 = p1 > q1 ? p1 : q1;
		np = sym_block_count(q1, p1 - q1);
		/* gs <= gp: a round's partner groups are distinct */
		gs = nblk < c->threads ? nblk : c->threads;
		gs = np < gs ? np : gs;
		gp = np < 2 * c->threads ? np : 2 * c->threads;
		pr.tiles = nfin;
	}

#pragma omp parallel num_threads(c->threads) \
	reduction(+ : flops, rescored, rescore_s) if (team)
	{
		cpu_thread *t = &c->th[omp_get_thread_num()];
		xj_status tst = { 0 };
		int bad;

		t->flops = 0;
		t->rescored = 0;
		t->rescore_s = 0;
#pragma omp for schedule(dynamic, 1)
		for (int64_t it = 0; it < pr.tiles; it++) {
#pragma omp atomic read
			bad = failed;
			if (!bad)
				note_failure(c->cross ?
					     plain_tile_cross(c, t, it, tq, q0,
							      p1, b0, len, b,
							      &tst) :
					     plain_tile(c, t, it, &pr, b0, len,
							b, &tst),
					     &tst, &failed, st);
		}
		for (int64_t r = 0; r < ngb - 1; r++) {
#pragma omp for schedule(dynamic, 1)
			for (int64_t p = 0; p < ngb / 2; p++) {
				int64_t gx, gy;

				sym_round_pair(ngb, r, p, &gx, &gy);
#pragma omp atomic read
				bad = failed;
				if (!bad && gx < ng && gy < ng) /* not the bye */
					note_failure(group_run(c, t, gx, gy,
							       ng, nblk, b0,
							       len, b, &tst),
						     &tst, &failed, st);
			}
		}
#pragma omp for schedule(dynamic, 1)
		for (int64_t g = 0; g < ng; g++) {
#pragma omp atomic read
			bad = failed;
			if (!bad)
				note_failure(group_run(c, t, g, g, ng, nblk,
						       b0, len, b, &tst),
					     &tst, &failed, st);
		}
		/* across chunks: round r pairs shared group g with partner
		 * group (g + r) mod gp, so no row is in two pairs at once */
		for (int64_t r = 0; r < gp; r++) {
#pragma omp for schedule(dynamic, 1)
			for (int64_t g = 0; g < gs; g++) {
#pragma omp atomic read
				bad = failed;
				if (!bad)
					note_failure(cross_group(c, t, g, gs,
								 nblk, b0, len,
								 (g + r) % gp,
								 gp, np, q1, p1,
								 b, &tst),
						     &tst, &failed, st);
			}
		}
#pragma omp for schedule(dynamic, 1)
		for (int64_t it = 0; it < nfin; it++) {
			int64_t i0 = it * tq;
			int64_t i1 = i0 + tq < c->qrows ? i0 + tq : c->qrows;

			cpu_tile_finish(c, t, i0, i1, b);
		}
		flops += t->flops;
		rescored += t->rescored;
		rescore_s += t->rescore_s;
	}
	c->be.gemm_flops += flops;
	c->be.rescored_pairs += rescored;
	c->be.rescore_seconds += rescore_s / (team ? c->threads : 1);
	if (c->cross && len)
		memset(c->given + q0, 1, (size_t)len);
	return failed ? st->code : XJ_OK;
}
