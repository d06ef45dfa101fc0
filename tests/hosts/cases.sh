#!/bin/bash
# cases.sh: the multi-host tests (label hosts), each a job on the test bed of bed.sh, as CTest
# runs them (tests/hosts.cmake):
#
#   cases.sh BUILD_DIR matrix K N [coll_matrix args...]   the correctness matrix on K hosts x N
#            ranks (tutti-run on every host); every ring link must be shm within a host and tcp
#            across hosts
#   cases.sh BUILD_DIR matrices NET KxN[,KxN...] [coll_matrix args...]   the same for several
#            sizes in turn on one bed (as many hosts as the largest K), over NET between hosts:
#            tcp (Tutti's own) or ucx (TUTTI_NET=ucx through UCX's TCP, UCX_TLS=tcp unless set)
#   cases.sh BUILD_DIR hostid        NCCL_HOSTID overrides the bed's host identity both ways; one
#            hostname over two /dev/shm mounts is two hosts
#   cases.sh BUILD_DIR examples      examples/ under tutti-run --nnodes on 2 hosts x 2 ranks
#   cases.sh BUILD_DIR mpirun        examples/ under Open MPI's mpirun, bed.sh rsh as its ssh
#   cases.sh BUILD_DIR slurm         ranks started with srun's variables on 2 hosts x 2 ranks
#   cases.sh BUILD_DIR ifname        two networks: NCCL_SOCKET_IFNAME picks the one carrying the job
#   cases.sh BUILD_DIR portrange     TUTTI_PORT_RANGE bounds every port the job listens on
#   cases.sh BUILD_DIR netem K N CALLS MIN_DROPS [coll_matrix args...]   the matrix on links
#            with TT_NETEM_DELAY (20ms) and TT_NETEM_LOSS (1%): at least CALLS collectives per
#            rank, all bit-exact, and at least MIN_DROPS packets lost on the way
#
# Exit 0: passed; 1: failed (with the reason); 77: skipped (no root, no Open MPI...).
set -u
here=$(cd "$(dirname "$0")" && pwd)
bed=$here/bed.sh
job=$here/job.sh
build=${1:?usage: cases.sh BUILD_DIR CASE [ARGS...]}
case_name=${2:?usage: cases.sh BUILD_DIR CASE [ARGS...]}
shift 2
run=$build/tutti-run
matrix=$build/coll_matrix
export TUTTI_TIMEOUT_MS=${TUTTI_TIMEOUT_MS:-60000}
export TT_WIRE=${TT_WIRE:-$build/tt_wire}

fail() {
    echo "FAIL: $*"
    exit 1
}

# The bed needs root and network namespaces; without them every case is skipped.
[ "$(id -u)" -eq 0 ] || { echo "skipped: the multi-host test bed needs root"; exit 77; }
for tool in ip unshare; do
    command -v $tool >/dev/null 2>&1 || { echo "skipped: the test bed needs '$tool'"; exit 77; }
done
ip netns add "ttprobe$$" 2>/dev/null || { echo "skipped: cannot create network namespaces"; exit 77; }
ip netns del "ttprobe$$"
unshare --uts true 2>/dev/null || { echo "skipped: cannot create UTS namespaces"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tthosts.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Every "A -> B via T" that the ranks logged at INIT (NCCL_DEBUG=INFO) must use shm when A and B
# share a host (rank / N, tutti-run's block placement) and $cross (tcp, or ucx) otherwise;
# `want_all` forces "shm" or "tcp" for every link instead.
cross=tcp
check_links() {
    local log=$1 nper=$2 want_all=${3:-} links=0 a b t want
    while read -r a b t; do
        if [ -n "$want_all" ]; then
            want=$want_all
        elif [ $((a / nper)) -eq $((b / nper)) ]; then
            want=shm
        else
            want=$cross
        fi
        [ "$t" = "$want" ] || fail "ring link $a -> $b went via $t, not $want"
        links=$((links + 1))
    done < <(grep -o 'ring: .*' "$log" | grep -o '[0-9]* -> [0-9]* via [a-z]*' |
             sed 's/ -> / /; s/ via / /')
    [ $links -gt 0 ] || fail "no ring links in the log (NCCL_DEBUG=INFO)"
    echo "links: $links ring ends checked ($([ -n "$want_all" ] && echo "all $want_all" ||
        echo "shm within a host, $cross across"))"
}

# Lines of the job's output without Tutti's log lines.
quiet() { grep -v 'NCCL INFO\|NCCL WARN' "$1"; }

