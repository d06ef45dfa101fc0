/* Per-operation events (tuttiEvent*, include/tutti.h) through the public API, run as every rank
 * under tutti-run:
 *
 *   stream       one event recorded after each of several AllReduces queued on a host stream:
 *                each completes with ncclSuccess once its own AllReduce's result is in place,
 *                and an event completes no earlier than the events recorded before it.
 *   nonblocking  on a nonblocking communicator (config.blocking = 0), an event recorded with
 *                stream NULL follows the operation queued on the communicator's own queue.
 *   blocking     on a blocking communicator with stream NULL the operation is complete on
 *                return, so the event completes at once; an event never recorded is complete.
 *   group        an event recorded after a group's ncclGroupEnd on a stream follows the whole
 *                group (a ring of sends and receives); recording inside a group is refused.
 *   wait         tuttiEventWait sleeps instead of driving: the last of several events on a
 *                stream completes, and the ones before it with it; with a timeout it returns
 *                ncclInProgress while the operation cannot complete (the peers are held back
 *                until rank 0's wait has timed out, by a broadcast only rank 0 can start), then
 *                ncclSuccess once they join; an event never recorded is complete at once.
 *   args         NULL handles and a NULL event pointer are ncclInvalidArgument.
 *   errors       (only when named; run with a short TUTTI_TIMEOUT_MS) rank 0 issues an
 *                AllReduce the others never issue: its event completes with the operation's
 *                error (the deadline's ncclRemoteError), while an event recorded before it on
 *                the same stream keeps ncclSuccess.
 *   late         an event recorded after its operation already failed (a count mismatch)
 *                reports that operation's error, not success.
 *   group_reason a group whose first operation fails and whose second fails after it: the
 *                stream and an event report the first one's reason.
 *   cancel_reason an operation cancelled by Abort behind another communicator's stuck one:
 *                the abort leaves no last error; the event reports the cancellation's reason.
 *   revoke_cancels the same with ncclCommRevoke first: it cancels the queued operation and
 *                returns (before, it waited for the stuck one's deadline).
 *   rerecord     a thread waiting without a limit on an event another thread records anew on
 *                an empty stream returns at once.
 *
 * `events [NAME...]` runs the named tests, by default all but errors. The exit code is 1 when
 * any check failed. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl.h"
#include "tutti.h"

#include "world.h"

static int rank, nranks;
static ncclComm_t comm;

/* Every element of `buf` must be `want`. */
static void check_all(const char *what, const int64_t *buf, size_t count, int64_t want)
{
    for (size_t i = 0; i < count; i++) {
        if (buf[i] != want) {
            FAIL("%s: element %zu is %lld, want %lld", what, i, (long long)buf[i],
                 (long long)want);
            return;
        }
    }
}

/* The sum over ranks of (r + 1) * k: what AllReduce k of the stream test must give. */
static int64_t ranks_sum(int64_t k)
{
    return k * (int64_t)nranks * (nranks + 1) / 2;
}

#define NOPS 6
#define COUNT (64 * 1024)

/* Queues NOPS in-place AllReduces of new buffers on stream s, each followed by a new event. */
static void queue_allreduces(cudaStream_t s, int64_t *bufs[NOPS], tuttiEvent_t events[NOPS])
{
    for (int k = 0; k < NOPS; k++) {
        bufs[k] = malloc(COUNT * sizeof(int64_t));
        for (size_t i = 0; i < COUNT; i++) bufs[k][i] = (int64_t)(rank + 1) * (k + 1);
        CHECK_RES(tuttiEventCreate(&events[k]), ncclSuccess);
        CHECK_RES(ncclAllReduce(bufs[k], bufs[k], COUNT, ncclInt64, ncclSum, comm, s), ncclSuccess);
        CHECK_RES(tuttiEventRecord(events[k], comm, s), ncclSuccess);
    }
}

