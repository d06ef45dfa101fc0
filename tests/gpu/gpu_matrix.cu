/* The correctness matrix on CUDA device buffers (label cuda). Every rank of a tutti-run job
 * runs every collective x dtype x op, in place and out of place, on cudaMalloc'd buffers and a
 * CUDA stream; the results are compared with the harness's exact reference by a kernel, on the
 * device, after a cudaStreamSynchronize (which must be enough: completion is stream-ordered).
 * --mixed makes the odd ranks CPU ranks (host buffers, stream NULL) in the same communicator.
 * Without a usable GPU every rank exits 77 (skipped), the same way on every rank. */
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

extern "C" {
#include "harness.h"
#include "nccl.h"
#include "tutti.h"
}

#define CHECK_CUDA(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "rank %d: %s failed: %s (%s:%d)\n", g_rank, #call,                   \
                    cudaGetErrorString(e_), __FILE__, __LINE__);                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define CHECK_NCCL(call)                                                                           \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "rank %d: %s failed: %s: %s (%s:%d)\n", g_rank, #call,               \
                    ncclGetErrorString(r_), ncclGetLastError(NULL), __FILE__, __LINE__);          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static int g_rank = -1;

/* Counts the bytes where a and b differ: the comparison runs on the device. */
__global__ void count_mismatches(const unsigned char *a, const unsigned char *b, size_t bytes,
                                 unsigned long long *out)
{
    unsigned long long mine = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < bytes;
         i += (size_t)gridDim.x * blockDim.x)
        mine += a[i] != b[i];
    if (mine != 0) atomicAdd(out, mine);
}

struct ctx {
    ncclComm_t comm;
    int rank, nranks;
    bool gpu; /* this rank uses device buffers and a CUDA stream */
    cudaStream_t stream;
    unsigned long long *d_count;
    long long cases, failures;
};

/* Buffers of either kind: device ones are filled and read through host images. */
static void *buf_alloc(const struct ctx *x, size_t bytes)
{
    void *p = NULL;
    if (bytes == 0) bytes = 1;
    if (x->gpu) CHECK_CUDA(cudaMalloc(&p, bytes));
    else if ((p = malloc(bytes)) == NULL) exit(1);
    return p;
}

static void buf_free(const struct ctx *x, void *p)
{
    if (x->gpu) CHECK_CUDA(cudaFree(p));
    else free(p);
}

/* A device buffer is filled on the rank's own stream, so the collective queued behind it sees
 * the bytes. A plain cudaMemcpy would not do: from pageable memory it may return before its DMA
 * ends, and that copy runs on the legacy default stream, which a non-blocking stream does not
 * wait for (on an H100 with two processes sharing the GPU, a third of the cases read stale
 * bytes that way). */
static void buf_put(const struct ctx *x, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0) return;
    if (x->gpu) {
        CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, x->stream));
        CHECK_CUDA(cudaStreamSynchronize(x->stream)); /* `src` is pageable and goes away */
    } else {
        memcpy(dst, src, bytes);
    }
}

