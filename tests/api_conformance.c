/* Conformance of Tutti's public API to NCCL 2.28's documented contracts, one test function per
 * contract: in-place rules, which buffers are significant where, avg on integers and floats,
 * every root, point to point in groups, group errors and nesting, groups spanning several
 * communicators, mixing collectives with point to point, and owned by their thread, lifecycle
 * (finalize, double destroy, abort), nonblocking communicators, split ordering, count 0 and
 * ncclGroupSimulateEnd.
 *
 * Run it as every rank under tutti-run (any number of ranks; one without a launcher). Every
 * rank runs every test in the same order, and each test prints "PASS name" or "FAIL name" per
 * rank, with got and want (rank, index) for each failed check. Buffers hold int64 values or
 * powers of two, so every expected result is exact. `api_conformance NAME...` runs only the
 * named tests; the exit code is 1 when any check failed. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "tutti.h"

#define SENTINEL INT64_C(-777)
#define WAIT_S 60.0

static int rank, nranks;
static ncclComm_t comm;
static int test_failures;

#define FAIL(...)                                                                               \
    do {                                                                                        \
        test_failures++;                                                                        \
        fprintf(stderr, "api_conformance.c:%d: rank %d: ", __LINE__, rank);                     \
        fprintf(stderr, __VA_ARGS__);                                                           \
        fputc('\n', stderr);                                                                    \
    } while (0)

#define CHECK(cond, ...)                                                                        \
    do {                                                                                        \
        if (!(cond)) FAIL(__VA_ARGS__);                                                         \
    } while (0)

/* Checks that `expr` returned `want`; true when it did. */
#define EXPECT(expr, want) expect_res(__LINE__, #expr, (expr), (want))

static bool expect_res(int line, const char *text, ncclResult_t got, ncclResult_t want)
{
    if (got == want) return true;
    test_failures++;
    fprintf(stderr,
            "api_conformance.c:%d: rank %d: %s\n    got %d (%s), want %d (%s); last error: %s\n",
            line, rank, text, (int)got, ncclGetErrorString(got), (int)want,
            ncclGetErrorString(want), ncclGetLastError(NULL));
    return false;
}

/* Checks that `expr` failed (any result but ncclSuccess and ncclInProgress). */
#define EXPECT_ERROR(expr) expect_error(__LINE__, #expr, (expr))

