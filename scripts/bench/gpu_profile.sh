#!/usr/bin/env bash
# gpu_profile.sh: where xjoin's GPU top-k spends its device time.
#
#   scripts/bench/gpu_profile.sh [--bundle DIR] [--queries Q] [--rows N]
#                                [--ncu-queries Q2] [--ncu-rows N2]
#                                [--no-ncu] [--tag NAME] [--rowsel]
#                                [--work DIR] [--out DIR]
#
# On Q x N x 128 synthetic rows (`xjoin gen`; default 100,000 x 1,000,000),
# l2, k = 10:
#   1. xjoin --device gpu in fp32 and bf16, each with --report-json
#      (phase seconds, GEMM FLOP): `time` lines with TFLOP/s;
#   2. ncu (Nsight Compute, --clock-control none: the card's clocks as
#      found) on a smaller job of Q2 x N2 rows (default 5,000 x 200,000:
#      ncu slows every launch, and the 50,000 x 1M job did not end in 150 s
#      under it) over 80 launches in the steady state (after the first
#      1000 of its about 2,000), gpu__time_duration per kernel: the share
#      of each kernel (cuBLAS's
#      GEMM, the scan, the rescoring, the merge) in one tile's time.
# Writes OUT/xjoin-fp32NAME.json, OUT/xjoin-bf16NAME.json, OUT/ncuNAME.csv
# and prints a table of mean microseconds per launch and share per kernel
# name. --no-ncu stops after step 1; --tag NAME names a variant (e.g. a
# run under XJ_CUDA_MERGE_SORT=radix) in the file names and `time` lines.
# --rowsel runs only ncu's sections for the top-k's selection kernel
# (rowsel_kernel, 3 launches after the first 4, on the Q2 x N2 job):
# throughput against the card's peak, DRAM bytes, occupancy and the warps'
# stall reasons, into OUT/ncu-rowselNAME.txt, with the lines that say
# whether the scan runs at the memory's rate (2026-11-27 on an H100 it
# read the tile at 1.2 TB/s of 3.35); then the same for four rows a block
# (XJ_CUDA_RS_ROWS=4: rowsel_rows_kernel) into OUT/ncu-rowselNAME-rows4.txt.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bundle=
queries=100000
rows=1000000
nq=5000
nr=200000
work=${TMPDIR:-/tmp}/xjoin-gpu-profile
out=
ncu_on=1
rowsel=0
tag=
while [ $# -gt 0 ]; do
	case $1 in
	--bundle) bundle=$2; shift 2 ;;
	--queries) queries=$2; shift 2 ;;
	--rows) rows=$2; shift 2 ;;
	--ncu-queries) nq=$2; shift 2 ;;
	--ncu-rows) nr=$2; shift 2 ;;
	--work) work=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--no-ncu) ncu_on=0; shift ;;
	--rowsel) rowsel=1; shift ;;
	--tag) tag=$2; shift 2 ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "gpu_profile.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done
if [ -n "$bundle" ]; then
	# shellcheck source=/dev/null
	. "$bundle/env.sh" || exit 1
	xjoin=$XJ_BUNDLE/bin/xjoin
else
	xjoin=${XJOIN:-$root/build/xjoin}
fi
out=${out:-$work}
mkdir -p "$work" "$out" || exit 1
nvidia-smi -L 2>/dev/null || { echo "no GPU: skipped"; exit 0; }
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
small=$work/syn-$nq-$nr.h5
if [ $rowsel = 1 ]; then
	[ -n "$ncu" ] || { echo "# no ncu: the selection kernel's sections skipped"; exit 0; }
	[ -f "$small" ] || "$xjoin" gen --rows "$nr" --queries "$nq" --dim 128 \
		-o "$small" --quiet || exit 1
	rc=0
	for rsr in 1 4; do
		f=ncu-rowsel$tag
		[ $rsr = 1 ] || f=$f-rows4
		XJ_CUDA_RS_ROWS=$rsr "$ncu" --clock-control none \
			--kernel-name 'regex:rowsel_(rows_)?kernel' \
			--launch-skip 4 --launch-count 3 --section SpeedOfLight \
			--section MemoryWorkloadAnalysis --section Occupancy \
			--section WarpStateStats --section LaunchStats \
			"$xjoin" topk -q "$small" -b "$small" -k 10 -m l2 \
			--device gpu --precision fp32 -o "$work/out.h5" --force \
			--quiet >"$out/$f.txt" 2>"$work/$f.err" ||
			{ echo "# ncu failed:"; tail -5 "$work/$f.err"; rc=1; continue; }
		grep -E 'rowsel_(rows_)?kernel|DRAM Throughput|Memory Throughput|Duration|Achieved Occupancy|Registers Per|Stall|L2 Hit|Spilling Requests' \
			"$out/$f.txt" | head -40
	done
	exit $rc
fi
data=$work/syn-$queries-$rows.h5
[ -f "$data" ] || "$xjoin" gen --rows "$rows" --queries "$queries" --dim 128 \
	-o "$data" --quiet || exit 1
job=(topk -q "$data" -b "$data" -k 10 -m l2 --device gpu -o "$work/out.h5"
     --force --quiet)
for p in fp32 bf16; do
	"$xjoin" "${job[@]}" --precision $p \
		--report-json "$out/xjoin-$p$tag.json" >"$work/xjoin-$p$tag.out" 2>&1 ||
		{ echo "# xjoin --precision $p failed:"; tail -5 "$work/xjoin-$p$tag.out"
		  exit 1; }
	python3 - "$out/xjoin-$p$tag.json" $p$tag <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); ph = r["phase_seconds"]
print("time xjoin-%s total_s=%.3f compute_s=%.3f TFLOP/s=%.1f" % (sys.argv[2],
      r["total_seconds"], ph["compute"], r["gemm_flops"] / ph["compute"] / 1e12))
PY
done

[ $ncu_on = 1 ] || exit 0
[ -f "$small" ] || "$xjoin" gen --rows "$nr" --queries "$nq" --dim 128 \
	-o "$small" --quiet || exit 1
job=(topk -q "$small" -b "$small" -k 10 -m l2 --device gpu -o "$work/out.h5"
     --force --quiet)
[ -n "$ncu" ] || { echo "# no ncu: kernel shares skipped"; exit 0; }
"$ncu" --clock-control none --metrics gpu__time_duration.sum \
	--launch-skip 1000 --launch-count 80 --csv --print-units base \
	"$xjoin" "${job[@]}" >"$out/ncu$tag.csv" 2>"$work/ncu$tag.err" ||
	{ echo "# ncu failed:"; tail -5 "$work/ncu$tag.err"; exit 1; }
python3 - "$out/ncu$tag.csv" <<'PY'
import csv, collections, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head, rows = rows[0], rows[1:]
name, val = head.index("Kernel Name"), head.index("Metric Value")
t = collections.defaultdict(list)
for r in rows:
    t[r[name][:60]].append(float(r[val].replace(",", "")))
total = sum(sum(v) for v in t.values())
print("# %-60s %6s %10s %6s" % ("kernel", "calls", "mean_us", "share"))
for k, v in sorted(t.items(), key=lambda kv: -sum(kv[1])):
    print("  %-60s %6d %10.1f %5.1f%%" % (k, len(v), sum(v) / len(v) / 1e3,
                                          100 * sum(v) / total))
PY
