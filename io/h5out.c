/*
 * h5out.c: writing results with parallel HDF5 (see h5out.h).
 *
 * The file is opened through MPI-IO on a private duplicate of the caller's
 * communicator; slabs are written with collective transfers so MPI-IO can
 * aggregate the ranks' pieces into large contiguous writes. Datasets are
 * never compressed: parallel HDF5 1.10 cannot write compressed chunks
 * collectively, and results are written once and read rarely.
 *
 * Agreement: every public function here is collective and returns the
 * same code and message on every rank. h5out_create agrees on rank 0's
 * checks of the output path before the collective H5Fcreate; the others
 * agree after their local work (and h5out_write also before H5Dwrite, so
 * a rank with a bad slab never leaves the others waiting in it). When
 * several ranks fail, the lowest failing rank's message wins.
 *
 * The status passed in is reset on entry.
 */
#define _GNU_SOURCE     /* O_DIRECT */

#include "h5out.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <hdf5.h>

#include "../config/job.h"
#include "folder.h"
#include "h5check.h"

#define H5OUT_SLOTS 8
#define H5OUT_CHUNK_BYTES ((int64_t)4 << 20)
/* file offsets, lengths and buffers of O_DIRECT transfers (h5out_set_direct)
 * are multiples of this; so are the file addresses of objects of at least
 * this size (H5Pset_alignment) */
#define H5OUT_ALIGN 4096
/* attributes live in the root object header, which holds 64 KiB */
#define H5OUT_ATTR_MAX_BYTES 32768

struct h5out {
	MPI_Comm comm;           /* private duplicate of the caller's */
	int rank;
	int nranks;
	int force;
	int reopened;            /* datasets exist: open, do not create */
	hid_t file;
	int ndset;
	hid_t dset[H5OUT_SLOTS];
	h5out_type type[H5OUT_SLOTS];
	int64_t rows[H5OUT_SLOTS];
	int64_t cols[H5OUT_SLOTS];
	int rank1[H5OUT_SLOTS];  /* a 1-D dataset (h5out_add_vector) */
	int independent;         /* h5out_write's transfers independent */
	hsize_t chunk[H5OUT_SLOTS][2];  /* chunk shape; 0 x 0: contiguous */
	int dfd;                 /* h5out_set_direct's descriptor, or -1 */
	void *stage;             /* one aligned chunk for the direct writes */
	int64_t direct_bytes;    /* the slabs' bytes written so */
	int direct_refused;      /* a pwrite failed with EINVAL: HDF5's */
	int io_failed;           /* an agreed resource error (a full disk):
				  * HDF5's collective close may then wait
				  * forever for the rank whose write failed */
	char name[H5OUT_SLOTS][XJ_NAME_MAX];
	char path[XJ_PATH_MAX];
	char partial[XJ_PATH_MAX + 16];
};

/* A file was left unclosed (h5out_leave_open) or its H5Fclose failed
 * (after a flush that found the disk full, parallel HDF5 1.10 cannot
 * close it again): HDF5's own clean-up at MPI_Finalize would then crash
 * on the half-closed file. */
static int h5out_close_failed;

int h5out_unclean(void)
{
	return h5out_close_failed;
}

void h5out_partial_path(const char *path, char *buf, size_t size)
{
	snprintf(buf, size, "%s.partial", path);
}

/* Make every rank of comm hold the status of the lowest failing rank.
 * Returns the agreed code. MAXLOC on (failed, rank) picks the lowest rank
 * among ties. */
static int h5out_agree_on(MPI_Comm comm, int rank, int nranks,
			  const char *what, xj_status *st)
{
	struct { int failed; int rank; } in, out;
	char host[MPI_MAX_PROCESSOR_NAME] = "?";
	int len;

	in.failed = st->code != XJ_OK;
	in.rank = rank;
	if (MPI_TRY(MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MAXLOC, comm),
		    st, XJ_EXIT_INTERNAL, "%s: agreeing on status", what))
		return st->code;
	if (!out.failed)
		return XJ_OK;
	if (rank == out.rank && nranks > 1) {
		if (MPI_Get_processor_name(host, &len) != MPI_SUCCESS)
			strcpy(host, "?");
		xj_wrap(st, "rank %d on %s", rank, host);
	}
	MPI_TRY(MPI_Bcast(st, sizeof(*st), MPI_BYTE, out.rank, comm), st,
		XJ_EXIT_INTERNAL, "%s: sharing status", what);
	return st->code;
}

static int h5out_agree(h5out *h, xj_status *st)
{
	int rc = h5out_agree_on(h->comm, h->rank, h->nranks, h->partial, st);

	if (rc == XJ_EXIT_RESOURCE)
		h->io_failed = 1;    /* the same on every rank */
	return rc;
}

/* After a failed write the file is left as the last flush made it, not
 * closed: parallel HDF5's close flushes again, and on a full disk the
 * rank whose write fails leaves the others waiting in a collective call
 * (measured: a range join across 3 nodes never ended). The program then
 * ends without HDF5's clean-up (h5out_unclean). */
static int h5out_leave_open(h5out *h)
{
	if (!h->io_failed || h->file < 0)
		return 0;
	if (h->dfd >= 0) {
		close(h->dfd);
		h->dfd = -1;
	}
	h5out_close_failed = 1;
	return 1;
}

/* Rank 0's checks before anything is created. */
static int h5out_check_path(const char *path, int force, xj_status *st)
{
	char folder[XJ_PATH_MAX];
	struct stat sb;

	if (!path[0])
		return xj_fail(st, XJ_EXIT_USAGE, "empty output path");
	if (strlen(path) >= XJ_PATH_MAX)
		return xj_fail(st, XJ_EXIT_USAGE, "output '%.64s...': path "
			       "longer than %d bytes", path, XJ_PATH_MAX - 1);
	folder_of(path, folder, sizeof(folder));
	if (stat(folder, &sb) != 0)
		return xj_fail(st, XJ_EXIT_RESOURCE, "output folder %s: %s",
			       folder, strerror(errno));
	if (!S_ISDIR(sb.st_mode))
		return xj_fail(st, XJ_EXIT_RESOURCE,
			       "output folder %s is not a directory", folder);
	if (access(folder, W_OK | X_OK) != 0)
		return xj_fail(st, XJ_EXIT_RESOURCE,
			       "output folder %s is not writable: %s", folder,
			       strerror(errno));
	if (lstat(path, &sb) != 0)
		return XJ_OK;
	if (S_ISDIR(sb.st_mode))
		return xj_fail(st, XJ_EXIT_USAGE, "output %s is a directory",
			       path);
	/* the result is renamed onto the path: --force may replace a file
	 * or a link, never a pipe or a device (think /dev/null as root) */
	if (!S_ISREG(sb.st_mode) && !S_ISLNK(sb.st_mode))
		return xj_fail(st, XJ_EXIT_USAGE, "output %s exists and is not "
			       "a regular file", path);
	if (!force)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "output %s exists (use --force to overwrite)",
			       path);
	return XJ_OK;
}

