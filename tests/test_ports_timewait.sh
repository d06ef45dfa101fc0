#!/bin/sh
# Closed connections in TIME_WAIT must not run a job out of listening ports. Every communicator
# leaves some 10 behind for a minute (net.ipv4.tcp_fin_timeout does not shorten it), and the
# kernel's choice of a port for bind(port 0) skips every port one of them holds. In a network
# namespace of its own whose ephemeral range has 400 usable ports (450, 50 of them reserved),
# fault_fdlimit makes 61 communicators of 4 ranks in under a second: Tutti then falls back to
# binding ports of that range by number (SO_REUSEADDR on its sockets), never a reserved one.
# Without the fallback, init fails near the 50th with "cannot listen on 127.0.0.1:0: Address
# already in use".
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
    echo "40000 40449" > /proc/sys/net/ipv4/ip_local_port_range || exit 77
    echo "40000-40049" > /proc/sys/net/ipv4/ip_local_reserved_ports || exit 77
    echo "ephemeral ports: $(cat /proc/sys/net/ipv4/ip_local_port_range)," \
         "reserved: $(cat /proc/sys/net/ipv4/ip_local_reserved_ports)"
    NCCL_SOCKET_IFNAME==lo "$1" raise
    rc=$?
    waits=$(ss -tan state time-wait | tail -n +2 | wc -l)
    echo "connections left in TIME_WAIT: $waits"
    # The kernel never picks a reserved port; only a walk that ignored the list would.
    on_reserved=$(ss -tanH state time-wait | awk "{ split(\$3, a, \":\"); \
        if (a[2] >= 40000 && a[2] <= 40049) n++ } END { print n + 0 }")
    if [ "$on_reserved" != 0 ]; then
        echo "FAIL: $on_reserved closed connections used reserved ports 40000-40049"
        rc=1
    fi
    # Fewer entries than usable ports: the kernel never ran out, and the test proves nothing.
    if [ "$rc" = 0 ] && [ "$waits" -lt 400 ]; then
        echo "FAIL: only $waits connections in TIME_WAIT: the ephemeral range never filled"
        rc=1
    fi
    exit $rc
' sh "$bin"
