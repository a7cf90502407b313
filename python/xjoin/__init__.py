"""xjoin from Python: exact top-k, range joins and distance matrices of
dense vectors, run in this process by the same code as the command line
(`xjoin topk|range|matrix`), with the same bits.

    import numpy as np, xjoin
    nbr, dist = xjoin.topk(Q, B, k=10, metric="l2")
    csr = xjoin.range(Q, B, t=0.5, metric="cosine")
    d = xjoin.matrix(Q, B, metric="ip")           # or out="big.h5"
    res = xjoin.load("out.h5")                    # any xjoin output

Inputs are 2-D numpy arrays of any float (or integer) type, C or Fortran
ordered or sliced (float32 rows laid out row after row are used in place;
others are converted once), or "file.h5:/dataset" strings, which xjoin
reads itself. Results are canonical: every value is the float32 rounding
of a double-precision score in a fixed order, so they equal the command
line's output bit for bit, whatever precision proposed the candidates.

Errors raise XjoinError subclasses that are also the usual Python ones:
InputError (ValueError: NaN, shapes, a bad metric), UsageError
(ValueError), ResourceError (MemoryError), FileError (OSError for a
missing or unreadable file); KeyboardInterrupt when Ctrl-C stopped the
call. The interpreter never dies: what would end the command line ends
only the call. The GIL is released while xjoin computes.
"""

import os
import signal
import tempfile
import threading

import numpy as np

from . import _lib

__all__ = ["topk", "range", "matrix", "load", "version", "XjoinError",
           "UsageError", "InputError", "ResourceError", "FileError"]

_builtin_range = range


class XjoinError(Exception):
    """An xjoin run that failed; .code is the command line's exit code."""

    def __init__(self, msg, code):
        super().__init__(msg)
        self.code = code


class UsageError(XjoinError, ValueError):
    """A bad option or value (exit code 2)."""


class InputError(XjoinError, ValueError):
    """A bad input: NaN or Inf, zero rows for cosine, shapes (exit 3)."""


class ResourceError(XjoinError, MemoryError):
    """Memory or disk short of the job (exit 4)."""


class FileError(XjoinError, OSError):
    """An input file missing, unreadable or not HDF5 (exit 3)."""


_lock = threading.Lock()

_TYPES = {
    np.dtype(np.float32): _lib.F32, np.dtype(np.float64): _lib.F64,
    np.dtype(np.float16): _lib.F16, np.dtype(np.int8): _lib.I8,
    np.dtype(np.uint8): _lib.U8, np.dtype(np.int16): _lib.I16,
    np.dtype(np.uint16): _lib.U16, np.dtype(np.int32): _lib.I32,
    np.dtype(np.uint32): _lib.U32, np.dtype(np.int64): _lib.I64,
    np.dtype(np.uint64): _lib.U64,
}

_METRICS = ("l2", "sqeuclidean", "cosine", "ip")


def version():
    """xjoin's version ("0.1.0")."""
    return _lib.version()


def _raise(code, msg):
    if code == 5:
        raise KeyboardInterrupt(msg)
    low = msg.lower()
    if code == 3 and ("cannot open" in low or "no such file" in low or
                      "not hdf5" in low or "not an hdf5" in low or
                      "not a regular file" in low or "missing" in low):
        raise FileError(msg, code)
    cls = {2: UsageError, 3: InputError, 4: ResourceError}.get(code,
                                                               XjoinError)
    raise cls(msg, code)


