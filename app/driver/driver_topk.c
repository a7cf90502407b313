/*
 * driver_topk.c: the top-k rounds (driver.h). A round: read a query
 * chunk, stream the base shard through the backend in pieces, merge the
 * lists across the grid row, write this rank's part.
 *
 * Inside a round the ranks agree every few pieces (round_poll) whether a
 * rank failed, a signal came, or a snapshot of the running lists is due
 * (--checkpoint-seconds; rank 0 decides for all). A snapshot ends the
 * backend's stream, merges its lists over the grid row exactly as a
 * finished round does, folds them into the lists the round started from
 * (akey/aidx, this rank's part), records them (snapshot.h) and starts a
 * new stream of the same queries. A round whose chunks the recorded
 * snapshot holds starts from its lists and streams only the base rows
 * not folded into them (inround.h). The lists over disjoint base rows
 * merge (topk_merge) to the lists over their union, so the result keeps
 * its bits whatever was interrupted (docs/design.md).
 */
#include "driver.h"

#include <stdlib.h>
#include <string.h>

#include "../../kernels/metric.h"
#include "../../kernels/topk.h"
#include "../plan/device.h"
#include "driver_int.h"
#include "../run/inround.h"
#include "snapshot.h"

/* Ranks agree inside a round about this often (rank 0 sets how many
 * pieces that is): an interrupt waits at most this and one piece. */
#define POLL_EVERY_S 0.25
#define POLL_STRIDE_MAX 4096

enum { POLL_FAILED = 1, POLL_SIGNAL = 2, POLL_DUE = 4 };

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

typedef struct topk_bufs {
	float *q, *b;           /* chunks as read */
	float *key;             /* local lists, qchunk x k */
	int64_t *idx;
	float *mkey;            /* merged lists of my part */
	int64_t *midx;
	float *akey;            /* my part's lists over the base rows folded
				 * in before the backend's stream began */
	int64_t *aidx;
	float *rkey;            /* one merged list */
	int64_t *ridx;
} topk_bufs;

/* Where a round stands on this rank. */
typedef struct topk_round {
	int64_t r;
	int64_t q0, qrows;      /* my grid row's chunk (0 rows: none) */
	xj_rows q;              /* as the backend got it */
	int64_t part0, nrows;   /* my part of it after the merge */
	int acc;                /* akey/aidx hold my part's lists */
	xj_spans skip;          /* base rows the round started with */
	int64_t pieces;         /* pieces of the longest shard (all ranks) */
	int64_t folded;         /* pieces streamed so far */
	int64_t next_poll;      /* pieces folded at the next agreement */
	int64_t polled;         /* pieces folded at the last one */
	double t_poll;          /* rank 0: when that was */
} topk_round;

static int topk_alloc(const xj_run *run, topk_bufs *b, xj_status *st)
{
	int64_t d = run->job->d, k = run->job->k, qc = run->pl.qchunk_rows;
	int64_t part = qc / run->pl.pc + 1;
	/* read buffers; inputs kept in memory need none */
	int64_t qread = run->resq ? 0 : qc, bread = run->resq ? 0 :
			run->pl.bchunk_rows;

	memset(b, 0, sizeof(*b));
	b->q = driver_alloc((size_t)(qread * d), sizeof(float), "queries", st);
	b->b = driver_alloc((size_t)(bread * d), sizeof(float), "base rows",
			    st);
	b->key = driver_alloc((size_t)(qc * k), sizeof(float), "k-lists", st);
	b->idx = driver_alloc((size_t)(qc * k), sizeof(int64_t), "k-lists",
			      st);
	b->mkey = driver_alloc((size_t)(part * k), sizeof(float), "merge", st);
	b->midx = driver_alloc((size_t)(part * k), sizeof(int64_t), "merge",
			       st);
	/* the plan's fourth list per query row (plan.h): the merged part's
	 * values are written in place of its keys, so no more is needed */
	b->akey = driver_alloc((size_t)(part * k), sizeof(float), "k-lists",
			       st);
	b->aidx = driver_alloc((size_t)(part * k), sizeof(int64_t), "k-lists",
			       st);
	b->rkey = driver_alloc((size_t)k, sizeof(float), "merge", st);
	b->ridx = driver_alloc((size_t)k, sizeof(int64_t), "merge", st);
	return st->code;
}

