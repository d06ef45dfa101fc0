#!/bin/sh
# bench/ucx.sh: AllReduce float32 over the UCX transport beside Tutti's own TCP, on one machine,
# two ranks that NCCL_HOSTID puts on two "hosts" (so they talk over the network transport, on
# loopback), rounds interleaved so that a noisy machine hurts every column alike.
#
#   bench/ucx.sh BUILD_DIR [ROUNDS]        (default 3 rounds)
#
# Columns: tcp (NCCL_NET=Socket), ucx-tcp (NCCL_NET=UCX UCX_TLS=tcp), ucx-sm (UCX_TLS=sm: UCX's
# shared memory between the two "hosts"). Each cell is tutti-perf's out-of-place time in us
# (-n iterations after -w warm-ups) at 8 B, 1 MiB and 16 MiB; the summary gives each column's
# best and median round and the ratio of the medians to tcp.
set -u
build=${1:?usage: bench/ucx.sh BUILD_DIR [ROUNDS]}
rounds=${2:-3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tutti-ucx-bench.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
one() { # one COLUMN BYTES ITERS WARMUP -> prints the time in us
    case $1 in
    tcp) set -- "$@" NCCL_NET=Socket ;;
    ucx-tcp) set -- "$@" NCCL_NET=UCX UCX_TLS=tcp ;;
    ucx-sm) set -- "$@" NCCL_NET=UCX UCX_TLS=sm ;;
    esac
    bytes=$2 iters=$3 warm=$4
    shift 4
    env "$@" "$build/tutti-run" -n 2 --timeout 300 sh -c \
        'NCCL_HOSTID=benchhost$RANK exec "$0" "$@"' "$build/tutti-perf" -t all_reduce \
        -b "$bytes" -e "$bytes" -n "$iters" -w "$warm" -d float 2>/dev/null |
        awk -v b="$bytes" '$1 == "[0]" && $2 == b { print $7; found = 1 } END { if (!found) print "fail" }'
}
for r in $(seq 1 "$rounds"); do
    for size in "8 500 50" "1048576 50 5" "16777216 10 2"; do
        set -- $size
        for col in tcp ucx-tcp ucx-sm; do
            echo "$r $1 $col $(one "$col" "$1" "$2" "$3")" >>"$tmp/all"
        done
    done
done
echo "# AllReduce float32, 2 ranks on 2 NCCL_HOSTID hosts, out-of-place time (us), $rounds rounds"
echo "| bytes | tcp best / median | ucx-tcp best / median | ucx-sm best / median | ucx-tcp / tcp | ucx-sm / tcp |"
echo "|---|---|---|---|---|---|"
for bytes in 8 1048576 16777216; do
    line="| $bytes"
    for col in tcp ucx-tcp ucx-sm; do
        v=$(awk -v b="$bytes" -v c="$col" '$2 == b && $3 == c { print $4 }' "$tmp/all" | sort -g)
        best=$(echo "$v" | head -1)
        med=$(echo "$v" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
        eval "med_$(echo $col | tr - _)=$med"
        line="$line | $best / $med"
    done
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2fx", b / a; else print "-" }'; }
    echo "$line | $(ratio "$med_ucx_tcp" "$med_tcp") | $(ratio "$med_ucx_sm" "$med_tcp") |"
done
echo "(ratio = tcp median time / column median time: above 1 means faster than Tutti's TCP)"
