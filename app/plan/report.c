/* report.c: timers, progress and the final report (table + JSON). */
#include "report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/exchange.h"
#include "../inspect/inspect.h"
#include "version.h"

#define PROGRESS_EVERY_S 5.0

static const char *phase_names[PH_COUNT] = {
	"setup", "validate", "read", "compute", "merge", "write",
};

const char *report_phase_name(xj_phase ph) { return phase_names[ph]; }

double report_now(void) { return MPI_Wtime(); }

void report_init(xj_report *r, int progress, int64_t units_total)
{
	double t = r->t_start;

	memset(r, 0, sizeof(*r));
	r->t_start = t;     /* MPI_Wtime() may start at 0: no "unset" value */
	r->progress = progress;
	r->units_total = units_total;
	r->t_last_print = report_now();
}

void report_add(xj_report *r, xj_phase ph, double *t0)
{
	double t = report_now();

	r->phase_s[ph] += t - *t0;
	*t0 = t;
	r->t_mark = t;
}

static void fmt_hms(char *buf, size_t size, double s)
{
	long v = s < 0 ? 0 : (long)(s + 0.5);

	snprintf(buf, size, "%02ld:%02ld:%02ld", v / 3600, v / 60 % 60, v % 60);
}

void report_progress(xj_report *r, const xj_comm *c)
{
	double now = report_now(), el, eta;
	char a[32], b[32];

	r->units_done++;
	if (c->rank != 0 || !r->progress || r->units_total <= 0)
		return;
	if (now - r->t_last_print < PROGRESS_EVERY_S &&
	    r->units_done < r->units_total)
		return;
	r->t_last_print = now;
	el = now - r->t_start;
	eta = r->units_done ? el / r->units_done *
			      (r->units_total - r->units_done) : 0;
	fmt_hms(a, sizeof(a), el);
	fmt_hms(b, sizeof(b), eta);
	fprintf(stderr, "xjoin: %" PRId64 "/%" PRId64 " chunks (%.0f%%), "
		"%.1f GFLOP/s, elapsed %s, ETA %s\n", r->units_done,
		r->units_total, 100.0 * r->units_done / r->units_total,
		el > 0 ? r->gemm_flops / el * 1e-9 * c->nranks : 0.0, a, b);
	fflush(stderr);
}

void report_merge(xj_report *r, int64_t rows, int64_t k, int p, int me)
{
	int64_t sent, received;

	exchange_topk_bytes(rows, k, p, me, &sent, &received);
	r->merge_sent_bytes += sent;
	r->merge_recv_bytes += received;
}

/* The plan's model of one rank's merge traffic each way, in bytes:
 * (Pc - 1) / Pc of its query block's k-lists, 12 bytes an entry. */
static double merge_model_bytes(const xj_job *job, const plan *p)
{
	if (job->command != XJ_CMD_TOPK || p->pc < 2)
		return 0;
	return (double)(p->pc - 1) / p->pc * (double)p->qblock_max *
	       (double)job->k * 12.0;
}

/* Rank 0: the merge traffic of every rank against the model. */
static void print_merge(const xj_job *job, const plan *p,
			const int64_t *bytes, int nranks)
{
	int64_t lo = INT64_MAX, hi = 0;

	if (job->command != XJ_CMD_TOPK || nranks < 2)
		return;
	for (int i = 0; i < 2 * nranks; i++) {
		lo = bytes[i] < lo ? bytes[i] : lo;
		hi = bytes[i] > hi ? bytes[i] : hi;
	}
	printf("# merge: %" PRId64 " to %" PRId64 " bytes sent and received "
	       "per rank (model (Pc-1)/Pc * n/Pr * k * 12 = %.0f)\n", lo, hi,
	       merge_model_bytes(job, p));
}

static void json_merge(FILE *f, const xj_job *job, const plan *p,
		       const int64_t *bytes, int nranks)
{
	fprintf(f, "  \"merge_bytes\": {\"model_per_rank\": %.0f, "
		"\"sent\": [", merge_model_bytes(job, p));
	for (int i = 0; i < nranks; i++)
		fprintf(f, "%s%" PRId64, i ? ", " : "", bytes[2 * i]);
	fprintf(f, "], \"received\": [");
	for (int i = 0; i < nranks; i++)
		fprintf(f, "%s%" PRId64, i ? ", " : "", bytes[2 * i + 1]);
	fprintf(f, "]},\n");
}

