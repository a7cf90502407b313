/*
 * inspect_read.c: reading what `xjoin inspect` describes: the file
 * opened read-only through the sec2 driver, its root attributes and
 * datasets, and tiles of a result's two datasets.
 */
#define _GNU_SOURCE
#include "inspect_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../io/h5check.h"

#define INSPECT_DSETS_MAX 256       /* datasets described; more are counted */

#if H5_VERSION_GE(1, 12, 0)
typedef H5O_info2_t inspect_oinfo;
#define inspect_visit(id, op, data) \
	H5Ovisit3((id), H5_INDEX_NAME, H5_ITER_INC, (op), (data), H5O_INFO_BASIC)
#else
typedef H5O_info_t inspect_oinfo;
#define inspect_visit(id, op, data) \
	H5Ovisit2((id), H5_INDEX_NAME, H5_ITER_INC, (op), (data), H5O_INFO_BASIC)
#endif

/* ---- root attributes -------------------------------------------------- */

/* Fixed-length strings are read one byte wider, NUL-terminated, so that
 * a NUL- or space-padded string keeps its last character. */
static void attr_read_str(hid_t id, hid_t type, struct attr *a)
{
	hid_t mt = H5Tcopy(H5T_C_S1);
	char *vlen = NULL, *buf = NULL;
	size_t bytes = H5Tget_size(type);

	if (mt < 0)
		return;
	/* HDF5 converts no string between character sets */
	if (H5Tset_cset(mt, H5Tget_cset(type)) < 0) {
		H5Tclose(mt);
		return;
	}
	if (H5Tis_variable_str(type) > 0) {
		if (H5Tset_size(mt, H5T_VARIABLE) >= 0 &&
		    H5Aread(id, mt, &vlen) >= 0 && vlen) {
			snprintf(a->text, sizeof(a->text), "%s", vlen);
			a->kind = AK_STR;
		}
		if (vlen)
			H5free_memory(vlen);
	} else if (bytes > 0 && (buf = calloc(bytes + 1, 1)) &&
		   H5Tset_size(mt, bytes + 1) >= 0 &&
		   H5Tset_strpad(mt, H5T_STR_NULLTERM) >= 0 &&
		   H5Aread(id, mt, buf) >= 0) {
		snprintf(a->text, sizeof(a->text), "%s", buf);
		a->kind = AK_STR;
	}
	free(buf);
	H5Tclose(mt);
}

static void attr_read(hid_t id, struct attr *a)
{
	hid_t type = H5Aget_type(id), space = H5Aget_space(id);
	H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
	hssize_t n = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;

	a->kind = AK_OTHER;
	snprintf(a->text, sizeof(a->text), "(%s, %lld values)",
		 h5check_class_name(cls), (long long)n);
	if (n == 1 && cls == H5T_STRING)
		attr_read_str(id, type, a);
	else if (n == 1 && cls == H5T_INTEGER &&
		 H5Aread(id, H5T_NATIVE_INT64, &a->i) >= 0)
		a->kind = AK_INT;
	else if (n == 1 && cls == H5T_FLOAT &&
		 H5Aread(id, H5T_NATIVE_DOUBLE, &a->f) >= 0)
		a->kind = AK_FLOAT;
	/* an odd attribute is shown as what it is, never an error */
	H5Eclear2(H5E_DEFAULT);
	if (space >= 0)
		H5Sclose(space);
	if (type >= 0)
		H5Tclose(type);
}

static herr_t attr_visit(hid_t loc, const char *name, const H5A_info_t *info,
			 void *data)
{
	struct insp *in = data;
	struct attr *a;
	hid_t id;

	(void)info;
	if (in->nattr == in->attr_cap) {
		int cap = in->attr_cap ? 2 * in->attr_cap : 64;
		struct attr *p = realloc(in->attr, (size_t)cap * sizeof(*p));

		if (!p) {
			in->oom = 1;
			return 1;   /* stop */
		}
		in->attr = p;
		in->attr_cap = cap;
	}
	a = &in->attr[in->nattr++];
	memset(a, 0, sizeof(*a));
	snprintf(a->name, sizeof(a->name), "%s", name);
	id = H5Aopen(loc, name, H5P_DEFAULT);
	if (id < 0) {
		H5Eclear2(H5E_DEFAULT);
		snprintf(a->text, sizeof(a->text), "(unreadable)");
		return 0;
	}
	attr_read(id, a);
	H5Aclose(id);
	return 0;
}

