/*
 * inspect.c: `xjoin inspect FILE` (see inspect.h).
 *
 * What is read, and how much of it:
 *   root attributes  all, by name (H5Aiterate): strings of fixed or
 *                    variable length, numbers as int64 or double
 *   datasets         every one in the file (H5Ovisit): type, shape,
 *                    layout and filters, bytes stored
 *   first rows       --rows N rows: the first 10 pairs (topk) or the
 *                    first 8 values (matrix) of each
 *   row check        every value of /neighbors and /distances, in tiles
 *                    of R rows x W columns holding at most slab_bytes
 *                    (12 bytes per topk pair, 4 per matrix value); a row
 *                    wider than a tile is walked in column pieces (R = 1)
 *                    with its state carried over, so memory stays bounded
 *                    whatever n, k or m
 *
 * The rules checked are the output's own (README, Output): each topk row
 * best first (ascending distances, descending ip), -1 padding only at its
 * end and valued +inf (-inf for ip), base indices in [0, base_rows), no
 * pair (i, i) under self exclusion, no value past the threshold (the
 * stored float is at least as good as the threshold itself, see
 * metric_value_to_key), no NaN; matrix values not NaN, and not negative
 * for l2 and sqeuclidean. Equal values may come in any index order: the
 * tie rule orders double-precision scores, which can round to one float.
 *
 * Everything is local to the calling process: HDF5 through the sec2
 * driver, read-only. Text goes to the caller's FILE (tests pass an
 * open_memstream); problems end in the caller's xj_status.
 */
#define _GNU_SOURCE
#include "inspect.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "../io/h5check.h"
#include "../io/h5out.h"
#include "resume.h"
#include "version.h"

#define INSPECT_SLAB_BYTES ((int64_t)16 << 20)
#define INSPECT_PAIRS_SHOWN 10      /* topk pairs shown per row */
#define INSPECT_VALUES_SHOWN 8      /* matrix values shown per row */
#define INSPECT_SHOW_SLAB_ROWS 256  /* rows read at once for showing */
#define INSPECT_DSETS_MAX 256       /* datasets described; more are counted */
#define INSPECT_RANK_MAX 8
#define INSPECT_SPANS_SHOWN 8
#define INSPECT_TEXT_MAX (XJ_PATH_MAX + 64)
#define INSPECT_ROW_MAX (XJ_PATH_MAX + XJ_NAME_MAX + 128)
#define TABLE_COLS 5

#if H5_VERSION_GE(1, 12, 0)
typedef H5O_info2_t inspect_oinfo;
#define inspect_visit(id, op, data) \
	H5Ovisit3((id), H5_INDEX_NAME, H5_ITER_INC, (op), (data), H5O_INFO_BASIC)
#else
typedef H5O_info_t inspect_oinfo;
#define inspect_visit(id, op, data) \
	H5Ovisit2((id), H5_INDEX_NAME, H5_ITER_INC, (op), (data), H5O_INFO_BASIC)
#endif

enum attr_kind { AK_INT, AK_FLOAT, AK_STR, AK_OTHER };

struct attr {
	char name[XJ_NAME_MAX];
	enum attr_kind kind;
	int64_t i;
	double f;
	char text[INSPECT_TEXT_MAX];   /* AK_STR: the value; AK_OTHER: shown */
	int shown;                     /* already in a table row */
};

struct dset {
	char name[XJ_NAME_MAX];        /* with leading '/' */
	char type[32];                 /* "int64", "float32", "string", ... */
	H5T_class_t cls;
	int rank;
	hsize_t dims[INSPECT_RANK_MAX];
	char layout[16];               /* contiguous, chunked, compact, ... */
	int chunked;
	hsize_t chunk[INSPECT_RANK_MAX];
	char filters[96];              /* "gzip 4, shuffle", or "" */
	uint64_t stored_bytes;
};

/* Rules a result's rows keep; which apply depends on the job. */
enum check_id {
	CK_ORDER, CK_GAP, CK_PADVAL, CK_INDEX, CK_SELF, CK_THRESHOLD, CK_NAN,
	CK_NEGATIVE, CK_COUNT
};

static const struct {
	const char *label;   /* text summary */
	const char *key;     /* JSON */
} checks[CK_COUNT] = {
	[CK_ORDER] = { "sorted best first", "sorted" },
	[CK_GAP] = { "-1 padding only at the end", "padding_at_end" },
	[CK_PADVAL] = { "padding valued", "padding_value" },
	[CK_INDEX] = { "base indices in range", "indices_in_range" },
	[CK_SELF] = { "no pair (i, i)", "no_self_pairs" },
	[CK_THRESHOLD] = { "within the threshold", "within_threshold" },
	[CK_NAN] = { "no NaN", "no_nan" },
	[CK_NEGATIVE] = { "no negative distance", "no_negative" },
};

struct check {
	int64_t rows;            /* rows failing it */
	int64_t first_row;       /* -1: none */
	char first[384];         /* what is wrong there */
};

/* One row's walk through its columns (possibly over several tiles). */
struct rowstate {
	float last;              /* last real value */
	int64_t last_col;        /* its column; -1: none yet */
	int64_t pad_col;         /* first -1; -1: none */
	int64_t pads;
	unsigned failed;         /* bits of the checks it already failed */
};

struct insp {
	const char *path;
	const inspect_opts *o;
	FILE *out;
	hid_t file;
	struct attr *attr;
	int nattr, attr_cap;
	struct dset *dset;
	int ndset;
	int64_t ndset_all;
	int oom;

	/* a result */
	int topk;
	xj_metric metric;
	int metric_ok;           /* the attribute names a known metric */
	int larger;              /* ip: larger is better */
	int64_t n, cols;         /* rows and columns of /distances */
	int64_t m;               /* base rows (indices < m); 0: unknown */
	int has_threshold, self;
	double threshold;
	float pad_value;
	hid_t nbr_id, dist_id;
	int readable;            /* the datasets can be read and checked */
	unsigned applies;        /* bits of the checks that apply */
	int nproblems;           /* structural problems */
	char problem[512];       /* the first */
	struct check ck[CK_COUNT];
	int64_t rows_checked, padded_rows, pad_entries, ninf;
	double vmin, vmax;
	int64_t tile_rows, tile_cols;
};

/* ---- small helpers ---------------------------------------------------- */

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* The shortest of %.15g .. %.17g that reads back as v. */
static void fmt_f64(char *buf, size_t size, double v)
{
	for (int digits = 15; digits <= 17; digits++) {
		snprintf(buf, size, "%.*g", digits, v);
		if (!isfinite(v) || strtod(buf, NULL) == v)
			return;
	}
}

/* The shortest of %.6g .. %.9g that reads back as the float v. */
static void fmt_f32(char *buf, size_t size, float v)
{
	for (int digits = 6; digits <= 9; digits++) {
		snprintf(buf, size, "%.*g", digits, (double)v);
		if (!isfinite(v) || strtof(buf, NULL) == v)
			return;
	}
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch == '\n')
			fputs("\\n", f);
		else if (ch < 0x20 || ch == 0x7f)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

/* JSON has no inf or NaN: they are null. */
static void json_f64(FILE *f, double v)
{
	char buf[40];

	if (!isfinite(v)) {
		fputs("null", f);
		return;
	}
	fmt_f64(buf, sizeof(buf), v);
	fputs(buf, f);
}

static void json_f32(FILE *f, float v)
{
	char buf[32];

	if (!isfinite(v)) {
		fputs("null", f);
		return;
	}
	fmt_f32(buf, sizeof(buf), v);
	fputs(buf, f);
}

/* "1000 x 100", "scalar" */
static void shape_text(char *buf, size_t size, int rank, const hsize_t *dims)
{
	size_t len = 0;

	buf[0] = '\0';
	if (rank == 0)
		snprintf(buf, size, "scalar");
	if (rank > INSPECT_RANK_MAX)
		snprintf(buf, size, "%d-D", rank);
	for (int i = 0; rank <= INSPECT_RANK_MAX && i < rank && len < size;
	     i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%llu",
					i ? " x " : "",
					(unsigned long long)dims[i]);
}

static void json_dims(FILE *f, int rank, const hsize_t *dims)
{
	fputc('[', f);
	for (int i = 0; i < rank && i < INSPECT_RANK_MAX; i++)
		fprintf(f, "%s%llu", i ? ", " : "",
			(unsigned long long)dims[i]);
	fputc(']', f);
}

/* A word the shell reads back as itself: bare when safe, else quoted. */
static void shell_word(char *buf, size_t size, const char *word)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyz"
				   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
				   "_./:+-=,@%";
	size_t len = strlen(buf);

	if (word[0] && strspn(word, safe) == strlen(word)) {
		snprintf(buf + len, size - len, " %s", word);
		return;
	}
	len += (size_t)snprintf(buf + len, size - len, " '");
	for (; *word && len + 5 < size; word++) {
		if (*word == '\'')
			len += (size_t)snprintf(buf + len, size - len, "'\\''");
		else
			buf[len++] = *word;
	}
	snprintf(buf + len, size - len, "'");
}

/* ---- tables ----------------------------------------------------------- */

/* "| a | b |" rows under a header, widths from the widest cell. */
struct table {
	int ncols, nrows, cap, oom;
	const char *head[TABLE_COLS];
	char **cell;             /* nrows x ncols, owned */
};

