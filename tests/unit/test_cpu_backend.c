/*
 * test_cpu_backend.c: the CPU backend against a naive reference.
 *
 * Reference top-k: for each query, the canonical key (metric_key) of every
 * base row, filtered by threshold and self, sorted by (key, index), first
 * k, padded. The backend must return exactly those bits (memcmp) for every
 * chunking of queries and bases, thread count, k and metric; reported keys
 * are also checked against long double scores (abs + |ref| * eps).
 * Data: Gaussian, clustered, large offsets (the expanded GEMM form cancels,
 * so only rescoring can be right), many duplicated rows (ties), tiny base
 * sets (padding), empty chunks, and real GloVe rows when the file exists.
 */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "testdata.h"
#include "config/status.h"
#include "kernels/backend.h"
#include "kernels/metric.h"
#include "kernels/topk.h"

#define GLOVE_DEFAULT "/work/shared/data/glove-100d-100k.h5"

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

typedef struct tcase {
	xj_metric metric;
	int64_t k;
	int has_threshold;
	float threshold_key;
	int self;
	int threads;
	const float *q;
	int64_t nq;
	const float *b;
	int64_t nb;
	int64_t d;
} tcase;

static void ref_topk(const tcase *tc, float *key, int64_t *idx)
{
	int64_t d = tc->d, k = tc->k;
	ref_pair *p = malloc(sizeof(ref_pair) * (size_t)(tc->nb + 1));
	double *bb = malloc(sizeof(double) * (size_t)(tc->nb + 1));

	CU_ASSERT_FATAL(p && bb);
	for (int64_t j = 0; j < tc->nb; j++)
		bb[j] = metric_norm2(tc->b + j * d, d);
	for (int64_t i = 0; i < tc->nq; i++) {
		const float *q = tc->q + i * d;
		double qq = metric_norm2(q, d);
		int64_t n = 0;

		for (int64_t j = 0; j < tc->nb; j++) {
			float kk = metric_key(tc->metric, q, tc->b + j * d, d, qq,
					      bb[j]);

			if (tc->self && i == j)
				continue;
			if (tc->has_threshold && !(kk <= tc->threshold_key))
				continue;
			p[n].key = kk;
			p[n++].idx = j;
		}
		qsort(p, (size_t)n, sizeof(*p), ref_cmp);
		for (int64_t e = 0; e < k; e++) {
			key[i * k + e] = e < n ? p[e].key : INFINITY;
			idx[i * k + e] = e < n ? p[e].idx : -1;
		}
	}
	free(p);
	free(bb);
}

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

/* ---- running the backend --------------------------------------------- */

static xj_backend_cfg cfg_of(const tcase *tc, int64_t qc, int64_t bc)
{
	xj_backend_cfg cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = tc->metric;
	cfg.k = tc->k;
	cfg.d = tc->d;
	cfg.has_threshold = tc->has_threshold;
	cfg.threshold_key = tc->threshold_key;
	cfg.self = tc->self;
	cfg.threads = tc->threads;
	cfg.max_query_rows = qc;
	cfg.max_base_rows = bc;
	return cfg;
}

/* Top-k through the backend with query chunks of qc rows and base chunks
 * of bc rows, with empty chunks around the base stream when empties. */
static int run_topk(const tcase *tc, int64_t qc, int64_t bc, int empties,
		    float *key, int64_t *idx)
{
	xj_backend_cfg cfg = cfg_of(tc, qc, bc);
	xj_backend *be;
	xj_status st;
	int64_t d = tc->d, k = tc->k;

	xj_ok(&st);
	if (backend_cpu_create(&cfg, &be, &st))
		goto fail;
	for (int64_t q0 = 0; q0 < tc->nq; q0 += qc) {
		xj_rows q = { tc->q + q0 * d, tc->nq - q0 < qc ? tc->nq - q0 : qc,
			      d, q0 };
		xj_rows none = { tc->b, 0, d, 0 };

		if (be->topk_begin(be, &q, &st))
			goto fail_be;
		if (empties && be->topk_add(be, &none, &st))
			goto fail_be;
		for (int64_t b0 = 0; b0 < tc->nb; b0 += bc) {
			xj_rows b = { tc->b + b0 * d,
				      tc->nb - b0 < bc ? tc->nb - b0 : bc, d, b0 };

			if (be->topk_add(be, &b, &st))
				goto fail_be;
			if (empties && b0 == 0 && be->topk_add(be, &none, &st))
				goto fail_be;
		}
		if (be->topk_end(be, key + q0 * k, idx + q0 * k, &st))
			goto fail_be;
	}
	be->release(be);
	return 0;
fail_be:
	be->release(be);
fail:
	printf("\n  backend failed: %s", st.msg);
	return 1;
}

