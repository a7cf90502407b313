/* driver_matrix.c: the full matrix (see driver.h), block by block; the
 * matrix of a set with itself computes the upper triangle of blocks. */
#include "driver.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "driver_int.h"
#include "../run/guard.h"
#include "../../kernels/cpu/cpu_transpose.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/*
 * The matrix's HDF5 chunks span a block's cols of the m columns, cut to 4
 * MiB by their rows, where the padding allows (plan_matrix_chunk_cols): a
 * block's write then covers whole chunks, each contiguous in the file,
 * instead of a strided piece of every chunk it crosses (chunks of whole
 * rows). On several grid columns the chunks are the shards' unit
 * (plan.balign) where it divides the block, so that a rank's blocks
 * start on chunk boundaries too. XJ_MATRIX_CHUNKS=rows keeps chunks of
 * whole rows, for the benchmark's side-by-side comparison.
 */
static int64_t chunk_cols(int64_t m, int64_t cols)
{
	const char *e = getenv("XJ_MATRIX_CHUNKS");

	return e && !strcmp(e, "rows") ? 0 : plan_matrix_chunk_cols(m, cols);
}

static int64_t block_chunk_cols(const xj_run *run)
{
	int64_t bc = run->pl.bchunk_rows, u = run->pl.balign;

	return chunk_cols(run->job->m, u > 0 && bc % u == 0 ? u : bc);
}

/*
 * How the blocks reach the file. A rank's blocks are whole chunks in the
 * blocks' shape, so by default each chunk goes from the block buffer to
 * its place in the file with O_DIRECT (h5out_set_direct): no page cache
 * copy, no MPI-IO aggregation. The rest (parts of chunks, and every block
 * where the file system refuses O_DIRECT) goes by independent HDF5
 * transfers: a collective one that fails on one rank (a full disk) can
 * return there while the others wait inside it (HDF5 1.10's chunk
 * write, a view reset after the failed write), where independent ones all
 * return and the ranks agree on the error after them. XJ_MATRIX_IO=
 * collective or independent keeps HDF5's transfers of either kind, no
 * O_DIRECT, for the benchmark's side-by-side comparison
 * (docs/performance.md).
 */
static int matrix_io(h5out *out, xj_status *st)
{
	const char *e = getenv("XJ_MATRIX_IO");

	xj_ok(st);
	h5out_set_independent(out, !e || strcmp(e, "collective"));
	if (!e || (strcmp(e, "collective") && strcmp(e, "independent")))
		h5out_set_direct(out, st);
	return st->code;
}

/* ---- the block pipeline of both orders ------------------------------- */

/* One block of the matrix: where it goes, the buffer that holds it, and
 * the round (plain: its query round; triangle: its step) its write may
 * finish. */
typedef struct mblock {
	int64_t q0, qrows, b0, brows;
	int64_t round;
	int last;               /* plain: the last block of its round */
	float *out;
} mblock;

/*
 * Blocks go through two buffers in turn: block i is queued, block i - 1
 * is written while the backend computes block i (the GPU on its streams,
 * the CPU on its worker thread), then block i is waited for.
 * XJ_MATRIX_OVERLAP=0 takes one buffer instead, each block computed, then
 * written: the tests cover both, benchmarks measure them
 * (docs/performance.md: with chunks in the blocks' shape the overlap
 * wrote an 8 GB matrix at 115% of dd's rate on 2 cores, one by one 79%).
 * put writes a block (collective: every rank calls it once a step, a
 * rank without a block with 0 rows).
 */
typedef struct mpipe mpipe;
struct mpipe {
	xj_run *run;
	int nbuf, queued, pending;
	mblock done;            /* computed, not yet written when pending */
	double t0;              /* the phase clock */
	int (*put)(mpipe *p, const mblock *k, xj_status *st);
	int slot;               /* the dataset */
	const void *tri;        /* the triangle's blocks (put's) */
	float *tb;              /* the triangle's transpose buffer */
};

static int pipe_buffers(void)
{
	const char *e = getenv("XJ_MATRIX_OVERLAP");

	return e && !strcmp(e, "0") ? 1 : 2;
}

