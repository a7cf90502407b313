#!/usr/bin/python3
"""Integration cases: whole xjoin runs under mpirun, checked bit for bit.

    run_cases.py CASE [--np N] --xjoin PATH --mpiexec PATH [--workdir DIR]
                 [--keep] [--glove FILE] [--fashion DIR]

Each case makes its own data in a fresh temporary folder (removed at the
end unless --keep), runs xjoin, and compares every result with
reference.py: /neighbors exactly, /distances as bit patterns. Every check
runs even after one fails; the case prints a summary and exits 1 if any
failed, 0 if all passed.

Cases (those taking --np run only that rank count, otherwise 1..4):
  topk_random     random data with ties and far rows: every metric,
                  k in {1, 10, 2000 > m}, threshold, --self, implicit self
  invariance      --chunk-rows 1, 5, 64, auto and a tight --mem-limit
                  give identical outputs
  small_shapes    more ranks than query or base rows
  matrix          full matrix, every metric, forced chunks and tiny
                  memory budgets
  realdata        GloVe slice (cosine, l2) and Fashion-MNIST (uint8, l2)
  precision       --precision bf16, int8, auto (CPU): the reference's bits
                  on GloVe, Fashion-MNIST, random and mixed-magnitude rows
  extremes        huge offsets, tiny, subnormal and mixed-magnitude values
  types           every numeric type, groups, default datasets, odd names
  errors          input and usage errors: exit code, message, no output
  config          INI job file, command line over INI
  plan            `xjoin plan` prints the grid and writes nothing
  gen             `xjoin gen` shapes and determinism
  interrupt       SIGTERM to the ranks: exit 5, no output, the partial
                  file kept; --resume finishes it bit-identically
  resume          refused mismatches, SIGKILL of a rank, other rank
                  counts and chunks, changed inputs, matrix, --force
  resume_inround  a one-round top-k job interrupted half way through the
                  round: the resumed run computes only the rest, with the
                  same bits; also on other rank counts (1 -> 2, 2 -> 3 -> 1)
  devices         `xjoin devices` lists every rank; --device gpu without
                  a GPU exits 4; --device auto and cpu (and gpu where
                  there is one) agree bit for bit: topk, matrix, range
  diskfull        the output's file system fills up mid-run (a tmpfs,
                  root only; skipped, exit 77, elsewhere): exit 4, the
                  work the record names kept and right; --resume finishes
  selfjoin        a self-join (its pairs scored once) against the plain
                  path (a copy of the file) and the reference: every
                  metric, ties and duplicate rows, a threshold, 1..4
                  ranks, forced chunks; interrupted and resumed on
                  another rank count
  calibration     --precision auto measures and caches its choice; bad,
                  cut, foreign and unwritable caches; concurrent writers;
                  fp32's bits every time
"""

import argparse
import concurrent.futures
import contextlib
import gzip
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
import reference  # noqa: E402
import mpitmp  # noqa: E402
import shard_inputs  # noqa: E402
import tmpfs  # noqa: E402

METRICS = reference.METRICS
SEED = 20240607
DEFAULT_GLOVE = "/work/shared/data/glove-100d-100k.h5"
DEFAULT_FASHION = "/usr/share/datasets/fashion-mnist"
ERROR_TIMEOUT_S = 60
ERROR_JOBS = 4


@contextlib.contextmanager
def env_var(name, value):
    """os.environ[name] = value inside the block: the ranks of the runs
    started there inherit it (the benchmark variants XJ_MATRIX_*)."""
    os.environ[name] = value
    try:
        yield
    finally:
        del os.environ[name]


class Failure(Exception):
    pass


class Skip(Exception):
    """The case cannot run here (the reason): exit 77, ctest's skip."""


