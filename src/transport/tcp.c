/* TCP transport: the data path (frames striped across a connection's sockets, error frames)
 * and the transport table (transport/tcp.h states the wire format and the invariants;
 * tcp_setup.c sets connections up). */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport/tcp.h"
#include "transport/wire.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/sock.h"
#include "util/time.h"
#include "util/wait.h"

/* Marks the stream broken: reports `res` once, shuts the sockets down both ways (the peer sees
 * the connection end; a shared pair's: this direction's half), and makes every later call
 * return the same result. The descriptors stay open until tt_tcp_close: tcp_shutdown may run
 * on another thread (the watchdog failing the communicator) and must never meet a number that
 * was closed and reused meanwhile. */
static void encode_error(uint8_t *hdr, uint64_t frame, int code, size_t len);
static void write_back_error(struct tcp_conn *tc, int code, const char *reason);

static ncclResult_t fail(struct tcp_conn *tc, ncclResult_t res)
{
    tc->failed = res;
    /* A receive side says why on its way back first (the peer's sender, which may be stalled
     * on this side, reads it; after the shutdown nothing more could be written), unless the
     * peer's own error frame ended the stream. */
    if (tc->dir == TT_CONN_RECV && !tc->peer_said) write_back_error(tc, (int)res, tt_error_last());
    if (tc->shared && tc->dir == TT_CONN_RECV) {
        /* The data sockets carry the pair's frames the other way and stay up (shutting their
         * reading half, then the pair its writing half, would make the kernel answer the
         * peer's data with a reset): only the control socket ends. */
        if (tc->ctl_fd >= 0) shutdown(tc->ctl_fd, SHUT_WR);
        return res;
    }
    /* A shared send side ends only its own direction. */
    int how = tc->shared ? SHUT_WR : SHUT_RDWR;
    for (int k = 0; k < TCP_MAX_SOCKS; k++)
        if (tc->socks[k].fd >= 0) shutdown(tc->socks[k].fd, how);
    return res;
}

static ncclResult_t io_error(struct tt_conn *conn, struct tcp_conn *tc, const char *what)
{
    int err = errno;
    if (err == EPIPE || err == ECONNRESET || err == ENOTCONN || err == ETIMEDOUT)
        return fail(tc, TT_ERROR(ncclRemoteError, "tcp: peer rank %d closed the connection "
                                                  "(%s: %s)",
                                 conn->peer, what, strerror(err)));
    return fail(tc, TT_ERROR(ncclSystemError, "tcp: %s to/from peer rank %d failed: %s", what,
                             conn->peer, strerror(err)));
}

/* The direction a receiver's error frame travels back: socket 0's, whose data flows the other
 * way, or a shared pair's control socket. */
static int back_fd(const struct tcp_conn *tc)
{
    return tc->shared ? tc->ctl_fd : tc->socks[0].fd;
}

static uint8_t *slot_of(const struct tt_conn *conn, const struct tcp_conn *tc, uint64_t frame)
{
    return tc->staging + (frame % TT_CONN_SLOTS) * tt_conn_slot_stride(conn->slot_bytes);
}

static size_t frame_bytes(const struct tcp_conn *tc, uint64_t frame)
{
    return TCP_FRAME_HEADER_BYTES + tc->len[frame % TT_CONN_SLOTS];
}

/* Sender: write socket sk's queued frames (sk->next, sk->next + nsocks, ... below `posted`)
 * until it stops taking bytes, gathering headers and payloads into one sendmsg. */
