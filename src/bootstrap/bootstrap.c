/* The bootstrap's rank side: join through the root, build the ring, then allgather, barrier and
 * point-to-point messages over plain TCP.
 *
 * A rank listens before it contacts the root, so that its address is valid as soon as anyone
 * learns it. One listening socket serves both the ring and point-to-point traffic; from then
 * on a listener thread (listener.c) serves it: every connection that sends the job's tag gets a
 * fresh challenge (gate.c) and must answer with an authenticated hello saying what it is (ring
 * or p2p) and from whom, and is filed under that name, so a connection that arrives "early" (a peer
 * sending before this rank asks) is kept, never lost, and a hostile one costs this rank's
 * calls nothing. Connecting waits only for that thread's challenge, never for the peer's
 * calls, so sends never deadlock against sends. Point-to-point messages: p2p.c. */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/proto.h"
#include "bootstrap/rank.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/sock.h"
#include "util/time.h"

/* The root waits TUTTI_TIMEOUT_MS; ranks wait this much longer, so the root's report of the
 * missing ranks reaches them before their own deadline passes. */
#define ROOT_GRACE_MS 1500
/* How long a rank whose init failed before it joined tries to tell the root (withdraw). */
#define WITHDRAW_MS 1000

/* Opens a connection to rank `to` at `addr`: passes the peer's gate (its listener thread
 * answers the job's tag with a challenge at once, whatever the peer is doing) and answers the
 * challenge with a hello that proves the secret for this job, this pair of ranks and this
 * connection. */
ncclResult_t tt_bs_open_peer(struct tt_bootstrap *bs, const struct sockaddr_storage *addr,
                              enum tt_bs_conn_kind kind, int to, uint64_t deadline_ns,
                              int *fd_out)
{
    ncclResult_t res = ncclSuccess;
    uint8_t challenge[TT_BS_NONCE_BYTES];
    struct tt_bs_peer_hello h;
    char who[48];
    int fd = -1;
    snprintf(who, sizeof who, "the bootstrap listener of rank %d", to);
    /* A rank listens before anyone learns its address, and its listener lives as long as its
     * bootstrap: a refused connect means it has gone (ncclRemoteError at once). */
    TT_TRY(tt_bs_gate_enter(addr, bs->magic, deadline_ns, bs->abort, who, true, &fd,
                            challenge));
    memset(&h, 0, sizeof h);
    h.magic = bs->magic;
    h.kind = kind;
    h.from_rank = bs->rank;
    h.to_rank = to;
    tt_bs_peer_hello_mac(bs->secret, bs->session, challenge, &h, h.mac);
    TT_TRY_GOTO(tt_sock_send_all(fd, &h, sizeof h, deadline_ns, bs->abort), res, fail);
    *fd_out = fd;
    return ncclSuccess;
fail:
    tt_sock_close(&fd);
    return res;
}

/* Waits (in slices, checking the abort flag and the deadline) until the listener hands over
 * the authenticated connection of `kind` from rank `from`. `waiting_for` names it for the
 * timeout message. */
ncclResult_t tt_bs_take_peer(struct tt_bootstrap *bs, enum tt_bs_conn_kind kind, int from,
                              uint64_t deadline_ns, const char *waiting_for,
                              tt_bootstrap_watch_fn watch, void *arg, int *fd_out)
{
    for (;;) {
        if (watch != NULL) TT_TRY(watch(arg));
        if (bs->abort != NULL && atomic_load(bs->abort))
            return TT_ERROR(ncclSystemError, "bootstrap rank %d: aborted while waiting for %s",
                            bs->rank, waiting_for);
        if (tt_deadline_passed(deadline_ns))
            return TT_ERROR(ncclSystemError, "bootstrap rank %d: %s did not come within %lld "
                            "ms (TUTTI_TIMEOUT_MS); is that rank alive and making the same "
                            "bootstrap calls?", bs->rank, waiting_for, (long long)bs->timeout_ms);
        uint64_t slice_ns = tt_deadline_after_ms(watch != NULL ? TT_BOOTSTRAP_WATCH_MS
                                                                : TT_SOCK_POLL_SLICE_MS);
        TT_TRY(tt_bs_listener_take(bs->listener, kind, from,
                                   slice_ns < deadline_ns ? slice_ns : deadline_ns, fd_out));
        if (*fd_out >= 0) return ncclSuccess;
    }
}

