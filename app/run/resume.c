/* resume.c: the progress record of a run (see resume.h). */
#define _GNU_SOURCE
#include "resume.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ini.h>

#include "../../io/folder.h"

/* Format 2 adds [inround]; a record without it is still written as
 * format 1, so that an older xjoin resumes it. */
#define RESUME_FORMAT_PLAIN 1
#define RESUME_FORMAT_INROUND 2

/* ---- spans ------------------------------------------------------------ */

static int spans_reserve(xj_spans *sp, int64_t n, xj_status *st)
{
	int64_t cap = sp->cap ? sp->cap : 16;
	void *p;

	if (n <= sp->cap)
		return XJ_OK;
	while (cap < n)
		cap *= 2;
	p = realloc(sp->s, (size_t)cap * sizeof(sp->s[0]));
	if (!p)
		return xj_fail(st, XJ_EXIT_RESOURCE, "progress: out of memory "
			       "for %" PRId64 " spans", n);
	sp->s = p;
	sp->cap = cap;
	return XJ_OK;
}

int spans_add(xj_spans *sp, int64_t a, int64_t b, xj_status *st)
{
	int64_t i = 0, j;

	if (a >= b)
		return XJ_OK;
	/* first span that ends at or after a: it and the ones after it that
	 * start at or before b melt into [a, b) */
	while (i < sp->n && sp->s[i][1] < a)
		i++;
	j = i;
	while (j < sp->n && sp->s[j][0] <= b) {
		if (sp->s[j][0] < a)
			a = sp->s[j][0];
		if (sp->s[j][1] > b)
			b = sp->s[j][1];
		j++;
	}
	if (j == i) {   /* no overlap: insert at i */
		if (spans_reserve(sp, sp->n + 1, st))
			return st->code;
		memmove(sp->s + i + 1, sp->s + i,
			(size_t)(sp->n - i) * sizeof(sp->s[0]));
		sp->n++;
	} else {        /* spans i..j-1 become one */
		memmove(sp->s + i + 1, sp->s + j,
			(size_t)(sp->n - j) * sizeof(sp->s[0]));
		sp->n -= j - i - 1;
	}
	sp->s[i][0] = a;
	sp->s[i][1] = b;
	return XJ_OK;
}

int spans_covers(const xj_spans *sp, int64_t a, int64_t b)
{
	if (a >= b)
		return 1;
	for (int64_t i = 0; i < sp->n; i++)
		if (sp->s[i][0] <= a && b <= sp->s[i][1])
			return 1;
	return 0;
}

int64_t spans_rows(const xj_spans *sp)
{
	int64_t rows = 0;

	for (int64_t i = 0; i < sp->n; i++)
		rows += sp->s[i][1] - sp->s[i][0];
	return rows;
}

int64_t spans_rows_before(const xj_spans *sp, int64_t r)
{
	int64_t rows = 0;

	for (int64_t i = 0; i < sp->n && sp->s[i][0] < r; i++)
		rows += (r < sp->s[i][1] ? r : sp->s[i][1]) - sp->s[i][0];
	return rows;
}

int spans_copy(xj_spans *dst, const xj_spans *src, xj_status *st)
{
	spans_free(dst);
	if (spans_reserve(dst, src->n, st))
		return st->code;
	if (src->n)
		memcpy(dst->s, src->s, (size_t)src->n * sizeof(src->s[0]));
	dst->n = src->n;
	return XJ_OK;
}

void spans_free(xj_spans *sp)
{
	free(sp->s);
	memset(sp, 0, sizeof(*sp));
}

/* ---- fingerprint ------------------------------------------------------ */

/* splitmix64's finaliser: a bijective mix of all 64 bits. */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* One row's hash: its index, then its bytes read as 32-bit words
 * (memcpy: no aliasing), so -0.0 and 0.0, or two NaN payloads, hash
 * differently, as they should. */
