/*
 * cpu_gemm.c: oneDNN matmul tiles for the CPU candidate GEMM (cpu_gemm.h),
 * and the rounding of rows to bf16 or int8 with their error bounds.
 *
 * Per tile (tq x nb, dimension d): 2 tq nb d FLOPs (int8: integer
 * operations), reading tq d + nb d inputs of 4 (fp32), 2 (bf16) or 1
 * (int8) bytes and writing tq nb floats; int8 then scales them in place
 * (2 or 3 float operations per element).
 *
 * oneDNN's primitives are fixed to their shapes: each thread keeps the
 * primitives of the last few (tq, nb) it ran (a chunk has at most four:
 * full and last tiles of rows and columns), so a tile costs a primitive
 * creation only when a new shape appears. oneDNN runs a primitive called
 * inside an OpenMP parallel region on the calling thread alone, which is
 * what the backend wants (one tile per thread, as with sgemm).
 *
 * Rounded rows. bf16: round to nearest even of the top 16 bits; a result
 * below 2^-126 becomes 0 (the dot product instructions treat bf16
 * subnormals as zero). int8: s = max|x_i| / 127 in float, q_i =
 * rint(x_i / s) clamped to [-127, 127], and r(x_i) = s q_i. With a
 * normal s, |x_i / s| <= 127 (1 + 2^-22) and q_i is within half a step;
 * a subnormal s (rows below about 1e-36) is coarse and may clamp, which
 * only the measured error below has to, and does, account for. The error
 * norm |r(x) - x| is summed in double from the exact differences (each
 * (double)s q_i - x_i has at most one rounding) and raised by a relative
 * 2^-40, which covers the d + 2 double roundings of the sum and the square
 * root for d < 2^20.
 */
#include "cpu_gemm.h"
#include "cpu_backend_int.h"     /* XJ_CLONES */

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef XJ_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

/* ---- rounding rows ------------------------------------------------- */

static uint16_t bf16_bits(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof(u));
	u += 0x7fffu + ((u >> 16) & 1u);      /* round to nearest even */
	if ((u & 0x7f800000u) == 0)
		u &= 0x80000000u;             /* subnormal: flushed to 0 */
	return (uint16_t)(u >> 16);
}

static float bf16_float(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float x;

	memcpy(&x, &u, sizeof(x));
	return x;
}

float cpu_gemm_round_bf16(float x)
{
	return bf16_float(bf16_bits(x));
}

/* Upper bound of sqrt(s), s a double sum of d + 1 rounded terms. */
static float err_up(double s)
{
	double e = sqrt(s) * (1.0 + 0x1p-40);
	float f = (float)e;

	if ((double)f < e)
		f = nextafterf(f, INFINITY);
	return f;
}

/*
 * The rounding of a row and its error norm. The squared errors of a block
 * of PACK_B elements go to an array (a loop the compiler vectorizes), then
 * into PACK_W lanes (element i into lane i mod PACK_W, in order), and the
 * lanes are summed in order: the same operations in the same order in
 * every clone, so the same bits. The 2^-40 of err_up covers any order of
 * the d + 2 roundings.
 */
#define PACK_W 8
#define PACK_B 256

static inline void lanes_add(double *restrict s, const double *restrict e2,
			     int64_t n)
{
	int64_t i = 0;

	for (; i + PACK_W <= n; i += PACK_W)
		for (int w = 0; w < PACK_W; w++)
			s[w] += e2[i + w];
	for (; i < n; i++)
		s[i % PACK_W] += e2[i];
}

static double lanes_sum(const double *s)
{
	double t = 0;

	for (int w = 0; w < PACK_W; w++)
		t += s[w];
	return t;
}

/* e2[i] = (r(x_i) - x_i)^2 and xe[i] = x_i (r(x_i) - x_i): the difference
 * is exact in double (bf16: in float), and so is its product with x_i (at
 * most 24 + 25 bits). */
static inline void bf16_elems(const float *restrict x, int64_t n,
			      uint16_t *restrict o, double *restrict e2,
			      double *restrict xe)
{
	for (int64_t i = 0; i < n; i++) {
		double t;

		o[i] = bf16_bits(x[i]);
		t = (double)bf16_float(o[i]) - (double)x[i];
		e2[i] = t * t;
		xe[i] = (double)x[i] * t;
	}
}

