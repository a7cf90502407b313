/*
 * exchange.h: how the ranks of one grid row exchange k-lists, and the
 * top-k reduce-scatter built on it. No MPI and no device here: app/
 * passes the transports in.
 *
 * defines: xj_elem, xj_transport, xj_group, exchange_topk_counts,
 *          exchange_topk_bytes, exchange_topk_reduce_scatter
 *
 * Ranks of one grid row each hold k-lists for the same query rows against
 * different base shards. The rows are split into p balanced parts
 * (split_block); rank j receives part j from every rank of its row (one
 * all-to-all) and merges the p lists of each row (topk_merge). Volume per
 * rank: (p-1)/p * rows * k * 12 bytes.
 *
 * The algorithm is separate from the transport that moves the lists:
 * app/run/comm.c provides one over MPI (host buffers), kernels/cuda one over
 * NCCL (device buffers). A transport that needs a start-up exchange of its
 * own (NCCL's unique id) gets it through an xj_group, which app/ also
 * provides, so that kernels never call MPI.
 */
#ifndef XJ_EXCHANGE_H
#define XJ_EXCHANGE_H

#include <stdint.h>

#include "../config/status.h"

/* Moves equal-typed elements between the ranks of one group. */
typedef enum { XJ_T_F32, XJ_T_I64 } xj_elem;
typedef struct xj_transport {
	const char *name;
	int size, rank;         /* the group's size, this rank in it */
	/* Collective: counts and displacements in elements, per peer. */
	int (*alltoallv)(const struct xj_transport *t, xj_elem type,
			 const void *send, const int64_t *scount,
			 const int64_t *sdispl, void *recv,
			 const int64_t *rcount, const int64_t *rdispl,
			 xj_status *st);
	void *ctx;              /* the transport's own state */
} xj_transport;

/* A group of ranks as a transport's start-up sees it. */
typedef struct xj_group {
	int size, rank;         /* the group's size, this rank in it */
	int world_rank;         /* for messages */
	const char *host;       /* for messages */
	/* Collective over the group: bytes of group rank 0's buf land in
	 * every rank's buf. */
	int (*bcast0)(const struct xj_group *g, void *buf, int64_t bytes,
		      xj_status *st);
	void *ctx;
} xj_group;

/* The all-to-all of exchange_topk_reduce_scatter as rank me of p sees
 * it, in list entries: cnt[j] and cnt[p + j] the count and displacement
 * it sends to rank j, cnt[2p + j] and cnt[3p + j] those it receives from
 * j (rank j's lists of this rank's rows land in rank order). cnt holds
 * 4p. Its rows are split_block(rows, p, me). Shared by every transport. */
void exchange_topk_counts(int64_t rows, int64_t k, int p, int me,
			  int64_t *cnt);

/* Bytes rank me of p sends to and receives from the other ranks in one
 * exchange_topk_reduce_scatter of rows x k lists (12 bytes an entry: a
 * float key and an int64 index; what it keeps for itself is not
 * counted). */
void exchange_topk_bytes(int64_t rows, int64_t k, int p, int me,
			 int64_t *sent, int64_t *received);

/* Reduce-scatter of k-lists by query. In: rows x k lists (sorted, padded)
 * of this rank. Out: the merged lists of this rank's part of the rows,
 * *out_row0 (offset inside the rows) and *out_rows; out_key/out_idx hold
 * at least (rows / size + 1) * k entries. Collective over t, whose buffers
 * are host memory. */
int exchange_topk_reduce_scatter(const xj_transport *t, int64_t rows,
				 int64_t k, const float *key,
				 const int64_t *idx, float *out_key,
				 int64_t *out_idx, int64_t *out_row0,
				 int64_t *out_rows, xj_status *st);

#endif
