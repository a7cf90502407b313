#!/usr/bin/python3
"""Write the seed corpora of the HDF5 input fuzzers (tests/fuzz/seeds).

    tests/fuzz/make_seeds.py [--glove FILE] [--fashion DIR] [--out DIR]
                             [--recipes DIR]

Every seed is a small HDF5 file made from real rows: the first rows of
/test and /train of GloVe (glove-100d-100k.h5, 100-d float32, see
/work/shared/data/PROVENANCE.md) and, when the Debian package
dataset-fashion-mnist is installed, Fashion-MNIST images (784 uint8). The
rows are stored as the types and layouts xjoin meets in practice
(float32, float64, int8, uint8, int16, big-endian; chunked with gzip and
shuffle, contiguous, compact), plus the input errors xjoin must refuse
(NaN, Inf, zero rows for cosine, chunks never written, wrong rank or
class, several candidate datasets). A fuzzer mutates these bytes, so
small files that are each a different shape of the format are the point;
the set stays under 200 KB.

For fuzz_h5gen, whose input is a recipe rather than a file, it also
writes a few random recipes (seeds/h5gen/recipe-NN) to start from; the
rest of that folder is inputs the fuzzer found, kept because each reaches
something the others do not.

The output is deterministic for a given source file. Needs h5py and
numpy (/usr/bin/python3 on Debian: python3-h5py, python3-numpy).
"""

import argparse
import gzip
import os
import struct
import sys

import h5py
import numpy as np

DEFAULT_GLOVE = "/work/shared/data/glove-100d-100k.h5"
DEFAULT_FASHION = "/usr/share/datasets/fashion-mnist"
QROWS, BROWS = 3, 6


def glove_rows(path):
    """First rows of /test and /train; the demo slice when the full file
    is absent (same layout, same first rows of /train)."""
    if not os.path.exists(path):
        here = os.path.dirname(os.path.abspath(__file__))
        path = os.path.join(here, "..", "..", "data", "glove-demo.h5")
    with h5py.File(path, "r") as f:
        return (np.asarray(f["test"][:QROWS], dtype=np.float32),
                np.asarray(f["train"][:BROWS], dtype=np.float32))


def idx_rows(path, count):
    with gzip.open(path, "rb") as f:
        magic = struct.unpack(">I", f.read(4))[0]
        ndim = magic & 0xFF
        dims = struct.unpack(">%dI" % ndim, f.read(4 * ndim))
        per = int(np.prod(dims[1:]))
        data = np.frombuffer(f.read(count * per), dtype=np.uint8)
    return data.reshape(count, per)


def quantize(x, dtype):
    """GloVe values are within about +-4: scale into the integer range."""
    info = np.iinfo(dtype)
    scale = min(info.max, 127) / 4.0
    return np.clip(np.rint(x * scale), info.min, info.max).astype(dtype)


def write(out, name, datasets, compact=False):
    """datasets: list of (path, array, create_dataset keywords)."""
    path = os.path.join(out, name)
    with h5py.File(path, "w", libver="earliest") as f:
        for dpath, data, kw in datasets:
            if compact:
                space = h5py.h5s.create_simple(data.shape)
                dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
                dcpl.set_layout(h5py.h5d.COMPACT)
                dcpl.set_obj_track_times(False)   # same bytes each run
                tid = h5py.h5t.py_create(data.dtype, logical=True)
                dsid = h5py.h5d.create(f.id, dpath.encode(), tid, space,
                                       dcpl=dcpl)
                dsid.write(h5py.h5s.ALL, h5py.h5s.ALL,
                           np.ascontiguousarray(data))
            else:
                f.create_dataset(dpath, data=data, **kw)
    return path


