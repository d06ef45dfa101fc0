/* The device-direct collectives end to end on a machine without a GPU, over the stand-in driver
 * of tests/gpu/fake_cuda.c (label cuda): real processes exchange "IPC handles" at init, queue
 * the chunk protocol of src/device/cuda/direct.c on streams, wait on each other's flags and
 * reduce with the host builds of the device kernels' element functions. It checks the
 * protocol, the chunking, one-shot and two-shot, the reduction chains of every dtype x op and
 * the core's dispatch, bit for bit against the harness's exact reference, and, interleaved with
 * them on the same stream, the other collectives (device-direct too) and grouped Send/Recv
 * (staged: pinned copies, the start/done words, the host engine); Broadcast, Reduce, Gather,
 * Scatter and AlltoAll also on their own (run_rooted), with the statistics proving which path
 * ran. It says nothing about CUDA itself
 * (gpu_direct and gpu_matrix do that on a GPU).
 *
 * Run under tutti-run with TUTTI_CUDA_LIBRARY naming the stand-in and TUTTI_CUDA_DIRECT=2 (init
 * fails unless every rank mapped every other's scratch). With --mixed the odd ranks are CPU
 * ranks (host buffers, stream NULL): the path is off and everything is staged; run it with
 * TUTTI_CUDA_DIRECT=1. --allreduce runs the AllReduce cases alone (the ring, under
 * NCCL_ALGO=Ring). --windows runs them on symmetric windows. --abort, --dead, --third and
 * --destroy check that streams waiting for a failed peer are released (run_failure). Each
 * rank opens the stand-in first, as
 * a CUDA program has its driver loaded, and makes its context current before the communicator. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device_path.h"
#include "harness.h"
#include "nccl.h"
#include "tutti.h"

static int g_rank = -1;
#define CHECK_NCCL(call)                                                                           \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "rank %d: %s failed: %s: %s (%s:%d)\n", g_rank, #call,               \
                    ncclGetErrorString(r_), ncclGetLastError(NULL), __FILE__, __LINE__);          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void *(*dev_malloc)(size_t);
static void (*dev_free)(void *);
static void *(*stream_create)(void);
static void (*stream_sync)(void *);
static int (*is_device)(const void *);

/* --mixed: the odd ranks are CPU ranks (host buffers, stream NULL, no device current). */
static void *host_malloc(size_t bytes)
{
    return malloc(bytes > 0 ? bytes : 1);
}
static void host_sync(void *s)
{
    (void)s;
}

struct ctx {
    ncclComm_t comm;
    int rank, nranks;
    void *stream;
    long long cases, failures;
    bool direct; /* the device-direct path is on (not --mixed) */
};

static void check(struct ctx *x, const struct th_case *c, const char *how, const void *got,
                  const void *want, size_t bytes)
{
    x->cases++;
    if (memcmp(got, want, bytes) == 0) return;
    size_t bad = 0;
    for (size_t i = 0; i < bytes; i++) bad += ((const unsigned char *)got)[i] !=
                                              ((const unsigned char *)want)[i];
    x->failures++;
    fprintf(stderr, "rank %d: FAIL %s %s %s count %zu %s: %zu bytes differ\n", x->rank,
            th_coll_name(c->coll), c->type->name, th_op_name(c->op), c->count, how, bad);
}

static struct th_case make_case(const struct ctx *x, int t, int op, size_t count, uint64_t seed)
{
    struct th_case c;
    memset(&c, 0, sizeof c);
    c.coll = TH_ALLREDUCE;
    c.type = &th_dtypes[t];
    c.op = (ncclRedOp_t)op;
    c.count = count;
    c.rank = x->rank;
    c.nranks = x->nranks;
    c.seed = seed;
    return c;
}

static void run_case(struct ctx *x, const struct th_case *c, int inplace)
{
    size_t bytes = c->count * c->type->bytes;
    unsigned char *img = malloc(bytes), *want = malloc(bytes);
    unsigned char *s = dev_malloc(bytes), *r = inplace ? s : dev_malloc(bytes);
    if (img == NULL || want == NULL || s == NULL || r == NULL) exit(1);
    th_fill_send(c, img);
    th_fill_expect(c, want, 0, c->count);
    memcpy(s, img, bytes); /* the stand-in's device memory is host memory */
    if (!inplace) th_fill_pattern(r, bytes, (uint32_t)c->seed + 5);
    CHECK_NCCL(ncclAllReduce(s, r, c->count, c->type->dtype, c->op, x->comm,
                             (cudaStream_t)x->stream));
    stream_sync(x->stream);
    check(x, c, inplace ? "in place" : "out of place", r, want, bytes);
    if (!inplace) check(x, c, "sendbuff unchanged", s, img, bytes);
    dev_free(s);
    if (!inplace) dev_free(r);
    free(img);
    free(want);
}

/* ncclRedOpCreatePreMulSum operators on the device-direct path: float32 with scalar 2 (exact)
 * and int32 with scalar 3 (wrapping); the reference is the sum case's, scaled. */
