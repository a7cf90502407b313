#!/usr/bin/env bash
# gpu-session.sh: what a session with a lent GPU runs, in two calls of
# at most about 7 and 6 minutes on one warm machine (a session gets 15
# minutes of device time, the machine's start included), every step
# bounded so that the logs always come back:
#
#   scripts/gpu-session.sh --bundle DIR --out DIR
#                          [--part one|check|bench|focus|all]
#
# --part one (the whole session in one call of at most 9.5 minutes,
#   about 6.5 on an H100; a start costs a minute or more of the 15, so one
#   call leaves the most for the measurements):
#   1. nvidia-smi                               OUT/nvidia-smi.txt
#   2. gpu_ab.sh --passes, 50,000 x 1M: the selection's study (rowsel
#      in fp32, tf32, bf16, fp16 with its 16-bit tile and with a float
#      tile, XJ_CUDA_FMIN, XJ_CUDA_RS_ROWS=2|4|8, L2-sized passes, auto,
#      k = 1000, the scan alone), the self-join, range joins on GPU and
#      CPU (170 s at most; 82 s on an H100, 2026-11-27, before its ten
#      rows and l2fit runs)
#                                               OUT/gpu-ab.log
#   3. gpu_vs_peers.sh, 1M x 1M x 128: xjoin in fp32, auto, fp16 (and
#      with XJ_CUDA_FMIN=1, and with XJ_CUDA_RS_ROWS=4) and bf16, the
#      SGEMM alone and PyTorch (150 s at most; 114 s on an H100 with
#      five xjoin runs, 2026-11-27)
#                                               OUT/gpu-bench.log
#   4. gpu-check.sh as four instances sharing the GPU (sections 1; 2, 3;
#      4, 5, 6; 7), each with its own work folder (190 s at most; 122 to
#      132 s)
#                                               OUT/gpu-check.log (all
#      four, then the sum), OUT/gpu-check-jobs.log
#   5. gpu_profile.sh --rowsel: ncu's sections for the selection kernel,
#      one row a block and four (throughput, DRAM bytes, occupancy,
#      stalls, spills; 80 s at most)
#                                               OUT/ncu-rowsel.txt,
#                                               OUT/ncu-rowsel-rows4.txt,
#                                               OUT/gpu-profile.log
#
# --part check (the first call):
#   1. nvidia-smi                               OUT/nvidia-smi.txt
#   2. scripts/gpu-check.sh (GPU against CPU, bit for bit; 400 s at most:
#      on an H100 on 2026-11-27 it needed more than 230 s)
#                                               OUT/gpu-check.log,
#                                               OUT/gpu-check-jobs.log
# --part bench (the second call):
#   3. scripts/bench/gpu_ab.sh, 50,000 x 1M: the top-k's selection
#      variants (XJ_CUDA_*), k = 10 and 1000, fp32, tf32, bf16 and auto,
#      each output against the reference, with the device time by kernel
#      class; a self-join against the plain path; range joins on GPU and
#      CPU (150 s at most; 93 s on an H100)     OUT/gpu-ab.log
#   4. scripts/bench/gpu_vs_peers.sh, 1M x 1M x 128: xjoin in fp32 and in
#      its default (auto), PyTorch, CuPy, the SGEMM alone (each tool 60 s
#      at most; 200 s in all; 120 s on an H100) OUT/gpu-bench.log
# --part focus (one call of at most about 5 minutes, for a session's
#   last device time, after a change to the selection):
#   the backend contract (contract_cuda, test_cuda_backend) bit for bit,
#   gpu_ab.sh --quick, cuBLAS's rate by GEMM shape (gpu_peers.py shapes),
#   and the 1M x 1M job in fp32 and auto beside the SGEMM alone
#                                               OUT/contract-*.log,
#                                               OUT/gpu-ab.log,
#                                               OUT/gemm-shapes.log,
#                                               OUT/gpu-bench.log
# --part all runs check and bench (one call of about 10 minutes). Each
# part ends by
# printing the lines that matter: `N passed, N failed`, the `time` lines
# and the tables.
#
# Run it there as (docs/gpu-runbook.md):
#   run(carry=["bundle.tar.xz"], timeout_s=430, command=
#     "tar xJf bundle.tar.xz && scripts/gpu-session.sh --bundle bundle --out $OUT --part check")
#   run(timeout_s=380, command=
#     "scripts/gpu-session.sh --bundle bundle --out $OUT --part bench")
set -uo pipefail
cd "$(dirname "$0")/.."

bundle=
out=
part=all
while [ $# -gt 0 ]; do
	case $1 in
	--bundle) bundle=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--part) part=$2; shift 2 ;;
	--skip-check) part=bench; shift ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "gpu-session.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done
[ -n "$bundle" ] && [ -n "$out" ] ||
	{ echo "gpu-session.sh: --bundle DIR and --out DIR are required" >&2; exit 2; }
