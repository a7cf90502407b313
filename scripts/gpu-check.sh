#!/usr/bin/env bash
# Validate xjoin's GPU path on the machine it runs on: the CUDA backend's
# tests, then GPU against CPU output, bit for bit, on real data.
#
#   scripts/gpu-check.sh [--bundle DIR] [--work DIR] [--quick] [--plumbing]
#                        [--sections LIST]
#
# --sections 1,3,... runs only those numbered sections (below; default
# all), so that several instances, each with its own --work, can share
# one GPU at once (scripts/gpu-session.sh runs four).
# --plumbing runs every comparison with --device cpu in place of gpu, to test
# this script itself on a machine without a GPU (its PASSes prove nothing of
# the GPU).
#
# Without --bundle it uses build/ (building it first if build/xjoin is
# missing); with --bundle DIR it uses what scripts/bundle.sh packed (DIR.tar.xz
# is unpacked first when DIR is absent), for machines with no compiler, MPI
# or HDF5 of their own.
#
# Checks, each printed as PASS, FAIL or SKIP with a reason:
#   - the GPU test programs, each exiting 77 with SKIPPED when there is no
#     GPU (test_nccl_transport also without a loadable NCCL):
#     gpu.contract_cuda (the backend contract: top-k and matrix blocks bit
#     for bit against the canonical reference, errors, as the CPU backend
#     passes it), gpu.test_cuda_backend (what only the CUDA backend has),
#     gpu.test_cuda_precision (the tf32/bf16/fp16 GEMM within its error
#     bound, top-k in every precision equal to the CPU),
#     gpu.test_nccl_transport (one rank: NCCL exchange, device merge of a
#     grid row, topk_end_merged against the MPI path, the deadline)
#   - topk k=10 and k=100, every metric, on data/glove-demo.h5 and
#     glove-100d-100k.h5 (bundle DIR/data or ../shared/data) when present:
#     --device gpu against --device cpu
#   - matrix, every metric, on glove-demo and a 200 x 20000 slice of glove-100k,
#     and on 700 x 4200 rows built against the double GEMM's verification
#     (duplicates, near-duplicates, dot products on float32 rounding
#     boundaries, magnitudes 1e-20..1e17; across the 512 x 4096 tiles)
#   - a starved GPU (--chunk-rows 64 and a --gpu-mem-fraction derived from
#     the backend's own bytes and the GPU's free memory by gpu_budget): many
#     chunks, same bits; the dry run evaluates that formula for an H100 and
#     an H200
#   - topk with --precision tf32, bf16 and fp16 (fp16 with its 16-bit tile,
#     and with a float tile, XJ_CUDA_TILE16=0), and fp32 and fp16 with
#     XJ_CUDA_FMIN=1 and XJ_CUDA_RS_ROWS=4 (fp16 also 8): the same bits
#     as the CPU
#   - 2 ranks sharing one GPU (--gpu-share), same bits as 1 CPU rank (they
#     merge over MPI: NCCL needs a GPU per rank, so its two-rank exchange
#     cannot run on a one-GPU machine)
#   - self-joins (one dataset on both sides: each pair of shared rows
#     scored once), every metric, with and without a threshold, on 1 rank
#     and on 2 ranks sharing the GPU (split 1 x 2 by the planner, which
#     `xjoin plan` must print), and cosine with --precision tf32, bf16 and
#     fp16: the CPU's bits
#   - range joins (CSR: /indptr, /indices, /distances), every metric, each
#     threshold exactly some pair's value (the 20th neighbour of a median
#     query, from a CPU top-k): 200 glove-demo rows against 19000 others,
#     the 200 x 20000 slice of glove-100k, --self on 3000 glove-demo rows,
#     --chunk-rows 64 (many rounds), every pair of the 3000 rows (9.0
#     million: more than the backend's pair buffer holds, so it drains to
#     the host), and 2 ranks sharing the GPU
# NCCL is loaded at run time: XJ_NCCL_LIBRARY names libnccl.so.2 when the
# loader cannot find it; this script looks in python3's nvidia/nccl and
# torch packages and /usr/local/cuda when it is unset.
# and closes with the line `N passed, N failed`; the exit status is 1 when
# any check failed. Skipped checks count in neither number: a machine with
# no GPU passes nothing of the GPU's.
set -uo pipefail
cd "$(dirname "$0")/.."

