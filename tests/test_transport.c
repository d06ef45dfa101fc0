/* Transport tests: every scenario forks a second process and runs rank 0 in the parent and rank 1
 * in the child, exchanging the connection info blobs over a socketpair instead of the bootstrap.
 * Streams carry a byte pattern that depends on (sender rank, tag, stream offset) and message
 * lengths from a fixed sequence, so the receiver checks every byte and every length against an
 * independent reference. The hostile TCP peer speaks the wire format documented at the top of
 * src/transport/tcp.c from a raw socket, written again here on purpose. Every wait has a
 * deadline, and alarm() backs them up, so the test cannot hang. */
#include <arpa/inet.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "transport/tcp.h"
#include "transport/transport.h"
#include "util/err.h"
#include "util/param.h"
#include "util/time.h"
#include "util/wait.h"

#include "check.h"

#define MAX_TAGS 2
#define STEP_TIMEOUT_MS 30000
#define ALARM_S 100

static _Atomic int no_abort;
/* Each tag's two directions made as a pair (transport.h), as the core makes Tree's and
 * point-to-point connections: TCP then carries both over one set of sockets. */
static bool paired;

/* ---- Reference data: the pattern and the message-length sequence. ---- */

static uint8_t pattern(int from, int tag, uint64_t offset)
{
    uint64_t x = (offset + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(from * 131 + tag * 7 + 1);
    return (uint8_t)(x >> 56 ^ x >> 17);
}

/* Length of message k: full slots, 1 byte, empty, and pseudo-random lengths; never more than
 * `left` bytes. */
static size_t msg_bytes(uint64_t k, size_t slot_bytes, uint64_t left)
{
    size_t n;
    switch (k % 8) {
    case 0: n = slot_bytes; break;
    case 3: n = 1; break;
    case 5: n = 0; break;
    default: n = (size_t)((k * 2654435761u >> 3) % slot_bytes) + 1; break;
    }
    return n < left ? n : (size_t)left;
}

/* One direction of a stream over one connection: `total` bytes or `max_msgs` messages. */
struct stream {
    struct tt_conn *conn;
    int from;
    int tag;
    uint64_t total;
    uint64_t max_msgs;
    uint64_t offset;
    uint64_t msgs;
    bool done;
};

static bool stream_end(const struct stream *s)
{
    return s->offset == s->total || s->msgs == s->max_msgs;
}

static void fill_msg(struct stream *s, uint8_t *slot, size_t n)
{
    for (size_t i = 0; i < n; i++) slot[i] = pattern(s->from, s->tag, s->offset + i);
}

/* Checks one received message against the reference; returns false on a mismatch. */
static bool verify_msg(struct stream *s, const uint8_t *data, size_t bytes)
{
    size_t want = msg_bytes(s->msgs, s->conn->slot_bytes, s->total - s->offset);
    if (!CHECK(bytes == want, "from rank %d tag %d message %" PRIu64 ": got %zu bytes, want %zu",
               s->from, s->tag, s->msgs, bytes, want))
        return false;
    for (size_t i = 0; i < bytes; i++) {
        uint8_t w = pattern(s->from, s->tag, s->offset + i);
        if (!CHECK(data[i] == w,
                   "from rank %d tag %d message %" PRIu64 " byte %zu (offset %" PRIu64
                   "): got %#x, want %#x",
                   s->from, s->tag, s->msgs, i, s->offset + i, data[i], w))
            return false;
    }
    return true;
}

/* ---- Control channel between the two processes. ---- */

static bool ctl_write(int ctl, const void *buf, size_t bytes)
{
    const uint8_t *p = buf;
    while (bytes > 0) {
        ssize_t n = write(ctl, p, bytes);
        if (n < 0 && errno == EINTR) continue;
        if (!CHECK(n > 0, "control write failed: %s", strerror(errno))) return false;
        p += n;
        bytes -= (size_t)n;
    }
    return true;
}

static bool ctl_read(int ctl, void *buf, size_t bytes, int timeout_ms)
{
    uint8_t *p = buf;
    uint64_t deadline = tt_deadline_after_ms(timeout_ms);
    while (bytes > 0) {
        struct pollfd pfd = {.fd = ctl, .events = POLLIN};
        int left = tt_deadline_left_ms(deadline, 1000);
        if (!CHECK(left > 0, "control read: no message from the peer within %d ms", timeout_ms))
            return false;
        if (poll(&pfd, 1, left) <= 0) continue;
        ssize_t n = read(ctl, p, bytes);
        if (n < 0 && errno == EINTR) continue;
        if (!CHECK(n > 0, "control read failed: %s", n == 0 ? "peer exited" : strerror(errno)))
            return false;
        p += n;
        bytes -= (size_t)n;
    }
    return true;
}

static bool ctl_ready(int ctl)
{
    struct pollfd pfd = {.fd = ctl, .events = POLLIN};
    return poll(&pfd, 1, 0) > 0;
}

/* ---- Connection sets: a send and a receive connection per tag, towards the other rank. ---- */

struct conns {
    const struct tt_transport *t;
    struct tt_transport_ctx ctx;
    struct tt_conn send[MAX_TAGS];
    struct tt_conn recv[MAX_TAGS];
    int ntags;
};

static void ctx_init(struct tt_transport_ctx *ctx, int rank, uint64_t comm_hash)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->rank = rank;
    ctx->nranks = 2;
    ctx->comm_hash = comm_hash;
    ctx->abort = &no_abort;
    struct sockaddr_in *in = (struct sockaddr_in *)&ctx->local_addr;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

static void conn_init(struct tt_conn *c, const struct tt_transport *t, int peer,
                      enum tt_conn_dir dir, size_t slot_bytes, int tag)
{
    memset(c, 0, sizeof *c);
    c->transport = t;
    c->peer = peer;
    c->dir = dir;
    c->slot_bytes = slot_bytes;
    c->tag = tag;
}

/* Number of tutti segments of this communicator in /dev/shm. */
static int shm_segments(uint64_t comm_hash)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "tutti-%016" PRIx64 "-", comm_hash);
    DIR *d = opendir("/dev/shm");
    if (d == NULL) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    closedir(d);
    return n;
}

