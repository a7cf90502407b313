/*
 * nccl_transport.cu: xj_transport over NCCL (see nccl_transport.h).
 *
 * Exchange: exchange_topk_reduce_scatter's all-to-all, on device buffers:
 *
 *   ncclGroupStart
 *     for every peer j: ncclSend(send + sdispl[j], scount[j])
 *                       ncclRecv(recv + rdispl[j], rcount[j])
 *   ncclGroupEnd                    (may answer ncclInProgress)
 *   poll ncclCommGetAsyncError      until the group is enqueued
 *   poll cudaStreamQuery            until the transfers are done
 *
 * Zero counts are skipped on both sides (a send of n to j is a receive
 * of n from this rank on j, so both skip together). Bytes moved per rank:
 * its send counts times 4 (keys) or 8 (indices); no arithmetic.
 *
 * Every poll loop checks the deadline (timeout_s from the start of the
 * call) and the communicator's asynchronous error, which is how a failure
 * on a peer shows up here. Polls back off from 1 us to 1 ms: an exchange
 * of the merge takes milliseconds, and a waiting rank should not take a
 * core from the ones still computing.
 *
 * NCCL comes from dlopen; the function pointers have the types of nccl.h
 * (decltype), so the compiler checks every call against the header.
 */
#include "nccl_transport.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <dlfcn.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nccl.h>

#define NCCL_MIN_VERSION NCCL_VERSION(2, 18, 0)
#define HOST_MAX 64

/* ---- the library ------------------------------------------------------- */

static struct nccl_api {
	void *lib;
	int version;
	decltype(&ncclGetVersion) GetVersion;
	decltype(&ncclGetUniqueId) GetUniqueId;
	decltype(&ncclCommInitRankConfig) CommInitRankConfig;
	decltype(&ncclCommGetAsyncError) CommGetAsyncError;
	decltype(&ncclCommFinalize) CommFinalize;
	decltype(&ncclCommDestroy) CommDestroy;
	decltype(&ncclCommAbort) CommAbort;
	decltype(&ncclGroupStart) GroupStart;
	decltype(&ncclGroupEnd) GroupEnd;
	decltype(&ncclSend) Send;
	decltype(&ncclRecv) Recv;
	decltype(&ncclGetErrorString) GetErrorString;
	decltype(&ncclGetLastError) GetLastError;
} api;

static int api_state;          /* 0: not tried, 1: loaded, -1: unusable */
static char api_why[256];

template <typename F>
static int api_sym(F *fn, const char *name)
{
	*fn = (F)dlsym(api.lib, name);
	if (*fn)
		return 0;
	snprintf(api_why, sizeof(api_why), "NCCL library has no %s", name);
	return -1;
}

static int api_load(void)
{
	const char *path = getenv("XJ_NCCL_LIBRARY");

	if (!path || !path[0])
		path = "libnccl.so.2";
	api.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!api.lib) {
		const char *e = dlerror();

		snprintf(api_why, sizeof(api_why), "cannot load %s (%s)", path,
			 e ? e : "dlopen failed");
		return -1;
	}
	if (api_sym(&api.GetVersion, "ncclGetVersion") ||
	    api_sym(&api.GetUniqueId, "ncclGetUniqueId") ||
	    api_sym(&api.CommInitRankConfig, "ncclCommInitRankConfig") ||
	    api_sym(&api.CommGetAsyncError, "ncclCommGetAsyncError") ||
	    api_sym(&api.CommFinalize, "ncclCommFinalize") ||
	    api_sym(&api.CommDestroy, "ncclCommDestroy") ||
	    api_sym(&api.CommAbort, "ncclCommAbort") ||
	    api_sym(&api.GroupStart, "ncclGroupStart") ||
	    api_sym(&api.GroupEnd, "ncclGroupEnd") ||
	    api_sym(&api.Send, "ncclSend") ||
	    api_sym(&api.Recv, "ncclRecv") ||
	    api_sym(&api.GetErrorString, "ncclGetErrorString") ||
	    api_sym(&api.GetLastError, "ncclGetLastError"))
		return -1;
	if (api.GetVersion(&api.version) != ncclSuccess ||
	    api.version < NCCL_MIN_VERSION) {
		snprintf(api_why, sizeof(api_why),
			 "%s is NCCL version code %d; 2.18 (%d) or newer is needed",
			 path, api.version, NCCL_MIN_VERSION);
		return -1;
	}
	return 0;
}

