#!/usr/bin/python3
"""Plot xjoin's timings: a PNG from report and benchmark JSON files.

    /usr/bin/python3 scripts/plot.py -o OUT.png --x FIELD --y FIELD [--y ...]
        [--series FIELD] [--kind line|bar] [--log x|y|xy] [--title T]
        [--where FIELD=VALUE ...] FILE.json...

Every FILE is one of:
  - a report of `xjoin ... --report-json FILE` (one record: the report,
    plus "tool" = "xjoin np<ranks>");
  - a file with "runs": a list of records (what the examples write: one
    per run, an xjoin run's report under "report");
  - the JSON of scripts/bench/cpu_vs_peers.sh (build/bench/cpu_vs_peers.json):
    its "rows", one per tool and dataset.
Fields are named as in those files; a dotted name reaches inside
("report.phase_seconds.compute", "phases.compute_s"). A record without the
x or y field is left out and counted, so files from older or newer xjoin
versions plot what they have. One line (or bar group) per value of
--series; several --y give side-by-side panels sharing x.

Examples:
  scripts/plot.py -o matrix.png --x n --y seconds --series tool --log xy \\
      build/examples/distance-matrix/runs.json
  scripts/plot.py -o bench.png --kind bar --x dataset --y wall_s \\
      --series tool build/bench/cpu_vs_peers.json
  scripts/plot.py -o phases.png --x ranks --y phase_seconds.compute \\
      --y total_seconds run1.json run2.json run4.json
"""

import argparse
import json
import sys


def field(doc, name):
    """doc["a"]["b"] for name "a.b", or None where any part is missing."""
    for part in name.split("."):
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return doc


def records(path):
    with open(path) as f:
        doc = json.load(f)
    if isinstance(doc.get("runs"), list):
        return doc["runs"]
    if isinstance(doc.get("rows"), list):
        return doc["rows"]
    if "phase_seconds" in doc or "xjoin_version" in doc:
        rec = dict(doc)
        rec.setdefault("tool", "xjoin np%s" % doc.get("ranks", "?"))
        return [rec]
    sys.exit("%s: neither an xjoin report, a runs file nor benchmark JSON"
             % path)


def numeric(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def series_points(recs, args, y):
    """{series: [(x, y)...]} in first-seen order, and how many records
    lacked a field."""
    out, missing = {}, 0
    for r in recs:
        xv, yv = field(r, args.x), field(r, y)
        if xv is None or not numeric(yv):
            missing += 1
            continue
        key = str(field(r, args.series)) if args.series else y
        out.setdefault(key, []).append((xv, yv))
    return out, missing


def draw_lines(ax, pts):
    for name, xy in pts.items():
        xy.sort(key=lambda p: p[0])
        ax.plot([p[0] for p in xy], [p[1] for p in xy], marker="o",
                label=name)


def draw_bars(ax, pts):
    cats = []
    for xy in pts.values():
        cats += [str(x) for x, _ in xy if str(x) not in cats]
    width = 0.8 / max(1, len(pts))
    for i, (name, xy) in enumerate(pts.items()):
        where = {str(x): v for x, v in xy}
        xs = [c + i * width for c, cat in enumerate(cats) if cat in where]
        ax.bar(xs, [where[cat] for cat in cats if cat in where], width,
               label=name)
    ax.set_xticks([c + width * (len(pts) - 1) / 2 for c in range(len(cats))])
    ax.set_xticklabels(cats)


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawTextHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("files", nargs="+", metavar="FILE.json")
    ap.add_argument("-o", "--output", required=True, help="PNG to write")
    ap.add_argument("--x", required=True, help="field on the x axis")
    ap.add_argument("--y", action="append", required=True,
                    help="field on the y axis (repeat: one panel each)")
    ap.add_argument("--series", help="field whose values make the lines")
    ap.add_argument("--kind", choices=("line", "bar"), default="line")
    ap.add_argument("--log", choices=("x", "y", "xy"), help="log axes")
    ap.add_argument("--where", action="append", default=[],
                    metavar="FIELD=VALUE", help="keep only matching records")
    ap.add_argument("--title", help="figure title")
    ap.add_argument("--xlabel")
    ap.add_argument("--ylabel", action="append", default=[])
    ap.add_argument("--note", help="small text under the plot (command, "
                    "commit, machine)")
    return ap.parse_args(argv)


def keep(rec, wheres):
    for w in wheres:
        name, _, value = w.partition("=")
        if str(field(rec, name)) != value:
            return False
    return True


def pyplot():
    """matplotlib, imported only once there is something to draw (it takes
    seconds on a busy machine), writing files only: no display needed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def main(argv=None):
    args = parse(argv)
    recs = [r for path in args.files for r in records(path)
            if keep(r, args.where)]
    panels = []
    for y in args.y:
        pts, missing = series_points(recs, args, y)
        if missing:
            print("plot.py: %d of %d records lack %s or %s: left out"
                  % (missing, len(recs), args.x, y), file=sys.stderr)
        panels.append((y, pts))
    plotted = sum(len(v) for _, pts in panels for v in pts.values())
    if plotted == 0:
        sys.exit("plot.py: nothing to plot (no record has %s and %s)"
                 % (args.x, " / ".join(args.y)))
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), squeeze=False,
                             figsize=(5.5 * len(panels), 4.2))
    for i, (ax, (y, pts)) in enumerate(zip(axes[0], panels)):
        (draw_bars if args.kind == "bar" else draw_lines)(ax, pts)
        if args.log and "x" in args.log and args.kind == "line":
            ax.set_xscale("log")
        if args.log and "y" in args.log:
            ax.set_yscale("log")
        ax.set_xlabel(args.xlabel or args.x)
        ax.set_ylabel(args.ylabel[i] if i < len(args.ylabel) else y)
        ax.grid(True, which="both", alpha=0.3)
        if pts:
            ax.legend(fontsize="small")
    if args.title:
        fig.suptitle(args.title)
    if args.note:
        fig.text(0.01, 0.01, args.note, fontsize=7, color="0.35")
    fig.tight_layout(rect=(0, 0.04 if args.note else 0, 1, 1))
    fig.savefig(args.output, dpi=110)
    print("plot.py: %d points -> %s" % (plotted, args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
