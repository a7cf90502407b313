"""The Python package (python/xjoin) against the command line: the same
bits for top-k, range joins and matrices from numpy arrays of every float
type, C or Fortran ordered, from HDF5 specs, self-joins, thresholds;
Python exceptions for bad inputs; Ctrl-C stops a call; the interpreter
survives every failure.

Run by ctest (python.api) as `python3 -m pytest tests/python` with
XJOIN_LIBRARY naming the built libxjoin.so, XJOIN the xjoin binary, and
PYTHONPATH the package's folder.
"""

import os
import signal
import subprocess
import sys
import threading
import time

import h5py
import numpy as np
import pytest

import xjoin

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
XJOIN = os.environ.get("XJOIN", os.path.join(ROOT, "build", "xjoin"))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def rows(n, d, seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)).astype(dtype)


def cli(tmp_path, args, name="cli.h5"):
    """Run the command line (one rank) and load its output."""
    out = os.path.join(str(tmp_path), name)
    subprocess.run([XJOIN] + [str(a) for a in args] +
                   ["-o", out, "--force", "--quiet"], check=True, env=ENV)
    return xjoin.load(out)


def files(tmp_path, q, b):
    path = os.path.join(str(tmp_path), "in.h5")
    with h5py.File(path, "w") as f:
        f["test"] = q
        f["train"] = b
    return path


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype == np.float32:
        return a.shape == b.shape and np.array_equal(a.view(np.uint32),
                                                     b.view(np.uint32))
    return a.shape == b.shape and np.array_equal(a, b)


@pytest.mark.parametrize("metric", ["l2", "sqeuclidean", "cosine", "ip"])
def test_topk_same_bits_as_cli(tmp_path, metric):
    q, b = rows(120, 24, 1), rows(3000, 24, 2)
    nbr, dist = xjoin.topk(q, b, k=7, metric=metric)
    ref = cli(tmp_path, ["topk", "-q", files(tmp_path, q, b) + ":/test",
                         "-b", str(tmp_path / "in.h5") + ":/train",
                         "-k", 7, "-m", metric])
    assert nbr.dtype == np.int64 and dist.dtype == np.float32
    assert same_bits(nbr, ref["neighbors"])
    assert same_bits(dist, ref["distances"])


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int16])
@pytest.mark.parametrize("order", ["C", "F"])
def test_input_types_and_orders(tmp_path, dtype, order):
    q32 = rows(50, 16, 3)
    b32 = rows(900, 16, 4)
    q = np.asarray(q32.astype(dtype) if dtype != np.int16 else
                   (q32 * 100).astype(dtype), order=order)
    b = np.asarray(b32.astype(dtype) if dtype != np.int16 else
                   (b32 * 100).astype(dtype), order=order)
    # the reference: the same values as float32 rows, through a file
    nbr, dist = xjoin.topk(q, b, k=5)
    ref = cli(tmp_path, ["topk", "-q",
                         files(tmp_path, q.astype(np.float32),
                               b.astype(np.float32)) + ":/test",
                         "-b", str(tmp_path / "in.h5") + ":/train", "-k", 5])
    assert same_bits(nbr, ref["neighbors"])
    assert same_bits(dist, ref["distances"])


def test_sliced_arrays(tmp_path):
    big = rows(400, 40, 5)
    q, b = big[::3, 5:29], big[1::2, 5:29]     # strided, not contiguous
    nbr, dist = xjoin.topk(q, b, k=4, metric="cosine")
    ref = cli(tmp_path, ["topk", "-q",
                         files(tmp_path, np.ascontiguousarray(q),
                               np.ascontiguousarray(b)) + ":/test",
                         "-b", str(tmp_path / "in.h5") + ":/train", "-k", 4,
                         "-m", "cosine"])
    assert same_bits(nbr, ref["neighbors"])
    assert same_bits(dist, ref["distances"])


def test_file_specs(tmp_path):
    q, b = rows(30, 8, 6), rows(500, 8, 7)
    path = files(tmp_path, q, b)
    nbr, dist = xjoin.topk(path + ":/test", path + ":/train", k=3)
    ref = cli(tmp_path, ["topk", "-q", path + ":/test", "-b",
                         path + ":/train", "-k", 3])
    assert same_bits(nbr, ref["neighbors"])


