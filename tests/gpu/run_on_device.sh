#!/bin/bash
# The GPU acceptance of the CUDA build in one go, for a session that holds a machine with a GPU
# (docs/cuda.md, "Testing on a GPU"). From the repository root:
#     tests/gpu/run_on_device.sh            build the cuda preset there, then test
#     tests/gpu/run_on_device.sh --no-build use a build carried from the development machine
#                                           (run tool: carry ["build/cuda"], 64 MiB at most: a
#                                           build/cuda is about 67 MiB with its CMakeFiles, so
#                                           carry a copy without them and set TUTTI_CUDA_BUILD)
# Building there needs cmake, ninja, gcc, pkg-config, libsodium-dev and /usr/local/cuda; the
# binaries need libsodium at run time either way.
# It prints, in order: the GPU and driver; the CUDA tests of `ctest -L cuda`, run directly
# (gpu_reduce: the device reduction kernels; gpu_ipc: IPC handles between 3 ranks; gpu_matrix
# at 2, 3 and 4 ranks sharing GPU 0, every collective x dtype x op, in place and out of place,
# checked on the device; the same with the odd ranks on the CPU; tutti-perf -G checked);
# then tutti-perf's device table for AllReduce at 2 ranks up to 256 MiB with the
# device-to-device copy bandwidth measured in the same run, and 3 and 4 ranks up to 64 MiB.
# A GPU test that exits 77 found no usable GPU and is reported SKIPPED. Every step runs even
# when an earlier one failed; the exit status is the first failure's.
# Budget: about 2-4 minutes of building and 3-6 of running on an H100 with 16 cores.
set -u
cd "$(dirname "$0")/../.."
status=0
step() {
    echo
    echo "=== $* ($(date -u +%H:%M:%S))"
    "$@"
    local rc=$?
    if [ $rc -eq 77 ]; then
        echo "=== SKIPPED (77, no usable GPU): $*"
        [ $status -eq 0 ] && status=$rc
    elif [ $rc -ne 0 ]; then
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
B=${TUTTI_CUDA_BUILD:-build/cuda}
# The binaries are run directly rather than through ctest, so that a build directory carried
# from another machine (whose CTest files name that machine's paths) works too; the library is
# found through LD_LIBRARY_PATH when the binaries' run paths do not exist here.
export LD_LIBRARY_PATH="$PWD/$B:$PWD/$B/lib/nccl-compat${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TUTTI_TIMEOUT_MS=60000
step "$B/tutti-info"
step "$B/unit_cuda_elementwise"
step sh tests/gpu/check_no_cuda_link.sh "$B/libtutti.so" "$B/lib/nccl-compat/libnccl.so.2"
step "$B/gpu_reduce"
step "$B/tutti-run" -n 3 --timeout 110 "$B/gpu_ipc"
for n in 2 3 4; do
    step "$B/tutti-run" -n $n --timeout 580 "$B/gpu_matrix"
    step "$B/tutti-run" -n $n --timeout 580 "$B/gpu_matrix" --mixed
done
step "$B/tutti-run" -n 2 --timeout 280 "$B/tutti-perf" -G -b 8 -e 1M -f 32 -c 1 -n 2 -w 1 \
    -d all -o all
step "$B/tutti-run" -n 2 --timeout 300 "$B/tutti-perf" -G -b 8 -e 256M -f 4 -n 20 -w 5 -c 1
step "$B/tutti-run" -n 3 --timeout 240 "$B/tutti-perf" -G -b 1M -e 64M -f 8 -n 10 -w 3 -c 1
step "$B/tutti-run" -n 4 --timeout 240 "$B/tutti-perf" -G -b 1M -e 64M -f 8 -n 10 -w 3 -c 1
echo
echo "=== done: status $status"
exit $status
