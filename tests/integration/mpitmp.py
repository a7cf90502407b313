"""A TMPDIR of its own for every mpiexec a test starts.

Open MPI 4.1 makes its session folder /tmp/ompi.<host>.<uid> when a job
starts and removes it when the last job leaves. Two jobs that start at
once may both try to make it, and the one that finds it already made
aborts in orte_init ("A call to mkdir was unable to create the desired
directory ... File exists"): a failure of the launcher, not of xjoin,
seen in a CI run of the error cases, which start several jobs at once. A
private TMPDIR (short, under /tmp: PMIx puts sockets there) gives each
job its own session folder. The folders of one test process live under
one root, removed when the process exits."""

import atexit
import itertools
import os
import shutil
import tempfile
import threading

_lock = threading.Lock()
_serial = itertools.count()
_root = []


def env(base):
    """A copy of the environment base with TMPDIR set to a new folder."""
    with _lock:
        if not _root:
            _root.append(tempfile.mkdtemp(prefix="xjmpi-", dir="/tmp"))
            atexit.register(shutil.rmtree, _root[0], True)
        path = os.path.join(_root[0], str(next(_serial)))
    os.mkdir(path)
    out = dict(base)
    out["TMPDIR"] = path
    return out
