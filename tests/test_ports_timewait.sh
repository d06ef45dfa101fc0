#!/bin/sh
# Closed connections in TIME_WAIT must not run a job out of listening ports. Every communicator
# leaves a few behind for a minute (net.ipv4.tcp_fin_timeout does not shorten it), and the
# kernel's choice of a port for bind(port 0) skips every port one of them holds. In a network
# namespace of its own whose ephemeral range is 400 ports, fault_fdlimit makes 61 communicators
# of 4 ranks in under a second: Tutti then falls back to binding ports of that range by number
# (SO_REUSEADDR on every socket it makes). Without the fallback, init fails near the 50th with
# "cannot listen on 127.0.0.1:0: Address already in use".
#
#   test_ports_timewait.sh PATH/TO/fault_fdlimit
#
# Needs root (a network namespace, sysctl): exit 77 (skipped) without.
set -u
bin=$1
if [ "$(id -u)" != 0 ] || ! unshare -n true 2>/dev/null; then
    echo "SKIP: needs root and unshare -n"
    exit 77
fi
exec unshare -n sh -c '
    ip link set lo up || exit 77
    echo "40000 40399" > /proc/sys/net/ipv4/ip_local_port_range || exit 77
    echo "ephemeral ports: $(cat /proc/sys/net/ipv4/ip_local_port_range)"
    NCCL_SOCKET_IFNAME==lo TUTTI_TIMEOUT_MS=20000 "$1"
    rc=$?
    echo "connections left in TIME_WAIT: $(ss -tan state time-wait | tail -n +2 | wc -l)"
    exit $rc
' sh "$bin" raise
