/*
 * gen.h: synthetic data for benchmarks (`xjoin gen`).
 *
 * defines: gen_run, gen_value
 *
 * Values depend only on (seed, dataset, row, column), never on the rank
 * count: a counter-based generator (splitmix64 of the coordinates) feeds
 * Box-Muller. With --clusters C, row r belongs to cluster hash(r) % C and
 * is its centre (N(0,1) per coordinate) plus N(0, 0.25^2) noise; without,
 * rows are N(0,1). /train gets --rows rows and /test --queries rows.
 */
#ifndef XJ_GEN_H
#define XJ_GEN_H

#include <stdint.h>

#include "../run/comm.h"
#include "../../config/job.h"

/* Value at (row, col) of dataset stream 0 (train) or 1 (test). */
float gen_value(const xj_job *job, int stream, int64_t row, int64_t col);

/* Collective: write the file named by job->output. */
int gen_run(const xj_job *job, xj_comm *c, xj_status *st);

#endif
