/* plan.c: grid, blocks and chunk sizes (see plan.h for the formulas). */
#include "plan.h"

#include <inttypes.h>

#define BCHUNK_TOPK_MAX 16384
#define BCHUNK_MATRIX_MAX 4096
#define QCHUNK_MATRIX_MAX 16384
#define QCHUNK_MIN_WANTED 256
/* A matrix's column unit on P > 1 ranks (plan.h): 4 KiB of a row, so that
 * chunks of any row count are whole pages (O_DIRECT) */
#define MATRIX_COL_UNIT 1024
/* A self-join's base chunk is one backend call of up to B^2 d / 2 GEMM
 * FLOPs (an interrupt or snapshot waits for it): 131072 rows is 1.1e12
 * at d = 128, a few seconds on two cores. */
#define BCHUNK_SELF_MAX 131072
/* Fewer shared rows than this take the backend's plain path
 * (kernels/selfjoin.h, SYM_MIN_ROWS): a split would only cost reads. */
#define SPLIT_MIN_ROWS 1024
/* Part of the budget left to HDF5's chunk cache, MPI-IO buffers and
 * allocator slack, which the formula does not model: measured at about
 * 1.2 MiB for a 24 MiB matrix run (tests/integration/memory_check.py). */
#define RESERVE_SHARE 8
#define RESERVE_MAX_BYTES (INT64_C(256) << 20)
/* Keep one exchange's element count well inside MPI's int counts. */
#define LIST_ENTRIES_MAX (INT64_C(1) << 28)

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static void plan_grid(const plan_in *in, int *pr, int *pc)
{
	int64_t best = INT64_MAX;

	if (in->cmd == XJ_CMD_RANGE) {   /* no merge: whole rows per rank */
		*pr = in->nranks;
		*pc = 1;
		return;
	}
	for (int r = 1; r <= in->nranks; r++) {
		int c = in->nranks / r;
		int64_t cost;

		if (r * c != in->nranks)
			continue;
		cost = ceil_div(in->n, r) + ceil_div(in->m, c);
		/* loop runs r upward, so c falls: '<=' keeps the smaller c */
		if (cost <= best) {
			best = cost;
			*pr = r;
			*pc = c;
		}
	}
}

static int64_t row_bytes(const plan_in *in)
{
	return in->d * 4 * (in->metric == XJ_METRIC_COSINE ? 2 : 1);
}

static int64_t qrow_bytes(const plan_in *in, int64_t brows)
{
	if (in->cmd == XJ_CMD_MATRIX)
		return row_bytes(in) + brows * 4 * (in->out_blocks > 1 ? 2 : 1);
	if (in->cmd == XJ_CMD_RANGE)
		return row_bytes(in) + in->work_per_qrow_bytes +
		       in->m * PLAN_RANGE_PAIR_BYTES;
	return row_bytes(in) + in->work_per_qrow_bytes + 4 * in->k * 12;
}

static int64_t peak_bytes(const plan_in *in, int64_t q, int64_t b)
{
	return q * qrow_bytes(in, b) + b * row_bytes(in) + in->work_fixed_bytes;
}

/* The budget less the reserve. */
static int64_t usable_bytes(const plan_in *in)
{
	return in->budget_bytes - min64(in->budget_bytes / RESERVE_SHARE,
					 RESERVE_MAX_BYTES);
}

int64_t plan_usable_bytes(const plan_in *in)
{
	return usable_bytes(in);
}

/* Largest query chunk that fits next to b base rows, or 0. */
static int64_t fit_qrows(const plan_in *in, int64_t b, int64_t qmax)
{
	int64_t avail = usable_bytes(in) - b * row_bytes(in) -
			in->work_fixed_bytes;
	int64_t q;

	if (avail <= 0)
		return 0;
	q = min64(qmax, avail / qrow_bytes(in, b));
	if (in->k > 0)
		q = min64(q, max64(1, LIST_ENTRIES_MAX / in->k));
	return q;
}

/* Self-join: the largest base chunk s <= the query chunk (and the cap)
 * next to which a query chunk of s rows still fits; the query chunk
 * becomes a multiple of it. Nothing changes when s would not exceed b. */
