/*
 * h5in.c: reading input matrices from HDF5 (see h5in.h).
 *
 * Each rank opens the file on its own, read-only, with the POSIX (sec2)
 * driver: inputs are read, never written, so MPI-IO would only add
 * collective opens and failure modes. Every function here is local to
 * the calling rank; the caller agrees on the verdict across ranks.
 *
 * Rows are read as one hyperslab with memory type float32; HDF5 converts
 * any numeric file type (u8 .. i64, f32, f64) on the way and strip-mines
 * through its own conversion buffer. The slab is then scanned for NaN and
 * Inf, which also catches float64 values beyond float32 range (they
 * convert to Inf). Rows and columns in messages are 0-based global
 * indices, like the base indices in the output.
 *
 * The status passed in is reset on entry.
 */
#define _POSIX_C_SOURCE 200809L

#include "h5in.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "h5check.h"
#include "h5in_int.h"
#include "h5shards.h"

struct h5in {
	hid_t file;
	hid_t dset;
	h5in_info info;
	int wide_float;   /* float wider than 32 bits: Inf may be overflow */
	h5in_source *src; /* a VDS's sources or the shards, in row order */
	int64_t nsrc;
	int64_t cur;      /* shards: the one open in file/dset, or -1 */
};


/* Names listed when a file holds several 2-D datasets and none is named. */
#define H5IN_LIST_MAX 480

struct h5in_search {
	int64_t count;           /* 2-D datasets seen */
	int full;                /* list ends in "..." */
	char first[XJ_NAME_MAX];
	char list[H5IN_LIST_MAX];
};

#if H5_VERSION_GE(1, 12, 0)
typedef H5O_info2_t h5in_oinfo;
#define h5in_visit(id, op, data) \
	H5Ovisit3((id), H5_INDEX_NAME, H5_ITER_INC, (op), (data), H5O_INFO_BASIC)
#else
typedef H5O_info_t h5in_oinfo;
#define h5in_visit(id, op, data) \
	H5Ovisit2((id), H5_INDEX_NAME, H5_ITER_INC, (op), (data), H5O_INFO_BASIC)
#endif

void h5in_close_id(hid_t *id, herr_t (*close)(hid_t))
{
	if (*id >= 0)
		close(*id);
	*id = H5I_INVALID_HID;
}

int h5in_parse_spec(const char *spec, char *file, char *dset, xj_status *st)
{
	struct stat sb;
	const char *colon;
	size_t file_len;

	xj_ok(st);
	file[0] = '\0';
	dset[0] = '\0';
	if (!spec || !spec[0])
		return xj_fail(st, XJ_EXIT_USAGE, "empty input (FILE[:DATASET])");
	colon = strrchr(spec, ':');
	if (!colon || stat(spec, &sb) == 0)
		colon = NULL;
	file_len = colon ? (size_t)(colon - spec) : strlen(spec);
	if (file_len == 0)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "input '%s': no file before ':'", spec);
	if (file_len >= XJ_PATH_MAX)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "input '%.64s...': file name longer than %d bytes",
			       spec, XJ_PATH_MAX - 1);
	if (colon && strlen(colon + 1) >= XJ_NAME_MAX)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "input '%s': dataset name longer than %d bytes",
			       spec, XJ_NAME_MAX - 1);
	memcpy(file, spec, file_len);
	file[file_len] = '\0';
	if (colon)
		strcpy(dset, colon + 1);
	return XJ_OK;
}

/* Clear reasons before HDF5 sees the file: missing, unreadable, not HDF5.
 * label is "file" or "file:dataset". */
