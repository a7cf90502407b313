"""Sharded inputs: HDF5 virtual datasets (VDS), glob patterns and lists of
shard files read as one input.

case_shards (run_cases.py's "shards" case) checks that each form gives
results bit-identical to the same rows in one plain dataset, whatever the
rank count, with float16 and float32 shards mixed. The catalogue
(catalogue.py) uses the setup_* functions below for the errors: a VDS
source missing, truncated or of another width, a VDS with unmapped rows,
a pattern matching nothing, shards of different widths.
"""

import os
import re
import signal
import subprocess
import time

import h5py
import numpy as np

import compare


SEED = 20261125
# Rows of the base per shard, and the type each shard stores.
SHARDS = ((0, 500, "<f4"), (500, 1100, "<f2"), (1100, 1531, ">f4"))
QSHARDS = ((0, 40, "<f2"), (40, 97, "<f4"))


def shard_rows(n, d, seed, shards):
    """Random rows, each shard's rows rounded to its type: the values
    every form of the input holds."""
    x = np.random.default_rng(seed).standard_normal((n, d)) * 2
    x = x.astype(np.float32)
    for a, b, t in shards:
        x[a:b] = x[a:b].astype(t).astype(np.float32)
    return x


def write_shards(folder, x, shards, name="emb-%d.h5", dset="vectors"):
    """x split into shard files under folder; returns their names."""
    os.makedirs(folder, exist_ok=True)
    names = []
    for i, (a, b, t) in enumerate(shards):
        path = os.path.join(folder, name % i)
        with h5py.File(path, "w") as h5:
            h5.create_dataset(dset, data=x[a:b].astype(t))
        names.append(path)
    return names


def write_vds(path, sources, rows, d, dset="train", shape=None):
    """A VDS of rows x d float32 over (file, dataset, row0, rows, cols)
    sources, file names as given (relative ones are relative to path).
    shape: the shape a source is recorded with (default rows x cols)."""
    layout = h5py.VirtualLayout((rows, d), dtype="f4")
    for file, name, r0, n, cols in sources:
        layout[r0:r0 + n, :cols] = h5py.VirtualSource(
            file, name, shape=shape or (n, cols))
    with h5py.File(path, "w") as h5:
        h5.create_virtual_dataset(dset, layout, fillvalue=-1.0)


def write_all(folder, d=24):
    """Plain files, shards, a VDS and lists in folder; returns specs."""
    b = shard_rows(1531, d, SEED, SHARDS)
    q = shard_rows(97, d, SEED + 1, QSHARDS)
    with h5py.File(os.path.join(folder, "plain.h5"), "w") as h5:
        h5["train"] = b
        h5["test"] = q
    write_shards(os.path.join(folder, "shards"), b, SHARDS)
    write_shards(os.path.join(folder, "qshards"), q, QSHARDS, "q-%d.h5",
                 "test")
    write_vds(os.path.join(folder, "vds.h5"),
              [("shards/emb-%d.h5" % i, "vectors", a, e - a, d)
               for i, (a, e, _) in enumerate(SHARDS)], 1531, d)
    # empty shards: a query set of none, and one inside the base list
    with h5py.File(os.path.join(folder, "empty.h5"), "w") as h5:
        h5.create_dataset("vectors", shape=(0, d), dtype="<f2")
    # a list: a comment, a blank line, names relative to the list
    with open(os.path.join(folder, "base.txt"), "w") as fh:
        fh.write("# the base, in row order\n\n")
        for i in range(len(SHARDS)):
            fh.write("shards/emb-%d.h5:/vectors\n" % i)
            if i == 0:
                fh.write("empty.h5\n")
    with open(os.path.join(folder, "queries.txt"), "w") as fh:
        for i in range(len(QSHARDS)):
            fh.write(os.path.join(folder, "qshards", "q-%d.h5") % i + "\n")
    return {"plain_q": "plain.h5:/test", "plain_b": "plain.h5:/train"}


def _attr_lines(path, name):
    with h5py.File(path, "r") as h5:
        v = h5.attrs.get(name)
    if isinstance(v, bytes):
        v = v.decode()
    return v.splitlines() if v else []