/* A rank's hello to the root, answering `challenge`: a join (failed 0, with the rank's
 * listening address) or a withdrawal (failed: the init's error; no address). */
static ncclResult_t make_hello(uint64_t magic, const uint8_t secret[32], int rank, int nranks,
                               uint32_t failed, const struct sockaddr_storage *listen_addr,
                               const uint8_t challenge[TT_BS_NONCE_BYTES],
                               struct tt_bs_root_hello *hello)
{
    memset(hello, 0, sizeof *hello);
    hello->magic = magic;
    hello->version = TT_UNIQUE_ID_VERSION;
    hello->rank = rank;
    hello->nranks = nranks;
    hello->failed = failed;
    if (listen_addr != NULL) tt_bs_addr_to_wire(listen_addr, &hello->listen_addr);
    TT_TRY(tt_bs_random(hello->nonce, sizeof hello->nonce));
    tt_bs_mac(secret, challenge, TT_BS_NONCE_BYTES, hello, offsetof(struct tt_bs_root_hello, mac),
              hello->mac);
    return ncclSuccess;
}

/* Contacts the root: answers its challenge with this rank's hello, waits for the reply and
 * checks the root's own MAC. On success *next holds the ring successor's address. */
static ncclResult_t join_root(struct tt_bootstrap *bs, const struct sockaddr_storage *root_addr,
                              uint64_t deadline_ns, struct sockaddr_storage *next)
{
    ncclResult_t res = ncclSuccess;
    char root_text[TT_SOCK_ADDR_STR_BYTES];
    uint8_t challenge[TT_BS_NONCE_BYTES];
    struct tt_bs_root_hello hello;
    struct tt_bs_root_reply reply;
    uint8_t mac[TT_BS_MAC_BYTES];
    char why[TT_BS_REPLY_TEXT_BYTES];
    int fd = -1;
    tt_sock_addr_str(root_addr, root_text, sizeof root_text);
    /* The gate connects again when a flooded root evicted the connection before it read the
     * tag; once past it, the root keeps this connection in preference to any stranger's. */
    res = tt_bs_gate_enter(root_addr, bs->magic, deadline_ns, bs->abort, "the bootstrap root",
                           bs->root_listening, &fd, challenge);
    if (res != ncclSuccess) goto root_failed;
    TT_TRY_GOTO(make_hello(bs->magic, bs->secret, bs->rank, bs->nranks, 0, &bs->listen_addr,
                           challenge, &hello), res, out);
    /* A root that challenged this rank but does not accept its proof (this job's tag with
     * another secret: a bug or a forgery) closes without a word, so as to tell an impostor
     * nothing; so does a root that ends (its process's own rank failed); a failed send or
     * receive is reported as such. */
    if (tt_sock_send_all(fd, &hello, sizeof hello, deadline_ns, bs->abort) != ncclSuccess ||
        tt_sock_recv_all(fd, &reply, sizeof reply, deadline_ns, bs->abort) != ncclSuccess) {
        res = TT_ERROR(ncclInvalidUsage, "the bootstrap root at %s gave no reply to rank %d's "
                       "proof: the root ended (did the init of the rank in its process fail?), "
                       "or it holds another secret under this job's tag", root_text, bs->rank);
        goto root_failed;
    }
    tt_bs_mac(bs->secret, hello.nonce, sizeof hello.nonce, &reply,
              offsetof(struct tt_bs_root_reply, mac), mac);
    if (reply.magic != bs->magic || !tt_bs_mac_equal(mac, reply.mac)) {
        res = TT_ERROR(ncclRemoteError, "the reply of the bootstrap root at %s failed "
                       "authentication", root_text);
        goto out;
    }
    if (reply.status != ncclSuccess) {
        reply.text[sizeof reply.text - 1] = '\0';
        res = reply.status > 0 && reply.status < ncclNumResults ? (ncclResult_t)reply.status
                                                                 : ncclRemoteError;
        res = TT_ERROR(res, "bootstrap failed: %s", reply.text);
        goto out;
    }
    memcpy(bs->session, reply.session, sizeof bs->session);
    TT_TRY_GOTO(tt_bs_addr_from_wire(&reply.next_addr, "the bootstrap root", next), res, out);
out:
    tt_sock_close(&fd);
    return res;
root_failed:
    /* A root of this process that said why it ended: more use than the refusal. */
    if (!(bs->abort != NULL && atomic_load(bs->abort)) &&
        tt_bs_root_failure(bs->magic, why, sizeof why))
        res = TT_ERROR(ncclSystemError, "rank %d: %s", bs->rank, why);
    goto out;
}