int h5in_check_file(const char *file, const char *label,
			   xj_status *st)
{
	struct stat sb;
	htri_t is_h5;

	if (stat(file, &sb) != 0)
		return xj_fail(st, XJ_EXIT_INPUT, "%s: cannot open input: %s",
			       label, strerror(errno));
	if (S_ISDIR(sb.st_mode))
		return xj_fail(st, XJ_EXIT_INPUT,
			       "%s: input is a directory, not an HDF5 file",
			       label);
	/* opening a named pipe blocks until someone writes to it, and HDF5
	 * needs to seek anyway: only files (and disks) can hold an input */
	if (!S_ISREG(sb.st_mode) && !S_ISBLK(sb.st_mode))
		return xj_fail(st, XJ_EXIT_INPUT,
			       "%s: input is a %s, not an HDF5 file", label,
			       S_ISFIFO(sb.st_mode) ? "named pipe (FIFO)" :
			       S_ISSOCK(sb.st_mode) ? "socket" :
			       "character device");
	if (access(file, R_OK) != 0)
		return xj_fail(st, XJ_EXIT_INPUT, "%s: cannot read input: %s",
			       label, strerror(errno));
	is_h5 = H5Fis_hdf5(file);
	if (is_h5 == 0)
		return xj_fail(st, XJ_EXIT_INPUT,
			       "%s: not an HDF5 file (no HDF5 signature)",
			       label);
	if (H5_TRY(is_h5, st, XJ_EXIT_INPUT, "%s: cannot check input", label))
		return st->code;
	return XJ_OK;
}

int h5in_open_file(const char *file, const char *label, hid_t *fid,
			  xj_status *st)
{
	hid_t fapl;
	int rc = XJ_OK;

	*fid = H5I_INVALID_HID;
	if (H5_TRY(fapl = H5Pcreate(H5P_FILE_ACCESS), st, XJ_EXIT_INTERNAL,
		   "%s: file access list", label))
		return st->code;
	if (H5_TRY(H5Pset_fapl_sec2(fapl), st, XJ_EXIT_INTERNAL,
		   "%s: sec2 driver", label) ||
#if H5_VERSION_GE(1, 10, 7)
	    /* parallel file systems mounted without flock() are common */
	    H5_TRY(H5Pset_file_locking(fapl, 1, 1), st, XJ_EXIT_INTERNAL,
		   "%s: file locking", label) ||
#endif
	    H5_TRY(*fid = H5Fopen(file, H5F_ACC_RDONLY, fapl), st,
		   XJ_EXIT_INPUT, "%s: cannot open (truncated or corrupt?)",
		   label))
		rc = st->code;
	H5Pclose(fapl);
	return rc;
}

/* What the object at path is: H5I_DATASET, H5I_GROUP, H5I_DATATYPE, or
 * H5I_BADID when nothing (or a dangling link) is there. Misses are normal
 * here, so HDF5 errors are cleared instead of reported. */
static H5I_type_t h5in_kind(hid_t fid, const char *path)
{
	H5I_type_t kind = H5I_BADID;
	hid_t obj;

	if (H5Lexists(fid, path, H5P_DEFAULT) <= 0 ||
	    H5Oexists_by_name(fid, path, H5P_DEFAULT) <= 0) {
		H5Eclear2(H5E_DEFAULT);
		return H5I_BADID;
	}
	obj = H5Oopen(fid, path, H5P_DEFAULT);
	if (obj < 0) {
		H5Eclear2(H5E_DEFAULT);
		return H5I_BADID;
	}
	kind = H5Iget_type(obj);
	H5Oclose(obj);
	return kind;
}

/* Like h5in_kind, but first checks that every parent on the way is a
 * group: H5Lexists fails rather than answers when one is missing. */
static H5I_type_t h5in_kind_path(hid_t fid, const char *path)
{
	char prefix[XJ_NAME_MAX];
	const char *p;

	for (p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
		size_t len = (size_t)(p - path);

		/* "/g/" is g itself, as HDF5 reads it: no parent to check */
		if (len == 0 || path[len - 1] == '/' || !p[strspn(p, "/")])
			continue;
		memcpy(prefix, path, len);
		prefix[len] = '\0';
		if (h5in_kind(fid, prefix) != H5I_GROUP)
			return H5I_BADID;
	}
	return h5in_kind(fid, path);
}

