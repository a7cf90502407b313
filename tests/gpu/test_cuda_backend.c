/*
 * test_cuda_backend.c: the CUDA backend against the CPU backend, bit for
 * bit.
 *
 *   test_cuda_backend              host suite, then the device suite; with
 *                                  no usable device prints
 *                                  "SKIPPED: <reason>" and exits 77
 *   test_cuda_backend --host-only  host suite only (no GPU needed)
 *
 * Host suite: the host builds of the device arithmetic (canonical.cuh,
 * select.cuh, exported as backend_cuda_host_*) against metric.c and
 * topk.c: canonical keys and norms, gates, error bounds, scan thresholds,
 * the radix sort key's order against topk_less, the rank merge and the
 * grid-row merge of the NCCL path (merge.cuh) against topk_merge.
 * Device suite: top-k through the CUDA backend must equal the CPU
 * backend's result (memcmp of keys and indices) for every metric, k in
 * {1, 10, 2048, 5000}, threshold on/off, self on/off, several chunkings
 * (tiles of 512 x 4096 crossed, chunks of 1 row, empty chunks), Gaussian
 * data, large norms (only rescoring can be right), near ties, duplicated
 * rows (ties) and k above the base size (padding); the matrix must equal
 * the CPU's; gemm_flops must match; errors must be reported as the CPU
 * does. Output buffers are poisoned before every call.
 */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/backend_cuda.h"
#include "kernels/metric.h"
#include "kernels/topk.h"
#define TESTDATA_SEED 0x5eed1234abcdull
#include "tests/gpu/gpu_test.h"
#include "tests/unit/testdata.h"
#include "tests/unit/unit.h"

/* ---- data ---------------------------------------------------------- */

/* n rows repeating nd distinct rows in a scrambled order (ties). */
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

/* Base rows c + 1e-4 noise around one centre of norm ~100 sqrt(d), and
 * queries orthogonal to it: float GEMM cannot order the candidates. */
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

/* ---- host suite ------------------------------------------------------ */

static void test_host_keys(void)
{
	const int64_t ds[] = { 1, 3, 16, 100, 257 };
	const double offsets[] = { 0, 1e4, 1e-20 };
	int64_t bad = 0;

	for (size_t a = 0; a < 5; a++)
		for (size_t o = 0; o < 3; o++) {
			int64_t d = ds[a];
			double scale = offsets[o] == 1e-20 ? 1e-21 : 1;
			float *x = gauss_rows(20, d, offsets[o], scale);

			CU_ASSERT_FATAL(x != NULL);
			for (int i = 0; i < 10; i++) {
				const float *q = x + i * d, *b = x + (10 + i) * d;
				double qq = metric_norm2(q, d);
				double bb = metric_norm2(b, d);

				if (!same_f64(qq, backend_cuda_host_norm2(q, d)))
					bad++;
				for (size_t mi = 0; mi < 4; mi++) {
					float want = metric_key(metrics[mi], q, b,
								d, qq, bb);
					float got = backend_cuda_host_key(
						metrics[mi], q, b, d, qq, bb);

					if (!same_f32(want, got) && bad++ < 4)
						printf("\n  %s d=%lld: key %.9g, want %.9g",
						       metric_names[mi],
						       (long long)d, got, want);
				}
			}
			free(x);
		}
	CU_ASSERT_EQUAL(bad, 0);
}

/* Keys worth testing gates on: signs, zeros, subnormals, extremes. */
static float key_sample(int i)
{
	static const float fixed[] = {
		0.0f, -0.0f, 1.0f, -1.0f, 1e-45f, -1e-45f, 1e-39f, 1.17549435e-38f,
		3.4028235e38f, -3.4028235e38f, INFINITY, -INFINITY, 0.5f, 2.0f,
	};
	int nf = (int)(sizeof(fixed) / sizeof(fixed[0]));

	if (i < nf)
		return fixed[i];
	return (float)((rng_unit() - 0.3) * pow(10.0, (double)(i % 40) - 20));
}

/* cpu_topk.c's float_up() and row_threshold(), from metric.c */
static float float_up(double x)
{
	float f = (float)x;

	if ((double)f < x)
		f = nextafterf(f, INFINITY);
	return f;
}

static float cpu_threshold(xj_metric m, int64_t d, double gate, double qq,
			   float qnorm, float bmax)
{
	if (gate == INFINITY)
		return INFINITY;
	switch (m) {
	case XJ_METRIC_L2:
	case XJ_METRIC_SQEUCLIDEAN:
		return float_up(gate - qq + metric_err_bound(m, d, qnorm, bmax));
	case XJ_METRIC_COSINE:
		return float_up(gate - 1.0 + metric_err_bound(m, d, 1, 1));
	case XJ_METRIC_IP:
		return float_up(gate + metric_err_bound(m, d, qnorm, bmax));
	}
	return INFINITY;
}

