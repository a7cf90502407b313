/* device.c: the backend and GPU of every rank (see device.h for rules). */
#define _GNU_SOURCE
#include "device.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>
#include <strings.h>

#include "../../kernels/cpu/cpu_gemm.h"
#include "../../kernels/metric.h"
#include "cuda_module.h"
#include "version.h"

#define BUS_ID_MAX 32
#define LIST_LINE_MAX 512

/* comm_agree takes a mutable comm but changes nothing in it. */
static int agree(const xj_comm *c, xj_status *st)
{
	xj_comm copy = *c;

	return comm_agree(&copy, st);
}

/* The lowest rank where flag is set, or -1. Collective. */
static int lowest_rank(const xj_comm *c, int flag)
{
	int mine = flag ? c->rank : c->nranks, who;

	MPI_CHECK(MPI_Allreduce(&mine, &who, 1, MPI_INT, MPI_MIN, c->world));
	return who < c->nranks ? who : -1;
}

/* Free memory from backend_cuda_device_info's line ("..., F of T GiB
 * free"): backend_cuda.h reports it nowhere else. Its 0.1 GiB rounding is
 * small next to the share --gpu-mem-fraction keeps back, and
 * backend_cuda_create checks the exact figure anyway. -1: another form. */
static int64_t info_free_bytes(const char *line)
{
	const char *tail = strrchr(line, ',');
	double free_gib, total_gib;

	if (!tail || sscanf(tail, ", %lf of %lf GiB free", &free_gib,
			    &total_gib) != 2 || free_gib < 0)
		return -1;
	return (int64_t)(free_gib * (double)(INT64_C(1) << 30));
}

/* "[0000:01:00.0] ..." -> "0000:01:00.0"; the index when the line has no
 * bus id, which treats equal indices as one GPU (true unless ranks see
 * different device sets, the case bus ids are there for). */
static void info_bus_id(const char *line, int device, char *bus,
			size_t size)
{
	const char *end = line[0] == '[' ? strchr(line, ']') : NULL;

	if (end && end > line + 1)
		snprintf(bus, size, "%.*s", (int)(end - line - 1), line + 1);
	else
		snprintf(bus, size, "device %d", device);
}

/* This rank alone: usable GPUs, the one it takes, its line. Where the
 * CUDA module does not load, the line says why (cuda_module.h). */
static void probe_local(const xj_comm *c, xj_device_choice *ch)
{
	const struct xjc_module *cu = cuda_module_load(ch->info,
						       sizeof(ch->info));

	if (!cu)
		return;
	cu->probe(&ch->ndevices, ch->info, sizeof(ch->info));
	if (ch->ndevices == 0)
		return;
	ch->device = c->local_rank % ch->ndevices;
	if (cu->device_info(ch->device, ch->info, sizeof(ch->info))) {
		ch->device = -1;   /* the line says what failed */
		return;
	}
	ch->free_bytes = info_free_bytes(ch->info);
}

/* Collective over c->node: how many of the node's ranks use this rank's
 * GPU and how many distinct GPUs they use. Compared by bus id, not index:
 * ranks bound to different GPUs (CUDA_VISIBLE_DEVICES per task) all call
 * theirs device 0. */
static void count_sharing(const xj_comm *c, xj_device_choice *ch)
{
	char mine[BUS_ID_MAX] = "", *all;
	int n = c->local_size;

	if (ch->device >= 0)
		info_bus_id(ch->info, ch->device, mine, sizeof(mine));
	all = calloc((size_t)n, BUS_ID_MAX);
	if (!all)
		xj_abort(XJ_EXIT_RESOURCE, "out of memory (%d bus ids)", n);
	MPI_CHECK(MPI_Allgather(mine, BUS_ID_MAX, MPI_CHAR, all, BUS_ID_MAX,
				MPI_CHAR, c->node));
	ch->sharing = 1;
	ch->node_gpus = 0;
	for (int i = 0; i < n; i++) {
		const char *bus = all + (size_t)i * BUS_ID_MAX;
		int seen = 0;

		if (!bus[0])
			continue;
		if (i != c->local_rank && strcmp(bus, mine) == 0)
			ch->sharing++;
		for (int j = 0; j < i && !seen; j++)
			seen = strcmp(bus, all + (size_t)j * BUS_ID_MAX) == 0;
		ch->node_gpus += !seen;
	}
	free(all);
}

