/* Selection of algorithm and protocol: an alpha-beta cost model evaluated on every collective,
 * within the per-collective allowed sets that tune_env.c parses from NCCL_ALGO / NCCL_PROTO once
 * per communicator. The
 * model's constants live in one table, cost_table below; everything else is arithmetic on the
 * operation's shape, so every rank that sees the same variables makes the same choice.
 * Invariant: after tt_tune_init every schedulable collective allows at least one (algorithm,
 * protocol) pair that Tutti implements for it, and tt_tune_select neither allocates nor logs. */
#include "algo/tune.h"

#include <math.h>
#include <stdint.h>

/* ---- The cost model ------------------------------------------------------------------------ */

enum tune_link { TUNE_LINK_SHM, TUNE_LINK_TCP, TUNE_LINK_COUNT };

/* The cost of one algorithm over one kind of link: an operation costs
 *     alpha_us * steps + bytes_moved / gbytes_per_s + syscall_us * syscalls
 * where steps, bytes_moved and syscalls come from the algorithm's shape (see the estimators). */
struct tune_cost {
    double alpha_us;     /* one step: publishing data and seeing the peer's flag or credit */
    double gbytes_per_s; /* bytes per second (1e9) along the critical path, copies included */
    double syscall_us;   /* Direct: one process_vm_readv call */
    size_t chunk_bytes;  /* Ring: pipeline chunk of Broadcast/Reduce; Direct: bytes per call */
};

/* THE table of constants, in microseconds, GB/s (1e9 bytes per second) and bytes.
 *
 * How to measure them (docs/tuning.md, "Measuring the constants"): run tutti-perf with one
 * algorithm forced (NCCL_ALGO=Ring, OneShot or Direct) on the target machine; alpha_us is the
 * time of an 8-byte operation divided by its steps (Ring AllReduce: 2(n-1), OneShot: 1,
 * Direct: 2), and gbytes_per_s is bytes_moved / time at 64 MiB (Ring, Direct) or at the largest
 * mailbox payload (OneShot), bytes_moved as the estimators below count it. syscall_us is the
 * time of one process_vm_readv of a few bytes. TCP rows come from the same runs across two
 * hosts. The shared-memory values were measured on the 2-core development VM with 2 ranks,
 * float32 sum AllReduce, each algorithm forced (tutti-perf -b 64K -e 256M -f 16): Ring moved
 * 1 MiB at ~7 GB/s but 16-256 MiB at 3-7 GB/s, Direct 6.8-7 GB/s from 1 to 256 MiB, OneShot
 * 32 KiB in 6 us; a Ring step at 8 B took ~0.6 us (AllReduce 1.3 us in 2 steps, Broadcast
 * 0.56 us in one). The TCP row is still a seed. Check crossovers with tools/tutti-tune. */
static const struct tune_cost cost_table[TT_ALGO_COUNT][TUNE_LINK_COUNT] = {
    [TT_ALGO_RING] = {
        [TUNE_LINK_SHM] = {.alpha_us = 0.6, .gbytes_per_s = 6.0, .chunk_bytes = 524288},
        [TUNE_LINK_TCP] = {.alpha_us = 15.0, .gbytes_per_s = 2.0, .chunk_bytes = 524288},
    },
    /* OneShot and Direct exist within one host only: no TCP row. */
    [TT_ALGO_ONESHOT] = {
        [TUNE_LINK_SHM] = {.alpha_us = 0.4, .gbytes_per_s = 16.0},
    },
    [TT_ALGO_DIRECT] = {
        [TUNE_LINK_SHM] = {.alpha_us = 5.0, .gbytes_per_s = 7.0, .syscall_us = 2.0,
                           .chunk_bytes = 262144},
    },
    /* Tree: steps over connections like the ring's, a whole message each. Across hosts a step
     * costs what a ring step does (2 ranks on two NCCL_HOSTID hosts, AllReduce 8 B: Tree's one
     * step 2.9-6.2 us, the ring's two 4.8-11.4 us). Within a host a Tree step measured about 3x
     * a ring step (2 ranks, 8 B-4 KiB: 0.75 us in one step against the ring's 0.44 in two), since
     * it also copies the input and ends with a reduction pass, so OneShot and the ring keep the
     * small messages there. */
    [TT_ALGO_TREE] = {
        [TUNE_LINK_SHM] = {.alpha_us = 2.0, .gbytes_per_s = 6.0},
        [TUNE_LINK_TCP] = {.alpha_us = 15.0, .gbytes_per_s = 2.0},
    },
};

