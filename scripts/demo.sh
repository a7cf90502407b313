#!/usr/bin/env bash
# demo.sh: set up, build, and find the nearest GloVe words of a few query
# words with two MPI ranks.
#
# Input: data/glove-demo.h5 (20,000 base words, 8 query words; see
# data/PROVENANCE.md). The run is an exact cosine top-8 join; each query's
# first hit is the word itself (its vector is in the base too), the rest
# are its nearest neighbours. Works from any current directory.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

scripts/setup.sh
# build.sh ends with "build: /path/to/xjoin"
xjoin=$(scripts/build.sh | tee /dev/stderr | tail -n 1)
xjoin=${xjoin#build: }
if [ ! -x "$xjoin" ]; then
	xjoin=build/xjoin
fi

if [ "$(id -u)" = 0 ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# two ranks even on a one-core machine
export OMPI_MCA_rmaps_base_oversubscribe=1

tmp=$(mktemp -d "${TMPDIR:-/tmp}/xjoin-demo.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo
echo "# mpirun -np 2 $xjoin topk -q data/glove-demo.h5 -b data/glove-demo.h5 -k 8 -m cosine -o $tmp/demo-out.h5 --force"
mpirun -np 2 "$xjoin" topk -q data/glove-demo.h5 -b data/glove-demo.h5 \
	-k 8 -m cosine -o "$tmp/demo-out.h5" --force

echo
echo "# nearest words by cosine distance (1 - cos)"
/usr/bin/python3 - data/glove-demo.h5 "$tmp/demo-out.h5" <<'EOF'
import sys
import h5py

def words(d):
    return [w.decode() if isinstance(w, bytes) else w for w in d[...]]

with h5py.File(sys.argv[1], "r") as data, h5py.File(sys.argv[2], "r") as res:
    base, queries = words(data["train_words"]), words(data["test_words"])
    for q, nbr, dist in zip(queries, res["neighbors"], res["distances"]):
        hits = ["%s %.3f" % (base[j], x) for j, x in zip(nbr, dist) if j >= 0]
        print("%-9s -> %s" % (q, ", ".join(hits)))
EOF
