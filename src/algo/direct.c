/* Direct: single-copy collectives for large messages on one host, with cross-memory attach.
 * After the ranks publish their buffer addresses, each one copies what it needs straight out of
 * its peers' buffers:
 *   AllGather: block p of the output from rank p's send buffer;
 *   Broadcast: the root's send buffer;
 *   ReduceScatter: block r of every peer's input, folded into the output;
 *   AlltoAll: block r of every peer's send buffer, into block p of the output;
 *   Reduce: block r of every input, folded by rank r and written to the root's output;
 *   AllReduce: described next.
 *
 * AllReduce cuts the buffer into nranks blocks. After the ranks publish their buffer addresses, rank r
 * reduces block r: it copies each peer's piece of block r out of the peer's send buffer into a
 * small cache-resident staging area (one kernel copy) and folds it into its own receive buffer,
 * own contribution first, then the peers in rank order, and pushes each finished piece into
 * every peer's output (described below). Once every rank has posted "block reduced and pushed",
 * all outputs are complete and nobody reads any buffer any more.
 *
 * Buffers in shareable memory (ncclMemAlloc blocks, and registered ordinary buffers, whose whole
 * pages the registration moved into a memory file: core/mem.c) are published with their memory
 * file as well: a peer maps the file once (cached) and then reads the buffer with plain loads,
 * folding straight out of the peer's memory with no kernel copy and no staging; other buffers,
 * and the partial pages at the ends of a registered one, go through cross-memory attach. Pieces
 * are cut at the edges of each peer's mapped part, so each piece of each peer's buffer takes one
 * path or the other.
 *
 * Broadcast and AllGather fan out when every rank's output is shareable (in a memory file,
 * which every rank sees in the published addresses, so all decide alike): rank r reads its share
 * once, piece by piece, and writes each piece to every output while it is still in cache. Its
 * share is its own block for AllGather and the r-th n-th of the root's buffer for Broadcast.
 * That reads the source once instead of once per rank. An output this rank cannot map (the
 * mapping failed) is written with cross-memory attach instead.
 *
 * AllReduce's rank r pushes its block instead of letting the peers gather it: the pass that folds
 * block r also writes each finished piece, still in cache, to every peer's output. A mapped
 * output gets plain stores (the last fold step stores to two destinations; further mapped
 * outputs get a copy), any other output a cross-memory write (process_vm_writev). That saves
 * the gather phase's read of the block from memory (measured: docs/performance.md, "Measurements
 * behind the code").
 *
 * Block r is computed by rank r alone and copied bit for bit by the others, so all ranks end
 * with identical results. Events: 1 addresses published, 2 "done": this rank has finished
 * reading its peers' buffers and writing into them, so once every rank posted it the
 * operation is over everywhere and the buffers may be reused. */
#include <math.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/coll.h"
#include "util/err.h"

/* The schedule, one phase after the other (the op's state): */
enum {
    RESERVE,   /* take the next slot and events, in lane order everywhere */
    PUBLISH,   /* once the slot is free: publish my buffers' addresses, post event 1 */
    ADDRESSES, /* once every peer posted event 1: read their addresses, map what is shareable */
    WORK,      /* copy and fold my share (copy_work), post event 2 ("done") */
    DONE_WAIT, /* once every peer posted event 2: the buffers are free again */
};

/* Direct's own state of an op. */
struct direct_state {
    int phase; /* first: zeroed when the op starts */
    int slot;
    uint64_t event_base; /* the events before this op's first */
    struct tt_team_region send_region; /* the buffers' shareable parts (set by bind) */
    struct tt_team_region recv_region;
};

static struct direct_state *st(const struct tt_op *op)
{
    return TT_ALGO_STATE(op, struct direct_state);
}

struct addresses {
    struct tt_op_desc desc; /* the operation, as the publishing rank issued it */
    uint64_t send;
    uint64_t recv;
    struct tt_team_region send_region;
    struct tt_team_region recv_region;
    uint32_t magic; /* DIRECT_MAGIC: a Direct operation wrote this slot... */
    uint64_t base;   /* ...for the operation whose events start after this one */
    uint64_t premul; /* its PREMULSUM scalar: each input is multiplied by its own rank's */
};

/* Ranks that chose different algorithms for one operation (NCCL_ALGO or symmetric windows set
 * differently) could otherwise read each other's slots as addresses. */
