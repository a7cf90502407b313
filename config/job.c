/*
 * job.c: defaults, cross-option checks and the printed table of a job.
 *
 * Checks of a single value (syntax, range) live with the option parser in
 * app/cli/options_parse.c; the checks here need several options at once, so
 * they run after every source (defaults, job file, command line) has been
 * applied.
 */
#define _POSIX_C_SOURCE 200809L

#include "job.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "version.h"

/*
 * Every query row keeps its running top-k list, k (int64 index, float32
 * score) pairs of 12 bytes, resident in the result buffers of every chunk
 * and in the merge messages. At 2^24 that is already 192 MiB per query row;
 * beyond it not even a small query chunk fits, and 'xjoin matrix' is the
 * right tool anyway.
 */
#define JOB_K_MAX ((int64_t)1 << 24)

/* A job table row: long enough for a path plus a shape. */
#define JOB_VALUE_MAX (XJ_PATH_MAX + XJ_NAME_MAX + 64)
#define JOB_ROWS_MAX 32

struct job_row {
	const char *name;
	char value[JOB_VALUE_MAX];
};

struct job_table {
	struct job_row rows[JOB_ROWS_MAX];
	int count;
};

void job_defaults(xj_job *job)
{
	memset(job, 0, sizeof(*job));
	job->command = XJ_CMD_NONE;
	job->plan_of = XJ_CMD_NONE;
	job->metric = XJ_METRIC_L2;
	job->mem_fraction = 0.8;
	job->precision = XJ_PREC_AUTO;
	job->device = XJ_DEVICE_AUTO;
	job->gpu_mem_fraction = 0.8;
	job->checkpoint_s = 60;
	job->records = 1;
	job->peer_timeout_s = 60;
	job->progress = 1;
	job->seed = 2026;
	job->inspect_rows = 5;
}

static const char *command_name(xj_command cmd)
{
	switch (cmd) {
	case XJ_CMD_NONE: return "(none)";
	case XJ_CMD_TOPK: return "topk";
	case XJ_CMD_MATRIX: return "matrix";
	case XJ_CMD_PLAN: return "plan";
	case XJ_CMD_GEN: return "gen";
	case XJ_CMD_DEVICES: return "devices";
	case XJ_CMD_INSPECT: return "inspect";
	case XJ_CMD_RANGE: return "range";
	}
	return "(unknown)";
}

/* The command whose work is described: plan_of for 'plan'. A plan that
 * names no command plans topk when -k is given, else matrix (options.h). */
static xj_command job_target(const xj_job *job)
{
	if (job->command != XJ_CMD_PLAN)
		return job->command;
	if (job->plan_of != XJ_CMD_NONE)
		return job->plan_of;
	return job->k > 0 ? XJ_CMD_TOPK : XJ_CMD_MATRIX;
}

/* "topk", or "plan topk" when only planned: the name messages use. */
static void job_label(const xj_job *job, char *buf, size_t size)
{
	if (job->command == XJ_CMD_PLAN)
		snprintf(buf, size, "plan %s", command_name(job_target(job)));
	else
		snprintf(buf, size, "%s", command_name(job->command));
}

/* stat() of an input spec's file: the whole spec when it names a file,
 * else what precedes the last ':' (the split h5in_parse_spec makes). */
static int spec_stat(const char *spec, struct stat *sb)
{
	const char *colon = strrchr(spec, ':');
	char file[XJ_PATH_MAX];
	size_t len;

	if (stat(spec, sb) == 0)
		return 0;
	if (!colon)
		return -1;
	len = (size_t)(colon - spec);
	if (len == 0 || len >= sizeof(file))
		return -1;
	memcpy(file, spec, len);
	file[len] = '\0';
	return stat(file, sb);
}

/* Output "x.h5" over an input given as "x.h5" or "x.h5:/train" would
 * destroy the input it reads (with --force): the result is renamed onto
 * the output path. Inputs are not resolved yet, so the spec texts are
 * compared (the file part is what precedes the last ':'), and, for an
 * output that exists, the files themselves: "./x.h5" or an input given
 * through a link to x.h5 names x.h5 in other words. */
