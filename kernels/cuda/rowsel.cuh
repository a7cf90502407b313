/*
 * rowsel.cuh: one pass of the top-k's selection in one kernel, a block
 * per query row: scan, seed, rescore, sort and merge.
 *
 * defines: rowsel_args, rowsel, rowsel_host, RS_THREADS
 *
 * A pass is the GEMM tile G of TQ query rows against W consecutive rows
 * of the base chunk (W up to the pass width, several TB sub-tiles). Block
 * r walks its row's sub-tiles in order; for each sub-tile [c0, c1):
 *
 *   seed     when the row has no gate yet (no threshold, the list not
 *            full, not seeded before) and the sub-tile has at least k
 *            columns that are not the row itself: t = the k-th
 *            smallest scan value v of those columns (a radix select: four
 *            passes of 8 bits over the values' order images in a 256-bin
 *            shared histogram), and the gate min(gate, xjc_seed_gate(t))
 *            (canonical.cuh: k pairs have v <= t, so the k-th best key is
 *            at most the key that t + err bounds). Without it the first
 *            sub-tile of a row, with no gate yet, keeps all its columns.
 *   scan     v_j = fn2_j + G[r][j] (l2 family; else G[r][j]); keep j when
 *            v_j <= T = xjc_scan_threshold(gate) and j is not the row
 *            itself: the kept columns go to the row's slots, in any order.
 *            Once the row has its gate (seeded, from a full list or a
 *            threshold) and a.whole is set (XJ_CUDA_SCAN=pass, the
 *            default), the rest of the pass is scanned in one step, each
 *            column under its sub-tile's T, with 16-byte loads: one chain
 *            of barriers and one batch a pass instead of one a sub-tile
 *            (the passes' cost was that chain's latency, 18-21 us a
 *            sub-tile at 512 rows on an H100, not the bytes).
 *   batches  of up to BLK::NT kept columns, each:
 *     rescore  a warp per candidate that still passes the scan under the
 *              row's current gate (a merge may have tightened it): the
 *              lanes sum the canonical terms of dimension elements lane,
 *              lane + 32, ..., a butterfly adds the lanes, and
 *              metric_sum_decide gives the canonical key from that sum's
 *              bound; the rare pair it leaves undecided is summed in index
 *              order by one lane (xjc_key). A candidate is dropped when a
 *              threshold is set and its key does not pass it, or when the
 *              list is full and (key, index) is not before its last entry.
 *     sort     the survivors by (key, index), each thread the rank of one
 *              (BLK::NT^2 compares in all, no sort network).
 *     merge    by rank (rank.cuh) into the row's list through its scratch
 *              row; a full list sets the gate to min(gate,
 *              metric_gate_approx(last key), gate of the threshold).
 *
 * Exactness is select.cuh's argument: every pair that can still enter the
 * list passes the scan under any valid gate, is rescored canonically and
 * merged, so the list is the best k by (key, index) of everything seen.
 * The lists have the CPU's bits whatever the pass width, batch order or
 * seeding.
 *
 * Cost per base element: 4 bytes of G and 4 of fn2 read once (L2 when
 * the tile is), one float add and compare (XJ_CUDA_FMIN: fn2 only for
 * a group of 4 columns with one whose G plus its sub-tile's smallest fn2
 * passes; XJ_CUDA_RS_ROWS=R: fn2 once for R rows, rowsel_rows); a
 * seeding sub-tile reads its values four more times. The 16-bit tile
 * (XJ_CUDA_TILE16, fp16 passes: a.gh) holds fp16 values of 2^e G, 2
 * bytes an element read 4 at a time and multiplied by a.gunit = 2^-e
 * (exact); the thresholds and seed gates take its rounding
 * (canonical.cuh, xjc_err_bound_prec's gunit). Per rescored pair: 4d
 * bytes of the base row, read coalesced by one warp, and 3d double FLOPs (l2 family) or 2d in 32
 * partial chains. Rows with no candidate cost one read of their tile row.
 *
 * Host and device run the same code: rowsel_row is written against a
 * block of BLK::NT threads (phases that end in a barrier: each thread,
 * one thread, or each warp with its lanes' sums), which rs_dev_block runs
 * with a CUDA block of 128 threads and rs_host_block as loops on the
 * host, so the tests run the pass on any machine
 * (backend_cuda_host_topk). (A warp a row, four rows a CUDA block with
 * no barrier across them, ran no faster on an H100 in fp32 and 1.12 to
 * 1.46 times slower in bf16, fp16 and at k = 1000: removed,
 * docs/performance.md.)
 * Block-uniform values live in rs_shared and are read after the barrier
 * that follows their write. A batch holds up to BLK::NT candidates.
 */
#ifndef XJ_CUDA_ROWSEL_CUH
#define XJ_CUDA_ROWSEL_CUH

#include <cuda_fp16.h>

#include "canonical.cuh"
#include "check.cuh"
#include "rank.cuh"

#define RS_THREADS 128
#define RS_BATCH RS_THREADS    /* the largest batch (rs_shared's arrays):
				* the rank sort's thread per survivor */
#define RS_UNROLL 8            /* the scan's loads in flight a thread */
#define RS_MAXSUB 80           /* sub-tiles one pass-wide scan covers */
#define RS_ROWS_MAX 8          /* query rows of a joint block: 2, 4, 8 */
#define RS_JOINT_LOADS 8       /* a joint scan's loads of G in flight a
				* thread: 8 / R groups of 4 columns of
				* its R rows, and one fn2 load a group */