static void test_host_gates(void)
{
	int64_t bad = 0;

	for (int i = 0; i < 400; i++) {
		float key = key_sample(i);

		for (size_t mi = 0; mi < 4; mi++) {
			xj_metric m = metrics[mi];
			double g = metric_gate_approx(m, key);
			int64_t d = 1 + (int64_t)(rng_next() % 2000);
			float qn = (float)(rng_unit() * 100);
			float bn = (float)(rng_unit() * 100);
			double qq = (double)qn * qn * (1 + 1e-9);

			if (!same_f64(g, backend_cuda_host_gate(m, key)) &&
			    bad++ < 4)
				printf("\n  %s gate of %.9g differs",
				       metric_names[mi], key);
			if (!same_f64(metric_err_bound(m, d, qn, bn),
				      backend_cuda_host_err_bound(m, d, qn, bn)))
				bad++;
			if (!same_f32(cpu_threshold(m, d, g, qq, qn, bn),
				      backend_cuda_host_threshold(m, d, g, qq,
								  qn, bn)) &&
			    bad++ < 4)
				printf("\n  %s threshold for key %.9g differs",
				       metric_names[mi], key);
		}
	}
	CU_ASSERT_EQUAL(bad, 0);
}

/* The sort key orders like topk_less within a sub-tile (index =
 * first + column), -0 and +0 included. */
static void test_host_sortkey(void)
{
	int64_t bad = 0;

	for (int i = 0; i < 20000; i++) {
		float ka = key_sample((int)(rng_next() % 60));
		float kb = rng_next() % 4 ? key_sample((int)(rng_next() % 60)) : ka;
		uint32_t ca = (uint32_t)(rng_next() % 4096);
		uint32_t cb = (uint32_t)(rng_next() % 4096);
		int64_t first = (int64_t)(rng_next() % 1000000);
		uint64_t sa, sb;

		if (isnan(ka) || isnan(kb))
			continue;
		if (ka == 0 && kb == 0 && rng_next() % 2)
			kb = -kb;
		sa = backend_cuda_host_sortkey(ka, ca);
		sb = backend_cuda_host_sortkey(kb, cb);
		if ((sa < sb) != topk_less(ka, first + ca, kb, first + cb) &&
		    bad++ < 4)
			printf("\n  sort key order of (%.9g, %u) and (%.9g, %u)",
			       ka, ca, kb, cb);
		if (sa == ~0ull)
			bad++;
	}
	CU_ASSERT_EQUAL(bad, 0);
}

typedef struct skey_pair {
	uint64_t s;
	float key;
} skey_pair;

static int skey_cmp(const void *a, const void *b)
{
	uint64_t x = ((const skey_pair *)a)->s, y = ((const skey_pair *)b)->s;

	return (x > y) - (x < y);
}

/* One random merge: a k-list with na entries against nb candidates of a
 * sub-tile, keys from a small set so that ties are common. */
