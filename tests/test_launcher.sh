#!/bin/sh
# Tests of tutti-run: the environment each rank gets, output tagging, what happens when a rank
# fails or dies by a signal (the others are stopped, SIGKILL after the grace period, nobody
# left behind), signal forwarding, --timeout, several nodes, usage errors.
# Usage: test_launcher.sh TUTTI_RUN CASE   (CASE: env tag fail signal forward timeout
#        multinode usage fdlimit drain stopped). Each case is its own CTest test. Exit 0: pass, 1: fail.
set -u

run=$1
case_name=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/tutti-test-launcher-XXXXXX")
trap 'rm -rf "$dir"' EXIT
failures=0

fail() {
    echo "FAIL [$case_name] $*" >&2
    failures=$((failures + 1))
}

# check_eq WHAT GOT WANT
check_eq() {
    if [ "$2" != "$3" ]; then fail "$1: got '$2', want '$3'"; fi
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# A process is alive when it exists and is not a zombie.
alive() {
    [ -r "/proc/$1/stat" ] || return 1
    state=$(sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$state" ] && [ "$state" != Z ]
}

# Every pid listed in the files given must be gone within 3 s.
check_gone() {
    for f in "$@"; do
        for pid in $(cat "$f"); do
            tries=0
            while alive "$pid" && [ $tries -lt 30 ]; do
                sleep 0.1
                tries=$((tries + 1))
            done
            if alive "$pid"; then
                fail "pid $pid (from $(basename "$f")) survived tutti-run"
                kill -KILL "$pid" 2>/dev/null
            fi
        done
    done
}

# wait_pair TEST NAME WHY: waits up to 5 s until "$dir/NAME.0" and "$dir/NAME.1" pass `test
# TEST` (-e: exist, -s: not empty); else WHY is the failure.
wait_pair() {
    tries=0
    while { [ ! "$1" "$dir/$2.0" ] || [ ! "$1" "$dir/$2.1" ]; } && [ $tries -lt 100 ]; do
        sleep 0.05
        tries=$((tries + 1))
    done
    [ $tries -lt 100 ] || fail "$3"
}

# The environment of every rank: RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE NODE_RANK
# NCCL_COMM_ID and a variable set with -x.
env_line='echo "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $NODE_RANK $NCCL_COMM_ID $FOO"'

case_env() {
    "$run" -n 3 --no-tag -x FOO=bar -x HOME sh -c "$env_line" >"$dir/out"
    check_eq "exit status" $? 0
    check_eq "lines" "$(wc -l <"$dir/out" | tr -d ' ')" 3
    check_eq "ranks" "$(cut -d' ' -f1 "$dir/out" | sort -n | tr '\n' ' ')" "0 1 2 "
    ids=$(cut -d' ' -f6 "$dir/out" | sort -u)
    check_eq "distinct NCCL_COMM_ID values" "$(echo "$ids" | wc -l | tr -d ' ')" 1
    case $ids in
        127.0.0.1:[1-9]*) ;;
        *) fail "NCCL_COMM_ID '$ids' is not 127.0.0.1:PORT" ;;
    esac
    while read -r rank size local local_size node id foo; do
        check_eq "rank $rank WORLD_SIZE" "$size" 3
        check_eq "rank $rank LOCAL_RANK" "$local" "$rank"
        check_eq "rank $rank LOCAL_WORLD_SIZE" "$local_size" 3
        check_eq "rank $rank NODE_RANK" "$node" 0
        check_eq "rank $rank FOO (-x)" "$foo" bar
    done <"$dir/out"
    # The root's port stays bound from the moment tutti-run picks it (rank 0 inherits the
    # listening socket as TUTTI_ROOT_FD): no rank, nor anyone else, can bind it meanwhile.
    # Rank 0 holds it until rank 1 has looked.
    bind_try='import os, socket; h, p = os.environ["NCCL_COMM_ID"].rsplit(":", 1)
try:
    socket.socket().bind((h, int(p))); print("bound")
except OSError as e:
    print("in use" if e.errno == 98 else e)'
    "$run" -n 2 --no-tag sh -c "echo \"\$RANK \${TUTTI_ROOT_FD:-none} \$(python3 -c '$bind_try')\"
        [ \$RANK = 1 ] && touch '$dir/looked'
        i=0; while [ \$RANK = 0 ] && [ ! -e '$dir/looked' ] && [ \$i -lt 100 ]; do
            sleep 0.1; i=\$((i+1)); done" >"$dir/out"
    check_eq "port check exit status" $? 0
    check_eq "rank 1 (no root socket)" "$(grep '^1 ' "$dir/out")" "1 none in use"
    case $(grep '^0 ' "$dir/out") in
        "0 "[0-9]*" in use") ;;
        *) fail "rank 0: '$(grep '^0 ' "$dir/out")', want '0 FD in use'" ;;
    esac
    # --rdzv on one node is passed through as is.
    got=$("$run" -n 1 --rdzv 127.0.0.1:29911 sh -c 'echo $NCCL_COMM_ID')
    check_eq "NCCL_COMM_ID with --rdzv" "$got" 127.0.0.1:29911
    # torch.distributed's env://: MASTER_ADDR and MASTER_PORT, the same on every rank; on one
    # host a free port other than NCCL_COMM_ID's, with --rdzv its port - 1 (IPv6 unbracketed);
    # an inherited value is replaced and -x overrides.
    MASTER_ADDR=10.9.9.9 MASTER_PORT=1234 "$run" -n 2 --no-tag \
        sh -c 'echo "$MASTER_ADDR $MASTER_PORT $NCCL_COMM_ID"' >"$dir/out"
    check_eq "distinct MASTER lines" "$(sort -u "$dir/out" | wc -l | tr -d ' ')" 1
    read -r maddr mport id <"$dir/out"
    check_eq "MASTER_ADDR" "$maddr" 127.0.0.1
    case $mport in
        [1-9]*) [ "127.0.0.1:$mport" != "$id" ] || fail "MASTER_PORT is NCCL_COMM_ID's port" ;;
        *) fail "MASTER_PORT '$mport' is not a port" ;;
    esac
    got=$("$run" -n 1 --rdzv '[::1]:29911' sh -c 'echo "$MASTER_ADDR $MASTER_PORT"')
    check_eq "MASTER_* with --rdzv" "$got" "::1 29910"
    got=$("$run" -n 1 -x MASTER_PORT=29500 sh -c 'echo "$MASTER_PORT"')
    check_eq "MASTER_PORT with -x" "$got" 29500
    # Python's output reaches tagged output's pipes line by line (PYTHONUNBUFFERED=1), unless
    # the user chose; untagged output is the user's own stdout, left alone.
    env -u PYTHONUNBUFFERED "$run" -n 2 sh -c 'echo "x${PYTHONUNBUFFERED}x"' >"$dir/out"
    check_eq "PYTHONUNBUFFERED when tagging" "$(grep -c '^\[[01]\] x1x$' "$dir/out")" 2
    PYTHONUNBUFFERED=0 "$run" -n 2 sh -c 'echo "x${PYTHONUNBUFFERED}x"' >"$dir/out"
    check_eq "PYTHONUNBUFFERED the user set" "$(grep -c '^\[[01]\] x0x$' "$dir/out")" 2
    env -u PYTHONUNBUFFERED "$run" -n 2 --no-tag sh -c 'echo "x${PYTHONUNBUFFERED}x"' \
        >"$dir/out"
    check_eq "PYTHONUNBUFFERED untagged" "$(grep -c '^xx$' "$dir/out")" 2
}

