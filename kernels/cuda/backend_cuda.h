/*
 * backend_cuda.h: the CUDA backend (cuBLAS candidates + canonical
 * rescoring on one GPU), behind the interface of kernels/backend.h.
 *
 * defines: backend_cuda_create, backend_cuda_probe,
 *          backend_cuda_device_info, backend_cuda_work_bytes,
 *          backend_cuda_merge_bytes, backend_cuda_pinned_bytes,
 *          backend_cuda_host_*, backend_cuda_test_*
 *
 * kernels/cuda/ is the CUDA backend, the other implementation of
 * kernels/backend.h beside kernels/cpu/ (neither includes the other):
 * this object (backend_cuda.cu), top-k and self-joins (topk_cuda.cu),
 * the matrix (matrix_cuda.cu), range joins (range_cuda.cu), the kernels
 * in *.cuh, the NCCL transport and the loadable module (module.c).
 *
 * Plain C: app/ includes this header and never sees CUDA types or
 * <<< >>>. Results are canonical (metric.h): the same bits as the CPU
 * backend for every metric, k, threshold, self setting and chunking.
 *
 * Call pattern and its guarantees (see backend.h for the shapes):
 *   topk_begin   copies the query chunk to the device and returns when
 *                it is checked; q->x may be reused afterwards, except
 *                in a self-join (cfg.self and cfg.same_rows): there it
 *                must stay valid and unchanged until topk_end, as the
 *                CPU backend always needs, because topk_add compares
 *                the rows a base chunk shares with it (topk_cuda.cu).
 *   topk_add     stages the base chunk in pinned memory, queues its
 *                upload on the copy stream and all the work on the
 *                compute stream and returns without waiting: b->x may be
 *                reused at once, the caller reads the next chunk while
 *                the GPU works, and that chunk's upload overlaps this
 *                chunk's tiles.
 *                Errors found on the device (a base row that fails
 *                metric_check_rows, a fault) are reported by the next
 *                call that waits: topk_end at the latest.
 *   topk_end     waits, copies the sorted, padded lists into key/idx.
 *   topk_end_merged  (instead of topk_end, with a NCCL transport,
 *                nccl_transport.h) waits, exchanges the lists over the
 *                grid row on the device, merges them there (merge.cuh)
 *                and copies only this rank's merged part: the result of
 *                topk_end + exchange_topk_reduce_scatter, bit for bit.
 *   matrix_start copies and checks the rows (q->x and b->x may be
 *                reused when it returns), queues the block's tiles and
 *                their copies into out, and returns; out should be
 *                block_alloc's pinned memory (pageable memory works, with
 *                synchronous copies). matrix_wait waits for them. Not
 *                between topk_begin and topk_end (they share buffers).
 *                A backend made with k = 0 (a matrix job) proposes the
 *                values by cublasDgemm and verifies them with the CPU's
 *                bound (metric_dgemm.h), computing the pairs it leaves
 *                undecided canonically (matrix_exact_pairs counts them);
 *                one made for top-k computes every pair canonically.
 *   range_begin  as topk_begin (the chunk checked when it returns).
 *   range_add    as topk_add, except that it waits for the device when
 *                the pair buffer may be full, to drain it to the host
 *                (range_cuda.cu).
 *   range_end    waits, reports a bad base row as topk_end does, and
 *                orders the pairs on the host; range_take copies them.
 *                range_begin .. range_end is not between topk_begin and
 *                topk_end, nor with a matrix block queued.
 * One backend drives one device from one host thread at a time.
 *
 * cfg->precision (--precision) picks the arithmetic of the candidate
 * GEMM: fp32 (cublasSgemm, no tensor cores), tf32 (cublasGemmEx with
 * CUBLAS_COMPUTE_32F_FAST_TF32), bf16 or fp16 (16-bit copies of the rows,
 * cublasGemmEx with CUBLAS_COMPUTE_32F). The scan then uses that
 * precision's error bound (metric_err_bound_prec), so the lists are the
 * same bits whatever the precision; only the number of rescored
 * candidates changes. fp16 cannot hold |x| > 65504: a query or base chunk
 * holding such a value (found on the host) runs its tiles in fp32.
 *
 * How top-k selects (A/B switches of one binary, read from the
 * environment at create; a bad value fails create with XJ_EXIT_USAGE;
 * be->detail says what runs):
 *   XJ_CUDA_SELECT=rowsel|tile   rowsel (default): a pass of up to
 *                XJ_CUDA_PASS_ROWS query rows against up to
 *                XJ_CUDA_PASS_COLS base rows is one
 *                GEMM and one kernel that scans, seeds, rescores (a warp
 *                per candidate and a bound that decides most keys),
 *                sorts and merges (rowsel.cuh, topk_pass.cu); tile: per
 *                TQ x TB tile a GEMM and the scan, rescore and merge
 *                kernels (select.cuh, rescore.cuh)
 *   XJ_CUDA_PASS_COLS=N          rowsel's base rows per pass, a multiple
 *                of TB = 4096 (default 16384)
 *   XJ_CUDA_PASS_ROWS=N          rowsel's query rows per pass, a multiple
 *                of TQ = 512 (default 2048; no more than the query
 *                chunk's rows rounded up to TQ): cuBLAS runs the 16-bit
 *                GEMMs of 512 rows at half their rate at 1,024 (H100),
 *                and a launch of more blocks than one wave hides the
 *                rows' selection latency
 *   XJ_CUDA_RS_BLOCKS=8|4        rowsel's kernel built for at least 8
 *                blocks an SM (64 registers a thread, a few spilled;
 *                default: on an H100, 50,000 x 1M, k = 1000 ran 12-15%
 *                faster, k = 10 up to 5%) or 4 (128 registers)
 *   XJ_CUDA_PIPELINE=1|0         rowsel's GEMMs on a stream of their own
 *                into two tile buffers, so a pass's GEMM runs beside the
 *                previous pass's selection (default 1)
 *   XJ_CUDA_SEED=1|0             rowsel seeds a row's gate from its first
 *                sub-tile's k-th smallest GEMM value (default 1)
 *   XJ_CUDA_SCAN=pass|sub        rowsel scans the rest of a pass in one
 *                step once a row has its gate (pass, default), or a
 *                sub-tile at a time (sub)
 *   XJ_CUDA_SYM=0|1|2            a self-join on one rank scores each pair
 *                of shared rows once, in 512 x 512 block pairs (1), in
 *                passes of a block's rows against the shared rows after
 *                it whose tile is read once for both sides (2, after
 *                every diagonal block; once.cuh; rowsel with
 *                XJ_CUDA_SCAN=pass only), or takes the plain passes (0,
 *                default: on an H100 the block pairs, a GEMM, a transpose
 *                and two launches each, ran 3.9x slower than the plain
 *                job at 200,000 rows); a self-join split across ranks
 *                (cfg->parts > 1) always takes the block pairs
 *   XJ_CUDA_TIMING=1|0           events around every launch, summed per
 *                kernel class into be->ktime (default 1)
 *   XJ_CUDA_TILE16=1|0           an fp16 top-k's plain passes have the
 *                GEMM write its tile in fp16, scaled by a power of two
 *                (1, default), half the bytes the GEMM writes and rowsel
 *                reads, or in float (0); the scan's bound takes the
 *                tile's rounding (canonical.cuh). On an H100 at 1M x 1M
 *                x 128, k = 10: fp16 4.32 s against 5.81 with a float
 *                tile, bf16 5.57, tf32 5.94
 *                (tests/gpu/records/2026-11-27-h100-t16.log)
 *   XJ_CUDA_FMIN=0|1             l2 family: rowsel's pass-wide scan
 *                first tests a column's value against its sub-tile's
 *                smallest fn2 (1; a superset of the columns the exact
 *                test keeps, so fn2 is read only for a group of four
 *                columns with one through) or reads fn2 for every column
 *                (0, default until timed on a GPU)
 *   XJ_CUDA_RS_ROWS=1|2|4|8      rowsel's block takes one query row (1,
 *                default until timed on a GPU) or R (2, 4, 8): once the
 *                R rows have their gates, one scan reads each group's
 *                fn2 once for all R and one prologue serves them
 *                (rowsel.cuh's rowsel_rows); 1/R of the blocks; not
 *                with XJ_CUDA_FMIN=1
 * The lists are the same bits under every setting.
 *
 * Memory: everything is allocated by backend_cuda_create for
 * cfg->max_query_rows and cfg->max_base_rows (larger chunks later make
 * the backend grow its buffers, which may fail with XJ_EXIT_RESOURCE).
 * Create first checks backend_cuda_work_bytes() against mem_fraction of
 * the device's free memory. On XJ_EXIT_RESOURCE nothing stays allocated,
 * so a caller may halve max_query_rows and/or max_base_rows and call
 * create again (the driver's halving loop); any other code is final.
 */
