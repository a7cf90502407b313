/*
 * test_cpu_backend.c: what only the CPU backend has. The cases every
 * backend passes (top-k and matrix bit for bit against the canonical
 * reference, thread teams included, and the errors) are the backend
 * contract: tests/backend/contract.c, run here as unit.contract_cpu.
 *
 * Here: backend_cpu_work_bytes, the working memory the planner reserves
 * for the CPU backend, and how many matrix pairs its double GEMM leaves
 * to the canonical evaluator.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "unit.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend_int.h"
#include "kernels/cpu/cpu_transpose.h"
#include "kernels/metric.h"
#include "testdata.h"

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

/*
 * A self-join of Gaussian rows: the double GEMM's bound decides every
 * pair but the diagonal under l2, sqeuclidean and cosine (a distance of
 * exactly 0 is all cancellation) and a rare one near a float32 rounding
 * boundary; every value has the bits of metric_key().
 */
static void test_matrix_exact_pairs(void)
{
	const int64_t n = 400, d = 64;
	float *x = gauss_rows(n, d, 0, 1);
	float *out = malloc(sizeof(float) * (size_t)(n * n));

	CU_ASSERT_FATAL(x && out);
	for (size_t mi = 0; mi < 4; mi++) {
		xj_metric m = metrics[mi];
		xj_backend_cfg cfg;
		xj_backend *be;
		xj_status st;
		xj_rows r = { x, n, d, 0, 0 };
		int64_t bad = 0, exact, diag = m == XJ_METRIC_IP ? 0 : n;

		memset(&cfg, 0, sizeof(cfg));
		cfg.metric = m;
		cfg.d = d;
		cfg.max_query_rows = cfg.max_base_rows = n;
		xj_ok(&st);
		CU_ASSERT_FATAL(backend_cpu_create(&cfg, &be, &st) == XJ_OK);
		memset(out, 0xff, sizeof(float) * (size_t)(n * n));
		CU_ASSERT_EQUAL(backend_matrix_block(be, &r, &r, out, &st),
				XJ_OK);
		for (int64_t i = 0; i < n; i++)
			for (int64_t j = 0; j < n; j++) {
				const float *a = x + i * d, *b = x + j * d;
				float want = metric_key_to_value(m,
					metric_key(m, a, b, d,
						   metric_norm2(a, d),
						   metric_norm2(b, d)));

				bad += !same_f32(out[i * n + j], want);
			}
		exact = be->matrix_exact_pairs;
		printf("\n  %s: %lld of %lld pairs computed canonically",
		       metric_names[m], (long long)exact, (long long)(n * n));
		CU_ASSERT_EQUAL(bad, 0);
		CU_ASSERT(exact >= diag && exact <= diag + n * n / 1000);
		be->release(be);
	}
	free(x);
	free(out);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/*
 * The parts of its time the backend accounts for (--precision auto's
 * model reads them, app/plan/calib.c): each base chunk's preparation
 * (rows_seconds) grows with every add of a top-k and a range join, a
 * top-k counts and times its candidates (rescore_seconds), and the two
 * stay within the adds' wall time.
 */
static void test_time_parts(void)
{
	const int64_t n = 300, m = 2000, d = 48;
	float *q = gauss_rows(n, d, 1, 1), *b = gauss_rows(m, d, 2, 1);
	float *key = malloc(sizeof(float) * (size_t)(n * 10));
	int64_t *idx = malloc(sizeof(int64_t) * (size_t)(n * 10));
	int64_t *count = malloc(sizeof(int64_t) * (size_t)n);

	CU_ASSERT_FATAL(q && b && key && idx && count);
	for (int range = 0; range < 2; range++) {
		xj_backend_cfg cfg;
		xj_backend *be;
		xj_status st;
		xj_rows qr = { q, n, d, 0, 0 };
		double wall = 0, rows0 = 0;
		int64_t pairs = 0;
		int grew = 1;

		memset(&cfg, 0, sizeof(cfg));
		cfg.metric = XJ_METRIC_L2;
		cfg.d = d;
		cfg.k = 10;
		cfg.has_threshold = range;   /* some of the pairs */
		cfg.threshold_key = metric_value_to_key(XJ_METRIC_L2, 11.0f);
		cfg.max_query_rows = n;
		cfg.max_base_rows = m / 4;
		xj_ok(&st);
		CU_ASSERT_FATAL(backend_cpu_create(&cfg, &be, &st) == XJ_OK);
		CU_ASSERT_FATAL((range ? be->range_begin(be, &qr, &st) :
				 be->topk_begin(be, &qr, &st)) == XJ_OK);
		for (int64_t j0 = 0; j0 < m; j0 += m / 4) {
			xj_rows br = { b + j0 * d, m / 4, d, j0, 0 };
			double t0 = now();

			CU_ASSERT_EQUAL(range ? be->range_add(be, &br, &st) :
					be->topk_add(be, &br, &st), XJ_OK);
			wall += now() - t0;
			grew &= be->rows_seconds > rows0;
			rows0 = be->rows_seconds;
		}
		CU_ASSERT(grew);
		/* a range join's rescoring is its scan's (cpu_range.c) */
		CU_ASSERT(range || be->rescored_pairs > 0);
		CU_ASSERT(range || be->rescore_seconds > 0);
		CU_ASSERT(be->rows_seconds + be->rescore_seconds <= wall + 1e-3);
		CU_ASSERT_EQUAL(range ? be->range_end(be, count, &st) :
				be->topk_end(be, key, idx, &st), XJ_OK);
		for (int64_t i = 0; range && i < n; i++)
			pairs += count[i];
		printf("\n  %s: %.0f pairs rescored, %lld kept; rows %.2g s, "
		       "candidates %.2g s of %.2g s", range ? "range" : "top-k",
		       be->rescored_pairs, (long long)pairs, be->rows_seconds,
		       be->rescore_seconds, wall);
		CU_ASSERT(!range || pairs > 0);
		be->release(be);
	}
	free(q);
	free(b);
	free(key);
	free(idx);
	free(count);
}

/* The host transpose of the self-join's tiles and the self matrix's
 * blocks (16 x 16 tiles in registers, the edges one by one) against the definition, on every shape up to 70 x 70 and
 * with and without the column constants: the same bits. Outputs poisoned
 * first. */
static void test_tile_transpose(void)
{
	int64_t bad = 0;
	float *g = malloc(70 * 70 * sizeof(float));
	float *gt = malloc(70 * 70 * sizeof(float));
	float col[70];

	CU_ASSERT_FATAL(g && gt);
	for (int i = 0; i < 70 * 70; i++)
		g[i] = (float)((i * 7919) % 1009) / 37.0f - 13.0f;
	for (int i = 0; i < 70; i++)
		col[i] = (float)i * 0.3f - 5.0f;
	for (int64_t na = 1; na <= 70; na++)
		for (int64_t nb = 1; nb <= 70; nb += na < 17 ? 1 : 7)
			for (int wc = 0; wc < 2; wc++) {
				memset(gt, 0xff, 70 * 70 * sizeof(float));
				cpu_transpose(g, na, nb, wc ? col : NULL, gt);
				for (int64_t r = 0; r < na; r++)
					for (int64_t j = 0; j < nb; j++) {
						float want = g[r * nb + j];

						if (wc)
							want += col[r];
						bad += !same_f32(gt[j * na + r], want);
					}
			}
	CU_ASSERT_EQUAL(bad, 0);
	free(g);
	free(gt);
}

/* float_up and float_down (the scan's bounds, without branches) against
 * their definition through nextafterf, bit for bit: doubles just around
 * floats of every binade (normal, subnormal, the largest), the floats
 * themselves, signed zeros, values between zero and the smallest
 * subnormal, the infinities each takes, and random doubles. */
static int step_same(float got, float want)
{
	return memcmp(&got, &want, sizeof(got)) == 0;
}

static float up_ref(double x)
{
	float f = (float)x;

	return (double)f < x ? nextafterf(f, INFINITY) : f;
}

static float down_ref(double x)
{
	float f = (float)x;

	return (double)f > x ? nextafterf(f, -INFINITY) : f;
}

static void test_float_steps(void)
{
	static const double fixed[] = { 0.0, -0.0, 0x1p-149, -0x1p-149,
					0x1p-150, -0x1p-150, 0x1p-160, -0x1p-160,
					0x1p-126, FLT_MAX, -FLT_MAX,
					(double)FLT_MAX * (1 + 0x1p-30),
					-(double)FLT_MAX * (1 + 0x1p-30), 1.0,
					-1.0, 1.0 + 0x1p-40, -1.0 - 0x1p-40 };
	int64_t bad = 0, n = 0;
	uint64_t s = 88172645463325252ull;

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++, n++) {
		bad += !step_same(float_up(fixed[i]), up_ref(fixed[i]));
		bad += !step_same(float_down(fixed[i]), down_ref(fixed[i]));
	}
	bad += !step_same(float_up(INFINITY), INFINITY);
	bad += !step_same(float_down(-INFINITY), -INFINITY);
	for (int e = -150; e <= 128; e++)
		for (int sg = -1; sg <= 1; sg += 2)
			for (int k = -3; k <= 3; k++, n++) {
				double x = sg * ldexp(1.0 + k * 0x1p-35, e);

				bad += !step_same(float_up(x), up_ref(x));
				bad += !step_same(float_down(x), down_ref(x));
			}
	for (int i = 0; i < 200000; i++, n++) {
		double x, m;

		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		m = (double)(s >> 11) * 0x1p-53;
		x = ldexp(m, (int)(s % 300) - 160) * (s & 1 ? -1 : 1);
		bad += !step_same(float_up(x), up_ref(x));
		bad += !step_same(float_down(x), down_ref(x));
	}
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT(n > 200000);
}

int main(void)
{
	static const unit_test tests[] = {
		{ "work bytes", test_work_bytes },
		{ "matrix pairs computed canonically",
		  test_matrix_exact_pairs },
		{ "self-join tile transpose", test_tile_transpose },
		{ "time accounted in parts", test_time_parts },
		{ "float_up and float_down as nextafterf", test_float_steps },
	};

	return unit_run("cpu_backend", tests, UNIT_COUNT(tests));
}
