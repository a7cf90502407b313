/*
 * join.c: one topk, matrix, range or plan job from its resolved options
 * to its finished output (see join.h): inputs probed, device, precision
 * and plan chosen, backend and output made, the driver run, attributes
 * written, the output renamed into place and the report printed.
 */
#define _GNU_SOURCE
#include "join.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "../../io/h5in.h"
#include "../../io/folder.h"
#include "../../io/h5out.h"
#include "../../kernels/backend.h"
#include "../run/comm.h"
#include "../plan/calib.h"
#include "../plan/device.h"
#include "../plan/gen.h"
#include "../inspect/inspect.h"
#include "driver.h"
#include "../run/guard.h"
#include "../../config/job.h"
#include "../plan/mem.h"
#include "../plan/plan.h"
#include "../plan/report.h"
#include "../run/resume.h"
#include "snapshot.h"
#include "version.h"

static int resolve_one(const char *spec, const char *def, h5in_info *info,
		       xj_status *st)
{
	char file[XJ_PATH_MAX], dset[XJ_NAME_MAX];

	if (h5in_mem_lookup(spec, info))   /* rows in memory (xjoin_api.h) */
		return XJ_OK;
	if (h5in_parse_spec(spec, file, dset, st))
		return st->code;
	guard_begin(spec, NULL);
	h5in_probe(file, dset, def, info, st);
	guard_end();
	return st->code;
}

static int same_input(const h5in_info *a, const h5in_info *b)
{
	char ra[PATH_MAX], rb[PATH_MAX];

	if (a->mem || b->mem)   /* the same rows in memory */
		return a->mem == b->mem && a->mem_type == b->mem_type &&
		       a->rows == b->rows && a->cols == b->cols &&
		       a->mem_rs == b->mem_rs && a->mem_cs == b->mem_cs;
	if (strcmp(a->dset, b->dset) || a->shards != b->shards)
		return 0;
	if (a->shards)   /* a pattern or list: the same shards alike */
		return a->shards_hash == b->shards_hash;
	if (!realpath(a->file, ra) || !realpath(b->file, rb))
		return 0;
	return strcmp(ra, rb) == 0;
}

/* Rank 0: the shards of a pattern or list, or the sources of a VDS,
 * under the job table (nothing for a plain dataset). */
static void print_sources(const char *what, const h5in_info *info)
{
	const int shown_max = 32;
	const h5in_source *s;
	int64_t n, i;
	xj_status st;
	h5in *h;

	if (h5in_open(info, &h, &st))
		return;   /* the run meets and reports it */
	s = h5in_sources(h, &n);
	if (n)
		printf("# %s: %" PRId64 " %s\n", what, n, info->shards ?
		       "shards" : "virtual dataset sources");
	for (i = 0; i < n && i < shown_max; i++)
		printf("#   rows [%" PRId64 ", %" PRId64 "), columns [%" PRId64
		       ", %" PRId64 "): %s:%s\n", s[i].row0, s[i].row0 + s[i].rows,
		       s[i].col0, s[i].col0 + s[i].cols, s[i].file, s[i].dset);
	if (n > shown_max)
		printf("#   ... and %" PRId64 " more\n", n - shown_max);
	h5in_close(h);
}

/* Bytes of the output's datasets; HDF5 adds some KiB of metadata. */
static int64_t output_bytes(const xj_job *job)
{
	if (job->command == XJ_CMD_RANGE)   /* the pairs are not known yet */
		return (job->n + 1) * 8;
	int64_t cols = job->command == XJ_CMD_MATRIX ? job->m : job->k;
	int64_t elem = job->command == XJ_CMD_MATRIX ? 4 : 8 + 4;

	if (job->n && cols > INT64_MAX / elem / job->n)
		return INT64_MAX;
	return job->n * cols * elem;
}

/*
 * Rank 0, before any compute: an output larger than its file system's
 * free space or the file size limit (ulimit -f) would fail only at its
 * first write, hours later, and a write that fails on some ranks inside
 * parallel HDF5 can leave the others waiting. A disk that fills during
 * the run is still caught when writing.
 */
