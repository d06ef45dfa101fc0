#!/bin/sh
# Runs one Python test of the bindings with Debian's /usr/bin/python3: under tutti-run with
# NRANKS ranks, or as one plain process when NRANKS is 0. Exits 77 (CTest's "skipped") with a
# line saying why when that interpreter or its numpy is missing.
# A hang fails within tutti-run's --timeout, well inside CTest's limit, with every rank's Python
# stacks (the tests dump them on SIGTERM): 240 s for tutti.torch's tests, whose shim is built
# first, outside the limit (a run takes 10-35 s), and 100 s for the others (CTest gives 120).
# usage: run.sh TUTTI_RUN NRANKS SCRIPT [ARGS...]
set -e
TUTTI_RUN=$1
NRANKS=$2
shift 2
PY=/usr/bin/python3
if [ ! -x "$PY" ]; then
    echo "SKIP: $PY is missing (apt-get install python3 python3-numpy)"
    exit 77
fi
if ! "$PY" -c 'import numpy' >/dev/null 2>&1; then
    echo "SKIP: numpy is missing for $PY (apt-get install python3-numpy)"
    exit 77
fi
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHONPATH="$(dirname "$HERE"):$HERE${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH
# No __pycache__ in the source tree.
export PYTHONDONTWRITEBYTECODE=1
TIMEOUT=100
case "$1" in
*test_torch.py|*test_torch_exit.py|*test_ddp.py|*bench_torch.py)
    # tutti.torch compiles its shim on first use: torch, its headers, pybind11 and g++.
    if ! "$PY" -c 'import torch, torch.distributed, torch.utils.cpp_extension' >/dev/null 2>&1 ||
       [ ! -f /usr/include/pybind11/pybind11.h ] || [ ! -d /usr/include/torch/csrc/distributed ] ||
       ! command -v c++ >/dev/null 2>&1 || ! command -v ninja >/dev/null 2>&1; then
        echo "SKIP: tutti.torch needs python3-torch, libtorch-dev, pybind11-dev, g++ and ninja-build"
        exit 77
    fi
    # Built here, once, so that a fresh build's minute or two counts against no rank's limit.
    "$PY" -c 'import tutti.torch; tutti.torch.extension()'
    TIMEOUT=240 ;;
*test_launch.py)
    TIMEOUT=240 ;;
esac
if [ "$NRANKS" = 0 ]; then
    exec "$PY" "$@"
fi
exec "$TUTTI_RUN" -n "$NRANKS" --timeout "$TIMEOUT" -x TUTTI_TIMEOUT_MS=60000 "$PY" "$@"
