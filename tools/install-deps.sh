#!/bin/sh
# Installs what a fresh Debian machine may lack. `install-deps.sh build`: what building the
# library and its tools needs (cmake, ninja, a C compiler, binutils, pkg-config and libsodium for
# the bootstrap's authentication). `install-deps.sh` (or `all`): that, and what the test suite
# uses (iproute2 for network-namespace tests; libucx-dev for the optional UCX transport (the
# library builds without it); dpkg-dev and file for the install and package tests; man-db for
# the man page check; Open MPI for the MPI example; hwloc and chromium (below); Debian's python3
# with numpy, pip, setuptools and wheel for the Python bindings' tests; python3-torch,
# libtorch-dev, pybind11-dev and g++ for the PyTorch backend's tests). Does nothing when
# everything is present. As root it runs apt-get, else through sudo where there is one; with
# neither it prints the command and fails where the build itself lacks something.
set -e
scope=${1:-all}
missing=""
command -v cmake >/dev/null 2>&1 || missing="$missing cmake"
command -v ninja >/dev/null 2>&1 || missing="$missing ninja-build"
command -v cc >/dev/null 2>&1 || missing="$missing gcc"
command -v nm >/dev/null 2>&1 || missing="$missing binutils"
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
pkg-config --exists libsodium 2>/dev/null || missing="$missing libsodium-dev"
torch_missing=""
build_missing=$missing
if [ "$scope" != build ]; then
    command -v ip >/dev/null 2>&1 || missing="$missing iproute2"
    command -v dpkg-shlibdeps >/dev/null 2>&1 || missing="$missing dpkg-dev"
    command -v file >/dev/null 2>&1 || missing="$missing file"
    command -v man >/dev/null 2>&1 || missing="$missing man-db"
    command -v mpicc >/dev/null 2>&1 || missing="$missing libopenmpi-dev"
    command -v mpirun >/dev/null 2>&1 || missing="$missing openmpi-bin"
    # The bindings target Debian's interpreter, not whatever python3 comes first on PATH.
    PY=/usr/bin/python3
    [ -x $PY ] || missing="$missing python3"
    for pair in numpy:python3-numpy pip:python3-pip setuptools:python3-setuptools \
                wheel:python3-wheel; do
        [ -x $PY ] && $PY -c "import ${pair%%:*}" >/dev/null 2>&1 || missing="$missing ${pair#*:}"
    done
    # tutti.torch (the PyTorch backend) and its tests: Debian's torch 1.13, its C++ headers and
    # pybind11 (the shim is compiled on first import), and a C++ compiler.
    # They come without recommends: python3-torch would pull in a desktop's worth of them.
    [ -x $PY ] && $PY -c "import torch" >/dev/null 2>&1 ||
        torch_missing="$torch_missing python3-torch"
    [ -d /usr/include/torch/csrc/distributed ] || torch_missing="$torch_missing libtorch-dev"
    [ -f /usr/include/pybind11/pybind11.h ] || torch_missing="$torch_missing pybind11-dev"
    command -v c++ >/dev/null 2>&1 || torch_missing="$torch_missing g++"
    # hwloc: the topology tutti-info prints and placement uses (optional at build time); lstopo for
    # the test that compares them. Chromium (headless) screenshots the trace picture in its test.
    pkg-config --exists hwloc 2>/dev/null || missing="$missing libhwloc-dev"
    command -v lstopo-no-graphics >/dev/null 2>&1 || missing="$missing hwloc"
    command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
    pkg-config --exists ucx 2>/dev/null || missing="$missing libucx-dev"
fi
[ -z "$missing$torch_missing" ] && exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "install-deps: missing:$missing$torch_missing; as root, run:" >&2
        echo "  apt-get install$missing$torch_missing" >&2
        # The build needs its part; the tests that lack theirs report skipped or fail.
        [ -z "$build_missing" ] && exit 0
        exit 1
    fi
    SUDO="sudo"
fi
echo "install-deps: installing$missing$torch_missing"
$SUDO apt-get update -qq
[ -z "$missing" ] || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
[ -z "$torch_missing" ] ||
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        $torch_missing