static int check_output_room(const xj_job *job, xj_status *st)
{
	const int64_t slack = INT64_C(1) << 20;
	int64_t need = output_bytes(job), have;
	char folder[XJ_PATH_MAX];
	struct statvfs fs;
	struct rlimit lim;

	if (need <= INT64_MAX - slack)
		need += slack;
	if (getrlimit(RLIMIT_FSIZE, &lim) == 0 &&
	    lim.rlim_cur != RLIM_INFINITY && (int64_t)lim.rlim_cur < need)
		return xj_fail(st, XJ_EXIT_RESOURCE, "output %s needs about %"
			       PRId64 " bytes, more than the file size limit "
			       "of %" PRId64 " bytes (ulimit -f)", job->output,
			       need, (int64_t)lim.rlim_cur);
	folder_of(job->output, folder, sizeof(folder));
	if (statvfs(folder, &fs) != 0)
		return XJ_OK;   /* h5out_create names a missing folder */
	have = (int64_t)fs.f_bavail * (int64_t)fs.f_frsize;
	if (have < need)
		return xj_fail(st, XJ_EXIT_RESOURCE, "output %s needs about %"
			       PRId64 " bytes, but its file system has %" PRId64
			       " bytes free", job->output, need, have);
	return XJ_OK;
}

/* Rank 0: probe both inputs and fill the job's shapes. */
static int resolve_inputs(xj_job *job, h5in_info *qi, h5in_info *bi,
			  xj_status *st)
{
	struct stat sb;

	/* fail fast, before any device or input work; h5out_create checks
	 * again when it creates the file */
	if (job->command != XJ_CMD_PLAN && stat(job->output, &sb) == 0 &&
	    S_ISDIR(sb.st_mode))
		return xj_fail(st, XJ_EXIT_USAGE, "output %s is a directory",
			       job->output);
	if (job->command != XJ_CMD_PLAN && !job->force &&
	    access(job->output, F_OK) == 0)
		return xj_fail(st, XJ_EXIT_USAGE, "output %s exists (use --force "
			       "to overwrite)", job->output);
	if (resolve_one(job->query_file, "test", qi, st))
		return xj_wrap(st, "queries");
	if (resolve_one(job->base_file, "train", bi, st))
		return xj_wrap(st, "base");
	/* an empty query set is a valid, empty result; an empty base
	 * leaves every query without neighbours, and a matrix without
	 * columns: most likely a failed step before this one */
	if (bi->rows == 0)
		return xj_fail(st, XJ_EXIT_INPUT, "base: %s%s%s: has 0 rows, "
			       "nothing to join against", bi->file,
			       bi->dset[0] ? ":" : "", bi->dset);
	if (qi->cols != bi->cols)
		return xj_fail(st, XJ_EXIT_INPUT, "dimensions differ: queries "
			       "%s:%s have %" PRId64 " columns, base %s:%s has %"
			       PRId64, qi->file, qi->dset, qi->cols, bi->file,
			       bi->dset, bi->cols);
	/* the job names what was resolved, so its table describes the run */
	snprintf(job->query_file, sizeof(job->query_file), "%s", qi->file);
	snprintf(job->query_dset, sizeof(job->query_dset), "%s", qi->dset);
	snprintf(job->base_file, sizeof(job->base_file), "%s", bi->file);
	snprintf(job->base_dset, sizeof(job->base_dset), "%s", bi->dset);
	job->n = qi->rows;
	job->m = bi->rows;
	job->d = qi->cols;
	job->same_rows = same_input(qi, bi);
	if (job->same_rows &&
	    (job->command == XJ_CMD_TOPK || job->plan_of == XJ_CMD_TOPK ||
	     job->command == XJ_CMD_RANGE || job->plan_of == XJ_CMD_RANGE))
		job->self = 1;
	if (job->command == XJ_CMD_TOPK && job->k > job->m - job->self)
		fprintf(stderr, "xjoin: warning: k = %" PRId64 " exceeds the "
			"%" PRId64 " candidate base rows: lists are padded "
			"with -1\n", job->k, job->m - job->self);
	return XJ_OK;
}

