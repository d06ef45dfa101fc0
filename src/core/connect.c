/* Connections made after init: point-to-point ones on first use, and Tree's at init. A send to
 * peer p needs this rank's send side and p's receive side, set up at the same time: the
 * matching operation on p is in p's batch (NCCL requires matching sends and receives), so both
 * ranks reach this code for that pair. The first operation between two ranks connects both
 * directions, so that whichever operation each rank issues first with the other (a Send on
 * both, say, each before its Recv), the two exchanges are the same and meet.
 *
 * The exchange runs in four phases over every connection the batch needs, across all its
 * communicators at once, so that one thread driving several communicators (ncclCommInitAll)
 * never waits for itself: (1) set up each side and post its info to the peer, (2) receive the
 * peers' infos, (3) connect every send side, (4) connect every receive side, (5) connect the
 * send sides a transport builds from their receive side (TCP's pairs share sockets: the higher
 * rank's send side takes those its receive side accepted). Posting never waits for the
 * receiver, and every rank connects sends before receives, so no rank waits for a step another
 * rank can only take after it. A connection to oneself uses the self transport and skips the
 * bootstrap.
 *
 * Tree's connections (a transport tag and bootstrap tags of their own) go through the same
 * exchange, but at init (tt_connect_tree), for every partner any Tree operation may need:
 * collectives, unlike sends and receives, may be grouped differently on different ranks, so a
 * connection made inside the first Tree operation could wait for a peer busy elsewhere. */
#include <stdlib.h>
#include <string.h>

#include "core/connect.h"

#include "algo/fault.h"
#include "core/comm.h"
#include "core/forms.h"
#include "transport/team.h"
#include "util/err.h"
#include "util/log.h"
#include "util/time.h"

/* Bootstrap tags of the info exchange: the tag names the side the info describes. */
#define TAG_P2P_SEND_INFO 0x50320001
#define TAG_P2P_RECV_INFO 0x50320002
#define TAG_TREE_SEND_INFO 0x50320003
#define TAG_TREE_RECV_INFO 0x50320004

/* The transport tag of each kind of connection (the ring's is 0). */
#define CONN_TAG_P2P 1
#define CONN_TAG_TREE 2

struct need {
    struct ncclComm *comm;
    int peer;
    enum tt_conn_dir dir;
    bool tree; /* one of Tree's connections (comm->tree), else a point-to-point one */
    struct tt_conn_info mine;
    struct tt_conn_info theirs;
    bool peer_failed; /* the exchange ended because the peer's communicator failed */
    bool reverse;     /* point-to-point: the direction no task asked for, made with the other */
    /* Point-to-point: the first operation that needs it and its batch, for the mailbox
     * record (looked at only when the connection is really made). */
    const struct tt_task *task;
    const struct tt_batch *batch;
};

static struct tt_conn *need_conn(const struct need *n)
{
    if (n->tree) {
        struct tt_tree_link *l = &n->comm->tree[n->peer];
        return n->dir == TT_CONN_SEND ? &l->send : &l->recv;
    }
    struct tt_p2p_peer *p = &n->comm->p2p[n->peer];
    return n->dir == TT_CONN_SEND ? &p->send : &p->recv;
}

static bool *need_ready(const struct need *n)
{
    if (n->tree) {
        struct tt_tree_link *l = &n->comm->tree[n->peer];
        return n->dir == TT_CONN_SEND ? &l->send_ready : &l->recv_ready;
    }
    struct tt_p2p_peer *p = &n->comm->p2p[n->peer];
    return n->dir == TT_CONN_SEND ? &p->send_ready : &p->recv_ready;
}

/* The bootstrap tag of the info that describes `dir`'s side of such a connection. */
static uint32_t info_tag(bool tree, enum tt_conn_dir dir)
{
    if (tree) return dir == TT_CONN_SEND ? TAG_TREE_SEND_INFO : TAG_TREE_RECV_INFO;
    return dir == TT_CONN_SEND ? TAG_P2P_SEND_INFO : TAG_P2P_RECV_INFO;
}

static bool same_conn(const struct need *a, const struct need *b)
{
    return a->comm == b->comm && a->peer == b->peer && a->dir == b->dir && a->tree == b->tree;
}

