/*
 * testdata.h: deterministic test data shared by the kernel tests.
 *
 * defines: IDX_POISON, metrics, metric_names, rng_next, rng_unit, rng_gauss,
 *          gauss_rows, poison
 *
 * A file may #define TESTDATA_SEED before including this to get its own
 * stream. Outputs are poisoned (NaN keys, IDX_POISON indices) before the
 * code under test writes them, so an unwritten entry can never pass.
 */
#ifndef XJ_TEST_DATA_H
#define XJ_TEST_DATA_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "config/job.h"

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

#endif
