#!/usr/bin/python3
"""One top-k job across rank counts and chunk sizes: same bits, and how
time and memory move.

    /usr/bin/python3 examples/partition-sweep/run.py [--rows M] [--queries N]
        [--dim D] [-k K] [--ranks 1,2,4] [--chunks 256,1024,4096,auto]
        [--reps R] [--workdir DIR] [--png FILE] [--check]

`xjoin gen` writes N queries and M base rows (Gaussian blobs); then

    mpirun -np P xjoin topk -k K -m l2 [--chunk-rows C] --threads T

runs for every P in --ranks and C in --chunks ("auto": the planner's
choice), with T = max(1, cores / P) so every run has the machine's cores.
Every output is compared bit for bit with the first one (tests/integration/
compare.py), and with --check the first one also with the naive float64
reference (tests/integration/reference.py). Printed per run: the chunk
rows the plan used (query x base, from the output's attributes), xjoin's
own seconds (--report-json) and its compute phase (of the fastest of
--reps runs), and the peak resident memory of the largest rank (the
largest of the runs). Writes runs.json and a plot of seconds and peak
memory against base chunk rows, one line per rank count.
"""

import argparse
import os
import sys

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import xjrun  # noqa: E402
import reference  # noqa: E402  tests/integration/reference.py (on the path)


def chunk_rows(path):
    with h5py.File(path, "r") as f:
        return (int(f.attrs.get("query_chunk_rows", -1)),
                int(f.attrs.get("base_chunk_rows", -1)))


def one_run(args, inp, ranks, chunk, first):
    out = os.path.join(args.workdir, "np%d-c%s.h5" % (ranks, chunk))
    argv = ["topk", "-q", inp, "-b", inp, "-m", "l2", "-k", str(args.k),
            "-o", out, "--force"]
    if chunk != "auto":
        argv += ["--chunk-rows", chunk]
    threads = xjrun.threads_per_rank(ranks)
    run = xjrun.xjoin(ranks, argv, report=out + ".report.json",
                      threads=threads, reps=args.reps)
    qrows, brows = chunk_rows(out)
    differ = 0 if first is None else xjrun.same_bits(out, first)
    rec = {"ranks": ranks, "series": "%d rank%s" % (ranks, "s" * (ranks > 1)),
           "chunk_rows": chunk, "threads": threads,
           "query_chunk_rows": qrows, "base_chunk_rows": brows,
           "seconds": xjrun.field(run.report, "total_seconds"),
           "compute_s": xjrun.field(run.report, "phase_seconds.compute"),
           "wall_s": run.wall_s, "peak_mib": run.peak_mib,
           "differing": differ, "out": out, "report": run.report}
    print("%5d %6s %5d %6d x %-6d %9s %9s %9s  %s"
          % (ranks, chunk, threads, qrows, brows, fmt(rec["seconds"]),
             fmt(rec["compute_s"]), fmt(run.peak_mib, "%.1f"),
             "first" if first is None else
             "same bits" if differ == 0 else "%d DIFFER" % differ))
    sys.stdout.flush()
    return rec


def fmt(v, spec="%.3f"):
    return spec % v if isinstance(v, (int, float)) else "?"


def check(args, inp, recs):
    bad = [r for r in recs if r["differing"]]
    for r in bad:
        print("FAILED: %d ranks, --chunk-rows %s: %d entries differ from "
              "the first run" % (r["ranks"], r["chunk_rows"], r["differing"]))
    with h5py.File(inp, "r") as f:
        q, b = f["test"][...], f["train"][...]
    nbr, dist = reference.topk(q, b, args.k, "l2")
    ref = os.path.join(args.workdir, "reference.h5")
    reference.write(ref, neighbors=nbr, distances=dist)
    if xjrun.same_bits(recs[0]["out"], ref):
        print("FAILED: the first run differs from the float64 reference")
        return 1
    if bad:
        return 1
    print("OK: %d runs, the same bits as each other and as the reference"
          % len(recs))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100000, help="base rows")
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--chunks", default="256,1024,4096,auto")
    xjrun.add_common_args(ap, "partition-sweep", "also compare with the "
                          "float64 reference; exit 1 on any difference")
    args = ap.parse_args(argv)
    os.makedirs(args.workdir, exist_ok=True)
    inp = os.path.join(args.workdir, "in-%d-%d-%d.h5"
                       % (args.queries, args.rows, args.dim))
    if not os.path.exists(inp):
        xjrun.xjoin(1, ["gen", "--rows", str(args.rows), "--queries",
                        str(args.queries), "--dim", str(args.dim),
                        "--clusters", "50", "--seed", "7", "-o", inp,
                        "--force"])
    print("# topk l2 k=%d: %d queries x %d base rows x %d dims"
          % (args.k, args.queries, args.rows, args.dim))
    print("# ranks  chunk threads  chunk rows used    seconds   compute  "
          "peak MiB  output")
    recs, first = [], None
    for ranks in [int(r) for r in args.ranks.split(",")]:
        for chunk in args.chunks.split(","):
            recs.append(one_run(args, inp, ranks, chunk, first))
            first = first or recs[0]["out"]
    runs = os.path.join(args.workdir, "runs.json")
    xjrun.write_runs(runs, recs)
    xjrun.plot(["-o", args.png or os.path.join(args.workdir,
                                               "partition-sweep.png"),
                "--x", "base_chunk_rows", "--y", "seconds",
                "--y", "peak_mib", "--series", "series", "--log", "x",
                "--xlabel", "base chunk rows (--chunk-rows, or the plan's)",
                "--ylabel", "seconds (xjoin's total)",
                "--ylabel", "peak RSS of the largest rank (MiB)",
                "--title", "topk l2 k=%d, %d x %d x %d: time and memory "
                "against chunk size" % (args.k, args.queries, args.rows,
                                        args.dim),
                "--note", xjrun.note(sys.argv), runs])
    return check(args, inp, recs) if args.check else 0


if __name__ == "__main__":
    sys.exit(main())
