/* TCP transport: one or more sockets per connection (NCCL_NSOCKS_PERTHREAD x
 * NCCL_SOCKET_NTHREADS, as the receiver says in its info blob), a staging ring of TT_CONN_SLOTS
 * slots on each side, and length-checked frames striped across the sockets: frame k travels on
 * socket k mod nsocks, so several frames are on the wire at once and a loss on one stream does
 * not stall the others. The sender's ring holds committed messages until the socket has
 * taken them; the receiver's ring holds frames read from the socket until they are released.
 * Receive connections of a communicator share one listener (its state in the context); accepted
 * sockets are matched to connections by a random nonce carried in the info blob and echoed in
 * the hello, so a stranger's connection never becomes a data stream. Invariants per side:
 * done <= posted <= done + TT_CONN_SLOTS (frames numbered from 0; frame k uses slot
 * k % TT_CONN_SLOTS). Frames finish out of order across sockets: `done` (sender: written) and
 * `posted` (receiver: read) advance over the frames finished in a row.
 *
 * Wire format (all integers little-endian unless said otherwise):
 *   Info blob of the receiver (exchanged over the bootstrap, 44 bytes used):
 *     0 u64 magic TCP_INFO_MAGIC | 8 u64 nonce | 16 u16 family (AF_INET 2, AF_INET6 10)
 *     18 u16 port (network byte order) | 20 u32 IPv6 scope id | 24 u8[16] address (IPv4 in the
 *     first 4 bytes) | 40 u32 nsocks (1..TCP_MAX_SOCKS; 0 from older peers means 1)
 *   Hello, the first 40 bytes the sender writes on each socket:
 *     0 u64 magic TCP_HELLO_MAGIC | 8 u64 nonce | 16 u64 slot_bytes | 24 u32 from rank
 *     28 u32 to rank | 32 u32 tag | 36 u32 socket index (0..nsocks-1)
 *   Then, on socket i, frames i, i + nsocks, i + 2 nsocks, ..., frame k being one committed
 *   message:
 *     0 u32 payload bytes (<= slot_bytes) | 4 u32 (k mod 2^32) XOR TCP_FRAME_MAGIC
 *     8 the operation's descriptor (struct tt_op_desc): u64 ticket | u64 count | u32 root |
 *     u8 coll | u8 dtype | u16 op | payload
 * A frame whose length or check word is wrong is a ncclRemoteError and closes the connection;
 * its payload is never handed out. A sender whose communicator fails ends its stream with an
 * error frame: check word (k mod 2^32) XOR TCP_ERROR_MAGIC, the descriptor's count holding the
 * ncclResult_t it failed with (2..7), and its reason (at most TCP_ERROR_BYTES, not
 * terminated) as the payload; the receiver fails with that code and reason. A receiver whose
 * communicator fails writes one such frame (frame number 0) back up socket 0, which otherwise
 * carries nothing that way: a sender stalled on a receiver that stopped reading learns why. */
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

#include "transport/transport.h"
#include "transport/wire.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/sock.h"
#include "util/time.h"
#include "util/wait.h"

#define TCP_INFO_MAGIC 0x6f666e6970637474ull  /* "ttcpinfo" */
#define TCP_HELLO_MAGIC 0x6f6c6c6568706374ull /* "tcphello" */
#define TCP_FRAME_MAGIC 0x54544652u           /* "RFTT" */
#define TCP_ERROR_MAGIC 0x54544552u           /* "RETT": the stream's last frame, an error */
#define TCP_ERROR_BYTES 255
/* How long a failing sender pushes its error frame at a peer that reads slowly. */
#define TCP_ERROR_FLUSH_NS 50000000ull
#define TCP_HELLO_BYTES 40
#define TCP_FRAME_HEADER_BYTES 32
/* Accepted sockets whose connection has not asked for them yet; one more evicts the oldest
 * (a socket still without its hello first), so a flood costs a bounded number of fds. Room for
 * every data socket (up to TCP_MAX_SOCKS per connection) of dozens of peers arriving at once. */
#define TCP_MAX_PENDING 1024
/* Sockets accepted per turn before the hellos that have arrived are read. */
#define TCP_ACCEPT_BATCH 16
/* Most data sockets of one connection. */
#define TCP_MAX_SOCKS 16