/* Direct AllReduce over ordinary buffers since it pushes its block from cache (algo/direct.c)
 * instead of gathering: measured with 2 ranks, Direct forced (tutti-perf -n 2000), 16 KiB in
 * 4.0 us, 64 KiB in 5.9, 256 KiB in 12, 1 MiB in 48.5 (a VM phase in which the ring took 13,
 * 42 and 140 us; in the other phase both took 3-9 us up to 256 KiB and the ring 31-37 against
 * Direct's 40 at 1 MiB), hence 1 us per phase, 0.7 us per call and 20 GB/s. The other
 * collectives keep the row above, and so does an oversubscribed host, where the ring still
 * matched or beat it (4 ranks on 2 cores, 32 KiB-2 MiB: ring 7-13, 16-18, 58-92, 253-257 us;
 * Direct 10-16, 19-30, 75-78, 265-274). */
static const struct tune_cost direct_allreduce = {.alpha_us = 1.0, .gbytes_per_s = 20.0,
                                                  .syscall_us = 0.7, .chunk_bytes = 262144};

/* Direct when the buffers lie in symmetric windows in shareable memory: the peers map them,
 * so there are no kernel calls and the copies and folds run at memory speed. Measured like the
 * table above with tutti-perf -R 2 (2 ranks, AllReduce, Direct forced): 2.0 us at 1 KiB in its
 * two phases; 1 MiB in 20-22 us, 16 MiB in 530-600 us, 256 MiB in 15.4 ms (bytes moved: the
 * estimator's count). */
static const struct tune_cost direct_mapped = {.alpha_us = 1.0, .gbytes_per_s = 30.0,
                                              .chunk_bytes = 262144};

/* How much slower Direct's cross-memory copies run with more ranks than CPUs (see direct_us). */
#define OVERSUBSCRIBED_SLOWDOWN 2.0

/* Which collectives each algorithm implements (algo/ring.c, algo/oneshot.c, algo/direct.c);
 * keep in step with them. Send, Recv and Copy always run on the connections (Ring/Simple). */
static const bool implements[TT_ALGO_COUNT][TT_COLL_COUNT_] = {
    [TT_ALGO_RING] = {[TT_COLL_ALLREDUCE] = true, [TT_COLL_BROADCAST] = true,
                      [TT_COLL_REDUCE] = true, [TT_COLL_ALLGATHER] = true,
                      [TT_COLL_REDUCESCATTER] = true},
    [TT_ALGO_ONESHOT] = {[TT_COLL_ALLREDUCE] = true, [TT_COLL_BROADCAST] = true,
                         [TT_COLL_REDUCE] = true, [TT_COLL_ALLGATHER] = true,
                         [TT_COLL_REDUCESCATTER] = true},
    [TT_ALGO_DIRECT] = {[TT_COLL_ALLREDUCE] = true, [TT_COLL_BROADCAST] = true,
                        [TT_COLL_REDUCE] = true, [TT_COLL_ALLGATHER] = true,
                        [TT_COLL_REDUCESCATTER] = true},
    [TT_ALGO_TREE] = {[TT_COLL_ALLREDUCE] = true, [TT_COLL_BROADCAST] = true,
                      [TT_COLL_REDUCE] = true},
};

