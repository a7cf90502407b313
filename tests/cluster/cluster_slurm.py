"""cluster_cases.py slurm: a Slurm cluster of namespace nodes.

One slurmd per node (in the node's namespaces, under its own hostname),
slurmctld on node 1, one munged for all of them on this machine (its
socket is a file, which every namespace sees). Jobs are submitted from
node 1, like from a login node. The cluster's processes carry
XJ_SLURM_TEST_DIR in their environment (tests/slurm/slurm_cases.py's
teardown ends them; vcluster's teardown ends everything inside a node).

Checks:
  - scripts/slurm/xjoin.sbatch topk through `sbatch -N 2
    --ntasks-per-node=2` and `sbatch -N 3 --ntasks-per-node=2`, ranks
    started by srun across the nodes: COMPLETED, output bit for bit equal
    to one rank on this machine, `ranks` 4 and 6;
  - a link cut on node 2 under srun: every process of the job step on
    nodes 1 and 3 (srun, the ranks and their stepds) ends within the
    bound, with xjoin's message naming the lost rank and node; the node is
    then returned to service and the job resumed through sbatch, bit for
    bit equal.
"""

import os
import re
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vcluster  # noqa: E402
import cluster_cases as cc  # noqa: E402

NODE_IDLE_TIMEOUT_S = 90


def slurm_helpers(source):
    sys.path.insert(0, os.path.join(source, "tests", "slurm"))
    import slurm_cases  # noqa: E402
    return slurm_cases


