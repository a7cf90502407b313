#!/usr/bin/python3
"""xjoin across nodes: a namespace cluster on this machine (vcluster.py).

    cluster_cases.py CASE --xjoin PATH --source DIR [--mpiexec PATH]
                     [--workdir DIR] [--keep]

Cases (3 nodes x 2 ranks unless said otherwise; mpirun runs on node 1,
as inside an allocation, and reaches the others through the rsh agent;
the faults case adds node 4, a login node that holds no rank):

  join    topk for every metric (l2 with a threshold, cosine --self) and
          the matrix: bit for bit equal to one rank on this machine;
          `xjoin devices` names every rank's node and node-local rank;
          a run stopped with SIGUSR1 to mpirun resumes on 2 nodes and ends
          bit for bit equal
  faults  (a) node 2's link cut, (b) every process of node 2 killed,
          (c) node 1 (rank 0 and mpirun) dies: each time every process of
          the job on every reachable node ends within the bound
          --peer-timeout implies, one message names the lost rank and its
          node, nothing is at the output path, no MPI-IO lock file is
          left, and --resume once the node is back ends bit for bit
          equal; (d) and (e): (a) and (b) with mpirun started through
          scripts/xjoin-mpirun on the login node, which must end too
          (Open MPI's mpirun alone waited there for node 2's daemon for
          minutes); (f) node 2 out of memory (its ranks in a memory
          cgroup that another process fills, where the machine has
          cgroups: the OOM killer ends a rank): the same ending, the
          message naming a rank of node 2; (g) a slow, lossy link on node
          2: the job completes, bit for bit equal, without a loss reported
  slurm   a Slurm cluster with one slurmd per node: scripts/slurm/
          xjoin.sbatch through `sbatch -N 2` and `sbatch -N 3` (srun across
          the nodes) ends bit for bit equal to one rank; then a link cut
          under srun ends the whole step within the bound

Exit status: 0 all checks passed, 1 a check failed, 77 skipped (not root,
or the machine cannot make namespaces), with the reason.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "slurm"))
import vcluster  # noqa: E402
from slurm_cases import Checks, say  # noqa: E402  the same check log

SKIP = 77
PEER_TIMEOUT_S = 10
# watch_bound_s (app/run/watch.c): timeout + interval + report delay + grace
# + 2, and slack for a loaded 2-core machine
BOUND_S = PEER_TIMEOUT_S + 0.25 + 6 + 10 + 2
SLACK_S = 8


def load_compare(source):
    sys.path.insert(0, os.path.join(source, "tests", "integration"))
    import compare  # noqa: E402
    return compare


class Ctx:
    def __init__(self, args, cl, ck):
        self.args, self.cl, self.ck = args, cl, ck
        self.compare = load_compare(args.source)
        self.dir = cl.dir

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def local(self, argv, what, timeout=600):
        """xjoin as one rank on this machine: the reference."""
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        p = subprocess.run([self.args.xjoin] + [str(a) for a in argv],
                           env=env, capture_output=True, text=True,
                           timeout=timeout)
        if p.returncode != 0:
            say("--- %s ---\n%s%s" % (what, p.stdout[-2000:],
                                      p.stderr[-2000:]))
        return p.returncode

    def mpirun_argv(self, nodes, per_node, argv, launch=None,
                    wrapper=False):
        """mpirun on node launch (default the first of nodes) with ranks
        on nodes; through scripts/xjoin-mpirun when wrapper is set."""
        cl = self.cl
        run = [self.args.mpiexec]
        if wrapper:
            run = ["env", "MPIRUN=" + self.args.mpiexec,
                   os.path.join(self.args.source, "scripts", "xjoin-mpirun"),
                   "--verbose"]
        return (cl.enter(launch or nodes[0]) + run +
                ["--hostfile", cl.hostfile(per_node, nodes), "-np",
                 str(per_node * len(nodes)), self.args.xjoin] +
                [str(a) for a in argv])

    def mpirun(self, nodes, per_node, argv, what, timeout=600):
        t0 = time.time()
        p = subprocess.run(self.mpirun_argv(nodes, per_node, argv),
                           env=self.cl.mpi_env(), capture_output=True,
                           text=True, timeout=timeout)
        say("%s: %d nodes x %d ranks: xjoin %s -> %d (%.1f s)" % (
            what, len(nodes), per_node, " ".join(map(str, argv[:1])),
            p.returncode, time.time() - t0))
        if p.returncode != 0:
            say("--- stdout ---\n%s\n--- stderr ---\n%s"
                % (p.stdout[-3000:], p.stderr[-3000:]))
        return p

    def same(self, out, ref, what):
        ok = self.ck.check(os.path.exists(out), "%s: no output %s"
                           % (what, out))
        if ok:
            bad = self.compare.compare(out, ref)
            ok = self.ck.check(bad == 0, "%s: %d entries differ from one "
                               "rank" % (what, bad))
        return ok

    def no_leftovers(self, out, what, partial_expected=False):
        folder = os.path.dirname(out)
        locks = [f for f in os.listdir(folder)
                 if f.startswith(os.path.basename(out) + ".partial-") and
                 f.endswith(".lock")]
        self.ck.check(not locks, "%s: MPI-IO lock files left: %s"
                      % (what, locks))
        if not partial_expected:
            for ext in (".partial", ".progress", ".lost"):
                self.ck.check(not os.path.exists(out + ext),
                              "%s: %s%s left behind" % (what, out, ext))


# --- case join -------------------------------------------------------------

def data(ctx, name, rows, queries, dim, seed):
    path = ctx.path(name)
    if not os.path.exists(path):
        rc = ctx.local(["gen", "--rows", rows, "--queries", queries,
                        "--dim", dim, "--seed", seed, "--clusters", 20,
                        "--quiet", "-o", path], "gen")
        if rc != 0:
            raise RuntimeError("xjoin gen failed (%d)" % rc)
    return path


def case_join(ctx):
    g = data(ctx, "join.h5", 6000, 700, 24, 5)
    jobs = [
        ("topk-l2-threshold", ["topk", "-q", g, "-b", g + ":/train", "-k", 10,
                               "-t", 3.0]),
        ("topk-sqeuclidean", ["topk", "-q", g, "-b", g, "-k", 10,
                              "-m", "sqeuclidean"]),
        ("topk-cosine-self", ["topk", "-q", g + ":/train", "-b",
                              g + ":/train", "-k", 7, "-m", "cosine"]),
        ("topk-ip", ["topk", "-q", g, "-b", g, "-k", 5, "-m", "ip",
                     "--chunk-rows", 500]),
        ("matrix-l2", ["matrix", "-q", g, "-b", g, "-m", "l2"]),
        ("matrix-cosine", ["matrix", "-q", g, "-b", g, "-m", "cosine",
                           "--chunk-rows", 300]),
    ]
    for name, job in jobs:
        ref, out = ctx.path(name + "-ref.h5"), ctx.path(name + ".h5")
        if ctx.local(job + ["-o", ref, "--quiet", "--force"], name) != 0:
            ctx.ck.check(False, "%s: one rank failed" % name)
            continue
        p = ctx.mpirun([1, 2, 3], 2, job + ["-o", out, "--quiet"], name)
        if ctx.ck.check(p.returncode == 0, "%s: exit %d" % (name,
                                                            p.returncode)):
            ctx.same(out, ref, name)
            ctx.no_leftovers(out, name)
        if name == "topk-cosine-self" and os.path.exists(out):
            import h5py
            with h5py.File(out, "r") as h5:
                ctx.ck.check(int(h5.attrs["self_excluded"]) == 1,
                             "%s: self matches were not excluded" % name)
    devices(ctx)
    resume_elsewhere(ctx)


def devices(ctx):
    cl = ctx.cl
    p = ctx.mpirun([1, 2, 3], 2, ["devices", "--device", "cpu"], "devices")
    lines = re.findall(r"^rank\s+(\d+)\s+host (\S+)\s+local (\d+)/(\d+)",
                       p.stdout, re.M)
    want = [(str(r), cl.hostname(1 + r // 2), str(r % 2), "2")
            for r in range(6)]
    ctx.ck.check(lines == want, "devices: rank lines %s, expected %s"
                 % (lines, want))


def resume_elsewhere(ctx):
    """Stopped on 3 nodes, resumed on 2: the same bits."""
    g = data(ctx, "long.h5", 60000, 6000, 32, 9)
    job = ["topk", "-q", g, "-b", g, "-k", 10, "--chunk-rows", 1000,
           "--checkpoint-seconds", 0]
    ref, out = ctx.path("long-ref.h5"), ctx.path("long.h5.out.h5")
    if ctx.local(job + ["-o", ref, "--quiet", "--force"], "long") != 0:
        ctx.ck.check(False, "resume: one rank failed")
        return
    argv = ctx.mpirun_argv([1, 2, 3], 2, job + ["-o", out])
    p = subprocess.Popen(argv, env=ctx.cl.mpi_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    if _wait_for(out + ".progress", 120, p):
        time.sleep(0.5)
        p.send_signal(signal.SIGUSR1)   # mpirun forwards it to the ranks
    text, _ = p.communicate(timeout=300)
    say("resume: the 3-node run stopped with %d" % p.returncode)
    if not ctx.ck.check(p.returncode == 5, "resume: the 3-node run exited "
                        "%d, expected 5 (interrupted)" % p.returncode):
        say(text[-3000:])
        return
    ctx.ck.check(os.path.exists(out + ".partial"),
                 "resume: no partial output kept")
    p = ctx.mpirun([1, 2], 2, job + ["-o", out, "--resume", "--quiet"],
                   "resume on 2 nodes")
    if ctx.ck.check(p.returncode == 0, "resume on 2 nodes: exit %d"
                    % p.returncode):
        ctx.same(out, ref, "resume on 2 nodes")
        ctx.no_leftovers(out, "resume on 2 nodes")


def _wait_for(path, timeout, proc):
    t0 = time.time()
    while time.time() - t0 < timeout and proc.poll() is None:
        if os.path.exists(path):
            return True
        time.sleep(0.1)
    return False


# --- case faults -----------------------------------------------------------

FAULT_JOB_ROWS, FAULT_JOB_QUERIES, FAULT_JOB_DIM = 150000, 12000, 32


def job_processes(ctx, nodes):
    return {i: ctx.cl.processes(i) for i in nodes}


def wait_all_gone(ctx, nodes, limit_s):
    """Seconds until no process is left on the nodes, or None."""
    t0 = time.time()
    while time.time() - t0 < limit_s:
        if not any(ctx.cl.pids(i) for i in nodes):
            return time.time() - t0
        time.sleep(0.25)
    return None


def fault_run(ctx, name, inject, reachable, restore, message, launch=1,
              wrapper=False):
    """Start the job (mpirun on node launch, through xjoin-mpirun when
    wrapper is set), inject the fault once progress is recorded, check
    the end, restore, resume."""
    cl, ck = ctx.cl, ctx.ck
    g = data(ctx, "fault.h5", FAULT_JOB_ROWS, FAULT_JOB_QUERIES,
             FAULT_JOB_DIM, 13)
    job = ["topk", "-q", g, "-b", g, "-k", 10, "--chunk-rows", 2000,
           "--checkpoint-seconds", 1, "--peer-timeout", PEER_TIMEOUT_S]
    ref = ctx.path("fault-ref.h5")
    if not os.path.exists(ref) and \
       ctx.local(job + ["-o", ref, "--quiet"], "fault ref") != 0:
        ck.check(False, "%s: one rank failed" % name)
        return
    out = ctx.path("fault-%s.h5" % name)
    log = open(ctx.path("fault-%s.log" % name), "w+")
    proc = subprocess.Popen(ctx.mpirun_argv([1, 2, 3], 2, job + ["-o", out],
                                            launch, wrapper),
                            env=cl.mpi_env(), stdout=log,
                            stderr=subprocess.STDOUT, text=True)
    if not ck.check(_wait_for(out + ".progress", 120, proc),
                    "%s: no progress recorded before the fault" % name):
        proc.kill()
        return
    time.sleep(1)
    t_fault = time.time()
    inject()
    say("%s: fault injected" % name)
    gone = wait_all_gone(ctx, reachable, BOUND_S + SLACK_S)
    try:
        rc = proc.wait(timeout=max(1, BOUND_S + SLACK_S -
                                   (time.time() - t_fault)))
    except subprocess.TimeoutExpired:
        rc = None
    took = time.time() - t_fault
    say("%s: reachable nodes %s empty after %s s, mpirun exit %s after "
        "%.1f s (bound %.1f s)" % (name, reachable, "%.1f" % gone
                                   if gone is not None else "NEVER", rc,
                                   took, BOUND_S))
    ok = ck.check(gone is not None and gone <= BOUND_S + SLACK_S,
                  "%s: processes left on reachable nodes after %.0f s: %s"
                  % (name, BOUND_S + SLACK_S, job_processes(ctx, reachable)))
    if launch in reachable:
        ok &= ck.check(rc is not None, "%s: mpirun still running" % name)
    if wrapper:   # what the job's launcher says (mpirun alone may say 137)
        ok &= ck.check(rc in (None, 6), "%s: xjoin-mpirun exited %s, "
                       "expected 6 (a rank lost)" % (name, rc))
    log.seek(0)
    text = log.read()
    note = ""
    if os.path.exists(out + ".lost"):
        with open(out + ".lost") as f:
            note = f.read()
    ok &= ck.check(re.search(message, text + note),
                   "%s: no message matching %r (mpirun's output and %s.lost)"
                   % (name, message, out))
    ok &= ck.check(not os.path.exists(out), "%s: an output at the path"
                   % name)
    ok &= ck.check(os.path.exists(out + ".partial"), "%s: the partial "
                   "output is gone" % name)
    ctx.no_leftovers(out, name, partial_expected=True)
    if not ok:
        say("--- %s log ---\n%s" % (name, text[-4000:]))
    restore()
    # whatever the lost node still ran is gone before the resumed run
    for i in cl.nodes:
        cl.kill_node(i)
    p = ctx.mpirun([1, 2, 3], 2, job + ["-o", out, "--resume", "--quiet"],
                   "%s: resumed" % name)
    if ck.check(p.returncode == 0, "%s: the resumed run exited %d"
                % (name, p.returncode)):
        ctx.same(out, ref, "%s: resumed" % name)
        ctx.no_leftovers(out, "%s: resumed" % name)
    log.close()


def memory_cgroup(name):
    """A new memory cgroup under this process's own (cgroup v1's memory
    controller, else v2), as (folder, limit file); None where the machine
    has neither or will not make one."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctrl, path = line.split(":", 2)
        if "memory" in ctrl.split(","):
            base, limit = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
            break
    else:
        path = next((ln.split(":", 2)[2] for ln in lines
                     if ln.startswith("0::")), None)
        base = "/sys/fs/cgroup"
        if path is None or not os.path.exists(
                os.path.join(base, "cgroup.controllers")):
            return None
        limit = "memory.max"
    folder = os.path.join(base, path.lstrip("/"), name)
    try:
        os.makedirs(folder, exist_ok=True)
        if not os.path.exists(os.path.join(folder, limit)):
            os.rmdir(folder)
            return None
    except OSError:
        return None
    return folder, limit