static void test_stream(void)
{
    cudaStream_t s = NULL;
    if (!CHECK_RES(tuttiStreamCreate(&s), ncclSuccess)) return;
    int64_t *bufs[NOPS];
    tuttiEvent_t events[NOPS];
    queue_allreduces(s, bufs, events);
    /* Wait for the last first: every earlier event must then be complete too (in order). */
    CHECK_RES(tuttiEventSynchronize(events[NOPS - 1]), ncclSuccess);
    for (int k = 0; k < NOPS; k++) {
        CHECK_RES(tuttiEventQuery(events[k]), ncclSuccess);
        check_all("stream AllReduce", bufs[k], COUNT, ranks_sum(k + 1));
    }
    /* Again, now waiting for each in turn and checking its own result right after. */
    for (int k = 0; k < NOPS; k++) {
        for (size_t i = 0; i < COUNT; i++) bufs[k][i] = (int64_t)(rank + 1) * (k + 1);
        CHECK_RES(ncclAllReduce(bufs[k], bufs[k], COUNT, ncclInt64, ncclSum, comm, s), ncclSuccess);
        CHECK_RES(tuttiEventRecord(events[k], comm, s), ncclSuccess);
    }
    for (int k = 0; k < NOPS; k++) {
        CHECK_RES(tuttiEventSynchronize(events[k]), ncclSuccess);
        check_all("stream AllReduce, waited in turn", bufs[k], COUNT, ranks_sum(k + 1));
    }
    for (int k = 0; k < NOPS; k++) {
        CHECK_RES(tuttiEventDestroy(events[k]), ncclSuccess);
        free(bufs[k]);
    }
    CHECK_RES(tuttiStreamDestroy(s), ncclSuccess);
}

static void test_nonblocking(void)
{
    ncclUniqueId id;
    ncclComm_t nb = NULL;
    if (rank == 0) CHECK_RES(ncclGetUniqueId(&id), ncclSuccess);
    CHECK_RES(ncclBroadcast(&id, &id, sizeof id, ncclChar, 0, comm, NULL), ncclSuccess);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t res = ncclCommInitRankConfig(&nb, nranks, id, rank, &config);
    if (res != ncclSuccess && res != ncclInProgress) {
        CHECK_RES(res, ncclInProgress);
        return;
    }
    ncclResult_t state;
    do {
        CHECK_RES(ncclCommGetAsyncError(nb, &state), ncclSuccess);
    } while (state == ncclInProgress);
    if (!CHECK_RES(state, ncclSuccess)) return;
    int64_t *buf = malloc(COUNT * sizeof(int64_t));
    for (size_t i = 0; i < COUNT; i++) buf[i] = rank + 1;
    tuttiEvent_t ev = NULL;
    CHECK_RES(tuttiEventCreate(&ev), ncclSuccess);
    res = ncclAllReduce(buf, buf, COUNT, ncclInt64, ncclSum, nb, NULL);
    if (res != ncclSuccess && res != ncclInProgress) CHECK_RES(res, ncclInProgress);
    CHECK_RES(tuttiEventRecord(ev, nb, NULL), ncclSuccess);
    CHECK_RES(tuttiEventSynchronize(ev), ncclSuccess);
    check_all("nonblocking AllReduce", buf, COUNT, ranks_sum(1));
    CHECK_RES(tuttiEventDestroy(ev), ncclSuccess);
    free(buf);
    CHECK_RES(ncclCommDestroy(nb), ncclSuccess);
}

