/*
 * contract_cuda.c: the backend contract (contract.h) against the CUDA
 * backend on one device (gpu.contract_cuda). Without a usable device it
 * prints "SKIPPED: <reason>" and exits 77 (tests/gpu/gpu_test.h);
 * XJ_CUDA_DEVICE picks the device.
 *
 *   contract_cuda [--small]
 */
#include "contract.h"
#include "tests/gpu/gpu_test.h"

int main(int argc, char **argv)
{
	/* topk_add queues its work: a bad base row may come from topk_end;
	 * a self-join scores each pair of shared rows once */
	static const contract_backend cuda = { "cuda", gpu_backend_create,
					       0, 1 };
	int rc = gpu_test_device();

	/* the block pairs, which the backend takes on one GPU only when
	 * asked (the plain path is the default there) */
	setenv("XJ_CUDA_SYM", "1", 0);
	return rc ? rc : contract_run(&cuda, argc, argv);
}
