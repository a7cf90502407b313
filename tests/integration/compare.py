#!/usr/bin/python3
"""Compare two xjoin result files bit for bit.

    compare.py ACTUAL.h5 EXPECTED.h5 [--max-print N]

Compares /neighbors (int64, exactly equal) and /distances (float32, equal as
uint32 bit patterns, so -0.0 != 0.0 and NaN payloads count) wherever either
file has them; for a range join's CSR output also /indptr and /indices (int64).
Prints the first mismatches with their position and both values; exits 0
when identical, 1 on any difference, 2 when a file cannot be read.

As a module: compare(actual_path, expected_path, max_print=10, out=stdout)
returns the number of mismatching entries (0: identical).
"""

import argparse
import sys

import h5py
import numpy as np

DATASETS = (("neighbors", np.int64), ("indptr", np.int64),
            ("indices", np.int64), ("distances", np.float32))


def _bits(a):
    return a.view(np.uint32) if a.dtype == np.float32 else a


def _fmt(a, pos):
    v = a[pos]
    if a.dtype == np.float32:
        return "%r (0x%08x)" % (float(v), int(a.view(np.uint32)[pos]))
    return repr(int(v))


def _compare_one(name, dtype, fa, fb, max_print, out):
    if name not in fa and name not in fb:
        return 0
    for f, other in ((fa, fb), (fb, fa)):
        if name not in f:
            print("/%s: missing in %s (present in %s)"
                  % (name, f.filename, other.filename), file=out)
            return 1
    a, b = fa[name][...], fb[name][...]
    for f, arr in ((fa, a), (fb, b)):
        if arr.dtype != dtype:
            print("/%s in %s: type %s, expected %s"
                  % (name, f.filename, arr.dtype, np.dtype(dtype)), file=out)
            return 1
    if a.shape != b.shape:
        print("/%s: shape %s != %s" % (name, a.shape, b.shape), file=out)
        return 1
    diff = _bits(a) != _bits(b)
    bad = int(np.count_nonzero(diff))
    if bad == 0:
        return 0
    print("/%s: %d of %d entries differ; first ones (position: actual | "
          "expected):" % (name, bad, a.size), file=out)
    for p in np.argwhere(diff)[:max_print]:
        pos = tuple(int(x) for x in p)
        print("  %s: %s | %s" % (list(pos), _fmt(a, pos), _fmt(b, pos)),
              file=out)
    return bad


def compare(actual, expected, max_print=10, out=sys.stdout):
    """Number of differing entries between two result files (0: same)."""
    bad = 0
    with h5py.File(actual, "r") as fa, h5py.File(expected, "r") as fb:
        for name, dtype in DATASETS:
            bad += _compare_one(name, dtype, fa, fb, max_print, out)
        if not any(name in fa or name in fb for name, _ in DATASETS):
            print("no /neighbors, /indices or /distances in either file",
                  file=out)
            bad += 1
    return bad


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("actual")
    ap.add_argument("expected")
    ap.add_argument("--max-print", type=int, default=10)
    a = ap.parse_args(argv)
    try:
        bad = compare(a.actual, a.expected, a.max_print)
    except (OSError, KeyError) as e:
        print("compare.py: %s" % e, file=sys.stderr)
        return 2
    print("%s: %s" % ("IDENTICAL" if bad == 0 else "DIFFERENT", a.actual))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