static int check_gpu(const xj_job *job, const xj_comm *c,
		     const xj_device_choice *ch, xj_status *st)
{
	if (job->device != XJ_DEVICE_GPU)
		return XJ_OK;
	if (ch->device < 0)
		return xj_fail(st, XJ_EXIT_RESOURCE,
			       "--device gpu: no usable GPU on %s: %s", c->host,
			       ch->info);
	if (ch->sharing > 1 && !job->gpu_share)
		return xj_fail(st, XJ_EXIT_RESOURCE,
			       "--device gpu: %d ranks on %s and %d GPU(s) for "
			       "them; give --gpu-share to let ranks share a GPU, "
			       "or start at most %d rank(s) per node",
			       c->local_size, c->host, ch->node_gpus,
			       ch->node_gpus);
	return XJ_OK;
}

/* Written by the rank that explains an all-CPU verdict. */
static void note_cpu(const xj_comm *c, const xj_device_choice *ch,
		     int some_have_gpu, char *note, size_t size)
{
	if (!some_have_gpu)
		snprintf(note, size, "no usable GPU (%s): using the CPU "
			 "backend", ch->info);
	else
		snprintf(note, size, "no usable GPU on rank %d, %s (%s): "
			 "using the CPU backend on all %d ranks, so that all "
			 "merge alike", c->rank, c->host, ch->info, c->nranks);
}

/* Every rank uses the same backend kind: one without a GPU makes all use
 * the CPU (under auto; gpu has failed by now). One rank, the lowest
 * concerned, writes the note; all get it. Collective. */
static void agree_kind(const xj_job *job, const xj_comm *c,
		       xj_device_choice *ch)
{
	char note[sizeof(ch->note)] = "";
	int has = ch->device >= 0, all, who = -1;

	MPI_CHECK(MPI_Allreduce(&has, &all, 1, MPI_INT, MPI_MIN, c->world));
	ch->kind = all ? XJ_BACKEND_CUDA : XJ_BACKEND_CPU;
	if (!all) {
		int some = lowest_rank(c, has) >= 0;

		who = lowest_rank(c, !has);
		if (c->rank == who)
			note_cpu(c, ch, some, note, sizeof(note));
	} else if (job->device == XJ_DEVICE_AUTO && !job->gpu_share) {
		who = lowest_rank(c, ch->sharing > 1);
		if (c->rank == who)
			snprintf(note, sizeof(note), "%d ranks on %s share %d "
				 "GPU(s), round robin by local rank",
				 c->local_size, c->host, ch->node_gpus);
	}
	if (who >= 0)
		MPI_CHECK(MPI_Bcast(note, sizeof(note), MPI_CHAR, who,
				    c->world));
	memcpy(ch->note, note, sizeof(note));
}

/*
 * --precision for the backend that runs (this rank's: ranks on different
 * CPUs may differ, which changes only how many candidates are rescored).
 * A precision of the other backend falls back to fp32 with a note, as the
 * result is the same; a CPU precision this build or CPU cannot run
 * exactly is an error (kernels/cpu/cpu_gemm.h).
 */
