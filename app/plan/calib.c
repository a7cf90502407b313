/* calib.c: --precision auto by measurement (see calib.h). */
#define _GNU_SOURCE
#include "calib.h"

#include <cblas.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/backend.h"
#include "../../kernels/cpu/cpu_gemm.h"
#include "cuda_module.h"

/* Jobs below these GEMM FLOPs are not measured (decide_small): the
 * measurement (about 0.3 s on 2 cores at d = 128, 1.0 at d = 768; on a
 * GPU four candidates of eight runs of up to 32,768 x 131,072 rows)
 * would cost more than it saves.
 * XJOIN_CALIB_MIN_GFLOP sets another floor. */
#define CALIB_MIN_FLOPS_CPU 50e9
#define CALIB_MIN_FLOPS_GPU 1e13
#define CALIB_MAX_CANDS 4
/* A candidate whose first run takes this many times the fastest one's so
 * far is not measured further (measure_parts, measure_shapes). */
#define CALIB_SLOWER 1.3
#define CALIB_REPS 2     /* a CPU candidate's runs (measure_parts) */

/* A candidate and its cost model: a top-k of nq query rows against nb
 * base rows takes a nq + b nb + c nq nb + e nq (log2 nb - 20) seconds
 * (per query row: its norms, packing and seeding, and its rescoring at a
 * million base rows; per base row: likewise; per pair: the GEMM and the
 * scan; the last term: the rescoring's growth with the base rows). */
typedef struct cand {
	const char *name;
	xj_precision p;
	int dnnl;            /* fp32 through oneDNN */
	double a, b, c, e;   /* the model, once measured */
	int measured;
	int slower;          /* left out: CALIB_SLOWER on the sample */
} cand;

/* The fallback: fp32 through the BLAS (or cuBLAS). */
#define FP32 ((cand){ .name = "fp32", .p = XJ_PREC_FP32 })

/* The sample: the first nq and nb rows of each input, for runs of q
 * query and b base rows and their doubles (measure): nq = q on a CPU
 * (measure_parts doubles only the base rows), 2q on a GPU; nb = 2b. */
typedef struct sample {
	float *q, *b;
	int64_t nq, nb;
	int64_t q_rows, b_rows;   /* q and b */
} sample;

static int ncands(const xj_job *job, const xj_device_choice *dev, cand *out)
{
	int n = 0;

	if (dev->kind == XJ_BACKEND_CUDA) {
		/* the likely fastest first, as on a CPU: on an H100 at 1M x
		 * 1M x 128, k = 10, fp16 (its 16-bit tile) ran 4.32 s, bf16
		 * 5.57, tf32 5.94, fp32 10.99 */
		out[n++] = (cand){ .name = "fp16", .p = XJ_PREC_FP16 };
		out[n++] = (cand){ .name = "bf16", .p = XJ_PREC_BF16 };
		out[n++] = (cand){ .name = "tf32", .p = XJ_PREC_TF32 };
		out[n++] = FP32;
		return n;
	}
	cpu_gemm_caps caps;

	/* the likely fastest first: the others may then stop early */
	cpu_gemm_caps_get(&caps);
	if (caps.int8 && job->d <= CPU_GEMM_INT8_MAX_D)
		out[n++] = (cand){ .name = "int8", .p = XJ_PREC_INT8 };
	if (caps.bf16)
		out[n++] = (cand){ .name = "bf16", .p = XJ_PREC_BF16 };
	if (caps.dnnl)
		out[n++] = (cand){ .name = "fp32-dnnl", .p = XJ_PREC_FP32,
				   .dnnl = 1 };
	out[n++] = FP32;
	return n;
}

/* s with the characters a cache key keeps (no INI syntax), at most n. */
static void key_part(char *out, size_t n, const char *s)
{
	size_t o = 0;

	for (; *s && o + 1 < n; s++)
		out[o++] = strchr("=:;#[]|\n\r", *s) ? '_' : *s;
	out[o] = 0;
}

static void cpu_model(char *out, size_t n)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[256];

	snprintf(out, n, "unknown cpu");
	while (f && fgets(line, sizeof(line), f)) {
		char *v = strchr(line, ':');

		if (strncmp(line, "model name", 10) || !v)
			continue;
		v += 1 + strspn(v + 1, " \t");
		v[strcspn(v, "\n")] = 0;
		key_part(out, n, v);
		break;
	}
	if (f)
		fclose(f);
}

