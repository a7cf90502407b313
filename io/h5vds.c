/*
 * h5vds.c: HDF5 virtual datasets as inputs (see h5in_int.h).
 *
 * HDF5 reads a VDS like any dataset, opening its sources and converting
 * each one's type on the way; but it reads a missing source (or the part
 * no mapping covers) as fill values without an error, and the VDS's own
 * storage size is always 0. So the sources are checked instead, as plain
 * inputs are (h5in.c), and listed for the job table.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "folder.h"
#include "h5check.h"
#include "h5in_int.h"

/* A VDS whose sources are VDSs, and so on: deeper is refused (a loop of
 * VDSs naming each other would never end). */
#define H5VDS_DEPTH_MAX 4

/* The file HDF5 opens for a VDS source named name in vds_file (with
 * HDF5_VDS_PREFIX unset): "." is the VDS's own file, an absolute name is
 * itself, a relative one is looked for beside the VDS file, then from
 * the working directory. */
static void h5vds_source_path(const char *vds_file, const char *name,
			     char *out, size_t size)
{
	char folder[XJ_PATH_MAX];
	struct stat sb;

	if (!strcmp(name, ".") || name[0] == '/') {
		snprintf(out, size, "%s", !strcmp(name, ".") ? vds_file : name);
		return;
	}
	folder_of(vds_file, folder, sizeof(folder));
	if (snprintf(out, size, "%s/%s", folder, name) >= (int)size ||
	    (stat(out, &sb) != 0 && stat(name, &sb) == 0))
		snprintf(out, size, "%s", name);
}

/* Source file and dataset names of mapping i. */
static int h5vds_mapping_names(hid_t dcpl, size_t i, const char *vds_file,
			      const char *label, char *path, char *dset,
			      xj_status *st)
{
	char name[XJ_PATH_MAX];
	ssize_t nf, nd;

	if (H5_TRY(nf = H5Pget_virtual_filename(dcpl, i, name, sizeof(name)),
		   st, XJ_EXIT_INPUT, "%s: source %zu file name", label, i) ||
	    H5_TRY(nd = H5Pget_virtual_dsetname(dcpl, i, dset, XJ_NAME_MAX),
		   st, XJ_EXIT_INPUT, "%s: source %zu dataset name", label, i))
		return st->code;
	if (nf >= (ssize_t)sizeof(name) || nd >= XJ_NAME_MAX)
		return xj_fail(st, XJ_EXIT_INPUT, "%s: source %zu: name too "
			       "long", label, i);
	h5vds_source_path(vds_file, name, path, XJ_PATH_MAX);
	return XJ_OK;
}

/* The shape source i must have: the virtual block's for a source mapped
 * whole (HDF5 keeps no extent for it), else one past the source
 * selection's far corner. *whole: the shape must match exactly. */
static int h5vds_source_want(hid_t dcpl, size_t i, const char *label,
			    hsize_t *want, int *whole, xj_status *st)
{
	hid_t vspace = H5I_INVALID_HID, sspace = H5I_INVALID_HID;
	hsize_t lo[2], hi[2];

	if (H5_TRY(vspace = H5Pget_virtual_vspace(dcpl, i), st, XJ_EXIT_INPUT,
		   "%s: mapping %zu", label, i) ||
	    H5_TRY(sspace = H5Pget_virtual_srcspace(dcpl, i), st,
		   XJ_EXIT_INPUT, "%s: mapping %zu source space", label, i))
		goto out;
	*whole = H5Sget_select_type(sspace) == H5S_SEL_ALL;
	if (*whole ? H5Sget_select_bounds(vspace, lo, hi) < 0 :
	    H5Sget_simple_extent_ndims(sspace) != 2 ||
	    H5Sget_select_bounds(sspace, lo, hi) < 0) {
		H5Eclear2(H5E_DEFAULT);
		xj_fail(st, XJ_EXIT_INPUT, "%s: mapping %zu selects no 2-D "
			"block", label, i);
		goto out;
	}
	want[0] = *whole ? hi[0] - lo[0] + 1 : hi[0] + 1;
	want[1] = *whole ? hi[1] - lo[1] + 1 : hi[1] + 1;
out:
	h5in_close_id(&sspace, H5Sclose);
	h5in_close_id(&vspace, H5Sclose);
	return st->code;
}

/* Source i of a VDS: present, numeric, stored, and of the shape the VDS
 * maps (a source rewritten with another width would read as fill
 * values or fail half-way). */