static ncclResult_t flush_sock(struct tt_conn *conn, struct tcp_conn *tc, struct tcp_sock *sk)
{
    uint64_t step = (uint64_t)tc->nsocks;
    while (sk->next < tc->posted) {
        struct iovec iov[2 * TT_CONN_SLOTS];
        int n_iov = 0;
        size_t want = 0;
        size_t skip = sk->tx_off;
        for (uint64_t f = sk->next; f < tc->posted; f += step) {
            unsigned s = (unsigned)(f % TT_CONN_SLOTS);
            size_t hdr_skip = skip < TCP_FRAME_HEADER_BYTES ? skip : TCP_FRAME_HEADER_BYTES;
            size_t pay_skip = skip - hdr_skip;
            if (hdr_skip < TCP_FRAME_HEADER_BYTES)
                iov[n_iov++] = (struct iovec){tc->tx_hdr[s] + hdr_skip,
                                              TCP_FRAME_HEADER_BYTES - hdr_skip};
            if (pay_skip < tc->len[s])
                iov[n_iov++] = (struct iovec){slot_of(conn, tc, f) + pay_skip,
                                              tc->len[s] - pay_skip};
            want += frame_bytes(tc, f) - skip;
            skip = 0;
        }
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n_iov};
        ssize_t n = sendmsg(sk->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return ncclSuccess;
            return io_error(conn, tc, "send");
        }
        /* Retire the frames the socket took whole; remember how far into the next it got. */
        size_t left = (size_t)n;
        while (left > 0) {
            size_t frame_left = frame_bytes(tc, sk->next) - sk->tx_off;
            if (left < frame_left) {
                sk->tx_off += left;
                break;
            }
            left -= frame_left;
            sk->tx_off = 0;
            sk->next += step;
        }
        if ((size_t)n < want) return ncclSuccess;
    }
    return ncclSuccess;
}

/* Sender: push every socket, then advance `done` over the frames written in a row: the first
 * frame not yet written is the lowest `next` of the sockets that still have one. */
static ncclResult_t flush(struct tt_conn *conn, struct tcp_conn *tc)
{
    uint64_t first = tc->posted;
    for (int k = 0; k < tc->nsocks; k++) {
        struct tcp_sock *sk = &tc->socks[k];
        if (sk->next < tc->posted) TT_TRY(flush_sock(conn, tc, sk));
        if (sk->next < first) first = sk->next;
    }
    tc->done = first;
    return ncclSuccess;
}

/* Receiver: the rest of the peer's error frame (sk->rx_len bytes of reason), then the stream
 * fails with the code it carries. Bounded: the peer wrote the frame whole before it shut its
 * side down, so the bytes are here or on their way; a peer that never sends them is a closed
 * connection like any other. */
static ncclResult_t read_error_frame(struct tt_conn *conn, struct tcp_conn *tc,
                                     struct tcp_sock *sk)
{
    uint64_t deadline = tt_time_ns() + TCP_ERROR_FLUSH_NS;
    while (sk->rx_got < sk->rx_len) {
        ssize_t n = recv(sk->fd, sk->rx_err_text + sk->rx_got, sk->rx_len - sk->rx_got,
                         MSG_DONTWAIT);
        if (n > 0) {
            sk->rx_got += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (tt_time_ns() >= deadline) return ncclSuccess; /* later */
            struct pollfd pfd = {.fd = sk->fd, .events = POLLIN, .revents = 0};
            poll(&pfd, 1, 1);
            continue;
        }
        break; /* closed or broken: report what arrived */
    }
    sk->rx_err_text[sk->rx_got] = '\0';
    /* The peer's words: only a code NCCL defines for a failure, printable text. */
    int code = (int)sk->rx_desc.count;
    if (code < ncclUnhandledCudaError || code > ncclRemoteError || code == ncclInProgress)
        code = ncclRemoteError;
    for (size_t i = 0; i < sk->rx_got; i++)
        if (sk->rx_err_text[i] < 0x20 || sk->rx_err_text[i] > 0x7e) sk->rx_err_text[i] = '?';
    tc->peer_said = true;
    return fail(tc, TT_ERROR((ncclResult_t)code, "peer rank %d failed: %s", conn->peer,
                             sk->rx_err_text));
}

/* Receiver: read socket sk's frames into their staging slots until the socket is empty or the
 * slot of its next frame is still held (frames sk->next, sk->next + nsocks, ...). Each read asks
 * for the rest of the current frame's payload together with the next frame's header, so a
 * stream of waiting frames costs one system call per frame. A header is parsed into the
 * socket's rx_len, not len[]: its slot may still be held by the consumer. */