static void table_init(struct table *t, int ncols, const char *h0,
		       const char *h1, const char *h2, const char *h3,
		       const char *h4)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	t->head[0] = h0;
	t->head[1] = h1;
	t->head[2] = h2;
	t->head[3] = h3;
	t->head[4] = h4;
}

/* Adds a row of t->ncols strings. */
static void table_put(struct table *t, ...)
{
	va_list ap;
	char **row;

	if (t->nrows == t->cap) {
		int cap = t->cap ? 2 * t->cap : 32;
		char **p = realloc(t->cell, (size_t)cap * (size_t)t->ncols *
				   sizeof(*p));

		if (!p) {
			t->oom = 1;
			return;
		}
		t->cell = p;
		t->cap = cap;
	}
	row = t->cell + (size_t)t->nrows * (size_t)t->ncols;
	va_start(ap, t);
	for (int c = 0; c < t->ncols; c++) {
		row[c] = strdup(va_arg(ap, const char *));
		t->oom |= !row[c];
	}
	va_end(ap);
	t->nrows++;
}

__attribute__((format(printf, 3, 4)))
static void table_kv(struct table *t, const char *name, const char *fmt, ...)
{
	char value[INSPECT_ROW_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(value, sizeof(value), fmt, ap);
	va_end(ap);
	table_put(t, name, value);
}

static void table_rule(FILE *f, const int *w, int ncols)
{
	for (int c = 0; c < ncols; c++) {
		fputc('+', f);
		for (int i = 0; i < w[c] + 2; i++)
			fputc('-', f);
	}
	fputs("+\n", f);
}

static void table_line(FILE *f, const int *w, int ncols, char *const *cells,
		       const char *const *head)
{
	for (int c = 0; c < ncols; c++)
		fprintf(f, "| %-*s ", w[c], cells ? cells[c] : head[c]);
	fputs("|\n", f);
}

static void table_print(const struct table *t, FILE *f)
{
	int w[TABLE_COLS];

	for (int c = 0; c < t->ncols; c++) {
		w[c] = (int)strlen(t->head[c]);
		for (int r = 0; r < t->nrows; r++) {
			int len = (int)strlen(t->cell[r * t->ncols + c]);

			w[c] = len > w[c] ? len : w[c];
		}
	}
	table_rule(f, w, t->ncols);
	table_line(f, w, t->ncols, NULL, t->head);
	table_rule(f, w, t->ncols);
	for (int r = 0; r < t->nrows; r++)
		table_line(f, w, t->ncols, t->cell + r * t->ncols, NULL);
	table_rule(f, w, t->ncols);
}

static void table_free(struct table *t)
{
	for (int i = 0; i < t->nrows * t->ncols; i++)
		free(t->cell[i]);
	free(t->cell);
	memset(t, 0, sizeof(*t));
}

/* Print t (unless out of memory) and free it. */
static int table_done(struct insp *in, struct table *t, xj_status *st)
{
	int oom = t->oom;

	if (!oom)
		table_print(t, in->out);
	table_free(t);
	if (oom)
		return xj_fail(st, XJ_EXIT_RESOURCE, "%s: out of memory for "
			       "a table", in->path);
	return XJ_OK;
}

/* ---- root attributes -------------------------------------------------- */

/* Fixed-length strings are read one byte wider, NUL-terminated, so that
 * a NUL- or space-padded string keeps its last character. */
static void attr_read_str(hid_t id, hid_t type, struct attr *a)
{
	hid_t mt = H5Tcopy(H5T_C_S1);
	char *vlen = NULL, *buf = NULL;
	size_t bytes = H5Tget_size(type);

	if (mt < 0)
		return;
	/* HDF5 converts no string between character sets */
	if (H5Tset_cset(mt, H5Tget_cset(type)) < 0) {
		H5Tclose(mt);
		return;
	}
	if (H5Tis_variable_str(type) > 0) {
		if (H5Tset_size(mt, H5T_VARIABLE) >= 0 &&
		    H5Aread(id, mt, &vlen) >= 0 && vlen) {
			snprintf(a->text, sizeof(a->text), "%s", vlen);
			a->kind = AK_STR;
		}
		if (vlen)
			H5free_memory(vlen);
	} else if (bytes > 0 && (buf = calloc(bytes + 1, 1)) &&
		   H5Tset_size(mt, bytes + 1) >= 0 &&
		   H5Tset_strpad(mt, H5T_STR_NULLTERM) >= 0 &&
		   H5Aread(id, mt, buf) >= 0) {
		snprintf(a->text, sizeof(a->text), "%s", buf);
		a->kind = AK_STR;
	}
	free(buf);
	H5Tclose(mt);
}

static void attr_read(hid_t id, struct attr *a)
{
	hid_t type = H5Aget_type(id), space = H5Aget_space(id);
	H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
	hssize_t n = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;

	a->kind = AK_OTHER;
	snprintf(a->text, sizeof(a->text), "(%s, %lld values)",
		 h5check_class_name(cls), (long long)n);
	if (n == 1 && cls == H5T_STRING)
		attr_read_str(id, type, a);
	else if (n == 1 && cls == H5T_INTEGER &&
		 H5Aread(id, H5T_NATIVE_INT64, &a->i) >= 0)
		a->kind = AK_INT;
	else if (n == 1 && cls == H5T_FLOAT &&
		 H5Aread(id, H5T_NATIVE_DOUBLE, &a->f) >= 0)
		a->kind = AK_FLOAT;
	/* an odd attribute is shown as what it is, never an error */
	H5Eclear2(H5E_DEFAULT);
	if (space >= 0)
		H5Sclose(space);
	if (type >= 0)
		H5Tclose(type);
}

static herr_t attr_visit(hid_t loc, const char *name, const H5A_info_t *info,
			 void *data)
{
	struct insp *in = data;
	struct attr *a;
	hid_t id;

	(void)info;
	if (in->nattr == in->attr_cap) {
		int cap = in->attr_cap ? 2 * in->attr_cap : 64;
		struct attr *p = realloc(in->attr, (size_t)cap * sizeof(*p));

		if (!p) {
			in->oom = 1;
			return 1;   /* stop */
		}
		in->attr = p;
		in->attr_cap = cap;
	}
	a = &in->attr[in->nattr++];
	memset(a, 0, sizeof(*a));
	snprintf(a->name, sizeof(a->name), "%s", name);
	id = H5Aopen(loc, name, H5P_DEFAULT);
	if (id < 0) {
		H5Eclear2(H5E_DEFAULT);
		snprintf(a->text, sizeof(a->text), "(unreadable)");
		return 0;
	}
	attr_read(id, a);
	H5Aclose(id);
	return 0;
}

static int attrs_read(struct insp *in, xj_status *st)
{
	if (H5_TRY(H5Aiterate2(in->file, H5_INDEX_NAME, H5_ITER_INC, NULL,
			       attr_visit, in), st, XJ_EXIT_INPUT,
		   "%s: cannot list the root attributes", in->path))
		return st->code;
	if (in->oom)
		return xj_fail(st, XJ_EXIT_RESOURCE, "%s: out of memory for "
			       "its attributes", in->path);
	return XJ_OK;
}

static struct attr *attr_find(struct insp *in, const char *name)
{
	for (int i = 0; i < in->nattr; i++)
		if (strcmp(in->attr[i].name, name) == 0)
			return &in->attr[i];
	return NULL;
}

/* Lookups mark what they find as shown, so that the curated rows of a
 * table come first and table_raw_attrs() adds only the rest; a table
 * starts from attrs_unmark(). */
static void attrs_unmark(struct insp *in)
{
	for (int i = 0; i < in->nattr; i++)
		in->attr[i].shown = 0;
}

/* The string attribute name, or NULL. */
static const char *attr_str(struct insp *in, const char *name)
{
	struct attr *a = attr_find(in, name);

	if (!a || a->kind != AK_STR)
		return NULL;
	a->shown = 1;
	return a->text;
}

static int attr_i64(struct insp *in, const char *name, int64_t *v)
{
	struct attr *a = attr_find(in, name);

	if (!a || a->kind != AK_INT)
		return 0;
	a->shown = 1;
	*v = a->i;
	return 1;
}

static int attr_f64(struct insp *in, const char *name, double *v)
{
	struct attr *a = attr_find(in, name);

	if (!a || (a->kind != AK_FLOAT && a->kind != AK_INT))
		return 0;
	a->shown = 1;
	*v = a->kind == AK_FLOAT ? a->f : (double)a->i;
	return 1;
}

static void attr_text(const struct attr *a, char *buf, size_t size)
{
	if (a->kind == AK_INT)
		snprintf(buf, size, "%" PRId64, a->i);
	else if (a->kind == AK_FLOAT)
		fmt_f64(buf, size, a->f);
	else
		snprintf(buf, size, "%s", a->text);
}

static void json_attr(FILE *f, const struct attr *a)
{
	if (a->kind == AK_INT)
		fprintf(f, "%" PRId64, a->i);
	else if (a->kind == AK_FLOAT)
		json_f64(f, a->f);
	else
		json_str(f, a->text);
}

static void json_attrs(struct insp *in)
{
	fputs("  \"attributes\": {", in->out);
	for (int i = 0; i < in->nattr; i++) {
		fputs(i ? ",\n    " : "\n    ", in->out);
		json_str(in->out, in->attr[i].name);
		fputs(": ", in->out);
		json_attr(in->out, &in->attr[i]);
	}
	fputs(in->nattr ? "\n  },\n" : "},\n", in->out);
}

/* Every attribute not shown yet, as it is. */
static void table_raw_attrs(struct insp *in, struct table *t)
{
	char value[INSPECT_TEXT_MAX + 32];

	for (int i = 0; i < in->nattr; i++) {
		if (in->attr[i].shown)
			continue;
		attr_text(&in->attr[i], value, sizeof(value));
		table_put(t, in->attr[i].name, value);
	}
}

/* ---- datasets --------------------------------------------------------- */

static void type_text(hid_t type, struct dset *d)
{
	size_t bytes = H5Tget_size(type);

	d->cls = H5Tget_class(type);
	if (d->cls == H5T_INTEGER)
		snprintf(d->type, sizeof(d->type), "%s%zu",
			 H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int",
			 bytes * 8);
	else if (d->cls == H5T_FLOAT)
		snprintf(d->type, sizeof(d->type), "float%zu", bytes * 8);
	else
		snprintf(d->type, sizeof(d->type), "%s",
			 h5check_class_name(d->cls));
}

static void filter_name(H5Z_filter_t id, const unsigned *cd, size_t ncd,
			const char *name, char *buf, size_t size)
{
	if (id == H5Z_FILTER_DEFLATE && ncd > 0)
		snprintf(buf, size, "gzip %u", cd[0]);
	else if (id == H5Z_FILTER_SHUFFLE)
		snprintf(buf, size, "shuffle");
	else if (id == H5Z_FILTER_FLETCHER32)
		snprintf(buf, size, "fletcher32");
	else if (id == H5Z_FILTER_SZIP)
		snprintf(buf, size, "szip");
	else if (name[0])
		snprintf(buf, size, "%s", name);
	else
		snprintf(buf, size, "filter %d", (int)id);
}

static void filters_text(hid_t dcpl, struct dset *d)
{
	int nf = H5Pget_nfilters(dcpl);
	size_t len = 0;

	for (int i = 0; i < nf && len < sizeof(d->filters); i++) {
		unsigned flags, cd[8], config;
		size_t ncd = 8;
		char name[64] = "", one[72];
		H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags,
						 &ncd, cd, sizeof(name), name,
						 &config);

		if (id < 0)
			continue;
		filter_name(id, cd, ncd, name, one, sizeof(one));
		len += (size_t)snprintf(d->filters + len,
					sizeof(d->filters) - len, "%s%s",
					len ? ", " : "", one);
	}
}