/* The (algorithm, protocol) pairs that exist, in tie-breaking order (first wins a tie). */
struct tune_pair {
    enum tt_algo_id algo;
    enum tt_proto_id proto;
};
static const struct tune_pair pairs[] = {
    {TT_ALGO_RING, TT_PROTO_SIMPLE},
    {TT_ALGO_ONESHOT, TT_PROTO_LL},
    {TT_ALGO_DIRECT, TT_PROTO_SIMPLE},
    {TT_ALGO_TREE, TT_PROTO_SIMPLE},
};
enum { NPAIRS = sizeof pairs / sizeof pairs[0] };

bool tt_tune_selectable(enum tt_coll coll)
{
    return coll == TT_COLL_ALLREDUCE || coll == TT_COLL_BROADCAST || coll == TT_COLL_REDUCE ||
           coll == TT_COLL_ALLGATHER || coll == TT_COLL_REDUCESCATTER;
}

/* Microseconds to move `bytes` at `gbytes_per_s` (1 GB/s is 1000 bytes per microsecond). */
static double transfer_us(double bytes, double gbytes_per_s)
{
    return bytes / (gbytes_per_s * 1e3);
}

/* A chain of n-1 hops (Broadcast, Reduce over the ring) on a host with more ranks than CPUs, as
 * a loop of calls runs it: the root does not wait for the end of the chain, so consecutive calls
 * overlap down the chain and a call costs one hop's hand-off plus its share of the copying,
 * two copies of the buffer per hop (in from the previous rank, out to the next) spread over the
 * host's CPUs. ROOTED_CHAIN_GBPS comes from 3 and 4 ranks on the 2-CPU VM, Ring forced
 * (tutti-perf -n 2000 / -n 50, two runs each): Broadcast 4 ranks 16 KiB 1.5-2.3 us, 256 KiB
 * 17-28, 1 MiB 60-144, 4 MiB 420-460, 16 MiB 1.6-2.0 ms, 64 MiB 7.6-8.2 ms; 3 ranks 64 KiB
 * 3.8-4.9 us, 4 MiB 224-306, 16 MiB 1.1-1.5 ms; Reduce 4 ranks 16 KiB 1.0-3.0 us, 1 MiB
 * 61-106. The per-operation latency of one hop per rank (the rows above) overstated these 2-10
 * times, and OneShot, whose root must wait for every reader before it refills its slot, and
 * Direct, whose kernel copies cannot all run at once, measured up to 3x slower at every size
 * (docs/tuning.md). */
#define ROOTED_CHAIN_GBPS 25.0

static double rooted_chain_us(const struct tt_tune_input *in, const struct tune_cost *c,
                              double alone_us)
{
    double n = in->nranks, cpus = in->cpus > 0 && in->cpus < in->nranks ? in->cpus : n;
    double loop_us = c->alpha_us +
                     transfer_us(2 * (n - 1) / cpus * (double)in->bytes, ROOTED_CHAIN_GBPS);
    return fmin(loop_us, alone_us); /* a call in a loop costs no more than a call alone */
}

/* Ring. AllReduce is a reduce-scatter then an allgather around the ring: 2(n-1) steps, each
 * moving one n-th of the buffer over every link at once. AllGather and ReduceScatter are one of
 * the two halves: n-1 steps, each moving one rank's block (`bytes`, NCCL's per-rank count).
 * Broadcast and Reduce are a chain of n-1 hops, pipelined in chunks: the whole buffer crosses
 * the first link, and the last chunk then needs n-2 more hops to reach the end of the chain. */
