/* thread_comm: several threads of one rank calling the library at once, in the ways
 * docs/semantics.md ("Threads") allows; written to run under ThreadSanitizer (the tsan preset),
 * where a data race in the library is reported even when the results come out right.
 *
 *   two_comms    two threads, each driving a communicator of its own over the same ranks (both
 *                split from the world one): AllReduces and Broadcasts at the same time on both,
 *                then both destroy theirs at once; every descriptor is closed on return.
 *   shared_comm  THREADS threads issue blocking AllReduces on one communicator at the same time.
 *                The ranks must issue one communicator's operations in the same order; here the
 *                threads of a round all issue the same operation with the same data (a barrier
 *                opens each round), so whichever thread takes which ticket, every rank's k-th
 *                operation is the same one.
 *   stream       one thread enqueues a chain of AllReduces on a host stream while another polls
 *                tuttiStreamQuery and waits in tuttiStreamSynchronize on the same stream.
 *   destroy_abort one thread destroys a communicator while another aborts it, 20 times: one of
 *                them frees it, once.
 *   revoke_p2p   a Send blocked in its first contact with a peer that never receives ends when
 *                another thread revokes the communicator.
 *   abort_in_group a thread's group holds an AllReduce on a communicator that another thread
 *                aborts before ncclGroupEnd (and a new one is made, perhaps at its address):
 *                the group is refused; the same for an init deferred to the group's end.
 *   abort        (only when named) ncclCommAbort from one thread while another is blocked in an
 *                AllReduce that rank 0 never issues: the blocked call fails with ncclRemoteError,
 *                Abort returns at once, nothing touches the freed communicator (issue 16: this
 *                crashed before Abort waited for the threads inside calls).
 *
 * Run it as every rank under tutti-run: `thread_comm [NAME...]` runs the named tests, by default
 * all but abort. Results are compared bit for bit (integer-valued floats, exact in any order). */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "tutti.h"

#include "world.h"

#define THREADS 3
#define ROUNDS 20

static int rank, nranks;
static ncclComm_t world;

static void *xcalloc(size_t count, size_t bytes)
{
    void *p = calloc(count == 0 ? 1 : count, bytes);
    if (p == NULL) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        exit(1);
    }
    return p;
}

/* Element i of rank r's input in round `round` of stream `salt`: small integers, so that float
 * sums are exact in any order. */
static float input_of(int r, int round, int salt, size_t i)
{
    return (float)((r + 1) * 3 + round * 5 + salt * 7 + (int)(i % 11));
}

static void fill(float *buf, size_t count, int round, int salt)
{
    for (size_t i = 0; i < count; i++) buf[i] = input_of(rank, round, salt, i);
}

/* Checks buf against the sum of every rank's input; stops at the first wrong element. */
static void check_sum(const char *what, const float *buf, size_t count, int round, int salt)
{
    for (size_t i = 0; i < count; i++) {
        float want = 0;
        for (int r = 0; r < nranks; r++) want += input_of(r, round, salt, i);
        uint32_t got_bits, want_bits;
        memcpy(&got_bits, &buf[i], 4);
        memcpy(&want_bits, &want, 4);
        if (!CHECK_EQ_MSG(got_bits, want_bits,
                          "%s: round %d, float32 element %zu (got %g, want %g)", what, round, i,
                          (double)buf[i], (double)want))
            return;
    }
}

/* The id of a fresh communicator of the world's ranks: under tutti-run every rank's call yields
 * the same one. */
static bool new_id(ncclUniqueId *id)
{
    return CHECK_RES(ncclGetUniqueId(id), ncclSuccess);
}

static void world_barrier(void)
{
    int32_t one = 1, sum = 0;
    CHECK_RES(ncclAllReduce(&one, &sum, 1, ncclInt32, ncclSum, world, NULL), ncclSuccess);
}

/* ---------------------------------------------------------------------------------------------
 * two_comms */

struct own_comm {
    ncclComm_t comm;
    int salt;
};

static pthread_barrier_t destroy_start;

/* Descriptors this process has open. */
static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) return -1;
    while (readdir(d) != NULL) n++;
    closedir(d);
    return n;
}

