/*
 * contract.c: the backend contract's cases (contract.h), run against the
 * backend of one contract_backend entry.
 *
 * Reference top-k: for each query, the canonical key (metric_key) of every
 * base row, filtered by threshold and self, sorted by (key, index), first
 * k, padded with (+inf, -1). The backend must return exactly those bits
 * (memcmp) for every chunking of queries and bases, thread count, k and
 * metric, so the reference's keys are checked once against long double
 * scores (abs + |ref| * eps) for all of them. The reference sorts each
 * query's keys once per data set and metric; every k, threshold and self
 * setting is a filtered prefix of those lists.
 *
 * Data: Gaussian, clustered, large offsets (the expanded GEMM form
 * cancels, so only rescoring can be right), near ties that float GEMM
 * cannot order, many duplicated rows (ties), k above the base size
 * (padding), empty chunks, and real GloVe rows. Most cases run at two
 * sizes: small data in small, odd chunks (one row, 7 rows, thread teams),
 * and data whose chunks cross the CUDA backend's 512 x 4096 tiles, with k
 * up to 5000 (left out with --small).
 *
 * Matrix blocks: canonical values (metric_key_to_value of metric_key),
 * bit for bit, in pinned and pageable memory, nothing written past the
 * block or for an empty one; blocks queued in turn as the driver does.
 * Range join: every pair within the threshold, rows in (key, index)
 * order, bit for bit, for every chunking (backends offering it).
 * Errors: calls out of order, wrong dimension, zero, huge and NaN rows
 * (named by their global row), impossible sizes (resource errors, and
 * the backend still works).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "config/status.h"
#include "kernels/backend.h"
#include "kernels/metric.h"
#include "kernels/topk.h"
#include "tests/unit/glove.h"
#include "tests/unit/testdata.h"
#include "tests/unit/unit.h"

/* the backend under test; set by contract_add */
static const contract_backend *cur;
/* --small: leave out the data sized for the CUDA tiles */
static int small_only;
/* cfg.same_rows for self cases (q == b): the self-join path may score
 * each pair of shared rows once */
static int same_rows;

/* ---- data ---------------------------------------------------------- */

static float *cluster_rows(int64_t n, int64_t d, int nc, double noise)
{
	float *c = gauss_rows(nc, d, 0, 1);
	float *x = malloc(sizeof(float) * (size_t)(n * d + 1));

	for (int64_t i = 0; c && x && i < n; i++) {
		int64_t cc = (int64_t)(rng_next() % (uint64_t)nc);

		for (int64_t e = 0; e < d; e++)
			x[i * d + e] = (float)(c[cc * d + e] + noise * rng_gauss());
	}
	free(c);
	return x;
}

/* Near ties that float GEMM cannot order: rows c + 1e-4 noise around one
 * centre c of norm ~100 sqrt(d), and queries orthogonal to c, so every
 * inner product is a large cancelling sum whose float error exceeds the
 * gaps between candidates (ip); for cosine all rows are nearly parallel. */
static void near_tie_rows(int64_t nb, int64_t nq, int64_t d, float **bp,
			  float **qp)
{
	float *c = gauss_rows(1, d, 0, 100);
	float *b = malloc(sizeof(float) * (size_t)(nb * d + 1));
	float *q = gauss_rows(nq, d, 0, 1);
	double cc = 0;

	*bp = b;
	*qp = q;
	if (!c || !b || !q)
		return;
	for (int64_t e = 0; e < d; e++)
		cc += (double)c[e] * c[e];
	for (int64_t j = 0; j < nb; j++)
		for (int64_t e = 0; e < d; e++)
			b[j * d + e] = (float)(c[e] + 1e-4 * rng_gauss());
	for (int64_t i = 0; i < nq; i++) {
		double p = 0;

		for (int64_t e = 0; e < d; e++)
			p += (double)q[i * d + e] * c[e];
		for (int64_t e = 0; e < d; e++)
			q[i * d + e] = (float)(q[i * d + e] - p / cc * c[e]);
	}
	free(c);
}

/* n rows that repeat nd distinct rows in a scrambled order. */
static float *dup_rows(int64_t n, int64_t d, int nd)
{
	float *u = gauss_rows(nd, d, 0, 1);
	float *x = malloc(sizeof(float) * (size_t)(n * d + 1));

	for (int64_t i = 0; u && x && i < n; i++)
		memcpy(x + i * d, u + ((i * 7 + i / 3) % nd) * d,
		       sizeof(float) * (size_t)d);
	free(u);
	return x;
}

/* ---- reference ------------------------------------------------------- */

/* Long double score in key units, and its tolerance. */
static int key_close(xj_metric m, const float *q, const float *b, int64_t d,
		     float key)
{
	long double s = 0, qq = 0, bb = 0, r, tol;

	for (int64_t e = 0; e < d; e++) {
		long double x = q[e], y = b[e];

		if (m == XJ_METRIC_L2 || m == XJ_METRIC_SQEUCLIDEAN)
			s += (x - y) * (x - y);
		else
			s += x * y;
		qq += x * x;
		bb += y * y;
	}
	switch (m) {
	case XJ_METRIC_L2:
		r = sqrtl(s);
		tol = 0;
		break;
	case XJ_METRIC_SQEUCLIDEAN:
		r = s;
		tol = 0;
		break;
	case XJ_METRIC_IP:
		r = -s;
		tol = sqrtl(qq * bb) * 0x1p-40L;
		break;
	default:
		r = 1 - s / sqrtl(qq * bb);
		tol = 0x1p-40L;
		break;
	}
	tol += fabsl(r) * 0x1p-23L + 0x1p-140L;
	return fabsl((long double)key - r) <= tol;
}

typedef struct ref_pair {
	float key;
	int64_t idx;
} ref_pair;

