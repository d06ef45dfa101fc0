/* coll_matrix: the collective correctness matrix, run as every rank under tutti-run.
 *
 * For each selected datatype, count, op, collective, root and in-place form it fills exact inputs
 * (tests/harness.h), runs the collective with a NULL stream (complete on return) and checks every
 * element of the output bit for bit against the harness's independent reference. It also checks
 * what must not change: the send buffer of an out-of-place call, a non-root's receive buffer of
 * Reduce, and guard bytes on both sides of every buffer. Mismatches are counted and the first
 * few printed with both sides; the exit code is 1 when any was found. Uses the public API only. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "nccl.h"
#include "tutti.h"
#include "now_s.h"

/* Guard bytes before and after every buffer. The front guard is a multiple of 8 but not of 16,
 * so buffers are element-aligned without being SIMD-aligned. */
#define FRONT_GUARD 40
#define BACK_GUARD 64
#define MAX_LIST 64

struct options {
    bool colls[TH_NUM_ALL_COLLS];
    const struct th_dtype *dtypes[TH_NUM_DTYPES];
    int ndtypes;
    ncclRedOp_t ops[TH_NUM_OPS];
    int nops;
    const char *counts_spec;
    size_t big_bytes;
    int inplace_mask; /* 1: out-of-place, 2: in-place */
    const char *roots_spec;
    int iters;
    uint64_t seed;
    int max_report;
    bool verbose;
    const char *mem; /* --mem: plain, shared (ncclMemAlloc on every rank), mixed (even ranks)
                      * or registered (malloc'd and registered with ncclCommRegister) */
};

/* A buffer image computed for one case and reused by the next cases with the same data: both
 * in-place forms, every root, and AllReduce's result for Reduce. */
struct image_key {
    int kind; /* which data: see send_image() and expected_image() */
    const struct th_dtype *type;
    ncclRedOp_t op;
    size_t count;
    int root;
    uint64_t seed;
};

struct image_cache {
    bool valid;
    struct image_key key;
    unsigned char *bits;
    size_t cap_bytes;
};

struct matrix {
    ncclComm_t comm;
    int rank;
    int nranks;
    struct options opt;
    size_t chunk_bytes;
    size_t checks;
    size_t mismatches;
    int reported;
    struct image_cache send_cache;
    struct image_cache expect_cache;
};

struct region {
    unsigned char *raw; /* what to free */
    unsigned char *base;
    unsigned char *body;
    size_t body_bytes;
    void *handle; /* --mem registered: the registration */
};

static void usage(void)
{
    fprintf(stderr,
            "usage: coll_matrix [options]   (run every rank under tutti-run)\n"
            "  --colls LIST     allreduce,broadcast,reduce,allgather,reducescatter,alltoall,\n"
            "                   gather,scatter,sendrecv; all = the first five (the default),\n"
            "                   every = all nine\n"
            "  --dtypes LIST    int8,uint8,int32,uint32,int64,uint64,float16,float32,float64,\n"
            "                   bfloat16,fp8e4m3,fp8e5m2 (default all)\n"
            "  --ops LIST       sum,prod,max,min,avg (default all)\n"
            "  --counts LIST    numbers and chunk-1, chunk, chunk+1, big\n"
            "                   (default 0,1,7,chunk-1,chunk,chunk+1,big); chunk = elements of\n"
            "                   TUTTI_CHUNK_BYTES (or NCCL_BUFFSIZE/8)\n"
            "  --big BYTES      bytes of the 'big' count, plus 13 elements (default 3M)\n"
            "  --inplace 0|1|both    (default both)\n"
            "  --roots all|few|LIST  roots of broadcast/reduce (default all up to 5 ranks, else "
            "few)\n"
            "  --iters K        repeat the matrix K times with new data (default 1)\n"
            "  --seed S         base seed (default 1)\n"
            "  --mem plain|shared|mixed|registered   buffers from malloc, from ncclMemAlloc,\n"
            "                   from ncclMemAlloc on even ranks only, or from malloc and\n"
            "                   registered with ncclCommRegister (default plain)\n"
            "  --max-report N   mismatches printed per rank (default 10)\n"
            "  --verbose        rank 0 prints every case\n");
}

