/*
 * inround.h: the rules of a top-k round that starts from recorded k-lists
 * (resume.h's resume_inround). Pure: no MPI, no I/O, so the unit tests can
 * probe any shape and every rank derives the same answers.
 *
 * defines: inround_restores, inround_pieces, inround_piece,
 *          inround_piece_end
 *
 * A round's lists may start from a snapshot only when every query chunk
 * the round computes lies inside the snapshot's rows: then all of them
 * start from lists over the same base rows (the snapshot's `base`), each
 * rank streams only the other rows of its shard, and whatever the round
 * records later again holds one set of base rows for all its query rows.
 * Otherwise the round starts from nothing, as if there were no snapshot.
 *
 * A rank streams its shard [a, b) less the rows already folded in (skip)
 * in pieces of at most bc rows, in row order, a piece never crossing a
 * skipped span. After p pieces, every row of [a, inround_piece_end(p)) is
 * folded in, streamed or skipped, and the rest of the shard's rows are
 * folded in only if skipped.
 */
#ifndef XJ_INROUND_H
#define XJ_INROUND_H

#include <stdint.h>

#include "resume.h"

/* chunks[i] = [q0, q1): the query rows each grid row computes this round
 * (empty chunks are ignored). 1 when in is valid, some chunk is not empty
 * and every one lies inside one span of in->rows. */
int inround_restores(const resume_inround *in, const int64_t (*chunks)[2],
		     int nchunks);

/* Pieces of [a, b) less skip, bc rows at most each. */
int64_t inround_pieces(const xj_spans *skip, int64_t a, int64_t b,
		       int64_t bc);

/* Piece p's rows [*r0, *r0 + *rows); 0 rows past the last piece. */
void inround_piece(const xj_spans *skip, int64_t a, int64_t b, int64_t bc,
		   int64_t p, int64_t *r0, int64_t *rows);

/* The end of piece p - 1: a for p = 0, b from the last piece on. */
int64_t inround_piece_end(const xj_spans *skip, int64_t a, int64_t b,
			  int64_t bc, int64_t p);

#endif
