/*
 * driver_range.c: the range join's rounds: every pair within the
 * threshold, written as CSR (/indptr n + 1, /indices and /distances nnz).
 *
 * Decomposition: the grid is P x 1 (plan.h): no merge, each query row is
 * computed whole by one rank, against every base row. Query chunks of
 * Q rows are dealt round robin: in round r, rank p computes chunk
 * r * P + p. So the chunks of one round are consecutive in the file,
 * lower ranks first, and the output grows in row order:
 *
 *   round r:  every rank   range_begin, range_add per base chunk,
 *                          range_end -> its pairs per row, nnz_p
 *             allgather    nnz_0 .. nnz_{P-1} (the same on every rank)
 *             each rank    offset = pairs before the round + sum nnz_q, q < p
 *             collective   extend /indices, /distances by the round's sum;
 *                          write my pairs at offset, my rows' indptr
 *
 * Memory is one chunk's pairs per rank, bounded by the plan (a row holds
 * at most m pairs); the output never passes through one rank. The file
 * is the same whatever P, Q or the base chunk: each row's pairs are the
 * canonical ones in (value, index) order (kernels/backend.h), and offsets
 * only depend on the counts of the rows before.
 *
 * --max-pairs N: the ranks know the total after each round (the same on
 * each), and stop before the round that would pass N; the partial output
 * and its progress record are removed.
 *
 * Progress: the rounds end in row order, so the rows done are always a
 * prefix [0, R) of the queries; a resumed run (any P, any Q) deals its
 * chunks from R on, after the indptr[R] pairs already written, and trims
 * what an interrupted round wrote past them at the end.
 *
 * `xjoin plan range` estimates the pairs (rank 0): the canonical keys of
 * 64 query rows, evenly spaced, against 64 evenly spaced blocks of 64
 * base rows; the share within the threshold times n x m. Blocks keep the
 * reads few; a sample of everything (n <= 64, m <= 4096) is exact.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "driver.h"
#include "driver_int.h"
#include "../run/guard.h"
#include "../../kernels/metric.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

typedef struct range_bufs {
	float *q, *b;           /* read buffers (b: none when resident) */
	int64_t *count;         /* pairs per row of my chunk */
	int64_t *ptr;           /* its indptr entries (one more for row 0) */
	int64_t *idx;           /* its pairs */
	float *val;
	int slot_ptr, slot_idx, slot_val;
	int64_t nnz;            /* pairs written before this round */
} range_bufs;

/* The rows an earlier run finished: always a prefix [0, R), since the
 * rounds end in row order. */
static int64_t range_rows_done(const xj_run *run)
{
	const xj_spans *done = &run->prog.rec.done;

	return done->n && done->s[0][0] == 0 ? done->s[0][1] : 0;
}

/* Rounds left after the first row0 rows. */
static int64_t range_rounds(const xj_run *run, int64_t row0)
{
	int64_t left = run->job->n - row0;

	return ceil_div(ceil_div(left, run->pl.qchunk_rows), run->comm->nranks);
}

/* Rows [*q0, *q0 + *qrows) of rank p's chunk in round r (0 rows past the
 * end), the rounds counted from row0, the first row not done at start. */
static void range_chunk(const xj_run *run, int64_t row0, int64_t r, int p,
			int64_t *q0, int64_t *qrows)
{
	int64_t qc = run->pl.qchunk_rows;
	int64_t ch = r * run->comm->nranks + p;

	*q0 = min64(row0 + ch * qc, run->job->n);
	*qrows = min64(qc, run->job->n - *q0);
}

int64_t driver_range_chunks(const xj_run *run)
{
	int64_t mine = 0, row0 = range_rows_done(run);

	for (int64_t r = 0; r < range_rounds(run, row0); r++) {
		int64_t q0, qrows;

		range_chunk(run, row0, r, run->comm->rank, &q0, &qrows);
		mine += qrows > 0;
	}
	return mine * ceil_div(run->job->m, run->pl.bchunk_rows);
}

/* The first row after round r. */
static int64_t range_rounds_end(const xj_run *run, int64_t row0, int64_t r)
{
	int64_t q0, rows;

	range_chunk(run, row0, r, run->comm->nranks - 1, &q0, &rows);
	return q0 + rows;
}

/* Past --max-pairs no output is left, not even a partial one a record
 * names (a resumed run would only stop again). */
static void range_forget(xj_run *run)
{
	if (run->comm->rank == 0 && run->prog.saved)
		unlink(run->prog.path);
	run->prog.saved = 0;
}

/* Round r is written: its rows are final (the same spans on every rank);
 * a progress record follows when due. */