static int h5out_open_file(h5out *h, xj_status *st)
{
	hid_t fapl;

	if (H5_TRY(fapl = H5Pcreate(H5P_FILE_ACCESS), st, XJ_EXIT_INTERNAL,
		   "%s: file access list", h->partial))
		return st->code;
	if (H5_TRY(H5Pset_fapl_mpio(fapl, h->comm, MPI_INFO_NULL), st,
		   XJ_EXIT_INTERNAL, "%s: MPI-IO driver", h->partial) ||
	    H5_TRY(H5Pset_alignment(fapl, H5OUT_ALIGN, H5OUT_ALIGN), st,
		   XJ_EXIT_INTERNAL, "%s: alignment", h->partial))
		goto out;
	if (h->reopened)
		H5_TRY(h->file = H5Fopen(h->partial, H5F_ACC_RDWR, fapl), st,
		       XJ_EXIT_INPUT, "%s: cannot reopen the interrupted "
		       "run's output (start over with --force)", h->partial);
	else
		H5_TRY(h->file = H5Fcreate(h->partial, H5F_ACC_TRUNC,
					   H5P_DEFAULT, fapl), st,
		       XJ_EXIT_RESOURCE, "%s: cannot create", h->partial);
out:
	H5Pclose(fapl);
	return st->code;
}

/* Drop a handle whose file never opened everywhere. Closing a file that
 * only some ranks opened would wait forever in MPI_File_close, so such an
 * id is left to the library's exit instead. */
static void h5out_drop(h5out *h, int opened_everywhere)
{
	if (h->file >= 0 && opened_everywhere)
		H5Fclose(h->file);
	if (h->rank == 0 && !h->reopened)
		unlink(h->partial);
	MPI_Comm_free(&h->comm);
	free(h);
}

/* Rank 0's checks before an interrupted run's file is reopened. */
static int h5out_check_reopen(const char *path, xj_status *st)
{
	char partial[XJ_PATH_MAX + 16];
	struct stat sb;

	if (h5out_check_path(path, 0, st))
		return st->code;
	h5out_partial_path(path, partial, sizeof(partial));
	if (stat(partial, &sb) != 0)
		return xj_fail(st, XJ_EXIT_INPUT, "%s: %s: the interrupted "
			       "run's output is gone (start over with --force)",
			       partial, strerror(errno));
	if (!S_ISREG(sb.st_mode))
		return xj_fail(st, XJ_EXIT_INPUT, "%s is not a file", partial);
	return XJ_OK;
}

/* "<partial>-<digits>-<digits>.lock": name is past the partial's basename
 * and its dash. */
static int is_lock_name(const char *rest)
{
	size_t digits, len = strlen(rest);

	if (len < 8 || strcmp(rest + len - 5, ".lock") != 0)
		return 0;
	for (int part = 0; part < 2; part++) {
		digits = strspn(rest, "0123456789");
		if (digits == 0 || rest[digits] != (part ? '.' : '-'))
			return 0;
		rest += digits + 1;
	}
	return strcmp(rest, "lock") == 0;
}

int h5out_unlink_locks(const char *path)
{
	char partial[XJ_PATH_MAX + 16], folder[XJ_PATH_MAX + 16];
	char file[2 * XJ_PATH_MAX + 64];
	const char *base, *slash;
	struct dirent *e;
	size_t blen;
	DIR *dir;
	int n = 0;

	h5out_partial_path(path, partial, sizeof(partial));
	slash = strrchr(partial, '/');
	base = slash ? slash + 1 : partial;
	folder_of(partial, folder, sizeof(folder));
	blen = strlen(base);
	dir = opendir(folder);
	if (!dir)
		return 0;
	while ((e = readdir(dir))) {
		if (strncmp(e->d_name, base, blen) != 0 ||
		    e->d_name[blen] != '-' || !is_lock_name(e->d_name + blen + 1))
			continue;
		snprintf(file, sizeof(file), "%s/%s", folder, e->d_name);
		if (unlink(file) == 0)
			n++;
	}
	closedir(dir);
	return n;
}

static int h5out_open(MPI_Comm comm, const char *path, int force,
		      int reopen, h5out **out, xj_status *st)
{
	h5out *h;
	int rank, nranks, opened, opened_all = 0, i;

	xj_ok(st);
	*out = NULL;
	h5check_silence();
	if (MPI_TRY(MPI_Comm_rank(comm, &rank), st, XJ_EXIT_INTERNAL,
		    "output %s: communicator rank", path) ||
	    MPI_TRY(MPI_Comm_size(comm, &nranks), st, XJ_EXIT_INTERNAL,
		    "output %s: communicator size", path))
		return st->code;
	if (rank == 0 && reopen)
		h5out_check_reopen(path, st);
	else if (rank == 0)
		h5out_check_path(path, force, st);
	/* a run that died left MPI-IO's lock files; none is in use, since
	 * this run owns the output path */
	if (rank == 0 && st->code == XJ_OK)
		h5out_unlink_locks(path);
	if (MPI_TRY(MPI_Bcast(st, sizeof(*st), MPI_BYTE, 0, comm), st,
		    XJ_EXIT_INTERNAL, "output %s: sharing checks", path) ||
	    st->code)
		return st->code;

	h = calloc(1, sizeof(*h));
	if (!h)
		xj_fail(st, XJ_EXIT_RESOURCE, "output %s: out of memory", path);
	if (h5out_agree_on(comm, rank, nranks, path, st)) {
		free(h);
		return st->code;
	}
	h->file = H5I_INVALID_HID;
	h->dfd = -1;
	for (i = 0; i < H5OUT_SLOTS; i++)
		h->dset[i] = H5I_INVALID_HID;
	h->rank = rank;
	h->nranks = nranks;
	h->force = force;
	h->reopened = reopen;
	strcpy(h->path, path);
	h5out_partial_path(path, h->partial, sizeof(h->partial));
	if (MPI_TRY(MPI_Comm_dup(comm, &h->comm), st, XJ_EXIT_INTERNAL,
		    "output %s: duplicating communicator", path)) {
		free(h);
		return st->code;
	}

	h5out_open_file(h, st);
	opened = h->file >= 0;
	if (MPI_TRY(MPI_Allreduce(&opened, &opened_all, 1, MPI_INT, MPI_LAND,
				  h->comm), st, XJ_EXIT_INTERNAL,
		    "%s: agreeing on create", h->partial) ||
	    h5out_agree(h, st)) {
		h5out_drop(h, opened_all);
		return st->code;
	}
	*out = h;
	return XJ_OK;
}

int h5out_create(MPI_Comm comm, const char *path, int force, h5out **out,
		 xj_status *st)
{
	return h5out_open(comm, path, force, 0, out, st);
}

