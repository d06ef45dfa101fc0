/* Binary compatibility with NVIDIA's NCCL: this program is compiled against NVIDIA's own nccl.h
 * (from the CUDA toolkit, not Tutti's header) and linked with -lnccl against Tutti's
 * lib/nccl-compat/libnccl.so.2, exactly as a program written for NCCL would be. It uses nothing
 * but that header's API, on host buffers with NULL streams, and needs no CUDA library at run time.
 *
 * Run it as every rank under tutti-run: with NCCL_COMM_ID set, ncclGetUniqueId yields the same
 * id on every rank, so no out-of-band exchange is needed. Every result is checked exactly; the
 * exit code is 1 when any check failed. */
#include <nccl.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int rank, nranks;

/* Compares `count` elements: each mismatch is a failed check, with its index. */
static void check_i32(const char *what, const int32_t *got, const int32_t *want, size_t count)
{
    int shown = 0;
    for (size_t i = 0; i < count; i++) {
        if (got[i] == want[i]) continue;
        shown++;
        CHECK_EQ_MSG(got[i], want[i], "%s: element %zu", what, i);
    }
    printf("rank %d: %s %s\n", rank, shown ? "FAIL" : "PASS", what);
}

static int32_t value(int r, size_t i)
{
    return (int32_t)(r * 1000 + (int)i + 1);
}

