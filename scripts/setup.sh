#!/usr/bin/env bash
# Install every Debian package xjoin needs to build, test and run its demo.
# Idempotent: installs only what is missing. CUDA is not installed here: the
# CUDA backend builds when /usr/local/cuda (or nvcc on PATH) is present.
set -euo pipefail

packages=(
	cmake make gcc pkg-config
	openmpi-bin libopenmpi-dev
	libhdf5-openmpi-dev hdf5-tools
	libopenblas-dev libinih-dev libcunit1-dev
	libdnnl-dev
	python3-numpy python3-h5py
	python3-scipy python3-matplotlib python3-pytest
	python3-setuptools python3-wheel python3-venv python3-pip
	dataset-fashion-mnist
	iproute2 nftables environment-modules
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "setup: all ${#packages[@]} packages present"
	exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
