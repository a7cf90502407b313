/*
 * test_options.c: the command line, job files through it, job_check,
 * --help and --version, job_print and the metric names.
 *
 * Every call starts from a poisoned job and status, so a field the code
 * under test forgot to set shows up as garbage, never as a lucky zero.
 */
#define _POSIX_C_SOURCE 200809L

#include <CUnit/Basic.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/job.h"
#include "app/cli/options.h"
#include "version.h"

#define MAX_ARGS 64
#define TOPK_BASE "topk -q q.h5 -b b.h5 -o o.h5 -k 3"
#define OUT_MAX 16384

static char tmpdir[] = "/tmp/xj_test_options_XXXXXX";

/* The outcome of one options_parse() call. */
struct parsed {
	int rc;
	int action;
	xj_job job;
	xj_status st;
	char out[OUT_MAX];   /* what it printed to out */
};

static struct parsed P;   /* big: kept off the stack */

static void poison(void)
{
	memset(&P, 0xA5, sizeof(P));
	P.st.code = 12345;
	snprintf(P.st.msg, sizeof(P.st.msg), "poison");
	P.action = -1;
}

/* Runs `xjoin LINE` (words split on single spaces; no quoting needed). */
static int parse(const char *line)
{
	static char words[4096];
	char *argv[MAX_ARGS + 1];
	char *buf = NULL, *tok, *save = NULL;
	size_t len = 0;
	int argc = 0;
	FILE *out;

	poison();
	snprintf(words, sizeof(words), "%s", line);
	argv[argc++] = "xjoin";
	for (tok = strtok_r(words, " ", &save); tok && argc < MAX_ARGS;
	     tok = strtok_r(NULL, " ", &save))
		argv[argc++] = tok;
	argv[argc] = NULL;
	out = open_memstream(&buf, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	P.rc = options_parse(argc, argv, &P.job, &P.action, out, &P.st);
	fclose(out);
	snprintf(P.out, sizeof(P.out), "%s", buf ? buf : "");
	free(buf);
	return P.rc;
}

/* Expects a usage error whose message names needle and points to --help. */
static void expect_usage(const char *line, const char *needle)
{
	parse(line);
	CU_ASSERT_EQUAL(P.rc, XJ_EXIT_USAGE);
	CU_ASSERT_EQUAL(P.st.code, XJ_EXIT_USAGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(P.st.msg, needle));
	CU_ASSERT_PTR_NOT_NULL(strstr(P.st.msg, "--help)"));
	if (P.rc != XJ_EXIT_USAGE || !strstr(P.st.msg, needle))
		printf("\n  xjoin %s\n  -> rc %d, \"%s\" (wanted \"%s\")\n",
		       line, P.rc, P.st.msg, needle);
}

static void expect_ok(const char *line)
{
	parse(line);
	CU_ASSERT_EQUAL(P.rc, XJ_OK);
	CU_ASSERT_EQUAL(P.st.code, XJ_OK);
	CU_ASSERT_EQUAL(P.action, OPTIONS_RUN);
	if (P.rc != XJ_OK)
		printf("\n  xjoin %s\n  -> rc %d, \"%s\"\n", line, P.rc,
		       P.st.msg);
}

/* Writes text to tmpdir/name; returns the path (static buffer). */
static const char *write_file(const char *name, const char *text)
{
	static char path[4][512];
	static int next;
	char *p = path[next++ % 4];
	FILE *f;

	snprintf(p, 512, "%s/%s", tmpdir, name);
	f = fopen(p, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
	return p;
}

static int contains(const char *hay, const char *needle)
{
	return strstr(hay, needle) != NULL;
}

/* --- defaults and setting every option --- */

static void test_defaults(void)
{
	xj_job job;

	memset(&job, 0xA5, sizeof(job));
	job_defaults(&job);
	CU_ASSERT_EQUAL(job.command, XJ_CMD_NONE);
	CU_ASSERT_EQUAL(job.plan_of, XJ_CMD_NONE);
	CU_ASSERT_STRING_EQUAL(job.query_file, "");
	CU_ASSERT_STRING_EQUAL(job.query_dset, "");
	CU_ASSERT_STRING_EQUAL(job.base_file, "");
	CU_ASSERT_STRING_EQUAL(job.base_dset, "");
	CU_ASSERT_STRING_EQUAL(job.output, "");
	CU_ASSERT_STRING_EQUAL(job.config, "");
	CU_ASSERT_STRING_EQUAL(job.report_json, "");
	CU_ASSERT_EQUAL(job.metric, XJ_METRIC_L2);
	CU_ASSERT_EQUAL(job.k, 0);
	CU_ASSERT_EQUAL(job.has_threshold, 0);
	CU_ASSERT_EQUAL(job.threshold, 0.0);
	CU_ASSERT_EQUAL(job.self, 0);
	CU_ASSERT_EQUAL(job.force, 0);
	CU_ASSERT_EQUAL(job.mem_limit_bytes, 0);
	CU_ASSERT_EQUAL(job.mem_fraction, 0.8);
	CU_ASSERT_EQUAL(job.chunk_rows, 0);
	CU_ASSERT_EQUAL(job.threads, 0);
	CU_ASSERT_EQUAL(job.progress, 1);
	CU_ASSERT_EQUAL(job.device, XJ_DEVICE_AUTO);
	CU_ASSERT_EQUAL(job.gpu_mem_fraction, 0.8);
	CU_ASSERT_EQUAL(job.gpu_share, 0);
	CU_ASSERT_EQUAL(job.gen_rows, 0);
	CU_ASSERT_EQUAL(job.gen_dim, 0);
	CU_ASSERT_EQUAL(job.gen_queries, 0);
	CU_ASSERT_EQUAL(job.gen_clusters, 0);
	CU_ASSERT_EQUAL(job.seed, 2026);
	CU_ASSERT_EQUAL(job.n, 0);
	CU_ASSERT_EQUAL(job.m, 0);
	CU_ASSERT_EQUAL(job.d, 0);
}

static void check_topk_everything(const xj_job *j)
{
	CU_ASSERT_EQUAL(j->command, XJ_CMD_TOPK);
	CU_ASSERT_STRING_EQUAL(j->query_file, "q.h5:/test");
	CU_ASSERT_STRING_EQUAL(j->query_dset, "");
	CU_ASSERT_STRING_EQUAL(j->base_file, "b.h5");
	CU_ASSERT_STRING_EQUAL(j->base_dset, "");
	CU_ASSERT_EQUAL(j->k, 7);
	CU_ASSERT_EQUAL(j->metric, XJ_METRIC_COSINE);
	CU_ASSERT_EQUAL(j->has_threshold, 1);
	CU_ASSERT_EQUAL(j->threshold, 0.25);
	CU_ASSERT_EQUAL(j->self, 1);
	CU_ASSERT_STRING_EQUAL(j->output, "out.h5");
	CU_ASSERT_EQUAL(j->force, 1);
	CU_ASSERT_EQUAL(j->mem_limit_bytes, (int64_t)2 << 30);
	CU_ASSERT_EQUAL(j->mem_fraction, 0.5);
	CU_ASSERT_EQUAL(j->chunk_rows, 64);
	CU_ASSERT_EQUAL(j->threads, 3);
	CU_ASSERT_EQUAL(j->progress, 0);
	CU_ASSERT_STRING_EQUAL(j->report_json, "rep.json");
	CU_ASSERT_EQUAL(j->seed, 2026);
	CU_ASSERT_EQUAL(j->gen_rows, 0);
	CU_ASSERT_EQUAL(j->n, 0);
}

static void test_cli_topk_short(void)
{
	expect_ok("topk -q q.h5:/test -b b.h5 -k 7 -m cosine -t 0.25 --self "
		  "-o out.h5 --force --mem-limit 2G --mem-fraction 0.5 "
		  "--chunk-rows 64 --threads 3 --quiet --report-json rep.json");
	check_topk_everything(&P.job);
	CU_ASSERT_STRING_EQUAL(P.job.config, "");
	CU_ASSERT_STRING_EQUAL(P.out, "");
}

static void test_cli_topk_long(void)
{
	expect_ok("topk --query q.h5:/test --base=b.h5 --k=7 --metric cosine "
		  "--threshold=0.25 --self --output out.h5 --force "
		  "--mem-limit=2147483648 --mem-fraction=0.5 --chunk-rows=64 "
		  "--threads=3 --quiet --report-json=rep.json");
	check_topk_everything(&P.job);
	/* getopt_long takes a unique start of a long name */
	expect_ok(TOPK_BASE " --thresh 0.5 --mem-f 0.25");
	CU_ASSERT_EQUAL(P.job.threshold, 0.5);
	CU_ASSERT_EQUAL(P.job.mem_fraction, 0.25);
}

static void test_cli_matrix(void)
{
	expect_ok("matrix -q a.h5 -b b.h5:/x -m ip -o m.h5 --mem-limit 512M");
	CU_ASSERT_EQUAL(P.job.command, XJ_CMD_MATRIX);
	CU_ASSERT_EQUAL(P.job.metric, XJ_METRIC_IP);
	CU_ASSERT_STRING_EQUAL(P.job.base_file, "b.h5:/x");
	CU_ASSERT_EQUAL(P.job.mem_limit_bytes, (int64_t)512 << 20);
	CU_ASSERT_EQUAL(P.job.k, 0);
	CU_ASSERT_EQUAL(P.job.has_threshold, 0);
	CU_ASSERT_EQUAL(P.job.progress, 1);
}

static void test_cli_gen(void)
{
	expect_ok("gen --rows 1000 --dim 16 --queries 10 --seed 99 "
		  "--clusters 4 -o g.h5 --force --threads 2 --quiet");
	CU_ASSERT_EQUAL(P.job.command, XJ_CMD_GEN);
	CU_ASSERT_EQUAL(P.job.gen_rows, 1000);
	CU_ASSERT_EQUAL(P.job.gen_dim, 16);
	CU_ASSERT_EQUAL(P.job.gen_queries, 10);
	CU_ASSERT_EQUAL(P.job.seed, 99);
	CU_ASSERT_EQUAL(P.job.gen_clusters, 4);
	CU_ASSERT_STRING_EQUAL(P.job.output, "g.h5");
	CU_ASSERT_EQUAL(P.job.force, 1);
	CU_ASSERT_EQUAL(P.job.chunk_rows, 0);
	CU_ASSERT_EQUAL(P.job.threads, 2);
	CU_ASSERT_EQUAL(P.job.progress, 0);
	CU_ASSERT_STRING_EQUAL(P.job.query_file, "");
}

static void test_ini_topk(void)
{
	const char *ini = write_file("all.ini",
		"; every topk key\n"
		"[job]\n"
		"query = q.h5:/test\n"
		"base = b.h5\n"
		"k = 7\n"
		"metric = cosine\n"
		"threshold = 0.25\n"
		"self = yes\n"
		"output = out.h5\n"
		"force = true\n"
		"mem-limit = 2G\n"
		"mem-fraction = 0.5\n"
		"chunk-rows = 64\n"
		"threads = 3\n"
		"quiet = 1\n"
		"report-json = rep.json\n");
	char line[1024];

	snprintf(line, sizeof(line), "topk -c %s", ini);
	expect_ok(line);
	check_topk_everything(&P.job);
	CU_ASSERT_STRING_EQUAL(P.job.config, ini);
	snprintf(line, sizeof(line), "topk --config=%s", ini);
	expect_ok(line);
	check_topk_everything(&P.job);
}

static void test_ini_gen(void)
{
	const char *ini = write_file("gen.ini",
		"rows = 1000\n"
		"dim = 16\n"
		"queries = 10\n"
		"seed = 99\n"
		"clusters = 4\n"
		"output = g.h5\n"
		"force = on\n"
		"threads = 2\n"
		"quiet = YES\n");
	char line[1024];

	snprintf(line, sizeof(line), "gen -c %s", ini);
	expect_ok(line);
	CU_ASSERT_EQUAL(P.job.gen_rows, 1000);
	CU_ASSERT_EQUAL(P.job.gen_dim, 16);
	CU_ASSERT_EQUAL(P.job.gen_queries, 10);
	CU_ASSERT_EQUAL(P.job.seed, 99);
	CU_ASSERT_EQUAL(P.job.gen_clusters, 4);
	CU_ASSERT_STRING_EQUAL(P.job.output, "g.h5");
	CU_ASSERT_EQUAL(P.job.force, 1);
	CU_ASSERT_EQUAL(P.job.threads, 2);
	CU_ASSERT_EQUAL(P.job.progress, 0);
}

/* defaults < job file < command line, wherever -c stands */
static void test_precedence(void)
{
	const char *ini = write_file("prec.ini",
		"query = fileq.h5\n"
		"base = fileb.h5\n"
		"k = 5\n"
		"metric = ip\n"
		"threads = 2\n"
		"threshold = 1.5\n"
		"force = false\n"
		"quiet = true\n"
		"output = file.h5\n");
	char line[1024];

	/* -c first */
	snprintf(line, sizeof(line), "topk -c %s -k 9 -o cli.h5 --force", ini);
	expect_ok(line);
	CU_ASSERT_EQUAL(P.job.k, 9);
	CU_ASSERT_STRING_EQUAL(P.job.output, "cli.h5");
	CU_ASSERT_EQUAL(P.job.force, 1);
	CU_ASSERT_EQUAL(P.job.metric, XJ_METRIC_IP);
	CU_ASSERT_EQUAL(P.job.threads, 2);
	CU_ASSERT_EQUAL(P.job.has_threshold, 1);
	CU_ASSERT_EQUAL(P.job.threshold, 1.5);
	CU_ASSERT_STRING_EQUAL(P.job.query_file, "fileq.h5");
	CU_ASSERT_EQUAL(P.job.progress, 0);
	CU_ASSERT_EQUAL(P.job.mem_fraction, 0.8);
	CU_ASSERT_EQUAL(P.job.mem_limit_bytes, 0);
	CU_ASSERT_EQUAL(P.job.chunk_rows, 0);

	/* -c last: the command line still wins */
	snprintf(line, sizeof(line),
		 "topk -k 9 -m l2 -t none --threads 4 -q cliq.h5 -c %s", ini);
	expect_ok(line);
	CU_ASSERT_EQUAL(P.job.k, 9);
	CU_ASSERT_EQUAL(P.job.metric, XJ_METRIC_L2);
	CU_ASSERT_EQUAL(P.job.threads, 4);
	CU_ASSERT_EQUAL(P.job.has_threshold, 0);
	CU_ASSERT_STRING_EQUAL(P.job.query_file, "cliq.h5");
	CU_ASSERT_STRING_EQUAL(P.job.base_file, "fileb.h5");
	CU_ASSERT_STRING_EQUAL(P.job.output, "file.h5");
	CU_ASSERT_STRING_EQUAL(P.job.config, ini);

	/* -c in the middle, and a later value of the same option wins */
	snprintf(line, sizeof(line), "topk -k 3 -c %s -k 4", ini);
	expect_ok(line);
	CU_ASSERT_EQUAL(P.job.k, 4);
}

/* --device, --gpu-mem-fraction, --gpu-share and the devices command */
static void test_device_options(void)
{
	static const struct {
		const char *word;
		xj_device_mode mode;
	} modes[] = {
		{ "auto", XJ_DEVICE_AUTO },
		{ "gpu", XJ_DEVICE_GPU },
		{ "cpu", XJ_DEVICE_CPU },
	};
	char line[1024];
	const char *ini;
	size_t i;

	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		snprintf(line, sizeof(line), TOPK_BASE " --device %s",
			 modes[i].word);
		expect_ok(line);
		CU_ASSERT_EQUAL(P.job.device, modes[i].mode);
		CU_ASSERT_EQUAL(P.job.gpu_mem_fraction, 0.8);
		CU_ASSERT_EQUAL(P.job.gpu_share, 0);
	}
	expect_ok(TOPK_BASE " --device=gpu --gpu-mem-fraction 0.25 "
		  "--gpu-share");
	CU_ASSERT_EQUAL(P.job.device, XJ_DEVICE_GPU);
	CU_ASSERT_EQUAL(P.job.gpu_mem_fraction, 0.25);
	CU_ASSERT_EQUAL(P.job.gpu_share, 1);
	CU_ASSERT_EQUAL(P.job.mem_fraction, 0.8);   /* the host's, apart */
	expect_ok(TOPK_BASE " --gpu-mem-fraction=1");
	CU_ASSERT_EQUAL(P.job.gpu_mem_fraction, 1.0);
	expect_ok("matrix -q q.h5 -b b.h5 -o m.h5 --device cpu "
		  "--gpu-mem-fraction 0.5");
	CU_ASSERT_EQUAL(P.job.device, XJ_DEVICE_CPU);
	CU_ASSERT_EQUAL(P.job.gpu_mem_fraction, 0.5);
	expect_ok("plan topk -q q.h5 -b b.h5 -k 3 --device gpu --gpu-share");
	CU_ASSERT_EQUAL(P.job.device, XJ_DEVICE_GPU);
	CU_ASSERT_EQUAL(P.job.gpu_share, 1);
	/* range runs on either backend, with the GPU options and
	 * --precision (bf16 and int8 on the CPU; fp32 on a GPU) */
	expect_ok("range -q q.h5 -b b.h5 -o r.h5 -t 1.5 --device gpu "
		  "--gpu-mem-fraction 0.5 --gpu-share --precision bf16");
	CU_ASSERT_EQUAL(P.job.device, XJ_DEVICE_GPU);
	CU_ASSERT_EQUAL(P.job.gpu_mem_fraction, 0.5);
	CU_ASSERT_EQUAL(P.job.gpu_share, 1);
	CU_ASSERT_EQUAL(P.job.precision, XJ_PREC_BF16);

	ini = write_file("device.ini", "device = cpu\n"
			 "gpu-mem-fraction = 0.5\ngpu-share = yes\n");
	snprintf(line, sizeof(line), TOPK_BASE " -c %s", ini);
	expect_ok(line);
	CU_ASSERT_EQUAL(P.job.device, XJ_DEVICE_CPU);
	CU_ASSERT_EQUAL(P.job.gpu_mem_fraction, 0.5);
	CU_ASSERT_EQUAL(P.job.gpu_share, 1);
	snprintf(line, sizeof(line), TOPK_BASE " --device gpu -c %s "
		 "--gpu-mem-fraction 0.125", ini);
	expect_ok(line);
	CU_ASSERT_EQUAL(P.job.device, XJ_DEVICE_GPU);
	CU_ASSERT_EQUAL(P.job.gpu_mem_fraction, 0.125);
	CU_ASSERT_EQUAL(P.job.gpu_share, 1);

	ini = write_file("baddevice.ini", "k = 3\ndevice = tpu\n");
	snprintf(line, sizeof(line), TOPK_BASE " -c %s", ini);
	expect_usage(line, "baddevice.ini:2: device");
	CU_ASSERT_TRUE(contains(P.st.msg, "tpu"));

	expect_ok("devices");
	CU_ASSERT_EQUAL(P.job.command, XJ_CMD_DEVICES);
	CU_ASSERT_EQUAL(P.job.device, XJ_DEVICE_AUTO);
	CU_ASSERT_EQUAL(P.job.gpu_share, 0);
	CU_ASSERT_EQUAL(P.job.progress, 1);
	expect_ok("devices --device gpu --gpu-share --threads 2 --quiet");
	CU_ASSERT_EQUAL(P.job.command, XJ_CMD_DEVICES);
	CU_ASSERT_EQUAL(P.job.device, XJ_DEVICE_GPU);
	CU_ASSERT_EQUAL(P.job.gpu_share, 1);
	CU_ASSERT_EQUAL(P.job.threads, 2);
	CU_ASSERT_EQUAL(P.job.progress, 0);
	CU_ASSERT_STRING_EQUAL(P.job.output, "");
}

static void test_device_names(void)
{
	xj_device_mode d;

	CU_ASSERT_STRING_EQUAL(device_mode_name(XJ_DEVICE_AUTO), "auto");
	CU_ASSERT_STRING_EQUAL(device_mode_name(XJ_DEVICE_GPU), "gpu");
	CU_ASSERT_STRING_EQUAL(device_mode_name(XJ_DEVICE_CPU), "cpu");
	d = (xj_device_mode)99;
	CU_ASSERT_EQUAL(device_mode_parse("cpu", &d), 0);
	CU_ASSERT_EQUAL(d, XJ_DEVICE_CPU);
	CU_ASSERT_EQUAL(device_mode_parse("gpu", &d), 0);
	CU_ASSERT_EQUAL(d, XJ_DEVICE_GPU);
	CU_ASSERT_EQUAL(device_mode_parse("auto", &d), 0);
	CU_ASSERT_EQUAL(d, XJ_DEVICE_AUTO);
	d = (xj_device_mode)99;
	CU_ASSERT_EQUAL(device_mode_parse("cuda", &d), -1);
	CU_ASSERT_EQUAL(device_mode_parse("", &d), -1);
	CU_ASSERT_EQUAL(device_mode_parse("Auto", &d), -1);
	CU_ASSERT_EQUAL((int)d, 99);
}

/* --- errors --- */

#define TOPK "topk -q q.h5 -b b.h5 -o o.h5 -k 3"
#define MATRIX "matrix -q q.h5 -b b.h5 -o o.h5"
#define GEN "gen --rows 10 --dim 4 -o g.h5"

static void test_cli_errors(void)
{
	static const struct {
		const char *line, *needle;
	} cases[] = {
		{ TOPK " --bogus", "--bogus" },
		{ TOPK " --bogus=3", "--bogus" },
		{ TOPK " -x", "-x" },
		{ TOPK " --mem", "ambiguous option '--mem'" },
		{ TOPK " --bogus", "unknown option '--bogus'" },
		{ "topk -q q.h5 -b b.h5 -o o.h5 -k", "-k" },
		{ TOPK " --threshold", "--threshold" },
		{ TOPK " -q", "--query" },
		{ TOPK " extra", "extra" },
		{ TOPK " --self=1", "--self" },
		{ TOPK " -k 12x", "12x" },
		{ TOPK " -k 12x", "-k" },
		{ TOPK " --k 12x", "--k" },
		{ TOPK " -k -3", "-k" },
		{ TOPK " -k 0", "-k" },
		{ TOPK " -k 1.5", "1.5" },
		{ TOPK " -k 99999999999999999999", "-k" },
		{ TOPK " -m manhattan", "manhattan" },
		{ TOPK " --metric L2", "--metric" },
		{ TOPK " -t nan", "nan" },
		{ TOPK " -t inf", "inf" },
		{ TOPK " -t -inf", "-t" },
		{ TOPK " -t 1e999", "-t" },
		{ TOPK " -t 0.5x", "0.5x" },
		{ TOPK " --mem-fraction 0", "--mem-fraction" },
		{ TOPK " --mem-fraction 1.5", "--mem-fraction" },
		{ TOPK " --mem-fraction -0.5", "--mem-fraction" },
		{ TOPK " --mem-fraction nan", "--mem-fraction" },
		{ TOPK " --mem-limit 2X", "--mem-limit" },
		{ TOPK " --mem-limit 2GB", "2GB" },
		{ TOPK " --mem-limit G", "--mem-limit" },
		{ TOPK " --mem-limit 0", "--mem-limit" },
		{ TOPK " --mem-limit -1G", "--mem-limit" },
		{ TOPK " --mem-limit 1.5G", "--mem-limit" },
		{ TOPK " --mem-limit 99999999999T", "--mem-limit" },
		{ TOPK " --chunk-rows 0", "--chunk-rows" },
		{ TOPK " --device tpu", "unknown device 'tpu'" },
		{ TOPK " --device tpu", "--device" },
		{ TOPK " --device GPU", "GPU" },
		{ TOPK " --device", "--device needs a value" },
		{ TOPK " --device=", "--device" },
		{ TOPK " --gpu-share=1", "--gpu-share" },
		{ TOPK " --gpu-mem-fraction 0", "--gpu-mem-fraction" },
		{ TOPK " --gpu-mem-fraction 0", "(0, 1]" },
		{ TOPK " --gpu-mem-fraction 1.5", "--gpu-mem-fraction" },
		{ TOPK " --gpu-mem-fraction -0.1", "--gpu-mem-fraction" },
		{ TOPK " --gpu-mem-fraction nan", "--gpu-mem-fraction" },
		{ TOPK " --gpu-mem-fraction half", "half" },
		{ TOPK " --gpu", "ambiguous option '--gpu'" },
		{ TOPK " --threads 0", "--threads" },
		{ TOPK " --threads 99999999999", "--threads" },
		{ TOPK " --rows 5", "--rows does not apply to topk" },
		{ TOPK " --dim 5", "--dim" },
		{ TOPK " --seed 5", "--seed" },
		{ TOPK " --queries 5", "--queries" },
		{ TOPK " --clusters 5", "--clusters" },
		{ MATRIX " -k 5", "-k" },
		{ MATRIX " -t 0.5", "-t" },
		{ MATRIX " --self", "--self" },
		{ MATRIX " --rows 5", "--rows" },
		{ GEN " -m l2", "-m does not apply to gen" },
		{ GEN " -q a.h5", "-q" },
		{ GEN " -k 3", "-k" },
		{ GEN " --mem-limit 1G", "--mem-limit" },
		{ GEN " --report-json r.json", "--report-json" },
		{ GEN " --chunk-rows 8", "--chunk-rows" },
		{ GEN " --device cpu", "--device does not apply to gen" },
		{ GEN " --gpu-share", "--gpu-share" },
		{ GEN " --gpu-mem-fraction 0.5", "--gpu-mem-fraction" },
		{ "devices --gpu-mem-fraction 0.5",
		  "--gpu-mem-fraction does not apply to devices" },
		{ "devices -q a.h5", "-q does not apply to devices" },
		{ "devices -k 3", "-k" },
		{ "devices -o o.h5", "-o" },
		{ "devices --mem-limit 1G", "--mem-limit" },
		{ "devices --device tpu", "tpu" },
		{ "devices extra", "extra" },
		{ "plan devices -q a -b b", "devices" },
		{ GEN " --rows 0", "--rows" },
		{ GEN " --dim -1", "--dim" },
		{ GEN " --queries -1", "--queries" },
		{ GEN " --clusters -2", "--clusters" },
		{ GEN " --seed -1", "--seed" },
		{ GEN " --seed 7x", "--seed" },
		{ "bogus", "bogus" },
		{ "", "command" },
		{ "--bogus", "--bogus" },
		{ "help bogus", "bogus" },
		{ "plan gen -q a -b b", "gen" },
		{ "plan --rows 3 -q a -b b", "--rows" },
		{ "plan matrix -q a -b b -k 3", "-k" },
		{ "plan matrix -q a -b b -t 1", "-t" },
		{ "plan -q a -b b -t 1", "--threshold" },   /* plans matrix */
		{ TOPK " -c a.ini -c b.ini", "--config" },
		{ "topk -q q.h5 -b b.h5 -k 3 -o q.h5", "--output" },
		{ "topk -q q.h5 -b b.h5:/train -k 3 -o b.h5", "--output" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		expect_usage(cases[i].line, cases[i].needle);
}

/* Each required option, left out, is named. */
static void test_missing_required(void)
{
	expect_ok("topk -q q.h5 -b b.h5 -k 3 -o o.h5");
	expect_usage("topk -b b.h5 -k 3 -o o.h5", "--query");
	expect_usage("topk -q q.h5 -k 3 -o o.h5", "--base");
	expect_usage("topk -q q.h5 -b b.h5 -o o.h5", "--k");
	expect_usage("topk -q q.h5 -b b.h5 -k 3", "--output");
	expect_ok("matrix -q q.h5 -b b.h5 -o o.h5");
	expect_usage("matrix -b b.h5 -o o.h5", "--query");
	expect_usage("matrix -q q.h5 -o o.h5", "--base");
	expect_usage("matrix -q q.h5 -b b.h5", "--output");
	expect_ok("plan -q q.h5 -b b.h5");
	expect_usage("plan -b b.h5", "--query");
	expect_usage("plan -q q.h5", "--base");
	expect_usage("plan topk -q q.h5 -b b.h5", "--k");
	expect_ok("gen --rows 10 --dim 4 -o g.h5");
	expect_usage("gen --dim 4 -o g.h5", "--rows");
	expect_usage("gen --rows 10 -o g.h5", "--dim");
	expect_usage("gen --rows 10 --dim 4", "--output");
}

static void test_k_limit(void)
{
	expect_ok("topk -q q.h5 -b b.h5 -o o.h5 -k 16777216");
	CU_ASSERT_EQUAL(P.job.k, 16777216);
	expect_usage("topk -q q.h5 -b b.h5 -o o.h5 -k 16777217", "-k");
	CU_ASSERT_TRUE(contains(P.st.msg, "16777216"));
}

static void test_ini_errors(void)
{
	char line[1024];
	const char *f;

	f = write_file("unknown.ini", "k = 3\n\nfrobnicate = 3\n");
	snprintf(line, sizeof(line), TOPK " -c %s", f);
	expect_usage(line, "frobnicate");
	CU_ASSERT_TRUE(contains(P.st.msg, "unknown.ini:3:"));

	f = write_file("underscore.ini", "mem_fraction = 0.5\n");
	snprintf(line, sizeof(line), TOPK " -c %s", f);
	expect_usage(line, "mem-fraction");
	CU_ASSERT_TRUE(contains(P.st.msg, "underscore.ini:1:"));

	f = write_file("section.ini", "k = 3\n[output]\nforce = true\n");
	snprintf(line, sizeof(line), TOPK " -c %s", f);
	expect_usage(line, "[output]");
	CU_ASSERT_TRUE(contains(P.st.msg, "section.ini:3:"));

	f = write_file("badvalue.ini",
		       "# a comment\n; another\n\n[job]\n"
		       "k = 12x\nself = true\n");
	snprintf(line, sizeof(line), "topk -q q.h5 -b b.h5 -o o.h5 -c %s", f);
	expect_usage(line, "badvalue.ini:5: k: '12x'");

	f = write_file("badflag.ini", "self = maybe\n");
	snprintf(line, sizeof(line), TOPK " -c %s", f);
	expect_usage(line, "maybe");
	CU_ASSERT_TRUE(contains(P.st.msg, "badflag.ini:1: self"));

	f = write_file("badthreshold.ini", "k = 3\nthreshold = nan\n");
	snprintf(line, sizeof(line), TOPK " -c %s", f);
	expect_usage(line, "badthreshold.ini:2: threshold");

	f = write_file("config.ini", "k = 3\nconfig = other.ini\n");
	snprintf(line, sizeof(line), TOPK " -c %s", f);
	expect_usage(line, "config.ini:2: config");

	f = write_file("help.ini", "help = true\n");
	snprintf(line, sizeof(line), TOPK " -c %s", f);
	expect_usage(line, "help.ini:1: help");

	f = write_file("gen-in-topk.ini", "rows = 100\n");
	snprintf(line, sizeof(line), TOPK " -c %s", f);
	expect_usage(line, "rows does not apply to topk");
	CU_ASSERT_TRUE(contains(P.st.msg, "gen-in-topk.ini:1:"));

	f = write_file("syntax.ini", "k = 3\nk 10\n");
	snprintf(line, sizeof(line), TOPK " -c %s", f);
	expect_usage(line, "syntax.ini:2:");

	f = write_file("empty.ini", "k =\n");
	snprintf(line, sizeof(line), TOPK " -c %s", f);
	expect_usage(line, "empty.ini:1: k");

	snprintf(line, sizeof(line), TOPK " -c %s/missing.ini", tmpdir);
	expect_usage(line, "missing.ini");
	CU_ASSERT_TRUE(contains(P.st.msg, "cannot read job file"));
	CU_ASSERT_TRUE(contains(P.st.msg, strerror(ENOENT)));
}

/* A job file is checked like the command line: the missing option of a
 * file-only job is named too. */
static void test_ini_then_check(void)
{
	char line[1024];
	const char *f = write_file("nok.ini", "query = q.h5\nbase = b.h5\n");

	snprintf(line, sizeof(line), "topk -c %s -o o.h5", f);
	expect_usage(line, "--k");
	snprintf(line, sizeof(line), "topk -c %s -o o.h5 -k 2", f);
	expect_ok(line);
}

static void test_plan(void)
{
	expect_ok("plan -q q.h5 -b b.h5 -k 3");
	CU_ASSERT_EQUAL(P.job.command, XJ_CMD_PLAN);
	CU_ASSERT_EQUAL(P.job.plan_of, XJ_CMD_TOPK);
	CU_ASSERT_STRING_EQUAL(P.job.output, "");
	expect_ok("plan -q q.h5 -b b.h5");
	CU_ASSERT_EQUAL(P.job.plan_of, XJ_CMD_MATRIX);
	expect_ok("plan topk -q q.h5 -b b.h5 -k 3 -t 0.5 --self -o o.h5 "
		  "--force --chunk-rows 8");
	CU_ASSERT_EQUAL(P.job.plan_of, XJ_CMD_TOPK);
	CU_ASSERT_EQUAL(P.job.self, 1);
	CU_ASSERT_EQUAL(P.job.chunk_rows, 8);
	expect_ok("plan matrix -q q.h5 -b b.h5 -m ip");
	CU_ASSERT_EQUAL(P.job.plan_of, XJ_CMD_MATRIX);
	CU_ASSERT_EQUAL(P.job.metric, XJ_METRIC_IP);
}

/* getopt keeps state between calls; a call that stopped in the middle of
 * a cluster (-hx) or after permuting argv must not leak into the next. */
static void test_repeat_calls(void)
{
	expect_usage(TOPK " -xhk", "-x");   /* stops inside the cluster */
	expect_ok("topk -q q.h5 -b b.h5 -o o.h5 -k 5");
	CU_ASSERT_EQUAL(P.job.k, 5);
	expect_usage("topk q.h5 -k 2 -q q.h5 -b b.h5 -o o.h5", "q.h5");
	expect_ok("topk --quiet -q q.h5 -b b.h5 -o o.h5 -k 6");
	CU_ASSERT_EQUAL(P.job.k, 6);
	CU_ASSERT_EQUAL(P.job.progress, 0);
	expect_usage(TOPK " -k", "-k");
	expect_ok("gen --rows 3 --dim 2 -o g.h5");
	CU_ASSERT_EQUAL(P.job.gen_rows, 3);
}

/* --- options_set directly --- */

static void test_options_set(void)
{
	static char longpath[XJ_PATH_MAX + 8];
	xj_job job;
	xj_status st;

	job_defaults(&job);
	xj_ok(&st);
	snprintf(job.query_dset, sizeof(job.query_dset), "/stale");
	CU_ASSERT_EQUAL(options_set(&job, "query", "a.h5:/x", &st), XJ_OK);
	CU_ASSERT_STRING_EQUAL(job.query_file, "a.h5:/x");
	CU_ASSERT_STRING_EQUAL(job.query_dset, "");

	CU_ASSERT_EQUAL(options_set(&job, "self", NULL, &st), XJ_OK);
	CU_ASSERT_EQUAL(job.self, 1);
	CU_ASSERT_EQUAL(options_set(&job, "self", "No", &st), XJ_OK);
	CU_ASSERT_EQUAL(job.self, 0);
	CU_ASSERT_EQUAL(options_set(&job, "force", "1", &st), XJ_OK);
	CU_ASSERT_EQUAL(job.force, 1);
	CU_ASSERT_EQUAL(options_set(&job, "force", "off", &st), XJ_OK);
	CU_ASSERT_EQUAL(job.force, 0);
	CU_ASSERT_EQUAL(options_set(&job, "quiet", "false", &st), XJ_OK);
	CU_ASSERT_EQUAL(job.progress, 1);
	CU_ASSERT_EQUAL(options_set(&job, "quiet", "true", &st), XJ_OK);
	CU_ASSERT_EQUAL(job.progress, 0);

	CU_ASSERT_EQUAL(options_set(&job, "threshold", "-2.5e-3", &st), XJ_OK);
	CU_ASSERT_EQUAL(job.has_threshold, 1);
	CU_ASSERT_EQUAL(job.threshold, -2.5e-3);
	CU_ASSERT_EQUAL(options_set(&job, "threshold", "none", &st), XJ_OK);
	CU_ASSERT_EQUAL(job.has_threshold, 0);

	CU_ASSERT_EQUAL(options_set(&job, "seed", "0", &st), XJ_OK);
	CU_ASSERT_EQUAL(job.seed, 0);
	CU_ASSERT_EQUAL(options_set(&job, "seed", "9223372036854775807", &st),
			XJ_OK);
	CU_ASSERT_EQUAL(job.seed, (uint64_t)INT64_MAX);
	CU_ASSERT_EQUAL(options_set(&job, "mem-fraction", "1", &st), XJ_OK);
	CU_ASSERT_EQUAL(job.mem_fraction, 1.0);
	CU_ASSERT_EQUAL(options_set(&job, "mem-fraction", "1e-9", &st), XJ_OK);
	CU_ASSERT_EQUAL(job.mem_fraction, 1e-9);
	CU_ASSERT_EQUAL(st.code, XJ_OK);

	memset(longpath, 'p', XJ_PATH_MAX);
	longpath[XJ_PATH_MAX] = '\0';
	CU_ASSERT_EQUAL(options_set(&job, "output", longpath, &st),
			XJ_EXIT_USAGE);
	CU_ASSERT_TRUE(contains(st.msg, "output"));
	xj_ok(&st);
	longpath[XJ_PATH_MAX - 1] = '\0';   /* the longest that fits */
	CU_ASSERT_EQUAL(options_set(&job, "output", longpath, &st), XJ_OK);
	CU_ASSERT_EQUAL(strlen(job.output), XJ_PATH_MAX - 1);

	CU_ASSERT_EQUAL(options_set(&job, "base", "", &st), XJ_EXIT_USAGE);
	CU_ASSERT_TRUE(contains(st.msg, "base"));
	xj_ok(&st);
	CU_ASSERT_EQUAL(options_set(&job, "k", NULL, &st), XJ_EXIT_USAGE);
	CU_ASSERT_TRUE(contains(st.msg, "k"));
	xj_ok(&st);
	CU_ASSERT_EQUAL(options_set(&job, "nope", "1", &st), XJ_EXIT_USAGE);
	CU_ASSERT_TRUE(contains(st.msg, "nope"));
	xj_ok(&st);
	CU_ASSERT_EQUAL(options_set(&job, "config", "x.ini", &st),
			XJ_EXIT_USAGE);
	CU_ASSERT_TRUE(contains(st.msg, "config"));
}

static void test_sizes(void)
{
	static const struct {
		const char *text;
		int64_t bytes;
	} good[] = {
		{ "1073741824", 1073741824 },
		{ "512M", (int64_t)512 << 20 },
		{ "2G", (int64_t)2 << 30 },
		{ "2g", (int64_t)2 << 30 },
		{ "1T", (int64_t)1 << 40 },
		{ "4k", 4096 },
		{ "3KiB", 3072 },
		{ "1", 1 },
		{ "8388607T", (int64_t)8388607 << 40 },
	};
	static const char *const bad[] = {
		"2GB", "0", "-1", "12.5M", "M", "", "1 G", "2P", "8388608T",
		"9223372036854775808", "0x10",
	};
	xj_job job;
	xj_status st;
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		job_defaults(&job);
		job.mem_limit_bytes = -7;
		xj_ok(&st);
		CU_ASSERT_EQUAL(options_set(&job, "mem-limit", good[i].text,
					    &st), XJ_OK);
		CU_ASSERT_EQUAL(job.mem_limit_bytes, good[i].bytes);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		job_defaults(&job);
		job.mem_limit_bytes = -7;
		xj_ok(&st);
		CU_ASSERT_EQUAL(options_set(&job, "mem-limit", bad[i], &st),
				XJ_EXIT_USAGE);
		CU_ASSERT_TRUE(contains(st.msg, "mem-limit"));
		CU_ASSERT_EQUAL(job.mem_limit_bytes, -7);   /* untouched */
	}
}

/* --- job_check directly --- */

static void test_job_check(void)
{
	xj_job job;
	xj_status st;

	job_defaults(&job);
	xj_ok(&st);
	CU_ASSERT_EQUAL(job_check(&job, &st), XJ_EXIT_USAGE);   /* no command */

	job.command = XJ_CMD_TOPK;
	snprintf(job.query_file, sizeof(job.query_file), "q.h5");
	snprintf(job.base_file, sizeof(job.base_file), "b.h5");
	snprintf(job.output, sizeof(job.output), "o.h5");
	job.k = 10;
	xj_ok(&st);
	CU_ASSERT_EQUAL(job_check(&job, &st), XJ_OK);

	job.has_threshold = 1;
	job.threshold = NAN;
	CU_ASSERT_EQUAL(job_check(&job, &st), XJ_EXIT_USAGE);
	CU_ASSERT_TRUE(contains(st.msg, "threshold"));
	job.threshold = -1.0;
	job.metric = XJ_METRIC_IP;   /* ip with a threshold is fine */
	xj_ok(&st);
	CU_ASSERT_EQUAL(job_check(&job, &st), XJ_OK);

	job.mem_fraction = 0.0;
	CU_ASSERT_EQUAL(job_check(&job, &st), XJ_EXIT_USAGE);
	CU_ASSERT_TRUE(contains(st.msg, "mem-fraction"));
	job.mem_fraction = 1.0;
	job.gpu_mem_fraction = 0.0;
	xj_ok(&st);
	CU_ASSERT_EQUAL(job_check(&job, &st), XJ_EXIT_USAGE);
	CU_ASSERT_TRUE(contains(st.msg, "gpu-mem-fraction"));
	job.gpu_mem_fraction = 1.5;
	xj_ok(&st);
	CU_ASSERT_EQUAL(job_check(&job, &st), XJ_EXIT_USAGE);
	CU_ASSERT_TRUE(contains(st.msg, "gpu-mem-fraction"));
	job.gpu_mem_fraction = 1.0;
	xj_ok(&st);
	CU_ASSERT_EQUAL(job_check(&job, &st), XJ_OK);
	job.command = XJ_CMD_DEVICES;   /* needs no inputs */
	job.query_file[0] = '\0';
	CU_ASSERT_EQUAL(job_check(&job, &st), XJ_OK);
	job.command = XJ_CMD_PLAN;
	job.plan_of = XJ_CMD_GEN;
	CU_ASSERT_EQUAL(job_check(&job, &st), XJ_EXIT_USAGE);
	CU_ASSERT_TRUE(contains(st.msg, "plan"));

	/* range: a finite threshold, no k; either backend */
	job.command = XJ_CMD_RANGE;
	job.plan_of = XJ_CMD_NONE;
	snprintf(job.query_file, sizeof(job.query_file), "q.h5");
	job.k = 0;
	job.metric = XJ_METRIC_L2;
	job.has_threshold = 0;
	xj_ok(&st);
	CU_ASSERT_EQUAL(job_check(&job, &st), XJ_EXIT_USAGE);
	CU_ASSERT_TRUE(contains(st.msg, "range needs -t/--threshold"));
	job.has_threshold = 1;
	job.threshold = 2.5;
	xj_ok(&st);
	CU_ASSERT_EQUAL(job_check(&job, &st), XJ_OK);
	job.k = 3;
	CU_ASSERT_EQUAL(job_check(&job, &st), XJ_EXIT_USAGE);
	CU_ASSERT_TRUE(contains(st.msg, "-k/--k does not apply to range"));
	job.k = 0;
	job.device = XJ_DEVICE_GPU;
	xj_ok(&st);
	CU_ASSERT_EQUAL(job_check(&job, &st), XJ_OK);
	job.device = XJ_DEVICE_AUTO;
	job.command = XJ_CMD_PLAN;   /* plan range: -o optional */
	job.plan_of = XJ_CMD_RANGE;
	job.output[0] = '\0';
	xj_ok(&st);
	CU_ASSERT_EQUAL(job_check(&job, &st), XJ_OK);
}

/* An output that is an input under another name: refused before the
 * result could be renamed over it. */
static void test_output_same_file(void)
{
	char line[2048], link[600];
	const char *in = write_file("in.h5", "an input\n");
	const char *other = write_file("other.h5", "another file\n");

	snprintf(link, sizeof(link), "%s/link.h5", tmpdir);
	CU_ASSERT_EQUAL_FATAL(symlink("in.h5", link), 0);
	snprintf(line, sizeof(line), "topk -q %s/./in.h5 -b b.h5 -k 3 -o %s "
		 "--force", tmpdir, in);
	expect_usage(line, "is the query input");
	snprintf(line, sizeof(line), "topk -q q.h5 -b %s:/train -k 3 -o %s "
		 "--force", link, in);
	expect_usage(line, "is the base input");
	/* a link at the output path is replaced, its target is not */
	snprintf(line, sizeof(line), "topk -q %s -b b.h5 -k 3 -o %s --force",
		 in, link);
	expect_ok(line);
	snprintf(line, sizeof(line), "topk -q %s -b %s -k 3 -o %s --force",
		 in, in, other);
	expect_ok(line);
}

/* --- help and version --- */

static void test_version(void)
{
	char want[64];

	snprintf(want, sizeof(want), "xjoin %s\n", XJOIN_VERSION);
	CU_ASSERT_STRING_EQUAL(want, "xjoin 0.1.0\n");
	parse("--version");
	CU_ASSERT_EQUAL(P.rc, XJ_OK);
	CU_ASSERT_EQUAL(P.action, OPTIONS_VERSION_SHOWN);
	CU_ASSERT_STRING_EQUAL(P.out, want);
	parse("topk --version");
	CU_ASSERT_EQUAL(P.rc, XJ_OK);
	CU_ASSERT_EQUAL(P.action, OPTIONS_VERSION_SHOWN);
	CU_ASSERT_STRING_EQUAL(P.out, want);
}

static void expect_help(const char *line, const char *usage)
{
	parse(line);
	CU_ASSERT_EQUAL(P.rc, XJ_OK);
	CU_ASSERT_EQUAL(P.action, OPTIONS_HELP_SHOWN);
	CU_ASSERT_TRUE(strncmp(P.out, usage, strlen(usage)) == 0);
	if (strncmp(P.out, usage, strlen(usage)) != 0)
		printf("\n  xjoin %s printed:\n%.200s\n", line, P.out);
}

static void test_help_actions(void)
{
	expect_help("--help", "usage: xjoin COMMAND");
	expect_help("-h", "usage: xjoin COMMAND");
	expect_help("help", "usage: xjoin COMMAND");
	expect_help("help topk", "usage: xjoin topk ");
	expect_help("topk --help", "usage: xjoin topk ");
	expect_help("matrix -h", "usage: xjoin matrix ");
	expect_help("help plan", "usage: xjoin plan ");
	expect_help("plan topk --help", "usage: xjoin plan ");
	expect_help("gen --help", "usage: xjoin gen ");
	expect_help("devices --help", "usage: xjoin devices [options]\n");
	expect_help("help devices", "usage: xjoin devices [options]\n");
	/* help wins over values that are never applied */
	expect_help("topk -k 12x --help", "usage: xjoin topk ");
}

static char *help_text(xj_command cmd)
{
	static char text[OUT_MAX];
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	options_help(out, cmd);
	fclose(out);
	snprintf(text, sizeof(text), "%s", buf);
	free(buf);
	return text;
}

/* The usage paragraph (up to the first blank line) with every run of
 * blanks and newlines made one space: usage lines wrap. */
static char *usage_of(xj_command cmd)
{
	char *text = help_text(cmd), *end = strstr(text, "\n\n");
	char *r, *w = text;

	if (end)
		*end = '\0';
	for (r = text; *r; r++) {
		if (*r == ' ' || *r == '\n') {
			if (w > text && w[-1] == ' ')
				continue;
			*w++ = ' ';
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
	return text;
}

/* "--k K" rather than "--k": long names may prefix each other. */
static void expect_options(xj_command cmd, const char *const *yes,
			   const char *const *no)
{
	const char *text = help_text(cmd);
	char word[64];

	for (; *yes; yes++) {
		snprintf(word, sizeof(word), "--%s", *yes);
		CU_ASSERT_TRUE(contains(text, word));
		if (!contains(text, word))
			printf("\n  help %d lacks %s\n", (int)cmd, word);
	}
	for (; *no; no++) {
		snprintf(word, sizeof(word), "--%s", *no);
		CU_ASSERT_FALSE(contains(text, word));
		if (contains(text, word))
			printf("\n  help %d shows %s\n", (int)cmd, word);
	}
}

static void test_help_options(void)
{
	static const char *const topk[] = {
		"query QUERIES", "base BASE", "k K", "metric METRIC",
		"threshold THRESHOLD", "self", "output OUT.h5", "force",
		"mem-limit SIZE", "mem-fraction F", "chunk-rows ROWS",
		"threads N", "report-json FILE", "config FILE", "quiet", "help",
		"version", "device DEVICE", "gpu-mem-fraction F", "gpu-share",
		NULL,
	};
	static const char *const not_topk[] = {
		"rows", "dim", "queries", "seed", "clusters", NULL,
	};
	static const char *const matrix[] = {
		"query QUERIES", "base BASE", "metric METRIC", "output OUT.h5",
		"force", "mem-limit SIZE", "mem-fraction F", "chunk-rows ROWS",
		"threads N", "report-json FILE", "config FILE", "quiet", "help",
		"device DEVICE", "gpu-mem-fraction F", "gpu-share", NULL,
	};
	static const char *const not_matrix[] = {
		"k K", "threshold", "self", "rows", "dim", "seed", NULL,
	};
	static const char *const gen[] = {
		"rows N", "dim D", "queries NQ", "seed S", "clusters C",
		"output OUT.h5", "force", "threads N", "config FILE", "quiet",
		"help", NULL,
	};
	static const char *const not_gen[] = {
		"query", "base", "k K", "metric", "threshold", "self",
		"mem-limit", "mem-fraction", "chunk-rows", "report-json",
		"device", "gpu-mem-fraction", "gpu-share", NULL,
	};
	static const char *const devices[] = {
		"device DEVICE", "gpu-share", "threads N", "quiet", "help",
		"version", NULL,
	};
	static const char *const not_devices[] = {
		"query", "base", "k K", "metric", "output", "mem-limit",
		"mem-fraction", "gpu-mem-fraction", "chunk-rows", "rows", NULL,
	};
	static const char *const none[] = { NULL };

	expect_options(XJ_CMD_TOPK, topk, not_topk);
	expect_options(XJ_CMD_MATRIX, matrix, not_matrix);
	expect_options(XJ_CMD_PLAN, topk, not_topk);
	expect_options(XJ_CMD_GEN, gen, not_gen);
	expect_options(XJ_CMD_PLAN, matrix, none);
	expect_options(XJ_CMD_DEVICES, devices, not_devices);

	CU_ASSERT_TRUE(contains(usage_of(XJ_CMD_TOPK),
				"usage: xjoin topk -q QUERIES -b BASE -k K "
				"[-m METRIC] [-t THRESHOLD] [--self] "
				"-o OUT.h5 [--force] [--resume] [options]"));
	CU_ASSERT_TRUE(contains(usage_of(XJ_CMD_MATRIX),
				"usage: xjoin matrix -q QUERIES -b BASE "
				"[-m METRIC] -o OUT.h5 [--force] [--resume] [options]"));
	CU_ASSERT_TRUE(contains(usage_of(XJ_CMD_PLAN),
				"usage: xjoin plan [topk|matrix|range] -q QUERIES "
				"-b BASE [-k K]"));
	CU_ASSERT_TRUE(contains(usage_of(XJ_CMD_GEN),
				"usage: xjoin gen --rows N --dim D"));
	CU_ASSERT_TRUE(contains(usage_of(XJ_CMD_RANGE),
				"usage: xjoin range -q QUERIES -b BASE "
				"[-m METRIC] -t THRESHOLD [--self]"));
	CU_ASSERT_TRUE(contains(help_text(XJ_CMD_TOPK), "[default: l2]"));
	CU_ASSERT_TRUE(contains(help_text(XJ_CMD_TOPK), "[default: 0.8]"));
	CU_ASSERT_TRUE(contains(help_text(XJ_CMD_GEN), "[default: 2026]"));
	CU_ASSERT_TRUE(contains(help_text(XJ_CMD_TOPK), "[default: auto]"));
	CU_ASSERT_TRUE(contains(usage_of(XJ_CMD_DEVICES),
				"usage: xjoin devices [options]"));
	/* no empty group title where a command has none of its options */
	CU_ASSERT_FALSE(contains(help_text(XJ_CMD_DEVICES), "\njob:"));
	CU_ASSERT_TRUE(contains(help_text(XJ_CMD_DEVICES), "\nresources:"));
}

/* Help fits an 80-column terminal. */
static void test_help_width(void)
{
	static const xj_command all[] = {
		XJ_CMD_NONE, XJ_CMD_TOPK, XJ_CMD_MATRIX, XJ_CMD_PLAN,
		XJ_CMD_GEN, XJ_CMD_DEVICES,
	};
	char *line, *save = NULL;
	size_t i;

	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		for (line = strtok_r(help_text(all[i]), "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			CU_ASSERT_TRUE(strlen(line) <= 79);
			if (strlen(line) > 79)
				printf("\n  too wide: '%s'\n", line);
		}
	}
}

/* The man page comes from the same table: every option, escaped for
 * troff, with the exit codes and the version. */
static void test_man_page(void)
{
	static const xj_command cmds[] = {
		XJ_CMD_TOPK, XJ_CMD_MATRIX, XJ_CMD_RANGE, XJ_CMD_PLAN,
		XJ_CMD_GEN, XJ_CMD_DEVICES, XJ_CMD_INSPECT,
	};
	char *buf = NULL, want[96];
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	options_man(out);
	fclose(out);
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\n.TH XJOIN 1 "));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, XJOIN_VERSION));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, ".SH EXIT STATUS"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "lost a rank"));
	/* every option any command's --help shows */
	for (size_t c = 0; c < sizeof(cmds) / sizeof(cmds[0]); c++) {
		const char *h = help_text(cmds[c]);

		while ((h = strstr(h, "--"))) {
			char *w = want;

			w += sprintf(w, "\\fB\\-\\-");
			for (h += 2; (*h >= 'a' && *h <= 'z') || *h == '-'; h++)
				if (w < want + sizeof(want) - 4)
					w += sprintf(w, *h == '-' ? "\\-" : "%c",
						     *h);
			CU_ASSERT_PTR_NOT_NULL(strstr(buf, want));
			if (!strstr(buf, want))
				printf("\n  man page lacks %s\n", want);
		}
	}
	/* no unescaped option dash reaches troff */
	CU_ASSERT_PTR_NULL(strstr(buf, " --"));
	free(buf);
}

static void test_help_top(void)
{
	static const char *const cmds[] = {
		"\n  topk ", "\n  matrix ", "\n  plan ", "\n  gen ",
		"\n  devices ",
	};
	const char *text = help_text(XJ_CMD_NONE);
	char line[64];
	int code;
	size_t i;

	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		CU_ASSERT_TRUE(contains(text, cmds[i]));
	for (code = XJ_OK; code <= XJ_EXIT_INTERRUPTED; code++) {
		snprintf(line, sizeof(line), "\n  %d  %s ", code,
			 xj_exit_name(code));
		CU_ASSERT_TRUE(contains(text, line));
		if (!contains(text, line))
			printf("\n  no exit code line '%s'\n", line + 1);
	}
}

/* --- job_print --- */

/* Runs job_print with stdout sent to a file; returns what it printed. */
static char *print_job(const xj_job *job, int nranks)
{
	static char text[OUT_MAX];
	char path[600];
	int saved, fd;
	ssize_t got;

	snprintf(path, sizeof(path), "%s/print.txt", tmpdir);
	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	CU_ASSERT_FATAL(saved >= 0 && fd >= 0);
	dup2(fd, STDOUT_FILENO);
	job_print(job, nranks);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	memset(text, 0, sizeof(text));
	lseek(fd, 0, SEEK_SET);
	got = read(fd, text, sizeof(text) - 1);
	close(fd);
	CU_ASSERT_TRUE(got > 0);
	return text;
}

/* After the '#' header, every line is a rule or a row of one width. */
static void expect_aligned(char *text)
{
	char *line, *save = NULL;
	size_t width = 0;
	int rows = 0;

	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (line[0] == '#')
			continue;
		CU_ASSERT_TRUE(line[0] == '|' || line[0] == '+');
		if (!width)
			width = strlen(line);
		CU_ASSERT_EQUAL(strlen(line), width);
		rows++;
	}
	CU_ASSERT_TRUE(rows > 8);
}

static void test_job_print(void)
{
	char *text;

	expect_ok("topk -q q.h5 -b b.h5:/train -k 10 -m cosine -t 0.25 "
		  "-o out.h5 --mem-limit 2G --threads 3 -c /dev/null "
		  "--report-json r.json");
	P.job.n = 1000;
	P.job.m = 100000;
	P.job.d = 100;
	snprintf(P.job.query_dset, sizeof(P.job.query_dset), "/test");
	text = print_job(&P.job, 4);
	CU_ASSERT_TRUE(text[0] == '#');
	CU_ASSERT_TRUE(contains(text, "| command "));
	CU_ASSERT_TRUE(contains(text, "| topk "));
	CU_ASSERT_TRUE(contains(text, "q.h5:/test, 1000 x 100 "));
	CU_ASSERT_TRUE(contains(text, "b.h5:/train, 100000 x 100 "));
	CU_ASSERT_TRUE(contains(text, "| cosine"));
	CU_ASSERT_TRUE(contains(text, "| 0.25 "));
	CU_ASSERT_TRUE(contains(text, "| out.h5 "));
	CU_ASSERT_TRUE(contains(text, "2.00 GiB"));
	CU_ASSERT_TRUE(contains(text, "| chunk rows "));
	CU_ASSERT_TRUE(contains(text, "| auto "));
	CU_ASSERT_TRUE(contains(text, "| 3 per rank "));
	CU_ASSERT_TRUE(contains(text, "| ranks "));
	CU_ASSERT_TRUE(contains(text, "| 4 "));
	CU_ASSERT_TRUE(contains(text, "/dev/null"));
	CU_ASSERT_TRUE(contains(text, "| report json "));
	CU_ASSERT_TRUE(contains(text, "| r.json "));
	CU_ASSERT_TRUE(contains(text, "| device "));
	CU_ASSERT_TRUE(contains(text, "| auto ("));
	CU_ASSERT_TRUE(contains(text, "| gpu mem fraction "));
	CU_ASSERT_TRUE(contains(text, "| gpu share "));
	expect_aligned(text);

	expect_ok(TOPK_BASE " --device gpu --gpu-mem-fraction 0.5 --gpu-share");
	text = print_job(&P.job, 2);
	CU_ASSERT_TRUE(contains(text, "| gpu ("));
	CU_ASSERT_TRUE(contains(text, "| 0.5 "));
	CU_ASSERT_TRUE(contains(text, "| yes (local ranks may share a GPU)"));
	expect_aligned(text);

	expect_ok(TOPK_BASE " --device cpu");
	text = print_job(&P.job, 2);
	CU_ASSERT_TRUE(contains(text, "| cpu "));
	CU_ASSERT_FALSE(contains(text, "| gpu mem fraction "));
	CU_ASSERT_FALSE(contains(text, "| gpu share "));
	expect_aligned(text);

	expect_ok("plan -q q.h5 -b b.h5 --chunk-rows 32");
	text = print_job(&P.job, 1);
	CU_ASSERT_TRUE(contains(text, "| plan matrix "));
	CU_ASSERT_TRUE(contains(text, "| 32 (forced) "));
	CU_ASSERT_FALSE(contains(text, "| k "));
	CU_ASSERT_FALSE(contains(text, "| threshold "));
	expect_aligned(text);

	expect_ok("gen --rows 10 --dim 4 --seed 77 -o g.h5");
	text = print_job(&P.job, 1);
	CU_ASSERT_TRUE(contains(text, "| gen "));
	CU_ASSERT_TRUE(contains(text, "| 77 "));
	CU_ASSERT_FALSE(contains(text, "| metric "));
	CU_ASSERT_FALSE(contains(text, "| chunk rows "));
	CU_ASSERT_FALSE(contains(text, "| device "));
	expect_aligned(text);
}

/* --- metric names --- */

static void test_metric_names(void)
{
	static const xj_metric all[] = {
		XJ_METRIC_L2, XJ_METRIC_SQEUCLIDEAN, XJ_METRIC_COSINE,
		XJ_METRIC_IP,
	};
	static const char *const names[] = { "l2", "sqeuclidean", "cosine",
					     "ip" };
	xj_metric m;
	size_t i;

	for (i = 0; i < 4; i++) {
		CU_ASSERT_STRING_EQUAL(metric_name(all[i]), names[i]);
		m = (xj_metric)99;
		CU_ASSERT_EQUAL(metric_parse(names[i], &m), 0);
		CU_ASSERT_EQUAL(m, all[i]);
		CU_ASSERT_EQUAL(metric_larger_is_better(all[i]),
				all[i] == XJ_METRIC_IP);
	}
	m = (xj_metric)99;
	CU_ASSERT_EQUAL(metric_parse("L2", &m), -1);
	CU_ASSERT_EQUAL(metric_parse("", &m), -1);
	CU_ASSERT_EQUAL(metric_parse("euclidean", &m), -1);
	CU_ASSERT_EQUAL((int)m, 99);
}

/* --- main --- */

static void remove_tmpdir(void)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
}

int main(void)
{
	static const struct {
		const char *name;
		CU_TestFunc fn;
	} tests[] = {
		{ "defaults", test_defaults },
		{ "cli topk short options", test_cli_topk_short },
		{ "cli topk long options", test_cli_topk_long },
		{ "cli matrix", test_cli_matrix },
		{ "cli gen", test_cli_gen },
		{ "ini topk: every key", test_ini_topk },
		{ "ini gen: every key", test_ini_gen },
		{ "defaults < ini < cli", test_precedence },
		{ "cli errors name the option", test_cli_errors },
		{ "missing required options", test_missing_required },
		{ "k limit", test_k_limit },
		{ "ini errors with file:line", test_ini_errors },
		{ "ini job is checked", test_ini_then_check },
		{ "plan targets", test_plan },
		{ "repeated calls reset getopt", test_repeat_calls },
		{ "options_set", test_options_set },
		{ "device options and the devices command",
		  test_device_options },
		{ "device mode names", test_device_names },
		{ "sizes", test_sizes },
		{ "job_check", test_job_check },
		{ "output is an input under another name",
		  test_output_same_file },
		{ "--version", test_version },
		{ "--help actions", test_help_actions },
		{ "help lists each option", test_help_options },
		{ "top-level help", test_help_top },
		{ "help fits 80 columns", test_help_width },
		{ "man page", test_man_page },
		{ "job_print table", test_job_print },
		{ "metric names", test_metric_names },
	};
	CU_pSuite suite;
	size_t i;
	int failures;

	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	suite = CU_add_suite("options", NULL, NULL);
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