static ncclResult_t fill_sock(struct tt_conn *conn, struct tcp_conn *tc, struct tcp_sock *sk)
{
    bool drained = false;
    uint64_t step = (uint64_t)tc->nsocks;
    for (;;) {
        if (!sk->rx_have_len && sk->rx_hdr_got == TCP_FRAME_HEADER_BYTES) {
            uint32_t len = tt_wire_get_u32(sk->rx_hdr);
            uint32_t check = tt_wire_get_u32(sk->rx_hdr + 4);
            uint32_t want = (uint32_t)sk->next ^ TCP_FRAME_MAGIC;
            sk->rx_err = check == ((uint32_t)sk->next ^ TCP_ERROR_MAGIC) && len <= TCP_ERROR_BYTES;
            if (sk->rx_err) check = want;
            if (len > conn->slot_bytes || check != want)
                return fail(tc, TT_ERROR(ncclRemoteError,
                                         "tcp: peer rank %d sent a bad frame header (frame "
                                         "%" PRIu64 ": %u bytes for %zu-byte slots, check word "
                                         "%#x, want %#x); closing the connection",
                                         conn->peer, sk->next, len, conn->slot_bytes, check,
                                         want));
            sk->rx_len = len;
            tt_wire_get_desc(sk->rx_hdr + 8, &sk->rx_desc);
            sk->rx_have_len = true;
            sk->rx_hdr_got = 0;
            sk->rx_got = 0;
        }
        /* The peer's error frame is read beside the slots (they may all be held): it ends the
         * stream with the peer's code and reason. */
        if (sk->rx_have_len && sk->rx_err) return read_error_frame(conn, tc, sk);
        if (sk->next >= tc->done + TT_CONN_SLOTS) return ncclSuccess; /* its slot is held */
        if (sk->rx_have_len && sk->rx_got == sk->rx_len) {
            unsigned s = (unsigned)(sk->next % TT_CONN_SLOTS);
            tc->len[s] = sk->rx_len;
            tc->desc[s] = sk->rx_desc;
            tc->full[s] = true;
            sk->next += step;
            sk->rx_have_len = false;
            continue;
        }
        if (drained || sk->eof) return ncclSuccess;

        struct iovec iov[2];
        int n_iov = 0;
        if (sk->rx_have_len)
            iov[n_iov++] = (struct iovec){slot_of(conn, tc, sk->next) + sk->rx_got,
                                          sk->rx_len - sk->rx_got};
        iov[n_iov++] = (struct iovec){sk->rx_hdr + sk->rx_hdr_got,
                                      TCP_FRAME_HEADER_BYTES - sk->rx_hdr_got};
        size_t want = iov[0].iov_len + (n_iov == 2 ? iov[1].iov_len : 0);
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n_iov};
        ssize_t n = recvmsg(sk->fd, &msg, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return ncclSuccess;
            return io_error(conn, tc, "recv");
        }
        if (n == 0) {
            /* A close between frames is an error only once the consumer wants a frame that
             * will never come: the peer may have finished and left before we drained it. */
            if (!sk->rx_have_len && sk->rx_hdr_got == 0) {
                sk->eof = true;
                return ncclSuccess;
            }
            return fail(tc, TT_ERROR(ncclRemoteError,
                                     "tcp: peer rank %d closed the connection in the middle of "
                                     "frame %" PRIu64,
                                     conn->peer, sk->next));
        }
        size_t got = (size_t)n;
        if (sk->rx_have_len) {
            size_t take = got < iov[0].iov_len ? got : iov[0].iov_len;
            sk->rx_got += take;
            got -= take;
        }
        sk->rx_hdr_got += got;
        /* A short read means the socket is empty: parse what arrived, then stop. */
        drained = (size_t)n < want;
    }
}

/* The socket that carries `frame`. */
static struct tcp_sock *sock_of(struct tcp_conn *tc, uint64_t frame)
{
    return &tc->socks[frame % (uint64_t)tc->nsocks];
}

/* Receiver: fill from every socket (or, `only_next`, from the one carrying the next frame: what
 * a consumer polling for that frame needs, without a system call per idle socket), then advance
 * `posted` over the frames complete in a row. */
static ncclResult_t fill(struct tt_conn *conn, struct tcp_conn *tc, bool only_next)
{
    if (only_next)
        TT_TRY(fill_sock(conn, tc, sock_of(tc, tc->posted)));
    else
        for (int k = 0; k < tc->nsocks; k++) TT_TRY(fill_sock(conn, tc, &tc->socks[k]));
    while (tc->posted < tc->done + TT_CONN_SLOTS && tc->full[tc->posted % TT_CONN_SLOTS])
        tc->posted++;
    return ncclSuccess;
}


