#!/bin/bash
# bed.sh: a test bed of K "hosts" on one machine, for the multi-host tests (tests/hosts/).
#
# Each host is a network namespace with its own interface(s), its own address in a private range
# and its own hostname (each command on it runs in a fresh UTS namespace carrying that name, so
# Tutti's host identity, hostname plus boot id, tells the hosts apart). The hosts' links meet in
# a switch namespace of their own: a Linux bridge per network, or, when the links are impaired
# and the kernel has no netem, the userspace switch tt_wire (tests/hosts/wire.c). Names carry
# this script's pid, so runs in parallel never meet; everything is torn down when the command
# exits, fails or is interrupted. Needs root: without it (or without network namespaces) it
# exits 77, CTest's "skipped".
#
#   bed.sh run [OPTIONS] -- COMMAND [ARGS...]
#       Builds the hosts, runs COMMAND here (in the machine's own namespaces) with the bed
#       described in its environment, tears the bed down, and exits with COMMAND's status.
#   bed.sh exec HOST COMMAND [ARGS...]        (from inside COMMAND)
#       Runs COMMAND on HOST: its index 0..K-1, its hostname, or one of its addresses.
#   bed.sh rsh HOST WORDS...                  (from inside COMMAND)
#       An ssh stand-in (Open MPI's plm_rsh_agent): WORDS are joined into one shell command line
#       run by sh -c on HOST, as ssh does. Options before HOST (ssh's -x, -l user ...) are ignored.
#
# Options of run:
#   -k, --hosts K        hosts (default 2, at most 200)
#   --nets N             networks, one interface each per host (1 or 2; default 1): host i has
#                        eth0 = 10.201.0.(i+1)/24 and with 2 networks eth1 = 10.202.0.(i+1)/24
#   --delay D            one-way delay on every host's link (tc syntax: 20ms)
#   --loss P             packet loss on every host's link (percent: 1%)
#   --rate R             bandwidth of every host's link (tc syntax: 1gbit, 100mbit)
#   --impair tc|wire     how to impair the links: tc netem on each host's egress (the default when
#                        the kernel has netem) or tt_wire, the userspace switch (the default
#                        otherwise; needs TT_WIRE=/path/to/tt_wire)
#
# The environment of COMMAND: TT_BED (the bed's state directory), TT_BED_SH (this script),
# TT_BED_HOSTS (K), TT_BED_NETS, TT_BED_ADDR<i> and TT_BED_ADDR<i>_1 (host i's address on the
# first and second network), TT_BED_NAME<i> (its hostname), TT_BED_IMPAIR (none, tc or wire).
# Each host's delay applies once per packet (host to switch), so a round trip between two hosts
# takes 2 x DELAY; the loss likewise applies once per packet.
set -u

die() {
    echo "bed.sh: $*" >&2
    exit 1
}

skip() {
    echo "skipped: $*"
    exit 77
}

