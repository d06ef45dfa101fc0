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
 *   args         NULL handles and a NULL event pointer are ncclInvalidArgument.
 *   errors       (only when named; run with a short TUTTI_TIMEOUT_MS) rank 0 issues an
 *                AllReduce the others never issue: its event completes with the operation's
 *                error (the deadline's ncclRemoteError), while an event recorded before it on
 *                the same stream keeps ncclSuccess.
 *
 * `events [NAME...]` runs the named tests, by default all but errors. The exit code is 1 when
 * any check failed. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "tutti.h"

static int rank, nranks, failures;
static ncclComm_t comm;

#define FAIL(...)                                                                               \
    do {                                                                                        \
        failures++;                                                                             \
        fprintf(stderr, "events.c:%d: rank %d: ", __LINE__, rank);                              \
        fprintf(stderr, __VA_ARGS__);                                                           \
        fputc('\n', stderr);                                                                    \
    } while (0)

#define EXPECT(expr, want) expect_res(__LINE__, #expr, (expr), (want))

static bool expect_res(int line, const char *text, ncclResult_t got, ncclResult_t want)
{
    if (got == want) return true;
    failures++;
    fprintf(stderr, "events.c:%d: rank %d: %s: got %d (%s), want %d (%s); last error: %s\n", line,
            rank, text, (int)got, ncclGetErrorString(got), (int)want, ncclGetErrorString(want),
            ncclGetLastError(NULL));
    return false;
}

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

static void test_stream(void)
{
    cudaStream_t s = NULL;
    if (!EXPECT(tuttiStreamCreate(&s), ncclSuccess)) return;
    int64_t *bufs[NOPS];
    tuttiEvent_t events[NOPS];
    for (int k = 0; k < NOPS; k++) {
        bufs[k] = malloc(COUNT * sizeof(int64_t));
        for (size_t i = 0; i < COUNT; i++) bufs[k][i] = (int64_t)(rank + 1) * (k + 1);
        EXPECT(tuttiEventCreate(&events[k]), ncclSuccess);
        EXPECT(ncclAllReduce(bufs[k], bufs[k], COUNT, ncclInt64, ncclSum, comm, s), ncclSuccess);
        EXPECT(tuttiEventRecord(events[k], comm, s), ncclSuccess);
    }
    /* Wait for the last first: every earlier event must then be complete too (in order). */
    EXPECT(tuttiEventSynchronize(events[NOPS - 1]), ncclSuccess);
    for (int k = 0; k < NOPS; k++) {
        EXPECT(tuttiEventQuery(events[k]), ncclSuccess);
        check_all("stream AllReduce", bufs[k], COUNT, ranks_sum(k + 1));
    }
    /* Again, now waiting for each in turn and checking its own result right after. */
    for (int k = 0; k < NOPS; k++) {
        for (size_t i = 0; i < COUNT; i++) bufs[k][i] = (int64_t)(rank + 1) * (k + 1);
        EXPECT(ncclAllReduce(bufs[k], bufs[k], COUNT, ncclInt64, ncclSum, comm, s), ncclSuccess);
        EXPECT(tuttiEventRecord(events[k], comm, s), ncclSuccess);
    }
    for (int k = 0; k < NOPS; k++) {
        EXPECT(tuttiEventSynchronize(events[k]), ncclSuccess);
        check_all("stream AllReduce, waited in turn", bufs[k], COUNT, ranks_sum(k + 1));
    }
    for (int k = 0; k < NOPS; k++) {
        EXPECT(tuttiEventDestroy(events[k]), ncclSuccess);
        free(bufs[k]);
    }
    EXPECT(tuttiStreamDestroy(s), ncclSuccess);
}

static void test_nonblocking(void)
{
    ncclUniqueId id;
    ncclComm_t nb = NULL;
    if (rank == 0) EXPECT(ncclGetUniqueId(&id), ncclSuccess);
    EXPECT(ncclBroadcast(&id, &id, sizeof id, ncclChar, 0, comm, NULL), ncclSuccess);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t res = ncclCommInitRankConfig(&nb, nranks, id, rank, &config);
    if (res != ncclSuccess && res != ncclInProgress) {
        EXPECT(res, ncclInProgress);
        return;
    }
    ncclResult_t state;
    do {
        EXPECT(ncclCommGetAsyncError(nb, &state), ncclSuccess);
    } while (state == ncclInProgress);
    if (!EXPECT(state, ncclSuccess)) return;
    int64_t *buf = malloc(COUNT * sizeof(int64_t));
    for (size_t i = 0; i < COUNT; i++) buf[i] = rank + 1;
    tuttiEvent_t ev = NULL;
    EXPECT(tuttiEventCreate(&ev), ncclSuccess);
    res = ncclAllReduce(buf, buf, COUNT, ncclInt64, ncclSum, nb, NULL);
    if (res != ncclSuccess && res != ncclInProgress) EXPECT(res, ncclInProgress);
    EXPECT(tuttiEventRecord(ev, nb, NULL), ncclSuccess);
    EXPECT(tuttiEventSynchronize(ev), ncclSuccess);
    check_all("nonblocking AllReduce", buf, COUNT, ranks_sum(1));
    EXPECT(tuttiEventDestroy(ev), ncclSuccess);
    free(buf);
    EXPECT(ncclCommDestroy(nb), ncclSuccess);
}

static void test_blocking(void)
{
    tuttiEvent_t ev = NULL;
    if (!EXPECT(tuttiEventCreate(&ev), ncclSuccess)) return;
    EXPECT(tuttiEventQuery(ev), ncclSuccess); /* never recorded */
    int64_t x = rank + 1;
    EXPECT(ncclAllReduce(&x, &x, 1, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    EXPECT(tuttiEventRecord(ev, comm, NULL), ncclSuccess);
    EXPECT(tuttiEventQuery(ev), ncclSuccess);
    check_all("blocking AllReduce", &x, 1, ranks_sum(1));
    EXPECT(tuttiEventDestroy(ev), ncclSuccess);
}

static void test_group(void)
{
    cudaStream_t s = NULL;
    if (!EXPECT(tuttiStreamCreate(&s), ncclSuccess)) return;
    tuttiEvent_t ev = NULL;
    EXPECT(tuttiEventCreate(&ev), ncclSuccess);
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    int64_t *out = malloc(COUNT * sizeof(int64_t)), *in = malloc(COUNT * sizeof(int64_t));
    for (size_t i = 0; i < COUNT; i++) {
        out[i] = rank * 1000 + 7;
        in[i] = -1;
    }
    EXPECT(ncclGroupStart(), ncclSuccess);
    EXPECT(ncclSend(out, COUNT, ncclInt64, next, comm, s), ncclSuccess);
    EXPECT(ncclRecv(in, COUNT, ncclInt64, prev, comm, s), ncclSuccess);
    EXPECT(tuttiEventRecord(ev, comm, s), ncclInvalidUsage);
    EXPECT(ncclGroupEnd(), ncclSuccess);
    EXPECT(tuttiEventRecord(ev, comm, s), ncclSuccess);
    EXPECT(tuttiEventSynchronize(ev), ncclSuccess);
    check_all("group receive", in, COUNT, prev * 1000 + 7);
    EXPECT(tuttiEventDestroy(ev), ncclSuccess);
    EXPECT(tuttiStreamDestroy(s), ncclSuccess);
    free(out);
    free(in);
}

static void test_args(void)
{
    EXPECT(tuttiEventCreate(NULL), ncclInvalidArgument);
    EXPECT(tuttiEventDestroy(NULL), ncclInvalidArgument);
    EXPECT(tuttiEventQuery(NULL), ncclInvalidArgument);
    EXPECT(tuttiEventSynchronize(NULL), ncclInvalidArgument);
    tuttiEvent_t ev = NULL;
    if (!EXPECT(tuttiEventCreate(&ev), ncclSuccess)) return;
    EXPECT(tuttiEventRecord(ev, NULL, NULL), ncclInvalidArgument);
    EXPECT(tuttiEventRecord(NULL, comm, NULL), ncclInvalidArgument);
    int not_a_stream = 0;
    EXPECT(tuttiEventRecord(ev, comm, (cudaStream_t)(void *)&not_a_stream), ncclInvalidUsage);
    EXPECT(tuttiEventDestroy(ev), ncclSuccess);
}

static void test_errors(void)
{
    if (nranks < 2) return;
    ncclUniqueId id;
    ncclComm_t doomed = NULL;
    if (rank == 0) EXPECT(ncclGetUniqueId(&id), ncclSuccess);
    EXPECT(ncclBroadcast(&id, &id, sizeof id, ncclChar, 0, comm, NULL), ncclSuccess);
    if (!EXPECT(ncclCommInitRank(&doomed, nranks, id, rank), ncclSuccess)) return;
    cudaStream_t s = NULL;
    if (!EXPECT(tuttiStreamCreate(&s), ncclSuccess)) return;
    tuttiEvent_t before = NULL, after = NULL;
    EXPECT(tuttiEventCreate(&before), ncclSuccess);
    EXPECT(tuttiEventCreate(&after), ncclSuccess);
    int64_t x[64];
    for (int i = 0; i < 64; i++) x[i] = rank + 1;
    /* Every rank: one AllReduce that completes; then rank 0 alone issues one more. */
    EXPECT(ncclAllReduce(x, x, 64, ncclInt64, ncclSum, doomed, s), ncclSuccess);
    EXPECT(tuttiEventRecord(before, doomed, s), ncclSuccess);
    if (rank == 0) {
        EXPECT(ncclAllReduce(x, x, 64, ncclInt64, ncclSum, doomed, s), ncclSuccess);
        EXPECT(tuttiEventRecord(after, doomed, s), ncclSuccess);
        ncclResult_t res = tuttiEventSynchronize(after);
        if (res != ncclRemoteError)
            FAIL("event after an AllReduce no peer issued: got %d (%s), want ncclRemoteError",
                 (int)res, ncclGetErrorString(res));
        EXPECT(tuttiEventQuery(before), ncclSuccess);
    } else {
        EXPECT(tuttiEventSynchronize(before), ncclSuccess);
        check_all("AllReduce before the failure", x, 64, ranks_sum(1));
    }
    tuttiStreamSynchronize(s); /* forget the stream's latched error */
    EXPECT(tuttiEventDestroy(before), ncclSuccess);
    EXPECT(tuttiEventDestroy(after), ncclSuccess);
    EXPECT(tuttiStreamDestroy(s), ncclSuccess);
    EXPECT(ncclCommAbort(doomed), ncclSuccess);
}

static bool selected(const char *name, int argc, char **argv)
{
    if (argc < 2) return strcmp(name, "errors") != 0;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0) return true;
    return false;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    ncclResult_t res = tuttiCommInitFromEnv(&comm);
    if (res != ncclSuccess) {
        fprintf(stderr, "tuttiCommInitFromEnv: %s: %s\n", ncclGetErrorString(res),
                ncclGetLastError(NULL));
        return 1;
    }
    ncclCommCount(comm, &nranks);
    ncclCommUserRank(comm, &rank);
    static const struct {
        const char *name;
        void (*run)(void);
    } tests[] = {{"stream", test_stream}, {"nonblocking", test_nonblocking},
                 {"blocking", test_blocking}, {"group", test_group},
                 {"args", test_args},     {"errors", test_errors}};
    int failed = 0;
    for (size_t t = 0; t < sizeof tests / sizeof tests[0]; t++) {
        if (!selected(tests[t].name, argc, argv)) continue;
        int before = failures;
        tests[t].run();
        bool ok = failures == before;
        failed += !ok;
        printf("%s %s (rank %d of %d)\n", ok ? "PASS" : "FAIL", tests[t].name, rank, nranks);
    }
    ncclCommDestroy(comm);
    return failed ? 1 : 0;
}
