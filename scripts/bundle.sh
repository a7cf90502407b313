#!/usr/bin/env bash
# Pack the built xjoin (and its test programs) with every shared library
# they need that a bare CUDA machine lacks -- Open MPI with its plugins and
# help files, PMIx, parallel HDF5, OpenBLAS, libinih, CUnit -- into one
# folder that runs anywhere with glibc >= this machine's:
#
#   scripts/bundle.sh [--out DIR] [--no-big-data] [--big-rows N] [--no-archive]
#
# DIR (default bundle/) gets:
#   bin/          xjoin, libxjoin_cuda.so (the CUDA backend, which xjoin
#                 loads from its own folder), the backend contract
#                 programs (contract_cuda, contract_cpu, gpu_budget),
#                 test_cuda_backend, the unit test programs
#   lib/          the libraries, each under its soname
#   lib/compat/   libstdc++ and libgcc_s, used only where the system has none
#                 (a newer system copy serves our programs too; ours could be
#                 too old for the machine's other libraries)
#   mpi/          an Open MPI prefix tree (OPAL_PREFIX): mpirun, orted,
#                 ompi_info, the mca plugins, help files, and PMIx's tree
#   data/         glove-100d-100k.h5 from ../shared/data when present, or
#                 with --big-rows N its first N train rows and all its test
#                 rows as glove-100d-100k-first<N>.h5 (a run call carries
#                 64 MiB: tree, archive and data together)
#   env.sh        source it: PATH, LD_LIBRARY_PATH, OPAL_PREFIX, PMIX prefix,
#                 and the CUDA runtime and cuBLAS from the machine
#   COMMIT        the commit (and tree state) the binaries were built from
# and DIR.tar.xz next to it, the form to carry (what travels is counted in
# bytes; OpenBLAS alone is 36 MB unpacked, 4 MB packed).
#
# Left out on purpose: glibc (libc, libm, libpthread, libdl, librt,
# ld-linux), the NVIDIA driver (libcuda, libnvidia-*), which must match the
# machine's kernel module, and the CUDA runtime and cuBLAS (libcublasLt is
# 517 MB): env.sh takes those from the machine's Python packages
# (nvidia-cublas, nvidia-cuda-runtime) or its /usr/local/cuda. Only
# libxjoin_cuda.so needs them; where they are missing xjoin says so and
# runs on the CPU.
# Open MPI's InfiniBand, UCX, libfabric and PSM plugins are left out too:
# one node needs only shared memory and TCP.
set -euo pipefail
cd "$(dirname "$0")/.."

out=bundle
big_data=1
big_rows=
archive=1
while [ $# -gt 0 ]; do
	case "$1" in
	--out) out="$2"; shift 2 ;;
	--no-big-data) big_data=0; shift ;;
	--big-rows) big_rows="$2"; shift 2 ;;
	--no-archive) archive=0; shift ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//;/^set -e/d'; exit 0 ;;
	*) echo "bundle.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done

[ -x build/xjoin ] || { echo "bundle.sh: build/xjoin missing: run scripts/build.sh first" >&2; exit 1; }
command -v orterun >/dev/null || { echo "bundle.sh: Open MPI (orterun) not installed here" >&2; exit 1; }

