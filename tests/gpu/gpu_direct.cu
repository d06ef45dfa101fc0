/* The device-direct collectives (docs/cuda.md, "The device-direct path"; label cuda). Every rank
 * of a tutti-run job makes device 0 current before the communicator, so that all of them are GPU
 * ranks of one host and the communicator maps the ranks' device scratch through CUDA IPC. Run
 * with TUTTI_CUDA_DIRECT=2, so that init fails where the path cannot be set up: every AllReduce
 * below (device buffers, a CUDA stream, outside a group) then runs on the GPU, reading the
 * peers' scratch, with flags in device memory. It checks, bit for bit against the harness's
 * exact reference, compared on the device:
 *   - every dtype x op (sum, prod, max, min, avg), counts 1, 7, 1031 and 262147, in place and
 *     out of place (the send buffer must stay unchanged);
 *   - ReduceScatter (every op) and AllGather, device-direct as well, counts 1, 7, 1031 and
 *     65537 per rank, in place (NCCL's offsets) and out of place;
 *   - Broadcast, Reduce (every op), Gather, Scatter and AlltoAll, counts 1, 7, 1031 and 65537,
 *     every root in turn, in place, out of place, and with the root-only buffer in pageable
 *     host memory (NULL on the other ranks); the statistics must count each as device-direct;
 *   - Send and Recv: a ring in a group, two sends to one peer in a group, tuttiAlltoAllV with
 *     uneven counts, and alone, counts up to 65537 (several chunks of the slots), each proved
 *     device-direct by the statistics;
 *   - bursts: four AllReduces queued back to back on one stream before one synchronisation,
 *     every dtype, so that the scratch is reused while peers may still be a chunk behind;
 *   - a host-buffer AllReduce on the same communicator (the host engine, untouched);
 *   - with --windows, AllReduce, ReduceScatter and AllGather on symmetric windows instead, in
 *     memory from ncclMemAlloc, which must be device memory (run_windows);
 *   - with --abort, --dead, --third or --destroy, that streams waiting for a failed peer run out
 *     (run_failure).
 * The ctest variants force one-shot (TUTTI_CUDA_ONESHOT_BYTES large), two-shot (0), and small
 * scratch (TUTTI_CUDA_DIRECT_BYTES=65536: a 2 MiB operation goes through it in 32 chunks).
 * Without a usable GPU every rank exits 77 (skipped). */
#include <cuda_runtime.h>

#include <atomic>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <vector>

extern "C" {
#include "harness.h"
#include "device_path.h"
#include "nccl.h"
#include "tutti.h"
}

static int g_rank = -1;

#define CHECK_CUDA(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "rank %d: %s failed: %s (%s:%d)\n", g_rank, #call,                   \
                    cudaGetErrorString(e_), __FILE__, __LINE__);                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define CHECK_NCCL(call)                                                                           \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "rank %d: %s failed: %s: %s (%s:%d)\n", g_rank, #call,               \
                    ncclGetErrorString(r_), ncclGetLastError(NULL), __FILE__, __LINE__);          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

__global__ void count_mismatches(const unsigned char *a, const unsigned char *b, size_t bytes,
                                 unsigned long long *out)
{
    unsigned long long mine = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < bytes;
         i += (size_t)gridDim.x * blockDim.x)
        mine += a[i] != b[i];
    if (mine != 0) atomicAdd(out, mine);
}

struct ctx {
    ncclComm_t comm;
    int rank, nranks;
    cudaStream_t stream;
    unsigned long long *d_count;
    long long cases, failures;
};