/* Bytes where `got` (a buffer of this rank's kind) differs from the host image `want`. */
static unsigned long long mismatches(struct ctx *x, const void *got, const void *want,
                                     size_t bytes)
{
    if (bytes == 0) return 0;
    if (!x->gpu) {
        unsigned long long n = 0;
        for (size_t i = 0; i < bytes; i++)
            n += ((const unsigned char *)got)[i] != ((const unsigned char *)want)[i];
        return n;
    }
    void *d_want;
    CHECK_CUDA(cudaMalloc(&d_want, bytes));
    CHECK_CUDA(cudaMemcpy(d_want, want, bytes, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(x->d_count, 0, sizeof *x->d_count));
    count_mismatches<<<256, 256>>>((const unsigned char *)got, (const unsigned char *)d_want,
                                   bytes, x->d_count);
    CHECK_CUDA(cudaGetLastError());
    unsigned long long n = 0;
    CHECK_CUDA(cudaMemcpy(&n, x->d_count, sizeof n, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaFree(d_want));
    return n;
}

static ncclResult_t call(const struct ctx *x, const th_case *c, const void *s, void *r)
{
    ncclDataType_t dt = c->type->dtype;
    cudaStream_t st = x->gpu ? x->stream : NULL;
    switch (c->coll) {
    case TH_ALLREDUCE: return ncclAllReduce(s, r, c->count, dt, c->op, x->comm, st);
    case TH_BROADCAST: return ncclBroadcast(s, r, c->count, dt, c->root, x->comm, st);
    case TH_REDUCE: return ncclReduce(s, r, c->count, dt, c->op, c->root, x->comm, st);
    case TH_ALLGATHER: return ncclAllGather(s, r, c->count, dt, x->comm, st);
    case TH_REDUCESCATTER: return ncclReduceScatter(s, r, c->count, dt, c->op, x->comm, st);
    case TH_ALLTOALL: return ncclAlltoAll(s, r, c->count, dt, x->comm, st);
    case TH_GATHER: return ncclGather(s, r, c->count, dt, c->root, x->comm, st);
    case TH_SCATTER: return ncclScatter(s, r, c->count, dt, c->root, x->comm, st);
    case TH_SENDRECV: {
        int n = x->nranks;
        ncclGroupStart();
        ncclResult_t a = ncclSend(s, c->count, dt, (x->rank + 1) % n, x->comm, st);
        ncclResult_t b = ncclRecv(r, c->count, dt, (x->rank + n - 1) % n, x->comm, st);
        ncclResult_t e = ncclGroupEnd();
        return a != ncclSuccess ? a : b != ncclSuccess ? b : e;
    }
    default: return ncclInvalidArgument;
    }
}

static bool has_inplace(enum th_coll coll)
{
    return coll != TH_ALLTOALL && coll != TH_SENDRECV;
}

static void run_case(struct ctx *x, const th_case *c, bool inplace)
{
    size_t elt = c->type->bytes, send_n = th_send_count(c), recv_n = th_recv_count(c);
    size_t body_n = send_n > recv_n ? send_n : recv_n;
    std::vector<unsigned char> send_img(send_n * elt + 1), want(recv_n * elt + 1),
        before(body_n * elt + 1);
    th_fill_send(c, send_img.data());
    unsigned long long bad = 0;
    const char *what = "recvbuff";
    if (inplace) {
        size_t off = th_inplace_offset(c) * elt;
        unsigned char *buf = (unsigned char *)buf_alloc(x, body_n * elt);
        th_fill_pattern(before.data(), body_n * elt, (uint32_t)c->seed + 2);
        bool send_inside = c->coll == TH_ALLGATHER || c->coll == TH_GATHER;
        unsigned char *s = send_inside ? buf + off : buf;
        unsigned char *r = send_inside ? buf : buf + off;
        memcpy(before.data() + (s - buf), send_img.data(), send_n * elt);
        buf_put(x, buf, before.data(), body_n * elt);
        CHECK_NCCL(call(x, c, s, r));
        if (x->gpu) CHECK_CUDA(cudaStreamSynchronize(x->stream));
        if (!th_fill_expect(c, want.data(), 0, recv_n))
            memcpy(want.data(), before.data() + (r - buf), recv_n * elt);
        bad = mismatches(x, r, want.data(), recv_n * elt);
        buf_free(x, buf);
    } else {
        void *s = buf_alloc(x, send_n * elt), *r = buf_alloc(x, recv_n * elt);
        buf_put(x, s, send_img.data(), send_n * elt);
        th_fill_pattern(before.data(), recv_n * elt, (uint32_t)c->seed + 5);
        buf_put(x, r, before.data(), recv_n * elt);
        CHECK_NCCL(call(x, c, s, r));
        if (x->gpu) CHECK_CUDA(cudaStreamSynchronize(x->stream));
        if (!th_fill_expect(c, want.data(), 0, recv_n))
            memcpy(want.data(), before.data(), recv_n * elt);
        bad = mismatches(x, r, want.data(), recv_n * elt);
        unsigned long long sbad = mismatches(x, s, send_img.data(), send_n * elt);
        if (sbad != 0) {
            bad += sbad;
            what = "sendbuff (must be unchanged)";
        }
        buf_free(x, s);
        buf_free(x, r);
    }
    x->cases++;
    if (bad != 0) {
        x->failures++;
        fprintf(stderr, "rank %d (%s): FAIL %s %s %s count %zu root %d %s: %llu bytes of %s "
                        "differ\n", x->rank, x->gpu ? "GPU" : "CPU", th_coll_name(c->coll),
                c->type->name, th_op_name(c->op), c->count, c->root,
                inplace ? "in place" : "out of place", bad, what);
    }
}

int main(int argc, char **argv)
{
    bool mixed = argc > 1 && strcmp(argv[1], "--mixed") == 0;
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP: no usable CUDA device (%s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    struct ctx x = {};
    CHECK_NCCL(tuttiCommInitFromEnv(&x.comm));
    CHECK_NCCL(ncclCommUserRank(x.comm, &x.rank));
    CHECK_NCCL(ncclCommCount(x.comm, &x.nranks));
    g_rank = x.rank;
    x.gpu = !mixed || x.rank % 2 == 0;
    if (x.gpu) {
        /* Several ranks share device 0, which NVIDIA's NCCL refuses. */
        CHECK_CUDA(cudaSetDevice(0));
        CHECK_CUDA(cudaStreamCreateWithFlags(&x.stream, cudaStreamNonBlocking));
        CHECK_CUDA(cudaMalloc(&x.d_count, sizeof *x.d_count));
        int dev = -2;
        CHECK_NCCL(ncclCommCuDevice(x.comm, &dev));
        (void)dev; /* the communicator was made before cudaSetDevice: -1 or 0 */
    }
    static const size_t counts[] = {1, 1031, 262147};
    for (int coll = 0; coll < TH_NUM_ALL_COLLS; coll++) {
        for (int t = 0; t < TH_NUM_DTYPES; t++) {
            int nops = th_coll_has_op((enum th_coll)coll) ? TH_NUM_OPS : 1;
            for (int op = 0; op < nops; op++) {
                for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
                    th_case c = {};
                    c.coll = (enum th_coll)coll;
                    c.type = &th_dtypes[t];
                    c.op = (ncclRedOp_t)op;
                    c.count = counts[k];
                    c.root = th_coll_has_root(c.coll) ? (int)(k % x.nranks) : 0;
                    c.rank = x.rank;
                    c.nranks = x.nranks;
                    c.seed = 1000003u * (uint64_t)coll + 1009u * t + 31u * op + k;
                    run_case(&x, &c, false);
                    if (has_inplace(c.coll)) run_case(&x, &c, true);
                }
            }
        }
    }
    /* Every rank learns whether any failed (host buffers, stream NULL: blocking). */
    long long totals[2] = {x.cases, x.failures};
    CHECK_NCCL(ncclAllReduce(totals, totals, 2, ncclInt64, ncclSum, x.comm, NULL));
    if (x.rank == 0)
        printf("gpu_matrix: %d ranks%s: %lld cases, %lld failed\n", x.nranks,
               mixed ? " (odd ranks on the CPU)" : "", totals[0], totals[1]);
    CHECK_NCCL(ncclCommDestroy(x.comm));
    return totals[1] == 0 ? 0 : 1;
}
