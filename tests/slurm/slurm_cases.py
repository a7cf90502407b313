#!/usr/bin/python3
"""Real-Slurm tests of scripts/slurm/xjoin.sbatch on a one-node cluster.

    slurm_cases.py CASE --xjoin PATH --source DIR [--mpiexec PATH]
                   [--glove FILE] [--workdir DIR] [--keep]
    slurm_cases.py teardown DIR [--after-pid PID]

Each case starts its own cluster on this machine: munged with a key of its
own, slurmctld and slurmd from a slurm.conf written for this node (its CPUs
and memory from `slurmd -C`, free ports, state, spool and logs in a
temporary folder), waits for the node to be idle, runs its jobs through
sbatch and always tears the cluster down, even on failure. Debian's
slurm-wlm and munge are installed when missing. Every process the cluster
starts carries XJ_SLURM_TEST_DIR=<its folder> in its environment, and
teardown ends exactly those. A detached watchdog (`teardown DIR
--after-pid PID`) does the same if this driver dies without doing it (a
ctest timeout kills with SIGKILL).

Cases:
  batch    GloVe (glove-100d-100k.h5, else data/glove-demo.h5), 2 tasks,
           `sbatch --wait --nodes=1 --ntasks-per-node=2` with
           XJOIN_LAUNCHER=srun and `sbatch --wait -N 1 -n 2` with mpirun: exit 0,
           job COMPLETED, output bit for bit equal to the same job run
           directly with mpiexec and, for its first query rows, to
           tests/integration/reference.py
  requeue  a generated job of a minute or more on 2 cores, submitted with
           --time=1 --signal=B:USR1@15: Slurm's warning interrupts it (exit
           5), the script requeues it, a later run is also stopped with
           `scancel --batch --signal=USR1`, and the job finally completes
           with output bit for bit equal to an uninterrupted run

Exit status: 0 all checks passed, 1 a check failed, 77 skipped (Slurm
cannot run here: not root, or it cannot be installed), with the reason.
The cluster folder is kept (and named) after a failure or with --keep.
"""

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

SKIP = 77
MARK = "XJ_SLURM_TEST_DIR"
NODE = "xjnode"
PARTITION = "xjtest"
PACKAGES = ("slurm-wlm", "munge")
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "scontrol", "scancel", "squeue", "sinfo", "srun")
SBIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NODE_IDLE_TIMEOUT_S = 60
STOP_TIMEOUT_S = 15

# requeue: the generated job and its forced chunks, small enough that a
# signal is answered within a second and a run's progress is recorded
# query chunk by chunk. Its work must outlast Slurm's first warning (15
# to 45 s into a run): with 300,000 queries it took 75 to 150 s on the
# 2-core development machine, and 45 s on a faster one (2026-11-27: no
# warning came, the job was never requeued), so 450,000
GEN_ROWS, GEN_QUERIES, GEN_DIM, GEN_SEED = 400000, 450000, 32, 11
CHUNK_ROWS = 4096
TIME_LIMIT = "1"             # minutes: Slurm's smallest
WARN = "B:USR1@15"           # sent 15 to 45 s into each run
# the scancel --batch --signal=USR1 goes to the first restart this long
# after it starts xjoin
MANUAL_SIGNAL_AFTER_S = 6


class Skip(Exception):
    pass


def say(msg):
    print(msg, flush=True)


