/* The communicator. It owns its module objects (bootstrap, transport context, connections, the
 * local team, the tuning sets) rather than absorbing their fields, and embeds the run-time state
 * (core/state.h) that is all the engine sees of it. Live communicators are kept in a registry
 * (core/comm.c), so a destroyed or forged handle is recognised without touching its memory.
 *
 * Thread-safety: everything here is set during init and read-only afterwards, except the state
 * (atomic), the lazily made point-to-point connections (under bootstrap_lock) and the
 * registration tables (under their own locks, core/mem.c, core/redop.c). */
#ifndef TT_CORE_COMM_H
#define TT_CORE_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "algo/algo.h"
#include "algo/tune.h"
#include "bootstrap/bootstrap.h"
#include "core/engine.h"
#include "core/state.h"
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
    uint64_t start_ticks; /* when the process started (it and pid name one process) */
    uint64_t choice_hash; /* the settings that choose algorithms and paths (setup.c) */
};

/* Point-to-point connections to one peer, made on first use (core/connect.c). */
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

struct ncclComm {
    struct tt_comm_state st;   /* rank, nranks, flags, first error: what the engine sees */
    uint64_t id;               /* unique in this process, never reused (selection memo) */
    struct tt_bootstrap *bootstrap;
    pthread_mutex_t bootstrap_lock; /* the bootstrap is not thread-safe: hold this to use it */
    /* Splits issued inside groups run on threads of their own, in issue order per parent
     * (core/comm_split.c): the next ticket, and the one whose turn it is, under split_lock. */
    pthread_mutex_t split_lock;
    pthread_cond_t split_turn;
    uint64_t split_next;
    uint64_t split_serving;
    struct tt_peer_info *peers;
    const struct tt_transport **transports; /* [nranks]: towards each peer (transport table) */
    struct tt_transport_ctx tctx;
    struct tt_ring ring;
    struct tt_lane ring_lane;  /* orders the collectives that use the ring */
    struct tt_p2p_peer *p2p;   /* [nranks] */
    struct tt_tree_link *tree; /* [nranks]: Tree's connections, made at init when wanted */
    bool tree_ready;           /* they are: Tree may run (see wants_tree in core/comm.c) */
    void *tree_tmp;            /* Tree Reduce's partial result on non-roots (made with tree) */
    int nhosts;
    int local_nranks;          /* ranks on this host, this one included */
    enum tt_link ring_link;    /* the slowest link of the ring, as every rank computes it */
    struct tt_hier_shape hier; /* hosts of equal size: local and rail neighbours (Hier) */
    float net_alpha_us;        /* the network's cost for the model (TUTTI_NET_*; 0: default) */
    float net_gbps;
    struct tt_team *team;      /* the local team (owned), when 2+ ranks share this host */
    bool team_spans;           /* it holds every rank (OneShot, Direct may run; st.team set) */
    bool direct_ok;            /* cross-memory attach works between every pair */
    uint32_t cma_cost_pct;     /* a cross-memory copy's time over memcpy's, percent, the mean of
                                  every rank's (agreed at init; 0: unknown) */
    size_t llc_bytes;          /* the smallest last-level cache of the ranks (agreed at init;
                                  0: unknown), for Direct's cost */
    struct tt_direct_scratch scratch;
    struct tt_algo_env algo_env; /* what algorithms bind to (core/comm.c fills it at init) */
    struct tt_tune tune;
    _Atomic uint32_t fallback_warned; /* collectives (bits) whose selection fell back to Ring */
    _Atomic int sym_windows; /* symmetric windows in shareable memory everywhere (core/mem.c) */
    size_t shareable_bytes;  /* TUTTI_SHAREABLE_BYTES at init, equal on every rank (0: none) */
    bool oversubscribed; /* one host, more ranks than any rank has CPUs (agreed at init) */
    uint32_t host_cpus;  /* the most CPUs any rank may run on (agreed at init) */
    size_t slot_bytes;
    bool blocking;              /* config.blocking (NCCL_COMM_BLOCKING overrides) */
    bool init_thread_running;   /* a background init to join */
    pthread_t init_thread;
    ncclUniqueId init_id;
    cudaStream_t background;    /* nonblocking communicators: their operations' queue */
    int cuda_device;            /* the CUDA device current at init (-1: none; CUDA builds) */
    struct tt_device_team *dev_team; /* the device-direct path, when every rank is a GPU rank of
                                        this host (device/device.h; core/setup.c) */
    bool dev_team_logged;       /* its first AllReduce was logged */
    _Atomic bool dev_watched;   /* set once dev_team is ready: the device watchdog looks */
    _Atomic bool dev_released;  /* its device streams were released (core/watch.c) */
    _Atomic bool dev_marked;    /* and the team told that this rank failed */
    void (*dev_release)(struct ncclComm *comm); /* releases again: work that raced a release */
    pthread_mutex_t tables_lock;   /* guards redops and regs */
    struct tt_redop_table *redops; /* user ops; NULL until the first is created */
    struct tt_reg_table *regs;     /* registrations and windows; NULL until the first */
    struct tt_trace *trace;        /* TUTTI_TRACE_FILE's timeline (util/trace.h), else NULL */
};

#endif
