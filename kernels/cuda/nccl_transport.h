/*
 * nccl_transport.h: an xj_transport (kernels/exchange.h) over NCCL, for
 * k-lists that live in device memory.
 *
 * defines: nccl_transport_available, nccl_transport_open,
 *          nccl_transport_is, nccl_transport_on_fatal,
 *          nccl_transport_abandon, nccl_transport_abort,
 *          nccl_transport_close
 *
 * Plain C, like backend_cuda.h. One communicator per grid row, started
 * through the row's xj_group (which app/ makes from MPI): rank 0 of the
 * row creates the ncclUniqueId and the group's bcast0 carries its bytes
 * to the others; this file calls no MPI. The alltoallv is one NCCL group
 * of ncclSend/ncclRecv on device buffers (counts and displacements in
 * elements, as exchange.h's alltoallv), on the transport's own stream; it
 * returns when the exchange is complete, so the caller may read the
 * received lists on any stream and reuse the sent ones.
 *
 * No wait can hang: the communicator is non-blocking (config.blocking =
 * 0), and its initialisation, every exchange and its finalisation are
 * polled (ncclCommGetAsyncError, cudaStreamQuery) against a deadline of
 * timeout_s seconds. On a timeout or an NCCL error the communicator is
 * aborted (ncclCommAbort), the status names the row rank, world rank,
 * host and call (timeout: XJ_EXIT_RESOURCE, error: XJ_EXIT_INTERNAL), and
 * the fatal handler, if one is set, ends the job: a rank of the row may
 * be stuck, and the caller's next collective would wait for it forever.
 *
 * NCCL is loaded at run time (dlopen of $XJ_NCCL_LIBRARY, else
 * libnccl.so.2, version 2.18 or newer), so the program starts and runs
 * the MPI transport where NCCL is missing. NCCL refuses two ranks of one
 * communicator on the same GPU; the caller (app/plan/device.c) only opens it
 * when every rank has a GPU of its own.
 */
#ifndef XJ_NCCL_TRANSPORT_H
#define XJ_NCCL_TRANSPORT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "../exchange.h"

/* 1 when the NCCL library loads and is recent enough; else 0 and the
 * reason in why. Loads it once per process. */
int nccl_transport_available(char *why, size_t why_size);

/* Collective over the group: a transport over its ranks (in their group
 * order) on CUDA device `device`. On failure nothing is left open and t
 * is not a NCCL transport. */
int nccl_transport_open(const xj_group *g, int device, double timeout_s,
			xj_transport *t, xj_status *st);

/* 1 when t was opened by nccl_transport_open (device buffers). */
int nccl_transport_is(const xj_transport *t);

/* fatal(code, message) is called after the communicator was aborted on a
 * timeout or an error, and by nccl_transport_abandon; it should end the
 * job (app/plan/device.c passes one that calls xj_abort). */
typedef void (*nccl_fatal_fn)(int code, const char *msg);
void nccl_transport_on_fatal(xj_transport *t, nccl_fatal_fn fatal);

/* This rank cannot take part in the next exchange (st says why): its
 * peers would wait for it until the timeout, so the fatal handler is
 * called with st's message. Returns st->code when there is none. */
int nccl_transport_abandon(const xj_transport *t, xj_status *st);

/* Abort the communicator (not collective; pending exchanges fail). */
void nccl_transport_abort(xj_transport *t);

/* Collective: finalise (with the deadline; aborts on timeout) and free. */
void nccl_transport_close(xj_transport *t);

#ifdef __cplusplus
}
#endif

#endif
