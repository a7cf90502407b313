#!/usr/bin/python3
"""Sort fuzzer findings by who is at fault (scripts/fuzz.sh calls this).

    triage.py BINARY ARTIFACT...

Runs the libFuzzer binary on each saved input (crash-*, leak-*,
timeout-*, oom-*), keeps its report next to it as ARTIFACT.txt, and
prints one tab-separated line per input:

    ARTIFACT  KIND  WHERE  SIGNATURE

KIND is what went wrong (heap-buffer-overflow, SEGV, undefined, leak,
timeout, oom, promise for a broken API promise the harness caught, or
none when it no longer reproduces). WHERE is "ours" when the first frame
past the sanitizer and C library frames is xjoin's code (or the harness
check), "hdf5" when it is inside libhdf5, "other" otherwise. SIGNATURE is
the kind and the top three such frames: inputs with the same signature
are one bug. The sanitizer options come from the environment.
"""

import os
import re
import subprocess
import sys

FRAME = re.compile(r"^\s+#(\d+) 0x[0-9a-f]+ (?:in (\S+)(.*)|\s*\((.*)\))$")
SKIP_FUNCS = re.compile(
    r"^(__interceptor_|__asan|__sanitizer|__ubsan|__lsan|fuzzer::|"
    r"__libc|__GI_|__mem|__str|_start$|main$|malloc$|calloc$|realloc$|"
    r"free$|abort$|raise$|strdup$|mem(cpy|move|set|cmp)$|str\w*$|"
    r"fuzz_die$|fuzz_check_status$|LLVMFuzzer)")
SKIP_PLACES = ("libc.so", "sysdeps", "/csu/", "libclang_rt")
OURS = re.compile(r"/(app|io|config|kernels|tests/fuzz)/[^ ]*\.[ch]\b")


def kind_of(text):
    if "fuzz: broken promise" in text:
        return "promise"
    m = re.search(r"ERROR: AddressSanitizer: ([\w-]+)", text)
    if m:
        return m.group(1)
    if "runtime error:" in text:
        return "undefined"
    if "ERROR: LeakSanitizer" in text:
        return "leak"
    m = re.search(r"ERROR: libFuzzer: ([\w-]+)", text)
    if m:
        return m.group(1)
    return "none"


def frames(text):
    """Frames of the first stack after the error line, as (func, place)."""
    start = max(text.find("ERROR:"), text.find("runtime error:"),
                text.find("broken promise"))
    out, seen = [], False
    for line in text[max(start, 0):].splitlines():
        m = FRAME.match(line)
        if not m:
            if seen:
                break
            continue
        seen = True
        func = m.group(2) or ""
        place = (m.group(3) or m.group(4) or "").strip()
        out.append((func, place))
    return out


def classify(text):
    kind = kind_of(text)
    if kind == "none":
        return kind, "-", "none"
    kept = [(f, p) for f, p in frames(text)
            if not SKIP_FUNCS.match(f) and
            not any(s in p for s in SKIP_PLACES)]
    if kind == "promise":
        m = re.search(r"broken promise: (.*)", text)
        what = re.sub(r"/\S*xj-fuzz-\w+\.\w+", "FILE",
                      m.group(1)) if m else ""
        what = re.sub(r"[0-9]+", "N", what)[:100]
        return kind, "ours", "promise: " + what
    if not kept:
        return kind, "other", kind
    func, place = kept[0]
    if "libhdf5" in place:
        where = "hdf5"
    elif OURS.search(place) or OURS.search(func):
        where = "ours"
    else:
        where = "other"
    names = []
    for f, p in kept[:3]:
        names.append(f or os.path.basename(p.split(")")[0]))
    return kind, where, kind + " " + " < ".join(names)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    binary = argv[1]
    for art in argv[2:]:
        run = subprocess.run([binary, "-timeout=30", "-rss_limit_mb=4096",
                              art], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=600)
        text = run.stdout.decode(errors="replace")
        with open(art + ".txt", "w") as f:
            f.write(text)
        kind, where, sig = classify(text)
        print("%s\t%s\t%s\t%s" % (os.path.basename(art), kind, where, sig))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