static void run_premulsum(struct ctx *x, size_t count)
{
    for (int k = 0; k < 2; k++) {
        int t = k == 0 ? 7 /* float32 */ : 2 /* int32 */;
        struct th_case c = make_case(x, t, ncclSum, count, 555u + (unsigned)k);
        size_t bytes = count * 4;
        unsigned char *want = malloc(bytes), *s = dev_malloc(bytes), *r = dev_malloc(bytes);
        if (want == NULL || s == NULL || r == NULL) exit(1);
        th_fill_send(&c, s);
        th_fill_expect(&c, want, 0, count);
        for (size_t i = 0; i < count; i++) {
            if (k == 0) {
                float f;
                memcpy(&f, want + 4 * i, 4);
                f *= 2.0f;
                memcpy(want + 4 * i, &f, 4);
            } else {
                uint32_t v;
                memcpy(&v, want + 4 * i, 4);
                v *= 3u;
                memcpy(want + 4 * i, &v, 4);
            }
        }
        float sf = 2.0f;
        int32_t si = 3;
        ncclRedOp_t op;
        CHECK_NCCL(ncclRedOpCreatePreMulSum(&op, k == 0 ? (void *)&sf : (void *)&si,
                                            th_dtypes[t].dtype, ncclScalarHostImmediate, x->comm));
        CHECK_NCCL(ncclAllReduce(s, r, count, th_dtypes[t].dtype, op, x->comm,
                                 (cudaStream_t)x->stream));
        stream_sync(x->stream);
        CHECK_NCCL(ncclRedOpDestroy(op, x->comm));
        check(x, &c, "premulsum operator", r, want, bytes);
        dev_free(s);
        dev_free(r);
        free(want);
    }
    /* An operator that is no live PreMulSum, inside a group: refused at the call, as on the
     * host path (before, only the group's end found it, after queuing the group's other
     * operations), and the end fails the group. */
    unsigned char *s = dev_malloc(16), *r = dev_malloc(16);
    if (s == NULL || r == NULL) exit(1);
    CHECK_NCCL(ncclGroupStart());
    ncclResult_t call = ncclAllReduce(s, r, 4, ncclFloat, (ncclRedOp_t)77, x->comm,
                                      (cudaStream_t)x->stream);
    ncclResult_t end = ncclGroupEnd();
    x->cases++;
    if (call != ncclInvalidArgument || end == ncclSuccess) {
        x->failures++;
        fprintf(stderr, "rank %d: FAIL an unknown operator in a group: the call gave %d, the "
                "end %d (want %d, then an error)\n", x->rank, (int)call, (int)end,
                (int)ncclInvalidArgument);
    }
    dev_free(s);
    dev_free(r);
}

/* Four operations queued before one synchronisation. */
static void run_burst(struct ctx *x, int t, size_t count)
{
    enum { K = 4 };
    struct th_case c[K];
    unsigned char *s[K], *r[K], *want[K];
    size_t bytes = count * th_dtypes[t].bytes;
    for (int i = 0; i < K; i++) {
        c[i] = make_case(x, t, ncclSum, count, 7777u + 131u * (unsigned)t + (unsigned)i);
        s[i] = dev_malloc(bytes);
        r[i] = dev_malloc(bytes);
        want[i] = malloc(bytes);
        if (s[i] == NULL || r[i] == NULL || want[i] == NULL) exit(1);
        th_fill_send(&c[i], s[i]);
        th_fill_expect(&c[i], want[i], 0, count);
    }
    for (int i = 0; i < K; i++)
        CHECK_NCCL(ncclAllReduce(s[i], r[i], count, th_dtypes[t].dtype, ncclSum, x->comm,
                                 (cudaStream_t)x->stream));
    stream_sync(x->stream);
    for (int i = 0; i < K; i++) {
        check(x, &c[i], "burst of 4", r[i], want[i], bytes);
        dev_free(s[i]);
        dev_free(r[i]);
        free(want[i]);
    }
}

/* Every collective (device-direct) and Send/Recv in a group (staged: the host engine on pinned
 * copies, ordered by the start/done words) interleaved with device-direct AllReduces on one
 * stream, all queued before one synchronisation: the two paths must keep stream order. */
static ncclResult_t issue(const struct ctx *x, const struct th_case *c, const void *s, void *r)
{
    cudaStream_t st = (cudaStream_t)x->stream;
    ncclDataType_t dt = c->type->dtype;
    switch (c->coll) {
    case TH_ALLREDUCE: return ncclAllReduce(s, r, c->count, dt, c->op, x->comm, st);
    case TH_ALLGATHER: return ncclAllGather(s, r, c->count, dt, x->comm, st);
    case TH_REDUCESCATTER: return ncclReduceScatter(s, r, c->count, dt, c->op, x->comm, st);
    case TH_BROADCAST: return ncclBroadcast(s, r, c->count, dt, c->root, x->comm, st);
    case TH_REDUCE: return ncclReduce(s, r, c->count, dt, c->op, c->root, x->comm, st);
    case TH_ALLTOALL: return ncclAlltoAll(s, r, c->count, dt, x->comm, st);
    case TH_GATHER: return ncclGather(s, r, c->count, dt, c->root, x->comm, st);
    case TH_SCATTER: return ncclScatter(s, r, c->count, dt, c->root, x->comm, st);
    case TH_SENDRECV: {
        int n = x->nranks;
        ncclGroupStart();
        ncclResult_t a = ncclSend(s, c->count, dt, (x->rank + 1) % n, x->comm, st);
        ncclResult_t b = ncclRecv(r, c->count, dt, (x->rank + n - 1) % n, x->comm, st);
        ncclResult_t e = ncclGroupEnd();
        return a != ncclSuccess ? a : b != ncclSuccess ? b : e;
    }
    default: return ncclInvalidArgument;
    }
}

/* ReduceScatter or AllGather on their own, in place (NCCL's offsets) or not. */
/* One ReduceScatter or AllGather: in fresh device buffers, or (pool not NULL) inside a
 * registered window at `shift` bytes, the output (out of place) half-way into it. */
static void run_block_case_in(struct ctx *x, const struct th_case *c, int inplace,
                              unsigned char *pool, size_t pool_bytes, size_t shift)
{
    size_t elt = c->type->bytes, send_n = th_send_count(c), recv_n = th_recv_count(c);
    size_t body = (send_n > recv_n ? send_n : recv_n) * elt;
    unsigned char *img = malloc(send_n * elt), *want = malloc(recv_n * elt);
    unsigned char *buf = pool != NULL ? pool + shift : dev_malloc(body), *s, *r, *other = NULL;
    if (img == NULL || want == NULL || buf == NULL) exit(1);
    th_fill_send(c, img);
    th_fill_expect(c, want, 0, recv_n);
    if (inplace) {
        size_t off = th_inplace_offset(c) * elt;
        bool send_inside = c->coll == TH_ALLGATHER;
        th_fill_pattern(buf, body, (uint32_t)c->seed + 2);
        s = send_inside ? buf + off : buf;
        r = send_inside ? buf : buf + off;
    } else {
        other = pool != NULL ? pool + pool_bytes / 2 + shift : dev_malloc(recv_n * elt);
        if (other == NULL) exit(1);
        th_fill_pattern(other, recv_n * elt, (uint32_t)c->seed + 5);
        s = buf;
        r = other;
    }
    memcpy(s, img, send_n * elt);
    CHECK_NCCL(issue(x, c, s, r));
    stream_sync(x->stream);
    char how[64];
    snprintf(how, sizeof how, "%s%s %s", pool != NULL ? "window " : "", th_coll_name(c->coll),
             inplace ? "in place" : "out of place");
    check(x, c, how, r, want, recv_n * elt);
    if (!inplace) check(x, c, "sendbuff unchanged", s, img, send_n * elt);
    if (pool == NULL) {
        dev_free(buf);
        if (other != NULL) dev_free(other);
    }
    free(img);
    free(want);
}

