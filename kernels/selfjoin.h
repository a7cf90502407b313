/*
 * selfjoin.h: the geometry of a self-join's topk_add, shared by the CPU
 * (cpu_topk_sym.c) and CUDA (cuda/topk_cuda.cu) backends, so that both cut
 * a chunk's shared rows into the same blocks and deal the same pairs to
 * the parts of a split self-join (docs/design.md, "Self-joins").
 *
 * defines: SYM_BLOCK, SYM_MIN_ROWS, sym_shared, sym_block_count,
 *          sym_block_of, sym_round_pair, sym_pair_mine, sym_diag_mine,
 *          sym_plain_rows, sym_plain_rows_of
 *
 * A base chunk B (chunk rows 0 .. brows) and the query chunk Q share the
 * global indices [g0, g1); when those are the same rows (the backend
 * compares them) and there are at least SYM_MIN_ROWS of them, the shared
 * rows, chunk rows [b0, b0 + len), are cut into blocks of at most
 * SYM_BLOCK rows that do not cross a multiple of SYM_BLOCK (chunk rows):
 * each block then lies inside one of the backends' base sub-tiles (the
 * CPU's TB, the CUDA backend's XJ_CUDA_TB, both multiples of SYM_BLOCK),
 * whose largest norm bounds the scan's error. Block pair (x, y), x < y,
 * is part (x nblk + y) mod parts's, diagonal block x part x mod parts's,
 * and the other pairs (the plain ones) are split by query row
 * (split_block): a deal that depends on the chunk only, never on a
 * backend, thread count or device, so every pair is scored on exactly
 * one rank whatever each rank runs.
 *
 * Pure functions, host C (static inline: the CUDA module compiles them
 * into its own objects); no MPI.
 */
#ifndef XJ_SELFJOIN_H
#define XJ_SELFJOIN_H

#include <stdint.h>

#include "../config/split.h"

/* Rows per block: the CPU's TB (its sgemm sub-tile) and the CUDA
 * backend's XJ_CUDA_TQ (its tile's query rows, the most one scan
 * takes); both backends check that at compile time. */
#define SYM_BLOCK 512
/* Fewer shared rows than this take the plain path: on the CPU the
 * tournament's barriers cost more than the GEMM saved. app/plan/plan.c's
 * SPLIT_MIN_ROWS is the same number. */
#define SYM_MIN_ROWS (2 * SYM_BLOCK)

/* Global indices [*g0, *g1) of both the query chunk (qfirst, qrows) and
 * the base chunk (bfirst, brows); *g1 <= *g0 when none. */
static inline void sym_shared(int64_t qfirst, int64_t qrows, int64_t bfirst,
			      int64_t brows, int64_t *g0, int64_t *g1)
{
	int64_t qe = qfirst + qrows, be = bfirst + brows;

	*g0 = bfirst > qfirst ? bfirst : qfirst;
	*g1 = be < qe ? be : qe;
}

static inline int64_t sym_block_count(int64_t b0, int64_t len)
{
	int64_t first_end = (b0 / SYM_BLOCK + 1) * SYM_BLOCK;

	if (len <= 0)
		return 0;
	if (b0 + len <= first_end)
		return 1;
	return 1 + (b0 + len - first_end + SYM_BLOCK - 1) / SYM_BLOCK;
}

/* Block i of the shared rows [b0, b0 + len): chunk rows [*s, *s + *n). */
static inline void sym_block_of(int64_t b0, int64_t len, int64_t i,
				int64_t *s, int64_t *n)
{
	int64_t first_end = (b0 / SYM_BLOCK + 1) * SYM_BLOCK;
	int64_t end;

	*s = i == 0 ? b0 : first_end + (i - 1) * SYM_BLOCK;
	end = i == 0 ? first_end : *s + SYM_BLOCK;
	*n = (end < b0 + len ? end : b0 + len) - *s;
}

/*
 * Pair p of round r of the round-robin tournament over nb players (nb
 * even, counting a bye, player nb - 1, when the real count is odd): the
 * circle method keeps player nb - 1 fixed and turns the others. Rounds
 * 0 .. nb - 2, pairs 0 .. nb / 2 - 1; every pair of players meets once.
 */
static inline void sym_round_pair(int64_t nb, int64_t r, int64_t p,
				  int64_t *x, int64_t *y)
{
	int64_t turn = nb - 1;

	if (p == 0) {
		*x = nb - 1;
		*y = r;
		return;
	}
	*x = (r + p) % turn;
	*y = (r - p + turn) % turn;
}

/* Whether block pair {x, y} (x != y) of nblk blocks is part's; parts <= 1
 * (no split) owns everything. */
static inline int sym_pair_mine(int64_t x, int64_t y, int64_t nblk,
				int64_t part, int64_t parts)
{
	int64_t lo = x < y ? x : y, hi = x < y ? y : x;

	return parts <= 1 || (lo * nblk + hi) % parts == part;
}

/* Whether diagonal block x is part's. */
static inline int sym_diag_mine(int64_t x, int64_t part, int64_t parts)
{
	return parts <= 1 || x % parts == part;
}

/*
 * The query rows a part scores against the plain part of B (every chunk
 * row outside the shared rows), in three segments of query-chunk rows:
 * before the shared rows [q0, q1) (against every chunk row), the shared
 * rows (against the chunk rows outside [b0, b0 + len)), after them
 * (every chunk row); each clipped to the part's rows, split_block(qrows,
 * parts, part). Without shared rows q0 = q1 = qrows: all of the part's
 * rows against the whole chunk. tiles: tiles of tq rows over the
 * segments (the CPU's work items).
 */
typedef struct sym_plain_rows {
	int64_t seg[3][2];
	int64_t tq, tiles;
} sym_plain_rows;

static inline void sym_plain_rows_of(sym_plain_rows *pr, int64_t q0,
				     int64_t q1, int64_t qrows, int64_t part,
				     int64_t parts, int64_t tq)
{
	int64_t cut[4] = { 0, q0, q1, qrows };
	int64_t r0 = 0, nr = qrows;

	if (parts > 1)
		split_block(qrows, parts, part, &r0, &nr);
	pr->tq = tq;
	pr->tiles = 0;
	for (int s = 0; s < 3; s++) {
		int64_t a = cut[s] > r0 ? cut[s] : r0;
		int64_t e = cut[s + 1] < r0 + nr ? cut[s + 1] : r0 + nr;

		pr->seg[s][0] = a;
		pr->seg[s][1] = e > a ? e : a;
		pr->tiles += (pr->seg[s][1] - a + tq - 1) / tq;
	}
}

#endif