static int ref_cmp(const void *a, const void *b)
{
	const ref_pair *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Each query's first kmax base rows by (canonical key, index), of one
 * data set and metric. Their keys are checked against long double scores
 * here, once: a backend's result must have these bits. */
typedef struct ref_lists {
	int64_t nq, kmax;   /* kmax <= nb */
	float *key;         /* nq x kmax */
	int64_t *idx;
} ref_lists;

static void ref_build(ref_lists *r, xj_metric m, const float *q, int64_t nq,
		      const float *b, int64_t nb, int64_t d, int64_t kmax)
{
	ref_pair *p = malloc(sizeof(ref_pair) * (size_t)(nb + 1));
	double *bb = malloc(sizeof(double) * (size_t)(nb + 1));
	int64_t far = 0;

	r->nq = nq;
	r->kmax = kmax < nb ? kmax : nb;
	r->key = malloc(sizeof(float) * (size_t)(nq * r->kmax + 1));
	r->idx = malloc(sizeof(int64_t) * (size_t)(nq * r->kmax + 1));
	CU_ASSERT_FATAL(p && bb && r->key && r->idx);
	for (int64_t j = 0; j < nb; j++)
		bb[j] = metric_norm2(b + j * d, d);
	for (int64_t i = 0; i < nq; i++) {
		double qq = metric_norm2(q + i * d, d);

		for (int64_t j = 0; j < nb; j++) {
			p[j].key = metric_key(m, q + i * d, b + j * d, d, qq,
					      bb[j]);
			p[j].idx = j;
		}
		qsort(p, (size_t)nb, sizeof(*p), ref_cmp);
		for (int64_t e = 0; e < r->kmax; e++) {
			r->key[i * r->kmax + e] = p[e].key;
			r->idx[i * r->kmax + e] = p[e].idx;
			if (!key_close(m, q + i * d, b + p[e].idx * d, d,
				       p[e].key) && far++ < 4)
				printf("\n  %s: key %.9g of query %lld, row %lld is off its long double score",
				       metric_names[m], p[e].key, (long long)i,
				       (long long)p[e].idx);
		}
	}
	CU_ASSERT_EQUAL(far, 0);
	free(p);
	free(bb);
}

static void ref_free(ref_lists *r)
{
	free(r->key);
	free(r->idx);
}

typedef struct tcase {
	xj_metric metric;
	int64_t k;
	int has_threshold;
	float threshold_key;
	int self;
	const float *q;
	int64_t nq;
	const float *b;
	int64_t nb;
	int64_t d;
} tcase;

/* The reference result of tc (nq x k) from lists of its data and metric:
 * self drops the query's own row, the threshold cuts the sorted list. */
static void ref_topk(const ref_lists *r, const tcase *tc, float *key,
		     int64_t *idx)
{
	int64_t k = tc->k;

	/* enough entries for k, or all of the base */
	CU_ASSERT_FATAL(r->nq == tc->nq &&
			(k + tc->self <= r->kmax || r->kmax == tc->nb));
	for (int64_t i = 0; i < tc->nq; i++) {
		const float *lk = r->key + i * r->kmax;
		const int64_t *li = r->idx + i * r->kmax;
		int64_t n = 0;

		for (int64_t e = 0; e < r->kmax && n < k; e++) {
			if (tc->self && li[e] == i)
				continue;
			if (tc->has_threshold && !(lk[e] <= tc->threshold_key))
				break;
			key[i * k + n] = lk[e];
			idx[i * k + n++] = li[e];
		}
		for (; n < k; n++) {
			key[i * k + n] = INFINITY;
			idx[i * k + n] = -1;
		}
	}
}

/* the rank pick_threshold takes: lists of 10 and more are cut */
#define THRESHOLD_RANK 9

/* A threshold that cuts most k-lists short: the key of rank
 * THRESHOLD_RANK of query 0 without threshold, through the value and
 * back, as the driver does. */
static float pick_threshold(const ref_lists *ref, tcase tc)
{
	const int64_t r = THRESHOLD_RANK;
	float *key = malloc(sizeof(float) * (size_t)(tc.nq * (r + 1)));
	int64_t *idx = malloc(sizeof(int64_t) * (size_t)(tc.nq * (r + 1)));
	float t;

	CU_ASSERT_FATAL(key && idx);
	tc.k = r + 1;
	tc.has_threshold = 0;
	ref_topk(ref, &tc, key, idx);
	t = metric_value_to_key(tc.metric,
				metric_key_to_value(tc.metric, key[r]));
	free(key);
	free(idx);
	return t;
}

/* ---- running the backend --------------------------------------------- */

typedef struct chunking {
	int64_t qc, bc;     /* rows per chunk; 0: one chunk */
	int empties;        /* empty base chunks around the stream */
	int threads;        /* cfg.threads (the CPU's OpenMP team) */
} chunking;

/* Small, odd chunks: one row, a few rows, uneven splits, empty chunks and
 * thread teams (a backend without threads ignores them). */
static const chunking small_chunks[] = {
	{ 0, 0, 0, 0 },
	{ 7, 333, 1, 0 },
	{ 1, 1025, 0, 2 },
	{ 40, 1100, 0, 3 },  /* a thread team over query tiles */
	{ 16, 7, 1, 3 },
	{ 13, 1, 0, 1 },
};
#define NSMALL ((int)UNIT_COUNT(small_chunks))

/* The CUDA backend's tiles are 512 query x 4096 base rows: these cross
 * both boundaries, split them unevenly, and go down to 7 query rows. */
static const chunking tile_chunks[] = {
	{ 0, 0, 0, 0 },
	{ 513, 4097, 1, 0 },
	{ 100, 777, 0, 0 },
	{ 7, 9000, 1, 0 },
};
#define NTILE ((int)UNIT_COUNT(tile_chunks))

static xj_backend_cfg cfg_of(const tcase *tc, int threads)
{
	xj_backend_cfg cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = tc->metric;
	cfg.k = tc->k;
	cfg.d = tc->d;
	cfg.has_threshold = tc->has_threshold;
	cfg.threshold_key = tc->threshold_key;
	cfg.self = tc->self;
	cfg.same_rows = tc->self && same_rows;
	cfg.threads = threads;
	return cfg;
}

/* Compare a backend result with the reference; print the first
 * mismatches. Returns the number of mismatching entries. */
static int64_t compare(const tcase *tc, const char *what, const float *key,
		       const int64_t *idx, const float *rkey,
		       const int64_t *ridx)
{
	int64_t bad = 0, k = tc->k;

	for (int64_t e = 0; e < tc->nq * k; e++) {
		int same = same_f32(key[e], rkey[e]) && idx[e] == ridx[e];

		if (!same && bad++ < 4)
			printf("\n  %s %s k=%lld thr=%d self=%d: query %lld rank %lld: got (%.9g, %lld) want (%.9g, %lld)",
			       metric_names[tc->metric], what, (long long)k,
			       tc->has_threshold, tc->self, (long long)(e / k),
			       (long long)(e % k), key[e], (long long)idx[e],
			       rkey[e], (long long)ridx[e]);
	}
	return bad;
}

/* The reference once, then the backend for every chunking: each result
 * must equal the reference bit for bit. */
static int64_t check_case(const ref_lists *ref, const tcase *tc,
			  const chunking *ch, int nch)
{
	int64_t n = tc->nq * tc->k, bad = 0;
	float *rkey = malloc(sizeof(float) * (size_t)(n + 1));
	int64_t *ridx = malloc(sizeof(int64_t) * (size_t)(n + 1));
	float *key = malloc(sizeof(float) * (size_t)(n + 1));
	int64_t *idx = malloc(sizeof(int64_t) * (size_t)(n + 1));

	CU_ASSERT_FATAL(rkey && ridx && key && idx);
	ref_topk(ref, tc, rkey, ridx);
	for (int c = 0; c < nch; c++) {
		xj_backend_cfg cfg = cfg_of(tc, ch[c].threads);
		char what[64];

		snprintf(what, sizeof(what), "chunks %lldx%lld t%d%s",
			 (long long)ch[c].qc, (long long)ch[c].bc,
			 ch[c].threads, ch[c].empties ? " +empty" : "");
		if (contract_topk(cur->create, &cfg, tc->q, tc->nq, tc->b,
				  tc->nb, ch[c].qc, ch[c].bc, ch[c].empties,
				  key, idx, NULL)) {
			bad++;
			continue;
		}
		bad += compare(tc, what, key, idx, rkey, ridx);
	}
	free(rkey);
	free(ridx);
	free(key);
	free(idx);
	return bad;
}

/* Every metric, k, threshold off/on and self off/on (self only when q is
 * the first rows of b) on one data set, in the first nch chunkings. */
static int64_t sweep(const float *q, int64_t nq, const float *b, int64_t nb,
		     int64_t d, const int64_t *ks, int nks, const chunking *ch,
		     int nch)
{
	int64_t bad = 0, kmax = THRESHOLD_RANK + 1;

	for (int ki = 0; ki < nks; ki++)
		if (ks[ki] > kmax)
			kmax = ks[ki];
	for (size_t mi = 0; mi < 4; mi++) {
		ref_lists ref;

		ref_build(&ref, metrics[mi], q, nq, b, nb, d, kmax + 1);
		for (int ki = 0; ki < nks; ki++)
			for (int v = 0; v < 4; v++) {
				tcase tc = { metrics[mi], ks[ki], v & 1, 0, v >> 1,
					     q, nq, b, nb, d };

				if (tc.self && q != b)
					continue;
				if (tc.has_threshold)
					tc.threshold_key = pick_threshold(&ref, tc);
				bad += check_case(&ref, &tc, ch, nch);
			}
		ref_free(&ref);
	}
	return bad;
}

/* ---- top-k ------------------------------------------------------------- */

static void test_gaussian(void)
{
	const int64_t ks[] = { 1, 5, 64 }, tks[] = { 1, 10, 2048, 5000 };
	float *b = gauss_rows(2100, 24, 0, 1);
	float *q = gauss_rows(61, 24, 0.1, 1);
	float *tb = gauss_rows(9000, 40, 0, 1);
	float *tq = gauss_rows(600, 40, 0.1, 1);

	CU_ASSERT_FATAL(b && q && tb && tq);
	/* independent queries, then queries = first rows of the base (self) */
	CU_ASSERT_EQUAL(sweep(q, 61, b, 2100, 24, ks, 3, small_chunks,
			      NSMALL - 1), 0);
	CU_ASSERT_EQUAL(sweep(b, 61, b, 2100, 24, ks, 3, small_chunks,
			      NSMALL - 1), 0);
	if (!small_only) {
		CU_ASSERT_EQUAL(sweep(tq, 600, tb, 9000, 40, tks, 4,
				      tile_chunks, NTILE), 0);
		CU_ASSERT_EQUAL(sweep(tb, 600, tb, 9000, 40, tks, 4,
				      tile_chunks, 2), 0);
	}
	free(b);
	free(q);
	free(tb);
	free(tq);
}

static void test_clustered(void)
{
	const int64_t d = 48, nb = 1500, nq = 50;
	const int64_t ks[] = { 5, 64 };
	float *b = cluster_rows(nb, d, 20, 0.05);

	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT_EQUAL(sweep(b, nq, b, nb, d, ks, 2, small_chunks, NSMALL),
			0);
	free(b);
}

/* Offsets of 1e4 with unit spread: |q|^2 + |b|^2 - 2 q.b cancels to
 * noise in float, every pair passes the gate and rescoring decides. */
static void test_large_norms(void)
{
	const int64_t ks[] = { 1, 10 }, tks[] = { 1, 10, 2048 };
	float *b = gauss_rows(1200, 32, 1e4, 1);
	float *tb = gauss_rows(5000, 32, 1e4, 1);

	CU_ASSERT_FATAL(b && tb);
	CU_ASSERT_EQUAL(sweep(b, 30, b, 1200, 32, ks, 2, small_chunks, 3), 0);
	if (!small_only)
		CU_ASSERT_EQUAL(sweep(tb, 70, tb, 5000, 32, tks, 3,
				      tile_chunks, 3), 0);
	free(b);
	free(tb);
}

static void test_near_ties(void)
{
	const int64_t ks[] = { 1, 10 }, tks[] = { 1, 10, 2048 };
	float *b, *q, *tb, *tq;

	near_tie_rows(1200, 20, 32, &b, &q);
	near_tie_rows(5000, 40, 32, &tb, &tq);
	CU_ASSERT_FATAL(b && q && tb && tq);
	CU_ASSERT_EQUAL(sweep(q, 20, b, 1200, 32, ks, 2, small_chunks, 3), 0);
	CU_ASSERT_EQUAL(sweep(b, 20, b, 1200, 32, ks, 2, small_chunks, 2), 0);
	if (!small_only) {
		CU_ASSERT_EQUAL(sweep(tq, 40, tb, 5000, 32, tks, 3,
				      tile_chunks, 3), 0);
		CU_ASSERT_EQUAL(sweep(tb, 40, tb, 5000, 32, tks, 3,
				      tile_chunks, 2), 0);
	}
	free(b);
	free(q);
	free(tb);
	free(tq);
}

/* 2000 (and 9000) rows that are 5 distinct rows repeated: equal keys
 * everywhere, far more duplicates than k and pending slots; chunks split
 * the runs of equal keys. */
static void test_duplicates(void)
{
	const int64_t d = 16;
	const int64_t ks[] = { 5, 64 }, tks[] = { 1, 10, 2048, 5000 };
	float *b = dup_rows(2000, d, 5), *q = gauss_rows(12, d, 0, 1);
	float *tb = dup_rows(9000, d, 5), *tq = gauss_rows(30, d, 0, 1);

	CU_ASSERT_FATAL(b && q && tb && tq);
	/* an exact duplicate of a base row among the queries */
	memcpy(q, b + 3 * d, sizeof(float) * (size_t)d);
	memcpy(tq, tb + 3 * d, sizeof(float) * (size_t)d);
	CU_ASSERT_EQUAL(sweep(q, 12, b, 2000, d, ks, 2, small_chunks, NSMALL),
			0);
	CU_ASSERT_EQUAL(sweep(b, 12, b, 2000, d, ks, 2, small_chunks, 3), 0);
	if (!small_only) {
		CU_ASSERT_EQUAL(sweep(tq, 30, tb, 9000, d, tks, 4,
				      tile_chunks, NTILE), 0);
		CU_ASSERT_EQUAL(sweep(tb, 30, tb, 9000, d, tks, 4,
				      tile_chunks, 2), 0);
	}
	free(b);
	free(q);
	free(tb);
	free(tq);
}

/* Self-joins of 2100 rows with each other (same_rows): chunks sharing
 * 1024 rows or more take the symmetric path (3 or 5 blocks of up
 * to 512 rows, partial ones, thread teams, chunks where fewer rows are
 * shared and the plain path runs); the lists must be the plain path's,
 * that is the reference. Gaussian rows with 300 exact duplicates, then
 * rows of 40 distinct values (ties everywhere). */
static const chunking self_chunks[] = {
	{ 0, 0, 0, 2 },
	{ 1100, 1100, 0, 3 },
	{ 2100, 1050, 0, 1 },
	{ 1050, 2100, 1, 2 },
};

/*
 * A split self-join (cfg.parts > 1, app/plan/plan.h): every part's backend
 * gets the same chunks and scores its share of the pairs; the merge of
 * the parts' lists (topk_merge, as the grid row's merge does) must be the
 * reference, for 2 and 3 parts, every metric, with and without threshold.
 */
static int64_t parts_case(const ref_lists *ref, const tcase *tc,
			  const chunking *ch, int parts)
{
	int64_t n = tc->nq * tc->k, k = tc->k, bad = 0;
	float *rkey = malloc(sizeof(float) * (size_t)(n + 1));
	int64_t *ridx = malloc(sizeof(int64_t) * (size_t)(n + 1));
	float *key = malloc(sizeof(float) * (size_t)(parts * n + 1));
	int64_t *idx = malloc(sizeof(int64_t) * (size_t)(parts * n + 1));
	float *mkey = malloc(sizeof(float) * (size_t)(n + 1));
	int64_t *midx = malloc(sizeof(int64_t) * (size_t)(n + 1));
	char what[64];

	CU_ASSERT_FATAL(rkey && ridx && key && idx && mkey && midx);
	ref_topk(ref, tc, rkey, ridx);
	for (int p = 0; p < parts; p++) {
		xj_backend_cfg cfg = cfg_of(tc, ch->threads);

		cfg.part = p;
		cfg.parts = parts;
		bad += contract_topk(cur->create, &cfg, tc->q, tc->nq, tc->b,
				     tc->nb, ch->qc, ch->bc, ch->empties,
				     key + p * n, idx + p * n, NULL);
	}
	for (int64_t r = 0; r < tc->nq; r++) {
		const float *lk[3];
		const int64_t *li[3];

		for (int p = 0; p < parts; p++) {
			lk[p] = key + p * n + r * k;
			li[p] = idx + p * n + r * k;
		}
		topk_merge(parts, lk, li, k, mkey + r * k, midx + r * k);
	}
	snprintf(what, sizeof(what), "chunks %lldx%lld, %d parts",
		 (long long)ch->qc, (long long)ch->bc, parts);
	bad += compare(tc, what, mkey, midx, rkey, ridx);
	free(rkey);
	free(ridx);
	free(key);
	free(idx);
	free(mkey);
	free(midx);
	return bad;
}

static int64_t sweep_parts(const float *x, int64_t n, int64_t d, int64_t k)
{
	int64_t bad = 0;

	for (size_t mi = 0; mi < 4; mi++) {
		ref_lists ref;

		ref_build(&ref, metrics[mi], x, n, x, n, d,
			  (k > THRESHOLD_RANK ? k : THRESHOLD_RANK) + 2);
		for (int thr = 0; thr < 2; thr++) {
			tcase tc = { metrics[mi], k, thr, 0, 1, x, n, x, n, d };

			if (thr)
				tc.threshold_key = pick_threshold(&ref, tc);
			/* 2 parts on one chunk, 3 on chunks of 1100 rows
			 * (shared and plain rows, thread teams) */
			for (int parts = 2; parts <= 3; parts++)
				bad += parts_case(&ref, &tc,
						  &self_chunks[parts - 2],
						  parts);
		}
		ref_free(&ref);
	}
	return bad;
}

static void test_self_join(void)
{
	const int64_t n = 2100, d = 16, ks[] = { 10 };
	float *g = gauss_rows(n, d, 0, 1), *t = dup_rows(n, d, 40);
	float *key = malloc(sizeof(float) * (size_t)(n * ks[0]));
	int64_t *idx = malloc(sizeof(int64_t) * (size_t)(n * ks[0]));
	double flops = -1;
	xj_backend_cfg cfg;

	CU_ASSERT_FATAL(g && t && key && idx);
	memcpy(g + (n - 300) * d, g, sizeof(float) * (size_t)(300 * d));
	same_rows = 1;
	CU_ASSERT_EQUAL(sweep(g, n, g, n, d, ks, 1, self_chunks,
			      (int)UNIT_COUNT(self_chunks)), 0);
	CU_ASSERT_EQUAL(sweep(t, n, t, n, d, ks, 1, self_chunks, 1), 0);
	CU_ASSERT_EQUAL(sweep_parts(g, n, d, ks[0]), 0);
	/* one chunk of 5 blocks: 10 block pairs and 5 diagonal blocks, 62%
	 * of the plain GEMM, where the backend takes the symmetric path */
	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = XJ_METRIC_L2;
	cfg.k = ks[0];
	cfg.d = d;
	cfg.self = 1;
	cfg.same_rows = 1;
	CU_ASSERT_EQUAL(contract_topk(cur->create, &cfg, g, n, g, n, 0, 0, 0,
				      key, idx, &flops), 0);
	if (cur->self_join_halves) {
		CU_ASSERT(flops < 0.65 * 2.0 * n * n * d);
	} else {
		CU_ASSERT_EQUAL(flops, 2.0 * n * n * d);
	}
	same_rows = 0;
	free(g);
	free(t);
	free(key);
	free(idx);
}

/* k above the base size: (+inf, -1) padding, with and without threshold
 * and self. */
static void test_padding(void)
{
	const int64_t d = 10;
	const int64_t ks[] = { 41, 50 }, tks[] = { 1001, 2048, 5000 };
	const chunking ch[] = { { 0, 0, 0, 0 }, { 17, 333, 1, 0 },
				{ 1, 1, 0, 0 } };
	float *b = gauss_rows(40, d, 0, 2), *tb = gauss_rows(1000, d, 0, 2);
	ref_lists ref;

	CU_ASSERT_FATAL(b && tb);
	CU_ASSERT_EQUAL(sweep(b, 9, b, 40, d, ks, 2, small_chunks, NSMALL), 0);
	if (!small_only) {
		/* one-row base chunks: 1000 topk_add calls of one row */
		tcase tc = { XJ_METRIC_L2, 5000, 0, 0, 1, tb, 3, tb, 1000, d };

		CU_ASSERT_EQUAL(sweep(tb, 50, tb, 1000, d, tks, 3, ch, 2), 0);
		ref_build(&ref, tc.metric, tb, 3, tb, 1000, d, tc.k + 1);
		CU_ASSERT_EQUAL(check_case(&ref, &tc, ch + 2, 1), 0);
		ref_free(&ref);
	}
	free(b);
	free(tb);
}

/* Thresholds that pass nothing (all padding) and everything. */
static void test_threshold_extremes(void)
{
	const int64_t d = 12, nb = 700, nq = 20;
	float *b = gauss_rows(nb, d, 0, 1);
	int64_t bad = 0;

	CU_ASSERT_FATAL(b != NULL);
	for (size_t mi = 0; mi < 4; mi++) {
		xj_metric m = metrics[mi];
		double none = m == XJ_METRIC_IP ? 1e30 : -1.0;
		tcase tc = { m, 7, 1, metric_value_to_key(m, none), 0,
			     b, nq, b, nb, d };
		ref_lists ref;

		ref_build(&ref, m, b, nq, b, nb, d, tc.k + 1);
		bad += check_case(&ref, &tc, small_chunks, 3);
		tc.threshold_key = metric_value_to_key(m, m == XJ_METRIC_IP ?
						       -1e300 : 1e300);
		tc.self = 1;
		bad += check_case(&ref, &tc, small_chunks, 3);
		ref_free(&ref);
	}
	CU_ASSERT_EQUAL(bad, 0);
	free(b);
}

/* An empty query chunk (nothing written) and a base made of empty chunks
 * only (all padding). */
static void test_empty_chunks(void)
{
	const int64_t d = 8, k = 4;
	float *x = gauss_rows(5, d, 0, 1);
	float key[5 * 4];
	int64_t idx[5 * 4];
	xj_backend_cfg cfg;
	xj_backend *be;
	xj_status st;

	CU_ASSERT_FATAL(x != NULL);
	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = XJ_METRIC_L2;
	cfg.k = k;
	cfg.d = d;
	xj_ok(&st);
	CU_ASSERT_FATAL(cur->create(&cfg, &be, &st) == XJ_OK);
	xj_rows q0 = { x, 0, d, 0, 0 }, q5 = { x, 5, d, 100, 0 }, b0 = { x, 0, d, 7, 0 };

	poison(key, idx, 5 * k);
	CU_ASSERT_EQUAL(be->topk_begin(be, &q0, &st), XJ_OK);
	CU_ASSERT_EQUAL(be->topk_add(be, &b0, &st), XJ_OK);
	CU_ASSERT_EQUAL(be->topk_end(be, key, idx, &st), XJ_OK);
	CU_ASSERT(isnan(key[0]) && idx[0] == IDX_POISON);
	CU_ASSERT_EQUAL(be->topk_begin(be, &q5, &st), XJ_OK);
	CU_ASSERT_EQUAL(be->topk_add(be, &b0, &st), XJ_OK);
	CU_ASSERT_EQUAL(be->topk_add(be, &b0, &st), XJ_OK);
	CU_ASSERT_EQUAL(be->topk_end(be, key, idx, &st), XJ_OK);
	for (int e = 0; e < 5 * k; e++)
		CU_ASSERT(isinf(key[e]) && key[e] > 0 && idx[e] == -1);
	CU_ASSERT_EQUAL(be->gemm_flops, 0.0);
	be->release(be);
	free(x);
}

/* 2 nq nb d, whatever the base chunks (1000 rows: a short last one). */
static void test_gemm_flops(void)
{
	const int64_t d = 20, nq = 70, nbs[] = { 1300, 5300 };
	float *x = gauss_rows(5300, d, 0, 1);
	float key[70 * 3];
	int64_t idx[70 * 3];
	xj_backend_cfg cfg;

	CU_ASSERT_FATAL(x != NULL);
	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = XJ_METRIC_IP;
	cfg.k = 3;
	cfg.d = d;
	for (int i = 0; i < 2; i++) {
		double flops = -1;

		CU_ASSERT_EQUAL(contract_topk(cur->create, &cfg, x, nq, x,
					      nbs[i], 0, 1000, 0, key, idx,
					      &flops), 0);
		CU_ASSERT_EQUAL(flops, 2.0 * nq * nbs[i] * d);
	}
	free(x);
}

static void test_glove(void)
{
	const chunking ch[] = { { 0, 0, 0, 0 }, { 17, 301, 1, 0 } };
	float *b = NULL, *q = NULL;
	int64_t d = 0;

	CU_ASSERT_FATAL(glove_rows(&q, 50, &b, 2000, &d) == 0);
	for (int mi = 0; mi < 3; mi += 2) {   /* l2, cosine */
		tcase tc = { metrics[mi], 10, 0, 0, 0, q, 50, b, 2000, d };
		ref_lists ref;

		ref_build(&ref, tc.metric, q, 50, b, 2000, d, tc.k);
		CU_ASSERT_EQUAL(check_case(&ref, &tc, ch, 2), 0);
		ref_free(&ref);
	}
	free(b);
	free(q);
}

/* ---- errors ------------------------------------------------------------ */

static void test_errors(void)
{
	const int64_t d = 6;
	float *x = gauss_rows(8, d, 0, 1);
	float key[8 * 2];
	int64_t idx[8 * 2];
	xj_backend_cfg cfg;
	xj_backend *be;
	xj_status st;
	int rc;

	CU_ASSERT_FATAL(x != NULL);
	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = XJ_METRIC_COSINE;
	cfg.k = 2;
	cfg.d = d;
	cfg.max_query_rows = 4;
	cfg.max_base_rows = 4;
	xj_ok(&st);
	CU_ASSERT_FATAL(cur->create(&cfg, &be, &st) == XJ_OK);
	CU_ASSERT_STRING_EQUAL(be->name, cur->name);
	xj_rows q = { x, 4, d, 10, 0 }, b = { x + 4 * d, 4, d, 20, 0 };

	/* calls out of order */
	CU_ASSERT_EQUAL(be->topk_add(be, &b, &st), XJ_EXIT_INTERNAL);
	xj_ok(&st);
	CU_ASSERT_EQUAL(be->topk_end(be, key, idx, &st), XJ_EXIT_INTERNAL);
	/* wrong dimension */
	xj_rows bad_d = { x, 4, d - 1, 0, 0 };

	xj_ok(&st);
	CU_ASSERT_EQUAL(be->topk_begin(be, &bad_d, &st), XJ_EXIT_INTERNAL);
	/* a zero query row for cosine names its global row */
	memset(x + 2 * d, 0, sizeof(float) * d);
	xj_ok(&st);
	CU_ASSERT_EQUAL(be->topk_begin(be, &q, &st), XJ_EXIT_INPUT);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "row 12 is all zeros"));
	/* a base row whose squared norm overflows float32; where topk_add
	 * only queues the work, the error comes from topk_end */
	x[2 * d] = 1;
	x[6 * d + 3] = 2e19f;
	xj_ok(&st);
	CU_ASSERT_EQUAL(be->topk_begin(be, &q, &st), XJ_OK);
	rc = be->topk_add(be, &b, &st);
	if (rc == XJ_OK && !cur->add_checks_rows)
		rc = be->topk_end(be, key, idx, &st);
	CU_ASSERT_EQUAL(rc, XJ_EXIT_INPUT);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "row 22: values too large"));
	xj_ok(&st);
	CU_ASSERT_EQUAL(backend_matrix_block(be, &q, &b, key, &st),
			XJ_EXIT_INPUT);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "row 22: values too large"));
	/* NaN fails the same check (its squared norm is not <= the limit) */
	x[6 * d + 3] = 1;
	x[d + 4] = NAN;
	xj_ok(&st);
	CU_ASSERT_EQUAL(be->topk_begin(be, &q, &st), XJ_EXIT_INPUT);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "row 11:"));
	xj_ok(&st);
	CU_ASSERT_EQUAL(backend_matrix_block(be, &b, &q, key, &st),
			XJ_EXIT_INPUT);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "row 11:"));
	x[d + 4] = 1;
	x[5 * d] = NAN;
	xj_ok(&st);
	CU_ASSERT_EQUAL(be->topk_begin(be, &q, &st), XJ_OK);
	rc = be->topk_add(be, &b, &st);
	if (rc == XJ_OK && !cur->add_checks_rows)
		rc = be->topk_end(be, key, idx, &st);
	CU_ASSERT_EQUAL(rc, XJ_EXIT_INPUT);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "row 21:"));
	x[5 * d] = 1;
	be->release(be);

	/* memory: a resource error, not a crash, and no backend */
	cfg.metric = XJ_METRIC_L2;
	cfg.k = (int64_t)1 << 40;
	xj_ok(&st);
	CU_ASSERT_EQUAL(cur->create(&cfg, &be, &st), XJ_EXIT_RESOURCE);
	CU_ASSERT_PTR_NULL(be);
	printf("\n  (expected) %s", st.msg);
	cfg.k = 2;      /* key, idx hold 4 queries x 2 */
	xj_ok(&st);
	CU_ASSERT_FATAL(cur->create(&cfg, &be, &st) == XJ_OK);
	xj_rows huge = { x, (int64_t)1 << 40, d, 0, 0 };

	CU_ASSERT_EQUAL(be->topk_begin(be, &huge, &st), XJ_EXIT_RESOURCE);
	printf("\n  (expected) %s ", st.msg);
	/* still usable after the failed growth */
	xj_ok(&st);
	CU_ASSERT_EQUAL(be->topk_begin(be, &q, &st), XJ_OK);
	CU_ASSERT_EQUAL(be->topk_end(be, key, idx, &st), XJ_OK);
	be->release(be);
	free(x);
}