bundle=
work=${TMPDIR:-/tmp}/xjoin-gpu-check
quick=0
plumbing=0
sections=
while [ $# -gt 0 ]; do
	case "$1" in
	--bundle) bundle="$2"; shift 2 ;;
	--work) work="$2"; shift 2 ;;
	--quick) quick=1; shift ;;
	--plumbing) plumbing=1; shift ;;
	--sections) sections=$2; shift 2 ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//;/^set -u/d'; exit 0 ;;
	*) echo "gpu-check.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

if [ -n "$bundle" ]; then
	bundle=${bundle%/}
	if [ ! -d "$bundle" ] && [ -f "$bundle.tar.xz" ]; then
		tar -C "$(dirname "$bundle")" -xJf "$bundle.tar.xz" || exit 1
	fi
	[ -f "$bundle/env.sh" ] || { echo "gpu-check.sh: no $bundle/env.sh (run scripts/bundle.sh)" >&2; exit 1; }
	# shellcheck source=/dev/null
	. "$bundle/env.sh"
	xj=$XJ_BUNDLE/bin/xjoin
	test_dir=$XJ_BUNDLE/bin
	commit=$(head -1 "$XJ_BUNDLE/COMMIT")
	big_candidates=("$XJ_BUNDLE"/data/glove-100d-100k*.h5 ../shared/data/glove-100d-100k.h5)
else
	if [ ! -x build/xjoin ]; then
		scripts/build.sh >/dev/null || { echo "gpu-check.sh: build failed" >&2; exit 1; }
	fi
	xj=$PWD/build/xjoin
	test_dir="$PWD/build/tests/gpu $PWD/build/tests"
	commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
	[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && commit="$commit (modified)"
	big_candidates=(../shared/data/glove-100d-100k.h5)
fi

mkdir -p "$work" || exit 1
log=$work/log
: >"$log"

# libnccl.so.2 for the NCCL transport (dlopen), unless the loader finds it:
# python3's nvidia-nccl and torch packages, then the CUDA toolkit
nccl_candidates() {
	python3 - 2>/dev/null <<'PY'
import importlib.util, os
for mod in ("nvidia.nccl", "torch"):
    try:
        spec = importlib.util.find_spec(mod)
    except Exception:
        continue
    for loc in (spec.submodule_search_locations or []) if spec else []:
        print(os.path.join(loc, "lib", "libnccl.so.2"))
PY
	echo /usr/local/cuda/lib64/libnccl.so.2 /usr/local/cuda/lib/libnccl.so.2
}
if [ -z "${XJ_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then
	for f in $(nccl_candidates); do
		[ -f "$f" ] && { export XJ_NCCL_LIBRARY=$f; break; }
	done
fi

# --- header -------------------------------------------------------------------
echo "# xjoin gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
echo "commit $commit"
[ -n "$bundle" ] && sed -n '2,$s/^/# bundle /p' "$XJ_BUNDLE/COMMIT"
"$xj" --version 2>&1 | sed 's/^/# /'
if command -v nvidia-smi >/dev/null 2>&1; then
	nvidia-smi -L 2>&1 | sed 's/^/gpu: /'
	echo "driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | head -1)"
else
	echo "gpu: none (no nvidia-smi)"
	echo "driver none"
fi
[ -n "${XJ_CUDA_LIBDIR:-}" ] && echo "# CUDA libraries from $XJ_CUDA_LIBDIR"
echo "# NCCL: ${XJ_NCCL_LIBRARY:-libnccl.so.2 on the loader path}"
# xjoin loads its CUDA backend, libxjoin_cuda.so, from its own folder at
# run time; the CUDA runtime and cuBLAS are that module's libraries
cuda_module=$(dirname "$xj")/libxjoin_cuda.so
[ -f "$cuda_module" ] || echo "# no $cuda_module: built without CUDA?"
for elf in "$xj" "$cuda_module"; do
	[ -f "$elf" ] || continue
	if ldd "$elf" | grep -q "not found"; then
		echo "# unresolved libraries of $(basename "$elf"):"
		ldd "$elf" | grep "not found" | sed 's/^/#   /'
	fi
done
devices=$("$xj" devices 2>&1)
echo "$devices" | sed 's/^/# /'

gpu_reason=
if ! echo "$devices" | grep -q "backend: cuda"; then
	gpu_reason=$(echo "$devices" | sed -n 's/.*no usable GPU: //p' | head -1)
	[ -n "$gpu_reason" ] || gpu_reason="xjoin devices found no usable GPU"
fi

# a Python with h5py and numpy for compare.py
py=
for p in python3 /opt/torch/.venv/bin/python3 /usr/bin/python3; do
	if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import h5py, numpy' 2>/dev/null; then
		py=$p
		break
	fi
done

# --- bookkeeping ----------------------------------------------------------------
# want N: section N is to run (--sections)
want() { [ -z "$sections" ] || [[ ",$sections," == *",$1,"* ]]; }
n_pass=0
n_fail=0
n_skip=0
result() {	# STATUS NAME [DETAIL]
	printf '%-4s %s%s\n' "$1" "$2" "${3:+  ($3)}"
	case "$1" in
	PASS) n_pass=$((n_pass + 1)) ;;
	FAIL) n_fail=$((n_fail + 1)) ;;
	SKIP) n_skip=$((n_skip + 1)) ;;
	esac
}

