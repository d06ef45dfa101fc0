/* One exchange written in two forms, run as every rank under tutti-run: ncclAlltoAll on some
 * ranks, the grouped ncclSend/ncclRecv to every peer that NCCL itself expands it into on the
 * others (docs/semantics.md, "Mismatched arguments"). Over TCP (NCCL_SHM_DISABLE=1) both forms
 * are sends and receives and the exchange must complete with exact data. Over shared memory
 * an AlltoAll that runs over the host team (OneShot, Direct) cannot meet point-to-point, so
 * every rank must fail fast with ncclInvalidUsage naming a peer, long before TUTTI_TIMEOUT_MS
 * (the test runs with 120 s and bounds the failure at 10 s: a bound on a hang, not on speed);
 * an AlltoAll that runs as sends and receives (blocks too large for the mailbox with no
 * cross-memory attach) must complete like over TCP. Either way every rank must agree.
 *
 * Each case runs on a fresh communicator split from the world:
 *   a2a_odd   the last rank AlltoAll, the others grouped Send/Recv;
 *   p2p_odd   the last rank grouped Send/Recv, the others AlltoAll;
 * each "cold" (the point-to-point connections are made inside the mismatched call) and "warm"
 * (a correct grouped exchange made them before), at 8 B per block (OneShot) and 1 MiB per
 * block (Direct where cross-memory attach works). Two cases that must work in every transport:
 *   gather    the root ncclGather, the others ncclSend to it;
 *   scatter   the root grouped ncclSend, the others ncclScatter.
 * And one that is no mismatch and must complete over shared memory:
 *   stream    the last rank a Recv from rank 0 on a host stream, then (50 ms late) AlltoAll;
 *             rank 0 AlltoAll, then the Send.
 * `fault_alltoall_p2p [--max-bytes N]`. Exit 1 on any failure. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl.h"
#include "tutti.h"

#include "world.h"

/* A hang would show at TUTTI_TIMEOUT_MS (120 s); a caught mismatch takes milliseconds. */
#define HANG_BOUND_S 10.0

static int rank, nranks;
static bool over_tcp;

/* The value block `to` of rank `from` sends carries at element i: exact in float32. */
static float value(int from, int to, size_t i)
{
    return (float)(from * 1000 + to * 10) + (float)(i % 7);
}

static void fill(float *send, size_t count)
{
    for (int to = 0; to < nranks; to++)
        for (size_t i = 0; i < count; i++) send[(size_t)to * count + i] = value(rank, to, i);
}

/* Whether recv holds block `rank` of every rank's send buffer; reports the first difference. */
static bool exact(const float *recv, size_t count, const char *where)
{
    for (int from = 0; from < nranks; from++)
        for (size_t i = 0; i < count; i++)
            if (recv[(size_t)from * count + i] != value(from, rank, i)) {
                FAIL("%s: rank %d: element %zu of the block from rank %d is %g, want %g", where,
                     rank, i, from, (double)recv[(size_t)from * count + i],
                     (double)value(from, rank, i));
                return false;
            }
    return true;
}

/* NCCL's own AlltoAll: a send to and a receive from every rank, itself included. */
static ncclResult_t grouped(const float *send, float *recv, size_t count, ncclComm_t c)
{
    ncclResult_t first = ncclGroupStart();
    for (int p = 0; p < nranks && first == ncclSuccess; p++) {
        ncclResult_t res = ncclSend(send + (size_t)p * count, count, ncclFloat, p, c, NULL);
        if (res == ncclSuccess)
            res = ncclRecv(recv + (size_t)p * count, count, ncclFloat, p, c, NULL);
        if (res != ncclSuccess) first = res;
    }
    ncclResult_t end = ncclGroupEnd();
    return first != ncclSuccess ? first : end;
}

/* Every rank's flag summed over the world: how many ranks hold it. */
static int count_ranks(ncclComm_t world, bool flag)
{
    int64_t one = flag, sum = -1;
    if (ncclAllReduce(&one, &sum, 1, ncclInt64, ncclSum, world, NULL) != ncclSuccess) {
        FAIL("rank %d: the world communicator failed after a case", rank);
        return -1;
    }
    return (int)sum;
}

