/*
 * test_io.c: unit tests for io/h5in, io/h5out and io/listfile.
 *
 * Fixtures are written from C into a fresh mkdtemp folder under /tmp by
 * rank 0; every rank then reads them. The h5out tests are collective and
 * run the same way under one process or `mpirun -np N`. After each h5in
 * test the number of open HDF5 ids of every kind must be back where it
 * started, so a leaked id on any path fails the test.
 *
 * The real data test uses /work/shared/data/glove-100d-100k.h5 (or
 * $XJ_DATA_DIR/glove-100d-100k.h5) and is skipped with a message when
 * that file is absent.
 */
#define _XOPEN_SOURCE 700

#include <CUnit/Basic.h>
#include <ftw.h>
#include <hdf5.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/h5in.h"
#include "io/h5out.h"
#include "io/listfile.h"

#define NR 7           /* rows of the per-type fixtures */
#define NC 5           /* columns of the per-type fixtures */
#define NV (NR * NC)

static char g_dir[256];
static int g_rank, g_nranks;

static void path_of(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/%s", g_dir, name);
}

static void poison(float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] = NAN;
}

static int file_exists(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0;
}

/* ---- open-id accounting ---------------------------------------------- */

/* HDF5 numbers the ids of one kind consecutively, so the ids handed out
 * during a test lie between two marker ids taken before and after it; any
 * of them still valid afterwards was leaked. Files, groups, datasets and
 * attributes are also counted directly. */
struct id_marks {
	hid_t space, plist, type;
	ssize_t objects;
};
static struct id_marks id_base;

static void ids_take(struct id_marks *m)
{
	m->space = H5Screate(H5S_SCALAR);
	m->plist = H5Pcreate(H5P_FILE_ACCESS);
	m->type = H5Tcopy(H5T_NATIVE_INT);
	H5Sclose(m->space);
	H5Pclose(m->plist);
	H5Tclose(m->type);
	m->objects = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
}

static void ids_mark(void)
{
	ids_take(&id_base);
}

static int ids_leaked(hid_t from, hid_t to, const char *kind)
{
	int leaked = 0;

	for (hid_t id = from + 1; id < to; id++) {
		if (H5Iis_valid(id) > 0) {
			fprintf(stderr, "rank %d: %s id %lld leaked\n",
				g_rank, kind, (long long)id);
			leaked++;
		}
	}
	return leaked;
}

static void ids_check(void)
{
	struct id_marks now;

	ids_take(&now);
	CU_ASSERT(now.space > id_base.space && now.plist > id_base.plist &&
		  now.type > id_base.type);
	CU_ASSERT_EQUAL(ids_leaked(id_base.space, now.space, "dataspace"), 0);
	CU_ASSERT_EQUAL(ids_leaked(id_base.plist, now.plist, "plist"), 0);
	CU_ASSERT_EQUAL(ids_leaked(id_base.type, now.type, "datatype"), 0);
	CU_ASSERT_EQUAL(now.objects, id_base.objects);
}

/* ---- fixtures --------------------------------------------------------- */

static hid_t fx_create(const char *name)
{
	char path[512];

	path_of(path, sizeof(path), name);
	return H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
}

static int fx_dset(hid_t fid, const char *name, hid_t ftype, hid_t mtype,
		   int ndims, const hsize_t *dims, const void *data)
{
	hid_t lcpl = H5Pcreate(H5P_LINK_CREATE), space, dset;
	int rc = -1;

	H5Pset_create_intermediate_group(lcpl, 1);
	space = H5Screate_simple(ndims, dims, NULL);
	dset = H5Dcreate2(fid, name, ftype, space, lcpl, H5P_DEFAULT,
			  H5P_DEFAULT);
	if (dset >= 0 && (!data || H5Dwrite(dset, mtype, H5S_ALL, H5S_ALL,
					    H5P_DEFAULT, data) >= 0))
		rc = 0;
	if (dset >= 0)
		H5Dclose(dset);
	H5Sclose(space);
	H5Pclose(lcpl);
	return rc;
}

static int fx_f32(hid_t fid, const char *name, hsize_t rows, hsize_t cols,
		  const float *data)
{
	hsize_t dims[2] = { rows, cols };

	return fx_dset(fid, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, dims,
		       data);
}

/* One dataset per numeric type, NR x NC, with values that use the range
 * of the type (signs, high bits); the expected float32 is C's cast of the
 * same value. */
struct type_case {
	const char *name;
	hid_t (*ftype)(void);
	hid_t (*mtype)(void);
	const char *desc;
	void (*fill)(void *buf, float *expect);
};

#define FILL_FN(fn, T, expr)                                           \
	static void fn(void *buf, float *expect)                       \
	{                                                              \
		T *v = buf;                                            \
		for (int i = 0; i < NV; i++) {                         \
			v[i] = (T)(expr);                              \
			expect[i] = (float)v[i];                       \
		}                                                      \
	}

FILL_FN(fill_u8, uint8_t, 255 - 3 * i)
FILL_FN(fill_i8, int8_t, -128 + 7 * i)
FILL_FN(fill_u16, uint16_t, 65535 - 1000 * i)
FILL_FN(fill_i16, int16_t, -32768 + 1871 * i)
FILL_FN(fill_u32, uint32_t, 4294967295u - 100000007u * (uint32_t)i)
FILL_FN(fill_i32, int32_t, INT32_MIN + (int64_t)122222221 * i)
FILL_FN(fill_u64, uint64_t, UINT64_MAX - (uint64_t)i * 0x0123456789abcdefull)
FILL_FN(fill_i64, int64_t, INT64_MIN + (int64_t)i * 0x0234567890abcdefll)
FILL_FN(fill_f32, float, (i - 17) * 0.37f + 1e-3f * i + (i == 3) * 3e38f)
FILL_FN(fill_f64, double, (i - 17.5) * 1e10 / 3.0 + (i == 4) * 1e-30)

#define TYPE_FN(fn, t) static hid_t fn(void) { return t; }
TYPE_FN(t_u8le, H5T_STD_U8LE) TYPE_FN(t_u8n, H5T_NATIVE_UINT8)
TYPE_FN(t_i8le, H5T_STD_I8LE) TYPE_FN(t_i8n, H5T_NATIVE_INT8)
TYPE_FN(t_u16le, H5T_STD_U16LE) TYPE_FN(t_u16n, H5T_NATIVE_UINT16)
TYPE_FN(t_i16le, H5T_STD_I16LE) TYPE_FN(t_i16n, H5T_NATIVE_INT16)
TYPE_FN(t_i16be, H5T_STD_I16BE)
TYPE_FN(t_u32le, H5T_STD_U32LE) TYPE_FN(t_u32n, H5T_NATIVE_UINT32)
TYPE_FN(t_i32le, H5T_STD_I32LE) TYPE_FN(t_i32n, H5T_NATIVE_INT32)
TYPE_FN(t_u64le, H5T_STD_U64LE) TYPE_FN(t_u64n, H5T_NATIVE_UINT64)
TYPE_FN(t_i64le, H5T_STD_I64LE) TYPE_FN(t_i64n, H5T_NATIVE_INT64)
TYPE_FN(t_f32le, H5T_IEEE_F32LE) TYPE_FN(t_f32n, H5T_NATIVE_FLOAT)
TYPE_FN(t_f64le, H5T_IEEE_F64LE) TYPE_FN(t_f64n, H5T_NATIVE_DOUBLE)
TYPE_FN(t_f64be, H5T_IEEE_F64BE)

