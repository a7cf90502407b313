#!/usr/bin/env bash
# gpu_vs_peers.sh: xjoin's GPU path against PyTorch and CuPy on one GPU,
# the same exact top-k job side by side in one invocation, with the SGEMM
# of the job's shape as the bound.
#
# Job: Q queries x Q base rows x 128 dims, l2, k=10, fp32, HDF5 in and out
# (`xjoin gen --rows Q --queries Q --dim 128`), Q = 1,000,000 by default:
# 2 Q^2 128 = 2.56e14 FLOP of matrix products.
#
# Usage: scripts/bench/gpu_vs_peers.sh [--size Q] [--bundle DIR] [--work DIR]
#                                      [--precisions "fp32 auto"]
#   --size Q      rows of each set (e.g. 100000 for a smoke run)
#   --precisions  xjoin's --precision values, each run and listed as
#                 xjoin-P (default "fp32 auto": the float32 candidate GEMM,
#                 and the default, what the card runs fastest); P-ft
#                 runs P with XJ_CUDA_TILE16=0 (fp16-ft: fp16 with a float
#                 tile instead of its 16-bit one), P-fmin with
#                 XJ_CUDA_FMIN=1 (fn2 read only past its sub-tile's least),
#                 P-rowsR with XJ_CUDA_RS_ROWS=R (R rows a block: 2, 4, 8)
#   --peers "sgemm torch cupy"  the peers run (default all three; torch.mm
#                 alone is the SGEMM bound)
#   --bundle DIR  use the xjoin of scripts/bundle.sh's DIR (sources env.sh)
#   --tool-timeout S  stop any one tool after S seconds (it is then left out
#                 of the table and said so), so a slow peer cannot take the
#                 whole run
# Environment: XJOIN (default build/xjoin), PYTHON (first python3 with torch).
#
# Prints `time` lines as each tool finishes, then a table: seconds end to end
# (read, compute, write), the device part, TFLOP/s over the matrix-product
# FLOP, each peer's time over xjoin's, and the SGEMM-only time as a share of
# each tool's. Without a GPU it says so and exits 0.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
size=1000000
dim=128
k=10
bundle=
work=${TMPDIR:-/tmp}/xjoin-gpu-bench
tool_timeout=0
precisions="fp32 auto"
peers="sgemm torch cupy"
while [ $# -gt 0 ]; do
	case $1 in
	--size) size=$2; shift 2 ;;
	--precisions) precisions=$2; shift 2 ;;
	--peers) peers=$2; shift 2 ;;
	--bundle) bundle=$2; shift 2 ;;
	--work) work=$2; shift 2 ;;
	--tool-timeout) tool_timeout=$2; shift 2 ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "gpu_vs_peers.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done

if [ -n "$bundle" ]; then
	# shellcheck source=/dev/null
	. "$bundle/env.sh" || exit 1
	xjoin=$XJ_BUNDLE/bin/xjoin
else
	xjoin=${XJOIN:-$root/build/xjoin}
fi
[ -x "$xjoin" ] || { echo "gpu_vs_peers.sh: no xjoin at $xjoin" >&2; exit 1; }

echo "# gpu_vs_peers $(date -u +%Y-%m-%dT%H:%M:%SZ): ${size} x ${size} x ${dim}, l2, k=${k}"
if ! nvidia-smi -L >/dev/null 2>&1; then
	echo "no GPU: skipped (nvidia-smi finds none)"
	exit 0
fi
nvidia-smi -L
if ! "$xjoin" devices 2>&1 | grep -q "backend: cuda"; then
	echo "no GPU: skipped (xjoin devices: $("$xjoin" devices 2>&1 | grep -m1 'no usable GPU'))"
	exit 0
fi

py=${PYTHON:-}
if [ -z "$py" ]; then
	for p in python3 /opt/torch/.venv/bin/python3; do
		if "$p" -c 'import torch, h5py' 2>/dev/null; then py=$p; break; fi
	done
fi

mkdir -p "$work" || exit 1
data=$work/syn-$size-$dim.h5
if [ ! -f "$data" ]; then
	"$xjoin" gen --rows "$size" --queries "$size" --dim "$dim" -o "$data" --quiet || exit 1
fi

declare -A total compute
timed() {	# NAME CMD...: run, record wall seconds
	local name=$1 t0 t1
	shift
	t0=$(date +%s.%N)
	local rc=0
	timeout "$tool_timeout" "$@" >"$work/$name.out" 2>&1 || rc=$?
	if [ $rc = 124 ]; then
		echo "# $name stopped after --tool-timeout ${tool_timeout}s"
		return 1
	elif [ $rc != 0 ]; then
		echo "# $name failed (exit $rc):"; tail -5 "$work/$name.out"
		return 1
	fi
	t1=$(date +%s.%N)
	total[$name]=$(echo "$t1 - $t0" | bc -l 2>/dev/null || python3 -c "print($t1 - $t0)")
}

