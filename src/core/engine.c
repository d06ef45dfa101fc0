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
#include <time.h>

#include "core/engine.h"
#include "core/forms.h"
#include "transport/team.h"
#include "util/err.h"
#include "util/log.h"
#include "util/time.h"
#include "util/trace.h"

void tt_engine_batch_add(struct tt_batch *b, struct tt_task *task)
{
    task->next = NULL;
    if (b->tail) b->tail->next = task; else b->head = task;
    b->tail = task;
    b->count++;
    b->pending++;
}

void tt_engine_batch_clear(struct tt_batch *b)
{
    struct tt_task *t = b->head;
    while (t) {
        struct tt_task *next = t->next;
        if (t->heap) free(t);
        t = next;
    }
    tt_device_stage_free(b->stages);
    free(b->reason);
    tt_engine_batch_init(b);
}

/* The INFO line of a submitted task: out of the way of the call's path. */
__attribute__((cold, noinline)) static void log_submit(const struct tt_task *t)
{
    bool p2p = t->op.coll == TT_COLL_SEND || t->op.coll == TT_COLL_RECV;
    if (p2p)
        TT_INFO(TT_SUB_P2P, "%s #%llu: count %zu %s peer %d buff %p", tt_coll_name(t->op.coll),
                (unsigned long long)t->seq, t->op.count, tt_dtype_name(t->op.redop.dtype),
                t->peer, t->op.coll == TT_COLL_SEND ? t->op.sendbuff : t->op.recvbuff);
    else if (t->op.coll != TT_COLL_COPY)
        TT_INFO(TT_SUB_COLL | TT_SUB_TUNING,
                "%s #%llu: count %zu %s root %d send %p recv %p: algo %s proto %s (%s)",
                tt_coll_name(t->op.coll), (unsigned long long)t->seq, t->op.count,
                tt_dtype_name(t->op.redop.dtype), t->op.root, t->op.sendbuff, t->op.recvbuff,
                tt_algo_name(t->choice.algo), tt_proto_name(t->choice.proto),
                t->choice.reason[0] ? t->choice.reason : "single rank");
}

void tt_engine_submit(struct tt_batch *b)
{
    for (struct tt_task *t = b->head; t; t = t->next) {
        /* The ticket is atomic: threads may issue on one communicator at once
         * (docs/semantics.md). An operation's sequence number in logs and errors is its place
         * on its lane, from 1: the n-th collective of the communicator, or the n-th send to
         * (receive from) one peer; equal on every rank, and no second atomic on the call's
         * path. */
        if (t->lane) t->ticket = atomic_fetch_add(&t->lane->next_ticket, 1);
        t->seq = t->lane ? t->ticket + 1 : 0;
        t->op.desc.ticket = t->ticket;
        if (TT_LOG_MAYBE(TT_LOG_INFO)) log_submit(t);
    }
    b->last_progress_ns = b->gone_since_ns = 0; /* read the clock only once a wait stalls */
}

/* ---- Timeline trace (util/trace.h): off the call's path, reached only when traced ---- */

__attribute__((cold, noinline)) static void trace_op_start(struct tt_task *t)
{
    struct tt_op *op = &t->op;
    op->trace_start = op->trace_mark = tt_trace_now(op->trace);
    op->trace_seq = t->seq;
    op->trace_steps = 0;
    op->trace_lane = op->coll == TT_COLL_SEND   ? TT_TRACE_LANE_SEND(t->peer)
                     : op->coll == TT_COLL_RECV ? TT_TRACE_LANE_RECV(t->peer)
                                                : TT_TRACE_LANE_COLL;
}