static const struct type_case type_cases[] = {
	{ "u8", t_u8le, t_u8n, "uint8", fill_u8 },
	{ "i8", t_i8le, t_i8n, "int8", fill_i8 },
	{ "u16", t_u16le, t_u16n, "uint16", fill_u16 },
	{ "i16", t_i16le, t_i16n, "int16", fill_i16 },
	{ "i16be", t_i16be, t_i16n, "int16", fill_i16 },
	{ "u32", t_u32le, t_u32n, "uint32", fill_u32 },
	{ "i32", t_i32le, t_i32n, "int32", fill_i32 },
	{ "u64", t_u64le, t_u64n, "uint64", fill_u64 },
	{ "i64", t_i64le, t_i64n, "int64", fill_i64 },
	{ "f32", t_f32le, t_f32n, "float32", fill_f32 },
	{ "f64", t_f64le, t_f64n, "float64", fill_f64 },
	{ "f64be", t_f64be, t_f64n, "float64", fill_f64 },
};
#define NTYPES (sizeof(type_cases) / sizeof(type_cases[0]))

static int fx_types(void)
{
	hsize_t dims[2] = { NR, NC };
	uint64_t buf[NV];
	float expect[NV];
	hid_t fid = fx_create("types.h5");
	int rc = fid < 0;

	for (size_t t = 0; t < NTYPES && !rc; t++) {
		const struct type_case *c = &type_cases[t];

		c->fill(buf, expect);
		rc = fx_dset(fid, c->name, c->ftype(), c->mtype(), 2, dims,
			     buf);
	}
	if (fid >= 0)
		H5Fclose(fid);
	return rc;
}

static float slab_value(int r, int c)
{
	return (float)(r * 10 + c) + 0.25f;
}

/* Defaults (test/train), only-one, several, none, and bad datasets. */
static int fx_layouts(void)
{
	float m[50 * 7], small[8 * 3];
	hsize_t d1[1] = { 10 }, d3[3] = { 2, 3, 4 }, d2[2] = { 2, 3 };
	hsize_t d0r[2] = { 0, 4 }, d0c[2] = { 4, 0 };
	char strs[6][4] = { "a", "b", "c", "d", "e", "f" };
	int rc = 0, i;
	hid_t fid, st, ct, et;

	for (i = 0; i < 50 * 7; i++)
		m[i] = slab_value(i / 7, i % 7);
	for (i = 0; i < 8 * 3; i++)
		small[i] = 1.5f + i;

	fid = fx_create("slab.h5");
	rc |= fid < 0 || fx_f32(fid, "m", 50, 7, m);
	H5Fclose(fid);

	fid = fx_create("tt.h5");
	rc |= fid < 0 || fx_f32(fid, "test", 3, 4, small) ||
	      fx_f32(fid, "train", 5, 4, small) ||
	      fx_f32(fid, "other", 2, 2, small);
	H5Fclose(fid);

	fid = fx_create("only.h5");
	rc |= fid < 0 || fx_f32(fid, "g/data", 6, 3, small) ||
	      fx_dset(fid, "labels", H5T_STD_I32LE, H5T_NATIVE_FLOAT, 1, d1,
		      small) ||
	      fx_dset(fid, "cube", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 3, d3,
		      NULL);
	H5Fclose(fid);

	fid = fx_create("several.h5");
	rc |= fid < 0 || fx_f32(fid, "a", 2, 2, small) ||
	      fx_f32(fid, "g/b", 3, 2, small);
	H5Fclose(fid);

	fid = fx_create("none.h5");
	rc |= fid < 0 || fx_dset(fid, "g/v", H5T_IEEE_F32LE,
				 H5T_NATIVE_FLOAT, 1, d1, small);
	H5Fclose(fid);

	fid = fx_create("errs.h5");
	st = H5Tcopy(H5T_C_S1);
	H5Tset_size(st, 4);
	ct = H5Tcreate(H5T_COMPOUND, 8);
	H5Tinsert(ct, "x", 0, H5T_NATIVE_FLOAT);
	H5Tinsert(ct, "y", 4, H5T_NATIVE_FLOAT);
	et = H5Tenum_create(H5T_NATIVE_INT);
	i = 1;
	H5Tenum_insert(et, "one", &i);
	rc |= fid < 0 ||
	      fx_dset(fid, "one", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, d1,
		      small) ||
	      fx_dset(fid, "three", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 3, d3,
		      NULL) ||
	      fx_dset(fid, "str", st, st, 2, d2, strs) ||
	      fx_dset(fid, "comp", ct, ct, 2, d2, NULL) ||
	      fx_dset(fid, "enum", et, et, 2, d2, NULL) ||
	      fx_dset(fid, "norows", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, d0r,
		      NULL) ||
	      fx_dset(fid, "nocols", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, d0c,
		      NULL);
	H5Tclose(st);
	H5Tclose(ct);
	H5Tclose(et);
	H5Fclose(fid);

	/* value errors */
	fid = fx_create("vals.h5");
	small[5 * 3 + 1] = NAN;
	rc |= fid < 0 || fx_f32(fid, "nan", 8, 3, small);
	small[5 * 3 + 1] = 1.0f;
	small[2 * 3 + 2] = INFINITY;
	rc |= fx_f32(fid, "inf", 8, 3, small);
	{
		double big[4 * 2] = { 1, 2, 3, 4, 5, 6, 1e300, 8 };
		hsize_t db[2] = { 4, 2 };

		rc |= fx_dset(fid, "big", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 2,
			      db, big);
	}
	H5Fclose(fid);
	return rc;
}

/* A text file, the first half of a real HDF5 file, and a named pipe. */
static int fx_broken(void)
{
	char path[512], src[512];
	FILE *f, *in;
	long size;
	char *buf;
	int rc = 0;

	path_of(path, sizeof(path), "text.h5");
	f = fopen(path, "w");
	if (!f)
		return -1;
	fputs("this is not an HDF5 file, only some text\n", f);
	fclose(f);

	path_of(src, sizeof(src), "slab.h5");
	path_of(path, sizeof(path), "trunc.h5");
	in = fopen(src, "rb");
	if (!in)
		return -1;
	fseek(in, 0, SEEK_END);
	size = ftell(in);
	rewind(in);
	buf = malloc(size);
	if (!buf || fread(buf, 1, size, in) != (size_t)size)
		rc = -1;
	fclose(in);
	f = fopen(path, "wb");
	if (!f || rc || fwrite(buf, 1, size / 2, f) != (size_t)(size / 2))
		rc = -1;
	if (f)
		fclose(f);
	free(buf);

	path_of(path, sizeof(path), "we:ird.h5");
	f = fopen(path, "w");
	if (!f)
		return -1;
	fclose(f);

	/* nobody ever writes to it: opening it to read would block */
	path_of(path, sizeof(path), "pipe.h5");
	if (mkfifo(path, 0600) != 0)
		return -1;
	return rc;
}

/* Headers that promise more than is stored: a 10^12-row chunked dataset
 * with one chunk written, and a contiguous one never written. */
static int fx_sparse(void)
{
	hsize_t huge[2] = { 1000000000000ULL, 8 }, chunk[2] = { 1024, 8 };
	hsize_t small[2] = { 1000, 8 }, start[2] = { 0, 0 };
	hid_t fid = fx_create("sparse.h5"), space, dcpl, dset, mem;
	float *rows = calloc(1024 * 8, sizeof(float));
	int rc = 0;

	if (fid < 0 || !rows)
		return -1;
	for (int i = 0; i < 1024 * 8; i++)
		rows[i] = (float)(i % 97) + 1.0f;
	space = H5Screate_simple(2, huge, NULL);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	H5Pset_chunk(dcpl, 2, chunk);
	dset = H5Dcreate2(fid, "huge", H5T_IEEE_F32LE, space, H5P_DEFAULT,
			  dcpl, H5P_DEFAULT);
	mem = H5Screate_simple(2, chunk, NULL);
	H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, chunk, NULL);
	if (dset < 0 || H5Dwrite(dset, H5T_NATIVE_FLOAT, mem, space,
				 H5P_DEFAULT, rows) < 0)
		rc = -1;
	H5Sclose(mem);
	H5Dclose(dset);
	H5Sclose(space);
	H5Pclose(dcpl);

	space = H5Screate_simple(2, small, NULL);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_LATE);
	dset = H5Dcreate2(fid, "unwritten", H5T_IEEE_F32LE, space, H5P_DEFAULT,
			  dcpl, H5P_DEFAULT);
	if (dset < 0)
		rc = -1;
	H5Dclose(dset);
	H5Sclose(space);
	H5Pclose(dcpl);
	H5Fclose(fid);
	free(rows);
	return rc;
}

