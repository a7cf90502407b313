#!/usr/bin/python3
"""Failure catalogue: bad inputs and environments, each under 2 ranks.

    catalogue.py --xjoin PATH --mpiexec PATH [--workdir DIR] [--keep]
                 [--only REGEX] [--jobs N] [--list]

Every case builds its inputs or environment, runs one xjoin job under
`mpiexec -np 2` and expects it to fail fast and cleanly:

  - the exit code it names (2 usage, 3 input, 4 resource);
  - within its time limit (a hang is a failure: the job's process group
    and every rank are killed);
  - exactly one error line on stderr, matching the case's pattern, which
    names the file, dataset, row, option or budget at fault;
  - no file at the output path, and no OUT.partial or OUT.progress: the
    case's folder holds exactly what it held before, byte for byte (so an
    existing output is left as it was);
  - no rank process left running (each job's processes carry a tag in
    their environment, looked for in /proc afterwards);
  - no input file changed.

The disk-full case mounts a 256 KiB tmpfs for the output (root); where
mounting is not allowed it runs under `ulimit -f` instead, like the file
size limit case. `--list` prints every case with its exit code and
pattern. Inputs are small and made once. Failing jobs spend most of their
time in MPI start-up and tear-down, idle, so a few run at once (--jobs).
"""

import argparse
import concurrent.futures
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpitmp  # noqa: E402
import shard_inputs  # noqa: E402
import tmpfs  # noqa: E402

NRANKS = 2
CASE_TIMEOUT_S = 20
SEED = 20240611
TAG_VAR = "XJ_CATALOGUE_TAG"
# xjoin's error lines ("xjoin: input error: ..."), and fatal aborts
ERROR_LINE = re.compile(r"xjoin: (\w+ )?error: |xjoin: fatal")

USAGE, INPUT, RESOURCE = 2, 3, 4
EXIT_NAMES = {USAGE: "usage error", INPUT: "input error",
              RESOURCE: "resource error"}

# A file system of this size holds no matrix output of the wide inputs.
TMPFS_BYTES = 256 * 1024
ULIMIT_BLOCKS = 256          # ulimit -f counts 1024-byte blocks


# ------------------------------------------------------------- inputs

