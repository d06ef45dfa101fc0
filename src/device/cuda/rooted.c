/* Broadcast, Reduce, Gather, Scatter, AlltoAll and Send/Recv on the device-direct path
 * (device/device.h), over the team's scratch, slots and flags (device/cuda/direct.h). */
#include <stdlib.h>
#include <string.h>

#include "device/device.h"

#include "device/cuda/driver.h"
#include "device/cuda/direct.h"
#include "util/err.h"
#include "util/log.h"

/* ---- The rooted collectives and AlltoAll over the scratch ------------------------------------
 * The same chunks and flags as direct.c's: every member runs tt_dteam_chunk_begin, chunk_ready and
 * DONE for every chunk, whether it moves data in that chunk or not, so the sequence numbers stay
 * equal. The buffer only the root passes (Broadcast's and Scatter's input, Reduce's and Gather's
 * output) may be any memory the driver can copy to or from (cuMemcpyAsync infers the kind from the
 * address); the core decides the path on the buffer every member passes (core/coll.c,
 * device_direct_eligible), so a root with a host buffer there still takes the path its peers take.
 * The members' own buffers are device memory. */

ncclResult_t tt_device_team_broadcast(struct tt_device_team *t, cudaStream_t stream,
                                      const void *send, void *recv, size_t count,
                                      ncclDataType_t dtype, int root)
{
    size_t elt = tt_dteam_dtype_bytes(dtype);
    CUstream s = (CUstream)stream;
    TT_TRY(tt_dteam_check(t, elt, dtype, s, recv));
    size_t per_chunk = t->bytes / elt;
    for (size_t off = 0; off < count; off += per_chunk) {
        size_t c = count - off < per_chunk ? count - off : per_chunk, b = c * elt;
        uint32_t seq;
        TT_TRY(tt_dteam_chunk_begin(t, s, &seq));
        const char *in = (const char *)send + off * elt;
        if (t->rank == root) TT_TRY(tt_dteam_copy(s, tt_dteam_scratch_at(t, root, 0), in, b));
        TT_TRY(tt_dteam_chunk_ready(t, s, seq));
        const void *from = t->rank == root ? in : tt_dteam_scratch_at(t, root, 0);
        TT_TRY(tt_dteam_copy(s, (char *)recv + off * elt, from, b)); /* the root in place: none */
        TT_TRY(tt_dteam_post(t, s, FLAG_DONE, seq));
    }
    return ncclSuccess;
}

ncclResult_t tt_device_team_reduce(struct tt_device_team *t, cudaStream_t stream,
                                   const void *send, void *recv, size_t count,
                                   const struct tt_device_redop *op, int root, bool recv_device)
{
    size_t elt = tt_dteam_dtype_bytes(op->dtype);
    CUstream s = (CUstream)stream;
    TT_TRY(tt_dteam_check(t, elt, op->dtype, s, (void *)send));
    /* Half the scratch holds the inputs; a root whose output is not device memory reduces into
     * the other half of its own and copies out from there (no kernel writes host memory). */
    size_t per_chunk = t->bytes / 2 / elt;
    for (size_t off = 0; off < count; off += per_chunk) {
        size_t c = count - off < per_chunk ? count - off : per_chunk;
        uint32_t seq;
        TT_TRY(tt_dteam_chunk_begin(t, s, &seq));
        TT_TRY(tt_dteam_copy(s, tt_dteam_scratch_at(t, t->rank, 0),
                             (const char *)send + off * elt, c * elt));
        TT_TRY(tt_dteam_chunk_ready(t, s, seq));
        if (t->rank == root) {
            char *out = (char *)recv + off * elt;
            char *dst = recv_device ? out : tt_dteam_scratch_at(t, root, t->bytes / 2);
            TT_TRY(tt_dteam_reduce_members(t, s, op, dst, 0, c, elt));
            if (!recv_device) TT_TRY(tt_dteam_copy(s, out, dst, c * elt));
        }
        TT_TRY(tt_dteam_post(t, s, FLAG_DONE, seq));
    }
    return ncclSuccess;
}

ncclResult_t tt_device_team_gather(struct tt_device_team *t, cudaStream_t stream,
                                   const void *send, void *recv, size_t count,
                                   ncclDataType_t dtype, int root)
{
    size_t elt = tt_dteam_dtype_bytes(dtype);
    CUstream s = (CUstream)stream;
    TT_TRY(tt_dteam_check(t, elt, dtype, s, (void *)send));
    size_t per_chunk = t->bytes / elt;
    for (size_t off = 0; off < count; off += per_chunk) {
        size_t c = count - off < per_chunk ? count - off : per_chunk, b = c * elt;
        const char *in = (const char *)send + off * elt;
        uint32_t seq;
        TT_TRY(tt_dteam_chunk_begin(t, s, &seq));
        if (t->rank != root) TT_TRY(tt_dteam_copy(s, tt_dteam_scratch_at(t, t->rank, 0), in, b));
        TT_TRY(tt_dteam_chunk_ready(t, s, seq));
        for (int p = 0; t->rank == root && p < t->nranks; p++) {
            char *out = (char *)recv + ((size_t)p * count + off) * elt;
            /* p == root in place: none */
            TT_TRY(tt_dteam_copy(s, out, p == root ? in : tt_dteam_scratch_at(t, p, 0), b));
        }
        TT_TRY(tt_dteam_post(t, s, FLAG_DONE, seq));
    }
    return ncclSuccess;
}