/* "NVIDIA H100 80GB HBM3 cc 9.0" from the choice's "[bus] name, compute
 * capability 9.0, ..." */
static void gpu_model(const xj_device_choice *dev, char *out, size_t n)
{
	const char *s = strstr(dev->info, "] "), *cc;
	char name[64] = "unknown gpu";

	if (s) {
		size_t len = strcspn(s + 2, ",");

		snprintf(name, sizeof(name), "%.*s", (int)len, s + 2);
	}
	cc = strstr(dev->info, "capability ");
	snprintf(out, n, "%s cc %.4s", name, cc ? cc + 11 : "?");
	key_part(out, n, out);
}

static int64_t pow2_at_least(int64_t k)
{
	int64_t b = 1;

	while (b < k && b < (INT64_C(1) << 40))
		b *= 2;
	return b;
}

/* What was measured, in words: under 160 characters (calib.h). */
static void cache_key(const xj_job *job, const xj_comm *c,
		      const xj_device_choice *dev, xj_command cmd, int threads,
		      char *key, size_t n)
{
	char host[40], model[52], lib[96];

	key_part(host, sizeof(host), c->host);
	if (dev->kind == XJ_BACKEND_CUDA) {
		gpu_model(dev, model, sizeof(model));
		/* "fp16": the candidates since fp16 joined them (a model
		 * cached before is measured again) */
		snprintf(lib, sizeof(lib), "cuda fp16");
	} else {
		cpu_gemm_caps caps;
		char ob[24];

		cpu_model(model, sizeof(model));
		cpu_gemm_caps_get(&caps);
		key_part(ob, sizeof(ob), openblas_get_corename());
		snprintf(lib, sizeof(lib), "ob %s dnnl %s %.16s t%d", ob,
			 caps.version, caps.isa, threads);
	}
	/* inih reads lines of 200: "<hash>.key = " and 170 of key */
	if (n > 171)
		n = 171;
	if (snprintf(key, n, "%s|%s|%s|%s|%s d%" PRId64 " k%" PRId64 " %s%s",
		     dev->kind == XJ_BACKEND_CUDA ? "cuda" : "cpu", host, model,
		     lib, metric_name(job->metric), job->d,
		     cmd == XJ_CMD_TOPK ? pow2_at_least(job->k) : 0,
		     cmd == XJ_CMD_TOPK ? "topk" : "range",
		     job->self && job->same_rows ? " self" : "") >= (int)n)
		key[n - 1] = 0;   /* cut: still one key per shape */
}

static int sample_read(const h5in_info *info, int64_t rows, int64_t d,
		       float **out, xj_status *st)
{
	h5in *h;

	*out = malloc(sizeof(float) * (size_t)(rows * d + 1));
	if (!*out)
		return xj_fail(st, XJ_EXIT_RESOURCE, "calibration: out of "
			       "memory for %" PRId64 " rows", rows);
	if (h5in_open(info, &h, st))
		return st->code;
	h5in_read(h, 0, rows, *out, st);
	h5in_close(h);
	return st->code;
}

typedef calib_shot shot;

static shot shot_now(const xj_backend *be)
{
	double dev = 0;

	for (int i = 0; i < be->nktime; i++)
		if (strcmp(be->ktime[i].name, "prep") &&
		    strcmp(be->ktime[i].name, "upload"))
			dev += be->ktime[i].ms * 1e-3;
	return (shot){ MPI_Wtime(), be->rescore_seconds, be->rows_seconds,
		       be->rescored_pairs, dev };
}

/* What the backend did since a (shot_now), into *out when out is set. */
static void shot_since(shot *out, const xj_backend *be, shot a)
{
	shot z = shot_now(be);

	if (out)
		*out = (shot){ z.t - a.t, z.rescore_s - a.rescore_s,
			       z.rows_s - a.rows_s, z.rescored - a.rescored,
			       z.dev - a.dev };
}

