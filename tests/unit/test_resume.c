/* test_resume.c: progress spans, input fingerprints and the progress
 * record (app/run/resume.h). */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "../../app/run/resume.h"
#include "testdata.h"
#include "unit.h"

static char tmpdir[] = "/tmp/xj-resume-XXXXXX";

/* A small file's text (the last one read; 4 KiB at most). */
static const char *file_text(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	return buf;
}

/* Rewrite a record's "format = N" line. */
static void set_format(const char *path, int format)
{
	char text[4096], *at;
	FILE *f;

	snprintf(text, sizeof(text), "%s", file_text(path));
	at = strstr(text, "format = ");
	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	at[9] = (char)('0' + format);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
}

/* Spans as "a-b a-b ..." for readable comparisons. */
static const char *spans_text(const xj_spans *sp)
{
	static char buf[512];
	size_t len = 0;

	buf[0] = '\0';
	for (int64_t i = 0; i < sp->n && len < sizeof(buf); i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%lld-%lld",
				i ? " " : "", (long long)sp->s[i][0],
				(long long)sp->s[i][1]);
	return buf;
}

static void test_spans_merge(void)
{
	xj_spans sp = { 0 };
	xj_status st;

	xj_ok(&st);
	CU_ASSERT_EQUAL(spans_add(&sp, 10, 20, &st), XJ_OK);
	CU_ASSERT_EQUAL(spans_add(&sp, 30, 40, &st), XJ_OK);
	CU_ASSERT_EQUAL(spans_add(&sp, 0, 5, &st), XJ_OK);
	CU_ASSERT_STRING_EQUAL(spans_text(&sp), "0-5 10-20 30-40");
	CU_ASSERT_EQUAL(spans_add(&sp, 7, 7, &st), XJ_OK);   /* empty */
	CU_ASSERT_STRING_EQUAL(spans_text(&sp), "0-5 10-20 30-40");
	CU_ASSERT_EQUAL(spans_add(&sp, 20, 30, &st), XJ_OK); /* bridges two */
	CU_ASSERT_STRING_EQUAL(spans_text(&sp), "0-5 10-40");
	CU_ASSERT_EQUAL(spans_add(&sp, 5, 10, &st), XJ_OK);  /* adjacent */
	CU_ASSERT_STRING_EQUAL(spans_text(&sp), "0-40");
	CU_ASSERT_EQUAL(spans_add(&sp, 50, 60, &st), XJ_OK);
	CU_ASSERT_EQUAL(spans_add(&sp, 45, 70, &st), XJ_OK); /* swallows */
	CU_ASSERT_STRING_EQUAL(spans_text(&sp), "0-40 45-70");
	CU_ASSERT_EQUAL(spans_rows(&sp), 65);
	CU_ASSERT_TRUE(spans_covers(&sp, 0, 40));
	CU_ASSERT_TRUE(spans_covers(&sp, 46, 70));
	CU_ASSERT_FALSE(spans_covers(&sp, 39, 46));
	CU_ASSERT_FALSE(spans_covers(&sp, 60, 71));
	CU_ASSERT_TRUE(spans_covers(&sp, 80, 80));
	spans_free(&sp);
	CU_ASSERT_EQUAL(sp.n, 0);
}