__attribute__((cold, noinline)) static void trace_op_end(struct tt_task *t)
{
    static const char *const redops[] = {"sum", "prod", "max", "min", "avg"};
    const struct tt_op *op = &t->op;
    uint64_t end = tt_trace_now(op->trace);
    bool p2p = op->coll == TT_COLL_SEND || op->coll == TT_COLL_RECV;
    const char *name = tt_coll_name((enum tt_coll)op->coll);
    const char *algo = p2p || op->coll == TT_COLL_COPY ? "P2P" : tt_algo_name(t->choice.algo);
    tt_trace_count(op->trace, name, algo, op->count * op->elt_bytes, end - op->trace_start);
    struct tt_trace_event *e = tt_trace_claim(op->trace);
    if (e == NULL) return;
    bool reduces = op->coll == TT_COLL_ALLREDUCE || op->coll == TT_COLL_REDUCE ||
                   op->coll == TT_COLL_REDUCESCATTER;
    bool rooted = op->coll == TT_COLL_BROADCAST || op->coll == TT_COLL_REDUCE;
    *e = (struct tt_trace_event){
        .start = op->trace_start, .end = end, .name = name, .algo = algo,
        .proto = tt_proto_name(p2p ? TT_PROTO_SIMPLE : t->choice.proto),
        .dtype = tt_dtype_name(op->redop.dtype),
        .redop = !reduces ? NULL : op->desc.op < 5 ? redops[op->desc.op] : "user",
        .seq = t->seq, .count = op->count, .bytes = op->count * op->elt_bytes,
        .lane = op->trace_lane,
        .send_to = op->coll == TT_COLL_SEND ? t->peer : -1,
        .recv_from = op->coll == TT_COLL_RECV ? t->peer : -1,
        .root = rooted ? op->root : -1, .step = op->trace_steps, .kind = TT_TRACE_OP};
}

/* Keeps the first failure's reason with the batch, for its stream's and its events' reports
 * (the thread that finished it may not be the one that reports it). */
__attribute__((cold, noinline)) static void batch_note(struct tt_batch *b, const char *why)
{
    if (b->reason == NULL) b->reason = strdup(why); /* out of memory: reported without one */
}

/* Ends task `t` with `res`; a failure's reason is `why` (NULL: this thread's last error, which
 * the failing code has just set). */
static void task_finish_because(struct tt_task *t, struct tt_batch *b, ncclResult_t res,
                                const char *why)
{
    if (__builtin_expect(t->op.trace != NULL, 0) && t->started) trace_op_end(t);
    t->done = true;
    t->result = res;
    b->pending--;
    /* Only a task that started held the served ticket, and only it moves `serving` on: a
     * release store suffices. One failed before its turn (its batch failed, or the
     * communicator had) leaves the lane alone: the tickets after it fail at once, seeing the
     * communicator's error before they look at the lane (task_progress). */
    if (t->lane && t->started)
        atomic_store_explicit(&t->lane->serving,
                              atomic_load_explicit(&t->lane->serving, memory_order_relaxed) + 1,
                              memory_order_release);
    if (res != ncclSuccess) {
        if (why == NULL) why = tt_error_last();
        batch_note(b, why);
        tt_state_fail_because(t->st, res, why);
    }
    if (t->flight_slot != 0) tt_state_flight_release(t->st, &t->flight_slot);
}

