/* test_inround.c: the rules of a round that starts from recorded k-lists
 * (app/run/inround.h), and the exactness they rest on: lists over disjoint
 * base rows merge to the lists over their union. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../app/run/inround.h"
#include "../../kernels/backend.h"
#include "../../kernels/metric.h"
#include "../../kernels/topk.h"
#include "testdata.h"
#include "unit.h"

static void add(xj_spans *sp, int64_t a, int64_t b)
{
	xj_status st;

	xj_ok(&st);
	CU_ASSERT_EQUAL_FATAL(spans_add(sp, a, b, &st), XJ_OK);
}

static void expect_piece(const xj_spans *skip, int64_t a, int64_t b,
			 int64_t bc, int64_t p, int64_t r0, int64_t rows)
{
	int64_t g0 = -7, gn = -7;

	inround_piece(skip, a, b, bc, p, &g0, &gn);
	CU_ASSERT_EQUAL(gn, rows);
	if (rows)
		CU_ASSERT_EQUAL(g0, r0);
}

static void test_pieces_plain(void)
{
	xj_spans none = { 0 };

	CU_ASSERT_EQUAL(inround_pieces(&none, 0, 100, 30), 4);
	expect_piece(&none, 0, 100, 30, 0, 0, 30);
	expect_piece(&none, 0, 100, 30, 2, 60, 30);
	expect_piece(&none, 0, 100, 30, 3, 90, 10);
	expect_piece(&none, 0, 100, 30, 4, 0, 0);
	CU_ASSERT_EQUAL(inround_piece_end(&none, 0, 100, 30, 0), 0);
	CU_ASSERT_EQUAL(inround_piece_end(&none, 0, 100, 30, 1), 30);
	CU_ASSERT_EQUAL(inround_piece_end(&none, 0, 100, 30, 4), 100);
	CU_ASSERT_EQUAL(inround_piece_end(&none, 0, 100, 30, 9), 100);
	CU_ASSERT_EQUAL(inround_pieces(&none, 50, 50, 30), 0);
}

/* Shard [100, 200) with rows [0, 120), [150, 160) and [195, 300) folded
 * in already: pieces of at most 20 rows in the gaps, none across one. */
static void test_pieces_skip(void)
{
	xj_spans skip = { 0 };

	add(&skip, 0, 120);
	add(&skip, 150, 160);
	add(&skip, 195, 300);
	CU_ASSERT_EQUAL(inround_pieces(&skip, 100, 200, 20), 4);
	expect_piece(&skip, 100, 200, 20, 0, 120, 20);
	expect_piece(&skip, 100, 200, 20, 1, 140, 10);
	expect_piece(&skip, 100, 200, 20, 2, 160, 20);
	expect_piece(&skip, 100, 200, 20, 3, 180, 15);
	expect_piece(&skip, 100, 200, 20, 4, 0, 0);
	CU_ASSERT_EQUAL(inround_piece_end(&skip, 100, 200, 20, 0), 100);
	CU_ASSERT_EQUAL(inround_piece_end(&skip, 100, 200, 20, 2), 150);
	CU_ASSERT_EQUAL(inround_piece_end(&skip, 100, 200, 20, 3), 180);
	CU_ASSERT_EQUAL(inround_piece_end(&skip, 100, 200, 20, 4), 200);
	/* all of it folded: nothing to stream */
	CU_ASSERT_EQUAL(inround_pieces(&skip, 0, 120, 7), 0);
	CU_ASSERT_EQUAL(inround_piece_end(&skip, 0, 120, 7, 1), 120);
	spans_free(&skip);
}

/* Against a bitmap: the pieces stream every row of the shard not skipped,
 * once, in order, at most bc at a time and never across a skipped row;
 * after p pieces everything before piece_end(p) is folded in. */
static void test_pieces_random(void)
{
	enum { M = 300 };
	static char skipped[M], streamed[M];

	for (int t = 0; t < 400; t++) {
		xj_spans skip = { 0 };
		int64_t a = (int64_t)(rng_next() % M), b, bc, n, last = -1;

		b = a + (int64_t)(rng_next() % (M - a + 1));
		bc = 1 + (int64_t)(rng_next() % 40);
		memset(skipped, 0, sizeof(skipped));
		memset(streamed, 0, sizeof(streamed));
		for (int s = (int)(rng_next() % 6); s > 0; s--) {
			int64_t s0 = (int64_t)(rng_next() % M);
			int64_t s1 = s0 + 1 + (int64_t)(rng_next() % 50);

			s1 = s1 > M ? M : s1;
			add(&skip, s0, s1);
			memset(skipped + s0, 1, (size_t)(s1 - s0));
		}
		n = inround_pieces(&skip, a, b, bc);
		for (int64_t p = 0; p < n; p++) {
			int64_t r0, rows, end;

			inround_piece(&skip, a, b, bc, p, &r0, &rows);
			CU_ASSERT_FATAL(rows >= 1 && rows <= bc);
			CU_ASSERT(r0 >= a && r0 + rows <= b && r0 > last);
			for (int64_t r = r0; r < r0 + rows; r++) {
				CU_ASSERT(!skipped[r] && !streamed[r]);
				streamed[r] = 1;
			}
			last = r0 + rows - 1;
			end = inround_piece_end(&skip, a, b, bc, p + 1);
			CU_ASSERT(end == (p + 1 < n ? r0 + rows : b));
			for (int64_t r = a; r < end && p + 1 < n; r++)
				CU_ASSERT(skipped[r] || streamed[r]);
		}
		for (int64_t r = a; r < b; r++)
			CU_ASSERT(skipped[r] || streamed[r]);
		spans_free(&skip);
	}
}

