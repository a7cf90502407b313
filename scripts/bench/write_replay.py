#!/usr/bin/env python3
"""write_replay.py: replay a run's chunk writes on an O_DIRECT descriptor,
alone or beside other load, to tell the disk's rate from what the run does
around its writes.

Input: the pwrite64 lines of `strace -f -T -e trace=pwrite64 -o TRACE` of
an xjoin run (only the writes of the most common size, the whole chunks,
are replayed, in the trace's order). Each replay writes the same offsets
and sizes into a new sparse file of the same length in --dir, from one
page-aligned buffer per write in flight, then fsyncs; it prints GB/s.

--inflight 1,2,4   writes in flight (threads, each with its buffer)
--beside cpu:N     N processes spinning on the CPU meanwhile
--beside mem:N     N processes copying a 64 MB array meanwhile (numpy)

Example (docs/performance.md, "The self matrix's host work"):
  strace -f -T -e trace=pwrite64 -o /tmp/st.txt mpirun -np 1 --bind-to none \
      build/xjoin matrix -q A:/train -b A:/train -o out.h5 --force
  scripts/bench/write_replay.py --trace /tmp/st.txt --dir build/bench
  scripts/bench/write_replay.py --trace /tmp/st.txt --dir build/bench --beside mem:2
"""
import argparse
import collections
import mmap
import multiprocessing
import os
import re
import threading
import time

LINE = re.compile(r"pwrite64\(\d+, .*, (\d+), (\d+)\) = \d+")


def chunk_writes(trace, limit):
    writes = []
    for line in open(trace):
        m = LINE.search(line)
        if m:
            writes.append((int(m.group(1)), int(m.group(2))))
    if not writes:
        raise SystemExit("write_replay.py: no completed pwrite64 in %s" % trace)
    size = collections.Counter(s for s, _ in writes).most_common(1)[0][0]
    offs = [o for s, o in writes if s == size]
    return size, offs[:limit] if limit else offs


def spin(seconds):
    end = time.time() + seconds
    while time.time() < end:
        pass


def copy_arrays(seconds):
    import numpy as np
    a = np.ones(1 << 24, dtype=np.float32)
    b = np.empty_like(a)
    end = time.time() + seconds
    while time.time() < end:
        np.copyto(b, a)


def replay(path, size, offs, inflight):
    end = max(offs) + size
    fd = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o644)
    os.ftruncate(fd, end)
    os.close(fd)
    fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
    bufs = []
    for _ in range(inflight):
        buf = mmap.mmap(-1, size)
        buf.write(os.urandom(4096) * (size // 4096) + os.urandom(size % 4096))
        bufs.append(buf)

    def writer(k):
        for i in range(k, len(offs), inflight):
            os.pwrite(fd, bufs[k], offs[i])

    t0 = time.time()
    threads = [threading.Thread(target=writer, args=(k,))
               for k in range(inflight)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    os.fsync(fd)
    dt = time.time() - t0
    os.close(fd)
    os.unlink(path)
    return len(offs) * size / dt / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--inflight", default="1,2,4")
    ap.add_argument("--chunks", type=int, default=1200)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--beside", default="")
    args = ap.parse_args()
    size, offs = chunk_writes(args.trace, args.chunks)
    inflight = [int(x) for x in args.inflight.split(",")]
    load = []
    if args.beside:
        kind, n = args.beside.split(":")
        fn = {"cpu": spin, "mem": copy_arrays}[kind]
        load = [multiprocessing.Process(target=fn, args=(3600,))
                for _ in range(int(n))]
    print("# %d writes of %d bytes from %s; beside: %s" %
          (len(offs), size, args.trace, args.beside or "nothing"))
    for p in load:
        p.start()
    try:
        time.sleep(2 if load else 0)
        path = os.path.join(args.dir, "write-replay.bin")
        for rep in range(args.reps):
            print("rep %d: %s" % (rep + 1, "  ".join(
                "in flight %d %.3f GB/s" % (q, replay(path, size, offs, q))
                for q in inflight)))
    finally:
        for p in load:
            p.terminate()
            p.join()


if __name__ == "__main__":
    main()
