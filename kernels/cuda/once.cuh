/*
 * once.cuh: a self-join's pass read once for both sides (XJ_CUDA_SYM=2).
 *
 * defines: once_args, once_scan, once_lists, once_pass_host, ONCE_ROWS
 *
 * In a self-join the shared rows are cut into blocks (selfjoin.h). Once
 * every diagonal block has been selected (topk_cuda.cu runs them first,
 * so that each shared row has a full list and a gate before it is anyone's
 * column whenever k < SYM_BLOCK), block x's rows meet the shared rows
 * after it in passes of one GEMM each,
 *
 *   G = alpha X_x X_J^T          na x nb, row-major (ld nb), float or the
 *                                16-bit tile (rowsel.cuh's gh and gunit)
 *
 * and G is read once for both of its sides (once_rows): element (r, c) is
 *
 *   row side     query row r of x against base row c of J: kept when
 *                fn2[c] + G[r][c] <= T(r, c's sub-tile), c into r's
 *                slots (ra.cand: pass_cols), as rowsel's pass-wide scan
 *                keeps it;
 *   column side  query row c of J against base row r of x: kept when
 *                fn2[r] + G[r][c] <= T(c, x's sub-tile), r into c's slots
 *                (ca.cand: SYM_BLOCK) and G[r][c] as it is into gt[c][r],
 *                a transposed tile that holds only the kept elements.
 *
 * A scan block reads ONCE_ROWS rows by ONCE_COLS columns (a thread 4
 * columns at a time, one load a row, its rows' loads in flight
 * together); a kept element takes its slot by an atomic add to its row's
 * or column's count.
 *
 * Each side's test is the float addition and compare the plain pass of
 * that query row and base row makes, on a dot product of the same two
 * rows in another order: within the same bound (topk_cuda.cu's argument
 * for block pairs, and the 16-bit tile's rounding with gunit). Then both
 * sides' rows go through rowsel's batches (rs_batch: rescoring, rank
 * sort, merge) from their slots (once_list_row), the column side reading
 * its kept values from gt, so the lists have the plain passes' bits. Row
 * and column counts start at 0 (the caller clears them).
 *
 * Cost per pair of rows: one GEMM product (half of the plain passes'), and
 * the tile written once and read once: 2 + 2 bytes in the 16-bit tile
 * against the plain passes' 8 (docs/performance.md: "The GPU self-join's
 * 1.8x, in the 16-bit tile's bytes"), plus an atomic and a slot per
 * kept element (and a write of gt on the column side), which are few
 * once every row has its gate. The thresholds: a row's for each of the
 * pass's sub-tiles (shared memory), a column's from once_thr (one per
 * column).
 *
 * Host and device run the same code through rowsel.cuh's blocks, so the
 * tests run it on any machine (backend_cuda_host_selfjoin_once).
 */
#ifndef XJ_CUDA_ONCE_CUH
#define XJ_CUDA_ONCE_CUH

#include "rowsel.cuh"

#define ONCE_ROWS 8             /* rows of x a scan block reads together:
				 * loads in flight a thread */
#define ONCE_COLS 1024          /* columns a scan block reads: 64 blocks
				 * of rows would not fill a GPU */

struct once_args {
	rowsel_args ra;          /* rows of x against the pass's columns:
				  * tile G (ld nb), slots of nb */
	rowsel_args ca;          /* the columns' rows against x: tile gt
				  * (ld na), slots of SYM_BLOCK */
	int na, nb;
	int *rn;                 /* kept a row of x, and ... */
	int *cn;                 /* ... a column (both cleared by the
				  * caller: the scan's blocks add to them) */
	float *tcol;             /* a column's threshold (once_thr) */
	const float *xbmax;      /* the largest float norm of x's rows (its
				  * sub-tile's submax) */
};

struct once_shared {
	float fa[ONCE_ROWS];
	float tsub[ONCE_ROWS][RS_MAXSUB];
};

/* Column c's threshold against x's rows, for its current gate. */
XJC_HD float once_col_thr(const once_args &o, int c)
{
	const rowsel_args &ca = o.ca;

	return xjc_scan_threshold(ca.m, ca.d, ca.gate[c], ca.qq[c],
				  ca.qnorm[c], *o.xbmax, ca.prec, ca.gunit);
}

