/* listfile.c: the k-lists of a round in progress on disk (listfile.h). */
#define _POSIX_C_SOURCE 200809L

#include "listfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../config/job.h"
#include "folder.h"

#define LISTFILE_MAGIC "XJLISTS"
#define LISTFILE_VERSION 1
#define LISTFILE_ORDER INT64_C(0x0102030405060708)

typedef struct lf_header {
	char magic[8];
	int64_t version;
	int64_t order;          /* reads back otherwise on another byte order */
	int64_t k;
	int64_t rows;
	int64_t generation;
	int64_t reserved[2];
} lf_header;

_Static_assert(sizeof(lf_header) == LISTFILE_HEADER_BYTES,
	       "the header is 64 bytes on disk");

struct listfile {
	MPI_File fh;
	int64_t k, rows;
	char path[XJ_PATH_MAX + 32];
};

/* Every rank of comm ends with the status of the lowest failing rank. */
static int lf_agree(MPI_Comm comm, xj_status *st)
{
	int rank, nranks, in, first;

	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &nranks);
	in = st->code ? rank : nranks;
	if (MPI_Allreduce(&in, &first, 1, MPI_INT, MPI_MIN, comm) !=
	    MPI_SUCCESS)
		return xj_fail(st, XJ_EXIT_INTERNAL, "lists: agreeing on "
			       "status");
	if (first == nranks)
		return XJ_OK;
	if (MPI_Bcast(st, sizeof(*st), MPI_BYTE, first, comm) != MPI_SUCCESS)
		return xj_fail(st, XJ_EXIT_INTERNAL, "lists: sharing status");
	return st->code;
}

/* An MPI-IO failure as a status: MPI's own words for it. */
static int lf_fail(xj_status *st, int code, int rc, const char *what,
		   const char *path)
{
	char text[MPI_MAX_ERROR_STRING] = "?";
	int len;

	if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
		strcpy(text, "?");
	return xj_fail(st, code, "lists %s: %s: %s", path, what, text);
}

static int64_t lf_bytes(int64_t k, int64_t rows)
{
	return LISTFILE_HEADER_BYTES + rows * k * (int64_t)(sizeof(float) +
							    sizeof(int64_t));
}

static MPI_Offset lf_keys_at(int64_t k, int64_t at)
{
	return LISTFILE_HEADER_BYTES + at * k * (int64_t)sizeof(float);
}

static MPI_Offset lf_idx_at(int64_t k, int64_t rows, int64_t at)
{
	return LISTFILE_HEADER_BYTES + rows * k * (int64_t)sizeof(float) +
	       at * k * (int64_t)sizeof(int64_t);
}

/* fsync the folder holding path, so that a new file's name is durable
 * before a record names it. */
static int lf_sync_folder(const char *path, xj_status *st)
{
	if (folder_sync(path) != 0)
		return xj_fail(st, XJ_EXIT_RESOURCE, "lists %s: syncing its "
			       "folder: %s", path, strerror(errno));
	return XJ_OK;
}

static void lf_header_make(lf_header *h, int64_t k, int64_t rows,
			   int64_t generation)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, LISTFILE_MAGIC, sizeof(LISTFILE_MAGIC));
	h->version = LISTFILE_VERSION;
	h->order = LISTFILE_ORDER;
	h->k = k;
	h->rows = rows;
	h->generation = generation;
}

/* This rank's slab, keys then indices, one independent write each (the
 * ranks' slabs are contiguous and disjoint). Not collective: Open MPI's
 * two-phase collective write returns on the rank whose pwrite failed
 * (a full disk) while the others wait for it in its next cycle, and the
 * job hung; the callers agree on the status after the sync. */