static void topk_free(topk_bufs *b)
{
	free(b->q);
	free(b->b);
	free(b->key);
	free(b->idx);
	free(b->mkey);
	free(b->midx);
	free(b->akey);
	free(b->aidx);
	free(b->rkey);
	free(b->ridx);
}

/* ---- the plan's chunks, as every rank sees them ----------------------- */

/* The chunk grid row i computes in round r: [*q0, *q0 + *qrows), 0 rows
 * when it has none or an earlier run finished it. */
static void grid_chunk(const xj_run *run, int i, int64_t r, int64_t *q0,
		       int64_t *qrows)
{
	int64_t qc = run->pl.qchunk_rows;
	plan_rank_view w;

	plan_rank(&run->pin, &run->pl, i * run->pl.pc, &w);
	*q0 = w.q0 + r * qc;
	*qrows = r < w.nqchunks ? min64(qc, w.q0 + w.qrows - *q0) : 0;
	*qrows = driver_rows_to_do(run, *q0, *qrows);
}

/* The base shard of grid column j. */
static void grid_shard(const xj_run *run, int j, int64_t *b0, int64_t *b1)
{
	plan_rank_view w;

	plan_rank(&run->pin, &run->pl, j, &w);
	*b0 = w.b0;
	*b1 = w.b0 + w.brows;
}

/* Does round r start from the recorded snapshot? The same answer on
 * every rank: it depends on the plan and the record only. */
static int round_restores(const xj_run *run, int64_t r)
{
	const resume_inround *in = &run->prog.rec.inround;
	int64_t chunk[1][2], qrows;
	int any = 0;

	for (int i = 0; in->valid && i < run->pl.pr; i++) {
		grid_chunk(run, i, r, &chunk[0][0], &qrows);
		chunk[0][1] = chunk[0][0] + qrows;
		if (!qrows)
			continue;
		if (!inround_restores(in, (const int64_t (*)[2])chunk, 1))
			return 0;
		any = 1;
	}
	return any;
}

/* Pieces of the longest shard less skip, when some grid row has rows. */
static int64_t round_pieces(const xj_run *run, int64_t r,
			    const xj_spans *skip)
{
	int64_t most = 0, q0, qrows, b0, b1, any = 0;

	for (int i = 0; i < run->pl.pr && !any; i++) {
		grid_chunk(run, i, r, &q0, &qrows);
		any = qrows > 0;
	}
	for (int j = 0; any && j < run->pl.pc; j++) {
		int64_t n;

		grid_shard(run, j, &b0, &b1);
		n = inround_pieces(skip, b0, b1, run->pl.bchunk_rows);
		most = n > most ? n : most;
	}
	return most;
}

/* The query rows of round r (every grid row) and the base rows folded
 * into them after rs->folded pieces: a snapshot's spans. */
static int round_spans(const xj_run *run, const topk_round *rs,
		       xj_spans *rows, xj_spans *base, xj_status *st)
{
	int64_t q0, qrows, b0, b1;

	for (int i = 0; i < run->pl.pr; i++) {
		grid_chunk(run, i, rs->r, &q0, &qrows);
		if (spans_add(rows, q0, q0 + qrows, st))
			return st->code;
	}
	if (spans_copy(base, &rs->skip, st))
		return st->code;
	for (int j = 0; j < run->pl.pc; j++) {
		grid_shard(run, j, &b0, &b1);
		if (spans_add(base, b0, inround_piece_end(&rs->skip, b0, b1,
				run->pl.bchunk_rows, rs->folded), st))
			return st->code;
	}
	return XJ_OK;
}

/* Backend calls this rank makes (for progress lines). */
static int64_t topk_units(const xj_run *run)
{
	const plan_rank_view *v = &run->view;
	const xj_spans *base = &run->prog.rec.inround.base;
	xj_spans none = { 0 };
	int64_t units = 0, q0, qrows;

	for (int64_t r = 0; r < run->pl.qrounds; r++) {
		grid_chunk(run, v->row, r, &q0, &qrows);
		if (qrows)
			units += inround_pieces(round_restores(run, r) ? base :
						&none, v->b0, v->b0 + v->brows,
						run->pl.bchunk_rows);
	}
	return units;
}

/* ---- a round ------------------------------------------------------------ */

/* Set up round r: my chunk and part, and whether it starts from the
 * recorded lists (read into akey/aidx: collective). A snapshot that
 * cannot be read is forgotten and the round starts over. */