static int output_is_input(const char *output, const char *spec)
{
	const char *colon = strrchr(spec, ':');
	size_t len = strlen(output);
	struct stat out, in;

	if (!output[0] || !spec[0])
		return 0;
	if (strcmp(output, spec) == 0)
		return 1;
	if (colon && (size_t)(colon - spec) == len &&
	    strncmp(output, spec, len) == 0)
		return 1;
	/* lstat: a link at the output path is replaced, not its target */
	return lstat(output, &out) == 0 && spec_stat(spec, &in) == 0 &&
	       out.st_dev == in.st_dev && out.st_ino == in.st_ino;
}

static int check_inputs(const xj_job *job, const char *label, xj_status *st)
{
	if (!job->query_file[0])
		return xj_fail(st, XJ_EXIT_USAGE,
			       "%s needs -q/--query (the query vectors)", label);
	if (!job->base_file[0])
		return xj_fail(st, XJ_EXIT_USAGE,
			       "%s needs -b/--base (the base vectors)", label);
	if (output_is_input(job->output, job->query_file))
		return xj_fail(st, XJ_EXIT_USAGE,
			       "-o/--output %s is the query input", job->output);
	if (output_is_input(job->output, job->base_file))
		return xj_fail(st, XJ_EXIT_USAGE,
			       "-o/--output %s is the base input", job->output);
	return XJ_OK;
}

static int check_topk(const xj_job *job, const char *label, xj_status *st)
{
	if (job->k < 1)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "%s needs -k/--k (neighbours per query, >= 1)",
			       label);
	if (job->k > JOB_K_MAX)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "-k/--k %" PRId64 " is too large: at most %" PRId64
			       " (each query row keeps k index/score pairs, 12 bytes each, in the result buffers; for all pairs use 'xjoin matrix')",
			       job->k, JOB_K_MAX);
	if (job->has_threshold && !isfinite(job->threshold))
		return xj_fail(st, XJ_EXIT_USAGE,
			       "-t/--threshold must be a finite number");
	return XJ_OK;
}

/* matrix writes every pair: nothing to select, cut or exclude. */
static int check_matrix(const xj_job *job, const char *label, xj_status *st)
{
	if (job->k != 0)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "-k/--k does not apply to %s (it writes every distance; use topk)",
			       label);
	if (job->has_threshold)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "-t/--threshold does not apply to %s (it writes every distance; use topk)",
			       label);
	if (job->self)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "--self does not apply to %s (it writes every distance, the diagonal included)",
			       label);
	return XJ_OK;
}

/* range: every pair within the threshold, so it needs one and no k. */
static int check_range(const xj_job *job, const char *label, xj_status *st)
{
	if (job->k != 0)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "-k/--k does not apply to %s (it keeps every pair within the threshold; use topk)",
			       label);
	if (!job->has_threshold || !isfinite(job->threshold))
		return xj_fail(st, XJ_EXIT_USAGE,
			       "%s needs -t/--threshold (a finite number in the metric's units)",
			       label);
	return XJ_OK;
}

static int check_gen(const xj_job *job, xj_status *st)
{
	if (job->gen_rows < 1)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "gen needs --rows (base rows to write, >= 1)");
	if (job->gen_dim < 1)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "gen needs --dim (dimension, >= 1)");
	if (job->gen_queries < 0)
		return xj_fail(st, XJ_EXIT_USAGE, "--queries must be >= 0");
	if (job->gen_clusters < 0)
		return xj_fail(st, XJ_EXIT_USAGE, "--clusters must be >= 0");
	if (!job->output[0])
		return xj_fail(st, XJ_EXIT_USAGE,
			       "gen needs -o/--output (the file to write)");
	return XJ_OK;
}

static int check_inspect(const xj_job *job, xj_status *st)
{
	if (!job->inspect_file[0])
		return xj_fail(st, XJ_EXIT_USAGE, "inspect needs FILE (the "
			       "xjoin output, OUT.h5, to look at)");
	if (job->inspect_rows < 0)
		return xj_fail(st, XJ_EXIT_USAGE, "--rows must be >= 0");
	return XJ_OK;
}

