/* Algorithm and protocol selection: an alpha-beta cost model per (collective, algorithm,
 * bytes, ranks, hosts), restricted by NCCL_ALGO and NCCL_PROTO with NCCL's syntax. The choice is
 * a pure function of the operation and the communicator's shape, so every rank makes the same
 * choice without talking to the others (the variables must therefore be equal on all ranks).
 *
 * Algorithms: Ring (pipelined through the connection FIFOs; every collective; any topology),
 * OneShot (all ranks on one host: each rank publishes its whole input in its shared mailbox
 * and reads everyone's; latency-optimal, small messages; protocol LL), Direct (all ranks on one
 * host: each rank reduces its slice reading its peers' buffers with cross-memory attach, then
 * gathers; one copy, large messages; protocol Simple), Tree (recursive doubling for AllReduce,
 * binomial trees for Broadcast and Reduce, over connections to each partner; log2(n) steps
 * instead of the ring's n-1 or 2(n-1), for messages up to half a connection FIFO; any
 * topology; protocol Simple), Hier (AllReduce across hosts with equal numbers of ranks: reduce-
 * scatter within each host over shared memory, AllReduce across hosts on every local rank's
 * rail, all-gather within each host; protocol Simple). */
#ifndef TT_ALGO_TUNE_H
#define TT_ALGO_TUNE_H

#include <stdbool.h>
#include <stddef.h>

#include "algo/coll.h"
#include "nccl.h"
#include "transport/transport.h"

/* THE algorithm table, one line per algorithm: its enum suffix, the name of its descriptor
 * (`const struct tt_algo tt_algo_<name>`, defined in its own file algo/<name>.c: see algo.h) and
 * its NCCL_ALGO name. The order is the enum's and selection's tie-breaking order. Adding an
 * algorithm is its file plus one line here. */
#define TT_ALGO_TABLE(X)                                                                           \
    X(RING, ring, "Ring")                                                                          \
    X(ONESHOT, oneshot, "OneShot")                                                                 \
    X(DIRECT, direct, "Direct")                                                                    \
    X(TREE, tree, "Tree")                                                                          \
    X(HIER, hier, "Hier")

enum tt_algo_id {
#define TT_ALGO_ENUM_(id, name, text) TT_ALGO_##id,
    TT_ALGO_TABLE(TT_ALGO_ENUM_)
#undef TT_ALGO_ENUM_
    TT_ALGO_COUNT
};
enum tt_proto_id { TT_PROTO_SIMPLE, TT_PROTO_LL, TT_PROTO_COUNT };


/* The cost of one algorithm over one kind of link: an operation costs
 *     alpha_us * steps + bytes_moved / gbytes_per_s + syscall_us * syscalls
 * where steps, bytes_moved and syscalls come from the algorithm's shape (its estimator, in its
 * own file). How the constants are measured: docs/tuning.md, "Measuring the constants". */
struct tt_cost {
    double alpha_us;     /* one step: publishing data and seeing the peer's flag or credit */
    double gbytes_per_s; /* bytes per second (1e9) along the critical path, copies included */
    double syscall_us;   /* Direct: one process_vm_readv call */
    size_t chunk_bytes;  /* Ring: pipeline chunk of Broadcast/Reduce; Direct: bytes per call */
};

/* Microseconds to move `bytes` at `gbytes_per_s` (1 GB/s is 1000 bytes per microsecond). */
static inline double tt_transfer_us(double bytes, double gbytes_per_s)
{
    return bytes / (gbytes_per_s * 1e3);
}

/* What selection looks at. `bytes` is the size of the operation's per-rank buffer as NCCL's
 * count describes it (count * element size). */
struct tt_tune_input {
    enum tt_coll coll;
    size_t bytes;
    int nranks;
    int nhosts;
    enum tt_link link;        /* the ring's slowest link, as the transports chosen make it */
    bool oneshot_ok;          /* every rank on one host, mailboxes mapped */
    size_t oneshot_max_bytes; /* largest `bytes` OneShot takes: the mailbox slot's payload, divided
                                 by nranks for ReduceScatter (it publishes its whole input) */
    bool direct_ok;           /* every rank on one host, cross-memory attach works */
    unsigned cma_cost_pct;    /* a cross-memory copy's time over a memcpy's of the same bytes,
                                 in percent, agreed at init (TUTTI_CMA_COST, else measured:
                                 tt_cma_cost_pct); 0: unknown, Direct keeps its constant row */
    size_t llc_bytes;         /* the host's last-level cache, the smallest any rank reports
                                 (agreed at init); 0: unknown, taken as none */
    bool symmetric;           /* the buffers lie in symmetric windows in shareable memory, so
                                 Direct maps the peers' buffers instead of copying them */
    bool oversubscribed;      /* one host with more ranks than CPUs */
    int cpus;                 /* CPUs of the host (the most any rank may use, agreed at init);
                                 0: unknown, taken as one per rank */
    int hier_nlocal;          /* ranks per host when every host holds the same number and Hier's
                                 links were made; else 0 */
    /* The network's cost (TCP links): one step's latency and the bandwidth of one host's link,
     * from TUTTI_NET_LATENCY_US / TUTTI_NET_GBPS; 0: the built-in defaults (tt_tune_net). */
    float net_alpha_us;
    float net_gbps;
    size_t tree_max_bytes;    /* largest `bytes` Tree takes: half a connection FIFO, so that
                                 its sends never wait for the receiver; 0: no Tree at all (its
                                 connections were not made), even for 0 bytes */
};

