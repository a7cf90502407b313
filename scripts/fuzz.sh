#!/usr/bin/env bash
# Fuzz xjoin's input handling with libFuzzer for a bounded time.
#
#   scripts/fuzz.sh [SECONDS] [HARNESS...]
#
# HARNESS is options (command line and INI job files), h5in (HDF5 input
# validation fed with mutated files) or h5gen (the same validation fed
# with valid files built from a recipe); default: all three, one after
# the other, SECONDS each (default $FUZZ_SECONDS, else 120; 0 only
# builds). One fuzzing
# process runs at a time (libFuzzer -fork=1: a crash is recorded and
# fuzzing goes on).
#
# Builds with clang, -fsanitize=fuzzer,address,undefined, into
# build-fuzz/ (FUZZ_BUILD overrides): the harnesses, the corpus each one
# grows (build-fuzz/corpus/H, seeded from tests/fuzz/seeds/H, the example
# job files and tests/fuzz/regress/H), its findings (build-fuzz/crashes/H,
# each with the report of a rerun as FILE.txt) and the logs. Every new
# finding is rerun and sorted by who is at fault (tests/fuzz/triage.py):
# xjoin's code, or libhdf5 itself.
#
# Prints per harness: seconds, executions, executions per second, the
# coverage libFuzzer counts (edges of xjoin's code: libhdf5 is not
# instrumented) and the findings, then one line per distinct finding.
# Exit status 1 when a finding is in xjoin's code, else 0.
#
# Reproduce a finding:  build-fuzz/fuzz_H build-fuzz/crashes/H/crash-...
# Keep it as a test:    copy it to tests/fuzz/regress/H/ (ctest -L fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=${FUZZ_BUILD:-build-fuzz}
secs=${FUZZ_SECONDS:-120}
if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then
	secs=$1
	shift
fi
harnesses=("$@")
[[ ${#harnesses[@]} -gt 0 ]] || harnesses=(options h5in h5gen)
for h in "${harnesses[@]}"; do
	case $h in
	options|h5in|h5gen) ;;
	*) echo "fuzz.sh: unknown harness '$h' (options, h5in, h5gen)" >&2
	   exit 2 ;;
	esac
done

cc=${FUZZ_CC:-clang}
# Debian 12: clang 14 ships libFuzzer in libclang-rt-14-dev
have_libfuzzer() {
	command -v "$cc" >/dev/null &&
	echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n)
	      { return d && n > 9; }' |
		"$cc" -x c -fsanitize=fuzzer - -o /dev/null 2>/dev/null
}
if ! have_libfuzzer; then
	echo "fuzz.sh: installing clang and libFuzzer (apt)" >&2
	apt-get install -y clang libclang-rt-14-dev >/dev/null
	have_libfuzzer || { echo "fuzz.sh: $cc cannot build libFuzzer" \
		"targets" >&2; exit 1; }
fi
for pc in hdf5-openmpi inih; do
	pkg-config --exists $pc || { echo "fuzz.sh: $pc missing (run" \
		"scripts/setup.sh)" >&2; exit 1; }
done

# ---- build ------------------------------------------------------------
mkdir -p "$out/obj"
cp app/version.h.in "$out/version.h"
read -ra pcflags <<<"$(pkg-config --cflags hdf5-openmpi inih)"
read -ra libs <<<"$(pkg-config --libs hdf5-openmpi inih) -lm"
# shellcheck disable=SC2054  # the commas belong to the flag
san=(-fsanitize=address,undefined -fno-sanitize-recover=undefined)
# clang warns about two things gcc does not (status.c's pragma for a gcc
# warning, a string split over lines in job.c): not findings
cflags=(-std=c11 -g -O1 -fno-omit-frame-pointer -ffp-contract=off -Wall
	-Wextra -Wno-unknown-warning-option -Wno-string-concatenation
	"-I$root" "-I$out" "${pcflags[@]}" "${san[@]}")
srcs=(config/status.c config/job.c app/cli/options_table.c app/cli/options_parse.c
      app/cli/options_help.c config/config.c io/h5in.c kernels/metric.c)
objs=()
for src in "${srcs[@]}"; do
	obj=$out/obj/$(basename "$src" .c).o
	"$cc" "${cflags[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
	objs+=("$obj")
done
for h in "${harnesses[@]}"; do
	"$cc" "${cflags[@]}" -fsanitize=fuzzer "tests/fuzz/fuzz_$h.c" \
		"${objs[@]}" "${libs[@]}" -o "$out/fuzz_$h"
