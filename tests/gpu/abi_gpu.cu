/* Drop-in on the GPU (docs/cuda.md): a program written for NVIDIA's NCCL, compiled against the
 * CUDA toolkit's own nccl.h and linked with -lnccl against Tutti's lib/nccl-compat/libnccl.so.2,
 * with device buffers on a CUDA stream and every rank on GPU 0 (each calls cudaSetDevice(0), as
 * NCCL's users do with one GPU per rank). It uses nothing but NVIDIA's header and the CUDA
 * runtime: AllReduce (float sum, int32 max), Broadcast, AllGather, ReduceScatter and a ring of
 * Send/Recv in a group, each checked exactly on the host against values computed here.
 *
 * Run every rank under tutti-run (NCCL_COMM_ID set: ncclGetUniqueId gives the same id on every
 * rank). Exits 77 without a usable GPU, 1 on any wrong element or error. */
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

static int rank, nranks, failures;

#define CUDA_OK(call)                                                                     \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            fprintf(stderr, "rank %d: %s: %s\n", rank, #call, cudaGetErrorString(e_));    \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

#define NCCL_OK(call)                                                                     \
    do {                                                                                  \
        ncclResult_t r_ = (call);                                                         \
        if (r_ != ncclSuccess) {                                                          \
            fprintf(stderr, "rank %d: %s: %s (%s)\n", rank, #call, ncclGetErrorString(r_), \
                    ncclGetLastError(NULL));                                              \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* Copies host -> device on `s` and waits (the collective queued next on `s` sees it). */
template <typename T>
static T *device_copy(const std::vector<T> &host, cudaStream_t s)
{
    T *d = NULL;
    CUDA_OK(cudaMalloc(&d, host.size() * sizeof(T)));
    CUDA_OK(cudaMemcpyAsync(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, s));
    CUDA_OK(cudaStreamSynchronize(s));
    return d;
}

template <typename T>
static void expect(const char *what, const T *dev, const std::vector<T> &want, cudaStream_t s)
{
    std::vector<T> got(want.size());
    CUDA_OK(cudaMemcpyAsync(got.data(), dev, want.size() * sizeof(T), cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    size_t bad = 0;
    for (size_t i = 0; i < want.size(); i++) bad += got[i] != want[i];
    if (bad != 0) failures++;
    printf("rank %d: %s %s (%zu of %zu elements wrong)\n", rank, bad ? "FAIL" : "PASS", what, bad,
           want.size());
}

int main(void)
{
    const char *r = getenv("RANK"), *n = getenv("WORLD_SIZE");
    if (r == NULL || n == NULL || getenv("NCCL_COMM_ID") == NULL) {
        fprintf(stderr, "abi_gpu: run me under tutti-run (RANK, WORLD_SIZE, NCCL_COMM_ID)\n");
        return 2;
    }
    rank = atoi(r);
    nranks = atoi(n);
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP: no usable CUDA device\n");
        return 77;
    }
    CUDA_OK(cudaSetDevice(0));
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    ncclUniqueId id;
    ncclComm_t comm;
    NCCL_OK(ncclGetUniqueId(&id));
    NCCL_OK(ncclCommInitRank(&comm, nranks, id, rank));
    int dev = -1;
    NCCL_OK(ncclCommCuDevice(comm, &dev));
    if (dev != 0) {
        printf("rank %d: FAIL ncclCommCuDevice gave %d, not 0\n", rank, dev);
        failures++;
    }

    const size_t count = 1 << 20; /* 4 MiB of float: several chunks on every path */
    /* Element i of rank q: small integers, so every float sum is exact. */
    std::vector<float> in(count), sum(count);
    for (size_t i = 0; i < count; i++) {
        in[i] = (float)((i % 1024) + 1000 * rank);
        float t = 0;
        for (int q = 0; q < nranks; q++) t += (float)((i % 1024) + 1000 * q);
        sum[i] = t;
    }
    float *d_in = device_copy(in, s), *d_out = device_copy(std::vector<float>(count, -1.0f), s);
    NCCL_OK(ncclAllReduce(d_in, d_out, count, ncclFloat, ncclSum, comm, s));
    expect("AllReduce float32 sum, out of place", d_out, sum, s);
    NCCL_OK(ncclAllReduce(d_in, d_in, count, ncclFloat, ncclSum, comm, s));
    expect("AllReduce float32 sum, in place", d_in, sum, s);

    std::vector<int32_t> mine(4096), top(4096);
    for (size_t i = 0; i < mine.size(); i++) {
        mine[i] = (int32_t)((i * 7 + rank * 13) % 101) - 50;
        int32_t m = INT32_MIN;
        for (int q = 0; q < nranks; q++) {
            int32_t v = (int32_t)((i * 7 + q * 13) % 101) - 50;
            if (v > m) m = v;
        }
        top[i] = m;
    }
    int32_t *d_mine = device_copy(mine, s);
    NCCL_OK(ncclAllReduce(d_mine, d_mine, mine.size(), ncclInt32, ncclMax, comm, s));
    expect("AllReduce int32 max, in place", d_mine, top, s);

    /* Broadcast from the last rank. */
    const int root = nranks - 1;
    std::vector<float> from_root(count);
    for (size_t i = 0; i < count; i++) from_root[i] = (float)((i % 1024) + 1000 * root);
    float *d_b = device_copy(rank == root ? from_root : std::vector<float>(count, 0.0f), s);
    NCCL_OK(ncclBroadcast(d_b, d_b, count, ncclFloat, root, comm, s));
    expect("Broadcast from the last rank", d_b, from_root, s);

    /* AllGather of `per` elements per rank, then ReduceScatter of the sums back. */
    const size_t per = 65536 + 3;
    std::vector<float> part(per), all(per * nranks), back(per);
    for (size_t i = 0; i < per; i++) part[i] = (float)(i % 512 + 1000 * rank);
    for (int q = 0; q < nranks; q++)
        for (size_t i = 0; i < per; i++) all[q * per + i] = (float)(i % 512 + 1000 * q);
    float *d_part = device_copy(part, s), *d_all = device_copy(std::vector<float>(per * nranks), s);
    NCCL_OK(ncclAllGather(d_part, d_all, per, ncclFloat, comm, s));
    expect("AllGather", d_all, all, s);
    /* Every rank contributes `all`: block `rank` of the sum is nranks x that block. */
    for (size_t i = 0; i < per; i++) back[i] = (float)nranks * all[rank * per + i];
    NCCL_OK(ncclReduceScatter(d_all, d_part, per, ncclFloat, ncclSum, comm, s));
    expect("ReduceScatter", d_part, back, s);

    /* A ring of Send/Recv in one group: each rank gets its left neighbour's `in`. */
    const int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
    std::vector<float> from_left(count);
    for (size_t i = 0; i < count; i++) from_left[i] = (float)((i % 1024) + 1000 * left);
    float *d_send = device_copy(in, s), *d_recv = device_copy(std::vector<float>(count), s);
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclSend(d_send, count, ncclFloat, right, comm, s));
    NCCL_OK(ncclRecv(d_recv, count, ncclFloat, left, comm, s));
    NCCL_OK(ncclGroupEnd());
    expect("Send/Recv ring in a group", d_recv, from_left, s);

    ncclResult_t async = ncclSuccess;
    NCCL_OK(ncclCommGetAsyncError(comm, &async));
    if (async != ncclSuccess) {
        printf("rank %d: FAIL asynchronous error %s\n", rank, ncclGetErrorString(async));
        failures++;
    }
    NCCL_OK(ncclCommFinalize(comm));
    NCCL_OK(ncclCommDestroy(comm));
    float *bufs[] = {d_in, d_out, d_b, d_part, d_all, d_send, d_recv};
    for (float *p : bufs) CUDA_OK(cudaFree(p));
    CUDA_OK(cudaFree(d_mine));
    CUDA_OK(cudaStreamDestroy(s));
    printf("rank %d: abi_gpu %s (%d failures)\n", rank, failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
