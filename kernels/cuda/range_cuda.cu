/*
 * range_cuda.cu: the range join on the CUDA backend: every pair whose
 * canonical key is <= the threshold key, with no cap; and the host build
 * of its row ordering for the tests.
 *
 * Candidates come from the top-k's tiles (topk_cuda.cu, cuda_tile_scan):
 *
 *   G = alpha Q_tile B_sub^T                    cuBLAS, TQ x TB floats
 *   sel_scan   keep column j when v <= T_r = up(gate0 - c_r + err_r)
 *
 * with gate0 = metric_gate_approx(threshold key) for every row, fixed for
 * the whole run (there is no k-th key to tighten it), and err_r the error
 * bound of the GEMM's precision for the sub-tile's largest base norm
 * (xjc_scan_threshold). So no pair whose canonical key can be <= the
 * threshold key is dropped, however the GEMM rounds: the CPU's
 * argument (cpu_range.c). Each kept column is rescored here to its
 * canonical key (the bits of metric_key) and kept when that key is <=
 * the threshold key: membership is decided by the canonical value alone,
 * exactly as on the CPU. Under XJ_CUDA_SELECT=rowsel (the default) a warp
 * rescores a candidate, its lanes reading the base row coalesced, and
 * metric_sum_decide gives the key from that sum's bound (the rare
 * undecided pair is summed in index order, xjc_key); under tile each
 * thread sums one candidate with xjc_key.
 *
 * Kept pairs (key, row of the chunk, global base index) are appended to a
 * device buffer of pcap = XJ_CUDA_RANGE_TILES tiles of pairs, one atomic
 * per warp (the order is the atomics', which the sort below removes).
 * The buffer never overflows: the host keeps an upper bound of its fill
 * (every tile adds at most tq x nb pairs); before a tile that could pass
 * pcap it reads the true count and, when that tile could still pass it,
 * drains the buffer into a host block of exactly the pairs it holds. So a
 * range_add waits for the device only when the buffer may be full, and
 * the pairs of a chunk live on the host, where the planner counts them
 * (app/plan/plan.h: m x PLAN_RANGE_PAIR_BYTES per query row; 16 bytes per pair
 * in the blocks, then 12 once ordered).
 *
 * range_end drains what is left and orders the pairs on the host
 * (range_order): pairs per row, their exclusive prefix sum (the rows'
 * offsets), a scatter of each block into place (each block freed once
 * scattered: at most 16 + 12 bytes per pair at once) and a sort of each
 * row by (key, index) with topk_sort, the CPU backend's sort. Base
 * indices of a row are distinct, so the order is total and the rows are
 * the CPU's bits, whatever the order the atomics gave.
 *
 * Costs per base element: 2d GEMM FLOPs and the scan's compare, as for
 * top-k; per candidate (the pairs within the threshold plus those
 * within 2 err_r of it): 3d double FLOPs and a base row read; per pair
 * kept: 16 bytes written on the device, copied to the host once.
 */
#include "backend_cuda_int.h"

#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>
#include <omp.h>

extern "C" {
#include "../metric.h"
#include "../topk.h"
}

#include "canonical.cuh"
#include "check.cuh"

#define RANGE_THREADS 128

static_assert(RANGE_THREADS % 32 == 0,
	      "whole warps: every lane takes part in the ballot");

/* Pairs drained from the device: three arrays in one allocation, mem
 * (NULL where the arrays are the caller's). */
typedef struct range_block {
	void *mem;
	int64_t n;
	float *key;
	int32_t *row;
	int64_t *idx;
} range_block;

struct cuda_range {
	range_block *blk;       /* drained blocks, in turn */
	int nblk, blkcap;
	float *key;             /* after range_end: the pairs in row order, */
	int64_t *idx;           /* each row by (key, index) */
	int64_t total;
	int64_t qrows;
	int ended;              /* range_end ordered the pairs */
};

/* ---- device ---------------------------------------------------------- */

/* A warp's kept pairs (lane's own candidate: keep, key, base row j)
 * into the buffer with one atomic: ballot, a leader's atomicAdd, each
 * lane's place by the kept lanes below it. */