int inspect_attrs_read(struct insp *in, xj_status *st)
{
	if (H5_TRY(H5Aiterate2(in->file, H5_INDEX_NAME, H5_ITER_INC, NULL,
			       attr_visit, in), st, XJ_EXIT_INPUT,
		   "%s: cannot list the root attributes", in->path))
		return st->code;
	if (in->oom)
		return xj_fail(st, XJ_EXIT_RESOURCE, "%s: out of memory for "
			       "its attributes", in->path);
	return XJ_OK;
}

struct attr *inspect_attr_find(struct insp *in, const char *name)
{
	for (int i = 0; i < in->nattr; i++)
		if (strcmp(in->attr[i].name, name) == 0)
			return &in->attr[i];
	return NULL;
}

/* Lookups mark what they find as shown, so that the curated rows of a
 * table come first and inspect_table_raw_attrs() adds only the rest; a table
 * starts from inspect_attrs_unmark(). */
void inspect_attrs_unmark(struct insp *in)
{
	for (int i = 0; i < in->nattr; i++)
		in->attr[i].shown = 0;
}

/* The string attribute name, or NULL. */
const char *inspect_attr_str(struct insp *in, const char *name)
{
	struct attr *a = inspect_attr_find(in, name);

	if (!a || a->kind != AK_STR)
		return NULL;
	a->shown = 1;
	return a->text;
}

int inspect_attr_i64(struct insp *in, const char *name, int64_t *v)
{
	struct attr *a = inspect_attr_find(in, name);

	if (!a || a->kind != AK_INT)
		return 0;
	a->shown = 1;
	*v = a->i;
	return 1;
}

int inspect_attr_f64(struct insp *in, const char *name, double *v)
{
	struct attr *a = inspect_attr_find(in, name);

	if (!a || (a->kind != AK_FLOAT && a->kind != AK_INT))
		return 0;
	a->shown = 1;
	*v = a->kind == AK_FLOAT ? a->f : (double)a->i;
	return 1;
}

/* ---- datasets --------------------------------------------------------- */

static void type_text(hid_t type, struct dset *d)
{
	size_t bytes = H5Tget_size(type);

	d->cls = H5Tget_class(type);
	if (d->cls == H5T_INTEGER)
		snprintf(d->type, sizeof(d->type), "%s%zu",
			 H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int",
			 bytes * 8);
	else if (d->cls == H5T_FLOAT)
		snprintf(d->type, sizeof(d->type), "float%zu", bytes * 8);
	else
		snprintf(d->type, sizeof(d->type), "%s",
			 h5check_class_name(d->cls));
}

static void filter_name(H5Z_filter_t id, const unsigned *cd, size_t ncd,
			const char *name, char *buf, size_t size)
{
	if (id == H5Z_FILTER_DEFLATE && ncd > 0)
		snprintf(buf, size, "gzip %u", cd[0]);
	else if (id == H5Z_FILTER_SHUFFLE)
		snprintf(buf, size, "shuffle");
	else if (id == H5Z_FILTER_FLETCHER32)
		snprintf(buf, size, "fletcher32");
	else if (id == H5Z_FILTER_SZIP)
		snprintf(buf, size, "szip");
	else if (name[0])
		snprintf(buf, size, "%s", name);
	else
		snprintf(buf, size, "filter %d", (int)id);
}

