#!/bin/sh
# NCCL_DEBUG_FILE: %h (the short host name) and %p (the pid) expand in the file name, each rank
# writes its own file, and a pattern that expands past the name buffer logs to stderr with a
# word instead of writing past it. NCCL_DEBUG=VERSION prints the version line alone.
# usage: test_debug_file.sh TUTTI_RUN PROGRAM WORKDIR
set -u
run=$1 prog=$2 dir=$3
rm -rf "$dir" && mkdir -p "$dir" || exit 1
host=$(hostname | cut -d. -f1)
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_DEBUG_FILE="$dir/log.%h.%p.%%" \
    "$run" -n 2 --timeout 60 "$prog" >/dev/null 2>&1 || { echo "FAIL: the job failed"; exit 1; }
n=$(ls "$dir" | grep -c "^log\.$host\.[0-9][0-9]*\.%\$")
[ "$n" = 2 ] || { echo "FAIL: want 2 files log.$host.PID.%, got: $(ls "$dir")"; exit 1; }
for f in "$dir"/log.*; do
    grep -q "NCCL INFO" "$f" || { echo "FAIL: no INFO line in $f"; exit 1; }
done
long=$(printf '%0480d' 0 | tr 0 a)
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_DEBUG_FILE="$dir/$long%h%h%h%h%p" \
    "$run" -n 2 --timeout 60 "$prog" >"$dir/out" 2>&1 ||
    { echo "FAIL: overlong: $(tail -5 "$dir/out")"; exit 1; }
grep -q "expands to more than 511 characters; logging to stderr" "$dir/out" ||
    { echo "FAIL: no word of the overlong NCCL_DEBUG_FILE: $(tail -5 "$dir/out")"; exit 1; }
grep -q "NCCL INFO" "$dir/out" || { echo "FAIL: the log did not go to stderr"; exit 1; }
# NCCL_DEBUG=VERSION names the library once per process, and nothing else.
NCCL_DEBUG=VERSION "$run" -n 2 --timeout 60 "$prog" >"$dir/out" 2>&1 ||
    { echo "FAIL: VERSION: $(tail -5 "$dir/out")"; exit 1; }
[ "$(grep -c 'NCCL VERSION Tutti [0-9.]* (NCCL API [0-9.]*)' "$dir/out")" = 2 ] ||
    { echo "FAIL: NCCL_DEBUG=VERSION: want one version line per rank: $(cat "$dir/out")"; exit 1; }
! grep -q "NCCL INFO" "$dir/out" || { echo "FAIL: INFO lines at NCCL_DEBUG=VERSION"; exit 1; }
echo "test_debug_file: passed"
