/*
 * rank.cuh: the merge by rank of two sorted lists, for the host and the
 * device (select.cuh and rowsel.cuh merge candidates into the k-lists
 * with it, merge.cuh the lists of a grid row the same way).
 *
 * defines: sel_list_view, xjc_count_before, xjc_merge_part
 *
 * An entry at position p of one sorted list goes to position p + (the
 * entries of the other list before it), found by binary search, and is
 * kept when that is < k. Entries are distinct (distinct base indices),
 * so the positions are a permutation: every output position is written
 * by exactly one entry, whatever the number of threads sharing the work.
 * Inline functions and templates only: any .cu may include it.
 */
#ifndef XJ_CUDA_RANK_CUH
#define XJ_CUDA_RANK_CUH

#include "canonical.cuh"

/* A sorted k-list (key, idx). */
struct sel_list_view {
	const float *key;
	const int64_t *idx;

	XJC_HD float key_at(int64_t p) const { return key[p]; }
	XJC_HD int64_t idx_at(int64_t p) const { return idx[p]; }
};

/* Number of entries of the sorted list l[0, n) before (key, idx). */
template <class L>
XJC_HD int64_t xjc_count_before(const L &l, int64_t n, float key,
				int64_t idx)
{
	int64_t lo = 0, hi = n;

	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;

		if (xjc_less(l.key_at(mid), l.idx_at(mid), key, idx))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Merged positions [keep, min(k, na + nb)) of the sorted lists a[0, na)
 * and b[0, nb) into (okey, oidx); keep = entries of a before b[0]. The
 * caller runs it as threads t0 = 0 .. tstep - 1 (or once with t0 = 0,
 * tstep = 1); each output position is written by exactly one of them.
 */
template <class A, class B>
XJC_HD void xjc_merge_part(const A &a, int64_t na, const B &b, int64_t nb,
			   int64_t keep, int64_t k, float *okey,
			   int64_t *oidx, int64_t t0, int64_t tstep)
{
	for (int64_t p = keep + t0; p < na; p += tstep) {
		float kk = a.key_at(p);
		int64_t ii = a.idx_at(p);
		int64_t o = p + xjc_count_before(b, nb, kk, ii);

		if (o < k) {
			okey[o] = kk;
			oidx[o] = ii;
		}
	}
	for (int64_t p = t0; p < nb; p += tstep) {
		float kk = b.key_at(p);
		int64_t ii = b.idx_at(p);
		int64_t o = p + xjc_count_before(a, na, kk, ii);

		if (o < k) {
			okey[o] = kk;
			oidx[o] = ii;
		}
	}
}

#endif