#ifdef __CUDA_ARCH__
#define XJC_FADD(a, b) __fadd_rn((a), (b))
#define XJC_FMUL(a, b) __fmul_rn((a), (b))
#define RS_UNROLL_LOOP _Pragma("unroll")
#else
#define XJC_FADD(a, b) ((a) + (b))
#define XJC_FMUL(a, b) ((a) * (b))
#define RS_UNROLL_LOOP
#endif

/* One pass: G's column c is chunk row j0 + c; row arrays start at the
 * tile's first query row, chunk arrays at the chunk's row 0. */
struct rowsel_args {
	const float *g;          /* tq x ncols values, row stride ldg */
	const __half *gh;        /* or the 16-bit tile (XJ_CUDA_TILE16):
				  * G = gh gunit, g NULL */
	float gunit;             /* 2^-e (canonical.cuh); 0 with g */
	int64_t ldg;
	int ncols;
	int64_t j0;
	int64_t tb;              /* rows per sub-tile (submax) */
	const float *fn2;        /* chunk: float squared norms, l2 family */
	const float *subfmin;    /* chunk: smallest fn2 per sub-tile, or
				  * NULL (XJ_CUDA_FMIN) */
	const float *submax;     /* chunk: largest float norm per sub-tile */
	int m;
	int64_t d;
	int prec;                /* the precision G was computed in */
	const float *qx;         /* tile: raw query rows */
	const double *qq;
	const float *qnorm;
	double *gate;
	const float *bx;         /* chunk: raw base rows */
	const double *bb;
	int self;
	int64_t qfirst, bfirst;  /* global index of tile row 0, chunk row 0 */
	int has_thr;
	float thr_key;
	double gate0;
	int64_t k;
	float *ekey;             /* tile: k-lists, k per row */
	int64_t *eidx;
	int64_t *ecount;
	float *tkey;             /* tile: merge scratch, k per row */
	int64_t *tidx;
	int *cand;               /* tile: cap slots per row, cap >= tb */
	int64_t cap;
	int seed;
	int whole;               /* scan the rest of the pass in one step */
	int rows;                /* query rows a block: 1, or 2, 4, 8
				  * (XJ_CUDA_RS_ROWS: rowsel_rows) */
	unsigned long long *stats;   /* [0] rescored, [1] undecided,
				      * [2] sub-tiles seeded, [3] groups of
				      * 4 columns XJ_CUDA_FMIN's scan passed
				      * over without reading fn2, [4] rows
				      * a joint block scanned (rowsel_rows) */
};

struct rs_shared {
	double gate;
	float thr, thr2;
	int n, ns, seed, full;
	float last_key;
	int64_t last_idx, na, keep, nout;
	uint32_t want, prefix, mask;
	int hist[256];
	float tsub[RS_MAXSUB];   /* a pass-wide step's thresholds */
	float fsub[RS_MAXSUB];   /* and its sub-tiles' smallest fn2 */
	float skey[RS_BATCH], okey[RS_BATCH];
	int scol[RS_BATCH], ocol[RS_BATCH];
	unsigned long long rescored, undecided, seeded, skipped;
};

/* A joint block's R rows: their scan thresholds and kept counts. */
template <int R>
struct rs_joint {
	int ready;
	int n[R];
	float tsub[R][RS_MAXSUB];
};

/* One lane's partial sums of a pair: s of the canonical terms, a of
 * their absolute values. */
struct rs_pair {
	double s, a;
};

/* Sorted survivors of a batch: key and chunk row. */
struct rs_cand_view {
	const float *key;
	const int *row;
	int64_t first;

	XJC_HD float key_at(int64_t p) const { return key[p]; }
	XJC_HD int64_t idx_at(int64_t p) const { return first + row[p]; }
};

/* Elements lane, lane + 32, ... of the pair's canonical terms, in order. */
XJC_HD rs_pair rs_lane_sum(int m, const float *q, const float *b, int64_t d,
			   int lane)
{
	rs_pair p = { 0.0, 0.0 };

	if (xjc_is_sq(m)) {
		for (int64_t i = lane; i < d; i += 32) {
			double t = XJC_SUB((double)q[i], (double)b[i]);

			p.s = XJC_ADD(p.s, XJC_MUL(t, t));
		}
		p.a = p.s;
	} else {
		for (int64_t i = lane; i < d; i += 32) {
			double t = XJC_MUL((double)q[i], (double)b[i]);

			p.s = XJC_ADD(p.s, t);
			p.a = XJC_ADD(p.a, fabs(t));
		}
	}
	return p;
}

/* G's value at p: a float of the tile, or a 16-bit one times its unit
 * (a power of two: exact). */
XJC_HD float rs_g(const float *p, float)
{
	return *p;
}

XJC_HD float rs_g(const __half *p, float unit)
{
	return XJC_FMUL(__half2float(*p), unit);
}

template <class T>
XJC_HD float rs_value(const rowsel_args &a, const T *grow, int c)
{
	float g = rs_g(grow + c, a.gunit);

	return a.fn2 ? XJC_FADD(a.fn2[a.j0 + c], g) : g;
}

/* G at p .. p + 3 in one load (16 bytes of floats, 8 of halves); the
 * caller checks the alignment. */
#ifdef __CUDA_ARCH__
__device__ __forceinline__ void rs_g4(const float *p, float, float g[4])
{
	float4 x = *reinterpret_cast<const float4 *>(p);

	g[0] = x.x;
	g[1] = x.y;
	g[2] = x.z;
	g[3] = x.w;
}