static void task_finish(struct tt_task *t, struct tt_batch *b, ncclResult_t res)
{
    task_finish_because(t, b, res, NULL);
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

/* How many times (a millisecond apart) a failed operation looks for the rank behind its error. */
#define CAUSE_WAIT_TRIES 20

/* Advances one task; returns its error, if it failed. */
/* A task that cannot start: its communicator failed before (off the call's path). */
__attribute__((cold, noinline)) static ncclResult_t task_not_run(struct tt_task *t,
                                                                 struct tt_batch *b,
                                                                 ncclResult_t failed)
{
    ncclResult_t res = TT_ERROR(failed,
                                "%s #%llu not run: rank %d's communicator failed before "
                                "(error %d)",
                                tt_coll_name(t->op.coll), (unsigned long long)t->seq,
                                t->st->rank, (int)failed);
    task_finish(t, b, res);
    return res;
}

/* A task whose progress failed with `res` (off the call's path). The cause was reported where
 * it happened; it is said again with the operation, so that ncclGetLastError names both. A
 * connection that failed because a rank ended or failed elsewhere in the job (its neighbours
 * shut their sockets down in turn) names that rank first, if this host knows it. */
__attribute__((cold, noinline)) static ncclResult_t task_failed(struct tt_task *t,
                                                                struct tt_batch *b,
                                                                ncclResult_t res)
{
    struct tt_comm_state *st = t->st;
    char cause[512];
    snprintf(cause, sizeof cause, "%s", tt_error_last());
    char why[TT_TEAM_REASON_BYTES + 16];
    ncclResult_t code = res;
    int gone = -1;
    /* A killed process closes its sockets before its pidfd says it ended: give the cause a
     * moment to show. */
    for (int tries = 0; res == ncclRemoteError && gone < 0 && tries < CAUSE_WAIT_TRIES;
         tries++) {
        gone = tt_state_gone_peer(st, -1, &code, why, sizeof why);
        if (gone < 0 && tries + 1 < CAUSE_WAIT_TRIES) {
            struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000000};
            nanosleep(&ts, NULL);
        }
    }
    if (gone >= 0) {
        char seen[256];
        snprintf(seen, sizeof seen, "%.255s", cause);
        snprintf(cause, sizeof cause, "rank %d %.200s (seen as: %.255s)", gone, why, seen);
        res = code;
    }
    res = TT_ERROR(res, "%s #%llu (%zu elements of %s) failed on rank %d: %s",
                   tt_coll_name(t->op.coll), (unsigned long long)t->seq, t->op.count,
                   tt_dtype_name(t->op.redop.dtype), st->rank,
                   cause[0] ? cause : "(no cause recorded)");
    /* Only this thread drives the collectives' connections now (their lane is its own). */
    if (t->op.coll < TT_COLL_SEND && st->on_coll_error != NULL &&
        tt_state_error(st) == ncclSuccess)
        st->on_coll_error(st->on_fail_arg, res, tt_error_last());
    task_finish(t, b, res);
    return res;
}

/* ---- Mismatches the connections cannot see (docs/semantics.md, "Mismatched arguments") ----
 *
 * Two kinds of mismatch pass every receiver's check: one that leaves some rank receiving
 * nothing from the rank that differs (a Broadcast whose ranks disagree on the root, a Reduce
 * against an AllReduce), and one that makes the ranks choose different algorithms, so each
 * waits for something the other never sends. Where the local team spans the communicator, a
 * rank publishes the descriptor of its collective in its mailbox (one line of its own) only
 * where one of them can show: when a collective has stalled for a millisecond (it then
 * compares its peers' published descriptors: ranks that chose different algorithms both
 * stall), and when a rooted collective's own part is done (it then waits for every peer to
 * publish the same descriptor before it reports success: verify_peers). A peer whose
 * AllReduce, AllGather or ReduceScatter completes never needs to publish: it received from
 * every rank, each slice checked. So the fast path pays nothing but the rooted test at the
 * end. */

/* The first peer that published a different descriptor for this very operation: its error
 * (ncclInvalidUsage naming the field, the values and the rank), else ncclSuccess. *behind
 * counts the peers that have not published this operation (or a later one) yet. */
__attribute__((cold, noinline)) static ncclResult_t peers_disagree(const struct tt_task *t,
                                                                   int *behind,
                                                                   struct tt_wait_hint *hint)
{
    *behind = 0;
    for (int p = 0; p < t->st->nranks; p++) {
        if (p == t->st->rank) continue;
        struct tt_op_desc d;
        struct tt_wait_hint h;
        if (hint != NULL) tt_team_peer_desc_hint(t->st->team, p, &h);
        if (!tt_team_peer_desc(t->st->team, p, &d) || d.ticket < t->op.desc.ticket) {
            if ((*behind)++ == 0 && hint != NULL) *hint = h; /* sleep on the first behind */
            continue;
        }
        if (d.ticket > t->op.desc.ticket) continue; /* it finished this one: it agreed */
        ncclResult_t res = tt_algo_check_desc(&t->op, &d, p);
        if (res != ncclSuccess) return res;
    }
    return ncclSuccess;
}