/* What the final report prints, gathered on rank 0. */
typedef struct final_sums {
	double ph[PH_COUNT];    /* the slowest rank's phases */
	double other;           /* its time no phase holds */
	double total;           /* its total */
	double flops;           /* over all ranks */
	double written;         /* bytes of results, over all ranks */
	double direct;          /* of those, written with O_DIRECT */
	double rescored;        /* candidates rescored, over all ranks */
	double undecided;       /* of them, left to the canonical sum */
	double cand_s;          /* a rank's compute seconds on candidates
				 * (pruning, rescoring, merging), the mean;
				 * 0 where the backend does not time it */
	double kms[XJ_KTIME_MAX];       /* device ms by kernel class */
	double kcalls[XJ_KTIME_MAX];    /* and launches, over all ranks */
	double ksum;            /* all classes' ms */
} final_sums;

/* Per second: x over s seconds, 0 when s is 0. */
static double rate(double x, double s)
{
	return s > 0 ? x / s : 0.0;
}

/* The kernel classes rank 0's backend names, summed over ranks. */
static void json_kernels(FILE *f, const xj_backend *be, const final_sums *fs)
{
	if (be->detail)
		fprintf(f, "  \"backend_detail\": \"%s\",\n", be->detail);
	if (be->nktime <= 0)
		return;
	fprintf(f, "  \"kernel_ms\": {");
	for (int i = 0; i < be->nktime; i++)
		fprintf(f, "%s\"%s\": %.3f", i ? ", " : "", be->ktime[i].name,
			fs->kms[i]);
	fprintf(f, "},\n  \"kernel_calls\": {");
	for (int i = 0; i < be->nktime; i++)
		fprintf(f, "%s\"%s\": %.0f", i ? ", " : "", be->ktime[i].name,
			fs->kcalls[i]);
	fprintf(f, "},\n");
}

static void write_json(const char *path, const xj_job *job, const plan *p,
		       const xj_backend *be, const final_sums *fs,
		       const int64_t *bytes, int nranks)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		fprintf(stderr, "xjoin: warning: cannot write report %s\n",
			path);
		return;
	}
	fprintf(f, "{\n  \"xjoin_version\": \"%s\",\n", XJOIN_VERSION);
	fprintf(f, "  \"command\": \"%s\",\n",
		job->command == XJ_CMD_MATRIX ? "matrix" :
		job->command == XJ_CMD_RANGE ? "range" : "topk");
	fprintf(f, "  \"metric\": \"%s\",\n", metric_name(job->metric));
	fprintf(f, "  \"n\": %" PRId64 ", \"m\": %" PRId64 ", \"d\": %" PRId64
		", \"k\": %" PRId64 ",\n", job->n, job->m, job->d, job->k);
	fprintf(f, "  \"ranks\": %d, \"grid\": [%d, %d], \"backend\": \"%s\","
		"\n", nranks, p->pr, p->pc, be->name);
	fprintf(f, "  \"phase_seconds\": {");
	for (int i = 0; i < PH_COUNT; i++)
		fprintf(f, "%s\"%s\": %.6f", i ? ", " : "", phase_names[i],
			fs->ph[i]);
	fprintf(f, ", \"other\": %.6f},\n  \"total_seconds\": %.6f,\n",
		fs->other, fs->total);
	json_merge(f, job, p, bytes, nranks);
	fprintf(f, "  \"gemm_flops\": %.6g,\n", fs->flops);
	if (job->command == XJ_CMD_TOPK)
		fprintf(f, "  \"precision\": \"%s\", "
			"\"rescored_per_query\": %.3f, "
			"\"rescore_undecided\": %.0f, "
			"\"candidate_seconds\": %.6f,\n",
			precision_name(job->precision),
			job->n > 0 ? fs->rescored / (double)job->n : 0.0,
			fs->undecided, fs->cand_s);
	if (job->command != XJ_CMD_MATRIX) {   /* how auto chose, if it did */
		fprintf(f, "  \"precision_why\": ");
		inspect_json_str(f, job->precision_why);
		fprintf(f, ",\n");
	}
	json_kernels(f, be, fs);
	fprintf(f, "  \"gflops_total\": %.3f,\n",
		rate(fs->flops, fs->total) * 1e-9);
	fprintf(f, "  \"gflops_compute\": %.3f,\n",
		rate(fs->flops, fs->ph[PH_COMPUTE]) * 1e-9);
	fprintf(f, "  \"bytes_written\": %.0f,\n", fs->written);
	fprintf(f, "  \"bytes_written_direct\": %.0f,\n", fs->direct);
	fprintf(f, "  \"gbps_written_total\": %.6g,\n",
		rate(fs->written, fs->total) * 1e-9);
	fprintf(f, "  \"gbps_written_write\": %.6g\n}\n",
		rate(fs->written, fs->ph[PH_WRITE]) * 1e-9);
	fclose(f);
}

