/* tutti-perf: an nccl-tests-style benchmark, run as every rank under a launcher
 * (`tutti-run -n 4 tutti-perf -b 8 -e 64M`). Rank 0 prints nccl-tests' table: size, count, type,
 * redop, root, then time, algbw, busbw and #wrong for the out-of-place and the in-place forms.
 *
 * Timing is barrier-free, as in nccl-tests: after `warmup` calls, `iters` calls run back to back
 * and the per-call time is their elapsed time divided by `iters`; ranks' times are combined with
 * the library's own AllReduce (-a: rank 0's, average, min or max). With -c 1 each size and form
 * also runs one call on exact inputs and counts the elements that differ from the independent
 * reference of tests/harness.h; the exit status is 1 when any did. New collectives are one more
 * entry of the `tp_colls` table; the command line is parsed in tutti-perf-options.c. Uses the
 * public API only. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nccl.h"
#include "tutti-perf.h"
#include "tutti.h"

static double factor_allreduce(int n)
{
    return 2.0 * (n - 1) / n;
}

static double factor_gather(int n)
{
    return (double)(n - 1) / n;
}

static double factor_one(int n)
{
    (void)n;
    return 1.0;
}

static ncclResult_t run_allreduce(const struct call *c, const void *send, void *recv)
{
    return ncclAllReduce(send, recv, c->count, c->type->dtype, c->op, c->comm, tp_stream);
}

static ncclResult_t run_allgather(const struct call *c, const void *send, void *recv)
{
    return ncclAllGather(send, recv, c->count, c->type->dtype, c->comm, tp_stream);
}

static ncclResult_t run_reducescatter(const struct call *c, const void *send, void *recv)
{
    return ncclReduceScatter(send, recv, c->count, c->type->dtype, c->op, c->comm, tp_stream);
}

static ncclResult_t run_broadcast(const struct call *c, const void *send, void *recv)
{
    return ncclBroadcast(send, recv, c->count, c->type->dtype, c->root, c->comm, tp_stream);
}

static ncclResult_t run_reduce(const struct call *c, const void *send, void *recv)
{
    return ncclReduce(send, recv, c->count, c->type->dtype, c->op, c->root, c->comm, tp_stream);
}

static ncclResult_t run_alltoall(const struct call *c, const void *send, void *recv)
{
    return ncclAlltoAll(send, recv, c->count, c->type->dtype, c->comm, tp_stream);
}

static ncclResult_t run_gather(const struct call *c, const void *send, void *recv)
{
    return ncclGather(send, recv, c->count, c->type->dtype, c->root, c->comm, tp_stream);
}

static ncclResult_t run_scatter(const struct call *c, const void *send, void *recv)
{
    return ncclScatter(send, recv, c->count, c->type->dtype, c->root, c->comm, tp_stream);
}

/* A ring shift, as nccl-tests' sendrecv: one group that sends to rank + 1 and receives from
 * rank - 1. The group is always ended, so that a failed Send leaves no group open. */
static ncclResult_t run_sendrecv(const struct call *c, const void *send, void *recv)
{
    int next = (c->rank + 1) % c->nranks;
    int prev = (c->rank + c->nranks - 1) % c->nranks;
    ncclResult_t res = ncclGroupStart();
    if (res != ncclSuccess) {
        return res;
    }
    res = ncclSend(send, c->count, c->type->dtype, next, c->comm, tp_stream);
    if (res == ncclSuccess) {
        res = ncclRecv(recv, c->count, c->type->dtype, prev, c->comm, tp_stream);
    }
    ncclResult_t end = ncclGroupEnd();
    return res != ncclSuccess ? res : end;
}

