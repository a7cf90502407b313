/*
 * test_config.c: INI job files: what reaches the setter, the FILE:LINE of
 * every kind of error, stopping at the first one, and the example files
 * in config/examples/, which must load as the jobs they describe.
 *
 * The examples are found under XJ_SOURCE_DIR (a compile definition) or
 * under the directory given as argv[1].
 */
#define _POSIX_C_SOURCE 200809L

#include <CUnit/Basic.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/job.h"
#include "app/cli/options.h"
#include "config/config.h"

#ifndef XJ_SOURCE_DIR
#define XJ_SOURCE_DIR "."
#endif

#define MAX_KEYS 32

static char tmpdir[] = "/tmp/xj_test_config_XXXXXX";
static const char *source_dir = XJ_SOURCE_DIR;

/* Everything the setter was called with, in order. */
struct record {
	int count;
	char key[MAX_KEYS][64];
	char value[MAX_KEYS][256];
};

/* Records the pair; the key "bad" fails like a bad value would. */
static int record_set(void *ctx, const char *key, const char *value,
		      xj_status *st)
{
	struct record *r = ctx;

	if (r->count < MAX_KEYS) {
		snprintf(r->key[r->count], sizeof(r->key[0]), "%s", key);
		snprintf(r->value[r->count], sizeof(r->value[0]), "%s", value);
		r->count++;
	}
	if (strcmp(key, "bad") == 0)
		return xj_fail(st, XJ_EXIT_USAGE, "bad: '%s' rejected", value);
	return XJ_OK;
}

static const char *write_file(const char *name, const char *text)
{
	static char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
	return path;
}

/* Loads text as a file named name into r, from a poisoned state. */
static int load(const char *name, const char *text, struct record *r,
		xj_status *st)
{
	const char *path = write_file(name, text);

	memset(r, 0x5A, sizeof(*r));
	r->count = 0;
	st->code = 12345;
	snprintf(st->msg, sizeof(st->msg), "poison");
	return config_load(path, record_set, r, st);
}

static int contains(const char *hay, const char *needle)
{
	return strstr(hay, needle) != NULL;
}

/* The message starts with "TMPDIR/name:line: ". */
static void expect_at(const xj_status *st, const char *name, int line)
{
	char head[600];

	snprintf(head, sizeof(head), "%s/%s:%d: ", tmpdir, name, line);
	CU_ASSERT_EQUAL(st->code, XJ_EXIT_USAGE);
	CU_ASSERT_TRUE(strncmp(st->msg, head, strlen(head)) == 0);
	if (strncmp(st->msg, head, strlen(head)) != 0)
		printf("\n  wanted '%s...', got '%s'\n", head, st->msg);
}

static void test_keys_in_order(void)
{
	struct record r;
	xj_status st;
	int rc;

	rc = load("keys.ini",
		  "; comment\n"
		  "# another comment\n"
		  "\n"
		  "top = 1\n"
		  "[job]\n"
		  "  spaced   =   a value with spaces   \n"
		  "inline = 42 ; the rest is a comment\n"
		  "colon: yes\n"
		  "path = dir/file.h5:/train\n",
		  &r, &st);
	CU_ASSERT_EQUAL(rc, XJ_OK);
	CU_ASSERT_EQUAL(st.code, XJ_OK);
	CU_ASSERT_STRING_EQUAL(st.msg, "");
	CU_ASSERT_EQUAL_FATAL(r.count, 5);
	CU_ASSERT_STRING_EQUAL(r.key[0], "top");
	CU_ASSERT_STRING_EQUAL(r.value[0], "1");
	CU_ASSERT_STRING_EQUAL(r.key[1], "spaced");
	CU_ASSERT_STRING_EQUAL(r.value[1], "a value with spaces");
	CU_ASSERT_STRING_EQUAL(r.key[2], "inline");
	CU_ASSERT_STRING_EQUAL(r.value[2], "42");
	CU_ASSERT_STRING_EQUAL(r.key[3], "colon");
	CU_ASSERT_STRING_EQUAL(r.value[3], "yes");
	CU_ASSERT_STRING_EQUAL(r.key[4], "path");
	CU_ASSERT_STRING_EQUAL(r.value[4], "dir/file.h5:/train");
}

static void test_line_endings(void)
{
	struct record r;
	xj_status st;

	CU_ASSERT_EQUAL(load("crlf.ini", "a = 1\r\nb = 2\r\n", &r, &st), XJ_OK);
	CU_ASSERT_EQUAL_FATAL(r.count, 2);
	CU_ASSERT_STRING_EQUAL(r.value[0], "1");
	CU_ASSERT_STRING_EQUAL(r.value[1], "2");

	CU_ASSERT_EQUAL(load("noeol.ini", "a = 1\nb = last", &r, &st), XJ_OK);
	CU_ASSERT_EQUAL_FATAL(r.count, 2);
	CU_ASSERT_STRING_EQUAL(r.value[1], "last");

	CU_ASSERT_EQUAL(load("empty.ini", "", &r, &st), XJ_OK);
	CU_ASSERT_EQUAL(r.count, 0);
	CU_ASSERT_EQUAL(st.code, XJ_OK);
}