/* A rooted collective whose own part is done: it succeeds once every peer has published the
 * same descriptor (waiting, like any wait, for peers that have not started it yet), fails
 * with ncclInvalidUsage if one published another. */
__attribute__((cold, noinline)) static ncclResult_t verify_peers(struct tt_task *t,
                                                                 struct tt_batch *b,
                                                                 bool *progressed,
                                                                 struct tt_wait_hint *hint)
{
    int behind;
    ncclResult_t res = peers_disagree(t, &behind, hint);
    if (res != ncclSuccess) return task_failed(t, b, res);
    if (behind > 0) return ncclSuccess;
    task_finish(t, b, ncclSuccess);
    *progressed = true;
    return ncclSuccess;
}

/* Over the network (no team spans the communicator), the descriptors go around the ring
 * instead (algo.h, tt_algo_agree_step). */
__attribute__((cold, noinline)) static ncclResult_t verify(struct tt_task *t, struct tt_batch *b,
                                                           bool *progressed,
                                                           struct tt_wait_hint *hint)
{
    if (t->st->team != NULL) return verify_peers(t, b, progressed, hint);
    bool done = false;
    ncclResult_t res = tt_algo_agree_step(&t->op, &done, progressed, hint);
    if (res != ncclSuccess) return task_failed(t, b, res);
    if (done) {
        task_finish(t, b, ncclSuccess);
        *progressed = true;
    }
    return ncclSuccess;
}

__attribute__((cold, noinline)) static ncclResult_t verify_start(struct tt_task *t,
                                                                 struct tt_batch *b,
                                                                 bool *progressed,
                                                                 struct tt_wait_hint *hint)
{
    if (t->st->team == NULL && (t->op.env == NULL || t->op.env->ring_send == NULL ||
                                t->op.env->ring_recv == NULL)) {
        task_finish(t, b, ncclSuccess);
        *progressed = true;
        return ncclSuccess;
    }
    t->verifying = true;
    if (t->st->team == NULL) tt_algo_agree_start(&t->op); /* the team's was published at start */
    return verify(t, b, progressed, hint);
}

/* Whether the operation reports success only once every peer ran the same one (verify_start):
 * a rooted collective, where a root or a Reduce rank may finish before its peers, and a
 * collective of no elements, which sends nothing a peer could compare (a rank's count of 0
 * against the others' n would return at once and leave them waiting). */
static inline bool verifies_peers(const struct tt_task *t)
{
    if (!t->st->check_rooted || t->st->nranks < 2) return false;
    return t->op.coll == TT_COLL_BROADCAST || t->op.coll == TT_COLL_REDUCE ||
           (t->op.count == 0 && t->op.coll < TT_COLL_SEND);
}

static inline ncclResult_t task_progress(struct tt_task *t, struct tt_batch *b,
                                         bool *progressed, struct tt_wait_hint *hint)
{
    if (!t->started) {
        ncclResult_t failed = tt_state_error(t->st);
        if (failed != ncclSuccess) return task_not_run(t, b, failed);
        if (t->lane &&
            atomic_load_explicit(&t->lane->serving, memory_order_acquire) != t->ticket)
            return ncclSuccess;
        t->started = true;
        tt_algo_op_start(&t->op);
        /* Such an operation publishes its descriptor as it starts, so that its peers' checks
         * when their own parts are done (verify_peers) find it at once, not a wait later. */
        if (__builtin_expect(t->st->team != NULL && verifies_peers(t), 0))
            tt_team_publish_desc(t->st->team, &t->op.desc);
        if (__builtin_expect(t->op.trace != NULL, 0)) trace_op_start(t);
    }
    if (__builtin_expect(t->verifying, 0)) return verify(t, b, progressed, hint);
    bool done = false, moved = false;
    ncclResult_t res = tt_algo_op_progress(&t->op, &done, &moved, hint);
    if (res != ncclSuccess) return task_failed(t, b, res);
    if (moved) *progressed = true;
    if (done) {
        if (__builtin_expect(verifies_peers(t), 0)) return verify_start(t, b, progressed, hint);
        task_finish(t, b, ncclSuccess);
        *progressed = true;
    }
    return ncclSuccess;
}