static void round_open(xj_run *run, topk_bufs *b, const xj_transport *tr,
		       int64_t r, topk_round *rs, xj_status *st)
{
	resume_inround *in = &run->prog.rec.inround;
	xj_spans none = { 0 };
	int restored = 0;
	xj_status rd;

	spans_free(&rs->skip);
	memset(rs, 0, sizeof(*rs));
	rs->r = r;
	grid_chunk(run, run->view.row, r, &rs->q0, &rs->qrows);
	if (rs->qrows)
		split_block(rs->qrows, tr->size, tr->rank, &rs->part0,
			    &rs->nrows);
	xj_ok(&rd);
	if (round_restores(run, r)) {
		/* agreed: snapshot_read is collective */
		restored = !snapshot_read(run, rs->q0 + rs->part0, rs->nrows,
					  b->akey, b->aidx, &rd);
		if (!restored && run->comm->rank == 0)
			fprintf(stderr, "xjoin: warning: %s: query round %lld "
				"starts over\n", rd.msg, (long long)r + 1);
		if (!restored)
			resume_inround_clear(in);
		else
			rs->acc = !spans_copy(&rs->skip, &in->base, st);
	}
	/* from the record, not the copy: the same count on every rank */
	rs->pieces = round_pieces(run, r, restored ? &in->base : &none);
	rs->next_poll = 1;
	rs->t_poll = report_now();
}

/* Start (or restart) the backend's stream of my chunk. */
static int round_begin(xj_run *run, h5in *qin, topk_bufs *b,
		       topk_round *rs, xj_status *st)
{
	double t0 = report_now();

	if (!rs->q.x) {
		static uint64_t rounds_loaded;

		/* one tag a round: a stream restarted after a snapshot
		 * continues the round's (the folds keep its lists) */
		rs->q = (xj_rows){ NULL, rs->qrows, run->job->d, rs->q0,
				   ++rounds_loaded };
		rs->q.x = driver_input_rows(run, qin, 0, rs->q0, rs->qrows,
					    b->q, st);
		report_add(run->rep, PH_READ, &t0);
		if (!rs->q.x)
			return st->code;
	}
	run->be->topk_begin(run->be, &rs->q, st);
	report_add(run->rep, PH_COMPUTE, &t0);
	return st->code;
}

/* Stream piece p of my shard (nothing past my last piece). */
static int round_add(xj_run *run, h5in *bin, topk_bufs *b,
		     const topk_round *rs, int64_t p, xj_status *st)
{
	const plan_rank_view *v = &run->view;
	xj_backend *be = run->be;
	xj_rows br = { NULL, 0, run->job->d, 0, 0 };
	double t0 = report_now();

	inround_piece(&rs->skip, v->b0, v->b0 + v->brows, run->pl.bchunk_rows,
		      p, &br.first_row, &br.rows);
	if (!br.rows)
		return XJ_OK;
	br.x = driver_input_rows(run, bin, 1, br.first_row, br.rows, b->b, st);
	report_add(run->rep, PH_READ, &t0);
	if (!br.x || be->topk_add(be, &br, st))
		return st->code;
	run->rep->gemm_flops = be->gemm_flops;
	run->rep->rescored_pairs = be->rescored_pairs;
	report_add(run->rep, PH_COMPUTE, &t0);
	report_progress(run->rep, run->comm);
	return XJ_OK;
}

/* Pieces to fold before the next agreement, so that agreements come
 * about every POLL_EVERY_S on this rank whatever a piece costs. */
static int64_t poll_stride(const topk_round *rs, double now)
{
	double each = (now - rs->t_poll) / (double)(rs->folded - rs->polled);

	if (each * POLL_STRIDE_MAX < POLL_EVERY_S)
		return POLL_STRIDE_MAX;
	return each < POLL_EVERY_S ? (int64_t)(POLL_EVERY_S / each) : 1;
}

/* Collective: has a rank failed or been signalled, is a snapshot due
 * (rank 0 decides)? The next agreement comes after the smallest stride
 * of all ranks: a rank with nothing to compute this round must not set
 * the pace for the others. */