class Inputs:
    """Every input file of the catalogue, made once in one folder."""

    def __init__(self, folder):
        self.dir = folder
        os.makedirs(folder)
        rng = np.random.default_rng(SEED)
        self.q = rng.standard_normal((40, 16)).astype(np.float32)
        self.b = rng.standard_normal((300, 16)).astype(np.float32)
        self.good = self.path("good.h5")
        with h5py.File(self.good, "w") as h5:
            h5["test"] = self.q
            h5["train"] = self.b
        self.make_malformed(rng)
        self.make_shapes_and_types()
        self.make_values()
        self.make_absurd()
        self.make_huge_row()
        self.make_wide(rng)
        self.make_deep(rng)
        self.copy_fuzz_findings()

    def path(self, name):
        return os.path.join(self.dir, name)

    def make_malformed(self, rng):
        with open(self.path("random.h5"), "wb") as fh:
            fh.write(rng.bytes(64 * 1024))
        open(self.path("empty.h5"), "wb").close()
        with open(self.good, "rb") as fh:
            whole = fh.read()
        # cut in the superblock, in the data, and one byte short of the end
        for name, size in (("cut-superblock.h5", 40),
                           ("cut-data.h5", len(whole) * 6 // 10),
                           ("cut-last-byte.h5", len(whole) - 1)):
            with open(self.path(name), "wb") as fh:
                fh.write(whole[:size])
        # a valid signature, then noise
        with open(self.path("signature-only.h5"), "wb") as fh:
            fh.write(whole[:8] + rng.bytes(4096))
        # gzip chunks of 50 rows; the chunk of rows 150..199 is overwritten
        corrupt = self.path("corrupt-chunk.h5")
        with h5py.File(corrupt, "w") as h5:
            h5["test"] = self.q
            h5.create_dataset("train", data=self.b, chunks=(50, 16),
                              compression="gzip")
            info = h5["train"].id.get_chunk_info_by_coord((150, 0))
        with open(corrupt, "r+b") as fh:
            fh.seek(info.byte_offset + 8)
            fh.write(b"\xa5" * min(64, info.size - 8))

    def make_shapes_and_types(self):
        with h5py.File(self.path("shapes.h5"), "w") as h5:
            h5["vec1d"] = self.b[:, 0]
            h5["cube"] = self.b[:288].reshape(18, 16, 16)
            h5.create_dataset("strings", data=np.array(
                [["ab", "cd"]] * 4, dtype=h5py.string_dtype()))
            pair = np.dtype([("x", "<f4"), ("y", "<f4")])
            h5.create_dataset("compound", data=np.zeros((30, 16), pair))
            h5.create_dataset("norows", shape=(0, 16), dtype=np.float32)
            h5.create_dataset("nocols", shape=(30, 0), dtype=np.float32)
            h5["d17"] = np.ones((30, 17), dtype=np.float32)
        with h5py.File(self.path("two.h5"), "w") as h5:
            h5["alpha"] = self.q
            h5["beta"] = self.b

    def make_values(self):
        with h5py.File(self.path("values.h5"), "w") as h5:
            qn = self.q.copy()
            qn[17, 5] = np.nan
            h5["qnan"] = qn
            bi = self.b.copy()
            bi[233, 11] = np.inf
            h5["binf"] = bi
            big = self.b.astype(np.float64)
            big[77, 3] = 1e300
            h5["bhuge"] = big

    def make_absurd(self):
        with h5py.File(self.path("absurd.h5"), "w") as h5:
            h5["test"] = self.q
            # 10^12 rows declared, one chunk written
            d = h5.create_dataset("trillion", shape=(10 ** 12, 16),
                                  chunks=(64, 16), dtype=np.float32)
            d[0:64] = self.b[:64]
            # one row of 2^31 columns, declared, never written
            h5.create_dataset("wide_empty", shape=(1, 2 ** 31),
                              chunks=(1, 2 ** 20), dtype=np.float32)

    def make_huge_row(self):
        """1 x 2^31 uint8 rows, every chunk stored (16 MiB of zeros
        compress to 16 KiB): the file is 2 MiB, but a row read as
        float32 is 8 GiB, which the job's budget does not hold."""
        cols, chunk = 2 ** 31, 2 ** 24
        blob = zlib.compress(bytes(chunk), 9)
        with h5py.File(self.path("huge-row.h5"), "w") as h5:
            for name in ("test", "train"):
                d = h5.create_dataset(name, shape=(1, cols), dtype=np.uint8,
                                      chunks=(1, chunk), compression="gzip")
                for c0 in range(0, cols, chunk):
                    d.id.write_direct_chunk((0, c0), blob)

    def make_deep(self, rng):
        """2 rows of 70,000 columns: past int8's exact int32 sums."""
        with h5py.File(self.path("deep.h5"), "w") as h5:
            x = rng.standard_normal((2, 70000)).astype(np.float32)
            h5["test"] = x
            h5["train"] = x

    def make_wide(self, rng):
        """Its matrix output, 200 x 4000 float32 (3.2 MB), is more than
        the small file system or file size limit of the disk cases."""
        with h5py.File(self.path("wide.h5"), "w") as h5:
            h5["test"] = rng.standard_normal((200, 8)).astype(np.float32)
            h5["train"] = rng.standard_normal((4000, 8)).astype(np.float32)

    def copy_fuzz_findings(self):
        """Headers that once crashed HDF5 or made it allocate gigabytes
        (tests/fuzz/regress/h5in): refused before any read."""
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "..", "fuzz", "regress", "h5in")
        for name in ("chunk-3gib-allocation.h5",
                     "scaleoffset-after-deflate.h5"):
            shutil.copy(os.path.join(src, name), self.path(name))
        # crashes inside libhdf5 itself (SIGSEGV): xjoin's guard names it
        known = os.path.join(src, "..", "..", "known-hdf5", "h5in",
                             "local-heap-null-read.h5")
        shutil.copy(known, self.path("heap-crash.h5"))

    def digests(self):
        return snapshot(self.dir)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def snapshot(folder):
    """{relative path: sha256, or 'dir'} of everything under folder."""
    seen = {}
    for root, dirs, files in os.walk(folder):
        for d in dirs:
            rel = os.path.relpath(os.path.join(root, d), folder)
            seen[rel] = "dir"
        for f in files:
            p = os.path.join(root, f)
            rel = os.path.relpath(p, folder)
            seen[rel] = sha256(p) if os.path.isfile(p) else "special"
    return seen