/* The setter's message gets the file and line; nothing after it is read. */
static void test_setter_error(void)
{
	struct record r;
	xj_status st;
	int rc;

	rc = load("setter.ini",
		  "; c\n"
		  "\n"
		  "# c\n"
		  "a = 1\n"
		  "bad = 2\n"
		  "c = 3\n",
		  &r, &st);
	CU_ASSERT_EQUAL(rc, XJ_EXIT_USAGE);
	expect_at(&st, "setter.ini", 5);
	CU_ASSERT_TRUE(contains(st.msg, "bad: '2' rejected"));
	CU_ASSERT_EQUAL(r.count, 2);   /* a and bad; c never reached */
}

static void test_unknown_section(void)
{
	struct record r;
	xj_status st;
	int rc;

	rc = load("section.ini",
		  "a = 1\n"
		  "[job]\n"
		  "b = 2\n"
		  "[jobs]\n"
		  "c = 3\n"
		  "d = 4\n",
		  &r, &st);
	CU_ASSERT_EQUAL(rc, XJ_EXIT_USAGE);
	expect_at(&st, "section.ini", 5);
	CU_ASSERT_TRUE(contains(st.msg, "[jobs]"));
	CU_ASSERT_EQUAL(r.count, 2);
}

static void test_syntax_error(void)
{
	struct record r;
	xj_status st;

	CU_ASSERT_EQUAL(load("syntax.ini", "a = 1\njust words\nb = 2\n", &r,
			     &st), XJ_EXIT_USAGE);
	expect_at(&st, "syntax.ini", 2);

	CU_ASSERT_EQUAL(load("section-syntax.ini", "a = 1\n[job\nb = 2\n", &r,
			     &st), XJ_EXIT_USAGE);
	expect_at(&st, "section-syntax.ini", 2);

	/* a syntax error before a setter error is the first error */
	CU_ASSERT_EQUAL(load("both.ini", "words\nbad = 1\n", &r, &st),
			XJ_EXIT_USAGE);
	expect_at(&st, "both.ini", 1);
	CU_ASSERT_FALSE(contains(st.msg, "rejected"));

	/* and a setter error before a syntax error is */
	CU_ASSERT_EQUAL(load("both2.ini", "bad = 1\nwords\n", &r, &st),
			XJ_EXIT_USAGE);
	expect_at(&st, "both2.ini", 1);
	CU_ASSERT_TRUE(contains(st.msg, "rejected"));
}

/* libinih would cut a long line in two; the loader refuses it instead. */
static void test_long_line(void)
{
	static char text[1200];
	struct record r;
	xj_status st;
	int n;

	n = snprintf(text, sizeof(text), "a = 1\npath = ");
	memset(text + n, 'x', 600);
	snprintf(text + n + 600, sizeof(text) - (size_t)n - 600, "\nb = 2\n");
	CU_ASSERT_EQUAL(load("long.ini", text, &r, &st), XJ_EXIT_USAGE);
	expect_at(&st, "long.ini", 2);
	CU_ASSERT_TRUE(contains(st.msg, "longer than"));
	CU_ASSERT_EQUAL(r.count, 1);

	/* a line just short of the limit still loads whole */
	n = snprintf(text, sizeof(text), "path = ");
	memset(text + n, 'y', 150);
	snprintf(text + n + 150, sizeof(text) - (size_t)n - 150, "\n");
	CU_ASSERT_EQUAL(load("long-ok.ini", text, &r, &st), XJ_OK);
	CU_ASSERT_EQUAL_FATAL(r.count, 1);
	CU_ASSERT_EQUAL(strlen(r.value[0]), 150);
}

/* A NUL byte would cut its line short for libinih: a binary file is
 * named as such, at the line of its first NUL, not as overlong lines. */
static void test_nul_byte(void)
{
	static const char text[] = "a = 1\nk = 3\0junk\nb = 2\n";
	char path[600];
	struct record r;
	xj_status st;
	FILE *f;

	snprintf(path, sizeof(path), "%s/nul.ini", tmpdir);
	f = fopen(path, "wb");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(fwrite(text, 1, sizeof(text) - 1, f),
			sizeof(text) - 1);
	fclose(f);
	memset(&r, 0x5A, sizeof(r));
	r.count = 0;
	st.code = 12345;
	CU_ASSERT_EQUAL(config_load(path, record_set, &r, &st),
			XJ_EXIT_USAGE);
	expect_at(&st, "nul.ini", 2);
	CU_ASSERT_TRUE(contains(st.msg, "NUL byte"));
	CU_ASSERT_EQUAL(r.count, 1);
}

