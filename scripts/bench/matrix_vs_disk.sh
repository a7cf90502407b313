#!/usr/bin/env bash
# matrix_vs_disk.sh: `xjoin matrix` against the disk it writes to, side by
# side in one invocation, each as a share of the disk's sequential write rate.
#
# Runs, interleaved, REPS times each (best kept), all writing to one folder:
#   dd        dd if=/dev/zero bs=16M conv=fdatasync of the matrix's byte
#             count: the file system's sequential write rate through the
#             page cache
#   dd-direct the same with oflag=direct: the rate without the page
#             cache's copy (on the project's VM 3x dd's, at a tenth of its
#             CPU time)
#   xjoin     xjoin matrix (one rank, THREADS threads; --np), its default
#             order (XJ_MATRIX_OVERLAP=1): a worker thread computes
#             block i + 1 while block i is written, each whole chunk
#             with O_DIRECT (h5out_set_direct)
#   xjoin-coll the default order with XJ_MATRIX_IO=collective: each
#             block by a collective HDF5 transfer through the page cache
#   xjoin-seq the same with XJ_MATRIX_OVERLAP=0: each block computed,
#             then written
#   xjoin-ind the default order with XJ_MATRIX_IO=independent: each
#             block's chunks written by independent MPI-IO transfers
#             instead of a collective one (no aggregation buffer)
#   xjoin-rows, xjoin-seq-rows  the two with XJ_MATRIX_CHUNKS=rows: HDF5
#             chunks of whole rows (a block writes a strided piece of
#             each chunk it crosses) instead of chunks of a block's
#             columns (a block writes whole chunks, each contiguous)
#   cdist     SciPy cdist per block of 1024 query rows + an h5py write
#             (matrix_cdist.py): the approach users start from
# Every run ends with its data on disk (fdatasync, MPI_File_sync, fsync).
# Prints a '#'-commented table: wall seconds (process start to exit: for
# xjoin mpiexec's start, about a second, included), GB/s written and the
# shares of dd's and dd-direct's rates; xjoin's own total and phases come from its
# --report-json ("in process").
#
# Usage: scripts/bench/matrix_vs_disk.sh [--queries N] [--rows M] [--dim D]
#                                        [--metric METRIC] [--reps R]
#                                        [--no-cdist] [--device gpu]
#                                        [--np P] [--tools "T1 T2 ..."]
#   default 5,000 x 40,000 x 128, l2 (800 MB a matrix), 2 reps;
#   --no-cdist leaves the SciPy peer out (it takes minutes on 2 cores);
#   --device gpu runs dd and xjoin --device gpu alone (its default order
#   and HDF5 chunks: the CUDA backend computes, the host writes);
#   --np P runs xjoin on P ranks of THREADS / P threads each (at least 1);
#   --tools runs only the tools named (from the list above).
# Environment: XJOIN (default build/xjoin), BENCH_DIR (build/bench: the
#   folder written to; outputs are deleted after each run), THREADS (2),
#   PYTHON (/usr/bin/python3).
# Needs: h5py, numpy and scipy in PYTHON (Debian's python3-h5py,
#   python3-numpy, python3-scipy).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
xjoin=${XJOIN:-$root/build/xjoin}
work=${BENCH_DIR:-$root/build/bench}
threads=${THREADS:-2}
py=${PYTHON:-/usr/bin/python3}
device=cpu
queries=5000
rows=40000
dim=128
metric=l2
reps=2
np=1
tools="dd dd-direct xjoin xjoin-coll xjoin-ind xjoin-seq xjoin-rows xjoin-seq-rows cdist"

die() { echo "matrix_vs_disk.sh: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
	case $1 in
	--queries) queries=$2; shift ;;
	--rows) rows=$2; shift ;;
	--dim) dim=$2; shift ;;
	--metric) metric=$2; shift ;;
	--reps) reps=$2; shift ;;
	--no-cdist) tools="dd dd-direct xjoin xjoin-coll xjoin-ind xjoin-seq xjoin-rows xjoin-seq-rows" ;;
	--np) np=$2; shift ;;
	--tools) tools=$2; shift ;;
	--device) device=$2; shift
		[ "$device" = gpu ] && tools="dd dd-direct xjoin xjoin-coll" ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option '$1' (try --help)" ;;
	esac
	shift
done
[ -x "$xjoin" ] || die "no xjoin at $xjoin (scripts/build.sh first)"
"$py" -c 'import h5py, numpy, scipy' 2>/dev/null ||
	die "needs python3-h5py, python3-numpy and python3-scipy"
mkdir -p "$work"

bytes=$((queries * rows * 4))
free=$(df -B1 --output=avail "$work" | tail -1)
[ "$free" -gt $((3 * bytes)) ] ||
	die "$work has $free bytes free; the runs need about $((3 * bytes))"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rank_threads=$((threads / np > 0 ? threads / np : 1))
export OMP_NUM_THREADS=$rank_threads OPENBLAS_NUM_THREADS=$rank_threads
in=$work/mvd-$queries-$rows-$dim.h5
out=$work/mvd-out.h5
[ -s "$in" ] || "$xjoin" gen --rows "$rows" --queries "$queries" \
	--dim "$dim" --seed 7 -o "$in" --force >/dev/null