static int64_t merge_case(int64_t k, int64_t na, int64_t nb)
{
	float *ak = malloc(sizeof(float) * (size_t)(k + 1));
	int64_t *ai = malloc(sizeof(int64_t) * (size_t)(k + 1));
	float *bk = malloc(sizeof(float) * (size_t)(k + 1));
	int64_t *bi = malloc(sizeof(int64_t) * (size_t)(k + 1));
	skey_pair *sp = malloc(sizeof(skey_pair) * (size_t)(nb + 1));
	uint64_t *sk = malloc(sizeof(uint64_t) * (size_t)(nb + 1));
	float *ck = malloc(sizeof(float) * (size_t)(nb + 1));
	float *ok = malloc(sizeof(float) * (size_t)(k + 1));
	int64_t *oi = malloc(sizeof(int64_t) * (size_t)(k + 1));
	float *rk = malloc(sizeof(float) * (size_t)(k + 1));
	int64_t *ri = malloc(sizeof(int64_t) * (size_t)(k + 1));
	const float *keys[2];
	const int64_t *idxs[2];
	int64_t first = 100000, bad = 0, n, nbk;

	CU_ASSERT_FATAL(ak && ai && bk && bi && sp && sk && ck && ok && oi &&
			rk && ri);
	/* list: distinct indices below first; candidates: distinct columns */
	for (int64_t p = 0; p < na; p++) {
		ak[p] = (float)(rng_next() % 50) - 20.0f;
		ai[p] = p * 3 + (int64_t)(rng_next() % 3);
	}
	topk_sort(ak, ai, na);
	topk_pad(ak, ai, na, k);
	for (int64_t p = 0; p < nb; p++) {
		uint32_t col = (uint32_t)(p * 4096 / nb);

		sp[p].key = (float)(rng_next() % 50) - 20.0f;
		if (sp[p].key == 0 && rng_next() % 2)
			sp[p].key = -0.0f;
		sp[p].s = backend_cuda_host_sortkey(sp[p].key, col);
	}
	qsort(sp, (size_t)nb, sizeof(*sp), skey_cmp);
	for (int64_t p = 0; p < nb; p++) {
		sk[p] = sp[p].s;
		ck[p] = sp[p].key;
	}
	/* reference: topk_merge of the list and the candidates as a list */
	nbk = nb < k ? nb : k;
	for (int64_t p = 0; p < nbk; p++) {
		bk[p] = ck[p];
		bi[p] = first + (int64_t)(sk[p] & 0x1fff);
	}
	topk_pad(bk, bi, nbk, k);
	keys[0] = ak;
	keys[1] = bk;
	idxs[0] = ai;
	idxs[1] = bi;
	topk_merge(2, keys, idxs, k, rk, ri);
	for (int64_t p = 0; p < k; p++) {
		ok[p] = NAN;
		oi[p] = IDX_POISON;
	}
	n = backend_cuda_host_merge(ak, ai, na, sk, ck, nb, first, k, ok, oi);
	if (n != (na + nb < k ? na + nb : k))
		bad++;
	for (int64_t p = 0; p < n; p++)
		if ((!same_f32(ok[p], rk[p]) || oi[p] != ri[p]) && bad++ < 4)
			printf("\n  merge k=%lld na=%lld nb=%lld at %lld: (%g, %lld) want (%g, %lld)",
			       (long long)k, (long long)na, (long long)nb,
			       (long long)p, ok[p], (long long)oi[p], rk[p],
			       (long long)ri[p]);
	free(ak);
	free(ai);
	free(bk);
	free(bi);
	free(sp);
	free(sk);
	free(ck);
	free(ok);
	free(oi);
	free(rk);
	free(ri);
	return bad;
}

static void test_host_merge(void)
{
	const int64_t ks[] = { 1, 2, 10, 300, 5000 };
	int64_t bad = 0;

	for (size_t a = 0; a < 5; a++) {
		int64_t k = ks[a];

		for (int rep = 0; rep < 12; rep++) {
			int64_t na = rep < 3 ? (int64_t)rep * k / 2 :
				     (int64_t)(rng_next() % (uint64_t)(k + 1));
			int64_t nb = 1 + (int64_t)(rng_next() % 4096);

			if (rep % 4 == 3)
				nb = 1 + (int64_t)(rng_next() % 8);
			bad += merge_case(k, na, nb);
		}
	}
	CU_ASSERT_EQUAL(bad, 0);
}

/* The device merge of the NCCL path (merge.cuh), run on the host, equals
 * topk_merge on lists with ties, signed zeros and padding. */
static void test_host_merge_lists(void)
{
	const int ps[] = { 1, 2, 3, 7, 16 };
	const int64_t ks[] = { 1, 2, 10, 300 }, rowss[] = { 1, 5, 37 };
	int64_t bad = 0;

	for (size_t a = 0; a < 5; a++)
		for (size_t b = 0; b < 4; b++)
			for (size_t c = 0; c < 3; c++) {
				int p = ps[a];
				int64_t k = ks[b], rows = rowss[c], n = p * rows * k;
				float *key = malloc(sizeof(float) * (size_t)n);
				int64_t *idx = malloc(sizeof(int64_t) * (size_t)n);
				float *ok = malloc(sizeof(float) * (size_t)(rows * k));
				int64_t *oi = malloc(sizeof(int64_t) * (size_t)(rows * k));
				float *rk = malloc(sizeof(float) * (size_t)(rows * k));
				int64_t *ri = malloc(sizeof(int64_t) * (size_t)(rows * k));

				CU_ASSERT_FATAL(key && idx && ok && oi && rk && ri);
				received_lists(p, rows, k, key, idx);
				CU_ASSERT_FATAL(received_merge(p, rows, k, key, idx,
								rk, ri) == 0);
				poison(ok, oi, rows * k);
				CU_ASSERT_EQUAL(backend_cuda_host_merge_lists(p, rows,
						k, key, idx, ok, oi), XJ_OK);
				for (int64_t e = 0; e < rows * k; e++)
					if ((!same_f32(ok[e], rk[e]) || oi[e] != ri[e]) &&
					    bad++ < 4)
						printf("\n  merge p=%d k=%lld row %lld rank %lld: (%g, %lld) want (%g, %lld)",
						       p, (long long)k, (long long)(e / k),
						       (long long)(e % k), ok[e],
						       (long long)oi[e], rk[e],
						       (long long)ri[e]);
				free(key);
				free(idx);
				free(ok);
				free(oi);
				free(rk);
				free(ri);
			}
	CU_ASSERT_EQUAL(bad, 0);
}

