/*
 * h5in_int.h: what io/h5in.c shares with io/h5vds.c (private to io/).
 *
 * defines: H5IN_LABEL_MAX, h5in_close_id, h5in_check_file, h5in_open_file,
 *          h5in_resolve, h5in_check_dset, h5vds_check, h5vds_sources
 *
 * A VDS source is checked as a plain input is (h5in.c's checks), and a
 * plain input that turns out to be a VDS has its sources checked
 * (h5vds.c): the two files call each other, one level deeper each time.
 */
#ifndef XJ_H5IN_INT_H
#define XJ_H5IN_INT_H

#include <hdf5.h>

#include "h5in.h"

/* "file:dataset: rows [a, b)" */
#define H5IN_LABEL_MAX (XJ_PATH_MAX + XJ_NAME_MAX + 64)

/* ---- h5in.c ---- */

/* Close an HDF5 id if it is open, and mark it closed. */
void h5in_close_id(hid_t *id, herr_t (*close)(hid_t));

/* Missing, unreadable, not a regular file, not HDF5: refused before
 * HDF5 opens it. label is "file" or "file:dataset". */
int h5in_check_file(const char *file, const char *label, xj_status *st);

/* Open read-only with the sec2 driver. */
int h5in_open_file(const char *file, const char *label, hid_t *fid,
		   xj_status *st);

/* The dataset name to read (see h5in_probe) into out (XJ_NAME_MAX). */
int h5in_resolve(hid_t fid, const char *file, const char *dset,
		 const char *default_dset, char *out, xj_status *st);

/* Shape, type and stored data of info->dset into info; depth: how many
 * VDSs lead to it. */
int h5in_check_dset(hid_t fid, h5in_info *info, int depth, int *wide_float,
		    xj_status *st);

/* ---- h5vds.c ---- */

/* Every source of the VDS with creation properties dcpl (dims, in file,
 * named label in messages) is present, numeric, stored and of the shape
 * its mapping expects, and the mappings cover the VDS. */
int h5vds_check(hid_t dcpl, const hsize_t *dims, const char *file,
		const char *label, int depth, int *wide_float, xj_status *st);

/* The sources of the open dataset dset (info names it) into *src
 * (malloc'd, *count entries, in mapping order); none when it is not a
 * VDS. */
int h5vds_sources(hid_t dset, const h5in_info *info, h5in_source **src,
		  int64_t *count, xj_status *st);

/* h5in_mem.c: rows [row0, row0 + rows) of an input in memory, as
 * float32 into out (nothing copied when out is those very rows). */
void h5in_mem_read(const h5in_info *info, int64_t row0, int64_t rows,
		   float *out);

#endif