__device__ __forceinline__ void rs_g4(const __half *p, float unit,
				      float g[4])
{
	uint2 x = *reinterpret_cast<const uint2 *>(p);
	float2 lo = __half22float2(*reinterpret_cast<const __half2 *>(&x.x));
	float2 hi = __half22float2(*reinterpret_cast<const __half2 *>(&x.y));

	g[0] = __fmul_rn(lo.x, unit);
	g[1] = __fmul_rn(lo.y, unit);
	g[2] = __fmul_rn(hi.x, unit);
	g[3] = __fmul_rn(hi.y, unit);
}
#endif

/* G of columns c .. c + 3 (one load on the device; the caller checks
 * the alignment, here and below). */
template <class T>
XJC_HD void rs_g4v(const rowsel_args &a, const T *grow, int c, float g[4])
{
#ifdef __CUDA_ARCH__
	rs_g4(grow + c, a.gunit, g);
#else
	for (int e = 0; e < 4; e++)
		g[e] = rs_g(grow + c + e, a.gunit);
#endif
}

/* p[0..3] (one 16-byte load on the device; p on 16 bytes) */
XJC_HD void rs_f4(const float *p, float f[4])
{
#ifdef __CUDA_ARCH__
	float4 x = *reinterpret_cast<const float4 *>(p);

	f[0] = x.x;
	f[1] = x.y;
	f[2] = x.z;
	f[3] = x.w;
#else
	for (int e = 0; e < 4; e++)
		f[e] = p[e];
#endif
}

/* fn2 of columns c .. c + 3 (one 16-byte load on the device) */
XJC_HD void rs_fn2_4(const rowsel_args &a, int c, float f[4])
{
	rs_f4(a.fn2 + a.j0 + c, f);
}

/* v = fn2 + G of columns c .. c + 3 from their G (v may be g) */
XJC_HD void rs_fn2_add4(const rowsel_args &a, int c, const float g[4],
			float v[4])
{
	float f[4];

	rs_fn2_4(a, c, f);
	for (int e = 0; e < 4; e++)
		v[e] = XJC_FADD(f[e], g[e]);
}

/* rs_value of columns c .. c + 3: one load of G, and one of fn2 for the
 * l2 family */
template <class T>
XJC_HD void rs_value4(const rowsel_args &a, const T *grow, int c, float v[4])
{
	rs_g4v(a, grow, c, v);
	if (a.fn2)
		rs_fn2_add4(a, c, v, v);
}

/* Row r's scan threshold for its gate (as a.gate holds it) against
 * sub-tile js of the chunk. */
XJC_HD float rs_row_thr(const rowsel_args &a, int r, int64_t js)
{
	return xjc_scan_threshold(a.m, a.d, a.gate[r], a.qq[r], a.qnorm[r],
				  a.submax[js], a.prec, a.gunit);
}

/* p on a multiple of n bytes (n a power of two) */
XJC_HD bool rs_aligned(const void *p, uintptr_t n)
{
	return ((uintptr_t)p & (n - 1)) == 0;
}

/* ---- the blocks ------------------------------------------------------- */

#ifdef __CUDACC__
struct rs_dev_lanes {
	int lane;

	template <class F>
	__device__ rs_pair sum(F part) const
	{
		rs_pair x = part(lane);

#pragma unroll
		for (int off = 16; off >= 1; off /= 2) {
			x.s = __dadd_rn(x.s, __shfl_xor_sync(0xffffffffu, x.s,
							     off));
			x.a = __dadd_rn(x.a, __shfl_xor_sync(0xffffffffu, x.a,
							     off));
		}
		return x;
	}
	__device__ bool leader() const { return lane == 0; }
	__device__ void sync() const { __syncwarp(); }
};

/* A row's block: a CUDA block of RS_THREADS (rowsel_kernel), t the
 * thread's index in it, whose phases end in __syncthreads. */
struct rs_dev_block {
	static constexpr int NT = RS_THREADS, NW = RS_THREADS / 32;
	int t;

	__device__ void sync() { __syncthreads(); }
	template <class F>
	__device__ void each(F f)
	{
		f(t);
		sync();
	}
	template <class F>
	__device__ void one(F f)
	{
		if (t == 0)
			f();
		sync();
	}
	template <class F>
	__device__ void warps(F f)
	{
		rs_dev_lanes l = { t & 31 };

		f(t >> 5, l);
		sync();
	}
	__device__ int add(int *p, int v) { return atomicAdd(p, v); }
	__device__ void add64(unsigned long long *p, unsigned long long v)
	{
		atomicAdd(p, v);
	}
};
#endif

/* The lanes of one warp on the host: sums in the device's butterfly
 * order (the same bits), the leader's work done once. Host code, marked
 * __host__ __device__ only because the lambdas it runs are. */
struct rs_host_lanes {
	template <class F>
	XJC_HD rs_pair sum(F part) const
	{
		rs_pair x[32];

		for (int l = 0; l < 32; l++)
			x[l] = part(l);
		for (int off = 16; off >= 1; off /= 2)
			for (int l = 0; l < 32; l++) {
				int o = l ^ off;

				if (l < o) {
					rs_pair y = { x[l].s + x[o].s,
						      x[l].a + x[o].a };

					x[l] = y;
					x[o] = y;
				}
			}
		return x[0];
	}
	XJC_HD bool leader() const { return true; }
	XJC_HD void sync() const {}
};

struct rs_host_block {
	static constexpr int NT = RS_THREADS, NW = RS_THREADS / 32;

	template <class F>
	XJC_HD void each(F f)
	{
		for (int t = 0; t < NT; t++)
			f(t);
	}
	template <class F>
	XJC_HD void one(F f)
	{
		f();
	}
	template <class F>
	XJC_HD void warps(F f)
	{
		rs_host_lanes l;

		for (int w = 0; w < NW; w++)
			f(w, l);
	}
	XJC_HD int add(int *p, int v)
	{
		int o = *p;

		*p += v;
		return o;
	}
	XJC_HD void add64(unsigned long long *p, unsigned long long v)
	{
		*p += v;
	}
};