/* This rank's init failed with `why` before it joined the root of `id` (it could not listen,
 * for one): tell the root, which tells the other ranks at once instead of letting them wait for
 * this one until TUTTI_TIMEOUT_MS. Called once the rank's bootstrap is freed, so that a rank out
 * of descriptors has its listener's back for this connection. Best effort, for WITHDRAW_MS at
 * most; the thread's last error stays the failure's own. */
static void withdraw(const struct tt_unique_id *id, const struct sockaddr_storage *root_addr,
                     int rank, int nranks, const _Atomic int *abort, ncclResult_t why)
{
    char last[TT_REASON_BYTES];
    uint8_t challenge[TT_BS_NONCE_BYTES];
    struct tt_bs_root_hello hello;
    uint64_t deadline_ns = tt_deadline_after_ms(WITHDRAW_MS);
    bool listening = (id->flags & TT_UNIQUE_ID_LISTENING) != 0;
    int fd = -1;
    snprintf(last, sizeof last, "%s", tt_error_last());
    if (tt_bs_gate_enter(root_addr, id->magic, deadline_ns, abort, "the bootstrap root",
                         listening, &fd, challenge) == ncclSuccess) {
        if (make_hello(id->magic, id->secret, rank, nranks, (uint32_t)why, NULL, challenge,
                       &hello) == ncclSuccess)
            (void)tt_sock_send_all(fd, &hello, sizeof hello, deadline_ns, abort);
        tt_sock_close(&fd);
    }
    tt_error_note("%s", last);
}

/* Opens the ring: a connection to the successor and one accepted from the predecessor. */
static ncclResult_t connect_ring(struct tt_bootstrap *bs, const struct sockaddr_storage *next,
                                 uint64_t deadline_ns)
{
    int to = (bs->rank + 1) % bs->nranks;
    int prev = (bs->rank + bs->nranks - 1) % bs->nranks;
    TT_TRY(tt_bs_open_peer(bs, next, TT_BS_CONN_RING, to, deadline_ns, &bs->ring_next_fd));
    char what[64];
    snprintf(what, sizeof what, "the ring connection from rank %d", prev);
    return tt_bs_take_peer(bs, TT_BS_CONN_RING, prev, deadline_ns, what, NULL, NULL,
                     &bs->ring_prev_fd);
}