#ifndef XJ_BACKEND_CUDA_H
#define XJ_BACKEND_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stddef.h>
#include <stdint.h>

#include "../backend.h"

/* Create a CUDA backend on device (a CUDA runtime index) using at most
 * mem_fraction (0, 1] of its free memory. Returns XJ_OK and *out, or an
 * error: XJ_EXIT_RESOURCE when memory is short. */
int backend_cuda_create(const xj_backend_cfg *cfg, int device,
			double mem_fraction, xj_backend **out, xj_status *st);

/* Usable CUDA devices. Always returns XJ_OK: where there are none (no
 * driver, no device, a device older than compute capability 8.0) it sets
 * *ndevices = 0 and writes the reason, e.g. "no NVIDIA driver, or one
 * older than the CUDA runtime (cudaErrorInsufficientDriver: ...)". */
int backend_cuda_probe(int *ndevices, char *reason, size_t reason_size);

/* One line describing device: "[PCI bus id] name, compute capability
 * X.Y, F of T GiB free". Returns XJ_OK, or XJ_EXIT_INTERNAL with the
 * CUDA error in line. */
int backend_cuda_device_info(int device, char *line, size_t size);

/* Device bytes the backend allocates for query chunks of qrows rows and
 * base chunks of brows rows, for the planner's memory formula:
 *   per query row  4d (rows) + 4d (cosine copy) + 2d (bf16/fp16 copy) +
 *                  28 (norms, gate, count) + 12k (k-list)
 *   per base row   8d for k >= 1 and range joins (two chunks: one
 *                  uploaded while the other is used), else 12d (one
 *                  chunk, and its copy in double for the matrix's
 *                  GEMM); + 4d (cosine) + 2d
 *                  (bf16/fp16) + 16 (norms) + 4/TB (sub-tile max)
 *   fixed          TQ x TB x 8 (GEMM tile, second matrix tile) + 16 (row
 *                  flags) and, for k >= 1, with P the pass rows
 *                  (cuda_pass_rows: TQ for the tile kernels), P x TB x 4
 *                  (candidate slots; P x XJ_CUDA_PASS_COLS x 4 for
 *                  rowsel's pass-wide scan) + TQ x 4 (counts) + P x k x
 *                  12 (merge scratch) + 32 (counters), and then for
 *                  rowsel P x XJ_CUDA_PASS_COLS x 4 per pass tile (two with the
 *                  pipeline), for tile TQ x TB x 12 (sort keys, keys) +
 *                  TQ x 4; for k = 0, TQ x d x 8 (a query tile
 *                  in double) + TQ x TB x 8 (its dot products) +
 *                  4 TQ TB / 32^2 (a flag per 32 x 32 square) + 8 (the
 *                  count); for a range join (k = 0, cfg->range) instead
 *                  TQ x TB x 4 (candidate slots) + TQ x 4 + 8 + 4 TQ x
 *                  TB x 16 (the pair buffer, 128 MiB); TQ = 512, TB = 4096
 * A self-join's block pair (TQ x TQ) and its transposed copy share the
 * GEMM tile: no bytes beyond these.
 * cuBLAS's own workspace and the CUDA context (a few hundred MiB) come on
 * top; leave them in the planner's reserve. */
