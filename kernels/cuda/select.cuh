/*
 * select.cuh: candidate selection and the exact k-lists on the device.
 *
 * defines: sel_scan, sel_merge, sel_cand_view, SEL_SORT_CAP
 *
 * One tile is TQ query rows x TB base rows (one sub-tile of the chunk).
 * After the GEMM (topk_cuda.cu) and per query row r of the tile:
 *
 * sel_scan   v_j = fn2_j + G[r][j]  (l2 family; otherwise v_j = G[r][j])
 *            keep column j when v_j <= T_r, T_r = xjc_scan_threshold() of
 *            the row's gate (cpu_topk.c, scan_row without the seeding);
 *            self pairs are skipped. Kept columns go to the row's slots
 *            cand[r][0 .. ncand[r]). A row has TB slots and a tile adds at
 *            most TB columns, and every tile's candidates are merged
 *            before the next tile is scanned, so slots cannot overflow.
 *            Bytes per element: 4 (G) + 4 (fn2, cached); 1 float add and
 *            compare.
 * (rescore.cuh turns the kept columns into canonical keys.)
 * sel_merge  sorts the row's rescored candidates by (key, index) with a
 *            block radix sort (cub::BlockRadixSort, in shared memory, on
 *            the 45-bit sort key of canonical.cuh: key image then
 *            column), then merges them into the row's exact list. The
 *            merge is by rank: an entry at position p of one sorted list
 *            goes to position p + (entries of the other list before it),
 *            found by binary search, and is kept when that is < k. All
 *            entries are distinct (distinct base indices), so the
 *            positions are a permutation and the merge needs no sort of
 *            the k-list, whatever k is. List entries before the first
 *            candidate keep their place and are not touched. The merged
 *            tail goes through a scratch row (TQ x k) and is copied back;
 *            when the list is full its gate is
 *            min(metric_gate_approx(key[k-1]), gate of the threshold).
 *            Work per row: a sort of c candidates (c <= TB) and
 *            O((k - kept) log c + c log k) comparisons.
 *
 * Exactness: a pair whose canonical key could still enter a list has
 * v <= T (metric.h), so it is scanned in, rescored and merged; the list is
 * then the best k by (key, index) of everything seen, as on the CPU. The
 * lists start as padding (+inf, -1) and entries only move up, so a list
 * is always sorted and padded.
 */
#ifndef XJ_CUDA_SELECT_CUH
#define XJ_CUDA_SELECT_CUH

#include <cub/block/block_radix_sort.cuh>

#include "canonical.cuh"
#include "check.cuh"
#include "rank.cuh"

#define SEL_THREADS 256
#define SEL_SORT_CAP (SEL_THREADS * 16)   /* largest candidate count */

/* Sorted candidates of one sub-tile: sort keys (for the column) and the
 * keys themselves (the sort key loses the sign of a zero key). */
struct sel_cand_view {
	const uint64_t *skey;
	const float *key;
	int64_t first;          /* global index of column 0 */

	XJC_HD float key_at(int64_t p) const { return key[p]; }
	XJC_HD int64_t idx_at(int64_t p) const
	{
		return first + (int64_t)xjc_sortkey_col(skey[p]);
	}
};

/* ---- scan ------------------------------------------------------------ */

/* One block per query row of the tile; threads stride over columns. */
__global__ void __launch_bounds__(SEL_THREADS)
sel_scan_kernel(const float *g, int nb, const float *fn2, int m, int64_t d,
		const double *gate, const double *qq, const float *qnorm,
		const float *bmax, int prec, int self, int64_t qfirst,
		int64_t bfirst, int *cand, int cap, int *ncand)
{
	__shared__ int s_n;
	__shared__ float s_thr;
	int r = blockIdx.x;
	const float *row = g + (int64_t)r * nb;
	int *slots = cand + (int64_t)r * cap;
	float thr;

	if (threadIdx.x == 0) {
		s_n = 0;
		s_thr = xjc_scan_threshold(m, d, gate[r], qq[r], qnorm[r],
					   *bmax, prec);
	}
	__syncthreads();
	thr = s_thr;
	for (int j = threadIdx.x; j < nb; j += SEL_THREADS) {
		float v = fn2 ? __fadd_rn(fn2[j], row[j]) : row[j];

		if (!(v <= thr))
			continue;
		if (self && bfirst + j == qfirst + r)
			continue;
		slots[atomicAdd(&s_n, 1)] = j;
	}
	__syncthreads();
	if (threadIdx.x == 0)
		ncand[r] = s_n;
}

/*
 * Scan rows [0, tq) of the tile g (tq x nb, row-major, leading dimension
 * nb). Row arrays (gate, qq, qnorm, ncand) and cand start at the tile's
 * first row; fn2 at the sub-tile's first column, NULL unless l2 family;
 * bmax points at the sub-tile's largest base norm; prec is the precision
 * the GEMM of this tile ran in (its error bound).
 */
static int sel_scan(const float *g, int tq, int nb, const float *fn2,
		    xj_metric m, int64_t d, const double *gate,
		    const double *qq, const float *qnorm, const float *bmax,
		    xj_precision prec, int self, int64_t qfirst,
		    int64_t bfirst, int *cand, int cap, int *ncand,
		    cudaStream_t s, xj_status *st)
{
	if (tq <= 0 || nb <= 0)
		return XJ_OK;
	if (nb > cap)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "sel_scan: %d columns for %d candidate slots",
			       nb, cap);
	sel_scan_kernel<<<tq, SEL_THREADS, 0, s>>>(g, nb, fn2, (int)m, d, gate,
						   qq, qnorm, bmax, (int)prec,
						   self, qfirst, bfirst, cand,
						   cap, ncand);
	CUDA_LAUNCH_CHECK(st, sel_scan_kernel);
	return XJ_OK;
}