# Joins a memory cgroup (argv[1]: its cgroup.procs) and fills it a MiB at
# a time: the cgroup's OOM killer then ends the task of the largest
# resident set in it, a rank (whose libraries and rows outweigh this
# small interpreter), and this one last.
HOG = """
import sys, time
open(sys.argv[1], "w").write("0")
keep = []
for _ in range(512):
    keep.append(bytearray(1 << 20))
    time.sleep(0.005)
time.sleep(600)
"""


def oom_fault(ctx):
    """(inject, restore) that put node 2's ranks in a memory cgroup of 16
    MiB with a process that fills it: the kernel's OOM killer ends a rank
    of node 2 mid-run, as when another job on the node takes its memory.
    None where the machine has no memory cgroup."""
    cg = memory_cgroup("xjoin-oom-%d" % os.getpid())
    if cg is None:
        return None
    folder, limit = cg
    hog = []

    def inject():
        with open(os.path.join(folder, limit), "w") as f:
            f.write(str(16 << 20))
        for pid, name in ctx.cl.processes(2):
            if name == "xjoin":
                with open(os.path.join(folder, "cgroup.procs"), "w") as f:
                    f.write(str(pid))
        hog.append(subprocess.Popen([sys.executable, "-c", HOG,
                                     os.path.join(folder, "cgroup.procs")]))

    def restore():
        for h in hog:
            h.kill()
            h.wait()
        for _ in range(50):
            try:
                os.rmdir(folder)
                return
            except OSError:
                time.sleep(0.1)
    return inject, restore