/* Rank 0, once this run is going to write the output: the note of an
 * earlier run that lost a rank (watch.h) has been read by now; a resumed
 * run repeats it. */
static void lost_note_clear(const xj_job *job, int resuming)
{
	char path[XJ_PATH_MAX + 16], line[2 * XJ_PATH_MAX + 512];
	FILE *f;

	snprintf(path, sizeof(path), "%s.lost", job->output);
	f = fopen(path, "r");
	if (!f)
		return;
	if (resuming && fgets(line, sizeof(line), f))
		fprintf(stderr, "xjoin: --resume: the run before ended with: "
			"%s", line);
	fclose(f);
	unlink(path);
}

/* ", and the lists of H more hold F of M base rows": the recorded
 * round in progress, for messages ("" when none is recorded). */
static void inround_text(int64_t held, int64_t folded, int64_t m,
			 char *buf, size_t size)
{
	buf[0] = '\0';
	if (held)
		snprintf(buf, size, ", and the lists of %" PRId64 " more hold %"
			 PRId64 " of %" PRId64 " base rows", held, folded, m);
}

/* Rank 0, after the inputs are resolved: is there an interrupted run of
 * this output, and may this run continue it? A fresh run checks that its
 * output fits (a resumed one holds its room already). */
static int progress_start(const xj_job *job, xj_run *run, xj_status *st)
{
	xj_progress *p = &run->prog;
	resume_record *old = &p->old;
	char more[160];

	resume_path(job->output, p->path, sizeof(p->path));
	p->lists_slot = -1;
	if (resume_fill(&p->rec, job, &run->qinfo, &run->binfo, st))
		return st->code;
	if (access(p->path, F_OK) != 0) {
		if (job->resume && job->progress)
			fprintf(stderr, "xjoin: --resume: no interrupted run of "
				"%s (no %s): starting fresh\n", job->output,
				p->path);
		snapshot_remove(p);   /* lists no record names */
		if (check_output_room(job, st) == XJ_OK)
			lost_note_clear(job, 0);
		return st->code;
	}
	if (job->force) {
		/* starting over: the old record must not outlive its file */
		if (unlink(p->path) != 0)
			return xj_fail(st, XJ_EXIT_RESOURCE, "cannot remove "
				       "%s: %s", p->path, strerror(errno));
		snapshot_remove(p);
		if (check_output_room(job, st) == XJ_OK)
			lost_note_clear(job, 0);
		return st->code;
	}
	if (resume_load(p->path, old, st))
		return st->code;
	if (!job->resume)
		return xj_fail(st, XJ_EXIT_USAGE, "%s has an interrupted run "
			       "(%" PRId64 " of %" PRId64 " query rows done, "
			       "recorded in %s): continue it with --resume, or "
			       "start over with --force", job->output,
			       spans_rows(&old->done), old->q.rows, p->path);
	if (resume_check_job(old, &p->rec, st))
		return st->code;
	p->rec.runs = old->runs + 1;
	p->resuming = 1;
	p->saved = 1;
	p->saved_rows = spans_rows(&old->done);
	if (old->inround.valid) {
		p->lists_slot = old->inround.slot;
		p->lists_generation = old->inround.generation;
		p->saved_held = spans_rows(&old->inround.rows);
		p->saved_folded = spans_rows(&old->inround.base);
	}
	inround_text(p->saved_held, p->saved_folded, job->m, more,
		     sizeof(more));
	if (job->progress)
		fprintf(stderr, "xjoin: --resume: %" PRId64 " of %" PRId64 " query "
		"rows were done by %" PRId64 " earlier run(s)%s; continuing\n",
		spans_rows(&old->done), job->n, old->runs, more);
	lost_note_clear(job, 1);
	return XJ_OK;
}

/* Rank 0's spans to every rank: the count, then the spans. */
static void spans_share(xj_spans *sp, const xj_comm *c)
{
	int64_t n = sp->n;

	MPI_CHECK(MPI_Bcast(&n, 1, MPI_INT64_T, 0, c->world));
	if (c->rank != 0) {
		memset(sp, 0, sizeof(*sp));
		if (n && !(sp->s = malloc((size_t)n * sizeof(sp->s[0]))))
			xj_abort(XJ_EXIT_RESOURCE, "out of memory for %" PRId64
				 " progress spans", n);
		sp->n = sp->cap = n;
	}
	if (n)
		MPI_CHECK(MPI_Bcast(sp->s, (int)(2 * n), MPI_INT64_T, 0,
				    c->world));
}

