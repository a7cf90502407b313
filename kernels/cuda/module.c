/*
 * module.c: the table of libxjoin_cuda.so (see module.h), the module's
 * only exported symbol.
 */
#include "module.h"

#include "backend_cuda.h"

static const struct xjc_module table = {
	.abi = XJC_MODULE_ABI,
	.probe = backend_cuda_probe,
	.device_info = backend_cuda_device_info,
	.create = backend_cuda_create,
	.work_bytes = backend_cuda_work_bytes,
	.pinned_bytes = backend_cuda_pinned_bytes,
	.merge_bytes = backend_cuda_merge_bytes,
	.nccl_available = nccl_transport_available,
	.nccl_open = nccl_transport_open,
	.nccl_is = nccl_transport_is,
	.nccl_on_fatal = nccl_transport_on_fatal,
	.nccl_abort = nccl_transport_abort,
	.nccl_close = nccl_transport_close,
};

const struct xjc_module *xjc_module_get(void)
{
	return &table;
}
