/* Tasks from operations (core/task.h): the reduction resolved, the lane and connections bound,
 * and for a collective the algorithm chosen by selection (algo/tune.c) and bound through the
 * algorithm table. */
#include "core/task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/mem.h"
#include "core/redop.h"
#include "util/err.h"
#include "util/log.h"

static bool is_reduction(enum tt_coll coll)
{
    return coll == TT_COLL_ALLREDUCE || coll == TT_COLL_REDUCE || coll == TT_COLL_REDUCESCATTER;
}

/* The bytes a collective's send and receive buffers span (NCCL's count is per rank). */
static void buffer_spans(const struct tt_op *op, int nranks, size_t *send, size_t *recv)
{
    size_t bytes = op->count * op->elt_bytes, all = bytes * (size_t)nranks;
    *send = op->coll == TT_COLL_REDUCESCATTER || op->coll == TT_COLL_ALLTOALL ? all : bytes;
    *recv = op->coll == TT_COLL_ALLGATHER || op->coll == TT_COLL_ALLTOALL ? all : bytes;
}

/* Whether the buffers lie in symmetric windows that every rank put in shareable memory
 * (core/mem.c settles that when the window is registered), on a host where Direct runs: then,
 * by NCCL's contract for such windows, every rank's buffers do. Only the buffers every rank
 * passes count: Broadcast's non-roots may pass any send buffer (even NULL) and Reduce's
 * non-roots any receive buffer, and a root that looked at those would choose alone. Below 4 KiB
 * the windows cannot change the choice (OneShot's single hand-off wins either way), so the
 * lookup is skipped there and the smallest operations keep their fast path; the rule depends on
 * the operation alone, so every rank applies it alike. From TUTTI_SHAREABLE_BYTES on (equal on
 * every rank, compared at init) the ranks promised such buffers without windows: the size
 * alone decides, alike everywhere (a buffer that breaks the promise is copied by cross-memory
 * attach: slower, never wrong). */
static bool symmetric_buffers(const struct tt_op *op, const struct ncclComm *comm)
{
    /* TUTTI_SHAREABLE_BYTES: the ranks promised shareable buffers from that size on. */
    size_t bytes = op->count * op->elt_bytes;
    if (comm->shareable_bytes > 0 && bytes >= comm->shareable_bytes && bytes >= 4096)
        return comm->direct_ok;
    if (atomic_load_explicit(&comm->sym_windows, memory_order_relaxed) == 0 || !comm->direct_ok ||
        bytes < 4096)
        return false;
    size_t send, recv;
    buffer_spans(op, comm->st.nranks, &send, &recv);
    bool send_counts = op->coll != TT_COLL_BROADCAST;
    bool recv_counts = op->coll != TT_COLL_REDUCE;
    return (!send_counts || tt_mem_sym_window(comm, op->sendbuff, send)) &&
           (!recv_counts || tt_mem_sym_window(comm, op->recvbuff, recv));
}

/* Tree sends whole messages: at most half a connection FIFO (whole elements per slot), so no
 * send waits for its receiver (algo/tree.c); 0 when init made no Tree connections. */
static size_t tree_max_bytes(const struct ncclComm *comm, size_t elt_bytes)
{
    if (!comm->tree_ready || elt_bytes == 0) return 0;
    return comm->slot_bytes / elt_bytes * elt_bytes * (TT_CONN_SLOTS / 2);
}

