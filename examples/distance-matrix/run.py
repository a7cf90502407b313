#!/usr/bin/python3
"""Euclidean distance matrices of growing size: NumPy, SciPy and xjoin.

    /usr/bin/python3 examples/distance-matrix/run.py [--sizes N,N,...]
        [--dim D] [--near N] [--np P] [--reps R] [--workdir DIR]
        [--png FILE] [--check]

For each N, `xjoin gen` writes N queries and N base rows of D Gaussian
float32 values; then three programs write the N x N matrix of Euclidean
distances as float32 /distances to HDF5, each timed from reading its input
to closing its output (the fastest of --reps runs):

  numpy  the usual expansion sqrt(|q|^2 + |b|^2 - 2 q.b) in float64 with
         one GEMM per block of query rows, written block by block (h5py)
  numpy-f32  the same in float32 (half the memory traffic, what many do)
  scipy  scipy.spatial.distance.cdist(..., "euclidean") in float64 per block
         of query rows, written block by block (h5py)
  xjoin  mpirun -np P xjoin matrix -m l2 --threads (cores / P) (its own
         seconds: --report-json)

Blocks hold at most BLOCK_BYTES of float64 work, so memory stays bounded
whatever N is. Then every matrix is compared with xjoin's bit for bit:
cdist sums (q_i - b_i)^2 in float64 in index order and takes sqrt, which is
xjoin's canonical value, so its float32 result must be the same bits; the
expansion reorders the sum and cancels where q and b are close, so it is
only close: in float64 its error is far below float32's rounding, so
nearly all values (often all) round to the same float32, and --check holds
it within NUMPY_RTOL; in float32 its error is of the order of float32's
own rounding, and many values differ in their last bit (counted, not
checked). --near N adds a case where that cancellation bites: queries
1e-3 away from base rows of norm about 80. Writes runs.json and a log-log
plot of time against N (of the Gaussian case).
"""

import argparse
import os
import sys
import time

import h5py
import numpy as np
from scipy.spatial.distance import cdist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import xjrun  # noqa: E402

BLOCK_BYTES = 64 << 20
NUMPY_RTOL = 1e-5


def read_inputs(path):
    with h5py.File(path, "r") as f:
        return f["test"][...], f["train"][...]