static ncclResult_t tcp_send_acquire(struct tt_conn *conn, void **slot,
                                     struct tt_wait_hint *hint)
{
    struct tcp_conn *tc = conn->priv;
    *slot = NULL;
    if (tc->failed != ncclSuccess) return tc->failed;
    if (tc->posted - tc->done == TT_CONN_SLOTS) TT_TRY(flush(conn, tc));
    if (tc->posted - tc->done < TT_CONN_SLOTS) {
        *slot = slot_of(conn, tc, tc->posted);
        return ncclSuccess;
    }
    tt_wait_hint_clear(hint);
    hint->fd = sock_of(tc, tc->done)->fd;
    hint->events = POLLOUT;
    return ncclSuccess;
}

static ncclResult_t tcp_send_commit(struct tt_conn *conn, size_t bytes,
                                    const struct tt_op_desc *desc)
{
    struct tcp_conn *tc = conn->priv;
    if (tc->failed != ncclSuccess) return tc->failed;
    if (bytes > conn->slot_bytes || tc->posted - tc->done == TT_CONN_SLOTS)
        return TT_ERROR(ncclInternalError,
                        "tcp: commit of %zu bytes into a %zu-byte slot (%" PRIu64 " queued)",
                        bytes, conn->slot_bytes, tc->posted - tc->done);
    unsigned s = (unsigned)(tc->posted % TT_CONN_SLOTS);
    tc->len[s] = (uint32_t)bytes;
    tt_wire_put_u32(tc->tx_hdr[s], (uint32_t)bytes);
    tt_wire_put_u32(tc->tx_hdr[s] + 4, (uint32_t)tc->posted ^ TCP_FRAME_MAGIC);
    tt_wire_put_desc(tc->tx_hdr[s] + 8, desc);
    tc->posted++;
    return flush(conn, tc);
}

static int tcp_send_wait_fd(struct tt_conn *conn)
{
    struct tcp_conn *tc = conn->priv;
    return tc->failed == ncclSuccess && tc->done < tc->posted ? sock_of(tc, tc->done)->fd : -1;
}

static bool tcp_send_idle(struct tt_conn *conn)
{
    struct tcp_conn *tc = conn->priv;
    return tc->done == tc->posted;
}

static ncclResult_t tcp_recv_peek(struct tt_conn *conn, const void **data, size_t *bytes,
                                  struct tt_op_desc *desc, struct tt_wait_hint *hint)
{
    struct tcp_conn *tc = conn->priv;
    *data = NULL;
    *bytes = 0;
    if (tc->failed != ncclSuccess) return tc->failed;
    /* Read only when nothing is waiting: a full ring costs no system call per message. */
    if (tc->posted == tc->done) TT_TRY(fill(conn, tc, true));
    /* The peer may have said why it left on another of its sockets (an error frame). */
    if (tc->posted == tc->done && sock_of(tc, tc->done)->eof && tc->nsocks > 1)
        TT_TRY(fill(conn, tc, false));
    if (tc->posted == tc->done && sock_of(tc, tc->done)->eof)
        return fail(tc, TT_ERROR(ncclRemoteError,
                                 "tcp: peer rank %d closed the connection (after frame %" PRIu64
                                 ")",
                                 conn->peer, tc->posted));
    if (tc->posted == tc->done) {
        tt_wait_hint_clear(hint);
        hint->fd = sock_of(tc, tc->done)->fd;
        hint->events = POLLIN;
        return ncclSuccess;
    }
    *data = slot_of(conn, tc, tc->done);
    *bytes = tc->len[tc->done % TT_CONN_SLOTS];
    if (desc != NULL) *desc = tc->desc[tc->done % TT_CONN_SLOTS];
    return ncclSuccess;
}

static ncclResult_t tcp_recv_release(struct tt_conn *conn)
{
    struct tcp_conn *tc = conn->priv;
    if (tc->failed != ncclSuccess) return tc->failed;
    if (tc->done == tc->posted)
        return TT_ERROR(ncclInternalError, "tcp: release with no message from peer rank %d",
                        conn->peer);
    tc->full[tc->done % TT_CONN_SLOTS] = false;
    tc->done++;
    return ncclSuccess;
}