def clean_env():
    """This environment without any Slurm job's variables (when ctest runs
    inside an allocation), with the sbin folders on PATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "SBATCH_", "SALLOC_", "SRUN_"))}
    env["PATH"] = env.get("PATH", "") + ":" + SBIN_PATH
    env.pop(MARK, None)
    return env


def which(name):
    return shutil.which(name, path=clean_env()["PATH"])


# --- installing ----------------------------------------------------------

def _apt_install(env):
    return subprocess.run(["apt-get", "install", "-y",
                           "--no-install-recommends"] + list(PACKAGES),
                          env=env).returncode == 0


def ensure_slurm():
    """Install slurm-wlm and munge when a program is missing; Skip when
    that cannot be done."""
    missing = [p for p in DAEMONS + CLIENTS if not which(p)]
    if not missing:
        return
    if not which("apt-get"):
        raise Skip("%s missing and no apt-get to install %s"
                   % (", ".join(missing), " ".join(PACKAGES)))
    say("installing %s (missing: %s)" % (" ".join(PACKAGES),
                                         ", ".join(missing)))
    env = clean_env()
    env["DEBIAN_FRONTEND"] = "noninteractive"
    # the packages' scripts would start the system's own daemons; this
    # test runs private ones, so keep them off while installing (the
    # usual policy-rc.d of containers), unless the machine has a policy
    policy = "/usr/sbin/policy-rc.d"
    own_policy = not os.path.exists(policy)
    try:
        if own_policy:
            with open(policy, "w") as f:
                f.write("#!/bin/sh\n# written by xjoin's tests/slurm "
                        "while installing; removed after\nexit 101\n")
            os.chmod(policy, 0o755)
        ok = _apt_install(env)
        if not ok:
            subprocess.run(["apt-get", "update"], env=env)
            ok = _apt_install(env)
    finally:
        if own_policy and os.path.exists(policy):
            os.remove(policy)
    missing = [p for p in DAEMONS + CLIENTS if not which(p)]
    if not ok or missing:
        raise Skip("could not install %s (still missing: %s)"
                   % (" ".join(PACKAGES), ", ".join(missing) or "none"))


# --- processes of a cluster ----------------------------------------------

def marked_pids(folder):
    """Processes whose environment has MARK=folder, this one excepted."""
    want = ("%s=%s" % (MARK, folder)).encode()
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                if want in f.read().split(b"\0"):
                    pids.append(int(name))
        except OSError:
            pass
    return pids


def _signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def teardown(folder, env=None):
    """Cancel the cluster's jobs, then end every process it started:
    SIGTERM, and SIGKILL for whatever is left after STOP_TIMEOUT_S."""
    conf = os.path.join(folder, "slurm.conf")
    if env is not None and os.path.exists(conf) and marked_pids(folder):
        try:
            subprocess.run(["scancel", "--partition", PARTITION], env=env,
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            pass   # the signals below end the jobs too
    pids = marked_pids(folder)
    _signal_all(pids, signal.SIGTERM)
    deadline = time.time() + STOP_TIMEOUT_S
    while pids and time.time() < deadline:
        time.sleep(0.25)
        pids = marked_pids(folder)
    if pids:
        say("teardown: SIGKILL to %s" % " ".join(map(str, pids)))
        _signal_all(pids, signal.SIGKILL)
    remove_munge_dir(folder)
    with open(os.path.join(folder, "teardown.done"), "w"):
        pass


def watchdog_main(folder, after_pid):
    """Wait for the driver to end; tear down if it did not."""
    with open(os.path.join(folder, "watchdog.pid"), "w") as f:
        f.write("%d\n" % os.getpid())
    done = os.path.join(folder, "teardown.done")
    while not os.path.exists(done):
        try:
            os.kill(after_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(1)
    if os.path.isdir(folder) and not os.path.exists(done):
        teardown(folder)
    return 0


def searchable_by_all(path):
    """Whether every folder from / down to path is open (x) to all, as
    munged requires of the folders above its socket."""
    path = os.path.abspath(path)
    while True:
        try:
            if not os.stat(path).st_mode & 0o001:
                return False
        except OSError:
            return False
        if path == "/":
            return True
        path = os.path.dirname(path)


def munge_parent():
    """A folder for munged's socket that every user can reach, whatever
    the checkout's own folders allow (a clone under /root or inside a
    `mktemp -d` is not reachable)."""
    for cand in ("/run", tempfile.gettempdir(), "/tmp", "/var/tmp"):
        if os.path.isdir(cand) and searchable_by_all(cand) and \
           os.access(cand, os.W_OK):
            return cand
    raise Skip("no folder open to all users for munged's socket "
               "(tried /run, /tmp, /var/tmp)")


def remove_munge_dir(folder):
    """Remove the munge folder the cluster in folder named (munge.dir)."""
    try:
        with open(os.path.join(folder, "munge.dir")) as f:
            mdir = f.read().strip()
    except OSError:
        return
    if os.path.basename(mdir).startswith("xjoin-munge-"):
        shutil.rmtree(mdir, ignore_errors=True)


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def node_hardware(env):
    """CPUs, sockets, cores, threads and RealMemory as `slurmd -C` sees
    them (its NodeName line, less the name)."""
    out = subprocess.run(["slurmd", "-C"], env=env, capture_output=True,
                         text=True, timeout=60).stdout
    for line in out.splitlines():
        if line.startswith("NodeName="):
            fields = [f for f in line.split() if not f.startswith("NodeName=")]
            return " ".join(fields)
    raise RuntimeError("slurmd -C printed no NodeName line:\n%s" % out)


class Cluster:
    """One node, this machine, run as root from a private folder."""

    def __init__(self, workdir, keep):
        os.makedirs(workdir, exist_ok=True)
        self.dir = tempfile.mkdtemp(prefix="slurm-", dir=workdir)
        os.chmod(self.dir, 0o755)
        self.keep = keep
        self.conf = self.path("slurm.conf")
        self.env = clean_env()
        self.env["SLURM_CONF"] = self.conf
        self.env[MARK] = self.dir

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def run(self, argv, timeout=60, check=True):
        p = subprocess.run(argv, env=self.env, capture_output=True,
                           text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise RuntimeError("%s: exit %d\n%s%s" % (" ".join(argv),
                               p.returncode, p.stdout, p.stderr))
        return p

    def _start_watchdog(self):
        # setsid -f detaches it from this process tree, which a ctest
        # timeout kills whole
        with open(self.path("watchdog.log"), "w") as log:
            subprocess.run(["setsid", "-f", sys.executable,
                            os.path.abspath(__file__), "teardown", self.dir,
                            "--after-pid", str(os.getpid())],
                           env=clean_env(), stdin=subprocess.DEVNULL,
                           stdout=log, stderr=subprocess.STDOUT, check=True)

    def _write_munge(self):
        # munged wants every folder above its socket open to all, which
        # the checkout's folders need not be: its folder lives apart,
        # named in munge.dir so that teardown (also the watchdog's)
        # removes it; its log stays with the cluster's
        d = tempfile.mkdtemp(prefix="xjoin-munge-", dir=munge_parent())
        os.chmod(d, 0o755)
        with open(self.path("munge.dir"), "w") as f:
            f.write(d + "\n")
        key = os.path.join(d, "munge.key")
        with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
            f.write(os.urandom(1024))
        return d

    def _write_conf(self, mdir):
        host = socket.gethostname().split(".")[0]
        ctld_port, node_port = free_ports(2)
        for sub in ("state", "log"):
            os.mkdir(self.path(sub), 0o755)
        # Unix sockets (a step's, PMIx's) go beside munged's, under /run:
        # a socket path holds at most 108 bytes, a checkout's need not
        for sub in ("spool", "tmp"):
            os.mkdir(os.path.join(mdir, sub), 0o755)
        # job ids and TmpFS of its own: the PMIx plugin makes
        # TmpFS/spmix_appdir_<uid>_<job>.<step>, which another cluster on
        # this machine (also starting at job 1) would collide with
        first_job = 1000 + (os.getpid() % 50000) * 1000
        hw = node_hardware(self.env)
        conf = """\
