/*
 * test_nccl_transport.c: the NCCL transport and the device-side merge of
 * the grid row, on one GPU.
 *
 *   test_nccl_transport      one MPI rank (run it directly, or under
 *                            mpirun -np 1); prints "SKIPPED: <reason>"
 *                            and exits 77 without a GPU or without a
 *                            loadable NCCL (2.18 or newer)
 *
 * NCCL puts each rank of a communicator on a GPU of its own, so more than
 * one rank needs more than one GPU; with one rank every exchange is a
 * send to itself, which still runs the whole path (open with the id
 * broadcast, a non-blocking group of ncclSend/ncclRecv, the polled
 * waits, finalise). Checks:
 *   - alltoallv on device buffers moves the bytes it is given (floats and
 *     int64, offsets, zero counts);
 *   - merge.cuh on the device equals topk_merge on received lists of 1 to
 *     16 ranks with ties, signed zeros and padding (the several-rank part
 *     of the merge, which needs no NCCL);
 *   - topk_end_merged over NCCL equals topk_end + exchange_topk_reduce_scatter
 *     over MPI, bit for bit, for every metric, with ties (repeated base
 *     rows) and padding (k above the base size);
 *   - errors: the hook refuses the MPI transport; a send that nobody
 *     receives hits the deadline (XJ_EXIT_RESOURCE, the message names the
 *     call), the communicator is aborted and later calls fail at once.
 * Output buffers are poisoned before every call.
 */
#include <CUnit/Basic.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "app/run/comm.h"
#include "config/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/backend_cuda.h"
#include "kernels/cuda/nccl_transport.h"
#include "kernels/topk.h"
#define TESTDATA_SEED 0x5e11dfeedull
#include "tests/gpu/gpu_test.h"
#include "tests/unit/testdata.h"
#include "tests/unit/unit.h"

static xj_comm comm;     /* one rank, one grid row */
static MPI_Comm world;

/* n elements of device memory holding host data (or NULL on failure). */
static void *to_device(const void *host, size_t bytes)
{
	void *d = NULL;

	if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess)
		return NULL;
	if (bytes && cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice) !=
	    cudaSuccess) {
		cudaFree(d);
		return NULL;
	}
	return d;
}

static int from_device(void *host, const void *d, size_t bytes)
{
	return bytes ? cudaMemcpy(host, d, bytes, cudaMemcpyDeviceToHost) !=
		       cudaSuccess : 0;
}

static int open_nccl(xj_transport *t, double timeout_s)
{
	xj_group row;
	xj_status st;

	xj_ok(&st);
	comm_row_group(&comm, &row);
	if (nccl_transport_open(&row, gpu_device, timeout_s, t, &st)) {
		printf("\n  nccl_transport_open: %s", st.msg);
		return -1;
	}
	return 0;
}

/* ---- alltoallv ---------------------------------------------------------- */

