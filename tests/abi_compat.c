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

static int rank, nranks, failures;

#define CHECK_RES(expr)                                                                         \
    do {                                                                                        \
        ncclResult_t res_ = (expr);                                                             \
        if (res_ != ncclSuccess) {                                                              \
            fprintf(stderr, "abi_compat.c:%d: rank %d: %s returned %d (%s): %s\n", __LINE__,    \
                    rank, #expr, (int)res_, ncclGetErrorString(res_), ncclGetLastError(NULL));  \
            failures++;                                                                         \
        }                                                                                       \
    } while (0)

/* Compares `count` elements and prints the first few mismatches with rank and index. */
static void check_i32(const char *what, const int32_t *got, const int32_t *want, size_t count)
{
    int shown = 0;
    for (size_t i = 0; i < count; i++) {
        if (got[i] == want[i]) continue;
        if (shown++ < 3)
            fprintf(stderr, "rank %d: %s: element %zu: got %d, want %d\n", rank, what, i,
                    (int)got[i], (int)want[i]);
        failures++;
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
    CHECK_RES(ncclAllReduce(send, recv, COUNT, ncclInt32, ncclSum, comm, NULL));
    check_i32("AllReduce sum", recv, want, COUNT);

    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < COUNT; i++) want[(size_t)r * COUNT + i] = value(r, i);
    CHECK_RES(ncclAllGather(send, recv, COUNT, ncclInt32, comm, NULL));
    check_i32("AllGather", recv, want, (size_t)n * COUNT);

    /* ReduceScatter: block j of every rank's input is value(rank, j*COUNT+i). */
    for (size_t k = 0; k < (size_t)n * COUNT; k++) send[k] = value(rank, k);
    for (size_t i = 0; i < COUNT; i++) {
        want[i] = 0;
        for (int r = 0; r < n; r++) want[i] += value(r, (size_t)rank * COUNT + i);
    }
    CHECK_RES(ncclReduceScatter(send, recv, COUNT, ncclInt32, ncclSum, comm, NULL));
    check_i32("ReduceScatter", recv, want, COUNT);

    int root = n - 1;
    for (size_t i = 0; i < COUNT; i++) {
        send[i] = value(rank, i);
        want[i] = value(root, i);
    }
    CHECK_RES(ncclBroadcast(send, recv, COUNT, ncclInt32, root, comm, NULL));
    check_i32("Broadcast", recv, want, COUNT);

    /* Reduce with max to root 0; the other ranks' recvbuff must stay untouched. */
    for (size_t i = 0; i < COUNT; i++) {
        recv[i] = -1;
        want[i] = rank == 0 ? value(n - 1, i) : -1;
    }
    CHECK_RES(ncclReduce(send, recv, COUNT, ncclInt32, ncclMax, 0, comm, NULL));
    check_i32("Reduce max", recv, want, COUNT);

    /* Ring shift inside a group: send to rank+1, receive from rank-1. */
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    for (size_t i = 0; i < COUNT; i++) want[i] = value(prev, i);
    CHECK_RES(ncclGroupStart());
    CHECK_RES(ncclSend(send, COUNT, ncclInt32, next, comm, NULL));
    CHECK_RES(ncclRecv(recv, COUNT, ncclInt32, prev, comm, NULL));
    CHECK_RES(ncclGroupEnd());
    check_i32("Send/Recv ring", recv, want, COUNT);

    /* AlltoAll: block j of the input goes to rank j. */
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < COUNT; i++) {
            send[(size_t)j * COUNT + i] = rank * 100000 + j * 1000 + (int32_t)i;
            want[(size_t)j * COUNT + i] = j * 100000 + rank * 1000 + (int32_t)i;
        }
    CHECK_RES(ncclAlltoAll(send, recv, COUNT, ncclInt32, comm, NULL));
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
    nranks = atoi(size_env);

    int version = 0;
    CHECK_RES(ncclGetVersion(&version));
    if (version != NCCL_VERSION_CODE) {
        fprintf(stderr, "ncclGetVersion: got %d, want %d\n", version, NCCL_VERSION_CODE);
        failures++;
    }

    ncclUniqueId id;
    ncclComm_t comm = NULL;
    CHECK_RES(ncclGetUniqueId(&id));
    CHECK_RES(ncclCommInitRank(&comm, nranks, id, rank));
    if (comm == NULL) return 1;
    int count = -1, me = -1;
    CHECK_RES(ncclCommCount(comm, &count));
    CHECK_RES(ncclCommUserRank(comm, &me));
    if (count != nranks || me != rank) {
        fprintf(stderr, "rank %d: ncclCommCount %d (want %d), ncclCommUserRank %d\n", rank, count,
                nranks, me);
        failures++;
    }
    run_collectives(comm);

    /* A second communicator from NVIDIA's ncclConfig_t layout, once every rank has finished
     * with the first rendezvous (the AllReduce below is the barrier). */
    int token = 1, total = 0;
    CHECK_RES(ncclAllReduce(&token, &total, 1, ncclInt32, ncclSum, comm, NULL));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    config.commName = "abi_compat";
    ncclComm_t configured = NULL;
    CHECK_RES(ncclGetUniqueId(&id));
    CHECK_RES(ncclCommInitRankConfig(&configured, nranks, id, rank, &config));
    if (configured != NULL) run_collectives(configured);

    /* Split into even and odd ranks, ordered by rank. */
    ncclComm_t half = NULL;
    CHECK_RES(ncclCommSplit(comm, rank % 2, rank, &half, NULL));
    if (half != NULL) {
        int half_count = -1, half_rank = -1;
        CHECK_RES(ncclCommCount(half, &half_count));
        CHECK_RES(ncclCommUserRank(half, &half_rank));
        int32_t mine = rank, sum = -1, want = 0;
        for (int r = rank % 2; r < nranks; r += 2) want += r;
        CHECK_RES(ncclAllReduce(&mine, &sum, 1, ncclInt32, ncclSum, half, NULL));
        int want_count = (nranks - rank % 2 + 1) / 2;
        if (half_count != want_count || half_rank != rank / 2 || sum != want) {
            fprintf(stderr, "rank %d: split: count %d rank %d sum %d, want %d %d %d\n", rank,
                    half_count, half_rank, (int)sum, want_count, rank / 2, (int)want);
            failures++;
        }
        printf("rank %d: %s ncclCommSplit\n", rank, half_count == want_count ? "PASS" : "FAIL");
        CHECK_RES(ncclCommFinalize(half));
        CHECK_RES(ncclCommDestroy(half));
    } else {
        fprintf(stderr, "rank %d: ncclCommSplit gave no communicator\n", rank);
        failures++;
    }

    if (configured != NULL) {
        CHECK_RES(ncclCommFinalize(configured));
        CHECK_RES(ncclCommDestroy(configured));
    }
    CHECK_RES(ncclCommFinalize(comm));
    CHECK_RES(ncclCommDestroy(comm));
    printf("rank %d: %s (%d failures)\n", rank, failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
