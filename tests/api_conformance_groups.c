/* API conformance, point to point and groups (NCCL 2.28): ring shifts and all-pairs exchanges
 * with posting-order matching, send to self, group errors and nesting, groups spanning two
 * communicators, collectives mixed with point to point in one group, many aggregated collectives,
 * group state owned by its thread, simultaneous 8 MiB exchanges in both directions, and
 * ncclGroupSimulateEnd. Each test runs on every rank in the order of api_conformance.c's table;
 * buffers hold int64 values, so every expected result is exact. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_conformance_common.h"
#include "nccl.h"
#include "tutti.h"

/* ---- Point to point ------------------------------------------------------------------------ */

/* Ring shift inside a group, with the send posted first and then the receive first. */
void test_sendrecv_ring(void)
{
    static const size_t counts[] = {0, 1, 4099, 100000};
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        size_t count = counts[c];
        int64_t *send = alloc_i64(count, 0), *recv = alloc_i64(count, SENTINEL);
        int64_t *want = alloc_i64(count, 0);
        for (size_t i = 0; i < count; i++) {
            send[i] = pair_val(rank, next, i);
            want[i] = pair_val(prev, rank, i);
        }
        for (int recv_first = 0; recv_first < 2; recv_first++) {
            for (size_t i = 0; i < count; i++) recv[i] = SENTINEL;
            CHECK_RES(ncclGroupStart(), ncclSuccess);
            if (recv_first)
                CHECK_RES(ncclRecv(recv, count, ncclInt64, prev, comm, NULL), ncclSuccess);
            CHECK_RES(ncclSend(send, count, ncclInt64, next, comm, NULL), ncclSuccess);
            if (!recv_first)
                CHECK_RES(ncclRecv(recv, count, ncclInt64, prev, comm, NULL), ncclSuccess);
            CHECK_RES(ncclGroupEnd(), ncclSuccess);
            check_i64(recv_first ? "ring shift (recv posted first)" : "ring shift", recv, want,
                      count);
        }
        free(send);
        free(recv);
        free(want);
    }
}

/* Every rank sends to every rank (itself included) in one group, with a different count per
 * ordered pair, and two messages to each peer that must match in posting order. */
static size_t pair_count(int src, int dst, int msg)
{
    return (size_t)(1 + (src * 37 + dst * 11 + msg * 5) % 97) * (msg == 0 ? 1 : 13);
}

void test_sendrecv_all_pairs(void)
{
    int n = nranks;
    int64_t **sends = xcalloc((size_t)n * 2, sizeof *sends);
    int64_t **recvs = xcalloc((size_t)n * 2, sizeof *recvs);
    for (int p = 0; p < n; p++)
        for (int m = 0; m < 2; m++) {
            size_t out = pair_count(rank, p, m), in = pair_count(p, rank, m);
            sends[p * 2 + m] = alloc_i64(out, 0);
            recvs[p * 2 + m] = alloc_i64(in, SENTINEL);
            for (size_t i = 0; i < out; i++) sends[p * 2 + m][i] = pair_val(rank, p, i) + m;
        }
    /* Receives posted in reverse peer order, sends in forward order. */
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    for (int p = n - 1; p >= 0; p--)
        for (int m = 0; m < 2; m++)
            CHECK_RES(ncclRecv(recvs[p * 2 + m], pair_count(p, rank, m), ncclInt64, p, comm, NULL),
                      ncclSuccess);
    for (int p = 0; p < n; p++)
        for (int m = 0; m < 2; m++)
            CHECK_RES(ncclSend(sends[p * 2 + m], pair_count(rank, p, m), ncclInt64, p, comm, NULL),
                      ncclSuccess);
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    for (int p = 0; p < n; p++)
        for (int m = 0; m < 2; m++) {
            size_t in = pair_count(p, rank, m);
            int64_t *want = alloc_i64(in, 0);
            for (size_t i = 0; i < in; i++) want[i] = pair_val(p, rank, i) + m;
            char what[64];
            snprintf(what, sizeof what, "all pairs: from rank %d message %d", p, m);
            check_i64(what, recvs[p * 2 + m], want, in);
            free(want);
        }
    for (int k = 0; k < n * 2; k++) {
        free(sends[k]);
        free(recvs[k]);
    }
    free(sends);
    free(recvs);
}