/* Element (r, c) of value x (at graw in G): into row r's slots when
 * fb + x passes tr (fb: column c's fn2), into column c's slots, and its
 * raw value into gt, when fa + x passes tc (fa: row r's fn2). */
#pragma nv_exec_check_disable
template <class BLK, class T>
XJC_HD void once_keep(BLK &blk, const once_args &o, int r, int c, float x,
		      float fa, float fb, float tr, float tc, const T *graw,
		      T *gt)
{
	const rowsel_args &ra = o.ra, &ca = o.ca;
	float vr = ra.fn2 ? XJC_FADD(fb, x) : x;
	float vc = ca.fn2 ? XJC_FADD(fa, x) : x;

	if (vr <= tr)
		ra.cand[(int64_t)r * ra.cap + blk.add(&o.rn[r], 1)] = c;
	if (vc <= tc) {
		ca.cand[(int64_t)c * ca.cap + blk.add(&o.cn[c], 1)] = r;
		gt[(int64_t)c * ca.ldg + r] = *graw;
	}
}

/* Rows r0 .. r0 + nr - 1 of x (nr <= ONCE_ROWS) against columns [c0,
 * c1) of the pass, both sides; g is G, gt the transposed tile. A thread
 * reads groups of 4 columns of its rows, one load a row (16 bytes of
 * floats, 8 of halves) where G's rows and fn2 are so aligned, else one
 * column at a time. */
#pragma nv_exec_check_disable
template <class BLK, class T>
XJC_HD void once_rows(BLK &blk, once_shared &so, const once_args &o, int r0,
		      int nr, int c0, int c1, const T *g, T *gt)
{
	const rowsel_args &ra = o.ra;
	int64_t jt = (ra.j0 + c0) / ra.tb;
	int nsub = (int)((ra.j0 + c1 - 1) / ra.tb - jt + 1);
	bool vec = ra.ldg % 4 == 0 && c0 % 4 == 0 &&
		   rs_aligned(g + (int64_t)r0 * ra.ldg + c0, 4 * sizeof(T)) &&
		   (!ra.fn2 || rs_aligned(ra.fn2 + ra.j0 + c0, 16));
	int nv = vec ? (c1 - c0) / 4 : 0;

	blk.each([&](int t) {
		for (int e = t; e < nr * nsub; e += BLK::NT) {
			int i = e / nsub, s = e % nsub;

			so.tsub[i][s] = rs_row_thr(ra, r0 + i, jt + s);
		}
		if (t < nr)
			so.fa[t] = o.ca.fn2 ? o.ca.fn2[o.ca.j0 + r0 + t] : 0.0f;
	});
	blk.each([&](int t) {
		for (int v = t; v < nv; v += BLK::NT) {
			int c = c0 + 4 * v;
			float x[ONCE_ROWS][4], tc[4], fb[4] = { 0, 0, 0, 0 };

			RS_UNROLL_LOOP
			for (int i = 0; i < ONCE_ROWS; i++)
				if (i < nr)
					rs_g4v(ra, g + (int64_t)(r0 + i) *
						   ra.ldg, c, x[i]);
			rs_f4(o.tcol + c, tc);
			if (ra.fn2)
				rs_fn2_4(ra, c, fb);
			RS_UNROLL_LOOP
			for (int i = 0; i < ONCE_ROWS; i++) {
				if (i >= nr)
					continue;
				for (int e = 0; e < 4; e++) {
					int s = (int)((ra.j0 + c + e) / ra.tb -
						      jt);

					once_keep(blk, o, r0 + i, c + e,
						  x[i][e], so.fa[i], fb[e],
						  so.tsub[i][s], tc[e],
						  g + (int64_t)(r0 + i) *
						  ra.ldg + c + e, gt);
				}
			}
		}
		for (int c = c0 + 4 * nv + t; c < c1; c += BLK::NT) {
			int s = (int)((ra.j0 + c) / ra.tb - jt);
			float tc = o.tcol[c];
			float fb = ra.fn2 ? ra.fn2[ra.j0 + c] : 0.0f;
			float x[ONCE_ROWS];

			RS_UNROLL_LOOP
			for (int i = 0; i < ONCE_ROWS; i++)
				if (i < nr)
					x[i] = rs_g(g + (int64_t)(r0 + i) *
						    ra.ldg + c, ra.gunit);
			RS_UNROLL_LOOP
			for (int i = 0; i < ONCE_ROWS; i++)
				if (i < nr)
					once_keep(blk, o, r0 + i, c, x[i],
						  so.fa[i], fb, so.tsub[i][s],
						  tc, g + (int64_t)(r0 + i) *
						  ra.ldg + c, gt);
		}
	});
}

