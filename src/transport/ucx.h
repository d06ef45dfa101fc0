/* UCX transport, shared by its two files: ucx_setup.c (loading UCX, the per-communicator
 * worker, connection setup and teardown) and ucx.c (the data path and the transport table).
 *
 * The connection contract over UCP's tag API, so that whatever fabric UCX drives
 * (InfiniBand, RoCE, TCP, shared memory) carries Tutti's network connections without
 * hand-written verbs. Built only when CMake finds UCX (TUTTI_HAVE_UCX); chosen for the peers
 * that shared memory does not serve when NCCL_NET=UCX (or TUTTI_NET=ucx).
 *
 * Each communicator owns one UCP context and worker (its state in the transport context) and
 * one endpoint per peer, created from the worker address the peer put in its info blob. A
 * connection keeps a ring of `depth` staging slots on each side: TT_CONN_SLOTS, or more for
 * small slots (up to UCX_MAX_DEPTH, about UCX_RING_BYTES in all), since a window of 8 small
 * frames would bound a stream to 8 frames per round trip where TCP has the kernel's buffers
 * besides. The receiver posts a tagged receive into every free slot, for exactly the frame that
 * slot will hold, and tells the sender how many frames it has released (a credit message); the
 * sender sends frame k only once the receiver has released frame k - depth, so every frame
 * lands in a posted receive (zero-copy where the fabric allows it) and UCX never buffers an
 * unexpected one. Invariants: receiver: receives are posted for frames [done, done + depth);
 * sender: credit <= posted <= credit + depth, and frame k's send request lives in slot
 * k % depth until it completes.
 *
 * Waiting never spins for long: a call that cannot proceed progresses the worker once, and after
 * a few such misses arms the worker (ucp_worker_arm) and hands the engine the worker's event fd
 * to poll, whose sleeps are at most TT_WAIT_SLEEP_MAX_US, so deadlines and the abort flag are
 * seen as with TCP. Once armed, a quiet event fd means nothing happened, so later misses cost one
 * poll() instead of a progress (a real progress still runs at least every millisecond, for
 * UCX's keepalive). The worker is shared by the communicator's connections, which different
 * threads may drive at once, so every call holds the worker's lock (UCS_THREAD_MODE_SERIALIZED).
 *
 * A peer that dies makes UCX fail its endpoint (UCP_ERR_HANDLING_MODE_PEER); a rank whose
 * communicator fails sends a "bye" on each connection (the transport's shutdown). Either is an
 * error only once a call needs what the peer will never provide, as a TCP end of stream is:
 * frames sent before a bye are still read.
 *
 * Wire format (integers little-endian):
 *   Info blob (both sides; exchanged over the bootstrap):
 *     0 u64 magic UCX_INFO_MAGIC | 8 u64 slot_bytes | 16 u32 rank | 20 u8 connection tag
 *     21 u8 flags (1: network-only worker address) | 22 u16 address bytes (<= 232)
 *     24 the UCP worker address
 *   Tags (64 bits): kind (2 bits) | connection tag (6) | sending rank (24) | sequence (32):
 *     kind 0 data frame k (sequence k mod 2^32), sender to receiver
 *     kind 1 credit: u64 frames released, receiver to sender
 *     kind 2 bye from the sender: u64 frames it committed
 *     kind 3 bye from the receiver: u64 frames it released
 *   Data frame: 0 u32 payload bytes | 4 u32 (k mod 2^32) XOR UCX_FRAME_MAGIC
 *     8 the operation's descriptor (struct tt_op_desc, laid out as in TCP's frames) | payload
 * A frame whose length or check word is wrong is a ncclRemoteError; its payload is never handed
 * out. */
#ifndef TT_TRANSPORT_UCX_H
#define TT_TRANSPORT_UCX_H

#include <pthread.h>
#include <stdint.h>

#include <ucp/api/ucp.h>
#include <ucs/config/global_opts.h>

#include "transport/transport.h"

/* ---- UCX, loaded at run time ----------------------------------------------------------------- */

/* Every UCX function the transport calls, loaded at run time (ucx_setup.c defines the pointers
 * and fills them); after the pointers are declared, each name stands for its pointer, so the
 * code reads as plain UCX. */
