#!/usr/bin/python3
"""Make the data of this example from ../shared/data (not needed to run it).

    /usr/bin/python3 examples/semantic-join/make_data.py [SHARED_DATA_DIR]

Writes, next to this script:
  data/titles.tsv       the titles joined: source, id, labels, title
  data/glove-subset.h5  /vectors (float32, w x 100) and /words (UTF-8) for
                        exactly the words of those titles and of topics.tsv
                        that GloVe knows, in GloVe frequency order

Titles: all 80 of reuters21578_tm_80.tsv (labels: its topics column), then
from reuters21578_modapte_weka_grain_corn.tsv's test split every titled
article labelled grain (labels grain, and corn where marked) and the first
60 titled ones labelled neither (labels unknown: "-"), skipping a title
already taken. Vectors: /train and /test of glove-100d-100k.h5, rows copied
unchanged. The output is the same bytes for the same inputs.
"""

import csv
import os
import sys

import h5py
import numpy as np

from textvec import tokens

HERE = os.path.dirname(os.path.abspath(__file__))
UNLABELLED = 60


def read_tsv(path):
    csv.field_size_limit(1 << 26)
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def pick_titles(shared):
    rows, seen = [], set()

    def take(source, ident, labels, title):
        title = " ".join(title.split())
        if title and title not in seen:
            seen.add(title)
            rows.append((source, ident, labels, title))

    for r in read_tsv(os.path.join(shared, "reuters21578_tm_80.tsv")):
        take("tm", r["newid"], " ".join(r["topics"].split()) or "-",
             r["title"])
    weka = [r for r in read_tsv(os.path.join(
        shared, "reuters21578_modapte_weka_grain_corn.tsv"))
        if r["split"] == "test"]
    for i, r in enumerate(weka):
        if r["grain"] == "1":
            take("weka-test", str(i),
                 "grain corn" if r["corn"] == "1" else "grain",
                 r["title_heuristic"])
    others = [(i, r) for i, r in enumerate(weka)
              if r["grain"] == "0" and r["corn"] == "0"
              and r["title_heuristic"].strip()]
    for i, r in others[:UNLABELLED]:
        take("weka-test", str(i), "-", r["title_heuristic"])
    return rows


def glove_subset(path, wanted):
    """(words, vectors) of the wanted words, in the file's row order."""
    words, vecs = [], []
    with h5py.File(path, "r") as f:
        for split in ("train", "test"):
            names = [w.decode() if isinstance(w, bytes) else w
                     for w in f[split + "_words"][...]]
            rows = [i for i, w in enumerate(names) if w in wanted]
            words += [names[i] for i in rows]
            vecs.append(f[split][...][rows])
    return words, np.concatenate(vecs).astype(np.float32)


def main(argv):
    shared = argv[1] if len(argv) > 1 else os.path.join(
        HERE, "..", "..", "..", "shared", "data")
    titles = pick_titles(shared)
    topics = read_tsv(os.path.join(HERE, "topics.tsv"))
    wanted = set()
    for text in [t[3] for t in titles] + [t["description"] for t in topics]:
        wanted.update(tokens(text))
    words, vecs = glove_subset(os.path.join(shared, "glove-100d-100k.h5"),
                               wanted)
    os.makedirs(os.path.join(HERE, "data"), exist_ok=True)
    with open(os.path.join(HERE, "data", "titles.tsv"), "w") as f:
        f.write("source\tid\tlabels\ttitle\n")
        for row in titles:
            f.write("\t".join(row) + "\n")
    out = os.path.join(HERE, "data", "glove-subset.h5")
    with h5py.File(out, "w") as f:
        f.create_dataset("vectors", data=vecs, compression="gzip",
                         compression_opts=9, shuffle=True,
                         track_times=False)
        f.create_dataset("words", data=np.array(words, dtype=object),
                         dtype=h5py.string_dtype(), track_times=False)
        f.attrs["source"] = "glove-100d-100k.h5 /train and /test rows"
    print("%d titles, %d topic descriptions, %d of %d words found in GloVe"
          % (len(titles), len(topics), len(words), len(wanted)))


if __name__ == "__main__":
    main(sys.argv)
