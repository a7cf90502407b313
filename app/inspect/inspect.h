/*
 * inspect.h: `xjoin inspect FILE`: what an output holds, and whether its
 * rows keep the output's rules.
 *
 * app/inspect/ owns `xjoin inspect`: reading a file (inspect_read.c),
 * checking every row (inspect_check.c, inspect_range.c), printing
 * (inspect_print.c, inspect_result.c) and unfinished runs
 * (inspect_unfinished.c); inspect_int.h lists what the parts share.
 *
 * defines: inspect_opts, inspect_file, inspect_run, inspect_json_str
 *
 * FILE is one of:
 *   a result (root attributes schema_version and command = topk|matrix):
 *     its attributes, its datasets, the first rows, and a check of every
 *     row read in bounded slabs: best first (ascending distances,
 *     descending ip), -1 padding only at the end and with the metric's
 *     worst value, base indices in range, no (i, i) under self exclusion,
 *     nothing past the threshold, no NaN;
 *   an unfinished run: FILE absent and FILE.partial and/or FILE.progress
 *     present (or FILE itself names one of them): the progress record and
 *     how to continue;
 *   another HDF5 file (an input, `xjoin gen` data): its datasets;
 *   missing or unreadable: XJ_EXIT_INPUT naming the file.
 * A result whose rows or shapes break the rules is described in full and
 * then fails with XJ_EXIT_INPUT naming the first row at fault.
 */
#ifndef XJ_INSPECT_H
#define XJ_INSPECT_H

#include <stdint.h>
#include <stdio.h>

#include "../run/comm.h"
#include "../../config/job.h"
#include "../../config/status.h"

typedef struct inspect_opts {
	int64_t rows;         /* query rows shown, >= 0 */
	int json;             /* one JSON object instead of tables */
	int64_t slab_bytes;   /* read buffer of the row check; 0: 16 MiB */
} inspect_opts;

/* Describe path on out. Local: only the calling process reads. Returns
 * XJ_OK, or the code and message of the first problem (after the
 * description, which is complete JSON with o->json). */
int inspect_file(const char *path, const inspect_opts *o, FILE *out,
		 xj_status *st);

/* Collective over c->world: rank 0 inspects job->inspect_file on stdout,
 * the others wait; every rank returns rank 0's status. */
int inspect_run(const xj_job *job, const xj_comm *c, xj_status *st);

/* s as a JSON string, quotes and escapes included (inspect_print.c;
 * the run report's --report-json writes its texts with it too). */
void inspect_json_str(FILE *f, const char *s);

#endif