class Ctx:
    """Paths, the temporary folder and the tally of checks."""

    def __init__(self, args):
        self.xjoin = os.path.abspath(args.xjoin)
        self.mpiexec = args.mpiexec
        self.tmp = tempfile.mkdtemp(prefix="xjoin-%s-" % args.case,
                                    dir=args.workdir)
        self.keep = args.keep
        self.einval_shim = getattr(args, "einval_shim", None)
        self.checks = 0
        self.failed = []
        self.refs = {}

    def path(self, name):
        return os.path.join(self.tmp, name)

    def check(self, ok, what):
        self.checks += 1
        if ok:
            return True
        self.failed.append(what)
        print("FAIL: %s" % what, flush=True)
        return False

    def env(self, nranks):
        env = dict(os.environ)
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
        # One rank uses both cores (threads exercised); several
        # oversubscribed ranks get one thread each so they do not spin
        # against each other.
        env["OMP_NUM_THREADS"] = "2" if nranks == 1 else "1"
        env["OMP_WAIT_POLICY"] = "passive"
        env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"]
        return mpitmp.env(env)

    def command(self, nranks, argv):
        return [self.mpiexec, "--oversubscribe", "--bind-to", "none",
                "-np", str(nranks), self.xjoin] + [str(a) for a in argv]

    def start(self, nranks, argv):
        """Start mpiexec in its own process group (so a hung job can be
        killed whole, ranks included)."""
        return subprocess.Popen(self.command(nranks, argv),
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                errors="replace", env=self.env(nranks),
                                cwd=self.tmp, start_new_session=True)

    def run(self, nranks, argv, timeout=300):
        """Run xjoin; returns (rc, stdout, stderr, seconds)."""
        cmd = self.command(nranks, argv)
        t0 = time.time()
        p = self.start(nranks, argv)
        try:
            out, err = p.communicate(timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            _kill_group(p)
            out, err = p.communicate()
            rc = "timeout"
        dt = time.time() - t0
        shown = " ".join(cmd[7:]).replace(self.tmp + os.sep, "")
        print("[np%d] xjoin %s  -> %s (%.2f s)" % (nranks, shown, rc, dt),
              flush=True)
        return rc, out, err, dt

    def run_ok(self, nranks, argv, what, timeout=300):
        rc, out, err, _ = self.run(nranks, argv, timeout)
        if not self.check(rc == 0, "%s: exit %s, expected 0" % (what, rc)):
            _dump(out, err)
            return False
        return True

    def result(self, nranks, argv, out, ref, what):
        """Run a job writing out and compare it with the reference file."""
        if os.path.exists(out):
            os.remove(out)
        if not self.run_ok(nranks, argv + ["-o", out], what):
            return False
        if not self.check(os.path.exists(out), "%s: no output" % what):
            return False
        self.check(not os.path.exists(out + ".partial"),
                   "%s: %s.partial left behind" % (what, out))
        self.check_attrs(out, argv, what)
        bad = compare.compare(out, ref)
        return self.check(bad == 0, "%s: %d entries differ from %s"
                          % (what, bad, os.path.basename(ref)))

    def check_attrs(self, out, argv, what):
        """Root attributes: schema version, and the job's own metric, k
        and self exclusion."""
        with h5py.File(out, "r") as h5:
            attrs = {k: _attr(v) for k, v in h5.attrs.items()}
        self.check(attrs.get("schema_version") == 1,
                   "%s: root attribute schema_version is %r"
                   % (what, attrs.get("schema_version")))
        opts = _argv_options(argv)
        metric = opts.get("-m", "l2")
        self.check(attrs.get("metric") == metric,
                   "%s: attribute metric %r, expected %r"
                   % (what, attrs.get("metric"), metric))
        if argv and argv[0] == "topk" and "-k" in opts:
            self.check(attrs.get("k") == int(opts["-k"]),
                       "%s: attribute k %r" % (what, attrs.get("k")))
            q, b = opts.get("-q"), opts.get("-b")
            same = q == b and q is not None
            selfj = "--self" in argv or \
                (same and reference.parse_spec(q)[1] != "")
            if "self_excluded" in attrs and (q or "--self" in argv):
                self.check(attrs["self_excluded"] == int(selfj),
                           "%s: attribute self_excluded %r, expected %d"
                           % (what, attrs["self_excluded"], selfj))

    def ref_topk(self, qspec, bspec, k, metric, threshold=None,
                 self_exclude=False):
        """Reference file for a top-k job (cached per parameters)."""
        key = ("topk", qspec, bspec, k, metric, threshold, self_exclude)
        if key not in self.refs:
            q = load(self, qspec, "test")
            b = load(self, bspec, "train")
            nbr, dist = reference.topk(q, b, k, metric, threshold,
                                       self_exclude)
            path = self.path("ref-%d.h5" % len(self.refs))
            reference.write(path, neighbors=nbr, distances=dist)
            self.refs[key] = path
        return self.refs[key]

    def ref_matrix(self, qspec, bspec, metric):
        key = ("matrix", qspec, bspec, metric)
        if key not in self.refs:
            q = load(self, qspec, "test")
            b = load(self, bspec, "train")
            path = self.path("ref-%d.h5" % len(self.refs))
            reference.write(path, distances=reference.matrix(q, b, metric))
            self.refs[key] = path
        return self.refs[key]

    def finish(self, name):
        print("%s: %d checks, %d failed" % (name, self.checks,
                                            len(self.failed)))
        for f in self.failed:
            print("  FAILED: %s" % f)
        if self.keep or self.failed:
            print("data kept in %s" % self.tmp)
        if not self.keep and not self.failed:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return 1 if self.failed or self.checks == 0 else 0


def _attr(v):
    """An HDF5 attribute as a plain Python value."""
    if isinstance(v, bytes):
        return v.decode()
    a = np.asarray(v)
    if a.size == 1 and a.dtype.kind in "iuf":
        return a.ravel()[0].item()
    return v


def _argv_options(argv):
    """{option: value} of the short options that take a value."""
    opts = {}
    for i, a in enumerate(argv[:-1]):
        if a in ("-q", "-b", "-k", "-m", "-t", "-o"):
            opts[a] = str(argv[i + 1])
    return opts


def _kill_group(p):
    """End a hung job: mpiexec first (it tears its ranks down), then
    whatever is left of it and of the ranks, which Open MPI puts in
    process groups of their own."""
    kids = _children(p.pid)
    p.terminate()
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    for pid in kids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _dump(out, err, limit=4000):
    print("--- stdout (tail) ---\n%s\n--- stderr (tail) ---\n%s\n---"
          % (out[-limit:], err[-limit:]), flush=True)


def load(ctx, spec, default):
    path, dset = reference.parse_spec(spec)
    if not os.path.isabs(path):
        path = ctx.path(path)
    return reference.load(path + (":" + dset if dset else ""), default)[0]


def fval(x):
    """Exact decimal text of a float32 value: parses back to the same
    double, so a threshold equal to a result's value is unambiguous."""
    return repr(float(np.float32(x)))


# ---------------------------------------------------------------- data

def random_inputs(seed=SEED, n=97, m=1531, d=24):
    """Queries and base with ties, exact duplicates and far rows.

    - base rows 100, 700..709, 1530 duplicate rows 50, 40..49, 0: equal
      scores that only the base index orders;
    - base row 300 = 4 * row 301: same angle exactly (cosine tie);
    - base rows 400..459 hold small integers: many equal distances;
    - base rows 1200..1239 sit near 1000 * ones with small spread, and
      queries 90..96 next to them: large norms, tiny differences, where
      the expanded form |q|^2 + |b|^2 - 2 q.b cancels catastrophically.
    """
    rng = np.random.default_rng(seed)
    b = rng.standard_normal((m, d)).astype(np.float32)
    q = rng.standard_normal((n, d)).astype(np.float32)
    b[100] = b[50]
    b[700:710] = b[40:50]
    b[1530] = b[0]
    b[300] = 4 * b[301]
    b[400:460] = rng.integers(-1, 3, (60, d)).astype(np.float32)
    b[400:460][np.all(b[400:460] == 0, axis=1)] = 1
    far = rng.standard_normal((40, d)).astype(np.float32) * 0.05
    b[1200:1240] = far + np.float32(1000)
    q[0] = b[50]
    q[1] = b[301] + 0.01 * rng.standard_normal(d).astype(np.float32)
    q[2] = b[1530]
    q[3] = 1
    q[4] = b[420]
    noise = 0.01 * rng.standard_normal((7, d)).astype(np.float32)
    q[90:97] = b[1200:1207] + noise
    return q, b


def write_random(path):
    """/test, /train and /selfset (300 rows of the base with its ties
    and far rows) of the random inputs."""
    q, b = random_inputs()
    selfset = np.concatenate([b[:200], b[1200:1240], b[400:460]])
    with h5py.File(path, "w") as h5:
        h5["test"] = q
        h5["train"] = b
        h5["selfset"] = selfset
    return q, b


def threshold_for(ref, col, best=False):
    """A threshold equal to the median row's value at column col of a
    reference result: some rows keep more than col+1 entries, some
    fewer, and the boundary value itself must be kept. best: the best
    value of the column instead (smallest distance, largest ip)."""
    with h5py.File(ref, "r") as h5:
        v = h5["distances"][:, col]
        ip = h5["distances"][0, 0] > h5["distances"][0, -1]
    v = np.sort(v[np.isfinite(v)])
    if best:
        return float(v[-1] if ip else v[0])
    return float(v[len(v) // 2])


# ---------------------------------------------------------------- cases

def case_topk_random(ctx, ranks):
    write_random(ctx.path("rand.h5"))
    f = ctx.path("rand.h5")
    for nranks in ranks:
        for metric in METRICS:
            tag = "np%d %s" % (nranks, metric)
            for k in (1, 10, 2000):
                ref = ctx.ref_topk("rand.h5", "rand.h5", k, metric)
                ctx.result(nranks, ["topk", "-q", f, "-b", f, "-k", k,
                                    "-m", metric],
                           ctx.path("out.h5"), ref,
                           "%s k=%d" % (tag, k))
            plain = ctx.ref_topk("rand.h5", "rand.h5", 10, metric)
            t = threshold_for(plain, 4)
            ref = ctx.ref_topk("rand.h5", "rand.h5", 10, metric, t)
            ctx.result(nranks, ["topk", "-q", f, "-b", f, "-k", 10,
                                "-m", metric, "-t", fval(t)],
                       ctx.path("out.h5"), ref,
                       "%s k=10 -t %s" % (tag, fval(t)))
            # a threshold at the best first hit of all rows: one row
            # keeps one entry (more on ties), the others keep none
            t = threshold_for(plain, 0, best=True)
            ref = ctx.ref_topk("rand.h5", "rand.h5", 3, metric, t)
            ctx.result(nranks, ["topk", "-q", f, "-b", f, "-k", 3,
                                "-m", metric, "-t", fval(t)],
                       ctx.path("out.h5"), ref,
                       "%s k=3 -t %s (nearly all padding)" % (tag, fval(t)))
            s = f + ":/selfset"
            ref = ctx.ref_topk("rand.h5:/selfset", "rand.h5:/selfset",
                               10, metric, None, True)
            ctx.result(nranks, ["topk", "-q", s, "-b", s, "-k", 10,
                                "-m", metric, "--self"],
                       ctx.path("out.h5"), ref, "%s k=10 --self" % tag)
            # same file and dataset on both sides implies --self
            ctx.result(nranks, ["topk", "-q", s, "-b", s, "-k", 10,
                                "-m", metric],
                       ctx.path("out.h5"), ref,
                       "%s k=10 implicit self" % tag)
            plain = ctx.ref_topk("rand.h5:/selfset", "rand.h5:/selfset",
                                 10, metric, None, True)
            t = threshold_for(plain, 2)
            ref = ctx.ref_topk("rand.h5:/selfset", "rand.h5:/selfset",
                               2000, metric, t, True)
            ctx.result(nranks, ["topk", "-q", s, "-b", s, "-k", 2000,
                                "-m", metric, "--self", "-t", fval(t)],
                       ctx.path("out.h5"), ref,
                       "%s k=2000 --self -t %s" % (tag, fval(t)))


def tight_budget(ctx, nranks, argv, spare_bytes=8192):
    """A --mem-limit just above the least the planner accepts for this
    job, so that it must choose small chunks by itself (one per spare
    when spare_bytes is a tuple). The least is read from the resource
    error of a plan with a 1 KiB budget; the planner keeps 1/8 of any
    budget in reserve."""
    rc, out, err, _ = ctx.run(nranks, ["plan"] + argv +
                              ["--mem-limit", "1K"], timeout=60)
    m = re.search(r"need (\d+) bytes", err)
    if rc != 4 or not m:
        raise Failure("cannot derive a tight budget: plan with "
                      "--mem-limit 1K gave exit %s, stderr %r"
                      % (rc, err[-300:]))
    if isinstance(spare_bytes, tuple):
        return [str((int(m.group(1)) + s) * 8 // 7 + 1)
                for s in spare_bytes]
    return str((int(m.group(1)) + spare_bytes) * 8 // 7 + 1)

INVARIANCE_JOBS = (
    # (metric, k, threshold column or None, self on /selfset, also a
    # tight --mem-limit: each costs a failing plan run to find it)
    ("cosine", 10, 4, False, True),
    ("sqeuclidean", 2000, None, True, False),
    ("ip", 1, None, False, False),
    ("l2", 7, 3, True, True),
)


def case_invariance(ctx, ranks):
    write_random(ctx.path("rand.h5"))
    f = ctx.path("rand.h5")
    for metric, k, tcol, selfj, tight in INVARIANCE_JOBS:
        spec = "rand.h5:/selfset" if selfj else "rand.h5"
        qarg = ctx.path(spec)
        argv = ["topk", "-q", qarg, "-b", qarg if selfj else f,
                "-k", k, "-m", metric]
        t = None
        if tcol is not None:
            t = threshold_for(ctx.ref_topk(spec, spec, 10, metric,
                                           None, selfj), tcol)
            argv += ["-t", fval(t)]
        if selfj:
            argv.append("--self")
        ref = ctx.ref_topk(spec, spec, k, metric, t, selfj)
        for nranks in ranks:
            first = None
            variants = [(["--chunk-rows", c], "chunk-rows %d" % c)
                        for c in (1, 5, 64)]
            variants.append(([], "chunk-rows auto"))
            if tight:
                budget = tight_budget(ctx, nranks, argv)
                variants.append((["--mem-limit", budget],
                                 "mem-limit %s (tight)" % budget))
            for i, (extra, how) in enumerate(variants):
                out = ctx.path("inv-np%d-%d.h5" % (nranks, i))
                what = "np%d %s k=%d %s" % (nranks, metric, k, how)
                ok = ctx.result(nranks, argv + extra, out, ref, what)
                if ok and first is None:
                    first = out
                elif ok:
                    ctx.check(_same_data(first, out),
                              "%s: output differs from %s"
                              % (what, os.path.basename(first)))


def _same_data(a, b):
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        for name in ("neighbors", "distances"):
            x, y = fa[name][...], fb[name][...]
            if x.shape != y.shape or x.tobytes() != y.tobytes():
                return False
    return True


SMALL_SHAPES = (
    # (queries, base rows, ranks, k): at least one rank has no rows
    (3, 2, 4, 1),
    (3, 2, 4, 5),
    (1, 2, 3, 2),
    (1, 2, 4, 3),
    (2, 3, 4, 10),
    (3, 1531, 4, 10),
    (5, 1, 3, 1),
)


def case_small_shapes(ctx, ranks):
    q, b = random_inputs()
    f = ctx.path("small.h5")
    for i, (n, m, nranks, k) in enumerate(SMALL_SHAPES):
        if ranks != [1, 2, 3, 4] and nranks not in ranks:
            continue
        with h5py.File(f, "w") as h5:
            h5["test"] = q[:n]
            h5["train"] = b[:m]
        ctx.refs.clear()
        for metric in METRICS:
            ref = ctx.ref_topk("small.h5", "small.h5", k, metric)
            ctx.result(nranks, ["topk", "-q", f, "-b", f, "-k", k,
                                "-m", metric],
                       ctx.path("out.h5"), ref,
                       "n=%d m=%d np%d k=%d %s" % (n, m, nranks, k, metric))
        ref = ctx.ref_matrix("small.h5", "small.h5", "l2")
        ctx.result(nranks, ["matrix", "-q", f, "-b", f, "-m", "l2"],
                   ctx.path("out.h5"), ref,
                   "n=%d m=%d np%d matrix l2" % (n, m, nranks))


# Budgets that force the planner's own small chunks for 97 x 611 x 24:
# 32K gives 9-row base chunks, 4K 17-row query chunks of 1-row base chunks.
# bytes above the least budget the planner accepts (the CPU's per-thread
# tiles and two blocks of one row each)
MATRIX_MEM_SPARES = (65536, 16384)


def _plan_chunks(ctx, nranks, argv):
    """Query and base chunk counts that `xjoin plan` reports, or None."""
    rc, out, err, _ = ctx.run(nranks, ["plan"] + argv, timeout=60)
    counts = re.findall(r"(query|base) chunks \(max\)\s*\|\s*(\d+)", out)
    if rc != 0 or len(counts) != 2:
        return None
    return int(counts[0][1]) * int(counts[1][1])


def o_direct_ok(folder):
    """Whether a file in folder opens with O_DIRECT (tmpfs before Linux
    6.6 refuses it: xjoin then writes through HDF5 alone)."""
    path = os.path.join(folder, ".o_direct")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o600)
    except OSError:
        return False
    os.close(fd)
    os.unlink(path)
    return True


def check_matrix_report(ctx, path, n, m, d, what):
    """A matrix run's --report-json: its phases add up to its total (what
    no phase holds is "other", a few milliseconds at most), and it
    reports the bytes it wrote and the FLOPs it did."""
    with open(path) as fh:
        doc = json.load(fh)
    ph, total = doc["phase_seconds"], doc["total_seconds"]
    named = sum(v for k, v in ph.items() if k != "other")
    ctx.check(abs(named + ph["other"] - total) < 1e-5 and
              abs(ph["other"]) <= 0.01 + 0.02 * total,
              "%s: phases %s do not add up to the total %.3f s"
              % (what, ph, total))
    ctx.check(doc["bytes_written"] == n * m * 4 and
              doc["gbps_written_write"] > 0,
              "%s: %s bytes written, expected %d"
              % (what, doc["bytes_written"], n * m * 4))
    ctx.check(doc["gemm_flops"] >= 2.0 * n * m * d,
              "%s: %s FLOPs, expected at least 2 n m d"
              % (what, doc["gemm_flops"]))


def case_matrix(ctx, ranks):
    q, b = random_inputs()
    f = ctx.path("mat.h5")
    with h5py.File(f, "w") as h5:
        h5["test"] = q
        h5["train"] = b[:611]
    for nranks in ranks:
        for metric in METRICS:
            ref = ctx.ref_matrix("mat.h5", "mat.h5", metric)
            argv = ["matrix", "-q", f, "-b", f, "-m", metric]
            limits = [["--mem-limit", x] for x in
                      tight_budget(ctx, nranks, argv, MATRIX_MEM_SPARES)]
            # the one-buffer order (each block computed, then written;
            # the default writes each while the next is computed)
            with env_var("XJ_MATRIX_OVERLAP", "0"):
                ctx.result(nranks, argv + ["--chunk-rows", 3],
                           ctx.path("out.h5"), ref, "np%d matrix %s "
                           "--chunk-rows 3, XJ_MATRIX_OVERLAP=0"
                           % (nranks, metric))
            # HDF5's transfers for the blocks instead of the O_DIRECT
            # chunk writes (XJ_MATRIX_IO)
            if metric == "l2":
                for io in ("independent", "collective"):
                    with env_var("XJ_MATRIX_IO", io):
                        ctx.result(nranks, argv + ["--chunk-rows", 7],
                                   ctx.path("out.h5"), ref, "np%d matrix "
                                   "%s --chunk-rows 7, XJ_MATRIX_IO=%s"
                                   % (nranks, metric, io))
            # chunks of 32 x 32 floats (4 KiB): whole ones go to the file
            # with O_DIRECT, straight from the block or, at the matrix's
            # edges, padded in the staging buffer; the ranks' shares are
            # whole chunks (plan.h), so every byte goes that way
            if metric in ("l2", "cosine"):
                rep = ctx.path("direct.json")
                what = "np%d matrix %s --chunk-rows 32" % (nranks, metric)
                if ctx.result(nranks, argv + ["--chunk-rows", 32,
                                              "--report-json", rep],
                              ctx.path("out.h5"), ref, what):
                    with open(rep) as fh:
                        direct = json.load(fh)["bytes_written_direct"]
                    ctx.check(direct == len(q) * 611 * 4 or
                              not o_direct_ok(ctx.tmp),
                              "%s: %s bytes written with O_DIRECT"
                              % (what, direct))
                # a file system that opens the file with O_DIRECT but
                # refuses the transfers (EINVAL): every chunk through HDF5
                if ctx.einval_shim and o_direct_ok(ctx.tmp):
                    _matrix_einval(ctx, nranks, argv, ref, len(q) * 611 * 4,
                                   metric)
            rep = ctx.path("report.json")
            if ctx.result(nranks, argv + ["--chunk-rows", 40,
                                          "--report-json", rep],
                          ctx.path("out.h5"), ref, "np%d matrix %s "
                          "--chunk-rows 40" % (nranks, metric)):
                check_matrix_report(ctx, rep, len(q), 611, q.shape[1],
                                    "np%d matrix %s report"
                                    % (nranks, metric))
                # chunks of the blocks' columns (611 = 16 x 40 - 29,
                # padding within 1/16: plan_matrix_chunk_cols), the same
                # values as above, and inspect still accepts the file
                with h5py.File(ctx.path("out.h5"), "r") as h5:
                    chunks = h5["distances"].chunks
                ctx.check(chunks is not None and chunks[1] == 40,
                          "np%d matrix %s --chunk-rows 40: chunks %s, "
                          "expected 40 columns" % (nranks, metric, chunks))
                rc, _, serr, _ = ctx.run(1, ["inspect", ctx.path("out.h5")])
                ctx.check(rc == 0, "np%d matrix %s --chunk-rows 40: "
                          "inspect exits %s: %s"
                          % (nranks, metric, rc, serr[-300:]))
            for extra in [[], ["--chunk-rows", 3]] + limits:
                if "--mem-limit" in extra and metric == "l2":
                    chunks = _plan_chunks(ctx, nranks, argv + extra)
                    ctx.check(chunks is None or chunks > 1,
                              "np%d matrix %s: the budget no longer "
                              "forces several chunks; lower it"
                              % (nranks, " ".join(extra)))
                ctx.result(nranks, argv + extra, ctx.path("out.h5"),
                           ref, "np%d matrix %s %s"
                           % (nranks, metric, " ".join(map(str, extra))))


def _matrix_einval(ctx, nranks, argv, ref, nbytes, metric):
    """The matrix with every O_DIRECT pwrite refused (ctx.einval_shim
    preloaded): the same values, none of the bytes written with
    O_DIRECT."""
    rep = ctx.path("einval.json")
    what = ("np%d matrix %s --chunk-rows 32, O_DIRECT writes refused"
            % (nranks, metric))
    with env_var("LD_PRELOAD", ctx.einval_shim):
        ok = ctx.result(nranks, argv + ["--chunk-rows", 32, "--report-json",
                                        rep], ctx.path("out.h5"), ref, what)
    if ok:
        with open(rep) as fh:
            doc = json.load(fh)
        ctx.check(doc["bytes_written_direct"] == 0 and
                  doc["bytes_written"] == nbytes,
                  "%s: %s of %s bytes with O_DIRECT, expected 0 of %d"
                  % (what, doc["bytes_written_direct"],
                     doc["bytes_written"], nbytes))


def extreme_inputs(kind, rng, n=50, m=800, d=16):
    """Inputs where a GEMM's expanded form is far from the exact score."""
    def rows(r):
        if kind == "mixed":
            scale = 10.0 ** rng.integers(-20, 16, (r, 1))
            return rng.standard_normal((r, d)) * scale
        if kind == "subnormal":
            return rng.standard_normal((r, d)) * 1e-41
        offset, spread = EXTREMES[kind]
        return offset + spread * rng.standard_normal((r, d))
    q, b = rows(n).astype(np.float32), rows(m).astype(np.float32)
    for x in (q, b):
        x[np.all(x == 0, axis=1), 0] = np.float32(1e-45)
    b[10] = b[11]
    q[3] = b[200]
    return q, b


EXTREMES = {
    # kind: (offset, spread) of every coordinate
    "offset 1e5": (1e5, 1e-2),
    "offset 3e7": (3e7, 1.0),
    "offset 1e12": (1e12, 1e5),
    "tiny 1e-30": (0.0, 1e-30),
    "mixed": None,
    "subnormal": None,
}


def case_extremes(ctx, ranks):
    """Huge offsets with small spreads (catastrophic cancellation in
    |q|^2 + |b|^2 - 2 q.b), tiny and subnormal values, rows of mixed
    magnitude: every metric must still be exact, top-k and matrix."""
    rng = np.random.default_rng(SEED + 2)
    nranks = ranks[0] if len(ranks) == 1 else 3
    f = ctx.path("ext.h5")
    for kind in EXTREMES:
        q, b = extreme_inputs(kind, rng)
        with h5py.File(f, "w") as h5:
            h5["test"] = q
            h5["train"] = b
        ctx.refs.clear()
        for metric in METRICS:
            ref = ctx.ref_topk("ext.h5", "ext.h5", 10, metric)
            ctx.result(nranks, ["topk", "-q", f, "-b", f, "-k", 10,
                                "-m", metric],
                       ctx.path("out.h5"), ref,
                       "np%d %s %s" % (nranks, kind, metric))
            # the matrix's double GEMM leaves many of these pairs to
            # the canonical evaluator
            ref = ctx.ref_matrix("ext.h5", "ext.h5", metric)
            ctx.result(nranks, ["matrix", "-q", f, "-b", f, "-m", metric],
                       ctx.path("out.h5"), ref,
                       "np%d %s matrix %s" % (nranks, kind, metric))


def glove_slice(ctx, src, path):
    """200 queries x 20000 base rows of GloVe, plain float32."""
    with h5py.File(src, "r") as h5:
        if "test" in h5 and h5["test"].shape[0] >= 200 \
           and h5["train"].shape[0] >= 20000:
            q = h5["test"][:200]
            b = h5["train"][:20000]
            what = "%s test[:200], train[:20000]" % src
        else:
            # the repository's demo file: 20000 train rows only
            b = h5["train"][:19800]
            q = h5["train"][19800:20000]
            what = "%s train[19800:20000] vs train[:19800]" % src
    with h5py.File(path, "w") as h5:
        h5["test"] = q.astype(np.float32)
        h5["train"] = b.astype(np.float32)
    print("GloVe slice: %s" % what, flush=True)


def read_idx_gz(path, count):
    """First count items of an idx-ubyte.gz file as uint8 (count x rest)."""
    with gzip.open(path, "rb") as f:
        magic = struct.unpack(">I", f.read(4))[0]
        if magic >> 8 != 0x08:
            raise ValueError("%s: not an unsigned-byte idx file" % path)
        ndim = magic & 0xFF
        dims = struct.unpack(">%dI" % ndim, f.read(4 * ndim))
        per = int(np.prod(dims[1:], dtype=np.int64))
        count = min(count, dims[0])
        data = np.frombuffer(f.read(count * per), dtype=np.uint8)
    return data.reshape(count, per)


def fashion_file(ctx, folder, path):
    files = ("t10k-images-idx3-ubyte.gz", "train-images-idx3-ubyte.gz")
    missing = [x for x in files
               if not os.path.exists(os.path.join(folder, x))]
    if missing:
        raise Failure("Fashion-MNIST not found: %s missing in %s; install "
                      "the Debian package dataset-fashion-mnist "
                      "(scripts/setup.sh does)" % (", ".join(missing), folder))
    q = read_idx_gz(os.path.join(folder, files[0]), 300)
    b = read_idx_gz(os.path.join(folder, files[1]), 5000)
    with h5py.File(path, "w") as h5:
        h5.create_dataset("test", data=q, dtype=np.uint8)
        h5.create_dataset("train", data=b, dtype=np.uint8)


def glove_file(ctx, args):
    """glove.h5 in the case's folder: the slice of --glove, else of the
    repository's demo file."""
    src = args.glove
    if not os.path.exists(src):
        here = os.path.dirname(os.path.abspath(__file__))
        src = os.path.join(here, "..", "..", "data", "glove-demo.h5")
    g = ctx.path("glove.h5")
    glove_slice(ctx, src, g)
    return g


def case_realdata(ctx, ranks, args):
    g = glove_file(ctx, args)
    for metric, k in (("cosine", 10), ("l2", 5)):
        ref = ctx.ref_topk("glove.h5", "glove.h5", k, metric)
        for nranks in [r for r in ranks if r in (2, 3)] or ranks:
            ctx.result(nranks, ["topk", "-q", g, "-b", g, "-k", k,
                                "-m", metric],
                       ctx.path("out.h5"), ref,
                       "GloVe np%d %s k=%d" % (nranks, metric, k))
    fm = ctx.path("fashion.h5")
    fashion_file(ctx, args.fashion, fm)
    ref = ctx.ref_topk("fashion.h5", "fashion.h5", 10, "l2")
    ctx.result(2, ["topk", "-q", fm, "-b", fm, "-k", 10, "-m", "l2"],
               ctx.path("out.h5"), ref, "Fashion-MNIST uint8 np2 l2 k=10")


def _precisions_here(ctx):
    """The CPU candidate precisions this build and CPU run, and what auto
    picks (the job table's precision row); Skip when none but fp32."""
    g = ctx.path("prec.h5")
    q, b = random_inputs()
    with h5py.File(g, "w") as h5:
        h5["test"] = q
        h5["train"] = b
    runs = []
    for p in ("bf16", "int8"):
        rc, out, err, _ = ctx.run(1, ["topk", "-q", g, "-b", g, "-k", 3,
                                      "--device", "cpu", "--precision", p,
                                      "-o", ctx.path("p.h5"), "--force"])
        if rc == 0:
            runs.append(p)
        else:
            ctx.check(rc == 2 and "--precision %s" % p in err,
                      "--precision %s refused with exit %s: %s"
                      % (p, rc, err.strip()))
            print("precision %s not here: %s" % (p, err.strip()),
                  flush=True)
    rc, out, _, _ = ctx.run(1, ["topk", "-q", g, "-b", g, "-k", 3,
                                "--device", "cpu", "--precision", "auto",
                                "-o", ctx.path("p.h5"), "--force"])
    row = [ln for ln in out.splitlines() if ln.startswith("| precision")]
    ctx.check(rc == 0 and len(row) == 1 and "auto:" in row[0],
              "--precision auto: the job table says how it resolved (%r)"
              % row)
    if not runs:
        raise Skip("no bf16 or int8 candidate GEMM here (built without "
                   "oneDNN, or a CPU without them)")
    return runs


def case_precision(ctx, ranks, args):
    """--precision bf16|int8|auto on the CPU: the bits of the reference
    (= fp32) on GloVe, Fashion-MNIST, random rows with a threshold and
    rows of mixed magnitude, and the report says how many candidates were
    rescored."""
    precs = _precisions_here(ctx)
    g = glove_file(ctx, args)
    fm = ctx.path("fashion.h5")
    fashion_file(ctx, args.fashion, fm)
    r = ctx.path("rnd.h5")
    write_random(r)
    x = ctx.path("ext.h5")
    q, b = extreme_inputs("mixed", np.random.default_rng(SEED + 16))
    with h5py.File(x, "w") as h5:
        h5["test"] = q
        h5["train"] = b
    ref = ctx.ref_topk("rnd.h5", "rnd.h5", 10, "ip")
    thr = threshold_for(ref, 4)
    jobs = [
        (g, "glove.h5", "cosine", 100, None, 1),
        (g, "glove.h5", "l2", 10, None, 2),
        (fm, "fashion.h5", "l2", 10, None, 1),
        (r, "rnd.h5", "ip", 10, thr, 1),
        (x, "ext.h5", "sqeuclidean", 10, None, 1),
    ]
    for f, name, metric, k, t, nranks in jobs:
        ref = ctx.ref_topk(name, name, k, metric, t)
        extra = ["-t", repr(float(t))] if t is not None else []
        for p in precs:
            what = "%s np%d %s k=%d --precision %s" % (name, nranks, metric,
                                                       k, p)
            argv = ["topk", "-q", f, "-b", f, "-k", k, "-m", metric,
                    "--device", "cpu", "--precision", p] + extra
            ctx.result(nranks, argv, ctx.path("out.h5"), ref, what)
    # the report: the price of each precision's bound
    for p in precs:
        rc, out, _, _ = ctx.run(1, ["topk", "-q", g, "-b", g, "-k", 100,
                                    "-m", "cosine", "--device", "cpu",
                                    "--precision", p, "--force",
                                    "-o", ctx.path("o2.h5")])
        line = [ln for ln in out.splitlines()
                if ln.startswith("# candidates rescored")]
        ctx.check(rc == 0 and len(line) == 1 and p in line[0],
                  "--precision %s: no 'candidates rescored' line" % p)
        print("\n".join(line), flush=True)


def write_error_inputs(ctx):
    q, b = random_inputs()
    good = ctx.path("good.h5")
    with h5py.File(good, "w") as h5:
        h5["test"] = q
        h5["train"] = b
    bad = ctx.path("bad.h5")
    with h5py.File(bad, "w") as h5:
        h5["vec1d"] = b[:, 0]
        h5["cube"] = b[:1530].reshape(85, 18, 24)
        h5.create_dataset("strings", data=np.array(
            [["ab", "cd", "ef"]] * 4, dtype=h5py.string_dtype()))
        h5.create_dataset("fixedstr", data=np.array(
            [[b"ab", b"cd"]] * 4, dtype="S2"))
        h5.create_dataset("empty", shape=(0, 24), dtype=np.float32)
        h5["wide"] = np.ones((50, 25), dtype=np.float32)
        vals_a = q.copy()
        vals_a[17, 5] = np.nan
        h5["vals_a"] = vals_a
        vals_b = b.copy()
        vals_b[1234, 23] = np.inf
        h5["vals_b"] = vals_b
        zrow = b[:40].copy()
        zrow[29] = 0
        h5["zrow"] = zrow
    # a real HDF5 file cut short in the middle of its data
    whole = ctx.path("whole.h5")
    with h5py.File(whole, "w") as h5:
        h5["test"] = q
        h5["train"] = b
    size = os.path.getsize(whole)
    with open(whole, "rb") as src, open(ctx.path("truncated.h5"), "wb") as dst:
        dst.write(src.read(size * 6 // 10))
    # gzip chunks of 100 rows; the one holding rows 1200..1299 is
    # overwritten, so only the rank reading that slab meets the error
    corrupt = ctx.path("corrupt.h5")
    with h5py.File(corrupt, "w") as h5:
        h5.create_dataset("train", data=b, chunks=(100, 24),
                          compression="gzip")
        info = h5["train"].id.get_chunk_info_by_coord((1200, 0))
    with open(corrupt, "r+b") as fh:
        fh.seek(info.byte_offset + 16)
        fh.write(b"\xff" * min(64, info.size - 16))
    with open(ctx.path("notes.txt"), "w") as fh:
        fh.write("these are not vectors\n" * 100)
    return good, bad


def _check_error(ctx, what, code, needles, out, run):
    """Check a failed job: exit code, stderr substrings, no output."""
    rc, sout, serr, dt = run
    print("-- %s" % what)
    ok = ctx.check(rc == code, "%s: exit %s, expected %d" % (what, rc, code))
    ok &= ctx.check(rc != "timeout", "%s: no exit within %d s"
                    % (what, ERROR_TIMEOUT_S))
    for n in needles:
        pat = re.compile(n, re.I)
        ok &= ctx.check(pat.search(serr) is not None,
                        "%s: stderr lacks /%s/" % (what, n))
    ok &= ctx.check(not os.path.exists(out),
                    "%s: output %s exists" % (what, out))
    ok &= ctx.check(not os.path.exists(out + ".partial"),
                    "%s: %s.partial left behind" % (what, out))
    if not ok:
        _dump(sout, serr)
    else:
        # the program's own lines, not mpiexec's banners
        lines = [x for x in serr.splitlines() if x.startswith("xjoin")]
        print("   stderr: %s" % (lines[0] if lines else serr.strip()[:200]),
              flush=True)


def case_errors(ctx, ranks):
    good, bad = write_error_inputs(ctx)
    out = ctx.path("err-out.h5")
    g = ["-b", good]
    topk = lambda qspec: ["topk", "-q", qspec] + g + ["-k", 5]  # noqa
    cases = [
        ("missing file", topk(ctx.path("nosuchfile.h5")), 3,
         ["nosuchfile"]),
        ("missing dataset", topk(bad + ":/nosuchdset"), 3,
         ["nosuchdset"]),
        ("1-D dataset", topk(bad + ":/vec1d"), 3, ["vec1d"]),
        ("3-D dataset", topk(bad + ":/cube"), 3, ["cube"]),
        ("string dataset", topk(bad + ":/strings"), 3, ["strings"]),
        ("fixed string dataset", topk(bad + ":/fixedstr"), 3,
         ["fixedstr"]),
        # no query rows is an empty result (shard_inputs.py); no base
        # rows is an error
        ("zero base rows", ["topk", "-q", good, "-b", bad + ":/empty",
                            "-k", 5], 3, ["empty", "0 rows"]),
        ("dimensions differ", topk(bad + ":/wide"), 3, ["25"]),
        ("NaN in queries", topk(bad + ":/vals_a"), 3,
         ["vals_a", r"\b17\b", r"nan|not finite|non-finite"]),
        ("Inf in base", ["topk", "-q", good, "-b", bad + ":/vals_b",
                         "-k", 5], 3,
         ["vals_b", r"\b1234\b", r"inf|not finite|non-finite"]),
        ("zero row for cosine", ["topk", "-q", good, "-b",
                                 bad + ":/zrow", "-k", 5, "-m", "cosine"],
         3, ["zrow", r"\b29\b"]),
        ("truncated HDF5", topk(ctx.path("truncated.h5")), 3,
         ["truncated.h5"]),
        ("not HDF5", topk(ctx.path("notes.txt")), 3, ["notes.txt"]),
        ("corrupt gzip chunk in base", ["topk", "-q", good, "-b",
                                        ctx.path("corrupt.h5"), "-k", 5],
         3, ["corrupt.h5"]),
        ("ambiguous dataset", ["topk", "-q", good, "-b", bad, "-k", 5], 3,
         ["bad.h5"]),
        ("memory budget too small", topk(good) + ["--mem-limit", "1K"], 4,
         ["budget|memory"]),
        ("bad metric", topk(good) + ["-m", "manhattan"], 2,
         ["manhattan"]),
        ("k = 0", ["topk", "-q", good, "-b", good, "-k", 0], 2, [r"\S"]),
        ("k negative", ["topk", "-q", good, "-b", good, "-k", -3], 2,
         [r"\S"]),
        ("bad threshold", topk(good) + ["-t", "abc"], 2, ["abc"]),
        ("unknown option", topk(good) + ["--frobnicate"], 2,
         ["frobnicate"]),
        ("unknown command", ["frobnicate", "-q", good, "-b", good], 2,
         ["frobnicate"]),
        ("missing output folder", topk(good), 4, ["nosuchdir"]),
    ]
    # A failing mpiexec spends a second or two tearing the job down, idle:
    # run a few at once, each with its own output path.
    outs = [ctx.path("err-out-%d.h5" % i) for i in range(len(cases))]
    outs[[c[0] for c in cases].index("missing output folder")] = \
        ctx.path("nosuchdir/out.h5")
    with concurrent.futures.ThreadPoolExecutor(ERROR_JOBS) as pool:
        runs = list(pool.map(
            lambda c, o: ctx.run(2, c[1] + ["-o", o],
                                 timeout=ERROR_TIMEOUT_S),
            cases, outs))
    for (what, argv, code, needles), o, r in zip(cases, outs, runs):
        _check_error(ctx, what, code, needles, o, r)

    # existing output: refused without --force, file untouched
    with open(out, "wb") as fh:
        fh.write(b"precious bytes, not a result\n")
    before = open(out, "rb").read()
    argv = ["topk", "-q", good, "-b", good, "-k", 5, "-o", out]
    rc, sout, serr, _ = ctx.run(2, argv, timeout=ERROR_TIMEOUT_S)
    ctx.check(rc == 2, "existing output: exit %s, expected 2" % rc)
    ctx.check(os.path.basename(out) in serr,
              "existing output: stderr does not name %s" % out)
    ctx.check(open(out, "rb").read() == before,
              "existing output: file changed without --force")
    ctx.check(not os.path.exists(out + ".partial"),
              "existing output: .partial left behind")
    if rc != 2:
        _dump(sout, serr)
    ref = ctx.ref_topk("good.h5", "good.h5", 5, "l2")
    rc, sout, serr, _ = ctx.run(2, argv + ["--force"])
    ctx.check(rc == 0, "--force over existing output: exit %s" % rc)
    if rc == 0:
        ctx.check(compare.compare(out, ref) == 0,
                  "--force: replaced output differs from reference")
    else:
        _dump(sout, serr)


TYPES = ("<f4", ">f4", "<f8", ">f8", "i1", "u1", "<i2", "<u2", ">i4",
         "<i8", "<u8")


def case_types(ctx, ranks):
    """Every numeric type is read as float32; dataset paths in groups;
    the only 2-D dataset chosen when /test or /train is absent; a file
    name holding ':'."""
    rng = np.random.default_rng(SEED + 1)
    f = ctx.path("types.h5")
    with h5py.File(f, "w") as h5:
        for t in TYPES:
            dt = np.dtype(t)
            if dt.kind == "f":
                # float64 values that are not float32: conversion rounds
                x = rng.standard_normal((60, 12)) * 3
            elif dt.kind == "u":
                x = rng.integers(0, 120, (60, 12))
            else:
                x = rng.integers(-100, 100, (60, 12))
            x[np.all(x == 0, axis=1), 0] = 1
            h5.create_dataset("grp/sub/%s" % t.replace("<", "le")
                              .replace(">", "be"), data=x.astype(dt))
    names = ["/grp/sub/%s" % t.replace("<", "le").replace(">", "be")
             for t in TYPES]
    nranks = ranks[0] if len(ranks) == 1 else 2
    for i, name in enumerate(names):
        other = names[(i + 3) % len(names)]
        for metric in ("l2", "cosine"):
            ref = ctx.ref_topk("types.h5:" + name, "types.h5:" + other, 7,
                               metric)
            ctx.result(nranks, ["topk", "-q", f + ":" + name, "-b",
                                f + ":" + other, "-k", 7, "-m", metric],
                       ctx.path("out.h5"), ref,
                       "np%d %s x %s %s" % (nranks, name, other, metric))
    # no /test or /train: the only 2-D dataset, next to 1-D ones
    q, b = random_inputs()
    for name, arr in (("q only.h5", q), ("b:only.h5", b)):
        with h5py.File(ctx.path(name), "w") as h5:
            h5["vectors"] = arr
            h5["labels"] = np.arange(arr.shape[0])
    ref = ctx.ref_topk("q only.h5:/vectors", "b:only.h5:/vectors", 5, "ip")
    ctx.result(nranks, ["topk", "-q", ctx.path("q only.h5"),
                        "-b", ctx.path("b:only.h5"), "-k", 5, "-m", "ip"],
               ctx.path("out.h5"), ref,
               "only 2-D dataset, file names with ' ' and ':'")
    ctx.result(nranks, ["topk", "-q", ctx.path("q only.h5:vectors"),
                        "-b", ctx.path("b:only.h5:/vectors"), "-k", 5,
                        "-m", "ip"],
               ctx.path("out.h5"), ref, "explicit datasets after ':'")


def case_config(ctx, ranks):
    write_random(ctx.path("rand.h5"))
    f = ctx.path("rand.h5")
    ini = ctx.path("job.ini")
    with open(ini, "w") as fh:
        fh.write("# integration test job\n[job]\n"
                 "query = %s:/test\nbase = %s:/train\n"
                 "metric = l2\nk = 3\nchunk-rows = 5\n"
                 "output = %s\n" % (f, f, ctx.path("ini1.h5")))
    cli = ["topk", "-q", f + ":/test", "-b", f + ":/train"]
    nranks = ranks[0] if len(ranks) == 1 else 2
    ok = ctx.run_ok(nranks, ["topk", "--config", ini], "INI only")
    ok &= ctx.run_ok(nranks, cli + ["-m", "l2", "-k", 3, "-o",
                                    ctx.path("cli1.h5")], "CLI only")
    if ok:
        ctx.check(_same_data(ctx.path("ini1.h5"), ctx.path("cli1.h5")),
                  "INI job differs from the same job on the command line")
        ctx.check(compare.compare(ctx.path("ini1.h5"), ctx.ref_topk(
            "rand.h5", "rand.h5", 3, "l2")) == 0,
                  "INI job differs from reference")
    # command line over INI, whatever the order of --config
    ref = ctx.ref_topk("rand.h5", "rand.h5", 7, "ip")
    over = ["-m", "ip", "-k", 7]
    for name, argv, out in (
        ("config first", ["topk", "--config", ini] + over, "ini2.h5"),
        ("config last", ["topk"] + over + ["--config", ini], "ini3.h5")):
        ctx.result(nranks, argv, ctx.path(out), ref,
                   "INI + CLI, %s (the command line must win)" % name)
    ctx.check(not os.path.exists(ctx.path("ini1.h5.partial")),
              "INI: partial output left")
    # a bad key is a usage error naming file and line
    bad = ctx.path("bad.ini")
    with open(bad, "w") as fh:
        fh.write("[job]\nk = 3\nfrobnicate = 1\n")
    rc, sout, serr, _ = ctx.run(nranks, ["topk", "--config", bad, "-q", f,
                                         "-b", f, "-o", ctx.path("x.h5")],
                                timeout=ERROR_TIMEOUT_S)
    ctx.check(rc == 2, "bad INI key: exit %s, expected 2" % rc)
    ctx.check("bad.ini" in serr and re.search(r"\b3\b", serr) is not None
              and "frobnicate" in serr,
              "bad INI key: stderr should name bad.ini, line 3 and the key")
    if rc != 2:
        _dump(sout, serr)
    ctx.check(not os.path.exists(ctx.path("x.h5")), "bad INI: output")


def case_plan(ctx, ranks):
    write_random(ctx.path("rand.h5"))
    f = ctx.path("rand.h5")
    for nranks in ranks:
        for sub in (["topk", "-k", 10], ["matrix"]):
            out = ctx.path("plan-out.h5")
            argv = ["plan", sub[0], "-q", f, "-b", f] + sub[1:] + \
                ["-o", out]
            rc, sout, serr, _ = ctx.run(nranks, argv, timeout=60)
            what = "np%d plan %s" % (nranks, sub[0])
            ok = ctx.check(rc == 0, "%s: exit %s" % (what, rc))
            ok &= ctx.check(re.search(r"grid.*\b\d+ x \d+\b", sout, re.I)
                            is not None,
                            "%s: no grid in stdout" % what)
            ok &= ctx.check(not os.path.exists(out)
                            and not os.path.exists(out + ".partial"),
                            "%s: wrote an output file" % what)
            if not ok:
                _dump(sout, serr)


def case_gen(ctx, ranks):
    def gen(nranks, name, seed, extra=()):
        p = ctx.path(name)
        ok = ctx.run_ok(nranks, ["gen", "--rows", 700, "--dim", 16,
                                 "--queries", 30, "--seed", seed, "-o", p]
                        + list(extra), "gen %s" % name)
        return p if ok else None

    a = gen(1, "g1.h5", 7)
    b = gen(2 if 2 in ranks or len(ranks) > 1 else ranks[0], "g2.h5", 7)
    c = gen(1, "g3.h5", 8)
    d = gen(1, "g4.h5", 7, ["--clusters", 5])
    if a:
        with h5py.File(a, "r") as h5:
            tr, te = h5.get("train"), h5.get("test")
            ctx.check(tr is not None and tr.shape == (700, 16)
                      and tr.dtype == np.float32,
                      "gen: /train is %r" % (tr,))
            ctx.check(te is not None and te.shape == (30, 16)
                      and te.dtype == np.float32,
                      "gen: /test is %r" % (te,))
            if tr is not None:
                x = tr[...]
                ctx.check(np.all(np.isfinite(x)) and np.std(x) > 0,
                          "gen: /train not finite or constant")
    if a and b:
        ctx.check(_same_arrays(a, b), "gen: same seed, np1 vs np2 differ")
    if a and c:
        ctx.check(not _same_arrays(a, c), "gen: seeds 7 and 8 equal")
    if a and d:
        ctx.check(not _same_arrays(a, d), "gen: --clusters had no effect")
    if d:
        ref = ctx.ref_topk("g4.h5", "g4.h5", 10, "l2")
        ctx.result(2, ["topk", "-q", d, "-b", d, "-k", 10],
                   ctx.path("out.h5"), ref, "topk on generated data")


def _progress_rows(path):
    """rows done in a progress record, or -1 when it does not exist yet."""
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError:
        return -1
    m = re.search(r"^rows_done = (\d+) of", text, re.M)
    return int(m.group(1)) if m else -1


def _inround(path):
    """(query rows held, base rows folded) of a record's round in
    progress: (0, 0) when it has none or does not exist yet."""
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError:
        return 0, 0
    held = re.search(r"^rows_held = (\d+)$", text, re.M)
    folded = re.search(r"^base_folded = (\d+) of", text, re.M)
    if not held or not folded:
        return 0, 0
    return int(held.group(1)), int(folded.group(1))


def _file_bytes(path):
    with open(path, "rb") as fh:
        return fh.read()


def _start_and_wait(ctx, nranks, argv, progress, more_than=0, ready=None):
    """Start a run and return it once its progress record shows more than
    more_than rows done (or ready(progress) holds), with its rank pids;
    None when it ended first."""
    print("[np%d] xjoin %s" % (nranks, " ".join(map(str, argv))), flush=True)
    p = ctx.start(nranks, argv)
    t0 = time.time()
    if ready is None:
        def ready(path):
            return _progress_rows(path) > more_than
    while p.poll() is None and time.time() - t0 < 120:
        if ready(progress):
            kids = _children(p.pid)
            if len(kids) == nranks:
                return p, kids
        time.sleep(0.05)
    _kill_group(p)
    sout, serr = p.communicate()
    ctx.check(False, "the run ended (exit %s) or stalled before recording "
              "progress past %d rows" % (p.returncode, more_than))
    _dump(sout, serr)
    return None, []


def _finish(ctx, p, what):
    """Wait (bounded) for a signalled run; returns (rc, out, err, dt)."""
    t0 = time.time()
    try:
        sout, serr = p.communicate(timeout=ERROR_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _kill_group(p)
        sout, serr = p.communicate()
    dt = time.time() - t0
    print("  -> %s, %.2f s after %s" % (p.returncode, dt, what), flush=True)
    return p.returncode, sout, serr, dt


def _sigterm_midway(ctx, nranks, argv, progress):
    """Start argv, SIGTERM its ranks once its progress record shows rows
    done; (rc, stdout, stderr), or None when it ended first."""
    p, kids = _start_and_wait(ctx, nranks, argv, progress)
    if not p:
        return None
    for pid in kids:
        os.kill(pid, signal.SIGTERM)
    return _finish(ctx, p, "SIGTERM")[:3]


def case_interrupt(ctx, ranks):
    """SIGTERM to every rank mid-run, as a batch system's cancel does:
    exit 5 within seconds, nothing at the output path, the partial file
    and its progress record kept; --resume finishes it bit-identically.
    With --no-checkpoint nothing is kept at all."""
    f = ctx.path("big.h5")
    if not ctx.run_ok(1, ["gen", "--rows", 20000, "--dim", 32, "--queries",
                          3000, "--seed", 5, "-o", f], "gen input"):
        return
    nranks = ranks[0] if len(ranks) == 1 else 2
    ref, out = ctx.path("ref.h5"), ctx.path("int-out.h5")
    job = ["topk", "-q", f, "-b", f, "-k", 10]
    if not ctx.run_ok(nranks, job + ["-o", ref], "uninterrupted run"):
        return
    # small chunks and a record after every one: many chunk boundaries
    argv = job + ["--chunk-rows", 30, "--checkpoint-seconds", 0, "-o", out]
    p, kids = _start_and_wait(ctx, nranks, argv, out + ".progress")
    if not p:
        return
    for pid in kids:
        os.kill(pid, signal.SIGTERM)
    rc, sout, serr, dt = _finish(ctx, p, "SIGTERM")
    ok = ctx.check(rc == 5, "SIGTERM to the ranks: exit %s, expected 5 "
                   "(interrupted)" % rc)
    ok &= ctx.check(dt < 30, "SIGTERM: took %.1f s to stop" % dt)
    ok &= ctx.check(not os.path.exists(out), "SIGTERM: output written")
    ok &= ctx.check(os.path.exists(out + ".partial") and
                    _progress_rows(out + ".progress") > 0,
                    "SIGTERM: partial file or progress record missing")
    ok &= ctx.check("--resume" in serr, "SIGTERM: the message does not "
                    "say how to continue")
    if not ok:
        _dump(sout, serr)
        return
    if ctx.run_ok(nranks, argv[:-2] + ["--resume", "-o", out],
                  "--resume after SIGTERM"):
        ctx.check(_same_results(ref, out), "resumed output differs from "
                  "the uninterrupted run")
        ctx.check(not os.path.exists(out + ".partial") and
                  not os.path.exists(out + ".progress"),
                  "partial file or progress record left after resuming")
    # --no-checkpoint: no record at all, so an interrupted run keeps
    # nothing; a whole run gives the same bits; --resume is refused
    nc = ctx.path("nc-out.h5")
    argv = job + ["--chunk-rows", 30, "--no-checkpoint", "-o", nc]
    p, kids = _start_and_wait(ctx, nranks, argv, nc + ".partial",
                              ready=os.path.exists)
    if not p:
        return
    for pid in kids:
        os.kill(pid, signal.SIGTERM)
    rc, sout, serr, dt = _finish(ctx, p, "SIGTERM, --no-checkpoint")
    ok = ctx.check(rc == 5, "SIGTERM, --no-checkpoint: exit %s, expected 5"
                   % rc)
    ok &= ctx.check(not any(os.path.exists(nc + x)
                            for x in ("", ".partial", ".progress")),
                    "SIGTERM, --no-checkpoint: a file left at the output")
    if not ok:
        _dump(sout, serr)
    if ctx.run_ok(nranks, argv, "--no-checkpoint, whole run"):
        ctx.check(_same_results(ref, nc) and
                  not os.path.exists(nc + ".progress"),
                  "--no-checkpoint: output differs or a record was left")
    _check_refused(ctx, 1, job + ["--no-checkpoint", "--resume", "-o", nc],
                   2, "--no-checkpoint keeps none", [nc],
                   "--resume with --no-checkpoint")


def _check_refused(ctx, nranks, argv, code, needle, kept, what):
    """A run that must fail with code and needle, leaving the files in kept
    byte-identical."""
    before = {k: _file_bytes(k) for k in kept}
    rc, sout, serr, _ = ctx.run(nranks, argv, timeout=ERROR_TIMEOUT_S)
    ok = ctx.check(rc == code, "%s: exit %s, expected %d" % (what, rc, code))
    ok &= ctx.check(re.search(needle, serr) is not None,
                    "%s: message does not match %r" % (what, needle))
    for k, v in before.items():
        ok &= ctx.check(os.path.exists(k) and _file_bytes(k) == v,
                        "%s: %s changed" % (what, os.path.basename(k)))
    if not ok:
        _dump(sout, serr)


def case_resume(ctx, ranks):
    """Resume: refused mismatches, SIGKILL of one rank, a changed rank
    count and chunk size, changed input values, matrix, --force, and
    --resume with nothing to resume."""
    f = ctx.path("in.h5")
    if not ctx.run_ok(1, ["gen", "--rows", 20000, "--dim", 32, "--queries",
                          3000, "--seed", 7, "-o", f], "gen input"):
        return
    ref, out = ctx.path("ref.h5"), ctx.path("out.h5")
    prog, part = out + ".progress", out + ".partial"
    job = ["topk", "-q", f, "-b", f, "-k", 10, "-m", "cosine"]
    slow = ["--chunk-rows", 30, "--checkpoint-seconds", 0]
    if not ctx.run_ok(2, job + ["-o", ref], "uninterrupted run"):
        return

    # --resume with nothing to resume starts fresh and says so
    fresh = ctx.path("fresh.h5")
    rc, sout, serr, _ = ctx.run(2, job + ["--resume", "-o", fresh])
    ctx.check(rc == 0 and "starting fresh" in serr and
              _same_results(ref, fresh), "--resume with nothing to resume: "
              "exit %s, expected 0 with 'starting fresh'" % rc)

    # SIGKILL of one rank: the job ends within seconds, non-zero
    p, kids = _start_and_wait(ctx, 2, job + slow + ["-o", out], prog)
    if not p:
        return
    os.kill(max(kids), signal.SIGKILL)
    rc, sout, serr, dt = _finish(ctx, p, "SIGKILL of one rank")
    ctx.check(rc not in (0, None) and dt < 20, "SIGKILL of one rank: exit "
              "%s after %.1f s, expected non-zero within 20 s" % (rc, dt))
    ctx.check(not os.path.exists(out), "SIGKILL: output written")
    if not ctx.check(os.path.exists(part) and _progress_rows(prog) > 0,
                     "SIGKILL: partial file or progress record missing"):
        return
    kept = [part, prog]
    _check_refused(ctx, 2, job + ["-o", out], 2, r"interrupted run.*--resume",
                   kept, "rerun without --resume")
    _check_refused(ctx, 2, ["topk", "-q", f, "-b", f, "-k", 11, "-m",
                            "cosine", "--resume", "-o", out], 2,
                   r"-k differs.*had 10.*has 11", kept, "--resume with -k 11")
    _check_refused(ctx, 2, ["topk", "-q", f, "-b", f, "-k", 10, "--resume",
                            "-o", out], 2, r"--metric differs", kept,
                   "--resume with another metric")

    # three ranks, other chunks, interrupted again with SIGUSR1
    done = _progress_rows(prog)
    p, kids = _start_and_wait(ctx, 3, job + ["--chunk-rows", 37,
                                             "--checkpoint-seconds", 0,
                                             "--resume", "-o", out],
                              prog, more_than=done)
    if not p:
        return
    for pid in kids:
        os.kill(pid, signal.SIGUSR1)
    rc, sout, serr, _ = _finish(ctx, p, "SIGUSR1")
    ctx.check(rc == 5, "SIGUSR1 on a resumed run: exit %s, expected 5" % rc)
    ctx.check(_progress_rows(prog) > done, "the resumed run recorded no "
              "progress (%d rows before)" % done)

    # one rank, automatic chunks: finishes, bit-identical
    rc, sout, serr, _ = ctx.run(1, job + ["--resume", "-o", out])
    ok = ctx.check(rc == 0 and "continuing" in serr,
                   "final --resume: exit %s" % rc)
    ok &= ctx.check(_same_results(ref, out), "resumed output differs from "
                    "the uninterrupted run")
    ok &= ctx.check(not os.path.exists(part) and not os.path.exists(prog),
                    "partial file or progress record left after finishing")
    if ok:
        with h5py.File(out, "r") as fh:
            ctx.check(int(fh.attrs["runs"]) == 3, "attribute runs = %s, "
                      "expected 3" % fh.attrs.get("runs"))
    if not ok:
        _dump(sout, serr)
    _resume_changed_input(ctx, job, slow)
    # a self-join: one resident copy on one rank, the rows checked and
    # fingerprinted once
    f_self = f + ":/train"
    _resume_changed_input(ctx, ["topk", "-q", f_self, "-b", f_self, "-k", 10,
                                "-m", "l2"], slow, 1, "query",
                          "changed-self.h5")
    _resume_matrix(ctx)


def _resume_changed_input(ctx, job, slow, nranks=2, role="base",
                          name="changed.h5"):
    """Values changed between the runs: refused, naming the input; --force
    starts over and removes the old record. role: the side the message
    names (a self-join's rows are read and fingerprinted once, as
    queries)."""
    f = ctx.path("copy.h5")
    shutil.copy(ctx.path("in.h5"), f)
    out = ctx.path(name)
    argv = [a.replace(ctx.path("in.h5"), f) if isinstance(a, str) else a
            for a in job]
    p, kids = _start_and_wait(ctx, nranks, argv + slow + ["-o", out],
                              out + ".progress")
    if not p:
        return
    for pid in kids:
        os.kill(pid, signal.SIGTERM)
    _finish(ctx, p, "SIGTERM")
    with h5py.File(f, "r+") as fh:
        row = fh["train"][19999]
        row[3] = np.nextafter(row[3], np.float32(np.inf))
        fh["train"][19999] = row
    _check_refused(ctx, nranks, argv + ["--resume", "-o", out], 3,
                   r"%s values in .*copy\.h5:/train changed" % role,
                   [out + ".partial", out + ".progress"],
                   "np%d --resume after the %s changed" % (nranks, role))
    rc, sout, serr, _ = ctx.run(nranks, argv + ["--force", "-o", out])
    ctx.check(rc == 0 and not os.path.exists(out + ".progress"),
              "--force over an interrupted run: exit %s" % rc)


def _resume_matrix(ctx):
    """The full matrix resumes by query rounds too."""
    f = ctx.path("m.h5")
    if not ctx.run_ok(1, ["gen", "--rows", 3000, "--dim", 16, "--queries",
                          2000, "--seed", 9, "-o", f], "gen matrix input"):
        return
    ref, out = ctx.path("mref.h5"), ctx.path("mout.h5")
    job = ["matrix", "-q", f, "-b", f, "-m", "l2"]
    if not ctx.run_ok(2, job + ["-o", ref], "uninterrupted matrix"):
        return
    got = _sigterm_midway(ctx, 2, job + ["--chunk-rows", 8,
                                         "--checkpoint-seconds", 0,
                                         "-o", out], out + ".progress")
    if not got:
        return
    ctx.check(got[0] == 5, "matrix SIGTERM: exit %s, expected 5" % got[0])
    if ctx.run_ok(3, job + ["--resume", "-o", out], "matrix --resume"):
        ctx.check(_same_results(ref, out), "resumed matrix differs")
    # again in the one-buffer order (the default above writes the last
    # block of a query round during the next round's first block)
    os.unlink(out)
    with env_var("XJ_MATRIX_OVERLAP", "0"):
        got = _sigterm_midway(ctx, 2, job + ["--chunk-rows", 8,
                                             "--checkpoint-seconds", 0,
                                             "-o", out], out + ".progress")
        if not got:
            return
        ctx.check(got[0] == 5, "matrix SIGTERM, XJ_MATRIX_OVERLAP=0: exit "
                  "%s, expected 5" % got[0])
        # other chunks (few: each block is one collective write)
        if ctx.run_ok(2, job + ["--resume", "--chunk-rows", 96, "-o", out],
                      "matrix --resume, XJ_MATRIX_OVERLAP=0"):
            ctx.check(_same_results(ref, out), "resumed matrix differs "
                      "(XJ_MATRIX_OVERLAP=0)")


INROUND_BASE = 400000
INROUND_QUERIES = 20000     # the half-way case; the others have twice as many


def _left_behind(out):
    """The progress files of out that exist."""
    return [x for x in (out + ".partial", out + ".progress",
                        out + ".progress.0", out + ".progress.1",
                        out + ".progress.tmp") if os.path.exists(x)]


def _report(path):
    """(compute seconds, GEMM FLOPs) of a --report-json file."""
    with open(path) as fh:
        doc = json.load(fh)
    return doc["phase_seconds"]["compute"], doc["gemm_flops"]


def _ready_at(target, every_s):
    """A _start_and_wait test: true once the record's lists hold target
    base rows, or are due to by the rate of the first record (written
    every_s after the run began computing, give or take its validation),
    so that a short run is caught near target rather than at the next
    record."""
    first = {}

    def ready(path):
        folded = _inround(path)[1]
        if folded >= target:
            return True
        if folded and not first:
            first.update(t=time.time(), rows=folded)
        return bool(first) and time.time() >= first["t"] + \
            (target - first["rows"]) * every_s / first["rows"]
    return ready


def _interrupt_inround(ctx, nranks, argv, prog, ready, what):
    """Run argv and SIGUSR1 its ranks once ready(prog): exit 5, no rows
    done, the lists of every query row kept over some base rows, and the
    message says so. Returns the recorded (rows held, base rows folded),
    or None."""
    p, kids = _start_and_wait(ctx, nranks, argv, prog, ready=ready)
    if not p:
        return None
    for pid in kids:
        os.kill(pid, signal.SIGUSR1)
    rc, sout, serr, _ = _finish(ctx, p, "SIGUSR1, " + what)
    held, folded = _inround(prog)
    try:
        with open(prog) as fh:
            n = int(re.search(r"^rows_done = \d+ of (\d+)$", fh.read(),
                              re.M).group(1))
    except (OSError, AttributeError):
        n = -1
    ok = ctx.check(rc == 5, "%s: exit %s, expected 5" % (what, rc))
    ok &= ctx.check(_progress_rows(prog) == 0 and held == n and folded > 0,
                    "%s: record holds %d rows done, lists of %d rows over "
                    "%d base rows; expected 0, all %d, some"
                    % (what, _progress_rows(prog), held, folded, n))
    ok &= ctx.check("and the lists of %d more hold %d of %d base rows"
                    % (held, folded, INROUND_BASE) in serr,
                    "%s: the message does not say what the lists hold"
                    % what)
    if not ok:
        _dump(sout, serr)
        return None
    return held, folded


def _resume_inround(ctx, nranks, argv, out, ref, rec, what, extra=()):
    """--resume after _interrupt_inround: says it continues from the
    lists, finishes bit-identical to ref and leaves no progress files."""
    rc, sout, serr, _ = ctx.run(nranks, argv + ["--resume", "-o", out] +
                                list(extra))
    ok = ctx.check(rc == 0, "%s: exit %s" % (what, rc))
    ok &= ctx.check("and the lists of %d more hold %d of %d base rows; "
                    "continuing" % (rec[0], rec[1], INROUND_BASE) in serr,
                    "%s: does not say it continues from the lists" % what)
    ok &= ctx.check(ok and _same_results(ref, out),
                    "%s: differs from the uninterrupted run" % what)
    ok &= ctx.check(not _left_behind(out), "%s: left %s" %
                    (what, _left_behind(out)))
    if not ok:
        _dump(sout, serr)
    return ok


def _same_layout(ctx, a, b, what):
    """h5dump -H of two results: the same datasets and attributes."""
    heads = []
    for path in (a, b):
        text = subprocess.run(["h5dump", "-H", path], capture_output=True,
                              text=True).stdout
        heads.append(text.split("\n", 1)[1] if text else "")
    ctx.check(heads[0] and heads[0] == heads[1], "%s: h5dump -H of the "
              "result differs from the uninterrupted run's" % what)


def case_resume_inround(ctx, ranks):
    """The queries fit one chunk, so a run has one round: interrupted
    half way through it, the record holds every query row's lists over
    the base rows folded in so far; the resumed run streams only the
    rest (its compute phase at most 60% of an uninterrupted run's) and
    writes the same bits and the same layout. Also resumed on other rank
    counts (1 -> 2; 2 -> 3, interrupted again, -> 1), with a threshold and
    self exclusion, and seen by xjoin inspect."""
    f = ctx.path("in.h5")
    if not ctx.run_ok(1, ["gen", "--rows", INROUND_BASE, "--dim", 32,
                          "--queries", INROUND_QUERIES, "--seed", 21, "-o",
                          f], "gen input"):
        return
    ref, out = ctx.path("ref.h5"), ctx.path("out.h5")
    job = ["topk", "-q", f, "-b", f, "-k", 10]
    rc, sout, serr, _ = ctx.run(1, job + ["--report-json",
                                          ctx.path("ref.json"), "-o", ref])
    if not ctx.check(rc == 0 and re.search(r"query chunks \(max\) +\| +1 "
                                           r"\|", sout),
                     "uninterrupted run: exit %s, or not one round" % rc):
        _dump(sout, serr)
        return
    argv = job + ["--checkpoint-seconds", 1]
    # timings on a shared machine: a second try before calling it slow,
    # with the uninterrupted run timed again beside it (the same load)
    for attempt in (1, 2):
        if attempt == 2 and ctx.run(1, job + [
                "--report-json", ctx.path("ref.json"), "-o",
                ctx.path("ref-again.h5")])[0] != 0:
            ctx.check(False, "uninterrupted run, again: failed")
            break
        slow = _inround_half_way(ctx, argv, out, ref, attempt)
        if not slow:
            break
        if attempt == 2:
            ctx.check(False, slow)
    _inround_other_ranks(ctx)


def _inround_half_way(ctx, argv, out, ref, attempt):
    """Interrupt half way, inspect, resume: None, or the timing failure
    (other failures are checked here)."""
    prog = out + ".progress"
    for x in [out] + _left_behind(out):
        if os.path.exists(x):
            os.unlink(x)
    rec = _interrupt_inround(ctx, 1, argv + ["-o", out], prog,
                             _ready_at(INROUND_BASE * 11 // 20, 1),
                             "half way")
    if not rec:
        return None
    rc, sout, serr, _ = ctx.run(1, ["inspect", out])
    ctx.check(rc == 0 and re.search(
        r"\| round in progress +\| lists of %d query rows over %d of %d "
        r"base rows" % (rec[0], rec[1], INROUND_BASE), sout),
        "inspect does not show the round in progress: exit %s" % rc)
    if not _resume_inround(ctx, 1, argv, out, ref, rec, "resumed",
                           ["--report-json", ctx.path("res.json")]):
        return None
    _same_layout(ctx, ref, out, "resumed")
    (c0, f0), (c1, f1) = (_report(ctx.path("ref.json")),
                          _report(ctx.path("res.json")))
    print("  compute %.3f s uninterrupted, %.3f s resumed (%.0f%%); GEMM "
          "%.3g and %.3g FLOP (%.0f%%); the lists held %d of %d base rows"
          % (c0, c1, 100 * c1 / c0, f0, f1, 100 * f1 / f0, rec[1],
             INROUND_BASE), flush=True)
    ctx.check(f1 <= (1 - rec[1] / INROUND_BASE) * f0 * 1.001,
              "the resumed run redid base rows the lists held")
    if c1 <= 0.6 * c0:
        return None
    print("  (attempt %d: slower than expected%s)" % (
        attempt, ", stopped before half way" if 2 * rec[1] < INROUND_BASE
        else ""), flush=True)
    return ("the resumed run's compute phase took %.3f s, more than 60%% "
            "of the uninterrupted %.3f s (the lists held %d of %d base "
            "rows)" % (c1, c0, rec[1], INROUND_BASE))


def _inround_other_ranks(ctx):
    """1 -> 2 ranks; 2 -> 3 ranks (interrupted again) -> 1 rank; cosine
    with a threshold that leaves lists short, and --self. Twice the
    queries of the half-way case, so that a run resumed from an early
    interrupt still has seconds of work when it records progress."""
    f = ctx.path("in2.h5")
    if not ctx.run_ok(1, ["gen", "--rows", INROUND_BASE, "--dim", 32,
                          "--queries", 2 * INROUND_QUERIES, "--seed", 22,
                          "-o", f], "gen input"):
        return
    ref, out = ctx.path("ref2.h5"), ctx.path("out2.h5")
    prog = out + ".progress"
    # fp32: the slowest precision, so that a 3-rank run resumed from the
    # 2-rank run's first record (about 1 s in) still has more than its
    # checkpoint interval of work on a fast machine (auto's int8 finished
    # the rest in under a second on a Zen 5 class one)
    job = ["topk", "-q", f, "-b", f, "-k", 10, "-m", "cosine", "-t", 0.34,
           "--self", "--precision", "fp32"]
    argv = job + ["--checkpoint-seconds", 1]
    if not ctx.run_ok(2, job + ["-o", ref], "uninterrupted cosine run"):
        return
    rec = _interrupt_inround(ctx, 1, argv + ["-o", out], prog,
                             _ready_at(INROUND_BASE // 3, 1), "one rank")
    if not rec or not _resume_inround(ctx, 2, argv, out, ref, rec,
                                      "1 -> 2 ranks"):
        return
    os.unlink(out)
    # at its first record, so that the resumed run has time for one
    rec = _interrupt_inround(ctx, 2, argv + ["-o", out], prog,
                             lambda path: _inround(path)[1] > 0,
                             "two ranks")
    if not rec:
        return
    # resumed on three ranks and interrupted again, further on
    before = rec[1]
    rec = _interrupt_inround(ctx, 3, argv + ["--resume", "-o", out], prog,
                             lambda path: _inround(path)[1] > before,
                             "2 -> 3 ranks")
    if rec and _resume_inround(ctx, 1, argv, out, ref, rec,
                               "2 -> 3 -> 1 ranks"):
        with h5py.File(out, "r") as fh:
            ctx.check(int(fh.attrs["runs"]) == 3, "attribute runs = %s, "
                      "expected 3" % fh.attrs.get("runs"))


def _gpu_here():
    """nvidia-smi lists a GPU (a missing nvidia-smi means none)."""
    try:
        return subprocess.run(["nvidia-smi", "-L"],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL,
                              timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _rank_lines(text, prefix):
    """Lines starting with prefix + 'rank N', as (N, line)."""
    got = []
    for line in text.splitlines():
        m = re.match(re.escape(prefix) + r"\s*rank\s+(\d+)\s", line)
        if m:
            got.append((int(m.group(1)), line))
    return got


def _devices_listing(ctx, nranks):
    """`xjoin devices`: one line per rank in rank order. Returns whether
    the ranks have GPUs (False also for a binary built without CUDA)."""
    rc, out, err, _ = ctx.run(nranks, ["devices"], timeout=ERROR_TIMEOUT_S)
    gpu = _gpu_here() and "built without CUDA" not in out
    lines = _rank_lines(out, "")
    ok = ctx.check(rc == 0, "devices: exit %s, expected 0" % rc)
    ok &= ctx.check([r for r, _ in lines] == list(range(nranks)),
                    "devices: rank lines %r, expected ranks 0..%d in order"
                    % ([r for r, _ in lines], nranks - 1))
    for r, line in lines:
        if gpu:
            ok &= ctx.check(re.search(r"device \d+ ", line) and
                            "compute capability" in line,
                            "devices: rank %d has no GPU line: %r"
                            % (r, line))
        else:
            ok &= ctx.check("device cpu" in line and
                            "no usable GPU" in line,
                            "devices: rank %d line gives no reason: %r"
                            % (r, line))
    ok &= ctx.check(re.search(r"^# backend: %s on every rank$"
                              % ("cuda" if gpu else "cpu"), out, re.M),
                    "devices: no '# backend: ...' verdict line")
    if not ok:
        _dump(out, err)
    return gpu


def _devices_commands(ctx, nranks, gpu):
    """devices --device gpu, devices --help, a bad --device."""
    rc, out, err, _ = ctx.run(nranks, ["devices", "--device", "gpu"],
                              timeout=ERROR_TIMEOUT_S)
    if gpu:
        ctx.check(rc == 0, "devices --device gpu: exit %s, expected 0" % rc)
    else:
        ctx.check(rc == 4 and "no usable GPU" in err,
                  "devices --device gpu: exit %s, expected 4 with 'no "
                  "usable GPU'" % rc)
    rc, out, err, _ = ctx.run(1, ["devices", "--help"], timeout=60)
    ctx.check(rc == 0 and out.startswith("usage: xjoin devices"),
              "devices --help: exit %s, stdout %r" % (rc, out[:60]))
    rc, out, err, _ = ctx.run(nranks, ["devices", "--device", "tpu"],
                              timeout=ERROR_TIMEOUT_S)
    ctx.check(rc == 2 and "tpu" in err,
              "devices --device tpu: exit %s, expected 2 naming it" % rc)


def _device_run(ctx, nranks, argv, out, ref, what):
    """A job writing out; checks it against ref; returns its stdout and
    stderr, or None when it failed."""
    rc, sout, serr, _ = ctx.run(nranks, argv + ["-o", out])
    if not ctx.check(rc == 0, "%s: exit %s, expected 0" % (what, rc)):
        _dump(sout, serr)
        return None
    ctx.check(compare.compare(out, ref) == 0,
              "%s: differs from the reference" % what)
    return sout, serr


def _same_results(a, b):
    """The same datasets, shapes and bytes (topk or matrix)."""
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        if sorted(fa.keys()) != sorted(fb.keys()):
            return False
        for name in fa.keys():
            x, y = fa[name][...], fb[name][...]
            if x.shape != y.shape or x.tobytes() != y.tobytes():
                return False
    return True


def _backend_lines(ctx, text, nranks, backend, what):
    lines = _rank_lines(text, "#")
    ctx.check(len(lines) == nranks and
              all(("backend %s " % backend) in l for _, l in lines),
              "%s: rank lines do not all say 'backend %s': %r"
              % (what, backend, [l for _, l in lines]))


def case_devices(ctx, ranks):
    """Device selection on this machine: with no GPU (CI) --device gpu
    fails with exit 4 naming the reason, auto falls back to the CPU with
    one line from rank 0; with a GPU both run. auto and cpu (and gpu
    where there is one) write the same bits: topk, matrix and range."""
    nranks = ranks[0] if len(ranks) == 1 else 2
    gpu = _devices_listing(ctx, nranks)
    _devices_commands(ctx, nranks, gpu)
    write_random(ctx.path("rand.h5"))
    f = ctx.path("rand.h5")
    # the range join's reference as a CSR file, at a pair's value exactly
    q, b = load(ctx, "rand.h5", "test"), load(ctx, "rand.h5", "train")
    t = fval(np.sort(reference.matrix(q, b, "l2").ravel())[len(b) * 2])
    rref = ctx.path("range-ref.h5")
    with h5py.File(rref, "w") as h5:
        for name, arr in zip(("indptr", "indices", "distances"),
                             reference.range_join(q, b, "l2", float(t))):
            h5[name] = arr
    jobs = (("topk", ["topk", "-q", f, "-b", f, "-k", 10, "-m", "cosine"],
             ctx.ref_topk("rand.h5", "rand.h5", 10, "cosine")),
            ("matrix", ["matrix", "-q", f, "-b", f, "-m", "l2"],
             ctx.ref_matrix("rand.h5", "rand.h5", "l2")),
            ("range", ["range", "-q", f, "-b", f, "-m", "l2", "-t", t],
             rref))
    for name, argv, ref in jobs:
        what = "np%d %s" % (nranks, name)
        outs = {dev: ctx.path("%s-%s.h5" % (name, dev))
                for dev in ("auto", "cpu", "gpu")}
        got = {dev: _device_run(ctx, nranks, argv + ["--device", dev],
                                outs[dev], ref, "%s --device %s"
                                % (what, dev))
               for dev in ("auto", "cpu")}
        if got["cpu"]:
            _backend_lines(ctx, got["cpu"][0], nranks, "cpu",
                           what + " --device cpu")
            ctx.check("GPU" not in got["cpu"][1],
                      "%s --device cpu: stderr mentions GPUs: %r"
                      % (what, got["cpu"][1][-300:]))
        if got["auto"]:
            sout, serr = got["auto"]
            _backend_lines(ctx, sout, nranks, "cuda" if gpu else "cpu",
                           what + " --device auto")
            fallback = [l for l in serr.splitlines() if "no usable GPU" in l]
            ctx.check(len(fallback) == (0 if gpu else 1) and
                      all("using the CPU backend" in l for l in fallback),
                      "%s --device auto: %d 'no usable GPU' lines on "
                      "stderr, expected %d" % (what, len(fallback),
                                               0 if gpu else 1))
        if got["auto"] and got["cpu"]:
            ctx.check(_same_results(outs["auto"], outs["cpu"]),
                      "%s: --device auto and cpu outputs differ" % what)
        if gpu:
            if _device_run(ctx, nranks, argv + ["--device", "gpu"],
                           outs["gpu"], ref, what + " --device gpu") \
               and got["cpu"]:
                ctx.check(_same_results(outs["gpu"], outs["cpu"]),
                          "%s: --device gpu and cpu outputs differ" % what)
            continue
        rc, sout, serr, _ = ctx.run(nranks, argv + ["--device", "gpu", "-o",
                                                    outs["gpu"]],
                                    timeout=ERROR_TIMEOUT_S)
        ok = ctx.check(rc == 4, "%s --device gpu without a GPU: exit %s, "
                       "expected 4" % (what, rc))
        ok &= ctx.check("no usable GPU" in serr,
                        "%s --device gpu: stderr lacks 'no usable GPU'"
                        % what)
        ok &= ctx.check(not os.path.exists(outs["gpu"]) and
                        not os.path.exists(outs["gpu"] + ".partial"),
                        "%s --device gpu: wrote an output" % what)
        if not ok:
            _dump(sout, serr)


def _children(pid):
    """Process ids whose parent is pid (Linux /proc)."""
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(d))
    return kids


def _same_arrays(a, b):
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        return all(n in fa and n in fb and
                   fa[n][...].tobytes() == fb[n][...].tobytes()
                   for n in ("train", "test"))


DISKFULL_BYTES = 32 << 20


def _diskfull_round(ctx, job, ref, mnt, leave, chunk_rows, nranks=2):
    """One run whose file system fills once progress is recorded."""
    out = os.path.join(mnt, "out.h5")
    prog, part = out + ".progress", out + ".partial"
    what = "full disk (%d ranks, %d KiB left, --chunk-rows %d)" % (
        nranks, leave // 1024, chunk_rows)
    p, kids = _start_and_wait(ctx, nranks, job + ["--chunk-rows", chunk_rows,
                                             "--checkpoint-seconds", 0,
                                             "-o", out], prog)
    if not p:
        return
    try:
        tmpfs.fill(mnt, leave)
    finally:    # the run ends (or is ended) whatever the fill did
        rc, sout, serr, _ = _finish(ctx, p, "filling the disk")
    if rc == 0:
        raise Failure("%s: the run ended before the disk filled; give it "
                      "more work" % what)
    errs = [ln for ln in serr.splitlines() if ln.startswith("xjoin: ")
            and "error" in ln]
    done = _progress_rows(prog)
    ctx.check(rc == 4 and len(errs) == 1 and "resource error" in errs[0],
              "%s: exit %s, messages %s; expected 4 and one resource "
              "error" % (what, rc, errs))
    ctx.check(not os.path.exists(out) and os.path.exists(part) and
              done > 0, "%s: expected no output, the partial file and a "
              "record with rows done (%d)" % (what, done))
    ctx.check(errs and ("probably full" in errs[0] or
                        "No space left" in errs[0]),
              "%s: the message does not say the disk is full: %s"
              % (what, errs))
    ctx.check(errs and (" %d of " % done) in errs[0],
              "%s: the message does not name the %d recorded rows: %s"
              % (what, done, errs))
    with h5py.File(part, "r") as a, h5py.File(ref, "r") as b:
        same = (a["distances"][:done].tobytes() ==
                b["distances"][:done].tobytes())
    ctx.check(same, "%s: the %d rows the record names differ from the "
              "reference" % (what, done))
    os.unlink(os.path.join(mnt, "filler"))
    if ctx.run_ok(2, job + ["--resume", "-o", out], what + ", --resume"):
        ctx.check(_same_results(ref, out) and not os.path.exists(prog),
                  "%s: the resumed output differs" % what)
        os.unlink(out)


def case_diskfull(ctx, ranks):
    """The output's file system fills up in the middle of a run that has
    recorded progress: once to the last byte, once leaving 64 KiB (a
    progress record fits, a block of results does not). Each run must end
    with exit 4 and one message, keep the partial file and a record whose
    rows are on disk and right, and --resume must finish bit-identically
    once there is room."""
    mnt = ctx.path("full")
    why = tmpfs.mount(mnt, DISKFULL_BYTES)
    if why:
        raise Skip("cannot mount a tmpfs (%s)" % why)
    try:
        f = ctx.path("in.h5")
        ref = ctx.path("ref.h5")
        job = ["matrix", "-q", f + ":/test", "-b", f + ":/train", "-m", "l2"]
        # 1000 x 3000 at d = 2000: 12 MB of results in 20 query rounds of
        # 50 rows, about 1.5 GFLOP (double) each
        if not (ctx.run_ok(1, ["gen", "--rows", 3000, "--dim", 2000,
                               "--queries", 1000, "--seed", 11, "-o", f],
                           "gen input") and
                ctx.run_ok(2, job + ["-o", ref], "uninterrupted run")):
            return
        # chunks of 50 x 50 floats go through HDF5; of 64 x 64 (16 KiB)
        # those a rank covers whole go with O_DIRECT (h5out_set_direct),
        # so the full disk may fail a pwrite as well as an HDF5 write
        for leave in (0, 64 << 10):
            for chunk_rows in (50, 64):
                _diskfull_round(ctx, job, ref, mnt, leave, chunk_rows)
        # three ranks: Open MPI's OMPIO hung here (its collective writes
        # said "No space left on device" and returned success; a flush
        # then waited for ever), which ROMIO, xjoin's default, does not
        _diskfull_round(ctx, job, ref, mnt, 0, 50, nranks=3)
    finally:
        tmpfs.umount(mnt)


def self_rows(ctx, path, copy, n=2600):
    """/train of path and copy: the random base (ties, duplicates, far
    rows) followed by a copy of its first rows, so every one of those has
    an exact duplicate (distance 0, ordered by index alone)."""
    b = random_inputs()[1]
    x = np.concatenate([b, b[:n - len(b)]])
    for p in (path, copy):
        with h5py.File(p, "w") as h5:
            h5["train"] = x


# (ranks, metric, extra options): the shared rows of a chunk reach the
# symmetric path (>= 1024 of them) on 1 rank, and with chunks of 1100 rows
# (3 blocks, the last partial; a round whose 400 shared rows take the
# plain path); 2, 3 and 4 ranks split the self-join (a 1 x P grid, every
# rank scoring its share of each chunk's pairs, plan.h), also with forced
# chunks. Base chunks smaller than the query chunk score each pair once
# across chunks (cpu_topk_sym.c): blocks that cross a multiple of 512,
# two query chunks whose base chunks straddle them, and grids of 2 and 3
# ranks (query rows split, base shards: pairs once inside a rank's own
# shard only). Tiny chunks are the plain path's: the invariance case
# covers them.
SELF_JOBS = (
    (1, "l2", []), (1, "sqeuclidean", []), (1, "cosine", []), (1, "ip", []),
    (1, "l2", ["--chunk-rows", 1100]), (2, "cosine", ["--chunk-rows", 1100]),
    (3, "ip", []), (4, "l2", []),
    (1, "l2", ["--base-chunk-rows", 600]),
    (1, "cosine", ["--base-chunk-rows", 1100]),
    (1, "ip", ["--base-chunk-rows", 700]),
    (1, "sqeuclidean", ["--chunk-rows", 2000, "--base-chunk-rows", 700]),
    (2, "l2", ["--base-chunk-rows", 600]),
    (2, "l2", ["--chunk-rows", 1000, "--base-chunk-rows", 300]),
    (3, "cosine", ["--chunk-rows", 900, "--base-chunk-rows", 400]),
)


def case_selfjoin(ctx, ranks):
    """A self-join scores the pairs of a chunk's own rows once; the
    result must be the bits of the plain path, which a second copy of the
    file runs (xjoin cannot tell it holds the same rows)."""
    self_rows(ctx, ctx.path("self.h5"), ctx.path("copy.h5"))
    f, copy = ctx.path("self.h5:/train"), ctx.path("copy.h5:/train")
    plain = {}
    for metric in METRICS:
        plain[metric] = ctx.path("plain-%s.h5" % metric)
        ref = ctx.ref_topk("self.h5", "self.h5", 10, metric, None, True)
        ctx.result(1, ["topk", "-q", f, "-b", copy, "--self", "-k", 10,
                       "-m", metric], plain[metric], ref,
                   "plain path (copy) %s" % metric)
    for nranks, metric, extra in SELF_JOBS:
        if nranks not in ranks:
            continue
        what = "np%d self %s %s" % (nranks, metric, " ".join(map(str, extra)))
        out = ctx.path("self-out.h5")
        ref = ctx.ref_topk("self.h5", "self.h5", 10, metric, None, True)
        if ctx.result(nranks, ["topk", "-q", f, "-b", f, "-k", 10, "-m",
                               metric] + extra, out, ref, what):
            ctx.check(_same_results(plain[metric], out),
                      "%s: differs from the plain path" % what)
    if 1 in ranks:
        _self_resident(ctx, f, copy)
        _self_glove(ctx)
        t = threshold_for(plain["l2"], 3)
        ref = ctx.ref_topk("self.h5", "self.h5", 40, "l2", t, True)
        ctx.result(1, ["topk", "-q", f, "-b", f, "-k", 40, "-t", fval(t)],
                   ctx.path("self-t.h5"), ref, "np1 self l2 k=40 -t")
    if 2 in ranks:
        _self_interrupted(ctx)
    _self_lowp(ctx, ranks, f, plain)
    _self_matrix(ctx, ranks)
    if 2 in ranks:
        _self_matrix_interrupted(ctx)


def _gemm_flops(ctx, nranks, argv, out, what):
    """Run a job with --report-json; its GEMM FLOPs, or None."""
    rep = ctx.path("rep.json")
    if not ctx.run_ok(nranks, argv + ["-o", out, "--force",
                                      "--report-json", rep], what):
        return None
    with open(rep) as f:
        return json.load(f)["gemm_flops"]


def _self_lowp(ctx, ranks, f, plain):
    """Self-joins whose block pairs run in bf16 and int8 (where the CPU
    has them): the plain path's bits, at about half its GEMM FLOPs."""
    for p in ("bf16", "int8"):
        probe = ["topk", "-q", f, "-b", f, "-k", 1, "--device", "cpu",
                 "--precision", p, "-o", ctx.path("probe.h5"), "--force"]
        if ctx.run(1, probe)[0] != 0:
            print("precision %s not here: self-join case skipped" % p,
                  flush=True)
            continue
        for nranks, metric, extra in ((1, "l2", []), (1, "cosine", []),
                                      (1, "ip", []), (2, "sqeuclidean", []),
                                      (1, "l2", ["--base-chunk-rows", 600]),
                                      (1, "cosine",
                                       ["--base-chunk-rows", 900])):
            if nranks not in ranks:
                continue
            what = "np%d self %s --precision %s %s" % (
                nranks, metric, p, " ".join(map(str, extra)))
            out = ctx.path("self-lowp.h5")
            argv = ["topk", "-q", f, "-b", f, "-k", 10, "-m", metric,
                    "--device", "cpu", "--precision", p] + extra
            flops = _gemm_flops(ctx, nranks, argv, out, what)
            if flops is None:
                continue
            ctx.check(_same_results(plain[metric], out),
                      "%s: differs from the plain path" % what)
            base = _gemm_flops(ctx, nranks, argv[:4] + [
                f.replace("self.h5", "copy.h5"), "--self"] + argv[5:],
                ctx.path("plain-lowp.h5"), what + " (plain)")
            if base:
                ctx.check(flops < 0.7 * base, "%s: %.3g GEMM FLOPs, the "
                          "plain path %.3g: the pairs were not scored once"
                          % (what, flops, base))


def _resident_mib(log):
    """The MiB of the '# inputs resident' line of a run's log, or None."""
    m = re.search(r"# inputs resident: ([0-9.]+) MiB", log)
    return float(m.group(1)) if m else None


def _self_resident(ctx, f, copy):
    """On one rank a self-join keeps one resident copy of its rows, where
    the same job on a copy of the file keeps two."""
    with h5py.File(f.split(":")[0], "r") as h5:
        n, d = h5["train"].shape
    one = n * d * 4 / float(1 << 20)
    got = {}
    for name, base in (("self", f), ("plain", copy)):
        rc, sout, _, _ = ctx.run(1, ["topk", "-q", f, "-b", base, "-k", 10,
                                     "-o", ctx.path("res-%s.h5" % name)])
        got[name] = _resident_mib(sout) if rc == 0 else None
    ctx.check(got["self"] is not None and abs(got["self"] - one) < 0.1 and
              got["plain"] is not None and
              abs(got["plain"] - 2 * one) < 0.1,
              "resident inputs: self %s MiB, plain %s MiB; expected %.1f "
              "and %.1f" % (got["self"], got["plain"], one, 2 * one))


def _self_glove(ctx):
    """Real data: 3,000 GloVe rows of data/glove-demo.h5, cosine."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                       "..", "data", "glove-demo.h5")
    with h5py.File(src, "r") as h5:
        x = h5["train"][:3000]
    for name in ("glove.h5", "glove-copy.h5"):
        with h5py.File(ctx.path(name), "w") as h5:
            h5["train"] = x
    g, copy = ctx.path("glove.h5:/train"), ctx.path("glove-copy.h5:/train")
    ref = ctx.ref_topk("glove.h5:/train", "glove.h5:/train", 10, "cosine",
                       None, True)
    outs = (ctx.path("glove-self.h5"), ctx.path("glove-plain.h5"))
    if ctx.result(1, ["topk", "-q", g, "-b", g, "-k", 10, "-m", "cosine"],
                  outs[0], ref, "np1 self GloVe cosine") and \
            ctx.result(1, ["topk", "-q", g, "-b", copy, "--self", "-k", 10,
                           "-m", "cosine"], outs[1], ref,
                       "np1 plain path (copy) GloVe cosine"):
        ctx.check(_same_results(*outs), "GloVe: the self-join differs "
                  "from the plain path")


def _self_interrupted(ctx):
    """SIGTERM to a self-join of 11 rounds of 11 chunks (one of each
    round's symmetric) once a round is done (the signal most likely lands
    inside a round, which records its lists so far): --resume on another
    rank count finishes with the uninterrupted bits; the same with the
    pairs scored once across chunks."""
    f = ctx.path("big.h5")
    if not ctx.run_ok(1, ["gen", "--rows", 12000, "--dim", 24, "--queries",
                          1, "--seed", 7, "-o", f], "gen input"):
        return
    ref, out = ctx.path("big-ref.h5"), ctx.path("big-out.h5")
    job = ["topk", "-q", f + ":/train", "-b", f + ":/train", "-k", 10,
           "--chunk-rows", 1100, "--checkpoint-seconds", 0]
    if not ctx.run_ok(1, job + ["-o", ref], "uninterrupted self-join"):
        return
    # pairs once across chunks (3 rounds of 30 base chunks): a round
    # resumed inside it, on one rank or split over two, meets lists that
    # hold pairs past the record's base rows already
    cross = job[:7] + ["--chunk-rows", 4400, "--base-chunk-rows", 400,
                       "--checkpoint-seconds", 0]
    _self_resumed(ctx, cross, ref, out, ((1, 2), (1, 1)), "across chunks")
    _self_resumed(ctx, job, ref, out, ((1, 2), (2, 1)), "")


def _self_resumed(ctx, job, ref, out, pairs, what):
    """SIGTERM midway through job, then --resume on each pair's second
    rank count: the bits of ref."""
    for first, then in pairs:
        for x in [out] + _left_behind(out):
            if os.path.exists(x):
                os.unlink(x)
        got = _sigterm_midway(ctx, first, job + ["-o", out],
                              out + ".progress")
        if not got:
            return
        rc, sout, serr = got
        if not ctx.check(rc == 5, "self-join %s np%d: SIGTERM: exit %s"
                         % (what, first, rc)):
            _dump(sout, serr)
            return
        if ctx.run_ok(then, job + ["--resume", "-o", out],
                      "self-join %s --resume np%d -> np%d"
                      % (what, first, then)):
            ctx.check(_same_results(ref, out), "self-join %s np%d -> np%d: "
                      "resumed output differs" % (what, first, then))


# (ranks, extra options) of the self matrix: the triangle's blocks are the
# smaller chunk and at most n/16 rows rounded up to 256 (plan_tri_side:
# 256 rows for these 2,600), dealt over 2, 3 and 4 ranks in turn.
SELF_MATRIX_JOBS = (
    (1, []), (1, ["--chunk-rows", 700]), (2, ["--chunk-rows", 1000]),
    (3, ["--chunk-rows", 500]), (4, []),
)


def _self_matrix(ctx, ranks):
    """The matrix of a set with itself computes the upper triangle of
    blocks and writes each block and its transpose: the same bytes as the
    plain path (a copy of the file), every metric, several rank counts
    and block sizes, on the duplicate rows of self.h5 and on values
    spread from 1e-20 to 1e15."""
    rng = np.random.default_rng(41)
    wide = rng.standard_normal((1500, 16)) * \
        10.0 ** rng.integers(-20, 16, (1500, 1))
    wide[700:760] = wide[:60]                  # exact duplicates
    wide[800:860] = wide[:60] * (1 + 2e-7)     # near duplicates
    for name in ("wide.h5", "wide-copy.h5"):
        with h5py.File(ctx.path(name), "w") as h5:
            h5["train"] = wide.astype(np.float32)
    sets = (("self.h5", "copy.h5", METRICS), ("wide.h5", "wide-copy.h5",
                                               ("l2", "ip")))
    for name, copy, metrics in sets:
        f, c = ctx.path(name + ":/train"), ctx.path(copy + ":/train")
        for metric in metrics:
            plain = ctx.path("mplain.h5")
            if not ctx.run_ok(1, ["matrix", "-q", f, "-b", c, "-m", metric,
                                  "-o", plain, "--force"],
                              "plain matrix (copy) %s %s" % (name, metric)):
                continue
            for nranks, extra in SELF_MATRIX_JOBS:
                if nranks not in ranks:
                    continue
                what = "np%d self matrix %s %s %s" % (
                    nranks, name, metric, " ".join(map(str, extra)))
                out = ctx.path("mself.h5")
                if ctx.run_ok(nranks, ["matrix", "-q", f, "-b", f, "-m",
                                       metric, "-o", out, "--force"] + extra,
                              what):
                    ctx.check(_same_results(plain, out),
                              "%s: differs from the plain path" % what)
            # the one-buffer order (XJ_MATRIX_OVERLAP=0) and HDF5's
            # transfers (XJ_MATRIX_IO) beside the default
            if metric == "l2" and 2 in ranks:
                out = ctx.path("mself.h5")
                for var, value in (("XJ_MATRIX_OVERLAP", "0"),
                                   ("XJ_MATRIX_IO", "independent"),
                                   ("XJ_MATRIX_IO", "collective")):
                    what = "np2 self matrix %s %s=%s" % (name, var, value)
                    with env_var(var, value):
                        ok = ctx.run_ok(2, ["matrix", "-q", f, "-b", f, "-o",
                                            out, "--force", "--chunk-rows",
                                            700], what)
                    if ok:
                        ctx.check(_same_results(plain, out),
                                  "%s: differs" % what)


def _self_matrix_interrupted(ctx):
    """SIGTERM to a self matrix once a block row is final: --resume on
    another rank count and block size finishes with the same bytes."""
    f = ctx.path("mbig.h5")
    if not ctx.run_ok(1, ["gen", "--rows", 6000, "--dim", 24, "--queries",
                          1, "--seed", 8, "-o", f], "gen input"):
        return
    ref, out = ctx.path("mbig-ref.h5"), ctx.path("mbig-out.h5")
    job = ["matrix", "-q", f + ":/train", "-b", f + ":/train",
           "--checkpoint-seconds", 0]
    if not ctx.run_ok(1, job + ["--chunk-rows", 400, "-o", ref],
                      "uninterrupted self matrix"):
        return
    for first, then in ((1, 2), (2, 1)):
        for x in [out] + _left_behind(out):
            if os.path.exists(x):
                os.unlink(x)
        got = _sigterm_midway(ctx, first, job + ["--chunk-rows", 400, "-o",
                                                 out], out + ".progress")
        if not got:
            return
        rc, sout, serr = got
        if not ctx.check(rc == 5, "self matrix np%d: SIGTERM: exit %s"
                         % (first, rc)):
            _dump(sout, serr)
            return
        if ctx.run_ok(then, job + ["--chunk-rows", 700, "--resume", "-o",
                                   out],
                      "self matrix --resume np%d -> np%d" % (first, then)):
            ctx.check(_same_results(ref, out), "self matrix np%d -> np%d: "
                      "resumed output differs" % (first, then))


def _precision_line(out):
    line = [ln for ln in out.splitlines() if ln.startswith("| precision")]
    return line[0] if line else ""


def case_calibration(ctx, ranks):
    """--precision auto (the default) measures the candidates on samples
    of the job (here a 3 GFLOP job, the floor lowered by
    XJOIN_CALIB_MIN_GFLOP) and caches their models: the first run says
    'measured', the next 'cached', and under the floor the cached model
    too, else bf16 or fp32 unmeasured; a corrupt, cut or foreign cache is
    ignored with one warning and measured again (and rewritten); a cache
    that cannot be written warns once and the run goes on (so does one of
    an older format, whose models lack the rescoring); two jobs that
    measure at once leave a valid file; two ranks take rank 0's choice;
    every output has the bits of --precision fp32."""
    data = ctx.path("cal.h5")
    ctx.run_ok(1, ["gen", "--rows", 40000, "--queries", 600, "--dim", 64,
                   "--seed", 5, "-o", data], "gen")
    job = ["topk", "-q", data, "-b", data, "-k", 10, "--device", "cpu"]
    ref = ctx.path("fp32.h5")
    ctx.run_ok(1, job + ["--precision", "fp32", "-o", ref], "fp32 reference")
    cache = ctx.path("cache")
    cfile = os.path.join(cache, "precision.ini")
    saved = os.environ.get("XJOIN_CACHE_DIR")
    os.environ["XJOIN_CACHE_DIR"] = cache
    os.environ["XJOIN_CALIB_MIN_GFLOP"] = "1"   # a 3 GFLOP job measured

    def auto(what, nranks=1, expect=None, warn=None):
        """The run's precision line."""
        out = ctx.path("auto.h5")
        rc, sout, serr, _ = ctx.run(nranks, job + ["-o", out, "--force"])
        if not ctx.check(rc == 0, "%s: exit %s" % (what, rc)):
            _dump(sout, serr)
            return
        line = _precision_line(sout)
        print(line, flush=True)
        if expect:
            ctx.check(expect in line, "%s: precision line %r lacks %r"
                      % (what, line, expect))
        warns = [ln for ln in serr.splitlines() if "warning" in ln]
        if warn:
            ctx.check(len(warns) == 1 and warn in warns[0],
                      "%s: warnings %r, expected one with %r"
                      % (what, warns, warn))
        else:
            ctx.check(not warns, "%s: warnings %r" % (what, warns))
        ctx.check(_same_results(ref, out), "%s: output differs from fp32"
                  % what)
        return line

    try:
        line = auto("first run", expect="measured the fastest") or ""
        # every candidate has a prediction or was left out as slower on
        # the sample; fp32 is one everywhere
        m = re.search(r"measured the fastest for this job in [0-9.]+ s "
                      r"\(predicted ([^;)]*)(?:; over [0-9.]+x in the "
                      r"sample: ([^)]*))?\)", line)
        named = (re.findall(r"([a-z0-9-]+) [0-9.e+-]+", m.group(1)) +
                 (m.group(2) or "").split(", ")) if m else []
        ctx.check("fp32" in named, "first run: fp32 neither predicted nor "
                  "left out in %r" % line)
        ctx.check(os.path.exists(cfile), "no cache file written")
        auto("second run", expect="cached model")
        # under the floor: the cached model, never a measurement
        os.environ["XJOIN_CALIB_MIN_GFLOP"] = "100"
        auto("small job, cached", expect="cached model")
        os.environ["XJOIN_CACHE_DIR"] = ctx.path("empty-cache")
        auto("small job, no cache", expect="is not measured")
        ctx.check(not os.path.exists(ctx.path("empty-cache")),
                  "a small job measured and wrote a cache")
        os.environ["XJOIN_CACHE_DIR"] = cache
        os.environ["XJOIN_CALIB_MIN_GFLOP"] = "1"
        # one thread a rank: another key (threads are part of it)
        auto("two ranks", nranks=2, expect="auto: ")
        with open(cfile) as f:
            good = f.read()
        bad = {
            "cut short": good[:len(good) // 2],
            "foreign": "[job]\nk = 10\n",
            "binary": "\x00\x01\xff garbage\n" * 4,
            "tampered": good.replace(".key = cpu", ".key = cpx"),
            "older format": good.replace("format = 4", "format = 3"),
            "empty": "",
        }
        for name, text in bad.items():
            with open(cfile, "w", errors="replace") as f:
                f.write(text)
            auto("%s cache" % name, expect="measured the fastest",
                 warn="ignored")
            with open(cfile) as f:
                ctx.check("[end]" in f.read(), "%s cache not rewritten"
                          % name)
        # a cache that cannot be written: its folder is a file
        with open(ctx.path("plain"), "w") as f:
            f.write("not a folder\n")
        os.environ["XJOIN_CACHE_DIR"] = ctx.path("plain")
        auto("unwritable cache", expect="measured the fastest",
             warn="not saved")
        # two jobs measuring at once into one empty cache
        os.environ["XJOIN_CACHE_DIR"] = ctx.path("both")
        procs = [ctx.start(1, job + ["-o", ctx.path("c%d.h5" % i),
                                     "--force"]) for i in range(2)]
        for i, p in enumerate(procs):
            out, err = p.communicate(timeout=300)
            ctx.check(p.returncode == 0, "concurrent run %d: exit %s"
                      % (i, p.returncode))
            ctx.check(_same_results(ref, ctx.path("c%d.h5" % i)),
                      "concurrent run %d: output differs" % i)
        auto("after concurrent writers", expect="cached model")
    finally:
        os.environ.pop("XJOIN_CALIB_MIN_GFLOP", None)
        if saved is None:
            os.environ.pop("XJOIN_CACHE_DIR", None)
        else:
            os.environ["XJOIN_CACHE_DIR"] = saved


CASES = {
    "topk_random": case_topk_random,
    "invariance": case_invariance,
    "small_shapes": case_small_shapes,
    "matrix": case_matrix,
    "realdata": case_realdata,
    "precision": case_precision,
    "errors": case_errors,
    "config": case_config,
    "types": case_types,
    "extremes": case_extremes,
    "plan": case_plan,
    "gen": case_gen,
    "interrupt": case_interrupt,
    "resume": case_resume,
    "resume_inround": case_resume_inround,
    "devices": case_devices,
    "diskfull": case_diskfull,
    "shards": shard_inputs.case_shards,
    "selfjoin": case_selfjoin,
    "calibration": case_calibration,
}


# cases that take the command line's arguments (the data files) too
CASES_WITH_ARGS = {"realdata", "precision"}


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__[__doc__.index("Cases"):])
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--np", type=int, dest="nranks",
                    help="rank count (default: the case's own, 1..4)")
    ap.add_argument("--xjoin", required=True, help="the xjoin binary")
    ap.add_argument("--mpiexec", default="mpiexec",
                    help="MPI launcher (Open MPI's mpiexec)")
    ap.add_argument("--workdir", default=None,
                    help="where the temporary folder goes (default: $TMPDIR)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the temporary folder")
    ap.add_argument("--glove", default=DEFAULT_GLOVE,
                    help="GloVe HDF5 for realdata (default %(default)s)")
    ap.add_argument("--fashion", default=DEFAULT_FASHION,
                    help="Fashion-MNIST idx folder (default %(default)s)")
    ap.add_argument("--einval-shim", default=None,
                    help="LD_PRELOAD library refusing O_DIRECT writes "
                    "(direct_einval.c): the matrix case's fallback check")
    args = ap.parse_args()
    if not os.access(args.xjoin, os.X_OK):
        print("%s: not an executable" % args.xjoin, file=sys.stderr)
        return 1
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
    ctx = Ctx(args)
    ranks = [args.nranks] if args.nranks else [1, 2, 3, 4]
    t0 = time.time()
    try:
        if args.case in CASES_WITH_ARGS:
            CASES[args.case](ctx, ranks, args)
        else:
            CASES[args.case](ctx, ranks)
    except Skip as e:
        print("skipped: %s" % e)
        shutil.rmtree(ctx.tmp, ignore_errors=True)
        return 77
    except Failure as e:
        ctx.check(False, str(e))
    except Exception:
        traceback.print_exc()
        ctx.check(False, "the test driver raised %s" % sys.exc_info()[0])
    print("(%.1f s)" % (time.time() - t0))
    return ctx.finish(args.case + (" np%d" % args.nranks
                                   if args.nranks else ""))


if __name__ == "__main__":
    sys.exit(main())