/* ---- the row ---------------------------------------------------------- */

/* Seed the gate from the k-th smallest value of columns [c0, c1) (the
 * caller's test: the list is not full, k such columns). */
#pragma nv_exec_check_disable
template <class BLK, class T>
XJC_HD void rs_seed(BLK &blk, rs_shared &sh, const rowsel_args &a, int r,
		    const T *grow, int c0, int c1, int64_t self_col,
		    float bmax)
{
	for (int shift = 24; shift >= 0; shift -= 8) {
		blk.each([&](int t) {
			for (int b = t; b < 256; b += BLK::NT)
				sh.hist[b] = 0;
		});
		blk.each([&](int t) {
			for (int c = c0 + t; c < c1; c += BLK::NT) {
				uint32_t u;

				if (c == self_col)
					continue;
				u = xjc_key_order(rs_value(a, grow, c));
				if ((u & sh.mask) == sh.prefix)
					blk.add(&sh.hist[(u >> shift) & 255], 1);
			}
		});
		blk.one([&] {
			uint32_t cum = 0;
			int b = 0;

			for (; b < 255; b++) {
				if (cum + (uint32_t)sh.hist[b] >= sh.want)
					break;
				cum += (uint32_t)sh.hist[b];
			}
			sh.want -= cum;
			sh.prefix |= (uint32_t)b << shift;
			sh.mask |= 0xffu << shift;
		});
	}
	blk.one([&] {
		float t = xjc_order_value(sh.prefix);
		double gs = xjc_seed_gate(a.m, a.d, t, a.qq[r], a.qnorm[r],
					  bmax, a.prec, a.gunit);

		if (gs < sh.gate) {
			sh.gate = gs;
			a.gate[r] = gs;
		}
		sh.seeded++;
	});
}

/* Rescore, sort and merge candidates [b0, b1) of the row's slots, whose
 * columns lie in a sub-tile of largest norm bmax (bmax < 0: in several,
 * each candidate's threshold from its own). */
#pragma nv_exec_check_disable
template <class BLK, class T>
XJC_HD void rs_batch(BLK &blk, rs_shared &sh, const rowsel_args &a, int r,
		     const T *grow, const int *slots, int b0, int b1,
		     float bmax)
{
	const float *q = a.qx + (int64_t)r * a.d;
	float *lk = a.ekey + (int64_t)r * a.k, *tk = a.tkey + (int64_t)r * a.k;
	int64_t *li = a.eidx + (int64_t)r * a.k, *ti = a.tidx + (int64_t)r * a.k;
	sel_list_view lv = { lk, li };
	rs_cand_view cv = { sh.okey, sh.ocol, a.bfirst };
	int ns;

	blk.one([&] {
		sh.na = a.ecount[r];
		sh.full = sh.na == a.k;
		sh.last_key = sh.full ? lk[a.k - 1] : 0.0f;
		sh.last_idx = sh.full ? li[a.k - 1] : 0;
		sh.gate = a.gate[r];
		sh.thr2 = bmax < 0 ? 0.0f :
			  xjc_scan_threshold(a.m, a.d, sh.gate, a.qq[r],
					     a.qnorm[r], bmax, a.prec,
					     a.gunit);
		sh.ns = 0;
	});
	blk.warps([&](int w, const auto &lanes) {
		for (int i = b0 + w; i < b1; i += BLK::NW) {
			int c = slots[i];
			int64_t j = a.j0 + c;
			const float *b = a.bx + j * a.d;
			float thr = bmax < 0 ?
				    xjc_scan_threshold(a.m, a.d, sh.gate,
						       a.qq[r], a.qnorm[r],
						       a.submax[j / a.tb],
						       a.prec, a.gunit) :
				    sh.thr2;
			rs_pair s;
			float key;
			int und;

			if (!(rs_value(a, grow, c) <= thr))
				continue;       /* the same for the whole warp */
			s = lanes.sum([&](int l) {
				return rs_lane_sum(a.m, q, b, a.d, l);
			});
			und = metric_sum_decide((xj_metric)a.m, a.d, s.s, s.a,
						a.qq[r], a.bb[j], &key);
			if (lanes.leader()) {
				if (und)
					key = xjc_key(a.m, q, b, a.d, a.qq[r],
						      a.bb[j]);
				blk.add64(&sh.rescored, 1);
				if (und)
					blk.add64(&sh.undecided, 1);
				if ((!a.has_thr || key <= a.thr_key) &&
				    (!sh.full ||
				     xjc_less(key, a.bfirst + j, sh.last_key,
					      sh.last_idx))) {
					int o = blk.add(&sh.ns, 1);

					sh.skey[o] = key;
					sh.scol[o] = (int)j;
				}
			}
			lanes.sync();   /* the leader's work done */
		}
	});
	ns = sh.ns;
	if (ns == 0)
		return;
	blk.each([&](int t) {
		float kt;
		int64_t it;
		int rank = 0;

		if (t >= ns)
			return;
		kt = sh.skey[t];
		it = a.bfirst + sh.scol[t];
		for (int u = 0; u < ns; u++)
			rank += xjc_less(sh.skey[u], a.bfirst + sh.scol[u], kt,
					 it);
		sh.okey[rank] = kt;
		sh.ocol[rank] = sh.scol[t];
	});
	blk.one([&] {
		sh.keep = xjc_count_before(lv, sh.na, cv.key_at(0),
					   cv.idx_at(0));
		sh.nout = sh.na + ns < a.k ? sh.na + ns : a.k;
	});
	blk.each([&](int t) {
		xjc_merge_part(lv, sh.na, cv, ns, sh.keep, a.k, tk, ti, t,
			       BLK::NT);
	});
	blk.each([&](int t) {
		for (int64_t p = sh.keep + t; p < sh.nout; p += BLK::NT) {
			lk[p] = tk[p];
			li[p] = ti[p];
		}
	});
	blk.one([&] {
		a.ecount[r] = sh.nout;
		if (sh.nout == a.k) {
			double gk = xjc_gate_approx(a.m, lk[a.k - 1]);

			if (gk > a.gate0)
				gk = a.gate0;
			if (gk < a.gate[r])
				a.gate[r] = gk;
		}
	});
}