/* An accepted socket and the part of its hello read so far. A socket whose hello is not
 * complete by deadline_ns (TUTTI_HANDSHAKE_MS after its accept) is closed. */
struct tcp_pending {
    int fd;
    uint64_t deadline_ns;
    size_t got;
    uint8_t hello[TCP_HELLO_BYTES];
};

/* Per-communicator state: the listener shared by every receive connection. */
struct tcp_listener {
    int fd;
    struct sockaddr_storage addr;
    struct tcp_pending *pending;
    size_t npending;
    size_t cap;
};

struct tcp_hello {
    uint64_t magic;
    uint64_t nonce;
    uint64_t slot_bytes;
    uint32_t from;
    uint32_t to;
    uint32_t tag;
    uint32_t index; /* the socket's place among the connection's sockets */
};

/* One data socket of a connection. Sender: `next` is the first frame of this socket not fully
 * written and tx_off how much of it is. Receiver: `next` is the frame being read, with the
 * state of its header and payload (see fill_sock). */
struct tcp_sock {
    int fd;
    uint64_t next;
    size_t tx_off;
    bool eof; /* receiver: the peer closed between two frames */
    bool rx_err; /* receiver: the frame being read is the peer's error frame */
    char rx_err_text[TCP_ERROR_BYTES + 1];
    uint8_t rx_hdr[TCP_FRAME_HEADER_BYTES];
    size_t rx_hdr_got;
    bool rx_have_len;
    uint32_t rx_len;
    struct tt_op_desc rx_desc;
    size_t rx_got;
};

struct tcp_conn {
    int nsocks;
    struct tcp_sock socks[TCP_MAX_SOCKS];
    uint64_t nonce;
    ncclResult_t failed; /* sticky: once the stream is broken every call returns this */
    uint8_t *staging;    /* TT_CONN_SLOTS slots, tt_conn_slot_stride(slot_bytes) apart */
    uint32_t len[TT_CONN_SLOTS];
    bool full[TT_CONN_SLOTS]; /* receiver: the slot holds a whole frame not yet released */
    /* Sender: frames committed (posted) and written in a row from frame 0 (done), and each
     * queued frame's encoded header. Receiver: frames read in a row (posted) and released
     * (done). */
    uint64_t posted;
    uint64_t done;
    uint8_t tx_hdr[TT_CONN_SLOTS][TCP_FRAME_HEADER_BYTES];
    /* Sender: the receiver's error frame read back up socket 0 so far (see peer_error). */
    uint8_t back[TCP_FRAME_HEADER_BYTES + TCP_ERROR_BYTES + 1];
    size_t back_got;
    struct tt_op_desc desc[TT_CONN_SLOTS]; /* receiver: each complete frame's descriptor */
};


static void encode_hello(uint8_t *p, const struct tcp_hello *h)
{
    memset(p, 0, TCP_HELLO_BYTES);
    tt_wire_put_u64(p, h->magic);
    tt_wire_put_u64(p + 8, h->nonce);
    tt_wire_put_u64(p + 16, h->slot_bytes);
    tt_wire_put_u32(p + 24, h->from);
    tt_wire_put_u32(p + 28, h->to);
    tt_wire_put_u32(p + 32, h->tag);
    tt_wire_put_u32(p + 36, h->index);
}

static void decode_hello(const uint8_t *p, struct tcp_hello *h)
{
    h->magic = tt_wire_get_u64(p);
    h->nonce = tt_wire_get_u64(p + 8);
    h->slot_bytes = tt_wire_get_u64(p + 16);
    h->from = tt_wire_get_u32(p + 24);
    h->to = tt_wire_get_u32(p + 28);
    h->tag = tt_wire_get_u32(p + 32);
    h->index = tt_wire_get_u32(p + 36);
}

static void encode_info(uint8_t *p, uint64_t nonce, const struct sockaddr_storage *addr,
                        int nsocks)
{
    memset(p, 0, TT_CONN_INFO_BYTES);
    tt_wire_put_u64(p, TCP_INFO_MAGIC);
    tt_wire_put_u64(p + 8, nonce);
    tt_wire_put_u32(p + 40, (uint32_t)nsocks);
    if (addr->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
        p[16] = AF_INET;
        memcpy(p + 18, &in->sin_port, 2);
        memcpy(p + 24, &in->sin_addr, 4);
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;
        p[16] = AF_INET6;
        memcpy(p + 18, &in6->sin6_port, 2);
        tt_wire_put_u32(p + 20, in6->sin6_scope_id);
        memcpy(p + 24, &in6->sin6_addr, 16);
    }
}

