/*
 * contract_cpu.c: the backend contract (contract.h) against the CPU
 * backend. Runs anywhere (unit.contract_cpu).
 *
 *   contract_cpu [--small]
 */
#include "contract.h"
#include "kernels/backend.h"

int main(int argc, char **argv)
{
	/* the CPU checks a base chunk's rows in topk_add itself */
	static const contract_backend cpu = { "cpu", backend_cpu_create, 1 };

	return contract_run(&cpu, argc, argv);
}