ncclResult_t tt_engine_progress(struct tt_batch *b, bool *done, bool *progressed,
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
    if (*progressed) {
        b->last_progress_ns = b->gone_since_ns = 0;
        /* Moving again: no longer stalled (the recorder lists what is stalled right now; a
         * later stall records anew, from its own start). */
        if (__builtin_expect(b->in_flight_recorder, 0)) {
            for (struct tt_task *t = b->head; t; t = t->next)
                if (t->flight_slot != 0) tt_state_flight_release(t->st, &t->flight_slot);
            b->in_flight_recorder = false;
        }
    }
    *done = b->pending == 0;
    if (*done) {
        b->result = first;
        if (b->published_wait)
            for (struct tt_task *t = b->head; t; t = t->next) {
                tt_team_set_waiting(t->st->team, -1);
                tt_team_clear_p2p_wait(t->st->team);
            }
        b->published_wait = false;
    }
    return *done ? first : ncclSuccess;
}

/* How often a stalled batch asks whether the peers it waits for are alive, and how long a
 * peer must have been gone, with no progress since, before the batch fails. */
#define ALIVE_CHECK_NS 1000000ull
#define GONE_GRACE_NS 10000000ull

/* ", which waits for rank 3, which waits for rank 1": the chain of waits the local team's
 * mailboxes show from `peer` on, to the rank that waits for nobody (the one stuck). */
static void describe_chain(const struct tt_comm_state *st, int peer, char *out, size_t bytes)
{
    size_t used = 0;
    out[0] = '\0';
    for (int hops = 0; hops < st->nranks && peer >= 0; hops++) {
        int next = tt_team_peer_waiting(st->team, peer);
        if (next < 0 || next == st->rank) break;
        int n = snprintf(out + used, bytes - used, ", which waits for rank %d", next);
        if (n < 0 || (size_t)n >= bytes - used) break;
        used += (size_t)n;
        peer = next;
    }
}

/* Fails every unfinished task of the batch with `res`. */
static ncclResult_t batch_fail(struct tt_batch *b, ncclResult_t res)
{
    for (struct tt_task *t = b->head; t; t = t->next)
        if (!t->done) task_finish(t, b, res);
    return res;
}

void tt_engine_cancel(struct tt_batch *b, ncclResult_t res)
{
    for (struct tt_task *t = b->head; t; t = t->next) {
        if (!t->done) {
            /* On the stopping thread, whose own last error this is not. */
            char why[160];
            snprintf(why, sizeof why, "%s #%llu of rank %d: not started, its communicator was "
                     "stopped", tt_coll_name(t->op.coll), (unsigned long long)t->seq,
                     t->st->rank);
            task_finish_because(t, b, res, why);
        }
        t->comm = NULL;
        t->st = NULL;
        t->lane = NULL;
    }
}