extern "C" int nccl_transport_available(char *why, size_t why_size)
{
	if (api_state == 0)
		api_state = api_load() == 0 ? 1 : -1;
	if (why_size)
		snprintf(why, why_size, "%s", api_state > 0 ? "" : api_why);
	return api_state > 0;
}

/* ---- state ----------------------------------------------------------------- */

typedef struct nccl_ctx {
	ncclComm_t comm;        /* NULL once aborted or closed */
	cudaStream_t stream;
	int device;
	double timeout_s;
	int world_rank;
	char host[HOST_MAX];
	nccl_fatal_fn fatal;
} nccl_ctx;

static int nccl_alltoallv(const xj_transport *t, xj_elem type,
			  const void *send, const int64_t *scount,
			  const int64_t *sdispl, void *recv,
			  const int64_t *rcount, const int64_t *rdispl,
			  xj_status *st);

extern "C" int nccl_transport_is(const xj_transport *t)
{
	return t && t->alltoallv == nccl_alltoallv && t->ctx;
}

static nccl_ctx *ctx_of(const xj_transport *t)
{
	return (nccl_ctx *)t->ctx;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sleep between polls: 1 us doubling to 1 ms. */
static void poll_pause(int round)
{
	long ns = round < 10 ? 1000L << round : 1000000L;
	struct timespec ts = { 0, ns };

	nanosleep(&ts, NULL);
}

/* The rank, host and call of every message. */
static int ctx_fail(const xj_transport *t, int code, const char *call,
		    xj_status *st, const char *what)
{
	const nccl_ctx *x = ctx_of(t);

	return xj_fail(st, code, "NCCL transport (rank %d of %d in the grid row, world rank %d on %s, device %d): %s: %s",
		       t->rank, t->size, x->world_rank, x->host, x->device,
		       call, what);
}

static void comm_abort(nccl_ctx *x)
{
	if (x->comm)
		(void)api.CommAbort(x->comm);
	x->comm = NULL;
}

/* Abort after a failure, then let the fatal handler end the job. */
static int fail_abort(const xj_transport *t, int code, const char *call,
		      const char *what, xj_status *st)
{
	nccl_ctx *x = ctx_of(t);
	char full[768];

	snprintf(full, sizeof(full), "%s; the communicator was aborted", what);
	ctx_fail(t, code, call, st, full);
	comm_abort(x);
	if (x->fatal)
		x->fatal(st->code, st->msg);
	return st->code;
}

static int nccl_error(const xj_transport *t, ncclResult_t r,
		      const char *call, xj_status *st)
{
	nccl_ctx *x = ctx_of(t);
	const char *last = x->comm ? api.GetLastError(x->comm) : NULL;
	char what[512];

	snprintf(what, sizeof(what), "%s%s%s", api.GetErrorString(r),
		 last && last[0] ? ": " : "", last ? last : "");
	return fail_abort(t, XJ_EXIT_INTERNAL, call, what, st);
}

static int timed_out(const xj_transport *t, const char *call, xj_status *st)
{
	char what[256];

	snprintf(what, sizeof(what),
		 "no progress within %.0f s (a rank of the grid row failed or is stuck; XJ_NCCL_TIMEOUT sets the limit)",
		 ctx_of(t)->timeout_s);
	return fail_abort(t, XJ_EXIT_RESOURCE, call, what, st);
}

/* Poll the communicator until the call that answered ncclInProgress is
 * done (init, group, finalize). */
static int wait_comm(const xj_transport *t, const char *call, double t0,
		     xj_status *st)
{
	nccl_ctx *x = ctx_of(t);

	for (int round = 0;; round++) {
		ncclResult_t state = ncclInProgress;
		ncclResult_t r = api.CommGetAsyncError(x->comm, &state);

		if (r != ncclSuccess)
			return nccl_error(t, r, "ncclCommGetAsyncError", st);
		if (state == ncclSuccess)
			return XJ_OK;
		if (state != ncclInProgress)
			return nccl_error(t, state, call, st);
		if (now_s() - t0 > x->timeout_s)
			return timed_out(t, call, st);
		poll_pause(round);
	}
}

/* Poll the transport's stream until the enqueued transfers are done. */
static int wait_stream(const xj_transport *t, const char *call, double t0,
		       xj_status *st)
{
	nccl_ctx *x = ctx_of(t);

	for (int round = 0;; round++) {
		cudaError_t e = cudaStreamQuery(x->stream);
		ncclResult_t state = ncclSuccess;
		ncclResult_t r;
		char what[256];

		if (e == cudaSuccess)
			return XJ_OK;
		if (e != cudaErrorNotReady) {
			snprintf(what, sizeof(what), "cudaStreamQuery: %s (%s)",
				 cudaGetErrorString(e), cudaGetErrorName(e));
			(void)cudaGetLastError();
			return fail_abort(t, XJ_EXIT_INTERNAL, call, what, st);
		}
		r = api.CommGetAsyncError(x->comm, &state);
		if (r != ncclSuccess)
			return nccl_error(t, r, "ncclCommGetAsyncError", st);
		if (state != ncclSuccess && state != ncclInProgress)
			return nccl_error(t, state, call, st);
		if (now_s() - t0 > x->timeout_s)
			return timed_out(t, call, st);
		poll_pause(round);
	}
}

/* A call that may answer ncclInProgress (non-blocking communicator). */
static int nccl_call(const xj_transport *t, ncclResult_t r, const char *call,
		     double t0, xj_status *st)
{
	if (r == ncclInProgress)
		return wait_comm(t, call, t0, st);
	if (r != ncclSuccess)
		return nccl_error(t, r, call, st);
	return XJ_OK;
}

/* ---- exchange ----------------------------------------------------------- */

static int nccl_alltoallv(const xj_transport *t, xj_elem type,
			  const void *send, const int64_t *scount,
			  const int64_t *sdispl, void *recv,
			  const int64_t *rcount, const int64_t *rdispl,
			  xj_status *st)
{
	nccl_ctx *x = ctx_of(t);
	ncclDataType_t dt = type == XJ_T_F32 ? ncclFloat32 : ncclInt64;
	size_t esize = type == XJ_T_F32 ? sizeof(float) : sizeof(int64_t);
	const char *s = (const char *)send;
	char *r = (char *)recv;
	double t0 = now_s();
	ncclResult_t first = ncclSuccess, end;
	cudaError_t e;

	if (!x->comm)
		return ctx_fail(t, XJ_EXIT_INTERNAL, "alltoallv", st,
				"the communicator was aborted earlier");
	e = cudaSetDevice(x->device);
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		return ctx_fail(t, XJ_EXIT_INTERNAL, "cudaSetDevice", st,
				cudaGetErrorString(e));
	}
	for (int j = 0; j < t->size; j++)
		if (scount[j] < 0 || rcount[j] < 0 || sdispl[j] < 0 ||
		    rdispl[j] < 0)
			return ctx_fail(t, XJ_EXIT_INTERNAL, "alltoallv", st,
					"negative count or displacement");
	/* once open, the group is always closed, so NCCL's group state
	 * stays consistent when a call inside it fails */
	first = api.GroupStart();
	if (first != ncclSuccess)
		return nccl_error(t, first, "ncclGroupStart", st);
	for (int j = 0; j < t->size && first == ncclSuccess; j++) {
		if (scount[j] > 0)
			first = api.Send(s + (size_t)sdispl[j] * esize,
					 (size_t)scount[j], dt, j, x->comm,
					 x->stream);
		if (first == ncclSuccess && rcount[j] > 0)
			first = api.Recv(r + (size_t)rdispl[j] * esize,
					 (size_t)rcount[j], dt, j, x->comm,
					 x->stream);
	}
	end = api.GroupEnd();
	if (first != ncclSuccess && first != ncclInProgress)
		return nccl_error(t, first, "ncclSend/ncclRecv", st);
	if (nccl_call(t, end, "ncclGroupEnd (send/recv of the merge)", t0, st))
		return st->code;
	return wait_stream(t, "ncclSend/ncclRecv (merge exchange)", t0, st);
}