/* gzip chunks of 16 x 16; the bytes of the chunk holding rows 32..47 are
 * overwritten, so opening works and only reading those rows fails. */
static int fx_corrupt(void)
{
	hsize_t dims[2] = { 64, 16 }, chunk[2] = { 16, 16 };
	hsize_t at[2] = { 32, 0 }, size = 0;
	haddr_t addr = HADDR_UNDEF;
	unsigned mask;
	float v[64 * 16];
	char path[512], junk[4096];
	hid_t fid, space, dcpl, dset;
	FILE *f;
	int rc = 0;

	for (int i = 0; i < 64 * 16; i++)
		v[i] = 1.0f + 0.5f * i;
	fid = fx_create("gz.h5");
	space = H5Screate_simple(2, dims, NULL);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	H5Pset_chunk(dcpl, 2, chunk);
	H5Pset_deflate(dcpl, 6);
	dset = H5Dcreate2(fid, "z", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl,
			  H5P_DEFAULT);
	if (dset < 0 || H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL,
				 H5P_DEFAULT, v) < 0 ||
	    H5Dget_chunk_info_by_coord(dset, at, &mask, &addr, &size) < 0 ||
	    size == 0 || size > sizeof(junk))
		rc = -1;
	H5Dclose(dset);
	H5Pclose(dcpl);
	H5Sclose(space);
	H5Fclose(fid);
	if (rc)
		return rc;
	memset(junk, 0xff, sizeof(junk));
	path_of(path, sizeof(path), "gz.h5");
	f = fopen(path, "r+b");
	if (!f || fseek(f, (long)addr, SEEK_SET) != 0 ||
	    fwrite(junk, 1, size, f) != size)
		rc = -1;
	if (f)
		fclose(f);
	return rc;
}

static int suite_init(void)
{
	int rc = 0;

	MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &g_nranks);
	/* failures below are expected and reported through xj_status */
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	if (g_rank == 0) {
		strcpy(g_dir, "/tmp/xj_test_io.XXXXXX");
		if (!mkdtemp(g_dir))
			rc = -1;
		if (!rc)
			rc = fx_types() || fx_layouts() || fx_broken() ||
			     fx_corrupt() || fx_sparse();
		if (rc)
			fprintf(stderr, "test_io: cannot write fixtures in "
				"%s\n", g_dir);
	}
	MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
	MPI_Bcast(g_dir, sizeof(g_dir), MPI_CHAR, 0, MPI_COMM_WORLD);
	return rc;
}

static int rm_one(const char *path, const struct stat *sb, int flag,
		  struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int suite_clean(void)
{
	MPI_Barrier(MPI_COMM_WORLD);
	if (g_rank == 0 && g_dir[0])
		nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}

/* ---- h5in ------------------------------------------------------------- */

static void test_parse_spec(void)
{
	char file[XJ_PATH_MAX], dset[XJ_NAME_MAX], spec[600], weird[512];
	xj_status st;

	CU_ASSERT_EQUAL(h5in_parse_spec("a.h5", file, dset, &st), XJ_OK);
	CU_ASSERT_STRING_EQUAL(file, "a.h5");
	CU_ASSERT_STRING_EQUAL(dset, "");
	CU_ASSERT_EQUAL(h5in_parse_spec("a.h5:train", file, dset, &st), XJ_OK);
	CU_ASSERT_STRING_EQUAL(file, "a.h5");
	CU_ASSERT_STRING_EQUAL(dset, "train");
	CU_ASSERT_EQUAL(h5in_parse_spec("d:x/a.h5:/g/d", file, dset, &st),
			XJ_OK);
	CU_ASSERT_STRING_EQUAL(file, "d:x/a.h5");
	CU_ASSERT_STRING_EQUAL(dset, "/g/d");
	CU_ASSERT_EQUAL(h5in_parse_spec("a.h5:", file, dset, &st), XJ_OK);
	CU_ASSERT_STRING_EQUAL(file, "a.h5");
	CU_ASSERT_STRING_EQUAL(dset, "");

	/* an existing file whose name holds ':' is taken whole */
	path_of(weird, sizeof(weird), "we:ird.h5");
	CU_ASSERT_EQUAL(h5in_parse_spec(weird, file, dset, &st), XJ_OK);
	CU_ASSERT_STRING_EQUAL(file, weird);
	CU_ASSERT_STRING_EQUAL(dset, "");
	snprintf(spec, sizeof(spec), "%s:/x", weird);
	CU_ASSERT_EQUAL(h5in_parse_spec(spec, file, dset, &st), XJ_OK);
	CU_ASSERT_STRING_EQUAL(file, weird);
	CU_ASSERT_STRING_EQUAL(dset, "/x");

	CU_ASSERT_EQUAL(h5in_parse_spec("", file, dset, &st), XJ_EXIT_USAGE);
	CU_ASSERT_EQUAL(h5in_parse_spec(":x", file, dset, &st), XJ_EXIT_USAGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, ":x"));
}

static void test_types(void)
{
	char path[512];
	uint64_t raw[NV];
	float expect[NV], got[NV];
	h5in_info info;
	xj_status st;
	h5in *h;

	path_of(path, sizeof(path), "types.h5");
	ids_mark();
	for (size_t t = 0; t < NTYPES; t++) {
		const struct type_case *c = &type_cases[t];
		int bad = 0;

		c->fill(raw, expect);
		CU_ASSERT_EQUAL_FATAL(h5in_probe(path, c->name, "test", &info,
						 &st), XJ_OK);
		CU_ASSERT_EQUAL(info.rows, NR);
		CU_ASSERT_EQUAL(info.cols, NC);
		CU_ASSERT_STRING_EQUAL(info.type_desc, c->desc);
		CU_ASSERT_STRING_EQUAL(info.file, path);
		CU_ASSERT_EQUAL(info.dset[0], '/');
		CU_ASSERT_STRING_EQUAL(info.dset + 1, c->name);
		CU_ASSERT_EQUAL_FATAL(h5in_open(&info, &h, &st), XJ_OK);
		poison(got, NV);
		CU_ASSERT_EQUAL(h5in_read(h, 0, NR, got, &st), XJ_OK);
		for (int i = 0; i < NV; i++) {
			if (got[i] == expect[i] && expect[i] != 0.0f)
				continue;
			if (!bad++)
				fprintf(stderr, "%s[%d]: got %.9g expected "
					"%.9g\n", c->name, i, got[i],
					expect[i]);
		}
		CU_ASSERT_EQUAL(bad, 0);
		h5in_close(h);
	}
	ids_check();
}

static void probe_expect(const char *name, const char *dset,
			 const char *def, const char *want, int64_t rows,
			 int64_t cols)
{
	char path[512];
	h5in_info info;
	xj_status st;

	path_of(path, sizeof(path), name);
	CU_ASSERT_EQUAL(h5in_probe(path, dset, def, &info, &st), XJ_OK);
	if (st.code)
		fprintf(stderr, "%s\n", st.msg);
	CU_ASSERT_STRING_EQUAL(info.dset, want);
	CU_ASSERT_EQUAL(info.rows, rows);
	CU_ASSERT_EQUAL(info.cols, cols);
}