static int check_resources(const xj_job *job, xj_status *st)
{
	if (!(job->mem_fraction > 0.0 && job->mem_fraction <= 1.0))
		return xj_fail(st, XJ_EXIT_USAGE,
			       "--mem-fraction must be in (0, 1], got %g",
			       job->mem_fraction);
	if (!(job->gpu_mem_fraction > 0.0 && job->gpu_mem_fraction <= 1.0))
		return xj_fail(st, XJ_EXIT_USAGE,
			       "--gpu-mem-fraction must be in (0, 1], got %g",
			       job->gpu_mem_fraction);
	if (job->mem_limit_bytes < 0)
		return xj_fail(st, XJ_EXIT_USAGE, "--mem-limit must be > 0");
	if (job->chunk_rows < 0)
		return xj_fail(st, XJ_EXIT_USAGE, "--chunk-rows must be >= 1");
	if (job->base_chunk_rows < 0)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "--base-chunk-rows must be >= 1");
	if (job->threads < 0)
		return xj_fail(st, XJ_EXIT_USAGE, "--threads must be >= 1");
	return XJ_OK;
}

int job_check(const xj_job *job, xj_status *st)
{
	xj_command target = job_target(job);
	char label[32];
	int rc;

	job_label(job, label, sizeof(label));
	rc = check_resources(job, st);
	if (rc)
		return rc;
	switch (target) {
	case XJ_CMD_TOPK:
	case XJ_CMD_MATRIX:
	case XJ_CMD_RANGE:
		rc = check_inputs(job, label, st);
		if (rc)
			return rc;
		/* plan computes nothing, so it writes nothing: -o optional */
		if (job->command != XJ_CMD_PLAN && !job->output[0])
			return xj_fail(st, XJ_EXIT_USAGE,
				       "%s needs -o/--output (the HDF5 file to write)",
				       label);
		if (job->resume && job->force)
			return xj_fail(st, XJ_EXIT_USAGE, "--resume continues "
				       "an interrupted run and --force starts "
				       "over: give one of them");
		if (job->resume && !job->records)
			return xj_fail(st, XJ_EXIT_USAGE, "--resume continues "
				       "from a progress record and "
				       "--no-checkpoint keeps none: give one "
				       "of them");
		if (target == XJ_CMD_TOPK)
			return check_topk(job, label, st);
		if (target == XJ_CMD_RANGE)
			return check_range(job, label, st);
		return check_matrix(job, label, st);
	case XJ_CMD_GEN:
		if (job->command == XJ_CMD_PLAN)
			break;
		return check_gen(job, st);
	case XJ_CMD_DEVICES:
		if (job->command == XJ_CMD_PLAN)
			break;
		return XJ_OK;
	case XJ_CMD_INSPECT:
		if (job->command == XJ_CMD_PLAN)
			break;
		return check_inspect(job, st);
	case XJ_CMD_NONE:
	case XJ_CMD_PLAN:
		break;
	}
	if (job->command == XJ_CMD_NONE)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "no command (topk, matrix, range, plan, gen, devices "
			       "or inspect)");
	return xj_fail(st, XJ_EXIT_USAGE, "plan applies to topk, matrix or "
		       "range");
}

const char *metric_name(xj_metric m)
{
	switch (m) {
	case XJ_METRIC_L2: return "l2";
	case XJ_METRIC_SQEUCLIDEAN: return "sqeuclidean";
	case XJ_METRIC_COSINE: return "cosine";
	case XJ_METRIC_IP: return "ip";
	}
	return "unknown";
}

int metric_parse(const char *s, xj_metric *out)
{
	static const xj_metric all[] = {
		XJ_METRIC_L2, XJ_METRIC_SQEUCLIDEAN, XJ_METRIC_COSINE,
		XJ_METRIC_IP,
	};
	size_t i;

	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		if (strcmp(s, metric_name(all[i])) == 0) {
			*out = all[i];
			return 0;
		}
	}
	return -1;
}

int metric_larger_is_better(xj_metric m)
{
	return m == XJ_METRIC_IP;
}