int64_t backend_cuda_work_bytes(const xj_backend_cfg *cfg, int64_t qrows,
				int64_t brows);

/* Device bytes topk_end_merged adds when it first runs, for query chunks
 * of qrows rows merged over pc ranks (0 when pc == 1): the received lists,
 * at most (qrows + pc) k entries of 12 bytes, and 8 per received list. */
int64_t backend_cuda_merge_bytes(const xj_backend_cfg *cfg, int64_t qrows,
				 int pc);

/* Pinned host bytes for base chunks of brows rows (two staging buffers
 * of brows x d floats), for the host budget. */
int64_t backend_cuda_pinned_bytes(const xj_backend_cfg *cfg, int64_t brows);

/*
 * Host builds of the device arithmetic (canonical.cuh, select.cuh), for
 * unit tests that compare it with metric.c and topk.c on a machine
 * without a GPU. Not used by the backend itself.
 */
double backend_cuda_host_norm2(const float *x, int64_t d);
float backend_cuda_host_key(xj_metric m, const float *q, const float *b,
			    int64_t d, double qq, double bb);
double backend_cuda_host_gate(xj_metric m, float key);
double backend_cuda_host_err_bound(xj_metric m, int64_t d, double qnorm,
				   double bnorm);
float backend_cuda_host_threshold(xj_metric m, int64_t d, double gate,
				  double qq, float qnorm, float bmax);
uint64_t backend_cuda_host_sortkey(float key, uint32_t col);
/* metric_dgemm_decide as this library compiles it for the host beside
 * the device code of matrix.cuh's verify_kernel */
