/* UCX transport, the data path (transport/ucx.h has the design and the wire format; setup and
 * teardown are in ucx_setup.c): frames sent into the receiver's posted receives under the
 * credits it returns, received frames checked and handed out in order, and waiting that arms
 * the worker and sleeps on its event fd rather than spinning. Every function below runs with
 * the worker's lock held, except the contract's entry points, which take it. */
#include <endian.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "transport/ucx.h"
#include "transport/wire.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/time.h"
#include "util/wait.h"

/* ---- The data path (every function below runs with the worker's lock held) ------------------ */

static ncclResult_t fail(struct ucx_conn *uc, ncclResult_t res)
{
    uc->failed = res;
    return res;
}

static ncclResult_t peer_failed(struct tt_conn *conn, struct ucx_conn *uc)
{
    ucs_status_t st = (ucs_status_t)atomic_load(&uc->net->peers[conn->peer].status);
    return fail(uc, TT_ERROR(ncclRemoteError, "ucx: connection to peer rank %d failed: %s",
                             conn->peer, ucs_status_string(st)));
}

static bool peer_ok(const struct tt_conn *conn, const struct ucx_conn *uc)
{
    return atomic_load(&uc->net->peers[conn->peer].status) == UCS_OK;
}

/* Checks a control receive (one u64); returns whether it completed. */
static ncclResult_t poll_ctl(struct tt_conn *conn, void **req, bool *done)
{
    *done = false;
    if (*req == NULL) return ncclSuccess;
    ucp_tag_recv_info_t info = {.length = 0};
    ucs_status_t st = ucp_tag_recv_request_test(*req, &info);
    if (st == UCS_INPROGRESS) return ncclSuccess;
    ucp_request_free(*req);
    *req = NULL;
    if (st != UCS_OK)
        return TT_ERROR(ncclRemoteError, "ucx: control message from peer rank %d failed: %s",
                        conn->peer, ucs_status_string(st));
    TT_TRY(tt_ucx_check_ctl(conn, info.length));
    *done = true;
    return ncclSuccess;
}

/* The peer's bye, if it came. */
static ncclResult_t poll_bye(struct tt_conn *conn, struct ucx_conn *uc)
{
    if (uc->bye_got) return ncclSuccess;
    bool done;
    TT_TRY(poll_ctl(conn, &uc->bye_req, &done));
    if (done) uc->bye_got = true;
    return ncclSuccess;
}

/* Sender: takes every credit message that arrived. */
static ncclResult_t poll_credit(struct tt_conn *conn, struct ucx_conn *uc)
{
    for (int i = 0; i < 64; i++) {
        bool done;
        if (uc->credit_req != NULL) TT_TRY(poll_ctl(conn, &uc->credit_req, &done));
        else done = true; /* completed at posting */
        if (!done) return ncclSuccess;
        uint64_t released = le64toh(uc->credit_buf);
        if (released > uc->posted)
            return TT_ERROR(ncclRemoteError,
                            "ucx: peer rank %d released %" PRIu64 " frames of %" PRIu64 " sent",
                            conn->peer, released, uc->posted);
        if (released > uc->credit) uc->credit = released;
        /* Through a request (checked at the top of the next round), so its length is known. */
        TT_TRY(tt_ucx_post_credit_recv(conn, uc, &done));
    }
    return ncclSuccess;
}

/* Sender: frees the send requests that completed. One that failed means the endpoint failed
 * before the frame was known to be delivered (an eager send completes once UCX holds its bytes,
 * a rendezvous one once the peer fetched them): the connection fails, since only a send that
 * completed may have reached the peer. The peer is marked failed too. */
static ncclResult_t reap_sends(struct tt_conn *conn, struct ucx_conn *uc)
{
    for (unsigned s = 0; s < uc->depth; s++) {
        if (uc->req[s] == NULL) continue;
        ucs_status_t st = ucp_request_check_status(uc->req[s]);
        if (st == UCS_INPROGRESS) continue;
        ucp_request_free(uc->req[s]);
        uc->req[s] = NULL;
        if (st != UCS_OK) {
            int ok = UCS_OK;
            atomic_compare_exchange_strong(&uc->net->peers[conn->peer].status, &ok, (int)st);
            return TT_ERROR(ncclRemoteError, "ucx: a send to peer rank %d failed (%s): the "
                                             "frame may not have reached it",
                            conn->peer, ucs_status_string(st));
        }
    }
    return ncclSuccess;
}

