/*
 * comm.h: ranks, their grid, error agreement, and the top-k merge.
 *
 * app/run/ owns a run's life across ranks and faults: communicators and
 * error agreement (comm.c), heartbeats that end a job which lost a rank
 * (watch.c), a last word when a library crashes (guard.c), the progress
 * record and --resume (resume.c) and the rules of a round restored from
 * recorded lists (inround.c).
 *
 * defines: xj_comm, comm_init, comm_grid, comm_release, comm_agree,
 *          comm_agree_errors,
 *          comm_mpi_transport, comm_row_group, MPI_CHECK, xj_abort,
 *          xj_log0
 *
 * The top-k merge of a grid row (kernels/exchange.h) runs over a
 * transport; this file provides the MPI one (host buffers) and the group
 * through which a device transport (NCCL) starts up, so that kernels
 * never call MPI themselves.
 */
#ifndef XJ_COMM_H
#define XJ_COMM_H

#include <mpi.h>
#include <setjmp.h>
#include <stdint.h>

#include "../../config/status.h"
#include "../../kernels/exchange.h"

typedef struct xj_comm {
	MPI_Comm world;
	int rank, nranks;
	MPI_Comm node;          /* ranks sharing this host's memory */
	int local_rank, local_size;
	MPI_Comm row;           /* ranks of one grid row (same query block) */
	int row_rank, row_size;
	char host[256];
} xj_comm;

/* Fatal, unrecoverable: print and MPI_Abort(world, code); in library
 * mode (comm_library_mode) a longjmp to jb with the message kept for
 * comm_library_status instead. */
_Noreturn void xj_abort(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* In-process runs (app/api, one rank): xj_abort jumps to jb (NULL:
 * aborts again), and the status it left. */
void comm_library_mode(jmp_buf *jb);
void comm_library_status(xj_status *st);

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

/* printf on rank 0 only (stdout), flushed; nothing when quiet. */
void xj_log0(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* --quiet: xj_log0 and the notes of comm_is_quiet's callers say nothing
 * (warnings and errors still go to stderr). */
void comm_quiet(int q);
int comm_is_quiet(void);

/* Before MPI_Init: Open MPI's MPI-IO through ROMIO, not OMPIO
 * (OMPI_MCA_io=^ompio, unless the user set OMPI_MCA_io). On a file
 * system that fills mid-run (2026-11-27, tests/cluster/soak.py and a
 * 3-rank matrix on a small tmpfs), OMPIO in Open MPI 4.1 hung the job:
 * its collective writes (fcoll vulcan) reported "No space left on
 * device" but returned success, so the job went on to a collective
 * flush that one rank left early; and its shared file pointer lock
 * file, made at every MPI_File_open, hung the open across nodes
 * (mismatched barriers). ROMIO returned the error to every rank (exit 4,
 * nothing left) or wrote the whole result; it makes no file at open. */
void comm_io_defaults(void);

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
/* Forget a caught signal (an in-process caller's next run). */
void comm_signals_reset(void);

/* Collective over world: every rank learns whether any rank failed. On
 * failure all ranks return the same code and the message of the lowest
 * failing rank (prefixed with its rank). Call it before every collective
 * phase so one rank's error never leaves the others waiting. A caught
 * signal counts as an error of this rank. */
int comm_agree(xj_comm *c, xj_status *st);
/* As comm_agree, but a caught signal is left to the next comm_agree: for
 * steps that must finish once begun, such as recording progress. */
int comm_agree_errors(xj_comm *c, xj_status *st);

/* MPI transport over *comm (host buffers); *comm must outlive t. */
void comm_mpi_transport(const MPI_Comm *comm, xj_transport *t);

/* The group of this rank's grid row, for a transport's start-up (the
 * NCCL id): its bcast0 is MPI_Bcast over c->row; c must outlive g. */
void comm_row_group(const xj_comm *c, xj_group *g);

#endif