static int range_round_done(xj_run *run, int64_t row0, int64_t r,
			    xj_status *st)
{
	int64_t a, b, rows;

	range_chunk(run, row0, r, 0, &a, &rows);
	b = range_rounds_end(run, row0, r);
	if (b > a && spans_add(&run->prog.rec.done, a, b, st))
		return st->code;
	return driver_checkpoint(run, 0, st);
}

/* My chunk against every base chunk; count[] its pairs per row. */
static int range_compute(xj_run *run, h5in *qin, h5in *bin, range_bufs *rb,
			 int64_t q0, int64_t qrows, xj_status *st)
{
	xj_backend *be = run->be;
	int64_t d = run->job->d, m = run->job->m, bc = run->pl.bchunk_rows;
	xj_rows q = { NULL, qrows, d, q0, 0 };
	double t0 = report_now();

	q.x = driver_input_rows(run, qin, 0, q0, qrows, rb->q, st);
	report_add(run->rep, PH_READ, &t0);
	if (!q.x || be->range_begin(be, &q, st))
		return st->code;
	for (int64_t b0 = 0; b0 < m; b0 += bc) {
		xj_rows b = { NULL, min64(bc, m - b0), d, b0, 0 };

		b.x = driver_input_rows(run, bin, 1, b0, b.rows, rb->b, st);
		report_add(run->rep, PH_READ, &t0);
		if (!b.x || be->range_add(be, &b, st))
			return st->code;
		run->rep->gemm_flops = be->gemm_flops;
		report_add(run->rep, PH_COMPUTE, &t0);
		report_progress(run->rep, run->comm);
	}
	be->range_end(be, rb->count, st);
	report_add(run->rep, PH_COMPUTE, &t0);
	return st->code;
}

/* Collective: the round's offsets from every rank's count. */
static int range_offsets(xj_run *run, int64_t mine, int64_t *offset,
			 int64_t *round_total, xj_status *st)
{
	xj_comm *c = run->comm;
	int64_t *all = driver_alloc((size_t)c->nranks, sizeof(int64_t),
				    "pair counts", st);

	if (comm_agree(c, st)) {
		free(all);
		return st->code;
	}
	MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT64_T, all, 1, MPI_INT64_T,
				c->world));
	*offset = 0;
	*round_total = 0;
	for (int p = 0; p < c->nranks; p++) {
		if (p < c->rank)
			*offset += all[p];
		*round_total += all[p];
	}
	free(all);
	return XJ_OK;
}

/* My pairs and indptr entries into their buffers. */
static int range_fill(xj_run *run, range_bufs *rb, int64_t qrows,
		      int64_t mine, int64_t at, xj_status *st)
{
	int64_t end = at;

	rb->idx = driver_alloc((size_t)mine, sizeof(int64_t), "pairs", st);
	rb->val = driver_alloc((size_t)mine, sizeof(float), "pairs", st);
	if (!rb->idx || !rb->val)
		return st->code;
	if (mine && run->be->range_take(run->be, rb->idx, rb->val, st))
		return st->code;
	rb->ptr[0] = at;
	for (int64_t i = 0; i < qrows; i++) {
		end += rb->count[i];
		rb->ptr[i + 1] = end;
	}
	return XJ_OK;
}

/* Collective: grow the pair arrays to the round's end, write my slabs. */
static int range_write(xj_run *run, range_bufs *rb, int64_t q0,
		       int64_t qrows, int64_t mine, int64_t at,
		       int64_t total, xj_status *st)
{
	h5out *o = run->out;
	/* indptr[0] = 0 goes with row 0 (rank 0's, round 0; alone when
	 * there are no query rows) */
	int first = q0 == 0 && run->comm->rank == 0;
	double t0 = report_now();

	if (h5out_grow(o, rb->slot_idx, total, 0, st) ||
	    h5out_grow(o, rb->slot_val, total, 0, st) ||
	    h5out_write(o, rb->slot_idx, at, mine, 0, 1, rb->idx, st) ||
	    h5out_write(o, rb->slot_val, at, mine, 0, 1, rb->val, st) ||
	    h5out_write(o, rb->slot_ptr, first ? 0 : q0 + 1,
			qrows + first, 0, 1, first ? rb->ptr : rb->ptr + 1,
			st))
		return st->code;
	report_add(run->rep, PH_WRITE, &t0);
	return XJ_OK;
}

static int range_alloc(xj_run *run, range_bufs *rb, xj_status *st)
{
	int64_t d = run->job->d, qc = run->pl.qchunk_rows;

	rb->q = driver_alloc((size_t)(qc * d), sizeof(float), "queries", st);
	rb->b = driver_alloc((size_t)(run->resb ? 1 : run->pl.bchunk_rows * d),
			     sizeof(float), "base rows", st);
	rb->count = driver_alloc((size_t)qc, sizeof(int64_t), "counts", st);
	rb->ptr = driver_alloc((size_t)qc + 1, sizeof(int64_t), "indptr", st);
	return st->code;
}

