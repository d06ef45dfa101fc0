/* Collective algorithms: the algorithm interface (struct tt_algo, one per algorithm, listed in
 * TT_ALGO_TABLE), and schedules of primitives over the transport contract.
 *
 * An operation (struct tt_op) is a task: tt_algo_op_progress advances it as far as it can without
 * blocking and reports done, an error, or what it waits for, through its algorithm's `step`.
 * Ring and Tree supply a `next` function that yields the op's primitives in order ("at step k:
 * receive chunk c from the left, reduce it with my chunk c, send the result right"), and their
 * step is the primitive executor (algo/prims.c), which cuts each primitive into slot-sized slices
 * and moves them through the connections. OneShot and Direct, which read their peers' memory
 * through the local team instead of connections, are schedules of phases (publish, wait for the
 * peers, copy and fold, wait for the peers again) written out in their own files. Schedules never
 * see a socket or a segment, and the executor never knows which collective it runs.
 *
 * Deadlock freedom: a primitive that only sends moves at most half a FIFO (chunk_count is
 * TT_CONN_SLOTS/2 slices), so every rank's opening send completes without waiting for its
 * receiver; every later primitive consumes one incoming slice for each slice it sends. */
#ifndef TT_ALGO_H
#define TT_ALGO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "reduce/reduce.h"
#include "algo/tune.h"
#include "device/device.h"
#include "transport/team.h"
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

/* A peer's buffer as Direct reaches it: its address in the peer's own address space (for
 * cross-memory attach) and the part of it mapped here, if any: bytes [lo, hi) at `map` (a
 * buffer in an ncclMemAlloc block is mapped whole; registered ordinary memory all but the
 * partial pages at its ends). */
struct tt_peer_buf {
    uintptr_t addr;
    const char *map; /* byte lo of the buffer; NULL: nothing mapped */
    size_t lo;
    size_t hi;
    uint64_t premul; /* the peer's PREMULSUM scalar, as its tt_redop holds it (Direct) */
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

/* Tree's connections to one peer, made at init (core/connect.c) and kept apart from the
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

/* Where this rank sits when the communicator spans several hosts with the same number of ranks
 * on each (filled by the core at init from the allgathered host identities, equal in every
 * rank's view): hosts are numbered by their lowest rank, a rank's local index by rank order
 * within its host. The local ring joins a host's ranks in local order (shared memory); rail i
 * joins the ranks of local index i of every host in host order (the network). `valid` is false
 * when the hosts hold different numbers of ranks, or there is one host or one rank per host. */
struct tt_hier_shape {
    bool valid;
    int nlocal;     /* ranks per host */
    int nhosts;
    int local_rank; /* this rank's index within its host */
    int host_rank;  /* its host's index */
    int local_next, local_prev; /* communicator ranks of its neighbours in the local ring */
    int rail_next, rail_prev;   /* ... and in its rail */
};

/* What a communicator lends its algorithms, filled by the core at init and read-only after:
 * the ring's connections, Tree's links, the local team's mailboxes and Direct's scratch. An
 * algorithm's `bind` takes what it needs from here. */
struct tt_algo_env {
    struct tt_conn *ring_send;  /* to the ring successor; NULL with one rank */
    struct tt_conn *ring_recv;  /* from the ring predecessor */
    struct tt_tree_link *tree;  /* [nranks]: Tree's links, NULL when init made none (Hier's
                                   local and rail neighbours are among them) */
    struct tt_hier_shape hier;  /* the hosts' shape (Hier) */
    bool net;                   /* the ring crosses the network: pipeline in smaller slices */
    void *tree_tmp;             /* Tree Reduce's partial result on non-roots (with `tree`) */
    struct tt_team *team;       /* the local team, when it spans the communicator (else NULL) */
    struct tt_direct_scratch *scratch;
    /* The shareable part of a buffer (core/mem.c), for algorithms that map peers' buffers. */
    bool (*region)(const void *ptr, size_t bytes, struct tt_team_region *out);
};

/* Room for one algorithm's own per-operation state (see TT_ALGO_STATE). Its first
 * TT_ALGO_STATE_HEAD_BYTES are zeroed when the op starts (an algorithm keeps its phase there);
 * the rest is the algorithm's to set. */
#define TT_ALGO_STATE_BYTES 160
#define TT_ALGO_STATE_HEAD_BYTES 16

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
    size_t slice_count;   /* elements per slot */
    size_t chunk_count;   /* elements per primitive (per rank per loop for ring collectives) */
    enum tt_mem_kind mem; /* where the buffers live: the executor copies through this kind */
    /* What this op is, as every rank must agree (the core fills it; the ticket at submission):
     * sent with every slice and every mailbox publication, compared by every receiver. */
    struct tt_op_desc desc;

    /* How (set by bind). */
    const struct tt_algo *algo;
    const struct tt_algo_env *env;
    struct tt_conn *send; /* the current primitive's connections (ring: fixed; Tree: per step) */
    struct tt_conn *recv;
    struct tt_tree_link *links; /* non-NULL: the schedule talks to several peers (Tree) */