/* Bus bandwidth factors as nccl-tests computes them (its PERFORMANCE.md and *_perf.cu). */
const struct coll_desc tp_colls[] = {
    {"all_reduce", TH_ALLREDUCE, true, false, false, true, factor_allreduce, run_allreduce},
    {"all_gather", TH_ALLGATHER, false, false, true, true, factor_gather, run_allgather},
    {"reduce_scatter", TH_REDUCESCATTER, true, false, true, true, factor_gather,
     run_reducescatter},
    {"broadcast", TH_BROADCAST, false, true, false, true, factor_one, run_broadcast},
    {"reduce", TH_REDUCE, true, true, false, true, factor_one, run_reduce},
    {"alltoall", TH_ALLTOALL, false, false, true, false, factor_gather, run_alltoall},
    {"gather", TH_GATHER, false, true, true, true, factor_gather, run_gather},
    {"scatter", TH_SCATTER, false, true, true, true, factor_gather, run_scatter},
    {"sendrecv", TH_SENDRECV, false, false, false, false, factor_one, run_sendrecv},
};
const size_t tp_ncolls = sizeof(tp_colls) / sizeof(tp_colls[0]);

/* The measurement of one size: [0] out-of-place, [1] in-place. */
struct row {
    size_t bytes;
    size_t count;
    const struct th_dtype *type;
    const char *redop;
    int root;
    double time_us[2]; /* -1 when the form does not exist (in place: see has_inplace) */
    double algbw[2];
    double busbw[2];
    double wrong[2]; /* -1 when not checked */
};

struct bench {
    ncclComm_t comm;
    int rank;
    int nranks;
    struct options opt;
    unsigned char *send_buf;
    unsigned char *recv_buf;
    void *send_handle; /* registrations (-R 1) or windows (-R 2) */
    void *recv_handle;
    unsigned char *want;
    /* -G: send_buf and recv_buf are device memory; these are their host images, where inputs
     * are written and results read back. */
    unsigned char *host_send;
    unsigned char *host_recv;
    double copy_gbs; /* -G: the device's own copy bandwidth, measured in this run */
    struct row *rows;
    size_t nrows;
    size_t cap_rows;
    double wrong_total;
    double local_wrong; /* this rank's own count: the exit status never rests on the library */
    double busbw_sum;
    size_t busbw_n;
};

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* Ends the run on a failed library call: the ranks are out of step from here on. */
static void check_call(struct bench *b, ncclResult_t res, const char *what)
{
    if (res != ncclSuccess) {
        fprintf(stderr, "tutti-perf: rank %d: %s failed: %s: %s\n", b->rank, what,
                ncclGetErrorString(res), ncclGetLastError(b->comm));
        ncclCommAbort(b->comm);
        exit(1);
    }
}

