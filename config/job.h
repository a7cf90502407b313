/*
 * job.h: the fully resolved parameters of one xjoin run.
 *
 * defines: xj_job, xj_metric, xj_command, xj_device_mode, job_defaults,
 *          job_check, job_print, metric_name, metric_parse,
 *          device_mode_name, device_mode_parse
 *
 * Resolution order: defaults < INI file (--config) < command line. Rank 0
 * resolves and validates; the struct is plain data (fixed-size strings, no
 * pointers) so it is broadcast to every rank as bytes.
 */
#ifndef XJ_JOB_H
#define XJ_JOB_H

#include <stdint.h>

#include "status.h"

#define XJ_PATH_MAX 1024
#define XJ_NAME_MAX 256

typedef enum xj_command {
	XJ_CMD_NONE = 0,
	XJ_CMD_TOPK,
	XJ_CMD_MATRIX,
	XJ_CMD_PLAN,    /* prints the plan; plan_of says for which command */
	XJ_CMD_GEN,
	XJ_CMD_DEVICES, /* one line per rank: the GPU it would use, or why none */
	XJ_CMD_INSPECT, /* describe and check an output file (rank 0 only) */
	XJ_CMD_RANGE,   /* every pair within the threshold, as CSR */
} xj_command;

typedef enum xj_metric {
	XJ_METRIC_L2 = 0,        /* Euclidean distance, smaller is better */
	XJ_METRIC_SQEUCLIDEAN,   /* squared Euclidean distance */
	XJ_METRIC_COSINE,        /* 1 - cos(q, b), smaller is better */
	XJ_METRIC_IP,            /* inner product, larger is better */
} xj_metric;

/* --device: which backend the ranks may use (app/plan/device.h decides). */
typedef enum xj_device_mode {
	XJ_DEVICE_AUTO = 0,      /* a GPU on every rank when all have one */
	XJ_DEVICE_GPU,           /* a GPU or an error */
	XJ_DEVICE_CPU,           /* never probe GPUs */
} xj_device_mode;

/* Arithmetic of the GEMM that proposes candidates. Every reported value is
 * rescored canonically whatever is chosen here; a lower precision only
 * widens the error bound (more candidates rescored). tf32 and fp16 run on
 * GPUs only, int8 on CPUs only; auto (the default) is resolved before
 * the run by measuring the candidates on a sample of the job
 * (app/plan/calib.h). */
typedef enum xj_precision {
	XJ_PREC_FP32 = 0,
	XJ_PREC_TF32,
	XJ_PREC_BF16,
	XJ_PREC_FP16,
	XJ_PREC_INT8,
	XJ_PREC_AUTO,
} xj_precision;

typedef struct xj_job {
	xj_command command;
	xj_command plan_of;           /* XJ_CMD_TOPK, _MATRIX or _RANGE for 'plan' */

	/* inputs: FILE[:DATASET]; dataset empty until resolved */
	char query_file[XJ_PATH_MAX];
	char query_dset[XJ_NAME_MAX];
	char base_file[XJ_PATH_MAX];
	char base_dset[XJ_NAME_MAX];
	char output[XJ_PATH_MAX];
	char config[XJ_PATH_MAX];     /* INI file the job came from, or "" */

	/* what to compute */
	xj_metric metric;
	int64_t k;
	int has_threshold;
	double threshold;             /* in the metric's own units */
	int self;                     /* exclude pairs (i, i) */
	int same_rows;                /* queries and base are one file's one
				       * dataset: a self-join may score each
				       * pair once (set after parsing) */
	int force;                    /* overwrite an existing output */
	int resume;                   /* continue an interrupted run */
	int64_t checkpoint_s;         /* seconds between progress records */
	int records;                  /* progress records at all (inputs
				       * hashed); --no-checkpoint clears */
	int64_t peer_timeout_s;       /* a silent rank is lost after this; 0: off */
	int64_t max_pairs;            /* range: stop past this many pairs; 0: no cap */

	/* resources */
	int64_t mem_limit_bytes;      /* 0: from available memory */
	double mem_fraction;          /* share of available memory, (0, 1] */
	int64_t chunk_rows;           /* 0: planner decides; >0 forces chunks */
	int64_t base_chunk_rows;      /* >0 forces base chunks (of the query
				       * chunk's size without it) */
	int threads;                  /* OpenMP threads per rank, 0: default */
	int progress;                 /* progress lines on stderr (rank 0) */
	char report_json[XJ_PATH_MAX];  /* JSON twin of the final report */
	xj_device_mode device;
	double gpu_mem_fraction;      /* share of a GPU's free memory, (0, 1] */
	int gpu_share;                /* allow more local ranks than GPUs */
	xj_precision precision;       /* candidate GEMM (auto until resolved) */
	int fp32_dnnl;                /* fp32 through oneDNN, not OpenBLAS
				       * (auto's measurement decides) */
	char precision_why[256];      /* how auto resolved, for the job table */

	/* gen */
	int64_t gen_rows;
	int64_t gen_dim;
	int64_t gen_queries;          /* rows of /test written next to /train */
	int64_t gen_clusters;         /* 0: Gaussian noise, >0: that many blobs */
	uint64_t seed;

	/* inspect */
	char inspect_file[XJ_PATH_MAX];   /* OUT.h5 to describe (positional) */
	int64_t inspect_rows;         /* query rows shown */
	int json;                     /* one JSON object instead of tables */

	/* resolved from the inputs (filled by app after probing) */
	int64_t n;                    /* query rows */
	int64_t m;                    /* base rows */
	int64_t d;                    /* dimension */
} xj_job;

/* Fill every field with its default. */
void job_defaults(xj_job *job);

/* Check options against each other (after parsing, before any input is
 * opened). Returns XJ_OK or XJ_EXIT_USAGE with a message. */
int job_check(const xj_job *job, xj_status *st);

/* Print the job as a "| name | value |" table on stdout. */
void job_print(const xj_job *job, int nranks);

const char *metric_name(xj_metric m);
/* Parse "l2", "sqeuclidean", "cosine", "ip"; returns 0 or -1. */
int metric_parse(const char *s, xj_metric *out);
/* 1 when larger values are better (ip), 0 for distances. */
int metric_larger_is_better(xj_metric m);

const char *device_mode_name(xj_device_mode d);
/* Parse "auto", "gpu", "cpu"; returns 0 or -1. */
int device_mode_parse(const char *s, xj_device_mode *out);

const char *precision_name(xj_precision p);
/* Parse "fp32", "tf32", "bf16", "fp16", "int8", "auto"; returns 0 or -1. */
int precision_parse(const char *s, xj_precision *out);

#endif