static void run_block_case(struct ctx *x, const struct th_case *c, int inplace)
{
    run_block_case_in(x, c, inplace, NULL, 0, 0);
}

/* Every operation the statistics counted device-direct on `comm`, all collectives together. */
static long long device_total(ncclComm_t comm, bool p2p)
{
    static const char *const colls[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast",
                                        "Reduce",    "AlltoAll",  "Gather",        "Scatter"};
    long long n = 0;
    if (p2p) return device_path_ops(comm, "Send") + device_path_ops(comm, "Recv");
    for (size_t i = 0; i < sizeof colls / sizeof colls[0]; i++)
        n += device_path_ops(comm, colls[i]);
    return n;
}

/* The sequence below, queued before one synchronisation; grouped: inside one group (Send/Recv
 * in a group nested in it), and with `other` not NULL, its AllReduces on that communicator
 * (a split of x->comm). The statistics must show which path ran: every collective
 * device-direct, or, with two communicators in the group, none (staged); Send/Recv
 * device-direct always. */
static void run_interleaved_on(struct ctx *x, int t, size_t count, bool grouped,
                               ncclComm_t other)
{
    static const enum th_coll seq[] = {TH_ALLGATHER, TH_ALLREDUCE, TH_REDUCESCATTER, TH_ALLREDUCE,
                                       TH_BROADCAST, TH_ALLREDUCE, TH_REDUCE, TH_ALLREDUCE,
                                       TH_ALLTOALL, TH_ALLREDUCE, TH_GATHER, TH_SCATTER,
                                       TH_SENDRECV, TH_ALLREDUCE};
    enum { K = sizeof seq / sizeof seq[0] };
    struct th_case c[K];
    unsigned char *s[K], *r[K], *want[K], *before[K];
    bool expect[K];
    for (int i = 0; i < K; i++) {
        c[i] = make_case(x, t, ncclSum, count, 4242u + 17u * (unsigned)t + (unsigned)i);
        c[i].coll = seq[i];
        c[i].root = i % x->nranks;
        size_t sb = th_send_count(&c[i]) * th_dtypes[t].bytes;
        size_t rb = th_recv_count(&c[i]) * th_dtypes[t].bytes;
        s[i] = dev_malloc(sb);
        r[i] = dev_malloc(rb);
        want[i] = malloc(rb);
        before[i] = malloc(rb);
        if (s[i] == NULL || r[i] == NULL || want[i] == NULL || before[i] == NULL) exit(1);
        th_fill_send(&c[i], s[i]);
        th_fill_pattern(before[i], rb, (uint32_t)c[i].seed + 9);
        memcpy(r[i], before[i], rb);
        expect[i] = th_fill_expect(&c[i], want[i], 0, th_recv_count(&c[i]));
    }
    long long colls_before = device_total(x->comm, false), p2p_before = device_total(x->comm, true);
    long long other_before = other != NULL ? device_total(other, false) : 0;
    struct ctx y = *x;
    y.comm = other;
    if (grouped) CHECK_NCCL(ncclGroupStart());
    for (int i = 0; i < K; i++)
        CHECK_NCCL(issue(other != NULL && c[i].coll == TH_ALLREDUCE ? &y : x, &c[i], s[i], r[i]));
    if (grouped) CHECK_NCCL(ncclGroupEnd());
    stream_sync(x->stream);
    if (grouped) {
        long long colls = device_total(x->comm, false) - colls_before;
        long long p2p = device_total(x->comm, true) - p2p_before;
        long long others = other != NULL ? device_total(other, false) - other_before : 0;
        long long want_colls = x->direct && other == NULL ? K - 1 : 0;
        long long want_p2p = x->direct ? 2 : 0;
        x->cases++;
        if (colls != want_colls || others != 0 || p2p != want_p2p) {
            x->failures++;
            fprintf(stderr, "rank %d: FAIL a group%s: %lld collectives and %lld sends and "
                            "receives device-direct (and %lld on the other communicator), "
                            "%lld and %lld expected\n", x->rank,
                    other != NULL ? " on two communicators" : "", colls, p2p, others,
                    want_colls, want_p2p);
        }
    }
    for (int i = 0; i < K; i++) {
        size_t rb = th_recv_count(&c[i]) * th_dtypes[t].bytes;
        check(x, &c[i], th_coll_name(c[i].coll), r[i], expect[i] ? want[i] : before[i], rb);
        dev_free(s[i]);
        dev_free(r[i]);
        free(want[i]);
        free(before[i]);
    }
}

static void run_interleaved(struct ctx *x, int t, size_t count)
{
    run_interleaved_on(x, t, count, false, NULL);
}

/* Broadcast, Reduce, Gather, Scatter and AlltoAll on device buffers: out of place (how 0), in place
 * at NCCL's offsets (how 1; not AlltoAll, which NCCL refuses), and out of place with the buffer
 * only the root passes in host memory at the root and NULL on the other ranks (how 2), as NCCL
 * allows. The path is decided on the buffer every rank passes, so all ranks take the device-direct
 * path alike (or, in a mixed communicator, the staged one). A rank that receives nothing must find
 * its buffer unchanged. */
static long long rooted_issued[TH_NUM_ALL_COLLS];
static long long p2p_sends, p2p_recvs; /* run_p2p's, for check_rooted_path */