/* Fails with XJ_EXIT_INPUT and a message holding every needle. */
static void probe_fails(const char *name, const char *dset, const char *def,
			const char *n1, const char *n2)
{
	char path[512];
	h5in_info info;
	xj_status st;

	path_of(path, sizeof(path), name);
	CU_ASSERT_EQUAL(h5in_probe(path, dset, def, &info, &st),
			XJ_EXIT_INPUT);
	CU_ASSERT_EQUAL(st.code, XJ_EXIT_INPUT);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, path));
	if (n1)
		CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, n1));
	if (n2)
		CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, n2));
	if (!strstr(st.msg, path) || (n1 && !strstr(st.msg, n1)) ||
	    (n2 && !strstr(st.msg, n2)))
		fprintf(stderr, "unexpected message: %s\n", st.msg);
	else if (getenv("XJ_TEST_VERBOSE"))
		fprintf(stderr, "\n  %s", st.msg);
}

static void test_resolve(void)
{
	ids_mark();
	probe_expect("tt.h5", "", "test", "/test", 3, 4);
	probe_expect("tt.h5", "", "train", "/train", 5, 4);
	probe_expect("tt.h5", "", "/train", "/train", 5, 4);
	probe_expect("tt.h5", "other", "test", "/other", 2, 2);
	probe_expect("tt.h5", "/other", "train", "/other", 2, 2);
	probe_expect("only.h5", "", "test", "/g/data", 6, 3);
	probe_expect("only.h5", "", "", "/g/data", 6, 3);
	probe_expect("only.h5", "g/data", "", "/g/data", 6, 3);
	probe_fails("several.h5", "", "test", "/a", "/g/b");
	probe_fails("none.h5", "", "train", "no 2-D dataset", NULL);
	probe_fails("only.h5", "g", "test", "/g", "group");
	probe_fails("only.h5", "/nope/x", "test", "/nope/x", "no such");
	probe_fails("only.h5", "/", "test", "group", NULL);
	ids_check();
}

static void test_probe_errors(void)
{
	ids_mark();
	probe_fails("missing.h5", "test", "", "test", "No such file");
	probe_fails("text.h5", "", "test", "not an HDF5 file", NULL);
	probe_fails("pipe.h5", "", "test", "named pipe (FIFO)", NULL);
	probe_fails("trunc.h5", "m", "", "/m", "truncated");
	probe_fails("types.h5", "nope", "", "/nope", "no such dataset");
	probe_fails("errs.h5", "one", "", "/one", "1-D");
	probe_fails("errs.h5", "three", "", "/three", "3-D");
	probe_fails("errs.h5", "str", "", "/str", "string");
	probe_fails("errs.h5", "comp", "", "/comp", "compound");
	probe_fails("errs.h5", "enum", "", "/enum", "enum");
	/* an empty input probes; app/ refuses an empty base */
	probe_expect("errs.h5", "norows", "", "/norows", 0, 4);
	probe_fails("errs.h5", "nocols", "", "/nocols", "0 columns");
	probe_fails("only.h5", "cube", "", "/cube", "3-D");
	probe_fails("sparse.h5", "huge", "", "/huge", "1 of its");
	probe_fails("sparse.h5", "unwritten", "", "/unwritten", "stores 0");
	ids_check();
}

/* Read name's rows [row0, row0 + rows): expect XJ_EXIT_INPUT naming it. */
static void read_fails(const char *dset, int64_t row0, int64_t rows,
		       const char *needle)
{
	char path[512], want[600];
	float buf[8 * 3];
	h5in_info info;
	xj_status st;
	h5in *h;

	path_of(path, sizeof(path), "vals.h5");
	CU_ASSERT_EQUAL_FATAL(h5in_probe(path, dset, "", &info, &st), XJ_OK);
	CU_ASSERT_EQUAL_FATAL(h5in_open(&info, &h, &st), XJ_OK);
	poison(buf, 8 * 3);
	CU_ASSERT_EQUAL(h5in_read(h, row0, rows, buf, &st), XJ_EXIT_INPUT);
	snprintf(want, sizeof(want), "%s:/%s: %s", path, dset, needle);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, want));
	if (!strstr(st.msg, want))
		fprintf(stderr, "got '%s', wanted '%s'\n", st.msg, want);
	else if (getenv("XJ_TEST_VERBOSE"))
		fprintf(stderr, "\n  %s", st.msg);
	h5in_close(h);
}

static void test_values(void)
{
	char path[512];
	float buf[8 * 3];
	h5in_info info;
	xj_status st;
	h5in *h;

	ids_mark();
	read_fails("nan", 0, 8, "row 5 column 1 is NaN");
	read_fails("nan", 3, 4, "row 5 column 1 is NaN");
	read_fails("inf", 0, 8, "row 2 column 2 is Inf");
	read_fails("big", 0, 4, "row 3 column 0 is out of float32 range");

	/* rows before the bad one read fine */
	path_of(path, sizeof(path), "vals.h5");
	CU_ASSERT_EQUAL_FATAL(h5in_probe(path, "nan", "", &info, &st), XJ_OK);
	CU_ASSERT_EQUAL_FATAL(h5in_open(&info, &h, &st), XJ_OK);
	poison(buf, 8 * 3);
	CU_ASSERT_EQUAL(h5in_read(h, 0, 5, buf, &st), XJ_OK);
	CU_ASSERT_EQUAL(buf[0], 1.5f);
	CU_ASSERT_EQUAL(buf[14], 15.5f);
	CU_ASSERT_EQUAL(h5in_read(h, 6, 2, buf, &st), XJ_OK);
	CU_ASSERT_EQUAL(buf[0], 19.5f);
	h5in_close(h);
	ids_check();
}

static void test_corrupt_read(void)
{
	char path[512], want[600];
	float buf[64 * 16];
	h5in_info info;
	xj_status st;
	h5in *h;

	path_of(path, sizeof(path), "gz.h5");
	ids_mark();
	CU_ASSERT_EQUAL_FATAL(h5in_probe(path, "z", "", &info, &st), XJ_OK);
	CU_ASSERT_EQUAL_FATAL(h5in_open(&info, &h, &st), XJ_OK);
	poison(buf, 64 * 16);
	CU_ASSERT_EQUAL(h5in_read(h, 8, 24, buf, &st), XJ_OK);
	CU_ASSERT_EQUAL(buf[0], 1.0f + 0.5f * 8 * 16);
	CU_ASSERT_EQUAL(buf[24 * 16 - 1], 1.0f + 0.5f * (32 * 16 - 1));
	CU_ASSERT_EQUAL(h5in_read(h, 30, 4, buf, &st), XJ_EXIT_INPUT);
	snprintf(want, sizeof(want), "%s:/z: rows [30, 34): read failed",
		 path);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, want));
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "H5Dread"));
	if (getenv("XJ_TEST_VERBOSE") || !strstr(st.msg, want))
		fprintf(stderr, "\n  %s", st.msg);
	/* the handle stays usable for healthy rows */
	CU_ASSERT_EQUAL(h5in_read(h, 48, 16, buf, &st), XJ_OK);
	CU_ASSERT_EQUAL(buf[0], 1.0f + 0.5f * 48 * 16);
	h5in_close(h);
	ids_check();
}

