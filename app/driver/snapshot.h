/*
 * snapshot.h: the running k-lists of a top-k round in the progress record
 * (resume.h's [inround]) and on disk (io/listfile.h).
 *
 * defines: snapshot_check, snapshot_read, snapshot_save, snapshot_remove
 *
 * A snapshot holds, for every query row of a round in progress, its exact
 * top k over the base rows folded in so far, merged over the grid row: the
 * lists a finished round writes, over fewer base rows. So it does not
 * depend on the grid, the chunk sizes or the backend, and a later run
 * with other ones continues from it (docs/design.md). It goes into the
 * file the saved record does not name; the output is flushed; then rank
 * 0 replaces the record, naming the new file. A kill at any moment leaves
 * a record whose file is whole.
 *
 * All but snapshot_remove are COLLECTIVE over the world.
 */
#ifndef XJ_SNAPSHOT_H
#define XJ_SNAPSHOT_H

#include "driver.h"

/* A resumed run, before its first round: does the file hold the lists the
 * record describes (header, size and hash)? If not, rank 0 says why and
 * the snapshot is forgotten: its rows start over, which is never wrong.
 * key and idx hold cap lists, read through in slabs. */
void snapshot_check(xj_run *run, float *key, int64_t *idx, int64_t cap);

/* The recorded lists of query rows [q0, q0 + n) (inside one span of the
 * snapshot's rows; n may be 0) into key and idx. XJ_EXIT_INPUT when the
 * file cannot be read. */
int snapshot_read(xj_run *run, int64_t q0, int64_t n, float *key,
		  int64_t *idx, xj_status *st);

/* Record a snapshot: rows (the round's query rows) and base (the base
 * rows folded into each) are taken over, emptied; this rank's n lists
 * are those of query rows [q0, q0 + n). Writes the lists file, then saves
 * the record (driver_checkpoint). */
int snapshot_save(xj_run *run, xj_spans *rows, xj_spans *base, int64_t q0,
		  int64_t n, const float *key, const int64_t *idx,
		  xj_status *st);

/* Remove both lists files of the output (rank 0's business). */
void snapshot_remove(const xj_progress *p);

#endif
