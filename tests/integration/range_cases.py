#!/usr/bin/python3
"""Integration cases of `xjoin range`: CSR outputs checked bit for bit.

    range_cases.py CASE [--np N] --xjoin PATH --mpiexec PATH [--workdir DIR]
                   [--keep]          (run_cases.py's options and driver)

Every output is compared with reference.range_join(): /indptr and
/indices exactly, /distances as float32 bit patterns; the CSR attributes
are checked too. Cases (those taking --np run only that rank count,
otherwise 1..4):
  range_random    random data with ties and far rows (run_cases.py's):
                  every metric, thresholds exactly at a pair's value,
                  one below every pair (no row matches) and one at a
                  row's largest value (that row matches every base row),
                  --self, and --chunk-rows 1 and 7 (the same bits)
  range_realdata  a GloVe slice (data/glove-demo.h5), cosine and l2, on
                  2 ranks; scipy.sparse.csr_matrix reads the output;
                  `xjoin inspect` passes it and fails broken copies
  range_resume    SIGTERM mid-run (exit 5, partial kept), --resume on
                  another rank count and chunk size: the same bits
  range_errors    --max-pairs (exit 4, no output left; exactly nnz is
                  allowed); `plan range` counts exactly when its sample
                  is everything
  range_precision --precision bf16 and int8 (CPU; skipped where neither
                  runs): the file bytes of fp32's, which are the
                  reference's, on random rows (thresholds exactly at a
                  pair's value, --self), a GloVe slice and adversarial
                  rows (duplicates at a threshold of 0, rows bf16 and int8
                  round to zero, mixed magnitudes)
"""

import os
import shutil
import signal
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402
import run_cases  # noqa: E402
from run_cases import fval, load  # noqa: E402

METRICS = reference.METRICS


def ref_range(ctx, qspec, bspec, metric, t, self_exclude=False):
    """(indptr, indices, distances) of the reference, cached."""
    key = ("range", qspec, bspec, metric, t, self_exclude)
    if key not in ctx.refs:
        q = load(ctx, qspec, "test")
        b = load(ctx, bspec, "train")
        ctx.refs[key] = reference.range_join(q, b, metric, t, self_exclude)
    return ctx.refs[key]


def read_csr(path):
    with h5py.File(path, "r") as h5:
        attrs = {k: run_cases._attr(v) for k, v in h5.attrs.items()}
        return (h5["indptr"][...], h5["indices"][...],
                h5["distances"][...], attrs)


def check_csr(ctx, out, ref, what, metric, t, shape):
    """The output equals ref bit for bit; attributes describe it."""
    ptr, idx, dist, attrs = read_csr(out)
    rptr, ridx, rdist = ref
    for name, a, b in (("indptr", ptr, rptr), ("indices", idx, ridx),
                       ("distances", dist, rdist)):
        same = a.dtype == b.dtype and a.shape == b.shape and \
            np.array_equal(a.view(np.uint8), b.view(np.uint8))
        if not ctx.check(same, "%s: /%s differs (%s %s vs %s %s)"
                         % (what, name, a.dtype, a.shape, b.dtype,
                            b.shape)):
            if a.shape == b.shape:
                bad = np.nonzero(a != b)[0][:5]
                print("  first differences at %s: %s | %s"
                      % (bad, a[bad], b[bad]))
    want = {"command": "range", "metric": metric, "schema_version": 1,
            "query_rows": shape[0], "base_rows": shape[1],
            "nnz": len(ridx), "threshold": t}
    for k, v in want.items():
        ctx.check(attrs.get(k) == v, "%s: attribute %s = %r, expected %r"
                  % (what, k, attrs.get(k), v))


def range_run(ctx, nranks, argv, ref, what, metric, t, shape):
    out = ctx.path("out.h5")
    if os.path.exists(out):
        os.remove(out)
    if not ctx.run_ok(nranks, argv + ["-o", out], what):
        return
    ctx.check(not os.path.exists(out + ".partial"),
              "%s: partial file left behind" % what)
    check_csr(ctx, out, ref, what, metric, t, shape)