case $part in one|check|bench|all|focus) ;; *)
	echo "gpu-session.sh: --part one, check, bench, focus or all" >&2; exit 2 ;; esac
[ -d "$bundle" ] || tar xJf "$bundle.tar.xz" || exit 1
mkdir -p "$out" || exit 1
export PYTHONUNBUFFERED=1 PMIX_MCA_pcompress_base_silence_warning=1
t0=$(date +%s)
step() { echo "# --- $* ($(($(date +%s) - t0)) s)"; }

# bounded SCRIPT LOG WORK SECONDS OPTION...: scripts/bench/SCRIPT under a
# time limit into OUT/LOG, its data in WORK removed after
bounded() {
	local script=$1 log=$2 work=$3 limit=$4
	shift 4
	step "$script $*"
	timeout "$limit" "scripts/bench/$script" --bundle "$bundle" "$@" \
		--work "$work" >"$out/$log" 2>&1
	echo "$script exit $?"
	rm -f "$work"/*.h5
}
ab() { bounded gpu_ab.sh gpu-ab.log /tmp/xj-ab "$@"; }
bench() { bounded gpu_vs_peers.sh gpu-bench.log /tmp/xj-gb "$@"; }

step "nvidia-smi"
nvidia-smi >"$out/nvidia-smi.txt" 2>&1

if [ $part = one ]; then
	ab 170 --passes
	bench 150 --peers "sgemm torch" --tool-timeout 40 \
		--precisions "fp32 auto fp16 fp16-fmin fp16-rows4 bf16"
	step "gpu-check.sh, four instances"
	i=0
	for sec in 1 2,3 4,5,6 7; do
		i=$((i + 1))
		timeout 190 scripts/gpu-check.sh --bundle "$bundle" \
			--work /tmp/xj-gc$i --sections $sec \
			>"$out/gpu-check-$i.log" 2>&1 &
	done
	wait
	{
		for j in 1 2 3 4; do
			echo "######## sections $(echo "1 2,3 4,5,6 7" | cut -d' ' -f$j)"
			cat "$out/gpu-check-$j.log"
			[ -f /tmp/xj-gc$j/log ] &&
				cat /tmp/xj-gc$j/log >>"$out/gpu-check-jobs.log"
		done
		awk '/^[0-9]+ passed, [0-9]+ failed$/ { p += $1; f += $3; n++ }
		     END { printf "# the four instances: %d of 4 ended\n%d passed, %d failed\n", n, p, f }' \
			"$out"/gpu-check-[1-4].log
	} >"$out/gpu-check.log"
	rm -f "$out"/gpu-check-[1-4].log
	step "gpu_profile.sh --rowsel (ncu on the selection kernel)"
	timeout 80 scripts/bench/gpu_profile.sh --bundle "$bundle" --rowsel \
		--work /tmp/xj-prof --out "$out" >"$out/gpu-profile.log" 2>&1
	echo "gpu_profile exit $?"
fi

if [ $part = focus ]; then
	step "contract_cuda, test_cuda_backend"
	for t in contract_cuda test_cuda_backend; do
		( . "$bundle/env.sh" && timeout 120 "$bundle/bin/$t" ) \
			>"$out/contract-$t.log" 2>&1
		echo "$t exit $?"
		grep -E '^ *(tests|asserts) ' "$out/contract-$t.log"
	done
	ab 100 --quick
	step "gemm shapes"
	( . "$bundle/env.sh" && py=python3 &&
	  { python3 -c 'import torch' 2>/dev/null || py=/opt/torch/.venv/bin/python3; } &&
	  timeout 30 "$py" scripts/bench/gpu_peers.py shapes ) \
		>"$out/gemm-shapes.log" 2>&1
	echo "shapes exit $?"
	bench 110 --peers sgemm --tool-timeout 40
fi

if [ $part = check ] || [ $part = all ]; then
	step "gpu-check.sh"
	timeout 400 scripts/gpu-check.sh --bundle "$bundle" --work /tmp/xj-gc \
		>"$out/gpu-check.log" 2>&1
	echo "gpu-check exit $?"
	cp /tmp/xj-gc/log "$out/gpu-check-jobs.log" 2>/dev/null
fi

if [ $part = bench ] || [ $part = all ]; then
	ab 150
	bench 200 --tool-timeout 60
fi

step "summary"
grep -h -E '^(gpu:|driver|commit|[0-9]+ passed)|^FAIL' "$out/gpu-check.log" 2>/dev/null
grep -h '^shape' "$out/gemm-shapes.log" 2>/dev/null
grep -h -E '^(time|#? *[a-z]+ +[0-9.]+ +[0-9.]+|  [a-z]|# [a-z-]+ vs|# .* (stopped|failed)|# xjoin)' \
	"$out/gpu-ab.log" "$out/gpu-bench.log" 2>/dev/null
grep -h -E 'DRAM Throughput|Memory Throughput|Achieved Occupancy|# (no ncu|ncu failed)' \
	"$out/gpu-profile.log" 2>/dev/null | head -8
exit 0
