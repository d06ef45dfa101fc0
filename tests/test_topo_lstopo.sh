#!/bin/sh
# tutti-info's topology line against lstopo's own counts (tests/topo.cmake): packages, NUMA
# nodes, cores and PUs of this machine, and of a synthetic two-package machine (the same
# description given to lstopo -i and to TUTTI_TOPO_SYNTHETIC).
# Usage: test_topo_lstopo.sh TUTTI_INFO
set -eu
info=$1
command -v lstopo-no-graphics >/dev/null 2>&1 ||
    { echo "skipped: no lstopo-no-graphics (Debian package hwloc)"; exit 77; }
"$info" --topology | grep -q '(hwloc' ||
    { echo "skipped: tutti-info was built without hwloc: $("$info" --topology)"; exit 77; }

# Usage: compare LABEL [lstopo input args...]; TUTTI_TOPO_SYNTHETIC set by the caller if any.
compare() {
    label=$1
    shift
    line=$("$info" --topology)
    echo "$label: tutti-info: $line"
    for pair in package:packages numa:NUMA core:cores pu:PUs; do
        kind=${pair%%:*} word=${pair#*:}
        want=$(lstopo-no-graphics "$@" --only "$kind" | wc -l)
        got=$(echo "$line" | sed -n "s/.* \([0-9][0-9]*\) $word.*/\1/p")
        echo "  $kind: lstopo $want, tutti-info $got"
        [ "$got" = "$want" ] || { echo "test_topo_lstopo: $label: $kind differs"; exit 1; }
    done
}
compare "this machine"
synthetic="pack:2 numa:2 core:3 pu:2"
TUTTI_TOPO_SYNTHETIC="$synthetic" compare "synthetic $synthetic" -i "$synthetic"
echo "test_topo_lstopo: ok"