const char *device_mode_name(xj_device_mode d)
{
	switch (d) {
	case XJ_DEVICE_AUTO: return "auto";
	case XJ_DEVICE_GPU: return "gpu";
	case XJ_DEVICE_CPU: return "cpu";
	}
	return "unknown";
}

int device_mode_parse(const char *s, xj_device_mode *out)
{
	static const xj_device_mode all[] = {
		XJ_DEVICE_AUTO, XJ_DEVICE_GPU, XJ_DEVICE_CPU,
	};
	size_t i;

	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		if (strcmp(s, device_mode_name(all[i])) == 0) {
			*out = all[i];
			return 0;
		}
	}
	return -1;
}

const char *precision_name(xj_precision p)
{
	switch (p) {
	case XJ_PREC_FP32: return "fp32";
	case XJ_PREC_TF32: return "tf32";
	case XJ_PREC_BF16: return "bf16";
	case XJ_PREC_FP16: return "fp16";
	case XJ_PREC_INT8: return "int8";
	case XJ_PREC_AUTO: return "auto";
	}
	return "unknown";
}

int precision_parse(const char *s, xj_precision *out)
{
	for (int p = XJ_PREC_FP32; p <= XJ_PREC_AUTO; p++) {
		if (strcmp(s, precision_name((xj_precision)p)) == 0) {
			*out = (xj_precision)p;
			return 0;
		}
	}
	return -1;
}

/* --- the job table --- */

/* Returns the buffer for the row's value. JOB_ROWS_MAX exceeds the rows
 * table_fill() can add; past it, a row would overwrite the last one. */
static char *table_add(struct job_table *t, const char *name)
{
	struct job_row *row;

	row = &t->rows[t->count < JOB_ROWS_MAX ? t->count++ : JOB_ROWS_MAX - 1];
	row->name = name;
	row->value[0] = '\0';
	return row->value;
}

static const char *yes_no(int b)
{
	return b ? "yes" : "no";
}

/* 2147483648 -> "2.00 GiB (2147483648 bytes)" */
static void format_bytes(char *buf, size_t size, int64_t bytes)
{
	static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024.0 && u < 5) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, size, "%" PRId64 " B", bytes);
	else
		snprintf(buf, size, "%.2f %s (%" PRId64 " bytes)", v, unit[u],
			 bytes);
}

/* "glove.h5:/test, 1000 x 100" once resolved, the spec as given before. */
static void format_input(char *buf, size_t size, const char *file,
			 const char *dset, int64_t rows, int64_t d)
{
	int len;

	if (dset[0])
		len = snprintf(buf, size, "%s:%s", file, dset);
	else
		len = snprintf(buf, size, "%s", file);
	/* d > 0 once resolved; an empty query set shows its 0 rows */
	if (rows >= 0 && d > 0 && len > 0 && (size_t)len < size)
		snprintf(buf + len, size - (size_t)len,
			 ", %" PRId64 " x %" PRId64, rows, d);
}

static void table_inputs(struct job_table *t, const xj_job *job)
{
	format_input(table_add(t, "query"), JOB_VALUE_MAX, job->query_file,
		     job->query_dset, job->n, job->d);
	format_input(table_add(t, "base"), JOB_VALUE_MAX, job->base_file,
		     job->base_dset, job->m, job->d);
}

static void table_what(struct job_table *t, const xj_job *job,
		       xj_command target)
{
	snprintf(table_add(t, "metric"), JOB_VALUE_MAX, "%s (%s is better)",
		 metric_name(job->metric),
		 metric_larger_is_better(job->metric) ? "larger" : "smaller");
	if (target != XJ_CMD_TOPK && target != XJ_CMD_RANGE)
		return;
	if (target == XJ_CMD_TOPK)
		snprintf(table_add(t, "k"), JOB_VALUE_MAX, "%" PRId64, job->k);
	if (job->has_threshold)
		snprintf(table_add(t, "threshold"), JOB_VALUE_MAX, "%.9g",
			 job->threshold);
	else
		snprintf(table_add(t, "threshold"), JOB_VALUE_MAX, "none");
	snprintf(table_add(t, "self"), JOB_VALUE_MAX, "%s%s",
		 yes_no(job->self),
		 job->self ? " (pairs (i, i) excluded)" : "");
}