#define UCX_FUNCTIONS(X)                                                                           \
    X(ucp_cleanup) X(ucp_config_read) X(ucp_config_release) X(ucp_ep_close_nbx) X(ucp_ep_create) \
    X(ucp_ep_flush_nbx) X(ucp_get_version_string) X(ucp_init_version) X(ucp_request_cancel)      \
    X(ucp_request_check_status) X(ucp_request_free) X(ucp_tag_msg_recv_nbx) X(ucp_tag_probe_nb)  \
    X(ucp_tag_recv_nbx) X(ucp_tag_recv_request_test) X(ucp_tag_send_nbx) X(ucp_worker_arm)       \
    X(ucp_worker_create) X(ucp_worker_destroy) X(ucp_worker_get_efd) X(ucp_worker_progress)      \
    X(ucp_worker_query) X(ucp_worker_release_address) X(ucs_status_string)

#define UCX_DECLARE(name) extern __typeof__(name) *tt_ucx_##name;
UCX_FUNCTIONS(UCX_DECLARE)
#undef UCX_DECLARE
extern ucs_global_opts_t *tt_ucx_ucs_global_opts;

#define ucp_cleanup (*tt_ucx_ucp_cleanup)
#define ucp_config_read (*tt_ucx_ucp_config_read)
#define ucp_config_release (*tt_ucx_ucp_config_release)
#define ucp_ep_close_nbx (*tt_ucx_ucp_ep_close_nbx)
#define ucp_ep_create (*tt_ucx_ucp_ep_create)
#define ucp_ep_flush_nbx (*tt_ucx_ucp_ep_flush_nbx)
#define ucp_get_version_string (*tt_ucx_ucp_get_version_string)
#define ucp_init_version (*tt_ucx_ucp_init_version)
#define ucp_request_cancel (*tt_ucx_ucp_request_cancel)
#define ucp_request_check_status (*tt_ucx_ucp_request_check_status)
#define ucp_request_free (*tt_ucx_ucp_request_free)
#define ucp_tag_msg_recv_nbx (*tt_ucx_ucp_tag_msg_recv_nbx)
#define ucp_tag_probe_nb (*tt_ucx_ucp_tag_probe_nb)
#define ucp_tag_recv_nbx (*tt_ucx_ucp_tag_recv_nbx)
#define ucp_tag_recv_request_test (*tt_ucx_ucp_tag_recv_request_test)
#define ucp_tag_send_nbx (*tt_ucx_ucp_tag_send_nbx)
#define ucp_worker_arm (*tt_ucx_ucp_worker_arm)
#define ucp_worker_create (*tt_ucx_ucp_worker_create)
#define ucp_worker_destroy (*tt_ucx_ucp_worker_destroy)
#define ucp_worker_get_efd (*tt_ucx_ucp_worker_get_efd)
#define ucp_worker_progress (*tt_ucx_ucp_worker_progress)
#define ucp_worker_query (*tt_ucx_ucp_worker_query)
#define ucp_worker_release_address (*tt_ucx_ucp_worker_release_address)
#define ucs_status_string (*tt_ucx_ucs_status_string)
#define ucs_global_opts (*tt_ucx_ucs_global_opts)

#define UCX_INFO_MAGIC 0x6f666e6978637574ull /* "tucxinfo" */
#define UCX_FRAME_MAGIC 0x58435554u          /* "TUCX" */
#define UCX_INFO_HEADER_BYTES 24
#define UCX_ADDR_MAX_BYTES (TT_CONN_INFO_BYTES - UCX_INFO_HEADER_BYTES)
#define UCX_FRAME_HEADER_BYTES 32
/* Each staging slot starts with this much room; the frame header sits in its last 32 bytes, so
 * header and payload are one contiguous message and the payload stays 64-byte aligned. */
#define UCX_SLOT_LEAD 64
/* Misses of a call before it arms the worker and lets the engine sleep on its event fd. */
#define UCX_SPIN_MISSES 4
/* While armed, a quiet event fd stands for a progress call at most this long. */
#define UCX_QUIET_NS 1000000ull
/* Ring depth: TT_CONN_SLOTS, doubled while the ring stays within UCX_RING_BYTES. */
#define UCX_MAX_DEPTH 64
#define UCX_RING_BYTES (1u << 20)
/* How long send_idle waits for an endpoint flush (see there). */
#define UCX_FLUSH_WAIT_NS 20000000ull
/* Bound on a graceful endpoint close at teardown (flushing what is still in flight). */
#define UCX_CLOSE_MS 1000
/* How long teardown receives and drops the messages still arriving for closed connections. */
#define UCX_DRAIN_MS 100