/* Bytes where device buffer `got` differs from host image `want`. */
static unsigned long long mismatches(struct ctx *x, const void *got, const void *want,
                                     size_t bytes)
{
    void *d_want;
    CHECK_CUDA(cudaMalloc(&d_want, bytes));
    CHECK_CUDA(cudaMemcpy(d_want, want, bytes, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(x->d_count, 0, sizeof *x->d_count));
    count_mismatches<<<256, 256>>>((const unsigned char *)got, (const unsigned char *)d_want,
                                   bytes, x->d_count);
    CHECK_CUDA(cudaGetLastError());
    unsigned long long n = 0;
    CHECK_CUDA(cudaMemcpy(&n, x->d_count, sizeof n, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaFree(d_want));
    return n;
}

static th_case make_case(const struct ctx *x, int t, int op, size_t count, uint64_t seed)
{
    th_case c = {};
    c.coll = TH_ALLREDUCE;
    c.type = &th_dtypes[t];
    c.op = (ncclRedOp_t)op;
    c.count = count;
    c.rank = x->rank;
    c.nranks = x->nranks;
    c.seed = seed;
    return c;
}

static void report(struct ctx *x, const th_case *c, const char *how, unsigned long long bad)
{
    x->cases++;
    if (bad == 0) return;
    x->failures++;
    fprintf(stderr, "rank %d: FAIL %s %s %s count %zu %s: %llu bytes differ\n", x->rank,
            th_coll_name(c->coll), c->type->name, th_op_name(c->op), c->count, how, bad);
}

static void run_case(struct ctx *x, const th_case *c, bool inplace)
{
    size_t bytes = c->count * c->type->bytes;
    std::vector<unsigned char> send_img(bytes), want(bytes);
    th_fill_send(c, send_img.data());
    th_fill_expect(c, want.data(), 0, c->count);
    void *s, *r;
    CHECK_CUDA(cudaMalloc(&s, bytes));
    CHECK_CUDA(cudaMemcpy(s, send_img.data(), bytes, cudaMemcpyHostToDevice));
    if (inplace) {
        r = s;
    } else {
        std::vector<unsigned char> junk(bytes);
        th_fill_pattern(junk.data(), bytes, (uint32_t)c->seed + 5);
        CHECK_CUDA(cudaMalloc(&r, bytes));
        CHECK_CUDA(cudaMemcpy(r, junk.data(), bytes, cudaMemcpyHostToDevice));
    }
    CHECK_CUDA(cudaDeviceSynchronize()); /* the fills ran on the legacy stream */
    CHECK_NCCL(ncclAllReduce(s, r, c->count, c->type->dtype, c->op, x->comm, x->stream));
    CHECK_CUDA(cudaStreamSynchronize(x->stream));
    unsigned long long bad = mismatches(x, r, want.data(), bytes);
    if (!inplace) bad += mismatches(x, s, send_img.data(), bytes);
    report(x, c, inplace ? "in place" : "out of place", bad);
    CHECK_CUDA(cudaFree(s));
    if (!inplace) CHECK_CUDA(cudaFree(r));
}

/* ReduceScatter or AllGather (device-direct too), in place at NCCL's offsets or not: in fresh
 * device buffers, or (pool not NULL) inside a registered window at `shift` bytes, the output
 * (out of place) half-way into it. */
static void run_block_case_in(struct ctx *x, const th_case *c, bool inplace, unsigned char *pool,
                              size_t pool_bytes, size_t shift)
{
    size_t elt = c->type->bytes, send_n = th_send_count(c), recv_n = th_recv_count(c);
    size_t body = (send_n > recv_n ? send_n : recv_n) * elt;
    std::vector<unsigned char> img(send_n * elt), want(recv_n * elt), pattern(body);
    th_fill_send(c, img.data());
    th_fill_expect(c, want.data(), 0, recv_n);
    unsigned char *buf = pool != NULL ? pool + shift : NULL, *other = NULL, *s, *r;
    if (pool == NULL) CHECK_CUDA(cudaMalloc(&buf, body));
    if (inplace) {
        size_t off = th_inplace_offset(c) * elt;
        bool send_inside = c->coll == TH_ALLGATHER;
        th_fill_pattern(pattern.data(), body, (uint32_t)c->seed + 2);
        CHECK_CUDA(cudaMemcpy(buf, pattern.data(), body, cudaMemcpyHostToDevice));
        s = send_inside ? buf + off : buf;
        r = send_inside ? buf : buf + off;
    } else {
        th_fill_pattern(pattern.data(), recv_n * elt, (uint32_t)c->seed + 5);
        if (pool != NULL)
            other = pool + pool_bytes / 2 + shift;
        else
            CHECK_CUDA(cudaMalloc(&other, recv_n * elt));
        CHECK_CUDA(cudaMemcpy(other, pattern.data(), recv_n * elt, cudaMemcpyHostToDevice));
        s = buf;
        r = other;
    }
    CHECK_CUDA(cudaMemcpy(s, img.data(), send_n * elt, cudaMemcpyHostToDevice));
    ncclDataType_t dt = c->type->dtype;
    CHECK_CUDA(cudaDeviceSynchronize()); /* the fills ran on the legacy stream */
    if (c->coll == TH_REDUCESCATTER)
        CHECK_NCCL(ncclReduceScatter(s, r, c->count, dt, c->op, x->comm, x->stream));
    else
        CHECK_NCCL(ncclAllGather(s, r, c->count, dt, x->comm, x->stream));
    CHECK_CUDA(cudaStreamSynchronize(x->stream));
    unsigned long long bad = mismatches(x, r, want.data(), recv_n * elt);
    if (!inplace) bad += mismatches(x, s, img.data(), send_n * elt);
    const char *how = pool != NULL ? (inplace ? "window, in place" : "window, out of place")
                                   : (inplace ? "in place" : "out of place");
    report(x, c, how, bad);
    if (pool == NULL) {
        CHECK_CUDA(cudaFree(buf));
        if (other != NULL) CHECK_CUDA(cudaFree(other));
    }
}

static void run_block_case(struct ctx *x, const th_case *c, bool inplace)
{
    run_block_case_in(x, c, inplace, NULL, 0, 0);
}

/* Four AllReduces queued back to back, then one synchronisation. */
static void run_burst(struct ctx *x, int t, size_t count)
{
    const int k = 4;
    th_case c[k];
    void *s[k], *r[k];
    std::vector<unsigned char> want[k];
    size_t bytes = count * th_dtypes[t].bytes;
    for (int i = 0; i < k; i++) {
        c[i] = make_case(x, t, ncclSum, count, 7777u + 131u * t + i);
        std::vector<unsigned char> img(bytes);
        th_fill_send(&c[i], img.data());
        want[i].resize(bytes);
        th_fill_expect(&c[i], want[i].data(), 0, count);
        CHECK_CUDA(cudaMalloc(&s[i], bytes));
        CHECK_CUDA(cudaMalloc(&r[i], bytes));
        CHECK_CUDA(cudaMemcpy(s[i], img.data(), bytes, cudaMemcpyHostToDevice));
    }
    CHECK_CUDA(cudaDeviceSynchronize()); /* the fills ran on the legacy stream */
    for (int i = 0; i < k; i++)
        CHECK_NCCL(ncclAllReduce(s[i], r[i], count, th_dtypes[t].dtype, ncclSum, x->comm,
                                 x->stream));
    CHECK_CUDA(cudaStreamSynchronize(x->stream));
    for (int i = 0; i < k; i++) {
        report(x, &c[i], "burst of 4", mismatches(x, r[i], want[i].data(), bytes));
        CHECK_CUDA(cudaFree(s[i]));
        CHECK_CUDA(cudaFree(r[i]));
    }
}

/* Broadcast, Reduce, Gather, Scatter and AlltoAll, device-direct too: out of place (how 0), in
 * place at NCCL's offsets (how 1; not AlltoAll, which NCCL refuses), and out of place with the
 * buffer only the root passes in pageable host memory at the root and NULL elsewhere (how 2).
 * The whole receive side is compared: a rank that receives nothing keeps its buffer. */
static long long rooted_issued[TH_NUM_ALL_COLLS];
static long long p2p_sends, p2p_recvs; /* run_p2p's */

static ncclResult_t issue_rooted(struct ctx *x, const th_case *c, const void *s, void *r)
{
    ncclDataType_t dt = c->type->dtype;
    switch (c->coll) {
    case TH_BROADCAST: return ncclBroadcast(s, r, c->count, dt, c->root, x->comm, x->stream);
    case TH_REDUCE: return ncclReduce(s, r, c->count, dt, c->op, c->root, x->comm, x->stream);
    case TH_GATHER: return ncclGather(s, r, c->count, dt, c->root, x->comm, x->stream);
    case TH_SCATTER: return ncclScatter(s, r, c->count, dt, c->root, x->comm, x->stream);
    default: return ncclAlltoAll(s, r, c->count, dt, x->comm, x->stream);
    }
}

static void run_rooted_case(struct ctx *x, const th_case *c, int how)
{
    size_t elt = c->type->bytes, send_n = th_send_count(c), recv_n = th_recv_count(c);
    size_t sb = send_n * elt, rb = recv_n * elt, body_bytes = sb > rb ? sb : rb;
    bool root = x->rank == c->root;
    bool s_host = how == 2 && (c->coll == TH_BROADCAST || c->coll == TH_SCATTER);
    bool r_host = how == 2 && (c->coll == TH_REDUCE || c->coll == TH_GATHER);
    std::vector<unsigned char> img(sb), want(rb);
    th_fill_send(c, img.data());
    bool expect = th_fill_expect(c, want.data(), 0, recv_n);
    unsigned char *s = NULL, *r = NULL, *body = NULL;
    std::vector<unsigned char> after; /* the receive side's image afterwards */
    if (how == 1) {
        size_t off = th_inplace_offset(c) * elt;
        after.resize(body_bytes);
        th_fill_pattern(after.data(), body_bytes, (uint32_t)c->seed + 2);
        size_t s_off = c->coll == TH_GATHER ? off : 0, r_off = c->coll == TH_GATHER ? 0 : off;
        memcpy(after.data() + s_off, img.data(), sb);
        CHECK_CUDA(cudaMalloc(&body, body_bytes));
        CHECK_CUDA(cudaMemcpy(body, after.data(), body_bytes, cudaMemcpyHostToDevice));
        s = body + s_off;
        r = body + r_off;
        if (expect) memcpy(after.data() + r_off, want.data(), rb);
    } else {
        if (s_host && root) s = (unsigned char *)malloc(sb);
        else if (!s_host) CHECK_CUDA(cudaMalloc(&s, sb));
        if (r_host && root) r = (unsigned char *)malloc(rb);
        else if (!r_host) CHECK_CUDA(cudaMalloc(&r, rb));
        if (s != NULL) CHECK_CUDA(cudaMemcpy(s, img.data(), sb, cudaMemcpyDefault));
        if (r != NULL) {
            after.resize(rb);
            th_fill_pattern(after.data(), rb, (uint32_t)c->seed + 5);
            CHECK_CUDA(cudaMemcpy(r, after.data(), rb, cudaMemcpyDefault));
            if (expect) after = want;
        }
    }
    CHECK_CUDA(cudaDeviceSynchronize()); /* the fills ran on the legacy stream */
    CHECK_NCCL(issue_rooted(x, c, s, r));
    rooted_issued[c->coll]++;
    CHECK_CUDA(cudaStreamSynchronize(x->stream));
    static const char *const hows[] = {"out of place", "in place", "root-only buffer on the host"};
    unsigned long long bad = 0;
    unsigned char *whole = how == 1 ? body : r;
    if (whole != NULL && (how == 1 ? false : r_host)) {
        bad += memcmp(whole, after.data(), after.size()) != 0; /* host memory: compare here */
    } else if (whole != NULL) {
        bad += mismatches(x, whole, after.data(), after.size());
    }
    if (how != 1 && s != NULL) {
        if (s_host) bad += memcmp(s, img.data(), sb) != 0;
        else bad += mismatches(x, s, img.data(), sb);
    }
    report(x, c, hows[how], bad);
    if (body != NULL) CHECK_CUDA(cudaFree(body));
    if (how != 1 && s != NULL) {
        if (s_host) free(s);
        else CHECK_CUDA(cudaFree(s));
    }
    if (how != 1 && r != NULL) {
        if (r_host) free(r);
        else CHECK_CUDA(cudaFree(r));
    }
}

static void run_rooted(struct ctx *x)
{
    static const th_coll colls[] = {TH_BROADCAST, TH_REDUCE, TH_GATHER, TH_SCATTER, TH_ALLTOALL};
    static const size_t counts[] = {1, 7, 1031, 65537};
    for (int t = 0; t < TH_NUM_DTYPES; t++)
        for (size_t i = 0; i < sizeof colls / sizeof colls[0]; i++)
            for (int op = 0; op < (colls[i] == TH_REDUCE ? TH_NUM_OPS : 1); op++)
                for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
                    th_case c = make_case(x, t, op, counts[k],
                                          5003u * t + 211u * i + 41u * op + k);
                    c.coll = colls[i];
                    c.root = (int)((k + (size_t)t) % (size_t)x->nranks);
                    for (int how = 0; how < 3; how++)
                        if (how != 1 || c.coll != TH_ALLTOALL) run_rooted_case(x, &c, how);
                }
}

/* TUTTI_STATS=1: every rooted collective, AlltoAll, Send and Recv that run_rooted and run_p2p
 * issued must have run device-direct (algorithm "Device"). */
static void check_device_path(struct ctx *x)
{
    const struct { const char *name; long long issued; } ops[] = {
        {"Broadcast", rooted_issued[TH_BROADCAST]}, {"Reduce", rooted_issued[TH_REDUCE]},
        {"Gather", rooted_issued[TH_GATHER]},       {"Scatter", rooted_issued[TH_SCATTER]},
        {"AlltoAll", rooted_issued[TH_ALLTOALL]},   {"Send", p2p_sends},
        {"Recv", p2p_recvs},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        long long got = device_path_ops(x->comm, ops[i].name);
        x->cases++;
        if (got != ops[i].issued) {
            x->failures++;
            fprintf(stderr, "rank %d: FAIL %s: %lld operations counted device-direct, %lld "
                            "issued\n", x->rank, ops[i].name, got, ops[i].issued);
        }
    }
}

/* Send and Recv on device buffers, device-direct (per-pair slots and flags): a ring in a group,
 * two sends to the same peer in one group matched in order, tuttiAlltoAllV with uneven counts,
 * and alone, one direction at a time; counts up to 65537 take several chunks of a 64 KiB
 * scratch's slots. Each element is a function of (sender, receiver, operation, index). */
/* A device buffer of `count` words: sender `from`'s data for `to`, or (from < 0) a pattern. */
static uint32_t *p2p_buffer(size_t count, int from, int to, int op)
{
    std::vector<uint32_t> h(count + 1);
    for (size_t i = 0; i < count; i++)
        h[i] = from < 0 ? 0xdeadbeefu : device_path_word(from, to, op, i);
    uint32_t *d;
    CHECK_CUDA(cudaMalloc(&d, (count + 1) * 4));
    CHECK_CUDA(cudaMemcpy(d, h.data(), (count + 1) * 4, cudaMemcpyHostToDevice));
    return d;
}

static unsigned long long p2p_wrong(struct ctx *x, const uint32_t *got, size_t count, int from,
                                    int op)
{
    std::vector<uint32_t> want(count);
    for (size_t i = 0; i < count; i++) want[i] = device_path_word(from, x->rank, op, i);
    return mismatches(x, got, want.data(), count * 4);
}

static void p2p_report(struct ctx *x, const char *how, unsigned long long bad, int from,
                       size_t count)
{
    x->cases++;
    if (bad == 0) return;
    x->failures++;
    fprintf(stderr, "rank %d: FAIL %s from rank %d, %zu elements: %llu bytes differ\n", x->rank,
            how, from, count, bad);
}

static void run_p2p(struct ctx *x)
{
    int n = x->nranks, me = x->rank, next = (me + 1) % n, prev = (me + n - 1) % n;
    cudaStream_t st = x->stream;
    static const size_t counts[] = {1, 7, 1031, 65537};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        size_t c = counts[k];
        uint32_t *s = p2p_buffer(c, me, next, 1), *r = p2p_buffer(c, -1, 0, 0);
        CHECK_CUDA(cudaDeviceSynchronize()); /* the fills ran on the legacy stream */
        CHECK_NCCL(ncclGroupStart());
        CHECK_NCCL(ncclSend(s, c, ncclUint32, next, x->comm, st));
        CHECK_NCCL(ncclRecv(r, c, ncclUint32, prev, x->comm, st));
        CHECK_NCCL(ncclGroupEnd());
        p2p_sends++, p2p_recvs++;
        CHECK_CUDA(cudaStreamSynchronize(st));
        p2p_report(x, "ring in a group", p2p_wrong(x, r, c, prev, 1), prev, c);
        CHECK_CUDA(cudaFree(s));
        CHECK_CUDA(cudaFree(r));
        uint32_t *s1 = p2p_buffer(c, me, next, 2), *s2 = p2p_buffer(c + 3, me, next, 3);
        uint32_t *r1 = p2p_buffer(c, -1, 0, 0), *r2 = p2p_buffer(c + 3, -1, 0, 0);
        CHECK_CUDA(cudaDeviceSynchronize());
        CHECK_NCCL(ncclGroupStart());
        CHECK_NCCL(ncclRecv(r1, c, ncclUint32, prev, x->comm, st));
        CHECK_NCCL(ncclSend(s1, c, ncclUint32, next, x->comm, st));
        CHECK_NCCL(ncclSend(s2, c + 3, ncclUint32, next, x->comm, st));
        CHECK_NCCL(ncclRecv(r2, c + 3, ncclUint32, prev, x->comm, st));
        CHECK_NCCL(ncclGroupEnd());
        p2p_sends += 2, p2p_recvs += 2;
        CHECK_CUDA(cudaStreamSynchronize(st));
        p2p_report(x, "first of two in a group", p2p_wrong(x, r1, c, prev, 2), prev, c);
        p2p_report(x, "second of two in a group", p2p_wrong(x, r2, c + 3, prev, 3), prev, c + 3);
        CHECK_CUDA(cudaFree(s1));
        CHECK_CUDA(cudaFree(s2));
        CHECK_CUDA(cudaFree(r1));
        CHECK_CUDA(cudaFree(r2));
        /* tuttiAlltoAllV: rank a sends c + a + 2b elements to rank b. */
        std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
        size_t stot = 0, rtot = 0;
        for (int p = 0; p < n; p++) {
            sc[p] = c + (size_t)me + 2 * (size_t)p, sd[p] = stot, stot += sc[p];
            rc[p] = c + (size_t)p + 2 * (size_t)me, rd[p] = rtot, rtot += rc[p];
        }
        std::vector<uint32_t> hv(stot);
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < sc[p]; i++) hv[sd[p] + i] = device_path_word(me, p, 4, i);
        uint32_t *sv, *rv;
        CHECK_CUDA(cudaMalloc(&sv, stot * 4));
        CHECK_CUDA(cudaMalloc(&rv, rtot * 4));
        CHECK_CUDA(cudaMemcpy(sv, hv.data(), stot * 4, cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemset(rv, 0xa5, rtot * 4));
        CHECK_CUDA(cudaDeviceSynchronize());
        CHECK_NCCL(tuttiAlltoAllV(sv, sc.data(), sd.data(), rv, rc.data(), rd.data(), ncclUint32,
                                  x->comm, st));
        p2p_sends += n, p2p_recvs += n;
        CHECK_CUDA(cudaStreamSynchronize(st));
        for (int p = 0; p < n; p++)
            p2p_report(x, "tuttiAlltoAllV", p2p_wrong(x, rv + rd[p], rc[p], p, 4), p, rc[p]);
        CHECK_CUDA(cudaFree(sv));
        CHECK_CUDA(cudaFree(rv));
        /* Alone, outside a group: rank 0 to every other rank in turn (one check per rank). */
        unsigned long long alone_bad = 0;
        for (int p = 1; p < n; p++) {
            if (me != 0 && me != p) continue;
            uint32_t *b = me == 0 ? p2p_buffer(c, 0, p, 5) : p2p_buffer(c, -1, 0, 0);
            CHECK_CUDA(cudaDeviceSynchronize());
            if (me == 0) {
                CHECK_NCCL(ncclSend(b, c, ncclUint32, p, x->comm, st));
                p2p_sends++;
            } else {
                CHECK_NCCL(ncclRecv(b, c, ncclUint32, 0, x->comm, st));
                p2p_recvs++;
            }
            CHECK_CUDA(cudaStreamSynchronize(st));
            if (me == p) alone_bad += p2p_wrong(x, b, c, 0, 5);
            CHECK_CUDA(cudaFree(b));
        }
        p2p_report(x, "Recv alone", alone_bad, 0, c);
    }
}

