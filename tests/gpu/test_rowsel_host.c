/*
 * test_rowsel_host.c: the CUDA backend's top-k pass (rowsel.cuh) run on
 * the host, bit for bit against the canonical top-k. No GPU needed: the
 * kernel's code runs through its host block (backend_cuda_host_topk).
 *
 * The tile values are made as the device's GEMM of each precision may
 * make them (gemm_emul.h: inputs rounded as cuBLAS or prep_lowp round
 * them, sums in order, toward zero, or in blocks), so the scan and the
 * seeded gate meet GEMM errors up to their bound. Cases: every metric;
 * seeded and not; both scans (a sub-tile at a time, a pass at once); k = 1 .. 300 (more than a sub-tile's columns too);
 * self-joins; thresholds that leave rows short of k; clustered rows with
 * exact duplicates (ties broken by index); rows far from the origin (the
 * l2 form's cancellation); GloVe rows; several chunks, query tiles,
 * passes and sub-tiles, and passes that do not start on a sub-tile.
 * Scratch and the lists' unused entries are poisoned.
 *
 * Also: the seeded gate bounds the k-th best key's approx value on every
 * row (the property its exactness needs), seeding cuts the rescored
 * candidates of a first sub-tile to about k, and a self-join read once
 * for both sides (XJ_CUDA_SYM=2, once.cuh) gives every row's list.
 */
#include <CUnit/Basic.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/backend_cuda.h"
#include "kernels/metric.h"
#define TESTDATA_SEED 0x70e5e1c7ull
#include "tests/unit/testdata.h"
#include "tests/unit/gemm_emul.h"
#include "tests/unit/glove.h"
#include "tests/unit/unit.h"

enum { D_GAUSS, D_CLUSTER, D_OFFSET, D_SMALL, D_GLOVE };
enum { T_NONE, T_TIGHT, T_LOOSE };

typedef struct tcase {
	const char *name;
	xj_metric m;
	int64_t d, nq, nb, k;
	int self, thr, data;
	xj_precision p;
	accmode acc;
	int chunks;
	int64_t tq, tb, pass;
	int seed;
	int t16;        /* 0: a float tile; 1 + O_*: the 16-bit tile
			 * (XJ_CUDA_TILE16), its output so rounded */
} tcase;

/* ---- data ---------------------------------------------------------------- */

/* Base rows of the kind asked; the queries are fresh rows of the same
 * kind, or (self) the base's first nq rows. */
static float *make_rows(int kind, int64_t n, int64_t d, const float *centres)
{
	float *x = gauss_rows(n, d, kind == D_OFFSET ? 100.0 : 0.0,
			      kind == D_SMALL ? 1e-3 : 1.0);

	if (!x || kind != D_CLUSTER)
		return x;
	for (int64_t i = 0; i < n; i++) {
		const float *c = centres + (i % 7) * d;

		for (int64_t e = 0; e < d; e++)
			x[i * d + e] = c[e] + 0.05f * x[i * d + e];
		if (i % 10 == 3 && i > 10)   /* an exact duplicate */
			memcpy(x + i * d, x + (i - 7) * d,
			       sizeof(float) * (size_t)d);
	}
	return x;
}

/* x rounded as the GEMM of precision p reads it. */
static float gemm_input(xj_precision p, float x)
{
	if (p == XJ_PREC_TF32)
		return round_bits(x, 10, R_NEAREST_EVEN);
	return backend_cuda_host_round(p, x);
}

/* The tile values of queries Q against base rows B (as the backend
 * scans them before adding fn2): -2 q.b, -q.b or -qn.bn; for the 16-bit
 * tile, those times 2^e (e16) rounded to fp16 as tc->t16 says. */
static float *tile_values(const tcase *tc, const rows *Q, const rows *B,
			  int *e16)
{
	int64_t d = tc->d, cos = tc->m == XJ_METRIC_COSINE;
	float *g = malloc(sizeof(float) * (size_t)(Q->n * B->n + 1));
	float *qr = malloc(sizeof(float) * (size_t)d);
	float *br = malloc(sizeof(float) * (size_t)(B->n * d + 1));
	float alpha = tc->m == XJ_METRIC_L2 || tc->m == XJ_METRIC_SQEUCLIDEAN ?
		      -2.0f : -1.0f;

	*e16 = 0;
	if (!g || !qr || !br)
		return NULL;
	if (tc->t16) {
		float one = 1.0f + 0x1p-20f;

		*e16 = backend_cuda_host_tile16_exp(tc->m, d,
				cos ? one : backend_cuda_host_max_abs(Q->x, Q->n * d),
				cos ? one : backend_cuda_host_max_abs(B->x, B->n * d));
		alpha = ldexpf(alpha, *e16);
	}
	for (int64_t e = 0; e < B->n * d; e++)
		br[e] = gemm_input(tc->p, (cos ? B->hat : B->x)[e]);
	for (int64_t i = 0; i < Q->n; i++) {
		for (int64_t e = 0; e < d; e++)
			qr[e] = gemm_input(tc->p, (cos ? Q->hat : Q->x)[i * d + e]);
		for (int64_t j = 0; j < B->n; j++)
			g[i * B->n + j] = alpha * dot_acc(qr, br + j * d, d,
							  tc->acc);
		for (int64_t j = 0; tc->t16 && j < B->n; j++)
			g[i * B->n + j] = round_out16(g[i * B->n + j],
						      tc->t16 - 1);
	}
	free(qr);
	free(br);
	return g;
}

