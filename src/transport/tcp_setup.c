/* TCP transport: the per-communicator listener, the handshake that matches accepted sockets to
 * connections by nonce, and connection setup and teardown (transport/tcp.h states the wire
 * format and the invariants; tcp.c is the data path). */
#include <endian.h>
#include <errno.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
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
                        int nsocks, bool paired)
{
    memset(p, 0, TT_CONN_INFO_BYTES);
    tt_wire_put_u64(p, TCP_INFO_MAGIC);
    tt_wire_put_u64(p + 8, nonce);
    tt_wire_put_u32(p + 40, (uint32_t)nsocks);
    tt_wire_put_u32(p + 44, paired ? TCP_INFO_PAIRED : 0);
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
    /* Accepted sockets inherit the listener's buffers, which size the window they offer in
     * the handshake (TUTTI_SOCKET_BUFSIZE; tune_socket sets them again afterwards). */
    tt_sock_set_buffers(l->fd, (int)tt_param_socket_bufsize());
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

void tt_tcp_ctx_fini(struct tt_transport_ctx *ctx)
{
    struct tcp_listener **slot = listener_of(ctx), *l = slot ? *slot : NULL;
    if (l == NULL) return;
    for (size_t i = 0; i < l->npending; i++) tt_sock_close(&l->pending[i].fd);
    free(l->pending);
    free(l->nonces);
    tt_sock_close(&l->fd);
    free(l);
    *slot = NULL;
}

/* The listener now waits for sockets carrying `nonce` (a receive connection was set up). */
static ncclResult_t nonce_expect(struct tcp_listener *l, uint64_t nonce)
{
    if (l->nnonces == l->nonces_cap) {
        size_t cap = l->nonces_cap ? 2 * l->nonces_cap : 16;
        uint64_t *n = realloc(l->nonces, cap * sizeof *n);
        if (n == NULL) return TT_ERROR(ncclSystemError, "tcp: out of memory for %zu nonces", cap);
        l->nonces = n;
        l->nonces_cap = cap;
    }
    l->nonces[l->nnonces++] = nonce;
    return ncclSuccess;
}

static bool nonce_expected(const struct tcp_listener *l, uint64_t nonce)
{
    for (size_t i = 0; i < l->nnonces; i++)
        if (l->nonces[i] == nonce) return true;
    return false;
}

/* Every socket of the connection with `nonce` has been claimed. */
static void nonce_done(struct tcp_listener *l, uint64_t nonce)
{
    for (size_t i = 0; i < l->nnonces; i++)
        if (l->nonces[i] == nonce) {
            l->nonces[i] = l->nonces[--l->nnonces];
            return;
        }
}

/* Sockets a receive side asks for (NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS). */
static int nsocks_wanted(void)
{
    int64_t nsocks = tt_param_nsocks_perthread() * tt_param_socket_nthreads();
    return nsocks > TCP_MAX_SOCKS ? TCP_MAX_SOCKS : (int)nsocks;
}

static bool has_tcp_pair(const struct tt_conn *conn)
{
    return conn->pair != NULL && conn->pair->transport == &tt_transport_tcp &&
           conn->pair->peer == conn->peer && conn->pair->dir != conn->dir;
}

/* Whether `conn` and its pair share sockets (tcp.h): both ranks have the pair (each side's blob
 * says so) and their receive sides ask for as many sockets. Both ranks compute it from the same
 * facts: `remote` is the peer's blob for the other end of `conn`, whose flag is the peer's
 * pair, and it carries the peer's receive sockets either way. */
static bool shares_sockets(const struct tt_conn *conn, const struct tt_conn_info *remote)
{
    const uint8_t *p = remote->bytes;
    return has_tcp_pair(conn) && tt_wire_get_u64(p) == TCP_INFO_MAGIC &&
           (tt_wire_get_u32(p + 44) & TCP_INFO_PAIRED) != 0 &&
           tt_wire_get_u32(p + 40) == (uint32_t)nsocks_wanted();
}

bool tt_tcp_send_after_recv(const struct tt_transport_ctx *ctx, const struct tt_conn *conn,
                            const struct tt_conn_info *remote)
{
    return conn->dir == TT_CONN_SEND && ctx->rank > conn->peer && shares_sockets(conn, remote);
}

ncclResult_t tt_tcp_setup(struct tt_transport_ctx *ctx, struct tt_conn *conn,
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
    tc->ctl_fd = -1;
    tc->dir = conn->dir;
    conn->priv = tc;
    /* 64-byte aligned so that every slot is aligned for any element type. */
    size_t ring_bytes = TT_CONN_SLOTS * tt_conn_slot_stride(conn->slot_bytes);
    if (posix_memalign((void **)&tc->staging, 64, ring_bytes) != 0)
        return TT_ERROR(ncclSystemError, "out of memory for a %zu-byte TCP staging ring",
                        ring_bytes);
    if (conn->dir == TT_CONN_SEND) {
        /* What the peer's receive side needs to agree on sharing sockets. */
        tt_wire_put_u64(info->bytes, TCP_INFO_MAGIC);
        tt_wire_put_u32(info->bytes + 40, (uint32_t)nsocks_wanted());
        tt_wire_put_u32(info->bytes + 44, has_tcp_pair(conn) ? TCP_INFO_PAIRED : 0);
        return ncclSuccess;
    }

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
    TT_TRY(nonce_expect(*slot, tc->nonce));
    /* The receiver decides how many sockets the connection has; the sender opens that many. */
    tc->nsocks = nsocks_wanted();
    encode_info(info->bytes, tc->nonce, &(*slot)->addr, tc->nsocks, has_tcp_pair(conn));
    return ncclSuccess;
}

static void drop_pending(struct tcp_listener *l, size_t i)
{
    tt_sock_close(&l->pending[i].fd);
    l->pending[i] = l->pending[--l->npending];
}

/* Closes the pending socket accepted first that has not sent its hello yet. One with a whole
 * hello carries a nonce this listener expects (read_hellos drops the others): another of this
 * rank's connections, never evicted. False when there is none to close. */
static bool evict_oldest(struct tcp_listener *l)
{
    size_t oldest = l->npending;
    for (size_t i = 0; i < l->npending; i++) {
        const struct tcp_pending *p = &l->pending[i];
        if (p->got == TCP_HELLO_BYTES) continue;
        if (oldest == l->npending || p->deadline_ns < l->pending[oldest].deadline_ns)
            oldest = i;
    }
    if (oldest == l->npending) return false;
    TT_INFO(TT_SUB_NET, "tcp: %d unclaimed connections on the listener; closing the oldest",
            TCP_MAX_PENDING);
    drop_pending(l, oldest);
    return true;
}

/* Takes up to TCP_ACCEPT_BATCH connections waiting on the listener into the pending list.
 * Returns true when one arrived. Transient accept failures are left for the next call;
 * *starved says the last one found no descriptor left and none to free. */
static bool accept_pending(struct tcp_listener *l, bool *starved)
{
    *starved = false;
    bool any = false;
    for (int batch = 0; batch < TCP_ACCEPT_BATCH; batch++) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            /* Out of fds: make room by closing the oldest unclaimed socket; with none, the
             * caller sleeps instead of polling the listener, which stays readable. */
            if (errno == EMFILE || errno == ENFILE) {
                if (evict_oldest(l)) continue;
                *starved = true;
            }
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

/* What is wrong with pending socket p's hello, once complete: NULL when nothing (yet). */
static const char *hello_fault(const struct tcp_listener *l, const struct tcp_pending *p)
{
    if (p->got < TCP_HELLO_BYTES) return NULL;
    if (tt_wire_get_u64(p->hello) != TCP_HELLO_MAGIC) return "no Tutti hello";
    if (!nonce_expected(l, tt_wire_get_u64(p->hello + 8)))
        return "a hello for no connection of this listener";
    return NULL;
}

/* Reads what has arrived of each pending hello; drops sockets that closed or sent something
 * that is not a hello for one of the listener's connections. Returns true when a byte moved. */
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
            const char *bad = hello_fault(l, p);
            if (bad != NULL) {
                char who[TT_SOCK_ADDR_STR_BYTES];
                TT_INFO(TT_SUB_NET, "tcp: dropping a connection from %s that sent %s",
                        tt_sock_peer_str(p->fd, who, sizeof who), bad);
                drop_pending(l, i);
                continue;
            }
        }
        i++;
    }
    return any;
}

