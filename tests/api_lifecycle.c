/* Communicators made from communicators, and user operators, end to end through the public
 * headers (memory, registrations and windows: api_memory.c). Runs as every rank of a 4-rank job under tutti-run (tuttiCommInitFromEnv):
 *
 *   - ncclCommSplit: by parity with keys reversing the order, with ties broken by parent rank,
 *     with a rank passing NCCL_SPLIT_NOCOLOR, nested, with a config, and with one rank passing
 *     a bad colour (every rank must fail, and the parent must still work);
 *   - ncclCommSplit, ncclCommShrink and ncclCommGrow with one rank whose nonblocking parent
 *     still has an operation in progress: it refuses, and every other rank fails at once too;
 *   - ncclCommInitRankScalable over ids broadcast by rank 0;
 *   - ncclCommInitAll: 4 ranks inside rank 0's process, driven by one thread each, then split
 *     all four by one thread inside a group (the splits meet at its end);
 *   - ncclRedOpCreatePreMulSum on float32 and int32 (scalar 2), the scalar copied at creation,
 *     destroyed operators, datatype mismatch, device scalars;
 *   - ncclCommGrow from 4 to 5 ranks: first with two ranks passing an id and with ranks
 *     disagreeing on the size (ncclInvalidUsage on every rank, the parent still works), then
 *     for real with rank 3 as the coordinator (ncclCommGetUniqueId) and new rank 4 a thread
 *     of rank 3's process;
 *   - ncclCommShrink with exclude lists that differ (refused on every survivor at once);
 *   - ncclCommShrink excluding rank 3 (which only destroys its parent), then a shrink with
 *     NCCL_SHRINK_ABORT excluding one more, then, after ncclCommRevoke, a shrink excluding
 *     nobody (a split of the revoked communicator is refused);
 *   - ncclCommShrink with NCCL_SHRINK_ABORT on a nonblocking parent whose AllReduce still waits
 *     for the excluded rank: the operation is aborted and the shrink goes ahead.
 *
 * Every new communicator is checked for its size, this rank's new rank (computed here from the
 * membership rule, not asked of the library) and an AllReduce whose exact sum follows from the
 * parent ranks of its members. Each failed check prints got and want with the rank; the exit
 * code is 1 when any check failed. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_checks.h"
#include "nccl.h"
#include "tutti.h"

/* Checks that `comm` has `size` ranks, that this rank is `want_rank` in it, and that an int32
 * AllReduce sums input_of(r, i) over exactly the world ranks in `members`. */