/*
 * One run of the job's kind: query rows [0, nq) against base rows [0,
 * nb) of the sample, passed in `chunks` equal parts as the driver passes
 * base chunks. With p set, p[0] is the query rows' begin, p[1 + i] the
 * i-th part's add and p[chunks + 1] the end (a range join's take too);
 * the run stops after the first part, *stopped set, when the begin and
 * that part took more than limit seconds.
 */
static int sample_run(xj_backend *be, const sample *s, int64_t nq,
		      int64_t nb, int chunks, const xj_job *job,
		      xj_command cmd, shot *p, double limit, int *stopped,
		      xj_status *st)
{
	xj_rows q = { s->q, nq, job->d, 0, 0 };
	int topk = cmd == XJ_CMD_TOPK;
	int64_t total = 0, *count = NULL, *idx = NULL;
	float *key = NULL;
	shot a = shot_now(be);

	if (topk ? be->topk_begin(be, &q, st) : be->range_begin(be, &q, st))
		return st->code;
	shot_since(p, be, a);
	for (int i = 0; i < chunks; i++) {
		int64_t j0 = nb * i / chunks, j1 = nb * (i + 1) / chunks;
		xj_rows b = { s->b + j0 * job->d, j1 - j0, job->d, j0, 0 };

		a = shot_now(be);
		if (topk ? be->topk_add(be, &b, st) : be->range_add(be, &b, st))
			return st->code;
		shot_since(p ? &p[1 + i] : NULL, be, a);
		if (p && i == 0 && p[0].t + p[1].t > limit) {
			*stopped = 1;
			return XJ_OK;   /* the backend is released unended */
		}
	}
	a = shot_now(be);
	if (topk) {
		key = malloc(sizeof(float) * (size_t)(nq * job->k + 1));
		idx = malloc(sizeof(int64_t) * (size_t)(nq * job->k + 1));
		if (key && idx)
			be->topk_end(be, key, idx, st);
	} else if ((count = malloc(sizeof(int64_t) * (size_t)(nq + 1))) &&
		   be->range_end(be, count, st) == XJ_OK) {
		for (int64_t i = 0; i < nq; i++)
			total += count[i];
		key = malloc(sizeof(float) * (size_t)(total + 1));
		idx = malloc(sizeof(int64_t) * (size_t)(total + 1));
		if (key && idx)
			be->range_take(be, idx, key, st);
	}
	if (!st->code && (!key || !idx))
		xj_fail(st, XJ_EXIT_RESOURCE, "calibration: out of memory");
	shot_since(p ? &p[chunks + 1] : NULL, be, a);
	free(count);
	free(key);
	free(idx);
	return st->code;
}

/* Best of reps timed runs of one shape. */
static shot shape_time(xj_backend *be, const sample *s, int64_t nq,
		       int64_t nb, const xj_job *job, xj_command cmd, int reps,
		       xj_status *st)
{
	shot best = { INFINITY, 0, 0, 0, 0 };

	for (int rep = 0; rep < reps && !st->code; rep++) {
		shot a = shot_now(be), t;

		if (sample_run(be, s, nq, nb, 1, job, cmd, NULL, INFINITY, NULL,
			       st))
			break;
		shot_since(&t, be, a);
		if (t.t < best.t)
			best = t;
	}
	return best;
}

