#!/usr/bin/env bash
# gpu_ab.sh: the GPU top-k's variants side by side on one job, each
# output checked bit for bit against the first of its k, with the device
# time by kernel class that every run reports (no ncu needed).
#
#   scripts/bench/gpu_ab.sh [--bundle DIR] [--queries Q] [--rows N]
#                           [--quick | --passes] [--work DIR]
#                           [--timeout S] [--plumbing]
#
# Job: Q x N x 128 synthetic rows (`xjoin gen`; default 50,000 x
# 1,000,000), l2, --device $dev, HDF5 in and out. Variants (the A/B
# switches of kernels/cuda/backend_cuda.h, one binary):
#   tile-fp32          XJ_CUDA_SELECT=tile: the tile kernels (reference)
#   rowsel-fp32        the default selection in fp32
#   subscan-fp32, subscan-bf16   XJ_CUDA_SCAN=sub (a sub-tile at a time)
#   rowsel-bf16, rowsel-auto
#   rowsel-fp16, ftile-fp16   fp16 with its 16-bit tile (the default)
#                      and with a float tile (XJ_CUDA_TILE16=0)
#   fmin-fp32, fmin-fp16, fmin4-fp16   XJ_CUDA_FMIN=1 (the last with
#                      XJ_CUDA_RS_BLOCKS=4: the kernel without spills)
#   rows4096-fp16      XJ_CUDA_PASS_ROWS=4096
#   rows4-fp32, rows4b4-fp32, rows2-fp16, rows4-fp16, rows4b4-fp16,
#   rows4p4096-fp16, rows8p8192-fp16
#                      XJ_CUDA_RS_ROWS=R: R query rows a block (fn2 and
#                      the prologue shared; b4 with XJ_CUDA_RS_BLOCKS=4,
#                      pN with passes of N rows: as many blocks as one
#                      row a block in passes of 2,048)
#   l2fit-fp16, l2fit-rows4-fp16   XJ_CUDA_PASS_COLS=4096: fp16 tiles of
#                      16 MiB, two of which fit an H100's L2
#   nopipe-fp32        XJ_CUDA_PIPELINE=0
#   pass4k-fp32, pass8k-fp32, pass32k-fp32   XJ_CUDA_PASS_COLS
#   noseed-fp32        XJ_CUDA_SEED=0
#   untimed-fp32       XJ_CUDA_TIMING=0 (what the events cost)
#   rowsel-tf32, tile-bf16, pass4k-bf16, pass32k-bf16
#   k=1000: tile-fp32, rowsel-fp32, subscan-fp32, rowsel-bf16
# then a self-join (one file on both sides: the default, the block pairs
# of XJ_CUDA_SYM=1, and the passes read once for both sides of
# XJ_CUDA_SYM=2 in fp16 and fp32) against the same rows as two files with
# --self (the plain path, same output), and a range join at about 10 and 1,000
# pairs per query (thresholds from a top-k of the first 1,000 queries) on
# the GPU and on the CPU (all cores). --quick keeps the first seven
# (rowsel-fp16: fp16 with its 16-bit tile), k = 1000 and the self-joins.
# --passes runs the selection's study instead of the first list: the
# tile kernels as the reference, then rowsel in fp32, tf32 and bf16, fp16
# with its 16-bit tile, with a float tile and without the pipeline
# (XJ_CUDA_PIPELINE=0: each kernel class alone), XJ_CUDA_FMIN=1 (fp32,
# fp16, fp16 at 4 blocks an SM), XJ_CUDA_RS_ROWS (4 in fp32 and fp16,
# each also at 4 blocks an SM; fp16: 2, and 4 and 8 in passes of 4,096
# and 8,192 rows), passes of 4,096 columns in fp16 (tiles that fit the
# L2, one row and four rows a block), auto, k = 1000 (fp32, bf16, fp16), the scan alone (a
# threshold no pair passes: the read of the tile) in fp32, of the 16-bit
# tile, with XJ_CUDA_FMIN and with XJ_CUDA_RS_ROWS=4; the self-joins
# (without the block pairs) come first, after the tile reference, so that
# a session step's time limit cannot cut them; the range joins last.
#
# Prints a `time` line per run and a table: compute seconds, TFLOP/s,
# rescored candidates per query, each kernel class's share of the device
# time, and `same` / `DIFF` against the variant's reference.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bundle=
queries=50000
rows=1000000
quick=0
passes=0
work=${TMPDIR:-/tmp}/xjoin-gpu-ab
limit=60
dev=gpu
while [ $# -gt 0 ]; do
	case $1 in
	--bundle) bundle=$2; shift 2 ;;
	--queries) queries=$2; shift 2 ;;
	--rows) rows=$2; shift 2 ;;
	--quick) quick=1; shift ;;
	--passes) passes=1; quick=1; shift ;;
	--work) work=$2; shift 2 ;;
	--timeout) limit=$2; shift 2 ;;
	--plumbing) dev=cpu; queries=${queries/50000/500}; rows=${rows/1000000/20000}
		shift ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "gpu_ab.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done