/* Inputs for my chunks: the query file always (chunks are dealt round
 * robin, not the plan's block kept resident), the base unless resident. */
static int range_open(xj_run *run, h5in **qin, h5in **bin, xj_status *st)
{
	*qin = *bin = NULL;
	driver_guard_input(run, &run->qinfo);
	h5in_open(&run->qinfo, qin, st);
	driver_guard_input(run, &run->binfo);
	if (!st->code && !run->resb)
		h5in_open(&run->binfo, bin, st);
	guard_end();
	return st->code;
}

int driver_range(xj_run *run, xj_status *st)
{
	const xj_job *job = run->job;
	range_bufs rb = { 0 };
	h5in *qin = NULL, *bin = NULL;
	int64_t q0, qrows, mine, at = 0, total = 0, rounds, row0;

	/* every backend of the job, before anything collective: one
	 * without range entries (backend.h: optional) ends the job with
	 * the reason rather than a crash */
	if (!run->be->range_begin)
		xj_fail(st, XJ_EXIT_USAGE, "the %s backend offers no range "
			"join; run it with --device cpu", run->be->name);
	if (comm_agree(run->comm, st))
		return st->code;
	/* the resident query block is the plan's, not my round robin
	 * chunks: read those instead (the base stays resident) */
	driver_release_queries(run);
	if (!range_alloc(run, &rb, st))
		range_open(run, &qin, &bin, st);
	if (comm_agree(run->comm, st) ||
	    h5out_add_vector(run->out, "indptr", H5OUT_I64, job->n + 1, 0,
			     &rb.slot_ptr, st) ||
	    h5out_add_vector(run->out, "indices", H5OUT_I64, 0, 1,
			     &rb.slot_idx, st) ||
	    h5out_add_vector(run->out, "distances", H5OUT_F32, 0, 1,
			     &rb.slot_val, st))
		goto out;
	/* Each rank writes one contiguous piece of each vector a round, so
	 * independent transfers lose nothing; and collective ones hang on
	 * a full disk: Open MPI's two-phase write returns on the aggregator
	 * whose pwrite failed while the others wait for it in the next cycle
	 * (a 3-node range join ran into the soak's full tmpfs and never
	 * ended). h5out_write still agrees on errors around each write. */
	h5out_set_independent(run->out, 1);
	/* a resumed run continues after the rows done: pairs up to
	 * indptr[R] are final, anything past them an interrupted round's */
	row0 = range_rows_done(run);
	if (row0 && h5out_read_i64(run->out, rb.slot_ptr, row0, &rb.nnz, st))
		goto out;
	rounds = range_rounds(run, row0);
	for (int64_t r = 0; r < rounds || (r == 0 && !row0); r++) {
		range_chunk(run, row0, r, run->comm->rank, &q0, &qrows);
		mine = 0;
		if (qrows && !range_compute(run, qin, bin, &rb, q0, qrows, st))
			for (int64_t i = 0; i < qrows; i++)
				mine += rb.count[i];
		if (range_offsets(run, mine, &at, &total, st))
			goto out;
		if (job->max_pairs && total > job->max_pairs - rb.nnz) {
			xj_fail(st, XJ_EXIT_RESOURCE, "more than %" PRId64
				" pairs (--max-pairs) are within the "
				"threshold: %" PRId64 " in the query rows "
				"before row %" PRId64 " alone; no output "
				"written", job->max_pairs, rb.nnz + total,
				range_rounds_end(run, row0, r));
			range_forget(run);
			goto out;
		}
		at += rb.nnz;
		rb.nnz += total;
		range_fill(run, &rb, qrows, mine, at, st);
		if (comm_agree(run->comm, st) ||
		    range_write(run, &rb, q0, qrows, mine, at, rb.nnz, st))
			goto out;
		free(rb.idx);
		free(rb.val);
		rb.idx = NULL;
		rb.val = NULL;
		if (range_round_done(run, row0, r, st))
			goto out;
	}
	if (!h5out_grow(run->out, rb.slot_idx, rb.nnz, 1, st) &&
	    !h5out_grow(run->out, rb.slot_val, rb.nnz, 1, st))
		h5out_attr_i64(run->out, "nnz", rb.nnz, st);
out:
	if (qin)
		h5in_close(qin);
	if (bin)
		h5in_close(bin);
	free(rb.q);
	free(rb.b);
	free(rb.count);
	free(rb.ptr);
	free(rb.idx);
	free(rb.val);
	return st->code;
}