static ncclResult_t tcp_progress(struct tt_conn *conn)
{
    struct tcp_conn *tc = conn->priv;
    if (tc->failed != ncclSuccess) return tc->failed;
    if (conn->dir == TT_CONN_SEND) return flush(conn, tc);
    return fill(conn, tc, false);
}

/* Half-close: the peer reads what was sent, then end of stream. Shutting the reading side too
 * would make the kernel answer with a reset and drop frames the peer has not read yet (a
 * descriptor it needs to name a mismatch itself). */
static void tcp_shutdown(struct tt_conn *conn)
{
    struct tcp_conn *tc = conn->priv;
    if (tc == NULL) return;
    /* A shared receive side writes only on the control socket. */
    if (tc->shared && conn->dir == TT_CONN_RECV) {
        if (tc->ctl_fd >= 0) shutdown(tc->ctl_fd, SHUT_WR);
        return;
    }
    for (int k = 0; k < tc->nsocks; k++)
        if (tc->socks[k].fd >= 0) shutdown(tc->socks[k].fd, SHUT_WR);
}

/* An error frame after everything committed, pushed for at most TCP_ERROR_FLUSH_NS (the
 * caller shuts the sockets down next). Nothing when the ring is full and stays so: the peer
 * then sees the connection closed. */
static void encode_error(uint8_t *hdr, uint64_t frame, int code, size_t len)
{
    struct tt_op_desc d = {.count = (uint64_t)code};
    tt_wire_put_u32(hdr, (uint32_t)len);
    tt_wire_put_u32(hdr + 4, (uint32_t)frame ^ TCP_ERROR_MAGIC);
    tt_wire_put_desc(hdr + 8, &d);
}

/* Receiver: the error frame back up the stream (socket 0's idle direction, or a shared pair's
 * control socket): one small write into an empty direction, never blocking, and only one per
 * connection (a second after a first that went out in part would garble both). */
