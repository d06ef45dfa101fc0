/* Shared-memory transport: the connection FIFO lives in a POSIX shared-memory segment that the
 * receiver creates and the sender maps. The header holds `tail` (published by the sender),
 * `head` (credit returned by the receiver) and a sleeper count for each, on separate cache
 * lines; then TT_CONN_SLOTS slots, each a length word and slot_bytes of payload, 64-byte
 * aligned. Invariant: head <= tail <= head + TT_CONN_SLOTS, and the slot of sequence number s
 * is s % TT_CONN_SLOTS. The segment's name is removed as soon as the sender has attached (by
 * the sender, then or at the latest when the receiver sees it attached), so nothing is left in
 * /dev/shm if a process dies later; a receiver that dies before the attach leaves its name to
 * the sender, which removes it when it attaches, or when it closes its side unattached and the
 * receiver is known dead. The peer shares this memory, so every value read
 * from it (tail, lengths) is range-checked before use. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/transport.h"
#include "util/param.h"
#include "util/err.h"
#include "util/log.h"
#include "util/time.h"
#include "util/wait.h"

#define SHM_MAGIC 0x74757474697368ull /* "tuttish" */
#define SHM_ALIGN 64
#define SHM_NAME_BYTES 64

/* The segment's header. Fields written by one side only are on cache lines of their own. */
struct shm_header {
    alignas(SHM_ALIGN) _Atomic uint64_t tail;
    _Atomic uint32_t tail_sleepers;
    alignas(SHM_ALIGN) _Atomic uint64_t head;
    _Atomic uint32_t head_sleepers;
    alignas(SHM_ALIGN) _Atomic uint64_t sender_attached;
    _Atomic uint32_t attach_sleepers;
    uint64_t magic;
    uint64_t nonce;
    uint64_t slot_bytes;
};

/* Each slot: the payload length and the operation's descriptor, then the payload on the next
 * cache line. */
struct shm_slot_header {
    alignas(SHM_ALIGN) uint64_t bytes;
    struct tt_op_desc desc;
};

/* What the receiver tells the sender in the info blob. */
struct shm_info {
    uint64_t magic;
    uint64_t nonce;
    uint64_t slot_bytes;
    uint64_t segment_bytes;
    char name[SHM_NAME_BYTES];
};
_Static_assert(sizeof(struct shm_info) <= TT_CONN_INFO_BYTES, "shm info exceeds the blob");

struct shm_conn {
    struct shm_header *hdr;
    uint8_t *slots;
    size_t slot_stride;
    size_t segment_bytes;
    uint64_t nonce;
    /* This side's copy of the counter it alone advances (tail for the sender, head for the
     * receiver), so the data path never reads back its own shared word. */
    uint64_t next;
    /* The peer's counter as last read (head for the sender, tail for the receiver): the
     * sender reads head again only when its credit runs out, the receiver tail only when it
     * has consumed what it saw, so a burst of messages costs one cache-line transfer each way
     * instead of one per message. */
    uint64_t peer_seen;
    /* Receiver: the head last published. Credit goes back every TT_CONN_SLOTS / 2 slots, not
     * every slot: a sender out of credit has TT_CONN_SLOTS slots outstanding, and releasing
     * them all crosses a multiple of TT_CONN_SLOTS / 2, so it is never left waiting. */
    uint64_t published;
    bool unlinked; /* the name is removed, or is not this side's to remove */
    char name[SHM_NAME_BYTES];
};

/* The name of the segment that carries `sender`'s messages to `receiver`. Both sides compute
 * it: the receiver creates it, the sender checks the description against it and removes it. */
static void segment_name(char name[SHM_NAME_BYTES], uint64_t comm_hash, int sender, int receiver,
                         int tag)
{
    snprintf(name, SHM_NAME_BYTES, "/tutti-%016" PRIx64 "-%d-%d-%d", comm_hash, sender,
             receiver, tag);
}

static size_t slot_stride_of(size_t slot_bytes)
{
    size_t raw = sizeof(struct shm_slot_header) + slot_bytes;
    return (raw + SHM_ALIGN - 1) / SHM_ALIGN * SHM_ALIGN;
}

static size_t segment_bytes_of(size_t slot_bytes)
{
    return sizeof(struct shm_header) + TT_CONN_SLOTS * slot_stride_of(slot_bytes);
}

static struct shm_slot_header *slot_at(struct shm_conn *sc, uint64_t seq)
{
    return (struct shm_slot_header *)(sc->slots + (seq % TT_CONN_SLOTS) * sc->slot_stride);
}