/* ---- plan range: the pairs estimated from a sample -------------------- */

#define EST_QROWS 64       /* query rows sampled, evenly spaced */
#define EST_BLOCKS 64      /* base blocks sampled, evenly spaced ... */
#define EST_BLOCK_ROWS 64  /* ... of this many consecutive rows */

/* Rows of the sample: count (rows, or blocks) starts evenly spaced over
 * total rows, each of len rows (fewer at the end); all rows when they fit. */
static int64_t est_starts(int64_t total, int64_t count, int64_t len,
			  int64_t *start)
{
	int64_t k = 0;

	if (total <= count * len) {
		for (int64_t r = 0; r < total; r += len)
			start[k++] = r;
		return k;
	}
	for (int64_t i = 0; i < count; i++)
		start[k++] = i * (total - len) / (count - 1 > 0 ? count - 1 : 1);
	return k;
}

/* Read the sample's rows (nstart runs of len rows from start[]) into x;
 * their global indices into gi. Returns the rows read, or -1. */
static int64_t est_read(const h5in_info *info, const int64_t *start,
			int64_t nstart, int64_t len, float *x, int64_t *gi,
			xj_status *st)
{
	h5in *in = NULL;
	int64_t rows = 0;

	if (h5in_open(info, &in, st))
		return -1;
	for (int64_t s = 0; s < nstart && !st->code; s++) {
		int64_t r = min64(len, info->rows - start[s]);

		if (!h5in_read(in, start[s], r, x + rows * info->cols, st))
			for (int64_t i = 0; i < r; i++)
				gi[rows++] = start[s] + i;
	}
	h5in_close(in);
	return st->code ? -1 : rows;
}

int driver_range_estimate(const xj_run *run, xj_status *st)
{
	const xj_job *job = run->job;
	int64_t d = job->d, qs, bs, nq, nb, hits = 0, pairs;
	int64_t qstart[EST_QROWS], bstart[EST_BLOCKS];
	float tkey = metric_value_to_key(job->metric, job->threshold);
	float *q, *b;
	int64_t *qi, *bi;
	double scale, est;

	nq = est_starts(job->n, EST_QROWS, 1, qstart);
	nb = est_starts(job->m, EST_BLOCKS, EST_BLOCK_ROWS, bstart);
	q = driver_alloc((size_t)(nq * d), sizeof(float), "the sample", st);
	b = driver_alloc((size_t)(nb * EST_BLOCK_ROWS * d), sizeof(float),
			 "the sample", st);
	qi = driver_alloc((size_t)nq, sizeof(int64_t), "the sample", st);
	bi = driver_alloc((size_t)(nb * EST_BLOCK_ROWS), sizeof(int64_t),
			  "the sample", st);
	if (st->code || (qs = est_read(&run->qinfo, qstart, nq, 1, q, qi,
				       st)) < 0 ||
	    (bs = est_read(&run->binfo, bstart, nb, EST_BLOCK_ROWS, b, bi,
			   st)) < 0)
		goto out;
	pairs = qs * bs;
#pragma omp parallel for reduction(+ : hits, pairs) schedule(dynamic, 1)
	for (int64_t i = 0; i < qs; i++) {
		const float *x = q + i * d;
		double xx = metric_norm2(x, d);

		for (int64_t j = 0; j < bs; j++) {
			const float *y = b + j * d;

			if (job->self && qi[i] == bi[j]) {
				pairs--;
				continue;
			}
			hits += metric_key(job->metric, x, y, d, xx,
					   metric_norm2(y, d)) <= tkey;
		}
	}
	scale = (double)job->n * job->m - (job->self ? (double)min64(job->n,
								       job->m) : 0);
	est = pairs > 0 ? (double)hits / pairs * scale : 0;
	printf("# range estimate: %" PRId64 " of %" PRId64 " sampled pairs "
	       "(%" PRId64 " query x %" PRId64 " base rows%s) are within the "
	       "threshold\n", hits, pairs, qs, bs,
	       pairs == scale ? ", all of them: exact" : "");
	printf("| %-22s | %18.4g |\n", "pairs (estimated)", est);
	printf("| %-22s | %18.4g |\n", "pairs per query row", est / job->n);
	printf("| %-22s | %14.1f MiB |\n", "output (estimated)",
	       (est * 12 + (double)(job->n + 1) * 8) / (1 << 20));
	if (job->max_pairs && est > (double)job->max_pairs)
		printf("# warning: more than --max-pairs %" PRId64 " pairs "
		       "expected: the run would stop with exit 4\n",
		       job->max_pairs);
	fflush(stdout);
out:
	free(q);
	free(b);
	free(qi);
	free(bi);
	return st->code;
}
