#!/bin/bash
# The GPU acceptance of the CUDA build in one go, for a session that holds a machine with a GPU
# (docs/cuda.md, "Testing on a GPU"). From the repository root:
#
#     tests/gpu/run_on_device.sh [--pack|--build|--no-build] [--phase a|b|all]
#
#   --pack      (the default when build/gpu-pack exists) run the binaries of build/gpu-pack,
#               made on the development machine by tools/gpu-pack.sh and carried by the device
#               tool: run tool, carry ["build/gpu-pack"]. Needs only a driver and a GPU there.
#   --build     build the cuda preset there first (needs cmake, ninja, gcc, pkg-config,
#               libsodium-dev, /usr/local/cuda), then run build/cuda. The default without a pack.
#   --no-build  run an existing build/cuda (or $TUTTI_CUDA_BUILD) as it is.
#   --phase a   the device-direct path and the AllReduce figures (about 2-3 minutes)
#   --phase b   the full correctness matrix on device buffers (staged path) and 3-4 rank figures
#   --phase all both (the default; budget 6-9 minutes on an H100 with 16 cores)
#   --phase win AllReduce on symmetric device windows: gpu_direct --windows at 2-4 ranks and the
#               tutti-perf -G -R 2 tables (part of all; about 1 minute)
#   --phase mps the device-direct AllReduce table and the 4-rank matrix under CUDA MPS (1 minute)
#   --phase winmps  the window AllReduce table and gpu_direct --windows under CUDA MPS
#   --phase ring    the device ring AllReduce (NCCL_ALGO=Ring): gpu_direct --allreduce at 2-4 ranks
#               and its tutti-perf -G table at 2 and 4 ranks (part of all through phase a's
#               3-rank run; the tables only here; about 1 minute)
#   --phase fail    streams waiting for a failed peer run out: gpu_direct --abort (2 ranks), --dead
#               (3 and 2), --third (3), --destroy (3); under a minute
#   --phase failx   fail under CUDA MPS, then with CUDA_DEVICE_MAX_CONNECTIONS=1 (1-2 minutes)
#   --phase check   fail, then the ring at 2-4 ranks, gpu_direct at 2 and 4, abi_gpu and the
#               AllReduce tables (default and ring) at 2 ranks: a short pass after changes (3-4 min)
#   --phase rooted  Broadcast, Reduce, Gather, Scatter, AlltoAll, Send/Recv device-direct: gpu_direct at
#               2-4 ranks, then each one's tutti-perf -G table at 2 ranks direct and staged
#               (part of all through phase a's gpu_direct; the tables only here; 2-3 minutes)
#
# Phase a prints: the GPU and driver; tutti-info; unit_cuda_elementwise, gpu_reduce (the device
# reduction kernels), gpu_ipc (IPC handles among 3 ranks); gpu_direct at 2, 3, 4 ranks with a
# 64 KiB scratch and at 3 ranks forced one-shot and two-shot (every dtype x op, in place and out
# of place, bursts, checked bit for bit on the device); abi_gpu (built against NVIDIA's nccl.h,
# linked with -lnccl, 3 ranks); then tutti-perf -G's AllReduce table at
# 2 ranks from 16 B to 256 MiB on the device-direct path (TUTTI_CUDA_DIRECT=2: it fails rather
# than fall back), with the device-to-device copy bandwidth measured in the same run and the
# ratio of the 256 MiB busbw to it, then the same on the staged path (TUTTI_CUDA_DIRECT=0).
# Phase b: gpu_matrix at 2, 3, 4 ranks sharing GPU 0 and with the odd ranks on the CPU, every
# collective x dtype x op, in place and out of place, checked on the device; tutti-perf -G -c 1
# over every dtype and op; AllReduce tables at 3 and 4 ranks up to 64 MiB.
# A step that exits 77 found no usable GPU and is reported SKIPPED. Every step runs even when an
# earlier one failed; the exit status is the first failure's. Each step's own timeout
# (tutti-run --timeout) bounds a hang: a device-direct wait that never ends shows as a timeout.
set -u
cd "$(dirname "$0")/../.."
mode=""
phase=all
while [ $# -gt 0 ]; do
    case $1 in
        --pack | --build | --no-build) mode=$1 ;;
        --phase) phase=${2:-all}; shift ;;
        *)
            echo "usage: $0 [--pack|--build|--no-build]" \
                "[--phase a|b|win|all|mps|winmps|rooted|ring|fail|failx|check]" >&2
            exit 2
            ;;
    esac
    shift
