/* driver.c: validation, progress and the full matrix (see driver.h); the
 * top-k rounds are in driver_topk.c. */
#include "driver.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/metric.h"
#include "driver_int.h"
#include "guard.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

void *driver_alloc(size_t count, size_t size, const char *what,
		   xj_status *st)
{
	void *p = malloc((count ? count : 1) * size);

	if (!p)
		xj_fail(st, XJ_EXIT_RESOURCE, "cannot allocate %zu bytes for %s",
			count * size, what);
	return p;
}

static int read_rows(h5in *in, const h5in_info *info, xj_metric m,
		     int64_t row0, int64_t rows, float *buf, xj_status *st)
{
	if (h5in_read(in, row0, rows, buf, st))
		return st->code;
	if (metric_check_rows(m, buf, rows, info->cols, row0, st))
		return xj_wrap(st, "%s:%s", info->file, info->dset);
	return XJ_OK;
}

/* Read and check rows [row0, row0+rows) slab by slab: into keep (rows x
 * cols, the resident copy) when given, else through the slab buffer buf.
 * The rows inside [h0, h1), this rank's share, are hashed into *fp
 * (resume.h). On failure *first_bad is the start of the failing slab: the
 * smallest over the ranks holds the first bad row. */
static int validate_range(const h5in_info *info, xj_metric m, int64_t row0,
			  int64_t rows, int64_t slab, float *buf, float *keep,
			  int64_t h0, int64_t h1, int64_t *first_bad,
			  uint64_t *fp, xj_status *st)
{
	int64_t d = info->cols;
	h5in *in = NULL;

	*first_bad = INT64_MAX;
	if (rows == 0)
		return XJ_OK;
	if (h5in_open(info, &in, st))
		return st->code;
	for (int64_t r = row0; r < row0 + rows; r += slab) {
		int64_t n = min64(slab, row0 + rows - r);
		int64_t lo = r > h0 ? r : h0, hi = min64(r + n, h1);
		float *x = keep ? keep + (r - row0) * d : buf;

		if (read_rows(in, info, m, r, n, x, st)) {
			*first_bad = r;
			break;
		}
		if (lo < hi)
			*fp += resume_hash_rows(x + (lo - r) * d, hi - lo, d, lo);
	}
	h5in_close(in);
	return st->code;
}

void driver_guard_input(const xj_run *run, const h5in_info *info)
{
	char what[XJ_PATH_MAX + XJ_NAME_MAX + 2], partial[XJ_PATH_MAX + 16];

	snprintf(what, sizeof(what), "%s:%s", info->file, info->dset);
	h5out_partial_path(run->job->output, partial, sizeof(partial));
	guard_begin(what, run->prog.resuming ? NULL : partial);
}

/* Agree on the error with the smallest key; its rank's message wins. */
static int agree_first(xj_comm *c, int64_t key, xj_status *st)
{
	int64_t best;
	int who, cand;

	MPI_CHECK(MPI_Allreduce(&key, &best, 1, MPI_INT64_T, MPI_MIN,
				c->world));
	if (best == INT64_MAX)
		return comm_agree(c, st);
	cand = key == best ? c->rank : c->nranks;
	MPI_CHECK(MPI_Allreduce(&cand, &who, 1, MPI_INT, MPI_MIN, c->world));
	MPI_CHECK(MPI_Bcast(st, sizeof(*st), MPI_BYTE, who, c->world));
	return st->code;
}

/* Sum the ranks' row hashes; a resumed run's inputs must match the
 * record (the same verdict on every rank: no agreement needed). */
static int fingerprints(xj_run *run, uint64_t mine[2], xj_status *st)
{
	xj_progress *p = &run->prog;
	uint64_t all[2];

	MPI_CHECK(MPI_Allreduce(mine, all, 2, MPI_UINT64_T, MPI_SUM,
				run->comm->world));
	p->rec.q.fingerprint = all[0];
	p->rec.b.fingerprint = all[1];
	p->fingerprinted = 1;
	if (p->resuming)
		return resume_check_data(&p->old, &p->rec, st);
	return XJ_OK;
}

/*
 * Keep this rank's query block and base shard in memory after validation
 * when they fit beside the plan's peak: then no input row is read twice
 * (validation, then once per query chunk). Every rank decides alike from
 * the plan, then all agree that every rank got the memory.
 */