/* Adds the need unless connected or listed; a self connection brings its other half. */
static void add_need(struct need *needs, int *count, struct need n)
{
    if (*need_ready(&n)) return;
    for (int i = 0; i < *count; i++)
        if (same_conn(&needs[i], &n)) return;
    needs[(*count)++] = n;
    if (n.peer == n.comm->st.rank) {
        n.dir = n.dir == TT_CONN_SEND ? TT_CONN_RECV : TT_CONN_SEND;
        add_need(needs, count, n);
    }
}

static int compare_comms(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(struct ncclComm *const *)a;
    uintptr_t y = (uintptr_t)*(struct ncclComm *const *)b;
    return x < y ? -1 : x > y;
}

/* While a point-to-point exchange waits for a peer: whether this communicator was revoked or
 * aborted, or (a peer of this host) whether that peer's process ended or its communicator
 * failed (its mailbox), or (any peer) whether its bootstrap listener refuses connections,
 * which ends the wait with the peer's error at once. That is how a rank
 * waiting here learns that the peer ran a team AlltoAll against its grouped Send/Recv and
 * failed (core/forms.c, tt_forms_check). */
static ncclResult_t peer_check(struct ncclComm *comm, int peer, bool *peer_failed)
{
    /* Revoked or aborted by another thread (a PyTorch group's timeout revokes): the wait ends,
     * as an operation's does. */
    if (tt_state_stopped(&comm->st))
        return TT_ERROR(ncclRemoteError, "connecting with rank %d on rank %d: the communicator "
                        "was %s", peer, comm->st.rank,
                        atomic_load(&comm->st.abort) ? "aborted" : "revoked");
    char why[TT_TEAM_REASON_BYTES + 16];
    ncclResult_t code;
    int gone = tt_state_gone_peer(&comm->st, peer, &code, why, sizeof why);
    if (gone < 0 && tt_bootstrap_peer_gone(comm->bootstrap, peer)) {
        /* A peer on another host (no process to watch), or one that destroyed the
         * communicator and lives on: its listener tells. */
        gone = peer;
        code = ncclRemoteError;
        snprintf(why, sizeof why, "is gone (its bootstrap listener refuses connections: its "
                 "process ended or it destroyed the communicator)");
    }
    if (gone < 0) return ncclSuccess;
    if (peer_failed != NULL) *peer_failed = true;
    return TT_ERROR(code, "connecting with rank %d on rank %d: rank %d %s", peer,
                    comm->st.rank, gone, why);
}

static ncclResult_t watch_peer(void *arg)
{
    struct need *n = arg;
    return peer_check(n->comm, n->peer, &n->peer_failed);
}

/* The same for the transports' connect waits (transport.h, connect_check): a receive side
 * waiting for its sender to attach ends when the sender is gone, not at the deadline. */
ncclResult_t tt_connect_check(void *comm, int peer)
{
    return peer_check(comm, peer, NULL);
}

/* The peer's info for a point-to-point need, waited for with the peer watched, and with this
 * rank's wait published in its mailbox for the peer's stall check (core/forms.c): the operation
 * it waits for is the peer's first on the lane this connection serves. */
static ncclResult_t recv_p2p_info(struct need *n, uint32_t tag)
{
    struct ncclComm *comm = n->comm;
    struct tt_team *team = comm->st.team;
    if (team == NULL || n->reverse) /* no team mailbox, or no operation waits on this way */
        return tt_bootstrap_recv_watched(comm->bootstrap, n->peer, tag, &n->theirs,
                                         sizeof n->theirs, watch_peer, n);
    const struct tt_lane *lane = n->dir == TT_CONN_RECV ? &comm->p2p[n->peer].recv_lane
                                                        : &comm->p2p[n->peer].send_lane;
    struct tt_team_p2p_wait w = {
        .peer = n->peer, .peer_send = n->dir == TT_CONN_RECV,
        .ticket = atomic_load_explicit(&lane->next_ticket, memory_order_relaxed),
        .count = n->task->op.count, .dtype = (int)n->task->op.redop.dtype,
        .both_ways = tt_forms_both_ways(n->batch, n->task)};
    tt_team_set_p2p_wait(team, &w);
    ncclResult_t res = tt_bootstrap_recv_watched(comm->bootstrap, n->peer, tag, &n->theirs,
                                                 sizeof n->theirs, watch_peer, n);
    tt_team_clear_p2p_wait(team);
    return res;
}

/* The need for the other direction of the same connection, if the exchange makes it too. */
static struct need *reverse_need(struct need *needs, int count, const struct need *n)
{
    for (int j = 0; j < count; j++)
        if (needs[j].comm == n->comm && needs[j].peer == n->peer && needs[j].dir != n->dir &&
            needs[j].tree == n->tree)
            return &needs[j];
    return NULL;
}