ncclResult_t tt_bootstrap_create(const ncclUniqueId *id_bytes, int rank, int nranks,
                                 const _Atomic int *abort, struct tt_bootstrap **out)
{
    ncclResult_t res = ncclSuccess;
    struct tt_bootstrap *bs = NULL;
    struct tt_unique_id id;
    struct sockaddr_storage root_addr, local, next;
    char ifname[TT_SOCK_IFNAME_BYTES] = "";
    char text[TT_SOCK_ADDR_STR_BYTES], root_text[TT_SOCK_ADDR_STR_BYTES];
    uint64_t start_ns = tt_time_ns();
    bool joining = false; /* join_root was called: the root knows of this rank, or cannot */
    *out = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return TT_ERROR(ncclInvalidArgument, "bootstrap: rank %d of nranks %d is out of range",
                        rank, nranks);
    memcpy(&id, id_bytes, sizeof id);
    TT_TRY(tt_bs_id_addr(&id, &root_addr));
    tt_sock_raise_nofile();

    TT_TRY(TT_CALLOC(&bs, 1));
    bs->rank = rank;
    bs->nranks = nranks;
    bs->magic = id.magic;
    memcpy(bs->secret, id.secret, sizeof bs->secret);
    bs->abort = abort;
    bs->root_listening = (id.flags & TT_UNIQUE_ID_LISTENING) != 0;
    bs->timeout_ms = tt_param_timeout_ms();
    bs->listen_fd = bs->ring_next_fd = bs->ring_prev_fd = -1;
    pthread_mutex_init(&bs->probe_lock, NULL);
    TT_TRY_GOTO(TT_CALLOC(&bs->peer_addrs, (size_t)nranks), res, fail);
    TT_TRY_GOTO(TT_CALLOC(&bs->refused_since_ns, (size_t)nranks), res, fail);
    /* One array holds both directions, so it is never half initialised. */
    TT_TRY_GOTO(TT_CALLOC(&bs->p2p_out_fd, 2 * (size_t)nranks), res, fail);
    bs->p2p_in_fd = bs->p2p_out_fd + nranks;
    for (int r = 0; r < 2 * nranks; r++) bs->p2p_out_fd[r] = -1;

    TT_TRY_GOTO(tt_sock_pick_addr(&local, ifname, sizeof ifname), res, fail);
    TT_TRY_GOTO(tt_sock_listen(&local, &bs->listen_fd, &bs->listen_addr), res, fail);
    bs->local_addr = bs->listen_addr;
    tt_sock_addr_set_port(&bs->local_addr, 0);
    TT_INFO(TT_SUB_BOOTSTRAP, "bootstrap rank %d/%d: interface %s, listening on %s; root %s",
            rank, nranks, ifname, tt_sock_addr_str(&bs->listen_addr, text, sizeof text),
            tt_sock_addr_str(&root_addr, root_text, sizeof root_text));

    /* From now on a thread serves every connection to this rank, so none waits on this rank's
     * calls, and connections that find the port before the peers do (a flood) are disposed of
     * while this rank waits for the root, not in front of its peers afterwards. */
    TT_TRY_GOTO(tt_bs_listener_start(bs->listen_fd, rank, nranks, bs->magic, bs->secret,
                                     &bs->listener), res, fail);
    uint64_t root_deadline_ns =
        bs->timeout_ms > 0 ? tt_deadline_after_ms(bs->timeout_ms + ROOT_GRACE_MS) : TT_NO_DEADLINE;
    joining = true;
    TT_TRY_GOTO(join_root(bs, &root_addr, root_deadline_ns, &next), res, fail);
    /* Peers learn this rank's address and the session from the root at the moment this rank
     * does: hellos that came first were held for it. */
    tt_bs_listener_set_session(bs->listener, bs->session);

    /* The ring, then every rank's listen address over it (for point-to-point). */
    uint64_t deadline_ns = tt_deadline_after_ms(bs->timeout_ms);
    if (nranks > 1) TT_TRY_GOTO(connect_ring(bs, &next, deadline_ns), res, fail);
    struct tt_bs_wire_addr *wire = NULL;
    TT_TRY_GOTO(TT_CALLOC(&wire, (size_t)nranks), res, fail);
    tt_bs_addr_to_wire(&bs->listen_addr, &wire[rank]);
    res = tt_bootstrap_allgather(bs, wire, sizeof *wire);
    for (int r = 0; r < nranks && res == ncclSuccess; r++)
        res = tt_bs_addr_from_wire(&wire[r], "a ring peer", &bs->peer_addrs[r]);
    free(wire);
    TT_TRY_GOTO(res, res, fail);
    TT_INFO(TT_SUB_BOOTSTRAP, "bootstrap rank %d/%d: ring ready in %llu ms", rank, nranks,
            (unsigned long long)((tt_time_ns() - start_ns) / 1000000ull));
    *out = bs;
    return ncclSuccess;
fail:
    /* The job cannot form without this rank. A rank that joined cancels a root of this
     * process; one that never joined withdraws: directly from a root of this process, else
     * over the network once its own sockets are closed. */
    if (joining)
        tt_bootstrap_root_cancel(id_bytes);
    bool withdrawn = !joining && tt_bs_root_withdraw(id_bytes, rank, nranks, res);
    tt_bootstrap_destroy(bs);
    if (!joining && !withdrawn) withdraw(&id, &root_addr, rank, nranks, abort, res);
    sodium_memzero(&id, sizeof id);
    return res;
}

void tt_bootstrap_destroy(struct tt_bootstrap *bs)
{
    if (bs == NULL) return;
    tt_bs_listener_stop(bs->listener);
    tt_sock_close(&bs->listen_fd);
    tt_sock_close(&bs->ring_next_fd);
    tt_sock_close(&bs->ring_prev_fd);
    pthread_mutex_destroy(&bs->probe_lock);
    for (int r = 0; bs->p2p_out_fd != NULL && r < bs->nranks; r++) {
        tt_sock_close(&bs->p2p_out_fd[r]);
        tt_sock_close(&bs->p2p_in_fd[r]);
    }
    while (bs->stash != NULL) {
        struct stashed *s = bs->stash;
        bs->stash = s->next;
        free(s->data);
        free(s);
    }
    free(bs->peer_addrs);
    free(bs->refused_since_ns);
    free(bs->p2p_out_fd);
    sodium_memzero(bs->secret, sizeof bs->secret); /* freed memory keeps no secret */
    free(bs);
}