/* q_i = rint(x_i / sc) clamped to [-127, 127]: |x_i / sc| stays far
 * below 2^31 (about 127, twice that for a subnormal sc), so the
 * conversion to int32 before the clamp is exact. */
static inline void int8_elems(const float *restrict x, int64_t n, float sc,
			      int8_t *restrict o, double *restrict e2,
			      double *restrict xe)
{
	for (int64_t i = 0; i < n; i++) {
		int32_t q = (int32_t)rintf(x[i] / sc);
		double t;

		q = q > 127 ? 127 : q;
		q = q < -127 ? -127 : q;
		o[i] = (int8_t)q;
		t = (double)sc * (double)q - (double)x[i];
		e2[i] = t * t;
		xe[i] = (double)x[i] * t;
	}
}

/* pack_bf16 and pack_int8 round row x into o and return the bound of its
 * error norm |r(x) - x|; *dot gets x.(x - r(x)) (the products summed in
 * lanes as the squares are: the same bits in every clone). */
XJ_CLONES
static float pack_bf16(const float *x, int64_t d, uint16_t *o, double *dot)
{
	double s[PACK_W] = { 0 }, p[PACK_W] = { 0 }, e2[PACK_B], xe[PACK_B];

	for (int64_t i = 0; i < d; i += PACK_B) {
		int64_t n = d - i < PACK_B ? d - i : PACK_B;

		bf16_elems(x + i, n, o + i, e2, xe);
		lanes_add(s, e2, n);
		lanes_add(p, xe, n);
	}
	*dot = -lanes_sum(p);
	return err_up(lanes_sum(s));
}

XJ_CLONES
static float pack_int8(const float *x, int64_t d, int8_t *o, float *scale,
		       double *dot)
{
	float mx[PACK_W] = { 0 }, m = 0, sc;
	double s[PACK_W] = { 0 }, p[PACK_W] = { 0 }, e2[PACK_B], xe[PACK_B];
	int64_t i = 0;

	for (; i + PACK_W <= d; i += PACK_W)
		for (int w = 0; w < PACK_W; w++)
			mx[w] = fabsf(x[i + w]) > mx[w] ? fabsf(x[i + w])
							 : mx[w];
	for (; i < d; i++)
		mx[0] = fabsf(x[i]) > mx[0] ? fabsf(x[i]) : mx[0];
	for (int w = 0; w < PACK_W; w++)
		m = mx[w] > m ? mx[w] : m;
	sc = m / 127.0f;
	*scale = sc;
	if (sc == 0) {
		/* the zero row, or values so small the scale underflows:
		 * r(x) = 0 and the error is the row's own norm */
		for (i = 0; i < d; i++) {
			o[i] = 0;
			s[0] += (double)x[i] * x[i];
		}
		*scale = 0;
		*dot = s[0];
		return err_up(s[0]);
	}
	for (i = 0; i < d; i += PACK_B) {
		int64_t n = d - i < PACK_B ? d - i : PACK_B;

		int8_elems(x + i, n, sc, o + i, e2, xe);
		lanes_add(s, e2, n);
		lanes_add(p, xe, n);
	}
	*dot = -lanes_sum(p);
	return err_up(lanes_sum(s));
}

int cpu_gemm_rows_reserve(cpu_gemm_rows *r, xj_precision p, int64_t rows,
			  int64_t d)
{
	size_t esz = p == XJ_PREC_INT8 ? 1 : 2;

	if (rows <= r->alloc)
		return 0;
	cpu_gemm_rows_free(r);
	if (rows > 0 && d > 0 && (uint64_t)rows > SIZE_MAX / 8 / (uint64_t)d)
		return -1;
	r->x = aligned_alloc(64, ((size_t)(rows * d) * esz + 63) / 64 * 64 +
			     64);
	r->err = malloc((size_t)rows * sizeof(float) + 1);
	r->dot = malloc((size_t)rows * sizeof(double) + 1);
	r->scale = p == XJ_PREC_INT8 ?
		   malloc((size_t)rows * sizeof(float) + 1) : NULL;
	if (!r->x || !r->err || !r->dot || (p == XJ_PREC_INT8 && !r->scale)) {
		cpu_gemm_rows_free(r);
		return -1;
	}
	r->alloc = rows;
	return 0;
}

