#!/usr/bin/env bash
# auto_vs_fixed.sh: the default precision (auto) against each fixed one on
# one CPU top-k job, alternated round by round so that the machine's drift
# falls on all of them alike, with medians and the default's ratio to the
# fastest fixed precision.
#
#   scripts/bench/auto_vs_fixed.sh [--k K] [--dim D] [--rows N]
#                                  [--queries Q] [--rounds R] [--glove]
#                                  [--precisions "fp32 bf16 int8"]
#
# Job: `xjoin gen` rows (Q x N x D, seed 1: cpu_vs_peers.sh's syn-D set),
# l2, k = K (default 1000), one rank on THREADS cores (default 2), HDF5 in
# and out; wall seconds of each xjoin run. --glove: GloVe's 1,000 test x
# 100,000 train rows (GLOVE, default ../shared/data/glove-100d-100k.h5),
# cosine (k as given; cpu_vs_peers.sh's job is k = 100). First the default with an empty
# calibration cache (its measuring included: what a host's first job of
# this shape pays, once), then R rounds (default 5) of: the default with
# the cache that first run left, then each fixed precision. Every output
# is compared with the first fixed precision's (same bits, or DIFF).
# Prints a `run` line per run, then a '#' table: median and spread per
# variant, and `default/best`: the default's median over the fastest
# fixed median.
# Environment: XJOIN (default build/xjoin), BENCH_DIR (build/bench),
#   THREADS (2), GLOVE.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
xjoin=${XJOIN:-$root/build/xjoin}
work=${BENCH_DIR:-$root/build/bench}
threads=${THREADS:-2}
py=/usr/bin/python3
k=1000 dim=128 rows=100000 queries=10000 rounds=5 glove=
metric=l2
precisions="fp32 bf16 int8"

die() { echo "auto_vs_fixed.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
	case $1 in
	--k) k=$2; shift ;;
	--dim) dim=$2; shift ;;
	--rows) rows=$2; shift ;;
	--queries) queries=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--precisions) precisions=$2; shift ;;
	--glove) glove=${GLOVE:-$root/../shared/data/glove-100d-100k.h5} ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option '$1' (try --help)" ;;
	esac
	shift
done
[ -x "$xjoin" ] || die "no xjoin at $xjoin (scripts/build.sh first)"
[ "$rounds" -ge 1 ] 2>/dev/null || die "--rounds: expected a count"

mkdir -p "$work"
cache=$(mktemp -d "${TMPDIR:-/tmp}/xjoin-auto-cache.XXXXXX")
out=$(mktemp -d "${TMPDIR:-/tmp}/xjoin-auto-out.XXXXXX")
trap 'rm -rf "$cache" "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=$threads XJOIN_CACHE_DIR=$cache

data=$work/syn-$dim-$queries-$rows.h5
if [ -n "$glove" ]; then
	[ -s "$glove" ] || die "no GloVe file at $glove"
	data=$glove metric=cosine queries=1000 rows=100000 dim=100
elif [ ! -s "$data" ]; then
	echo "# generating $data"
	mpirun -np 1 "$xjoin" gen --rows "$rows" --dim "$dim" \
		--queries "$queries" --seed 1 -o "$data" >/dev/null
fi
echo "# auto_vs_fixed $(date -u +%FT%TZ): $(basename "$data"), $queries x $rows x $dim, $metric, k=$k, $threads threads, $rounds rounds"
echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'),"\
" family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')"\
" model $(grep -m1 '^model' /proc/cpuinfo | cut -d: -f2 | tr -d ' ');"\
" OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"

ref=
results=$out/results.tsv
: >"$results"
# run NAME [--precision P]: one timed job, its line, its check
run() {
	local name=$1 o=$out/$1.h5 t0 t1 chosen same
	shift
	t0=$(date +%s.%N)
	mpirun -np 1 --bind-to none "$xjoin" topk -q "$data:/test" \
		-b "$data:/train" -m "$metric" -k "$k" -o "$o" --force --quiet \
		--report-json "$out/$name.json" "$@" ||
		die "$name: xjoin failed"
	t1=$(date +%s.%N)
	chosen=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("precision", "?"))' \
		"$out/$name.json")
	if [ -z "$ref" ]; then
		ref=$o.ref
		cp "$o" "$ref"
	fi
	if "$py" -c 'import sys, h5py, numpy as np
a, b = (h5py.File(f, "r") for f in sys.argv[1:3])
sys.exit(0 if all(np.array_equal(a[n][()], b[n][()], equal_nan=True)
                  for n in ("neighbors", "distances")) else 1)' "$ref" "$o"; then
		same=same
	else
		same=DIFF
	fi
	printf '%s\t%.3f\t%s\t%s\n' "${name%%.*}" "$("$py" -c "print($t1 - $t0)")" \
		"$chosen" "$same" | tee -a "$results" | sed 's/^/run /'
}

# the reference output (and a warm-up of the files), then the default's
# first run on this host and shape: it measures, and caches its choice
run ref.0 --precision "${precisions%% *}"
run first-default.0
for r in $(seq 1 "$rounds"); do
	run "default.$r"
	for p in $precisions; do
		run "$p.$r" --precision "$p"
	done
done

"$py" - "$results" "$precisions" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
fixed = sys.argv[2].split()
by = {}
for name, s, chosen, same in rows:
    by.setdefault(name, []).append((float(s), chosen, same))
print("# %-14s %8s %8s %8s  %s" % ("variant", "median", "min", "max", "chose / output"))
for name in ["first-default", "default"] + fixed:
    v = by.get(name, [])
    if not v:
        continue
    t = [x[0] for x in v]
    print("# %-14s %8.3f %8.3f %8.3f  %s / %s" % (
        name, statistics.median(t), min(t), max(t),
        ",".join(sorted({x[1] for x in v})),
        "DIFF" if any(x[2] == "DIFF" for x in v) else "same"))
med = {p: statistics.median(x[0] for x in by[p]) for p in fixed + ["default"]}
best = min(fixed, key=med.get)
bm, dm = med[best], med["default"]
print("# default/best: %.3f (best fixed: %s, %.3f s; default %.3f s)" % (dm / bm, best, bm, dm))
PY
