/*
 * test_calib.c: the cache of --precision auto's measurements
 * (app/plan/calib_cache.c): where it lives, entries written and read
 * back, every cut of a valid file and foreign, binary and tampered files
 * rejected (never read as another answer), an unwritable place reported,
 * and concurrent writers that always leave a whole file.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"
#include "app/plan/calib.h"

static char dir[256];

static void path_of(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", dir, name);
}

static calib_entry entry(const char *key, const char *choice)
{
	calib_entry e;

	memset(&e, 0, sizeof(e));
	snprintf(e.key, sizeof(e.key), "%s", key);
	snprintf(e.choice, sizeof(e.choice), "%s", choice);
	snprintf(e.times, sizeof(e.times), "fp32:2e-06/0/1.67e-09/0 bf16:0.0100 %s:0.0090",
		 choice);
	return e;
}

static void write_text(const char *path, const char *text, size_t n)
{
	FILE *f = fopen(path, "w");

	CU_ASSERT_FATAL(f != NULL);
	fwrite(text, 1, n, f);
	fclose(f);
}

static char *read_text(const char *path, size_t *n)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 65536);

	*n = f ? fread(buf, 1, 65535, f) : 0;
	if (f)
		fclose(f);
	return buf;
}

static void test_path(void)
{
	char p[512];

	setenv("XJOIN_CACHE_DIR", "/x/y", 1);
	calib_cache_path(p, sizeof(p));
	CU_ASSERT_STRING_EQUAL(p, "/x/y/precision.ini");
	unsetenv("XJOIN_CACHE_DIR");
	setenv("XDG_CACHE_HOME", "/c", 1);
	calib_cache_path(p, sizeof(p));
	CU_ASSERT_STRING_EQUAL(p, "/c/xjoin/precision.ini");
	unsetenv("XDG_CACHE_HOME");
	setenv("HOME", "/h", 1);
	calib_cache_path(p, sizeof(p));
	CU_ASSERT_STRING_EQUAL(p, "/h/.cache/xjoin/precision.ini");
	unsetenv("HOME");
	calib_cache_path(p, sizeof(p));
	CU_ASSERT_STRING_EQUAL(p, "");
}

static void test_roundtrip(void)
{
	char p[512], why[200];
	calib_entry a = entry("cpu|host|AMD EPYC|ob Haswell|l2 d128 k16 topk",
			      "int8"), b = entry("cuda|host|H100|l2 d96 k8 topk",
						 "tf32"), got;

	path_of(p, sizeof(p), "rt/sub/precision.ini");   /* folders made */
	CU_ASSERT_EQUAL(calib_cache_get(p, a.key, &got, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(calib_cache_put(p, &a, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(calib_cache_put(p, &b, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(calib_cache_get(p, a.key, &got, why, sizeof(why)), 1);
	CU_ASSERT_STRING_EQUAL(got.choice, "int8");
	CU_ASSERT_STRING_EQUAL(got.times, a.times);
	CU_ASSERT_EQUAL(calib_cache_get(p, b.key, &got, why, sizeof(why)), 1);
	CU_ASSERT_STRING_EQUAL(got.choice, "tf32");
	/* a new measurement of a replaces it; b stays */
	a = entry(a.key, "bf16");
	CU_ASSERT_EQUAL(calib_cache_put(p, &a, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(calib_cache_get(p, a.key, &got, why, sizeof(why)), 1);
	CU_ASSERT_STRING_EQUAL(got.choice, "bf16");
	CU_ASSERT_EQUAL(calib_cache_get(p, b.key, &got, why, sizeof(why)), 1);
	CU_ASSERT_EQUAL(calib_cache_get(p, "another key", &got, why,
					sizeof(why)), 0);
}

/* Every cut of a valid file is rejected, or (cut inside its last line
 * break) reads the whole answer: never another one. */
static void test_cuts(void)
{
	char p[512], q[512], why[200];
	calib_entry a = entry("cpu|h|m|l|ip d8 k1 topk", "fp32-dnnl"), got;
	size_t n, bad = 0, whole = 0;
	char *text;

	path_of(p, sizeof(p), "cut-src.ini");
	path_of(q, sizeof(q), "cut.ini");
	calib_entry k2 = entry("k2", "bf16");

	CU_ASSERT_EQUAL_FATAL(calib_cache_put(p, &k2, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL_FATAL(calib_cache_put(p, &a, why, sizeof(why)), 0);
	text = read_text(p, &n);
	for (size_t len = 0; len < n; len++) {
		int rc;

		write_text(q, text, len);
		memset(&got, 0, sizeof(got));
		rc = calib_cache_get(q, a.key, &got, why, sizeof(why));
		if (rc == 1 && !strcmp(got.choice, a.choice) &&
		    !strcmp(got.times, a.times) && len + 1 >= n)
			whole++;
		else if (rc != -1)
			bad++;
	}
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(whole, 1);
	free(text);
}

static void test_foreign(void)
{
	static const char *const files[] = {
		"[job]\nk = 10\nmetric = l2\n",
		"format = 2\n",
		"[xjoin-precision]\nformat = 1\n[end]\nentries = 0\n",	/* older */
		"[xjoin-precision]\nformat = 2\n[measured]\n"
		"0123456789abcdef = bf16 fp32:0.1 bf16:0.05\n"
		"0123456789abcdef.key = not this key\n[end]\nentries = 1\n",
		"[xjoin-precision]\nformat = 2\n[measured]\n"
		"0123456789abcdef = int8 fp32:0.1 bf16:0.05\n[end]\n"
		"entries = 1\n",
		"[xjoin-precision]\nformat = 2\n[measured]\n"
		"0123456789abcdef = bf16 fp32:-1 bf16:0.05\n[end]\n"
		"entries = 1\n",
		"[xjoin-precision]\nformat = 2\n[measured]\n"
		"0123456789abcdef = bf16 bf16:1/2/3/4/5\n[end]\n"
		"entries = 1\n",
		"[xjoin-precision]\nformat = 2\n[end]\nentries = 3\n",
		"\x7f" "ELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00",
	};
	char p[512], why[200];
	calib_entry got;

	path_of(p, sizeof(p), "foreign.ini");
	for (size_t i = 0; i < UNIT_COUNT(files); i++) {
		write_text(p, files[i], strlen(files[i]));
		why[0] = 0;
		CU_ASSERT_EQUAL(calib_cache_get(p, "k", &got, why, sizeof(why)),
				-1);
		CU_ASSERT(why[0] != 0);
	}
	/* a put over a foreign file writes a valid one */
	got = entry("k", "bf16");
	CU_ASSERT_EQUAL(calib_cache_put(p, &got, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(calib_cache_get(p, "k", &got, why, sizeof(why)), 1);
}

static void test_unwritable(void)
{
	char p[600], f[512], why[200] = "";
	calib_entry a = entry("k", "bf16");

	path_of(f, sizeof(f), "a-file");
	write_text(f, "x", 1);
	snprintf(p, sizeof(p), "%s/precision.ini", f);   /* under a file */
	CU_ASSERT_EQUAL(calib_cache_put(p, &a, why, sizeof(why)), -1);
	CU_ASSERT(why[0] != 0);
}

/* Four processes each write 40 keys while this one reads: every read
 * sees a whole cache, and (the writers taking turns on a local file
 * system) every writer's last key is there at the end. */
static void test_concurrent(void)
{
	char p[512], why[200];
	pid_t kids[4];
	int reads = 0, invalid = 0, found = 0;
	calib_entry got;

	path_of(p, sizeof(p), "conc.ini");
	for (int w = 0; w < 4; w++) {
		kids[w] = fork();
		CU_ASSERT_FATAL(kids[w] >= 0);
		if (kids[w] == 0) {
			for (int i = 0; i < 40; i++) {
				char key[64];
				calib_entry e;

				snprintf(key, sizeof(key), "writer %d key %d", w,
					 i);
				e = entry(key, "bf16");
				if (calib_cache_put(p, &e, why, sizeof(why)))
					_exit(1);
			}
			_exit(0);
		}
	}
	for (int alive = 4; alive > 0;) {
		int status;

		reads++;
		if (calib_cache_get(p, "writer 0 key 0", &got, why,
				    sizeof(why)) < 0)
			invalid++;
		while (alive > 0 && waitpid(-1, &status, WNOHANG) > 0) {
			CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
			alive--;
		}
	}
	CU_ASSERT_EQUAL(invalid, 0);
	for (int w = 0; w < 4; w++) {
		char key[64];

		snprintf(key, sizeof(key), "writer %d key 39", w);
		found += calib_cache_get(p, key, &got, why, sizeof(why)) == 1;
	}
	CU_ASSERT(found == 4);
	printf("\n  %d reads, %d writers' last keys kept ", reads, found);
}

static const unit_test tests[] = {
	{ "where the cache lives", test_path },
	{ "entries written and read back", test_roundtrip },
	{ "every cut of a file rejected", test_cuts },
	{ "foreign and tampered files rejected", test_foreign },
	{ "an unwritable place reported", test_unwritable },
	{ "concurrent writers leave whole files", test_concurrent },
};

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/xjoin-test-calib-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	int rc = unit_run("calib", tests, UNIT_COUNT(tests));
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		return 1;
	return rc;
}
