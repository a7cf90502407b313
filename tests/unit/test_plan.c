/* test_plan.c: grid choice, balanced blocks, chunk sizes within budget. */
#include <stdint.h>
#include <string.h>

#include "unit.h"
#include "app/plan/plan.h"

static plan_in topk_in(int64_t n, int64_t m, int p, int64_t budget)
{
	plan_in in = {
		.cmd = XJ_CMD_TOPK, .metric = XJ_METRIC_L2, .n = n, .m = m,
		.d = 128, .k = 10, .nranks = p, .budget_bytes = budget,
		.work_fixed_bytes = 1 << 20, .work_per_qrow_bytes = 1000,
	};
	return in;
}

static void test_block_covers(void)
{
	for (int64_t total = 0; total < 40; total++) {
		for (int64_t parts = 1; parts < 9; parts++) {
			int64_t next = 0, s, c, lo = INT64_MAX, hi = 0;

			for (int64_t i = 0; i < parts; i++) {
				split_block(total, parts, i, &s, &c);
				CU_ASSERT_EQUAL(s, next);
				next = s + c;
				lo = c < lo ? c : lo;
				hi = c > hi ? c : hi;
			}
			CU_ASSERT_EQUAL(next, total);
			CU_ASSERT(hi - lo <= 1);
		}
	}
}

static void test_grid_follows_shape(void)
{
	plan p;
	xj_status st;
	plan_in in = topk_in(10000, 100000, 4, INT64_C(1) << 32);

	xj_ok(&st);
	CU_ASSERT_EQUAL(plan_make(&in, &p, &st), XJ_OK);
	CU_ASSERT_EQUAL(p.pr, 1);           /* 10k + 25k beats 5k + 50k */
	CU_ASSERT_EQUAL(p.pc, 4);
	in = topk_in(100000, 10000, 4, INT64_C(1) << 32);
	CU_ASSERT_EQUAL(plan_make(&in, &p, &st), XJ_OK);
	CU_ASSERT_EQUAL(p.pr, 4);
	CU_ASSERT_EQUAL(p.pc, 1);
	in = topk_in(50000, 50000, 4, INT64_C(1) << 32);
	CU_ASSERT_EQUAL(plan_make(&in, &p, &st), XJ_OK);
	CU_ASSERT_EQUAL(p.pr, 2);           /* square: 2 x 2 */
	CU_ASSERT_EQUAL(p.pc, 2);
	in = topk_in(1000, 1000, 7, INT64_C(1) << 32);   /* prime */
	CU_ASSERT_EQUAL(plan_make(&in, &p, &st), XJ_OK);
	CU_ASSERT_EQUAL(p.pr * p.pc, 7);
}

/* Self-join: one rank grows the base chunk to the query chunk (or, where
 * the backend scores pairs once across base chunks, keeps the query chunk
 * whole); several ranks split the set (1 x P, the whole base each) when
 * it fits one query chunk, and keep the ordinary grid when it does not. */
