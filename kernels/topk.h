/*
 * topk.h: k-lists, their total order, and the merge of sorted k-lists.
 *
 * defines: topk_less, topk_sort, topk_pad, topk_merge
 *
 * A k-list for one query is two parallel arrays of length k:
 *   key[k]  float, ranking key (smaller is better, see metric.h)
 *   idx[k]  int64, global base row; -1 marks padding
 * sorted by (key, idx) ascending, padding (key = +inf, idx = -1) at the end.
 * Lists for several queries are stored row-major: query r at offset r*k.
 *
 * The merge is pure (no MPI, no device): exchange.c moves lists between ranks
 * and calls topk_merge on what arrives, whatever the transport.
 */
#ifndef XJ_TOPK_H
#define XJ_TOPK_H

#include <stdint.h>

/* Total order: (key, idx) ascending; padding (idx < 0) after everything. */
static inline int topk_less(float ka, int64_t ia, float kb, int64_t ib)
{
	if ((ia < 0) != (ib < 0))
		return ib < 0;
	if (ka != kb)
		return ka < kb;
	return ia < ib;
}

/* Sort n entries by topk_less (library sort, not hand-written). */
void topk_sort(float *key, int64_t *idx, int64_t n);

/* Fill entries [from, k) of one list with padding (+inf, -1). */
void topk_pad(float *key, int64_t *idx, int64_t from, int64_t k);

/* Merge nlists sorted k-lists of ONE query into its top k (sorted, padded).
 * keys[j], idxs[j] point at list j. An entry that several lists hold
 * (the same index and key: a self-join's lists of two streams of a
 * resumed round, kernels/cpu/cpu_topk_sym.c) is taken once. */
void topk_merge(int nlists, const float *const *keys,
		const int64_t *const *idxs, int64_t k,
		float *out_key, int64_t *out_idx);

#endif