static ncclResult_t decode_info(const uint8_t *p, int peer, uint64_t *nonce,
                                struct sockaddr_storage *addr, int *nsocks)
{
    memset(addr, 0, sizeof *addr);
    uint16_t family = (uint16_t)(p[16] | p[17] << 8);
    uint32_t socks = tt_wire_get_u32(p + 40);
    if (tt_wire_get_u64(p) != TCP_INFO_MAGIC || (family != AF_INET && family != AF_INET6) ||
        socks > TCP_MAX_SOCKS)
        return TT_ERROR(ncclInternalError, "tcp: malformed connection info from peer rank %d",
                        peer);
    *nonce = tt_wire_get_u64(p + 8);
    *nsocks = socks == 0 ? 1 : (int)socks;
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)addr;
        in->sin_family = AF_INET;
        memcpy(&in->sin_port, p + 18, 2);
        memcpy(&in->sin_addr, p + 24, 4);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)addr;
        in6->sin6_family = AF_INET6;
        memcpy(&in6->sin6_port, p + 18, 2);
        in6->sin6_scope_id = tt_wire_get_u32(p + 20);
        memcpy(&in6->sin6_addr, p + 24, 16);
    }
    return ncclSuccess;
}

static ncclResult_t listener_create(struct tt_transport_ctx *ctx, struct tcp_listener **out)
{
    ncclResult_t res = ncclSuccess;
    struct tcp_listener *l = NULL;
    TT_TRY(TT_CALLOC(&l, 1));
    l->fd = -1;
    struct sockaddr_storage addr = ctx->local_addr;
    tt_sock_addr_set_port(&addr, 0);
    TT_TRY_GOTO(tt_sock_listen(&addr, &l->fd, &l->addr), res, fail);
    *out = l;
    return ncclSuccess;
fail:
    free(l);
    return res;
}

/* The communicator's listener (its slot in the context's transport states). */
static struct tcp_listener **listener_of(struct tt_transport_ctx *ctx)
{
    return (struct tcp_listener **)tt_transport_ctx_state(ctx, &tt_transport_tcp);
}

static void tcp_ctx_fini(struct tt_transport_ctx *ctx)
{
    struct tcp_listener **slot = listener_of(ctx), *l = slot ? *slot : NULL;
    if (l == NULL) return;
    for (size_t i = 0; i < l->npending; i++) tt_sock_close(&l->pending[i].fd);
    free(l->pending);
    tt_sock_close(&l->fd);
    free(l);
    *slot = NULL;
}

static ncclResult_t tcp_setup(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                              struct tt_conn_info *info)
{
    struct tcp_conn *tc = NULL;
    memset(info, 0, sizeof *info);
    if (conn->slot_bytes == 0 || conn->slot_bytes > UINT32_MAX)
        return TT_ERROR(ncclInvalidUsage,
                        "tcp: slot of %zu bytes for peer rank %d: TCP frames carry 1 to 2^32-1 "
                        "bytes (lower NCCL_BUFFSIZE)",
                        conn->slot_bytes, conn->peer);
    TT_TRY(TT_CALLOC(&tc, 1));
    for (int i = 0; i < TCP_MAX_SOCKS; i++) tc->socks[i].fd = -1;
    conn->priv = tc;
    /* 64-byte aligned so that every slot is aligned for any element type. */
    size_t ring_bytes = TT_CONN_SLOTS * tt_conn_slot_stride(conn->slot_bytes);
    if (posix_memalign((void **)&tc->staging, 64, ring_bytes) != 0)
        return TT_ERROR(ncclSystemError, "out of memory for a %zu-byte TCP staging ring",
                        ring_bytes);
    if (conn->dir == TT_CONN_SEND) return ncclSuccess;

    struct tcp_listener **slot = listener_of(ctx);
    if (slot == NULL)
        return TT_ERROR(ncclInternalError, "tcp: no room for the listener in the transport "
                                           "context (TT_TRANSPORT_STATES)");
    if (*slot == NULL) {
        struct tcp_listener *l = NULL;
        TT_TRY(listener_create(ctx, &l));
        *slot = l;
    }
    if (getrandom(&tc->nonce, sizeof tc->nonce, 0) != (ssize_t)sizeof tc->nonce)
        return TT_ERROR(ncclSystemError, "tcp: getrandom failed: %s", strerror(errno));
    /* The receiver decides how many sockets the connection has; the sender opens that many. */
    int64_t nsocks = tt_param_nsocks_perthread() * tt_param_socket_nthreads();
    tc->nsocks = nsocks > TCP_MAX_SOCKS ? TCP_MAX_SOCKS : (int)nsocks;
    encode_info(info->bytes, tc->nonce, &(*slot)->addr, tc->nsocks);
    return ncclSuccess;
}