static int round_poll(xj_run *run, topk_round *rs, const xj_status *st)
{
	double now = report_now();
	int64_t in[4] = { st->code != XJ_OK, comm_interrupted() != 0, 0,
			  -poll_stride(rs, now) };
	int64_t out[4];

	if (run->comm->rank == 0)
		in[2] = run->job->checkpoint_s > 0 &&
			rs->folded < rs->pieces &&
			now - run->prog.last_save_s >=
			(double)run->job->checkpoint_s;
	MPI_CHECK(MPI_Allreduce(in, out, 4, MPI_INT64_T, MPI_MAX,
				run->comm->world));
	rs->polled = rs->folded;
	rs->next_poll = rs->folded - out[3];
	rs->t_poll = now;
	return (out[0] ? POLL_FAILED : 0) | (out[1] ? POLL_SIGNAL : 0) |
	       (out[2] ? POLL_DUE : 0);
}

/* End the backend's stream on this rank: its lists, unless a device
 * transport merges them where they are (topk_end_merged). */
static int round_end_local(xj_run *run, topk_bufs *b, const topk_round *rs,
			   int merged, xj_status *st)
{
	if (rs->qrows && !merged && !st->code)
		run->be->topk_end(run->be, b->key, b->idx, st);
	return st->code;
}

/* mkey/midx (my part, over the stream's base rows) and akey/aidx (over
 * the rows folded in before it) become one list each, in mkey/midx. */
static void round_fold(const xj_run *run, topk_bufs *b, const topk_round *rs)
{
	int64_t k = run->job->k;

	for (int64_t i = 0; rs->acc && i < rs->nrows; i++) {
		const float *lk[2] = { b->akey + i * k, b->mkey + i * k };
		const int64_t *li[2] = { b->aidx + i * k, b->midx + i * k };

		topk_merge(2, lk, li, k, b->rkey, b->ridx);
		memcpy(b->mkey + i * k, b->rkey, (size_t)k * sizeof(float));
		memcpy(b->midx + i * k, b->ridx, (size_t)k * sizeof(int64_t));
	}
}

/* After agreement: merge the stream's lists over the grid row (my whole
 * grid row has the same chunk, so all its ranks take part or none does),
 * then fold in what the round started from. */
static int round_merge(xj_run *run, topk_bufs *b, const xj_transport *tr,
		       const topk_round *rs, int merged, xj_status *st)
{
	int64_t k = run->job->k, part0 = rs->part0, nrows = rs->nrows;

	if (rs->qrows && merged)
		run->be->topk_end_merged(run->be, tr, b->mkey, b->midx,
					 &part0, &nrows, st);
	else if (rs->qrows)
		exchange_topk_reduce_scatter(tr, rs->qrows, k, b->key, b->idx,
					     b->mkey, b->midx, &part0, &nrows,
					     st);
	if (rs->qrows)
		report_merge(run->rep, rs->qrows, k, tr->size, tr->rank);
	if (!st->code && (part0 != rs->part0 || nrows != rs->nrows))
		return xj_fail(st, XJ_EXIT_INTERNAL, "merge: part [%lld, "
			       "+%lld), expected [%lld, +%lld)",
			       (long long)part0, (long long)nrows,
			       (long long)rs->part0, (long long)rs->nrows);
	if (!st->code)
		round_fold(run, b, rs);
	return st->code;
}

/* Collective: record the round's lists so far (snapshot.h); the backend's
 * stream is ended, and restarted by the caller if the round goes on. */
static int round_snapshot(xj_run *run, topk_bufs *b, const xj_transport *tr,
			  topk_round *rs, int merged, xj_status *st)
{
	int64_t k = run->job->k;
	xj_spans rows = { 0 }, base = { 0 };
	double t0 = report_now();

	round_end_local(run, b, rs, merged, st);
	report_add(run->rep, PH_COMPUTE, &t0);
	/* a signal now waits for the next poll: this snapshot is what it
	 * is going to keep */
	if (comm_agree_errors(run->comm, st))
		return st->code;
	round_merge(run, b, tr, rs, merged, st);
	if (!st->code) {
		memcpy(b->akey, b->mkey, (size_t)(rs->nrows * k) *
		       sizeof(float));
		memcpy(b->aidx, b->midx, (size_t)(rs->nrows * k) *
		       sizeof(int64_t));
		rs->acc = 1;
		round_spans(run, rs, &rows, &base, st);
	}
	report_add(run->rep, PH_MERGE, &t0);
	if (!comm_agree_errors(run->comm, st))
		snapshot_save(run, &rows, &base, rs->q0 + rs->part0,
			      rs->nrows, b->akey, b->aidx, st);
	spans_free(&rows);
	spans_free(&base);
	report_add(run->rep, PH_WRITE, &t0);
	return st->code;
}

