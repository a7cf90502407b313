/*
 * comm_cxx.h: app/comm.h (C11) for the C++/CUDA translation units of
 * kernels/cuda.
 *
 * defines: nothing of its own
 *
 * comm.h declares its fatal functions _Noreturn, a C11 keyword that C++
 * spells [[noreturn]]; and mpi.h must not pull in MPI's C++ bindings,
 * which nothing here links.
 */
#ifndef XJ_CUDA_COMM_CXX_H
#define XJ_CUDA_COMM_CXX_H

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif

#include <mpi.h>

#ifdef __cplusplus
#define _Noreturn [[noreturn]]
extern "C" {
#include "../../app/comm.h"
}
#undef _Noreturn
#else
#include "../../app/comm.h"
#endif

#endif
