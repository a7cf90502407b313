/*
 * plan.h: the decomposition and memory plan of a run. Pure functions: no
 * MPI, no I/O, no device calls, so every rank derives the same plan and the
 * unit tests can probe any shape.
 *
 * app/plan/ owns what runs where and how it is reported: the plan
 * (plan.c), node memory and cores (mem.c), the backend and GPU of each
 * rank (device.c, cuda_module.c: the CUDA module loaded at run time),
 * the timers and final report (report.c) and `xjoin gen`'s synthetic
 * inputs (gen.c).
 *
 * defines: plan_in, plan, plan_make, plan_make_device, plan_device_bytes,
 *          plan_rank_view, plan_print
 *
 * Grid: P ranks form Pr x Pc (rank = row * Pc + col). Query rows are split
 * over the Pr grid rows, base rows over the Pc grid columns; (Pr, Pc) is
 * the factor pair of P minimising the rows each rank must read,
 * ceil(n/Pr) + ceil(m/Pc) (ties: the smaller Pc, so less merging). d is
 * never split.
 *
 * Chunks: one query chunk (qchunk_rows) is resident while base chunks
 * (bchunk_rows) stream past it. Per rank, the planner's memory formula is
 *
 *   topk:   Q * (d*4*cq + work_per_qrow + 4*k*12) + B * d*4*cb + work_fixed
 *   matrix: Q * (d*4*cq + B*4*nout)               + B * d*4*cb + work_fixed
 *   range:  Q * (d*4*cq + work_per_qrow + m*36)   + B * d*4*cb + work_fixed
 *
 * with Q = qchunk_rows, B = bchunk_rows, cq = cb = 2 for cosine (a
 * normalised copy) and 1 otherwise, 4*k*12 the local, received and merged
 * k-lists (float key + int64 index per entry; the local ones are sent as
 * they are) and those a round started from or last recorded (its
 * progress, app/driver/snapshot.h), work_* from the
 * backend, which must fit in the budget less a reserve of 1/8 (at most
 * 256 MiB) for library caches and allocator slack. B*4*nout are the
 * matrix's output blocks, nout = out_blocks: with 2, one is written while
 * the next is computed. Q is made
 * as large as the budget allows (each query chunk re-reads the base
 * shard), up to 16384 rows for the matrix, whose base reads are then at
 * most d/16384 of its output bytes and whose blocks stay within 256 MiB.
 * B is at most 16384 rows (4096 for the matrix) and halves while Q would
 * fall below 256 rows.
 *
 * Matrix on P > 1 ranks (not of a set with itself, whose square blocks
 * are dealt in turn): the shares are whole chunks of the output file,
 * so that every rank writes whole HDF5 chunks (O_DIRECT, io/h5out.h)
 * rather than pieces of chunks its neighbour shares. Base shards are
 * multiples of balign columns (1024 where the base chunk is a multiple of
 * it, else the base chunk), the file's chunk width; query blocks are
 * multiples of the query chunk, itself evened out to the block
 * (ceil(block / rounds)), whose equal parts are the file's chunk rows. A
 * share is then at most one unit larger than an even split's.
 *
 * Range: the grid is P x 1 (no merge; whole rows per rank) and query
 * chunks are dealt round robin (app/driver/driver_range.c). m*36 bounds a query
 * row's pairs when every base row is within the threshold: 12 bytes per
 * pair in the backend's list (24 while it grows by doubling) plus 12 in
 * the write buffers. So memory stays within the budget whatever the data.
 *
 * Self-join (plan_in.self_join): a base chunk's rows that are also the
 * query chunk's are joined with each other once per pair (half the GEMM:
 * kernels/cpu/cpu_topk_sym.c, kernels/cuda/topk_cuda.cu), so B grows up to Q (at most 131072 rows, as
 * far as the budget allows) and Q becomes a multiple of B: with one grid
 * row, each query chunk is then exactly one of the base chunks. A backend
 * that scores them once across base chunks too (plan_in.self_cross, the
 * CPU's) keeps the query chunk as large as the budget allows and the
 * base chunks of a plain top-k: each pair of a query chunk's own rows is
 * scored once whatever the base chunks, and a backend call (at most B x
 * Q pairs) stays short.
 *
 * On P > 1 ranks a self-join of 1024 rows or more is split instead when
 * all n rows fit one query chunk (or --chunk-rows forces chunks of 1024
 * rows or more): a 1 x P grid where
 * every rank holds the same query chunks and streams the whole base, and
 * scores share `rank` of each chunk's pairs (the block pairs of the
 * shared rows dealt in turn, the other pairs split by query row); the
 * merge over the grid row, which is every rank, gathers each row's lists
 * from all shares. The triangle is then balanced over the ranks.
 */
#define PLAN_RANGE_PAIR_BYTES 36
#ifndef XJ_PLAN_H
#define XJ_PLAN_H

#include <stdint.h>
#include <stdio.h>

#include "../../config/job.h"
#include "../../config/split.h"
#include "../../config/status.h"

