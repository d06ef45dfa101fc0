/* Point-to-point stress: many groups, each a random all-pairs pattern of ncclSend/ncclRecv.
 *
 * Every rank derives the same plan from the seed: in group g, each ordered pair (src, dst),
 * self pairs included, exchanges no message with probability 1 - p, else one or two messages of
 * random datatype and size (0 .. --max-bytes). Two messages on one pair must match in posting
 * order. Each rank posts all its sends and receives of the group, shuffled, between one
 * ncclGroupStart/End, then checks every received byte against the pattern of (seed, g, src, dst,
 * message, byte index) and the guard bytes after each receive buffer. With probability
 * --coll-prob a group also holds one AllReduce (the same on every rank), posted at a different
 * place among the sends and receives on each rank.
 *
 *   p2p_stress [--groups N] [--max-bytes B] [--prob P] [--coll-prob Q] [--seed S]
 *
 * (run under tutti-run).
 *
 * Rank 0 prints the messages, bytes and time; the exit code is 1 when any byte was wrong. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl.h"
#include "tutti.h"

#include "world.h"
#include "now_s.h"

#define GUARD_BYTES 16
#define GUARD_BYTE 0xA5
#define MAX_SHOWN 10

struct msg {
    int peer;
    bool is_send;
    int index;     /* 0 or 1: order among the messages of the same pair and direction */
    ncclDataType_t dtype;
    size_t count;
    size_t bytes;
    size_t offset; /* into the group's send or receive arena */
};

static int rank, nranks;
static uint64_t seed = 1;
static size_t max_bytes = 65536;
static double prob = 0.25;
static double coll_prob = 0.2;
static long shown;

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A hash of the plan's coordinates; every rank computes the same value. */
static uint64_t key(long group, int src, int dst, int index, uint64_t salt)
{
    uint64_t h = mix(seed ^ salt);
    h = mix(h ^ (uint64_t)group);
    h = mix(h ^ ((uint64_t)src << 32 | (uint32_t)dst));
    return mix(h ^ (uint64_t)index);
}

static double unit(uint64_t h)
{
    return (double)(h >> 11) / 9007199254740992.0;
}

/* The count of the group's AllReduce, or 0 when it has none. */
static size_t group_allreduce_count(long group)
{
    uint64_t h = key(group, 0, 0, 0, 0x55);
    return unit(h) < coll_prob ? 1 + (size_t)(h & 4095) : 0;
}

static int32_t allreduce_input(long group, int r, size_t i)
{
    return (int32_t)((group + r * 7 + (long)i) % 1000) - 500;
}

/* Checks the group's AllReduce result against the sum computed here; returns the errors. */
static long check_allreduce(long group, const int32_t *got, size_t count)
{
    long errors = 0;
    for (size_t i = 0; i < count; i++) {
        int32_t want = 0;
        for (int r = 0; r < nranks; r++) want += allreduce_input(group, r, i);
        if (got[i] == want) continue;
        if (errors++ == 0 && shown++ < MAX_SHOWN)
            fprintf(stderr, "rank %d: group %ld: AllReduce of %zu int32: index %zu: got %d, "
                    "want %d\n", rank, group, count, i, (int)got[i], (int)want);
    }
    return errors;
}

/* The number of messages src sends to dst in `group`: 0, 1 or 2. */
static int pair_messages(long group, int src, int dst)
{
    uint64_t h = key(group, src, dst, 0, 0x11);
    if (unit(h) >= prob) return 0;
    return (h & 7) == 0 ? 2 : 1;
}

/* Datatype and count of message `index` from src to dst: sizes spread over tiny, small and up to
 * max_bytes, 0 included. */
static void message_shape(long group, int src, int dst, int index, struct msg *m)
{
    static const ncclDataType_t dtypes[] = {ncclUint8, ncclInt32, ncclFloat64, ncclFloat16};
    static const size_t sizes[] = {1, 4, 8, 2};
    uint64_t h = key(group, src, dst, index, 0x22);
    int t = (int)(h & 3);
    size_t limit = (h >> 2) % 3 == 0 ? 64 : (h >> 2) % 3 == 1 ? 4096 : max_bytes;
    if (limit > max_bytes) limit = max_bytes;
    m->dtype = dtypes[t];
    m->count = (size_t)((h >> 8) % (limit / sizes[t] + 1));
    m->bytes = m->count * sizes[t];
}

