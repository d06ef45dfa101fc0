#!/bin/sh
# Runs test_launch.py under Open MPI's mpirun with NRANKS ranks (as root where need be), with
# Debian's /usr/bin/python3. Exits 77 (CTest's "skipped") with a line saying why when mpirun,
# that interpreter or its numpy is missing.
# usage: launch_mpirun.sh NRANKS
set -e
NRANKS=$1
PY=/usr/bin/python3
if ! command -v mpirun >/dev/null 2>&1 || ! mpirun --version 2>/dev/null | grep -q "Open MPI"; then
    echo "SKIP: Open MPI's mpirun is missing (apt-get install openmpi-bin)"
    exit 77
fi
if [ ! -x "$PY" ] || ! "$PY" -c 'import numpy' >/dev/null 2>&1; then
    echo "SKIP: $PY or its numpy is missing (apt-get install python3 python3-numpy)"
    exit 77
fi
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHONPATH="$(dirname "$HERE"):$HERE${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH PYTHONDONTWRITEBYTECODE=1 TUTTI_TIMEOUT_MS=60000
ROOT=
[ "$(id -u)" -eq 0 ] && ROOT=--allow-run-as-root
# Nothing of torch's or tutti-run's in the ranks' environment: the test is that they are derived.
exec env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT -u NCCL_COMM_ID \
    mpirun $ROOT --oversubscribe --bind-to none -np "$NRANKS" -x PYTHONPATH \
    -x PYTHONDONTWRITEBYTECODE -x TUTTI_TIMEOUT_MS -x TUTTI_LIBRARY -x TUTTI_TORCH_BUILD_DIR \
    "$PY" "$HERE/test_launch.py" mpirun