def thresholds(ref_all):
    """From the all-pairs reference values of a query x base matrix: a
    value near the 2 % quantile (exactly some pair's value), one below
    every value, and row 3's worst value (row 3 matches every base row),
    each an exact float32 value."""
    v = np.sort(ref_all.ravel())
    return {"2%": float(v[len(v) // 50]), "none": float(v[0]),
            "row 3 all": float(ref_all[3].max())}


def case_range_random(ctx, ranks):
    """One rank: every metric at every threshold, --self and one-row
    chunks. More ranks: every metric at one threshold with 7-row chunks,
    and --self (the same bits are the reference's)."""
    run_cases.write_random(ctx.path("rand.h5"))
    f = ctx.path("rand.h5")
    q = load(ctx, "rand.h5", "test")
    b = load(ctx, "rand.h5", "train")
    shape = (q.shape[0], b.shape[0])
    for nranks in ranks:
        full = nranks == 1
        for metric in METRICS:
            vals = reference.matrix(q, b, metric)
            if metric == "ip":      # larger is better: mirror the picks
                vals = -vals
            for name, t in thresholds(vals).items():
                if not full and name != "2%":
                    continue
                if metric == "ip":
                    t = -t
                if name == "none":  # just past the best pair: none kept
                    t = float(np.nextafter(np.float32(t), np.float32(
                        np.inf if metric == "ip" else -np.inf)))
                ref = ref_range(ctx, "rand.h5", "rand.h5", metric, t)
                if name == "none":
                    ctx.check(len(ref[1]) == 0, "%s: reference keeps %d "
                              "pairs below every value"
                              % (metric, len(ref[1])))
                if name == "row 3 all":
                    ctx.check(ref[0][4] - ref[0][3] == b.shape[0],
                              "%s: reference row 3 keeps %d of %d"
                              % (metric, ref[0][4] - ref[0][3], b.shape[0]))
                tag = "np%d %s -t %s (%s)" % (nranks, metric, fval(t), name)
                argv = ["range", "-q", f, "-b", f, "-m", metric,
                        "-t", fval(t)]
                if not full:
                    argv += ["--chunk-rows", 7]
                    tag += " --chunk-rows 7"
                range_run(ctx, nranks, argv, ref, tag, metric, t, shape)
                if full and name == "2%" and metric == "l2":
                    range_run(ctx, nranks, argv + ["--chunk-rows", 1], ref,
                              tag + " --chunk-rows 1", metric, t, shape)
            if not full and metric != "cosine":
                continue
            s = f + ":/selfset"
            sv = np.sort(reference.matrix(
                load(ctx, "rand.h5:/selfset", "test"),
                load(ctx, "rand.h5:/selfset", "train"), metric).ravel())
            t = float(sv[len(sv) // 20] if metric != "ip" else
                      sv[-(len(sv) // 20)])
            ref = ref_range(ctx, "rand.h5:/selfset", "rand.h5:/selfset",
                            metric, t, True)
            range_run(ctx, nranks, ["range", "-q", s, "-b", s, "-m", metric,
                                    "-t", fval(t), "--self"], ref,
                      "np%d %s --self" % (nranks, metric), metric, t,
                      (300, 300))


def case_range_realdata(ctx, ranks):
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(here, "..", "..", "data", "glove-demo.h5")
    g = ctx.path("glove.h5")
    with h5py.File(src, "r") as h5:
        base = h5["train"][:10000].astype(np.float32)
        qs = h5["train"][19900:20000].astype(np.float32)
    with h5py.File(g, "w") as h5:
        h5["test"] = qs
        h5["train"] = base
    import scipy.sparse
    for metric, t in (("cosine", 0.45), ("l2", 4.5)):
        ref = ref_range(ctx, "glove.h5", "glove.h5", metric, t)
        print("GloVe %s -t %g: %d pairs" % (metric, t, len(ref[1])))
        ctx.check(len(ref[1]) > 100, "GloVe %s: only %d pairs"
                  % (metric, len(ref[1])))
        for nranks in [r for r in ranks if r in (1, 2)] or ranks:
            what = "GloVe np%d %s -t %g" % (nranks, metric, t)
            range_run(ctx, nranks, ["range", "-q", g, "-b", g, "-m", metric,
                                    "-t", t], ref, what, metric, t,
                      (len(qs), len(base)))
        ptr, idx, dist, _ = read_csr(ctx.path("out.h5"))
        a = scipy.sparse.csr_matrix((dist, idx, ptr),
                                    shape=(len(qs), len(base)))
        ctx.check(a.shape == (len(qs), len(base)) and a.nnz == len(ref[1]),
                  "scipy: shape %s nnz %d" % (a.shape, a.nnz))
        r = 5 if metric == "cosine" else 7
        row = a.getrow(r)
        ctx.check(np.array_equal(row.indices, ref[1][ref[0][r]:ref[0][r + 1]])
                  and np.array_equal(row.data,
                                     ref[2][ref[0][r]:ref[0][r + 1]]),
                  "scipy: row %d differs from the reference" % r)
    check_inspect(ctx, ctx.path("out.h5"))


def check_inspect(ctx, out):
    """`xjoin inspect` passes a good range output and names what is
    wrong in broken copies of it (exit 3)."""
    rc, text, err, _ = ctx.run(1, ["inspect", out, "--rows", 1])
    ctx.check(rc == 0 and "# OK: every row keeps the CSR invariants" in
              text, "inspect: exit %s on a good output: %s" % (rc, err))

    def swap(h5):
        d = h5["distances"][...]
        ptr = h5["indptr"][...]
        r = int(np.argmax(np.diff(ptr) >= 2))
        d[ptr[r]], d[ptr[r] + 1] = d[ptr[r] + 1], d[ptr[r]]
        if d[ptr[r]] == d[ptr[r] + 1]:
            i = h5["indices"][...]
            i[ptr[r]], i[ptr[r] + 1] = i[ptr[r] + 1], i[ptr[r]]
            h5["indices"][...] = i
        h5["distances"][...] = d

    def past(h5):
        d = h5["distances"][...]
        d[-1] = np.float32(h5.attrs["threshold"]) * np.float32(1.5) + 1
        h5["distances"][...] = d

    def ptr_down(h5):
        p = h5["indptr"][...]
        p[3] = p[2] - 1
        h5["indptr"][...] = p

    def index_out(h5):
        i = h5["indices"][...]
        i[0] = h5.attrs["base_rows"]
        h5["indices"][...] = i

    for what, brk, needle in (
            ("rows out of order", swap, "out of (value, index) order"),
            ("a value past the threshold", past, "past the threshold"),
            ("indptr decreasing", ptr_down, "never decrease"),
            ("an index out of range", index_out, "outside [0, ")):
        bad = ctx.path("broken.h5")
        shutil.copy(out, bad)
        with h5py.File(bad, "r+") as h5:
            brk(h5)
        rc, text, err, _ = ctx.run(1, ["inspect", bad])
        ctx.check(rc == 3 and needle in err, "inspect, %s: exit %s, "
                  "stderr %r" % (what, rc, err[-300:]))


def case_range_errors(ctx, ranks):
    run_cases.write_random(ctx.path("rand.h5"))
    f = ctx.path("rand.h5")
    out = ctx.path("err.h5")
    ref = ref_range(ctx, "rand.h5", "rand.h5", "l2", 5.0)
    nnz = len(ref[1])
    ctx.check(nnz > 100, "reference keeps %d pairs" % nnz)
    # (usage errors of range: tests/unit/test_options.c and the catalogue)
    cases = [
        ("--max-pairs below the pairs", 4, ["--max-pairs", nnz - 1],
         ["--max-pairs", "no output written"]),
    ]
    for what, code, extra, needles in cases:
        argv = ["range", "-q", f, "-b", f, "-o", out, "--chunk-rows", 20]
        argv += ["-t", "5"] if extra is not None else []
        argv += extra or []
        for nranks in (1, 2) if code == 4 else (1,):
            rc, _, err, _ = ctx.run(nranks, argv)
            ctx.check(rc == code, "%s np%d: exit %s, expected %d"
                      % (what, nranks, rc, code))
            for n in needles:
                ctx.check(n in err, "%s np%d: stderr lacks %r: %s"
                          % (what, nranks, n, err[-400:]))
            ctx.check(not os.path.exists(out) and
                      not os.path.exists(out + ".partial"),
                      "%s np%d: output left behind" % (what, nranks))
    # plan range: a sample of everything (40 <= 64 query rows, 1531 <=
    # 4096 base rows) gives the exact count, and nothing is written
    q = load(ctx, "rand.h5", "test")[:40]
    with h5py.File(ctx.path("small.h5"), "w") as h5:
        h5["test"] = q
        h5["train"] = load(ctx, "rand.h5", "train")
    sref = ref_range(ctx, "small.h5", "small.h5", "l2", 5.0)
    sf = ctx.path("small.h5")
    rc, out_text, err, _ = ctx.run(1, ["plan", "range", "-q", sf, "-b", sf,
                                       "-t", "5", "--max-pairs", 1])
    ctx.check(rc == 0, "plan range: exit %s" % rc)
    line = [x for x in out_text.splitlines() if "pairs (estimated)" in x]
    ctx.check(line and line[0].split("|")[2].strip() == str(len(sref[1])),
              "plan range: %r, expected %d pairs" % (line, len(sref[1])))
    ctx.check("all of them: exact" in out_text and
              "would stop with exit 4" in out_text,
              "plan range: exactness or --max-pairs note missing")
    ctx.check(not os.listdir(ctx.tmp) or
              not any(x.startswith("err.h5") for x in os.listdir(ctx.tmp)),
              "plan range wrote a file")
    # exactly the pairs: allowed
    range_run(ctx, 2, ["range", "-q", f, "-b", f, "-t", "5", "--chunk-rows",
                       20, "--max-pairs", nnz], ref, "--max-pairs = nnz",
              "l2", 5.0, (97, 1531))


def same_csr(a, b):
    """Two CSR outputs hold the same bits."""
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        return all(np.array_equal(fa[k][...].view(np.uint8),
                                  fb[k][...].view(np.uint8))
                   for k in ("indptr", "indices", "distances"))


def case_range_resume(ctx, ranks):
    """SIGTERM mid-run: exit 5, the partial file and record kept;
    --resume on another rank count and chunk size gives the bits of an
    uninterrupted run."""
    f = ctx.path("big.h5")
    if not ctx.run_ok(1, ["gen", "--rows", 20000, "--dim", 32, "--queries",
                          3000, "--seed", 5, "-o", f], "gen input"):
        return
    ref, out = ctx.path("ref.h5"), ctx.path("int-out.h5")
    job = ["range", "-q", f, "-b", f, "-t", 5.5]
    if not ctx.run_ok(2, job + ["-o", ref], "uninterrupted run"):
        return
    argv = job + ["--chunk-rows", 30, "--checkpoint-seconds", 0, "-o", out]
    p, kids = run_cases._start_and_wait(ctx, 2, argv, out + ".progress")
    if not p:
        return
    for pid in kids:
        os.kill(pid, signal.SIGTERM)
    rc, _, serr, _ = run_cases._finish(ctx, p, "SIGTERM")
    done = run_cases._progress_rows(out + ".progress")
    ok = ctx.check(rc == 5 and not os.path.exists(out) and
                   os.path.exists(out + ".partial") and 0 < done < 3000,
                   "SIGTERM: exit %s, %d rows recorded" % (rc, done))
    if not ok:
        print(serr[-2000:])
        return
    if ctx.run_ok(3, job + ["--chunk-rows", 17, "--resume", "-o", out],
                  "--resume on 3 ranks"):
        ctx.check(same_csr(out, ref), "resumed output differs from the "
                  "uninterrupted run")
        ctx.check(not os.path.exists(out + ".partial") and
                  not os.path.exists(out + ".progress"),
                  "partial file or record left after resuming")
        with h5py.File(out, "r") as h5:
            ctx.check(h5.attrs["runs"] == 2, "attribute runs = %r"
                      % h5.attrs["runs"])


def adversarial_inputs(rng, n=40, m=700, d=16):
    """Rows where a rounded GEMM is furthest from the canonical value:
    duplicates (query 0 is base rows 10 and 11: distance 0, a threshold
    exactly there), subnormal rows (bf16 flushes them to zero), rows of
    one large coordinate and tiny others (int8 rounds the others to
    zero), rows of mixed magnitude 1e-20 .. 1e15."""
    b = rng.standard_normal((m, d)).astype(np.float32)
    q = rng.standard_normal((n, d)).astype(np.float32)
    b[11] = b[10]
    b[50:55] = b[0:5]
    b[100:120] = (rng.standard_normal((20, d)) * 1e-41).astype(np.float32)
    b[200:220] = (rng.standard_normal((20, d)) * 1e-3).astype(np.float32)
    b[200:220, 0] = np.float32(1e3)
    b[300:340] = (rng.standard_normal((40, d)) *
                  10.0 ** rng.integers(-20, 16, (40, 1))).astype(np.float32)
    for x in (q, b):
        x[np.all(x == 0, axis=1), 0] = np.float32(1e-45)
    q[0] = b[10]
    q[1] = b[100]
    q[2] = b[200] + np.float32(1e-3)
    q[4] = b[300]
    q[5:10] = b[50:55]
    return q, b


def case_range_precision(ctx, ranks, args):
    """--precision bf16 and int8 on the CPU: a range join proposes its
    candidates with the rounded rows' error bound (metric_err_bound_rows),
    as top-k does, so the file is fp32's to the byte."""
    precs = run_cases._precisions_here(ctx)
    r = ctx.path("rand.h5")
    run_cases.write_random(r)
    a = ctx.path("adv.h5")
    aq, ab = adversarial_inputs(np.random.default_rng(run_cases.SEED + 40))
    with h5py.File(a, "w") as h5:
        h5["test"] = aq
        h5["train"] = ab
    here = os.path.dirname(os.path.abspath(__file__))
    src = args.glove if os.path.exists(args.glove) else \
        os.path.join(here, "..", "..", "data", "glove-demo.h5")
    g = ctx.path("glove.h5")
    with h5py.File(src, "r") as h5:
        base = h5["train"][:10000].astype(np.float32)
        qs = h5["train"][19900:20000].astype(np.float32)
    with h5py.File(g, "w") as h5:
        h5["test"] = qs
        h5["train"] = base
    jobs = []   # (file, name, metric, threshold, self, ranks, tag)
    for f, name in ((r, "rand.h5"), (a, "adv.h5")):
        q = load(ctx, name, "test")
        b = load(ctx, name, "train")
        for metric in METRICS:
            vals = reference.matrix(q, b, metric)
            sign = -1 if metric == "ip" else 1
            th = thresholds(sign * vals)
            for tag in ("2%", "row 3 all"):
                jobs.append((f, name, metric, sign * th[tag], False, 1,
                             tag))
            if name == "adv.h5":   # query 0 = base rows 10 and 11
                jobs.append((f, name, metric, float(vals[0, 10]), False, 1,
                             "at the duplicates' value"))
    s = r + ":/selfset"
    for metric in ("cosine", "l2"):
        sv = np.sort(reference.matrix(load(ctx, "rand.h5:/selfset", "test"),
                                      load(ctx, "rand.h5:/selfset", "train"),
                                      metric).ravel())
        jobs.append((s, "rand.h5:/selfset", metric, float(sv[len(sv) // 20]),
                     True, 1, "--self"))
    jobs += [(g, "glove.h5", "cosine", float(np.float32(0.45)), False, 2,
              "GloVe"),
             (g, "glove.h5", "l2", 4.5, False, 2, "GloVe")]
    ref_out = ctx.path("fp32.h5")
    out = ctx.path("out.h5")
    for f, name, metric, t, self_ex, nranks, tag in jobs:
        what = "%s np%d %s -t %s (%s)" % (name, nranks, metric, fval(t), tag)
        argv = ["range", "-q", f, "-b", f, "-m", metric, "-t", fval(t),
                "--device", "cpu"] + (["--self"] if self_ex else [])
        ref = ref_range(ctx, name, name, metric, t, self_ex)
        q = load(ctx, name, "test")
        shape = (q.shape[0], load(ctx, name, "train").shape[0])
        if os.path.exists(ref_out):
            os.remove(ref_out)
        if not ctx.run_ok(nranks, argv + ["--precision", "fp32", "-o",
                                          ref_out], what + " fp32"):
            continue
        check_csr(ctx, ref_out, ref, what + " fp32", metric, t, shape)
        for p in precs:
            if os.path.exists(out):
                os.remove(out)
            rc, text, err, _ = ctx.run(nranks, argv + ["--precision", p,
                                                       "-o", out])
            row = [ln for ln in text.splitlines()
                   if ln.startswith("| precision")]
            if not ctx.check(rc == 0 and len(row) == 1 and p in row[0],
                             "%s --precision %s: exit %s, job table %r: %s"
                             % (what, p, rc, row, err[-400:])):
                continue
            ctx.check(same_csr(out, ref_out), "%s --precision %s: the "
                      "file differs from fp32's" % (what, p))


CASES = {
    "range_resume": case_range_resume,
    "range_random": case_range_random,
    "range_realdata": case_range_realdata,
    "range_errors": case_range_errors,
    "range_precision": case_range_precision,
}


if __name__ == "__main__":
    # run_cases.py's driver (options, context, summary) runs these cases
    run_cases.CASES.update(CASES)
    run_cases.CASES_WITH_ARGS.add("range_precision")
    sys.exit(run_cases.main())
