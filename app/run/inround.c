/* inround.c: a round that starts from recorded k-lists (inround.h). */
#include "inround.h"

int inround_restores(const resume_inround *in, const int64_t (*chunks)[2],
		     int nchunks)
{
	int any = 0;

	if (!in->valid)
		return 0;
	for (int i = 0; i < nchunks; i++) {
		if (chunks[i][0] >= chunks[i][1])
			continue;
		if (!spans_covers(&in->rows, chunks[i][0], chunks[i][1]))
			return 0;
		any = 1;
	}
	return any;
}

/*
 * Walk the gaps of [a, b) between skipped spans, in order, cutting each
 * into pieces of bc rows. Stops at piece p: its rows in *r0, *rows (0 rows
 * when there is no piece p) and returns the pieces walked.
 */
static int64_t walk(const xj_spans *skip, int64_t a, int64_t b, int64_t bc,
		    int64_t p, int64_t *r0, int64_t *rows)
{
	int64_t cur = a, seen = 0;

	*r0 = b;
	*rows = 0;
	for (int64_t i = 0; i <= skip->n && cur < b; i++) {
		int64_t g1 = i < skip->n && skip->s[i][0] < b ?
			     skip->s[i][0] : b;

		if (i < skip->n && skip->s[i][1] <= cur)
			continue;
		if (g1 > cur) {
			int64_t n = (g1 - cur + bc - 1) / bc;

			if (p >= seen && p < seen + n) {
				*r0 = cur + (p - seen) * bc;
				*rows = g1 - *r0 < bc ? g1 - *r0 : bc;
				return p + 1;
			}
			seen += n;
		}
		if (i < skip->n && skip->s[i][1] > cur)
			cur = skip->s[i][1];
	}
	return seen;
}

int64_t inround_pieces(const xj_spans *skip, int64_t a, int64_t b,
		       int64_t bc)
{
	int64_t r0, rows;

	return walk(skip, a, b, bc, INT64_MAX, &r0, &rows);
}

void inround_piece(const xj_spans *skip, int64_t a, int64_t b, int64_t bc,
		   int64_t p, int64_t *r0, int64_t *rows)
{
	walk(skip, a, b, bc, p, r0, rows);
}

int64_t inround_piece_end(const xj_spans *skip, int64_t a, int64_t b,
			  int64_t bc, int64_t p)
{
	int64_t r0, rows;

	if (p <= 0)
		return a;
	walk(skip, a, b, bc, p, &r0, &rows);
	if (!rows)
		return b;       /* every piece streamed */
	walk(skip, a, b, bc, p - 1, &r0, &rows);
	return r0 + rows;
}