now() { date +%s.%N; }
# best[tool] = fewest seconds; extra[tool] = its phase note
declare -A best extra

keep() {    # tool seconds [note]
	if [ -z "${best[$1]:-}" ] ||
	   awk -v a="$2" -v b="${best[$1]}" 'BEGIN { exit !(a < b) }'; then
		best[$1]=$2
		extra[$1]=${3:-}
	fi
}

run_dd() {    # tool [dd flag]
	local t0 t1 n=$(((bytes + 16777215) / 16777216))
	t0=$(now)
	dd if=/dev/zero of="$out" bs=16M count=$n conv=fdatasync status=none \
		${2:+"$2"}
	t1=$(now)
	rm -f "$out"
	# dd wrote whole 16 MiB blocks: scaled to the matrix's bytes
	keep "$1" "$(awk -v a="$t0" -v b="$t1" -v n=$n -v t=$bytes \
		'BEGIN { print (b - a) * t / (n * 16777216) }')"
}

run_xjoin() {    # tool overlap chunks [io]
	local t0 t1 note
	t0=$(now)
	XJ_MATRIX_OVERLAP=$2 XJ_MATRIX_CHUNKS=$3 XJ_MATRIX_IO=${4:-direct} \
		mpiexec --bind-to none --oversubscribe -np "$np" \
		-x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x XJ_MATRIX_OVERLAP \
		-x XJ_MATRIX_CHUNKS -x XJ_MATRIX_IO \
		"$xjoin" matrix -q "$in:test" -b "$in:train" -m "$metric" \
		-o "$out" --force --quiet --device "$device" \
		--report-json "$work/mvd-report.json" >/dev/null
	t1=$(now)
	rm -f "$out"
	note=$("$py" -c 'import json, sys
r = json.load(open(sys.argv[1])); p = r["phase_seconds"]
print("in process %.2f s: compute %.2f s, write %.2f s, other phases %.2f s;"
      " %.0f%% O_DIRECT"
      % (r["total_seconds"], p["compute"], p["write"],
         r["total_seconds"] - p["compute"] - p["write"],
         100.0 * r["bytes_written_direct"] / max(r["bytes_written"], 1)))' \
		"$work/mvd-report.json")
	keep "$1" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
		"$note"
}

run_cdist() {
	local t0 t1 note
	t0=$(now)
	note=$("$py" "$here/matrix_cdist.py" "$in" "$out" "$metric")
	t1=$(now)
	rm -f "$out"
	note=$(echo "$note" | "$py" -c 'import json, sys
r = json.load(sys.stdin)
print("compute %.2f s, write %.2f s" % (r["compute_s"], r["write_s"]))')
	keep cdist "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
		"$note"
}

corename=$("$py" -c 'import ctypes
b = ctypes.CDLL("libopenblas.so.0"); b.openblas_get_corename.restype = ctypes.c_char_p
print(b.openblas_get_corename().decode())' 2>/dev/null || echo "?")
echo "# matrix_vs_disk: $queries x $rows x $dim, $metric, $bytes bytes a" \
	"matrix, $np rank(s) of $rank_threads threads, best of $reps"
echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "# flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
	grep -E '^(avx2|avx512f|avx512_bf16|avx512_vnni|amx_.*)$' | tr '\n' ' ')"
echo "# OpenBLAS core: $corename (OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset})"
echo "# folder: $work ($(df -h --output=source,fstype "$work" | tail -1 |
	tr -s ' '))"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

for _ in $(seq "$reps"); do
	for tool in $tools; do
		case $tool in
		dd) run_dd dd ;;
		dd-direct) run_dd dd-direct oflag=direct ;;
		xjoin) run_xjoin xjoin 1 blocks ;;
		xjoin-coll) run_xjoin xjoin-coll 1 blocks collective ;;
		xjoin-ind) run_xjoin xjoin-ind 1 blocks independent ;;
		xjoin-seq) run_xjoin xjoin-seq 0 blocks ;;
		xjoin-rows) run_xjoin xjoin-rows 1 rows ;;
		xjoin-seq-rows) run_xjoin xjoin-seq-rows 0 rows ;;
		cdist) run_cdist ;;
		esac
	done
done
rm -f "$work/mvd-report.json"

echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '| %-14s | %9s | %6s | %9s | %12s | %s\n' tool seconds "GB/s" \
	"of dd" "of dd-direct" phases
printf '| %-14s | %9s | %6s | %9s | %12s | %s\n' ---- ------- ---- ----- \
	------------ ------
for tool in $tools; do
	# a dd the --tools left out: "-" in its column
	awk -v t="$tool" -v s="${best[$tool]}" -v d="${best[dd]:-}" \
		-v dx="${best[dd-direct]:-}" -v n=$bytes -v x="${extra[$tool]}" \
		'function of(r) { return r == "" ? "-" : sprintf("%.0f%%", 100 * r / s) }
		BEGIN { printf "| %-14s | %9.2f | %6.3f | %9s | %12s | %s\n",
			t, s, n / s / 1e9, of(d), of(dx), x }'
done