/* Splits a comma-separated list into `items` (modifying `text`); returns the number of items. */
static int split_list(char *text, char **items, int max_items)
{
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(text, ",", &save); tok != NULL && n < max_items;
         tok = strtok_r(NULL, ",", &save)) {
        items[n++] = tok;
    }
    return n;
}

static bool parse_lists(struct options *o, const char *colls, const char *dtypes,
                        const char *ops)
{
    char buf[1024];
    char *items[MAX_LIST];
    snprintf(buf, sizeof(buf), "%s", colls);
    int n = split_list(buf, items, MAX_LIST);
    for (int i = 0; i < n; i++) {
        enum th_coll coll;
        if (strcmp(items[i], "all") == 0 || strcmp(items[i], "every") == 0) {
            int last = strcmp(items[i], "all") == 0 ? TH_NUM_COLLS : TH_NUM_ALL_COLLS;
            for (int c = 0; c < last; c++) {
                o->colls[c] = true;
            }
        } else if (th_coll_parse(items[i], &coll)) {
            o->colls[coll] = true;
        } else {
            fprintf(stderr, "coll_matrix: unknown collective '%s'\n", items[i]);
            return false;
        }
    }
    snprintf(buf, sizeof(buf), "%s", dtypes);
    n = split_list(buf, items, MAX_LIST);
    for (int i = 0; i < n; i++) {
        if (strcmp(items[i], "all") == 0) {
            for (int d = 0; d < TH_NUM_DTYPES && o->ndtypes < TH_NUM_DTYPES; d++) {
                o->dtypes[o->ndtypes++] = &th_dtypes[d];
            }
        } else if (th_dtype_parse(items[i]) != NULL && o->ndtypes < TH_NUM_DTYPES) {
            o->dtypes[o->ndtypes++] = th_dtype_parse(items[i]);
        } else {
            fprintf(stderr, "coll_matrix: unknown datatype '%s'\n", items[i]);
            return false;
        }
    }
    snprintf(buf, sizeof(buf), "%s", ops);
    n = split_list(buf, items, MAX_LIST);
    for (int i = 0; i < n; i++) {
        ncclRedOp_t op;
        if (strcmp(items[i], "all") == 0) {
            for (int p = 0; p < TH_NUM_OPS && o->nops < TH_NUM_OPS; p++) {
                o->ops[o->nops++] = (ncclRedOp_t)p;
            }
        } else if (th_op_parse(items[i], &op) && o->nops < TH_NUM_OPS) {
            o->ops[o->nops++] = op;
        } else {
            fprintf(stderr, "coll_matrix: unknown op '%s'\n", items[i]);
            return false;
        }
    }
    return o->ndtypes > 0 && o->nops > 0;
}

