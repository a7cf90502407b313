#!/usr/bin/python3
"""A fault soak on the namespace cluster: jobs hit by faults of random
kinds at random moments, then resumed until done.

    soak.py --xjoin PATH --source DIR [--mpiexec PATH] [--faults N]
            [--seed S] [--workdir DIR] [--table FILE] [--keep]

The cluster (vcluster.py): nodes 1-3 hold one rank each, node 4 is a login
node with none; mpirun starts through scripts/xjoin-mpirun on node 1 or
on the login node (drawn). The output folder is a small tmpfs, so the
file system can fill. Each round draws a job (a top-k, a range join or a
matrix, `--peer-timeout 10 --checkpoint-seconds 1`), a fault and a moment
(a share of the job's uninterrupted time, 5% to 110%):

  link-cut    node 2's link down                        expect exit 6
  node-kill   SIGKILL to every process of node 2        expect exit 6
  term        SIGTERM to mpirun                         expect exit 5
  usr1        SIGUSR1 to mpirun (stop with a record)    expect exit 5
  disk-full   the output's file system filled, to 0 or  expect exit 4
              64 KiB free (a record fits, results do
              not), from a random moment or from the
              job's last 10% (its final write, record
              and rename)

A fault that lands after the job finished is counted as such (exit 0 and
the right output). Then: every process of the job gone from every node
within the bound (`--peer-timeout` + 60 s), the launcher's exit as
expected, nothing at the output path but an
output that is whole, and the same command with --resume, repeated until
it ends (at most 4 times), gives the bits of one rank on this machine,
leaving no stray file (partial, record, lists, lock, lost note) and no
process. The table: faults by kind and by moment, resumes, the longest
time from fault to the last process, the recorded rows a fault lost (a
record never goes back: 0), wrong outputs, leftovers.

Exit status: 0 when every check passed, 1 otherwise, 77 skipped (not
root, no namespaces or no tmpfs).
"""

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import cluster_cases as cc  # noqa: E402
import tmpfs  # noqa: E402
import vcluster  # noqa: E402
from slurm_cases import Checks, say  # noqa: E402

KINDS = ("link-cut", "node-kill", "term", "usr1", "disk-full")
EXPECT = {"link-cut": 6, "node-kill": 6, "term": 5, "usr1": 5,
          "disk-full": 4}
TMPFS_BYTES = 160 << 20
PEER_S = 10
# the bound, fault to the last process: --peer-timeout + 60 s
# (the watch's own is T + 18 s once the ranks are up; a cut during
# start-up is ended by xjoin-mpirun's keepalive, after T + 30 s)
BOUND_S = PEER_S + 60
STRAY = (".partial", ".progress", ".lost", ".lists")


def progress_rows(path):
    try:
        with open(path) as f:
            m = re.search(r"^rows_done = (\d+) of", f.read(), re.M)
        return int(m.group(1)) if m else 0
    except OSError:
        return 0