static uint64_t hash_row(const float *r, int64_t d, int64_t row)
{
	uint64_t h = mix64((uint64_t)row + 0x9e3779b97f4a7c15ULL);

	for (int64_t j = 0; j < d; j++) {
		uint32_t w;

		memcpy(&w, r + j, sizeof(w));
		h = (h ^ w) * 0x100000001b3ULL;
		h ^= h >> 29;
	}
	return mix64(h ^ (uint64_t)d);
}

#define HASH_LANES 8   /* rows hashed side by side: independent chains */

/* The sum of the rows' hashes. Rows go HASH_LANES at a time so the
 * multiply chains overlap (each row's value is hash_row's): validation
 * hashes every input row, and one chain at a time ran at about 5 cycles
 * an element. */
uint64_t resume_hash_rows(const float *x, int64_t rows, int64_t d,
			  int64_t row0)
{
	uint64_t sum = 0;
	int64_t i = 0;

	for (; i + HASH_LANES <= rows; i += HASH_LANES) {
		uint64_t h[HASH_LANES];

		for (int u = 0; u < HASH_LANES; u++)
			h[u] = mix64((uint64_t)(row0 + i + u) +
				     0x9e3779b97f4a7c15ULL);
		for (int64_t j = 0; j < d; j++)
			for (int u = 0; u < HASH_LANES; u++) {
				uint32_t w;

				memcpy(&w, x + (i + u) * d + j, sizeof(w));
				h[u] = (h[u] ^ w) * 0x100000001b3ULL;
				h[u] ^= h[u] >> 29;
			}
		for (int u = 0; u < HASH_LANES; u++)
			sum += mix64(h[u] ^ (uint64_t)d);
	}
	for (; i < rows; i++)
		sum += hash_row(x + i * d, d, row0 + i);
	return sum;
}

/* Like a row, a list hashes its place and its entries' bits (a key of
 * -0.0 is not one of 0.0). */
uint64_t resume_hash_lists(const float *key, const int64_t *idx,
			   int64_t rows, int64_t k, int64_t at)
{
	uint64_t sum = 0;

	for (int64_t i = 0; i < rows; i++) {
		uint64_t h = mix64((uint64_t)(at + i) ^ 0x6a09e667f3bcc909ULL);

		for (int64_t j = 0; j < k; j++) {
			uint32_t w;

			memcpy(&w, key + i * k + j, sizeof(w));
			h = (h ^ w) * 0x100000001b3ULL;
			h = mix64(h ^ (uint64_t)idx[i * k + j]);
		}
		sum += mix64(h ^ (uint64_t)k);
	}
	return sum;
}

/* ---- the record ------------------------------------------------------- */

void resume_path(const char *output, char *buf, size_t size)
{
	snprintf(buf, size, "%s.progress", output);
}

void resume_lists_path(const char *record, int slot, char *buf, size_t size)
{
	snprintf(buf, size, "%s.%d", record, slot);
}

void resume_inround_clear(resume_inround *in)
{
	spans_free(&in->rows);
	spans_free(&in->base);
	memset(in, 0, sizeof(*in));
}

int resume_inround_done(const resume_inround *in, const xj_spans *done)
{
	for (int64_t i = 0; in->valid && i < in->rows.n; i++)
		if (!spans_covers(done, in->rows.s[i][0], in->rows.s[i][1]))
			return 0;
	return 1;
}

void resume_free(resume_record *r)
{
	spans_free(&r->done);
	resume_inround_clear(&r->inround);
}

static int fill_input(resume_input *in, const h5in_info *info,
		      xj_status *st)
{
	char real[PATH_MAX + 1];

	/* a pattern names no one file (nor do rows in memory): it is
	 * recorded as given, and the fingerprint covers every row */
	if ((info->shards && info->file[0] != '@') || info->mem)
		snprintf(real, sizeof(real), "%s", info->file);
	else if (info->shards && realpath(info->file + 1, real + 1))
		real[0] = '@';
	else if (!realpath(info->file, real))
		return xj_fail(st, XJ_EXIT_INPUT, "%s: %s", info->file,
			       strerror(errno));
	if (strlen(real) >= sizeof(in->file))
		return xj_fail(st, XJ_EXIT_INPUT, "%.64s...: path longer than "
			       "%zu bytes", real, sizeof(in->file) - 1);
	memcpy(in->file, real, strlen(real) + 1);
	snprintf(in->dset, sizeof(in->dset), "%s", info->dset);
	snprintf(in->type, sizeof(in->type), "%s", info->type_desc);
	in->rows = info->rows;
	in->cols = info->cols;
	in->fingerprint = 0;
	return XJ_OK;
}