/* ---- reference ------------------------------------------------------------ */

typedef struct kv {
	float key;
	int64_t idx;
} kv;

static int kv_cmp(const void *a, const void *b)
{
	const kv *x = a, *y = b;

	if (x->key < y->key)
		return -1;
	if (y->key < x->key)
		return 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Row i's canonical top-k over every base row (global index = row). */
static int64_t ref_row(const tcase *tc, const rows *Q, const rows *B,
		       int64_t i, float thr, kv *all, kv *out)
{
	int64_t n = 0, d = tc->d;

	for (int64_t j = 0; j < B->n; j++) {
		float key;

		if (tc->self && i == j)
			continue;
		key = metric_key(tc->m, Q->x + i * d, B->x + j * d, d,
				 Q->n2[i], B->n2[j]);
		if (tc->thr != T_NONE && !(key <= thr))
			continue;
		all[n].key = key;
		all[n].idx = j;
		n++;
	}
	qsort(all, (size_t)n, sizeof(kv), kv_cmp);
	n = n < tc->k ? n : tc->k;
	memcpy(out, all, sizeof(kv) * (size_t)n);
	return n;
}

/* ---- one case ------------------------------------------------------------- */

static float case_threshold(const tcase *tc, const rows *Q, const rows *B,
			    kv *all)
{
	kv *top = malloc(sizeof(kv) * (size_t)tc->k);
	tcase open = *tc;
	int64_t n, at;
	float t;

	open.thr = T_NONE;
	n = ref_row(&open, Q, B, 0, 0, all, top);
	at = tc->thr == T_TIGHT ? n / 2 : n - 1;
	t = top[at < 0 ? 0 : at].key;
	free(top);
	return t;
}

/* Every row's list against the reference: the rows that differ (the
 * first three printed); *short_rows gets those with fewer than k. */
static int64_t check_lists(const tcase *tc, const rows *Q, const rows *B,
			   float thr, const float *key, const int64_t *idx,
			   const int64_t *count, int64_t *short_rows)
{
	int64_t k = tc->k, bad = 0;
	kv *all = malloc(sizeof(kv) * (size_t)(B->n + 1));
	kv *want = malloc(sizeof(kv) * (size_t)(k + 1));

	CU_ASSERT_FATAL(all && want);
	*short_rows = 0;
	for (int64_t i = 0; i < Q->n; i++) {
		int64_t n = ref_row(tc, Q, B, i, thr, all, want);
		int ok = count[i] == n;

		for (int64_t e = 0; ok && e < k; e++) {
			float wk = e < n ? want[e].key : INFINITY;
			int64_t wi = e < n ? want[e].idx : -1;

			ok = same_f32(key[i * k + e], wk) && idx[i * k + e] == wi;
		}
		*short_rows += n < k;
		if (!ok && bad++ < 3) {
			printf("\n  %s row %lld: %lld entries, want %lld;",
			       tc->name, (long long)i, (long long)count[i],
			       (long long)n);
			for (int64_t e = 0; e < k && e < 4; e++)
				printf(" (%lld %a | %lld %a)",
				       (long long)idx[i * k + e],
				       key[i * k + e],
				       (long long)(e < n ? want[e].idx : -1),
				       e < n ? want[e].key : INFINITY);
		}
	}
	free(all);
	free(want);
	return bad;
}

/* The case's query and base rows (self: the queries are the base's
 * first nq rows); 1 when its GloVe rows are not there (skipped). */
static int case_rows(const tcase *tc, const float *centres, float **qx,
		     float **bx)
{
	int64_t d = tc->d, nq = tc->nq, nb = tc->nb;

	if (tc->data == D_GLOVE) {
		if (glove_rows(qx, nq, bx, nb, &d) || d != tc->d) {
			printf("\n  %s: no GloVe rows, skipped ", tc->name);
			return 1;
		}
	} else {
		*bx = make_rows(tc->data, nb, d, centres);
		*qx = tc->self ? malloc(sizeof(float) * (size_t)(nq * d)) :
				 make_rows(tc->data, nq, d, centres);
		CU_ASSERT_FATAL(*bx && *qx);
	}
	if (tc->self)
		memcpy(*qx, *bx, sizeof(float) * (size_t)(nq * d));
	return 0;
}

/* The k-lists and gates of n query rows, as topk_begin starts them. */
typedef struct lists {
	float *key;
	int64_t *idx, *count;
	double *gate;
} lists;

static void lists_make(lists *l, const tcase *tc, int64_t n, float thr)
{
	l->key = malloc(sizeof(float) * (size_t)(n * tc->k));
	l->idx = malloc(sizeof(int64_t) * (size_t)(n * tc->k));
	l->count = malloc(sizeof(int64_t) * (size_t)n);
	l->gate = malloc(sizeof(double) * (size_t)n);
	CU_ASSERT_FATAL(l->key && l->idx && l->count && l->gate);
	backend_cuda_host_topk_init(tc->m, tc->thr != T_NONE, thr, n, tc->k,
				    l->key, l->idx, l->count, l->gate);
}

static void lists_free(lists *l)
{
	free(l->key);
	free(l->idx);
	free(l->count);
	free(l->gate);
}

/* The host pass's settings that come from the case. */
static void case_pass(backend_cuda_host_pass *p, const tcase *tc, float thr,
		      int e16)
{
	memset(p, 0, sizeof(*p));
	p->metric = tc->m;
	p->d = tc->d;
	p->k = tc->k;
	p->p = tc->p;
	p->self = tc->self;
	p->has_threshold = tc->thr != T_NONE;
	p->threshold_key = thr;
	p->tq = tc->tq;
	p->tb = tc->tb;
	p->pass_cols = tc->pass;
	p->seed = tc->seed;
	p->tile16 = tc->t16 != 0;
	p->e16 = e16;
}

static void run_case(const tcase *tc, int whole, int fmin, int per_block)
{
	int64_t d = tc->d, nq = tc->nq, nb = tc->nb;
	float *centres = gauss_rows(7, d, 0, 1);
	float *bx = NULL, *qx = NULL, *g = NULL, thr = 0;
	int64_t bad = 0, short_rows = 0;
	unsigned long long stats[5] = { 0, 0, 0, 0, 0 };
	rows Q, B;
	lists l;
	kv *all;
	xj_status st;

	if (case_rows(tc, centres, &qx, &bx)) {
		free(centres);
		return;
	}
	CU_ASSERT_FATAL(rows_make(&Q, qx, nq, d) == 0);
	CU_ASSERT_FATAL(rows_make(&B, bx, nb, d) == 0);
	all = malloc(sizeof(kv) * (size_t)(nb + 1));
	CU_ASSERT_FATAL(all != NULL);
	if (tc->thr != T_NONE)
		thr = case_threshold(tc, &Q, &B, all);
	lists_make(&l, tc, nq, thr);

	/* the base in chunks, each with its own tile values */
	for (int c = 0; c < tc->chunks; c++) {
		int64_t b0 = nb * c / tc->chunks, b1 = nb * (c + 1) / tc->chunks;
		rows Bc = B;
		backend_cuda_host_pass p;
		int e16;

		Bc.n = b1 - b0;
		Bc.x = B.x + b0 * d;
		Bc.hat = B.hat + b0 * d;
		g = tile_values(tc, &Q, &Bc, &e16);
		CU_ASSERT_FATAL(g != NULL);
		case_pass(&p, tc, thr, e16);
		p.q = Q.x;
		p.nq = nq;
		p.qfirst = 0;
		p.b = Bc.x;
		p.nb = Bc.n;
		p.bfirst = b0;
		p.g = g;
		p.whole = whole;
		p.fmin = fmin;
		p.rows = per_block;
		xj_ok(&st);
		CU_ASSERT_EQUAL_FATAL(backend_cuda_host_topk(&p, l.key, l.idx,
							     l.count, l.gate,
							     stats, &st),
				      XJ_OK);
		free(g);
	}

	bad = check_lists(tc, &Q, &B, thr, l.key, l.idx, l.count,
			  &short_rows);
	CU_ASSERT_EQUAL(bad, 0);
	if (tc->thr == T_TIGHT)
		CU_ASSERT(short_rows > 0);
	/* XJ_CUDA_FMIN passes over groups (the same lists, above) on rows
	 * of the l2 family that scan whole passes */
	if (fmin && tc->m != XJ_METRIC_IP && tc->m != XJ_METRIC_COSINE &&
	    tc->pass > tc->tb && tc->data == D_GAUSS)
		CU_ASSERT(stats[3] > 0);
	/* several rows a block: the joint scan ran (rows with their gates
	 * scanning whole passes: a threshold's, or seeded in a pass before) */
	if (per_block > 1 &&
	    (tc->thr != T_NONE || tc->pass < tc->nb / tc->chunks))
		CU_ASSERT(stats[4] > 0);
	if (per_block == 1)
		CU_ASSERT_EQUAL(stats[4], 0);
	printf("\n  %-28s %-4s%s%s %6.1f rescored/query, %llu undecided, %llu seeded, %5.1f%% fn2 unread, %llu rows joint ",
	       tc->name, whole ? "pass" : "sub", fmin ? " fmin" : "     ",
	       per_block == 8 ? " x8" : per_block == 4 ? " x4" :
	       per_block == 2 ? " x2" : "   ",
	       (double)stats[0] / (double)nq, stats[1], stats[2],
	       100.0 * (double)stats[3] / (double)(nq * nb / 4), stats[4]);
	rows_free(&Q);
	rows_free(&B);
	free(centres);
	free(all);
	lists_free(&l);
}

#define L2 XJ_METRIC_L2
#define SQ XJ_METRIC_SQEUCLIDEAN
#define IP XJ_METRIC_IP
#define COS XJ_METRIC_COSINE
#define F32 XJ_PREC_FP32
#define TF32 XJ_PREC_TF32
#define BF16 XJ_PREC_BF16
#define FP16 XJ_PREC_FP16

static const tcase cases[] = {
	/* name                 m    d    nq   nb    k  self thr      data      p     acc          ch tq  tb   pass seed */
	{ "l2 seeded",          L2,  32, 150, 3000, 10, 0, T_NONE,  D_GAUSS,   F32,  ACC_NEAREST, 1, 64, 512, 1024, 1, 0 },
	{ "l2 unseeded",        L2,  32, 150, 3000, 10, 0, T_NONE,  D_GAUSS,   F32,  ACC_NEAREST, 1, 64, 512, 1024, 0, 0 },
	{ "sqeuclidean k=1",    SQ,  17, 120, 2500, 1,  0, T_NONE,  D_GAUSS,   F32,  ACC_NEAREST, 2, 50, 256, 768,  1, 0 },
	{ "ip k=100",           IP,  24, 100, 3000, 100, 0, T_NONE, D_GAUSS,   F32,  ACC_NEAREST, 2, 64, 512, 1536, 1, 0 },
	{ "cosine k=10",        COS, 40, 100, 2600, 10, 0, T_NONE,  D_GAUSS,   F32,  ACC_NEAREST, 1, 33, 512, 2048, 1, 0 },
	{ "l2 k > sub-tile",    L2,  16, 60,  1200, 300, 0, T_NONE, D_GAUSS,   F32,  ACC_NEAREST, 3, 64, 256, 512,  1, 0 },
	{ "l2 self",            L2,  20, 200, 2000, 10, 1, T_NONE,  D_GAUSS,   F32,  ACC_NEAREST, 2, 64, 512, 1024, 1, 0 },
	{ "cosine self clustered", COS, 12, 200, 2000, 16, 1, T_NONE, D_CLUSTER, F32, ACC_NEAREST, 1, 64, 512, 1024, 1, 0 },
	{ "l2 clustered dups",  L2,  12, 150, 2400, 20, 0, T_NONE,  D_CLUSTER, F32,  ACC_NEAREST, 2, 64, 300, 900,  1, 0 },
	{ "sqeuclidean offset", SQ,  32, 100, 2000, 10, 0, T_NONE,  D_OFFSET,  F32,  ACC_NEAREST, 1, 64, 512, 1024, 1, 0 },
	{ "l2 tight threshold", L2,  32, 120, 2000, 10, 0, T_TIGHT, D_GAUSS,   F32,  ACC_NEAREST, 1, 64, 512, 1024, 1, 0 },
	{ "ip loose threshold", IP,  32, 120, 2000, 10, 0, T_LOOSE, D_GAUSS,   F32,  ACC_NEAREST, 2, 64, 512, 1024, 1, 0 },
	{ "cosine threshold self", COS, 32, 150, 1500, 12, 1, T_TIGHT, D_GAUSS, F32, ACC_NEAREST, 1, 64, 512, 1024, 1, 0 },
	{ "l2 bf16 toward zero", L2, 32, 100, 2000, 10, 0, T_NONE,  D_GAUSS,   BF16, ACC_ZERO,    1, 64, 512, 1024, 1, 0 },
	{ "cosine bf16 blocks", COS, 48, 100, 2000, 10, 0, T_NONE,  D_GAUSS,   BF16, ACC_BLOCKS,  2, 64, 512, 1024, 1, 0 },
	{ "ip tf32 toward zero", IP, 32, 100, 2000, 50, 0, T_NONE,  D_GAUSS,   TF32, ACC_ZERO,    1, 64, 512, 1024, 1, 0 },
	{ "l2 fp16 self",       L2,  32, 150, 1500, 10, 1, T_NONE,  D_GAUSS,   FP16, ACC_BLOCKS,  1, 64, 512, 1024, 1, 0 },
	{ "l2 glove",           L2,  100, 100, 4000, 10, 0, T_NONE, D_GLOVE,   F32,  ACC_NEAREST, 2, 64, 1024, 2048, 1, 0 },
	{ "cosine glove bf16",  COS, 100, 100, 4000, 10, 0, T_NONE, D_GLOVE,   BF16, ACC_ZERO,    1, 64, 1024, 4096, 1, 0 },
	/* the 16-bit tile: scaled down (offset rows), up (small rows) */
	{ "l2 fp16",            L2,  32, 150, 3000, 10, 0, T_NONE,  D_GAUSS,   FP16, ACC_NEAREST, 1, 64, 512, 1024, 1, 0 },
	{ "l2 fp16 tile16",     L2,  32, 150, 3000, 10, 0, T_NONE,  D_GAUSS,   FP16, ACC_NEAREST, 1, 64, 512, 1024, 1, 1 + O_NEAREST },
	{ "ip tile16 zero",     IP,  24, 100, 3000, 50, 0, T_NONE,  D_GAUSS,   FP16, ACC_ZERO,    2, 64, 512, 1536, 1, 1 + O_ZERO },
	{ "cosine tile16 flush", COS, 40, 100, 2600, 10, 0, T_NONE, D_GAUSS,   FP16, ACC_BLOCKS,  1, 33, 512, 2048, 1, 1 + O_FLUSH },
	{ "sqeuclidean offset tile16", SQ, 32, 100, 2000, 10, 0, T_NONE, D_OFFSET, FP16, ACC_NEAREST, 1, 64, 512, 1024, 1, 1 + O_NEAREST },
	{ "l2 small tile16",    L2,  32, 100, 2000, 10, 0, T_NONE,  D_SMALL,   FP16, ACC_ZERO,    1, 64, 512, 1024, 1, 1 + O_FLUSH },
	{ "l2 dups tile16",     L2,  12, 150, 2400, 20, 0, T_NONE,  D_CLUSTER, FP16, ACC_ZERO,    2, 64, 300, 900,  1, 1 + O_ZERO },
	{ "l2 tight thr tile16", L2, 32, 120, 2000, 10, 0, T_TIGHT, D_GAUSS,   FP16, ACC_NEAREST, 1, 64, 512, 1024, 1, 1 + O_FLUSH },
	{ "l2 unseeded tile16", L2,  32, 150, 3000, 10, 0, T_NONE,  D_GAUSS,   FP16, ACC_NEAREST, 1, 64, 512, 1024, 0, 1 + O_NEAREST },
	{ "l2 glove tile16",    L2,  100, 100, 4000, 10, 0, T_NONE, D_GLOVE,   FP16, ACC_BLOCKS,  2, 64, 1024, 2048, 1, 1 + O_NEAREST },
};

static void test_cases(void)
{
	/* both scans: a sub-tile at a time, and the rest of a pass at once
	 * (that one also with XJ_CUDA_FMIN's test of each sub-tile's
	 * smallest fn2 first: the l2 family's cases; and without it, with
	 * 2, 4 and 8 rows a block, XJ_CUDA_RS_ROWS, whose tiles of 33 and 50
	 * rows end in a block of fewer) */
	for (int whole = 0; whole < 2; whole++)
		for (int fmin = 0; fmin <= whole; fmin++)
			for (int nr = 1; nr <= (whole && !fmin ? 8 : 1); nr *= 2)
				for (size_t i = 0; i < UNIT_COUNT(cases); i++)
					if (!fmin ||
					    cases[i].m == XJ_METRIC_L2 ||
					    cases[i].m == XJ_METRIC_SQEUCLIDEAN)
						run_case(&cases[i], whole, fmin,
							 nr);
}

/* A first sub-tile seeded rescores about k candidates a row; unseeded,
 * its first batch keeps all it scans (no gate yet) and the later ones
 * what passes the gate the first merge set. */
static void test_seed_saves(void)
{
	tcase a = cases[0], b = cases[1];
	int64_t d = 32, nq = 64, nb = 2048, k = 10;
	float *qx = gauss_rows(nq, d, 0, 1), *bx = gauss_rows(nb, d, 0, 1);
	unsigned long long s[2][5] = { { 0 } };
	rows Q, B;

	CU_ASSERT_FATAL(rows_make(&Q, qx, nq, d) == 0);
	CU_ASSERT_FATAL(rows_make(&B, bx, nb, d) == 0);
	a.nq = b.nq = nq;
	a.nb = b.nb = nb;
	a.d = b.d = d;
	a.tb = b.tb = nb;    /* one sub-tile: every candidate is a seed's */
	a.pass = b.pass = nb;
	for (int v = 0; v < 2; v++) {
		const tcase *tc = v ? &b : &a;
		int e16;
		float *g = tile_values(tc, &Q, &B, &e16);
		float *key = malloc(sizeof(float) * (size_t)(nq * k));
		int64_t *idx = malloc(sizeof(int64_t) * (size_t)(nq * k));
		int64_t *count = malloc(sizeof(int64_t) * (size_t)nq);
		double *gate = malloc(sizeof(double) * (size_t)nq);
		backend_cuda_host_pass p = { tc->m, d, k, tc->p, Q.x, nq, 0,
					     B.x, nb, 0, g, 0, 0, 0, 64, nb,
					     nb, tc->seed, 0, 0, 0, 0, 1 };
		xj_status st;

		backend_cuda_host_topk_init(tc->m, 0, 0, nq, k, key, idx,
					    count, gate);
		CU_ASSERT_EQUAL(backend_cuda_host_topk(&p, key, idx, count,
						       gate, s[v], &st), XJ_OK);
		free(g);
		free(key);
		free(idx);
		free(count);
		free(gate);
	}
	printf("\n  rescored a row: seeded %.1f, unseeded %.1f ",
	       (double)s[0][0] / nq, (double)s[1][0] / nq);
	CU_ASSERT(s[0][0] < (unsigned long long)(3 * k * nq));
	CU_ASSERT(s[1][0] > 4 * s[0][0]);
	rows_free(&Q);
	rows_free(&B);
}

/*
 * The seeded gate of every row (t = the k-th smallest tile value) lies
 * at or above metric_gate_approx of the row's k-th best canonical key,
 * for each metric and precision, with sums toward zero (the GEMM's worst
 * rounding the bound allows).
 */
static void test_seed_gate_bound(void)
{
	const xj_metric ms[] = { L2, SQ, IP, COS };
	const struct { xj_precision p; accmode a; int t16; } ps[] = {
		{ F32, ACC_NEAREST, 0 }, { TF32, ACC_ZERO, 0 },
		{ BF16, ACC_ZERO, 0 }, { FP16, ACC_BLOCKS, 0 },
		{ FP16, ACC_ZERO, 1 + O_ZERO } };
	int64_t d = 24, nq = 40, nb = 600, checked = 0, wrong = 0;

	for (size_t mi = 0; mi < UNIT_COUNT(ms); mi++)
		for (size_t pi = 0; pi < UNIT_COUNT(ps); pi++)
			for (int kind = D_GAUSS; kind <= D_SMALL; kind++) {
				float *centres = gauss_rows(7, d, 0, 1);
				tcase tc = { "seed", ms[mi], d, nq, nb, 7, 0,
					     T_NONE, kind, ps[pi].p, ps[pi].a,
					     1, 64, nb, nb, 1, ps[pi].t16 };
				rows Q, B;
				float *g, *v = malloc(sizeof(float) * nb);
				kv *all = malloc(sizeof(kv) * nb);
				kv *top = malloc(sizeof(kv) * tc.k);
				float bmax = 0, unit;
				int e16;

				CU_ASSERT_FATAL(rows_make(&Q, make_rows(kind, nq, d, centres), nq, d) == 0);
				CU_ASSERT_FATAL(rows_make(&B, make_rows(kind, nb, d, centres), nb, d) == 0);
				g = tile_values(&tc, &Q, &B, &e16);
				unit = tc.t16 ? ldexpf(1.0f, -e16) : 1.0f;
				for (int64_t j = 0; j < nb; j++)
					bmax = fmaxf(bmax, B.fnorm[j]);
				for (int64_t i = 0; i < nq; i++) {
					int sq = ms[mi] == L2 || ms[mi] == SQ;
					double gs, need;

					for (int64_t j = 0; j < nb; j++)
						v[j] = sq ? B.fn2[j] + g[i * nb + j] * unit :
							    g[i * nb + j] * unit;
					for (int64_t j = 0; j < nb; j++) {
						all[j].key = v[j];
						all[j].idx = j;
					}
					qsort(all, (size_t)nb, sizeof(kv), kv_cmp);
					gs = backend_cuda_host_seed_gate(
						ms[mi], d, all[tc.k - 1].key,
						Q.n2[i], Q.fnorm[i], bmax,
						ps[pi].p, tc.t16 ? unit : 0.0);
					ref_row(&tc, &Q, &B, i, 0, all, top);
					need = metric_gate_approx(ms[mi],
								  top[tc.k - 1].key);
					checked++;
					if (!(gs >= need) && wrong++ < 3)
						printf("\n  metric %d prec %d data %d row %lld: gate %a < %a",
						       ms[mi], ps[pi].p, kind,
						       (long long)i, gs, need);
				}
				free(g);
				free(v);
				free(all);
				free(top);
				free(centres);
				rows_free(&Q);
				rows_free(&B);
			}
	CU_ASSERT_EQUAL(wrong, 0);
	printf("\n  %lld rows ", (long long)checked);
}

/* XJ_CUDA_RS_ROWS takes 1, 2, 4 or 8; anything else is a usage error
 * that names it (read where the backend reads its settings). */
/* Variable name takes each of good (the default pass rows) and refuses
 * each of bad (a usage error naming it); unset after. */
static void env_setting(const char *name, const char *const *good,
			size_t ngood, const char *const *bad, size_t nbad)
{
	xj_status st;

	for (size_t i = 0; i < ngood; i++) {
		setenv(name, good[i], 1);
		xj_ok(&st);
		CU_ASSERT_EQUAL(backend_cuda_host_pass_rows(9000, &st), 2048);
	}
	for (size_t i = 0; i < nbad; i++) {
		setenv(name, bad[i], 1);
		xj_ok(&st);
		CU_ASSERT_EQUAL(backend_cuda_host_pass_rows(9000, &st), -1);
		CU_ASSERT_EQUAL(st.code, XJ_EXIT_USAGE);
		CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, name));
	}
	unsetenv(name);
}

