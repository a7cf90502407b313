#!/usr/bin/python3
"""`xjoin inspect` on real outputs, checked against h5py.

    inspect_case.py --xjoin PATH --mpiexec PATH [--workdir DIR] [--keep]

- a topk result of `xjoin gen` data (with padding: k > base rows): exit 0,
  its attributes in the table, the first rows and the padding counts as
  h5py reads them, the JSON twin parses and agrees; under mpiexec -np 2
  only rank 0 prints;
- a matrix result: exit 0, its first values;
- a copy with two distances of one row swapped: exit 3 naming the row,
  on every rank count;
- the gen input (not a result) and a missing file: exit 0 and exit 3;
- an interrupted run (topk with --chunk-rows 1 --checkpoint-seconds 0,
  SIGTERM to the ranks once OUT.h5.progress exists): exit 0, the rows
  done of the record; the command it prints continues the run, whose
  result equals an uninterrupted run's and is then inspected as such.

Every check runs even after one fails; exit 1 if any failed.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_cases  # noqa: E402  (Ctx, and the interrupt helpers)


def inspect(ctx, nranks, argv):
    return ctx.run(nranks, ["inspect"] + [str(a) for a in argv], timeout=60)


def shown_rows(text):
    """{row: [(index, value), ...]} of the `row i: (idx, value) ...` lines."""
    rows = {}
    for m in re.finditer(r"^row (\d+):(.*)$", text, re.M):
        pairs = re.findall(r"\((-?\d+), ([^)]+)\)", m.group(2))
        rows[int(m.group(1))] = [(int(i), float(v)) for i, v in pairs]
    return rows


def check_topk(ctx, out):
    """Text and JSON of a finished topk result against h5py."""
    with h5py.File(out, "r") as h5:
        nbr, dist = h5["neighbors"][...], h5["distances"][...]
        k = int(h5.attrs["k"])
    rc, sout, serr, _ = inspect(ctx, 1, [out, "--rows", 3])
    ok = ctx.check(rc == 0, "inspect topk: exit %s, expected 0" % rc)
    for needle in ("a finished xjoin topk result", "| metric ",
                   "cosine (smaller is better)", "| k ", "| grid ",
                   "| backend ", "| seconds: compute ", "/neighbors",
                   "# OK: "):
        ok &= ctx.check(needle in sout, "inspect topk: no %r" % needle)
    rows = shown_rows(sout)
    ok &= ctx.check(sorted(rows) == [0, 1, 2], "inspect topk: rows shown "
                    "%s, expected 0..2" % sorted(rows))
    for i, pairs in rows.items():
        want = [(int(a), float(b)) for a, b in zip(nbr[i], dist[i])][:10]
        same = [p[0] for p in pairs] == [w[0] for w in want] and all(
            (np.isinf(p[1]) and np.isinf(w[1])) or
            abs(p[1] - w[1]) <= 1e-5 * max(1.0, abs(w[1]))
            for p, w in zip(pairs, want))
        ok &= ctx.check(same, "inspect topk: row %d shows %r, the file "
                        "holds %r" % (i, pairs, want))
    pads = int((nbr == -1).sum())
    full = int((nbr == -1).all(axis=1).sum())
    m = re.search(r"\| padding entries \(-1\) +\| (\d+) of", sout)
    ok &= ctx.check(m and int(m.group(1)) == pads, "inspect topk: padding "
                    "entries %s, h5py counts %d" % (m and m.group(1), pads))

    rc, sout2, serr2, _ = inspect(ctx, 1, [out, "--json"])
    try:
        doc = json.loads(sout2)
    except ValueError as e:
        ctx.check(False, "inspect --json: not JSON (%s)" % e)
        run_cases._dump(sout2, serr2)
        return
    ok &= ctx.check(rc == 0 and doc.get("ok") is True and
                    doc.get("kind") == "result", "inspect --json: exit %s, "
                    "ok %r, kind %r" % (rc, doc.get("ok"), doc.get("kind")))
    chk = doc.get("check", {})
    ok &= ctx.check(chk.get("rows_checked") == nbr.shape[0] and
                    chk.get("padding_entries") == pads and
                    chk.get("rows_fully_padded") == full,
                    "inspect --json: check %r, h5py: %d rows, %d padding, "
                    "%d fully padded" % (chk, nbr.shape[0], pads, full))
    first = doc.get("rows_shown", [{}])[0]
    vals = [np.float32(np.inf) if v is None else np.float32(v)
            for v in first.get("distances", [])]
    ok &= ctx.check(first.get("neighbors") == nbr[0, :10].tolist() and
                    vals == dist[0, :10].tolist(), "inspect --json: row 0 "
                    "%r differs from the file" % first)
    ok &= ctx.check(doc.get("attributes", {}).get("k") == k,
                    "inspect --json: attribute k %r, expected %d"
                    % (doc.get("attributes", {}).get("k"), k))
    if not ok:
        run_cases._dump(sout + sout2, serr + serr2)


def check_ranks(ctx, out, broken):
    """Under mpiexec -np 2, rank 0 alone prints; all ranks exit alike."""
    rc, sout, serr, _ = inspect(ctx, 2, [out])
    ctx.check(rc == 0 and sout.count("# OK: ") == 1, "inspect -np 2: exit "
              "%s, %d OK lines, expected 0 and one" % (rc, sout.count("# OK: ")))
    rc, sout, serr, _ = inspect(ctx, 2, [broken])
    ctx.check(rc == 3 and serr.count("row 4 is not sorted") == 1,
              "inspect -np 2 of a broken file: exit %s, expected 3 and one "
              "message naming row 4" % rc)


def check_broken(ctx, out, broken):
    shutil.copy(out, broken)
    with h5py.File(broken, "r+") as h5:
        d = h5["distances"]
        row = d[4, :]
        row[[0, 1]] = row[[1, 0]]
        d[4, :] = row
    rc, sout, serr, _ = inspect(ctx, 1, [broken])
    ok = ctx.check(rc == 3, "inspect of a broken file: exit %s, expected 3"
                   % rc)
    ok &= ctx.check("row 4 is not sorted best first (ascending for cosine)"
                    in serr and "# FAILED: " in sout,
                    "inspect of a broken file: message does not name row 4")
    if not ok:
        run_cases._dump(sout, serr)


def check_matrix(ctx, src):
    out = ctx.path("matrix.h5")
    if not ctx.run_ok(2, ["matrix", "-q", src, "-b", src, "-m", "l2",
                          "--chunk-rows", 7, "-o", out], "matrix run"):
        return
    with h5py.File(out, "r") as h5:
        first = h5["distances"][1, :8]
    rc, sout, serr, _ = inspect(ctx, 1, [out, "--rows", 2])
    m = re.search(r"^row 1:((?: \S+){8})", sout, re.M)
    shown = [float(v) for v in m.group(1).split()] if m else []
    ok = ctx.check(rc == 0 and "a finished xjoin matrix result" in sout and
                   "| no negative distance " in sout, "inspect matrix: "
                   "exit %s" % rc)
    ok &= ctx.check(len(shown) == 8 and np.allclose(shown, first, rtol=1e-5),
                    "inspect matrix: row 1 shows %r, the file holds %r"
                    % (shown, first.tolist()))
    if not ok:
        run_cases._dump(sout, serr)


def check_others(ctx, src):
    rc, sout, serr, _ = inspect(ctx, 1, [src])
    ctx.check(rc == 0 and "not an xjoin result: data written by xjoin gen"
              in sout and "| /train " in sout, "inspect of the gen input: "
              "exit %s" % rc)
    missing = ctx.path("absent.h5")
    rc, sout, serr, _ = inspect(ctx, 1, [missing])
    ctx.check(rc == 3 and missing in serr and "no such file" in serr,
              "inspect of a missing file: exit %s, stderr %r" % (rc, serr))
    rc, sout, serr, _ = inspect(ctx, 1, [])
    ctx.check(rc == 2 and "inspect needs FILE" in serr, "inspect without "
              "FILE: exit %s, expected 2" % rc)


def check_unfinished(ctx, src, ref):
    """SIGTERM mid-run, inspect, then continue with the printed command."""
    out = ctx.path("cut.h5")
    job = ["topk", "-q", src, "-b", src, "-k", 10, "-m", "cosine"]
    p, kids = run_cases._start_and_wait(
        ctx, 2, job + ["--chunk-rows", 1, "--checkpoint-seconds", 0,
                       "-o", out], out + ".progress")
    if not p:
        return
    for pid in kids:
        os.kill(pid, signal.SIGTERM)
    rc, sout, serr, _ = run_cases._finish(ctx, p, "SIGTERM")
    if not ctx.check(rc == 5, "interrupted run: exit %s, expected 5" % rc):
        run_cases._dump(sout, serr)
        return
    done = run_cases._progress_rows(out + ".progress")
    rc, sout, serr, _ = inspect(ctx, 1, [out])
    ok = ctx.check(rc == 0 and "an unfinished xjoin run" in sout,
                   "inspect of an interrupted run: exit %s" % rc)
    ok &= ctx.check(re.search(r"\| rows done +\| %d of 3000 " % done, sout)
                    is not None, "inspect: rows done is not the record's "
                    "%d" % done)
    ok &= ctx.check("--resume" in sout, "inspect: no --resume advice")
    rc, sout2, serr2, _ = inspect(ctx, 2, [out + ".progress", "--json"])
    try:
        doc = json.loads(sout2)
    except ValueError:
        doc = {}
    prog = doc.get("progress") or {}
    ok &= ctx.check(rc == 0 and doc.get("resumable") is True and
                    prog.get("rows_done") == done and
                    sum(b - a for a, b in prog.get("done", [])) == done,
                    "inspect --json of the record: exit %s, %r" % (rc, doc))
    if not ok:
        run_cases._dump(sout + sout2, serr + serr2)
        return
    argv = shlex.split(doc["resume_command"])
    if not ctx.check(argv[:2] == ["xjoin", "topk"], "resume command %r"
                     % doc["resume_command"]):
        return
    if not ctx.run_ok(2, argv[1:], "the printed resume command"):
        return
    ctx.check(run_cases._same_results(ref, out), "the resumed result "
              "differs from the uninterrupted run")
    rc, sout, serr, _ = inspect(ctx, 1, [out])
    ctx.check(rc == 0 and re.search(r"\| runs +\| 2 ", sout) is not None
              and "# OK: " in sout, "inspect of the resumed result: exit "
              "%s, runs 2 and OK expected" % rc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--xjoin", required=True, help="the xjoin binary")
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    args.case = "inspect"
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
    ctx = run_cases.Ctx(args)
    src, ref = ctx.path("in.h5"), ctx.path("ref.h5")
    if ctx.run_ok(1, ["gen", "--rows", 2000, "--dim", 16, "--queries", 3000,
                      "--seed", 11, "-o", src], "gen input"):
        small = ctx.path("small.h5")
        padded = ctx.path("padded.h5")
        if ctx.run_ok(1, ["gen", "--rows", 8, "--dim", 16, "--queries", 40,
                          "--seed", 12, "-o", small], "gen small") and \
           ctx.run_ok(2, ["topk", "-q", small, "-b", small, "-k", 12, "-m",
                          "cosine", "-o", padded], "topk with padding"):
            check_topk(ctx, padded)
        if ctx.run_ok(2, ["topk", "-q", src, "-b", src, "-k", 10, "-m",
                          "cosine", "-o", ref], "topk run"):
            check_topk(ctx, ref)
            broken = ctx.path("broken.h5")
            check_broken(ctx, ref, broken)
            check_ranks(ctx, ref, broken)
            check_unfinished(ctx, src, ref)
        check_matrix(ctx, small)
        check_others(ctx, src)
    return ctx.finish("inspect")


if __name__ == "__main__":
    sys.exit(main())