static void test_alltoallv(void)
{
	const int64_t n = 1000, off = 37;
	float *hf = malloc(sizeof(float) * n), *rf = malloc(sizeof(float) * n);
	int64_t *hi = malloc(sizeof(int64_t) * n);
	int64_t *ri = malloc(sizeof(int64_t) * n);
	int64_t cnt[4] = { n - off, off, n - off, 0 }, zero[4] = { 0, 0, 0, 0 };
	void *df, *di, *dfr, *dir;
	xj_transport t;
	xj_status st;

	CU_ASSERT_FATAL(hf && rf && hi && ri);
	for (int64_t e = 0; e < n; e++) {
		hf[e] = (float)rng_gauss();
		hi[e] = (int64_t)rng_next();
	}
	df = to_device(hf, sizeof(float) * n);
	di = to_device(hi, sizeof(int64_t) * n);
	memset(rf, 0xff, sizeof(float) * n);
	memset(ri, 0xff, sizeof(int64_t) * n);
	dfr = to_device(rf, sizeof(float) * n);
	dir = to_device(ri, sizeof(int64_t) * n);
	CU_ASSERT_FATAL(df && di && dfr && dir);
	CU_ASSERT_FATAL(open_nccl(&t, 60) == 0);
	CU_ASSERT(nccl_transport_is(&t));
	CU_ASSERT_STRING_EQUAL(t.name, "nccl");
	CU_ASSERT_EQUAL(t.size, 1);
	xj_ok(&st);
	/* send [off, n) to recv [0, n - off) */
	CU_ASSERT_EQUAL(t.alltoallv(&t, XJ_T_F32, df, cnt, cnt + 1, dfr,
				    cnt + 2, cnt + 3, &st), XJ_OK);
	CU_ASSERT_EQUAL(t.alltoallv(&t, XJ_T_I64, di, cnt, cnt + 1, dir,
				    cnt + 2, cnt + 3, &st), XJ_OK);
	CU_ASSERT_EQUAL(t.alltoallv(&t, XJ_T_I64, di, zero, zero, dir, zero,
				    zero, &st), XJ_OK);
	CU_ASSERT_FATAL(!from_device(rf, dfr, sizeof(float) * n) &&
			!from_device(ri, dir, sizeof(int64_t) * n));
	CU_ASSERT(!memcmp(rf, hf + off, sizeof(float) * (n - off)));
	CU_ASSERT(!memcmp(ri, hi + off, sizeof(int64_t) * (n - off)));
	/* the tail was not written */
	CU_ASSERT(isnan(rf[n - 1]));
	nccl_transport_close(&t);
	CU_ASSERT(!nccl_transport_is(&t));
	cudaFree(df);
	cudaFree(di);
	cudaFree(dfr);
	cudaFree(dir);
	free(hf);
	free(rf);
	free(hi);
	free(ri);
}

/* ---- the merge of several ranks' lists ---------------------------------- */

static void test_device_merge(void)
{
	const int ps[] = { 1, 2, 3, 7, 16 };
	const int64_t ks[] = { 1, 10, 300, 2048 }, rowss[] = { 0, 1, 5, 130 };
	int64_t bad = 0;

	for (size_t a = 0; a < 5; a++)
		for (size_t b = 0; b < 4; b++)
			for (size_t c = 0; c < 4; c++) {
				int p = ps[a];
				int64_t k = ks[b], rows = rowss[c];
				int64_t n = p * rows * k, m = rows * k;
				float *key = malloc(sizeof(float) * (size_t)(n + 1));
				int64_t *idx = malloc(sizeof(int64_t) * (size_t)(n + 1));
				float *ok = malloc(sizeof(float) * (size_t)(m + 1));
				int64_t *oi = malloc(sizeof(int64_t) * (size_t)(m + 1));
				float *rk = malloc(sizeof(float) * (size_t)(m + 1));
				int64_t *ri = malloc(sizeof(int64_t) * (size_t)(m + 1));
				xj_status st;

				CU_ASSERT_FATAL(key && idx && ok && oi && rk && ri);
				received_lists(p, rows, k, key, idx);
				CU_ASSERT_FATAL(received_merge(p, rows, k, key, idx,
								rk, ri) == 0);
				poison(ok, oi, m);
				xj_ok(&st);
				if (backend_cuda_test_merge(gpu_device, p, rows, k,
							    key, idx, ok, oi,
							    &st)) {
					printf("\n  %s", st.msg);
					bad++;
				}
				for (int64_t e = 0; e < m; e++)
					if ((!same_f32(ok[e], rk[e]) || oi[e] != ri[e]) &&
					    bad++ < 4)
						printf("\n  device merge p=%d k=%lld row %lld rank %lld: (%g, %lld) want (%g, %lld)",
						       p, (long long)k,
						       (long long)(e / k),
						       (long long)(e % k), ok[e],
						       (long long)oi[e], rk[e],
						       (long long)ri[e]);
				free(key);
				free(idx);
				free(ok);
				free(oi);
				free(rk);
				free(ri);
			}
	CU_ASSERT_EQUAL(bad, 0);
}

/* ---- the hook against the host path -------------------------------------- */

/* Local lists of q x b through the CUDA backend, ended either by
 * topk_end + exchange_topk_reduce_scatter over MPI or by topk_end_merged
 * over NCCL; (okey, oidx) get the merged part. */