/* ---- matrix ------------------------------------------------------------ */

/* Canonical values of the block q x b (nq x nb, row-major). */
static float *ref_matrix(xj_metric m, const float *q, int64_t nq,
			 const float *b, int64_t nb, int64_t d)
{
	float *v = malloc(sizeof(float) * (size_t)(nq * nb + 1));
	double *bb = malloc(sizeof(double) * (size_t)(nb + 1));

	CU_ASSERT_FATAL(v && bb);
	for (int64_t j = 0; j < nb; j++)
		bb[j] = metric_norm2(b + j * d, d);
	for (int64_t i = 0; i < nq; i++) {
		double qq = metric_norm2(q + i * d, d);

		for (int64_t j = 0; j < nb; j++)
			v[i * nb + j] = metric_key_to_value(m,
				metric_key(m, q + i * d, b + j * d, d, qq,
					   bb[j]));
	}
	free(bb);
	return v;
}

/* The k of matrix_cfg: 0, as the driver makes a matrix backend
 * (app/main.c); test_matrix also takes some blocks on a backend made for
 * top-k (k = 10), which may compute them another way (the CUDA backend:
 * canonically, without its double GEMM's buffers). */
static int64_t matrix_k;

/* The config of a matrix job with blocks up to nq x nb. */
static xj_backend_cfg matrix_cfg(xj_metric m, int64_t d, int64_t nq,
				 int64_t nb, int threads)
{
	xj_backend_cfg cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = m;
	cfg.k = matrix_k;
	cfg.d = d;
	cfg.threads = threads;
	cfg.max_query_rows = nq;
	cfg.max_base_rows = nb;
	return cfg;
}