/* Receiver: sends the count of released frames, unless a credit is still in flight (then the
 * newer count follows it). */
static void send_credit(struct tt_conn *conn, struct ucx_conn *uc)
{
    struct ucx_net *n = uc->net;
    struct ucx_peer *p = &n->peers[conn->peer];
    if (uc->credit_req != NULL) {
        if (ucp_request_check_status(uc->credit_req) == UCS_INPROGRESS) {
            uc->credit_dirty = true;
            return;
        }
        ucp_request_free(uc->credit_req);
        uc->credit_req = NULL;
    }
    uc->credit_dirty = false;
    if (atomic_load(&p->status) != UCS_OK) return; /* the frames' wait will say so */
    uc->credit_buf = htole64(uc->done);
    ucp_request_param_t param = {.op_attr_mask = 0};
    void *r = ucp_tag_send_nbx(p->ep, &uc->credit_buf, sizeof uc->credit_buf,
                               make_tag(KIND_CREDIT, conn->tag, n->rank, 0), &param);
    if (UCS_PTR_IS_PTR(r)) uc->credit_req = r;
    else if (UCS_PTR_IS_ERR(r)) uc->credit_dirty = true; /* sent again at the next call */
    n->armed = false;
}

/* Receiver: whether the oldest unreleased frame is in (checking its receive). */
static ncclResult_t poll_oldest(struct tt_conn *conn, struct ucx_conn *uc, bool *ready)
{
    unsigned s = (unsigned)(uc->done % uc->depth);
    if (!uc->full[s] && uc->req[s] != NULL) {
        ucp_tag_recv_info_t info;
        ucs_status_t st = ucp_tag_recv_request_test(uc->req[s], &info);
        if (st != UCS_INPROGRESS) {
            ucp_request_free(uc->req[s]);
            uc->req[s] = NULL;
            if (st == UCS_ERR_MESSAGE_TRUNCATED)
                return TT_ERROR(ncclRemoteError,
                                "ucx: peer rank %d sent a frame larger than a %zu-byte slot",
                                conn->peer, conn->slot_bytes);
            if (st != UCS_OK)
                return TT_ERROR(ncclRemoteError, "ucx: receive from peer rank %d failed: %s",
                                conn->peer, ucs_status_string(st));
            TT_TRY(tt_ucx_take_frame(conn, uc, uc->done, info.length));
        }
    }
    *ready = uc->full[s];
    return ncclSuccess;
}

/* A call found nothing to do: count the miss; after a few, arm the worker and point the hint
 * at its event fd. Returns true when the worker had events after all (call again). */
static ncclResult_t arm(struct ucx_conn *uc, struct tt_wait_hint *hint, bool *again)
{
    struct ucx_net *n = uc->net;
    *again = false;
    tt_wait_hint_clear(hint);
    if (++uc->misses < UCX_SPIN_MISSES) return ncclSuccess;
    if (!n->armed) {
        ucs_status_t st = ucp_worker_arm(n->worker);
        if (st == UCS_ERR_BUSY) {
            tt_ucx_net_progress(n);
            *again = true;
            return ncclSuccess;
        }
        if (st != UCS_OK)
            return fail(uc, TT_ERROR(ncclSystemError, "ucx: ucp_worker_arm failed: %s",
                                     ucs_status_string(st)));
        n->armed = true;
    }
    hint->fd = n->efd;
    hint->events = POLLIN;
    return ncclSuccess;
}