static void test_rs_rows_setting(void)
{
	static const char *good[] = { "1", "2", "4", "8", "" };
	static const char *bad[] = { "3", "0", "6", "16", "four" };
	xj_status st;

	/* not with XJ_CUDA_FMIN */
	setenv("XJ_CUDA_FMIN", "1", 1);
	setenv("XJ_CUDA_RS_ROWS", "4", 1);
	xj_ok(&st);
	CU_ASSERT_EQUAL(backend_cuda_host_pass_rows(9000, &st), -1);
	CU_ASSERT_EQUAL(st.code, XJ_EXIT_USAGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "XJ_CUDA_FMIN"));
	unsetenv("XJ_CUDA_FMIN");

	env_setting("XJ_CUDA_RS_ROWS", good, UNIT_COUNT(good), bad,
		    UNIT_COUNT(bad));
}

static void test_sym_setting(void)
{
	static const char *good[] = { "0", "1", "2", "" };
	static const char *bad[] = { "3", "-1", "once" };

	env_setting("XJ_CUDA_SYM", good, UNIT_COUNT(good), bad,
		    UNIT_COUNT(bad));
}

/* ---- a self-join read once (XJ_CUDA_SYM=2) --------------------------- */

/*
 * The diagonal blocks, then each block against the rows after it, the
 * tile read once for both sides (once.cuh), bit for bit against the
 * reference on every row. A pass only runs forward, so the last block's
 * rows meet every earlier row through the column side alone: a column
 * side that lost or misplaced a pair fails here. tq is the block, pass
 * the columns of a pass (neither on a block's nor a sub-tile's edge in
 * some cases); k above the block leaves rows without a gate, which keep
 * every column.
 */
