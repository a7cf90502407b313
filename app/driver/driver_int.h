/*
 * driver_int.h: what the parts of the driver share (private to
 * the files of app/driver/; the public API is driver.h).
 *
 * defines: driver_alloc, driver_guard_input,
 *          driver_input_rows, driver_open_inputs, driver_rows_to_do,
 *          driver_round_done
 *
 * The parts:
 *   driver.c        validation, progress records, the full matrix
 *   driver_topk.c   the top-k rounds
 */
#ifndef XJ_DRIVER_INT_H
#define XJ_DRIVER_INT_H

#include "driver.h"

/* malloc of count (at least 1) items, or NULL with XJ_EXIT_RESOURCE. */
void *driver_alloc(size_t count, size_t size, const char *what,
		   xj_status *st);

/* Until guard_end, a crash inside HDF5 on this input ends the rank with
 * a message (guard.h); the partial output goes too unless it holds an
 * earlier run's work. */
void driver_guard_input(const xj_run *run, const h5in_info *info);

/* Rows [row0, row0+rows) of an input: a view into the resident copy, or
 * read (and checked) into buf. */
const float *driver_input_rows(xj_run *run, h5in *in, int base,
			       int64_t row0, int64_t rows, float *buf,
			       xj_status *st);

/* Open both inputs for the compute pass (nothing when resident). */
int driver_open_inputs(xj_run *run, h5in **qin, h5in **bin, xj_status *st);

/* A query chunk whose rows an earlier run finished is skipped: 0 rows,
 * else qrows. */
int64_t driver_rows_to_do(const xj_run *run, int64_t q0, int64_t qrows);

/* Query round r of every grid row is written: its rows are final. Every
 * rank adds the same spans, so every rank holds the same record. */
int driver_round_done(xj_run *run, int64_t r, xj_status *st);
/* Rows [a, b) are written and final (every rank calls it alike). */
int driver_rows_final(xj_run *run, int64_t a, int64_t b, xj_status *st);

/* The matrix of a set with itself takes the triangle (driver_matrix.c);
 * then this rank's blocks still to compute. */
int driver_matrix_sym(const xj_run *run);
int64_t driver_matrix_sym_blocks(const xj_run *run);

#endif
