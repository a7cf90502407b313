#!/usr/bin/env bash
# Configure and build xjoin into build/ (Release). Extra arguments go to
# cmake's configure step, e.g. scripts/build.sh -DXJOIN_NATIVE=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
echo "build: $(pwd)/build/xjoin"
