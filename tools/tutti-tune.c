/* tutti-tune: prints what the selection cost model (src/algo/tune.c) estimates and chooses for a
 * communicator shape, collective by collective, at sizes from -b to -e: one markdown table per
 * collective, the form docs/tuning.md includes. It honours NCCL_ALGO and NCCL_PROTO like a
 * communicator would, so it also previews what a setting of them does. It runs no collective:
 * to check the model against the machine, compare its estimates with tutti-perf's times. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "algo/coll.h"
#include "algo/tune.h"
#include "transport/transport.h"
#include "util/err.h"
#include "util/param.h"

static const enum tt_coll colls[] = {TT_COLL_ALLREDUCE, TT_COLL_BROADCAST, TT_COLL_REDUCE,
                                     TT_COLL_ALLGATHER, TT_COLL_REDUCESCATTER};
enum { NCOLLS = sizeof colls / sizeof colls[0] };

static void usage(FILE *to)
{
    fprintf(to,
            "usage: tutti-tune [-n ranks] [-N hosts] [-m oneshot_max_bytes] [-D] [-O] [-S] [-C cpus]\n"
            "                  [-q cma_cost_pct] [-L llc_bytes] [-b min_bytes] [-e max_bytes] [-f factor] [-c collective]\n"
            "  -n  ranks in the communicator (default 4)\n"
            "  -N  hosts they span (default 1; more than 1 rules out OneShot and Direct)\n"
            "  -m  largest OneShot payload per rank (default: TUTTI_ONESHOT_BYTES, the slot)\n"
            "  -D  cross-memory attach unavailable (no Direct)\n"
            "  -O  mailboxes unavailable (no OneShot)\n"
            "  -S  more ranks on the host than CPUs: the host has 2 (4 ranks on 2 cores)\n"
            "  -C  the host has this many CPUs (oversubscribed when fewer than the ranks)\n"
            "  -q  a cross-memory copy costs this many percent of a memcpy (what init measures,\n"
            "      or TUTTI_CMA_COST; default: TUTTI_CMA_COST, else 0: Direct's constant row)\n"
            "  -L  the host's last-level cache, K/M/G suffixes (default 32M)\n"
            "  -b, -e  smallest and largest size in bytes, K/M/G suffixes (default 8, 256M)\n"
            "  -f  size step factor (default 4)\n"
            "  -c  only this collective (allreduce, broadcast, reduce, allgather, reducescatter)\n"
            "  -h, --help  this text\n"
            "Sizes are NCCL's count times the element size: the whole buffer for AllReduce,\n"
            "Broadcast and Reduce, one rank's block for AllGather and ReduceScatter.\n");
}

/* "64K" -> 65536; 0 on a malformed value. */
static size_t parse_bytes(const char *text)
{
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
    }
    return *end == '\0' ? (size_t)v : 0;
}

/* "8 B", "64 KiB", "256 MiB" when exact, else bytes. */
static const char *human(size_t bytes, char *buf, size_t buf_bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB"};
    int u = 0;
    while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, buf_bytes, "%zu %s", bytes, units[u]);
    return buf;
}


static void print_table(const struct tt_tune *tune, struct tt_tune_input in, size_t min_bytes,
                        size_t max_bytes, size_t factor)
{
    /* As the engine does: ReduceScatter publishes its whole input, nranks blocks. */
    if (in.coll == TT_COLL_REDUCESCATTER) in.oneshot_max_bytes /= (size_t)in.nranks;
    char cma[64] = "";
    if (in.cma_cost_pct > 0 && in.direct_ok)
        snprintf(cma, sizeof cma, ", cross-memory copy %u%% of memcpy", in.cma_cost_pct);
    printf("\n### %s: %d ranks, %d host%s%s%s\n\n", tt_coll_name(in.coll), in.nranks,
           in.nhosts, in.nhosts == 1 ? "" : "s", in.oversubscribed ? ", more ranks than CPUs" : "",
           cma);
    printf("| bytes |");
    for (int a = 0; a < TT_ALGO_COUNT; a++) printf(" %s us |", tt_algo_name((enum tt_algo_id)a));
    printf(" choice |\n|---:|");
    for (int a = 0; a < TT_ALGO_COUNT; a++) printf("---:|");
    printf("---|\n");
    /* Sizes min, min*factor, ... and max itself, each once. */
    for (size_t bytes = min_bytes;;) {
        in.bytes = bytes;
        char size[32];
        printf("| %s |", human(bytes, size, sizeof size));
        for (int a = 0; a < TT_ALGO_COUNT; a++) {
            if (tt_tune_can_run(&in, (enum tt_algo_id)a) &&
                !isinf(tt_tune_estimate_us(&in, (enum tt_algo_id)a)))
                printf(" %.1f |", (double)tt_tune_estimate_us(&in, (enum tt_algo_id)a));
            else
                printf(" - |");
        }
        struct tt_tune_choice c;
        tt_tune_select(tune, &in, &c);
        printf(" %s/%s |\n", tt_algo_name(c.algo), tt_proto_name(c.proto));
        if (bytes >= max_bytes) break;
        bytes = bytes > max_bytes / factor ? max_bytes : bytes * factor;
    }
}