static void run_rooted_case(struct ctx *x, const struct th_case *c, int how)
{
    size_t elt = c->type->bytes, send_n = th_send_count(c), recv_n = th_recv_count(c);
    size_t sb = send_n * elt, rb = recv_n * elt;
    bool root = x->rank == c->root;
    bool send_root_only = c->coll == TH_BROADCAST || c->coll == TH_SCATTER;
    bool recv_root_only = c->coll == TH_REDUCE || c->coll == TH_GATHER;
    unsigned char *img = malloc(sb), *want = malloc(rb);
    if (img == NULL || want == NULL) exit(1);
    th_fill_send(c, img);
    bool expect = th_fill_expect(c, want, 0, recv_n);
    unsigned char *s = NULL, *r = NULL, *body = NULL, *before = NULL;
    bool s_host = false, r_host = false;
    size_t body_bytes = sb > rb ? sb : rb;
    if (how == 1) {
        size_t off = th_inplace_offset(c) * elt;
        body = dev_malloc(body_bytes);
        if (body == NULL) exit(1);
        th_fill_pattern(body, body_bytes, (uint32_t)c->seed + 2);
        s = c->coll == TH_GATHER ? body + off : body;
        r = c->coll == TH_GATHER ? body : body + off;
        memcpy(s, img, sb);
    } else {
        s_host = how == 2 && send_root_only;
        r_host = how == 2 && recv_root_only;
        if (!(s_host && !root)) s = s_host ? malloc(sb) : dev_malloc(sb);
        if (!(r_host && !root)) r = r_host ? malloc(rb) : dev_malloc(rb);
        if ((s == NULL && !(s_host && !root)) || (r == NULL && !(r_host && !root))) exit(1);
        if (s != NULL) memcpy(s, img, sb);
        if (r != NULL) th_fill_pattern(r, rb, (uint32_t)c->seed + 5);
    }
    /* What the whole receive side must hold afterwards. */
    unsigned char *whole = how == 1 ? body : r;
    size_t whole_bytes = how == 1 ? body_bytes : rb;
    if (whole != NULL) {
        before = malloc(whole_bytes);
        if (before == NULL) exit(1);
        memcpy(before, whole, whole_bytes);
        if (expect) memcpy(before + (r - whole), want, rb);
    }
    CHECK_NCCL(issue(x, c, s, r));
    rooted_issued[c->coll]++;
    stream_sync(x->stream);
    static const char *const hows[] = {"out of place", "in place", "root-only buffer on the host"};
    if (whole != NULL) check(x, c, hows[how], whole, before, whole_bytes);
    if (how != 1 && s != NULL) check(x, c, "sendbuff unchanged", s, img, sb);
    if (how == 1) dev_free(body);
    if (how != 1 && s != NULL) (s_host ? free : dev_free)(s);
    if (how != 1 && r != NULL) (r_host ? free : dev_free)(r);
    free(before);
    free(img);
    free(want);
}

static void run_rooted(struct ctx *x)
{
    static const enum th_coll colls[] = {TH_BROADCAST, TH_REDUCE, TH_GATHER, TH_SCATTER,
                                         TH_ALLTOALL};
    static const size_t counts[] = {1, 7, 1031, 20001};
    for (int t = 0; t < TH_NUM_DTYPES; t++)
        for (size_t i = 0; i < sizeof colls / sizeof colls[0]; i++)
            for (int op = 0; op < (colls[i] == TH_REDUCE ? TH_NUM_OPS : 1); op++)
                for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
                    struct th_case c = make_case(x, t, op, counts[k],
                                                 5003u * (unsigned)t + 211u * (unsigned)i +
                                                     41u * (unsigned)op + k);
                    c.coll = colls[i];
                    c.root = (int)((k + (size_t)t) % (size_t)x->nranks);
                    for (int how = 0; how < 3; how++)
                        if (how != 1 || c.coll != TH_ALLTOALL) /* NCCL refuses it in place */
                            run_rooted_case(x, &c, how);
                }
}

/* The statistics (TUTTI_STATS=1) must count every rooted collective, Send and Recv under "Device"
 * when the device-direct path is on, and none there when it is off (a mixed communicator): proof of
 * which path ran, not only that the results were right. */
static void check_rooted_path(struct ctx *x, bool direct)
{
    const struct { const char *name; long long issued; } ops[] = {
        {"Broadcast", rooted_issued[TH_BROADCAST]}, {"Reduce", rooted_issued[TH_REDUCE]},
        {"Gather", rooted_issued[TH_GATHER]},       {"Scatter", rooted_issued[TH_SCATTER]},
        {"AlltoAll", rooted_issued[TH_ALLTOALL]},   {"Send", p2p_sends},
        {"Recv", p2p_recvs},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        long long got = device_path_ops(x->comm, ops[i].name), want = direct ? ops[i].issued : 0;
        x->cases++;
        if (got != want) {
            x->failures++;
            fprintf(stderr, "rank %d: FAIL %s: %lld operations counted device-direct, %lld "
                            "expected\n", x->rank, ops[i].name, got, want);
        }
    }
}

/* Send and Recv on device buffers (device-direct: per-pair slots and flags): in a group, a ring
 * exchange; two sends to the same peer in one group, matched in order; tuttiAlltoAllV with
 * uneven counts (a group of a Send and a Recv per peer, this rank included); and alone, one
 * direction at a time. Counts up to 20001 elements take several chunks of a 64 KiB scratch's
 * slots. Data: every element a function of (sender, receiver, operation, index), checked
 * exactly; receive buffers are filled with a pattern first. */
static uint32_t *p2p_buffer(size_t count, int from, int to, int op)
{
    uint32_t *b = dev_malloc(count * 4 + 4);
    if (b == NULL) exit(1);
    for (size_t i = 0; i < count; i++)
        b[i] = from < 0 ? 0xdeadbeefu : device_path_word(from, to, op, i);
    return b;
}

static size_t p2p_wrong(const struct ctx *x, const uint32_t *got, size_t count, int from, int op)
{
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) bad += got[i] != device_path_word(from, x->rank, op, i);
    return bad;
}

static void p2p_check(struct ctx *x, const char *how, const uint32_t *got, size_t count,
                      int from, int op)
{
    size_t bad = p2p_wrong(x, got, count, from, op);
    x->cases++;
    if (bad == 0) return;
    x->failures++;
    fprintf(stderr, "rank %d: FAIL %s from rank %d, %zu elements: %zu wrong\n", x->rank, how,
            from, count, bad);
}