static void drop_pending(struct tcp_listener *l, size_t i)
{
    tt_sock_close(&l->pending[i].fd);
    l->pending[i] = l->pending[--l->npending];
}

/* Closes the pending socket accepted first, preferring one still without its hello. False
 * when there is none. */
static bool evict_oldest(struct tcp_listener *l)
{
    size_t oldest = l->npending;
    for (size_t i = 0; i < l->npending; i++) {
        const struct tcp_pending *p = &l->pending[i], *o = &l->pending[oldest];
        bool p_idle = p->got < TCP_HELLO_BYTES;
        if (oldest == l->npending || (p_idle && o->got == TCP_HELLO_BYTES) ||
            (p_idle == (o->got < TCP_HELLO_BYTES) && p->deadline_ns < o->deadline_ns))
            oldest = i;
    }
    if (oldest == l->npending) return false;
    TT_INFO(TT_SUB_NET, "tcp: %d unclaimed connections on the listener; closing the oldest",
            TCP_MAX_PENDING);
    drop_pending(l, oldest);
    return true;
}

/* Takes up to TCP_ACCEPT_BATCH connections waiting on the listener into the pending list.
 * Returns true when one arrived. Transient accept failures are left for the next call. */
static bool accept_pending(struct tcp_listener *l)
{
    bool any = false;
    for (int batch = 0; batch < TCP_ACCEPT_BATCH; batch++) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            /* Out of fds: make room by closing the oldest unclaimed socket. */
            if ((errno == EMFILE || errno == ENFILE) && evict_oldest(l)) continue;
            return any;
        }
        any = true;
        if (l->npending == TCP_MAX_PENDING) evict_oldest(l);
        if (l->npending == l->cap) {
            size_t cap = l->cap ? 2 * l->cap : 16;
            struct tcp_pending *p = realloc(l->pending, cap * sizeof *p);
            if (p == NULL) {
                TT_WARN("tcp: out of memory for %zu pending connections; refusing one", cap);
                close(fd);
                continue;
            }
            l->pending = p;
            l->cap = cap;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        l->pending[l->npending++] = (struct tcp_pending){
            .fd = fd, .deadline_ns = tt_deadline_after_ms(tt_param_handshake_ms()), .got = 0};
    }
    return any;
}

/* Reads what has arrived of each pending hello; drops sockets that closed or sent something
 * that is not a hello. Returns true when a byte moved. */
static bool read_hellos(struct tcp_listener *l)
{
    bool any = false;
    for (size_t i = 0; i < l->npending;) {
        struct tcp_pending *p = &l->pending[i];
        if (p->got < TCP_HELLO_BYTES && tt_deadline_passed(p->deadline_ns)) {
            char who[TT_SOCK_ADDR_STR_BYTES];
            TT_INFO(TT_SUB_NET, "tcp: closing a connection from %s that sent no hello within "
                    "TUTTI_HANDSHAKE_MS", tt_sock_peer_str(p->fd, who, sizeof who));
            drop_pending(l, i);
            continue;
        }
        if (p->got < TCP_HELLO_BYTES) {
            ssize_t n = recv(p->fd, p->hello + p->got, TCP_HELLO_BYTES - p->got, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                drop_pending(l, i);
                continue;
            }
            if (n > 0) {
                any = true;
                p->got += (size_t)n;
            }
            if (p->got == TCP_HELLO_BYTES && tt_wire_get_u64(p->hello) != TCP_HELLO_MAGIC) {
                char who[TT_SOCK_ADDR_STR_BYTES];
                TT_INFO(TT_SUB_NET, "tcp: dropping a connection from %s that sent no Tutti hello",
                        tt_sock_peer_str(p->fd, who, sizeof who));
                drop_pending(l, i);
                continue;
            }
        }
        i++;
    }
    return any;
}