/* "x", "/x" -> "/x". */
static int h5in_absolute(const char *name, char *out, size_t size,
			 const char *file, xj_status *st)
{
	int n = snprintf(out, size, "%s%s", name[0] == '/' ? "" : "/", name);

	if (n < 0 || (size_t)n >= size)
		return xj_fail(st, XJ_EXIT_INPUT,
			       "%s: dataset name '%.64s...' too long", file,
			       name);
	return XJ_OK;
}

static int h5in_is_2d(hid_t loc, const char *name)
{
	hid_t dset, space;
	int ndims = -1;

	dset = H5Dopen2(loc, name, H5P_DEFAULT);
	if (dset < 0)
		return 0;
	space = H5Dget_space(dset);
	if (space >= 0) {
		ndims = H5Sget_simple_extent_ndims(space);
		H5Sclose(space);
	}
	H5Dclose(dset);
	return ndims == 2;
}

static herr_t h5in_visit_one(hid_t obj, const char *name,
			     const h5in_oinfo *oinfo, void *data)
{
	struct h5in_search *s = data;
	size_t used = strlen(s->list);

	if (oinfo->type != H5O_TYPE_DATASET)
		return 0;
	if (!h5in_is_2d(obj, name)) {
		/* unreadable datasets are skipped, not fatal, in a search */
		H5Eclear2(H5E_DEFAULT);
		return 0;
	}
	if (s->count == 0)
		snprintf(s->first, sizeof(s->first), "/%s", name);
	if (!s->full && used + strlen(name) + 8 < sizeof(s->list)) {
		snprintf(s->list + used, sizeof(s->list) - used, "%s/%s",
			 s->count ? ", " : "", name);
	} else if (!s->full) {
		snprintf(s->list + used, sizeof(s->list) - used, ", ...");
		s->full = 1;
	}
	s->count++;
	return 0;
}

/* No dataset named and no default present: the only 2-D dataset. */
static int h5in_search(hid_t fid, const char *file,
		       const char *default_name, char *out, xj_status *st)
{
	struct h5in_search s;
	char why[XJ_NAME_MAX + 32] = "";

	memset(&s, 0, sizeof(s));
	if (default_name[0])
		snprintf(why, sizeof(why), "no dataset named and no %s; ",
			 default_name);
	else
		snprintf(why, sizeof(why), "no dataset named; ");
	if (H5_TRY(h5in_visit(fid, h5in_visit_one, &s), st, XJ_EXIT_INPUT,
		   "%s: cannot list datasets", file))
		return st->code;
	if (s.count == 0)
		return xj_fail(st, XJ_EXIT_INPUT,
			       "%s: %sthe file holds no 2-D dataset", file, why);
	if (s.count > 1)
		return xj_fail(st, XJ_EXIT_INPUT,
			       "%s: %s%lld 2-D datasets (%s): name one as "
			       "FILE:DATASET", file, why, (long long)s.count,
			       s.list);
	snprintf(out, XJ_NAME_MAX, "%s", s.first);
	return XJ_OK;
}

int h5in_resolve(hid_t fid, const char *file, const char *dset,
			const char *default_dset, char *out, xj_status *st)
{
	char name[XJ_NAME_MAX] = "";
	H5I_type_t kind;

	if (dset[0]) {
		if (h5in_absolute(dset, out, XJ_NAME_MAX, file, st))
			return st->code;
		kind = h5in_kind_path(fid, out);
		if (kind == H5I_BADID)
			return xj_fail(st, XJ_EXIT_INPUT,
				       "%s:%s: no such dataset", file, out);
		if (kind != H5I_DATASET)
			return xj_fail(st, XJ_EXIT_INPUT,
				       "%s:%s: is a %s, not a dataset", file,
				       out, kind == H5I_GROUP ? "group" :
				       "named datatype");
		return XJ_OK;
	}
	if (default_dset && default_dset[0]) {
		if (h5in_absolute(default_dset, name, sizeof(name), file, st))
			return st->code;
		if (h5in_kind_path(fid, name) == H5I_DATASET) {
			strcpy(out, name);
			return XJ_OK;
		}
	}
	return h5in_search(fid, file, name, out, st);
}

