/* comm.c: communicators, error agreement, the MPI transport. */
#define _GNU_SOURCE
#include "comm.h"

#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "watch.h"


static char self_host[256] = "?";
static int self_rank = -1;

/* In-process (app/api): where xj_abort goes instead of MPI_Abort, and
 * what it said. */
static jmp_buf *lib_jump;
static xj_status lib_status;

void comm_library_mode(jmp_buf *jb)
{
	lib_jump = jb;
}

void comm_library_status(xj_status *st)
{
	*st = lib_status;
}

_Noreturn void xj_abort(int code, const char *fmt, ...)
{
	va_list ap;

	if (lib_jump) {
		jmp_buf *jb = lib_jump;

		lib_jump = NULL;
		lib_status.code = code ? code : XJ_EXIT_INTERNAL;
		va_start(ap, fmt);
		vsnprintf(lib_status.msg, sizeof(lib_status.msg), fmt, ap);
		va_end(ap);
		longjmp(*jb, 1);
	}
	fprintf(stderr, "xjoin: fatal [%s rank %d]: ", self_host, self_rank);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	watch_depart(code ? code : XJ_EXIT_INTERNAL);
	MPI_Abort(MPI_COMM_WORLD, code ? code : XJ_EXIT_INTERNAL);
	exit(code ? code : XJ_EXIT_INTERNAL);
}

_Noreturn void comm_mpi_fatal(int rc, const char *what, const char *file,
			      int line)
{
	char msg[MPI_MAX_ERROR_STRING] = "";
	int len = 0;

	MPI_Error_string(rc, msg, &len);
	xj_abort(XJ_EXIT_INTERNAL, "%s:%d: %s failed: %s", file, line, what,
		 msg);
}

static int quiet;

void comm_quiet(int q)
{
	quiet = q;
}

int comm_is_quiet(void)
{
	return quiet;
}

void xj_log0(const char *fmt, ...)
{
	va_list ap;

	if (self_rank != 0 || quiet)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

int comm_init(xj_comm *c, xj_status *st)
{
	memset(c, 0, sizeof(*c));
	c->world = MPI_COMM_WORLD;
	c->row = MPI_COMM_NULL;
	MPI_CHECK(MPI_Comm_rank(c->world, &c->rank));
	MPI_CHECK(MPI_Comm_size(c->world, &c->nranks));
	MPI_CHECK(MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, c->rank,
				      MPI_INFO_NULL, &c->node));
	MPI_CHECK(MPI_Comm_rank(c->node, &c->local_rank));
	MPI_CHECK(MPI_Comm_size(c->node, &c->local_size));
	if (gethostname(c->host, sizeof(c->host) - 1))
		snprintf(c->host, sizeof(c->host), "unknown-host");
	snprintf(self_host, sizeof(self_host), "%s", c->host);
	self_rank = c->rank;
	(void)st;
	return XJ_OK;
}

int comm_grid(xj_comm *c, int pc, xj_status *st)
{
	MPI_CHECK(MPI_Comm_split(c->world, c->rank / pc, c->rank % pc,
				 &c->row));
	MPI_CHECK(MPI_Comm_rank(c->row, &c->row_rank));
	MPI_CHECK(MPI_Comm_size(c->row, &c->row_size));
	(void)st;
	return XJ_OK;
}

void comm_release(xj_comm *c)
{
	if (c->row != MPI_COMM_NULL)
		MPI_Comm_free(&c->row);
	if (c->node != MPI_COMM_NULL)
		MPI_Comm_free(&c->node);
}

void comm_io_defaults(void)
{
	setenv("OMPI_MCA_io", "^ompio", 0);
}

static volatile sig_atomic_t caught_signal;

static void on_signal(int sig)
{
	caught_signal = sig;
}

void comm_watch_signals(void)
{
	static const int sigs[] = { SIGTERM, SIGINT, SIGUSR1, SIGUSR2 };
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	/* past a file size limit (ulimit -f) a write must fail with EFBIG,
	 * which names the file, rather than kill the rank */
	signal(SIGXFSZ, SIG_IGN);
}