__device__ __forceinline__ void range_append(int keep, float key, int j,
					     int row, int64_t bfirst,
					     float *pkey, int32_t *prow,
					     int64_t *pidx,
					     unsigned long long *pcount,
					     unsigned long long pcap)
{
	unsigned lane = threadIdx.x & 31u;
	unsigned mask = __ballot_sync(0xffffffffu, keep);
	unsigned long long base = 0;

	if (!mask)
		return;
	if (lane == (unsigned)(__ffs((int)mask) - 1))
		base = atomicAdd(pcount, (unsigned long long)__popc(mask));
	base = __shfl_sync(0xffffffffu, base, __ffs((int)mask) - 1);
	if (keep) {
		unsigned long long o =
			base + (unsigned)__popc(mask & ((1u << lane) - 1u));

		/* the host leaves room for the whole tile; a count past
		 * pcap is reported by the host (range_count) */
		if (o < pcap) {
			pkey[o] = key;
			prow[o] = row;
			pidx[o] = bfirst + j;
		}
	}
}

/*
 * One block per query row of the tile, candidates strided over threads
 * in steps the whole block takes together (n is the block's), so that
 * each warp reserves its kept pairs with one atomic (range_append).
 */
__global__ void __launch_bounds__(RANGE_THREADS)
range_rescore_kernel(int m, int64_t d, const float *qx, const double *qq,
		     const float *bx, const double *bb, int64_t bfirst,
		     const int *cand, const int *ncand, int cap,
		     float thr_key, int row0, float *pkey, int32_t *prow,
		     int64_t *pidx, unsigned long long *pcount,
		     unsigned long long pcap)
{
	int r = blockIdx.x;
	int n = ncand[r];
	const float *q = qx + (int64_t)r * d;
	const int *slots = cand + (int64_t)r * cap;

	for (int c0 = 0; c0 < n; c0 += RANGE_THREADS) {
		int c = c0 + (int)threadIdx.x, j = 0, keep = 0;
		float key = 0.0f;

		if (c < n) {
			j = slots[c];
			key = xjc_key(m, q, bx + (int64_t)j * d, d, qq[r],
				      bb[j]);
			keep = key <= thr_key;
		}
		range_append(keep, key, j, row0 + r, bfirst, pkey, prow, pidx,
			     pcount, pcap);
	}
}

/*
 * The same with the rescoring of XJ_CUDA_SELECT=rowsel (rowsel.cuh): a
 * warp takes 32 candidates, one after the other all its lanes sum a
 * candidate's terms (elements lane, lane + 32, ...: coalesced reads of
 * the base row) and a butterfly adds them; metric_sum_decide gives the
 * key, which the lane that owns the candidate keeps. A key the bound
 * leaves undecided is summed in index order by its owner. Then one
 * append for the 32.
 */
__global__ void __launch_bounds__(RANGE_THREADS)
range_rescore_warp_kernel(int m, int64_t d, const float *qx, const double *qq,
			  const float *bx, const double *bb, int64_t bfirst,
			  const int *cand, const int *ncand, int cap,
			  float thr_key, int row0, float *pkey, int32_t *prow,
			  int64_t *pidx, unsigned long long *pcount,
			  unsigned long long pcap)
{
	const int warps = RANGE_THREADS / 32;
	int r = blockIdx.x, n = ncand[r];
	int lane = (int)(threadIdx.x & 31u), w = (int)(threadIdx.x >> 5);
	const float *q = qx + (int64_t)r * d;
	const int *slots = cand + (int64_t)r * cap;
	int sq = xjc_is_sq(m);

	for (int g = w * 32; g < n; g += warps * 32) {
		int mine = g + lane, j = mine < n ? slots[mine] : 0, und = 0;
		float key = 0.0f;

		for (int t = 0; t < 32 && g + t < n; t++) {
			int jt = slots[g + t];
			const float *b = bx + (int64_t)jt * d;
			double s = 0.0, a = 0.0;
			float kt;
			int ut;

			for (int64_t i = lane; i < d; i += 32) {
				double x;

				if (sq) {
					x = __dsub_rn((double)q[i], (double)b[i]);
					x = __dmul_rn(x, x);
				} else {
					x = __dmul_rn((double)q[i], (double)b[i]);
				}
				s = __dadd_rn(s, x);
				a = __dadd_rn(a, fabs(x));
			}
#pragma unroll
			for (int off = 16; off >= 1; off /= 2) {
				s = __dadd_rn(s, __shfl_xor_sync(0xffffffffu, s,
								 off));
				a = __dadd_rn(a, __shfl_xor_sync(0xffffffffu, a,
								 off));
			}
			ut = metric_sum_decide((xj_metric)m, d, s, sq ? s : a,
					       qq[r], bb[jt], &kt);
			if (lane == t) {
				key = kt;
				und = ut;
			}
		}
		if (mine < n && und)
			key = xjc_key(m, q, bx + (int64_t)j * d, d, qq[r], bb[j]);
		range_append(mine < n && key <= thr_key, key, j, row0 + r,
			     bfirst, pkey, prow, pidx, pcount, pcap);
	}
}