#define DIRECT_MAGIC 0x54434452u /* "RDCT" */

size_t tt_direct_slot_bytes(void) { return sizeof(struct addresses); }

/* Whether peer p published addresses for this very operation, issued as this rank issued it. */
static ncclResult_t check_peer_slot(const struct tt_op *op, int p, const struct addresses *a)
{
    if (a->magic == DIRECT_MAGIC && a->base == st(op)->event_base) {
        struct tt_op_desc got;
        memcpy(&got, &a->desc, sizeof got); /* the peer's memory: read once */
        return tt_algo_check_desc(op, &got, p);
    }
    return TT_ERROR(ncclInvalidUsage,
                    "Direct %s: rank %d's mailbox holds no Direct addresses for this operation: "
                    "the ranks chose different algorithms (is NCCL_ALGO, NCCL_PROTO or the use "
                    "of symmetric windows the same on every rank?)",
                    tt_coll_name((enum tt_coll)op->coll), p);
}

static void block_of(const struct tt_op *op, int r, size_t *first, size_t *count)
{
    size_t n = (size_t)op->nranks, per = (op->count + n - 1) / n;
    size_t start = per * (size_t)r;
    *first = start;
    *count = start >= op->count ? 0 : (op->count - start < per ? op->count - start : per);
}

/* Streaming copies. Non-temporal stores skip reading each destination line before writing it,
 * but also push the data out of the caches, where a benchmark loop (or a training step) would
 * find it again. What decides is the footprint of the operation: the bytes of every rank's
 * send and receive buffers together: copies stream once it exceeds four times the L3 the kernel
 * reports (comm.c sets the bound; TUTTI_STREAM_FOOTPRINT overrides it), where streaming measured
 * faster. The pieces AllReduce's fold pushes to further mapped outputs never stream, which
 * measured faster too (docs/performance.md, "Measurements behind the code"). */
static size_t footprint(const struct tt_op *op)
{
    size_t n = (size_t)op->nranks, b = op->count * op->elt_bytes, blocks;
    switch (op->coll) {
    case TT_COLL_ALLGATHER:
    case TT_COLL_REDUCESCATTER: blocks = n * (n + 1); break; /* n inputs of 1 or n blocks... */
    case TT_COLL_ALLTOALL: blocks = 2 * n * n; break;       /* ...and n outputs of n or 1 */
    case TT_COLL_BROADCAST:
    case TT_COLL_REDUCE: blocks = n + 1; break;             /* one root buffer and n others */
    default: blocks = 2 * n; break;                         /* AllReduce: n inputs, n outputs */
    }
    size_t bytes;
    return __builtin_mul_overflow(blocks, b, &bytes) ? SIZE_MAX : bytes;
}

/* Bytes [off, off + len) of peer buffer b as mapped here, or NULL when not all of them are. */
static char *mapped_at(const struct tt_peer_buf *b, size_t off, size_t len)
{
    if (b->map == NULL || off < b->lo || off > b->hi || len > b->hi - off) return NULL;
    return (char *)b->map + (off - b->lo);
}

/* At most `len`: the bytes from `off` on that stay on one side of each edge of b's mapped part,
 * so that a piece so cut is either mapped whole or not at all. */
static size_t cut_at_edges(const struct tt_peer_buf *b, size_t off, size_t len)
{
    if (b->map == NULL) return len;
    if (b->lo > off && b->lo - off < len) len = b->lo - off;
    if (b->hi > off && b->hi - off < len) len = b->hi - off;
    return len;
}

static void copy_bytes(const struct tt_op *op, void *dst, const void *src, size_t bytes)
{
    if (op->env->scratch->stream)
        tt_copy_stream(dst, src, bytes);
    else
        memcpy(dst, src, bytes);
}

/* Broadcast's and AllGather's fan-out: copies `bytes` from offset `src_off` of rank `from`'s send
 * buffer to offset `dst_off` of every rank's output, piece by piece through the cache. */