    /* The schedule's cursor, owned by `next`. */
    tt_algo_next_fn next;
    size_t loop_off;
    int step;

    /* The primitive executor's state (algo/prims.c). */
    struct tt_prim prim;
    size_t prim_done;
    uint64_t slices_sent; /* slices this op committed so far (TUTTI_FAULT counts them) */
    bool have_prim;
    bool finished;

    /* Who the op waits for (every algorithm keeps these current). */
    enum tt_op_wait waiting;
    int waiting_peer;

    /* The timeline trace (util/trace.h): NULL unless TUTTI_TRACE_FILE is set; the rest is set
     * by the engine when a traced op starts. */
    struct tt_trace *trace;
    uint64_t trace_start;   /* the trace's clock (tt_trace_now) */
    uint64_t trace_mark;    /* where the next step begins: the end of the previous one */
    uint64_t trace_seq;
    int trace_lane;
    int trace_steps;

    /* The algorithm's own state, opaque to everyone else. */
    _Alignas(16) unsigned char state[TT_ALGO_STATE_BYTES];
};

/* The algorithm's state of `op` as its own struct `type` (checked to fit at compile time). */
#define TT_ALGO_STATE(op, type)                                                                    \
    ((type *)(void *)((op)->state + 0 * sizeof(char[sizeof(type) <= TT_ALGO_STATE_BYTES ? 1 : -1])))


/* One algorithm, as the table in algo/tune.h lists it. Selection (algo/tune.c) asks every
 * algorithm that implements the collective whether it can run the operation here and what it
 * would cost, and picks the cheapest the variables allow; the core then binds the op to the
 * winner and the engine steps it. Each algorithm keeps its cost constants, its estimator and its
 * per-operation state (TT_ALGO_STATE) in its own file. */
struct tt_algo {
    const char *name;
    enum tt_proto_id proto; /* the one protocol it uses */
    /* Whether it implements `coll` at all (NCCL_ALGO listings, tutti-tune). */
    bool (*implements)(enum tt_coll coll);
    /* Whether it can run this operation on this communicator (connections, mailbox sizes),
     * `coll` being one it implements. */
    bool (*can_run)(const struct tt_tune_input *in);
    /* The cost model's estimate in microseconds; +infinity when it cannot run here at all. */
    double (*estimate_us)(const struct tt_tune_input *in);
    /* Points a fresh op at what it runs on, taken from `env`; may look at the buffers. */
    void (*bind)(struct tt_op *op, const struct tt_algo_env *env);
    /* Schedules over per-peer links (Tree, Hier): every peer the op may send to, so that the
     * executor pushes each of those connections (fills peers[TT_TREE_MAX_PEERS], returns how
     * many). NULL for algorithms that send on op->send alone. */
    int (*peers)(const struct tt_op *op, int *peers);
    /* Advances the op as far as it can without waiting (see tt_algo_op_progress). */
    ncclResult_t (*step)(struct tt_op *op, bool *done, bool *progressed,
                         struct tt_wait_hint *hint);
};

#define TT_ALGO_EXTERN_(id, name, text) extern const struct tt_algo tt_algo_##name;
TT_ALGO_TABLE(TT_ALGO_EXTERN_)
#undef TT_ALGO_EXTERN_

/* The table, indexed by enum tt_algo_id (algo/tune.c). */
extern const struct tt_algo *const tt_algo_table[TT_ALGO_COUNT];

/* Binds a collective to `algo` (tt_algo_table[id]). */
void tt_algo_bind(struct tt_op *op, enum tt_algo_id id, const struct tt_algo_env *env);
/* Binds a send, a receive or a local copy (op->coll) to its connection (NULL for a copy). */
void tt_algo_bind_p2p(struct tt_op *op, struct tt_conn *conn);
/* Resets the op's cursors and its algorithm's state before it starts. */
void tt_algo_op_start(struct tt_op *op);
/* Advances the op. *done is set once its output is complete and everything it sent has left
 * this process; *progressed tells whether anything moved (to reset the caller's backoff). On a
 * stall `hint` names what to sleep on. Errors come from the transports (peer failures). */
static inline ncclResult_t tt_algo_op_progress(struct tt_op *op, bool *done, bool *progressed,
                                               struct tt_wait_hint *hint)
{
    *done = false;
    *progressed = false;
    tt_wait_hint_clear(hint);
    op->waiting = TT_OP_WAIT_NONE;
    return op->algo->step(op, done, progressed, hint);
}

/* Records a step of a traced op: from the end of its previous step (or its start) to now,
 * named `name` (static text), with the peers it sent to and received from (-1: none) and the
 * bytes it moved. Costs one branch when the op is not traced. */
void tt_algo_trace_record(struct tt_op *op, const char *name, int send_to, int recv_from,
                          size_t bytes);
