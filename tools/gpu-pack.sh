#!/bin/sh
# Packs what tests/gpu/run_on_device.sh needs from a CUDA build into one small folder that the
# device tool can carry to a lent GPU machine (it copies the working tree plus at most 8 ignored
# paths, 64 MiB in all; build/cuda is about 67 MiB with its objects and CMake files, and the GPU
# machine may lack cmake, ninja and libsodium). docs/cuda.md, "Testing on a GPU".
#
#   tools/gpu-pack.sh [BUILD_DIR [OUT_DIR]]     default build/cuda -> build/gpu-pack
#
# The pack holds, stripped: libtutti.so (with its SONAME links), lib/nccl-compat/libnccl.so.2,
# tutti-info, tutti-run, tutti-perf, the GPU test programs (unit_cuda_elementwise, gpu_reduce,
# gpu_ipc, gpu_matrix, gpu_direct, abi_gpu, gpu_fold) and the libsodium the library was linked with (the GPU
# machine may not have it). The programs find the libraries through LD_LIBRARY_PATH, which
# run_on_device.sh sets. Fails when something is missing (build the cuda preset first) or the
# pack exceeds 60 MiB.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$root/build/cuda}
out=${2:-$root/build/gpu-pack}
limit=$((60 * 1024 * 1024))

for f in libtutti.so lib/nccl-compat/libnccl.so.2 tutti-info tutti-run tutti-perf \
    unit_cuda_elementwise gpu_reduce gpu_ipc gpu_matrix gpu_direct abi_gpu gpu_fold; do
    if [ ! -e "$B/$f" ]; then
        echo "gpu-pack: $B/$f is missing: run 'cmake --preset cuda && cmake --build --preset cuda'" >&2
        exit 1
    fi
done

rm -rf "$out"
mkdir -p "$out/lib/nccl-compat"
# The library: its real file and the links to it (libtutti.so -> .so.0 -> .so.0.1.0).
cp -P "$B"/libtutti.so* "$out/"
cp -P "$B"/lib/nccl-compat/libnccl.so* "$out/lib/nccl-compat/"
for f in tutti-info tutti-run tutti-perf unit_cuda_elementwise gpu_reduce gpu_ipc gpu_matrix \
    gpu_direct abi_gpu gpu_fold; do
    cp "$B/$f" "$out/$f"
done
# libsodium as the build found it, under its SONAME.
sodium=$(ldd "$B/libtutti.so" | awk '/libsodium/ { print $3; exit }')
if [ -n "$sodium" ]; then
    cp -L "$sodium" "$out/$(basename "$sodium")"
fi
find "$out" -type f | while read -r f; do
    if head -c 4 "$f" | grep -q 'ELF'; then
        strip --strip-unneeded "$f"
    fi
done
# What the pack was built from, for the report of the run.
git -C "$root" log -1 --format='commit %H %s' >"$out/PACK_INFO" 2>/dev/null || true
echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) from $B on $(uname -n)" >>"$out/PACK_INFO"

bytes=$(du -sb "$out" | cut -f1)
echo "gpu-pack: $out: $((bytes / 1024)) KiB"
if [ "$bytes" -gt "$limit" ]; then
    echo "gpu-pack: over the 60 MiB the device tool carries" >&2
    exit 1
fi