void cpu_gemm_rows_free(cpu_gemm_rows *r)
{
	free(r->x);
	free(r->scale);
	free(r->err);
	free(r->dot);
	r->x = NULL;
	r->scale = NULL;
	r->err = NULL;
	r->dot = NULL;
	r->alloc = 0;
}

void cpu_gemm_pack(xj_precision p, const float *x, int64_t rows, int64_t d,
		   cpu_gemm_rows *r, int threads)
{
#pragma omp parallel for num_threads(threads) schedule(static) \
	if (rows * d >= (1 << 16))
	for (int64_t i = 0; i < rows; i++) {
		if (p == XJ_PREC_INT8)
			r->err[i] = pack_int8(x + i * d, d,
					      (int8_t *)r->x + i * d,
					      &r->scale[i], &r->dot[i]);
		else
			r->err[i] = pack_bf16(x + i * d, d,
					      (uint16_t *)r->x + i * d,
					      &r->dot[i]);
	}
}

/* ---- capabilities and the choice ----------------------------------- */

#ifdef XJ_HAVE_DNNL
static const char *isa_name(dnnl_cpu_isa_t isa)
{
	switch ((int)isa) {
	case dnnl_cpu_isa_sse41: return "sse41";
	case dnnl_cpu_isa_avx: return "avx";
	case dnnl_cpu_isa_avx2: return "avx2";
	case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
	case dnnl_cpu_isa_avx512_core: return "avx512_core";
	case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
	case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
	case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
	}
	return "other";
}

/* ISA a includes every instruction of ISA b (oneDNN's bit masks). */
static int isa_has(dnnl_cpu_isa_t a, dnnl_cpu_isa_t b)
{
	return ((unsigned)a & (unsigned)b) == (unsigned)b;
}
#endif

void cpu_gemm_caps_get(cpu_gemm_caps *caps)
{
	memset(caps, 0, sizeof(*caps));
#ifdef XJ_HAVE_DNNL
	dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();

	caps->dnnl = 1;
	caps->bf16 = isa_has(isa, dnnl_cpu_isa_avx512_core_bf16);
	caps->int8 = isa_has(isa, dnnl_cpu_isa_avx512_core_vnni) ||
		     isa_has(isa, dnnl_cpu_isa_avx2_vnni);
	snprintf(caps->isa, sizeof(caps->isa), "%s", isa_name(isa));
	snprintf(caps->version, sizeof(caps->version), "%d.%d.%d",
		 dnnl_version()->major, dnnl_version()->minor,
		 dnnl_version()->patch);
#else
	snprintf(caps->isa, sizeof(caps->isa), "none (built without oneDNN)");
#endif
}