static double ring_us(const struct tt_tune_input *in, const struct tune_cost *c)
{
    double n = in->nranks, bytes = (double)in->bytes;
    double steps, moved;
    switch (in->coll) {
    case TT_COLL_ALLREDUCE:
        steps = 2 * (n - 1);
        moved = 2 * (n - 1) / n * bytes;
        break;
    case TT_COLL_ALLGATHER:
    case TT_COLL_REDUCESCATTER:
        steps = n - 1;
        moved = (n - 1) * bytes;
        break;
    case TT_COLL_BROADCAST:
    case TT_COLL_REDUCE:
        steps = n - 1;
        moved = bytes + (n > 2 ? n - 2 : 0) * fmin(bytes, (double)c->chunk_bytes);
        if (in->oversubscribed && in->nhosts <= 1)
            return rooted_chain_us(in, c, c->alpha_us * steps +
                                              transfer_us(moved, c->gbytes_per_s));
        break;
    default: /* one connection, one way */
        steps = 1;
        moved = bytes;
        break;
    }
    return c->alpha_us * steps + transfer_us(moved, c->gbytes_per_s);
}

/* OneShot: one step. A rank copies its payload into its mailbox slot (ReduceScatter publishes
 * its whole input, n blocks), then reads what it needs from the slots: all n of them for
 * AllReduce, AllGather, ReduceScatter (its own block of each) and Reduce (at the root, the
 * critical path), the root's alone for Broadcast. */
static double oneshot_us(const struct tt_tune_input *in, const struct tune_cost *c)
{
    double n = in->nranks, bytes = (double)in->bytes;
    double moved;
    double alpha = c->alpha_us;
    switch (in->coll) {
    case TT_COLL_BROADCAST:
    case TT_COLL_REDUCE:
        /* The root may refill its slot only after every reader's "done" event (Reduce: a
         * sender may refill its own only after the root's), so it cannot run ahead as down a
         * pipelined chain: Broadcast measured 0.8-2.1 us at 2-4 ranks against the ring's
         * 0.5-0.6 us, Reduce at 1 KiB 0.15-0.62 us against 0.11-0.46 (2 ranks) and 1.7-4.9
         * against 0.34-0.99 (4 ranks), hence a hand-off per reader, both ways. */
        alpha *= 2 * (n - 1);
        moved = in->coll == TT_COLL_BROADCAST ? 2 * bytes : bytes + n * bytes;
        break;
    case TT_COLL_REDUCESCATTER:
        moved = n * bytes + n * bytes;
        break;
    default:
        moved = bytes + n * bytes;
        break;
    }
    return alpha + transfer_us(moved, c->gbytes_per_s);
}

/* Direct. AllReduce: a rank reads its n-th of the buffer from each of its n-1 peers by
 * cross-memory attach, one call per chunk, reduces it, and writes each reduced chunk into the
 * n-1 peers' outputs, one call per chunk and peer; it moves 2(n-1) n-ths in all. Its two
 * phases are the exchange of addresses and the wait for everyone's pushes. The others have one
 * phase: AllGather reads n-1 whole blocks (one call each), Broadcast one buffer, and
 * ReduceScatter/Reduce fold n-1 peers' blocks through the staging chunks. */
