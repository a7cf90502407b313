/* exchange.c: the top-k reduce-scatter over any transport (exchange.h). */
#include "exchange.h"

#include <stdlib.h>

#include "../config/split.h"
#include "topk.h"

void exchange_topk_counts(int64_t rows, int64_t k, int p, int me,
			  int64_t *cnt)
{
	int64_t my0, myrows;

	split_block(rows, p, me, &my0, &myrows);
	for (int j = 0; j < p; j++) {
		int64_t r0, nr;

		split_block(rows, p, j, &r0, &nr);
		cnt[j] = nr * k;                    /* send count */
		cnt[p + j] = r0 * k;                /* send displacement */
		cnt[2 * p + j] = myrows * k;        /* receive count */
		cnt[3 * p + j] = j * myrows * k;    /* receive displacement */
	}
}

void exchange_topk_bytes(int64_t rows, int64_t k, int p, int me,
			 int64_t *sent, int64_t *received)
{
	const int64_t entry = (int64_t)(sizeof(float) + sizeof(int64_t));
	int64_t r0, nr, my0, myrows;

	*sent = *received = 0;
	split_block(rows, p, me, &my0, &myrows);
	for (int j = 0; j < p; j++) {
		if (j == me)
			continue;
		split_block(rows, p, j, &r0, &nr);
		*sent += nr * k * entry;
		*received += myrows * k * entry;
	}
}

int exchange_topk_reduce_scatter(const xj_transport *t, int64_t rows,
				 int64_t k, const float *key,
				 const int64_t *idx, float *out_key,
				 int64_t *out_idx, int64_t *out_row0,
				 int64_t *out_rows, xj_status *st)
{
	int p = t->size, me = t->rank;
	int64_t *cnt = calloc(4 * (size_t)p, sizeof(int64_t));
	int64_t my0, myrows, nrecv;
	float *rkey = NULL;
	int64_t *ridx = NULL;
	const float **lk = NULL;
	const int64_t **li = NULL;
	int rc = XJ_OK;

	split_block(rows, p, me, &my0, &myrows);
	*out_row0 = my0;
	*out_rows = myrows;
	if (!cnt)
		return xj_fail(st, XJ_EXIT_RESOURCE, "out of memory (merge)");
	exchange_topk_counts(rows, k, p, me, cnt);
	nrecv = (int64_t)p * myrows * k;
	rkey = malloc((size_t)(nrecv ? nrecv : 1) * sizeof(float));
	ridx = malloc((size_t)(nrecv ? nrecv : 1) * sizeof(int64_t));
	lk = malloc((size_t)p * sizeof(*lk));
	li = malloc((size_t)p * sizeof(*li));
	if (!rkey || !ridx || !lk || !li) {
		rc = xj_fail(st, XJ_EXIT_RESOURCE, "out of memory (merge)");
		goto out;
	}
	rc = t->alltoallv(t, XJ_T_F32, key, cnt, cnt + p, rkey, cnt + 2 * p,
			  cnt + 3 * p, st);
	if (!rc)
		rc = t->alltoallv(t, XJ_T_I64, idx, cnt, cnt + p, ridx,
				  cnt + 2 * p, cnt + 3 * p, st);
	if (rc)
		goto out;
	for (int64_t r = 0; r < myrows; r++) {
		for (int j = 0; j < p; j++) {
			lk[j] = rkey + (j * myrows + r) * k;
			li[j] = ridx + (j * myrows + r) * k;
		}
		topk_merge(p, lk, li, k, out_key + r * k, out_idx + r * k);
	}
out:
	free(cnt);
	free(rkey);
	free(ridx);
	free(lk);
	free(li);
	return rc;
}