int cpu_gemm_resolve(xj_precision req, int64_t d, int64_t k,
		     xj_precision *out, char *why, size_t n, xj_status *st)
{
	cpu_gemm_caps caps;

	cpu_gemm_caps_get(&caps);
	*out = XJ_PREC_FP32;
	switch (req) {
	case XJ_PREC_AUTO:
		if (caps.int8 && d <= CPU_GEMM_INT8_MAX_D &&
		    (k <= CPU_GEMM_INT8_MAX_K || !caps.bf16)) {
			*out = XJ_PREC_INT8;
			snprintf(why, n, "auto: int8 dot products in hardware (oneDNN %s)",
				 caps.isa);
		} else if (caps.bf16) {
			*out = XJ_PREC_BF16;
			snprintf(why, n, "auto: bf16 dot products in hardware%s (oneDNN %s)",
				 caps.int8 ? ", k above int8's" : "", caps.isa);
		} else if (caps.dnnl) {
			snprintf(why, n, "auto: no bf16 or int8 in hardware here (oneDNN %s)",
				 caps.isa);
		} else {
			snprintf(why, n, "auto: built without oneDNN");
		}
		return XJ_OK;
	case XJ_PREC_FP32:
		snprintf(why, n, "as asked");
		return XJ_OK;
	case XJ_PREC_BF16:
		if (!caps.dnnl)
			break;
		*out = XJ_PREC_BF16;
		snprintf(why, n, caps.bf16 ? "as asked (oneDNN %s)" :
			 "as asked; emulated: this CPU has no bf16 dot products (oneDNN %s)",
			 caps.isa);
		return XJ_OK;
	case XJ_PREC_INT8:
		if (!caps.dnnl || !caps.int8 || d > CPU_GEMM_INT8_MAX_D)
			break;
		*out = XJ_PREC_INT8;
		snprintf(why, n, "as asked (oneDNN %s)", caps.isa);
		return XJ_OK;
	case XJ_PREC_TF32:
	case XJ_PREC_FP16:
		return xj_fail(st, XJ_EXIT_USAGE,
			       "--precision %s is a GPU precision; the CPU backend takes auto, fp32, bf16 or int8",
			       precision_name(req));
	}
	if (!caps.dnnl)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "--precision %s needs oneDNN, which this build lacks (use auto or fp32)",
			       precision_name(req));
	if (d > CPU_GEMM_INT8_MAX_D)
		return xj_fail(st, XJ_EXIT_USAGE,
			       "--precision int8: dimension %lld is above %d, where int32 sums could overflow",
			       (long long)d, CPU_GEMM_INT8_MAX_D);
	return xj_fail(st, XJ_EXIT_USAGE,
		       "--precision int8 needs exact int8 dot products (VNNI or AMX), which this CPU lacks (oneDNN %s; use auto, fp32 or bf16)",
		       caps.isa);
}

/* ---- oneDNN tiles -------------------------------------------------- */

#ifdef XJ_HAVE_DNNL

#define SHAPES 6        /* primitives kept per thread */

typedef struct gemm_shape {
	int64_t tq, nb;
	dnnl_primitive_t prim;
	dnnl_memory_t a, b, c;
} gemm_shape;

typedef struct gemm_slot {
	dnnl_stream_t stream;
	gemm_shape shape[SHAPES];
	int next;
} gemm_slot;

struct cpu_gemm {
	xj_precision p;
	int64_t d;
	float alpha;
	int has_crow;
	int threads;
	dnnl_engine_t engine;
	gemm_slot *slot;
	char impl[64];
};

#define DNNL_OK(call) ((call) == dnnl_success)

static void shape_free(gemm_shape *s)
{
	if (s->prim)
		dnnl_primitive_destroy(s->prim);
	if (s->a)
		dnnl_memory_destroy(s->a);
	if (s->b)
		dnnl_memory_destroy(s->b);
	if (s->c)
		dnnl_memory_destroy(s->c);
	memset(s, 0, sizeof(*s));
}

void cpu_gemm_free(cpu_gemm *g)
{
	if (!g)
		return;
	for (int t = 0; g->slot && t < g->threads; t++) {
		for (int s = 0; s < SHAPES; s++)
			shape_free(&g->slot[t].shape[s]);
		if (g->slot[t].stream)
			dnnl_stream_destroy(g->slot[t].stream);
	}
	free(g->slot);
	if (g->engine)
		dnnl_engine_destroy(g->engine);
	free(g);
}

int cpu_gemm_create(xj_precision p, int64_t d, float alpha, int has_crow,
		    int threads, cpu_gemm **out, xj_status *st)
{
	cpu_gemm *g = calloc(1, sizeof(*g));

	*out = NULL;
	if (!g)
		return xj_fail(st, XJ_EXIT_RESOURCE,
			       "cpu gemm: cannot allocate the object");
	g->p = p;
	g->d = d;
	g->alpha = alpha;
	g->has_crow = has_crow;
	g->threads = threads;
	g->slot = calloc((size_t)threads, sizeof(*g->slot));
	if (!g->slot || !DNNL_OK(dnnl_engine_create(&g->engine, dnnl_cpu, 0)))
		goto fail;
	for (int t = 0; t < threads; t++)
		if (!DNNL_OK(dnnl_stream_create(&g->slot[t].stream, g->engine,
						dnnl_stream_default_flags)))
			goto fail;
	*out = g;
	return XJ_OK;
fail:
	cpu_gemm_free(g);
	return xj_fail(st, XJ_EXIT_RESOURCE,
		       "cpu gemm: oneDNN engine or streams could not be created");
}