int h5out_reopen(MPI_Comm comm, const char *path, h5out **out,
		 xj_status *st)
{
	return h5out_open(comm, path, 0, 1, out, st);
}

/* Chunks of chunk_rows x chunk_cols (0: cols), cut to at most
 * H5OUT_CHUNK_BYTES: fewer rows first, then, when one row is already too
 * wide, fewer columns. */
static void h5out_chunk_dims(int64_t rows, int64_t cols, int64_t chunk_rows,
			     int64_t chunk_cols, size_t elem_bytes,
			     hsize_t chunk[2])
{
	int64_t cap = H5OUT_CHUNK_BYTES / (int64_t)elem_bytes;
	int64_t r = chunk_rows < rows ? chunk_rows : rows;
	int64_t c = chunk_cols > 0 && chunk_cols < cols ? chunk_cols : cols;

	if (c > cap) {
		c = cap;
		r = 1;
	} else if (r > cap / c) {
		/* cut the rows into equal parts whose chunks are a multiple
		 * of H5OUT_ALIGN bytes (whole chunks then go by O_DIRECT,
		 * h5out_set_direct), if a few more parts allow it */
		int64_t k = (r + cap / c - 1) / (cap / c), k1 = k + 64;

		while (k < k1 && (r % k || r / k * c * (int64_t)elem_bytes %
				  H5OUT_ALIGN))
			k++;
		r = k < k1 ? r / k : cap / c;
	}
	chunk[0] = (hsize_t)(r > 0 ? r : 1);
	chunk[1] = (hsize_t)c;
}

static int h5out_check_args(const h5out *h, const char *name, int64_t rows,
			    int64_t cols, int64_t chunk_rows,
			    int64_t chunk_cols, xj_status *st)
{
	if (!name || !name[0] || strlen(name) >= XJ_NAME_MAX)
		return xj_fail(st, XJ_EXIT_INTERNAL, "%s: dataset name '%.64s' "
			       "empty or too long", h->partial,
			       name ? name : "");
	if (h->ndset >= H5OUT_SLOTS)
		return xj_fail(st, XJ_EXIT_INTERNAL, "%s:%s: more than %d "
			       "datasets", h->partial, name, H5OUT_SLOTS);
	if (rows < 0 || cols < 0 || chunk_rows < 0 || chunk_cols < 0)
		return xj_fail(st, XJ_EXIT_INTERNAL, "%s:%s: bad shape %lld x "
			       "%lld (chunk %lld x %lld)", h->partial, name,
			       (long long)rows, (long long)cols,
			       (long long)chunk_rows, (long long)chunk_cols);
	return XJ_OK;
}

/* The creation list of every dataset: space allocated at creation, no
 * fill values. */
static int h5out_dcpl(const h5out *h, const char *name, hid_t *dcpl,
		      xj_status *st)
{
	if (H5_TRY(*dcpl = H5Pcreate(H5P_DATASET_CREATE), st,
		   XJ_EXIT_INTERNAL, "%s:%s: creation list", h->partial,
		   name) ||
	    H5_TRY(H5Pset_alloc_time(*dcpl, H5D_ALLOC_TIME_EARLY), st,
		   XJ_EXIT_INTERNAL, "%s:%s: allocation time", h->partial,
		   name))
		return st->code;
	/* the driver writes every element: fill values would only be
	 * written twice, by a collective write inside H5Dcreate2 that
	 * leaves the other ranks waiting when it fails on one (full
	 * disk) */
	H5_TRY(H5Pset_fill_time(*dcpl, H5D_FILL_TIME_NEVER), st,
	       XJ_EXIT_INTERNAL, "%s:%s: fill time", h->partial, name);
	return st->code;
}

static int h5out_make_dataset(h5out *h, const char *name, h5out_type type,
			      int64_t rows, int64_t cols, int64_t chunk_rows,
			      int64_t chunk_cols, xj_status *st)
{
	hid_t ftype = type == H5OUT_I64 ? H5T_STD_I64LE : H5T_IEEE_F32LE;
	size_t elem_bytes = type == H5OUT_I64 ? 8 : 4;
	hid_t space = H5I_INVALID_HID, dcpl = H5I_INVALID_HID;
	hid_t lcpl = H5I_INVALID_HID, dset = H5I_INVALID_HID;
	hsize_t dims[2] = { (hsize_t)rows, (hsize_t)cols }, chunk[2];

	if (H5_TRY(space = H5Screate_simple(2, dims, NULL), st,
		   XJ_EXIT_INTERNAL, "%s:%s: dataspace", h->partial, name) ||
	    h5out_dcpl(h, name, &dcpl, st) ||
	    H5_TRY(lcpl = H5Pcreate(H5P_LINK_CREATE), st, XJ_EXIT_INTERNAL,
		   "%s:%s: link list", h->partial, name) ||
	    H5_TRY(H5Pset_create_intermediate_group(lcpl, 1), st,
		   XJ_EXIT_INTERNAL, "%s:%s: link list", h->partial, name))
		goto out;
	/* an empty dataset cannot hold a chunk, so it stays contiguous */
	if (chunk_rows > 0 && rows > 0 && cols > 0) {
		h5out_chunk_dims(rows, cols, chunk_rows, chunk_cols, elem_bytes,
				 chunk);
		if (H5_TRY(H5Pset_chunk(dcpl, 2, chunk), st, XJ_EXIT_INTERNAL,
			   "%s:%s: chunk %llu x %llu", h->partial, name,
			   (unsigned long long)chunk[0],
			   (unsigned long long)chunk[1]))
			goto out;
	}
	if (H5_TRY(dset = H5Dcreate2(h->file, name, ftype, space, lcpl, dcpl,
				     H5P_DEFAULT), st, XJ_EXIT_RESOURCE,
		   "%s:%s: cannot create %lld x %lld dataset", h->partial,
		   name, (long long)rows, (long long)cols))
		goto out;
	h->dset[h->ndset] = dset;
	h->type[h->ndset] = type;
	h->rows[h->ndset] = rows;
	h->cols[h->ndset] = cols;
	h->chunk[h->ndset][0] = h->chunk[h->ndset][1] = 0;
	if (chunk_rows > 0 && rows > 0 && cols > 0) {
		h->chunk[h->ndset][0] = chunk[0];
		h->chunk[h->ndset][1] = chunk[1];
	}
	strcpy(h->name[h->ndset], name);
out:
	if (lcpl >= 0)
		H5Pclose(lcpl);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (space >= 0)
		H5Sclose(space);
	return st->code;
}

/* The chunk shape of an existing 2-D dataset; 0 x 0 when contiguous. */
static void h5out_chunk_of(hid_t dset, int ndim, hsize_t chunk[2])
{
	hid_t dcpl = H5Dget_create_plist(dset);

	chunk[0] = chunk[1] = 0;
	if (dcpl < 0)
		return;
	if (ndim != 2 || H5Pget_layout(dcpl) != H5D_CHUNKED ||
	    H5Pget_chunk(dcpl, 2, chunk) != 2)
		chunk[0] = chunk[1] = 0;
	H5Pclose(dcpl);
}