static ncclResult_t fan_out(struct tt_op *op, int from, size_t src_off, size_t dst_off,
                            size_t bytes)
{
    struct tt_direct_scratch *sc = op->env->scratch;
    size_t n;
    for (size_t done = 0; done < bytes; done += n) {
        n = bytes - done < sc->tmp_bytes ? bytes - done : sc->tmp_bytes;
        for (int q = 0; q < op->nranks; q++) {
            if (q == op->rank) continue;
            if (q == from) n = cut_at_edges(&sc->send[q], src_off + done, n);
            n = cut_at_edges(&sc->recv[q], dst_off + done, n);
        }
        const char *src;
        if (from == op->rank) {
            src = (const char *)op->sendbuff + src_off + done;
        } else if ((src = mapped_at(&sc->send[from], src_off + done, n)) == NULL) {
            TT_TRY(tt_team_read(op->env->team, from, sc->tmp, sc->send[from].addr + src_off + done,
                                n));
            src = sc->tmp;
        }
        for (int q = 0; q < op->nranks; q++) {
            size_t at = dst_off + done;
            char *dst = q == op->rank ? (char *)op->recvbuff + at : mapped_at(&sc->recv[q], at, n);
            if (dst == NULL)
                TT_TRY(tt_team_write(op->env->team, q, sc->recv[q].addr + at, src, n));
            else if (dst != src)
                copy_bytes(op, dst, src, n);
        }
    }
    return ncclSuccess;
}

/* Whether this rank reads peer p's send buffer in this operation. */
static bool reads_send_of(const struct tt_op *op, int p)
{
    switch (op->coll) {
    case TT_COLL_BROADCAST: return p == op->root;
    case TT_COLL_ALLGATHER: return !op->env->scratch->fan_out;
    default: return true;
    }
}

/* Whether every rank published its output as shareable memory (see fan_out). */
static bool outputs_shareable(const struct tt_op *op)
{
    for (int p = 0; p < op->nranks; p++) {
        const struct addresses *a = tt_team_peer_slot(op->env->team, p, st(op)->slot);
        if (a->recv_region.fd < 0) return false;
    }
    return true;
}

/* Whom fold pushes its pieces to: nobody, every peer, or one rank (>= 0). */
enum { PUSH_NONE = -2, PUSH_ALL = -1 };

static bool pushes_to(int push, int p) { return push == PUSH_ALL || push == p; }

/* Folds elements [first, first + count) of every rank's send buffer, own contribution first and
 * then the peers in rank order, into dst_base (piece by piece through the staging area; a NULL
 * dst_base keeps each piece in the scratch's stage only). Each finished piece is then pushed
 * (`push`) to the same place in every peer's receive buffer or in one rank's: stored there when
 * that buffer is mapped here, else written with cross-memory attach while it is in cache. */
static ncclResult_t fold(struct tt_op *op, size_t first, size_t count, char *dst_base, int push)
{
    struct tt_direct_scratch *sc = op->env->scratch;
    size_t elt = op->elt_bytes;
    size_t piece = sc->tmp_bytes / elt;
    bool premul = op->redop.kind == TT_RED_PREMULSUM;
    int last = op->rank == op->nranks - 1 ? op->nranks - 2 : op->nranks - 1;
    /* The peer whose mapped output the fold's last store may feed directly. */
    int first_out = push == PUSH_ALL ? (op->rank == 0 ? 1 : 0) : push;
    size_t n;
    for (size_t done = 0; done < count; done += n) {
        size_t off = (first + done) * elt;
        size_t span = (count - done < piece ? count - done : piece) * elt;
        for (int p = 0; p < op->nranks; p++) {
            if (p == op->rank) continue;
            span = cut_at_edges(&sc->send[p], off, span);
            if (push != PUSH_NONE && pushes_to(push, p))
                span = cut_at_edges(&sc->recv[p], off, span);
        }
        /* An edge inside an element leaves that element on neither side: it is copied. */
        n = span >= elt ? span / elt : 1;
        char *dst = dst_base != NULL ? dst_base + done * elt : (char *)sc->stage;
        char *store = first_out >= 0 ? mapped_at(&sc->recv[first_out], off, n * elt) : NULL;
        const char *own = (const char *)op->sendbuff + off;
        bool first_peer = true;
        for (int p = 0; p < op->nranks; p++) {
            if (p == op->rank) continue;
            /* A peer's input is multiplied by that peer's scalar, as it would itself. */
            struct tt_redop peer_op;
            if (premul) {
                peer_op = op->redop;
                memcpy(&peer_op.scalar, &sc->send[p].premul, sizeof peer_op.scalar);
            }
            const void *in = mapped_at(&sc->send[p], off, n * elt);
            if (in != NULL) {
                if (premul) tt_reduce_copy(&peer_op, sc->tmp, in, n, TT_REDUCE_PRE);
            } else {
                TT_TRY(tt_team_read(op->env->team, p, sc->tmp, sc->send[p].addr + off, n * elt));
                if (premul) tt_reduce_copy(&peer_op, sc->tmp, sc->tmp, n, TT_REDUCE_PRE);
                in = sc->tmp;
            }
            if (premul) in = sc->tmp;
            unsigned flags = (p == last ? TT_REDUCE_POST : 0) | (first_peer ? TT_REDUCE_PRE : 0);
            const void *local = first_peer ? (const void *)own : dst;
            if (store != NULL && p == last)
                tt_reduce_combine2(&op->redop, dst, store, local, in, n, flags);
            else
                tt_reduce_combine(&op->redop, dst, local, in, n, flags);
            first_peer = false;
        }
        for (int p = 0; push != PUSH_NONE && p < op->nranks; p++) {
            if (p == op->rank || !pushes_to(push, p) || (p == first_out && store != NULL))
                continue;
            char *out = mapped_at(&sc->recv[p], off, n * elt);
            if (out != NULL)
                memcpy(out, dst, n * elt); /* never streamed */
            else
                TT_TRY(tt_team_write(op->env->team, p, sc->recv[p].addr + off, dst, n * elt));
        }
    }
    return ncclSuccess;
}

