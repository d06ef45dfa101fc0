/* Host streams (tuttiStreamCreate and friends, include/tutti.h) through the public API:
 *
 *   overlap      a large AllReduce issued on a stream returns before it completes (on the
 *                ranks that issue it before rank 0 does, tuttiStreamQuery says ncclInProgress
 *                right after) and completes while the calling thread computes, with no call
 *                into the library but tuttiStreamQuery.
 *                The timings (alone, overlapped) are printed for information only: on a shared
 *                machine with few cores they prove nothing.
 *   in_order     a chain of operations on one stream, each reading the previous one's output
 *                (AllReduce, Broadcast, AllReduce, Reduce, a Send/Recv group, repeated in-place
 *                sums), gives the values of running them in issue order.
 *   two_streams  two streams on two communicators progress independently: rank 0 waits on
 *                stream 2 before it issues anything on stream 1, while the other ranks have
 *                already queued an operation on stream 1 ahead of their stream 2 work.
 *   shared_comm  operations of one communicator alternate between two streams, in the same
 *                order on every rank; each gives its own result, whatever stream runs first.
 *   destroy      tuttiStreamDestroy waits for the queued operations before freeing the stream.
 *   finalize     ncclCommFinalize completes the operations queued on the communicator: right
 *                after it the stream reports them done, with their results in place.
 *   abort        ncclCommAbort of a communicator whose queued AllReduce cannot complete (rank 0
 *                never issues it) returns well before the deadline, and the stream then reports
 *                the operation failed.
 *   errors       (only when named) rank 0 aborts a communicator on which the others have queued
 *                an AllReduce: their tuttiStreamSynchronize reports the failure, the
 *                communicator's asynchronous error holds it, and the next query has forgotten
 *                it. Run it with a short TUTTI_TIMEOUT_MS: a peer's abort may only show as a
 *                deadline.
 *
 * Run it as every rank under tutti-run: `stream_overlap [--mib N] [NAME...]` runs the named
 * tests, by default all but errors, with an overlap of N MiB (default 64). The exit code is 1
 * when any check failed. */
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
#include "now_s.h"

#define SENTINEL INT64_C(-777)

static int rank, nranks;
static size_t overlap_mib = 64;
static ncclComm_t comm;

static void *xmalloc(size_t bytes)
{
    void *p = calloc(1, bytes == 0 ? 1 : bytes);
    if (p == NULL) {
        fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", rank, bytes);
        exit(1);
    }
    return p;
}

static void check_i64(const char *what, const int64_t *got, const int64_t *want, size_t count)
{
    int shown = 0;
    for (size_t i = 0; i < count; i++)
        if (got[i] != want[i] && shown++ < 3)
            FAIL("%s: index %zu: got %lld, want %lld", what, i, (long long)got[i],
                 (long long)want[i]);
}

/* Busy work the compiler cannot drop: one millisecond-ish slice of arithmetic. */
static volatile double sink;

static void compute_slice(void)
{
    double acc = sink;
    for (int i = 0; i < 200000; i++) acc = acc * 0.999999 + (double)(i & 15);
    sink = acc;
}

static void fill_overlap_input(float *buf, size_t count)
{
    for (size_t i = 0; i < count; i++) buf[i] = (float)(rank + 1 + (int)(i % 7));
}

static void check_overlap_output(const char *what, const float *buf, size_t count)
{
    int shown = 0;
    for (size_t i = 0; i < count; i++) {
        float want = (float)(nranks * (nranks + 1) / 2 + nranks * (int)(i % 7));
        if (buf[i] != want && shown++ < 3)
            FAIL("%s: index %zu: got %g, want %g", what, i, (double)buf[i], (double)want);
    }
}