/* A row's place in the spans laid end to end; copies are deep. */
static void test_spans_place(void)
{
	xj_spans sp = { 0 }, cp = { 0 };
	xj_status st;

	xj_ok(&st);
	CU_ASSERT_EQUAL(spans_rows_before(&sp, 7), 0);
	CU_ASSERT_EQUAL(spans_add(&sp, 10, 20, &st), XJ_OK);
	CU_ASSERT_EQUAL(spans_add(&sp, 30, 40, &st), XJ_OK);
	CU_ASSERT_EQUAL(spans_rows_before(&sp, 0), 0);
	CU_ASSERT_EQUAL(spans_rows_before(&sp, 10), 0);
	CU_ASSERT_EQUAL(spans_rows_before(&sp, 15), 5);
	CU_ASSERT_EQUAL(spans_rows_before(&sp, 25), 10);
	CU_ASSERT_EQUAL(spans_rows_before(&sp, 30), 10);
	CU_ASSERT_EQUAL(spans_rows_before(&sp, 39), 19);
	CU_ASSERT_EQUAL(spans_rows_before(&sp, 99), 20);
	CU_ASSERT_EQUAL(spans_add(&cp, 1, 2, &st), XJ_OK);   /* replaced */
	CU_ASSERT_EQUAL(spans_copy(&cp, &sp, &st), XJ_OK);
	CU_ASSERT_STRING_EQUAL(spans_text(&cp), "10-20 30-40");
	CU_ASSERT_PTR_NOT_EQUAL(cp.s, sp.s);
	spans_free(&sp);
	CU_ASSERT_STRING_EQUAL(spans_text(&cp), "10-20 30-40");
	CU_ASSERT_EQUAL(spans_copy(&cp, &sp, &st), XJ_OK);   /* empty */
	CU_ASSERT_EQUAL(cp.n, 0);
	spans_free(&cp);
}

/* Random spans in random order end as the union a bitmap computes. */
static void test_spans_random(void)
{
	enum { ROWS = 2000 };
	static char want[ROWS];
	xj_spans sp = { 0 };
	xj_status st;

	xj_ok(&st);
	memset(want, 0, sizeof(want));
	for (int i = 0; i < 300; i++) {
		int64_t a = (int64_t)(rng_next() % ROWS);
		int64_t b = a + (int64_t)(rng_next() % 40);

		if (b > ROWS)
			b = ROWS;
		memset(want + a, 1, (size_t)(b - a));
		CU_ASSERT_EQUAL_FATAL(spans_add(&sp, a, b, &st), XJ_OK);
	}
	for (int64_t i = 0; i < sp.n; i++) {
		CU_ASSERT_TRUE(sp.s[i][0] < sp.s[i][1]);
		if (i)   /* sorted, and apart: adjacent spans merge */
			CU_ASSERT_TRUE(sp.s[i - 1][1] < sp.s[i][0]);
	}
	for (int64_t r = 0; r < ROWS; r++)
		CU_ASSERT_EQUAL(spans_covers(&sp, r, r + 1), want[r]);
	spans_free(&sp);
}

/* The fingerprint is a sum over rows: any split gives the same value, and
 * one changed bit (or a moved row) changes it. */
static void test_hash(void)
{
	int64_t n = 257, d = 33;
	float *x = gauss_rows(n, d, 0.5, 1.0);
	uint64_t whole, parts = 0;

	whole = resume_hash_rows(x, n, d, 1000);
	for (int64_t r = 0; r < n; r += 17) {
		int64_t rows = r + 17 <= n ? 17 : n - r;

		parts += resume_hash_rows(x + r * d, rows, d, 1000 + r);
	}
	CU_ASSERT_EQUAL(whole, parts);
	CU_ASSERT_NOT_EQUAL(whole, resume_hash_rows(x, n, d, 1001));
	x[5 * d + 7] = nextafterf(x[5 * d + 7], INFINITY);
	CU_ASSERT_NOT_EQUAL(whole, resume_hash_rows(x, n, d, 1000));
	x[5 * d + 7] = nextafterf(x[5 * d + 7], -INFINITY);
	CU_ASSERT_EQUAL(whole, resume_hash_rows(x, n, d, 1000));
	x[0] = 0.0f;
	whole = resume_hash_rows(x, 1, d, 0);
	x[0] = -0.0f;
	CU_ASSERT_NOT_EQUAL(whole, resume_hash_rows(x, 1, d, 0));
	/* rows hashed side by side give each row's own value */
	whole = resume_hash_rows(x, n, d, 3);
	parts = 0;
	for (int64_t r = 0; r < n; r++)
		parts += resume_hash_rows(x + r * d, 1, d, 3 + r);
	CU_ASSERT_EQUAL(whole, parts);
	free(x);
}

/* The value itself is part of the progress record's format: a record
 * written by an earlier build must still match its inputs. */