/* ---- buffers ---------------------------------------------------------- */

static void blocks_clear(struct cuda_range *r)
{
	for (int b = 0; b < r->nblk; b++)
		free(r->blk[b].mem);
	r->nblk = 0;
	free(r->key);
	free(r->idx);
	r->key = NULL;
	r->idx = NULL;
	r->total = 0;
}

void cuda_range_free(cuda_backend *c)
{
	dev_free(&c->pkey);
	dev_free(&c->prow);
	dev_free(&c->pidx);
	dev_free(&c->pcount);
	c->pcap = 0;
	if (c->range) {
		blocks_clear(c->range);
		free(c->range->blk);
		free(c->range);
		c->range = NULL;
	}
}

/* The pair buffer, the scan's candidate slots (a top-k backend has
 * them already) and the host state; at create when cfg->range says a
 * range join will run (so create's memory check counts them), else at
 * the first range_begin. */
int cuda_range_reserve(cuda_backend *c, xj_status *st)
{
	int64_t tile = (int64_t)XJ_CUDA_TQ * XJ_CUDA_TB;
	int64_t cap = tile * XJ_CUDA_RANGE_TILES;

	if (c->range && c->pcap)
		return XJ_OK;
	if ((!c->cand && dev_alloc(&c->cand, tile, "candidate slots", st)) ||
	    (!c->ncand &&
	     dev_alloc(&c->ncand, XJ_CUDA_TQ, "candidate counts", st)) ||
	    dev_alloc(&c->pkey, cap, "range pairs", st) ||
	    dev_alloc(&c->prow, cap, "range pairs", st) ||
	    dev_alloc(&c->pidx, cap, "range pairs", st) ||
	    dev_alloc(&c->pcount, 1, "the range pair count", st))
		goto fail;
	c->range = (struct cuda_range *)calloc(1, sizeof(*c->range));
	if (!c->range) {
		xj_fail(st, XJ_EXIT_RESOURCE, "out of memory (the range state)");
		goto fail;
	}
	c->pcap = cap;
	return XJ_OK;
fail:
	cuda_range_free(c);
	return st->code;
}

/* ---- host: drain and order -------------------------------------------- */

/* The host threads of the ordering: cfg.threads, 0 for OpenMP's default. */
static int range_threads(const cuda_backend *c)
{
	return c->cfg.threads > 0 ? c->cfg.threads : omp_get_max_threads();
}

/* Copy the n pairs of the device buffer into a new host block and empty
 * the buffer; the compute stream is idle when this returns. */
static int range_drain(cuda_backend *c, int64_t n, xj_status *st)
{
	struct cuda_range *r = c->range;
	range_block *b;
	char *mem;

	if (n > 0) {
		if (r->nblk == r->blkcap) {
			int cap = r->blkcap ? 2 * r->blkcap : 16;
			range_block *nb = (range_block *)realloc(
				r->blk, sizeof(*nb) * (size_t)cap);

			if (!nb)
				return xj_fail(st, XJ_EXIT_RESOURCE,
					       "out of memory (range blocks)");
			r->blk = nb;
			r->blkcap = cap;
		}
		mem = (char *)malloc((size_t)n * 16);
		if (!mem)
			return xj_fail(st, XJ_EXIT_RESOURCE,
				       "out of memory: %lld bytes for the pairs within the threshold",
				       (long long)n * 16);
		b = &r->blk[r->nblk++];
		b->mem = mem;
		b->n = n;
		b->idx = (int64_t *)mem;   /* first: malloc's alignment */
		b->key = (float *)(mem + 8 * n);
		b->row = (int32_t *)(mem + 12 * n);
		CUDA_CHECK(st, cudaMemcpyAsync(b->key, c->pkey,
					       (size_t)n * sizeof(float),
					       cudaMemcpyDeviceToHost,
					       c->stream));
		CUDA_CHECK(st, cudaMemcpyAsync(b->row, c->prow,
					       (size_t)n * sizeof(int32_t),
					       cudaMemcpyDeviceToHost,
					       c->stream));
		CUDA_CHECK(st, cudaMemcpyAsync(b->idx, c->pidx,
					       (size_t)n * sizeof(int64_t),
					       cudaMemcpyDeviceToHost,
					       c->stream));
		CUDA_CHECK(st, cudaMemsetAsync(c->pcount, 0, sizeof(*c->pcount),
					       c->stream));
		r->total += n;
	}
	CUDA_CHECK(st, cudaStreamSynchronize(c->stream));
	c->pbound = 0;
	return XJ_OK;
}

