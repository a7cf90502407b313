/*
 * test_inspect.c: `xjoin inspect` (app/inspect/inspect.h) on files written here
 * with the HDF5 API: sorted and broken topk rows, padding, ip, a matrix,
 * broken shapes, a file that is no result, missing and unreadable files,
 * unfinished runs (records written with resume_save), the options of the
 * command, and the rank-0-only inspect_run.
 *
 * What inspect prints is captured with open_memstream; every call starts
 * from a poisoned status so a verdict it forgot to set cannot pass.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>
#include <mpi.h>

#include "../../app/run/comm.h"
#include "../../app/inspect/inspect.h"
#include "../../app/cli/options.h"
#include "../../app/run/resume.h"
#include "testdata.h"
#include "unit.h"

static char tmpdir[] = "/tmp/xj-inspect-XXXXXX";

/* The outcome of one inspect_file() call. */
static struct {
	int rc;
	xj_status st;
	char *text;          /* what it printed */
} R;

static const char *tmp_path(const char *name)
{
	static char buf[4][512];
	static int next;
	char *p = buf[next++ % 4];

	snprintf(p, sizeof(buf[0]), "%s/%s", tmpdir, name);
	return p;
}

static int inspect_with(const char *path, int64_t rows, int json,
			int64_t slab_bytes)
{
	inspect_opts o = { .rows = rows, .json = json,
			   .slab_bytes = slab_bytes };
	size_t len = 0;
	FILE *out;

	free(R.text);
	R.text = NULL;
	memset(&R.st, 0x5a, sizeof(R.st));
	R.st.code = 12345;
	out = open_memstream(&R.text, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	R.rc = inspect_file(path, &o, out, &R.st);
	fclose(out);
	return R.rc;
}

static int inspect_text(const char *path, int64_t rows)
{
	return inspect_with(path, rows, 0, 0);
}

static int inspect_json(const char *path)
{
	return inspect_with(path, 2, 1, 0);
}

#define EXPECT_TEXT(needle) expect_in(R.text, needle, __LINE__)
#define EXPECT_MSG(needle) expect_in(R.st.msg, needle, __LINE__)

static void expect_in(const char *hay, const char *needle, int line)
{
	int found = hay && strstr(hay, needle) != NULL;

	if (!found)
		printf("\n  line %d: '%s' not found in:\n%s\n", line, needle,
		       hay ? hay : "(null)");
	CU_ASSERT_TRUE(found);
}

/* A table row "| name   | value...", whatever the column widths. */
#define EXPECT_ROW(name, value) expect_row(name, value, __LINE__)

static void expect_row(const char *name, const char *value, int line)
{
	char head[128];
	const char *p = R.text;
	size_t hl;
	int found = 0;

	snprintf(head, sizeof(head), "| %s ", name);
	hl = strlen(head);
	while (p && !found && (p = strstr(p, head)) != NULL) {
		const char *v = p + hl + strspn(p + hl, " ");

		found = v[0] == '|' && v[1] == ' ' &&
			strncmp(v + 2, value, strlen(value)) == 0;
		p += hl;
	}
	if (!found)
		printf("\n  line %d: no row '%s' | '%s' in:\n%s\n", line, name,
		       value, R.text ? R.text : "(null)");
	CU_ASSERT_TRUE(found);
}

/* Success means an empty message; failure a message and that code. */
static void expect_code(int code)
{
	if (R.rc != code)
		printf("\n  exit %d, expected %d: %s\n", R.rc, code, R.st.msg);
	CU_ASSERT_EQUAL(R.rc, code);
	CU_ASSERT_EQUAL(R.st.code, code);
	if (code == XJ_OK)
		CU_ASSERT_STRING_EQUAL(R.st.msg, "");
}

/* ---- writing files ---------------------------------------------------- */

static hid_t h5_create(const char *path)
{
	hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);

	CU_ASSERT_FATAL(f >= 0);
	return f;
}

static void h5_dset(hid_t f, const char *name, hid_t ftype, hid_t mtype,
		    int64_t rows, int64_t cols, int64_t chunk_rows,
		    const void *data)
{
	hsize_t dims[2] = { (hsize_t)rows, (hsize_t)cols };
	hsize_t chunk[2] = { (hsize_t)chunk_rows, (hsize_t)cols };
	hid_t space = H5Screate_simple(2, dims, NULL);
	hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), d;

	if (chunk_rows > 0) {
		CU_ASSERT_FATAL(H5Pset_chunk(dcpl, 2, chunk) >= 0);
		CU_ASSERT_FATAL(H5Pset_deflate(dcpl, 4) >= 0);
	}
	d = H5Dcreate2(f, name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
	CU_ASSERT_FATAL(d >= 0);
	CU_ASSERT_FATAL(H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT,
				 data) >= 0);
	H5Dclose(d);
	H5Pclose(dcpl);
	H5Sclose(space);
}

