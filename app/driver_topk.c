/* driver_topk.c: the top-k rounds: read a query chunk, stream the base
 * shard through the backend, merge across the grid row, write (driver.h). */
#include "driver.h"

#include <stdlib.h>
#include <string.h>

#include "../kernels/metric.h"
#include "device.h"
#include "driver_int.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- top-k ------------------------------------------------------------ */

typedef struct topk_bufs {
	float *q, *b;           /* chunks as read */
	float *key;             /* local lists, qchunk x k */
	int64_t *idx;
	float *mkey;            /* merged lists of my part */
	int64_t *midx;
	float *dist;            /* output values of my part */
} topk_bufs;

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
	b->dist = driver_alloc((size_t)(part * k), sizeof(float), "output",
			       st);
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
	free(b->dist);
}

/* Local k-lists of query rows [q0, q0+qrows) against my base shard. */
static int topk_local(xj_run *run, h5in *qin, h5in *bin, int64_t q0,
		      int64_t qrows, topk_bufs *b, int merged, xj_status *st)
{
	const plan_rank_view *v = &run->view;
	int64_t d = run->job->d, bc = run->pl.bchunk_rows;
	xj_backend *be = run->be;
	double t0 = report_now();
	xj_rows q = { NULL, qrows, d, q0, 0 };

	q.x = driver_input_rows(run, qin, 0, q0, qrows, b->q, st);
	if (!q.x)
		return st->code;
	report_add(run->rep, PH_READ, &t0);
	if (be->topk_begin(be, &q, st))
		return st->code;
	for (int64_t r = v->b0; r < v->b0 + v->brows; r += bc) {
		xj_rows br = { NULL, min64(bc, v->b0 + v->brows - r), d, r, 0 };

		br.x = driver_input_rows(run, bin, 1, r, br.rows, b->b, st);
		if (!br.x)
			return st->code;
		report_add(run->rep, PH_READ, &t0);
		if (be->topk_add(be, &br, st))
			return st->code;
		if (comm_interrupted())
			return XJ_OK;   /* comm_agree reports it to all ranks */
		run->rep->gemm_flops = be->gemm_flops;
		report_add(run->rep, PH_COMPUTE, &t0);
		report_progress(run->rep, run->comm);
	}
	/* a device transport merges the lists where they are (the
	 * backend's topk_end_merged, in driver_topk) */
	if (!merged)
		be->topk_end(be, b->key, b->idx, st);
	report_add(run->rep, PH_COMPUTE, &t0);
	return st->code;
}

int driver_topk(xj_run *run, xj_status *st)
{
	const plan_rank_view *v = &run->view;
	int64_t k = run->job->k, qc = run->pl.qchunk_rows;
	xj_transport tr;
	topk_bufs b;
	h5in *qin = NULL, *bin = NULL;
	int slot_idx, slot_dist, merged;

	device_transport_open(run->comm, run->dev, &tr, st);
	merged = device_transport_is_device(&tr) &&
		 run->be->topk_end_merged != NULL;
	topk_alloc(run, &b, st);
	if (!st->code)
		driver_open_inputs(run, &qin, &bin, st);
	if (comm_agree(run->comm, st))
		goto out;
	if (h5out_add_dataset(run->out, "neighbors", H5OUT_I64, run->job->n, k,
			      0, &slot_idx, st) ||
	    h5out_add_dataset(run->out, "distances", H5OUT_F32, run->job->n, k,
			      0, &slot_dist, st))
		goto out;
	for (int64_t round = 0; round < run->pl.qrounds; round++) {
		int64_t q0 = v->q0 + round * qc, part0 = 0, nrows = 0;
		int64_t qrows = round < v->nqchunks ?
				min64(qc, v->q0 + v->qrows - q0) : 0;
		double t0;

		qrows = driver_rows_to_do(run, q0, qrows);
		if (qrows)
			topk_local(run, qin, bin, q0, qrows, &b, merged, st);
		if (comm_agree(run->comm, st))
			break;
		t0 = report_now();
		/* my whole grid row has the same query block, so all its
		 * ranks take part in this exchange or none does */
		if (qrows && merged)
			run->be->topk_end_merged(run->be, &tr, b.mkey, b.midx,
						 &part0, &nrows, st);
		else if (qrows)
			exchange_topk_reduce_scatter(&tr, qrows, k, b.key,
						     b.idx, b.mkey, b.midx,
						     &part0, &nrows, st);
		if (qrows)
			report_merge(run->rep, qrows, k, tr.size, tr.rank);
		for (int64_t i = 0; i < nrows * k; i++)
			b.dist[i] = metric_key_to_value(run->job->metric,
							 b.mkey[i]);
		report_add(run->rep, PH_MERGE, &t0);
		if (comm_agree(run->comm, st))
			break;
		if (h5out_write(run->out, slot_idx, q0 + part0, nrows, 0, k,
				b.midx, st) ||
		    h5out_write(run->out, slot_dist, q0 + part0, nrows, 0, k,
				b.dist, st))
			break;
		report_add(run->rep, PH_WRITE, &t0);
		if (driver_round_done(run, round, st) ||
		    driver_checkpoint(run, 0, st))
			break;
	}
out:
	device_transport_close(&tr);
	if (qin)
		h5in_close(qin);
	if (bin)
		h5in_close(bin);
	topk_free(&b);
	return st->code;
}

