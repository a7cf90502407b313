/* xjoin_api.c: xjoin in-process (see xjoin_api.h). */
#define _GNU_SOURCE
#include "xjoin_api.h"

#include <omp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../config/job.h"
#include "../../config/status.h"
#include "../../io/h5in.h"
#include "../cli/options.h"
#include "../driver/join.h"
#include "../run/comm.h"
#include "version.h"

int xjoin_input(const char *name, const void *data, int type, int64_t rows,
		int64_t cols, int64_t rs, int64_t cs, char *err,
		size_t errlen)
{
	h5in_info info;
	xj_status st;

	if (h5in_mem_info(&info, name, data, type, rows, cols, rs, cs, &st) ||
	    h5in_mem_register(&info, &st)) {
		snprintf(err, errlen, "%s", st.msg);
		return st.code;
	}
	return 0;
}

void xjoin_inputs_clear(void)
{
	h5in_mem_clear();
}

const char *xjoin_version(void)
{
	return XJOIN_VERSION;
}

/* MPI as a singleton, started once, with the transports of one node
 * (app/main.c says why) unless the caller chose others. */
static int mpi_start(xj_status *st)
{
	int on = 0, provided;

	MPI_Initialized(&on);
	if (on)
		return XJ_OK;
	if (!getenv("OMPI_MCA_pml") && !getenv("OMPI_MCA_btl")) {
		setenv("OMPI_MCA_pml", "ob1", 0);
		setenv("OMPI_MCA_btl", "self,vader", 0);
	}
	comm_io_defaults();
	if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) !=
	    MPI_SUCCESS)
		return xj_fail(st, XJ_EXIT_INTERNAL, "MPI_Init failed");
	return XJ_OK;
}

void xjoin_finalize(void)
{
	int on = 0, done = 0;

	MPI_Initialized(&on);
	MPI_Finalized(&done);
	if (on && !done)
		MPI_Finalize();
}

/* The signals a run answers, and what the caller had on them. */
static const int run_signals[] = { SIGTERM, SIGINT, SIGUSR1, SIGUSR2,
				   SIGXFSZ };
#define NSIG_RUN ((int)(sizeof(run_signals) / sizeof(run_signals[0])))

int xjoin_run(int argc, const char **argv, char *err, size_t errlen)
{
	struct sigaction saved[NSIG_RUN];
	char **args = calloc((size_t)argc + 2, sizeof(char *));
	int action = OPTIONS_RUN, threads;
	jmp_buf jb;
	xj_status st;
	xj_comm c;
	xj_job job;

	xj_ok(&st);
	err[0] = '\0';
	if (!args) {
		snprintf(err, errlen, "out of memory");
		return XJ_EXIT_RESOURCE;
	}
	/* the parser's argv: a program name first */
	args[0] = "xjoin";
	for (int i = 0; i < argc; i++)
		args[i + 1] = (char *)argv[i];
	if (mpi_start(&st)) {
		free(args);
		snprintf(err, errlen, "%s", st.msg);
		return st.code;
	}
	for (int i = 0; i < NSIG_RUN; i++)
		sigaction(run_signals[i], NULL, &saved[i]);
	memset(&c, 0, sizeof(c));
	c.row = MPI_COMM_NULL;
	c.node = MPI_COMM_NULL;
	if (setjmp(jb) == 0) {
		/* xj_abort ends the call here instead of the process */
		comm_library_mode(&jb);
		comm_signals_reset();
		comm_init(&c, &st);
		comm_watch_signals();
		job_defaults(&job);
		options_parse(argc + 1, args, &job, &action, stdout, &st);
		if (!st.code && action == OPTIONS_RUN) {
			threads = job.threads > 0 ? job.threads :
				  join_threads(&c);
			omp_set_num_threads(threads);
			job.threads = threads;
			join_command(&job, &c, threads, &st);
		}
	} else {
		comm_library_status(&st);
	}
	comm_library_mode(NULL);
	comm_release(&c);
	for (int i = 0; i < NSIG_RUN; i++)
		sigaction(run_signals[i], &saved[i], NULL);
	fflush(stdout);
	fflush(stderr);
	free(args);
	snprintf(err, errlen, "%s", st.msg);
	return st.code;
}