static inline void tt_algo_trace_step(struct tt_op *op, const char *name, int send_to,
                                      int recv_from, size_t bytes)
{
    if (__builtin_expect(op->trace != NULL, 0))
        tt_algo_trace_record(op, name, send_to, recv_from, bytes);
}

/* Compares the descriptor `peer` sent for this op with the op's own: ncclSuccess when they
 * match, else ncclInvalidUsage naming the field that differs and both values. A send matches
 * a receive of the same ticket, count and datatype. */
ncclResult_t tt_algo_desc_mismatch(const struct tt_op *op, const struct tt_op_desc *got,
                                   int peer);
static inline ncclResult_t tt_algo_check_desc(const struct tt_op *op,
                                              const struct tt_op_desc *got, int peer)
{
    /* The common case, a collective whose peer agrees, is one comparison of 24 bytes. */
    if (__builtin_expect(memcmp(got, &op->desc, sizeof *got) == 0, 1)) return ncclSuccess;
    return tt_algo_desc_mismatch(op, got, peer);
}

/* Mismatches the data does not show (docs/semantics.md, "Mismatched arguments"), over the
 * connections, for communicators without a local team spanning them (the engine compares the
 * team's published descriptors otherwise):
 *
 * A rooted collective (Broadcast, Reduce) leaves some ranks receiving nothing from a rank that
 * differs, so once its own part is done every rank passes the descriptors around the ring
 * (tt_algo_agree_start, then tt_algo_agree_step until *done): n-1 steps, each sends one
 * 28-byte frame (the descriptor of the rank it came from, and that rank) to the ring successor
 * and takes one from the predecessor, so each rank compares every rank's descriptor before it
 * reports success. The frames carry the op's descriptor like any slice, so a peer that runs
 * another collective fails on the first of them. It costs a rooted collective n-1 hops of
 * small frames over the network.
 *
 * A stalled collective may wait for what a peer that chose another algorithm or another root
 * never sends, while that peer's frames for the same operation sit unread on another of its
 * connections: tt_algo_peek_mismatch looks at the oldest unread frame of every collective
 * connection the op's environment holds (without consuming it), and returns the mismatch it
 * shows, if any. Slow path only, on the thread that drives the collectives.
 *
 * A sender stalls for good on a receiver whose communicator failed while its process lives on
 * (its side of the connection stops reading but stays open): tt_algo_peer_errors asks each send
 * connection of the op (a Send's own; a collective's ring and tree sends) whether its receiver
 * said why it failed, or stopped receiving with frames still to go (the transport's
 * peer_error), and returns that error. Slow path only, on the thread that drives the op. */
void tt_algo_agree_start(struct tt_op *op);
ncclResult_t tt_algo_agree_step(struct tt_op *op, bool *done, bool *progressed,
                                struct tt_wait_hint *hint);
ncclResult_t tt_algo_peek_mismatch(struct tt_op *op);
ncclResult_t tt_algo_peer_errors(struct tt_op *op);

/* The primitive executor (algo/prims.c): the `step` of every algorithm that is a schedule of
 * primitives (op->next). */
ncclResult_t tt_prims_step(struct tt_op *op, bool *done, bool *progressed,
                           struct tt_wait_hint *hint);

/* OneShot's payload per rank (algo/oneshot.c), and the mailbox slot bytes Direct needs for its
 * published addresses (algo/direct.c): the core sizes mailboxes with them. */
size_t tt_oneshot_payload_bytes(const struct tt_op *op);
size_t tt_direct_slot_bytes(void);

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

/* Hier's peers (local and rail neighbours, both directions) for the connections made at init
 * (fills peers[4], returns how many distinct ones; 0 when the shape is not valid). */
int tt_hier_all_peers(const struct tt_hier_shape *shape, int *peers);

/* Over the network a slot-sized slice is a long wait: the receiver reduces a slice only once
 * all of it arrived, and sends its result only after. Cutting each step of `step_bytes` into
 * about TT_CONN_SLOTS/2 slices (at least TT_NET_SLICE_MIN bytes, at most a slot) lets the
 * reduction of one slice overlap the arrival of the next. Sets op->slice_count and
 * op->chunk_count (half a FIFO of slices); a pure function of the op's shape, so every rank
 * slices alike. */
#define TT_NET_SLICE_MIN ((size_t)64 << 10)
void tt_algo_net_slicing(struct tt_op *op, size_t step_bytes);

/* The ring schedules (algo/ring.c). */
bool tt_ring_allreduce_next(struct tt_op *op, struct tt_prim *prim);
bool tt_ring_reducescatter_next(struct tt_op *op, struct tt_prim *prim);
bool tt_ring_allgather_next(struct tt_op *op, struct tt_prim *prim);
bool tt_ring_broadcast_next(struct tt_op *op, struct tt_prim *prim);
bool tt_ring_reduce_next(struct tt_op *op, struct tt_prim *prim);

#endif