/* A data socket's options: TCP_NODELAY (a frame goes out whole at once; small frames must not
 * wait for an acknowledgement), its congestion control (TUTTI_SOCKET_CC; by default reno in
 * place of the kernel's bbr or cubic on a link whose handshake took under TCP_LAN_RTT_US, and
 * the kernel's choice elsewhere and for any other control: on the development VM, whose kernel
 * default is bbr, reno moved AllReduces of 1 and 16 MiB across two namespaces 1.7-2.6x faster,
 * while across a lossy long link a loss-based control would crawl; docs/tuning.md) and
 * TUTTI_SOCKET_BUFSIZE where set (it turns the kernel's buffer autotuning off for this socket).
 * Called once the connection is up, so the handshake's round trip is known. Failures only cost
 * speed. */
static void tune_socket(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const char *cc = tt_param_socket_cc();
    if (cc != NULL && strcmp(cc, "auto") == 0) {
        struct tcp_info ti;
        socklen_t len = sizeof ti;
        memset(&ti, 0, sizeof ti);
        bool lan = getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
                   len >= offsetof(struct tcp_info, tcpi_rtt) + sizeof ti.tcpi_rtt &&
                   ti.tcpi_rtt > 0 && ti.tcpi_rtt < TCP_LAN_RTT_US;
        /* Only the kernels' stock controls give way: a control an administrator chose for the
         * network (dctcp, say) stays. */
        char now[16] = "";
        socklen_t now_len = sizeof now - 1;
        bool stock = getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, now, &now_len) == 0 &&
                     (strcmp(now, "bbr") == 0 || strcmp(now, "cubic") == 0);
        cc = lan && stock ? "reno" : NULL;
    }
    if (cc != NULL && cc[0] != '\0' && strcmp(cc, "default") != 0 &&
        setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) != 0) {
        /* A name the kernel lacks (a typo, or a module not loaded): said once, not fatal. */
        static atomic_bool warned;
        if (!atomic_exchange(&warned, true))
            TT_WARN("tcp: congestion control '%s' (TUTTI_SOCKET_CC) refused by the kernel: %s; "
                    "its default stays", cc, strerror(errno));
    }
    tt_sock_set_buffers(fd, (int)tt_param_socket_bufsize());
}