const char *cpu_gemm_impl(const cpu_gemm *g)
{
	return g ? g->impl : "";
}

static dnnl_data_type_t in_type(xj_precision p)
{
	return p == XJ_PREC_INT8 ? dnnl_s8 :
	       p == XJ_PREC_BF16 ? dnnl_bf16 : dnnl_f32;
}

/*
 * The primitive for a tq x nb tile: A (tq x d, rows), B^T given as the
 * base rows (nb x d, i.e. weights d x nb with strides 1, d), C (tq x nb).
 * fp32, bf16: C = alpha A B^T (+ C with the sum post-op); int8: C = A B^T
 * summed in int32 and converted to float (exact below 2^24, one rounding
 * above), scaled in place by cpu_gemm_tile.
 */
static int shape_make(cpu_gemm *g, gemm_shape *s, int64_t tq, int64_t nb)
{
	dnnl_memory_desc_t ad, bd, cd;
	dnnl_dims_t adim = { tq, g->d }, astr = { g->d, 1 };
	dnnl_dims_t bdim = { g->d, nb }, bstr = { 1, g->d };
	dnnl_dims_t cdim = { tq, nb }, cstr = { nb, 1 };
	dnnl_data_type_t t = in_type(g->p);
	int int8 = g->p == XJ_PREC_INT8;
	dnnl_matmul_desc_t md;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t po = NULL;
	dnnl_primitive_desc_t pd = NULL;
	const char *impl = NULL;
	int ok;

	ok = DNNL_OK(dnnl_memory_desc_init_by_strides(&ad, 2, adim, t, astr)) &&
	     DNNL_OK(dnnl_memory_desc_init_by_strides(&bd, 2, bdim, t, bstr)) &&
	     DNNL_OK(dnnl_memory_desc_init_by_strides(&cd, 2, cdim, dnnl_f32,
						      cstr)) &&
	     DNNL_OK(dnnl_matmul_desc_init(&md, &ad, &bd, NULL, &cd)) &&
	     DNNL_OK(dnnl_primitive_attr_create(&attr));
	if (ok && !int8) {
		ok = DNNL_OK(dnnl_primitive_attr_set_output_scales(attr, 1, 0,
								   &g->alpha));
		if (ok && g->has_crow)
			ok = DNNL_OK(dnnl_post_ops_create(&po)) &&
			     DNNL_OK(dnnl_post_ops_append_sum(po, 1.0f)) &&
			     DNNL_OK(dnnl_primitive_attr_set_post_ops(attr, po));
	}
	ok = ok && DNNL_OK(dnnl_primitive_desc_create(&pd, &md, attr,
						      g->engine, NULL)) &&
	     DNNL_OK(dnnl_primitive_create(&s->prim, pd)) &&
	     DNNL_OK(dnnl_memory_create(&s->a, &ad, g->engine,
					DNNL_MEMORY_NONE)) &&
	     DNNL_OK(dnnl_memory_create(&s->b, &bd, g->engine,
					DNNL_MEMORY_NONE)) &&
	     DNNL_OK(dnnl_memory_create(&s->c, &cd, g->engine,
					DNNL_MEMORY_NONE));
	if (ok && DNNL_OK(dnnl_primitive_desc_query(pd,
			dnnl_query_impl_info_str, 0, (void *)&impl)) && impl)
		snprintf(g->impl, sizeof(g->impl), "%s", impl);
	if (pd)
		dnnl_primitive_desc_destroy(pd);
	if (po)
		dnnl_post_ops_destroy(po);
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	if (!ok) {
		shape_free(s);
		return -1;
	}
	s->tq = tq;
	s->nb = nb;
	return 0;
}