/* Wait for the queued block, if any: the time since t0 is compute. */
static void pipe_wait(mpipe *p, xj_status *st)
{
	if (!p->queued)
		return;
	p->queued = 0;
	p->run->be->matrix_wait(p->run->be, st);
	p->run->rep->gemm_flops = p->run->be->gemm_flops;
	report_add(p->run->rep, PH_COMPUTE, &p->t0);
	report_progress(p->run->rep, p->run->comm);
}

/* Block cur was started (p->queued) or has nothing to compute: agree on
 * errors and signals, write what the order makes due. */
static int pipe_step(mpipe *p, const mblock *cur, xj_status *st)
{
	if (p->nbuf == 1) {     /* computed: write it now */
		pipe_wait(p, st);
		p->done = *cur;
		p->pending = 1;
	}
	if (comm_agree(p->run->comm, st))
		return st->code;
	if (p->pending && p->put(p, &p->done, st))
		return st->code;
	p->pending = 0;
	if (p->nbuf == 2) {     /* written above while it ran */
		pipe_wait(p, st);
		p->done = *cur;
		p->pending = 1;
	}
	return XJ_OK;
}

/* After the last step: the block still pending. */
static int pipe_finish(mpipe *p, xj_status *st)
{
	if (!comm_agree(p->run->comm, st) && p->pending)
		p->put(p, &p->done, st);
	return st->code;
}

/* On the way out: a queued block's buffer is about to be freed. */
static void pipe_drain(mpipe *p)
{
	xj_status ignored;

	if (!p->queued)
		return;
	xj_ok(&ignored);
	(void)p->run->be->matrix_wait(p->run->be, &ignored);
	p->queued = 0;
}

/* The end of a put: the time since t0 (the ranks' agreement before it
 * included) is the write's; a checkpoint charges its own. */
static int pipe_put_done(mpipe *p, int checkpoint, xj_status *st)
{
	p->run->rep->write_direct_bytes = h5out_direct_bytes(p->run->out);
	report_add(p->run->rep, PH_WRITE, &p->t0);
	if (checkpoint && driver_checkpoint(p->run, 0, st))
		return st->code;
	p->t0 = report_now();
	return XJ_OK;
}

/* ---- the triangle of a set with itself -------------------------------- */

/*
 * When queries and base are the same rows (one file's one dataset on both
 * sides: job.same_rows), value(i, j) = value(j, i) for every metric: the
 * canonical value is a sum of the same products, (q - b)^2 = (b - q)^2,
 * in the same order. So the matrix is cut into square blocks of T rows
 * and only the blocks (I, J), I <= J, are computed; each is written at
 * (I, J) and, transposed, at (J, I). About half the compute; the bytes
 * written are the same.
 *
 * The blocks still to do (those whose rows I or J are not final) are
 * taken in row-major order, I then J, and dealt over all P ranks: in step
 * s rank p computes block s P + p, then every rank writes its block and
 * its transpose (collective writes, 0 rows for a rank without a block).
 * Block row I is final once the last of its blocks is written: its blocks
 * (I, J >= I) are its own, and its blocks (I, J < I) are the transposes
 * of (J, I), which come earlier in that order. So progress records whole
 * block rows and --resume works on any rank count or chunk size.
 *
 * Every rank reads the rows of its blocks from the inputs (a rank's block
 * rows are not its grid view): a resident copy serves only when it holds
 * every row (one rank).
 */
typedef struct tri {
	int64_t t, nb;          /* block rows, blocks per side */
	int64_t nblk;           /* blocks to do */
	int64_t *bi, *bj;       /* block k is (bi[k], bj[k]) */
	int64_t *rowlast;       /* block row I's last block, or -1 */
} tri;

static int64_t tri_side(const xj_run *run)
{
	return plan_tri_side(&run->pin, &run->pl);
}

int driver_matrix_sym(const xj_run *run)
{
	const xj_job *job = run->job;

	return job->command == XJ_CMD_MATRIX && job->same_rows &&
	       job->n == job->m && job->n > tri_side(run);
}

static int block_rows_done(const xj_run *run, int64_t t, int64_t i)
{
	int64_t a = i * t, b = min64(a + t, run->job->n);

	return driver_rows_to_do(run, a, b - a) == 0;
}

/* The blocks still to do, in row-major order (nblk and rowlast only when
 * bi is NULL). */
