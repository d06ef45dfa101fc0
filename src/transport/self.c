/* The self transport: a connection from a rank to itself (ncclSend/ncclRecv with peer == own
 * rank). Both ends live in one process, so the FIFO is plain heap memory owned by the receiving
 * side; the info blob carries its address. The send side may be driven by another thread than
 * the receive side (a host stream and a blocking call), hence the atomics. */
#include <stdlib.h>
#include <string.h>

#include "transport/transport.h"
#include "util/err.h"

struct self_fifo {
    _Atomic uint64_t tail; /* slots committed by the sender */
    _Atomic uint64_t head; /* slots released by the receiver */
    _Atomic int refs;      /* both ends hold a reference; the last close frees */
    size_t slot_bytes;
    size_t lengths[TT_CONN_SLOTS];
    struct tt_op_desc descs[TT_CONN_SLOTS];
    unsigned char *slots;
};

static void fifo_unref(struct self_fifo *fifo)
{
    if (fifo != NULL && atomic_fetch_sub(&fifo->refs, 1) == 1) {
        free(fifo->slots);
        free(fifo);
    }
}

static ncclResult_t self_setup(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                               struct tt_conn_info *info)
{
    memset(info, 0, sizeof *info);
    if (conn->dir == TT_CONN_SEND) return ncclSuccess;
    struct self_fifo *fifo = NULL;
    TT_TRY(TT_CALLOC(&fifo, 1));
    fifo->slot_bytes = conn->slot_bytes;
    size_t ring_bytes = TT_CONN_SLOTS * tt_conn_slot_stride(conn->slot_bytes);
    if (posix_memalign((void **)&fifo->slots, 64, ring_bytes) != 0) {
        free(fifo);
        return TT_ERROR(ncclSystemError, "out of memory for a %zu-byte self FIFO", ring_bytes);
    }
    atomic_init(&fifo->refs, 1);
    conn->priv = fifo;
    memcpy(info->bytes, &fifo, sizeof fifo);
    return ncclSuccess;
}

static ncclResult_t self_connect(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                                 const struct tt_conn_info *remote, uint64_t deadline_ns)
{
    if (conn->dir == TT_CONN_RECV) return ncclSuccess;
    struct self_fifo *fifo;
    memcpy(&fifo, remote->bytes, sizeof fifo);
    if (fifo == NULL) return TT_ERROR(ncclInternalError, "self connection without a FIFO");
    atomic_fetch_add(&fifo->refs, 1);
    conn->priv = fifo;
    return ncclSuccess;
}

static void self_close(struct tt_conn *conn)
{
    fifo_unref(conn->priv);
    conn->priv = NULL;
}

static ncclResult_t self_send_acquire(struct tt_conn *conn, void **slot, struct tt_wait_hint *hint)
{
    struct self_fifo *fifo = conn->priv;
    uint64_t tail = atomic_load_explicit(&fifo->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&fifo->head, memory_order_acquire);
    size_t stride = tt_conn_slot_stride(fifo->slot_bytes);
    *slot = tail - head < TT_CONN_SLOTS ? fifo->slots + (tail % TT_CONN_SLOTS) * stride : NULL;
    return ncclSuccess;
}

static ncclResult_t self_send_commit(struct tt_conn *conn, size_t bytes,
                                     const struct tt_op_desc *desc)
{
    struct self_fifo *fifo = conn->priv;
    uint64_t tail = atomic_load_explicit(&fifo->tail, memory_order_relaxed);
    fifo->lengths[tail % TT_CONN_SLOTS] = bytes;
    fifo->descs[tail % TT_CONN_SLOTS] = desc != NULL ? *desc : (struct tt_op_desc){0};
    atomic_store_explicit(&fifo->tail, tail + 1, memory_order_release);
    return ncclSuccess;
}

static bool self_send_idle(struct tt_conn *conn) { return true; }

static ncclResult_t self_recv_peek(struct tt_conn *conn, const void **data, size_t *bytes,
                                   struct tt_op_desc *desc, struct tt_wait_hint *hint)
{
    struct self_fifo *fifo = conn->priv;
    uint64_t head = atomic_load_explicit(&fifo->head, memory_order_relaxed);
    if (atomic_load_explicit(&fifo->tail, memory_order_acquire) == head) {
        *data = NULL;
        return ncclSuccess;
    }
    *data = fifo->slots + (head % TT_CONN_SLOTS) * tt_conn_slot_stride(fifo->slot_bytes);
    *bytes = fifo->lengths[head % TT_CONN_SLOTS];
    if (desc != NULL) *desc = fifo->descs[head % TT_CONN_SLOTS];
    return ncclSuccess;
}

static ncclResult_t self_recv_release(struct tt_conn *conn)
{
    struct self_fifo *fifo = conn->priv;
    atomic_fetch_add_explicit(&fifo->head, 1, memory_order_release);
    return ncclSuccess;
}

/* A rank's connections to itself. */
static bool self_can_reach(const struct tt_reach *r)
{
    return r->peer == r->rank;
}

const struct tt_transport tt_transport_self = {
    .name = "self",
    .link = TT_LINK_SHM,
    .can_reach = self_can_reach,
    .setup = self_setup,
    .connect = self_connect,
    .close = self_close,
    .send_acquire = self_send_acquire,
    .send_commit = self_send_commit,
    .send_idle = self_send_idle,
    .recv_peek = self_recv_peek,
    .recv_release = self_recv_release,
};