case_tag() {
    # Several ranks: tagged by default, stdout and stderr kept apart, an unterminated last
    # line still tagged, lines never cut by other ranks' lines.
    "$run" -n 3 sh -c 'echo out$RANK; echo err$RANK >&2
                       i=0; while [ $i -lt 200 ]; do echo "line $RANK $i"; i=$((i+1)); done
                       printf partial$RANK' >"$dir/out" 2>"$dir/err"
    check_eq "exit status" $? 0
    for r in 0 1 2; do
        check_eq "rank $r stdout line" "$(grep -c "^\[$r\] out$r\$" "$dir/out")" 1
        check_eq "rank $r stderr line" "$(grep -c "^\[$r\] err$r\$" "$dir/err")" 1
        check_eq "rank $r unterminated line" "$(grep -c "^\[$r\] partial$r\$" "$dir/out")" 1
        check_eq "rank $r loop lines" "$(grep -c "^\[$r\] line $r [0-9]*\$" "$dir/out")" 200
    done
    check_eq "stdout lines" "$(wc -l <"$dir/out" | tr -d ' ')" $((3 * 202))
    check_eq "stderr lines" "$(wc -l <"$dir/err" | tr -d ' ')" 3
    # A reader slower than the drain time after the ranks' exit (4 KiB per 0.1 s, 180 KB in
    # all): what the ranks wrote is all there (before, what sat in their pipes was dropped).
    "$run" -n 2 sh -c 'seq 1 10000' | python3 -c 'import os, time
while True:
    b = os.read(0, 4096)
    if not b: break
    os.write(1, b); time.sleep(0.1)' >"$dir/out"
    check_eq "lines through a late reader" "$(grep -c '^\[[01]\] [0-9]*$' "$dir/out")" 20000
    # One rank: untagged by default; --tag-output forces tags; --no-tag disables them.
    check_eq "-n 1" "$("$run" -n 1 echo hi)" "hi"
    check_eq "-n 1 --tag-output" "$("$run" -n 1 --tag-output echo hi)" "[0] hi"
    check_eq "-n 2 --no-tag" "$("$run" -n 2 --no-tag echo hi)" "hi
hi"
}

