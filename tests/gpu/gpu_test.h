/*
 * gpu_test.h: how every GPU test program starts: find the device, or say
 * why there is none and skip.
 *
 * defines: GPU_TEST_SKIP, GPU_TEST_MEM_FRACTION, gpu_device,
 *          gpu_test_device, gpu_backend_create, gpu_test_main
 *
 * Without a usable device a program prints "SKIPPED: <reason>" (the
 * probe's words) and exits GPU_TEST_SKIP, which tests/gpu/CMakeLists.txt
 * gives ctest as SKIP_RETURN_CODE and scripts/gpu-check.sh reports as SKIP
 * with that line: a machine without a GPU must not look like one that
 * passed. XJ_CUDA_DEVICE picks the device (default 0); its one-line
 * description is printed first, so a log says what ran.
 */
#ifndef XJ_TEST_GPU_TEST_H
#define XJ_TEST_GPU_TEST_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/backend_cuda.h"
#include "tests/unit/unit.h"

#define GPU_TEST_SKIP 77
/* as the driver's default --gpu-mem-fraction */
#define GPU_TEST_MEM_FRACTION 0.9

static int gpu_device;   /* the device the tests run on */

/* Probe and pick the device. 0 with gpu_device set and its line printed;
 * GPU_TEST_SKIP with "SKIPPED: <reason>" printed when there is no usable
 * device; 1 when XJ_CUDA_DEVICE names no device (a failure: the run was
 * asked for a device it cannot test). */
static inline int gpu_test_device(void)
{
	const char *env = getenv("XJ_CUDA_DEVICE");
	char reason[512], line[512];
	int ndev = 0;

	backend_cuda_probe(&ndev, reason, sizeof(reason));
	if (ndev == 0) {
		printf("SKIPPED: %s\n", reason);
		return GPU_TEST_SKIP;
	}
	gpu_device = 0;
	if (env) {
		char *end;
		long v = strtol(env, &end, 10);

		if (!*env || *end || v < 0 || v > INT_MAX) {
			printf("XJ_CUDA_DEVICE=%s is not a device index\n", env);
			return 1;
		}
		gpu_device = (int)v;
	}
	if (backend_cuda_device_info(gpu_device, line, sizeof(line)) != XJ_OK) {
		printf("device %d: %s\n", gpu_device, line);
		return 1;
	}
	printf("device %d of %d: %s\n", gpu_device, ndev, line);
	fflush(stdout);
	return 0;
}

/* A CUDA backend on gpu_device, with the signature of backend_cpu_create
 * (the factory the backend contract takes). */
static inline int gpu_backend_create(const xj_backend_cfg *cfg,
				     xj_backend **out, xj_status *st)
{
	return backend_cuda_create(cfg, gpu_device, GPU_TEST_MEM_FRACTION, out,
				   st);
}

/*
 * main() of a program with a host suite (the device code built for the
 * host: runs anywhere) and a device suite:
 *
 *   PROG              the host suite, then the device suite; without a
 *                     usable device "SKIPPED: <reason>" and GPU_TEST_SKIP
 *                     before either runs
 *   PROG --host-only  the host suite alone, no probe
 *
 * Returns the exit status.
 */
static inline int gpu_test_main(int argc, char **argv, const char *host_name,
				const unit_test *host, size_t nhost,
				const char *device_name,
				const unit_test *device, size_t ndevice)
{
	int host_only = argc > 1 && !strcmp(argv[1], "--host-only");
	int rc;

	if (argc > 1 + host_only) {
		fprintf(stderr, "usage: %s [--host-only]\n", argv[0]);
		return 2;
	}
	if (!host_only && (rc = gpu_test_device()) != 0)
		return rc;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	if (!unit_add(host_name, host, nhost) ||
	    (!host_only && !unit_add(device_name, device, ndevice))) {
		CU_cleanup_registry();
		return 1;
	}
	return unit_run_all();
}

#endif
