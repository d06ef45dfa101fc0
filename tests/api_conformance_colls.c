/* API conformance, the collectives' contracts (NCCL 2.28): the in-place rule of each collective,
 * which buffers are significant at which rank (Reduce's and Gather's recvbuff at the root only,
 * Scatter's and Broadcast's sendbuff there only), ncclAvg on integers and floats, every root,
 * AlltoAll's blocks, the data-moving operations on every element width with a guard past each
 * receive buffer, and count 0. Each test runs on every rank in the order of api_conformance.c's
 * table; buffers hold int64 values or powers of two, so every expected result is exact. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_conformance_common.h"
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif
#include "nccl.h"

/* ---- In-place rules and significant buffers ------------------------------------------------ */

/* AllGather is in place iff sendbuff == recvbuff + rank * sendcount. */
void test_allgather_in_place(void)
{
    const size_t count = 5, total = count * (size_t)nranks;
    int64_t *send = alloc_i64(count, 0), *recv = alloc_i64(total, SENTINEL);
    int64_t *want = alloc_i64(total, 0);
    for (size_t i = 0; i < count; i++) send[i] = val(rank, i);
    for (int r = 0; r < nranks; r++)
        for (size_t i = 0; i < count; i++) want[(size_t)r * count + i] = val(r, i);

    CHECK_RES(ncclAllGather(send, recv, count, ncclInt64, comm, NULL), ncclSuccess);
    check_i64("AllGather out of place", recv, want, total);
    for (size_t i = 0; i < count; i++)
        CHECK(send[i] == val(rank, i), "AllGather modified sendbuff at %zu", i);

    for (size_t i = 0; i < total; i++) recv[i] = SENTINEL;
    memcpy(recv + (size_t)rank * count, send, count * sizeof *send);
    CHECK_RES(ncclAllGather(recv + (size_t)rank * count, recv, count, ncclInt64, comm, NULL),
              ncclSuccess);
    check_i64("AllGather in place", recv, want, total);
    free(send);
    free(recv);
    free(want);
}

/* ReduceScatter is in place iff recvbuff == sendbuff + rank * recvcount. */
void test_reducescatter_in_place(void)
{
    const size_t count = 6, total = count * (size_t)nranks;
    int64_t *send = alloc_i64(total, 0), *recv = alloc_i64(count, SENTINEL);
    int64_t *want = alloc_i64(count, 0);
    for (size_t k = 0; k < total; k++) send[k] = val(rank, k);
    for (size_t i = 0; i < count; i++)
        for (int r = 0; r < nranks; r++) want[i] += val(r, (size_t)rank * count + i);

    CHECK_RES(ncclReduceScatter(send, recv, count, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    check_i64("ReduceScatter out of place", recv, want, count);
    for (size_t k = 0; k < total; k++)
        CHECK(send[k] == val(rank, k), "ReduceScatter modified sendbuff at %zu", k);

    CHECK_RES(
        ncclReduceScatter(send, send + (size_t)rank * count, count, ncclInt64, ncclSum, comm, NULL),
        ncclSuccess);
    check_i64("ReduceScatter in place", send + (size_t)rank * count, want, count);
    free(send);
    free(recv);
    free(want);
}

/* Reduce: recvbuff is significant at the root only; elsewhere it must stay untouched. */
void test_reduce_root_only(void)
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
        CHECK_RES(ncclReduce(send, recv, count, ncclInt64, op, root, comm, NULL), ncclSuccess);
        for (size_t i = 0; i < count; i++) {
            int64_t want = rank != root ? SENTINEL : op == ncclSum ? sum[i] : val(nranks - 1, i);
            CHECK(recv[i] == want, "Reduce %s root %d: index %zu: got %lld, want %lld%s",
                  op == ncclSum ? "sum" : "max", root, i, (long long)recv[i], (long long)want,
                  rank != root ? " (non-root recvbuff must stay untouched)" : "");
        }
        /* In place: sendbuff == recvbuff; a non-root's buffer keeps its input. */
        int64_t *buf = alloc_i64(count, 0);
        memcpy(buf, send, count * sizeof *buf);
        CHECK_RES(ncclReduce(buf, buf, count, ncclInt64, ncclSum, root, comm, NULL), ncclSuccess);
        check_i64("Reduce in place", buf, rank == root ? sum : send, count);
        free(buf);
    }
    free(send);
    free(recv);
    free(sum);
}