/* What the cost model needs to know about a collective task. */
static void tune_input(const struct tt_task *task, const struct ncclComm *comm, bool symmetric,
                       struct tt_tune_input *out)
{
    const struct tt_op *op = &task->op;
    struct tt_team *team = comm->team_spans ? comm->st.team : NULL;
    size_t slot = team ? tt_team_slot_bytes(team) : 0;
    *out = (struct tt_tune_input){
        .coll = (enum tt_coll)op->coll,
        .bytes = op->count * op->elt_bytes,
        .nranks = comm->st.nranks,
        .nhosts = comm->nhosts,
        .link = comm->ring_link,
        .oneshot_ok = team != NULL,
        /* ReduceScatter publishes its whole input: nranks blocks. */
        .oneshot_max_bytes = op->coll == TT_COLL_REDUCESCATTER ? slot / (size_t)comm->st.nranks
                                                               : slot,
        .direct_ok = comm->direct_ok,
        .cma_cost_pct = comm->cma_cost_pct,
        .llc_bytes = comm->llc_bytes,
        .symmetric = symmetric,
        .oversubscribed = comm->oversubscribed,
        .cpus = (int)comm->host_cpus,
        .tree_max_bytes = tree_max_bytes(comm, op->elt_bytes),
        .hier_nlocal = comm->hier.valid && comm->tree_ready ? comm->hier.nlocal : 0,
        .net_alpha_us = comm->net_alpha_us,
        .net_gbps = comm->net_gbps,
    };
}

/* The selection model's last answer on this thread, reused for a repeat of the same collective
 * and size on the same communicator: the model is deterministic, so every rank still makes the
 * same choice. Per thread, so that threads issuing on one communicator never share it. */
struct tune_memo {
    uint64_t comm_id; /* 0: empty */
    int coll;
    size_t bytes;
    size_t elt_bytes; /* Tree's limit is in whole elements per slot (tree_max_bytes) */
    bool symmetric;
    enum tt_algo_id algo;
    enum tt_proto_id proto;
    float estimate_us;
};
static _Thread_local struct tune_memo memo __attribute__((tls_model("initial-exec")));

/* Once per communicator and collective: NCCL_ALGO/NCCL_PROTO forced a choice that cannot run
 * this operation here, so it runs Ring, which a benchmark of the forced algorithm must know. */
__attribute__((cold, noinline)) static void warn_fallback(const struct tt_task *task,
                                                          struct ncclComm *comm)
{
    uint32_t bit = 1u << task->op.coll;
    if (atomic_fetch_or(&comm->fallback_warned, bit) & bit) return;
    TT_WARN("rank %d: %s of %zu bytes: %s; it runs Ring (said once per collective; "
            "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING shows each)",
            comm->st.rank, tt_coll_name(task->op.coll), task->op.count * task->op.elt_bytes,
            task->choice.reason);
}

/* Asks selection which algorithm runs this collective and binds the op to it. */
static void choose_algorithm(struct tt_task *task, struct ncclComm *comm)
{
    struct tt_op *op = &task->op;
    enum tt_algo_id algo = TT_ALGO_RING;
    if (comm->st.nranks > 1) {
        /* A repeat of the last collective reuses the answer, unless INFO logging wants the
         * reason spelled out. */
        size_t bytes = op->count * op->elt_bytes;
        bool symmetric = symmetric_buffers(op, comm);
        if (memo.comm_id == comm->id && memo.coll == op->coll && memo.bytes == bytes &&
            memo.elt_bytes == op->elt_bytes && memo.symmetric == symmetric &&
            !TT_LOG_MAYBE(TT_LOG_INFO)) {
            task->choice.algo = memo.algo;
            task->choice.proto = memo.proto;
            task->choice.estimate_us = memo.estimate_us;
        } else {
            struct tt_tune_input in;
            tune_input(task, comm, symmetric, &in);
            tt_tune_select(&comm->tune, &in, &task->choice);
            if (__builtin_expect(task->choice.fallback, 0)) warn_fallback(task, comm);
            memo = (struct tune_memo){.comm_id = comm->id, .coll = op->coll, .bytes = bytes,
                                      .elt_bytes = op->elt_bytes, .symmetric = symmetric,
                                      .algo = task->choice.algo,
                                      .proto = task->choice.proto,
                                      .estimate_us = task->choice.estimate_us};
        }
        algo = task->choice.algo;
    }
    tt_algo_bind(op, algo, &comm->algo_env);
}