case_fail() {
    # Rank 1 exits 3 once the others are running. Rank 2 and its child ignore SIGTERM, so
    # only the SIGKILL that follows after 2 s stops them.
    start=$(now_ms)
    "$run" -n 3 -x D="$dir" sh -c '
        if [ $RANK = 1 ]; then
            while [ ! -s "$D/pids.0" ] || [ ! -s "$D/pids.2" ]; do sleep 0.05; done
            exit 3
        fi
        if [ $RANK = 2 ]; then trap "" TERM; fi
        sleep 30 & echo "$$ $!" >"$D/tmp.$RANK" && mv "$D/tmp.$RANK" "$D/pids.$RANK"
        wait' 2>"$dir/err" >/dev/null
    rc=$?
    elapsed=$(($(now_ms) - start))
    check_eq "exit status" $rc 3
    grep -q "tutti-run: rank 1 exited with status 3" "$dir/err" ||
        fail "no report of rank 1 in: $(cat "$dir/err")"
    [ $elapsed -ge 1900 ] || fail "exited after $elapsed ms, before the 2 s SIGKILL grace"
    [ $elapsed -lt 10000 ] || fail "took $elapsed ms to stop the other ranks"
    check_gone "$dir/pids.0" "$dir/pids.2"
    # All ranks succeed: 0; one rank exits 1: 1.
    "$run" -n 2 true
    check_eq "all ranks exit 0" $? 0
    "$run" -n 2 sh -c 'exit $((RANK == 0))' 2>/dev/null
    check_eq "rank 0 exits 1" $? 1
    "$run" -n 2 /nonexistent/program 2>"$dir/err"
    check_eq "program not found" $? 127
}

case_signal() {
    start=$(now_ms)
    "$run" -n 3 -x D="$dir" sh -c '
        if [ $RANK = 1 ]; then
            while [ ! -s "$D/pids.0" ] || [ ! -s "$D/pids.2" ]; do sleep 0.05; done
            kill -KILL $$
        fi
        sleep 30 & echo "$$ $!" >"$D/tmp.$RANK" && mv "$D/tmp.$RANK" "$D/pids.$RANK"
        wait' 2>"$dir/err" >/dev/null
    rc=$?
    elapsed=$(($(now_ms) - start))
    check_eq "exit status" $rc $((128 + 9))
    grep -q "tutti-run: rank 1 exited with signal SIGKILL" "$dir/err" ||
        fail "no report of rank 1 in: $(cat "$dir/err")"
    [ $elapsed -lt 10000 ] || fail "took $elapsed ms"
    check_gone "$dir/pids.0" "$dir/pids.2"
    # The killed rank is blamed, not the survivor that exits with an error a moment after it
    # (as a rank does whose library saw the peer die): 10 times, both dying within ~1 ms.
    for k in 1 2 3 4 5 6 7 8 9 10; do
        rm -f "$dir"/pid.*
        "$run" -n 2 -x D="$dir" sh -c '
            if [ $RANK = 1 ]; then
                echo $$ >"$D/tmp.1" && mv "$D/tmp.1" "$D/pid.1"
                while [ ! -e "$D/watching" ]; do :; done
                kill -KILL $$
            fi
            while [ ! -s "$D/pid.1" ]; do :; done
            p=$(cat "$D/pid.1"); touch "$D/watching"
            while [ -e /proc/$p ] && [ "$(cut -d" " -f3 /proc/$p/stat 2>/dev/null)" != Z ]; do :; done
            exit 3' 2>"$dir/err" >/dev/null
        rc=$?
        rm -f "$dir/watching"
        check_eq "exit status (trial $k: rank 1 killed, rank 0 exits 3 after it)" $rc $((128 + 9))
        grep -q "tutti-run: rank 1 exited with signal SIGKILL (the first rank to fail)" \
            "$dir/err" || fail "trial $k: rank 1 not blamed in: $(cat "$dir/err")"
    done
}

