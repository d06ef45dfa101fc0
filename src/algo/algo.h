/* Collective algorithms as schedules of primitives over the transport contract.
 *
 * An operation (struct tt_op) is a task: tt_algo_op_progress advances it as far as it can without
 * blocking and reports done, an error, or what it waits for. The algorithm supplies only a
 * `next` function that yields the op's primitives in order ("at step k: receive chunk c from the
 * left, reduce it with my chunk c, send the result right"); the executor here cuts each
 * primitive into slot-sized slices and moves them through the connections. Schedules never see
 * a socket or a segment, and the executor never knows which collective it runs.
 *
 * Deadlock freedom: a primitive that only sends moves at most half a FIFO (chunk_count is
 * TT_CONN_SLOTS/2 slices), so every rank's opening send completes without waiting for its
 * receiver; every later primitive consumes one incoming slice for each slice it sends. */
#ifndef TT_ALGO_H
#define TT_ALGO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reduce/reduce.h"
#include "transport/host.h"
#include "transport/transport.h"
#include "util/wait.h"

enum tt_prim_kind {
    TT_PRIM_COPY,                  /* dst = src (local only) */
    TT_PRIM_SEND,                  /* send src */
    TT_PRIM_COPY_SEND,             /* dst = src; send src */
    TT_PRIM_RECV,                  /* dst = in */
    TT_PRIM_RECV_COPY_SEND,        /* dst = in; send in */
    TT_PRIM_RECV_REDUCE_SEND,      /* send (src OP in) */
    TT_PRIM_RECV_REDUCE_COPY,      /* dst = src OP in */
    TT_PRIM_RECV_REDUCE_COPY_SEND, /* dst = src OP in; send dst */
};

/* One primitive: `count` elements; `flags` are TT_REDUCE_PRE/POST, applied to `src` and to the
 * result as src/reduce/reduce.h defines, and TT_PRIM_SWAP. A primitive with count 0 moves
 * nothing. */
/* RECV_REDUCE_COPY computes dst = in OP src instead of src OP in, so that two ranks folding
 * each other's partial results evaluate the same expression, bit for bit (NaN payloads
 * included). Not with TT_REDUCE_PRE: the pre-operation applies to `src`. */
#define TT_PRIM_SWAP 0x100

struct tt_prim {
    enum tt_prim_kind kind;
    const void *src;
    void *dst;
    size_t count;
    unsigned flags;
};

struct tt_op;
/* Algorithms that read peers directly (OneShot, Direct) are state machines instead of
 * primitive schedules: this advances one as far as it can without waiting. */
typedef ncclResult_t (*tt_algo_step_fn)(struct tt_op *op, bool *done, bool *progressed,
                                        struct tt_wait_hint *hint);

/* A peer's buffer as Direct reaches it: its address in the peer's own address space (for
 * cross-memory attach) and the part of it mapped here, if any: bytes [lo, hi) at `map` (a
 * buffer in an ncclMemAlloc block is mapped whole; registered ordinary memory all but the
 * partial pages at its ends). */
struct tt_peer_buf {
    uintptr_t addr;
    const char *map; /* byte lo of the buffer; NULL: nothing mapped */
    size_t lo;
    size_t hi;
};

/* Per-communicator scratch of the Direct algorithm: peers' buffers and a piece of
 * cache-resident staging. */
struct tt_direct_scratch {
    struct tt_peer_buf *send; /* [nranks] */
    struct tt_peer_buf *recv; /* [nranks] */
    void *tmp;
    size_t tmp_bytes;
    void *stage; /* tmp_bytes more: a folded piece bound for another rank's output only */
    bool fan_out; /* Broadcast, AllGather: every output is shareable, each rank pushes its share */
    /* Copies bypass the caches (non-temporal stores) when the operation's buffers, all ranks
     * together, exceed this many bytes (algo/direct.c, "Streaming copies"). */
    size_t stream_min_footprint;
    bool stream; /* this operation's choice */
};

/* Tree's connections to one peer, made on first use (core/p2p.c) and kept apart from the
 * point-to-point ones, so that a collective never interleaves with the user's sends. */
struct tt_tree_link {
    struct tt_conn send;
    struct tt_conn recv;
    bool send_ready;
    bool recv_ready;
};

/* Most peers one rank's tree reaches: a partner per round of recursive doubling among up to
 * 2^31 ranks, and one more for the ranks left over. */
#define TT_TREE_MAX_PEERS 33

/* Fills *prim with the op's next primitive and returns true, or returns false at the end. */
typedef bool (*tt_algo_next_fn)(struct tt_op *op, struct tt_prim *prim);