/* The slowest rank's phases (sent to rank 0), and the sums over all
 * ranks. Per-phase maxima over ranks would not add up to any rank's
 * total. */
static void gather_final(const xj_report *r, const xj_comm *c,
			 const xj_backend *be, final_sums *f)
{
	double k[2 * XJ_KTIME_MAX + 3] = { 0 }, ks[2 * XJ_KTIME_MAX + 3];

	struct { double s; int rank; } mine = { r->total_s, c->rank }, slow;
	double w[2] = { (double)r->write_bytes,
			(double)r->write_direct_bytes }, sum = 0;
	double ws[2] = { 0, 0 };

	memcpy(f->ph, r->phase_s, sizeof(f->ph));
	MPI_CHECK(MPI_Allreduce(&mine, &slow, 1, MPI_DOUBLE_INT, MPI_MAXLOC,
				c->world));
	MPI_CHECK(MPI_Bcast(f->ph, PH_COUNT, MPI_DOUBLE, slow.rank,
			    c->world));
	MPI_CHECK(MPI_Reduce(&r->gemm_flops, &f->flops, 1, MPI_DOUBLE,
			     MPI_SUM, 0, c->world));
	MPI_CHECK(MPI_Reduce(w, ws, 2, MPI_DOUBLE, MPI_SUM, 0, c->world));
	f->written = ws[0];
	f->direct = ws[1];
	/* the backend's counters at the end (a device's arrive with its
	 * last topk_end) */
	for (int i = 0; i < be->nktime && i < XJ_KTIME_MAX; i++) {
		k[i] = be->ktime[i].ms;
		k[XJ_KTIME_MAX + i] = (double)be->ktime[i].calls;
	}
	k[2 * XJ_KTIME_MAX] = be->rescored_pairs > r->rescored_pairs ?
			      be->rescored_pairs : r->rescored_pairs;
	k[2 * XJ_KTIME_MAX + 1] = be->rescore_undecided;
	k[2 * XJ_KTIME_MAX + 2] = be->rescore_seconds;
	MPI_CHECK(MPI_Reduce(k, ks, 2 * XJ_KTIME_MAX + 3, MPI_DOUBLE, MPI_SUM,
			     0, c->world));
	memcpy(f->kms, ks, sizeof(f->kms));
	memcpy(f->kcalls, ks + XJ_KTIME_MAX, sizeof(f->kcalls));
	f->rescored = ks[2 * XJ_KTIME_MAX];
	f->undecided = ks[2 * XJ_KTIME_MAX + 1];
	f->cand_s = ks[2 * XJ_KTIME_MAX + 2] / c->nranks;
	f->ksum = 0;
	for (int i = 0; i < XJ_KTIME_MAX; i++)
		f->ksum += f->kms[i];
	f->total = slow.s;
	for (int i = 0; i < PH_COUNT; i++)
		sum += f->ph[i];
	f->other = f->total - sum;
}