/* "uint8", "int64", "float32", ... */
static int h5in_describe_type(hid_t type, const char *label, char *buf,
			      size_t size, int *wide_float, xj_status *st)
{
	H5T_class_t cls;
	H5T_sign_t sign = H5T_SGN_2;
	size_t bytes;

	if (H5_TRY(cls = H5Tget_class(type), st, XJ_EXIT_INPUT,
		   "%s: datatype class", label))
		return st->code;
	if (cls != H5T_INTEGER && cls != H5T_FLOAT)
		return xj_fail(st, XJ_EXIT_INPUT,
			       "%s: has %s type, expected integer or float "
			       "numbers", label, h5check_class_name(cls));
	bytes = H5Tget_size(type);
	if (bytes == 0)
		return xj_fail(st, XJ_EXIT_INPUT, "%s: datatype size 0",
			       label);
	if (cls == H5T_INTEGER &&
	    H5_TRY(sign = H5Tget_sign(type), st, XJ_EXIT_INPUT,
		   "%s: integer sign", label))
		return st->code;
	snprintf(buf, size, "%s%zu",
		 cls == H5T_FLOAT ? "float" : sign == H5T_SGN_NONE ? "uint" :
		 "int", bytes * 8);
	*wide_float = cls == H5T_FLOAT && bytes > 4;
	return XJ_OK;
}

/* Pipelines libhdf5 1.10 reads past its buffers (found by fuzzing):
 * scale-offset after another filter, or together with n-bit. Refused
 * before any read. */
static int h5in_check_filters(hid_t dcpl, const char *label, xj_status *st)
{
	int n = H5Pget_nfilters(dcpl), nbit = 0, soff = -1;

	for (int i = 0; i < n; i++) {
		unsigned flags, cd[8];
		size_t ncd = 8;
		char name[64];
		H5Z_filter_t f = H5Pget_filter2(dcpl, (unsigned)i, &flags,
						&ncd, cd, sizeof(name), name,
						NULL);

		if (f == H5Z_FILTER_NBIT)
			nbit = 1;
		else if (f == H5Z_FILTER_SCALEOFFSET)
			soff = i;
	}
	if (soff > 0 || (soff == 0 && nbit))
		return xj_fail(st, XJ_EXIT_INPUT, "%s: scale-offset filter %s: "
			       "a pipeline this HDF5 cannot read safely; "
			       "rewrite the dataset (e.g. h5repack -f NONE)",
			       label, nbit ? "with n-bit" : "after another "
			       "filter");
	return XJ_OK;
}

/* A chunk larger than a fixed dimension: never written by HDF5, and read
 * with a buffer of the chunk's size (gigabytes from a tiny file). */
static int h5in_check_chunk(hid_t space, const hsize_t *chunk,
			    const char *label, xj_status *st)
{
	hsize_t maxd[2];

	if (H5_TRY(H5Sget_simple_extent_dims(space, NULL, maxd), st,
		   XJ_EXIT_INPUT, "%s: dataspace", label))
		return st->code;
	for (int i = 0; i < 2; i++)
		if (chunk[i] == 0 || (maxd[i] != H5S_UNLIMITED &&
				      chunk[i] > (maxd[i] ? maxd[i] : 1)))
			return xj_fail(st, XJ_EXIT_INPUT, "%s: chunk shape "
				       "%llu x %llu does not fit the dataset's "
				       "%llu x %llu (a corrupt header)", label,
				       (unsigned long long)chunk[0],
				       (unsigned long long)chunk[1],
				       (unsigned long long)maxd[0],
				       (unsigned long long)maxd[1]);
	return XJ_OK;
}

/*
 * A header can declare any shape: a 10^12-row dataset whose data was never
 * written (or was cut off) costs a few bytes on disk, reads as fill values
 * and would keep every rank busy for days. So the data must be stored:
 * all chunks of a chunked dataset allocated, or, for other layouts, the
 * storage as large as the shape says. Filters and chunk shape are checked
 * first.
 */