static bool parse_options(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"colls", required_argument, NULL, 'c'},  {"dtypes", required_argument, NULL, 'd'},
        {"ops", required_argument, NULL, 'o'},    {"counts", required_argument, NULL, 'n'},
        {"big", required_argument, NULL, 'b'},    {"inplace", required_argument, NULL, 'p'},
        {"roots", required_argument, NULL, 'r'},  {"iters", required_argument, NULL, 'i'},
        {"seed", required_argument, NULL, 's'},   {"max-report", required_argument, NULL, 'm'},
        {"verbose", no_argument, NULL, 'v'},      {"help", no_argument, NULL, 'h'},
        {"mem", required_argument, NULL, 'M'},    {NULL, 0, NULL, 0},
    };
    const char *colls = "all";
    const char *dtypes = "all";
    const char *ops = "all";
    memset(o, 0, sizeof(*o));
    o->counts_spec = "0,1,7,chunk-1,chunk,chunk+1,big";
    o->big_bytes = 3u << 20;
    o->inplace_mask = 3;
    o->roots_spec = "";
    o->iters = 1;
    o->seed = 1;
    o->max_report = 10;
    o->mem = "plain";
    int ch;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            colls = optarg;
            break;
        case 'd':
            dtypes = optarg;
            break;
        case 'o':
            ops = optarg;
            break;
        case 'n':
            o->counts_spec = optarg;
            break;
        case 'b':
            if (!th_parse_size(optarg, &o->big_bytes)) {
                fprintf(stderr, "coll_matrix: bad --big '%s'\n", optarg);
                return false;
            }
            break;
        case 'p':
            o->inplace_mask = strcmp(optarg, "0") == 0 ? 1 : strcmp(optarg, "1") == 0 ? 2 : 3;
            break;
        case 'r':
            o->roots_spec = optarg;
            break;
        case 'i':
            o->iters = atoi(optarg);
            break;
        case 's':
            o->seed = strtoull(optarg, NULL, 0);
            break;
        case 'm':
            o->max_report = atoi(optarg);
            break;
        case 'v':
            o->verbose = true;
            break;
        case 'M':
            o->mem = optarg;
            if (strcmp(optarg, "plain") != 0 && strcmp(optarg, "shared") != 0 &&
                strcmp(optarg, "mixed") != 0 && strcmp(optarg, "registered") != 0) {
                fprintf(stderr, "coll_matrix: bad --mem '%s' (plain, shared, mixed or "
                        "registered)\n", optarg);
                return false;
            }
            break;
        default:
            usage();
            return false;
        }
    }
    if (optind != argc) {
        usage();
        return false;
    }
    return parse_lists(o, colls, dtypes, ops);
}

/* Slot bytes the library cuts messages into, as it derives them from the environment. */
static size_t chunk_bytes_from_env(void)
{
    const char *v = getenv("TUTTI_CHUNK_BYTES");
    if (v != NULL && atoll(v) > 0) {
        return (size_t)atoll(v);
    }
    v = getenv("NCCL_BUFFSIZE");
    if (v != NULL && atoll(v) >= 8) {
        return (size_t)atoll(v) / 8;
    }
    return (4u << 20) / 8;
}

/* The distinct counts of --counts for one datatype, in the order given. */
static int resolve_counts(const struct matrix *m, const struct th_dtype *t, size_t *counts)
{
    char buf[1024];
    char *items[MAX_LIST];
    snprintf(buf, sizeof(buf), "%s", m->opt.counts_spec);
    int n = split_list(buf, items, MAX_LIST);
    size_t chunk = m->chunk_bytes / t->bytes > 0 ? m->chunk_bytes / t->bytes : 1;
    int out = 0;
    for (int i = 0; i < n; i++) {
        size_t c;
        if (strcmp(items[i], "chunk") == 0) {
            c = chunk;
        } else if (strcmp(items[i], "chunk-1") == 0) {
            c = chunk - 1;
        } else if (strcmp(items[i], "chunk+1") == 0) {
            c = chunk + 1;
        } else if (strcmp(items[i], "big") == 0) {
            c = m->opt.big_bytes / t->bytes + 13;
        } else if (!th_parse_size(items[i], &c)) {
            fprintf(stderr, "coll_matrix: bad count '%s'\n", items[i]);
            exit(2);
        }
        bool seen = false;
        for (int k = 0; k < out; k++) {
            seen = seen || counts[k] == c;
        }
        if (!seen) {
            counts[out++] = c;
        }
    }
    return out;
}

static int resolve_roots(const struct matrix *m, int *roots)
{
    int n = 0;
    const char *spec = m->opt.roots_spec;
    if (strcmp(spec, "all") == 0 || (spec[0] == '\0' && m->nranks <= 5)) {
        for (int r = 0; r < m->nranks; r++) {
            roots[n++] = r;
        }
        return n;
    }
    int want[MAX_LIST];
    int nwant = 0;
    if (spec[0] == '\0' || strcmp(spec, "few") == 0) {
        want[nwant++] = 0;
        want[nwant++] = 1;
        want[nwant++] = m->nranks / 2;
        want[nwant++] = m->nranks - 1;
    } else {
        char buf[512];
        char *items[MAX_LIST];
        snprintf(buf, sizeof(buf), "%s", spec);
        int k = split_list(buf, items, MAX_LIST);
        for (int i = 0; i < k; i++) {
            want[nwant++] = atoi(items[i]);
        }
    }
    for (int i = 0; i < nwant; i++) {
        bool seen = want[i] < 0 || want[i] >= m->nranks;
        for (int k = 0; k < n; k++) {
            seen = seen || roots[k] == want[i];
        }
        if (!seen) {
            roots[n++] = want[i];
        }
    }
    return n;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes > 0 ? bytes : 1);
    if (p == NULL) {
        fprintf(stderr, "coll_matrix: out of memory (%zu bytes)\n", bytes);
        exit(2);
    }
    return p;
}

