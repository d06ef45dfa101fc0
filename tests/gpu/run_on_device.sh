#!/bin/bash
# The GPU acceptance of the CUDA build in one go, for a session that holds a machine with a GPU
# (docs/cuda.md, "Testing on a GPU"). From the repository root:
#     tests/gpu/run_on_device.sh            build the cuda preset there, then test
#     tests/gpu/run_on_device.sh --no-build use build/cuda as carried from the development
#                                           machine (the run tool's carry: ["build/cuda"])
# It prints, in order: the GPU and driver; the CUDA tests (gpu_reduce: the device reduction
# kernels; gpu_matrix at 2, 3 and 4 ranks sharing GPU 0, every collective x dtype x op, in
# place and out of place, checked on the device; the same with the odd ranks on the CPU;
# tutti-perf -G checked); then tutti-perf's device table for AllReduce at 2 ranks up to 256 MiB
# with the device-to-device copy bandwidth measured in the same run, and 3 and 4 ranks up to 64
# MiB. Every step runs even when an earlier one failed; the exit status is the first failure's.
# Budget: about 2-4 minutes of building and 3-6 of running on an H100 with 16 cores.
set -u
cd "$(dirname "$0")/../.."
status=0
step() {
    echo
    echo "=== $* ($(date -u +%H:%M:%S))"
    "$@"
    local rc=$?
    if [ $rc -ne 0 ]; then
        echo "=== FAILED ($rc): $*"
        [ $status -eq 0 ] && status=$rc
    fi
    return 0
}

echo "=== machine"
nvidia-smi -L 2>&1 || echo "nvidia-smi: not available"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
nproc

if [ "${1:-}" != "--no-build" ]; then
    for tool in cmake ninja pkg-config /usr/local/cuda/bin/nvcc; do
        command -v "$tool" >/dev/null || echo "missing: $tool (use --no-build with a carried build/cuda)"
    done
    step cmake --preset cuda
    step cmake --build --preset cuda -j "$(nproc)"
fi
B=build/cuda
step "$B/tutti-info"
step ctest --test-dir "$B" -L cuda --timeout 600 --output-on-failure
step "$B/tutti-run" -n 2 --timeout 300 "$B/tutti-perf" -G -b 8 -e 256M -f 4 -n 20 -w 5 -c 1
step "$B/tutti-run" -n 3 --timeout 240 "$B/tutti-perf" -G -b 1M -e 64M -f 8 -n 10 -w 3 -c 1
step "$B/tutti-run" -n 4 --timeout 240 "$B/tutti-perf" -G -b 1M -e 64M -f 8 -n 10 -w 3 -c 1
echo
echo "=== done: status $status"
exit $status