static void run_p2p(struct ctx *x)
{
    int n = x->nranks, me = x->rank, next = (me + 1) % n, prev = (me + n - 1) % n;
    cudaStream_t st = (cudaStream_t)x->stream;
    static const size_t counts[] = {1, 7, 1031, 20001};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        size_t c = counts[k];
        /* A ring in a group. */
        uint32_t *s = p2p_buffer(c, me, next, 1), *r = p2p_buffer(c, -1, 0, 0);
        CHECK_NCCL(ncclGroupStart());
        CHECK_NCCL(ncclSend(s, c, ncclUint32, next, x->comm, st));
        CHECK_NCCL(ncclRecv(r, c, ncclUint32, prev, x->comm, st));
        CHECK_NCCL(ncclGroupEnd());
        p2p_sends++, p2p_recvs++;
        stream_sync(x->stream);
        p2p_check(x, "ring in a group", r, c, prev, 1);
        dev_free(s);
        dev_free(r);
        /* Two sends to the next rank in one group, of different sizes, received in order. */
        uint32_t *s1 = p2p_buffer(c, me, next, 2), *s2 = p2p_buffer(c + 3, me, next, 3);
        uint32_t *r1 = p2p_buffer(c, -1, 0, 0), *r2 = p2p_buffer(c + 3, -1, 0, 0);
        CHECK_NCCL(ncclGroupStart());
        CHECK_NCCL(ncclRecv(r1, c, ncclUint32, prev, x->comm, st));
        CHECK_NCCL(ncclSend(s1, c, ncclUint32, next, x->comm, st));
        CHECK_NCCL(ncclSend(s2, c + 3, ncclUint32, next, x->comm, st));
        CHECK_NCCL(ncclRecv(r2, c + 3, ncclUint32, prev, x->comm, st));
        CHECK_NCCL(ncclGroupEnd());
        p2p_sends += 2, p2p_recvs += 2;
        stream_sync(x->stream);
        p2p_check(x, "first of two in a group", r1, c, prev, 2);
        p2p_check(x, "second of two in a group", r2, c + 3, prev, 3);
        dev_free(s1), dev_free(s2), dev_free(r1), dev_free(r2);
        /* tuttiAlltoAllV: rank a sends c + a + 2b elements to rank b. */
        size_t sc[64], sd[64], rc[64], rd[64], stot = 0, rtot = 0;
        for (int p = 0; p < n; p++) {
            sc[p] = c + (size_t)me + 2 * (size_t)p, sd[p] = stot, stot += sc[p];
            rc[p] = c + (size_t)p + 2 * (size_t)me, rd[p] = rtot, rtot += rc[p];
        }
        uint32_t *sv = dev_malloc(stot * 4), *rv = dev_malloc(rtot * 4);
        if (sv == NULL || rv == NULL) exit(1);
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < sc[p]; i++) sv[sd[p] + i] = device_path_word(me, p, 4, i);
        memset(rv, 0xa5, rtot * 4);
        CHECK_NCCL(tuttiAlltoAllV(sv, sc, sd, rv, rc, rd, ncclUint32, x->comm, st));
        p2p_sends += n, p2p_recvs += n;
        stream_sync(x->stream);
        for (int p = 0; p < n; p++) p2p_check(x, "tuttiAlltoAllV", rv + rd[p], rc[p], p, 4);
        dev_free(sv);
        dev_free(rv);
        /* Alone, outside a group: rank 0 to every other rank in turn (one check per rank, so
         * that every rank counts as many). */
        size_t alone_bad = 0;
        for (int p = 1; p < n; p++) {
            if (me != 0 && me != p) continue;
            uint32_t *b = me == 0 ? p2p_buffer(c, 0, p, 5) : p2p_buffer(c, -1, 0, 0);
            if (me == 0) {
                CHECK_NCCL(ncclSend(b, c, ncclUint32, p, x->comm, st));
                p2p_sends++;
            } else {
                CHECK_NCCL(ncclRecv(b, c, ncclUint32, 0, x->comm, st));
                p2p_recvs++;
            }
            stream_sync(x->stream);
            if (me == p) alone_bad += p2p_wrong(x, b, c, 0, 5);
            dev_free(b);
        }
        x->cases++;
        if (alone_bad != 0) {
            x->failures++;
            fprintf(stderr, "rank %d: FAIL Recv alone from rank 0, %zu elements: %zu wrong\n",
                    me, c, alone_bad);
        }
    }
}

/* Symmetric windows on device memory (--windows): AllReduce whose buffers lie in windows that
 * every rank registered reads and writes the peers' buffers in place (window.c, "Symmetric
 * windows"). Every dtype x op, in place and out of place, at offsets inside the windows that
 * every rank uses alike (one of them not 16-byte aligned), a burst of operations queued before
 * one synchronisation, and scratch AllReduces on plain device buffers in between, which share
 * the flags' sequence. */
