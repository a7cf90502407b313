#!/usr/bin/python3
"""Naive reference for xjoin: canonical top-k lists and distance matrices.

Reproduces the canonical scores of kernels/metric.h bit for bit. For each
(query, base) pair the score is accumulated in float64 over the dimension in
index order 0..d-1, one correctly rounded numpy operation at a time (numpy
never fuses a multiply and an add), then rounded once to float32:

    sqeuclidean  s = sum_i (q_i - b_i)^2              key = f32(s)
    l2           s as above                           key = f32(sqrt(s))
    ip           p = sum_i q_i * b_i                  key = -f32(p)
    cosine       p, qq = sum q_i^2, bb = sum b_i^2 (same order)
                 c = p / sqrt(qq * bb)                key = f32(1 - c)

The loop runs over the dimension and is vectorised over pairs; there is no
GEMM and no pairwise summation, so nothing reorders the sum. Ranking is by
(key, base index) ascending; the value written is the key (ip: -key).

Memory stays bounded: the base is held once (transposed, float64) and the
queries are processed in blocks of at most PAIRS_PER_BLOCK pairs.

As a module:  topk(q, b, k, metric, threshold=None, self_exclude=False)
              matrix(q, b, metric)
              range_join(q, b, metric, threshold, self_exclude=False)
As a program: reference.py topk -q FILE[:DSET] -b FILE[:DSET] -k K
                  [-m METRIC] [-t T] [--self] -o OUT.h5
              reference.py matrix -q FILE[:DSET] -b FILE[:DSET]
                  [-m METRIC] -o OUT.h5
              reference.py range -q FILE[:DSET] -b FILE[:DSET] -t T
                  [-m METRIC] [--self] -o OUT.h5
"""

import argparse
import os
import sys

import h5py
import numpy as np

METRICS = ("l2", "sqeuclidean", "cosine", "ip")
PAIRS_PER_BLOCK = 1 << 21   # float64 pairs per work array (16 MiB)


def _norm2(x64):
    """Canonical squared norms of the rows of x64, summed in index order."""
    acc = np.zeros(x64.shape[0])
    for i in range(x64.shape[1]):
        col = x64[:, i]
        acc += col * col
    return acc


def _keys_block(metric, q64, bt64, qq, bb):
    """Ranking keys (float32, smaller is better) of q64 x base."""
    c, d = q64.shape
    m = bt64.shape[1]
    acc = np.zeros((c, m))
    tmp = np.empty((c, m))
    if metric in ("l2", "sqeuclidean"):
        for i in range(d):
            np.subtract(q64[:, i, None], bt64[i][None, :], out=tmp)
            np.multiply(tmp, tmp, out=tmp)
            np.add(acc, tmp, out=acc)
        if metric == "l2":
            np.sqrt(acc, out=acc)
        return acc.astype(np.float32)
    for i in range(d):
        np.multiply(q64[:, i, None], bt64[i][None, :], out=tmp)
        np.add(acc, tmp, out=acc)
    if metric == "ip":
        return -acc.astype(np.float32)
    # cosine: c = p / sqrt(qq * bb), key = f32(1 - c)
    np.multiply(qq[:, None], bb[None, :], out=tmp)
    np.sqrt(tmp, out=tmp)
    np.divide(acc, tmp, out=acc)
    np.subtract(1.0, acc, out=acc)
    return acc.astype(np.float32)


def key_to_value(metric, key):
    """Output value of keys (ip: -key)."""
    return -key if metric == "ip" else key


def value_to_key(metric, value):
    """Key of a threshold value like metric.c: the largest float32 not
    above the threshold's key, so key <= it means exactly value <= t."""
    want = -float(value) if metric == "ip" else float(value)
    v = np.float32(want)
    if float(v) > want:
        v = np.nextafter(v, np.float32(-np.inf))
    return v


