/*
 * h5out.h: writing results with parallel HDF5, all-or-nothing.
 *
 * defines: h5out, h5out_type, h5out_create, h5out_reopen, h5out_add_dataset,
 *          h5out_add_dataset_tiled,
 *          h5out_write, h5out_flush, h5out_attr_str, h5out_attr_i64,
 *          h5out_attr_f64, h5out_add_vector, h5out_grow, h5out_read_i64,
 *          h5out_finish,
 *          h5out_suspend, h5out_abort,
 *          h5out_partial_path, h5out_unlink_locks
 *
 * The file is created as "<path>.partial" through MPI-IO and renamed to
 * <path> only by h5out_finish, after every rank wrote and the file closed:
 * a file at the output path is always a finished result. h5out_abort
 * removes the partial file; h5out_suspend keeps it for h5out_reopen (an
 * interrupted run that is resumed later: app/run/resume.h).
 *
 * Every function here is COLLECTIVE over the communicator given to
 * h5out_create and must be called by all its ranks with the same
 * arguments, except the slab of h5out_write, which is each rank's own
 * (and may be empty).
 */
#ifndef XJ_H5OUT_H
#define XJ_H5OUT_H

#include <mpi.h>
#include <stdint.h>

#include "../config/status.h"

typedef enum h5out_type { H5OUT_F32, H5OUT_I64 } h5out_type;

typedef struct h5out h5out;

/* "<path>.partial" into buf (size XJ_PATH_MAX + 16). */
void h5out_partial_path(const char *path, char *buf, size_t size);

/* 1 once closing an output failed (a flush that found the disk full):
 * HDF5's clean-up at MPI_Finalize would crash on the half-closed file,
 * so the program ends without it (app/main.c). */
int h5out_unclean(void);

/* Not collective. Remove the lock files Open MPI's OMPIO leaves beside
 * "<path>.partial" ("<path>.partial-JOBID-PID.lock", made when the ranks
 * of a file span several nodes) after a process that held the file
 * open died: with OMPI_MCA_io set to use OMPIO (xjoin's default is
 * ROMIO, which makes none: comm_io_defaults), or a file left by an older
 * xjoin. Only for a file no live process has open. Returns how many
 * it removed. h5out_create and h5out_reopen call it on rank 0. */
int h5out_unlink_locks(const char *path);

/* Create "<path>.partial" (truncating a stale one). Fails with
 * XJ_EXIT_USAGE if <path> exists and !force, XJ_EXIT_RESOURCE if the
 * folder is missing or not writable. */
int h5out_create(MPI_Comm comm, const char *path, int force, h5out **out,
		 xj_status *st);

/* Open an existing "<path>.partial" for writing (to resume). Fails with
 * XJ_EXIT_USAGE if <path> exists, XJ_EXIT_INPUT if the partial file is
 * missing or unreadable. Datasets are then opened, not created, by
 * h5out_add_dataset, which checks their type and shape. */
int h5out_reopen(MPI_Comm comm, const char *path, h5out **out,
		 xj_status *st);

/* Add a 2-D dataset rows x cols. chunk_rows > 0 makes it chunked with
 * chunks of chunk_rows x cols (capped to keep a chunk <= 4 MiB), 0 makes
 * it contiguous. Returns a slot >= 0 in *slot for h5out_write. */
int h5out_add_dataset(h5out *h, const char *name, h5out_type type,
		      int64_t rows, int64_t cols, int64_t chunk_rows,
		      int *slot, xj_status *st);

/* h5out_add_dataset with chunks of chunk_rows x chunk_cols (chunk_cols 0:
 * cols), capped to 4 MiB by rows first: for a matrix written in blocks of
 * chunk_rows x chunk_cols, so that a block covers whole chunks of its
 * columns instead of a slice of each of many full-width chunks. */
int h5out_add_dataset_tiled(h5out *h, const char *name, h5out_type type,
			    int64_t rows, int64_t cols, int64_t chunk_rows,
			    int64_t chunk_cols, int *slot, xj_status *st);

/* Add a 1-D dataset of len elements (a CSR array). growable: chunked with
 * no upper bound, for h5out_grow. It takes h5out_write's slabs as
 * rows x 1 (col0 = 0, cols = 1). In a reopened file the dataset is
 * opened: len elements, or any length when growable. */
int h5out_add_vector(h5out *h, const char *name, h5out_type type,
		     int64_t len, int growable, int *slot, xj_status *st);

/* Set a growable 1-D dataset's length to len: only longer unless shrink. */
int h5out_grow(h5out *h, int slot, int64_t len, int shrink, xj_status *st);

/* Element i of a 1-D int64 dataset, read by every rank. */
int h5out_read_i64(h5out *h, int slot, int64_t i, int64_t *v,
		   xj_status *st);

/* Write this rank's slab [row0, row0+rows) x [col0, col0+cols) from buf
 * (rows x cols, row-major) collectively. rows or cols may be 0. */
int h5out_write(h5out *h, int slot, int64_t row0, int64_t rows,
		int64_t col0, int64_t cols, const void *buf, xj_status *st);

/* h5out_write's raw-data transfers from now on: collective (the default:
 * MPI-IO may gather the ranks' pieces into large writes) or, with on,
 * independent (each rank's pieces written by its own calls, no
 * aggregation copy: for writers that own whole chunks). The ranks still
 * call h5out_write together: it agrees on errors around the write. */
void h5out_set_independent(h5out *h, int on);

/* From now on, h5out_write writes the chunks a slab covers whole with
 * pwrite on a descriptor of its own opened with O_DIRECT, at the chunk's
 * address in the file (allocated at creation, aligned to 4 KiB), the
 * rest of the slab in one collective HDF5 transfer: for those chunks the
 * page cache's copy and MPI-IO's aggregation are skipped
 * (docs/performance.md: on the project's VM the page cache cost dd 2 CPU
 * seconds a GB). Datasets whose chunks are not a multiple of 4 KiB keep
 * the collective transfers. Returns 1 when every rank could open the
 * file so (collective), 0 when any could not (tmpfs before Linux 6.6):
 * the writes stay as they were. */
int h5out_set_direct(h5out *h, xj_status *st);
/* The bytes of slabs this rank wrote so, so far. */
int64_t h5out_direct_bytes(const h5out *h);

/* Flush everything written so far to disk (MPI_File_sync underneath). */
int h5out_flush(h5out *h, xj_status *st);

/* Root attributes (same value on every rank). */
int h5out_attr_str(h5out *h, const char *name, const char *value,
		   xj_status *st);
int h5out_attr_i64(h5out *h, const char *name, int64_t value, xj_status *st);
int h5out_attr_f64(h5out *h, const char *name, double value, xj_status *st);

/* Close and rename to the final path (rank 0 renames, all wait). Frees h. */
int h5out_finish(h5out *h, xj_status *st);

/* Close if open, remove the partial file, free h. Safe on NULL. Collective
 * when the file is open. */
void h5out_abort(h5out *h);

/* Flush and close, keeping the partial file; free h. Safe on NULL.
 * Collective when the file is open. */
int h5out_suspend(h5out *h, xj_status *st);

#endif
