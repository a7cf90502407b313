#!/usr/bin/python3
"""matrix_cdist.py: the full distance matrix the way users start from:
SciPy's cdist per block of query rows, each block written with h5py into a
contiguous float32 dataset, then the file flushed to disk (fsync), as xjoin and dd do.

Usage: matrix_cdist.py IN.h5 OUT.h5 METRIC [BLOCK_ROWS]
  IN.h5 holds /test (queries) and /train (base), as `xjoin gen` writes;
  METRIC is l2, sqeuclidean, cosine or ip. Prints one line of JSON:
  {"seconds": wall, "compute_s": ..., "write_s": ..., "bytes": n*m*4}.
cdist computes in double and its result is rounded to float32, so values
may differ from xjoin's canonical ones in the last bit; this is a timing
peer, not a reference.
"""
import json
import os
import sys
import time

import h5py
import numpy as np
from scipy.spatial.distance import cdist

CDIST = {"l2": "euclidean", "sqeuclidean": "sqeuclidean",
         "cosine": "cosine"}


def block(q, b, metric):
    if metric == "ip":
        return q.astype(np.float64) @ b.astype(np.float64).T
    return cdist(q, b, CDIST[metric])


def main():
    src, dst, metric = sys.argv[1:4]
    rows = int(sys.argv[4]) if len(sys.argv) > 4 else 1024
    t0 = time.perf_counter()
    with h5py.File(src, "r") as f:
        q, b = f["test"][:], f["train"][:]
    n, m = len(q), len(b)
    comp = write = 0.0
    with h5py.File(dst, "w") as f:
        out = f.create_dataset("distances", (n, m), dtype=np.float32)
        for i in range(0, n, rows):
            t = time.perf_counter()
            v = block(q[i:i + rows], b, metric).astype(np.float32)
            comp += time.perf_counter() - t
            t = time.perf_counter()
            out[i:i + rows] = v
            write += time.perf_counter() - t
    t = time.perf_counter()
    fd = os.open(dst, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    write += time.perf_counter() - t
    print(json.dumps({"seconds": time.perf_counter() - t0,
                      "compute_s": comp, "write_s": write,
                      "bytes": n * m * 4}))


if __name__ == "__main__":
    main()
