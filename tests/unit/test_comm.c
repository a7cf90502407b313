/*
 * test_comm.c: the top-k reduce-scatter over MPI, error agreement, and a
 * grid row as a transport's start-up group.
 * Run under mpirun -np 1 and -np 3: every rank holds lists of the same
 * rows against its own base shard; after the merge each rank's part must
 * equal the merge computed locally from all ranks' lists.
 */
#include <CUnit/Basic.h>
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "app/run/comm.h"
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
	MPI_Comm world = MPI_COMM_WORLD;
	xj_transport t;
	xj_status st;

	xj_ok(&st);
	for (int64_t i = 0; i < rows; i++)
		make_list(comm.rank, i, k, key + i * k, idx + i * k);
	memset(ok, 0xff, (rows / p + 1) * k * sizeof(float));
	memset(oi, 0x7f, (rows / p + 1) * k * sizeof(int64_t));
	comm_mpi_transport(&world, &t);
	CU_ASSERT_STRING_EQUAL(t.name, "mpi");
	CU_ASSERT_EQUAL(t.size, p);
	CU_ASSERT_EQUAL(t.rank, comm.rank);
	CU_ASSERT_EQUAL(exchange_topk_reduce_scatter(&t, rows, k, key, idx, ok,
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

/* Bytes of the merge: what every rank sends is what the others receive,
 * and the counts follow the split of the rows. */
static void test_merge_bytes(void)
{
	int64_t s, r, all_s = 0, all_r = 0;

	exchange_topk_bytes(11, 4, 1, 0, &s, &r);
	CU_ASSERT(s == 0 && r == 0);
	/* 11 rows over 3 ranks: 4, 4, 3 */
	exchange_topk_bytes(11, 4, 3, 0, &s, &r);
	CU_ASSERT_EQUAL(s, (4 + 3) * 4 * 12);
	CU_ASSERT_EQUAL(r, 2 * 4 * 4 * 12);
	exchange_topk_bytes(11, 4, 3, 2, &s, &r);
	CU_ASSERT_EQUAL(s, (4 + 4) * 4 * 12);
	CU_ASSERT_EQUAL(r, 2 * 3 * 4 * 12);
	for (int me = 0; me < 7; me++) {
		exchange_topk_bytes(1000, 10, 7, me, &s, &r);
		all_s += s;
		all_r += r;
	}
	CU_ASSERT_EQUAL(all_s, all_r);
	CU_ASSERT_EQUAL(all_s, 6 * 1000 * 10 * 12);
}

/* Rows of 2 ranks where the count is even, else one row of all: group
 * rank 0's bytes reach its whole row. */
static void test_row_group(void)
{
	int pc = comm.nranks % 2 == 0 ? 2 : comm.nranks;
	unsigned char buf[37];
	xj_group g;
	xj_status st;

	xj_ok(&st);
	CU_ASSERT_EQUAL_FATAL(comm_grid(&comm, pc, &st), XJ_OK);
	comm_row_group(&comm, &g);
	CU_ASSERT_EQUAL(g.size, pc);
	CU_ASSERT_EQUAL(g.rank, comm.rank % pc);
	CU_ASSERT_EQUAL(g.world_rank, comm.rank);
	CU_ASSERT_STRING_EQUAL(g.host, comm.host);
	/* row r's rank 0 is world rank r * pc: its pattern, poison elsewhere */
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = g.rank == 0 ? (unsigned char)(comm.rank + 3 * i) : 0xa5;
	CU_ASSERT_EQUAL(g.bcast0(&g, buf, sizeof(buf), &st), XJ_OK);
	for (size_t i = 0; i < sizeof(buf); i++)
		CU_ASSERT_EQUAL(buf[i], (unsigned char)(comm.rank - g.rank +
							3 * i));
	CU_ASSERT_EQUAL(g.bcast0(&g, buf, -1, &st), XJ_EXIT_INTERNAL);
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
	    !CU_add_test(s, "error agreement", test_agree) ||
	    !CU_add_test(s, "grid row group", test_row_group) ||
	    !CU_add_test(s, "merge bytes", test_merge_bytes))
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