static ncclResult_t recv_peek_locked(struct tt_conn *conn, struct ucx_conn *uc,
                                     const void **data, size_t *bytes, struct tt_op_desc *desc,
                                     struct tt_wait_hint *hint)
{
    if (uc->failed != ncclSuccess) return uc->failed;
    if (uc->credit_dirty) send_credit(conn, uc);
    for (int round = 0; round < 8; round++) {
        bool ready = false;
        ncclResult_t res = poll_oldest(conn, uc, &ready);
        if (res != ncclSuccess) return fail(uc, res);
        if (ready) {
            unsigned s = (unsigned)(uc->done % uc->depth);
            uc->misses = 0;
            *data = slot_of(uc, uc->done) + UCX_SLOT_LEAD;
            *bytes = uc->len[s];
            if (desc != NULL) *desc = uc->desc[s];
            return ncclSuccess;
        }
        if (round == 0 && !tt_ucx_net_quiet(uc->net)) {
            tt_ucx_net_progress(uc->net);
            continue;
        }
        /* Nothing more will come: the peer said how many frames it sent, or its endpoint
         * failed (after the progress above took whatever had arrived). */
        if ((res = poll_bye(conn, uc)) != ncclSuccess) return fail(uc, res);
        if (uc->bye_got && uc->done >= le64toh(uc->bye_buf))
            return fail(uc, TT_ERROR(ncclRemoteError,
                                     "ucx: peer rank %d closed the connection (after frame "
                                     "%" PRIu64 ")",
                                     conn->peer, uc->done));
        if (!peer_ok(conn, uc)) return peer_failed(conn, uc);
        bool again;
        TT_TRY(arm(uc, hint, &again));
        if (!again) return ncclSuccess;
    }
    return ncclSuccess;
}

static ncclResult_t ucx_recv_peek(struct tt_conn *conn, const void **data, size_t *bytes,
                                  struct tt_op_desc *desc, struct tt_wait_hint *hint)
{
    struct ucx_conn *uc = conn->priv;
    *data = NULL;
    *bytes = 0;
    pthread_mutex_lock(&uc->net->lock);
    ncclResult_t res = recv_peek_locked(conn, uc, data, bytes, desc, hint);
    pthread_mutex_unlock(&uc->net->lock);
    return res;
}

static ncclResult_t ucx_recv_release(struct tt_conn *conn)
{
    struct ucx_conn *uc = conn->priv;
    ncclResult_t res = ncclSuccess;
    pthread_mutex_lock(&uc->net->lock);
    unsigned s = (unsigned)(uc->done % uc->depth);
    if (uc->failed != ncclSuccess) {
        res = uc->failed;
    } else if (!uc->full[s]) {
        res = TT_ERROR(ncclInternalError, "ucx: release with no message from peer rank %d",
                       conn->peer);
    } else {
        /* The slot is free again: post the receive of the frame it holds next. */
        uc->done++;
        res = tt_ucx_post_frame(conn, uc, uc->done + uc->depth - 1);
        if (res != ncclSuccess) fail(uc, res);
        else send_credit(conn, uc);
    }
    pthread_mutex_unlock(&uc->net->lock);
    return res;
}

/* Sender: polls what the peer sent back (credits, bye) and the sends that completed. */
static ncclResult_t sender_poll(struct tt_conn *conn, struct ucx_conn *uc)
{
    ncclResult_t res = reap_sends(conn, uc);
    if (res == ncclSuccess) res = poll_credit(conn, uc);
    if (res == ncclSuccess) res = poll_bye(conn, uc);
    return res == ncclSuccess ? res : fail(uc, res);
}

static bool slot_free(const struct ucx_conn *uc)
{
    return uc->posted - uc->credit < uc->depth && uc->req[uc->posted % uc->depth] == NULL;
}