static void *alloc_or_die(size_t bytes)
{
    void *p = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096 + 4096);
    if (p == NULL) {
        fprintf(stderr, "tutti-perf: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    memset(p, 0, bytes);
    return p;
}

/* A registered buffer, which other ranks of the host map: an ordinary one registered with
 * ncclCommRegister (-R 1: Tutti moves its pages into a memory file), or ncclMemAlloc memory as
 * a symmetric window (-R 2; every rank registers alike, as the window call is collective), or
 * an ordinary buffer as a symmetric window (-R 2 --malloc). */
static void *registered_alloc_or_die(struct bench *b, size_t bytes, void **handle)
{
    void *p = NULL;
    size_t size = (bytes + 4095) / 4096 * 4096 + 4096;
    if (b->opt.local_register == 2 && b->opt.malloc_windows) {
        p = alloc_or_die(bytes);
        check_call(b, ncclCommWindowRegister(b->comm, p, size, (ncclWindow_t *)handle,
                                             NCCL_WIN_COLL_SYMMETRIC), "ncclCommWindowRegister");
    } else if (b->opt.local_register == 2) {
        check_call(b, ncclMemAlloc(&p, size), "ncclMemAlloc");
        check_call(b, ncclCommWindowRegister(b->comm, p, size, (ncclWindow_t *)handle,
                                             NCCL_WIN_COLL_SYMMETRIC), "ncclCommWindowRegister");
        memset(p, 0, bytes);
    } else {
        p = alloc_or_die(bytes);
        check_call(b, ncclCommRegister(b->comm, p, size, handle), "ncclCommRegister");
    }
    return p;
}

/* nccl-tests' header: the parameters, then one line per rank with its pid and host, gathered
 * with the library's AllGather. */
static void print_header(struct bench *b)
{
    enum { HOST_BYTES = 60 };
    struct rank_info {
        int32_t pid;
        char host[HOST_BYTES];
    } self, *all = calloc((size_t)b->nranks, sizeof(self));
    if (all == NULL) {
        fprintf(stderr, "tutti-perf: out of memory\n");
        exit(1);
    }
    memset(&self, 0, sizeof(self));
    self.pid = (int32_t)getpid();
    gethostname(self.host, HOST_BYTES - 1);
    check_call(b, ncclAllGather(&self, all, sizeof(self), ncclUint8, b->comm, NULL),
               "ncclAllGather of the rank table");
    const struct options *o = &b->opt;
    if (b->rank == 0 && !o->csv) {
        printf("# Collective test starting: tutti-perf %s\n", o->coll->name);
        printf("# nRanks %d minBytes %zu maxBytes %zu step: ", b->nranks, o->min_bytes,
               o->max_bytes);
        if (o->step_bytes > 0) {
            printf("%zu(bytes)", o->step_bytes);
        } else {
            printf("%g(factor)", o->step_factor);
        }
        printf(" warmup iters: %d iters: %d agg iters: 1 validation: %d blocking: %d "
               "average: %d local_register: %d\n#\n# Using devices\n",
               o->warmup, o->iters, o->check, o->blocking, o->average, o->local_register);
        for (int r = 0; r < b->nranks; r++) {
            all[r].host[HOST_BYTES - 1] = '\0';
            if (o->device)
                printf("#  Rank %2d Group  0 Pid %6d on %10s device  0 [%s] (device buffers)\n",
                       r, (int)all[r].pid, all[r].host, tp_dev_name());
            else
                printf("#  Rank %2d Group  0 Pid %6d on %10s device  - [host] CPU\n", r,
                       (int)all[r].pid, all[r].host);
        }
        if (o->device)
            printf("#\n# Device-to-device copy bandwidth (cudaMemcpyAsync of %zu bytes, rank 0, "
                   "this run): %.2f GB/s\n", o->max_bytes, b->copy_gbs);
        printf("#\n");
        printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       "
               "in-place          \n",
               "", "", "", "", "");
        printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size",
               "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
               "algbw", "busbw", "#wrong");
        printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
               "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
               "(GB/s)", "");
        fflush(stdout);
    } else if (b->rank == 0) {
        printf("collective,nranks,size,count,type,redop,root,oop_time_us,oop_algbw,oop_busbw,"
               "oop_wrong,ip_time_us,ip_algbw,ip_busbw,ip_wrong\n");
    }
    free(all);
}

/* Where the send and receive data of one form live in the two buffers. In place, AllGather and
 * Gather send from this rank's block of the receive buffer and ReduceScatter and Scatter receive
 * into this rank's block of the send buffer, as NCCL defines it (for Gather and Scatter it is
 * in place at the root only; the other ranks use the same offsets, as nccl-tests does); the
 * others pass one pointer twice. */
static void place_in(unsigned char *send_buf, unsigned char *recv_buf,
                     const struct th_case *tc, bool inplace, void **send, void **recv)
{
    size_t off = th_inplace_offset(tc) * tc->type->bytes;
    *send = send_buf;
    *recv = recv_buf;
    if (!inplace) {
        return;
    }
    if (tc->coll == TH_REDUCESCATTER || tc->coll == TH_SCATTER) {
        *recv = send_buf + off;
    } else if (tc->coll == TH_ALLGATHER || tc->coll == TH_GATHER) {
        *send = recv_buf + off;
    } else {
        *send = recv_buf;
    }
}

