/* The device-direct path (device/device.h, "The device-direct path"): collectives among the GPU
 * ranks of one host, queued on the caller's CUDA stream and run by the GPU alone: the team, its
 * flags, and AllReduce, ReduceScatter and AllGather through the scratch, described here; the
 * other collectives and Send/Recv are in rooted.c, symmetric windows in window.c, the release
 * of streams that wait for a failed peer in release.c.
 *
 * Each member owns one device allocation: a scratch of `bytes`, as many bytes of Send/Recv slots
 * (rooted.c), and behind them the flag words, each on its own 128-byte line: READY, REDUCED and
 * DONE for the collectives, SENT and ACK per member for Send/Recv (direct.h). Peers map it
 * through a CUDA IPC handle at init. A flag holds the sequence number of the last chunk its
 * owner reached at that stage; the owner writes it with cuStreamWriteValue32 (a fenced write:
 * what the stream wrote before is visible first) and peers wait for it with cuStreamWaitValue32
 * (GEQ, a wrapping compare). The waits are stream memory operations executed by the GPU's front
 * end, not spinning kernels, so several processes time-sliced on one GPU cannot starve each
 * other, and the calling thread never blocks.
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
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/device.h"

#include "device/cuda/driver.h"
#include "device/cuda/direct.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/time.h"

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

CUcontext tt_dteam_enter(const struct tt_device_team *t)
{
    CUcontext cur = NULL;
    (void)tt_cu.cuCtxGetCurrent(&cur);
    if (t->ctx != NULL && cur != t->ctx) (void)tt_cu.cuCtxSetCurrent(t->ctx);
    return cur;
}

void tt_dteam_leave(const struct tt_device_team *t, CUcontext cur)
{
    if (t->ctx != NULL && cur != t->ctx) (void)tt_cu.cuCtxSetCurrent(cur);
}

size_t tt_dteam_dtype_bytes(ncclDataType_t dtype)
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
    pthread_mutex_init(&t->release_lock, NULL);
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
    /* The kernels now, before any stream of the team waits for a peer (module.c). */
    if (res == ncclSuccess) res = tt_device_kernels_load();
    if (res == ncclSuccess) {
        t->reader = calloc(1, sizeof *t->reader);
        if (t->reader == NULL) res = TT_ERROR(ncclSystemError, "out of memory for the team");
        else pthread_mutex_init(&t->reader->lock, NULL);
    }
    if (res == ncclSuccess)
        res = TT_CU(tt_cu.cuMemHostAlloc((void **)&t->reader->word, 64,
                                         CU_MEMHOSTALLOC_PORTABLE));
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

CUdeviceptr tt_dteam_flag_at(const struct tt_device_team *t, int member, int which)
{
    return t->base[member] + 2 * t->bytes + (size_t)which * FLAG_STRIDE;
}