/* Whether this rank's buffers come from ncclMemAlloc (--mem), which peers map instead of copying
 * them through the kernel: "mixed" makes even ranks do so and odd ones not, so that every path
 * meets every other. With "registered" they come from malloc and are registered with
 * registered_comm, which moves their whole pages into memory the peers map and leaves the
 * partial pages at either end (guards included) to cross-memory attach; each rank's buffers sit
 * differently against the pages, so the edges differ from rank to rank. */
static bool shared_mem;
static ncclComm_t registered_comm;
static size_t registered_shift; /* bytes, a multiple of 64 that differs from rank to rank */

static void region_alloc(struct region *r, size_t body_bytes, uint32_t salt)
{
    size_t total = (FRONT_GUARD + body_bytes + BACK_GUARD + 63) / 64 * 64;
    if (shared_mem) {
        if (ncclMemAlloc((void **)&r->base, total) != ncclSuccess) r->base = NULL;
    } else {
        r->raw = aligned_alloc(64, total + registered_shift);
        r->base = r->raw != NULL ? r->raw + registered_shift : NULL;
    }
    if (r->base == NULL) {
        fprintf(stderr, "coll_matrix: out of memory (%zu bytes)\n", total);
        exit(2);
    }
    r->body = r->base + FRONT_GUARD;
    r->body_bytes = body_bytes;
    th_fill_pattern(r->base, FRONT_GUARD, salt);
    th_fill_pattern(r->body + body_bytes, BACK_GUARD, salt + 1);
    r->handle = NULL;
    /* Registered after the guards are written: their check also shows that moving the pages
     * kept what was there. */
    if (registered_comm != NULL &&
        ncclCommRegister(registered_comm, r->base, total, &r->handle) != ncclSuccess) {
        fprintf(stderr, "coll_matrix: ncclCommRegister of %zu bytes failed: %s\n", total,
                ncclGetLastError(registered_comm));
        exit(2);
    }
}

static void region_free(struct region *r)
{
    if (r->handle != NULL && ncclCommDeregister(registered_comm, r->handle) != ncclSuccess) {
        fprintf(stderr, "coll_matrix: ncclCommDeregister failed: %s\n",
                ncclGetLastError(registered_comm));
        exit(2);
    }
    if (shared_mem)
        ncclMemFree(r->base);
    else
        free(r->raw);
}

static void describe(const struct th_case *c, bool inplace, char *buf, size_t bytes)
{
    snprintf(buf, bytes, "%s %s %s count=%zu inplace=%d root=%d", th_coll_name(c->coll),
             c->type->name, th_coll_has_op(c->coll) ? th_op_name(c->op) : "-", c->count,
             inplace ? 1 : 0, th_coll_has_root(c->coll) ? c->root : -1);
}

static void format_element(const struct th_dtype *t, uint64_t bits, char *buf, size_t bytes)
{
    int digits = (int)(2 * t->bytes);
    if (t->is_float) {
        snprintf(buf, bytes, "0x%0*" PRIx64 " (%g)", digits, bits, th_float_decode(bits, t));
    } else if (t->is_signed) {
        int64_t v = (int64_t)(bits << (64 - 8 * t->bytes)) >> (64 - 8 * t->bytes);
        snprintf(buf, bytes, "0x%0*" PRIx64 " (%" PRId64 ")", digits, bits, v);
    } else {
        snprintf(buf, bytes, "0x%0*" PRIx64 " (%" PRIu64 ")", digits, bits, bits);
    }
}

/* Raw bytes, for the guards. */
static const struct th_dtype byte_type = {ncclUint8, "byte", "byte", 1, false, false, 0, 0, false};