static void test_hash_pinned(void)
{
	float x[19 * 5];

	for (int i = 0; i < 19 * 5; i++)
		x[i] = (float)i * 0.25f - 3.0f;
	x[3] = -0.0f;
	CU_ASSERT_EQUAL(resume_hash_rows(x, 19, 5, 7), 0xfbe2763bc466edccULL);
}

/* A list's hash covers its place, every key bit and every index; the sum
 * over places does not depend on how they are split. */
static void test_hash_lists(void)
{
	enum { ROWS = 40, K = 7 };
	float key[ROWS * K];
	int64_t idx[ROWS * K];
	uint64_t whole, parts = 0;

	for (int i = 0; i < ROWS * K; i++) {
		key[i] = (float)(rng_next() % 1000) / 7.0f;
		idx[i] = (int64_t)(rng_next() % 100000);
	}
	idx[ROWS * K - 1] = -1;
	key[ROWS * K - 1] = INFINITY;
	whole = resume_hash_lists(key, idx, ROWS, K, 500);
	for (int r = 0; r < ROWS; r += 9) {
		int n = r + 9 <= ROWS ? 9 : ROWS - r;

		parts += resume_hash_lists(key + r * K, idx + r * K, n, K,
					   500 + r);
	}
	CU_ASSERT_EQUAL(whole, parts);
	CU_ASSERT_NOT_EQUAL(whole, resume_hash_lists(key, idx, ROWS, K, 501));
	idx[3 * K + 2] ^= 1;
	CU_ASSERT_NOT_EQUAL(whole, resume_hash_lists(key, idx, ROWS, K, 500));
	idx[3 * K + 2] ^= 1;
	key[0] = 0.0f;
	whole = resume_hash_lists(key, idx, 1, K, 0);
	key[0] = -0.0f;
	CU_ASSERT_NOT_EQUAL(whole, resume_hash_lists(key, idx, 1, K, 0));
	/* swapping two entries of a list changes it */
	key[0] = 1.0f;
	key[1] = 2.0f;
	whole = resume_hash_lists(key, idx, 1, K, 0);
	key[0] = 2.0f;
	key[1] = 1.0f;
	CU_ASSERT_NOT_EQUAL(whole, resume_hash_lists(key, idx, 1, K, 0));
}

static void make_record(resume_record *r, const char *qfile)
{
	xj_job job;
	h5in_info qi = { .rows = 1000, .cols = 64 }, bi = { .rows = 5000,
							  .cols = 64 };
	xj_status st;

	job_defaults(&job);
	job.command = XJ_CMD_TOPK;
	job.metric = XJ_METRIC_COSINE;
	job.k = 25;
	job.has_threshold = 1;
	job.threshold = 0.1;   /* not exact in binary: must survive */
	snprintf(qi.file, sizeof(qi.file), "%s", qfile);
	snprintf(qi.dset, sizeof(qi.dset), "/test");
	snprintf(qi.type_desc, sizeof(qi.type_desc), "float32");
	bi = (h5in_info){ .rows = 5000, .cols = 64 };
	snprintf(bi.file, sizeof(bi.file), "%s", qfile);
	snprintf(bi.dset, sizeof(bi.dset), "/train");
	snprintf(bi.type_desc, sizeof(bi.type_desc), "uint8");
	xj_ok(&st);
	CU_ASSERT_EQUAL_FATAL(resume_fill(r, &job, &qi, &bi, &st), XJ_OK);
	r->q.fingerprint = 0x0123456789abcdefULL;
	r->b.fingerprint = 0xfedcba9876543210ULL;
}