static void test_self_join(void)
{
	plan p;
	plan_rank_view v;
	xj_status st;
	plan_in in = topk_in(100000, 100000, 1, INT64_C(1) << 32);

	xj_ok(&st);
	in.self_join = 1;
	CU_ASSERT_EQUAL(plan_make(&in, &p, &st), XJ_OK);
	CU_ASSERT_EQUAL(p.qchunk_rows, 100000);
	CU_ASSERT_EQUAL(p.bchunk_rows, 100000);
	CU_ASSERT_EQUAL(p.split, 0);
	in = topk_in(50000, 50000, 4, INT64_C(1) << 32);
	in.self_join = 1;
	CU_ASSERT_EQUAL(plan_make(&in, &p, &st), XJ_OK);
	CU_ASSERT_EQUAL(p.split, 1);
	CU_ASSERT_EQUAL(p.pr, 1);
	CU_ASSERT_EQUAL(p.pc, 4);
	CU_ASSERT_EQUAL(p.qchunk_rows, 50000);
	CU_ASSERT(p.peak_bytes <= in.budget_bytes);
	plan_rank(&in, &p, 3, &v);
	CU_ASSERT(v.q0 == 0 && v.qrows == 50000 && v.b0 == 0 &&
		  v.brows == 50000);
	/* 64 MiB cannot hold 50k query rows: the ordinary 2 x 2 grid */
	in.budget_bytes = INT64_C(64) << 20;
	CU_ASSERT_EQUAL(plan_make(&in, &p, &st), XJ_OK);
	CU_ASSERT_EQUAL(p.split, 0);
	CU_ASSERT_EQUAL(p.pr, 2);
	CU_ASSERT(p.peak_bytes <= in.budget_bytes);
	/* pairs once across base chunks (the CPU): the query chunk as large
	 * as it fits, the base chunks a plain top-k's */
	in = topk_in(300000, 300000, 1, INT64_C(1) << 32);
	in.self_join = 1;
	in.self_cross = 1;
	CU_ASSERT_EQUAL(plan_make(&in, &p, &st), XJ_OK);
	CU_ASSERT_EQUAL(p.qchunk_rows, 300000);
	CU_ASSERT_EQUAL(p.bchunk_rows, 16384);
	CU_ASSERT(p.peak_bytes <= in.budget_bytes);
	in.self_cross = 0;     /* the GPU: a multiple of the base chunk */
	CU_ASSERT_EQUAL(plan_make(&in, &p, &st), XJ_OK);
	CU_ASSERT_EQUAL(p.bchunk_rows, 131072);
	CU_ASSERT_EQUAL(p.qchunk_rows % p.bchunk_rows, 0);
}

static void test_budget_respected(void)
{
	plan_in in = topk_in(1000000, 1000000, 2, INT64_C(64) << 20);
	plan p;
	xj_status st;

	xj_ok(&st);
	CU_ASSERT_EQUAL(plan_make(&in, &p, &st), XJ_OK);
	CU_ASSERT(p.peak_bytes <= in.budget_bytes);
	CU_ASSERT(p.qchunk_rows >= 1 && p.bchunk_rows >= 1);
	CU_ASSERT(p.qrounds * p.qchunk_rows >= p.qblock_max);
	CU_ASSERT(p.brounds * p.bchunk_rows >= p.bshard_max);

	in.cmd = XJ_CMD_MATRIX;
	in.k = 0;
	CU_ASSERT_EQUAL(plan_make(&in, &p, &st), XJ_OK);
	CU_ASSERT(p.peak_bytes <= in.budget_bytes);
	CU_ASSERT(p.qchunk_rows * p.bchunk_rows * 4 <= in.budget_bytes);
}

/* range: rows whole on a rank (P x 1); a chunk whose every row matched
 * every base row still fits; the round robin covers every chunk. */
static void test_range(void)
{
	plan_in in = topk_in(100000, 1000000, 4, INT64_C(1) << 30);
	plan p;
	xj_status st;

	in.cmd = XJ_CMD_RANGE;
	in.k = 0;
	xj_ok(&st);
	CU_ASSERT_EQUAL(plan_make(&in, &p, &st), XJ_OK);
	CU_ASSERT(p.pr == 4 && p.pc == 1);
	CU_ASSERT(p.peak_bytes <= in.budget_bytes);
	CU_ASSERT(p.qchunk_rows * in.m * PLAN_RANGE_PAIR_BYTES <=
		  in.budget_bytes);
	CU_ASSERT(p.qrounds * 4 * p.qchunk_rows >= in.n);
	CU_ASSERT((p.qrounds - 1) * 4 * p.qchunk_rows < in.n);
	in.budget_bytes = in.m * PLAN_RANGE_PAIR_BYTES;   /* not one row */
	CU_ASSERT_EQUAL(plan_make(&in, &p, &st), XJ_EXIT_RESOURCE);
}