static void run_windows(struct ctx *x)
{
    enum { POOL = 4 << 20 };
    /* The windows' memory comes from ncclMemAlloc, which gives device memory on a thread with
     * a current device, as NCCL's does (checked in main). */
    unsigned char *pool = NULL;
    CHECK_NCCL(ncclMemAlloc((void **)&pool, POOL));
    ncclWindow_t win;
    CHECK_NCCL(ncclCommWindowRegister(x->comm, pool, POOL, &win, NCCL_WIN_COLL_SYMMETRIC));
    static const size_t counts[] = {1, 7, 1031, 70001};
    for (int t = 0; t < TH_NUM_DTYPES; t++)
        for (int op = 0; op < TH_NUM_OPS; op++)
            for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    struct th_case c = make_case(x, t, op, counts[k], 5003u * (unsigned)t +
                                                 41u * (unsigned)op + 7u * k + (unsigned)inplace);
                    size_t elt = c.type->bytes, bytes = c.count * elt;
                    /* Odd cases start one element in: not 16-byte aligned. */
                    size_t off = (k % 2) * elt, roff = POOL / 2 + (k % 2) * elt;
                    unsigned char *s = pool + off, *r = inplace ? s : pool + roff;
                    unsigned char *img = malloc(bytes), *want = malloc(bytes);
                    if (img == NULL || want == NULL) exit(1);
                    th_fill_send(&c, img);
                    th_fill_expect(&c, want, 0, c.count);
                    memcpy(s, img, bytes);
                    if (!inplace) th_fill_pattern(r, bytes, (uint32_t)c.seed + 5);
                    CHECK_NCCL(ncclAllReduce(s, r, c.count, c.type->dtype, c.op, x->comm,
                                             (cudaStream_t)x->stream));
                    stream_sync(x->stream);
                    check(x, &c, inplace ? "window, in place" : "window, out of place", r, want,
                          bytes);
                    if (!inplace) check(x, &c, "window sendbuff unchanged", s, img, bytes);
                    free(img);
                    free(want);
                    /* A scratch AllReduce between two window ones. */
                    if (k == 2 && op == 0 && inplace == 0) run_case(x, &c, 0);
                }
    /* ReduceScatter (every op) and AllGather on the window, in place and not, one of them
     * not 16-byte aligned: block b of every input folded into rank b's output; every input
     * copied into its block of every output. */
    static const size_t block_counts[] = {1, 7, 1031, 20001};
    for (int t = 0; t < TH_NUM_DTYPES; t++)
        for (int op = 0; op < TH_NUM_OPS; op++)
            for (size_t k = 0; k < sizeof block_counts / sizeof block_counts[0]; k++)
                for (int coll = 0; coll < 2; coll++) {
                    if (coll == 1 && op > 0) continue; /* AllGather has no op */
                    struct th_case c = make_case(x, t, op, block_counts[k],
                                                 6007u * (unsigned)t + 43u * (unsigned)op + k);
                    c.coll = coll == 0 ? TH_REDUCESCATTER : TH_ALLGATHER;
                    size_t shift = (k % 2) * c.type->bytes;
                    run_block_case_in(x, &c, 0, pool, POOL, shift);
                    run_block_case_in(x, &c, 1, pool, POOL, shift);
                }
    /* A burst: four window AllReduces and a scratch one queued before one synchronisation. */
    enum { K = 4 };
    size_t count = 70001, elt = 4, bytes = count * elt;
    struct th_case c[K];
    unsigned char *want[K];
    for (int i = 0; i < K; i++) {
        c[i] = make_case(x, 7, ncclSum, count, 8101u + (unsigned)i);
        want[i] = malloc(bytes);
        if (want[i] == NULL) exit(1);
        th_fill_send(&c[i], pool + (size_t)i * bytes);
        th_fill_expect(&c[i], want[i], 0, count);
    }
    for (int i = 0; i < K; i++) {
        unsigned char *b = pool + (size_t)i * bytes;
        CHECK_NCCL(ncclAllReduce(b, b, count, ncclFloat32, ncclSum, x->comm,
                                 (cudaStream_t)x->stream));
    }
    stream_sync(x->stream);
    for (int i = 0; i < K; i++) {
        check(x, &c[i], "window burst of 4", pool + (size_t)i * bytes, want[i], bytes);
        free(want[i]);
    }
    CHECK_NCCL(ncclCommWindowDeregister(x->comm, win));
    CHECK_NCCL(ncclMemFree(pool));
    /* Windows of different sizes on different ranks are not mapped (every rank agrees on
     * that at registration): AllReduce on them goes through the scratch, still exact. */
    size_t odd_bytes = (size_t)(64 << 10) + (size_t)x->rank * 4096;
    unsigned char *odd = dev_malloc(odd_bytes);
    if (odd == NULL) exit(1);
    ncclWindow_t odd_win;
    CHECK_NCCL(ncclCommWindowRegister(x->comm, odd, odd_bytes, &odd_win,
                                      NCCL_WIN_COLL_SYMMETRIC));
    struct th_case oc = make_case(x, 7, ncclSum, 1031, 9901u);
    unsigned char *owant = malloc(1031 * 4);
    if (owant == NULL) exit(1);
    th_fill_send(&oc, odd);
    th_fill_expect(&oc, owant, 0, 1031);
    CHECK_NCCL(ncclAllReduce(odd, odd, 1031, ncclFloat32, ncclSum, x->comm,
                             (cudaStream_t)x->stream));
    stream_sync(x->stream);
    check(x, &oc, "window of another size on each rank", odd, owant, 1031 * 4);
    free(owant);
    CHECK_NCCL(ncclCommWindowDeregister(x->comm, odd_win));
    dev_free(odd);
}

/* Failure tests of the device-direct path, where streams wait for peers inside the GPU.
 * --abort, 2 ranks: rank 1 takes no part (a stuck peer); rank 0 queues a device-direct
 * AllReduce, a Send larger than a slot and a Recv from rank 1 on its stream, which then waits
 * for rank 1's flags. Another thread aborts the communicator after 300 ms, as a watchdog
 * would: the stream must then run out (its results are undefined).
 * --dead, n ranks: the last rank exits, nobody aborts: Tutti's device watchdog must see the
 * death, fail the communicator and release every survivor's stream by itself.
 * --third, 3 ranks: rank 2 takes no part, rank 0 aborts, rank 1 never does: rank 0's release
 * lets rank 1's stream run out too, so rank 1 must learn that its result is not valid.
 * In --dead and --third every survivor that did not abort must then see ncclRemoteError from
 * ncclCommGetAsyncError, and its next device-direct operation must be refused. Without the
 * release the streams wait forever and tutti-run's timeout fails the test.
 * --destroy, n ranks: the last rank exits; the survivors call ncclCommDestroy at once, before
 * the watchdog could look: destroy must leave the watchdog time to release the streams, so
 * that destroy and the stream's end take seconds, not 10 s and then for ever. */
static ncclComm_t abort_comm;
static ncclResult_t abort_rc = ncclInternalError;
static void *abort_later(void *arg)
{
    (void)arg;
    usleep(300000);
    abort_rc = ncclCommAbort(abort_comm);
    return NULL;
}