case_orphans() {
    # tutti-run killed outright (SIGKILL: the OOM killer, a scheduler's last word): what the
    # ranks started, not only the ranks' leaders, must go with it.
    rm -f "$dir"/kids.*
    "$run" -n 2 -x D="$dir" sh -c 'sleep 30 & echo $! >"$D/tmp.$RANK" &&
                                  mv "$D/tmp.$RANK" "$D/kids.$RANK"; wait' \
        >/dev/null 2>&1 &
    tpid=$!
    wait_pair -s kids "ranks not started after 5 s"
    kill -KILL $tpid
    wait $tpid 2>/dev/null
    check_gone "$dir/kids.0" "$dir/kids.1"
    # Ranks that exit leaving a child behind: the child, now tutti-run's (the subreaper), is
    # killed with the rank's group once the last rank has exited.
    rm -f "$dir"/kids.*
    "$run" -n 2 -x D="$dir" sh -c 'sleep 30 & echo $! >"$D/kids.$RANK"' >/dev/null 2>&1
    check_eq "exit status (ranks leaving children)" $? 0
    check_gone "$dir/kids.0" "$dir/kids.1"
    # A run that ends by itself is not slowed by what watches for that (the best of three, so
    # that a loaded machine does not fail it).
    best=999999
    for _ in 1 2 3; do
        start=$(now_ms)
        "$run" -n 2 true
        check_eq "exit status of a quick run" $? 0
        elapsed=$(($(now_ms) - start))
        [ $elapsed -lt $best ] && best=$elapsed
    done
    [ $best -lt 1500 ] || fail "a run of 'true' took $best ms (best of 3)"
}

# Starts tutti-run in the background with the rank script $1 and waits until every rank has
# written $dir/ready.RANK; sets $tpid.
start_ranks() {
    rm -f "$dir"/ready.*
    "$run" -n 2 -x D="$dir" sh -c "$1" >"$dir/out" 2>"$dir/err" &
    tpid=$!
    wait_pair -e ready "ranks not ready after 5 s"
}

# expect_exit WHY TRIES: tutti-run ($tpid) must exit within TRIES x 50 ms; else it is killed
# and WHY is the failure.
expect_exit() {
    tries=0
    while kill -0 $tpid 2>/dev/null && [ $tries -lt "$2" ]; do
        sleep 0.05
        tries=$((tries + 1))
    done
    kill -0 $tpid 2>/dev/null && { kill -KILL $tpid; fail "$1"; }
}

case_forward() {
    # The ranks catch SIGTERM, say so and exit 5: the signal reached each of them. The handler
    # ignores further SIGTERMs: once one rank exits 5, tutti-run stops the others with another
    # SIGTERM, which could otherwise re-enter a handler that has not exited yet.
    start_ranks 'trap "trap \"\" TERM; echo got-TERM; exit 5" TERM
                 echo "$$" >"$D/ready.$RANK"
                 while :; do sleep 0.1; done'
    kill -TERM $tpid
    wait $tpid
    check_eq "exit status (ranks exit 5 on SIGTERM)" $? 5
    for r in 0 1; do
        check_eq "rank $r saw SIGTERM" "$(grep -c "^\[$r\] got-TERM\$" "$dir/out")" 1
    done
    check_gone "$dir/ready.0" "$dir/ready.1"
    # Ranks that do not catch it die of it: 128 + SIGTERM.
    start_ranks 'echo "$$" >"$D/ready.$RANK"; sleep 30'
    kill -TERM $tpid
    wait $tpid
    check_eq "exit status (ranks killed by SIGTERM)" $? $((128 + 15))
    check_gone "$dir/ready.0" "$dir/ready.1"
    # One rank dies of the forwarded SIGTERM at once, the other takes 3 s to save its state:
    # the first one's death does not get the second stopped (SIGKILL 2 s later) mid-save.
    start_ranks 'if [ $RANK = 0 ]; then
                     trap "trap \"\" TERM; sleep 3; echo saved; exit 0" TERM
                 fi
                 echo "$$" >"$D/ready.$RANK"
                 while :; do sleep 0.1; done'
    kill -TERM $tpid
    wait $tpid
    check_eq "exit status (rank 1 killed by SIGTERM, rank 0 saved)" $? $((128 + 15))
    check_eq "rank 0 finished saving" "$(grep -c '^\[0\] saved$' "$dir/out")" 1
    # Ranks that ignore SIGTERM: a second one stops them (SIGKILL 2 s later), whatever they do.
    # The second is sent once the ranks got the first (the kernel merges a signal sent again
    # before the first was delivered).
    start_ranks 'trap "touch \"$D/term.$RANK\"" TERM; echo "$$" >"$D/ready.$RANK"
                 while :; do sleep 0.1; done'
    kill -TERM $tpid
    wait_pair -e term "the ranks did not get the first SIGTERM within 5 s"
    kill -TERM $tpid
    expect_exit "a second SIGTERM did not stop the ranks" 200
    wait $tpid
    check_eq "exit status (stopped by a second SIGTERM)" $? $((128 + 15))
    grep -q "interrupted again" "$dir/err" || fail "no word of the second interrupt: $(cat "$dir/err")"
    check_gone "$dir/ready.0" "$dir/ready.1"
}