/* One block into block_alloc's memory (pinned) or malloc's (pageable),
 * 16 poisoned floats past its end that must stay as they are. */
static int64_t check_matrix(xj_metric m, const float *q, int64_t nq,
			    const float *b, int64_t nb, int64_t d, int threads,
			    int pinned)
{
	xj_backend_cfg cfg = matrix_cfg(m, d, nq, nb, threads);
	const uint32_t poison_bits = 0xffffffffu;
	xj_backend *be;
	xj_status st;
	int64_t bad = 0, n = nq * nb;
	float *want = ref_matrix(m, q, nq, b, nb, d), *out;

	xj_ok(&st);
	CU_ASSERT_FATAL(cur->create(&cfg, &be, &st) == XJ_OK);
	out = pinned ? be->block_alloc(be, n + 16, &st) :
		       malloc(sizeof(float) * (size_t)(n + 16));
	CU_ASSERT_FATAL(out != NULL);
	/* a block too large to address is a resource error */
	CU_ASSERT_PTR_NULL(be->block_alloc(be, INT64_MAX, &st));
	CU_ASSERT_EQUAL(st.code, XJ_EXIT_RESOURCE);
	xj_ok(&st);
	memset(out, 0xff, sizeof(float) * (size_t)(n + 16));   /* NaN */
	xj_rows qr = { q, nq, d, 0, 0 }, br = { b, nb, d, 0, 0 };

	CU_ASSERT_EQUAL(backend_matrix_block(be, &qr, &br, out, &st), XJ_OK);
	for (int64_t e = 0; e < n; e++)
		if (!same_f32(out[e], want[e]) && bad++ < 4)
			printf("\n  matrix %s %lldx%lld d=%lld at (%lld,%lld): got %.9g want %.9g",
			       metric_names[m], (long long)nq, (long long)nb,
			       (long long)d, (long long)(e / nb),
			       (long long)(e % nb), out[e], want[e]);
	for (int e = 0; e < 16; e++)
		if (memcmp(&out[n + e], &poison_bits, sizeof(float)))
			bad++;   /* wrote past the block */
	if (pinned)
		be->block_free(be, out);
	else
		free(out);
	be->release(be);
	free(want);
	return bad;
}

