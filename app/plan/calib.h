/*
 * calib.h: --precision auto by measurement. Every candidate precision
 * gives the same bits (the rescoring is canonical), so auto takes the one
 * that runs this job's shape fastest here: each candidate the build and
 * the device offer runs a top-k (or range join) of a sample of the job's
 * own rows, its GEMM and the rescoring its bound lets through, and the
 * fastest wins. The result is cached per host, processor, libraries and
 * job shape, so later runs start at once.
 *
 * defines: calib_choice, calib_precision, calib_entry, calib_cache_path,
 *          calib_cache_get, calib_cache_put, calib_key_hash
 *
 * Candidates: on the CPU fp32 through OpenBLAS and through oneDNN, bf16
 * where the CPU has bf16 dot products, int8 where it has VNNI or AMX; on
 * a GPU fp16 (its 16-bit tile), bf16, tf32 and fp32. A small run cannot
 * stand for the job as it is (per-row costs such as norms, packing and a
 * query's first candidates weigh far more in it), so each candidate gets
 * a model: a run of nq x nb rows takes a nq + b nb + c nq nb + e nq
 * (log2 nb - 20) seconds, fitted from runs of the inputs' first rows
 * (calib.c: on a CPU one run of q query rows, 512 a thread, against two
 * parts of b base rows, 8,192 x 128 / d, the pairs' cost from the
 * second; on a GPU runs of (q, b), (2q, b) and (q, 2b), q = 16,384 and b
 * = 65,536 x 128 / d, the pairs' cost from the kernels' device time),
 * and the model that predicts the job's n x m fastest wins. Where the
 * backend times its work on candidates (the CPU's top-k), that part is
 * taken apart first: its pairs a query row grow with the log of the base
 * rows, not with their number, so the fourth term e nq (log2 nb - 20)
 * carries them to the job's size. Jobs under 50 GFLOP (CPU) or 10 TFLOP
 * (GPU; XJOIN_CALIB_MIN_GFLOP sets another floor) are not measured: they
 * take the cached model of their shape when there is one, else bf16 on a
 * CPU that multiplies bf16 natively, else fp32. Rank 0 decides and every
 * rank takes its choice.
 *
 * The cache is one INI file (calib_cache_path: $XJOIN_CACHE_DIR, else
 * $XDG_CACHE_HOME/xjoin, else ~/.cache/xjoin, file precision.ini) that a
 * user may read, edit or delete:
 *
 *   # xjoin: what --precision auto measured here; delete to measure again
 *   [xjoin-precision]
 *   format = 4
 *   [measured]
 *   1f2e3d4c5b6a7988 = bf16 fp32:0/0/1.67e-09/0 bf16:3.2e-06/1.7e-07/9.1e-10/2e-08
 *   1f2e3d4c5b6a7988.key = cpu|node1|AMD EPYC 9R14|...|l2 d128 k16 topk
 *   [end]
 *   entries = 1
 *
 * The name is calib_key_hash of the key, which a line under it spells
 * out (keys stay under 160 characters: inih reads lines of 200). A file
 * that is not such a cache, or is cut short (no [end] with the right
 * count), or holds a choice that is not a candidate, is ignored
 * with one warning and measured again; a cache that cannot be written
 * (a read-only home) leaves one warning and the run goes on. Writers
 * write a temporary file and rename it over the cache, so readers, and
 * ranks or jobs writing at once, always see a whole file; they take
 * turns (flock on precision.ini.lock, a second at most) so that one's
 * entry is not lost to another's rename.
 */
#ifndef XJ_CALIB_H
#define XJ_CALIB_H

#include <stddef.h>
#include <stdint.h>

#include "../../config/job.h"
#include "../../config/status.h"
#include "../../io/h5in.h"
#include "../run/comm.h"
#include "device.h"

/* Rank 0 measures (or reads the cache) and every rank learns the
 * choice: job->precision, job->fp32_dnnl and job->precision_why are set
 * on every rank. Called when job->precision is auto, after the device is
 * chosen. Collective. A measurement that fails (an input that the run's
 * validation will reject, say) keeps device_select's rule and says so. */
int calib_precision(xj_job *job, const xj_comm *c,
		    const xj_device_choice *dev, const h5in_info *qinfo,
		    const h5in_info *binfo, int threads, xj_status *st);

/* A run's part (calib.c): its seconds and, of them, the backend's
 * rescoring and base rows' preparation, and the pairs it rescored; dev:
 * the device seconds of its pairs' kernels (a GPU's GEMMs and selection,
 * summed over streams; not its rows' uploads and preparation), 0 where
 * the backend does not time its kernels. */
typedef struct calib_shot {
	double t, rescore_s, rows_s, rescored, dev;
} calib_shot;

/* A GPU candidate's model a nq + b nb + c nq nb + e nq (log2 nb - 20)
 * (abce) from the best runs of the shapes (q, b), (2q, b) and (q, 2b);
 * timed: the backend timed its kernels (c from their device time, else
 * from wall times). calib.c, measure_shapes, says how. */
void calib_fit_shapes(const calib_shot *s1, const calib_shot *sa2,
		      const calib_shot *sb2, int64_t q, int64_t b, int timed,
		      double abce[4]);

/* ---- the cache (calib_cache.c) ----------------------------------------- */

typedef struct calib_entry {
	char key[512];      /* what was measured, in words */
	char choice[16];    /* the candidate that won: fp32, fp32-dnnl, ... */
	char times[192];    /* "name:a/b/c" of each candidate, spaced (the
			     * model; 1 to 4 numbers a word are read) */
} calib_entry;

/* The cache file's path, "" when there is no place for one. */
void calib_cache_path(char *buf, size_t n);
/* 64-bit FNV-1a of the key, as 16 hex digits (the INI name). */
void calib_key_hash(const char *key, char out[17]);
/* 1 and *e when path holds key's entry, 0 when it does not (or there is
 * no file), -1 when the file is not a valid cache (why: one line). */
int calib_cache_get(const char *path, const char *key, calib_entry *e,
		    char *why, size_t n);
/* e added to the file (replacing key's old entry; the others kept when
 * the file is a valid cache), through a temporary file renamed over it.
 * 0, or -1 with why. */
int calib_cache_put(const char *path, const calib_entry *e, char *why,
		    size_t n);

#endif