static int h5in_check_stored(hid_t dset, hid_t space, hid_t type,
			     const hsize_t *dims, const char *label,
			     const char *file, int depth, int *wide_float,
			     xj_status *st)
{
	hid_t dcpl = H5I_INVALID_HID;
	hsize_t chunk[2], have = 0, want;
	size_t elem = H5Tget_size(type);
	int rc = XJ_OK;

	if (H5_TRY(dcpl = H5Dget_create_plist(dset), st, XJ_EXIT_INPUT,
		   "%s: creation properties", label))
		return st->code;
	if (h5in_check_filters(dcpl, label, st)) {
		rc = st->code;
		goto out;
	}
	if (H5Pget_layout(dcpl) == H5D_VIRTUAL) {
		rc = h5vds_check(dcpl, dims, file, label, depth, wide_float,
				 st);
	} else if (H5Pget_layout(dcpl) == H5D_CHUNKED) {
		if (H5_TRY(H5Pget_chunk(dcpl, 2, chunk), st, XJ_EXIT_INPUT,
			   "%s: chunk shape", label) ||
		    h5in_check_chunk(space, chunk, label, st) ||
		    H5_TRY(H5Dget_num_chunks(dset, space, &have), st,
			   XJ_EXIT_INPUT, "%s: chunk count", label)) {
			rc = st->code;
			goto out;
		}
		want = ((dims[0] + chunk[0] - 1) / chunk[0]) *
		       ((dims[1] + chunk[1] - 1) / chunk[1]);
		if (have < want)
			rc = xj_fail(st, XJ_EXIT_INPUT, "%s: only %llu of its "
				     "%llu chunks are stored (never written, or "
				     "cut off): refusing a %llu x %llu dataset "
				     "of fill values", label,
				     (unsigned long long)have,
				     (unsigned long long)want,
				     (unsigned long long)dims[0],
				     (unsigned long long)dims[1]);
	} else if (elem == 0 || (dims[1] &&
				 dims[0] > UINT64_MAX / dims[1] / elem)) {
		rc = xj_fail(st, XJ_EXIT_INPUT, "%s: %llu x %llu values of %zu "
			     "bytes: more bytes than a file can hold", label,
			     (unsigned long long)dims[0],
			     (unsigned long long)dims[1], elem);
	} else {
		have = H5Dget_storage_size(dset);
		want = dims[0] * dims[1] * elem;
		if (have < want)
			rc = xj_fail(st, XJ_EXIT_INPUT, "%s: declares %llu x "
				     "%llu values (%llu bytes) but stores %llu "
				     "bytes (never written, or cut off)", label,
				     (unsigned long long)dims[0],
				     (unsigned long long)dims[1],
				     (unsigned long long)want,
				     (unsigned long long)have);
	}
out:
	h5in_close_id(&dcpl, H5Pclose);
	return rc;
}

/* Shape and type of the resolved dataset into info. depth: how many
 * VDSs lead to it. */