static void resident_start(xj_run *run)
{
	const plan_rank_view *v = &run->view;
	int64_t d = run->job->d;
	int64_t bytes = (run->pl.qblock_max + run->pl.bshard_max) * d * 4;
	int ok, all;

	if (run->pl.peak_bytes + bytes > plan_usable_bytes(&run->pin))
		return;
	run->resq = malloc((size_t)(v->qrows * d + 1) * sizeof(float));
	run->resb = malloc((size_t)(v->brows * d + 1) * sizeof(float));
	ok = run->resq && run->resb;
	MPI_CHECK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND,
				run->comm->world));
	if (all) {
		xj_log0("# inputs resident: %.1f MiB per rank at most, every "
			"row read once\n", (double)bytes / (1 << 20));
		return;
	}
	free(run->resq);
	free(run->resb);
	run->resq = run->resb = NULL;
}

void driver_release(xj_run *run)
{
	free(run->resq);
	free(run->resb);
	run->resq = run->resb = NULL;
}

/* Resident: every rank reads and checks its whole block and shard (the
 * rows it computes on) and hashes only its share. Streaming: each row is
 * read and checked by exactly one rank, through a slab buffer. The shares:
 * my query block split over my row's Pc ranks, my base shard over my
 * column's Pr ranks (a split self-join, whose shards are all the whole
 * base: over all ranks). */
int driver_validate(xj_run *run, xj_status *st)
{
	const plan_rank_view *v = &run->view;
	int64_t d = run->job->d, slab = run->pl.bchunk_rows, q0, qn, b0, bn;
	int64_t bad;
	uint64_t fp[2] = { 0, 0 };
	xj_metric m = run->job->metric;
	float *buf = NULL;
	int res;
	double t0 = report_now();

	resident_start(run);
	res = run->resq != NULL;
	split_block(v->qrows, run->pl.pc, v->col, &q0, &qn);
	if (run->pl.split)
		split_block(v->brows, run->pl.pc, v->col, &b0, &bn);
	else
		split_block(v->brows, run->pl.pr, v->row, &b0, &bn);
	q0 += v->q0;
	b0 += v->b0;
	slab = slab > run->pl.qchunk_rows ? slab : run->pl.qchunk_rows;
	if (!res)
		buf = driver_alloc((size_t)(slab * d), sizeof(float),
				   "validation", st);
	bad = 0;
	driver_guard_input(run, &run->qinfo);
	if (res)
		validate_range(&run->qinfo, m, v->q0, v->qrows, slab, NULL,
			       run->resq, q0, q0 + qn, &bad, &fp[0], st);
	else if (buf)
		validate_range(&run->qinfo, m, q0, qn, slab, buf, NULL, q0,
			       q0 + qn, &bad, &fp[0], st);
	guard_end();
	if (!agree_first(run->comm, st->code ? bad : INT64_MAX, st)) {
		driver_guard_input(run, &run->binfo);
		if (res)
			validate_range(&run->binfo, m, v->b0, v->brows, slab,
				       NULL, run->resb, b0, b0 + bn, &bad,
				       &fp[1], st);
		else
			validate_range(&run->binfo, m, b0, bn, slab, buf, NULL,
				       b0, b0 + bn, &bad, &fp[1], st);
		guard_end();
		if (!agree_first(run->comm, st->code ? bad : INT64_MAX, st))
			fingerprints(run, fp, st);
	}
	free(buf);
	report_add(run->rep, PH_VALIDATE, &t0);
	return st->code;
}

const float *driver_input_rows(xj_run *run, h5in *in, int base,
			       int64_t row0, int64_t rows, float *buf,
			       xj_status *st)
{
	const plan_rank_view *v = &run->view;
	const float *res = base ? run->resb : run->resq;
	const h5in_info *info = base ? &run->binfo : &run->qinfo;
	int rc;

	if (res)
		return res + (row0 - (base ? v->b0 : v->q0)) * run->job->d;
	driver_guard_input(run, info);
	rc = read_rows(in, info, run->job->metric, row0, rows, buf, st);
	guard_end();
	return rc ? NULL : buf;
}

/* ---- progress --------------------------------------------------------- */

int driver_round_done(xj_run *run, int64_t r, xj_status *st)
{
	xj_progress *p = &run->prog;
	int64_t qc = run->pl.qchunk_rows;

	for (int i = 0; i < run->pl.pr; i++) {
		plan_rank_view w;

		plan_rank(&run->pin, &run->pl, i * run->pl.pc, &w);
		if (r < w.nqchunks &&
		    spans_add(&p->rec.done, w.q0 + r * qc,
			      min64(w.q0 + (r + 1) * qc, w.q0 + w.qrows), st))
			return st->code;
	}
	/* lists of final rows are of no use: the next record drops them
	 * (its lists file stays until a snapshot replaces it) */
	if (resume_inround_done(&p->rec.inround, &p->rec.done))
		resume_inround_clear(&p->rec.inround);
	return XJ_OK;
}