def make(out, glove, fashion):
    q, b = glove_rows(glove)
    gz = dict(chunks=(2, 50), compression="gzip", compression_opts=4)
    gzs = dict(chunks=(2, 100), compression="gzip", shuffle=True)
    seeds = [
        ("glove_f32_gzip.h5", [("test", q, gz), ("train", b, gz)]),
        ("glove_f32_contig.h5", [("test", q, {}), ("train", b, {})]),
        ("glove_f64_contig.h5", [("test", q.astype(np.float64), {}),
                                 ("train", b.astype(np.float64), {})]),
        ("glove_f64_gzip.h5", [("train", b.astype(np.float64), gzs)]),
        ("glove_i8_shuffle.h5", [("test", quantize(q, np.int8), gzs),
                                 ("train", quantize(b, np.int8), gzs)]),
        ("glove_u8_contig.h5", [("train", quantize(b + 4, np.uint8), {})]),
        ("glove_i16_chunked.h5", [("test", quantize(q, np.int16),
                                   dict(chunks=(1, 100))),
                                  ("train", quantize(b, np.int16),
                                   dict(chunks=(4, 64)))]),
        ("glove_f32_be.h5", [("train", b.astype(">f4"), {})]),
        ("glove_fletcher.h5", [("train", b, dict(chunks=(3, 100),
                                                 fletcher32=True))]),
        ("glove_nested.h5", [("vectors/glove", b, gz)]),
        ("glove_two_2d.h5", [("a", q, {}), ("b", b, {})]),
        ("glove_1d.h5", [("test", q[0], {}),
                           ("train", b.ravel(),
                            dict(chunks=(150,), compression="gzip"))]),
        ("glove_3d.h5", [("train", b.reshape(2, 3, 100), {})]),
        ("glove_words.h5", [("test", np.array([b"king", b"paris"]), {}),
                            ("train", b, {})]),
    ]
    nan = b.copy()
    nan[4, 17] = np.nan
    inf = q.astype(np.float64)
    inf[1, 3] = 1e300          # beyond float32: Inf after conversion
    zero = b.copy()
    zero[2] = 0.0              # refused by cosine only
    big = b.copy()
    big[5] *= 1e18             # squared norm past float32
    seeds += [
        ("glove_nan.h5", [("test", q, {}), ("train", nan, gz)]),
        ("glove_f64_overflow.h5", [("test", inf, {}), ("train", b, {})]),
        ("glove_zero_row.h5", [("train", zero, {})]),
        ("glove_big_norm.h5", [("train", big, {})]),
    ]
    paths = [write(out, name, ds) for name, ds in seeds]
    paths.append(write(out, "glove_compact.h5",
                       [("test", q, {}), ("train", b, {})], compact=True))

    # chunks never written: a declared shape the file does not hold
    path = os.path.join(out, "glove_unwritten.h5")
    with h5py.File(path, "w", libver="earliest") as f:
        d = f.create_dataset("train", shape=(8, 100), dtype=np.float32,
                             chunks=(2, 100), compression="gzip")
        d[0:4] = b[0:4]
    paths.append(path)
    # resized: an unlimited dataset grown past what was written
    path = os.path.join(out, "glove_grown.h5")
    with h5py.File(path, "w", libver="earliest") as f:
        d = f.create_dataset("train", data=b, chunks=(2, 100),
                             maxshape=(None, 100))
        d.resize((10, 100))
    paths.append(path)

    idx = os.path.join(fashion, "t10k-images-idx3-ubyte.gz")
    if os.path.exists(idx):
        img = idx_rows(idx, QROWS + 2)
        paths.append(write(out, "fmnist_u8_gzip.h5", [
            ("test", img[:2], dict(chunks=(1, 784), compression="gzip")),
            ("train", img[2:], dict(chunks=(2, 392), compression="gzip",
                                    shuffle=True))]))
        paths.append(write(out, "fmnist_u8_contig.h5",
                           [("train", img, {})]))
    else:
        print("make_seeds.py: %s missing, no Fashion-MNIST seeds" % idx,
              file=sys.stderr)
    return paths


def recipes(out, count=12):
    rng = np.random.RandomState(2026)
    paths = []
    for i in range(count):
        path = os.path.join(out, "recipe-%02d" % i)
        with open(path, "wb") as f:
            f.write(rng.randint(0, 256, 64 + 16 * i).astype(np.uint8)
                    .tobytes())
        paths.append(path)
    return paths


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glove", default=DEFAULT_GLOVE)
    ap.add_argument("--fashion", default=DEFAULT_FASHION)
    ap.add_argument("--out", default=os.path.join(here, "seeds", "h5in"))
    ap.add_argument("--recipes", default=os.path.join(here, "seeds", "h5gen"))
    args = ap.parse_args(argv[1:])
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.recipes, exist_ok=True)
    total = 0
    for p in make(args.out, args.glove, args.fashion) + recipes(args.recipes):
        total += os.path.getsize(p)
        print("%7d %s" % (os.path.getsize(p), os.path.relpath(p)))
    print("%7d bytes in all" % total)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