static gemm_shape *shape_get(cpu_gemm *g, gemm_slot *sl, int64_t tq,
			     int64_t nb)
{
	gemm_shape *s;

	for (int i = 0; i < SHAPES; i++)
		if (sl->shape[i].prim && sl->shape[i].tq == tq &&
		    sl->shape[i].nb == nb)
			return &sl->shape[i];
	s = &sl->shape[sl->next];
	sl->next = (sl->next + 1) % SHAPES;
	shape_free(s);
	return shape_make(g, s, tq, nb) ? NULL : s;
}

/* out = crow + out (sb_j (alpha sa_r)), out the int32 sum as a float, in
 * float: alpha sa_r exact (alpha is -1 or -2), then one rounding per
 * product and one for the sum (metric.c, int8). Element-wise IEEE
 * operations in a fixed order, so the clones' vector code gives the plain
 * code's bits. */
XJ_CLONES
static void int8_scale(const float *sa, const float *restrict sb,
		       float alpha, int64_t tq, int64_t nb,
		       const float *restrict crow, float *restrict out)
{
	for (int64_t r = 0; r < tq; r++) {
		float ar = alpha * sa[r];
		float *restrict o = out + r * nb;

		if (crow)
			for (int64_t j = 0; j < nb; j++)
				o[j] = crow[j] + o[j] * (sb[j] * ar);
		else
			for (int64_t j = 0; j < nb; j++)
				o[j] = o[j] * (sb[j] * ar);
	}
}

/*
 * Run the primitive on this thread alone. Inside the backend's team
 * oneDNN does so by itself; outside (a chunk too small for a team) it
 * would start a team of its own per tile, which costs more than the tile.
 */
static int exec_serial(dnnl_primitive_t prim, dnnl_stream_t stream,
		       const dnnl_exec_arg_t *args)
{
	int threads = omp_get_max_threads(), ok;

	if (!omp_in_parallel())
		omp_set_num_threads(1);
	ok = DNNL_OK(dnnl_primitive_execute(prim, stream, 3, args)) &&
	     DNNL_OK(dnnl_stream_wait(stream));
	if (!omp_in_parallel())
		omp_set_num_threads(threads);
	return !ok;
}

static int gemm_tile(cpu_gemm *g, int thread, const float *af,
		     const cpu_gemm_rows *ar, int64_t i0, const float *bf,
		     const cpu_gemm_rows *br, int64_t j0, int64_t tq,
		     int64_t nb, const float *crow, float *out, int scale,
		     xj_status *st)
{
	gemm_slot *sl = &g->slot[thread];
	gemm_shape *s = shape_get(g, sl, tq, nb);
	size_t esz = g->p == XJ_PREC_INT8 ? 1 : g->p == XJ_PREC_BF16 ? 2 : 4;
	const char *a = g->p == XJ_PREC_FP32 ? (const char *)af :
			(const char *)ar->x;
	const char *b = g->p == XJ_PREC_FP32 ? (const char *)bf :
			(const char *)br->x;
	int int8 = g->p == XJ_PREC_INT8;
	dnnl_exec_arg_t args[3];

	if (!s)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "cpu gemm: oneDNN has no %s matmul for %lld x %lld x %lld",
			       precision_name(g->p), (long long)tq,
			       (long long)nb, (long long)g->d);
	for (int64_t r = 0; !int8 && g->has_crow && r < tq; r++)
		memcpy(out + r * nb, crow, (size_t)nb * sizeof(float));
	if (!DNNL_OK(dnnl_memory_set_data_handle_v2(s->a,
			(void *)(a + (size_t)(i0 * g->d) * esz), sl->stream)) ||
	    !DNNL_OK(dnnl_memory_set_data_handle_v2(s->b,
			(void *)(b + (size_t)(j0 * g->d) * esz), sl->stream)) ||
	    !DNNL_OK(dnnl_memory_set_data_handle_v2(s->c, out, sl->stream)))
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "cpu gemm: oneDNN refused a buffer");
	args[0] = (dnnl_exec_arg_t){ DNNL_ARG_SRC, s->a };
	args[1] = (dnnl_exec_arg_t){ DNNL_ARG_WEIGHTS, s->b };
	args[2] = (dnnl_exec_arg_t){ DNNL_ARG_DST, s->c };
	if (exec_serial(s->prim, sl->stream, args))
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "cpu gemm: oneDNN matmul failed (%s)",
			       precision_name(g->p));
	if (int8 && scale)
		int8_scale(ar->scale + i0, br->scale + j0, g->alpha, tq, nb,
			   g->has_crow ? crow : NULL, out);
	return XJ_OK;
}