case $case_name in
matrix)
    k=$1
    n=$2
    shift 2
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "$bed" run -k "$k" -- \
        "$job" --log "$tmp/log" "$n" "$run" "$matrix" "$@" >/dev/null 2>&1
    status=$?
    quiet "$tmp/log" | tail -$((k * n + 1))
    [ $status -eq 0 ] || fail "the matrix failed on $k hosts x $n ranks (status $status)"
    [ "$(grep -c ': ok: ' "$tmp/log")" -eq $((k * n)) ] || fail "not every rank reported ok"
    check_links "$tmp/log" "$n"
    ;;
matrices)
    net=$1
    topos=$2
    shift 2
    case $net in
    tcp) unset TUTTI_NET NCCL_NET ;;
    ucx)
        "$build/tutti-info" | grep -q '^build:.*transports.* ucx' ||
            { echo "skipped: this build has no UCX transport"; exit 77; }
        # UCX's TCP between the hosts: its shared memory would reach across the bed's namespaces,
        # which share /dev/shm, and so test no network at all.
        export TUTTI_NET=ucx UCX_TLS=${UCX_TLS:-tcp}
        unset NCCL_NET
        cross=ucx
        ;;
    *) fail "matrices: the network is tcp or ucx, not '$net'" ;;
    esac
    maxk=0
    for t in ${topos//,/ }; do
        k=${t%x*}
        [ "$k" -gt $maxk ] && maxk=$k
    done
    # One bed of the largest size; each job runs on its first K hosts, on a port of its own so
    # that no job meets the previous one's root.
    # shellcheck disable=SC2016
    jobs='
        job=$1 tmp=$2 run=$3 topos=$4
        shift 4
        port=29500
        for t in ${topos//,/ }; do
            port=$((port + 1))
            "$job" --log "$tmp/log.$t" --port $port --hosts "${t%x*}" "${t#*x}" "$run" "$@"                 >/dev/null 2>&1 || { echo "$t: the job failed (status $?)"; exit 1; }
            echo "$t: done"
        done'
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "$bed" run -k "$maxk" --         bash -c "$jobs" jobs "$job" "$tmp" "$run" "$topos" "$matrix" "$@" >"$tmp/bed" 2>&1
    status=$?
    for t in ${topos//,/ }; do
        k=${t%x*}
        n=${t#*x}
        echo "== $k hosts x $n ranks over $net"
        [ -e "$tmp/log.$t" ] || { cat "$tmp/bed"; fail "$t: no log (the bed failed)"; }
        quiet "$tmp/log.$t" | grep -v 'UCX  WARN' | tail -$((k * n + 1))
        [ "$(grep -c ': ok: ' "$tmp/log.$t")" -eq $((k * n)) ] ||
            { cat "$tmp/bed"; fail "$t over $net: not every rank reported ok"; }
        check_links "$tmp/log.$t" "$n"
    done
    [ $status -eq 0 ] || { cat "$tmp/bed"; fail "the jobs over $net failed (status $status)"; }
    echo "ok: the matrix at $topos over $net, every rank bit-exact"
    ;;
hostid)
    # One id for every rank: the four ranks of two namespaces are one host to Tutti and meet over
    # shared memory (/dev/shm and the pids are shared by the bed's hosts, as by containers that
    # share them). One id per rank: ranks of one namespace are strangers, and use TCP.
    NCCL_HOSTID=one-box NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "$bed" run -k 2 -- \
        "$job" --log "$tmp/one" 2 "$run" "$build/example_first" >/dev/null 2>&1 ||
        { cat "$tmp/one"; fail "NCCL_HOSTID=one-box: the job failed"; }
    [ "$(grep -c 'sum of ranks = 6$' "$tmp/one")" -eq 4 ] || fail "NCCL_HOSTID=one-box: wrong sums"
    check_links "$tmp/one" 2 shm
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "$bed" run -k 2 -- \
        "$job" --log "$tmp/each" 2 "$run" /bin/sh -c \
        'NCCL_HOSTID=rank$RANK exec "$0"' "$build/example_first" >/dev/null 2>&1 ||
        { cat "$tmp/each"; fail "NCCL_HOSTID per rank: the job failed"; }
    [ "$(grep -c 'sum of ranks = 6$' "$tmp/each")" -eq 4 ] || fail "NCCL_HOSTID per rank: wrong sums"
    check_links "$tmp/each" 2 tcp
    # Host 1 takes host 0's hostname but mounts a /dev/shm of its own, as a container with host
    # networking may: the /dev/shm device keeps them apart, so they meet over TCP, not in
    # segments that the other cannot see.
    # shellcheck disable=SC2016
    twins='
        export TUTTI_SECRET=key:$(printf %064x 3) NCCL_COMM_ID=$TT_BED_ADDR0:29500 WORLD_SIZE=2
        "$TT_BED_SH" exec 0 env RANK=0 timeout 60 "$1" &
        "$TT_BED_SH" exec 1 unshare --mount sh -c "mount -t tmpfs shm /dev/shm &&
            hostname $TT_BED_NAME0 && RANK=1 exec timeout 60 \"\$0\"" "$1" &
        status=0
        for p in $(jobs -p); do wait $p || status=1; done
        exit $status'
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "$bed" run -k 2 -- bash -c "$twins" twins \
        "$build/example_first" >"$tmp/twins" 2>&1 ||
        { cat "$tmp/twins"; fail "one hostname, two /dev/shm: the job failed"; }
    [ "$(grep -c 'sum of ranks = 1$' "$tmp/twins")" -eq 2 ] || fail "one hostname, two /dev/shm: wrong sums"
    check_links "$tmp/twins" 1 tcp
    echo "ok: NCCL_HOSTID merges hosts and splits them; one hostname with two /dev/shm is two hosts"
    ;;
examples)
    "$bed" run -k 2 -- "$job" --log "$tmp/first" 2 "$run" "$build/example_first" >/dev/null 2>&1 ||
        { cat "$tmp/first"; fail "example_first across 2 hosts failed"; }
    quiet "$tmp/first"
    [ "$(grep -c 'rank [0-3] of 4: sum of ranks = 6$' "$tmp/first")" -eq 4 ] ||
        fail "example_first: not every rank printed its sum"
    "$bed" run -k 2 -- "$job" --log "$tmp/stream" 2 "$run" "$build/example_host_stream" \
        >/dev/null 2>&1 || { cat "$tmp/stream"; fail "example_host_stream across 2 hosts failed"; }
    quiet "$tmp/stream" | tail -4
    echo "ok: the examples ran under tutti-run --nnodes 2 --node-rank K --rdzv"
    ;;
mpirun)
    command -v mpirun >/dev/null 2>&1 || { echo "skipped: no mpirun (Open MPI)"; exit 77; }
    mpirun --version 2>/dev/null | grep -q 'Open MPI' || { echo "skipped: mpirun is not Open MPI's"; exit 77; }
    # mpirun runs on host 0 and starts its daemon on host 1 through `bed.sh rsh`, the ssh
    # stand-in; ranks 0-1 run on host 0, 2-3 on host 1. Tutti's root: host 0, port 29500. MPI's
    # own traffic (the unique id's broadcast) takes ob1 over TCP on eth0, the same in every
    # Open MPI version, whatever else (UCX) is installed.
    # shellcheck disable=SC2016
    mpijob='
        exec mpirun --allow-run-as-root --oversubscribe -n 4 \
            --host "$TT_BED_ADDR0:2,$TT_BED_ADDR1:2" \
            --mca plm_rsh_agent "$TT_BED_SH rsh" --mca pml ob1 --mca btl self,tcp \
            --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
            -x NCCL_COMM_ID="$TT_BED_ADDR0:29500" -x TUTTI_SECRET=key:$(printf %064x 1) \
            -x TUTTI_TIMEOUT_MS -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS "$@"'
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT
    "$bed" run -k 2 -- bash -c '"$TT_BED_SH" exec 0 timeout 100 bash -c "$0" mpijob "$@"' \
        "$mpijob" "$build/example_first" >"$tmp/first" 2>&1 ||
        { cat "$tmp/first"; fail "example_first under mpirun across 2 hosts failed"; }
    quiet "$tmp/first"
    [ "$(grep -c 'rank [0-3] of 4: sum of ranks = 6$' "$tmp/first")" -eq 4 ] ||
        fail "example_first under mpirun: not every rank printed its sum"
    check_links "$tmp/first" 2
    if [ -x "$build/example_unique_id_mpi" ]; then
        "$bed" run -k 2 -- bash -c '"$TT_BED_SH" exec 0 timeout 100 bash -c "$0" mpijob "$@"' \
            "$mpijob" "$build/example_unique_id_mpi" >"$tmp/uid" 2>&1 ||
            { cat "$tmp/uid"; fail "example_unique_id_mpi under mpirun across 2 hosts failed"; }
        quiet "$tmp/uid" | tail -4
        check_links "$tmp/uid" 2
    else
        echo "(example_unique_id_mpi not built: no mpicc when CMake configured)"
    fi
    echo "ok: the examples ran under mpirun across 2 hosts"
    ;;
slurm)
    # What srun would start: on each host, its block of ranks with SLURM_PROCID, SLURM_NTASKS,
    # SLURM_LOCALID, SLURM_JOB_ID, SLURM_STEP_ID and SLURM_STEP_NUM_NODES, and the user's
    # NCCL_COMM_ID naming the first host (docs/launch.md).
    # shellcheck disable=SC2016
    srunjob='
        for ((h = 0; h < 2; h++)); do
            for ((l = 0; l < 2; l++)); do
                "$TT_BED_SH" exec $h env SLURM_PROCID=$((h * 2 + l)) SLURM_NTASKS=4 \
                    SLURM_LOCALID=$l SLURM_NODEID=$h SLURM_JOB_ID=4242 SLURM_STEP_ID=0 \
                    SLURM_STEP_NUM_NODES=2 SLURM_JOB_NUM_NODES=2 NCCL_COMM_ID=$TT_BED_ADDR0:29500 \
                    TUTTI_SECRET=key:$(printf %064x 2) timeout 60 "$1" &
            done
        done
        status=0
        for p in $(jobs -p); do wait $p || status=1; done
        exit $status'
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "$bed" run -k 2 -- bash -c "$srunjob" srun \
        "$build/example_first" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "the srun-style job failed"; }
    quiet "$tmp/log"
    [ "$(grep -c 'rank [0-3] of 4: sum of ranks = 6$' "$tmp/log")" -eq 4 ] ||
        fail "not every rank printed its sum"
    check_links "$tmp/log" 2
    echo "ok: Slurm's variables across 2 hosts"
    ;;