if [ -n "$bundle" ]; then
	# shellcheck source=/dev/null
	. "$bundle/env.sh" || exit 1
	xjoin=$XJ_BUNDLE/bin/xjoin
else
	xjoin=${XJOIN:-$root/build/xjoin}
fi
py=${PYTHON:-}
if [ -z "$py" ]; then   # a Python with h5py and numpy (compare.py)
	for p in python3 /opt/torch/.venv/bin/python3 /usr/bin/python3; do
		if "$p" -c 'import h5py, numpy' 2>/dev/null; then py=$p; break; fi
	done
fi
[ -n "$py" ] || { echo "gpu_ab.sh: no python3 with h5py and numpy" >&2; exit 1; }
mkdir -p "$work" || exit 1
echo "# gpu_ab $(date -u +%Y-%m-%dT%H:%M:%SZ): $queries x $rows x 128, l2"
[ $dev = cpu ] || nvidia-smi -L 2>/dev/null || { echo "no GPU: skipped"; exit 0; }
data=$work/syn-$queries-$rows.h5
[ -f "$data" ] || "$xjoin" gen --rows "$rows" --queries "$queries" --dim 128 \
	-o "$data" --quiet || exit 1

results=$work/results.tsv
: >"$results"
# run NAME REF ENV... -- ARGS...: one job; its report's line in results.tsv
run() {
	local name=$1 ref=$2 envs=() rc=0
	shift 2
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	env "${envs[@]}" timeout "$limit" "$xjoin" "$@" -o "$work/$name.h5" \
		--force --quiet --report-json "$work/$name.json" \
		>"$work/$name.out" 2>&1 || rc=$?
	if [ $rc != 0 ]; then
		echo "# $name failed (exit $rc):"; tail -3 "$work/$name.out"
		return 1
	fi
	local same=ref
	if [ "$ref" != - ]; then
		if "$py" "$root/tests/integration/compare.py" "$work/$name.h5" \
			"$work/$ref.h5" >"$work/$name.cmp" 2>&1; then
			same=same
		else
			same=DIFF
			head -3 "$work/$name.cmp"
		fi
	fi
	"$py" - "$work/$name.json" "$name" "$same" "$ref" >>"$results" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); ph = r["phase_seconds"]
km = r.get("kernel_ms", {}); s = sum(km.values()) or 1.0
print("\t".join([sys.argv[2], "%.3f" % ph["compute"],
                 "%.1f" % (r["gemm_flops"] / max(ph["compute"], 1e-9) / 1e12),
                 "%.1f" % r.get("rescored_per_query", 0),
                 " ".join("%s=%.0f%%" % (k, 100 * v / s) for k, v in km.items() if v),
                 sys.argv[3] + ("" if sys.argv[4] == "-" else "(" + sys.argv[4] + ")"),
                 r.get("backend_detail", "")]))
PY
	echo "time $(tail -1 "$results" | cut -f1-4 | tr '\t' ' ')"
}

# a self-join against the same rows as two files (--self: the plain path),
# as one file (the self-join's path: the plain passes), in block pairs and
# in passes read once for both sides (once.cuh)
self_join_rows() {
	self_rows=$(( rows / 5 ))
	sdata=$work/self-$self_rows.h5
	[ -f "$sdata" ] || "$xjoin" gen --rows "$self_rows" --dim 128 --seed 7 \
		-o "$sdata" --quiet
	cp -f "$sdata" "$work/self-copy.h5"
	run plain-self - -- topk -q "$sdata:/train" -b "$work/self-copy.h5:/train" \
		--self -k 10 -m l2 --device $dev
	run self-join plain-self -- topk -q "$sdata:/train" -b "$sdata:/train" \
		-k 10 -m l2 --device $dev
	[ $passes = 0 ] && run self-pairs plain-self XJ_CUDA_SYM=1 -- topk -q "$sdata:/train" \
		-b "$sdata:/train" -k 10 -m l2 --device $dev
	# each pair in one GEMM, the tile read once for both sides (once.cuh)
	run self-once plain-self XJ_CUDA_SYM=2 -- topk -q "$sdata:/train" \
		-b "$sdata:/train" -k 10 -m l2 --device $dev
	run self-once-fp32 plain-self XJ_CUDA_SYM=2 -- topk -q "$sdata:/train" \
		-b "$sdata:/train" -k 10 -m l2 --device $dev --precision fp32
}