# xjoin: end to end; its compute phase from --report-json
for p in $precisions; do
	name=xjoin-$p
	t16=${XJ_CUDA_TILE16:-}
	fmin=${XJ_CUDA_FMIN:-}
	rsr=${XJ_CUDA_RS_ROWS:-}
	case $p in *-rows[248]) rsr=${p##*-rows}; p=${p%-rows[248]} ;; esac
	case $p in *-fmin) fmin=1; p=${p%-fmin} ;; esac
	case $p in *-ft) t16=0; p=${p%-ft} ;; esac
	if timed "$name" env XJ_CUDA_TILE16=$t16 XJ_CUDA_FMIN=$fmin XJ_CUDA_RS_ROWS=$rsr "$xjoin" topk -q "$data" -b "$data" -k "$k" -m l2 \
		--device gpu --precision "$p" -o "$work/$name.h5" --force --quiet \
		--report-json "$work/$name.json"; then
		compute[$name]=$("${py:-python3}" -c 'import json,sys
r=json.load(open(sys.argv[1]))
print(r["phase_seconds"]["compute"])' "$work/$name.json" 2>/dev/null || echo nan)
		echo "time $name total_s=${total[$name]} compute_s=${compute[$name]}"
		"${py:-python3}" -c 'import json,sys
r=json.load(open(sys.argv[1])); km=r.get("kernel_ms", {}); s=sum(km.values()) or 1
print("# %s: %s; precision %s; %.1f rescored/query; kernel ms %s" % (sys.argv[2],
      r.get("backend_detail", "?"), r.get("precision"), r.get("rescored_per_query", 0),
      ", ".join("%s %.0f (%.0f%%)" % (k, v, 100 * v / s) for k, v in km.items() if v)))
if r.get("precision_why"):
    print("# %s: %s" % (sys.argv[2], r["precision_why"]))' \
			"$work/$name.json" "$name" 2>/dev/null
	fi
done
ref=xjoin-$(echo $precisions | awk '{print $1}')
for p in $precisions; do
	[ "xjoin-$p" != "$ref" ] && [ -f "$work/xjoin-$p.h5" ] && [ -f "$work/$ref.h5" ] &&
		echo "# xjoin-$p vs $ref: $("${py:-python3}" "$root/tests/integration/compare.py" "$work/xjoin-$p.h5" "$work/$ref.h5" 2>&1 | tail -1)"
done

if [ -n "$py" ]; then
	for tool in $peers; do
		out=()
		[ $tool != sgemm ] && out=(-o "$work/$tool.h5")
		if timed "$tool" "$py" "$here/gpu_peers.py" "$tool" -q "$data" -b "$data" -k "$k" "${out[@]}"; then
			line=$(grep '^time' "$work/$tool.out")
			echo "$line"
			compute[$tool]=$(echo "$line" | sed -n 's/.*compute_s=\([0-9.]*\).*/\1/p')
		fi
	done
	for tool in torch cupy; do
		[ -f "$work/$tool.h5" ] && [ -f "$work/$ref.h5" ] &&
			echo "# $tool vs $ref: $("$py" "$here/gpu_peers.py" agree "$work/$tool.h5" "$work/$ref.h5")"
	done
else
	echo "# no python3 with torch and h5py: peers skipped"
fi

# table
"${py:-python3}" - "$size" "$dim" <<EOF
import math, sys
q = int(sys.argv[1]); d = int(sys.argv[2])
flop = 2.0 * q * q * d
total = {$(for t in "${!total[@]}"; do printf '"%s": %s, ' "$t" "${total[$t]}"; done)}
comp = {$(for t in "${!compute[@]}"; do printf '"%s": %s, ' "$t" "${compute[$t]:-float('nan')}"; done)}
sg = comp.get("sgemm", float("nan"))
ref = "$ref"
x = total.get(ref, float("nan"))
xc = comp.get(ref, float("nan"))
print("# %-11s %10s %10s %9s %10s %13s %12s" % ("tool", "total_s", "device_s", "TFLOP/s", "vs_" + ref[6:], "device_vs_" + ref[6:], "sgemm/device"))
for t in sorted(k for k in total if k.startswith("xjoin")) + ["torch", "cupy", "sgemm"]:
    if t not in total:
        continue
    c = comp.get(t, float("nan"))
    tf = flop / c / 1e12 if c and not math.isnan(c) else float("nan")
    print("  %-11s %10.3f %10.3f %9.1f %10.2f %13.2f %12.2f" % (t, total[t], c, tf, total[t] / x, c / xc, sg / c))
EOF