/* The interrupted run's dataset: same type class and shape, or refused.
 * ndim 1: a vector of rows elements (cols 1), of any length when
 * growable (the length the run had grown it to). */
static int h5out_open_dataset(h5out *h, const char *name, h5out_type type,
			      int64_t rows, int64_t cols, int ndim,
			      int growable, xj_status *st)
{
	hid_t dset = H5I_INVALID_HID, space = H5I_INVALID_HID;
	hid_t ftype = H5I_INVALID_HID;
	hsize_t dims[2] = { 0, 0 };
	int ok = 0;

	if (H5_TRY(dset = H5Dopen2(h->file, name, H5P_DEFAULT), st,
		   XJ_EXIT_INPUT, "%s: no dataset %s (start over with --force)",
		   h->partial, name) ||
	    H5_TRY(space = H5Dget_space(dset), st, XJ_EXIT_INPUT,
		   "%s:%s: dataspace", h->partial, name) ||
	    H5_TRY(ftype = H5Dget_type(dset), st, XJ_EXIT_INPUT,
		   "%s:%s: type", h->partial, name))
		goto out;
	if (ndim == 1)
		dims[1] = 1;
	ok = H5Sget_simple_extent_ndims(space) == ndim &&
	     H5Sget_simple_extent_dims(space, dims, NULL) == ndim &&
	     (dims[0] == (hsize_t)rows || growable) &&
	     dims[1] == (hsize_t)cols &&
	     H5Tget_class(ftype) == (type == H5OUT_I64 ? H5T_INTEGER :
						       H5T_FLOAT) &&
	     H5Tget_size(ftype) == (type == H5OUT_I64 ? 8 : 4);
	if (!ok)
		xj_fail(st, XJ_EXIT_INPUT, "%s:%s: not the %lld x %lld dataset "
			"this job writes (start over with --force)",
			h->partial, name, (long long)rows, (long long)cols);
out:
	if (ftype >= 0)
		H5Tclose(ftype);
	if (space >= 0)
		H5Sclose(space);
	if (st->code) {
		if (dset >= 0)
			H5Dclose(dset);
		return st->code;
	}
	h5out_chunk_of(dset, ndim, h->chunk[h->ndset]);
	h->dset[h->ndset] = dset;
	h->type[h->ndset] = type;
	h->rows[h->ndset] = (int64_t)dims[0];
	h->cols[h->ndset] = cols;
	h->rank1[h->ndset] = ndim == 1;
	strcpy(h->name[h->ndset], name);
	return XJ_OK;
}

/* Agree on the dataset just made in the next slot; *slot is it. */
static int h5out_slot_agree(h5out *h, int *slot, xj_status *st)
{
	if (h5out_agree(h, st)) {
		/* created here but not everywhere: forget it, the file is
		 * going to be aborted */
		if (h->ndset < H5OUT_SLOTS && h->dset[h->ndset] >= 0) {
			H5Dclose(h->dset[h->ndset]);
			h->dset[h->ndset] = H5I_INVALID_HID;
		}
		return st->code;
	}
	*slot = h->ndset++;
	return XJ_OK;
}

int h5out_add_dataset_tiled(h5out *h, const char *name, h5out_type type,
			    int64_t rows, int64_t cols, int64_t chunk_rows,
			    int64_t chunk_cols, int *slot, xj_status *st)
{
	xj_ok(st);
	*slot = -1;
	if (!h5out_check_args(h, name, rows, cols, chunk_rows, chunk_cols,
			      st)) {
		if (h->reopened)
			h5out_open_dataset(h, name, type, rows, cols, 2, 0,
					   st);
		else
			h5out_make_dataset(h, name, type, rows, cols,
					   chunk_rows, chunk_cols, st);
	}
	return h5out_slot_agree(h, slot, st);
}

int h5out_add_dataset(h5out *h, const char *name, h5out_type type,
		      int64_t rows, int64_t cols, int64_t chunk_rows,
		      int *slot, xj_status *st)
{
	return h5out_add_dataset_tiled(h, name, type, rows, cols, chunk_rows,
				       0, slot, st);
}

static void h5out_room_hint(const h5out *h, int64_t bytes, xj_status *st);

/* A 1-D dataset; growable ones are chunked (1 Mi elements at most) with
 * no upper bound. */
static int h5out_make_vector(h5out *h, const char *name, h5out_type type,
			     int64_t len, int growable, xj_status *st)
{
	hid_t ftype = type == H5OUT_I64 ? H5T_STD_I64LE : H5T_IEEE_F32LE;
	hid_t space = H5I_INVALID_HID, dcpl = H5I_INVALID_HID;
	hsize_t dims[1] = { (hsize_t)len }, maxd[1] = { H5S_UNLIMITED };
	hsize_t chunk[1] = { (hsize_t)1 << 20 };

	if (H5_TRY(space = H5Screate_simple(1, dims, growable ? maxd : NULL),
		   st, XJ_EXIT_INTERNAL, "%s:%s: dataspace", h->partial,
		   name) ||
	    h5out_dcpl(h, name, &dcpl, st) ||
	    (growable && H5_TRY(H5Pset_chunk(dcpl, 1, chunk), st,
				XJ_EXIT_INTERNAL, "%s:%s: chunk", h->partial,
				name)))
		goto out;
	if (H5_TRY(h->dset[h->ndset] = H5Dcreate2(h->file, name, ftype, space,
						  H5P_DEFAULT, dcpl,
						  H5P_DEFAULT), st,
		   XJ_EXIT_RESOURCE, "%s:%s: cannot create a dataset of %lld",
		   h->partial, name, (long long)len))
		goto out;
	h->type[h->ndset] = type;
	h->rows[h->ndset] = len;
	h->cols[h->ndset] = 1;
	h->rank1[h->ndset] = 1;
	strcpy(h->name[h->ndset], name);
out:
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (space >= 0)
		H5Sclose(space);
	return st->code;
}

int h5out_add_vector(h5out *h, const char *name, h5out_type type,
		     int64_t len, int growable, int *slot, xj_status *st)
{
	xj_ok(st);
	*slot = -1;
	if (!h5out_check_args(h, name, len, 1, 0, 0, st)) {
		if (h->reopened)
			h5out_open_dataset(h, name, type, len, 1, 1,
					   growable, st);
		else
			h5out_make_vector(h, name, type, len, growable, st);
	}
	return h5out_slot_agree(h, slot, st);
}

