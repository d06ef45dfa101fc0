#!/bin/sh
# NCCL 2.30's parameter API against tutti-info (tests/param.cmake): with a few variables set (one
# of them to an invalid integer), the program built against tests/nccl-2.30/nccl.h must list
# every parameter tutti-info lists, in the same order, with the same values, and
# ncclParamDumpAll must print the same lines.
# Usage: test_param_api.sh PARAM_API TUTTI_INFO
set -eu
prog=$1 info=$2
export NCCL_BUFFSIZE=1048576 NCCL_ALGO=allreduce:ring TUTTI_TRACE_EVENTS=1000 TUTTI_SPIN=lots
# The job's secret is said to be set, never shown (logs and bug reports carry these listings).
secret=key:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
export TUTTI_SECRET=$secret
want=$("$info" | sed -n 's/^  \([A-Z][A-Z0-9_]*\) *= \(.*\) (default .*/\1=\2/p' | sed 's/ *$//')
got=$("$prog")
dump=$("$prog" dump)
[ -n "$want" ] || { echo "test_param_api: tutti-info listed no parameters"; exit 1; }
if [ "$got" != "$want" ]; then
    echo "test_param_api: the parameter API and tutti-info disagree (- tutti-info, + API):"
    printf '%s\n' "$want" >want.txt
    printf '%s\n' "$got" >got.txt
    diff -u want.txt got.txt || true
    exit 1
fi
[ "$dump" = "$want" ] || { echo "test_param_api: ncclParamDumpAll differs: $dump"; exit 1; }
if printf '%s\n%s\n' "$got" "$("$info")" | grep -q 0123456789abcdef; then
    echo "test_param_api: the secret was shown"
    exit 1
fi
printf '%s\n' "$got" | grep -qx 'TUTTI_SECRET=(set, not shown)' ||
    { echo "test_param_api: TUTTI_SECRET not listed as set"; exit 1; }
echo "test_param_api: ok, $(printf '%s\n' "$got" | wc -l) parameters agree"
printf '%s\n' "$got" | grep -E '^(NCCL_BUFFSIZE|NCCL_ALGO|TUTTI_SPIN)='
