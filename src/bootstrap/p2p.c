/* The bootstrap's point-to-point messages between any two ranks, matched by (peer, tag):
 * each pair's first message opens a connection through the peer's listener (rank.h's
 * tt_bs_open_peer), which is kept for the next ones; a message that arrives before it is asked
 * for is stashed in a list. The sealed forms encrypt under a key derived from the job's secret,
 * its session, the tag and both ranks; the watched forms ask a caller's function whether to
 * stop waiting. */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/proto.h"
#include "bootstrap/rank.h"
#include "util/err.h"
#include "util/log.h"
#include "util/sock.h"
#include "util/time.h"

static ncclResult_t check_peer(const struct tt_bootstrap *bs, int peer, const char *what)
{
    if (peer < 0 || peer >= bs->nranks)
        return TT_ERROR(ncclInvalidArgument, "bootstrap %s: peer %d is not a rank of 0..%d",
                        what, peer, bs->nranks - 1);
    return ncclSuccess;
}

/* Appends a message to the stash, taking ownership of `data` (malloc'd, `bytes` long) even on
 * failure. Appending at the tail keeps messages with equal (peer, tag) in sending order. */
static ncclResult_t stash_push(struct tt_bootstrap *bs, int from, int tag, uint8_t *data,
                               size_t bytes)
{
    struct stashed *s = NULL;
    ncclResult_t res = TT_CALLOC(&s, 1);
    if (res != ncclSuccess) {
        free(data);
        return res;
    }
    s->from = from;
    s->tag = tag;
    s->bytes = bytes;
    s->data = data;
    struct stashed **tail = &bs->stash;
    while (*tail != NULL) tail = &(*tail)->next;
    *tail = s;
    return ncclSuccess;
}

/* The connection to `peer` for sending, opened (and introduced by a hello) on first use. */
static ncclResult_t open_p2p(struct tt_bootstrap *bs, int peer, uint64_t deadline_ns, int *fd_out)
{
    int fd = bs->p2p_out_fd[peer];
    if (fd < 0) {
        TT_TRY(tt_bs_open_peer(bs, &bs->peer_addrs[peer], TT_BS_CONN_P2P, peer, deadline_ns, &fd));
        bs->p2p_out_fd[peer] = fd;
    }
    *fd_out = fd;
    return ncclSuccess;
}

ncclResult_t tt_bootstrap_send(struct tt_bootstrap *bs, int peer, int tag, const void *data,
                               size_t bytes)
{
    TT_TRY(check_peer(bs, peer, "send"));
    uint64_t deadline_ns = tt_deadline_after_ms(bs->timeout_ms);
    if (peer == bs->rank) {
        /* A message to oneself goes straight to the stash. */
        uint8_t *copy = NULL;
        TT_TRY(TT_CALLOC(&copy, bytes));
        if (bytes > 0) memcpy(copy, data, bytes);
        return stash_push(bs, peer, tag, copy, bytes);
    }
    int fd = -1;
    TT_TRY(open_p2p(bs, peer, deadline_ns, &fd));
    struct tt_bs_p2p_header h = {.magic = bs->magic, .from_rank = bs->rank, .tag = tag,
                                 .bytes = bytes};
    TT_TRY(tt_sock_send_all(fd, &h, sizeof h, deadline_ns, bs->abort));
    TT_TRY(tt_sock_send_all(fd, data, bytes, deadline_ns, bs->abort));
    return ncclSuccess;
}

/* Takes the oldest stashed message from `peer` with `tag` into data; *found says if there
 * was one. */
static ncclResult_t stash_take(struct tt_bootstrap *bs, int peer, int tag, void *data,
                               size_t bytes, bool *found)
{
    *found = false;
    for (struct stashed **p = &bs->stash; *p != NULL; p = &(*p)->next) {
        struct stashed *s = *p;
        if (s->from != peer || s->tag != tag) continue;
        if (s->bytes != bytes)
            return TT_ERROR(ncclInvalidUsage, "bootstrap recv from rank %d tag %d: the message "
                            "has %zu bytes but %zu were expected", peer, tag, s->bytes, bytes);
        if (bytes > 0) memcpy(data, s->data, bytes);
        *p = s->next;
        free(s->data);
        free(s);
        *found = true;
        return ncclSuccess;
    }
    return ncclSuccess;
}