/* ---- device suite: running a backend ----------------------------------- */

typedef int (*create_fn)(const xj_backend_cfg *cfg, xj_backend **out,
			 xj_status *st);

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

typedef struct chunking {
	int64_t qc, bc;     /* 0: whole */
	int empties;        /* empty base chunks around the stream */
} chunking;

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
	cfg.max_query_rows = qc;
	cfg.max_base_rows = bc;
	return cfg;
}

/* Top-k of the case through a backend, in chunks of qc x bc rows. */
static int run_topk(create_fn create, const tcase *tc, chunking ch,
		    float *key, int64_t *idx, double *flops)
{
	int64_t d = tc->d, k = tc->k;
	int64_t qc = ch.qc > 0 ? ch.qc : tc->nq, bc = ch.bc > 0 ? ch.bc : tc->nb;
	xj_backend_cfg cfg = cfg_of(tc, qc, bc);
	xj_backend *be;
	xj_status st;

	xj_ok(&st);
	poison(key, idx, tc->nq * k);
	if (create(&cfg, &be, &st))
		goto fail;
	for (int64_t q0 = 0; q0 < tc->nq; q0 += qc) {
		xj_rows q = { tc->q + q0 * d, tc->nq - q0 < qc ? tc->nq - q0 : qc,
			      d, q0 };
		xj_rows none = { tc->b, 0, d, 0 };

		if (be->topk_begin(be, &q, &st))
			goto fail_be;
		if (ch.empties && be->topk_add(be, &none, &st))
			goto fail_be;
		for (int64_t b0 = 0; b0 < tc->nb; b0 += bc) {
			xj_rows b = { tc->b + b0 * d,
				      tc->nb - b0 < bc ? tc->nb - b0 : bc, d, b0 };

			if (be->topk_add(be, &b, &st))
				goto fail_be;
			if (ch.empties && b0 == 0 && be->topk_add(be, &none, &st))
				goto fail_be;
		}
		if (be->topk_end(be, key + q0 * k, idx + q0 * k, &st))
			goto fail_be;
	}
	if (flops)
		*flops = be->gemm_flops;
	be->release(be);
	return 0;
fail_be:
	be->release(be);
fail:
	printf("\n  backend failed: %s", st.msg);
	return 1;
}

static int64_t compare(const tcase *tc, const char *what, const float *key,
		       const int64_t *idx, const float *rkey,
		       const int64_t *ridx)
{
	int64_t bad = 0, k = tc->k;

	for (int64_t e = 0; e < tc->nq * k; e++) {
		if (same_f32(key[e], rkey[e]) && idx[e] == ridx[e])
			continue;
		if (bad++ < 4)
			printf("\n  %s %s k=%lld thr=%d self=%d: query %lld rank %lld: got (%.9g, %lld) want (%.9g, %lld)",
			       metric_names[tc->metric], what, (long long)k,
			       tc->has_threshold, tc->self, (long long)(e / k),
			       (long long)(e % k), key[e], (long long)idx[e],
			       rkey[e], (long long)ridx[e]);
	}
	return bad;
}

/* CPU backend once (whole chunks), then the CUDA backend for each
 * chunking: every result must have the CPU's bits. */
static int64_t check_case(const tcase *tc, const chunking *ch, int nch)
{
	int64_t n = tc->nq * tc->k, bad = 0;
	float *rkey = malloc(sizeof(float) * (size_t)(n + 1));
	int64_t *ridx = malloc(sizeof(int64_t) * (size_t)(n + 1));
	float *key = malloc(sizeof(float) * (size_t)(n + 1));
	int64_t *idx = malloc(sizeof(int64_t) * (size_t)(n + 1));
	chunking whole = { 0, 0, 0 };

	CU_ASSERT_FATAL(rkey && ridx && key && idx);
	if (run_topk(backend_cpu_create, tc, whole, rkey, ridx, NULL)) {
		bad++;
		goto out;
	}
	for (int c = 0; c < nch; c++) {
		char what[64];

		snprintf(what, sizeof(what), "chunks %lldx%lld%s",
			 (long long)ch[c].qc, (long long)ch[c].bc,
			 ch[c].empties ? " +empty" : "");
		if (run_topk(gpu_backend_create, tc, ch[c], key, idx, NULL)) {
			bad++;
			continue;
		}
		bad += compare(tc, what, key, idx, rkey, ridx);
	}
out:
	free(rkey);
	free(ridx);
	free(key);
	free(idx);
	return bad;
}

