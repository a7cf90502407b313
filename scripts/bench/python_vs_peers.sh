#!/usr/bin/env bash
# python_vs_peers.sh: xjoin from Python (in memory, in process) against
# faiss.knn and scikit-learn's NearestNeighbors on the same numpy arrays,
# and the command line's compute phase on the same rows, in one run
# (scripts/bench/python_vs_peers.py does the timing).
#
# Usage: scripts/bench/python_vs_peers.sh [--quick] [--reps N] [--k K]
#   --quick   2,000 x 20,000 rows (a smoke run, not a result)
# Job: 10,000 queries x 100,000 base rows x 128 dims (`xjoin gen`), l2,
# k = 10, best of 3; then GloVe (../shared/data/glove-100d-100k.h5, 1,000
# x 100,000 x 100, cosine, k = 100) when that file is there.
# Environment: XJOIN (default build/xjoin; libxjoin.so beside it),
#   BENCH_DIR (build/bench), PY_BENCH_VENV (build/bench-py-venv: faiss-cpu,
#   scikit-learn, numpy, scipy and h5py from PyPI, made on first use).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
xjoin=${XJOIN:-$root/build/xjoin}
work=${BENCH_DIR:-$root/build/bench}
venv=${PY_BENCH_VENV:-$root/build/bench-py-venv}
glove=${GLOVE:-$root/../shared/data/glove-100d-100k.h5}
rows=100000 queries=10000 reps=3 k=10

while [ $# -gt 0 ]; do
	case $1 in
	--quick) rows=20000 queries=2000 ;;
	--reps) reps=$2; shift ;;
	--k) k=$2; shift ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "python_vs_peers.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
	shift
done
lib=$(dirname "$xjoin")/libxjoin.so
[ -x "$xjoin" ] && [ -f "$lib" ] ||
	{ echo "python_vs_peers.sh: build xjoin first ($xjoin, $lib)" >&2; exit 1; }
if ! "$venv/bin/python" -c 'import faiss, sklearn, scipy, h5py, numpy' 2>/dev/null; then
	echo "# making $venv with faiss-cpu, scikit-learn, scipy, numpy, h5py from PyPI"
	/usr/bin/python3 -m venv "$venv"
	"$venv/bin/pip" install -q faiss-cpu scikit-learn scipy numpy h5py
fi
mkdir -p "$work"
data=$work/syn-$queries-$rows-128.h5
[ -s "$data" ] || OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
	"$xjoin" gen --rows "$rows" --queries "$queries" --dim 128 --seed 1 \
	-o "$data" --quiet
echo "# host $(hostname), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
export PYTHONPATH=$root/python XJOIN_LIBRARY=$lib
"$venv/bin/python" "$here/python_vs_peers.py" --data "$data" --xjoin "$xjoin" \
	--k "$k" --reps "$reps" --json "$work/python_vs_peers-syn.json"
if [ -f "$glove" ]; then
	"$venv/bin/python" "$here/python_vs_peers.py" --data "$glove" \
		--xjoin "$xjoin" --k 100 --metric cosine --reps "$reps" \
		--json "$work/python_vs_peers-glove.json"
fi
