/*
 * report.h: phase timers, progress lines and the final results table.
 *
 * defines: xj_report, xj_phase, report_init, report_now, report_add,
 *          report_merge, report_progress, report_final
 *
 * Progress goes to stderr on rank 0 (at most every few seconds): chunks
 * done, rate, ETA. The final report goes to stdout as a fixed-form table
 * with '#' before every non-data line, and as a JSON twin when asked.
 */
#ifndef XJ_REPORT_H
#define XJ_REPORT_H

#include <stdint.h>

#include "../run/comm.h"
#include "../../config/job.h"
#include "../../kernels/backend.h"
#include "plan.h"

typedef enum xj_phase {
	PH_SETUP, PH_VALIDATE, PH_READ, PH_COMPUTE, PH_MERGE, PH_WRITE,
	PH_COUNT
} xj_phase;

typedef struct xj_report {
	double t_start;
	double phase_s[PH_COUNT];    /* this rank's seconds per phase */
	int progress;
	int64_t units_total;         /* chunk pairs this rank computes */
	int64_t units_done;
	double t_last_print;
	double gemm_flops;           /* this rank's GEMM FLOPs */
	double rescored_pairs;       /* this rank's candidates rescored */
	int64_t write_bytes;         /* bytes of results this rank wrote
					* (the matrix) */
	int64_t write_direct_bytes;  /* of those, written with O_DIRECT */
	double t_mark;               /* when report_add last charged */
	int64_t merge_sent_bytes;    /* this rank's k-lists sent to and */
	int64_t merge_recv_bytes;    /* received from its grid row */
	double total_s;              /* set by report_final */
} xj_report;

double report_now(void);
/* Reset r, keeping r->t_start (the caller sets it when the run starts). */
void report_init(xj_report *r, int progress, int64_t units_total);
/* Add the time since *t0 to phase ph and reset *t0 (and t_mark) to now.
 * Time no call charges shows as "other" in the final table; the phases
 * and "other" add up to the total. */
void report_add(xj_report *r, xj_phase ph, double *t0);
/* One merge of rows x k lists over a grid row of p ranks, as rank me. */
void report_merge(xj_report *r, int64_t rows, int64_t k, int p, int me);
/* One more unit done; rank 0 prints a line when due. */
void report_progress(xj_report *r, const xj_comm *c);
/* Collective: print the phases of the slowest rank (they add up to its
 * total), the FLOPs and bytes written over all ranks, and the backend's
 * counters (candidates rescored, device time by kernel class, summed
 * over ranks), on rank 0, and write JSON to json_path when it is not
 * empty. */
void report_final(xj_report *r, const xj_comm *c, const xj_job *job,
		  const plan *p, const xj_backend *be, const char *json_path);
const char *report_phase_name(xj_phase ph);

#endif
