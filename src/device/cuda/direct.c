/* The device-direct path (device/device.h, "The device-direct path"): collectives among the GPU
 * ranks of one host, queued on the caller's CUDA stream and run by the GPU alone. The AllReduce
 * is described here; the others (below) use the same chunks and flags.
 *
 * Each member owns one device allocation: a scratch of `bytes` and, behind it, three flag words
 * (READY, REDUCED, DONE), each on its own 128-byte line. Peers map it through a CUDA IPC handle
 * at init. A flag holds the sequence number of the last chunk its owner reached at that stage;
 * the owner writes it with cuStreamWriteValue32 (a fenced write: what the stream wrote before is
 * visible first) and peers wait for it with cuStreamWaitValue32 (GEQ, a wrapping compare). The
 * waits are stream memory operations executed by the GPU's front end, not spinning kernels, so
 * several processes time-sliced on one GPU cannot starve each other, and the calling thread
 * never blocks.
 *
 * One chunk (at most `bytes` of the operation), as every member queues it:
 *   wait DONE(p) >= seq - 1 for every peer   nobody still reads my scratch for the last chunk
 *   copy send -> my scratch; post READY = seq; wait READY(p) >= seq for every peer
 *   one-shot: recv = x_0 OP x_1 OP ... x_{n-1}, reading every member's scratch in place
 *   two-shot: my segment only, into recv; copied to my scratch's segment; post REDUCED = seq;
 *             wait REDUCED(p) >= seq; copy every peer's segment from its scratch into recv
 *   post DONE = seq
 * Every member reduces in rank order, so all get the same bits. The reductions are the kernels
 * of reduce.cu (tt_device_reduce), binary, chained: n - 1 launches for n members. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device/device.h"

#include "device/cuda/driver.h"
#include "device/cuda/sym.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

enum { FLAG_READY, FLAG_REDUCED, FLAG_DONE, FLAG_COUNT };
#define FLAG_STRIDE 128
/* Behind the collectives' flags, the point-to-point ones: SENT(q), the chunks this member put
 * in its slot for member q, then ACK(q), the chunks it took out of q's slot for it. */
#define FLAG_SENT(q) (FLAG_COUNT + (q))
#define FLAG_ACK(q) (FLAG_COUNT + TT_DEVICE_TEAM_MAX + (q))
#define FLAGS_BYTES ((FLAG_COUNT + 2 * TT_DEVICE_TEAM_MAX) * FLAG_STRIDE)
/* Two-shot segments start on this many bytes (the kernels' loads stay aligned). */
#define SEGMENT_ALIGN 256
/* How long destroy waits for the peers to finish reading this member's scratch. */
#define DESTROY_WAIT_NS 10000000000ull

struct tt_device_team {
    int rank, nranks;
    CUdevice dev;
    CUcontext ctx;      /* the context the scratch lives in (current at create) */
    bool retained;      /* ctx is the device's primary context, retained by create */
    CUstream poll;      /* a non-blocking stream of its own: destroy reads flags on it, never
                           queued behind a user stream that may wait forever */
    CUdeviceptr mine;   /* this member's allocation: scratch, point-to-point slots, flags */
    size_t bytes;       /* scratch bytes; as many again for the point-to-point slots */
    CUdeviceptr base[TT_DEVICE_TEAM_MAX]; /* every member's allocation, in this process */
    bool mapped[TT_DEVICE_TEAM_MAX];      /* base[p] was opened from an IPC handle */
    struct tt_device_ipc_handle handles[TT_DEVICE_TEAM_MAX];
    uint64_t chunks;    /* chunks queued so far; the flags carry its low 32 bits */
    uint64_t sent[TT_DEVICE_TEAM_MAX];     /* point-to-point chunks queued to each member */
    uint64_t received[TT_DEVICE_TEAM_MAX]; /* and from each member */
    bool one_gpu;       /* every member on the same physical GPU (PCI address) */
};

/* The PCI address of `dev` as one word, TT_DEVICE_PCI_UNKNOWN when the driver does not say. */
static uint32_t pci_of(CUdevice dev)
{
    int domain = 0, bus = 0, device = 0;
    if (tt_cu.cuDeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev) !=
            CUDA_SUCCESS ||
        tt_cu.cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev) != CUDA_SUCCESS ||
        tt_cu.cuDeviceGetAttribute(&device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev) !=
            CUDA_SUCCESS)
        return TT_DEVICE_PCI_UNKNOWN;
    return (uint32_t)(domain & 0xffff) << 16 | (uint32_t)(bus & 0xff) << 8 |
           (uint32_t)(device & 0xff);
}

