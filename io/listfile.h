/*
 * listfile.h: the k-lists of a top-k round in progress, in a file beside
 * the partial output (the progress record, app/run/resume.h, names the file
 * and says which query and base rows the lists stand for).
 *
 * defines: listfile, listfile_write, listfile_open, listfile_read,
 *          listfile_close
 *
 * Layout, in the machine's byte order (the header says which):
 *   header  64 bytes: magic "XJLISTS", format version, a byte-order
 *           mark, k, rows, generation
 *   keys    rows x k float32   (topk.h's ranking keys, bit for bit)
 *   idx     rows x k int64     (global base rows; -1 pads)
 * Row i of the file is a list for the i-th query row the record names.
 *
 * Plain MPI-IO rather than HDF5: the file is rewritten whole at every
 * snapshot, nobody else reads it, and a half-written one is recognised by
 * the record (which names the generation and a hash of the lists), not
 * by the file's own structure. HDF5 would add metadata that a kill
 * could leave half-flushed, to no gain.
 *
 * listfile_write, listfile_open and listfile_close are COLLECTIVE over the
 * communicator and return the same code and message on every rank (the
 * lowest failing rank's); listfile_read is each rank's own.
 */
#ifndef XJ_LISTFILE_H
#define XJ_LISTFILE_H

#include <mpi.h>
#include <stdint.h>

#include "../config/status.h"

#define LISTFILE_HEADER_BYTES 64

typedef struct listfile listfile;

/* Create or replace path with a file of rows lists of k entries; this
 * rank's n lists go to rows [at, at + n) (n may be 0). Returns once the
 * data are on disk (MPI_File_sync) and rank 0 has synced the folder, so a
 * record saved after it may name the file. XJ_EXIT_RESOURCE naming the
 * path when a write fails (a full disk). */
int listfile_write(MPI_Comm comm, const char *path, int64_t k, int64_t rows,
		   int64_t generation, int64_t at, int64_t n,
		   const float *key, const int64_t *idx, xj_status *st);

/* Open path for reading and check that it is the file described: its
 * header (magic, version, byte order, k, rows, generation) and its size.
 * XJ_EXIT_INPUT naming what differs. */
int listfile_open(MPI_Comm comm, const char *path, int64_t k, int64_t rows,
		  int64_t generation, listfile **out, xj_status *st);

/* Read lists [at, at + n) into key and idx (n x k each). Not collective. */
int listfile_read(listfile *lf, int64_t at, int64_t n, float *key,
		  int64_t *idx, xj_status *st);

/* Close and free lf (safe on NULL: agrees only). Every rank passes its
 * own status (a failed read) and all return the agreed one. */
int listfile_close(listfile *lf, MPI_Comm comm, xj_status *st);

#endif
