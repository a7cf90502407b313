/*
 * fuzz_h5gen.c: structure-aware libFuzzer harness for xjoin's HDF5 input
 * validation. The input bytes are not a file but the recipe of one: they
 * choose, object by object, what the HDF5 API writes into a valid file,
 * which then goes through the validation path (fuzz_h5path.h). So every
 * input reaches xjoin's own code with a well-formed file of some unusual
 * shape, instead of dying in HDF5's parser as most mutated files do.
 *
 * A recipe picks the file format (earliest, or latest with its other
 * chunk indexes), then up to four objects:
 *   datasets  any class (integers of every size, sign and byte order,
 *             float32/64 either order, half and long double, custom
 *             precision, string, enum, compound, array, bitfield, opaque,
 *             vlen), scalar/null/1-D/2-D/3-D spaces of small or huge
 *             sizes (0 included), unlimited maximum shapes, contiguous,
 *             compact or chunked layout with odd chunk shapes, shuffle,
 *             deflate, fletcher32, nbit and scale-offset filters, fill
 *             values and times, allocation times, data written in full,
 *             in a band of rows, not at all, or then grown past, with NaN,
 *             Inf, huge and zero rows planted in the values;
 *   groups, soft links (dangling, looping), external links (missing, or
 *             back into the file) and hard links;
 * under names that include nesting, spaces, ':' and lengths at xjoin's
 * limit. The bytes of the input double as the data written.
 *
 * Since the harness knows what it wrote, it also checks the answers:
 *   - a 2-D numeric dataset with every value stored is accepted with its
 *     shape; one with chunks never written is refused (input error);
 *     a non-numeric, non-2-D or empty one is refused;
 *   - a dataset of float32 (either byte order) or 8/16-bit integers
 *     written in full reads back bit for bit, in slabs of any height,
 *     and fails exactly at its first NaN or Inf, naming that row.
 * Each dataset is also opened through the query/base defaults, through
 * the search for the only 2-D dataset, and through a spec whose dataset
 * part is taken from the input.
 */
#define _GNU_SOURCE
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "fuzz_h5path.h"
#include "fuzz_util.h"

#define GEN_OBJECTS_MAX 4
#define GEN_WRITE_VALUES_MAX ((hsize_t)1 << 16)
#define GEN_WRITE_BYTES_MAX ((hsize_t)1 << 19)
#define GEN_EARLY_BYTES_MAX ((hsize_t)1 << 20)

/* ---- the recipe: bytes read front to back, zeros once used up ---- */

struct gen_bytes {
	const uint8_t *all;
	size_t size, at;
};

static unsigned gen_u8(struct gen_bytes *b)
{
	return b->at < b->size ? b->all[b->at++] : 0;
}

static unsigned gen_pick(struct gen_bytes *b, unsigned n)
{
	return n ? gen_u8(b) % n : 0;
}

static unsigned gen_u16(struct gen_bytes *b)
{
	return gen_u8(b) | gen_u8(b) << 8;
}

/* n bytes of data: the input from the current position on, repeated
 * (a fixed pattern for an empty input). Does not consume the recipe. */
static void gen_data(const struct gen_bytes *b, unsigned char *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = b->size ? b->all[(b->at + i) % b->size] :
				   (unsigned char)(i * 37 + 11);
}

/* ---- types ---- */

enum gen_exact {
	EXACT_NONE,      /* values not predicted */
	EXACT_F32LE,
	EXACT_F32BE,
	EXACT_INT,       /* 8/16-bit integers: exact in float32 */
};

struct gen_type {
	const char *name;
	int numeric;         /* integer or float class: xjoin reads it */
	enum gen_exact exact;
	int is_signed, big_endian, is_float, writable;
};

