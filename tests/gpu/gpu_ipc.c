/* Device peer memory (tt_device_ipc_export/open/close, CUDA IPC) between the ranks of a
 * tutti-run job sharing GPU 0: each rank fills a device buffer with its own pattern, exports a
 * pointer 4 KiB into it, the handles are allgathered, and each rank maps every peer's memory,
 * copies it out and checks the peer's pattern byte for byte. Exits 77 without a usable GPU. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "nccl.h"
#include "tutti.h"

#define BYTES (1u << 20)
#define OFFSET 4096u

static void die_cuda(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return;
    fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(e));
    exit(1);
}

static void die_nccl(ncclResult_t r, const char *what)
{
    if (r == ncclSuccess) return;
    fprintf(stderr, "%s failed: %s: %s\n", what, ncclGetErrorString(r), ncclGetLastError(NULL));
    exit(1);
}

static unsigned char pattern(int rank, size_t i)
{
    return (unsigned char)(i * 131u + (unsigned)rank * 7u + 1u);
}

int main(void)
{
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP: no usable CUDA device (%s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    die_cuda(cudaSetDevice(0), "cudaSetDevice");
    ncclComm_t comm;
    int rank, nranks;
    die_nccl(tuttiCommInitFromEnv(&comm), "tuttiCommInitFromEnv");
    die_nccl(ncclCommUserRank(comm, &rank), "ncclCommUserRank");
    die_nccl(ncclCommCount(comm, &nranks), "ncclCommCount");

    unsigned char *host = malloc(BYTES), *dev;
    for (size_t i = 0; i < BYTES; i++) host[i] = pattern(rank, i);
    die_cuda(cudaMalloc((void **)&dev, BYTES + OFFSET), "cudaMalloc");
    die_cuda(cudaMemcpy(dev + OFFSET, host, BYTES, cudaMemcpyHostToDevice), "cudaMemcpy");

    struct tt_device_ipc_handle mine, *all = calloc((size_t)nranks, sizeof *all);
    die_nccl(tt_device_ipc_export(dev + OFFSET, &mine), "tt_device_ipc_export");
    if (mine.offset != OFFSET) {
        fprintf(stderr, "rank %d: export offset %llu, want %u\n", rank,
                (unsigned long long)mine.offset, OFFSET);
        return 1;
    }
    die_nccl(ncclAllGather(&mine, all, sizeof mine, ncclUint8, comm, NULL), "ncclAllGather");

    int failures = 0;
    for (int peer = 0; peer < nranks; peer++) {
        if (peer == rank) continue;
        void *remote;
        die_nccl(tt_device_ipc_open(&all[peer], &remote), "tt_device_ipc_open");
        die_cuda(cudaMemcpy(host, remote, BYTES, cudaMemcpyDeviceToHost), "cudaMemcpy peer");
        for (size_t i = 0; i < BYTES; i++) {
            if (host[i] != pattern(peer, i)) {
                fprintf(stderr, "rank %d: peer %d byte %zu: got %u, want %u\n", rank, peer, i,
                        host[i], pattern(peer, i));
                failures++;
                break;
            }
        }
        die_nccl(tt_device_ipc_close(remote, &all[peer]), "tt_device_ipc_close");
    }
    /* Every rank keeps its buffer until all peers closed their mappings. */
    int total = failures;
    die_nccl(ncclAllReduce(&total, &total, 1, ncclInt32, ncclSum, comm, NULL), "ncclAllReduce");
    die_cuda(cudaFree(dev), "cudaFree");
    die_nccl(ncclCommDestroy(comm), "ncclCommDestroy");
    if (rank == 0) printf("gpu_ipc: %d ranks on one GPU: %d failures\n", nranks, total);
    free(host);
    free(all);
    return total == 0 ? 0 : 1;
}