/* The message's bytes: 8 at a time from a hash of its coordinates and the word's index. */
static void fill_pattern(uint8_t *buf, size_t bytes, long group, int src, int dst, int index)
{
    uint64_t base = key(group, src, dst, index, 0x33);
    for (size_t w = 0; w * 8 < bytes; w++) {
        uint64_t v = mix(base + w);
        size_t n = bytes - w * 8 < 8 ? bytes - w * 8 : 8;
        memcpy(buf + w * 8, &v, n);
    }
}

static void *xrealloc(void *p, size_t bytes)
{
    void *q = realloc(p, bytes == 0 ? 1 : bytes);
    if (q == NULL) {
        fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", rank, bytes);
        exit(1);
    }
    return q;
}

/* Compares a received message with its pattern and its guard; returns the errors found. */
static long check_message(long group, const struct msg *m, const uint8_t *got, uint8_t *want)
{
    long errors = 0;
    fill_pattern(want, m->bytes, group, m->peer, rank, m->index);
    for (size_t i = 0; i < m->bytes + GUARD_BYTES; i++) {
        uint8_t expect = i < m->bytes ? want[i] : GUARD_BYTE;
        if (got[i] == expect) continue;
        if (errors++ == 0 && shown++ < MAX_SHOWN)
            fprintf(stderr, "rank %d: group %ld: message %d from rank %d (%zu bytes): byte %zu%s: "
                    "got 0x%02x, want 0x%02x\n", rank, group, m->index, m->peer, m->bytes, i,
                    i < m->bytes ? "" : " (guard after the buffer)", got[i], expect);
    }
    return errors;
}

static int usage(void)
{
    fprintf(stderr, "usage: p2p_stress [--groups N] [--max-bytes B] [--prob P] [--coll-prob Q] "
                    "[--seed S]\n");
    return 2;
}