def _prepare(q, b, metric):
    if metric not in METRICS:
        raise ValueError("unknown metric %r" % (metric,))
    q = np.ascontiguousarray(q, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    if q.ndim != 2 or b.ndim != 2 or q.shape[1] != b.shape[1]:
        raise ValueError("need 2-D inputs of equal width, got %s and %s"
                         % (q.shape, b.shape))
    q64 = q.astype(np.float64)
    bt64 = np.ascontiguousarray(b.astype(np.float64).T)
    qq = _norm2(q64) if metric == "cosine" else None
    bb = _norm2(b.astype(np.float64)) if metric == "cosine" else None
    block = max(1, PAIRS_PER_BLOCK // max(1, b.shape[0]))
    return q64, bt64, qq, bb, block


def topk(q, b, k, metric, threshold=None, self_exclude=False):
    """Top-k of every query row against b.

    Returns (neighbors int64 n x k, distances float32 n x k); padding is
    index -1 with value +inf (ip: -inf). self_exclude drops pairs (i, i).
    threshold keeps keys <= value_to_key(threshold).
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    q64, bt64, qq, bb, block = _prepare(q, b, metric)
    n, m = q64.shape[0], bt64.shape[1]
    kk = min(k, m)
    pad_value = np.float32(-np.inf if metric == "ip" else np.inf)
    nbr = np.full((n, k), -1, dtype=np.int64)
    dist = np.full((n, k), pad_value, dtype=np.float32)
    tkey = None if threshold is None else value_to_key(metric, threshold)
    cols = np.arange(m, dtype=np.int64)
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        keys = _keys_block(metric, q64[r0:r1], bt64,
                           None if qq is None else qq[r0:r1], bb)
        bad = np.zeros(keys.shape, dtype=bool)
        if self_exclude:
            rows = np.arange(r0, r1)
            inside = rows < m
            bad[(rows - r0)[inside], rows[inside]] = True
        if tkey is not None:
            bad |= ~(keys <= tkey)
        idx = np.broadcast_to(cols, keys.shape)
        order = np.lexsort((idx, keys, bad), axis=-1)[:, :kk]
        top_keys = np.take_along_axis(keys, order, axis=-1)
        top_bad = np.take_along_axis(bad, order, axis=-1)
        top_idx = np.where(top_bad, -1, order.astype(np.int64))
        top_val = np.where(top_bad, pad_value,
                           key_to_value(metric, top_keys))
        nbr[r0:r1, :kk] = top_idx
        dist[r0:r1, :kk] = top_val
    return nbr, dist


def matrix(q, b, metric):
    """Full n x m matrix of metric values (float32)."""
    q64, bt64, qq, bb, block = _prepare(q, b, metric)
    n, m = q64.shape[0], bt64.shape[1]
    out = np.empty((n, m), dtype=np.float32)
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        keys = _keys_block(metric, q64[r0:r1], bt64,
                           None if qq is None else qq[r0:r1], bb)
        out[r0:r1] = key_to_value(metric, keys)
    return out


def range_join(q, b, metric, threshold, self_exclude=False):
    """Every pair whose key is <= value_to_key(threshold), as CSR.

    Returns (indptr int64 n+1, indices int64, distances float32), each
    row's pairs in (key, base index) order; self_exclude drops (i, i).
    """
    q64, bt64, qq, bb, block = _prepare(q, b, metric)
    n, m = q64.shape[0], bt64.shape[1]
    tkey = value_to_key(metric, threshold)
    counts = np.zeros(n, dtype=np.int64)
    idx_parts, val_parts = [], []
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        keys = _keys_block(metric, q64[r0:r1], bt64,
                           None if qq is None else qq[r0:r1], bb)
        keep = keys <= tkey
        if self_exclude:
            rows = np.arange(r0, r1)
            inside = rows < m
            keep[(rows - r0)[inside], rows[inside]] = False
        for i in range(r1 - r0):
            cols = np.nonzero(keep[i])[0].astype(np.int64)
            order = np.lexsort((cols, keys[i, cols]))
            idx_parts.append(cols[order])
            val_parts.append(key_to_value(metric, keys[i, cols[order]]))
            counts[r0 + i] = len(cols)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = np.concatenate(idx_parts) if idx_parts else \
        np.zeros(0, dtype=np.int64)
    dist = np.concatenate(val_parts).astype(np.float32) if val_parts \
        else np.zeros(0, dtype=np.float32)
    return indptr, indices, dist


def parse_spec(spec):
    """FILE[:DATASET] -> (file, dataset or ''), as xjoin reads it."""
    if os.path.exists(spec) or ":" not in spec:
        return spec, ""
    f, _, d = spec.rpartition(":")
    return f, d


def _only_2d(h5):
    found = []
    h5.visititems(lambda name, obj: found.append(name)
                  if isinstance(obj, h5py.Dataset) and obj.ndim == 2
                  else None)
    if len(found) != 1:
        raise ValueError("%s: need one 2-D dataset, found %d"
                         % (h5.filename, len(found)))
    return found[0]


def load(spec, default):
    """Read an input as float32; returns (array, file, dataset)."""
    path, dset = parse_spec(spec)
    with h5py.File(path, "r") as h5:
        if not dset:
            dset = default if default in h5 else _only_2d(h5)
        dset = "/" + dset.lstrip("/")
        return h5[dset][...].astype(np.float32), path, dset


def write(path, **arrays):
    tmp = path + ".partial"
    with h5py.File(tmp, "w") as h5:
        for name, arr in arrays.items():
            h5.create_dataset(name, data=arr)
        h5.attrs["producer"] = "tests/integration/reference.py"
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=("topk", "matrix", "range"))
    ap.add_argument("-q", "--query", required=True)
    ap.add_argument("-b", "--base", required=True)
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("-m", "--metric", default="l2", choices=METRICS)
    ap.add_argument("-t", "--threshold", type=float)
    ap.add_argument("--self", action="store_true", dest="self_exclude")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args(argv)
    q, qf, qd = load(a.query, "test")
    b, bf, bd = load(a.base, "train")
    if a.command == "matrix":
        write(a.output, distances=matrix(q, b, a.metric))
        return 0
    same = (os.path.realpath(qf) == os.path.realpath(bf) and qd == bd)
    if a.command == "range":
        ptr, idx, dist = range_join(q, b, a.metric, a.threshold,
                                    a.self_exclude or same)
        write(a.output, indptr=ptr, indices=idx, distances=dist)
        return 0
    nbr, dist = topk(q, b, a.k, a.metric, a.threshold,
                     a.self_exclude or same)
    write(a.output, neighbors=nbr, distances=dist)
    return 0


if __name__ == "__main__":
    sys.exit(main())