static void test_blocking(void)
{
    tuttiEvent_t ev = NULL;
    if (!CHECK_RES(tuttiEventCreate(&ev), ncclSuccess)) return;
    CHECK_RES(tuttiEventQuery(ev), ncclSuccess); /* never recorded */
    int64_t x = rank + 1;
    CHECK_RES(ncclAllReduce(&x, &x, 1, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    CHECK_RES(tuttiEventRecord(ev, comm, NULL), ncclSuccess);
    CHECK_RES(tuttiEventQuery(ev), ncclSuccess);
    check_all("blocking AllReduce", &x, 1, ranks_sum(1));
    CHECK_RES(tuttiEventDestroy(ev), ncclSuccess);
}

static void test_group(void)
{
    cudaStream_t s = NULL;
    if (!CHECK_RES(tuttiStreamCreate(&s), ncclSuccess)) return;
    tuttiEvent_t ev = NULL;
    CHECK_RES(tuttiEventCreate(&ev), ncclSuccess);
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    int64_t *out = malloc(COUNT * sizeof(int64_t)), *in = malloc(COUNT * sizeof(int64_t));
    for (size_t i = 0; i < COUNT; i++) {
        out[i] = rank * 1000 + 7;
        in[i] = -1;
    }
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclSend(out, COUNT, ncclInt64, next, comm, s), ncclSuccess);
    CHECK_RES(ncclRecv(in, COUNT, ncclInt64, prev, comm, s), ncclSuccess);
    CHECK_RES(tuttiEventRecord(ev, comm, s), ncclInvalidUsage);
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    CHECK_RES(tuttiEventRecord(ev, comm, s), ncclSuccess);
    CHECK_RES(tuttiEventSynchronize(ev), ncclSuccess);
    check_all("group receive", in, COUNT, prev * 1000 + 7);
    CHECK_RES(tuttiEventDestroy(ev), ncclSuccess);
    CHECK_RES(tuttiStreamDestroy(s), ncclSuccess);
    free(out);
    free(in);
}

static void test_wait(void)
{
    cudaStream_t s = NULL;
    if (!CHECK_RES(tuttiStreamCreate(&s), ncclSuccess)) return;
    int64_t *bufs[NOPS];
    tuttiEvent_t events[NOPS];
    queue_allreduces(s, bufs, events);
    CHECK_RES(tuttiEventWait(events[NOPS - 1], -1), ncclSuccess);
    for (int k = 0; k < NOPS; k++) {
        CHECK_RES(tuttiEventQuery(events[k]), ncclSuccess);
        check_all("AllReduce waited for by tuttiEventWait", bufs[k], COUNT, ranks_sum(k + 1));
    }
    /* The timeout: rank 0's AllReduce on a second communicator cannot complete before the
     * others issue theirs, which they do only after rank 0's broadcast on the first. */
    if (nranks >= 2) {
        ncclUniqueId id;
        ncclComm_t side = NULL;
        if (rank == 0) CHECK_RES(ncclGetUniqueId(&id), ncclSuccess);
        CHECK_RES(ncclBroadcast(&id, &id, sizeof id, ncclChar, 0, comm, NULL), ncclSuccess);
        if (CHECK_RES(ncclCommInitRank(&side, nranks, id, rank), ncclSuccess)) {
            int go = 0;
            for (size_t i = 0; i < COUNT; i++) bufs[0][i] = rank + 1;
            if (rank == 0) {
                CHECK_RES(ncclAllReduce(bufs[0], bufs[0], COUNT, ncclInt64, ncclSum, side, s),
                          ncclSuccess);
                CHECK_RES(tuttiEventRecord(events[0], side, s), ncclSuccess);
                CHECK_RES(tuttiEventWait(events[0], 0), ncclInProgress);
                CHECK_RES(tuttiEventWait(events[0], 2000), ncclInProgress);
                go = 1;
            }
            CHECK_RES(ncclBroadcast(&go, &go, 1, ncclInt32, 0, comm, NULL), ncclSuccess);
            if (rank != 0) {
                CHECK_RES(ncclAllReduce(bufs[0], bufs[0], COUNT, ncclInt64, ncclSum, side, s),
                          ncclSuccess);
                CHECK_RES(tuttiEventRecord(events[0], side, s), ncclSuccess);
            }
            CHECK_RES(tuttiEventWait(events[0], -1), ncclSuccess);
            check_all("AllReduce after a timed-out tuttiEventWait", bufs[0], COUNT, ranks_sum(1));
            CHECK_RES(ncclCommDestroy(side), ncclSuccess);
        }
    }
    tuttiEvent_t idle = NULL;
    if (CHECK_RES(tuttiEventCreate(&idle), ncclSuccess)) {
        CHECK_RES(tuttiEventWait(idle, -1), ncclSuccess);
        CHECK_RES(tuttiEventDestroy(idle), ncclSuccess);
    }
    for (int k = 0; k < NOPS; k++) {
        CHECK_RES(tuttiEventDestroy(events[k]), ncclSuccess);
        free(bufs[k]);
    }
    CHECK_RES(tuttiStreamDestroy(s), ncclSuccess);
}

static void test_args(void)
{
    CHECK_RES(tuttiEventCreate(NULL), ncclInvalidArgument);
    CHECK_RES(tuttiEventDestroy(NULL), ncclInvalidArgument);
    CHECK_RES(tuttiEventQuery(NULL), ncclInvalidArgument);
    CHECK_RES(tuttiEventSynchronize(NULL), ncclInvalidArgument);
    CHECK_RES(tuttiEventWait(NULL, 0), ncclInvalidArgument);
    tuttiEvent_t ev = NULL;
    if (!CHECK_RES(tuttiEventCreate(&ev), ncclSuccess)) return;
    CHECK_RES(tuttiEventRecord(ev, NULL, NULL), ncclInvalidArgument);
    CHECK_RES(tuttiEventRecord(NULL, comm, NULL), ncclInvalidArgument);
    int not_a_stream = 0;
    CHECK_RES(tuttiEventRecord(ev, comm, (cudaStream_t)(void *)&not_a_stream), ncclInvalidUsage);
    CHECK_RES(tuttiEventDestroy(ev), ncclSuccess);
}

/* ncclGetLastError after `what` reported an asynchronous failure names it: holds `cause`, a
 * piece of the message logged where the operation failed. A message left by an earlier call
 * is planted first, so a report that sets none fails here. */
static void check_reason(const char *what, const char *cause)
{
    const char *last = ncclGetLastError(NULL);
    if (last == NULL || strstr(last, cause) == NULL)
        FAIL("%s: ncclGetLastError says '%s', without the failure's reason ('%s')", what,
             last ? last : "(null)", cause);
    /* An earlier, unrelated error: the next report must replace it. */
    ncclCommUserRank(NULL, NULL);
}

static void test_errors(void)
{
    if (nranks < 2) return;
    ncclUniqueId id;
    ncclComm_t doomed = NULL;
    if (rank == 0) CHECK_RES(ncclGetUniqueId(&id), ncclSuccess);
    CHECK_RES(ncclBroadcast(&id, &id, sizeof id, ncclChar, 0, comm, NULL), ncclSuccess);
    if (!CHECK_RES(ncclCommInitRank(&doomed, nranks, id, rank), ncclSuccess)) return;
    cudaStream_t s = NULL;
    if (!CHECK_RES(tuttiStreamCreate(&s), ncclSuccess)) return;
    tuttiEvent_t before = NULL, after = NULL;
    CHECK_RES(tuttiEventCreate(&before), ncclSuccess);
    CHECK_RES(tuttiEventCreate(&after), ncclSuccess);
    int64_t x[64];
    for (int i = 0; i < 64; i++) x[i] = rank + 1;
    /* Every rank: one AllReduce that completes; then rank 0 alone issues one more. */
    CHECK_RES(ncclAllReduce(x, x, 64, ncclInt64, ncclSum, doomed, s), ncclSuccess);
    CHECK_RES(tuttiEventRecord(before, doomed, s), ncclSuccess);
    if (rank == 0) {
        CHECK_RES(ncclAllReduce(x, x, 64, ncclInt64, ncclSum, doomed, s), ncclSuccess);
        CHECK_RES(tuttiEventRecord(after, doomed, s), ncclSuccess);
        ncclCommUserRank(NULL, NULL); /* an earlier error, which the report must replace */
        ncclResult_t res = tuttiEventSynchronize(after);
        if (res != ncclRemoteError)
            FAIL("event after an AllReduce no peer issued: got %d (%s), want ncclRemoteError",
                 (int)res, ncclGetErrorString(res));
        check_reason("tuttiEventSynchronize", "AllReduce #");
        CHECK_RES(tuttiEventQuery(before), ncclSuccess);
        CHECK_RES(tuttiStreamSynchronize(s), ncclRemoteError);
        check_reason("tuttiStreamSynchronize", "AllReduce #");
    } else {
        CHECK_RES(tuttiEventSynchronize(before), ncclSuccess);
        check_all("AllReduce before the failure", x, 64, ranks_sum(1));
    }
    tuttiStreamSynchronize(s); /* forget the stream's latched error */
    CHECK_RES(tuttiEventDestroy(before), ncclSuccess);
    CHECK_RES(tuttiEventDestroy(after), ncclSuccess);
    CHECK_RES(tuttiStreamDestroy(s), ncclSuccess);
    CHECK_RES(ncclCommAbort(doomed), ncclSuccess);
}

/* An event recorded after its operation already failed (a count mismatch, which every rank
 * detects at once) reports that error, not success: the stream has nothing queued by then. */
static void test_late(void)
{
    if (nranks < 2) return;
    ncclUniqueId id;
    ncclComm_t doomed = NULL;
    if (rank == 0) CHECK_RES(ncclGetUniqueId(&id), ncclSuccess);
    CHECK_RES(ncclBroadcast(&id, &id, sizeof id, ncclChar, 0, comm, NULL), ncclSuccess);
    if (!CHECK_RES(ncclCommInitRank(&doomed, nranks, id, rank), ncclSuccess)) return;
    cudaStream_t s = NULL;
    if (!CHECK_RES(tuttiStreamCreate(&s), ncclSuccess)) return;
    tuttiEvent_t late = NULL;
    CHECK_RES(tuttiEventCreate(&late), ncclSuccess);
    int64_t x[8] = {0};
    CHECK_RES(ncclAllReduce(x, x, 4 + (size_t)rank, ncclInt64, ncclSum, doomed, s), ncclSuccess);
    /* Wait until the failure is latched and the stream has drained, without taking the
     * stream's error (tuttiStreamQuery would). */
    ncclResult_t async = ncclSuccess;
    ncclCommUserRank(NULL, NULL); /* an earlier error, which the report must replace */
    for (int i = 0; i < 200000 && (async == ncclSuccess || async == ncclInProgress); i++) {
        ncclCommGetAsyncError(doomed, &async);
        if (async == ncclSuccess || async == ncclInProgress)
            nanosleep(&(struct timespec){0, 50000}, NULL);
    }
    CHECK_RES(async, ncclInvalidUsage);
    /* Each report of the failure carries its reason, not an earlier message. */
    check_reason("ncclCommGetAsyncError", "count mismatch");
    /* The failing operation's batch leaves the stream just after the latch. */
    CHECK_RES(tuttiEventRecord(late, doomed, s), ncclSuccess);
    CHECK_RES(tuttiEventSynchronize(late), ncclInvalidUsage);
    check_reason("tuttiEventSynchronize, recorded after the failure", "count mismatch");
    CHECK_RES(tuttiEventDestroy(late), ncclSuccess);
    CHECK_RES(tuttiStreamQuery(s), ncclInvalidUsage); /* takes the stream's latched error */
    check_reason("tuttiStreamQuery", "count mismatch");
    CHECK_RES(tuttiStreamDestroy(s), ncclSuccess);
    CHECK_RES(ncclCommAbort(doomed), ncclSuccess);
}

/* A new communicator of every rank, from the world's. */
static bool fresh_comm(ncclComm_t *out)
{
    ncclUniqueId id;
    if (rank == 0) CHECK_RES(ncclGetUniqueId(&id), ncclSuccess);
    CHECK_RES(ncclBroadcast(&id, &id, sizeof id, ncclChar, 0, comm, NULL), ncclSuccess);
    return CHECK_RES(ncclCommInitRank(out, nranks, id, rank), ncclSuccess);
}

/* A group whose first operation fails (a count mismatch) and whose second then fails in a
 * later pass ("not run"): the stream and an event after the group report the first failure's
 * reason, whichever pass ended the batch. */
static void test_group_reason(void)
{
    if (nranks < 2) return;
    ncclComm_t doomed = NULL;
    if (!fresh_comm(&doomed)) return;
    cudaStream_t s = NULL;
    tuttiEvent_t ev = NULL;
    if (!CHECK_RES(tuttiStreamCreate(&s), ncclSuccess)) return;
    CHECK_RES(tuttiEventCreate(&ev), ncclSuccess);
    int64_t x[8] = {0}, y[64] = {0};
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclAllReduce(x, x, 4 + (size_t)rank, ncclInt64, ncclSum, doomed, s), ncclSuccess);
    CHECK_RES(ncclAllReduce(y, y, 64, ncclInt64, ncclSum, doomed, s), ncclSuccess);
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    CHECK_RES(tuttiEventRecord(ev, doomed, s), ncclSuccess);
    ncclCommUserRank(NULL, NULL); /* an earlier error, which the report must replace */
    CHECK_RES(tuttiEventSynchronize(ev), ncclInvalidUsage);
    check_reason("tuttiEventSynchronize after a failed group", "count mismatch");
    CHECK_RES(tuttiStreamSynchronize(s), ncclInvalidUsage);
    check_reason("tuttiStreamSynchronize after a failed group", "count mismatch");
    CHECK_RES(tuttiEventDestroy(ev), ncclSuccess);
    CHECK_RES(tuttiStreamDestroy(s), ncclSuccess);
    CHECK_RES(ncclCommAbort(doomed), ncclSuccess);
}

