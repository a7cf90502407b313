/*
 * testdata.h: deterministic test data shared by the kernel tests.
 *
 * defines: IDX_POISON, metrics, metric_names, rng_next, rng_unit, rng_gauss,
 *          gauss_rows, poison, same_f32, same_f64, received_lists,
 *          received_merge, dgemm_pair, dgemm_dots, DGEMM_ORDERS
 *
 * A file may #define TESTDATA_SEED before including this to get its own
 * stream. Outputs are poisoned (NaN keys, IDX_POISON indices) before the
 * code under test writes them, so an unwritten entry can never pass, and
 * results are compared bit for bit (same_f32), so -0 is not +0.
 */
#ifndef XJ_TEST_DATA_H
#define XJ_TEST_DATA_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/job.h"
#include "kernels/topk.h"

#ifndef TESTDATA_SEED
#define TESTDATA_SEED 0x1234abcdull
#endif
#define IDX_POISON 0x7f7f7f7f7f7f7f7fll

static const xj_metric metrics[] = {
	XJ_METRIC_L2, XJ_METRIC_SQEUCLIDEAN, XJ_METRIC_COSINE, XJ_METRIC_IP,
};
static const char *const metric_names[] = { "l2", "sqeuclidean", "cosine",
					    "ip" };

static uint64_t rng_state = TESTDATA_SEED;

/* splitmix64 */
static inline uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in (0, 1). */
static inline double rng_unit(void)
{
	return ((double)(rng_next() >> 11) + 0.5) * 0x1p-53;
}

/* Box-Muller; u before v, so the stream does not depend on the compiler's
 * order of evaluating operands. */
static inline double rng_gauss(void)
{
	double u = rng_unit();
	double v = rng_unit();

	return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* n x d rows of offset + scale * N(0, 1); one spare float so n = 0 is a
 * valid allocation. NULL when out of memory. */
static inline float *gauss_rows(int64_t n, int64_t d, double offset,
				double scale)
{
	float *x = malloc(sizeof(float) * (size_t)(n * d + 1));

	for (int64_t i = 0; x && i < n * d; i++)
		x[i] = (float)(offset + scale * rng_gauss());
	return x;
}

static inline void poison(float *key, int64_t *idx, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		key[i] = NAN;
		idx[i] = IDX_POISON;
	}
}

/* Bit equality: NaN payloads and the sign of zero count. */
static inline int same_f32(float a, float b)
{
	return !memcmp(&a, &b, sizeof(a));
}

static inline int same_f64(double a, double b)
{
	return !memcmp(&a, &b, sizeof(a));
}

/*
 * Random received lists of a grid row's merge, laid out as the exchange
 * leaves them (the list of row r from rank j at (j rows + r) k). Rank j's
 * indices lie in its own shard [j 10^9, (j + 1) 10^9) and are distinct
 * (entry e draws from [e 1000, (e + 1) 1000) of it), keys come from a
 * small set with -0 and +0 (ties across ranks), and a list holds 0 .. k
 * valid entries (a quarter of them none or k), sorted and padded.
 */
static inline void received_lists(int p, int64_t rows, int64_t k, float *key,
				  int64_t *idx)
{
	for (int j = 0; j < p; j++)
		for (int64_t r = 0; r < rows; r++) {
			float *lk = key + ((int64_t)j * rows + r) * k;
			int64_t *li = idx + ((int64_t)j * rows + r) * k;
			int64_t n = (int64_t)(rng_next() % (uint64_t)(k + 1));

			if (rng_next() % 4 == 0)
				n = rng_next() % 2 ? k : 0;
			for (int64_t e = 0; e < n; e++) {
				lk[e] = (float)(rng_next() % 7) - 3.0f;
				if (lk[e] == 0 && rng_next() % 2)
					lk[e] = -0.0f;
				li[e] = (int64_t)j * 1000000000 + e * 1000 +
					(int64_t)(rng_next() % 1000);
			}
			topk_sort(lk, li, n);
			topk_pad(lk, li, n, k);
		}
}

/* The reference merge of received_lists' layout: topk_merge (what
 * exchange_topk_reduce_scatter runs) of each row's p lists into (okey,
 * oidx), rows x k. 0, or -1 when out of memory. */