static void filters_text(hid_t dcpl, struct dset *d)
{
	int nf = H5Pget_nfilters(dcpl);
	size_t len = 0;

	for (int i = 0; i < nf && len < sizeof(d->filters); i++) {
		unsigned flags, cd[8], config;
		size_t ncd = 8;
		char name[64] = "", one[72];
		H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags,
						 &ncd, cd, sizeof(name), name,
						 &config);

		if (id < 0)
			continue;
		filter_name(id, cd, ncd, name, one, sizeof(one));
		len += (size_t)snprintf(d->filters + len,
					sizeof(d->filters) - len, "%s%s",
					len ? ", " : "", one);
	}
}

static void layout_read(hid_t dset, struct dset *d)
{
	hid_t dcpl = H5Dget_create_plist(dset);

	snprintf(d->layout, sizeof(d->layout), "?");
	if (dcpl < 0)
		return;
	switch (H5Pget_layout(dcpl)) {
	case H5D_COMPACT:
		snprintf(d->layout, sizeof(d->layout), "compact");
		break;
	case H5D_CONTIGUOUS:
		snprintf(d->layout, sizeof(d->layout), "contiguous");
		break;
	case H5D_CHUNKED:
		snprintf(d->layout, sizeof(d->layout), "chunked");
		d->chunked = H5Pget_chunk(dcpl, INSPECT_RANK_MAX, d->chunk) ==
			     d->rank;
		break;
	case H5D_VIRTUAL:
		snprintf(d->layout, sizeof(d->layout), "virtual");
		break;
	default:
		break;
	}
	filters_text(dcpl, d);
	H5Pclose(dcpl);
}

/* Type, shape, layout and bytes of one dataset; what cannot be read is
 * left as "?" (a listing never fails on one odd dataset). */
static void dset_read(hid_t loc, const char *name, struct dset *d)
{
	hid_t id = H5Dopen2(loc, name, H5P_DEFAULT), space, type;

	snprintf(d->name, sizeof(d->name), "/%s", name);
	snprintf(d->type, sizeof(d->type), "?");
	d->cls = H5T_NO_CLASS;
	d->rank = -1;
	if (id < 0)
		goto out;
	if ((type = H5Dget_type(id)) >= 0) {
		type_text(type, d);
		H5Tclose(type);
	}
	if ((space = H5Dget_space(id)) >= 0) {
		d->rank = H5Sget_simple_extent_ndims(space);
		if (d->rank >= 0 && d->rank <= INSPECT_RANK_MAX)
			H5Sget_simple_extent_dims(space, d->dims, NULL);
		H5Sclose(space);
	}
	layout_read(id, d);
	d->stored_bytes = H5Dget_storage_size(id);
	H5Dclose(id);
out:
	H5Eclear2(H5E_DEFAULT);
}

static herr_t dset_visit(hid_t obj, const char *name,
			 const inspect_oinfo *oinfo, void *data)
{
	struct insp *in = data;

	if (oinfo->type != H5O_TYPE_DATASET)
		return 0;
	if (in->ndset_all++ >= INSPECT_DSETS_MAX)
		return 0;
	memset(&in->dset[in->ndset], 0, sizeof(in->dset[0]));
	dset_read(obj, name, &in->dset[in->ndset]);
	in->ndset++;
	return 0;
}

int inspect_dsets_read(struct insp *in, xj_status *st)
{
	in->dset = calloc(INSPECT_DSETS_MAX, sizeof(*in->dset));
	if (!in->dset)
		return xj_fail(st, XJ_EXIT_RESOURCE, "%s: out of memory for "
			       "its datasets", in->path);
	if (H5_TRY(inspect_visit(in->file, dset_visit, in), st,
		   XJ_EXIT_INPUT, "%s: cannot list the datasets", in->path))
		return st->code;
	return XJ_OK;
}

const struct dset *inspect_dset_find(const struct insp *in, const char *name)
{
	for (int i = 0; i < in->ndset; i++)
		if (strcmp(in->dset[i].name, name) == 0)
			return &in->dset[i];
	return NULL;
}

/* ---- opening ---------------------------------------------------------- */