done
if [ -z "$mode" ]; then
    if [ -d build/gpu-pack ]; then mode=--pack; else mode=--build; fi
fi
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
    else
        echo "=== passed: $*"
    fi
    return 0
}

echo "=== machine ($mode, phase $phase)"
nvidia-smi -L 2>&1 || echo "nvidia-smi: not available"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
echo "cpus: $(nproc)"

case $mode in
    --pack)
        B=build/gpu-pack
        [ -f $B/PACK_INFO ] && cat $B/PACK_INFO
        ;;
    --build)
        for tool in cmake ninja pkg-config /usr/local/cuda/bin/nvcc; do
            command -v "$tool" >/dev/null || echo "missing: $tool (make a pack with tools/gpu-pack.sh on the development machine and carry build/gpu-pack)"
        done
        step cmake --preset cuda
        step cmake --build --preset cuda -j "$(nproc)"
        B=build/cuda
        ;;
    *) B=${TUTTI_CUDA_BUILD:-build/cuda} ;;
esac
# The binaries are run directly rather than through ctest, so that a build carried from another
# machine (whose CTest files name that machine's paths) works too; the libraries (libtutti,
# the compat libnccl, the pack's libsodium) are found through LD_LIBRARY_PATH.
export LD_LIBRARY_PATH="$PWD/$B:$PWD/$B/lib/nccl-compat${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TUTTI_TIMEOUT_MS=60000

if [ "$phase" = a ] || [ "$phase" = all ]; then
    step "$B/tutti-info"
    step "$B/unit_cuda_elementwise"
    step sh tests/gpu/check_no_cuda_link.sh "$B/libtutti.so" "$B/lib/nccl-compat/libnccl.so.2"
    step "$B/gpu_reduce"
    step "$B/tutti-run" -n 3 --timeout 110 "$B/gpu_ipc"
    for n in 2 3 4; do
        step env TUTTI_CUDA_DIRECT=2 TUTTI_CUDA_DIRECT_BYTES=65536 \
            "$B/tutti-run" -n $n --timeout 150 "$B/gpu_direct"
    done
    step env TUTTI_CUDA_DIRECT=2 TUTTI_CUDA_ONESHOT_BYTES=1073741824 \
        "$B/tutti-run" -n 3 --timeout 150 "$B/gpu_direct"
    step env TUTTI_CUDA_DIRECT=2 TUTTI_CUDA_ONESHOT_BYTES=0 \
        "$B/tutti-run" -n 3 --timeout 150 "$B/gpu_direct"
    step env TUTTI_CUDA_DIRECT=2 TUTTI_CUDA_DIRECT_BYTES=65536 NCCL_ALGO=Ring \
        "$B/tutti-run" -n 3 --timeout 150 "$B/gpu_direct" --allreduce
    # Drop-in: built against NVIDIA's nccl.h, linked with -lnccl (lib/nccl-compat).
    step "$B/tutti-run" -n 3 --timeout 100 "$B/abi_gpu"
    # The figure of the acceptance: AllReduce busbw at 256 MiB, 2 ranks on one GPU, against the
    # device-to-device copy bandwidth of the same run (the last lines of the table say the ratio).
    step env TUTTI_CUDA_DIRECT=2 "$B/tutti-run" -n 2 --timeout 200 "$B/tutti-perf" -G \
        -b 16 -e 256M -f 4 -n 20 -w 5 -c 1
    step env TUTTI_CUDA_DIRECT=0 "$B/tutti-run" -n 2 --timeout 200 "$B/tutti-perf" -G \
        -b 1M -e 256M -f 16 -n 10 -w 3 -c 1
fi
if [ "$phase" = b ] || [ "$phase" = all ]; then
    for n in 2 3 4; do
        step "$B/tutti-run" -n $n --timeout 300 "$B/gpu_matrix"
        step "$B/tutti-run" -n $n --timeout 300 "$B/gpu_matrix" --mixed
    done
    step "$B/tutti-run" -n 2 --timeout 200 "$B/tutti-perf" -G -b 8 -e 1M -f 32 -c 1 -n 2 -w 1 \
        -d all -o all
    step "$B/tutti-run" -n 3 --timeout 120 "$B/tutti-perf" -G -b 1M -e 64M -f 8 -n 10 -w 3 -c 1
    step "$B/tutti-run" -n 4 --timeout 120 "$B/tutti-perf" -G -b 1M -e 64M -f 8 -n 10 -w 3 -c 1