static int64_t tri_list(const xj_run *run, tri *tr)
{
	int64_t k = 0;

	tr->t = tri_side(run);
	tr->nb = (run->job->n + tr->t - 1) / tr->t;
	for (int64_t i = 0; i < tr->nb; i++) {
		int done_i = block_rows_done(run, tr->t, i);

		if (tr->rowlast)
			tr->rowlast[i] = -1;
		for (int64_t j = i; j < tr->nb; j++) {
			if (done_i && block_rows_done(run, tr->t, j))
				continue;
			if (tr->bi) {
				tr->bi[k] = i;
				tr->bj[k] = j;
			}
			if (tr->rowlast)
				tr->rowlast[i] = k;
			k++;
		}
	}
	tr->nblk = k;
	return k;
}

int64_t driver_matrix_sym_blocks(const xj_run *run)
{
	tri tr = { 0 };
	int64_t p = run->comm->nranks, r = run->comm->rank;
	int64_t n = tri_list(run, &tr);

	return n / p + (r < n % p);
}

/* A block's transpose, built beside its write (tri_put). */
typedef struct tr_job {
	const float *a;
	int64_t rows, cols;
	float *t;
} tr_job;

static void *transpose_job(void *arg)
{
	tr_job *j = arg;

	cpu_transpose(j->a, j->rows, j->cols, NULL, j->t);
	return NULL;
}

/* Rows [row0, row0 + rows) of the set: the resident copy when it holds
 * them all (one rank), else read into buf. */
static const float *tri_rows(xj_run *run, h5in *in, int64_t row0,
			     int64_t rows, float *buf, xj_status *st)
{
	if (run->resb)
		return run->resb + row0 * run->job->d;
	return driver_input_rows(run, in, 1, row0, rows, buf, st);
}

/* Write block k (rows q0.., columns b0..) and its transpose; the block
 * rows whose last block was in k's step (k->round) are final. */
static int tri_put(mpipe *p, const mblock *k, xj_status *st)
{
	xj_run *run = p->run;
	const tri *tr = p->tri;
	int64_t P = run->comm->nranks, s = k->round, n = run->job->n;
	int64_t ni = k->qrows, nj = k->brows;
	int diag = k->b0 == k->q0, rc = XJ_OK;

	/* the transpose is built on a second thread while the main thread
	 * (MPI_THREAD_FUNNELED) writes the block: the write waits on the
	 * disk more than on a CPU. A thread of its own, joined by a blocking
	 * wait: a second OpenMP thread spun at the region's end for the
	 * rest of the write, 5% of the CPU samples of the run. Where no
	 * thread starts, after the write. */
	tr_job tj = { k->out, ni, nj, p->tb };
	pthread_t th;
	int apart = !diag && ni && nj &&
		    pthread_create(&th, NULL, transpose_job, &tj) == 0;

	rc = h5out_write(run->out, p->slot, k->q0, ni, k->b0, nj, k->out,
			 st);
	if (apart)
		pthread_join(th, NULL);
	else if (!diag && !rc)
		cpu_transpose(k->out, ni, nj, NULL, p->tb);
	if (rc)
		return st->code;
	run->rep->write_bytes += ni * nj * (int64_t)sizeof(float);
	if (diag)
		nj = ni = 0;     /* a diagonal block is its transpose */
	if (h5out_write(run->out, p->slot, k->b0, nj, k->q0, ni, p->tb, st))
		return st->code;
	run->rep->write_bytes += ni * nj * (int64_t)sizeof(float);
	for (int64_t r = 0; r < tr->nb; r++)
		if (tr->rowlast[r] >= s * P && tr->rowlast[r] < (s + 1) * P &&
		    driver_rows_final(run, r * tr->t,
				      min64((r + 1) * tr->t, n), st))
			return st->code;
	return pipe_put_done(p, 1, st);
}

/* The steps of the triangle through the block pipeline: block s is
 * computed while block s - 1 and its transpose are written. */