int main(int argc, char **argv)
{
    long groups = 1000;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) return usage();
        if (strcmp(argv[i], "--groups") == 0)
            groups = strtol(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--max-bytes") == 0)
            max_bytes = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--prob") == 0)
            prob = strtod(argv[++i], NULL);
        else if (strcmp(argv[i], "--coll-prob") == 0)
            coll_prob = strtod(argv[++i], NULL);
        else if (strcmp(argv[i], "--seed") == 0)
            seed = strtoull(argv[++i], NULL, 0);
        else
            return usage();
    }
    if (groups < 0 || max_bytes < 8 || prob < 0 || prob > 1 || coll_prob < 0 || coll_prob > 1)
        return usage();

    ncclComm_t comm = world_open("p2p_stress", &rank, &nranks);
    if (comm == NULL) return 1;
    ncclResult_t res = ncclSuccess;

    struct msg *msgs = xrealloc(NULL, sizeof *msgs * (size_t)nranks * 4);
    uint8_t *send_arena = xrealloc(NULL, 1), *recv_arena = xrealloc(NULL, 1);
    uint8_t *want = xrealloc(NULL, max_bytes);
    int32_t *ar_in = xrealloc(NULL, 4096 * sizeof *ar_in);
    int32_t *ar_out = xrealloc(NULL, 4096 * sizeof *ar_out);
    size_t send_cap = 0, recv_cap = 0;
    long errors = 0, messages = 0, failed_calls = 0, allreduces = 0;
    size_t bytes_moved = 0;
    double t0 = now_s();

    for (long g = 0; g < groups; g++) {
        /* This rank's part of the plan: its sends (to each dst) and receives (from each src). */
        int nmsgs = 0;
        size_t send_bytes = 0, recv_bytes = 0;
        for (int peer = 0; peer < nranks; peer++)
            for (int dir = 0; dir < 2; dir++) {
                bool is_send = dir == 0;
                int src = is_send ? rank : peer, dst = is_send ? peer : rank;
                int count = pair_messages(g, src, dst);
                for (int k = 0; k < count; k++) {
                    struct msg *m = &msgs[nmsgs++];
                    m->peer = peer;
                    m->is_send = is_send;
                    m->index = k;
                    message_shape(g, src, dst, k, m);
                    size_t *arena_bytes = is_send ? &send_bytes : &recv_bytes;
                    m->offset = *arena_bytes;
                    *arena_bytes += m->bytes + GUARD_BYTES;
                }
            }
        if (send_bytes > send_cap) send_arena = xrealloc(send_arena, send_cap = send_bytes);
        if (recv_bytes > recv_cap) recv_arena = xrealloc(recv_arena, recv_cap = recv_bytes);
        memset(recv_arena, GUARD_BYTE, recv_bytes);
        for (int i = 0; i < nmsgs; i++)
            if (msgs[i].is_send)
                fill_pattern(send_arena + msgs[i].offset, msgs[i].bytes, g, rank, msgs[i].peer,
                             msgs[i].index);

        /* Post in a rank-specific shuffled order that keeps the two messages of one pair and
         * direction in index order (swap back any pair the shuffle inverted). */
        int *order = xrealloc(NULL, sizeof *order * (size_t)(nmsgs + 1));
        for (int i = 0; i < nmsgs; i++) order[i] = i;
        uint64_t h = key(g, rank, rank, 9, 0x44);
        for (int i = nmsgs - 1; i > 0; i--) {
            h = mix(h);
            int j = (int)(h % (uint64_t)(i + 1)), tmp = order[i];
            order[i] = order[j];
            order[j] = tmp;
        }
        for (int i = 0; i < nmsgs; i++)
            for (int j = i + 1; j < nmsgs; j++) {
                struct msg *a = &msgs[order[i]], *b = &msgs[order[j]];
                if (a->peer == b->peer && a->is_send == b->is_send && a->index > b->index) {
                    int tmp = order[i];
                    order[i] = order[j];
                    order[j] = tmp;
                }
            }

        /* The AllReduce goes before the op at a rank-specific position (after all at nmsgs). */
        size_t ar_count = group_allreduce_count(g);
        int ar_at = (int)(mix(h) % (uint64_t)(nmsgs + 1));
        for (size_t i = 0; i < ar_count; i++) {
            ar_in[i] = allreduce_input(g, rank, i);
            ar_out[i] = INT32_MIN;
        }

        bool ok = ncclGroupStart() == ncclSuccess;
        for (int i = 0; i <= nmsgs && ok; i++) {
            if (i == ar_at && ar_count > 0) {
                res = ncclAllReduce(ar_in, ar_out, ar_count, ncclInt32, ncclSum, comm, NULL);
                if (res != ncclSuccess) {
                    fprintf(stderr, "rank %d: group %ld: ncclAllReduce: %s: %s\n", rank, g,
                            ncclGetErrorString(res), ncclGetLastError(NULL));
                    ok = false;
                }
            }
            if (i == nmsgs) break;
            const struct msg *m = &msgs[order[i]];
            res = m->is_send ? ncclSend(send_arena + m->offset, m->count, m->dtype, m->peer, comm,
                                        NULL)
                             : ncclRecv(recv_arena + m->offset, m->count, m->dtype, m->peer,
                                        comm, NULL);
            if (res != ncclSuccess) {
                fprintf(stderr, "rank %d: group %ld: %s peer %d: %s: %s\n", rank, g,
                        m->is_send ? "ncclSend" : "ncclRecv", m->peer, ncclGetErrorString(res),
                        ncclGetLastError(NULL));
                ok = false;
            }
        }
        res = ncclGroupEnd();
        free(order);
        if (!ok || res != ncclSuccess) {
            fprintf(stderr, "rank %d: group %ld of %d messages failed: %s: %s\n", rank, g, nmsgs,
                    ncclGetErrorString(res), ncclGetLastError(NULL));
            failed_calls++;
            break;
        }

        if (ar_count > 0) {
            errors += check_allreduce(g, ar_out, ar_count);
            allreduces++;
        }
        for (int i = 0; i < nmsgs; i++) {
            if (msgs[i].is_send) continue;
            errors += check_message(g, &msgs[i], recv_arena + msgs[i].offset, want);
            messages++;
            bytes_moved += msgs[i].bytes;
        }
    }
    double took = now_s() - t0;

    /* The totals of all ranks, for rank 0's summary. */
    long long totals[3] = {messages, (long long)bytes_moved, errors + failed_calls};
    res = failed_calls ? ncclInvalidUsage
                       : ncclAllReduce(totals, totals, 3, ncclInt64, ncclSum, comm, NULL);
    if (rank == 0 && res == ncclSuccess)
        printf("p2p_stress: %ld groups (%ld with an AllReduce) on %d ranks: %lld messages, "
               "%.1f MiB in %.2f s; %lld bad bytes or failed groups\n", groups, allreduces,
               nranks, totals[0], (double)totals[1] / 1048576.0, took, totals[2]);
    printf("rank %d: %s: %ld messages received, %ld bad bytes, %ld failed groups\n", rank,
           errors || failed_calls ? "FAIL" : "PASS", messages, errors, failed_calls);
    free(msgs);
    free(send_arena);
    free(recv_arena);
    free(want);
    free(ar_in);
    free(ar_out);
    if (failed_calls == 0) ncclCommDestroy(comm);
    return errors || failed_calls ? 1 : 0;
}
