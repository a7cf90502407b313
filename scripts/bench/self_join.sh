#!/usr/bin/env bash
# self_join.sh: a top-k self-join (each pair of a chunk's own rows scored
# once) against the same job on a second copy of the file, which xjoin
# cannot recognise as the same rows (so it scores every pair twice, the
# plain path), side by side in one invocation.
#
# Job: top-10, l2, ROWS x DIM Gaussian rows (`xjoin gen --seed 1`), one
# rank with THREADS OpenMP threads (--np N: N ranks of THREADS / N threads;
# the self-join is then split over them, app/plan/plan.h):
#   self   xjoin topk -q A:/train -b A:/train -k 10
#   plain  xjoin topk -q A:/train -b B:/train -k 10 --self   (B = copy of A)
# Runs alternate (self, plain, self, plain, ...), each waits up to 10 s for
# idle CPUs (compare.py's wait_quiet), best of REPS each. Prints the wall
# time, xjoin's compute phase and GEMM FLOPs (--report-json), the CPU
# seconds the run used (user + system: steadier than wall time on a busy
# machine), the share of the CPUs other processes used meanwhile, the
# ratios plain / self, and
# checks that both outputs hold the same bits.
#
# --matrix: the full matrix instead (default 40,000 rows): the self run
# computes the upper triangle of blocks and writes each block and its
# transpose (app/driver/driver_matrix.c); the bytes written are the same, so on a
# disk slower than the compute the ratio tends to 1: --out-dir /dev/shm
# writes the outputs to memory and shows the compute's share.
#
# Usage: scripts/bench/self_join.sh [--reps N] [--rows N] [--dim N] [--np N]
#                                   [--matrix] [--out-dir DIR]
# Environment: XJOIN (default build/xjoin), BENCH_DIR (build/bench),
#   THREADS (2).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
xjoin=${XJOIN:-$root/build/xjoin}
work=${BENCH_DIR:-$root/build/bench}
threads=${THREADS:-2}
reps=3
np=1
rows=
dim=128
cmd=topk
outdir=
args="$*"

die() { echo "self_join.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
	case $1 in
	--reps) reps=$2; shift ;;
	--rows) rows=$2; shift ;;
	--dim) dim=$2; shift ;;
	--np) np=$2; shift ;;
	--matrix) cmd=matrix ;;
	--out-dir) outdir=$2; shift ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option '$1' (try --help)" ;;
	esac
	shift
done
[ -n "$rows" ] || { [ $cmd = matrix ] && rows=40000 || rows=100000; }
[ -x "$xjoin" ] || die "no xjoin binary at $xjoin (scripts/build.sh first)"
mkdir -p "$work"
a=$work/self-$rows-$dim.h5
b=$work/self-$rows-$dim-copy.h5
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ ! -s "$a" ]; then
	mpirun -np 1 "$xjoin" gen --rows "$rows" --dim "$dim" --queries 1 \
		--seed 1 -o "$a" >/dev/null
	rm -f "$b"
fi
[ -s "$b" ] || cp "$a" "$b"
echo "# command: $0 $args"

exec /usr/bin/python3 "$here/self_join.py" --xjoin "$xjoin" --a "$a" --b "$b" \
	--workdir "$work" --threads "$threads" --reps "$reps" --np "$np" \
	--cmd "$cmd" --out-dir "${outdir:-$work}"