static int driver_matrix_tri(xj_run *run, xj_status *st)
{
	xj_backend *be = run->be;
	xj_comm *c = run->comm;
	int64_t d = run->job->d, n = run->job->n;
	int64_t P = c->nranks, steps, qtag = -1;
	tri tr = { 0 };
	mpipe p = { run, pipe_buffers(), 0, 0, { 0 }, report_now(), tri_put,
		    -1, &tr, NULL };
	float *q = NULL, *b = NULL, *blk[2] = { NULL, NULL };
	const float *qx_rows = NULL;
	h5in *in = NULL;

	/* a resident copy of this rank's view is of no use unless it is all */
	if (run->resb && (run->view.brows != n || run->view.b0 != 0))
		driver_release(run);
	tri_list(run, &tr);
	tr.bi = driver_alloc((size_t)tr.nblk, sizeof(int64_t), "blocks", st);
	tr.bj = driver_alloc((size_t)tr.nblk, sizeof(int64_t), "blocks", st);
	tr.rowlast = driver_alloc((size_t)tr.nb, sizeof(int64_t), "blocks",
				  st);
	if (!st->code)
		tri_list(run, &tr);
	xj_log0("# the same rows on both sides: the upper triangle, %" PRId64
		" blocks of %" PRId64 " rows to compute (of %" PRId64 " x %"
		PRId64 "), dealt over %d ranks in turn\n", tr.nblk, tr.t, tr.nb,
		tr.nb, c->nranks);
	q = driver_alloc((size_t)(run->resb ? 0 : tr.t * d), sizeof(float),
			 "queries", st);
	b = driver_alloc((size_t)(run->resb ? 0 : tr.t * d), sizeof(float),
			 "base rows", st);
	for (int i = 0; i < p.nbuf && !st->code; i++)
		blk[i] = be->block_alloc(be, tr.t * tr.t, st);
	if (!st->code)
		p.tb = be->block_alloc(be, tr.t * tr.t, st);
	if (!st->code && !run->resb) {
		driver_guard_input(run, &run->binfo);
		h5in_open(&run->binfo, &in, st);
		guard_end();
	}
	if (comm_agree(c, st))
		goto out;
	report_add(run->rep, PH_READ, &p.t0);
	if (h5out_add_dataset_tiled(run->out, "distances", H5OUT_F32, n, n,
				    tr.t, chunk_cols(n, tr.t), &p.slot, st))
		goto out;
	if (matrix_io(run->out, st))
		goto out;
	report_add(run->rep, PH_WRITE, &p.t0);
	steps = (tr.nblk + P - 1) / P;
	for (int64_t s = 0; s < steps; s++) {
		int64_t k = s * P + c->rank;
		mblock cur = { 0, 0, 0, 0, s, 0, blk[s % p.nbuf] };

		if (k < tr.nblk && !st->code) {
			xj_rows qx, bx;

			cur.q0 = tr.bi[k] * tr.t;
			cur.b0 = tr.bj[k] * tr.t;
			cur.qrows = min64(tr.t, n - cur.q0);
			cur.brows = min64(tr.t, n - cur.b0);
			/* rows I stay while the blocks of row I go on */
			if (qtag != tr.bi[k])
				qx_rows = tri_rows(run, in, cur.q0, cur.qrows,
						   q, st);
			qtag = qx_rows ? tr.bi[k] : -1;
			qx = (xj_rows){ qx_rows, cur.qrows, d, cur.q0,
					(uint64_t)tr.bi[k] + 1 };
			bx = (xj_rows){ qx_rows, cur.qrows, d, cur.q0, 0 };
			if (cur.b0 != cur.q0)
				bx = (xj_rows){ tri_rows(run, in, cur.b0,
							 cur.brows, b, st),
						cur.brows, d, cur.b0, 0 };
			report_add(run->rep, PH_READ, &p.t0);
			if (qx.x && bx.x && !be->matrix_start(be, &qx, &bx,
							      cur.out, st))
				p.queued = 1;
			report_add(run->rep, PH_COMPUTE, &p.t0);
		}
		if (pipe_step(&p, &cur, st))
			goto out;
	}
	pipe_finish(&p, st);
out:
	pipe_drain(&p);
	if (in)
		h5in_close(in);
	free(q);
	free(b);
	for (int i = 0; i < p.nbuf; i++)
		if (blk[i])
			be->block_free(be, blk[i]);
	if (p.tb)
		be->block_free(be, p.tb);
	free(tr.bi);
	free(tr.bj);
	free(tr.rowlast);
	return st->code;
}

