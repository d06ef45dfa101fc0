#!/bin/sh
# Installs the build and test tools a fresh Debian machine may lack (cmake, ninja, a C compiler,
# iproute2 for network-namespace tests, and for the Python bindings' tests Debian's python3 with
# numpy, pip, setuptools and wheel). Does nothing when everything is present.
set -e
missing=""
command -v cmake >/dev/null 2>&1 || missing="$missing cmake"
command -v ninja >/dev/null 2>&1 || missing="$missing ninja-build"
command -v cc >/dev/null 2>&1 || missing="$missing gcc"
command -v nm >/dev/null 2>&1 || missing="$missing binutils"
command -v ip >/dev/null 2>&1 || missing="$missing iproute2"
# The bindings target Debian's interpreter, not whatever python3 comes first on PATH.
PY=/usr/bin/python3
[ -x $PY ] || missing="$missing python3"
for pair in numpy:python3-numpy pip:python3-pip setuptools:python3-setuptools \
            wheel:python3-wheel; do
    [ -x $PY ] && $PY -c "import ${pair%%:*}" >/dev/null 2>&1 || missing="$missing ${pair#*:}"
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
