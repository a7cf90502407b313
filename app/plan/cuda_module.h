/*
 * cuda_module.h: the CUDA backend, loaded at run time.
 *
 * defines: cuda_module_load, cuda_module
 *
 * xjoin does not link CUDA. The first cuda_module_load checks for the
 * NVIDIA driver (libcuda.so.1) and then dlopens libxjoin_cuda.so
 * (kernels/cuda/module.h): from $XJOIN_CUDA_MODULE when set, else from
 * the folder of libxjoin.so when that runs (the Python package), else
 * from the running binary's folder (a build tree) or its installed
 * library folder (bin/../lib, relative: a moved install still finds
 * it). The module brings the
 * CUDA runtime and cuBLAS with it, so a machine without them (or without
 * a driver) never maps them and runs the CPU backend.
 */
#ifndef XJ_CUDA_MODULE_LOADER_H
#define XJ_CUDA_MODULE_LOADER_H

#include <stddef.h>

#include "../../kernels/cuda/module.h"

/* The module's table, or NULL with the reason in why (one line: "built
 * without CUDA", "no NVIDIA driver (...)" or "cannot load the CUDA backend
 * (<dlerror text>)"). Loads once per process; later calls give the same
 * answer. Not thread-safe: call it from the main thread. */
const struct xjc_module *cuda_module_load(char *why, size_t size);

/* The table if an earlier cuda_module_load succeeded, else NULL; never
 * loads anything. */
const struct xjc_module *cuda_module(void);

#endif