static ncclResult_t exchange(struct need *needs, int count)
{
    for (int i = 0; i < count; i++) {
        struct need *n = &needs[i];
        *need_conn(n) = (struct tt_conn){.transport = n->comm->transports[n->peer],
                                         .peer = n->peer, .dir = n->dir,
                                         .slot_bytes = n->comm->slot_bytes,
                                         .tag = n->tree ? CONN_TAG_TREE : CONN_TAG_P2P};
    }
    /* Both directions with a peer are made together (the peer's exchange has the same two),
     * so each knows the other: a transport may carry them over one stream. */
    for (int i = 0; i < count; i++) {
        struct need *r = reverse_need(needs, count, &needs[i]);
        if (needs[i].peer != needs[i].comm->st.rank && r != NULL)
            need_conn(&needs[i])->pair = need_conn(r);
    }
    /* Phase 1: set up every side and post its description to the peer. */
    for (int i = 0; i < count; i++) {
        struct need *n = &needs[i];
        struct tt_conn *conn = need_conn(n);
        TT_TRY(conn->transport->setup(&n->comm->tctx, conn, &n->mine));
        if (n->peer != n->comm->st.rank)
            TT_TRY(tt_bootstrap_send(n->comm->bootstrap, n->peer, info_tag(n->tree, n->dir),
                                     &n->mine, sizeof n->mine));
    }
    /* Phase 2: the peer's side of each connection. */
    for (int i = 0; i < count; i++) {
        struct need *n = &needs[i];
        if (n->peer != n->comm->st.rank) {
            uint32_t tag = info_tag(n->tree, n->dir == TT_CONN_SEND ? TT_CONN_RECV
                                                                    : TT_CONN_SEND);
            if (n->tree)
                TT_TRY(tt_bootstrap_recv(n->comm->bootstrap, n->peer, tag, &n->theirs,
                                         sizeof n->theirs));
            else
                TT_TRY(recv_p2p_info(n, tag));
            continue;
        }
        struct need *r = reverse_need(needs, count, n);
        if (r != NULL) n->theirs = r->mine;
    }
    if (__builtin_expect(tt_fault_armed, 0)) tt_fault_at(TT_FAULT_AT_CONNECT, needs[0].comm->st.rank);
    /* Phases 3 to 5: every send side, then every receive side, then the send sides built from
     * their receive side (transport.h, send_after_recv). */
    for (int pass = 0; pass < 3; pass++) {
        enum tt_conn_dir dir = pass == 1 ? TT_CONN_RECV : TT_CONN_SEND;
        for (int i = 0; i < count; i++) {
            struct need *n = &needs[i];
            if (n->dir != dir) continue;
            struct tt_conn *conn = need_conn(n);
            if (dir == TT_CONN_SEND &&
                tt_transport_send_after_recv(&n->comm->tctx, conn, &n->theirs) != (pass == 2))
                continue;
            uint64_t deadline = tt_deadline_after_ms(n->comm->st.timeout_ms);
            TT_TRY(conn->transport->connect(&n->comm->tctx, conn, &n->theirs, deadline));
            *need_ready(n) = true;
            TT_INFO(TT_SUB_P2P, "%s: %d %s %d via %s", n->tree ? "tree" : "p2p", n->comm->st.rank,
                    dir == TT_CONN_SEND ? "->" : "<-", n->peer, conn->transport->name);
        }
    }
    return ncclSuccess;
}

static bool connects(const struct tt_task *t)
{
    return t->op.coll == TT_COLL_SEND || t->op.coll == TT_COLL_RECV;
}

/* After a failed exchange: half-made connections are closed, so the next attempt starts
 * clean on this rank. The peer may have finished its sides meanwhile (a pair whose higher
 * rank's send side, made last, was not), so a retry with that peer can wait for its deadline:
 * a communicator whose exchange failed is one to abort, as its error says. */
static void close_unready(struct need *needs, int count)
{
    for (int i = 0; i < count; i++) {
        if (*need_ready(&needs[i])) continue;
        struct tt_conn *conn = need_conn(&needs[i]);
        conn->peer_died = tt_state_peer_died(&needs[i].comm->st, needs[i].peer);
        if (conn->transport) conn->transport->close(conn);
        memset(conn, 0, sizeof *conn);
    }
}