static ncclResult_t send_acquire_locked(struct tt_conn *conn, struct ucx_conn *uc, void **slot,
                                        struct tt_wait_hint *hint)
{
    if (uc->failed != ncclSuccess) return uc->failed;
    for (int round = 0; round < 8; round++) {
        if (slot_free(uc)) {
            uc->misses = 0;
            *slot = slot_of(uc, uc->posted) + UCX_SLOT_LEAD;
            return ncclSuccess;
        }
        TT_TRY(sender_poll(conn, uc));
        if (slot_free(uc)) continue;
        if (round == 0 && !tt_ucx_net_quiet(uc->net)) {
            tt_ucx_net_progress(uc->net);
            continue;
        }
        if (!peer_ok(conn, uc)) return peer_failed(conn, uc);
        if (uc->bye_got)
            return fail(uc, TT_ERROR(ncclRemoteError,
                                     "ucx: peer rank %d stopped receiving (its communicator "
                                     "failed) after %" PRIu64 " of %" PRIu64 " frames",
                                     conn->peer, le64toh(uc->bye_buf), uc->posted));
        bool again;
        TT_TRY(arm(uc, hint, &again));
        if (!again) return ncclSuccess;
    }
    return ncclSuccess;
}

static ncclResult_t ucx_send_acquire(struct tt_conn *conn, void **slot, struct tt_wait_hint *hint)
{
    struct ucx_conn *uc = conn->priv;
    *slot = NULL;
    pthread_mutex_lock(&uc->net->lock);
    ncclResult_t res = send_acquire_locked(conn, uc, slot, hint);
    pthread_mutex_unlock(&uc->net->lock);
    return res;
}

static ncclResult_t ucx_send_commit(struct tt_conn *conn, size_t bytes,
                                    const struct tt_op_desc *desc)
{
    struct ucx_conn *uc = conn->priv;
    struct ucx_net *n = uc->net;
    ncclResult_t res = ncclSuccess;
    pthread_mutex_lock(&n->lock);
    if (uc->failed != ncclSuccess) {
        res = uc->failed;
    } else if (bytes > conn->slot_bytes || !slot_free(uc)) {
        res = TT_ERROR(ncclInternalError,
                       "ucx: commit of %zu bytes into a %zu-byte slot (%" PRIu64 " in flight)",
                       bytes, conn->slot_bytes, uc->posted - uc->credit);
    } else {
        uint8_t *hdr = slot_of(uc, uc->posted) + UCX_SLOT_LEAD - UCX_FRAME_HEADER_BYTES;
        tt_wire_put_u32(hdr, (uint32_t)bytes);
        tt_wire_put_u32(hdr + 4, (uint32_t)uc->posted ^ UCX_FRAME_MAGIC);
        tt_wire_put_desc(hdr + 8, desc);
        ucp_request_param_t param = {.op_attr_mask = 0};
        void *r = ucp_tag_send_nbx(n->peers[conn->peer].ep, hdr, UCX_FRAME_HEADER_BYTES + bytes,
                                   make_tag(KIND_DATA, conn->tag, n->rank, uc->posted), &param);
        if (UCS_PTR_IS_ERR(r)) {
            res = fail(uc, TT_ERROR(ncclRemoteError, "ucx: send to peer rank %d failed: %s",
                                    conn->peer, ucs_status_string(UCS_PTR_STATUS(r))));
        } else {
            uc->req[uc->posted % uc->depth] = r;
            uc->posted++;
            uc->need_flush = true;
            n->armed = false; /* the send may need a progress call that no event announces */
        }
    }
    pthread_mutex_unlock(&n->lock);
    return res;
}

/* Everything committed has left this process: every send completed, and a flush of the
 * endpoint found nothing queued inside UCX (its TCP transport completes a small send once the
 * bytes are in its own buffer, which only a progress call writes to a full socket). A flush can
 * also wait for the endpoint's wire-up, which needs the peer to progress, and a peer that has
 * all it needs may be elsewhere (in the bootstrap, or back in the user's code): so a flush that
 * has not completed within UCX_FLUSH_WAIT_NS counts as done, since its frames were handed to
 * UCX whole and the peer will take them when either side progresses next. */