# ------------------------------------------------------------- cases

class Case:
    """One bad job, run in a folder of its own (its working directory).

    build(ctx, folder) returns the words after `xjoin`; `-o OUT` is added
    unless out_arg is False, OUT being folder/out.h5 or out(ctx, folder).
    setup(ctx, folder) prepares the folder or environment before, and may
    return a note for the log; cleanup(ctx, folder) runs after, whatever
    happened. wrap is a bash line that runs "$@" (the mpiexec command) in
    a changed environment. outside lists paths beyond the folder that
    must not exist afterwards."""

    def __init__(self, name, code, pattern, build, out=None, out_arg=True,
                 wrap=None, timeout=CASE_TIMEOUT_S, setup=None,
                 cleanup=None, outside=()):
        self.name = name
        self.code = code
        self.pattern = pattern
        self.build = build
        self.out = out
        self.out_arg = out_arg
        self.wrap = wrap
        self.timeout = timeout
        self.setup = setup
        self.cleanup = cleanup
        self.outside = outside


class Ctx:
    def __init__(self, args):
        self.xjoin = os.path.abspath(args.xjoin)
        self.mpiexec = args.mpiexec
        self.tmp = tempfile.mkdtemp(prefix="xjoin-catalogue-",
                                    dir=args.workdir)
        self.inputs = None

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def env(self, tag):
        env = dict(os.environ)
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
        env["OMP_NUM_THREADS"] = "1"
        env["OPENBLAS_NUM_THREADS"] = "1"
        env["OMP_WAIT_POLICY"] = "passive"
        env[TAG_VAR] = tag
        return mpitmp.env(env)

    def command(self, argv):
        return [self.mpiexec, "--oversubscribe", "--bind-to", "none",
                "-np", str(NRANKS), self.xjoin] + [str(a) for a in argv]


def _tagged(tag):
    """Processes whose environment holds TAG_VAR=tag."""
    needle = ("%s=%s\0" % (TAG_VAR, tag)).encode()
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % d, "rb") as fh:
                if needle in fh.read():
                    found.append(int(d))
        except OSError:
            continue
    return found