static void test_save_load(void)
{
	char path[256], input[256];
	resume_record a, b;
	xj_status st;

	snprintf(input, sizeof(input), "%s/in.h5", tmpdir);
	CU_ASSERT_EQUAL_FATAL(close(creat(input, 0644)), 0);
	snprintf(path, sizeof(path), "%s/out.h5.progress", tmpdir);
	make_record(&a, input);
	xj_ok(&st);
	CU_ASSERT_EQUAL(spans_add(&a.done, 0, 100, &st), XJ_OK);
	CU_ASSERT_EQUAL(spans_add(&a.done, 500, 750, &st), XJ_OK);
	a.runs = 3;
	CU_ASSERT_EQUAL_FATAL(resume_save(path, &a, &st), XJ_OK);
	memset(&b, 0x5a, sizeof(b));   /* poison: load must set every field */
	CU_ASSERT_EQUAL_FATAL(resume_load(path, &b, &st), XJ_OK);
	CU_ASSERT_STRING_EQUAL(b.command, "topk");
	CU_ASSERT_STRING_EQUAL(b.metric, "cosine");
	CU_ASSERT_EQUAL(b.k, 25);
	CU_ASSERT_EQUAL(b.has_threshold, 1);
	CU_ASSERT_EQUAL(memcmp(&b.threshold, &a.threshold, sizeof(double)),
			0);
	CU_ASSERT_EQUAL(b.self, 0);
	CU_ASSERT_EQUAL(b.runs, 3);
	CU_ASSERT_STRING_EQUAL(b.q.file, a.q.file);
	CU_ASSERT_STRING_EQUAL(b.b.dset, "/train");
	CU_ASSERT_STRING_EQUAL(b.b.type, "uint8");
	CU_ASSERT_EQUAL(b.q.rows, 1000);
	CU_ASSERT_EQUAL(b.b.cols, 64);
	CU_ASSERT_EQUAL(b.q.fingerprint, 0x0123456789abcdefULL);
	CU_ASSERT_EQUAL(b.b.fingerprint, 0xfedcba9876543210ULL);
	CU_ASSERT_STRING_EQUAL(spans_text(&b.done), "0-100 500-750");
	CU_ASSERT_EQUAL(resume_check_job(&a, &b, &st), XJ_OK);
	CU_ASSERT_EQUAL(resume_check_data(&a, &b, &st), XJ_OK);
	CU_ASSERT_EQUAL(access(path, F_OK), 0);
	CU_ASSERT_EQUAL(b.inround.valid, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(file_text(path), "format = 1\n"));
	CU_ASSERT_PTR_NULL(strstr(file_text(path), "[inround]"));
	resume_free(&a);
	resume_free(&b);
	unlink(path);
	unlink(input);
}

/* The lists of a round in progress survive the round trip, and the record
 * that holds them says format 2 (an older xjoin refuses it rather than
 * resume without them). */