static void test_matrix(void)
{
	const int64_t nqs[] = { 1, 3, 5, 33, 67, 600 };
	const int64_t nbs[] = { 1, 15, 16, 17, 31, 100, 4097 };
	const int64_t d = 37;
	float *q = gauss_rows(600, d, 0, 1), *b = gauss_rows(4097, d, 0, 1);
	float *qo = gauss_rows(600, d, 1e4, 1);
	float *bo = gauss_rows(4097, d, 1e4, 1);
	int64_t bad = 0;

	CU_ASSERT_FATAL(q && b && qo && bo);
	for (size_t mi = 0; mi < 4; mi++)
		for (size_t a = 0; a < UNIT_COUNT(nqs); a++)
			for (size_t c = 0; c < UNIT_COUNT(nbs); c++) {
				int pinned = (int)((mi + a + c) % 2);

				if (small_only && nqs[a] * nbs[c] > 100000)
					continue;

				bad += check_matrix(metrics[mi], q, nqs[a], b,
						    nbs[c], d, (int)(a % 3),
						    pinned);
				bad += check_matrix(metrics[mi], qo, nqs[a], bo,
						    nbs[c], d, 2, !pinned);
			}
	CU_ASSERT_EQUAL(bad, 0);
	/* dimensions that are not multiples of the CUDA's 32-element slab */
	for (size_t mi = 0; mi < 4; mi++)
		CU_ASSERT_EQUAL(check_matrix(metrics[mi], q, 70, b, 90, 1, 0,
					     0) +
				check_matrix(metrics[mi], q, 70, b, 90, 33, 0,
					     1) +
				check_matrix(metrics[mi], q, 70, b, 90, 64, 0,
					     0), 0);
	/* a backend made for top-k, across a tile boundary of the CUDA's
	 * (512 x 4096), offset rows */
	matrix_k = 10;
	for (size_t mi = 0; mi < 4; mi++)
		CU_ASSERT_EQUAL(check_matrix(metrics[mi], qo, small_only ? 5 : 600,
					     bo, small_only ? 100 : 4097, d, 2,
					     (int)(mi % 2)), 0);
	matrix_k = 0;
	/* empty blocks write nothing */
	xj_backend_cfg cfg = matrix_cfg(XJ_METRIC_L2, d, 3, 3, 0);
	xj_backend *be;
	xj_status st;
	float out[4];

	xj_ok(&st);
	CU_ASSERT_FATAL(cur->create(&cfg, &be, &st) == XJ_OK);
	xj_rows q0 = { q, 0, d, 0, 0 }, b3 = { b, 3, d, 0, 0 };

	memset(out, 0xff, sizeof(out));
	CU_ASSERT_EQUAL(backend_matrix_block(be, &q0, &b3, out, &st), XJ_OK);
	CU_ASSERT_EQUAL(backend_matrix_block(be, &b3, &q0, out, &st), XJ_OK);
	CU_ASSERT(isnan(out[0]) && isnan(out[3]));
	be->release(be);
	free(q);
	free(b);
	free(qo);
	free(bo);
}