ifname)
    # Two networks; the job must run on the one NCCL_SOCKET_IFNAME names, every rank's bootstrap
    # and TCP listeners there, and the other network's interfaces must carry (almost) nothing.
    # eth0 alone is what every other case of the bed runs on.
    for spec in eth1 "^eth0"; do
        if [ "$spec" = eth0 ]; then used=eth0 idle=eth1 net=0; else used=eth1 idle=eth0 net=1; fi
        # shellcheck disable=SC2016
        counted='
            bytes() {
                local sum=0 h
                for h in 0 1; do
                    sum=$((sum + $("$TT_BED_SH" exec $h cat /sys/class/net/$1/statistics/tx_bytes)))
                done
                echo $sum
            }
            u0=$(bytes '$used'); i0=$(bytes '$idle')
            "$@"; status=$?
            echo "tx bytes: '$used' $(($(bytes '$used') - u0)), '$idle' $(($(bytes '$idle') - i0))"
            exit $status'
        NCCL_SOCKET_IFNAME=$spec NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,BOOTSTRAP \
            "$bed" run -k 2 --nets 2 -- bash -c "$counted" counted \
            "$job" --rdzv-net $net 2 "$run" "$matrix" --colls allreduce \
            --dtypes float32 --ops sum --counts 1,200000 >"$tmp/log" 2>&1 ||
            { cat "$tmp/log"; fail "NCCL_SOCKET_IFNAME=$spec: the job failed"; }
        quiet "$tmp/log" | tail -2
        prefix="10.$((201 + net)).0."
        n_if=$(grep -c "interface $used, listening on $prefix" "$tmp/log")
        [ "$n_if" -eq 4 ] || fail "NCCL_SOCKET_IFNAME=$spec: $n_if of 4 ranks listen on $used"
        grep -o 'tcp: connected to peer rank [0-9]* at [0-9.]*' "$tmp/log" | grep -v "at $prefix" &&
            fail "NCCL_SOCKET_IFNAME=$spec: a TCP connection went elsewhere than $used"
        line=$(grep '^tx bytes' "$tmp/log")
        used_bytes=$(echo "$line" | sed 's/.*'$used' \([0-9]*\),.*/\1/')
        idle_bytes=$(echo "$line" | sed 's/.*'$idle' \([0-9]*\)$/\1/')
        # AllReduce of 800 KB, in place and not, on a ring that crosses the hosts twice: over
        # 4 MB cross; the idle network sees at most a stray ARP.
        [ "$used_bytes" -gt 2000000 ] || fail "NCCL_SOCKET_IFNAME=$spec: only $used_bytes bytes on $used"
        [ "$idle_bytes" -lt 10000 ] || fail "NCCL_SOCKET_IFNAME=$spec: $idle_bytes bytes on $idle"
        echo "ok: NCCL_SOCKET_IFNAME=$spec: $line"
    done
    ;;