job=(topk -q "$data" -b "$data" -m l2 --device $dev)
run tile-fp32 - XJ_CUDA_SELECT=tile -- "${job[@]}" -k 10 --precision fp32
# --passes: the self-join first, within the session step's time limit
[ $passes = 1 ] && self_join_rows
if [ $passes = 1 ]; then
	for p in fp32 tf32 bf16; do
		run rowsel-$p tile-fp32 -- "${job[@]}" -k 10 --precision $p
	done
	# fp16: its 16-bit tile (the default), then a float tile
	run rowsel-fp16 tile-fp32 -- "${job[@]}" -k 10 --precision fp16
	run ftile-fp16 tile-fp32 XJ_CUDA_TILE16=0 -- "${job[@]}" -k 10 --precision fp16
	# without the pipeline: each kernel class's time alone
	run nopipe-fp16 tile-fp32 XJ_CUDA_PIPELINE=0 -- "${job[@]}" -k 10 --precision fp16
	# fn2 read only for groups past their sub-tile's smallest fn2
	run fmin-fp32 tile-fp32 XJ_CUDA_FMIN=1 -- "${job[@]}" -k 10 --precision fp32
	run fmin-fp16 tile-fp32 XJ_CUDA_FMIN=1 -- "${job[@]}" -k 10 --precision fp16
	run fmin4-fp16 tile-fp32 XJ_CUDA_FMIN=1 XJ_CUDA_RS_BLOCKS=4 -- "${job[@]}" -k 10 --precision fp16
	# passes of 4,096 rows (fp32 gained 4% so, 2026-11-27)
	run rows4096-fp16 tile-fp32 XJ_CUDA_PASS_ROWS=4096 -- "${job[@]}" -k 10 --precision fp16
	# R query rows a block: a group's fn2 read once for the R rows,
	# one prologue; 1/R of the blocks (hence b4 and the larger passes)
	run rows4-fp32 tile-fp32 XJ_CUDA_RS_ROWS=4 -- "${job[@]}" -k 10 --precision fp32
	run rows4b4-fp32 tile-fp32 XJ_CUDA_RS_ROWS=4 XJ_CUDA_RS_BLOCKS=4 -- "${job[@]}" -k 10 --precision fp32
	run rows2-fp16 tile-fp32 XJ_CUDA_RS_ROWS=2 -- "${job[@]}" -k 10 --precision fp16
	run rows4-fp16 tile-fp32 XJ_CUDA_RS_ROWS=4 -- "${job[@]}" -k 10 --precision fp16
	run rows4b4-fp16 tile-fp32 XJ_CUDA_RS_ROWS=4 XJ_CUDA_RS_BLOCKS=4 -- "${job[@]}" -k 10 --precision fp16
	run rows4p4096-fp16 tile-fp32 XJ_CUDA_RS_ROWS=4 XJ_CUDA_PASS_ROWS=4096 -- "${job[@]}" -k 10 --precision fp16
	run rows8p8192-fp16 tile-fp32 XJ_CUDA_RS_ROWS=8 XJ_CUDA_PASS_ROWS=8192 -- "${job[@]}" -k 10 --precision fp16
	# passes whose 16-bit tiles fit the L2 (2,048 x 4,096 x 2 bytes:
	# 16 MiB a buffer, two in the pipeline, of the H100's 50 MB), so
	# the scan may read what the GEMM just wrote from L2
	run l2fit-fp16 tile-fp32 XJ_CUDA_PASS_COLS=4096 -- "${job[@]}" -k 10 --precision fp16
	run l2fit-rows4-fp16 tile-fp32 XJ_CUDA_PASS_COLS=4096 XJ_CUDA_RS_ROWS=4 -- "${job[@]}" -k 10 --precision fp16
	run rowsel-auto tile-fp32 -- "${job[@]}" -k 10 --precision auto
	run tile-fp32-k1000 - XJ_CUDA_SELECT=tile -- "${job[@]}" -k 1000 --precision fp32
	run rowsel-fp32-k1000 tile-fp32-k1000 -- "${job[@]}" -k 1000 --precision fp32
	run rowsel-bf16-k1000 tile-fp32-k1000 -- "${job[@]}" -k 1000 --precision bf16
	run rowsel-fp16-k1000 tile-fp32-k1000 -- "${job[@]}" -k 1000 --precision fp16
	# the scan alone: a threshold no pair passes (nothing rescored)
	run scan-tile-fp32 - XJ_CUDA_SELECT=tile -- "${job[@]}" -k 10 --precision fp32 -t 0.001
	run scan-fp32 scan-tile-fp32 -- "${job[@]}" -k 10 --precision fp32 -t 0.001
	run scan-fp16 scan-tile-fp32 -- "${job[@]}" -k 10 --precision fp16 -t 0.001
	run scan-fmin-fp16 scan-tile-fp32 XJ_CUDA_FMIN=1 -- "${job[@]}" -k 10 --precision fp16 -t 0.001
	run scan-rows4-fp16 scan-tile-fp32 XJ_CUDA_RS_ROWS=4 -- "${job[@]}" -k 10 --precision fp16 -t 0.001
