#!/usr/bin/env bash
# gpu-session.sh: what a session with a lent GPU runs, in one call of about
# 8 minutes (a session gets 15 minutes of device time, the machine's
# start included), every step bounded so that the logs always come back:
#
#   scripts/gpu-session.sh --bundle DIR --out DIR [--skip-check]
#
#   1. nvidia-smi                               OUT/nvidia-smi.txt
#   2. scripts/gpu-check.sh (GPU against CPU, bit for bit; 230 s at most)
#                                               OUT/gpu-check.log,
#                                               OUT/gpu-check-jobs.log
#   3. scripts/bench/gpu_profile.sh, 50,000 x 1M: fp32 and bf16 times, then
#      the kernel shares by ncu on a small job (90 s at most), and the
#      fp32 and bf16 times again with XJ_CUDA_MERGE_SORT=radix when the
#      backend reads that variable (the A/B of sel_merge's sort)
#                                               OUT/profile.log, OUT/ncu.csv
#   4. scripts/bench/gpu_vs_peers.sh, 1M x 1M x 128 (each tool 45 s at
#      most; 170 s in all)                      OUT/gpu-bench.log
#   5. scripts/bench/matrix_vs_disk.sh --device gpu, 4 GB (60 s at most)
#                                               OUT/gpu-matrix.log
# then prints the lines that matter: `N passed, N failed`, the `time`
# lines and the two tables. --skip-check leaves out step 2 (a rerun of
# the benchmarks alone). Seven files in OUT: the device tool brings back
# eight at most.
#
# Run it there as (docs/gpu-runbook.md):
#   run(carry=["bundle.tar.xz"], timeout_s=600, command=
#     "tar xJf bundle.tar.xz && scripts/gpu-session.sh --bundle bundle --out $OUT")
set -uo pipefail
cd "$(dirname "$0")/.."

bundle=
out=
check=1
while [ $# -gt 0 ]; do
	case $1 in
	--bundle) bundle=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--skip-check) check=0; shift ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "gpu-session.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done
[ -n "$bundle" ] && [ -n "$out" ] ||
	{ echo "gpu-session.sh: --bundle DIR and --out DIR are required" >&2; exit 2; }
mkdir -p "$out" || exit 1
export PYTHONUNBUFFERED=1 PMIX_MCA_pcompress_base_silence_warning=1
t0=$(date +%s)
step() { echo "# --- $* ($(($(date +%s) - t0)) s)"; }

step "nvidia-smi"
nvidia-smi >"$out/nvidia-smi.txt" 2>&1

if [ $check = 1 ]; then
	step "gpu-check.sh"
	timeout 230 scripts/gpu-check.sh --bundle "$bundle" --work /tmp/xj-gc \
		>"$out/gpu-check.log" 2>&1
	echo "gpu-check exit $?"
	cp /tmp/xj-gc/log "$out/gpu-check-jobs.log" 2>/dev/null
fi

step "gpu_profile.sh"
{
	timeout 90 scripts/bench/gpu_profile.sh --bundle "$bundle" \
		--queries 50000 --work /tmp/xj-gp --out /tmp/xj-gp
	echo "gpu_profile exit $?"
	if grep -q XJ_CUDA_MERGE_SORT "$bundle/bin/libxjoin_cuda.so" 2>/dev/null; then
		XJ_CUDA_MERGE_SORT=radix timeout 40 scripts/bench/gpu_profile.sh \
			--bundle "$bundle" --queries 50000 --work /tmp/xj-gp \
			--out /tmp/xj-gp --no-ncu --tag -radix
		echo "gpu_profile radix exit $?"
	fi
} >"$out/profile.log" 2>&1
cp /tmp/xj-gp/ncu.csv "$out/ncu.csv" 2>/dev/null

step "gpu_vs_peers.sh"
timeout 170 scripts/bench/gpu_vs_peers.sh --bundle "$bundle" \
	--tool-timeout 45 --work /tmp/xj-gb >"$out/gpu-bench.log" 2>&1
echo "gpu_vs_peers exit $?"
rm -f /tmp/xj-gb/*.h5

step "matrix_vs_disk.sh"
(
	# shellcheck source=/dev/null
	. "$bundle/env.sh" &&
	XJOIN=$XJ_BUNDLE/bin/xjoin PYTHON=python3 BENCH_DIR=/tmp/xj-mvd \
		timeout 60 scripts/bench/matrix_vs_disk.sh --queries 10000 \
		--rows 100000 --reps 1 --device gpu
) >"$out/gpu-matrix.log" 2>&1
echo "matrix_vs_disk exit $?"

step "summary"
grep -h -E '^(gpu:|driver|commit|[0-9]+ passed)|^FAIL' "$out/gpu-check.log" 2>/dev/null
grep -h -E '^(time|#? *[a-z]+ +[0-9.]+ +[0-9.]+|  [a-z]|# [a-z]+ vs|# .* stopped)' \
	"$out/profile.log" "$out/gpu-bench.log" 2>/dev/null
grep -h '^|' "$out/gpu-matrix.log" 2>/dev/null
exit 0