static void test_slabs(void)
{
	static const int64_t cuts[][2] = {
		{ 0, 50 }, { 13, 9 }, { 45, 5 }, { 49, 1 }, { 0, 1 },
	};
	char path[512];
	float buf[50 * 7];
	h5in_info info;
	xj_status st;
	h5in *h;

	path_of(path, sizeof(path), "slab.h5");
	ids_mark();
	CU_ASSERT_EQUAL_FATAL(h5in_probe(path, "", "train", &info, &st), XJ_OK);
	CU_ASSERT_STRING_EQUAL(info.dset, "/m");
	CU_ASSERT_EQUAL_FATAL(h5in_open(&info, &h, &st), XJ_OK);
	for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
		int64_t row0 = cuts[k][0], rows = cuts[k][1];
		int bad = 0;

		poison(buf, 50 * 7);
		CU_ASSERT_EQUAL(h5in_read(h, row0, rows, buf, &st), XJ_OK);
		for (int64_t i = 0; i < rows * 7; i++)
			bad += buf[i] != slab_value(row0 + i / 7, i % 7);
		for (int64_t i = rows * 7; i < 50 * 7; i++)
			bad += !isnan(buf[i]);
		CU_ASSERT_EQUAL(bad, 0);
	}
	/* rows = 0 reads nothing, even at the end */
	poison(buf, 50 * 7);
	CU_ASSERT_EQUAL(h5in_read(h, 50, 0, buf, &st), XJ_OK);
	CU_ASSERT(isnan(buf[0]));
	CU_ASSERT_EQUAL(h5in_read(h, 0, 0, NULL, &st), XJ_OK);
	/* past the end is a caller bug */
	CU_ASSERT_EQUAL(h5in_read(h, 45, 6, buf, &st), XJ_EXIT_INTERNAL);
	CU_ASSERT_EQUAL(h5in_read(h, -1, 2, buf, &st), XJ_EXIT_INTERNAL);
	h5in_close(h);
	h5in_close(NULL);
	ids_check();
}

static void test_real_data(void)
{
	const char *env = getenv("XJ_DATA_DIR");
	char path[1024];
	h5in_info q, b;
	xj_status st;
	float *tail, *big;
	h5in *h;

	snprintf(path, sizeof(path), "%s/glove-100d-100k.h5",
		 env ? env : "/work/shared/data");
	if (!file_exists(path)) {
		if (g_rank == 0)
			fprintf(stderr, "\nskipped: %s not present\n", path);
		return;
	}
	ids_mark();
	CU_ASSERT_EQUAL_FATAL(h5in_probe(path, "", "test", &q, &st), XJ_OK);
	CU_ASSERT_STRING_EQUAL(q.dset, "/test");
	CU_ASSERT_EQUAL(q.rows, 1000);
	CU_ASSERT_EQUAL(q.cols, 100);
	CU_ASSERT_STRING_EQUAL(q.type_desc, "float32");
	CU_ASSERT_EQUAL_FATAL(h5in_probe(path, "", "train", &b, &st), XJ_OK);
	CU_ASSERT_STRING_EQUAL(b.dset, "/train");
	CU_ASSERT_EQUAL(b.rows, 100000);
	CU_ASSERT_EQUAL(b.cols, 100);

	tail = malloc(10 * 100 * sizeof(float));
	big = malloc(1000 * 100 * sizeof(float));
	CU_ASSERT_FATAL(tail && big);
	poison(tail, 10 * 100);
	poison(big, 1000 * 100);
	CU_ASSERT_EQUAL_FATAL(h5in_open(&b, &h, &st), XJ_OK);
	CU_ASSERT_EQUAL(h5in_read(h, 99990, 10, tail, &st), XJ_OK);
	CU_ASSERT_EQUAL(h5in_read(h, 99000, 1000, big, &st), XJ_OK);
	CU_ASSERT_EQUAL(memcmp(tail, big + 990 * 100, 10 * 100 *
			       sizeof(float)), 0);
	{
		int nonzero = 0;

		for (int i = 0; i < 10 * 100; i++)
			nonzero += tail[i] != 0.0f && isfinite(tail[i]);
		CU_ASSERT(nonzero > 900);
	}
	h5in_close(h);

	/* and the queries, all of them */
	CU_ASSERT_EQUAL_FATAL(h5in_open(&q, &h, &st), XJ_OK);
	poison(big, 1000 * 100);
	CU_ASSERT_EQUAL(h5in_read(h, 0, 1000, big, &st), XJ_OK);
	CU_ASSERT(isfinite(big[999 * 100 + 99]));
	h5in_close(h);
	free(tail);
	free(big);
	ids_check();
}

/* ---- h5out ------------------------------------------------------------ */

/* Every rank holds the same code and message. */
static void check_agreed(const xj_status *st)
{
	xj_status root = *st;

	MPI_Bcast(&root, sizeof(root), MPI_BYTE, 0, MPI_COMM_WORLD);
	CU_ASSERT_EQUAL(root.code, st->code);
	CU_ASSERT_STRING_EQUAL(root.msg, st->msg);
}

static int64_t nb_value(int64_t r, int64_t c)
{
	return r * 100 + c + 1;
}

static float dist_value(int64_t r, int64_t c)
{
	return (float)r + 0.25f * (float)c + 0.5f;
}

#define ON 10   /* output rows */
#define NK 4    /* output columns (k) */
#define OM 9    /* columns of the column-split matrix */

static void read_attr_str(hid_t fid, const char *name, char *buf,
			  size_t size)
{
	hid_t attr = H5Aopen(fid, name, H5P_DEFAULT);
	hid_t type = H5Aget_type(attr);

	CU_ASSERT_EQUAL(H5Tget_class(type), H5T_STRING);
	CU_ASSERT_EQUAL(H5Tget_cset(type), H5T_CSET_UTF8);
	CU_ASSERT_EQUAL(H5Tget_strpad(type), H5T_STR_NULLTERM);
	CU_ASSERT_FALSE(H5Tis_variable_str(type));
	CU_ASSERT(H5Tget_size(type) < size);
	memset(buf, 0, size);
	CU_ASSERT(H5Aread(attr, type, buf) >= 0);
	H5Tclose(type);
	H5Aclose(attr);
}

static void check_layout(hid_t fid, const char *name, hsize_t r, hsize_t c)
{
	hid_t dset = H5Dopen2(fid, name, H5P_DEFAULT);
	hid_t dcpl = H5Dget_create_plist(dset);
	hsize_t chunk[2] = { 0, 0 };

	if (r == 0) {
		CU_ASSERT_EQUAL(H5Pget_layout(dcpl), H5D_CONTIGUOUS);
	} else {
		CU_ASSERT_EQUAL(H5Pget_layout(dcpl), H5D_CHUNKED);
		CU_ASSERT_EQUAL(H5Pget_chunk(dcpl, 2, chunk), 2);
		CU_ASSERT_EQUAL(chunk[0], r);
		CU_ASSERT_EQUAL(chunk[1], c);
		CU_ASSERT(chunk[0] * chunk[1] * 4 <= (4u << 20));
	}
	H5Pclose(dcpl);
	H5Dclose(dset);
}