static void layout_read(hid_t dset, struct dset *d)
{
	hid_t dcpl = H5Dget_create_plist(dset);

	snprintf(d->layout, sizeof(d->layout), "?");
	if (dcpl < 0)
		return;
	switch (H5Pget_layout(dcpl)) {
	case H5D_COMPACT:
		snprintf(d->layout, sizeof(d->layout), "compact");
		break;
	case H5D_CONTIGUOUS:
		snprintf(d->layout, sizeof(d->layout), "contiguous");
		break;
	case H5D_CHUNKED:
		snprintf(d->layout, sizeof(d->layout), "chunked");
		d->chunked = H5Pget_chunk(dcpl, INSPECT_RANK_MAX, d->chunk) ==
			     d->rank;
		break;
	case H5D_VIRTUAL:
		snprintf(d->layout, sizeof(d->layout), "virtual");
		break;
	default:
		break;
	}
	filters_text(dcpl, d);
	H5Pclose(dcpl);
}

/* Type, shape, layout and bytes of one dataset; what cannot be read is
 * left as "?" (a listing never fails on one odd dataset). */
static void dset_read(hid_t loc, const char *name, struct dset *d)
{
	hid_t id = H5Dopen2(loc, name, H5P_DEFAULT), space, type;

	snprintf(d->name, sizeof(d->name), "/%s", name);
	snprintf(d->type, sizeof(d->type), "?");
	d->cls = H5T_NO_CLASS;
	d->rank = -1;
	if (id < 0)
		goto out;
	if ((type = H5Dget_type(id)) >= 0) {
		type_text(type, d);
		H5Tclose(type);
	}
	if ((space = H5Dget_space(id)) >= 0) {
		d->rank = H5Sget_simple_extent_ndims(space);
		if (d->rank >= 0 && d->rank <= INSPECT_RANK_MAX)
			H5Sget_simple_extent_dims(space, d->dims, NULL);
		H5Sclose(space);
	}
	layout_read(id, d);
	d->stored_bytes = H5Dget_storage_size(id);
	H5Dclose(id);
out:
	H5Eclear2(H5E_DEFAULT);
}

static herr_t dset_visit(hid_t obj, const char *name,
			 const inspect_oinfo *oinfo, void *data)
{
	struct insp *in = data;

	if (oinfo->type != H5O_TYPE_DATASET)
		return 0;
	if (in->ndset_all++ >= INSPECT_DSETS_MAX)
		return 0;
	memset(&in->dset[in->ndset], 0, sizeof(in->dset[0]));
	dset_read(obj, name, &in->dset[in->ndset]);
	in->ndset++;
	return 0;
}

static int dsets_read(struct insp *in, xj_status *st)
{
	in->dset = calloc(INSPECT_DSETS_MAX, sizeof(*in->dset));
	if (!in->dset)
		return xj_fail(st, XJ_EXIT_RESOURCE, "%s: out of memory for "
			       "its datasets", in->path);
	if (H5_TRY(inspect_visit(in->file, dset_visit, in), st,
		   XJ_EXIT_INPUT, "%s: cannot list the datasets", in->path))
		return st->code;
	return XJ_OK;
}

static const struct dset *dset_find(const struct insp *in, const char *name)
{
	for (int i = 0; i < in->ndset; i++)
		if (strcmp(in->dset[i].name, name) == 0)
			return &in->dset[i];
	return NULL;
}

static void layout_text(const struct dset *d, char *buf, size_t size)
{
	char chunk[128];
	int len = snprintf(buf, size, "%s", d->layout);

	if (d->chunked) {
		shape_text(chunk, sizeof(chunk), d->rank, d->chunk);
		len += snprintf(buf + len, size - (size_t)len, " %s", chunk);
	}
	if (d->filters[0] && len > 0 && (size_t)len < size)
		snprintf(buf + len, size - (size_t)len, ", %s", d->filters);
}

static int text_dsets(struct insp *in, xj_status *st)
{
	struct table t;
	char shape[160], layout[256], bytes[32];

	fprintf(in->out, "\n# datasets\n");
	table_init(&t, 5, "dataset", "type", "shape", "layout",
		   "stored bytes");
	for (int i = 0; i < in->ndset; i++) {
		const struct dset *d = &in->dset[i];

		if (d->rank < 0)
			snprintf(shape, sizeof(shape), "?");
		else
			shape_text(shape, sizeof(shape), d->rank, d->dims);
		layout_text(d, layout, sizeof(layout));
		snprintf(bytes, sizeof(bytes), "%" PRIu64, d->stored_bytes);
		table_put(&t, d->name, d->type, shape, layout, bytes);
	}
	if (table_done(in, &t, st))
		return st->code;
	if (in->ndset_all > in->ndset)
		fprintf(in->out, "# ... and %" PRId64 " more datasets\n",
			in->ndset_all - in->ndset);
	if (in->ndset_all == 0)
		fprintf(in->out, "# (none)\n");
	return XJ_OK;
}

static void json_dsets(struct insp *in)
{
	FILE *f = in->out;

	fputs("  \"datasets\": [", f);
	for (int i = 0; i < in->ndset; i++) {
		const struct dset *d = &in->dset[i];

		fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", f);
		json_str(f, d->name);
		fputs(", \"type\": ", f);
		json_str(f, d->type);
		fputs(", \"shape\": ", f);
		json_dims(f, d->rank, d->dims);
		fputs(", \"layout\": ", f);
		json_str(f, d->layout);
		fputs(", \"chunks\": ", f);
		if (d->chunked)
			json_dims(f, d->rank, d->chunk);
		else
			fputs("null", f);
		fputs(", \"filters\": ", f);
		json_str(f, d->filters);
		fprintf(f, ", \"stored_bytes\": %" PRIu64 "}", d->stored_bytes);
	}
	fprintf(f, "%s],\n  \"datasets_total\": %" PRId64 ",\n",
		in->ndset ? "\n  " : "", in->ndset_all);
}

static int emit_dsets(struct insp *in, xj_status *st)
{
	if (in->o->json) {
		json_dsets(in);
		return XJ_OK;
	}
	return text_dsets(in, st);
}

/* ---- opening ---------------------------------------------------------- */

