#!/bin/sh
# Fails when a library given names a CUDA or NCCL library among its dependencies (its DT_NEEDED
# entries, and what ldd resolves): Tutti opens the CUDA driver at run time only (docs/cuda.md).
# Usage: check_no_cuda_link.sh LIB...
set -eu
status=0
for lib in "$@"; do
    needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    echo "$lib needs: $(echo $needed)"
    if echo "$needed" | grep -Eiq 'cuda|cudart|nvidia|libnccl'; then
        echo "FAIL: $lib links a CUDA library" >&2
        status=1
    fi
    if ldd "$lib" | grep -Eiq 'libcuda|libcudart|libnvidia'; then
        echo "FAIL: ldd $lib resolves a CUDA library:" >&2
        ldd "$lib" >&2
        status=1
    fi
done
[ $status -eq 0 ] && echo "OK: no CUDA dependency"
exit $status
