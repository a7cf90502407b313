"""Build hook of the xjoin package: the C library it calls (libxjoin.so,
and the CUDA backend's module libxjoin_cuda.so where CUDA builds) comes
from the checkout's CMake build, which this runs when the library is
missing or older than the sources (scripts/build.sh: cmake, a C compiler,
Open MPI, parallel HDF5, OpenBLAS, libinih and oneDNN from Debian's
packages; `scripts/setup.sh` installs them). XJOIN_BUILD_DIR names
another build folder (default: ../build).
"""

import glob
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def newest_source():
    newest = 0.0
    for top in ("app", "io", "kernels", "config"):
        for path in glob.glob(os.path.join(ROOT, top, "**", "*.*"),
                              recursive=True):
            newest = max(newest, os.path.getmtime(path))
    return newest


class BuildWithLibrary(build_py):
    def run(self):
        build = os.environ.get("XJOIN_BUILD_DIR", os.path.join(ROOT, "build"))
        lib = os.path.join(build, "libxjoin.so")
        if not os.path.exists(lib) or \
                os.path.getmtime(lib) < newest_source():
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build,
                                   "-DCMAKE_BUILD_TYPE=Release"])
            subprocess.check_call(["cmake", "--build", build, "-j",
                                   str(os.cpu_count() or 2), "--target",
                                   "xjoin_lib"])
            cuda = subprocess.run(["cmake", "--build", build, "--target",
                                   "xjoin_cuda"], capture_output=True)
            if cuda.returncode:
                print("xjoin: no CUDA module built (no CUDA compiler?): "
                      "the package runs on the CPU")
        dest = os.path.join(HERE, "xjoin", "lib")
        os.makedirs(dest, exist_ok=True)
        for name in ("libxjoin.so", "libxjoin_cuda.so"):
            src = os.path.join(build, name)
            if os.path.exists(src):
                shutil.copy2(src, os.path.join(dest, name))
        super().run()


setup(cmdclass={"build_py": BuildWithLibrary})
