/*
 * merge.cuh: the merge of exchange_topk_reduce_scatter (kernels/exchange.c)
 * on the device, for the NCCL transport: the P k-lists of each row, one
 * from every rank of the grid row, into that row's top k.
 *
 * defines: merge_lists_view, xjc_list_valid, xjc_merged_position,
 *          merge_lists
 *
 * Layout, as the exchange leaves it: rows lists from each of P ranks, the
 * list of row r from rank j at (key, idx) + (j * rows + r) * k; every
 * list sorted by (key, index) (topk.h) with its valid entries first and
 * padding (+inf, -1) after them. The output is rows x k, sorted, padded.
 *
 * Math, merge by rank (select.cuh merges two lists the same way): an
 * entry at position p of list j goes to position
 *     o = p + sum over lists i != j of (valid entries of i before it)
 * of the merged list and is kept when o < k. Base indices are distinct
 * across lists (the ranks' base shards are disjoint), so (key, index) is
 * a total order on the valid entries and the positions o are a
 * permutation of 0 .. n - 1 (n valid entries in all): every output
 * position below min(n, k) is written exactly once, the rest keep the
 * padding written first. Ties of equal keys fall to the smaller index and
 * -0 equals +0 (xjc_less), as topk_merge orders them, and keys keep their
 * bits (no sort key is formed), so the result equals the host's.
 *
 * Work per row: P k entries, each with P - 1 binary searches of log2 k
 * steps (stopping once o >= k). Bytes: the received lists read a few
 * times from cache; 12 k written per row. One block per row, threads
 * stride over the row's P k entries; a first kernel counts the valid
 * entries of each list.
 */
#ifndef XJ_CUDA_MERGE_CUH
#define XJ_CUDA_MERGE_CUH

#include "canonical.cuh"
#include "check.cuh"
#include "prep.cuh"
#include "select.cuh"

#define MERGE_THREADS 256

/* The lists of one row. */
struct merge_lists_view {
	const float *key;
	const int64_t *idx;
	const int64_t *nvalid;  /* valid entries of list j of this row */
	int64_t rows, k;
	int64_t row;
	int p;

	XJC_HD sel_list_view list(int j) const
	{
		int64_t off = ((int64_t)j * rows + row) * k;

		return sel_list_view{ key + off, idx + off };
	}
};

/* Valid entries of one list: those before the first index < 0. */
XJC_HD int64_t xjc_list_valid(const int64_t *idx, int64_t k)
{
	int64_t lo = 0, hi = k;

	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;

		if (idx[mid] >= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Merged position of entry e of list j (valid), or k when it is past
 * the top k. */
XJC_HD int64_t xjc_merged_position(const merge_lists_view &v, int j,
				   int64_t e)
{
	sel_list_view l = v.list(j);
	float key = l.key_at(e);
	int64_t idx = l.idx_at(e), o = e;

	for (int i = 0; i < v.p && o < v.k; i++)
		if (i != j)
			o += xjc_count_before(v.list(i), v.nvalid[i], key, idx);
	return o < v.k ? o : v.k;
}

/* One thread per list: nvalid[r * p + j] of list j of row r. */
__global__ void __launch_bounds__(MERGE_THREADS)
merge_count_kernel(const int64_t *idx, int64_t rows, int64_t k, int p,
		   int64_t *nvalid)
{
	int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	int64_t j, r;

	if (t >= rows * p)
		return;
	j = t / rows;
	r = t % rows;
	nvalid[r * p + j] = xjc_list_valid(idx + (j * rows + r) * k, k);
}

/* One block per row. */
__global__ void __launch_bounds__(MERGE_THREADS)
merge_rank_kernel(const float *key, const int64_t *idx,
		  const int64_t *nvalid, int64_t rows, int64_t k, int p,
		  float *okey, int64_t *oidx)
{
	int64_t r = blockIdx.x;
	merge_lists_view v = { key, idx, nvalid + r * p, rows, k, r, p };

	for (int64_t t = threadIdx.x; t < (int64_t)p * k; t += MERGE_THREADS) {
		int j = (int)(t / k);
		int64_t e = t % k, o;
		sel_list_view l = v.list(j);

		if (e >= v.nvalid[j])
			continue;
		o = xjc_merged_position(v, j, e);
		if (o < k) {
			okey[r * k + o] = l.key_at(e);
			oidx[r * k + o] = l.idx_at(e);
		}
	}
}

/*
 * Merge the received lists (key, idx: p x rows x k, layout above) into
 * (okey, oidx): rows x k. nvalid is scratch of rows x p. Queued on s.
 */
static int merge_lists(int p, int64_t rows, int64_t k, const float *key,
		       const int64_t *idx, int64_t *nvalid, float *okey,
		       int64_t *oidx, cudaStream_t s, xj_status *st)
{
	int64_t lists = rows * p;

	if (rows <= 0)
		return XJ_OK;
	if (p < 1 || k < 1 || rows > INT32_MAX ||
	    (lists + MERGE_THREADS - 1) / MERGE_THREADS > INT32_MAX)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "merge_lists: %d lists of %lld rows, k = %lld",
			       p, (long long)rows, (long long)k);
	if (prep_fill_f32(okey, rows * k, INFINITY, s, st))
		return st->code;
	CUDA_CHECK(st, cudaMemsetAsync(oidx, 0xff,
				       (size_t)(rows * k) * sizeof(int64_t), s));
	merge_count_kernel<<<(unsigned)((lists + MERGE_THREADS - 1) /
					MERGE_THREADS), MERGE_THREADS, 0, s>>>(
		idx, rows, k, p, nvalid);
	CUDA_LAUNCH_CHECK(st, merge_count_kernel);
	merge_rank_kernel<<<(unsigned)rows, MERGE_THREADS, 0, s>>>(
		key, idx, nvalid, rows, k, p, okey, oidx);
	CUDA_LAUNCH_CHECK(st, merge_rank_kernel);
	return XJ_OK;
}

#endif
