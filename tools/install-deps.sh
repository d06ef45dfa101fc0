#!/bin/sh
# Installs the build and test tools a fresh Debian machine may lack (cmake, ninja, a C compiler,
# iproute2 for network-namespace tests, pkg-config and libsodium for the bootstrap's
# authentication). Does nothing when everything is present.
set -e
missing=""
command -v cmake >/dev/null 2>&1 || missing="$missing cmake"
command -v ninja >/dev/null 2>&1 || missing="$missing ninja-build"
command -v cc >/dev/null 2>&1 || missing="$missing gcc"
command -v nm >/dev/null 2>&1 || missing="$missing binutils"
command -v ip >/dev/null 2>&1 || missing="$missing iproute2"
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
pkg-config --exists libsodium 2>/dev/null || missing="$missing libsodium-dev"
[ -z "$missing" ] && exit 0
echo "install-deps: installing$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