/* Row r's kept candidates (count[r] of its slots) through rowsel's
 * batches, each candidate's threshold from its own sub-tile. */
#pragma nv_exec_check_disable
template <class BLK, class T>
XJC_HD void once_list_row(BLK &blk, rs_shared &sh, const rowsel_args &a,
			  int r, const T *g, const int *count)
{
	const T *grow = g + (int64_t)r * a.ldg;
	const int *slots = a.cand + (int64_t)r * a.cap;
	int n = count[r];

	rs_stats_reset(blk, sh);
	for (int b0 = 0; b0 < n; b0 += BLK::NT)
		rs_batch(blk, sh, a, r, grow, slots, b0,
			 b0 + BLK::NT < n ? b0 + BLK::NT : n, -1.0f);
	rs_stats_flush(blk, sh, a);
}

/* Rows [s0, ...) of a as rows [0, ...): its row arrays moved on (the
 * merge scratch, k a row of the launch, is not). */
static rowsel_args once_rows_from(rowsel_args a, int64_t s0)
{
	a.qx += s0 * a.d;
	a.qq += s0;
	a.qnorm += s0;
	a.gate += s0;
	a.ekey += s0 * a.k;
	a.eidx += s0 * a.k;
	a.ecount += s0;
	a.cand += s0 * a.cap;
	a.qfirst += s0;
	return a;
}

static int once_args_check(const once_args &o, int64_t scratch_rows,
			   xj_status *st)
{
	const rowsel_args &ra = o.ra, &ca = o.ca;

	if (o.na < 1 || o.nb < 1 || o.na > ca.cap || o.nb > ra.cap ||
	    ra.ldg < o.nb || ca.ldg < o.na || !ra.g == !ra.gh ||
	    !ca.g == !ca.gh || ra.gunit != ca.gunit ||
	    (ra.j0 + o.nb - 1) / ra.tb - ra.j0 / ra.tb >= RS_MAXSUB ||
	    scratch_rows < 1 || ra.k < 1)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "once: %d x %d at %lld, %lld and %lld slots",
			       o.na, o.nb, (long long)ra.j0,
			       (long long)ra.cap, (long long)ca.cap);
	return XJ_OK;
}

#ifdef __CUDACC__
__global__ void __launch_bounds__(RS_THREADS) once_thr_kernel(once_args o)
{
	int c = (int)(blockIdx.x * blockDim.x + threadIdx.x);

	if (c < o.nb)
		o.tcol[c] = once_col_thr(o, c);
}

template <class T>
__global__ void __launch_bounds__(RS_THREADS) once_scan_kernel(once_args o,
							      const T *g,
							      T *gt)
{
	__shared__ once_shared so;
	rs_dev_block blk = { (int)threadIdx.x };
	int r0 = (int)blockIdx.x * ONCE_ROWS, c0 = (int)blockIdx.y * ONCE_COLS;

	once_rows<rs_dev_block, T>(blk, so, o, r0,
				   o.na - r0 < ONCE_ROWS ? o.na - r0 :
							   ONCE_ROWS,
				   c0, o.nb - c0 < ONCE_COLS ? o.nb :
							       c0 + ONCE_COLS,
				   g, gt);
}

template <class T>
__global__ void __launch_bounds__(RS_THREADS, 4)
once_list_kernel(rowsel_args a, const T *g, const int *count)
{
	__shared__ rs_shared sh;
	rs_dev_block blk = { (int)threadIdx.x };

	once_list_row<rs_dev_block, T>(blk, sh, a, (int)blockIdx.x, g, count);
}

/* Rows [0, n) of a from their slots, launches of at most scratch_rows
 * rows (the merge scratch's). */