static int resolve_precision(const xj_job *job, xj_device_choice *ch,
			     xj_status *st)
{
	size_t len = strlen(ch->note);
	xj_precision p = job->precision;
	int gpu = ch->kind != XJ_BACKEND_CPU;
	int other = gpu ? p == XJ_PREC_INT8 :
			  p == XJ_PREC_TF32 || p == XJ_PREC_FP16;

	ch->precision = p;
	ch->precision_why[0] = 0;
	if ((job->command == XJ_CMD_RANGE || job->plan_of == XJ_CMD_RANGE) &&
	    (gpu || p == XJ_PREC_AUTO || other)) {
		/* The CPU's range join takes bf16 and int8 when asked (its
		 * scan uses the rounded rows' bound, as top-k's does: the
		 * same pairs, integration/range_cases.py); auto stays fp32,
		 * whose candidates are fewest where every candidate within
		 * the threshold is kept. The GPU's range join runs fp32. */
		ch->precision = XJ_PREC_FP32;
		if (gpu || !other)
			snprintf(ch->precision_why, sizeof(ch->precision_why),
				 "%s", gpu ? "GPU range joins run fp32" :
				 "auto: fp32 for range joins");
		else
			snprintf(ch->precision_why, sizeof(ch->precision_why),
				 "%s asked: a GPU precision", precision_name(p));
		if (p != XJ_PREC_FP32 && p != XJ_PREC_AUTO)
			snprintf(ch->note + len, sizeof(ch->note) - len,
				 "%s--precision %s has no effect on a range join on the %s backend, whose candidate GEMM is then fp32",
				 len ? "; " : "", precision_name(p),
				 gpu ? "CUDA" : "CPU");
		return XJ_OK;
	}
	if (other) {
		ch->precision = XJ_PREC_FP32;
		snprintf(ch->precision_why, sizeof(ch->precision_why),
			 "%s asked: a %s precision", precision_name(p),
			 gpu ? "CPU" : "GPU");
		snprintf(ch->note + len, sizeof(ch->note) - len,
			 "%s--precision %s has no effect on the %s backend, whose candidate GEMM is then fp32",
			 len ? "; " : "", precision_name(p),
			 gpu ? "CUDA" : "CPU");
		return XJ_OK;
	}
	if (gpu) {
		if (p == XJ_PREC_AUTO)
			ch->precision = XJ_PREC_FP32;
		snprintf(ch->precision_why, sizeof(ch->precision_why), "%s",
			 p == XJ_PREC_AUTO ? "auto: fp32 on GPUs" : "as asked");
		return XJ_OK;
	}
	return cpu_gemm_resolve(p, job->d, job->k, &ch->precision,
				ch->precision_why,
				sizeof(ch->precision_why), st);
}

int device_select(const xj_job *job, const xj_comm *c, xj_device_choice *out,
		  xj_status *st)
{
	memset(out, 0, sizeof(*out));
	out->kind = XJ_BACKEND_CPU;
	out->device = -1;
	out->sharing = 1;
	out->free_bytes = -1;
	if (job->device == XJ_DEVICE_CPU) {
		snprintf(out->info, sizeof(out->info),
			 "not probed (--device cpu)");
		resolve_precision(job, out, st);
		return agree(c, st) ? st->code : XJ_OK;
	}
	probe_local(c, out);
	count_sharing(c, out);
	check_gpu(job, c, out, st);
	if (agree(c, st))
		return st->code;
	agree_kind(job, c, out);
	resolve_precision(job, out, st);
	return agree(c, st) ? st->code : XJ_OK;
}

double device_mem_fraction(const xj_job *job, const xj_device_choice *ch)
{
	return job->gpu_mem_fraction / (ch->sharing > 1 ? ch->sharing : 1);
}

int64_t device_budget_bytes(const xj_job *job, const xj_device_choice *ch)
{
	if (ch->kind != XJ_BACKEND_CUDA || ch->free_bytes < 0)
		return INT64_MAX;
	return (int64_t)((double)ch->free_bytes *
			 device_mem_fraction(job, ch));
}

/* ---- xjoin devices ------------------------------------------------------ */