/* Whether two descriptors name one socket. */
static bool same_socket(int a, int b)
{
    struct stat x, y;
    return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* Paired TCP connections: both directions of each tag over the same sockets. */
static bool check_shared(const struct conns *c)
{
    for (int tag = 0; tag < c->ntags; tag++) {
        const struct tcp_conn *s = c->send[tag].priv, *r = c->recv[tag].priv;
        if (!CHECK(s->nsocks == r->nsocks, "tag %d: %d send sockets, %d receive sockets", tag,
                   s->nsocks, r->nsocks))
            return false;
        for (int k = 0; k < s->nsocks; k++)
            if (!CHECK(s->shared && r->shared && same_socket(s->socks[k].fd, r->socks[k].fd),
                       "tag %d socket %d: the send and receive sides of a pair do not share it",
                       tag, k))
                return false;
        /* One descriptor per socket, as one-way connections have: not a copy per side; both
         * sides counted as its holders. */
        bool same = s->ctl_fd >= 0 && s->ctl_fd == r->ctl_fd && s->holders != NULL &&
                    s->holders == r->holders && atomic_load(s->holders) == 2;
        for (int k = 0; k < s->nsocks; k++) same &= s->socks[k].fd == r->socks[k].fd;
        if (!CHECK(same, "tag %d: the sides of a pair hold copies of its descriptors", tag))
            return false;
    }
    return true;
}

/* Sets up every connection, swaps the blobs, connects every send side, then every receive
 * side in reverse tag order (so TCP must match connections that arrive out of order), then the
 * send sides built from their receive side (paired). */
static bool conns_open(struct conns *c, const struct tt_transport *t, int rank, int ctl,
                       uint64_t comm_hash, int ntags, size_t slot_bytes)
{
    memset(c, 0, sizeof *c);
    c->t = t;
    c->ntags = ntags;
    ctx_init(&c->ctx, rank, comm_hash);
    struct tt_conn_info mine[2 * MAX_TAGS], theirs[2 * MAX_TAGS];
    for (int tag = 0; tag < ntags; tag++) {
        conn_init(&c->send[tag], t, 1 - rank, TT_CONN_SEND, slot_bytes, tag);
        conn_init(&c->recv[tag], t, 1 - rank, TT_CONN_RECV, slot_bytes, tag);
        if (paired) {
            c->send[tag].pair = &c->recv[tag];
            c->recv[tag].pair = &c->send[tag];
        }
        if (!CHECK(t->setup(&c->ctx, &c->send[tag], &mine[tag]) == ncclSuccess,
                   "%s send setup tag %d", t->name, tag) ||
            !CHECK(t->setup(&c->ctx, &c->recv[tag], &mine[ntags + tag]) == ncclSuccess,
                   "%s recv setup tag %d", t->name, tag))
            return false;
    }
    size_t blob_bytes = 2 * (size_t)ntags * sizeof mine[0];
    if (!ctl_write(ctl, mine, blob_bytes) || !ctl_read(ctl, theirs, blob_bytes, STEP_TIMEOUT_MS))
        return false;
    uint64_t deadline = tt_deadline_after_ms(STEP_TIMEOUT_MS);
    bool late[MAX_TAGS];
    for (int tag = 0; tag < ntags; tag++) {
        late[tag] = tt_transport_send_after_recv(&c->ctx, &c->send[tag], &theirs[ntags + tag]);
        if (!late[tag] &&
            !CHECK(t->connect(&c->ctx, &c->send[tag], &theirs[ntags + tag], deadline) ==
                       ncclSuccess,
                   "%s send connect tag %d", t->name, tag))
            return false;
    }
    for (int tag = ntags - 1; tag >= 0; tag--)
        if (!CHECK(t->connect(&c->ctx, &c->recv[tag], &theirs[tag], deadline) == ncclSuccess,
                   "%s recv connect tag %d", t->name, tag))
            return false;
    for (int tag = 0; tag < ntags; tag++)
        if (late[tag] &&
            !CHECK(t->connect(&c->ctx, &c->send[tag], &theirs[ntags + tag], deadline) ==
                       ncclSuccess,
                   "%s send connect tag %d (after the receive sides)", t->name, tag))
            return false;
    if (paired && t == &tt_transport_tcp && !check_shared(c)) return false;
    /* Both sides connected: no segment of this communicator may remain named. */
    uint8_t token = 1;
    if (!ctl_write(ctl, &token, 1) || !ctl_read(ctl, &token, 1, STEP_TIMEOUT_MS)) return false;
    int left = shm_segments(comm_hash);
    return CHECK(left == 0, "%d tutti segment(s) left in /dev/shm after connect, want 0", left);
}

static void conns_close(struct conns *c)
{
    for (int tag = 0; tag < c->ntags; tag++) {
        c->t->close(&c->send[tag]);
        c->t->close(&c->recv[tag]);
    }
    if (c->t != NULL && c->t->ctx_fini != NULL) c->t->ctx_fini(&c->ctx);
}

static bool pump(struct conns *c)
{
    if (c->t->progress == NULL) return true;
    for (int tag = 0; tag < c->ntags; tag++) {
        if (!CHECK(c->t->progress(&c->send[tag]) == ncclSuccess, "progress send tag %d", tag) ||
            !CHECK(c->t->progress(&c->recv[tag]) == ncclSuccess, "progress recv tag %d", tag))
            return false;
    }
    return true;
}

/* ---- The stream driver: all streams advance together, in both directions at once. ---- */

/* The descriptor message `msgs` of a stream carries: every field distinct and non-zero. */
static struct tt_op_desc desc_of(const struct stream *s, size_t bytes)
{
    return (struct tt_op_desc){.ticket = s->msgs + 1, .count = bytes, .root = -(s->tag + 2),
                               .coll = (uint8_t)(s->tag + 1), .dtype = 7,
                               .op = (uint16_t)(0x1234 + s->msgs)};
}

static bool drive(struct conns *c, struct stream *tx, int ntx, struct stream *rx, int nrx,
                  int timeout_ms)
{
    const struct tt_transport *t = c->t;
    uint64_t deadline = tt_deadline_after_ms(timeout_ms);
    struct tt_backoff backoff;
    tt_backoff_init(&backoff);
    for (;;) {
        bool moved = false, all_done = true;
        struct tt_wait_hint wait, hint;
        tt_wait_hint_clear(&wait);
        for (int i = 0; i < nrx; i++) {
            struct stream *s = &rx[i];
            if (s->done) continue;
            all_done = false;
            const void *data;
            size_t bytes;
            struct tt_op_desc desc;
            if (!CHECK(t->recv_peek(s->conn, &data, &bytes, &desc, &hint) == ncclSuccess,
                       "recv_peek from rank %d tag %d after %" PRIu64 " bytes", s->from, s->tag,
                       s->offset))
                return false;
            if (data == NULL) {
                if (wait.word == NULL && wait.fd < 0) wait = hint;
                continue;
            }
            if (!verify_msg(s, data, bytes)) return false;
            /* The descriptor travels with its message, every field intact. */
            struct tt_op_desc want = desc_of(s, bytes);
            if (!CHECK(memcmp(&desc, &want, sizeof desc) == 0,
                       "descriptor of message %" PRIu64 " from rank %d: ticket %" PRIu64
                       " count %" PRIu64 " root %d op %u, want ticket %" PRIu64 " count %" PRIu64,
                       s->msgs, s->from, desc.ticket, desc.count, (int)desc.root,
                       (unsigned)desc.op, want.ticket, want.count))
                return false;
            if (!CHECK(t->recv_release(s->conn) == ncclSuccess, "recv_release")) return false;
            s->offset += bytes;
            s->msgs++;
            s->done = stream_end(s);
            moved = true;
        }
        for (int i = 0; i < ntx; i++) {
            struct stream *s = &tx[i];
            if (s->done) continue;
            all_done = false;
            if (stream_end(s)) {
                s->done = t->send_idle(s->conn);
                continue;
            }
            void *slot;
            if (!CHECK(t->send_acquire(s->conn, &slot, &hint) == ncclSuccess,
                       "send_acquire to rank %d tag %d after %" PRIu64 " bytes", 1 - s->from,
                       s->tag, s->offset))
                return false;
            if (slot == NULL) {
                if (wait.word == NULL && wait.fd < 0) wait = hint;
                continue;
            }
            size_t n = msg_bytes(s->msgs, s->conn->slot_bytes, s->total - s->offset);
            fill_msg(s, slot, n);
            struct tt_op_desc desc = desc_of(s, n);
            if (!CHECK(t->send_commit(s->conn, n, &desc) == ncclSuccess, "send_commit %zu bytes",
                       n))
                return false;
            s->offset += n;
            s->msgs++;
            moved = true;
        }
        if (all_done) return true;
        if (!pump(c)) return false;
        if (!CHECK(!tt_deadline_passed(deadline), "streams not done after %d ms", timeout_ms)) {
            for (int i = 0; i < ntx; i++)
                fprintf(stderr, "  tx tag %d: %" PRIu64 " bytes, %" PRIu64 " messages\n",
                        tx[i].tag, tx[i].offset, tx[i].msgs);
            for (int i = 0; i < nrx; i++)
                fprintf(stderr, "  rx tag %d: %" PRIu64 " bytes, %" PRIu64 " messages\n",
                        rx[i].tag, rx[i].offset, rx[i].msgs);
            return false;
        }
        if (moved)
            tt_backoff_reset(&backoff);
        else
            tt_backoff_pause(&backoff, &wait);
    }
}

/* ---- Scenarios. Each runs on both ranks; peer_pid is the child's pid on rank 0. ---- */

struct scenario {
    const char *name;
    bool (*run)(const struct tt_transport *t, int rank, int ctl, uint64_t comm_hash,
                pid_t peer_pid);
    bool tcp_only;
    bool kills_child;
};

/* 8 MiB on tag 0 and 1 MiB on tag 1, in both directions at once. */
static bool run_stream(const struct tt_transport *t, int rank, int ctl, uint64_t comm_hash,
                       size_t slot_bytes)
{
    struct conns c;
    bool ok = conns_open(&c, t, rank, ctl, comm_hash, 2, slot_bytes);
    if (ok) {
        struct stream tx[2], rx[2];
        for (int tag = 0; tag < 2; tag++) {
            uint64_t total = tag == 0 ? 8u << 20 : 1u << 20;
            tx[tag] = (struct stream){&c.send[tag], rank, tag, total, UINT64_MAX, 0, 0, false};
            rx[tag] = (struct stream){&c.recv[tag], 1 - rank, tag, total, UINT64_MAX, 0, 0, false};
        }
        ok = drive(&c, tx, 2, rx, 2, STEP_TIMEOUT_MS);
    }
    conns_close(&c);
    return ok;
}

static bool run_stream_small(const struct tt_transport *t, int rank, int ctl, uint64_t hash,
                             pid_t peer_pid)
{
    return run_stream(t, rank, ctl, hash, 1000);
}

static bool run_stream_large(const struct tt_transport *t, int rank, int ctl, uint64_t hash,
                             pid_t peer_pid)
{
    return run_stream(t, rank, ctl, hash, 64 << 10);
}

/* Waits for one message on `conn` and checks it equals want[0..bytes). */
static bool recv_one(struct conns *c, struct tt_conn *conn, const uint8_t *want, size_t bytes)
{
    uint64_t deadline = tt_deadline_after_ms(STEP_TIMEOUT_MS);
    struct tt_backoff backoff;
    tt_backoff_init(&backoff);
    for (;;) {
        const void *data;
        size_t got;
        struct tt_wait_hint hint;
        if (!CHECK(c->t->recv_peek(conn, &data, &got, NULL, &hint) == ncclSuccess, "recv_peek"))
            return false;
        if (data != NULL) {
            bool ok = CHECK(got == bytes, "got %zu bytes, want %zu", got, bytes) &&
                      CHECK(memcmp(data, want, bytes) == 0, "message content differs");
            return CHECK(c->t->recv_release(conn) == ncclSuccess, "recv_release") && ok;
        }
        if (!pump(c) || !CHECK(!tt_deadline_passed(deadline), "no message after %d ms",
                               STEP_TIMEOUT_MS))
            return false;
        tt_backoff_pause(&backoff, &hint);
    }
}

static bool send_one(struct conns *c, struct tt_conn *conn, const uint8_t *buf, size_t bytes)
{
    uint64_t deadline = tt_deadline_after_ms(STEP_TIMEOUT_MS);
    struct tt_backoff backoff;
    tt_backoff_init(&backoff);
    for (;;) {
        void *slot;
        struct tt_wait_hint hint;
        if (!CHECK(c->t->send_acquire(conn, &slot, &hint) == ncclSuccess, "send_acquire"))
            return false;
        if (slot != NULL) {
            memcpy(slot, buf, bytes);
            return CHECK(c->t->send_commit(conn, bytes, NULL) == ncclSuccess, "send_commit");
        }
        if (!pump(c) || !CHECK(!tt_deadline_passed(deadline), "no credit after %d ms",
                               STEP_TIMEOUT_MS))
            return false;
        tt_backoff_pause(&backoff, &hint);
    }
}

/* 1-byte messages bounced back and forth; each reply depends on the request. */
static bool run_pingpong(const struct tt_transport *t, int rank, int ctl, uint64_t hash,
                         pid_t peer_pid)
{
    enum { ROUNDS = 2000 };
    struct conns c;
    bool ok = conns_open(&c, t, rank, ctl, hash, 1, 1000);
    uint64_t start = tt_time_ns();
    for (int k = 0; ok && k < ROUNDS; k++) {
        uint8_t ping = (uint8_t)k, pong = (uint8_t)(k ^ 0x5a);
        if (rank == 0)
            ok = send_one(&c, &c.send[0], &ping, 1) && recv_one(&c, &c.recv[0], &pong, 1);
        else
            ok = recv_one(&c, &c.recv[0], &ping, 1) && send_one(&c, &c.send[0], &pong, 1);
    }
    if (ok && rank == 0)
        printf("  %s: 1-byte round trip %.1f us\n", t->name,
               (double)(tt_time_ns() - start) / ROUNDS / 1000.0);
    conns_close(&c);
    return ok;
}

/* A receiver that stops consuming: the sender must run out of credit (send_acquire gives no
 * slot) instead of overwriting; then everything it committed arrives intact. */
static bool run_backpressure(const struct tt_transport *t, int rank, int ctl, uint64_t hash,
                             pid_t peer_pid)
{
    enum { MAX_MSGS = 8192, STALL_MS = 200 };
    struct conns c;
    bool ok = conns_open(&c, t, rank, ctl, hash, 1, 64 << 10);
    struct stream s = {&c.send[0], 0, 0, UINT64_MAX, UINT64_MAX, 0, 0, false};
    uint64_t deadline = tt_deadline_after_ms(STEP_TIMEOUT_MS);
    struct tt_backoff backoff;
    tt_backoff_init(&backoff);
    if (ok && rank == 0) {
        /* Commit until no slot has been offered for STALL_MS. */
        uint64_t stalled_since = 0;
        while (ok) {
            void *slot;
            struct tt_wait_hint hint;
            ok = pump(&c) && CHECK(t->send_acquire(s.conn, &slot, &hint) == ncclSuccess,
                                   "send_acquire after %" PRIu64 " messages", s.msgs);
            if (!ok) break;
            if (slot != NULL) {
                size_t n = msg_bytes(s.msgs, s.conn->slot_bytes, UINT64_MAX);
                fill_msg(&s, slot, n);
                struct tt_op_desc desc = desc_of(&s, n);
                ok = CHECK(t->send_commit(s.conn, n, &desc) == ncclSuccess, "send_commit") &&
                     CHECK(s.msgs < MAX_MSGS, "sender still has credit after %d messages "
                                              "that nobody consumed", MAX_MSGS);
                s.offset += n;
                s.msgs++;
                stalled_since = 0;
                continue;
            }
            if (stalled_since == 0) stalled_since = tt_time_ns();
            if (tt_time_ns() - stalled_since > STALL_MS * 1000000ull) break;
            tt_backoff_pause(&backoff, NULL);
        }
        if (ok && strcmp(t->name, "shm") == 0)
            ok = CHECK(s.msgs == TT_CONN_SLOTS, "shm sender committed %" PRIu64
                       " messages without credit, want %d", s.msgs, TT_CONN_SLOTS);
        printf("  %s: sender ran out of credit after %" PRIu64 " messages of <= 64 KiB\n",
               t->name, s.msgs);
        uint64_t msgs = ok ? s.msgs : 0;
        ok = ctl_write(ctl, &msgs, sizeof msgs) && ok;
        /* Keep the socket flowing until the receiver has drained everything. */
        while (ok && !(t->send_idle(s.conn) && ctl_ready(ctl))) {
            ok = pump(&c) && CHECK(!tt_deadline_passed(deadline), "receiver never drained");
            tt_backoff_pause(&backoff, NULL);
        }
        uint8_t token;
        ok = ok && ctl_read(ctl, &token, 1, STEP_TIMEOUT_MS) && CHECK(token == 1, "receiver "
                                                                      "reported a failure");
    } else if (ok) {
        uint64_t msgs = 0;
        ok = ctl_read(ctl, &msgs, sizeof msgs, STEP_TIMEOUT_MS) &&
             CHECK(msgs > 0, "sender failed");
        struct stream r = {&c.recv[0], 0, 0, UINT64_MAX, msgs, 0, 0, false};
        ok = ok && drive(&c, NULL, 0, &r, 1, STEP_TIMEOUT_MS);
        /* Nothing beyond what the sender committed. */
        const void *data = NULL;
        size_t bytes;
        struct tt_wait_hint hint;
        for (int i = 0; ok && i < 20; i++) {
            ok = CHECK(t->recv_peek(r.conn, &data, &bytes, NULL, &hint) == ncclSuccess, "recv_peek") &&
                 CHECK(data == NULL, "message %" PRIu64 " arrived that was never sent", msgs);
            usleep(1000);
        }
        uint8_t token = ok ? 1 : 0;
        ok = ctl_write(ctl, &token, 1) && ok;
    }
    conns_close(&c);
    return ok;
}

/* Keeps sending or receiving on s until a call fails; the failure must be ncclRemoteError.
 * Data received before the failure must match the stream, unless none may arrive at all. */
static bool expect_remote_error(struct conns *c, struct stream *s, bool sending,
                                bool data_allowed)
{
    uint64_t deadline = tt_deadline_after_ms(10000);
    struct tt_backoff backoff;
    tt_backoff_init(&backoff);
    for (;;) {
        ncclResult_t res;
        struct tt_wait_hint hint;
        tt_wait_hint_clear(&hint);
        if (sending) {
            void *slot;
            res = c->t->send_acquire(s->conn, &slot, &hint);
            if (res == ncclSuccess && slot != NULL) {
                size_t n = msg_bytes(s->msgs, s->conn->slot_bytes, UINT64_MAX);
                fill_msg(s, slot, n);
                struct tt_op_desc desc = desc_of(s, n);
                res = c->t->send_commit(s->conn, n, &desc);
                s->offset += n;
                s->msgs++;
            }
            if (res == ncclSuccess) res = c->t->progress(s->conn);
        } else {
            const void *data;
            size_t bytes;
            res = c->t->recv_peek(s->conn, &data, &bytes, NULL, &hint);
            if (res == ncclSuccess && data != NULL) {
                if (!CHECK(data_allowed, "tag %d: got %zu bytes from a broken stream", s->tag,
                           bytes) ||
                    !verify_msg(s, data, bytes))
                    return false;
                res = c->t->recv_release(s->conn);
                s->offset += bytes;
                s->msgs++;
            }
        }
        if (res != ncclSuccess)
            return CHECK(res == ncclRemoteError, "got error %d, want ncclRemoteError (%d)",
                         (int)res, (int)ncclRemoteError);
        if (!CHECK(!tt_deadline_passed(deadline), "no error 10 s after the peer was killed"))
            return false;
        tt_backoff_pause(&backoff, &hint);
    }
}

static bool kill_child(pid_t pid)
{
    kill(pid, SIGKILL);
    int status;
    return CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
}

/* The sending process is killed mid-stream: the receiver drains what arrived, then gets
 * ncclRemoteError. */
static bool run_kill_sender(const struct tt_transport *t, int rank, int ctl, uint64_t hash,
                            pid_t peer_pid)
{
    struct conns c;
    bool ok = conns_open(&c, t, rank, ctl, hash, 1, 1000);
    if (ok && rank == 1) {
        struct stream s = {&c.send[0], 1, 0, UINT64_MAX, UINT64_MAX, 0, 0, false};
        drive(&c, &s, 1, NULL, 0, STEP_TIMEOUT_MS); /* until killed */
        ok = false;
    } else if (ok) {
        struct stream r = {&c.recv[0], 1, 0, UINT64_MAX, 2000, 0, 0, false};
        ok = drive(&c, NULL, 0, &r, 1, STEP_TIMEOUT_MS) && kill_child(peer_pid);
        r.max_msgs = UINT64_MAX;
        ok = ok && expect_remote_error(&c, &r, false, true);
    }
    conns_close(&c);
    return ok;
}

/* Commits the stream's next message when the connection has a free slot (*sent says whether;
 * else *hint says what to wait for). False when a call fails. */
static bool offer_msg(const struct tt_transport *t, struct stream *s, bool *sent,
                      struct tt_wait_hint *hint)
{
    void *slot;
    *sent = false;
    if (!CHECK(t->send_acquire(s->conn, &slot, hint) == ncclSuccess, "send_acquire")) return false;
    if (slot == NULL) return true;
    size_t n = msg_bytes(s->msgs, s->conn->slot_bytes, UINT64_MAX);
    fill_msg(s, slot, n);
    struct tt_op_desc desc = desc_of(s, n);
    if (!CHECK(t->send_commit(s->conn, n, &desc) == ncclSuccess, "send_commit")) return false;
    s->offset += n;
    s->msgs++;
    *sent = true;
    return true;
}

/* The receiving process is killed while the sender streams: the sender gets ncclRemoteError. */
static bool run_kill_receiver(const struct tt_transport *t, int rank, int ctl, uint64_t hash,
                              pid_t peer_pid)
{
    struct conns c;
    bool ok = conns_open(&c, t, rank, ctl, hash, 1, 1000);
    if (ok && rank == 1) {
        uint8_t token;
        ctl_read(ctl, &token, 1, STEP_TIMEOUT_MS); /* never comes: we are killed first */
        ok = false;
    } else if (ok) {
        struct stream s = {&c.send[0], 0, 0, 1 << 20, UINT64_MAX, 0, 0, false};
        /* Send until the peer's socket buffers are full or 1 MiB has gone, then kill it. */
        uint64_t deadline = tt_deadline_after_ms(2000);
        struct tt_backoff backoff;
        tt_backoff_init(&backoff);
        while (ok && s.offset < s.total && !tt_deadline_passed(deadline)) {
            bool sent;
            struct tt_wait_hint hint;
            ok = offer_msg(t, &s, &sent, &hint);
            if (ok && sent)
                tt_backoff_reset(&backoff);
            else if (ok)
                tt_backoff_pause(&backoff, &hint);
        }
        ok = ok && kill_child(peer_pid) && expect_remote_error(&c, &s, true, true);
    }
    conns_close(&c);
    return ok;
}

/* A failing rank tells its peer why (fail_notify on its send side, notify_back on its receive
 * side, then shutdown): the peer
 * receives intact messages (those still queued when the error frame arrives may be dropped),
 * then the failure's code. A sender asking whether its receiver
 * failed (peer_error) must never eat the frames of a shared socket's other direction. */
static bool run_fail_notify(const struct tt_transport *t, int rank, int ctl, uint64_t hash,
                            pid_t peer_pid)
{
    enum { MSGS = 100 };
    struct conns c;
    bool ok = conns_open(&c, t, rank, ctl, hash, 1, 1000);
    uint8_t token = 1;
    if (ok && rank == 1) {
        struct stream s = {&c.send[0], 1, 0, UINT64_MAX, MSGS, 0, 0, false};
        ok = drive(&c, &s, 1, NULL, 0, STEP_TIMEOUT_MS);
        t->fail_notify(&c.send[0], ncclInvalidUsage, "rank 1 gave up");
        t->notify_back(&c.recv[0], ncclInvalidUsage, "rank 1 gave up");
        t->shutdown(&c.send[0]);
        t->shutdown(&c.recv[0]);
        ok = ctl_read(ctl, &token, 1, STEP_TIMEOUT_MS) && ok; /* rank 0 is done */
    } else if (ok) {
        struct stream r = {&c.recv[0], 1, 0, UINT64_MAX, UINT64_MAX, 0, 0, false};
        uint64_t deadline = tt_deadline_after_ms(STEP_TIMEOUT_MS);
        ncclResult_t res = ncclSuccess;
        while (ok && res == ncclSuccess && !tt_deadline_passed(deadline)) {
            ncclResult_t back = t->peer_error(&c.send[0]);
            ok = CHECK(back == ncclSuccess || back == ncclInvalidUsage, "peer_error: %d",
                       (int)back);
            const void *data;
            size_t bytes;
            struct tt_wait_hint hint;
            res = t->recv_peek(r.conn, &data, &bytes, NULL, &hint);
            if (ok && res == ncclSuccess && data != NULL) {
                ok = verify_msg(&r, data, bytes) &&
                     CHECK(t->recv_release(r.conn) == ncclSuccess, "recv_release");
                r.offset += bytes;
                r.msgs++;
            }
        }
        ok = ok && CHECK(res == ncclInvalidUsage, "got %d, want the peer's ncclInvalidUsage",
                         (int)res) &&
             CHECK(r.msgs <= MSGS, "%" PRIu64 " messages before the error, want <= %d",
                   r.msgs, MSGS);
        ok = ctl_write(ctl, &token, 1) && ok;
    }
    conns_close(&c);
    return ok;
}

/* A receiver that stopped reading fails: the sender, stalled on it (no credit, and reading
 * nothing), learns the receiver's code at once from peer_error, the answer back up the stream
 * (paired: on the control socket, the data sockets' other direction being the pair's). */
static bool stuck_sender(const struct tt_transport *t, int rank, int ctl, uint64_t hash,
                         bool notify)
{
    struct conns c;
    bool ok = conns_open(&c, t, rank, ctl, hash, 1, 64 << 10);
    uint8_t token = 1;
    if (ok && rank == 1) {
        ok = ctl_read(ctl, &token, 1, STEP_TIMEOUT_MS); /* rank 0 is stuck */
        if (notify)
            t->notify_back(&c.recv[0], ncclInvalidUsage, "rank 1 stopped reading");
        else
            t->shutdown(&c.recv[0]);
        ok = ctl_read(ctl, &token, 1, STEP_TIMEOUT_MS) && ok; /* rank 0 is done */
    } else if (ok) {
        struct stream s = {&c.send[0], 0, 0, UINT64_MAX, UINT64_MAX, 0, 0, false};
        /* Send until no credit came for 100 ms: the receiver's socket and ring are full. */
        uint64_t stuck_since = 0, deadline = tt_deadline_after_ms(STEP_TIMEOUT_MS);
        while (ok && !tt_deadline_passed(deadline)) {
            bool sent;
            struct tt_wait_hint hint;
            ok = offer_msg(t, &s, &sent, &hint);
            if (ok && sent) {
                stuck_since = 0;
            } else if (ok) {
                if (stuck_since == 0) stuck_since = tt_time_ns();
                if (tt_time_ns() - stuck_since > 100000000ull) break;
                usleep(1000);
            }
        }
        ok = ok && ctl_write(ctl, &token, 1);
        ncclResult_t back = ncclSuccess;
        uint64_t asked = tt_time_ns();
        while (ok && back == ncclSuccess && tt_time_ns() - asked < 5000000000ull) {
            back = t->peer_error(s.conn);
            if (back == ncclSuccess) usleep(1000);
        }
        ncclResult_t want = notify ? ncclInvalidUsage : ncclRemoteError;
        ok = ok && CHECK(back == want, "a stalled sender's peer_error gave %d 5 s after its "
                         "receiver %s, want %d", (int)back, notify ? "failed" : "shut down",
                         (int)want);
        ok = ctl_write(ctl, &token, 1) && ok;
    }
    conns_close(&c);
    return ok;
}

static bool run_stuck_sender(const struct tt_transport *t, int rank, int ctl, uint64_t hash,
                             pid_t peer_pid)
{
    return stuck_sender(t, rank, ctl, hash, true);
}

/* The same receiver shut down without a word (a receive side that failed on its own): paired,
 * the sender learns it from the control socket's end (one-way connections learn it when the
 * receiver closes its socket, not tested here). */
static bool run_stuck_sender_shutdown(const struct tt_transport *t, int rank, int ctl,
                                      uint64_t hash, pid_t peer_pid)
{
    return !paired || stuck_sender(t, rank, ctl, hash, false);
}

/* ---- A hostile TCP peer, written against the documented wire format. ---- */

static void put32(uint8_t *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}

static int raw_connect(const uint8_t *info)
{
    struct sockaddr_in in = {.sin_family = AF_INET};
    memcpy(&in.sin_port, info + 18, 2);
    memcpy(&in.sin_addr, info + 24, 4);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (!CHECK(fd >= 0 && info[16] == AF_INET, "raw socket") ||
        !CHECK(connect(fd, (struct sockaddr *)&in, sizeof in) == 0, "raw connect: %s",
               strerror(errno)))
        return -1;
    return fd;
}

static void make_hello(uint8_t *p, uint64_t nonce, size_t slot_bytes, int tag)
{
    memset(p, 0, 40);
    put64(p, 0x6f6c6c6568706374ull);
    put64(p + 8, nonce);
    put64(p + 16, slot_bytes);
    put32(p + 24, 1); /* from rank 1 */
    put32(p + 28, 0); /* to rank 0 */
    put32(p + 32, (uint32_t)tag);
}

/* A frame header as tcp.c writes it: length, check word, then a descriptor (zeros here). */
#define FRAME_HEADER 32

static void make_frame_header(uint8_t *p, uint32_t bytes, uint32_t frame, bool bad_check)
{
    memset(p, 0, FRAME_HEADER);
    put32(p, bytes);
    put32(p + 4, bad_check ? 0x12345678u : frame ^ 0x54544652u);
}

/* Rank 0's side against a raw socket peer (rank 1): receive connections for tags 0 and 1 of
 * `slot`-byte slots, set up, their info blobs written to `ctl` for the peer. One socket per
 * connection (the receiver's setting, sent in its info blob, decides): the raw peer speaks
 * the one-socket wire format by hand. */
static bool raw_peer_receivers(const struct tt_transport *t, struct conns *c, int ctl,
                               uint64_t hash, size_t slot)
{
    setenv("NCCL_NSOCKS_PERTHREAD", "1", 1);
    tt_param_reload();
    memset(c, 0, sizeof *c);
    c->t = t;
    ctx_init(&c->ctx, 0, hash);
    struct tt_conn_info info[2];
    bool ok = true;
    for (int tag = 0; tag < 2 && ok; tag++) {
        conn_init(&c->recv[tag], t, 1, TT_CONN_RECV, slot, tag);
        conn_init(&c->send[tag], t, 1, TT_CONN_SEND, slot, tag);
        c->ntags = tag + 1;
        ok = CHECK(t->setup(&c->ctx, &c->recv[tag], &info[tag]) == ncclSuccess, "setup tag %d",
                   tag);
    }
    return ok && ctl_write(ctl, info, sizeof info);
}

/* Rank 1 is a raw socket peer: garbage, a stranger's hello, then the real hellos followed by a
 * frame longer than a slot (tag 0, after one good frame) and a frame with a bad check word
 * (tag 1). Rank 0 must match the right sockets and report ncclRemoteError without using the
 * bad data. */
static bool run_hostile(const struct tt_transport *t, int rank, int ctl, uint64_t hash,
                        pid_t peer_pid)
{
    enum { SLOT = 1000 };
    static const char good[] = "hostile-ok";
    if (rank == 1) {
        uint8_t info[2][TT_CONN_INFO_BYTES], buf[96], hello[40];
        if (!ctl_read(ctl, info, sizeof info, STEP_TIMEOUT_MS)) return false;
        uint64_t nonce0, nonce1;
        memcpy(&nonce0, info[0] + 8, 8);
        memcpy(&nonce1, info[1] + 8, 8);
        nonce0 = le64toh(nonce0);
        nonce1 = le64toh(nonce1);
        int fds[4];
        for (int i = 0; i < 4; i++)
            if ((fds[i] = raw_connect(info[0])) < 0) return false;
        memset(buf, 0xab, sizeof buf);
        bool ok = ctl_write(fds[0], buf, 40);
        make_hello(hello, nonce0 ^ 1, SLOT, 0);
        ok = ok && ctl_write(fds[1], hello, 40);
        /* The real hello for tag 0 in two pieces, a good frame, then an oversized one. */
        make_hello(hello, nonce0, SLOT, 0);
        ok = ok && ctl_write(fds[2], hello, 13);
        usleep(50000);
        ok = ok && ctl_write(fds[2], hello + 13, 27);
        make_frame_header(buf, sizeof good, 0, false);
        memcpy(buf + FRAME_HEADER, good, sizeof good);
        ok = ok && ctl_write(fds[2], buf, FRAME_HEADER + sizeof good);
        /* Tag 1: a frame whose check word is wrong. */
        make_hello(hello, nonce1, SLOT, 1);
        ok = ok && ctl_write(fds[3], hello, 40);
        make_frame_header(buf, 5, 0, true);
        ok = ok && ctl_write(fds[3], buf, FRAME_HEADER + 5);
        /* Tag 0's bad frame only after rank 0 has taken the good one, so the order is fixed. */
        uint8_t token;
        ok = ok && ctl_read(ctl, &token, 1, STEP_TIMEOUT_MS);
        make_frame_header(buf, SLOT + 1, 1, false);
        memset(buf + FRAME_HEADER, 0xcd, 56);
        ok = ok && ctl_write(fds[2], buf, FRAME_HEADER + 56);
        ok = ok && ctl_read(ctl, &token, 1, STEP_TIMEOUT_MS);
        for (int i = 0; i < 4; i++) close(fds[i]);
        return ok;
    }
    struct conns c;
    struct tt_conn_info none;
    memset(&none, 0, sizeof none);
    bool ok = raw_peer_receivers(t, &c, ctl, hash, SLOT);
    uint64_t deadline = tt_deadline_after_ms(STEP_TIMEOUT_MS);
    for (int tag = 0; tag < 2 && ok; tag++)
        ok = CHECK(t->connect(&c.ctx, &c.recv[tag], &none, deadline) == ncclSuccess,
                   "connect tag %d among hostile sockets", tag);
    ok = ok && recv_one(&c, &c.recv[0], (const uint8_t *)good, sizeof good);
    uint8_t token = 1;
    ok = ok && ctl_write(ctl, &token, 1);
    /* Tag 0's next frame and tag 1's first frame are bad: errors, never data. */
    for (int tag = 0; tag < 2 && ok; tag++) {
        struct stream s = {&c.recv[tag], 1, tag, UINT64_MAX, UINT64_MAX, 0, 0, false};
        ok = expect_remote_error(&c, &s, false, false);
        const void *data = &data;
        size_t bytes;
        struct tt_wait_hint hint;
        ok = ok && CHECK(t->recv_peek(&c.recv[tag], &data, &bytes, NULL, &hint) == ncclRemoteError &&
                             data == NULL,
                         "tag %d: a broken connection must keep failing", tag);
    }
    ok = ctl_write(ctl, &token, 1) && ok;
    conns_close(&c);
    return ok;
}

/* Strangers' complete hellos, more than the listener keeps pending (TCP_MAX_PENDING, 1024),
 * between the job's own sockets: rank 1 connects tag 1's real socket first, then 1100 sockets
 * that each send a well-formed hello (the magic, rank 1 to rank 0, tag 0) with a nonce of no
 * connection, then tag 0's real socket. Rank 0 connects tag 0 first, so tag 1's socket waits
 * in the pending list meanwhile, oldest of all: it must survive the flood (once a listener kept
 * every complete hello and, full, closed the oldest; tag 1 then never connected). */
static bool run_flood(const struct tt_transport *t, int rank, int ctl, uint64_t hash,
                      pid_t peer_pid)
{
    (void)peer_pid;
    enum { SLOT = 1000, STRANGERS = 1100, CONNECT_MS = 10000 };
    static const char good[2][8] = {"flood-0", "flood-1"};
    if (rank == 1) {
        uint8_t info[2][TT_CONN_INFO_BYTES], buf[64], hello[40];
        if (!ctl_read(ctl, info, sizeof info, STEP_TIMEOUT_MS)) return false;
        int real[2] = {-1, -1};
        bool ok = true;
        for (int k = 0; k < 2 + STRANGERS && ok; k++) {
            int tag = k == 0 ? 1 : 0;
            uint64_t nonce;
            memcpy(&nonce, info[k == 0 ? 1 : 0] + 8, 8);
            nonce = le64toh(nonce);
            if (k > 0 && k <= STRANGERS) nonce ^= (uint64_t)k * 0x9e3779b97f4a7c15ull;
            int fd = raw_connect(info[0]);
            make_hello(hello, nonce, SLOT, tag);
            ok = fd >= 0 && ctl_write(fd, hello, sizeof hello);
            if (k == 0 || k == STRANGERS + 1) real[tag] = fd;
            else if (fd >= 0) close(fd);
        }
        for (int tag = 0; tag < 2 && ok; tag++) {
            make_frame_header(buf, sizeof good[tag], 0, false);
            memcpy(buf + FRAME_HEADER, good[tag], sizeof good[tag]);
            ok = ctl_write(real[tag], buf, FRAME_HEADER + sizeof good[tag]);
        }
        uint8_t token;
        ok = ok && ctl_read(ctl, &token, 1, STEP_TIMEOUT_MS);
        for (int tag = 0; tag < 2; tag++)
            if (real[tag] >= 0) close(real[tag]);
        return ok;
    }
    struct conns c;
    struct tt_conn_info none;
    memset(&none, 0, sizeof none);
    bool ok = raw_peer_receivers(t, &c, ctl, hash, SLOT);
    for (int tag = 0; tag < 2 && ok; tag++)
        ok = CHECK(t->connect(&c.ctx, &c.recv[tag], &none, tt_deadline_after_ms(CONNECT_MS)) ==
                       ncclSuccess,
                   "tag %d did not connect among %d strangers' hellos: %s", tag, STRANGERS,
                   tt_error_last());
    for (int tag = 0; tag < 2 && ok; tag++)
        ok = recv_one(&c, &c.recv[tag], (const uint8_t *)good[tag], sizeof good[tag]);
    uint8_t token = 1;
    ok = ctl_write(ctl, &token, 1) && ok;
    conns_close(&c);
    return ok;
}

/* The data sockets' congestion control (TUTTI_SOCKET_CC): `auto` (the default) gives reno in
 * place of the kernel's bbr or cubic to a connection whose handshake took under 1 ms, as
 * loopback's does; `default` keeps the kernel's
 * (/proc/sys/net/ipv4/tcp_congestion_control). Both ranks check every socket of both
 * directions, with two sockets per connection. */
static bool socks_use(const struct tt_conn *conn, const char *want, const char *setting)
{
    const struct tcp_conn *tc = conn->priv;
    bool ok = CHECK(tc != NULL && tc->nsocks == 2, "%s: %d sockets, want 2", setting,
                    tc != NULL ? tc->nsocks : -1);
    for (int k = 0; ok && k < tc->nsocks; k++) {
        char got[32] = "";
        socklen_t len = sizeof got - 1;
        ok = CHECK(getsockopt(tc->socks[k].fd, IPPROTO_TCP, TCP_CONGESTION, got, &len) == 0,
                   "getsockopt TCP_CONGESTION: %s", strerror(errno)) &&
             CHECK(strcmp(got, want) == 0, "TUTTI_SOCKET_CC=%s: %s socket %d uses %s, want %s",
                   setting, conn->dir == TT_CONN_SEND ? "send" : "recv", k, got, want);
    }
    return ok;
}

static bool run_congestion(const struct tt_transport *t, int rank, int ctl, uint64_t hash,
                           pid_t peer_pid)
{
    char kernel[32] = "";
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
    bool known = f != NULL && fscanf(f, "%31s", kernel) == 1;
    if (f != NULL) fclose(f);
    setenv("NCCL_NSOCKS_PERTHREAD", "2", 1);
    bool ok = true;
    static const char *const settings[] = {"auto", "default"};
    for (int i = 0; i < 2 && ok; i++) {
        setenv("TUTTI_SOCKET_CC", settings[i], 1);
        tt_param_reload();
        /* auto replaces only the stock controls; another one the machine chose stays. */
        bool stock = !known || strcmp(kernel, "bbr") == 0 || strcmp(kernel, "cubic") == 0 ||
                     strcmp(kernel, "reno") == 0;
        const char *want = i == 0 && stock ? "reno" : kernel;
        struct conns c;
        ok = conns_open(&c, t, rank, ctl, hash + (uint64_t)i, 1, 1000);
        if (ok && (i == 0 || known))
            ok = socks_use(&c.send[0], want, settings[i]) &&
                 socks_use(&c.recv[0], want, settings[i]);
        conns_close(&c);
        /* Neither rank closes before the other checked its sockets. */
        uint8_t token = 1;
        ok = ctl_write(ctl, &token, 1) && ctl_read(ctl, &token, 1, STEP_TIMEOUT_MS) && ok;
    }
    unsetenv("TUTTI_SOCKET_CC");
    unsetenv("NCCL_NSOCKS_PERTHREAD");
    tt_param_reload();
    return ok;
}

/* ---- Runner. ---- */

static bool shm_close_unconnected(void)
{
    uint64_t hash;
    if (getrandom(&hash, sizeof hash, 0) != sizeof hash) return false;
    struct tt_transport_ctx ctx;
    ctx_init(&ctx, 0, hash);
    struct tt_conn conn;
    struct tt_conn_info info;
    conn_init(&conn, &tt_transport_shm, 1, TT_CONN_RECV, 1000, 0);
    bool ok = CHECK(tt_transport_shm.setup(&ctx, &conn, &info) == ncclSuccess, "shm setup") &&
              CHECK(shm_segments(hash) == 1, "setup created %d segments, want 1",
                    shm_segments(hash));
    tt_transport_shm.close(&conn);
    return CHECK(shm_segments(hash) == 0, "close before connect left %d segment(s)",
                 shm_segments(hash)) && ok;
}

/* Descriptors open in this process. */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Whether the scenario left as many descriptors open as it found (`before`). Shared memory and
 * TCP only: UCX's libraries may open descriptors of their own for the process's life. */
static bool fds_kept(const struct tt_transport *t, const struct scenario *sc, int before)
{
    if (t != &tt_transport_shm && t != &tt_transport_tcp) return true;
    int after = open_fds();
    return CHECK(after == before && before >= 0, "%d descriptors open after %s/%s, %d before",
                 after, t->name, sc->name, before);
}

static bool run_scenario(const struct scenario *sc, const struct tt_transport *t)
{
    int fds_before = open_fds();
    int sv[2];
    uint64_t hash;
    if (!CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair") ||
        !CHECK(getrandom(&hash, sizeof hash, 0) == sizeof hash, "getrandom"))
        return false;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        check_rank = 1;
        check_failures = 0;
        alarm(ALARM_S);
        int child_fds = open_fds();
        bool ok = sc->run(t, 1, sv[1], hash, 0);
        ok = fds_kept(t, sc, child_fds) && ok;
        _exit(ok && check_failures == 0 ? 0 : 1);
    }
    close(sv[1]);
    int before = check_failures;
    check_rank = 0;
    bool ok = CHECK(pid > 0, "fork: %s", strerror(errno)) && sc->run(t, 0, sv[0], hash, pid);
    close(sv[0]);
    if (pid > 0 && !sc->kills_child) {
        /* Reap the child within a deadline; kill it if it hangs. */
        uint64_t deadline = tt_deadline_after_ms(STEP_TIMEOUT_MS);
        int status = 0;
        pid_t got;
        while ((got = waitpid(pid, &status, WNOHANG)) == 0 && !tt_deadline_passed(deadline))
            usleep(1000);
        if (got == 0) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        }
        ok = CHECK(got == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                   "rank 1 of %s/%s: %s %d", t->name, sc->name,
                   got == 0 ? "hung, killed" : WIFEXITED(status) ? "exit status" : "signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status)) && ok;
    } else if (pid > 0 && !ok) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    ok = ok && check_failures == before;
    ok = fds_kept(t, sc, fds_before) && ok;
    int left = shm_segments(hash);
    ok = CHECK(left == 0, "%d segment(s) left in /dev/shm after %s/%s", left, t->name,
               sc->name) && ok;
    printf("%s %s/%s\n", ok ? "ok  " : "FAIL", t->name, sc->name);
    fflush(stdout);
    return ok;
}