def case_faults(ctx):
    cl = ctx.cl
    host = cl.hostname
    fault_run(ctx, "link-cut", lambda: cl.link(2, False), [1, 3],
              lambda: cl.link(2, True),
              r"lost a rank: rank [23] on %s .*noticed by rank 0 on %s"
              % (host(2), host(1)))
    fault_run(ctx, "node-killed", lambda: cl.kill_node(2), [1, 3],
              lambda: None,
              r"lost a rank: rank [23] on %s" % host(2))

    def node1_dies():
        cl.link(1, False)
        cl.kill_node(1)

    fault_run(ctx, "rank0-node-dies", node1_dies, [2, 3],
              lambda: cl.link(1, True),
              r"lost a rank: rank 0 on %s .*noticed by rank 2 on %s"
              % (host(1), host(2)))
    # mpirun on a login node (node 4, no rank), as a user starts a job
    # outside an allocation: xjoin-mpirun's keepalive ends it too
    fault_run(ctx, "login-link-cut", lambda: cl.link(2, False), [1, 3, 4],
              lambda: cl.link(2, True),
              r"lost a rank: rank [23] on %s .*noticed by rank 0 on %s"
              % (host(2), host(1)), launch=4, wrapper=True)
    fault_run(ctx, "login-node-killed", lambda: cl.kill_node(2), [1, 3, 4],
              lambda: None, r"lost a rank: rank [23] on %s" % host(2),
              launch=4, wrapper=True)
    # node 2 out of memory: its ranks in a memory cgroup far below their
    # needs; the job ends, naming the rank and its host
    oom = oom_fault(ctx)
    if oom is None:
        say("node out of memory: skipped (no memory cgroup here)")
    else:
        fault_run(ctx, "node2-oom", oom[0], [1, 2, 3], oom[1],
                  r"lost a rank: rank [23] on %s" % host(2))
    slow_link(ctx)


