/*
 * test_cuda_backend.c: what only the CUDA backend has. The cases every
 * backend passes, bit for bit against the canonical reference, are the
 * backend contract (tests/backend/contract.c, gpu.contract_cuda).
 *
 *   test_cuda_backend              host suite, then the device suite; with
 *                                  no usable device prints
 *                                  "SKIPPED: <reason>" and exits 77
 *   test_cuda_backend --host-only  host suite only (no GPU needed)
 *
 * Host suite: the host builds of the device arithmetic (canonical.cuh,
 * select.cuh, exported as backend_cuda_host_*) against metric.c and
 * topk.c: canonical keys and norms, gates, error bounds, scan thresholds,
 * the matrix's double GEMM decision (metric_dgemm.h) against its C build,
 * the radix sort key's order against topk_less, the rank merge and the
 * grid-row merge of the NCCL path (merge.cuh) against topk_merge; and the
 * memory formulas the planner uses (backend_cuda_work_bytes and co.);
 * the range join's ordering of drained pairs into sorted rows.
 * Device suite: the limits of the CUDA backend's own: no matrix block
 * inside a top-k session (they share buffers), no device that does not
 * exist, range calls out of turn. Output buffers are poisoned before every call.
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

/* The scan threshold xjc_scan_threshold() must give, written with the
 * host's metric.c: for the l2 family and ip it is cpu_topk.c's
 * row_threshold(); for cosine the GPU scans -qn.bn where the CPU scans
 * 1 - qn.bn, so its offset is 1 where the CPU's is 0 (canonical.cuh). */
static float float_up(double x)
{
	float f = (float)x;

	if ((double)f < x)
		f = nextafterf(f, INFINITY);
	return f;
}