ncclResult_t tt_bootstrap_recv(struct tt_bootstrap *bs, int peer, int tag, void *data,
                               size_t bytes)
{
    return tt_bootstrap_recv_watched(bs, peer, tag, data, bytes, NULL, NULL);
}

#define SEAL_EXTRA (crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES)

/* The key of sealed messages from rank `from` to rank `to` with `tag`: a keyed BLAKE2b of the
 * session, the tag and both ranks under the communicator's secret. */
static void seal_key(const struct tt_bootstrap *bs, int from, int to, int tag,
                     uint8_t key[crypto_secretbox_KEYBYTES])
{
    uint8_t what[16 + TT_BS_NONCE_BYTES];
    memcpy(what, "tutti seal", 10);
    memset(what + 10, 0, 6);
    uint32_t fields[3] = {htole32((uint32_t)from), htole32((uint32_t)to), htole32((uint32_t)tag)};
    crypto_generichash_state st;
    crypto_generichash_init(&st, bs->secret, sizeof bs->secret, crypto_secretbox_KEYBYTES);
    crypto_generichash_update(&st, what, 16);
    crypto_generichash_update(&st, bs->session, sizeof bs->session);
    crypto_generichash_update(&st, (const uint8_t *)fields, sizeof fields);
    crypto_generichash_final(&st, key, crypto_secretbox_KEYBYTES);
}

ncclResult_t tt_bootstrap_send_sealed(struct tt_bootstrap *bs, int peer, int tag,
                                      const void *data, size_t bytes)
{
    if (bytes > TT_BOOTSTRAP_SEALED_MAX)
        return TT_ERROR(ncclInternalError, "bootstrap: a sealed message of %zu bytes (at most "
                                           "%d)", bytes, TT_BOOTSTRAP_SEALED_MAX);
    uint8_t box[TT_BOOTSTRAP_SEALED_MAX + SEAL_EXTRA];
    uint8_t key[crypto_secretbox_KEYBYTES];
    randombytes_buf(box, crypto_secretbox_NONCEBYTES);
    seal_key(bs, bs->rank, peer, tag, key);
    crypto_secretbox_easy(box + crypto_secretbox_NONCEBYTES, data, bytes, box, key);
    sodium_memzero(key, sizeof key);
    ncclResult_t res = tt_bootstrap_send(bs, peer, tag, box, bytes + SEAL_EXTRA);
    sodium_memzero(box, sizeof box);
    return res;
}

ncclResult_t tt_bootstrap_recv_sealed(struct tt_bootstrap *bs, int peer, int tag, void *data,
                                      size_t bytes)
{
    return tt_bootstrap_recv_sealed_watched(bs, peer, tag, data, bytes, NULL, NULL);
}

ncclResult_t tt_bootstrap_recv_sealed_watched(struct tt_bootstrap *bs, int peer, int tag,
                                              void *data, size_t bytes,
                                              tt_bootstrap_watch_fn watch, void *arg)
{
    if (bytes > TT_BOOTSTRAP_SEALED_MAX)
        return TT_ERROR(ncclInternalError, "bootstrap: a sealed message of %zu bytes (at most "
                                           "%d)", bytes, TT_BOOTSTRAP_SEALED_MAX);
    uint8_t box[TT_BOOTSTRAP_SEALED_MAX + SEAL_EXTRA];
    TT_TRY(tt_bootstrap_recv_watched(bs, peer, tag, box, bytes + SEAL_EXTRA, watch, arg));
    uint8_t key[crypto_secretbox_KEYBYTES];
    seal_key(bs, peer, bs->rank, tag, key);
    int bad = crypto_secretbox_open_easy(data, box + crypto_secretbox_NONCEBYTES,
                                         bytes + crypto_secretbox_MACBYTES, box, key);
    sodium_memzero(key, sizeof key);
    if (bad != 0)
        return TT_ERROR(ncclRemoteError, "bootstrap rank %d: a sealed message from rank %d "
                                         "(tag %d) does not open: not sealed under this "
                                         "communicator's secret", bs->rank, peer, tag);
    return ncclSuccess;
}