int h5in_check_dset(hid_t fid, h5in_info *info, int depth,
			   int *wide_float, xj_status *st)
{
	char label[H5IN_LABEL_MAX];
	hid_t dset = H5I_INVALID_HID, space = H5I_INVALID_HID;
	hid_t type = H5I_INVALID_HID;
	hsize_t dims[2];
	int ndims;

	snprintf(label, sizeof(label), "%s:%s", info->file, info->dset);
	if (H5_TRY(dset = H5Dopen2(fid, info->dset, H5P_DEFAULT), st,
		   XJ_EXIT_INPUT, "%s: cannot open dataset", label) ||
	    H5_TRY(space = H5Dget_space(dset), st, XJ_EXIT_INPUT,
		   "%s: dataspace", label) ||
	    H5_TRY(ndims = H5Sget_simple_extent_ndims(space), st,
		   XJ_EXIT_INPUT, "%s: dataspace rank", label))
		goto out;
	if (ndims != 2) {
		xj_fail(st, XJ_EXIT_INPUT,
			"%s: is %d-D, expected a 2-D matrix (rows x columns)",
			label, ndims);
		goto out;
	}
	if (H5_TRY(H5Sget_simple_extent_dims(space, dims, NULL), st,
		   XJ_EXIT_INPUT, "%s: dataspace dims", label) ||
	    H5_TRY(type = H5Dget_type(dset), st, XJ_EXIT_INPUT,
		   "%s: datatype", label) ||
	    h5in_describe_type(type, label, info->type_desc,
			       sizeof(info->type_desc), wide_float, st))
		goto out;
	/* no rows is a valid (empty) input: the caller decides whether it
	 * can join one; no columns is never a matrix of vectors */
	if (dims[1] == 0) {
		xj_fail(st, XJ_EXIT_INPUT, "%s: has %llu rows and 0 columns, "
			"expected at least one column", label,
			(unsigned long long)dims[0]);
		goto out;
	}
	if (dims[0] > INT64_MAX || (dims[0] && dims[1] > INT64_MAX / dims[0])) {
		xj_fail(st, XJ_EXIT_INPUT, "%s: %llu x %llu is too large",
			label, (unsigned long long)dims[0],
			(unsigned long long)dims[1]);
		goto out;
	}
	if (h5in_check_stored(dset, space, type, dims, label, info->file,
			      depth, wide_float, st))
		goto out;
	info->rows = (int64_t)dims[0];
	info->cols = (int64_t)dims[1];
out:
	h5in_close_id(&type, H5Tclose);
	h5in_close_id(&space, H5Sclose);
	h5in_close_id(&dset, H5Dclose);
	return st->code;
}

static int h5in_probe_wide(const char *file, const char *dset,
			   const char *default_dset, h5in_info *info,
			   int *wide_float, xj_status *st)
{
	char label[H5IN_LABEL_MAX];
	hid_t fid = H5I_INVALID_HID;

	h5check_silence();
	memset(info, 0, sizeof(*info));
	if (!dset)
		dset = "";
	if (h5shards_is_multi(file))
		return h5shards_probe(file, dset, default_dset, info, NULL,
				      NULL, wide_float, st);
	snprintf(label, sizeof(label), "%s%s%s", file,
		 !dset[0] ? "" : dset[0] == '/' ? ":" : ":/", dset);
	if (strlen(file) >= sizeof(info->file))
		return xj_fail(st, XJ_EXIT_INPUT, "%.64s...: file name longer "
			       "than %d bytes", file, XJ_PATH_MAX - 1);
	strcpy(info->file, file);
	if (h5in_check_file(file, label, st) ||
	    h5in_open_file(file, label, &fid, st))
		return st->code;
	if (h5in_resolve(fid, file, dset, default_dset, info->dset, st) == 0)
		h5in_check_dset(fid, info, 0, wide_float, st);
	H5Fclose(fid);
	return st->code;
}

int h5in_probe(const char *file, const char *dset, const char *default_dset,
	       h5in_info *info, xj_status *st)
{
	int wide_float;

	xj_ok(st);
	return h5in_probe_wide(file, dset, default_dset, info, &wide_float,
			       st);
}

const h5in_source *h5in_sources(const h5in *h, int64_t *count)
{
	*count = h ? h->nsrc : 0;
	return h ? h->src : NULL;
}