def test_self_join_and_threshold(tmp_path):
    x = rows(1500, 12, 8)
    nbr, dist = xjoin.topk(x, x, k=6, metric="l2")
    assert not np.any(nbr == np.arange(len(x))[:, None])
    path = files(tmp_path, x, x)
    ref = cli(tmp_path, ["topk", "-q", path + ":/train", "-b",
                         path + ":/train", "-k", 6])
    assert same_bits(nbr, ref["neighbors"])
    assert same_bits(dist, ref["distances"])
    t = float(np.median(dist[:, 2]))
    n2, d2 = xjoin.topk(x, x, k=6, threshold=t)
    assert np.all((d2 <= t) | (n2 == -1)) and np.any(n2 == -1)


def test_range_csr(tmp_path):
    q, b = rows(80, 10, 9), rows(2000, 10, 10)
    t = 9.0
    csr = xjoin.range(q, b, t, metric="sqeuclidean")
    ref = cli(tmp_path, ["range", "-q", files(tmp_path, q, b) + ":/test",
                         "-b", str(tmp_path / "in.h5") + ":/train", "-t", t,
                         "-m", "sqeuclidean"])
    assert csr.shape == (80, 2000)
    assert same_bits(csr.indptr, ref["indptr"])
    assert same_bits(csr.indices, ref["indices"])
    assert same_bits(csr.data, ref["distances"])
    assert csr.nnz > 80


def test_matrix(tmp_path):
    q, b = rows(40, 9, 11), rows(300, 9, 12)
    m = xjoin.matrix(q, b, metric="l2")
    ref = cli(tmp_path, ["matrix", "-q", files(tmp_path, q, b) + ":/test",
                         "-b", str(tmp_path / "in.h5") + ":/train"])
    assert same_bits(m, ref["distances"][...])
    out = os.path.join(str(tmp_path), "m.h5")
    lazy = xjoin.matrix(q, b, out=out)
    assert lazy.shape == (40, 300) and same_bits(lazy[...], m)
    res = xjoin.load(out)
    assert res.attrs["command"] == "matrix"


def test_errors_are_exceptions():
    q = rows(20, 6, 13)
    bad = q.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="row 3 column 2 is NaN"):
        xjoin.topk(bad, q, k=2)
    with pytest.raises(xjoin.InputError):
        xjoin.topk(q, rows(20, 7, 14), k=2)          # dimensions differ
    with pytest.raises(ValueError):
        xjoin.topk(q, q, k=2, metric="hamming")
    with pytest.raises(ValueError):
        xjoin.topk(q.ravel(), q, k=2)                 # not 2-D
    zero = q.copy()
    zero[5] = 0
    with pytest.raises(ValueError, match="all zeros"):
        xjoin.topk(zero, q, k=2, metric="cosine")
    with pytest.raises(OSError):
        xjoin.topk("/nonexistent/file.h5:/x", q, k=2)
    with pytest.raises(xjoin.UsageError):
        xjoin.topk(q, q, k=0)
    # still alive, and still right
    nbr, _ = xjoin.topk(q, q, k=2)
    assert nbr.shape == (20, 2)


def test_ctrl_c_stops_a_call():
    """SIGINT during a long call: KeyboardInterrupt within seconds, and
    the next call runs."""
    # 20,000 x 600,000 x 64 in fp32 on one thread is 1.5 TFLOP: over 7 s
    # on any one core (a core's fp32 peak is under 200 GFLOP/s), so the
    # signal (at 1.5 s) lands inside the call on any machine; the old
    # 4,000 rows on both cores could end before it. An interrupted call
    # ends within seconds.
    q, b = rows(20000, 64, 15), rows(600000, 64, 16)
    timer = threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT))
    t0 = time.time()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            xjoin.topk(q, b, k=10, precision="fp32", threads=1)
    finally:
        timer.cancel()     # never let the signal reach a later test
    assert time.time() - t0 < 30
    nbr, _ = xjoin.topk(q[:5], b[:100], k=3)
    assert nbr.shape == (5, 3)


def test_other_threads_run_meanwhile():
    """The GIL is released: a Python thread counts while xjoin computes."""
    q, b = rows(2000, 64, 17), rows(100000, 64, 18)
    count = [0]
    done = threading.Event()

    def spin():
        while not done.is_set():
            count[0] += 1
    th = threading.Thread(target=spin)
    th.start()
    try:
        xjoin.topk(q, b, k=5, precision="fp32", threads=1)
    finally:
        done.set()
        th.join()
    assert count[0] > 1000


def test_version():
    assert xjoin.version().count(".") == 2