def blocked(path, n, m, block_fn):
    """Write the n x m float32 matrix of block_fn(rows) to path/distances
    one block of query rows at a time."""
    rows = max(1, BLOCK_BYTES // (8 * 3 * max(1, m)))
    with h5py.File(path, "w") as f:
        out = f.create_dataset("distances", (n, m), dtype=np.float32,
                               chunks=(min(n, 64), min(m, 4096)))
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            out[r0:r1] = block_fn(r0, r1).astype(np.float32)


def expansion(inp, out, dtype):
    q, b = read_inputs(inp)
    q, b = q.astype(dtype), b.astype(dtype)
    qq = np.einsum("ij,ij->i", q, q)
    bb = np.einsum("ij,ij->i", b, b)

    def block(r0, r1):
        d2 = qq[r0:r1, None] + bb[None, :] - 2 * (q[r0:r1] @ b.T)
        return np.sqrt(np.maximum(d2, 0))
    blocked(out, q.shape[0], b.shape[0], block)


def numpy_matrix(inp, out):
    expansion(inp, out, np.float64)


def numpy32_matrix(inp, out):
    expansion(inp, out, np.float32)


def scipy_matrix(inp, out):
    q, b = read_inputs(inp)
    q64, b64 = q.astype(np.float64), b.astype(np.float64)
    blocked(out, q.shape[0], b.shape[0],
            lambda r0, r1: cdist(q64[r0:r1], b64, "euclidean"))


PEERS = {"numpy": numpy_matrix, "numpy-f32": numpy32_matrix,
         "scipy": scipy_matrix}
TOOLS = list(PEERS) + ["xjoin"]


def timed(fn, *args):
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def rel_diff(path, ref_path):
    """Largest |a - ref| / ref over the matrix, read in blocks."""
    worst = 0.0
    with h5py.File(path, "r") as fa, h5py.File(ref_path, "r") as fr:
        a, r = fa["distances"], fr["distances"]
        for r0 in range(0, a.shape[0], 256):
            x = a[r0:r0 + 256].astype(np.float64)
            y = r[r0:r0 + 256].astype(np.float64)
            worst = max(worst, float(np.max(np.abs(x - y) /
                                            np.maximum(y, 1e-30))))
    return worst


def gaussian_input(args, n):
    inp = os.path.join(args.workdir, "in-%d.h5" % n)
    if not os.path.exists(inp):
        xjrun.xjoin(1, ["gen", "--rows", str(n), "--queries", str(n),
                        "--dim", str(args.dim), "--seed", str(n),
                        "-o", inp, "--force"])
    return inp


def near_input(args, n):
    """Base rows of N(10, 1) values (norms near 80 for d = 64) and queries
    1e-3 away from them: the pairs where the expansion cancels."""
    inp = os.path.join(args.workdir, "near-%d.h5" % n)
    rng = np.random.default_rng(n)
    b = (10 + rng.standard_normal((n, args.dim))).astype(np.float32)
    with h5py.File(inp, "w") as f:
        f["train"] = b
        f["test"] = (b + 1e-3 * rng.standard_normal(b.shape)).astype(
            np.float32)
    return inp


def one_size(args, n, case="gaussian"):
    inp = (near_input if case == "near" else gaussian_input)(args, n)
    outs = {t: os.path.join(args.workdir, "%s-%s-%d.h5" % (t, case, n))
            for t in TOOLS}
    run = xjrun.xjoin(args.np, ["matrix", "-q", inp, "-b", inp, "-m", "l2",
                                "-o", outs["xjoin"], "--force"],
                      report=outs["xjoin"] + ".report.json",
                      threads=xjrun.threads_per_rank(args.np),
                      reps=args.reps)
    secs = {t: min(timed(fn, inp, outs[t]) for _ in range(args.reps))
            for t, fn in PEERS.items()}
    secs["xjoin"] = xjrun.field(run.report, "total_seconds") or run.wall_s
    recs = []
    for tool in TOOLS:
        rec = {"tool": tool if tool != "xjoin" else "xjoin np%d" % args.np,
               "case": case, "n": n, "m": n, "d": args.dim,
               "seconds": secs[tool]}
        if tool == "xjoin":
            rec.update(wall_s=run.wall_s, report=run.report)
        else:
            rec["differing"] = xjrun.same_bits(outs[tool], outs["xjoin"],
                                               show=0)
            rec["max_rel_diff"] = rel_diff(outs[tool], outs["xjoin"])
        recs.append(rec)
        print("%-10s %-8s %6d x %-6d %9.3f s  %s"
              % (rec["tool"], case, n, n, rec["seconds"], "" if tool == "xjoin"
                 else "%d of %d values differ from xjoin's, largest "
                 "relative difference %.2g" % (rec["differing"], n * n,
                                               rec["max_rel_diff"])))
        sys.stdout.flush()
    return recs


def check(recs):
    bad = []
    for r in recs:
        if r["tool"] == "scipy" and r["differing"] != 0:
            bad.append("scipy cdist differs from xjoin at N=%d (%s)"
                       % (r["n"], r["case"]))
        if r["tool"] == "numpy" and not r["max_rel_diff"] <= NUMPY_RTOL:
            bad.append("numpy differs from xjoin by %.2g at N=%d (%s)"
                       % (r["max_rel_diff"], r["n"], r["case"]))
    for line in bad:
        print("FAILED: " + line)
    if not bad:
        print("OK: scipy cdist gives xjoin's bits at every size; numpy's "
              "expansion is within %.0e" % NUMPY_RTOL)
    return 1 if bad else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,2000,4000,8000",
                    help="comma-separated N (queries = base rows = N)")
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--near", type=int, default=1000, metavar="N",
                    help="also N near-duplicate pairs (0: none)")
    ap.add_argument("--np", type=int, default=2, help="xjoin's MPI ranks")
    xjrun.add_common_args(ap, "distance-matrix", "exit 1 unless scipy "
                          "matches xjoin bit for bit and numpy within %.0e"
                          % NUMPY_RTOL)
    args = ap.parse_args(argv)
    os.makedirs(args.workdir, exist_ok=True)
    print("# N x N Euclidean distance matrix, d = %d, float32 out; seconds "
          "from reading the input to closing the output" % args.dim)
    recs = []
    for n in [int(s) for s in args.sizes.split(",")]:
        recs += one_size(args, n)
    if args.near:
        recs += one_size(args, args.near, "near")
    runs = os.path.join(args.workdir, "runs.json")
    xjrun.write_runs(runs, recs)
    xjrun.plot(["-o", args.png or os.path.join(args.workdir,
                                               "distance-matrix.png"),
                "--x", "n", "--y", "seconds", "--series", "tool",
                "--where", "case=gaussian",
                "--log", "xy", "--xlabel", "N (N x N matrix, d = %d)"
                % args.dim, "--ylabel", "seconds",
                "--title", "Euclidean distance matrix: time against size",
                "--note", xjrun.note(sys.argv), runs])
    return check(recs) if args.check else 0


if __name__ == "__main__":
    sys.exit(main())