typedef struct plan_in {
	xj_command cmd;            /* XJ_CMD_TOPK, _MATRIX or _RANGE */
	xj_metric metric;
	int64_t n, m, d, k;        /* global shapes; k = 0 for matrix */
	int nranks;
	int64_t budget_bytes;      /* per rank (the smallest of all ranks) */
	int64_t chunk_rows;        /* > 0: force both chunk sizes (capped) */
	int64_t bchunk_rows;       /* > 0: force the base chunk's (capped) */
	int64_t work_fixed_bytes;  /* backend bytes independent of chunks */
	int64_t work_per_qrow_bytes; /* backend bytes per query row */
	int out_blocks;            /* matrix output blocks held at once: 2
				    * where one is computed while the other
				    * is written (both backends), else 1 (0
				    * means 1) */
	int same_rows;             /* queries and base are the same rows: a
				    * matrix computes the upper triangle
				    * (app/driver/driver_matrix.c) */
	int self_join;             /* topk of a set with itself on a backend
				    * that scores the rows a base chunk
				    * shares with the query chunk once
				    * (CPU, CUDA): base chunks grow
				    * to the query
				    * chunk, up to BCHUNK_SELF_MAX rows */
	int self_cross;            /* ... and the backend scores the pairs
				    * of a query chunk's rows once across
				    * base chunks too (the CPU's): the query
				    * chunk as large as it fits, base chunks
				    * as a plain top-k's */
} plan_in;

typedef struct plan {
	int pr, pc;                /* grid */
	int64_t qblock_max;        /* largest query block (rows) */
	int64_t bshard_max;        /* largest base shard (rows) */
	int64_t qchunk_rows;       /* resident query rows */
	int64_t bchunk_rows;       /* streamed base rows */
	int64_t qrounds;           /* query chunks of the largest block */
	int64_t brounds;           /* base chunks of the largest shard */
	int split;                 /* self-join split (plan_in.self_join):
				    * a 1 x P grid whose ranks all hold
				    * the whole base as their shard and
				    * score share `rank` of each chunk's
				    * pairs (xj_backend_cfg.part) */
	int64_t qalign, balign;    /* matrix: query blocks and base shards
				    * split in multiples of these rows
				    * (0: split_block's even split) */
	int64_t peak_bytes;        /* formula above at the chosen sizes */
	int64_t budget_bytes;
} plan;

/* Derive the plan. XJ_EXIT_RESOURCE when even one row of each does not fit
 * the budget, naming the bytes needed. */
int plan_make(const plan_in *in, plan *out, xj_status *st);

/* A device backend's memory as the planner sees it: the CUDA module's
 * work_bytes, pinned_bytes and merge_bytes (kernels/cuda/backend_cuda.h). */
struct xj_backend_cfg;
typedef struct plan_device_bytes {
	int64_t (*work)(const struct xj_backend_cfg *cfg, int64_t qrows,
			int64_t brows);
	int64_t (*pinned)(const struct xj_backend_cfg *cfg, int64_t brows);
	int64_t (*merge)(const struct xj_backend_cfg *cfg, int64_t qrows,
			 int pc);
} plan_device_bytes;

/* plan_make for a device backend: its fixed and per-query-row bytes
 * (from fn, for cfg) fill pin's work_* fields, with two output blocks
 * (the device computes one while the other is written). Pure, like
 * plan_make: scripts/gpu-check.sh evaluates it without a GPU. */
int plan_make_device(plan_in *pin, const struct xj_backend_cfg *cfg,
		     const plan_device_bytes *fn, plan *out, xj_status *st);

/* The budget less the reserve for library caches and allocator slack. */
int64_t plan_usable_bytes(const plan_in *in);

/* One rank's share. */
typedef struct plan_rank_view {
	int row, col;
	int64_t q0, qrows;         /* query block */
	int64_t b0, brows;         /* base shard */
	int64_t nqchunks, nbchunks;
} plan_rank_view;

void plan_rank(const plan_in *in, const plan *p, int rank,
	       plan_rank_view *v);

/* Columns of a matrix output's HDF5 chunk for base chunks of bc rows over
 * m columns: bc, so that a block covers whole chunks of its columns, when
 * the last chunk column's padding (HDF5 allocates and writes whole
 * chunks) stays within 1/16 of m; else 0, full-width chunks. */
int64_t plan_matrix_chunk_cols(int64_t m, int64_t bc);

/* Print the plan (grid, blocks, chunk sizes, memory formula) as a table. */
/* The square blocks of a matrix of a set with itself (the upper triangle,
 * app/driver/driver_matrix.c): the smaller chunk, and at most n/16 rows (rounded
 * up to 256) so that the diagonal blocks, computed whole, stay a small
 * part of the triangle (1/16 of the blocks computed at most: 1.88x fewer
 * than the whole matrix); less while three of them (two computed in turn
 * and a transpose) would pass the plan's two output blocks. */
int64_t plan_tri_side(const plan_in *in, const plan *p);
void plan_print(FILE *out, const plan_in *in, const plan *p);

#endif
