#!/bin/bash
# job.sh: one Tutti job across every host of a test bed (run it under `bed.sh run`), launched as
# on a cluster: one `tutti-run --nnodes K --node-rank I --rdzv HOST0:PORT` per host, started
# together; host 0 holds global rank 0 and the bootstrap root. Exits 0 when every host's
# tutti-run did; otherwise with the first failing host's status.
#
#   job.sh [--log FILE] [--port P] [--rdzv-net 0|1] [--hosts H] NPROC TUTTI_RUN PROGRAM [ARGS...]
#
# --hosts runs the job on the bed's first H hosts only (default: all of them), so that one bed
# serves jobs of several sizes in turn.
# --log keeps every host's output (tagged "[host I]") in FILE as well as printing it; --port is
# the root's port on host 0 (default 29500: the bed's namespaces are private, so no other job
# can hold it); --rdzv-net 1 names host 0's address on the bed's second network. Every variable
# of the environment reaches the ranks (NCCL_*, TUTTI_* ...); TUTTI_SECRET, when unset, is made
# up here, one for the whole job.
set -u
log=""
port=29500
net=0
hosts=""
while [ $# -gt 0 ]; do
    case $1 in
    --log) log=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --rdzv-net) net=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    *) break ;;
    esac
done
[ $# -ge 3 ] || { echo "usage: job.sh [--log FILE] [--port P] [--rdzv-net N] [--hosts H] NPROC TUTTI_RUN PROGRAM [ARGS...]" >&2; exit 2; }
[ -n "${TT_BED:-}" ] || { echo "job.sh: run me under bed.sh run" >&2; exit 2; }
nproc=$1
tutti_run=$2
shift 2
[ -n "$hosts" ] || hosts=$TT_BED_HOSTS
[ "$hosts" -ge 1 ] && [ "$hosts" -le "$TT_BED_HOSTS" ] ||
    { echo "job.sh: --hosts $hosts: the bed has $TT_BED_HOSTS hosts" >&2; exit 2; }
if [ "$net" = 1 ]; then rdzv_var="TT_BED_ADDR0_1"; else rdzv_var="TT_BED_ADDR0"; fi
rdzv="${!rdzv_var}:$port"
# One secret for the whole job, as docs/launch.md asks across hosts: it keys the bootstrap's
# authentication (tutti-run makes its own only for a job on one host). A random key:<64 hex>
# is used as is; a passphrase would cost every rank an Argon2id run (docs/security.md).
if [ -z "${TUTTI_SECRET:-}" ]; then
    TUTTI_SECRET=key:$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
    export TUTTI_SECRET
fi
# Every tutti-run stops its ranks a little before the test's own deadline.
timeout=${TT_JOB_TIMEOUT:-100}

out=$(mktemp -d "${TMPDIR:-/tmp}/ttjob.XXXXXX")
pids=()
for ((i = 0; i < hosts; i++)); do
    "$TT_BED_SH" exec "$i" "$tutti_run" -n "$nproc" --nnodes "$hosts" --node-rank "$i" \
        --rdzv "$rdzv" --timeout "$timeout" "$@" >"$out/$i" 2>&1 &
    pids+=($!)
done
status=0
for ((i = 0; i < hosts; i++)); do
    s=0
    wait "${pids[$i]}" || s=$?
    [ $status -eq 0 ] && [ $s -ne 0 ] && status=$s
    [ $s -ne 0 ] && echo "job.sh: host $i's tutti-run exited with status $s" >&2
done
for ((i = 0; i < hosts; i++)); do
    sed "s/^/[host $i] /" "$out/$i"
done | if [ -n "$log" ]; then tee "$log"; else cat; fi
rm -rf "$out"
exit $status
