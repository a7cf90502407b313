/*
 * device.h: which backend every rank runs, and on which GPU.
 *
 * defines: xj_backend_kind, xj_device_choice, device_select,
 *          device_mem_fraction, device_budget_bytes, device_list,
 *          device_backend_config, device_plan, device_backend_start,
 *          device_transport_open, device_transport_is_device,
 *          device_transport_close
 *
 * Rules (--device, job.h):
 *   cpu    the CPU backend; GPUs are not probed.
 *   gpu    every rank takes a usable GPU, or the run fails with
 *          XJ_EXIT_RESOURCE naming the host and the reason.
 *   auto   as gpu where every rank has one. Where any rank has none, all
 *          ranks use the CPU, so that every rank merges over the same
 *          transport; rank 0 says why in one line (the choice's note).
 * A rank's GPU: local rank L (ranks sharing its host, comm.h) takes
 * visible device L % ndev in the CUDA runtime's numbering, which already
 * honours CUDA_VISIBLE_DEVICES and Slurm's per-task GPU binding. Ranks of
 * a node that land on one GPU (same PCI bus id) share it: --device gpu
 * needs --gpu-share for that, auto shares and notes it. Sharing ranks
 * split the GPU's memory fraction between them.
 *
 * The CUDA backend is loaded at run time (cuda_module.h): where the
 * driver, libxjoin_cuda.so or a CUDA library it needs is missing, the
 * rank's reason (info) says which, e.g. "cannot load the CUDA backend
 * (libcublas.so.13: cannot open shared object file: ...)", and the rules
 * above apply as for any rank without a GPU. A binary built without CUDA
 * (no XJOIN_HAVE_CUDA) reports "built without CUDA" as every rank's
 * reason.
 */
#ifndef XJ_DEVICE_H
#define XJ_DEVICE_H

#include <stdint.h>

#include "../../kernels/backend.h"
#include "../run/comm.h"
#include "../driver/driver.h"
#include "../../config/job.h"
#include "plan.h"
#include "../../config/status.h"

typedef enum xj_backend_kind {
	XJ_BACKEND_CPU = 0,
	XJ_BACKEND_CUDA,
} xj_backend_kind;

typedef struct xj_device_choice {
	xj_backend_kind kind;   /* agreed: the same on every rank */
	int device;             /* this rank's CUDA index, -1: none usable */
	int ndevices;           /* usable GPUs this rank sees */
	int sharing;            /* ranks of this node on this GPU (>= 1) */
	int node_gpus;          /* distinct GPUs the node's ranks use */
	int64_t free_bytes;     /* this GPU's free memory, -1: unknown */
	char info[256];         /* "[bus id] name, ..." or why no GPU */
	char note[1024];        /* one line for rank 0 to print, or "" */
	xj_precision precision; /* candidate GEMM, --precision resolved */
	char precision_why[96]; /* how it was resolved */
} xj_device_choice;

/* Collective over c->world. Probes, picks and agrees as above. On error
 * (XJ_EXIT_RESOURCE, agreed on every rank) *out still holds this rank's
 * own view, so 'xjoin devices' can list it. */
int device_select(const xj_job *job, const xj_comm *c, xj_device_choice *out,
		  xj_status *st);

/* The mem_fraction for backend_cuda_create: the GPU's share for one of
 * the ranks using it. */
double device_mem_fraction(const xj_job *job, const xj_device_choice *ch);

/* This rank's device memory budget in bytes, or INT64_MAX when the CPU
 * runs or the free memory is unknown (backend_cuda_create checks it). */
int64_t device_budget_bytes(const xj_job *job, const xj_device_choice *ch);

/* This rank's backend of the chosen kind for cfg (a GPU short of memory
 * retries with halved chunks, which cfg then holds). Not collective. */
int device_backend_create(const xj_job *job, const xj_comm *c,
			  const xj_device_choice *dev, xj_backend_cfg *cfg,
			  xj_backend **be, xj_status *st);

/* The CPU's GEMM libraries in a few words ("OpenBLAS 0.3.21 Cooperlake,
 * oneDNN 2.6.3 avx512_core_bf16"), and in warn a one-line warning when
 * OpenBLAS runs kernels below what this CPU has (AVX-512 present, an
 * AVX2 or older core chosen, e.g. by OPENBLAS_CORETYPE), else "". */
void device_cpu_gemm(char *line, size_t n, char *warn, size_t wn);

/* 'xjoin devices': select, then print one line per rank in rank order on
 * rank 0 (stdout), and the verdict. Collective. */
int device_list(const xj_job *job, const xj_comm *c, xj_status *st);

/* The backend configuration of the job; chunk sizes from p (NULL: 0). */
void device_backend_config(const xj_job *job, const plan *p, int threads,
			   xj_backend_cfg *cfg);

/* Plan with the chosen backend's work bytes in the memory formula. */
int device_plan(plan_in *pin, const xj_backend_cfg *cfg, int threads,
		const xj_device_choice *dev, plan *out, xj_status *st);

/*
 * Collective over c->world, after comm_grid: the transport of the top-k
 * merge over this rank's grid row (c->row). NCCL (device buffers, the
 * backend's topk_end_merged) when every rank runs the CUDA backend on a
 * GPU of its own, the row has more than one rank, the NCCL library loads
 * (nccl_transport.h) and XJ_NCCL=0 is not set; MPI otherwise. All ranks
 * agree: one rank that cannot use NCCL makes every rank use MPI, and rank
 * 0 says why in one line on stderr (nothing when Pc = 1 or on the CPU).
 * If NCCL fails to start on any rank, all fall back to MPI with a warning.
 * A NCCL wait that passes XJ_NCCL_TIMEOUT seconds (default 300) ends the
 * job with a message naming rank, host and call. Returns st->code.
 */
int device_transport_open(const xj_comm *c, const xj_device_choice *dev,
			  xj_transport *t, xj_status *st);

/* 1 when t moves device buffers: use be->topk_end_merged with it. */
int device_transport_is_device(const xj_transport *t);

/* Collective over the row when t is NCCL's; nothing for MPI's. */
void device_transport_close(xj_transport *t);

/* Collective: create every rank's backend (halving chunks on a GPU short
 * of memory, with a warning), then lower run->pl to the chunk sizes all
 * ranks could take, so rounds and exchanges match across ranks. */
int device_backend_start(xj_run *run, const xj_device_choice *dev,
			 int threads, xj_status *st);

#endif