/* An operation that Abort cancels while it waits behind another communicator's stuck one on
 * rank 0's stream: the abort's caller does not get the cancellation as its own last error, and
 * an event after the cancelled operation reports it with its reason once the stream gets there
 * (the stuck one ends when its own communicator is aborted). */
static void cancel_reason(bool revoke)
{
    if (nranks < 2) return;
    ncclComm_t stuck = NULL, doomed = NULL;
    if (!fresh_comm(&stuck) || !fresh_comm(&doomed)) return;
    if (rank == 0) {
        cudaStream_t s = NULL;
        tuttiEvent_t ev = NULL;
        if (!CHECK_RES(tuttiStreamCreate(&s), ncclSuccess)) return;
        CHECK_RES(tuttiEventCreate(&ev), ncclSuccess);
        int64_t x[4] = {0}, y[4] = {0};
        /* Nobody else issues either: the first waits for its peers until its abort. */
        CHECK_RES(ncclAllReduce(x, x, 4, ncclInt64, ncclSum, stuck, s), ncclSuccess);
        CHECK_RES(ncclAllReduce(y, y, 4, ncclInt64, ncclSum, doomed, s), ncclSuccess);
        CHECK_RES(tuttiEventRecord(ev, doomed, s), ncclSuccess);
        /* A revoke cancels alike, and returns without waiting for the stuck operation. */
        if (revoke) CHECK_RES(ncclCommRevoke(doomed, NCCL_REVOKE_DEFAULT), ncclSuccess);
        CHECK_RES(ncclCommAbort(doomed), ncclSuccess);
        const char *last = ncclGetLastError(NULL);
        if (last != NULL && strstr(last, "not started") != NULL)
            FAIL("ncclCommAbort succeeded but left the cancellation as its last error: '%s'",
                 last);
        CHECK_RES(ncclCommAbort(stuck), ncclSuccess);
        CHECK_RES(tuttiEventSynchronize(ev), ncclRemoteError);
        check_reason("tuttiEventSynchronize after a cancelled operation", "not started");
        tuttiStreamSynchronize(s); /* forget the stream's latched error */
        CHECK_RES(tuttiEventDestroy(ev), ncclSuccess);
        CHECK_RES(tuttiStreamDestroy(s), ncclSuccess);
    }
    int64_t one = 1;
    CHECK_RES(ncclAllReduce(&one, &one, 1, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    if (rank != 0) {
        CHECK_RES(ncclCommAbort(doomed), ncclSuccess);
        CHECK_RES(ncclCommAbort(stuck), ncclSuccess);
    }
}

struct waiter {
    tuttiEvent_t ev;
    _Atomic int done; /* 1 + the result once tuttiEventWait returned */
};

static void *wait_forever(void *arg)
{
    struct waiter *w = arg;
    ncclResult_t res = tuttiEventWait(w->ev, -1);
    atomic_store(&w->done, 1 + (int)res);
    return NULL;
}

/* A thread waits without a limit on an event whose operation cannot complete yet (the peers
 * hold back); another thread records the event anew on an empty stream, which completes it:
 * the waiter returns at once (before, it slept on the first stream until its operation ended). */
static void test_rerecord(void)
{
    if (nranks < 2) return;
    ncclComm_t c = NULL;
    if (!fresh_comm(&c)) return;
    int64_t x[4] = {1, 1, 1, 1}, one = 1;
    if (rank == 0) {
        cudaStream_t s1 = NULL, s2 = NULL;
        struct waiter w = {.ev = NULL};
        CHECK_RES(tuttiStreamCreate(&s1), ncclSuccess);
        CHECK_RES(tuttiStreamCreate(&s2), ncclSuccess);
        CHECK_RES(tuttiEventCreate(&w.ev), ncclSuccess);
        CHECK_RES(ncclAllReduce(x, x, 4, ncclInt64, ncclSum, c, s1), ncclSuccess);
        CHECK_RES(tuttiEventRecord(w.ev, c, s1), ncclSuccess);
        pthread_t th;
        pthread_create(&th, NULL, wait_forever, &w);
        nanosleep(&(struct timespec){0, 50000000}, NULL); /* let it sleep */
        CHECK_RES(tuttiEventRecord(w.ev, c, s2), ncclSuccess);
        for (int i = 0; i < 5000 && atomic_load(&w.done) == 0; i++)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        if (atomic_load(&w.done) != 1 + (int)ncclSuccess)
            FAIL("tuttiEventWait on an event recorded anew on an empty stream: %s",
                 atomic_load(&w.done) == 0 ? "still waiting after 5 s" : "failed");
        CHECK_RES(ncclAllReduce(&one, &one, 1, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
        CHECK_RES(tuttiStreamSynchronize(s1), ncclSuccess); /* the peers joined */
        pthread_join(th, NULL);
        check_all("AllReduce the event first followed", x, 4, nranks);
        CHECK_RES(tuttiEventDestroy(w.ev), ncclSuccess);
        CHECK_RES(tuttiStreamDestroy(s1), ncclSuccess);
        CHECK_RES(tuttiStreamDestroy(s2), ncclSuccess);
    } else {
        CHECK_RES(ncclAllReduce(&one, &one, 1, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
        CHECK_RES(ncclAllReduce(x, x, 4, ncclInt64, ncclSum, c, NULL), ncclSuccess);
    }
    CHECK_RES(ncclCommDestroy(c), ncclSuccess);
}

static void test_cancel_reason(void) { cancel_reason(false); }
static void test_revoke_cancels(void) { cancel_reason(true); }

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    comm = world_open("events", &rank, &nranks);
    if (comm == NULL) return 1;
    static const struct world_test tests[] = {
        {"stream", test_stream, false},
        {"nonblocking", test_nonblocking, false},
        {"blocking", test_blocking, false},
        {"group", test_group, false},
        {"wait", test_wait, false},
        {"args", test_args, false},
        {"errors", test_errors, true},
        {"late", test_late, false},
        {"group_reason", test_group_reason, false},
        {"cancel_reason", test_cancel_reason, false},
        {"revoke_cancels", test_revoke_cancels, false},
        {"rerecord", test_rerecord, false},
    };
    int failed = world_run_tests(tests, sizeof tests / sizeof tests[0], argc, argv, 1, NULL);
    ncclCommDestroy(comm);
    return failed == 0 ? 0 : failed < 0 ? 2 : 1;
}
