/*
 * main.c: xjoin's entry point. The whole data flow, top to bottom:
 *
 *   options (cli + INI) -> job -> inputs probed -> device chosen
 *   -> precision (auto: measured on a sample, or cached) -> plan
 *   -> backend created -> output created -> inputs validated
 *   -> driver (read slabs, backend, merge, write) -> attributes
 *   -> rename into place -> report
 *
 * While a join runs, every rank's watcher (watch.h) ends the job within a
 * bound when a rank stops answering (a dead node or link).
 *
 * Rank 0 resolves the job and probes the inputs; every rank learns the
 * verdict (comm_agree) before any collective step, then receives the job.
 */
#define _GNU_SOURCE
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../config/job.h"
#include "../io/h5out.h"
#include "cli/options.h"
#include "driver/join.h"
#include "inspect/inspect.h"
#include "plan/device.h"
#include "plan/gen.h"
#include "run/comm.h"
#include "run/guard.h"
#include "run/watch.h"

/* Print the agreed error once (rank 0) and return its exit code. */
static int report_error(const xj_comm *c, const xj_status *st)
{
	if (c->rank == 0) {
		fprintf(stderr, "xjoin: %s: %s\n", xj_exit_name(st->code),
			st->msg);
		fflush(stderr);
	}
	return st->code;
}

/*
 * A job whose ranks all share one node needs no network transport, yet
 * Open MPI's default start-up probes every one it knows (UCX, OFI, ...),
 * which costs about 0.25 s per run, a sixth of a 10k x 100k join. Here
 * (a singleton, or mpirun with local size == world size) shared memory is
 * chosen instead, unless the user set a transport. Only host buffers go
 * through MPI, so nothing else depends on the transport.
 */
static void mpi_single_node_defaults(void)
{
	const char *world = getenv("OMPI_COMM_WORLD_SIZE");
	const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");

	if (world && (!local || strcmp(world, local) != 0))
		return;
	if (!world && getenv("PMIX_RANK"))
		return;   /* launched by srun: leave it to the site */
	if (getenv("OMPI_MCA_pml") || getenv("OMPI_MCA_btl"))
		return;
	setenv("OMPI_MCA_pml", "ob1", 0);
	setenv("OMPI_MCA_btl", "self,vader", 0);
}

static volatile sig_atomic_t exit_code;

static void finalize_timeout(int sig)
{
	(void)sig;
	_exit(exit_code);
}

/* MPI_Finalize waits for the other ranks; on a node whose link was cut
 * after the job's last write nobody answers and the heartbeats have
 * ended: a rank there leaves after --peer-timeout + 10 s with its code. */
static void finalize_bounded(const xj_job *job, int code)
{
	exit_code = code;
	if (job->peer_timeout_s > 0) {
		signal(SIGALRM, finalize_timeout);
		alarm((unsigned)(job->peer_timeout_s < 3600 ?
				 job->peer_timeout_s + 10 : 3610));
	}
	MPI_Finalize();
	alarm(0);
}

int main(int argc, char **argv)
{
	xj_comm c;
	xj_status st;
	xj_job job;
	int provided, action = OPTIONS_RUN, code, threads;

	mpi_single_node_defaults();
	comm_io_defaults();
	/* a stop (TERM, USR1) that comes while MPI starts is one too: the
	 * handlers go in before MPI_Init, and again after it */
	comm_watch_signals();
	if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) !=
	    MPI_SUCCESS) {
		fprintf(stderr, "xjoin: internal error: MPI_Init failed\n");
		return XJ_EXIT_INTERNAL;
	}
	xj_ok(&st);
	comm_init(&c, &st);
	comm_watch_signals();
	guard_install();
	job_defaults(&job);
	if (c.rank == 0)
		options_parse(argc, argv, &job, &action, stdout, &st);
	if (comm_agree(&c, &st)) {
		code = report_error(&c, &st);
		goto out;
	}
	MPI_CHECK(MPI_Bcast(&action, 1, MPI_INT, 0, c.world));
	MPI_CHECK(MPI_Bcast(&job, sizeof(job), MPI_BYTE, 0, c.world));
	code = XJ_OK;
	if (action != OPTIONS_RUN)
		goto out;

	threads = job.threads > 0 ? job.threads : join_threads(&c);
	omp_set_num_threads(threads);
	job.threads = threads;
	if (job.command == XJ_CMD_TOPK || job.command == XJ_CMD_MATRIX ||
	    job.command == XJ_CMD_RANGE)
		watch_start(&job, &c);
	join_command(&job, &c, threads, &st);
	if (st.code)
		code = report_error(&c, &st);
out:
	watch_end(&c);
	comm_release(&c);
	if (h5out_unclean()) {
		/* every rank failed the same collective close: end without
		 * HDF5's clean-up in MPI_Finalize, which would crash */
		fflush(stdout);
		fflush(stderr);
		_exit(code);
	}
	finalize_bounded(&job, code);
	return code;
}
