/* driver.c: validation and progress (see driver.h); the top-k rounds are
 * in driver_topk.c, the full matrix in driver_matrix.c, the range join in
 * driver_range.c. */
#include "driver.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/metric.h"
#include "driver_int.h"
#include "../run/guard.h"

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
 * (resume.h; fp NULL: not hashed). On failure *first_bad is the start of
 * the failing slab: the smallest over the ranks holds the first bad row. */
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
		if (lo < hi && fp)
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
 * record (the same verdict on every rank: no agreement needed). Base rows
 * that are the query rows (one_pass) hash alike: the hash is a sum over
 * rows, each with its index. */
static int fingerprints(xj_run *run, uint64_t mine[2], int one_pass,
			xj_status *st)
{
	xj_progress *p = &run->prog;
	uint64_t all[2];

	MPI_CHECK(MPI_Allreduce(mine, all, 2, MPI_UINT64_T, MPI_SUM,
				run->comm->world));
	p->rec.q.fingerprint = all[0];
	p->rec.b.fingerprint = one_pass ? all[0] : all[1];
	p->fingerprinted = 1;
	if (p->resuming)
		return resume_check_data(&p->old, &p->rec, st);
	return XJ_OK;
}

/* Queries and base are one dataset's rows and every rank's query block is
 * its base shard (one rank, or a split self-join): one resident copy
 * serves both. The same on every rank. */
static int resident_shared(const xj_run *run)
{
	return run->job->same_rows &&
	       (run->comm->nranks == 1 || run->pl.split);
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
	int shared = resident_shared(run);
	int64_t bytes = (run->pl.qblock_max +
			 (shared ? 0 : run->pl.bshard_max)) * d * 4;
	const float *mq = h5in_mem_rows(&run->qinfo);
	const float *mb = h5in_mem_rows(&run->binfo);
	int ok, all;

	/* float32 rows in memory as the backend reads them (the in-process
	 * API, one rank): used in place, no copy */
	if (mq && mb && run->comm->nranks == 1) {
		run->resq = (float *)mq + v->q0 * d;
		run->resb = (float *)mb + v->b0 * d;
		run->res_borrowed = 1;
		return;
	}
	if (run->pl.peak_bytes + bytes > plan_usable_bytes(&run->pin))
		return;
	run->resq = malloc((size_t)(v->qrows * d + 1) * sizeof(float));
	run->resb = shared ? run->resq :
		    malloc((size_t)(v->brows * d + 1) * sizeof(float));
	ok = run->resq && run->resb;
	MPI_CHECK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND,
				run->comm->world));
	if (all) {
		xj_log0("# inputs resident: %.1f MiB per rank at most, every "
			"row read once\n", (double)bytes / (1 << 20));
		return;
	}
	driver_release(run);
}

void driver_release(xj_run *run)
{
	driver_release_queries(run);
	if (!run->res_borrowed)
		free(run->resb);
	run->resb = NULL;
}

void driver_release_queries(xj_run *run)
{
	if (run->resq != run->resb && !run->res_borrowed)
		free(run->resq);
	run->resq = NULL;
}

/* Resident: every rank reads and checks its whole block and shard (the
 * rows it computes on) and hashes only its share. Streaming: each row is
 * read and checked by exactly one rank, through a slab buffer. The shares:
 * my query block split over my row's Pc ranks, my base shard over my
 * column's Pr ranks (a split self-join, whose shards are all the whole
 * base: over all ranks). Base rows that are the query rows are read once,
 * as queries, unless they must fill a resident shard of their own. */
int driver_validate(xj_run *run, xj_status *st)
{
	const plan_rank_view *v = &run->view;
	int64_t d = run->job->d, slab = run->pl.bchunk_rows, q0, qn, b0, bn;
	int64_t bad;
	uint64_t fp[2] = { 0, 0 };
	/* without progress records (--no-checkpoint) nothing is hashed */
	int rec = run->job->records;
	uint64_t *fq = rec ? &fp[0] : NULL, *fb = rec ? &fp[1] : NULL;
	xj_metric m = run->job->metric;
	float *buf = NULL;
	int res, one_pass;
	double t0 = report_now();

	resident_start(run);
	res = run->resq != NULL;
	one_pass = run->job->same_rows && (!res || run->resb == run->resq);
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
			       run->resq, q0, q0 + qn, &bad, fq, st);
	else if (buf)
		validate_range(&run->qinfo, m, q0, qn, slab, buf, NULL, q0,
			       q0 + qn, &bad, fq, st);
	guard_end();
	if (!agree_first(run->comm, st->code ? bad : INT64_MAX, st) &&
	    one_pass) {
		if (rec)
			fingerprints(run, fp, 1, st);
	} else if (!st->code) {
		driver_guard_input(run, &run->binfo);
		if (res)
			validate_range(&run->binfo, m, v->b0, v->brows, slab,
				       NULL, run->resb, b0, b0 + bn, &bad, fb,
				       st);
		else
			validate_range(&run->binfo, m, b0, bn, slab, buf, NULL,
				       b0, b0 + bn, &bad, fb, st);
		guard_end();
		if (!agree_first(run->comm, st->code ? bad : INT64_MAX, st) &&
		    rec)
			fingerprints(run, fp, 0, st);
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

int driver_rows_final(xj_run *run, int64_t a, int64_t b, xj_status *st)
{
	xj_progress *p = &run->prog;

	if (spans_add(&p->rec.done, a, b, st))
		return st->code;
	/* lists of final rows are of no use: the next record drops them
	 * (its lists file stays until a snapshot replaces it) */
	if (resume_inround_done(&p->rec.inround, &p->rec.done))
		resume_inround_clear(&p->rec.inround);
	return XJ_OK;
}

int driver_round_done(xj_run *run, int64_t r, xj_status *st)
{
	int64_t qc = run->pl.qchunk_rows;

	for (int i = 0; i < run->pl.pr; i++) {
		plan_rank_view w;

		plan_rank(&run->pin, &run->pl, i * run->pl.pc, &w);
		if (r < w.nqchunks &&
		    driver_rows_final(run, w.q0 + r * qc,
				      min64(w.q0 + (r + 1) * qc,
					    w.q0 + w.qrows), st))
			return st->code;
	}
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
	if (run->job->command == XJ_CMD_MATRIX && driver_matrix_sym(run))
		return driver_matrix_sym_blocks(run);
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