static double direct_us(const struct tt_tune_input *in, const struct tune_cost *c)
{
    double n = in->nranks, bytes = (double)in->bytes, chunk = (double)c->chunk_bytes;
    double phases = 1, calls, moved;
    switch (in->coll) {
    case TT_COLL_ALLREDUCE: {
        double slice = bytes / n;
        phases = 2;
        calls = 2 * (n - 1) * ceil(slice / chunk);
        moved = 2 * (n - 1) * slice;
        break;
    }
    case TT_COLL_ALLGATHER:
        calls = n - 1;
        moved = (n - 1) * bytes;
        break;
    case TT_COLL_BROADCAST:
        calls = 1;
        moved = bytes;
        break;
    default:
        /* ReduceScatter: n-1 peers' blocks through the staging area. Reduce folds only a block
         * per rank and pushes it to the root, but is charged as if the root folded every input
         * and then pushed it as much again (ordinary buffers): forced, it still lost to the ring
         * in both VM phases (2 ranks, 256 KiB-4 MiB: 10-19, 41-74, 165-206 us against the
         * ring's 6-11, 29-39, 104-159; again on 2026-11-22, 1, 4, 16, 64 MiB: 38-41, 161-173,
         * 918-1660, 6805-6975 us against 25-32, 113-125, 640-755, 4018-4382), which the honest
         * count with these constants would not predict. */
        calls = (n - 1) * ceil(bytes / chunk);
        moved = (n - 1) * bytes;
        if (in->coll == TT_COLL_REDUCE && !in->symmetric) moved += bytes;
        break;
    }
    /* Cross-memory attach with more ranks than CPUs: every rank's kernel copies must run at
     * once, and they cannot. Measured with 4 ranks on 2 cores (forced, plain buffers): AllReduce
     * Direct 200 vs Ring 120 us at 1 MiB, 1.1 vs 0.77 ms at 4 MiB, 6.9-7.9 vs 4.5-5.2 ms at 16
     * MiB; ReduceScatter 3.6 vs 2.2 ms at 16 MiB. Mapped buffers (symmetric) keep their speed:
     * AllReduce 1 MiB in 62 us. */
    double gbps = c->gbytes_per_s;
    if (in->oversubscribed && !in->symmetric) gbps /= OVERSUBSCRIBED_SLOWDOWN;
    return phases * c->alpha_us + transfer_us(moved, gbps) + c->syscall_us * calls;
}

/* Tree. AllReduce is recursive doubling: log2(p) rounds among p ranks, p the largest power of
 * two <= n, each exchanging the whole message with one partner; the n - p ranks left over first
 * hand their input to a partner and get the result back at the end (two more steps).
 * Broadcast and Reduce walk a binomial tree: ceil(log2 n) levels, and the root, which has the
 * most children, sends (or receives) the whole message once per level. */
static double tree_us(const struct tt_tune_input *in, const struct tune_cost *c)
{
    int n = in->nranks, levels = 0, p = 1;
    while (p * 2 <= n) {
        p *= 2;
        levels++;
    }
    double steps = in->coll == TT_COLL_ALLREDUCE ? levels + (p < n ? 2 : 0)
                                                 : levels + (p < n ? 1 : 0);
    return c->alpha_us * steps + transfer_us(steps * (double)in->bytes, c->gbytes_per_s);
}

float tt_tune_estimate_us(const struct tt_tune_input *in, enum tt_algo_id algo)
{
    if ((unsigned)algo >= TT_ALGO_COUNT) return INFINITY;
    bool one_host = in->nhosts <= 1;
    /* Across hosts every ring step waits for a TCP hop, so TCP's costs govern the ring. */
    const struct tune_cost *c = &cost_table[algo][one_host ? TUNE_LINK_SHM : TUNE_LINK_TCP];
    if (algo == TT_ALGO_DIRECT && in->coll == TT_COLL_ALLREDUCE && !in->oversubscribed)
        c = &direct_allreduce;
    if (algo == TT_ALGO_DIRECT && in->symmetric) c = &direct_mapped;
    if (!tt_tune_selectable(in->coll)) return algo == TT_ALGO_RING ? (float)ring_us(in, c) : INFINITY;
    if (!implements[algo][in->coll]) return INFINITY;
    switch (algo) {
    case TT_ALGO_RING: return (float)ring_us(in, c);
    case TT_ALGO_ONESHOT:
        if (!one_host) return INFINITY;
        /* OneShot Broadcast lost to the ring at every size measured, 8 B-64 KiB at 2 and 4
         * ranks, in both of the VM's phases (2 ranks 512 B 0.59-0.64 vs 0.42-0.44 us, 64 KiB
         * 2.1-3.3 vs 1.4-2.6; 4 ranks 8 B 1.5-2.1 vs 0.33, 32 KiB 6.3-6.5 vs 3.3): its root
         * waits for every reader before it may refill its slot, while the ring's chain
         * pipelines. The alpha-beta rows cannot show that, so with 2 ranks, where the ring is
         * one hop, OneShot is charged a half more than the ring: chosen only where forced.
         * With more ranks the ring's rows, calibrated on large messages, overstate a chain of
         * small copies several times over, and Direct would win on paper where it measured
         * slowest of the three (4 ranks, 32 KiB: 7.3-8.4 us), so OneShot keeps its estimate. */
        if (in->coll == TT_COLL_BROADCAST && in->nranks == 2)
            return (float)(1.5 * ring_us(in, &cost_table[TT_ALGO_RING][TUNE_LINK_SHM]));
        return (float)oneshot_us(in, c);
    case TT_ALGO_DIRECT: return one_host ? (float)direct_us(in, c) : INFINITY;
    case TT_ALGO_TREE: return (float)tree_us(in, c);
    default: return INFINITY;
    }
}