static void place(struct bench *b, const struct th_case *tc, bool inplace, void **send,
                  void **recv)
{
    place_in(b->send_buf, b->recv_buf, tc, inplace, send, recv);
}

/* -G: a pointer into a device buffer, as the same offset into its host image. */
static unsigned char *host_image(struct bench *b, void *dev)
{
    unsigned char *p = dev;
    if (p >= b->send_buf && p < b->send_buf + b->opt.max_bytes)
        return b->host_send + (p - b->send_buf);
    return b->host_recv + (p - b->recv_buf);
}

/* -G: one checked call on device buffers. The inputs are written into the host images and
 * copied up whole, the result copied back after the stream synchronised. */
static double check_once_device(struct bench *b, const struct call *c, const struct th_case *tc,
                                bool inplace)
{
    void *send, *recv;
    size_t elt = tc->type->bytes, recv_n = th_recv_count(tc);
    place(b, tc, inplace, &send, &recv);
    unsigned char *hsend = host_image(b, send), *hrecv = host_image(b, recv);
    th_fill_pattern(b->host_recv, b->opt.max_bytes, 0x5e57);
    th_fill_send(tc, hsend);
    if (!th_fill_expect(tc, b->want, 0, recv_n)) memcpy(b->want, hrecv, recv_n * elt);
    tp_dev_put(b->send_buf, b->host_send, b->opt.max_bytes);
    tp_dev_put(b->recv_buf, b->host_recv, b->opt.max_bytes);
    check_call(b, b->opt.coll->run(c, send, recv), b->opt.coll->name);
    tp_dev_sync();
    tp_dev_get(hrecv, recv, recv_n * elt);
    double wrong = 0;
    for (size_t j = 0; j < recv_n; j++) wrong += th_load(hrecv, j, elt) != th_load(b->want, j, elt);
    return wrong;
}

/* One checked call on exact inputs: the number of receive elements that differ from the
 * reference (for a non-root of Reduce and Gather, from the buffer as it was). */
static double check_once(struct bench *b, const struct call *c, const struct th_case *tc,
                         bool inplace)
{
    if (b->opt.device) return check_once_device(b, c, tc, inplace);
    void *send;
    void *recv;
    size_t elt = tc->type->bytes;
    size_t recv_n = th_recv_count(tc);
    place(b, tc, inplace, &send, &recv);
    if (!inplace || tc->coll == TH_ALLGATHER || tc->coll == TH_GATHER) {
        th_fill_pattern(b->recv_buf, recv_n * elt, 0x5e57);
    }
    th_fill_send(tc, send);
    if (!th_fill_expect(tc, b->want, 0, recv_n)) {
        memcpy(b->want, recv, recv_n * elt);
    }
    check_call(b, b->opt.coll->run(c, send, recv), b->opt.coll->name);
    double wrong = 0;
    if (memcmp(recv, b->want, recv_n * elt) != 0) {
        for (size_t j = 0; j < recv_n; j++) {
            wrong += th_load(recv, j, elt) != th_load(b->want, j, elt);
        }
    }
    return wrong;
}

/* Times one form: `warmup` calls, then `iters` back to back; returns microseconds per call. */
static double time_form(struct bench *b, const struct call *c, const struct th_case *tc,
                        bool inplace)
{
    void *send;
    void *recv;
    place(b, tc, inplace, &send, &recv);
    if (b->opt.device) {
        /* The inputs go up once; the timed calls run back to back on the stream, between two
         * CUDA events, as nccl-tests times them. */
        th_fill_send(tc, host_image(b, send));
        tp_dev_put(b->send_buf, b->host_send, b->opt.max_bytes);
        tp_dev_put(b->recv_buf, b->host_recv, b->opt.max_bytes);
        for (int i = 0; i < b->opt.warmup; i++)
            check_call(b, b->opt.coll->run(c, send, recv), b->opt.coll->name);
        tp_dev_sync();
        tp_dev_timer_start();
        for (int i = 0; i < b->opt.iters; i++)
            check_call(b, b->opt.coll->run(c, send, recv), b->opt.coll->name);
        return tp_dev_timer_stop_us() / b->opt.iters;
    }
    th_fill_send(tc, send);
    for (int i = 0; i < b->opt.warmup; i++) {
        check_call(b, b->opt.coll->run(c, send, recv), b->opt.coll->name);
    }
    double t0 = now_us();
    for (int i = 0; i < b->opt.iters; i++) {
        check_call(b, b->opt.coll->run(c, send, recv), b->opt.coll->name);
    }
    return (now_us() - t0) / b->opt.iters;
}

