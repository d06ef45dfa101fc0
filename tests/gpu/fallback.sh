#!/bin/sh
# Runs a checked host AllReduce with the CUDA driver asked for (TUTTI_CUDA=1) but unusable
# (TUTTI_CUDA_LIBRARY names no library): the CUDA build must say once why it runs host-only,
# and then pass. Usage: fallback.sh TUTTI_RUN TUTTI_PERF
set -u
out=$(TUTTI_CUDA=1 TUTTI_CUDA_LIBRARY=/nonexistent/libcuda.so.1 \
      "$1" -n 2 --timeout 50 "$2" -b 8 -e 64K -f 8 -c 1 -n 2 -w 1 2>&1)
rc=$?
echo "$out"
if [ $rc -ne 0 ]; then echo "FAIL: tutti-perf exited $rc" >&2; exit 1; fi
if ! echo "$out" | grep -q "running host-only: no CUDA driver"; then
    echo "FAIL: no message saying why CUDA is not used" >&2; exit 1
fi
if ! echo "$out" | grep -q "Out of bounds values : 0 OK"; then
    echo "FAIL: the checked AllReduce did not report 0 wrong values" >&2; exit 1
fi
echo "OK: host-only fallback"