/* `test_transport [--no-kill] [shm|tcp|ucx ...]`: the scenarios over the transports named
 * (default shm and tcp); ucx exits 77 (skipped) in a build without UCX. --no-kill leaves out the
 * scenarios that kill a peer, for UCX over shared memory, whose dead peers only the
 * communicator's deadline sees (docs/ucx.md). */
int main(int argc, char **argv)
{
    alarm(ALARM_S);
    static const struct scenario scenarios[] = {
        {"stream-1000", run_stream_small, false, false},
        {"stream-64k", run_stream_large, false, false},
        {"pingpong", run_pingpong, false, false},
        {"backpressure", run_backpressure, false, false},
        {"hostile", run_hostile, true, false},
        {"flood", run_flood, true, false},
        {"congestion", run_congestion, true, false},
        {"fail-notify", run_fail_notify, true, false},
        {"stuck-sender", run_stuck_sender, true, false},
        {"stuck-sender-shutdown", run_stuck_sender_shutdown, true, false},
        {"kill-sender", run_kill_sender, false, true},
        {"kill-receiver", run_kill_receiver, false, true},
    };
    const struct tt_transport *transports[8] = {&tt_transport_shm, &tt_transport_tcp};
    size_t ntransports = 2;
    bool kills = true;
    if (argc > 1 && strcmp(argv[1], "--no-kill") == 0) {
        kills = false;
        argc--;
        argv++;
    }
    if (argc > 1) {
        ntransports = 0;
        for (int i = 1; i < argc && ntransports < 8; i++) {
            if (strcmp(argv[i], "shm") == 0) transports[ntransports++] = &tt_transport_shm;
            else if (strcmp(argv[i], "tcp") == 0) transports[ntransports++] = &tt_transport_tcp;
#ifdef TUTTI_HAVE_UCX
            else if (strcmp(argv[i], "ucx") == 0) transports[ntransports++] = &tt_transport_ucx;
#else
            else if (strcmp(argv[i], "ucx") == 0) {
                printf("skipped: this build has no UCX transport (libucx-dev)\n");
                return 77;
            }
#endif
            else {
                fprintf(stderr, "usage: test_transport [--no-kill] [shm|tcp|ucx ...]\n");
                return 2;
            }
        }
    }
    check_rank = 0;
    bool ok = true;
    for (size_t ti = 0; ti < ntransports; ti++) {
        if (transports[ti] == &tt_transport_shm) {
            ok = shm_close_unconnected() && ok;
            printf("%s shm/close-unconnected\n", ok ? "ok  " : "FAIL");
        }
        for (size_t si = 0; si < sizeof scenarios / sizeof scenarios[0]; si++) {
            /* The hostile peer speaks TCP's wire format; shared memory's peers are seen dying
             * by the local team, not by the transport. */
            if (scenarios[si].tcp_only && transports[ti] != &tt_transport_tcp) continue;
            if (scenarios[si].kills_child && (!kills || transports[ti] == &tt_transport_shm))
                continue;
            ok = run_scenario(&scenarios[si], transports[ti]) && ok;
        }
        if (transports[ti] != &tt_transport_tcp) continue;
        /* Again with paired connections, whose sockets carry both directions (the hostile
         * peer's and the congestion check's sockets are the unpaired kind). */
        paired = true;
        for (size_t si = 0; si < sizeof scenarios / sizeof scenarios[0]; si++) {
            const struct scenario *sc = &scenarios[si];
            if (sc->run == run_hostile || sc->run == run_flood || sc->run == run_congestion ||
                (sc->kills_child && !kills))
                continue;
            printf("paired: ");
            ok = run_scenario(sc, transports[ti]) && ok;
        }
        /* And with two data sockets, frames striped both ways. */
        setenv("NCCL_NSOCKS_PERTHREAD", "2", 1);
        tt_param_reload();
        for (size_t si = 0; si < sizeof scenarios / sizeof scenarios[0]; si++) {
            const struct scenario *sc = &scenarios[si];
            if (sc->run != run_stream_large && sc->run != run_fail_notify &&
                sc->run != run_stuck_sender && sc->run != run_stuck_sender_shutdown)
                continue;
            printf("paired, 2 sockets: ");
            ok = run_scenario(sc, transports[ti]) && ok;
        }
        unsetenv("NCCL_NSOCKS_PERTHREAD");
        tt_param_reload();
        paired = false;
    }
    printf("%s\n", ok ? "all transport tests passed" : "transport tests FAILED");
    return ok ? 0 : 1;
}