static void self_chunks(const plan_in *in, int64_t qmax, int64_t bshard,
			int64_t *q, int64_t *b)
{
	int64_t s = min64(min64(*q, bshard), BCHUNK_SELF_MAX);

	while (s > *b && fit_qrows(in, s, qmax) < s)
		s -= s / 4 > 0 ? s / 4 : 1;
	if (s <= *b)
		return;
	*b = s;
	*q = *q / s * s;
}

/* Self-join split over P ranks (plan.h): the chunks, or 0 when the
 * whole set does not fit one query chunk and no size is forced. */
static int self_split(const plan_in *in, int64_t *q, int64_t *b)
{
	int64_t s = min64(in->m, BCHUNK_SELF_MAX);

	if (in->n < SPLIT_MIN_ROWS || (in->chunk_rows > 0 &&
				       in->chunk_rows < SPLIT_MIN_ROWS))
		return 0;
	if (in->chunk_rows > 0) {
		*q = min64(in->chunk_rows, in->n);
		*b = min64(in->chunk_rows, in->m);
		return 1;
	}
	if (fit_qrows(in, s, in->n) < in->n)
		return 0;
	*q = in->n;
	*b = s;
	return 1;
}

/* A matrix on several ranks: shares in whole units of the output file's
 * chunks (plan.h); q may fall to even out the query chunks. */
static void matrix_align(const plan_in *in, plan *p, int64_t *q, int64_t b)
{
	int64_t bu = b % MATRIX_COL_UNIT ? b : MATRIX_COL_UNIT;
	int64_t qu = ceil_div(p->qblock_max, ceil_div(p->qblock_max, *q));

	if (p->pc > 1 && ceil_div(in->m, bu) >= p->pc) {
		p->balign = bu;
		p->bshard_max = ceil_div(ceil_div(in->m, bu), p->pc) * bu;
	}
	if (p->pr > 1 && ceil_div(in->n, qu) >= p->pr) {
		*q = qu;
		p->qalign = qu;
		p->qblock_max = ceil_div(ceil_div(in->n, qu), p->pr) * qu;
	}
}

int plan_make(const plan_in *in, plan *out, xj_status *st)
{
	plan p = {0};
	int64_t b, q;

	plan_grid(in, &p.pr, &p.pc);
	p.qblock_max = ceil_div(in->n, p.pr);
	p.bshard_max = ceil_div(in->m, p.pc);
	p.budget_bytes = in->budget_bytes;

	if (in->self_join && in->cmd == XJ_CMD_TOPK && in->nranks > 1 &&
	    in->n == in->m && self_split(in, &q, &b)) {
		p.split = 1;
		p.pr = 1;
		p.pc = in->nranks;
		p.qblock_max = in->n;
		p.bshard_max = in->m;
	} else if (in->chunk_rows > 0) {
		b = min64(in->chunk_rows, p.bshard_max);
		q = min64(in->chunk_rows, p.qblock_max);
	} else {
		int64_t want = min64(p.qblock_max, QCHUNK_MIN_WANTED);
		int64_t qmax = in->cmd == XJ_CMD_MATRIX ?
			       min64(p.qblock_max, QCHUNK_MATRIX_MAX) :
			       p.qblock_max;

		b = min64(p.bshard_max, in->cmd == XJ_CMD_MATRIX ?
			  BCHUNK_MATRIX_MAX : BCHUNK_TOPK_MAX);
		q = fit_qrows(in, b, qmax);
		while (q < want && b > 1) {
			b = max64(1, b / 2);
			q = fit_qrows(in, b, qmax);
		}
		if (in->self_join && !in->self_cross &&
		    in->cmd == XJ_CMD_TOPK)
			self_chunks(in, qmax, p.bshard_max, &q, &b);
	}
	if (in->bchunk_rows > 0 && !p.split)
		b = min64(in->bchunk_rows, p.bshard_max);
	b = max64(b, 1);
	q = max64(q, 1);
	/* (a set with itself writes square blocks dealt in turn instead:
	 * app/driver/driver_matrix.c) */
	if (in->cmd == XJ_CMD_MATRIX && in->nranks > 1 && !in->same_rows)
		matrix_align(in, &p, &q, b);
	p.qchunk_rows = q;
	p.bchunk_rows = b;
	p.peak_bytes = peak_bytes(in, q, b);
	if (p.peak_bytes > usable_bytes(in))
		return xj_fail(st, XJ_EXIT_RESOURCE,
			       "memory budget %" PRId64 " bytes per rank is too "
			       "small: %" PRId64 " bytes are usable (1/8 is kept "
			       "for library caches) and %" PRId64 " query and %"
			       PRId64 " base rows need %" PRId64 " bytes (raise "
			       "--mem-limit or --mem-fraction, or use more ranks)",
			       in->budget_bytes, usable_bytes(in), q, b,
			       p.peak_bytes);
	p.qrounds = ceil_div(p.qblock_max, q);
	if (in->cmd == XJ_CMD_RANGE)    /* chunks dealt round robin */
		p.qrounds = ceil_div(ceil_div(in->n, q), in->nranks);
	p.brounds = ceil_div(p.bshard_max, b);
	*out = p;
	return XJ_OK;
}