portrange)
    # Every port a rank listens on (its bootstrap listener, its TCP transport's) lies in the range;
    # the root listens where NCCL_COMM_ID says, outside it.
    lo=41000 hi=41015
    TUTTI_PORT_RANGE=$lo-$hi NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,BOOTSTRAP \
        "$bed" run -k 2 -- "$job" --log "$tmp/log" 2 "$run" "$matrix" --colls every \
        --dtypes float32 --ops sum --counts 7,4099 >/dev/null 2>&1 ||
        { cat "$tmp/log"; fail "TUTTI_PORT_RANGE=$lo-$hi: the job failed"; }
    quiet "$tmp/log" | tail -4
    ports=$( (grep -o 'bootstrap rank [0-9]*/[0-9]*: interface [a-z0-9]*, listening on [0-9.]*:[0-9]*' "$tmp/log"
              grep -o 'tcp: connected to peer rank [0-9]* at [0-9.]*:[0-9]*' "$tmp/log") |
             sed 's/.*://' | sort -un)
    nports=$(echo "$ports" | grep -c .)
    [ "$nports" -ge 4 ] || fail "found $nports listening ports in the log, want at least 4"
    for p in $ports; do
        [ "$p" -ge $lo ] && [ "$p" -le $hi ] || fail "port $p is outside TUTTI_PORT_RANGE=$lo-$hi"
    done
    echo "ok: listening ports $(echo $ports) all in $lo-$hi"
    # A range too small for a host's two ranks (each needs two ports): init fails with the
    # message that names the variable, on time, rather than hanging.
    TUTTI_TIMEOUT_MS=10000 TUTTI_PORT_RANGE=$lo-$((lo + 1)) "$bed" run -k 2 -- \
        "$job" --log "$tmp/small" 2 "$run" "$build/example_first" >/dev/null 2>&1 &&
        fail "a 2-port range for 4 listeners per host did not fail"
    grep -q "no free port in TUTTI_PORT_RANGE=$lo-$((lo + 1))" "$tmp/small" ||
        { cat "$tmp/small"; fail "no message naming TUTTI_PORT_RANGE"; }
    echo "ok: a range too small fails with: $(grep -o 'no free port in TUTTI_PORT_RANGE[^;]*' "$tmp/small" | head -1)"
    ;;