/* AlltoAll's path. Small ones run as OneShot: each rank publishes its whole input in its mailbox
 * slot and copies block r of every peer's slot, one hand-off in all. From blocks of
 * DIRECT_ALLTOALL_MIN_BYTES on, Direct copies every block straight out of the peers' send
 * buffers, where one kernel copy per peer beats two copies through a FIFO; from 4 KiB per rank
 * when both buffers lie in symmetric windows, whose plain-load copies beat OneShot's two copies
 * there (measured: docs/tuning.md). NCCL_ALGO as it applies to AllGather, which moves the same
 * bytes, steers it: Direct alone forces Direct, a list without OneShot or Direct forbids that
 * one. */
#define DIRECT_ALLTOALL_MIN_BYTES (16u << 10)
enum tt_alltoall_path tt_task_alltoall_path(const struct ncclComm *comm, const void *sendbuff,
                                            const void *recvbuff, size_t block_bytes)
{
    if (comm->st.nranks < 2 || block_bytes == 0) return TT_ALLTOALL_P2P;
    const bool *allowed = comm->tune.algo_allowed[TT_COLL_ALLGATHER];
    size_t all = block_bytes * (size_t)comm->st.nranks;
    bool direct = allowed[TT_ALGO_DIRECT] && comm->direct_ok;
    bool oneshot = allowed[TT_ALGO_ONESHOT] && comm->team_spans &&
                   all <= tt_team_slot_bytes(comm->st.team);
    if (direct && !allowed[TT_ALGO_RING] && !allowed[TT_ALGO_ONESHOT]) return TT_ALLTOALL_DIRECT;
    if (direct && all >= 4096 && tt_mem_sym_window(comm, sendbuff, all) &&
        tt_mem_sym_window(comm, recvbuff, all))
        return TT_ALLTOALL_DIRECT;
    if (oneshot) return TT_ALLTOALL_ONESHOT;
    return direct && block_bytes >= DIRECT_ALLTOALL_MIN_BYTES ? TT_ALLTOALL_DIRECT
                                                              : TT_ALLTOALL_P2P;
}

/* An AlltoAll submitted whole runs over OneShot or Direct (the submission layer expands the
 * others into sends and receives). */
static void bind_alltoall(struct tt_task *task, struct ncclComm *comm)
{
    struct tt_op *op = &task->op;
    size_t block = op->count * op->elt_bytes;
    bool oneshot = tt_task_alltoall_path(comm, op->sendbuff, op->recvbuff, block) ==
                   TT_ALLTOALL_ONESHOT;
    task->choice.algo = oneshot ? TT_ALGO_ONESHOT : TT_ALGO_DIRECT;
    task->choice.proto = oneshot ? TT_PROTO_LL : TT_PROTO_SIMPLE;
    snprintf(task->choice.reason, sizeof task->choice.reason, "%s",
             oneshot ? "AlltoAll inputs fit the mailbox slots"
                     : "AlltoAll blocks copied straight from the peers");
    tt_algo_bind(op, task->choice.algo, &comm->algo_env);
}

void tt_task_buffer_counts(const struct tt_coll_args *args, int rank, int nranks,
                           size_t *send_count, size_t *recv_count)
{
    size_t all = args->count * (size_t)nranks;
    bool root = rank == args->root;
    *send_count = *recv_count = args->count;
    switch ((int)args->coll) {
    case TT_COLL_BROADCAST: *send_count = root ? args->count : 0; break;
    case TT_COLL_REDUCE: *recv_count = root ? args->count : 0; break;
    case TT_COLL_ALLGATHER: *recv_count = all; break;
    case TT_COLL_REDUCESCATTER: *send_count = all; break;
    case TT_COLL_ALLTOALL: *send_count = *recv_count = all; break;
    case TT_COLL_GATHER: *recv_count = root ? all : 0; break;
    case TT_COLL_SCATTER: *send_count = root ? all : 0; break;
    case TT_COLL_SEND: *recv_count = 0; break;
    case TT_COLL_RECV: *send_count = 0; break;
    default: break;
    }
}