static void check_comm(const char *what, ncclComm_t comm, int size, int want_rank,
                       const int *members)
{
    int got_rank = -1, got_size = -1;
    if (comm == NULL) {
        FAIL("%s: communicator is NULL, want one of %d ranks", what, size);
        return;
    }
    CHECK_RES(ncclCommCount(comm, &got_size), ncclSuccess);
    CHECK_RES(ncclCommUserRank(comm, &got_rank), ncclSuccess);
    CHECK_EQ_MSG(got_size, size, "%s", what);
    CHECK_EQ_MSG(got_rank, want_rank, "%s", what);
    int32_t send[COUNT], recv[COUNT];
    for (int i = 0; i < COUNT; i++) {
        send[i] = input_of(world_rank, i);
        recv[i] = -1;
    }
    CHECK_RES(ncclAllReduce(send, recv, COUNT, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
    for (int i = 0; i < COUNT; i++) {
        int32_t want = 0;
        for (int m = 0; m < size; m++) want += input_of(members[m], i);
        if (recv[i] != want) {
            FAIL("%s: AllReduce element %d = %d, want %d", what, i, recv[i], want);
            break;
        }
    }
}

/* ---- split -------------------------------------------------------------------------------- */

static void test_split(ncclComm_t world)
{
    ncclComm_t sub = NULL;

    /* Parity, keys reversing the order: colour c holds world ranks {c, c + 2}, the higher one
     * first. */
    CHECK_RES(ncclCommSplit(world, world_rank % 2, NRANKS - world_rank, &sub, NULL), ncclSuccess);
    {
        int members[2] = {world_rank % 2 + 2, world_rank % 2};
        check_comm("parity split", sub, 2, world_rank < 2 ? 1 : 0, members);
    }
    CHECK_RES(ncclCommDestroy(sub), ncclSuccess);

    /* Equal keys: the order is the parent's. Colour world_rank / 2: {0, 1} and {2, 3}. */
    sub = NULL;
    CHECK_RES(ncclCommSplit(world, world_rank / 2, 7, &sub, NULL), ncclSuccess);
    {
        int members[2] = {world_rank / 2 * 2, world_rank / 2 * 2 + 1};
        check_comm("tied-key split", sub, 2, world_rank % 2, members);
    }
    CHECK_RES(ncclCommDestroy(sub), ncclSuccess);

    /* World rank 1 joins nothing; the others form {0, 2, 3}, with a config. */
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    sub = (ncclComm_t)(uintptr_t)0x1;
    int color = world_rank == 1 ? NCCL_SPLIT_NOCOLOR : 5;
    CHECK_RES(ncclCommSplit(world, color, world_rank, &sub, &config), ncclSuccess);
    if (world_rank == 1) {
        if (sub != NULL) FAIL("NOCOLOR split: *newcomm = %p, want NULL", (void *)sub);
    } else {
        int members[3] = {0, 2, 3};
        check_comm("split without rank 1", sub, 3, world_rank == 0 ? 0 : world_rank - 1,
                   members);
        CHECK_RES(ncclCommDestroy(sub), ncclSuccess);
    }

    /* Nested: A = {0, 1, 2} and {3}; then A's ranks by parity of their rank in A: {0, 2}, {1}
     * and {3}. */
    ncclComm_t a = NULL, b = NULL;
    CHECK_RES(ncclCommSplit(world, world_rank < 3 ? 0 : 1, world_rank, &a, NULL), ncclSuccess);
    if (world_rank < 3) {
        int members[3] = {0, 1, 2};
        check_comm("outer split", a, 3, world_rank, members);
    } else {
        int members[1] = {3};
        check_comm("outer split", a, 1, 0, members);
    }
    int a_rank = -1;
    if (a != NULL) ncclCommUserRank(a, &a_rank);
    CHECK_RES(ncclCommSplit(a, a_rank % 2, 0, &b, NULL), ncclSuccess);
    if (world_rank == 0 || world_rank == 2) {
        int members[2] = {0, 2};
        check_comm("nested split", b, 2, world_rank / 2, members);
    } else {
        int members[1] = {world_rank};
        check_comm("nested split", b, 1, 0, members);
    }
    CHECK_RES(ncclCommDestroy(b), ncclSuccess);
    CHECK_RES(ncclCommDestroy(a), ncclSuccess);

    /* One rank passes a bad colour: every rank must fail, and the parent must keep working. */
    sub = (ncclComm_t)(uintptr_t)0x1;
    CHECK_ERR(ncclCommSplit(world, world_rank == 2 ? -5 : 0, 0, &sub, NULL), ncclInvalidArgument,
              world_rank == 2 ? "color -5" : "rank 2");
    if (sub != NULL) FAIL("failed split: *newcomm = %p, want NULL", (void *)sub);
    {
        int members[NRANKS] = {0, 1, 2, 3};
        check_comm("parent after a failed split", world, NRANKS, world_rank, members);
    }

    /* Local argument errors: nothing is sent, so each rank fails alone. */
    CHECK_ERR(ncclCommSplit(NULL, 0, 0, &sub, NULL), ncclInvalidArgument, "comm");
    CHECK_ERR(ncclCommSplit(world, 0, 0, NULL, NULL), ncclInvalidArgument, "newcomm");
    config.magic = 0;
    CHECK_ERR(ncclCommSplit(world, 0, 0, &sub, &config), ncclInvalidArgument,
              "NCCL_CONFIG_INITIALIZER");
}

/* ---- scalable init ------------------------------------------------------------------------ */

static void test_scalable(ncclComm_t world)
{
    ncclUniqueId ids[2];
    memset(ids, 0, sizeof ids);
    if (world_rank == 0) {
        CHECK_RES(ncclGetUniqueId(&ids[0]), ncclSuccess);
        CHECK_RES(ncclGetUniqueId(&ids[1]), ncclSuccess);
    }
    CHECK_RES(ncclBroadcast(ids, ids, sizeof ids, ncclUint8, 0, world, NULL), ncclSuccess);
    ncclComm_t comm = NULL;
    CHECK_RES(ncclCommInitRankScalable(&comm, NRANKS, world_rank, 2, ids, NULL), ncclSuccess);
    int members[NRANKS] = {0, 1, 2, 3};
    check_comm("scalable init", comm, NRANKS, world_rank, members);
    CHECK_RES(ncclCommDestroy(comm), ncclSuccess);

    CHECK_ERR(ncclCommInitRankScalable(NULL, NRANKS, 0, 1, ids, NULL), ncclInvalidArgument,
              "newcomm");
    CHECK_ERR(ncclCommInitRankScalable(&comm, 0, 0, 1, ids, NULL), ncclInvalidArgument, "nranks 0");
    CHECK_ERR(ncclCommInitRankScalable(&comm, NRANKS, NRANKS, 1, ids, NULL), ncclInvalidArgument,
              "myrank 4");
    CHECK_ERR(ncclCommInitRankScalable(&comm, NRANKS, 0, 0, ids, NULL), ncclInvalidArgument,
              "nId 0");
    CHECK_ERR(ncclCommInitRankScalable(&comm, NRANKS, 0, 1, NULL, NULL), ncclInvalidArgument,
              "commIds");
}

/* ---- init all ----------------------------------------------------------------------------- */

struct init_all_thread {
    ncclComm_t comm;
    int index;
    int32_t recv[COUNT];
    ncclResult_t res;
    int rank, size;
};

static void *init_all_main(void *arg)
{
    struct init_all_thread *t = arg;
    int32_t send[COUNT];
    for (int i = 0; i < COUNT; i++) send[i] = (t->index + 1) * 10 + i;
    t->res = ncclCommUserRank(t->comm, &t->rank);
    if (t->res == ncclSuccess) t->res = ncclCommCount(t->comm, &t->size);
    if (t->res == ncclSuccess)
        t->res = ncclAllReduce(send, t->recv, COUNT, ncclInt32, ncclSum, t->comm, NULL);
    return NULL;
}

static void test_init_all(void)
{
    ncclComm_t comms[NRANKS] = {NULL};
    CHECK_ERR(ncclCommInitAll(NULL, NRANKS, NULL), ncclInvalidArgument, "comm");
    CHECK_ERR(ncclCommInitAll(comms, 0, NULL), ncclInvalidArgument, "ndev 0");
    int devlist[NRANKS] = {0, 1, 2, 3};
    CHECK_RES(ncclCommInitAll(comms, NRANKS, devlist), ncclSuccess);

    /* One thread per communicator: one thread driving all four would need a group. */
    struct init_all_thread threads[NRANKS];
    pthread_t tids[NRANKS];
    for (int t = 0; t < NRANKS; t++) {
        threads[t] = (struct init_all_thread){.comm = comms[t], .index = t};
        if (pthread_create(&tids[t], NULL, init_all_main, &threads[t]) != 0) {
            FAIL("pthread_create for communicator %d failed", t);
            for (int j = 0; j < t; j++) pthread_join(tids[j], NULL);
            return;
        }
    }
    for (int t = 0; t < NRANKS; t++) pthread_join(tids[t], NULL);
    for (int t = 0; t < NRANKS; t++) {
        struct init_all_thread *th = &threads[t];
        if (th->res != ncclSuccess) {
            FAIL("ncclCommInitAll communicator %d: a call returned %d (%s)", t, (int)th->res,
                 ncclGetErrorString(th->res));
            continue;
        }
        CHECK_EQ_MSG(th->rank, t, "ncclCommInitAll rank");
        CHECK_EQ_MSG(th->size, NRANKS, "ncclCommInitAll size");
        for (int i = 0; i < COUNT; i++) {
            /* sum over t of (t + 1) * 10 + i, for t = 0..3 */
            int32_t want = 100 + NRANKS * i;
            if (th->recv[i] != want) {
                FAIL("ncclCommInitAll communicator %d: element %d = %d, want %d", t, i,
                     th->recv[i], want);
                break;
            }
        }
    }
    /* One thread splits all four in a group (NCCL's pattern for ranks one thread drives):
     * the splits meet at the group's end. Parity colours, keys reversing the order; then one
     * group AllReduce over the four children. */
    ncclComm_t subs[NRANKS] = {NULL}, wholes[NRANKS] = {NULL};
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    for (int t = 0; t < NRANKS; t++) {
        CHECK_RES(ncclCommSplit(comms[t], t % 2, NRANKS - t, &subs[t], NULL), ncclSuccess);
        /* A second split of the same parent in the group: it must pair with the others'
         * second one, not their first (the group's threads take them in issue order). */
        CHECK_RES(ncclCommSplit(comms[t], 0, t, &wholes[t], NULL), ncclSuccess);
    }
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    for (int t = 0; t < NRANKS; t++) {
        int rank = -1, size = 0;
        if (wholes[t] == NULL) {
            FAIL("second grouped split: no communicator for rank %d", t);
            continue;
        }
        ncclCommUserRank(wholes[t], &rank);
        ncclCommCount(wholes[t], &size);
        CHECK_EQ_MSG(size, NRANKS, "second grouped split size");
        CHECK_EQ_MSG(rank, t, "second grouped split rank");
        CHECK_RES(ncclCommDestroy(wholes[t]), ncclSuccess);
    }
    int32_t vals[NRANKS], sums[NRANKS];
    bool all_made = true;
    for (int t = 0; t < NRANKS; t++) {
        vals[t] = t + 1;
        int rank = -1, size = 0;
        if (subs[t] == NULL) {
            FAIL("ncclCommSplit in a group: no communicator for rank %d", t);
            all_made = false;
            continue;
        }
        ncclCommUserRank(subs[t], &rank);
        ncclCommCount(subs[t], &size);
        /* Two of each parity; the higher parent rank gets the lower key, so rank 0. */
        CHECK_EQ_MSG(size, 2, "grouped split size");
        CHECK_EQ_MSG(rank, t < 2 ? 1 : 0, "grouped split rank");
    }
    if (all_made) {
        CHECK_RES(ncclGroupStart(), ncclSuccess);
        for (int t = 0; t < NRANKS; t++)
            CHECK_RES(ncclAllReduce(&vals[t], &sums[t], 1, ncclInt32, ncclSum, subs[t], NULL),
                      ncclSuccess);
        CHECK_RES(ncclGroupEnd(), ncclSuccess);
        for (int t = 0; t < NRANKS; t++)
            CHECK_EQ_MSG(sums[t], t % 2 ? 2 + 4 : 1 + 3, "AllReduce over a grouped split");
    }
    for (int t = 0; t < NRANKS; t++)
        if (subs[t] != NULL) CHECK_RES(ncclCommDestroy(subs[t]), ncclSuccess);
    for (int t = 0; t < NRANKS; t++) CHECK_RES(ncclCommDestroy(comms[t]), ncclSuccess);

    ncclComm_t one = NULL;
    CHECK_RES(ncclCommInitAll(&one, 1, NULL), ncclSuccess);
    int members[1] = {world_rank};
    check_comm("ncclCommInitAll of one", one, 1, 0, members);
    CHECK_RES(ncclCommDestroy(one), ncclSuccess);
}

/* ---- user operators ----------------------------------------------------------------------- */

static void test_premulsum(ncclComm_t world)
{
    /* float32: x = (r + 1) + i / 2 and scalar 2, so every partial sum is exact. */
    float fscalar = 2.0f;
    ncclRedOp_t fop = ncclSum, iop = ncclSum;
    CHECK_RES(ncclRedOpCreatePreMulSum(&fop, &fscalar, ncclFloat32, ncclScalarHostImmediate, world),
              ncclSuccess);
    /* The scalar was read at creation: changing it now must not matter. */
    fscalar = 100.0f;
    if ((int)fop < (int)ncclNumOps) FAIL("user operator %d is a built-in value", (int)fop);
    float fsend[COUNT], frecv[COUNT];
    for (int i = 0; i < COUNT; i++) {
        fsend[i] = (float)(world_rank + 1) + 0.5f * (float)i;
        frecv[i] = -1.0f;
    }
    CHECK_RES(ncclAllReduce(fsend, frecv, COUNT, ncclFloat32, fop, world, NULL), ncclSuccess);
    for (int i = 0; i < COUNT; i++) {
        double want = 0;
        for (int r = 0; r < NRANKS; r++) want += 2.0 * ((r + 1) + 0.5 * i);
        if (frecv[i] != (float)want) {
            FAIL("PreMulSum float32 element %d = %.9g, want %.9g", i, (double)frecv[i], want);
            break;
        }
    }

    /* int32 with scalar 2, through Reduce to root 1. */
    int32_t iscalar = 2;
    CHECK_RES(ncclRedOpCreatePreMulSum(&iop, &iscalar, ncclInt32, ncclScalarHostImmediate, world),
              ncclSuccess);
    if (iop == fop) FAIL("two live operators share the value %d", (int)iop);
    int32_t isend[COUNT], irecv[COUNT];
    for (int i = 0; i < COUNT; i++) {
        isend[i] = input_of(world_rank, i);
        irecv[i] = -1;
    }
    CHECK_RES(ncclReduce(isend, irecv, COUNT, ncclInt32, iop, 1, world, NULL), ncclSuccess);
    if (world_rank == 1) {
        for (int i = 0; i < COUNT; i++) {
            int32_t want = 0;
            for (int r = 0; r < NRANKS; r++) want += 2 * input_of(r, i);
            if (irecv[i] != want) {
                FAIL("PreMulSum int32 element %d = %d, want %d", i, irecv[i], want);
                break;
            }
        }
    }

    /* An operator serves only its own datatype; the check needs no peer, so all ranks fail. */
    CHECK_ERR(ncclAllReduce(isend, irecv, COUNT, ncclFloat32, iop, world, NULL),
              ncclInvalidArgument, "int32");
    CHECK_RES(ncclRedOpDestroy(fop, world), ncclSuccess);
    CHECK_ERR(ncclAllReduce(fsend, frecv, COUNT, ncclFloat32, fop, world, NULL),
              ncclInvalidArgument, "ncclRedOpCreatePreMulSum");
    CHECK_ERR(ncclRedOpDestroy(fop, world), ncclInvalidArgument, "already destroyed");
    CHECK_RES(ncclRedOpDestroy(iop, world), ncclSuccess);
    CHECK_ERR(ncclRedOpDestroy(ncclSum, world), ncclInvalidArgument, "built-in");
    CHECK_ERR(ncclRedOpDestroy((ncclRedOp_t)-3, world), ncclInvalidArgument, "op -3");
    CHECK_ERR(ncclRedOpDestroy((ncclRedOp_t)1000, NULL), ncclInvalidArgument, "comm");

    /* A freed value may come back; it must then work like a new operator. */
    double dscalar = 2.0;
    ncclRedOp_t dop = ncclSum;
    CHECK_RES(ncclRedOpCreatePreMulSum(&dop, &dscalar, ncclFloat64, ncclScalarHostImmediate, world),
              ncclSuccess);
    double dsend = world_rank + 1, drecv = -1;
    CHECK_RES(ncclAllReduce(&dsend, &drecv, 1, ncclFloat64, dop, world, NULL), ncclSuccess);
    if (drecv != 20.0) FAIL("PreMulSum float64 = %g, want 20", drecv);
    CHECK_RES(ncclRedOpDestroy(dop, world), ncclSuccess);

    /* ncclScalarDevice: the scalar stays where it is and each collective reads it (here host
     * memory, what a CPU rank's "device" is): changing it changes the next result. */
    double live_scalar = 2.0;
    CHECK_RES(ncclRedOpCreatePreMulSum(&dop, &live_scalar, ncclFloat64, ncclScalarDevice, world),
              ncclSuccess);
    for (int k = 0; k < 2; k++) {
        live_scalar = 2.0 + k;
        drecv = -1;
        CHECK_RES(ncclAllReduce(&dsend, &drecv, 1, ncclFloat64, dop, world, NULL), ncclSuccess);
        if (drecv != 10.0 * live_scalar)
            FAIL("PreMulSum float64 with a device-resident scalar %g = %g, want %g", live_scalar,
                 drecv, 10.0 * live_scalar);
    }
    CHECK_RES(ncclRedOpDestroy(dop, world), ncclSuccess);
    CHECK_ERR(ncclRedOpCreatePreMulSum(NULL, &dscalar, ncclFloat64, ncclScalarHostImmediate, world),
              ncclInvalidArgument, "op");
    CHECK_ERR(ncclRedOpCreatePreMulSum(&dop, NULL, ncclFloat64, ncclScalarHostImmediate, world),
              ncclInvalidArgument, "scalar");
    CHECK_ERR(
        ncclRedOpCreatePreMulSum(&dop, &dscalar, ncclNumTypes, ncclScalarHostImmediate, world),
        ncclInvalidArgument, "datatype 12");
    CHECK_ERR(
        ncclRedOpCreatePreMulSum(&dop, &dscalar, ncclFloat64, (ncclScalarResidence_t)9, world),
        ncclInvalidArgument, "residence 9");
    CHECK_ERR(ncclRedOpCreatePreMulSum(&dop, &dscalar, ncclFloat64, ncclScalarHostImmediate, NULL),
              ncclInvalidArgument, "comm");
}

/* ---- grow -------------------------------------------------------------------------------- */

#define GROWN 5

struct new_rank {
    ncclUniqueId id;
    ncclResult_t grow_res;
    ncclResult_t allreduce_res;
    int32_t recv[COUNT];
};

/* New rank 4: joins with the id rank 3 made and takes part in one AllReduce. */
static void *new_rank_main(void *arg)
{
    struct new_rank *t = arg;
    ncclComm_t grown = NULL;
    t->grow_res = ncclCommGrow(NULL, GROWN, &t->id, GROWN - 1, &grown, NULL);
    if (t->grow_res != ncclSuccess) return NULL;
    int32_t send[COUNT];
    for (int i = 0; i < COUNT; i++) send[i] = input_of(GROWN - 1, i);
    t->allreduce_res = ncclAllReduce(send, t->recv, COUNT, ncclInt32, ncclSum, grown, NULL);
    ncclCommDestroy(grown);
    return NULL;
}

static void test_grow(ncclComm_t world)
{
    ncclComm_t grown = NULL;
    ncclUniqueId id;
    int all[NRANKS] = {0, 1, 2, 3};

    /* Two coordinators: every rank fails alike, and the parent still works. */
    if (world_rank < 2) CHECK_RES(ncclCommGetUniqueId(world, &id), ncclSuccess);
    CHECK_ERR(ncclCommGrow(world, GROWN, world_rank < 2 ? &id : NULL, -1, &grown, NULL),
              ncclInvalidUsage, "2 existing ranks passed a uniqueId");
    /* Sizes that differ: likewise. */
    if (world_rank == 0) CHECK_RES(ncclCommGetUniqueId(world, &id), ncclSuccess);
    CHECK_ERR(ncclCommGrow(world, world_rank == 0 ? GROWN + 1 : GROWN,
                           world_rank == 0 ? &id : NULL, -1, &grown, NULL),
              ncclInvalidUsage, "same size");
    CHECK(grown == NULL, "a failed ncclCommGrow left *newcomm set");
    check_comm("parent after failed grows", world, NRANKS, world_rank, all);

    /* The real grow: rank 3 coordinates, its thread is new rank 4. */
    struct new_rank t;
    memset(&t, 0, sizeof t);
    pthread_t thread;
    if (world_rank == 3) {
        CHECK_RES(ncclCommGetUniqueId(world, &t.id), ncclSuccess);
        if (pthread_create(&thread, NULL, new_rank_main, &t) != 0) FAIL("pthread_create");
    }
    CHECK_RES(ncclCommGrow(world, GROWN, world_rank == 3 ? &t.id : NULL, -1, &grown, NULL),
              ncclSuccess);
    int members[GROWN] = {0, 1, 2, 3, 4};
    check_comm("grown to 5", grown, GROWN, world_rank, members);
    if (world_rank == 3) {
        pthread_join(thread, NULL);
        CHECK_EQ_MSG((int)t.grow_res, (int)ncclSuccess, "new rank's ncclCommGrow");
        CHECK_EQ_MSG((int)t.allreduce_res, (int)ncclSuccess, "new rank's AllReduce");
        for (int i = 0; i < COUNT; i++) {
            int32_t want = 0;
            for (int m = 0; m < GROWN; m++) want += input_of(m, i);
            if (t.recv[i] != want) {
                FAIL("new rank 4: AllReduce element %d = %d, want %d", i, t.recv[i], want);
                break;
            }
        }
    }
    if (grown != NULL) CHECK_RES(ncclCommDestroy(grown), ncclSuccess);
}

/* ---- shrink ------------------------------------------------------------------------------- */

/* World rank 3 leaves: it destroys its world communicator and takes no part in the shrink.
 * Then, of the three left, the one of rank 2 leaves a shrink with NCCL_SHRINK_ABORT. */
static void test_shrink(ncclComm_t world)
{
    int exclude[1] = {3};
    ncclComm_t shrunk = NULL, smaller = NULL;
    /* Local argument errors first, on every rank: nothing is sent. */
    int twice[2] = {(world_rank + 1) % NRANKS, (world_rank + 1) % NRANKS};
    CHECK_ERR(ncclCommShrink(world, twice, 2, &shrunk, NULL, NCCL_SHRINK_DEFAULT),
              ncclInvalidArgument, "listed twice");
    int bad_rank[1] = {NRANKS};
    CHECK_ERR(ncclCommShrink(world, bad_rank, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT),
              ncclInvalidArgument, "excludeRanksList[0] = 4");
    int self[1] = {world_rank};
    CHECK_ERR(ncclCommShrink(world, self, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT),
              ncclInvalidArgument, "excludes itself");
    CHECK_ERR(ncclCommShrink(world, exclude, 1, &shrunk, NULL, 0x10), ncclInvalidArgument,
              "shrinkFlags 0x10");
    CHECK_ERR(ncclCommShrink(world, NULL, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT),
              ncclInvalidArgument, "excludeRanksList");
    CHECK_ERR(ncclCommShrink(world, exclude, -1, &shrunk, NULL, NCCL_SHRINK_DEFAULT),
              ncclInvalidArgument, "negative");
    CHECK_ERR(ncclCommShrink(world, exclude, 1, NULL, NULL, NCCL_SHRINK_DEFAULT),
              ncclInvalidArgument, "newcomm");

    /* Exclude lists that differ (rank 2 also leaves rank 1 out): every rank that new rank 0
     * (world rank 0) counts fails at once, not at the init's deadline, and the parent stays
     * usable for the shrink below. */
    if (world_rank != 3) {
        int differ[2] = {1, 3};
        bool odd = world_rank == 2;
        CHECK_ERR(ncclCommShrink(world, odd ? differ : exclude, odd ? 2 : 1, &shrunk, NULL,
                                 NCCL_SHRINK_DEFAULT),
                  ncclInvalidUsage, "different exclude lists");
    }
    if (world_rank == 3) {
        CHECK_RES(ncclCommDestroy(world), ncclSuccess);
        return;
    }
    CHECK_RES(ncclCommShrink(world, exclude, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT), ncclSuccess);
    int members[3] = {0, 1, 2};
    check_comm("shrink without rank 3", shrunk, 3, world_rank, members);
    CHECK_RES(ncclCommDestroy(world), ncclSuccess);

    if (world_rank == 2) {
        CHECK_RES(ncclCommDestroy(shrunk), ncclSuccess);
        return;
    }
    int exclude2[1] = {2};
    CHECK_RES(ncclCommShrink(shrunk, exclude2, 1, &smaller, NULL, NCCL_SHRINK_ABORT), ncclSuccess);
    int members2[2] = {0, 1};
    check_comm("abort-shrink without rank 2", smaller, 2, world_rank, members2);
    CHECK_RES(ncclCommDestroy(shrunk), ncclSuccess);

    /* Revoked, a communicator takes no operation but can still be shrunk, with either flag
     * (docs/semantics.md, "Carrying on after a failure"); a split still refuses it. */
    CHECK_RES(ncclCommRevoke(smaller, NCCL_REVOKE_DEFAULT), ncclSuccess);
    int32_t one = 1;
    CHECK_ERR(ncclAllReduce(&one, &one, 1, ncclInt32, ncclSum, smaller, NULL), ncclInvalidUsage,
              "revoked");
    ncclComm_t split = NULL;
    CHECK_ERR(ncclCommSplit(smaller, 0, world_rank, &split, NULL), ncclInvalidUsage, "revoked");
    ncclComm_t again = NULL;
    CHECK_RES(ncclCommShrink(smaller, NULL, 0, &again, NULL, NCCL_SHRINK_DEFAULT), ncclSuccess);
    check_comm("shrink of a revoked communicator", again, 2, world_rank, members2);
    CHECK_RES(ncclCommDestroy(again), ncclSuccess);
    CHECK_RES(ncclCommDestroy(smaller), ncclSuccess);
}

/* Polls a nonblocking communicator until it is idle; its state. */
static ncclResult_t settle(ncclComm_t c)
{
    ncclResult_t state = ncclInProgress;
    for (int i = 0; i < 200000 && state == ncclInProgress; i++) {
        ncclCommGetAsyncError(c, &state);
        if (state == ncclInProgress) nanosleep(&(struct timespec){0, 100000}, NULL);
    }
    return state;
}

/* Calls that one rank may not make: its (nonblocking) parent still has an AllReduce in
 * progress, which no other rank issues. That rank refuses (ncclInvalidUsage, "in progress"),
 * and every other rank must fail as fast, naming it, instead of waiting for it in the call's
 * exchange until TUTTI_TIMEOUT_MS (30 s here). In turn: a split refused by rank 1; the same
 * inside a group (the split runs on its own thread, its error at ncclGroupEnd), by rank 2; a
 * shrink (rank 3 excluded) refused by a survivor, rank 1, and by its new rank 0, rank 0; a grow
 * refused by rank 1 (rank 3 coordinates; nobody joins, as every existing rank fails first). */
enum refused_call { REFUSED_SPLIT, REFUSED_GROUPED_SPLIT, REFUSED_SHRINK, REFUSED_GROW };

static void refuse_one(ncclComm_t world, enum refused_call call, int refuser)
{
    static const char *const names[] = {"split", "split", "shrink", "grow"};
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t parent = NULL, sub = (ncclComm_t)(uintptr_t)0x1;
    ncclResult_t res = ncclCommSplit(world, 0, world_rank, &parent, &cfg);
    if (res != ncclSuccess && res != ncclInProgress) {
        FAIL("nonblocking split for the refused %s: %d", names[call], (int)res);
        return;
    }
    CHECK_RES(settle(parent), ncclSuccess);
    ncclUniqueId id;
    if (call == REFUSED_GROW && world_rank == 3)
        CHECK_RES(ncclCommGetUniqueId(parent, &id), ncclSuccess);
    int32_t x = 1;
    if (world_rank == refuser) {
        res = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, parent, NULL);
        CHECK(res == ncclSuccess || res == ncclInProgress, "lone AllReduce: %d", (int)res);
    }
    char want[64];
    snprintf(want, sizeof want, "parent rank %d refused the %s", refuser, names[call]);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const char *expect = world_rank == refuser ? "in progress" : want;
    int dead[1] = {3};
    if (call == REFUSED_SPLIT)
        CHECK_ERR(ncclCommSplit(parent, 0, 0, &sub, NULL), ncclInvalidUsage, expect);
    else if (call == REFUSED_GROUPED_SPLIT) { /* the split's thread refuses at the group's end */
        CHECK_RES(ncclGroupStart(), ncclSuccess);
        CHECK_RES(ncclCommSplit(parent, 0, 0, &sub, NULL), ncclSuccess);
        CHECK_ERR(ncclGroupEnd(), ncclInvalidUsage, expect);
    } else if (call == REFUSED_SHRINK && world_rank != 3)
        CHECK_ERR(ncclCommShrink(parent, dead, 1, &sub, NULL, NCCL_SHRINK_DEFAULT),
                  ncclInvalidUsage, expect);
    else if (call == REFUSED_GROW)
        CHECK_ERR(ncclCommGrow(parent, NRANKS + 1, world_rank == 3 ? &id : NULL, -1, &sub,
                               NULL),
                  ncclInvalidUsage, expect);
    else
        sub = NULL; /* excluded from the shrink */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    CHECK(took < 10.0, "the refused %s took %.1f s (TUTTI_TIMEOUT_MS is 30 s)", names[call],
          took);
    if (sub != NULL) FAIL("refused %s: *newcomm = %p, want NULL", names[call], (void *)sub);
    CHECK_RES(ncclCommAbort(parent), ncclSuccess);
    /* The world is untouched. */
    int32_t one = 1;
    CHECK_RES(ncclAllReduce(&one, &one, 1, ncclInt32, ncclSum, world, NULL), ncclSuccess);
    CHECK_EQ_MSG(one, NRANKS, "AllReduce on the world after the refused call");
}

static void test_refused(ncclComm_t world)
{
    refuse_one(world, REFUSED_SPLIT, 1);
    refuse_one(world, REFUSED_GROUPED_SPLIT, 2);
    refuse_one(world, REFUSED_SHRINK, 1);
    refuse_one(world, REFUSED_SHRINK, 0);
    refuse_one(world, REFUSED_GROW, 1);
}

/* NCCL_SHRINK_ABORT on a nonblocking parent whose AllReduce is still queued, waiting for rank
 * 3, which never issues it: the survivors' shrink aborts that operation and makes the
 * communicator of ranks 0-2 (before, it was refused: "operations in progress"). */
static void test_shrink_abort_in_flight(ncclComm_t world)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t parent = NULL;
    ncclResult_t res = ncclCommSplit(world, 0, world_rank, &parent, &cfg);
    if (res != ncclSuccess && res != ncclInProgress) {
        FAIL("nonblocking split for shrink: %d", (int)res);
        return;
    }
    CHECK_RES(settle(parent), ncclSuccess);
    if (world_rank < 3) {
        int32_t x = 1;
        res = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, parent, NULL);
        CHECK(res == ncclSuccess || res == ncclInProgress, "queued AllReduce: %d", (int)res);
        int dead[1] = {3};
        ncclComm_t child = NULL;
        res = ncclCommShrink(parent, dead, 1, &child, NULL, NCCL_SHRINK_ABORT);
        CHECK(res == ncclSuccess || res == ncclInProgress,
              "ncclCommShrink(NCCL_SHRINK_ABORT) with an operation in flight: %d (%s)",
              (int)res, ncclGetLastError(NULL));
        if (child != NULL) {
            CHECK_RES(settle(child), ncclSuccess);
            int32_t y = world_rank + 1, sum = 0;
            res = ncclAllReduce(&y, &sum, 1, ncclInt32, ncclSum, child, NULL);
            CHECK(res == ncclSuccess || res == ncclInProgress, "child AllReduce: %d",
                  (int)res);
            CHECK_RES(settle(child), ncclSuccess);
            CHECK_EQ_MSG(sum, 1 + 2 + 3, "AllReduce on the shrunk communicator");
            CHECK_RES(ncclCommDestroy(child), ncclSuccess);
        }
    }
    int32_t one = 1;
    CHECK_RES(ncclAllReduce(&one, &one, 1, ncclInt32, ncclSum, world, NULL), ncclSuccess);
    CHECK_RES(ncclCommAbort(parent), ncclSuccess);
}

int main(void)
{
    int exit_code = 0;
    ncclComm_t world = api_world("api_lifecycle", &exit_code);
    if (world == NULL) return exit_code;
    test_split(world);
    test_scalable(world);
    if (world_rank == 0) test_init_all();
    test_premulsum(world);
    test_grow(world);
    test_refused(world);
    test_shrink_abort_in_flight(world);
    test_shrink(world);
    printf("api_lifecycle rank %d: %s (%d failed checks)\n", world_rank,
           check_failures ? "FAILED" : "passed", check_failures);
    return check_failures != 0;
}
