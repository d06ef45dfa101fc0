#!/bin/sh
# TUTTI_CUDA_DIRECT=2 where the device-direct path cannot be set up (no GPU rank here, or none
# with a current device): communicator init must fail on every rank with ncclInvalidUsage and
# say why, instead of silently staging. Runs on any machine (a GPU machine too: tutti-perf
# without -G makes no device current). Usage: direct_required.sh TUTTI_RUN TUTTI_PERF
set -u
out=$(TUTTI_CUDA_DIRECT=2 "$1" -n 2 --timeout 50 "$2" -b 8 -e 8 -n 1 -w 0 2>&1)
rc=$?
if [ $rc -eq 0 ]; then
    echo "FAIL: init succeeded with TUTTI_CUDA_DIRECT=2 and no GPU rank"
    echo "$out"
    exit 1
fi
n=$(printf '%s\n' "$out" | grep -c "tuttiCommInitFromEnv failed: invalid usage.*TUTTI_CUDA_DIRECT=2: the device-direct path is off: 0 of 2 ranks are GPU ranks")
if [ "$n" -ne 2 ]; then
    echo "FAIL: expected both ranks to fail init with the reason, got:"
    echo "$out"
    exit 1
fi
# The default (1) falls back to staging: the same run passes, results checked.
TUTTI_CUDA_DIRECT=1 "$1" -n 2 --timeout 50 "$2" -b 8 -e 64K -f 8 -n 1 -w 0 -c 1 >/dev/null || {
    echo "FAIL: TUTTI_CUDA_DIRECT=1 without GPU ranks did not fall back"
    exit 1
}
echo "ok: TUTTI_CUDA_DIRECT=2 refused (both ranks said why), 1 fell back"
