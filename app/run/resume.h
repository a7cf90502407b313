/*
 * resume.h: the progress record that lets an interrupted run continue.
 *
 * defines: xj_spans, resume_input, resume_inround, resume_record,
 *          resume_path, resume_lists_path, spans_add, spans_covers,
 *          spans_rows, spans_rows_before, spans_copy, spans_free,
 *          resume_hash_rows, resume_hash_lists, resume_fill,
 *          resume_inround_clear, resume_inround_done, resume_save,
 *          resume_load, resume_check_job, resume_check_data
 *
 * A run writes its rows into OUT.partial; its record, OUT.progress, is a
 * small INI file (read back with libinih) that says which query rows of
 * OUT.partial are final. Rank 0 replaces it atomically (temporary file,
 * fsync, rename) only after every rank's writes of those rows were flushed
 * (h5out_flush), so the record never claims a row that is not on disk. A
 * kill at any moment leaves either the old record or the new one.
 *
 * The record holds what decides the result, so that --resume can refuse a
 * different job and say what differs:
 *   [job]       command, metric, k, threshold, self
 *   [query] and [base]   file (real path), dataset, shape, stored type, and
 *               a fingerprint of the values: the sum over rows (mod 2^64)
 *               of a 64-bit hash of (row index, the row as float32). Each
 *               row is hashed once, by whichever rank validates it, so the
 *               sum does not depend on rank count or chunk sizes.
 *   [progress]  the final query rows as sorted disjoint spans [a, b)
 *   [inround]   (top-k, when a round was in progress) which file holds the
 *               running k-lists of that round's query rows, those rows,
 *               the base rows folded into every one of them (global
 *               spans), and a hash of the lists
 * The lists live beside the record, in OUT.progress.0 or OUT.progress.1
 * (io/listfile.h): a snapshot goes into the file the saved record does
 * not name, and only then is the record replaced, so a kill while the
 * lists are written leaves the old record naming the old, whole file.
 * What it does not hold (ranks, chunk sizes, memory, device, threads) may
 * change between runs, since results do not depend on it: a resumed run
 * recomputes every query chunk not wholly inside a span, and a recomputed
 * row has the same bits as the one already written.
 */
#ifndef XJ_RESUME_H
#define XJ_RESUME_H

#include <stddef.h>
#include <stdint.h>

#include "../../io/h5in.h"
#include "../../config/job.h"
#include "../../config/status.h"

/* Sorted, disjoint, non-adjacent spans [s[i][0], s[i][1]) of rows. */
typedef struct xj_spans {
	int64_t n, cap;
	int64_t (*s)[2];
} xj_spans;

/* Add [a, b), merging with neighbours. XJ_EXIT_RESOURCE when out of
 * memory. */
int spans_add(xj_spans *sp, int64_t a, int64_t b, xj_status *st);
/* 1 when [a, b) lies inside one span. */
int spans_covers(const xj_spans *sp, int64_t a, int64_t b);
/* Rows in all spans. */
int64_t spans_rows(const xj_spans *sp);
/* Rows of the spans before row r: r's place when the spans' rows are laid
 * out one after another. */
int64_t spans_rows_before(const xj_spans *sp, int64_t r);
/* dst (freed first) becomes a copy of src. */
int spans_copy(xj_spans *dst, const xj_spans *src, xj_status *st);
void spans_free(xj_spans *sp);

typedef struct resume_input {
	char file[XJ_PATH_MAX];       /* real path */
	char dset[XJ_NAME_MAX];
	char type[32];
	int64_t rows, cols;
	uint64_t fingerprint;
} resume_input;

/* The running k-lists of a round in progress. Every listed query row's
 * list is the exact top k over the base rows of `base`, so a later run may
 * stream only the other base rows and merge (docs/design.md). */
typedef struct resume_inround {
	int valid;                    /* 0: no round in progress recorded */
	int slot;                     /* the lists are in OUT.progress.<slot> */
	int64_t generation;           /* counts snapshots; so does the file */
	xj_spans rows;                /* query rows held, in the file's order */
	xj_spans base;                /* base rows folded into each of them */
	uint64_t hash;                /* resume_hash_lists over the file */
} resume_inround;

typedef struct resume_record {
	char command[16];
	char metric[16];
	int64_t k;
	int has_threshold;
	double threshold;
	int self;
	resume_input q, b;
	int64_t runs;                 /* runs that worked on this output */
	xj_spans done;
	resume_inround inround;
} resume_record;

/* "<output>.progress" into buf. */
void resume_path(const char *output, char *buf, size_t size);
/* "<record>.<slot>", the file of a snapshot's lists, into buf. */
void resume_lists_path(const char *record, int slot, char *buf,
		       size_t size);

/* Sum of the hashes of rows [row0, row0 + rows) of x (rows x d). */
uint64_t resume_hash_rows(const float *x, int64_t rows, int64_t d,
			  int64_t row0);

/* Sum of the hashes of k-lists [0, rows) at places [at, at + rows) of a
 * lists file: the sum over places does not depend on who hashes which. */
uint64_t resume_hash_lists(const float *key, const int64_t *idx,
			   int64_t rows, int64_t k, int64_t at);

/* Forget a round in progress (frees its spans). */
void resume_inround_clear(resume_inround *in);
/* 1 when every query row the snapshot holds is done: it is of no use. */
int resume_inround_done(const resume_inround *in, const xj_spans *done);

/* The record of this job (fingerprints and spans left empty). */
int resume_fill(resume_record *r, const xj_job *job, const h5in_info *qi,
		const h5in_info *bi, xj_status *st);

/* Write r to path atomically. XJ_EXIT_RESOURCE naming the path. */
int resume_save(const char *path, const resume_record *r, xj_status *st);

/* Read path into r (spans allocated: resume_free when done).
 * A missing file is XJ_EXIT_USAGE; a malformed one XJ_EXIT_INPUT with
 * FILE:LINE. */
int resume_load(const char *path, resume_record *r, xj_status *st);

/* Free the spans of r. */
void resume_free(resume_record *r);

/* Does the job recorded in old match now? XJ_EXIT_USAGE naming the first
 * difference (option or input). */
int resume_check_job(const resume_record *old, const resume_record *now,
		     xj_status *st);
/* Do the inputs' values match? XJ_EXIT_INPUT naming the input. */
int resume_check_data(const resume_record *old, const resume_record *now,
		      xj_status *st);

#endif