/* Where the sender's socket `index` goes: a data socket, or (shared) the control socket. */
static int *accepted_slot(struct tcp_conn *tc, uint32_t index)
{
    if (index < (uint32_t)tc->nsocks) return &tc->socks[index].fd;
    return tc->shared && index == (uint32_t)tc->nsocks ? &tc->ctl_fd : NULL;
}

/* Receiver: wait for the sender's sockets, recognised by the nonce of this connection and
 * placed by their index (shared: one more, the control socket). */
static ncclResult_t wait_for_sender(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                                    struct tcp_conn *tc, uint64_t deadline_ns)
{
    struct tcp_listener **slot = listener_of(ctx), *l = slot ? *slot : NULL;
    struct tt_backoff backoff;
    tt_backoff_init(&backoff);
    struct tt_wait_hint hint;
    tt_wait_hint_clear(&hint);
    hint.fd = l->fd;
    hint.events = POLLIN;
    uint64_t checked_ns = tt_time_ns();
    uint64_t starved_since_ns = 0; /* accepts found no descriptor since then (0: they did) */
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
                accepted_slot(tc, h.index) == NULL || *accepted_slot(tc, h.index) >= 0) {
                drop_pending(l, i);
                return TT_ERROR(ncclInvalidUsage,
                                "tcp: peer rank %d connected as rank %u to rank %u, tag %u, "
                                "%" PRIu64 "-byte slots, socket %u; expected tag %d, %zu-byte "
                                "slots and sockets 0..%d once each (NCCL_BUFFSIZE must be equal "
                                "on every rank)",
                                conn->peer, h.from, h.to, h.tag, h.slot_bytes, h.index,
                                conn->tag, conn->slot_bytes, tc->nsocks - (tc->shared ? 0 : 1));
            }
            *accepted_slot(tc, h.index) = p->fd;
            p->fd = -1;
            drop_pending(l, i);
            i--; /* drop_pending moved the last entry here */
            bool all = true;
            for (int k = 0; k < tc->nsocks; k++) all &= tc->socks[k].fd >= 0;
            all &= !tc->shared || tc->ctl_fd >= 0;
            if (!all) continue;
            nonce_done(l, tc->nonce);
            for (int k = 0; k < tc->nsocks; k++) {
                tune_socket(tc->socks[k].fd);
                tc->socks[k].next = (uint64_t)k;
            }
            TT_INFO(TT_SUB_NET, "tcp: connected from peer rank %d tag %d (%zu-byte slots, %d "
                    "socket%s)", conn->peer, conn->tag, conn->slot_bytes, tc->nsocks,
                    tc->nsocks > 1 ? "s" : "");
            return ncclSuccess;
        }
        bool starved;
        bool moved = accept_pending(l, &starved);
        /* Out of descriptors with none to free: they may come back (another thread closing
         * its own), but not for long, or the process holds them for good. */
        if (!starved) {
            starved_since_ns = 0;
        } else if (starved_since_ns == 0) {
            starved_since_ns = tt_time_ns();
        } else if (tt_time_ns() - starved_since_ns >
                   (uint64_t)tt_param_handshake_ms() * 1000000ull) {
            return TT_ERROR(ncclSystemError, "tcp: cannot accept peer rank %d's connection for "
                            "%lld ms (TUTTI_HANDSHAKE_MS): %s", conn->peer,
                            (long long)tt_param_handshake_ms(), tt_strerror(EMFILE));
        }
        moved |= read_hellos(l);
        /* Checked on every pass: strangers connecting without pause keep `moved` true. */
        ncclResult_t stop = tt_transport_connect_check(ctx, conn->peer, &checked_ns);
        if (stop != ncclSuccess) return stop;
        if (tt_deadline_passed(deadline_ns)) {
            char addr[TT_SOCK_ADDR_STR_BYTES];
            return TT_ERROR(ncclRemoteError,
                            "tcp: peer rank %d did not connect to %s (tag %d) before the "
                            "deadline (TUTTI_TIMEOUT_MS)",
                            conn->peer, tt_sock_addr_str(&l->addr, addr, sizeof addr),
                            conn->tag);
        }
        if (starved) {
            struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000000};
            nanosleep(&ts, NULL); /* the listener stays readable: polling it would spin */
        } else if (!moved) {
            tt_backoff_pause(&backoff, &hint);
        }
    }
}