/* ---- Selection ----------------------------------------------------------------------------- */

bool tt_tune_can_run(const struct tt_tune_input *in, enum tt_algo_id algo)
{
    if ((unsigned)algo >= TT_ALGO_COUNT || !implements[algo][in->coll]) return false;
    switch (algo) {
    case TT_ALGO_RING: return true;
    case TT_ALGO_ONESHOT: return in->oneshot_ok && in->bytes <= in->oneshot_max_bytes;
    case TT_ALGO_DIRECT: return in->direct_ok;
    case TT_ALGO_TREE:
        return in->nranks > 1 && in->tree_max_bytes > 0 && in->bytes <= in->tree_max_bytes;
    default: return false;
    }
}

/* "NCCL_ALGO", "NCCL_PROTO" or both, from a mask of 1 (algo) and 2 (proto). */
static const char *vars_named(unsigned which)
{
    static const char *const names[4] = {"", "NCCL_ALGO", "NCCL_PROTO", "NCCL_ALGO/NCCL_PROTO"};
    return names[which & 3];
}

/* The reason is written on every collective, so it is built by hand: snprintf's "%.1f" alone
 * costs more than the whole selection. A writer truncates silently and always terminates. */
struct writer {
    char *at;
    char *end; /* the last byte, kept for the terminator */
};

static void put(struct writer *w, const char *text)
{
    while (*text != '\0' && w->at < w->end) *w->at++ = *text++;
    *w->at = '\0';
}

/* "12.3 us": microseconds to one decimal. */
static void put_us(struct writer *w, float us)
{
    if (!(us < 1e15f)) {
        put(w, "inf us");
        return;
    }
    uint64_t tenths = (uint64_t)((double)us * 10 + 0.5);
    char digits[24], *d = digits + sizeof digits;
    *--d = '\0';
    *--d = (char)('0' + tenths % 10);
    *--d = '.';
    tenths /= 10;
    do {
        *--d = (char)('0' + tenths % 10);
        tenths /= 10;
    } while (tenths != 0);
    put(w, d);
    put(w, " us");
}

void tt_tune_select(const struct tt_tune *tune, const struct tt_tune_input *in,
                    struct tt_tune_choice *out)
{
    struct writer w = {out->reason, out->reason + sizeof out->reason - 1};
    out->algo = TT_ALGO_RING;
    out->proto = TT_PROTO_SIMPLE;
    if (!tt_tune_selectable(in->coll) || in->nranks <= 1) {
        out->estimate_us = tt_tune_estimate_us(in, TT_ALGO_RING);
        put(&w, tt_tune_selectable(in->coll) ? "single rank" : "point-to-point");
        return;
    }