static const struct gen_type gen_types[] = {
	{ "i8le", 1, EXACT_INT, 1, 0, 0, 1 },
	{ "u8le", 1, EXACT_INT, 0, 0, 0, 1 },
	{ "i16le", 1, EXACT_INT, 1, 0, 0, 1 },
	{ "i16be", 1, EXACT_INT, 1, 1, 0, 1 },
	{ "u16be", 1, EXACT_INT, 0, 1, 0, 1 },
	{ "i32le", 1, EXACT_NONE, 1, 0, 0, 1 },
	{ "u32be", 1, EXACT_NONE, 0, 1, 0, 1 },
	{ "i64le", 1, EXACT_NONE, 1, 0, 0, 1 },
	{ "u64le", 1, EXACT_NONE, 0, 0, 0, 1 },
	{ "f32le", 1, EXACT_F32LE, 1, 0, 1, 1 },
	{ "f32be", 1, EXACT_F32BE, 1, 1, 1, 1 },
	{ "f64le", 1, EXACT_NONE, 1, 0, 1, 1 },
	{ "f64be", 1, EXACT_NONE, 1, 1, 1, 1 },
	{ "f16", 1, EXACT_NONE, 1, 0, 1, 1 },
	{ "i12in16", 1, EXACT_NONE, 1, 0, 0, 1 },
	{ "ldouble", 1, EXACT_NONE, 1, 0, 1, 1 },
	{ "string8", 0, EXACT_NONE, 0, 0, 0, 1 },
	{ "enum8", 0, EXACT_NONE, 0, 0, 0, 1 },
	{ "compound", 0, EXACT_NONE, 0, 0, 0, 1 },
	{ "array2f", 0, EXACT_NONE, 0, 0, 0, 1 },
	{ "bitfield8", 0, EXACT_NONE, 0, 0, 0, 1 },
	{ "opaque4", 0, EXACT_NONE, 0, 0, 0, 1 },
	{ "vlenf", 0, EXACT_NONE, 0, 0, 0, 0 },
};

#define GEN_NTYPES (sizeof(gen_types) / sizeof(gen_types[0]))

static hid_t gen_type_make(unsigned t)
{
	hid_t id = H5I_INVALID_HID;
	int v = 1;

	switch (t) {
	case 0: return H5Tcopy(H5T_STD_I8LE);
	case 1: return H5Tcopy(H5T_STD_U8LE);
	case 2: return H5Tcopy(H5T_STD_I16LE);
	case 3: return H5Tcopy(H5T_STD_I16BE);
	case 4: return H5Tcopy(H5T_STD_U16BE);
	case 5: return H5Tcopy(H5T_STD_I32LE);
	case 6: return H5Tcopy(H5T_STD_U32BE);
	case 7: return H5Tcopy(H5T_STD_I64LE);
	case 8: return H5Tcopy(H5T_STD_U64LE);
	case 9: return H5Tcopy(H5T_IEEE_F32LE);
	case 10: return H5Tcopy(H5T_IEEE_F32BE);
	case 11: return H5Tcopy(H5T_IEEE_F64LE);
	case 12: return H5Tcopy(H5T_IEEE_F64BE);
	case 13:   /* IEEE half: 1 sign, 5 exponent, 10 mantissa bits */
		id = H5Tcopy(H5T_IEEE_F32LE);
		if (H5Tset_fields(id, 15, 10, 5, 0, 10) < 0 ||
		    H5Tset_precision(id, 16) < 0 || H5Tset_size(id, 2) < 0 ||
		    H5Tset_ebias(id, 15) < 0) {
			H5Tclose(id);
			return H5I_INVALID_HID;
		}
		return id;
	case 14:   /* 12 significant bits at offset 2 of 16 */
		id = H5Tcopy(H5T_STD_I16LE);
		if (H5Tset_precision(id, 12) < 0 || H5Tset_offset(id, 2) < 0) {
			H5Tclose(id);
			return H5I_INVALID_HID;
		}
		return id;
	case 15: return H5Tcopy(H5T_NATIVE_LDOUBLE);
	case 16:
		id = H5Tcopy(H5T_C_S1);
		H5Tset_size(id, 8);
		return id;
	case 17:
		id = H5Tenum_create(H5T_NATIVE_INT8);
		H5Tenum_insert(id, "one", &v);
		return id;
	case 18:
		id = H5Tcreate(H5T_COMPOUND, sizeof(float));
		H5Tinsert(id, "x", 0, H5T_NATIVE_FLOAT);
		return id;
	case 19: {
		hsize_t two = 2;

		return H5Tarray_create2(H5T_NATIVE_FLOAT, 1, &two);
	}
	case 20: return H5Tcopy(H5T_STD_B8LE);
	case 21: return H5Tcreate(H5T_OPAQUE, 4);
	case 22: return H5Tvlen_create(H5T_NATIVE_FLOAT);
	}
	return H5I_INVALID_HID;
}