/* Read back what test_write_read wrote, through h5in and raw HDF5. */
static void check_written(const char *out)
{
	float got[ON * OM];
	h5in_info info;
	xj_status st;
	h5in *h;
	int bad = 0;
	char s[64];
	int64_t k = 0;
	double thr = 0;
	hid_t fid, attr;

	CU_ASSERT_EQUAL_FATAL(h5in_probe(out, "neighbors", "", &info, &st),
			      XJ_OK);
	CU_ASSERT_STRING_EQUAL(info.type_desc, "int64");
	CU_ASSERT_EQUAL(info.rows, ON);
	CU_ASSERT_EQUAL(info.cols, NK);
	CU_ASSERT_EQUAL_FATAL(h5in_open(&info, &h, &st), XJ_OK);
	poison(got, ON * OM);
	CU_ASSERT_EQUAL(h5in_read(h, 0, ON, got, &st), XJ_OK);
	for (int i = 0; i < ON * NK; i++)
		bad += got[i] != (float)nb_value(i / NK, i % NK);
	h5in_close(h);

	CU_ASSERT_EQUAL_FATAL(h5in_probe(out, "/distances", "", &info, &st),
			      XJ_OK);
	CU_ASSERT_STRING_EQUAL(info.type_desc, "float32");
	CU_ASSERT_EQUAL_FATAL(h5in_open(&info, &h, &st), XJ_OK);
	poison(got, ON * OM);
	CU_ASSERT_EQUAL(h5in_read(h, 0, ON, got, &st), XJ_OK);
	for (int i = 0; i < ON * NK; i++)
		bad += got[i] != dist_value(i / NK, i % NK);
	h5in_close(h);

	CU_ASSERT_EQUAL_FATAL(h5in_probe(out, "g/m", "", &info, &st), XJ_OK);
	CU_ASSERT_EQUAL(info.cols, OM);
	CU_ASSERT_EQUAL_FATAL(h5in_open(&info, &h, &st), XJ_OK);
	poison(got, ON * OM);
	CU_ASSERT_EQUAL(h5in_read(h, 0, ON, got, &st), XJ_OK);
	for (int i = 0; i < ON * OM; i++)
		bad += got[i] != dist_value(i / OM, i % OM);
	h5in_close(h);
	CU_ASSERT_EQUAL(bad, 0);

	fid = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
	CU_ASSERT_FATAL(fid >= 0);
	read_attr_str(fid, "metric", s, sizeof(s));
	CU_ASSERT_STRING_EQUAL(s, "cosine");
	read_attr_str(fid, "note", s, sizeof(s));
	CU_ASSERT_STRING_EQUAL(s, "d\xc3\xa9j\xc3\xa0 vu");
	read_attr_str(fid, "empty", s, sizeof(s));
	CU_ASSERT_STRING_EQUAL(s, "");
	attr = H5Aopen(fid, "k", H5P_DEFAULT);
	CU_ASSERT(H5Aread(attr, H5T_NATIVE_INT64, &k) >= 0);
	H5Aclose(attr);
	CU_ASSERT_EQUAL(k, -((int64_t)1 << 40));
	attr = H5Aopen(fid, "threshold", H5P_DEFAULT);
	CU_ASSERT(H5Aread(attr, H5T_NATIVE_DOUBLE, &thr) >= 0);
	H5Aclose(attr);
	CU_ASSERT_EQUAL(thr, 0.1);
	check_layout(fid, "neighbors", 3, NK);
	check_layout(fid, "distances", 0, 0);
	check_layout(fid, "tall", 10485, 100);
	check_layout(fid, "wide", 1, 1048576);
	check_layout(fid, "g/m", 4, 2);
	check_layout(fid, "blocks", 256, 4096);
	H5Fclose(fid);
}

static void test_write_read(void)
{
	int64_t nb[ON * NK], rows = ON / g_nranks, row0 = g_rank * rows;
	float dist[ON * NK], m[ON * OM];
	int64_t cols = OM / g_nranks, col0 = g_rank * cols;
	char out[512], partial[600];
	int s_nb, s_d, s_m, s_t, s_w, s_b;
	xj_status st;
	h5out *h;

	if (g_rank == g_nranks - 1) {
		rows = ON - row0;
		cols = OM - col0;
	}
	path_of(out, sizeof(out), "out.h5");
	h5out_partial_path(out, partial, sizeof(partial));
	CU_ASSERT_STRING_EQUAL(partial + strlen(out), ".partial");

	ids_mark();
	CU_ASSERT_EQUAL_FATAL(h5out_create(MPI_COMM_WORLD, out, 0, &h, &st),
			      XJ_OK);
	CU_ASSERT(file_exists(partial));
	CU_ASSERT_FALSE(file_exists(out));
	CU_ASSERT_EQUAL(h5out_add_dataset(h, "neighbors", H5OUT_I64, ON, NK, 3,
					  &s_nb, &st), XJ_OK);
	CU_ASSERT_EQUAL(h5out_add_dataset(h, "/distances", H5OUT_F32, ON, NK,
					  0, &s_d, &st), XJ_OK);
	/* chunks of 4 x 2: the ranks' column splits cut through them */
	CU_ASSERT_EQUAL(h5out_add_dataset_tiled(h, "g/m", H5OUT_F32, ON, OM, 4,
						2, &s_m, &st), XJ_OK);
	/* chunk caps: 4 MiB / (100 * 4 bytes) rows; one row over 4 MiB */
	CU_ASSERT_EQUAL(h5out_add_dataset(h, "tall", H5OUT_F32, 20000, 100,
					  20000, &s_t, &st), XJ_OK);
	CU_ASSERT_EQUAL(h5out_add_dataset(h, "wide", H5OUT_F32, 2, 1500000, 8,
					  &s_w, &st), XJ_OK);
	/* a matrix's blocks of 16384 x 4096: 256 x 4096 chunks (4 MiB) */
	CU_ASSERT_EQUAL(h5out_add_dataset_tiled(h, "blocks", H5OUT_F32, 20000,
						10000, 16384, 4096, &s_b, &st),
			XJ_OK);
	CU_ASSERT(s_nb >= 0 && s_d >= 0 && s_m >= 0 && s_nb != s_d &&
		  s_d != s_m && s_t != s_w && s_b != s_w);

	/* row split for neighbors, column split for the matrix, and every
	 * distance from rank 0 while the others write nothing */
	for (int64_t i = 0; i < rows * NK; i++)
		nb[i] = nb_value(row0 + i / NK, i % NK);
	CU_ASSERT_EQUAL(h5out_write(h, s_nb, row0, rows, 0, NK, nb, &st),
			XJ_OK);
	for (int64_t i = 0; i < ON * NK; i++)
		dist[i] = dist_value(i / NK, i % NK);
	CU_ASSERT_EQUAL(h5out_write(h, s_d, 0, g_rank ? 0 : ON, 0, NK,
				    g_rank ? NULL : dist, &st), XJ_OK);
	for (int64_t i = 0; i < ON * cols; i++)
		m[i] = dist_value(i / cols, col0 + i % cols);
	CU_ASSERT_EQUAL(h5out_write(h, s_m, 0, ON, col0, cols, m, &st), XJ_OK);
	/* empty by columns */
	CU_ASSERT_EQUAL(h5out_write(h, s_m, 0, ON, 0, 0, m, &st), XJ_OK);

	CU_ASSERT_EQUAL(h5out_attr_str(h, "metric", "l2", &st), XJ_OK);
	CU_ASSERT_EQUAL(h5out_attr_str(h, "metric", "cosine", &st), XJ_OK);
	CU_ASSERT_EQUAL(h5out_attr_str(h, "note", "d\xc3\xa9j\xc3\xa0 vu",
				       &st), XJ_OK);
	CU_ASSERT_EQUAL(h5out_attr_str(h, "empty", "", &st), XJ_OK);
	CU_ASSERT_EQUAL(h5out_attr_i64(h, "k", -((int64_t)1 << 40), &st), XJ_OK);
	CU_ASSERT_EQUAL(h5out_attr_f64(h, "threshold", 0.1, &st), XJ_OK);
	CU_ASSERT_EQUAL(h5out_finish(h, &st), XJ_OK);
	if (st.code)
		fprintf(stderr, "rank %d: %s\n", g_rank, st.msg);

	ids_check();
	CU_ASSERT(file_exists(out));
	CU_ASSERT_FALSE(file_exists(partial));
	ids_mark();
	check_written(out);
	ids_check();
	MPI_Barrier(MPI_COMM_WORLD);
}

static void write_bytes(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
}

static int same_bytes(const char *path, const char *text)
{
	char buf[256] = "";
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	return n == strlen(text) && memcmp(buf, text, n) == 0;
}

