/* Exhaustive check of the ring schedules, without any transport: every rank count 1..64, several
 * buffer sizes, every collective. Each element is symbolic: the set of ranks whose contribution
 * it holds, how many contributions, how many had the pre-operation applied and how many times
 * the post-operation ran. A simulated ring with unbounded links executes the real `next`
 * functions; at the end every output must hold each contribution exactly once, pre-processed
 * once each and post-processed once, on every rank that should have it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/coll.h"
#include "check.h"

struct sym {
    uint64_t mask;
    uint32_t count;
    uint16_t pre;
    uint16_t post;
};

struct msg {
    size_t count;
    struct sym *vals;
    struct msg *next;
};

struct link {
    struct msg *head, *tail;
};


static struct sym apply(struct sym v, unsigned flags, unsigned which)
{
    if (flags & which & TT_REDUCE_PRE) v.pre++;
    if (flags & which & TT_REDUCE_POST) v.post++;
    return v;
}

static struct sym combine(struct sym local, struct sym in, unsigned flags)
{
    local = apply(local, flags, TT_REDUCE_PRE);
    struct sym r = {local.mask | in.mask, local.count + in.count, (uint16_t)(local.pre + in.pre),
                    (uint16_t)(local.post + in.post)};
    if ((local.mask & in.mask) != 0) r.count += 1000; /* a contribution counted twice */
    return apply(r, flags, TT_REDUCE_POST);
}

static void push(struct link *l, const struct sym *vals, size_t count)
{
    struct msg *m = calloc(1, sizeof *m);
    m->count = count;
    m->vals = malloc((count ? count : 1) * sizeof *vals);
    memcpy(m->vals, vals, count * sizeof *vals);
    if (l->tail) l->tail->next = m; else l->head = m;
    l->tail = m;
}

static struct msg *pop(struct link *l)
{
    struct msg *m = l->head;
    if (m) {
        l->head = m->next;
        if (!l->head) l->tail = NULL;
    }
    return m;
}

/* Executes one primitive of rank r; returns 0 if it must wait for input. */
static int exec_prim(const struct tt_prim *p, struct link *in_link, struct link *out_link)
{
    const struct sym *src = p->src;
    struct sym *dst = p->dst;
    size_t n = p->count;
    struct msg *m = NULL;
    bool recv = p->kind == TT_PRIM_RECV || p->kind == TT_PRIM_RECV_COPY_SEND ||
                p->kind == TT_PRIM_RECV_REDUCE_SEND || p->kind == TT_PRIM_RECV_REDUCE_COPY ||
                p->kind == TT_PRIM_RECV_REDUCE_COPY_SEND;
    if (recv && n > 0) {
        if (in_link->head == NULL) return 0;
        m = pop(in_link);
        if (m->count != n) FAIL("message of %zu elements where %zu were due", m->count, n);
    }
    struct sym *out = malloc((n ? n : 1) * sizeof *out);
    for (size_t i = 0; i < n; i++) {
        switch (p->kind) {
        case TT_PRIM_COPY: dst[i] = apply(apply(src[i], p->flags, TT_REDUCE_PRE), p->flags, TT_REDUCE_POST); break;
        case TT_PRIM_SEND: out[i] = apply(src[i], p->flags, TT_REDUCE_PRE); break;
        case TT_PRIM_COPY_SEND: out[i] = dst[i] = src[i]; break;
        case TT_PRIM_RECV: dst[i] = apply(m->vals[i], p->flags, TT_REDUCE_POST); break;
        case TT_PRIM_RECV_COPY_SEND: out[i] = dst[i] = m->vals[i]; break;
        case TT_PRIM_RECV_REDUCE_SEND:
            out[i] = combine(src[i], m->vals[i], p->flags & TT_REDUCE_PRE);
            break;
        case TT_PRIM_RECV_REDUCE_COPY: dst[i] = combine(src[i], m->vals[i], p->flags); break;
        case TT_PRIM_RECV_REDUCE_COPY_SEND:
            out[i] = dst[i] = combine(src[i], m->vals[i], p->flags);
            break;
        }
    }
    bool send = p->kind == TT_PRIM_SEND || p->kind == TT_PRIM_COPY_SEND ||
                p->kind == TT_PRIM_RECV_COPY_SEND || p->kind == TT_PRIM_RECV_REDUCE_SEND ||
                p->kind == TT_PRIM_RECV_REDUCE_COPY_SEND;
    if (send && n > 0) push(out_link, out, n);
    free(out);
    if (m) {
        free(m->vals);
        free(m);
    }
    return 1;
}

static const struct sym UNTOUCHED = {0, 0, 0, 7777};

