/* Conformance of Tutti's public API to NCCL 2.28's documented contracts, one test function per
 * contract. This file holds the driver and the communicator tests (queries, split ordering,
 * finalize, double destroy, abort, nonblocking communicators); api_conformance_colls.c the
 * collectives' contracts and api_conformance_groups.c point to point and groups, all linked into
 * one program.
 *
 * Run it as every rank under tutti-run (any number of ranks; one without a launcher). Every
 * rank runs every test in the same order, and each test prints "PASS name" or "FAIL name" per
 * rank, with got and want (rank, index) for each failed check. Buffers hold int64 values or
 * powers of two, so every expected result is exact. `api_conformance NAME...` runs only the
 * named tests; the exit code is 1 when any check failed. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_conformance_common.h"
#include "world.h"
#include "nccl.h"
#include "tutti.h"

/* ---- Queries ---------------------------------------------------------------------------- */

static void test_queries(void)
{
    int count = -1, me = -1, device = 99;
    ncclResult_t async = ncclInternalError;
    CHECK_RES(ncclCommCount(comm, &count), ncclSuccess);
    CHECK_RES(ncclCommUserRank(comm, &me), ncclSuccess);
    CHECK_RES(ncclCommCuDevice(comm, &device), ncclSuccess);
    CHECK_RES(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    CHECK(count == nranks, "ncclCommCount: got %d, want %d", count, nranks);
    CHECK(me == rank, "ncclCommUserRank: got %d, want %d", me, rank);
    CHECK(device == -1, "ncclCommCuDevice: got %d, want -1 (host communicator)", device);
    CHECK(async == ncclSuccess, "ncclCommGetAsyncError on a healthy communicator: got %d (%s)",
          (int)async, ncclGetErrorString(async));
    CHECK_RES(ncclCommGetAsyncError(NULL, &async), ncclInvalidArgument);
    CHECK_RES(ncclCommCount(NULL, &count), ncclInvalidArgument);
}

/* ---- Communicators ------------------------------------------------------------------------- */

/* Split: key = nranks - rank reverses the order; colors by parity; NOCOLOR yields NULL. */
static void test_split(void)
{
    ncclComm_t rev = NULL, half = NULL, rest = NULL;
    if (CHECK_RES(ncclCommSplit(comm, 7, nranks - rank, &rev, NULL), ncclSuccess) && rev != NULL) {
        int count = -1, me = -1;
        CHECK_RES(ncclCommCount(rev, &count), ncclSuccess);
        CHECK_RES(ncclCommUserRank(rev, &me), ncclSuccess);
        CHECK(count == nranks && me == nranks - 1 - rank,
              "split by reversed key: count %d rank %d, want %d and %d", count, me, nranks,
              nranks - 1 - rank);
        int64_t mine = rank, *all = alloc_i64((size_t)nranks, SENTINEL);
        CHECK_RES(ncclAllGather(&mine, all, 1, ncclInt64, rev, NULL), ncclSuccess);
        for (int j = 0; j < nranks; j++)
            CHECK(all[j] == nranks - 1 - j, "reversed comm's rank %d is old rank %lld, want %d",
                  j, (long long)all[j], nranks - 1 - j);
        free(all);
        CHECK_RES(ncclCommDestroy(rev), ncclSuccess);
    }

    if (CHECK_RES(ncclCommSplit(comm, rank % 2, rank, &half, NULL), ncclSuccess) && half != NULL) {
        int count = -1, me = -1;
        CHECK_RES(ncclCommCount(half, &count), ncclSuccess);
        CHECK_RES(ncclCommUserRank(half, &me), ncclSuccess);
        int want_count = (nranks - rank % 2 + 1) / 2;
        CHECK(count == want_count && me == rank / 2,
              "split by parity: count %d rank %d, want %d and %d", count, me, want_count,
              rank / 2);
        int64_t mine = rank, sum = 0, want = 0;
        for (int r = rank % 2; r < nranks; r += 2) want += r;
        CHECK_RES(ncclAllReduce(&mine, &sum, 1, ncclInt64, ncclSum, half, NULL), ncclSuccess);
        CHECK(sum == want, "split by parity: sum of members %lld, want %lld", (long long)sum,
              (long long)want);
        CHECK_RES(ncclCommDestroy(half), ncclSuccess);
    }

    rest = (ncclComm_t)(uintptr_t)1;
    int color = rank == 0 ? NCCL_SPLIT_NOCOLOR : 3;
    if (CHECK_RES(ncclCommSplit(comm, color, 0, &rest, NULL), ncclSuccess)) {
        if (rank == 0) {
            CHECK(rest == NULL, "NCCL_SPLIT_NOCOLOR: newcomm %p, want NULL", (void *)rest);
        } else if (rest != NULL && rest != (ncclComm_t)(uintptr_t)1) {
            int count = -1;
            CHECK_RES(ncclCommCount(rest, &count), ncclSuccess);
            CHECK(count == nranks - 1, "split without rank 0: count %d, want %d", count,
                  nranks - 1);
            CHECK_RES(ncclCommDestroy(rest), ncclSuccess);
        } else {
            FAIL("split without rank 0: no communicator on rank %d", rank);
        }
    }
}

/* A second destroy of the same handle is an error, not a crash; destroying NULL is a no-op. */
static void test_destroy_twice(void)
{
    ncclComm_t c = make_comm(NULL);
    if (c == NULL) return;
    barrier(c);
    CHECK_RES(ncclCommDestroy(c), ncclSuccess);
    CHECK_FAILS(ncclCommDestroy(c));
    CHECK_RES(ncclCommDestroy(NULL), ncclSuccess);
}

/* After ncclCommFinalize, operations fail; ncclCommDestroy still succeeds. */
static void test_use_after_finalize(void)
{
    ncclComm_t c = make_comm(NULL);
    if (c == NULL) return;
    int64_t x = 1, y = 0;
    CHECK_RES(ncclAllReduce(&x, &y, 1, ncclInt64, ncclSum, c, NULL), ncclSuccess);
    CHECK_RES(ncclCommFinalize(c), ncclSuccess);
    CHECK_FAILS(ncclAllReduce(&x, &y, 1, ncclInt64, ncclSum, c, NULL));
    CHECK_RES(ncclCommFinalize(c), ncclInvalidArgument); /* NCCL rejects a second finalize */
    CHECK_RES(ncclCommDestroy(c), ncclSuccess);
}

/* ncclCommAbort of a healthy communicator frees it and reports success. */
static void test_abort_healthy(void)
{
    ncclComm_t c = make_comm(NULL);
    if (c == NULL) return;
    barrier(c);
    CHECK_RES(ncclCommAbort(c), ncclSuccess);
    CHECK_RES(ncclCommAbort(NULL), ncclSuccess);
}

/* Nonblocking communicator: calls return ncclSuccess or ncclInProgress, and
 * ncclCommGetAsyncError reports ncclInProgress until the work is done, then ncclSuccess. */
static void test_nonblocking(void)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    barrier(comm);
    ncclUniqueId id;
    ncclComm_t c = NULL;
    if (!CHECK_RES(ncclGetUniqueId(&id), ncclSuccess)) return;
    ncclResult_t res = ncclCommInitRankConfig(&c, nranks, id, rank, &config);
    CHECK(res == ncclSuccess || res == ncclInProgress,
          "nonblocking init returned %d (%s), want ncclSuccess or ncclInProgress", (int)res,
          ncclGetErrorString(res));
    if (c == NULL) {
        FAIL("nonblocking init returned no handle");
        return;
    }
    if (!CHECK_RES(wait_comm(c), ncclSuccess)) return;

    const size_t count = 5000;
    int64_t *send = alloc_i64(count, rank + 1), *recv = alloc_i64(count, SENTINEL);
    res = ncclAllReduce(send, recv, count, ncclInt64, ncclSum, c, NULL);
    CHECK(res == ncclSuccess || res == ncclInProgress, "nonblocking AllReduce returned %d (%s)",
          (int)res, ncclGetErrorString(res));
    CHECK_RES(wait_comm(c), ncclSuccess);
    check_all_equal("nonblocking AllReduce", recv, (int64_t)nranks * (nranks + 1) / 2, count);

    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    for (size_t i = 0; i < count; i++) recv[i] = SENTINEL;
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    res = ncclSend(send, count, ncclInt64, next, c, NULL);
    CHECK(res == ncclSuccess, "nonblocking ncclSend in a group returned %d", (int)res);
    res = ncclRecv(recv, count, ncclInt64, prev, c, NULL);
    CHECK(res == ncclSuccess, "nonblocking ncclRecv in a group returned %d", (int)res);
    res = ncclGroupEnd();
    CHECK(res == ncclSuccess || res == ncclInProgress, "nonblocking ncclGroupEnd returned %d",
          (int)res);
    CHECK_RES(wait_comm(c), ncclSuccess);
    check_all_equal("nonblocking ring shift", recv, prev + 1, count);

    /* A group over two nonblocking communicators runs on the first one's queue; the second
     * must still say ncclInProgress until its AllReduce is done. The other ranks join late, so
     * polling only the second communicator would find its buffer unfilled if it said
     * ncclSuccess at once. */
    ncclComm_t twin = NULL;
    res = ncclCommSplit(c, 0, rank, &twin, NULL);
    if (twin != NULL && CHECK_RES(wait_comm(twin), ncclSuccess)) {
        int64_t *recv2 = alloc_i64(count, SENTINEL);
        for (size_t i = 0; i < count; i++) recv[i] = SENTINEL;
        if (rank != 0) usleep(200 * 1000);
        CHECK_RES(ncclGroupStart(), ncclSuccess);
        res = ncclAllReduce(send, recv, count, ncclInt64, ncclSum, c, NULL);
        CHECK(res == ncclSuccess, "AllReduce on the first of two in a group returned %d",
              (int)res);
        res = ncclAllReduce(send, recv2, count, ncclInt64, ncclSum, twin, NULL);
        CHECK(res == ncclSuccess, "AllReduce on the second of two in a group returned %d",
              (int)res);
        res = ncclGroupEnd();
        CHECK(res == ncclSuccess || res == ncclInProgress, "ncclGroupEnd over two returned %d",
              (int)res);
        /* An event recorded on the second with no stream completes after that AllReduce, on
         * whichever queue it runs. */
        tuttiEvent_t ev = NULL;
        if (CHECK_RES(tuttiEventCreate(&ev), ncclSuccess)) {
            CHECK_RES(tuttiEventRecord(ev, twin, NULL), ncclSuccess);
            CHECK_RES(tuttiEventSynchronize(ev), ncclSuccess);
            check_all_equal("the second communicator of a nonblocking group, after an event",
                            recv2, (int64_t)nranks * (nranks + 1) / 2, count);
            CHECK_RES(tuttiEventDestroy(ev), ncclSuccess);
        }
        CHECK_RES(wait_comm(twin), ncclSuccess);
        check_all_equal("the second communicator of a nonblocking group", recv2,
                        (int64_t)nranks * (nranks + 1) / 2, count);
        CHECK_RES(wait_comm(c), ncclSuccess);
        check_all_equal("the first communicator of a nonblocking group", recv,
                        (int64_t)nranks * (nranks + 1) / 2, count);
        CHECK_RES(ncclCommDestroy(twin), ncclSuccess);
        free(recv2);
    } else if (twin == NULL) {
        FAIL("nonblocking split (twin) returned no communicator");
    }

    /* A split of a nonblocking communicator inherits nonblocking mode: the child may be handed
     * back still initialising, and is polled the same way. Parity colours, reversed keys. */
    ncclComm_t child = NULL;
    res = ncclCommSplit(c, rank % 2, nranks - rank, &child, NULL);
    CHECK(res == ncclSuccess || res == ncclInProgress, "nonblocking split returned %d (%s)",
          (int)res, ncclGetErrorString(res));
    if (child != NULL && CHECK_RES(wait_comm(child), ncclSuccess)) {
        int child_count = -1, child_rank = -1;
        CHECK_RES(ncclCommCount(child, &child_count), ncclSuccess);
        CHECK_RES(ncclCommUserRank(child, &child_rank), ncclSuccess);
        int want_count = (nranks - rank % 2 + 1) / 2;
        CHECK(child_count == want_count && child_rank == want_count - 1 - rank / 2,
              "nonblocking split: count %d rank %d, want %d and %d", child_count, child_rank,
              want_count, want_count - 1 - rank / 2);
        int64_t mine = rank, sum = 0, want = 0;
        for (int r = rank % 2; r < nranks; r += 2) want += r;
        res = ncclAllReduce(&mine, &sum, 1, ncclInt64, ncclSum, child, NULL);
        CHECK(res == ncclSuccess || res == ncclInProgress, "AllReduce on the child: %d",
              (int)res);
        CHECK_RES(wait_comm(child), ncclSuccess);
        CHECK(sum == want, "nonblocking child AllReduce: got %lld, want %lld", (long long)sum,
              (long long)want);
        res = ncclCommFinalize(child);
        CHECK(res == ncclSuccess || res == ncclInProgress, "child finalize returned %d",
              (int)res);
        CHECK_RES(wait_comm(child), ncclSuccess);
        CHECK_RES(ncclCommDestroy(child), ncclSuccess);
    } else if (child == NULL) {
        FAIL("nonblocking split returned no communicator");
    }

    res = ncclCommFinalize(c);
    CHECK(res == ncclSuccess || res == ncclInProgress, "nonblocking finalize returned %d",
          (int)res);
    CHECK_RES(wait_comm(c), ncclSuccess);
    CHECK_RES(ncclCommDestroy(c), ncclSuccess);
    free(send);
    free(recv);
}