def _kill(p, tag):
    """End a job whole: its process group, then anything still tagged
    (Open MPI puts ranks in process groups of their own)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
        for pid in _tagged(tag):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        try:
            p.wait(timeout=3)
        except subprocess.TimeoutExpired:
            pass


def run_case(ctx, index, case):
    """Run one case; returns (list of failures, summary text)."""
    folder = ctx.path("cases", "%02d-%s" % (index, re.sub(r"\W+", "-",
                                                          case.name)))
    os.makedirs(folder)
    try:
        note = case.setup(ctx, folder) if case.setup else None
        return run_in(ctx, index, case, folder, note)
    except Exception as e:   # a broken case fails alone, loudly
        return ["the test driver raised %r" % e], "[FAIL] %s" % case.name
    finally:
        if case.cleanup:
            case.cleanup(ctx, folder)


def run_in(ctx, index, case, folder, note):
    out = case.out(ctx, folder) if case.out else os.path.join(folder,
                                                              "out.h5")
    argv = case.build(ctx, folder)
    if case.out_arg:
        argv = argv + ["-o", out]
    before = snapshot(folder)
    existed = {p for p in (out, out + ".partial", out + ".progress")
               if os.path.lexists(p)}
    tag = "%d-%d" % (os.getpid(), index)
    cmd = ctx.command(argv)
    if case.wrap:
        cmd = ["/bin/bash", "-c", case.wrap, "bash"] + cmd
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, errors="replace", cwd=folder,
                         env=ctx.env(tag), start_new_session=True)
    try:
        sout, serr = p.communicate(timeout=case.timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        _kill(p, tag)
        sout, serr = p.communicate()
        rc = "timeout"
    dt = time.time() - t0
    bad = []
    # ranks may take a moment to leave after mpiexec has returned
    strays = _tagged(tag)
    for _ in range(20):
        if not strays:
            break
        time.sleep(0.1)
        strays = _tagged(tag)
    if strays:
        bad.append("rank processes left running: %s" % strays)
        _kill(p, tag)
    # before the cleanup, which may unmount what the job wrote to
    after = snapshot(folder)
    bad += check_result(case, rc, serr, out, existed, before, after)
    lines = [x for x in serr.splitlines() if ERROR_LINE.match(x)]
    shown = " ".join(str(a) for a in argv).replace(ctx.tmp + os.sep, "")
    summary = "[%s] %s -> %s in %.1f s%s\n    xjoin %s\n    %s" % (
        "ok" if not bad else "FAIL", case.name, rc, dt,
        " (%s)" % note if note else "", shown,
        lines[0] if lines else "(no error line on stderr)")
    if bad:
        summary += "\n" + "".join("    FAILED: %s\n" % b for b in bad)
        summary += "--- stderr (tail) ---\n%s\n--- stdout (tail) ---\n%s" \
                   % (serr[-3000:], sout[-1500:])
    return bad, summary


def check_result(case, rc, serr, out, existed, before, after):
    bad = []
    if rc == "timeout":
        bad.append("no exit within %d s (killed)" % case.timeout)
    elif rc != case.code:
        bad.append("exit %s, expected %d" % (rc, case.code))
    # one message, from rank 0, of the expected kind
    head = "xjoin: %s: " % EXIT_NAMES[case.code]
    errors = [x for x in serr.splitlines() if ERROR_LINE.match(x)]
    if len(errors) != 1:
        bad.append("%d error lines on stderr, expected 1" % len(errors))
    mine = [x for x in errors if x.startswith(head)]
    if not mine:
        bad.append("no line starting %r" % head)
    elif not re.search(case.pattern, mine[0]):
        bad.append("message does not match /%s/" % case.pattern)
    for p in (out, out + ".partial", out + ".progress"):
        if os.path.lexists(p) and p not in existed:
            bad.append("%s exists after the run" % p)
    for p in case.outside:
        if os.path.lexists(p):
            bad.append("%s exists after the run" % p)
    if before != after:
        added = sorted(set(after) - set(before))
        gone = sorted(set(before) - set(after))
        changed = sorted(k for k in before
                         if k in after and before[k] != after[k])
        bad.append("the case folder changed: added %s, removed %s, "
                   "changed %s" % (added, gone, changed))
    return bad


# Builders. Each takes (ctx, folder) and returns argv.

def topk(q=None, b=None, k=5, *extra):
    """topk over inputs named in the inputs folder (None: good.h5;
    '@case/NAME': NAME in the case folder)."""
    def build(ctx, folder):
        return ["topk", "-q", _spec(ctx, folder, q), "-b",
                _spec(ctx, folder, b), "-k", k] + list(extra)
    return build


def matrix(q=None, b=None, *extra):
    def build(ctx, folder):
        return ["matrix", "-q", _spec(ctx, folder, q), "-b",
                _spec(ctx, folder, b)] + list(extra)
    return build


def range_join(t, *extra):
    """range over good.h5 at threshold t."""
    def build(ctx, folder):
        return ["range", "-q", _spec(ctx, folder, None), "-b",
                _spec(ctx, folder, None), "-t", t] + list(extra)
    return build


def argv_of(*words):
    """A literal command line; '@good' stands for the good input."""
    def build(ctx, folder):
        return [ctx.inputs.good if w == "@good" else w for w in words]
    return build


def _spec(ctx, folder, spec):
    if spec is None:
        return ctx.inputs.good
    if spec.startswith("@case/"):
        return os.path.join(folder, spec[len("@case/"):])
    return ctx.inputs.path(spec)


def with_ini(text, extra=()):
    """Write job.ini in the case folder (text may use {good}) and run
    topk -c job.ini."""
    def build(ctx, folder):
        path = os.path.join(folder, "job.ini")
        with open(path, "w") as fh:
            fh.write(text.format(good=ctx.inputs.good))
        return ["topk", "-c", path] + [ctx.inputs.good if w == "@good"
                                       else w for w in extra]
    return build


def existing_output(ctx, folder):
    with open(os.path.join(folder, "out.h5"), "wb") as fh:
        fh.write(b"an older result: must stay byte-identical\n" * 50)


def output_folder_is_file(ctx, folder):
    with open(os.path.join(folder, "plain"), "w") as fh:
        fh.write("a file, not a folder\n")


def output_is_folder(ctx, folder):
    os.makedirs(os.path.join(folder, "out.h5"))
    with open(os.path.join(folder, "out.h5", "keep.txt"), "w") as fh:
        fh.write("inside the folder named like the output\n")


def input_copy(ctx, folder):
    shutil.copy(ctx.inputs.good, os.path.join(folder, "in.h5"))


def make_fifo(ctx, folder):
    """Nobody writes to it: an open() to read it would wait forever."""
    os.mkfifo(os.path.join(folder, "pipe.h5"))


def mount_tmpfs(ctx, folder):
    """A 256 KiB file system for the output; when mounting is not
    allowed, the same job runs under ulimit -f instead (see wrap)."""
    why = tmpfs.mount(os.path.join(folder, "small"), TMPFS_BYTES)
    if not why:
        return "tmpfs of %d KiB" % (TMPFS_BYTES // 1024)
    with open(os.path.join(folder, "no-tmpfs"), "w") as fh:
        fh.write(why)
    return "no tmpfs (%s): ulimit -f %d instead" % (why, ULIMIT_BLOCKS)


def umount_tmpfs(ctx, folder):
    tmpfs.umount(os.path.join(folder, "small"))


# Under ulimit -f, Open MPI's start-up would pass the limit itself with
# its shared-memory files (the PMIx store, the vader segments) before
# xjoin ignores SIGXFSZ: hash store and TCP between the ranks instead.
ULIMIT_LINE = ("ulimit -f %d || exit 99; export PMIX_MCA_gds=hash "
               "OMPI_MCA_btl=self,tcp; " % ULIMIT_BLOCKS)
ULIMIT_WRAP = ULIMIT_LINE + 'exec "$@"'
# The tmpfs case: ulimit -f only when no tmpfs could be mounted.
TMPFS_WRAP = ('if [ -e "$PWD/no-tmpfs" ]; then %s fi; exec "$@"'
              % ULIMIT_LINE)

# A folder that root cannot write either (chmod does not stop root):
# procfs refuses new files.
PROC_OUT = "/proc/xjoin-catalogue-out.h5"


def cases():
    return [
        # --- malformed and truncated HDF5 (3: input)
        Case("missing input file", INPUT, r"nosuch\.h5: cannot open",
             topk("nosuch.h5")),
        Case("input is a named pipe", INPUT, r"pipe\.h5.*named pipe",
             topk("@case/pipe.h5"), setup=make_fifo),
        Case("random bytes named .h5", INPUT, r"random\.h5.*not an HDF5",
             topk("random.h5")),
        Case("empty file", INPUT, r"empty\.h5.*not an HDF5",
             topk(None, "empty.h5")),
        Case("truncated in the superblock", INPUT,
             r"cut-superblock\.h5: cannot open", topk("cut-superblock.h5")),
        Case("truncated in the data", INPUT, r"cut-data\.h5: .*truncated",
             topk("cut-data.h5")),
        Case("truncated by one byte", INPUT,
             r"cut-last-byte\.h5: .*truncated",
             topk(None, "cut-last-byte.h5")),
        Case("HDF5 signature then noise", INPUT,
             r"signature-only\.h5: cannot open",
             topk("signature-only.h5")),
        Case("corrupt gzip chunk", INPUT,
             r"corrupt-chunk\.h5:/train: rows \[150, ",
             topk(None, "corrupt-chunk.h5")),
        # --- wrong types and ranks of datasets (3: input)
        Case("no such dataset", INPUT, r"shapes\.h5:/nosuch: no such",
             topk("shapes.h5:/nosuch")),
        Case("string dataset", INPUT, r"shapes\.h5:/strings.*string",
             topk("shapes.h5:/strings")),
        Case("compound dataset", INPUT,
             r"shapes\.h5:/compound.*compound",
             topk(None, "shapes.h5:/compound")),
        Case("1-D dataset", INPUT, r"shapes\.h5:/vec1d.*1-D",
             topk("shapes.h5:/vec1d")),
        Case("3-D dataset", INPUT, r"shapes\.h5:/cube.*3-D",
             topk(None, "shapes.h5:/cube")),
        Case("zero rows in the base", INPUT,
             r"base: \S*shapes\.h5:/norows: has 0 rows",
             topk(None, "shapes.h5:/norows")),
        Case("zero columns", INPUT, r"shapes\.h5:/nocols.*0 columns",
             topk(None, "shapes.h5:/nocols")),
        Case("several 2-D datasets, none named", INPUT,
             r"two\.h5.*alpha.*beta", topk("two.h5")),
        # --- NaN, Inf, mismatched shapes (3: input)
        Case("NaN in queries", INPUT,
             r"values\.h5:/qnan: row 17 column 5 is NaN",
             topk("values.h5:/qnan")),
        Case("Inf in base", INPUT,
             r"values\.h5:/binf: row 233 column 11 is Inf",
             topk(None, "values.h5:/binf")),
        Case("float64 beyond float32 range", INPUT,
             r"values\.h5:/bhuge: row 77 column 3 .*float32 range",
             topk(None, "values.h5:/bhuge")),
        Case("dimensions differ", INPUT, r"16 columns.*/d17 has 17",
             topk(None, "shapes.h5:/d17")),
        # --- absurd sizes in a header; the memory budget
        Case("10^12 rows declared, one chunk stored", INPUT,
             r"absurd\.h5:/trillion: only 1 of",
             topk(None, "absurd.h5:/trillion")),
        Case("1 x 2^31 declared, never written", INPUT,
             r"absurd\.h5:/wide_empty.*1 x 2147483648",
             topk(None, "absurd.h5:/wide_empty")),
        Case("chunk shape past the dataset (3 GiB per read)", INPUT,
             r"chunk-3gib-allocation\.h5:/train: chunk shape 16777218 x 49 "
             r"does not fit",
             topk(None, "chunk-3gib-allocation.h5")),
        Case("scale-offset after deflate (HDF5 over-reads)", INPUT,
             r"scaleoffset-after-deflate\.h5:/x: scale-offset filter after",
             topk(None, "scaleoffset-after-deflate.h5:/x")),
        Case("corrupt local heap: HDF5 itself crashes", INPUT,
             r"HDF5 library crashed reading .*heap-crash\.h5",
             topk("heap-crash.h5")),
        Case("1 x 2^31 stored, over the budget", RESOURCE,
             r"memory budget 4294967296 bytes per rank is too small",
             topk("huge-row.h5", "huge-row.h5", 1, "--mem-limit", "4G")),
        Case("--mem-limit 1", RESOURCE,
             r"memory budget 1 bytes per rank is too small.*--mem-limit",
             topk(None, None, 5, "--mem-limit", "1")),
        Case("k lists over the budget", RESOURCE,
             r"memory budget 268435456 bytes.*too small",
             topk(None, None, 2 ** 24, "--mem-limit", "256M")),
        # --- bad command-line values and combinations (2: usage)
        Case("k = 0", USAGE, r"-k: must be at least 1, got 0",
             topk(None, None, 0)),
        Case("k negative", USAGE, r"-k: must be at least 1, got -3",
             topk(None, None, -3)),
        Case("k not a number", USAGE, r"-k: 'ten' is not an integer",
             topk(None, None, "ten")),
        Case("unknown metric", USAGE, r"-m: unknown metric 'hamming'",
             topk(None, None, 5, "-m", "hamming")),
        Case("threshold nan", USAGE, r"-t: 'nan' is not a finite number",
             topk(None, None, 5, "-t", "nan")),
        Case("--chunk-rows 0", USAGE,
             r"--chunk-rows: must be at least 1, got 0",
             topk(None, None, 5, "--chunk-rows", "0")),
        Case("unknown option", USAGE, r"unknown option '--frobnicate'",
             topk(None, None, 5, "--frobnicate")),
        Case("--precision int8 past its dimension", USAGE,
             r"--precision int8(: dimension 70000 is above 65536| needs )",
             topk("deep.h5", "deep.h5", 1, "--device", "cpu",
                  "--precision", "int8")),
        Case("unknown precision", USAGE, r"--precision: unknown precision "
             r"'fp64'", topk(None, None, 5, "--precision", "fp64")),
        Case("missing -o", USAGE, r"topk needs -o/--output",
             topk(), out_arg=False),
        Case("missing -q", USAGE, r"topk needs -q/--query",
             argv_of("topk", "-b", "@good", "-k", "5")),
        Case("--resume with --force", USAGE, r"--resume.*--force",
             topk(None, None, 5, "--resume", "--force")),
        Case("option of another command", USAGE,
             r"--rows does not apply to topk",
             topk(None, None, 5, "--rows", "10")),
        Case("output is the input", USAGE, r"in\.h5 is the query input",
             argv_of("topk", "-q", "in.h5", "-b", "@good", "-k", "5",
                     "--force", "-o", "in.h5"),
             setup=input_copy, out_arg=False),
        Case("output is the input by another name", USAGE,
             r"in\.h5 is the base input",
             argv_of("topk", "-q", "@good", "-b", "./in.h5", "-k", "5",
                     "--force", "-o", "in.h5"),
             setup=input_copy, out_arg=False),
        # --- INI job files (2: usage, FILE:LINE)
        Case("INI syntax error", USAGE, r"job\.ini:3: expected",
             with_ini("query = {good}\nbase = {good}\nthis is not ini\n"
                      "k = 5\n")),
        Case("INI unknown key", USAGE, r"job\.ini:4: unknown option 'kk'",
             with_ini("# neighbours\nquery = {good}\nbase = {good}\n"
                      "kk = 5\n")),
        Case("INI bad value", USAGE,
             r"job\.ini:2: metric: unknown metric 'manhattan'",
             with_ini("[job]\nmetric = manhattan\nquery = {good}\n"
                      "base = {good}\nk = 5\n")),
        Case("INI names another job file", USAGE,
             r"job\.ini:2: config: a job file cannot name another",
             with_ini("k = 5\nconfig = other.ini\n",
                      ["-q", "@good", "-b", "@good"])),
        Case("INI is a binary file", USAGE, r"job\.ini:2: .*NUL byte",
             with_ini("k = 5\nquery = {good}\0\x01\x02\nbase = x\n")),
        Case("missing job file", USAGE,
             r"cannot read job file nosuch\.ini",
             argv_of("topk", "-c", "nosuch.ini", "-q", "@good", "-b",
                     "@good", "-k", "5")),
        # --- output folders and files
        Case("output folder missing", RESOURCE,
             r"output folder \S*nosuchdir: No such file",
             topk(), out=lambda c, f: os.path.join(f, "nosuchdir", "o.h5")),
        Case("output folder is a file", RESOURCE,
             r"plain is not a directory", topk(),
             setup=output_folder_is_file,
             out=lambda c, f: os.path.join(f, "plain", "out.h5")),
        Case("output path is a folder", USAGE, r"out\.h5 is a directory",
             topk(), setup=output_is_folder),
        Case("existing output without --force", USAGE,
             r"out\.h5 exists.*--force", topk(), setup=existing_output),
        Case("existing output, --force, NaN input", INPUT,
             r"values\.h5:/qnan: row 17", topk("values.h5:/qnan", None, 5,
                                               "--force"),
             setup=existing_output),
        Case("output folder in /proc", RESOURCE,
             r"/proc/xjoin-catalogue-out\.h5", topk(),
             out=lambda c, f: PROC_OUT,
             outside=(PROC_OUT, PROC_OUT + ".partial")),
        Case("disk full", RESOURCE, r"disk-full/small/out\.h5",
             matrix("wide.h5", "wide.h5"), setup=mount_tmpfs,
             cleanup=umount_tmpfs, wrap=TMPFS_WRAP,
             out=lambda c, f: os.path.join(f, "small", "out.h5")),
        # --resume without a record starts fresh, as a batch script that
        # always passes it would: the space may run out while writing
        Case("disk full, --resume starting fresh", RESOURCE,
             r"fresh/small/out\.h5",
             matrix("wide.h5", "wide.h5", "--resume"),
             setup=mount_tmpfs, cleanup=umount_tmpfs, wrap=TMPFS_WRAP,
             out=lambda c, f: os.path.join(f, "small", "out.h5")),
        Case("file size limit (ulimit -f)", RESOURCE,
             r"ulimit-f-/out\.h5",
             matrix("wide.h5", "wide.h5"), wrap=ULIMIT_WRAP),
        # --- range joins
        Case("range: more pairs than --max-pairs", RESOURCE,
             r"more than 1 pairs \(--max-pairs\).*no output written",
             range_join("1e30", "--max-pairs", "1")),
        Case("range without a threshold", USAGE,
             r"range needs -t/--threshold",
             argv_of("range", "-q", "@good", "-b", "@good")),
        # --- sharded inputs: VDS sources, patterns, lists (3: input)
    ] + shard_inputs.catalogue_cases(Case, INPUT)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--xjoin", required=True, help="the xjoin binary")
    ap.add_argument("--mpiexec", default="mpiexec",
                    help="MPI launcher (Open MPI's mpiexec)")
    ap.add_argument("--workdir", default=None,
                    help="where the temporary folder goes (default: $TMPDIR)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the temporary folder")
    ap.add_argument("--only", default=None,
                    help="run only the cases whose name matches this regex")
    ap.add_argument("--jobs", type=int, default=4,
                    help="cases run at once (default %(default)s)")
    ap.add_argument("--list", action="store_true",
                    help="list the cases and exit")
    args = ap.parse_args()
    todo = cases()
    if args.list:
        for c in todo:
            print("%d  %s  /%s/" % (c.code, c.name, c.pattern))
        return 0
    if args.only:
        todo = [c for c in todo if re.search(args.only, c.name)]
    if not os.access(args.xjoin, os.X_OK):
        print("%s: not an executable" % args.xjoin, file=sys.stderr)
        return 1
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
    ctx = Ctx(args)
    t0 = time.time()
    ctx.inputs = Inputs(ctx.path("inputs"))
    print("inputs made in %.1f s" % (time.time() - t0), flush=True)
    before = ctx.inputs.digests()
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_case, ctx, i, c)
                   for i, c in enumerate(todo)]
        for f in futures:
            bad, summary = f.result()
            print(summary, flush=True)
            failed += bool(bad)
    if ctx.inputs.digests() != before:
        print("FAILED: an input file changed", flush=True)
        failed += 1
    print("catalogue: %d cases, %d failed (%.1f s)"
          % (len(todo), failed, time.time() - t0))
    if failed or args.keep:
        print("data kept in %s" % ctx.tmp)
    else:
        shutil.rmtree(ctx.tmp, ignore_errors=True)
    return 1 if failed or not todo else 0


if __name__ == "__main__":
    sys.exit(main())
