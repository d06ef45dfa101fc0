/* Exhaustive check of the Tree schedules (algo/tree.c), without any transport: every rank count
 * 2..40, every root, in and out of place. Each buffer holds a symbolic value, the expression
 * that computed it ("(pre(x3)+pre(x2))", "post(...)"), so the check sees the order of every
 * fold, not only which contributions arrived. A simulator with unbounded FIFO links between
 * every pair runs the real `next` function of every rank, round-robin, until all are done (no
 * progress with ranks unfinished is a deadlock). Then:
 *   AllReduce: every rank holds the same expression, in which every input appears once with
 *              its pre-operation and the post-operation wraps the whole once;
 *   Reduce:    the root holds such an expression, and no non-root touched its receive buffer;
 *   Broadcast: every rank holds the root's input, untouched;
 * every link is drained, and each rank talked only to the peers tt_tree_peers names, a relation
 * that must be symmetric and lie within tt_tree_all_peers (the connections init makes), itself
 * symmetric. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/coll.h"
#include "check.h"

#define MAXN 40
#define EXPR 8192
#define UNTOUCHED "untouched"


/* A rank's three buffers: the op only compares and passes their addresses. */
struct rank {
    char send[EXPR], recv[EXPR], tmp[EXPR];
    struct tt_op op;
    struct tt_algo_env env;
    struct tt_prim prim;
    bool have, done;
    int peers[TT_TREE_MAX_PEERS], npeers;
};

struct msg {
    char *text;
    struct msg *next;
};

static struct rank ranks[MAXN];
static struct msg *heads[MAXN][MAXN], **tails[MAXN][MAXN]; /* [from][to] */
static struct tt_tree_link links[MAXN][MAXN];              /* [rank][peer] */

/* Formats an expression into dst (EXPR bytes); running out of room is a failure. */
__attribute__((format(printf, 2, 3))) static void fmt(char *dst, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    int len = vsnprintf(dst, EXPR, format, ap);
    va_end(ap);
    if (len < 0 || len >= EXPR) FAIL("expression overflow");
}

/* The expression a rank's pointer names. */
static char *buffer_of(struct rank *r, const void *p)
{
    if (p == r->send) return r->send;
    if (p == r->recv) return r->recv;
    if (p == r->tmp) return r->tmp;
    return NULL;
}

static void set_expr(char *dst, const char *text)
{
    if (strlen(text) >= EXPR) {
        FAIL("expression overflow");
        return;
    }
    memmove(dst, text, strlen(text) + 1);
}

static int peer_of(const struct tt_op *op, const struct tt_conn *c, int me)
{
    for (int p = 0; p < op->nranks; p++) {
        if (c == &links[me][p].send || c == &links[me][p].recv) return p;
    }
    return -1;
}

static bool listed(const struct rank *r, int peer)
{
    for (int i = 0; i < r->npeers; i++)
        if (r->peers[i] == peer) return true;
    return false;
}