struct tt_tune_choice {
    enum tt_algo_id algo;
    enum tt_proto_id proto;
    float estimate_us;
    bool fallback;    /* NCCL_ALGO/NCCL_PROTO allow nothing that can run it: Ring runs */
    char reason[128]; /* "cost model: 0.4 us vs Ring 9.0 us", "NCCL_ALGO: 9.0 us; ..." */
};

/* The allowed algorithms and protocols per collective, parsed once per communicator. An
 * algorithm allowed for a collective it does not implement (Direct for Broadcast) is never
 * chosen for it. Send, Recv and Copy allow Ring/Simple only. */
struct tt_tune {
    bool algo_allowed[TT_COLL_COUNT_][TT_ALGO_COUNT];
    bool proto_allowed[TT_COLL_COUNT_][TT_PROTO_COUNT];
    bool algo_forced;  /* NCCL_ALGO was set */
    bool proto_forced; /* NCCL_PROTO was set */
};

/* Parses NCCL_ALGO and NCCL_PROTO (tt_param_algo(), tt_param_proto()). A name that is not an
 * algorithm or protocol is ncclInvalidArgument naming the variable and listing the valid
 * names. NCCL's algorithms that Tutti lacks (Tree, NVLS, ...) are accepted and ignored, LL128
 * is another name of LL; a collective left with no (algorithm, protocol) pair Tutti implements
 * for it gets Ring/Simple, with one WARN. Logs the resulting sets at INFO (TUNING, ENV) when
 * either variable is set. The syntax and examples: docs/tuning.md. */
ncclResult_t tt_tune_init(struct tt_tune *tune);
/* Picks the cheapest allowed (algorithm, protocol) that can run this operation; Ring/Simple
 * always can, and is the fallback when the variables exclude everything that could. Send, Recv,
 * Copy (and anything else not selectable) and one-rank communicators get Ring/Simple. Runs on
 * every collective: no allocation, no logging (the caller logs the choice and its reason), about
 * 50 ns. The reason's forms are listed in docs/tuning.md. */
void tt_tune_select(const struct tt_tune *tune, const struct tt_tune_input *in,
                    struct tt_tune_choice *out);
/* The collectives the model selects for (AllReduce, Broadcast, Reduce, AllGather,
 * ReduceScatter), whether `algo` implements `coll`, and the one protocol each algorithm uses. */
bool tt_tune_selectable(enum tt_coll coll);
bool tt_tune_implements(enum tt_algo_id algo, enum tt_coll coll);
enum tt_proto_id tt_tune_proto_of(enum tt_algo_id algo);
/* Whether `algo` can run this operation here, the variables aside (what tt_tune_select
 * considers). */
bool tt_tune_can_run(const struct tt_tune_input *in, enum tt_algo_id algo);
/* The model's estimate for one algorithm (ncclGroupSimulateEnd, logs, docs): +infinity when
 * the algorithm does not implement the collective or needs one host and there are several. The
 * other conditions (oneshot_ok, oneshot_max_bytes, direct_ok) are checked by tt_tune_select. */
float tt_tune_estimate_us(const struct tt_tune_input *in, enum tt_algo_id algo);
/* The network's constants of `in`, the defaults where it leaves them 0: one step's latency in
 * microseconds and GB/s (algorithms price their TCP steps with them). */
#define TT_NET_DEFAULT_ALPHA_US 15.0
#define TT_NET_DEFAULT_GBPS 2.0
static inline double tt_tune_net_alpha_us(const struct tt_tune_input *in)
{
    return in->net_alpha_us > 0 ? in->net_alpha_us : TT_NET_DEFAULT_ALPHA_US;
}
static inline double tt_tune_net_gbps(const struct tt_tune_input *in)
{
    return in->net_gbps > 0 ? in->net_gbps : TT_NET_DEFAULT_GBPS;
}
const char *tt_algo_name(enum tt_algo_id algo);
const char *tt_proto_name(enum tt_proto_id proto);

#endif
