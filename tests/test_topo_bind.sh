#!/bin/sh
# tutti-run --bind pins each rank where tutti-info --placement says (tests/topo.cmake): for 1, 2
# and 3 ranks (3 on this 2-CPU machine shares a core), every rank's allowed CPUs, as the kernel
# reports them, must be the list tutti-info prints for its local rank.
# Usage: test_topo_bind.sh TUTTI_RUN TUTTI_INFO
set -eu
run=$1 info=$2
for n in 1 2 3; do
    want=$("$info" --placement $n | sed -n 's/^  local rank \([0-9]*\) .* CPUs \(.*\)$/\1 \2/p' |
           sort)
    got=$("$run" -n $n --no-tag --bind sh -c \
          'echo "$LOCAL_RANK $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"' |
          sort)
    echo "n=$n: tutti-info: $(echo "$want" | tr '\n' ';') tutti-run: $(echo "$got" | tr '\n' ';')"
    [ -n "$want" ] || { echo "test_topo_bind: tutti-info --placement $n printed no ranks"; exit 1; }
    [ "$got" = "$want" ] || { echo "test_topo_bind: n=$n: the ranks run elsewhere"; exit 1; }
done
echo "test_topo_bind: ok"