/* A round starts from the snapshot only when every chunk it computes lies
 * inside one span of the snapshot's rows. */
static void test_restores(void)
{
	resume_inround in = { 0 };
	int64_t chunks[3][2] = { { 0, 100 }, { 100, 100 }, { 300, 350 } };

	add(&in.rows, 0, 200);
	add(&in.rows, 300, 400);
	CU_ASSERT_FALSE(inround_restores(&in, chunks, 3));   /* not valid */
	in.valid = 1;
	CU_ASSERT_TRUE(inround_restores(&in, chunks, 3));
	chunks[2][1] = 401;                                  /* past a span */
	CU_ASSERT_FALSE(inround_restores(&in, chunks, 3));
	chunks[2][0] = 150;                                  /* across a gap */
	chunks[2][1] = 350;
	CU_ASSERT_FALSE(inround_restores(&in, chunks, 3));
	chunks[0][1] = 0;                                    /* all empty */
	chunks[2][1] = 150;
	CU_ASSERT_FALSE(inround_restores(&in, chunks, 3));
	chunks[1][0] = 120;                                  /* one left */
	chunks[1][1] = 199;
	CU_ASSERT_TRUE(inround_restores(&in, chunks, 3));
	resume_inround_clear(&in);
}

/* Top-k through the CPU backend of query rows q against base rows
 * [b0, b1) of b (global rows as their index). */
static void backend_topk(const xj_backend_cfg *cfg, const float *q,
			 int64_t n, const float *b, int64_t b0, int64_t b1,
			 float *key, int64_t *idx)
{
	xj_backend *be = NULL;
	xj_rows qr = { q, n, cfg->d, 0, 0 };
	xj_status st;

	xj_ok(&st);
	poison(key, idx, n * cfg->k);
	CU_ASSERT_FATAL(backend_cpu_create(cfg, &be, &st) == XJ_OK);
	CU_ASSERT_FATAL(be->topk_begin(be, &qr, &st) == XJ_OK);
	for (int64_t r = b0; r < b1; r += 37) {
		xj_rows br = { b + r * cfg->d, b1 - r < 37 ? b1 - r : 37,
			       cfg->d, r, 0 };

		CU_ASSERT_FATAL(be->topk_add(be, &br, &st) == XJ_OK);
	}
	CU_ASSERT_FATAL(be->topk_end(be, key, idx, &st) == XJ_OK);
	be->release(be);
}

/*
 * The exactness a resumed round rests on: lists over base rows [0, j)
 * merged with lists over [j, m) are the lists over [0, m), bit for bit,
 * for every metric, with duplicate rows (ties), a threshold and self
 * exclusion (both decided per pair, so they commute with the split).
 */
static void test_split_merge(void)
{
	enum { N = 23, M = 400, D = 9, K = 12 };
	float *b = gauss_rows(M, D, 0.0, 1.0);
	float wk[N * K], ak[N * K], bk[N * K], mk[K];
	int64_t wi[N * K], ai[N * K], bi[N * K], mi[K], valid = 0, pads = 0;

	for (int r = 0; r < M; r += 5)   /* ties: copies of row 1 */
		memcpy(b + r * D, b + D, D * sizeof(float));
	for (size_t mm = 0; mm < UNIT_COUNT(metrics); mm++)
		for (int variant = 0; variant < 3; variant++) {
			xj_backend_cfg cfg = { .metric = metrics[mm], .k = K,
					       .d = D, .threads = 2,
					       .max_query_rows = N,
					       .max_base_rows = 37 };
			int64_t js[] = { 1, 37, 200, 399 };

			cfg.self = variant == 2;
			cfg.has_threshold = variant >= 1;
			cfg.threshold_key = metric_value_to_key(
				metrics[mm], metrics[mm] == XJ_METRIC_IP ?
				0.0f : 3.0f);
			if (metrics[mm] == XJ_METRIC_COSINE)
				cfg.threshold_key = metric_value_to_key(
					metrics[mm], 0.9f);
			/* the queries are the base's first rows: self pairs */
			backend_topk(&cfg, b, N, b, 0, M, wk, wi);
			for (int i = 0; i < N * K; i++) {
				valid += wi[i] >= 0;
				pads += wi[i] < 0;
			}
			for (size_t t = 0; t < UNIT_COUNT(js); t++) {
				int64_t j = js[t];

				backend_topk(&cfg, b, N, b, 0, j, ak, ai);
				backend_topk(&cfg, b, N, b, j, M, bk, bi);
				for (int i = 0; i < N; i++) {
					const float *lk[2] = { ak + i * K,
							       bk + i * K };
					const int64_t *li[2] = { ai + i * K,
								 bi + i * K };

					topk_merge(2, lk, li, K, mk, mi);
					CU_ASSERT(!memcmp(mk, wk + i * K,
							  sizeof(mk)));
					CU_ASSERT(!memcmp(mi, wi + i * K,
							  sizeof(mi)));
				}
			}
		}
	/* real lists, and padding where the threshold leaves fewer */
	CU_ASSERT(valid > 0 && pads > 0);
	free(b);
}

int main(void)
{
	static const unit_test tests[] = {
		{ "pieces", test_pieces_plain },
		{ "pieces around folded rows", test_pieces_skip },
		{ "pieces against a bitmap", test_pieces_random },
		{ "which rounds restore", test_restores },
		{ "split lists merge to the whole", test_split_merge },
	};

	return unit_run("inround", tests, UNIT_COUNT(tests));
}
