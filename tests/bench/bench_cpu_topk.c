/*
 * bench_cpu_topk.c: fused top-k of the CPU backend against plain SGEMM.
 *
 * Napkin math: top-k of nq queries against nb base rows in dimension d
 * costs 2 nq nb d FLOPs of GEMM (the scan, ~2 FLOPs per element, and the
 * rare rescoring are not counted); input bytes 4 (nq + nb) d. Both rates
 * below are 2 nq nb d / seconds, so their ratio is the share of the GEMM
 * speed the fused kernel keeps.
 *
 *   sgemm/blas  cblas_sgemm, OpenBLAS threads, C = Q B_t^T for base tiles
 *               of 2048 rows (the full nq x nb output would not fit)
 *   sgemm/tiles the backend's tiling without the scan: OpenMP threads,
 *               one-thread sgemm per (TQ x TB) tile
 *   topk        backend topk_begin / topk_add (base chunks) / topk_end
 *
 * usage: bench_cpu_topk [nq [nb [d [k [metric [reps [base_chunk]]]]]]]
 *   defaults 4096 100000 128 10 l2 3 nb; threads from OMP_NUM_THREADS.
 * Prints best-of-reps wall and CPU times (tiles and topk interleaved so
 * that machine noise hits them alike, the OpenBLAS-threaded runs last),
 * then checks 8 queries against a brute-force top-k. On a shared machine
 * the CPU-time rates are the steadier ones.
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/status.h"
#include "kernels/backend.h"
#include "kernels/metric.h"
#include "kernels/topk.h"

#define BLAS_TILE_ROWS 2048
#define TILE_Q 512      /* as TQ_MAX, TB in cpu_backend_int.h */
#define TILE_B 512

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* CPU seconds of the whole process: on a shared machine, wall time
 * includes time other programs hold the cores; CPU time does not. */
static double cpu_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct timing {
	double wall_s, cpu_s;   /* best of the repetitions */
} timing;

static void timing_start(double *w, double *c)
{
	*w = now_s();
	*c = cpu_s();
}

static void timing_stop(timing *t, double w, double c)
{
	w = now_s() - w;
	c = cpu_s() - c;
	if (w < t->wall_s)
		t->wall_s = w;
	if (c < t->cpu_s)
		t->cpu_s = c;
}

static uint64_t rng_state = 42;

static double rng_gauss(void)
{
	uint64_t a = (rng_state += 0x9e3779b97f4a7c15ull), b;

	a = (a ^ (a >> 30)) * 0xbf58476d1ce4e5b9ull;
	a = (a ^ (a >> 27)) * 0x94d049bb133111ebull;
	a ^= a >> 31;
	b = (rng_state += 0x9e3779b97f4a7c15ull);
	b = (b ^ (b >> 30)) * 0xbf58476d1ce4e5b9ull;
	b = (b ^ (b >> 27)) * 0x94d049bb133111ebull;
	b ^= b >> 31;
	return sqrt(-2.0 * log(((double)(a >> 11) + 0.5) * 0x1p-53)) *
	       cos(6.283185307179586 * ((double)(b >> 11) + 0.5) * 0x1p-53);
}

static void run_blas(const float *q, const float *b, int64_t nq, int64_t nb,
		     int64_t d, float *c, int threads, timing *tm)
{
	double w, u;

	openblas_set_num_threads(threads);
	timing_start(&w, &u);
	for (int64_t j0 = 0; j0 < nb; j0 += BLAS_TILE_ROWS) {
		int64_t n = nb - j0 < BLAS_TILE_ROWS ? nb - j0 : BLAS_TILE_ROWS;

		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq,
			    (int)n, (int)d, -2.0f, q, (int)d, b + j0 * d, (int)d,
			    0.0f, c, (int)n);
	}
	timing_stop(tm, w, u);
}