static void list_line(const xj_job *job, const xj_comm *c,
		      const xj_device_choice *ch, char *line, size_t size)
{
	const char *why = ch->device >= 0 || job->device == XJ_DEVICE_CPU ?
			  "" : "no usable GPU: ";
	char dev[16] = "cpu";
	int len;

	if (ch->device >= 0)
		snprintf(dev, sizeof(dev), "%d", ch->device);
	len = snprintf(line, size, "rank %3d  host %-20s  local %d/%d  pid %7d"
		       "  device %-3s  %s%s", c->rank, c->host, c->local_rank,
		       c->local_size, (int)getpid(), dev, why, ch->info);
	if (ch->sharing > 1 && len > 0 && (size_t)len < size)
		snprintf(line + len, size - (size_t)len,
			 " (shared by %d ranks)", ch->sharing);
}

static void list_print(const xj_job *job, const xj_comm *c,
		       const xj_device_choice *ch, int ok, const char *all)
{
	printf("# xjoin %s devices: %d rank(s), --device %s\n", XJOIN_VERSION,
	       c->nranks, device_mode_name(job->device));
	for (int i = 0; i < c->nranks; i++)
		printf("%s\n", all + (size_t)i * LIST_LINE_MAX);
	if (ok && ch->note[0])
		printf("# %s\n", ch->note);
	if (ok)
		printf("# backend: %s on every rank\n",
		       ch->kind == XJ_BACKEND_CUDA ? "cuda" : "cpu");
	fflush(stdout);
}

int device_list(const xj_job *job, const xj_comm *c, xj_status *st)
{
	xj_device_choice ch;
	char line[LIST_LINE_MAX], *all = NULL;

	device_select(job, c, &ch, st);
	list_line(job, c, &ch, line, sizeof(line));
	if (c->rank == 0) {
		all = malloc((size_t)LIST_LINE_MAX * (size_t)c->nranks);
		if (!all)
			xj_abort(XJ_EXIT_RESOURCE, "out of memory (%d lines)",
				 c->nranks);
	}
	MPI_CHECK(MPI_Gather(line, LIST_LINE_MAX, MPI_CHAR, all,
			     LIST_LINE_MAX, MPI_CHAR, 0, c->world));
	if (c->rank == 0)
		list_print(job, c, &ch, st->code == XJ_OK, all);
	free(all);
	return st->code;
}

/* ---- backend and plan for the chosen device --------------------------- */

void device_backend_config(const xj_job *job, const plan *p, int threads,
			   xj_backend_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->metric = job->metric;
	cfg->k = job->k;
	cfg->d = job->d;
	cfg->has_threshold = job->has_threshold;
	cfg->threshold_key = job->has_threshold ?
			     metric_value_to_key(job->metric, job->threshold) : 0;
	cfg->self = job->self;
	cfg->same_rows = job->same_rows;
	cfg->threads = threads;
	cfg->max_query_rows = p ? p->qchunk_rows : 0;
	cfg->max_base_rows = p ? p->bchunk_rows : 0;
	cfg->precision = job->precision == XJ_PREC_AUTO ? XJ_PREC_FP32 :
			 job->precision;
	cfg->fp32_dnnl = job->fp32_dnnl;
	cfg->range = job->command == XJ_CMD_RANGE ||
		     job->plan_of == XJ_CMD_RANGE;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Plan with the CPU backend's work bytes (its per-thread tiles, for the
 * matrix too). */
static int plan_cpu(plan_in *pin, const xj_backend_cfg *cfg, int threads,
		    plan *out, xj_status *st)
{
	/* the matrix: two blocks, one written while the worker thread
	 * computes the next */
	pin->out_blocks = 2;
	/* a self-join scores the pairs of a query chunk's rows once, across
	 * base chunks too, in every precision (kernels/cpu/cpu_topk_sym.c) */
	pin->self_join = cfg->self && cfg->same_rows;
	pin->self_cross = pin->self_join;
	pin->work_fixed_bytes = backend_cpu_work_bytes(cfg, 0, threads);
	if (pin->cmd == XJ_CMD_TOPK || pin->cmd == XJ_CMD_RANGE)
		pin->work_per_qrow_bytes =
			backend_cpu_work_bytes(cfg, 1, threads) -
			pin->work_fixed_bytes;
	return plan_make(pin, out, st);
}