def _input(x, name, keep):
    """The spec string xjoin reads for input x: a file spec as it is, an
    array registered as "array:NAME" (kept alive in keep)."""
    if isinstance(x, (str, os.PathLike)):
        return os.fspath(x)
    a = np.asarray(x)
    if a.ndim != 2:
        raise InputError("%s: expected a 2-D array (rows x dimension), "
                         "got %d dimensions" % (name, a.ndim), 3)
    if a.dtype not in _TYPES:
        if a.dtype.kind == "f":        # float128 and such: once to float64
            a = a.astype(np.float64)
        else:
            raise InputError("%s: element type %s is not a number type "
                             "xjoin reads" % (name, a.dtype), 3)
    if any(s % a.itemsize for s in a.strides):
        a = np.ascontiguousarray(a)    # odd byte strides: one copy
    keep.append(a)
    _lib.input(name, a.ctypes.data, _TYPES[a.dtype], a.shape[0], a.shape[1],
               a.strides[0] // a.itemsize, a.strides[1] // a.itemsize)
    return "array:" + name


def _same(a, b):
    return a is b or (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
                      and a.__array_interface__ == b.__array_interface__)


def _common(metric, device, precision, threads):
    if metric not in _METRICS:
        raise UsageError("metric %r: one of %s" % (metric, ", ".join(
            _METRICS)), 2)
    argv = ["-m", metric, "--device", device, "--precision", precision,
            "--quiet", "--force", "--no-checkpoint"]
    if threads:
        argv += ["--threads", str(int(threads))]
    return argv


def _scratch():
    """A folder for the result file: shared memory when there is some."""
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    return tempfile.TemporaryDirectory(prefix="xjoin-", dir=base)


def _run(argv, inputs):
    """Register the inputs, run xjoin, clear them; raise on failure."""
    with _lock:
        keep = []
        try:
            specs = [_input(x, n, keep) for x, n in inputs]
            code, msg = _lib.run([specs[int(a[2:-1])] if a.startswith("@{")
                                  else a for a in argv])
        finally:
            _lib.clear()
    if code:
        _raise(code, msg)


def topk(Q, B, k, metric="l2", threshold=None, self=False, device="auto",
         precision="auto", threads=None):
    """For every row of Q its k nearest rows of B: (neighbors, distances),
    int64 and float32 arrays of len(Q) x k, best first, ties to the
    lower index; -1 (and +inf, -inf for ip) where fewer than k rows pass
    threshold (<= for distances, >= for ip). self=True, or Q the same
    array as B, leaves each row out of its own list."""
    with _scratch() as tmp:
        out = os.path.join(tmp, "topk.h5")
        argv = ["topk", "-q", "@{0}", "-b", "@{1}", "-k", str(int(k)),
                "-o", out] + _common(metric, device, precision, threads)
        if threshold is not None:
            argv += ["-t", repr(float(threshold))]
        if self:
            argv.append("--self")
        same = _same(Q, B)
        _run(argv, [(Q, "queries"), (B, "queries" if same else "base")])
        res = load(out)
        return res["neighbors"], res["distances"]


def range(Q, B, t, metric="l2", self=False, device="auto",
          precision="auto", threads=None, max_pairs=None):
    """Every row of B within t of each row of Q (<= for distances, >= for
    ip), as a scipy.sparse.csr_matrix of len(Q) x len(B), each row's
    pairs in (value, index) order. Zero distances are stored entries."""
    with _scratch() as tmp:
        out = os.path.join(tmp, "range.h5")
        argv = ["range", "-q", "@{0}", "-b", "@{1}", "-t", repr(float(t)),
                "-o", out] + _common(metric, device, precision, threads)
        if self:
            argv.append("--self")
        if max_pairs is not None:
            argv += ["--max-pairs", str(int(max_pairs))]
        same = _same(Q, B)
        _run(argv, [(Q, "queries"), (B, "queries" if same else "base")])
        return load(out)["csr"]


def matrix(Q, B, metric="l2", out=None, device="auto", threads=None):
    """Every pair's value, len(Q) x len(B) float32: a numpy array, or with
    out="file.h5" that file (written as the command line writes it, for
    matrices larger than memory), returned as load(out)'s lazy dataset."""
    argv_common = _common(metric, device, "auto", threads)
    argv_common = argv_common[:argv_common.index("--precision")] + \
        argv_common[argv_common.index("--precision") + 2:]
    same = _same(Q, B)
    if out is not None:
        argv = ["matrix", "-q", "@{0}", "-b", "@{1}", "-o", os.fspath(out)]
        _run(argv + argv_common,
             [(Q, "queries"), (B, "queries" if same else "base")])
        return load(out)["distances"]
    with _scratch() as tmp:
        path = os.path.join(tmp, "matrix.h5")
        argv = ["matrix", "-q", "@{0}", "-b", "@{1}", "-o", path]
        _run(argv + argv_common,
             [(Q, "queries"), (B, "queries" if same else "base")])
        import h5py
        with h5py.File(path, "r") as f:
            return f["distances"][...]


class Result(dict):
    """What load() returns: the output's datasets by name and its root
    attributes in .attrs."""

    attrs = None


def load(path):
    """Any xjoin output: a top-k's "neighbors" and "distances" arrays, a
    range join's "csr" (scipy.sparse.csr_matrix) with "indptr",
    "indices" and "distances", a matrix's "distances" as a lazy h5py
    dataset (the file stays open with it); root attributes in .attrs."""
    import h5py
    f = h5py.File(os.fspath(path), "r")
    res = Result()
    res.attrs = {k: (v.decode() if isinstance(v, bytes) else
                     v.item() if hasattr(v, "item") and np.ndim(v) == 0
                     else v) for k, v in f.attrs.items()}
    command = res.attrs.get("command")
    if command == "matrix":
        res["distances"] = f["distances"]
        return res
    for name in ("neighbors", "distances", "indptr", "indices"):
        if name in f:
            res[name] = f[name][...]
    f.close()
    if command == "range":
        import scipy.sparse as sp
        n = int(res.attrs.get("query_rows", len(res["indptr"]) - 1))
        m = int(res.attrs.get("base_rows", 0))
        res["csr"] = sp.csr_matrix((res["distances"], res["indices"],
                                    res["indptr"]), shape=(n, m))
    return res