/* ---- what was written, for the checks ---- */

struct gen_dset {
	char name[320];          /* as created, relative to the root */
	unsigned type;
	int rank;
	hsize_t dims[3];
	int stored;              /* HDF5 holds every value: must be accepted */
	int missing;             /* chunks never written: must be refused */
	int refusable;           /* not numeric, not 2-D or no columns */
	int exact;               /* data[] is what every row must read as */
	unsigned char *data;     /* rows x cols values, file type bytes */
	int64_t slab_rows;       /* slab height to read it with */
};

struct gen_file {
	struct gen_dset dsets[GEN_OBJECTS_MAX];
	int ndsets;
	char names[GEN_OBJECTS_MAX][320];   /* every link made, for targets */
	int nnames;
};

/* 254 and 255 characters: the longest dataset name xjoin takes, and one
 * more */
#define GEN_NAME_50 "n1234567890123456789012345678901234567890123456789"
#define GEN_NAME_250 GEN_NAME_50 GEN_NAME_50 GEN_NAME_50 GEN_NAME_50 \
		     GEN_NAME_50
#define GEN_LONG_NAMES GEN_NAME_250 "1234", GEN_NAME_250 "12345",

static const char *const gen_names[] = {
	"test", "train", "x", "g/test", "g/h/train", "test/x", "sp ace",
	"a:b", "v\xc3\xa9", "g", "train/y", "/abs/olute", ".", "g/",
	GEN_LONG_NAMES
};

#define GEN_NNAMES (sizeof(gen_names) / sizeof(gen_names[0]))

static const hsize_t gen_small[] = { 1, 2, 3, 4, 5, 7, 8, 16, 33, 100, 0 };
static const hsize_t gen_big[] = {
	0, 1000, 65537, (hsize_t)1 << 31, (hsize_t)1 << 40, (hsize_t)1 << 62,
	(hsize_t)INT64_MAX, ~(hsize_t)0 >> 1 | 1,
};

static hsize_t gen_dim(struct gen_bytes *b)
{
	if (gen_pick(b, 16) == 0)
		return gen_big[gen_pick(b, sizeof(gen_big) / sizeof(gen_big[0]))];
	return gen_small[gen_pick(b, sizeof(gen_small) / sizeof(gen_small[0]))];
}

/* values in the space, 0 when it overflows */
static hsize_t gen_count(int rank, const hsize_t *dims)
{
	hsize_t n = 1;

	for (int i = 0; i < rank; i++) {
		if (dims[i] && n > ~(hsize_t)0 / dims[i])
			return 0;
		n *= dims[i];
	}
	return n;
}

/* ---- planting values ---- */

static void gen_put_float(unsigned char *p, const struct gen_type *t,
			  double v, size_t size)
{
	unsigned char tmp[8];

	if (size == 4) {
		float f = (float)v;

		memcpy(tmp, &f, 4);
	} else if (size == 8) {
		memcpy(tmp, &v, 8);
	} else {
		return;
	}
	for (size_t i = 0; i < size; i++)
		p[i] = t->big_endian ? tmp[size - 1 - i] : tmp[i];
}

/* NaN, Inf, huge values and zero rows where the recipe says. */
static void gen_plant(struct gen_bytes *b, const struct gen_type *t,
		      size_t size, unsigned char *data, hsize_t rows,
		      hsize_t cols)
{
	static const double specials[] = { NAN, INFINITY, -INFINITY, 1e19,
					   -1e30, 1e300, FLT_MAX, 0.0 };
	unsigned n = gen_pick(b, 4);

	if (!rows || !cols)
		return;
	for (unsigned i = 0; i < n; i++) {
		hsize_t r = gen_u16(b) % rows, c = gen_u16(b) % cols;
		unsigned s = gen_pick(b, sizeof(specials) / sizeof(specials[0]));

		if (specials[s] == 0.0) {   /* a zero row, any type */
			memset(data + r * cols * size, 0, cols * size);
			continue;
		}
		if (t->is_float && (size == 4 || size == 8))
			gen_put_float(data + (r * cols + c) * size, t,
				      specials[s], size);
	}
}