/* Compares `count` elements of type `t` and reports the differing ones; `what` names the span
 * and `base` is the index of its first element. */
static void compare(struct matrix *m, const struct th_case *c, bool inplace, const char *what,
                    const void *got, const void *want, size_t count, const struct th_dtype *t,
                    size_t base)
{
    size_t elt = t->bytes;
    if (count == 0 || memcmp(got, want, count * elt) == 0) {
        return;
    }
    for (size_t j = 0; j < count; j++) {
        uint64_t g = th_load(got, j, elt);
        uint64_t w = th_load(want, j, elt);
        if (g == w) {
            continue;
        }
        m->mismatches++;
        if (m->reported < m->opt.max_report) {
            char desc[256];
            char gs[64];
            char ws[64];
            describe(c, inplace, desc, sizeof(desc));
            format_element(t, g, gs, sizeof(gs));
            format_element(t, w, ws, sizeof(ws));
            fprintf(stderr, "rank %d: MISMATCH %s %s[%zu]: got %s want %s\n", m->rank, desc,
                    what, base + j, gs, ws);
            m->reported++;
        }
    }
}

static void check_guards(struct matrix *m, const struct th_case *c, bool inplace,
                         const struct region *r, uint32_t salt, const char *name)
{
    unsigned char want[BACK_GUARD > FRONT_GUARD ? BACK_GUARD : FRONT_GUARD];
    char what[64];
    th_fill_pattern(want, FRONT_GUARD, salt);
    snprintf(what, sizeof(what), "%s front guard", name);
    compare(m, c, inplace, what, r->base, want, FRONT_GUARD, &byte_type, 0);
    th_fill_pattern(want, BACK_GUARD, salt + 1);
    snprintf(what, sizeof(what), "%s back guard", name);
    compare(m, c, inplace, what, r->body + r->body_bytes, want, BACK_GUARD, &byte_type, 0);
}

/* The image cached under `key`, recomputed by `fill` into `elements` elements when the key
 * differs. */
static const unsigned char *cached_image(struct image_cache *cache, const struct image_key *key,
                                         const struct th_case *c, size_t elements,
                                         void (*fill)(const struct th_case *, void *, size_t))
{
    if (cache->valid && memcmp(&cache->key, key, sizeof(*key)) == 0) {
        return cache->bits;
    }
    size_t bytes = elements * c->type->bytes;
    if (cache->bits == NULL || bytes > cache->cap_bytes) {
        free(cache->bits);
        cache->bits = xmalloc(bytes);
        cache->cap_bytes = bytes;
    }
    fill(c, cache->bits, elements);
    cache->key = *key;
    cache->valid = true;
    return cache->bits;
}

static void fill_send(const struct th_case *c, void *buf, size_t elements)
{
    (void)elements;
    th_fill_send(c, buf);
}

static void fill_expect(const struct th_case *c, void *buf, size_t elements)
{
    th_fill_expect(c, buf, 0, elements);
}

/* This rank's send data: AllReduce and Reduce send the same; Broadcast, AllGather, Gather and
 * SendRecv send the same raw data whatever the root, and AlltoAll and Scatter a longer run of it
 * (nranks blocks), which is an image of its own. */
static const unsigned char *send_image(struct matrix *m, const struct th_case *c)
{
    struct image_key key;
    memset(&key, 0, sizeof(key)); /* the padding too: keys are compared with memcmp */
    key.kind = c->coll == TH_REDUCESCATTER                          ? 2
               : th_coll_has_op(c->coll)                            ? 1
               : c->coll == TH_ALLTOALL || c->coll == TH_SCATTER ? 3
                                                                   : 0;
    key.type = c->type;
    key.op = th_coll_has_op(c->coll) ? c->op : ncclSum;
    key.count = c->count;
    key.root = -1;
    key.seed = c->seed;
    return cached_image(&m->send_cache, &key, c, th_send_count(c), fill_send);
}

/* The expected receive buffer of case `c`, or NULL when it must stay untouched (a non-root of
 * Reduce or Gather). */