/* Waits until `fd` has something to read (or its peer closed it), asking `watch` between
 * slices of TT_BOOTSTRAP_WATCH_MS; the deadline and the abort flag end the wait as in every
 * socket wait, and the read that follows reports them. */
static ncclResult_t wait_readable(struct tt_bootstrap *bs, int fd, uint64_t deadline_ns,
                                  tt_bootstrap_watch_fn watch, void *arg)
{
    for (;;) {
        TT_TRY(watch(arg));
        if (tt_deadline_passed(deadline_ns) || (bs->abort != NULL && atomic_load(bs->abort)))
            return ncclSuccess;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, tt_deadline_left_ms(deadline_ns, TT_BOOTSTRAP_WATCH_MS)) != 0)
            return ncclSuccess; /* readable, closed, or an error the read will report */
    }
}

/* tt_sock_recv_all on rank `peer`'s connection; a failure names the rank, which the socket's
 * own message (an address) does not. */
static ncclResult_t recv_from(struct tt_bootstrap *bs, int peer, int fd, void *data, size_t bytes,
                             uint64_t deadline_ns)
{
    ncclResult_t res = tt_sock_recv_all(fd, data, bytes, deadline_ns, bs->abort);
    if (res == ncclSuccess) return ncclSuccess;
    char why[TT_REASON_BYTES];
    snprintf(why, sizeof why, "%s", tt_error_last());
    return TT_ERROR(res, "bootstrap rank %d: receiving from rank %d: %s", bs->rank, peer, why);
}

ncclResult_t tt_bootstrap_recv_watched(struct tt_bootstrap *bs, int peer, int tag, void *data,
                                       size_t bytes, tt_bootstrap_watch_fn watch, void *arg)
{
    TT_TRY(check_peer(bs, peer, "recv"));
    uint64_t deadline_ns = tt_deadline_after_ms(bs->timeout_ms);
    /* Serve from the stash when possible; else read the next message on the peer's p2p
     * connection (accepting connections until it arrives), keeping any message with another
     * tag in the stash, until the one asked for comes. */
    for (;;) {
        bool found = false;
        TT_TRY(stash_take(bs, peer, tag, data, bytes, &found));
        if (found) return ncclSuccess;
        if (peer == bs->rank)
            return TT_ERROR(ncclInvalidUsage, "bootstrap rank %d: recv from itself with tag %d "
                            "but no such message was sent", peer, tag);
        if (bs->p2p_in_fd[peer] < 0) {
            char what[64];
            snprintf(what, sizeof what, "a message from rank %d with tag %d", peer, tag);
            TT_TRY(tt_bs_take_peer(bs, TT_BS_CONN_P2P, peer, deadline_ns, what, watch, arg,
                             &bs->p2p_in_fd[peer]));
        }
        int fd = bs->p2p_in_fd[peer];
        if (watch != NULL) TT_TRY(wait_readable(bs, fd, deadline_ns, watch, arg));
        struct tt_bs_p2p_header h;
        TT_TRY(recv_from(bs, peer, fd, &h, sizeof h, deadline_ns));
        if (h.magic != bs->magic || h.from_rank != peer || h.bytes > MAX_P2P_BYTES)
            return TT_ERROR(ncclRemoteError, "bootstrap rank %d: bad message header from rank "
                            "%d (rank field %d, %llu bytes)", bs->rank, peer, (int)h.from_rank,
                            (unsigned long long)h.bytes);
        if (h.tag == tag && h.bytes == bytes) {
            TT_TRY(recv_from(bs, peer, fd, data, bytes, deadline_ns));
            return ncclSuccess;
        }
        /* Another tag, or this tag with a size that disagrees (stash_take reports that on the
         * next turn): keep the message, so the stream stays in step. */
        uint8_t *early = NULL;
        TT_TRY(TT_CALLOC(&early, (size_t)h.bytes));
        ncclResult_t res = recv_from(bs, peer, fd, early, (size_t)h.bytes, deadline_ns);
        if (res != ncclSuccess) {
            free(early);
            TT_TRY(res);
        }
        TT_TRY(stash_push(bs, peer, h.tag, early, (size_t)h.bytes));
    }
}