const struct sockaddr_storage *tt_bootstrap_local_addr(const struct tt_bootstrap *bs)
{
    return &bs->local_addr;
}

const struct sockaddr_storage *tt_bootstrap_listen_addr(const struct tt_bootstrap *bs)
{
    return &bs->listen_addr;
}

/* ---- is a peer still there? ---------------------------------------------------------------- */

/* A probe at most this often, each waiting this long for the peer's host to answer (a host that
 * is down, or far, answers nothing in time: only a refusal is an answer). A peer is gone once
 * its probes have been refused for GONE_AFTER_NS: a peer that finished its part and destroyed
 * its communicator may have sent, before that, what the waiting rank has not read yet (a
 * hello held up by a lost packet), which gets this long to arrive. */
#define PROBE_EVERY_NS 250000000ull
#define PROBE_WAIT_MS 10
#define GONE_AFTER_NS 1000000000ull

bool tt_bootstrap_peer_gone(struct tt_bootstrap *bs, int peer)
{
    if (bs == NULL || peer < 0 || peer >= bs->nranks || peer == bs->rank ||
        bs->peer_addrs[peer].ss_family == 0)
        return false;
    pthread_mutex_lock(&bs->probe_lock);
    uint64_t now = tt_time_ns();
    bool due = now >= bs->probe_next_ns;
    if (due) bs->probe_next_ns = now + PROBE_EVERY_NS;
    pthread_mutex_unlock(&bs->probe_lock);
    if (!due) return false;
    /* The peer's listener thread accepts such a connection and drops it without a word when
     * it closes before sending the job's tag (listener.c): the peer's calls never see it. */
    const struct sockaddr_storage *addr = &bs->peer_addrs[peer];
    int fd = tt_sock_socket(addr->ss_family);
    if (fd < 0) return false;
    int err = connect(fd, (const struct sockaddr *)addr, tt_sock_addr_len(addr)) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        socklen_t len = sizeof err;
        if (poll(&pfd, 1, PROBE_WAIT_MS) != 1 ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
            err = EINPROGRESS; /* no answer: nothing known */
    }
    bool gone = err == ECONNREFUSED || (err == 0 && tt_sock_self_connected(fd));
    close(fd);
    pthread_mutex_lock(&bs->probe_lock);
    uint64_t *since = &bs->refused_since_ns[peer];
    if (!gone) {
        if (err != EINPROGRESS) *since = 0; /* answered */
    } else if (*since == 0) {
        *since = now;
        gone = false;
    } else {
        gone = now - *since >= GONE_AFTER_NS;
    }
    pthread_mutex_unlock(&bs->probe_lock);
    return gone;
}

/* ---- ring allgather ----------------------------------------------------------------------- */

/* One ring step: sends header + `send` to the successor while receiving header + `recv` from
 * the predecessor, both at once so that neither direction waits on the other (a block larger
 * than the socket buffers would otherwise deadlock the ring). */
