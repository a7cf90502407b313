#!/usr/bin/env python3
"""GPU peers for gpu_vs_peers.sh: the same exact top-k job in PyTorch and
CuPy, and the SGEMM of its shape, on one GPU.

    gpu_peers.py torch -q FILE -b FILE -k K -o OUT.h5 [--chunk ROWS]
    gpu_peers.py cupy  -q FILE -b FILE -k K -o OUT.h5 [--chunk ROWS]
    gpu_peers.py sgemm -q FILE -b FILE [--chunk ROWS]
    gpu_peers.py agree A.h5 B.h5
    gpu_peers.py shapes

Every job is l2 in fp32 (TF32 off), HDF5 in and out through h5py, and
prints one line `time <tool> total_s=.. compute_s=..`: total counts reading,
copying to the GPU, computing and writing; compute is the device part alone
(synchronised). The base set stays on the GPU; queries go in chunks of
ROWS rows, so the distance block (ROWS x base rows x 4 bytes) fits.

torch: |q|^2 + |b|^2 - 2 q.b with torch.mm, then torch.topk, sqrt of the k.
cupy:  the course-style NumPy code on the GPU: the same distance block,
       argpartition for the k smallest, then argsort of those k.
sgemm: torch.mm of each query chunk against the whole base into one
       reused buffer: the matrix products alone, the bound for both.
agree: the share of rows whose neighbour sets are equal, and of neighbours
       found by both (float32 peers order ties and round differently).
shapes: torch.mm's rate (cuBLAS) for the GEMM shapes an xjoin pass may
       take, m x n x 128 in fp32 and bf16, one line each.
"""

import argparse
import sys
import time

import h5py
import numpy as np


def read(path, dset):
    with h5py.File(path, "r") as f:
        return np.ascontiguousarray(f[dset][...], dtype=np.float32)


def write(path, nbr, dist):
    with h5py.File(path, "w") as f:
        f["neighbors"] = nbr.astype(np.int64)
        f["distances"] = dist.astype(np.float32)


def sync_torch():
    import torch
    torch.cuda.synchronize()


def run_torch(a, q, b):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    bt = torch.from_numpy(b).to(dev)
    bn = (bt * bt).sum(1)
    nbr = np.empty((q.shape[0], a.k), np.int64)
    dist = np.empty((q.shape[0], a.k), np.float32)
    sync_torch()
    t = time.perf_counter()
    for i in range(0, q.shape[0], a.chunk):
        qt = torch.from_numpy(q[i:i + a.chunk]).to(dev)
        d = torch.mm(qt, bt.T).mul_(-2).add_(bn).add_((qt * qt).sum(1, keepdim=True))
        v, j = torch.topk(d, a.k, dim=1, largest=False, sorted=True)
        dist[i:i + a.chunk] = v.clamp_(min=0).sqrt_().cpu().numpy()
        nbr[i:i + a.chunk] = j.cpu().numpy()
    sync_torch()
    return nbr, dist, time.perf_counter() - t


def run_cupy(a, q, b):
    import cupy as cp
    bg = cp.asarray(b)
    bn = (bg * bg).sum(1)
    nbr = np.empty((q.shape[0], a.k), np.int64)
    dist = np.empty((q.shape[0], a.k), np.float32)
    cp.cuda.Device().synchronize()
    t = time.perf_counter()
    for i in range(0, q.shape[0], a.chunk):
        qg = cp.asarray(q[i:i + a.chunk])
        d = (qg * qg).sum(1)[:, None] + bn[None, :] - 2 * qg @ bg.T
        part = cp.argpartition(d, a.k, axis=1)[:, :a.k]
        pd = cp.take_along_axis(d, part, 1)
        order = cp.argsort(pd, axis=1)
        nbr[i:i + a.chunk] = cp.take_along_axis(part, order, 1).get()
        dist[i:i + a.chunk] = cp.sqrt(cp.maximum(cp.take_along_axis(pd, order, 1), 0)).get()
    cp.cuda.Device().synchronize()
    return nbr, dist, time.perf_counter() - t


def run_sgemm(a, q, b):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    bt = torch.from_numpy(b).to(dev)
    qt = torch.from_numpy(q).to(dev)
    out = torch.empty((a.chunk, b.shape[0]), device=dev)
    torch.mm(qt[:a.chunk], bt.T, out=out[:min(a.chunk, q.shape[0])])
    sync_torch()
    t = time.perf_counter()
    for i in range(0, q.shape[0], a.chunk):
        c = qt[i:i + a.chunk]
        torch.mm(c, bt.T, out=out[:c.shape[0]])
    sync_torch()
    return time.perf_counter() - t


def shapes(d=128, reps=20):
    """cuBLAS's rate for the GEMM shapes a pass may take (m query rows x
    n base rows x d), through torch.mm, fp32 and bf16: which tile shape
    runs near the card's rate."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    for dt in (torch.float32, torch.bfloat16):
        for m, n in ((512, 16384), (512, 65536), (1024, 16384),
                     (2048, 16384), (2048, 65536), (4096, 65536)):
            a = torch.randn(m, d, device=dev).to(dt)
            b = torch.randn(n, d, device=dev).to(dt)
            out = torch.empty((m, n), device=dev, dtype=torch.float32)
            if dt != torch.float32:
                out = out.to(dt)
            torch.mm(a, b.T, out=out)
            sync_torch()
            t = time.perf_counter()
            for _ in range(reps):
                torch.mm(a, b.T, out=out)
            sync_torch()
            s = (time.perf_counter() - t) / reps
            print("shape %s m=%d n=%d d=%d us=%.1f TFLOP/s=%.1f" %
                  (str(dt).split(".")[-1], m, n, d, s * 1e6,
                   2.0 * m * n * d / s / 1e12))


def agree(pa, pb):
    with h5py.File(pa, "r") as fa, h5py.File(pb, "r") as fb:
        na, nb = fa["neighbors"][...], fb["neighbors"][...]
    rows = np.mean([set(x) == set(y) for x, y in zip(na, nb)])
    hits = np.mean([len(set(x) & set(y)) / len(x) for x, y in zip(na, nb)])
    print("agree rows_equal=%.6f neighbours_shared=%.6f" % (rows, hits))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="tool", required=True)
    for name in ("torch", "cupy", "sgemm"):
        s = sub.add_parser(name)
        s.add_argument("-q", "--query", required=True)
        s.add_argument("-b", "--base", required=True)
        s.add_argument("-k", type=int, default=10)
        s.add_argument("-o", "--output")
        s.add_argument("--chunk", type=int, default=2048)
    sub.add_parser("shapes")
    g = sub.add_parser("agree")
    g.add_argument("a")
    g.add_argument("b")
    a = p.parse_args(argv)
    if a.tool == "agree":
        agree(a.a, a.b)
        return 0
    if a.tool == "shapes":
        shapes()
        return 0
    t0 = time.perf_counter()
    q, b = read(a.query, "test"), read(a.base, "train")
    if a.tool == "sgemm":
        c = run_sgemm(a, q, b)
        print("time sgemm total_s=%.3f compute_s=%.3f" % (time.perf_counter() - t0, c))
        return 0
    nbr, dist, c = (run_torch if a.tool == "torch" else run_cupy)(a, q, b)
    if a.output:
        write(a.output, nbr, dist)
    print("time %s total_s=%.3f compute_s=%.3f" % (a.tool, time.perf_counter() - t0, c))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