/* Symmetric windows (--windows): AllReduce on buffers inside a window every rank registered
 * reads and writes the peers' windows in place (docs/cuda.md, "Symmetric windows"). Every dtype
 * x op, in place and out of place, at offsets every rank uses alike (odd counts one element in:
 * not 16-byte aligned, the kernels' element-wise path), a scratch AllReduce on plain buffers in
 * between (one flag sequence for both), and a burst of four queued before one synchronisation. */
static void run_windows(struct ctx *x)
{
    const size_t pool_bytes = 8u << 20;
    /* From ncclMemAlloc, which gives device memory on the current device, as NCCL's does. */
    unsigned char *pool = NULL;
    CHECK_NCCL(ncclMemAlloc((void **)&pool, pool_bytes));
    cudaPointerAttributes attr;
    CHECK_CUDA(cudaPointerGetAttributes(&attr, pool));
    if (attr.type != cudaMemoryTypeDevice) {
        fprintf(stderr, "rank %d: ncclMemAlloc gave memory of type %d, not device memory\n",
                x->rank, (int)attr.type);
        exit(1);
    }
    ncclWindow_t win;
    CHECK_NCCL(ncclCommWindowRegister(x->comm, pool, pool_bytes, &win, NCCL_WIN_COLL_SYMMETRIC));
    static const size_t counts[] = {1, 7, 1031, 262147};
    for (int t = 0; t < TH_NUM_DTYPES; t++)
        for (int op = 0; op < TH_NUM_OPS; op++)
            for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    th_case c = make_case(x, t, op, counts[k], 5003u * t + 41u * op + 7u * k +
                                                                   (unsigned)inplace);
                    size_t elt = c.type->bytes, bytes = c.count * elt;
                    unsigned char *s = pool + (k % 2) * elt;
                    unsigned char *r = inplace ? s : pool + pool_bytes / 2 + (k % 2) * elt;
                    std::vector<unsigned char> img(bytes), want(bytes), junk(bytes);
                    th_fill_send(&c, img.data());
                    th_fill_expect(&c, want.data(), 0, c.count);
                    CHECK_CUDA(cudaMemcpy(s, img.data(), bytes, cudaMemcpyHostToDevice));
                    if (!inplace) {
                        th_fill_pattern(junk.data(), bytes, (uint32_t)c.seed + 5);
                        CHECK_CUDA(cudaMemcpy(r, junk.data(), bytes, cudaMemcpyHostToDevice));
                    }
                    CHECK_CUDA(cudaDeviceSynchronize()); /* the fills ran on the legacy stream */
                    CHECK_NCCL(ncclAllReduce(s, r, c.count, c.type->dtype, c.op, x->comm,
                                             x->stream));
                    CHECK_CUDA(cudaStreamSynchronize(x->stream));
                    unsigned long long bad = mismatches(x, r, want.data(), bytes);
                    if (!inplace) bad += mismatches(x, s, img.data(), bytes);
                    report(x, &c, inplace ? "window, in place" : "window, out of place", bad);
                    if (k == 2 && op == 0 && inplace == 0) run_case(x, &c, false);
                }
    /* ReduceScatter (every op) and AllGather on the window, in place and not, some of them not
     * 16-byte aligned. */
    static const size_t block_counts[] = {1, 7, 1031, 65537};
    for (int t = 0; t < TH_NUM_DTYPES; t++)
        for (int op = 0; op < TH_NUM_OPS; op++)
            for (size_t k = 0; k < sizeof block_counts / sizeof block_counts[0]; k++)
                for (int coll = 0; coll < 2; coll++) {
                    if (coll == 1 && op > 0) continue; /* AllGather has no op */
                    th_case c = make_case(x, t, op, block_counts[k], 6007u * t + 43u * op + k);
                    c.coll = coll == 0 ? TH_REDUCESCATTER : TH_ALLGATHER;
                    size_t shift = (k % 2) * c.type->bytes;
                    run_block_case_in(x, &c, false, pool, pool_bytes, shift);
                    run_block_case_in(x, &c, true, pool, pool_bytes, shift);
                }
    const int K = 4;
    const size_t count = 262147, bytes = count * 4;
    th_case c[K];
    std::vector<unsigned char> want[K];
    for (int i = 0; i < K; i++) {
        c[i] = make_case(x, 7 /* float32 */, ncclSum, count, 8101u + i);
        std::vector<unsigned char> img(bytes);
        th_fill_send(&c[i], img.data());
        want[i].resize(bytes);
        th_fill_expect(&c[i], want[i].data(), 0, count);
        CHECK_CUDA(cudaMemcpy(pool + i * bytes, img.data(), bytes, cudaMemcpyHostToDevice));
    }
    CHECK_CUDA(cudaDeviceSynchronize());
    for (int i = 0; i < K; i++)
        CHECK_NCCL(ncclAllReduce(pool + i * bytes, pool + i * bytes, count, ncclFloat32, ncclSum,
                                 x->comm, x->stream));
    CHECK_CUDA(cudaStreamSynchronize(x->stream));
    for (int i = 0; i < K; i++)
        report(x, &c[i], "window burst of 4", mismatches(x, pool + i * bytes, want[i].data(), bytes));
    CHECK_NCCL(ncclCommWindowDeregister(x->comm, win));
    CHECK_NCCL(ncclMemFree(pool));
}