fi
if [ "$phase" = win ] || [ "$phase" = all ]; then
    # Symmetric windows on device memory: AllReduce reads and writes the peers' windows in
    # place; correctness at 2-4 ranks, then the 256 MiB figure beside the scratch path's.
    for n in 2 3 4; do
        step env TUTTI_CUDA_DIRECT=2 "$B/tutti-run" -n $n --timeout 150 "$B/gpu_direct" --windows
    done
    # Every rank folding a share (as across GPUs), rather than rank 0 alone (one GPU's default).
    step env TUTTI_CUDA_DIRECT=2 TUTTI_CUDA_WINDOW_FOLD=2 "$B/tutti-run" -n 3 --timeout 150 \
        "$B/gpu_direct" --windows
    # The fold kernel's shapes against cudaMemcpy in one process (docs/cuda.md, "The fold
    # kernel, measured against the copy engine").
    step "$B/gpu_fold" 256 20
    step env TUTTI_CUDA_DIRECT=2 "$B/tutti-run" -n 2 --timeout 200 "$B/tutti-perf" -G -R 2 \
        -b 16 -e 256M -f 4 -n 20 -w 5 -c 1
    step env TUTTI_CUDA_DIRECT=2 TUTTI_CUDA_WINDOW_FOLD=2 "$B/tutti-run" -n 2 --timeout 200 \
        "$B/tutti-perf" -G -R 2 -b 1M -e 256M -f 16 -n 20 -w 5 -c 1
    step env TUTTI_CUDA_DIRECT=2 "$B/tutti-run" -n 2 --timeout 200 "$B/tutti-perf" -G \
        -b 64M -e 256M -f 4 -n 20 -w 5 -c 1
    step env TUTTI_CUDA_DIRECT=2 "$B/tutti-run" -n 3 --timeout 200 "$B/tutti-perf" -G -R 2 \
        -b 1M -e 256M -f 16 -n 10 -w 3 -c 1
fi
# The device ring (NCCL_ALGO=Ring): correctness at 2-4 ranks with a 64 KiB scratch (many
# chunks).
ring_steps() {
    for n in 2 3 4; do
        step env TUTTI_CUDA_DIRECT=2 TUTTI_CUDA_DIRECT_BYTES=65536 NCCL_ALGO=Ring \
            "$B/tutti-run" -n $n --timeout 150 "$B/gpu_direct" --allreduce
    done
}
if [ "$phase" = ring ]; then
    # The ring, then its AllReduce table beside the default one-shot/two-shot choice, 2 and 4
    # ranks.
    ring_steps
    for n in 2 4; do
        step env TUTTI_CUDA_DIRECT=2 NCCL_ALGO=Ring "$B/tutti-run" -n $n --timeout 120 \
            "$B/tutti-perf" -G -b 1M -e 256M -f 16 -n 10 -w 3 -c 1
        step env TUTTI_CUDA_DIRECT=2 "$B/tutti-run" -n $n --timeout 120 "$B/tutti-perf" -G \
            -b 1M -e 256M -f 16 -n 10 -w 3 -c 1
    done
fi
# Streams waiting on the GPU for a failed peer run out: an abort from another thread, a peer's
# process that ends, a peer's abort releasing a third rank (docs/cuda.md).
fail_steps() {
    for cfg in abort:2 dead:3 third:3 dead:2 destroy:3; do
        step env TUTTI_CUDA_DIRECT=2 TUTTI_CUDA_DIRECT_BYTES=65536 TUTTI_TIMEOUT_MS=60000 "$@" \
            "$B/tutti-run" -n "${cfg#*:}" --timeout "${FAIL_TIMEOUT:-30}" "$B/gpu_direct" \
            "--${cfg%:*}"
    done
}
if [ "$phase" = fail ] || [ "$phase" = check ]; then
    fail_steps
