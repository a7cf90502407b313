#!/usr/bin/python3
"""compare.py: run xjoin and its peers side by side and print the table.

Called by cpu_vs_peers.sh, which prepares the interpreters, the SGEMM timer
and the data; this file only runs, times, checks and prints.

What is measured, per (dataset, tool), best of --reps runs:
  wall_s     the whole command, process start to exit: start-up (mpirun or
             the interpreter and its imports), HDF5 read, compute, HDF5 write.
             This is "end to end"; ratios are taken on it.
  read_s, compute_s, write_s
             the tool's own phase times (peers: perf_counter around each
             phase; xjoin: its report, when it gives one).
  GFLOP/s    2*n*m*d / time: the FLOPs of the score GEMM, the only term that
             grows with n*m*d (selection and rescoring are O(n*m) and O(n*k*d)).
  %sgemm     compute-phase GFLOP/s over the SGEMM rate this machine reaches
             at the same inner dimension (sgemm_rate, M = queries, N = 4096).
  ratio      peer wall_s / xjoin wall_s (above 1: xjoin is faster). The
             JSON also has inproc_ratio, the same without start-up.
  other      share of the CPUs that other processes used during the run:
             the machine is shared, and a busy neighbour slows any tool.
  recall     mean |peer_i & ref_i| / k over query rows, ref = xjoin (or the
             first tool when xjoin is absent); exact = share of rows whose
             neighbour sets are equal. FAISS ranks in float32 and may swap
             near ties, so this is reported, not asserted.

Runs are interleaved (rep 1 of every tool, then rep 2, ...) so a slow
period on a shared machine hits every tool alike; each run waits (up to
--quiet-wait seconds) for the CPUs to be idle before it starts, and a run
that other processes disturbed anyway (over --max-other of the CPUs) is
repeated up to --retries times while the --budget lasts.
"""
import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time

import h5py
import numpy as np

SGEMM_N = 4096


def log(msg):
    print("# " + msg, flush=True)


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def cpu_busy_s():
    """Seconds of CPU time used by everything on the machine so far."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]            # idle + iowait
    return (sum(fields[:8]) - idle) / float(os.sysconf("SC_CLK_TCK"))


def children_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def wait_quiet(max_wait_s, busy_limit=0.15):
    """Wait until the machine is idle for a moment: other work on the same
    cores would be timed as ours. Gives up after max_wait_s, and at once
    once the run's --budget is spent."""
    deadline = min(time.monotonic() + max_wait_s, BUDGET_END[0])
    ncpu = os.cpu_count() or 1
    while True:
        b0 = cpu_busy_s()
        time.sleep(0.5)
        busy = (cpu_busy_s() - b0) / (0.5 * ncpu)
        if busy <= busy_limit or time.monotonic() > deadline:
            return busy


LAST_FOREIGN = [0.0]
BUDGET_END = [float("inf")]


def run_timed(cmd, env):
    """Wall time of cmd; LAST_FOREIGN[0] is the share of the machine's CPU
    that other processes used meanwhile (0: a clean measurement)."""
    busy0 = cpu_busy_s()
    child0 = children_cpu_s()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    ours = children_cpu_s() - child0
    theirs = max(0.0, cpu_busy_s() - busy0 - ours)
    LAST_FOREIGN[0] = theirs / (wall * (os.cpu_count() or 1))
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit("compare.py: command failed (exit %d): %s"
                         % (proc.returncode, " ".join(cmd)))
    return wall, proc.stdout


def thread_env(threads):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    env["MKL_NUM_THREADS"] = str(threads)
    return env


# ---------------------------------------------------------------- SGEMM

def sgemm_rate(binary, m, k, threads, reps):
    _, out = run_timed([binary, str(m), str(SGEMM_N), str(k), str(reps),
                        "--json"], thread_env(threads))
    return json.loads(out.strip().splitlines()[-1])


# ---------------------------------------------------------------- xjoin