/* ---- the plain order -------------------------------------------------- */

/* Write a block; the last of a round makes its rows final. */
static int matrix_put(mpipe *p, const mblock *k, xj_status *st)
{
	xj_run *run = p->run;

	if (h5out_write(run->out, p->slot, k->q0, k->brows ? k->qrows : 0,
			k->b0, k->brows, k->out, st))
		return st->code;
	run->rep->write_bytes += k->qrows * k->brows * (int64_t)sizeof(float);
	if (k->last && driver_round_done(run, k->round, st))
		return st->code;
	return pipe_put_done(p, k->last, st);
}

/* Each query round streams the base chunks past its query chunk; the
 * blocks go through the block pipeline (above). */
int driver_matrix(xj_run *run, xj_status *st)
{
	const plan_rank_view *v = &run->view;
	xj_backend *be = run->be;
	int64_t d = run->job->d, qc = run->pl.qchunk_rows;
	int64_t bc = run->pl.bchunk_rows, nblocks = 0;
	mpipe p = { run, pipe_buffers(), 0, 0, { 0 }, report_now(),
		    matrix_put, -1, NULL, NULL };
	float *q = NULL, *b = NULL, *blk[2] = { NULL, NULL };
	h5in *qin = NULL, *bin = NULL;

	if (driver_matrix_sym(run))
		return driver_matrix_tri(run, st);

	/* inputs in memory need no read buffers */
	q = driver_alloc((size_t)(run->resq ? 0 : qc * d), sizeof(float),
			 "queries", st);
	b = driver_alloc((size_t)(run->resq ? 0 : bc * d), sizeof(float),
			 "base rows", st);
	for (int i = 0; i < p.nbuf && !st->code; i++)
		blk[i] = be->block_alloc(be, qc * bc, st);
	if (!st->code)
		driver_open_inputs(run, &qin, &bin, st);
	if (comm_agree(run->comm, st))
		goto out;
	report_add(run->rep, PH_READ, &p.t0);
	if (h5out_add_dataset_tiled(run->out, "distances", H5OUT_F32,
				    run->job->n, run->job->m, qc,
				    block_chunk_cols(run), &p.slot, st))
		goto out;
	if (matrix_io(run->out, st))
		goto out;
	report_add(run->rep, PH_WRITE, &p.t0);
	for (int64_t qr = 0; qr < run->pl.qrounds; qr++) {
		int64_t q0 = v->q0 + qr * qc;
		int64_t qrows = qr < v->nqchunks ?
				min64(qc, v->q0 + v->qrows - q0) : 0;
		xj_rows qx = { NULL, 0, d, q0, 0 };

		qx.rows = qrows = driver_rows_to_do(run, q0, qrows);
		qx.tag = (uint64_t)qr + 1;   /* the same rows for every block */
		if (qrows && v->brows)
			qx.x = driver_input_rows(run, qin, 0, q0, qrows, q, st);
		report_add(run->rep, PH_READ, &p.t0);
		for (int64_t br = 0; br < run->pl.brounds; br++) {
			mblock cur = { q0, qrows, v->b0 + br * bc, 0, qr,
				       br == run->pl.brounds - 1,
				       blk[nblocks++ % p.nbuf] };
			xj_rows bx = { NULL, 0, d, cur.b0, 0 };

			if (qrows && br < v->nbchunks)
				cur.brows = min64(bc, v->b0 + v->brows - cur.b0);
			if (!st->code && cur.brows) {
				bx.rows = cur.brows;
				bx.x = driver_input_rows(run, bin, 1, cur.b0,
							 cur.brows, b, st);
				report_add(run->rep, PH_READ, &p.t0);
				if (bx.x && !be->matrix_start(be, &qx, &bx,
							      cur.out, st))
					p.queued = 1;
				report_add(run->rep, PH_COMPUTE, &p.t0);
			}
			if (pipe_step(&p, &cur, st))
				goto out;
		}
	}
	pipe_finish(&p, st);
out:
	pipe_drain(&p);
	if (qin)
		h5in_close(qin);
	if (bin)
		h5in_close(bin);
	free(q);
	free(b);
	for (int i = 0; i < p.nbuf; i++)
		if (blk[i])
			be->block_free(be, blk[i]);
	return st->code;
}
