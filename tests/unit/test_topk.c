/*
 * test_topk.c: the (key, index) order, sort, padding and k-way merge.
 *
 * The merge is checked against a reference built differently: concatenate
 * all lists, sort the concatenation, take k, pad.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TESTDATA_SEED 12345
#include "unit.h"
#include "testdata.h"
#include "kernels/topk.h"

/* Keys from a small set so that ties are frequent. */
static float rng_key(void)
{
	return (float)(rng_next() % 17) * 0.25f - 2.0f;
}

static int is_sorted(const float *key, const int64_t *idx, int64_t n)
{
	for (int64_t i = 1; i < n; i++)
		if (topk_less(key[i], idx[i], key[i - 1], idx[i - 1]))
			return 0;
	return 1;
}

static void test_less(void)
{
	CU_ASSERT(topk_less(1.0f, 5, 2.0f, 1));
	CU_ASSERT(!topk_less(2.0f, 1, 1.0f, 5));
	CU_ASSERT(topk_less(1.0f, 3, 1.0f, 4));          /* tie: lower index */
	CU_ASSERT(!topk_less(1.0f, 4, 1.0f, 3));
	CU_ASSERT(!topk_less(1.0f, 4, 1.0f, 4));         /* strict */
	CU_ASSERT(topk_less(INFINITY, 9, 0.0f, -1));     /* padding last */
	CU_ASSERT(!topk_less(-INFINITY, -1, 1e30f, 2));
	CU_ASSERT(topk_less(-0.5f, 7, 0.5f, 2));
	CU_ASSERT(!topk_less(INFINITY, -1, INFINITY, -1));
}

typedef struct ref_pair {
	float k;
	int64_t i;
} ref_pair;

/* Reference order written independently of topk_less (no padding here). */
static int pair_cmp_ref(const void *a, const void *b)
{
	const ref_pair *x = a, *y = b;

	if (x->k != y->k)
		return x->k < y->k ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

static void test_sort(void)
{
	const int64_t sizes[] = { 0, 1, 2, 3, 100, 256, 257, 5000 };

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		int64_t n = sizes[s];
		float *key = malloc(sizeof(float) * (n + 1));
		int64_t *idx = malloc(sizeof(int64_t) * (n + 1));
		ref_pair *ref = malloc(sizeof(*ref) * (n + 1));

		CU_ASSERT_FATAL(key && idx && ref);
		for (int64_t i = 0; i < n; i++) {
			key[i] = rng_key();
			idx[i] = (int64_t)(rng_next() % 1000000) * 8 + i % 8;
			ref[i].k = key[i];
			ref[i].i = idx[i];
		}
		topk_sort(key, idx, n);
		qsort(ref, (size_t)n, sizeof(*ref), pair_cmp_ref);
		CU_ASSERT(is_sorted(key, idx, n));
		int bad = 0;

		for (int64_t i = 0; i < n; i++)
			if (key[i] != ref[i].k || idx[i] != ref[i].i)
				if (bad++ < 3)
					printf("\n  n=%lld at %lld: (%g,%lld) want (%g,%lld)",
					       (long long)n, (long long)i, key[i],
					       (long long)idx[i], ref[i].k,
					       (long long)ref[i].i);
		CU_ASSERT_EQUAL(bad, 0);
		free(key);
		free(idx);
		free(ref);
	}
	/* padding sorts after real entries whatever its key */
	float k2[4] = { INFINITY, 3.0f, INFINITY, -1.0f };
	int64_t i2[4] = { -1, 2, 7, 1 };

	topk_sort(k2, i2, 4);
	CU_ASSERT(i2[0] == 1 && i2[1] == 2 && i2[2] == 7 && i2[3] == -1);
}

static void test_pad(void)
{
	float key[6];
	int64_t idx[6];

	poison(key, idx, 6);
	key[0] = 1;
	idx[0] = 4;
	topk_pad(key, idx, 1, 6);
	CU_ASSERT(key[0] == 1 && idx[0] == 4);
	for (int i = 1; i < 6; i++)
		CU_ASSERT(isinf(key[i]) && key[i] > 0 && idx[i] == -1);
	topk_pad(key, idx, 6, 6);   /* nothing to do */
	CU_ASSERT(key[0] == 1 && idx[0] == 4);
}

/* nlists sorted lists of length k, disjoint indices, each holding a random
 * number of real entries (the rest padding); merge vs reference. */