/* Stream the round's pieces, agreeing every few of them; ends with this
 * rank's local lists (or, merged, the device's) ready to merge. Returns
 * at once, after a snapshot, when signalled: the caller's agreement
 * reports it. */
static int round_stream(xj_run *run, h5in *qin, h5in *bin, topk_bufs *b,
			const xj_transport *tr, topk_round *rs, int merged,
			xj_status *st)
{
	if (rs->qrows)
		round_begin(run, qin, b, rs, st);
	for (int64_t p = 0; p < rs->pieces; p++) {
		int poll;

		if (rs->qrows && !st->code)
			round_add(run, bin, b, rs, p, st);
		rs->folded = p + 1;
		if (rs->folded < rs->next_poll && rs->folded < rs->pieces)
			continue;
		poll = round_poll(run, rs, st);
		if (poll & POLL_FAILED)
			return st->code;
		if (!(poll & (POLL_SIGNAL | POLL_DUE)))
			continue;
		if (round_snapshot(run, b, tr, rs, merged, st) ||
		    (poll & POLL_SIGNAL))
			return st->code;
		if (rs->qrows)
			round_begin(run, qin, b, rs, st);
	}
	return round_end_local(run, b, rs, merged, st);
}

/* Write my part of the round's final lists (collective); the keys become
 * the metric's values in place. */
static int round_write(xj_run *run, topk_bufs *b, const topk_round *rs,
		       const int slot[2], xj_status *st)
{
	int64_t k = run->job->k, row0 = rs->q0 + rs->part0;

	for (int64_t i = 0; i < rs->nrows * k; i++)
		b->mkey[i] = metric_key_to_value(run->job->metric, b->mkey[i]);
	if (comm_agree(run->comm, st) ||
	    h5out_write(run->out, slot[0], row0, rs->nrows, 0, k, b->midx,
			st) ||
	    h5out_write(run->out, slot[1], row0, rs->nrows, 0, k, b->mkey, st))
		return st->code;
	return XJ_OK;
}

int driver_topk(xj_run *run, xj_status *st)
{
	int64_t k = run->job->k;
	xj_transport tr;
	topk_bufs b;
	topk_round rs = { 0 };
	h5in *qin = NULL, *bin = NULL;
	int slot[2], merged;

	device_transport_open(run->comm, run->dev, &tr, st);
	merged = device_transport_is_device(&tr) &&
		 run->be->topk_end_merged != NULL;
	topk_alloc(run, &b, st);
	if (!st->code)
		driver_open_inputs(run, &qin, &bin, st);
	if (comm_agree(run->comm, st))
		goto out;
	if (h5out_add_dataset(run->out, "neighbors", H5OUT_I64, run->job->n, k,
			      0, &slot[0], st) ||
	    h5out_add_dataset(run->out, "distances", H5OUT_F32, run->job->n, k,
			      0, &slot[1], st))
		goto out;
	/* each rank writes its rows of a round, contiguous: independent
	 * transfers, as for the range join (driver_range.c: collective ones
	 * hang when the disk fills) */
	h5out_set_independent(run->out, 1);
	snapshot_check(run, b.akey, b.aidx, run->pl.qchunk_rows /
		       run->pl.pc + 1);
	run->rep->units_total = topk_units(run);
	for (int64_t r = 0; r < run->pl.qrounds; r++) {
		double t0;

		round_open(run, &b, &tr, r, &rs, st);
		round_stream(run, qin, bin, &b, &tr, &rs, merged, st);
		if (comm_agree(run->comm, st))
			break;
		t0 = report_now();
		round_merge(run, &b, &tr, &rs, merged, st);
		report_add(run->rep, PH_MERGE, &t0);
		if (round_write(run, &b, &rs, slot, st))
			break;
		report_add(run->rep, PH_WRITE, &t0);
		if (driver_round_done(run, r, st) ||
		    driver_checkpoint(run, 0, st))
			break;
	}
out:
	spans_free(&rs.skip);
	device_transport_close(&tr);
	if (qin)
		h5in_close(qin);
	if (bin)
		h5in_close(bin);
	topk_free(&b);
	return st->code;
}