static void format_time(double us, char *buf, size_t bytes)
{
    if (us >= 10000.0) {
        snprintf(buf, bytes, "%7.0f", us);
    } else if (us >= 100.0) {
        snprintf(buf, bytes, "%7.1f", us);
    } else {
        snprintf(buf, bytes, "%7.2f", us);
    }
}

static void print_row(const struct bench *b, const struct row *r)
{
    if (b->opt.csv) {
        printf("%s,%d,%zu,%zu,%s,%s,%d", b->opt.coll->name, b->nranks, r->bytes, r->count,
               r->type->perf_name, r->redop, r->root);
        for (int f = 0; f < 2; f++) {
            if (r->time_us[f] < 0) {
                printf(",,,,");
                continue;
            }
            printf(",%.3f,%.4f,%.4f,", r->time_us[f], r->algbw[f], r->busbw[f]);
            if (r->wrong[f] >= 0) {
                printf("%.0f", r->wrong[f]);
            }
        }
        printf("\n");
        fflush(stdout);
        return;
    }
    printf("%12zu  %12zu  %8s  %6s  %6d", r->bytes, r->count, r->type->perf_name, r->redop,
           r->root);
    for (int f = 0; f < 2; f++) {
        char t[32];
        char w[32];
        if (r->time_us[f] < 0) {
            printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
            continue;
        }
        format_time(r->time_us[f], t, sizeof(t));
        if (r->wrong[f] >= 0) {
            snprintf(w, sizeof(w), "%.0f", r->wrong[f]);
        } else {
            snprintf(w, sizeof(w), "N/A");
        }
        printf("  %7s  %6.2f  %6.2f  %5s", t, r->algbw[f], r->busbw[f], w);
    }
    printf("\n");
    fflush(stdout);
}

static void keep_row(struct bench *b, const struct row *r)
{
    if (b->nrows == b->cap_rows) {
        b->cap_rows = b->cap_rows ? 2 * b->cap_rows : 64;
        b->rows = realloc(b->rows, b->cap_rows * sizeof(*b->rows));
        if (b->rows == NULL) {
            fprintf(stderr, "tutti-perf: out of memory\n");
            exit(1);
        }
    }
    b->rows[b->nrows++] = *r;
}