/* ncclAvg: integers sum then divide, truncating toward zero; floats multiply each input by
 * 1/nranks before summing, so inputs whose sum overflows still average to a finite value. */
void test_avg(void)
{
    /* Sum n+1 (rank 0 gives 2, the others 1): the truncated quotient is 1, or -1 when negated,
     * where multiplying by 1/n in integers would give 0. */
    int32_t in32[2] = {rank == 0 ? 2 : 1, rank == 0 ? -2 : -1}, out32[2] = {0, 0};
    int64_t in64[2] = {in32[0], in32[1]}, out64[2] = {0, 0};
    int32_t want0 = nranks == 1 ? 2 : 1, want1 = -want0;
    CHECK_RES(ncclAllReduce(in32, out32, 2, ncclInt32, ncclAvg, comm, NULL), ncclSuccess);
    CHECK(out32[0] == want0 && out32[1] == want1, "avg int32: got {%d, %d}, want {%d, %d}",
          out32[0], out32[1], want0, want1);
    CHECK_RES(ncclAllReduce(in64, out64, 2, ncclInt64, ncclAvg, comm, NULL), ncclSuccess);
    CHECK(out64[0] == want0 && out64[1] == want1, "avg int64: got {%lld, %lld}, want {%d, %d}",
          (long long)out64[0], (long long)out64[1], want0, want1);

    /* 2^126 (float) and 2^1022 (double) on every rank: summed first they overflow from 4 ranks
     * up; pre-multiplied they average to themselves within rounding. */
    float f = ldexpf(1.0f, 126), f_out = 0;
    double d = ldexp(1.0, 1022), d_out = 0;
    CHECK_RES(ncclAllReduce(&f, &f_out, 1, ncclFloat32, ncclAvg, comm, NULL), ncclSuccess);
    CHECK_RES(ncclAllReduce(&d, &d_out, 1, ncclFloat64, ncclAvg, comm, NULL), ncclSuccess);
    CHECK(isfinite(f_out) && fabsf(f_out / f - 1.0f) < 1e-6f,
          "avg float32 of 2^126 on %d ranks: got %a, want 2^126 (pre-multiplied, no overflow)",
          nranks, (double)f_out);
    CHECK(isfinite(d_out) && fabs(d_out / d - 1.0) < 1e-12,
          "avg float64 of 2^1022 on %d ranks: got %a, want 2^1022", nranks, d_out);
}

/* A rank whose thread flushes subnormals (MXCSR's flush-to-zero and denormals-are-zero, which
 * torch.set_flush_denormal(True) sets) still computes IEEE sums: every rank, the even ones in
 * that mode, ends with the same exact sum of subnormal inputs (multiples of 2^-140, whose sums
 * stay below 2^-126 and on the subnormal grid). Small counts, where each rank computes the whole
 * result itself (OneShot), and a large one (Ring). */
