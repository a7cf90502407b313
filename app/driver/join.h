/*
 * join.h: a whole job of xjoin's: topk, matrix, range, or plan of one.
 *
 * defines: join_run, join_command, join_threads
 *
 * The same run whether the command line (app/main.c) or a program in
 * the same process (app/api/xjoin_api.c) asks for it. Collective: every
 * rank of c calls it with the same job.
 */
#ifndef XJ_JOIN_H
#define XJ_JOIN_H

#include "../../config/job.h"
#include "../../config/status.h"
#include "../run/comm.h"

/* The job, as rank 0 parsed it (every rank holds it): inputs probed,
 * device, precision and plan chosen, the driver run, the output written
 * and renamed into place, the report printed. XJ_OK, or the agreed
 * error in st (every rank the same code). */
int join_run(xj_job *job, xj_comm *c, int threads, xj_status *st);

/* Any command of the parsed job: gen, devices, inspect, or join_run's
 * (topk, matrix, range, plan). Collective. */
int join_command(xj_job *job, xj_comm *c, int threads, xj_status *st);

/* OpenMP threads of a rank by default: OMP_NUM_THREADS, else the cores
 * of its affinity mask, shared with the node's other ranks when the
 * rank is not bound. */
int join_threads(const xj_comm *c);

#endif
