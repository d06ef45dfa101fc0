#!/bin/sh
# Installs the package the documented way (pip, offline, no build isolation) into a temporary
# --target directory from a copy of python/, with libtutti.so bundled from TUTTI_LIBRARY and the
# headers from TUTTI_INCLUDE, then runs a 2-rank job that imports it from there with
# TUTTI_LIBRARY unset: the installed package must find the library next to itself. Skips (77)
# without /usr/bin/python3, pip, setuptools, wheel or numpy.
# usage: test_install.sh TUTTI_RUN LIBTUTTI
set -e
TUTTI_RUN=$(realpath "$1")
LIB=$(realpath "$2")
PY=/usr/bin/python3
for mod in pip setuptools wheel numpy; do
    if [ ! -x "$PY" ] || ! "$PY" -c "import $mod" >/dev/null 2>&1; then
        echo "SKIP: $PY or its $mod module is missing (apt-get install python3-pip python3-setuptools python3-wheel python3-numpy)"
        exit 77
    fi
done
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cp -r "$(dirname "$HERE")" "$TMP/src"
rm -rf "$TMP/src/build" "$TMP/src"/*.egg-info
INC=$(dirname "$(dirname "$HERE")")/include
echo "+ TUTTI_LIBRARY=$LIB TUTTI_INCLUDE=$INC $PY -m pip install --no-build-isolation --no-index --no-deps --target $TMP/site $TMP/src"
TUTTI_LIBRARY=$LIB TUTTI_INCLUDE=$INC "$PY" -m pip install --no-build-isolation --no-index --no-deps -q \
    --disable-pip-version-check --target "$TMP/site" "$TMP/src" 2>&1 | grep -v "Running pip as the 'root' user" || true
for f in tutti/libtutti.so tutti/include/nccl.h tutti/include/tutti.h tutti/torch/__init__.py \
         tutti/torch/backend.cpp tutti/torch/operations.h tutti/torch/shim.h tutti/torch/work.h; do
    test -f "$TMP/site/$f" || { echo "FAIL: $f is not in the installed package"; exit 1; }
done
cat > "$TMP/check.py" <<PYEOF
import numpy as np, tutti
path = tutti.library_path()
assert path.startswith("$TMP/site/tutti/"), path
comm = tutti.Comm.from_env()
rank = comm.rank
x = np.full(3, rank + 1, dtype=np.int32)
comm.all_reduce(x)
assert x.tolist() == [3, 3, 3], x
comm.destroy()
print("rank %d: installed package works, library %s" % (rank, path))
PYEOF
cd "$TMP"
env -u TUTTI_LIBRARY PYTHONPATH="$TMP/site" PYTHONDONTWRITEBYTECODE=1 "$TUTTI_RUN" -n 2 "$PY" "$TMP/check.py"