/*
 * The candidates' models: a top-k's candidates first, where the backend
 * times them (the CPU's top-k): a rescored pair costs r seconds (its
 * pruning, rescoring and merging), and a query row rescores R(nb) = u +
 * v log2(nb / 2^20) pairs, v the growth from b to 2b base rows (a
 * top-k's candidates grow with the log of the rows seen, its bound's
 * margin aside). A small sample rescores a far larger share of its pairs
 * than the job will (at d = 768 int8 rescored 83 pairs a query of 1,024
 * base rows, 327 of 100,000), so this part must not be read as per pair:
 * it comes off the runs' times, and a gains r u, e = r v.
 *
 * On a CPU (measure_parts) one run of q query rows against the sample's
 * 2b base rows in two parts, as the driver passes base chunks, gives the
 * rest: c from the second part, whose gates the first part tightened
 * (its seconds less its rescoring and its rows' preparation, which the
 * backend times), b from that preparation, a from the query rows' begin
 * and end. A part that starts from no gates pushes several times the
 * candidates a pair the job does: the model that read one whole run as
 * per pair (until 2026-11-27, seventh session, with small shapes for the
 * per-row costs) put the pairs' part of a d = 768 int8 job at 2.9 to 4.7
 * s where the job's took 2.15, and predicted 3.4 to 6.2 s for a job of
 * 2.9 to 3.2 (docs/performance.md). Best of CALIB_REPS runs, part by
 * part: a process's first run took 1.7 to 2.8 times its second (int8's
 * first part at d = 768 and 128).
 *
 * On a GPU (measure_shapes), where uploads and launches weigh too much
 * in small runs, three shapes of the large size: S1 = (q, b) (best of
 * three runs, the others of two), D1 = T(2q, b) - T1 = a q + c q b and
 * D2 = T(q, 2b) - T1 = b b + c q b. c is the device time of the pairs'
 * kernels (events: the GEMMs and the selection, summed over their
 * streams) that the second b base rows added, K(q, 2b) - K(q, b): passes
 * whose rows have their gates, as most of a job's are. Read from wall
 * times instead, as c q b = D1 + D2 - T1 (until 2026-11-27, eighth
 * session), c was a difference of runs of 10 to 20 ms whose fixed costs
 * and base rows' copies weigh as much as their pairs: on an H100, 1M x 1M
 * x 128, auto chose tf32 (5.94 s) twice where fp16 ran 4.32 and bf16
 * 5.57. Summed over streams that overlap, c is above the job's wall time
 * per pair (on that H100 by 1.36 to 1.52 times, alike within 12% for
 * every precision): the predictions rank the candidates, and overstate the
 * job. Without the events (XJ_CUDA_TIMING=0) c is read from the wall
 * times. Each term is kept >= 0.
 *
 * A candidate whose first run (the query rows and the first part on a
 * CPU) takes CALIB_SLOWER times *best, the fastest so far, stops there
 * (cd->slower). On the 2-core VM fp32's first parts took 1.47 to 1.65
 * times the fastest's at k = 10 (d = 128 and 768) where its jobs took 2.0
 * to 2.8 times: a candidate of wider bounds pushes more in that part, so
 * the ratio understates the job's. *best is lowered by each full
 * measurement.
 */
static void measure_parts(cand *cd, xj_backend *be, const sample *s,
			  const xj_job *job, xj_command cmd, double *best,
			  xj_status *st)
{
	int64_t q = s->q_rows, b = s->b_rows;
	double qb = (double)q * b, r, u, v, pairs = 0, secs = 0;
	shot p[4], m[4];

	for (int rep = 0; rep < CALIB_REPS; rep++) {
		if (sample_run(be, s, q, 2 * b, 2, job, cmd, p, rep ? INFINITY :
			       CALIB_SLOWER * *best, &cd->slower, st) ||
		    cd->slower)
			return;
		for (int i = 0; i < 4; i++)
			if (rep == 0 || p[i].t < m[i].t)
				m[i] = p[i];
	}
	for (int i = 1; i < 4; i++) {
		pairs += m[i].rescored;
		secs += m[i].rescore_s;
	}
	r = pairs > 0 ? secs / pairs : 0;
	cd->b = m[2].rows_s / (double)b;
	if (cmd == XJ_CMD_TOPK) {
		v = m[2].rescored / (double)q;     /* R(2b) - R(b) */
		u = pairs / (double)q + v * (20 - log2(2.0 * (double)b));
		cd->c = fmax(m[2].t - m[2].rescore_s - m[2].rows_s, 0) / qb;
		cd->a = (m[0].t + m[3].t) / (double)q + r * fmax(u, 0);
		cd->e = r * v;
	} else {
		/* a range join's candidates and pairs grow with the pairs:
		 * the second part's and half the end's are in c */
		cd->c = (fmax(m[2].t - m[2].rows_s, 0) + m[3].t / 2) / qb;
		cd->a = m[0].t / (double)q;
		cd->e = 0;
	}
	cd->measured = 1;
	*best = fmin(*best, m[0].t + m[1].t);
}