int driver_checkpoint(xj_run *run, int now, xj_status *st)
{
	xj_progress *p = &run->prog;
	xj_comm *c = run->comm;
	int due = now;
	double t0 = report_now();

	if (!p->fingerprinted)
		return XJ_OK;
	if (c->rank == 0 && !due)
		due = t0 - p->last_save_s >= (double)run->job->checkpoint_s;
	MPI_CHECK(MPI_Bcast(&due, 1, MPI_INT, 0, c->world));
	if (!due)
		return XJ_OK;
	/* the rows are on disk before the record says so */
	if (h5out_flush(run->out, st))
		return st->code;
	if (c->rank == 0 && !resume_save(p->path, &p->rec, st))
		p->saved = 1;
	MPI_CHECK(MPI_Bcast(st, sizeof(*st), MPI_BYTE, 0, c->world));
	MPI_CHECK(MPI_Bcast(&p->saved, 1, MPI_INT, 0, c->world));
	if (!st->code) {    /* every rank holds the same spans */
		p->saved_rows = spans_rows(&p->rec.done);
		p->saved_held = p->rec.inround.valid ?
				spans_rows(&p->rec.inround.rows) : 0;
		p->saved_folded = spans_rows(&p->rec.inround.base);
	}
	p->last_save_s = report_now();
	report_add(run->rep, PH_WRITE, &t0);
	return st->code;
}

int64_t driver_rows_to_do(const xj_run *run, int64_t q0, int64_t qrows)
{
	return spans_covers(&run->prog.rec.done, q0, q0 + qrows) ? 0 : qrows;
}

int64_t driver_chunks_todo(const xj_run *run)
{
	const plan_rank_view *v = &run->view;
	int64_t qc = run->pl.qchunk_rows, rounds = 0;

	if (run->job->command == XJ_CMD_RANGE)
		return driver_range_chunks(run);
	if (!v->brows)
		return 0;
	for (int64_t r = 0; r < v->nqchunks; r++) {
		int64_t q0 = v->q0 + r * qc;

		rounds += driver_rows_to_do(run, q0, min64(qc, v->q0 +
							    v->qrows - q0)) > 0;
	}
	return rounds * v->nbchunks;
}

int driver_open_inputs(xj_run *run, h5in **qin, h5in **bin,
		       xj_status *st)
{
	*qin = *bin = NULL;
	if (run->resq)
		return XJ_OK;   /* everything is in memory */
	driver_guard_input(run, &run->qinfo);
	if (run->view.qrows)
		h5in_open(&run->qinfo, qin, st);
	driver_guard_input(run, &run->binfo);
	if (!st->code && run->view.qrows && run->view.brows)
		h5in_open(&run->binfo, bin, st);
	guard_end();
	return st->code;
}

/* ---- full matrix ------------------------------------------------------ */

/* One block of the matrix: where it goes and the buffer that holds it. */
typedef struct mblock {
	int64_t q0, qrows, b0, brows;
	int64_t round;          /* its query round */
	int last;               /* the last block of that round */
	float *out;
} mblock;

/* Write a block (collective); the last of a round makes its rows final.
 * The time since *t0 (the ranks' agreement before it included) is the
 * write's; a checkpoint charges its own. */
static int matrix_put(xj_run *run, int slot, const mblock *k, double *t0,
		      xj_status *st)
{
	if (h5out_write(run->out, slot, k->q0, k->brows ? k->qrows : 0, k->b0,
			k->brows, k->out, st))
		return st->code;
	run->rep->write_bytes += k->qrows * k->brows * (int64_t)sizeof(float);
	if (k->last && driver_round_done(run, k->round, st))
		return st->code;
	report_add(run->rep, PH_WRITE, t0);
	if (k->last && driver_checkpoint(run, 0, st))
		return st->code;
	*t0 = report_now();
	return XJ_OK;
}

/* Wait for the queued block, if any: the time since *t0 is compute. */
static void matrix_wait_queued(xj_run *run, int *queued, double *t0,
			       xj_status *st)
{
	if (!*queued)
		return;
	*queued = 0;
	run->be->matrix_wait(run->be, st);
	run->rep->gemm_flops = run->be->gemm_flops;
	report_add(run->rep, PH_COMPUTE, t0);
	report_progress(run->rep, run->comm);
}

/*
 * A backend for which the overlap pays (matrix_async: a GPU) gets two
 * block buffers in turn: block i is queued, block i - 1 is written while
 * the backend computes block i, then block i is waited for. Otherwise
 * (the CPU) one buffer does, and each block is written once computed.
 * XJ_MATRIX_OVERLAP=1 takes the two-buffer order on any backend (the CPU
 * computes on its worker thread meanwhile), XJ_MATRIX_OVERLAP=0 the
 * one-buffer order: the tests cover both, benchmarks measure them.
 */