static float host_threshold(xj_metric m, int64_t d, double gate, double qq,
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
			if (!same_f32(host_threshold(m, d, g, qq, qn, bn),
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

/* The double GEMM's decision as the CUDA library compiles it (the
 * host side of the code verify_kernel runs) against metric.h's C build,
 * which cpu_matrix.c runs, on dgemm_pair's adversarial pairs: the same
 * decisions and values, bit for bit. The device's _rn intrinsics are the
 * same correctly rounded operations; gpu.contract_cuda compares the
 * device's matrix with the canonical one. */
static void test_host_dgemm_decide(void)
{
	const int64_t ds[] = { 4, 37, 128 };
	int64_t bad = 0, undecided = 0;

	for (size_t a = 0; a < 3; a++) {
		int64_t d = ds[a];
		float *q = malloc(sizeof(float) * (size_t)d);
		float *b = malloc(sizeof(float) * (size_t)d);

		CU_ASSERT_FATAL(q && b);
		for (int64_t i = 0; i < 600; i++) {
			double qq, bb, p[DGEMM_ORDERS];

			dgemm_pair(i, d, q, b);
			qq = metric_norm2(q, d);
			bb = metric_norm2(b, d);
			dgemm_dots(q, b, d, p);
			for (size_t mi = 0; mi < 4; mi++)
				for (int o = 0; o < DGEMM_ORDERS; o++) {
					float v, w;
					int u = metric_dgemm_decide(metrics[mi],
						d, p[o], qq, bb, &v);

					if (u != backend_cuda_host_dgemm_decide(
						    metrics[mi], d, p[o], qq, bb,
						    &w) || !same_f32(v, w))
						bad++;
					undecided += u;
				}
		}
		free(q);
		free(b);
	}
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT(undecided > 0);
}

/* The device memory formula of backend_cuda.h, term by term, and the
 * merge and pinned bytes beside it. */
static void test_host_work_bytes(void)
{
	const int64_t d = 100, k = 10, tq = 512, tb = 4096;
	xj_backend_cfg cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = XJ_METRIC_L2;
	cfg.k = k;
	cfg.d = d;
	int64_t a = backend_cuda_work_bytes(&cfg, 1000, 2 * tb);

	/* per query row 4d + 28 + 12k (past the default pass rows, 2048,
	 * which fewer query rows cut: below); per base row 8d + 16 and a
	 * sub-tile's largest norm and smallest fn2 per 4096 rows */
	unsetenv("XJ_CUDA_PASS_ROWS");
	CU_ASSERT_EQUAL(backend_cuda_work_bytes(&cfg, 4000, 2 * tb) -
			backend_cuda_work_bytes(&cfg, 3000, 2 * tb),
			1000 * (4 * d + 28 + 12 * k));
	CU_ASSERT_EQUAL(backend_cuda_work_bytes(&cfg, 1000, 3 * tb) - a,
			tb * (8 * d + 16) + 8);
	/* fixed: two matrix tiles, the flags, the candidate slots, the
	 * merge scratch and the counters; the base rows' one maximum and
	 * minimum; and by the selection (backend_cuda.h's variables):
	 * rowsel's two pass tiles of 4 sub-tiles (one without the
	 * pipeline, wider passes wider) and its slots for a pass (a
	 * sub-tile's with XJ_CUDA_SCAN=sub), or the tile kernels' sort
	 * keys, keys and counts */
	unsetenv("XJ_CUDA_SELECT");
	unsetenv("XJ_CUDA_PIPELINE");
	unsetenv("XJ_CUDA_PASS_COLS");
	unsetenv("XJ_CUDA_SCAN");
	CU_ASSERT_EQUAL(backend_cuda_work_bytes(&cfg, 0, 0),
			tq * tb * 8 + 4 * tq * 4 * tb + 16 + 8 + tq * 4 +
			tq * k * 12 + 32 + 2 * 4 * tq * 4 * tb);
	setenv("XJ_CUDA_SCAN", "sub", 1);
	CU_ASSERT_EQUAL(backend_cuda_work_bytes(&cfg, 0, 0),
			tq * tb * 12 + 16 + 8 + tq * 4 + tq * k * 12 + 32 +
			2 * 4 * tq * 4 * tb);
	setenv("XJ_CUDA_PIPELINE", "0", 1);
	setenv("XJ_CUDA_PASS_COLS", "16384", 1);
	CU_ASSERT_EQUAL(backend_cuda_work_bytes(&cfg, 0, 0),
			tq * tb * 12 + 16 + 8 + tq * 4 + tq * k * 12 + 32 +
			4 * tq * 16384);
	unsetenv("XJ_CUDA_SCAN");
	unsetenv("XJ_CUDA_PIPELINE");
	unsetenv("XJ_CUDA_PASS_COLS");
	/* rowsel's passes of P query rows (XJ_CUDA_PASS_ROWS, 2048 by
	 * default, no more than the query rows rounded up to 512): the
	 * slots, the merge scratch and the two pass tiles grow with P */
	{
		const int64_t fix = tq * tb * 8 + 16 + 8 + tq * 4 + 32;
		const int64_t per_q = 4 * d + 28 + 12 * k;
		xj_status st;
		int64_t p;

		xj_ok(&st);
		CU_ASSERT_EQUAL(backend_cuda_host_pass_rows(9000, &st), 2048);
		CU_ASSERT_EQUAL(backend_cuda_host_pass_rows(1500, &st), 1536);
		CU_ASSERT_EQUAL(backend_cuda_host_pass_rows(0, &st), 512);

		for (int i = 0; i < 4; i++) {
			static const int64_t rows[] = { 1, 700, 2048, 9000 };
			static const int64_t want[] = { 512, 1024, 2048, 2048 };

			p = want[i];
			CU_ASSERT_EQUAL(backend_cuda_work_bytes(&cfg, rows[i],
								0),
					rows[i] * per_q + fix +
					p * 4 * tb * 4 + p * k * 12 +
					2 * 4 * p * 4 * tb);
		}
		setenv("XJ_CUDA_PASS_ROWS", "1024", 1);
		CU_ASSERT_EQUAL(backend_cuda_host_pass_rows(9000, &st), 1024);
		CU_ASSERT_EQUAL(backend_cuda_host_pass_rows(100, &st), 512);
		/* a bad value: create fails naming it (the formula counts the
		 * default) */
		for (int i = 0; i < 3; i++) {
			static const char *bad[] = { "1000", "0", "65536" };

			setenv("XJ_CUDA_PASS_ROWS", bad[i], 1);
			xj_ok(&st);
			CU_ASSERT_EQUAL(backend_cuda_host_pass_rows(9000, &st),
					-1);
			CU_ASSERT_EQUAL(st.code, XJ_EXIT_USAGE);
			CU_ASSERT_PTR_NOT_NULL(strstr(st.msg,
						      "XJ_CUDA_PASS_ROWS"));
		}
		setenv("XJ_CUDA_PASS_ROWS", "1024", 1);
		setenv("XJ_CUDA_RS_BLOCKS", "6", 1);
		xj_ok(&st);
		CU_ASSERT_EQUAL(backend_cuda_host_pass_rows(9000, &st), -1);
		CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "XJ_CUDA_RS_BLOCKS"));
		setenv("XJ_CUDA_RS_BLOCKS", "8", 1);
		xj_ok(&st);
		CU_ASSERT_EQUAL(backend_cuda_host_pass_rows(9000, &st), 1024);
		unsetenv("XJ_CUDA_RS_BLOCKS");
		p = 1024;
		CU_ASSERT_EQUAL(backend_cuda_work_bytes(&cfg, 9000, 0),
				9000 * per_q + fix + p * 4 * tb * 4 +
				p * k * 12 + 2 * 4 * p * 4 * tb);
		unsetenv("XJ_CUDA_PASS_ROWS");
	}
	setenv("XJ_CUDA_PIPELINE", "0", 1);
	setenv("XJ_CUDA_PASS_COLS", "16384", 1);
	setenv("XJ_CUDA_SELECT", "tile", 1);
	CU_ASSERT_EQUAL(backend_cuda_work_bytes(&cfg, 0, 0),
			tq * tb * 24 + 16 + 8 + tq * 8 + tq * k * 12 + 32);
	unsetenv("XJ_CUDA_SELECT");
	unsetenv("XJ_CUDA_PIPELINE");
	unsetenv("XJ_CUDA_PASS_COLS");
	/* cosine's normalised copies, bf16 and fp16's 16-bit ones; tf32
	 * rounds inside cuBLAS */
	cfg.metric = XJ_METRIC_COSINE;
	CU_ASSERT_EQUAL(backend_cuda_work_bytes(&cfg, 1000, 2 * tb) - a,
			(1000 + 2 * tb) * 4 * d);
	cfg.metric = XJ_METRIC_L2;
	cfg.precision = XJ_PREC_BF16;
	CU_ASSERT_EQUAL(backend_cuda_work_bytes(&cfg, 1000, 2 * tb) - a,
			(1000 + 2 * tb) * 2 * d);
	cfg.precision = XJ_PREC_FP16;
	CU_ASSERT_EQUAL(backend_cuda_work_bytes(&cfg, 1000, 2 * tb) - a,
			(1000 + 2 * tb) * 2 * d);
	cfg.precision = XJ_PREC_TF32;
	CU_ASSERT_EQUAL(backend_cuda_work_bytes(&cfg, 1000, 2 * tb), a);
	/* matrix only (k = 0): one base chunk and its copy in double, no
	 * selection state; the double GEMM's query tile in double, its
	 * tile of dot products, a flag per 32 x 32 square, the count */
	cfg.precision = XJ_PREC_FP32;
	cfg.k = 0;
	CU_ASSERT_EQUAL(backend_cuda_work_bytes(&cfg, 1000, 2 * tb),
			1000 * (4 * d + 28) + 2 * tb * (12 * d + 16) +
			tq * tb * 8 + 16 + 8 * 3 +
			tq * d * 8 + tq * tb * 8 + 4 * (tq / 32) * (tb / 32) +
			8);
	/* a range join (k = 0, cfg.range): two base chunks as top-k, the
	 * candidate slots and counts, the pair count and the pair buffer of
	 * 4 tiles of 16-byte pairs */
	cfg.range = 1;
	CU_ASSERT_EQUAL(backend_cuda_work_bytes(&cfg, 1000, 2 * tb),
			1000 * (4 * d + 28) + 2 * tb * (8 * d + 16) +
			tq * tb * 8 + 16 + 8 * 3 + tq * tb * 4 + tq * 4 + 8 +
			tq * tb * 4 * 16);
	cfg.range = 0;
	/* sizes past any device saturate instead of wrapping */
	cfg.k = (int64_t)1 << 50;
	CU_ASSERT_EQUAL(backend_cuda_work_bytes(&cfg, (int64_t)1 << 40, 0),
			INT64_MAX);
	/* the grid row's merge: none on one rank, (rows + pc) lists of 12k + 8
	 * bytes on several; two pinned base chunks */
	cfg.k = k;
	CU_ASSERT_EQUAL(backend_cuda_merge_bytes(&cfg, 1000, 1), 0);
	CU_ASSERT_EQUAL(backend_cuda_merge_bytes(&cfg, 1000, 4),
			1004 * (12 * k + 8));
	CU_ASSERT_EQUAL(backend_cuda_pinned_bytes(&cfg, 3000), 3000 * d * 8);
	CU_ASSERT_EQUAL(backend_cuda_pinned_bytes(&cfg, INT64_MAX), INT64_MAX);
}

/*
 * The steps topk_add queues (topk_cuda.cu's walk) for one query chunk and
 * base chunk, over parts 0 .. parts - 1: every (query row, chunk row)
 * pair must be scanned exactly once over all parts, in tiles the
 * selection takes (at most TQ rows, TB columns inside one TB sub-tile),
 * and a self-join's block pairs must be there when the rows are shared.
 * Returns the block pairs seen.
 */
static int64_t steps_cover(xj_backend_cfg cfg, const float *qx, int64_t qfirst,
			   int64_t qrows, const xj_rows *b, int parts)
{
	const int64_t tq = 512, tb = 4096;
	int64_t nb = b->rows, pairs = 0, bad = 0, gemm = 0, cover = 0;
	unsigned char *seen = calloc((size_t)(qrows * nb), 1);

	CU_ASSERT_FATAL(seen != NULL);
	cfg.parts = parts;
	for (int part = 0; part < parts; part++) {
		int64_t n, *st;

		cfg.part = part;
		n = backend_cuda_host_topk_steps(&cfg, qx, qfirst, qrows, b,
						 NULL, 0);
		st = malloc(sizeof(int64_t) * 6 * (size_t)(n + 1));
		CU_ASSERT_FATAL(st != NULL);
		CU_ASSERT_EQUAL(backend_cuda_host_topk_steps(&cfg, qx, qfirst,
							     qrows, b, st, n),
				n);
		for (int64_t e = 0; e < n; e++) {
			const int64_t *s = st + 6 * e;
			int64_t i0 = s[1], m = s[2], j0 = s[3], w = s[4];
			int64_t off = s[5];

			gemm += m * w;
			bad += m < 1 || m > tq || w < 1 || w > tb ||
			       j0 / tb != (j0 + w - 1) / tb || i0 < 0 ||
			       i0 + m > qrows || j0 < 0 || j0 + w > nb;
			for (int64_t i = i0; i < i0 + m && !bad; i++)
				for (int64_t j = j0; j < j0 + w; j++)
					seen[i * nb + j]++;
			if (!s[0])
				continue;
			/* the transposed tile: queries of the column block
			 * against the rows of the row block, both blocks of
			 * at most TQ rows inside one sub-tile */
			pairs++;
			bad += w > tq || (i0 - off) / tb != (i0 - off + m - 1) / tb ||
			       j0 + off < 0 || j0 + w + off > qrows;
			for (int64_t j = j0 + off; j < j0 + w + off && !bad; j++)
				for (int64_t i = i0 - off; i < i0 - off + m; i++)
					seen[j * nb + i]++;
		}
		free(st);
	}
	CU_ASSERT_EQUAL(bad, 0);
	for (int64_t e = 0; e < qrows * nb; e++)
		cover += seen[e] == 1;
	CU_ASSERT_EQUAL(cover, qrows * nb);
	if (cover != qrows * nb || bad)
		printf("\n  q [%lld, +%lld) b [%lld, +%lld) parts %d: %lld of %lld pairs once",
		       (long long)qfirst, (long long)qrows,
		       (long long)b->first_row, (long long)nb, parts,
		       (long long)cover, (long long)(qrows * nb));
	/* the GEMMs cover each shared pair once and the others once */
	CU_ASSERT(pairs == 0 || gemm < qrows * nb);
	free(seen);
	return pairs;
}

/* A self-join's chunk on the CUDA backend: its steps against the CPU's
 * deal (selfjoin.h), on 1, 2, 3 and 5 parts; chunks sharing too few rows,
 * rows with the same indices but other bits, and plain top-k take the
 * plain tiles, still split by query row over the parts. */
static void test_host_topk_steps(void)
{
	const int64_t d = 2, nx = 9000;
	const int parts[] = { 1, 2, 3, 5 };
	/* qfirst, qrows, bfirst, brows, block pairs over all parts */
	const int64_t geo[][5] = {
		{ 0, 2100, 0, 2100, 10 },         /* 5 blocks, the last short */
		{ 0, 2100, 1050, 1050, 3 },       /* blocks 512, 512, 26 */
		{ 1000, 5000, 300, 8400, 55 },    /* b0 = 700: 11 blocks,
						   * plain columns past 8192 */
		{ 0, 700, 600, 2000, 0 },         /* 100 shared rows */
		{ 3000, 600, 0, 4500, 0 },        /* the query inside b,
						   * 600 rows: too few */
	};
	float *x = gauss_rows(nx, d, 0, 1), *y;
	xj_backend_cfg cfg;

	CU_ASSERT_FATAL(x != NULL);
	y = malloc(sizeof(float) * (size_t)(nx * d));
	CU_ASSERT_FATAL(y != NULL);
	memcpy(y, x, sizeof(float) * (size_t)(nx * d));
	y[1500 * d + 1] = nextafterf(y[1500 * d + 1], INFINITY);
	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = XJ_METRIC_L2;
	cfg.k = 5;
	cfg.d = d;
	cfg.self = 1;
	cfg.same_rows = 1;
	for (int g = 0; g < (int)UNIT_COUNT(geo); g++)
		for (int p = 0; p < (int)UNIT_COUNT(parts); p++) {
			const int64_t *e = geo[g];
			xj_rows b = { x + e[2] * d, e[3], d, e[2], 0 };
			xj_rows by = { y + e[2] * d, e[3], d, e[2], 0 };
			xj_backend_cfg plain = cfg;

			CU_ASSERT_EQUAL(steps_cover(cfg, x + e[0] * d, e[0],
						    e[1], &b, parts[p]), e[4]);
			/* one value of row 1500 differs: the first three
			 * share it, and take no block pairs */
			CU_ASSERT_EQUAL(steps_cover(cfg, x + e[0] * d, e[0],
						    e[1], &by, parts[p]), 0);
			plain.same_rows = 0;
			CU_ASSERT_EQUAL(steps_cover(plain, x + e[0] * d, e[0],
						    e[1], &b, parts[p]), 0);
			plain.same_rows = 1;
			plain.self = 0;
			CU_ASSERT_EQUAL(steps_cover(plain, x + e[0] * d, e[0],
						    e[1], &b, parts[p]), 0);
		}
	free(x);
	free(y);
}

/* A pair of the range ordering's reference: (row, key, index). */
typedef struct range_ref {
	int32_t row;
	float key;
	int64_t idx;
} range_ref;

static int range_ref_cmp(const void *a, const void *b)
{
	const range_ref *x = a, *y = b;

	if (x->row != y->row)
		return x->row < y->row ? -1 : 1;
	if (topk_less(x->key, x->idx, y->key, y->idx))
		return -1;
	return topk_less(y->key, y->idx, x->key, x->idx);
}

/*
 * range_end's ordering (range_cuda.cu): pairs drained in blocks, in the
 * order the device's atomics gave, into rows sorted by (key, index):
 * counts, offsets and the pairs against a qsort of every pair, bit for
 * bit (keys with ties, -0 and +0, rows with no pair, an empty block); a
 * row outside the chunk is an internal error.
 */
static void test_host_range_order(void)
{
	enum { ROWS = 37, NB = 4 };
	const int64_t n[NB] = { 500, 0, 1, 1234 };
	int64_t total = 0, at = 0, bad = 0, *idx[NB], count[ROWS];
	float *key[NB];
	int32_t *row[NB];
	range_ref *ref;
	float *okey;
	int64_t *oidx;
	uint64_t s = 99;

	for (int b = 0; b < NB; b++)
		total += n[b];
	ref = malloc(sizeof(*ref) * (size_t)total);
	okey = malloc(sizeof(float) * (size_t)total);
	oidx = malloc(sizeof(int64_t) * (size_t)total);
	CU_ASSERT_FATAL(ref && okey && oidx);
	for (int b = 0; b < NB; b++) {
		key[b] = malloc(sizeof(float) * (size_t)(n[b] + 1));
		row[b] = malloc(sizeof(int32_t) * (size_t)(n[b] + 1));
		idx[b] = malloc(sizeof(int64_t) * (size_t)(n[b] + 1));
		CU_ASSERT_FATAL(key[b] && row[b] && idx[b]);
		for (int64_t p = 0; p < n[b]; p++) {
			int64_t g = at + p;

			s = s * 6364136223846793005ull + 1442695040888963407ull;
			/* rows 5 and 6 get no pair; few distinct keys */
			row[b][p] = (int32_t)((s >> 33) % (ROWS - 2));
			row[b][p] += row[b][p] >= 5 ? 2 : 0;
			key[b][p] = (float)((int)((s >> 20) % 9) - 4) * 0.25f;
			if (key[b][p] == 0.0f && (s >> 40) % 2)
				key[b][p] = -0.0f;
			/* distinct indices, in no order */
			idx[b][p] = g * 7919 % 1000003;
			ref[g] = (range_ref){ row[b][p], key[b][p], idx[b][p] };
		}
		at += n[b];
	}
	qsort(ref, (size_t)total, sizeof(*ref), range_ref_cmp);
	poison(okey, oidx, total);
	CU_ASSERT_EQUAL_FATAL(backend_cuda_host_range_order(
		ROWS, NB, n, (const float *const *)key,
		(const int32_t *const *)row, (const int64_t *const *)idx,
		count, okey, oidx), XJ_OK);
	at = 0;
	for (int i = 0; i < ROWS; i++) {
		int64_t want = 0;

		while (at + want < total && ref[at + want].row == i)
			want++;
		bad += count[i] != want;
		for (int64_t p = 0; p < want && count[i] == want; p++)
			bad += oidx[at + p] != ref[at + p].idx ||
			       !same_f32(okey[at + p], ref[at + p].key);
		at += want;
	}
	CU_ASSERT_EQUAL(count[5] + count[6], 0);
	CU_ASSERT_EQUAL(bad, 0);
	/* a pair of row 37 in a chunk of 37 rows */
	row[3][100] = ROWS;
	CU_ASSERT_EQUAL(backend_cuda_host_range_order(
		ROWS, NB, n, (const float *const *)key,
		(const int32_t *const *)row, (const int64_t *const *)idx,
		count, okey, oidx), XJ_EXIT_INTERNAL);
	for (int b = 0; b < NB; b++) {
		free(key[b]);
		free(row[b]);
		free(idx[b]);
	}
	free(ref);
	free(okey);
	free(oidx);
}

/* ---- device suite ------------------------------------------------------ */

/* Matrix blocks and a top-k session share the device buffers
 * (backend_cuda.h): a block inside a session is refused and the session
 * goes on. A device index that does not exist is an internal error. */
static void test_limits(void)
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
	cfg.max_query_rows = 4;
	cfg.max_base_rows = 4;
	xj_ok(&st);
	CU_ASSERT_FATAL(gpu_backend_create(&cfg, &be, &st) == XJ_OK);
	xj_rows q = { x, 4, d, 10, 0 }, b = { x + 4 * d, 4, d, 20, 0 };

	poison(key, idx, 8);
	CU_ASSERT_EQUAL(be->topk_begin(be, &q, &st), XJ_OK);
	CU_ASSERT_EQUAL(backend_matrix_block(be, &q, &b, key, &st),
			XJ_EXIT_INTERNAL);
	printf("\n  (expected) %s", st.msg);
	xj_ok(&st);
	CU_ASSERT_EQUAL(be->topk_end(be, key, idx, &st), XJ_OK);
	be->release(be);
	/* a device that does not exist */
	cfg.metric = XJ_METRIC_L2;
	xj_ok(&st);
	CU_ASSERT_EQUAL(backend_cuda_create(&cfg, 4096, GPU_TEST_MEM_FRACTION,
					    &be, &st), XJ_EXIT_INTERNAL);
	printf("\n  (expected) %s ", st.msg);
	free(x);
}