static int lf_write_slab(MPI_File fh, const char *path, int64_t k,
			 int64_t rows, int64_t at, int64_t n,
			 const float *key, const int64_t *idx, xj_status *st)
{
	int count = (int)(n * k), rc;

	if (st->code || count == 0)
		return st->code;
	rc = MPI_File_write_at(fh, lf_keys_at(k, at), key, count, MPI_FLOAT,
			       MPI_STATUS_IGNORE);
	if (rc != MPI_SUCCESS)
		return lf_fail(st, XJ_EXIT_RESOURCE, rc, "writing the keys",
			       path);
	rc = MPI_File_write_at(fh, lf_idx_at(k, rows, at), idx, count,
			       MPI_INT64_T, MPI_STATUS_IGNORE);
	if (rc != MPI_SUCCESS)
		lf_fail(st, XJ_EXIT_RESOURCE, rc, "writing the indices", path);
	return st->code;
}

static int lf_check_args(const char *path, int64_t k, int64_t rows,
			 int64_t at, int64_t n, xj_status *st)
{
	if (k < 1 || rows < 0 || at < 0 || n < 0 || at > rows - n)
		return xj_fail(st, XJ_EXIT_INTERNAL, "lists %s: rows [%lld, "
			       "%lld) of %lld, k = %lld", path, (long long)at,
			       (long long)(at + n), (long long)rows,
			       (long long)k);
	/* MPI counts are int; a chunk's lists are far below (plan.c) */
	if (n > INT_MAX / k)
		return xj_fail(st, XJ_EXIT_INTERNAL, "lists %s: %lld lists of "
			       "%lld in one write", path, (long long)n,
			       (long long)k);
	return XJ_OK;
}

int listfile_write(MPI_Comm comm, const char *path, int64_t k, int64_t rows,
		   int64_t generation, int64_t at, int64_t n,
		   const float *key, const int64_t *idx, xj_status *st)
{
	MPI_File fh;
	lf_header h;
	int rank, rc;

	xj_ok(st);
	MPI_Comm_rank(comm, &rank);
	lf_check_args(path, k, rows, at, n, st);
	if (lf_agree(comm, st))
		return st->code;
	rc = MPI_File_open(comm, path, MPI_MODE_CREATE | MPI_MODE_WRONLY,
			   MPI_INFO_NULL, &fh);
	if (rc != MPI_SUCCESS)
		lf_fail(st, XJ_EXIT_RESOURCE, rc, "cannot create", path);
	/* a handle open on some ranks only is left to the exit: closing it
	 * would wait for the others */
	if (lf_agree(comm, st))
		return st->code;
	/* an older, longer file of the same name loses its tail */
	rc = MPI_File_set_size(fh, lf_bytes(k, rows));
	if (rc != MPI_SUCCESS)
		lf_fail(st, XJ_EXIT_RESOURCE, rc, "setting its size", path);
	lf_header_make(&h, k, rows, generation);
	if (!st->code && rank == 0) {
		rc = MPI_File_write_at(fh, 0, &h, sizeof(h), MPI_BYTE,
				       MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS)
			lf_fail(st, XJ_EXIT_RESOURCE, rc, "writing the header",
				path);
	}
	lf_write_slab(fh, path, k, rows, at, n, key, idx, st);
	rc = MPI_File_sync(fh);
	if (rc != MPI_SUCCESS && !st->code)
		lf_fail(st, XJ_EXIT_RESOURCE, rc, "syncing", path);
	rc = MPI_File_close(&fh);
	if (rc != MPI_SUCCESS && !st->code)
		lf_fail(st, XJ_EXIT_RESOURCE, rc, "closing", path);
	if (!st->code && rank == 0)
		lf_sync_folder(path, st);
	return lf_agree(comm, st);
}