int resume_fill(resume_record *r, const xj_job *job, const h5in_info *qi,
		const h5in_info *bi, xj_status *st)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->command, sizeof(r->command), "%s",
		 job->command == XJ_CMD_MATRIX ? "matrix" :
		 job->command == XJ_CMD_RANGE ? "range" : "topk");
	snprintf(r->metric, sizeof(r->metric), "%s", metric_name(job->metric));
	r->k = job->command == XJ_CMD_TOPK ? job->k : 0;
	r->has_threshold = job->has_threshold;
	r->threshold = job->has_threshold ? job->threshold : 0.0;
	r->self = job->command == XJ_CMD_MATRIX ? 0 : job->self;
	r->runs = 1;
	if (fill_input(&r->q, qi, st) || fill_input(&r->b, bi, st))
		return st->code;
	return XJ_OK;
}

static void print_input(FILE *f, const char *section, const resume_input *in)
{
	fprintf(f, "\n[%s]\nfile = %s\ndataset = %s\ntype = %s\n"
		"rows = %" PRId64 "\ncols = %" PRId64 "\n"
		"fingerprint = 0x%016" PRIx64 "\n", section, in->file, in->dset,
		in->type, in->rows, in->cols, in->fingerprint);
}

static void print_spans(FILE *f, const char *name, const xj_spans *sp)
{
	for (int64_t i = 0; i < sp->n; i++)
		fprintf(f, "%s = %" PRId64 " %" PRId64 "\n", name, sp->s[i][0],
			sp->s[i][1]);
}

/* rows_held and base_folded are for people; the spans are the truth. */
static void print_inround(FILE *f, const resume_record *r)
{
	const resume_inround *in = &r->inround;

	fprintf(f, "\n[inround]\n# a round in progress: the k-lists of its "
		"query rows over the base rows\n# folded in so far are in "
		"this record's file .%d\n"
		"slot = %d\ngeneration = %" PRId64 "\nhash = 0x%016" PRIx64
		"\nrows_held = %" PRId64 "\nbase_folded = %" PRId64 " of %"
		PRId64 "\n", in->slot, in->slot, in->generation, in->hash,
		spans_rows(&in->rows), spans_rows(&in->base), r->b.rows);
	print_spans(f, "rows", &in->rows);
	print_spans(f, "base", &in->base);
}

static void print_record(FILE *f, const resume_record *r)
{
	fprintf(f, "# xjoin progress record: this output is not finished.\n"
		"# Continue with the same command and --resume, or start over "
		"with --force.\n"
		"[xjoin]\nformat = %d\n\n[job]\ncommand = %s\nmetric = %s\n"
		"k = %" PRId64 "\n", r->inround.valid ? RESUME_FORMAT_INROUND :
		RESUME_FORMAT_PLAIN, r->command, r->metric, r->k);
	/* %a: the threshold's exact bits survive the round trip */
	if (r->has_threshold)
		fprintf(f, "threshold = %a\n", r->threshold);
	else
		fprintf(f, "threshold = none\n");
	fprintf(f, "self = %d\n", r->self);
	print_input(f, "query", &r->q);
	print_input(f, "base", &r->b);
	fprintf(f, "\n[progress]\nruns = %" PRId64 "\nrows_done = %" PRId64
		" of %" PRId64 "\n", r->runs, spans_rows(&r->done), r->q.rows);
	print_spans(f, "done", &r->done);
	if (r->inround.valid)
		print_inround(f, r);
}