static const unsigned char *expected_image(struct matrix *m, const struct th_case *c)
{
    if ((c->coll == TH_REDUCE || c->coll == TH_GATHER) && c->rank != c->root) {
        return NULL;
    }
    struct image_key key;
    memset(&key, 0, sizeof(key));
    key.kind = c->coll == TH_REDUCE ? TH_ALLREDUCE : c->coll;
    key.type = c->type;
    key.op = th_coll_has_op(c->coll) ? c->op : ncclSum;
    key.count = c->count;
    key.root = th_coll_has_root(c->coll) && c->coll != TH_REDUCE ? c->root : -1;
    key.seed = c->seed;
    return cached_image(&m->expect_cache, &key, c, th_recv_count(c), fill_expect);
}

static ncclResult_t call_collective(struct matrix *m, const struct th_case *c, const void *send,
                                    void *recv)
{
    ncclDataType_t dt = c->type->dtype;
    switch (c->coll) {
    case TH_ALLREDUCE:
        return ncclAllReduce(send, recv, c->count, dt, c->op, m->comm, NULL);
    case TH_BROADCAST:
        return ncclBroadcast(send, recv, c->count, dt, c->root, m->comm, NULL);
    case TH_REDUCE:
        return ncclReduce(send, recv, c->count, dt, c->op, c->root, m->comm, NULL);
    case TH_ALLGATHER:
        return ncclAllGather(send, recv, c->count, dt, m->comm, NULL);
    case TH_REDUCESCATTER:
        return ncclReduceScatter(send, recv, c->count, dt, c->op, m->comm, NULL);
    case TH_ALLTOALL:
        return ncclAlltoAll(send, recv, c->count, dt, m->comm, NULL);
    case TH_GATHER:
        return ncclGather(send, recv, c->count, dt, c->root, m->comm, NULL);
    case TH_SCATTER:
        return ncclScatter(send, recv, c->count, dt, c->root, m->comm, NULL);
    default: {
        /* SendRecv: to the next rank, from the previous one, in one group. */
        int to = (c->rank + 1) % c->nranks;
        int from = (c->rank + c->nranks - 1) % c->nranks;
        ncclResult_t res = ncclGroupStart();
        ncclResult_t sres = ncclSend(send, c->count, dt, to, m->comm, NULL);
        ncclResult_t rres = ncclRecv(recv, c->count, dt, from, m->comm, NULL);
        ncclResult_t eres = ncclGroupEnd();
        if (res != ncclSuccess) return res;
        return sres != ncclSuccess ? sres : rres != ncclSuccess ? rres : eres;
    }
    }
}

/* A failed call leaves the ranks out of step, so the run ends here. */
static void run_or_die(struct matrix *m, const struct th_case *c, bool inplace, const void *send,
                       void *recv)
{
    ncclResult_t res = call_collective(m, c, send, recv);
    if (res != ncclSuccess) {
        char desc[256];
        describe(c, inplace, desc, sizeof(desc));
        fprintf(stderr, "rank %d: %s failed: %s: %s\n", m->rank, desc, ncclGetErrorString(res),
                ncclGetLastError(m->comm));
        ncclCommAbort(m->comm);
        exit(1);
    }
}

/* In-place: one buffer. AllGather's and Gather's send data sits at this rank's block of it,
 * ReduceScatter's and Scatter's receive block likewise (NCCL's in-place forms: for Gather and
 * Scatter they count at the root, and the other ranks use the same offsets, as nccl-tests
 * does); the other collectives pass the same pointer twice. A rank whose buffer must not change
 * compares it with a copy taken before the call. */
