/*
 * driver.h: the data flow of one run, independent of the backend.
 *
 * app/driver/ owns the data flow of a run once it is planned: input
 * validation and progress (driver.c), the top-k rounds (driver_topk.c),
 * the matrix's blocks (driver_matrix.c), the range join's rounds
 * (driver_range.c) and a top-k round's recorded lists (snapshot.c).
 *
 * defines: xj_run, driver_validate, driver_topk, driver_matrix,
 *          driver_range
 *
 *   validate:  every input row is read once by exactly one rank and checked
 *              (NaN/Inf, metric rules); ranks agree on the first bad row.
 *   topk:      for each query chunk: read it, stream the base shard through
 *              the backend chunk by chunk, take the local k-lists, merge
 *              them across the grid row (reduce-scatter), write this rank's
 *              part collectively.
 *   matrix:    for each (query chunk, base chunk): queue the block on the
 *              backend, write the block before collectively as a
 *              hyperslab while it runs, wait for it (two block buffers).
 *   range:     query chunks dealt round robin; each round the ranks share
 *              their pair counts and write CSR slabs in place
 *              (driver_range.c).
 * Every collective step is preceded by comm_agree, so no rank waits on a
 * rank that failed.
 *
 * Progress (app/run/resume.h): after each query round is written, its rows
 * join run->prog.rec.done on every rank alike; at most every
 * --checkpoint-seconds (rank 0 decides for all) the output is flushed and
 * rank 0 saves the record. A resumed run skips every query chunk whose
 * rows are all done. Inside a top-k round the ranks agree every few base
 * chunks whether to stop (a signal) or to record the round's running
 * lists (app/driver/snapshot.h), so an interrupted or killed round continues
 * from there instead of starting over.
 */
#ifndef XJ_DRIVER_H
#define XJ_DRIVER_H

#include "../../io/h5in.h"
#include "../../io/h5out.h"
#include "../../kernels/backend.h"
#include "../run/comm.h"
#include "../../config/job.h"
#include "../plan/plan.h"
#include "../plan/report.h"
#include "../run/resume.h"

typedef struct xj_progress {
	resume_record rec;      /* this job: fingerprints, rows final */
	resume_record old;      /* the interrupted run's, when resuming */
	int resuming;           /* rec.done started from old.done */
	int fingerprinted;      /* rec's fingerprints are known */
	int saved;              /* a record of this output is on disk */
	int64_t saved_rows;     /* the query rows that record names */
	int64_t saved_held;     /* and those whose running lists it names */
	int64_t saved_folded;   /* the base rows folded into them */
	int lists_slot;         /* the saved record's lists file: 0, 1, or -1
				 * (none); a snapshot goes into the other */
	int64_t lists_generation;   /* the last snapshot's */
	int lists_written;      /* this run wrote a lists file */
	double last_save_s;
	char path[XJ_PATH_MAX + 16];
} xj_progress;

typedef struct xj_run {
	const xj_job *job;
	xj_comm *comm;
	plan_in pin;
	plan pl;
	plan_rank_view view;
	h5in_info qinfo, binfo;
	xj_backend *be;
	h5out *out;
	xj_report *rep;
	xj_progress prog;
	float *resq, *resb;     /* resident block and shard, or NULL */
	int res_borrowed;       /* they are the caller's rows in memory
				 * (h5in_mem_rows): never freed */
	const struct xj_device_choice *dev;   /* backend and GPU (device.h) */
} xj_run;

/* Backend calls this rank makes (for progress lines): query chunks not
 * yet done times base chunks. */
int64_t driver_chunks_todo(const xj_run *run);
/* Collective. Keeps this rank's query block and base shard in memory
 * (run->resq/resb) when they fit beside the plan's peak, then validates. */
int driver_validate(xj_run *run, xj_status *st);
/* Free what driver_validate kept. */
void driver_release(xj_run *run);
/* Drop the resident query block only (run->resq NULL); a copy it shares
 * with the base shard (a self-join) stays for the base. */
void driver_release_queries(xj_run *run);
/* Collective: flush the output and save the record, when due (rank 0
 * decides) or when now is set. Nothing before fingerprints are known. */
int driver_checkpoint(xj_run *run, int now, xj_status *st);
int driver_topk(xj_run *run, xj_status *st);
int driver_matrix(xj_run *run, xj_status *st);
/* Range join (app/driver/driver_range.c): every pair within the threshold, as
 * CSR; driver_range_chunks counts this rank's backend calls. */
int driver_range(xj_run *run, xj_status *st);
int64_t driver_range_chunks(const xj_run *run);
/* Rank 0, for `plan range`: print the pairs and output size estimated
 * from a sample of the inputs. */
int driver_range_estimate(const xj_run *run, xj_status *st);

#endif