/*
 * A GPU rank has two memories; the planner has one formula and one budget,
 * the smaller of the host's and the GPU's (rank_budget). The GPU's bytes
 * enter as backend work, taken at the base chunk B0 the planner picks
 * without them: work_fixed = GPU bytes for no query row plus the pinned
 * host staging buffers, work_per_qrow = the GPU bytes of one more query
 * row. This over-counts, on the safe side: host and GPU bytes add up
 * against the smaller budget, and B0 bounds the base chunk chosen with the
 * work (base chunks only shrink as memory gets short), so each memory's
 * own need stays below the formula's total. The matrix formula has no
 * per-query work term, but its own per-query bytes (the row and B output
 * floats) cover the GPU's (the row, the cosine copy, 28 bytes) from B = 7.
 * backend_cuda_create checks the GPU side exactly, and backend_start
 * halves chunks where it still falls short.
 */
static int plan_cuda(plan_in *pin, const xj_backend_cfg *cfg, plan *out,
		     xj_status *st)
{
	const struct xjc_module *cu = cuda_module();
	const plan_device_bytes fn = { cu->work_bytes, cu->pinned_bytes,
				       cu->merge_bytes };

	/* a self-join scores the rows a base chunk shares with the query
	 * chunk once, in every GPU precision (kernels/cuda/topk_cuda.cu);
	 * the block pairs' tiles live in the GEMM tile the work bytes
	 * already count */
	pin->self_join = cfg->self && cfg->same_rows;
	return plan_make_device(pin, cfg, &fn, out, st);
}

int device_plan(plan_in *pin, const xj_backend_cfg *cfg, int threads,
		    const xj_device_choice *dev, plan *out, xj_status *st)
{
	/* kind CUDA: every rank's probe_local loaded the module */
	if (dev->kind == XJ_BACKEND_CUDA && cuda_module())
		return plan_cuda(pin, cfg, out, st);
	return plan_cpu(pin, cfg, threads, out, st);
}

/* Halve the query chunk down to one row, then the base chunk; 0 when
 * both are one row already. */
static int chunks_halve(xj_backend_cfg *cfg)
{
	if (cfg->max_query_rows > 1)
		cfg->max_query_rows /= 2;
	else if (cfg->max_base_rows > 1)
		cfg->max_base_rows /= 2;
	else
		return 0;
	return 1;
}

/* A GPU short of memory for the planned chunks gets smaller ones, each
 * retry with a warning: on XJ_EXIT_RESOURCE backend_cuda_create leaves
 * nothing allocated (backend_cuda.h). */
static int backend_cuda_open(const xj_job *job, const xj_comm *c,
			     const xj_device_choice *dev, xj_backend_cfg *cfg,
			     xj_backend **be, xj_status *st)
{
	const struct xjc_module *cu = cuda_module();

	if (!cu)
		return xj_fail(st, XJ_EXIT_INTERNAL, "the CUDA backend is not "
			       "loaded on rank %d (%s)", c->rank, c->host);
	while (cu->create(cfg, dev->device, device_mem_fraction(job, dev), be,
			  st) == XJ_EXIT_RESOURCE && chunks_halve(cfg)) {
		fprintf(stderr, "xjoin: warning: rank %d (%s): %s; retrying "
			"with chunks of %" PRId64 " query and %" PRId64
			" base rows\n", c->rank, c->host, st->msg,
			cfg->max_query_rows, cfg->max_base_rows);
		xj_ok(st);
	}
	return st->code;
}

int device_backend_create(const xj_job *job, const xj_comm *c,
			  const xj_device_choice *dev, xj_backend_cfg *cfg,
			  xj_backend **be, xj_status *st)
{
	if (dev->kind == XJ_BACKEND_CPU)
		return backend_cpu_create(cfg, be, st);
	return backend_cuda_open(job, c, dev, cfg, be, st);
}

/* The plan's chunks lowered to at most q and b rows, its rounds derived
 * as plan_make does. Pure. peak_bytes stays the plan's, now a bound. */
