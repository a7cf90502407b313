/*
 * rescore.cuh: canonical keys of the candidates a scan kept.
 *
 * defines: rescore
 *
 * Math: for query row r of the tile and each kept column j,
 *   key = metric_key(q_r, b_j)           (canonical.cuh, bit for bit)
 * then the candidate is dropped when a threshold is set and
 * !(key <= threshold key), or when the row's list is full and (key,
 * index) is not before its last entry: neither could appear in the
 * answer (the CPU's query_flush drops the same ones). Survivors are
 * packed to the front of the row's slots as (sort key, key) for
 * sel_merge, in no particular order.
 *
 * Layout: one block per query row, one thread per candidate, each
 * accumulating its pair over the dimension in index order (the
 * canonical order forbids splitting the sum across threads). Rows are
 * read from the raw float32 chunks as given, never from the normalised
 * copies.
 * Bytes per candidate: 4d of the base row (the query row is shared and
 * stays in cache) + 12; FLOPs: 3d double (l2 family), 2d (ip, cosine).
 * Candidates are rare once a list is full: the first tile of a query
 * rescores up to TB of them, later tiles a few.
 */
#ifndef XJ_CUDA_RESCORE_CUH
#define XJ_CUDA_RESCORE_CUH

#include "canonical.cuh"
#include "check.cuh"

#define RESCORE_THREADS 128

__global__ void __launch_bounds__(RESCORE_THREADS)
rescore_kernel(int m, int64_t d, const float *qx, const double *qq,
	       const float *bx, const double *bb, int64_t bfirst,
	       const int *cand, const int *ncand, int cap, int has_thr,
	       float thr_key, const float *ekey, const int64_t *eidx,
	       const int64_t *ecount, int64_t k, uint64_t *skey, float *ckey,
	       int *nvalid, unsigned long long *rescored)
{
	__shared__ int s_n;
	int r = blockIdx.x;
	int n = ncand[r];
	const float *q = qx + (int64_t)r * d;
	const int *slots = cand + (int64_t)r * cap;
	int full = ecount[r] == k;
	float last_key = full ? ekey[(int64_t)r * k + k - 1] : 0.0f;
	int64_t last_idx = full ? eidx[(int64_t)r * k + k - 1] : 0;

	if (threadIdx.x == 0) {
		s_n = 0;
		if (n > 0)
			atomicAdd(rescored, (unsigned long long)n);
	}
	__syncthreads();
	for (int c = threadIdx.x; c < n; c += RESCORE_THREADS) {
		int j = slots[c];
		float key = xjc_key(m, q, bx + (int64_t)j * d, d, qq[r], bb[j]);
		int64_t gj = bfirst + j;
		int o;

		if (has_thr && !(key <= thr_key))
			continue;
		if (full && !xjc_less(key, gj, last_key, last_idx))
			continue;
		o = atomicAdd(&s_n, 1);
		skey[(int64_t)r * cap + o] = xjc_sortkey(key, (uint32_t)j);
		ckey[(int64_t)r * cap + o] = key;
	}
	__syncthreads();
	if (threadIdx.x == 0)
		nvalid[r] = s_n;
}

/*
 * Rescore rows [0, tq) of the tile. qx, qq and the list arrays (ekey,
 * eidx: k per row; ecount) start at the tile's first query row; bx and bb
 * at the sub-tile's first base row, whose global index is bfirst. Reads
 * (cand, ncand) of sel_scan, writes (skey, ckey, nvalid) for sel_merge;
 * adds the candidates it rescores to *rescored.
 */
static int rescore(int tq, xj_metric m, int64_t d, const float *qx,
		   const double *qq, const float *bx, const double *bb,
		   int64_t bfirst, const int *cand, const int *ncand, int cap,
		   int has_thr, float thr_key, const float *ekey,
		   const int64_t *eidx, const int64_t *ecount, int64_t k,
		   uint64_t *skey, float *ckey, int *nvalid,
		   unsigned long long *rescored, cudaStream_t s, xj_status *st)
{
	if (tq <= 0)
		return XJ_OK;
	if (cap > (int)XJC_COL_MASK + 1 || k < 1)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "rescore: %d columns do not fit the sort key, k = %lld",
			       cap, (long long)k);
	rescore_kernel<<<tq, RESCORE_THREADS, 0, s>>>((int)m, d, qx, qq, bx, bb,
						      bfirst, cand, ncand, cap,
						      has_thr, thr_key, ekey,
						      eidx, ecount, k, skey,
						      ckey, nvalid, rescored);
	CUDA_LAUNCH_CHECK(st, rescore_kernel);
	return XJ_OK;
}

#endif