ncclResult_t tt_engine_check_stall(struct tt_batch *b)
{
    for (struct tt_task *t = b->head; t; t = t->next) {
        if (t->done || !tt_state_stopped(t->st)) continue;
        /* The operation did not complete everywhere: for the caller that is a remote failure,
         * whether this rank or another one stopped the communicator. */
        return batch_fail(b, TT_ERROR(ncclRemoteError,
                                      "%s #%llu: communicator of rank %d was %s",
                                      tt_coll_name(t->op.coll), (unsigned long long)t->seq,
                                      t->st->rank,
                                      atomic_load(&t->st->abort) ? "aborted" : "revoked"));
    }
    /* The stall clock starts at the first check after progress, so the fast path (a batch
     * that never stalls) reads no clock at all. */
    if (b->last_progress_ns == 0) {
        b->last_progress_ns = b->last_alive_ns = tt_time_ns();
        return ncclSuccess;
    }
    /* A peer of this host that died (its pidfd) or whose communicator failed (its team
     * mailbox) is seen at most ALIVE_CHECK_NS into a stall, instead of at the deadline. A
     * collective depends on every rank (one waiting for a live peer that waits for the dead
     * one would otherwise wait for the deadline), a send or a receive on its peer alone.
     * Peers on other hosts are seen through their connections. */
    uint64_t now = tt_time_ns();
    if (now - b->last_alive_ns >= ALIVE_CHECK_NS) {
        b->last_alive_ns = now;
        bool p2p_published = false;
        for (struct tt_task *t = b->head; t; t = t->next) {
            if (t->done) continue;
            bool p2p_task = t->op.coll == TT_COLL_SEND || t->op.coll == TT_COLL_RECV;
            if (p2p_task && t->started && t->st->team != NULL) {
                tt_forms_publish_wait(b, t, &p2p_published);
                b->published_wait = true;
            }
            struct tt_flight_entry entry = {
                .seq = t->seq, .coll = t->op.coll, .count = t->op.count,
                .dtype = (int)t->op.redop.dtype,
                .waits = t->started ? wait_text(t->op.waiting) : "its turn on its lane",
                .peer = t->started ? t->op.waiting_peer : p2p_task ? t->peer : -1,
                .since_ns = b->last_progress_ns};
            tt_state_flight_record(t->st, &t->flight_slot, &entry);
            b->in_flight_recorder = true;
            /* A stalled collective may wait for what a peer that chose another algorithm (it
             * passed another count, say) never sends: compare the peers' descriptors. An
             * AlltoAll submitted whole runs over the team (core/task.c) and is checked alike;
             * one that peers have not reached may face its grouped Send/Recv form. */
            bool coll_task = t->op.coll < TT_COLL_SEND || t->op.coll == TT_COLL_ALLTOALL;
            if (t->started && coll_task && t->st->team != NULL) {
                tt_team_publish_desc(t->st->team, &t->op.desc);
                int behind;
                ncclResult_t res = peers_disagree(t, &behind, NULL);
                if (res == ncclSuccess && behind > 0 && t->op.coll == TT_COLL_ALLTOALL)
                    res = tt_forms_check(t, b, now);
                if (res != ncclSuccess) return batch_fail(b, task_failed(t, b, res));
            } else if (t->started && t->op.coll < TT_COLL_SEND) {
                ncclResult_t res = tt_algo_peek_mismatch(&t->op);
                if (res != ncclSuccess) return batch_fail(b, task_failed(t, b, res));
            }
            /* A receiver that failed, or shut its side down, says so on its connection:
             * where no team spans the communicator (several hosts), the only place to learn
             * it before the deadline. */
            if (t->started) {
                ncclResult_t res = tt_algo_peer_errors(&t->op);
                if (res != ncclSuccess) return batch_fail(b, task_failed(t, b, res));
            }
            if (entry.peer >= 0) {
                tt_team_set_waiting(t->st->team, entry.peer);
                b->published_wait = true;
            }
            bool p2p = t->op.coll == TT_COLL_SEND || t->op.coll == TT_COLL_RECV;
            char why[TT_TEAM_REASON_BYTES + 16];
            ncclResult_t code;
            int gone = tt_state_gone_peer(t->st, p2p ? t->peer : -1, &code, why, sizeof why);
            if (gone < 0) continue;
            /* What a peer sent before it ended may still be on its way (a socket's buffers):
             * fail only once the batch has made no progress for GONE_GRACE_NS since. */
            if (b->gone_since_ns == 0) b->gone_since_ns = now;
            if (now - b->gone_since_ns < GONE_GRACE_NS) continue;
            char waited[96] = "";
            if (t->started && t->op.waiting_peer >= 0)
                snprintf(waited, sizeof waited, "; this rank waited for %s rank %d",
                         wait_text(t->op.waiting), t->op.waiting_peer);
            return batch_fail(b, TT_ERROR(code,
                                          "%s #%llu (%zu elements of %s) failed on rank %d: "
                                          "rank %d %s%s",
                                          tt_coll_name(t->op.coll), (unsigned long long)t->seq,
                                          t->op.count, tt_dtype_name(t->op.redop.dtype),
                                          t->st->rank, gone, why, waited));
        }
    }
    for (struct tt_task *t = b->head; t; t = t->next) {
        if (t->done) continue;
        int64_t timeout_ms = t->st->timeout_ms;
        if (timeout_ms <= 0 ||
            now - b->last_progress_ns < (uint64_t)timeout_ms * 1000000ull)
            return ncclSuccess;
        int peer = t->started ? t->op.waiting_peer
                   : t->op.coll == TT_COLL_SEND || t->op.coll == TT_COLL_RECV ? t->peer
                                                                               : -1;
        tt_state_flight_dump(t->st, "timeout");
        char chain[128] = "";
        describe_chain(t->st, peer, chain, sizeof chain);
        return batch_fail(b, TT_ERROR(ncclRemoteError,
                                      "%s #%llu (%zu elements of %s) made no progress for %lld ms "
                                      "on rank %d, waiting for %s rank %d%s (TUTTI_TIMEOUT_MS)",
                                      tt_coll_name(t->op.coll), (unsigned long long)t->seq,
                                      t->op.count, tt_dtype_name(t->op.redop.dtype),
                                      (long long)timeout_ms, t->st->rank,
                                      t->started ? wait_text(t->op.waiting) : wait_text(0),
                                      peer, chain));
    }
    return ncclSuccess;
}

