/* h5in_mem.c: rows in memory as an input (see h5in.h). */
#include "h5in.h"
#include "h5in_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const type_names[] = {
	[H5IN_MEM_F32] = "float32", [H5IN_MEM_F64] = "float64",
	[H5IN_MEM_F16] = "float16", [H5IN_MEM_I8] = "int8",
	[H5IN_MEM_U8] = "uint8", [H5IN_MEM_I16] = "int16",
	[H5IN_MEM_U16] = "uint16", [H5IN_MEM_I32] = "int32",
	[H5IN_MEM_U32] = "uint32", [H5IN_MEM_I64] = "int64",
	[H5IN_MEM_U64] = "uint64",
};

static const size_t type_sizes[] = {
	[H5IN_MEM_F32] = 4, [H5IN_MEM_F64] = 8, [H5IN_MEM_F16] = 2,
	[H5IN_MEM_I8] = 1, [H5IN_MEM_U8] = 1, [H5IN_MEM_I16] = 2,
	[H5IN_MEM_U16] = 2, [H5IN_MEM_I32] = 4, [H5IN_MEM_U32] = 4,
	[H5IN_MEM_I64] = 8, [H5IN_MEM_U64] = 8,
};

int h5in_mem_info(h5in_info *info, const char *name, const void *data,
		  int type, int64_t rows, int64_t cols, int64_t rs,
		  int64_t cs, xj_status *st)
{
	xj_ok(st);
	memset(info, 0, sizeof(*info));
	if (type < H5IN_MEM_F32 || type > H5IN_MEM_U64)
		return xj_fail(st, XJ_EXIT_USAGE, "%s: element type %d is not "
			       "a number type xjoin reads", name, type);
	if (rows < 0 || cols < 1 || (rows > 0 && !data))
		return xj_fail(st, XJ_EXIT_USAGE, "%s: %lld x %lld is not a "
			       "matrix of rows", name, (long long)rows,
			       (long long)cols);
	/* messages read "array:queries: row 7 column 3 is NaN" */
	snprintf(info->file, sizeof(info->file), "array");
	snprintf(info->dset, sizeof(info->dset), "%s", name);
	info->rows = rows;
	info->cols = cols;
	snprintf(info->type_desc, sizeof(info->type_desc), "%s (memory)",
		 type_names[type]);
	info->mem = data;
	info->mem_type = type;
	info->mem_rs = rs;
	info->mem_cs = cs;
	return XJ_OK;
}

const float *h5in_mem_rows(const h5in_info *info)
{
	if (!info->mem || info->mem_type != H5IN_MEM_F32 ||
	    info->mem_cs != 1 || info->mem_rs != info->cols)
		return NULL;
	return info->mem;
}

/* IEEE binary16 to float, exactly (subnormals, Inf and NaN too). */
static float half_to_float(uint16_t h)
{
	int e = (h >> 10) & 31, f = h & 1023;
	float v = e == 0 ? ldexpf((float)f, -24) :
		  e == 31 ? (f ? NAN : INFINITY) :
		  ldexpf((float)(f | 1024), e - 25);

	return (h & 0x8000) ? -v : v;
}

/* Element i of row r as float (rounded to nearest for wider types, as
 * HDF5's conversion of the file path does). */
static float element(const h5in_info *info, int64_t r, int64_t c)
{
	const char *p = (const char *)info->mem +
			(r * info->mem_rs + c * info->mem_cs) *
			(int64_t)type_sizes[info->mem_type];

	switch (info->mem_type) {
	case H5IN_MEM_F32: { float v; memcpy(&v, p, 4); return v; }
	case H5IN_MEM_F64: { double v; memcpy(&v, p, 8); return (float)v; }
	case H5IN_MEM_F16: { uint16_t v; memcpy(&v, p, 2);
			     return half_to_float(v); }
	case H5IN_MEM_I8: return (float)*(const int8_t *)p;
	case H5IN_MEM_U8: return (float)*(const uint8_t *)p;
	case H5IN_MEM_I16: { int16_t v; memcpy(&v, p, 2); return (float)v; }
	case H5IN_MEM_U16: { uint16_t v; memcpy(&v, p, 2); return (float)v; }
	case H5IN_MEM_I32: { int32_t v; memcpy(&v, p, 4); return (float)v; }
	case H5IN_MEM_U32: { uint32_t v; memcpy(&v, p, 4); return (float)v; }
	case H5IN_MEM_I64: { int64_t v; memcpy(&v, p, 8); return (float)v; }
	case H5IN_MEM_U64: { uint64_t v; memcpy(&v, p, 8); return (float)v; }
	}
	return NAN;
}

void h5in_mem_read(const h5in_info *info, int64_t row0, int64_t rows,
		   float *out)
{
	const float *direct = h5in_mem_rows(info);
	int64_t cols = info->cols;

	if (direct) {
		/* the reader's own rows (a resident input) need no copy */
		if (out != direct + row0 * cols)
			memcpy(out, direct + row0 * cols,
			       (size_t)(rows * cols) * sizeof(float));
		return;
	}
	for (int64_t r = 0; r < rows; r++)
		for (int64_t c = 0; c < cols; c++)
			out[r * cols + c] = element(info, row0 + r, c);
}

#define MEM_INPUTS 4

static h5in_info registered[MEM_INPUTS];
static int nregistered;

int h5in_mem_register(const h5in_info *info, xj_status *st)
{
	int i;

	for (i = 0; i < nregistered; i++)
		if (!strcmp(registered[i].dset, info->dset))
			break;
	if (i == MEM_INPUTS)
		return xj_fail(st, XJ_EXIT_RESOURCE, "more than %d inputs in "
			       "memory", MEM_INPUTS);
	registered[i] = *info;
	if (i == nregistered)
		nregistered++;
	return XJ_OK;
}

void h5in_mem_clear(void)
{
	memset(registered, 0, sizeof(registered));
	nregistered = 0;
}

int h5in_mem_lookup(const char *spec, h5in_info *info)
{
	if (strncmp(spec, "array:", 6))
		return 0;
	for (int i = 0; i < nregistered; i++)
		if (!strcmp(registered[i].dset, spec + 6)) {
			*info = registered[i];
			return 1;
		}
	return 0;
}