/* Compare a backend result with the reference; print the first
 * mismatches. Returns the number of mismatching entries. */
static int64_t compare(const tcase *tc, const char *what, const float *key,
		       const int64_t *idx, const float *rkey,
		       const int64_t *ridx)
{
	int64_t bad = 0, k = tc->k;

	for (int64_t e = 0; e < tc->nq * k; e++) {
		int same = !memcmp(&key[e], &rkey[e], sizeof(float)) &&
			   idx[e] == ridx[e];

		if (same && idx[e] >= 0 &&
		    !key_close(tc->metric, tc->q + (e / k) * tc->d,
			       tc->b + idx[e] * tc->d, tc->d, key[e]))
			same = 0;
		if (!same && bad++ < 4)
			printf("\n  %s %s k=%lld thr=%d self=%d: query %lld rank %lld: got (%.9g, %lld) want (%.9g, %lld)",
			       metric_names[tc->metric], what, (long long)k,
			       tc->has_threshold, tc->self, (long long)(e / k),
			       (long long)(e % k), key[e], (long long)idx[e],
			       rkey[e], (long long)ridx[e]);
	}
	return bad;
}

typedef struct chunking {
	int64_t qc, bc;
	int empties;
	int threads;
} chunking;

/* Reference once, then the backend for every chunking: all must equal the
 * reference bit for bit. */
static int64_t check_case(tcase tc, const chunking *ch, int nch)
{
	int64_t n = tc.nq * tc.k;
	float *rkey = malloc(sizeof(float) * (size_t)(n + 1));
	int64_t *ridx = malloc(sizeof(int64_t) * (size_t)(n + 1));
	float *key = malloc(sizeof(float) * (size_t)(n + 1));
	int64_t *idx = malloc(sizeof(int64_t) * (size_t)(n + 1));
	int64_t bad = 0;

	CU_ASSERT_FATAL(rkey && ridx && key && idx);
	ref_topk(&tc, rkey, ridx);
	for (int c = 0; c < nch; c++) {
		char what[64];
		int64_t qc = ch[c].qc > 0 ? ch[c].qc : tc.nq;
		int64_t bc = ch[c].bc > 0 ? ch[c].bc : tc.nb;

		if (qc < 1)
			qc = 1;
		if (bc < 1)
			bc = 1;
		tc.threads = ch[c].threads;
		snprintf(what, sizeof(what), "chunks %lldx%lld t%d",
			 (long long)qc, (long long)bc, tc.threads);
		poison(key, idx, n);
		if (run_topk(&tc, qc, bc, ch[c].empties, key, idx)) {
			bad++;
			continue;
		}
		bad += compare(&tc, what, key, idx, rkey, ridx);
	}
	free(rkey);
	free(ridx);
	free(key);
	free(idx);
	return bad;
}

/* A threshold that cuts most k-lists short: the key of rank r of query 0
 * in the unthresholded reference. */
static float pick_threshold(tcase tc, int64_t r)
{
	float *key = malloc(sizeof(float) * (size_t)(tc.nq * (r + 1)));
	int64_t *idx = malloc(sizeof(int64_t) * (size_t)(tc.nq * (r + 1)));
	float t;

	CU_ASSERT_FATAL(key && idx);
	tc.k = r + 1;
	tc.has_threshold = 0;
	ref_topk(&tc, key, idx);
	/* through the value and back, as the driver does */
	t = metric_value_to_key(tc.metric,
				metric_key_to_value(tc.metric, key[r]));
	free(key);
	free(idx);
	return t;
}

static const chunking chunkings[] = {
	{ 0, 0, 0, 0 },      /* whole */
	{ 7, 333, 1, 0 },
	{ 1, 1025, 0, 2 },
	{ 40, 1100, 0, 3 },  /* a thread team over query tiles */
	{ 16, 7, 1, 3 },
	{ 13, 1, 0, 1 },
};
#define NCH ((int)(sizeof(chunkings) / sizeof(chunkings[0])))