/* ---- building ---- */

struct gen_plan {
	unsigned type;
	int rank, layout, alloc, write, filters, grow;
	hsize_t dims[3], maxdims[3], chunk[3];
	hsize_t band0, band1;          /* rows written by a band write */
};

static void gen_plan_space(struct gen_bytes *b, struct gen_plan *p)
{
	unsigned shape = gen_pick(b, 8);

	p->rank = shape == 0 ? 0 : shape == 1 ? -1 : shape == 2 ? 1 :
		  shape == 7 ? 3 : 2;
	for (int i = 0; i < 3; i++) {
		p->dims[i] = i < p->rank ? gen_dim(b) : 1;
		p->maxdims[i] = p->dims[i];
	}
	if (p->rank > 0 && gen_pick(b, 4) == 0) {
		p->maxdims[0] = H5S_UNLIMITED;
		if (p->rank > 1 && gen_pick(b, 2))
			p->maxdims[1] = H5S_UNLIMITED;
	}
}

static void gen_plan_layout(struct gen_bytes *b, struct gen_plan *p)
{
	p->layout = p->maxdims[0] == H5S_UNLIMITED ? H5D_CHUNKED :
		    (int[]){ H5D_CONTIGUOUS, H5D_CHUNKED, H5D_COMPACT }
			    [gen_pick(b, 3)];
	if (p->rank < 1)
		p->layout = p->layout == H5D_CHUNKED ? H5D_CONTIGUOUS :
						       p->layout;
	for (int i = 0; i < 3; i++) {
		hsize_t d = p->dims[i] < 40 ? p->dims[i] : 40;

		p->chunk[i] = 1 + gen_pick(b, (unsigned)d + 3);
		if (p->dims[i] > 1000 && gen_pick(b, 2))
			p->chunk[i] = 1000;
	}
	p->filters = p->layout == H5D_CHUNKED ? (int)gen_u8(b) : 0;
	p->alloc = (int[]){ H5D_ALLOC_TIME_DEFAULT, H5D_ALLOC_TIME_EARLY,
			    H5D_ALLOC_TIME_LATE, H5D_ALLOC_TIME_INCR }
		   [gen_pick(b, 4)];
	p->write = (int)gen_pick(b, 4);   /* none, all, a band, all + grow */
	p->grow = p->write == 3 && p->maxdims[0] == H5S_UNLIMITED;
}

static hid_t gen_dcpl(struct gen_bytes *b, struct gen_plan *p,
		      hid_t type, size_t size, hsize_t bytes)
{
	hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
	unsigned char fill[16];

	if (dcpl < 0)
		return dcpl;
	H5Pset_layout(dcpl, (H5D_layout_t)p->layout);
	if (p->layout == H5D_CHUNKED) {
		H5Pset_chunk(dcpl, p->rank, p->chunk);
		/* scale-offset first, as writers put it, and never with
		 * n-bit: HDF5 1.10.8 overflows the heap reading back either
		 * (tests/fuzz/known-hdf5), which would hide our findings */
		if (p->filters & 16)
			H5Pset_scaleoffset(dcpl, gen_types[p->type].is_float ?
					   H5Z_SO_FLOAT_DSCALE : H5Z_SO_INT,
					   (int)gen_pick(b, 5));
		else if (p->filters & 8)
			H5Pset_nbit(dcpl);
		if (p->filters & 1)
			H5Pset_shuffle(dcpl);
		if (p->filters & 2)
			H5Pset_deflate(dcpl, (unsigned)(p->filters >> 5));
		if (p->filters & 4)
			H5Pset_fletcher32(dcpl);
	}
	/* early allocation of a huge space would fill the disk */
	if (p->alloc == H5D_ALLOC_TIME_EARLY &&
	    (bytes == 0 || bytes > GEN_EARLY_BYTES_MAX))
		p->alloc = H5D_ALLOC_TIME_DEFAULT;
	if (H5Pset_alloc_time(dcpl, (H5D_alloc_time_t)p->alloc) < 0)
		p->alloc = H5D_ALLOC_TIME_DEFAULT;
	if (gen_pick(b, 3) == 0 && gen_types[p->type].writable &&
	    size <= sizeof(fill)) {
		gen_data(b, fill, size);
		H5Pset_fill_value(dcpl, type, fill);
		H5Pset_fill_time(dcpl, (H5D_fill_time_t)gen_pick(b, 3));
	}
	return dcpl;
}

