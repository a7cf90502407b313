/*
 * test_calib.c: the cache of --precision auto's measurements
 * (app/plan/calib_cache.c): where it lives, entries written and read
 * back, every cut of a valid file and foreign, binary and tampered files
 * rejected (never read as another answer), an unwritable place reported,
 * and concurrent writers that always leave a whole file.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"
#include "app/plan/calib.h"

static char dir[256];

static void path_of(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", dir, name);
}

static calib_entry entry(const char *key, const char *choice)
{
	calib_entry e;

	memset(&e, 0, sizeof(e));
	snprintf(e.key, sizeof(e.key), "%s", key);
	snprintf(e.choice, sizeof(e.choice), "%s", choice);
	snprintf(e.times, sizeof(e.times), "fp32:2e-06/0/1.67e-09/0 bf16:0.0100 %s:0.0090",
		 choice);
	return e;
}

static void write_text(const char *path, const char *text, size_t n)
{
	FILE *f = fopen(path, "w");

	CU_ASSERT_FATAL(f != NULL);
	fwrite(text, 1, n, f);
	fclose(f);
}

static char *read_text(const char *path, size_t *n)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 65536);

	*n = f ? fread(buf, 1, 65535, f) : 0;
	if (f)
		fclose(f);
	return buf;
}

static void test_path(void)
{
	char p[512];

	setenv("XJOIN_CACHE_DIR", "/x/y", 1);
	calib_cache_path(p, sizeof(p));
	CU_ASSERT_STRING_EQUAL(p, "/x/y/precision.ini");
	unsetenv("XJOIN_CACHE_DIR");
	setenv("XDG_CACHE_HOME", "/c", 1);
	calib_cache_path(p, sizeof(p));
	CU_ASSERT_STRING_EQUAL(p, "/c/xjoin/precision.ini");
	unsetenv("XDG_CACHE_HOME");
	setenv("HOME", "/h", 1);
	calib_cache_path(p, sizeof(p));
	CU_ASSERT_STRING_EQUAL(p, "/h/.cache/xjoin/precision.ini");
	unsetenv("HOME");
	calib_cache_path(p, sizeof(p));
	CU_ASSERT_STRING_EQUAL(p, "");
}

static void test_roundtrip(void)
{
	char p[512], why[200];
	calib_entry a = entry("cpu|host|AMD EPYC|ob Haswell|l2 d128 k16 topk",
			      "int8"), b = entry("cuda|host|H100|l2 d96 k8 topk",
						 "tf32"), got;

	path_of(p, sizeof(p), "rt/sub/precision.ini");   /* folders made */
	CU_ASSERT_EQUAL(calib_cache_get(p, a.key, &got, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(calib_cache_put(p, &a, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(calib_cache_put(p, &b, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(calib_cache_get(p, a.key, &got, why, sizeof(why)), 1);
	CU_ASSERT_STRING_EQUAL(got.choice, "int8");
	CU_ASSERT_STRING_EQUAL(got.times, a.times);
	CU_ASSERT_EQUAL(calib_cache_get(p, b.key, &got, why, sizeof(why)), 1);
	CU_ASSERT_STRING_EQUAL(got.choice, "tf32");
	/* a new measurement of a replaces it; b stays */
	a = entry(a.key, "bf16");
	CU_ASSERT_EQUAL(calib_cache_put(p, &a, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(calib_cache_get(p, a.key, &got, why, sizeof(why)), 1);
	CU_ASSERT_STRING_EQUAL(got.choice, "bf16");
	CU_ASSERT_EQUAL(calib_cache_get(p, b.key, &got, why, sizeof(why)), 1);
	CU_ASSERT_EQUAL(calib_cache_get(p, "another key", &got, why,
					sizeof(why)), 0);
}

/* Every cut of a valid file is rejected, or (cut inside its last line
 * break) reads the whole answer: never another one. */
static void test_cuts(void)
{
	char p[512], q[512], why[200];
	calib_entry a = entry("cpu|h|m|l|ip d8 k1 topk", "fp32-dnnl"), got;
	size_t n, bad = 0, whole = 0;
	char *text;

	path_of(p, sizeof(p), "cut-src.ini");
	path_of(q, sizeof(q), "cut.ini");
	calib_entry k2 = entry("k2", "bf16");

	CU_ASSERT_EQUAL_FATAL(calib_cache_put(p, &k2, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL_FATAL(calib_cache_put(p, &a, why, sizeof(why)), 0);
	text = read_text(p, &n);
	for (size_t len = 0; len < n; len++) {
		int rc;

		write_text(q, text, len);
		memset(&got, 0, sizeof(got));
		rc = calib_cache_get(q, a.key, &got, why, sizeof(why));
		if (rc == 1 && !strcmp(got.choice, a.choice) &&
		    !strcmp(got.times, a.times) && len + 1 >= n)
			whole++;
		else if (rc != -1)
			bad++;
	}
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(whole, 1);
	free(text);
}

static void test_foreign(void)
{
	static const char *const files[] = {
		"[job]\nk = 10\nmetric = l2\n",
		"format = 2\n",
		"[xjoin-precision]\nformat = 1\n[end]\nentries = 0\n",	/* older */
		"[xjoin-precision]\nformat = 2\n[measured]\n"
		"0123456789abcdef = bf16 fp32:0.1 bf16:0.05\n"
		"0123456789abcdef.key = not this key\n[end]\nentries = 1\n",
		"[xjoin-precision]\nformat = 2\n[measured]\n"
		"0123456789abcdef = int8 fp32:0.1 bf16:0.05\n[end]\n"
		"entries = 1\n",
		"[xjoin-precision]\nformat = 2\n[measured]\n"
		"0123456789abcdef = bf16 fp32:-1 bf16:0.05\n[end]\n"
		"entries = 1\n",
		"[xjoin-precision]\nformat = 2\n[measured]\n"
		"0123456789abcdef = bf16 bf16:1/2/3/4/5\n[end]\n"
		"entries = 1\n",
		"[xjoin-precision]\nformat = 2\n[end]\nentries = 3\n",
		"\x7f" "ELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00",
	};
	char p[512], why[200];
	calib_entry got;

	path_of(p, sizeof(p), "foreign.ini");
	for (size_t i = 0; i < UNIT_COUNT(files); i++) {
		write_text(p, files[i], strlen(files[i]));
		why[0] = 0;
		CU_ASSERT_EQUAL(calib_cache_get(p, "k", &got, why, sizeof(why)),
				-1);
		CU_ASSERT(why[0] != 0);
	}
	/* a put over a foreign file writes a valid one */
	got = entry("k", "bf16");
	CU_ASSERT_EQUAL(calib_cache_put(p, &got, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(calib_cache_get(p, "k", &got, why, sizeof(why)), 1);
}

static void test_unwritable(void)
{
	char p[600], f[512], why[200] = "";
	calib_entry a = entry("k", "bf16");

	path_of(f, sizeof(f), "a-file");
	write_text(f, "x", 1);
	snprintf(p, sizeof(p), "%s/precision.ini", f);   /* under a file */
	CU_ASSERT_EQUAL(calib_cache_put(p, &a, why, sizeof(why)), -1);
	CU_ASSERT(why[0] != 0);
}

/* Four processes each write 40 keys while this one reads: every read
 * sees a whole cache, and (the writers taking turns on a local file
 * system) every writer's last key is there at the end. */
static void test_concurrent(void)
{
	char p[512], why[200];
	pid_t kids[4];
	int reads = 0, invalid = 0, found = 0;
	calib_entry got;

	path_of(p, sizeof(p), "conc.ini");
	for (int w = 0; w < 4; w++) {
		kids[w] = fork();
		CU_ASSERT_FATAL(kids[w] >= 0);
		if (kids[w] == 0) {
			for (int i = 0; i < 40; i++) {
				char key[64];
				calib_entry e;

				snprintf(key, sizeof(key), "writer %d key %d", w,
					 i);
				e = entry(key, "bf16");
				if (calib_cache_put(p, &e, why, sizeof(why)))
					_exit(1);
			}
			_exit(0);
		}
	}
	for (int alive = 4; alive > 0;) {
		int status;

		reads++;
		if (calib_cache_get(p, "writer 0 key 0", &got, why,
				    sizeof(why)) < 0)
			invalid++;
		while (alive > 0 && waitpid(-1, &status, WNOHANG) > 0) {
			CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
			alive--;
		}
	}
	CU_ASSERT_EQUAL(invalid, 0);
	for (int w = 0; w < 4; w++) {
		char key[64];

		snprintf(key, sizeof(key), "writer %d key 39", w);
		found += calib_cache_get(p, key, &got, why, sizeof(why)) == 1;
	}
	CU_ASSERT(found == 4);
	printf("\n  %d reads, %d writers' last keys kept ", reads, found);
}

/* ---- a GPU candidate's model from three shapes ------------------------ */

/* A GPU candidate: wall seconds per pair cw and device seconds per pair
 * cd (the GEMMs and selection summed over streams) as the H100 ran fp16
 * and tf32 (eighth session's record, 1M x 1M x 128); each query row's
 * first pass kd more on the device, and per run a fixed cost f, per
 * query row a and per base row b on the host (uploads, copies; fp16 also
 * scans its rows for their largest value): sizes of that order, not
 * measured. */
typedef struct gpu_cand {
	double cw, cd, kd, f, a, b;
} gpu_cand;

/* The best run of shape (nq, nb), its wall time off by noise. */
static calib_shot gpu_shot(const gpu_cand *g, double nq, double nb,
			   double noise)
{
	calib_shot s = { 0, 0, 0, 0, 0 };

	s.t = g->f + g->a * nq + g->b * nb + g->cw * nq * nb + noise;
	s.dev = g->cd * nq * nb + g->kd * nq;
	s.rescored = 40 * nq + 2 * nq * log2(nb);
	return s;
}

static double gpu_predict(const double m[4], double n, double mm)
{
	return m[0] * n + m[1] * mm + m[2] * n * mm +
	       m[3] * n * (log2(mm) - 20);
}

/* c is the device time the second b base rows added, exactly, whatever
 * the wall times' noise; the faster candidate at 1M x 1M (fp16 there, by
 * its device time) is predicted faster where the wall-time fit, with 1
 * ms of noise on 10-20 ms runs, put it behind; without the events (or
 * with events that did not move) the wall-time fit is kept. */
static void test_fit_shapes(void)
{
	const int64_t q = 16384, b = 65536;
	const double qb = (double)q * b, n = 1e6;
	gpu_cand fp16 = { 4.32e-12, 5.86e-12, 2e-7, 8e-3, 2e-7, 1.2e-7 };
	gpu_cand tf32 = { 5.94e-12, 8.73e-12, 2e-7, 5e-3, 1e-7, 6e-8 };
	calib_shot h[3], t[3];
	double mh[4], mt[4], wh[4], wt[4];

	/* noise against fp16: its (q, b) run 1 ms fast, its others slow */
	h[0] = gpu_shot(&fp16, q, b, -1e-3);
	h[1] = gpu_shot(&fp16, 2 * q, b, 1e-3);
	h[2] = gpu_shot(&fp16, q, 2 * b, 1e-3);
	t[0] = gpu_shot(&tf32, q, b, 0);
	t[1] = gpu_shot(&tf32, 2 * q, b, 0);
	t[2] = gpu_shot(&tf32, q, 2 * b, 0);
	calib_fit_shapes(&h[0], &h[1], &h[2], q, b, 1, mh);
	calib_fit_shapes(&t[0], &t[1], &t[2], q, b, 1, mt);
	CU_ASSERT_DOUBLE_EQUAL(mh[2], fp16.cd, 1e-6 * fp16.cd);
	CU_ASSERT_DOUBLE_EQUAL(mt[2], tf32.cd, 1e-6 * tf32.cd);
	for (int i = 0; i < 4; i++)
		CU_ASSERT(mh[i] >= 0 && mt[i] >= 0);
	CU_ASSERT(gpu_predict(mh, n, n) < gpu_predict(mt, n, n));
	/* the job's pairs' device time and its rows' (here 6%) */
	CU_ASSERT(gpu_predict(mh, n, n) >= fp16.cd * n * n &&
		  gpu_predict(mh, n, n) < 1.1 * fp16.cd * n * n);

	/* untimed: the wall-time fit, c q b = D1 + D2 - T1 (or a quarter of
	 * the first run) */
	calib_fit_shapes(&h[0], &h[1], &h[2], q, b, 0, wh);
	calib_fit_shapes(&t[0], &t[1], &t[2], q, b, 0, wt);
	{
		double T1 = h[0].t, D1 = h[1].t - T1, D2 = h[2].t - T1;
		double c = fmax((D1 + D2 - T1) / qb, 0.25 * T1 / qb);

		CU_ASSERT_DOUBLE_EQUAL(wh[2], c, 1e-9 * c);
	}
	CU_ASSERT(gpu_predict(wh, n, n) > gpu_predict(wt, n, n));
	printf("\n  1M x 1M predicted: fp16 %.2f s, tf32 %.2f (device time); from wall times %.2f and %.2f ",
	       gpu_predict(mh, n, n), gpu_predict(mt, n, n),
	       gpu_predict(wh, n, n), gpu_predict(wt, n, n));
	/* events that did not move: the wall-time fit too */
	h[2].dev = h[0].dev;
	calib_fit_shapes(&h[0], &h[1], &h[2], q, b, 1, mh);
	CU_ASSERT_DOUBLE_EQUAL(mh[2], wh[2], 1e-9 * wh[2]);
}

static const unit_test tests[] = {
	{ "where the cache lives", test_path },
	{ "entries written and read back", test_roundtrip },
	{ "every cut of a file rejected", test_cuts },
	{ "foreign and tampered files rejected", test_foreign },
	{ "an unwritable place reported", test_unwritable },
	{ "concurrent writers leave whole files", test_concurrent },
	{ "a GPU candidate's model from its kernels' time", test_fit_shapes },
};

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/xjoin-test-calib-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	int rc = unit_run("calib", tests, UNIT_COUNT(tests));
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		return 1;
	return rc;
}