static int h5vds_check_source(hid_t dcpl, size_t i, const char *vds_file,
			     const char *label, int depth, int *wide_float,
			     xj_status *st)
{
	char dset[XJ_NAME_MAX];
	h5in_info src;
	hid_t fid = H5I_INVALID_HID;
	hsize_t want[2] = { 0, 0 };
	int whole = 0;

	memset(&src, 0, sizeof(src));
	if (h5vds_mapping_names(dcpl, i, vds_file, label, src.file, dset, st) ||
	    h5vds_source_want(dcpl, i, label, want, &whole, st))
		return st->code;
	if (h5in_check_file(src.file, src.file, st) ||
	    h5in_open_file(src.file, src.file, &fid, st) ||
	    h5in_resolve(fid, src.file, dset, "", src.dset, st) ||
	    h5in_check_dset(fid, &src, depth + 1, wide_float, st))
		goto out;
	if (whole ? (hsize_t)src.rows != want[0] || (hsize_t)src.cols != want[1]
		  : (hsize_t)src.rows < want[0] || (hsize_t)src.cols < want[1])
		xj_fail(st, XJ_EXIT_INPUT, "%s:%s: is %lld x %lld, the virtual "
			"dataset maps %s%llu x %llu", src.file, src.dset,
			(long long)src.rows, (long long)src.cols,
			whole ? "it as " : "rows and columns up to ",
			(unsigned long long)want[0],
			(unsigned long long)want[1]);
out:
	h5in_close_id(&fid, H5Fclose);
	if (st->code)
		xj_wrap(st, "%s: virtual dataset source %zu", label, i);
	return st->code;
}

/*
 * A VDS stores nothing itself (its storage size is 0): what must be
 * stored is every source, and the mappings must cover the whole VDS, or
 * the unmapped values read as fill values.
 */
int h5vds_check(hid_t dcpl, const hsize_t *dims, const char *file,
		const char *label, int depth, int *wide_float, xj_status *st)
{
	size_t count = 0;
	hsize_t mapped = 0;

	if (depth >= H5VDS_DEPTH_MAX)
		return xj_fail(st, XJ_EXIT_INPUT, "%s: virtual datasets nested "
			       "more than %d deep (a loop?)", label,
			       H5VDS_DEPTH_MAX);
	if (H5_TRY(H5Pget_virtual_count(dcpl, &count), st, XJ_EXIT_INPUT,
		   "%s: virtual mappings", label))
		return st->code;
	for (size_t i = 0; i < count; i++) {
		hid_t vspace;
		hssize_t points;

		if (H5_TRY(vspace = H5Pget_virtual_vspace(dcpl, i), st,
			   XJ_EXIT_INPUT, "%s: mapping %zu", label, i))
			return st->code;
		points = H5Sget_select_npoints(vspace);
		H5Sclose(vspace);
		mapped += points > 0 ? (hsize_t)points : 0;
		if (h5vds_check_source(dcpl, i, file, label, depth, wide_float,
				      st))
			return st->code;
	}
	if (mapped < dims[0] * dims[1])
		return xj_fail(st, XJ_EXIT_INPUT, "%s: its %zu sources map %llu "
			       "of its %llu x %llu values; the rest would read "
			       "as fill values", label, count,
			       (unsigned long long)mapped,
			       (unsigned long long)dims[0],
			       (unsigned long long)dims[1]);
	return XJ_OK;
}

int h5vds_sources(hid_t dset, const h5in_info *info, h5in_source **src,
		  int64_t *count, xj_status *st)
{
	char label[H5IN_LABEL_MAX];
	hid_t dcpl;
	size_t n = 0;
	int rc = XJ_OK;

	*src = NULL;
	*count = 0;
	snprintf(label, sizeof(label), "%s:%s", info->file, info->dset);
	if (H5_TRY(dcpl = H5Dget_create_plist(dset), st, XJ_EXIT_INPUT,
		   "%s: creation properties", label))
		return st->code;
	if (H5Pget_layout(dcpl) != H5D_VIRTUAL ||
	    H5_TRY(H5Pget_virtual_count(dcpl, &n), st, XJ_EXIT_INPUT,
		   "%s: virtual mappings", label))
		goto out;
	*src = calloc(n ? n : 1, sizeof(**src));
	if (!*src) {
		rc = xj_fail(st, XJ_EXIT_RESOURCE, "%s: out of memory", label);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		h5in_source *s = &(*src)[i];
		hsize_t lo[2] = { 0, 0 }, hi[2] = { 0, 0 };
		hid_t vspace = H5Pget_virtual_vspace(dcpl, i);

		if (H5_TRY(vspace, st, XJ_EXIT_INPUT, "%s: mapping %zu", label,
			   i) ||
		    h5vds_mapping_names(dcpl, i, info->file, label, s->file,
				       s->dset, st)) {
			h5in_close_id(&vspace, H5Sclose);
			goto out;
		}
		if (s->dset[0] != '/') {   /* names are absolute in messages */
			memmove(s->dset + 1, s->dset, sizeof(s->dset) - 1);
			s->dset[0] = '/';
			s->dset[sizeof(s->dset) - 1] = '\0';
		}
		/* an empty selection has no bounds: it maps no rows */
		if (H5Sget_select_bounds(vspace, lo, hi) >= 0) {
			s->row0 = (int64_t)lo[0];
			s->rows = (int64_t)(hi[0] - lo[0] + 1);
			s->col0 = (int64_t)lo[1];
			s->cols = (int64_t)(hi[1] - lo[1] + 1);
		}
		H5Eclear2(H5E_DEFAULT);
		H5Sclose(vspace);
		(*count)++;
	}
out:
	H5Pclose(dcpl);
	return st->code ? st->code : rc;
}