static int merge_case(int nlists, int64_t k, int full)
{
	float *keys = malloc(sizeof(float) * nlists * k);
	int64_t *idxs = malloc(sizeof(int64_t) * nlists * k);
	const float **kp = malloc(sizeof(*kp) * nlists);
	const int64_t **ip = malloc(sizeof(*ip) * nlists);
	ref_pair *all = malloc(sizeof(ref_pair) * nlists * k);
	float *out_k = malloc(sizeof(float) * k);
	int64_t *out_i = malloc(sizeof(int64_t) * k);
	int64_t nall = 0;
	int bad = 0;

	if (!keys || !idxs || !kp || !ip || !all || !out_k || !out_i)
		return 1;
	for (int j = 0; j < nlists; j++) {
		float *key = keys + j * k;
		int64_t *idx = idxs + j * k;
		int64_t n = full ? k : (int64_t)(rng_next() % (uint64_t)(k + 1));

		for (int64_t e = 0; e < n; e++) {
			key[e] = rng_key();
			idx[e] = e * nlists + j;   /* disjoint across lists */
			all[nall].k = key[e];
			all[nall++].i = idx[e];
		}
		topk_sort(key, idx, n);
		topk_pad(key, idx, n, k);
		kp[j] = key;
		ip[j] = idx;
	}
	qsort(all, (size_t)nall, sizeof(*all), pair_cmp_ref);
	for (int64_t e = nall; e < k; e++) {
		all[e].k = INFINITY;
		all[e].i = -1;
	}
	poison(out_k, out_i, k);
	topk_merge(nlists, kp, ip, k, out_k, out_i);
	for (int64_t e = 0; e < k; e++)
		if (memcmp(&out_k[e], &all[e].k, sizeof(float)) ||
		    out_i[e] != all[e].i) {
			if (bad++ < 3)
				printf("\n  merge nlists=%d k=%lld at %lld: (%g,%lld) want (%g,%lld)",
				       nlists, (long long)k, (long long)e, out_k[e],
				       (long long)out_i[e], all[e].k,
				       (long long)all[e].i);
		}
	free(keys);
	free(idxs);
	free(kp);
	free(ip);
	free(all);
	free(out_k);
	free(out_i);
	return bad;
}

static void test_merge(void)
{
	const int nl[] = { 1, 2, 3, 7, 64, 300 };
	const int64_t ks[] = { 1, 5, 10, 100 };

	for (size_t a = 0; a < sizeof(nl) / sizeof(nl[0]); a++)
		for (size_t b = 0; b < sizeof(ks) / sizeof(ks[0]); b++) {
			CU_ASSERT_EQUAL(merge_case(nl[a], ks[b], 0), 0);
			CU_ASSERT_EQUAL(merge_case(nl[a], ks[b], 1), 0);
		}
	/* more lists than the merge tracks on its stack */
	CU_ASSERT_EQUAL(merge_case(5000, 4, 0), 0);
	CU_ASSERT_EQUAL(merge_case(4097, 3, 1), 0);
}

static void test_merge_all_padding(void)
{
	float k0[3], k1[3], out_k[3];
	int64_t i0[3], i1[3], out_i[3];
	const float *kp[2] = { k0, k1 };
	const int64_t *ip[2] = { i0, i1 };

	topk_pad(k0, i0, 0, 3);
	topk_pad(k1, i1, 0, 3);
	poison(out_k, out_i, 3);
	topk_merge(2, kp, ip, 3, out_k, out_i);
	for (int e = 0; e < 3; e++)
		CU_ASSERT(isinf(out_k[e]) && out_i[e] == -1);
	/* ties across lists: lower index first */
	k0[0] = 1;
	i0[0] = 8;
	k1[0] = 1;
	i1[0] = 3;
	k1[1] = 1;
	i1[1] = 9;
	poison(out_k, out_i, 3);
	topk_merge(2, kp, ip, 3, out_k, out_i);
	CU_ASSERT(out_i[0] == 3 && out_i[1] == 8 && out_i[2] == 9);
	CU_ASSERT(out_k[0] == 1 && out_k[1] == 1 && out_k[2] == 1);
}

/* An entry that several lists hold is taken once, tracked (few lists)
 * or not (more than the merge tracks on its stack). */
static void test_merge_shared(void)
{
	enum { K = 4, LISTS = 5000 };
	static float keys[LISTS][K];
	static int64_t idxs[LISTS][K];
	static const float *kp[LISTS];
	static const int64_t *ip[LISTS];
	float out_k[K];
	int64_t out_i[K];
	static const int sizes[] = { 2, 3, LISTS };

	for (size_t si = 0; si < UNIT_COUNT(sizes); si++) {
		int n = sizes[si];

		for (int j = 0; j < n; j++) {
			/* every list: (1, 5) (2, 6), then its own */
			keys[j][0] = 1;
			idxs[j][0] = 5;
			keys[j][1] = 2;
			idxs[j][1] = 6;
			keys[j][2] = 3 + (float)j;
			idxs[j][2] = 100 + j;
			topk_pad(keys[j], idxs[j], 3, K);
			kp[j] = keys[j];
			ip[j] = idxs[j];
		}
		poison(out_k, out_i, K);
		topk_merge(n, kp, ip, K, out_k, out_i);
		CU_ASSERT(out_i[0] == 5 && out_i[1] == 6 && out_i[2] == 100 &&
			  out_i[3] == 101);
		CU_ASSERT(out_k[0] == 1 && out_k[1] == 2 && out_k[2] == 3 &&
			  out_k[3] == 4);
	}
}

int main(void)
{
	static const unit_test tests[] = {
		{ "less", test_less },
		{ "sort", test_sort },
		{ "pad", test_pad },
		{ "merge vs sorted concatenation", test_merge },
		{ "merge padding and ties", test_merge_all_padding },
		{ "merge takes a shared entry once", test_merge_shared },
	};

	return unit_run("topk", tests, UNIT_COUNT(tests));
}