/* Rank 0's records to every rank; the spans travel after the struct. */
static void progress_share(xj_progress *p, const xj_comm *c)
{
	MPI_CHECK(MPI_Bcast(p, sizeof(*p), MPI_BYTE, 0, c->world));
	/* empty until run; the pointers are rank 0's */
	memset(&p->rec.done, 0, sizeof(p->rec.done));
	memset(&p->rec.inround, 0, sizeof(p->rec.inround));
	spans_share(&p->old.done, c);
	spans_share(&p->old.inround.rows, c);
	spans_share(&p->old.inround.base, c);
}

/* The record this run saves starts as the interrupted run's: its rows
 * done and its round in progress. */
static int progress_copy_done(xj_progress *p, xj_status *st)
{
	const resume_inround *o = &p->old.inround;
	resume_inround *in = &p->rec.inround;

	for (int64_t i = 0; i < p->old.done.n; i++)
		if (spans_add(&p->rec.done, p->old.done.s[i][0],
			      p->old.done.s[i][1], st))
			return st->code;
	if (!o->valid)
		return XJ_OK;
	in->valid = 1;
	in->slot = o->slot;
	in->generation = o->generation;
	in->hash = o->hash;
	if (spans_copy(&in->rows, &o->rows, st) ||
	    spans_copy(&in->base, &o->base, st))
		return st->code;
	return XJ_OK;
}

static void progress_free(xj_progress *p)
{
	resume_free(&p->rec);
	resume_free(&p->old);
}

/* A failed run keeps its partial output and record when they hold work:
 * when interrupted (the record is brought up to date first) or when a
 * record of it was already saved. Collective. */
static int progress_keep(xj_run *run, xj_status *st)
{
	xj_progress *p = &run->prog;
	xj_status ck;
	char more[160];
	size_t len;

	if (!run->out)
		return 0;
	xj_ok(&ck);
	if (st->code == XJ_EXIT_INTERRUPTED)
		driver_checkpoint(run, 1, &ck);
	if (!p->saved)
		return 0;
	if (p->saved_rows == 0 && p->saved_held == 0 && !p->resuming) {
		/* stopped before any row was done: a record of nothing is of
		 * no use, and its partial file may not hold the datasets yet
		 * (a stop while the job started); the next run starts fresh */
		if (run->comm->rank == 0)
			unlink(p->path);
		p->saved = 0;
		return 0;
	}
	xj_ok(&ck);
	h5out_suspend(run->out, &ck);
	/* the agreed message names the signal; add what was kept (the
	 * paths are short enough in practice; a long one is cut) */
	len = strlen(st->msg);
	inround_text(p->saved_held, p->saved_folded, run->job->m, more,
		     sizeof(more));
	if (len < sizeof(st->msg) - 1)
		snprintf(st->msg + len, sizeof(st->msg) - len, "; %" PRId64
			 " of %" PRId64 " query rows are done%s, kept in "
			 "%.400s.partial and %.400s: run the same command with "
			 "--resume to continue", p->saved_rows, run->job->n,
			 more, run->job->output, p->path);
	return 1;
}

int join_threads(const xj_comm *c)
{
	int mask = cpu_affinity_count();
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	int t;

	if (getenv("OMP_NUM_THREADS"))
		return omp_get_max_threads();
	/* an unbound rank sees every core: share them with local ranks */
	if (online > 0 && mask >= online)
		t = mask / c->local_size;
	else
		t = mask;
	return t > 0 ? t : 1;
}

