/* AllReduce, ReduceScatter and AllGather on symmetric device windows (device/device.h), with
 * the team's flags (device/cuda/direct.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/device.h"

#include "device/cuda/driver.h"
#include "device/cuda/sym.h"
#include "device/cuda/direct.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/time.h"

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

static void window_close_in_context(struct tt_device_team *t, struct tt_device_window *w);

void tt_device_window_close(struct tt_device_team *t, struct tt_device_window *w)
{
    if (w == NULL) return;
    /* Deregistration is collective too: once every member's DONE reached the last operation
     * queued, no queued kernel reads or writes a window any more. Bounded, as destroy; the
     * flags are read in the team's context. */
    CUcontext cur = tt_dteam_enter(t);
    window_close_in_context(t, w);
    tt_dteam_leave(t, cur);
}

static void window_close_in_context(struct tt_device_team *t, struct tt_device_window *w)
{
    uint64_t start = tt_time_ns();
    while (t->chunks > 0 && !t->keep && !tt_dteam_all_done(t)) {
        if (tt_time_ns() - start > DESTROY_WAIT_NS) {
            TT_WARN("symmetric device window: the operations queued did not all end within "
                    "%llu s (a peer failed?); its peers' mappings are left open",
                    (unsigned long long)(DESTROY_WAIT_NS / 1000000000ull));
            free(w);
            return;
        }
        usleep(100);
    }
    if (t->keep) { /* released with work queued: a kernel may still use the mappings */
        free(w);
        return;
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
    TT_TRY(tt_dteam_chunk_begin(t, s, seq));
    return tt_dteam_chunk_ready(t, s, *seq);
}

static ncclResult_t window_end(struct tt_device_team *t, CUstream s, uint32_t seq)
{
    TT_TRY(tt_dteam_post(t, s, FLAG_DONE, seq));
    return tt_dteam_wait_peers(t, s, FLAG_DONE, seq);
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
    size_t elt = tt_dteam_dtype_bytes(op->dtype);
    CUstream s = (CUstream)stream;
    TT_TRY(tt_dteam_check(t, elt, op->dtype, s, (void *)(uintptr_t)(wr->base[t->rank] + recv_off)));
    if (count > SIZE_MAX / elt || !window_holds(ws, send_off, count * elt) ||
        !window_holds(wr, recv_off, count * elt))
        return TT_ERROR(ncclInternalError, "window AllReduce outside its windows");
    /* Rank 0 folds it all on one GPU; across GPUs each rank folds a segment. */
    size_t lo = 0, hi = t->rank == 0 ? count : 0;
    if (!window_one(t)) tt_dteam_segment(count, elt, t->nranks, t->rank, &lo, &hi);
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
    size_t elt = tt_dteam_dtype_bytes(op->dtype);
    CUstream s = (CUstream)stream;
    int n = t->nranks;
    TT_TRY(tt_dteam_check(t, elt, op->dtype, s, (void *)(uintptr_t)(wr->base[t->rank] + recv_off)));
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
    size_t elt = tt_dteam_dtype_bytes(dtype);
    CUstream s = (CUstream)stream;
    int n = t->nranks;
    TT_TRY(tt_dteam_check(t, elt, dtype, s, (void *)(uintptr_t)(wr->base[t->rank] + recv_off)));
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