/* The header and size of an opened file against what the record says. */
static int lf_check_header(listfile *lf, int64_t generation, xj_status *st)
{
	lf_header h, want;
	MPI_Offset size = 0;
	MPI_Status ms;
	int got = 0, rc;

	lf_header_make(&want, lf->k, lf->rows, generation);
	rc = MPI_File_read_at(lf->fh, 0, &h, sizeof(h), MPI_BYTE, &ms);
	if (rc == MPI_SUCCESS)
		MPI_Get_count(&ms, MPI_BYTE, &got);
	if (rc != MPI_SUCCESS || got != (int)sizeof(h) ||
	    memcmp(h.magic, want.magic, sizeof(h.magic)) ||
	    h.order != want.order || h.version != want.version)
		return xj_fail(st, XJ_EXIT_INPUT, "lists %s: not a lists file "
			       "of this xjoin", lf->path);
	if (h.k != want.k || h.rows != want.rows ||
	    h.generation != want.generation)
		return xj_fail(st, XJ_EXIT_INPUT, "lists %s: holds %lld lists "
			       "of %lld, generation %lld; the record names "
			       "%lld of %lld, generation %lld", lf->path,
			       (long long)h.rows, (long long)h.k,
			       (long long)h.generation, (long long)want.rows,
			       (long long)want.k, (long long)want.generation);
	rc = MPI_File_get_size(lf->fh, &size);
	if (rc != MPI_SUCCESS || size != lf_bytes(lf->k, lf->rows))
		return xj_fail(st, XJ_EXIT_INPUT, "lists %s: %lld bytes, "
			       "expected %lld", lf->path, (long long)size,
			       (long long)lf_bytes(lf->k, lf->rows));
	return XJ_OK;
}

int listfile_open(MPI_Comm comm, const char *path, int64_t k, int64_t rows,
		  int64_t generation, listfile **out, xj_status *st)
{
	listfile *lf = calloc(1, sizeof(*lf));
	int rc;

	xj_ok(st);
	*out = NULL;
	if (!lf)
		xj_fail(st, XJ_EXIT_RESOURCE, "lists %s: out of memory", path);
	else if (lf_check_args(path, k, rows, 0, 0, st) == XJ_OK) {
		lf->k = k;
		lf->rows = rows;
		snprintf(lf->path, sizeof(lf->path), "%s", path);
	}
	if (lf_agree(comm, st)) {
		free(lf);
		return st->code;
	}
	rc = MPI_File_open(comm, path, MPI_MODE_RDONLY, MPI_INFO_NULL,
			   &lf->fh);
	if (rc != MPI_SUCCESS) {
		lf_fail(st, XJ_EXIT_INPUT, rc, "cannot open", path);
		lf_agree(comm, st);
		free(lf);   /* as in listfile_write: no close */
		return st->code;
	}
	lf_check_header(lf, generation, st);
	if (lf_agree(comm, st)) {
		MPI_File_close(&lf->fh);
		free(lf);
		return st->code;
	}
	*out = lf;
	return XJ_OK;
}

static int lf_read_part(listfile *lf, MPI_Offset at, void *buf, int count,
			MPI_Datatype type, xj_status *st)
{
	MPI_Status ms;
	int got = 0, rc;

	rc = MPI_File_read_at(lf->fh, at, buf, count, type, &ms);
	if (rc != MPI_SUCCESS)
		return lf_fail(st, XJ_EXIT_INPUT, rc, "reading", lf->path);
	MPI_Get_count(&ms, type, &got);
	if (got != count)
		return xj_fail(st, XJ_EXIT_INPUT, "lists %s: short read (%d "
			       "of %d entries)", lf->path, got, count);
	return XJ_OK;
}

int listfile_read(listfile *lf, int64_t at, int64_t n, float *key,
		  int64_t *idx, xj_status *st)
{
	int count;

	if (lf_check_args(lf->path, lf->k, lf->rows, at, n, st) || n == 0)
		return st->code;
	count = (int)(n * lf->k);
	if (lf_read_part(lf, lf_keys_at(lf->k, at), key, count,
			 MPI_FLOAT, st) ||
	    lf_read_part(lf, lf_idx_at(lf->k, lf->rows, at), idx, count,
			 MPI_INT64_T, st))
		return st->code;
	return XJ_OK;
}

int listfile_close(listfile *lf, MPI_Comm comm, xj_status *st)
{
	if (lf) {
		MPI_File_close(&lf->fh);
		free(lf);
	}
	return lf_agree(comm, st);
}
