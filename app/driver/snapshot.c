/* snapshot.c: a top-k round's running lists, recorded (snapshot.h). */
#include "snapshot.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../io/listfile.h"

static void lists_path(const xj_progress *p, int slot, char *buf,
		       size_t size)
{
	resume_lists_path(p->path, slot, buf, size);
}

/* Forget the recorded snapshot (its rows start over), saying why. */
static void snapshot_drop(xj_run *run, const char *why)
{
	resume_inround *in = &run->prog.rec.inround;

	if (run->comm->rank == 0) {
		fprintf(stderr, "xjoin: warning: the recorded lists of %" PRId64
			" query rows of a round in progress are not used (%s): "
			"those rows start over\n", spans_rows(&in->rows), why);
		fflush(stderr);
	}
	resume_inround_clear(in);
}

/* Hash this rank's share of the file's lists, a slab at a time. */
static uint64_t share_hash(xj_run *run, listfile *lf, int64_t rows,
			   float *key, int64_t *idx, int64_t cap,
			   xj_status *st)
{
	int64_t k = run->job->k, at, n;
	uint64_t h = 0;

	split_block(rows, run->comm->nranks, run->comm->rank, &at, &n);
	for (int64_t r = at; r < at + n && !st->code; r += cap) {
		int64_t m = at + n - r < cap ? at + n - r : cap;

		if (!listfile_read(lf, r, m, key, idx, st))
			h += resume_hash_lists(key, idx, m, k, r);
	}
	return h;
}

void snapshot_check(xj_run *run, float *key, int64_t *idx, int64_t cap)
{
	resume_inround *in = &run->prog.rec.inround;
	int64_t rows = spans_rows(&in->rows);
	char path[XJ_PATH_MAX + 32];
	uint64_t mine, all = 0;
	listfile *lf;
	xj_status st;

	if (!in->valid)
		return;
	lists_path(&run->prog, in->slot, path, sizeof(path));
	if (listfile_open(run->comm->world, path, run->job->k, rows,
			  in->generation, &lf, &st)) {
		snapshot_drop(run, st.msg);
		return;
	}
	mine = share_hash(run, lf, rows, key, idx, cap > 0 ? cap : 1, &st);
	if (listfile_close(lf, run->comm->world, &st)) {
		snapshot_drop(run, st.msg);
		return;
	}
	MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_UINT64_T, MPI_SUM,
				run->comm->world));
	if (all != in->hash) {
		char why[XJ_PATH_MAX + 96];

		snprintf(why, sizeof(why), "%s: hash 0x%016" PRIx64 ", the "
			 "record says 0x%016" PRIx64, path, all, in->hash);
		snapshot_drop(run, why);
	}
}

int snapshot_read(xj_run *run, int64_t q0, int64_t n, float *key,
		  int64_t *idx, xj_status *st)
{
	const resume_inround *in = &run->prog.rec.inround;
	char path[XJ_PATH_MAX + 32];
	listfile *lf;

	lists_path(&run->prog, in->slot, path, sizeof(path));
	if (listfile_open(run->comm->world, path, run->job->k,
			  spans_rows(&in->rows), in->generation, &lf, st))
		return st->code;
	if (n)
		listfile_read(lf, spans_rows_before(&in->rows, q0), n, key,
			      idx, st);
	return listfile_close(lf, run->comm->world, st);
}

int snapshot_save(xj_run *run, xj_spans *rows, xj_spans *base, int64_t q0,
		  int64_t n, const float *key, const int64_t *idx,
		  xj_status *st)
{
	xj_progress *p = &run->prog;
	resume_inround *in = &p->rec.inround;
	int64_t k = run->job->k, at = spans_rows_before(rows, q0);
	int slot = p->lists_slot == 0 ? 1 : 0;
	char path[XJ_PATH_MAX + 32];
	uint64_t mine, all;

	lists_path(p, slot, path, sizeof(path));
	p->lists_written = 1;
	if (listfile_write(run->comm->world, path, k, spans_rows(rows),
			   p->lists_generation + 1, at, n, key, idx, st))
		return st->code;
	mine = resume_hash_lists(key, idx, n, k, at);
	MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_UINT64_T, MPI_SUM,
				run->comm->world));
	/* every rank holds the same record */
	resume_inround_clear(in);
	in->valid = 1;
	in->slot = slot;
	in->generation = ++p->lists_generation;
	in->hash = all;
	in->rows = *rows;
	in->base = *base;
	memset(rows, 0, sizeof(*rows));
	memset(base, 0, sizeof(*base));
	if (driver_checkpoint(run, 1, st))
		return st->code;
	p->lists_slot = slot;
	return XJ_OK;
}

void snapshot_remove(const xj_progress *p)
{
	char path[XJ_PATH_MAX + 32];

	for (int slot = 0; slot < 2; slot++) {
		lists_path(p, slot, path, sizeof(path));
		unlink(path);
	}
}