# Debian's Open MPI: prefix /usr, libdir /usr/lib/x86_64-linux-gnu, plugins
# under that; with OPAL_PREFIX=P every /usr/X becomes P/X.
triplet=$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
ompi_plugins=/usr/lib/$triplet/openmpi/lib/openmpi3
pmix_prefix=/usr/lib/$triplet/pmix2
[ -d "$ompi_plugins" ] || { echo "bundle.sh: no Open MPI plugins at $ompi_plugins" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out"/{bin,lib/compat,data} "$out/mpi/bin" "$out/mpi/share"
mpi_libdir="$out/mpi/lib/$triplet"
mkdir -p "$mpi_libdir/openmpi/lib"

# --- programs -------------------------------------------------------------
elves=()
for f in build/xjoin build/tests/gpu/test_cuda_backend build/tests/contract_* build/tests/gpu_budget \
	build/tests/test_*; do
	[ -f "$f" ] && [ -x "$f" ] || continue
	cp "$f" "$out/bin/"
	elves+=("$out/bin/$(basename "$f")")
done
# the CUDA backend, next to xjoin (app/plan/cuda_module.c looks there)
if [ -f build/libxjoin_cuda.so ]; then
	cp build/libxjoin_cuda.so "$out/bin/"
	elves+=("$out/bin/libxjoin_cuda.so")
fi

# mpirun, mpiexec and orterun are one program; orted starts ranks on other
# nodes, ompi_info shows what the bundle's Open MPI finds.
cp -L "$(command -v orterun)" "$out/mpi/bin/orterun"
for f in orted ompi_info; do
	cp -L "/usr/bin/$f" "$out/mpi/bin/$f"
	elves+=("$out/mpi/bin/$f")
done
elves+=("$out/mpi/bin/orterun")
ln -s orterun "$out/mpi/bin/mpirun"
ln -s orterun "$out/mpi/bin/mpiexec"

cp -a /usr/share/openmpi "$out/mpi/share/"
rm -rf "$out/mpi/share/openmpi/"*wrapper-data.txt "$out/mpi/share/openmpi/amca-param-sets"
cp -a "$ompi_plugins" "$mpi_libdir/openmpi/lib/"
rm -f "$mpi_libdir"/openmpi/lib/openmpi3/*{ucx,ofi,openib,psm,uct,verbs}*.so
mkdir -p "$mpi_libdir/pmix2"
cp -a "$pmix_prefix/lib" "$pmix_prefix/share" "$mpi_libdir/pmix2/"
for f in "$mpi_libdir"/openmpi/lib/openmpi3/*.so "$mpi_libdir"/pmix2/lib/pmix/*.so; do
	elves+=("$f")
done

# --- libraries: the closure of what ldd resolves --------------------------
skip='^(linux-vdso|ld-linux|libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libanl|libnsl|libcuda|libnvidia-|libcudart|libcublas|libcublasLt)\.'
compat='^(libstdc\+\+|libgcc_s)\.'
missing=()
for elf in "${elves[@]}"; do
	while read -r name arrow path _; do
		[ "$arrow" = "=>" ] || continue
		if [[ "$name" =~ $skip ]]; then
			continue
		fi
		if [ "$path" = "not" ]; then
			missing+=("$elf: $name")
			continue
		fi
		if [[ "$name" =~ $compat ]]; then
			dest="$out/lib/compat/$name"
		else
			dest="$out/lib/$name"
		fi
		[ -e "$dest" ] || cp -L "$path" "$dest"
	done < <(ldd "$elf" 2>/dev/null)
done
if [ ${#missing[@]} -gt 0 ]; then
	printf 'bundle.sh: unresolved here (left as is):\n' >&2
	printf '  %s\n' "${missing[@]}" >&2
fi
# Open MPI's own libraries also stand in its libdir, where its plugins'
# RUNPATH-free lookups and ompi_info expect them.
for f in "$out"/lib/lib{mpi,open-rte,open-pal}.so.*; do
	ln -s "../../../lib/$(basename "$f")" "$mpi_libdir/$(basename "$f")"
done

# --- data -------------------------------------------------------------------
big=../shared/data/glove-100d-100k.h5
if [ $big_data = 1 ] && [ -f "$big" ] && [ -n "$big_rows" ]; then
	/usr/bin/python3 - "$big" "$out/data/glove-100d-100k-first$big_rows.h5" "$big_rows" <<'PY' || exit 1
import sys, h5py
with h5py.File(sys.argv[1], "r") as src, h5py.File(sys.argv[2], "w") as dst:
    dst["test"] = src["test"][...]
    dst["train"] = src["train"][:int(sys.argv[3])]
PY
elif [ $big_data = 1 ] && [ -f "$big" ]; then
	cp "$big" "$out/data/"
fi

# --- env.sh, COMMIT ---------------------------------------------------------
{
	git rev-parse HEAD 2>/dev/null || echo unknown
	if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
		echo "tree: modified (uncommitted changes in tracked files)"
	else
		echo "tree: clean"
	fi
	echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release; echo "$PRETTY_NAME"), glibc $(ldd --version | head -1 | awk '{print $NF}')"
	echo "cuda architectures: $(sed -n 's/^XJOIN_CUDA_ARCHITECTURES:STRING=//p' build/CMakeCache.txt 2>/dev/null)"
} >"$out/COMMIT"

cat >"$out/env.sh" <<'EOF'
# Source me (bash): puts the bundled xjoin, test programs and Open MPI first.
#   . bundle/env.sh
# XJ_CUDA_LIBDIR=DIR[:DIR] names where libcudart.so.13 and libcublas*.so.13
# are, when the search below (python3's nvidia packages, /usr/local/cuda)
# does not find them. xjoin needs them only for its CUDA backend
# (bin/libxjoin_cuda.so, loaded at run time; XJOIN_CUDA_MODULE=FILE loads
# another); without them it runs on the CPU and says why.
XJ_BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export XJ_BUNDLE

xj_cuda=${XJ_CUDA_LIBDIR:-}
if [ -z "$xj_cuda" ]; then
	# pip's CUDA 13 wheels put the libraries in nvidia/cu13/lib, older ones
	# in nvidia/<package>/lib: look for the files, not a layout
	for py in python3 /opt/torch/.venv/bin/python3; do
		xj_cuda=$("$py" - 2>/dev/null <<'PY'
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit(0)
dirs = []
for root in list(nvidia.__path__):
    for lib in ("libcublasLt.so.13", "libcublas.so.13", "libcudart.so.13"):
        for f in glob.glob(os.path.join(root, "*", "lib", lib)):
            d = os.path.dirname(f)
            if d not in dirs:
                dirs.append(d)
print(":".join(dirs))
PY
)
		[ -n "$xj_cuda" ] && break
	done
fi
if [ -z "$xj_cuda" ]; then
	for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
		if [ -e "$d/libcublasLt.so.13" ]; then
			xj_cuda=$d
			break
		fi
	done
fi
export XJ_CUDA_LIBDIR=$xj_cuda

xj_ld=$XJ_BUNDLE/lib
[ -n "$xj_cuda" ] && xj_ld=$xj_ld:$xj_cuda
if ! /sbin/ldconfig -p 2>/dev/null | grep -q 'libstdc++\.so\.6 '; then
	xj_ld=$xj_ld:$XJ_BUNDLE/lib/compat
fi
export LD_LIBRARY_PATH=$xj_ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$XJ_BUNDLE/bin:$XJ_BUNDLE/mpi/bin:$PATH
export OPAL_PREFIX=$XJ_BUNDLE/mpi
export PMIX_PREFIX=$XJ_BUNDLE/mpi/lib/x86_64-linux-gnu/pmix2
export PMIX_INSTALL_PREFIX=$PMIX_PREFIX
# PMIx ignores the prefix for its plugins: name their folder
export PMIX_MCA_mca_base_component_path=$PMIX_PREFIX/lib/pmix
# what Debian's /etc/openmpi/openmpi-mca-params.conf says, which the
# machine may not have: no InfiniBand/UCX/libfabric paths, no warnings
# about unused transports
export OMPI_MCA_btl_base_warn_component_unused=0
export OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader,tcp}
export OMPI_MCA_pml=${OMPI_MCA_pml:-ob1}
export OMPI_MCA_mtl=${OMPI_MCA_mtl:-^ofi,psm,psm2}
export OMPI_MCA_osc=${OMPI_MCA_osc:-^ucx,pt2pt}
unset xj_ld xj_cuda py
EOF

n_lib=$(find "$out/lib" -type f | wc -l)
echo "bundle: $out ($(du -sh "$out" | cut -f1), $n_lib libraries; commit $(head -1 "$out/COMMIT"))"
if [ $archive = 1 ]; then
	tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -T0 -6 >"$out.tar.xz"
	echo "archive: $out.tar.xz ($(du -h "$out.tar.xz" | cut -f1)); unpack with: tar xJf $out.tar.xz"
	# the device call carries the working tree and this archive, 64 MiB
	# in all (docs/gpu-runbook.md)
	a=$(stat -c %s "$out.tar.xz")
	t=$(git ls-files -z | xargs -0 stat -c %s 2>/dev/null |
		awk '{ n += $1 } END { print n + 0 }')
	echo "with the tracked tree: $(( (a + t) / 1048576 )) MiB of the device call's 64"
	[ $((a + t)) -le 67108864 ] ||
		echo "bundle.sh: warning: archive and tree exceed the 64 MiB a device call carries" >&2
fi