static void test_budget_too_small(void)
{
	plan_in in = topk_in(1000, 1000, 1, 1000);
	plan p;
	xj_status st;

	xj_ok(&st);
	CU_ASSERT_EQUAL(plan_make(&in, &p, &st), XJ_EXIT_RESOURCE);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "--mem-limit"));
}

static void test_forced_chunks(void)
{
	plan_in in = topk_in(100, 50, 3, INT64_C(1) << 30);
	plan p;
	plan_rank_view v;
	xj_status st;
	int64_t qsum = 0, bsum = 0;

	xj_ok(&st);
	in.chunk_rows = 7;
	CU_ASSERT_EQUAL(plan_make(&in, &p, &st), XJ_OK);
	CU_ASSERT_EQUAL(p.qchunk_rows, 7);
	CU_ASSERT_EQUAL(p.bchunk_rows, 7);
	for (int r = 0; r < 3; r++) {
		plan_rank(&in, &p, r, &v);
		CU_ASSERT(v.nqchunks <= p.qrounds);
		CU_ASSERT(v.nbchunks <= p.brounds);
		if (v.col == 0)
			qsum += v.qrows;
		if (v.row == 0)
			bsum += v.brows;
	}
	CU_ASSERT_EQUAL(qsum, 100);
	CU_ASSERT_EQUAL(bsum, 50);
}

/* A matrix's chunk columns: the base chunk, unless the last chunk
 * column would pad the width by more than 1/16 */
static void test_matrix_chunk_cols(void)
{
	CU_ASSERT_EQUAL(plan_matrix_chunk_cols(4096, 4096), 0);
	CU_ASSERT_EQUAL(plan_matrix_chunk_cols(100, 4096), 0);
	CU_ASSERT_EQUAL(plan_matrix_chunk_cols(8192, 4096), 4096);
	CU_ASSERT_EQUAL(plan_matrix_chunk_cols(4200, 4096), 0);
	CU_ASSERT_EQUAL(plan_matrix_chunk_cols(1000000, 4096), 4096);
	/* 17 x 4096 - 69629 = 3; 16 x 4096 + 1 pads 4095 <= its 1/16 */
	CU_ASSERT_EQUAL(plan_matrix_chunk_cols(69629, 4096), 4096);
	CU_ASSERT_EQUAL(plan_matrix_chunk_cols(16 * 4096 + 1, 4096), 4096);
	CU_ASSERT_EQUAL(plan_matrix_chunk_cols(2 * 4096 + 1, 4096), 0);
	CU_ASSERT_EQUAL(plan_matrix_chunk_cols(10, 3), 0);
	CU_ASSERT_EQUAL(plan_matrix_chunk_cols(33, 3), 3);
	CU_ASSERT_EQUAL(plan_matrix_chunk_cols(10, 0), 0);
}

/* Shares of one grid dimension: contiguous, covering total, each
 * starting on a multiple of align (when set), at most max rows and at
 * most one unit (align, else 1) above the even split's largest. */
static void check_shares(const plan_in *in, const plan *p, int rows,
			 int64_t total, int64_t align, int64_t max)
{
	int64_t next = 0, hi = 0;
	int parts = rows ? p->pr : p->pc;

	for (int i = 0; i < parts; i++) {
		plan_rank_view v;
		int64_t s, c;

		plan_rank(in, p, rows ? i * p->pc : i, &v);
		s = rows ? v.q0 : v.b0;
		c = rows ? v.qrows : v.brows;
		CU_ASSERT_EQUAL(s, next);
		CU_ASSERT(align < 1 || s % align == 0);
		CU_ASSERT(c <= max);
		CU_ASSERT(v.nqchunks <= p->qrounds && v.nbchunks <= p->brounds);
		next = s + c;
		hi = c > hi ? c : hi;
	}
	CU_ASSERT_EQUAL(next, total);
	CU_ASSERT(hi <= (total + parts - 1) / parts + (align > 0 ? align : 1));
}

/* A matrix on several ranks splits in whole units of the file's chunks:
 * 1024 columns, the query chunk (evened out) of rows; a base chunk that
 * is no multiple of 1024 is the unit itself; too few units for the ranks
 * keep the even split. */