static void measure_shapes(cand *cd, xj_backend *be, const sample *s,
			   const xj_job *job, xj_command cmd, double *best,
			   xj_status *st)
{
	int64_t q = s->q_rows, b = s->b_rows;
	shot s1, more, sa2, sb2;
	double m[4];

	s1 = shape_time(be, s, q, b, job, cmd, 1, st);
	if (!st->code && s1.t > CALIB_SLOWER * *best) {
		cd->slower = 1;
		return;
	}
	more = shape_time(be, s, q, b, job, cmd, 2, st);
	s1 = more.t < s1.t ? more : s1;
	sa2 = shape_time(be, s, 2 * q, b, job, cmd, 2, st);
	sb2 = shape_time(be, s, q, 2 * b, job, cmd, 2, st);
	if (st->code)
		return;
	calib_fit_shapes(&s1, &sa2, &sb2, q, b, be->nktime > 0, m);
	cd->a = m[0];
	cd->b = m[1];
	cd->c = m[2];
	cd->e = m[3];
	cd->measured = 1;
	*best = fmin(*best, s1.t);
}

void calib_fit_shapes(const calib_shot *s1, const calib_shot *sa2,
		      const calib_shot *sb2, int64_t q, int64_t b, int timed,
		      double abce[4])
{
	double qb = (double)q * b, D1, D2, T1, C, r, v, u, pairs, secs;

	pairs = s1->rescored + sa2->rescored + sb2->rescored;
	secs = s1->rescore_s + sa2->rescore_s + sb2->rescore_s;
	r = pairs > 0 ? secs / pairs : 0;
	T1 = s1->t - s1->rescore_s;
	D1 = (sa2->t - sa2->rescore_s) - T1;
	D2 = (sb2->t - sb2->rescore_s) - T1;
	if (timed && sb2->dev > s1->dev && s1->dev > 0)
		C = (sb2->dev - s1->dev) / qb;
	else
		C = fmax((D1 + D2 - T1) / qb, 0.25 * T1 / qb);  /* most of a run */
	abce[2] = C;
	abce[0] = fmax(D1 - C * qb, 0) / (double)q;
	abce[1] = fmax(D2 - C * qb, 0) / (double)b;
	v = fmax(sb2->rescored - s1->rescored, 0) / (double)q;
	u = s1->rescored / (double)q + v * (20 - log2((double)b));
	abce[0] += r * fmax(u, 0);
	abce[3] = r * v;
}

/* The candidate's model (after a warm-up run: oneDNN's and cuBLAS's first
 * calls choose and build their kernels; on a CPU of a sixteenth of the
 * base rows: 256 at d = 768, a narrower sub-tile than the runs' 512, yet
 * an eighth measured no better, 0.41-0.48 s against 0.48-0.70 in four
 * alternated pairs). */
static int measure(cand *cd, const sample *s, xj_job *job, const xj_comm *c,
		   const xj_device_choice *dev, xj_command cmd, int threads,
		   double *best, xj_status *st)
{
	int gpu = dev->kind == XJ_BACKEND_CUDA;
	int64_t b = s->b_rows, warm = gpu || b < 32 ? b : b / 16;
	xj_backend_cfg cfg;
	xj_backend *be = NULL;

	device_backend_config(job, NULL, threads, &cfg);
	cfg.precision = cd->p;
	cfg.fp32_dnnl = cd->dnnl;
	cfg.max_query_rows = s->nq;
	cfg.max_base_rows = gpu ? s->nb : b;   /* a CPU's parts: b rows */
	if (device_backend_create(job, c, dev, &cfg, &be, st))
		return st->code;
	if (sample_run(be, s, s->q_rows, warm, 1, job, cmd, NULL, INFINITY,
		       NULL, st) == 0) {
		if (gpu)
			measure_shapes(cd, be, s, job, cmd, best, st);
		else
			measure_parts(cd, be, s, job, cmd, best, st);
	}
	be->release(be);
	return st->code;
}

/* The model's seconds for the job (n query rows, m base rows); no less
 * than its pairs' part (the log term's growth, read backwards far below
 * the sample, could take more than the rescoring). */
static double predict(const cand *cd, const xj_job *job)
{
	double n = (double)job->n, m = (double)job->m;
	double pairs = cd->b * m + cd->c * n * m;

	return fmax(pairs + cd->a * n + cd->e * n * (log2(m) - 20), pairs);
}