int resume_save(const char *path, const resume_record *r, xj_status *st)
{
	char tmp[XJ_PATH_MAX + 32];
	FILE *f;
	int bad;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return xj_fail(st, XJ_EXIT_RESOURCE, "progress %s: %s", tmp,
			       strerror(errno));
	print_record(f, r);
	bad = fflush(f) != 0 || fsync(fileno(f)) != 0 || ferror(f);
	if (fclose(f) != 0 || bad) {
		xj_fail(st, XJ_EXIT_RESOURCE, "progress %s: %s", tmp,
			strerror(errno));
		unlink(tmp);
		return st->code;
	}
	if (rename(tmp, path) != 0) {
		xj_fail(st, XJ_EXIT_RESOURCE, "progress %s: rename: %s", path,
			strerror(errno));
		unlink(tmp);
		return st->code;
	}
	if (folder_sync(path) != 0)
		return xj_fail(st, XJ_EXIT_RESOURCE, "progress %s: syncing "
			       "its folder: %s", path, strerror(errno));
	return XJ_OK;
}

/* ---- reading it back (libinih) ---------------------------------------- */

/* The [inround] keys a usable section must have. */
enum { IR_SLOT = 1, IR_GENERATION = 2, IR_HASH = 4, IR_ROWS = 8,
       IR_ALL = 15 };

struct load_ctx {
	resume_record *r;
	int format;
	int inround_seen;       /* IR_* bits */
	char why[160];
	xj_status *st;
};

static int parse_i64(const char *s, int64_t *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 0);
	if (errno || end == s || *end)
		return -1;
	*out = v;
	return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-')
		return -1;
	*out = v;
	return 0;
}