static void run_collectives(ncclComm_t comm)
{
    enum { COUNT = 37 };
    int n = nranks;
    int32_t *send = calloc((size_t)n * COUNT, sizeof *send);
    int32_t *recv = calloc((size_t)n * COUNT, sizeof *recv);
    int32_t *want = calloc((size_t)n * COUNT, sizeof *want);
    if (send == NULL || recv == NULL || want == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }

    for (size_t i = 0; i < COUNT; i++) {
        send[i] = value(rank, i);
        want[i] = 0;
        for (int r = 0; r < n; r++) want[i] += value(r, i);
    }
    CHECK_RES(ncclAllReduce(send, recv, COUNT, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
    check_i32("AllReduce sum", recv, want, COUNT);

    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < COUNT; i++) want[(size_t)r * COUNT + i] = value(r, i);
    CHECK_RES(ncclAllGather(send, recv, COUNT, ncclInt32, comm, NULL), ncclSuccess);
    check_i32("AllGather", recv, want, (size_t)n * COUNT);

    /* ReduceScatter: block j of every rank's input is value(rank, j*COUNT+i). */
    for (size_t k = 0; k < (size_t)n * COUNT; k++) send[k] = value(rank, k);
    for (size_t i = 0; i < COUNT; i++) {
        want[i] = 0;
        for (int r = 0; r < n; r++) want[i] += value(r, (size_t)rank * COUNT + i);
    }
    CHECK_RES(ncclReduceScatter(send, recv, COUNT, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
    check_i32("ReduceScatter", recv, want, COUNT);

    int root = n - 1;
    for (size_t i = 0; i < COUNT; i++) {
        send[i] = value(rank, i);
        want[i] = value(root, i);
    }
    CHECK_RES(ncclBroadcast(send, recv, COUNT, ncclInt32, root, comm, NULL), ncclSuccess);
    check_i32("Broadcast", recv, want, COUNT);

    /* Reduce with max to root 0; the other ranks' recvbuff must stay untouched. */
    for (size_t i = 0; i < COUNT; i++) {
        recv[i] = -1;
        want[i] = rank == 0 ? value(n - 1, i) : -1;
    }
    CHECK_RES(ncclReduce(send, recv, COUNT, ncclInt32, ncclMax, 0, comm, NULL), ncclSuccess);
    check_i32("Reduce max", recv, want, COUNT);

    /* Ring shift inside a group: send to rank+1, receive from rank-1. */
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    for (size_t i = 0; i < COUNT; i++) want[i] = value(prev, i);
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclSend(send, COUNT, ncclInt32, next, comm, NULL), ncclSuccess);
    CHECK_RES(ncclRecv(recv, COUNT, ncclInt32, prev, comm, NULL), ncclSuccess);
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    check_i32("Send/Recv ring", recv, want, COUNT);

    /* AlltoAll: block j of the input goes to rank j. */
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < COUNT; i++) {
            send[(size_t)j * COUNT + i] = rank * 100000 + j * 1000 + (int32_t)i;
            want[(size_t)j * COUNT + i] = j * 100000 + rank * 1000 + (int32_t)i;
        }
    CHECK_RES(ncclAlltoAll(send, recv, COUNT, ncclInt32, comm, NULL), ncclSuccess);
    check_i32("AlltoAll", recv, want, (size_t)n * COUNT);

    free(send);
    free(recv);
    free(want);
}

int main(void)
{
    const char *rank_env = getenv("RANK"), *size_env = getenv("WORLD_SIZE");
    if (rank_env == NULL || size_env == NULL || getenv("NCCL_COMM_ID") == NULL) {
        fprintf(stderr, "abi_compat: run me under tutti-run (RANK, WORLD_SIZE, NCCL_COMM_ID)\n");
        return 2;
    }
    rank = atoi(rank_env);
    check_rank = rank;
    nranks = atoi(size_env);

    int version = 0;
    CHECK_RES(ncclGetVersion(&version), ncclSuccess);
    CHECK_EQ_MSG(version, NCCL_VERSION_CODE, "ncclGetVersion");

    ncclUniqueId id;
    ncclComm_t comm = NULL;
    CHECK_RES(ncclGetUniqueId(&id), ncclSuccess);
    CHECK_RES(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
    if (comm == NULL) return 1;
    int count = -1, me = -1;
    CHECK_RES(ncclCommCount(comm, &count), ncclSuccess);
    CHECK_RES(ncclCommUserRank(comm, &me), ncclSuccess);
    CHECK_EQ_MSG(count, nranks, "ncclCommCount");
    CHECK_EQ_MSG(me, rank, "ncclCommUserRank");
    run_collectives(comm);

    /* A second communicator from NVIDIA's ncclConfig_t layout, once every rank has finished
     * with the first rendezvous (the AllReduce below is the barrier). */
    int token = 1, total = 0;
    CHECK_RES(ncclAllReduce(&token, &total, 1, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    config.commName = "abi_compat";
    ncclComm_t configured = NULL;
    CHECK_RES(ncclGetUniqueId(&id), ncclSuccess);
    CHECK_RES(ncclCommInitRankConfig(&configured, nranks, id, rank, &config), ncclSuccess);
    if (configured != NULL) run_collectives(configured);

    /* Split into even and odd ranks, ordered by rank. */
    ncclComm_t half = NULL;
    CHECK_RES(ncclCommSplit(comm, rank % 2, rank, &half, NULL), ncclSuccess);
    if (half != NULL) {
        int half_count = -1, half_rank = -1;
        CHECK_RES(ncclCommCount(half, &half_count), ncclSuccess);
        CHECK_RES(ncclCommUserRank(half, &half_rank), ncclSuccess);
        int32_t mine = rank, sum = -1, want = 0;
        for (int r = rank % 2; r < nranks; r += 2) want += r;
        CHECK_RES(ncclAllReduce(&mine, &sum, 1, ncclInt32, ncclSum, half, NULL), ncclSuccess);
        int want_count = (nranks - rank % 2 + 1) / 2;
        CHECK_EQ_MSG(half_count, want_count, "split: ncclCommCount");
        CHECK_EQ_MSG(half_rank, rank / 2, "split: ncclCommUserRank");
        CHECK_EQ_MSG(sum, want, "split: AllReduce of the ranks");
        printf("rank %d: %s ncclCommSplit\n", rank, half_count == want_count ? "PASS" : "FAIL");
        CHECK_RES(ncclCommFinalize(half), ncclSuccess);
        CHECK_RES(ncclCommDestroy(half), ncclSuccess);
    } else {
        FAIL("ncclCommSplit gave no communicator");
    }

    if (configured != NULL) {
        CHECK_RES(ncclCommFinalize(configured), ncclSuccess);
        CHECK_RES(ncclCommDestroy(configured), ncclSuccess);
    }
    CHECK_RES(ncclCommFinalize(comm), ncclSuccess);
    CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
    printf("rank %d: %s (%d failures)\n", rank, check_failures ? "FAIL" : "PASS",
           (int)check_failures);
    return check_failures ? 1 : 0;
}