/* ---- sort and merge ------------------------------------------------------ */

template <int ITEMS>
using sel_sorter = cub::BlockRadixSort<uint64_t, SEL_THREADS, ITEMS, float>;

/* The sort runs at one of three sizes; one shared buffer serves all. */
union sel_sort_storage {
	sel_sorter<1>::TempStorage s1;
	sel_sorter<4>::TempStorage s4;
	sel_sorter<16>::TempStorage s16;
};

/*
 * Sort n <= SEL_THREADS * ITEMS (sort key, key) pairs in place in global
 * memory. Any input arrangement will do for a sort, so the load is
 * striped (coalesced); empty slots get the all-ones sort key and stay
 * past n. Every thread loads before the sort's first barrier and stores
 * after its last, so in place is safe.
 */
template <int ITEMS>
__device__ void sel_sort_block(uint64_t *skey, float *key, int n,
			       typename sel_sorter<ITEMS>::TempStorage &tmp)
{
	uint64_t sk[ITEMS];
	float kv[ITEMS];

#pragma unroll
	for (int it = 0; it < ITEMS; it++) {
		int p = it * SEL_THREADS + threadIdx.x;

		sk[it] = p < n ? skey[p] : ~0ull;
		kv[it] = p < n ? key[p] : 0.0f;
	}
	sel_sorter<ITEMS>(tmp).SortBlockedToStriped(sk, kv, 0,
						    XJC_SORTKEY_BITS);
#pragma unroll
	for (int it = 0; it < ITEMS; it++) {
		int p = it * SEL_THREADS + threadIdx.x;

		if (p < n) {
			skey[p] = sk[it];
			key[p] = kv[it];
		}
	}
}

/* One block per query row of the tile. */
__global__ void __launch_bounds__(SEL_THREADS)
sel_merge_kernel(int m, int64_t k, double gate0, uint64_t *skey,
		 float *ckey, const int *nvalid, int cap, int64_t bfirst,
		 float *ekey, int64_t *eidx, int64_t *ecount, double *gate,
		 float *tkey, int64_t *tidx)
{
	__shared__ sel_sort_storage tmp;
	int r = blockIdx.x;
	int n = nvalid[r];
	uint64_t *sk = skey + (int64_t)r * cap;
	float *ck = ckey + (int64_t)r * cap;
	float *lk = ekey + (int64_t)r * k, *tk = tkey + (int64_t)r * k;
	int64_t *li = eidx + (int64_t)r * k, *ti = tidx + (int64_t)r * k;
	int64_t na, keep, nout;

	if (n == 0)          /* the same for the whole block */
		return;
	if (n <= SEL_THREADS)
		sel_sort_block<1>(sk, ck, n, tmp.s1);
	else if (n <= SEL_THREADS * 4)
		sel_sort_block<4>(sk, ck, n, tmp.s4);
	else
		sel_sort_block<16>(sk, ck, n, tmp.s16);
	__syncthreads();     /* the sorted candidates, stored by all */

	sel_list_view a = { lk, li };
	sel_cand_view b = { sk, ck, bfirst };

	na = ecount[r];
	keep = xjc_count_before(a, na, b.key_at(0), b.idx_at(0));
	nout = na + n < k ? na + n : k;
	xjc_merge_part(a, na, b, n, keep, k, tk, ti, threadIdx.x, SEL_THREADS);
	__syncthreads();
	for (int64_t p = keep + threadIdx.x; p < nout; p += SEL_THREADS) {
		lk[p] = tk[p];
		li[p] = ti[p];
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		ecount[r] = nout;
		if (nout == k) {
			double gk = xjc_gate_approx(m, lk[k - 1]);

			gate[r] = gk < gate0 ? gk : gate0;
		}
	}
}

/*
 * Sort and merge the candidates of rows [0, tq) of the tile: nvalid[r]
 * rescored candidates in (skey, ckey) row r (cap slots per row), base
 * index bfirst + column. List arrays (ekey, eidx: k per row; ecount,
 * gate) start at the tile's first row; (tkey, tidx) is scratch of tq x k.
 */
static int sel_merge(int tq, xj_metric m, int64_t k, double gate0,
		     uint64_t *skey, float *ckey, const int *nvalid, int cap,
		     int64_t bfirst, float *ekey, int64_t *eidx,
		     int64_t *ecount, double *gate, float *tkey,
		     int64_t *tidx, cudaStream_t s, xj_status *st)
{
	if (tq <= 0)
		return XJ_OK;
	if (cap > SEL_SORT_CAP || k < 1)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "sel_merge: %d slots per row (at most %d), k = %lld",
			       cap, SEL_SORT_CAP, (long long)k);
	sel_merge_kernel<<<tq, SEL_THREADS, 0, s>>>((int)m, k, gate0, skey,
						    ckey, nvalid, cap, bfirst,
						    ekey, eidx, ecount, gate,
						    tkey, tidx);
	CUDA_LAUNCH_CHECK(st, sel_merge_kernel);
	return XJ_OK;
}

#endif