/* The form mix: `odd_a2a` says whether the last rank (else the others) runs AlltoAll. */
static void mixed_case(ncclComm_t world, bool odd_a2a, bool warm, size_t bytes, float *send,
                       float *recv)
{
    size_t count = bytes / 4;
    char where[96];
    snprintf(where, sizeof where, "%s %s at %zu bytes per block", odd_a2a ? "a2a_odd" : "p2p_odd",
             warm ? "warm" : "cold", bytes);
    check_where = where;
    ncclComm_t c = NULL;
    if (ncclCommSplit(world, 0, rank, &c, NULL) != ncclSuccess) {
        FAIL("rank %d: split: %s", rank, ncclGetLastError(NULL));
        return;
    }
    fill(send, count);
    if (warm) {
        memset(recv, 0, bytes * (size_t)nranks);
        if (CHECK_RES(grouped(send, recv, count, c), ncclSuccess)) exact(recv, count, where);
    }
    memset(recv, 0, bytes * (size_t)nranks);
    bool a2a = (rank == nranks - 1) == odd_a2a;
    double t0 = world_now_s();
    ncclResult_t res = a2a ? ncclAlltoAll(send, recv, count, ncclFloat, c, NULL)
                           : grouped(send, recv, count, c);
    double took = world_now_s() - t0;
    char last[512];
    snprintf(last, sizeof last, "%s", ncclGetLastError(c));
    bool failed = res != ncclSuccess;
    if (!failed) {
        exact(recv, count, where);
        printf("rank %d: %s: %s completed in %.3f s\n", rank, where, a2a ? "AlltoAll" : "Send/Recv",
               took);
    } else {
        printf("rank %d: %s: %s returned %s in %.3f s: %s\n", rank, where,
               a2a ? "AlltoAll" : "Send/Recv", ncclGetErrorString(res), took, last);
        CHECK_RES(res, ncclInvalidUsage);
        CHECK(took < HANG_BOUND_S, "rank %d failed after %.1f s, not within %.0f s", rank, took,
              HANG_BOUND_S);
        /* It names a rank of the other form: the AlltoAll ranks a Send/Recv one, and back. */
        bool names_other = false;
        for (int p = 0; p < nranks; p++) {
            bool other_a2a = (p == nranks - 1) == odd_a2a;
            char needle[32];
            snprintf(needle, sizeof needle, "rank %d ", p);
            if (other_a2a != a2a && strstr(last, needle) != NULL) names_other = true;
        }
        CHECK(names_other, "rank %d's message names no rank of the other form: %s", rank, last);
        CHECK(strstr(last, "AlltoAll") != NULL, "rank %d's message does not say AlltoAll: %s",
              rank, last);
        /* The error is latched: the communicator is left for Abort. */
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(c, &async);
        CHECK_RES(async, ncclInvalidUsage);
    }
    /* Every rank agrees on the outcome; over TCP, and wherever the AlltoAll ran as sends and
     * receives, the exchange works; an AlltoAll of 8-byte blocks runs over the team where
     * shared memory is on, and is caught. */
    int nfailed = count_ranks(world, failed);
    CHECK(nfailed == 0 || nfailed == nranks, "%d of %d ranks failed", nfailed, nranks);
    if (over_tcp)
        CHECK(nfailed == 0, "over TCP the two forms must meet (%d ranks failed)", nfailed);
    if (!over_tcp && bytes <= 8)
        CHECK(nfailed == nranks, "over shared memory the team AlltoAll was not caught");
    if (nfailed == 0) ncclCommDestroy(c); else ncclCommAbort(c);
    check_where = NULL;
}

/* What is not a mismatch: a lone Recv that waits, on a host stream, for a Send its peer
 * issues after an AlltoAll (a pipeline stage under the PyTorch backend, whose point-to-point
 * runs on streams of its own). The last rank queues a Recv from rank 0, arrives 50 ms late at
 * the AlltoAll (rank 0's stalls meanwhile), and rank 0 sends after it: everything completes,
 * exactly. The connections are made first (a first Recv would make them inside the call).
 * Shared memory only: over TCP the AlltoAll is sends and receives, and the Recv queued before
 * it matches its block from rank 0 (NCCL's rule: point-to-point operations match in order). */