/* Runs collective `coll` on n ranks with `count` (NCCL's meaning) and checks every output. */
static void check(enum tt_coll coll, int n, size_t count, size_t chunk_count, int root)
{
    size_t in_count = coll == TT_COLL_REDUCESCATTER ? count * (size_t)n : count;
    size_t out_count = coll == TT_COLL_ALLGATHER ? count * (size_t)n : count;
    struct tt_op *ops = calloc((size_t)n, sizeof *ops);
    struct sym **in = calloc((size_t)n, sizeof *in), **out = calloc((size_t)n, sizeof *out);
    struct link *links = calloc((size_t)n, sizeof *links); /* links[r]: r -> r+1 */
    bool *busy = calloc((size_t)n, sizeof *busy);
    for (int r = 0; r < n; r++) {
        in[r] = malloc((in_count + 1) * sizeof **in);
        out[r] = malloc((out_count + 1) * sizeof **out);
        for (size_t i = 0; i < in_count; i++) in[r][i] = (struct sym){1ull << r, 1, 0, 0};
        for (size_t i = 0; i < out_count; i++) out[r][i] = UNTOUCHED;
        ops[r] = (struct tt_op){.coll = coll, .sendbuff = in[r], .recvbuff = out[r],
                                .count = count, .elt_bytes = sizeof(struct sym), .root = root,
                                .rank = r, .nranks = n, .slice_count = chunk_count,
                                .chunk_count = chunk_count};
        /* No connections: this test moves the primitives itself. */
        static const struct tt_algo_env env = {0};
        tt_algo_bind(&ops[r], TT_ALGO_RING, &env);
        tt_algo_op_start(&ops[r]);
    }
    /* Round-robin until every rank is done; a full round without progress is a deadlock. */
    int live = n;
    while (live > 0) {
        int moved = 0;
        for (int r = 0; r < n; r++) {
            struct tt_op *op = &ops[r];
            if (op->finished) continue;
            if (!op->have_prim) {
                if (!op->next(op, &op->prim)) {
                    op->finished = true;
                    live--;
                    moved = 1;
                    continue;
                }
                op->have_prim = true;
            }
            if (exec_prim(&op->prim, &links[(r + n - 1) % n], &links[r])) {
                op->have_prim = false;
                moved = 1;
            }
        }
        if (!moved) {
            FAIL("%s n=%d count=%zu: deadlock", tt_coll_name(coll), n, count);
            break;
        }
    }
    for (int r = 0; r < n; r++)
        if (links[r].head) FAIL("%s n=%d count=%zu: data left on link %d", tt_coll_name(coll), n, count, r);

    uint64_t all = n == 64 ? ~0ull : (1ull << n) - 1;
    for (int r = 0; r < n; r++) {
        for (size_t i = 0; i < out_count; i++) {
            struct sym want;
            switch (coll) {
            case TT_COLL_ALLREDUCE:
            case TT_COLL_REDUCESCATTER:
                want = (struct sym){all, (uint32_t)n, (uint16_t)n, 1};
                break;
            case TT_COLL_REDUCE:
                want = r == root ? (struct sym){all, (uint32_t)n, (uint16_t)n, 1} : UNTOUCHED;
                break;
            case TT_COLL_ALLGATHER:
                want = (struct sym){1ull << (i / count), 1, 0, 0};
                break;
            default: /* broadcast */
                want = (struct sym){1ull << root, 1, 0, 0};
                break;
            }
            struct sym got = out[r][i];
            if (got.mask != want.mask || got.count != want.count || got.pre != want.pre ||
                got.post != want.post)
                FAIL("%s n=%d count=%zu root=%d rank %d elem %zu: got mask %" PRIx64
                     " count %u pre %u post %u, want mask %" PRIx64 " count %u pre %u post %u",
                     tt_coll_name(coll), n, count, root, r, i, got.mask, got.count, got.pre,
                     got.post, want.mask, want.count, want.pre, want.post);
        }
    }
    for (int r = 0; r < n; r++) {
        free(in[r]);
        free(out[r]);
    }
    free(in);
    free(out);
    free(ops);
    free(links);
    free(busy);
}

int main(void)
{
    const size_t chunk = 3;
    int cases = 0;
    for (int n = 1; n <= 64; n++) {
        size_t counts[] = {0, 1, 2, chunk - 1, chunk, chunk + 1, (size_t)n, (size_t)n * chunk,
                           (size_t)n * chunk + 1, 2 * (size_t)n * chunk + 5};
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            for (int coll = 0; coll <= TT_COLL_REDUCESCATTER; coll++) {
                int roots[] = {0, n / 2, n - 1};
                int nroots = (coll == TT_COLL_BROADCAST || coll == TT_COLL_REDUCE) ? 3 : 1;
                for (int k = 0; k < nroots; k++) {
                    check((enum tt_coll)coll, n, counts[c], chunk, roots[k]);
                    cases++;
                }
            }
        }
    }
    if (check_failures) {
        fprintf(stderr, "unit_ring: %d failures in %d cases\n", check_failures, cases);
        return 1;
    }
    printf("unit_ring: %d cases ok\n", cases);
    return 0;
}