/* Scan columns [c0, c1) of one sub-tile (largest norm bmax) into the
 * row's slots under its threshold for the row's current gate. */
#pragma nv_exec_check_disable
template <class BLK, class T>
XJC_HD void rs_scan_sub(BLK &blk, rs_shared &sh, const rowsel_args &a, int r,
			const T *grow, int *slots, int c0, int c1,
			float bmax, int64_t self_col)
{
	blk.one([&] {
		sh.thr = xjc_scan_threshold(a.m, a.d, sh.gate, a.qq[r],
					    a.qnorm[r], bmax, a.prec, a.gunit);
		sh.n = 0;
	});
	blk.each([&](int t) {
		float thr = sh.thr;

		/* RS_UNROLL loads in flight before the compares */
		for (int c = c0 + t; c < c1; c += BLK::NT * RS_UNROLL) {
			float v[RS_UNROLL];

			RS_UNROLL_LOOP
			for (int u = 0; u < RS_UNROLL; u++) {
				int cu = c + u * BLK::NT;

				v[u] = cu < c1 ? rs_value(a, grow, cu)
					       : INFINITY;
			}
			RS_UNROLL_LOOP
			for (int u = 0; u < RS_UNROLL; u++) {
				int cu = c + u * BLK::NT;

				if (v[u] <= thr && cu < c1 && cu != self_col)
					slots[blk.add(&sh.n, 1)] = cu;
			}
		}
	});
}

/* Scan columns [c0, c1) of sub-tiles jt, jt + 1, ... (at most RS_MAXSUB)
 * into the row's slots in one step, each column under its sub-tile's
 * threshold for the row's current gate; 16-byte loads where G's row and
 * fn2 allow them. */
#pragma nv_exec_check_disable
template <class BLK, class T, bool F>
XJC_HD void rs_scan_pass(BLK &blk, rs_shared &sh, const rowsel_args &a,
			 int r, const T *grow, int *slots, int c0, int c1,
			 int64_t jt, int64_t self_col)
{
	int nsub = (int)((a.j0 + c1 - 1) / a.tb - jt + 1);
	int tb = (int)a.tb, e0 = (int)((jt + 1) * a.tb - a.j0);
	bool vec = tb % 4 == 0 && rs_aligned(grow + c0, 4 * sizeof(T)) &&
		   (!a.fn2 || rs_aligned(a.fn2 + a.j0 + c0, 16));
	int nv = vec ? (c1 - c0) / 4 : 0;
	bool fmin = F && vec && a.subfmin;   /* XJ_CUDA_FMIN */

	blk.each([&](int t) {
		for (int s = t; s < nsub; s += BLK::NT) {
			sh.tsub[s] = xjc_scan_threshold(a.m, a.d, sh.gate,
							a.qq[r], a.qnorm[r],
							a.submax[jt + s],
							a.prec, a.gunit);
			if (fmin)
				sh.fsub[s] = a.subfmin[jt + s];
		}
		if (t == 0)
			sh.n = 0;
	});
	blk.each([&](int t) {
		unsigned long long skipped = 0;

		/* groups of 4 columns, RS_UNROLL loads in flight; a group
		 * never straddles sub-tiles (tb and its first column are
		 * multiples of 4). XJ_CUDA_FMIN: a column whose fl(fmin +
		 * G) is over the threshold, fmin its sub-tile's smallest
		 * fn2, has fl(fn2 + G) >= fl(fmin + G) over it too
		 * (rounding is monotone), so fn2 is read only for a group
		 * with a column through: the same columns kept */
		for (int v = t; v < nv; v += BLK::NT * RS_UNROLL) {
			float x[RS_UNROLL][4];

			RS_UNROLL_LOOP
			for (int u = 0; u < RS_UNROLL; u++) {
				int vu = v + u * BLK::NT;

				if (vu < nv && fmin)
					rs_g4v(a, grow, c0 + 4 * vu, x[u]);
				else if (vu < nv)
					rs_value4(a, grow, c0 + 4 * vu, x[u]);
			}
			RS_UNROLL_LOOP
			for (int u = 0; u < RS_UNROLL; u++) {
				int vu = v + u * BLK::NT, c = c0 + 4 * vu;
				int s = c < e0 ? 0 : 1 + (c - e0) / tb;
				float thr;

				if (vu >= nv)
					continue;
				thr = sh.tsub[s];
				if (fmin) {
					bool any = false;

					for (int e = 0; e < 4; e++)
						any |= XJC_FADD(sh.fsub[s],
								x[u][e]) <= thr;
					if (!any) {
						skipped++;
						continue;
					}
					rs_fn2_add4(a, c, x[u], x[u]);
				}
				for (int e = 0; e < 4; e++)
					if (x[u][e] <= thr && c + e != self_col)
						slots[blk.add(&sh.n, 1)] = c + e;
			}
		}
		for (int c = c0 + 4 * nv + t; c < c1; c += BLK::NT) {
			float thr = sh.tsub[c < e0 ? 0 : 1 + (c - e0) / tb];

			if (rs_value(a, grow, c) <= thr && c != self_col)
				slots[blk.add(&sh.n, 1)] = c;
		}
		if (skipped)
			blk.add64(&sh.skipped, skipped);
	});
}