else
run rowsel-fp32 tile-fp32 -- "${job[@]}" -k 10 --precision fp32
run subscan-fp32 tile-fp32 XJ_CUDA_SCAN=sub -- "${job[@]}" -k 10 --precision fp32
run rowsel-bf16 tile-fp32 -- "${job[@]}" -k 10 --precision bf16
run subscan-bf16 tile-fp32 XJ_CUDA_SCAN=sub -- "${job[@]}" -k 10 --precision bf16
run rowsel-auto tile-fp32 -- "${job[@]}" -k 10 --precision auto
run rowsel-fp16 tile-fp32 -- "${job[@]}" -k 10 --precision fp16
if [ $quick = 0 ]; then
	run ftile-fp16 tile-fp32 XJ_CUDA_TILE16=0 -- "${job[@]}" -k 10 --precision fp16
	run nopipe-fp32 tile-fp32 XJ_CUDA_PIPELINE=0 -- "${job[@]}" -k 10 --precision fp32
	run pass4k-fp32 tile-fp32 XJ_CUDA_PASS_COLS=4096 -- "${job[@]}" -k 10 --precision fp32
	run pass8k-fp32 tile-fp32 XJ_CUDA_PASS_COLS=8192 -- "${job[@]}" -k 10 --precision fp32
	run pass32k-fp32 tile-fp32 XJ_CUDA_PASS_COLS=32768 -- "${job[@]}" -k 10 --precision fp32
	run noseed-fp32 tile-fp32 XJ_CUDA_SEED=0 -- "${job[@]}" -k 10 --precision fp32
	run untimed-fp32 tile-fp32 XJ_CUDA_TIMING=0 -- "${job[@]}" -k 10 --precision fp32
	run rowsel-tf32 tile-fp32 -- "${job[@]}" -k 10 --precision tf32
	run tile-bf16 tile-fp32 XJ_CUDA_SELECT=tile -- "${job[@]}" -k 10 --precision bf16
	run pass4k-bf16 tile-fp32 XJ_CUDA_PASS_COLS=4096 -- "${job[@]}" -k 10 --precision bf16
	run pass32k-bf16 tile-fp32 XJ_CUDA_PASS_COLS=32768 -- "${job[@]}" -k 10 --precision bf16
fi
run tile-fp32-k1000 - XJ_CUDA_SELECT=tile -- "${job[@]}" -k 1000 --precision fp32
run rowsel-fp32-k1000 tile-fp32-k1000 -- "${job[@]}" -k 1000 --precision fp32
run subscan-fp32-k1000 tile-fp32-k1000 XJ_CUDA_SCAN=sub -- "${job[@]}" -k 1000 --precision fp32
run rowsel-bf16-k1000 tile-fp32-k1000 -- "${job[@]}" -k 1000 --precision bf16
fi

[ $passes = 0 ] && self_join_rows

# range joins at about 10 and 1,000 pairs per query, GPU against CPU
rq=$(( queries / 5 ))
rdata=$work/range-$rq-$((rows / 10)).h5
[ -f "$rdata" ] || "$xjoin" gen --rows $((rows / 10)) --queries $rq --dim 128 \
	--clusters 100 --seed 11 -o "$rdata" --quiet
for kk in 10 1000; do
	[ $quick = 1 ] && [ $passes = 0 ] && continue
	"$xjoin" topk -q "$rdata:/test" -b "$rdata" -k $kk -m sqeuclidean \
		--device $dev -o "$work/thr$kk.h5" --force --quiet >/dev/null 2>&1
	t=$("$py" -c 'import h5py, numpy, sys
with h5py.File(sys.argv[1]) as f: print(repr(float(numpy.median(f["distances"][:1000, -1]))))' \
		"$work/thr$kk.h5" 2>/dev/null) || continue
	run range$kk-cpu - -- range -q "$rdata:/test" -b "$rdata" -t "$t" \
		-m sqeuclidean --device cpu
	run range$kk-gpu range$kk-cpu -- range -q "$rdata:/test" -b "$rdata" \
		-t "$t" -m sqeuclidean --device $dev
	run range$kk-gpu-tile range$kk-cpu XJ_CUDA_SELECT=tile -- range \
		-q "$rdata:/test" -b "$rdata" -t "$t" -m sqeuclidean --device $dev
done

echo "# variant            compute_s  TFLOP/s  rescored/q  output  kernels (share of device time); how"
awk -F'\t' '{ printf "  %-18s %9s %8s %11s  %-16s %s; %s\n", $1, $2, $3, $4, $6, $5, $7 }' "$results"
rm -f "$work"/*.h5.partial