/* One size: both forms timed (and checked), combined across ranks, printed by rank 0. */
static void bench_size(struct bench *b, const struct th_dtype *t, ncclRedOp_t op, size_t bytes)
{
    const struct coll_desc *d = b->opt.coll;
    size_t total = bytes / t->bytes;
    size_t count = d->per_rank ? total / (size_t)b->nranks : total;
    struct call c = {b->comm, t, op, b->opt.root, count, b->rank, b->nranks};
    struct th_case tc = {
        .coll = d->model,
        .type = t,
        .op = op,
        .count = count,
        .root = b->opt.root,
        .rank = b->rank,
        .nranks = b->nranks,
        .seed = th_mix64(bytes * 31u + (uint64_t)t->dtype * 7u + (uint64_t)op),
    };
    struct row r = {
        .bytes = (d->per_rank ? count * (size_t)b->nranks : count) * t->bytes,
        .count = d->per_rank ? count * (size_t)b->nranks : count,
        .type = t,
        .redop = d->has_op ? th_op_name(op) : "none",
        .root = d->has_root ? b->opt.root : -1,
    };
    double times[2] = {0, 0};
    double wrong[2] = {0, 0};
    int nforms = d->has_inplace ? 2 : 1;
    for (int f = 0; f < nforms; f++) {
        times[f] = time_form(b, &c, &tc, f == 1);
        if (b->opt.check) {
            wrong[f] = check_once(b, &c, &tc, f == 1);
        }
    }
    /* Combine across ranks: the times as -a asks, the wrong counts summed. */
    static const ncclRedOp_t time_ops[4] = {ncclSum, ncclSum, ncclMin, ncclMax};
    if (b->opt.average != 0) {
        check_call(b, ncclAllReduce(times, times, 2, ncclFloat64, time_ops[b->opt.average],
                                    b->comm, NULL),
                   "ncclAllReduce of the times");
        if (b->opt.average == 1) {
            times[0] /= b->nranks;
            times[1] /= b->nranks;
        }
    }
    if (b->opt.check) {
        /* The table's counts are summed by the library under test; this rank's own count is
         * kept apart, so that a wrong result makes the exit status non-zero even if that sum
         * lost it. */
        double local = wrong[0] + (nforms > 1 ? wrong[1] : 0);
        if (local > 0) {
            b->local_wrong += local;
            fprintf(stderr, "tutti-perf: rank %d: %.0f wrong elements at %zu bytes\n", b->rank,
                    local, r.bytes);
        }
        check_call(b, ncclAllReduce(wrong, wrong, 2, ncclFloat64, ncclSum, b->comm, NULL),
                   "ncclAllReduce of the error counts");
    }
    for (int f = 0; f < 2; f++) {
        r.time_us[f] = f < nforms ? times[f] : -1;
        if (f >= nforms) {
            r.wrong[f] = -1;
            continue;
        }
        r.algbw[f] = times[f] > 0 ? (double)r.bytes / times[f] / 1e3 : 0.0;
        r.busbw[f] = r.algbw[f] * d->bus_factor(b->nranks);
        r.wrong[f] = b->opt.check ? wrong[f] : -1;
        b->wrong_total += b->opt.check ? wrong[f] : 0;
        b->busbw_sum += r.busbw[f];
        b->busbw_n++;
    }
    if (b->rank == 0) {
        print_row(b, &r);
        keep_row(b, &r);
    }
}

static size_t next_size(const struct options *o, size_t bytes, size_t elt)
{
    if (o->step_bytes > 0) {
        return bytes + o->step_bytes;
    }
    size_t next = (size_t)((double)bytes * o->step_factor);
    return next > bytes ? next : bytes + elt;
}

static void write_json(const struct bench *b)
{
    FILE *f = fopen(b->opt.json_path, "w");
    if (f == NULL) {
        fprintf(stderr, "tutti-perf: cannot write %s: %s\n", b->opt.json_path, strerror(errno));
        return;
    }
    fprintf(f, "{\n  \"tool\": \"tutti-perf\",\n  \"collective\": \"%s\",\n  \"nranks\": %d,\n",
            b->opt.coll->name, b->nranks);
    fprintf(f, "  \"iters\": %d,\n  \"warmup_iters\": %d,\n  \"check\": %d,\n  \"average\": %d,\n",
            b->opt.iters, b->opt.warmup, b->opt.check, b->opt.average);
    fprintf(f, "  \"results\": [");
    for (size_t i = 0; i < b->nrows; i++) {
        const struct row *r = &b->rows[i];
        fprintf(f,
                "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", "
                "\"root\": %d",
                i ? "," : "", r->bytes, r->count, r->type->perf_name, r->redop, r->root);
        static const char *const forms[2] = {"out_of_place", "in_place"};
        for (int k = 0; k < 2; k++) {
            if (r->time_us[k] < 0) {
                fprintf(f, ", \"%s\": {\"time_us\": null, \"algbw_gbs\": null, "
                        "\"busbw_gbs\": null, \"wrong\": null}", forms[k]);
                continue;
            }
            fprintf(f, ", \"%s\": {\"time_us\": %.3f, \"algbw_gbs\": %.4f, \"busbw_gbs\": %.4f, ",
                    forms[k], r->time_us[k], r->algbw[k], r->busbw[k]);
            if (r->wrong[k] >= 0) {
                fprintf(f, "\"wrong\": %.0f}", r->wrong[k]);
            } else {
                fprintf(f, "\"wrong\": null}");
            }
        }
        fprintf(f, "}");
    }
    fprintf(f, "\n  ],\n  \"wrong_total\": %.0f,\n  \"avg_busbw_gbs\": %.6f\n}\n", b->wrong_total,
            b->busbw_n ? b->busbw_sum / (double)b->busbw_n : 0.0);
    fclose(f);
}