# run_xj OUT ARGS...: one xjoin job, its output in $log; status of xjoin
run_xj() {
	local out=$1
	shift
	echo "+ xjoin $* -o $out" >>"$log"
	"$xj" "$@" -o "$out" --force --quiet >>"$log" 2>&1
}

# same NAME GOT REF: compare two result files bit for bit
same() {
	local msg
	if msg=$("$py" tests/integration/compare.py "$2" "$3" 2>&1); then
		result PASS "$1"
	else
		echo "$msg" >>"$log"
		result FAIL "$1" "$(echo "$msg" | head -1)"
	fi
}

# check NAME CPU_ARGS -- GPU_ARGS: CPU reference (cached) and the GPU job
check() {
	local name=$1 key=$2
	shift 2
	local ref="$work/ref-$key.h5" got="$work/got.h5"
	local -a args=()
	while [ "$1" != "--" ]; do args+=("$1"); shift; done
	shift
	if [ $plumbing = 1 ]; then
		local -a swapped=()
		local a
		for a in "$@"; do [ "$a" = gpu ] && a=cpu; swapped+=("$a"); done
		set -- "${swapped[@]}"
		name="$name [plumbing: cpu]"
	elif [ -n "$gpu_reason" ]; then
		result SKIP "$name" "no GPU"
		return
	fi
	if [ -z "$py" ]; then
		result FAIL "$name" "no python3 with h5py and numpy to compare with"
		return
	fi
	if [ ! -f "$ref" ]; then
		run_xj "$ref" "${args[@]}" --device cpu ||
			{ result FAIL "$name" "CPU reference failed, see $log"; return; }
	fi
	rm -f "$got"
	if [ "${1:-}" = "mpirun" ]; then
		local np=$2
		shift 2
		echo "+ mpirun -np $np xjoin ${args[*]} $*" >>"$log"
		mpirun -np "$np" "$xj" "${args[@]}" "$@" -o "$got" --force --quiet >>"$log" 2>&1 ||
			{ result FAIL "$name" "xjoin exited $?, see $log"; return; }
	else
		run_xj "$got" "${args[@]}" "$@" ||
			{ result FAIL "$name" "xjoin exited $?, see $log"; return; }
	fi
	same "$name" "$got" "$ref"
}

# --- 1. the CUDA backend's own tests -------------------------------------------
want 1 &&
for t in contract_cuda test_cuda_backend test_cuda_precision test_nccl_transport; do
	prog=
	for dir in $test_dir; do
		[ -x "$dir/$t" ] && { prog=$dir/$t; break; }
	done
	if [ -z "$prog" ]; then
		result FAIL "gpu.$t" "$t missing in $test_dir (built without CUDA?)"
		continue
	fi
	"$prog" >"$work/$t.out" 2>&1
	rc=$?
	case $rc in
	0) result PASS "gpu.$t" ;;
	77) result SKIP "gpu.$t" "$(grep -m1 SKIPPED "$work/$t.out")" ;;
	*) result FAIL "gpu.$t" "exit $rc, see $work/$t.out"
	   # the first checks over their bound, then the end (the asserts)
	   grep -m 12 -E '[(]bound|> bound' "$work/$t.out"
	   tail -20 "$work/$t.out" ;;
	esac
done

# --- 2. GPU against CPU on real data ------------------------------------------------
demo=data/glove-demo.h5
big=
for f in "${big_candidates[@]}"; do
	[ -f "$f" ] && { big=$f; break; }