static void run_inplace(struct matrix *m, const struct th_case *c, const unsigned char *send_img,
                        const unsigned char *want)
{
    size_t elt = c->type->bytes;
    size_t send_n = th_send_count(c);
    size_t recv_n = th_recv_count(c);
    size_t off = th_inplace_offset(c);
    size_t body_n = send_n > recv_n ? send_n : recv_n;
    uint32_t salt = (uint32_t)c->seed;
    struct region r;
    region_alloc(&r, body_n * elt, salt);
    unsigned char *send = r.body;
    unsigned char *recv = r.body;
    if (c->coll == TH_ALLGATHER || c->coll == TH_GATHER) {
        th_fill_pattern(r.body, body_n * elt, salt + 2);
        send = r.body + off * elt;
    } else if (c->coll == TH_REDUCESCATTER || c->coll == TH_SCATTER) {
        recv = r.body + off * elt;
    }
    memcpy(send, send_img, send_n * elt);
    unsigned char *before = NULL;
    if (want == NULL) {
        before = xmalloc(recv_n * elt);
        memcpy(before, recv, recv_n * elt);
    }

    run_or_die(m, c, true, send, recv);

    check_guards(m, c, true, &r, salt, "buffer");
    if (want != NULL) {
        compare(m, c, true, "recvbuff", recv, want, recv_n, c->type, 0);
    } else {
        compare(m, c, true, "non-root buffer (must be unchanged)", recv, before, recv_n, c->type,
                0);
        free(before);
    }
    region_free(&r);
}

static void run_outofplace(struct matrix *m, const struct th_case *c,
                           const unsigned char *send_img, const unsigned char *want)
{
    size_t elt = c->type->bytes;
    size_t send_n = th_send_count(c);
    size_t recv_n = th_recv_count(c);
    uint32_t salt = (uint32_t)c->seed;
    struct region s;
    struct region r;
    region_alloc(&s, send_n * elt, salt);
    region_alloc(&r, recv_n * elt, salt + 3);
    memcpy(s.body, send_img, send_n * elt);
    th_fill_pattern(r.body, recv_n * elt, salt + 5);

    run_or_die(m, c, false, s.body, r.body);

    check_guards(m, c, false, &s, salt, "sendbuff");
    compare(m, c, false, "sendbuff (must be unchanged)", s.body, send_img, send_n, c->type, 0);
    check_guards(m, c, false, &r, salt + 3, "recvbuff");
    if (want != NULL) {
        compare(m, c, false, "recvbuff", r.body, want, recv_n, c->type, 0);
    } else {
        unsigned char *sentinel = xmalloc(recv_n * elt);
        th_fill_pattern(sentinel, recv_n * elt, salt + 5);
        compare(m, c, false, "non-root recvbuff (must be unchanged)", r.body, sentinel, recv_n,
                c->type, 0);
        free(sentinel);
    }
    region_free(&s);
    region_free(&r);
}

static void run_case(struct matrix *m, const struct th_case *c)
{
    const unsigned char *send_img = send_image(m, c);
    const unsigned char *want = expected_image(m, c);
    /* AlltoAll and SendRecv have no in-place form in NCCL. */
    bool has_inplace = c->coll != TH_ALLTOALL && c->coll != TH_SENDRECV;
    for (int form = 0; form < 2; form++) {
        if (!(m->opt.inplace_mask & (1 << form)) || (form == 1 && !has_inplace)) {
            continue;
        }
        if (m->opt.verbose && m->rank == 0) {
            char desc[256];
            describe(c, form == 1, desc, sizeof(desc));
            printf("case %s\n", desc);
            fflush(stdout);
        }
        if (form == 1) {
            run_inplace(m, c, send_img, want);
        } else {
            run_outofplace(m, c, send_img, want);
        }
        m->checks++;
    }
}

/* One pass over the matrix. Every rank walks the same loops in the same order, so the calls
 * match; the data seed depends on (iteration, dtype, count, op) only, so that cases with equal
 * data share their images. The collectives without an op run once per count. */