static void run_tiles(const float *q, const float *b, int64_t nq,
		      int64_t nb, int64_t d, float *c, int threads, timing *tm)
{
	int64_t ntq = (nq + TILE_Q - 1) / TILE_Q;
	double w, u;

	openblas_set_num_threads(1);
	timing_start(&w, &u);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
	for (int64_t it = 0; it < ntq; it++) {
		float *g = c + (int64_t)omp_get_thread_num() * TILE_Q * TILE_B;
		int64_t i0 = it * TILE_Q;
		int64_t m = nq - i0 < TILE_Q ? nq - i0 : TILE_Q;

		for (int64_t j0 = 0; j0 < nb; j0 += TILE_B) {
			int64_t n = nb - j0 < TILE_B ? nb - j0 : TILE_B;

			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans,
				    (int)m, (int)n, (int)d, -2.0f, q + i0 * d,
				    (int)d, b + j0 * d, (int)d, 0.0f, g, (int)n);
		}
	}
	timing_stop(tm, w, u);
}

static void run_topk(const xj_backend_cfg *cfg, const float *q,
		     const float *b, int64_t nq, int64_t nb, int64_t chunk,
		     float *key, int64_t *idx, double *flops, timing *tm)
{
	xj_backend *be;
	xj_status st;
	xj_rows qr = { q, nq, cfg->d, 0, 0 };
	double w, u;

	xj_ok(&st);
	if (backend_cpu_create(cfg, &be, &st))
		goto fail;
	timing_start(&w, &u);
	if (be->topk_begin(be, &qr, &st))
		goto fail;
	for (int64_t j0 = 0; j0 < nb; j0 += chunk) {
		xj_rows br = { b + j0 * cfg->d, nb - j0 < chunk ? nb - j0 : chunk,
			       cfg->d, j0, 0 };

		if (be->topk_add(be, &br, &st))
			goto fail;
	}
	if (be->topk_end(be, key, idx, &st))
		goto fail;
	timing_stop(tm, w, u);
	*flops = be->gemm_flops;
	be->release(be);
	return;
fail:
	fprintf(stderr, "bench_cpu_topk: %s\n", st.msg);
	exit(1);
}

/* Brute-force canonical top-k of a few queries; returns mismatches. */
static int verify(const xj_backend_cfg *cfg, const float *q, const float *b,
		  int64_t nq, int64_t nb, const float *key, const int64_t *idx)
{
	int64_t d = cfg->d, k = cfg->k;
	float *rk = malloc(sizeof(float) * (size_t)nb);
	int64_t *ri = malloc(sizeof(int64_t) * (size_t)nb);
	int bad = 0;

	if (!rk || !ri)
		return 1;
	for (int s = 0; s < 8; s++) {
		int64_t i = (nq - 1) * s / 7;
		double qq = metric_norm2(q + i * d, d);

		for (int64_t j = 0; j < nb; j++) {
			rk[j] = metric_key(cfg->metric, q + i * d, b + j * d, d,
					   qq, metric_norm2(b + j * d, d));
			ri[j] = j;
		}
		topk_sort(rk, ri, nb);
		for (int64_t e = 0; e < k && e < nb; e++)
			if (rk[e] != key[i * k + e] || ri[e] != idx[i * k + e])
				bad++;
	}
	free(rk);
	free(ri);
	return bad;
}

/* GFLOP/cpu_s is per thread-second times threads: the rate the threads
 * would reach if they had the cores to themselves. */
static void print_row(const char *name, const timing *t, double work,
		      int threads)
{
	printf("%-12s %10.4f %10.1f %10.4f %12.1f\n", name, t->wall_s,
	       work / t->wall_s * 1e-9, t->cpu_s,
	       work / t->cpu_s * threads * 1e-9);
}

static int parse_metric(const char *s, xj_metric *m)
{
	static const char *const names[] = { "l2", "sqeuclidean", "cosine", "ip" };
	static const xj_metric ms[] = { XJ_METRIC_L2, XJ_METRIC_SQEUCLIDEAN,
					XJ_METRIC_COSINE, XJ_METRIC_IP };

	for (int i = 0; i < 4; i++)
		if (!strcmp(s, names[i])) {
			*m = ms[i];
			return 0;
		}
	return -1;
}