/* Whether writing the rows [r0, r1) of the 2-D space dims leaves some
 * chunk untouched: incremental allocation never allocates that chunk. */
static int gen_chunks_missing(const struct gen_plan *p, const hsize_t *dims,
			      hsize_t r0, hsize_t r1)
{
	hsize_t rows = (dims[0] + p->chunk[0] - 1) / p->chunk[0];

	if (r1 <= r0)
		return 1;
	return (r1 - 1) / p->chunk[0] - r0 / p->chunk[0] + 1 < rows;
}

/* The allocation time HDF5 applies: the default depends on the layout,
 * and compact storage is always allocated at creation. */
static int gen_alloc_time(const struct gen_plan *p)
{
	if (p->layout == H5D_COMPACT)
		return H5D_ALLOC_TIME_EARLY;
	if (p->alloc != H5D_ALLOC_TIME_DEFAULT)
		return p->alloc;
	return p->layout == H5D_CHUNKED ? H5D_ALLOC_TIME_INCR :
					  H5D_ALLOC_TIME_LATE;
}

/* What the checks may expect of a dataset built by plan p; wrote is 0
 * (nothing), 1 (every row) or 2 (the band), final the shape at the end. */
static void gen_expect(struct gen_dset *d, const struct gen_plan *p,
		       int wrote, int failed, const hsize_t *final)
{
	int early = gen_alloc_time(p) == H5D_ALLOC_TIME_EARLY;
	hsize_t r0 = wrote == 2 ? p->band0 : 0;
	hsize_t r1 = wrote == 2 ? p->band1 : wrote ? p->dims[0] : 0;

	/* 0 rows is an empty input, valid (app/ refuses an empty base) */
	d->refusable = !gen_types[p->type].numeric || p->rank != 2 ||
		       final[1] == 0;
	if (failed || d->refusable)
		return;
	if (final[0] == 0) {   /* no values: nothing to store or miss */
		d->stored = 1;
		return;
	}
	switch (p->layout) {
	case H5D_COMPACT:
		d->stored = 1;
		break;
	case H5D_CONTIGUOUS:   /* allocated whole, at once */
		d->stored = early || wrote;
		d->missing = !d->stored;
		break;
	default:   /* chunked */
		if (early || gen_alloc_time(p) == H5D_ALLOC_TIME_LATE) {
			/* every chunk at once, at creation or first write;
			 * what growing the extent adds varies */
			if (!p->grow) {
				d->stored = early || wrote;
				d->missing = !d->stored;
			}
			break;
		}
		d->missing = gen_chunks_missing(p, final, r0, r1);
		d->stored = !d->missing;
		break;
	}
}

static int gen_write(struct gen_bytes *b, hid_t ds, hid_t type,
		     struct gen_plan *p, struct gen_dset *d, size_t size)
{
	hsize_t n = gen_count(p->rank, p->dims), cols;
	hsize_t start[3] = { 0, 0, 0 }, count[3];
	unsigned char *data;
	hid_t fs, ms;
	herr_t rc;

	if (p->write == 0 || !gen_types[p->type].writable || n == 0 ||
	    n > GEN_WRITE_VALUES_MAX || n * size > GEN_WRITE_BYTES_MAX ||
	    p->rank < 0)
		return 0;
	data = malloc(n * size);
	if (!data)
		return 0;
	gen_data(b, data, n * size);
	cols = p->rank == 2 ? p->dims[1] : 1;
	gen_plant(b, &gen_types[p->type], size, data, n / cols, cols);
	memcpy(count, p->dims, sizeof(count));
	if (p->write == 2 && p->rank >= 1) {
		p->band0 = gen_u16(b) % p->dims[0];
		p->band1 = p->band0 + 1 + gen_u16(b) % (p->dims[0] - p->band0);
		start[0] = p->band0;
		count[0] = p->band1 - p->band0;
	}
	fs = H5Dget_space(ds);
	ms = H5Screate_simple(p->rank > 0 ? p->rank : 1, count, NULL);
	rc = fs < 0 || ms < 0 ? -1 : p->rank > 0 ?
	     H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count,
				 NULL) : 0;
	if (rc >= 0)
		rc = H5Dwrite(ds, type, p->rank > 0 ? ms : H5S_ALL,
			      p->rank > 0 ? fs : H5S_ALL, H5P_DEFAULT, data);
	if (ms >= 0)
		H5Sclose(ms);
	if (fs >= 0)
		H5Sclose(fs);
	if (rc < 0) {
		free(data);
		return -1;
	}
	if (p->write != 2 && !p->grow && !(p->filters & 16) &&
	    gen_types[p->type].exact != EXACT_NONE) {
		d->data = data;   /* kept for the read-back check */
		d->exact = 1;
	} else {
		free(data);
	}
	return p->write == 2 ? 2 : 1;
}