static void run_once_case(const tcase *tc)
{
	int64_t n = tc->nb, d = tc->d, short_rows = 0, bad;
	float *centres = gauss_rows(7, d, 0, 1), *qx = NULL, *bx = NULL;
	float *g, thr = 0;
	unsigned long long stats[5] = { 0, 0, 0, 0, 0 };
	backend_cuda_host_pass p;
	rows X;
	lists l;
	kv *all;
	xj_status st;
	int e16;

	CU_ASSERT_FATAL(tc->self && tc->nq == n);
	if (case_rows(tc, centres, &qx, &bx)) {
		free(centres);
		return;
	}
	free(qx);
	CU_ASSERT_FATAL(rows_make(&X, bx, n, d) == 0);
	all = malloc(sizeof(kv) * (size_t)(n + 1));
	CU_ASSERT_FATAL(all != NULL);
	if (tc->thr != T_NONE)
		thr = case_threshold(tc, &X, &X, all);
	lists_make(&l, tc, n, thr);
	g = tile_values(tc, &X, &X, &e16);
	CU_ASSERT_FATAL(g != NULL);
	case_pass(&p, tc, thr, e16);
	p.q = p.b = X.x;
	p.nq = p.nb = n;
	p.g = g;
	p.whole = 1;
	p.rows = 1;
	xj_ok(&st);
	CU_ASSERT_EQUAL_FATAL(backend_cuda_host_selfjoin_once(&p, l.key, l.idx,
							      l.count, l.gate,
							      stats, &st),
			      XJ_OK);
	bad = check_lists(tc, &X, &X, thr, l.key, l.idx, l.count, &short_rows);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT(stats[0] > 0);
	if (tc->thr == T_TIGHT)
		CU_ASSERT(short_rows > 0);
	printf("\n  %-30s once %6.1f rescored/row (a plain join: %lld "
	       "columns/row), %llu undecided ",
	       tc->name, (double)stats[0] / (double)n, (long long)(n - 1),
	       stats[1]);
	free(g);
	rows_free(&X);
	free(centres);
	free(all);
	lists_free(&l);
}