/* The key of rank r of query 0 without threshold (CPU backend), through
 * the value and back as the driver does: cuts most lists short. */
static float pick_threshold(tcase tc, int64_t r)
{
	float *key = malloc(sizeof(float) * (size_t)(tc.nq * (r + 1)));
	int64_t *idx = malloc(sizeof(int64_t) * (size_t)(tc.nq * (r + 1)));
	chunking whole = { 0, 0, 0 };
	float t;

	CU_ASSERT_FATAL(key && idx);
	tc.k = r + 1;
	tc.has_threshold = 0;
	CU_ASSERT_FATAL(run_topk(backend_cpu_create, &tc, whole, key, idx,
				 NULL) == 0);
	t = metric_value_to_key(tc.metric,
				metric_key_to_value(tc.metric, key[r]));
	free(key);
	free(idx);
	return t;
}

/* Every metric and k, threshold off/on and self off/on (self only when
 * the queries are the first base rows). */
static int64_t sweep(const float *q, int64_t nq, const float *b, int64_t nb,
		     int64_t d, const int64_t *ks, int nks, const chunking *ch,
		     int nch)
{
	int64_t bad = 0;

	for (size_t mi = 0; mi < 4; mi++)
		for (int ki = 0; ki < nks; ki++)
			for (int v = 0; v < 4; v++) {
				tcase tc = { metrics[mi], ks[ki], v & 1, 0, v >> 1,
					     q, nq, b, nb, d };

				if (tc.self && q != b)
					continue;
				if (tc.has_threshold)
					tc.threshold_key = pick_threshold(tc, 9);
				bad += check_case(&tc, ch, nch);
			}
	return bad;
}

/* Tiles are 512 query x 4096 base rows: these cross both boundaries,
 * split them unevenly, and go down to one row per chunk. */
static const chunking chunkings[] = {
	{ 0, 0, 0 },
	{ 513, 4097, 1 },
	{ 100, 777, 0 },
	{ 7, 9000, 1 },
};
#define NCH ((int)(sizeof(chunkings) / sizeof(chunkings[0])))

static void test_gaussian(void)
{
	const int64_t d = 40, nb = 9000, nq = 600;
	const int64_t ks[] = { 1, 10, 2048, 5000 };
	float *b = gauss_rows(nb, d, 0, 1);
	float *q = gauss_rows(nq, d, 0.1, 1);

	CU_ASSERT_FATAL(b && q);
	CU_ASSERT_EQUAL(sweep(q, nq, b, nb, d, ks, 4, chunkings, NCH), 0);
	CU_ASSERT_EQUAL(sweep(b, nq, b, nb, d, ks, 4, chunkings, 2), 0);
	free(b);
	free(q);
}

/* Offsets of 1e4: the expanded GEMM form cancels to noise in float. */
static void test_large_norms(void)
{
	const int64_t d = 32, nb = 5000, nq = 70;
	const int64_t ks[] = { 1, 10, 2048 };
	float *b = gauss_rows(nb, d, 1e4, 1);

	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT_EQUAL(sweep(b, nq, b, nb, d, ks, 3, chunkings, 3), 0);
	free(b);
}

static void test_near_ties(void)
{
	const int64_t d = 32, nb = 5000, nq = 40;
	const int64_t ks[] = { 1, 10, 2048 };
	float *b, *q;

	near_tie_rows(nb, nq, d, &b, &q);
	CU_ASSERT_FATAL(b && q);
	CU_ASSERT_EQUAL(sweep(q, nq, b, nb, d, ks, 3, chunkings, 3), 0);
	CU_ASSERT_EQUAL(sweep(b, nq, b, nb, d, ks, 3, chunkings, 2), 0);
	free(b);
	free(q);
}

/* 9000 rows that are 5 distinct rows repeated: equal keys everywhere, far
 * more ties than k; chunks split the runs of equal keys. */