/* FUZZ_VERBOSE=1: one line per dataset made, for triage. */
static void gen_describe(const struct gen_dset *d, const struct gen_plan *p,
			 int wrote)
{
	static int verbose = -1;

	if (verbose < 0)
		verbose = getenv("FUZZ_VERBOSE") != NULL;
	if (!verbose)
		return;
	fprintf(stderr, "h5gen: /%s %s rank %d %llu x %llu layout %d chunk "
		"%llu x %llu filters 0x%x alloc %d write %d (%d) grow %d: "
		"stored %d missing %d refusable %d exact %d\n", d->name,
		gen_types[p->type].name, p->rank,
		(unsigned long long)d->dims[0], (unsigned long long)d->dims[1],
		p->layout, (unsigned long long)p->chunk[0],
		(unsigned long long)p->chunk[1], (unsigned)p->filters,
		gen_alloc_time(p), p->write, wrote, p->grow, d->stored,
		d->missing, d->refusable, d->exact);
}

static void gen_dataset(struct gen_bytes *b, hid_t fid, hid_t lcpl,
			const char *name, struct gen_file *f)
{
	struct gen_plan p;
	struct gen_dset *d = &f->dsets[f->ndsets];
	hid_t type, space, dcpl, ds;
	hsize_t final[3];
	size_t size;
	int wrote = 0;

	memset(&p, 0, sizeof(p));
	memset(d, 0, sizeof(*d));
	p.type = gen_pick(b, GEN_NTYPES);
	gen_plan_space(b, &p);
	gen_plan_layout(b, &p);
	type = gen_type_make(p.type);
	size = type >= 0 ? H5Tget_size(type) : 0;
	space = p.rank < 0 ? H5Screate(H5S_NULL) : p.rank == 0 ?
		H5Screate(H5S_SCALAR) :
		H5Screate_simple(p.rank, p.dims, p.maxdims);
	dcpl = gen_dcpl(b, &p, type, size, gen_count(p.rank < 0 ? 0 : p.rank,
						     p.dims) * size);
	ds = type < 0 || space < 0 || dcpl < 0 ? -1 :
	     H5Dcreate2(fid, name, type, space, lcpl, dcpl, H5P_DEFAULT);
	if (ds >= 0) {
		wrote = gen_write(b, ds, type, &p, d, size);
		memcpy(final, p.dims, sizeof(final));
		if (p.grow) {
			final[0] = p.dims[0] + 1 + gen_pick(b, 40);
			if (H5Dset_extent(ds, final) < 0)
				wrote = -1;
		}
		snprintf(d->name, sizeof(d->name), "%s", name);
		d->type = p.type;
		d->rank = p.rank;
		memcpy(d->dims, final, sizeof(d->dims));
		gen_expect(d, &p, wrote > 0 ? wrote : 0, wrote < 0, final);
		d->slab_rows = 1 + gen_pick(b, 9);
		gen_describe(d, &p, wrote);
		f->ndsets++;
		H5Dclose(ds);
	}
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (space >= 0)
		H5Sclose(space);
	if (type >= 0)
		H5Tclose(type);
}

