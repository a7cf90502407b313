/*
 * options_table.c: the option table and the command list, and what they
 * drive: the command-line parser (getopt_long, options_parse.c), the
 * setter INI job files share (options_set) and --help (options_help.c).
 *
 * One row per option: its long name (which is also its INI key), short
 * letter, value kind, the xj_job field it sets, the commands that accept
 * it and the text --help shows. Adding an option is adding a row here
 * and counting it in N_OPTS (options_int.h), plus its cross-checks, if
 * any, in job_check().
 */
#define _POSIX_C_SOURCE 200809L

#include "options.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "options_int.h"

#define AT(field) offsetof(xj_job, field)

const struct opt options_table[] = {
	{ .name = "query", .short_name = 'q', .kind = K_INPUT,
	  .offset = AT(query_file), .dset_offset = AT(query_dset),
	  .cmds = T | M | R, .required = T | M | P | R, .group = GROUP_JOB,
	  .metavar = "QUERIES",
	  .help = "query rows, FILE[:DATASET]; DATASET defaults to\n"
		  "'test', else the only 2-D dataset in FILE;\n"
		  "shards as one: a quoted glob pattern, or @LIST" },
	{ .name = "base", .short_name = 'b', .kind = K_INPUT,
	  .offset = AT(base_file), .dset_offset = AT(base_dset),
	  .cmds = T | M | R, .required = T | M | P | R, .group = GROUP_JOB,
	  .metavar = "BASE",
	  .help = "base rows, FILE[:DATASET]; DATASET defaults to\n"
		  "'train', else the only 2-D dataset in FILE;\n"
		  "shards as one: a quoted glob pattern, or @LIST" },
	{ .name = "k", .short_name = 'k', .kind = K_INT64, .offset = AT(k),
	  .lo = 1, .hi = INT64_MAX, .cmds = T, .required = T,
	  .group = GROUP_JOB, .metavar = "K",
	  .help = "neighbours kept per query row, >= 1; rows with\n"
		  "fewer passing the threshold are padded with -1" },
	{ .name = "metric", .short_name = 'm', .kind = K_METRIC,
	  .offset = AT(metric), .cmds = T | M | R, .group = GROUP_JOB,
	  .metavar = "METRIC",
	  .help = "l2, sqeuclidean, cosine (1 - cos) or ip\n"
		  "(inner product, larger is better)",
	  .def = "l2" },
	{ .name = "threshold", .short_name = 't', .kind = K_THRESHOLD,
	  .offset = AT(threshold), .cmds = T | R, .required = R,
	  .group = GROUP_JOB,
	  .metavar = "THRESHOLD",
	  .help = "keep only pairs scoring <= THRESHOLD (ip: >=),\n"
		  "in the metric's own units",
	  .def = "none" },
	{ .name = "self", .kind = K_FLAG, .offset = AT(self), .cmds = T | R,
	  .group = GROUP_JOB,
	  .help = "skip pairs (i, i): for joining a set with itself" },
	{ .name = "max-pairs", .kind = K_INT64, .offset = AT(max_pairs),
	  .lo = 1, .hi = INT64_MAX, .cmds = R, .group = GROUP_JOB,
	  .metavar = "N",
	  .help = "stop with exit 4 (resource), leaving no output,\n"
		  "when the pairs within the threshold exceed N",
	  .def = "no cap" },
	{ .name = "rows", .kind = K_INT64, .offset = AT(gen_rows), .lo = 1,
	  .hi = INT64_MAX, .cmds = G, .required = G, .group = GROUP_JOB,
	  .metavar = "N", .help = "base rows to write (dataset /train)" },
	{ .name = "dim", .kind = K_INT64, .offset = AT(gen_dim), .lo = 1,
	  .hi = INT64_MAX, .cmds = G, .required = G, .group = GROUP_JOB,
	  .metavar = "D", .help = "dimension of every row" },
	{ .name = "queries", .kind = K_INT64, .offset = AT(gen_queries),
	  .lo = 0, .hi = INT64_MAX, .cmds = G, .group = GROUP_JOB,
	  .metavar = "NQ", .help = "query rows to write (dataset /test)",
	  .def = "0" },
	{ .name = "clusters", .kind = K_INT64, .offset = AT(gen_clusters),
	  .lo = 0, .hi = INT64_MAX, .cmds = G, .group = GROUP_JOB,
	  .metavar = "C",
	  .help = "0: Gaussian noise; C > 0: C Gaussian blobs", .def = "0" },
	{ .name = "seed", .kind = K_SEED, .offset = AT(seed), .lo = 0,
	  .hi = INT64_MAX, .cmds = G, .group = GROUP_JOB, .metavar = "S",
	  .help = "random seed; the same seed writes the same file",
	  .def = "2026" },
	/* a second --rows: rows sharing a name differ in their commands */
	{ .name = "rows", .kind = K_INT64, .offset = AT(inspect_rows),
	  .lo = 0, .hi = INT64_MAX, .cmds = I, .group = GROUP_JOB,
	  .metavar = "N",
	  .help = "query rows shown: their first 10 pairs (topk)\n"
		  "or first 8 values (matrix)",
	  .def = "5" },
	{ .name = "json", .kind = K_FLAG, .offset = AT(json), .cmds = I,
	  .group = GROUP_JOB,
	  .help = "the same facts as one JSON object on stdout" },
	{ .name = "output", .short_name = 'o', .kind = K_PATH,
	  .offset = AT(output), .cmds = T | M | G | R, .required = T | M | G | R,
	  .group = GROUP_JOB, .metavar = "OUT.h5",
	  .help = "HDF5 file to write (as OUT.h5.partial until done)" },
	{ .name = "force", .kind = K_FLAG, .offset = AT(force),
	  .cmds = T | M | G | R, .group = GROUP_JOB,
	  .help = "replace an existing output file" },
	{ .name = "resume", .kind = K_FLAG, .offset = AT(resume),
	  .cmds = T | M | R, .group = GROUP_JOB,
	  .help = "continue the interrupted run of this job from\n"
		  "OUT.h5.progress (starts fresh when there is none)" },
	{ .name = "checkpoint-seconds", .kind = K_INT64,
	  .offset = AT(checkpoint_s), .lo = 0, .hi = INT64_MAX,
	  .cmds = T | M | R, .group = GROUP_RESOURCES, .metavar = "S",
	  .help = "record progress at most every S seconds, inside\n"
		  "a top-k round too, and always when interrupted;\n"
		  "0: after every query chunk",
	  .def = "60" },
	{ .name = "no-checkpoint", .kind = K_NOT_FLAG, .offset = AT(records),
	  .cmds = T | M | R, .group = GROUP_RESOURCES,
	  .help = "record no progress: an interrupted run keeps\n"
		  "nothing and starts over, and the inputs are not\n"
		  "hashed (short jobs; the Python package)" },
	{ .name = "peer-timeout", .kind = K_INT64,
	  .offset = AT(peer_timeout_s), .lo = 0, .hi = 86400,
	  .cmds = T | M | R, .group = GROUP_RESOURCES, .metavar = "S",
	  .help = "a rank not heard from for S seconds (dead node\n"
		  "or link) ends the job, exit 6; 0: never",
	  .def = "60" },
	{ .name = "mem-limit", .kind = K_SIZE, .offset = AT(mem_limit_bytes),
	  .cmds = T | M | R, .group = GROUP_RESOURCES, .metavar = "SIZE",
	  .help = "memory budget per rank: bytes, or with a suffix\n"
		  "K, M, G, T (binary: 1K = 1024), e.g. 512M, 2G",
	  .def = "available x fraction" },
	{ .name = "mem-fraction", .kind = K_FRACTION,
	  .offset = AT(mem_fraction), .cmds = T | M | R, .group = GROUP_RESOURCES,
	  .metavar = "F",
	  .help = "share of available memory used without\n"
		  "--mem-limit, 0 < F <= 1",
	  .def = "0.8" },
	{ .name = "chunk-rows", .kind = K_INT64, .offset = AT(chunk_rows),
	  .lo = 1, .hi = INT64_MAX, .cmds = T | M | R,
	  .group = GROUP_RESOURCES, .metavar = "ROWS",
	  .help = "force chunks of ROWS rows (tests); results stay\n"
		  "the same, only speed and memory change",
	  .def = "auto" },
	{ .name = "base-chunk-rows", .kind = K_INT64,
	  .offset = AT(base_chunk_rows), .lo = 1, .hi = INT64_MAX,
	  .cmds = T | M | R, .group = GROUP_RESOURCES, .metavar = "ROWS",
	  .help = "force base chunks of ROWS rows (tests; the\n"
		  "query chunks stay --chunk-rows or the plan's)",
	  .def = "auto" },
	{ .name = "device", .kind = K_DEVICE, .offset = AT(device),
	  .cmds = T | M | D | R, .group = GROUP_RESOURCES, .metavar = "DEVICE",
	  .help = "auto: a GPU per rank when every rank has one,\n"
		  "else the CPU; gpu: a GPU or an error; cpu",
	  .def = "auto" },
	{ .name = "gpu-mem-fraction", .kind = K_FRACTION,
	  .offset = AT(gpu_mem_fraction), .cmds = T | M | R,
	  .group = GROUP_RESOURCES, .metavar = "F",
	  .help = "share of a GPU's free memory used, 0 < F <= 1",
	  .def = "0.8" },
	{ .name = "gpu-share", .kind = K_FLAG, .offset = AT(gpu_share),
	  .cmds = T | M | D | R, .group = GROUP_RESOURCES,
	  .help = "let more ranks of a node than it has GPUs\n"
		  "share them (round robin)" },
	{ .name = "precision", .kind = K_PRECISION, .offset = AT(precision),
	  .cmds = T | R, .group = GROUP_RESOURCES, .metavar = "P",
	  .help = "GEMM that proposes candidates: auto, fp32, bf16;\n"
		  "tf32, fp16 (GPU); int8 (CPU); results are\n"
		  "rescored exactly whatever runs (auto: the one\n"
		  "measured fastest here on a sample of the job,\n"
		  "cached in ~/.cache/xjoin; range on a GPU runs\n"
		  "fp32)",
	  .def = "auto" },
	{ .name = "threads", .kind = K_INT, .offset = AT(threads), .lo = 1,
	  .hi = INT_MAX, .cmds = T | M | G | D | R, .group = GROUP_RESOURCES,
	  .metavar = "N", .help = "OpenMP threads per rank",
	  .def = "OMP_NUM_THREADS, else the rank's cores" },
	{ .name = "report-json", .kind = K_PATH, .offset = AT(report_json),
	  .cmds = T | M | R, .group = GROUP_GENERAL, .metavar = "FILE",
	  .help = "also write the final report as JSON to FILE" },
	{ .name = "config", .short_name = 'c', .kind = K_CONFIG,
	  .cmds = T | M | G | D | R, .group = GROUP_GENERAL, .metavar = "FILE",
	  .help = "INI job file of `option = value` lines; the rest\n"
		  "of the command line wins, wherever -c stands" },
	{ .name = "quiet", .kind = K_NOT_FLAG, .offset = AT(progress),
	  .cmds = T | M | G | D | R, .group = GROUP_GENERAL,
	  .help = "nothing printed on success: no progress lines,\n"
		  "job table, plan or report (warnings and errors\n"
		  "still go to stderr; report files are written)" },
	{ .name = "help", .short_name = 'h', .kind = K_HELP,
	  .cmds = T | M | G | D | I | R, .group = GROUP_GENERAL,
	  .help = "show this help and exit" },
	{ .name = "version", .kind = K_VERSION, .cmds = T | M | G | D | I | R,
	  .group = GROUP_GENERAL, .help = "show the version and exit" },
};

