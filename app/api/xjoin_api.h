/*
 * xjoin_api.h: xjoin in-process, for a program on one node that holds
 * its rows in memory (the Python package, python/). app/api/ owns this
 * interface and nothing else: a call runs exactly what `xjoin ARGS` runs
 * (app/driver/join.h), one rank, no mpirun, with the same bits.
 *
 * defines: xjoin_input, xjoin_inputs_clear, xjoin_run, xjoin_finalize,
 *          xjoin_version, XJOIN_* element types
 *
 *   xjoin_input("queries", q, XJOIN_F32, n, d, d, 1, err, sizeof(err));
 *   xjoin_input("base", b, XJOIN_F64, m, d, 1, m, err, sizeof(err));
 *   const char *argv[] = { "topk", "-q", "array:queries",
 *                          "-b", "array:base", "-k", "10",
 *                          "-o", "/dev/shm/out.h5", "--quiet" };
 *   int code = xjoin_run(10, argv, err, sizeof(err));   // 0: done
 *   xjoin_inputs_clear();
 *
 * Inputs: "array:NAME" names rows registered by xjoin_input, of any
 * element type below and any strides (a C or Fortran ordered array, a
 * slice); float32 rows laid out row after row are used in place, others
 * converted once. They must stay valid and unchanged during the run.
 * Files ("FILE:DATASET") work as on the command line.
 *
 * Errors: the exit code of the command line (config/status.h: 2 usage,
 * 3 input, 4 resource, 5 interrupted, 1 internal), with its message in
 * err; what would end the program (a failed MPI call, an out-of-memory
 * abort) ends only the call, with code 1. SIGINT, SIGTERM, SIGUSR1 and
 * SIGUSR2 stop a run as they stop the command line (code 5) while it
 * runs; the caller's handlers are restored after. MPI starts on the
 * first call (a singleton: one rank) and ends with xjoin_finalize. One
 * call at a time: the inputs and MPI are the process's.
 */
#ifndef XJOIN_API_H
#define XJOIN_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types (io/h5in.h's H5IN_MEM_* numbers). */
enum {
	XJOIN_F32 = 1, XJOIN_F64, XJOIN_F16, XJOIN_I8, XJOIN_U8, XJOIN_I16,
	XJOIN_U16, XJOIN_I32, XJOIN_U32, XJOIN_I64, XJOIN_U64
};

/* Register rows x cols elements at data (element (r, c) at data + (r rs
 * + c cs) elements) as "array:NAME". 0, or an exit code and err. */
int xjoin_input(const char *name, const void *data, int type, int64_t rows,
		int64_t cols, int64_t rs, int64_t cs, char *err,
		size_t errlen);

/* Forget every registered input. */
void xjoin_inputs_clear(void);

/* Run `xjoin argv[0] ...` (argv without the program name). Returns the
 * exit code (0: done), its message in err. */
int xjoin_run(int argc, const char **argv, char *err, size_t errlen);

/* End MPI (no call may follow in this process). */
void xjoin_finalize(void);

/* "0.1.0" */
const char *xjoin_version(void);

#ifdef __cplusplus
}
#endif

#endif