static ncclResult_t ring_exchange(struct tt_bootstrap *bs, const void *send, void *recv,
                                  size_t bytes, uint64_t deadline_ns)
{
    int prev = (bs->rank + bs->nranks - 1) % bs->nranks;
    struct tt_bs_ring_header out_hdr = {.magic = bs->magic, .seq = bs->ring_seq, .bytes = bytes};
    struct tt_bs_ring_header in_hdr;
    size_t out_hdr_done = 0, out_done = 0, in_hdr_done = 0, in_done = 0;
    bs->ring_seq++;
    for (;;) {
        if (out_hdr_done < sizeof out_hdr)
            TT_TRY(tt_sock_send_some(bs->ring_next_fd, &out_hdr, sizeof out_hdr, &out_hdr_done));
        if (out_hdr_done == sizeof out_hdr)
            TT_TRY(tt_sock_send_some(bs->ring_next_fd, send, bytes, &out_done));
        if (in_hdr_done < sizeof in_hdr) {
            TT_TRY(tt_sock_recv_some(bs->ring_prev_fd, &in_hdr, sizeof in_hdr, &in_hdr_done));
            if (in_hdr_done == sizeof in_hdr &&
                (in_hdr.magic != bs->magic || in_hdr.seq != out_hdr.seq || in_hdr.bytes != bytes))
                return TT_ERROR(ncclRemoteError,
                                "bootstrap allgather step %llu: rank %d sent a block of %llu "
                                "bytes at step %llu (want %zu bytes at step %llu%s); do all "
                                "ranks make the same bootstrap calls?",
                                (unsigned long long)out_hdr.seq, prev,
                                (unsigned long long)in_hdr.bytes, (unsigned long long)in_hdr.seq,
                                bytes, (unsigned long long)out_hdr.seq,
                                in_hdr.magic != bs->magic ? ", and a wrong magic" : "");
        }
        if (in_hdr_done == sizeof in_hdr)
            TT_TRY(tt_sock_recv_some(bs->ring_prev_fd, recv, bytes, &in_done));
        bool sent = out_hdr_done == sizeof out_hdr && out_done == bytes;
        bool received = in_hdr_done == sizeof in_hdr && in_done == bytes;
        if (sent && received) return ncclSuccess;
        if (bs->abort != NULL && atomic_load(bs->abort))
            return TT_ERROR(ncclSystemError, "bootstrap allgather: aborted");
        if (tt_deadline_passed(deadline_ns))
            return TT_ERROR(ncclSystemError,
                            "bootstrap allgather timed out after %lld ms: %s rank %d "
                            "(TUTTI_TIMEOUT_MS)", (long long)bs->timeout_ms,
                            received ? "sending to" : "waiting for", received ?
                            (bs->rank + 1) % bs->nranks : prev);
        /* A finished direction is left out (fd -1): a neighbour that has already closed its
         * end would otherwise wake every poll with POLLHUP. */
        struct pollfd pfds[2] = {
            {.fd = sent ? -1 : bs->ring_next_fd, .events = POLLOUT},
            {.fd = received ? -1 : bs->ring_prev_fd, .events = POLLIN},
        };
        poll(pfds, 2, tt_deadline_left_ms(deadline_ns, TT_SOCK_POLL_SLICE_MS));
    }
}

ncclResult_t tt_bootstrap_allgather(struct tt_bootstrap *bs, void *data, size_t bytes)
{
    /* Ring allgather: at step s, send block (rank - s) to the successor and receive block
     * (rank - s - 1) from the predecessor. After nranks - 1 steps every block has visited
     * every rank. */
    uint8_t *blocks = data;
    int n = bs->nranks;
    uint64_t deadline_ns = tt_deadline_after_ms(bs->timeout_ms);
    if (bs->ring_broken)
        return TT_ERROR(ncclRemoteError, "bootstrap rank %d: an earlier allgather failed and "
                        "closed the ring; this communicator's ranks cannot exchange any more "
                        "(abort it)", bs->rank);
    for (int s = 0; s < n - 1; s++) {
        int send_block = (bs->rank - s + n) % n;
        int recv_block = (bs->rank - s - 1 + n) % n;
        ncclResult_t res = ring_exchange(bs, blocks + (size_t)send_block * bytes,
                                         blocks + (size_t)recv_block * bytes, bytes, deadline_ns);
        if (res == ncclSuccess) continue;
        /* The ring is out of step for good. Shutting both ends makes the neighbours fail at
         * once, and theirs theirs, all around the ring: otherwise a rank that died would fail
         * only its two neighbours, and the others would wait for their deadline. */
        if (bs->ring_next_fd >= 0) shutdown(bs->ring_next_fd, SHUT_RDWR);
        if (bs->ring_prev_fd >= 0) shutdown(bs->ring_prev_fd, SHUT_RDWR);
        bs->ring_broken = true;
        char why[TT_REASON_BYTES];
        snprintf(why, sizeof why, "%s", tt_error_last());
        return TT_ERROR(res, "bootstrap rank %d: allgather between rank %d (before it on the "
                        "ring) and rank %d (after it) failed, so a rank of the communicator "
                        "failed or died: %s", bs->rank, (bs->rank + n - 1) % n,
                        (bs->rank + 1) % n, why);
    }
    return ncclSuccess;
}

ncclResult_t tt_bootstrap_barrier(struct tt_bootstrap *bs)
{
    /* An allgather of one byte returns only after every rank has contributed its byte. */
    uint8_t *bytes = NULL;
    TT_TRY(TT_CALLOC(&bytes, (size_t)bs->nranks));
    ncclResult_t res = tt_bootstrap_allgather(bs, bytes, 1);
    free(bytes);
    return res;
}
