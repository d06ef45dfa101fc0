/* The transport contract: a connection moves bytes one way between two ranks through a FIFO of
 * slots that lives in the receiver's memory (NCCL's design). The sender acquires a free slot,
 * fills it, and commits it (publishing `tail`); the receiver peeks the oldest full slot, consumes
 * it, and releases it (returning a credit through `head`). Shared memory implements this with
 * memory and atomics; TCP with sockets, a staging ring on each side and length-checked frames.
 *
 * Setup is three calls per connection, so that the core can exchange the opaque info blobs over
 * the bootstrap: setup() fills this side's blob, the core swaps blobs with the peer, connect()
 * finishes with the peer's blob. Within one exchange the core connects every send side before
 * any receive side (TCP accepts there), and last the send sides built from their pair's
 * receive side (send_after_recv), so no ordering deadlock is possible: a send side that waits
 * for the peer waits only after this rank did everything other peers may wait for.
 *
 * The data path calls are nonblocking and allocation-free: when a call cannot proceed it returns
 * ncclSuccess with a NULL slot/data and fills `hint` with what to sleep on. They are not
 * thread-safe: one connection is driven by one thread at a time. Transports never know which
 * collective they serve. Every message read from a peer is length-checked before use; a bad one
 * is an error (ncclRemoteError) naming the peer, never a crash. */
#ifndef TT_TRANSPORT_H
#define TT_TRANSPORT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "nccl.h"
#include "util/wait.h"

#define TT_CONN_INFO_BYTES 256
#define TT_CONN_SLOTS 8

enum tt_conn_dir { TT_CONN_SEND = 0, TT_CONN_RECV = 1 };

/* Distance between two slots of a FIFO: a whole number of cache lines, so every slot starts
 * aligned for any element type (and slots never share a line) whatever slot_bytes is. */
static inline size_t tt_conn_slot_stride(size_t slot_bytes)
{
    return (slot_bytes + 63) & ~(size_t)63;
}

/* What an operation is, as the ranks must agree on it. The sender attaches its operation's
 * descriptor to every slice it commits and the receiver gets it with the slice, so that a
 * mismatch between ranks (count, datatype, operator, root, collective, or the order of calls)
 * is an error instead of wrong data (algo/prims.c compares). Transports carry it opaquely. */
struct tt_op_desc {
    uint64_t ticket; /* the operation's place on its lane: equal on both ends of a match */
    uint64_t count;
    int32_t root;    /* -1 where the collective has none */
    uint8_t coll;
    uint8_t dtype;
    uint16_t op;     /* ncclRedOp_t of reductions (user ops are small slot numbers), else 0 */
};
_Static_assert(sizeof(struct tt_op_desc) == 24, "struct tt_op_desc is part of the wire format");

/* The opaque blob one side of a connection gives the other at setup. */
struct tt_conn_info {
    uint8_t bytes[TT_CONN_INFO_BYTES];
};

/* Transports that may keep per-communicator state in one context. */
#define TT_TRANSPORT_STATES 4

/* Per-communicator context the core gives every transport call during setup. */
struct tt_transport_ctx {
    int rank;
    int nranks;
    uint64_t comm_hash;              /* unique per communicator: names shm segments */
    struct sockaddr_storage local_addr; /* interface chosen by the bootstrap: TCP listens here */
    const _Atomic int *abort;        /* set when the communicator is aborted */
    /* Optional, for the waits of connect: whether the wait for `peer` must end, with the
     * error and why (the communicator was revoked, or the peer's process ended or its
     * communicator failed); called at most every few milliseconds. */
    ncclResult_t (*connect_check)(void *arg, int peer);
    void *connect_check_arg;
    /* Each transport's per-communicator state (TCP: its listener), found by
     * tt_transport_ctx_state and freed by the transport's ctx_fini. */
    struct {
        const struct tt_transport *owner;
        void *state;
    } states[TT_TRANSPORT_STATES];
};

struct tt_transport;

/* The wait loops of connect call this every pass: ncclSuccess while the wait for `peer` may go
 * on (the abort flag, then ctx->connect_check every CONNECT_CHECK_NS). */
ncclResult_t tt_transport_connect_check(struct tt_transport_ctx *ctx, int peer,
                                        uint64_t *last_ns);

/* The kind of link a transport makes. The cost model prices steps by it (a ring with any TCP
 * link is priced as TCP), so TCP over loopback is never taken for shared memory. */
enum tt_link { TT_LINK_SHM, TT_LINK_TCP, TT_LINK_COUNT };

/* What a transport is told about a peer when asked whether it can reach it. */
struct tt_reach {
    int rank;
    int peer;
    bool same_host; /* equal host hashes (hostname, boot id, /dev/shm; or NCCL_HOSTID) */
};

/* One direction of one peer pair. The core owns the struct; the transport owns `priv`. */
struct tt_conn {
    const struct tt_transport *transport;
    int peer;
    enum tt_conn_dir dir;
    size_t slot_bytes;  /* capacity of each slot; equal on every rank of a communicator */
    int tag;            /* distinguishes several connections between the same pair */
    /* The other direction with the same peer and tag when the core makes both at once (set
     * before setup, else NULL): a transport may carry the two over one stream (TCP shares its
     * sockets, so that each direction's acknowledgements ride on the other's data). */
    struct tt_conn *pair;
    /* Set by the core before it closes a side that never connected, when the peer's process
     * has ended: what the peer made for this connection is nobody's now (shm removes the name
     * of the peer's segment, which the dead peer cannot). */
    bool peer_died;
    void *priv;
};