static inline int received_merge(int p, int64_t rows, int64_t k,
				 const float *key, const int64_t *idx,
				 float *okey, int64_t *oidx)
{
	const float **lk = malloc(sizeof(*lk) * (size_t)(p + 1));
	const int64_t **li = malloc(sizeof(*li) * (size_t)(p + 1));
	int rc = lk && li ? 0 : -1;

	for (int64_t r = 0; !rc && r < rows; r++) {
		for (int j = 0; j < p; j++) {
			lk[j] = key + ((int64_t)j * rows + r) * k;
			li[j] = idx + ((int64_t)j * rows + r) * k;
		}
		topk_merge(p, lk, li, k, okey + r * k, oidx + r * k);
	}
	free(lk);
	free(li);
	return rc;
}

/*
 * Pair i of a stream built against the double GEMM's verification
 * (metric_dgemm.h): d >= 4 elements each in q and b, by i % 6
 *   0  q.b on a float32 rounding boundary: q = (a, h, e, t) scaled by a
 *      power of two in 2^-60..2^56, h half an ulp of a, e 0 or +-2^-40 a,
 *      against b = (1, 1, 1, 2^-60)
 *   1  a duplicate at 1e17 (l2: distance 0, all cancellation)
 *   2  a near-duplicate: b = q but one element one ulp up, any magnitude
 *      in 1e-20..1e17
 *   3  independent rows, each of any magnitude in 1e-20..1e17
 *   4  as 3, with one query value +-1e18 (squared norms stay < 1e37)
 *   5  a squared distance on a float32 rounding boundary:
 *      q = (1, 2^-12, 0.., +-2^-40), b = (0.., 2^-70): s = 1 + 2^-24 +- ...
 */
static inline void dgemm_pair(int64_t i, int64_t d, float *q, float *b)
{
	double scale = pow(10.0, -20.0 + 37.0 * rng_unit());
	float sc = ldexpf(1.0f, (int)(i % 117) - 60);

	for (int64_t j = 0; j < d; j++) {
		q[j] = (float)rng_gauss();
		b[j] = (float)rng_gauss();
	}
	switch (i % 6) {
	case 0:
		memset(q, 0, sizeof(float) * (size_t)d);
		memset(b, 0, sizeof(float) * (size_t)d);
		q[0] = (float)(1.0 + rng_unit()) * sc;
		q[1] = (float)(0x1p-24 * sc);
		q[2] = (float)((double)(i % 3 - 1) * 0x1p-40 * sc);
		q[3] = sc * 0x1p-30f;
		b[0] = b[1] = b[2] = 1.0f;
		b[3] = 0x1p-60f;
		break;
	case 1:
		for (int64_t j = 0; j < d; j++)
			q[j] = b[j] = (float)(q[j] * 1e17);
		break;
	case 2:
		for (int64_t j = 0; j < d; j++)
			b[j] = q[j] = (float)(q[j] * scale);
		b[i % d] = nextafterf(b[i % d], INFINITY);
		break;
	case 3:
	case 4:
		for (int64_t j = 0; j < d; j++) {
			q[j] = (float)(q[j] * scale);
			b[j] = (float)(b[j] * pow(10.0, -20.0 + 37.0 *
						   rng_unit()));
		}
		if (i % 6 == 4)
			q[i % d] = (float)(i % 12 == 4 ? 1e18 : -1e18);
		break;
	default:
		memset(q, 0, sizeof(float) * (size_t)d);
		memset(b, 0, sizeof(float) * (size_t)d);
		q[0] = 1.0f;
		q[1] = 0x1p-12f;
		q[d - 1] = (float)((double)(i % 3 - 1) * 0x1p-40);
		b[d - 1] += 0x1p-70f;
	}
}

/* The dot product of q and b in double as GEMMs may sum it: index order,
 * reverse order, with FMA, and pairwise halves. */
#define DGEMM_ORDERS 4
static inline void dgemm_dots(const float *q, const float *b, int64_t d,
			      double p[DGEMM_ORDERS])
{
	double f = 0, r = 0, m = 0, lo = 0, hi = 0;

	for (int64_t j = 0; j < d; j++) {
		f += (double)q[j] * (double)b[j];
		r += (double)q[d - 1 - j] * (double)b[d - 1 - j];
		m = fma((double)q[j], (double)b[j], m);
		if (j < d / 2)
			lo += (double)q[j] * (double)b[j];
		else
			hi += (double)q[j] * (double)b[j];
	}
	p[0] = f;
	p[1] = r;
	p[2] = m;
	p[3] = lo + hi;
}

#endif