class SlurmOnNodes:
    def __init__(self, cl, sc):
        self.cl, self.sc = cl, sc
        self.dir = os.path.join(cl.dir, "slurm")
        # what holds Unix sockets (a step's, PMIx's) lives under /run:
        # a socket's path is at most 108 bytes, which a checkout's
        # folders can exceed
        self.sock_dir = os.path.join(cl.run_dir, "slurm")
        for sub in ("state", "log"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        for sub in ("spool", "tmp"):
            os.makedirs(os.path.join(self.sock_dir, sub), exist_ok=True)
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.env = sc.clean_env()
        self.env["SLURM_CONF"] = self.conf
        self.env[sc.MARK] = self.dir

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def on(self, i, argv, timeout=60, check=True, env=None):
        p = subprocess.run(self.cl.enter(i) + [str(a) for a in argv],
                           env=env or self.env, capture_output=True,
                           text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise RuntimeError("node %d: %s: exit %d\n%s%s" % (
                i, " ".join(map(str, argv)), p.returncode, p.stdout,
                p.stderr))
        return p

    def start(self):
        sc, cl = self.sc, self.cl
        mdir = tempfile.mkdtemp(prefix="xjoin-munge-", dir=sc.munge_parent())
        os.chmod(mdir, 0o755)
        with open(self.path("munge.dir"), "w") as f:
            f.write(mdir + "\n")
        key = os.path.join(mdir, "munge.key")
        with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
            f.write(os.urandom(1024))
        hw = sc.node_hardware(self.env)
        hw = " ".join(f for f in hw.split() if not f.startswith("Boards"))
        nodes = "\n".join(
            "NodeName=%s NodeHostname=%s NodeAddr=%s %s State=UNKNOWN"
            % (cl.hostname(i), cl.hostname(i), cl.addr(i), hw)
            for i in cl.nodes)
        first_job = 1000 + (os.getpid() % 50000) * 1000
        conf = """\
# A test cluster of %(n)d namespace nodes, written by xjoin's
# tests/cluster/cluster_slurm.py.
ClusterName=xjcluster
SlurmctldHost=%(head)s(%(head_addr)s)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%(mdir)s/munge.sock,cred_expire=10
StateSaveLocation=%(d)s/state
SlurmdSpoolDir=%(s)s/spool/%%n
TmpFS=%(s)s/tmp
FirstJobId=%(first_job)d
SlurmctldPidFile=%(d)s/slurmctld.pid
SlurmdPidFile=%(d)s/slurmd.%%n.pid
SlurmctldLogFile=%(d)s/log/slurmctld.log
SlurmdLogFile=%(d)s/log/slurmd.%%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=2
MpiDefault=none
ReturnToService=2
MinJobAge=60
KillWait=5
InactiveLimit=0
SlurmctldTimeout=60
SlurmdTimeout=30
MessageTimeout=10
%(nodes)s
PartitionName=xjcluster Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""" % dict(n=cl.n, head=cl.hostname(1), head_addr=cl.addr(1), mdir=mdir,
           d=self.dir, s=self.sock_dir, first_job=first_job, nodes=nodes)
        with open(self.conf, "w") as f:
            f.write(conf)
        for i in cl.nodes:
            os.makedirs(os.path.join(self.sock_dir, "spool", cl.hostname(i)),
                        exist_ok=True)
            os.makedirs(os.path.join(self.sock_dir, "tmp-%d" % i),
                        exist_ok=True)
        subprocess.run(["munged", "--socket=%s/munge.sock" % mdir,
                        "--key-file=%s" % key,
                        "--pid-file=%s/munged.pid" % mdir,
                        "--seed-file=%s/munged.seed" % mdir,
                        "--log-file=%s" % self.path("log", "munged.log")],
                       env=self.env, check=True, capture_output=True)
        self.on(1, ["slurmctld", "-f", self.conf])
        for i in cl.nodes:
            self.start_slurmd(i)
        self.wait_idle(cl.nodes)

    def start_slurmd(self, i):
        """slurmd of node i, with a node-local TmpFS: the PMIx plugin
        makes TmpFS/spmix_appdir_<uid>_<job>.<step> on every node of a
        step, which on one shared folder would collide. A mount namespace
        of the node's own binds its folder over TmpFS."""
        cmd = "mount --bind %s %s && exec slurmd -f %s -N %s" % (
            os.path.join(self.sock_dir, "tmp-%d" % i),
            os.path.join(self.sock_dir, "tmp"), self.conf,
            self.cl.hostname(i))
        self.on(i, ["unshare", "--mount", "--propagation", "private",
                    "sh", "-c", cmd])

    def node_state(self, i):
        p = self.on(1, ["scontrol", "show", "node", self.cl.hostname(i)],
                    check=False)
        m = re.search(r"State=(\S+)", p.stdout)
        return m.group(1) if m else p.stderr.strip()

    def wait_idle(self, nodes):
        t0 = time.time()
        while time.time() - t0 < NODE_IDLE_TIMEOUT_S:
            states = [self.node_state(i) for i in nodes]
            if all(s == "IDLE" for s in states):
                cc.say("slurm: nodes %s idle after %.1f s" % (
                    nodes, time.time() - t0))
                return
            time.sleep(0.5)
        raise RuntimeError("slurm nodes not idle after %d s: %s"
                           % (NODE_IDLE_TIMEOUT_S, states))

    def job_env(self, xjoin):
        env = dict(self.env)
        env.update(XJOIN_BIN=xjoin, XJOIN_LAUNCHER="srun",
                   OMPI_ALLOW_RUN_AS_ROOT="1",
                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMP_WAIT_POLICY="passive", OMP_NUM_THREADS="1",
                   # Open MPI inside srun: TCP on the cluster's subnet
                   OMPI_MCA_btl_tcp_if_include=self.cl.subnet,
                   OMPI_MCA_oob_tcp_if_include=self.cl.subnet)
        return env

    def sbatch(self, source, xjoin, nodes, xjoin_argv, log, wait=True):
        argv = (["sbatch", "--parsable", "-N", nodes,
                 "--ntasks-per-node=2", "--output", log] +
                (["--wait"] if wait else []) +
                [os.path.join(source, "scripts", "slurm", "xjoin.sbatch")] +
                [str(a) for a in xjoin_argv])
        return subprocess.Popen(self.cl.enter(1) + [str(a) for a in argv],
                                env=self.job_env(xjoin), text=True,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)

    def job_info(self, jobid):
        p = self.on(1, ["scontrol", "-o", "show", "job", jobid], check=False)
        return dict(re.findall(r"(\w+)=(\S*)", p.stdout))

    def dump_logs(self, limit=30):
        for name in sorted(os.listdir(self.path("log"))):
            with open(self.path("log", name), errors="replace") as f:
                lines = f.read().splitlines()[-limit:]
            cc.say("--- %s ---\n%s" % (name, "\n".join(lines)))

    def stop(self):
        self.sc.teardown(self.dir, None)


def step_processes(ctx, nodes):
    """The job's processes on nodes: everything but the Slurm daemons."""
    keep = ("slurmd", "slurmctld", "slurmscriptd", "munged")
    return {i: [(p, n) for p, n in ctx.cl.processes(i) if n not in keep]
            for i in nodes}


def started(text):
    """Whether rank 0 got as far as the job table: a job that ended before
    it failed in the launcher's or MPI's start-up, not in xjoin's work."""
    return "| output " in text


def run_batch(ctx, sl, nodes, job, out, what):
    """Run job through sbatch and check it finished. A job that failed
    before xjoin printed its table (seen once in many runs: a rank's
    segfault inside MPI_Init under srun's PMIx, with nothing of xjoin's
    run yet) is run once more, and the log says so."""
    first = cc.Checks()
    ok, text = run_batch_once(ctx, sl, nodes, job, out, what, first)
    if ok or started(text) or "running: srun" not in text:
        ctx.ck.n += first.n
        ctx.ck.failed += first.failed
        return ok, text
    cc.say("NOTE: %s: the job failed before xjoin's job table (MPI "
           "start-up); running it once more" % what)
    return run_batch_once(ctx, sl, nodes, job, out, what + " (again)",
                          ctx.ck)


def run_batch_once(ctx, sl, nodes, job, out, what, ck):
    log = ctx.path("%s.log" % what.replace(" ", "-"))
    t0 = time.time()
    p = sl.sbatch(ctx.args.source, ctx.args.xjoin, nodes, job + ["-o", out],
                  log)
    try:
        sout, serr = p.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        p.kill()
        sout, serr = p.communicate()
        serr += " (no end after 300 s)"
    jobid = sout.strip().split(";")[0]
    cc.say("%s: job %s, sbatch --wait exit %d (%.1f s)"
           % (what, jobid, p.returncode, time.time() - t0))
    text = open(log).read() if os.path.exists(log) else ""
    ok = ck.check(p.returncode == 0, "%s: sbatch exit %d (%s)"
                  % (what, p.returncode, serr.strip()))
    ok &= ck.check("running: srun" in text and "xjoin finished" in text,
                   "%s: the log shows no srun run that finished" % what)
    info = sl.job_info(jobid)
    # sbatch --wait returns when the job's steps end; slurmctld may still
    # hold the job in COMPLETING while the nodes' epilogs run. Wait that out
    # (bounded), then ask for COMPLETED.
    t_end = time.time() + 30
    while info.get("JobState") == "COMPLETING" and time.time() < t_end:
        time.sleep(0.5)
        info = sl.job_info(jobid)
    ok &= ck.check(info.get("JobState") in ("COMPLETED", None) or not info,
                   "%s: JobState=%s" % (what, info.get("JobState")))
    if not ok:
        cc.say("--- %s ---\n%s" % (log, text[-4000:]))
    return ok, text


def case_slurm_body(ctx, sl):
    ck, cl = ctx.ck, ctx.cl
    import h5py
    g = cc.data(ctx, "slurm.h5", 20000, 1500, 32, 21)
    job = ["topk", "-q", g, "-b", g, "-k", 10, "-m", "cosine"]
    ref = ctx.path("slurm-ref.h5")
    if ctx.local(job + ["-o", ref, "--quiet"], "slurm ref") != 0:
        ck.check(False, "slurm: one rank failed")
        return
    for nodes in (2, 3):
        out = ctx.path("slurm-N%d.h5" % nodes)
        ok, _ = run_batch(ctx, sl, nodes, job, out, "sbatch -N %d" % nodes)
        if ok and ctx.same(out, ref, "sbatch -N %d" % nodes):
            with h5py.File(out, "r") as h5:
                ck.check(int(h5.attrs["ranks"]) == 2 * nodes,
                         "sbatch -N %d: ranks %s" % (nodes,
                                                     h5.attrs["ranks"]))
        ctx.no_leftovers(out, "sbatch -N %d" % nodes)
    link_cut_under_srun(ctx, sl)


def link_cut_under_srun(ctx, sl):
    ck, cl = ctx.ck, ctx.cl
    g = cc.data(ctx, "fault.h5", cc.FAULT_JOB_ROWS, cc.FAULT_JOB_QUERIES,
                cc.FAULT_JOB_DIM, 13)
    job = ["topk", "-q", g, "-b", g, "-k", 10, "--chunk-rows", 2000,
           "--checkpoint-seconds", 1, "--peer-timeout", cc.PEER_TIMEOUT_S]
    ref = ctx.path("fault-ref.h5")
    if not os.path.exists(ref) and \
       ctx.local(job + ["-o", ref, "--quiet"], "fault ref") != 0:
        ck.check(False, "srun link cut: one rank failed")
        return
    out = ctx.path("srun-cut.h5")
    log = ctx.path("srun-cut.log")
    p = sl.sbatch(ctx.args.source, ctx.args.xjoin, 3, job + ["-o", out],
                  log, wait=False)
    sout, _ = p.communicate(timeout=60)
    jobid = sout.strip().split(";")[0]
    t0 = time.time()
    while time.time() - t0 < 180 and not os.path.exists(out + ".progress"):
        time.sleep(0.2)
    if not ck.check(os.path.exists(out + ".progress"),
                    "srun link cut: no progress recorded"):
        sl.on(1, ["scancel", jobid], check=False)
        return
    time.sleep(1)
    t_fault = time.time()
    cl.link(2, False)
    limit = cc.BOUND_S + cc.SLACK_S
    gone = None
    while time.time() - t_fault < limit:
        left = step_processes(ctx, [1, 3])
        if not any(left.values()):
            gone = time.time() - t_fault
            break
        time.sleep(0.25)
    cc.say("srun link cut: nodes 1 and 3 free of the job after %s s "
           "(bound %.1f s)" % ("%.1f" % gone if gone else "NEVER",
                               cc.BOUND_S))
    ck.check(gone is not None, "srun link cut: processes left on nodes 1 "
             "and 3 after %.0f s: %s" % (limit, step_processes(ctx, [1, 3])))
    text = open(log).read() if os.path.exists(log) else ""
    ck.check(re.search(r"lost a rank: rank [23] on %s" % cl.hostname(2),
                       text), "srun link cut: no message naming a rank of "
             "%s in the job log" % cl.hostname(2))
    ck.check(not os.path.exists(out), "srun link cut: an output at the path")
    ctx.no_leftovers(out, "srun link cut", partial_expected=True)
    cl.link(2, True)
    cl.kill_node(2)      # what the cut-off node still ran
    # the cut-off slurmd was killed too: start it again, return the node
    sl.start_slurmd(2)
    sl.on(1, ["scontrol", "update", "nodename=" + cl.hostname(2),
              "state=resume"], check=False)
    sl.wait_idle(cl.nodes)
    ok, _ = run_batch(ctx, sl, 3, job, out, "srun link cut, resumed")
    if ok:
        ctx.same(out, ref, "srun link cut, resumed")
        ctx.no_leftovers(out, "srun link cut, resumed")
    if not ck.failed:
        return
    cc.say("--- %s ---\n%s" % (log, text[-4000:]))


def main(args):
    sc = slurm_helpers(args.source)
    try:
        vcluster.check_available()
        sc.munge_parent()
        sc.ensure_slurm()
    except (vcluster.Unavailable, sc.Skip) as e:
        cc.say("SKIPPED: %s" % e)
        return cc.SKIP
    t0 = time.time()
    ck = cc.Checks()
    os.makedirs(args.workdir, exist_ok=True)
    folder = tempfile.mkdtemp(prefix="cluster-slurm-",
                              dir=os.path.abspath(args.workdir))
    os.chmod(folder, 0o755)
    cl = sl = None
    error = None
    try:
        cl = vcluster.Cluster.create(3, folder, watchdog_for=os.getpid())
        sl = SlurmOnNodes(cl, sc)
        sl.start()
        case_slurm_body(cc.Ctx(args, cl, ck), sl)
    except Exception as e:   # noqa: BLE001 - reported, then torn down
        error = e
        ck.check(False, "%s: %s" % (type(e).__name__, e))
    finally:
        if sl is not None and ck.failed:
            sl.dump_logs()
        if cl is not None:
            cl.teardown()
        if sl is not None:
            sl.stop()
        if ck.failed or args.keep:
            cc.say("cluster folder kept: %s" % folder)
        else:
            subprocess.run(["rm", "-rf", folder])
    cc.say("cluster.slurm: %d checks, %d failed (%.0f s)"
           % (ck.n, len(ck.failed), time.time() - t0))
    for f in ck.failed:
        cc.say("  FAILED: %s" % f)
    if error is not None:
        traceback.print_exception(error)
    return 1 if ck.failed or ck.n == 0 else 0
