#!/usr/bin/python3
"""xjoin from Python on the bundled GloVe words: nearest words, a
similarity graph, and the same answer from scikit-learn.

    /usr/bin/python3 examples/python/run.py [--words W] [-k K] [-t T]
        [--check]

Reads data/glove-demo.h5 (20,000 GloVe 100-d word vectors and their
words) into numpy, then, in this process (no mpirun, no files of ours):

  1. xjoin.topk(X, X, k, metric="cosine"): every word's k nearest words
     (the array on both sides: a self-join, a word never its own
     neighbour); prints the neighbours of a few words.
  2. xjoin.range(X, X, t, metric="cosine", self=True): every pair of
     words within cosine distance t, as a scipy CSR matrix; prints its
     size and the largest groups of near-synonyms (connected components).
  3. scikit-learn's NearestNeighbors (brute force, cosine) on the same
     arrays, timed beside xjoin, and the share of words whose neighbour
     sets agree (float32 and float64 peers may order near-ties
     differently; xjoin's order is the exact one).

With --check it exits 1 unless the self-join never lists a word as its own
neighbour, every range pair lies within t, the top-k and range results
agree (each word's range row holds exactly its top-k neighbours within
t, when k covers them), and scikit-learn agrees on at least 99% of words.
The library comes from XJOIN_LIBRARY, or from build/libxjoin.so of this
checkout when the package is not installed.
"""

import argparse
import os
import sys
import time

import h5py
import numpy as np
import scipy.sparse.csgraph as csgraph

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def import_xjoin():
    try:
        import xjoin
        return xjoin
    except ImportError:
        pass
    sys.path.insert(0, os.path.join(ROOT, "python"))
    os.environ.setdefault("XJOIN_LIBRARY",
                          os.path.join(ROOT, "build", "libxjoin.so"))
    import xjoin
    return xjoin


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--words", default="king,paris,coffee,guitar,rain",
                    help="comma-separated words to show")
    ap.add_argument("-k", type=int, default=8)
    ap.add_argument("-t", type=float, default=0.25,
                    help="cosine distance of the range join")
    ap.add_argument("--data", default=os.path.join(ROOT, "data",
                                                   "glove-demo.h5"))
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    xjoin = import_xjoin()

    with h5py.File(a.data, "r") as f:
        x = f["train"][...]
        words = np.array([w.decode() if isinstance(w, bytes) else w
                          for w in f["train_words"][...]])
    index = {w: i for i, w in enumerate(words)}
    print("# %d words x %d dims, xjoin %s" % (x.shape[0], x.shape[1],
                                              xjoin.version()))
    ok = True

    t0 = time.perf_counter()
    nbr, dist = xjoin.topk(x, x, a.k, metric="cosine")
    t_topk = time.perf_counter() - t0
    print("xjoin.topk: %d x %d neighbours in %.2f s" % (nbr.shape + (t_topk,)))
    for w in a.words.split(","):
        if w in index:
            i = index[w]
            print("  %-8s %s" % (w, ", ".join(
                "%s %.3f" % (words[j], d) for j, d in zip(nbr[i], dist[i]))))
    own = int(np.sum(nbr == np.arange(len(x))[:, None]))
    ok &= own == 0

    t0 = time.perf_counter()
    csr = xjoin.range(x, x, a.t, metric="cosine", self=True)
    t_range = time.perf_counter() - t0
    print("xjoin.range: %d pairs within cosine distance %g in %.2f s"
          % (csr.nnz, a.t, t_range))
    ok &= bool(csr.nnz == 0 or csr.data.max() <= a.t)
    ncomp, label = csgraph.connected_components(csr, directed=False)
    sizes = np.bincount(label)
    for c in np.argsort(-sizes)[:3]:
        if sizes[c] < 2:
            break
        members = np.flatnonzero(label == c)
        print("  a group of %d: %s%s" % (sizes[c], ", ".join(
            words[members[:10]]), ", ..." if sizes[c] > 10 else ""))
    # each word's pairs within t are its top-k neighbours within t, when
    # fewer than k pass t (both are exact, in the same order)
    rows_cmp = 0
    for i in range(len(x)):
        lo, hi = csr.indptr[i], csr.indptr[i + 1]
        if hi - lo < a.k:
            want = nbr[i][dist[i] <= a.t]
            ok &= np.array_equal(csr.indices[lo:hi], want)
            rows_cmp += 1
    print("  top-k and range agree on all %d words with fewer than %d "
          "pairs" % (rows_cmp, a.k) if ok else "  top-k and range DISAGREE")

    try:
        from sklearn.neighbors import NearestNeighbors
        t0 = time.perf_counter()
        nn = NearestNeighbors(n_neighbors=a.k + 1, algorithm="brute",
                              metric="cosine").fit(x)
        _, sk = nn.kneighbors(x)
        t_sk = time.perf_counter() - t0
        # drop each word itself (or, for duplicate vectors, its twin)
        agree = np.mean([set(nbr[i]) <= set(sk[i]) for i in range(len(x))])
        print("scikit-learn NearestNeighbors (brute, cosine): %.2f s, "
              "%.2fx xjoin's; neighbour sets agree on %.2f%% of words"
              % (t_sk, t_sk / t_topk, 100 * agree))
        ok &= agree >= 0.99
    except ImportError:
        print("# scikit-learn not installed: comparison left out")
    if a.check and not ok:
        print("FAILED")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