class Soak:
    def __init__(self, args, cl, ck, out_dir):
        self.args, self.cl, self.ck, self.out = args, cl, ck, out_dir
        self.ctx = cc.Ctx(args, cl, ck)
        self.rows = []

    def jobs(self):
        g = cc.data(self.ctx, "soak.h5", 120000, 12000, 32, 17)
        # the matrix's 2,000 x 12,000 floats (96 MB) fit the tmpfs
        m = cc.data(self.ctx, "soak-m.h5", 12000, 2000, 64, 19)
        common = ["--peer-timeout", PEER_S, "--checkpoint-seconds", 1]
        return {
            "topk": ["topk", "-q", g, "-b", g, "-k", 10, "--chunk-rows",
                     1500] + common,
            "range": ["range", "-q", g, "-b", g, "-t", 1.53,
                      "--chunk-rows", 1500] + common,
            "matrix": ["matrix", "-q", m + ":/test", "-b", m + ":/train",
                       "--chunk-rows", 250] + common,
        }

    def reference(self, name, job):
        ref = self.ctx.path("ref-%s.h5" % name)
        if not os.path.exists(ref):
            t0 = time.time()
            if self.ctx.local(job + ["-o", ref, "--quiet"], name) != 0:
                raise RuntimeError("%s: one rank failed" % name)
            say("reference %s: %.1f s on one rank" % (name, time.time() - t0))
        return ref

    def timed_clean_run(self, name, job):
        """The job on the cluster, uninterrupted: its time (the moments
        are shares of it) and a check of its bits."""
        out = os.path.join(self.out, "clean-%s.h5" % name)
        t0 = time.time()
        p = self.ctx.mpirun([1, 2, 3], 1, job + ["-o", out, "--quiet"],
                            "clean " + name)
        took = time.time() - t0
        if self.ck.check(p.returncode == 0, "clean %s: exit %d"
                         % (name, p.returncode)):
            self.ctx.same(out, self.reference(name, job), "clean " + name)
        for f in os.listdir(self.out):
            os.unlink(os.path.join(self.out, f))
        return took

    def leftovers(self):
        return {i: self.cl.processes(i) for i in self.cl.nodes
                if self.cl.pids(i)}

    def stacks(self, nodes):
        """The stacks of the xjoin processes still on nodes (gdb, 20 s
        each at most), for a run that broke its bound: where it waits."""
        if not shutil.which("gdb"):
            return "(no gdb)"
        out = []
        for n in nodes:
            for pid, name in self.cl.processes(n):
                if name != "xjoin":
                    continue
                try:
                    r = subprocess.run(
                        ["gdb", "-p", str(pid), "-batch", "-nx",
                         "-ex", "thread apply all bt 30"],
                        capture_output=True, text=True, timeout=20)
                    bt = [l for l in r.stdout.splitlines()
                          if l.startswith(("#", "Thread"))]
                except subprocess.TimeoutExpired:
                    bt = ["(gdb timed out)"]
                out.append("node %d pid %d:\n  %s" % (n, pid,
                                                      "\n  ".join(bt)))
        return "\n".join(out) or "(no xjoin left)"

    def round(self, rng, i, name, job, ref, t_clean):
        cl, ck = self.cl, self.ck
        kinds = self.args.kinds
        kind = kinds[i % len(kinds)] if i < len(kinds) else rng.choice(kinds)
        share = rng.uniform(0.05, 1.1)
        leave = rng.choice((0, 64 << 10))
        if kind == "disk-full" and rng.random() < 0.4:
            share = rng.uniform(0.9, 1.05)      # the final write, record
        launch = rng.choice((1, 4))
        out = os.path.join(self.out, "soak.h5")
        what = "round %d: %s, %s at %.0f%%%s, mpirun on node %d" % (
            i + 1, name, kind, 100 * share,
            " (%d KiB left)" % (leave >> 10) if kind == "disk-full" else "",
            launch)
        log = open(self.ctx.path("soak-%d.log" % (i + 1)), "w+")
        proc = subprocess.Popen(
            self.ctx.mpirun_argv([1, 2, 3], 1, job + ["-o", out], launch,
                                 wrapper=True),
            env=cl.mpi_env(), stdout=log, stderr=subprocess.STDOUT,
            text=True)
        time.sleep(share * t_clean)
        before = progress_rows(out + ".progress")
        t_fault = time.time()
        done_first = proc.poll() is not None
        if not done_first:
            if kind == "link-cut":
                cl.link(2, False)
            elif kind == "node-kill":
                cl.kill_node(2)
            elif kind == "term":
                proc.send_signal(signal.SIGTERM)
            elif kind == "usr1":
                proc.send_signal(signal.SIGUSR1)
            else:
                tmpfs.fill(self.out, leave)
        # a node cut off is out of reach: its processes are ended when
        # the link is back (they could not be seen on a real cluster)
        reach = [n for n in cl.nodes if kind != "link-cut" or n != 2]
        gone = cc.wait_all_gone(self.ctx, reach, BOUND_S)
        try:
            rc = proc.wait(timeout=max(1, BOUND_S - (time.time() - t_fault)))
        except subprocess.TimeoutExpired:
            rc = None
        took = time.time() - t_fault
        left = {n: p for n, p in self.leftovers().items() if n in reach}
        if rc is None or gone is None:
            say("--- %s: over the bound; stacks ---\n%s"
                % (what, self.stacks(reach)))
        after = progress_rows(out + ".progress")
        log.seek(0)
        text = log.read()
        log.close()
        started = "| command" in text     # rank 0 printed the job table
        moment = ("after the end" if done_first or rc == 0 else
                  "start-up" if not started else
                  "before the first record" if before == 0 else
                  "final write" if share >= 0.9 else "mid-run")
        ok = ck.check(rc is not None and gone is not None,
                      "%s: the job did not end within %d s (mpirun %s, "
                      "left %s)" % (what, BOUND_S, rc, left))
        want = (0,) if done_first else (EXPECT[kind], 0)
        # a node lost while the ranks start, before the watch is up:
        # mpirun's own failure (its keepalive), not xjoin's 6
        ok &= ck.check(rc in want or (moment == "start-up" and rc and
                                      kind in ("link-cut", "node-kill")),
                       "%s: the launcher exited %s, expected %s"
                       % (what, rc, want))
        ok &= ck.check(rc == 0 or after >= before, "%s: the record went "
                       "back from %d to %d rows" % (what, before, after))
        ok &= ck.check(rc == 0 or not os.path.exists(out),
                       "%s: an output at the path after exit %s" % (what, rc))
        if not ok:
            say("--- %s ---\n%s" % (what, text[-3000:]))
        # restore, end what a lost node still runs, resume until done
        if kind == "link-cut":
            cl.link(2, True)
        if os.path.exists(os.path.join(self.out, "filler")):
            os.unlink(os.path.join(self.out, "filler"))
        for n in cl.nodes:
            cl.kill_node(n)
        rc_fault = rc
        resumes = 0
        while rc != 0 and resumes < 4:
            resumes += 1
            p = self.ctx.mpirun([1, 2, 3], 1, job + ["-o", out, "--resume",
                                                    "--quiet"],
                                "%s: resume %d" % (what, resumes))
            rc = p.returncode
        wrong = 0
        if ck.check(rc == 0, "%s: not done after %d resumes" % (what,
                                                              resumes)):
            wrong = int(not self.ctx.same(out, ref, what))
        stray = [f for f in os.listdir(self.out) if f != "soak.h5"]
        procs = self.leftovers()
        ck.check(not stray and not procs, "%s: left %s %s" % (what, stray,
                                                             procs))
        if os.path.exists(out):
            os.unlink(out)
        for f in stray:
            os.unlink(os.path.join(self.out, f))
        say("%s: exit %s in %.1f s (%s), record %d -> %d rows, %d resumes, "
            "%s" % (what, "done first" if done_first else rc_fault, took,
                    moment,
                    before, after, resumes,
                    "same bits" if not wrong and rc == 0 else "WRONG"))
        self.rows.append(dict(job=name, kind=kind, moment=moment,
                              took=took, resumes=resumes,
                              lost=max(0, before - after) if rc_fault else 0,
                              wrong=wrong,
                              leftovers=len(stray) + len(procs),
                              launch=launch))

    def table(self):
        lines = ["| fault | runs | moments | resumes | max s to exit | "
                 "recorded rows lost | wrong outputs | leftovers |",
                 "|---|---|---|---|---|---|---|---|"]
        for kind in KINDS + ("all",):
            rs = [r for r in self.rows if kind in ("all", r["kind"])]
            if not rs:
                continue
            moments = {}
            for r in rs:
                moments[r["moment"]] = moments.get(r["moment"], 0) + 1
            lines.append("| %s | %d (%s) | %s | %d | %.1f | %d | %d | %d |"
                         % (kind, len(rs), ", ".join(
                             "%s %d" % (j, sum(r["job"] == j for r in rs))
                             for j in ("topk", "range", "matrix")),
                            ", ".join("%s %d" % kv for kv in
                                      sorted(moments.items())),
                            sum(r["resumes"] for r in rs),
                            max(r["took"] for r in rs),
                            sum(r["lost"] for r in rs),
                            sum(r["wrong"] for r in rs),
                            sum(r["leftovers"] for r in rs)))
        return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--xjoin", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--faults", type=int, default=30)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--workdir", default=tempfile.gettempdir())
    ap.add_argument("--table", help="write the table (markdown) here")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="the faults drawn from (default all)")
    ap.add_argument("--jobs", default="matrix,range,topk",
                    help="the jobs drawn from (default all)")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    args.xjoin = os.path.abspath(args.xjoin)
    args.source = os.path.abspath(args.source)
    args.kinds = args.kinds.split(",")
    args.jobs = args.jobs.split(",")
    if not set(args.kinds) <= set(KINDS) or \
       not set(args.jobs) <= {"matrix", "range", "topk"}:
        ap.error("--kinds from %s, --jobs from matrix, range, topk"
                 % ",".join(KINDS))
    seed = args.seed if args.seed is not None else int(time.time())
    try:
        vcluster.check_available()
    except vcluster.Unavailable as e:
        say("SKIPPED: %s" % e)
        return 77
    t0 = time.time()
    ck = Checks()
    os.makedirs(args.workdir, exist_ok=True)
    folder = tempfile.mkdtemp(prefix="soak-", dir=os.path.abspath(
        args.workdir))
    os.chmod(folder, 0o755)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, f: sys.exit(128 + s))
    out_dir = os.path.join(folder, "out")
    cl, soak = None, None
    try:
        why = tmpfs.mount(out_dir, TMPFS_BYTES)
        if why:
            say("SKIPPED: no tmpfs for the output (%s)" % why)
            return 77
        cl = vcluster.Cluster.create(4, folder, watchdog_for=os.getpid())
        say("soak: seed %d, %d faults, cluster %s (node 4: login, no rank)"
            % (seed, args.faults, cl.id))
        soak = Soak(args, cl, ck, out_dir)
        rng = random.Random(seed)
        jobs = soak.jobs()
        jobs = {n: j for n, j in jobs.items() if n in args.jobs}
        refs = {n: soak.reference(n, j) for n, j in jobs.items()}
        # twice: the first may measure --precision auto's models (cached
        # then), which later runs skip
        clean = {n: min(soak.timed_clean_run(n, j),
                        soak.timed_clean_run(n, j)) for n, j in jobs.items()}
        say("uninterrupted on the cluster: %s" % ", ".join(
            "%s %.1f s" % kv for kv in clean.items()))
        names = sorted(jobs)
        for i in range(args.faults):
            name = names[i % len(names)] if i < len(names) else \
                rng.choice(names)
            soak.round(rng, i, name, jobs[name], refs[name], clean[name])
    except Exception as e:   # noqa: BLE001 - reported, then torn down
        ck.check(False, "%s: %s" % (type(e).__name__, e))
    finally:
        if cl is not None:
            cl.teardown()
        tmpfs.umount(out_dir)
        if ck.failed or args.keep:
            say("soak folder kept: %s" % folder)
        else:
            subprocess.run(["rm", "-rf", folder])
    if soak and soak.rows:
        table = soak.table()
        say("soak (seed %d, %.0f s):\n%s" % (seed, time.time() - t0, table))
        if args.table:
            with open(args.table, "w") as f:
                f.write("seed %d, %d faults, %.0f s\n\n%s\n"
                        % (seed, len(soak.rows), time.time() - t0, table))
    say("soak: %d checks, %d failed" % (ck.n, len(ck.failed)))
    for f in ck.failed:
        say("  FAILED: %s" % f)
    return 1 if ck.failed or ck.n == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