ncclResult_t tt_device_team_scatter(struct tt_device_team *t, cudaStream_t stream,
                                    const void *send, void *recv, size_t count,
                                    ncclDataType_t dtype, int root)
{
    size_t elt = tt_dteam_dtype_bytes(dtype);
    CUstream s = (CUstream)stream;
    TT_TRY(tt_dteam_check(t, elt, dtype, s, recv));
    int n = t->nranks;
    size_t per_chunk = t->bytes / elt / (size_t)n;
    for (size_t off = 0; off < count; off += per_chunk) {
        size_t c = count - off < per_chunk ? count - off : per_chunk, b = c * elt;
        uint32_t seq;
        TT_TRY(tt_dteam_chunk_begin(t, s, &seq));
        for (int q = 0; t->rank == root && q < n; q++)
            if (q != root)
                TT_TRY(tt_dteam_copy(s, tt_dteam_scratch_at(t, root, (size_t)q * b),
                                     (const char *)send + ((size_t)q * count + off) * elt, b));
        TT_TRY(tt_dteam_chunk_ready(t, s, seq));
        char *out = (char *)recv + off * elt;
        if (t->rank == root)
            TT_TRY(tt_dteam_copy(s, out, (const char *)send + ((size_t)root * count + off) * elt,
                                 b));
        else
            TT_TRY(tt_dteam_copy(s, out, tt_dteam_scratch_at(t, root, (size_t)t->rank * b), b));
        TT_TRY(tt_dteam_post(t, s, FLAG_DONE, seq));
    }
    return ncclSuccess;
}

ncclResult_t tt_device_team_alltoall(struct tt_device_team *t, cudaStream_t stream,
                                     const void *send, void *recv, size_t count,
                                     ncclDataType_t dtype)
{
    size_t elt = tt_dteam_dtype_bytes(dtype);
    CUstream s = (CUstream)stream;
    TT_TRY(tt_dteam_check(t, elt, dtype, s, recv));
    int n = t->nranks, me = t->rank;
    size_t per_chunk = t->bytes / elt / (size_t)n;
    for (size_t off = 0; off < count; off += per_chunk) {
        size_t c = count - off < per_chunk ? count - off : per_chunk, b = c * elt;
        uint32_t seq;
        TT_TRY(tt_dteam_chunk_begin(t, s, &seq));
        for (int q = 0; q < n; q++)
            if (q != me)
                TT_TRY(tt_dteam_copy(s, tt_dteam_scratch_at(t, me, (size_t)q * b),
                                     (const char *)send + ((size_t)q * count + off) * elt, b));
        TT_TRY(tt_dteam_chunk_ready(t, s, seq));
        for (int p = 0; p < n; p++) {
            char *out = (char *)recv + ((size_t)p * count + off) * elt;
            const void *from = p == me ? (const char *)send + ((size_t)me * count + off) * elt
                                       : tt_dteam_scratch_at(t, p, (size_t)me * b);
            TT_TRY(tt_dteam_copy(s, out, from, b));
        }
        TT_TRY(tt_dteam_post(t, s, FLAG_DONE, seq));
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
            TT_TRY(TT_CU(tt_cu.cuStreamWaitValue32(s, tt_dteam_flag_at(t, p, FLAG_ACK(me)),
                                                   seq - 1, CU_STREAM_WAIT_VALUE_GEQ)));
            void *to = tt_dteam_scratch_at(t, me, t->bytes + (size_t)p * slot);
            TT_TRY(tt_dteam_copy(s, to, buff, b));
            TT_TRY(tt_dteam_post(t, s, FLAG_SENT(p), seq));
        } else {
            uint32_t seq = (uint32_t)++t->received[p];
            TT_TRY(TT_CU(tt_cu.cuStreamWaitValue32(s, tt_dteam_flag_at(t, p, FLAG_SENT(me)),
                                                   seq, CU_STREAM_WAIT_VALUE_GEQ)));
            const void *from = tt_dteam_scratch_at(t, p, t->bytes + (size_t)me * slot);
            TT_TRY(tt_dteam_copy(s, buff, from, b));
            TT_TRY(tt_dteam_post(t, s, FLAG_ACK(p), seq));
        }
    }
    return ncclSuccess;
}