static const tcase once_cases[] = {
	/* name                     m    d    nq    nb    k  self thr      data       p     acc          ch tq  tb   pass seed t16 */
	{ "l2 once",                L2,  32, 1200, 1200, 10, 1, T_NONE,  D_GAUSS,   F32,  ACC_NEAREST, 1, 64, 256, 300, 1, 0 },
	{ "sqeuclidean once k=1",   SQ,  17, 900,  900,  1,  1, T_NONE,  D_GAUSS,   F32,  ACC_NEAREST, 1, 64, 512, 512, 1, 0 },
	{ "ip once k=50",           IP,  24, 1000, 1000, 50, 1, T_NONE,  D_GAUSS,   F32,  ACC_NEAREST, 1, 64, 256, 700, 1, 0 },
	{ "cosine once clustered",  COS, 12, 1000, 1000, 16, 1, T_NONE,  D_CLUSTER, F32,  ACC_NEAREST, 1, 64, 512, 448, 1, 0 },
	{ "l2 once k > block",      L2,  16, 700,  700,  100, 1, T_NONE, D_GAUSS,   F32,  ACC_NEAREST, 1, 64, 256, 256, 1, 0 },
	{ "l2 once dups",           L2,  12, 1000, 1000, 20, 1, T_NONE,  D_CLUSTER, F32,  ACC_NEAREST, 1, 50, 300, 333, 1, 0 },
	{ "sqeuclidean once offset", SQ, 32, 800,  800,  10, 1, T_NONE,  D_OFFSET,  F32,  ACC_NEAREST, 1, 64, 512, 512, 1, 0 },
	{ "cosine once tight thr",  COS, 32, 900,  900,  12, 1, T_TIGHT, D_GAUSS,   F32,  ACC_NEAREST, 1, 64, 512, 400, 1, 0 },
	{ "ip once loose thr",      IP,  32, 900,  900,  10, 1, T_LOOSE, D_GAUSS,   F32,  ACC_NEAREST, 1, 64, 256, 512, 1, 0 },
	{ "l2 once bf16 zero",      L2,  32, 1000, 1000, 10, 1, T_NONE,  D_GAUSS,   BF16, ACC_ZERO,    1, 64, 512, 512, 1, 0 },
	{ "cosine once bf16 blocks", COS, 48, 900, 900,  10, 1, T_NONE,  D_GAUSS,   BF16, ACC_BLOCKS,  1, 64, 512, 512, 1, 0 },
	{ "ip once tf32 zero",      IP,  32, 900,  900,  30, 1, T_NONE,  D_GAUSS,   TF32, ACC_ZERO,    1, 64, 512, 512, 1, 0 },
	{ "l2 once tile16",         L2,  32, 1200, 1200, 10, 1, T_NONE,  D_GAUSS,   FP16, ACC_NEAREST, 1, 64, 256, 300, 1, 1 + O_NEAREST },
	{ "ip once tile16 zero",    IP,  24, 1000, 1000, 50, 1, T_NONE,  D_GAUSS,   FP16, ACC_ZERO,    1, 64, 512, 512, 1, 1 + O_ZERO },
	{ "cosine once tile16 flush", COS, 40, 900, 900, 10, 1, T_NONE,  D_GAUSS,   FP16, ACC_BLOCKS,  1, 64, 512, 512, 1, 1 + O_FLUSH },
	{ "sqeuclidean offset once tile16", SQ, 32, 800, 800, 10, 1, T_NONE, D_OFFSET, FP16, ACC_NEAREST, 1, 64, 512, 512, 1, 1 + O_NEAREST },
	{ "l2 dups once tile16",    L2,  12, 1000, 1000, 20, 1, T_NONE,  D_CLUSTER, FP16, ACC_ZERO,    1, 50, 300, 333, 1, 1 + O_ZERO },
	{ "l2 tight thr once tile16", L2, 32, 900, 900,  10, 1, T_TIGHT, D_GAUSS,   FP16, ACC_NEAREST, 1, 64, 512, 512, 1, 1 + O_FLUSH },
	{ "l2 glove once",          L2,  100, 1500, 1500, 10, 1, T_NONE, D_GLOVE,   F32,  ACC_NEAREST, 1, 64, 512, 1024, 1, 0 },
	/* passes wider than a scan block's ONCE_COLS columns */
	{ "l2 once wide passes",    L2,  24, 2600, 2600, 10, 1, T_NONE,  D_GAUSS,   F32,  ACC_NEAREST, 1, 64, 512, 2400, 1, 0 },
	{ "cosine once wide tile16", COS, 24, 2600, 2600, 10, 1, T_NONE, D_GAUSS,   FP16, ACC_BLOCKS,  1, 64, 512, 2400, 1, 1 + O_FLUSH },
	{ "l2 glove once tile16",   L2,  100, 1500, 1500, 10, 1, T_NONE, D_GLOVE,   FP16, ACC_BLOCKS,  1, 64, 512, 1024, 1, 1 + O_NEAREST },
};

static void test_once_cases(void)
{
	for (size_t i = 0; i < UNIT_COUNT(once_cases); i++)
		run_once_case(&once_cases[i]);
}

static const unit_test tests[] = {
	{ "XJ_CUDA_RS_ROWS: 1, 2, 4 or 8", test_rs_rows_setting },
	{ "XJ_CUDA_SYM: 0, 1 or 2", test_sym_setting },
	{ "seeded gate bounds the k-th key", test_seed_gate_bound },
	{ "seeding rescores about k a row", test_seed_saves },
	{ "passes against the canonical top-k", test_cases },
	{ "a self-join read once (XJ_CUDA_SYM=2)", test_once_cases },
};

int main(void)
{
	return unit_run("rowsel_host", tests, UNIT_COUNT(tests));
}