int backend_cuda_host_dgemm_decide(xj_metric m, int64_t d, double p,
				   double qq, double bb, float *value);
/* The scan threshold and error bound of a GEMM in precision p. */
float backend_cuda_host_threshold_prec(xj_metric m, int64_t d, double gate,
				       double qq, float qnorm, float bmax,
				       xj_precision p);
double backend_cuda_host_err_bound_prec(xj_metric m, int64_t d,
					double qnorm, double bnorm,
					xj_precision p);
/* fp16's bound for the 16-bit tile of unit gunit (XJ_CUDA_TILE16). */
double backend_cuda_host_err_bound_tile16(xj_metric m, int64_t d,
					  double qnorm, double bnorm,
					  double gunit);
/* x as prep_lowp rounds it for the GEMM (bf16, fp16: the CUDA
 * conversions, round to nearest even); x itself for fp32 and tf32, which
 * cuBLAS rounds inside the GEMM. */
float backend_cuda_host_round(xj_precision p, float x);
/* 1 when every |x_i| <= 65504, the test that keeps a chunk on fp16. */
int backend_cuda_host_fp16_fits(const float *x, int64_t n);
/* The largest |x_i| (+inf with a NaN): under fp16 the 16-bit tile's
 * scale starts from it (backend_cuda_host_tile16_exp). */
float backend_cuda_host_max_abs(const float *x, int64_t n);
/* merge.cuh's merge of p received lists per row, run sequentially:
 * (key, idx) holds p x rows x k entries (rank j's list of row r at
 * (j rows + r) k), (okey, oidx) gets rows x k. XJ_OK or
 * XJ_EXIT_RESOURCE. */
int backend_cuda_host_merge_lists(int p, int64_t rows, int64_t k,
				  const float *key, const int64_t *idx,
				  float *okey, int64_t *oidx);
/* The rank merge of sel_merge, run sequentially: the sorted list
 * (akey, aidx, na) and nb candidates sorted by sort key (skey, ckey) of
 * the sub-tile starting at global row bfirst; writes the best k
 * (sorted, only the first min(k, na + nb) entries) to (okey, oidx) and
 * returns their count. */
int64_t backend_cuda_host_merge(const float *akey, const int64_t *aidx,
				int64_t na, const uint64_t *skey,
				const float *ckey, int64_t nb, int64_t bfirst,
				int64_t k, float *okey, int64_t *oidx);

/* range_end's ordering on the host (range_cuda.cu): the pairs of nblocks
 * blocks (block b: n[b] pairs key[b], row[b] in [0, rows), idx[b]; any
 * order) into row order: count[i] pairs of row i, (okey, oidx) each row
 * sorted by (key, index), rows one after the other. XJ_OK,
 * XJ_EXIT_RESOURCE, or XJ_EXIT_INTERNAL for a row outside [0, rows). */
int backend_cuda_host_range_order(int64_t rows, int nblocks,
				  const int64_t *n, const float *const *key,
				  const int32_t *const *row,
				  const int64_t *const *idx, int64_t *count,
				  float *okey, int64_t *oidx);

/* rowsel's query rows per pass for query chunks of qrows rows, as create
 * reads XJ_CUDA_PASS_ROWS (and the other variables); -1 with st set
 * (XJ_EXIT_USAGE) for a bad value. */
int64_t backend_cuda_host_pass_rows(int64_t qrows, xj_status *st);

/*
 * The steps topk_add queues for base chunk b against the query chunk of
 * qrows rows from qfirst (host rows qx, as topk_begin got them), under
 * cfg (self, same_rows, part, parts): 6 values per step, at most cap
 * steps written to steps, the count returned. (pair, i0, tq, j0, nb,
 * off): one GEMM tile of query-chunk rows [i0, i0 + tq) against chunk
 * rows [j0, j0 + nb); pair 1 adds its transpose, query rows [j0 + off,
 * + nb) against chunk rows [i0 - off, + tq) (a self-join's block pair,
 * topk_cuda.cu).
 */
int64_t backend_cuda_host_topk_steps(const xj_backend_cfg *cfg,
				     const float *qx, int64_t qfirst,
				     int64_t qrows, const xj_rows *b,
				     int64_t *steps, int64_t cap);