static void plan_lower_chunks(plan *p, int64_t q, int64_t b)
{
	if (q < p->qchunk_rows)
		p->qchunk_rows = q;
	if (b < p->bchunk_rows)
		p->bchunk_rows = b;
	p->qrounds = ceil_div(p->qblock_max, p->qchunk_rows);
	p->brounds = ceil_div(p->bshard_max, p->bchunk_rows);
}

/* Create every rank's backend, then run the chunks all of them took: the
 * driver's rounds and exchanges assume one chunk size on every rank. */
int device_backend_start(xj_run *run, const xj_device_choice *dev,
			 int threads, xj_status *st)
{
	xj_comm *c = run->comm;
	xj_backend_cfg cfg;
	int64_t mine[2], all[2];
	plan_rank_view w;

	device_backend_config(run->job, &run->pl, threads, &cfg);
	if (run->pl.split) {    /* the self-join's share of this rank */
		cfg.part = c->rank;     /* the grid is 1 x P */
		cfg.parts = run->pl.pc;
	}
	plan_rank(&run->pin, &run->pl, c->rank, &w);
	cfg.shard_first = w.b0;
	cfg.shard_rows = w.brows;
	device_backend_create(run->job, c, dev, &cfg, &run->be, st);
	if (comm_agree(c, st))
		return st->code;
	mine[0] = cfg.max_query_rows;
	mine[1] = cfg.max_base_rows;
	MPI_CHECK(MPI_Allreduce(mine, all, 2, MPI_INT64_T, MPI_MIN, c->world));
	if (all[0] >= run->pl.qchunk_rows && all[1] >= run->pl.bchunk_rows)
		return XJ_OK;
	if (c->rank == 0)
		fprintf(stderr, "xjoin: warning: GPU memory: every rank runs "
			"chunks of %" PRId64 " query and %" PRId64 " base rows "
			"instead of the planned %" PRId64 " and %" PRId64 "\n",
			all[0], all[1], run->pl.qchunk_rows,
			run->pl.bchunk_rows);
	plan_lower_chunks(&run->pl, all[0], all[1]);
	return XJ_OK;
}

/* ---- the transport of the top-k merge ---------------------------------- */

#define NCCL_TIMEOUT_S 300.0

/* XJ_NCCL_TIMEOUT=S: seconds any NCCL wait may take before the job ends
 * (default 300; the exchanges follow a comm_agree, so ranks arrive
 * within about one base chunk's GPU work of each other). */
static double nccl_timeout_s(void)
{
	const char *v = getenv("XJ_NCCL_TIMEOUT");
	char *end = NULL;
	double s;

	if (!v || !v[0])
		return NCCL_TIMEOUT_S;
	s = strtod(v, &end);
	return end && *end == '\0' && s > 0 ? s : NCCL_TIMEOUT_S;
}

/* Whether this rank can merge over NCCL; if not and it matters, why. */
static int nccl_usable(const xj_comm *c, const xj_device_choice *dev,
		       char *why, size_t size)
{
	const char *env = getenv("XJ_NCCL");
	char lib[256];

	why[0] = '\0';
	if (dev->kind != XJ_BACKEND_CUDA || c->row_size < 2)
		return 0;   /* nothing to say: no device lists to move */
	if (env && strcmp(env, "0") == 0) {
		snprintf(why, size, "XJ_NCCL=0 on rank %d", c->rank);
		return 0;
	}
	if (dev->sharing > 1) {
		snprintf(why, size, "%d ranks share a GPU on %s, and NCCL "
			 "needs a GPU per rank", dev->sharing, c->host);
		return 0;
	}
	if (!cuda_module()->nccl_available(lib, sizeof(lib))) {
		snprintf(why, size, "rank %d on %s: %s", c->rank, c->host, lib);
		return 0;
	}
	return 1;
}