/*
 * Rows built to leave a double GEMM's value undecided (metric.h, "Exact
 * values from a double GEMM"), n rows of d >= 4 in each of q and b:
 *   - dot products on a float32 rounding boundary: q = (a, h, e, 0...)
 *     with h half an ulp of a, against b's row (1, 1, 1, 0...), so that
 *     q.b = a + h + e straddles the midpoint by e (0, or +-2^-40 a), at
 *     scales 2^-60 to 2^56;
 *   - duplicates and near-duplicates (one coordinate 1 ulp away), whose
 *     l2 distance is all cancellation, at magnitudes up to 1e18;
 *   - Gaussian rows of magnitudes 10^-20 to 10^17, one per row or one
 *     per value, and rows holding a value of 10^18 (inputs must keep
 *     their squared norm below 10^37).
 */
static void undecided_rows(int64_t n, int64_t d, float *q, float *b)
{
	rng_state = TESTDATA_SEED;     /* the same rows wherever it runs */
	for (int64_t i = 0; i < n * d; i++) {
		q[i] = (float)rng_gauss();
		b[i] = (float)rng_gauss();
	}
	for (int64_t i = 0; i < n; i++) {
		float *qr = q + i * d, *br = b + i * d;
		double scale = pow(10.0, -20.0 + 37.0 * rng_unit());
		float a = (float)(1.0 + rng_unit());
		double h = 0x1p-24, e = (double)(i % 3 - 1) * 0x1p-40;
		float sc = ldexpf(1.0f, (int)(i % 117) - 60);

		switch (i % 4) {
		case 0:         /* q.b on a rounding boundary */
			memset(qr, 0, sizeof(float) * (size_t)d);
			qr[0] = a * sc;
			qr[1] = (float)(h * sc);
			qr[2] = (float)(e * sc);
			qr[3] = sc * 0x1p-30f;    /* no zero row (cosine) */
			memset(br, 0, sizeof(float) * (size_t)d);
			br[0] = br[1] = br[2] = 1.0f;
			br[3] = 0x1p-60f;
			break;
		case 1:         /* a duplicate, at a large magnitude */
			for (int64_t j = 0; j < d; j++)
				qr[j] = br[j] = (float)(qr[j] * 1e17);
			break;
		case 2:         /* a near-duplicate */
			for (int64_t j = 0; j < d; j++)
				br[j] = qr[j] = (float)(qr[j] * scale);
			br[i % d] = nextafterf(br[i % d], INFINITY);
			break;
		default:        /* any magnitude */
			for (int64_t j = 0; j < d; j++) {
				qr[j] = (float)(qr[j] * scale);
				br[j] = (float)(br[j] * pow(10.0, -20.0 + 37.0 *
							   rng_unit()));
			}
			if (i % 8 == 3)
				qr[i % d] = (float)(i % 16 == 3 ? 1e18 : -1e18);
		}
	}
}

/* Every metric on undecided_rows, bit for bit: n x n, and (full runs)
 * 600 of them against 4100, across the CUDA's tile boundaries (512 x
 * 4096) with partial 32 x 32 squares; a backend that counts them says how
 * many pairs it computed canonically. */
static void test_matrix_undecided(void)
{
	const int64_t n = 300, d = 24, nl = 4100, nql = 600;
	float *q = malloc(sizeof(float) * (size_t)(nl * d));
	float *b = malloc(sizeof(float) * (size_t)(nl * d));
	float *out = malloc(sizeof(float) * (size_t)(nql * nl));

	CU_ASSERT_FATAL(q && b && out);
	for (int shape = 0; shape < (small_only ? 1 : 2); shape++) {
		int64_t nq = shape ? nql : n, nb = shape ? nl : n;

		undecided_rows(shape ? nl : n, d, q, b);
		for (size_t mi = 0; mi < 4; mi++) {
			xj_metric m = metrics[mi];
			xj_backend_cfg cfg = matrix_cfg(m, d, nq, nb, 0);
			float *want = ref_matrix(m, q, nq, b, nb, d);
			xj_rows qr = { q, nq, d, 0, 0 }, br = { b, nb, d, 0, 0 };
			xj_backend *be;
			xj_status st;
			int64_t bad = 0;

			CU_ASSERT_FATAL(want != NULL);
			xj_ok(&st);
			CU_ASSERT_FATAL(cur->create(&cfg, &be, &st) == XJ_OK);
			memset(out, 0xff, sizeof(float) * (size_t)(nq * nb));
			CU_ASSERT_EQUAL(backend_matrix_block(be, &qr, &br, out,
							     &st), XJ_OK);
			for (int64_t e = 0; e < nq * nb; e++)
				if (!same_f32(out[e], want[e]) && bad++ < 4)
					printf("\n  undecided %s %lldx%lld at (%lld,%lld): got %a want %a",
					       metric_names[m], (long long)nq,
					       (long long)nb,
					       (long long)(e / nb),
					       (long long)(e % nb), out[e],
					       want[e]);
			CU_ASSERT_EQUAL(bad, 0);
			printf("\n  %s %lldx%lld: %lld pairs computed canonically",
			       metric_names[m], (long long)nq, (long long)nb,
			       (long long)be->matrix_exact_pairs);
			CU_ASSERT(be->matrix_exact_pairs <= nq * nb);
			be->release(be);
			free(want);
		}
	}
	free(q);
	free(b);
	free(out);
}