int driver_matrix(xj_run *run, xj_status *st)
{
	const plan_rank_view *v = &run->view;
	xj_backend *be = run->be;
	int64_t d = run->job->d, qc = run->pl.qchunk_rows;
	int64_t bc = run->pl.bchunk_rows, nblocks = 0;
	const char *overlap = getenv("XJ_MATRIX_OVERLAP");
	int nbuf = overlap && !strcmp(overlap, "0") ? 1 :
		   be->matrix_async || (overlap && !strcmp(overlap, "1")) ?
		   2 : 1;
	float *q = NULL, *b = NULL, *blk[2] = { NULL, NULL };
	h5in *qin = NULL, *bin = NULL;
	mblock done = { 0 };    /* computed, not yet written when pending */
	int slot, queued = 0, pending = 0;
	double t0 = report_now();

	/* inputs in memory need no read buffers */
	q = driver_alloc((size_t)(run->resq ? 0 : qc * d), sizeof(float),
			 "queries", st);
	b = driver_alloc((size_t)(run->resq ? 0 : bc * d), sizeof(float),
			 "base rows", st);
	for (int i = 0; i < nbuf && !st->code; i++)
		blk[i] = be->block_alloc(be, qc * bc, st);
	if (!st->code)
		driver_open_inputs(run, &qin, &bin, st);
	if (comm_agree(run->comm, st))
		goto out;
	report_add(run->rep, PH_READ, &t0);
	/* chunks of the blocks' shape (qc x bc, cut to 4 MiB by rows) where
	 * the padding allows (plan_matrix_chunk_cols): a block then covers
	 * whole chunks of its columns, where full-width chunks had each
	 * block write a slice of every chunk it touched */
	if (h5out_add_dataset_tiled(run->out, "distances", H5OUT_F32,
				    run->job->n, run->job->m, qc,
				    plan_matrix_chunk_cols(run->job->m, bc),
				    &slot, st))
		goto out;
	report_add(run->rep, PH_WRITE, &t0);
	for (int64_t qr = 0; qr < run->pl.qrounds; qr++) {
		int64_t q0 = v->q0 + qr * qc;
		int64_t qrows = qr < v->nqchunks ?
				min64(qc, v->q0 + v->qrows - q0) : 0;
		xj_rows qx = { NULL, 0, d, q0, 0 };

		qx.rows = qrows = driver_rows_to_do(run, q0, qrows);
		qx.tag = (uint64_t)qr + 1;   /* the same rows for every block */
		if (qrows && v->brows)
			qx.x = driver_input_rows(run, qin, 0, q0, qrows, q, st);
		report_add(run->rep, PH_READ, &t0);
		for (int64_t br = 0; br < run->pl.brounds; br++) {
			mblock cur = { q0, qrows, v->b0 + br * bc, 0, qr,
				       br == run->pl.brounds - 1,
				       blk[nblocks++ % nbuf] };
			xj_rows bx = { NULL, 0, d, cur.b0, 0 };

			if (qrows && br < v->nbchunks)
				cur.brows = min64(bc, v->b0 + v->brows - cur.b0);
			if (!st->code && cur.brows) {
				bx.rows = cur.brows;
				bx.x = driver_input_rows(run, bin, 1, cur.b0,
						  cur.brows, b, st);
				report_add(run->rep, PH_READ, &t0);
				if (bx.x && !be->matrix_start(be, &qx, &bx,
							      cur.out, st))
					queued = 1;
				report_add(run->rep, PH_COMPUTE, &t0);
			}
			if (nbuf == 1) {        /* computed: write it now */
				matrix_wait_queued(run, &queued, &t0, st);
				done = cur;
				pending = 1;
			}
			/* errors and signals are agreed on at each block */
			if (comm_agree(run->comm, st))
				goto out;
			if (pending && matrix_put(run, slot, &done, &t0, st))
				goto out;
			pending = 0;
			if (nbuf == 2) {        /* written above while it ran */
				matrix_wait_queued(run, &queued, &t0, st);
				done = cur;
				pending = 1;
			}
		}
	}
	if (!comm_agree(run->comm, st) && pending)
		matrix_put(run, slot, &done, &t0, st);
out:
	if (queued) {   /* its buffer is about to be freed */
		xj_status ignored;

		xj_ok(&ignored);
		(void)be->matrix_wait(be, &ignored);
	}
	if (qin)
		h5in_close(qin);
	if (bin)
		h5in_close(bin);
	free(q);
	free(b);
	for (int i = 0; i < nbuf; i++)
		if (blk[i])
			be->block_free(be, blk[i]);
	return st->code;
}