/* Collective: the message of the lowest rank where flag is clear. */
static void share_why(const xj_comm *c, int flag, char *why, size_t size)
{
	int who = lowest_rank(c, !flag);

	if (who >= 0)
		MPI_CHECK(MPI_Bcast(why, (int)size, MPI_CHAR, who, c->world));
	why[size - 1] = '\0';
}

static void nccl_fatal(int code, const char *msg)
{
	xj_abort(code, "%s", msg);
}

/* Collective: open NCCL on every row or on none (then *opened = 0). */
static void nccl_try(const xj_comm *c, const xj_device_choice *dev,
		     xj_transport *t, int *opened)
{
	char why[XJ_MSG_MAX] = "";
	xj_group row;
	xj_status st;
	int ok, all;

	xj_ok(&st);
	comm_row_group(c, &row);
	ok = nccl_usable(c, dev, why, sizeof(why));
	MPI_CHECK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->world));
	if (!all) {
		share_why(c, ok, why, sizeof(why));
		if (c->rank == 0 && why[0] && !comm_is_quiet())
			fprintf(stderr, "xjoin: merging k-lists over MPI, not "
				"NCCL: %s\n", why);
		*opened = 0;
		return;
	}
	ok = cuda_module()->nccl_open(&row, dev->device, nccl_timeout_s(),
				      t, &st) == XJ_OK;
	MPI_CHECK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->world));
	if (!all) {
		if (ok)
			cuda_module()->nccl_abort(t);
		snprintf(why, sizeof(why), "%s", st.msg);
		share_why(c, ok, why, sizeof(why));
		if (c->rank == 0)
			fprintf(stderr, "xjoin: warning: NCCL did not start "
				"(%s); merging k-lists over MPI\n", why);
		*opened = 0;
		return;
	}
	cuda_module()->nccl_on_fatal(t, nccl_fatal);
	*opened = 1;
}

int device_transport_open(const xj_comm *c, const xj_device_choice *dev,
			  xj_transport *t, xj_status *st)
{
	int opened = 0;

	nccl_try(c, dev, t, &opened);
	if (!opened)
		comm_mpi_transport(&c->row, t);
	fflush(stderr);
	return st->code;
}

/* Only a loaded module can have opened a NCCL transport. */
int device_transport_is_device(const xj_transport *t)
{
	const struct xjc_module *cu = cuda_module();

	return cu && cu->nccl_is(t);
}

void device_transport_close(xj_transport *t)
{
	const struct xjc_module *cu = cuda_module();

	if (cu && cu->nccl_is(t))
		cu->nccl_close(t);
}

/* OpenBLAS's cores with AVX-512 kernels. */
static int openblas_avx512(const char *core)
{
	static const char *const cores[] = { "skylakex", "cooperlake",
					     "sapphirerapids" };

	for (size_t i = 0; i < sizeof(cores) / sizeof(cores[0]); i++)
		if (!strcasecmp(core, cores[i]))
			return 1;
	return 0;
}

void device_cpu_gemm(char *line, size_t n, char *warn, size_t wn)
{
	const char *core = openblas_get_corename();
	const char *config = openblas_get_config();
	char version[24] = "";
	cpu_gemm_caps caps;

	cpu_gemm_caps_get(&caps);
	/* "OpenBLAS 0.3.21 NO_AFFINITY ..." */
	if (!strncmp(config, "OpenBLAS ", 9))
		snprintf(version, sizeof(version), "%.*s",
			 (int)strcspn(config + 9, " "), config + 9);
	snprintf(line, n, "OpenBLAS %s %s, oneDNN %s %s", version, core,
		 caps.dnnl ? caps.version : "-", caps.isa);
	warn[0] = 0;
	if (__builtin_cpu_supports("avx512f") && !openblas_avx512(core))
		snprintf(warn, wn, "OpenBLAS runs its %s kernels on a CPU with "
			 "AVX-512%s: its fp32 GEMM runs below this CPU's rate "
			 "(--precision auto measures oneDNN's too)", core,
			 getenv("OPENBLAS_CORETYPE") ? " (OPENBLAS_CORETYPE is "
			 "set)" : "");
}