enum ucx_kind { KIND_DATA = 0, KIND_CREDIT = 1, KIND_BYE_TO_RECV = 2, KIND_BYE_TO_SEND = 3 };

struct ucx_peer {
    ucp_ep_h ep;
    _Atomic int status; /* ucs_status_t: UCS_OK until UCX fails the endpoint */
};

struct ucx_conn;

/* Per-communicator state: the worker and an endpoint per peer. */
struct ucx_net {
    pthread_mutex_t lock;
    ucp_context_h ucp;
    ucp_worker_h worker;
    int efd;
    int rank;
    int nranks;
    struct ucx_peer *peers;
    uint8_t addr[UCX_ADDR_MAX_BYTES];
    size_t addr_bytes;
    bool addr_net_only;
    bool armed;             /* armed, and not progressed since */
    uint64_t progressed_ns; /* last real progress */
    const _Atomic int *abort;
    /* Closed connections, freed after the worker: a cancelled receive may still be writing. */
    struct ucx_conn *closed;
};

struct ucx_conn {
    struct ucx_net *net;
    struct ucx_conn *next_closed;
    size_t slot_stride;
    uint8_t *staging;
    ncclResult_t failed; /* sticky */
    uint32_t misses;
    /* Receiver: each slot's receive request, whether its frame is in, and what it holds. */
    unsigned depth;
    void *req[UCX_MAX_DEPTH];
    bool full[UCX_MAX_DEPTH];
    uint32_t len[UCX_MAX_DEPTH];
    struct tt_op_desc desc[UCX_MAX_DEPTH];
    /* Sender: frames committed, and frames the receiver released (credit). Receiver: frames
     * released (done). */
    uint64_t posted;
    uint64_t done;
    uint64_t credit;
    bool need_flush; /* sender: committed since the endpoint was last flushed */
    void *flush_req;
    uint64_t flush_since_ns;
    /* Sender: the credit receive; receiver: the credit send (one in flight; `credit_dirty`
     * when a newer count waits for it). */
    uint64_t credit_buf;
    void *credit_req;
    bool credit_dirty;
    /* The peer's bye: received, and the count it carried. */
    uint64_t bye_buf;
    void *bye_req;
    bool bye_got;
    /* This side's bye. */
    uint64_t bye_out;
    void *bye_out_req;
    bool bye_sent;
    bool connected;
};

static inline ucp_tag_t make_tag(enum ucx_kind kind, int conn_tag, int from, uint64_t seq)
{
    return (ucp_tag_t)kind << 62 | (ucp_tag_t)(conn_tag & 0x3f) << 56 |
           (ucp_tag_t)(from & 0xffffff) << 32 | (uint32_t)seq;
}

/* Frame `frame`'s staging slot. */
static inline uint8_t *slot_of(const struct ucx_conn *uc, uint64_t frame)
{
    return uc->staging + (frame % uc->depth) * uc->slot_stride;
}

/* ucx_setup.c: the transport's setup and teardown entries, and what the data path needs of
 * the worker and the receives (each called with the worker's lock held, except the entries). */
ncclResult_t tt_ucx_setup(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                          struct tt_conn_info *info);
ncclResult_t tt_ucx_connect(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                            const struct tt_conn_info *remote, uint64_t deadline_ns);
void tt_ucx_close(struct tt_conn *conn);
void tt_ucx_shutdown(struct tt_conn *conn);
void tt_ucx_ctx_fini(struct tt_transport_ctx *ctx);
/* Progresses the worker until it has nothing more to do (bounded). */
void tt_ucx_net_progress(struct ucx_net *n);
/* Armed and nothing signalled since, not long ago: a progress call would find nothing. */
bool tt_ucx_net_quiet(struct ucx_net *n);
/* Receiver: checks a received frame (slot `frame`'s header) and records it. */
ncclResult_t tt_ucx_take_frame(struct tt_conn *conn, struct ucx_conn *uc, uint64_t frame,
                               size_t length);
/* Receiver: posts the receive of `frame` into its slot. */
ncclResult_t tt_ucx_post_frame(struct tt_conn *conn, struct ucx_conn *uc, uint64_t frame);
/* Sender: posts the receive of the next credit (*done when it completed at once). */
ncclResult_t tt_ucx_post_credit_recv(struct tt_conn *conn, struct ucx_conn *uc, bool *done);
/* Checks the length of a control message (credit or bye) from conn's peer. */
ncclResult_t tt_ucx_check_ctl(const struct tt_conn *conn, size_t length);

#endif