/* Copies `bytes` at offset `off` of peer p's send buffer to `dst`: with plain loads where the
 * buffer is mapped here, else with cross-memory attach. */
static ncclResult_t copy_from(struct tt_op *op, int p, size_t off, void *dst, size_t bytes)
{
    const struct tt_peer_buf *b = &op->env->scratch->send[p];
    size_t n;
    for (size_t done = 0; done < bytes; done += n) {
        n = cut_at_edges(b, off + done, bytes - done);
        const char *src = mapped_at(b, off + done, n);
        if (src != NULL)
            copy_bytes(op, (char *)dst + done, src, n);
        else
            TT_TRY(tt_team_read(op->env->team, p, (char *)dst + done, b->addr + off + done, n));
    }
    return ncclSuccess;
}

/* The work between "addresses published" and the last event, per collective. */
static ncclResult_t copy_work(struct tt_op *op)
{
    size_t elt = op->elt_bytes, bytes = op->count * elt;
    switch (op->coll) {
    case TT_COLL_ALLREDUCE: {
        size_t first, count;
        block_of(op, op->rank, &first, &count);
        return fold(op, first, count, (char *)op->recvbuff + first * elt, PUSH_ALL);
    }
    case TT_COLL_REDUCESCATTER:
        return fold(op, (size_t)op->rank * op->count, op->count, op->recvbuff, PUSH_NONE);
    case TT_COLL_REDUCE: {
        /* Like AllReduce's fold, but the result goes to the root alone: the work is shared by
         * every rank instead of the root folding every peer's whole input by itself. */
        size_t first, count;
        block_of(op, op->rank, &first, &count);
        if (op->rank == op->root)
            return fold(op, first, count, (char *)op->recvbuff + first * elt, PUSH_NONE);
        return fold(op, first, count, NULL, op->root);
    }
    case TT_COLL_BROADCAST:
        if (op->env->scratch->fan_out) {
            size_t first, count;
            block_of(op, op->rank, &first, &count);
            return count ? fan_out(op, op->root, first * elt, first * elt, count * elt)
                         : ncclSuccess;
        }
        if (op->rank != op->root) return copy_from(op, op->root, 0, op->recvbuff, bytes);
        if (op->recvbuff != op->sendbuff) copy_bytes(op, op->recvbuff, op->sendbuff, bytes);
        return ncclSuccess;
    case TT_COLL_ALLTOALL:
        for (int p = 0; p < op->nranks; p++) {
            char *dst = (char *)op->recvbuff + (size_t)p * bytes;
            size_t off = (size_t)op->rank * bytes;
            if (p != op->rank)
                TT_TRY(copy_from(op, p, off, dst, bytes));
            else
                copy_bytes(op, dst, (const char *)op->sendbuff + off, bytes);
        }
        return ncclSuccess;
    case TT_COLL_ALLGATHER:
        if (op->env->scratch->fan_out)
            return fan_out(op, op->rank, 0, (size_t)op->rank * bytes, bytes);
        for (int p = 0; p < op->nranks; p++) {
            char *dst = (char *)op->recvbuff + (size_t)p * bytes;
            if (p != op->rank)
                TT_TRY(copy_from(op, p, 0, dst, bytes));
            else if (dst != op->sendbuff)
                copy_bytes(op, dst, op->sendbuff, bytes);
        }
        return ncclSuccess;
    default:
        return TT_ERROR(ncclInternalError, "Direct has no schedule for collective %d", op->coll);
    }
}