static void test_save_load_inround(void)
{
	char path[256], input[256];
	resume_record a, b;
	resume_inround *in = &a.inround;
	xj_status st;

	snprintf(input, sizeof(input), "%s/in.h5", tmpdir);
	CU_ASSERT_EQUAL_FATAL(close(creat(input, 0644)), 0);
	snprintf(path, sizeof(path), "%s/out.h5.progress", tmpdir);
	make_record(&a, input);
	xj_ok(&st);
	CU_ASSERT_EQUAL(spans_add(&a.done, 0, 100, &st), XJ_OK);
	in->valid = 1;
	in->slot = 1;
	in->generation = 12;
	in->hash = 0x8000000000000001ULL;
	CU_ASSERT_EQUAL(spans_add(&in->rows, 100, 400, &st), XJ_OK);
	CU_ASSERT_EQUAL(spans_add(&in->rows, 600, 1000, &st), XJ_OK);
	CU_ASSERT_EQUAL(spans_add(&in->base, 0, 1024, &st), XJ_OK);
	CU_ASSERT_EQUAL(spans_add(&in->base, 2500, 3524, &st), XJ_OK);
	CU_ASSERT_EQUAL_FATAL(resume_save(path, &a, &st), XJ_OK);
	memset(&b, 0x5a, sizeof(b));
	CU_ASSERT_EQUAL_FATAL(resume_load(path, &b, &st), XJ_OK);
	CU_ASSERT_EQUAL(b.inround.valid, 1);
	CU_ASSERT_EQUAL(b.inround.slot, 1);
	CU_ASSERT_EQUAL(b.inround.generation, 12);
	CU_ASSERT_EQUAL(b.inround.hash, 0x8000000000000001ULL);
	CU_ASSERT_STRING_EQUAL(spans_text(&b.inround.rows), "100-400 600-1000");
	CU_ASSERT_STRING_EQUAL(spans_text(&b.inround.base),
			       "0-1024 2500-3524");
	CU_ASSERT_STRING_EQUAL(spans_text(&b.done), "0-100");
	CU_ASSERT_PTR_NOT_NULL(strstr(file_text(path), "format = 2\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(file_text(path),
				      "rows_done = 100 of 1000\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(file_text(path), "rows_held = 700\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(file_text(path),
				      "base_folded = 2048 of 5000\n"));
	resume_free(&b);
	CU_ASSERT_EQUAL(b.inround.valid, 0);
	CU_ASSERT_EQUAL(b.inround.rows.n, 0);
	resume_free(&a);
	unlink(path);
	unlink(input);
}

/* A snapshot is of no use once all its rows are done. */
static void test_inround_done(void)
{
	resume_inround in = { 0 };
	xj_spans done = { 0 };
	xj_status st;

	xj_ok(&st);
	CU_ASSERT_TRUE(resume_inround_done(&in, &done));   /* none */
	in.valid = 1;
	CU_ASSERT_EQUAL(spans_add(&in.rows, 10, 20, &st), XJ_OK);
	CU_ASSERT_EQUAL(spans_add(&in.rows, 30, 40, &st), XJ_OK);
	CU_ASSERT_FALSE(resume_inround_done(&in, &done));
	CU_ASSERT_EQUAL(spans_add(&done, 0, 25, &st), XJ_OK);
	CU_ASSERT_FALSE(resume_inround_done(&in, &done));
	CU_ASSERT_EQUAL(spans_add(&done, 30, 39, &st), XJ_OK);
	CU_ASSERT_FALSE(resume_inround_done(&in, &done));
	CU_ASSERT_EQUAL(spans_add(&done, 39, 50, &st), XJ_OK);
	CU_ASSERT_TRUE(resume_inround_done(&in, &done));
	resume_inround_clear(&in);
	CU_ASSERT_EQUAL(in.valid, 0);
	CU_ASSERT_EQUAL(in.rows.n, 0);
	spans_free(&done);
}

static void expect_differs(resume_record *now, const char *input,
			   const char *needle)
{
	resume_record old;
	xj_status st;

	make_record(&old, input);
	xj_ok(&st);
	CU_ASSERT_EQUAL(resume_check_job(&old, now, &st), XJ_EXIT_USAGE);
	if (!strstr(st.msg, needle))
		printf("\n  message '%s' lacks '%s'\n", st.msg, needle);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, needle));
	make_record(now, input);   /* back to the same job */
}

static void test_check_job(void)
{
	char input[256];
	resume_record now;
	xj_status st;

	snprintf(input, sizeof(input), "%s/in.h5", tmpdir);
	CU_ASSERT_EQUAL_FATAL(close(creat(input, 0644)), 0);
	make_record(&now, input);
	strcpy(now.command, "matrix");
	expect_differs(&now, input, "the command differs");
	strcpy(now.metric, "l2");
	expect_differs(&now, input, "--metric differs from the interrupted "
		       "run: it had cosine, this run has l2");
	now.k = 26;
	expect_differs(&now, input, "-k differs");
	now.threshold = nextafter(0.1, 1.0);
	expect_differs(&now, input, "--threshold differs");
	now.has_threshold = 0;
	expect_differs(&now, input, "this run has none");
	now.self = 1;
	expect_differs(&now, input, "--self differs");
	strcpy(now.q.dset, "/other");
	expect_differs(&now, input, "the query dataset differs");
	now.b.rows = 4999;
	expect_differs(&now, input, "the base shape differs from the "
		       "interrupted run: it had 5000 x 64, this run has "
		       "4999 x 64");
	strcpy(now.b.type, "float32");
	expect_differs(&now, input, "the base type differs");
	strcpy(now.q.file, "/elsewhere/in.h5");
	expect_differs(&now, input, "the query file differs");

	{
		resume_record old;

		make_record(&old, input);
		now.b.fingerprint ^= 1;
		xj_ok(&st);
		CU_ASSERT_EQUAL(resume_check_data(&old, &now, &st),
				XJ_EXIT_INPUT);
		CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "base values"));
		now.b.fingerprint ^= 1;
		now.q.fingerprint ^= 1ULL << 63;
		xj_ok(&st);
		CU_ASSERT_EQUAL(resume_check_data(&old, &now, &st),
				XJ_EXIT_INPUT);
		CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "query values"));
	}
	unlink(input);
}

