/*
 * comm.h: ranks, their grid, error agreement, and the top-k merge.
 *
 * defines: xj_comm, comm_init, comm_grid, comm_release, comm_agree,
 *          xj_transport, comm_mpi_transport, comm_topk_counts,
 *          comm_topk_reduce_scatter, MPI_CHECK, xj_abort, xj_log0
 *
 * The merge algorithm (comm_topk_reduce_scatter) is separate from the
 * transport that moves the lists: ranks of one grid row each hold k-lists
 * for the same query rows against different base shards; the rows are
 * split into Pc balanced parts, rank j receives part j from every rank of
 * its row (one all-to-all) and merges the Pc lists of each row. Volume per
 * rank: (Pc-1)/Pc * rows * k * 12 bytes. The MPI transport moves host
 * buffers; a NCCL transport for device buffers plugs into xj_transport.
 */
#ifndef XJ_COMM_H
#define XJ_COMM_H

#include <mpi.h>
#include <stdint.h>

#include "status.h"

typedef struct xj_comm {
	MPI_Comm world;
	int rank, nranks;
	MPI_Comm node;          /* ranks sharing this host's memory */
	int local_rank, local_size;
	MPI_Comm row;           /* ranks of one grid row (same query block) */
	int row_rank, row_size;
	char host[256];
} xj_comm;

/* Fatal, unrecoverable: print and MPI_Abort(world, code). */
_Noreturn void xj_abort(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Check an MPI call in app code: on failure print host, rank, file:line
 * and MPI's own error text, then abort. */
#define MPI_CHECK(call)                                                       \
	do {                                                                  \
		int mpi_rc_ = (call);                                         \
		if (mpi_rc_ != MPI_SUCCESS)                                   \
			comm_mpi_fatal(mpi_rc_, #call, __FILE__, __LINE__);    \
	} while (0)
_Noreturn void comm_mpi_fatal(int rc, const char *what, const char *file,
			      int line);

/* printf on rank 0 only (stdout), flushed. */
void xj_log0(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

int comm_init(xj_comm *c, xj_status *st);
/* Split world into grid rows of pc ranks (rank = row * pc + col). */
int comm_grid(xj_comm *c, int pc, xj_status *st);
void comm_release(xj_comm *c);

/* Catch SIGTERM, SIGINT, SIGUSR1 and SIGUSR2 (batch systems' "stop soon"):
 * the handler only records the signal; comm_agree turns it into an
 * XJ_EXIT_INTERRUPTED status at the next chunk boundary. */
void comm_watch_signals(void);
/* The signal caught so far, or 0. */
int comm_interrupted(void);

/* Collective over world: every rank learns whether any rank failed. On
 * failure all ranks return the same code and the message of the lowest
 * failing rank (prefixed with its rank). Call it before every collective
 * phase so one rank's error never leaves the others waiting. A caught
 * signal counts as an error of this rank. */
int comm_agree(xj_comm *c, xj_status *st);

/* Moves equal-typed elements between the ranks of one communicator. */
typedef enum { XJ_T_F32, XJ_T_I64 } xj_elem;
typedef struct xj_transport {
	const char *name;
	int size, rank;
	int (*alltoallv)(const struct xj_transport *t, xj_elem type,
			 const void *send, const int64_t *scount,
			 const int64_t *sdispl, void *recv,
			 const int64_t *rcount, const int64_t *rdispl,
			 xj_status *st);
	MPI_Comm mpi_comm;      /* MPI transport */
	void *ctx;              /* other transports' state */
} xj_transport;

/* MPI transport over comm (host buffers). */
void comm_mpi_transport(MPI_Comm comm, xj_transport *t);

/* The all-to-all of comm_topk_reduce_scatter as rank me of p sees it, in
 * list entries: cnt[j] and cnt[p + j] the count and displacement it sends
 * to rank j, cnt[2p + j] and cnt[3p + j] those it receives from j (rank
 * j's lists of this rank's rows land in rank order). cnt holds 4p.
 * Its rows are plan_block(rows, p, me). Shared by every transport. */
void comm_topk_counts(int64_t rows, int64_t k, int p, int me, int64_t *cnt);

/* Reduce-scatter of k-lists by query. In: rows x k lists (sorted, padded)
 * of this rank. Out: the merged lists of this rank's part of the rows,
 * *out_row0 (offset inside the rows) and *out_rows; out_key/out_idx hold
 * at least (rows / size + 1) * k entries. Collective over t. */
int comm_topk_reduce_scatter(const xj_transport *t, int64_t rows, int64_t k,
			     const float *key, const int64_t *idx,
			     float *out_key, int64_t *out_idx,
			     int64_t *out_row0, int64_t *out_rows,
			     xj_status *st);

#endif
