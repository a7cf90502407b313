/*
 * module.h: the CUDA backend as a loadable module (libxjoin_cuda.so), the
 * table of functions xjoin calls through after dlopen (app/plan/cuda_module.c).
 *
 * defines: XJC_MODULE_ABI, XJC_MODULE_SYMBOL, xjc_module, xjc_module_get
 *
 * Plain C, usable from C and C++. The module exports one symbol,
 * xjc_module_get; everything else of it is local (module.map). The xjcore
 * functions it calls (xj_fail, metric_*, exchange_*, topk_*) stay undefined in
 * it and bind to the executable's, which exports them: one copy of each in
 * the process.
 *
 * Bump XJC_MODULE_ABI whenever this table, or a type it passes
 * (xj_backend, xj_backend_cfg, xj_status, xj_transport, plan), changes: the
 * loader refuses a module built with another number.
 */
#ifndef XJ_CUDA_MODULE_H
#define XJ_CUDA_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_transport.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "../backend.h"

#define XJC_MODULE_ABI 5   /* 3: xj_backend has matrix_start, matrix_wait,
				    * block_alloc, block_free, matrix_async;
				    * 4: nccl_open takes an xj_group, not an
				    * MPI communicator; 5: xj_rows.tag */
#define XJC_MODULE_SYMBOL "xjc_module_get"

/* The functions of backend_cuda.h and nccl_transport.h app/plan/device.c
 * uses, with the same arguments and meaning. */
struct xjc_module {
	int abi;                /* XJC_MODULE_ABI of the module's build */
	int (*probe)(int *ndevices, char *reason, size_t reason_size);
	int (*device_info)(int device, char *line, size_t size);
	int (*create)(const xj_backend_cfg *cfg, int device,
		      double mem_fraction, xj_backend **out, xj_status *st);
	int64_t (*work_bytes)(const xj_backend_cfg *cfg, int64_t qrows,
			      int64_t brows);
	int64_t (*pinned_bytes)(const xj_backend_cfg *cfg, int64_t brows);
	int64_t (*merge_bytes)(const xj_backend_cfg *cfg, int64_t qrows,
			       int pc);
	int (*nccl_available)(char *why, size_t why_size);
	int (*nccl_open)(const xj_group *g, int device, double timeout_s,
			 xj_transport *t, xj_status *st);
	int (*nccl_is)(const xj_transport *t);
	void (*nccl_on_fatal)(xj_transport *t, nccl_fatal_fn fatal);
	void (*nccl_abort)(xj_transport *t);
	void (*nccl_close)(xj_transport *t);
};

/* The module's table; static, never NULL. */
const struct xjc_module *xjc_module_get(void);
typedef const struct xjc_module *(*xjc_module_get_fn)(void);

#ifdef __cplusplus
}
#endif

#endif