static void test_duplicates(void)
{
	const int64_t d = 16, nb = 9000, nq = 30;
	const int64_t ks[] = { 1, 10, 2048, 5000 };
	float *b = dup_rows(nb, d, 5);
	float *q = gauss_rows(nq, d, 0, 1);

	CU_ASSERT_FATAL(b && q);
	memcpy(q, b + 3 * d, sizeof(float) * (size_t)d);  /* exact duplicate */
	CU_ASSERT_EQUAL(sweep(q, nq, b, nb, d, ks, 4, chunkings, NCH), 0);
	CU_ASSERT_EQUAL(sweep(b, nq, b, nb, d, ks, 4, chunkings, 2), 0);
	free(b);
	free(q);
}

/* k above the base size: -1 padding, with threshold and self. */
static void test_padding(void)
{
	const int64_t d = 10, nb = 1000, nq = 50;
	const int64_t ks[] = { 1001, 2048, 5000 };
	const chunking ch[] = { { 0, 0, 0 }, { 17, 333, 1 }, { 1, 1, 0 } };
	float *b = gauss_rows(nb, d, 0, 2);

	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT_EQUAL(sweep(b, nq, b, nb, d, ks, 3, ch, 2), 0);
	/* one-row base chunks: 1000 topk_add calls of one row */
	tcase tc = { XJ_METRIC_L2, 5000, 0, 0, 1, b, 3, b, nb, d };

	CU_ASSERT_EQUAL(check_case(&tc, ch + 2, 1), 0);
	free(b);
}

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
	CU_ASSERT_FATAL(gpu_backend_create(&cfg, &be, &st) == XJ_OK);
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
	const int64_t d = 20, nq = 70, nb = 5300;
	float *x = gauss_rows(nb, d, 0, 1);
	tcase tc = { XJ_METRIC_IP, 3, 0, 0, 0, x, nq, x, nb, d };
	chunking ch = { 0, 1000, 0 };
	float key[70 * 3];
	int64_t idx[70 * 3];
	double flops = -1;

	CU_ASSERT_FATAL(x != NULL);
	CU_ASSERT_EQUAL(run_topk(gpu_backend_create, &tc, ch, key, idx, &flops), 0);
	CU_ASSERT_EQUAL(flops, 2.0 * nq * nb * d);
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
	int rc;

	CU_ASSERT_FATAL(x != NULL);
	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = XJ_METRIC_COSINE;
	cfg.k = 2;
	cfg.d = d;
	cfg.max_query_rows = 4;
	cfg.max_base_rows = 4;
	xj_ok(&st);
	CU_ASSERT_FATAL(gpu_backend_create(&cfg, &be, &st) == XJ_OK);
	CU_ASSERT_STRING_EQUAL(be->name, "cuda");
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
	/* a base row whose squared norm overflows float32: topk_add queues
	 * the work, so the error comes from topk_add or topk_end */
	x[2 * d] = 1;
	x[6 * d + 3] = 2e19f;
	xj_ok(&st);
	CU_ASSERT_EQUAL(be->topk_begin(be, &q, &st), XJ_OK);
	rc = be->topk_add(be, &b, &st);
	if (rc == XJ_OK)
		rc = be->topk_end(be, key, idx, &st);
	CU_ASSERT_EQUAL(rc, XJ_EXIT_INPUT);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "row 22: values too large"));
	xj_ok(&st);
	CU_ASSERT_EQUAL(backend_matrix_block(be, &q, &b, key, &st), XJ_EXIT_INPUT);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "row 22: values too large"));
	/* matrix in the middle of a top-k session */
	x[6 * d + 3] = 1;
	xj_ok(&st);
	CU_ASSERT_EQUAL(be->topk_begin(be, &q, &st), XJ_OK);
	CU_ASSERT_EQUAL(backend_matrix_block(be, &q, &b, key, &st),
			XJ_EXIT_INTERNAL);
	xj_ok(&st);
	CU_ASSERT_EQUAL(be->topk_end(be, key, idx, &st), XJ_OK);
	be->release(be);

	/* memory: a resource error, not a crash, and nothing left behind */
	cfg.metric = XJ_METRIC_L2;
	cfg.k = (int64_t)1 << 40;
	xj_ok(&st);
	CU_ASSERT_EQUAL(gpu_backend_create(&cfg, &be, &st), XJ_EXIT_RESOURCE);
	CU_ASSERT_PTR_NULL(be);
	printf("\n  (expected) %s", st.msg);
	cfg.k = 2;      /* key, idx hold 4 queries x 2 */
	xj_ok(&st);
	CU_ASSERT_FATAL(gpu_backend_create(&cfg, &be, &st) == XJ_OK);
	xj_rows huge = { x, (int64_t)1 << 40, d, 0 };

	CU_ASSERT_EQUAL(be->topk_begin(be, &huge, &st), XJ_EXIT_RESOURCE);
	printf("\n  (expected) %s ", st.msg);
	/* still usable after the failed growth */
	xj_ok(&st);
	CU_ASSERT_EQUAL(be->topk_begin(be, &q, &st), XJ_OK);
	CU_ASSERT_EQUAL(be->topk_end(be, key, idx, &st), XJ_OK);
	be->release(be);
	/* a device that does not exist */
	xj_ok(&st);
	CU_ASSERT_EQUAL(backend_cuda_create(&cfg, 4096, GPU_TEST_MEM_FRACTION,
					    &be, &st),
			XJ_EXIT_INTERNAL);
	printf("\n  (expected) %s ", st.msg);
	free(x);
}