template <class T>
static int once_list_launch(const rowsel_args &a, const T *g,
			    const int *count, int64_t n,
			    int64_t scratch_rows, cudaStream_t s,
			    xj_status *st)
{
	for (int64_t s0 = 0; s0 < n; s0 += scratch_rows) {
		int64_t nr = MIN64(scratch_rows, n - s0);

		once_list_kernel<T><<<(unsigned)nr, RS_THREADS, 0, s>>>(
			once_rows_from(a, s0), g + s0 * a.ldg, count + s0);
		CUDA_LAUNCH_CHECK(st, once_list_kernel);
	}
	return XJ_OK;
}

template <class T>
static int once_scan_launch(const once_args &o, const T *g, T *gt,
			    cudaStream_t s, xj_status *st)
{
	once_thr_kernel<<<(o.nb + RS_THREADS - 1) / RS_THREADS, RS_THREADS,
			  0, s>>>(o);
	CUDA_LAUNCH_CHECK(st, once_thr_kernel);
	dim3 grid((o.na + ONCE_ROWS - 1) / ONCE_ROWS,
		  (o.nb + ONCE_COLS - 1) / ONCE_COLS);

	once_scan_kernel<T><<<grid, RS_THREADS, 0, s>>>(o, g, gt);
	CUDA_LAUNCH_CHECK(st, once_scan_kernel);
	return XJ_OK;
}

/* The pass's scan on stream s: o.ra reads G (g or gh), o.ca the
 * transposed tile of the same type. */
static int once_scan(const once_args &o, int64_t scratch_rows,
		     cudaStream_t s, xj_status *st)
{
	if (once_args_check(o, scratch_rows, st))
		return st->code;
	return o.ra.gh ? once_scan_launch(o, o.ra.gh, (__half *)o.ca.gh, s,
					  st) :
			 once_scan_launch(o, o.ra.g, (float *)o.ca.g, s, st);
}

/* Then both sides' batches from their slots; the merge scratch holds
 * scratch_rows rows. */
static int once_lists(const once_args &o, int64_t scratch_rows,
		      cudaStream_t s, xj_status *st)
{
	if (o.ra.gh)
		return once_list_launch(o.ra, o.ra.gh, o.rn, o.na,
					scratch_rows, s, st) ||
		       once_list_launch(o.ca, o.ca.gh, o.cn, o.nb,
					scratch_rows, s, st) ? st->code : XJ_OK;
	return once_list_launch(o.ra, o.ra.g, o.rn, o.na, scratch_rows, s,
				st) ||
	       once_list_launch(o.ca, o.ca.g, o.cn, o.nb, scratch_rows, s,
				st) ? st->code : XJ_OK;
}
#endif

/* The same on the host (the pointers are host memory), poisoned scratch. */
template <class T>
static void once_host_run(const once_args &o, const T *g, T *gt)
{
	rs_host_block blk;
	once_shared so;
	rs_shared sh;

	for (int c = 0; c < o.nb; c++)
		o.tcol[c] = once_col_thr(o, c);
	for (int r0 = 0; r0 < o.na; r0 += ONCE_ROWS)
		for (int c0 = 0; c0 < o.nb; c0 += ONCE_COLS) {
			memset(&so, 0xa5, sizeof(so));
			once_rows<rs_host_block, T>(
				blk, so, o, r0,
				o.na - r0 < ONCE_ROWS ? o.na - r0 : ONCE_ROWS,
				c0, o.nb - c0 < ONCE_COLS ? o.nb :
							     c0 + ONCE_COLS,
				g, gt);
		}
	for (int r = 0; r < o.na; r++) {
		memset(&sh, 0xa5, sizeof(sh));
		once_list_row<rs_host_block, T>(blk, sh, o.ra, r, g, o.rn);
	}
	for (int c = 0; c < o.nb; c++) {
		memset(&sh, 0xa5, sizeof(sh));
		once_list_row<rs_host_block, T>(blk, sh, o.ca, c, gt, o.cn);
	}
}

static int once_pass_host(const once_args &o, xj_status *st)
{
	if (once_args_check(o, o.nb > o.na ? o.nb : o.na, st))
		return st->code;
	if (o.ra.gh)
		once_host_run(o, o.ra.gh, (__half *)o.ca.gh);
	else
		once_host_run(o, o.ra.g, (float *)o.ca.g);
	return XJ_OK;
}

#endif
