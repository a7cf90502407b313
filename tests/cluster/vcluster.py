#!/usr/bin/python3
"""A cluster of 2 to 4 nodes on this machine, made of Linux namespaces.

    vcluster.py up N DIR        make one and print how to use it (for hand
                                runs; `down DIR` removes it)
    vcluster.py down DIR

Node i (1..N) is a network namespace with a hostname of its own (a UTS
namespace, kept open by a bind mount under /run) and one interface, eth0,
joined to a bridge on this machine. Addresses come from a /24 that no
route or address of this machine uses yet: the bridge is .1, node i is
.(10 + i). Traffic stays between these namespaces and this machine. The
file system is shared, as on a cluster with a shared file system.

`mpirun` reaches the nodes through Open MPI's rsh agent option: a script
of the cluster's folder, `agent HOST COMMAND...`, runs COMMAND on HOST the
way ssh would (`/bin/sh -c` inside the node's namespaces).

Every namespace, link and mount is named after the cluster's id, so
clusters of concurrent runs do not meet, and teardown removes exactly
what this cluster made: it ends every process inside its nodes, deletes
the namespaces and the bridge, unmounts the hostnames and removes what
Open MPI left under the nodes' hostnames in /dev/shm and /tmp. A detached
watchdog does the same when the process that made the cluster dies
without doing it (a test killed on a timeout).
"""

import glob
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import time

STATE = "cluster.json"
NODES_MAX = 4
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Unavailable(Exception):
    """This machine cannot make the cluster (not root, no namespaces)."""


def sh(argv, check=True, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(argv), p.returncode,
                                                p.stderr.strip()))
    return p


def _used_networks():
    nets = []
    for argv in (["ip", "-4", "-o", "addr"], ["ip", "-4", "route"]):
        for word in sh(argv, check=False).stdout.split():
            try:
                if "/" in word or word.count(".") == 3:
                    nets.append(ipaddress.ip_network(word, strict=False))
            except ValueError:
                pass
    return nets


def free_subnet():
    """A /24 of 10.213.0.0/16 that overlaps nothing this machine uses."""
    used = _used_networks()
    start = os.getpid() % 200
    for k in range(200):
        net = ipaddress.ip_network("10.213.%d.0/24" % ((start + k) % 200 + 20))
        if not any(net.overlaps(u) for u in used if u.prefixlen > 0):
            return net
    raise Unavailable("no free /24 in 10.213.0.0/16 for the test cluster")


def check_available():
    if os.geteuid() != 0:
        raise Unavailable("not root: namespaces, links and mounts need root")
    for tool in ("ip", "nsenter", "unshare", "setsid"):
        if not shutil.which(tool, path=PATH):
            raise Unavailable("no %s (iproute2, util-linux)" % tool)