case_timeout() {
    start=$(now_ms)
    "$run" -n 2 --timeout 1 -x D="$dir" sh -c 'echo $$ >"$D/pids.$RANK"; sleep 30' \
        2>"$dir/err"
    rc=$?
    elapsed=$(($(now_ms) - start))
    check_eq "exit status" $rc 124
    grep -q -- "--timeout" "$dir/err" || fail "no timeout message in: $(cat "$dir/err")"
    [ $elapsed -ge 900 ] && [ $elapsed -lt 5000 ] || fail "exited after $elapsed ms"
    check_gone "$dir/pids.0" "$dir/pids.1"
    # A job that ends in time is not affected.
    "$run" -n 2 --timeout 20 true
    check_eq "exit status within the timeout" $? 0
}

case_multinode() {
    # Two "nodes" of two ranks on this host, as two tutti-runs.
    "$run" -n 2 --nnodes 2 --node-rank 0 --rdzv 127.0.0.1:29912 --no-tag -x FOO=x \
        sh -c "$env_line" >"$dir/out0" &
    "$run" -n 2 --nnodes 2 --node-rank 1 --rdzv 127.0.0.1:29912 --no-tag -x FOO=x \
        sh -c "$env_line" >"$dir/out1" 2>"$dir/err1"
    rc1=$?
    wait $!
    check_eq "exit status node 0" $? 0
    check_eq "exit status node 1" $rc1 0
    # Without TUTTI_SECRET across nodes, anyone who reaches the rendezvous may join: said.
    grep -q "warning: no TUTTI_SECRET across 2 nodes" "$dir/err1" ||
        fail "no warning about the missing secret: $(cat "$dir/err1")"
    # A loopback rendezvous across nodes is said to be one (other hosts could not reach it).
    grep -q "warning: --rdzv host '127.0.0.1' is 127.0.0.1 here, a loopback address" \
        "$dir/err1" || fail "no loopback warning: $(cat "$dir/err1")"
    check_eq "node 0 ranks" "$(cut -d' ' -f1 "$dir/out0" | sort -n | tr '\n' ' ')" "0 1 "
    check_eq "node 1 ranks" "$(cut -d' ' -f1 "$dir/out1" | sort -n | tr '\n' ' ')" "2 3 "
    cat "$dir/out0" "$dir/out1" >"$dir/out"
    while read -r rank size local local_size node id foo; do
        check_eq "rank $rank WORLD_SIZE" "$size" 4
        check_eq "rank $rank LOCAL_RANK" "$local" $((rank % 2))
        check_eq "rank $rank LOCAL_WORLD_SIZE" "$local_size" 2
        check_eq "rank $rank NODE_RANK" "$node" $((rank / 2))
        check_eq "rank $rank NCCL_COMM_ID" "$id" 127.0.0.1:29912
    done <"$dir/out"
}