#pragma nv_exec_check_disable
template <class BLK>
XJC_HD void rs_stats_reset(BLK &blk, rs_shared &sh)
{
	blk.one([&] {
		sh.rescored = 0;
		sh.undecided = 0;
		sh.seeded = 0;
		sh.skipped = 0;
	});
}

#pragma nv_exec_check_disable
template <class BLK>
XJC_HD void rs_stats_flush(BLK &blk, rs_shared &sh, const rowsel_args &a)
{
	blk.one([&] {   /* most rows of a late pass add nothing */
		if (sh.rescored)
			blk.add64(&a.stats[0], sh.rescored);
		if (sh.undecided)
			blk.add64(&a.stats[1], sh.undecided);
		if (sh.seeded)
			blk.add64(&a.stats[2], sh.seeded);
		if (sh.skipped)
			blk.add64(&a.stats[3], sh.skipped);
	});
}

/* Query row r of the tile against the pass's columns: a sub-tile at a
 * time while the row's gate is being seeded (or a.whole is 0), then the
 * rest of the pass in one step. */
#pragma nv_exec_check_disable
template <class BLK, class T, bool F>
XJC_HD void rowsel_row(BLK &blk, rs_shared &sh, const rowsel_args &a, int r,
			const T *g)
{
	const T *grow = g + (int64_t)r * a.ldg;
	int *slots = a.cand + (int64_t)r * a.cap;
	int64_t self_col = a.self ? a.qfirst + r - a.bfirst - a.j0 : -1;

	rs_stats_reset(blk, sh);
	for (int c0 = 0; c0 < a.ncols;) {
		int64_t jt = (a.j0 + c0) / a.tb;
		int64_t end = (jt + 1) * a.tb - a.j0;
		int c1 = end < a.ncols ? (int)end : a.ncols;
		float bmax = a.submax[jt];
		int n;

		blk.one([&] {
			int64_t elig = (int64_t)(c1 - c0) -
				       (self_col >= c0 && self_col < c1);

			sh.gate = a.gate[r];
			sh.seed = a.seed && sh.gate > DBL_MAX &&
				  a.ecount[r] < a.k && elig >= a.k;
			sh.want = (uint32_t)a.k;
			sh.prefix = 0;
			sh.mask = 0;
		});
		if (a.whole && !sh.seed) {
			int64_t lim = (jt + RS_MAXSUB) * a.tb - a.j0;

			c1 = lim < a.ncols ? (int)lim : a.ncols;
			rs_scan_pass<BLK, T, F>(blk, sh, a, r, grow, slots,
						c0, c1, jt, self_col);
			bmax = -1.0f;
		} else {
			if (sh.seed)
				rs_seed(blk, sh, a, r, grow, c0, c1, self_col,
					bmax);
			rs_scan_sub(blk, sh, a, r, grow, slots, c0, c1, bmax,
				    self_col);
		}
		n = sh.n;
		for (int b0 = 0; b0 < n; b0 += BLK::NT)
			rs_batch(blk, sh, a, r, grow, slots, b0,
				 b0 + BLK::NT < n ? b0 + BLK::NT : n, bmax);
		c0 = c1;
	}
	rs_stats_flush(blk, sh, a);
}

/* ---- several rows a block (XJ_CUDA_RS_ROWS) ---------------------------- */

/* rs_scan_pass for rows r0 .. r0 + nr - 1 (nr <= R) at once: each
 * thread reads a group's fn2 once for all the rows, and a block's
 * prologue (thresholds, barriers) serves nr rows. Each row keeps the
 * columns rs_scan_pass keeps (its own sub-tile thresholds for its gate),
 * into its own slots. (Not with XJ_CUDA_FMIN: one row in R needing a
 * group's fn2 reads it for all; on the host tests' cases four rows a
 * block left 0-56% of the groups unread where one row a block left
 * 0-78%, and each combination was a kernel more in the module.) */