/* Runs rank me's current primitive if it can; returns whether it did. */
static bool step(int me, int n)
{
    struct rank *r = &ranks[me];
    if (r->done) return false;
    if (!r->have) {
        if (!tt_tree_next(&r->op, &r->prim)) {
            r->done = true;
            return true;
        }
        r->have = true;
    }
    const struct tt_prim *p = &r->prim;
    static char tmp[EXPR], in[EXPR];
    bool receives = p->kind == TT_PRIM_RECV || p->kind == TT_PRIM_RECV_REDUCE_COPY;
    int peer = -1;
    if (p->kind == TT_PRIM_SEND) peer = peer_of(&r->op, r->op.send, me);
    if (receives) peer = peer_of(&r->op, r->op.recv, me);
    if (p->kind != TT_PRIM_COPY && (peer < 0 || peer >= n || peer == me)) {
        FAIL("n=%d rank %d: primitive %d without a valid peer", n, me, p->kind);
        r->done = true;
        return false;
    }
    if (peer >= 0 && !listed(r, peer))
        FAIL("n=%d coll %d rank %d talks to %d, which tt_tree_peers does not name", n,
             r->op.coll, me, peer);
    if (receives) {
        struct msg *m = heads[peer][me];
        if (m == NULL) return false; /* wait */
        heads[peer][me] = m->next;
        if (m->next == NULL) tails[peer][me] = &heads[peer][me];
        set_expr(in, m->text);
        free(m->text);
        free(m);
    }
    char *src = p->src ? buffer_of(r, p->src) : NULL;
    char *dst = p->dst ? buffer_of(r, p->dst) : NULL;
    if ((p->src && !src) || (p->dst && !dst)) {
        FAIL("n=%d rank %d: primitive %d on a foreign buffer", n, me, p->kind);
        r->done = true;
        return false;
    }
    if (p->count != r->op.count) FAIL("n=%d rank %d: primitive of %zu elements", n, me, p->count);
    if ((p->flags & TT_PRIM_SWAP) && (p->flags & TT_REDUCE_PRE))
        FAIL("n=%d rank %d: SWAP with PRE", n, me);
    bool pre = p->flags & TT_REDUCE_PRE, post = p->flags & TT_REDUCE_POST;
    switch (p->kind) {
    case TT_PRIM_COPY:
    case TT_PRIM_SEND:
        if (post) FAIL("n=%d rank %d: POST on a copy", n, me);
        fmt(tmp, pre ? "pre(%s)" : "%s", src);
        if (p->kind == TT_PRIM_COPY) {
            set_expr(dst, tmp);
        } else {
            struct msg *m = malloc(sizeof *m);
            m->text = strdup(tmp);
            m->next = NULL;
            *tails[me][peer] = m;
            tails[me][peer] = &m->next;
        }
        break;
    case TT_PRIM_RECV:
        if (pre || post) FAIL("n=%d rank %d: flags on a receive", n, me);
        set_expr(dst, in);
        break;
    case TT_PRIM_RECV_REDUCE_COPY: {
        static char sum[EXPR];
        if (p->flags & TT_PRIM_SWAP)
            fmt(sum, "(%s+%s)", in, pre ? "pre(src)" : src);
        else
            fmt(sum, "(%s%s%s+%s)", pre ? "pre(" : "", src, pre ? ")" : "", in);
        fmt(tmp, post ? "post%s" : "%s", sum);
        set_expr(dst, tmp);
        break;
    }
    default: FAIL("n=%d rank %d: unexpected primitive %d", n, me, p->kind);
    }
    r->have = false;
    return true;
}

/* Every check runs twice: with an op that has a pre-operation (PREMULSUM, where each input
 * must appear as pre(x<r>)) and with one that has none (SUM, where a schedule may skip the
 * pre-operation and use an input as it is: Tree's AllReduce then sends straight from it). */
static bool pre_op;

/* `e` with every bare input x<r> written pre(x<r>): for an op without a pre-operation the two
 * are the same value. */
static const char *as_pre(const char *e)
{
    static char out[2 * EXPR];
    size_t o = 0;
    for (size_t i = 0; e[i] != '\0' && o + 8 < sizeof out; i++) {
        bool bare = e[i] == 'x' && (i < 4 || strncmp(e + i - 4, "pre(", 4) != 0);
        if (!bare) {
            out[o++] = e[i];
            continue;
        }
        o += (size_t)snprintf(out + o, sizeof out - o, "pre(x");
        while (e[i + 1] >= '0' && e[i + 1] <= '9' && o + 2 < sizeof out) out[o++] = e[++i];
        out[o++] = ')';
    }
    out[o] = '\0';
    return out;
}

/* Whether `e` holds pre(x<r>) exactly once for every rank and nothing else but folds. */
static bool all_inputs_once(const char *e, int n)
{
    if (!pre_op) e = as_pre(e);
    for (int q = 0; q < n; q++) {
        char term[32];
        snprintf(term, sizeof term, "pre(x%d)", q);
        const char *at = strstr(e, term);
        if (at == NULL || strstr(at + 1, term) != NULL) return false;
    }
    int terms = 0;
    for (const char *at = e; (at = strstr(at, "pre(")) != NULL; at++) terms++;
    return terms == n;
}