usage() {
    sed -n '13,/^set -u$/{/^#/p}' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# ---- on a host (exec, rsh) ------------------------------------------------------------------

# Sets ns and name for HOST (an index, a hostname or an address) from $TT_BED/hosts, whose lines
# read "index hostname namespace addr0 [addr1]".
find_host() {
    local want=$1 idx hn nsn a0 a1
    [ -n "${TT_BED:-}" ] && [ -r "$TT_BED/hosts" ] || die "no bed here (TT_BED is not set)"
    while read -r idx hn nsn a0 a1; do
        if [ "$want" = "$idx" ] || [ "$want" = "$hn" ] || [ "$want" = "$a0" ] ||
           [ "$want" = "${a1:-}" ]; then
            ns=$nsn
            name=$hn
            return 0
        fi
    done <"$TT_BED/hosts"
    die "no host '$want' in the bed"
}

# A fresh UTS namespace that carries the host's name, inside the host's network namespace.
# `ip netns exec` also gives the command its own mount namespace with the host's /sys.
on_host() {
    exec ip netns exec "$ns" unshare --uts /bin/sh -c 'hostname "$0" && exec "$@"' "$name" "$@"
}

cmd_exec() {
    [ $# -ge 2 ] || die "usage: bed.sh exec HOST COMMAND [ARGS...]"
    find_host "$1"
    shift
    on_host "$@"
}

cmd_rsh() {
    # ssh's own options come before the host; those that take a value are skipped with it.
    while [ $# -gt 0 ]; do
        case $1 in
        -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;
        -*) shift ;;
        *) break ;;
        esac
    done
    [ $# -ge 2 ] || die "usage: bed.sh rsh HOST COMMAND..."
    find_host "$1"
    shift
    on_host /bin/sh -c "$*"
}

# ---- building and tearing down (run) ---------------------------------------------------------

hosts=2
nets=1
delay=""
loss=""
rate=""
impair=""
tag="ttbed$$"
state=""
wire_pid=""
cmd_pid=""

ns_of() { echo "${tag}h$1"; }
sw_ns="${tag}sw"

# One `ip -batch` running "netns VERB NAME" for every namespace of the bed (errors ignored: a
# namespace may not have been made yet).
all_netns() {
    local i
    {
        for ((i = 0; i < hosts; i++)); do echo "netns $1 $(ns_of "$i")"; done
        echo "netns $1 $sw_ns"
    } | ip -force -batch - 2>/dev/null
}

teardown() {
    trap - EXIT INT TERM HUP
    local pid
    [ -n "$cmd_pid" ] && kill -TERM "$cmd_pid" 2>/dev/null
    report_impairment
    # Whatever still runs on a host (a rank left behind by a failed test) dies with it.
    for pid in $wire_pid $(all_netns pids); do kill -KILL "$pid" 2>/dev/null; done
    # Deleting a namespace deletes the interfaces in it, and a veth pair goes with either end.
    all_netns del
    [ -n "$state" ] && rm -rf "$state"
}

# Beds whose script was killed outright (SIGKILL, as a test runner's timeout may do) leave their
# namespaces behind: those whose owner pid is gone are swept away before a new bed is built.
sweep_stale() {
    local nsn owner pid
    for nsn in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^ttbed[0-9]+(h[0-9]+|sw)$'); do
        owner=${nsn#ttbed}
        owner=${owner%%[hs]*}
        [ "$owner" = "$$" ] && continue
        kill -0 "$owner" 2>/dev/null && continue
        for pid in $(ip netns pids "$nsn" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
        ip netns del "$nsn" 2>/dev/null
    done
}

# What the impaired links did, one line: "bed: impairment dropped D of N packets". tt_wire
# prints its counts when stopped; netem's are in each host's qdisc statistics.
report_impairment() {
    local i n line sent=0 dropped=0 pid
    case $impair in
    tc)
        for ((i = 0; i < hosts; i++)); do
            for ((n = 0; n < nets; n++)); do
                line=$(ip netns exec "$(ns_of "$i")" tc -s qdisc show dev "eth$n" 2>/dev/null |
                       grep -o 'Sent [0-9]* bytes [0-9]* pkt (dropped [0-9]*' | head -1)
                [ -n "$line" ] || continue
                # shellcheck disable=SC2086 # the statistics are words to split
                set -- $line
                sent=$((sent + $4))
                dropped=$((dropped + ${7%,}))
            done
        done
        echo "bed: impairment dropped $dropped of $((sent + dropped)) packets (tc netem)"
        ;;
    wire)
        for pid in $wire_pid; do kill -TERM "$pid" 2>/dev/null; done
        for pid in $wire_pid; do wait "$pid" 2>/dev/null; done
        for ((n = 0; n < nets; n++)); do
            # shellcheck disable=SC2046 # the counts are words to split
            set -- $(cat "$state/wire$n.out" 2>/dev/null)
            # "tt_wire: F frames in, L dropped (loss), Q dropped (queue full)"
            [ $# -ge 8 ] || continue
            sent=$((sent + $2))
            dropped=$((dropped + $5 + $8))
        done
        echo "bed: impairment dropped $dropped of $sent packets (tt_wire)"
        ;;
    esac
    wire_pid=""
}

# Whether this kernel has netem: tried on a throwaway veth pair in the switch namespace.
have_netem() {
    ip -n "$sw_ns" link add probe0 type veth peer name probe1 2>/dev/null || return 1
    local ok=1
    ip netns exec "$sw_ns" tc qdisc add dev probe0 root netem delay 1ms 2>/dev/null && ok=0
    ip -n "$sw_ns" link del probe0 2>/dev/null
    return $ok
}

netem_args() {
    local a=""
    [ -n "$delay" ] && a="$a delay $delay"
    [ -n "$loss" ] && a="$a loss $loss"
    [ -n "$rate" ] && a="$a rate $rate"
    echo "$a"
}

# Host i's address on network n (0 or 1).
addr_of() { echo "10.$((201 + $2)).0.$(($1 + 1))"; }

# Builds the namespaces and links with one `ip -batch` per namespace: every ip command costs a
# process start, which on a loaded machine takes a good fraction of a second. The interfaces get
# no IPv6 link-local address (addrgenmode none), so they send no router solicitations or
# duplicate-address probes: their counters show the job's traffic alone.
build() {
    local i n nsn batch="$state/batch"
    {
        echo "netns add $sw_ns"
        for ((i = 0; i < hosts; i++)); do echo "netns add $(ns_of "$i")"; done
    } >"$batch"
    ip -batch "$batch" || skip "cannot create network namespaces (ip netns add failed)"
    if [ -n "$delay$loss$rate" ] && [ -z "$impair" ]; then
        if have_netem; then impair=tc; else impair=wire; fi
    fi
    [ -z "$impair" ] && impair=none
    [ "$impair" = wire ] && ! [ -x "${TT_WIRE:-}" ] &&
        die "the kernel has no netem and TT_WIRE names no tt_wire binary"
    # The switch: veth pairs whose far ends land in the hosts, and a bridge per network (none
    # under tt_wire, which forwards between the ports itself).
    {
        echo "link set lo up"
        for ((n = 0; n < nets; n++)); do
            [ "$impair" = wire ] && continue
            echo "link add br$n type bridge"
            echo "link set br$n addrgenmode none"
            echo "link set br$n up"
        done
        for ((i = 0; i < hosts; i++)); do
            for ((n = 0; n < nets; n++)); do
                echo "link add h${i}n$n type veth peer name eth$n netns $(ns_of "$i")"
                echo "link set h${i}n$n addrgenmode none"
                [ "$impair" != wire ] && echo "link set h${i}n$n master br$n"
                echo "link set h${i}n$n up"
            done
        done
    } >"$batch"
    ip -n "$sw_ns" -batch "$batch" || die "cannot build the switch"
    for ((i = 0; i < hosts; i++)); do
        nsn=$(ns_of "$i")
        {
            echo "link set lo up"
            for ((n = 0; n < nets; n++)); do
                echo "link set eth$n addrgenmode none"
                echo "addr add $(addr_of "$i" "$n")/24 dev eth$n"
                echo "link set eth$n up"
            done
        } >"$batch"
        ip -n "$nsn" -batch "$batch" || die "cannot configure host $i"
        if [ "$impair" = tc ]; then
            for ((n = 0; n < nets; n++)); do
                # shellcheck disable=SC2046
                ip netns exec "$nsn" tc qdisc add dev "eth$n" root netem $(netem_args) ||
                    die "tc netem$(netem_args) failed on host $i"
            done
        fi
        echo "$i ${tag}-h$i $nsn $(addr_of "$i" 0) $([ "$nets" -gt 1 ] && addr_of "$i" 1)" \
            >>"$state/hosts"
    done
    if [ "$impair" = wire ]; then
        local ports=""
        # A switch in the kernel forwards in softirq context; tt_wire must be scheduled for every
        # batch of frames, so on a loaded machine it runs at a higher priority (4 MB AllReduce
        # between 2 hosts at load 30 on 2 cores: about 0.5 s at nice 0, 0.2 s at nice -10, 0.04 s
        # through the kernel's bridge). Without CAP_SYS_NICE, nice warns and runs it as it is.
        for ((n = 0; n < nets; n++)); do
            ports=""
            for ((i = 0; i < hosts; i++)); do ports="$ports${ports:+,}h${i}n$n"; done
            ip netns exec "$sw_ns" nice -n -10 "$TT_WIRE" --ports "$ports" --delay "${delay:-0}" \
                --loss "${loss:-0}" --rate "${rate:-0}" --ready "$state/wire$n.ready" \
                >"$state/wire$n.out" &
            wire_pid="$wire_pid $!"
        done
        wire_pid=${wire_pid# }
        for ((n = 0; n < nets; n++)); do
            for ((i = 0; i < 100; i++)); do
                [ -e "$state/wire$n.ready" ] && break
                sleep 0.05
            done
            [ -e "$state/wire$n.ready" ] || die "tt_wire did not start"
        done
    fi
    # Host 0 reaches every other before the command starts (when ping is there to tell).
    command -v ping >/dev/null 2>&1 || return 0
    for ((i = 1; i < hosts; i++)); do
        ip netns exec "$(ns_of 0)" ping -c 1 -W 5 "$(addr_of "$i" 0)" >/dev/null 2>&1 ||
            ip netns exec "$(ns_of 0)" ping -c 1 -W 5 "$(addr_of "$i" 0)" >/dev/null 2>&1 ||
            die "host 0 cannot reach host $i"
    done
}

cmd_run() {
    while [ $# -gt 0 ]; do
        case $1 in
        -k | --hosts) hosts=$2; shift 2 ;;
        --nets) nets=$2; shift 2 ;;
        --delay) delay=$2; shift 2 ;;
        --loss) loss=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        --impair) impair=$2; shift 2 ;;
        --) shift; break ;;
        *) usage ;;
        esac
    done
    [ $# -ge 1 ] || usage
    case $hosts in '' | *[!0-9]*) die "--hosts wants a number" ;; esac
    [ "$hosts" -ge 1 ] && [ "$hosts" -le 200 ] || die "--hosts must be 1..200"
    [ "$nets" = 1 ] || [ "$nets" = 2 ] || die "--nets must be 1 or 2"
    case $impair in '' | tc | wire) ;; *) die "--impair must be tc or wire" ;; esac
    [ "$(id -u)" -eq 0 ] || skip "the multi-host test bed needs root (network namespaces)"
    for tool in ip unshare; do
        command -v "$tool" >/dev/null 2>&1 || skip "the test bed needs '$tool'"
    done
    if [ -n "$delay$loss$rate" ] && [ "$impair" != wire ]; then
        command -v tc >/dev/null 2>&1 || skip "impaired links need tc (iproute2)"
    fi
    state=$(mktemp -d "${TMPDIR:-/tmp}/ttbed.XXXXXX") || die "mktemp failed"
    trap teardown EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
    sweep_stale
    build
    export TT_BED="$state" TT_BED_SH
    TT_BED_SH=$(readlink -f "$0")
    export TT_BED_HOSTS=$hosts TT_BED_NETS=$nets TT_BED_IMPAIR=$impair
    for ((i = 0; i < hosts; i++)); do
        export "TT_BED_ADDR$i=$(addr_of "$i" 0)" "TT_BED_NAME$i=${tag}-h$i"
        [ "$nets" -gt 1 ] && export "TT_BED_ADDR${i}_1=$(addr_of "$i" 1)"
    done
    echo "bed: $hosts hosts, $nets network(s), impairment: $impair$([ "$impair" != none ] &&
        echo " ($(netem_args | sed 's/^ //'))")"
    # The command runs in the background so that a signal to this script reaches the traps at
    # once; the command's own process group is left to the host kill above.
    "$@" &
    cmd_pid=$!
    local status=0
    wait "$cmd_pid" || status=$?
    cmd_pid=""
    exit "$status"
}

case "${1:-}" in
run) shift; cmd_run "$@" ;;
exec) shift; cmd_exec "$@" ;;
rsh) shift; cmd_rsh "$@" ;;
*) usage ;;
esac
