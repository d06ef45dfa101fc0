/* Selection of algorithm and protocol, the one place where an algorithm is chosen: every
 * algorithm of the table (algo/algo.c) that implements the collective and can run it here gives
 * its cost model's estimate (each algorithm's constants and estimator live in its own file), and
 * the cheapest within the per-collective allowed sets that tune_env.c parses from NCCL_ALGO /
 * NCCL_PROTO once per communicator wins. Everything is arithmetic on the operation's shape, so
 * every rank that sees the same variables makes the same choice.
 * Invariant: after tt_tune_init every schedulable collective allows at least one (algorithm,
 * protocol) pair that Tutti implements for it, and tt_tune_select neither allocates nor logs. */
#include "algo/tune.h"

#include "algo/algo.h"

#include <math.h>
#include <stdint.h>

/* ---- The table's questions -------------------------------------------------------------- */

bool tt_tune_selectable(enum tt_coll coll)
{
    return coll == TT_COLL_ALLREDUCE || coll == TT_COLL_BROADCAST || coll == TT_COLL_REDUCE ||
           coll == TT_COLL_ALLGATHER || coll == TT_COLL_REDUCESCATTER;
}

bool tt_tune_implements(enum tt_algo_id algo, enum tt_coll coll)
{
    return (unsigned)algo < TT_ALGO_COUNT && tt_tune_selectable(coll) &&
           tt_algo_table[algo]->implements(coll);
}

enum tt_proto_id tt_tune_proto_of(enum tt_algo_id algo)
{
    return (unsigned)algo < TT_ALGO_COUNT ? tt_algo_table[algo]->proto : TT_PROTO_SIMPLE;
}

float tt_tune_estimate_us(const struct tt_tune_input *in, enum tt_algo_id algo)
{
    if ((unsigned)algo >= TT_ALGO_COUNT) return INFINITY;
    /* Sends, receives and copies are one step over one connection, which the ring prices. */
    if (!tt_tune_selectable(in->coll))
        return algo == TT_ALGO_RING ? (float)tt_algo_table[algo]->estimate_us(in) : INFINITY;
    if (!tt_algo_table[algo]->implements(in->coll)) return INFINITY;
    return (float)tt_algo_table[algo]->estimate_us(in);
}

/* ---- Selection ----------------------------------------------------------------------------- */

bool tt_tune_can_run(const struct tt_tune_input *in, enum tt_algo_id algo)
{
    return tt_tune_implements(algo, in->coll) && tt_algo_table[algo]->can_run(in);
}

/* "NCCL_ALGO", "NCCL_PROTO" or both, from a mask of 1 (algo) and 2 (proto). */
static const char *vars_named(unsigned which)
{
    static const char *const names[4] = {"", "NCCL_ALGO", "NCCL_PROTO", "NCCL_ALGO/NCCL_PROTO"};
    return names[which & 3];
}

/* The reason is written on every collective, so it is built by hand: snprintf's "%.1f" alone
 * costs more than the whole selection. A writer truncates silently and always terminates. */
struct writer {
    char *at;
    char *end; /* the last byte, kept for the terminator */
};

static void put(struct writer *w, const char *text)
{
    while (*text != '\0' && w->at < w->end) *w->at++ = *text++;
    *w->at = '\0';
}

/* "12.3 us": microseconds to one decimal. */
static void put_us(struct writer *w, float us)
{
    if (!(us < 1e15f)) {
        put(w, "inf us");
        return;
    }
    uint64_t tenths = (uint64_t)((double)us * 10 + 0.5);
    char digits[24], *d = digits + sizeof digits;
    *--d = '\0';
    *--d = (char)('0' + tenths % 10);
    *--d = '.';
    tenths /= 10;
    do {
        *--d = (char)('0' + tenths % 10);
        tenths /= 10;
    } while (tenths != 0);
    put(w, d);
    put(w, " us");
}

