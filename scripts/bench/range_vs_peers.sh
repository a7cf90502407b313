#!/usr/bin/env bash
# range_vs_peers.sh: `xjoin range` against FAISS range_search (IndexFlat)
# and scikit-learn radius_neighbors (brute force), the same job side by
# side in one invocation (scripts/bench/range_peers.py does the work).
#
# Jobs (HDF5 in, CSR HDF5 out, best of REPS runs each, 2 threads):
#   glove    GloVe 1,000 queries x 50,000 base x 100, cosine
#   syn-128  synthetic Gaussian 1,000 x 50,000 x 128 (`xjoin gen`), l2
#   clustered  100 Gaussian blobs (`xjoin gen --clusters 100`), sqeuclidean
#            (--jobs clustered; sizes from --queries and --base)
# each at a threshold giving about 10 and about 1,000 pairs per query, set
# in a gap between pair values so that every tool must return the same
# pair set (checked). Prints a table with ratios peer / xjoin.
#
# Usage: scripts/bench/range_vs_peers.sh [--reps N] [--queries N] [--base M]
#                                        [--jobs glove,syn-128,clustered]
# Environment: XJOIN (default build/xjoin), BENCH_DIR (build/bench),
#   GLOVE (../shared/data/glove-100d-100k.h5, else data/glove-demo.h5),
#   PEER_PYTHON (the python running the peers: /usr/bin/python3, Debian's
#   python3-faiss and python3-sklearn; a venv with faiss-cpu works too).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
glove=${GLOVE:-$root/../shared/data/glove-100d-100k.h5}
[ -s "$glove" ] || glove=$root/data/glove-demo.h5
py=${PEER_PYTHON:-/usr/bin/python3}
case ${1:-} in -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
"$py" -c 'import faiss, sklearn, h5py, numpy' 2>/dev/null ||
	{ echo "range_vs_peers.sh: $py lacks faiss or sklearn (apt-get install python3-faiss python3-sklearn)" >&2; exit 1; }
echo "# command: $0 $*"
echo "# openblas core: $(/usr/bin/python3 -c 'import ctypes; l=ctypes.CDLL("libopenblas.so.0"); l.openblas_get_corename.restype=ctypes.c_char_p; print(l.openblas_get_corename().decode())' 2>/dev/null || echo unknown)"
exec /usr/bin/python3 "$here/range_peers.py" bench --xjoin "${XJOIN:-$root/build/xjoin}" \
	--glove "$glove" --workdir "${BENCH_DIR:-$root/build/bench}" --python "$py" "$@"