fi
if [ "$phase" = failx ]; then
    FAIL_TIMEOUT=15
    # The same where the GPU is shared differently: under CUDA MPS, and with one hardware queue
    # per context (the release's stream may then sit behind the user's waiting stream).
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/tutti-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/tutti-mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if command -v nvidia-cuda-mps-control >/dev/null && nvidia-cuda-mps-control -d; then
        fail_steps
        echo quit | nvidia-cuda-mps-control
        sleep 1
    else
        echo "=== SKIPPED: no CUDA MPS control daemon (nvidia-cuda-mps-control)"
    fi
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    fail_steps CUDA_DEVICE_MAX_CONNECTIONS=1
fi
if [ "$phase" = check ]; then
    # One short pass over what changed since the last GPU run: the ring at 2-4 ranks, the
    # default path at 2 and 4, and the 256 MiB figure.
    ring_steps
    for n in 2 4; do
        step env TUTTI_CUDA_DIRECT=2 TUTTI_CUDA_DIRECT_BYTES=65536 \
            "$B/tutti-run" -n $n --timeout 150 "$B/gpu_direct"
    done
    step "$B/tutti-run" -n 3 --timeout 100 "$B/abi_gpu"
    step env TUTTI_CUDA_DIRECT=2 "$B/tutti-run" -n 2 --timeout 200 "$B/tutti-perf" -G \
        -b 16 -e 256M -f 4 -n 20 -w 5 -c 1
    step env TUTTI_CUDA_DIRECT=2 NCCL_ALGO=Ring "$B/tutti-run" -n 2 --timeout 120 \
        "$B/tutti-perf" -G -b 1M -e 256M -f 16 -n 10 -w 3 -c 1
fi
if [ "$phase" = rooted ]; then
    # The device-direct rooted collectives and AlltoAll (with everything else gpu_direct checks),
    # then their speed on the device-direct path against the staged one, 2 ranks on one GPU.
    for n in 2 3 4; do
        step env TUTTI_CUDA_DIRECT=2 TUTTI_CUDA_DIRECT_BYTES=65536 \
            "$B/tutti-run" -n $n --timeout 150 "$B/gpu_direct"
    done
    step "$B/tutti-run" -n 3 --timeout 100 "$B/abi_gpu"
    for coll in broadcast reduce gather scatter alltoall sendrecv; do
        step env TUTTI_CUDA_DIRECT=2 "$B/tutti-run" -n 2 --timeout 120 "$B/tutti-perf" -G \
            -t $coll -b 1M -e 256M -f 16 -n 10 -w 3 -c 1
        step env TUTTI_CUDA_DIRECT=0 "$B/tutti-run" -n 2 --timeout 120 "$B/tutti-perf" -G \
            -t $coll -b 1M -e 16M -f 16 -n 5 -w 2 -c 1
    done
fi
if [ "$phase" = mps ] || [ "$phase" = winmps ]; then
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/tutti-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/tutti-mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
fi
if [ "$phase" = winmps ]; then
    # The window AllReduce with CUDA MPS: both ranks' kernels run at once.
    if command -v nvidia-cuda-mps-control >/dev/null && nvidia-cuda-mps-control -d; then
        step env TUTTI_CUDA_DIRECT=2 "$B/tutti-run" -n 2 --timeout 200 "$B/tutti-perf" -G -R 2 \
            -b 16 -e 256M -f 4 -n 20 -w 5 -c 1
        step env TUTTI_CUDA_DIRECT=2 TUTTI_CUDA_WINDOW_FOLD=2 "$B/tutti-run" -n 2 --timeout 200 \
            "$B/tutti-perf" -G -R 2 -b 1M -e 256M -f 16 -n 20 -w 5 -c 1
        step env TUTTI_CUDA_DIRECT=2 "$B/tutti-run" -n 3 --timeout 150 "$B/gpu_direct" --windows
        echo quit | nvidia-cuda-mps-control
    else
        echo "=== SKIPPED: no CUDA MPS control daemon (nvidia-cuda-mps-control)"
    fi
fi
if [ "$phase" = mps ]; then
    # The device-direct AllReduce again with CUDA MPS running, so the ranks' kernels and stream
    # waits share the GPU at once instead of in time slices (docs/cuda.md, "Sharing one GPU").
    if command -v nvidia-cuda-mps-control >/dev/null && nvidia-cuda-mps-control -d; then
        step env TUTTI_CUDA_DIRECT=2 "$B/tutti-run" -n 2 --timeout 200 "$B/tutti-perf" -G \
            -b 16 -e 256M -f 4 -n 20 -w 5 -c 1
        step env TUTTI_CUDA_DIRECT=2 TUTTI_CUDA_DIRECT_BYTES=268435456 "$B/tutti-run" -n 2 \
            --timeout 200 "$B/tutti-perf" -G -b 64M -e 256M -f 2 -n 20 -w 5 -c 1
        step "$B/tutti-run" -n 4 --timeout 300 "$B/gpu_matrix"
        echo quit | nvidia-cuda-mps-control
    else
        echo "=== SKIPPED: no CUDA MPS control daemon (nvidia-cuda-mps-control)"
    fi
fi
echo
echo "=== done: status $status"
exit $status