void test_fp_mode(void)
{
#if defined(__x86_64__) || defined(__i386__)
    const size_t counts[2] = {64, 300000};
    for (int c = 0; c < 2; c++) {
        size_t n = counts[c];
        float *x = malloc(n * sizeof *x);
        if (x == NULL) {
            FAIL("fp_mode: malloc");
            return;
        }
        for (size_t i = 0; i < n; i++) x[i] = ldexpf((float)(i % 64 + 1 + (size_t)rank), -140);
        unsigned csr = _mm_getcsr();
        if (rank % 2 == 0) _mm_setcsr(csr | 0x8040u);
        CHECK_RES(ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
        bool mode_kept = _mm_getcsr() == (rank % 2 == 0 ? (csr | 0x8040u) : csr);
        _mm_setcsr(csr);
        CHECK(mode_kept, "fp_mode: the calling thread's MXCSR was not given back");
        for (size_t i = 0; i < n; i++) {
            float want = ldexpf((float)((size_t)nranks * (i % 64 + 1) +
                                        (size_t)nranks * (size_t)(nranks - 1) / 2), -140);
            if (memcmp(&x[i], &want, sizeof want) != 0) {
                FAIL("fp_mode: %zu floats, element %zu = %a, want %a (rank %d %s subnormals)",
                     n, i, (double)x[i], (double)want, rank,
                     rank % 2 == 0 ? "flushing" : "keeping");
                break;
            }
        }
        free(x);
    }
#endif
}

/* Broadcast from every root, out of place and in place, and the legacy ncclBcast. The
 * non-roots' sendbuff is not read. */
void test_broadcast_every_root(void)
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
        CHECK_RES(ncclBroadcast(send, recv, count, ncclInt64, root, comm, NULL), ncclSuccess);
        check_i64("Broadcast", recv, want, count);
        for (size_t i = 0; i < count; i++)
            CHECK(send[i] == (rank == root ? val(root, i) : val(rank + 500, i)),
                  "Broadcast root %d modified sendbuff at %zu", root, i);

        for (size_t i = 0; i < count; i++) recv[i] = rank == root ? val(root, i) : SENTINEL;
        CHECK_RES(ncclBroadcast(recv, recv, count, ncclInt64, root, comm, NULL), ncclSuccess);
        check_i64("Broadcast in place", recv, want, count);

        for (size_t i = 0; i < count; i++) recv[i] = rank == root ? val(root, i) : SENTINEL;
        CHECK_RES(ncclBcast(recv, count, ncclInt64, root, comm, NULL), ncclSuccess);
        check_i64("ncclBcast", recv, want, count);
    }
    free(send);
    free(recv);
    free(want);
}

/* AlltoAll: block j of sendbuff goes to rank j, block i of recvbuff comes from rank i. NCCL
 * does not define an in-place AlltoAll, so none is tried. */
void test_alltoall(void)
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
        CHECK_RES(ncclAlltoAll(send, recv, count, ncclInt64, comm, NULL), ncclSuccess);
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
        CHECK_RES(ncclGather(send, recv, count, ncclInt64, root, comm, NULL), ncclSuccess);
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
        CHECK_RES(ncclGather(src, recv, count, ncclInt64, root, comm, NULL), ncclSuccess);
        if (rank == root) check_i64("Gather in place at root", recv, want, total);
    }
    free(send);
    free(recv);
    free(want);
}

void test_gather_every_root(void)
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
        CHECK_RES(ncclScatter(send, recv, count, ncclInt64, root, comm, NULL), ncclSuccess);
        check_i64("Scatter", recv, want, count);
        if (rank == root)
            for (int r = 0; r < nranks; r++)
                CHECK(send[(size_t)r * count] == val(100 + r, 0),
                      "Scatter modified the root's sendbuff at block %d", r);

        if (rank == root) {
            CHECK_RES(
                ncclScatter(send, send + (size_t)root * count, count, ncclInt64, root, comm, NULL),
                ncclSuccess);
            check_i64("Scatter in place at root", send + (size_t)root * count, want, count);
        } else {
            for (size_t i = 0; i < count; i++) recv[i] = SENTINEL;
            CHECK_RES(ncclScatter(send, recv, count, ncclInt64, root, comm, NULL), ncclSuccess);
            check_i64("Scatter (root in place)", recv, want, count);
        }
    }
    free(send);
    free(recv);
    free(want);
}

void test_scatter_every_root(void)
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

