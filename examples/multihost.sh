#!/bin/sh
# A job spanning two "hosts", both on this machine: one tutti-run per host, as on a real cluster,
# each starting 2 ranks; node 0 hosts the bootstrap root at the --rdzv address. On two real hosts
# run the same two commands, one on each, with host0's name or address instead of 127.0.0.1
# (and a port its firewall lets in).
#
#   examples/multihost.sh build/release/tutti-run ./example [port]
#
# The program is the README's first one; with 2 nodes of 2 ranks it prints "rank R of 4".
set -eu
tutti_run=${1:?usage: multihost.sh TUTTI_RUN PROGRAM [PORT]}
prog=${2:?usage: multihost.sh TUTTI_RUN PROGRAM [PORT]}
port=${3:-29500}
rdzv=127.0.0.1:$port

"$tutti_run" -n 2 --nnodes 2 --node-rank 0 --rdzv "$rdzv" --timeout 60 "$prog" &
node0=$!
"$tutti_run" -n 2 --nnodes 2 --node-rank 1 --rdzv "$rdzv" --timeout 60 "$prog" &
node1=$!

status=0
wait $node0 || status=$?
wait $node1 || status=$?
exit $status