int h5out_grow(h5out *h, int slot, int64_t len, int shrink, xj_status *st)
{
	hsize_t dims[1] = { (hsize_t)len };

	xj_ok(st);
	if (slot < 0 || slot >= h->ndset || !h->rank1[slot] || len < 0)
		return xj_fail(st, XJ_EXIT_INTERNAL, "%s: no growable dataset "
			       "slot %d", h->partial, slot);
	if (len == h->rows[slot] || (len < h->rows[slot] && !shrink))
		return XJ_OK;
	if (!H5_TRY(H5Dset_extent(h->dset[slot], dims), st, XJ_EXIT_RESOURCE,
		    "%s:%s: extending to %lld elements", h->partial,
		    h->name[slot], (long long)len))
		h->rows[slot] = len;
	else
		h5out_room_hint(h, (len - h->rows[slot]) * 8, st);
	return h5out_agree(h, st);
}

static int h5out_check_slab(const h5out *h, int slot, int64_t row0,
			    int64_t rows, int64_t col0, int64_t cols,
			    const void *buf, xj_status *st)
{
	if (slot < 0 || slot >= h->ndset)
		return xj_fail(st, XJ_EXIT_INTERNAL, "%s: no dataset slot %d",
			       h->partial, slot);
	if (rows < 0 || cols < 0)
		return xj_fail(st, XJ_EXIT_INTERNAL, "%s: negative slab %lld "
			       "x %lld", h->partial, (long long)rows,
			       (long long)cols);
	if (rows == 0 || cols == 0)
		return XJ_OK;
	if (row0 < 0 || col0 < 0 || row0 > h->rows[slot] - rows ||
	    col0 > h->cols[slot] - cols || !buf)
		return xj_fail(st, XJ_EXIT_INTERNAL, "%s:%s: slab rows [%lld, "
			       "%lld) cols [%lld, %lld) outside %lld x %lld",
			       h->partial, h->name[slot], (long long)row0,
			       (long long)(row0 + rows), (long long)col0,
			       (long long)(col0 + cols),
			       (long long)h->rows[slot],
			       (long long)h->cols[slot]);
	return XJ_OK;
}

/* File and memory selections for a slab; an empty slab selects none but
 * its rank still joins the collective write. */
static int h5out_select(const h5out *h, int slot, int64_t row0,
			int64_t rows, int64_t col0, int64_t cols,
			hid_t *fspace, hid_t *mspace, xj_status *st)
{
	hsize_t start[2] = { (hsize_t)row0, (hsize_t)col0 };
	hsize_t count[2] = { (hsize_t)rows, (hsize_t)cols };
	hsize_t one[2] = { 1, 1 };
	int empty = rows == 0 || cols == 0;

	int ndim = h->rank1[slot] ? 1 : 2;

	if (H5_TRY(*fspace = H5Dget_space(h->dset[slot]), st,
		   XJ_EXIT_INTERNAL, "%s: dataspace", h->partial) ||
	    H5_TRY(*mspace = H5Screate_simple(ndim, empty ? one : count, NULL),
		   st, XJ_EXIT_INTERNAL, "%s: memory dataspace", h->partial))
		return st->code;
	if (empty) {
		if (H5_TRY(H5Sselect_none(*fspace), st, XJ_EXIT_INTERNAL,
			   "%s: select none", h->partial) ||
		    H5_TRY(H5Sselect_none(*mspace), st, XJ_EXIT_INTERNAL,
			   "%s: select none", h->partial))
			return st->code;
		return XJ_OK;
	}
	H5_TRY(H5Sselect_hyperslab(*fspace, H5S_SELECT_SET, start, NULL,
				   count, NULL), st, XJ_EXIT_INTERNAL,
	       "%s: select slab", h->partial);
	return st->code;
}

/* After a failed write: MPI-IO says only "Write failed", so name the
 * usual cause when it holds, a file system with little room left (less
 * than the write plus the 4 MiB a new chunk may take). */
static void h5out_room_hint(const h5out *h, int64_t bytes, xj_status *st)
{
	struct statvfs fs;
	double avail;
	size_t len = strlen(st->msg);

	if (statvfs(h->partial, &fs) != 0)
		return;
	avail = (double)fs.f_bavail * (double)fs.f_frsize;
	if (avail >= (double)bytes + H5OUT_CHUNK_BYTES || len >= XJ_MSG_MAX - 1)
		return;
	snprintf(st->msg + len, XJ_MSG_MAX - len, " (the file system holding "
		 "it has %.1f MiB free: it is probably full)",
		 avail / (1 << 20));
}

/* ---- direct chunk writes (h5out_set_direct) --------------------------- */

int h5out_set_direct(h5out *h, xj_status *st)
{
	int ok, all = 0;

	xj_ok(st);
	if (h->dfd < 0)
		h->dfd = open(h->partial, O_WRONLY | O_DIRECT | O_CLOEXEC);
	if (h->dfd >= 0 && !h->stage)
		h->stage = aligned_alloc(H5OUT_ALIGN, H5OUT_CHUNK_BYTES);
	ok = h->dfd >= 0 && h->stage;
	if (MPI_TRY(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, h->comm),
		    st, XJ_EXIT_INTERNAL, "%s: agreeing on direct writes",
		    h->partial))
		all = 0;
	if (!all && h->dfd >= 0) {
		close(h->dfd);
		h->dfd = -1;
	}
	return all;
}

int64_t h5out_direct_bytes(const h5out *h)
{
	return h->direct_bytes;
}

/* pwrite all of n bytes at off, through EINTR and short writes. */
static int pwrite_all(int fd, const char *p, size_t n, off_t off)
{
	while (n) {
		ssize_t w = pwrite(fd, p, n, off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w == 0)
			errno = EIO;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
		off += w;
	}
	return 0;
}

/* Add rows [r0, r0 + nr) x cols [c0, c0 + nc) of the dataset to the file
 * selection fs, and the same elements of the slab at row0, col0 to the
 * memory selection ms (first: in place of the empty selection). Both are
 * unions of the same rectangles, translated, so HDF5 walks them in the
 * same row-major order. */
static int h5out_select_part(const h5out *h, hid_t fs, hid_t ms, int first,
			     int64_t row0, int64_t col0, int64_t r0,
			     int64_t nr, int64_t c0, int64_t nc,
			     xj_status *st)
{
	hsize_t fstart[2] = { (hsize_t)r0, (hsize_t)c0 };
	hsize_t mstart[2] = { (hsize_t)(r0 - row0), (hsize_t)(c0 - col0) };
	hsize_t count[2] = { (hsize_t)nr, (hsize_t)nc };
	H5S_seloper_t op = first ? H5S_SELECT_SET : H5S_SELECT_OR;

	if (H5_TRY(H5Sselect_hyperslab(fs, op, fstart, NULL, count, NULL), st,
		   XJ_EXIT_INTERNAL, "%s: select slab", h->partial))
		return st->code;
	H5_TRY(H5Sselect_hyperslab(ms, op, mstart, NULL, count, NULL), st,
	       XJ_EXIT_INTERNAL, "%s: select slab", h->partial);
	return st->code;
}