static void table_gen(struct job_table *t, const xj_job *job)
{
	snprintf(table_add(t, "rows"), JOB_VALUE_MAX, "%" PRId64,
		 job->gen_rows);
	snprintf(table_add(t, "dim"), JOB_VALUE_MAX, "%" PRId64, job->gen_dim);
	snprintf(table_add(t, "queries"), JOB_VALUE_MAX, "%" PRId64,
		 job->gen_queries);
	if (job->gen_clusters > 0)
		snprintf(table_add(t, "clusters"), JOB_VALUE_MAX, "%" PRId64,
			 job->gen_clusters);
	else
		snprintf(table_add(t, "clusters"), JOB_VALUE_MAX,
			 "0 (Gaussian noise)");
	snprintf(table_add(t, "seed"), JOB_VALUE_MAX, "%" PRIu64, job->seed);
}

/* The candidate GEMM of top-k and range: as resolved for the backend
 * (rank 0's) with how, once the device is chosen; the request before. */
static void table_precision(struct job_table *t, const xj_job *job)
{
	xj_command cmd = job->command == XJ_CMD_PLAN ? job->plan_of :
			 job->command;

	if (cmd != XJ_CMD_TOPK && cmd != XJ_CMD_RANGE)
		return;
	snprintf(table_add(t, "precision"), JOB_VALUE_MAX, "%s%s (%s%s)",
		 precision_name(job->precision),
		 job->fp32_dnnl && job->precision == XJ_PREC_FP32 ?
		 " through oneDNN" : "",
		 job->precision_why[0] ? job->precision_why : "requested",
		 job->precision == XJ_PREC_FP32 ? "" :
		 "; candidates only, values rescored exactly");
}

/* The request only: what each rank got is in the rank lines above. */
static void table_device(struct job_table *t, const xj_job *job)
{
	static const char *const why[] = {
		[XJ_DEVICE_AUTO] = " (a GPU per rank if all have one, else "
				   "the CPU)",
		[XJ_DEVICE_GPU] = " (a GPU per rank, or an error)",
		[XJ_DEVICE_CPU] = "",
	};

	snprintf(table_add(t, "device"), JOB_VALUE_MAX, "%s%s",
		 device_mode_name(job->device), why[job->device]);
	table_precision(t, job);
	if (job->device == XJ_DEVICE_CPU)
		return;
	snprintf(table_add(t, "gpu mem fraction"), JOB_VALUE_MAX, "%.3g",
		 job->gpu_mem_fraction);
	snprintf(table_add(t, "gpu share"), JOB_VALUE_MAX, "%s%s",
		 yes_no(job->gpu_share),
		 job->gpu_share ? " (local ranks may share a GPU)" : "");
}

static void table_resources(struct job_table *t, const xj_job *job,
			    int nranks)
{
	char *v;

	if (job->command != XJ_CMD_GEN) {   /* gen has no budget, no chunks */
		v = table_add(t, "mem limit");
		if (job->mem_limit_bytes > 0)
			format_bytes(v, JOB_VALUE_MAX, job->mem_limit_bytes);
		else
			snprintf(v, JOB_VALUE_MAX,
				 "auto (available memory x fraction)");
		snprintf(table_add(t, "mem fraction"), JOB_VALUE_MAX, "%.3g%s",
			 job->mem_fraction,
			 job->mem_limit_bytes > 0 ?
			 " (unused: mem limit given)" : "");
		v = table_add(t, "chunk rows");
		if (job->chunk_rows > 0)
			snprintf(v, JOB_VALUE_MAX, "%" PRId64 " (forced)",
				 job->chunk_rows);
		else
			snprintf(v, JOB_VALUE_MAX, "auto");
		if (job->base_chunk_rows > 0)
			snprintf(table_add(t, "base chunk rows"), JOB_VALUE_MAX,
				 "%" PRId64 " (forced)", job->base_chunk_rows);
		table_device(t, job);
	}
	v = table_add(t, "threads");
	if (job->threads > 0)
		snprintf(v, JOB_VALUE_MAX, "%d per rank", job->threads);
	else
		snprintf(v, JOB_VALUE_MAX,
			 "auto (OMP_NUM_THREADS, else the rank's cores)");
	snprintf(table_add(t, "ranks"), JOB_VALUE_MAX, "%d", nranks);
	snprintf(table_add(t, "progress"), JOB_VALUE_MAX, "%s",
		 yes_no(job->progress));
}