/* Receiver: accepts the sender's sockets. A receive side that gives up forgets its nonce, and
 * the sockets that carry it (the sender's late ones) are closed: they would otherwise be kept,
 * exempt from the handshake deadline, for the communicator's life. */
static ncclResult_t connect_recv(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                                 struct tcp_conn *tc, uint64_t deadline_ns)
{
    ncclResult_t res = wait_for_sender(ctx, conn, tc, deadline_ns);
    struct tcp_listener **slot = listener_of(ctx), *l = slot ? *slot : NULL;
    if (res == ncclSuccess || l == NULL) return res;
    nonce_done(l, tc->nonce);
    for (size_t i = 0; i < l->npending;) {
        struct tcp_pending *p = &l->pending[i];
        if (p->got == TCP_HELLO_BYTES && tt_wire_get_u64(p->hello + 8) == tc->nonce)
            drop_pending(l, i);
        else
            i++;
    }
    return res;
}

/* A send side's connect watches its receiver as a receive side's wait does (wait_for_sender). */
struct receiver_watch {
    struct tt_transport_ctx *ctx;
    int peer;
    uint64_t checked_ns;
};

static ncclResult_t watch_receiver(void *arg)
{
    struct receiver_watch *w = arg;
    return tt_transport_connect_check(w->ctx, w->peer, &w->checked_ns);
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
    /* The receiver's listener was listening when it published its address, so a refusal means
     * it is gone: no retrying until the deadline. */
    char who[32];
    snprintf(who, sizeof who, "peer rank %d", conn->peer);
    struct receiver_watch watch = {.ctx = ctx, .peer = conn->peer};
    struct tt_sock_connect_how how = {.bufsize = (int)tt_param_socket_bufsize(),
                                      .published = true, .check = watch_receiver,
                                      .check_arg = &watch, .who = who};
    /* Shared: one more socket, the control socket (index nsocks). */
    for (int k = 0; k < tc->nsocks + (tc->shared ? 1 : 0); k++) {
        int *fd = k < tc->nsocks ? &tc->socks[k].fd : &tc->ctl_fd;
        TT_TRY(tt_sock_connect_how(&addr, deadline_ns, ctx->abort, &how, fd));
        if (k < tc->nsocks) {
            tune_socket(*fd);
            tc->socks[k].next = (uint64_t)k;
        }
        uint8_t wire[TCP_HELLO_BYTES];
        h.index = (uint32_t)k;
        encode_hello(wire, &h);
        TT_TRY(tt_sock_send_all(*fd, wire, sizeof wire, deadline_ns, ctx->abort));
    }
    char text[TT_SOCK_ADDR_STR_BYTES];
    TT_INFO(TT_SUB_NET, "tcp: connected to peer rank %d at %s tag %d (%zu-byte slots, %d "
            "socket%s)", conn->peer, tt_sock_addr_str(&addr, text, sizeof text), conn->tag,
            conn->slot_bytes, tc->nsocks, tc->nsocks > 1 ? "s" : "");
    return ncclSuccess;
}