static ncclResult_t map_segment(struct shm_conn *sc, int fd, const struct tt_conn *conn)
{
    void *p = mmap(NULL, sc->segment_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return TT_ERROR(ncclSystemError, "shm: mmap of %s (%zu bytes, peer rank %d) failed: %s",
                        sc->name, sc->segment_bytes, conn->peer, strerror(errno));
    sc->hdr = p;
    sc->slots = (uint8_t *)p + sizeof(struct shm_header);
    return ncclSuccess;
}

/* Receiver: create, size and initialise the segment; sender: only allocate its state. */
static ncclResult_t shm_setup(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                              struct tt_conn_info *info)
{
    ncclResult_t res = ncclSuccess;
    struct shm_conn *sc = NULL;
    int fd = -1;
    TT_TRY(TT_CALLOC(&sc, 1));
    conn->priv = sc;
    memset(info, 0, sizeof *info);
    if (conn->dir == TT_CONN_SEND) {
        /* The name the receiver's description must give. A sender closed before it attaches
         * leaves the name alone: after a failed exchange the receiver may already have made
         * the next attempt's segment under the same name. */
        segment_name(sc->name, ctx->comm_hash, ctx->rank, conn->peer, conn->tag);
        sc->unlinked = true;
        return ncclSuccess;
    }

    sc->slot_stride = slot_stride_of(conn->slot_bytes);
    sc->segment_bytes = segment_bytes_of(conn->slot_bytes);
    sc->unlinked = true; /* nothing to unlink until the segment exists */
    if (getrandom(&sc->nonce, sizeof sc->nonce, 0) != (ssize_t)sizeof sc->nonce) {
        res = TT_ERROR(ncclSystemError, "shm: getrandom failed: %s", strerror(errno));
        goto out;
    }
    segment_name(sc->name, ctx->comm_hash, conn->peer, ctx->rank, conn->tag);
    fd = shm_open(sc->name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        res = TT_ERROR(ncclSystemError,
                       "shm: cannot create /dev/shm%s for peer rank %d: %s (set "
                       "NCCL_SHM_DISABLE=1 to use TCP instead)",
                       sc->name, conn->peer, tt_strerror(errno));
        goto out;
    }
    sc->unlinked = false;
    /* Reserve the pages now: a full /dev/shm then fails here with an error instead of
     * raising SIGBUS at the first write into a hole. */
    int err = posix_fallocate(fd, 0, (off_t)sc->segment_bytes);
    if (err != 0) {
        res = TT_ERROR(ncclSystemError,
                       "shm: cannot allocate %zu bytes in /dev/shm for peer rank %d: %s (set "
                       "NCCL_SHM_DISABLE=1 to use TCP, or lower NCCL_BUFFSIZE)",
                       sc->segment_bytes, conn->peer, strerror(err));
        goto out;
    }
    TT_TRY_GOTO(map_segment(sc, fd, conn), res, out);
    sc->hdr->magic = SHM_MAGIC;
    sc->hdr->nonce = sc->nonce;
    sc->hdr->slot_bytes = conn->slot_bytes;

    struct shm_info si = {.magic = SHM_MAGIC,
                          .nonce = sc->nonce,
                          .slot_bytes = conn->slot_bytes,
                          .segment_bytes = sc->segment_bytes};
    memcpy(si.name, sc->name, sizeof si.name);
    memcpy(info->bytes, &si, sizeof si);
out:
    if (fd >= 0) close(fd);
    return res;
}

/* Sender: map the receiver's segment after checking it is the one the blob describes. */
static ncclResult_t connect_send(struct tt_conn *conn, struct shm_conn *sc,
                                 const struct shm_info *si)
{
    ncclResult_t res = ncclSuccess;
    int fd = -1;
    if (si->magic != SHM_MAGIC || si->slot_bytes != conn->slot_bytes ||
        si->segment_bytes != segment_bytes_of(conn->slot_bytes))
        return TT_ERROR(ncclInvalidUsage,
                        "shm: connection info from peer rank %d does not match this side "
                        "(slot bytes %" PRIu64 " there, %zu here; NCCL_BUFFSIZE must be equal "
                        "on every rank)",
                        conn->peer, si->slot_bytes, conn->slot_bytes);
    if (memchr(si->name, '\0', sizeof si->name) == NULL || strcmp(si->name, sc->name) != 0)
        return TT_ERROR(ncclRemoteError, "shm: peer rank %d described a segment of another "
                        "name than %s", conn->peer, sc->name);
    sc->slot_stride = slot_stride_of(conn->slot_bytes);
    sc->segment_bytes = si->segment_bytes;

    fd = shm_open(sc->name, O_RDWR, 0);
    if (fd < 0)
        return TT_ERROR(ncclSystemError, "shm: cannot open /dev/shm%s of peer rank %d: %s",
                        sc->name, conn->peer, tt_strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        res = TT_ERROR(ncclSystemError, "shm: fstat of /dev/shm%s failed: %s", sc->name,
                       strerror(errno));
        goto out;
    }
    if ((uint64_t)st.st_size != sc->segment_bytes) {
        res = TT_ERROR(ncclRemoteError,
                       "shm: segment /dev/shm%s of peer rank %d has the wrong size (%lld bytes, "
                       "want %zu)",
                       sc->name, conn->peer, (long long)st.st_size, sc->segment_bytes);
        goto out;
    }
    TT_TRY_GOTO(map_segment(sc, fd, conn), res, out);
    if (sc->hdr->magic != SHM_MAGIC || sc->hdr->nonce != si->nonce ||
        sc->hdr->slot_bytes != conn->slot_bytes) {
        res = TT_ERROR(ncclRemoteError,
                       "shm: segment /dev/shm%s is not the one peer rank %d created (stale "
                       "segment or foreign process)",
                       sc->name, conn->peer);
        goto out;
    }
    /* Mapped: the name has served. Removed before the attach is visible, so the receiver's
     * own removal, which waits for the attach, always finds it gone. */
    if (shm_unlink(sc->name) != 0 && errno != ENOENT)
        TT_WARN("shm: shm_unlink(%s) failed: %s", sc->name, strerror(errno));
    sc->unlinked = true;
    sc->next = atomic_load(&sc->hdr->tail);
    sc->peer_seen = atomic_load(&sc->hdr->head);
    atomic_store(&sc->hdr->sender_attached, 1);
    tt_wait_wake(&sc->hdr->sender_attached, &sc->hdr->attach_sleepers);
out:
    close(fd);
    return res;
}

/* Receiver: wait until the sender has mapped the segment, then remove its name. */
static ncclResult_t connect_recv(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                                 struct shm_conn *sc, uint64_t deadline_ns)
{
    struct tt_backoff backoff;
    tt_backoff_init(&backoff);
    struct tt_wait_hint hint;
    tt_wait_hint_clear(&hint);
    hint.word = &sc->hdr->sender_attached;
    hint.seen = 0;
    hint.sleepers = &sc->hdr->attach_sleepers;
    uint64_t checked_ns = tt_time_ns();
    while (atomic_load(&sc->hdr->sender_attached) == 0) {
        /* Aborted or revoked, or the peer gone: a peer that died, or failed elsewhere, before
         * it attached never will. */
        ncclResult_t stop = tt_transport_connect_check(ctx, conn->peer, &checked_ns);
        if (stop != ncclSuccess) return stop;
        if (tt_deadline_passed(deadline_ns))
            return TT_ERROR(ncclRemoteError,
                            "shm: peer rank %d did not attach to /dev/shm%s before the "
                            "deadline (TUTTI_TIMEOUT_MS)",
                            conn->peer, sc->name);
        tt_backoff_pause(&backoff, &hint);
    }
    /* The sender removed the name before it attached; this is for one that did not. */
    if (shm_unlink(sc->name) != 0 && errno != ENOENT)
        TT_WARN("shm: shm_unlink(%s) failed: %s", sc->name, strerror(errno));
    sc->unlinked = true;
    sc->next = sc->published = atomic_load(&sc->hdr->head);
    sc->peer_seen = atomic_load(&sc->hdr->tail);
    TT_INFO(TT_SUB_SHM, "shm: connected from peer rank %d tag %d (%zu-byte slots)", conn->peer,
            conn->tag, conn->slot_bytes);
    return ncclSuccess;
}

static ncclResult_t shm_connect(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                                const struct tt_conn_info *remote, uint64_t deadline_ns)
{
    struct shm_conn *sc = conn->priv;
    if (conn->dir == TT_CONN_RECV) return connect_recv(ctx, conn, sc, deadline_ns);
    struct shm_info si;
    memcpy(&si, remote->bytes, sizeof si);
    TT_TRY(connect_send(conn, sc, &si));
    TT_INFO(TT_SUB_SHM, "shm: connected to peer rank %d tag %d (%zu-byte slots)", conn->peer,
            conn->tag, conn->slot_bytes);
    return ncclSuccess;
}

static void shm_close(struct tt_conn *conn)
{
    struct shm_conn *sc = conn->priv;
    if (sc == NULL) return;
    if (sc->hdr != NULL) munmap(sc->hdr, sc->segment_bytes);
    if (!sc->unlinked) shm_unlink(sc->name);
    /* A sender that never attached, whose receiver died: the receiver's segment is nobody's
     * now, and a dead receiver makes no next attempt under its name. */
    if (conn->dir == TT_CONN_SEND && sc->hdr == NULL && conn->peer_died) shm_unlink(sc->name);
    free(sc);
    conn->priv = NULL;
}

static ncclResult_t shm_send_acquire(struct tt_conn *conn, void **slot,
                                     struct tt_wait_hint *hint)
{
    struct shm_conn *sc = conn->priv;
    if (sc->next - sc->peer_seen >= TT_CONN_SLOTS)
        sc->peer_seen = atomic_load_explicit(&sc->hdr->head, memory_order_acquire);
    if (sc->next - sc->peer_seen < TT_CONN_SLOTS) {
        *slot = slot_at(sc, sc->next) + 1;
        return ncclSuccess;
    }
    *slot = NULL;
    tt_wait_hint_clear(hint);
    hint->word = &sc->hdr->head;
    hint->seen = sc->peer_seen;
    hint->sleepers = &sc->hdr->head_sleepers;
    return ncclSuccess;
}

static ncclResult_t shm_send_commit(struct tt_conn *conn, size_t bytes,
                                    const struct tt_op_desc *desc)
{
    struct shm_conn *sc = conn->priv;
    if (bytes > conn->slot_bytes)
        return TT_ERROR(ncclInternalError, "shm: commit of %zu bytes into a %zu-byte slot",
                        bytes, conn->slot_bytes);
    struct shm_slot_header *slot = slot_at(sc, sc->next);
    slot->bytes = bytes;
    if (desc != NULL) slot->desc = *desc;
    else memset(&slot->desc, 0, sizeof slot->desc);
    sc->next++;
    /* Sequentially consistent, so that this store and the sleeper check in tt_wait_wake
     * cannot be reordered against the receiver's announce-then-check (see wait.c). */
    atomic_store(&sc->hdr->tail, sc->next);
    tt_wait_wake(&sc->hdr->tail, &sc->hdr->tail_sleepers);
    return ncclSuccess;
}

static bool shm_send_idle(struct tt_conn *conn) { return true; }

static ncclResult_t shm_recv_peek(struct tt_conn *conn, const void **data, size_t *bytes,
                                  struct tt_op_desc *desc, struct tt_wait_hint *hint)
{
    struct shm_conn *sc = conn->priv;
    /* A tail read before covers every slot below it (its acquire load saw their contents). */
    uint64_t tail = sc->peer_seen;
    if (tail == sc->next)
        sc->peer_seen = tail = atomic_load_explicit(&sc->hdr->tail, memory_order_acquire);
    if (tail == sc->next) {
        *data = NULL;
        *bytes = 0;
        tt_wait_hint_clear(hint);
        hint->word = &sc->hdr->tail;
        hint->seen = tail;
        hint->sleepers = &sc->hdr->tail_sleepers;
        return ncclSuccess;
    }
    /* The sender may publish at most TT_CONN_SLOTS slots past our head, and never go back. */
    if (tail - sc->next > TT_CONN_SLOTS)
        return TT_ERROR(ncclRemoteError,
                        "shm: peer rank %d published tail %" PRIu64 " with head at %" PRIu64
                        " (corrupted segment)",
                        conn->peer, tail, sc->next);
    struct shm_slot_header *s = slot_at(sc, sc->next);
    /* Read the length once: the peer could change it under us. */
    uint64_t len = *(volatile uint64_t *)&s->bytes;
    if (len > conn->slot_bytes)
        return TT_ERROR(ncclRemoteError,
                        "shm: peer rank %d sent a %" PRIu64 "-byte message in a %zu-byte slot "
                        "(corrupted segment)",
                        conn->peer, len, conn->slot_bytes);
    *data = s + 1;
    *bytes = (size_t)len;
    if (desc != NULL) memcpy(desc, (const void *)&s->desc, sizeof *desc);
    return ncclSuccess;
}

static ncclResult_t shm_recv_release(struct tt_conn *conn)
{
    struct shm_conn *sc = conn->priv;
    sc->next++;
    if (sc->next - sc->published < TT_CONN_SLOTS / 2) return ncclSuccess;
    sc->published = sc->next;
    atomic_store(&sc->hdr->head, sc->next);
    tt_wait_wake(&sc->hdr->head, &sc->hdr->head_sleepers);
    return ncclSuccess;
}

/* Peers of this host, unless NCCL_SHM_DISABLE or NCCL_P2P_DISABLE forbids it. */
static bool shm_can_reach(const struct tt_reach *r)
{
    return r->same_host && tt_param_shm_disable() == 0 && tt_param_p2p_disable() == 0;
}

const struct tt_transport tt_transport_shm = {
    .name = "shm",
    .link = TT_LINK_SHM,
    .can_reach = shm_can_reach,
    .setup = shm_setup,
    .connect = shm_connect,
    .close = shm_close,
    .send_acquire = shm_send_acquire,
    .send_commit = shm_send_commit,
    .send_idle = shm_send_idle,
    .recv_peek = shm_recv_peek,
    .recv_release = shm_recv_release,
    .progress = NULL,
    .ctx_fini = NULL,
};