static void gen_link(struct gen_bytes *b, hid_t fid, hid_t lcpl,
		     const char *name, const char *file,
		     const struct gen_file *f)
{
	const char *target = f->nnames ? f->names[gen_pick(b, (unsigned)
						 f->nnames)] : "train";

	switch (gen_pick(b, 5)) {
	case 0:
		H5Lcreate_soft(target, fid, name, lcpl, H5P_DEFAULT);
		break;
	case 1:   /* dangling or looping */
		H5Lcreate_soft(gen_pick(b, 2) ? "/nowhere" : name, fid, name,
			       lcpl, H5P_DEFAULT);
		break;
	case 2:
		H5Lcreate_external("/nonexistent/xj-fuzz.h5", "/train", fid,
				   name, lcpl, H5P_DEFAULT);
		break;
	case 3:   /* back into this very file */
		H5Lcreate_external(file, target, fid, name, lcpl, H5P_DEFAULT);
		break;
	default:
		H5Lcreate_hard(fid, target, fid, name, lcpl, H5P_DEFAULT);
		break;
	}
}

static void gen_build(struct gen_bytes *b, const char *path,
		      struct gen_file *f)
{
	hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), lcpl, fid;
	unsigned nobj;

	if (gen_pick(b, 2))
		H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST,
				     H5F_LIBVER_LATEST);
	fid = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
	H5Pclose(fapl);
	if (fid < 0)
		fuzz_die("cannot create %s", path);
	lcpl = H5Pcreate(H5P_LINK_CREATE);
	H5Pset_create_intermediate_group(lcpl, 1);
	nobj = 1 + gen_pick(b, GEN_OBJECTS_MAX);
	for (unsigned i = 0; i < nobj; i++) {
		const char *name = gen_names[gen_pick(b, GEN_NNAMES)];
		unsigned kind = gen_pick(b, 8);

		if (kind < 5 && f->ndsets < GEN_OBJECTS_MAX) {
			gen_dataset(b, fid, lcpl, name, f);
		} else if (kind == 5) {
			hid_t g = H5Gcreate2(fid, name, lcpl, H5P_DEFAULT,
					     H5P_DEFAULT);

			if (g >= 0)
				H5Gclose(g);
		} else {
			gen_link(b, fid, lcpl, name, path, f);
		}
		snprintf(f->names[f->nnames++], sizeof(f->names[0]), "%s",
			 name);
	}
	H5Pclose(lcpl);
	H5Fclose(fid);
	H5Eclear2(H5E_DEFAULT);
	fuzz_h5_no_open_ids("building the file");
}

/* ---- checking ---- */

static float gen_expected(const struct gen_dset *d, int64_t i)
{
	const struct gen_type *t = &gen_types[d->type];
	const unsigned char *p;
	unsigned char le[4];
	float f;

	switch (t->exact) {
	case EXACT_F32LE:
	case EXACT_F32BE:
		p = d->data + i * 4;
		for (int k = 0; k < 4; k++)
			le[k] = t->exact == EXACT_F32BE ? p[3 - k] : p[k];
		memcpy(&f, le, 4);
		return f;
	case EXACT_INT:
		if (d->type <= 1) {
			p = d->data + i;
			return t->is_signed ? (float)(int8_t)p[0] :
					      (float)p[0];
		}
		p = d->data + i * 2;
		{
			uint16_t u = t->big_endian ? (uint16_t)(p[0] << 8 | p[1]) :
					   (uint16_t)(p[1] << 8 | p[0]);

			return t->is_signed ? (float)(int16_t)u : (float)u;
		}
	case EXACT_NONE:
		break;
	}
	return NAN;
}

/* Each slab read must be the rows written, bit for bit. */
static void gen_check_slab(void *ctx, int64_t row0, int64_t rows,
			   int64_t cols, const float *x)
{
	const struct gen_dset *d = ctx;

	for (int64_t i = 0; i < rows * cols; i++) {
		float want = gen_expected(d, row0 * cols + i);

		if (memcmp(&want, &x[i], sizeof(float)) != 0)
			fuzz_die("%s (%s): row %lld column %lld read as %a, "
				 "written %a", d->name, gen_types[d->type].name,
				 (long long)(row0 + i / cols),
				 (long long)(i % cols), (double)x[i],
				 (double)want);
	}
}