static int file_open(struct insp *in, xj_status *st)
{
	struct stat sb;
	htri_t is_h5;
	hid_t fapl;
	int rc;

	if (stat(in->path, &sb) != 0)
		return xj_fail(st, XJ_EXIT_INPUT, "%s: %s", in->path,
			       strerror(errno));
	if (!S_ISREG(sb.st_mode))
		return xj_fail(st, XJ_EXIT_INPUT, "%s: not a regular file",
			       in->path);
	if (access(in->path, R_OK) != 0)
		return xj_fail(st, XJ_EXIT_INPUT, "%s: cannot read: %s",
			       in->path, strerror(errno));
	is_h5 = H5Fis_hdf5(in->path);
	if (is_h5 == 0)
		return xj_fail(st, XJ_EXIT_INPUT, "%s: not an HDF5 file (no "
			       "HDF5 signature)", in->path);
	if (H5_TRY(is_h5, st, XJ_EXIT_INPUT, "%s: cannot check", in->path) ||
	    H5_TRY(fapl = H5Pcreate(H5P_FILE_ACCESS), st, XJ_EXIT_INTERNAL,
		   "%s: file access list", in->path))
		return st->code;
	rc = H5_TRY(H5Pset_fapl_sec2(fapl), st, XJ_EXIT_INTERNAL,
		    "%s: sec2 driver", in->path) ||
#if H5_VERSION_GE(1, 10, 7)
	     /* parallel file systems mounted without flock() are common */
	     H5_TRY(H5Pset_file_locking(fapl, 1, 1), st, XJ_EXIT_INTERNAL,
		    "%s: file locking", in->path) ||
#endif
	     H5_TRY(in->file = H5Fopen(in->path, H5F_ACC_RDONLY, fapl), st,
		    XJ_EXIT_INPUT, "%s: cannot open (truncated or corrupt?)",
		    in->path);
	H5Pclose(fapl);
	return rc ? st->code : XJ_OK;
}

/* ---- an unfinished run ------------------------------------------------ */

/* "OUT.h5.partial" or "OUT.h5.progress" into "OUT.h5"; 0 when path
 * names neither. */
static int unfinished_base(const char *path, char *base, size_t size)
{
	static const char *const suffixes[] = { ".partial", ".progress" };
	size_t len = strlen(path);

	for (size_t i = 0; i < 2; i++) {
		size_t sl = strlen(suffixes[i]);

		if (len > sl && len - sl < size &&
		    strcmp(path + len - sl, suffixes[i]) == 0) {
			memcpy(base, path, len - sl);
			base[len - sl] = '\0';
			return 1;
		}
	}
	return 0;
}

/* Is there an OUT.partial or OUT.progress? */
static int unfinished_exists(const char *output)
{
	char partial[XJ_PATH_MAX + 16], progress[XJ_PATH_MAX + 16];

	h5out_partial_path(output, partial, sizeof(partial));
	resume_path(output, progress, sizeof(progress));
	return access(partial, F_OK) == 0 || access(progress, F_OK) == 0;
}

struct unfinished {
	const char *output;
	char partial[XJ_PATH_MAX + 16];
	char progress[XJ_PATH_MAX + 16];
	int64_t partial_bytes;   /* -1: absent */
	int have_record;
	int output_exists;
	resume_record rec;
	char resume_cmd[4 * XJ_PATH_MAX];
};

static void input_spec(char *buf, size_t size, const resume_input *in)
{
	snprintf(buf, size, "%s:%s", in->file, in->dset);
}

/* The command that continues the recorded job. */
static void resume_command(struct unfinished *u)
{
	const resume_record *r = &u->rec;
	char *b = u->resume_cmd, spec[XJ_PATH_MAX + XJ_NAME_MAX + 2], num[40];
	size_t size = sizeof(u->resume_cmd);

	snprintf(b, size, "xjoin %s", r->command);
	input_spec(spec, sizeof(spec), &r->q);
	shell_word(b, size, "-q");
	shell_word(b, size, spec);
	input_spec(spec, sizeof(spec), &r->b);
	shell_word(b, size, "-b");
	shell_word(b, size, spec);
	if (strcmp(r->command, "topk") == 0) {
		snprintf(num, sizeof(num), "%" PRId64, r->k);
		shell_word(b, size, "-k");
		shell_word(b, size, num);
	}
	shell_word(b, size, "-m");
	shell_word(b, size, r->metric);
	if (r->has_threshold) {
		fmt_f64(num, sizeof(num), r->threshold);
		shell_word(b, size, "-t");
		shell_word(b, size, num);
	}
	if (r->self)
		shell_word(b, size, "--self");
	shell_word(b, size, "-o");
	shell_word(b, size, u->output);
	shell_word(b, size, "--resume");
}

static void spans_text(char *buf, size_t size, const xj_spans *sp)
{
	size_t len = 0;

	buf[0] = '\0';
	for (int64_t i = 0; i < sp->n && i < INSPECT_SPANS_SHOWN &&
	     len < size; i++)
		len += (size_t)snprintf(buf + len, size - len,
					"%s[%" PRId64 ", %" PRId64 ")",
					i ? " " : "", sp->s[i][0],
					sp->s[i][1]);
	if (sp->n > INSPECT_SPANS_SHOWN && len < size)
		snprintf(buf + len, size - len, " ... (%" PRId64 " spans)",
			 sp->n);
	if (sp->n == 0)
		snprintf(buf, size, "none");
}

static void table_record(struct table *t, const resume_record *r)
{
	char text[INSPECT_ROW_MAX];
	int64_t done = spans_rows(&r->done);
	xj_metric m;

	table_kv(t, "command", "%s", r->command);
	if (metric_parse(r->metric, &m) == 0)
		table_kv(t, "metric", "%s (%s is better)", r->metric,
			 metric_larger_is_better(m) ? "larger" : "smaller");
	else
		table_kv(t, "metric", "%s", r->metric);
	if (strcmp(r->command, "topk") == 0) {
		table_kv(t, "k", "%" PRId64, r->k);
		fmt_f64(text, sizeof(text), r->threshold);
		table_kv(t, "threshold", "%s", r->has_threshold ? text : "none");
		table_kv(t, "self excluded", "%s", r->self ? "yes" : "no");
	}
	table_kv(t, "query", "%s:%s, %" PRId64 " x %" PRId64 " %s",
		 r->q.file, r->q.dset, r->q.rows, r->q.cols, r->q.type);
	table_kv(t, "base", "%s:%s, %" PRId64 " x %" PRId64 " %s",
		 r->b.file, r->b.dset, r->b.rows, r->b.cols, r->b.type);
	table_kv(t, "rows done", "%" PRId64 " of %" PRId64 " (%.1f%%)", done,
		 r->q.rows, r->q.rows ? 100.0 * (double)done /
		 (double)r->q.rows : 0.0);
	spans_text(text, sizeof(text), &r->done);
	table_kv(t, "done spans", "%s", text);
	table_kv(t, "runs so far", "%" PRId64, r->runs);
}

static int text_unfinished(struct insp *in, struct unfinished *u,
			   xj_status *st)
{
	FILE *f = in->out;
	struct table t;

	fprintf(f, "# %s: an unfinished xjoin run (interrupted, or still "
		"running): no result yet\n", u->output);
	table_init(&t, 2, "item", "value", NULL, NULL, NULL);
	table_kv(&t, "output", "%s (%s)", u->output, u->output_exists ?
		 "exists: a finished result is there too" : "absent");
	if (u->partial_bytes >= 0)
		table_kv(&t, "partial output", "%s, %" PRId64 " bytes",
			 u->partial, u->partial_bytes);
	else
		table_kv(&t, "partial output", "none (%s is missing)",
			 u->partial);
	table_kv(&t, "progress record", "%s", u->have_record ? u->progress :
		 "none");
	if (u->have_record)
		table_record(&t, &u->rec);
	if (table_done(in, &t, st))
		return st->code;
	if (u->have_record && u->partial_bytes >= 0)
		fprintf(f, "# continue it (ranks, chunk sizes, memory and "
			"device may differ):\n#   %s\n# or start over with "
			"--force\n", u->resume_cmd);
	else if (u->have_record)
		fprintf(f, "# the partial output is gone, so this run cannot "
			"be resumed: start over with --force\n");
	else
		fprintf(f, "# no progress record: no rows of %s are recorded "
			"as final (a run may still be writing it, or stopped "
			"before its first checkpoint); running the command "
			"again starts fresh\n", u->partial);
	return XJ_OK;
}

static void json_input(FILE *f, const char *key, const resume_input *in)
{
	fprintf(f, "    \"%s\": {\"file\": ", key);
	json_str(f, in->file);
	fputs(", \"dataset\": ", f);
	json_str(f, in->dset);
	fputs(", \"type\": ", f);
	json_str(f, in->type);
	fprintf(f, ", \"shape\": [%" PRId64 ", %" PRId64 "], "
		"\"fingerprint\": \"0x%016" PRIx64 "\"},\n", in->rows,
		in->cols, in->fingerprint);
}

static void json_record(FILE *f, const struct unfinished *u)
{
	const resume_record *r = &u->rec;

	fputs("  \"progress\": {\n    \"path\": ", f);
	json_str(f, u->progress);
	fputs(",\n    \"command\": ", f);
	json_str(f, r->command);
	fputs(", \"metric\": ", f);
	json_str(f, r->metric);
	fprintf(f, ", \"k\": %" PRId64 ", \"threshold\": ", r->k);
	if (r->has_threshold)
		json_f64(f, r->threshold);
	else
		fputs("null", f);
	fprintf(f, ", \"self_excluded\": %s,\n", r->self ? "true" : "false");
	json_input(f, "query", &r->q);
	json_input(f, "base", &r->b);
	fprintf(f, "    \"rows_done\": %" PRId64 ", \"rows\": %" PRId64
		", \"runs\": %" PRId64 ",\n    \"done\": [",
		spans_rows(&r->done), r->q.rows, r->runs);
	for (int64_t i = 0; i < r->done.n; i++)
		fprintf(f, "%s[%" PRId64 ", %" PRId64 "]", i ? ", " : "",
			r->done.s[i][0], r->done.s[i][1]);
	fputs("]\n  },\n", f);
}

