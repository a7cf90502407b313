"""What the examples share: finding xjoin, running it under mpirun with its
peak memory and --report-json, and reading report fields by name.

The binary is $XJOIN, else build/xjoin of this checkout; mpirun is $MPIRUN,
else `mpirun`. Reports are read defensively: a field the running xjoin does
not write reads as None, so an example keeps working while the report grows.
"""

import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import compare  # noqa: E402  tests/integration/compare.py: bit-for-bit check
from plot import field  # noqa: E402,F401  report fields by name

MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def xjoin_binary():
    path = os.environ.get("XJOIN", os.path.join(ROOT, "build", "xjoin"))
    if not os.access(path, os.X_OK):
        sys.exit("no xjoin binary at %s: build it (scripts/build.sh) or set "
                 "XJOIN=PATH" % path)
    return path


def read_json(path):
    with open(path) as f:
        return json.load(f)


class Run:
    """One finished xjoin run: wall seconds, the peak resident memory of
    its largest rank in MiB, its stdout and its report (a dict)."""

    def __init__(self, wall_s, peak_mib, stdout, report):
        self.wall_s = wall_s
        self.peak_mib = peak_mib
        self.stdout = stdout
        self.report = report


def threads_per_rank(np_ranks):
    """OpenMP threads for each of np_ranks ranks on this machine's cores."""
    return max(1, (os.cpu_count() or 1) // np_ranks)


def peak_mib(folder):
    """The largest peak RSS that peak_rss.py recorded in folder, in MiB."""
    peaks = []
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            peaks.append(int(f.read()) / 1024.0)
    return max(peaks) if peaks else None


def xjoin(np_ranks, argv, report=None, threads=None, reps=1):
    """The best of reps runs of xjoin_once (by the report's total seconds,
    else the wall time), with the largest peak memory of them all: on a
    busy machine the fastest run is the one least disturbed."""
    runs = [xjoin_once(np_ranks, argv, report, threads)
            for _ in range(max(1, reps))]
    best = min(runs, key=lambda r: field(r.report, "total_seconds")
               or r.wall_s)
    peaks = [r.peak_mib for r in runs if r.peak_mib is not None]
    best.peak_mib = max(peaks) if peaks else None
    return best


def xjoin_once(np_ranks, argv, report=None, threads=None):
    """Run `mpirun -np NP xjoin ARGV`; exit with its output on failure.

    Each rank runs under peak_rss.py, which records its peak resident
    memory. Ranks are not bound to cores (Open MPI binds each to one core
    for np <= 2, which would starve the OpenMP threads)."""
    with tempfile.TemporaryDirectory() as peaks:
        cmd = [os.environ.get("MPIRUN", "mpirun"), "-np", str(np_ranks),
               "--bind-to", "none", sys.executable,
               os.path.join(ROOT, "examples", "peak_rss.py"), peaks,
               xjoin_binary()] + list(argv) + ["--quiet"]
        if threads:
            cmd += ["--threads", str(threads)]
        if report:
            if os.path.exists(report):
                os.remove(report)
            cmd += ["--report-json", report]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, env=dict(os.environ, **MPI_ENV),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            sys.exit("FAILED (exit %d): %s\n%s"
                     % (p.returncode, " ".join(cmd), p.stdout[-4000:]))
        peak = peak_mib(peaks)
    rep = read_json(report) if report and os.path.exists(report) else {}
    return Run(wall, peak, p.stdout, rep)


def plot(argv):
    """scripts/plot.py with these arguments; exits on its failure."""
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "plot.py")] + argv
    if subprocess.run(cmd).returncode != 0:
        sys.exit("FAILED: " + " ".join(cmd))


def git_commit():
    """The checkout's commit (with -dirty when changed), for plot notes."""
    try:
        out = subprocess.run(["git", "-C", ROOT, "describe", "--always",
                              "--dirty", "--abbrev=10"],
                             stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        return out.stdout.strip() or "?"
    except OSError:
        return "?"


def cpu_model():
    """The CPU's model name, as the benchmarks print it."""
    path = os.path.join(ROOT, "scripts", "bench", "compare.py")
    spec = importlib.util.spec_from_file_location("bench_compare", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench.cpu_model()


def add_common_args(ap, name, check_help):
    """The options every example takes: --reps, --workdir, --png, --check;
    the defaults put files in build/examples/NAME."""
    ap.add_argument("--reps", type=int, default=1,
                    help="runs of each job; the fastest one counts")
    ap.add_argument("--workdir", default=os.path.join(
        ROOT, "build", "examples", name))
    ap.add_argument("--png", help="plot to write [default: WORKDIR/%s.png]"
                    % name)
    ap.add_argument("--check", action="store_true", help=check_help)


COMMIT = git_commit()   # at the start: the code that runs, not the end's


def note(argv):
    """One line for a plot: the command, the commit, the CPU, the date."""
    cmd = " ".join([os.path.relpath(os.path.abspath(argv[0]), ROOT)]
                   + argv[1:])
    return "%s | commit %s | %s, %d cpus | %s" % (
        cmd, COMMIT, cpu_model(), os.cpu_count(),
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))


def write_runs(path, recs):
    """The records of an example as {"runs": [...]}, for scripts/plot.py."""
    with open(path, "w") as f:
        json.dump({"command": " ".join(sys.argv), "commit": COMMIT,
                   "cpu": cpu_model(), "cpus": os.cpu_count(),
                   "runs": recs}, f, indent=1)


def same_bits(actual, expected, show=5):
    """Number of entries of /neighbors and /distances that differ (0: the
    files hold the same bits); prints the first `show` of them."""
    return compare.compare(actual, expected, max_print=show,
                           out=sys.stdout if show else io.StringIO())
