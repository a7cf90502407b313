/*
 * check.cuh: CUDA and cuBLAS failures as xj_status errors.
 *
 * defines: CUDA_CHECK, CUBLAS_CHECK, CUDA_LAUNCH_CHECK, cuda_fail,
 *          cublas_fail, check_base
 *
 * Library code never exits (STYLE.md): a failed call fills the caller's
 * xj_status with file:line, the call as written and the library's own
 * error name and text, then returns the status code from the enclosing
 * function (which must return int). Entry points add their context with
 * xj_wrap(), so a report reads like a stack trace:
 *
 *   cuda backend (device 0): topk_add: topk_cuda.cu:110:
 *     cudaMemcpyAsync(...): out of memory (cudaErrorMemoryAllocation)
 *
 * An allocation failure is a resource error (the driver may retry with
 * smaller chunks); anything else is internal.
 */
#ifndef XJ_CUDA_CHECK_CUH
#define XJ_CUDA_CHECK_CUH

#include <cstring>

#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include "../../config/status.h"
}

/* file name without its directories (__FILE__ is often absolute) */
static inline const char *check_base(const char *file)
{
	const char *slash = strrchr(file, '/');

	return slash ? slash + 1 : file;
}

static inline int cuda_fail(xj_status *st, cudaError_t e, const char *call,
			    const char *file, int line)
{
	int code = e == cudaErrorMemoryAllocation ? XJ_EXIT_RESOURCE
						  : XJ_EXIT_INTERNAL;

	/* clear the runtime's last error unless it is sticky, so the next
	 * check does not report this one again */
	(void)cudaGetLastError();
	return xj_fail(st, code, "%s:%d: %s: %s (%s)", check_base(file), line,
		       call, cudaGetErrorString(e), cudaGetErrorName(e));
}

static inline int cublas_fail(xj_status *st, cublasStatus_t s,
			      const char *call, const char *file, int line)
{
	int code = s == CUBLAS_STATUS_ALLOC_FAILED ? XJ_EXIT_RESOURCE
						   : XJ_EXIT_INTERNAL;

	return xj_fail(st, code, "%s:%d: %s: %s (%s)", check_base(file), line,
		       call, cublasGetStatusString(s), cublasGetStatusName(s));
}

#define CUDA_CHECK(st, call)                                              \
	do {                                                              \
		cudaError_t xj_e_ = (call);                               \
		if (xj_e_ != cudaSuccess)                                 \
			return cuda_fail((st), xj_e_, #call, __FILE__,    \
					 __LINE__);                       \
	} while (0)

#define CUBLAS_CHECK(st, call)                                            \
	do {                                                              \
		cublasStatus_t xj_s_ = (call);                            \
		if (xj_s_ != CUBLAS_STATUS_SUCCESS)                       \
			return cublas_fail((st), xj_s_, #call, __FILE__,  \
					   __LINE__);                     \
	} while (0)

/*
 * The math mode of every cuBLAS handle: float32 arithmetic for
 * cublasSgemm (no TF32 or BF16x9 emulation: metric_err_bound() assumes
 * it; the other precisions name their compute type in cublasGemmEx), and
 * no reduction in the output's type: a GEMM that cuBLAS splits along d
 * adds its partial sums in float32, never in a 16-bit output's type (the
 * 16-bit tile's bound, canonical.cuh, allows one rounding of the whole
 * float32 sum; without the flag, an H100 gave test_cuda_precision's
 * small shapes fp16 values over 2^15 and errors over 20 times that
 * bound, the mark of partial sums kept in fp16; with it, none).
 */
#define XJ_CUBLAS_MATH                                                    \
	((cublasMath_t)(CUBLAS_DEFAULT_MATH |                             \
			CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION))

/* After a <<< >>> launch: configuration errors show up here at once;
 * faults inside the kernel show up at the next synchronising call. */
#define CUDA_LAUNCH_CHECK(st, kernel)                                     \
	do {                                                              \
		cudaError_t xj_e_ = cudaGetLastError();                   \
		if (xj_e_ != cudaSuccess)                                 \
			return cuda_fail((st), xj_e_, "launch of " #kernel, \
					 __FILE__, __LINE__);             \
	} while (0)

#endif