static void write_back_error(struct tcp_conn *tc, int code, const char *reason)
{
    if (atomic_exchange(&tc->back_said, true)) return;
    uint8_t frame[TCP_FRAME_HEADER_BYTES + TCP_ERROR_BYTES];
    size_t len = strnlen(reason != NULL ? reason : "", TCP_ERROR_BYTES);
    encode_error(frame, 0, code, len);
    memcpy(frame + TCP_FRAME_HEADER_BYTES, reason != NULL ? reason : "", len);
    if (back_fd(tc) >= 0)
        (void)!send(back_fd(tc), frame, TCP_FRAME_HEADER_BYTES + len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void tcp_fail_notify(struct tt_conn *conn, int code, const char *reason)
{
    struct tcp_conn *tc = conn->priv;
    if (tc == NULL || tc->failed != ncclSuccess || conn->dir != TT_CONN_SEND) return;
    uint64_t deadline = tt_time_ns() + TCP_ERROR_FLUSH_NS;
    for (;;) {
        if (flush(conn, tc) != ncclSuccess) return;
        if (tc->posted - tc->done < TT_CONN_SLOTS || tt_time_ns() >= deadline) break;
        struct pollfd pfd = {.fd = sock_of(tc, tc->done)->fd, .events = POLLOUT, .revents = 0};
        poll(&pfd, 1, 1);
    }
    if (tc->posted - tc->done == TT_CONN_SLOTS) return;
    size_t len = strnlen(reason != NULL ? reason : "", TCP_ERROR_BYTES);
    if (len > conn->slot_bytes) len = conn->slot_bytes;
    unsigned s = (unsigned)(tc->posted % TT_CONN_SLOTS);
    memcpy(slot_of(conn, tc, tc->posted), reason != NULL ? reason : "", len);
    tc->len[s] = (uint32_t)len;
    encode_error(tc->tx_hdr[s], tc->posted, code, len);
    tc->posted++;
    while (flush(conn, tc) == ncclSuccess && tc->done < tc->posted && tt_time_ns() < deadline) {
        struct pollfd pfd = {.fd = sock_of(tc, tc->done)->fd, .events = POLLOUT, .revents = 0};
        poll(&pfd, 1, 1);
    }
}

/* Receiver, any thread: write_back_error reads only what connect set (the descriptors, and
 * whether the pair is shared) and its own atomic flag, and the way back carries nothing from
 * this side but that one error frame (fail's or this one, whichever comes first). */
static void tcp_notify_back(struct tt_conn *conn, int code, const char *reason)
{
    struct tcp_conn *tc = conn->priv;
    if (tc != NULL && conn->dir == TT_CONN_RECV) write_back_error(tc, code, reason);
}

/* Sender: the receiver's error frame, read back from socket 0 or the control socket (whatever
 * else arrives there is a broken stream). */
static ncclResult_t tcp_peer_error(struct tt_conn *conn)
{
    struct tcp_conn *tc = conn->priv;
    if (tc == NULL) return ncclSuccess;
    if (tc->failed != ncclSuccess) return tc->failed;
    if (conn->dir != TT_CONN_SEND || back_fd(tc) < 0) return ncclSuccess;
    for (;;) {
        size_t want = TCP_FRAME_HEADER_BYTES;
        if (tc->back_got >= TCP_FRAME_HEADER_BYTES) {
            uint32_t len = tt_wire_get_u32(tc->back);
            if (len > TCP_ERROR_BYTES ||
                tt_wire_get_u32(tc->back + 4) != (0u ^ TCP_ERROR_MAGIC))
                return fail(tc, TT_ERROR(ncclRemoteError,
                                         "tcp: peer rank %d sent bytes up a send connection "
                                         "that are no error frame; closing the connection",
                                         conn->peer));
            want += len;
            if (tc->back_got == want) break;
        }
        ssize_t n = recv(back_fd(tc), tc->back + tc->back_got, want - tc->back_got,
                         MSG_DONTWAIT);
        if (n > 0) {
            tc->back_got += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        /* The way back ended while frames wait to go: the peer's receiving side shut down
         * (its communicator failed, or it left), and nothing will read them. A one-way socket
         * keeps taking bytes into its buffers until they fill; a shared pair's data sockets,
         * which the peer still sends on, never say so. */
        if (n == 0 && tc->done < tc->posted)
            return fail(tc, TT_ERROR(ncclRemoteError,
                                     "tcp: peer rank %d stopped receiving (its side of the "
                                     "connection closed) with %" PRIu64 " frames unsent",
                                     conn->peer, tc->posted - tc->done));
        return ncclSuccess; /* nothing (more) yet, or closed: the data path reports that */
    }
    struct tt_op_desc d;
    tt_wire_get_desc(tc->back + 8, &d);
    int code = (int)d.count;
    if (code < ncclUnhandledCudaError || code > ncclRemoteError || code == ncclInProgress)
        code = ncclRemoteError;
    char *text = (char *)tc->back + TCP_FRAME_HEADER_BYTES;
    size_t len = tc->back_got - TCP_FRAME_HEADER_BYTES;
    for (size_t i = 0; i < len; i++)
        if (text[i] < 0x20 || text[i] > 0x7e) text[i] = '?';
    text[len] = '\0';
    return fail(tc, TT_ERROR((ncclResult_t)code, "peer rank %d failed: %s", conn->peer, text));
}

/* Any peer. */
static bool tcp_can_reach(const struct tt_reach *r)
{
    return true;
}

const struct tt_transport tt_transport_tcp = {
    .name = "tcp",
    .link = TT_LINK_TCP,
    .can_reach = tcp_can_reach,
    .setup = tt_tcp_setup,
    .connect = tt_tcp_connect,
    .send_after_recv = tt_tcp_send_after_recv,
    .close = tt_tcp_close,
    .send_acquire = tcp_send_acquire,
    .send_commit = tcp_send_commit,
    .send_idle = tcp_send_idle,
    .send_wait_fd = tcp_send_wait_fd,
    .recv_peek = tcp_recv_peek,
    .recv_release = tcp_recv_release,
    .progress = tcp_progress,
    .shutdown = tcp_shutdown,
    .fail_notify = tcp_fail_notify,
    .notify_back = tcp_notify_back,
    .peer_error = tcp_peer_error,
    .ctx_fini = tt_tcp_ctx_fini,
};