static void json_unfinished(struct insp *in, const struct unfinished *u)
{
	FILE *f = in->out;
	int resumable = u->have_record && u->partial_bytes >= 0;

	fputs("{\n  \"file\": ", f);
	json_str(f, u->output);
	fprintf(f, ",\n  \"kind\": \"unfinished\",\n  \"output_exists\": "
		"%s,\n  \"partial\": ", u->output_exists ? "true" : "false");
	if (u->partial_bytes >= 0) {
		fputs("{\"path\": ", f);
		json_str(f, u->partial);
		fprintf(f, ", \"bytes\": %" PRId64 "}", u->partial_bytes);
	} else {
		fputs("null", f);
	}
	fputs(",\n", f);
	if (u->have_record)
		json_record(f, u);
	else
		fputs("  \"progress\": null,\n", f);
	fprintf(f, "  \"resumable\": %s,\n  \"resume_command\": ",
		resumable ? "true" : "false");
	if (resumable)
		json_str(f, u->resume_cmd);
	else
		fputs("null", f);
	fputs("\n}\n", f);
}

static int inspect_unfinished(struct insp *in, const char *output,
			      xj_status *st)
{
	struct unfinished *u = calloc(1, sizeof(*u));
	struct stat sb;

	if (!u)
		return xj_fail(st, XJ_EXIT_RESOURCE, "%s: out of memory",
			       output);
	u->output = output;
	u->partial_bytes = -1;
	h5out_partial_path(output, u->partial, sizeof(u->partial));
	resume_path(output, u->progress, sizeof(u->progress));
	if (stat(u->partial, &sb) == 0)
		u->partial_bytes = (int64_t)sb.st_size;
	u->output_exists = access(output, F_OK) == 0;
	u->have_record = access(u->progress, F_OK) == 0;
	if (u->have_record && resume_load(u->progress, &u->rec, st)) {
		/* gone since access(): unreadable all the same */
		st->code = XJ_EXIT_INPUT;
		xj_wrap(st, "%s: unfinished run", output);
		goto out;
	}
	if (u->have_record)
		resume_command(u);
	if (in->o->json)
		json_unfinished(in, u);
	else
		text_unfinished(in, u, st);
out:
	spans_free(&u->rec.done);
	free(u);
	return st->code;
}

/* ---- results: what they should be ------------------------------------- */

__attribute__((format(printf, 2, 3)))
static void problem(struct insp *in, const char *fmt, ...)
{
	va_list ap;

	if (in->nproblems++ == 0) {
		va_start(ap, fmt);
		vsnprintf(in->problem, sizeof(in->problem), fmt, ap);
		va_end(ap);
	}
}

/* "schema_version" and a command this xjoin writes. */
static int is_result(struct insp *in)
{
	struct attr *v = attr_find(in, "schema_version");
	struct attr *c = attr_find(in, "command");

	return v && v->kind == AK_INT && c && c->kind == AK_STR &&
	       (!strcmp(c->text, "topk") || !strcmp(c->text, "matrix"));
}

/* A dataset that was listed but does not open is a problem of the file,
 * reported with the rest of its description. */
static int open_result_dset(struct insp *in, const char *name, hid_t *id)
{
	xj_status why;

	xj_ok(&why);
	if (H5_TRY(*id = H5Dopen2(in->file, name, H5P_DEFAULT), &why,
		   XJ_EXIT_INPUT, "cannot open %s", name)) {
		problem(in, "%s", why.msg);
		return -1;
	}
	return 0;
}

/* A 2-D dataset of class cls, or a problem named. */
static const struct dset *expect_dset(struct insp *in, const char *name,
				      H5T_class_t cls)
{
	const struct dset *d = dset_find(in, name);

	if (!d) {
		problem(in, "no dataset %s", name);
		return NULL;
	}
	if (d->rank != 2 || d->cls != cls) {
		problem(in, "%s is %s %d-D, expected a 2-D %s matrix", name,
			d->type, d->rank, h5check_class_name(cls));
		return NULL;
	}
	return d;
}

/* Shapes against each other and against the attributes. */
static void expect_shapes(struct insp *in, const struct dset *nbr,
			  const struct dset *dist)
{
	int64_t v;

	in->n = (int64_t)dist->dims[0];
	in->cols = (int64_t)dist->dims[1];
	if (nbr && (nbr->dims[0] != dist->dims[0] ||
		    nbr->dims[1] != dist->dims[1]))
		problem(in, "/neighbors is %llu x %llu but /distances %llu x "
			"%llu", (unsigned long long)nbr->dims[0],
			(unsigned long long)nbr->dims[1],
			(unsigned long long)dist->dims[0],
			(unsigned long long)dist->dims[1]);
	if (attr_i64(in, "query_rows", &v) && v != in->n)
		problem(in, "/distances has %" PRId64 " rows but the attribute "
			"query_rows says %" PRId64, in->n, v);
	if (in->topk && attr_i64(in, "k", &v) && v != in->cols)
		problem(in, "/distances has %" PRId64 " columns but the "
			"attribute k says %" PRId64, in->cols, v);
	if (!in->topk && in->m > 0 && in->m != in->cols)
		problem(in, "/distances has %" PRId64 " columns but the "
			"attribute base_rows says %" PRId64, in->cols, in->m);
}

/* The job the attributes describe, and the rules that follow from it. */
static void result_job(struct insp *in)
{
	const char *metric = attr_str(in, "metric");
	int64_t v;

	in->topk = strcmp(attr_str(in, "command"), "topk") == 0;
	if (!metric || metric_parse(metric, &in->metric) != 0) {
		problem(in, "attribute metric is %s%s%s, not one of l2, "
			"sqeuclidean, cosine, ip", metric ? "'" : "missing",
			metric ? metric : "", metric ? "'" : "");
		return;
	}
	in->metric_ok = 1;
	in->larger = metric_larger_is_better(in->metric);
	in->pad_value = in->larger ? -INFINITY : INFINITY;
	if (attr_i64(in, "base_rows", &v) && v > 0)
		in->m = v;
	if (attr_i64(in, "has_threshold", &v) && v)
		in->has_threshold = attr_f64(in, "threshold", &in->threshold);
	if (attr_i64(in, "self_excluded", &v))
		in->self = v != 0;
	in->applies = 1u << CK_NAN;
	if (in->topk)
		in->applies |= 1u << CK_ORDER | 1u << CK_GAP |
			       1u << CK_PADVAL | 1u << CK_INDEX |
			       (in->self ? 1u << CK_SELF : 0) |
			       (in->has_threshold ? 1u << CK_THRESHOLD : 0);
	else if (in->metric == XJ_METRIC_L2 ||
		 in->metric == XJ_METRIC_SQEUCLIDEAN)
		in->applies |= 1u << CK_NEGATIVE;
}

static void result_open(struct insp *in)
{
	const struct dset *nbr = NULL, *dist;

	for (int i = 0; i < CK_COUNT; i++)
		in->ck[i].first_row = -1;
	result_job(in);
	if (in->nproblems)
		return;
	if (in->topk && !(nbr = expect_dset(in, "/neighbors", H5T_INTEGER)))
		return;
	if (!(dist = expect_dset(in, "/distances", H5T_FLOAT)))
		return;
	expect_shapes(in, nbr, dist);
	if (in->nproblems ||
	    (in->topk && open_result_dset(in, "/neighbors", &in->nbr_id)) ||
	    open_result_dset(in, "/distances", &in->dist_id))
		return;
	in->readable = 1;
}

/* ---- results: reading slabs ------------------------------------------- */

static int read_tile(struct insp *in, hid_t id, hid_t mtype, int64_t r0,
		     int64_t nr, int64_t c0, int64_t nc, void *buf,
		     xj_status *st)
{
	hsize_t start[2] = { (hsize_t)r0, (hsize_t)c0 };
	hsize_t count[2] = { (hsize_t)nr, (hsize_t)nc };
	hid_t fspace = H5I_INVALID_HID, mspace = H5I_INVALID_HID;
	const char *name = id == in->nbr_id ? "/neighbors" : "/distances";

	if (H5_TRY(fspace = H5Dget_space(id), st, XJ_EXIT_INPUT,
		   "%s:%s: dataspace", in->path, name) ||
	    H5_TRY(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL,
				       count, NULL), st, XJ_EXIT_INTERNAL,
		   "%s:%s: select", in->path, name) ||
	    H5_TRY(mspace = H5Screate_simple(2, count, NULL), st,
		   XJ_EXIT_RESOURCE, "%s:%s: memory dataspace", in->path,
		   name) ||
	    H5_TRY(H5Dread(id, mtype, mspace, fspace, H5P_DEFAULT, buf), st,
		   XJ_EXIT_INPUT, "%s:%s: cannot read rows [%lld, %lld) "
		   "(truncated or corrupt file?)", in->path, name,
		   (long long)r0, (long long)(r0 + nr)))
		goto out;
out:
	if (mspace >= 0)
		H5Sclose(mspace);
	if (fspace >= 0)
		H5Sclose(fspace);
	return st->code;
}

