#!/usr/bin/python3
"""Run a command, then write its peak resident memory in KiB to
DIR/rank-R (R: the MPI rank from Open MPI's or PMI's environment).

    mpirun -np P /usr/bin/python3 examples/peak_rss.py DIR xjoin ...

Exits with the command's exit status. mpirun's own rusage cannot give a
rank's peak: it folds in mpirun itself, which can be the larger process.
"""

import os
import subprocess
import sys


def main(argv):
    folder, cmd = argv[1], argv[2:]
    rank = os.environ.get("OMPI_COMM_WORLD_RANK",
                          os.environ.get("PMI_RANK", "0"))
    p = subprocess.Popen(cmd)
    _, status, usage = os.wait4(p.pid, 0)
    with open(os.path.join(folder, "rank-" + rank), "w") as f:
        f.write("%d\n" % usage.ru_maxrss)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