/* ---- Driver -------------------------------------------------------------------------------- */

static const struct world_test tests[] = {
    {"queries", test_queries, false},
    {"allgather_in_place", test_allgather_in_place, false},
    {"reducescatter_in_place", test_reducescatter_in_place, false},
    {"reduce_root_only", test_reduce_root_only, false},
    {"avg", test_avg, false},
    {"fp_mode", test_fp_mode, false},
    {"broadcast_every_root", test_broadcast_every_root, false},
    {"alltoall", test_alltoall, false},
    {"gather_every_root", test_gather_every_root, false},
    {"scatter_every_root", test_scatter_every_root, false},
    {"movement_dtypes", test_movement_dtypes, false},
    {"sendrecv_ring", test_sendrecv_ring, false},
    {"sendrecv_all_pairs", test_sendrecv_all_pairs, false},
    {"send_to_self", test_send_to_self, false},
    {"group_errors", test_group_errors, false},
    {"nested_groups", test_nested_groups, false},
    {"multi_comm_group", test_multi_comm_group, false},
    {"multi_stream_group", test_multi_stream_group, false},
    {"mixed_group", test_mixed_group, false},
    {"aggregated_group", test_aggregated_group, false},
    {"uneven_grouping", test_uneven_grouping, false},
    {"thread_groups", test_thread_groups, false},
    {"sendrecv_bidirectional", test_sendrecv_bidirectional, false},
    {"simulate_end", test_simulate_end, false},
    {"count_zero", test_count_zero, false},
    {"destroy_twice", test_destroy_twice, false},
    {"use_after_finalize", test_use_after_finalize, false},
    {"abort_healthy", test_abort_healthy, false},
    {"nonblocking", test_nonblocking, false},
    {"split", test_split, false},
};

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    comm = world_open("api_conformance", &rank, &nranks);
    if (comm == NULL) return 1;

    int failed = world_run_tests(tests, sizeof tests / sizeof tests[0], argc, argv, 1, NULL);
    if (failed < 0) return 2;
    ncclCommDestroy(comm);
    printf("rank %d: %d tests failed\n", rank, failed);
    return failed ? 1 : 0;
}