static size_t dtype_bytes(ncclDataType_t dtype)
{
    switch (dtype) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

ncclResult_t tt_device_team_create(int device, size_t bytes, struct tt_device_team **out,
                                   struct tt_device_team_info *info)
{
    *out = NULL;
    memset(info, 0, sizeof *info);
    if (!tt_device_active())
        return TT_ERROR(ncclInvalidUsage, "the device-direct path without CUDA: %s",
                        tt_cuda_why_not());
    struct tt_device_team *t = calloc(1, sizeof *t);
    if (t == NULL) return TT_ERROR(ncclSystemError, "out of memory for the device team");
    t->bytes = (bytes + SEGMENT_ALIGN - 1) & ~(size_t)(SEGMENT_ALIGN - 1);
    ncclResult_t res = TT_CU(tt_cu.cuDeviceGet(&t->dev, device));
    CUcontext cur = NULL;
    if (res == ncclSuccess) res = TT_CU(tt_cu.cuCtxGetCurrent(&cur));
    if (res == ncclSuccess && cur == NULL) {
        /* A background init thread: the device's primary context, as the runtime uses. */
        res = TT_CU(tt_cu.cuDevicePrimaryCtxRetain(&cur, t->dev));
        t->retained = res == ncclSuccess;
        if (res == ncclSuccess) res = TT_CU(tt_cu.cuCtxSetCurrent(cur));
    }
    t->ctx = cur;
    if (res == ncclSuccess) res = TT_CU(tt_cu.cuStreamCreate(&t->poll, CU_STREAM_NON_BLOCKING));
    if (res == ncclSuccess)
        res = TT_CU(tt_cu.cuMemAlloc(&t->mine, 2 * t->bytes + FLAGS_BYTES));
    if (res == ncclSuccess)
        res = TT_CU(tt_cu.cuMemsetD32(t->mine + 2 * t->bytes, 0,
                                      FLAGS_BYTES / sizeof(uint32_t)));
    if (res == ncclSuccess)
        res = tt_device_ipc_export((const void *)(uintptr_t)t->mine, &info->handle);
    if (res != ncclSuccess) {
        tt_device_team_destroy(t);
        memset(info, 0, sizeof *info);
        return res;
    }
    t->base[0] = t->mine; /* until attach knows the rank */
    info->ok = 1;
    info->device = device;
    info->pid = (int32_t)getpid();
    info->pci = pci_of(t->dev);
    info->bytes = t->bytes;
    *out = t;
    return ncclSuccess;
}

ncclResult_t tt_device_team_attach(struct tt_device_team *t, int rank, int nranks,
                                   const struct tt_device_team_info *infos)
{
    if (nranks < 2 || nranks > TT_DEVICE_TEAM_MAX || rank < 0 || rank >= nranks)
        return TT_ERROR(ncclInvalidUsage, "device-direct path: %d members (2 to %d supported)",
                        nranks, TT_DEVICE_TEAM_MAX);
    t->rank = rank;
    t->nranks = nranks;
    t->base[0] = 0;
    t->one_gpu = true;
    for (int p = 0; p < nranks; p++)
        t->one_gpu = t->one_gpu && infos[p].pci != TT_DEVICE_PCI_UNKNOWN &&
                     infos[p].pci == infos[0].pci;
    for (int p = 0; p < nranks; p++) {
        if (p == rank) {
            t->base[p] = t->mine;
            continue;
        }
        if (!infos[p].ok || infos[p].bytes != t->bytes)
            return TT_ERROR(ncclInternalError,
                            "device-direct path: member %d offers %llu scratch bytes, this one "
                            "%zu", p, (unsigned long long)infos[p].bytes, t->bytes);
        if (infos[p].pid == (int32_t)getpid())
            return TT_ERROR(ncclInvalidUsage,
                            "device-direct path: member %d lives in this process (CUDA IPC "
                            "handles open only in other processes)", p);
        void *ptr = NULL;
        TT_TRY(tt_device_ipc_open(&infos[p].handle, &ptr));
        t->base[p] = (CUdeviceptr)(uintptr_t)ptr;
        t->handles[p] = infos[p].handle;
        t->mapped[p] = true;
    }
    return ncclSuccess;
}

static CUdeviceptr flag_at(const struct tt_device_team *t, int member, int which)
{
    return t->base[member] + 2 * t->bytes + (size_t)which * FLAG_STRIDE;
}

/* Reads member p's flag `which` on the team's own stream into *v; false when that failed. */
static bool read_flag(const struct tt_device_team *t, int p, int which, uint32_t *v)
{
    return tt_cu.cuMemcpyDtoHAsync(v, flag_at(t, p, which), sizeof *v, t->poll) ==
               CUDA_SUCCESS &&
           tt_cu.cuStreamSynchronize(t->poll) == CUDA_SUCCESS;
}

/* Whether every member's DONE, this one's included, reached the last chunk queued, and every
 * member took every point-to-point chunk this one put in its slots (ACK): then no queued work
 * touches this member's memory any more. */
static bool all_done(const struct tt_device_team *t)
{
    for (int p = 0; p < t->nranks; p++) {
        if (t->base[p] == 0) continue;
        uint32_t v = 0;
        if (!read_flag(t, p, FLAG_DONE, &v))
            return p != t->rank; /* a peer's memory gone: nobody reads ours through it */
        if ((int32_t)(v - (uint32_t)t->chunks) < 0) return false;
        if (t->sent[p] == 0) continue;
        if (!read_flag(t, p, FLAG_ACK(t->rank), &v)) return p != t->rank;
        if ((int32_t)(v - (uint32_t)t->sent[p]) < 0) return false;
    }
    return true;
}

static bool any_queued(const struct tt_device_team *t)
{
    bool any = t->chunks > 0;
    for (int p = 0; p < t->nranks; p++) any = any || t->sent[p] > 0;
    return any;
}

void tt_device_team_destroy(struct tt_device_team *t)
{
    if (t == NULL) return;
    CUcontext cur = NULL;
    (void)tt_cu.cuCtxGetCurrent(&cur);
    if (t->ctx != NULL && cur != t->ctx) (void)tt_cu.cuCtxSetCurrent(t->ctx);
    bool free_mine = t->mine != 0;
    if (t->nranks > 0 && any_queued(t)) {
        /* Not cuCtxSynchronize: a stream whose wait never ends (a peer died, or was aborted)
         * would hold destroy forever. Bounded; on time-out the scratch is left allocated. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t start = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, now = start;
        while (!all_done(t)) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
            if (now - start > DESTROY_WAIT_NS) {
                TT_WARN("device-direct path: the AllReduces queued did not all end within %llu s "
                        "(a peer failed?); this rank's device scratch is left allocated",
                        (unsigned long long)(DESTROY_WAIT_NS / 1000000000ull));
                free_mine = false;
                break;
            }
            usleep(100);
        }
    }
    for (int p = 0; free_mine && p < t->nranks; p++)
        if (t->mapped[p])
            (void)tt_device_ipc_close((void *)(uintptr_t)t->base[p], &t->handles[p]);
    if (free_mine) (void)tt_cu.cuMemFree(t->mine);
    if (t->poll != NULL) (void)tt_cu.cuStreamDestroy(t->poll);
    if (t->retained && free_mine) (void)tt_cu.cuDevicePrimaryCtxRelease(t->dev);
    if (t->ctx != NULL && cur != t->ctx) (void)tt_cu.cuCtxSetCurrent(cur);
    free(t);
}

static ncclResult_t post(const struct tt_device_team *t, CUstream s, int which, uint32_t seq)
{
    return TT_CU(tt_cu.cuStreamWriteValue32(s, flag_at(t, t->rank, which), seq,
                                            CU_STREAM_WRITE_VALUE_DEFAULT));
}

static ncclResult_t wait_peers(const struct tt_device_team *t, CUstream s, int which,
                               uint32_t seq)
{
    for (int p = 0; p < t->nranks; p++)
        if (p != t->rank)
            TT_TRY(TT_CU(tt_cu.cuStreamWaitValue32(s, flag_at(t, p, which), seq,
                                                   CU_STREAM_WAIT_VALUE_GEQ)));
    return ncclSuccess;
}

/* dst[0, count) = the reduction over every member of its scratch at element `first`, in rank
 * order, as the host kernels define it (reduce/reduce.h): PREMULSUM multiplies each input, then
 * adds; SUMDIV adds, dividing at the last step. */
static ncclResult_t reduce_members(const struct tt_device_team *t, CUstream s,
                                   const struct tt_device_redop *op, void *dst, size_t first,
                                   size_t count, size_t elt)
{
    cudaStream_t st = (cudaStream_t)s;
    const void *acc = (const void *)(uintptr_t)(t->base[0] + first * elt);
    if (op->red == TT_DEVICE_RED_PREMULSUM) {
        TT_TRY(tt_device_reduce(st, op->dtype, TT_DEVICE_RED_PREMUL, op->scalar_f, op->scalar_u,
                                op->divisor, dst, acc, NULL, count));
        acc = dst;
    }
    for (int p = 1; p < t->nranks; p++) {
        enum tt_device_red red = op->red;
        if (red == TT_DEVICE_RED_SUMDIV && p < t->nranks - 1) red = TT_DEVICE_RED_SUM;
        const void *x = (const void *)(uintptr_t)(t->base[p] + first * elt);
        TT_TRY(tt_device_reduce(st, op->dtype, red, op->scalar_f, op->scalar_u, op->divisor, dst,
                                x, acc, count));
        acc = dst;
    }
    return ncclSuccess;
}

/* Member p's two-shot segment of a chunk of `count` elements: [*lo, *hi). */
static void segment(size_t count, size_t elt, int n, int p, size_t *lo, size_t *hi)
{
    size_t align = SEGMENT_ALIGN / elt;
    size_t per = ((count + (size_t)n - 1) / (size_t)n + align - 1) / align * align;
    *lo = (size_t)p * per < count ? (size_t)p * per : count;
    *hi = *lo + per < count ? *lo + per : count;
}

static ncclResult_t chunk(struct tt_device_team *t, CUstream s, const char *send, char *recv,
                          size_t count, size_t elt, const struct tt_device_redop *op,
                          bool oneshot)
{
    uint32_t seq = (uint32_t)++t->chunks;
    if (t->chunks > 1) TT_TRY(wait_peers(t, s, FLAG_DONE, seq - 1));
    TT_TRY(TT_CU(tt_cu.cuMemcpyAsync(t->mine, (CUdeviceptr)(uintptr_t)send, count * elt, s)));
    TT_TRY(post(t, s, FLAG_READY, seq));
    TT_TRY(wait_peers(t, s, FLAG_READY, seq));
    if (oneshot) {
        TT_TRY(reduce_members(t, s, op, recv, 0, count, elt));
    } else {
        size_t lo, hi;
        segment(count, elt, t->nranks, t->rank, &lo, &hi);
        if (hi > lo) {
            TT_TRY(reduce_members(t, s, op, recv + lo * elt, lo, hi - lo, elt));
            TT_TRY(TT_CU(tt_cu.cuMemcpyAsync(t->mine + lo * elt,
                                             (CUdeviceptr)(uintptr_t)(recv + lo * elt),
                                             (hi - lo) * elt, s)));
        }
        TT_TRY(post(t, s, FLAG_REDUCED, seq));
        TT_TRY(wait_peers(t, s, FLAG_REDUCED, seq));
        for (int p = 0; p < t->nranks; p++) {
            if (p == t->rank) continue;
            segment(count, elt, t->nranks, p, &lo, &hi);
            if (hi > lo)
                TT_TRY(TT_CU(tt_cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)(recv + lo * elt),
                                                 t->base[p] + lo * elt, (hi - lo) * elt, s)));
        }
    }
    return post(t, s, FLAG_DONE, seq);
}

ncclResult_t tt_device_team_allreduce(struct tt_device_team *t, cudaStream_t stream,
                                      const void *send, void *recv, size_t count,
                                      const struct tt_device_redop *op, size_t oneshot_bytes)
{
    size_t elt = dtype_bytes(op->dtype);
    if (elt == 0)
        return TT_ERROR(ncclInvalidArgument, "device-direct AllReduce: invalid datatype %d",
                        (int)op->dtype);
    if (t->nranks < 2)
        return TT_ERROR(ncclInternalError, "device-direct AllReduce on a team not attached");
    CUstream s = (CUstream)stream;
    TT_TRY(tt_cuda_ensure_context(recv, s));
    bool oneshot = count * elt <= oneshot_bytes;
    size_t per_chunk = t->bytes / elt;
    for (size_t off = 0; off < count; off += per_chunk) {
        size_t c = count - off < per_chunk ? count - off : per_chunk;
        TT_TRY(chunk(t, s, (const char *)send + off * elt, (char *)recv + off * elt, c, elt, op,
                     oneshot));
    }
    return ncclSuccess;
}

/* The start and the end of every chunk: nobody still reads my scratch for the last chunk; then,
 * once the chunk's input is in my scratch, READY and the wait for everyone's. */
static ncclResult_t chunk_begin(struct tt_device_team *t, CUstream s, uint32_t *seq)
{
    *seq = (uint32_t)++t->chunks;
    if (t->chunks > 1) TT_TRY(wait_peers(t, s, FLAG_DONE, *seq - 1));
    return ncclSuccess;
}

static ncclResult_t chunk_ready(struct tt_device_team *t, CUstream s, uint32_t seq)
{
    TT_TRY(post(t, s, FLAG_READY, seq));
    return wait_peers(t, s, FLAG_READY, seq);
}

static ncclResult_t team_check(const struct tt_device_team *t, size_t elt, ncclDataType_t dtype,
                               CUstream s, void *recv)
{
    if (elt == 0)
        return TT_ERROR(ncclInvalidArgument, "device-direct path: invalid datatype %d",
                        (int)dtype);
    if (t->nranks < 2)
        return TT_ERROR(ncclInternalError, "device-direct path on a team not attached");
    return tt_cuda_ensure_context(recv, s);
}

ncclResult_t tt_device_team_reduce_scatter(struct tt_device_team *t, cudaStream_t stream,
                                           const void *send, void *recv, size_t count,
                                           const struct tt_device_redop *op)
{
    size_t elt = dtype_bytes(op->dtype);
    CUstream s = (CUstream)stream;
    TT_TRY(team_check(t, elt, op->dtype, s, recv));
    int n = t->nranks;
    /* A chunk takes `c` elements of every member's block: n * c in the scratch. */
    size_t per_chunk = t->bytes / elt / (size_t)n;
    for (size_t off = 0; off < count; off += per_chunk) {
        size_t c = count - off < per_chunk ? count - off : per_chunk;
        uint32_t seq;
        TT_TRY(chunk_begin(t, s, &seq));
        for (int q = 0; q < n; q++)
            TT_TRY(TT_CU(tt_cu.cuMemcpyAsync(
                t->mine + (size_t)q * c * elt,
                (CUdeviceptr)(uintptr_t)((const char *)send + ((size_t)q * count + off) * elt),
                c * elt, s)));
        TT_TRY(chunk_ready(t, s, seq));
        TT_TRY(reduce_members(t, s, op, (char *)recv + off * elt, (size_t)t->rank * c, c, elt));
        TT_TRY(post(t, s, FLAG_DONE, seq));
    }
    return ncclSuccess;
}

ncclResult_t tt_device_team_all_gather(struct tt_device_team *t, cudaStream_t stream,
                                       const void *send, void *recv, size_t count,
                                       ncclDataType_t dtype)
{
    size_t elt = dtype_bytes(dtype);
    CUstream s = (CUstream)stream;
    TT_TRY(team_check(t, elt, dtype, s, recv));
    size_t per_chunk = t->bytes / elt;
    for (size_t off = 0; off < count; off += per_chunk) {
        size_t c = count - off < per_chunk ? count - off : per_chunk;
        const char *in = (const char *)send + off * elt;
        uint32_t seq;
        TT_TRY(chunk_begin(t, s, &seq));
        TT_TRY(TT_CU(tt_cu.cuMemcpyAsync(t->mine, (CUdeviceptr)(uintptr_t)in, c * elt, s)));
        TT_TRY(chunk_ready(t, s, seq));
        for (int p = 0; p < t->nranks; p++) {
            char *out = (char *)recv + ((size_t)p * count + off) * elt;
            if (p == t->rank && out == in) continue; /* in place */
            CUdeviceptr from = p == t->rank ? (CUdeviceptr)(uintptr_t)in : t->base[p];
            TT_TRY(TT_CU(tt_cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)out, from, c * elt, s)));
        }
        TT_TRY(post(t, s, FLAG_DONE, seq));
    }
    return ncclSuccess;
}