class Cluster:
    """Made by Cluster.create(), found again by Cluster.load(folder)."""

    def __init__(self, state):
        self.__dict__.update(state)

    # ---- naming --------------------------------------------------------
    def netns(self, i):
        return "%sn%d" % (self.id, i)

    def hostname(self, i):
        return "%snode%d" % (self.id, i)

    def addr(self, i):
        return str(ipaddress.ip_network(self.subnet)[10 + i])

    def uts(self, i):
        return os.path.join(self.run_dir, "uts%d" % i)

    @property
    def agent(self):
        return os.path.join(self.dir, "agent")

    @property
    def nodes(self):
        return list(range(1, self.n + 1))

    # ---- making --------------------------------------------------------
    @classmethod
    def create(cls, n, folder, watchdog_for=None):
        check_available()
        if not 1 <= n <= NODES_MAX:
            raise ValueError("1 to %d nodes, not %d" % (NODES_MAX, n))
        os.makedirs(folder, exist_ok=True)
        cid = "xj%04x" % (os.getpid() % 0x10000)
        net = free_subnet()
        state = dict(id=cid, n=n, dir=os.path.abspath(folder),
                     subnet=str(net), bridge=cid + "br",
                     host_addr=str(net[1]),
                     run_dir="/run/xjoin-cluster-" + cid)
        c = cls(state)
        with open(os.path.join(c.dir, STATE), "w") as f:
            json.dump(state, f)
        if watchdog_for:
            c._start_watchdog(watchdog_for)
        try:
            c._make()
        except Exception:
            c.teardown()
            raise
        return c

    @classmethod
    def load(cls, folder):
        with open(os.path.join(folder, STATE)) as f:
            return cls(json.load(f))

    def _make(self):
        os.makedirs(self.run_dir, exist_ok=True)
        prefix = ipaddress.ip_network(self.subnet).prefixlen
        sh(["ip", "link", "add", self.bridge, "type", "bridge"])
        sh(["ip", "addr", "add", "%s/%d" % (self.host_addr, prefix),
            "dev", self.bridge])
        sh(["ip", "link", "set", self.bridge, "up"])
        for i in self.nodes:
            ns, veth = self.netns(i), "%sv%d" % (self.id, i)
            sh(["ip", "netns", "add", ns])
            sh(["ip", "link", "add", veth, "type", "veth", "peer", "name",
                "eth0", "netns", ns])
            sh(["ip", "link", "set", veth, "master", self.bridge, "up"])
            sh(["ip", "-n", ns, "addr", "add",
                "%s/%d" % (self.addr(i), prefix), "dev", "eth0"])
            sh(["ip", "-n", ns, "link", "set", "eth0", "up"])
            sh(["ip", "-n", ns, "link", "set", "lo", "up"])
            open(self.uts(i), "w").close()
            sh(["unshare", "--uts=" + self.uts(i), "hostname",
                self.hostname(i)])
        self._write_agent()
        self._write_hostfiles()

    def _write_agent(self):
        cases = "\n".join(
            "%s|%s) i=%d ;;" % (self.hostname(i), self.addr(i), i)
            for i in self.nodes)
        text = """#!/bin/sh
# rsh agent of the test cluster %(id)s: agent HOST COMMAND... runs COMMAND
# on node HOST the way ssh would.
host=$1
shift
case $host in
%(cases)s
*) echo "agent: no node $host in cluster %(id)s" >&2; exit 255 ;;
esac
exec nsenter --net=/run/netns/%(id)sn$i --uts=%(run)s/uts$i -- /bin/sh -c "$*"
""" % dict(id=self.id, cases=cases, run=self.run_dir)
        with open(self.agent, "w") as f:
            f.write(text)
        os.chmod(self.agent, 0o755)

    def _write_hostfiles(self):
        for slots in (1, 2):
            with open(self.hostfile(slots), "w") as f:
                for i in self.nodes:
                    f.write("%s slots=%d\n" % (self.addr(i), slots))

    def hostfile(self, slots, nodes=None):
        """A hostfile of nodes (default: all) with slots each."""
        nodes = nodes or self.nodes
        path = os.path.join(self.dir, "hosts-%s-x%d" % (
            "".join(map(str, nodes)), slots))
        if not os.path.exists(path):
            with open(path, "w") as f:
                for i in nodes:
                    f.write("%s slots=%d\n" % (self.addr(i), slots))
        return path

    # ---- using ---------------------------------------------------------
    def enter(self, i):
        """The argv prefix that runs a command on node i."""
        return ["nsenter", "--net=/run/netns/" + self.netns(i),
                "--uts=" + self.uts(i), "--"]

    def mpi_env(self, env=None):
        """Open MPI settings for this cluster: the rsh agent, TCP on the
        cluster's subnet only, no binding (a few cores for many ranks)."""
        env = dict(os.environ if env is None else env)
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1",
                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_plm_rsh_agent=self.agent,
                   OMPI_MCA_oob_tcp_if_include=self.subnet,
                   OMPI_MCA_btl_tcp_if_include=self.subnet,
                   OMPI_MCA_hwloc_base_binding_policy="none",
                   OMPI_MCA_rmaps_base_oversubscribe="1",
                   OMP_WAIT_POLICY="passive")
        env["PATH"] = env.get("PATH", "") + ":" + PATH
        return env

    def pids(self, i):
        out = sh(["ip", "netns", "pids", self.netns(i)], check=False).stdout
        return [int(p) for p in out.split()]

    def processes(self, i):
        """(pid, name) of every process on node i."""
        procs = []
        for pid in self.pids(i):
            try:
                with open("/proc/%d/comm" % pid) as f:
                    procs.append((pid, f.read().strip()))
            except OSError:
                pass
        return procs

    def kill_node(self, i, sig=signal.SIGKILL):
        for pid in self.pids(i):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def link(self, i, up):
        sh(["ip", "-n", self.netns(i), "link", "set", "eth0",
            "up" if up else "down"])

    def degrade(self, i, rate="20mbit", loss_percent=2):
        """A slow, lossy link on node i: a rate limit (tbf) and random
        loss both ways (nftables), or netem where the kernel has it."""
        ns = ["ip", "netns", "exec", self.netns(i)]
        done = []
        p = sh(ns + ["tc", "qdisc", "add", "dev", "eth0", "root", "netem",
                     "delay", "20ms", "5ms", "loss", "%d%%" % loss_percent,
                     "rate", rate], check=False)
        if p.returncode == 0:
            return ["netem delay 20ms 5ms loss %d%% rate %s"
                    % (loss_percent, rate)]
        sh(ns + ["tc", "qdisc", "add", "dev", "eth0", "root", "tbf",
                 "rate", rate, "burst", "32kbit", "latency", "200ms"])
        done.append("tbf rate %s (netem is not in this kernel)" % rate)
        rules = """table inet xjloss {
  chain in { type filter hook input priority 0; numgen random mod 100 < %d drop; }
  chain out { type filter hook output priority 0; numgen random mod 100 < %d drop; }
}
""" % (loss_percent, loss_percent)
        p = subprocess.run(ns + ["nft", "-f", "-"], input=rules, text=True,
                           capture_output=True)
        if p.returncode == 0:
            done.append("nftables random loss %d%% each way" % loss_percent)
        else:
            done.append("no random loss (nft: %s)" % p.stderr.strip())
        return done

    def restore(self, i):
        ns = ["ip", "netns", "exec", self.netns(i)]
        sh(ns + ["tc", "qdisc", "del", "dev", "eth0", "root"], check=False)
        sh(ns + ["nft", "delete", "table", "inet", "xjloss"], check=False)
        self.link(i, True)

    # ---- removing ------------------------------------------------------
    def _start_watchdog(self, pid):
        with open(os.path.join(self.dir, "watchdog.log"), "w") as log:
            subprocess.run(["setsid", "-f", sys.executable,
                            os.path.abspath(__file__), "watch", self.dir,
                            str(pid)], stdin=subprocess.DEVNULL,
                           stdout=log, stderr=subprocess.STDOUT, check=True)

    def remove_mpi_leftovers(self):
        """Open MPI names its shared memory segments and session folders
        after the host; a rank killed with SIGKILL leaves them behind, and
        the nodes share /dev/shm and /tmp with this machine."""
        for i in self.nodes:
            host = self.hostname(i)
            for path in glob.glob("/dev/shm/vader_segment.%s.*" % host):
                try:
                    os.unlink(path)
                except OSError:
                    pass
            for path in glob.glob("/tmp/ompi.%s.*" % host):
                shutil.rmtree(path, ignore_errors=True)

    def teardown(self):
        for _ in range(3):
            left = []
            for i in self.nodes:
                self.kill_node(i)
                left += self.pids(i)
            if not left:
                break
            time.sleep(0.5)
        for i in self.nodes:
            sh(["ip", "netns", "del", self.netns(i)], check=False)
            sh(["umount", self.uts(i)], check=False)
        sh(["ip", "link", "del", self.bridge], check=False)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.remove_mpi_leftovers()
        with open(os.path.join(self.dir, "teardown.done"), "w"):
            pass


def watch(folder, pid):
    """Tear the cluster down once pid ends, unless it did so itself."""
    done = os.path.join(folder, "teardown.done")
    while not os.path.exists(done):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(1)
    if not os.path.exists(done):
        Cluster.load(folder).teardown()
    return 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "up":
        c = Cluster.create(int(sys.argv[2]), sys.argv[3])
        print("cluster %s: %d nodes on %s, folder %s" % (c.id, c.n, c.subnet,
                                                         c.dir))
        for i in c.nodes:
            print("  node %d: %s %s  (enter: %s bash)" % (
                i, c.hostname(i), c.addr(i), " ".join(c.enter(i))))
        print("mpirun: %s mpirun --hostfile %s -np %d ... with\n  %s" % (
            " ".join(c.enter(1)), c.hostfile(2), 2 * c.n, " ".join(
                "%s=%s" % kv for kv in sorted(c.mpi_env({}).items())
                if kv[0].startswith("OMPI_MCA"))))
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "down":
        Cluster.load(sys.argv[2]).teardown()
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "watch":
        return watch(sys.argv[2], int(sys.argv[3]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