int plan_make_device(plan_in *pin, const struct xj_backend_cfg *cfg,
		     const plan_device_bytes *fn, plan *out, xj_status *st)
{
	plan first;
	int64_t b, q0;

	pin->work_fixed_bytes = 0;
	pin->work_per_qrow_bytes = 0;
	pin->out_blocks = 2;    /* matrix_async */
	if (plan_make(pin, &first, st))
		return st->code;
	b = first.bchunk_rows;
	q0 = fn->work(cfg, 0, b);
	pin->work_fixed_bytes = q0 + fn->pinned(cfg, b);
	pin->work_per_qrow_bytes = fn->work(cfg, 1, b) - q0;
	/* a grid row of several ranks may merge on the device (NCCL), whose
	 * received lists the merge allocates then; the grid depends only on
	 * n, m and the rank count, so first.pc is the final one, except that
	 * the work bytes may turn a self-join's split (pc = all ranks) off:
	 * first.pc is then larger, and the merge bytes with it (safe) */
	q0 = fn->merge(cfg, 0, first.pc);
	pin->work_fixed_bytes += q0;
	pin->work_per_qrow_bytes += fn->merge(cfg, 1, first.pc) - q0;
	return plan_make(pin, out, st);
}

int64_t plan_matrix_chunk_cols(int64_t m, int64_t bc)
{
	if (bc < 1 || bc >= m)
		return 0;
	return ceil_div(m, bc) * bc - m <= m / 16 ? bc : 0;
}

/* split_block over units of align rows (0: rows); the last unit may be
 * short. */
static void split_units(int64_t total, int64_t align, int64_t parts,
			int64_t i, int64_t *start, int64_t *count)
{
	int64_t u0, nu;

	if (align < 1) {
		split_block(total, parts, i, start, count);
		return;
	}
	split_block(ceil_div(total, align), parts, i, &u0, &nu);
	*start = min64(total, u0 * align);
	*count = min64(total, (u0 + nu) * align) - *start;
}

void plan_rank(const plan_in *in, const plan *p, int rank, plan_rank_view *v)
{
	v->row = rank / p->pc;
	v->col = rank % p->pc;
	split_units(in->n, p->qalign, p->pr, v->row, &v->q0, &v->qrows);
	split_units(in->m, p->balign, p->pc, v->col, &v->b0, &v->brows);
	if (p->split) {
		v->b0 = 0;
		v->brows = in->m;
	}
	v->nqchunks = ceil_div(v->qrows, p->qchunk_rows);
	v->nbchunks = ceil_div(v->brows, p->bchunk_rows);
}

static void print_bytes(FILE *out, const char *name, int64_t bytes)
{
	static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	fprintf(out, "| %-22s | %14.1f %-3s |\n", name, v, unit[u]);
}

int64_t plan_tri_side(const plan_in *in, const plan *p)
{
	int64_t t = p->qchunk_rows < p->bchunk_rows ? p->qchunk_rows :
		    p->bchunk_rows;
	int64_t sixteenth = ((in->n + 15) / 16 + 255) / 256 * 256;

	t = t < sixteenth ? t : sixteenth;
	/* three blocks (two computed in turn, a transpose) in the plan's two
	 * output blocks of Q x B */
	while (t > 256 && 3 * t * t > 2 * p->qchunk_rows * p->bchunk_rows)
		t -= 256;
	return t;
}