int main(int argc, char **argv)
{
    struct tt_tune_input in = {.nranks = 4, .nhosts = 1, .oneshot_ok = true,
                               .oneshot_max_bytes = (size_t)tt_param_oneshot_bytes(),
                               .direct_ok = true,
                               .cma_cost_pct = (unsigned)tt_param_cma_cost(),
                               .llc_bytes = (size_t)32 << 20};
    /* Tree takes up to half a connection FIFO, as the engine computes (for 4-byte elements). */
    int64_t slot = tt_param_chunk_bytes() > 0 ? tt_param_chunk_bytes()
                                              : tt_param_buffsize() / TT_CONN_SLOTS;
    in.tree_max_bytes = (size_t)slot / 4 * 4 * (TT_CONN_SLOTS / 2);
    size_t min_bytes = 8, max_bytes = (size_t)256 << 20, factor = 4;
    int only = -1;
    int opt;
    static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    while ((opt = getopt_long(argc, argv, "n:N:m:DOSC:q:L:b:e:f:c:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n': in.nranks = atoi(optarg); break;
        case 'N': in.nhosts = atoi(optarg); break;
        case 'm': in.oneshot_max_bytes = parse_bytes(optarg); break;
        case 'D': in.direct_ok = false; break;
        case 'O': in.oneshot_ok = false; break;
        case 'S': in.cpus = 2; break;
        case 'C': in.cpus = atoi(optarg); break;
        case 'q': in.cma_cost_pct = (unsigned)atoi(optarg); break;
        case 'L': in.llc_bytes = parse_bytes(optarg); break;
        case 'b': min_bytes = parse_bytes(optarg); break;
        case 'e': max_bytes = parse_bytes(optarg); break;
        case 'f': factor = parse_bytes(optarg); break;
        case 'c':
            for (int i = 0; i < NCOLLS; i++)
                if (strcasecmp(optarg, tt_coll_name(colls[i])) == 0) only = i;
            if (only < 0) {
                usage(stderr);
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (in.nranks < 1 || in.nhosts < 1 || in.nhosts > in.nranks || min_bytes == 0 ||
        max_bytes < min_bytes || factor < 2) {
        usage(stderr);
        return 2;
    }
    if (in.nhosts > 1) in.oneshot_ok = in.direct_ok = false;
    in.link = in.nhosts > 1 ? TT_LINK_TCP : TT_LINK_SHM;
    in.oversubscribed = in.nhosts == 1 && in.cpus > 0 && in.nranks > in.cpus;
    if (in.oneshot_max_bytes == 0) in.oneshot_ok = false;

    struct tt_tune tune;
    if (tt_tune_init(&tune) != ncclSuccess) {
        fprintf(stderr, "tutti-tune: %s\n", tt_error_last());
        return 1;
    }
    /* Init makes Tree's connections across hosts, or on one host when NCCL_ALGO is set. */
    if (in.nhosts <= 1 && !tune.algo_forced) in.tree_max_bytes = 0;
    /* Hier where the hosts hold equal numbers (>= 2) of ranks and the links exist. */
    if (in.nhosts > 1 && in.nranks % in.nhosts == 0 && in.nranks / in.nhosts >= 2 &&
        in.tree_max_bytes > 0)
        in.hier_nlocal = in.nranks / in.nhosts;
    in.net_alpha_us = (float)tt_param_net_latency_ns() / 1000.0f;
    in.net_gbps = (float)tt_param_net_mbps() / 1000.0f;
    printf("Cost model of Tutti's selection: estimated microseconds per operation ('-': cannot "
           "run here),\nand the choice (NCCL_ALGO=\"%s\", NCCL_PROTO=\"%s\"). OneShot slot: %zu "
           "bytes; Direct: %s.\n",
           tt_param_algo(), tt_param_proto(), in.oneshot_ok ? in.oneshot_max_bytes : 0,
           in.direct_ok ? "available" : "unavailable");
    for (int i = 0; i < NCOLLS; i++) {
        if (only >= 0 && i != only) continue;
        in.coll = colls[i];
        print_table(&tune, in, min_bytes, max_bytes, factor);
    }
    return 0;
}