/* A data socket's options: TCP_NODELAY (a frame goes out whole at once; small frames must not
 * wait for an acknowledgement), and TUTTI_SOCKET_BUFSIZE where set (it turns the kernel's
 * buffer autotuning off for this socket). Failures only cost speed. */
static void tune_socket(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int64_t bytes = tt_param_socket_bufsize();
    if (bytes > 0) {
        int b = (int)bytes;
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof b);
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof b);
    }
}

/* Receiver: wait for the sender's sockets, recognised by the nonce of this connection and
 * placed by their index. */
static ncclResult_t connect_recv(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                                 struct tcp_conn *tc, uint64_t deadline_ns)
{
    struct tcp_listener **slot = listener_of(ctx), *l = slot ? *slot : NULL;
    struct tt_backoff backoff;
    tt_backoff_init(&backoff);
    struct tt_wait_hint hint;
    tt_wait_hint_clear(&hint);
    hint.fd = l->fd;
    hint.events = POLLIN;
    for (;;) {
        /* Look among the complete hellos first: another connection's accept may already have
         * read ours. */
        for (size_t i = 0; i < l->npending; i++) {
            struct tcp_pending *p = &l->pending[i];
            struct tcp_hello h;
            if (p->got < TCP_HELLO_BYTES) continue;
            decode_hello(p->hello, &h);
            if (h.nonce != tc->nonce) continue;
            if (h.from != (uint32_t)conn->peer || h.to != (uint32_t)ctx->rank ||
                h.tag != (uint32_t)conn->tag || h.slot_bytes != conn->slot_bytes ||
                h.index >= (uint32_t)tc->nsocks || tc->socks[h.index].fd >= 0) {
                drop_pending(l, i);
                return TT_ERROR(ncclInvalidUsage,
                                "tcp: peer rank %d connected as rank %u to rank %u, tag %u, "
                                "%" PRIu64 "-byte slots, socket %u; expected tag %d, %zu-byte "
                                "slots and sockets 0..%d once each (NCCL_BUFFSIZE must be equal "
                                "on every rank)",
                                conn->peer, h.from, h.to, h.tag, h.slot_bytes, h.index,
                                conn->tag, conn->slot_bytes, tc->nsocks - 1);
            }
            tc->socks[h.index].fd = p->fd;
            p->fd = -1;
            drop_pending(l, i);
            i--; /* drop_pending moved the last entry here */
            bool all = true;
            for (int k = 0; k < tc->nsocks; k++) all &= tc->socks[k].fd >= 0;
            if (!all) continue;
            for (int k = 0; k < tc->nsocks; k++) {
                tune_socket(tc->socks[k].fd);
                tc->socks[k].next = (uint64_t)k;
            }
            TT_INFO(TT_SUB_NET, "tcp: connected from peer rank %d tag %d (%zu-byte slots, %d "
                    "socket%s)", conn->peer, conn->tag, conn->slot_bytes, tc->nsocks,
                    tc->nsocks > 1 ? "s" : "");
            return ncclSuccess;
        }
        bool moved = accept_pending(l);
        moved |= read_hellos(l);
        if (moved) continue;
        if (ctx->abort != NULL && atomic_load(ctx->abort))
            return TT_ERROR(ncclSystemError, "tcp: connect from peer rank %d aborted",
                            conn->peer);
        if (tt_deadline_passed(deadline_ns)) {
            char addr[TT_SOCK_ADDR_STR_BYTES];
            return TT_ERROR(ncclRemoteError,
                            "tcp: peer rank %d did not connect to %s (tag %d) before the "
                            "deadline (TUTTI_TIMEOUT_MS)",
                            conn->peer, tt_sock_addr_str(&l->addr, addr, sizeof addr),
                            conn->tag);
        }
        tt_backoff_pause(&backoff, &hint);
    }
}