int inspect_file_open(struct insp *in, xj_status *st)
{
	struct stat sb;
	htri_t is_h5;
	hid_t fapl;
	int rc;

	if (stat(in->path, &sb) != 0)
		return xj_fail(st, XJ_EXIT_INPUT, "%s: %s", in->path,
			       strerror(errno));
	if (!S_ISREG(sb.st_mode))
		return xj_fail(st, XJ_EXIT_INPUT, "%s: not a regular file",
			       in->path);
	if (access(in->path, R_OK) != 0)
		return xj_fail(st, XJ_EXIT_INPUT, "%s: cannot read: %s",
			       in->path, strerror(errno));
	is_h5 = H5Fis_hdf5(in->path);
	if (is_h5 == 0)
		return xj_fail(st, XJ_EXIT_INPUT, "%s: not an HDF5 file (no "
			       "HDF5 signature)", in->path);
	if (H5_TRY(is_h5, st, XJ_EXIT_INPUT, "%s: cannot check", in->path) ||
	    H5_TRY(fapl = H5Pcreate(H5P_FILE_ACCESS), st, XJ_EXIT_INTERNAL,
		   "%s: file access list", in->path))
		return st->code;
	rc = H5_TRY(H5Pset_fapl_sec2(fapl), st, XJ_EXIT_INTERNAL,
		    "%s: sec2 driver", in->path) ||
#if H5_VERSION_GE(1, 10, 7)
	     /* parallel file systems mounted without flock() are common */
	     H5_TRY(H5Pset_file_locking(fapl, 1, 1), st, XJ_EXIT_INTERNAL,
		    "%s: file locking", in->path) ||
#endif
	     H5_TRY(in->file = H5Fopen(in->path, H5F_ACC_RDONLY, fapl), st,
		    XJ_EXIT_INPUT, "%s: cannot open (truncated or corrupt?)",
		    in->path);
	H5Pclose(fapl);
	return rc ? st->code : XJ_OK;
}

/* ---- results: reading slabs ------------------------------------------- */

static int read_tile(struct insp *in, hid_t id, hid_t mtype, int64_t r0,
		     int64_t nr, int64_t c0, int64_t nc, void *buf,
		     xj_status *st)
{
	hsize_t start[2] = { (hsize_t)r0, (hsize_t)c0 };
	hsize_t count[2] = { (hsize_t)nr, (hsize_t)nc };
	hid_t fspace = H5I_INVALID_HID, mspace = H5I_INVALID_HID;
	const char *name = id == in->nbr_id ? "/neighbors" : "/distances";

	if (H5_TRY(fspace = H5Dget_space(id), st, XJ_EXIT_INPUT,
		   "%s:%s: dataspace", in->path, name) ||
	    H5_TRY(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL,
				       count, NULL), st, XJ_EXIT_INTERNAL,
		   "%s:%s: select", in->path, name) ||
	    H5_TRY(mspace = H5Screate_simple(2, count, NULL), st,
		   XJ_EXIT_RESOURCE, "%s:%s: memory dataspace", in->path,
		   name) ||
	    H5_TRY(H5Dread(id, mtype, mspace, fspace, H5P_DEFAULT, buf), st,
		   XJ_EXIT_INPUT, "%s:%s: cannot read rows [%lld, %lld) "
		   "(truncated or corrupt file?)", in->path, name,
		   (long long)r0, (long long)(r0 + nr)))
		goto out;
out:
	if (mspace >= 0)
		H5Sclose(mspace);
	if (fspace >= 0)
		H5Sclose(fspace);
	return st->code;
}

/* Reads the tile of both datasets (idx only for topk). */
int inspect_read_both(struct insp *in, int64_t r0, int64_t nr, int64_t c0,
		      int64_t nc, int64_t *idx, float *val, xj_status *st)
{
	if (in->topk && read_tile(in, in->nbr_id, H5T_NATIVE_INT64, r0, nr,
				  c0, nc, idx, st))
		return st->code;
	return read_tile(in, in->dist_id, H5T_NATIVE_FLOAT, r0, nr, c0, nc,
			 val, st);
}