/*
 * Blocks the way driver_matrix runs them: buffers from block_alloc used
 * in turn, each block started, the previous one compared (the driver's
 * write) while it runs, then waited for. Blocks of 1100 x 9000 span 3 x 3
 * CUDA tiles, so its tile buffers and their events are reused within a
 * block and across blocks. Each buffer is poisoned before its block
 * starts. A backend that queues (matrix_async) refuses a second block.
 */
static void test_matrix_pipeline(void)
{
	const int64_t d = 48, nq = 1100, nb = 9000;
	const int64_t b0s[] = { 0, 4000, 123, 8999 };
	float *q = gauss_rows(nq, d, 0, 1), *b = gauss_rows(nb, d, 0.5, 1);
	float *want, *blk[2] = { NULL, NULL };
	int64_t rows[2] = { 0, 0 }, bad = 0;
	xj_backend_cfg cfg = matrix_cfg(XJ_METRIC_L2, d, nq, nb, 0);
	xj_backend *be;
	xj_status st;

	CU_ASSERT_FATAL(q && b);
	if (small_only) {
		free(q);
		free(b);
		return;
	}
	want = ref_matrix(XJ_METRIC_L2, q, nq, b, nb, d);
	xj_ok(&st);
	CU_ASSERT_FATAL(cur->create(&cfg, &be, &st) == XJ_OK);
	for (int i = 0; i < 2; i++) {
		blk[i] = be->block_alloc(be, nq * nb, &st);
		CU_ASSERT_FATAL(blk[i] != NULL);
	}
	for (int i = 0; i <= 4; i++) {
		int cur_blk = i & 1, prev = 1 - cur_blk;

		if (i < 4) {
			/* tagged, as the driver passes a round's queries:
			 * a backend may keep them across the blocks */
			xj_rows qr = { q, nq, d, 0, 7 };
			xj_rows br = { b + b0s[i] * d, nb - b0s[i], d, b0s[i], 0 };

			memset(blk[cur_blk], 0xff,
			       sizeof(float) * (size_t)(nq * nb));
			CU_ASSERT_EQUAL(be->matrix_start(be, &qr, &br,
							 blk[cur_blk], &st),
					XJ_OK);
			/* one block at most is queued */
			if (be->matrix_async) {
				CU_ASSERT_EQUAL(be->matrix_start(be, &qr, &br,
								 blk[prev],
								 &st),
						XJ_EXIT_INTERNAL);
				xj_ok(&st);
			}
			rows[cur_blk] = br.rows;
		}
		if (i > 0) {    /* the block before, as the driver writes it */
			int64_t b0 = b0s[i - 1], r = rows[prev];

			for (int64_t e = 0; e < nq * r; e++)
				if (!same_f32(blk[prev][e],
					      want[e / r * nb + b0 + e % r]) &&
				    bad++ < 4)
					printf("\n  block %d at (%lld,%lld): got %.9g want %.9g",
					       i - 1, (long long)(e / r),
					       (long long)(e % r), blk[prev][e],
					       want[e / r * nb + b0 + e % r]);
		}
		CU_ASSERT_EQUAL(be->matrix_wait(be, &st), XJ_OK);
		/* a second wait has nothing to wait for */
		CU_ASSERT_EQUAL(be->matrix_wait(be, &st), XJ_OK);
	}
	CU_ASSERT_EQUAL(bad, 0);
	for (int i = 0; i < 2; i++)
		be->block_free(be, blk[i]);
	be->release(be);
	free(q);
	free(b);
	free(want);
}

/*
 * A query block's tag (xj_rows.tag) lets a backend keep its copy, but
 * only for rows with the same tag, first row and count: a block of other
 * queries under the same tag at another first row, one after a top-k
 * session, and an untagged one must all be computed from what is given.
 */
static int64_t tagged_block(xj_backend *be, const float *q, int64_t q0,
			    uint64_t tag, const float *b, int64_t nq,
			    int64_t nb, int64_t d, const float *want)
{
	xj_rows qr = { q, nq, d, q0, tag }, br = { b, nb, d, 0, 0 };
	float *out = malloc(sizeof(float) * (size_t)(nq * nb));
	int64_t bad = 0;
	xj_status st;

	CU_ASSERT_FATAL(out != NULL);
	xj_ok(&st);
	memset(out, 0xff, sizeof(float) * (size_t)(nq * nb));
	CU_ASSERT_EQUAL(backend_matrix_block(be, &qr, &br, out, &st), XJ_OK);
	for (int64_t e = 0; e < nq * nb; e++)
		bad += !same_f32(out[e], want[e]);
	free(out);
	return bad;
}

static void test_matrix_tag(void)
{
	const int64_t d = 29, nq = 70, nb = 90, k = 3;
	float *q1 = gauss_rows(nq, d, 0, 1), *q2 = gauss_rows(nq, d, 3, 1);
	float *b = gauss_rows(nb, d, 0, 1);
	float *key = malloc(sizeof(float) * nq * k);
	int64_t *idx = malloc(sizeof(int64_t) * nq * k), bad = 0;
	float *w1 = ref_matrix(XJ_METRIC_L2, q1, nq, b, nb, d);
	float *w2 = ref_matrix(XJ_METRIC_L2, q2, nq, b, nb, d);
	xj_backend_cfg cfg = matrix_cfg(XJ_METRIC_L2, d, nq, nb, 0);
	xj_rows qt = { q2, nq, d, 0, 0 }, bt = { b, nb, d, 0, 0 };
	xj_backend *be;
	xj_status st;

	CU_ASSERT_FATAL(q1 && q2 && b && key && idx && w1 && w2);
	cfg.k = k;
	xj_ok(&st);
	CU_ASSERT_FATAL(cur->create(&cfg, &be, &st) == XJ_OK);
	bad += tagged_block(be, q1, 0, 5, b, nq, nb, d, w1);
	bad += tagged_block(be, q1, 0, 5, b, nq, nb, d, w1);  /* kept */
	bad += tagged_block(be, q2, 100, 5, b, nq, nb, d, w2); /* moved */
	bad += tagged_block(be, q1, 0, 0, b, nq, nb, d, w1);  /* untagged */
	bad += tagged_block(be, q2, 0, 5, b, nq, nb, d, w2);
	/* a top-k session in between uses the query buffer too */
	CU_ASSERT_EQUAL(be->topk_begin(be, &qt, &st), XJ_OK);
	CU_ASSERT_EQUAL(be->topk_add(be, &bt, &st), XJ_OK);
	CU_ASSERT_EQUAL(be->topk_end(be, key, idx, &st), XJ_OK);
	bad += tagged_block(be, q1, 0, 6, b, nq, nb, d, w1);
	CU_ASSERT_EQUAL(bad, 0);
	be->release(be);
	free(q1);
	free(q2);
	free(b);
	free(key);
	free(idx);
	free(w1);
	free(w2);
}

/* ---- range join -------------------------------------------------------- */

/*
 * Every pair with canonical key <= the threshold key, each row in (key,
 * index) order, for every chunking; large-norm rows (the GEMM cancels)
 * and duplicates (ties), every metric, with and without self. A backend
 * without range_begin offers no range join and is not asked.
 */