/* Bytes of one chunk of slot (0: contiguous). */
static int64_t h5out_chunk_bytes(const h5out *h, int slot)
{
	return (int64_t)(h->chunk[slot][0] * h->chunk[slot][1]) *
	       (h->type[slot] == H5OUT_I64 ? 8 : 4);
}

/* Whether slot's chunks may go by pwrite: a chunked dataset whose chunks
 * are a multiple of H5OUT_ALIGN bytes and fit the staging buffer. */
static int h5out_direct_shape(const h5out *h, int slot)
{
	int64_t bytes = h5out_chunk_bytes(h, slot);

	return bytes > 0 && bytes % H5OUT_ALIGN == 0 &&
	       bytes <= H5OUT_CHUNK_BYTES;
}

/* The file address of chunk (r, c) of slot when one pwrite of the chunk
 * there may replace it: allocated, aligned, stored unfiltered at its
 * size. Returns 0 when not. */
static int h5out_chunk_addr(const h5out *h, int slot, int64_t r, int64_t c,
			    haddr_t *addr)
{
	hsize_t at[2] = { (hsize_t)r, (hsize_t)c }, size = 0;
	unsigned mask = 0;

	*addr = HADDR_UNDEF;
	return H5Dget_chunk_info_by_coord(h->dset[slot], at, &mask, addr,
					  &size) >= 0 &&
	       *addr != HADDR_UNDEF && *addr % H5OUT_ALIGN == 0 &&
	       mask == 0 && size == (hsize_t)h5out_chunk_bytes(h, slot);
}

/* Chunk rows [r, r1) x cols [c, c1) of slot, which the slab at row0, col0
 * (cols wide, b) covers whole, with one pwrite at addr: from the slab
 * when its rows are the chunk's rows, else from the staging buffer (a
 * chunk at the dataset's edge, padded with zeros). A file system that
 * opened the file with O_DIRECT but refuses the transfer (EINVAL: an
 * alignment it needs larger than 4 KiB) sets direct_refused: this rank's
 * chunks then go through HDF5. Returns 1 when the chunk was written. */
static int h5out_put_chunk(h5out *h, int slot, int64_t row0, int64_t col0,
			   int64_t cols, const char *b, int64_t r, int64_t r1,
			   int64_t c, int64_t c1, haddr_t addr, xj_status *st)
{
	int64_t cr = (int64_t)h->chunk[slot][0], cc = (int64_t)h->chunk[slot][1];
	int64_t es = h->type[slot] == H5OUT_I64 ? 8 : 4;
	int64_t bytes = h5out_chunk_bytes(h, slot);
	const char *src = b + ((r - row0) * cols + (c - col0)) * es;
	int full = r1 - r == cr && c1 - c == cc;

	if (!full || cols != cc || (uintptr_t)src % H5OUT_ALIGN) {
		char *d = h->stage;

		if (!full)
			memset(d, 0, (size_t)bytes);
		for (int64_t i = r; i < r1; i++)
			memcpy(d + (i - r) * cc * es,
			       b + ((i - row0) * cols + (c - col0)) * es,
			       (size_t)((c1 - c) * es));
		src = d;
	}
	if (pwrite_all(h->dfd, src, (size_t)bytes, (off_t)addr) == 0) {
		h->direct_bytes += (r1 - r) * (c1 - c) * es;
		return 1;
	}
	if (errno == EINVAL && h->direct_bytes == 0) {
		h->direct_refused = 1;
	} else {
		xj_fail(st, XJ_EXIT_RESOURCE, "%s:%s: writing the chunk at "
			"rows %lld, cols %lld: %s", h->partial, h->name[slot],
			(long long)r, (long long)c, strerror(errno));
		h5out_room_hint(h, bytes, st);
	}
	return 0;
}

/*
 * The slab through the O_DIRECT descriptor where it covers whole chunks,
 * the rest in one HDF5 transfer (collective, or independent after
 * h5out_set_independent): the pieces of chunks the slab covers in part
 * (where a rank's rows or columns end inside one), and whole chunks a
 * pwrite may not replace, gathered into one selection (every rank calls
 * it, with an empty selection when it has no piece). Collective: the
 * ranks agree on the outcome.
 */
static int h5out_write_direct(h5out *h, int slot, int64_t row0,
			      int64_t rows, int64_t col0, int64_t cols,
			      const void *buf, xj_status *st)
{
	int64_t cr = (int64_t)h->chunk[slot][0], cc = (int64_t)h->chunk[slot][1];
	int64_t es = h->type[slot] == H5OUT_I64 ? 8 : 4;
	hsize_t mdims[2] = { (hsize_t)(rows > 0 ? rows : 1),
			     (hsize_t)(cols > 0 ? cols : 1) };
	hid_t fs = H5I_INVALID_HID, ms = H5I_INVALID_HID;
	hid_t dxpl = H5I_INVALID_HID;
	hid_t mtype = h->type[slot] == H5OUT_I64 ? H5T_NATIVE_INT64 :
						   H5T_NATIVE_FLOAT;
	static const int64_t dummy;
	int64_t nparts = 0;

	if (!H5_TRY(fs = H5Dget_space(h->dset[slot]), st, XJ_EXIT_INTERNAL,
		    "%s: dataspace", h->partial) &&
	    !H5_TRY(ms = H5Screate_simple(2, mdims, NULL), st,
		    XJ_EXIT_INTERNAL, "%s: memory dataspace", h->partial) &&
	    !H5_TRY(H5Sselect_none(fs), st, XJ_EXIT_INTERNAL,
		    "%s: select none", h->partial) &&
	    !H5_TRY(H5Sselect_none(ms), st, XJ_EXIT_INTERNAL,
		    "%s: select none", h->partial) &&
	    !H5_TRY(dxpl = H5Pcreate(H5P_DATASET_XFER), st, XJ_EXIT_INTERNAL,
		    "%s: transfer list", h->partial))
		H5_TRY(H5Pset_dxpl_mpio(dxpl, h->independent ?
					H5FD_MPIO_INDEPENDENT :
					H5FD_MPIO_COLLECTIVE), st,
		       XJ_EXIT_INTERNAL, "%s: transfer mode", h->partial);
	for (int64_t r = row0 - row0 % cr;
	     rows && cols && !st->code && r < row0 + rows; r += cr)
		for (int64_t c = col0 - col0 % cc;
		     !st->code && c < col0 + cols; c += cc) {
			/* the chunk within the dataset; the slab's part */
			int64_t r1 = r + cr < h->rows[slot] ? r + cr :
							      h->rows[slot];
			int64_t c1 = c + cc < h->cols[slot] ? c + cc :
							      h->cols[slot];
			int64_t pr0 = r > row0 ? r : row0;
			int64_t pc0 = c > col0 ? c : col0;
			int64_t pr1 = r1 < row0 + rows ? r1 : row0 + rows;
			int64_t pc1 = c1 < col0 + cols ? c1 : col0 + cols;
			int covered = pr0 == r && pc0 == c && pr1 == r1 &&
				      pc1 == c1;
			haddr_t addr;

			if (covered && !h->direct_refused &&
			    h5out_chunk_addr(h, slot, r, c, &addr) &&
			    h5out_put_chunk(h, slot, row0, col0, cols, buf,
					    r, r1, c, c1, addr, st))
				continue;       /* written */
			if (!st->code)
				h5out_select_part(h, fs, ms, !nparts++, row0,
						  col0, pr0, pr1 - pr0, pc0,
						  pc1 - pc0, st);
		}
	if (!h5out_agree(h, st) &&
	    H5_TRY(H5Dwrite(h->dset[slot], mtype, ms, fs, dxpl,
			    nparts ? buf : (const void *)&dummy), st,
		   XJ_EXIT_RESOURCE, "%s:%s: writing rows [%lld, %lld) cols "
		   "[%lld, %lld)", h->partial, h->name[slot], (long long)row0,
		   (long long)(row0 + rows), (long long)col0,
		   (long long)(col0 + cols)))
		h5out_room_hint(h, rows * cols * es, st);
	h5out_agree(h, st);
	if (dxpl >= 0)
		H5Pclose(dxpl);
	if (ms >= 0)
		H5Sclose(ms);
	if (fs >= 0)
		H5Sclose(fs);
	return st->code;
}

