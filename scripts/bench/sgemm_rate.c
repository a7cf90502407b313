/*
 * sgemm_rate.c: the machine's measured single-precision GEMM rate, the
 * ceiling that xjoin's compute phase is judged against.
 *
 * Times C = A * B^T with cblas_sgemm, row-major, A: M x K (query rows),
 * B: N x K (base rows), C: M x N (scores). That is the shape of the score
 * GEMM of a cross-join, so K is the vector dimension and the rate is the one
 * reachable at that inner dimension (small K means low arithmetic intensity:
 * each C element costs 2K FLOPs but is written once, 4 bytes).
 *
 * FLOPs per call: 2 * M * N * K. Bytes touched at least once:
 * 4 * (M*K + N*K + M*N).
 *
 * Usage: sgemm_rate M N K [REPS] [--double] [--json]
 *   (threads: OPENBLAS_NUM_THREADS)
 * Prints one line: "sgemm M N K best_s gflops" and the same as JSON when
 * the last argument is --json. --double times cblas_dgemm instead (the
 * matrix's double GEMM, kernels/cpu/cpu_matrix.c) and prints "dgemm ...".
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int parse_pos(const char *text, const char *what, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(text, &end, 10);
	if (errno || *end || *out <= 0) {
		fprintf(stderr, "sgemm_rate: %s must be a positive integer, got '%s'\n",
			what, text);
		return -1;
	}
	return 0;
}

/* Values in [-1, 1) from a fixed LCG: non-zero, no denormals, reproducible. */
static void fill(float *x, size_t count, unsigned seed)
{
	unsigned s = seed;
	size_t i;

	for (i = 0; i < count; i++) {
		s = s * 1664525u + 1013904223u;
		x[i] = (float)(s >> 8) / (float)(1u << 23) - 1.0f;
	}
}

/* One call; a, b, c hold doubles when dbl. */
static double time_one(long m, long n, long k, const void *a, const void *b,
		       void *c, int dbl)
{
	double t0 = now_s();

	if (dbl)
		cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m,
			    (int)n, (int)k, 1.0, a, (int)k, b, (int)k, 0.0, c,
			    (int)n);
	else
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m,
			    (int)n, (int)k, 1.0f, a, (int)k, b, (int)k, 0.0f, c,
			    (int)n);
	return now_s() - t0;
}

/* The floats x[0..count) widened to doubles in place (x holds room for
 * count doubles), from the top down. */
static void widen(void *x, size_t count)
{
	const float *f = x;
	double *d = x;

	while (count--)
		d[count] = f[count];
}

int main(int argc, char **argv)
{
	long m, n, k, reps = 5, r;
	int json = 0, dbl = 0;
	size_t es;
	float *a, *b, *c;
	double best = 1e30, gflops;

	if (argc > 1 && !strcmp(argv[argc - 1], "--json")) {
		json = 1;
		argc--;
	}
	if (argc > 1 && !strcmp(argv[argc - 1], "--double")) {
		dbl = 1;
		argc--;
	}
	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: sgemm_rate M N K [REPS] [--double] "
			"[--json]\n");
		return 2;
	}
	if (parse_pos(argv[1], "M", &m) || parse_pos(argv[2], "N", &n) ||
	    parse_pos(argv[3], "K", &k) ||
	    (argc == 5 && parse_pos(argv[4], "REPS", &reps)))
		return 2;

	es = dbl ? sizeof(double) : sizeof(float);
	a = malloc(es * (size_t)m * (size_t)k);
	b = malloc(es * (size_t)n * (size_t)k);
	c = malloc(es * (size_t)m * (size_t)n);
	if (!a || !b || !c) {
		fprintf(stderr, "sgemm_rate: out of memory for %ld x %ld x %ld\n",
			m, n, k);
		return 1;
	}
	fill(a, (size_t)m * (size_t)k, 1u);
	fill(b, (size_t)n * (size_t)k, 2u);
	if (dbl) {
		widen(a, (size_t)m * (size_t)k);
		widen(b, (size_t)n * (size_t)k);
	}

	/* The first call pays for thread start-up and page faults on C. */
	time_one(m, n, k, a, b, c, dbl);
	for (r = 0; r < reps; r++) {
		double t = time_one(m, n, k, a, b, c, dbl);

		if (t < best)
			best = t;
	}
	gflops = 2.0 * (double)m * (double)n * (double)k / best * 1e-9;
	if (json)
		printf("{\"m\": %ld, \"n\": %ld, \"k\": %ld, \"reps\": %ld, "
		       "\"best_s\": %.6f, \"gflops\": %.2f}\n",
		       m, n, k, reps, best, gflops);
	else
		printf("%s %ld %ld %ld %.6f %.2f\n", dbl ? "dgemm" : "sgemm", m,
		       n, k, best, gflops);
	free(a);
	free(b);
	free(c);
	return 0;
}