static int64_t range_case(const tcase *tc, const chunking *ch)
{
	xj_backend_cfg cfg = cfg_of(tc, ch->threads);
	int64_t qc = ch->qc ? ch->qc : tc->nq, bc = ch->bc ? ch->bc : tc->nb;
	int64_t bad = 0, *count = malloc(sizeof(int64_t) * (size_t)qc);
	int64_t *idx = malloc(sizeof(int64_t) * (size_t)(qc * tc->nb));
	float *val = malloc(sizeof(float) * (size_t)(qc * tc->nb));
	double *bb = malloc(sizeof(double) * (size_t)tc->nb);
	xj_backend *be = NULL;
	xj_status st;

	xj_ok(&st);
	CU_ASSERT_FATAL(count && idx && val && bb);
	/* the planned chunks with cfg.range (the CUDA backend's pair buffer
	 * made at create) on threads 0 and 2, else none (made at the first
	 * range_begin, buffers grown to the chunks) */
	if (ch->threads % 2 == 0) {
		cfg.range = 1;
		cfg.max_query_rows = qc;
		cfg.max_base_rows = bc;
	}
	CU_ASSERT_EQUAL_FATAL(cur->create(&cfg, &be, &st), XJ_OK);
	for (int64_t j = 0; j < tc->nb; j++)
		bb[j] = metric_norm2(tc->b + j * tc->d, tc->d);
	for (int64_t q0 = 0; q0 < tc->nq && be->range_begin; q0 += qc) {
		int64_t nq = tc->nq - q0 < qc ? tc->nq - q0 : qc, at = 0;
		xj_rows q = { tc->q + q0 * tc->d, nq, tc->d, q0, 0 };

		CU_ASSERT_EQUAL_FATAL(be->range_begin(be, &q, &st), XJ_OK);
		for (int64_t b0 = 0; b0 < tc->nb; b0 += bc) {
			xj_rows b = { tc->b + b0 * tc->d, tc->nb - b0 < bc ?
				      tc->nb - b0 : bc, tc->d, b0, 0 };

			CU_ASSERT_EQUAL_FATAL(be->range_add(be, &b, &st),
					      XJ_OK);
		}
		CU_ASSERT_EQUAL_FATAL(be->range_end(be, count, &st), XJ_OK);
		CU_ASSERT_EQUAL_FATAL(be->range_take(be, idx, val, &st),
				      XJ_OK);
		for (int64_t i = 0; i < nq; i++) {
			const float *x = tc->q + (q0 + i) * tc->d;
			double qq = metric_norm2(x, tc->d);
			int64_t n = 0;

			/* the reference row, in index order, then sorted */
			ref_pair *p = malloc(sizeof(ref_pair) *
					     (size_t)(tc->nb + 1));

			CU_ASSERT_FATAL(p != NULL);
			for (int64_t j = 0; j < tc->nb; j++) {
				float key = metric_key(tc->metric, x,
						       tc->b + j * tc->d,
						       tc->d, qq, bb[j]);

				if (key <= tc->threshold_key &&
				    !(tc->self && j == q0 + i))
					p[n++] = (ref_pair){ key, j };
			}
			qsort(p, (size_t)n, sizeof(*p), ref_cmp);
			bad += count[i] != n;
			for (int64_t e = 0; e < n && count[i] == n; e++)
				bad += idx[at + e] != p[e].idx ||
				       val[at + e] != metric_key_to_value(
					       tc->metric, p[e].key);
			at += count[i];
			free(p);
		}
	}
	if (bad)
		printf("\n  range %s: %lld mismatches (chunks %lld x %lld)",
		       metric_names[tc->metric], (long long)bad,
		       (long long)qc, (long long)bc);
	be->release(be);
	free(count);
	free(idx);
	free(val);
	free(bb);
	return bad;
}

static void test_range(void)
{
	const int64_t d = 32, nb = 1500, nq = 40;
	float *b = gauss_rows(nb, d, 1e4, 1);   /* large norms: cancellation */
	const chunking ch[] = { { 0, 0, 0, 0 }, { 7, 333, 0, 0 },
				{ 1, 1025, 0, 2 }, { 40, 1100, 0, 3 } };

	CU_ASSERT_FATAL(b != NULL);
	for (int i = 0; i < 5; i++)   /* ties: rows 100.. repeat rows 0.. */
		memcpy(b + (100 + i) * d, b + i * d, sizeof(float) * d);
	for (int m = 0; m < 4; m++) {
		tcase tc = { (xj_metric)m, 0, 1, 0, m % 2, b, nq, b, nb, d };
		ref_lists ref;

		/* the key of rank 30 of query 0: some rows keep dozens */
		ref_build(&ref, tc.metric, b, 1, b, nb, d, 31);
		tc.threshold_key = ref.key[30];
		ref_free(&ref);
		for (int c = 0; c < (int)UNIT_COUNT(ch); c++)
			CU_ASSERT_EQUAL(range_case(&tc, &ch[c]), 0);
	}
	free(b);
}

/*
 * Sized for the CUDA tiles (512 x 4096) and the CUDA pair buffer (4 tiles
 * of pairs, 8.4 million): 1100 x 9000 rows, most pairs within the
 * threshold (every pair, then the key of rank 8000 of query 0), so that
 * the buffer fills, is drained to the host and the rows are put together
 * from several drains; and a query chunk of 600 rows (two query tiles)
 * against base chunks of 5000 (uneven sub-tiles).
 */
static void test_range_tiles(void)
{
	const int64_t d = 16, nb = 9000, nq = 1100;
	float *b = gauss_rows(nb, d, 0, 1);
	const chunking ch[] = { { 0, 0, 0, 0 }, { 600, 5000, 0, 1 } };

	if (small_only) {
		free(b);
		return;
	}
	CU_ASSERT_FATAL(b != NULL);
	for (int m = 0; m < 4; m++) {
		tcase tc = { (xj_metric)m, 0, 1, 1e30f, m % 2, b, nq, b, nb,
			     d };
		ref_lists ref;

		if (m == 0)    /* every pair */
			CU_ASSERT_EQUAL(range_case(&tc, &ch[0]), 0);
		ref_build(&ref, tc.metric, b, 1, b, nb, d, 8001);
		tc.threshold_key = ref.key[8000];
		ref_free(&ref);
		for (int c = 0; c < (int)UNIT_COUNT(ch); c++)
			CU_ASSERT_EQUAL(range_case(&tc, &ch[c]), 0);
	}
	free(b);
}

/* ---- the suite --------------------------------------------------------- */

static const unit_test contract_tests[] = {
	{ "gaussian, every metric, k and chunking", test_gaussian },
	{ "clustered", test_clustered },
	{ "large norms need rescoring", test_large_norms },
	{ "near ties need rescoring", test_near_ties },
	{ "duplicated rows (ties)", test_duplicates },
	{ "self-join: shared rows scored once", test_self_join },
	{ "k above the base: padding", test_padding },
	{ "threshold extremes", test_threshold_extremes },
	{ "empty chunks", test_empty_chunks },
	{ "gemm flops", test_gemm_flops },
	{ "glove l2 and cosine", test_glove },
	{ "errors", test_errors },
	{ "matrix equals canonical values", test_matrix },
	{ "matrix blocks queued in turn", test_matrix_pipeline },
	{ "matrix pairs a double GEMM leaves undecided",
	  test_matrix_undecided },
	{ "matrix: a tagged query block is kept only while the same",
	  test_matrix_tag },
	{ "range: every pair within the threshold, sorted", test_range },
	{ "range: the CUDA tiles and pair buffer", test_range_tiles },
};

int contract_add(const contract_backend *be)
{
	char suite[64];

	cur = be;
	snprintf(suite, sizeof(suite), "contract_%s", be->name);
	return unit_add(suite, contract_tests, UNIT_COUNT(contract_tests));
}

int contract_run(const contract_backend *be, int argc, char **argv)
{
	small_only = argc > 1 && !strcmp(argv[1], "--small");
	if (argc > 1 + small_only) {
		fprintf(stderr, "usage: %s [--small]\n", argv[0]);
		return 2;
	}
	if (small_only)
		printf("--small: the data sized for the CUDA tiles is left out\n");
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	if (!contract_add(be)) {
		CU_cleanup_registry();
		return 1;
	}
	return unit_run_all();
}