static void *drive_own_comm(void *arg)
{
    struct own_comm *oc = arg;
    ncclComm_t comm = oc->comm;
    const size_t count = 4099;
    float *buf = xcalloc(count, sizeof *buf);
    for (int round = 0; round < ROUNDS; round++) {
        size_t n = round % 2 ? count : 17;
        fill(buf, n, round, oc->salt);
        CHECK_RES(ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
        check_sum(oc->salt ? "two_comms: comm 1" : "two_comms: comm 0", buf, n, round, oc->salt);
        /* Broadcast from a root that moves with the round. */
        int root = round % nranks;
        fill(buf, n, round, oc->salt);
        CHECK_RES(ncclBroadcast(buf, buf, n, ncclFloat32, root, comm, NULL), ncclSuccess);
        for (size_t i = 0; i < n; i++)
            if (!CHECK_EQ_MSG(buf[i], input_of(root, round, oc->salt, i),
                              "two_comms: comm %d: Broadcast from %d, round %d, element %zu",
                              oc->salt, root, round, i))
                break;
    }
    free(buf);
    /* Both threads destroy their communicators at the same moment. */
    pthread_barrier_wait(&destroy_start);
    CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
    return NULL;
}

/* The communicators are made one after the other: under tutti-run every ncclGetUniqueId gives
 * the same id (NCCL_COMM_ID), as in NCCL, so two could not rendezvous at once. */
static void test_two_comms(void)
{
    struct own_comm oc[2] = {{.salt = 0}, {.salt = 1}};
    /* A split first, made and destroyed here, so that what the world communicator keeps from
     * a split (its bootstrap's connections) is counted in fds_before. */
    ncclComm_t warm = NULL;
    if (!CHECK_RES(ncclCommSplit(world, 0, rank, &warm, NULL), ncclSuccess)) return;
    CHECK_RES(ncclCommDestroy(warm), ncclSuccess);
    int fds_before = open_fds();
    for (int t = 0; t < 2; t++)
        if (!CHECK_RES(ncclCommSplit(world, 0, rank, &oc[t].comm, NULL), ncclSuccess)) return;
    pthread_barrier_init(&destroy_start, NULL, 2);
    pthread_t tid[2];
    for (int t = 0; t < 2; t++)
        if (pthread_create(&tid[t], NULL, drive_own_comm, &oc[t]) != 0) {
            FAIL("pthread_create failed");
            exit(1); /* the peers would wait for this thread's communicator forever */
        }
    for (int t = 0; t < 2; t++) pthread_join(tid[t], NULL);
    pthread_barrier_destroy(&destroy_start);
    /* Each destroy freed its communicator before returning: neither waited for the other
     * thread's call to end and left its communicator for later (once both did, after 0.8 s). */
    CHECK_EQ_MSG(open_fds(), fds_before, "descriptors open after two threads destroyed their "
                 "communicators at once, against before they were made");
}

/* ---------------------------------------------------------------------------------------------
 * shared_comm */

static pthread_barrier_t round_start;

struct shared_thread {
    ncclComm_t comm;
    int index;
};

/* Round r: every thread of this rank waits at the barrier, then issues the round's AllReduce
 * (the same count and data in every thread) on the shared communicator. The barrier also keeps
 * the rounds apart: round r + 1 starts once every thread has finished round r here, so every
 * rank's tickets [r * THREADS, (r + 1) * THREADS) belong to round r. */
static void *issue_on_shared(void *arg)
{
    struct shared_thread *st = arg;
    const size_t max_count = 3000;
    float *buf = xcalloc(max_count, sizeof *buf);
    for (int round = 0; round < ROUNDS; round++) {
        size_t n = 1 + (size_t)round * 149 % max_count;
        pthread_barrier_wait(&round_start);
        fill(buf, n, round, 2);
        CHECK_RES(ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, st->comm, NULL), ncclSuccess);
        check_sum("shared_comm", buf, n, round, 2);
    }
    free(buf);
    return NULL;
}