/* Maps what is shareable of peer p's buffer `r` (its part [r->lo, r->hi)) into `b`. */
static void map_peer(struct tt_op *op, int p, const struct tt_team_region *r,
                     struct tt_peer_buf *b)
{
    /* Read once: `r` lies in the peer's mailbox, which the peer may change under us; what is
     * checked (tt_team_map) is what is used. */
    struct tt_team_region copy = *r;
    __asm__ volatile("" ::: "memory"); /* no load of `copy` may be served from `r` again */
    b->map = tt_team_map(op->env->team, p, &copy);
    b->lo = b->map != NULL ? copy.lo : 0;
    b->hi = b->map != NULL ? copy.hi : 0;
}

/* Whether every peer reached `event`; otherwise records whom we wait for. */
static bool all_reached(struct tt_op *op, uint64_t event, struct tt_wait_hint *hint)
{
    for (int p = 0; p < op->nranks; p++) {
        if (p != op->rank && !tt_team_reached(op->env->team, p, event, hint)) {
            op->waiting = TT_OP_WAIT_DATA;
            op->waiting_peer = p;
            return false;
        }
    }
    return true;
}

/* Events: addresses published, done. */
#define EVENTS 2

static ncclResult_t direct_step(struct tt_op *op, bool *done, bool *progressed,
                                struct tt_wait_hint *hint)
{
    uint64_t base = st(op)->event_base;
    switch (st(op)->phase) {
    case RESERVE:
        if (op->count == 0) {
            *done = true;
            return ncclSuccess;
        }
        tt_team_op_begin(op->env->team, EVENTS, &st(op)->event_base, &st(op)->slot);
        base = st(op)->event_base;
        st(op)->phase = PUBLISH;
        /* fall through */
    case PUBLISH: {
        if (!tt_team_slot_free(op->env->team, st(op)->slot, hint)) {
            op->waiting = TT_OP_WAIT_CREDIT;
            return ncclSuccess;
        }
        struct addresses *mine = tt_team_my_slot(op->env->team, st(op)->slot);
        mine->desc = op->desc;
        mine->send = (uint64_t)(uintptr_t)op->sendbuff;
        mine->recv = (uint64_t)(uintptr_t)op->recvbuff;
        mine->send_region = st(op)->send_region;
        mine->recv_region = st(op)->recv_region;
        mine->magic = DIRECT_MAGIC;
        mine->base = base;
        memcpy(&mine->premul, &op->redop.scalar, sizeof mine->premul);
        tt_team_post(op->env->team, base + 1);
        st(op)->phase = ADDRESSES;
        tt_algo_trace_step(op, "publish", -1, -1, 0);
        *progressed = true;
    }
        /* fall through */
    case ADDRESSES:
        if (!all_reached(op, base + 1, hint)) return ncclSuccess;
        for (int p = 0; p < op->nranks; p++) {
            const struct addresses *a = tt_team_peer_slot(op->env->team, p, st(op)->slot);
            if (p != op->rank) TT_TRY(check_peer_slot(op, p, a));
            op->env->scratch->send[p] = (struct tt_peer_buf){.addr = (uintptr_t)a->send,
                                                             .premul = a->premul};
            op->env->scratch->recv[p] = (struct tt_peer_buf){.addr = (uintptr_t)a->recv};
        }
        /* AllReduce may push to the peers' outputs and reads them; Broadcast and AllGather fan
         * out to them when all are shareable. Only the blocks this rank will touch are mapped. */
        op->env->scratch->stream = footprint(op) > op->env->scratch->stream_min_footprint;
        op->env->scratch->fan_out = (op->coll == TT_COLL_BROADCAST ||
                                op->coll == TT_COLL_ALLGATHER) && outputs_shareable(op);
        for (int p = 0; p < op->nranks; p++) {
            if (p == op->rank) continue;
            const struct addresses *a = tt_team_peer_slot(op->env->team, p, st(op)->slot);
            if (reads_send_of(op, p))
                map_peer(op, p, &a->send_region, &op->env->scratch->send[p]);
            if (op->coll == TT_COLL_ALLREDUCE || op->env->scratch->fan_out ||
                (op->coll == TT_COLL_REDUCE && p == op->root))
                map_peer(op, p, &a->recv_region, &op->env->scratch->recv[p]);
        }
        st(op)->phase = WORK;
        tt_algo_trace_step(op, "addresses", -1, -1, 0);
        /* fall through */
    case WORK:
        TT_TRY(copy_work(op));
        tt_team_post(op->env->team, base + EVENTS);
        tt_team_op_end(op->env->team, st(op)->slot, base + EVENTS);
        st(op)->phase = DONE_WAIT;
        tt_algo_trace_step(op, "copy", -1, -1, op->count * op->elt_bytes);
        *progressed = true;
        /* fall through */
    case DONE_WAIT:
        if (!all_reached(op, base + EVENTS, hint)) return ncclSuccess;
        tt_algo_trace_step(op, "done_wait", -1, -1, 0);
        *done = true;
        return ncclSuccess;
    default:
        return TT_ERROR(ncclInternalError, "Direct %s in unknown state %d",
                         tt_coll_name((enum tt_coll)op->coll), st(op)->phase);
    }
}