done

if [[ $secs -eq 0 ]]; then   # libFuzzer reads 0 seconds as "no limit"
	echo "fuzz.sh: built ${harnesses[*]} in $out/ (0 seconds: no fuzzing)"
	exit 0
fi

# ---- fuzz -------------------------------------------------------------
# allocator_may_return_null: HDF5 asks for absurd sizes read from corrupt
# headers and copes with NULL; detect_odr_violation: see sanitize.sh
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:\
detect_odr_violation=0:strict_string_checks=1:\
detect_stack_use_after_return=1:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$root/tests/sanitize/lsan.supp:\
print_suppressions=0:${LSAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"

seeds_of() {   # one folder a line
	[[ $1 == options ]] && echo config/examples
	echo "tests/fuzz/seeds/$1"
	[[ -d tests/fuzz/regress/$1 ]] && echo "tests/fuzz/regress/$1"
	return 0
}
max_len_of() {
	case $1 in
	options) echo 4096 ;;
	h5in) echo 65536 ;;
	h5gen) echo 1024 ;;
	esac
}
findings() {
	find "$1" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' \
		-o -name 'timeout-*' -o -name 'oom-*' \) ! -name '*.txt' |
		sort
}

summary=()
details=()
status=0
for h in "${harnesses[@]}"; do
	corpus=$out/corpus/$h crashes=$out/crashes/$h log=$out/logs/$h.log
	mkdir -p "$corpus" "$crashes" "$out/logs"
	findings "$crashes" >"$out/logs/$h.before"
	extra=()
	[[ $h == options ]] && extra=(-dict=tests/fuzz/options.dict)
	mapfile -t seeds < <(seeds_of "$h")
	echo "fuzz.sh: $h for ${secs}s (log: $log)" >&2
	"$out/fuzz_$h" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 \
		-ignore_ooms=1 -max_total_time="$secs" -timeout=20 \
		-rss_limit_mb=2048 -max_len="$(max_len_of "$h")" \
		-artifact_prefix="$crashes/" "${extra[@]}" \
		"$corpus" "${seeds[@]}" >"$log" 2>&1 || true
	line=$(grep -E '^#[0-9]+: cov:' "$log" | tail -n 1 || true)
	execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$line")
	cov=$(sed -E 's/.* cov: ([0-9]+).*/\1/' <<<"$line")
	ft=$(sed -E 's/.* ft: ([0-9]+).*/\1/' <<<"$line")
	took=$(sed -E 's/.* time: ([0-9]+)s.*/\1/' <<<"$line")
	[[ -n $line ]] || { execs=0 cov=0 ft=0 took=0; }
	corp=$(find "$corpus" -type f | wc -l)
	mapfile -t new < <(findings "$crashes" |
			   comm -13 "$out/logs/$h.before" -)
	ours=0 theirs=0
	if [[ ${#new[@]} -gt 0 ]]; then
		/usr/bin/python3 tests/fuzz/triage.py "$out/fuzz_$h" \
			"${new[@]}" >"$out/logs/$h.triage"
		ours=$(awk -F'\t' '$3 == "ours"' "$out/logs/$h.triage" | wc -l)
		theirs=$(awk -F'\t' '$3 != "ours" && $2 != "none"' \
			 "$out/logs/$h.triage" | wc -l)
		while IFS=$'\t' read -r file _ where sig; do
			details+=("$h	$where	$sig	$crashes/$file")
		done <"$out/logs/$h.triage"
	fi
	[[ $ours -eq 0 ]] || status=1
	summary+=("$(printf '%-8s %7s %11s %8s %8s %8s %7s %6s %6s' "$h" \
		"$took" "$execs" "$(( took > 0 ? execs / took : 0 ))" "$cov" \
		"$ft" "$corp" "$ours" "$theirs")")
done

echo
printf '%-8s %7s %11s %8s %8s %8s %7s %6s %6s\n' harness seconds \
	executions exec/s coverage features corpus ours other
printf '%s\n' "${summary[@]}"
if [[ ${#details[@]} -gt 0 ]]; then
	echo
	echo "# new findings, one line per distinct signature (count, example):"
	printf '%s\n' "${details[@]}" |
		awk -F'\t' '{ k = $1 "\t" $2 "\t" $3; n[k]++; if (!(k in ex))
			ex[k] = $4 } END { for (k in n) printf "%3d  %s\t%s\n",
			n[k], k, ex[k] }' | sort -k2
fi
exit $status