static void stream_case(ncclComm_t world, float *send, float *recv)
{
    const size_t count = 2;
    int last = nranks - 1;
    check_where = "a lone Recv on a stream across an AlltoAll";
    ncclComm_t c = NULL;
    if (ncclCommSplit(world, 0, rank, &c, NULL) != ncclSuccess) {
        FAIL("rank %d: split: %s", rank, ncclGetLastError(NULL));
        return;
    }
    float token[2] = {7, 9}, got[2] = {0, 0};
    if (rank == 0) CHECK_RES(ncclSend(token, 2, ncclFloat, last, c, NULL), ncclSuccess);
    if (rank == last) CHECK_RES(ncclRecv(got, 2, ncclFloat, 0, c, NULL), ncclSuccess);
    fill(send, count);
    memset(recv, 0, count * (size_t)nranks * 4);
    got[0] = got[1] = 0;
    token[0] = 11;
    if (rank == last) {
        cudaStream_t s = NULL;
        CHECK_RES(tuttiStreamCreate(&s), ncclSuccess);
        CHECK_RES(ncclRecv(got, 2, ncclFloat, 0, c, s), ncclSuccess);
        struct timespec late = {.tv_sec = 0, .tv_nsec = 50 * 1000 * 1000};
        nanosleep(&late, NULL);
        if (CHECK_RES(ncclAlltoAll(send, recv, count, ncclFloat, c, NULL), ncclSuccess))
            exact(recv, count, check_where);
        CHECK_RES(tuttiStreamSynchronize(s), ncclSuccess);
        CHECK(got[0] == 11 && got[1] == 9, "the Recv got %g %g, want 11 9", (double)got[0],
              (double)got[1]);
        tuttiStreamDestroy(s);
    } else {
        if (CHECK_RES(ncclAlltoAll(send, recv, count, ncclFloat, c, NULL), ncclSuccess))
            exact(recv, count, check_where);
        if (rank == 0) CHECK_RES(ncclSend(token, 2, ncclFloat, last, c, NULL), ncclSuccess);
    }
    count_ranks(world, false);
    ncclCommDestroy(c);
    check_where = NULL;
}

/* Gather and Scatter are sends and receives in every transport: they meet plain ones. */
static void rooted_case(ncclComm_t world, bool gather, float *send, float *recv)
{
    const size_t count = 1000;
    const int root = 0;
    check_where = gather ? "gather against Send" : "scatter against grouped Send";
    ncclComm_t c = NULL;
    if (ncclCommSplit(world, 0, rank, &c, NULL) != ncclSuccess) {
        FAIL("rank %d: split: %s", rank, ncclGetLastError(NULL));
        return;
    }
    fill(send, count);
    memset(recv, 0, count * (size_t)nranks * 4);
    ncclResult_t res;
    if (gather) {
        /* Rank r sends block root of its buffer: the root's block r is value(r, root, i). */
        const float *mine = send + (size_t)root * count;
        res = rank == root ? ncclGather(mine, recv, count, ncclFloat, root, c, NULL)
                           : ncclSend(mine, count, ncclFloat, root, c, NULL);
        if (CHECK_RES(res, ncclSuccess) && rank == root)
            for (int from = 0; from < nranks; from++)
                for (size_t i = 0; i < count; i++)
                    if (recv[(size_t)from * count + i] != value(from, root, i)) {
                        FAIL("gather: element %zu from rank %d is %g", i, from,
                             (double)recv[(size_t)from * count + i]);
                        break;
                    }
    } else {
        if (rank == root) {
            res = ncclGroupStart();
            for (int p = 0; p < nranks; p++)
                if (p != root) ncclSend(send + (size_t)p * count, count, ncclFloat, p, c, NULL);
            ncclResult_t end = ncclGroupEnd();
            if (res == ncclSuccess) res = end;
        } else {
            res = ncclScatter(NULL, recv, count, ncclFloat, root, c, NULL);
        }
        if (CHECK_RES(res, ncclSuccess) && rank != root)
            for (size_t i = 0; i < count; i++)
                if (recv[i] != value(root, rank, i)) {
                    FAIL("scatter: element %zu is %g, want %g", i, (double)recv[i],
                         (double)value(root, rank, i));
                    break;
                }
    }
    count_ranks(world, false);
    ncclCommDestroy(c);
    check_where = NULL;
}

int main(int argc, char **argv)
{
    size_t max_bytes = 1u << 20;
    for (int i = 1; i + 1 < argc; i += 2)
        if (strcmp(argv[i], "--max-bytes") == 0) max_bytes = strtoull(argv[i + 1], NULL, 0);
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *shm_off = getenv("NCCL_SHM_DISABLE");
    over_tcp = shm_off != NULL && atoi(shm_off) == 1;
    ncclComm_t world = world_open("fault_alltoall_p2p", &rank, &nranks);
    if (world == NULL) return 1;
    float *send = calloc(max_bytes / 4 * (size_t)nranks + 1000 * (size_t)nranks, 4);
    float *recv = calloc(max_bytes / 4 * (size_t)nranks + 1000 * (size_t)nranks, 4);
    const size_t sizes[] = {8, 1u << 20};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        if (sizes[s] > max_bytes) continue;
        for (int odd_a2a = 1; odd_a2a >= 0; odd_a2a--)
            for (int warm = 0; warm < 2; warm++)
                mixed_case(world, odd_a2a, warm, sizes[s], send, recv);
    }
    if (!over_tcp) stream_case(world, send, recv);
    rooted_case(world, true, send, recv);
    rooted_case(world, false, send, recv);
    free(send);
    free(recv);
    ncclCommDestroy(world);
    printf("rank %d: %d failures\n", rank, (int)check_failures);
    return check_failures ? 1 : 0;
}