/* One line per rank, gathered and printed in rank order. */
static void print_ranks(const xj_comm *c, int threads,
			const xj_device_choice *dev)
{
	char line[512], *all = NULL;
	int mask = cpu_affinity_count(), len;
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	int gpu = dev->kind == XJ_BACKEND_CUDA;

	char gemm[128], warn[256];

	device_cpu_gemm(gemm, sizeof(gemm), warn, sizeof(warn));
	len = snprintf(line, sizeof(line), "#  rank %3d  pid %7d  host %-20s "
		       "backend %s  threads %d  cores in mask %d of %ld",
		       c->rank, (int)getpid(), c->host, gpu ? "cuda" : "cpu",
		       threads, mask, online);
	if (len > 0 && (size_t)len < sizeof(line) && gpu)
		snprintf(line + len, sizeof(line) - (size_t)len, "  gpu %d %s",
			 dev->device, dev->info);
	else if (len > 0 && (size_t)len < sizeof(line))
		snprintf(line + len, sizeof(line) - (size_t)len, "  gemm %s",
			 gemm);
	if (c->rank == 0)
		all = malloc(sizeof(line) * (size_t)c->nranks);
	MPI_CHECK(MPI_Gather(line, sizeof(line), MPI_CHAR, all, sizeof(line),
			     MPI_CHAR, 0, c->world));
	if (c->rank == 0) {
		for (int i = 0; i < c->nranks; i++)
			printf("%s\n", all + (size_t)i * sizeof(line));
		if (!gpu && warn[0])   /* the machine's, not the job's */
			printf("# warning: %s\n", warn);
		if (c->local_size == 1 && mask == 1 && online > 1)
			printf("# note: rank 0 is bound to one core of %ld; "
			       "use mpirun --bind-to none (or --map-by "
			       "slot:PE=N) to give it more\n", online);
		fflush(stdout);
	}
	free(all);
}

/* The smaller of the host budget and, on a GPU, the device budget. */
static int64_t rank_budget(const xj_job *job, const xj_comm *c,
			   const xj_device_choice *dev)
{
	int64_t mine, min, gpu = device_budget_bytes(job, dev);

	if (job->mem_limit_bytes > 0)
		mine = job->mem_limit_bytes;
	else
		mine = (int64_t)(mem_available_bytes() * job->mem_fraction /
				 c->local_size);
	if (gpu < mine)
		mine = gpu;
	MPI_CHECK(MPI_Allreduce(&mine, &min, 1, MPI_INT64_T, MPI_MIN,
				c->world));
	return min;
}

/*
 * Every rank: the shards of a pattern or list as the attribute name, one
 * "FILE:DATASET" a line in row order, and their count as count_name. An
 * attribute holds 32 KiB here, so a list longer than that keeps its
 * first lines and says how many more.
 */
static int attr_shards(h5out *o, const char *name, const char *count_name,
		       const h5in_info *info, xj_status *st)
{
	const size_t cap = 32000;
	const h5in_source *s;
	int64_t n, i;
	size_t used = 0;
	char *text;
	h5in *h;

	if (!info->shards)
		return XJ_OK;
	if (h5in_open(info, &h, st))
		return st->code;
	s = h5in_sources(h, &n);
	text = calloc(cap + 64, 1);
	if (!text) {
		h5in_close(h);
		return xj_fail(st, XJ_EXIT_RESOURCE, "attribute %s: out of "
			       "memory", name);
	}
	for (i = 0; i < n; i++) {
		size_t len = strlen(s[i].file) + strlen(s[i].dset) + 2;

		if (used + len > cap)
			break;
		used += (size_t)sprintf(text + used, "%s:%s\n", s[i].file,
					s[i].dset);
	}
	if (i < n)
		sprintf(text + used, "... and %" PRId64 " more\n", n - i);
	h5in_close(h);
	if (h5out_attr_str(o, name, text, st) == XJ_OK)
		h5out_attr_i64(o, count_name, n, st);
	free(text);
	return st->code;
}