int h5out_write(h5out *h, int slot, int64_t row0, int64_t rows,
		int64_t col0, int64_t cols, const void *buf, xj_status *st)
{
	hid_t fspace = H5I_INVALID_HID, mspace = H5I_INVALID_HID;
	hid_t dxpl = H5I_INVALID_HID, mtype;
	static const int64_t dummy;

	xj_ok(st);
	/* slabs of chunks that cannot go by pwrite take the path below: one
	 * collective transfer */
	if (h->dfd >= 0 && slot >= 0 && slot < h->ndset &&
	    h5out_direct_shape(h, slot)) {
		h5out_check_slab(h, slot, row0, rows, col0, cols, buf, st);
		if (!h5out_agree(h, st))
			h5out_write_direct(h, slot, row0, rows, col0, cols,
					   buf, st);
		return st->code;
	}
	if (!h5out_check_slab(h, slot, row0, rows, col0, cols, buf, st) &&
	    !h5out_select(h, slot, row0, rows, col0, cols, &fspace, &mspace,
			  st) &&
	    !H5_TRY(dxpl = H5Pcreate(H5P_DATASET_XFER), st, XJ_EXIT_INTERNAL,
		    "%s: transfer list", h->partial))
		H5_TRY(H5Pset_dxpl_mpio(dxpl, h->independent ?
					H5FD_MPIO_INDEPENDENT :
					H5FD_MPIO_COLLECTIVE), st,
		       XJ_EXIT_INTERNAL, "%s: transfer mode", h->partial);
	if (h5out_agree(h, st))
		goto out;
	mtype = h->type[slot] == H5OUT_I64 ? H5T_NATIVE_INT64 :
					     H5T_NATIVE_FLOAT;
	if (rows == 0 || cols == 0 || !buf)
		buf = &dummy;
	if (H5_TRY(H5Dwrite(h->dset[slot], mtype, mspace, fspace, dxpl, buf),
		   st, XJ_EXIT_RESOURCE, "%s:%s: writing rows [%lld, %lld) "
		   "cols [%lld, %lld)", h->partial, h->name[slot],
		   (long long)row0, (long long)(row0 + rows),
		   (long long)col0, (long long)(col0 + cols)))
		h5out_room_hint(h, rows * cols * 8, st);
	h5out_agree(h, st);
out:
	if (dxpl >= 0)
		H5Pclose(dxpl);
	if (mspace >= 0)
		H5Sclose(mspace);
	if (fspace >= 0)
		H5Sclose(fspace);
	return st->code;
}

void h5out_set_independent(h5out *h, int on)
{
	h->independent = on != 0;
}

int h5out_read_i64(h5out *h, int slot, int64_t i, int64_t *v,
		   xj_status *st)
{
	hsize_t start[1] = { (hsize_t)i }, one[1] = { 1 };
	hid_t fs = H5I_INVALID_HID, ms = H5I_INVALID_HID;

	xj_ok(st);
	if (slot < 0 || slot >= h->ndset || !h->rank1[slot] ||
	    h->type[slot] != H5OUT_I64 || i < 0 || i >= h->rows[slot])
		xj_fail(st, XJ_EXIT_INTERNAL, "%s: no element %lld in slot %d",
			h->partial, (long long)i, slot);
	else if (!H5_TRY(fs = H5Dget_space(h->dset[slot]), st,
			 XJ_EXIT_INTERNAL, "%s: dataspace", h->partial) &&
		 !H5_TRY(ms = H5Screate_simple(1, one, NULL), st,
			 XJ_EXIT_INTERNAL, "%s: memory space", h->partial) &&
		 !H5_TRY(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL,
					     one, NULL), st, XJ_EXIT_INTERNAL,
			 "%s: selection", h->partial))
		H5_TRY(H5Dread(h->dset[slot], H5T_NATIVE_INT64, ms, fs,
			       H5P_DEFAULT, v), st, XJ_EXIT_INPUT,
		       "%s:%s: reading element %lld", h->partial,
		       h->name[slot], (long long)i);
	if (ms >= 0)
		H5Sclose(ms);
	if (fs >= 0)
		H5Sclose(fs);
	return h5out_agree(h, st);
}

int h5out_flush(h5out *h, xj_status *st)
{
	xj_ok(st);
	if (h->dfd >= 0 && fdatasync(h->dfd) != 0)
		xj_fail(st, XJ_EXIT_RESOURCE, "%s: flushing: %s", h->partial,
			strerror(errno));
	else if (H5_TRY(H5Fflush(h->file, H5F_SCOPE_GLOBAL), st,
			XJ_EXIT_RESOURCE, "%s: flushing", h->partial))
		h5out_room_hint(h, 0, st);
	return h5out_agree(h, st);
}

/* Create (replacing an old one) and write a scalar root attribute. */
static int h5out_attr(h5out *h, const char *name, hid_t ftype, hid_t mtype,
		      const void *value, xj_status *st)
{
	hid_t space = H5I_INVALID_HID, attr = H5I_INVALID_HID;
	htri_t exists;

	if (H5_TRY(exists = H5Aexists(h->file, name), st, XJ_EXIT_INTERNAL,
		   "%s: attribute %s", h->partial, name) ||
	    (exists > 0 &&
	     H5_TRY(H5Adelete(h->file, name), st, XJ_EXIT_RESOURCE,
		    "%s: replacing attribute %s", h->partial, name)) ||
	    H5_TRY(space = H5Screate(H5S_SCALAR), st, XJ_EXIT_INTERNAL,
		   "%s: attribute %s", h->partial, name) ||
	    H5_TRY(attr = H5Acreate2(h->file, name, ftype, space, H5P_DEFAULT,
				     H5P_DEFAULT), st, XJ_EXIT_RESOURCE,
		   "%s: cannot create attribute %s", h->partial, name))
		goto out;
	H5_TRY(H5Awrite(attr, mtype, value), st, XJ_EXIT_RESOURCE,
	       "%s: cannot write attribute %s", h->partial, name);
out:
	if (attr >= 0)
		H5Aclose(attr);
	if (space >= 0)
		H5Sclose(space);
	return st->code;
}

