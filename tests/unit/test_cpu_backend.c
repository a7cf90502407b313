/*
 * test_cpu_backend.c: what only the CPU backend has. The cases every
 * backend passes (top-k and matrix bit for bit against the canonical
 * reference, thread teams included, and the errors) are the backend
 * contract: tests/backend/contract.c, run here as unit.contract_cpu.
 *
 * Here: backend_cpu_work_bytes, the working memory the planner reserves
 * for the CPU backend.
 */
#include <stdint.h>
#include <string.h>

#include "unit.h"
#include "kernels/backend.h"

static void test_work_bytes(void)
{
	xj_backend_cfg cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.metric = XJ_METRIC_L2;
	cfg.k = 10;
	cfg.d = 100;
	cfg.max_base_rows = 10000;
	int64_t a = backend_cpu_work_bytes(&cfg, 1000, 2);
	int64_t b = backend_cpu_work_bytes(&cfg, 2000, 2);
	int64_t c = backend_cpu_work_bytes(&cfg, 1000, 4);

	CU_ASSERT(a > 0 && b > a && c > a);
	/* per query at least the exact list and the pending rows */
	CU_ASSERT(b - a >= 1000 * (12 * 10 + 12 * 74));
	cfg.metric = XJ_METRIC_COSINE;
	CU_ASSERT(backend_cpu_work_bytes(&cfg, 1000, 2) >=
		  a + (1000 + 10000) * 4 * 100);
}

int main(void)
{
	static const unit_test tests[] = {
		{ "work bytes", test_work_bytes },
	};

	return unit_run("cpu_backend", tests, UNIT_COUNT(tests));
}
