#!/bin/sh
# The measured cost of a cross-memory copy (docs/tuning.md, "Direct and the cost of cross-memory
# copies") must be one value on every rank, so that every rank prices Direct alike and chooses
# the same algorithm. Each rank here is given a different TUTTI_CMA_COST (rank 0 100 %, rank 1
# 800 %): both must log the mean, 450 %, and run a 16 MiB AllReduce (64 MiB of buffers) on one
# algorithm, with a correct result: on the ring where the host's last-level cache is at most
# 32 MiB (as on the development VM), since the buffers then lie mostly beyond it; with 100 % on
# both, on Direct; measured (no variable), both ranks must log the same nonzero percentage.
# Usage: test_cma_cost.sh BUILD_DIR
set -eu
build=$1
run() { # TUTTI_CMA_COST of rank 0, of rank 1 (empty: measured) -> the log on stdout
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING COST0=$1 COST1=$2 \
        "$build/tutti-run" -n 2 sh -c '
            c=$COST0; [ "$RANK" = 0 ] || c=$COST1
            if [ -n "$c" ]; then export TUTTI_CMA_COST=$c; fi
            exec "$0" -b 16M -e 16M -n 1 -w 0 -c 1' "$build/tutti-perf" 2>&1
}
fail() { echo "test_cma_cost: $*"; exit 1; }
# "[r] ... costs N% of a memcpy" -> N for rank r
cost_of() { printf '%s\n' "$1" | sed -n "s/^\[$2\] .*a cross-memory copy costs \([0-9]*\)% .*/\1/p"; }
# the algorithms rank r ran the 16 MiB AllReduces with (count 4194304 float32), one per line
algos_of() {
    printf '%s\n' "$1" | sed -n "s/^\[$2\] .*AllReduce #[0-9]*: count 4194304 float32 .*: algo \([A-Za-z]*\) .*/\1/p" |
        sort -u
}
check() { # log, want cost (or "same"), want algorithm (or "any")
    log=$1
    if ! printf '%s\n' "$log" | grep -q '^\[0\] .*one host: .*Direct on'; then
        echo "test_cma_cost: Direct is off here (no cross-memory attach or shared memory): skipped"
        exit 77
    fi
    printf '%s\n' "$log" | grep -q 'Out of bounds values : 0 OK' || fail "wrong result:
$(printf '%s\n' "$log" | tail -20)"
    c0=$(cost_of "$log" 0) c1=$(cost_of "$log" 1)
    [ -n "$c0" ] && [ "$c0" != 0 ] || fail "rank 0 logged no cost of a cross-memory copy"
    [ "$c0" = "$c1" ] || fail "the ranks disagree on the cost: $c0% and $c1%"
    [ "$2" = same ] || [ "$c0" = "$2" ] || fail "cost $c0%, want $2%"
    a0=$(algos_of "$log" 0) a1=$(algos_of "$log" 1)
    [ -n "$a0" ] && [ "$a0" = "$a1" ] || fail "the ranks chose differently: '$a0' and '$a1'"
    want=$3
    llc=$(printf '%s\n' "$log" | sed -n 's/^\[0\] .*last-level cache \([0-9]*\) KiB.*/\1/p')
    if [ "$want" = Ring ] && [ "${llc:-0}" -gt 32768 ]; then want=any; fi
    [ "$want" = any ] || [ "$a0" = "$want" ] || fail "cost $c0%: 16 MiB ran on $a0, want $want"
    echo "test_cma_cost: cost $c0% on both ranks, 16 MiB on $a0 on both"
}
check "$(run 100 800)" 450 Ring
check "$(run 100 100)" 100 Direct
check "$(run '' '')" same any