void tt_device_team_destroy(struct tt_device_team *t)
{
    if (t == NULL) return;
    CUcontext cur = tt_dteam_enter(t);
    bool free_mine = t->mine != 0 && !t->keep;
    bool ended = !t->keep; /* no stream of this member may still wait for ever */
    if (t->nranks > 0 && tt_dteam_any_queued(t) && !t->keep) {
        /* Not cuCtxSynchronize: a stream whose wait never ends (a peer died, or was aborted)
         * would hold destroy forever. Bounded; on time-out the scratch is left allocated. */
        uint64_t start = tt_time_ns();
        while (!tt_dteam_all_done(t)) {
            if (tt_time_ns() - start > DESTROY_WAIT_NS) {
                TT_WARN("device-direct path: the AllReduces queued did not all end within %llu s "
                        "(a peer failed?); this rank's device scratch is left allocated",
                        (unsigned long long)(DESTROY_WAIT_NS / 1000000000ull));
                free_mine = false;
                ended = false;
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
    if (t->reader != NULL) {
        /* A copy still pending may land in the word yet: then it is left to the process. So
         * it is after a release or a time-out above: freeing pinned memory may wait for the
         * context's work, and a stream may still wait for a peer that never comes. */
        if (t->reader->word != NULL && !t->reader->pending && ended)
            (void)tt_cu.cuMemFreeHost(t->reader->word);
        pthread_mutex_destroy(&t->reader->lock);
        free(t->reader);
    }
    if (t->retained && free_mine) (void)tt_cu.cuDevicePrimaryCtxRelease(t->dev);
    tt_dteam_leave(t, cur);
    pthread_mutex_destroy(&t->release_lock);
    free(t);
}

ncclResult_t tt_dteam_post(const struct tt_device_team *t, CUstream s, int which, uint32_t seq)
{
    return TT_CU(tt_cu.cuStreamWriteValue32(s, tt_dteam_flag_at(t, t->rank, which), seq,
                                            CU_STREAM_WRITE_VALUE_DEFAULT));
}

ncclResult_t tt_dteam_wait_peers(const struct tt_device_team *t, CUstream s, int which,
                                uint32_t seq)
{
    for (int p = 0; p < t->nranks; p++)
        if (p != t->rank)
            TT_TRY(TT_CU(tt_cu.cuStreamWaitValue32(s, tt_dteam_flag_at(t, p, which), seq,
                                                   CU_STREAM_WAIT_VALUE_GEQ)));
    return ncclSuccess;
}

ncclResult_t tt_dteam_reduce_members(const struct tt_device_team *t, CUstream s,
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

void tt_dteam_segment(size_t count, size_t elt, int n, int p, size_t *lo, size_t *hi)
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
    if (t->chunks > 1) TT_TRY(tt_dteam_wait_peers(t, s, FLAG_DONE, seq - 1));
    TT_TRY(TT_CU(tt_cu.cuMemcpyAsync(t->mine, (CUdeviceptr)(uintptr_t)send, count * elt, s)));
    TT_TRY(tt_dteam_post(t, s, FLAG_READY, seq));
    TT_TRY(tt_dteam_wait_peers(t, s, FLAG_READY, seq));
    if (oneshot) {
        TT_TRY(tt_dteam_reduce_members(t, s, op, recv, 0, count, elt));
    } else {
        size_t lo, hi;
        tt_dteam_segment(count, elt, t->nranks, t->rank, &lo, &hi);
        if (hi > lo) {
            TT_TRY(tt_dteam_reduce_members(t, s, op, recv + lo * elt, lo, hi - lo, elt));
            TT_TRY(TT_CU(tt_cu.cuMemcpyAsync(t->mine + lo * elt,
                                             (CUdeviceptr)(uintptr_t)(recv + lo * elt),
                                             (hi - lo) * elt, s)));
        }
        TT_TRY(tt_dteam_post(t, s, FLAG_REDUCED, seq));
        TT_TRY(tt_dteam_wait_peers(t, s, FLAG_REDUCED, seq));
        for (int p = 0; p < t->nranks; p++) {
            if (p == t->rank) continue;
            tt_dteam_segment(count, elt, t->nranks, p, &lo, &hi);
            if (hi > lo)
                TT_TRY(TT_CU(tt_cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)(recv + lo * elt),
                                                 t->base[p] + lo * elt, (hi - lo) * elt, s)));
        }
    }
    return tt_dteam_post(t, s, FLAG_DONE, seq);
}

ncclResult_t tt_device_team_allreduce(struct tt_device_team *t, cudaStream_t stream,
                                      const void *send, void *recv, size_t count,
                                      const struct tt_device_redop *op, size_t oneshot_bytes)
{
    size_t elt = tt_dteam_dtype_bytes(op->dtype);
    if (elt == 0)
        return TT_ERROR(ncclInvalidArgument, "device-direct AllReduce: invalid datatype %d",
                        (int)op->dtype);
    if (t->nranks < 2)
        return TT_ERROR(ncclInternalError, "device-direct AllReduce on a team not attached");
    CUstream s = (CUstream)stream;
    TT_TRY(tt_dteam_context(recv, s));
    bool oneshot = count * elt <= oneshot_bytes;
    size_t per_chunk = t->bytes / elt;
    for (size_t off = 0; off < count; off += per_chunk) {
        size_t c = count - off < per_chunk ? count - off : per_chunk;
        TT_TRY(chunk(t, s, (const char *)send + off * elt, (char *)recv + off * elt, c, elt, op,
                     oneshot));
    }
    return ncclSuccess;
}

/* The ring. A chunk of c elements is cut into n segments (tt_dteam_segment); the first half
 * of the scratch holds the reduce-scatter's partial sums, the second half the finished
 * segments as they travel, each segment at its own offset. With l = r - 1 and j = r - k (mod n),
 * member r queues, base being the STEP count before the chunk:
 *   k = 0:          partial[r] = in[r] (premultiplied for PREMULSUM); post STEP = base + 1
 *   k = 1 .. n-2:   wait STEP(l) >= base + k; partial[j] = in[j] OP l.partial[j];
 *                   post STEP = base + k + 1
 *   k = n-1:        wait STEP(l) >= base + n - 1; done[j] = in[j] OP l.partial[j] (the last
 *                   operation of avg divides); recv[j] = done[j]; post STEP = base + n
 * then, with j = r + 1 - k, the finished segments go round:
 *   k = 1 .. n-1:   wait STEP(l) >= base + n + k - 1; recv[j] = l.done[j];
 *                   below n-1 also done[j] = l.done[j] and post STEP = base + n + k
 * Member l wrote what member r reads at exactly the step r waits for, since every member queues
 * the same steps. The chunk's DONE (wait for every peer's before the scratch is reused) is the
 * other collectives'. */
static size_t ring_half(const struct tt_device_team *t)
{
    return (t->bytes / 2) & ~(size_t)(SEGMENT_ALIGN - 1);
}

/* Queues a wait until member `member`'s STEP reached `step`. */
static ncclResult_t wait_step(const struct tt_device_team *t, CUstream s, int member,
                              uint32_t step)
{
    return TT_CU(tt_cu.cuStreamWaitValue32(s, tt_dteam_flag_at(t, member, FLAG_STEP), step,
                                           CU_STREAM_WAIT_VALUE_GEQ));
}

static ncclResult_t ring_chunk(struct tt_device_team *t, CUstream s, const char *send,
                               char *recv, size_t c, size_t elt, const struct tt_device_redop *op)
{
    cudaStream_t st = (cudaStream_t)s;
    int n = t->nranks, r = t->rank, l = (r + n - 1) % n;
    size_t half = ring_half(t);
    uint32_t seq, base = (uint32_t)t->steps;
    TT_TRY(tt_dteam_chunk_begin(t, s, &seq));
    t->steps += 2 * (uint64_t)n - 2;
    for (int k = 0; k < n; k++) {
        int j = (r - k + n) % n;
        size_t lo, hi;
        tt_dteam_segment(c, elt, n, j, &lo, &hi);
        char *partial = tt_dteam_scratch_at(t, r, lo * elt);
        char *done = tt_dteam_scratch_at(t, r, half + lo * elt);
        if (k > 0) TT_TRY(wait_step(t, s, l, base + (uint32_t)k));
        if (hi > lo && k == 0 && op->red == TT_DEVICE_RED_PREMULSUM)
            TT_TRY(tt_device_reduce(st, op->dtype, TT_DEVICE_RED_PREMUL, op->scalar_f,
                                    op->scalar_u, op->divisor, partial, send + lo * elt, NULL,
                                    hi - lo));
        else if (hi > lo && k == 0)
            TT_TRY(tt_dteam_copy(s, partial, send + lo * elt, (hi - lo) * elt));
        else if (hi > lo) {
            enum tt_device_red red = op->red;
            if (red == TT_DEVICE_RED_SUMDIV && k < n - 1) red = TT_DEVICE_RED_SUM;
            TT_TRY(tt_device_reduce(st, op->dtype, red, op->scalar_f, op->scalar_u, op->divisor,
                                    k < n - 1 ? partial : done, send + lo * elt,
                                    tt_dteam_scratch_at(t, l, lo * elt), hi - lo));
            if (k == n - 1) TT_TRY(tt_dteam_copy(s, recv + lo * elt, done, (hi - lo) * elt));
        }
        TT_TRY(tt_dteam_post(t, s, FLAG_STEP, base + (uint32_t)k + 1));
    }
    for (int k = 1; k < n; k++) {
        int j = (r + 1 - k + n) % n;
        size_t lo, hi;
        tt_dteam_segment(c, elt, n, j, &lo, &hi);
        const char *from = tt_dteam_scratch_at(t, l, half + lo * elt);
        char *done = tt_dteam_scratch_at(t, r, half + lo * elt);
        TT_TRY(wait_step(t, s, l, base + (uint32_t)(n + k - 1)));
        if (k == n - 1) {
            TT_TRY(tt_dteam_copy(s, recv + lo * elt, from, (hi - lo) * elt));
            break;
        }
        /* One read of the neighbour's memory: into my scratch, then locally into recv. */
        TT_TRY(tt_dteam_copy(s, done, from, (hi - lo) * elt));
        TT_TRY(tt_dteam_post(t, s, FLAG_STEP, base + (uint32_t)(n + k)));
        TT_TRY(tt_dteam_copy(s, recv + lo * elt, done, (hi - lo) * elt));
    }
    return tt_dteam_post(t, s, FLAG_DONE, seq);
}

ncclResult_t tt_device_team_allreduce_ring(struct tt_device_team *t, cudaStream_t stream,
                                           const void *send, void *recv, size_t count,
                                           const struct tt_device_redop *op)
{
    size_t elt = tt_dteam_dtype_bytes(op->dtype);
    CUstream s = (CUstream)stream;
    TT_TRY(tt_dteam_check(t, elt, op->dtype, s, recv));
    size_t per_chunk = ring_half(t) / elt;
    for (size_t off = 0; off < count; off += per_chunk) {
        size_t c = count - off < per_chunk ? count - off : per_chunk;
        TT_TRY(ring_chunk(t, s, (const char *)send + off * elt, (char *)recv + off * elt, c, elt,
                          op));
    }
    return ncclSuccess;
}

ncclResult_t tt_dteam_chunk_begin(struct tt_device_team *t, CUstream s, uint32_t *seq)
{
    *seq = (uint32_t)++t->chunks;
    if (t->chunks > 1) TT_TRY(tt_dteam_wait_peers(t, s, FLAG_DONE, *seq - 1));
    return ncclSuccess;
}

ncclResult_t tt_dteam_chunk_ready(struct tt_device_team *t, CUstream s, uint32_t seq)
{
    TT_TRY(tt_dteam_post(t, s, FLAG_READY, seq));
    return tt_dteam_wait_peers(t, s, FLAG_READY, seq);
}

ncclResult_t tt_dteam_check(const struct tt_device_team *t, size_t elt, ncclDataType_t dtype,
                           CUstream s, void *recv)
{
    if (elt == 0)
        return TT_ERROR(ncclInvalidArgument, "device-direct path: invalid datatype %d",
                        (int)dtype);
    if (t->nranks < 2)
        return TT_ERROR(ncclInternalError, "device-direct path on a team not attached");
    return tt_dteam_context(recv, s);
}

ncclResult_t tt_dteam_context(void *recv, CUstream s)
{
    TT_TRY(tt_cuda_ensure_context(recv, s));
    /* The kernels of the context the work is queued in, before the first wait for a peer
     * (module.c); once loaded, a lookup. */
    return tt_device_kernels_load();
}

ncclResult_t tt_device_team_reduce_scatter(struct tt_device_team *t, cudaStream_t stream,
                                           const void *send, void *recv, size_t count,
                                           const struct tt_device_redop *op)
{
    size_t elt = tt_dteam_dtype_bytes(op->dtype);
    CUstream s = (CUstream)stream;
    TT_TRY(tt_dteam_check(t, elt, op->dtype, s, recv));
    int n = t->nranks;
    /* A chunk takes `c` elements of every member's block: n * c in the scratch. */
    size_t per_chunk = t->bytes / elt / (size_t)n;
    for (size_t off = 0; off < count; off += per_chunk) {
        size_t c = count - off < per_chunk ? count - off : per_chunk;
        uint32_t seq;
        TT_TRY(tt_dteam_chunk_begin(t, s, &seq));
        for (int q = 0; q < n; q++)
            TT_TRY(TT_CU(tt_cu.cuMemcpyAsync(
                t->mine + (size_t)q * c * elt,
                (CUdeviceptr)(uintptr_t)((const char *)send + ((size_t)q * count + off) * elt),
                c * elt, s)));
        TT_TRY(tt_dteam_chunk_ready(t, s, seq));
        TT_TRY(tt_dteam_reduce_members(t, s, op, (char *)recv + off * elt, (size_t)t->rank * c,
                                       c, elt));
        TT_TRY(tt_dteam_post(t, s, FLAG_DONE, seq));
    }
    return ncclSuccess;
}

ncclResult_t tt_device_team_all_gather(struct tt_device_team *t, cudaStream_t stream,
                                       const void *send, void *recv, size_t count,
                                       ncclDataType_t dtype)
{
    size_t elt = tt_dteam_dtype_bytes(dtype);
    CUstream s = (CUstream)stream;
    TT_TRY(tt_dteam_check(t, elt, dtype, s, recv));
    size_t per_chunk = t->bytes / elt;
    for (size_t off = 0; off < count; off += per_chunk) {
        size_t c = count - off < per_chunk ? count - off : per_chunk;
        const char *in = (const char *)send + off * elt;
        uint32_t seq;
        TT_TRY(tt_dteam_chunk_begin(t, s, &seq));
        TT_TRY(TT_CU(tt_cu.cuMemcpyAsync(t->mine, (CUdeviceptr)(uintptr_t)in, c * elt, s)));
        TT_TRY(tt_dteam_chunk_ready(t, s, seq));
        for (int p = 0; p < t->nranks; p++) {
            char *out = (char *)recv + ((size_t)p * count + off) * elt;
            if (p == t->rank && out == in) continue; /* in place */
            CUdeviceptr from = p == t->rank ? (CUdeviceptr)(uintptr_t)in : t->base[p];
            TT_TRY(TT_CU(tt_cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)out, from, c * elt, s)));
        }
        TT_TRY(tt_dteam_post(t, s, FLAG_DONE, seq));
    }
    return ncclSuccess;
}

ncclResult_t tt_dteam_copy(CUstream s, void *dst, const void *src, size_t bytes)
{
    if (dst == src || bytes == 0) return ncclSuccess;
    return TT_CU(tt_cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src,
                                     bytes, s));
}

void *tt_dteam_scratch_at(const struct tt_device_team *t, int member, size_t byte)
{
    return (void *)(uintptr_t)(t->base[member] + byte);
}