/* ---- The cost model ------------------------------------------------------------------------ */

/* Direct exists within one host only. Three rows (docs/performance.md, "Cost model
 * constants"): the general one; AllReduce over ordinary buffers, which pushes its block from
 * cache instead of gathering it; and buffers in symmetric windows in shareable memory, which the
 * peers map, so there are no kernel calls and copies and folds run at memory speed. An
 * oversubscribed host keeps the general row for AllReduce, where the ring matched or beat the
 * push. */
static const struct tt_cost direct_cost = {.alpha_us = 5.0, .gbytes_per_s = 7.0,
                                           .syscall_us = 2.0, .chunk_bytes = 262144};
static const struct tt_cost direct_allreduce_cost = {.alpha_us = 1.0, .gbytes_per_s = 20.0,
                                                     .syscall_us = 0.7, .chunk_bytes = 262144};
static const struct tt_cost direct_mapped_cost = {.alpha_us = 1.0, .gbytes_per_s = 30.0,
                                                  .chunk_bytes = 262144};

/* AllReduce over ordinary buffers, not oversubscribed, where the ranks measured what a
 * cross-memory copy costs against a memcpy (cma_cost_pct, agreed at init). While the
 * operation's buffers (send and receive, every rank's) fit in the last-level cache, the row's
 * 20 GB/s holds; the share of the bytes beyond it is moved at this many GB/s divided by that
 * ratio (at most the row's). Beyond the cache the kernel's copies (pinning each page, then
 * copying with ordinary stores into a destination that is not in cache) are what set Direct
 * apart from the ring, whose pieces pass through a FIFO that stays cached, and their cost moves
 * with the machine: the development VM measured a copy at about 4 memcpys, and there the ring
 * beat Direct by 1.3-1.4x from 16 MiB at 2 ranks in one phase of the VM and tied in the other,
 * while up to 4 MiB the winner flipped with the phase, by 1.4-2x either way. Fitted there (docs/tuning.md,
 * "Direct and the cost of cross-memory copies"): 10 puts the switch to the ring between 8 and
 * 16 MiB at 2 ranks and a 32 MiB cache for any measured ratio above 2.8 (the VM's init-time
 * measurements ranged 3.1-5.0); beyond the cache Direct wins where a cross-memory copy costs
 * under about 1.6 memcpys. */
#define DIRECT_CMA_PAR_GBPS 10.0

/* The bytes AllReduce's moves beyond the cache are charged at the measured rate: the share of
 * its buffers (2 n per-rank buffers) that does not fit in `llc_bytes` (0: all of it). */
static double beyond_cache_share(const struct tt_tune_input *in)
{
    double footprint = 2.0 * in->nranks * (double)in->bytes;
    if (footprint <= (double)in->llc_bytes) return 0;
    return 1 - (double)in->llc_bytes / footprint;
}

