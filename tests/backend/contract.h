/*
 * contract.h: the backend contract, the cases every xj_backend
 * (kernels/backend.h) must pass, written once and run against a backend
 * made by a factory.
 *
 * defines: backend_factory, contract_backend, contract_add, contract_run,
 *          contract_topk
 *
 * One program per backend (tests/backend/contract_cpu.c,
 * contract_cuda.c), each a table entry and a main:
 *
 *   static const contract_backend cpu = { "cpu", backend_cpu_create, 1, 1 };
 *   return contract_run(&cpu, argc, argv);    // suite "contract_cpu"
 *
 * What the contract asks (contract.c has the cases): top-k bit-identical
 * to a naive double-precision reference of canonical keys (metric_key)
 * for every metric, k (1 to above the base size), threshold and self
 * setting and chunking (whole, one row, empty chunks, uneven splits of
 * the CUDA tiles, thread teams); matrix blocks bit-identical to canonical
 * values (metric_key_to_value), alone or queued in turn; gemm_flops; and
 * the errors, in codes and messages. Outputs are poisoned before every
 * call. A backend may differ only where an entry's flags say so.
 */
#ifndef XJ_TEST_CONTRACT_H
#define XJ_TEST_CONTRACT_H

#include <stdint.h>
#include <stdio.h>

#include "config/status.h"
#include "kernels/backend.h"
#include "tests/unit/testdata.h"

/* Makes a backend for cfg: backend_cpu_create's signature. */
typedef int (*backend_factory)(const xj_backend_cfg *cfg, xj_backend **out,
			       xj_status *st);

typedef struct contract_backend {
	const char *name;         /* be->name of what create makes */
	backend_factory create;
	/* 1: topk_add checks a base chunk's rows before it returns (CPU);
	 * 0: it may queue the work, and a bad row then comes from
	 * topk_end (CUDA, backend_cuda.h) */
	int add_checks_rows;
	/* 1: a self-join's chunk of shared rows (cfg.same_rows) costs about
	 * half the GEMM FLOPs of the plain path, the sign that topk_add
	 * scored each pair once (CPU in fp32, CUDA); 0: all of them */
	int self_join_halves;
} contract_backend;

/* Register the suite "contract_<name>" of be (unit.h's unit_add: after
 * CU_initialize_registry, before unit_run_all); 0 on failure. be must
 * outlive the run. */
int contract_add(const contract_backend *be);

/* The contract alone: register, run, return the exit status. The command
 * line may be `--small`: the small data sets only, without those sized
 * for the CUDA tiles (k up to 5000 on 600 x 9000 rows), which take most
 * of the time: a minute and more on the CPU backend, far more under the
 * sanitizers (scripts/sanitize.sh). */
int contract_run(const contract_backend *be, int argc, char **argv);

/*
 * Top-k of q (nq rows) against b (nb rows) through a backend that create
 * makes from cfg, in query chunks of qc and base chunks of bc rows (0:
 * one chunk; they become cfg's max rows), with an empty base chunk before
 * the stream and another after its first chunk when empties. Global row
 * indices start at 0 for both. key and idx (nq x k) are poisoned first;
 * flops, when not NULL, gets the backend's gemm_flops. Returns 0, or 1
 * with the backend's message printed.
 */
static inline int contract_topk(backend_factory create,
				const xj_backend_cfg *cfg0, const float *q,
				int64_t nq, const float *b, int64_t nb,
				int64_t qc, int64_t bc, int empties,
				float *key, int64_t *idx, double *flops)
{
	xj_backend_cfg cfg = *cfg0;
	int64_t d = cfg.d, k = cfg.k;
	xj_backend *be = NULL;
	xj_status st;

	if (qc < 1)
		qc = nq > 0 ? nq : 1;
	if (bc < 1)
		bc = nb > 0 ? nb : 1;
	cfg.max_query_rows = qc;
	cfg.max_base_rows = bc;
	xj_ok(&st);
	poison(key, idx, nq * k);
	if (create(&cfg, &be, &st))
		goto fail;
	for (int64_t q0 = 0; q0 < nq; q0 += qc) {
		xj_rows qr = { q + q0 * d, nq - q0 < qc ? nq - q0 : qc, d, q0, 0 };
		xj_rows none = { b, 0, d, 0, 0 };

		if (be->topk_begin(be, &qr, &st))
			goto fail;
		if (empties && be->topk_add(be, &none, &st))
			goto fail;
		for (int64_t b0 = 0; b0 < nb; b0 += bc) {
			xj_rows br = { b + b0 * d, nb - b0 < bc ? nb - b0 : bc,
				       d, b0, 0 };

			if (be->topk_add(be, &br, &st))
				goto fail;
			if (empties && b0 == 0 && be->topk_add(be, &none, &st))
				goto fail;
		}
		if (be->topk_end(be, key + q0 * k, idx + q0 * k, &st))
			goto fail;
	}
	if (flops)
		*flops = be->gemm_flops;
	be->release(be);
	return 0;
fail:
	printf("\n  backend failed: %s", st.msg);
	if (be)
		be->release(be);
	return 1;
}

#endif
