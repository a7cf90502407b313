/*
 * topk.c: sorting, padding and merging of k-lists (see topk.h).
 *
 * topk_merge is a k-way merge by repeated selection of the smallest head:
 * O(k * nlists) per query, which equals the size of its input (nlists
 * lists of k entries), so it is linear in what comm.c receives. nlists is
 * the number of ranks in a grid row: a handful to a few hundred.
 */
#include "topk.h"

#include <math.h>
#include <stdlib.h>

struct topk_pair {
	float key;
	int64_t idx;
};

static int pair_cmp(const void *pa, const void *pb)
{
	const struct topk_pair *a = pa, *b = pb;

	if (topk_less(a->key, a->idx, b->key, b->idx))
		return -1;
	if (topk_less(b->key, b->idx, a->key, a->idx))
		return 1;
	return 0;
}

/*
 * Without memory for the pair array (never in practice: lists are k + a
 * few hundred long) keep the promise of a sorted result rather than crash:
 * move the smallest remaining entry to the front, O(n^2).
 */
static void sort_in_place(float *key, int64_t *idx, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		int64_t m = i;

		for (int64_t j = i + 1; j < n; j++)
			if (topk_less(key[j], idx[j], key[m], idx[m]))
				m = j;
		float tk = key[i];
		int64_t ti = idx[i];

		key[i] = key[m];
		idx[i] = idx[m];
		key[m] = tk;
		idx[m] = ti;
	}
}

void topk_sort(float *key, int64_t *idx, int64_t n)
{
	struct topk_pair stackbuf[256];
	struct topk_pair *p = stackbuf;

	if (n < 2)
		return;
	if (n > (int64_t)(sizeof(stackbuf) / sizeof(stackbuf[0]))) {
		p = malloc((size_t)n * sizeof(*p));
		if (!p) {
			sort_in_place(key, idx, n);
			return;
		}
	}
	for (int64_t i = 0; i < n; i++) {
		p[i].key = key[i];
		p[i].idx = idx[i];
	}
	qsort(p, (size_t)n, sizeof(*p), pair_cmp);
	for (int64_t i = 0; i < n; i++) {
		key[i] = p[i].key;
		idx[i] = p[i].idx;
	}
	if (p != stackbuf)
		free(p);
}

void topk_pad(float *key, int64_t *idx, int64_t from, int64_t k)
{
	for (int64_t i = from; i < k; i++) {
		key[i] = INFINITY;
		idx[i] = -1;
	}
}

/*
 * Position of the head of a sorted list once every entry up to and
 * including (lk, li) has been taken: the count of entries not after it.
 * Used instead of a head array when there are too many lists for the
 * stack; entries of one list are distinct, so this is exact, and an
 * entry that several lists hold is taken once.
 */
static int64_t head_after(const float *key, const int64_t *idx, int64_t k,
			  float lk, int64_t li)
{
	int64_t lo = 0, hi = k;

	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;

		if (!topk_less(lk, li, key[mid], idx[mid]))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

#define MERGE_STACK_LISTS 4096

void topk_merge(int nlists, const float *const *keys,
		const int64_t *const *idxs, int64_t k,
		float *out_key, int64_t *out_idx)
{
	int64_t head[MERGE_STACK_LISTS];
	int tracked = nlists <= MERGE_STACK_LISTS;
	int64_t n;

	for (int j = 0; tracked && j < nlists; j++)
		head[j] = 0;
	for (n = 0; n < k; n++) {
		int best = -1;
		int64_t bh = 0;

		for (int j = 0; j < nlists; j++) {
			int64_t h;

			if (tracked)
				h = head[j];
			else if (n == 0)
				h = 0;
			else
				h = head_after(keys[j], idxs[j], k,
					       out_key[n - 1], out_idx[n - 1]);
			if (h >= k || idxs[j][h] < 0)
				continue;
			if (best < 0 || topk_less(keys[j][h], idxs[j][h],
						  keys[best][bh],
						  idxs[best][bh])) {
				best = j;
				bh = h;
			}
		}
		if (best < 0)
			break;
		out_key[n] = keys[best][bh];
		out_idx[n] = idxs[best][bh];
		/* a pair in several lists is taken once (head_after skips
		 * it in the untracked walk) */
		for (int j = 0; tracked && j < nlists; j++)
			if (head[j] < k && idxs[j][head[j]] == out_idx[n] &&
			    keys[j][head[j]] == out_key[n])
				head[j]++;
	}
	topk_pad(out_key, out_idx, n, k);
}