case_fdlimit() {
    # Two pipes per rank: a soft limit too low for them is raised, and the ranks get the
    # limit they were started with back.
    out=$(ulimit -S -n 64 && "$run" -n 40 --tag-output sh -c 'ulimit -S -n' 2>&1)
    check_eq "exit status, soft limit 64" $? 0
    check_eq "ranks' own limit" "$(echo "$out" | sed 's/^\[[0-9]*\] //' | sort -u)" 64
    # A hard limit too low: refused before any rank starts, saying why.
    (ulimit -n 64 && "$run" -n 40 --tag-output true) >/dev/null 2>"$dir/err"
    check_eq "exit status, hard limit 64" $? 1
    grep -q "needs about 144 file descriptors" "$dir/err" || fail "no reason: $(cat "$dir/err")"
}

case_drain() {
    # A failed rank whose leftover child keeps writing to the rank's pipe: the job is still
    # stopped, with that rank's status (before, tutti-run drained the pipe forever).
    start=$(now_ms)
    "$run" -n 2 --timeout 30 sh -c \
        'if [ "$RANK" = 0 ]; then yes & sleep 0.3; exit 3; fi; sleep 30' >/dev/null 2>&1
    check_eq "exit status" $? 3
    took=$(($(now_ms) - start))
    [ $took -lt 10000 ] || fail "the job took $took ms to stop"
}

case_stopped() {
    # A rank that stops (a read from the terminal stops a background process group with
    # SIGTTIN; SIGSTOP here): tutti-run says so, and a forwarded SIGTERM still ends it (SIGCONT
    # follows it; before, the stopped rank held the job until SIGKILL).
    start_ranks 'echo "$$" >"$D/ready.$RANK"; [ $RANK = 0 ] && kill -STOP $$
                 while :; do sleep 0.1; done'
    tries=0
    while ! grep -q "rank 0 (pid [0-9]*) was stopped by SIGSTOP" "$dir/err" &&
        [ $tries -lt 100 ]; do
        sleep 0.05
        tries=$((tries + 1))
    done
    grep -q "rank 0 (pid [0-9]*) was stopped by SIGSTOP" "$dir/err" ||
        fail "no word of the stopped rank: $(cat "$dir/err")"
    kill -TERM $tpid
    expect_exit "a stopped rank held the job after SIGTERM" 100
    wait $tpid
    check_eq "exit status (ranks killed by SIGTERM)" $? $((128 + 15))
    check_gone "$dir/ready.0" "$dir/ready.1"
}

case_usage() {
    # expect_usage WHAT ARGS...: tutti-run must exit 2 and say something on stderr.
    expect_usage() {
        what=$1
        shift
        "$run" "$@" >/dev/null 2>"$dir/err"
        check_eq "$what: exit status" $? 2
        [ -s "$dir/err" ] || fail "$what: no message"
    }
    expect_usage "no -n" true
    expect_usage "-n 0" -n 0 true
    expect_usage "-n x" -n x true
    expect_usage "no program" -n 2
    expect_usage "--node-rank >= --nnodes" -n 1 --nnodes 2 --node-rank 2 --rdzv h:1 true
    expect_usage "--nnodes without --rdzv" -n 1 --nnodes 2 true
    expect_usage "--rdzv without port" -n 1 --rdzv host true
    expect_usage "--rdzv bad port" -n 1 --rdzv host:70000 true
    expect_usage "--rdzv unbracketed IPv6" -n 1 --rdzv ::1:5 true
    expect_usage "--rdzv port with a sign" -n 1 --rdzv host:+80 true
    expect_usage "--rdzv port with a blank" -n 1 --rdzv "host: 80" true
    expect_usage "--timeout 0" -n 1 --timeout 0 true
    expect_usage "-x =v" -n 1 -x =v true
    expect_usage "unknown option" -n 1 --bogus true
    "$run" -h >"$dir/out"
    check_eq "-h exit status" $? 0
    grep -q "usage: tutti-run" "$dir/out" || fail "-h prints no usage"
    # Options after the program's name belong to the program.
    check_eq "program options" "$("$run" -n 1 printf '%s %s\n' -n 3)" "-n 3"
}

case "$case_name" in
    env | tag | fail | signal | forward | orphans | timeout | multinode | usage | fdlimit | drain | \
        stopped)
        "case_$case_name"
        ;;
    *)
        echo "test_launcher.sh: unknown case '$case_name'" >&2
        exit 2
        ;;
esac
if [ $failures -gt 0 ]; then
    echo "test_launcher.sh $case_name: $failures check(s) failed" >&2
    exit 1
fi
echo "test_launcher.sh $case_name: passed"
exit 0