int h5in_open(const h5in_info *info, h5in **out, xj_status *st)
{
	h5in_info now;
	h5in *h;

	xj_ok(st);
	*out = NULL;
	h = malloc(sizeof(*h));
	if (!h)
		return xj_fail(st, XJ_EXIT_RESOURCE, "%s:%s: out of memory",
			       info->file, info->dset);
	h->file = H5I_INVALID_HID;
	h->dset = H5I_INVALID_HID;
	h->src = NULL;
	h->nsrc = 0;
	h->cur = -1;
	if (info->mem) {      /* rows in memory: nothing to open */
		h->info = *info;
		h->wide_float = info->mem_type == H5IN_MEM_F64;
		*out = h;
		return XJ_OK;
	}
	/* probe again: the file may have changed since it was probed */
	if (info->shards ?
	    h5shards_probe(info->file, info->dset, info->shard_default, &now,
			   &h->src, &h->nsrc, &h->wide_float, st) :
	    h5in_probe_wide(info->file, info->dset, "", &now, &h->wide_float,
			    st))
		goto fail;
	if (now.shards_hash != info->shards_hash) {
		xj_fail(st, XJ_EXIT_INPUT, "%s: its shards changed while "
			"running (this rank sees other files or shapes)",
			info->file);
		goto fail;
	}
	if (now.rows != info->rows || now.cols != info->cols) {
		xj_fail(st, XJ_EXIT_INPUT, "%s:%s: changed while running "
			"(%lld x %lld, was %lld x %lld)", info->file,
			info->dset, (long long)now.rows, (long long)now.cols,
			(long long)info->rows, (long long)info->cols);
		goto fail;
	}
	h->info = now;
	if (!info->shards &&
	    (h5in_open_file(info->file, info->file, &h->file, st) ||
	     H5_TRY(h->dset = H5Dopen2(h->file, now.dset, H5P_DEFAULT), st,
		    XJ_EXIT_INPUT, "%s:%s: cannot open dataset", now.file,
		    now.dset) ||
	     h5vds_sources(h->dset, &h->info, &h->src, &h->nsrc, st)))
		goto fail;
	*out = h;
	return XJ_OK;
fail:
	h5in_close(h);
	return st->code;
}

/* Index of the first NaN or Inf in x[0, count), or -1. The first pass
 * only ORs exponent tests so it vectorizes; the second finds the spot. */
static int64_t h5in_first_bad(const float *x, int64_t count)
{
	unsigned bad = 0;
	int64_t i;

	for (i = 0; i < count; i++) {
		uint32_t bits;

		memcpy(&bits, &x[i], sizeof(bits));
		bad |= (bits & 0x7f800000u) == 0x7f800000u;
	}
	if (!bad)
		return -1;
	for (i = 0; i < count; i++)
		if (!isfinite(x[i]))
			return i;
	return -1;
}

/* The shard holding global row r (shards are in row order). */
static const h5in_source *h5in_shard_of(const h5in *h, int64_t r)
{
	int64_t lo = 0, hi = h->nsrc - 1;

	while (lo < hi) {
		int64_t mid = lo + (hi - lo + 1) / 2;

		if (h->src[mid].row0 <= r)
			lo = mid;
		else
			hi = mid - 1;
	}
	return &h->src[lo];
}

static int h5in_scan(const h5in *h, int64_t row0, int64_t rows,
		     const float *out, xj_status *st)
{
	int64_t cols = h->info.cols, at, r;
	const char *what;
	float v;

	at = h5in_first_bad(out, rows * cols);
	if (at < 0)
		return XJ_OK;
	v = out[at];
	r = row0 + at / cols;
	what = isnan(v) ? "NaN" : h->wide_float ?
	       "out of float32 range or Inf" : v > 0 ? "Inf" : "-Inf";
	if (h->info.shards) {
		const h5in_source *s = h5in_shard_of(h, r);

		return xj_fail(st, XJ_EXIT_INPUT, "%s:%s: row %lld column "
			       "%lld is %s (row %lld of %s)", s->file, s->dset,
			       (long long)(r - s->row0), (long long)(at % cols),
			       what, (long long)r, h->info.file);
	}
	return xj_fail(st, XJ_EXIT_INPUT, "%s:%s: row %lld column %lld is %s",
		       h->info.file, h->info.dset, (long long)r,
		       (long long)(at % cols), what);
}