/* A side of a pair that shares sockets takes its pair's, connected already (the core connects
 * the owner first: transport.h): the same descriptors, held by both sides and closed by the
 * last to close (duplicates would cost every pair twice the descriptors of one-way sockets). */
static ncclResult_t adopt_sockets(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                                  struct tcp_conn *tc)
{
    struct tcp_conn *from = conn->pair->priv;
    bool ready = from != NULL && from->nsocks > 0 && from->ctl_fd >= 0;
    for (int k = 0; ready && k < from->nsocks; k++) ready = from->socks[k].fd >= 0;
    if (!ready)
        return TT_ERROR(ncclInternalError, "tcp: the %s side with peer rank %d (tag %d) is not "
                        "connected yet; its pair cannot share its sockets",
                        conn->pair->dir == TT_CONN_SEND ? "send" : "receive", conn->peer,
                        conn->tag);
    if (from->holders == NULL) {
        from->holders = malloc(sizeof *from->holders);
        if (from->holders == NULL)
            return TT_ERROR(ncclSystemError, "tcp: out of memory sharing sockets with peer rank "
                            "%d", conn->peer);
        atomic_init(from->holders, 1);
    }
    atomic_fetch_add(from->holders, 1);
    tc->holders = from->holders;
    tc->nsocks = from->nsocks;
    for (int k = 0; k < tc->nsocks; k++) {
        tc->socks[k].fd = from->socks[k].fd;
        tc->socks[k].next = (uint64_t)k;
    }
    tc->ctl_fd = from->ctl_fd;
    tc->shared = true;
    if (conn->dir == TT_CONN_RECV) {
        /* Nobody connects with this side's nonce now. */
        struct tcp_listener **slot = listener_of(ctx);
        if (slot != NULL && *slot != NULL) nonce_done(*slot, tc->nonce);
    }
    TT_INFO(TT_SUB_NET, "tcp: %s peer rank %d tag %d over the sockets of the other direction "
            "(%d socket%s)", conn->dir == TT_CONN_SEND ? "to" : "from", conn->peer, conn->tag,
            tc->nsocks, tc->nsocks > 1 ? "s" : "");
    return ncclSuccess;
}

ncclResult_t tt_tcp_connect(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                            const struct tt_conn_info *remote, uint64_t deadline_ns)
{
    struct tcp_conn *tc = conn->priv;
    bool shared = shares_sockets(conn, remote);
    /* The lower rank's send side owns a shared pair's sockets. */
    bool owner = shared && (conn->dir == TT_CONN_SEND) == (ctx->rank < conn->peer);
    if (shared && !owner) return adopt_sockets(ctx, conn, tc);
    tc->shared = shared;
    if (conn->dir == TT_CONN_RECV) return connect_recv(ctx, conn, tc, deadline_ns);
    return connect_send(ctx, conn, tc, remote, deadline_ns);
}

void tt_tcp_close(struct tt_conn *conn)
{
    struct tcp_conn *tc = conn->priv;
    if (tc == NULL) return;
    /* A shared socket stays open while the pair holds it: the peer still learns that this
     * direction ended. */
    if (tc->shared && conn->dir == TT_CONN_SEND)
        for (int k = 0; k < tc->nsocks; k++)
            if (tc->socks[k].fd >= 0) shutdown(tc->socks[k].fd, SHUT_WR);
    bool last = tc->holders == NULL || atomic_fetch_sub(tc->holders, 1) == 1;
    if (last) {
        for (int k = 0; k < TCP_MAX_SOCKS; k++) tt_sock_close(&tc->socks[k].fd);
        tt_sock_close(&tc->ctl_fd);
        free((void *)tc->holders);
    }
    free(tc->staging);
    free(tc);
    conn->priv = NULL;
}