static void check(enum tt_coll coll, int n, int root, bool in_place)
{
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            heads[a][b] = NULL;
            tails[a][b] = &heads[a][b];
        }
    for (int me = 0; me < n; me++) {
        struct rank *r = &ranks[me];
        snprintf(r->send, EXPR, "x%d", me);
        snprintf(r->recv, EXPR, UNTOUCHED);
        snprintf(r->tmp, EXPR, UNTOUCHED);
        memset(&r->op, 0, sizeof r->op);
        r->op.coll = coll;
        r->op.rank = me;
        r->op.nranks = n;
        r->op.root = root;
        r->op.count = 5;
        r->op.redop.kind = pre_op ? TT_RED_PREMULSUM : TT_RED_SUM;
        r->op.sendbuff = r->send;
        r->op.recvbuff = in_place ? r->send : r->recv;
        r->env = (struct tt_algo_env){.tree = links[me], .tree_tmp = r->tmp};
        tt_algo_bind(&r->op, TT_ALGO_TREE, &r->env);
        r->have = r->done = false;
        r->npeers = tt_tree_peers(&r->op, r->peers);
        tt_algo_op_start(&r->op);
    }
    static int all[MAXN][TT_TREE_ALL_PEERS], nall[MAXN];
    for (int me = 0; me < n; me++) nall[me] = tt_tree_all_peers(me, n, all[me]);
    for (int me = 0; me < n; me++) {
        for (int i = 0; i < nall[me]; i++) {
            int q = all[me][i];
            bool back = false;
            for (int j = 0; j < nall[q] && !back; j++) back = all[q][j] == me;
            if (q == me || !back)
                FAIL("n=%d: tt_tree_all_peers of %d names %d, which does not name it back", n,
                     me, q);
        }
        for (int i = 0; i < ranks[me].npeers; i++) {
            bool within = false;
            for (int j = 0; j < nall[me] && !within; j++) within = all[me][j] == ranks[me].peers[i];
            if (!within)
                FAIL("coll %d n=%d root %d: %d's peer %d is not among the connections init makes",
                     coll, n, root, me, ranks[me].peers[i]);
        }
    }
    for (int me = 0; me < n; me++)
        for (int i = 0; i < ranks[me].npeers; i++)
            if (!listed(&ranks[ranks[me].peers[i]], me))
                FAIL("coll %d n=%d root %d: %d lists peer %d, which does not list it back", coll,
                     n, root, me, ranks[me].peers[i]);
    for (bool moved = true; moved;) {
        moved = false;
        for (int me = 0; me < n; me++) moved |= step(me, n);
    }
    const char *tag = in_place ? "in place" : "out of place";
    for (int me = 0; me < n; me++) {
        if (!ranks[me].done) FAIL("coll %d n=%d root %d %s: rank %d deadlocked", coll, n, root,
                                  tag, me);
        for (int q = 0; q < n; q++)
            if (heads[me][q] != NULL)
                FAIL("coll %d n=%d root %d %s: %d -> %d left undelivered", coll, n, root, tag,
                     me, q);
    }
    if (check_failures) return;
    const char *out0 = in_place ? ranks[0].send : ranks[0].recv;
    for (int me = 0; me < n; me++) {
        struct rank *r = &ranks[me];
        const char *out = in_place ? r->send : r->recv;
        char want[64];
        switch (coll) {
        case TT_COLL_ALLREDUCE:
            if (strcmp(out, out0) != 0)
                FAIL("AllReduce n=%d %s: rank %d holds %s, rank 0 %s", n, tag, me, out, out0);
            if (strncmp(out, "post(", 5) != 0 || strstr(out + 1, "post") != NULL ||
                !all_inputs_once(out, n))
                FAIL("AllReduce n=%d %s: rank %d holds %s", n, tag, me, out);
            break;
        case TT_COLL_REDUCE:
            if (me == root) {
                if ((n > 1 && strncmp(out, "post(", 5) != 0) || strstr(out + 1, "post") != NULL ||
                    !all_inputs_once(out, n))
                    FAIL("Reduce n=%d root %d %s: root holds %s", n, root, tag, out);
            } else if (!in_place && strcmp(r->recv, UNTOUCHED) != 0) {
                FAIL("Reduce n=%d root %d: non-root %d wrote its receive buffer", n, root, me);
            }
            break;
        case TT_COLL_BROADCAST:
            snprintf(want, sizeof want, "x%d", root);
            if (strcmp(out, want) != 0)
                FAIL("Broadcast n=%d root %d %s: rank %d holds %s", n, root, tag, me, out);
            break;
        default: break;
        }
    }
}

int main(void)
{
    int cases = 0;
    const enum tt_coll colls[] = {TT_COLL_ALLREDUCE, TT_COLL_BROADCAST, TT_COLL_REDUCE};
    for (int with_pre = 1; with_pre >= 0; with_pre--) {
        pre_op = with_pre;
        for (int n = 2; n <= MAXN; n++)
            for (int c = 0; c < 3; c++)
                for (int root = 0; root < (colls[c] == TT_COLL_ALLREDUCE ? 1 : n); root++)
                    for (int in_place = 0; in_place < 2; in_place++) {
                        check(colls[c], n, root, in_place);
                        cases++;
                    }
    }
    if (check_failures) {
        fprintf(stderr, "unit_tree: %d failures in %d cases\n", check_failures, cases);
        return 1;
    }
    printf("unit_tree: %d cases ok\n", cases);
    return 0;
}