/* ---- The rooted collectives and AlltoAll over the scratch ------------------------------------
 * The same chunks and flags as above: every member runs chunk_begin, chunk_ready and DONE for
 * every chunk, whether it moves data in that chunk or not, so the sequence numbers stay equal.
 * The buffer only the root passes (Broadcast's and Scatter's input, Reduce's and Gather's
 * output) may be any memory the driver can copy to or from (cuMemcpyAsync infers the kind from
 * the address); the core decides the path on the buffer every member passes
 * (core/coll.c, try_device_direct), so a root with a host buffer there still takes the path
 * its peers take. The members' own buffers are device memory. */

static ncclResult_t copy(CUstream s, void *dst, const void *src, size_t bytes)
{
    if (dst == src || bytes == 0) return ncclSuccess;
    return TT_CU(tt_cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src,
                                     bytes, s));
}

static void *scratch_at(const struct tt_device_team *t, int member, size_t byte)
{
    return (void *)(uintptr_t)(t->base[member] + byte);
}

ncclResult_t tt_device_team_broadcast(struct tt_device_team *t, cudaStream_t stream,
                                      const void *send, void *recv, size_t count,
                                      ncclDataType_t dtype, int root)
{
    size_t elt = dtype_bytes(dtype);
    CUstream s = (CUstream)stream;
    TT_TRY(team_check(t, elt, dtype, s, recv));
    size_t per_chunk = t->bytes / elt;
    for (size_t off = 0; off < count; off += per_chunk) {
        size_t c = count - off < per_chunk ? count - off : per_chunk, b = c * elt;
        uint32_t seq;
        TT_TRY(chunk_begin(t, s, &seq));
        const char *in = (const char *)send + off * elt;
        if (t->rank == root) TT_TRY(copy(s, scratch_at(t, root, 0), in, b));
        TT_TRY(chunk_ready(t, s, seq));
        const void *from = t->rank == root ? in : scratch_at(t, root, 0);
        TT_TRY(copy(s, (char *)recv + off * elt, from, b)); /* the root in place: none */
        TT_TRY(post(t, s, FLAG_DONE, seq));
    }
    return ncclSuccess;
}