/* ---- matrix ---------------------------------------------------------- */

/* A CPU and a CUDA backend for blocks of up to nq x nb (the driver
 * passes the job's k in matrix mode too). */
static void matrix_pair(xj_metric m, int64_t d, int64_t nq, int64_t nb,
			xj_backend **cpu, xj_backend **gpu)
{
	xj_backend_cfg cfg;
	xj_status st;

	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = m;
	cfg.k = 10;
	cfg.d = d;
	cfg.max_query_rows = nq;
	cfg.max_base_rows = nb;
	xj_ok(&st);
	CU_ASSERT_FATAL(backend_cpu_create(&cfg, cpu, &st) == XJ_OK);
	CU_ASSERT_FATAL(gpu_backend_create(&cfg, gpu, &st) == XJ_OK);
}

static int64_t check_matrix(xj_metric m, const float *q, int64_t nq,
			    const float *b, int64_t nb, int64_t d)
{
	xj_backend *cpu, *gpu;
	xj_status st;
	int64_t bad = 0, n = nq * nb;
	float *want = malloc(sizeof(float) * (size_t)(n + 16));
	float *got = malloc(sizeof(float) * (size_t)(n + 16));

	CU_ASSERT_FATAL(want && got);
	matrix_pair(m, d, nq, nb, &cpu, &gpu);
	xj_ok(&st);
	memset(want, 0xff, sizeof(float) * (size_t)(n + 16));
	memset(got, 0xff, sizeof(float) * (size_t)(n + 16));
	xj_rows qr = { q, nq, d, 0 }, br = { b, nb, d, 0 };

	CU_ASSERT_EQUAL(backend_matrix_block(cpu, &qr, &br, want, &st), XJ_OK);
	CU_ASSERT_EQUAL(backend_matrix_block(gpu, &qr, &br, got, &st), XJ_OK);
	for (int64_t e = 0; e < n + 16; e++)
		if (memcmp(&got[e], &want[e], sizeof(float)) && bad++ < 4)
			printf("\n  matrix %s %lldx%lld at %lld: got %.9g want %.9g",
			       metric_names[m], (long long)nq, (long long)nb,
			       (long long)e, got[e], want[e]);
	cpu->release(cpu);
	gpu->release(gpu);
	free(want);
	free(got);
	return bad;
}

static void test_matrix(void)
{
	const int64_t nqs[] = { 1, 33, 600 }, nbs[] = { 1, 31, 4097 };
	const int64_t d = 37;
	float *q = gauss_rows(600, d, 0, 1), *b = gauss_rows(4097, d, 0, 1);
	float *qo = gauss_rows(600, d, 1e4, 1), *bo = gauss_rows(4097, d, 1e4, 1);
	int64_t bad = 0;

	CU_ASSERT_FATAL(q && b && qo && bo);
	for (size_t mi = 0; mi < 4; mi++)
		for (size_t a = 0; a < 3; a++)
			for (size_t c = 0; c < 3; c++) {
				bad += check_matrix(metrics[mi], q, nqs[a], b,
						    nbs[c], d);
				bad += check_matrix(metrics[mi], qo, nqs[a], bo,
						    nbs[c], d);
			}
	CU_ASSERT_EQUAL(bad, 0);
	/* dimensions that are not multiples of the 32-element slab */
	for (size_t mi = 0; mi < 4; mi++)
		CU_ASSERT_EQUAL(check_matrix(metrics[mi], q, 70, b, 90, 1) +
				check_matrix(metrics[mi], q, 70, b, 90, 33) +
				check_matrix(metrics[mi], q, 70, b, 90, 64), 0);
	free(q);
	free(b);
	free(qo);
	free(bo);
}

