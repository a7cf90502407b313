#!/usr/bin/env python3
"""Check the include graph against the layers of docs/design.md.

    config/   the shared vocabulary: includes nothing of the project's
              outside config/
    io/       includes config/ and itself
    kernels/  includes config/ and itself, and never <mpi.h>: what a
              kernel needs of communication, app/ hands it; its two
              backends, kernels/cpu/ and kernels/cuda/, never include
              each other
    app/      anything

Usage: check_layers.py [ROOT]      (default: the checkout holding this file)
       check_layers.py --self-test  (a tree with one violation per rule must
                                     fail, and its clean twin must pass)

Prints every violating include as FILE:LINE: reason and exits 1 if there is
one. A quoted include is resolved as the compiler does: next to the file,
then from the root; one found in neither place (the generated version.h)
is not the project's source and is not checked.
"""
import os
import re
import sys
import tempfile

LAYERS = {
    "config": {"config"},
    "io": {"config", "io"},
    "kernels": {"config", "kernels"},
}
NO_MPI = {"kernels"}
# Sibling folders that must not include each other (the two backends).
APART = ("kernels/cpu", "kernels/cuda")
SOURCES = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def backend_of(root, path):
    rel = os.path.relpath(path, root).replace(os.sep, "/")
    for b in APART:
        if rel.startswith(b + "/"):
            return b
    return None


def top_folder(root, path):
    rel = os.path.relpath(path, root)
    return rel.split(os.sep)[0] if not rel.startswith("..") else None


def resolve(root, src, name):
    for base in (os.path.dirname(src), root):
        cand = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(cand):
            return cand
    return None


def violations(root):
    found = []
    for layer, allowed in sorted(LAYERS.items()):
        for dirpath, _, files in sorted(os.walk(os.path.join(root, layer))):
            for f in sorted(files):
                if not f.endswith(SOURCES):
                    continue
                src = os.path.join(dirpath, f)
                with open(src, encoding="utf-8", errors="replace") as fh:
                    for no, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        where = f"{os.path.relpath(src, root)}:{no}"
                        kind, name = m.groups()
                        if kind == "<":
                            if layer in NO_MPI and name == "mpi.h":
                                found.append(f"{where}: {layer}/ includes <mpi.h>")
                            continue
                        target = resolve(root, src, name)
                        if target is None:
                            continue
                        top = top_folder(root, target)
                        if top not in allowed:
                            found.append(f"{where}: {layer}/ includes "
                                         f"{os.path.relpath(target, root)}")
                            continue
                        mine, theirs = backend_of(root, src), backend_of(root, target)
                        if mine and theirs and mine != theirs:
                            found.append(f"{where}: {mine}/ includes "
                                         f"{os.path.relpath(target, root)}")
    return found


def self_test():
    bad = {
        "app/job.h": "",
        "config/a.h": '#include "../app/job.h"\n',
        "io/b.h": '#include "../kernels/k.h"\n',
        "kernels/k.h": '#include "../config/a.h"\n',
        "kernels/cuda/c.cuh": '#include "../../app/job.h"\n',
        "kernels/m.c": "#include <mpi.h>\n",
        "kernels/cpu/x.c": '#include "../cuda/c.cuh"\n',
        "kernels/cuda/y.cu": '#include "../cpu/x.c"\n',
    }
    with tempfile.TemporaryDirectory() as tmp:
        for path, text in bad.items():
            os.makedirs(os.path.dirname(os.path.join(tmp, path)), exist_ok=True)
            with open(os.path.join(tmp, path), "w") as fh:
                fh.write(text)
        got = violations(tmp)
        want = 6     # config -> app, io -> kernels, cuda -> app, mpi.h,
                     # cpu -> cuda, cuda -> cpu
        if len(got) != want:
            print(f"self-test: {len(got)} violations found, {want} expected:")
            print("\n".join(got))
            return 1
        for path in ("config/a.h", "io/b.h", "kernels/cuda/c.cuh", "kernels/m.c",
                     "kernels/cpu/x.c", "kernels/cuda/y.cu"):
            with open(os.path.join(tmp, path), "w") as fh:
                fh.write('#include "../config/a.h"\n' if path == "io/b.h" else "")
        got = violations(tmp)
        if got:
            print("self-test: the clean tree fails:\n" + "\n".join(got))
            return 1
    print("self-test: OK (6 violations caught, clean tree passes)")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..")
    root = os.path.abspath(root)
    got = violations(root)
    for v in got:
        print(v)
    print(f"layers: {len(got)} include(s) against the layers"
          if got else "layers: OK (config <- io, kernels <- app; kernels/cpu and "
          "kernels/cuda apart)")
    return 1 if got else 0


if __name__ == "__main__":
    sys.exit(main())
