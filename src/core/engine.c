/* The engine: tasks on lanes, batches progressed together, and the blocking driver.
 *
 * Progressing a batch walks its tasks once: a task whose lane serves its ticket starts (its
 * schedule is reset) and then advances as far as its connections allow. A finished or failed
 * task hands its lane to the next ticket at once, so a failure never blocks the operations
 * queued behind it (they fail on the communicator's latched error instead). The blocking
 * driver repeats this, backing off (spin, yield, sleep) while nothing moves, and fails the batch
 * when nothing has moved for TUTTI_TIMEOUT_MS: a long operation that keeps moving never times
 * out, a stuck one always does, naming the rank it waits for. */
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/task.h"
#include "util/err.h"
#include "util/log.h"
#include "util/time.h"

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
 * (core/mem.c settles that when the window is registered), on a host where Direct runs: then, by NCCL's contract for such windows, every rank's buffers do. Only the buffers
 * every rank passes count: Broadcast's non-roots may pass any send buffer (even NULL) and
 * Reduce's non-roots any receive buffer, and a root that looked at those would choose alone.
 * Below 4 KiB the windows cannot change the choice (OneShot's single hand-off wins either way),
 * so the lookup is skipped there and the smallest operations keep their fast path; the rule
 * depends on the operation alone, so every rank applies it alike. */
static bool symmetric_buffers(const struct tt_op *op, const struct ncclComm *comm)
{
    if (comm->sym_windows == 0 || !comm->direct_ok || op->count * op->elt_bytes < 4096)
        return false;
    size_t send, recv;
    buffer_spans(op, comm->nranks, &send, &recv);
    bool send_counts = op->coll != TT_COLL_BROADCAST;
    bool recv_counts = op->coll != TT_COLL_REDUCE;
    return (!send_counts || tt_comm_sym_window(comm, op->sendbuff, send)) &&
           (!recv_counts || tt_comm_sym_window(comm, op->recvbuff, recv));
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
    size_t slot = comm->host ? tt_host_slot_bytes(comm->host) : 0;
    *out = (struct tt_tune_input){
        .coll = (enum tt_coll)op->coll,
        .bytes = op->count * op->elt_bytes,
        .nranks = comm->nranks,
        .nhosts = comm->nhosts,
        .oneshot_ok = comm->host != NULL,
        /* ReduceScatter publishes its whole input: nranks blocks. */
        .oneshot_max_bytes = op->coll == TT_COLL_REDUCESCATTER ? slot / (size_t)comm->nranks
                                                               : slot,
        .direct_ok = comm->direct_ok,
        .symmetric = symmetric,
        .oversubscribed = comm->oversubscribed,
        .cpus = (int)comm->host_cpus,
        .tree_max_bytes = tree_max_bytes(comm, op->elt_bytes),
    };
}

/* Sets the op up for Direct, whose buffers span `send_bytes` and `recv_bytes`: what of them lies
 * in shareable memory (ncclMemAlloc blocks, registered pages) is mapped by the peers instead of
 * copied out. */
static void set_direct(struct tt_op *op, struct ncclComm *comm, size_t send_bytes,
                       size_t recv_bytes)
{
    op->step_fn = tt_direct_step;
    op->host = comm->host;
    op->scratch = &comm->scratch;
    tt_mem_region(op->sendbuff, send_bytes, &op->send_region);
    tt_mem_region(op->recvbuff, recv_bytes, &op->recv_region);
}

/* Asks the cost model which algorithm runs this collective and sets the op up for it. */
static void choose_algorithm(struct tt_task *task, struct ncclComm *comm)
{
    struct tt_op *op = &task->op;
    if (comm->nranks < 2) return;
    /* The model's answer depends only on the collective and its size on a given communicator:
     * a repeat of the last one reuses it, unless INFO logging wants the reason spelled out. */
    size_t bytes = op->count * op->elt_bytes;
    bool symmetric = symmetric_buffers(op, comm);
    struct tt_tune_memo *memo = &comm->tune_memo;
    if (memo->valid && memo->coll == op->coll && memo->bytes == bytes &&
        memo->symmetric == symmetric && !TT_LOG_MAYBE(TT_LOG_INFO)) {
        task->choice.algo = memo->algo;
        task->choice.proto = memo->proto;
        task->choice.estimate_us = memo->estimate_us;
    } else {
        struct tt_tune_input in;
        tune_input(task, comm, symmetric, &in);
        tt_tune_select(&comm->tune, &in, &task->choice);
        *memo = (struct tt_tune_memo){.valid = true, .coll = op->coll, .bytes = bytes,
                                      .symmetric = symmetric,
                                      .algo = task->choice.algo, .proto = task->choice.proto,
                                      .estimate_us = task->choice.estimate_us};
    }
    if (task->choice.algo == TT_ALGO_ONESHOT) {
        op->step_fn = tt_oneshot_step;
        op->host = comm->host;
    } else if (task->choice.algo == TT_ALGO_DIRECT) {
        size_t send, recv;
        buffer_spans(op, comm->nranks, &send, &recv);
        set_direct(op, comm, send, recv);
    } else if (task->choice.algo == TT_ALGO_TREE) {
        op->links = comm->tree;
        op->tree_tmp = comm->tree_tmp;
        op->send = op->recv = NULL; /* each primitive names its peer's link */
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
    task->peer = peer;
    task->result = ncclSuccess;
    struct tt_op *op = &task->op;
    op->coll = args->coll;
    op->sendbuff = args->sendbuff;
    op->recvbuff = args->recvbuff;
    op->count = args->count;
    op->root = args->root;
    op->rank = comm->rank;
    op->nranks = comm->nranks;
    op->elt_bytes = tt_dtype_bytes(args->dtype);
    /* Operations without a reduction still carry the dtype: copies use it for element sizes. */
    if (is_reduction(args->coll))
        TT_TRY(tt_comm_redop_resolve(comm, args->op, args->dtype, &op->redop));
    else
        TT_TRY(tt_redop_init(&op->redop, ncclSum, args->dtype, comm->nranks));
    /* Element sizes are powers of two: a shift, not a division, on every call's path. */
    op->slice_count = comm->slot_bytes >> __builtin_ctzll((unsigned long long)op->elt_bytes);
    op->chunk_count = op->slice_count * (TT_CONN_SLOTS / 2);
    switch (args->coll) {
    case TT_COLL_SEND:
        task->lane = &comm->p2p[peer].send_lane;
        op->send = &comm->p2p[peer].send;
        break;
    case TT_COLL_RECV:
        task->lane = &comm->p2p[peer].recv_lane;
        op->recv = &comm->p2p[peer].recv;
        break;
    case TT_COLL_COPY:
        task->lane = NULL;
        break;
    case TT_COLL_ALLTOALL: {
        /* The core submits an AlltoAll whole only when it runs over OneShot or Direct. */
        task->lane = &comm->ring_lane;
        size_t block = op->count * op->elt_bytes;
        if (tt_alltoall_path(comm, op->sendbuff, op->recvbuff, block) == TT_ALLTOALL_ONESHOT) {
            task->choice.algo = TT_ALGO_ONESHOT;
            task->choice.proto = TT_PROTO_LL;
            snprintf(task->choice.reason, sizeof task->choice.reason,
                     "AlltoAll inputs fit the mailbox slots");
            op->step_fn = tt_oneshot_step;
            op->host = comm->host;
            break;
        }
        task->choice.algo = TT_ALGO_DIRECT;
        snprintf(task->choice.reason, sizeof task->choice.reason,
                 "AlltoAll blocks copied straight from the peers");
        size_t send, recv;
        buffer_spans(op, comm->nranks, &send, &recv);
        set_direct(op, comm, send, recv);
        break;
    }
    default:
        task->lane = &comm->ring_lane;
        if (comm->nranks > 1) {
            op->send = &comm->ring.send;
            op->recv = &comm->ring.recv;
        }
        choose_algorithm(task, comm);
        if (op->links != NULL && op->coll == TT_COLL_REDUCE && comm->tree_tmp == NULL) {
            /* A non-root's partial result, for every later Tree Reduce too. */
            size_t bytes = comm->slot_bytes * (TT_CONN_SLOTS / 2);
            comm->tree_tmp = malloc(bytes);
            if (comm->tree_tmp == NULL)
                return TT_ERROR(ncclSystemError, "out of memory for %zu bytes of Tree staging",
                                bytes);
            op->tree_tmp = comm->tree_tmp;
        }
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

void tt_batch_add(struct tt_batch *b, struct tt_task *task)
{
    task->next = NULL;
    if (b->tail) b->tail->next = task; else b->head = task;
    b->tail = task;
    b->count++;
    b->pending++;
}

void tt_batch_clear(struct tt_batch *b)
{
    struct tt_task *t = b->head;
    while (t) {
        struct tt_task *next = t->next;
        if (t->heap) free(t);
        t = next;
    }
    tt_batch_init(b);
}

ncclResult_t tt_batch_submit(struct tt_batch *b)
{
    TT_TRY(tt_p2p_connect(b));
    for (struct tt_task *t = b->head; t; t = t->next) {
        t->seq = ++t->comm->op_seq;
        /* Atomic: threads may issue on one communicator at once (docs/semantics.md). */
        if (t->lane) t->ticket = atomic_fetch_add(&t->lane->next_ticket, 1);
        bool p2p = t->op.coll == TT_COLL_SEND || t->op.coll == TT_COLL_RECV;
        if (p2p)
            TT_INFO(TT_SUB_P2P, "%s #%llu: count %zu %s peer %d buff %p",
                    tt_coll_name(t->op.coll), (unsigned long long)t->seq, t->op.count,
                    tt_dtype_name(t->op.redop.dtype), t->peer,
                    t->op.coll == TT_COLL_SEND ? t->op.sendbuff : t->op.recvbuff);
        else if (t->op.coll != TT_COLL_COPY)
            TT_INFO(TT_SUB_COLL | TT_SUB_TUNING,
                    "%s #%llu: count %zu %s root %d send %p recv %p: algo %s proto %s (%s)",
                    tt_coll_name(t->op.coll), (unsigned long long)t->seq, t->op.count,
                    tt_dtype_name(t->op.redop.dtype), t->op.root, t->op.sendbuff,
                    t->op.recvbuff, tt_algo_name(t->choice.algo),
                    tt_proto_name(t->choice.proto),
                    t->choice.reason[0] ? t->choice.reason : "single rank");
    }
    b->last_progress_ns = 0; /* read the clock only once a wait stalls */
    return ncclSuccess;
}

static void task_finish(struct tt_task *t, struct tt_batch *b, ncclResult_t res)
{
    t->done = true;
    t->result = res;
    b->pending--;
    /* Only the task holding the served ticket moves `serving` on: a release store suffices. */
    if (t->lane)
        atomic_store_explicit(&t->lane->serving,
                              atomic_load_explicit(&t->lane->serving, memory_order_relaxed) + 1,
                              memory_order_release);
    if (res != ncclSuccess) tt_comm_latch(t->comm, res);
}

static const char *wait_text(enum tt_op_wait waiting)
{
    switch (waiting) {
    case TT_OP_WAIT_DATA: return "data from";
    case TT_OP_WAIT_CREDIT: return "free buffer space at";
    case TT_OP_WAIT_FLUSH: return "the socket to take data for";
    default: return "its turn on the connection to";
    }
}

/* Advances one task; returns its error, if it failed. */
static ncclResult_t task_progress(struct tt_task *t, struct tt_batch *b, bool *progressed,
                                  struct tt_wait_hint *hint)
{
    struct ncclComm *comm = t->comm;
    if (!t->started) {
        if (t->lane &&
            atomic_load_explicit(&t->lane->serving, memory_order_acquire) != t->ticket)
            return ncclSuccess;
        if (comm->async_error != ncclSuccess) {
            ncclResult_t res = TT_ERROR(comm->async_error,
                                        "%s #%llu not run: rank %d's communicator failed "
                                        "before (error %d)",
                                        tt_coll_name(t->op.coll), (unsigned long long)t->seq,
                                        comm->rank, (int)comm->async_error);
            task_finish(t, b, res);
            return res;
        }
        t->started = true;
        tt_algo_op_start(&t->op);
    }
    bool done = false, moved = false;
    ncclResult_t res = tt_algo_op_progress(&t->op, &done, &moved, hint);
    if (res != ncclSuccess) {
        res = TT_ERROR(res, "%s #%llu (%zu elements of %s) failed on rank %d",
                       tt_coll_name(t->op.coll), (unsigned long long)t->seq, t->op.count,
                       tt_dtype_name(t->op.redop.dtype), comm->rank);
        task_finish(t, b, res);
        return res;
    }
    if (moved) *progressed = true;
    if (done) {
        task_finish(t, b, ncclSuccess);
        *progressed = true;
    }
    return ncclSuccess;
}

ncclResult_t tt_batch_progress(struct tt_batch *b, bool *done, bool *progressed,
                               struct tt_wait_hint *hint)
{
    ncclResult_t first = ncclSuccess;
    *progressed = false;
    tt_wait_hint_clear(hint);
    struct tt_wait_hint task_hint;
    for (struct tt_task *t = b->head; t; t = t->next) {
        if (t->done) {
            if (first == ncclSuccess) first = t->result;
            continue;
        }
        tt_wait_hint_clear(&task_hint);
        ncclResult_t res = task_progress(t, b, progressed, &task_hint);
        if (res != ncclSuccess && first == ncclSuccess) first = res;
        /* Sleep on the first waiting task's word; the others are re-checked after it. */
        if (!t->done && hint->word == NULL && hint->fd < 0) *hint = task_hint;
    }
    if (*progressed) b->last_progress_ns = 0;
    *done = b->pending == 0;
    return *done ? first : ncclSuccess;
}

/* Fails every unfinished task of the batch with `res`. */
static ncclResult_t batch_fail(struct tt_batch *b, ncclResult_t res)
{
    for (struct tt_task *t = b->head; t; t = t->next)
        if (!t->done) task_finish(t, b, res);
    return res;
}

ncclResult_t tt_batch_check_stall(struct tt_batch *b)
{
    for (struct tt_task *t = b->head; t; t = t->next) {
        if (t->done) continue;
        if (atomic_load_explicit(&t->comm->abort, memory_order_relaxed) ||
            atomic_load_explicit(&t->comm->revoked, memory_order_relaxed))
            return batch_fail(b, TT_ERROR(ncclInvalidUsage,
                                          "%s #%llu: communicator of rank %d was %s",
                                          tt_coll_name(t->op.coll), (unsigned long long)t->seq,
                                          t->comm->rank,
                                          atomic_load(&t->comm->abort) ? "aborted"
                                                                       : "revoked"));
    }
    /* The stall clock starts at the first check after progress, so the fast path (a batch
     * that never stalls) reads no clock at all. */
    if (b->last_progress_ns == 0) {
        b->last_progress_ns = tt_time_ns();
        return ncclSuccess;
    }
    for (struct tt_task *t = b->head; t; t = t->next) {
        if (t->done) continue;
        int64_t timeout_ms = t->comm->timeout_ms;
        if (timeout_ms <= 0 ||
            tt_time_ns() - b->last_progress_ns < (uint64_t)timeout_ms * 1000000ull)
            return ncclSuccess;
        int peer = t->started ? t->op.waiting_peer
                   : t->op.coll == TT_COLL_SEND || t->op.coll == TT_COLL_RECV ? t->peer
                                                                               : -1;
        return batch_fail(b, TT_ERROR(ncclSystemError,
                                      "%s #%llu (%zu elements of %s) made no progress for %lld ms "
                                      "on rank %d, waiting for %s rank %d (TUTTI_TIMEOUT_MS)",
                                      tt_coll_name(t->op.coll), (unsigned long long)t->seq,
                                      t->op.count, tt_dtype_name(t->op.redop.dtype),
                                      (long long)timeout_ms, t->comm->rank,
                                      t->started ? wait_text(t->op.waiting) : wait_text(0),
                                      peer));
    }
    return ncclSuccess;
}

/* Adapts a communicator's spin budget to what its waits have been: a wait that had to sleep
 * anyway (the peer was not running: a loaded host) halves it, a wait that ended while spinning
 * doubles it back, up to the configured budget. The floor is a quarter of the budget: lower,
 * the spiral feeds itself (a rank that sleeps makes its peers' waits long, which shrinks their
 * budgets too) and a 2-rank 256 KiB AllReduce was seen stuck at 40 us instead of 9 us. */
static void adapt_spin(struct ncclComm *comm, uint32_t longest_wait)
{
    uint32_t spin = comm->spin_limit, floor = comm->spin_max / 4;
    if (longest_wait > spin) spin = spin / 2 > floor ? spin / 2 : floor;
    else if (spin < comm->spin_max) spin = spin * 2 < comm->spin_max ? spin * 2 : comm->spin_max;
    comm->spin_limit = spin;
}

/* Moves this thread off `cpu`, where a peer it waits for also runs, if its affinity allows
 * another CPU: the affinity is narrowed to exclude `cpu` (the kernel migrates the thread at
 * once) and put back as it was (the thread stays where it now is). Only the higher rank of the
 * pair moves, so the two do not swap places, and at most every MOVE_INTERVAL_NS, so that a
 * scheduler that keeps putting them together is not fought. */
#define MOVE_INTERVAL_NS 20000000ull

static void move_off(struct ncclComm *comm, int cpu, int peer)
{
    if (comm->rank < peer) return;
    uint64_t now = tt_time_ns();
    uint64_t last = atomic_load_explicit(&comm->moved_off_ns, memory_order_relaxed);
    if (last != 0 && now - last < MOVE_INTERVAL_NS) return;
    atomic_store_explicit(&comm->moved_off_ns, now, memory_order_relaxed);
    cpu_set_t was, other;
    if (sched_getaffinity(0, sizeof was, &was) != 0 || !CPU_ISSET(cpu, &was) ||
        CPU_COUNT(&was) < 2)
        return;
    other = was;
    CPU_CLR(cpu, &other);
    if (sched_setaffinity(0, sizeof other, &other) != 0) return;
    if (sched_setaffinity(0, sizeof was, &was) != 0 &&
        sched_setaffinity(0, sizeof was, &was) != 0)
        TT_WARN("cannot restore this thread's CPU affinity after moving off CPU %d: %s", cpu,
                strerror(errno));
    int now_on = sched_getcpu();
    tt_host_set_cpu(comm->host, now_on, tt_thread_id());
    TT_INFO(TT_SUB_INIT, "rank %d shared CPU %d with rank %d, which it waits for: moved to CPU %d",
            comm->rank, cpu, peer, now_on);
}

/* Whether the peer this batch waits for is on this thread's CPU (both ranks of a host on one CPU:
 * the scheduler put them there, and until it moves one, the peer runs only when this rank
 * gives the CPU up). Records this thread's CPU for its peers' waiters as well. Seen on the 2-CPU
 * development VM for the first tens of milliseconds of about one launch in five: every
 * hand-off then cost a whole spin budget, a 16 KiB AllReduce 50 us instead of 1.6 us. Yielding
 * at once brings that to about 1 us, but the pair then alternates so politely that the
 * scheduler never separates them; the higher rank moves itself off instead (move_off). */
bool tt_batch_peer_on_my_cpu(const struct tt_batch *b)
{
    for (const struct tt_task *t = b->head; t; t = t->next) {
        if (t->done || t->comm->host == NULL) continue;
        int cpu = sched_getcpu(), tid = tt_thread_id();
        if (cpu < 0) return false;
        tt_host_set_cpu(t->comm->host, cpu, tid);
        int peer = t->started ? t->op.waiting_peer : -1, peer_tid = 0;
        /* A peer driven by this very thread (one thread, several ranks) is no stranger. */
        if (peer < 0 || peer >= t->comm->nranks || peer == t->comm->rank ||
            tt_host_peer_cpu(t->comm->host, peer, &peer_tid) != cpu || peer_tid == tid)
            return false;
        move_off(t->comm, cpu, peer);
        return true;
    }
    return false;
}

ncclResult_t tt_batch_run(struct tt_batch *b)
{
    struct tt_backoff backoff;
    struct tt_wait_hint hint;
    struct ncclComm *comm = b->head ? b->head->comm : NULL;
    uint32_t longest_wait = 0;
    tt_backoff_init_spin(&backoff, comm ? comm->spin_limit : 0);
    for (;;) {
        bool done, progressed;
        ncclResult_t res = tt_batch_progress(b, &done, &progressed, &hint);
        if (done || progressed) {
            if (backoff.polls > longest_wait) longest_wait = backoff.polls;
            tt_backoff_reset(&backoff);
        }
        if (done) {
            if (comm != NULL && comm->spin_max > 0) adapt_spin(comm, longest_wait);
            return res;
        }
        if (progressed) continue;
        /* While spinning, the clock and the abort flags are read every 64th poll only. */
        if (backoff.polls >= backoff.spin_limit || (backoff.polls & 63) == 63)
            TT_TRY(tt_batch_check_stall(b));
        /* Spinning cannot help a peer that waits for this CPU: yield at once. */
        if (backoff.polls < backoff.spin_limit && (backoff.polls & 63) == 15 &&
            tt_batch_peer_on_my_cpu(b))
            backoff.polls = backoff.spin_limit;
        tt_backoff_pause(&backoff, &hint);
    }
}

/* Polls of the direct loop in tt_task_run before the general one takes over: at most this many,
 * and no more than the communicator spins (one, which never waits, on a host with more ranks
 * than CPUs, where spinning takes the CPU from the rank waited for: 4 ranks on 2 cores ran an
 * 8-byte AllReduce in 3-5 us instead of 1.2-1.5 with 64 polls there). */
#define RUN_ALONE_POLLS 64

ncclResult_t tt_task_run(struct tt_task *t)
{
    struct tt_batch b;
    tt_batch_init(&b);
    tt_batch_add(&b, t);
    TT_TRY(tt_batch_submit(&b));
    /* The common case, a small collective with nothing queued before it on its lane, costs
     * about as much in the batch loop's bookkeeping (hint juggling, the backoff, the spin
     * budget's adaptation) as in its own work: poll the task directly first. A task that
     * started, failed or ended here leaves the batch consistent for tt_batch_run. */
    if (t->lane == NULL ||
        atomic_load_explicit(&t->lane->serving, memory_order_acquire) == t->ticket) {
        struct tt_wait_hint hint;
        uint32_t polls = t->comm->spin_limit < RUN_ALONE_POLLS ? t->comm->spin_limit + 1
                                                               : RUN_ALONE_POLLS;
        for (uint32_t i = 0; i < polls; i++) {
            if (i > 0) tt_cpu_relax();
            bool progressed = false;
            ncclResult_t res = task_progress(t, &b, &progressed, &hint);
            if (t->done) return res != ncclSuccess ? res : t->result;
        }
    }
    return tt_batch_run(&b);
}

/* The cost model's estimate for one task (ncclGroupSimulateEnd). Point-to-point tasks, local
 * copies and the collectives of a single rank (a copy too) are costed as one Ring step of their
 * size. */
float tt_task_estimate_us(const struct tt_task *t)
{
    struct tt_tune_input in;
    tune_input(t, t->comm, symmetric_buffers(&t->op, t->comm), &in);
    bool coll = t->op.coll <= TT_COLL_REDUCESCATTER && t->comm->nranks > 1;
    if (!coll) {
        in.coll = TT_COLL_BROADCAST;
        in.nranks = 2;
    }
    return tt_tune_estimate_us(&in, coll ? t->choice.algo : TT_ALGO_RING);
}