static bool ucx_send_idle(struct tt_conn *conn)
{
    struct ucx_conn *uc = conn->priv;
    struct ucx_net *n = uc->net;
    bool idle = false;
    pthread_mutex_lock(&n->lock);
    if (uc->failed != ncclSuccess || sender_poll(conn, uc) != ncclSuccess) goto out;
    /* A send still open completes, or fails with its endpoint (the error then comes from the
     * next call): the frame is not known to have left. */
    for (unsigned s = 0; s < uc->depth; s++)
        if (uc->req[s] != NULL) goto out;
    /* Every send completed; nothing is left to flush towards a failed peer. */
    if (!peer_ok(conn, uc)) {
        idle = true;
        goto out;
    }
    if (uc->flush_req != NULL) {
        if (ucp_request_check_status(uc->flush_req) == UCS_INPROGRESS &&
            tt_time_ns() - uc->flush_since_ns < UCX_FLUSH_WAIT_NS)
            goto out;
        ucp_request_free(uc->flush_req); /* an unfinished one is freed when it completes */
        uc->flush_req = NULL;
    } else if (uc->need_flush) {
        ucp_request_param_t param = {.op_attr_mask = 0};
        void *r = ucp_ep_flush_nbx(n->peers[conn->peer].ep, &param);
        uc->need_flush = false;
        if (UCS_PTR_IS_PTR(r)) {
            uc->flush_req = r;
            uc->flush_since_ns = tt_time_ns();
            goto out;
        }
    }
    idle = true;
out:
    pthread_mutex_unlock(&n->lock);
    return idle;
}

static ncclResult_t ucx_progress(struct tt_conn *conn)
{
    struct ucx_conn *uc = conn->priv;
    struct ucx_net *n = uc->net;
    ncclResult_t res = ncclSuccess;
    pthread_mutex_lock(&n->lock);
    if (uc->failed != ncclSuccess) {
        res = uc->failed;
        goto out;
    }
    if (!tt_ucx_net_quiet(n)) tt_ucx_net_progress(n);
    if (conn->dir == TT_CONN_RECV) {
        if (uc->credit_dirty) send_credit(conn, uc);
        goto out;
    }
    res = sender_poll(conn, uc);
out:
    pthread_mutex_unlock(&n->lock);
    return res;
}

/* Sender, on the stall path: the receiver's bye (the frames it released) with frames of this
 * side still unreleased means it stopped receiving (its communicator failed, or it closed the
 * connection) and they will never be taken; a send that failed is the peer's failure. */
static ncclResult_t ucx_peer_error(struct tt_conn *conn)
{
    struct ucx_conn *uc = conn->priv;
    if (uc == NULL) return ncclSuccess;
    pthread_mutex_lock(&uc->net->lock);
    ncclResult_t res = uc->failed;
    if (res == ncclSuccess) res = sender_poll(conn, uc);
    if (res == ncclSuccess && uc->bye_got && le64toh(uc->bye_buf) < uc->posted)
        res = fail(uc, TT_ERROR(ncclRemoteError,
                                "ucx: peer rank %d stopped receiving (its communicator failed) "
                                "after %" PRIu64 " of %" PRIu64 " frames",
                                conn->peer, le64toh(uc->bye_buf), uc->posted));
    pthread_mutex_unlock(&uc->net->lock);
    return res;
}

/* ---- Selection ------------------------------------------------------------------------------ */

/* Any peer, when NCCL_NET (or TUTTI_NET) asks for UCX; shared memory comes first in the table,
 * so only the peers it does not serve get here. */
static bool ucx_can_reach(const struct tt_reach *r)
{
    return tt_transport_net_is_ucx();
}

const struct tt_transport tt_transport_ucx = {
    .name = "ucx",
    .link = TT_LINK_TCP,
    .can_reach = ucx_can_reach,
    .setup = tt_ucx_setup,
    .connect = tt_ucx_connect,
    .close = tt_ucx_close,
    .send_acquire = ucx_send_acquire,
    .send_commit = ucx_send_commit,
    .send_idle = ucx_send_idle,
    .recv_peek = ucx_recv_peek,
    .recv_release = ucx_recv_release,
    .progress = ucx_progress,
    .shutdown = tt_ucx_shutdown,
    .peer_error = ucx_peer_error,
    .ctx_fini = tt_ucx_ctx_fini,
};