static void test_unreadable(void)
{
	char path[600];
	struct record r = { 0 };
	xj_status st;

	snprintf(path, sizeof(path), "%s/does-not-exist.ini", tmpdir);
	st.code = 12345;
	CU_ASSERT_EQUAL(config_load(path, record_set, &r, &st), XJ_EXIT_USAGE);
	CU_ASSERT_TRUE(contains(st.msg, "cannot read job file"));
	CU_ASSERT_TRUE(contains(st.msg, path));
	CU_ASSERT_TRUE(contains(st.msg, strerror(ENOENT)));

	st.code = 12345;
	CU_ASSERT_EQUAL(config_load(tmpdir, record_set, &r, &st),
			XJ_EXIT_USAGE);
	CU_ASSERT_TRUE(contains(st.msg, "cannot read job file"));
	CU_ASSERT_TRUE(contains(st.msg, strerror(EISDIR)));
	CU_ASSERT_EQUAL(r.count, 0);
}

/* "topk-glove.ini" -> "topk": the command an example is written for. */
static void example_command(const char *file, char *cmd, size_t size)
{
	size_t len = strcspn(file, "-.");

	snprintf(cmd, size, "%.*s", (int)len, file);
}

/* Loads path as `xjoin CMD -c PATH`: it must pass job_check. */
static void check_job_file(const char *cmd, const char *path)
{
	char *argv[] = { "xjoin", (char *)cmd, "-c", (char *)path, NULL };
	static xj_job job;
	xj_status st;
	int action = -1;
	FILE *out = fopen("/dev/null", "w");

	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	memset(&job, 0xA5, sizeof(job));
	CU_ASSERT_EQUAL(options_parse(4, argv, &job, &action, out, &st), XJ_OK);
	CU_ASSERT_EQUAL(action, OPTIONS_RUN);
	CU_ASSERT_STRING_EQUAL(job.config, path);
	if (st.code != XJ_OK)
		printf("\n  %s: %s\n", path, st.msg);
	fclose(out);
}

/* The example with its commented-out settings ("; key = value") made
 * live, written to tmpdir: the settings it documents must be valid too. */
static int uncomment_example(const char *path, const char *file, char *out,
			     size_t size)
{
	char line[512];
	FILE *in, *w;
	int n = 0;

	snprintf(out, size, "%s/live-%s", tmpdir, file);
	in = fopen(path, "r");
	w = fopen(out, "w");
	CU_ASSERT_FATAL(in && w);
	while (fgets(line, sizeof(line), in)) {
		const char *key = line + 2;
		int live = strncmp(line, "; ", 2) == 0 &&
			   key[strspn(key, "abcdefghijklmnopqrstuvwxyz-")] ==
			   ' ' && strchr(key, '=');

		fputs(live ? key : line, w);
		n += live;
	}
	fclose(in);
	fclose(w);
	return n;
}

static void check_example(const char *dir, const char *file)
{
	char path[1024], live[1024], cmd[64];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	example_command(file, cmd, sizeof(cmd));
	check_job_file(cmd, path);
	if (uncomment_example(path, file, live, sizeof(live)) > 0)
		check_job_file(cmd, live);
}

static int is_ini(const char *name)
{
	size_t len = strlen(name);

	return len > 4 && strcmp(name + len - 4, ".ini") == 0;
}

static void test_examples(void)
{
	static const char *const needed[] = {
		"topk-glove.ini", "matrix.ini", "gen.ini",
	};
	char dir[600];
	struct dirent *e;
	DIR *d;
	int found = 0, seen[3] = { 0 };
	size_t i;

	snprintf(dir, sizeof(dir), "%s/config/examples", source_dir);
	d = opendir(dir);
	CU_ASSERT_PTR_NOT_NULL(d);
	if (!d) {
		printf("\n  cannot open %s: %s\n", dir, strerror(errno));
		return;
	}
	while ((e = readdir(d)) != NULL) {
		if (!is_ini(e->d_name))
			continue;
		check_example(dir, e->d_name);
		for (i = 0; i < 3; i++)
			seen[i] |= strcmp(e->d_name, needed[i]) == 0;
		found++;
	}
	closedir(d);
	CU_ASSERT_TRUE(found >= 3);
	for (i = 0; i < 3; i++)
		CU_ASSERT_TRUE(seen[i]);
}

static void remove_tmpdir(void)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		CU_TestFunc fn;
	} tests[] = {
		{ "keys reach the setter in order", test_keys_in_order },
		{ "line endings, empty file", test_line_endings },
		{ "setter error has file:line", test_setter_error },
		{ "unknown section", test_unknown_section },
		{ "syntax errors", test_syntax_error },
		{ "long lines", test_long_line },
		{ "NUL byte", test_nul_byte },
		{ "missing or unreadable file", test_unreadable },
		{ "config/examples load and check", test_examples },
	};
	CU_pSuite suite;
	size_t i;
	int failures;

	if (argc > 1)
		source_dir = argv[1];
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	suite = CU_add_suite("config", NULL, NULL);
	if (!suite)
		goto fail;
	for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
		if (!CU_add_test(suite, tests[i].name, tests[i].fn))
			goto fail;
	CU_basic_set_mode(CU_BRM_VERBOSE);
	if (CU_basic_run_tests() != CUE_SUCCESS)
		goto fail;
	failures = (int)CU_get_number_of_failures();
	CU_cleanup_registry();
	remove_tmpdir();
	return failures ? 1 : 0;
fail:
	fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
	CU_cleanup_registry();
	remove_tmpdir();
	return 1;
}