static void test_shared_comm(void)
{
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    if (!new_id(&id) || !CHECK_RES(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess))
        return;
    pthread_barrier_init(&round_start, NULL, THREADS);
    struct shared_thread st[THREADS];
    pthread_t tid[THREADS];
    for (int t = 0; t < THREADS; t++) {
        st[t] = (struct shared_thread){.comm = comm, .index = t};
        if (pthread_create(&tid[t], NULL, issue_on_shared, &st[t]) != 0) {
            FAIL("pthread_create failed");
            exit(1);
        }
    }
    for (int t = 0; t < THREADS; t++) pthread_join(tid[t], NULL);
    pthread_barrier_destroy(&round_start);
    CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
}

/* ---------------------------------------------------------------------------------------------
 * stream */

struct stream_state {
    cudaStream_t stream;
    ncclComm_t comm;
    float *bufs[ROUNDS];
    size_t count;
    atomic_bool enqueued; /* the enqueuing thread has issued everything */
};

static void *enqueue_chain(void *arg)
{
    struct stream_state *ss = arg;
    for (int round = 0; round < ROUNDS; round++) {
        fill(ss->bufs[round], ss->count, round, 3);
        CHECK_RES(ncclAllReduce(ss->bufs[round], ss->bufs[round], ss->count, ncclFloat32,
                                ncclSum, ss->comm, ss->stream),
                  ncclSuccess);
        if (round % 4 == 3) usleep(1000); /* let the other thread catch the stream busy */
    }
    atomic_store(&ss->enqueued, true);
    return NULL;
}

/* Polls and waits on the stream while the other thread is still enqueuing on it. */
static void *watch_stream(void *arg)
{
    struct stream_state *ss = arg;
    long queries = 0, syncs = 0;
    while (!atomic_load(&ss->enqueued)) {
        ncclResult_t q = tuttiStreamQuery(ss->stream);
        CHECK(q == ncclSuccess || q == ncclInProgress, "stream: tuttiStreamQuery gave %d (%s)",
              (int)q, ncclGetErrorString(q));
        if (++queries % 16 == 0) {
            CHECK_RES(tuttiStreamSynchronize(ss->stream), ncclSuccess);
            syncs++;
        }
    }
    CHECK_RES(tuttiStreamSynchronize(ss->stream), ncclSuccess);
    if (rank == 0) printf("stream: %ld queries, %ld waits while enqueuing\n", queries, syncs + 1);
    return NULL;
}

static void test_stream(void)
{
    ncclUniqueId id;
    struct stream_state ss = {.count = 2053};
    if (!new_id(&id) || !CHECK_RES(ncclCommInitRank(&ss.comm, nranks, id, rank), ncclSuccess))
        return;
    if (!CHECK_RES(tuttiStreamCreate(&ss.stream), ncclSuccess)) return;
    for (int r = 0; r < ROUNDS; r++) ss.bufs[r] = xcalloc(ss.count, sizeof(float));
    atomic_init(&ss.enqueued, false);
    pthread_t enq, watch;
    if (pthread_create(&enq, NULL, enqueue_chain, &ss) != 0 ||
        pthread_create(&watch, NULL, watch_stream, &ss) != 0) {
        FAIL("pthread_create failed");
        exit(1);
    }
    pthread_join(enq, NULL);
    pthread_join(watch, NULL);
    for (int r = 0; r < ROUNDS; r++) {
        check_sum("stream", ss.bufs[r], ss.count, r, 3);
        free(ss.bufs[r]);
    }
    CHECK_RES(tuttiStreamDestroy(ss.stream), ncclSuccess);
    CHECK_RES(ncclCommDestroy(ss.comm), ncclSuccess);
}

/* ---------------------------------------------------------------------------------------------
 * destroy_abort */

struct ending {
    ncclComm_t comm;
    pthread_barrier_t *start;
    bool abort;
    ncclResult_t res;
};

static void *end_comm(void *arg)
{
    struct ending *e = arg;
    pthread_barrier_wait(e->start);
    e->res = e->abort ? ncclCommAbort(e->comm) : ncclCommDestroy(e->comm);
    return NULL;
}

/* One thread destroys a communicator while another aborts it (a watchdog's abort meeting the
 * program's own teardown), ROUNDS times: exactly one of them frees it, the other returns
 * ncclSuccess, or ncclInvalidArgument when it came after the communicator was gone (both
 * freed it once, which crashes or, under a sanitizer, reports the double free). */