static void h5_attr(hid_t f, const char *name, hid_t ftype, hid_t mtype,
		    const void *v)
{
	hid_t space = H5Screate(H5S_SCALAR);
	hid_t a = H5Acreate2(f, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);

	CU_ASSERT_FATAL(a >= 0);
	CU_ASSERT_FATAL(H5Awrite(a, mtype, v) >= 0);
	H5Aclose(a);
	H5Sclose(space);
}

static void h5_attr_i64(hid_t f, const char *name, int64_t v)
{
	h5_attr(f, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}

static void h5_attr_f64(hid_t f, const char *name, double v)
{
	h5_attr(f, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
}

/* Fixed length, UTF-8, as xjoin writes them; vlen as h5py does. */
static void h5_attr_str(hid_t f, const char *name, const char *v, int vlen)
{
	hid_t t = H5Tcopy(H5T_C_S1);

	if (vlen) {
		H5Tset_size(t, H5T_VARIABLE);
		h5_attr(f, name, t, t, &v);
	} else {
		H5Tset_size(t, strlen(v) + 1);
		H5Tset_cset(t, H5T_CSET_UTF8);
		h5_attr(f, name, t, t, v);
	}
	H5Tclose(t);
}

struct spec {
	const char *command, *metric;
	int64_t n, cols, m;          /* m: base rows */
	int has_threshold, self;
	double threshold;
	const int64_t *idx;          /* NULL: no /neighbors */
	const float *dist;           /* NULL: no /distances */
	int64_t idx_cols;            /* 0: cols */
	int64_t query_rows;          /* 0: n */
};

static void write_attrs(hid_t f, const struct spec *s)
{
	h5_attr_i64(f, "schema_version", 1);
	h5_attr_str(f, "xjoin_version", "0.1.0", 0);
	h5_attr_str(f, "command", s->command, 0);
	h5_attr_str(f, "metric", s->metric, 0);
	h5_attr_i64(f, "k", strcmp(s->command, "topk") ? 0 : s->cols);
	h5_attr_i64(f, "has_threshold", s->has_threshold);
	h5_attr_f64(f, "threshold", s->threshold);
	h5_attr_i64(f, "self_excluded", s->self);
	h5_attr_str(f, "query_file", "q.h5", 0);
	h5_attr_str(f, "query_dataset", "/test", 0);
	h5_attr_str(f, "query_type", "float32", 0);
	h5_attr_i64(f, "query_rows", s->query_rows ? s->query_rows : s->n);
	h5_attr_str(f, "base_file", "b.h5", 1);
	h5_attr_str(f, "base_dataset", "/train", 0);
	h5_attr_str(f, "base_type", "uint8", 0);
	h5_attr_i64(f, "base_rows", s->m);
	h5_attr_i64(f, "dimension", 16);
	h5_attr_i64(f, "ranks", 3);
	h5_attr_i64(f, "runs", 2);
	h5_attr_str(f, "grid", "1x3", 0);
	h5_attr_str(f, "backends", "cpu", 0);
	h5_attr_f64(f, "seconds_compute", 1.5);
	h5_attr_f64(f, "seconds_setup", 0.25);
	h5_attr_str(f, "site_note", "kept as is", 0);
}

static void write_result(const char *path, const struct spec *s)
{
	hid_t f = h5_create(path);

	write_attrs(f, s);
	if (s->idx)
		h5_dset(f, "neighbors", H5T_STD_I64LE, H5T_NATIVE_INT64, s->n,
			s->idx_cols ? s->idx_cols : s->cols, 0, s->idx);
	if (s->dist)
		h5_dset(f, "distances", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT,
			s->n, s->cols, strcmp(s->command, "matrix") ? 0 : 2,
			s->dist);
	H5Fclose(f);
}

/* ---- topk results ----------------------------------------------------- */

/* 6 rows of k = 4 over m = 10 base rows, l2: full rows, ties, partly
 * and fully padded rows. */
static const int64_t good_idx[6 * 4] = {
	3, 1, 7, 2,
	4, 9, -1, -1,
	-1, -1, -1, -1,
	0, 5, 6, 8,
	8, 0, 2, -1,
	-1, -1, -1, -1,
};
static const float good_dist[6 * 4] = {
	0.5f, 0.75f, 1.0f, 1.25f,
	0.125f, 2.0f, INFINITY, INFINITY,
	INFINITY, INFINITY, INFINITY, INFINITY,
	1.0f, 1.0f, 1.0f, 3.0f,          /* ties in any index order */
	0.0f, 0.0f, 7.5f, INFINITY,
	INFINITY, INFINITY, INFINITY, INFINITY,
};

static struct spec topk_spec(const int64_t *idx, const float *dist)
{
	return (struct spec){ .command = "topk", .metric = "l2", .n = 6,
			      .cols = 4, .m = 10, .idx = idx, .dist = dist };
}

static void test_topk_good(void)
{
	const char *path = tmp_path("good.h5");
	struct spec s = topk_spec(good_idx, good_dist);

	write_result(path, &s);
	inspect_text(path, 3);
	expect_code(XJ_OK);
	EXPECT_TEXT("a finished xjoin topk result (schema 1");
	EXPECT_ROW("metric", "l2 (smaller is better)");
	EXPECT_ROW("query", "q.h5:/test, 6 x 16 float32");
	EXPECT_ROW("base", "b.h5:/train, 10 x 16 uint8");
	EXPECT_ROW("runs", "2 (resumed");
	EXPECT_ROW("seconds: sum", "1.750");
	EXPECT_ROW("site_note", "kept as is");
	EXPECT_ROW("/neighbors", "int64   | 6 x 4 | contiguous | 192");
	EXPECT_TEXT("# first 3 of 6 query rows: (base row, distance)");
	EXPECT_TEXT("\nrow 0: (3, 0.5) (1, 0.75) (7, 1) (2, 1.25)\n");
	EXPECT_TEXT("\nrow 1: (4, 0.125) (9, 2) (-1, inf) (-1, inf)\n");
	EXPECT_TEXT("\nrow 2: (-1, inf) (-1, inf) (-1, inf) (-1, inf)\n");
	CU_ASSERT_PTR_NULL(strstr(R.text, "row 3:"));
	EXPECT_ROW("rows fully padded (-1)", "2");
	EXPECT_ROW("padding entries (-1)", "11 of 24");
	EXPECT_ROW("sorted best first (ascending)", "every row");
	EXPECT_ROW("base indices in [0, 10)", "every row");
	EXPECT_TEXT("# OK: ");
	/* no threshold, no self exclusion: those checks do not apply */
	CU_ASSERT_PTR_NULL(strstr(R.text, "within the threshold"));
	CU_ASSERT_PTR_NULL(strstr(R.text, "no pair (i, i)"));

	inspect_json(path);
	expect_code(XJ_OK);
	EXPECT_TEXT("\"kind\": \"result\"");
	EXPECT_TEXT("\"rows_fully_padded\": 2, \"padding_entries\": 11");
	EXPECT_TEXT("{\"row\": 1, \"neighbors\": [4, 9, -1, -1], "
		    "\"distances\": [0.125, 2, null, null]}");
	EXPECT_TEXT("\"base_file\": \"b.h5\"");
	EXPECT_TEXT("\"ok\": true,\n  \"problem\": null\n}\n");
	CU_ASSERT_PTR_NULL(strstr(R.text, "+---"));
	CU_ASSERT_EQUAL(R.text[0], '{');
}

/* Row r of a copy of the good rows with column c set to (i, v). */
static void expect_broken(const char *name, int64_t r, int64_t c, int64_t i,
			  float v, const char *needle)
{
	int64_t idx[6 * 4];
	float dist[6 * 4];
	struct spec s = topk_spec(idx, dist);

	memcpy(idx, good_idx, sizeof(idx));
	memcpy(dist, good_dist, sizeof(dist));
	idx[r * 4 + c] = i;
	dist[r * 4 + c] = v;
	write_result(tmp_path(name), &s);
	inspect_text(tmp_path(name), 5);
	expect_code(XJ_EXIT_INPUT);
	EXPECT_MSG(tmp_path(name));
	EXPECT_MSG(needle);
	EXPECT_MSG("(1 row fails this check)");
	EXPECT_TEXT("# FAILED: ");
	EXPECT_TEXT(needle);
}

static void test_topk_broken(void)
{
	expect_broken("order.h5", 3, 2, 6, 0.5f, "row 3 is not sorted best "
		      "first (ascending for l2): column 2 (0.5) after column "
		      "1 (1)");
	expect_broken("gap.h5", 1, 3, 5, 2.5f, "row 1 has a neighbour after "
		      "its -1 padding: base row 5 in column 3, padding from "
		      "column 2");
	expect_broken("padval.h5", 2, 0, -1, 9.0f, "row 2 has -1 padding not "
		      "valued +inf: column 0 has 9");
	expect_broken("range.h5", 0, 3, 10, 1.25f, "row 0 has a base index "
		      "out of range: column 3 holds 10, base rows are [0, 10)");
	expect_broken("negidx.h5", 4, 0, -2, 0.0f, "row 4 has a base index "
		      "out of range");
	expect_broken("nan.h5", 3, 3, 8, NAN, "row 3 has a NaN value");
	/* the lowest row wins; its count is of its own check */
	{
		int64_t idx[6 * 4];
		float dist[6 * 4];
		struct spec s = topk_spec(idx, dist);

		memcpy(idx, good_idx, sizeof(idx));
		memcpy(dist, good_dist, sizeof(dist));
		dist[4 * 4 + 2] = -1.0f;   /* order, row 4 */
		dist[3 * 4 + 0] = 2.0f;    /* order, row 3 */
		idx[5 * 4 + 1] = 1;        /* gap, row 5 */
		write_result(tmp_path("two.h5"), &s);
		inspect_json(tmp_path("two.h5"));
		expect_code(XJ_EXIT_INPUT);
		EXPECT_MSG("row 3 is not sorted");
		EXPECT_MSG("(2 rows fail this check; others fail too)");
		EXPECT_TEXT("\"sorted\": {\"failed_rows\": 2, \"first\": "
			    "\"row 3 is not sorted");
		EXPECT_TEXT("\"padding_at_end\": {\"failed_rows\": 1");
		EXPECT_TEXT("\"ok\": false");
	}
}

/* ip: best first is descending, padding is -inf; the threshold keeps
 * values >= it; self exclusion forbids (i, i). */
static void test_topk_ip(void)
{
	int64_t idx[3 * 3] = { 2, 0, 1, 0, 2, -1, 1, 0, 2 };
	float dist[3 * 3] = { 9.0f, 4.0f, 2.0f, 5.0f, 2.0f, -INFINITY,
			      3.0f, 3.0f, 2.0f };
	struct spec s = { .command = "topk", .metric = "ip", .n = 3,
			  .cols = 3, .m = 3, .idx = idx, .dist = dist,
			  .has_threshold = 1, .threshold = 2.0 };
	const char *path = tmp_path("ip.h5");

	write_result(path, &s);
	inspect_text(path, 5);
	expect_code(XJ_OK);
	EXPECT_TEXT("(base row, inner product), best first");
	EXPECT_ROW("sorted best first (descending)", "every row");
	EXPECT_ROW("padding valued -inf", "every row");
	EXPECT_ROW("within the threshold (>= 2)", "every row");
	EXPECT_TEXT("row 1: (0, 5) (2, 2) (-1, -inf)");

	dist[1 * 3 + 1] = 1.5f;   /* still descending, but below 2 */
	write_result(path, &s);
	inspect_text(path, 5);
	expect_code(XJ_EXIT_INPUT);
	EXPECT_MSG("row 1 has a value past the threshold: column 1 has 1.5");

	dist[1 * 3 + 1] = 2.0f;
	dist[2 * 3 + 2] = 3.5f;   /* ascending at the end of row 2 */
	write_result(path, &s);
	inspect_text(path, 5);
	expect_code(XJ_EXIT_INPUT);
	EXPECT_MSG("row 2 is not sorted best first (descending for ip): "
		   "column 2 (3.5) after column 1 (3)");

	dist[2 * 3 + 2] = 2.0f;
	dist[1 * 3 + 2] = INFINITY;   /* distance padding in an ip result */
	write_result(path, &s);
	inspect_text(path, 5);
	expect_code(XJ_EXIT_INPUT);
	EXPECT_MSG("row 1 has -1 padding not valued -inf: column 2 has inf");

	dist[1 * 3 + 2] = -INFINITY;
	s.self = 1;
	write_result(path, &s);
	inspect_text(path, 5);
	expect_code(XJ_EXIT_INPUT);
	EXPECT_MSG("row 0 lists itself (self exclusion is on): column 1");
}

/* ---- slabs ------------------------------------------------------------ */

/* n rows of k sorted pairs with random padding and one order error at
 * row bad (column bad_col): the same verdict whatever the slab size,
 * from whole files down to one pair per read. */
static void test_slab_invariance(void)
{
	enum { N = 300, K = 7, M = 1000 };
	static int64_t idx[N * K];
	static float dist[N * K];
	static const int64_t slabs[] = { 0, 12, 40, 84, 100, 1000 };
	struct spec s = { .command = "topk", .metric = "cosine", .n = N,
			  .cols = K, .m = M, .idx = idx, .dist = dist };
	const char *path = tmp_path("slabs.h5");
	char *first = NULL;

	for (int64_t i = 0; i < N; i++) {
		int64_t real = (int64_t)(rng_next() % (K + 1));
		float v = (float)rng_unit();

		for (int64_t j = 0; j < K; j++) {
			idx[i * K + j] = j < real ?
					 (int64_t)(rng_next() % M) : -1;
			v += (float)rng_unit();
			dist[i * K + j] = j < real ? v : INFINITY;
		}
	}
	idx[211 * K + 5] = 17;
	dist[211 * K + 5] = dist[211 * K + 4] - 0.25f;
	idx[211 * K + 6] = 18;
	dist[211 * K + 6] = dist[211 * K + 5] + 1.0f;
	write_result(path, &s);
	for (size_t t = 0; t < UNIT_COUNT(slabs); t++) {
		const char *check;

		inspect_with(path, 0, 1, slabs[t]);
		expect_code(XJ_EXIT_INPUT);
		EXPECT_MSG("row 211 is not sorted best first (ascending for "
			   "cosine): column 5");
		check = strstr(R.text, "\"check\"");
		CU_ASSERT_PTR_NOT_NULL_FATAL(check);
		EXPECT_TEXT("\"rows_checked\": 300");
		if (!first) {
			first = strdup(check);
			continue;
		}
		if (strcmp(first, check) != 0)
			printf("\n  slab %lld bytes: '%s'\n  whole: '%s'\n",
			       (long long)slabs[t], check, first);
		CU_ASSERT_STRING_EQUAL(check, first);
	}
	free(first);
}

/* ---- matrix ----------------------------------------------------------- */

static void test_matrix(void)
{
	enum { N = 5, M = 12 };
	float dist[N * M];
	struct spec s = { .command = "matrix", .metric = "sqeuclidean",
			  .n = N, .cols = M, .m = M, .dist = dist };
	const char *path = tmp_path("matrix.h5");

	for (int i = 0; i < N * M; i++)
		dist[i] = 0.5f * (float)i + 0.25f;
	write_result(path, &s);
	inspect_text(path, 2);
	expect_code(XJ_OK);
	EXPECT_TEXT("a finished xjoin matrix result");
	EXPECT_ROW("/distances", "float32 | 5 x 12 | chunked 2 x 12, gzip 4");
	EXPECT_TEXT("(the first 8 of 12)");
	EXPECT_TEXT("\nrow 1: 6.25 6.75 7.25 7.75 8.25 8.75 9.25 9.75 ... "
		    "+4 more\n");
	CU_ASSERT_PTR_NULL(strstr(R.text, "row 2:"));
	EXPECT_ROW("finite values in", "[0.25, 29.75]");
	EXPECT_ROW("no negative distance", "every row");

	dist[3 * M + 11] = -0.5f;
	write_result(path, &s);
	inspect_with(path, 1, 0, 20);
	expect_code(XJ_EXIT_INPUT);
	EXPECT_MSG("row 3 has a negative distance: column 11 has -0.5");

	dist[3 * M + 11] = 1.0f;
	dist[4 * M + 2] = NAN;
	write_result(path, &s);
	inspect_json(path);
	expect_code(XJ_EXIT_INPUT);
	EXPECT_MSG("row 4 has a NaN value: column 2");
	EXPECT_TEXT("\"no_nan\": {\"failed_rows\": 1");
	EXPECT_TEXT("\"distances\": [0.25, 0.75, 1.25, 1.75, 2.25, 2.75, "
		    "3.25, 3.75]");
}

/* ---- shapes and attributes -------------------------------------------- */

static void test_structure(void)
{
	struct spec s = topk_spec(good_idx, good_dist);
	const char *path = tmp_path("shape.h5");

	s.idx_cols = 3;
	write_result(path, &s);
	inspect_text(path, 5);
	expect_code(XJ_EXIT_INPUT);
	EXPECT_MSG("/neighbors is 6 x 3 but /distances 6 x 4");
	EXPECT_ROW("/neighbors", "int64   | 6 x 3");   /* still listed */

	s = topk_spec(good_idx, NULL);
	write_result(path, &s);
	inspect_json(path);
	expect_code(XJ_EXIT_INPUT);
	EXPECT_MSG("no dataset /distances");
	EXPECT_TEXT("\"ok\": false");

	s = topk_spec(good_idx, good_dist);
	s.query_rows = 7;
	write_result(path, &s);
	inspect_text(path, 5);
	expect_code(XJ_EXIT_INPUT);
	EXPECT_MSG("/distances has 6 rows but the attribute query_rows says "
		   "7");

	s = topk_spec(good_idx, good_dist);
	s.metric = "manhattan";
	write_result(path, &s);
	inspect_text(path, 5);
	expect_code(XJ_EXIT_INPUT);
	EXPECT_MSG("attribute metric is 'manhattan'");
	EXPECT_ROW("metric", "manhattan");
}

/* ---- files that are no result ----------------------------------------- */

static void test_not_result(void)
{
	float x[40 * 3];
	hid_t f;

	for (int i = 0; i < 40 * 3; i++)
		x[i] = (float)rng_gauss();
	f = h5_create(tmp_path("input.h5"));
	h5_dset(f, "train", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 40, 3, 8, x);
	h5_dset(f, "test", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 10, 3, 0, x);
	H5Fclose(f);
	inspect_text(tmp_path("input.h5"), 5);
	expect_code(XJ_OK);
	EXPECT_TEXT("not an xjoin result: no schema_version attribute");
	EXPECT_ROW("/test", "float32 | 10 x 3 | contiguous");
	EXPECT_ROW("/train", "float32 | 40 x 3 | chunked 8 x 3, gzip 4");
	inspect_json(tmp_path("input.h5"));
	expect_code(XJ_OK);
	EXPECT_TEXT("\"kind\": \"not_result\"");
	EXPECT_TEXT("\"name\": \"/train\", \"type\": \"float32\", "
		    "\"shape\": [40, 3], \"layout\": \"chunked\", "
		    "\"chunks\": [8, 3], \"filters\": \"gzip 4\"");

	f = h5_create(tmp_path("gen.h5"));
	h5_attr_i64(f, "schema_version", 1);
	h5_attr_str(f, "generator", "gaussian", 0);
	h5_attr_i64(f, "seed", 77);
	h5_dset(f, "train", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 40, 3, 0, x);
	H5Fclose(f);
	inspect_text(tmp_path("gen.h5"), 5);
	expect_code(XJ_OK);
	EXPECT_TEXT("not an xjoin result: data written by xjoin gen "
		    "(gaussian, seed 77)");
	EXPECT_ROW("generator", "gaussian");
}

static void test_missing(void)
{
	const char *path = tmp_path("absent.h5");
	int fd;

	inspect_text(path, 5);
	expect_code(XJ_EXIT_INPUT);
	EXPECT_MSG(path);
	EXPECT_MSG("no such file");
	CU_ASSERT_STRING_EQUAL(R.text, "");

	fd = open(tmp_path("text.h5"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(write(fd, "not hdf5\n", 9), 9);
	close(fd);
	inspect_json(tmp_path("text.h5"));
	expect_code(XJ_EXIT_INPUT);
	EXPECT_MSG("text.h5: not an HDF5 file");
	CU_ASSERT_STRING_EQUAL(R.text, "");

	inspect_text(tmpdir, 5);
	expect_code(XJ_EXIT_INPUT);
	EXPECT_MSG("not a regular file");

	/* an HDF5 signature with nothing behind it */
	fd = open(tmp_path("cut.h5"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(write(fd, "\211HDF\r\n\032\n\0\0\0\0", 12), 12);
	close(fd);
	inspect_text(tmp_path("cut.h5"), 5);
	CU_ASSERT_EQUAL(R.rc, XJ_EXIT_INPUT);
	EXPECT_MSG("cut.h5");
}

/* ---- unfinished runs -------------------------------------------------- */

static void write_record(const char *output)
{
	char path[600], input[600];
	resume_record r;
	xj_job job;
	h5in_info qi = { .rows = 1000, .cols = 64 }, bi = qi;
	xj_status st;

	snprintf(input, sizeof(input), "%s/in put.h5", tmpdir);
	CU_ASSERT_EQUAL_FATAL(close(creat(input, 0644)), 0);
	job_defaults(&job);
	job.command = XJ_CMD_TOPK;
	job.metric = XJ_METRIC_COSINE;
	job.k = 25;
	job.has_threshold = 1;
	job.threshold = 0.1;
	snprintf(qi.file, sizeof(qi.file), "%s", input);
	snprintf(qi.dset, sizeof(qi.dset), "/test");
	snprintf(qi.type_desc, sizeof(qi.type_desc), "float32");
	bi.rows = 5000;
	snprintf(bi.file, sizeof(bi.file), "%s", input);
	snprintf(bi.dset, sizeof(bi.dset), "/train");
	snprintf(bi.type_desc, sizeof(bi.type_desc), "uint8");
	xj_ok(&st);
	CU_ASSERT_EQUAL_FATAL(resume_fill(&r, &job, &qi, &bi, &st), XJ_OK);
	r.runs = 2;
	CU_ASSERT_EQUAL(spans_add(&r.done, 0, 100, &st), XJ_OK);
	CU_ASSERT_EQUAL(spans_add(&r.done, 500, 750, &st), XJ_OK);
	resume_path(output, path, sizeof(path));
	CU_ASSERT_EQUAL_FATAL(resume_save(path, &r, &st), XJ_OK);
	spans_free(&r.done);
}

static void test_unfinished(void)
{
	char out[600], partial[620], progress[620];
	int fd;

	snprintf(out, sizeof(out), "%s/run.h5", tmpdir);
	snprintf(partial, sizeof(partial), "%s.partial", out);
	snprintf(progress, sizeof(progress), "%s.progress", out);
	write_record(out);
	fd = open(partial, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(write(fd, "0123456789", 10), 10);
	close(fd);

	inspect_text(out, 5);
	expect_code(XJ_OK);
	EXPECT_TEXT("run.h5: an unfinished xjoin run");
	EXPECT_TEXT("run.h5.partial, 10 bytes");
	EXPECT_ROW("rows done", "350 of 1000 (35.0%)");
	EXPECT_ROW("done spans", "[0, 100) [500, 750)");
	EXPECT_ROW("runs so far", "2");
	EXPECT_ROW("threshold", "0.1");
	EXPECT_TEXT("in put.h5:/train, 5000 x 64 uint8");
	/* the continuing command, the spaced path quoted for the shell */
	EXPECT_TEXT("#   xjoin topk -q '");
	EXPECT_TEXT("in put.h5:/test' -b '");
	EXPECT_TEXT(" -k 25 -m cosine -t 0.1 -o ");
	EXPECT_TEXT("run.h5 --resume\n");

	inspect_json(progress);   /* naming the record: the same run */
	expect_code(XJ_OK);
	EXPECT_TEXT("\"kind\": \"unfinished\"");
	EXPECT_TEXT("\"rows_done\": 350, \"rows\": 1000, \"runs\": 2");
	EXPECT_TEXT("\"done\": [[0, 100], [500, 750]]");
	EXPECT_TEXT("\"resumable\": true");
	EXPECT_TEXT("\"bytes\": 10}");

	unlink(partial);
	inspect_json(out);
	expect_code(XJ_OK);
	EXPECT_TEXT("\"resumable\": false");
	EXPECT_TEXT("\"partial\": null");
	inspect_text(out, 5);
	EXPECT_TEXT("cannot be resumed: start over with --force");

	fd = open(partial, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	close(fd);
	unlink(progress);
	inspect_text(partial, 5);
	expect_code(XJ_OK);
	EXPECT_ROW("progress record", "none");
	EXPECT_TEXT("no progress record: no rows of");

	fd = open(progress, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	CU_ASSERT_EQUAL(write(fd, "[xjoin]\nformat = 1\n[job]\nk = x\n", 31),
			31);
	close(fd);
	inspect_text(out, 5);
	expect_code(XJ_EXIT_INPUT);
	EXPECT_MSG("run.h5.progress:4");
	unlink(progress);
	unlink(partial);
}

/* ---- the command ------------------------------------------------------ */

static int parse(const char *line, xj_job *job, xj_status *st)
{
	char words[512], *argv[16], *save = NULL, *buf = NULL;
	int argc = 0, action = -1;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	snprintf(words, sizeof(words), "xjoin %s", line);
	for (char *w = strtok_r(words, " ", &save); w && argc < 15;
	     w = strtok_r(NULL, " ", &save))
		argv[argc++] = w;
	argv[argc] = NULL;
	memset(job, 0xA5, sizeof(*job));
	memset(st, 0x5a, sizeof(*st));
	options_parse(argc, argv, job, &action, out, st);
	fclose(out);
	free(buf);
	return st->code;
}

static void test_options(void)
{
	xj_job job;
	xj_status st;

	CU_ASSERT_EQUAL(parse("inspect out.h5", &job, &st), XJ_OK);
	CU_ASSERT_EQUAL(job.command, XJ_CMD_INSPECT);
	CU_ASSERT_STRING_EQUAL(job.inspect_file, "out.h5");
	CU_ASSERT_EQUAL(job.inspect_rows, 5);
	CU_ASSERT_EQUAL(job.json, 0);
	CU_ASSERT_EQUAL(parse("inspect --rows 0 --json out.h5", &job, &st),
			XJ_OK);
	CU_ASSERT_EQUAL(job.inspect_rows, 0);
	CU_ASSERT_EQUAL(job.json, 1);
	CU_ASSERT_EQUAL(job.gen_rows, 0);
	/* gen's --rows is another row of the table, with its own field */
	CU_ASSERT_EQUAL(parse("gen --rows 7 --dim 2 -o g.h5", &job, &st),
			XJ_OK);
	CU_ASSERT_EQUAL(job.gen_rows, 7);
	CU_ASSERT_EQUAL(job.inspect_rows, 5);
	CU_ASSERT_EQUAL(parse("gen --ro 9 --dim 2 -o g.h5", &job, &st), XJ_OK);
	CU_ASSERT_EQUAL(job.gen_rows, 9);

	CU_ASSERT_EQUAL(parse("inspect", &job, &st), XJ_EXIT_USAGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "inspect needs FILE"));
	CU_ASSERT_EQUAL(parse("inspect a.h5 b.h5", &job, &st), XJ_EXIT_USAGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "unexpected argument 'b.h5'"));
	CU_ASSERT_EQUAL(parse("topk a.h5 -q q -b b -k 1 -o o", &job, &st),
			XJ_EXIT_USAGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "unexpected argument 'a.h5'"));
	CU_ASSERT_EQUAL(parse("inspect a.h5 --rows -1", &job, &st),
			XJ_EXIT_USAGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "--rows"));
	CU_ASSERT_EQUAL(parse("inspect a.h5 -k 3", &job, &st), XJ_EXIT_USAGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "-k does not apply to inspect"));
	CU_ASSERT_EQUAL(parse("topk -q q -b b -k 1 -o o --json", &job, &st),
			XJ_EXIT_USAGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "--json does not apply to topk"));
	CU_ASSERT_EQUAL(parse("inspect --help", &job, &st), XJ_OK);
}

static void test_help(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	options_help(out, XJ_CMD_INSPECT);
	fclose(out);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "usage: xjoin inspect FILE "
				      "[--rows N] [--json] [options]"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "[default: 5]"));
	CU_ASSERT_PTR_NULL(strstr(buf, "--dim"));
	for (char *line = buf, *nl; line && *line; line = nl ? nl + 1 : NULL) {
		nl = strchr(line, '\n');
		CU_ASSERT_TRUE((nl ? (size_t)(nl - line) : strlen(line)) <= 79);
	}
	free(buf);
}

/* Rank 0 reads; every rank returns its status. */
static void test_run(void)
{
	xj_comm c;
	xj_job job;
	xj_status st;

	xj_ok(&st);
	comm_init(&c, &st);
	job_defaults(&job);
	job.command = XJ_CMD_INSPECT;
	snprintf(job.inspect_file, sizeof(job.inspect_file), "%s",
		 tmp_path("absent.h5"));
	memset(&st, 0x5a, sizeof(st));
	CU_ASSERT_EQUAL(inspect_run(&job, &c, &st), XJ_EXIT_INPUT);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "absent.h5: no such file"));
	comm_release(&c);
}