/* Adapts a communicator's spin budget to what its waits have been: a wait that had to sleep
 * anyway (the peer was not running: a loaded host) halves it, a wait that ended while spinning
 * doubles it back, up to the configured budget. The floor is a quarter of the budget: lower,
 * the spiral feeds itself (a rank that sleeps makes its peers' waits long, which shrinks their
 * budgets too; seen: docs/performance.md, "Measurements behind the code"). */
static void adapt_spin(struct tt_comm_state *st, uint32_t longest_wait)
{
    uint32_t spin = atomic_load_explicit(&st->spin_limit, memory_order_relaxed);
    uint32_t floor = st->spin_max / 4;
    if (longest_wait > spin) spin = spin / 2 > floor ? spin / 2 : floor;
    else if (spin < st->spin_max) spin = spin * 2 < st->spin_max ? spin * 2 : st->spin_max;
    atomic_store_explicit(&st->spin_limit, spin, memory_order_relaxed);
}

/* Moves this thread off `cpu`, where a peer it waits for also runs, if its affinity allows
 * another CPU: the affinity is narrowed to exclude `cpu` (the kernel migrates the thread at
 * once) and put back as it was (the thread stays where it now is). Only the higher rank of the
 * pair moves, so the two do not swap places, and at most every MOVE_INTERVAL_NS, so that a
 * scheduler that keeps putting them together is not fought. */
#define MOVE_INTERVAL_NS 20000000ull

static void move_off(struct tt_comm_state *comm, int cpu, int peer)
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
    tt_team_set_cpu(comm->team, now_on, tt_thread_id());
    TT_INFO(TT_SUB_INIT, "rank %d shared CPU %d with rank %d, which it waits for: moved to CPU %d",
            comm->rank, cpu, peer, now_on);
}

/* Whether the peer this batch waits for is on this thread's CPU (both ranks of a host on one CPU:
 * the scheduler put them there, and until it moves one, the peer runs only when this rank
 * gives the CPU up). Records this thread's CPU for its peers' waiters as well. Every hand-off
 * then costs a whole spin budget; yielding at once helps, but the pair then alternates so
 * politely that the scheduler never separates them, so the higher rank moves itself off instead
 * (move_off; measured: docs/performance.md, "Measurements behind the code"). */
bool tt_engine_peer_on_my_cpu(const struct tt_batch *b)
{
    for (const struct tt_task *t = b->head; t; t = t->next) {
        if (t->done || t->st->team == NULL) continue;
        int cpu = sched_getcpu(), tid = tt_thread_id();
        if (cpu < 0) return false;
        tt_team_set_cpu(t->st->team, cpu, tid);
        int peer = t->started ? t->op.waiting_peer : -1, peer_tid = 0;
        /* A peer driven by this very thread (one thread, several ranks) is no stranger. */
        if (peer < 0 || peer >= t->st->nranks || peer == t->st->rank ||
            tt_team_peer_cpu(t->st->team, peer, &peer_tid) != cpu || peer_tid == tid)
            return false;
        move_off(t->st, cpu, peer);
        return true;
    }
    return false;
}