static int hook_run(const xj_backend_cfg *cfg, const float *q, int64_t nq,
		    const float *b, int64_t nb, const xj_transport *t,
		    float *okey, int64_t *oidx, int64_t *row0,
		    int64_t *nrows, xj_status *st)
{
	int64_t k = cfg->k, d = cfg->d;
	float *key = malloc(sizeof(float) * (size_t)(nq * k));
	int64_t *idx = malloc(sizeof(int64_t) * (size_t)(nq * k));
	xj_rows qr = { q, nq, d, 0, 0 }, br = { b, nb, d, 0, 0 };
	xj_backend *be = NULL;
	int rc;

	if (!key || !idx) {
		free(key);
		free(idx);
		return xj_fail(st, XJ_EXIT_RESOURCE, "out of memory");
	}
	poison(key, idx, nq * k);
	rc = gpu_backend_create(cfg, &be, st);
	if (!rc)
		rc = be->topk_begin(be, &qr, st);
	if (!rc)
		rc = be->topk_add(be, &br, st);
	if (!rc && nccl_transport_is(t))
		rc = be->topk_end_merged(be, t, okey, oidx, row0, nrows, st);
	else if (!rc)
		rc = be->topk_end(be, key, idx, st) ||
		     exchange_topk_reduce_scatter(t, nq, k, key, idx, okey,
						  oidx, row0, nrows, st);
	if (be)
		be->release(be);
	free(key);
	free(idx);
	return rc ? st->code : XJ_OK;
}

static void test_hook(void)
{
	const int64_t d = 24, nq = 700, nb = 1500;
	const int64_t ks[] = { 1, 16, 2000 };
	float *q = gauss_rows(nq, d, 0, 1), *b = gauss_rows(nb, d, 0, 1);
	float *mk = malloc(sizeof(float) * (size_t)(nq * 2000));
	float *nk = malloc(sizeof(float) * (size_t)(nq * 2000));
	int64_t *mi = malloc(sizeof(int64_t) * (size_t)(nq * 2000));
	int64_t *ni = malloc(sizeof(int64_t) * (size_t)(nq * 2000));
	xj_transport mpi, nccl;
	int64_t bad = 0;

	CU_ASSERT_FATAL(q && b && mk && nk && mi && ni);
	/* the second half of the base repeats the first: ties everywhere */
	memcpy(b + nb / 2 * d, b, sizeof(float) * (size_t)(nb / 2 * d));
	comm_mpi_transport(&world, &mpi);
	CU_ASSERT_FATAL(open_nccl(&nccl, 60) == 0);
	for (size_t mj = 0; mj < 4; mj++)
		for (size_t ki = 0; ki < 3; ki++) {
			xj_backend_cfg cfg;
			int64_t r0m = -1, nm = -1, r0n = -1, nn = -1;
			xj_status st;

			memset(&cfg, 0, sizeof(cfg));
			cfg.metric = metrics[mj];
			cfg.k = ks[ki];
			cfg.d = d;
			cfg.max_query_rows = nq;
			cfg.max_base_rows = nb;
			poison(mk, mi, nq * cfg.k);
			poison(nk, ni, nq * cfg.k);
			xj_ok(&st);
			if (hook_run(&cfg, q, nq, b, nb, &mpi, mk, mi, &r0m, &nm,
				     &st) ||
			    hook_run(&cfg, q, nq, b, nb, &nccl, nk, ni, &r0n, &nn,
				     &st)) {
				printf("\n  %s k=%lld: %s", metric_names[mj],
				       (long long)cfg.k, st.msg);
				bad++;
				continue;
			}
			if (r0m != r0n || nm != nn || nm != nq)
				bad++;
			for (int64_t e = 0; e < nq * cfg.k; e++)
				if ((!same_f32(mk[e], nk[e]) || mi[e] != ni[e]) &&
				    bad++ < 4)
					printf("\n  %s k=%lld entry %lld: NCCL (%g, %lld), MPI (%g, %lld)",
					       metric_names[mj], (long long)cfg.k,
					       (long long)e, nk[e],
					       (long long)ni[e], mk[e],
					       (long long)mi[e]);
		}
	/* k above the base size: padding came through */
	CU_ASSERT(ni[nq * 2000 - 1] == -1 && isinf(nk[nq * 2000 - 1]));
	nccl_transport_close(&nccl);
	CU_ASSERT_EQUAL(bad, 0);
	free(q);
	free(b);
	free(mk);
	free(nk);
	free(mi);
	free(ni);
}

/* ---- errors --------------------------------------------------------------- */

