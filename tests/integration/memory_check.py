#!/usr/bin/python3
"""Peak memory of a full-matrix run stays within the memory budget.

Writes a matrix several times larger than the budget given with --mem-limit
and checks the rank's peak resident memory (ru_maxrss of the child) stays
below the budget plus the process's fixed baseline (MPI, HDF5, BLAS), and
far below the size of the matrix. The baseline is measured by a tiny run of
the same binary, so the check is about what grows with the data.

usage: memory_check.py XJOIN
"""
import os
import resource
import subprocess
import sys
import tempfile

import h5py
import numpy as np

N, M, D = 1500, 40000, 16          # matrix: 240 MB of float32
LIMIT_MB = 24


def peak_rss_mb(cmd):
    """Run cmd in a fresh process; return its peak RSS in MiB."""
    pid = os.fork()
    if pid == 0:
        os.execv(cmd[0], cmd)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"FAILED: {' '.join(cmd)} exited with status {status}")
    return usage.ru_maxrss / 1024.0


def main():
    xjoin = os.path.abspath(sys.argv[1])
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "in.h5")
        with h5py.File(data, "w") as f:
            f["test"] = rng.standard_normal((N, D), dtype=np.float32)
            f["train"] = rng.standard_normal((M, D), dtype=np.float32)
            f["tiny"] = rng.standard_normal((4, D), dtype=np.float32)
        base = [xjoin, "matrix", "--quiet", "--force"]
        small = peak_rss_mb(base + ["-q", data + ":tiny", "-b", data + ":tiny",
                                    "-o", os.path.join(tmp, "s.h5")])
        out = os.path.join(tmp, "big.h5")
        big = peak_rss_mb(base + ["-q", data, "-b", data, "-o", out,
                                  "--mem-limit", f"{LIMIT_MB}M"])
        with h5py.File(out, "r") as f:
            dist = f["distances"]
            assert dist.shape == (N, M), dist.shape
            row = dist[N - 1, :]
        q = h5py.File(data, "r")["test"][N - 1].astype(np.float64)
        b = h5py.File(data, "r")["train"][:].astype(np.float64)
        ref = np.sqrt(((b - q) ** 2).sum(axis=1)).astype(np.float32)
        assert np.allclose(row, ref, rtol=1e-6, atol=1e-6), "wrong values"
        matrix_mb = N * M * 4 / 2**20
        grown = big - small
        print(f"# matrix {matrix_mb:.0f} MiB, budget {LIMIT_MB} MiB, "
              f"baseline RSS {small:.0f} MiB, peak RSS {big:.0f} MiB, "
              f"growth {grown:.0f} MiB")
        if grown > LIMIT_MB:
            sys.exit(f"FAILED: peak memory grew {grown:.0f} MiB over the "
                     f"baseline, more than the {LIMIT_MB} MiB budget")
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