/* ---- open and close ----------------------------------------------------- */

/* Rank 0's id, or its failure, reaches every rank of the row. */
typedef struct id_msg {
	int ok;
	ncclUniqueId id;
} id_msg;

static int share_id(const xj_group *g, id_msg *m, xj_status *st)
{
	memset(m, 0, sizeof(*m));
	if (g->rank == 0)
		m->ok = api.GetUniqueId(&m->id) == ncclSuccess;
	if (g->bcast0(g, m, (int64_t)sizeof(*m), st))
		return xj_wrap(st, "NCCL transport: sharing the NCCL id");
	if (!m->ok)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "NCCL transport: ncclGetUniqueId failed on rank 0 of the grid row");
	return XJ_OK;
}

static void ctx_init(const xj_group *g, int device, double timeout_s,
		     xj_transport *t, nccl_ctx *x)
{
	memset(t, 0, sizeof(*t));
	t->name = "nccl";
	t->alltoallv = nccl_alltoallv;
	t->ctx = x;
	t->size = g->size;
	t->rank = g->rank;
	x->device = device;
	x->timeout_s = timeout_s;
	x->world_rank = g->world_rank;
	snprintf(x->host, sizeof(x->host), "%s",
		 g->host ? g->host : "unknown-host");
}

static void ctx_free(xj_transport *t)
{
	nccl_ctx *x = ctx_of(t);

	if (!x)
		return;
	comm_abort(x);
	if (x->stream) {
		(void)cudaSetDevice(x->device);
		(void)cudaStreamDestroy(x->stream);
	}
	(void)cudaGetLastError();
	free(x);
	t->ctx = NULL;
	t->alltoallv = NULL;
}