int main(int argc, char **argv)
{
    struct bench b;
    memset(&b, 0, sizeof(b));
    if (!tp_parse_options(argc, argv, &b.opt)) {
        return b.opt.help ? 0 : 2;
    }
    /* -G: the device is made current before the communicator, as NCCL programs do, so that
     * the communicator knows its ranks are GPU ranks (the device-direct path, docs/cuda.md).
     * Every rank of the machine finds the same GPUs, so all skip alike. */
    if (b.opt.device) {
        char why[256];
        if (!tp_dev_init(why, sizeof why)) {
            fprintf(stderr, "tutti-perf: -G: %s\n", why);
            return 77; /* skipped, for tests that run it without a GPU */
        }
    }
    ncclResult_t res = tuttiCommInitFromEnv(&b.comm);
    if (res != ncclSuccess) {
        fprintf(stderr, "tutti-perf: tuttiCommInitFromEnv failed: %s: %s (run under tutti-run)\n",
                ncclGetErrorString(res), ncclGetLastError(NULL));
        return 1;
    }
    check_call(&b, ncclCommCount(b.comm, &b.nranks), "ncclCommCount");
    check_call(&b, ncclCommUserRank(b.comm, &b.rank), "ncclCommUserRank");
    if (b.opt.coll->has_root && b.opt.root >= b.nranks) {
        fprintf(stderr, "tutti-perf: root %d is not a rank of %d\n", b.opt.root, b.nranks);
        ncclCommDestroy(b.comm);
        return 2;
    }
    if (b.opt.device) {
        b.send_buf = tp_dev_alloc(b.opt.max_bytes);
        b.recv_buf = tp_dev_alloc(b.opt.max_bytes);
        b.host_send = alloc_or_die(b.opt.max_bytes);
        b.host_recv = alloc_or_die(b.opt.max_bytes);
        /* The limit a GPU collective is measured against, in the same run: rank 0 copies
         * alone, the others wait in the AllReduce below. */
        if (b.rank == 0) b.copy_gbs = tp_dev_copy_gbs(b.opt.max_bytes, 20);
        double sync = 0;
        check_call(&b, ncclAllReduce(&sync, &sync, 1, ncclFloat64, ncclSum, b.comm, NULL),
                   "ncclAllReduce after the copy bandwidth");
        if (b.opt.local_register == 2) {
            check_call(&b, ncclCommWindowRegister(b.comm, b.send_buf, b.opt.max_bytes,
                                                  (ncclWindow_t *)&b.send_handle,
                                                  NCCL_WIN_COLL_SYMMETRIC),
                       "ncclCommWindowRegister");
            check_call(&b, ncclCommWindowRegister(b.comm, b.recv_buf, b.opt.max_bytes,
                                                  (ncclWindow_t *)&b.recv_handle,
                                                  NCCL_WIN_COLL_SYMMETRIC),
                       "ncclCommWindowRegister");
        }
    } else if (b.opt.local_register) {
        b.send_buf = registered_alloc_or_die(&b, b.opt.max_bytes, &b.send_handle);
        b.recv_buf = registered_alloc_or_die(&b, b.opt.max_bytes, &b.recv_handle);
    } else {
        b.send_buf = alloc_or_die(b.opt.max_bytes);
        b.recv_buf = alloc_or_die(b.opt.max_bytes);
    }
    b.want = alloc_or_die(b.opt.max_bytes);
    print_header(&b);

    int nops = b.opt.coll->has_op ? b.opt.nops : 1;
    for (int d = 0; d < b.opt.ndtypes; d++) {
        for (int p = 0; p < nops; p++) {
            const struct th_dtype *t = b.opt.dtypes[d];
            for (size_t bytes = b.opt.min_bytes; bytes <= b.opt.max_bytes;
                 bytes = next_size(&b.opt, bytes, t->bytes)) {
                bench_size(&b, t, b.opt.ops[p], bytes);
            }
        }
    }

    if (b.rank == 0 && !b.opt.csv) {
        printf("# Out of bounds values : %.0f %s\n", b.wrong_total,
               b.wrong_total > 0 ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g \n#\n",
               b.busbw_n ? b.busbw_sum / (double)b.busbw_n : 0.0);
        if (b.opt.device && b.copy_gbs > 0 && b.nrows > 0) {
            const struct row *last = &b.rows[b.nrows - 1];
            printf("# Largest size %zu B: out-of-place busbw %.2f GB/s = %.1f%% of the "
                   "device-to-device copy bandwidth (%.2f GB/s)\n#\n", last->bytes,
                   last->busbw[0], 100.0 * last->busbw[0] / b.copy_gbs, b.copy_gbs);
        }
    }
    if (b.rank == 0 && b.opt.json_path != NULL) {
        write_json(&b);
    }
    /* A last collective keeps every rank alive until rank 0 has printed: a launcher stops the
     * others as soon as one exits non-zero. */
    fflush(stdout);
    double done = 0;
    check_call(&b, ncclAllReduce(&done, &done, 1, ncclFloat64, ncclSum, b.comm, NULL),
               "ncclAllReduce at the end");
    if (b.opt.device) {
        if (b.opt.local_register == 2) {
            check_call(&b, ncclCommWindowDeregister(b.comm, b.send_handle), "window deregister");
            check_call(&b, ncclCommWindowDeregister(b.comm, b.recv_handle), "window deregister");
        }
        tp_dev_free(b.send_buf);
        tp_dev_free(b.recv_buf);
        free(b.host_send);
        free(b.host_recv);
    } else if (b.opt.local_register == 2 && !b.opt.malloc_windows) {
        check_call(&b, ncclCommWindowDeregister(b.comm, b.send_handle), "window deregister");
        check_call(&b, ncclCommWindowDeregister(b.comm, b.recv_handle), "window deregister");
        check_call(&b, ncclMemFree(b.send_buf), "ncclMemFree");
        check_call(&b, ncclMemFree(b.recv_buf), "ncclMemFree");
    } else {
        if (b.opt.local_register == 2) {
            check_call(&b, ncclCommWindowDeregister(b.comm, b.send_handle), "window deregister");
            check_call(&b, ncclCommWindowDeregister(b.comm, b.recv_handle), "window deregister");
        }
        if (b.opt.local_register == 1) {
            check_call(&b, ncclCommDeregister(b.comm, b.send_handle), "ncclCommDeregister");
            check_call(&b, ncclCommDeregister(b.comm, b.recv_handle), "ncclCommDeregister");
        }
        free(b.send_buf);
        free(b.recv_buf);
    }
    check_call(&b, ncclCommDestroy(b.comm), "ncclCommDestroy");
    free(b.want);
    free(b.rows);
    return b.wrong_total > 0 || b.local_wrong > 0 ? 1 : 0;
}
