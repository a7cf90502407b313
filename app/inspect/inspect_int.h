/*
 * inspect_int.h: what the parts of `xjoin inspect` share (private to
 * the files of app/inspect/; the public API is inspect.h).
 *
 * defines: struct insp, struct attr, struct dset, struct check,
 *          enum check_id, struct table, inspect_min64, and the functions
 *          each part gives the others
 *
 * The parts:
 *   inspect.c             which kind of file a path names; the entry points
 *   inspect_read.c        opening, root attributes, datasets, slabs
 *   inspect_check.c       a result's shape and every row against its rules
 *   inspect_print.c       number formats, JSON, tables, the listings of
 *                         attributes and datasets
 *   inspect_result.c      a result: its job and run, the first rows, the
 *                         check and the verdict
 *   inspect_unfinished.c  an unfinished run: its progress record
 *   inspect_range.c       a range join's CSR output and its invariants
 * Everything hangs off one struct insp per inspected file.
 */
#ifndef XJ_INSPECT_INT_H
#define XJ_INSPECT_INT_H

#include <stdint.h>
#include <stdio.h>

#include <hdf5.h>

#include "inspect.h"

#define INSPECT_RANK_MAX 8
#define INSPECT_TEXT_MAX (XJ_PATH_MAX + 64)
#define INSPECT_ROW_MAX (XJ_PATH_MAX + XJ_NAME_MAX + 128)
#define TABLE_COLS 5

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

struct check {
	int64_t rows;            /* rows failing it */
	int64_t first_row;       /* -1: none */
	char first[384];         /* what is wrong there */
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

/* "| a | b |" rows under a header, widths from the widest cell. */
struct table {
	int ncols, nrows, cap, oom;
	const char *head[TABLE_COLS];
	char **cell;             /* nrows x ncols, owned */
};

static inline int64_t inspect_min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* inspect_read.c */
int inspect_file_open(struct insp *in, xj_status *st);
int inspect_attrs_read(struct insp *in, xj_status *st);
int inspect_dsets_read(struct insp *in, xj_status *st);
struct attr *inspect_attr_find(struct insp *in, const char *name);
void inspect_attrs_unmark(struct insp *in);
const char *inspect_attr_str(struct insp *in, const char *name);
int inspect_attr_i64(struct insp *in, const char *name, int64_t *v);
int inspect_attr_f64(struct insp *in, const char *name, double *v);
const struct dset *inspect_dset_find(const struct insp *in, const char *name);
int inspect_read_both(struct insp *in, int64_t r0, int64_t nr, int64_t c0,
		      int64_t nc, int64_t *idx, float *val, xj_status *st);

/* inspect_check.c */
int inspect_is_result(struct insp *in);
void inspect_result_open(struct insp *in);
int inspect_scan_result(struct insp *in, xj_status *st);
int inspect_verdict(struct insp *in, xj_status *st);

/* inspect_print.c */
void inspect_fmt_f64(char *buf, size_t size, double v);
void inspect_fmt_f32(char *buf, size_t size, float v);
void inspect_json_f64(FILE *f, double v);
void inspect_json_f32(FILE *f, float v);
void inspect_table_init(struct table *t, int ncols, const char *h0,
			const char *h1, const char *h2, const char *h3,
			const char *h4);
__attribute__((format(printf, 3, 4)))
void inspect_table_kv(struct table *t, const char *name, const char *fmt,
		      ...);
int inspect_table_done(struct insp *in, struct table *t, xj_status *st);
void inspect_json_attrs(struct insp *in);
void inspect_table_raw_attrs(struct insp *in, struct table *t);
int inspect_text_dsets(struct insp *in, xj_status *st);
void inspect_json_dsets(struct insp *in);
int inspect_emit_dsets(struct insp *in, xj_status *st);

/* inspect_result.c */
int inspect_result(struct insp *in, xj_status *st);

/* inspect_range.c */
int inspect_range(struct insp *in, xj_status *st);

/* inspect_unfinished.c */
int inspect_unfinished(struct insp *in, const char *output, xj_status *st);

#endif