/* Who an operation waits for, for error messages and the pending-operations dump. */
enum tt_op_wait { TT_OP_WAIT_NONE, TT_OP_WAIT_DATA, TT_OP_WAIT_CREDIT, TT_OP_WAIT_FLUSH };

struct tt_op {
    /* What to compute (set by the core). */
    int coll;             /* enum tt_coll */
    const void *sendbuff;
    void *recvbuff;
    size_t count;         /* NCCL's count for this collective */
    size_t elt_bytes;
    struct tt_redop redop;
    int root;
    int rank;
    int nranks;
    struct tt_conn *send; /* to the ring successor (Tree: the current primitive's peer) */
    struct tt_conn *recv; /* from the ring predecessor (Tree: likewise) */
    size_t slice_count;   /* elements per slot */
    size_t chunk_count;   /* elements per primitive (per rank per loop for ring collectives) */

    /* Direct-access algorithms: set instead of `next` (then `next` is NULL). */
    tt_algo_step_fn step_fn;
    struct tt_host *host;
    struct tt_direct_scratch *scratch;
    struct tt_host_region send_region; /* the buffers' shareable parts (Direct) */
    struct tt_host_region recv_region;
    int state;
    int slot;
    uint64_t event_base; /* the host events before this op's first (flagged ops: its sequence) */

    /* Tree: the links to every peer ([nranks]) and staging for a Reduce partial result on
     * non-roots. */
    struct tt_tree_link *links; /* non-NULL: run the Tree schedule */
    void *tree_tmp;

    /* The schedule's cursor, owned by `next`. */
    tt_algo_next_fn next;
    size_t loop_off;
    int step;

    /* The executor's state. */
    struct tt_prim prim;
    size_t prim_done;
    bool have_prim;
    bool finished;
    enum tt_op_wait waiting;
    int waiting_peer;
};

/* Resets the op's cursors and picks its schedule: the ring for op->coll, unless step_fn was
 * set (OneShot, Direct). */
void tt_algo_op_start(struct tt_op *op);

/* OneShot (algo/oneshot.c): every collective but Send/Recv, all ranks on one host, payload per
 * rank at most the mailbox slot. Direct (algo/direct.c): AllReduce with cross-memory attach. */
ncclResult_t tt_oneshot_step(struct tt_op *op, bool *done, bool *progressed,
                             struct tt_wait_hint *hint);
size_t tt_oneshot_payload_bytes(const struct tt_op *op);
/* The mailbox slot bytes Direct needs for its published addresses. */
size_t tt_direct_slot_bytes(void);
ncclResult_t tt_direct_step(struct tt_op *op, bool *done, bool *progressed,
                            struct tt_wait_hint *hint);
/* Advances the op. *done is set once its output is complete and everything it sent has left
 * this process; *progressed tells whether anything moved (to reset the caller's backoff). On a
 * stall `hint` names what to sleep on. Errors come from the transports (peer failures). */
ncclResult_t tt_algo_op_progress(struct tt_op *op, bool *done, bool *progressed,
                                 struct tt_wait_hint *hint);

/* The tree schedule (algo/tree.c) of AllReduce, Broadcast and Reduce: each primitive comes with
 * op->send or op->recv pointed at its peer's link. And the peers an op's tree connects this
 * rank with, in both directions (fills peers[TT_TREE_MAX_PEERS], returns how many). */
bool tt_tree_next(struct tt_op *op, struct tt_prim *prim);
int tt_tree_peers(const struct tt_op *op, int *peers);
/* Every peer any Tree operation of `rank` may talk to, whatever the collective and root (fills
 * peers[TT_TREE_ALL_PEERS], returns how many): the connections made at init. The relation is
 * symmetric. */
#define TT_TREE_ALL_PEERS (3 * TT_TREE_MAX_PEERS)
int tt_tree_all_peers(int rank, int nranks, int *peers);

/* The ring schedules (algo/ring.c). */
bool tt_ring_allreduce_next(struct tt_op *op, struct tt_prim *prim);
bool tt_ring_reducescatter_next(struct tt_op *op, struct tt_prim *prim);
bool tt_ring_allgather_next(struct tt_op *op, struct tt_prim *prim);
bool tt_ring_broadcast_next(struct tt_op *op, struct tt_prim *prim);
bool tt_ring_reduce_next(struct tt_op *op, struct tt_prim *prim);
bool tt_p2p_send_next(struct tt_op *op, struct tt_prim *prim);
bool tt_p2p_recv_next(struct tt_op *op, struct tt_prim *prim);
bool tt_local_copy_next(struct tt_op *op, struct tt_prim *prim);

#endif