/* How much slower cross-memory copies run with more ranks than CPUs: every rank's kernel
 * copies must run at once, and they cannot (mapped buffers keep their speed). */
#define OVERSUBSCRIBED_SLOWDOWN 2.0

/* AllReduce: a rank reads its n-th of the buffer from each of its n-1 peers by cross-memory
 * attach, one call per chunk, reduces it, and writes each reduced chunk into the n-1 peers'
 * outputs, one call per chunk and peer; it moves 2(n-1) n-ths in all. Its two phases are the
 * exchange of addresses and the wait for everyone's pushes. The others have one phase:
 * AllGather reads n-1 whole blocks (one call each), Broadcast one buffer, and
 * ReduceScatter/Reduce fold n-1 peers' blocks through the staging chunks. Reduce over ordinary
 * buffers is charged as if the root folded every input and then pushed it as much again: forced,
 * it still lost to the ring, which the honest count would not predict (docs/tuning.md). */
static double direct_estimate_us(const struct tt_tune_input *in)
{
    if (in->nhosts > 1) return INFINITY;
    const struct tt_cost *c = &direct_cost;
    if (in->coll == TT_COLL_ALLREDUCE && !in->oversubscribed) c = &direct_allreduce_cost;
    if (in->symmetric) c = &direct_mapped_cost;
    double n = in->nranks, bytes = (double)in->bytes, chunk = (double)c->chunk_bytes;
    double phases = 1, calls, moved;
    switch (in->coll) {
    case TT_COLL_ALLREDUCE: {
        double slice = bytes / n;
        phases = 2;
        calls = 2 * (n - 1) * ceil(slice / chunk);
        moved = 2 * (n - 1) * slice;
        break;
    }
    case TT_COLL_ALLGATHER:
        calls = n - 1;
        moved = (n - 1) * bytes;
        break;
    case TT_COLL_BROADCAST:
        calls = 1;
        moved = bytes;
        break;
    default:
        calls = (n - 1) * ceil(bytes / chunk);
        moved = (n - 1) * bytes;
        if (in->coll == TT_COLL_REDUCE && !in->symmetric) moved += bytes;
        break;
    }
    double gbps = c->gbytes_per_s;
    if (in->oversubscribed && !in->symmetric) gbps /= OVERSUBSCRIBED_SLOWDOWN;
    double copy_us = tt_transfer_us(moved, gbps);
    if (c == &direct_allreduce_cost && in->cma_cost_pct > 0) {
        double beyond = beyond_cache_share(in);
        double slow = fmin(gbps, DIRECT_CMA_PAR_GBPS * 100.0 / in->cma_cost_pct);
        copy_us = tt_transfer_us((1 - beyond) * moved, gbps) + tt_transfer_us(beyond * moved, slow);
    }
    return phases * c->alpha_us + copy_us + c->syscall_us * calls;
}

/* ---- The algorithm ------------------------------------------------------------------------- */

static bool direct_implements(enum tt_coll coll)
{
    return coll <= TT_COLL_REDUCESCATTER;
}

static bool direct_can_run(const struct tt_tune_input *in)
{
    return in->direct_ok;
}

/* Finds what of the buffers lies in shareable memory (ncclMemAlloc blocks, registered pages):
 * the peers map that part instead of copying it out. The buffers span NCCL's count per rank, n
 * blocks of it where a side holds every rank's block. */
static void direct_bind(struct tt_op *op, const struct tt_algo_env *env)
{
    size_t bytes = op->count * op->elt_bytes, all = bytes * (size_t)op->nranks;
    size_t send = op->coll == TT_COLL_REDUCESCATTER || op->coll == TT_COLL_ALLTOALL ? all : bytes;
    size_t recv = op->coll == TT_COLL_ALLGATHER || op->coll == TT_COLL_ALLTOALL ? all : bytes;
    env->region(op->sendbuff, send, &st(op)->send_region);
    env->region(op->recvbuff, recv, &st(op)->recv_region);
}

const struct tt_algo tt_algo_direct = {
    .name = "Direct",
    .proto = TT_PROTO_SIMPLE,
    .implements = direct_implements,
    .can_run = direct_can_run,
    .estimate_us = direct_estimate_us,
    .bind = direct_bind,
    .step = direct_step,
};