/*
 * The top-k pass of rowsel.cuh run on the host (tests): query rows q
 * (nq x d, global rows from qfirst) against one base chunk b (nb x d,
 * from bfirst), with g (nq x nb, row-major) the tile values as the GEMM
 * of precision p would give them: alpha q.b with alpha -2 (l2 family) or
 * -1 (ip), -qn.bn on rows normalised as the backend normalises them
 * (cosine). Tiles of tq query rows, passes of pass_cols base rows,
 * sub-tiles of tb. The lists (key, idx: nq x k; count: nq) and gates
 * (nq) carry over from call to call, so several chunks stream in turn;
 * backend_cuda_host_topk_init starts them as topk_begin does. stats gets
 * the rescored pairs, those left undecided by the bound, the sub-tiles
 * seeded, the groups of 4 columns the scan passed over without
 * reading their fn2 (fmin: XJ_CUDA_FMIN's scan) and the rows scanned
 * by a joint block (rows > 1: rowsel_rows), added. tile16 (fp16 only):
 * g holds the 16-bit tile's values instead, fp16 numbers h (held
 * exactly as floats) of 2^e16 times the above, e16 from
 * backend_cuda_host_tile16_exp, as XJ_CUDA_TILE16's GEMM writes them.
 */
typedef struct backend_cuda_host_pass {
	xj_metric metric;
	int64_t d, k;
	xj_precision p;
	const float *q;
	int64_t nq, qfirst;
	const float *b;
	int64_t nb, bfirst;
	const float *g;
	int self, has_threshold;
	float threshold_key;
	int64_t tq, tb, pass_cols;
	int seed;
	int whole;              /* XJ_CUDA_SCAN=pass */
	int tile16, e16;        /* XJ_CUDA_TILE16=1 */
	int fmin;               /* XJ_CUDA_FMIN=1 */
	int rows;               /* XJ_CUDA_RS_ROWS: 1 (or 0), 2, 4, 8 */
} backend_cuda_host_pass;

/*
 * XJ_CUDA_SYM=2's self-join (once.cuh) on the host: p's rows q = b (nq =
 * nb rows from global row 0, self set) cut into blocks of tq rows (tb a
 * multiple of tq); every diagonal block as a pass of its own
 * (backend_cuda_host_topk), then each block against the rows after it in
 * passes of up to pass_cols columns, read once for both sides from g's
 * upper blocks (g: nb x nb values as for backend_cuda_host_topk, the lower
 * ones never read). The lists, gates and stats as there.
 */
int backend_cuda_host_selfjoin_once(const backend_cuda_host_pass *p,
				    float *key, int64_t *idx, int64_t *count,
				    double *gate, unsigned long long stats[5],
				    xj_status *st);

/* The 16-bit tile's scale exponent for rows whose largest |x_i| are qmax
 * and bmax (the GEMM's rows: 1 + 2^-20 for cosine's normalised ones). */
int backend_cuda_host_tile16_exp(xj_metric m, int64_t d, float qmax,
				 float bmax);

/* xjc_seed_gate (canonical.cuh): the gate of a row whose k eligible
 * columns have scan values <= t (gunit: the 16-bit tile's, or 0). */
double backend_cuda_host_seed_gate(xj_metric m, int64_t d, float t,
				   double qq, float qnorm, float bmax,
				   xj_precision p, double gunit);
void backend_cuda_host_topk_init(xj_metric m, int has_threshold,
				 float threshold_key, int64_t nq, int64_t k,
				 float *key, int64_t *idx, int64_t *count,
				 double *gate);
int backend_cuda_host_topk(const backend_cuda_host_pass *p, float *key,
			   int64_t *idx, int64_t *count, double *gate,
			   unsigned long long stats[5], xj_status *st);

/*
 * The device pieces on their own, for the gpu tests (each a complete,
 * synchronous call on device):
 *   backend_cuda_test_gemm   g = alpha q b^T (nq x nb, row-major) through
 *                            the backend's GEMM of precision p, 16-bit
 *                            copies included
 *   backend_cuda_test_gemm16 the same in fp16 with the 16-bit tile's
 *                            fp16 output (XJ_CUDA_TILE16), widened to
 *                            floats (alpha carries the tile's 2^e)
 *   backend_cuda_test_merge  merge.cuh on host lists laid out as
 *                            backend_cuda_host_merge_lists takes them
 */
int backend_cuda_test_gemm(int device, xj_precision p, const float *q,
			   int64_t nq, const float *b, int64_t nb, int64_t d,
			   float alpha, float *g, xj_status *st);
int backend_cuda_test_gemm16(int device, const float *q, int64_t nq,
			     const float *b, int64_t nb, int64_t d,
			     float alpha, float *g, xj_status *st);
int backend_cuda_test_merge(int device, int p, int64_t rows, int64_t k,
			    const float *key, const int64_t *idx, float *okey,
			    int64_t *oidx, xj_status *st);

#ifdef __cplusplus
}
#endif

#endif