static void test_existing(void)
{
	const char *old = "an earlier result\n";
	char out[512], partial[600];
	h5in_info info;
	xj_status st;
	h5out *h = NULL;
	float v[2] = { 4.5f, -1.0f };
	int slot;

	path_of(out, sizeof(out), "exists.h5");
	h5out_partial_path(out, partial, sizeof(partial));
	if (g_rank == 0)
		write_bytes(out, old);
	MPI_Barrier(MPI_COMM_WORLD);

	ids_mark();
	CU_ASSERT_EQUAL(h5out_create(MPI_COMM_WORLD, out, 0, &h, &st),
			XJ_EXIT_USAGE);
	CU_ASSERT_PTR_NULL(h);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, out));
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "exists (use --force"));
	check_agreed(&st);
	CU_ASSERT(same_bytes(out, old));
	CU_ASSERT_FALSE(file_exists(partial));

	CU_ASSERT_EQUAL_FATAL(h5out_create(MPI_COMM_WORLD, out, 1, &h, &st),
			      XJ_OK);
	CU_ASSERT(same_bytes(out, old));   /* not before finish */
	CU_ASSERT_EQUAL(h5out_add_dataset(h, "x", H5OUT_F32, 1, 2, 1, &slot,
					  &st), XJ_OK);
	CU_ASSERT_EQUAL(h5out_write(h, slot, 0, g_rank ? 0 : 1, 0, 2, v, &st),
			XJ_OK);
	CU_ASSERT_EQUAL(h5out_finish(h, &st), XJ_OK);
	CU_ASSERT_FALSE(same_bytes(out, old));
	CU_ASSERT_FALSE(file_exists(partial));
	CU_ASSERT_EQUAL(h5in_probe(out, "", "", &info, &st), XJ_OK);
	CU_ASSERT_STRING_EQUAL(info.dset, "/x");
	ids_check();
	MPI_Barrier(MPI_COMM_WORLD);
}

static void test_bad_folder(void)
{
	char out[512];
	xj_status st;
	h5out *h = NULL;

	path_of(out, sizeof(out), "no/such/folder/out.h5");
	CU_ASSERT_EQUAL(h5out_create(MPI_COMM_WORLD, out, 1, &h, &st),
			XJ_EXIT_RESOURCE);
	CU_ASSERT_PTR_NULL(h);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "no/such/folder"));
	check_agreed(&st);

	/* the folder is a file */
	path_of(out, sizeof(out), "text.h5/out.h5");
	CU_ASSERT_EQUAL(h5out_create(MPI_COMM_WORLD, out, 1, &h, &st),
			XJ_EXIT_RESOURCE);
	check_agreed(&st);

	/* the output is a folder */
	CU_ASSERT_EQUAL(h5out_create(MPI_COMM_WORLD, g_dir, 1, &h, &st),
			XJ_EXIT_USAGE);
	check_agreed(&st);
}

static void test_abort(void)
{
	char out[512], partial[600];
	int64_t v[3] = { 7, 8, 9 };
	xj_status st;
	h5out *h;
	int slot;

	path_of(out, sizeof(out), "aborted.h5");
	h5out_partial_path(out, partial, sizeof(partial));
	/* a stale partial from an earlier crash is simply replaced */
	if (g_rank == 0)
		write_bytes(partial, "stale");
	MPI_Barrier(MPI_COMM_WORLD);
	ids_mark();
	CU_ASSERT_EQUAL_FATAL(h5out_create(MPI_COMM_WORLD, out, 0, &h, &st),
			      XJ_OK);
	CU_ASSERT_EQUAL(h5out_add_dataset(h, "n", H5OUT_I64, 1, 3, 0, &slot,
					  &st), XJ_OK);
	CU_ASSERT_EQUAL(h5out_write(h, slot, 0, g_rank ? 0 : 1, 0, 3, v, &st),
			XJ_OK);
	h5out_abort(h);
	ids_check();
	CU_ASSERT_FALSE(file_exists(partial));
	CU_ASSERT_FALSE(file_exists(out));
	h5out_abort(NULL);
	MPI_Barrier(MPI_COMM_WORLD);
}

/* One rank's bad slab or a failing HDF5 call: every rank gets the same
 * error, nobody hangs, and abort cleans up. */
static void test_agreement(void)
{
	char out[512], partial[600];
	float v[4] = { 1, 2, 3, 4 };
	xj_status st;
	h5out *h;
	int slot, extra, i;
	int last = g_rank == g_nranks - 1;

	path_of(out, sizeof(out), "agree.h5");
	h5out_partial_path(out, partial, sizeof(partial));
	ids_mark();
	CU_ASSERT_EQUAL_FATAL(h5out_create(MPI_COMM_WORLD, out, 0, &h, &st),
			      XJ_OK);
	CU_ASSERT_EQUAL(h5out_add_dataset(h, "d", H5OUT_F32, 2, 2, 1, &slot,
					  &st), XJ_OK);
	/* only the last rank writes outside the dataset */
	CU_ASSERT_EQUAL(h5out_write(h, slot, last ? 1 : 0, last ? 2 : 0, 0,
				    2, v, &st), XJ_EXIT_INTERNAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "outside 2 x 2"));
	if (getenv("XJ_TEST_VERBOSE") && g_rank == 0)
		fprintf(stderr, "\n  %s", st.msg);
	check_agreed(&st);
	CU_ASSERT_EQUAL(h5out_write(h, 99, 0, 0, 0, 0, v, &st),
			XJ_EXIT_INTERNAL);
	check_agreed(&st);

	/* HDF5's own error text, with the source location */
	CU_ASSERT_EQUAL(h5out_add_dataset(h, "d", H5OUT_F32, 2, 2, 1, &extra,
					  &st), XJ_EXIT_RESOURCE);
	CU_ASSERT_EQUAL(extra, -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "H5Dcreate2"));
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "[h5out.c:"));
	if (getenv("XJ_TEST_VERBOSE") && g_rank == 0)
		fprintf(stderr, "\n  %s", st.msg);
	check_agreed(&st);

	/* at most 8 datasets */
	for (i = 1; i < 8; i++) {
		char name[16];

		snprintf(name, sizeof(name), "e%d", i);
		CU_ASSERT_EQUAL(h5out_add_dataset(h, name, H5OUT_I64, 1, 1, 0,
						  &extra, &st), XJ_OK);
	}
	CU_ASSERT_EQUAL(h5out_add_dataset(h, "e8", H5OUT_I64, 1, 1, 0, &extra,
					  &st), XJ_EXIT_INTERNAL);
	check_agreed(&st);

	h5out_abort(h);
	ids_check();
	CU_ASSERT_FALSE(file_exists(partial));
	CU_ASSERT_FALSE(file_exists(out));
	MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- lists of a round in progress (listfile) ------------------------- */

#define LK 6
#define LROWS 41

static float list_key(int64_t row, int64_t j)
{
	return (float)row + (float)j / 8.0f;
}

static int64_t list_idx(int64_t row, int64_t j)
{
	return j == LK - 1 ? -1 : row * 1000 + j;
}

/* Every rank writes its share of LROWS lists; the file holds them all. */
static void write_lists(const char *path, int64_t generation)
{
	int64_t at, n;
	float key[LROWS * LK];
	int64_t idx[LROWS * LK];
	xj_status st;

	at = g_rank * (LROWS / g_nranks);
	n = g_rank == g_nranks - 1 ? LROWS - at : LROWS / g_nranks;
	for (int64_t i = 0; i < n * LK; i++) {
		key[i] = list_key(at + i / LK, i % LK);
		idx[i] = list_idx(at + i / LK, i % LK);
	}
	xj_ok(&st);
	CU_ASSERT_EQUAL(listfile_write(MPI_COMM_WORLD, path, LK, LROWS,
				       generation, at, n, key, idx, &st),
			XJ_OK);
}

/* Open path as the record would describe it: XJ_OK or the code, with
 * needle in the message. */