static int write_attrs(const xj_run *run, int threads, xj_status *st)
{
	const xj_job *job = run->job;
	h5out *o = run->out;
	char grid[64], when[64];
	time_t now = time(NULL);
	double *ph = run->rep->phase_s;

	snprintf(grid, sizeof(grid), "%dx%d", run->pl.pr, run->pl.pc);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	if (h5out_attr_i64(o, "schema_version", XJOIN_SCHEMA_VERSION, st) ||
	    h5out_attr_str(o, "xjoin_version", XJOIN_VERSION, st) ||
	    h5out_attr_str(o, "command", job->command == XJ_CMD_MATRIX ?
			   "matrix" : job->command == XJ_CMD_RANGE ? "range" :
			   "topk", st) ||
	    h5out_attr_str(o, "metric", metric_name(job->metric), st) ||
	    h5out_attr_i64(o, "k", job->k, st) ||
	    h5out_attr_i64(o, "has_threshold", job->has_threshold, st) ||
	    h5out_attr_f64(o, "threshold", job->has_threshold ?
			   job->threshold : 0.0, st) ||
	    h5out_attr_i64(o, "self_excluded", job->self, st) ||
	    h5out_attr_str(o, "query_file", run->qinfo.file, st) ||
	    h5out_attr_str(o, "query_dataset", run->qinfo.dset, st) ||
	    h5out_attr_str(o, "query_type", run->qinfo.type_desc, st) ||
	    h5out_attr_i64(o, "query_rows", job->n, st) ||
	    h5out_attr_str(o, "base_file", run->binfo.file, st) ||
	    h5out_attr_str(o, "base_dataset", run->binfo.dset, st) ||
	    h5out_attr_str(o, "base_type", run->binfo.type_desc, st) ||
	    h5out_attr_i64(o, "base_rows", job->m, st) ||
	    h5out_attr_i64(o, "dimension", job->d, st) ||
	    h5out_attr_i64(o, "ranks", run->comm->nranks, st) ||
	    h5out_attr_i64(o, "runs", run->prog.rec.runs, st) ||
	    h5out_attr_str(o, "grid", grid, st) ||
	    h5out_attr_str(o, "backends", run->be->name, st) ||
	    h5out_attr_i64(o, "threads_per_rank", threads, st) ||
	    h5out_attr_i64(o, "query_chunk_rows", run->pl.qchunk_rows, st) ||
	    h5out_attr_i64(o, "base_chunk_rows", run->pl.bchunk_rows, st) ||
	    h5out_attr_str(o, "created", when, st) ||
	    attr_shards(o, "query_shards", "query_shard_count", &run->qinfo,
			st) ||
	    attr_shards(o, "base_shards", "base_shard_count", &run->binfo,
			st))
		return st->code;
	for (int i = 0; i < PH_COUNT; i++) {
		char name[64];

		snprintf(name, sizeof(name), "seconds_%s",
			 report_phase_name((xj_phase)i));
		if (h5out_attr_f64(o, name, ph[i], st))
			return st->code;
	}
	return XJ_OK;
}