/* The true fill of the pair buffer (waits for the queued tiles). */
static int range_count(cuda_backend *c, int64_t *n, xj_status *st)
{
	unsigned long long v = 0;

	CUDA_CHECK(st, cudaMemcpyAsync(&v, c->pcount, sizeof(v),
				       cudaMemcpyDeviceToHost, c->stream));
	CUDA_CHECK(st, cudaStreamSynchronize(c->stream));
	if (v > (unsigned long long)c->pcap)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "range pair buffer: %llu pairs for %lld places",
			       v, (long long)c->pcap);
	*n = (int64_t)v;
	return XJ_OK;
}

/* Room in the pair buffer for a tile of up to need pairs. */
static int range_room(cuda_backend *c, int64_t need, xj_status *st)
{
	int64_t n;

	if (c->pbound + need <= c->pcap)
		return XJ_OK;
	if (range_count(c, &n, st))
		return st->code;
	if (n + need <= c->pcap) {
		c->pbound = n;
		return XJ_OK;
	}
	return range_drain(c, n, st);
}

/*
 * The pairs of blocks blk[0, nblk) (rows in [0, rows)) into row order:
 * count[i] the pairs of row i, (okey, oidx) each row's pairs sorted by
 * (key, index), the rows sorted on threads OpenMP threads. free_blocks:
 * each block's memory is freed once it is scattered. XJ_OK, or
 * XJ_EXIT_INTERNAL for a row out of range (count and the output are then
 * unspecified).
 */
static int range_order(int64_t rows, range_block *blk, int nblk,
		       int free_blocks, int64_t *count, float *okey,
		       int64_t *oidx, int64_t *cursor, int threads)
{
	int64_t at = 0;

	for (int64_t i = 0; i < rows; i++)
		count[i] = 0;
	for (int b = 0; b < nblk; b++)
		for (int64_t p = 0; p < blk[b].n; p++) {
			int32_t i = blk[b].row[p];

			if (i < 0 || i >= rows)
				return XJ_EXIT_INTERNAL;
			count[i]++;
		}
	for (int64_t i = 0; i < rows; i++) {   /* exclusive prefix sum */
		cursor[i] = at;
		at += count[i];
	}
	for (int b = 0; b < nblk; b++) {
		for (int64_t p = 0; p < blk[b].n; p++) {
			int64_t o = cursor[blk[b].row[p]]++;

			okey[o] = blk[b].key[p];
			oidx[o] = blk[b].idx[p];
		}
		if (free_blocks) {
			free(blk[b].mem);
			blk[b].mem = NULL;
			blk[b].n = 0;
		}
	}
	/* each row in place, rows in parallel (cursor[i] is now the end of
	 * row i): at ~1,000 pairs a row this sort is most of a GPU range
	 * join's time */
#pragma omp parallel for schedule(dynamic, 64) num_threads(threads)
	for (int64_t i = 0; i < rows; i++)
		topk_sort(okey + cursor[i] - count[i], oidx + cursor[i] - count[i],
			  count[i]);
	return XJ_OK;
}

/* ---- entry points -------------------------------------------------------- */