/* Rows [row0, row0 + rows) of an open dataset, as float32. */
static int h5in_read_slab(hid_t dset, const char *file, const char *name,
			  int64_t row0, int64_t rows, int64_t cols, float *out,
			  xj_status *st)
{
	char label[H5IN_LABEL_MAX];
	hid_t fspace = H5I_INVALID_HID, mspace = H5I_INVALID_HID;
	hsize_t start[2], count[2];

	snprintf(label, sizeof(label), "%s:%s: rows [%lld, %lld)", file, name,
		 (long long)row0, (long long)(row0 + rows));
	start[0] = (hsize_t)row0;
	start[1] = 0;
	count[0] = (hsize_t)rows;
	count[1] = (hsize_t)cols;
	/* on failure st holds the reason; the ids are closed either way */
	(void)(H5_TRY(fspace = H5Dget_space(dset), st, XJ_EXIT_INPUT,
		      "%s: dataspace", label) ||
	       H5_TRY(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL,
					  count, NULL), st, XJ_EXIT_INTERNAL,
		      "%s: select", label) ||
	       H5_TRY(mspace = H5Screate_simple(2, count, NULL), st,
		      XJ_EXIT_RESOURCE, "%s: memory dataspace", label) ||
	       H5_TRY(H5Dread(dset, H5T_NATIVE_FLOAT, mspace, fspace,
			      H5P_DEFAULT, out), st, XJ_EXIT_INPUT,
		      "%s: read failed (truncated or corrupt file?)", label));
	h5in_close_id(&mspace, H5Sclose);
	h5in_close_id(&fspace, H5Sclose);
	return st->code;
}

/* Make shard i the open one: one shard file open at a time, so a list
 * of thousands stays within the limit on open files. */
static int h5in_shard_open(h5in *h, int64_t i, xj_status *st)
{
	const h5in_source *s = &h->src[i];

	if (h->cur == i)
		return XJ_OK;
	h5in_close_id(&h->dset, H5Dclose);
	h5in_close_id(&h->file, H5Fclose);
	h->cur = -1;
	if (h5in_open_file(s->file, s->file, &h->file, st) ||
	    H5_TRY(h->dset = H5Dopen2(h->file, s->dset, H5P_DEFAULT), st,
		   XJ_EXIT_INPUT, "%s:%s: cannot open dataset", s->file,
		   s->dset))
		return st->code;
	h->cur = i;
	return XJ_OK;
}

/* Rows of a pattern or list: a slab from each shard it spans. */
static int h5in_read_shards(h5in *h, int64_t row0, int64_t rows, float *out,
			    xj_status *st)
{
	int64_t cols = h->info.cols, end = row0 + rows;
	int64_t i = h5in_shard_of(h, row0) - h->src;

	for (; i < h->nsrc && h->src[i].row0 < end; i++) {
		const h5in_source *s = &h->src[i];
		int64_t a = row0 > s->row0 ? row0 : s->row0;
		int64_t b = end < s->row0 + s->rows ? end : s->row0 + s->rows;

		if (b <= a)
			continue;
		if (h5in_shard_open(h, i, st) ||
		    h5in_read_slab(h->dset, s->file, s->dset, a - s->row0,
				   b - a, cols, out + (a - row0) * cols, st))
			return st->code;
	}
	return XJ_OK;
}

int h5in_read(h5in *h, int64_t row0, int64_t rows, float *out, xj_status *st)
{
	xj_ok(st);
	if (!h || row0 < 0 || rows < 0 || row0 > h->info.rows - rows ||
	    (rows > 0 && !out))
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "%s:%s: bad read of rows [%lld, %lld) of %lld",
			       h ? h->info.file : "?", h ? h->info.dset : "?",
			       (long long)row0, (long long)(row0 + rows),
			       h ? (long long)h->info.rows : -1LL);
	if (rows == 0)
		return XJ_OK;
	if (h->info.mem)
		h5in_mem_read(&h->info, row0, rows, out);
	else if (h->info.shards ?
	    h5in_read_shards(h, row0, rows, out, st) :
	    h5in_read_slab(h->dset, h->info.file, h->info.dset, row0, rows,
			   h->info.cols, out, st))
		return st->code;
	return h5in_scan(h, row0, rows, out, st);
}

void h5in_close(h5in *h)
{
	if (!h)
		return;
	h5in_close_id(&h->dset, H5Dclose);
	h5in_close_id(&h->file, H5Fclose);
	free(h->src);
	free(h);
}