static void table_peer_timeout(struct job_table *t, const xj_job *job,
			       int nranks)
{
	char *v = table_add(t, "peer timeout");

	if (nranks < 2)
		snprintf(v, JOB_VALUE_MAX, "none needed (one rank)");
	else if (job->peer_timeout_s == 0)
		snprintf(v, JOB_VALUE_MAX, "off (a lost rank may hang the job)");
	else
		snprintf(v, JOB_VALUE_MAX, "%" PRId64 " s (a rank silent that "
			 "long ends the job, exit 6)", job->peer_timeout_s);
}

static void table_fill(struct job_table *t, const xj_job *job, int nranks)
{
	xj_command target = job_target(job);

	job_label(job, table_add(t, "command"), JOB_VALUE_MAX);
	if (job->config[0])
		snprintf(table_add(t, "job file"), JOB_VALUE_MAX, "%s",
			 job->config);
	if (target == XJ_CMD_GEN) {
		table_gen(t, job);
	} else {
		table_inputs(t, job);
		table_what(t, job, target);
	}
	snprintf(table_add(t, "output"), JOB_VALUE_MAX, "%s",
		 job->output[0] ? job->output : "none");
	if (job->command != XJ_CMD_PLAN)
		snprintf(table_add(t, "force"), JOB_VALUE_MAX, "%s%s",
			 yes_no(job->force),
			 job->force ? " (an existing output is replaced)" : "");
	if (job->command == XJ_CMD_TOPK || job->command == XJ_CMD_MATRIX) {
		snprintf(table_add(t, "resume"), JOB_VALUE_MAX, "%s%s",
			 yes_no(job->resume), job->resume ?
			 " (continue from OUT.progress if there is one)" : "");
		if (job->records)
			snprintf(table_add(t, "checkpoint every"),
				 JOB_VALUE_MAX, "%" PRId64 " s",
				 job->checkpoint_s);
		else
			snprintf(table_add(t, "checkpoint every"),
				 JOB_VALUE_MAX, "never (an interrupted run "
				 "starts over)");
		table_peer_timeout(t, job, nranks);
	}
	if (job->report_json[0])
		snprintf(table_add(t, "report json"), JOB_VALUE_MAX, "%s",
			 job->report_json);
	table_resources(t, job, nranks);
}

/* Rules are drawn with a loop because values (paths) have no upper width. */
static void print_dashes(int n)
{
	while (n-- > 0)
		putchar('-');
}

static void print_border(int wname, int wvalue)
{
	putchar('+');
	print_dashes(wname + 2);
	putchar('+');
	print_dashes(wvalue + 2);
	printf("+\n");
}

void job_print(const xj_job *job, int nranks)
{
	static struct job_table t;   /* ~30 KiB: kept off the stack */
	int wname = (int)strlen("parameter"), wvalue = (int)strlen("value");
	int i;

	t.count = 0;
	table_fill(&t, job, nranks);
	for (i = 0; i < t.count; i++) {
		int wn = (int)strlen(t.rows[i].name);
		int wv = (int)strlen(t.rows[i].value);

		wname = wn > wname ? wn : wname;
		wvalue = wv > wvalue ? wv : wvalue;
	}
	printf("# xjoin %s job (output schema %d)\n", XJOIN_VERSION,
	       XJOIN_SCHEMA_VERSION);
	print_border(wname, wvalue);
	printf("| %-*s | %-*s |\n", wname, "parameter", wvalue, "value");
	print_border(wname, wvalue);
	for (i = 0; i < t.count; i++)
		printf("| %-*s | %-*s |\n", wname, t.rows[i].name, wvalue,
		       t.rows[i].value);
	print_border(wname, wvalue);
	fflush(stdout);
}
