#!/usr/bin/python3
"""Semantic join: Reuters-21578 news titles against topic descriptions.

    /usr/bin/python3 examples/semantic-join/run.py [--workdir DIR] [--show N]
                                                   [--np P] [--check]

Embeds every title of data/titles.tsv and every description of topics.tsv
as the mean of its words' GloVe vectors (data/glove-subset.h5), then runs

    mpirun -np 2 xjoin topk -q titles -b topics -m cosine -k 5 -t 0.5

and prints each title with its matched topics, best first, and their cosine
distances (1 - cos; -t 0.5 keeps those with cos >= 0.5). Then it counts, for
each topic, how often a title labelled with it (Reuters' own labels) has it
among its matches, against how often any title has it: the chance rate of a
match that knows nothing of the labels. --check exits 1 unless labelled
titles match their topic more often than chance overall, by LIFT_MIN.
"""

import argparse
import csv
import os
import sys

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import xjrun  # noqa: E402
from textvec import embed  # noqa: E402

K, THRESHOLD = 5, 0.5
LIFT_MIN = 1.5


def read_tsv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def load_vocab(path):
    with h5py.File(path, "r") as f:
        words = [w.decode() if isinstance(w, bytes) else w
                 for w in f["words"][...]]
        return dict(zip(words, f["vectors"][...]))


def write_inputs(path, titles, topics):
    """/titles and /topics as averaged vectors; titles without a known word
    are left out. Returns the titles kept."""
    vocab = load_vocab(os.path.join(HERE, "data", "glove-subset.h5"))
    tvec, tused = embed([t["title"] for t in titles], vocab)
    pvec, pused = embed([p["description"] for p in topics], vocab)
    if min(pused) == 0:
        sys.exit("a topic description has no word with a vector")
    keep = [i for i, n in enumerate(tused) if n > 0]
    with h5py.File(path, "w") as f:
        f["titles"] = tvec[keep]
        f["topics"] = pvec
    return [titles[i] for i in keep]


def label_stats(titles, topics, nbr):
    """Per topic: (labelled titles, those matching it, titles matching it).
    Only topics with a description count."""
    names = [p["topic"] for p in topics]
    stats = {t: [0, 0, 0] for t in names}
    for row, title in zip(nbr, titles):
        matched = {names[j] for j in row if j >= 0}
        for t in matched:
            stats[t][2] += 1
        for t in title["labels"].split():
            if t in stats:
                stats[t][0] += 1
                stats[t][1] += t in matched
    return stats


def print_matches(titles, topics, nbr, dist, show):
    print("# title -> matched topics (cosine distance), best first")
    for i, title in enumerate(titles[:show]):
        got = ["%s (%.3f)" % (topics[j]["topic"], d)
               for j, d in zip(nbr[i], dist[i]) if j >= 0]
        print("%-58.58s [%s] -> %s" % (title["title"], title["labels"],
                                       ", ".join(got) or "(none past -t)"))
    if show < len(titles):
        print("# ... %d more titles (--show N prints more)"
              % (len(titles) - show))


def print_stats(stats, n):
    """Labelled hit rate against chance; returns the overall lift."""
    print("# topic: labelled titles matching it / labelled titles "
          "(rate) vs. all titles matching it (chance rate)")
    hits = labelled = expected = 0.0
    for t, (lab, hit, anyone) in stats.items():
        if lab == 0:
            continue
        chance = anyone / n
        print("%-9s %3d / %3d (%5.1f%%) vs. %3d / %d (%5.1f%%)"
              % (t, hit, lab, 100.0 * hit / lab, anyone, n, 100.0 * chance))
        hits += hit
        labelled += lab
        expected += lab * chance
    lift = hits / expected if expected else 0.0
    print("# labelled titles match their topic %d of %d times (%.1f%%); "
          "chance: %.1f (%.1f%%); %.2fx chance"
          % (hits, labelled, 100.0 * hits / labelled, expected,
             100.0 * expected / labelled, lift))
    return lift


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", default=os.path.join(
        xjrun.ROOT, "build", "examples", "semantic-join"))
    ap.add_argument("--np", type=int, default=2, help="MPI ranks")
    ap.add_argument("--show", type=int, default=1 << 30,
                    help="print the matches of the first N titles only")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless the labels match %.1fx chance"
                    % LIFT_MIN)
    args = ap.parse_args(argv)
    os.makedirs(args.workdir, exist_ok=True)
    titles = read_tsv(os.path.join(HERE, "data", "titles.tsv"))
    topics = read_tsv(os.path.join(HERE, "topics.tsv"))
    inp = os.path.join(args.workdir, "vectors.h5")
    out = os.path.join(args.workdir, "matches.h5")
    titles = write_inputs(inp, titles, topics)
    run = xjrun.xjoin(args.np, [
        "topk", "-q", inp + ":titles", "-b", inp + ":topics", "-m", "cosine",
        "-k", str(K), "-t", str(THRESHOLD), "-o", out, "--force"],
        report=out + ".report.json")
    with h5py.File(out, "r") as f:
        nbr, dist = f["neighbors"][...], f["distances"][...]
    print("# %d titles x %d topics, %d ranks, %.2f s (xjoin %s)"
          % (len(titles), len(topics), args.np, run.wall_s,
             xjrun.field(run.report, "xjoin_version") or "?"))
    print_matches(titles, topics, nbr, dist, args.show)
    lift = print_stats(label_stats(titles, topics, nbr), len(titles))
    if args.check and not lift >= LIFT_MIN:
        print("FAILED: labelled titles match their topic %.2fx chance, "
              "expected at least %.1fx" % (lift, LIFT_MIN))
        return 1
    if args.check:
        print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