/*
 * Blocks the way driver_matrix runs them: pinned buffers from block_alloc
 * used in turn, each block queued, the previous one compared (the
 * driver's write) while it runs, then waited for. Blocks of 1100 x 9000
 * span 3 x 3 tiles, so both tile buffers and their events are reused
 * within a block and across blocks. Each buffer is poisoned before its
 * block starts.
 */
static void test_matrix_pipeline(void)
{
	const int64_t d = 48, nq = 1100, nb = 9000;
	const int64_t b0s[] = { 0, 4000, 123, 8999 };
	float *q = gauss_rows(nq, d, 0, 1), *b = gauss_rows(nb, d, 0.5, 1);
	float *want = malloc(sizeof(float) * (size_t)(nq * nb));
	float *blk[2] = { NULL, NULL };
	int64_t rows[2] = { 0, 0 }, bad = 0;
	xj_backend *cpu, *gpu;
	xj_status st;

	CU_ASSERT_FATAL(q && b && want);
	matrix_pair(XJ_METRIC_L2, d, nq, nb, &cpu, &gpu);
	xj_ok(&st);
	for (int i = 0; i < 2; i++) {
		blk[i] = gpu->block_alloc(gpu, nq * nb, &st);
		CU_ASSERT_FATAL(blk[i] != NULL);
	}
	for (int i = 0; i <= 4; i++) {
		int cur = i & 1, prev = 1 - cur;

		if (i < 4) {
			xj_rows qr = { q, nq, d, 0 };
			xj_rows br = { b + b0s[i] * d, nb - b0s[i], d, b0s[i] };

			memset(blk[cur], 0xff, sizeof(float) * (size_t)(nq * nb));
			CU_ASSERT_EQUAL(gpu->matrix_start(gpu, &qr, &br,
							  blk[cur], &st), XJ_OK);
			/* one block at most is queued */
			CU_ASSERT_EQUAL(gpu->matrix_start(gpu, &qr, &br,
							  blk[prev], &st),
					XJ_EXIT_INTERNAL);
			xj_ok(&st);
			rows[cur] = br.rows;
		}
		if (i > 0) {    /* the block before, as the driver writes it */
			xj_rows qr = { q, nq, d, 0 };
			xj_rows br = { b + b0s[i - 1] * d, rows[prev], d,
				       b0s[i - 1] };
			int64_t n = nq * rows[prev];

			CU_ASSERT_EQUAL(backend_matrix_block(cpu, &qr, &br,
							     want, &st), XJ_OK);
			for (int64_t e = 0; e < n; e++)
				if (memcmp(&blk[prev][e], &want[e], 4) &&
				    bad++ < 4)
					printf("\n  block %d at %lld: got %.9g want %.9g",
					       i - 1, (long long)e,
					       blk[prev][e], want[e]);
		}
		CU_ASSERT_EQUAL(gpu->matrix_wait(gpu, &st), XJ_OK);
		/* a second wait has nothing to wait for */
		CU_ASSERT_EQUAL(gpu->matrix_wait(gpu, &st), XJ_OK);
	}
	CU_ASSERT_EQUAL(bad, 0);
	for (int i = 0; i < 2; i++)
		gpu->block_free(gpu, blk[i]);
	cpu->release(cpu);
	gpu->release(gpu);
	free(q);
	free(b);
	free(want);
}

/* ---- main ------------------------------------------------------------- */

static const unit_test host_tests[] = {
	{ "keys and norms equal metric.c", test_host_keys },
	{ "gates, bounds, thresholds equal metric.c", test_host_gates },
	{ "sort key orders as topk_less", test_host_sortkey },
	{ "rank merge equals topk_merge", test_host_merge },
	{ "grid-row merge (merge.cuh) equals topk_merge",
	  test_host_merge_lists },
};

static const unit_test device_tests[] = {
	{ "gaussian, every metric, k and chunking", test_gaussian },
	{ "large norms need rescoring", test_large_norms },
	{ "near ties need rescoring", test_near_ties },
	{ "duplicated rows (ties)", test_duplicates },
	{ "k above the base: padding", test_padding },
	{ "empty chunks", test_empty_chunks },
	{ "gemm flops", test_gemm_flops },
	{ "errors", test_errors },
	{ "matrix equals the CPU's", test_matrix },
	{ "matrix blocks queued in turn", test_matrix_pipeline },
};

int main(int argc, char **argv)
{
	return gpu_test_main(argc, argv, "cuda_backend_host", host_tests,
			     UNIT_COUNT(host_tests), "cuda_backend_device",
			     device_tests, UNIT_COUNT(device_tests));
}