/* The range join's calls out of turn are internal errors (a matrix block
 * inside a range session too), and a range session needs a threshold; a
 * session in order after them works. */
static void test_range_limits(void)
{
	const int64_t d = 6;
	float *x = gauss_rows(8, d, 0, 1);
	float val[16];
	int64_t idx[16], count[4];
	xj_backend_cfg cfg;
	xj_backend *be;
	xj_status st;

	CU_ASSERT_FATAL(x != NULL);
	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = XJ_METRIC_L2;
	cfg.d = d;
	xj_ok(&st);
	CU_ASSERT_FATAL(gpu_backend_create(&cfg, &be, &st) == XJ_OK);
	xj_rows q = { x, 4, d, 0, 0 }, b = { x + 4 * d, 4, d, 4, 0 };

	CU_ASSERT_EQUAL(be->range_begin(be, &q, &st), XJ_EXIT_INTERNAL);
	printf("\n  (expected) %s", st.msg);
	be->release(be);
	cfg.has_threshold = 1;
	cfg.threshold_key = metric_value_to_key(cfg.metric, 1e30);
	xj_ok(&st);
	CU_ASSERT_FATAL(gpu_backend_create(&cfg, &be, &st) == XJ_OK);
	CU_ASSERT_EQUAL(be->range_add(be, &b, &st), XJ_EXIT_INTERNAL);
	xj_ok(&st);
	CU_ASSERT_EQUAL(be->range_take(be, idx, val, &st), XJ_EXIT_INTERNAL);
	xj_ok(&st);
	CU_ASSERT_EQUAL(be->range_begin(be, &q, &st), XJ_OK);
	CU_ASSERT_EQUAL(be->range_add(be, &b, &st), XJ_OK);
	/* a matrix block would replace the session's query rows */
	CU_ASSERT_EQUAL(backend_matrix_block(be, &q, &b, val, &st),
			XJ_EXIT_INTERNAL);
	printf("\n  (expected) %s", st.msg);
	xj_ok(&st);
	CU_ASSERT_EQUAL(be->range_end(be, count, &st), XJ_OK);
	CU_ASSERT_EQUAL(be->range_take(be, idx, val, &st), XJ_OK);
	/* every pair: each query row keeps the 4 base rows, in order of
	 * (value, index) */
	for (int i = 0; i < 4; i++) {
		CU_ASSERT_EQUAL(count[i], 4);
		for (int p = 1; p < 4; p++)
			CU_ASSERT(!topk_less(val[4 * i + p], idx[4 * i + p],
					     val[4 * i + p - 1],
					     idx[4 * i + p - 1]));
	}
	be->release(be);
	free(x);
}

/* ---- main ------------------------------------------------------------- */

static const unit_test host_tests[] = {
	{ "keys and norms equal metric.c", test_host_keys },
	{ "gates, bounds, thresholds equal metric.c", test_host_gates },
	{ "sort key orders as topk_less", test_host_sortkey },
	{ "rank merge equals topk_merge", test_host_merge },
	{ "grid-row merge (merge.cuh) equals topk_merge",
	  test_host_merge_lists },
	{ "double GEMM decision equals metric.h's", test_host_dgemm_decide },
	{ "work, merge and pinned bytes", test_host_work_bytes },
	{ "self-join steps: every pair once over the parts",
	  test_host_topk_steps },
	{ "range: pairs of drained blocks into sorted rows",
	  test_host_range_order },
};

static const unit_test device_tests[] = {
	{ "matrix inside top-k, missing device", test_limits },
	{ "range: calls out of turn, a threshold needed", test_range_limits },
};

int main(int argc, char **argv)
{
	return gpu_test_main(argc, argv, "cuda_backend_host", host_tests,
			     UNIT_COUNT(host_tests), "cuda_backend_device",
			     device_tests, UNIT_COUNT(device_tests));
}