/* The first NaN/Inf in what was written must stop the read there. */
static void gen_check_first_bad(const struct gen_dset *d,
				const struct fuzz_h5_result *r)
{
	int64_t n = (int64_t)(d->dims[0] * d->dims[1]), i;
	char where[96];

	for (i = 0; i < n; i++)
		if (!isfinite(gen_expected(d, i)))
			break;
	if (i == n) {
		if (!r->complete)
			fuzz_die("%s: finite data refused: %s", d->name,
				 r->st.msg);
		return;
	}
	snprintf(where, sizeof(where), "row %lld column %lld ",
		 (long long)(i / (int64_t)d->dims[1]),
		 (long long)(i % (int64_t)d->dims[1]));
	if (r->read != XJ_EXIT_INPUT || !strstr(r->st.msg, where))
		fuzz_die("%s: first bad value at %sbut read gave %d: %s",
			 d->name, where, r->read, r->st.msg);
	if (r->rows_read > i / (int64_t)d->dims[1])
		fuzz_die("%s: rows past the bad %sread as fine", d->name,
			 where);
}

static void gen_check_named(const char *path, const struct gen_dset *d)
{
	char spec[XJ_PATH_MAX + 400];
	struct fuzz_h5_result r;
	/* a ':' would split the spec; xjoin adds the leading '/' */
	int named = strchr(d->name, ':') == NULL &&
		    strlen(d->name) + 1 < XJ_NAME_MAX;

	snprintf(spec, sizeof(spec), "%s:%s", path, d->name);
	fuzz_h5_probe(spec, "", &r);
	if (named && d->stored && r.probe != XJ_OK)
		fuzz_die("%s (%s, %llu x %llu, stored) refused: %s", d->name,
			 gen_types[d->type].name,
			 (unsigned long long)d->dims[0],
			 (unsigned long long)d->dims[1], r.st.msg);
	if (named && (d->missing || d->refusable) && r.probe == XJ_OK)
		fuzz_die("%s (%s, rank %d, %llu x %llu) accepted though %s",
			 d->name, gen_types[d->type].name, d->rank,
			 (unsigned long long)d->dims[0],
			 (unsigned long long)d->dims[1],
			 d->missing ? "chunks were never written" :
			 "xjoin cannot read it");
	if (r.probe)
		return;
	if (named && d->stored && ((uint64_t)r.info.rows != d->dims[0] ||
				   (uint64_t)r.info.cols != d->dims[1]))
		fuzz_die("%s: probed as %lld x %lld, is %llu x %llu", d->name,
			 (long long)r.info.rows, (long long)r.info.cols,
			 (unsigned long long)d->dims[0],
			 (unsigned long long)d->dims[1]);
	if (named && d->exact) {
		fuzz_h5_read(&r, d->slab_rows, gen_check_slab, (void *)d);
		gen_check_first_bad(d, &r);
	} else {
		fuzz_h5_read(&r, d->slab_rows, NULL, NULL);
	}
}

/* The defaults, the search and a dataset name from the input. */
static void gen_check_unnamed(struct gen_bytes *b, const char *path)
{
	static const char *const defaults[] = { "test", "train", "" };
	char spec[XJ_PATH_MAX + 400], name[301];
	struct fuzz_h5_result r;
	size_t len = 0;

	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
		fuzz_h5_probe(path, defaults[i], &r);
		fuzz_h5_read(&r, 3, NULL, NULL);
	}
	while (len < sizeof(name) - 1 && b->at < b->size &&
	       b->all[b->at] != '\0')
		name[len++] = (char)b->all[b->at++];
	name[len] = '\0';
	snprintf(spec, sizeof(spec), "%s:%s", path, name);
	fuzz_h5_probe(spec, "train", &r);
	fuzz_h5_read(&r, 2, NULL, NULL);
}

static struct fuzz_file fuzz_gen;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gen_bytes b = { data, size, 0 };
	struct gen_file f;

	if (fuzz_gen.path[0] == '\0') {
		H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
		fuzz_file_open(&fuzz_gen, ".h5");
	}
	memset(&f, 0, sizeof(f));
	gen_build(&b, fuzz_gen.path, &f);
	for (int i = 0; i < f.ndsets; i++)
		gen_check_named(fuzz_gen.path, &f.dsets[i]);
	gen_check_unnamed(&b, fuzz_gen.path);
	for (int i = 0; i < f.ndsets; i++)
		free(f.dsets[i].data);
	return 0;
}