int comm_interrupted(void)
{
	return caught_signal;
}

void comm_signals_reset(void)
{
	caught_signal = 0;
}

int comm_agree(xj_comm *c, xj_status *st)
{
	if (caught_signal && st->code == XJ_OK)
		xj_fail(st, XJ_EXIT_INTERRUPTED, "interrupted by signal %d "
			"(%s) on %s", (int)caught_signal,
			strsignal(caught_signal), c->host);
	return comm_agree_errors(c, st);
}

int comm_agree_errors(xj_comm *c, xj_status *st)
{
	int in[2] = { st->code, st->code ? c->rank : c->nranks };
	int code, first;

	MPI_CHECK(MPI_Allreduce(&in[0], &code, 1, MPI_INT, MPI_MAX, c->world));
	if (code == XJ_OK)
		return XJ_OK;
	MPI_CHECK(MPI_Allreduce(&in[1], &first, 1, MPI_INT, MPI_MIN, c->world));
	MPI_CHECK(MPI_Bcast(st->msg, sizeof(st->msg), MPI_CHAR, first,
			    c->world));
	MPI_CHECK(MPI_Bcast(&st->code, 1, MPI_INT, first, c->world));
	st->msg[sizeof(st->msg) - 1] = '\0';
	return st->code;
}

/* ---- MPI transport ---------------------------------------------------- */

static int mpi_alltoallv(const xj_transport *t, xj_elem type,
			 const void *send, const int64_t *scount,
			 const int64_t *sdispl, void *recv,
			 const int64_t *rcount, const int64_t *rdispl,
			 xj_status *st)
{
	MPI_Comm comm = *(const MPI_Comm *)t->ctx;
	MPI_Datatype dt = type == XJ_T_F32 ? MPI_FLOAT : MPI_INT64_T;
	int n = t->size, rc = XJ_OK;
	int *sc = malloc(4 * n * sizeof(int));

	if (!sc)
		return xj_fail(st, XJ_EXIT_RESOURCE, "out of memory (merge)");
	for (int i = 0; i < n; i++) {
		/* plan.c caps list entries per exchange far below INT_MAX */
		sc[i] = (int)scount[i];
		sc[n + i] = (int)sdispl[i];
		sc[2 * n + i] = (int)rcount[i];
		sc[3 * n + i] = (int)rdispl[i];
	}
	MPI_CHECK(MPI_Alltoallv(send, sc, sc + n, dt, recv, sc + 2 * n,
				sc + 3 * n, dt, comm));
	free(sc);
	return rc;
}

void comm_mpi_transport(const MPI_Comm *comm, xj_transport *t)
{
	memset(t, 0, sizeof(*t));
	t->ctx = (void *)comm;
	t->name = "mpi";
	MPI_Comm_size(*comm, &t->size);
	MPI_Comm_rank(*comm, &t->rank);
	t->alltoallv = mpi_alltoallv;
}

/* ---- a grid row as a group, for a transport's start-up ----------------- */

static int row_bcast0(const xj_group *g, void *buf, int64_t bytes,
		      xj_status *st)
{
	const xj_comm *c = g->ctx;
	int rc;

	if (bytes < 0 || bytes > INT32_MAX)
		return xj_fail(st, XJ_EXIT_INTERNAL, "broadcast of %" PRId64
			       " bytes", bytes);
	rc = MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, c->row);
	if (rc != MPI_SUCCESS)
		return xj_fail(st, XJ_EXIT_INTERNAL, "MPI_Bcast over the grid "
			       "row failed (MPI error %d)", rc);
	return XJ_OK;
}

void comm_row_group(const xj_comm *c, xj_group *g)
{
	memset(g, 0, sizeof(*g));
	g->size = c->row_size;
	g->rank = c->row_rank;
	g->world_rank = c->rank;
	g->host = c->host;
	g->bcast0 = row_bcast0;
	g->ctx = (void *)c;
}