/* Rank 0: device time by kernel class, summed over ranks. */
static void print_kernels(const xj_backend *be, const final_sums *f)
{
	if (be->detail)
		printf("# %s backend: %s\n", be->name, be->detail);
	if (be->nktime <= 0 || f->ksum <= 0)
		return;
	printf("# device time by kernel class (events around each launch, "
	       "summed over ranks; overlapping streams count twice)\n");
	printf("| %-10s | %10s | %12s | %6s |\n", "kernel", "calls", "ms",
	       "share");
	printf("| %-10s | %10s | %12s | %6s |\n", "------", "-----", "--",
	       "-----");
	for (int i = 0; i < be->nktime; i++)
		if (f->kcalls[i] > 0)
			printf("| %-10s | %10.0f | %12.3f | %5.1f%% |\n",
			       be->ktime[i].name, f->kcalls[i], f->kms[i],
			       100 * f->kms[i] / f->ksum);
}

/* "; 0.61 s of a rank's compute on them" where the backend timed it. */
static const char *cand_words(const final_sums *f, char *buf, size_t n)
{
	buf[0] = 0;
	if (f->cand_s > 0)
		snprintf(buf, n, "; %.3g s of a rank's compute on them",
			 f->cand_s);
	return buf;
}

void report_final(xj_report *r, const xj_comm *c, const xj_job *job,
		  const plan *p, const xj_backend *be, const char *json_path)
{
	final_sums f;
	char words[64];
	int64_t mine[2] = { r->merge_sent_bytes, r->merge_recv_bytes };
	int64_t *bytes = NULL;

	r->total_s = report_now() - r->t_start;
	if (c->rank == 0 &&
	    !(bytes = calloc(2 * (size_t)c->nranks, sizeof(*bytes))))
		xj_abort(XJ_EXIT_RESOURCE, "out of memory for the report");
	MPI_CHECK(MPI_Gather(mine, 2, MPI_INT64_T, bytes, 2, MPI_INT64_T, 0,
			     c->world));
	gather_final(r, c, be, &f);
	if (c->rank != 0)
		return;
	if (!job->progress) {     /* --quiet: the JSON only */
		if (json_path && json_path[0])
			write_json(json_path, job, p, be, &f, bytes, c->nranks);
		free(bytes);
		return;
	}
	printf("# results (the phases of the slowest rank, adding up to its "
	       "total; FLOPs and bytes over all ranks)\n");
	printf("| %-10s | %12s |\n", "phase", "seconds");
	printf("| %-10s | %12s |\n", "-----", "-------");
	for (int i = 0; i < PH_COUNT; i++)
		printf("| %-10s | %12.3f |\n", phase_names[i], f.ph[i]);
	printf("| %-10s | %12.3f |\n", "other", f.other);
	printf("| %-10s | %12.3f |\n", "total", f.total);
	printf("# %s %.3g FLOP: %.1f GFLOP/s end to end, %.1f GFLOP/s in "
	       "the compute phase\n", job->command == XJ_CMD_MATRIX ?
	       "matrix" : "GEMM", f.flops, rate(f.flops, f.total) * 1e-9,
	       rate(f.flops, f.ph[PH_COMPUTE]) * 1e-9);
	if (job->command == XJ_CMD_MATRIX)
		printf("# written %.3g bytes: %.3f GB/s end to end, %.3f GB/s "
		       "in the write phase; %.0f%% with O_DIRECT\n", f.written,
		       rate(f.written, f.total) * 1e-9,
		       rate(f.written, f.ph[PH_WRITE]) * 1e-9,
		       f.written > 0 ? 100 * f.direct / f.written : 0.0);
	/* the price of a lower precision's wider bound */
	if (job->command == XJ_CMD_TOPK && f.rescored > 0)
		printf("# candidates rescored: %.1f per query (%s GEMM, k = %"
		       PRId64 ")%s%s\n", f.rescored / (double)job->n,
		       precision_name(job->precision), job->k,
		       f.undecided > 0 ? "; some summed in index order" : "",
		       cand_words(&f, words, sizeof(words)));
	print_kernels(be, &f);
	print_merge(job, p, bytes, c->nranks);
	printf("# OK %s -> %s\n", job->command == XJ_CMD_MATRIX ? "matrix" :
	       job->command == XJ_CMD_RANGE ? "range" : "topk", job->output);
	fflush(stdout);
	if (json_path && json_path[0])
		write_json(json_path, job, p, be, &f, bytes, c->nranks);
	free(bytes);
}
