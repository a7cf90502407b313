#!/usr/bin/python3
"""peers.py: the jobs xjoin is compared against, one job per process.

Each peer does what `xjoin topk` does, end to end: read the query and base
sets from HDF5 with h5py, compute the exact top-k, write /neighbors (int64,
n x k) and /distances (float32, n x k, in the metric's own units) to an HDF5
file. It prints one JSON line with its phase times so the caller can tell
start-up, reading, computing and writing apart.

  peers.py faiss   -q F.h5[:/test] -b F.h5[:/train] -k K -m l2|cosine|ip -o OUT.h5
  peers.py sklearn ...same options...
  peers.py gen --rows N --dim D --queries NQ --seed S -o F.h5

Peers:
  faiss   IndexFlatL2 (l2) or IndexFlatIP (ip; cosine on L2-normalised rows,
          distance 1 - cos). FAISS returns squared L2: the square root is
          taken so /distances is Euclidean, as xjoin writes it.
  sklearn NearestNeighbors(algorithm='brute', metric='euclidean'|'cosine')
          .kneighbors(); no inner-product metric there.

Threads: --threads T sets faiss.omp_set_num_threads / n_jobs; the caller also
sets OMP_NUM_THREADS and OPENBLAS_NUM_THREADS for the BLAS underneath.
`gen` writes Gaussian rows for the case where no xjoin binary is there to
generate the synthetic set.
"""
import argparse
import json
import os
import sys
import time

import h5py
import numpy as np


def split_spec(spec, default_dset):
    """FILE[:DATASET] -> (file, dataset)."""
    if ":" in spec and not os.path.exists(spec):
        path, dset = spec.rsplit(":", 1)
        return path, dset
    return spec, default_dset


def read_rows(spec, default_dset):
    path, dset = split_spec(spec, default_dset)
    with h5py.File(path, "r") as f:
        x = f[dset][...]
    return np.ascontiguousarray(x, dtype=np.float32)


def write_result(path, neighbors, distances):
    tmp = path + ".tmp"
    with h5py.File(tmp, "w") as f:
        f.create_dataset("neighbors", data=neighbors.astype(np.int64))
        f.create_dataset("distances", data=distances.astype(np.float32))
    os.replace(tmp, path)


def faiss_topk(q, b, k, metric, threads):
    import faiss

    faiss.omp_set_num_threads(threads)
    d = b.shape[1]
    if metric == "l2":
        index = faiss.IndexFlatL2(d)
    else:
        index = faiss.IndexFlatIP(d)
    if metric == "cosine":
        # Copies: normalising in place would change what was read.
        q = q.copy()
        b = b.copy()
        faiss.normalize_L2(q)
        faiss.normalize_L2(b)
    index.add(b)
    dist, nbr = index.search(q, k)
    if metric == "l2":
        dist = np.sqrt(np.maximum(dist, 0.0))
    elif metric == "cosine":
        dist = 1.0 - dist
    return nbr, dist


def sklearn_topk(q, b, k, metric, threads):
    from sklearn.neighbors import NearestNeighbors

    names = {"l2": "euclidean", "cosine": "cosine"}
    if metric not in names:
        raise SystemExit("peers.py: sklearn has no '%s' metric" % metric)
    nn = NearestNeighbors(n_neighbors=k, algorithm="brute",
                          metric=names[metric], n_jobs=threads)
    nn.fit(b)
    dist, nbr = nn.kneighbors(q, return_distance=True)
    return nbr, dist


def tool_version(tool):
    if tool == "faiss":
        import faiss
        return faiss.__version__
    import sklearn
    return sklearn.__version__


def run_topk(args):
    # Import the library before the clock starts: start-up is in the
    # caller's wall time, not in the read or compute phase.
    version = tool_version(args.tool)
    if args.tool == "sklearn":
        import sklearn.neighbors  # noqa: F401
    t0 = time.perf_counter()
    q = read_rows(args.query, "/test")
    b = read_rows(args.base, "/train")
    t1 = time.perf_counter()
    fn = faiss_topk if args.tool == "faiss" else sklearn_topk
    nbr, dist = fn(q, b, args.k, args.metric, args.threads)
    t2 = time.perf_counter()
    write_result(args.output, nbr, dist)
    t3 = time.perf_counter()
    print(json.dumps({
        "tool": args.tool,
        "version": version,
        "n": int(q.shape[0]), "m": int(b.shape[0]), "d": int(b.shape[1]),
        "k": args.k, "metric": args.metric, "threads": args.threads,
        "read_s": t1 - t0, "compute_s": t2 - t1, "write_s": t3 - t2,
        "inproc_s": t3 - t0,
    }))


def run_gen(args):
    rng = np.random.default_rng(args.seed)
    train = rng.standard_normal((args.rows, args.dim), dtype=np.float32)
    test = rng.standard_normal((args.queries, args.dim), dtype=np.float32)
    tmp = args.output + ".tmp"
    with h5py.File(tmp, "w") as f:
        f.create_dataset("train", data=train)
        f.create_dataset("test", data=test)
    os.replace(tmp, args.output)


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="tool", required=True)
    for tool in ("faiss", "sklearn"):
        s = sub.add_parser(tool)
        s.add_argument("-q", "--query", required=True)
        s.add_argument("-b", "--base", required=True)
        s.add_argument("-k", type=int, required=True)
        s.add_argument("-m", "--metric", default="l2",
                       choices=("l2", "cosine", "ip"))
        s.add_argument("-o", "--output", required=True)
        s.add_argument("--threads", type=int, default=2)
    g = sub.add_parser("gen")
    g.add_argument("--rows", type=int, required=True)
    g.add_argument("--dim", type=int, required=True)
    g.add_argument("--queries", type=int, required=True)
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("-o", "--output", required=True)
    return p.parse_args(argv)


def main(argv):
    args = parse(argv)
    if args.tool == "gen":
        run_gen(args)
    else:
        run_topk(args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