/* Failure on the device-direct path, with real CUDA (fake_direct's run_failure checks the same
 * over the stand-in driver; docs/cuda.md, "When a peer fails"). A stream waiting inside a
 * kernel for a peer's flag must run out:
 * --abort, 2 ranks: rank 1 takes no part (a stuck peer); rank 0 queues an AllReduce, a Send and
 * a Recv with rank 1, and another thread aborts the communicator after 300 ms.
 * --dead, n ranks: the last rank exits without a word; the survivors' device watchdog must fail
 * the communicator and release their streams by itself.
 * --third, 3 ranks: rank 2 takes no part, rank 0 aborts, rank 1 never does: rank 0's release
 * frees rank 1's stream, and rank 1 must learn that its result is not valid.
 * --destroy, n ranks: the last rank exits; the others call ncclCommDestroy at once, which must
 * let the watchdog release their streams rather than return with them waiting.
 * Survivors that did not abort must see ncclRemoteError and have the next operation refused. */
static ncclComm_t abort_comm;
static ncclResult_t abort_rc = ncclInternalError;
static void *abort_later(void *)
{
    usleep(300000);
    fprintf(stderr, "gpu_direct: rank %d: another thread aborts\n", g_rank);
    abort_rc = ncclCommAbort(abort_comm);
    fprintf(stderr, "gpu_direct: rank %d: the abort returned %s\n", g_rank,
            ncclGetErrorString(abort_rc));
    return NULL;
}