int main(int argc, char **argv)
{
	int64_t nq = argc > 1 ? strtoll(argv[1], NULL, 10) : 4096;
	int64_t nb = argc > 2 ? strtoll(argv[2], NULL, 10) : 100000;
	int64_t d = argc > 3 ? strtoll(argv[3], NULL, 10) : 128;
	int64_t k = argc > 4 ? strtoll(argv[4], NULL, 10) : 10;
	const char *mname = argc > 5 ? argv[5] : "l2";
	int reps = argc > 6 ? atoi(argv[6]) : 3;
	int64_t chunk = argc > 7 ? strtoll(argv[7], NULL, 10) : nb;
	int threads = omp_get_max_threads();
	xj_backend_cfg cfg;
	timing tb = { 1e30, 1e30 }, tt = tb, tk = tb;
	double flops = 0, work;
	int64_t cbytes;

	memset(&cfg, 0, sizeof(cfg));
	if (nq < 1 || nb < 1 || d < 1 || k < 1 || reps < 1 || chunk < 1 ||
	    parse_metric(mname, &cfg.metric)) {
		fprintf(stderr, "usage: %s [nq [nb [d [k [l2|sqeuclidean|cosine|ip [reps [base_chunk]]]]]]]\n",
			argv[0]);
		return 2;
	}
	cfg.k = k;
	cfg.d = d;
	cfg.max_query_rows = nq;
	cfg.max_base_rows = chunk;
	cbytes = nq * BLAS_TILE_ROWS;
	if (cbytes < (int64_t)threads * TILE_Q * TILE_B)
		cbytes = (int64_t)threads * TILE_Q * TILE_B;

	float *q = malloc(sizeof(float) * (size_t)(nq * d));
	float *b = malloc(sizeof(float) * (size_t)(nb * d));
	float *c = malloc(sizeof(float) * (size_t)cbytes);
	float *key = malloc(sizeof(float) * (size_t)(nq * k));
	int64_t *idx = malloc(sizeof(int64_t) * (size_t)(nq * k));

	if (!q || !b || !c || !key || !idx) {
		fprintf(stderr, "bench_cpu_topk: out of memory\n");
		return 1;
	}
	for (int64_t i = 0; i < nq * d; i++)
		q[i] = (float)rng_gauss();
	for (int64_t i = 0; i < nb * d; i++)
		b[i] = (float)rng_gauss();
	work = 2.0 * (double)nq * (double)nb * (double)d;

	printf("# nq %lld nb %lld d %lld k %lld metric %s threads %d base_chunk %lld\n",
	       (long long)nq, (long long)nb, (long long)d, (long long)k, mname,
	       threads, (long long)chunk);
	printf("# %s\n", openblas_get_config());
	for (int r = 0; r < reps; r++) {
		run_tiles(q, b, nq, nb, d, c, threads, &tt);
		run_topk(&cfg, q, b, nq, nb, chunk, key, idx, &flops, &tk);
	}
	/* last: OpenBLAS worker threads spin for a while after a threaded
	 * call and would slow down whatever runs next */
	for (int r = 0; r < reps; r++)
		run_blas(q, b, nq, nb, d, c, threads, &tb);
	printf("%-12s %10s %10s %10s %12s\n", "# kernel", "wall_s", "GFLOP/s",
	       "cpu_s", "GFLOP/cpu_s");
	print_row("sgemm/blas", &tb, work, threads);
	print_row("sgemm/tiles", &tt, work, threads);
	print_row("topk", &tk, work, threads);
	double best_w = tb.wall_s < tt.wall_s ? tb.wall_s : tt.wall_s;
	double best_c = tb.cpu_s < tt.cpu_s ? tb.cpu_s : tt.cpu_s;

	printf("# topk / best sgemm: %.3f by wall time, %.3f by CPU time\n",
	       best_w / tk.wall_s, best_c / tk.cpu_s);
	if (flops != work)
		printf("# note: backend counted %.4g GEMM FLOPs, expected %.4g\n",
		       flops, work);
	int bad = verify(&cfg, q, b, nq, nb, key, idx);

	printf("# check of 8 queries against brute force: %s\n",
	       bad ? "FAILED" : "OK");
	free(q);
	free(b);
	free(c);
	free(key);
	free(idx);
	return bad ? 1 : 0;
}