int h5out_attr_str(h5out *h, const char *name, const char *value,
		   xj_status *st)
{
	size_t bytes = strlen(value) + 1;
	hid_t type = H5I_INVALID_HID;

	xj_ok(st);
	if (bytes > H5OUT_ATTR_MAX_BYTES)
		xj_fail(st, XJ_EXIT_INTERNAL, "%s: attribute %s: %zu bytes, "
			"limit %d", h->partial, name, bytes,
			H5OUT_ATTR_MAX_BYTES);
	else if (!H5_TRY(type = H5Tcopy(H5T_C_S1), st, XJ_EXIT_INTERNAL,
			 "%s: string type", h->partial) &&
		 !H5_TRY(H5Tset_size(type, bytes), st, XJ_EXIT_INTERNAL,
			 "%s: string type", h->partial) &&
		 !H5_TRY(H5Tset_strpad(type, H5T_STR_NULLTERM), st,
			 XJ_EXIT_INTERNAL, "%s: string type", h->partial) &&
		 !H5_TRY(H5Tset_cset(type, H5T_CSET_UTF8), st,
			 XJ_EXIT_INTERNAL, "%s: string type", h->partial))
		h5out_attr(h, name, type, type, value, st);
	if (type >= 0)
		H5Tclose(type);
	return h5out_agree(h, st);
}

int h5out_attr_i64(h5out *h, const char *name, int64_t value, xj_status *st)
{
	xj_ok(st);
	h5out_attr(h, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value, st);
	return h5out_agree(h, st);
}

int h5out_attr_f64(h5out *h, const char *name, double value, xj_status *st)
{
	xj_ok(st);
	h5out_attr(h, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value, st);
	return h5out_agree(h, st);
}

/* Close datasets, then flush (MPI_File_sync: the data is on disk before
 * the rename makes it a result) and close the file. */
static int h5out_close_all(h5out *h, int flush, xj_status *st)
{
	int i;

	if (h->dfd >= 0) {
		if (flush && !st->code && fdatasync(h->dfd) != 0)
			xj_fail(st, XJ_EXIT_RESOURCE, "%s: flushing: %s",
				h->partial, strerror(errno));
		close(h->dfd);
		h->dfd = -1;
	}
	free(h->stage);
	h->stage = NULL;
	for (i = 0; i < h->ndset; i++) {
		if (h->dset[i] < 0)
			continue;
		H5_TRY(H5Dclose(h->dset[i]), st, XJ_EXIT_RESOURCE,
		       "%s:%s: closing", h->partial, h->name[i]);
		h->dset[i] = H5I_INVALID_HID;
	}
	if (h->file < 0)
		return st->code;
	if (flush && !st->code)
		H5_TRY(H5Fflush(h->file, H5F_SCOPE_GLOBAL), st,
		       XJ_EXIT_RESOURCE, "%s: flushing", h->partial);
	if (H5Fclose(h->file) < 0) {
		h5out_close_failed = 1;
		if (!st->code)
			h5check_fail(st, XJ_EXIT_RESOURCE, __FILE__, __LINE__,
				     "%s: closing", h->partial);
	}
	h->file = H5I_INVALID_HID;
	return st->code;
}

/* Rank 0: the partial file becomes the result. Without --force an output
 * that appeared meanwhile is kept, and so is the finished partial file. */
static int h5out_rename(const h5out *h, xj_status *st)
{
	struct stat sb;

	if (!h->force && lstat(h->path, &sb) == 0)
		return xj_fail(st, XJ_EXIT_USAGE, "output %s appeared while "
			       "writing; the result is in %s", h->path,
			       h->partial);
	if (rename(h->partial, h->path) != 0)
		return xj_fail(st, XJ_EXIT_RESOURCE, "cannot rename %s to %s: "
			       "%s (the result is in %s)", h->partial, h->path,
			       strerror(errno), h->partial);
	return XJ_OK;
}

int h5out_finish(h5out *h, xj_status *st)
{
	xj_ok(st);
	/* flushed first, agreed: a failure leaves the file unclosed */
	if (h->file >= 0 &&
	    H5_TRY(H5Fflush(h->file, H5F_SCOPE_GLOBAL), st, XJ_EXIT_RESOURCE,
		   "%s: flushing", h->partial))
		h5out_room_hint(h, 0, st);
	if (!h5out_agree(h, st) || !h5out_leave_open(h))
		h5out_close_all(h, 1, st);
	if (h5out_agree(h, st)) {
		/* the file may be incomplete: it must not linger */
		if (h->rank == 0)
			unlink(h->partial);
	} else {
		if (h->rank == 0)
			h5out_rename(h, st);
		MPI_TRY(MPI_Bcast(st, sizeof(*st), MPI_BYTE, 0, h->comm), st,
			XJ_EXIT_INTERNAL, "%s: sharing rename", h->partial);
	}
	MPI_TRY(MPI_Barrier(h->comm), st, XJ_EXIT_INTERNAL, "%s: barrier",
		h->partial);
	MPI_Comm_free(&h->comm);
	free(h);
	return st->code;
}

int h5out_suspend(h5out *h, xj_status *st)
{
	xj_ok(st);
	if (!h)
		return XJ_OK;
	if (!h5out_leave_open(h)) {
		h5out_close_all(h, 1, st);
		h5out_agree(h, st);
	}
	MPI_Comm_free(&h->comm);
	free(h);
	return st->code;
}

void h5out_abort(h5out *h)
{
	xj_status ignored;
	int was_open;

	if (!h)
		return;
	xj_ok(&ignored);
	was_open = h->file >= 0;
	/* Closing flushes HDF5's metadata; on a full disk that write fails
	 * on some ranks only, which then leave the others waiting in a
	 * collective call inside H5Fclose. Emptied first, the file about to
	 * be removed has room for it again. */
	if (was_open) {
		if (h->rank == 0 && truncate(h->partial, 0) != 0)
			(void)0;   /* the close may still pass */
		MPI_Barrier(h->comm);
	}
	h5out_close_all(h, 0, &ignored);
	if (h->rank == 0)
		unlink(h->partial);
	/* nobody returns before the partial file is gone; abort has no
	 * status to report a failed barrier in, and nothing left to undo */
	if (was_open)
		MPI_Barrier(h->comm);
	MPI_Comm_free(&h->comm);
	free(h);
}