static int range_begin_run(cuda_backend *c, const xj_rows *q, xj_status *st)
{
	unsigned long long bad = XJC_BAD_NONE;
	struct cuda_range *r;

	c->active = 0;      /* the query buffers now hold no k-lists */
	c->ractive = 0;
	c->qtag = 0;
	if (c->range)
		c->range->ended = 0;
	if (!c->cfg.has_threshold)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "range join without a threshold");
	if (c->mqueued)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "range_begin with a matrix block queued");
	if (cuda_check_rows_arg(c, q, "query", st))
		return st->code;
	if (q->rows > INT32_MAX)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "%lld query rows in one range chunk (at most %d)",
			       (long long)q->rows, INT32_MAX);
	CUDA_CHECK(st, cudaSetDevice(c->device));
	if (cuda_range_reserve(c, st))
		return st->code;
	r = c->range;
	blocks_clear(r);
	if (cuda_query_load(c, q, &bad, st))
		return st->code;
	CUDA_CHECK(st, cudaMemsetAsync(c->pcount, 0, sizeof(*c->pcount),
				       c->stream));
	CUDA_CHECK(st, cudaStreamSynchronize(c->stream));
	if (bad != XJC_BAD_NONE)
		return cuda_rows_bad(c, q, st);
	c->pbound = 0;
	c->qrows = q->rows;
	c->qfirst = q->first_row;
	r->qrows = q->rows;
	c->ractive = 1;
	return XJ_OK;
}

/* Query rows [i0, i0 + tq) against base chunk rows [j0, j0 + nb). */
static int range_tile(cuda_backend *c, const xj_rows *b, int64_t i0, int tq,
		      int64_t j0, int nb, xj_status *st)
{
	int64_t d = c->cfg.d;
	int kt;

	if (range_room(c, (int64_t)tq * nb, st) ||
	    cuda_tile_scan(c, b, i0, tq, j0, nb, st))
		return st->code;
	if (cuda_kt_start(c, KT_RESCORE, c->stream, &kt, st))
		return st->code;
	if (c->tune.rowsel) {
		range_rescore_warp_kernel<<<tq, RANGE_THREADS, 0, c->stream>>>(
			(int)c->cfg.metric, d, c->q + i0 * d, c->qq + i0,
			c->b + j0 * d, c->bb + j0, b->first_row + j0, c->cand,
			c->ncand, XJ_CUDA_TB, c->cfg.threshold_key, (int)i0,
			c->pkey, c->prow, c->pidx, c->pcount,
			(unsigned long long)c->pcap);
		CUDA_LAUNCH_CHECK(st, range_rescore_warp_kernel);
	} else {
		range_rescore_kernel<<<tq, RANGE_THREADS, 0, c->stream>>>(
			(int)c->cfg.metric, d, c->q + i0 * d, c->qq + i0,
			c->b + j0 * d, c->bb + j0, b->first_row + j0, c->cand,
			c->ncand, XJ_CUDA_TB, c->cfg.threshold_key, (int)i0,
			c->pkey, c->prow, c->pidx, c->pcount,
			(unsigned long long)c->pcap);
		CUDA_LAUNCH_CHECK(st, range_rescore_kernel);
	}
	if (cuda_kt_stop(c, kt, c->stream, st))
		return st->code;
	c->pbound += (int64_t)tq * nb;
	return XJ_OK;
}

static int range_add_run(cuda_backend *c, const xj_rows *b, xj_status *st)
{
	int64_t nq = c->qrows, nb = b->rows;
	int slot = 0;

	if (!c->ractive)
		return xj_fail(st, XJ_EXIT_INTERNAL, "called before range_begin");
	if (cuda_check_rows_arg(c, b, "base", st))
		return st->code;
	if (nb == 0 || nq == 0)
		return XJ_OK;
	CUDA_CHECK(st, cudaSetDevice(c->device));
	if (cuda_base_load(c, b, &slot, st))
		return st->code;
	for (int64_t i0 = 0; i0 < nq; i0 += XJ_CUDA_TQ)
		for (int64_t j0 = 0; j0 < nb; j0 += XJ_CUDA_TB)
			if (range_tile(c, b, i0, (int)MIN64(XJ_CUDA_TQ, nq - i0),
				       j0, (int)MIN64(XJ_CUDA_TB, nb - j0), st))
				return st->code;
	if (cuda_base_done(c, slot, st))
		return st->code;
	c->be.gemm_flops += 2.0 * (double)nq * (double)nb * (double)c->cfg.d;
	return XJ_OK;
}