static int load_text(char *dst, size_t size, const char *v)
{
	if (strlen(v) >= size)
		return -1;
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

static int load_input(resume_input *in, const char *name, const char *v)
{
	int64_t x;

	if (!strcmp(name, "file"))
		return load_text(in->file, sizeof(in->file), v);
	if (!strcmp(name, "dataset"))
		return load_text(in->dset, sizeof(in->dset), v);
	if (!strcmp(name, "type"))
		return load_text(in->type, sizeof(in->type), v);
	if (!strcmp(name, "fingerprint"))
		return parse_u64(v, &in->fingerprint);
	if (parse_i64(v, &x) || x < 0)
		return -1;
	if (!strcmp(name, "rows"))
		in->rows = x;
	else if (!strcmp(name, "cols"))
		in->cols = x;
	else
		return -1;
	return 0;
}

static int load_job(resume_record *r, const char *name, const char *v)
{
	char *end;
	int64_t x;

	if (!strcmp(name, "command"))
		return load_text(r->command, sizeof(r->command), v);
	if (!strcmp(name, "metric"))
		return load_text(r->metric, sizeof(r->metric), v);
	if (!strcmp(name, "threshold")) {
		r->has_threshold = strcmp(v, "none") != 0;
		if (!r->has_threshold)
			return 0;
		errno = 0;
		r->threshold = strtod(v, &end);
		return errno || end == v || *end ? -1 : 0;
	}
	if (parse_i64(v, &x))
		return -1;
	if (!strcmp(name, "k") && x >= 0)
		r->k = x;
	else if (!strcmp(name, "self") && (x == 0 || x == 1))
		r->self = (int)x;
	else
		return -1;
	return 0;
}

/* "a b", a span [a, b) with 0 <= a < b, added to sp. */
static int load_span(struct load_ctx *c, xj_spans *sp, const char *v)
{
	int64_t a, b;
	int used = 0;

	if (sscanf(v, "%" SCNd64 " %" SCNd64 " %n", &a, &b, &used) != 2 ||
	    v[used] || a < 0 || b <= a)
		return -1;
	return spans_add(sp, a, b, c->st) ? -1 : 0;
}

static int load_progress(struct load_ctx *c, const char *name,
			 const char *v)
{
	if (!strcmp(name, "runs"))
		return parse_i64(v, &c->r->runs) || c->r->runs < 1 ? -1 : 0;
	if (!strcmp(name, "rows_done"))
		return 0;   /* for people: the spans are the truth */
	if (strcmp(name, "done") != 0)
		return -1;
	return load_span(c, &c->r->done, v);
}

static int load_inround(struct load_ctx *c, const char *name,
			const char *v)
{
	resume_inround *in = &c->r->inround;
	int64_t x;

	if (!strcmp(name, "rows_held") || !strcmp(name, "base_folded"))
		return 0;   /* for people, as rows_done */
	if (!strcmp(name, "rows")) {
		c->inround_seen |= IR_ROWS;
		return load_span(c, &in->rows, v);
	}
	if (!strcmp(name, "base"))
		return load_span(c, &in->base, v);
	if (!strcmp(name, "hash")) {
		c->inround_seen |= IR_HASH;
		return parse_u64(v, &in->hash);
	}
	if (parse_i64(v, &x))
		return -1;
	if (!strcmp(name, "slot") && (x == 0 || x == 1)) {
		c->inround_seen |= IR_SLOT;
		in->slot = (int)x;
	} else if (!strcmp(name, "generation") && x >= 1) {
		c->inround_seen |= IR_GENERATION;
		in->generation = x;
	} else {
		return -1;
	}
	return 0;
}

static int load_line(void *user, const char *section, const char *name,
		     const char *value)
{
	struct load_ctx *c = user;
	int64_t x;
	int rc = -1;

	if (!strcmp(section, "xjoin") && !strcmp(name, "format")) {
		rc = parse_i64(value, &x);
		c->format = rc ? 0 : (int)x;
		if (!rc && (x < RESUME_FORMAT_PLAIN ||
			    x > RESUME_FORMAT_INROUND)) {
			snprintf(c->why, sizeof(c->why), "format %s, this "
				 "xjoin reads %d to %d", value,
				 RESUME_FORMAT_PLAIN, RESUME_FORMAT_INROUND);
			return 0;
		}
	} else if (!strcmp(section, "job")) {
		rc = load_job(c->r, name, value);
	} else if (!strcmp(section, "query")) {
		rc = load_input(&c->r->q, name, value);
	} else if (!strcmp(section, "base")) {
		rc = load_input(&c->r->b, name, value);
	} else if (!strcmp(section, "progress")) {
		rc = load_progress(c, name, value);
	} else if (!strcmp(section, "inround") &&
		   c->format >= RESUME_FORMAT_INROUND) {
		rc = load_inround(c, name, value);
	}
	if (rc)
		snprintf(c->why, sizeof(c->why), "[%s] %s = %.64s", section,
			 name, value);
	return rc == 0;
}

static int spans_past(const xj_spans *sp, int64_t rows)
{
	return sp->n && sp->s[sp->n - 1][1] > rows;
}

/* An [inround] section is whole and inside the inputs, or refused. */
static int check_inround(const char *path, resume_record *r, int seen,
			 xj_status *st)
{
	resume_inround *in = &r->inround;

	if (!seen && !in->base.n)
		return XJ_OK;
	if (seen != IR_ALL)
		return xj_fail(st, XJ_EXIT_INPUT, "progress %s: incomplete "
			       "[inround] section (start over with --force)",
			       path);
	if (spans_past(&in->rows, r->q.rows) ||
	    spans_past(&in->base, r->b.rows))
		return xj_fail(st, XJ_EXIT_INPUT, "progress %s: [inround] "
			       "names rows past the inputs' %" PRId64 " query "
			       "and %" PRId64 " base rows", path, r->q.rows,
			       r->b.rows);
	in->valid = 1;
	return XJ_OK;
}

int resume_load(const char *path, resume_record *r, xj_status *st)
{
	struct load_ctx c = { .r = r, .st = st };
	FILE *f;
	int line;

	memset(r, 0, sizeof(*r));
	f = fopen(path, "r");
	if (!f)
		return xj_fail(st, errno == ENOENT ? XJ_EXIT_USAGE :
			       XJ_EXIT_INPUT, "progress %s: %s", path,
			       strerror(errno));
	line = ini_parse_file(f, load_line, &c);
	fclose(f);
	if (st->code)
		return st->code;
	if (line != 0)
		return xj_fail(st, XJ_EXIT_INPUT, "progress %s:%d: cannot read "
			       "%s (start over with --force)", path, line,
			       c.why[0] ? c.why : "this line");
	if (!c.format || !r->command[0] || !r->q.file[0] || !r->b.file[0])
		return xj_fail(st, XJ_EXIT_INPUT, "progress %s: incomplete "
			       "record (start over with --force)", path);
	if (r->done.n && r->done.s[r->done.n - 1][1] > r->q.rows)
		return xj_fail(st, XJ_EXIT_INPUT, "progress %s: rows done "
			       "past the %" PRId64 " query rows", path,
			       r->q.rows);
	return check_inround(path, r, c.inround_seen, st);
}

/* ---- comparing -------------------------------------------------------- */

static int differs(xj_status *st, const char *what, const char *old,
		   const char *now)
{
	return xj_fail(st, XJ_EXIT_USAGE, "--resume: %s differs from the "
		       "interrupted run: it had %s, this run has %s (use the "
		       "same job, or --force to start over)", what, old, now);
}

static int check_input(const char *role, const resume_input *o,
		       const resume_input *n, xj_status *st)
{
	char what[64], a[64], b[64];

	snprintf(what, sizeof(what), "the %s file", role);
	if (strcmp(o->file, n->file))
		return differs(st, what, o->file, n->file);
	snprintf(what, sizeof(what), "the %s dataset", role);
	if (strcmp(o->dset, n->dset))
		return differs(st, what, o->dset, n->dset);
	snprintf(what, sizeof(what), "the %s type", role);
	if (strcmp(o->type, n->type))
		return differs(st, what, o->type, n->type);
	snprintf(what, sizeof(what), "the %s shape", role);
	snprintf(a, sizeof(a), "%" PRId64 " x %" PRId64, o->rows, o->cols);
	snprintf(b, sizeof(b), "%" PRId64 " x %" PRId64, n->rows, n->cols);
	if (strcmp(a, b))
		return differs(st, what, a, b);
	return XJ_OK;
}

static void threshold_text(const resume_record *r, char *buf, size_t size)
{
	if (r->has_threshold)
		snprintf(buf, size, "%.17g", r->threshold);
	else
		snprintf(buf, size, "none");
}

int resume_check_job(const resume_record *old, const resume_record *now,
		     xj_status *st)
{
	char a[64], b[64];

	if (strcmp(old->command, now->command))
		return differs(st, "the command", old->command, now->command);
	if (strcmp(old->metric, now->metric))
		return differs(st, "--metric", old->metric, now->metric);
	snprintf(a, sizeof(a), "%" PRId64, old->k);
	snprintf(b, sizeof(b), "%" PRId64, now->k);
	if (old->k != now->k)
		return differs(st, "-k", a, b);
	threshold_text(old, a, sizeof(a));
	threshold_text(now, b, sizeof(b));
	if (old->has_threshold != now->has_threshold ||
	    (old->has_threshold && old->threshold != now->threshold))
		return differs(st, "--threshold", a, b);
	if (old->self != now->self)
		return differs(st, "--self", old->self ? "on" : "off",
			       now->self ? "on" : "off");
	if (check_input("query", &old->q, &now->q, st) ||
	    check_input("base", &old->b, &now->b, st))
		return st->code;
	return XJ_OK;
}

int resume_check_data(const resume_record *old, const resume_record *now,
		      xj_status *st)
{
	const resume_input *o = &old->q, *n = &now->q;
	const char *role = "query";

	if (o->fingerprint == n->fingerprint) {
		o = &old->b;
		n = &now->b;
		role = "base";
		if (o->fingerprint == n->fingerprint)
			return XJ_OK;
	}
	return xj_fail(st, XJ_EXIT_INPUT, "--resume: the %s values in %s:%s "
		       "changed since the interrupted run (fingerprint "
		       "0x%016" PRIx64 ", recorded 0x%016" PRIx64 "); start "
		       "over with --force", role, n->file, n->dset,
		       n->fingerprint, o->fingerprint);
}