static int open_lists(const char *path, int64_t k, int64_t rows,
		      int64_t generation, const char *needle)
{
	listfile *lf = NULL;
	xj_status st;
	int rc;

	rc = listfile_open(MPI_COMM_WORLD, path, k, rows, generation, &lf,
			   &st);
	if (needle && !strstr(st.msg, needle)) {
		printf("\n  '%s' lacks '%s'\n", st.msg, needle);
		CU_FAIL("message");
	}
	if (rc == XJ_OK) {
		CU_ASSERT_EQUAL(listfile_close(lf, MPI_COMM_WORLD, &st), XJ_OK);
	} else {
		CU_ASSERT_PTR_NULL(lf);
	}
	return rc;
}

static void test_lists_round_trip(void)
{
	char path[512];
	float key[LROWS * LK];
	int64_t idx[LROWS * LK];
	listfile *lf;
	xj_status st;

	path_of(path, sizeof(path), "out.h5.progress.1");
	write_lists(path, 7);
	CU_ASSERT_EQUAL_FATAL(listfile_open(MPI_COMM_WORLD, path, LK, LROWS, 7,
					    &lf, &st), XJ_OK);
	/* every rank reads all of it back, in two uneven slabs */
	poison(key, LROWS * LK);
	for (int i = 0; i < LROWS * LK; i++)
		idx[i] = 0x7f7f7f7f7f7f7f7fll;
	CU_ASSERT_EQUAL(listfile_read(lf, 0, 13, key, idx, &st), XJ_OK);
	CU_ASSERT_EQUAL(listfile_read(lf, 13, LROWS - 13, key + 13 * LK,
				      idx + 13 * LK, &st), XJ_OK);
	for (int64_t i = 0; i < LROWS * LK; i++) {
		CU_ASSERT_EQUAL(key[i], list_key(i / LK, i % LK));
		CU_ASSERT_EQUAL(idx[i], list_idx(i / LK, i % LK));
	}
	CU_ASSERT_EQUAL(listfile_read(lf, LROWS - 1, 0, key, idx, &st), XJ_OK);
	/* past the end: refused, not read */
	CU_ASSERT_EQUAL(listfile_read(lf, LROWS - 2, 3, key, idx, &st),
			XJ_EXIT_INTERNAL);
	xj_ok(&st);
	CU_ASSERT_EQUAL(listfile_close(lf, MPI_COMM_WORLD, &st), XJ_OK);
	/* a longer file of the same name is cut to the new size */
	MPI_Barrier(MPI_COMM_WORLD);
	if (g_rank == 0) {
		FILE *f = fopen(path, "a");

		fputs("a tail from an older, longer snapshot", f);
		fclose(f);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	write_lists(path, 8);
	CU_ASSERT_EQUAL(open_lists(path, LK, LROWS, 8, NULL), XJ_OK);
	MPI_Barrier(MPI_COMM_WORLD);
	if (g_rank == 0)
		unlink(path);
	MPI_Barrier(MPI_COMM_WORLD);
}

/* A file the record does not describe is refused, saying why: another
 * generation (the other slot's, or one whose write was cut short), other
 * shapes, a cut file, no lists file at all, no file. */
static void test_lists_refused(void)
{
	char path[512];

	path_of(path, sizeof(path), "lists.0");
	write_lists(path, 3);
	CU_ASSERT_EQUAL(open_lists(path, LK, LROWS, 4, "generation 3; the "
				   "record names 41 of 6, generation 4"),
			XJ_EXIT_INPUT);
	CU_ASSERT_EQUAL(open_lists(path, LK + 1, LROWS, 3, "holds 41 lists "
				   "of 6"), XJ_EXIT_INPUT);
	CU_ASSERT_EQUAL(open_lists(path, LK, LROWS - 1, 3, "holds 41"),
			XJ_EXIT_INPUT);
	MPI_Barrier(MPI_COMM_WORLD);
	if (g_rank == 0)
		CU_ASSERT_EQUAL(truncate(path, 64 + LROWS * LK * 12 - 1), 0);
	MPI_Barrier(MPI_COMM_WORLD);
	CU_ASSERT_EQUAL(open_lists(path, LK, LROWS, 3, "bytes, expected"),
			XJ_EXIT_INPUT);
	MPI_Barrier(MPI_COMM_WORLD);
	if (g_rank == 0) {
		FILE *f = fopen(path, "w");

		fputs("[xjoin]\nformat = 2\n", f);
		fclose(f);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	CU_ASSERT_EQUAL(open_lists(path, LK, LROWS, 3, "not a lists file"),
			XJ_EXIT_INPUT);
	MPI_Barrier(MPI_COMM_WORLD);
	if (g_rank == 0)
		unlink(path);
	MPI_Barrier(MPI_COMM_WORLD);
	CU_ASSERT_EQUAL(open_lists(path, LK, LROWS, 3, "cannot open"),
			XJ_EXIT_INPUT);
}

/* A folder that does not exist: the write fails on every rank alike. */
static void test_lists_unwritable(void)
{
	float key[LK] = { 0 };
	int64_t idx[LK] = { 0 };
	xj_status st;

	CU_ASSERT_EQUAL(listfile_write(MPI_COMM_WORLD, "/proc/xj-none/lists.0",
				       LK, 1, 1, 0, g_rank == 0, key, idx,
				       &st), XJ_EXIT_RESOURCE);
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "/proc/xj-none/lists.0"));
}

/* ---- main ------------------------------------------------------------- */

int main(int argc, char **argv)
{
	static const struct { const char *name; CU_TestFunc fn; } tests[] = {
		{ "parse_spec", test_parse_spec },
		{ "numeric types", test_types },
		{ "dataset resolution", test_resolve },
		{ "probe errors", test_probe_errors },
		{ "NaN/Inf/range", test_values },
		{ "slab reads", test_slabs },
		{ "corrupt chunk", test_corrupt_read },
		{ "real data (glove)", test_real_data },
		{ "write and read back", test_write_read },
		{ "existing output", test_existing },
		{ "bad output folder", test_bad_folder },
		{ "abort", test_abort },
		{ "error agreement", test_agreement },
		{ "lists round trip", test_lists_round_trip },
		{ "lists refused", test_lists_refused },
		{ "lists unwritable", test_lists_unwritable },
	};
	unsigned failures, total;
	CU_pSuite suite;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
	if (CU_initialize_registry() != CUE_SUCCESS)
		MPI_Abort(MPI_COMM_WORLD, 1);
	suite = CU_add_suite("io", suite_init, suite_clean);
	if (!suite)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
		if (!CU_add_test(suite, tests[i].name, tests[i].fn))
			MPI_Abort(MPI_COMM_WORLD, 1);
	/* rank 0 reports; the others only list their failures on stderr */
	CU_basic_set_mode(g_rank == 0 ? CU_BRM_VERBOSE : CU_BRM_SILENT);
	if (g_rank != 0 && !freopen("/dev/null", "w", stdout))
		MPI_Abort(MPI_COMM_WORLD, 1);
	if (CU_basic_run_tests() != CUE_SUCCESS || CU_get_error()) {
		fprintf(stderr, "rank %d: CUnit error: %s\n", g_rank,
			CU_get_error_msg());
		failures = 1;
	} else {
		failures = CU_get_number_of_failures() +
			   CU_get_number_of_suites_failed();
	}
	for (CU_pFailureRecord f = CU_get_failure_list(); g_rank && f;
	     f = f->pNext)
		fprintf(stderr, "rank %d: %s: %s:%u: %s\n", g_rank,
			f->pTest ? f->pTest->pName : "?", f->strFileName,
			f->uiLineNumber, f->strCondition);
	MPI_Allreduce(&failures, &total, 1, MPI_UNSIGNED, MPI_SUM,
		      MPI_COMM_WORLD);
	CU_cleanup_registry();
	MPI_Finalize();
	return total ? 1 : 0;
}
