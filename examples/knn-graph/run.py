#!/usr/bin/python3
"""An exact k-nearest-neighbour graph of a million rows on one machine,
with default options, as a SciPy CSR matrix.

    /usr/bin/python3 examples/knn-graph/run.py [--rows N] [--dim D] [-k K]
        [--clusters C] [--sample S] [--workdir DIR] [--check]

`xjoin gen` writes N rows of C Gaussian blobs (default 1,000,000 x 128,
1,000 blobs), then one rank with all the machine's cores runs

    xjoin topk -q X.h5:/train -b X.h5:/train -k K -o knn.h5

(the same file and dataset on both sides: a self-join, each pair of rows
scored once, row i never its own neighbour; the candidate precision is
auto's choice). Printed: wall seconds end to end, the peak resident
memory, the precision chosen, the GEMM FLOPs done and their rate in the
compute phase, and the rate of a plain join's 2 N^2 D FLOPs over the
same time (what the symmetry saves). Then the graph is loaded as
scipy.sparse.csr_matrix (N x N, K entries a row), symmetrised, and S
random rows are checked against a float64 brute force of the reference
(tests/integration/reference.py): with --check any difference exits 1.
"""

import argparse
import json
import os
import sys
import time

import h5py
import numpy as np
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import xjrun  # noqa: E402
import reference  # noqa: E402  tests/integration/reference.py (on the path)


def graph(path):
    """The k-NN graph of an xjoin top-k output as CSR (-1 entries left
    out): row i holds its neighbours with their distances as weights."""
    with h5py.File(path, "r") as f:
        nbr, dist = f["neighbors"][...], f["distances"][...]
    n = nbr.shape[0]
    keep = nbr >= 0
    indptr = np.concatenate([[0], np.cumsum(keep.sum(axis=1))])
    return sp.csr_matrix((dist[keep], nbr[keep], indptr), shape=(n, n))


def check_rows(x, path, k, sample, seed=7):
    """Rows of the output against the float64 brute force, bit for bit:
    the number of rows that differ."""
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(len(x), size=min(sample, len(x)),
                              replace=False))
    with h5py.File(path, "r") as f:
        nbr = f["neighbors"][...][rows]
        dist = f["distances"][...][rows]
    bad = 0
    for lo in range(0, len(rows), 16):
        part = rows[lo:lo + 16]
        q64, bt64, qq, bb, _ = reference._prepare(x[part], x, "l2")
        keys = reference._keys_block("l2", q64, bt64, qq, bb)
        keys[np.arange(len(part)), part] = np.inf      # no self pairs
        cols = np.broadcast_to(np.arange(len(x)), keys.shape)
        order = np.lexsort((cols, keys), axis=-1)[:, :k]
        want_d = reference.key_to_value(
            "l2", np.take_along_axis(keys, order, axis=-1))
        for r in range(len(part)):
            if not (np.array_equal(order[r], nbr[lo + r]) and
                    np.array_equal(want_d[r].astype(np.float32).view(
                        np.uint32), dist[lo + r].view(np.uint32))):
                bad += 1
    return bad, len(rows)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1000000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--clusters", type=int, default=1000)
    ap.add_argument("--sample", type=int, default=100,
                    help="rows checked against the brute force")
    ap.add_argument("--workdir", default=os.path.join(HERE, "work"))
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when a checked row differs")
    a = ap.parse_args(argv)
    os.makedirs(a.workdir, exist_ok=True)
    x_path = os.path.join(a.workdir, "X-%d-%d.h5" % (a.rows, a.dim))
    out = os.path.join(a.workdir, "knn.h5")
    if not os.path.exists(x_path):
        xjrun.xjoin(1, ["gen", "--rows", str(a.rows), "--dim", str(a.dim),
                        "--clusters", str(a.clusters), "--seed", "3",
                        "-o", x_path, "--quiet"])
    spec = x_path + ":/train"
    run = xjrun.xjoin(1, ["topk", "-q", spec, "-b", spec, "-k", str(a.k),
                          "-o", out, "--force"],
                      report=out + ".report.json",
                      threads=xjrun.threads_per_rank(1))
    rep = run.report or {}
    compute = xjrun.field(rep, "phase_seconds.compute") or float("nan")
    flops = xjrun.field(rep, "gemm_flops") or 0.0
    plain = 2.0 * a.rows * a.rows * a.dim
    prec = rep.get("precision", "?")
    print("# %d x %d rows, k = %d, candidates in %s" % (a.rows, a.dim, a.k,
                                                        prec))
    print("wall %.1f s, compute %.1f s, peak RSS %.0f MiB" %
          (run.wall_s, compute, run.peak_mib or float("nan")))
    print("GEMM %.3g FLOP in the compute phase: %.0f GFLOP/s; a plain "
          "join's %.3g FLOP over the same time: %.0f GFLOP/s" %
          (flops, flops / compute * 1e-9, plain, plain / compute * 1e-9))
    t0 = time.time()
    g = graph(out)
    sym = g.maximum(g.T)
    print("graph: CSR %d x %d, %d edges (%d undirected), loaded in %.1f s"
          % (g.shape[0], g.shape[1], g.nnz, sym.nnz // 2, time.time() - t0))
    with h5py.File(x_path, "r") as f:
        x = f["train"][...]
    bad, checked = check_rows(x, out, a.k, a.sample)
    print("exact: %d of %d sampled rows equal the float64 brute force"
          % (checked - bad, checked))
    with open(os.path.join(a.workdir, "knn-graph.json"), "w") as f:
        json.dump({"rows": a.rows, "dim": a.dim, "k": a.k,
                   "wall_s": run.wall_s, "compute_s": compute,
                   "peak_mib": run.peak_mib, "gemm_flops": flops,
                   "precision": prec,
                   "edges": int(g.nnz), "checked": checked,
                   "differing": bad}, f, indent=1)
    if a.check and bad:
        print("FAILED: %d rows differ" % bad)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