void tt_tune_select(const struct tt_tune *tune, const struct tt_tune_input *in,
                    struct tt_tune_choice *out)
{
    struct writer w = {out->reason, out->reason + sizeof out->reason - 1};
    out->algo = TT_ALGO_RING;
    out->proto = TT_PROTO_SIMPLE;
    out->fallback = false;
    if (!tt_tune_selectable(in->coll) || in->nranks <= 1) {
        out->estimate_us = tt_tune_estimate_us(in, TT_ALGO_RING);
        put(&w, tt_tune_selectable(in->coll) ? "single rank" : "point-to-point");
        return;
    }

    /* The cheapest and the runner-up among the allowed pairs that can run, and the cheapest of
     * all that can run, to say what the variables changed. */
    int best = -1, second = -1, best_any = -1;
    float est[TT_ALGO_COUNT] = {0};
    unsigned excluded_by = 0; /* 1: NCCL_ALGO excluded a pair that could run; 2: NCCL_PROTO */
    for (int k = 0; k < TT_ALGO_COUNT; k++) {
        if (!tt_tune_can_run(in, (enum tt_algo_id)k)) continue;
        est[k] = tt_tune_estimate_us(in, (enum tt_algo_id)k);
        if (best_any < 0 || est[k] < est[best_any]) best_any = k;
        unsigned why = (tune->algo_allowed[in->coll][k] ? 0u : 1u) |
                       (tune->proto_allowed[in->coll][tt_algo_table[k]->proto] ? 0u : 2u);
        if (why != 0) {
            excluded_by |= why;
            continue;
        }
        if (best < 0 || est[k] < est[best]) {
            second = best;
            best = k;
        } else if (second < 0 || est[k] < est[second]) {
            second = k;
        }
    }

    if (best < 0) {
        /* The variables allow only algorithms that cannot run this operation here. */
        out->estimate_us = tt_tune_estimate_us(in, TT_ALGO_RING);
        out->fallback = true;
        put(&w, "fallback: nothing ");
        put(&w, vars_named((tune->algo_forced ? 1u : 0u) | (tune->proto_forced ? 2u : 0u)));
        put(&w, " allows can run here");
        return;
    }
    out->algo = (enum tt_algo_id)best;
    out->proto = tt_algo_table[best]->proto;
    out->estimate_us = est[best];
    /* "cost model: 0.4 us vs Ring 9.0 us[, within NCCL_ALGO]" when the model chose among
     * several; "NCCL_ALGO: 18.0 us; cost model alone: OneShot 0.4 us" when a variable left one;
     * "only candidate: 9.0 us" when nothing else can run here. */
    if (second >= 0) {
        put(&w, "cost model: ");
        put_us(&w, est[best]);
        put(&w, " vs ");
        put(&w, tt_algo_table[second]->name);
        put(&w, " ");
        put_us(&w, est[second]);
        if (excluded_by != 0) {
            put(&w, ", within ");
            put(&w, vars_named(excluded_by));
        }
    } else if (excluded_by == 0) {
        put(&w, "only candidate: ");
        put_us(&w, est[best]);
    } else {
        put(&w, vars_named(excluded_by));
        put(&w, ": ");
        put_us(&w, est[best]);
        if (best_any != best) {
            put(&w, "; cost model alone: ");
            put(&w, tt_algo_table[best_any]->name);
            put(&w, " ");
            put_us(&w, est[best_any]);
        } else {
            put(&w, ", also the cost model's pick");
        }
    }
    if (in->symmetric) put(&w, "; buffers mapped (symmetric windows or TUTTI_SHAREABLE_BYTES)");
    if (in->oversubscribed) put(&w, "; oversubscribed");
}

const char *tt_algo_name(enum tt_algo_id algo)
{
    return (unsigned)algo < TT_ALGO_COUNT ? tt_algo_table[algo]->name : "Unknown";
}

const char *tt_proto_name(enum tt_proto_id proto)
{
    static const char *const names[TT_PROTO_COUNT] = {[TT_PROTO_SIMPLE] = "Simple",
                                                      [TT_PROTO_LL] = "LL"};
    return (unsigned)proto < TT_PROTO_COUNT ? names[proto] : "Unknown";
}
