/*
 * test_comm.c: the top-k reduce-scatter over MPI and error agreement.
 * Run under mpirun -np 1 and -np 3: every rank holds lists of the same
 * rows against its own base shard; after the merge each rank's part must
 * equal the merge computed locally from all ranks' lists.
 */
#include <CUnit/Basic.h>
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "app/comm.h"
#include "app/plan.h"
#include "kernels/topk.h"

static xj_comm comm;

/* Deterministic list of rank r for row i: keys with ties across ranks. */
static void make_list(int r, int64_t i, int64_t k, float *key, int64_t *idx)
{
	int64_t n = (i + r) % (k + 1);   /* some lists shorter than k */

	for (int64_t j = 0; j < n; j++) {
		key[j] = (float)((j * 3 + r + i) % 5);
		idx[j] = 1000 * r + j;
	}
	topk_sort(key, idx, n);
	topk_pad(key, idx, n, k);
}

static void test_reduce_scatter(void)
{
	int64_t rows = 11, k = 4, row0 = -1, nrows = -1;
	int p = comm.nranks;
	float *key = malloc(rows * k * sizeof(float));
	int64_t *idx = malloc(rows * k * sizeof(int64_t));
	float *ok = malloc((rows / p + 1) * k * sizeof(float));
	int64_t *oi = malloc((rows / p + 1) * k * sizeof(int64_t));
	xj_transport t;
	xj_status st;

	xj_ok(&st);
	for (int64_t i = 0; i < rows; i++)
		make_list(comm.rank, i, k, key + i * k, idx + i * k);
	memset(ok, 0xff, (rows / p + 1) * k * sizeof(float));
	memset(oi, 0x7f, (rows / p + 1) * k * sizeof(int64_t));
	comm_mpi_transport(MPI_COMM_WORLD, &t);
	CU_ASSERT_EQUAL(comm_topk_reduce_scatter(&t, rows, k, key, idx, ok,
						 oi, &row0, &nrows, &st),
			XJ_OK);
	for (int64_t r = 0; r < nrows; r++) {
		float lk[64][4], want_k[4];
		int64_t li[64][4], want_i[4];
		const float *pk[64];
		const int64_t *pi[64];

		for (int j = 0; j < p; j++) {
			make_list(j, row0 + r, k, lk[j], li[j]);
			pk[j] = lk[j];
			pi[j] = li[j];
		}
		topk_merge(p, pk, pi, k, want_k, want_i);
		CU_ASSERT_EQUAL(memcmp(want_k, ok + r * k, sizeof(want_k)), 0);
		CU_ASSERT_EQUAL(memcmp(want_i, oi + r * k, sizeof(want_i)), 0);
		for (int64_t j = 1; j < k; j++)
			CU_ASSERT(!topk_less(ok[r * k + j], oi[r * k + j],
					     ok[r * k + j - 1],
					     oi[r * k + j - 1]));
	}
	/* every row is owned by exactly one rank */
	int64_t total = 0;
	MPI_Allreduce(&nrows, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
	CU_ASSERT_EQUAL(total, rows);
	free(key);
	free(idx);
	free(ok);
	free(oi);
}

static void test_agree(void)
{
	xj_status st;

	xj_ok(&st);
	CU_ASSERT_EQUAL(comm_agree(&comm, &st), XJ_OK);
	if (comm.rank == comm.nranks - 1)
		xj_fail(&st, XJ_EXIT_INPUT, "bad row on the last rank");
	CU_ASSERT_EQUAL(comm_agree(&comm, &st), XJ_EXIT_INPUT);
	CU_ASSERT_STRING_EQUAL(st.msg, "bad row on the last rank");
}

int main(int argc, char **argv)
{
	CU_pSuite s;
	unsigned fails, all;
	xj_status st;

	MPI_Init(&argc, &argv);
	xj_ok(&st);
	comm_init(&comm, &st);
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("comm", NULL, NULL);
	if (!s || !CU_add_test(s, "reduce-scatter merge", test_reduce_scatter) ||
	    !CU_add_test(s, "error agreement", test_agree))
		return 1;
	CU_basic_set_mode(comm.rank == 0 ? CU_BRM_VERBOSE : CU_BRM_SILENT);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures();
	MPI_Allreduce(&fails, &all, 1, MPI_UNSIGNED, MPI_SUM, MPI_COMM_WORLD);
	CU_cleanup_registry();
	comm_release(&comm);
	MPI_Finalize();
	return all ? 1 : 0;
}