def slow_link(ctx):
    cl, ck = ctx.cl, ctx.ck
    g = data(ctx, "fault.h5", FAULT_JOB_ROWS, FAULT_JOB_QUERIES,
             FAULT_JOB_DIM, 13)
    job = ["topk", "-q", g, "-b", g, "-k", 10, "--chunk-rows", 2000,
           "--checkpoint-seconds", 1, "--peer-timeout", PEER_TIMEOUT_S]
    out = ctx.path("fault-slow.h5")
    how = cl.degrade(2)
    say("slow link on node 2: %s" % "; ".join(how))
    try:
        p = ctx.mpirun([1, 2, 3], 2, job + ["-o", out, "--quiet"],
                       "slow, lossy link")
    finally:
        cl.restore(2)
    if ck.check(p.returncode == 0, "slow link: exit %d" % p.returncode):
        ctx.same(out, ctx.path("fault-ref.h5"), "slow link")
        ctx.no_leftovers(out, "slow link")
    ck.check("lost a rank" not in p.stderr, "slow link: a loss was "
             "reported")


# --- main ----------------------------------------------------------------

CASES = {"join": case_join, "faults": case_faults}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("case", choices=sorted(CASES) + ["slurm"])
    ap.add_argument("--xjoin", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--workdir", default=tempfile.gettempdir())
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    args.xjoin = os.path.abspath(args.xjoin)
    args.source = os.path.abspath(args.source)
    if args.case == "slurm":
        import cluster_slurm   # noqa: E402
        return cluster_slurm.main(args)
    try:
        vcluster.check_available()
    except vcluster.Unavailable as e:
        say("SKIPPED: %s" % e)
        return SKIP

    t0 = time.time()
    ck = Checks()
    os.makedirs(args.workdir, exist_ok=True)
    folder = tempfile.mkdtemp(prefix="cluster-%s-" % args.case,
                              dir=os.path.abspath(args.workdir))
    os.chmod(folder, 0o755)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, f: sys.exit(128 + s))
    cl = None
    error = None
    try:
        cl = vcluster.Cluster.create(4 if args.case == "faults" else 3,
                                     folder, watchdog_for=os.getpid())
        say("cluster %s: nodes %s on %s" % (cl.id, ", ".join(
            "%s %s" % (cl.hostname(i), cl.addr(i)) for i in cl.nodes),
            cl.subnet))
        CASES[args.case](Ctx(args, cl, ck))
    except Exception as e:   # noqa: BLE001 - reported, then torn down
        error = e
        ck.check(False, "%s: %s" % (type(e).__name__, e))
    finally:
        if cl is not None:
            cl.teardown()
        if ck.failed or args.keep:
            say("cluster folder kept: %s" % folder)
        else:
            subprocess.run(["rm", "-rf", folder])
    say("cluster.%s: %d checks, %d failed (%.0f s)"
        % (args.case, ck.n, len(ck.failed), time.time() - t0))
    for f in ck.failed:
        say("  FAILED: %s" % f)
    if error is not None:
        traceback.print_exception(error)
    return 1 if ck.failed or ck.n == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