/* Every metric, k, threshold and self setting on one data set (q may be
 * the first rows of b for self). */
static int64_t sweep(const float *q, int64_t nq, const float *b, int64_t nb,
		     int64_t d, const int64_t *ks, int nks, int nch)
{
	int64_t bad = 0;

	for (size_t mi = 0; mi < 4; mi++)
		for (int ki = 0; ki < nks; ki++)
			for (int v = 0; v < 4; v++) {
				tcase tc = { metrics[mi], ks[ki], v & 1, 0, v >> 1,
					     0, q, nq, b, nb, d };

				if (tc.self && q != b)
					continue;
				if (tc.has_threshold)
					tc.threshold_key = pick_threshold(tc, 9);
				bad += check_case(tc, chunkings, nch);
			}
	return bad;
}

/* ---- tests ----------------------------------------------------------- */

static void test_gaussian(void)
{
	const int64_t d = 24, nb = 2100, nq = 61;
	const int64_t ks[] = { 1, 5, 64 };
	float *b = gauss_rows(nb, d, 0, 1);
	float *q = gauss_rows(nq, d, 0.1, 1);

	CU_ASSERT_FATAL(b && q);
	/* independent queries, then queries = first rows of the base (self) */
	CU_ASSERT_EQUAL(sweep(q, nq, b, nb, d, ks, 3, NCH - 1), 0);
	CU_ASSERT_EQUAL(sweep(b, nq, b, nb, d, ks, 3, NCH - 1), 0);
	free(b);
	free(q);
}

static void test_clustered(void)
{
	const int64_t d = 48, nb = 1500, nq = 50;
	const int64_t ks[] = { 5, 64 };
	float *b = cluster_rows(nb, d, 20, 0.05);

	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT_EQUAL(sweep(b, nq, b, nb, d, ks, 2, NCH), 0);
	free(b);
}

/* Offsets of 1e4 with unit spread: |q|^2 + |b|^2 - 2 q.b cancels to
 * noise in float, every pair passes the gate and rescoring decides. */
static void test_large_norms(void)
{
	const int64_t d = 32, nb = 1200, nq = 30;
	const int64_t ks[] = { 1, 10 };
	float *b = gauss_rows(nb, d, 1e4, 1);

	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT_EQUAL(sweep(b, nq, b, nb, d, ks, 2, 3), 0);
	free(b);
}

static void test_near_ties(void)
{
	const int64_t d = 32, nb = 1200, nq = 20;
	const int64_t ks[] = { 1, 10 };
	float *b, *q;

	near_tie_rows(nb, nq, d, &b, &q);
	CU_ASSERT_FATAL(b && q);
	CU_ASSERT_EQUAL(sweep(q, nq, b, nb, d, ks, 2, 3), 0);
	CU_ASSERT_EQUAL(sweep(b, nq, b, nb, d, ks, 2, 2), 0);
	free(b);
	free(q);
}

/* 2000 rows that are 5 distinct rows repeated: equal keys everywhere, far
 * more duplicates than k + pending slots; chunks split the runs. */
static void test_duplicates(void)
{
	const int64_t d = 16, nb = 2000, nq = 12;
	const int64_t ks[] = { 5, 64 };
	float *b = dup_rows(nb, d, 5);
	float *q = gauss_rows(nq, d, 0, 1);

	CU_ASSERT_FATAL(b && q);
	memcpy(q, b + 3 * d, sizeof(float) * (size_t)d);  /* exact duplicate */
	CU_ASSERT_EQUAL(sweep(q, nq, b, nb, d, ks, 2, NCH), 0);
	CU_ASSERT_EQUAL(sweep(b, nq, b, nb, d, ks, 2, 3), 0);
	free(b);
	free(q);
}

