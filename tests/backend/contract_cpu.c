/*
 * contract_cpu.c: the backend contract (contract.h) against the CPU
 * backend. Runs anywhere (unit.contract_cpu); with --precision, against
 * the CPU backend whose candidate GEMM runs in bf16 or int8 through
 * oneDNN (unit.contract_cpu_bf16, _int8): the same cases, the same bits.
 * Where this build or CPU cannot run that precision it prints
 * "SKIPPED: <reason>" and exits 77.
 *
 *   contract_cpu [--precision fp32|bf16|int8] [--small]
 */
#include <stdio.h>
#include <string.h>

#include "contract.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_gemm.h"

static xj_precision prec = XJ_PREC_FP32;

static int create_prec(const xj_backend_cfg *cfg, xj_backend **out,
		       xj_status *st)
{
	xj_backend_cfg c = *cfg;

	c.precision = prec;
	return backend_cpu_create(&c, out, st);
}

int main(int argc, char **argv)
{
	/* the CPU checks a base chunk's rows in topk_add itself; its
	 * self-join scores each pair once in fp32 (bf16 and int8 run the
	 * plain tiles) */
	static contract_backend cpu = { "cpu", create_prec, 1, 1 };

	if (argc > 2 && !strcmp(argv[1], "--precision")) {
		xj_precision got;
		xj_status st;
		char why[96];

		xj_ok(&st);
		if (precision_parse(argv[2], &prec) != 0) {
			fprintf(stderr, "unknown precision %s\n", argv[2]);
			return 2;
		}
		/* d = 300 is the largest dimension of the cases */
		if (cpu_gemm_resolve(prec, 300, 1, &got, why, sizeof(why),
				     &st)) {
			printf("SKIPPED: %s\n", st.msg);
			return 77;
		}
		printf("precision %s: %s\n", precision_name(got), why);
		argv[2] = argv[0];
		argc -= 2;
		argv += 2;
	}
	cpu.self_join_halves = 1;   /* block pairs in every precision */
	return contract_run(&cpu, argc, argv);
}
