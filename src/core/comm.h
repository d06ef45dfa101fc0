/* The communicator. It owns its module objects (bootstrap, transport context, ring
 * connections) rather than absorbing their fields. Live communicators are kept in a registry
 * (comm.c), so a destroyed or forged handle is recognised without touching its memory. */
#ifndef TT_CORE_COMM_H
#define TT_CORE_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "algo/algo.h"
#include "algo/tune.h"
#include "core/task.h"
#include "bootstrap/bootstrap.h"
#include "transport/transport.h"

/* What every rank tells every other at init (allgathered over the bootstrap). */
struct tt_peer_info {
    uint32_t version;
    int32_t rank;
    int32_t pid;
    uint32_t cpus; /* CPUs this rank may run on (its affinity) */
    uint64_t host_hash;
    uint64_t slot_bytes;
    uint64_t nonce;
};

/* Point-to-point connections to one peer, made on first use (core/p2p.c). */
struct tt_p2p_peer {
    struct tt_conn send;
    struct tt_conn recv;
    bool send_ready;
    bool recv_ready;
    struct tt_lane send_lane;
    struct tt_lane recv_lane;
};

struct tt_ring {
    int prev;
    int next;
    struct tt_conn send; /* to next */
    struct tt_conn recv; /* from prev */
};

struct tt_redop_table; /* core/redop.c */
struct tt_reg_table;   /* core/mem.c */

enum tt_comm_state { TT_COMM_INITIALIZING, TT_COMM_READY, TT_COMM_FAILED };

/* The cost model's last answer (core/engine.c), reused for a repeat of the same collective and
 * size: the model is deterministic, so every rank still makes the same choice. */
struct tt_tune_memo {
    bool valid;
    int coll;
    size_t bytes;
    bool symmetric;
    enum tt_algo_id algo;
    enum tt_proto_id proto;
    float estimate_us;
};

struct ncclComm {
    int rank;
    int nranks;
    struct tt_bootstrap *bootstrap;
    pthread_mutex_t bootstrap_lock; /* the bootstrap is not thread-safe: hold this to use it */
    struct tt_peer_info *peers;
    struct tt_transport_ctx tctx;
    struct tt_ring ring;
    struct tt_lane ring_lane;  /* orders the collectives that use the ring */
    struct tt_p2p_peer *p2p;   /* [nranks] */
    struct tt_tree_link *tree; /* [nranks]: Tree's connections, made at init when wanted */
    bool tree_ready;           /* they are: Tree may run (see wants_tree in core/comm.c) */
    void *tree_tmp;            /* Tree Reduce's partial result on non-roots (first use) */
    int nhosts;
    struct tt_host *host;      /* mailboxes, when every rank is on this host (else NULL) */
    bool direct_ok;            /* cross-memory attach works between every pair */
    struct tt_direct_scratch scratch;
    struct tt_tune tune;
    struct tt_tune_memo tune_memo;
    int sym_windows; /* symmetric windows in shareable memory everywhere (core/mem.c) */
    bool oversubscribed; /* one host, more ranks than any rank has CPUs (agreed at init) */
    uint32_t host_cpus;  /* the most CPUs any rank may run on (agreed at init) */
    size_t slot_bytes;
    int64_t timeout_ms;
    uint32_t spin_limit; /* polls before a blocked wait yields, adapted (core/engine.c) */
    uint32_t spin_max;   /* its ceiling (see choose_spin_limit) */
    /* When this rank last moved a thread off a peer's CPU (core/engine.c); a calling thread and
     * the stream engine thread may both move. */
    _Atomic uint64_t moved_off_ns;
    _Atomic int abort;
    ncclResult_t async_error;
    bool blocking;              /* config.blocking (NCCL_COMM_BLOCKING overrides) */
    _Atomic int state;          /* enum tt_comm_state */
    ncclResult_t init_result;
    bool init_thread_running;   /* a background init to join */
    pthread_t init_thread;
    ncclUniqueId init_id;
    bool finalized;
    _Atomic int revoked;
    cudaStream_t background;    /* nonblocking communicators: their operations' queue */
    uint64_t op_seq;
    struct tt_redop_table *redops; /* user ops; NULL until the first is created */
    struct tt_reg_table *regs;     /* registrations and windows; NULL until the first */
};

/* Records `res` as the communicator's first error (ncclCommGetAsyncError); thread-safe. */
static inline void tt_comm_latch(struct ncclComm *comm, ncclResult_t res)
{
    int expected = ncclSuccess;
    __atomic_compare_exchange_n((int *)&comm->async_error, &expected, (int)res, false,
                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* Waits for a background init to end and returns its result. */
ncclResult_t tt_comm_wait_ready(struct ncclComm *comm);
/* ncclSuccess when `comm` may take operations, else the reason (initialising, failed init,
 * finalized) as an error naming `caller`. */
ncclResult_t tt_comm_check_usable(struct ncclComm *comm, const char *caller);

/* The transport for a connection to `peer`: self, shared memory or TCP (core/comm.c). */
const struct tt_transport *tt_comm_pick_transport(const struct ncclComm *comm, int peer);

/* Free the per-communicator tables (accept NULL). */
void tt_redop_table_destroy(struct tt_redop_table *table);
void tt_reg_table_destroy(struct tt_reg_table *table);

#endif