static int comm_create(xj_transport *t, const id_msg *m, xj_status *st)
{
	nccl_ctx *x = ctx_of(t);
	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	double t0 = now_s();
	cudaError_t e;
	ncclResult_t r;

	config.blocking = 0;
	e = cudaSetDevice(x->device);
	if (e == cudaSuccess)
		e = cudaStreamCreateWithFlags(&x->stream,
					      cudaStreamNonBlocking);
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		return ctx_fail(t, e == cudaErrorMemoryAllocation ?
				XJ_EXIT_RESOURCE : XJ_EXIT_INTERNAL,
				"cudaSetDevice/cudaStreamCreate", st,
				cudaGetErrorString(e));
	}
	r = api.CommInitRankConfig(&x->comm, t->size, m->id, t->rank, &config);
	if (r != ncclSuccess && r != ncclInProgress) {
		/* no communicator to poll or abort unless NCCL made one */
		return nccl_error(t, r, "ncclCommInitRankConfig", st);
	}
	if (!x->comm)
		return ctx_fail(t, XJ_EXIT_INTERNAL, "ncclCommInitRankConfig",
				st, "no communicator returned");
	return nccl_call(t, r, "ncclCommInitRankConfig", t0, st);
}

extern "C" int nccl_transport_open(const xj_group *g, int device,
				   double timeout_s, xj_transport *t,
				   xj_status *st)
{
	char why[256];
	nccl_ctx *x;
	id_msg m;

	memset(t, 0, sizeof(*t));
	if (!nccl_transport_available(why, sizeof(why)))
		return xj_fail(st, XJ_EXIT_INTERNAL, "NCCL transport: %s", why);
	if (!(timeout_s > 0))
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "NCCL transport: timeout %g s", timeout_s);
	x = (nccl_ctx *)calloc(1, sizeof(*x));
	if (!x)
		return xj_fail(st, XJ_EXIT_RESOURCE,
			       "NCCL transport: out of memory");
	ctx_init(g, device, timeout_s, t, x);
	if (share_id(g, &m, st) || comm_create(t, &m, st)) {
		ctx_free(t);
		memset(t, 0, sizeof(*t));
		return st->code;
	}
	return XJ_OK;
}

extern "C" void nccl_transport_on_fatal(xj_transport *t, nccl_fatal_fn fatal)
{
	if (nccl_transport_is(t))
		ctx_of(t)->fatal = fatal;
}

extern "C" int nccl_transport_abandon(const xj_transport *t, xj_status *st)
{
	nccl_ctx *x = nccl_transport_is(t) ? ctx_of(t) : NULL;

	if (!x)
		return st->code;
	xj_wrap(st, "world rank %d on %s cannot take part in the merge exchange of its grid row",
		x->world_rank, x->host);
	comm_abort(x);
	if (x->fatal)
		x->fatal(st->code, st->msg);
	return st->code;
}

extern "C" void nccl_transport_abort(xj_transport *t)
{
	if (!nccl_transport_is(t))
		return;
	ctx_free(t);
	memset(t, 0, sizeof(*t));
}

extern "C" void nccl_transport_close(xj_transport *t)
{
	nccl_ctx *x;
	xj_status st;

	if (!nccl_transport_is(t))
		return;
	x = ctx_of(t);
	/* every exchange is complete by now: a failure to finalise only
	 * aborts the communicator, and must not end the job */
	x->fatal = NULL;
	xj_ok(&st);
	if (x->comm && cudaSetDevice(x->device) == cudaSuccess &&
	    !nccl_call(t, api.CommFinalize(x->comm), "ncclCommFinalize",
		       now_s(), &st) && x->comm) {
		(void)api.CommDestroy(x->comm);
		x->comm = NULL;
	}
	ctx_free(t);
	memset(t, 0, sizeof(*t));
}