void test_send_to_self(void)
{
    const size_t count = 1000;
    int64_t *send = alloc_i64(count, 0), *recv = alloc_i64(count, SENTINEL);
    for (size_t i = 0; i < count; i++) send[i] = pair_val(rank, rank, i);
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclSend(send, count, ncclInt64, rank, comm, NULL), ncclSuccess);
    CHECK_RES(ncclRecv(recv, count, ncclInt64, rank, comm, NULL), ncclSuccess);
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    check_i64("send to self", recv, send, count);
    free(send);
    free(recv);
}

/* ---- Groups -------------------------------------------------------------------------------- */

/* An invalid argument inside a group fails the call and the group's End; the communicator stays
 * usable. ncclGroupEnd (and SimulateEnd) without a Start is ncclInvalidUsage. */
void test_group_errors(void)
{
    int64_t send[4] = {1, 2, 3, 4}, recv[4];
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    CHECK_RES(ncclGroupEnd(), ncclInvalidUsage);
    CHECK_RES(ncclGroupSimulateEnd(&sim), ncclInvalidUsage);

    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclAllReduce(send, recv, 4, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    CHECK_RES(ncclAllReduce(send, recv, 4, (ncclDataType_t)99, ncclSum, comm, NULL),
              ncclInvalidArgument);
    CHECK_FAILS(ncclGroupEnd());

    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclSend(send, 4, ncclInt64, nranks, comm, NULL), ncclInvalidArgument);
    ncclCommUserRank(NULL, NULL); /* another error between the call and the end */
    CHECK_FAILS(ncclGroupEnd());
    /* The end names the call's error, not only its code. */
    const char *why = ncclGetLastError(NULL);
    CHECK(strstr(why, "ncclSend") != NULL && strstr(why, "peer") != NULL,
          "ncclGroupEnd's message does not say why the group failed: %s", why);

    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_FAILS(ncclAllReduce(send, recv, 4, ncclInt64, ncclSum, NULL, NULL));
    CHECK_FAILS(ncclGroupEnd());

    /* The failed groups left nothing behind: a group and a plain call both work. */
    CHECK_RES(ncclGroupEnd(), ncclInvalidUsage);
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    memset(recv, 0, sizeof recv);
    CHECK_RES(ncclAllReduce(send, recv, 4, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    for (int i = 0; i < 4; i++)
        CHECK(recv[i] == send[i] * nranks, "AllReduce after failed groups: index %d: got %lld, "
              "want %lld", i, (long long)recv[i], (long long)(send[i] * nranks));
    ncclResult_t async = ncclInternalError;
    CHECK_RES(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    CHECK(async == ncclSuccess, "an argument error latched an asynchronous error %d", (int)async);
}

/* Nested groups: nothing runs before the outermost End. */
void test_nested_groups(void)
{
    const size_t count = 8;
    int64_t *send = alloc_i64(count, 0), *recv = alloc_i64(count, SENTINEL);
    int64_t *ring = alloc_i64(count, SENTINEL), *want = alloc_i64(count, 0);
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    for (size_t i = 0; i < count; i++) send[i] = val(rank, i);

    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclAllReduce(send, recv, count, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    CHECK_RES(ncclSend(send, count, ncclInt64, next, comm, NULL), ncclSuccess);
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    check_all_equal("inner ncclGroupEnd ran an operation (recvbuff changed)", recv, SENTINEL,
                    count);
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclRecv(ring, count, ncclInt64, prev, comm, NULL), ncclSuccess);
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    check_all_equal("inner ncclGroupEnd ran a receive", ring, SENTINEL, count);
    CHECK_RES(ncclGroupEnd(), ncclSuccess);

    for (size_t i = 0; i < count; i++) {
        want[i] = 0;
        for (int r = 0; r < nranks; r++) want[i] += val(r, i);
    }
    check_i64("nested group AllReduce", recv, want, count);
    for (size_t i = 0; i < count; i++) want[i] = val(prev, i);
    check_i64("nested group ring shift", ring, want, count);
    free(send);
    free(recv);
    free(ring);
    free(want);
}

/* Two communicators driven from one thread in one group, issued in opposite orders on even and
 * odd ranks: only a group that progresses them together completes. */
void test_multi_comm_group(void)
{
    ncclComm_t second = make_comm(NULL);
    if (second == NULL) return;
    int64_t a = rank + 1, b = 10 * (rank + 1), a_sum = 0, b_sum = 0;
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    if (rank % 2 == 0) {
        CHECK_RES(ncclAllReduce(&a, &a_sum, 1, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
        CHECK_RES(ncclAllReduce(&b, &b_sum, 1, ncclInt64, ncclSum, second, NULL), ncclSuccess);
    } else {
        CHECK_RES(ncclAllReduce(&b, &b_sum, 1, ncclInt64, ncclSum, second, NULL), ncclSuccess);
        CHECK_RES(ncclAllReduce(&a, &a_sum, 1, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    }
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    int64_t want = (int64_t)nranks * (nranks + 1) / 2;
    CHECK(a_sum == want && b_sum == 10 * want, "two communicators in one group: got %lld and "
          "%lld, want %lld and %lld", (long long)a_sum, (long long)b_sum, (long long)want,
          (long long)(10 * want));
    CHECK_RES(ncclCommDestroy(second), ncclSuccess);
}

/* One group over two communicators, each on its own host stream (NCCL's loop over devices,
 * one stream each): the group's batch is split over the streams; even ranks put both on one
 * stream, odd ranks one per stream, which must not matter. A group mixing a host stream with
 * stream NULL is refused, and runs nothing. */
void test_multi_stream_group(void)
{
    ncclComm_t second = make_comm(NULL);
    if (second == NULL) return;
    cudaStream_t s1 = NULL, s2 = NULL;
    CHECK_RES(tuttiStreamCreate(&s1), ncclSuccess);
    CHECK_RES(tuttiStreamCreate(&s2), ncclSuccess);
    const size_t count = 4096;
    int64_t *a = alloc_i64(count, rank + 1), *b = alloc_i64(count, 10 * (rank + 1));
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclAllReduce(a, a, count, ncclInt64, ncclSum, comm, s1), ncclSuccess);
    CHECK_RES(ncclAllReduce(b, b, count, ncclInt64, ncclSum, second, rank % 2 ? s2 : s1),
              ncclSuccess);
    CHECK_RES(ncclAllReduce(a, a, count, ncclInt64, ncclSum, comm, s1), ncclSuccess);
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    CHECK_RES(tuttiStreamSynchronize(s1), ncclSuccess);
    CHECK_RES(tuttiStreamSynchronize(s2), ncclSuccess);
    int64_t want = (int64_t)nranks * (nranks + 1) / 2;
    check_all_equal("the first communicator's two AllReduces, stream 1", a, want * nranks,
                    count);
    check_all_equal("the second communicator's AllReduce on its own stream", b, 10 * want,
                    count);
    int64_t x = 1;
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclAllReduce(&x, &x, 1, ncclInt64, ncclSum, comm, s1), ncclSuccess);
    CHECK_RES(ncclAllReduce(&x, &x, 1, ncclInt64, ncclSum, second, NULL), ncclInvalidUsage);
    CHECK_FAILS(ncclGroupEnd());
    CHECK(x == 1, "a refused group ran: x is %lld", (long long)x);
    CHECK_RES(tuttiStreamDestroy(s1), ncclSuccess);
    CHECK_RES(tuttiStreamDestroy(s2), ncclSuccess);
    CHECK_RES(ncclCommDestroy(second), ncclSuccess);
    free(a);
    free(b);
}

/* Collectives and point to point mixed in one group on one communicator: every result as if
 * each had run alone, in issue order for the collectives. */
void test_mixed_group(void)
{
    const size_t count = 33, total = count * (size_t)nranks;
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    int64_t *send = alloc_i64(total, 0), *sum = alloc_i64(count, SENTINEL);
    int64_t *ring = alloc_i64(count, SENTINEL), *bcast = alloc_i64(count, SENTINEL);
    int64_t *a2a = alloc_i64(total, SENTINEL), *gathered = alloc_i64(total, SENTINEL);
    int64_t *want = alloc_i64(total, 0);
    for (size_t k = 0; k < total; k++) send[k] = pair_val(rank, (int)(k / count), k % count);

    /* AlltoAll and Gather move their data as sends and receives between the same peers as the
     * ring shift; NCCL matches a pair's messages in posting order, so every rank posts the
     * ring shift before them. */
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclAllReduce(send, sum, count, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    CHECK_RES(ncclRecv(ring, count, ncclInt64, prev, comm, NULL), ncclSuccess);
    CHECK_RES(ncclBroadcast(send, bcast, count, ncclInt64, nranks - 1, comm, NULL), ncclSuccess);
    CHECK_RES(ncclSend(send, count, ncclInt64, next, comm, NULL), ncclSuccess);
    CHECK_RES(ncclAlltoAll(send, a2a, count, ncclInt64, comm, NULL), ncclSuccess);
    CHECK_RES(ncclGather(send, gathered, count, ncclInt64, 0, comm, NULL), ncclSuccess);
    CHECK_RES(ncclGroupEnd(), ncclSuccess);

    for (size_t i = 0; i < count; i++) {
        want[i] = 0;
        for (int r = 0; r < nranks; r++) want[i] += pair_val(r, 0, i);
    }
    check_i64("mixed group: AllReduce", sum, want, count);
    for (size_t i = 0; i < count; i++) want[i] = pair_val(prev, 0, i);
    check_i64("mixed group: ring shift", ring, want, count);
    for (size_t i = 0; i < count; i++) want[i] = pair_val(nranks - 1, 0, i);
    check_i64("mixed group: Broadcast", bcast, want, count);
    for (size_t k = 0; k < total; k++) want[k] = pair_val((int)(k / count), rank, k % count);
    check_i64("mixed group: AlltoAll", a2a, want, total);
    for (size_t k = 0; k < total; k++)
        want[k] = rank == 0 ? pair_val((int)(k / count), 0, k % count) : SENTINEL;
    check_i64("mixed group: Gather", gathered, want, total);
    free(send);
    free(sum);
    free(ring);
    free(bcast);
    free(a2a);
    free(gathered);
    free(want);
}

/* The same collectives grouped on even ranks and issued one by one on odd ones, which NCCL
 * allows: a large AllReduce first (the ring), then small AllReduce, Broadcast and Reduce (Tree
 * across hosts, where this also runs). No collective may wait for a peer to reach a later
 * one: connections an algorithm needs must exist before the group starts. */
void test_uneven_grouping(void)
{
    const size_t big = (size_t)1 << 20, small = 5; /* 8 MiB: beyond Tree's half FIFO */
    int64_t *in = alloc_i64(big, 0), *out = alloc_i64(big, SENTINEL);
    int64_t *sum = alloc_i64(small, SENTINEL), *bcast = alloc_i64(small, SENTINEL);
    int64_t *red = alloc_i64(small, SENTINEL), *want = alloc_i64(big, 0);
    for (size_t i = 0; i < big; i++) in[i] = pair_val(rank, 0, i);
    int root_b = nranks - 1, root_r = nranks > 1 ? 1 : 0;
    bool grouped = rank % 2 == 0;
    if (grouped) CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclAllReduce(in, out, big, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    CHECK_RES(ncclAllReduce(in, sum, small, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    CHECK_RES(ncclBroadcast(in, bcast, small, ncclInt64, root_b, comm, NULL), ncclSuccess);
    CHECK_RES(ncclReduce(in, red, small, ncclInt64, ncclSum, root_r, comm, NULL), ncclSuccess);
    if (grouped) CHECK_RES(ncclGroupEnd(), ncclSuccess);
    for (size_t i = 0; i < big; i++) {
        want[i] = 0;
        for (int r = 0; r < nranks; r++) want[i] += pair_val(r, 0, i);
    }
    check_i64("uneven grouping: large AllReduce", out, want, big);
    check_i64("uneven grouping: small AllReduce", sum, want, small);
    if (rank == root_r) check_i64("uneven grouping: Reduce", red, want, small);
    for (size_t i = 0; i < small; i++) want[i] = pair_val(root_b, 0, i);
    check_i64("uneven grouping: Broadcast", bcast, want, small);
    free(in);
    free(out);
    free(sum);
    free(bcast);
    free(red);
    free(want);
}

/* Many collectives aggregated in one group, each with its own buffers, operator and count. */
void test_aggregated_group(void)
{
    enum { OPS = 64 };
    static const ncclRedOp_t ops[] = {ncclSum, ncclMax, ncclMin, ncclProd};
    int64_t *in[OPS], *out[OPS];
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    for (int k = 0; k < OPS; k++) {
        size_t count = (size_t)(1 + k * 37);
        in[k] = alloc_i64(count, 0);
        out[k] = alloc_i64(count, SENTINEL);
        for (size_t i = 0; i < count; i++) in[k][i] = (int64_t)((rank + k + (int)i) % 3 + 1);
        CHECK_RES(ncclAllReduce(in[k], out[k], count, ncclInt64, ops[k % 4], comm, NULL),
                  ncclSuccess);
    }
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    for (int k = 0; k < OPS; k++) {
        size_t count = (size_t)(1 + k * 37);
        int shown = 0;
        for (size_t i = 0; i < count; i++) {
            int64_t want = ops[k % 4] == ncclSum || ops[k % 4] == ncclMax ? 0 : 4;
            if (ops[k % 4] == ncclProd) want = 1;
            for (int r = 0; r < nranks; r++) {
                int64_t v = (int64_t)((r + k + (int)i) % 3 + 1);
                if (ops[k % 4] == ncclSum) want += v;
                if (ops[k % 4] == ncclProd) want *= v;
                if (ops[k % 4] == ncclMax && v > want) want = v;
                if (ops[k % 4] == ncclMin && v < want) want = v;
            }
            if (out[k][i] != want && shown++ < 3)
                FAIL("aggregated group: operation %d, index %zu: got %lld, want %lld", k, i,
                     (long long)out[k][i], (long long)want);
        }
        free(in[k]);
        free(out[k]);
    }
}

/* Group state belongs to the calling thread: two threads, each with its own communicator,
 * open, fill and end groups concurrently without seeing each other's operations. */
struct group_thread {
    ncclComm_t comm;
    int64_t base; /* distinct inputs per thread */
    long errors;
};

static void *run_group_thread(void *arg)
{
    struct group_thread *t = arg;
    enum { ROUNDS = 200, COUNT = 17 };
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    int64_t in[COUNT], sum[COUNT], ring[COUNT];
    for (int round = 0; round < ROUNDS && t->errors == 0; round++) {
        for (int i = 0; i < COUNT; i++) in[i] = t->base + rank * 1000 + round * 10 + i;
        ncclResult_t res[6];
        res[0] = ncclGroupStart();
        res[1] = ncclGroupStart();
        res[2] = ncclAllReduce(in, sum, COUNT, ncclInt64, ncclSum, t->comm, NULL);
        res[3] = ncclGroupEnd();
        ncclGroupStart();
        res[4] = ncclSend(in, COUNT, ncclInt64, next, t->comm, NULL);
        res[4] = res[4] != ncclSuccess ? res[4]
                                       : ncclRecv(ring, COUNT, ncclInt64, prev, t->comm, NULL);
        ncclGroupEnd();
        res[5] = ncclGroupEnd();
        for (int k = 0; k < 6; k++)
            if (res[k] != ncclSuccess) {
                fprintf(stderr, "rank %d: thread with base %lld, round %d: call %d returned %d "
                        "(%s)\n", rank, (long long)t->base, round, k, (int)res[k],
                        ncclGetErrorString(res[k]));
                t->errors++;
            }
        for (int i = 0; i < COUNT && t->errors == 0; i++) {
            int64_t want_sum = 0;
            for (int r = 0; r < nranks; r++) want_sum += t->base + r * 1000 + round * 10 + i;
            int64_t want_ring = t->base + prev * 1000 + round * 10 + i;
            if (sum[i] != want_sum || ring[i] != want_ring) {
                fprintf(stderr, "rank %d: thread with base %lld, round %d, index %d: sum %lld "
                        "(want %lld), ring %lld (want %lld)\n", rank, (long long)t->base, round,
                        i, (long long)sum[i], (long long)want_sum, (long long)ring[i],
                        (long long)want_ring);
                t->errors++;
            }
        }
    }
    return NULL;
}

void test_thread_groups(void)
{
    struct group_thread threads[2] = {{comm, 0, 0}, {make_comm(NULL), 1000000, 0}};
    if (threads[1].comm == NULL) return;
    pthread_t other;
    if (pthread_create(&other, NULL, run_group_thread, &threads[1]) != 0) {
        FAIL("pthread_create failed");
        ncclCommDestroy(threads[1].comm);
        return;
    }
    run_group_thread(&threads[0]);
    pthread_join(other, NULL);
    CHECK(threads[0].errors == 0 && threads[1].errors == 0,
          "groups on two threads: %ld and %ld errors", threads[0].errors, threads[1].errors);
    CHECK_RES(ncclCommDestroy(threads[1].comm), ncclSuccess);
}

/* Each rank exchanges 8 MiB with both neighbours at once (twice NCCL_BUFFSIZE's default), which
 * completes only if all four transfers progress together. Needs 3 ranks, so that the two
 * neighbours differ. */
void test_sendrecv_bidirectional(void)
{
    if (nranks < 3) return;
    const size_t count = (size_t)1 << 20;
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    int64_t *to_next = alloc_i64(count, 0), *to_prev = alloc_i64(count, 0);
    int64_t *from_next = alloc_i64(count, SENTINEL), *from_prev = alloc_i64(count, SENTINEL);
    int64_t *want = alloc_i64(count, 0);
    for (size_t i = 0; i < count; i++) {
        to_next[i] = pair_val(rank, next, i);
        to_prev[i] = pair_val(rank, prev, i);
    }
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclSend(to_next, count, ncclInt64, next, comm, NULL), ncclSuccess);
    CHECK_RES(ncclSend(to_prev, count, ncclInt64, prev, comm, NULL), ncclSuccess);
    CHECK_RES(ncclRecv(from_next, count, ncclInt64, next, comm, NULL), ncclSuccess);
    CHECK_RES(ncclRecv(from_prev, count, ncclInt64, prev, comm, NULL), ncclSuccess);
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    for (size_t i = 0; i < count; i++) want[i] = pair_val(next, rank, i);
    check_i64("bidirectional: from next", from_next, want, count);
    for (size_t i = 0; i < count; i++) want[i] = pair_val(prev, rank, i);
    check_i64("bidirectional: from prev", from_prev, want, count);
    free(to_next);
    free(to_prev);
    free(from_next);
    free(from_prev);
    free(want);
}

/* ncclGroupSimulateEnd estimates a positive time for a non-empty group and runs nothing, then
 * or later: the next real operation leaves the simulated one's recvbuff alone. */
void test_simulate_end(void)
{
    const size_t count = 1024;
    int64_t *send = alloc_i64(count, 3), *recv = alloc_i64(count, SENTINEL);
    int64_t *real = alloc_i64(count, SENTINEL);
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclAllReduce(send, recv, count, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    CHECK_RES(ncclGroupSimulateEnd(&sim), ncclSuccess);
    CHECK(sim.estimatedTime > 0.0f, "ncclGroupSimulateEnd: estimatedTime %g, want > 0",
          (double)sim.estimatedTime);
    check_all_equal("ncclGroupSimulateEnd ran the AllReduce", recv, SENTINEL, count);
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclAllReduce(send, real, count, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    check_all_equal("AllReduce after ncclGroupSimulateEnd", real, 3 * (int64_t)nranks, count);
    check_all_equal("the simulated AllReduce ran with the next group", recv, SENTINEL, count);
    /* A simInfo not made with the initializer (or NULL) ends the group all the same, running
     * nothing: the next call is not taken into a group left open. */
    ncclSimInfo_t bad = {0};
    for (int k = 0; k < 2; k++) {
        CHECK_RES(ncclGroupStart(), ncclSuccess);
        CHECK_RES(ncclAllReduce(send, recv, count, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
        CHECK_RES(ncclGroupSimulateEnd(k == 0 ? &bad : NULL), ncclInvalidArgument);
        for (size_t i = 0; i < count; i++) real[i] = SENTINEL;
        CHECK_RES(ncclAllReduce(send, real, count, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
        check_all_equal("AllReduce after a refused ncclGroupSimulateEnd (run at once)", real,
                        3 * (int64_t)nranks, count);
        check_all_equal("the AllReduce of a refused ncclGroupSimulateEnd", recv, SENTINEL,
                        count);
    }
    free(send);
    free(recv);
    free(real);
}