static void remove_tmp(void)
{
	static const char *const names[] = {
		"good.h5", "order.h5", "gap.h5", "padval.h5", "range.h5",
		"negidx.h5", "nan.h5", "two.h5", "ip.h5", "slabs.h5",
		"matrix.h5", "shape.h5", "input.h5", "gen.h5", "text.h5",
		"cut.h5", "in put.h5",
	};

	for (size_t i = 0; i < UNIT_COUNT(names); i++)
		unlink(tmp_path(names[i]));
	rmdir(tmpdir);
}

int main(int argc, char **argv)
{
	static const unit_test tests[] = {
		{ "topk result", test_topk_good },
		{ "broken topk rows", test_topk_broken },
		{ "ip, threshold, self", test_topk_ip },
		{ "slab sizes", test_slab_invariance },
		{ "matrix", test_matrix },
		{ "shapes and attributes", test_structure },
		{ "not a result", test_not_result },
		{ "missing and unreadable", test_missing },
		{ "unfinished runs", test_unfinished },
		{ "options", test_options },
		{ "help", test_help },
		{ "inspect_run", test_run },
	};
	int rc;

	MPI_Init(&argc, &argv);
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	if (!mkdtemp(tmpdir))
		return 1;
	rc = unit_run("inspect", tests, UNIT_COUNT(tests));
	remove_tmp();
	free(R.text);
	MPI_Finalize();
	return rc;
}