ncclResult_t tt_engine_run(struct tt_batch *b)
{
    struct tt_backoff backoff;
    struct tt_wait_hint hint;
    struct tt_comm_state *st = b->head ? b->head->st : NULL;
    uint32_t longest_wait = 0;
    tt_backoff_init_spin(&backoff,
                         st ? atomic_load_explicit(&st->spin_limit, memory_order_relaxed) : 0);
    for (;;) {
        bool done, progressed;
        ncclResult_t res = tt_engine_progress(b, &done, &progressed, &hint);
        if (done || progressed) {
            if (backoff.polls > longest_wait) longest_wait = backoff.polls;
            tt_backoff_reset(&backoff);
        }
        if (done) {
            if (st != NULL && st->spin_max > 0) adapt_spin(st, longest_wait);
            return res;
        }
        if (progressed) continue;
        /* While spinning, the clock and the abort flags are read every 64th poll only. */
        if (backoff.polls >= backoff.spin_limit || (backoff.polls & 63) == 63)
            TT_TRY(tt_engine_check_stall(b));
        /* Spinning cannot help a peer that waits for this CPU: yield at once. */
        if (backoff.polls < backoff.spin_limit && (backoff.polls & 63) == 15 &&
            tt_engine_peer_on_my_cpu(b))
            backoff.polls = backoff.spin_limit;
        tt_backoff_pause(&backoff, &hint);
    }
}

/* Polls of the direct loop in tt_engine_run_task before the general one takes over: at most
 * this many, and no more than the communicator spins (one, which never waits, on a host with
 * more ranks than CPUs, where spinning takes the CPU from the rank waited for; measured:
 * docs/performance.md, "Measurements behind the code"). */
#define RUN_ALONE_POLLS 64

ncclResult_t tt_engine_run_task(struct tt_task *t)
{
    struct tt_batch b;
    tt_engine_batch_init(&b);
    tt_engine_batch_add(&b, t);
    tt_engine_submit(&b);
    /* The common case, a small collective with nothing queued before it on its lane, costs
     * about as much in the batch loop's bookkeeping (hint juggling, the backoff, the spin
     * budget's adaptation) as in its own work: poll the task directly first. A task that
     * started, failed or ended here leaves the batch consistent for tt_engine_run. */
    if (t->lane == NULL ||
        atomic_load_explicit(&t->lane->serving, memory_order_acquire) == t->ticket) {
        struct tt_wait_hint hint;
        uint32_t spin = atomic_load_explicit(&t->st->spin_limit, memory_order_relaxed);
        uint32_t polls = spin < RUN_ALONE_POLLS ? spin + 1 : RUN_ALONE_POLLS;
        for (uint32_t i = 0; i < polls; i++) {
            if (i > 0) tt_cpu_relax();
            bool progressed = false;
            ncclResult_t res = task_progress(t, &b, &progressed, &hint);
            if (t->done) return res != ncclSuccess ? res : t->result;
        }
    }
    return tt_engine_run(&b);
}

void tt_event_rec_finish(struct tt_event_rec *rec, ncclResult_t result, const char *reason)
{
    pthread_mutex_lock(&rec->lock);
    rec->result = result;
    if (result != ncclSuccess)
        snprintf(rec->reason, sizeof rec->reason, "%s", reason != NULL ? reason : "");
    atomic_store_explicit(&rec->state, TT_EVENT_DONE, memory_order_release);
    pthread_mutex_unlock(&rec->lock);
}

void tt_engine_complete_events(struct tt_batch *b)
{
    struct tt_event_rec *list = b->events;
    b->events = NULL;
    while (list != NULL) {
        struct tt_event_rec *next = list->next;
        list->next = NULL;
        tt_event_rec_finish(list, b->result, b->reason);
        list = next;
    }
}