#pragma nv_exec_check_disable
template <class BLK, class T, int R>
XJC_HD void rs_scan_rows(BLK &blk, rs_joint<R> &sj, const rowsel_args &a,
			 int r0, int nr, const T *g, int c0, int c1,
			 int64_t jt)
{
	constexpr int U = RS_JOINT_LOADS / R;   /* groups in flight */
	int nsub = (int)((a.j0 + c1 - 1) / a.tb - jt + 1);
	int tb = (int)a.tb, e0 = (int)((jt + 1) * a.tb - a.j0);
	bool vec = tb % 4 == 0 && (!a.fn2 || rs_aligned(a.fn2 + a.j0 + c0, 16));
	int nv;

	for (int i = 0; i < nr; i++)
		vec = vec && rs_aligned(g + (int64_t)(r0 + i) * a.ldg + c0,
					4 * sizeof(T));
	nv = vec ? (c1 - c0) / 4 : 0;
	blk.each([&](int t) {
		for (int e = t; e < nr * nsub; e += BLK::NT) {
			int i = e / nsub, s = e % nsub;

			sj.tsub[i][s] = rs_row_thr(a, r0 + i, jt + s);
		}
		if (t < nr)
			sj.n[t] = 0;
	});
	blk.each([&](int t) {
		for (int v = t; v < nv; v += BLK::NT * U) {
			float x[U][R][4];
			float f[U][4] = { { 0 } };   /* read only with fn2 */

			RS_UNROLL_LOOP
			for (int u = 0; u < U; u++) {
				int vu = v + u * BLK::NT;

				if (vu >= nv)
					continue;
				RS_UNROLL_LOOP
				for (int i = 0; i < R; i++)
					if (i < nr)
						rs_g4v(a, g + (int64_t)(r0 + i) *
							   a.ldg, c0 + 4 * vu,
						       x[u][i]);
				if (a.fn2)
					rs_fn2_4(a, c0 + 4 * vu, f[u]);
			}
			RS_UNROLL_LOOP
			for (int u = 0; u < U; u++) {
				int vu = v + u * BLK::NT, c = c0 + 4 * vu;
				int s = c < e0 ? 0 : 1 + (c - e0) / tb;

				if (vu >= nv)
					continue;
				for (int i = 0; i < nr; i++) {
					float thr = sj.tsub[i][s];
					int64_t self = a.self ? a.qfirst + r0 + i -
						       a.bfirst - a.j0 : -1;
					int *slots = a.cand + (int64_t)(r0 + i) *
						     a.cap;

					for (int e = 0; e < 4; e++) {
						float y = a.fn2 ?
							  XJC_FADD(f[u][e],
								   x[u][i][e]) :
							  x[u][i][e];

						if (y <= thr && c + e != self)
							slots[blk.add(&sj.n[i],
								      1)] = c + e;
					}
				}
			}
		}
		for (int c = c0 + 4 * nv + t; c < c1; c += BLK::NT) {
			int s = c < e0 ? 0 : 1 + (c - e0) / tb;

			for (int i = 0; i < nr; i++) {
				const T *grow = g + (int64_t)(r0 + i) * a.ldg;
				int64_t self = a.self ? a.qfirst + r0 + i -
					       a.bfirst - a.j0 : -1;

				if (rs_value(a, grow, c) <= sj.tsub[i][s] &&
				    c != self)
					a.cand[(int64_t)(r0 + i) * a.cap +
					       blk.add(&sj.n[i], 1)] = c;
			}
		}
	});
}

/* Query rows r0 .. r0 + nr - 1 of the tile against the pass's columns.
 * Once every one of them has its gate and whole passes are scanned (the
 * steady state: every pass after a row's first, and every pass with a
 * threshold), one joint scan (rs_scan_rows) for all of them, then each
 * row's batches in turn; else each row as rowsel_row (the seeding path).
 * The lists are the same either way: each row keeps the columns its own
 * scan would, and a batch's order does not change a list (select.cuh). */
#pragma nv_exec_check_disable
template <class BLK, class T, int R>
XJC_HD void rowsel_rows(BLK &blk, rs_shared &sh, rs_joint<R> &sj,
			const rowsel_args &a, int r0, int nr, const T *g)
{
	blk.one([&] {
		sj.ready = a.whole;
		for (int i = 0; i < nr; i++)
			sj.ready &= a.gate[r0 + i] <= DBL_MAX;
	});
	if (!sj.ready) {
		for (int i = 0; i < nr; i++)
			rowsel_row<BLK, T, false>(blk, sh, a, r0 + i, g);
		return;
	}
	rs_stats_reset(blk, sh);
	for (int c0 = 0; c0 < a.ncols;) {
		int64_t jt = (a.j0 + c0) / a.tb;
		int64_t lim = (jt + RS_MAXSUB) * a.tb - a.j0;
		int c1 = lim < a.ncols ? (int)lim : a.ncols;

		rs_scan_rows<BLK, T, R>(blk, sj, a, r0, nr, g, c0, c1, jt);
		for (int i = 0; i < nr; i++) {
			const T *grow = g + (int64_t)(r0 + i) * a.ldg;
			int *slots = a.cand + (int64_t)(r0 + i) * a.cap;
			int n = sj.n[i];

			for (int b0 = 0; b0 < n; b0 += BLK::NT)
				rs_batch(blk, sh, a, r0 + i, grow, slots, b0,
					 b0 + BLK::NT < n ? b0 + BLK::NT : n,
					 -1.0f);
		}
		c0 = c1;
	}
	rs_stats_flush(blk, sh, a);
	blk.one([&] { blk.add64(&a.stats[4], (unsigned long long)nr); });
}

/* ---- launch ----------------------------------------------------------- */

#ifdef __CUDACC__
/* minb blocks an SM at least: 4 leaves the compiler 128 registers a
 * thread (none spilled), 8 caps it at 64 (a few spilled to the stack)
 * for twice the rows in flight; XJ_CUDA_RS_BLOCKS picks one (8 by
 * default) */
template <int minb, class T, bool F>
__global__ void __launch_bounds__(RS_THREADS, minb)
rowsel_kernel(rowsel_args a, const T *g)
{
	__shared__ rs_shared sh;
	rs_dev_block blk = { (int)threadIdx.x };

	rowsel_row<rs_dev_block, T, F>(blk, sh, a, (int)blockIdx.x, g);
}

/* XJ_CUDA_RS_ROWS: R rows a block */
template <int minb, class T, int R>
__global__ void __launch_bounds__(RS_THREADS, minb)
rowsel_rows_kernel(rowsel_args a, const T *g, int tq)
{
	__shared__ rs_shared sh;
	__shared__ rs_joint<R> sj;
	rs_dev_block blk = { (int)threadIdx.x };
	int r0 = (int)blockIdx.x * R;

	rowsel_rows<rs_dev_block, T, R>(blk, sh, sj, a, r0,
					tq - r0 < R ? tq - r0 : R, g);
}
#endif