# A one-node test cluster, written by xjoin's tests/slurm/slurm_cases.py.
ClusterName=xjtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={node_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire also delays the restart of a requeued job (default 120 s)
AuthInfo=socket={mdir}/munge.sock,cred_expire=10
StateSaveLocation={d}/state
SlurmdSpoolDir={mdir}/spool
TmpFS={mdir}/tmp
FirstJobId={first_job}
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
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
JobRequeue=1
MinJobAge=120
KillWait=10
InactiveLimit=0
SlurmctldTimeout=60
SlurmdTimeout=120
NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 {hw} State=UNKNOWN
PartitionName={part} Nodes={node} Default=YES MaxTime=INFINITE State=UP
""".format(host=host, ctld_port=ctld_port, node_port=node_port, mdir=mdir,
           d=self.dir, hw=hw, node=NODE, part=PARTITION, first_job=first_job)
        with open(self.conf, "w") as f:
            f.write(conf)

    def start(self):
        self._start_watchdog()
        mdir = self._write_munge()
        self._write_conf(mdir)
        self.run(["munged", "--socket=%s/munge.sock" % mdir,
                  "--key-file=%s/munge.key" % mdir,
                  "--pid-file=%s/munged.pid" % mdir,
                  "--seed-file=%s/munged.seed" % mdir,
                  "--log-file=%s" % self.path("log", "munged.log")])
        self.run(["slurmctld", "-f", self.conf])
        self.run(["slurmd", "-f", self.conf, "-N", NODE])
        self.wait_idle()

    def wait_idle(self):
        t0 = time.time()
        state = ""
        while time.time() - t0 < NODE_IDLE_TIMEOUT_S:
            p = self.run(["scontrol", "show", "node", NODE], check=False)
            m = re.search(r"State=(\S+)", p.stdout)
            state = m.group(1) if m else p.stderr.strip()
            if state == "IDLE":
                say("cluster up in %.1f s: %s, node %s idle (%s)"
                    % (time.time() - t0, self.version(), NODE, self.dir))
                return
            time.sleep(0.5)
        raise RuntimeError("node %s not idle after %d s: %s"
                           % (NODE, NODE_IDLE_TIMEOUT_S, state))

    def version(self):
        return self.run(["sinfo", "--version"]).stdout.strip()

    def job_info(self, jobid):
        """scontrol show job as {key: value} (empty once it is gone)."""
        p = self.run(["scontrol", "-o", "show", "job", str(jobid)],
                     check=False)
        return dict(re.findall(r"(\w+)=(\S*)", p.stdout))

    def dump_logs(self, limit=40):
        if not os.path.isdir(self.path("log")):
            return
        for name in sorted(os.listdir(self.path("log"))):
            with open(self.path("log", name), errors="replace") as f:
                lines = f.read().splitlines()[-limit:]
            say("--- %s (last %d lines) ---\n%s"
                % (name, len(lines), "\n".join(lines)))

    def stop(self, failed):
        teardown(self.dir, self.env)
        try:
            with open(self.path("watchdog.pid")) as f:
                os.kill(int(f.read()), signal.SIGTERM)
        except (OSError, ValueError):
            pass
        if failed or self.keep:
            say("cluster folder kept: %s" % self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


# --- checks --------------------------------------------------------------

class Checks:
    def __init__(self):
        self.n = 0
        self.failed = []

    def check(self, ok, what):
        self.n += 1
        if not ok:
            self.failed.append(what)
            say("FAIL: %s" % what)
        return bool(ok)


def load_helpers(source):
    sys.path.insert(0, os.path.join(source, "tests", "integration"))
    import compare  # noqa: E402
    import reference  # noqa: E402
    return compare, reference


def job_env(cl, xjoin, launcher):
    env = dict(cl.env)
    env.update(XJOIN_BIN=xjoin, XJOIN_LAUNCHER=launcher,
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_WAIT_POLICY="passive")
    return env


def sbatch_argv(args, log, extra, xjoin_argv,
                layout=("--nodes=1", "--ntasks-per-node=2")):
    return (["sbatch", "--wait", "--parsable"] + list(layout) +
            ["--output", log] + extra +
            [os.path.join(args.source, "scripts", "slurm", "xjoin.sbatch")] +
            [str(a) for a in xjoin_argv])


def mpiexec_run(args, cl, nranks, xjoin_argv, what, timeout=600):
    """xjoin straight under mpiexec (no Slurm): (rc, seconds)."""
    env = job_env(cl, args.xjoin, "mpirun")
    argv = [args.mpiexec, "--oversubscribe", "--bind-to", "none", "-np",
            str(nranks), args.xjoin] + [str(a) for a in xjoin_argv]
    t0 = time.time()
    p = subprocess.run(argv, env=env, capture_output=True, text=True,
                       timeout=timeout)
    dt = time.time() - t0
    say("%s: mpiexec -np %d xjoin %s -> %d (%.1f s)"
        % (what, nranks, " ".join(argv[7:]), p.returncode, dt))
    if p.returncode != 0:
        say("--- stdout ---\n%s\n--- stderr ---\n%s"
            % (p.stdout[-3000:], p.stderr[-3000:]))
    return p.returncode, dt


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def check_final_state(ck, cl, jobid, what, restarts=None):
    info = cl.job_info(jobid)
    ck.check(info.get("JobState") == "COMPLETED" and
             info.get("ExitCode") == "0:0",
             "%s: scontrol: JobState=%s ExitCode=%s, expected COMPLETED "
             "0:0" % (what, info.get("JobState"), info.get("ExitCode")))
    if restarts is not None:
        n = int(info.get("Restarts", "0") or 0)
        ck.check(n >= restarts, "%s: scontrol: Restarts=%d, expected >= %d"
                 % (what, n, restarts))
    return info


def check_no_leftovers(ck, out, what):
    for ext in (".partial", ".progress"):
        ck.check(not os.path.exists(out + ext),
                 "%s: %s%s left behind" % (what, out, ext))


# --- case batch -----------------------------------------------------------

def glove_file(args):
    if os.path.exists(args.glove):
        return args.glove
    return os.path.join(args.source, "data", "glove-demo.h5")


def case_batch(args, cl, ck):
    """GloVe top-k through sbatch, srun then mpirun, against mpiexec."""
    compare, reference = load_helpers(args.source)
    import h5py
    g = glove_file(args)
    say("data: %s (queries /test, base /train)" % g)
    job = ["topk", "-q", g, "-b", g, "-k", 10, "-m", "cosine"]
    direct = cl.path("direct.h5")
    rc, _ = mpiexec_run(args, cl, 2, job + ["-o", direct], "direct")
    if not ck.check(rc == 0, "direct mpiexec run: exit %d" % rc):
        return
    with h5py.File(g, "r") as h5:
        q = h5["test"][:100]
        b = h5["train"][...]
    t0 = time.time()
    nbr, dist = reference.topk(q, b, 10, "cosine")
    ref = cl.path("reference.h5")
    reference.write(ref, neighbors=nbr, distances=dist)
    with h5py.File(direct, "r") as h5:
        head = cl.path("direct-head.h5")
        reference.write(head, neighbors=h5["neighbors"][:len(q)],
                        distances=h5["distances"][:len(q)])
    bad = compare.compare(head, ref)
    ck.check(bad == 0, "direct run, first %d queries: %d entries differ "
             "from reference.py" % (len(q), bad))
    say("reference.py on the first %d queries: %.1f s, %d entries differ"
        % (len(q), time.time() - t0, bad))

    # the layouts users type: -N with --ntasks-per-node, and a plain -n
    for launcher, layout in (("srun", ("--nodes=1", "--ntasks-per-node=2")),
                             ("mpirun", ("-N", "1", "-n", "2"))):
        what = "sbatch %s (%s)" % (" ".join(layout), launcher)
        out = cl.path("out-%s.h5" % launcher)
        log = cl.path("job-%s.log" % launcher)
        argv = sbatch_argv(args, log, ["--job-name=xj-" + launcher],
                           job + ["-o", out], layout)
        t0 = time.time()
        p = subprocess.run(argv, env=job_env(cl, args.xjoin, launcher),
                           capture_output=True, text=True, timeout=600)
        jobid = p.stdout.strip().split(";")[0]
        say("%s: job %s, sbatch --wait exit %d (%.1f s)"
            % (what, jobid, p.returncode, time.time() - t0))
        text = read(log)
        ok = ck.check(p.returncode == 0, "%s: sbatch --wait exit %d, "
                      "expected 0 (%s)" % (what, p.returncode,
                                           p.stderr.strip()))
        ok &= ck.check("xjoin finished" in text and "# OK topk" in text,
                       "%s: the log does not say the job finished" % what)
        # mpirun starts through xjoin-mpirun (the batch script's choice)
        ok &= ck.check(("running: %s " % launcher) in text or
                       (launcher == "mpirun" and
                        re.search(r"running: \S*xjoin-mpirun ", text)),
                       "%s: the log does not show the %s launch"
                       % (what, launcher))
        check_final_state(ck, cl, jobid, what)
        if ck.check(os.path.exists(out), "%s: no output %s" % (what, out)):
            bad = compare.compare(out, direct)
            ok &= ck.check(bad == 0, "%s: %d entries differ from the direct "
                           "run" % (what, bad))
            with h5py.File(out, "r") as h5:
                ranks = int(h5.attrs.get("ranks", -1))
            ok &= ck.check(ranks == 2, "%s: attribute ranks %d, expected 2"
                           % (what, ranks))
        check_no_leftovers(ck, out, what)
        if not ok:
            say("--- %s ---\n%s" % (log, text[-4000:]))


# --- case requeue ---------------------------------------------------------

def _first_restart_running(text):
    """Whether the log shows the first restart launching xjoin."""
    at = text.find("SLURM_RESTART_COUNT=1 ")
    return at >= 0 and "running: " in text[at:]


def _job_id(cl, name, p):
    """The id of the job named name, once squeue lists it."""
    while p.poll() is None:
        r = cl.run(["squeue", "-h", "-n", name, "-o", "%i"], check=False)
        if r.stdout.strip():
            return r.stdout.split()[0]
        time.sleep(0.5)
    return None


def _watch_and_signal(cl, p, jobid, log):
    """While sbatch --wait runs: once the first restart has started xjoin,
    send it `scancel --batch --signal=USR1` (the way to checkpoint and
    requeue by hand). Returns when the job ends; True if it was sent."""
    sent = tried = False
    seen_at = None
    while p.poll() is None:
        if seen_at is None and _first_restart_running(read(log)):
            seen_at = time.time()
        if not tried and seen_at is not None and \
           time.time() - seen_at >= MANUAL_SIGNAL_AFTER_S:
            tried = True
            r = cl.run(["scancel", "--batch", "--signal=USR1", str(jobid)],
                       check=False)
            say("scancel --batch --signal=USR1 %s -> %d %s"
                % (jobid, r.returncode, r.stderr.strip()))
            sent = r.returncode == 0
        time.sleep(0.5)
    return sent


def case_requeue(args, cl, ck):
    """Time limit, USR1, requeue, resume: same bits as without Slurm."""
    compare, _ = load_helpers(args.source)
    data = cl.path("gen.h5")
    rc, _ = mpiexec_run(args, cl, 1, ["gen", "--rows", GEN_ROWS, "--dim",
                                      GEN_DIM, "--queries", GEN_QUERIES,
                                      "--seed", GEN_SEED, "--quiet",
                                      "-o", data], "input")
    if not ck.check(rc == 0, "xjoin gen: exit %d" % rc):
        return
    # The reference runs with the planner's chunks (results do not depend
    # on chunking); the Slurm job records progress after every chunk. Its
    # work (GEN_QUERIES) must outlast Slurm's first warning, which comes
    # 15 to 45 s into a run: fp32 candidates (the default,
    # auto, picks faster ones that ended the job before the warning; the
    # bits are the same)
    job = ["topk", "-q", data, "-b", data, "-k", 10, "--precision", "fp32"]
    slurm_job = job + ["--chunk-rows", CHUNK_ROWS,
                       "--checkpoint-seconds", 0]
    direct = cl.path("direct.h5")
    rc, t_direct = mpiexec_run(args, cl, 2, job + ["-o", direct],
                               "uninterrupted")
    if not ck.check(rc == 0, "uninterrupted run: exit %d" % rc):
        return

    out = cl.path("out.h5")
    log = cl.path("job.log")
    argv = sbatch_argv(args, log, ["--job-name=xj-requeue",
                                   "--time=" + TIME_LIMIT,
                                   "--signal=" + WARN],
                        slurm_job + ["-o", out])
    say("submitting: %s" % " ".join(argv))
    t0 = time.time()
    p = subprocess.Popen(argv, env=job_env(cl, args.xjoin, "srun"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    jobid = _job_id(cl, "xj-requeue", p)
    try:
        sent = _watch_and_signal(cl, p, jobid, log) if jobid else False
        sout, serr = p.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        p.kill()
        sout, serr = p.communicate()
    dt = time.time() - t0
    text = read(log)
    restarts = sorted({int(x) for x in
                       re.findall(r"SLURM_RESTART_COUNT=(\d+)", text)})
    interrupted = len(re.findall(r"xjoin exited 5 \(interrupted", text))
    requeued = len(re.findall(r"requeued job \d+", text))
    say("job %s: sbatch --wait exit %s after %.1f s; runs seen %s, %d "
        "interrupted, %d requeued, scancel sent: %s"
        % (jobid, p.returncode, dt, restarts, interrupted, requeued, sent))
    ok = ck.check(p.returncode == 0, "sbatch --wait exit %s, expected 0 (%s)"
                  % (p.returncode, serr.strip()))
    ok &= ck.check(re.search(r"^xjoin: .*interrupted", text, re.M),
                   "no 'interrupted' message of xjoin in the log")
    ok &= ck.check(re.search(r"caught SIGUSR1", text) and interrupted >= 1,
                   "the log shows no USR1 caught and no exit 5: the job was "
                   "never interrupted (it took %.0f s uninterrupted; make it "
                   "longer)" % t_direct)
    ok &= ck.check(requeued >= 1 and restarts and restarts[-1] >= 1,
                   "the job was not requeued (restart counts seen: %s)"
                   % restarts)
    ok &= ck.check(not sent or interrupted >= 2,
                   "scancel --batch --signal=USR1 did not interrupt the "
                   "restarted run (%d interruptions)" % interrupted)
    ok &= ck.check("xjoin finished" in text and "# OK topk" in text,
                   "the last run did not finish")
    check_final_state(ck, cl, jobid, "requeue", restarts=1)
    if ck.check(os.path.exists(out), "no output %s" % out):
        bad = compare.compare(out, direct)
        ok &= ck.check(bad == 0, "resumed output: %d entries differ from "
                       "the uninterrupted run" % bad)
    check_no_leftovers(ck, out, "requeue")
    if not ok:
        say("--- %s ---\n%s" % (log, "\n".join(
            line for line in text.splitlines()
            if "chunks (" not in line)[-6000:]))


CASES = {"batch": case_batch, "requeue": case_requeue}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "teardown":
        ap = argparse.ArgumentParser(prog="slurm_cases.py teardown")
        ap.add_argument("teardown")
        ap.add_argument("dir")
        ap.add_argument("--after-pid", type=int)
        a = ap.parse_args()
        if a.after_pid:
            return watchdog_main(os.path.abspath(a.dir), a.after_pid)
        teardown(os.path.abspath(a.dir))
        return 0

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--xjoin", required=True)
    ap.add_argument("--source", required=True,
                    help="the source tree (scripts/slurm, tests/integration)")
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--glove", default="/work/shared/data/glove-100d-100k.h5",
                    help="GloVe HDF5 (default %(default)s, falling back to "
                    "data/glove-demo.h5)")
    ap.add_argument("--workdir", default=tempfile.gettempdir())
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    args.xjoin = os.path.abspath(args.xjoin)
    args.source = os.path.abspath(args.source)

    try:
        if os.geteuid() != 0:
            raise Skip("not root: this test runs its own slurmctld, slurmd "
                       "and munged as root (SlurmUser=root)")
        if not which("setsid"):
            raise Skip("no setsid (util-linux) for the teardown watchdog")
        munge_parent()
        ensure_slurm()
    except Skip as e:
        say("SKIPPED: %s" % e)
        return SKIP

    t0 = time.time()
    ck = Checks()
    cl = Cluster(os.path.abspath(args.workdir), args.keep)
    # a SIGTERM or SIGINT (ctest, Ctrl-C) still tears down
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, f: sys.exit(128 + s))
    error = None
    try:
        cl.start()
        CASES[args.case](args, cl, ck)
    except Exception as e:   # noqa: BLE001 - reported, then torn down
        error = e
        ck.check(False, "%s: %s" % (type(e).__name__, e))
    finally:
        if ck.failed:
            cl.dump_logs()
        cl.stop(bool(ck.failed))
    say("slurm.%s: %d checks, %d failed (%.0f s)"
        % (args.case, ck.n, len(ck.failed), time.time() - t0))
    for f in ck.failed:
        say("  FAILED: %s" % f)
    if error is not None:
        traceback.print_exception(error)
    return 1 if ck.failed or ck.n == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