def phases_from_report(report):
    """Phase times from xjoin's --report-json file: "phase_seconds" holds
    setup, validate, read, compute, merge, write (slowest rank's)."""
    ph = report.get("phase_seconds", {})
    got = {name + "_s": ph.get(name) for name in
           ("setup", "validate", "read", "compute", "merge", "write")}
    got["total_s"] = report.get("total_seconds")
    got["gflops"] = report.get("gflops_compute")
    return got


# "| compute    |        1.234 |" in the printed results table.
STDOUT_PHASE = re.compile(r"^\|\s*(\w+)\s*\|\s*([0-9.]+)\s*\|\s*$",
                          re.MULTILINE)


def phases_from_stdout(text):
    got = {"read_s": None, "compute_s": None, "write_s": None, "gflops": None}
    for name, val in STDOUT_PHASE.findall(text):
        got[name.lower() + "_s"] = float(val)
    return got


def xjoin_supports(binary, flag):
    proc = subprocess.run([binary, "topk", "--help"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    return flag in proc.stdout


def xjoin_version(binary):
    proc = subprocess.run([binary, "--version"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    words = proc.stdout.split()
    return words[1] if len(words) > 1 else "?"


class XjoinTool:
    def __init__(self, args, ranks, threads, precision=None):
        self.name = "xjoin-np%d" % ranks
        # --precision of the CPU's candidate GEMM; None: xjoin's default
        self.precision = precision
        if precision:
            self.name += "-" + precision
        self.peer = None
        self.binary = args.xjoin
        self.mpirun = args.mpirun
        self.ranks = ranks
        self.threads = threads
        self.version = xjoin_version(args.xjoin)
        self.report_json = xjoin_supports(args.xjoin, "--report-json")

    def command(self, ds, out, report):
        # One rank with two OpenMP threads must not be bound to one core,
        # which Open MPI does by default for np <= 2.
        bind = "none" if self.threads > 1 else "core"
        cmd = [self.mpirun, "-np", str(self.ranks), "--bind-to", bind,
               "-x", "OMP_NUM_THREADS", "-x", "OPENBLAS_NUM_THREADS",
               self.binary, "topk", "-q", ds["query"], "-b", ds["base"],
               "-k", str(ds["k"]), "-m", ds["metric"], "-o", out, "--force"]
        if self.report_json:
            cmd += ["--report-json", report]
        if self.precision:
            cmd += ["--device", "cpu", "--precision", self.precision]
        return cmd

    def run(self, ds, out):
        report = out + ".report.json"
        if os.path.exists(report):
            os.remove(report)
        env = thread_env(self.threads)
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        wall, stdout = run_timed(self.command(ds, out, report), env)
        phases = None
        if self.report_json and os.path.exists(report):
            with open(report) as f:
                rep = json.load(f)
            phases = phases_from_report(rep)
            if phases is not None and "rescored_per_query" in rep:
                phases["rescored_per_query"] = rep["rescored_per_query"]
                phases["precision"] = rep.get("precision")
            self.version = str(rep.get("xjoin_version", rep.get("version",
                                                                self.version)))
        if phases is None or phases["compute_s"] is None:
            phases = phases_from_stdout(stdout)
        phases["stdout_tail"] = stdout[-2000:]
        return wall, phases


# ---------------------------------------------------------------- peers

class PeerTool:
    def __init__(self, name, python, peer, script, threads):
        self.name = name
        self.python = python
        self.peer = peer
        self.script = script
        self.ranks = 1
        self.threads = threads
        self.version = "?"

    def run(self, ds, out):
        cmd = [self.python, self.script, self.peer, "-q", ds["query"],
               "-b", ds["base"], "-k", str(ds["k"]), "-m", ds["metric"],
               "-o", out, "--threads", str(self.threads)]
        wall, stdout = run_timed(cmd, thread_env(self.threads))
        rep = json.loads(stdout.strip().splitlines()[-1])
        self.version = rep["version"]
        return wall, rep


# ---------------------------------------------------------------- accuracy

def read_neighbors(path):
    with h5py.File(path, "r") as f:
        return f["neighbors"][...], f["distances"][...]


def agreement(path, ref_path, k):
    nbr, dist = read_neighbors(path)
    ref_nbr, ref_dist = read_neighbors(ref_path)
    if nbr.shape != ref_nbr.shape:
        return {"recall": None, "exact_rows": None, "dist_maxdiff": None}
    hits = 0
    exact = 0
    for a, b in zip(nbr, ref_nbr):
        common = np.intersect1d(a, b).size
        hits += common
        exact += common == k
    n = nbr.shape[0]
    diff = np.abs(np.sort(dist, axis=1).astype(np.float64)
                  - np.sort(ref_dist, axis=1).astype(np.float64))
    return {"recall": hits / float(n * k), "exact_rows": exact / float(n),
            "dist_maxdiff": float(diff.max())}


# ---------------------------------------------------------------- driver

def dataset_shape(ds):
    def shape(spec):
        path, dset = spec.rsplit(":", 1)
        with h5py.File(path, "r") as f:
            return f[dset].shape
    qs = shape(ds["query"])
    bs = shape(ds["base"])
    return qs[0], bs[0], bs[1]


def gflops(n, m, d, sec):
    if not sec:
        return None
    return 2.0 * n * m * d / sec * 1e-9


def disturbed(args):
    """True when the last run shared the CPUs with other work and there is
    time left to run it again."""
    return (LAST_FOREIGN[0] > args.max_other
            and time.monotonic() < BUDGET_END[0])


def measure(tools, datasets, args):
    results = []
    for ds in datasets:
        n, m, d = dataset_shape(ds)
        ds.update(n=n, m=m, d=d)
        best = {}
        for rep in range(args.reps):
            for tool in tools:
                if ds["metric"] not in ("l2", "cosine") and tool.peer == "sklearn":
                    continue
                out = os.path.join(args.workdir, "out",
                                   "%s-%s.h5" % (ds["name"], tool.name))
                for attempt in range(1 + args.retries):
                    idle_wait = wait_quiet(args.quiet_wait)
                    wall, ph = tool.run(ds, out)
                    foreign = LAST_FOREIGN[0]
                    log("%-8s %-14s rep %d%s wall %.3f s  other load %3.0f%% "
                        "(before %3.0f%%)"
                        % (ds["name"], tool.name, rep + 1,
                           "." + str(attempt) if attempt else "  ", wall,
                           100 * foreign, 100 * idle_wait))
                    if (tool.name not in best
                            or wall < best[tool.name]["wall_s"]):
                        best[tool.name] = {"wall_s": wall, "phases": ph,
                                           "out": out, "tool": tool,
                                           "foreign": foreign}
                    if not disturbed(args):
                        break
        results.append((ds, best))
    return results


def build_rows(results, sgemm):
    rows = []
    for ds, best in results:
        n, m, d, k = ds["n"], ds["m"], ds["d"], ds["k"]
        rate = sgemm[ds["name"]]["gflops"]
        names = list(best)
        ref = next((x for x in names if x.startswith("xjoin")), names[0])
        ref_wall = best[ref]["wall_s"]
        ref_compute = best[ref]["phases"].get("compute_s")
        for name in names:
            b = best[name]
            ph = b["phases"]
            comp = ph.get("compute_s")
            acc = agreement(b["out"], best[ref]["out"], k)
            row = {
                "dataset": ds["name"], "metric": ds["metric"],
                "n": n, "m": m, "d": d, "k": k,
                "tool": name, "version": b["tool"].version,
                "ranks": b["tool"].ranks, "threads": b["tool"].threads,
                "wall_s": b["wall_s"], "other_load": b["foreign"],
                "read_s": ph.get("read_s"), "compute_s": comp,
                "write_s": ph.get("write_s"),
                "e2e_gflops": gflops(n, m, d, b["wall_s"]),
                "compute_gflops": gflops(n, m, d, comp),
                "sgemm_gflops": rate,
                "ref": ref,
                "wall_ratio": b["wall_s"] / ref_wall,
                "compute_ratio": (comp / ref_compute
                                  if comp and ref_compute else None),
            }
            row["sgemm_fraction"] = (row["compute_gflops"] / rate
                                     if row["compute_gflops"] else None)
            row["phases"] = {key: val for key, val in ph.items()
                             if key.endswith("_s") and val is not None}
            row["phases_all"] = {key: val for key, val in ph.items()
                                 if key in ("rescored_per_query",
                                            "precision")}
            # Without start-up (interpreter and imports, MPI_Init): the
            # peers' read + compute + write, xjoin's own total.
            row["inproc_s"] = ph.get("inproc_s", ph.get("total_s"))
            ref_ph = best[ref]["phases"]
            ref_inproc = ref_ph.get("inproc_s", ref_ph.get("total_s"))
            row["inproc_ratio"] = (row["inproc_s"] / ref_inproc
                                   if row["inproc_s"] and ref_inproc
                                   else None)
            if ph.get("gflops") is not None:
                row["reported_gflops"] = ph["gflops"]
            row.update(acc)
            rows.append(row)
    return rows


def fmt(val, spec):
    return "-" if val is None else format(val, spec)


def print_table(rows):
    head = ("%-13s %-14s %7s %5s %8s %8s %7s %8s %7s %8s %6s %6s %7s %6s "
            "%9s %5s" % ("dataset", "tool", "version", "rxt", "wall", "e2e",
                         "read", "compute", "write", "compute", "sgemm",
                         "ratio", "recall", "exact", "maxdiff", "other"))
    units = ("%-13s %-14s %7s %5s %8s %8s %7s %8s %7s %8s %6s %6s %7s %6s "
             "%9s %5s" % ("", "", "", "", "s", "GFLOP/s", "s", "s", "s",
                          "GFLOP/s", "%", "x", "", "", "dist", "%cpu"))
    print("#")
    print("# " + head)
    print("# " + units)
    for r in rows:
        print("  %-13s %-14s %7s %5s %8.3f %8.1f %7s %8s %7s %8s %6s %6.2f "
              "%7s %6s %9s %5.0f" % (
                  r["dataset"], r["tool"], r["version"][:7],
                  "%dx%d" % (r["ranks"], r["threads"]), r["wall_s"],
                  r["e2e_gflops"], fmt(r["read_s"], ".3f"),
                  fmt(r["compute_s"], ".3f"), fmt(r["write_s"], ".3f"),
                  fmt(r["compute_gflops"], ".1f"),
                  fmt(r["sgemm_fraction"] and 100 * r["sgemm_fraction"],
                      ".0f"),
                  r["wall_ratio"], fmt(r["recall"], ".4f"),
                  fmt(r["exact_rows"], ".3f"),
                  fmt(r["dist_maxdiff"], ".2e"), 100 * r["other_load"]))
    print("#")
    noisy = [r["tool"] for r in rows if r["other_load"] > 0.05]
    if noisy:
        print("# warning: other processes used > 5%% of the CPUs during the "
              "best run of: %s; those times are pessimistic"
              % ", ".join(sorted(set(noisy))))


def target_line(row, what, ok, counted):
    return "%s %s: %s%s: %s" % (row["dataset"], row["tool"], what,
                                "" if counted else ", reported only",
                                "MET" if ok else "NOT MET")


def check_targets(rows, args):
    """Lines for the issue's two targets; returns (lines, all_met). They are
    set at d = 128 against xjoin's first configuration (the reference);
    other datasets and configurations are reported, not counted."""
    lines = []
    met = True
    n_counted = 0
    if not any(r["tool"].startswith("xjoin") for r in rows):
        return ["target checks skipped: no xjoin binary"], False
    for r in rows:
        counted = r["d"] == 128 and not r["dataset"].endswith("-quick")
        if r["tool"].startswith("faiss"):
            ok = r["wall_ratio"] >= args.target_ratio
            counted = counted and r["tool"] == "faiss-debian"
            lines.append(target_line(
                r, "end-to-end time %.3f s = %.2fx %s's (target >= %.1fx)"
                % (r["wall_s"], r["wall_ratio"], r["ref"], args.target_ratio),
                ok, counted))
        elif r["tool"].startswith("xjoin"):
            frac = r["sgemm_fraction"]
            counted = counted and r["tool"] == r["ref"]
            if frac is None:
                lines.append("%s %s: compute phase not reported"
                             % (r["dataset"], r["tool"]))
                ok = False
            else:
                ok = frac >= args.target_sgemm
                lines.append(target_line(
                    r, "compute %.1f GFLOP/s = %.0f%% of SGEMM %.1f GFLOP/s "
                    "at K=%d (target >= %.0f%%)"
                    % (r["compute_gflops"], 100 * frac, r["sgemm_gflops"],
                       r["d"], 100 * args.target_sgemm), ok, counted))
        else:
            continue
        if counted:
            met &= ok
            n_counted += 1
    if not n_counted:
        lines.append("no target counted: the d = 128 job was not run at "
                     "full size")
        met = False
    return lines + lowp_lines(rows, args), met


def lowp_lines(rows, args):
    """The lower precisions' targets (reported, not counted): end to end
    against faiss-cpu from PyPI, the compute phase against the SGEMM rate
    measured in the same run, and the candidates each rescored."""
    lines = []
    for r in rows:
        if not (r["tool"].startswith("xjoin") and "-" in r["tool"][6:]):
            continue
        pypi = next((x for x in rows if x["dataset"] == r["dataset"]
                     and x["tool"] == "faiss-pypi"), None)
        if pypi:
            ratio = pypi["wall_s"] / r["wall_s"]
            lines.append(target_line(
                r, "faiss-pypi wall / this wall = %.2fx (target >= %.1fx)"
                % (ratio, args.target_lowp_ratio),
                ratio >= args.target_lowp_ratio, False))
        if r["sgemm_fraction"] is not None:
            lines.append(target_line(
                r, "compute %.1f GFLOP/s = %.2fx SGEMM (target >= %.1fx)"
                % (r["compute_gflops"], r["sgemm_fraction"],
                   args.target_lowp_sgemm),
                r["sgemm_fraction"] >= args.target_lowp_sgemm, False))
    for r in rows:
        if r["tool"].startswith("xjoin") and \
           r["phases_all"].get("rescored_per_query") is not None:
            lines.append("%s %s: %.1f candidates rescored per query (%s "
                         "GEMM, k = %d)" % (
                             r["dataset"], r["tool"],
                             r["phases_all"]["rescored_per_query"],
                             r["phases_all"].get("precision"), r["k"]))
    return lines


def make_tools(args):
    tools = []
    if args.xjoin:
        tools.append(XjoinTool(args, 1, args.threads))
        if args.threads > 1:
            tools.append(XjoinTool(args, args.threads, 1))
        for p in filter(None, args.xjoin_precisions.split(",")):
            tools.append(XjoinTool(args, 1, args.threads, p))
    peers = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "peers.py")
    tools.append(PeerTool("faiss-debian", args.python_debian, "faiss", peers,
                          args.threads))
    if args.python_pypi:
        tools.append(PeerTool("faiss-pypi", args.python_pypi, "faiss", peers,
                              args.threads))
    if not args.no_sklearn:
        tools.append(PeerTool("sklearn", args.python_debian, "sklearn", peers,
                              args.threads))
    return tools


def parse_dataset(spec):
    """NAME,QUERY_SPEC,BASE_SPEC,METRIC,K"""
    name, query, base, metric, k = spec.split(",")
    return {"name": name, "query": query, "base": base, "metric": metric,
            "k": int(k)}


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--xjoin", help="xjoin binary (absent: peers only)")
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--python-debian", default="/usr/bin/python3")
    p.add_argument("--python-pypi", help="python of the faiss-cpu venv")
    p.add_argument("--sgemm", required=True, help="sgemm_rate binary")
    p.add_argument("--dataset", action="append", required=True,
                   type=parse_dataset,
                   help="NAME,FILE:/DSET,FILE:/DSET,METRIC,K (repeatable)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--sgemm-reps", type=int, default=30)
    p.add_argument("--no-sklearn", action="store_true")
    p.add_argument("--max-other", type=float, default=0.10,
                   help="a run during which other processes used more than "
                   "this share of the CPUs is repeated")
    p.add_argument("--retries", type=int, default=2,
                   help="repeats of a disturbed run, at most")
    p.add_argument("--budget", type=float, default=600.0,
                   help="seconds after which runs no longer wait for idle "
                   "CPUs and disturbed runs are no longer repeated")
    p.add_argument("--quiet-wait", type=float, default=10.0,
                   help="seconds to wait for an idle machine before a run")
    p.add_argument("--workdir", required=True)
    p.add_argument("--json", required=True, help="where the JSON goes")
    p.add_argument("--target-ratio", type=float, default=2.5)
    p.add_argument("--target-sgemm", type=float, default=0.85)
    p.add_argument("--xjoin-precisions", default="",
                   help="comma-separated --precision values (CPU candidate "
                   "GEMM) to run xjoin at too, one rank")
    p.add_argument("--target-lowp-ratio", type=float, default=2.0,
                   help="a lower precision's target: faiss-pypi wall / its "
                   "wall (reported)")
    p.add_argument("--target-lowp-sgemm", type=float, default=1.5,
                   help="a lower precision's target: compute rate / SGEMM "
                   "rate (reported)")
    return p.parse_args(argv)


def measure_sgemm(args, datasets, threads, rates=None):
    """SGEMM rate per dataset shape; keeps the better of rates (an earlier
    measurement) and this one."""
    rates = dict(rates or {})
    for ds in datasets:
        n, _, d = dataset_shape(ds)
        for attempt in range(1 + args.retries):
            wait_quiet(args.quiet_wait)
            r = sgemm_rate(args.sgemm, n, d, threads, args.sgemm_reps)
            r["threads"] = threads
            r["other_load"] = LAST_FOREIGN[0]
            old = rates.get(ds["name"])
            if old is None or r["gflops"] > old["gflops"]:
                rates[ds["name"]] = r
            if not disturbed(args):
                break
    return rates


def main(argv):
    args = parse(argv)
    BUDGET_END[0] = time.monotonic() + args.budget
    os.makedirs(os.path.join(args.workdir, "out"), exist_ok=True)
    t_start = time.perf_counter()
    log("xjoin CPU path vs peers, same job, HDF5 in and out, best of %d"
        % args.reps)
    log("host %s, cpu %s, %d cpus online, load %s"
        % (platform.node(), cpu_model(), os.cpu_count(), loadavg()))
    log("threads per tool: %d (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS)"
        % args.threads)
    tools = make_tools(args)
    # Before and after the tools, best of both: the reference is what the
    # machine can do, not what it did during one unlucky second.
    sgemm = measure_sgemm(args, args.dataset, args.threads)
    sgemm1 = measure_sgemm(args, args.dataset, 1)
    results = measure(tools, args.dataset, args)
    sgemm = measure_sgemm(args, args.dataset, args.threads, sgemm)
    sgemm1 = measure_sgemm(args, args.dataset, 1, sgemm1)
    for ds in args.dataset:
        s, s1 = sgemm[ds["name"]], sgemm1[ds["name"]]
        log("SGEMM %-8s M=%d N=%d K=%d: %.1f GFLOP/s with %d threads "
            "(the reference), %.1f with 1; best of %d calls x 2 runs"
            % (ds["name"], s["m"], s["n"], s["k"], s["gflops"],
               args.threads, s1["gflops"], s["reps"]))
    rows = build_rows(results, sgemm)
    print_table(rows)
    lines, met = check_targets(rows, args)
    for line in lines:
        log(line)
    total = time.perf_counter() - t_start
    doc = {
        "schema": 1,
        "host": platform.node(), "cpu": cpu_model(),
        "cpus": os.cpu_count(), "threads": args.threads, "reps": args.reps,
        "loadavg_end": loadavg(),
        "sgemm": sgemm, "sgemm_1thread": sgemm1, "rows": rows,
        "targets": lines, "targets_met": met, "total_s": total,
    }
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
    log("JSON: %s" % args.json)
    log("total %.0f s; %s" % (total, "targets MET" if met
                              else "targets NOT MET (see lines above)"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
