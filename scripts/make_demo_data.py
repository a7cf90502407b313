#!/usr/bin/python3
"""Make data/glove-demo.h5, the demo's input, from the GloVe test file.

    scripts/make_demo_data.py [SOURCE.h5] [OUT.h5]

SOURCE defaults to /work/shared/data/glove-100d-100k.h5 (100,000 train +
1,000 test GloVe 6B 100-d word vectors in ann-benchmarks layout, see
data/PROVENANCE.md); OUT defaults to data/glove-demo.h5 next to this
script's folder. The output holds

    /train        20000 x 100 float32  the first 20000 train words, in
                                       GloVe frequency order
    /train_words  20000 UTF-8 strings
    /test         8 x 100 float32      copies of the vectors of QUERY_WORDS
    /test_words   8 UTF-8 strings

with the source's root attributes plus a note of the slice. The result is
deterministic: the same source gives the same arrays.
"""

import os
import sys

import h5py
import numpy as np

BASE_ROWS = 20000
QUERY_WORDS = ("king", "paris", "computer", "music", "river", "doctor",
               "football", "coffee")
DEFAULT_SOURCE = "/work/shared/data/glove-100d-100k.h5"


def words_of(dset):
    return [w.decode() if isinstance(w, bytes) else str(w) for w in dset]


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    src = argv[1] if len(argv) > 1 else DEFAULT_SOURCE
    out = argv[2] if len(argv) > 2 else os.path.normpath(
        os.path.join(here, "..", "data", "glove-demo.h5"))
    with h5py.File(src, "r") as h5:
        train = h5["train"][:BASE_ROWS].astype(np.float32)
        words = words_of(h5["train_words"][:BASE_ROWS])
        attrs = dict(h5.attrs)
    where = {w: i for i, w in enumerate(words)}
    missing = [w for w in QUERY_WORDS if w not in where]
    if missing:
        sys.exit("%s: query words not among the first %d train words: %s"
                 % (src, BASE_ROWS, ", ".join(missing)))
    rows = [where[w] for w in QUERY_WORDS]
    text = h5py.string_dtype("utf-8")
    tmp = out + ".partial"
    with h5py.File(tmp, "w") as h5:
        for key, value in attrs.items():
            h5.attrs[key] = value
        h5.attrs["slice"] = (
            "train = the first %d train rows of %s; test = copies of the "
            "train vectors of the words in test_words (made by "
            "scripts/make_demo_data.py)" % (BASE_ROWS,
                                            os.path.basename(src)))
        opts = dict(compression="gzip", compression_opts=9, shuffle=True)
        h5.create_dataset("train", data=train, chunks=(1000, 100), **opts)
        h5.create_dataset("train_words", data=words, dtype=text, **opts)
        h5.create_dataset("test", data=train[rows])
        h5.create_dataset("test_words", data=list(QUERY_WORDS), dtype=text)
    os.replace(tmp, out)
    print("%s: %d base words, %d query words, %d bytes"
          % (out, len(words), len(rows), os.path.getsize(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