    /* The cheapest and the runner-up among the allowed pairs that can run, and the cheapest of
     * all that can run, to say what the variables changed. */
    int best = -1, second = -1, best_any = -1;
    float est[NPAIRS] = {0};
    unsigned excluded_by = 0; /* 1: NCCL_ALGO excluded a pair that could run; 2: NCCL_PROTO */
    for (int k = 0; k < NPAIRS; k++) {
        if (!tt_tune_can_run(in, pairs[k].algo)) continue;
        est[k] = tt_tune_estimate_us(in, pairs[k].algo);
        if (best_any < 0 || est[k] < est[best_any]) best_any = k;
        unsigned why = (tune->algo_allowed[in->coll][pairs[k].algo] ? 0u : 1u) |
                       (tune->proto_allowed[in->coll][pairs[k].proto] ? 0u : 2u);
        if (why != 0) {
            excluded_by |= why;
            continue;
        }
        if (best < 0 || est[k] < est[best]) {
            second = best;
            best = k;
        } else if (second < 0 || est[k] < est[second]) {
            second = k;
        }
    }

    if (best < 0) {
        /* The variables allow only algorithms that cannot run this operation here. */
        out->estimate_us = tt_tune_estimate_us(in, TT_ALGO_RING);
        put(&w, "fallback: nothing ");
        put(&w, vars_named((tune->algo_forced ? 1u : 0u) | (tune->proto_forced ? 2u : 0u)));
        put(&w, " allows can run here");
        return;
    }
    out->algo = pairs[best].algo;
    out->proto = pairs[best].proto;
    out->estimate_us = est[best];
    /* "cost model: 0.4 us vs Ring 9.0 us[, within NCCL_ALGO]" when the model chose among
     * several; "NCCL_ALGO: 18.0 us; cost model alone: OneShot 0.4 us" when a variable left one;
     * "only candidate: 9.0 us" when nothing else can run here. */
    if (second >= 0) {
        put(&w, "cost model: ");
        put_us(&w, est[best]);
        put(&w, " vs ");
        put(&w, tt_algo_name(pairs[second].algo));
        put(&w, " ");
        put_us(&w, est[second]);
        if (excluded_by != 0) {
            put(&w, ", within ");
            put(&w, vars_named(excluded_by));
        }
    } else if (excluded_by == 0) {
        put(&w, "only candidate: ");
        put_us(&w, est[best]);
    } else {
        put(&w, vars_named(excluded_by));
        put(&w, ": ");
        put_us(&w, est[best]);
        if (best_any != best) {
            put(&w, "; cost model alone: ");
            put(&w, tt_algo_name(pairs[best_any].algo));
            put(&w, " ");
            put_us(&w, est[best_any]);
        } else {
            put(&w, ", also the cost model's pick");
        }
    }
    if (in->symmetric) put(&w, "; symmetric windows");
    if (in->oversubscribed) put(&w, "; oversubscribed");
}

const char *tt_algo_name(enum tt_algo_id algo)
{
    static const char *const names[TT_ALGO_COUNT] = {
        [TT_ALGO_RING] = "Ring", [TT_ALGO_ONESHOT] = "OneShot", [TT_ALGO_DIRECT] = "Direct",
        [TT_ALGO_TREE] = "Tree"};
    return (unsigned)algo < TT_ALGO_COUNT ? names[algo] : "Unknown";
}

const char *tt_proto_name(enum tt_proto_id proto)
{
    static const char *const names[TT_PROTO_COUNT] = {[TT_PROTO_SIMPLE] = "Simple",
                                                      [TT_PROTO_LL] = "LL"};
    return (unsigned)proto < TT_PROTO_COUNT ? names[proto] : "Unknown";
}

bool tt_tune_implements(enum tt_algo_id algo, enum tt_coll coll)
{
    return (unsigned)algo < TT_ALGO_COUNT && (unsigned)coll < TT_COLL_COUNT_ &&
           implements[algo][coll];
}

enum tt_proto_id tt_tune_proto_of(enum tt_algo_id algo)
{
    for (int k = 0; k < NPAIRS; k++)
        if (pairs[k].algo == algo) return pairs[k].proto;
    return TT_PROTO_SIMPLE;
}