void test_movement_dtypes(void)
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
        CHECK_RES(ncclAlltoAll(send, recv, count, dt, comm, NULL), ncclSuccess);
        for (int j = 0; j < n; j++) srcs[j] = j, tags[j] = rank;
        check_blocks("AlltoAll", name, recv, block, n, srcs, tags);
        free(recv);

        recv = alloc_guarded(block * (size_t)n);
        CHECK_RES(ncclAllGather(send, recv, count, dt, comm, NULL), ncclSuccess);
        for (int j = 0; j < n; j++) srcs[j] = j, tags[j] = 0;
        check_blocks("AllGather", name, recv, block, n, srcs, tags);
        free(recv);

        int root = n - 1;
        recv = alloc_guarded(block * (size_t)n);
        CHECK_RES(ncclGather(send, recv, count, dt, root, comm, NULL), ncclSuccess);
        for (int j = 0; j < n; j++) srcs[j] = rank == root ? j : -1, tags[j] = 0;
        check_blocks("Gather", name, recv, block, n, srcs, tags);
        free(recv);

        recv = alloc_guarded(block);
        CHECK_RES(ncclScatter(send, recv, count, dt, 0, comm, NULL), ncclSuccess);
        srcs[0] = 0, tags[0] = rank;
        check_blocks("Scatter", name, recv, block, 1, srcs, tags);
        free(recv);

        recv = alloc_guarded(block);
        CHECK_RES(ncclBroadcast(send, recv, count, dt, 1 % n, comm, NULL), ncclSuccess);
        srcs[0] = 1 % n, tags[0] = 0;
        check_blocks("Broadcast", name, recv, block, 1, srcs, tags);
        free(recv);

        recv = alloc_guarded(block);
        CHECK_RES(ncclGroupStart(), ncclSuccess);
        CHECK_RES(ncclSend(send + (size_t)next * block, count, dt, next, comm, NULL), ncclSuccess);
        CHECK_RES(ncclRecv(recv, count, dt, prev, comm, NULL), ncclSuccess);
        CHECK_RES(ncclGroupEnd(), ncclSuccess);
        srcs[0] = prev, tags[0] = rank;
        check_blocks("Send/Recv", name, recv, block, 1, srcs, tags);
        free(recv);
        free(send);
    }
    free(srcs);
    free(tags);
}

/* count 0: every operation succeeds and touches nothing. */
void test_count_zero(void)
{
    size_t total = (size_t)nranks;
    int64_t *send = alloc_i64(total, 5), *recv = alloc_i64(total, SENTINEL);
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    CHECK_RES(ncclAllReduce(send, recv, 0, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    CHECK_RES(ncclBroadcast(send, recv, 0, ncclInt64, 0, comm, NULL), ncclSuccess);
    CHECK_RES(ncclBcast(recv, 0, ncclInt64, 0, comm, NULL), ncclSuccess);
    CHECK_RES(ncclReduce(send, recv, 0, ncclInt64, ncclSum, 0, comm, NULL), ncclSuccess);
    CHECK_RES(ncclAllGather(send, recv, 0, ncclInt64, comm, NULL), ncclSuccess);
    CHECK_RES(ncclReduceScatter(send, recv, 0, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
    CHECK_RES(ncclAlltoAll(send, recv, 0, ncclInt64, comm, NULL), ncclSuccess);
    CHECK_RES(ncclGather(send, recv, 0, ncclInt64, 0, comm, NULL), ncclSuccess);
    CHECK_RES(ncclScatter(send, recv, 0, ncclInt64, 0, comm, NULL), ncclSuccess);
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclSend(send, 0, ncclInt64, next, comm, NULL), ncclSuccess);
    CHECK_RES(ncclRecv(recv, 0, ncclInt64, prev, comm, NULL), ncclSuccess);
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    check_all_equal("count 0 changed recvbuff", recv, SENTINEL, total);
    check_all_equal("count 0 changed sendbuff", send, 5, total);
    barrier(comm);
    free(send);
    free(recv);
}