def case_shards(ctx, ranks):
    """VDS, pattern and list inputs against the plain dataset."""
    folder = ctx.tmp
    write_all(folder)
    p = ctx.path
    pattern = p("shards/emb-*.h5") + ":/vectors"
    jobs = (
        ("VDS base", "l2", p("plain.h5:/test"), p("vds.h5")),
        ("pattern base", "cosine", p("plain.h5:/test"), pattern),
        ("list queries and base", "ip", "@" + p("queries.txt"),
         "@" + p("base.txt")),
    )
    for nranks in ranks:
        for what, metric, qspec, bspec in jobs:
            ref = ctx.ref_topk("plain.h5:/test", "plain.h5:/train", 7,
                               metric)
            ctx.result(nranks, ["topk", "-q", qspec, "-b", bspec, "-k", 7,
                                "-m", metric], p("out.h5"), ref,
                       "np%d %s %s" % (nranks, what, metric))
        ref = ctx.ref_matrix("plain.h5:/test", "plain.h5:/train", "l2")
        ctx.result(nranks, ["matrix", "-q", "@" + p("queries.txt"), "-b",
                            pattern, "-m", "l2"], p("out.h5"), ref,
                   "np%d matrix, list x pattern" % nranks)
    for nranks in ranks:
        empty_queries(ctx, nranks, "@" + p("base.txt"))
    # the output records the shards in row order
    lines = _attr_lines(p("out.h5"), "base_shards")
    want = [p("shards/emb-%d.h5") % i + ":/vectors"
            for i in range(len(SHARDS))]
    ctx.check(lines == want, "base_shards attribute %r, expected %r"
              % (lines, want))
    with h5py.File(p("out.h5"), "r") as h5:
        count = h5.attrs.get("base_shard_count")
    ctx.check(count == len(SHARDS), "base_shard_count %r" % count)
    if 1 in ranks:
        resume_changed_shard(ctx)
    rc, out, err, _ = ctx.run(1, ["inspect", p("out.h5")])
    ctx.check(rc == 0 and "| base shards " in out and
              "| 3: %s .. %s" % (want[0], want[-1]) in out,
              "inspect shows the shards: rc %s\n%s%s" % (rc, out, err))
    # the job table lists a VDS's sources and a pattern's shards
    rc, out, err, _ = ctx.run(1, ["plan", "-q", "@" + p("queries.txt"),
                                  "-b", p("vds.h5"), "-k", 3])
    ctx.check(rc == 0 and "# query: 2 shards" in out and
              "# base: 3 virtual dataset sources" in out and
              "rows [500, 1100), columns [0, 24): " in out and
              "shards/emb-1.h5:/vectors" in out,
              "plan shows the sources: rc %s\n%s%s" % (rc, out, err))


def empty_queries(ctx, nranks, bspec):
    """No query rows: an empty, valid result of the job's layout."""
    for argv, shapes in (
            (["topk", "-k", 6], {"neighbors": ((0, 6), "int64"),
                                 "distances": ((0, 6), "float32")}),
            (["matrix"], {"distances": ((0, 1531), "float32")})):
        out = ctx.path("empty-out.h5")
        what = "np%d %s of no queries" % (nranks, argv[0])
        if os.path.exists(out):
            os.remove(out)
        if not ctx.run_ok(nranks, argv + ["-q", ctx.path("empty.h5"),
                                          "-b", bspec, "-o", out], what):
            continue
        with h5py.File(out, "r") as h5:
            got = {k: (h5[k].shape, h5[k].dtype.name) for k in h5}
            rows = h5.attrs.get("query_rows")
        ctx.check(got == shapes and rows == 0, "%s: datasets %r, "
                  "query_rows %r, expected %r and 0" % (what, got, rows,
                                                        shapes))


def _rows_done(path):
    try:
        with open(path) as fh:
            m = re.search(r"^rows_done = (\d+) of", fh.read(), re.M)
    except OSError:
        return -1
    return int(m.group(1)) if m else -1


def resume_changed_shard(ctx):
    """An interrupted run over a pattern: --resume after one shard's value
    changed is refused; with the shard restored it finishes, bit-identical
    to a run over the plain dataset."""
    folder = ctx.path("rs")
    shards = ((0, 6000, "<f4"), (6000, 9000, "<f2"), (9000, 16000, "<f4"))
    b = shard_rows(16000, 32, SEED + 2, shards)
    names = write_shards(folder, b, shards, "s-%d.h5", "x")
    plain, out = ctx.path("rs-plain.h5"), ctx.path("rs-out.h5")
    with h5py.File(plain, "w") as h5:
        h5["train"] = b
        h5["test"] = b[:1500]
    job = ["topk", "-q", plain + ":/test", "-b", "-", "-k", 10]
    if not ctx.run_ok(1, job[:4] + [plain] + job[5:] + ["-o", ctx.path(
            "rs-ref.h5")], "resume: plain run"):
        return
    job[4] = os.path.join(folder, "s-*.h5") + ":/x"
    argv = job + ["--chunk-rows", 40, "--checkpoint-seconds", 0, "-o", out]
    # one rank without mpiexec (a singleton): the signal goes to xjoin
    print("[singleton] xjoin %s" % " ".join(map(str, argv)), flush=True)
    p = subprocess.Popen([ctx.xjoin] + [str(a) for a in argv],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         env=ctx.env(1), cwd=ctx.tmp)
    t0 = time.time()
    while p.poll() is None and time.time() - t0 < 60 and \
            _rows_done(out + ".progress") <= 0:
        time.sleep(0.05)
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    p.communicate(timeout=60)
    if not ctx.check(p.returncode == 5, "resume: interrupted run exit %s, "
                     "expected 5" % p.returncode):
        return
    with open(names[1], "rb") as fh:
        saved = fh.read()
    with h5py.File(names[1], "r+") as h5:
        h5["x"][17, 3] += 1
    rc, sout, serr, _ = ctx.run(1, job + ["--resume", "-o", out])
    ctx.check(rc == 3 and "changed since the interrupted run" in serr,
              "resume with a changed shard: exit %s, expected 3\n%s"
              % (rc, serr))
    with open(names[1], "wb") as fh:
        fh.write(saved)
    if ctx.run_ok(1, job + ["--resume", "-o", out], "resume: shard back"):
        ctx.check(compare.compare(out, ctx.path("rs-ref.h5")) == 0,
                  "resumed pattern run differs from the plain run")