ncclResult_t tt_device_team_reduce(struct tt_device_team *t, cudaStream_t stream,
                                   const void *send, void *recv, size_t count,
                                   const struct tt_device_redop *op, int root, bool recv_device)
{
    size_t elt = dtype_bytes(op->dtype);
    CUstream s = (CUstream)stream;
    TT_TRY(team_check(t, elt, op->dtype, s, (void *)send));
    /* Half the scratch holds the inputs; a root whose output is not device memory reduces into
     * the other half of its own and copies out from there (no kernel writes host memory). */
    size_t per_chunk = t->bytes / 2 / elt;
    for (size_t off = 0; off < count; off += per_chunk) {
        size_t c = count - off < per_chunk ? count - off : per_chunk;
        uint32_t seq;
        TT_TRY(chunk_begin(t, s, &seq));
        TT_TRY(copy(s, scratch_at(t, t->rank, 0), (const char *)send + off * elt, c * elt));
        TT_TRY(chunk_ready(t, s, seq));
        if (t->rank == root) {
            char *out = (char *)recv + off * elt;
            char *dst = recv_device ? out : scratch_at(t, root, t->bytes / 2);
            TT_TRY(reduce_members(t, s, op, dst, 0, c, elt));
            if (!recv_device) TT_TRY(copy(s, out, dst, c * elt));
        }
        TT_TRY(post(t, s, FLAG_DONE, seq));
    }
    return ncclSuccess;
}