/* Reads the tile of both datasets (idx only for topk). */
static int read_both(struct insp *in, int64_t r0, int64_t nr, int64_t c0,
		     int64_t nc, int64_t *idx, float *val, xj_status *st)
{
	if (in->topk && read_tile(in, in->nbr_id, H5T_NATIVE_INT64, r0, nr,
				  c0, nc, idx, st))
		return st->code;
	return read_tile(in, in->dist_id, H5T_NATIVE_FLOAT, r0, nr, c0, nc,
			 val, st);
}

/* ---- results: the first rows ------------------------------------------ */

static void text_row(struct insp *in, int64_t row, const int64_t *idx,
		     const float *val, int64_t nc)
{
	char v[32];

	fprintf(in->out, "row %" PRId64 ":", row);
	for (int64_t j = 0; j < nc; j++) {
		snprintf(v, sizeof(v), "%.6g", (double)val[j]);
		if (in->topk)
			fprintf(in->out, " (%" PRId64 ", %s)", idx[j], v);
		else
			fprintf(in->out, " %s", v);
	}
	if (in->cols > nc)
		fprintf(in->out, " ... +%" PRId64 " more", in->cols - nc);
	fputc('\n', in->out);
}

static void json_row(struct insp *in, int64_t row, const int64_t *idx,
		     const float *val, int64_t nc, int first)
{
	FILE *f = in->out;

	fprintf(f, "%s{\"row\": %" PRId64, first ? "\n    " : ",\n    ", row);
	if (in->topk) {
		fputs(", \"neighbors\": [", f);
		for (int64_t j = 0; j < nc; j++)
			fprintf(f, "%s%" PRId64, j ? ", " : "", idx[j]);
		fputc(']', f);
	}
	fputs(", \"distances\": [", f);
	for (int64_t j = 0; j < nc; j++) {
		fputs(j ? ", " : "", f);
		json_f32(f, val[j]);
	}
	fputs("]}", f);
}

static void rows_head(struct insp *in, int64_t show, int64_t nc)
{
	const char *what = in->larger ? "inner product" : "distance";

	if (in->o->json) {
		fprintf(in->out, "  \"columns_shown\": %" PRId64 ",\n"
			"  \"rows_shown\": [", nc);
		return;
	}
	fprintf(in->out, "\n# first %" PRId64 " of %" PRId64 " query rows",
		show, in->n);
	if (in->topk)
		fprintf(in->out, ": (base row, %s), best first", what);
	else
		fprintf(in->out, ": %s to base rows 0..%" PRId64, what,
			nc ? nc - 1 : 0);
	if (in->cols > nc)
		fprintf(in->out, " (the first %" PRId64 " of %" PRId64 ")",
			nc, in->cols);
	fputc('\n', in->out);
}

static int emit_rows(struct insp *in, xj_status *st)
{
	int64_t show = min64(in->o->rows, in->n), slab = INSPECT_SHOW_SLAB_ROWS;
	int64_t nc = min64(in->cols, in->topk ? INSPECT_PAIRS_SHOWN :
			   INSPECT_VALUES_SHOWN);
	int64_t *idx = calloc((size_t)(slab * nc + 1), sizeof(*idx));
	float *val = calloc((size_t)(slab * nc + 1), sizeof(*val));

	rows_head(in, show, nc);
	if (!idx || !val)
		xj_fail(st, XJ_EXIT_RESOURCE, "%s: out of memory", in->path);
	for (int64_t r0 = 0; !st->code && nc && r0 < show; r0 += slab) {
		int64_t nr = min64(slab, show - r0);

		if (read_both(in, r0, nr, 0, nc, idx, val, st))
			break;
		for (int64_t i = 0; i < nr; i++) {
			if (in->o->json)
				json_row(in, r0 + i, idx + i * nc,
					 val + i * nc, nc, r0 + i == 0);
			else
				text_row(in, r0 + i, idx + i * nc,
					 val + i * nc, nc);
		}
	}
	if (in->o->json)
		fputs(show && nc ? "\n  ],\n" : "],\n", in->out);
	free(idx);
	free(val);
	return st->code;
}

/* ---- results: the check of every row ---------------------------------- */

/* The phrase after "row R " for each check. */
static void check_phrase(const struct insp *in, int ck, char *buf,
			 size_t size)
{
	switch (ck) {
	case CK_ORDER:
		snprintf(buf, size, "is not sorted best first (%s for %s)",
			 in->larger ? "descending" : "ascending",
			 metric_name(in->metric));
		break;
	case CK_GAP:
		snprintf(buf, size, "has a neighbour after its -1 padding");
		break;
	case CK_PADVAL:
		snprintf(buf, size, "has -1 padding not valued %s",
			 in->larger ? "-inf" : "+inf");
		break;
	case CK_INDEX:
		snprintf(buf, size, "has a base index out of range");
		break;
	case CK_SELF:
		snprintf(buf, size, "lists itself (self exclusion is on)");
		break;
	case CK_THRESHOLD:
		snprintf(buf, size, "has a value past the threshold");
		break;
	case CK_NAN:
		snprintf(buf, size, "has a NaN value");
		break;
	default:
		snprintf(buf, size, "has a negative distance");
		break;
	}
}

__attribute__((format(printf, 5, 6)))
static void row_fail(struct insp *in, struct rowstate *s, int ck, int64_t row,
		     const char *fmt, ...)
{
	struct check *c = &in->ck[ck];
	char phrase[96], detail[256];
	va_list ap;

	if (s->failed & (1u << ck))
		return;
	s->failed |= 1u << ck;
	if (c->rows++ > 0)
		return;
	c->first_row = row;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	check_phrase(in, ck, phrase, sizeof(phrase));
	snprintf(c->first, sizeof(c->first), "row %" PRId64 " %s: %s", row,
		 phrase, detail);
}

static void check_pair(struct insp *in, struct rowstate *s, int64_t row,
		       int64_t col, int64_t idx, float v)
{
	if (idx == -1) {
		if (s->pad_col < 0)
			s->pad_col = col;
		s->pads++;
		if (v != in->pad_value)
			row_fail(in, s, CK_PADVAL, row, "column %" PRId64
				 " has %.9g", col, (double)v);
		return;
	}
	if (s->pad_col >= 0)
		row_fail(in, s, CK_GAP, row, "base row %" PRId64 " in column %"
			 PRId64 ", padding from column %" PRId64, idx, col,
			 s->pad_col);
	if (idx < 0 || (in->m > 0 && idx >= in->m))
		row_fail(in, s, CK_INDEX, row, "column %" PRId64 " holds %"
			 PRId64 ", base rows are [0, %" PRId64 ")", col, idx,
			 in->m);
	if (in->self && idx == row)
		row_fail(in, s, CK_SELF, row, "column %" PRId64, col);
	if (isnan(v)) {
		row_fail(in, s, CK_NAN, row, "column %" PRId64 " (base row %"
			 PRId64 ")", col, idx);
		return;
	}
	if (in->has_threshold && (in->larger ? (double)v < in->threshold :
				  (double)v > in->threshold))
		row_fail(in, s, CK_THRESHOLD, row, "column %" PRId64 " has "
			 "%.9g, the threshold is %.17g", col, (double)v,
			 in->threshold);
	if (s->last_col >= 0 && (in->larger ? v > s->last : v < s->last))
		row_fail(in, s, CK_ORDER, row, "column %" PRId64 " (%.9g) "
			 "after column %" PRId64 " (%.9g)", col, (double)v,
			 s->last_col, (double)s->last);
	s->last = v;
	s->last_col = col;
}

static void check_value(struct insp *in, struct rowstate *s, int64_t row,
			int64_t col, float v)
{
	if (isnan(v)) {
		row_fail(in, s, CK_NAN, row, "column %" PRId64, col);
		return;
	}
	if (v < 0 && (in->applies & (1u << CK_NEGATIVE)))
		row_fail(in, s, CK_NEGATIVE, row, "column %" PRId64 " has "
			 "%.9g", col, (double)v);
	if (isinf(v)) {
		in->ninf++;
		return;
	}
	in->vmin = v < in->vmin ? v : in->vmin;
	in->vmax = v > in->vmax ? v : in->vmax;
}

static void check_tile(struct insp *in, struct rowstate *state, int64_t r0,
		       int64_t nr, int64_t c0, int64_t nc, const int64_t *idx,
		       const float *val)
{
	for (int64_t i = 0; i < nr; i++) {
		for (int64_t j = 0; j < nc; j++) {
			if (in->topk)
				check_pair(in, &state[i], r0 + i, c0 + j,
					   idx[i * nc + j], val[i * nc + j]);
			else
				check_value(in, &state[i], r0 + i, c0 + j,
					    val[i * nc + j]);
		}
	}
}

/* Tile of at most slab_bytes: whole rows when one fits, else a piece of
 * one row. */
static void tile_shape(struct insp *in)
{
	int64_t budget = in->o->slab_bytes > 0 ? in->o->slab_bytes :
			 INSPECT_SLAB_BYTES;
	int64_t per = in->topk ? 12 : 4, w, r;

	if (in->cols == 0) {   /* nothing to read: rows only counted */
		in->tile_cols = 0;
		in->tile_rows = min64(in->n, 4096);
		return;
	}
	w = budget / per < 1 ? 1 : budget / per;
	w = min64(w, in->cols);
	r = w < in->cols ? 1 : budget / (w * per);
	in->tile_cols = w;
	in->tile_rows = min64(r < 1 ? 1 : r, in->n);
}