static std::atomic<const char *> stage{"started"}; /* read by the sentinel's thread */

/* A failure test that has not ended after 8 s shows where each of its threads waits (its
 * name, the function of the operating system's kernel it sleeps in, its system call) and
 * exits, so that the report says more than tutti-run's time-out. */
static void *sentinel(void *)
{
    sleep(8);
    fprintf(stderr, "gpu_direct: rank %d still running after 8 s (last: %s); its threads:\n",
            g_rank, stage.load());
    char cmd[160];
    snprintf(cmd, sizeof cmd, "cd /proc/%d/task && for t in *; do echo \"  $t $(cat $t/comm) "
             "$(cat $t/wchan) syscall $(cut -d' ' -f1 $t/syscall)\"; done >&2", (int)getpid());
    if (system(cmd) != 0) fprintf(stderr, "gpu_direct: cannot list the threads\n");
    _exit(3);
    return NULL;
}

static struct timespec g_t0; /* when run_failure began */
static double since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}
#define STAGE(what)                                                                                \
    (stage = (what), fprintf(stderr, "gpu_direct: rank %d at %.3f s: %s\n", g_rank,              \
                             since(&g_t0), stage.load()))

static int run_failure(struct ctx *x, int mode)
{
    int idle = fail_idle_rank(mode, x->nranks, "gpu_direct");
    if (idle < 0) return 1;
    clock_gettime(CLOCK_MONOTONIC, &g_t0);
    pthread_t watch;
    if (pthread_create(&watch, NULL, sentinel, NULL) != 0) exit(1);
    if (x->rank == idle) {
        if (fail_exits(mode)) _exit(0); /* no destroy, no goodbye: the process is gone */
        sleep(3);
        STAGE("the idle rank aborts");
        CHECK_NCCL(ncclCommAbort(x->comm));
        STAGE("the idle rank aborted");
        return 0;
    }
    bool aborts = x->rank == 0 && (mode == FAIL_ABORT || mode == FAIL_THIRD);
    size_t count = 70001, bytes = count * 4;
    float *s, *r;
    CHECK_CUDA(cudaMalloc(&s, bytes));
    CHECK_CUDA(cudaMalloc(&r, bytes));
    CHECK_CUDA(cudaMemset(s, 0, bytes));
    CHECK_NCCL(ncclAllReduce(s, r, count, ncclFloat32, ncclSum, x->comm, x->stream));
    if (mode == FAIL_ABORT) {
        CHECK_NCCL(ncclSend(s, count, ncclFloat32, 1, x->comm, x->stream));
        CHECK_NCCL(ncclRecv(r, count, ncclFloat32, 1, x->comm, x->stream));
    }
    abort_comm = x->comm;
    if (mode == FAIL_DESTROY) {
        /* ncclCommDestroy at once, before the watchdog could have looked: it must let the
         * watchdog see the dead peer and release the stream, not return with it waiting. */
        STAGE("queued; destroying");
        ncclResult_t rc = ncclCommDestroy(x->comm);
        STAGE("destroyed; synchronizing the stream");
        cudaError_t sync = cudaStreamSynchronize(x->stream);
        double secs = since(&g_t0);
        bool ok = secs < 8.0 && sync == cudaSuccess;
        printf("gpu_direct: rank %d: ncclCommDestroy (%s) and the stream's end (%s) %.3f s "
               "after the work was queued, rank %d dead: %s\n", x->rank,
               ncclGetErrorString(rc), cudaGetErrorString(sync), secs, idle,
               ok ? "passed" : "FAILED");
        cudaFree(s);
        cudaFree(r);
        return ok ? 0 : 1;
    }
    STAGE("queued; synchronizing the stream");
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t th;
    if (aborts && pthread_create(&th, NULL, abort_later, NULL) != 0) exit(1);
    cudaError_t sync = cudaStreamSynchronize(x->stream);
    double secs = since(&t0);
    STAGE("the stream ran out");
    bool ok = secs < 10.0 && sync == cudaSuccess;
    if (aborts) {
        pthread_join(th, NULL);
        STAGE("the abort returned");
        ok = ok && abort_rc == ncclSuccess && secs >= 0.3;
        printf("gpu_direct: rank %d's stream ran out %.3f s after the work was queued (%s; it "
               "aborted at 0.3 s: %s): %s\n", x->rank, secs, cudaGetErrorString(sync),
               ncclGetErrorString(abort_rc), ok ? "passed" : "FAILED");
    } else {
        ncclResult_t async = ncclSuccess, next = ncclSuccess;
        if (mode == FAIL_THIRD) {
            usleep(1500000); /* the watchdog looks every 0.1 s */
            next = ncclAllReduce(s, r, count, ncclFloat32, ncclSum, x->comm, x->stream);
        }
        CHECK_NCCL(ncclCommGetAsyncError(x->comm, &async));
        if (mode != FAIL_THIRD)
            next = ncclAllReduce(s, r, count, ncclFloat32, ncclSum, x->comm, x->stream);
        ok = ok && async == ncclRemoteError && next != ncclSuccess;
        printf("gpu_direct: rank %d's stream ran out %.3f s after the work was queued (%s), "
               "rank %d %s; ncclCommGetAsyncError: %s; the next AllReduce: %s: %s\n", x->rank,
               secs, cudaGetErrorString(sync), mode == FAIL_DEAD ? idle : 0,
               mode == FAIL_DEAD ? "dead" : "aborted", ncclGetErrorString(async),
               ncclGetErrorString(next), ok ? "passed" : "FAILED");
        STAGE("aborting");
        struct timespec a0;
        clock_gettime(CLOCK_MONOTONIC, &a0);
        CHECK_NCCL(ncclCommAbort(x->comm));
        double abort_secs = since(&a0);
        STAGE("aborted");
        if (abort_secs > 5.0) { /* it must not wait for a peer that never comes */
            printf("gpu_direct: rank %d: ncclCommAbort took %.2f s: FAILED\n", x->rank,
                   abort_secs);
            ok = false;
        }
    }
    /* The CUDA context must still work after the release. */
    cudaError_t after = cudaMemset(r, 0, bytes);
    if (after == cudaSuccess) after = cudaDeviceSynchronize();
    if (after != cudaSuccess) {
        printf("gpu_direct: rank %d: CUDA after the release: %s: FAILED\n", x->rank,
               cudaGetErrorString(after));
        ok = false;
    }
    cudaFree(s);
    cudaFree(r);
    STAGE("done");
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    int fail_mode = fail_mode_of(argc, argv);
    bool windows = argc > 1 && strcmp(argv[1], "--windows") == 0;
    /* --allreduce: the AllReduce cases and bursts alone (the ring, under NCCL_ALGO=Ring). */
    bool allreduce_only = argc > 1 && strcmp(argv[1], "--allreduce") == 0;
    bool full = !windows && !allreduce_only;
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP: no usable CUDA device (%s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    /* Device 0 current before the communicator: every rank is a GPU rank of this host. */
    CHECK_CUDA(cudaSetDevice(0));
    CHECK_CUDA(cudaFree(0)); /* the primary context exists now */
    setvbuf(stdout, NULL, _IOLBF, 0); /* a hang must not swallow what was printed */
    struct ctx x = {};
    setenv("TUTTI_STATS", "1", 0); /* run_rooted reads which path ran */
    CHECK_NCCL(tuttiCommInitFromEnv(&x.comm));
    CHECK_NCCL(ncclCommUserRank(x.comm, &x.rank));
    CHECK_NCCL(ncclCommCount(x.comm, &x.nranks));
    g_rank = x.rank;
    int dev = -2;
    CHECK_NCCL(ncclCommCuDevice(x.comm, &dev));
    if (dev != 0) {
        fprintf(stderr, "rank %d: ncclCommCuDevice says %d, not 0\n", x.rank, dev);
        return 1;
    }
    CHECK_CUDA(cudaStreamCreateWithFlags(&x.stream, cudaStreamNonBlocking));
    CHECK_CUDA(cudaMalloc(&x.d_count, sizeof *x.d_count));

    if (fail_mode != FAIL_NONE) return run_failure(&x, fail_mode);
    if (windows) run_windows(&x);
    static const size_t counts[] = {1, 7, 1031, 262147};
    for (int t = 0; t < TH_NUM_DTYPES && !windows; t++)
        for (int op = 0; op < TH_NUM_OPS; op++)
            for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
                th_case c = make_case(&x, t, op, counts[k], 1009u * t + 31u * op + k);
                run_case(&x, &c, false);
                run_case(&x, &c, true);
            }
    static const size_t block_counts[] = {1, 7, 1031, 65537};
    for (int t = 0; t < TH_NUM_DTYPES && full; t++)
        for (int op = 0; op < TH_NUM_OPS; op++)
            for (size_t k = 0; k < sizeof block_counts / sizeof block_counts[0]; k++)
                for (int coll = 0; coll < 2; coll++) {
                    if (coll == 1 && op > 0) continue; /* AllGather has no op */
                    th_case c = make_case(&x, t, op, block_counts[k],
                                          3001u * t + 37u * op + k);
                    c.coll = coll == 0 ? TH_REDUCESCATTER : TH_ALLGATHER;
                    run_block_case(&x, &c, false);
                    run_block_case(&x, &c, true);
                }
    if (full) {
        run_rooted(&x);
        run_p2p(&x);
        check_device_path(&x);
    }
    for (int t = 0; t < TH_NUM_DTYPES && !windows; t++) {
        run_burst(&x, t, 1031);
        run_burst(&x, t, 262147);
    }

    /* Host buffers, stream NULL, on the same communicator: the host engine. Also gathers the
     * totals, so every rank learns whether any failed. */
    long long totals[2] = {x.cases, x.failures};
    CHECK_NCCL(ncclAllReduce(totals, totals, 2, ncclInt64, ncclSum, x.comm, NULL));
    long long expect_cases = (long long)x.cases * x.nranks;
    if (totals[0] != expect_cases) {
        fprintf(stderr, "rank %d: host AllReduce of the totals: %lld cases, expected %lld\n",
                x.rank, totals[0], expect_cases);
        totals[1]++;
    }
    if (x.rank == 0)
        printf("gpu_direct: %d ranks%s: %lld cases, %lld failed\n", x.nranks,
               windows ? " (symmetric windows)" : allreduce_only ? " (AllReduce alone)" : "",
               totals[0], totals[1]);
    CHECK_NCCL(ncclCommDestroy(x.comm));
    return totals[1] == 0 ? 0 : 1;
}
