#!/usr/bin/env bash
# `pip install ./python` as the README says, into a fresh virtual
# environment (Debian's numpy, h5py and scipy through its system site
# packages; no network: --no-build-isolation --no-deps), from the
# checkout's build; then a call from another folder gives the command
# line's bits.
#   install_case.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 build=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
XJOIN_BUILD_DIR=$build "$work/venv/bin/pip" install -q --no-build-isolation \
	--no-deps "$src/python"
cd "$work"
"$work/venv/bin/python" - "$build/xjoin" <<'PY'
import os, subprocess, sys
import h5py, numpy as np
import xjoin
assert "venv" in xjoin.__file__, xjoin.__file__
x = np.random.default_rng(4).standard_normal((2000, 24)).astype(np.float32)
nbr, dist = xjoin.topk(x, x, k=5, metric="cosine")
with h5py.File("x.h5", "w") as f:
    f["train"] = x
subprocess.run([sys.argv[1], "topk", "-q", "x.h5:/train", "-b", "x.h5:/train",
                "-k", "5", "-m", "cosine", "-o", "cli.h5", "--quiet"],
               check=True)
ref = xjoin.load("cli.h5")
assert np.array_equal(nbr, ref["neighbors"])
assert np.array_equal(dist.view(np.uint32), ref["distances"].view(np.uint32))
print("installed package: the command line's bits (%s)" % xjoin.__file__)
PY
