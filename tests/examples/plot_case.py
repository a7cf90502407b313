#!/usr/bin/python3
"""scripts/plot.py on the files it reads: benchmark JSON (a trimmed copy of
a real build/bench/cpu_vs_peers.json, bench_sample.json), xjoin reports (a
real --report-json file, report_sample.json, and a copy lacking a field)
and a file of neither kind. Checks the points plotted, the records left
out, the PNG written and the refusal.

usage: plot_case.py WORKDIR
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PLOT = os.path.join(HERE, "..", "..", "scripts", "plot.py")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
failures = []


def plot(args):
    p = subprocess.run([sys.executable, PLOT] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def expect(what, ok, out):
    print("%s: %s" % ("ok" if ok else "FAILED", what))
    if not ok:
        print(out)
        failures.append(what)


def is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == PNG_MAGIC


def main(work):
    os.makedirs(work, exist_ok=True)
    bench = os.path.join(HERE, "bench_sample.json")
    report = os.path.join(HERE, "report_sample.json")
    with open(bench) as f:
        nrows = len(json.load(f)["rows"])

    png = os.path.join(work, "bench.png")
    rc, out = plot(["-o", png, "--kind", "bar", "--x", "dataset", "--y",
                    "wall_s", "--y", "phases.compute_s", "--series", "tool",
                    "--log", "y", bench])
    expect("benchmark rows: %d bars per panel" % nrows,
           rc == 0 and "%d points" % (2 * nrows) in out and is_png(png), out)

    lacking = os.path.join(work, "report-lacking.json")
    with open(report) as f:
        rep = json.load(f)
    del rep["total_seconds"]
    rep["ranks"] = 4
    with open(lacking, "w") as f:
        json.dump(rep, f)
    png = os.path.join(work, "reports.png")
    rc, out = plot(["-o", png, "--x", "ranks", "--y", "total_seconds",
                    "--y", "phase_seconds.compute", report, lacking])
    expect("two reports, one lacking total_seconds: 3 points, 1 left out",
           rc == 0 and "3 points" in out and "1 of 2 records lack" in out
           and is_png(png), out)

    rc, out = plot(["-o", os.path.join(work, "none.png"), "--x", "n",
                    "--y", "no_such_field", report])
    expect("no record has the field: refused", rc != 0
           and "nothing to plot" in out, out)

    other = os.path.join(work, "other.json")
    with open(other, "w") as f:
        json.dump({"something": 1}, f)
    rc, out = plot(["-o", os.path.join(work, "x.png"), "--x", "n", "--y",
                    "m", other])
    expect("a file of no known kind: refused", rc != 0
           and "neither an xjoin report" in out, out)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