static ncclResult_t connect_send(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                                 struct tcp_conn *tc, const struct tt_conn_info *remote,
                                 uint64_t deadline_ns)
{
    struct sockaddr_storage addr;
    struct tcp_hello h = {.magic = TCP_HELLO_MAGIC,
                          .slot_bytes = conn->slot_bytes,
                          .from = (uint32_t)ctx->rank,
                          .to = (uint32_t)conn->peer,
                          .tag = (uint32_t)conn->tag};
    TT_TRY(decode_info(remote->bytes, conn->peer, &h.nonce, &addr, &tc->nsocks));
    for (int k = 0; k < tc->nsocks; k++) {
        struct tcp_sock *sk = &tc->socks[k];
        TT_TRY(tt_sock_connect(&addr, deadline_ns, ctx->abort, &sk->fd));
        tune_socket(sk->fd);
        sk->next = (uint64_t)k;
        uint8_t wire[TCP_HELLO_BYTES];
        h.index = (uint32_t)k;
        encode_hello(wire, &h);
        TT_TRY(tt_sock_send_all(sk->fd, wire, sizeof wire, deadline_ns, ctx->abort));
    }
    char text[TT_SOCK_ADDR_STR_BYTES];
    TT_INFO(TT_SUB_NET, "tcp: connected to peer rank %d at %s tag %d (%zu-byte slots, %d "
            "socket%s)", conn->peer, tt_sock_addr_str(&addr, text, sizeof text), conn->tag,
            conn->slot_bytes, tc->nsocks, tc->nsocks > 1 ? "s" : "");
    return ncclSuccess;
}

static ncclResult_t tcp_connect(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                                const struct tt_conn_info *remote, uint64_t deadline_ns)
{
    struct tcp_conn *tc = conn->priv;
    if (conn->dir == TT_CONN_RECV) return connect_recv(ctx, conn, tc, deadline_ns);
    return connect_send(ctx, conn, tc, remote, deadline_ns);
}

static void tcp_close(struct tt_conn *conn)
{
    struct tcp_conn *tc = conn->priv;
    if (tc == NULL) return;
    for (int k = 0; k < TCP_MAX_SOCKS; k++) tt_sock_close(&tc->socks[k].fd);
    free(tc->staging);
    free(tc);
    conn->priv = NULL;
}

/* Marks the stream broken: reports `res` once, closes the socket, and makes every later call
 * return the same result. */
static ncclResult_t fail(struct tcp_conn *tc, ncclResult_t res)
{
    tc->failed = res;
    for (int k = 0; k < TCP_MAX_SOCKS; k++) tt_sock_close(&tc->socks[k].fd);
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

static void tcp_fail_notify(struct tt_conn *conn, int code, const char *reason)
{
    struct tcp_conn *tc = conn->priv;
    if (tc == NULL || tc->failed != ncclSuccess) return;
    if (conn->dir != TT_CONN_SEND) {
        /* Back up the stream: one small write into an empty direction, never blocking. */
        uint8_t frame[TCP_FRAME_HEADER_BYTES + TCP_ERROR_BYTES];
        size_t len = strnlen(reason != NULL ? reason : "", TCP_ERROR_BYTES);
        encode_error(frame, 0, code, len);
        memcpy(frame + TCP_FRAME_HEADER_BYTES, reason != NULL ? reason : "", len);
        if (tc->socks[0].fd >= 0)
            (void)!send(tc->socks[0].fd, frame, TCP_FRAME_HEADER_BYTES + len,
                        MSG_NOSIGNAL | MSG_DONTWAIT);
        return;
    }
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

/* Sender: the receiver's error frame, read back from socket 0 (whatever else arrives there is
 * a broken stream). */
static ncclResult_t tcp_peer_error(struct tt_conn *conn)
{
    struct tcp_conn *tc = conn->priv;
    if (tc == NULL) return ncclSuccess;
    if (tc->failed != ncclSuccess) return tc->failed;
    if (conn->dir != TT_CONN_SEND || tc->socks[0].fd < 0) return ncclSuccess;
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
        ssize_t n = recv(tc->socks[0].fd, tc->back + tc->back_got, want - tc->back_got,
                         MSG_DONTWAIT);
        if (n > 0) {
            tc->back_got += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
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
    .setup = tcp_setup,
    .connect = tcp_connect,
    .close = tcp_close,
    .send_acquire = tcp_send_acquire,
    .send_commit = tcp_send_commit,
    .send_idle = tcp_send_idle,
    .recv_peek = tcp_recv_peek,
    .recv_release = tcp_recv_release,
    .progress = tcp_progress,
    .shutdown = tcp_shutdown,
    .fail_notify = tcp_fail_notify,
    .peer_error = tcp_peer_error,
    .ctx_fini = tcp_ctx_fini,
};