static void test_destroy_abort(void)
{
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    for (int round = 0; round < ROUNDS; round++) {
        ncclComm_t comm = NULL;
        if (!CHECK_RES(ncclCommSplit(world, 0, rank, &comm, NULL), ncclSuccess)) break;
        struct ending e[2] = {{comm, &start, false, ncclSuccess},
                              {comm, &start, true, ncclSuccess}};
        pthread_t tid[2];
        for (int t = 0; t < 2; t++)
            if (pthread_create(&tid[t], NULL, end_comm, &e[t]) != 0) {
                FAIL("pthread_create failed");
                exit(1);
            }
        for (int t = 0; t < 2; t++) pthread_join(tid[t], NULL);
        for (int t = 0; t < 2; t++)
            CHECK(e[t].res == ncclSuccess || e[t].res == ncclInvalidArgument,
                  "destroy_abort round %d: %s returned %d", round,
                  e[t].abort ? "ncclCommAbort" : "ncclCommDestroy", (int)e[t].res);
        world_barrier();
    }
    pthread_barrier_destroy(&start);
}

/* ---------------------------------------------------------------------------------------------
 * revoke_p2p */

static atomic_int sending; /* set by rank 0's main thread just before its Send */

/* Revokes 300 ms after the Send began (a loaded machine may start either thread late). */
static void *revoke_later(void *arg)
{
    while (!atomic_load(&sending)) usleep(1000);
    usleep(300 * 1000);
    CHECK_RES(ncclCommRevoke((ncclComm_t)arg, NCCL_REVOKE_DEFAULT), ncclSuccess);
    return NULL;
}

/* Rank 0 sends to rank 1, which never receives: the Send blocks in its first contact with the
 * peer (the connection setup), and another thread revokes the communicator. The Send must end
 * then (ncclRemoteError), not at TUTTI_TIMEOUT_MS: a PyTorch group's timeout relies on it. */