ncclResult_t tt_device_team_gather(struct tt_device_team *t, cudaStream_t stream,
                                   const void *send, void *recv, size_t count,
                                   ncclDataType_t dtype, int root)
{
    size_t elt = dtype_bytes(dtype);
    CUstream s = (CUstream)stream;
    TT_TRY(team_check(t, elt, dtype, s, (void *)send));
    size_t per_chunk = t->bytes / elt;
    for (size_t off = 0; off < count; off += per_chunk) {
        size_t c = count - off < per_chunk ? count - off : per_chunk, b = c * elt;
        const char *in = (const char *)send + off * elt;
        uint32_t seq;
        TT_TRY(chunk_begin(t, s, &seq));
        if (t->rank != root) TT_TRY(copy(s, scratch_at(t, t->rank, 0), in, b));
        TT_TRY(chunk_ready(t, s, seq));
        for (int p = 0; t->rank == root && p < t->nranks; p++) {
            char *out = (char *)recv + ((size_t)p * count + off) * elt;
            TT_TRY(copy(s, out, p == root ? in : scratch_at(t, p, 0), b)); /* in place: none */
        }
        TT_TRY(post(t, s, FLAG_DONE, seq));
    }
    return ncclSuccess;
}

ncclResult_t tt_device_team_scatter(struct tt_device_team *t, cudaStream_t stream,
                                    const void *send, void *recv, size_t count,
                                    ncclDataType_t dtype, int root)
{
    size_t elt = dtype_bytes(dtype);
    CUstream s = (CUstream)stream;
    TT_TRY(team_check(t, elt, dtype, s, recv));
    int n = t->nranks;
    size_t per_chunk = t->bytes / elt / (size_t)n;
    for (size_t off = 0; off < count; off += per_chunk) {
        size_t c = count - off < per_chunk ? count - off : per_chunk, b = c * elt;
        uint32_t seq;
        TT_TRY(chunk_begin(t, s, &seq));
        for (int q = 0; t->rank == root && q < n; q++)
            if (q != root)
                TT_TRY(copy(s, scratch_at(t, root, (size_t)q * b),
                            (const char *)send + ((size_t)q * count + off) * elt, b));
        TT_TRY(chunk_ready(t, s, seq));
        char *out = (char *)recv + off * elt;
        if (t->rank == root)
            TT_TRY(copy(s, out, (const char *)send + ((size_t)root * count + off) * elt, b));
        else
            TT_TRY(copy(s, out, scratch_at(t, root, (size_t)t->rank * b), b));
        TT_TRY(post(t, s, FLAG_DONE, seq));
    }
    return ncclSuccess;
}

