#!/usr/bin/env bash
# Build xjoin with AddressSanitizer + UBSan into build-asan/ (Debug, CPU
# only) and run the tests there. Any sanitizer report fails the test.
#
#   scripts/sanitize.sh            unit tests + a representative
#                                  integration subset (default, ~7 min)
#   scripts/sanitize.sh all        every test but integration.memory
#                                  (ASan's shadow memory inflates the
#                                  peak RSS it measures) and the slurm
#                                  label (its requeue job is sized for a
#                                  release build); ~20 min on 2 cores
#   scripts/sanitize.sh ARGS...    ARGS go to ctest, e.g. -L unit or
#                                  -R 'integration\.matrix'
#
# The environment reaches every MPI rank: the integration driver hands
# its own environment to mpiexec, and Open MPI passes it on to ranks it
# starts on this host.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DXJOIN_SANITIZE=ON \
	-DXJOIN_CUDA=OFF >/dev/null
cmake --build build-asan -j"$(nproc)"

# detect_odr_violation=0: Open MPI's components are dlopen()ed and define
# symbols that also exist in libmpi, which ASan reports as ODR violations.
# allocator_may_return_null=1: the unit tests ask for impossible sizes on
# purpose and expect a resource error, not an abort.
# fast_unwind_on_malloc=0: Open MPI is built without frame pointers and
# its components are dlclose()d before LSan runs, so only the slow
# unwinder reaches the library frames that tests/sanitize/lsan.supp names.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:halt_on_error=1:\
detect_odr_violation=0:allocator_may_return_null=1:fast_unwind_on_malloc=0:\
strict_string_checks=1:check_initialization_order=1:\
detect_stack_use_after_return=1"
# use_tls=0: LSan (GCC 12) follows stale dynamic-TLS slots of modules that
# Open MPI and HDF5 have dlclose()d and crashes at exit, depending on
# timing; xjoin keeps no heap pointers in thread-local storage.
export LSAN_OPTIONS="suppressions=$root/tests/sanitize/lsan.supp:\
print_suppressions=0:use_tls=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

subset='^unit\.|^fuzz\.|^integration\.(topk_random\.np2|invariance\.np3|matrix\.np2|errors|realdata|interrupt|resume|catalogue|inspect)$'
if [ $# -eq 0 ]; then
	set -- -R "$subset"
elif [ "$1" = all ]; then
	shift
	set -- -E '^integration\.memory$' -LE slurm "$@"
fi
cd build-asan
ctest --output-on-failure "$@"