int cpu_gemm_tile(cpu_gemm *g, int thread, const float *af,
		  const cpu_gemm_rows *ar, int64_t i0, const float *bf,
		  const cpu_gemm_rows *br, int64_t j0, int64_t tq, int64_t nb,
		  const float *crow, float *out, xj_status *st)
{
	return gemm_tile(g, thread, af, ar, i0, bf, br, j0, tq, nb, crow, out,
			 1, st);
}

int cpu_gemm_tile_sums(cpu_gemm *g, int thread, const cpu_gemm_rows *ar,
		       int64_t i0, const cpu_gemm_rows *br, int64_t j0,
		       int64_t tq, int64_t nb, float *out, xj_status *st)
{
	if (g->p != XJ_PREC_INT8)
		return xj_fail(st, XJ_EXIT_INTERNAL,
			       "cpu gemm: sums of a %s GEMM",
			       precision_name(g->p));
	return gemm_tile(g, thread, NULL, ar, i0, NULL, br, j0, tq, nb, NULL,
			 out, 0, st);
}

void cpu_gemm_scale(const cpu_gemm *g, const cpu_gemm_rows *ar, int64_t i0,
		    const cpu_gemm_rows *br, int64_t j0, int64_t tq,
		    int64_t nb, float *out)
{
	int8_scale(ar->scale + i0, br->scale + j0, g->alpha, tq, nb, NULL,
		   out);
}

float cpu_gemm_alpha(const cpu_gemm *g)
{
	return g->alpha;
}

#else /* no oneDNN: cpu_gemm_resolve gives fp32, the caller uses BLAS */

struct cpu_gemm {
	int unused;
};

int cpu_gemm_create(xj_precision p, int64_t d, float alpha, int has_crow,
		    int threads, cpu_gemm **out, xj_status *st)
{
	(void)p; (void)d; (void)alpha; (void)has_crow; (void)threads;
	*out = NULL;
	return xj_fail(st, XJ_EXIT_INTERNAL,
		       "cpu gemm: built without oneDNN");
}

void cpu_gemm_free(cpu_gemm *g)
{
	(void)g;
}

const char *cpu_gemm_impl(const cpu_gemm *g)
{
	(void)g;
	return "";
}

int cpu_gemm_tile(cpu_gemm *g, int thread, const float *af,
		  const cpu_gemm_rows *ar, int64_t i0, const float *bf,
		  const cpu_gemm_rows *br, int64_t j0, int64_t tq, int64_t nb,
		  const float *crow, float *out, xj_status *st)
{
	(void)g; (void)thread; (void)af; (void)ar; (void)i0; (void)bf;
	(void)br; (void)j0; (void)tq; (void)nb; (void)crow; (void)out;
	return xj_fail(st, XJ_EXIT_INTERNAL,
		       "cpu gemm: built without oneDNN");
}

int cpu_gemm_tile_sums(cpu_gemm *g, int thread, const cpu_gemm_rows *ar,
		       int64_t i0, const cpu_gemm_rows *br, int64_t j0,
		       int64_t tq, int64_t nb, float *out, xj_status *st)
{
	(void)g; (void)thread; (void)ar; (void)i0; (void)br; (void)j0;
	(void)tq; (void)nb; (void)out;
	return xj_fail(st, XJ_EXIT_INTERNAL,
		       "cpu gemm: built without oneDNN");
}

void cpu_gemm_scale(const cpu_gemm *g, const cpu_gemm_rows *ar, int64_t i0,
		    const cpu_gemm_rows *br, int64_t j0, int64_t tq,
		    int64_t nb, float *out)
{
	(void)g; (void)ar; (void)i0; (void)br; (void)j0; (void)tq; (void)nb;
	(void)out;
}

float cpu_gemm_alpha(const cpu_gemm *g)
{
	(void)g;
	return 0.0f;
}

#endif