static bool expect_error(int line, const char *text, ncclResult_t got)
{
    if (got != ncclSuccess && got != ncclInProgress) return true;
    test_failures++;
    fprintf(stderr, "api_conformance.c:%d: rank %d: %s\n    got %d (%s), want an error\n", line,
            rank, text, (int)got, ncclGetErrorString(got));
    return false;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *xcalloc(size_t count, size_t bytes)
{
    void *p = calloc(count == 0 ? 1 : count, bytes);
    if (p == NULL) {
        fprintf(stderr, "rank %d: out of memory (%zu x %zu bytes)\n", rank, count, bytes);
        exit(1);
    }
    return p;
}

static int64_t *alloc_i64(size_t count, int64_t fill)
{
    int64_t *p = xcalloc(count, sizeof *p);
    for (size_t i = 0; i < count; i++) p[i] = fill;
    return p;
}

/* A distinct value for element `i` of rank `r`'s data. */
static int64_t val(int r, size_t i)
{
    return (int64_t)r * 1000003 + (int64_t)i * 7 + 1;
}

/* The value rank `src` sends to rank `dst` at index `i` (AlltoAll, point to point). */
static int64_t pair_val(int src, int dst, size_t i)
{
    return (int64_t)src * 100000000 + (int64_t)dst * 1000000 + (int64_t)i;
}

/* Compares `count` elements; prints the first three mismatches with rank, index, got, want. */
static void check_i64(const char *what, const int64_t *got, const int64_t *want, size_t count)
{
    int shown = 0;
    for (size_t i = 0; i < count; i++) {
        if (got[i] == want[i]) continue;
        if (shown++ < 3)
            FAIL("%s: index %zu: got %lld, want %lld", what, i, (long long)got[i],
                 (long long)want[i]);
    }
    if (shown > 3) FAIL("%s: %d mismatched elements in all", what, shown);
}

static void check_all_equal(const char *what, const int64_t *got, int64_t want, size_t count)
{
    int shown = 0;
    for (size_t i = 0; i < count; i++) {
        if (got[i] == want) continue;
        if (shown++ < 3)
            FAIL("%s: index %zu: got %lld, want %lld", what, i, (long long)got[i],
                 (long long)want);
    }
}

/* Every rank waits for every other on `c` (an AllReduce of one element). */
static void barrier(ncclComm_t c)
{
    int64_t one = 1, sum = 0;
    if (EXPECT(ncclAllReduce(&one, &sum, 1, ncclInt64, ncclSum, c, NULL), ncclSuccess))
        CHECK(sum == nranks, "barrier: sum %lld, want %d", (long long)sum, nranks);
}

/* Polls ncclCommGetAsyncError until the communicator's pending work has finished; returns
 * its final state (ncclInProgress only after WAIT_S seconds). */
static ncclResult_t wait_comm(ncclComm_t c)
{
    double deadline = now_s() + WAIT_S;
    ncclResult_t state = ncclInProgress;
    while (now_s() < deadline) {
        ncclResult_t res = ncclCommGetAsyncError(c, &state);
        if (res != ncclSuccess) return res;
        if (state != ncclInProgress) return state;
        usleep(200);
    }
    return state;
}

/* A fresh communicator of all ranks, through ncclGetUniqueId and ncclCommInitRankConfig. Every
 * rank has left the previous rendezvous before the next starts (the barrier), since under
 * tutti-run every rank derives the same id from NCCL_COMM_ID. */
static ncclComm_t make_comm(ncclConfig_t *config)
{
    barrier(comm);
    ncclUniqueId id;
    ncclComm_t c = NULL;
    if (!EXPECT(ncclGetUniqueId(&id), ncclSuccess)) return NULL;
    ncclResult_t res = ncclCommInitRankConfig(&c, nranks, id, rank, config);
    if (res == ncclInProgress) res = wait_comm(c);
    if (!EXPECT(res, ncclSuccess)) return NULL;
    return c;
}

/* ---- Queries ---------------------------------------------------------------------------- */

static void test_queries(void)
{
    int count = -1, me = -1, device = 99;
    ncclResult_t async = ncclInternalError;
    EXPECT(ncclCommCount(comm, &count), ncclSuccess);
    EXPECT(ncclCommUserRank(comm, &me), ncclSuccess);
    EXPECT(ncclCommCuDevice(comm, &device), ncclSuccess);
    EXPECT(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    CHECK(count == nranks, "ncclCommCount: got %d, want %d", count, nranks);
    CHECK(me == rank, "ncclCommUserRank: got %d, want %d", me, rank);
    CHECK(device == -1, "ncclCommCuDevice: got %d, want -1 (host communicator)", device);
    CHECK(async == ncclSuccess, "ncclCommGetAsyncError on a healthy communicator: got %d (%s)",
          (int)async, ncclGetErrorString(async));
    EXPECT(ncclCommGetAsyncError(NULL, &async), ncclInvalidArgument);
    EXPECT(ncclCommCount(NULL, &count), ncclInvalidArgument);
}

/* ---- In-place rules and significant buffers ------------------------------------------------ */

/* AllGather is in place iff sendbuff == recvbuff + rank * sendcount. */
static void test_allgather_in_place(void)
{
    const size_t count = 5, total = count * (size_t)nranks;
    int64_t *send = alloc_i64(count, 0), *recv = alloc_i64(total, SENTINEL);
    int64_t *want = alloc_i64(total, 0);
    for (size_t i = 0; i < count; i++) send[i] = val(rank, i);
    for (int r = 0; r < nranks; r++)
        for (size_t i = 0; i < count; i++) want[(size_t)r * count + i] = val(r, i);

    EXPECT(ncclAllGather(send, recv, count, ncclInt64, comm, NULL), ncclSuccess);
    check_i64("AllGather out of place", recv, want, total);
    for (size_t i = 0; i < count; i++)
        CHECK(send[i] == val(rank, i), "AllGather modified sendbuff at %zu", i);

    for (size_t i = 0; i < total; i++) recv[i] = SENTINEL;
    memcpy(recv + (size_t)rank * count, send, count * sizeof *send);
    EXPECT(ncclAllGather(recv + (size_t)rank * count, recv, count, ncclInt64, comm, NULL),
           ncclSuccess);
    check_i64("AllGather in place", recv, want, total);
    free(send);
    free(recv);
    free(want);
}

/* ReduceScatter is in place iff recvbuff == sendbuff + rank * recvcount. */
static void test_reducescatter_in_place(void)
{
    const size_t count = 6, total = count * (size_t)nranks;
    int64_t *send = alloc_i64(total, 0), *recv = alloc_i64(count, SENTINEL);
    int64_t *want = alloc_i64(count, 0);
    for (size_t k = 0; k < total; k++) send[k] = val(rank, k);
    for (size_t i = 0; i < count; i++)
        for (int r = 0; r < nranks; r++) want[i] += val(r, (size_t)rank * count + i);

    EXPECT(ncclReduceScatter(send, recv, count, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    check_i64("ReduceScatter out of place", recv, want, count);
    for (size_t k = 0; k < total; k++)
        CHECK(send[k] == val(rank, k), "ReduceScatter modified sendbuff at %zu", k);

    EXPECT(ncclReduceScatter(send, send + (size_t)rank * count, count, ncclInt64, ncclSum, comm,
                             NULL),
           ncclSuccess);
    check_i64("ReduceScatter in place", send + (size_t)rank * count, want, count);
    free(send);
    free(recv);
    free(want);
}

/* Reduce: recvbuff is significant at the root only; elsewhere it must stay untouched. */
static void test_reduce_root_only(void)
{
    const size_t count = 9;
    int64_t *send = alloc_i64(count, 0), *recv = alloc_i64(count, SENTINEL);
    int64_t *sum = alloc_i64(count, 0);
    for (size_t i = 0; i < count; i++) {
        send[i] = val(rank, i);
        for (int r = 0; r < nranks; r++) sum[i] += val(r, i);
    }
    for (int root = 0; root < nranks; root++) {
        ncclRedOp_t op = root % 2 ? ncclMax : ncclSum;
        for (size_t i = 0; i < count; i++) recv[i] = SENTINEL;
        EXPECT(ncclReduce(send, recv, count, ncclInt64, op, root, comm, NULL), ncclSuccess);
        for (size_t i = 0; i < count; i++) {
            int64_t want = rank != root ? SENTINEL : op == ncclSum ? sum[i] : val(nranks - 1, i);
            CHECK(recv[i] == want, "Reduce %s root %d: index %zu: got %lld, want %lld%s",
                  op == ncclSum ? "sum" : "max", root, i, (long long)recv[i], (long long)want,
                  rank != root ? " (non-root recvbuff must stay untouched)" : "");
        }
        /* In place: sendbuff == recvbuff; a non-root's buffer keeps its input. */
        int64_t *buf = alloc_i64(count, 0);
        memcpy(buf, send, count * sizeof *buf);
        EXPECT(ncclReduce(buf, buf, count, ncclInt64, ncclSum, root, comm, NULL), ncclSuccess);
        check_i64("Reduce in place", buf, rank == root ? sum : send, count);
        free(buf);
    }
    free(send);
    free(recv);
    free(sum);
}

/* ncclAvg: integers sum then divide, truncating toward zero; floats multiply each input by
 * 1/nranks before summing, so inputs whose sum overflows still average to a finite value. */
static void test_avg(void)
{
    /* Sum n+1 (rank 0 gives 2, the others 1): the truncated quotient is 1, or -1 when negated,
     * where multiplying by 1/n in integers would give 0. */
    int32_t in32[2] = {rank == 0 ? 2 : 1, rank == 0 ? -2 : -1}, out32[2] = {0, 0};
    int64_t in64[2] = {in32[0], in32[1]}, out64[2] = {0, 0};
    int32_t want0 = nranks == 1 ? 2 : 1, want1 = -want0;
    EXPECT(ncclAllReduce(in32, out32, 2, ncclInt32, ncclAvg, comm, NULL), ncclSuccess);
    CHECK(out32[0] == want0 && out32[1] == want1, "avg int32: got {%d, %d}, want {%d, %d}",
          out32[0], out32[1], want0, want1);
    EXPECT(ncclAllReduce(in64, out64, 2, ncclInt64, ncclAvg, comm, NULL), ncclSuccess);
    CHECK(out64[0] == want0 && out64[1] == want1, "avg int64: got {%lld, %lld}, want {%d, %d}",
          (long long)out64[0], (long long)out64[1], want0, want1);

    /* 2^126 (float) and 2^1022 (double) on every rank: summed first they overflow from 4 ranks
     * up; pre-multiplied they average to themselves within rounding. */
    float f = ldexpf(1.0f, 126), f_out = 0;
    double d = ldexp(1.0, 1022), d_out = 0;
    EXPECT(ncclAllReduce(&f, &f_out, 1, ncclFloat32, ncclAvg, comm, NULL), ncclSuccess);
    EXPECT(ncclAllReduce(&d, &d_out, 1, ncclFloat64, ncclAvg, comm, NULL), ncclSuccess);
    CHECK(isfinite(f_out) && fabsf(f_out / f - 1.0f) < 1e-6f,
          "avg float32 of 2^126 on %d ranks: got %a, want 2^126 (pre-multiplied, no overflow)",
          nranks, (double)f_out);
    CHECK(isfinite(d_out) && fabs(d_out / d - 1.0) < 1e-12,
          "avg float64 of 2^1022 on %d ranks: got %a, want 2^1022", nranks, d_out);
}

/* Broadcast from every root, out of place and in place, and the legacy ncclBcast. The
 * non-roots' sendbuff is not read. */
static void test_broadcast_every_root(void)
{
    const size_t count = 11;
    int64_t *send = alloc_i64(count, 0), *recv = alloc_i64(count, SENTINEL);
    int64_t *want = alloc_i64(count, 0);
    for (int root = 0; root < nranks; root++) {
        for (size_t i = 0; i < count; i++) {
            send[i] = rank == root ? val(root, i) : val(rank + 500, i);
            recv[i] = SENTINEL;
            want[i] = val(root, i);
        }
        EXPECT(ncclBroadcast(send, recv, count, ncclInt64, root, comm, NULL), ncclSuccess);
        check_i64("Broadcast", recv, want, count);
        for (size_t i = 0; i < count; i++)
            CHECK(send[i] == (rank == root ? val(root, i) : val(rank + 500, i)),
                  "Broadcast root %d modified sendbuff at %zu", root, i);

        for (size_t i = 0; i < count; i++) recv[i] = rank == root ? val(root, i) : SENTINEL;
        EXPECT(ncclBroadcast(recv, recv, count, ncclInt64, root, comm, NULL), ncclSuccess);
        check_i64("Broadcast in place", recv, want, count);

        for (size_t i = 0; i < count; i++) recv[i] = rank == root ? val(root, i) : SENTINEL;
        EXPECT(ncclBcast(recv, count, ncclInt64, root, comm, NULL), ncclSuccess);
        check_i64("ncclBcast", recv, want, count);
    }
    free(send);
    free(recv);
    free(want);
}

/* AlltoAll: block j of sendbuff goes to rank j, block i of recvbuff comes from rank i. NCCL
 * does not define an in-place AlltoAll, so none is tried. */
static void test_alltoall(void)
{
    static const size_t counts[] = {1, 3, 4099};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        size_t count = counts[c], total = count * (size_t)nranks;
        int64_t *send = alloc_i64(total, 0), *recv = alloc_i64(total, SENTINEL);
        int64_t *want = alloc_i64(total, 0);
        for (int j = 0; j < nranks; j++)
            for (size_t i = 0; i < count; i++) {
                send[(size_t)j * count + i] = pair_val(rank, j, i);
                want[(size_t)j * count + i] = pair_val(j, rank, i);
            }
        EXPECT(ncclAlltoAll(send, recv, count, ncclInt64, comm, NULL), ncclSuccess);
        check_i64("AlltoAll", recv, want, total);
        free(send);
        free(recv);
        free(want);
    }
}

/* Gather with every root: recvbuff (nranks * count) is significant at the root only; in place
 * at the root when sendbuff == recvbuff + root * count. */
static void gather_every_root(size_t count)
{
    const size_t total = count * (size_t)nranks;
    int64_t *send = alloc_i64(count, 0), *recv = alloc_i64(total, SENTINEL);
    int64_t *want = alloc_i64(total, 0);
    for (size_t i = 0; i < count; i++) send[i] = val(rank, i);
    for (int r = 0; r < nranks; r++)
        for (size_t i = 0; i < count; i++) want[(size_t)r * count + i] = val(r, i);
    for (int root = 0; root < nranks; root++) {
        for (size_t i = 0; i < total; i++) recv[i] = SENTINEL;
        EXPECT(ncclGather(send, recv, count, ncclInt64, root, comm, NULL), ncclSuccess);
        if (rank == root)
            check_i64("Gather at root", recv, want, total);
        else
            check_all_equal("Gather: non-root recvbuff must stay untouched", recv, SENTINEL,
                            total);

        for (size_t i = 0; i < total; i++) recv[i] = SENTINEL;
        const int64_t *src = send;
        if (rank == root) {
            memcpy(recv + (size_t)root * count, send, count * sizeof *send);
            src = recv + (size_t)root * count;
        }
        EXPECT(ncclGather(src, recv, count, ncclInt64, root, comm, NULL), ncclSuccess);
        if (rank == root) check_i64("Gather in place at root", recv, want, total);
    }
    free(send);
    free(recv);
    free(want);
}

static void test_gather_every_root(void)
{
    gather_every_root(7);
    gather_every_root(70001);
}

/* Scatter with every root: sendbuff is read at the root only; in place at the root when
 * recvbuff == sendbuff + root * count. */
static void scatter_every_root(size_t count)
{
    const size_t total = count * (size_t)nranks;
    int64_t *send = alloc_i64(total, 0), *recv = alloc_i64(count, SENTINEL);
    int64_t *want = alloc_i64(count, 0);
    for (int root = 0; root < nranks; root++) {
        for (int r = 0; r < nranks; r++)
            for (size_t i = 0; i < count; i++)
                send[(size_t)r * count + i] = rank == root ? val(100 + r, i) : SENTINEL - 1;
        for (size_t i = 0; i < count; i++) {
            recv[i] = SENTINEL;
            want[i] = val(100 + rank, i);
        }
        EXPECT(ncclScatter(send, recv, count, ncclInt64, root, comm, NULL), ncclSuccess);
        check_i64("Scatter", recv, want, count);
        if (rank == root)
            for (int r = 0; r < nranks; r++)
                CHECK(send[(size_t)r * count] == val(100 + r, 0),
                      "Scatter modified the root's sendbuff at block %d", r);

        if (rank == root) {
            EXPECT(ncclScatter(send, send + (size_t)root * count, count, ncclInt64, root, comm,
                               NULL),
                   ncclSuccess);
            check_i64("Scatter in place at root", send + (size_t)root * count, want, count);
        } else {
            for (size_t i = 0; i < count; i++) recv[i] = SENTINEL;
            EXPECT(ncclScatter(send, recv, count, ncclInt64, root, comm, NULL), ncclSuccess);
            check_i64("Scatter (root in place)", recv, want, count);
        }
    }
    free(send);
    free(recv);
    free(want);
}

static void test_scatter_every_root(void)
{
    scatter_every_root(7);
    scatter_every_root(70001);
}

/* The data-moving operations on every element width: bytes land where they must, and no byte
 * past the end of a receive buffer is written (a count taken as bytes, or the wrong element
 * size, shows here). Byte b of element block `block` sent by rank `src` is move_byte(...). */
#define TAIL_BYTES 64

static uint8_t move_byte(int src, int block, size_t b)
{
    return (uint8_t)(src * 67 + block * 29 + (int)(b % 251) * 3 + (int)(b / 251));
}

/* Allocates `bytes` plus a tail of 0xEE, all but the tail filled with 0xDD. */
static uint8_t *alloc_guarded(size_t bytes)
{
    uint8_t *p = xcalloc(bytes + TAIL_BYTES, 1);
    memset(p, 0xDD, bytes);
    memset(p + bytes, 0xEE, TAIL_BYTES);
    return p;
}

/* Checks `bytes` of got against blocks (src_of(block), block) and the tail after them. */
static void check_blocks(const char *what, const char *dtype, const uint8_t *got,
                         size_t block_bytes, int nblocks, const int *srcs, const int *tags)
{
    int shown = 0;
    for (int k = 0; k < nblocks; k++)
        for (size_t b = 0; b < block_bytes; b++) {
            uint8_t want = srcs[k] < 0 ? 0xDD : move_byte(srcs[k], tags[k], b);
            if (got[(size_t)k * block_bytes + b] != want && shown++ < 3)
                FAIL("%s %s: block %d byte %zu: got 0x%02x, want 0x%02x", what, dtype, k, b,
                     got[(size_t)k * block_bytes + b], want);
        }
    for (size_t b = 0; b < TAIL_BYTES; b++)
        if (got[(size_t)nblocks * block_bytes + b] != 0xEE && shown++ < 3)
            FAIL("%s %s: wrote past the end of recvbuff (%zu bytes), at +%zu", what, dtype,
                 (size_t)nblocks * block_bytes, b);
}

static void test_movement_dtypes(void)
{
    static const struct {
        ncclDataType_t dtype;
        const char *name;
        size_t bytes;
    } types[] = {{ncclInt8, "int8", 1},         {ncclFloat16, "float16", 2},
                 {ncclBfloat16, "bfloat16", 2}, {ncclInt32, "int32", 4},
                 {ncclFloat32, "float32", 4},   {ncclUint64, "uint64", 8},
                 {ncclFloat64, "float64", 8},   {ncclFloat8e5m2, "fp8e5m2", 1}};
    const size_t count = 1001;
    int n = nranks, next = (rank + 1) % n, prev = (rank + n - 1) % n;
    int *srcs = xcalloc((size_t)n, sizeof *srcs), *tags = xcalloc((size_t)n, sizeof *tags);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        ncclDataType_t dt = types[t].dtype;
        const char *name = types[t].name;
        size_t block = count * types[t].bytes;
        /* sendbuff: block j (for rank j, or block 0 for single-block operations). */
        uint8_t *send = alloc_guarded(block * (size_t)n);
        for (int j = 0; j < n; j++)
            for (size_t b = 0; b < block; b++) send[(size_t)j * block + b] = move_byte(rank, j, b);

        uint8_t *recv = alloc_guarded(block * (size_t)n);
        EXPECT(ncclAlltoAll(send, recv, count, dt, comm, NULL), ncclSuccess);
        for (int j = 0; j < n; j++) srcs[j] = j, tags[j] = rank;
        check_blocks("AlltoAll", name, recv, block, n, srcs, tags);
        free(recv);

        recv = alloc_guarded(block * (size_t)n);
        EXPECT(ncclAllGather(send, recv, count, dt, comm, NULL), ncclSuccess);
        for (int j = 0; j < n; j++) srcs[j] = j, tags[j] = 0;
        check_blocks("AllGather", name, recv, block, n, srcs, tags);
        free(recv);

        int root = n - 1;
        recv = alloc_guarded(block * (size_t)n);
        EXPECT(ncclGather(send, recv, count, dt, root, comm, NULL), ncclSuccess);
        for (int j = 0; j < n; j++) srcs[j] = rank == root ? j : -1, tags[j] = 0;
        check_blocks("Gather", name, recv, block, n, srcs, tags);
        free(recv);

        recv = alloc_guarded(block);
        EXPECT(ncclScatter(send, recv, count, dt, 0, comm, NULL), ncclSuccess);
        srcs[0] = 0, tags[0] = rank;
        check_blocks("Scatter", name, recv, block, 1, srcs, tags);
        free(recv);

        recv = alloc_guarded(block);
        EXPECT(ncclBroadcast(send, recv, count, dt, 1 % n, comm, NULL), ncclSuccess);
        srcs[0] = 1 % n, tags[0] = 0;
        check_blocks("Broadcast", name, recv, block, 1, srcs, tags);
        free(recv);

        recv = alloc_guarded(block);
        EXPECT(ncclGroupStart(), ncclSuccess);
        EXPECT(ncclSend(send + (size_t)next * block, count, dt, next, comm, NULL), ncclSuccess);
        EXPECT(ncclRecv(recv, count, dt, prev, comm, NULL), ncclSuccess);
        EXPECT(ncclGroupEnd(), ncclSuccess);
        srcs[0] = prev, tags[0] = rank;
        check_blocks("Send/Recv", name, recv, block, 1, srcs, tags);
        free(recv);
        free(send);
    }
    free(srcs);
    free(tags);
}

/* ---- Point to point ------------------------------------------------------------------------ */

/* Ring shift inside a group, with the send posted first and then the receive first. */
static void test_sendrecv_ring(void)
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
            EXPECT(ncclGroupStart(), ncclSuccess);
            if (recv_first) EXPECT(ncclRecv(recv, count, ncclInt64, prev, comm, NULL), ncclSuccess);
            EXPECT(ncclSend(send, count, ncclInt64, next, comm, NULL), ncclSuccess);
            if (!recv_first)
                EXPECT(ncclRecv(recv, count, ncclInt64, prev, comm, NULL), ncclSuccess);
            EXPECT(ncclGroupEnd(), ncclSuccess);
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

static void test_sendrecv_all_pairs(void)
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
    EXPECT(ncclGroupStart(), ncclSuccess);
    for (int p = n - 1; p >= 0; p--)
        for (int m = 0; m < 2; m++)
            EXPECT(ncclRecv(recvs[p * 2 + m], pair_count(p, rank, m), ncclInt64, p, comm, NULL),
                   ncclSuccess);
    for (int p = 0; p < n; p++)
        for (int m = 0; m < 2; m++)
            EXPECT(ncclSend(sends[p * 2 + m], pair_count(rank, p, m), ncclInt64, p, comm, NULL),
                   ncclSuccess);
    EXPECT(ncclGroupEnd(), ncclSuccess);
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

static void test_send_to_self(void)
{
    const size_t count = 1000;
    int64_t *send = alloc_i64(count, 0), *recv = alloc_i64(count, SENTINEL);
    for (size_t i = 0; i < count; i++) send[i] = pair_val(rank, rank, i);
    EXPECT(ncclGroupStart(), ncclSuccess);
    EXPECT(ncclSend(send, count, ncclInt64, rank, comm, NULL), ncclSuccess);
    EXPECT(ncclRecv(recv, count, ncclInt64, rank, comm, NULL), ncclSuccess);
    EXPECT(ncclGroupEnd(), ncclSuccess);
    check_i64("send to self", recv, send, count);
    free(send);
    free(recv);
}

/* ---- Groups -------------------------------------------------------------------------------- */

/* An invalid argument inside a group fails the call and the group's End; the communicator stays
 * usable. ncclGroupEnd (and SimulateEnd) without a Start is ncclInvalidUsage. */
static void test_group_errors(void)
{
    int64_t send[4] = {1, 2, 3, 4}, recv[4];
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    EXPECT(ncclGroupEnd(), ncclInvalidUsage);
    EXPECT(ncclGroupSimulateEnd(&sim), ncclInvalidUsage);

    EXPECT(ncclGroupStart(), ncclSuccess);
    EXPECT(ncclAllReduce(send, recv, 4, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    EXPECT(ncclAllReduce(send, recv, 4, (ncclDataType_t)99, ncclSum, comm, NULL),
           ncclInvalidArgument);
    EXPECT_ERROR(ncclGroupEnd());

    EXPECT(ncclGroupStart(), ncclSuccess);
    EXPECT(ncclSend(send, 4, ncclInt64, nranks, comm, NULL), ncclInvalidArgument);
    EXPECT_ERROR(ncclGroupEnd());

    EXPECT(ncclGroupStart(), ncclSuccess);
    EXPECT_ERROR(ncclAllReduce(send, recv, 4, ncclInt64, ncclSum, NULL, NULL));
    EXPECT_ERROR(ncclGroupEnd());

    /* The failed groups left nothing behind: a group and a plain call both work. */
    EXPECT(ncclGroupEnd(), ncclInvalidUsage);
    EXPECT(ncclGroupStart(), ncclSuccess);
    EXPECT(ncclGroupEnd(), ncclSuccess);
    memset(recv, 0, sizeof recv);
    EXPECT(ncclAllReduce(send, recv, 4, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    for (int i = 0; i < 4; i++)
        CHECK(recv[i] == send[i] * nranks, "AllReduce after failed groups: index %d: got %lld, "
              "want %lld", i, (long long)recv[i], (long long)(send[i] * nranks));
    ncclResult_t async = ncclInternalError;
    EXPECT(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    CHECK(async == ncclSuccess, "an argument error latched an asynchronous error %d", (int)async);
}

/* Nested groups: nothing runs before the outermost End. */
static void test_nested_groups(void)
{
    const size_t count = 8;
    int64_t *send = alloc_i64(count, 0), *recv = alloc_i64(count, SENTINEL);
    int64_t *ring = alloc_i64(count, SENTINEL), *want = alloc_i64(count, 0);
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    for (size_t i = 0; i < count; i++) send[i] = val(rank, i);

    EXPECT(ncclGroupStart(), ncclSuccess);
    EXPECT(ncclGroupStart(), ncclSuccess);
    EXPECT(ncclAllReduce(send, recv, count, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    EXPECT(ncclSend(send, count, ncclInt64, next, comm, NULL), ncclSuccess);
    EXPECT(ncclGroupEnd(), ncclSuccess);
    check_all_equal("inner ncclGroupEnd ran an operation (recvbuff changed)", recv, SENTINEL,
                    count);
    EXPECT(ncclGroupStart(), ncclSuccess);
    EXPECT(ncclRecv(ring, count, ncclInt64, prev, comm, NULL), ncclSuccess);
    EXPECT(ncclGroupEnd(), ncclSuccess);
    check_all_equal("inner ncclGroupEnd ran a receive", ring, SENTINEL, count);
    EXPECT(ncclGroupEnd(), ncclSuccess);

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
static void test_multi_comm_group(void)
{
    ncclComm_t second = make_comm(NULL);
    if (second == NULL) return;
    int64_t a = rank + 1, b = 10 * (rank + 1), a_sum = 0, b_sum = 0;
    EXPECT(ncclGroupStart(), ncclSuccess);
    if (rank % 2 == 0) {
        EXPECT(ncclAllReduce(&a, &a_sum, 1, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
        EXPECT(ncclAllReduce(&b, &b_sum, 1, ncclInt64, ncclSum, second, NULL), ncclSuccess);
    } else {
        EXPECT(ncclAllReduce(&b, &b_sum, 1, ncclInt64, ncclSum, second, NULL), ncclSuccess);
        EXPECT(ncclAllReduce(&a, &a_sum, 1, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    }
    EXPECT(ncclGroupEnd(), ncclSuccess);
    int64_t want = (int64_t)nranks * (nranks + 1) / 2;
    CHECK(a_sum == want && b_sum == 10 * want, "two communicators in one group: got %lld and "
          "%lld, want %lld and %lld", (long long)a_sum, (long long)b_sum, (long long)want,
          (long long)(10 * want));
    EXPECT(ncclCommDestroy(second), ncclSuccess);
}

/* Collectives and point to point mixed in one group on one communicator: every result as if
 * each had run alone, in issue order for the collectives. */
static void test_mixed_group(void)
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
    EXPECT(ncclGroupStart(), ncclSuccess);
    EXPECT(ncclAllReduce(send, sum, count, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    EXPECT(ncclRecv(ring, count, ncclInt64, prev, comm, NULL), ncclSuccess);
    EXPECT(ncclBroadcast(send, bcast, count, ncclInt64, nranks - 1, comm, NULL), ncclSuccess);
    EXPECT(ncclSend(send, count, ncclInt64, next, comm, NULL), ncclSuccess);
    EXPECT(ncclAlltoAll(send, a2a, count, ncclInt64, comm, NULL), ncclSuccess);
    EXPECT(ncclGather(send, gathered, count, ncclInt64, 0, comm, NULL), ncclSuccess);
    EXPECT(ncclGroupEnd(), ncclSuccess);

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

/* Many collectives aggregated in one group, each with its own buffers, operator and count. */
static void test_aggregated_group(void)
{
    enum { OPS = 64 };
    static const ncclRedOp_t ops[] = {ncclSum, ncclMax, ncclMin, ncclProd};
    int64_t *in[OPS], *out[OPS];
    EXPECT(ncclGroupStart(), ncclSuccess);
    for (int k = 0; k < OPS; k++) {
        size_t count = (size_t)(1 + k * 37);
        in[k] = alloc_i64(count, 0);
        out[k] = alloc_i64(count, SENTINEL);
        for (size_t i = 0; i < count; i++) in[k][i] = (int64_t)((rank + k + (int)i) % 3 + 1);
        EXPECT(ncclAllReduce(in[k], out[k], count, ncclInt64, ops[k % 4], comm, NULL),
               ncclSuccess);
    }
    EXPECT(ncclGroupEnd(), ncclSuccess);
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

static void test_thread_groups(void)
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
    EXPECT(ncclCommDestroy(threads[1].comm), ncclSuccess);
}

/* Each rank exchanges 8 MiB with both neighbours at once (twice NCCL_BUFFSIZE's default), which
 * completes only if all four transfers progress together. Needs 3 ranks, so that the two
 * neighbours differ. */
static void test_sendrecv_bidirectional(void)
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
    EXPECT(ncclGroupStart(), ncclSuccess);
    EXPECT(ncclSend(to_next, count, ncclInt64, next, comm, NULL), ncclSuccess);
    EXPECT(ncclSend(to_prev, count, ncclInt64, prev, comm, NULL), ncclSuccess);
    EXPECT(ncclRecv(from_next, count, ncclInt64, next, comm, NULL), ncclSuccess);
    EXPECT(ncclRecv(from_prev, count, ncclInt64, prev, comm, NULL), ncclSuccess);
    EXPECT(ncclGroupEnd(), ncclSuccess);
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
static void test_simulate_end(void)
{
    const size_t count = 1024;
    int64_t *send = alloc_i64(count, 3), *recv = alloc_i64(count, SENTINEL);
    int64_t *real = alloc_i64(count, SENTINEL);
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    EXPECT(ncclGroupStart(), ncclSuccess);
    EXPECT(ncclAllReduce(send, recv, count, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    EXPECT(ncclGroupSimulateEnd(&sim), ncclSuccess);
    CHECK(sim.estimatedTime > 0.0f, "ncclGroupSimulateEnd: estimatedTime %g, want > 0",
          (double)sim.estimatedTime);
    check_all_equal("ncclGroupSimulateEnd ran the AllReduce", recv, SENTINEL, count);
    EXPECT(ncclGroupStart(), ncclSuccess);
    EXPECT(ncclAllReduce(send, real, count, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    EXPECT(ncclGroupEnd(), ncclSuccess);
    check_all_equal("AllReduce after ncclGroupSimulateEnd", real, 3 * (int64_t)nranks, count);
    check_all_equal("the simulated AllReduce ran with the next group", recv, SENTINEL, count);
    free(send);
    free(recv);
    free(real);
}

/* count 0: every operation succeeds and touches nothing. */
static void test_count_zero(void)
{
    size_t total = (size_t)nranks;
    int64_t *send = alloc_i64(total, 5), *recv = alloc_i64(total, SENTINEL);
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    EXPECT(ncclAllReduce(send, recv, 0, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    EXPECT(ncclBroadcast(send, recv, 0, ncclInt64, 0, comm, NULL), ncclSuccess);
    EXPECT(ncclBcast(recv, 0, ncclInt64, 0, comm, NULL), ncclSuccess);
    EXPECT(ncclReduce(send, recv, 0, ncclInt64, ncclSum, 0, comm, NULL), ncclSuccess);
    EXPECT(ncclAllGather(send, recv, 0, ncclInt64, comm, NULL), ncclSuccess);
    EXPECT(ncclReduceScatter(send, recv, 0, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    EXPECT(ncclAlltoAll(send, recv, 0, ncclInt64, comm, NULL), ncclSuccess);
    EXPECT(ncclGather(send, recv, 0, ncclInt64, 0, comm, NULL), ncclSuccess);
    EXPECT(ncclScatter(send, recv, 0, ncclInt64, 0, comm, NULL), ncclSuccess);
    EXPECT(ncclGroupStart(), ncclSuccess);
    EXPECT(ncclSend(send, 0, ncclInt64, next, comm, NULL), ncclSuccess);
    EXPECT(ncclRecv(recv, 0, ncclInt64, prev, comm, NULL), ncclSuccess);
    EXPECT(ncclGroupEnd(), ncclSuccess);
    check_all_equal("count 0 changed recvbuff", recv, SENTINEL, total);
    check_all_equal("count 0 changed sendbuff", send, 5, total);
    barrier(comm);
    free(send);
    free(recv);
}

/* ---- Communicators ------------------------------------------------------------------------- */

/* Split: key = nranks - rank reverses the order; colors by parity; NOCOLOR yields NULL. */
static void test_split(void)
{
    ncclComm_t rev = NULL, half = NULL, rest = NULL;
    if (EXPECT(ncclCommSplit(comm, 7, nranks - rank, &rev, NULL), ncclSuccess) && rev != NULL) {
        int count = -1, me = -1;
        EXPECT(ncclCommCount(rev, &count), ncclSuccess);
        EXPECT(ncclCommUserRank(rev, &me), ncclSuccess);
        CHECK(count == nranks && me == nranks - 1 - rank,
              "split by reversed key: count %d rank %d, want %d and %d", count, me, nranks,
              nranks - 1 - rank);
        int64_t mine = rank, *all = alloc_i64((size_t)nranks, SENTINEL);
        EXPECT(ncclAllGather(&mine, all, 1, ncclInt64, rev, NULL), ncclSuccess);
        for (int j = 0; j < nranks; j++)
            CHECK(all[j] == nranks - 1 - j, "reversed comm's rank %d is old rank %lld, want %d",
                  j, (long long)all[j], nranks - 1 - j);
        free(all);
        EXPECT(ncclCommDestroy(rev), ncclSuccess);
    }

    if (EXPECT(ncclCommSplit(comm, rank % 2, rank, &half, NULL), ncclSuccess) && half != NULL) {
        int count = -1, me = -1;
        EXPECT(ncclCommCount(half, &count), ncclSuccess);
        EXPECT(ncclCommUserRank(half, &me), ncclSuccess);
        int want_count = (nranks - rank % 2 + 1) / 2;
        CHECK(count == want_count && me == rank / 2,
              "split by parity: count %d rank %d, want %d and %d", count, me, want_count,
              rank / 2);
        int64_t mine = rank, sum = 0, want = 0;
        for (int r = rank % 2; r < nranks; r += 2) want += r;
        EXPECT(ncclAllReduce(&mine, &sum, 1, ncclInt64, ncclSum, half, NULL), ncclSuccess);
        CHECK(sum == want, "split by parity: sum of members %lld, want %lld", (long long)sum,
              (long long)want);
        EXPECT(ncclCommDestroy(half), ncclSuccess);
    }

    rest = (ncclComm_t)(uintptr_t)1;
    int color = rank == 0 ? NCCL_SPLIT_NOCOLOR : 3;
    if (EXPECT(ncclCommSplit(comm, color, 0, &rest, NULL), ncclSuccess)) {
        if (rank == 0) {
            CHECK(rest == NULL, "NCCL_SPLIT_NOCOLOR: newcomm %p, want NULL", (void *)rest);
        } else if (rest != NULL && rest != (ncclComm_t)(uintptr_t)1) {
            int count = -1;
            EXPECT(ncclCommCount(rest, &count), ncclSuccess);
            CHECK(count == nranks - 1, "split without rank 0: count %d, want %d", count,
                  nranks - 1);
            EXPECT(ncclCommDestroy(rest), ncclSuccess);
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
    EXPECT(ncclCommDestroy(c), ncclSuccess);
    EXPECT_ERROR(ncclCommDestroy(c));
    EXPECT(ncclCommDestroy(NULL), ncclSuccess);
}

/* After ncclCommFinalize, operations fail; ncclCommDestroy still succeeds. */
static void test_use_after_finalize(void)
{
    ncclComm_t c = make_comm(NULL);
    if (c == NULL) return;
    int64_t x = 1, y = 0;
    EXPECT(ncclAllReduce(&x, &y, 1, ncclInt64, ncclSum, c, NULL), ncclSuccess);
    EXPECT(ncclCommFinalize(c), ncclSuccess);
    EXPECT_ERROR(ncclAllReduce(&x, &y, 1, ncclInt64, ncclSum, c, NULL));
    EXPECT(ncclCommFinalize(c), ncclInvalidArgument); /* NCCL rejects a second finalize */
    EXPECT(ncclCommDestroy(c), ncclSuccess);
}

/* ncclCommAbort of a healthy communicator frees it and reports success. */
static void test_abort_healthy(void)
{
    ncclComm_t c = make_comm(NULL);
    if (c == NULL) return;
    barrier(c);
    EXPECT(ncclCommAbort(c), ncclSuccess);
    EXPECT(ncclCommAbort(NULL), ncclSuccess);
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
    if (!EXPECT(ncclGetUniqueId(&id), ncclSuccess)) return;
    ncclResult_t res = ncclCommInitRankConfig(&c, nranks, id, rank, &config);
    CHECK(res == ncclSuccess || res == ncclInProgress,
          "nonblocking init returned %d (%s), want ncclSuccess or ncclInProgress", (int)res,
          ncclGetErrorString(res));
    if (c == NULL) {
        FAIL("nonblocking init returned no handle");
        return;
    }
    if (!EXPECT(wait_comm(c), ncclSuccess)) return;

    const size_t count = 5000;
    int64_t *send = alloc_i64(count, rank + 1), *recv = alloc_i64(count, SENTINEL);
    res = ncclAllReduce(send, recv, count, ncclInt64, ncclSum, c, NULL);
    CHECK(res == ncclSuccess || res == ncclInProgress, "nonblocking AllReduce returned %d (%s)",
          (int)res, ncclGetErrorString(res));
    EXPECT(wait_comm(c), ncclSuccess);
    check_all_equal("nonblocking AllReduce", recv, (int64_t)nranks * (nranks + 1) / 2, count);

    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    for (size_t i = 0; i < count; i++) recv[i] = SENTINEL;
    EXPECT(ncclGroupStart(), ncclSuccess);
    res = ncclSend(send, count, ncclInt64, next, c, NULL);
    CHECK(res == ncclSuccess, "nonblocking ncclSend in a group returned %d", (int)res);
    res = ncclRecv(recv, count, ncclInt64, prev, c, NULL);
    CHECK(res == ncclSuccess, "nonblocking ncclRecv in a group returned %d", (int)res);
    res = ncclGroupEnd();
    CHECK(res == ncclSuccess || res == ncclInProgress, "nonblocking ncclGroupEnd returned %d",
          (int)res);
    EXPECT(wait_comm(c), ncclSuccess);
    check_all_equal("nonblocking ring shift", recv, prev + 1, count);

    /* A split of a nonblocking communicator inherits nonblocking mode: the child may be handed
     * back still initialising, and is polled the same way. Parity colours, reversed keys. */
    ncclComm_t child = NULL;
    res = ncclCommSplit(c, rank % 2, nranks - rank, &child, NULL);
    CHECK(res == ncclSuccess || res == ncclInProgress, "nonblocking split returned %d (%s)",
          (int)res, ncclGetErrorString(res));
    if (child != NULL && EXPECT(wait_comm(child), ncclSuccess)) {
        int child_count = -1, child_rank = -1;
        EXPECT(ncclCommCount(child, &child_count), ncclSuccess);
        EXPECT(ncclCommUserRank(child, &child_rank), ncclSuccess);
        int want_count = (nranks - rank % 2 + 1) / 2;
        CHECK(child_count == want_count && child_rank == want_count - 1 - rank / 2,
              "nonblocking split: count %d rank %d, want %d and %d", child_count, child_rank,
              want_count, want_count - 1 - rank / 2);
        int64_t mine = rank, sum = 0, want = 0;
        for (int r = rank % 2; r < nranks; r += 2) want += r;
        res = ncclAllReduce(&mine, &sum, 1, ncclInt64, ncclSum, child, NULL);
        CHECK(res == ncclSuccess || res == ncclInProgress, "AllReduce on the child: %d",
              (int)res);
        EXPECT(wait_comm(child), ncclSuccess);
        CHECK(sum == want, "nonblocking child AllReduce: got %lld, want %lld", (long long)sum,
              (long long)want);
        res = ncclCommFinalize(child);
        CHECK(res == ncclSuccess || res == ncclInProgress, "child finalize returned %d",
              (int)res);
        EXPECT(wait_comm(child), ncclSuccess);
        EXPECT(ncclCommDestroy(child), ncclSuccess);
    } else if (child == NULL) {
        FAIL("nonblocking split returned no communicator");
    }

    res = ncclCommFinalize(c);
    CHECK(res == ncclSuccess || res == ncclInProgress, "nonblocking finalize returned %d",
          (int)res);
    EXPECT(wait_comm(c), ncclSuccess);
    EXPECT(ncclCommDestroy(c), ncclSuccess);
    free(send);
    free(recv);
}

/* ---- Driver -------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    void (*run)(void);
} tests[] = {
    {"queries", test_queries},
    {"allgather_in_place", test_allgather_in_place},
    {"reducescatter_in_place", test_reducescatter_in_place},
    {"reduce_root_only", test_reduce_root_only},
    {"avg", test_avg},
    {"broadcast_every_root", test_broadcast_every_root},
    {"alltoall", test_alltoall},
    {"gather_every_root", test_gather_every_root},
    {"scatter_every_root", test_scatter_every_root},
    {"movement_dtypes", test_movement_dtypes},
    {"sendrecv_ring", test_sendrecv_ring},
    {"sendrecv_all_pairs", test_sendrecv_all_pairs},
    {"send_to_self", test_send_to_self},
    {"group_errors", test_group_errors},
    {"nested_groups", test_nested_groups},
    {"multi_comm_group", test_multi_comm_group},
    {"mixed_group", test_mixed_group},
    {"aggregated_group", test_aggregated_group},
    {"thread_groups", test_thread_groups},
    {"sendrecv_bidirectional", test_sendrecv_bidirectional},
    {"simulate_end", test_simulate_end},
    {"count_zero", test_count_zero},
    {"destroy_twice", test_destroy_twice},
    {"use_after_finalize", test_use_after_finalize},
    {"abort_healthy", test_abort_healthy},
    {"nonblocking", test_nonblocking},
    {"split", test_split},
};

static bool selected(const char *name, int argc, char **argv)
{
    if (argc < 2) return true;
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

    int failed_tests = 0, run = 0;
    for (size_t t = 0; t < sizeof tests / sizeof tests[0]; t++) {
        if (!selected(tests[t].name, argc, argv)) continue;
        test_failures = 0;
        double t0 = now_s();
        tests[t].run();
        run++;
        if (test_failures) failed_tests++;
        printf("%s %s (rank %d of %d, %.2f s)\n", test_failures ? "FAIL" : "PASS", tests[t].name,
               rank, nranks, now_s() - t0);
    }
    if (run == 0) {
        fprintf(stderr, "no test matched; the tests are:");
        for (size_t t = 0; t < sizeof tests / sizeof tests[0]; t++)
            fprintf(stderr, " %s", tests[t].name);
        fputc('\n', stderr);
        return 2;
    }
    ncclCommDestroy(comm);
    printf("rank %d: %d of %d tests failed\n", rank, failed_tests, run);
    return failed_tests ? 1 : 0;
}