static void test_matrix_aligned(void)
{
	static const int64_t shapes[][3] = {  /* n, m, ranks */
		{ 5000, 40000, 2 }, { 5000, 40000, 3 }, { 5000, 100000, 7 },
		{ 40001, 8192, 2 }, { 50001, 3000, 3 }, { 300000, 300000, 4 },
		{ 100, 2000, 2 }, { 100, 2000, 3 }, { 7, 5, 4 },
	};

	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		plan_in in = topk_in(shapes[i][0], shapes[i][1],
				     (int)shapes[i][2], INT64_C(1) << 32);
		plan p;
		xj_status st;

		xj_ok(&st);
		in.cmd = XJ_CMD_MATRIX;
		in.k = 0;
		in.out_blocks = 2;
		CU_ASSERT_EQUAL_FATAL(plan_make(&in, &p, &st), XJ_OK);
		CU_ASSERT(p.balign == 0 || p.bchunk_rows % p.balign == 0);
		CU_ASSERT(p.qalign == 0 || p.qalign == p.qchunk_rows);
		CU_ASSERT(p.qrounds * p.qchunk_rows >= p.qblock_max);
		CU_ASSERT(p.brounds * p.bchunk_rows >= p.bshard_max);
		check_shares(&in, &p, 1, in.n, p.qalign, p.qblock_max);
		check_shares(&in, &p, 0, in.m, p.balign, p.bshard_max);
	}
	/* 1 x 2: 40 units of 1024 columns, 20 each */
	{
		plan_in in = topk_in(5000, 40000, 2, INT64_C(1) << 32);
		plan p;
		plan_rank_view v;
		xj_status st;

		xj_ok(&st);
		in.cmd = XJ_CMD_MATRIX;
		in.k = 0;
		CU_ASSERT_EQUAL_FATAL(plan_make(&in, &p, &st), XJ_OK);
		CU_ASSERT_EQUAL(p.balign, 1024);
		plan_rank(&in, &p, 1, &v);
		CU_ASSERT_EQUAL(v.b0, 20480);
		CU_ASSERT_EQUAL(v.brows, 19520);
		/* one rank: the even split, no unit */
		in.nranks = 1;
		CU_ASSERT_EQUAL_FATAL(plan_make(&in, &p, &st), XJ_OK);
		CU_ASSERT(p.balign == 0 && p.qalign == 0);
	}
}

static void test_more_ranks_than_rows(void)
{
	plan_in in = topk_in(3, 2, 8, INT64_C(1) << 30);
	plan p;
	plan_rank_view v;
	xj_status st;
	int64_t qsum = 0, bsum = 0;

	xj_ok(&st);
	CU_ASSERT_EQUAL(plan_make(&in, &p, &st), XJ_OK);
	for (int r = 0; r < 8; r++) {
		plan_rank(&in, &p, r, &v);
		if (v.col == 0)
			qsum += v.qrows;
		if (v.row == 0)
			bsum += v.brows;
		CU_ASSERT(v.qrows >= 0 && v.brows >= 0);
	}
	CU_ASSERT_EQUAL(qsum, 3);
	CU_ASSERT_EQUAL(bsum, 2);
}

int main(void)
{
	static const unit_test tests[] = {
		{ "balanced blocks cover rows", test_block_covers },
		{ "grid follows n/m", test_grid_follows_shape },
		{ "self-join chunks and split", test_self_join },
		{ "peak within budget", test_budget_respected },
		{ "budget too small", test_budget_too_small },
		{ "range: P x 1, pairs bounded", test_range },
		{ "forced chunks", test_forced_chunks },
		{ "more ranks than rows", test_more_ranks_than_rows },
		{ "matrix chunk columns", test_matrix_chunk_cols },
		{ "matrix shares in whole chunks", test_matrix_aligned },
	};

	return unit_run("plan", tests, UNIT_COUNT(tests));
}