/* k larger than the base: padding, with and without threshold and self. */
static void test_k_exceeds_base(void)
{
	const int64_t d = 10, nb = 40, nq = 9;
	const int64_t ks[] = { 41, 50 };
	float *b = gauss_rows(nb, d, 0, 2);

	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT_EQUAL(sweep(b, nq, b, nb, d, ks, 2, NCH), 0);
	free(b);
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
		tcase tc = { m, 7, 1, metric_value_to_key(m, none), 0, 0,
			     b, nq, b, nb, d };

		bad += check_case(tc, chunkings, 3);
		tc.threshold_key = metric_value_to_key(m, m == XJ_METRIC_IP ?
						       -1e300 : 1e300);
		tc.self = 1;
		bad += check_case(tc, chunkings, 3);
	}
	CU_ASSERT_EQUAL(bad, 0);
	free(b);
}

/* Empty query chunk (nothing written) and a base made of empty chunks
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
	CU_ASSERT_FATAL(backend_cpu_create(&cfg, &be, &st) == XJ_OK);
	xj_rows q0 = { x, 0, d, 0 }, q5 = { x, 5, d, 100 }, b0 = { x, 0, d, 7 };

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

static void test_gemm_flops(void)
{
	const int64_t d = 20, nq = 70, nb = 1300;
	float *x = gauss_rows(nb, d, 0, 1);
	float key[70 * 3];
	int64_t idx[70 * 3];
	xj_backend_cfg cfg;
	xj_backend *be;
	xj_status st;

	CU_ASSERT_FATAL(x != NULL);
	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = XJ_METRIC_IP;
	cfg.k = 3;
	cfg.d = d;
	xj_ok(&st);
	CU_ASSERT_FATAL(backend_cpu_create(&cfg, &be, &st) == XJ_OK);
	xj_rows q = { x, nq, d, 0 }, b1 = { x, 1000, d, 0 },
		b2 = { x + 1000 * d, nb - 1000, d, 1000 };

	CU_ASSERT_EQUAL(be->topk_begin(be, &q, &st), XJ_OK);
	CU_ASSERT_EQUAL(be->topk_add(be, &b1, &st), XJ_OK);
	CU_ASSERT_EQUAL(be->topk_add(be, &b2, &st), XJ_OK);
	CU_ASSERT_EQUAL(be->topk_end(be, key, idx, &st), XJ_OK);
	CU_ASSERT_EQUAL(be->gemm_flops, 2.0 * nq * nb * d);
	be->release(be);
	free(x);
}

static void test_errors(void)
{
	const int64_t d = 6;
	float *x = gauss_rows(8, d, 0, 1);
	float key[8 * 2];
	int64_t idx[8 * 2];
	xj_backend_cfg cfg;
	xj_backend *be;
	xj_status st;

	CU_ASSERT_FATAL(x != NULL);
	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = XJ_METRIC_COSINE;
	cfg.k = 2;
	cfg.d = d;
	xj_ok(&st);
	CU_ASSERT_FATAL(backend_cpu_create(&cfg, &be, &st) == XJ_OK);
	xj_rows q = { x, 4, d, 10 }, b = { x + 4 * d, 4, d, 20 };

	/* calls out of order */
	CU_ASSERT_EQUAL(be->topk_add(be, &b, &st), XJ_EXIT_INTERNAL);
	xj_ok(&st);
	CU_ASSERT_EQUAL(be->topk_end(be, key, idx, &st), XJ_EXIT_INTERNAL);
	/* wrong dimension */
	xj_rows bad_d = { x, 4, d - 1, 0 };

	xj_ok(&st);
	CU_ASSERT_EQUAL(be->topk_begin(be, &bad_d, &st), XJ_EXIT_INTERNAL);
	/* a zero query row for cosine names its global row */
	memset(x + 2 * d, 0, sizeof(float) * d);
	xj_ok(&st);
	CU_ASSERT_EQUAL(be->topk_begin(be, &q, &st), XJ_EXIT_INPUT);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "row 12 is all zeros"));
	/* a base row whose squared norm overflows float32 */
	x[2 * d] = 1;
	x[6 * d + 3] = 2e19f;
	xj_ok(&st);
	CU_ASSERT_EQUAL(be->topk_begin(be, &q, &st), XJ_OK);
	CU_ASSERT_EQUAL(be->topk_add(be, &b, &st), XJ_EXIT_INPUT);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "row 22: values too large"));
	xj_ok(&st);
	CU_ASSERT_EQUAL(backend_matrix_block(be, &q, &b, (float *)key, &st),
			XJ_EXIT_INPUT);
	be->release(be);

	/* allocation failures are resource errors, not crashes */
	cfg.metric = XJ_METRIC_L2;
	cfg.k = (int64_t)1 << 40;
	xj_ok(&st);
	CU_ASSERT_EQUAL(backend_cpu_create(&cfg, &be, &st), XJ_EXIT_RESOURCE);
	printf("\n  (expected) %s", st.msg);
	cfg.k = 10;
	xj_ok(&st);
	CU_ASSERT_FATAL(backend_cpu_create(&cfg, &be, &st) == XJ_OK);
	xj_rows huge = { x, (int64_t)1 << 40, d, 0 };

	CU_ASSERT_EQUAL(be->topk_begin(be, &huge, &st), XJ_EXIT_RESOURCE);
	printf("\n  (expected) %s ", st.msg);
	be->release(be);
	free(x);
}