static void rows_start(struct rowstate *state, int64_t nr)
{
	for (int64_t i = 0; i < nr; i++) {
		memset(&state[i], 0, sizeof(state[i]));
		state[i].last_col = -1;
		state[i].pad_col = -1;
	}
}

static void rows_end(struct insp *in, const struct rowstate *state,
		     int64_t nr)
{
	for (int64_t i = 0; i < nr; i++) {
		in->pad_entries += state[i].pads;
		in->padded_rows += in->cols > 0 && state[i].pads == in->cols;
	}
	in->rows_checked += nr;
}

static int scan_rows(struct insp *in, int64_t r0, int64_t nr,
		     struct rowstate *state, int64_t *idx, float *val,
		     xj_status *st)
{
	rows_start(state, nr);
	for (int64_t c0 = 0; c0 < in->cols; c0 += in->tile_cols) {
		int64_t nc = min64(in->tile_cols, in->cols - c0);

		if (read_both(in, r0, nr, c0, nc, idx, val, st))
			return st->code;
		check_tile(in, state, r0, nr, c0, nc, idx, val);
	}
	rows_end(in, state, nr);
	return XJ_OK;
}

static int scan_result(struct insp *in, xj_status *st)
{
	size_t cells;
	struct rowstate *state;
	int64_t *idx;
	float *val;

	in->vmin = INFINITY;
	in->vmax = -INFINITY;
	tile_shape(in);
	cells = (size_t)(in->tile_rows * in->tile_cols) + 1;
	state = calloc((size_t)in->tile_rows + 1, sizeof(*state));
	idx = in->topk ? calloc(cells, sizeof(*idx)) : NULL;
	val = calloc(cells, sizeof(*val));
	if (!state || !val || (in->topk && !idx))
		xj_fail(st, XJ_EXIT_RESOURCE, "%s: out of memory for a "
			"%" PRId64 " x %" PRId64 " slab", in->path,
			in->tile_rows, in->tile_cols);
	for (int64_t r0 = 0; !st->code && r0 < in->n; r0 += in->tile_rows) {
		/* a long check stops on Ctrl-C (main watches signals) */
		if (comm_interrupted()) {
			xj_fail(st, XJ_EXIT_INTERRUPTED, "%s: stopped by "
				"signal %d after %" PRId64 " of %" PRId64
				" rows", in->path, comm_interrupted(), r0,
				in->n);
			break;
		}
		scan_rows(in, r0, min64(in->tile_rows, in->n - r0), state,
			  idx, val, st);
	}
	free(state);
	free(idx);
	free(val);
	return st->code;
}

/* ---- results: the verdict --------------------------------------------- */

/* The check whose first failing row is lowest, or -1. */
static int first_failed(const struct insp *in)
{
	int best = -1;

	for (int i = 0; i < CK_COUNT; i++)
		if (in->ck[i].rows && (best < 0 || in->ck[i].first_row <
					       in->ck[best].first_row))
			best = i;
	return best;
}

static int failed_checks(const struct insp *in)
{
	int n = 0;

	for (int i = 0; i < CK_COUNT; i++)
		n += in->ck[i].rows > 0;
	return n;
}

static void check_label(const struct insp *in, int ck, char *buf,
			size_t size)
{
	char t[40];

	switch (ck) {
	case CK_ORDER:
		snprintf(buf, size, "%s (%s)", checks[ck].label,
			 in->larger ? "descending" : "ascending");
		break;
	case CK_PADVAL:
		snprintf(buf, size, "%s %s", checks[ck].label,
			 in->larger ? "-inf" : "+inf");
		break;
	case CK_INDEX:
		snprintf(buf, size, "base indices in [0, %" PRId64 ")", in->m);
		break;
	case CK_THRESHOLD:
		fmt_f64(t, sizeof(t), in->threshold);
		snprintf(buf, size, "within the threshold (%s %s)",
			 in->larger ? ">=" : "<=", t);
		break;
	default:
		snprintf(buf, size, "%s", checks[ck].label);
		break;
	}
}

static void table_checks(struct insp *in, struct table *t)
{
	char label[96];

	for (int i = 0; i < CK_COUNT; i++) {
		if (!(in->applies & (1u << i)))
			continue;
		check_label(in, i, label, sizeof(label));
		if (!in->ck[i].rows)
			table_kv(t, label, "every row");
		else
			table_kv(t, label, "FAILED in %" PRId64 " row%s; %s",
				 in->ck[i].rows, in->ck[i].rows == 1 ? "" : "s",
				 in->ck[i].first);
	}
}

static int text_check(struct insp *in, xj_status *st)
{
	struct table t;
	char a[32], b[32];

	fprintf(in->out, "\n# check of every row (read in slabs of %" PRId64
		" rows x %" PRId64 " columns)\n", in->tile_rows,
		in->tile_cols);
	table_init(&t, 2, "check", "result", NULL, NULL, NULL);
	table_kv(&t, "rows checked", "%" PRId64 " of %" PRId64 " (x %" PRId64
		 " columns)", in->rows_checked, in->n, in->cols);
	if (in->topk) {
		table_kv(&t, "rows fully padded (-1)", "%" PRId64,
			 in->padded_rows);
		table_kv(&t, "padding entries (-1)", "%" PRId64 " of %" PRId64,
			 in->pad_entries, in->n * in->cols);
	} else {
		fmt_f32(a, sizeof(a), (float)in->vmin);
		fmt_f32(b, sizeof(b), (float)in->vmax);
		table_kv(&t, "finite values in", "[%s, %s]", a, b);
		table_kv(&t, "infinite values", "%" PRId64, in->ninf);
	}
	table_checks(in, &t);
	return table_done(in, &t, st);
}

static void json_checks(struct insp *in)
{
	FILE *f = in->out;
	int any = 0;

	fputs("    \"checks\": {", f);
	for (int i = 0; i < CK_COUNT; i++) {
		if (!(in->applies & (1u << i)))
			continue;
		fprintf(f, "%s\"%s\": {\"failed_rows\": %" PRId64
			", \"first\": ", any++ ? ",\n      " : "\n      ",
			checks[i].key, in->ck[i].rows);
		if (in->ck[i].rows)
			json_str(f, in->ck[i].first);
		else
			fputs("null", f);
		fputc('}', f);
	}
	fputs(any ? "\n    }\n" : "}\n", f);
}

static void json_check(struct insp *in)
{
	FILE *f = in->out;

	fprintf(f, "  \"check\": {\n    \"rows\": %" PRId64 ", \"columns\": %"
		PRId64 ", \"rows_checked\": %" PRId64 ",\n    \"order\": \"%s\""
		",\n", in->n, in->cols, in->rows_checked,
		!in->topk ? "none" : in->larger ? "descending" : "ascending");
	if (in->topk) {
		fprintf(f, "    \"rows_fully_padded\": %" PRId64 ", "
			"\"padding_entries\": %" PRId64 ",\n",
			in->padded_rows, in->pad_entries);
	} else {
		fputs("    \"min\": ", f);
		json_f32(f, (float)in->vmin);
		fputs(", \"max\": ", f);
		json_f32(f, (float)in->vmax);
		fprintf(f, ", \"infinite_values\": %" PRId64 ",\n", in->ninf);
	}
	json_checks(in);
	fputs("  },\n", f);
}

/* The first problem, by the lowest row, into st. */
static int verdict(struct insp *in, xj_status *st)
{
	int ck = first_failed(in), n = failed_checks(in);

	if (in->nproblems)
		return xj_fail(st, XJ_EXIT_INPUT, "%s: %s%s", in->path,
			       in->problem, in->nproblems > 1 ?
			       " (and more problems)" : "");
	if (ck < 0)
		return XJ_OK;
	return xj_fail(st, XJ_EXIT_INPUT, "%s: %s (%" PRId64 " %s this "
		       "check%s)", in->path, in->ck[ck].first, in->ck[ck].rows,
		       in->ck[ck].rows == 1 ? "row fails" : "rows fail",
		       n > 1 ? "; others fail too" : "");
}

static void text_verdict(struct insp *in, const xj_status *st)
{
	if (!st->code)
		fprintf(in->out, "# OK: %s keeps every rule of an xjoin %s "
			"result\n", in->path, in->topk ? "topk" : "matrix");
	else
		fprintf(in->out, "# FAILED: %s\n", st->msg);
}

static void json_verdict(struct insp *in, const xj_status *st)
{
	fprintf(in->out, "  \"ok\": %s,\n  \"problem\": ",
		st->code ? "false" : "true");
	if (st->code)
		json_str(in->out, st->msg);
	else
		fputs("null", in->out);
	fputs("\n}\n", in->out);
}

/* ---- results: the description ----------------------------------------- */

static void table_input(struct insp *in, struct table *t, const char *role)
{
	char name[64];
	const char *file, *dset, *type;
	int64_t rows = -1, d = -1;

	snprintf(name, sizeof(name), "%s_file", role);
	file = attr_str(in, name);
	snprintf(name, sizeof(name), "%s_dataset", role);
	dset = attr_str(in, name);
	snprintf(name, sizeof(name), "%s_type", role);
	type = attr_str(in, name);
	snprintf(name, sizeof(name), "%s_rows", role);
	attr_i64(in, name, &rows);
	attr_i64(in, "dimension", &d);
	if (!file)
		return;
	table_kv(t, role, "%s:%s, %" PRId64 " x %" PRId64 " %s", file,
		 dset ? dset : "?", rows, d, type ? type : "?");
}