/*
 * The sample's shape: runs of q query and b base rows (the first of each
 * input, each side at most half the job's) and their doubles (measure).
 * On a CPU q = 512 a thread, a whole query tile for each (cpu_tile_rows:
 * smaller tiles run the GEMM at another rate than the job's), and b =
 * 8,192 x 128 / d, at least 4,096: the second part of a run (b rows
 * after b, measure_parts) pushes candidates at about the rate a job of
 * 100,000 base rows does. When one whole run was read as per pair
 * (until 2026-11-27, seventh session), the sample had to be larger: b =
 * 4,096 at d = 128 chose bf16 where int8 ran 0.68 s against 0.87, and
 * 16,384 rows were needed (measuring 0.5-0.9 s at d = 128, 1.0-1.3 at
 * d = 768, int8 chosen in 2 to 6 of 6 there). For k > 64 q shrinks by
 * 64 / k (at least 16): a run's cost is then its queries' first k
 * candidates (at k = 1,000 the measuring took 8.4 s for a 6 s job before,
 * 0.39 after). On
 * a GPU q = 16,384 and b = 65,536 x 128 / d (at least 1,024): the pairs'
 * part of a run must outweigh its uploads and launches (with q = 2,048,
 * until 2026-11-27, a run's pairs took 1 to 2 ms of about 20 on an H100,
 * and auto chose fp32 for jobs bf16 ran 1.85x faster).
 */
static void sample_shape(const xj_job *job, int gpu, int threads,
			 sample *s)
{
	int64_t d = job->d > 16 ? job->d : 16;
	int64_t q = gpu ? 16384 : 512 * (int64_t)(threads > 0 ? threads : 1);
	int64_t b = gpu ? 65536 * 128 / d : 8192 * 128 / d;

	if (b < (gpu ? 1024 : 4096))
		b = gpu ? 1024 : 4096;
	if (!gpu && job->k > 64)   /* a run's cost: its queries' first k */
		q = q * 64 / job->k > 16 ? q * 64 / job->k : 16;
	if (q > job->n / 2)
		q = job->n / 2;
	if (b > job->m / 2)
		b = job->m / 2;
	q = q > 1 ? q : 1;
	b = b > 1 ? b : 1;
	s->q_rows = q;
	s->b_rows = b;
	s->nq = gpu ? 2 * q : q;
	s->nb = 2 * b;
}

/* "name:a/b/c/e ..." of each measured candidate, for the cache: three
 * digits a number, or two where a line of three would not fit the 200
 * characters inih reads (four CPU candidates of four numbers each come
 * close). */
#define MODELS_MAX 160
static void models_text(const cand *cd, int n, char *out, size_t len)
{
	for (int digits = 3; digits >= 2; digits--) {
		size_t o = 0;

		out[0] = 0;
		for (int i = 0; i < n && o < len; i++)
			if (cd[i].measured)
				o += (size_t)snprintf(out + o, len - o,
						      "%s%s:%.*g/%.*g/%.*g/%.*g",
						      o ? " " : "", cd[i].name,
						      digits, cd[i].a, digits,
						      cd[i].b, digits, cd[i].c,
						      digits, cd[i].e);
		if (o <= MODELS_MAX)
			return;
	}
}

/* The cache's models into cd (by name); 0 when every word is one of
 * cd's and each has its four numbers. */
static int models_parse(const char *text, cand *cd, int n)
{
	char buf[192], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", text);
	for (char *w = strtok_r(buf, " ", &save); w;
	     w = strtok_r(NULL, " ", &save)) {
		char *colon = strchr(w, ':');
		int i;

		if (!colon)
			return -1;
		*colon = 0;
		for (i = 0; i < n && strcmp(cd[i].name, w); i++)
			;
		if (i == n || sscanf(colon + 1, "%lg/%lg/%lg/%lg", &cd[i].a,
				     &cd[i].b, &cd[i].c, &cd[i].e) != 4)
			return -1;
		cd[i].measured = 1;
	}
	return 0;
}

/* The fastest measured candidate for the job, and the predictions in
 * words ("int8 3.04 s, bf16 4.07; over 1.5x in the sample: fp32-dnnl,
 * fp32"). -1 when none was measured. */
