/* gen.c: deterministic synthetic datasets (see gen.h). */
#include "gen.h"

#include <math.h>
#include <stdlib.h>

#include "../../io/h5out.h"
#include "plan.h"
#include "version.h"

#define SLAB_VALUES (INT64_C(1) << 21)

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t hash4(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
	return mix(mix(mix(mix(seed) ^ a) ^ b) ^ c);
}

/* Uniform in (0, 1]. */
static double unit(uint64_t h)
{
	return ((h >> 11) + 1) * (1.0 / 9007199254740992.0);
}

static double gauss(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
	double u1 = unit(hash4(seed, a, b, c));
	double u2 = unit(hash4(seed ^ 0x5bd1e995ULL, a, b, c));

	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

float gen_value(const xj_job *job, int stream, int64_t row, int64_t col)
{
	uint64_t cl;

	if (job->gen_clusters <= 0)
		return (float)gauss(job->seed, (uint64_t)stream, (uint64_t)row,
				    (uint64_t)col);
	cl = hash4(job->seed, 7, (uint64_t)stream, (uint64_t)row) %
	     (uint64_t)job->gen_clusters;
	return (float)(gauss(job->seed, 9, cl, (uint64_t)col) +
		       0.25 * gauss(job->seed, (uint64_t)stream, (uint64_t)row,
				    (uint64_t)col));
}

static int gen_dataset(const xj_job *job, xj_comm *c, h5out *out,
		       const char *name, int stream, int64_t rows, float *buf,
		       xj_status *st)
{
	int64_t d = job->gen_dim, slab = SLAB_VALUES / d, r0, nr, rounds, mx;
	int slot;

	if (slab < 1)
		slab = 1;
	if (h5out_add_dataset(out, name, H5OUT_F32, rows, d, 0, &slot, st))
		return st->code;
	split_block(rows, c->nranks, c->rank, &r0, &nr);
	mx = (rows + c->nranks - 1) / c->nranks;
	rounds = (mx + slab - 1) / slab;
	for (int64_t k = 0; k < rounds; k++) {
		int64_t s0 = r0 + k * slab;
		int64_t sn = k * slab >= nr ? 0 :
			     (nr - k * slab < slab ? nr - k * slab : slab);

		#pragma omp parallel for schedule(static)
		for (int64_t i = 0; i < sn; i++)
			for (int64_t j = 0; j < d; j++)
				buf[i * d + j] = gen_value(job, stream, s0 + i,
							   j);
		if (h5out_write(out, slot, s0, sn, 0, d, buf, st))
			return st->code;
	}
	return XJ_OK;
}

int gen_run(const xj_job *job, xj_comm *c, xj_status *st)
{
	int64_t d = job->gen_dim, slab = SLAB_VALUES / d;
	float *buf = malloc((size_t)((slab < 1 ? 1 : slab) * d) *
			    sizeof(float));
	h5out *out = NULL;

	if (!buf)
		xj_fail(st, XJ_EXIT_RESOURCE, "out of memory (gen)");
	if (comm_agree(c, st))
		goto fail;
	if (h5out_create(c->world, job->output, job->force, &out, st))
		goto fail;
	if (gen_dataset(job, c, out, "train", 0, job->gen_rows, buf, st))
		goto fail;
	if (job->gen_queries > 0 &&
	    gen_dataset(job, c, out, "test", 1, job->gen_queries, buf, st))
		goto fail;
	if (h5out_attr_i64(out, "schema_version", XJOIN_SCHEMA_VERSION, st) ||
	    h5out_attr_str(out, "xjoin_version", XJOIN_VERSION, st) ||
	    h5out_attr_str(out, "generator", job->gen_clusters > 0 ?
			   "gaussian-clusters" : "gaussian", st) ||
	    h5out_attr_i64(out, "seed", (int64_t)job->seed, st) ||
	    h5out_attr_i64(out, "clusters", job->gen_clusters, st))
		goto fail;
	free(buf);
	return h5out_finish(out, st);
fail:
	h5out_abort(out);
	free(buf);
	return st->code;
}