static void run_matrix(struct matrix *m, int iter)
{
    /* Collectives that share data run one after the other, so the image caches hit. */
    static const int coll_order[TH_NUM_ALL_COLLS] = {
        TH_ALLREDUCE, TH_REDUCE, TH_REDUCESCATTER, TH_BROADCAST, TH_ALLGATHER,
        TH_GATHER,    TH_SENDRECV, TH_ALLTOALL,    TH_SCATTER};
    int roots[MAX_LIST];
    int nroots = resolve_roots(m, roots);
    for (int d = 0; d < m->opt.ndtypes; d++) {
        const struct th_dtype *t = m->opt.dtypes[d];
        size_t counts[MAX_LIST];
        int ncounts = resolve_counts(m, t, counts);
        for (int k = 0; k < ncounts; k++) {
            for (int p = 0; p < m->opt.nops; p++) {
                for (int ci = 0; ci < TH_NUM_ALL_COLLS; ci++) {
                    int coll = coll_order[ci];
                    bool has_op = th_coll_has_op((enum th_coll)coll);
                    if (!m->opt.colls[coll] || (!has_op && p > 0)) {
                        continue;
                    }
                    struct th_case c = {
                        .coll = (enum th_coll)coll,
                        .type = t,
                        .op = m->opt.ops[p],
                        .count = counts[k],
                        .rank = m->rank,
                        .nranks = m->nranks,
                    };
                    c.seed = th_mix64(m->opt.seed * 1000003u + (uint64_t)iter * 7919u +
                                      (uint64_t)t->dtype * 131u + counts[k] * 17u +
                                      (uint64_t)(has_op ? m->opt.ops[p] : 99));
                    int nr = th_coll_has_root(c.coll) ? nroots : 1;
                    for (int ri = 0; ri < nr; ri++) {
                        c.root = th_coll_has_root(c.coll) ? roots[ri] : 0;
                        run_case(m, &c);
                    }
                }
            }
        }
    }
}

int main(int argc, char **argv)
{
    struct matrix m;
    memset(&m, 0, sizeof(m));
    if (!parse_options(argc, argv, &m.opt)) {
        return 2;
    }
    m.chunk_bytes = chunk_bytes_from_env();
    ncclResult_t res = tuttiCommInitFromEnv(&m.comm);
    if (res != ncclSuccess) {
        fprintf(stderr, "coll_matrix: tuttiCommInitFromEnv failed: %s: %s (run under tutti-run)\n",
                ncclGetErrorString(res), ncclGetLastError(NULL));
        return 1;
    }
    if (ncclCommCount(m.comm, &m.nranks) != ncclSuccess ||
        ncclCommUserRank(m.comm, &m.rank) != ncclSuccess) {
        fprintf(stderr, "coll_matrix: cannot query the communicator\n");
        return 1;
    }
    shared_mem = strcmp(m.opt.mem, "shared") == 0 ||
                 (strcmp(m.opt.mem, "mixed") == 0 && m.rank % 2 == 0);
    if (strcmp(m.opt.mem, "registered") == 0) {
        registered_comm = m.comm;
        registered_shift = (size_t)(m.rank * 23 % 64) * 64;
    }
    if (m.rank == 0) {
        printf("coll_matrix: %d ranks, chunk %zu bytes, %d dtypes, %d ops, counts %s, iters %d\n",
               m.nranks, m.chunk_bytes, m.opt.ndtypes, m.opt.nops, m.opt.counts_spec,
               m.opt.iters);
        fflush(stdout);
    }
    double t0 = now_s();
    for (int iter = 0; iter < m.opt.iters; iter++) {
        run_matrix(&m, iter);
    }
    double elapsed = now_s() - t0;
    if (m.mismatches > 0) {
        printf("rank %d/%d: FAILED: %zu mismatches in %zu checks (%.1f s)\n", m.rank, m.nranks,
               m.mismatches, m.checks, elapsed);
    } else {
        printf("rank %d/%d: ok: %zu checks (%.1f s)\n", m.rank, m.nranks, m.checks, elapsed);
    }
    /* A last collective keeps every rank alive until all have printed: the launcher stops the
     * others as soon as one exits non-zero. */
    fflush(stdout);
    double done = 0;
    res = ncclAllReduce(&done, &done, 1, ncclFloat64, ncclSum, m.comm, NULL);
    if (res == ncclSuccess) {
        res = ncclCommDestroy(m.comm);
    }
    if (res != ncclSuccess) {
        fprintf(stderr, "rank %d: ending the run failed: %s\n", m.rank, ncclGetErrorString(res));
        return 1;
    }
    free(m.send_cache.bits);
    free(m.expect_cache.bits);
    return m.mismatches > 0 ? 1 : 0;
}