ncclResult_t tt_connect_tree(struct ncclComm *comm)
{
    int peers[TT_TREE_ALL_PEERS + 4], more[4];
    int npeers = tt_tree_all_peers(comm->st.rank, comm->st.nranks, peers);
    /* Hier's local and rail neighbours (both directions: the relation stays symmetric). */
    int nmore = tt_hier_all_peers(&comm->hier, more);
    for (int i = 0; i < nmore; i++) {
        bool seen = more[i] == comm->st.rank;
        for (int k = 0; k < npeers && !seen; k++) seen = peers[k] == more[i];
        if (!seen) peers[npeers++] = more[i];
    }
    struct need *needs = NULL;
    int count = 0;
    TT_TRY(TT_CALLOC(&needs, 2 * (size_t)npeers + 1));
    for (int i = 0; i < npeers; i++) {
        add_need(needs, &count, (struct need){.comm = comm, .peer = peers[i],
                                              .dir = TT_CONN_SEND, .tree = true});
        add_need(needs, &count, (struct need){.comm = comm, .peer = peers[i],
                                              .dir = TT_CONN_RECV, .tree = true});
    }
    pthread_mutex_lock(&comm->bootstrap_lock);
    ncclResult_t res = exchange(needs, count);
    if (res != ncclSuccess) close_unready(needs, count);
    pthread_mutex_unlock(&comm->bootstrap_lock);
    free(needs);
    return res;
}

ncclResult_t tt_connect_batch(struct tt_batch *b)
{
    int max = 0;
    for (struct tt_task *t = b->head; t; t = t->next)
        if (connects(t)) max += 2;
    if (max == 0) return ncclSuccess;

    struct need *needs = NULL;
    struct ncclComm **comms = NULL;
    int count = 0, ncomms = 0;
    ncclResult_t res = ncclSuccess;
    TT_TRY(TT_CALLOC(&needs, (size_t)max));
    TT_TRY_GOTO(TT_CALLOC(&comms, (size_t)max), res, out);
    for (struct tt_task *t = b->head; t; t = t->next) {
        if (!connects(t)) continue;
        bool seen = false;
        for (int i = 0; i < ncomms && !seen; i++) seen = comms[i] == t->comm;
        if (!seen) comms[ncomms++] = t->comm;
    }
    /* The bootstrap is not thread-safe: lock every communicator involved, in address order so
     * that two threads locking overlapping sets cannot deadlock. Checking what is connected
     * happens under the locks, since another thread may connect the same pair meanwhile. */
    qsort(comms, (size_t)ncomms, sizeof *comms, compare_comms);
    for (int i = 0; i < ncomms; i++) pthread_mutex_lock(&comms[i]->bootstrap_lock);
    for (struct tt_task *t = b->head; t; t = t->next) {
        /* A failed communicator's tasks fail when they start; its peers may be gone. */
        if (!connects(t) || t->comm->st.async_error != ncclSuccess) continue;
        /* Both directions with the peer at once, whichever the task needs: the peer does the
         * same on its first operation with this rank, whatever that is, so two ranks that
         * each send to the other first, outside a group (on different streams), meet in one
         * exchange instead of each waiting for a receive the other has not issued yet. */
        enum tt_conn_dir dir = t->op.coll == TT_COLL_SEND ? TT_CONN_SEND : TT_CONN_RECV;
        add_need(needs, &count, (struct need){.comm = t->comm, .peer = t->peer, .dir = dir,
                                              .task = t, .batch = b});
        add_need(needs, &count,
                 (struct need){.comm = t->comm, .peer = t->peer,
                               .dir = dir == TT_CONN_SEND ? TT_CONN_RECV : TT_CONN_SEND,
                               .task = t, .batch = b, .reverse = true});
    }
    if (count > 0) res = exchange(needs, count);
    /* Under the locks: another thread may start connecting the same pair once they go. */
    if (res != ncclSuccess) close_unready(needs, count);
    for (int i = ncomms - 1; i >= 0; i--) pthread_mutex_unlock(&comms[i]->bootstrap_lock);
    /* A peer that failed took this communicator's operation with it: latched like a failed
     * operation, so that every rank reports the error and the communicator is left for Abort. */
    for (int i = 0; i < count; i++)
        if (needs[i].peer_failed) tt_state_fail(&needs[i].comm->st, res);
out:
    free(comms);
    free(needs);
    return res;
}
