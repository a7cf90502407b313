#!/bin/bash
# install_case.sh SOURCE BUILD WORK: the installed tree works where it is
# moved to, and the Debian packages carry what they should.
#
#   1. cmake --install BUILD --prefix WORK/a, then mv WORK/a WORK/moved:
#      moved/bin/xjoin-mpirun runs moved/bin/xjoin on 2 ranks and writes
#      the build tree's bits (h5diff); the man page renders without a
#      troff warning; the modulefile, loaded with environment modules'
#      modulecmd, puts moved/bin first on PATH and points XJOIN_LIBRARY
#      at moved's libxjoin.so, which the Python package then loads.
#   2. cpack -G DEB: the xjoin package's Depends name Debian's Open MPI,
#      HDF5, OpenBLAS, oneDNN and libinih packages; unpacked under
#      WORK/root (a prefix it was not built for), its xjoin runs the
#      same job with the same bits; the xjoin-cuda package (when CUDA was
#      built) holds the module in the same library folder.
set -euo pipefail

src=$1
build=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
fail() { echo "install_case: FAIL: $*" >&2; exit 1; }

data=$src/data/glove-demo.h5
job=(topk -q "$data:/train" -b "$data" -k 7 --metric cosine --force --quiet)
same() {        # the results' datasets, bit for bit (attributes hold times)
	h5diff "$1" "$2" /neighbors /neighbors >/dev/null &&
		h5diff "$1" "$2" /distances /distances >/dev/null
}
mpi=(-np 2 --oversubscribe)

"$build/xjoin" "${job[@]}" -o "$work/ref.h5"

# ---- 1. install, move, run ---------------------------------------------
cmake --install "$build" --prefix "$work/a" >/dev/null
mv "$work/a" "$work/moved"
m=$work/moved
for f in bin/xjoin bin/xjoin-mpirun share/man/man1/xjoin.1 \
	 share/xjoin/xjoin.sbatch share/doc/xjoin/README.md \
	 share/modulefiles/xjoin; do
	[ -e "$m/$f" ] || fail "no $f in the installed tree"
done
lib=$(dirname "$(find "$m" -name libxjoin.so | head -n 1)")
[ -f "$lib/libxjoin.so" ] || fail "no libxjoin.so installed"
if [ -f "$build/libxjoin_cuda.so" ]; then
	[ -f "$lib/libxjoin_cuda.so" ] ||
		fail "the CUDA module is not beside libxjoin.so"
fi
if grep -q -F "$work/a" "$m/bin/xjoin" "$lib/libxjoin.so"; then
	fail "the installed binary holds its install prefix"
fi

"$m/bin/xjoin-mpirun" "${mpi[@]}" "$m/bin/xjoin" "${job[@]}" \
	-o "$work/moved.h5"
same "$work/ref.h5" "$work/moved.h5" ||
	fail "the moved install's output differs from the build tree's"
echo "install_case: moved install: same bits on 2 ranks"

warn=$(groff -man -Tutf8 -ww -z "$m/share/man/man1/xjoin.1" 2>&1)
[ -z "$warn" ] || fail "troff warnings in the man page: $warn"
MANPATH=$m/share/man man -w xjoin | grep -q -F "$m/share/man" ||
	fail "man does not find xjoin.1 under the moved prefix"

if command -v modulecmd >/dev/null; then
	(
		eval "$(MODULEPATH=$m/share/modulefiles modulecmd sh load xjoin)"
		[ "$(command -v xjoin)" = "$m/bin/xjoin" ] ||
			fail "module load: xjoin is $(command -v xjoin)"
		[ "$(realpath "$XJOIN_LIBRARY")" = "$(realpath "$lib/libxjoin.so")" ] ||
			fail "module load: XJOIN_LIBRARY=$XJOIN_LIBRARY"
		xjoin --version | grep -q xjoin || fail "xjoin --version"
		if [ -d "$src/python/xjoin" ]; then
			PYTHONPATH=$src/python /usr/bin/python3 -c '
import os, xjoin, xjoin._lib as l
assert os.path.realpath(l.library_path()) == os.path.realpath(os.environ["XJOIN_LIBRARY"]), l.library_path()
print("install_case: module load: python runs", l.library_path(), "version", xjoin.version())'
		fi
	)
	echo "install_case: module load: PATH and XJOIN_LIBRARY point into the moved tree"
else
	echo "install_case: no modulecmd (environment-modules): modulefile not loaded"
fi

# ---- 2. Debian packages -------------------------------------------------
if ! command -v dpkg-deb >/dev/null || ! command -v dpkg-shlibdeps >/dev/null; then
	echo "install_case: no dpkg-dev: packages not built"
	exit 0
fi
(cd "$build" && cpack -G DEB -B "$work/deb" >"$work/cpack.log" 2>&1) ||
	{ cat "$work/cpack.log"; fail "cpack"; }
deb=$(ls "$work"/deb/xjoin_*.deb)
deps=$(dpkg-deb -f "$deb" Depends)
echo "install_case: xjoin Depends: $deps"
for p in openmpi-bin libopenmpi libhdf5-openmpi libopenblas libdnnl libinih; do
	case $deps in *"$p"*) ;; *) fail "Depends lacks $p" ;; esac
done
dpkg-deb -x "$deb" "$work/root"
[ -x "$work/root/usr/bin/xjoin" ] || fail "no usr/bin/xjoin in $deb"
mpirun "${mpi[@]}" "$work/root/usr/bin/xjoin" "${job[@]}" -o "$work/deb.h5"
same "$work/ref.h5" "$work/deb.h5" ||
	fail "the packaged binary's output differs"
if [ -f "$build/libxjoin_cuda.so" ]; then
	cdeb=$(ls "$work"/deb/xjoin-cuda_*.deb)
	dpkg-deb -c "$cdeb" | grep -q "/usr${lib#"$m"}/libxjoin_cuda.so\$" ||
		fail "xjoin-cuda does not hold the module beside libxjoin.so"
	[ "$(dpkg-deb -f "$cdeb" Depends)" = "xjoin (= $(dpkg-deb -f "$deb" Version))" ] ||
		fail "xjoin-cuda's Depends: $(dpkg-deb -f "$cdeb" Depends)"
fi
echo "install_case: packages: $(cd "$work/deb" && ls ./*.deb | tr '\n' ' ')"
rm -rf "$work"
echo "install_case: ok"