static int fastest(const cand *cd, int n, const xj_job *job, char *words,
		   size_t len)
{
	int best = -1;
	size_t o = 0;

	words[0] = 0;
	for (int i = 0; i < n; i++) {
		if (!cd[i].measured)
			continue;
		if (o < len)
			o += (size_t)snprintf(words + o, len - o, "%s%s %.3g%s",
					      o ? ", " : "", cd[i].name,
					      predict(&cd[i], job),
					      o ? "" : " s");
		if (best < 0 || predict(&cd[i], job) < predict(&cd[best], job))
			best = i;
	}
	for (int i = 0, first = 1; i < n; i++) {
		if (!cd[i].slower || o >= len)
			continue;
		if (first)
			o += (size_t)snprintf(words + o, len - o,
					      "; over %.1fx in the sample: %s",
					      CALIB_SLOWER, cd[i].name);
		else
			o += (size_t)snprintf(words + o, len - o, ", %s",
					      cd[i].name);
		first = 0;
	}
	return best;
}

/* The cached model's choice for this job's key into *choice and why: 1;
 * 0 when there is none (e, path, cd and n are the caller's, for the
 * measurement that follows); a bad cache says so once when warn is set
 * (the measurement that follows rewrites it). */
static int cached(xj_job *job, const xj_comm *c, const xj_device_choice *dev,
		  xj_command cmd, int threads, int warn, calib_entry *e,
		  char *path, cand *cd, int n, cand *choice, char *why,
		  size_t wn)
{
	char msg[200], words[160];
	int got, best;

	memset(e, 0, sizeof(*e));
	cache_key(job, c, dev, cmd, threads, e->key, sizeof(e->key));
	calib_cache_path(path, XJ_PATH_MAX);
	got = path[0] ? calib_cache_get(path, e->key, e, msg, sizeof(msg)) : 0;
	if (got < 0 && warn)
		fprintf(stderr, "xjoin: warning: precision cache %s ignored (%s); "
			"measuring again\n", path, msg);
	if (got > 0 && models_parse(e->times, cd, n) == 0 &&
	    (best = fastest(cd, n, job, words, sizeof(words))) >= 0) {
		*choice = cd[best];
		if (snprintf(why, wn, "auto: %s, the fastest for this job by "
			     "the cached model (%s; %.100s)", cd[best].name,
			     words, path) >= (int)wn)
			why[wn - 1] = 0;
		return 1;
	}
	if (got > 0 && warn)
		fprintf(stderr, "xjoin: warning: precision cache %s holds "
			"candidates this build or device cannot run; measuring "
			"again\n", path);
	return 0;
}

/* A job under the floor: the cached model of its shape when there is
 * one, else bf16 on a CPU that multiplies bf16 natively (GloVe's 1,000 x
 * 100,000 x 100 cosine top-100, 20 GFLOP: 0.151 s of compute in bf16
 * against 0.184 in fp32 on the 2-core VM), else fp32; never measured. */
static void decide_small(xj_job *job, const xj_comm *c,
			 const xj_device_choice *dev, xj_command cmd,
			 int threads, double floor, cand *choice, char *why,
			 size_t wn)
{
	cand cd[CALIB_MAX_CANDS];
	int n = ncands(job, dev, cd);
	char path[XJ_PATH_MAX];
	calib_entry e;

	if (cached(job, c, dev, cmd, threads, 0, &e, path, cd, n, choice, why,
		   wn))
		return;
	*choice = FP32;
	for (int i = 0; dev->kind != XJ_BACKEND_CUDA && i < n; i++)
		if (cd[i].p == XJ_PREC_BF16)
			*choice = cd[i];
	snprintf(why, wn, "auto: %s (a job under %.0f GFLOP is not measured%s)",
		 choice->name, floor * 1e-9, choice->p == XJ_PREC_BF16 ?
		 "; this CPU multiplies bf16 natively" : "");
}