static void test_revoke_p2p(void)
{
    if (nranks < 2) return;
    ncclComm_t comm = NULL;
    if (!CHECK_RES(ncclCommSplit(world, 0, rank, &comm, NULL), ncclSuccess)) return;
    if (rank == 0) {
        pthread_t tid;
        if (pthread_create(&tid, NULL, revoke_later, comm) != 0) {
            FAIL("pthread_create failed");
            exit(1);
        }
        int32_t x[4] = {1, 2, 3, 4};
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        atomic_store(&sending, 1);
        ncclResult_t res = ncclSend(x, 4, ncclInt32, 1, comm, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        pthread_join(tid, NULL);
        double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        CHECK(res == ncclRemoteError, "revoke_p2p: the Send returned %d", (int)res);
        CHECK(s < 20.0, "revoke_p2p: the Send returned after %.1f s, not after the revoke", s);
    }
    world_barrier();
    CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
}

/* ---------------------------------------------------------------------------------------------
 * abort_in_group */

static void *abort_now(void *arg)
{
    CHECK_RES(ncclCommAbort((ncclComm_t)arg), ncclSuccess);
    return NULL;
}

/* A thread adds an AllReduce to a group, another thread aborts the communicator, then the
 * first ends the group: ncclGroupEnd must refuse the group (ncclInvalidUsage), not run an
 * operation on the freed communicator. Every rank does it, so nobody waits for anybody. */
static void test_abort_in_group(void)
{
    ncclComm_t comm = NULL;
    if (!CHECK_RES(ncclCommSplit(world, 0, rank, &comm, NULL), ncclSuccess)) return;
    int32_t x[4] = {1, 2, 3, 4};
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclAllReduce(x, x, 4, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
    pthread_t tid;
    if (pthread_create(&tid, NULL, abort_now, comm) != 0) {
        FAIL("pthread_create failed");
        exit(1);
    }
    pthread_join(tid, NULL);
    /* A new communicator, likely at the freed one's address: the group's operation is still
     * the old one's (before, a reused address passed for it and ran it on freed memory). */
    ncclComm_t again = NULL;
    CHECK_RES(ncclCommSplit(world, 0, rank, &again, NULL), ncclSuccess);
    CHECK_RES(ncclGroupEnd(), ncclInvalidUsage);
    CHECK(x[0] == 1 && x[3] == 4, "abort_in_group: the buffer changed: %d %d", x[0], x[3]);
    if (again != NULL) CHECK_RES(ncclCommDestroy(again), ncclSuccess);
    /* An init deferred to a group's end, its communicator aborted by another thread first: the
     * end refuses it without touching the freed communicator. */
    ncclUniqueId id;
    if (rank == 0) CHECK_RES(ncclGetUniqueId(&id), ncclSuccess);
    CHECK_RES(ncclBroadcast(&id, &id, sizeof id, ncclChar, 0, world, NULL), ncclSuccess);
    ncclComm_t late = NULL;
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclCommInitRank(&late, nranks, id, rank), ncclSuccess);
    if (pthread_create(&tid, NULL, abort_now, late) != 0) {
        FAIL("pthread_create failed");
        exit(1);
    }
    pthread_join(tid, NULL);
    CHECK_RES(ncclGroupEnd(), ncclInvalidUsage);
    world_barrier();
}

/* ---------------------------------------------------------------------------------------------
 * abort */

struct blocked_call {
    ncclComm_t comm;
    ncclResult_t res;
    atomic_int calling; /* set just before the AllReduce */
};

static void *call_blocked(void *arg)
{
    struct blocked_call *bc = arg;
    int64_t x[1000] = {0};
    atomic_store(&bc->calling, 1);
    bc->res = ncclAllReduce(x, x, 1000, ncclInt64, ncclSum, bc->comm, NULL);
    return NULL;
}

/* Ranks other than 0 block in an AllReduce that rank 0 never issues; the main thread aborts the
 * communicator under it. docs/semantics.md ("Threads"): the blocked call fails with
 * ncclRemoteError within one sleep, and Abort frees the communicator only once no thread is
 * inside a call. */
static void test_abort(void)
{
    if (nranks < 2) return;
    ncclUniqueId id;
    struct blocked_call bc = {.res = ncclSuccess};
    if (!new_id(&id) || !CHECK_RES(ncclCommInitRank(&bc.comm, nranks, id, rank), ncclSuccess))
        return;
    if (rank == 0) {
        CHECK_RES(ncclCommAbort(bc.comm), ncclSuccess);
        return;
    }
    pthread_t tid;
    if (pthread_create(&tid, NULL, call_blocked, &bc) != 0) {
        FAIL("pthread_create failed");
        return;
    }
    /* 300 ms from the call, however late the thread started. */
    while (!atomic_load(&bc.calling)) usleep(1000);
    usleep(300 * 1000);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_RES(ncclCommAbort(bc.comm), ncclSuccess);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(tid, NULL);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    CHECK(took < 10.0, "abort: ncclCommAbort took %.1f s", took);
    CHECK(bc.res == ncclRemoteError, "abort: the blocked AllReduce returned %d (%s), want %d (%s)",
          (int)bc.res, ncclGetErrorString(bc.res), (int)ncclRemoteError,
          ncclGetErrorString(ncclRemoteError));
    printf("rank %d: abort: ncclCommAbort took %.3f s; the blocked AllReduce returned %d (%s)\n",
           rank, took, (int)bc.res, ncclGetErrorString(bc.res));
}

/* ---------------------------------------------------------------------------------------------
 * main */

int main(int argc, char **argv)
{
    world = world_open("thread_comm", &rank, &nranks);
    if (world == NULL) return 1;
    static const struct world_test tests[] = {
        {"two_comms", test_two_comms, false},
        {"shared_comm", test_shared_comm, false},
        {"stream", test_stream, false},
        {"destroy_abort", test_destroy_abort, false},
        {"revoke_p2p", test_revoke_p2p, false},
        {"abort_in_group", test_abort_in_group, false},
        {"abort", test_abort, true},
    };
    int failed = world_run_tests(tests, sizeof tests / sizeof tests[0], argc, argv, 1,
                                 world_barrier);
    ncclCommDestroy(world);
    return failed == 0 ? 0 : failed < 0 ? 2 : 1;
}