int join_run(xj_job *job, xj_comm *c, int threads, xj_status *st)
{
	xj_run run = { .job = job, .comm = c };
	xj_report rep = { .t_start = report_now() };
	xj_device_choice dev;
	xj_backend_cfg cfg;
	xj_command cmd = job->command == XJ_CMD_PLAN ? job->plan_of :
			 job->command;
	double t0 = rep.t_start;
	xj_precision asked;
	/* --quiet: nothing on success but the plan a `plan` asks for */
	int loud = job->progress || job->command == XJ_CMD_PLAN;

	run.rep = &rep;
	run.dev = &dev;
	comm_quiet(!loud);
	if (c->rank == 0 && !resolve_inputs(job, &run.qinfo, &run.binfo, st) &&
	    job->command != XJ_CMD_PLAN)
		progress_start(job, &run, st);
	if (comm_agree(c, st))
		goto fail;
	progress_share(&run.prog, c);
	if (progress_copy_done(&run.prog, st))
		xj_abort(st->code, "%s", st->msg);
	MPI_CHECK(MPI_Bcast(job, sizeof(*job), MPI_BYTE, 0, c->world));
	MPI_CHECK(MPI_Bcast(&run.qinfo, sizeof(run.qinfo), MPI_BYTE, 0,
			    c->world));
	MPI_CHECK(MPI_Bcast(&run.binfo, sizeof(run.binfo), MPI_BYTE, 0,
			    c->world));
	asked = job->precision;
	if (device_select(job, c, &dev, st))
		goto fail;
	job->precision = dev.precision;
	snprintf(job->precision_why, sizeof(job->precision_why), "%s",
		 dev.precision_why);
	if (asked == XJ_PREC_AUTO &&
	    calib_precision(job, c, &dev, &run.qinfo, &run.binfo, threads, st))
		goto fail;
	if (c->rank == 0 && dev.note[0] && loud) {
		fprintf(stderr, "xjoin: %s\n", dev.note);
		fflush(stderr);
	}

	device_backend_config(job, NULL, threads, &cfg);
	run.pin = (plan_in){
		.cmd = cmd, .metric = job->metric, .n = job->n, .m = job->m,
		.d = job->d, .k = cmd == XJ_CMD_TOPK ? job->k : 0,
		.nranks = c->nranks, .budget_bytes = rank_budget(job, c, &dev),
		.chunk_rows = job->chunk_rows, .same_rows = job->same_rows,
		.bchunk_rows = job->base_chunk_rows,
	};
	device_plan(&run.pin, &cfg, threads, &dev, &run.pl, st);
	if (comm_agree(c, st))
		goto fail;

	if (loud)
		print_ranks(c, threads, &dev);
	if (c->rank == 0 && loud) {
		job_print(job, c->nranks);
		print_sources("query", &run.qinfo);
		print_sources("base", &run.binfo);
		plan_print(stdout, &run.pin, &run.pl);
		fflush(stdout);
	}
	if (job->command == XJ_CMD_PLAN) {
		if (cmd == XJ_CMD_RANGE && c->rank == 0)
			driver_range_estimate(&run, st);
		return comm_agree(c, st);
	}

	if (device_backend_start(&run, &dev, threads, st))
		goto fail;
	comm_grid(c, run.pl.pc, st);
	plan_rank(&run.pin, &run.pl, c->rank, &run.view);
	report_init(&rep, job->progress, driver_chunks_todo(&run));
	if (run.prog.resuming ?
	    h5out_reopen(c->world, job->output, &run.out, st) :
	    h5out_create(c->world, job->output, job->force, &run.out, st))
		goto fail;
	report_add(&rep, PH_SETUP, &t0);
	run.prog.last_save_s = report_now();
	if (driver_validate(&run, st))
		goto fail;
	if (cmd == XJ_CMD_TOPK ? driver_topk(&run, st) :
	    cmd == XJ_CMD_RANGE ? driver_range(&run, st) :
				  driver_matrix(&run, st))
		goto fail;
	if (write_attrs(&run, threads, st))
		goto fail;
	if (h5out_finish(run.out, st)) {
		run.out = NULL;   /* finish released it */
		goto fail;
	}
	if (c->rank == 0 && run.prog.saved)
		unlink(run.prog.path);   /* the result is complete */
	if (c->rank == 0 && (run.prog.saved || run.prog.lists_written))
		snapshot_remove(&run.prog);
	/* attributes, close and rename since the driver's last phase */
	report_add(&rep, PH_WRITE, &rep.t_mark);
	report_final(&rep, c, job, &run.pl, run.be, job->report_json);
	run.be->release(run.be);
	driver_release(&run);
	progress_free(&run.prog);
	return XJ_OK;
fail:
	if (!progress_keep(&run, st)) {
		h5out_abort(run.out);
		/* a record whose partial file is gone (the final write
		 * failed and finish removed it) is of no use, nor are lists
		 * no record names */
		if (c->rank == 0 && run.prog.saved)
			unlink(run.prog.path);
		if (c->rank == 0 && (run.prog.saved || run.prog.lists_written))
			snapshot_remove(&run.prog);
	}
	if (run.be)
		run.be->release(run.be);
	driver_release(&run);
	progress_free(&run.prog);
	return st->code;
}


int join_command(xj_job *job, xj_comm *c, int threads, xj_status *st)
{
	switch (job->command) {
	case XJ_CMD_GEN:
		return gen_run(job, c, st);
	case XJ_CMD_DEVICES:
		return device_list(job, c, st);
	case XJ_CMD_INSPECT:
		return inspect_run(job, c, st);
	default:
		return join_run(job, c, threads, st);
	}
}