static int run_failure(struct ctx *x, int mode)
{
    int idle = fail_idle_rank(mode, x->nranks, "fake_direct");
    if (idle < 0) return 1;
    if (x->rank == idle) {
        if (fail_exits(mode)) _exit(0); /* no destroy, no goodbye: the process is gone */
        sleep(3);
        CHECK_NCCL(ncclCommAbort(x->comm));
        return 0;
    }
    bool aborts = x->rank == 0 && (mode == FAIL_ABORT || mode == FAIL_THIRD);
    size_t count = 70001, bytes = count * 4;
    float *s = dev_malloc(bytes), *r = dev_malloc(bytes);
    if (s == NULL || r == NULL) exit(1);
    memset(s, 0, bytes);
    cudaStream_t st = (cudaStream_t)x->stream;
    CHECK_NCCL(ncclAllReduce(s, r, count, ncclFloat32, ncclSum, x->comm, st));
    if (mode == FAIL_ABORT) {
        CHECK_NCCL(ncclSend(s, count, ncclFloat32, 1, x->comm, st));
        CHECK_NCCL(ncclRecv(r, count, ncclFloat32, 1, x->comm, st));
    }
    abort_comm = x->comm;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (mode == FAIL_DESTROY) {
        /* ncclCommDestroy at once, before the watchdog could have looked: it must let the
         * watchdog see the dead peer and release the stream, not return with it waiting. */
        ncclResult_t rc = ncclCommDestroy(x->comm);
        stream_sync(x->stream);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        bool ok = secs < 8.0;
        printf("fake_direct: rank %d: ncclCommDestroy (%s) and the stream's end %.2f s after "
               "the work was queued, rank %d dead: %s\n", x->rank, ncclGetErrorString(rc), secs,
               idle, ok ? "passed" : "FAILED");
        dev_free(s);
        dev_free(r);
        return ok ? 0 : 1;
    }
    pthread_t th;
    if (aborts && pthread_create(&th, NULL, abort_later, NULL) != 0) exit(1);
    stream_sync(x->stream);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    bool ok = secs < 10.0;
    if (aborts) {
        pthread_join(th, NULL);
        ok = ok && abort_rc == ncclSuccess && secs >= 0.3;
        printf("fake_direct: rank %d's stream ran out %.2f s after the work was queued (it "
               "aborted at 0.3 s: %s): %s\n", x->rank, secs, ncclGetErrorString(abort_rc),
               ok ? "passed" : "FAILED");
    } else {
        /* --third: the watchdog alone must fail the communicator (no polling first), so the
         * next operation is refused; --dead: ncclCommGetAsyncError must say it first. */
        ncclResult_t async = ncclSuccess, next = ncclSuccess;
        if (mode == FAIL_THIRD) {
            usleep(1500000); /* the watchdog looks every 0.1 s; generous for a loaded CI */
            next = ncclAllReduce(s, r, count, ncclFloat32, ncclSum, x->comm, st);
        }
        CHECK_NCCL(ncclCommGetAsyncError(x->comm, &async));
        if (mode != FAIL_THIRD)
            next = ncclAllReduce(s, r, count, ncclFloat32, ncclSum, x->comm, st);
        ok = ok && async == ncclRemoteError && next != ncclSuccess;
        printf("fake_direct: rank %d's stream ran out %.2f s after the work was queued, rank %d "
               "%s; ncclCommGetAsyncError: %s; the next AllReduce: %s: %s\n", x->rank, secs,
               mode == FAIL_DEAD ? idle : 0, mode == FAIL_DEAD ? "dead" : "aborted",
               ncclGetErrorString(async), ncclGetErrorString(next), ok ? "passed" : "FAILED");
        struct timespec a0, a1;
        clock_gettime(CLOCK_MONOTONIC, &a0);
        CHECK_NCCL(ncclCommAbort(x->comm));
        clock_gettime(CLOCK_MONOTONIC, &a1);
        double abort_secs = (double)(a1.tv_sec - a0.tv_sec) +
                            1e-9 * (double)(a1.tv_nsec - a0.tv_nsec);
        if (abort_secs > 5.0) { /* it must not wait for a peer that never comes */
            printf("fake_direct: rank %d: ncclCommAbort took %.2f s: FAILED\n", x->rank,
                   abort_secs);
            ok = false;
        }
    }
    dev_free(s);
    dev_free(r);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    bool mixed = argc > 1 && strcmp(argv[1], "--mixed") == 0;
    bool windows = argc > 1 && strcmp(argv[1], "--windows") == 0;
    /* --allreduce: the AllReduce cases alone (run under NCCL_ALGO=Ring for the ring). */
    bool allreduce_only = argc > 1 && strcmp(argv[1], "--allreduce") == 0;
    int fail_mode = fail_mode_of(argc, argv);
    bool full = !windows && !allreduce_only;
    const char *lib = getenv("TUTTI_CUDA_LIBRARY");
    void *h = lib != NULL ? dlopen(lib, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (h == NULL) {
        fprintf(stderr, "fake_direct: TUTTI_CUDA_LIBRARY must name the stand-in driver (%s)\n",
                lib != NULL ? dlerror() : "unset");
        return 1;
    }
    int (*make_current)(void) = NULL;
    void *sym;
#define LOOK(var, name) (sym = dlsym(h, name), memcpy(&(var), &sym, sizeof sym))
    LOOK(make_current, "fake_cuda_make_current");
    LOOK(dev_malloc, "fake_cuda_malloc");
    LOOK(dev_free, "fake_cuda_free");
    LOOK(stream_create, "fake_cuda_stream_create");
    LOOK(stream_sync, "fake_cuda_stream_sync");
    LOOK(is_device, "fake_cuda_is_device");
    if (!make_current || !dev_malloc || !dev_free || !stream_create || !stream_sync ||
        !is_device) {
        fprintf(stderr, "fake_direct: %s is not the stand-in driver\n", lib);
        return 1;
    }
    /* The rank is known before the communicator from tutti-run's environment. */
    const char *rank_env = getenv("RANK");
    bool gpu = !mixed || (rank_env != NULL && atoi(rank_env) % 2 == 0);
    if (gpu) make_current();
    struct ctx x;
    memset(&x, 0, sizeof x);
    setenv("TUTTI_STATS", "1", 0); /* check_rooted_path reads which path ran */
    CHECK_NCCL(tuttiCommInitFromEnv(&x.comm));
    CHECK_NCCL(ncclCommUserRank(x.comm, &x.rank));
    CHECK_NCCL(ncclCommCount(x.comm, &x.nranks));
    g_rank = x.rank;
    if (mixed && rank_env == NULL) {
        fprintf(stderr, "fake_direct: --mixed needs RANK in the environment (tutti-run)\n");
        return 1;
    }
    int dev = -2;
    CHECK_NCCL(ncclCommCuDevice(x.comm, &dev));
    if (dev != (gpu ? 0 : -1)) {
        fprintf(stderr, "rank %d: ncclCommCuDevice says %d, not %d\n", x.rank, dev, gpu ? 0 : -1);
        return 1;
    }
    /* ncclMemAlloc: device memory where a device is current, host memory on a CPU rank;
     * ncclMemFree takes either back once, and refuses a second free. */
    void *m = NULL;
    CHECK_NCCL(ncclMemAlloc(&m, 1 << 16));
    if (is_device(m) != (int)gpu) {
        fprintf(stderr, "rank %d: ncclMemAlloc gave %s memory on a %s rank\n", x.rank,
                is_device(m) ? "device" : "host", gpu ? "GPU" : "CPU");
        return 1;
    }
    memset(m, 0x5a, 1 << 16); /* the stand-in's device memory is host-visible */
    CHECK_NCCL(ncclMemFree(m));
    if (ncclMemFree(m) != ncclInvalidArgument) {
        fprintf(stderr, "rank %d: a second ncclMemFree of %p was not refused\n", x.rank, m);
        return 1;
    }
    /* tuttiMemAllocHost: host memory on every rank, a current device or not. */
    CHECK_NCCL(tuttiMemAllocHost(&m, 1 << 16));
    if (is_device(m)) {
        fprintf(stderr, "rank %d: tuttiMemAllocHost gave device memory\n", x.rank);
        return 1;
    }
    memset(m, 0x5a, 1 << 16);
    CHECK_NCCL(ncclMemFree(m));
    x.direct = !mixed;
    if (gpu) {
        x.stream = stream_create();
    } else {
        dev_malloc = host_malloc;
        dev_free = free;
        stream_sync = host_sync;
        x.stream = NULL;
    }

    if (fail_mode != FAIL_NONE) return run_failure(&x, fail_mode);
    if (windows) run_windows(&x);
    static const size_t counts[] = {1, 7, 1031, 70001};
    for (int t = 0; t < TH_NUM_DTYPES && !windows; t++)
        for (int op = 0; op < TH_NUM_OPS; op++)
            for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
                struct th_case c = make_case(&x, t, op, counts[k], 1009u * (unsigned)t +
                                                                31u * (unsigned)op + k);
                run_case(&x, &c, 0);
                run_case(&x, &c, 1);
            }
    /* Per-member blocks: 20001 elements still take several chunks of a 64 KiB scratch. */
    static const size_t block_counts[] = {1, 7, 1031, 20001};
    for (int t = 0; t < TH_NUM_DTYPES && full; t++)
        for (int op = 0; op < TH_NUM_OPS; op++)
            for (size_t k = 0; k < sizeof block_counts / sizeof block_counts[0]; k++)
                for (int coll = 0; coll < 2; coll++) {
                    if (coll == 1 && op > 0) continue; /* AllGather has no op */
                    struct th_case c = make_case(&x, t, op, block_counts[k],
                                                 3001u * (unsigned)t + 37u * (unsigned)op + k);
                    c.coll = coll == 0 ? TH_REDUCESCATTER : TH_ALLGATHER;
                    run_block_case(&x, &c, 0);
                    run_block_case(&x, &c, 1);
                }
    if (full) {
        run_rooted(&x);
        run_p2p(&x);
        check_rooted_path(&x, !mixed);
    }
    if (!windows) {
        run_premulsum(&x, 1031);
        run_premulsum(&x, 70001);
    }
    for (int t = 0; t < TH_NUM_DTYPES && !windows; t++) {
        run_burst(&x, t, 1031);
        run_burst(&x, t, 70001);
    }

    for (int t = 0; t < TH_NUM_DTYPES && full; t++) {
        run_interleaved(&x, t, 1031);
        run_interleaved(&x, t, 70001);
        run_interleaved_on(&x, t, 70001, true, NULL);
    }
    if (full) {
        /* One stream per group, device-direct operations included: the second is refused and
         * the group fails, on every rank alike, with nothing queued. */
        float *g = dev_malloc(64);
        cudaStream_t st2 = NULL; /* a CPU rank (--mixed): a Tutti host stream */
        if (gpu) st2 = (cudaStream_t)stream_create();
        else CHECK_NCCL(tuttiStreamCreate(&st2));
        if (g == NULL) exit(1);
        memset(g, 0, 64);
        CHECK_NCCL(ncclGroupStart());
        CHECK_NCCL(ncclAllReduce(g, g, 16, ncclFloat32, ncclSum, x.comm, (cudaStream_t)x.stream));
        ncclResult_t second = ncclAllReduce(g, g, 16, ncclFloat32, ncclSum, x.comm, st2);
        ncclResult_t end = ncclGroupEnd();
        x.cases++;
        if (second != ncclInvalidUsage || end == ncclSuccess) {
            x.failures++;
            fprintf(stderr, "rank %d: FAIL a group on two streams: %s, then %s at its end\n",
                    x.rank, ncclGetErrorString(second), ncclGetErrorString(end));
        }
        dev_free(g);
        if (!gpu) CHECK_NCCL(tuttiStreamDestroy(st2));
    }
    if (full) {
        /* A group whose collectives span two communicators: staged, still right. */
        ncclComm_t other;
        CHECK_NCCL(ncclCommSplit(x.comm, 0, x.rank, &other, NULL));
        run_interleaved_on(&x, 0, 1031, true, other);
        run_interleaved_on(&x, 7, 70001, true, other);
        CHECK_NCCL(ncclCommDestroy(other));
    }

    long long totals[2] = {x.cases, x.failures};
    CHECK_NCCL(ncclAllReduce(totals, totals, 2, ncclInt64, ncclSum, x.comm, NULL));
    if (totals[0] != x.cases * x.nranks) {
        fprintf(stderr, "rank %d: host AllReduce of the totals: %lld cases, expected %lld\n",
                x.rank, totals[0], x.cases * x.nranks);
        totals[1]++;
    }
    if (x.rank == 0)
        printf("fake_direct: %d ranks%s: %lld checks, %lld failed\n", x.nranks,
               mixed            ? " (odd ranks on the CPU, all staged)"
               : windows        ? " (symmetric windows)"
               : allreduce_only ? " (AllReduce alone)"
                                : "",
               totals[0], totals[1]);
    CHECK_NCCL(ncclCommDestroy(x.comm));
    return totals[1] == 0 ? 0 : 1;
}