done
metrics="l2 sqeuclidean cosine ip"
ks="10 100"
[ $quick = 1 ] && { metrics="l2 cosine"; ks=10; }

sets=("demo:$demo")
[ -n "$big" ] && sets+=("glove100k:$big") && echo "# glove100k: $big"
want 2 &&
for s in "${sets[@]}"; do
	name=${s%%:*}
	file=${s#*:}
	for m in $metrics; do
		for k in $ks; do
			check "topk $name $m k=$k" "topk-$name-$m-$k" \
				topk -q "$file" -b "$file" -k "$k" -m "$m" -- --device gpu
		done
	done
done
want 2 && [ -z "$big" ] && result SKIP "topk glove100k" "glove-100d-100k.h5 not found in ${big_candidates[*]}"

# matrix: glove-demo whole, and a slice of glove-100k (the whole matrix is
# 400 MB)
slice=
if [ -n "$big" ] && [ -n "$py" ]; then
	slice=$work/glove100k-slice.h5
	[ -f "$slice" ] || "$py" - "$big" "$slice" <<'PY' >>"$log" 2>&1 || slice=
import sys, h5py
with h5py.File(sys.argv[1], "r") as src, h5py.File(sys.argv[2], "w") as dst:
    dst["test"] = src["test"][:200]
    dst["train"] = src["train"][:20000]
PY
fi
# rows that leave the double GEMM's bound undecided (as the contract's
# undecided_rows): pair i of test and train is, by i % 4, a dot product on
# a float32 rounding boundary, a duplicate at 1e17, a near-duplicate (one
# element one ulp apart) or two rows of any magnitude in 1e-20..1e17
adv=
if [ -n "$py" ]; then
	adv=$work/matrix-adversarial.h5
	[ -f "$adv" ] || "$py" - "$adv" <<'PY' >>"$log" 2>&1 || adv=
import sys, h5py, numpy as np
n, m, d = 700, 4200, 24
rng = np.random.default_rng(13)
q = rng.standard_normal((m, d)).astype(np.float32)
b = rng.standard_normal((m, d)).astype(np.float32)
for i in range(m):
    scale = 10.0 ** rng.uniform(-20, 17)
    if i % 4 == 0:
        sc = 2.0 ** (i % 117 - 60)
        q[i] = 0
        b[i] = 0
        q[i, :4] = [(1 + rng.uniform()) * sc, 2.0 ** -24 * sc,
                    (i % 3 - 1) * 2.0 ** -40 * sc, sc * 2.0 ** -30]
        b[i, :4] = [1, 1, 1, 2.0 ** -60]
    elif i % 4 == 1:
        q[i] = b[i] = q[i] * np.float32(1e17)
    elif i % 4 == 2:
        q[i] = b[i] = (q[i] * scale).astype(np.float32)
        b[i, i % d] = np.nextafter(b[i, i % d], np.float32(np.inf))
    else:
        q[i] = (q[i] * scale).astype(np.float32)
        b[i] = (b[i] * 10.0 ** rng.uniform(-20, 17)).astype(np.float32)
with h5py.File(sys.argv[1], "w") as f:
    f["test"] = q[:n]
    f["train"] = b
PY
fi
want 2 &&
for m in $metrics; do
	check "matrix demo $m" "matrix-demo-$m" \
		matrix -q "$demo" -b "$demo" -m "$m" -- --device gpu
	if [ -n "$slice" ]; then
		check "matrix glove100k[200x20000] $m" "matrix-slice-$m" \
			matrix -q "$slice" -b "$slice" -m "$m" -- --device gpu
	fi
	if [ -n "$adv" ]; then
		check "matrix adversarial[700x4200] $m" "matrix-adv-$m" \
			matrix -q "$adv" -b "$adv" -m "$m" -- --device gpu
	fi
done
want 2 && [ -z "$adv" ] && result SKIP "matrix adversarial" "no python3 with h5py and numpy"

# --- 3. a starved GPU: many small chunks ------------------------------------------
# The fraction is derived, never fixed: gpu_budget plans the job as xjoin
# does (the backend's tile buffers, staging and merge bytes, the planner's
# reserve) and gives 1.25 x the smallest budget that holds 64-row chunks,
# as a share of this GPU's free memory, so the check means the same on an
# 80 GB H100 as on a 141 GB H200. The dry run (--plumbing) evaluates the
# same formula for both.
budget_prog=
for dir in $test_dir; do
	[ -x "$dir/gpu_budget" ] && { budget_prog=$dir/gpu_budget; break; }
done
# FILE -> "n m d" of its /test and /train
shape_of() {
	"$py" -c 'import h5py, sys
f = h5py.File(sys.argv[1], "r")
print(f["test"].shape[0], f["train"].shape[0], f["test"].shape[1])' "$1"
}
# METRIC K FILE [--free BYTES] -> the fraction on stdout, or nothing
starved_fraction() {
	local metric=$1 k=$2 file=$3 n m d out
	shift 3
	read -r n m d < <(shape_of "$file") || return 1
	out=$("$budget_prog" -m "$metric" -n "$n" -M "$m" -d "$d" -k "$k" -c 64 "$@" 2>>"$log")
	echo "+ gpu_budget -m $metric -n $n -M $m -d $d -k $k -c 64 $*: $(echo $out)" >>"$log"
	echo "$out" | grep -q '^fits=yes$' || return 1
	echo "$out" | sed -n 's/^fraction=//p'
}
tf=${big:-$demo}
tn=$([ -n "$big" ] && echo glove100k || echo demo)
starved=("topk l2 100 $tf $tn" "topk cosine 10 $tf $tn")
[ -n "$slice" ] && starved+=("matrix l2 0 $slice glove100k[200x20000]")
if ! want 3; then
	:
elif [ -z "$budget_prog" ] || [ -z "$py" ]; then
	result SKIP "starved GPU checks" "no gpu_budget (built without CUDA) or no python3 with h5py"
else
	for s in "${starved[@]}"; do
		read -r cmd m k file name <<<"$s"
		if [ $plumbing = 1 ]; then
			# free memory as cudaMemGetInfo reports it on an idle
			# H100 80 GB and H200 141 GB
			h100=$(starved_fraction "$m" "$k" "$file" --free 84934656000)
			h200=$(starved_fraction "$m" "$k" "$file" --free 150323855360)
			if [ -n "$h100" ] && [ -n "$h200" ]; then
				result PASS "GPU memory formula: $cmd $name $m, 64-row chunks" "fraction $h100 on an H100, $h200 on an H200"
			else
				result FAIL "GPU memory formula: $cmd $name $m, 64-row chunks" "no fraction fits, see $log"
			fi
			frac=${h100:-0.001}
		elif [ -n "$gpu_reason" ]; then
			frac=0.001
		else
			frac=$(starved_fraction "$m" "$k" "$file") ||
				{ result FAIL "starved GPU: $cmd $name $m" "no fraction fits this GPU, see $log"; continue; }
		fi
		if [ "$cmd" = topk ]; then
			check "topk $name $m k=$k, --gpu-mem-fraction $frac --chunk-rows 64" "topk-$name-$m-$k" \
				topk -q "$file" -b "$file" -k "$k" -m "$m" -- --device gpu --gpu-mem-fraction "$frac" --chunk-rows 64
		else
			check "matrix $name $m, --gpu-mem-fraction $frac --chunk-rows 64" "matrix-slice-$m" \
				matrix -q "$file" -b "$file" -m "$m" -- --device gpu --gpu-mem-fraction "$frac" --chunk-rows 64
		fi
	done
fi

# --- 4. lower-precision candidate GEMMs: still the CPU's bits -------------------
precisions="tf32 bf16 fp16"
# (fp16: its 16-bit tile; fp16-ft: a float tile, XJ_CUDA_TILE16=0;
# -fmin: XJ_CUDA_FMIN=1, the scan reading fn2 past each sub-tile's least;
# -rowsR: XJ_CUDA_RS_ROWS=R, R query rows a selection block)
want 4 &&
for p in $precisions fp16-ft fp32-fmin fp16-fmin fp32-rows4 fp16-rows4 fp16-rows8; do
	t16= fmin= rsr= q=$p
	case $q in *-ft) t16=0; q=${q%-ft} ;; esac
	case $q in *-fmin) fmin=1; q=${q%-fmin} ;; esac
	case $q in *-rows[248]) rsr=${q##*-rows}; q=${q%-rows[248]} ;; esac
	for m in $metrics; do
		XJ_CUDA_TILE16=$t16 XJ_CUDA_FMIN=$fmin XJ_CUDA_RS_ROWS=$rsr check "topk $tn $m k=10 --precision $p" "topk-$tn-$m-10" \
			topk -q "$tf" -b "$tf" -k 10 -m "$m" -- --device gpu --precision "$q"
	done
	XJ_CUDA_TILE16=$t16 XJ_CUDA_FMIN=$fmin XJ_CUDA_RS_ROWS=$rsr check "topk demo l2 k=100 --precision $p" "topk-demo-l2-100" \
		topk -q "$demo" -b "$demo" -k 100 -m l2 -- --device gpu --precision "$q"
done

# --- 5. two ranks sharing one GPU ----------------------------------------------------
want 5 && check "mpirun -np 2 topk $tn l2 k=10 --gpu-share" "topk-$tn-l2-10" \
	topk -q "$tf" -b "$tf" -k 10 -m l2 -- mpirun 2 --device gpu --gpu-share
want 5 && check "mpirun -np 2 topk $tn ip k=100 --gpu-share" "topk-$tn-ip-100" \
	topk -q "$tf" -b "$tf" -k 100 -m ip -- mpirun 2 --device gpu --gpu-share

# --- 6. self-joins: each pair of shared rows scored once ------------------------------
# One file's one dataset on both sides (20,000 GloVe rows of glove-demo):
# the GPU's symmetric path (kernels/cuda/topk_cuda.cu) against the CPU's,
# itself the plain path's bits (integration.selfjoin), every metric, with
# and without a threshold, on 1 rank and on 2 ranks sharing the GPU, which
# the planner splits 1 x 2 (each rank scores its share of the pairs; the
# merge gathers them), as `xjoin plan` must say; and in each lower
# precision.
sf=$demo:/train
# the median 5th distance of a reference: a threshold that cuts lists
self_threshold() {
	"$py" -c 'import h5py, numpy as np, sys
d = h5py.File(sys.argv[1], "r")["distances"][:, 4]
print(repr(float(np.median(d[np.isfinite(d)]))))' "$1" 2>>"$log"
}
plan_dev=gpu plan_name="plan: self-join split over 2 ranks"
[ $plumbing = 1 ] && { plan_dev=cpu; plan_name="$plan_name [plumbing: cpu]"; }
if ! want 6; then
	:
elif [ -n "$gpu_reason" ] && [ $plumbing = 0 ]; then
	result SKIP "$plan_name" "no GPU"
elif plan_out=$(mpirun -np 2 "$xj" plan topk -q "$sf" -b "$sf" -k 10 \
		--device $plan_dev --gpu-share 2>>"$log") &&
	echo "$plan_out" >>"$log" &&
	grep -q "self-join split over 2 ranks" <<<"$plan_out"; then
	result PASS "$plan_name" "--device $plan_dev --gpu-share"
else
	result FAIL "$plan_name" "no split in the plan, see $log"
fi
want 6 &&
for m in $metrics; do
	sk=self-demo-$m-10
	check "self-join demo $m k=10" "$sk" \
		topk -q "$sf" -b "$sf" -k 10 -m "$m" -- --device gpu
	check "mpirun -np 2 self-join demo $m k=10 --gpu-share" "$sk" \
		topk -q "$sf" -b "$sf" -k 10 -m "$m" -- mpirun 2 --device gpu --gpu-share
	t=1
	[ -f "$work/ref-$sk.h5" ] && t=$(self_threshold "$work/ref-$sk.h5")
	check "self-join demo $m k=10 -t $t" "$sk-t" \
		topk -q "$sf" -b "$sf" -k 10 -m "$m" -t "$t" -- --device gpu
	check "mpirun -np 2 self-join demo $m k=10 -t $t --gpu-share" "$sk-t" \
		topk -q "$sf" -b "$sf" -k 10 -m "$m" -t "$t" -- mpirun 2 --device gpu --gpu-share
done
# the block pairs' GEMM in each lower precision
want 6 &&
for p in $precisions; do
	check "self-join demo cosine k=10 --precision $p" "self-demo-cosine-10" \
		topk -q "$sf" -b "$sf" -k 10 -m cosine -- --device gpu --precision "$p"
done
# XJ_CUDA_SYM=2: each block against the rows after it, the tile read once
# for both sides (kernels/cuda/once.cuh), every metric, a threshold, and
# the 16-bit tile and bf16
want 6 &&
for m in $metrics; do
	XJ_CUDA_SYM=2 check "self-join demo $m k=10 [read once]" "self-demo-$m-10" \
		topk -q "$sf" -b "$sf" -k 10 -m "$m" -- --device gpu
done
if want 6; then
	t=1
	[ -f "$work/ref-self-demo-l2-10.h5" ] && t=$(self_threshold "$work/ref-self-demo-l2-10.h5")
	XJ_CUDA_SYM=2 check "self-join demo l2 k=10 -t $t [read once]" "self-demo-l2-10-t" \
		topk -q "$sf" -b "$sf" -k 10 -m l2 -t "$t" -- --device gpu
	for p in fp16 bf16; do
		XJ_CUDA_SYM=2 check "self-join demo cosine k=10 --precision $p [read once]" "self-demo-cosine-10" \
			topk -q "$sf" -b "$sf" -k 10 -m cosine -- --device gpu --precision "$p"
	done
fi
# --- 7. range joins: every pair within a threshold, CSR ---------------------------
# Files cut from glove-demo: 200 queries against 19000 other rows, and
# 3000 rows for the self-joins (whole-file top-k references of those take
# the CPU too long for a check).
range_cut() {	# OUT: the two cuts of glove-demo, once
	[ -f "$1" ] || "$py" - "$demo" "$1" <<'PY' >>"$log" 2>&1
import sys, h5py
with h5py.File(sys.argv[1], "r") as src, h5py.File(sys.argv[2], "w") as dst:
    dst["test"] = src["train"][19000:19200]
    dst["train"] = src["train"][:19000]
    dst["selfset"] = src["train"][:3000]
PY
}
# exact_threshold KEY ARGS...: the 20th neighbour's value of a median
# query (by that value) of a CPU top-k of ARGS: some pair's value exactly,
# printed as the shortest decimal of that float as a double, which is the
# float itself (xjoin keeps value <= t for the decimal t as written, so
# the float's shortest float32 decimal could fall just below it)
exact_threshold() {
	local key=$1 thr="$work/thr-$1.h5"
	shift
	[ -f "$thr" ] || run_xj "$thr" topk -k 20 "$@" --device cpu || return 1
	"$py" - "$thr" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as h5:
    v = np.sort(h5["distances"][:, 19])
print(repr(float(v[len(v) // 2])))
PY
}
rfile=$work/range-demo.h5
if ! want 7; then
	:
elif [ -z "$py" ]; then
	result SKIP "range checks" "no python3 with h5py and numpy"
elif ! range_cut "$rfile"; then
	result FAIL "range checks" "cannot cut $demo, see $log"
else
	rsets=("demo[200x19000]:$rfile:$rfile")
	[ -n "$slice" ] && rsets+=("glove100k[200x20000]:$slice:$slice")
	for s in "${rsets[@]}"; do
		IFS=: read -r name qf bf <<<"$s"
		for m in $metrics; do
			t=$(exact_threshold "$name-$m" -q "$qf" -b "$bf" -m "$m") ||
				{ result FAIL "range $name $m" "no threshold, see $log"; continue; }
			check "range $name $m -t $t" "range-$name-$m" \
				range -q "$qf" -b "$bf" -m "$m" -t "$t" -- --device gpu
			if [ "$name" = "demo[200x19000]" ] && [ "$m" = l2 ]; then
				check "range $name $m -t $t --chunk-rows 64" "range-$name-$m" \
					range -q "$qf" -b "$bf" -m "$m" -t "$t" -- --device gpu --chunk-rows 64
				check "mpirun -np 2 range $name $m -t $t --gpu-share" "range-$name-$m" \
					range -q "$qf" -b "$bf" -m "$m" -t "$t" -- mpirun 2 --device gpu --gpu-share
			fi
		done
	done
	sf=$rfile:/selfset
	for m in $metrics; do
		t=$(exact_threshold "self-$m" -q "$sf" -b "$sf" -m "$m") ||
			{ result FAIL "range demo[3000] $m --self" "no threshold, see $log"; continue; }
		check "range demo[3000] $m -t $t --self" "range-self-$m" \
			range -q "$sf" -b "$sf" -m "$m" -t "$t" --self -- --device gpu
	done
	check "range demo[3000] l2 --self, every pair (pair buffer drained)" "range-self-all" \
		range -q "$sf" -b "$sf" -m l2 -t 1e30 --self -- --device gpu
fi

# --- summary -------------------------------------------------------------------------
echo "# log: $log"
[ $n_skip -gt 0 ] && echo "$n_skip skipped${gpu_reason:+ (no GPU: $gpu_reason)}"
echo "$n_pass passed, $n_fail failed"
[ $n_fail -eq 0 ]
