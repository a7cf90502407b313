# CPack: Debian packages (cd build && cpack -G DEB).
#
#   xjoin_VERSION_amd64.deb       the runtime component: bin/, lib/libxjoin.so,
#                                 the man page, docs, sbatch script and
#                                 modulefile; its Depends come from
#                                 dpkg-shlibdeps (Debian's Open MPI, HDF5,
#                                 OpenBLAS, oneDNN, libinih) plus openmpi-bin
#                                 for mpirun, so apt resolves them all on a
#                                 fresh Debian 12.
#   xjoin-cuda_VERSION_amd64.deb  the CUDA module alone. It links the CUDA
#                                 13 runtime and cuBLAS, which no Debian
#                                 package provides (NVIDIA's repository or
#                                 a toolkit under /usr/local/cuda does):
#                                 without them xjoin reports the GPU backend
#                                 unavailable and runs on the CPU.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME xjoin)
set(CPACK_PACKAGE_VENDOR "xjoin")
set(CPACK_PACKAGE_CONTACT "xjoin developers <xjoin@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "exact top-k, range and distance-matrix joins of dense vectors")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_COMPONENTS_ALL runtime)
if(TARGET xjoin_cuda)
  list(APPEND CPACK_COMPONENTS_ALL cuda)
endif()

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME xjoin)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION science)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "openmpi-bin")
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
"exact top-k, range and distance-matrix joins of dense vectors
 xjoin reads query and base vectors from HDF5 and writes, for every
 query row, its exact k nearest base rows (cosine, inner product or
 Euclidean), the pairs within a threshold, or the whole distance matrix.
 One MPI rank per GPU or node; the CPU backend uses OpenBLAS and oneDNN.")

set(CPACK_DEBIAN_CUDA_PACKAGE_NAME xjoin-cuda)
set(CPACK_DEBIAN_CUDA_PACKAGE_SECTION science)
set(CPACK_DEBIAN_CUDA_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_CUDA_PACKAGE_DEPENDS "xjoin (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_CUDA_DESCRIPTION
"xjoin's GPU backend (CUDA 13, cuBLAS)
 The module xjoin loads where an NVIDIA GPU and driver are. It needs the
 CUDA 13 runtime and cuBLAS (NVIDIA's cuda-cudart-13-0 and libcublas-13-0,
 or a toolkit under /usr/local/cuda); without them xjoin runs on the CPU.")

include(CPack)