ncclResult_t tt_device_team_alltoall(struct tt_device_team *t, cudaStream_t stream,
                                     const void *send, void *recv, size_t count,
                                     ncclDataType_t dtype)
{
    size_t elt = dtype_bytes(dtype);
    CUstream s = (CUstream)stream;
    TT_TRY(team_check(t, elt, dtype, s, recv));
    int n = t->nranks, me = t->rank;
    size_t per_chunk = t->bytes / elt / (size_t)n;
    for (size_t off = 0; off < count; off += per_chunk) {
        size_t c = count - off < per_chunk ? count - off : per_chunk, b = c * elt;
        uint32_t seq;
        TT_TRY(chunk_begin(t, s, &seq));
        for (int q = 0; q < n; q++)
            if (q != me)
                TT_TRY(copy(s, scratch_at(t, me, (size_t)q * b),
                            (const char *)send + ((size_t)q * count + off) * elt, b));
        TT_TRY(chunk_ready(t, s, seq));
        for (int p = 0; p < n; p++) {
            char *out = (char *)recv + ((size_t)p * count + off) * elt;
            const void *from = p == me ? (const char *)send + ((size_t)me * count + off) * elt
                                       : scratch_at(t, p, (size_t)me * b);
            TT_TRY(copy(s, out, from, b));
        }
        TT_TRY(post(t, s, FLAG_DONE, seq));
    }
    return ncclSuccess;
}

/* ---- Send and Recv ---------------------------------------------------------------------------
 * Behind the scratch, each member has one slot per member (bytes / nranks, 256-byte aligned) in
 * which it puts what it sends there, a chunk at a time: wait ACK(me) of the receiver >= the
 * previous chunk to it (its slot is free), copy in, post SENT(receiver). The receiver waits
 * SENT(me) of the sender >= the chunk, copies out of the sender's slot, posts ACK(sender). The
 * flags of a pair count its chunks, in the order both sides queue them: a group's operations
 * to one peer, and from one peer, are one sequence in issue order (NCCL's matching rule), each
 * operation cut into slot-sized chunks. A group is queued in rounds (core/group.c): round k
 * queues the k-th chunk of every send sequence of every communicator in the group, then the
 * k-th of every receive sequence. A send in round k waits only for an ACK of round k - 1,
 * which its receiver queued before anything of round k, and a receive only for a send of round
 * k, which every rank queued before any receive of round k: no two ranks' streams can wait on
 * each other in a circle. */

static size_t p2p_slot(const struct tt_device_team *t)
{
    return t->bytes / (size_t)t->nranks & ~(size_t)(SEGMENT_ALIGN - 1);
}

/* The k-th chunk of the sequence of operations of `ops` in direction `send` with peer `peer`:
 * false when the sequence has fewer chunks. */
static bool p2p_chunk(const struct tt_device_p2p *ops, int nops, bool send, int peer, size_t slot,
                      size_t k, char **buff, size_t *bytes)
{
    for (int i = 0; i < nops; i++) {
        if (ops[i].send != send || ops[i].peer != peer || ops[i].bytes == 0) continue;
        size_t chunks = (ops[i].bytes + slot - 1) / slot;
        if (k >= chunks) {
            k -= chunks;
            continue;
        }
        *buff = (char *)ops[i].buff + k * slot;
        *bytes = ops[i].bytes - k * slot < slot ? ops[i].bytes - k * slot : slot;
        return true;
    }
    return false;
}

ncclResult_t tt_device_team_p2p_round(struct tt_device_team *t, cudaStream_t stream,
                                      const struct tt_device_p2p *ops, int nops, size_t round,
                                      bool send, bool *any)
{
    *any = false;
    if (nops == 0) return ncclSuccess;
    if (t->nranks < 2)
        return TT_ERROR(ncclInternalError, "device-direct path on a team not attached");
    CUstream s = (CUstream)stream;
    TT_TRY(tt_cuda_ensure_context(ops[0].buff, s));
    int me = t->rank;
    size_t slot = p2p_slot(t);
    for (int p = 0; p < t->nranks; p++) {
        char *buff;
        size_t b;
        if (!p2p_chunk(ops, nops, send, p, slot, round, &buff, &b)) continue;
        *any = true;
        if (send) {
            uint32_t seq = (uint32_t)++t->sent[p];
            TT_TRY(TT_CU(tt_cu.cuStreamWaitValue32(s, flag_at(t, p, FLAG_ACK(me)), seq - 1,
                                                   CU_STREAM_WAIT_VALUE_GEQ)));
            TT_TRY(copy(s, scratch_at(t, me, t->bytes + (size_t)p * slot), buff, b));
            TT_TRY(post(t, s, FLAG_SENT(p), seq));
        } else {
            uint32_t seq = (uint32_t)++t->received[p];
            TT_TRY(TT_CU(tt_cu.cuStreamWaitValue32(s, flag_at(t, p, FLAG_SENT(me)), seq,
                                                   CU_STREAM_WAIT_VALUE_GEQ)));
            TT_TRY(copy(s, buff, scratch_at(t, p, t->bytes + (size_t)me * slot), b));
            TT_TRY(post(t, s, FLAG_ACK(p), seq));
        }
    }
    return ncclSuccess;
}

/* ---- Symmetric windows ---------------------------------------------------------------------
 * A window registered on device memory with NCCL_WIN_COLL_SYMMETRIC is exported by every member
 * and mapped by every other at registration (collective, as in NCCL), so an AllReduce whose
 * buffers lie in windows reads the peers' inputs and writes the peers' outputs in place, with no
 * copy through the scratch. NCCL's contract for such windows is that every rank passes window
 * buffers at the same offsets; the offsets a member passes are applied to every peer's window.
 * One operation, as every member queues it:
 *   wait DONE(p) >= seq - 1    (an earlier scratch operation's readers are done)
 *   post READY = seq; wait READY(p) >= seq   (every input written, every output free)
 *   fold this member's share of the elements from every input into every output (sym.h)
 *   post DONE = seq; wait DONE(p) >= seq     (every output written, no input read any more)
 * Memory traffic is the least an AllReduce can move: each input read once, each output written
 * once, against five times that through the scratch. */