# ------------------------------------------------------------ catalogue
# setup(ctx, folder) functions: inputs in the case's own folder.

def _catalogue_shards(folder, d=16, widths=None):
    x = shard_rows(300, d, SEED, ((0, 100, "<f4"), (100, 300, "<f2")))
    names = write_shards(os.path.join(folder, "shards"), x,
                         ((0, 100, "<f4"), (100, 300, "<f2")))
    if widths:   # rewrite shard 1 with another width
        with h5py.File(names[1], "w") as h5:
            h5["vectors"] = np.ones((200, widths), np.float32)
    return names


def _vds(folder, d=16, shape=None):
    write_vds(os.path.join(folder, "vds.h5"),
              [("shards/emb-0.h5", "vectors", 0, 100, d),
               ("shards/emb-1.h5", "vectors", 100, 200, d)], 300, d,
              shape=shape)


def setup_vds_missing(ctx, folder):
    names = _catalogue_shards(folder)
    _vds(folder)
    os.remove(names[1])


def setup_vds_truncated(ctx, folder):
    names = _catalogue_shards(folder)
    _vds(folder)
    size = os.path.getsize(names[1])
    with open(names[1], "r+b") as fh:
        fh.truncate(size // 2)


def setup_vds_width(ctx, folder):
    _catalogue_shards(folder, widths=8)
    _vds(folder)


def setup_vds_gap(ctx, folder):
    _catalogue_shards(folder)
    write_vds(os.path.join(folder, "vds.h5"),
              [("shards/emb-0.h5", "vectors", 0, 100, 16)], 300, 16)


def setup_shards(ctx, folder):
    _catalogue_shards(folder)


def setup_shard_width(ctx, folder):
    _catalogue_shards(folder, widths=8)


def setup_list_missing(ctx, folder):
    _catalogue_shards(folder)
    with open(os.path.join(folder, "list.txt"), "w") as fh:
        fh.write("shards/emb-0.h5\nshards/emb-7.h5\n")


def setup_list_empty(ctx, folder):
    with open(os.path.join(folder, "list.txt"), "w") as fh:
        fh.write("# nothing yet\n\n")


def base_in_case(spec):
    """topk of the good queries (16 columns) against spec in the case
    folder ('@' + name for a list)."""
    def build(ctx, folder):
        at = "@" if spec.startswith("@") else ""
        return ["topk", "-q", ctx.inputs.good, "-b",
                at + os.path.join(folder, spec.lstrip("@")), "-k", 5]
    return build


def catalogue_cases(Case, INPUT):
    return [
        Case("VDS source missing", INPUT,
             r"vds\.h5:/train: virtual dataset source 1: \S*shards/"
             r"emb-1\.h5: cannot open input: No such file",
             base_in_case("vds.h5"), setup=setup_vds_missing),
        Case("VDS source truncated", INPUT,
             r"vds\.h5:/train: virtual dataset source 1: \S*shards/"
             r"emb-1\.h5: cannot open \(truncated",
             base_in_case("vds.h5"), setup=setup_vds_truncated),
        Case("VDS source of another width", INPUT,
             r"virtual dataset source 1: \S*emb-1\.h5:/vectors: is 200 x "
             r"8, the virtual dataset maps it as 200 x 16",
             base_in_case("vds.h5"), setup=setup_vds_width),
        Case("VDS with unmapped rows", INPUT,
             r"vds\.h5:/train: its 1 sources map 1600 of its 300 x 16 "
             r"values", base_in_case("vds.h5"), setup=setup_vds_gap),
        Case("pattern matches nothing", INPUT,
             r"pattern \S*shards/nosuch-\*\.h5 matches no file",
             base_in_case("shards/nosuch-*.h5"), setup=setup_shards),
        Case("shards of different widths", INPUT,
             r"shard \S*shards/emb-1\.h5:/vectors has 8 columns, shard "
             r"\S*emb-0\.h5:/vectors has 16",
             base_in_case("shards/emb-*.h5"), setup=setup_shard_width),
        Case("list names a missing shard", INPUT,
             r"list\.txt: shard 1: \S*shards/emb-7\.h5: cannot open input",
             base_in_case("@list.txt"), setup=setup_list_missing),
        Case("list names no file", INPUT, r"list \S*list\.txt names no file",
             base_in_case("@list.txt"), setup=setup_list_empty),
    ]