/* Broken records are refused with FILE:LINE, never half-used. */
static void test_load_errors(void)
{
	static const struct {
		const char *text, *needle;
	} cases[] = {
		{ "[xjoin]\nformat = 3\n", ":2: cannot read format 3" },
		{ "[xjoin]\nformat = 0\n", ":2: cannot read format 0" },
		/* a format 1 record has no [inround] */
		{ "[xjoin]\nformat = 1\n[inround]\nslot = 1\n",
		  "cannot read [inround] slot = 1" },
		{ "[xjoin]\nformat = 2\n[inround]\nslot = 2\n", "slot = 2" },
		{ "[xjoin]\nformat = 2\n[inround]\ngeneration = 0\n",
		  "generation = 0" },
		{ "[xjoin]\nformat = 2\n[inround]\nrows = 9 9\n",
		  "rows = 9 9" },
		{ "[xjoin]\nformat = 2\n[inround]\nhash = -1\n", "hash = -1" },
		{ "[xjoin]\nformat = 2\n[inround]\nlists = 1\n", "lists = 1" },
		{ "[xjoin]\nformat = 1\n[job]\nk = ten\n", ":4:" },
		{ "[xjoin]\nformat = 1\n[job]\nbogus = 1\n", "[job] bogus" },
		{ "[xjoin]\nformat = 1\n[progress]\ndone = 5 3\n", "done = 5 3" },
		{ "[xjoin]\nformat = 1\n[progress]\ndone = 1 2 3\n", ":4:" },
		{ "[xjoin]\nformat = 1\n[query]\nrows = -4\n", ":4:" },
		{ "[xjoin]\nformat = 1\n[job]\nthreshold = 1e5x\n", ":4:" },
		{ "[xjoin]\nformat = 1\n[job]\ncommand = topk\n",
		  "incomplete record" },
		{ "no section here\n", ":1:" },
		{ "", "incomplete record" },
	};
	char path[256];
	resume_record r;
	xj_status st;

	snprintf(path, sizeof(path), "%s/bad.progress", tmpdir);
	for (size_t i = 0; i < UNIT_COUNT(cases); i++) {
		FILE *f = fopen(path, "w");

		CU_ASSERT_PTR_NOT_NULL_FATAL(f);
		fputs(cases[i].text, f);
		fclose(f);
		xj_ok(&st);
		CU_ASSERT_EQUAL(resume_load(path, &r, &st), XJ_EXIT_INPUT);
		if (!strstr(st.msg, cases[i].needle))
			printf("\n  case %zu: '%s' lacks '%s'\n", i, st.msg,
			       cases[i].needle);
		CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, cases[i].needle));
		resume_free(&r);
	}
	unlink(path);
	xj_ok(&st);
	CU_ASSERT_EQUAL(resume_load(path, &r, &st), XJ_EXIT_USAGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "No such file"));
}

/* Write text after a whole record of make_record's job. */
static void write_record_plus(const char *path, const char *input,
			      const char *extra)
{
	resume_record r;
	xj_status st;
	FILE *f;

	make_record(&r, input);
	xj_ok(&st);
	CU_ASSERT_EQUAL_FATAL(resume_save(path, &r, &st), XJ_OK);
	f = fopen(path, "a");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(extra, f);
	fclose(f);
	resume_free(&r);
}