void plan_print(FILE *out, const plan_in *in, const plan *p)
{
	int64_t qrow = qrow_bytes(in, p->bchunk_rows);
	int64_t tri = plan_tri_side(in, p);

	fprintf(out, "# plan: %s, %d rank(s)\n",
		in->cmd == XJ_CMD_MATRIX ? "matrix" :
		in->cmd == XJ_CMD_RANGE ? "range" : "topk", in->nranks);
	fprintf(out, "| %-22s | %18s |\n", "item", "value");
	fprintf(out, "| %-22s | %18s |\n", "----", "-----");
	fprintf(out, "| %-22s | %8d x %-7d |\n", "grid (Pr x Pc)", p->pr, p->pc);
	fprintf(out, "| %-22s | %13" PRId64 " rows |\n", "query block (max)",
		p->qblock_max);
	fprintf(out, "| %-22s | %13" PRId64 " rows |\n", "base shard (max)",
		p->bshard_max);
	fprintf(out, "| %-22s | %13" PRId64 " rows |\n", "query chunk",
		p->qchunk_rows);
	fprintf(out, "| %-22s | %13" PRId64 " rows |\n", "base chunk",
		p->bchunk_rows);
	fprintf(out, "| %-22s | %18" PRId64 " |\n", "query chunks (max)",
		p->qrounds);
	fprintf(out, "| %-22s | %18" PRId64 " |\n", "base chunks (max)",
		p->brounds);
	print_bytes(out, "per query row", qrow);
	print_bytes(out, "per base row", row_bytes(in));
	print_bytes(out, "backend fixed", in->work_fixed_bytes);
	print_bytes(out, "peak per rank", p->peak_bytes);
	print_bytes(out, "budget per rank", p->budget_bytes);
	for (int side = 0; side < 2; side++) {
		int64_t unit = side ? p->balign : p->qalign;

		if (unit > 0)
			fprintf(out, "# %s in units of %" PRId64 " %s: whole "
				"chunks of the output file (each rank can "
				"write its own with O_DIRECT)\n",
				side ? "base shards" : "query blocks", unit,
				side ? "columns" : "rows");
	}
	if (p->split)
		fprintf(out, "# self-join split over %d ranks: each holds "
			"every query chunk and streams the whole base; of the "
			"rows a base chunk shares with the query chunk each "
			"pair is scored once, block pair t (512 x 512 rows, "
			"the upper triangle) on rank t mod %d, diagonal block "
			"i on rank i mod %d; the other pairs split by query "
			"row; the merge over all ranks gathers each row's "
			"lists\n", p->pc, p->pc, p->pc);
	else if (in->self_join && in->self_cross && in->cmd == XJ_CMD_TOPK)
		fprintf(out, "# self-join: each pair of a query chunk's rows "
			"that the rank streams as base rows is scored once, "
			"across base chunks (the upper triangle of their "
			"tiles); other pairs as usual, on the rank that owns "
			"the query row\n");
	else if (in->self_join && in->cmd == XJ_CMD_TOPK)
		fprintf(out, "# self-join: the rows a base chunk shares with "
			"the query chunk are scored once per pair (the "
			"upper triangle of their tiles); other pairs as "
			"usual, on the rank that owns the query row\n");
	if (in->cmd == XJ_CMD_MATRIX && in->same_rows && in->n == in->m &&
	    in->n > tri) {
		int64_t nb = (in->n + tri - 1) / tri;

		fprintf(out, "# the same rows on both sides: the upper "
			"triangle, %" PRId64 " blocks of %" PRId64 " rows (of %"
			PRId64 " x %" PRId64 "), each written with its "
			"transpose, dealt over the ranks in turn\n",
			nb * (nb + 1) / 2, tri, nb, nb);
	}
	fprintf(out, "# memory = Q*per_query_row + B*per_base_row + fixed "
		"(Q = query chunk, B = base chunk)\n");
}