static void test_work_bytes(void)
{
	xj_backend_cfg cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = XJ_METRIC_L2;
	cfg.k = 10;
	cfg.d = 100;
	cfg.max_base_rows = 10000;
	int64_t a = backend_cpu_work_bytes(&cfg, 1000, 2);
	int64_t b = backend_cpu_work_bytes(&cfg, 2000, 2);
	int64_t c = backend_cpu_work_bytes(&cfg, 1000, 4);

	CU_ASSERT(a > 0 && b > a && c > a);
	/* per query at least the exact list and the pending rows */
	CU_ASSERT(b - a >= 1000 * (12 * 10 + 12 * 74));
	cfg.metric = XJ_METRIC_COSINE;
	CU_ASSERT(backend_cpu_work_bytes(&cfg, 1000, 2) >=
		  a + (1000 + 10000) * 4 * 100);
}

/* ---- matrix ---------------------------------------------------------- */

static int64_t check_matrix(xj_metric m, const float *q, int64_t nq,
			    const float *b, int64_t nb, int64_t d, int threads)
{
	xj_backend_cfg cfg;
	xj_backend *be;
	xj_status st;
	int64_t bad = 0, n = nq * nb;
	float *out;

	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = m;
	cfg.d = d;
	cfg.threads = threads;
	xj_ok(&st);
	CU_ASSERT_FATAL(backend_cpu_create(&cfg, &be, &st) == XJ_OK);
	out = be->block_alloc(be, n + 16, &st);
	CU_ASSERT_FATAL(out != NULL);
	/* a block too large to address is a resource error */
	CU_ASSERT_PTR_NULL(be->block_alloc(be, INT64_MAX, &st));
	CU_ASSERT_EQUAL(st.code, XJ_EXIT_RESOURCE);
	xj_ok(&st);
	memset(out, 0xff, sizeof(float) * (size_t)(n + 16));   /* NaN */
	xj_rows qr = { q, nq, d, 0 }, br = { b, nb, d, 0 };

	CU_ASSERT_EQUAL(backend_matrix_block(be, &qr, &br, out, &st), XJ_OK);
	for (int64_t i = 0; i < nq; i++) {
		double qq = metric_norm2(q + i * d, d);

		for (int64_t j = 0; j < nb; j++) {
			float want = metric_key_to_value(m,
				metric_key(m, q + i * d, b + j * d, d, qq,
					   metric_norm2(b + j * d, d)));

			if (memcmp(&out[i * nb + j], &want, sizeof(float)) &&
			    bad++ < 4)
				printf("\n  matrix %s %lldx%lld at (%lld,%lld): got %.9g want %.9g",
				       metric_names[m], (long long)nq,
				       (long long)nb, (long long)i,
				       (long long)j, out[i * nb + j], want);
		}
	}
	for (int e = 0; e < 16; e++)
		if (!isnan(out[n + e]))
			bad++;   /* wrote past the block */
	be->block_free(be, out);
	be->release(be);
	return bad;
}