/* An [inround] section is whole and inside the inputs (1000 query and
 * 5000 base rows), or the record is refused. */
static void test_inround_errors(void)
{
	static const struct {
		const char *text, *needle;
	} cases[] = {
		{ "[inround]\nslot = 0\ngeneration = 3\nhash = 0x1\n",
		  "incomplete [inround]" },
		{ "[inround]\nslot = 0\ngeneration = 3\nrows = 0 10\n",
		  "incomplete [inround]" },
		{ "[inround]\nbase = 0 10\n", "incomplete [inround]" },
		{ "[inround]\nslot = 0\ngeneration = 3\nhash = 0x1\n"
		  "rows = 990 1001\n", "past the inputs' 1000 query" },
		{ "[inround]\nslot = 0\ngeneration = 3\nhash = 0x1\n"
		  "rows = 0 10\nbase = 4000 5001\n", "and 5000 base rows" },
	};
	char path[256], input[256];
	resume_record r;
	xj_status st;

	snprintf(input, sizeof(input), "%s/in.h5", tmpdir);
	CU_ASSERT_EQUAL_FATAL(close(creat(input, 0644)), 0);
	snprintf(path, sizeof(path), "%s/ir.progress", tmpdir);
	for (size_t i = 0; i < UNIT_COUNT(cases); i++) {
		char text[512];

		/* make_record's record is format 1: say 2 for [inround] */
		snprintf(text, sizeof(text), "%s", cases[i].text);
		write_record_plus(path, input, text);
		set_format(path, 2);
		xj_ok(&st);
		CU_ASSERT_EQUAL(resume_load(path, &r, &st), XJ_EXIT_INPUT);
		if (!strstr(st.msg, cases[i].needle))
			printf("\n  case %zu: '%s' lacks '%s'\n", i, st.msg,
			       cases[i].needle);
		CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, cases[i].needle));
		resume_free(&r);
	}
	/* the whole section, and an older record without one, load */
	write_record_plus(path, input, "[inround]\nslot = 0\ngeneration = 3"
			  "\nhash = 0x1\nrows = 0 1000\nbase = 0 5000\n");
	set_format(path, 2);
	xj_ok(&st);
	CU_ASSERT_EQUAL(resume_load(path, &r, &st), XJ_OK);
	CU_ASSERT_EQUAL(r.inround.valid, 1);
	resume_free(&r);
	write_record_plus(path, input, "");
	CU_ASSERT_EQUAL(resume_load(path, &r, &st), XJ_OK);
	CU_ASSERT_EQUAL(r.inround.valid, 0);
	resume_free(&r);
	unlink(path);
	unlink(input);
}

/* An unwritable place for the record fails with its path named. */
static void test_save_error(void)
{
	resume_record r;
	xj_status st;
	char input[256];

	snprintf(input, sizeof(input), "%s/in.h5", tmpdir);
	CU_ASSERT_EQUAL_FATAL(close(creat(input, 0644)), 0);
	make_record(&r, input);
	xj_ok(&st);
	CU_ASSERT_EQUAL(resume_save("/proc/xj-none/out.progress", &r, &st),
			XJ_EXIT_RESOURCE);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "/proc/xj-none/out.progress"));
	unlink(input);
}

int main(void)
{
	static const unit_test tests[] = {
		{ "spans merge", test_spans_merge },
		{ "spans random", test_spans_random },
		{ "spans place and copy", test_spans_place },
		{ "fingerprint", test_hash },
		{ "fingerprint pinned", test_hash_pinned },
		{ "list hash", test_hash_lists },
		{ "save and load", test_save_load },
		{ "save and load a round in progress", test_save_load_inround },
		{ "round in progress done", test_inround_done },
		{ "broken [inround]", test_inround_errors },
		{ "job differences", test_check_job },
		{ "broken records", test_load_errors },
		{ "unwritable record", test_save_error },
	};
	int rc;

	if (!mkdtemp(tmpdir))
		return 1;
	rc = unit_run("resume", tests, UNIT_COUNT(tests));
	rmdir(tmpdir);
	return rc;
}