struct tt_device_window {
    size_t bytes;
    CUdeviceptr base[TT_DEVICE_TEAM_MAX]; /* every member's window, in this process */
    bool mapped[TT_DEVICE_TEAM_MAX];
    struct tt_device_ipc_handle handles[TT_DEVICE_TEAM_MAX];
};

ncclResult_t tt_device_window_export(const void *buff, size_t bytes,
                                     struct tt_device_team_info *info)
{
    memset(info, 0, sizeof *info);
    if (!tt_device_active() || tt_device_mem_kind(buff) != TT_MEM_DEVICE) return ncclSuccess;
    TT_TRY(tt_device_ipc_export(buff, &info->handle));
    info->ok = 1;
    info->pid = (int32_t)getpid();
    info->bytes = bytes;
    return ncclSuccess;
}

ncclResult_t tt_device_window_open(struct tt_device_team *t, const void *buff,
                                   const struct tt_device_team_info *infos,
                                   struct tt_device_window **out)
{
    *out = NULL;
    struct tt_device_window *w = calloc(1, sizeof *w);
    if (w == NULL) return TT_ERROR(ncclSystemError, "out of memory for a device window");
    w->bytes = (size_t)infos[t->rank].bytes;
    ncclResult_t res = ncclSuccess;
    for (int p = 0; p < t->nranks && res == ncclSuccess; p++) {
        if (p == t->rank) {
            w->base[p] = (CUdeviceptr)(uintptr_t)buff;
        } else if (!infos[p].ok || infos[p].bytes != w->bytes) {
            res = TT_ERROR(ncclInvalidUsage,
                           "symmetric device window: rank %d registers %llu bytes, this rank "
                           "%zu", p, (unsigned long long)infos[p].bytes, w->bytes);
        } else {
            void *ptr = NULL;
            res = tt_device_ipc_open(&infos[p].handle, &ptr);
            w->base[p] = (CUdeviceptr)(uintptr_t)ptr;
            w->handles[p] = infos[p].handle;
            w->mapped[p] = res == ncclSuccess;
        }
    }
    if (res != ncclSuccess) {
        tt_device_window_close(t, w);
        return res;
    }
    *out = w;
    return ncclSuccess;
}

