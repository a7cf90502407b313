#!/usr/bin/env python3
"""In-memory top-k from Python: xjoin.topk against faiss.knn and
scikit-learn's NearestNeighbors (brute force) on the same numpy arrays,
side by side in one process, and the command line's compute phase on the
same rows as the bound the Python call should meet.

    python_vs_peers.py --data FILE.h5 --xjoin BUILD/xjoin [--k 10]
                       [--metric l2|cosine] [--reps 3] [--json OUT]

FILE.h5 holds /test (queries) and /train (base), as `xjoin gen` writes
them. The arrays are read into memory first (not timed); each tool then
runs REPS times and its best wall time is kept. Exactness: xjoin's
neighbours and distances against the command line's output (bit for bit)
and each peer's neighbour sets against xjoin's (float32 peers round and
order ties differently, so a few rows may differ). Prints one `time` line
per tool and a table of seconds and ratios (peer / xjoin).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np


def best_of(reps, fn):
    best, out = float("inf"), None
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def sets_equal(a, b):
    return float(np.mean([set(x) == set(y) for x, y in zip(a, b)]))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--xjoin", required=True, help="the command line binary")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--metric", default="l2", choices=("l2", "cosine"))
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--json")
    a = p.parse_args(argv)

    import xjoin
    with h5py.File(a.data, "r") as f:
        q = f["test"][...]
        b = f["train"][...]
    nq, nb, d = q.shape[0], b.shape[0], q.shape[1]
    print("# %d x %d x %d, %s, k = %d, best of %d; xjoin %s (%s)" %
          (nq, nb, d, a.metric, a.k, a.reps, xjoin.version(), xjoin.__file__))
    rows, times = {}, {}

    # the command line on the same rows: its compute phase and its output
    with tempfile.TemporaryDirectory() as tmp:
        out, rep = os.path.join(tmp, "cli.h5"), os.path.join(tmp, "r.json")
        cli = []
        for _ in range(a.reps):
            t = time.perf_counter()
            subprocess.run([a.xjoin, "topk", "-q", a.data + ":/test", "-b",
                            a.data + ":/train", "-k", str(a.k), "-m",
                            a.metric, "-o", out, "--force", "--quiet",
                            "--report-json", rep], check=True)
            wall = time.perf_counter() - t
            with open(rep) as f:
                r = json.load(f)
            cli.append((r["phase_seconds"]["compute"], wall,
                        r.get("precision", "?")))
        ref = xjoin.load(out)
    compute, wall, prec = min(cli)
    times["cli-compute"], times["cli-wall"] = compute, min(c[1] for c in cli)
    print("time cli compute_s=%.3f wall_s=%.3f precision=%s" %
          (compute, times["cli-wall"], prec))

    t, (nbr, dist) = best_of(a.reps, lambda: xjoin.topk(q, b, a.k,
                                                        metric=a.metric))
    times["xjoin"] = t
    same = bool(np.array_equal(nbr, ref["neighbors"]) and
                np.array_equal(dist.view(np.uint32),
                               ref["distances"].view(np.uint32)))
    rows["xjoin"] = 1.0
    print("time xjoin s=%.3f cli_bits=%s" % (t, "same" if same else "DIFF"))

    try:
        import faiss
        if a.metric == "l2":
            fn = lambda: faiss.knn(q, b, a.k, metric=faiss.METRIC_L2)
        else:
            qn = q / np.linalg.norm(q, axis=1, keepdims=True)
            bn = b / np.linalg.norm(b, axis=1, keepdims=True)
            fn = lambda: faiss.knn(qn, bn, a.k,
                                   metric=faiss.METRIC_INNER_PRODUCT)
        t, (_, fi) = best_of(a.reps, fn)
        times["faiss.knn"] = t
        rows["faiss.knn"] = sets_equal(fi, nbr)
        print("time faiss.knn s=%.3f version=%s rows_equal=%.6f" %
              (t, faiss.__version__, rows["faiss.knn"]))
    except ImportError:
        print("# faiss not importable: left out")

    try:
        import sklearn
        from sklearn.neighbors import NearestNeighbors
        m = "euclidean" if a.metric == "l2" else "cosine"
        nn = NearestNeighbors(n_neighbors=a.k, algorithm="brute", metric=m)
        t, (_, si) = best_of(a.reps, lambda: nn.fit(b).kneighbors(q))
        times["sklearn"] = t
        rows["sklearn"] = sets_equal(si, nbr)
        print("time sklearn s=%.3f version=%s rows_equal=%.6f" %
              (t, sklearn.__version__, rows["sklearn"]))
    except ImportError:
        print("# scikit-learn not importable: left out")

    x = times["xjoin"]
    print("# tool         seconds   vs_xjoin  rows_equal_to_xjoin")
    for name in ("xjoin", "faiss.knn", "sklearn", "cli-compute",
                 "cli-wall"):
        if name in times:
            print("  %-12s %8.3f %9.2f  %s" %
                  (name, times[name], times[name] / x,
                   "%.6f" % rows[name] if name in rows else "-"))
    print("# xjoin in-memory over the command line's compute phase: %.2f"
          % (x / times["cli-compute"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"shape": [nq, nb, d], "metric": a.metric, "k": a.k,
                       "seconds": times, "rows_equal": rows,
                       "cli_bits_same": same, "cli_precision": prec}, f,
                      indent=1)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