static int rowsel_args_check(const rowsel_args &a, int tq, xj_status *st)
{
	if (tq < 0 || a.ncols < 0 || a.j0 < 0 || a.tb < 1 || a.cap < a.tb ||
	    (a.whole && a.cap < a.ncols) ||
	    a.k < 1 || a.k > UINT32_MAX || a.ldg < a.ncols ||
	    !a.g == !a.gh || (a.gh != NULL) != (a.gunit > 0) ||
	    (a.rows != 1 && a.rows != 2 && a.rows != 4 && a.rows != 8) ||
	    (a.rows > 1 && a.subfmin))
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "rowsel: %d rows x %d columns at %lld, sub-tiles of %lld, %lld slots, k = %lld",
			       tq, a.ncols, (long long)a.j0, (long long)a.tb,
			       (long long)a.cap, (long long)a.k);
	return XJ_OK;
}

#ifdef __CUDACC__
/* Rows [0, tq) of the tile g, R a block (XJ_CUDA_RS_ROWS), on stream s. */
template <class T, int R>
static int rowsel_rows_launch(const rowsel_args &a, const T *g, int tq,
			      int minb, cudaStream_t s, xj_status *st)
{
	int nb = (tq + R - 1) / R;

	if (minb == 8) {
		rowsel_rows_kernel<8, T, R><<<nb, RS_THREADS, 0, s>>>(a, g, tq);
		CUDA_LAUNCH_CHECK(st, rowsel_rows_kernel<8>);
	} else {
		rowsel_rows_kernel<4, T, R><<<nb, RS_THREADS, 0, s>>>(a, g, tq);
		CUDA_LAUNCH_CHECK(st, rowsel_rows_kernel<4>);
	}
	return XJ_OK;
}

/* Rows [0, tq) of the tile g, one block each, on stream s, in the build
 * of at least minb (4 or 8) blocks an SM; F: XJ_CUDA_FMIN's scan, a
 * kernel of its own (its registers leave the others' as they were). */
template <class T, bool F>
static int rowsel_launch(const rowsel_args &a, const T *g, int tq, int minb,
			 cudaStream_t s, xj_status *st)
{
	if (minb == 8) {
		rowsel_kernel<8, T, F><<<tq, RS_THREADS, 0, s>>>(a, g);
		CUDA_LAUNCH_CHECK(st, rowsel_kernel<8>);
	} else {
		rowsel_kernel<4, T, F><<<tq, RS_THREADS, 0, s>>>(a, g);
		CUDA_LAUNCH_CHECK(st, rowsel_kernel<4>);
	}
	return XJ_OK;
}

template <class T>
static int rowsel_launch(const rowsel_args &a, const T *g, int tq, int minb,
			 cudaStream_t s, xj_status *st)
{
	if (a.rows == 2)
		return rowsel_rows_launch<T, 2>(a, g, tq, minb, s, st);
	if (a.rows == 4)
		return rowsel_rows_launch<T, 4>(a, g, tq, minb, s, st);
	if (a.rows == 8)
		return rowsel_rows_launch<T, 8>(a, g, tq, minb, s, st);
	return a.subfmin ? rowsel_launch<T, true>(a, g, tq, minb, s, st) :
			   rowsel_launch<T, false>(a, g, tq, minb, s, st);
}

/* The pass's rows on stream s, reading a.g or a.gh. */
static int rowsel(const rowsel_args &a, int tq, int minb, cudaStream_t s,
		  xj_status *st)
{
	if (rowsel_args_check(a, tq, st))
		return st->code;
	if (tq == 0 || a.ncols == 0)
		return XJ_OK;
	return a.gh ? rowsel_launch(a, a.gh, tq, minb, s, st) :
		      rowsel_launch(a, a.g, tq, minb, s, st);
}
#endif

/* Rows r .. r + nr - 1 as a joint block of R on the host. */
template <class T, int R>
static void rowsel_host_joint(const rowsel_args &a, const T *g, int r,
			      int nr)
{
	rs_host_block blk;
	rs_shared sh;
	rs_joint<R> sj;

	memset(&sh, 0xa5, sizeof(sh));   /* poison */
	memset(&sj, 0xa5, sizeof(sj));
	rowsel_rows<rs_host_block, T, R>(blk, sh, sj, a, r, nr, g);
}

/* The same rows on the host, one after the other (a's pointers are host
 * memory). */
template <class T, bool F>
static void rowsel_host_rows(const rowsel_args &a, const T *g, int tq)
{
	rs_host_block blk;

	for (int r = 0; r < tq; r += a.rows) {
		int nr = tq - r < a.rows ? tq - r : a.rows;

		if (a.rows == 2)
			rowsel_host_joint<T, 2>(a, g, r, nr);
		else if (a.rows == 4)
			rowsel_host_joint<T, 4>(a, g, r, nr);
		else if (a.rows == 8)
			rowsel_host_joint<T, 8>(a, g, r, nr);
		else {
			rs_shared sh;

			memset(&sh, 0xa5, sizeof(sh));   /* poison */
			rowsel_row<rs_host_block, T, F>(blk, sh, a, r, g);
		}
	}
}

static int rowsel_host(const rowsel_args &a, int tq, xj_status *st)
{
	if (rowsel_args_check(a, tq, st))
		return st->code;
	if (a.gh && a.subfmin)
		rowsel_host_rows<__half, true>(a, a.gh, tq);
	else if (a.gh)
		rowsel_host_rows<__half, false>(a, a.gh, tq);
	else if (a.subfmin)
		rowsel_host_rows<float, true>(a, a.g, tq);
	else
		rowsel_host_rows<float, false>(a, a.g, tq);
	return XJ_OK;
}

#endif