void tt_device_window_close(struct tt_device_team *t, struct tt_device_window *w)
{
    if (w == NULL) return;
    /* Deregistration is collective too: once every member's DONE reached the last operation
     * queued, no queued kernel reads or writes a window any more. Bounded, as destroy. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t start = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    while (t->chunks > 0 && !all_done(t)) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        if ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec - start >
            DESTROY_WAIT_NS) {
            TT_WARN("symmetric device window: the operations queued did not all end within "
                    "%llu s (a peer failed?); its peers' mappings are left open",
                    (unsigned long long)(DESTROY_WAIT_NS / 1000000000ull));
            free(w);
            return;
        }
        usleep(100);
    }
    for (int p = 0; p < t->nranks; p++)
        if (w->mapped[p])
            (void)tt_device_ipc_close((void *)(uintptr_t)w->base[p], &w->handles[p]);
    free(w);
}

/* The symmetric-window operations' frame: READY (every input written, every output free),
 * the kernels, DONE (every output written, no input read any more), on the stream. */
static ncclResult_t window_begin(struct tt_device_team *t, CUstream s, uint32_t *seq)
{
    TT_TRY(chunk_begin(t, s, seq));
    return chunk_ready(t, s, *seq);
}

static ncclResult_t window_end(struct tt_device_team *t, CUstream s, uint32_t seq)
{
    TT_TRY(post(t, s, FLAG_DONE, seq));
    return wait_peers(t, s, FLAG_DONE, seq);
}

/* Whether rank 0 does every rank's work: on one GPU a single kernel already moves at the
 * memory's speed, and when the ranks' contexts share the GPU in time slices, every other rank's
 * kernel would cost a context switch (about 0.3 ms per operation on an H100). Across GPUs each
 * does its share, so that every GPU works. */
static bool window_one(const struct tt_device_team *t)
{
    int64_t fold = tt_param_cuda_window_fold();
    return fold == 1 || (fold == 0 && t->one_gpu);
}

/* `bytes` at `off` inside window w. */
static bool window_holds(const struct tt_device_window *w, size_t off, size_t bytes)
{
    return off <= w->bytes && bytes <= w->bytes - off;
}

/* One fold on the stream: `n` inputs, `ndst` outputs, `count` elements; 16-byte accesses where
 * every pointer allows. */
static ncclResult_t window_fold(CUstream s, const struct tt_device_redop *op, size_t elt,
                                struct tt_sym_args *a, size_t count)
{
    a->vec = 1;
    for (int p = 0; p < a->n; p++)
        if ((uintptr_t)a->src[p] % 16 != 0) a->vec = 0;
    for (int q = 0; q < a->ndst; q++)
        if ((uintptr_t)a->dst[q] % 16 != 0) a->vec = 0;
    a->lo = 0;
    a->hi = count;
    a->sf = op->scalar_f;
    a->su = op->scalar_u;
    a->div = op->divisor;
    return tt_device_sym_reduce((cudaStream_t)s, op->dtype, op->red, elt, a);
}

ncclResult_t tt_device_team_allreduce_window(struct tt_device_team *t, cudaStream_t stream,
                                             const struct tt_device_window *ws, size_t send_off,
                                             const struct tt_device_window *wr, size_t recv_off,
                                             size_t count, const struct tt_device_redop *op)
{
    size_t elt = dtype_bytes(op->dtype);
    CUstream s = (CUstream)stream;
    TT_TRY(team_check(t, elt, op->dtype, s, (void *)(uintptr_t)(wr->base[t->rank] + recv_off)));
    if (count > SIZE_MAX / elt || !window_holds(ws, send_off, count * elt) ||
        !window_holds(wr, recv_off, count * elt))
        return TT_ERROR(ncclInternalError, "window AllReduce outside its windows");
    /* Rank 0 folds it all on one GPU; across GPUs each rank folds a segment. */
    size_t lo = 0, hi = t->rank == 0 ? count : 0;
    if (!window_one(t)) segment(count, elt, t->nranks, t->rank, &lo, &hi);
    struct tt_sym_args a;
    memset(&a, 0, sizeof a);
    a.n = a.ndst = t->nranks;
    for (int p = 0; p < t->nranks; p++) {
        a.src[p] = (const char *)(uintptr_t)(ws->base[p] + send_off) + lo * elt;
        a.dst[p] = (char *)(uintptr_t)(wr->base[p] + recv_off) + lo * elt;
    }
    uint32_t seq;
    TT_TRY(window_begin(t, s, &seq));
    TT_TRY(window_fold(s, op, elt, &a, hi - lo));
    return window_end(t, s, seq);
}

/* ReduceScatter on windows: block b of every rank's input, folded, into rank b's output. The
 * output of rank b is at the caller's offset in its window, or, in place (recvbuff = sendbuff +
 * rank * count, NCCL's definition), at block b of its input: every rank is taken to do as this
 * one does, as every rank passes the same offsets. */
ncclResult_t tt_device_team_reduce_scatter_window(struct tt_device_team *t, cudaStream_t stream,
                                                  const struct tt_device_window *ws,
                                                  size_t send_off,
                                                  const struct tt_device_window *wr,
                                                  size_t recv_off, size_t count,
                                                  const struct tt_device_redop *op)
{
    size_t elt = dtype_bytes(op->dtype);
    CUstream s = (CUstream)stream;
    int n = t->nranks;
    TT_TRY(team_check(t, elt, op->dtype, s, (void *)(uintptr_t)(wr->base[t->rank] + recv_off)));
    if (count > SIZE_MAX / elt / (size_t)n ||
        !window_holds(ws, send_off, (size_t)n * count * elt) ||
        !window_holds(wr, recv_off, count * elt))
        return TT_ERROR(ncclInternalError, "window ReduceScatter outside its windows");
    size_t block = count * elt;
    bool in_place = ws == wr && recv_off == send_off + (size_t)t->rank * block;
    bool one = window_one(t);
    uint32_t seq;
    TT_TRY(window_begin(t, s, &seq));
    for (int b = 0; b < n; b++) {
        if (one ? t->rank != 0 : b != t->rank) continue;
        struct tt_sym_args a;
        memset(&a, 0, sizeof a);
        a.n = n;
        a.ndst = 1;
        for (int p = 0; p < n; p++)
            a.src[p] = (const char *)(uintptr_t)(ws->base[p] + send_off) + (size_t)b * block;
        a.dst[0] = (char *)(uintptr_t)(wr->base[b] +
                                       (in_place ? send_off + (size_t)b * block : recv_off));
        TT_TRY(window_fold(s, op, elt, &a, count));
    }
    return window_end(t, s, seq);
}

/* AllGather on windows: rank q's input into block q of every rank's output, as a fold of one
 * input (a copy, bytes as uint8). Rank q's input is at the caller's offset in its window, or,
 * in place (sendbuff = recvbuff + rank * count), at block q of its output, every rank taken to
 * do as this one does. */
ncclResult_t tt_device_team_all_gather_window(struct tt_device_team *t, cudaStream_t stream,
                                              const struct tt_device_window *ws, size_t send_off,
                                              const struct tt_device_window *wr, size_t recv_off,
                                              size_t count, ncclDataType_t dtype)
{
    size_t elt = dtype_bytes(dtype);
    CUstream s = (CUstream)stream;
    int n = t->nranks;
    TT_TRY(team_check(t, elt, dtype, s, (void *)(uintptr_t)(wr->base[t->rank] + recv_off)));
    if (count > SIZE_MAX / elt / (size_t)n || !window_holds(ws, send_off, count * elt) ||
        !window_holds(wr, recv_off, (size_t)n * count * elt))
        return TT_ERROR(ncclInternalError, "window AllGather outside its windows");
    size_t block = count * elt;
    bool in_place = ws == wr && send_off == recv_off + (size_t)t->rank * block;
    bool one = window_one(t);
    const struct tt_device_redop copy = {.dtype = ncclUint8, .red = TT_DEVICE_RED_SUM};
    uint32_t seq;
    TT_TRY(window_begin(t, s, &seq));
    for (int q = 0; q < n; q++) {
        if (one ? t->rank != 0 : q != t->rank) continue;
        struct tt_sym_args a;
        memset(&a, 0, sizeof a);
        a.n = 1;
        a.ndst = n;
        a.src[0] = (const char *)(uintptr_t)(ws->base[q] +
                                             (in_place ? recv_off + (size_t)q * block : send_off));
        for (int p = 0; p < n; p++)
            a.dst[p] = (char *)(uintptr_t)(wr->base[p] + recv_off) + (size_t)q * block;
        TT_TRY(window_fold(s, &copy, 1, &a, block));
    }
    return window_end(t, s, seq);
}