struct tt_transport {
    const char *name;
    enum tt_link link;
    /* Whether this transport can connect `r->rank` with `r->peer` (environment variables such
     * as NCCL_SHM_DISABLE included). */
    bool (*can_reach)(const struct tt_reach *r);
    /* setup: allocate this side's resources, describe them in *info. */
    ncclResult_t (*setup)(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                          struct tt_conn_info *info);
    /* connect: attach to the peer's side described by *remote; waits at most to deadline_ns. */
    ncclResult_t (*connect)(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                            const struct tt_conn_info *remote, uint64_t deadline_ns);
    /* Optional: true when this send side is built from its pair's receive side (conn->pair),
     * which must be connected first; the core then connects it after every receive side of
     * the exchange (a wait for the peer placed anywhere earlier could hold up the sends other
     * peers wait for). Decided from both sides' blobs, so the peer agrees. */
    bool (*send_after_recv)(const struct tt_transport_ctx *ctx, const struct tt_conn *conn,
                            const struct tt_conn_info *remote);
    /* close: free everything; accepts a half-built connection. */
    void (*close)(struct tt_conn *conn);

    /* Sender: a free slot of conn->slot_bytes, or *slot = NULL when no credit yet. */
    ncclResult_t (*send_acquire)(struct tt_conn *conn, void **slot, struct tt_wait_hint *hint);
    /* Sender: publish the acquired slot holding `bytes` (<= slot_bytes) bytes, with the
     * descriptor of the operation it belongs to (NULL: zeros). */
    ncclResult_t (*send_commit)(struct tt_conn *conn, size_t bytes, const struct tt_op_desc *desc);
    /* Sender, optional: the socket to wait on for POLLOUT while committed bytes are still in
     * this process (its buffers full), else -1. */
    int (*send_wait_fd)(struct tt_conn *conn);
    /* Sender: true when everything committed has left this process (TCP: written to the
     * socket), so the caller may return to the user without a proxy thread. */
    bool (*send_idle)(struct tt_conn *conn);
    /* Receiver: the oldest full slot, its length and the descriptor sent with it (into *desc
     * unless NULL), or *data = NULL when none yet. */
    ncclResult_t (*recv_peek)(struct tt_conn *conn, const void **data, size_t *bytes,
                              struct tt_op_desc *desc, struct tt_wait_hint *hint);
    /* Receiver: give the slot returned by recv_peek back to the sender. */
    ncclResult_t (*recv_release)(struct tt_conn *conn);
    /* Move bytes without being asked for a slot (TCP: flush and fill socket buffers); may be
     * NULL. Returns ncclRemoteError when the peer closed or sent garbage. */
    ncclResult_t (*progress)(struct tt_conn *conn);
    /* Tell the peer this side is gone without freeing anything (TCP: shut the socket down, so
     * the peer sees the connection closed and fails at once); safe while another thread uses
     * the connection. May be NULL (shared memory: the local team tells the peer instead). */
    void (*shutdown)(struct tt_conn *conn);
    /* Sender: tell the peer why this side fails (ncclResult_t `code`, a short reason) before
     * shutdown does: the peer's receives then fail with that code and reason instead of "the
     * peer closed the connection". Best effort (a peer that reads nothing never sees it), and
     * only from the thread that drives the connection. May be NULL (shared memory: the local
     * team's mailboxes carry the reason). */
    void (*fail_notify)(struct tt_conn *conn, int code, const char *reason);
    /* Receiver whose communicator failed: tell the peer's sender why, from any thread (a
     * connection another thread may be driving): one small write of an error frame where
     * nothing else writes (TCP: socket 0's way back, or a shared pair's control socket), read
     * by the sender's peer_error. Best effort; the caller shuts the connection down next. May
     * be NULL. */
    void (*notify_back)(struct tt_conn *conn, int code, const char *reason);
    /* Sender: whether the receiver sent back why it failed (notify_back, or its receive side
     * broke and its transport said so), or shut its side down with frames still to go: that
     * error, else ncclSuccess. Slow path only (a stalled sender); may be NULL. */
    ncclResult_t (*peer_error)(struct tt_conn *conn);
    /* Free per-communicator state kept in the ctx (may be NULL). */
    void (*ctx_fini)(struct tt_transport_ctx *ctx);
};

extern const struct tt_transport tt_transport_shm;
extern const struct tt_transport tt_transport_tcp;
extern const struct tt_transport tt_transport_self;
#ifdef TUTTI_HAVE_UCX
extern const struct tt_transport tt_transport_ucx; /* transport/ucx.c, built with UCX only */
#endif

/* Whether NCCL_NET (or TUTTI_NET) selects UCX as the network transport. */
bool tt_transport_net_is_ucx(void);
/* Checks NCCL_NET and TUTTI_NET: Socket (the default) or UCX, the latter only in a build with
 * UCX; anything else is an error naming the variable (communicator init calls this). */
ncclResult_t tt_transport_check_net(void);

/* The transports in order of preference (transport/transport.c); NULL-terminated. Adding one is
 * its folder and one entry there. */
extern const struct tt_transport *const tt_transports[];
/* Whether `conn`, a send side, connects after the receive sides (see send_after_recv). */
bool tt_transport_send_after_recv(const struct tt_transport_ctx *ctx, const struct tt_conn *conn,
                                  const struct tt_conn_info *remote);
/* The first transport of the table that can reach the peer (TCP always can). */
const struct tt_transport *tt_transport_pick(const struct tt_reach *r);
/* The slot of `t`'s per-communicator state in `ctx` (claimed on first use; NULL when all are
 * taken, which a table of TT_TRANSPORT_STATES transports at most never sees). */
void **tt_transport_ctx_state(struct tt_transport_ctx *ctx, const struct tt_transport *t);
/* Frees every transport's per-communicator state (ctx_fini of each transport of the table). */
void tt_transport_ctx_fini(struct tt_transport_ctx *ctx);

#endif
