/* test_resume.c: progress spans, input fingerprints and the progress
 * record (app/resume.h). */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "../../app/resume.h"
#include "testdata.h"
#include "unit.h"

static char tmpdir[] = "/tmp/xj-resume-XXXXXX";

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
	free(x);
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
	spans_free(&a.done);
	spans_free(&b.done);
	unlink(path);
	unlink(input);
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
		{ "[xjoin]\nformat = 2\n", ":2: cannot read format 2" },
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
		spans_free(&r.done);
	}
	unlink(path);
	xj_ok(&st);
	CU_ASSERT_EQUAL(resume_load(path, &r, &st), XJ_EXIT_USAGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "No such file"));
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
		{ "fingerprint", test_hash },
		{ "save and load", test_save_load },
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
