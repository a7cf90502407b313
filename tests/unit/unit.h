/*
 * unit.h: the one way xjoin's CUnit executables register and run a suite.
 *
 * defines: unit_test, unit_run, unit_add, unit_run_all
 *
 *   static const unit_test tests[] = { { "name", test_fn }, ... };
 *   return unit_run("suite", tests, UNIT_COUNT(tests));
 *
 * Several suites: CU_initialize_registry(), unit_add() for each, then
 * return unit_run_all().
 *
 * The exit status is 0 only when every test ran and passed (ctest reads it).
 */
#ifndef XJ_TEST_UNIT_H
#define XJ_TEST_UNIT_H

#include <CUnit/Basic.h>
#include <stddef.h>
#include <stdio.h>

typedef struct unit_test {
	const char *name;
	CU_TestFunc fn;
} unit_test;

#define UNIT_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Register one suite; 0 (and a message) on failure. Call after
 * CU_initialize_registry(), as often as there are suites. */
static inline int unit_add(const char *suite, const unit_test *tests,
			   size_t n)
{
	CU_pSuite s = CU_add_suite(suite, NULL, NULL);

	for (size_t i = 0; s && i < n; i++)
		if (!CU_add_test(s, tests[i].name, tests[i].fn))
			s = NULL;
	if (!s)
		fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
	return s != NULL;
}

/* Run every registered suite, clean up, return the exit status. */
static inline int unit_run_all(void)
{
	unsigned fails;

	CU_basic_set_mode(CU_BRM_VERBOSE);
	if (CU_basic_run_tests() != CUE_SUCCESS ||
	    CU_get_error() != CUE_SUCCESS) {
		CU_cleanup_registry();
		return 1;
	}
	fails = CU_get_number_of_failures();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}

static inline int unit_run(const char *suite, const unit_test *tests,
			   size_t n)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	if (!unit_add(suite, tests, n)) {
		CU_cleanup_registry();
		return 1;
	}
	return unit_run_all();
}

#endif