netem)
    # Mixed collectives and sizes on links with DELAY one way and LOSS per packet (tc netem, or
    # tt_wire where the kernel has no netem): every rank must pass every check, and the links
    # must really have dropped packets when MIN_DROPS > 0.
    k=$1
    n=$2
    want=$3
    min_drops=$4
    shift 4
    "$bed" run -k "$k" --delay "${TT_NETEM_DELAY:-20ms}" --loss "${TT_NETEM_LOSS:-1%}" -- \
        "$job" --log "$tmp/log" "$n" "$run" "$matrix" "$@" >"$tmp/bed" 2>&1
    status=$?
    quiet "$tmp/log" | tail -$((k * n + 1))
    grep '^bed:' "$tmp/bed"
    [ $status -eq 0 ] || { cat "$tmp/bed"; fail "the job on impaired links failed (status $status)"; }
    [ "$(grep -c ': ok: ' "$tmp/log")" -eq $((k * n)) ] || fail "not every rank reported ok"
    done_calls=$(grep -o ': ok: [0-9]* checks' "$tmp/log" | head -1 | grep -o '[0-9]*')
    [ "$done_calls" -ge "$want" ] || fail "$done_calls collectives ran, want at least $want"
    drops=$(grep -o 'impairment dropped [0-9]*' "$tmp/bed" | grep -o '[0-9]*$')
    [ -n "$drops" ] || fail "the bed reported no impairment counts"
    [ "$drops" -ge "$min_drops" ] || fail "the links dropped $drops packets, want at least $min_drops"
    echo "ok: $done_calls collectives per rank bit-exact on $k hosts x $n ranks, $drops packets lost"
    ;;
*)
    echo "cases.sh: unknown case '$case_name'" >&2
    exit 2
    ;;
esac
exit 0
