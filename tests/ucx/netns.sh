#!/bin/sh
# netns.sh: the UCX transport between two network namespaces joined by a veth pair, as two hosts
# would be (tests/ucx.cmake).
#
#   netns.sh BUILD_DIR UCX_TLS NPROC PROGRAM [ARGS...]
#
# Makes namespaces ucx<pid>a (10.203.0.1) and ucx<pid>b (10.203.0.2), runs one tutti-run per
# namespace (--nnodes 2, NPROC ranks each, --rdzv on the first) with NCCL_NET=UCX and the given
# UCX_TLS, and passes when every rank passes and the log shows the ring's links between the
# hosts made by UCX (within a host they are shared memory). The
# namespaces share a hostname and /dev/shm, so NCCL_HOSTID names the two hosts. Everything is
# torn down on exit. Needs root and network namespaces: exit 77 (skipped) without them, or in a
# build without UCX.
set -u
build=$1 tls=$2 nproc=$3
shift 3
"$build/tutti-info" | grep -q '^build:.*transports.* ucx' ||
    { echo "skipped: this build has no UCX transport"; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "skipped: network namespaces need root"; exit 77; }
command -v ip >/dev/null 2>&1 || { echo "skipped: no ip command (iproute2)"; exit 77; }
a=ucx$$a b=ucx$$b
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tutti-ucx-netns.XXXXXX") || exit 1
cleanup() {
    ip netns del "$a" 2>/dev/null
    ip netns del "$b" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
ip netns add "$a" 2>/dev/null || { echo "skipped: cannot create a network namespace"; exit 77; }
ip netns add "$b" || exit 1
ip link add "${a}v" type veth peer name "${b}v" || exit 1
ip link set "${a}v" netns "$a" && ip link set "${b}v" netns "$b" || exit 1
ip -n "$a" addr add 10.203.0.1/24 dev "${a}v" && ip -n "$b" addr add 10.203.0.2/24 dev "${b}v" ||
    exit 1
for ns in "$a" "$b"; do
    ip -n "$ns" link set lo up && ip -n "$ns" link set "${ns}v" up || exit 1
done
port=$((20000 + $$ % 30000))
secret=key:$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
run_host() { # run_host NS NODE_RANK PROGRAM [ARGS...]
    ns=$1 node=$2
    shift 2
    ip netns exec "$ns" env NCCL_NET=UCX UCX_TLS="$tls" TUTTI_SECRET="$secret" \
        NCCL_HOSTID="ucxhost$node" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT \
        "$build/tutti-run" -n "$nproc" --nnodes 2 --node-rank "$node" --rdzv "10.203.0.1:$port" \
        --timeout "${UCX_RUN_TIMEOUT:-200}" "$@" >"$tmp/host$node.log" 2>&1
}
run_host "$a" 0 "$@" &
pid0=$!
run_host "$b" 1 "$@"
rc1=$?
wait $pid0
rc0=$?
for h in 0 1; do
    grep -v 'NCCL INFO' "$tmp/host$h.log" | grep -v 'UCX  WARN' | tail -4 | sed "s/^/host$h: /"
done
if [ $rc0 -ne 0 ] || [ $rc1 -ne 0 ]; then
    grep -v 'NCCL INFO' "$tmp/host0.log" "$tmp/host1.log" | tail -40
    echo "netns.sh: the job failed (exit $rc0 and $rc1)"
    exit 1
fi
links=$(cat "$tmp/host0.log" "$tmp/host1.log" | grep -c 'ring: .* via ucx')
tcp=$(cat "$tmp/host0.log" "$tmp/host1.log" | grep -c 'ring: .* via tcp')
echo "netns.sh: ring links through UCX: $links lines, through Tutti's TCP: $tcp"
[ "$links" -gt 0 ] && [ "$tcp" -eq 0 ]
