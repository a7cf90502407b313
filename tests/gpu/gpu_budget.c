/*
 * gpu_budget.c: the GPU memory plan of a job shape, without running it,
 * and the --gpu-mem-fraction that starves that GPU to a given chunk size.
 *
 *   gpu_budget -m METRIC -n N -M M -d D [-k K] [-p PRECISION]
 *              [-c CHUNK_ROWS] [--free BYTES]
 *
 * Prints key=value lines (for scripts/gpu-check.sh):
 *   free_bytes     the device's free memory (--free, else device 0's)
 *   fixed_bytes    the plan's backend bytes that do not depend on chunks
 *                  (tile buffers, pinned staging, merge buffers)
 *   need_bytes     the smallest budget plan_make_device accepts with
 *                  chunks of CHUNK_ROWS rows
 *   fraction       1.25 x need_bytes / free_bytes, rounded up: the
 *                  --gpu-mem-fraction of a "starved GPU" check, which
 *                  means the same on any device
 *   qchunk_rows, bchunk_rows   the plan at that fraction
 * The formula is the one xjoin plans with (app/plan/plan.c plan_make_device on
 * kernels/cuda/backend_cuda.h's byte counts), all host code: with --free it
 * runs on any machine, which is how the dry run (gpu-check --plumbing)
 * evaluates it. Exit 0, 1 when no fraction <= 1 fits, 2 on bad arguments.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "app/plan/plan.h"
#include "config/job.h"
#include "kernels/backend.h"
#include "kernels/cuda/backend_cuda.h"

#define HEADROOM 1.25

static const plan_device_bytes cuda_bytes = {
	backend_cuda_work_bytes, backend_cuda_pinned_bytes,
	backend_cuda_merge_bytes,
};

static int plan_at(plan_in pin, const xj_backend_cfg *cfg, int64_t budget,
		   plan *out)
{
	xj_status st;

	xj_ok(&st);
	pin.budget_bytes = budget;
	return plan_make_device(&pin, cfg, &cuda_bytes, out, &st);
}

/* The smallest budget whose plan has the chunks asked for. */
static int64_t need_bytes(const plan_in *pin, const xj_backend_cfg *cfg)
{
	int64_t lo = 1, hi = INT64_C(1) << 50;
	plan p;

	if (plan_at(*pin, cfg, hi, &p))
		return -1;
	while (hi - lo > 4096) {
		int64_t mid = lo + (hi - lo) / 2;

		if (plan_at(*pin, cfg, mid, &p) == XJ_OK)
			hi = mid;
		else
			lo = mid;
	}
	return hi;
}

static int usage(void)
{
	fprintf(stderr, "usage: gpu_budget -m METRIC -n N -M M -d D [-k K] "
		"[-p PRECISION] [-c CHUNK_ROWS] [--free BYTES]\n");
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option longs[] = {
		{ "free", required_argument, NULL, 'f' }, { 0, 0, 0, 0 } };
	xj_backend_cfg cfg;
	plan_in pin;
	plan p;
	int64_t n = 0, m = 0, need;
	double free_bytes = -1, fraction;
	xj_status st;
	int c;

	xj_ok(&st);
	memset(&cfg, 0, sizeof(cfg));
	memset(&pin, 0, sizeof(pin));
	pin.chunk_rows = 64;
	while ((c = getopt_long(argc, argv, "m:n:M:d:k:p:c:", longs, NULL)) !=
	       -1) {
		switch (c) {
		case 'm': if (metric_parse(optarg, &cfg.metric)) return usage();
			  break;
		case 'p': if (precision_parse(optarg, &cfg.precision))
				return usage();
			  break;
		case 'n': n = strtoll(optarg, NULL, 10); break;
		case 'M': m = strtoll(optarg, NULL, 10); break;
		case 'd': cfg.d = strtoll(optarg, NULL, 10); break;
		case 'k': cfg.k = strtoll(optarg, NULL, 10); break;
		case 'c': pin.chunk_rows = strtoll(optarg, NULL, 10); break;
		case 'f': free_bytes = strtod(optarg, NULL); break;
		default: return usage();
		}
	}
	if (n < 1 || m < 1 || cfg.d < 1 || pin.chunk_rows < 1)
		return usage();
	if (free_bytes < 0) {
		size_t f = 0, t = 0;

		if (cudaMemGetInfo(&f, &t) != cudaSuccess) {
			fprintf(stderr, "gpu_budget: no device to ask for its "
				"free memory: give --free BYTES\n");
			return 2;
		}
		free_bytes = (double)f;
	}
	pin.cmd = cfg.k > 0 ? XJ_CMD_TOPK : XJ_CMD_MATRIX;
	pin.metric = cfg.metric;
	pin.n = n;
	pin.m = m;
	pin.d = cfg.d;
	pin.k = cfg.k;
	pin.nranks = 1;
	need = need_bytes(&pin, &cfg);
	if (need < 0)
		return 1;
	pin.budget_bytes = need;
	if (plan_make_device(&pin, &cfg, &cuda_bytes, &p, &st))
		return 1;
	fraction = ceil(HEADROOM * (double)need / free_bytes * 1e6) / 1e6;
	printf("free_bytes=%.0f\n", free_bytes);
	printf("fixed_bytes=%" PRId64 "\n", pin.work_fixed_bytes);
	printf("need_bytes=%" PRId64 "\n", need);
	printf("fraction=%.6f\n", fraction);
	if (fraction > 1 ||
	    plan_at(pin, &cfg, (int64_t)(fraction * free_bytes), &p)) {
		printf("fits=no\n");
		return 1;
	}
	printf("qchunk_rows=%" PRId64 "\nbchunk_rows=%" PRId64 "\nfits=yes\n",
	       p.qchunk_rows, p.bchunk_rows);
	return 0;
}