static void test_matrix(void)
{
	const int64_t nqs[] = { 1, 3, 5, 67 }, nbs[] = { 1, 15, 16, 17, 100 };
	const int64_t d = 37;
	float *q = gauss_rows(67, d, 0, 1), *b = gauss_rows(100, d, 0, 1);
	float *qo = gauss_rows(67, d, 1e4, 1), *bo = gauss_rows(100, d, 1e4, 1);
	int64_t bad = 0;

	CU_ASSERT_FATAL(q && b && qo && bo);
	for (size_t mi = 0; mi < 4; mi++)
		for (size_t a = 0; a < 4; a++)
			for (size_t c = 0; c < 5; c++) {
				bad += check_matrix(metrics[mi], q, nqs[a], b,
						    nbs[c], d, (int)(a % 3));
				bad += check_matrix(metrics[mi], qo, nqs[a], bo,
						    nbs[c], d, 2);
			}
	CU_ASSERT_EQUAL(bad, 0);
	/* empty blocks write nothing */
	xj_backend_cfg cfg;
	xj_backend *be;
	xj_status st;
	float out[4];

	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = XJ_METRIC_L2;
	cfg.d = d;
	xj_ok(&st);
	CU_ASSERT_FATAL(backend_cpu_create(&cfg, &be, &st) == XJ_OK);
	xj_rows q0 = { q, 0, d, 0 }, b3 = { b, 3, d, 0 };

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

/* ---- GloVe ------------------------------------------------------------- */

/* rows [0, n) of a 2-D float dataset, read with a hyperslab. */
static float *h5_rows(hid_t f, const char *name, int64_t n, int64_t *d)
{
	hid_t ds = H5Dopen2(f, name, H5P_DEFAULT), fs, ms;
	hsize_t dims[2], start[2] = { 0, 0 }, count[2];
	float *x = NULL;

	if (ds < 0)
		return NULL;
	fs = H5Dget_space(ds);
	if (fs >= 0 && H5Sget_simple_extent_dims(fs, dims, NULL) == 2 &&
	    dims[0] >= (hsize_t)n) {
		count[0] = (hsize_t)n;
		count[1] = dims[1];
		*d = (int64_t)dims[1];
		ms = H5Screate_simple(2, count, NULL);
		x = malloc(sizeof(float) * (size_t)(n * *d));
		if (!x || ms < 0 ||
		    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count,
					NULL) < 0 ||
		    H5Dread(ds, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, x) < 0) {
			free(x);
			x = NULL;
		}
		if (ms >= 0)
			H5Sclose(ms);
	}
	if (fs >= 0)
		H5Sclose(fs);
	H5Dclose(ds);
	return x;
}

static int file_exists(const char *path)
{
	FILE *fp = fopen(path, "rb");

	if (!fp)
		return 0;
	fclose(fp);
	return 1;
}

static void test_glove(void)
{
	const char *path = getenv("XJ_GLOVE") ? getenv("XJ_GLOVE") : GLOVE_DEFAULT;
	int64_t d = 0, d2 = 0;
	float *b, *q;
	hid_t f;
	const chunking ch[] = { { 0, 0, 0, 0 }, { 17, 301, 1, 0 } };

	if (!file_exists(path)) {
		printf("\n  SKIPPED: %s not found (set XJ_GLOVE) ", path);
		return;
	}
	f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
	CU_ASSERT_FATAL(f >= 0);
	b = h5_rows(f, "/train", 2000, &d);
	q = h5_rows(f, "/test", 50, &d2);
	H5Fclose(f);
	CU_ASSERT_FATAL(b && q && d == d2 && d > 0);
	for (int mi = 0; mi < 3; mi += 2) {   /* l2, cosine */
		tcase tc = { metrics[mi], 10, 0, 0, 0, 0, q, 50, b, 2000, d };

		CU_ASSERT_EQUAL(check_case(tc, ch, 2), 0);
	}
	free(b);
	free(q);
}

int main(void)
{
	static const unit_test tests[] = {
		{ "gaussian, every chunking", test_gaussian },
		{ "clustered", test_clustered },
		{ "large norms need rescoring", test_large_norms },
		{ "near ties need rescoring", test_near_ties },
		{ "duplicated rows (ties)", test_duplicates },
		{ "k exceeds base rows", test_k_exceeds_base },
		{ "threshold extremes", test_threshold_extremes },
		{ "empty chunks", test_empty_chunks },
		{ "gemm flops", test_gemm_flops },
		{ "errors", test_errors },
		{ "work bytes", test_work_bytes },
		{ "matrix bit-equal to metric_key", test_matrix },
		{ "glove l2 and cosine", test_glove },
	};

	return unit_run("cpu_backend", tests, UNIT_COUNT(tests));
}