static void test_overlap(void)
{
    size_t mib = overlap_mib;
    size_t count = mib * 1048576 / sizeof(float);
    float *buf = xmalloc(count * sizeof *buf);

    /* The collective alone, on the NULL stream (a small one first, to warm up). */
    fill_overlap_input(buf, count);
    CHECK_RES(ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
    fill_overlap_input(buf, count);
    double t0 = now_s();
    CHECK_RES(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
    double comm_s = now_s() - t0;
    check_overlap_output("AllReduce on the NULL stream", buf, count);

    /* The same compute alone: slices for as long as the collective took. */
    t0 = now_s();
    long slices = 0;
    while (now_s() - t0 < comm_s) {
        compute_slice();
        slices++;
    }
    double compute_s = now_s() - t0;

    /* Rank 0 issues only after every other rank has issued and queried (a barrier on a second
     * communicator), so on those ranks the operation cannot have completed at the first
     * query however the machine schedules them: ncclInProgress there proves the call returned
     * early. Rank 0's first query is reported, not checked. */
    ncclUniqueId id;
    ncclComm_t side = NULL;
    int64_t one = 1, sum = 0;
    CHECK_RES(ncclAllReduce(&one, &sum, 1, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    CHECK_RES(ncclGetUniqueId(&id), ncclSuccess);
    if (!CHECK_RES(ncclCommInitRank(&side, nranks, id, rank), ncclSuccess)) return;
    cudaStream_t stream = NULL;
    if (!CHECK_RES(tuttiStreamCreate(&stream), ncclSuccess)) return;
    CHECK_RES(tuttiStreamQuery(stream), ncclSuccess);
    fill_overlap_input(buf, count);
    if (rank == 0)
        CHECK_RES(ncclAllReduce(&one, &sum, 1, ncclInt64, ncclSum, side, NULL), ncclSuccess);
    t0 = now_s();
    CHECK_RES(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
    double issue_s = now_s() - t0;
    ncclResult_t first = tuttiStreamQuery(stream);
    if (rank != 0 && first != ncclInProgress)
        FAIL("tuttiStreamQuery right after issuing a %zu MiB AllReduce that rank 0 has not "
             "issued yet: got %d (%s), want ncclInProgress (the call must return before the "
             "operation completes)", mib, (int)first, ncclGetErrorString(first));
    if (rank != 0)
        CHECK_RES(ncclAllReduce(&one, &sum, 1, ncclInt64, ncclSum, side, NULL), ncclSuccess);

    /* Compute the same number of slices, polling only tuttiStreamQuery; then keep computing
     * (up to a minute) until the collective is seen complete. */
    double done_s = -1.0;
    long done_slices = 0;
    for (long s = 0;; s++) {
        if (s >= slices && done_s >= 0) break;
        if (now_s() - t0 > 60.0) break;
        compute_slice();
        if (done_s < 0) {
            ncclResult_t q = tuttiStreamQuery(stream);
            if (q == ncclSuccess) {
                done_s = now_s() - t0;
                done_slices = s + 1;
            } else if (q != ncclInProgress) {
                CHECK_RES(q, ncclSuccess);
                break;
            }
        }
    }
    double overlapped_s = now_s() - t0;
    if (done_s < 0)
        FAIL("the AllReduce on the stream did not complete within 60 s of computing while "
             "polling tuttiStreamQuery");
    CHECK_RES(tuttiStreamSynchronize(stream), ncclSuccess);
    check_overlap_output("AllReduce on a host stream", buf, count);
    CHECK_RES(tuttiStreamDestroy(stream), ncclSuccess);
    CHECK_RES(ncclCommDestroy(side), ncclSuccess);
    printf("rank %d: overlap: %zu MiB AllReduce alone %.3f s, compute alone %.3f s (%ld slices); "
           "issue took %.6f s, first query %d; on a stream it completed after %.3f s "
           "(%ld slices), compute + collective took %.3f s overlapped vs %.3f s serial\n",
           rank, mib, comm_s, compute_s, slices, issue_s, (int)first, done_s, done_slices,
           overlapped_s, comm_s + compute_s);
    free(buf);
}

/* A chain whose every step reads the previous step's output. With T = n(n+1)/2 and
 * a[i] = rank + 1 + i: b = T + n*i (AllReduce), c = b of the last rank (Broadcast), c = n*c
 * (AllReduce in place), d = n*c at rank 0 only (Reduce), e = c of the previous rank (ring
 * shift), then x = 1 summed in place `reps` times gives n^reps. */
static void test_in_order(void)
{
    const size_t count = 3000;
    const int reps = 20;
    int n = nranks, next = (rank + 1) % n, prev = (rank + n - 1) % n;
    int64_t *a = xmalloc(count * sizeof *a), *b = xmalloc(count * sizeof *b);
    int64_t *c = xmalloc(count * sizeof *c), *d = xmalloc(count * sizeof *d);
    int64_t *e = xmalloc(count * sizeof *e), *want = xmalloc(count * sizeof *want);
    int64_t x = 1;
    for (size_t i = 0; i < count; i++) {
        a[i] = rank + 1 + (int64_t)i;
        b[i] = c[i] = d[i] = e[i] = SENTINEL;
    }

    cudaStream_t s = NULL;
    if (!CHECK_RES(tuttiStreamCreate(&s), ncclSuccess)) return;
    CHECK_RES(ncclAllReduce(a, b, count, ncclInt64, ncclSum, comm, s), ncclSuccess);
    CHECK_RES(ncclBroadcast(b, c, count, ncclInt64, n - 1, comm, s), ncclSuccess);
    CHECK_RES(ncclAllReduce(c, c, count, ncclInt64, ncclSum, comm, s), ncclSuccess);
    CHECK_RES(ncclReduce(c, d, count, ncclInt64, ncclSum, 0, comm, s), ncclSuccess);
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclSend(c, count, ncclInt64, next, comm, s), ncclSuccess);
    CHECK_RES(ncclRecv(e, count, ncclInt64, prev, comm, s), ncclSuccess);
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    for (int k = 0; k < reps; k++)
        CHECK_RES(ncclAllReduce(&x, &x, 1, ncclInt64, ncclSum, comm, s), ncclSuccess);
    CHECK_RES(tuttiStreamSynchronize(s), ncclSuccess);
    CHECK_RES(tuttiStreamQuery(s), ncclSuccess);

    int64_t t = (int64_t)n * (n + 1) / 2;
    for (size_t i = 0; i < count; i++) want[i] = t + n * (int64_t)i;
    check_i64("in order: AllReduce", b, want, count);
    for (size_t i = 0; i < count; i++) want[i] *= n;
    check_i64("in order: Broadcast then AllReduce", c, want, count);
    check_i64("in order: ring shift of the result", e, want, count);
    for (size_t i = 0; i < count; i++) want[i] = rank == 0 ? want[i] * n : SENTINEL;
    check_i64("in order: Reduce to rank 0", d, want, count);
    int64_t power = 1;
    for (int k = 0; k < reps; k++) power *= n;
    if (x != power) FAIL("in order: %d in-place sums of 1: got %lld, want %lld", reps,
                         (long long)x, (long long)power);
    CHECK_RES(tuttiStreamDestroy(s), ncclSuccess);
    free(a);
    free(b);
    free(c);
    free(d);
    free(e);
    free(want);
}

/* Rank 0 completes stream 2 (communicator 2) before it issues on stream 1; the other ranks
 * first queue stream 1's AllReduce, which cannot complete until rank 0 issues it, then wait for
 * stream 2. A progress engine that served the streams one after the other would deadlock. */
static void test_two_streams(void)
{
    int64_t one = 1, sum = 0;
    CHECK_RES(ncclAllReduce(&one, &sum, 1, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    ncclUniqueId id;
    ncclComm_t comm2 = NULL;
    CHECK_RES(ncclGetUniqueId(&id), ncclSuccess);
    if (!CHECK_RES(ncclCommInitRank(&comm2, nranks, id, rank), ncclSuccess)) return;

    const size_t count = 100000;
    int64_t *x = xmalloc(count * sizeof *x), *y = xmalloc(count * sizeof *y);
    int64_t *want_x = xmalloc(count * sizeof *x), *want_y = xmalloc(count * sizeof *y);
    for (size_t i = 0; i < count; i++) {
        x[i] = rank + (int64_t)i;
        y[i] = 3 * rank + (int64_t)i;
        want_x[i] = (int64_t)nranks * (nranks - 1) / 2 + nranks * (int64_t)i;
        want_y[i] = 3 * (int64_t)nranks * (nranks - 1) / 2 + nranks * (int64_t)i;
    }
    cudaStream_t s1 = NULL, s2 = NULL;
    CHECK_RES(tuttiStreamCreate(&s1), ncclSuccess);
    CHECK_RES(tuttiStreamCreate(&s2), ncclSuccess);
    if (rank == 0) {
        CHECK_RES(ncclAllReduce(y, y, count, ncclInt64, ncclSum, comm2, s2), ncclSuccess);
        CHECK_RES(tuttiStreamSynchronize(s2), ncclSuccess);
        CHECK_RES(ncclAllReduce(x, x, count, ncclInt64, ncclSum, comm, s1), ncclSuccess);
    } else {
        CHECK_RES(ncclAllReduce(x, x, count, ncclInt64, ncclSum, comm, s1), ncclSuccess);
        CHECK_RES(ncclAllReduce(y, y, count, ncclInt64, ncclSum, comm2, s2), ncclSuccess);
        CHECK_RES(tuttiStreamSynchronize(s2), ncclSuccess);
    }
    CHECK_RES(tuttiStreamSynchronize(s1), ncclSuccess);
    check_i64("stream 1 on communicator 1", x, want_x, count);
    check_i64("stream 2 on communicator 2", y, want_y, count);
    CHECK_RES(tuttiStreamDestroy(s1), ncclSuccess);
    CHECK_RES(tuttiStreamDestroy(s2), ncclSuccess);
    CHECK_RES(ncclCommDestroy(comm2), ncclSuccess);
    free(x);
    free(y);
    free(want_x);
    free(want_y);
}

/* One communicator, two streams, operations issued alternately on them (the same order on every
 * rank) with different counts, so that a rank that ran them out of issue order would pair
 * different operations with its peers. */
static void test_shared_comm(void)
{
    enum { OPS = 40 };
    int64_t *buf[OPS];
    cudaStream_t s[2] = {NULL, NULL};
    CHECK_RES(tuttiStreamCreate(&s[0]), ncclSuccess);
    CHECK_RES(tuttiStreamCreate(&s[1]), ncclSuccess);
    for (int k = 0; k < OPS; k++) {
        size_t count = (size_t)(1 + k * 997);
        buf[k] = xmalloc(count * sizeof *buf[k]);
        for (size_t i = 0; i < count; i++) buf[k][i] = (int64_t)(k + 1) * (rank + 1) + (int64_t)i;
        if (k % 3 == 2)
            CHECK_RES(ncclBroadcast(buf[k], buf[k], count, ncclInt64, k % nranks, comm, s[k % 2]),
                      ncclSuccess);
        else
            CHECK_RES(ncclAllReduce(buf[k], buf[k], count, ncclInt64, ncclSum, comm, s[k % 2]),
                      ncclSuccess);
    }
    CHECK_RES(tuttiStreamSynchronize(s[0]), ncclSuccess);
    CHECK_RES(tuttiStreamSynchronize(s[1]), ncclSuccess);
    for (int k = 0; k < OPS; k++) {
        size_t count = (size_t)(1 + k * 997);
        int shown = 0;
        for (size_t i = 0; i < count; i++) {
            int64_t want = k % 3 == 2
                               ? (int64_t)(k + 1) * (k % nranks + 1) + (int64_t)i
                               : (int64_t)(k + 1) * nranks * (nranks + 1) / 2 + nranks * (int64_t)i;
            if (buf[k][i] != want && shown++ < 3)
                FAIL("shared communicator, operation %d on stream %d, index %zu: got %lld, "
                     "want %lld", k, k % 2, i, (long long)buf[k][i], (long long)want);
        }
        free(buf[k]);
    }
    CHECK_RES(tuttiStreamDestroy(s[0]), ncclSuccess);
    CHECK_RES(tuttiStreamDestroy(s[1]), ncclSuccess);
}

/* tuttiStreamDestroy right after issuing: it waits for the operation. */
static void test_destroy(void)
{
    const size_t count = 50000;
    int64_t *x = xmalloc(count * sizeof *x), *want = xmalloc(count * sizeof *want);
    for (size_t i = 0; i < count; i++) {
        x[i] = (int64_t)i * (rank + 1);
        want[i] = (int64_t)i * nranks * (nranks + 1) / 2;
    }
    cudaStream_t s = NULL;
    if (!CHECK_RES(tuttiStreamCreate(&s), ncclSuccess)) return;
    CHECK_RES(ncclAllReduce(x, x, count, ncclInt64, ncclSum, comm, s), ncclSuccess);
    CHECK_RES(tuttiStreamDestroy(s), ncclSuccess);
    check_i64("AllReduce completed by tuttiStreamDestroy", x, want, count);
    free(x);
    free(want);
}

/* ncclCommFinalize completes what was queued on a stream for its communicator. */
static void test_finalize(void)
{
    int64_t one = 1, sum = 0;
    CHECK_RES(ncclAllReduce(&one, &sum, 1, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    ncclUniqueId id;
    ncclComm_t c = NULL;
    CHECK_RES(ncclGetUniqueId(&id), ncclSuccess);
    if (!CHECK_RES(ncclCommInitRank(&c, nranks, id, rank), ncclSuccess)) return;
    const size_t count = 1 << 20;
    int64_t *x = xmalloc(count * sizeof *x), *want = xmalloc(count * sizeof *want);
    for (size_t i = 0; i < count; i++) {
        x[i] = (int64_t)i + rank;
        want[i] = (int64_t)i * nranks * nranks + (int64_t)nranks * (nranks - 1) / 2 * nranks;
    }
    cudaStream_t s = NULL;
    if (!CHECK_RES(tuttiStreamCreate(&s), ncclSuccess)) return;
    CHECK_RES(ncclAllReduce(x, x, count, ncclInt64, ncclSum, c, s), ncclSuccess);
    CHECK_RES(ncclAllReduce(x, x, count, ncclInt64, ncclMax, c, s), ncclSuccess);
    CHECK_RES(ncclBroadcast(x, x, count, ncclInt64, 0, c, s), ncclSuccess);
    CHECK_RES(ncclAllReduce(x, x, count, ncclInt64, ncclSum, c, s), ncclSuccess);
    CHECK_RES(ncclCommFinalize(c), ncclSuccess);
    CHECK_RES(tuttiStreamQuery(s), ncclSuccess);
    check_i64("operations completed by ncclCommFinalize", x, want, count);
    CHECK_RES(tuttiStreamDestroy(s), ncclSuccess);
    CHECK_RES(ncclCommDestroy(c), ncclSuccess);
    free(x);
    free(want);
}

/* ncclCommAbort stops a queued operation that waits for a peer, in bounded time. */
static void test_abort(void)
{
    if (nranks < 2) return;
    int64_t one = 1, sum = 0;
    CHECK_RES(ncclAllReduce(&one, &sum, 1, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    ncclUniqueId id;
    ncclComm_t c = NULL;
    CHECK_RES(ncclGetUniqueId(&id), ncclSuccess);
    if (!CHECK_RES(ncclCommInitRank(&c, nranks, id, rank), ncclSuccess)) return;
    cudaStream_t s = NULL;
    if (!CHECK_RES(tuttiStreamCreate(&s), ncclSuccess)) return;
    int64_t x[1000] = {0};
    if (rank != 0) {
        CHECK_RES(ncclAllReduce(x, x, 1000, ncclInt64, ncclSum, c, s), ncclSuccess);
        usleep(200 * 1000);
        CHECK_RES(tuttiStreamQuery(s), ncclInProgress);
    }
    /* No rank aborts before every rank has seen its AllReduce still waiting: an abort fails the
     * other ranks' operation at once, and the ranks leave init up to a few hundred ms apart
     * on a loaded machine (ThreadSanitizer). */
    CHECK_RES(ncclAllReduce(&one, &sum, 1, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    double t0 = now_s();
    CHECK_RES(ncclCommAbort(c), ncclSuccess);
    double took = now_s() - t0;
    if (took > 10.0)
        FAIL("ncclCommAbort with an AllReduce stuck on its stream took %.1f s", took);
    ncclResult_t res = tuttiStreamSynchronize(s);
    if (rank != 0 && (res == ncclSuccess || res == ncclInProgress))
        FAIL("tuttiStreamSynchronize after ncclCommAbort: got %d (%s), want the aborted "
             "AllReduce's error", (int)res, ncclGetErrorString(res));
    if (rank == 0) CHECK_RES(res, ncclSuccess);
    CHECK_RES(tuttiStreamDestroy(s), ncclSuccess);
    printf("rank %d: abort: ncclCommAbort took %.3f s; the stream then reported %d (%s)\n",
           rank, took, (int)res, ncclGetErrorString(res));
    /* Rank 0 stays alive until every rank is done: its exit would fail the others' AllReduce
     * before their abort (a peer's death is seen at once). */
    CHECK_RES(ncclAllReduce(&one, &sum, 1, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
}

/* ncclCommAbort of a communicator whose operation waits on a stream behind another
 * communicator's stuck one: the abort does not wait for that one (it could, until the
 * deadline: 30 s here); the aborted operation fails when the stream reaches it, and an event
 * recorded after it still waits for the stuck one. Rank 0 alone issues on the two
 * communicators. */
static void test_abort_behind(void)
{
    if (nranks < 2) return;
    int64_t one = 1, sum = 0;
    ncclComm_t stuck = NULL, behind = NULL;
    if (!CHECK_RES(ncclCommSplit(comm, 0, rank, &stuck, NULL), ncclSuccess) ||
        !CHECK_RES(ncclCommSplit(comm, 0, rank, &behind, NULL), ncclSuccess))
        return;
    if (rank == 0) {
        cudaStream_t s = NULL;
        tuttiEvent_t ev = NULL;
        if (!CHECK_RES(tuttiStreamCreate(&s), ncclSuccess) ||
            !CHECK_RES(tuttiEventCreate(&ev), ncclSuccess))
            return;
        int64_t x[1000] = {0}, y[1000] = {0};
        CHECK_RES(ncclAllReduce(x, x, 1000, ncclInt64, ncclSum, stuck, s), ncclSuccess);
        CHECK_RES(ncclAllReduce(y, y, 1000, ncclInt64, ncclSum, behind, s), ncclSuccess);
        CHECK_RES(tuttiEventRecord(ev, behind, s), ncclSuccess);
        usleep(100 * 1000);
        CHECK_RES(tuttiStreamQuery(s), ncclInProgress);
        double t0 = now_s();
        CHECK_RES(ncclCommAbort(behind), ncclSuccess);
        double took = now_s() - t0;
        if (took > 5.0)
            FAIL("abort_behind: ncclCommAbort took %.1f s: it waited for another "
                 "communicator's operation ahead on the stream", took);
        CHECK_RES(tuttiEventQuery(ev), ncclInProgress);
        CHECK_RES(ncclCommAbort(stuck), ncclSuccess);
        ncclResult_t res = tuttiEventSynchronize(ev);
        if (res == ncclSuccess || res == ncclInProgress)
            FAIL("abort_behind: the event after the aborted operation reported %d, want its "
                 "error", (int)res);
        res = tuttiStreamSynchronize(s);
        if (res == ncclSuccess || res == ncclInProgress)
            FAIL("abort_behind: the stream reported %d, want the aborted operations' error",
                 (int)res);
        CHECK_RES(tuttiEventDestroy(ev), ncclSuccess);
        CHECK_RES(tuttiStreamDestroy(s), ncclSuccess);
        printf("rank 0: abort_behind: ncclCommAbort took %.3f s\n", took);
    }
    /* The others abort theirs once rank 0 is done (before, rank 0's stuck operation would
     * fail at once, as a peer's). */
    CHECK_RES(ncclAllReduce(&one, &sum, 1, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    if (rank != 0) {
        CHECK_RES(ncclCommAbort(behind), ncclSuccess);
        CHECK_RES(ncclCommAbort(stuck), ncclSuccess);
    }
}

/* The failure of a queued operation surfaces at tuttiStreamSynchronize, once. */
static void test_errors(void)
{
    if (nranks < 2) return;
    int64_t one = 1, sum = 0;
    CHECK_RES(ncclAllReduce(&one, &sum, 1, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    ncclUniqueId id;
    ncclComm_t doomed = NULL;
    CHECK_RES(ncclGetUniqueId(&id), ncclSuccess);
    if (!CHECK_RES(ncclCommInitRank(&doomed, nranks, id, rank), ncclSuccess)) return;
    if (rank == 0) {
        CHECK_RES(ncclCommAbort(doomed), ncclSuccess);
        return;
    }
    int64_t x[64] = {0};
    cudaStream_t s = NULL;
    if (!CHECK_RES(tuttiStreamCreate(&s), ncclSuccess)) return;
    CHECK_RES(ncclAllReduce(x, x, 64, ncclInt64, ncclSum, doomed, s), ncclSuccess);
    ncclResult_t res = tuttiStreamSynchronize(s);
    if (res == ncclSuccess || res == ncclInProgress)
        FAIL("tuttiStreamSynchronize after the AllReduce's peer aborted: got %d (%s), want an "
             "error", (int)res, ncclGetErrorString(res));
    ncclResult_t async = ncclSuccess;
    CHECK_RES(ncclCommGetAsyncError(doomed, &async), ncclSuccess);
    if (async == ncclSuccess || async == ncclInProgress)
        FAIL("ncclCommGetAsyncError after the failed AllReduce: got %d, want an error",
             (int)async);
    CHECK_RES(tuttiStreamQuery(s), ncclSuccess);
    CHECK_RES(tuttiStreamSynchronize(s), ncclSuccess);
    CHECK_RES(tuttiStreamDestroy(s), ncclSuccess);
    CHECK_RES(ncclCommAbort(doomed), ncclSuccess);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int first = 1;
    if (argc >= 3 && strcmp(argv[1], "--mib") == 0) {
        overlap_mib = strtoull(argv[2], NULL, 0);
        first = 3;
    }
    comm = world_open("stream_overlap", &rank, &nranks);
    if (comm == NULL) return 1;

    static const struct world_test tests[] = {
        {"overlap", test_overlap, false},
        {"in_order", test_in_order, false},
        {"two_streams", test_two_streams, false},
        {"shared_comm", test_shared_comm, false},
        {"destroy", test_destroy, false},
        {"finalize", test_finalize, false},
        {"abort", test_abort, false},
        {"abort_behind", test_abort_behind, false},
        {"errors", test_errors, true},
    };
    int failed = world_run_tests(tests, sizeof tests / sizeof tests[0], argc, argv, first, NULL);
    ncclCommDestroy(comm);
    return failed == 0 ? 0 : failed < 0 ? 2 : 1;
}