const struct command options_commands[] = {
	{ "topk", XJ_CMD_TOPK,
	  "the k nearest base rows of every query row (exact)" },
	{ "matrix", XJ_CMD_MATRIX,
	  "the full query x base distance matrix" },
	{ "range", XJ_CMD_RANGE,
	  "every base row within the threshold of each query row\n"
	  "(exact, no cap), written as CSR" },
	{ "plan", XJ_CMD_PLAN,
	  "print the rank grid, chunks and memory of topk, matrix or\n"
	  "range; compute nothing" },
	{ "gen", XJ_CMD_GEN,
	  "write random vectors (/train, /test) for tests and benchmarks" },
	{ "devices", XJ_CMD_DEVICES,
	  "one line per rank: the GPU it would use, or why none is\n"
	  "usable; computes nothing" },
	{ "inspect", XJ_CMD_INSPECT,
	  "describe an output (attributes, datasets, first rows) and\n"
	  "check every row; or an unfinished run's progress" },
};

_Static_assert(sizeof(options_table) / sizeof(options_table[0]) == N_OPTS,
	       "N_OPTS (options_int.h) must count the rows of options_table");
_Static_assert(sizeof(options_commands) / sizeof(options_commands[0]) ==
	       N_COMMANDS,
	       "N_COMMANDS (options_int.h) must count options_commands");

const char *options_command_name(xj_command cmd)
{
	size_t i;

	for (i = 0; i < N_COMMANDS; i++)
		if (options_commands[i].cmd == cmd)
			return options_commands[i].name;
	return "xjoin";
}
