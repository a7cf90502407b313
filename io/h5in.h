/*
 * h5in.h: reading input matrices from HDF5, one row slab at a time.
 *
 * defines: h5in_info, h5in, h5in_source, h5in_parse_spec, h5in_probe,
 *          h5in_open, h5in_read, h5in_sources, h5in_close,
 *          h5in_mem_info, h5in_mem_rows, H5IN_MEM_*
 *
 * An input is FILE[:DATASET], or several files read as one (io/h5shards.h):
 * a glob(3) pattern ("shards/emb-*.h5:/vectors") or a list ("@list.txt",
 * one FILE[:DATASET] a line), their rows numbered across the shards in
 * order. A virtual dataset (VDS) is read through HDF5 like any dataset;
 * its source datasets are checked as a plain dataset is (present, stored,
 * of the shape the VDS maps). Every numeric HDF5 type (u8 .. i64, f32, f64)
 * is converted to float32 by HDF5 while reading. Each rank opens the file
 * itself (independent, read-only) and reads only the rows it needs, so no
 * rank ever holds a whole input it does not need.
 *
 * An input may also be rows already in memory (h5in_mem_info: the
 * in-process API's arrays), read through the same calls: any of the
 * numeric types below, any row and column strides, converted to float32
 * row by row; float32 rows laid out as the reader wants them need no
 * copy at all (h5in_mem_rows).
 *
 * Every failure names the file, the dataset and the reason; value errors
 * (NaN, Inf) name the first bad global row.
 */
#ifndef XJ_H5IN_H
#define XJ_H5IN_H

#include <stdint.h>

#include "../config/job.h"
#include "../config/status.h"

typedef struct h5in_info {
	char file[XJ_PATH_MAX];
	char dset[XJ_NAME_MAX];   /* resolved, with leading '/' */
	int64_t rows;
	int64_t cols;
	char type_desc[32];       /* "float32", "uint8", ... for the job table */
	/* several files as one (file is the pattern or "@list", dset what
	 * the pattern named, "" for a list): the count, the default dataset
	 * name, and a hash of the expanded list that every rank must see */
	int64_t shards;           /* 0: one dataset */
	char shard_default[16];
	uint64_t shards_hash;
	/* rows in memory (h5in_mem_info), NULL for a file: element (r, c)
	 * of type mem_type at mem + (r mem_rs + c mem_cs) elements; valid in
	 * the process that made it only */
	const void *mem;
	int mem_type;
	int64_t mem_rs, mem_cs;
} h5in_info;

/* Element types of rows in memory. */
enum {
	H5IN_MEM_F32 = 1, H5IN_MEM_F64, H5IN_MEM_F16, H5IN_MEM_I8,
	H5IN_MEM_U8, H5IN_MEM_I16, H5IN_MEM_U16, H5IN_MEM_I32, H5IN_MEM_U32,
	H5IN_MEM_I64, H5IN_MEM_U64
};

/* One source of an input: a shard of a pattern or list, or a source
 * dataset of a VDS. It holds the input's rows [row0, row0 + rows) and
 * columns [col0, col0 + cols). */
typedef struct h5in_source {
	char file[XJ_PATH_MAX];
	char dset[XJ_NAME_MAX];
	int64_t row0, rows;
	int64_t col0, cols;
} h5in_source;

typedef struct h5in h5in;   /* an open dataset */

/* Split "FILE[:DATASET]" into file and dataset ("" when absent). A spec
 * that names an existing file as a whole is a file (paths may hold ':');
 * otherwise the text after the last ':' is the dataset. */
int h5in_parse_spec(const char *spec, char *file, char *dset, xj_status *st);

/* Open file, resolve the dataset and check it. dset "" means: default_dset
 * ("test" for queries, "train" for base) if present, else the only 2-D
 * dataset in the file (error if none or several). Checks: file exists and
 * is HDF5, dataset exists, is 2-D, numeric, cols > 0 (rows may be 0: an
 * empty input, which the caller may refuse), and its
 * data (or every VDS source's, or every shard's) is stored. A pattern or
 * list is expanded here; its shards must share the width. */
int h5in_probe(const char *file, const char *dset, const char *default_dset,
	       h5in_info *info, xj_status *st);

/* Open a probed dataset for reading slabs. */
int h5in_open(const h5in_info *info, h5in **out, xj_status *st);

/* Read rows [row0, row0 + rows) as float32 into out (rows x cols). Fails
 * with XJ_EXIT_INPUT naming the first global row holding NaN or Inf, or
 * the HDF5 error (truncated/corrupt file). rows may be 0. */
int h5in_read(h5in *h, int64_t row0, int64_t rows, float *out, xj_status *st);

/* The sources of an open input, in row order (count 0 for a plain
 * dataset): what the job table and the output's attributes list. */
const h5in_source *h5in_sources(const h5in *h, int64_t *count);

void h5in_close(h5in *h);

/* info for rows x cols elements of type in memory at data, strides rs
 * and cs (elements; numpy's strides divided by the element size): file
 * "array", dataset name ("queries", "base"), as messages and the job
 * table show it. XJ_EXIT_USAGE for a type or shape it cannot read. */
int h5in_mem_info(h5in_info *info, const char *name, const void *data,
		  int type, int64_t rows, int64_t cols, int64_t rs,
		  int64_t cs, xj_status *st);

/* The rows themselves when they are float32, row after row (cs 1, rs
 * cols): a reader may use them in place. NULL otherwise. */
const float *h5in_mem_rows(const h5in_info *info);

/* Inputs in memory by name, for specs "array:NAME" (the in-process API
 * registers them before it runs a job, and clears them after): register
 * (replacing one of the same dataset name; XJ_EXIT_RESOURCE when the
 * table of 4 is full), clear all, and look up a spec (1 and *info when
 * it names a registered input, else 0). */
int h5in_mem_register(const h5in_info *info, xj_status *st);
void h5in_mem_clear(void);
int h5in_mem_lookup(const char *spec, h5in_info *info);

#endif
