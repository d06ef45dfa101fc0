#!/bin/sh
# run.sh: a job over the UCX transport on "hosts" made with NCCL_HOSTID (tests/ucx.cmake).
#
#   run.sh BUILD_DIR NRANKS RANKS_PER_HOST PROGRAM [ARGS...]
#
# Runs PROGRAM as NRANKS ranks under tutti-run with NCCL_NET=UCX; ranks r and s share a host
# when r / RANKS_PER_HOST == s / RANKS_PER_HOST (shared memory between them), every other pair
# must go through UCX (UCX_TLS, set by the caller, picks UCX's own transport). Passes when
# PROGRAM passes on every rank and the log shows the ring's links between hosts made by UCX and
# none by Tutti's TCP. Exit 77 (skipped) when this build has no UCX transport.
set -u
build=$1 nranks=$2 per_host=$3
shift 3
if ! "$build/tutti-info" | grep -q '^build:.*transports.* ucx'; then
    echo "skipped: this build has no UCX transport (install libucx-dev and rebuild)"
    exit 77
fi
log=$(mktemp "${TMPDIR:-/tmp}/tutti-ucx-run.XXXXXX") || exit 1
trap 'rm -f "$log"' EXIT
NCCL_NET=UCX NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT \
    "$build/tutti-run" -n "$nranks" --timeout "${UCX_RUN_TIMEOUT:-200}" \
    sh -c 'NCCL_HOSTID=ucxhost$((RANK / '"$per_host"')) exec "$0" "$@"' "$@" >"$log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
    grep -v 'NCCL INFO' "$log" | tail -60
    echo "run.sh: the job failed (exit $rc)"
    exit 1
fi
grep -v 'NCCL INFO' "$log" | grep -v 'UCX  WARN' | tail -8
ucx_links=$(grep -c 'ring: .* via ucx' "$log")
tcp_links=$(grep -c 'ring: .* via tcp' "$log")
echo "run.sh: ring links through UCX: $ucx_links lines, through Tutti's TCP: $tcp_links"
if [ "$ucx_links" -eq 0 ] || [ "$tcp_links" -ne 0 ]; then
    echo "run.sh: the ring's links between hosts must all be UCX's"
    exit 1
fi
exit 0