static void test_errors(void)
{
	const int64_t d = 8, n = 64;
	float *x = gauss_rows(n, d, 0, 1), key[64 * 4];
	int64_t idx[64 * 4], row0, rows;
	int64_t send[4] = { 16, 0, 0, 0 };
	xj_backend_cfg cfg;
	xj_backend *be = NULL;
	xj_transport mpi, t;
	xj_rows r = { x, n, d, 0, 0 };
	xj_status st;
	void *buf;
	int rc;

	CU_ASSERT_FATAL(x != NULL);
	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = XJ_METRIC_L2;
	cfg.k = 4;
	cfg.d = d;
	cfg.max_query_rows = n;
	cfg.max_base_rows = n;
	xj_ok(&st);
	CU_ASSERT_FATAL(gpu_backend_create(&cfg, &be, &st) == XJ_OK);
	CU_ASSERT_PTR_NOT_NULL(be->topk_end_merged);
	comm_mpi_transport(&world, &mpi);
	CU_ASSERT_EQUAL(be->topk_begin(be, &r, &st), XJ_OK);
	CU_ASSERT_EQUAL(be->topk_add(be, &r, &st), XJ_OK);
	CU_ASSERT_EQUAL(be->topk_end_merged(be, &mpi, key, idx, &row0, &rows,
					    &st), XJ_EXIT_INTERNAL);
	printf("\n  (expected) %s", st.msg);
	be->release(be);

	/* a send to itself that nobody receives: the deadline ends it
	 * (XJ_EXIT_RESOURCE), unless NCCL rejects the group itself */
	buf = to_device(x, sizeof(float) * 16);
	CU_ASSERT_FATAL(buf != NULL);
	CU_ASSERT_FATAL(open_nccl(&t, 2) == 0);
	xj_ok(&st);
	rc = t.alltoallv(&t, XJ_T_F32, buf, send, send + 1, buf, send + 2,
			 send + 3, &st);
	printf("\n  (expected) %s", st.msg);
	CU_ASSERT(rc == XJ_EXIT_RESOURCE || rc == XJ_EXIT_INTERNAL);
	if (rc == XJ_EXIT_RESOURCE) {
		CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "ncclSend/ncclRecv"));
		CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "no progress within 2 s"));
	}
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "aborted"));
	CU_ASSERT_PTR_NOT_NULL(strstr(st.msg, "world rank 0"));
	/* aborted: the next call fails at once */
	send[0] = 0;
	xj_ok(&st);
	CU_ASSERT_EQUAL(t.alltoallv(&t, XJ_T_F32, buf, send, send + 1, buf,
				    send + 2, send + 3, &st), XJ_EXIT_INTERNAL);
	printf("\n  (expected) %s ", st.msg);
	nccl_transport_close(&t);
	cudaFree(buf);
	free(x);
}

/* ---- main --------------------------------------------------------------- */

static int finish(int code)
{
	comm_release(&comm);
	MPI_Finalize();
	return code;
}

static const unit_test tests[] = {
	{ "alltoallv on device buffers", test_alltoallv },
	{ "device merge equals topk_merge", test_device_merge },
	{ "topk_end_merged over NCCL equals the MPI path", test_hook },
	{ "errors and the deadline", test_errors },
};

int main(int argc, char **argv)
{
	char reason[512];
	int nranks = 0, rc;
	xj_status st;

	if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
		return 1;
	world = MPI_COMM_WORLD;
	MPI_Comm_size(world, &nranks);
	xj_ok(&st);
	if (comm_init(&comm, &st) || comm_grid(&comm, nranks, &st)) {
		printf("comm: %s\n", st.msg);
		return finish(1);
	}
	if ((rc = gpu_test_device()) != 0)
		return finish(rc);
	if (!nccl_transport_available(reason, sizeof(reason))) {
		printf("SKIPPED: no usable NCCL: %s\n", reason);
		return finish(GPU_TEST_SKIP);
	}
	if (nranks != 1) {
		printf("test_nccl_transport runs as one rank (NCCL needs a GPU per rank), not %d\n",
		       nranks);
		return finish(1);
	}
	if (cudaSetDevice(gpu_device) != cudaSuccess)
		return finish(1);
	return finish(unit_run("nccl_transport", tests, UNIT_COUNT(tests)));
}