/* Rank 0: the choice, from the cache or measured. */
static void decide(xj_job *job, const xj_comm *c, const xj_device_choice *dev,
		   const h5in_info *qi, const h5in_info *bi, xj_command cmd,
		   int threads, cand *choice, char *why, size_t wn)
{
	cand cd[CALIB_MAX_CANDS];
	int n = ncands(job, dev, cd), best;
	char path[XJ_PATH_MAX], msg[200], words[160];
	double fastest_s1 = INFINITY, t0;
	calib_entry e;
	sample s = { 0 };
	xj_status st;

	if (cached(job, c, dev, cmd, threads, 1, &e, path, cd, n, choice, why,
		   wn))
		return;
	for (int i = 0; i < n; i++)
		cd[i].measured = 0;
	sample_shape(job, dev->kind == XJ_BACKEND_CUDA, threads, &s);
	t0 = MPI_Wtime();
	xj_ok(&st);
	if (sample_read(qi, s.nq, job->d, &s.q, &st) ||
	    sample_read(bi, s.nb, job->d, &s.b, &st))
		goto fail;
	for (int i = 0; i < n; i++) {
		xj_ok(&st);
		if (measure(&cd[i], &s, job, c, dev, cmd, threads, &fastest_s1,
			    &st) == 0)
			continue;
		if (st.code == XJ_EXIT_INPUT)
			goto fail;   /* the run's validation says */
		fprintf(stderr, "xjoin: warning: auto: %s not measured (%s)\n",
			cd[i].name, st.msg);
	}
	best = fastest(cd, n, job, words, sizeof(words));
	if (best < 0)
		goto fail;
	*choice = cd[best];
	snprintf(e.choice, sizeof(e.choice), "%s", cd[best].name);
	models_text(cd, n, e.times, sizeof(e.times));
	if (snprintf(why, wn, "auto: %s, measured the fastest for this job "
		     "in %.2f s (predicted %s)", cd[best].name,
		     MPI_Wtime() - t0, words) >= (int)wn)
		why[wn - 1] = 0;
	if (!path[0])
		fprintf(stderr, "xjoin: warning: no place for the precision "
			"cache (set HOME or XJOIN_CACHE_DIR); measured each "
			"run\n");
	else if (calib_cache_put(path, &e, msg, sizeof(msg)))
		fprintf(stderr, "xjoin: warning: precision cache not saved "
			"(%s); measured each run\n", msg);
	free(s.q);
	free(s.b);
	return;
fail:
	free(s.q);
	free(s.b);
	*choice = FP32;
	snprintf(why, wn, "auto: fp32 (not measured: %.120s)", st.code ?
		 st.msg : "no candidate ran");
}

int calib_precision(xj_job *job, const xj_comm *c,
		    const xj_device_choice *dev, const h5in_info *qinfo,
		    const h5in_info *binfo, int threads, xj_status *st)
{
	xj_command cmd = job->command == XJ_CMD_PLAN ? job->plan_of :
			 job->command;
	int gpu = dev->kind == XJ_BACKEND_CUDA;
	double flops = 2.0 * (double)job->n * (double)job->m * (double)job->d;
	cand choice = FP32;
	const char *floor_env = getenv("XJOIN_CALIB_MIN_GFLOP");
	double floor = gpu ? CALIB_MIN_FLOPS_GPU : CALIB_MIN_FLOPS_CPU;
	int out[2];

	(void)st;
	if ((cmd != XJ_CMD_TOPK && !(cmd == XJ_CMD_RANGE && !gpu)) ||
	    job->n == 0 || job->m == 0)
		return XJ_OK;     /* device_select's resolution stands */
	if (floor_env && *floor_env)
		floor = atof(floor_env) * 1e9;
	if (c->rank == 0) {
		if (flops < floor)
			decide_small(job, c, dev, cmd, threads, floor, &choice,
				     job->precision_why,
				     sizeof(job->precision_why));
		else
			decide(job, c, dev, qinfo, binfo, cmd, threads, &choice,
			       job->precision_why,
			       sizeof(job->precision_why));
		fflush(stderr);
	}
	out[0] = (int)choice.p;
	out[1] = choice.dnnl;
	MPI_CHECK(MPI_Bcast(out, 2, MPI_INT, 0, c->world));
	MPI_CHECK(MPI_Bcast(job->precision_why, sizeof(job->precision_why),
			    MPI_CHAR, 0, c->world));
	job->precision = (xj_precision)out[0];
	job->fp32_dnnl = out[1];
	return XJ_OK;
}