ncclResult_t tt_task_init(struct tt_task *task, struct ncclComm *comm,
                          const struct tt_coll_args *args, int peer)
{
    memset(task, 0, offsetof(struct tt_task, choice));
    task->choice.algo = TT_ALGO_RING;
    task->choice.proto = TT_PROTO_SIMPLE;
    task->choice.estimate_us = 0;
    task->choice.reason[0] = '\0';
    task->comm = comm;
    task->comm_id = comm->id;
    task->st = &comm->st;
    task->peer = peer;
    task->result = ncclSuccess;
    struct tt_op *op = &task->op;
    op->coll = args->coll;
    op->sendbuff = args->sendbuff;
    op->recvbuff = args->recvbuff;
    op->count = args->count;
    op->root = args->root;
    op->rank = comm->st.rank;
    op->nranks = comm->st.nranks;
    op->elt_bytes = tt_dtype_bytes(args->dtype);
    op->mem = tt_device_mem_kind(args->recvbuff != NULL ? args->recvbuff : args->sendbuff);
    op->trace = comm->trace;
    bool rooted = args->coll == TT_COLL_BROADCAST || args->coll == TT_COLL_REDUCE;
    op->desc = (struct tt_op_desc){.count = args->count, .root = rooted ? args->root : -1,
                                   .coll = (uint8_t)args->coll, .dtype = (uint8_t)args->dtype,
                                   .op = is_reduction(args->coll) ? (uint16_t)args->op : 0};
    /* Operations without a reduction still carry the dtype: copies use it for element sizes. */
    if (!is_reduction(args->coll))
        TT_TRY(tt_redop_init(&op->redop, ncclSum, args->dtype, comm->st.nranks));
    else if ((unsigned)args->op < (unsigned)ncclNumOps) /* built in: no table, no lock */
        TT_TRY(tt_redop_init(&op->redop, args->op, args->dtype, comm->st.nranks));
    else
        TT_TRY(tt_redop_resolve(comm, args->op, args->dtype, &op->redop));
    /* Element sizes are powers of two: a shift, not a division, on every call's path. */
    op->slice_count = comm->slot_bytes >> __builtin_ctzll((unsigned long long)op->elt_bytes);
    op->chunk_count = op->slice_count * (TT_CONN_SLOTS / 2);
    switch (args->coll) {
    case TT_COLL_SEND:
        task->lane = &comm->p2p[peer].send_lane;
        tt_algo_bind_p2p(op, &comm->p2p[peer].send);
        break;
    case TT_COLL_RECV:
        task->lane = &comm->p2p[peer].recv_lane;
        tt_algo_bind_p2p(op, &comm->p2p[peer].recv);
        break;
    case TT_COLL_COPY:
        task->lane = NULL;
        tt_algo_bind_p2p(op, NULL);
        break;
    case TT_COLL_ALLTOALL:
        task->lane = &comm->ring_lane;
        bind_alltoall(task, comm);
        break;
    default:
        task->lane = &comm->ring_lane;
        choose_algorithm(task, comm);
        break;
    }
    return ncclSuccess;
}

ncclResult_t tt_task_create(struct ncclComm *comm, const struct tt_coll_args *args, int peer,
                            struct tt_task **out)
{
    struct tt_task *task = malloc(sizeof *task);
    if (task == NULL) return TT_ERROR(ncclSystemError, "out of memory for a task");
    ncclResult_t res = tt_task_init(task, comm, args, peer);
    if (res != ncclSuccess) {
        free(task);
        return res;
    }
    task->heap = true;
    *out = task;
    return ncclSuccess;
}

/* Point-to-point tasks, local copies and the collectives of a single rank (a copy too) are
 * costed as one Ring step of their size. */
float tt_task_estimate_us(const struct tt_task *t)
{
    struct tt_tune_input in;
    tune_input(t, t->comm, symmetric_buffers(&t->op, t->comm), &in);
    bool coll = t->op.coll <= TT_COLL_REDUCESCATTER && t->comm->st.nranks > 1;
    if (!coll) {
        in.coll = TT_COLL_BROADCAST;
        in.nranks = 2;
    }
    return tt_tune_estimate_us(&in, coll ? t->choice.algo : TT_ALGO_RING);
}