static int range_end_run(cuda_backend *c, int64_t *count, xj_status *st)
{
	struct cuda_range *r = c->range;
	unsigned long long bad = XJC_BAD_NONE;
	int64_t n, *cursor;
	int rc;

	if (!c->ractive)
		return xj_fail(st, XJ_EXIT_INTERNAL, "called before range_begin");
	c->ractive = 0;
	CUDA_CHECK(st, cudaSetDevice(c->device));
	CUDA_CHECK(st, cudaMemcpyAsync(&bad, &c->bad[1], sizeof(bad),
				       cudaMemcpyDeviceToHost, c->stream));
	if (range_count(c, &n, st) || cuda_kt_collect(c, st))
		return st->code;
	if (bad != XJC_BAD_NONE)
		return cuda_flag_bad(bad, st);
	if (range_drain(c, n, st))
		return st->code;
	r->key = (float *)malloc(sizeof(float) * (size_t)(r->total + 1));
	r->idx = (int64_t *)malloc(sizeof(int64_t) * (size_t)(r->total + 1));
	cursor = (int64_t *)malloc(sizeof(int64_t) * (size_t)(r->qrows + 1));
	if (!r->key || !r->idx || !cursor) {
		free(cursor);
		return xj_fail(st, XJ_EXIT_RESOURCE,
			       "out of memory: %lld bytes for the pairs within the threshold",
			       (long long)r->total * 12);
	}
	rc = range_order(r->qrows, r->blk, r->nblk, 1, count, r->key, r->idx,
			 cursor, range_threads(c));
	free(cursor);
	for (int b = 0; b < r->nblk; b++)   /* all, when the order failed */
		free(r->blk[b].mem);
	r->nblk = 0;
	if (rc)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "a range pair names a row outside the chunk");
	r->ended = 1;
	return XJ_OK;
}

static int range_take_run(cuda_backend *c, int64_t *idx, float *val,
			  xj_status *st)
{
	struct cuda_range *r = c->range;
	xj_metric m = c->cfg.metric;
	int nt = range_threads(c);

	if (!r || !r->ended)
		return xj_fail(st, XJ_EXIT_INTERNAL, "called before range_end");
	if (r->total > 0)
		memcpy(idx, r->idx, sizeof(int64_t) * (size_t)r->total);
#pragma omp parallel for schedule(static) num_threads(nt)
	for (int64_t p = 0; p < r->total; p++)
		val[p] = metric_key_to_value(m, r->key[p]);
	return XJ_OK;
}

int cuda_range_begin(xj_backend *be, const xj_rows *q, xj_status *st)
{
	int rc = range_begin_run(cuda_of(be), q, st);

	return rc ? cuda_entry_fail(cuda_of(be), rc, "range_begin", st) : XJ_OK;
}

/* As topk_add: a failed add may leave tiles queued; drain both streams. */
int cuda_range_add(xj_backend *be, const xj_rows *b, xj_status *st)
{
	cuda_backend *c = cuda_of(be);
	int rc = range_add_run(c, b, st);

	if (!rc)
		return XJ_OK;
	(void)cudaStreamSynchronize(c->stream);
	(void)cudaStreamSynchronize(c->cstream);
	return cuda_entry_fail(c, rc, "range_add", st);
}

int cuda_range_end(xj_backend *be, int64_t *count, xj_status *st)
{
	int rc = range_end_run(cuda_of(be), count, st);

	return rc ? cuda_entry_fail(cuda_of(be), rc, "range_end", st) : XJ_OK;
}

int cuda_range_take(xj_backend *be, int64_t *idx, float *val, xj_status *st)
{
	int rc = range_take_run(cuda_of(be), idx, val, st);

	return rc ? cuda_entry_fail(cuda_of(be), rc, "range_take", st) : XJ_OK;
}

/* ---- host build (tests) ------------------------------------------------- */

extern "C" int backend_cuda_host_range_order(int64_t rows, int nblocks,
					     const int64_t *n,
					     const float *const *key,
					     const int32_t *const *row,
					     const int64_t *const *idx,
					     int64_t *count, float *okey,
					     int64_t *oidx)
{
	range_block *blk = (range_block *)calloc((size_t)nblocks + 1,
						 sizeof(*blk));
	int64_t *cursor = (int64_t *)malloc(sizeof(int64_t) *
					    (size_t)(rows + 1));
	int rc = XJ_EXIT_RESOURCE;

	if (blk && cursor) {
		for (int b = 0; b < nblocks; b++)
			blk[b] = (range_block){ NULL, n[b], (float *)key[b],
						(int32_t *)row[b],
						(int64_t *)idx[b] };
		rc = range_order(rows, blk, nblocks, 0, count, okey, oidx,
				 cursor, 2);
	}
	free(blk);
	free(cursor);
	return rc;
}