/* One row per phase of the last run, in the order they run. */
static void table_seconds(struct insp *in, struct table *t)
{
	static const char *const phases[] = {
		"setup", "validate", "read", "compute", "merge", "write",
	};
	char name[64], label[64];
	double s, total = 0;
	int any = 0;

	for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
		snprintf(name, sizeof(name), "seconds_%s", phases[i]);
		if (!attr_f64(in, name, &s))
			continue;
		snprintf(label, sizeof(label), "seconds: %s", phases[i]);
		table_kv(t, label, "%.3f", s);
		total += s;
		any = 1;
	}
	if (any)
		table_kv(t, "seconds: sum", "%.3f", total);
}

static void table_job(struct insp *in, struct table *t)
{
	char text[64];
	int64_t v;
	double f;

	const char *metric = attr_str(in, "metric");

	table_kv(t, "command", "%s", attr_str(in, "command"));
	if (in->metric_ok)
		table_kv(t, "metric", "%s (%s is better)", metric,
			 in->larger ? "larger" : "smaller");
	else
		table_kv(t, "metric", "%s", metric ? metric : "(missing)");
	if (!in->topk)
		return;
	if (attr_i64(in, "k", &v))
		table_kv(t, "k", "%" PRId64, v);
	/* both are shown in the next row */
	attr_i64(in, "has_threshold", &v);
	attr_f64(in, "threshold", &f);
	if (in->has_threshold) {
		fmt_f64(text, sizeof(text), in->threshold);
		table_kv(t, "threshold", "%s (%s)", text, in->larger ?
			 "kept: value >= threshold" :
			 "kept: value <= threshold");
	} else {
		table_kv(t, "threshold", "none");
	}
	if (attr_i64(in, "self_excluded", &v))
		table_kv(t, "self excluded", "%s", v ? "yes" : "no");
}

static void table_run(struct insp *in, struct table *t)
{
	const char *s;
	int64_t v, w;

	if (attr_i64(in, "ranks", &v))
		table_kv(t, "ranks", "%" PRId64, v);
	if ((s = attr_str(in, "grid")))
		table_kv(t, "grid", "%s", s);
	if ((s = attr_str(in, "backends")))
		table_kv(t, "backend", "%s", s);
	if (attr_i64(in, "threads_per_rank", &v))
		table_kv(t, "threads per rank", "%" PRId64, v);
	if (attr_i64(in, "query_chunk_rows", &v) &&
	    attr_i64(in, "base_chunk_rows", &w))
		table_kv(t, "chunk rows", "query %" PRId64 ", base %" PRId64,
			 v, w);
	if (attr_i64(in, "runs", &v))
		table_kv(t, "runs", "%" PRId64 "%s", v, v > 1 ?
			 " (resumed after an interruption)" : "");
	if ((s = attr_str(in, "created")))
		table_kv(t, "created", "%s", s);
	table_seconds(in, t);
	if (attr_i64(in, "schema_version", &v))
		table_kv(t, "schema version", "%" PRId64 "%s", v,
			 v > XJOIN_SCHEMA_VERSION ? " (newer than this xjoin "
			 "reads: some checks may not apply)" : "");
	if ((s = attr_str(in, "xjoin_version")))
		table_kv(t, "xjoin version", "%s", s);
}

static int text_attrs(struct insp *in, xj_status *st)
{
	struct table t;

	fprintf(in->out, "\n# root attributes\n");
	table_init(&t, 2, "attribute", "value", NULL, NULL, NULL);
	attrs_unmark(in);
	table_job(in, &t);
	table_input(in, &t, "query");
	table_input(in, &t, "base");
	table_run(in, &t);
	table_raw_attrs(in, &t);
	return table_done(in, &t, st);
}

static void text_result_head(struct insp *in)
{
	const char *cmd = attr_str(in, "command");
	const char *ver = attr_str(in, "xjoin_version");
	int64_t schema = 0;

	attr_i64(in, "schema_version", &schema);
	fprintf(in->out, "# %s: a finished xjoin %s result (schema %" PRId64
		", written by xjoin %s)\n", in->path, cmd, schema,
		ver ? ver : "?");
}

static void json_result_head(struct insp *in)
{
	fputs("{\n  \"file\": ", in->out);
	json_str(in->out, in->path);
	fputs(",\n  \"kind\": \"result\",\n  \"command\": ", in->out);
	json_str(in->out, attr_str(in, "command"));
	fputs(",\n", in->out);
	json_attrs(in);
}

static int inspect_result(struct insp *in, xj_status *st)
{
	result_open(in);
	if (in->o->json) {
		json_result_head(in);
	} else {
		text_result_head(in);
		if (text_attrs(in, st))
			return st->code;
	}
	if (emit_dsets(in, st))
		return st->code;
	if (in->readable && !emit_rows(in, st) && !scan_result(in, st)) {
		if (in->o->json)
			json_check(in);
		else if (text_check(in, st))
			return st->code;
	}
	if (!st->code)
		verdict(in, st);
	if (in->o->json)
		json_verdict(in, st);
	else
		text_verdict(in, st);
	return st->code;
}

/* ---- other HDF5 files ------------------------------------------------- */

static void other_why(struct insp *in, char *buf, size_t size)
{
	const char *gen = attr_str(in, "generator");
	const char *cmd = attr_str(in, "command");
	int64_t seed;

	if (!attr_find(in, "schema_version"))
		snprintf(buf, size, "no schema_version attribute");
	else if (gen && attr_i64(in, "seed", &seed))
		snprintf(buf, size, "data written by xjoin gen (%s, seed %"
			 PRId64 ")", gen, seed);
	else if (cmd)
		snprintf(buf, size, "command '%s' is unknown to xjoin %s",
			 cmd, XJOIN_VERSION);
	else
		snprintf(buf, size, "no command attribute");
	attrs_unmark(in);
}

static int inspect_other(struct insp *in, xj_status *st)
{
	char why[INSPECT_TEXT_MAX + 64];
	struct table t;

	other_why(in, why, sizeof(why));
	if (in->o->json) {
		fputs("{\n  \"file\": ", in->out);
		json_str(in->out, in->path);
		fputs(",\n  \"kind\": \"not_result\",\n  \"why\": ", in->out);
		json_str(in->out, why);
		fputs(",\n", in->out);
		json_attrs(in);
		json_dsets(in);
		fputs("  \"ok\": true,\n  \"problem\": null\n}\n", in->out);
		return XJ_OK;
	}
	fprintf(in->out, "# %s: not an xjoin result: %s\n", in->path, why);
	if (in->nattr) {
		fprintf(in->out, "\n# root attributes\n");
		table_init(&t, 2, "attribute", "value", NULL, NULL, NULL);
		table_raw_attrs(in, &t);
		if (table_done(in, &t, st))
			return st->code;
	}
	if (text_dsets(in, st))
		return st->code;
	fprintf(in->out, "# xjoin reads any 2-D numeric dataset of it as "
		"input: -q %s:DATASET\n", in->path);
	return XJ_OK;
}

/* ---- entry points ----------------------------------------------------- */

static int inspect_hdf5(struct insp *in, xj_status *st)
{
	if (file_open(in, st) || attrs_read(in, st) || dsets_read(in, st))
		return st->code;
	if (is_result(in))
		return inspect_result(in, st);
	return inspect_other(in, st);
}

static void insp_release(struct insp *in)
{
	if (in->nbr_id >= 0)
		H5Dclose(in->nbr_id);
	if (in->dist_id >= 0)
		H5Dclose(in->dist_id);
	if (in->file >= 0)
		H5Fclose(in->file);
	free(in->attr);
	free(in->dset);
}

int inspect_file(const char *path, const inspect_opts *o, FILE *out,
		 xj_status *st)
{
	struct insp in = {
		.path = path, .o = o, .out = out, .file = H5I_INVALID_HID,
		.nbr_id = H5I_INVALID_HID, .dist_id = H5I_INVALID_HID,
	};
	char base[XJ_PATH_MAX];
	int rc;

	xj_ok(st);
	h5check_silence();
	if (unfinished_base(path, base, sizeof(base))) {
		if (unfinished_exists(base))
			return inspect_unfinished(&in, base, st);
		return xj_fail(st, XJ_EXIT_INPUT, "%s: no such file%s%s%s",
			       path, access(base, F_OK) == 0 ? " (" : "",
			       access(base, F_OK) == 0 ? base : "",
			       access(base, F_OK) == 0 ?
			       " is a finished result)" : "");
	}
	if (access(path, F_OK) != 0 && errno == ENOENT) {
		if (unfinished_exists(path))
			return inspect_unfinished(&in, path, st);
		return xj_fail(st, XJ_EXIT_INPUT, "%s: no such file (nor an "
			       "unfinished run's %s.partial or %s.progress)",
			       path, path, path);
	}
	rc = inspect_hdf5(&in, st);
	insp_release(&in);
	fflush(out);
	return rc;
}

int inspect_run(const xj_job *job, const xj_comm *c, xj_status *st)
{
	inspect_opts o = { .rows = job->inspect_rows, .json = job->json };

	xj_ok(st);
	if (c->rank == 0) {
		inspect_file(job->inspect_file, &o, stdout, st);
		fflush(stdout);
	}
	MPI_CHECK(MPI_Bcast(st, sizeof(*st), MPI_BYTE, 0, c->world));
	return st->code;
}
