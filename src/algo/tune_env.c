/* NCCL_ALGO and NCCL_PROTO, parsed with NCCL's syntax into the per-collective sets of allowed
 * algorithms and protocols that selection (tune.c) chooses within. Invariant: after
 * tt_tune_init every schedulable collective allows at least one (algorithm, protocol) pair that
 * Tutti implements for it. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "algo/tune.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

/* ---- Parsing NCCL_ALGO and NCCL_PROTO -------------------------------------------------------- */

/* NCCL's syntax: entries separated by ';'. The first entry may be a bare list, which applies to
 * every collective; the others are "collective:list". A list is comma-separated names,
 * case-insensitive; a leading '^' makes it the names to exclude. An entry replaces whatever an
 * earlier one said about its collectives; a collective no entry names allows everything. */

/* A variable's vocabulary. Name i stands for bit bit_of[i] of a mask (bit i when bit_of is
 * NULL); bits [0, ntutti) have a Tutti meaning, the others are NCCL's algorithms that Tutti does
 * not implement, accepted and ignored. */
struct tune_var {
    const char *env;
    const char *what;
    const char *const *names;
    const unsigned char *bit_of;
    int count;
    int nbits;
    int ntutti;
};

/* Tutti's algorithms first, in enum tt_algo_id order, then NCCL's others. */
static const char *const algo_names[] = {
#define TT_ALGO_NAME_(id, name, text) text,
    TT_ALGO_TABLE(TT_ALGO_NAME_)
#undef TT_ALGO_NAME_
    "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT"};
enum { NALGO_NAMES = sizeof algo_names / sizeof algo_names[0] };
static const struct tune_var algo_var = {"NCCL_ALGO", "algorithm", algo_names, NULL, NALGO_NAMES,
                                         NALGO_NAMES, TT_ALGO_COUNT};

/* NCCL's protocols, in enum tt_proto_id's bits. LL128 is another name of LL for Tutti (a CPU
 * has no 128-byte stores to exploit): listing either allows LL, excluding either excludes it. */
static const char *const proto_names[] = {"Simple", "LL", "LL128"};
static const unsigned char proto_bits[] = {TT_PROTO_SIMPLE, TT_PROTO_LL, TT_PROTO_LL};
enum { NPROTO_NAMES = sizeof proto_names / sizeof proto_names[0] };
static const struct tune_var proto_var = {"NCCL_PROTO", "protocol", proto_names, proto_bits,
                                          NPROTO_NAMES, TT_PROTO_COUNT, TT_PROTO_COUNT};

enum { PREFIX_ALL = -1, PREFIX_IGNORED = -2 };

/* Collective prefixes: NCCL's function names, plus Tutti's other collectives; the ones that are
 * not selected here (they are made of sends and receives) are accepted and ignored. */
static const struct {
    const char *name;
    int coll;
} prefixes[] = {
    {"AllReduce", TT_COLL_ALLREDUCE}, {"Broadcast", TT_COLL_BROADCAST},
    {"Reduce", TT_COLL_REDUCE},       {"AllGather", TT_COLL_ALLGATHER},
    {"ReduceScatter", TT_COLL_REDUCESCATTER},
    {"SendRecv", PREFIX_IGNORED},     {"Send", PREFIX_IGNORED},
    {"Recv", PREFIX_IGNORED},         {"AlltoAll", PREFIX_IGNORED},
    {"Gather", PREFIX_IGNORED},       {"Scatter", PREFIX_IGNORED},
};
enum { NPREFIXES = sizeof prefixes / sizeof prefixes[0] };

struct span {
    const char *p;
    size_t len;
};

static struct span trim(struct span s)
{
    while (s.len > 0 && (s.p[0] == ' ' || s.p[0] == '\t')) {
        s.p++;
        s.len--;
    }
    while (s.len > 0 && (s.p[s.len - 1] == ' ' || s.p[s.len - 1] == '\t')) s.len--;
    return s;
}

/* Cuts the next `sep`-separated token off *rest; false once *rest is exhausted. */
static bool next_token(struct span *rest, char sep, struct span *token)
{
    if (rest->p == NULL) return false;
    const char *at = memchr(rest->p, sep, rest->len);
    if (at == NULL) {
        *token = *rest;
        rest->p = NULL;
        rest->len = 0;
    } else {
        *token = (struct span){rest->p, (size_t)(at - rest->p)};
        rest->len -= (size_t)(at - rest->p) + 1;
        rest->p = at + 1;
    }
    *token = trim(*token);
    return true;
}

static bool span_is(struct span s, const char *name)
{
    return strlen(name) == s.len && strncasecmp(s.p, name, s.len) == 0;
}

/* Appends to the string in buf[bytes] whose length is *used; truncates silently. */
static void append(char *buf, size_t bytes, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t bytes, size_t *used, const char *fmt, ...)
{
    if (*used + 1 >= bytes) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *used, bytes - *used, fmt, ap);
    va_end(ap);
    if (n > 0) *used = *used + (size_t)n < bytes ? *used + (size_t)n : bytes - 1;
}

/* "a, b, c" from a table of names, for messages. */
static void join_names(const char *const *names, int count, char *buf, size_t bytes)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < count; i++) append(buf, bytes, &used, "%s%s", i ? ", " : "", names[i]);
}

/* Parses one list into a mask of the variable's bits; *seen (if not NULL) collects the bits
 * mentioned. */
static ncclResult_t parse_list(const struct tune_var *v, const char *text, struct span list,
                               uint32_t *mask, uint32_t *seen)
{
    bool exclude = list.len > 0 && list.p[0] == '^';
    if (exclude) {
        list.p++;
        list.len--;
    }
    uint32_t listed = 0;
    struct span name;
    while (next_token(&list, ',', &name)) {
        if (name.len == 0) continue;
        int i = 0;
        while (i < v->count && !span_is(name, v->names[i])) i++;
        if (i == v->count) {
            char valid[160];
            join_names(v->names, v->count, valid, sizeof valid);
            return TT_ERROR(ncclInvalidArgument,
                            "%s=\"%s\": unknown %s \"%.*s\"; valid names (any case): %s, "
                            "comma-separated, '^' first to exclude, \"allreduce:...;...\" per "
                            "collective",
                            v->env, text, v->what, (int)name.len, name.p, valid);
        }
        listed |= 1u << (v->bit_of != NULL ? v->bit_of[i] : i);
    }
    if (!exclude && listed == 0)
        return TT_ERROR(ncclInvalidArgument, "%s=\"%s\": an empty list of %ss allows nothing",
                        v->env, text, v->what);
    if (seen != NULL) *seen |= listed;
    *mask = exclude ? ((1u << v->nbits) - 1) & ~listed : listed;
    return ncclSuccess;
}

/* Parses a variable into one mask of allowed names per collective. */
static ncclResult_t parse_var(const struct tune_var *v, const char *text,
                              uint32_t masks[TT_COLL_COUNT_], uint32_t *seen)
{
    for (int c = 0; c < TT_COLL_COUNT_; c++) masks[c] = (1u << v->nbits) - 1;
    struct span rest = {text, strlen(text)}, entry;
    bool first = true;
    while (next_token(&rest, ';', &entry)) {
        if (entry.len == 0) continue;
        struct span list = entry;
        int target = PREFIX_ALL;
        const char *colon = memchr(entry.p, ':', entry.len);
        if (colon != NULL) {
            struct span name = trim((struct span){entry.p, (size_t)(colon - entry.p)});
            list = trim((struct span){colon + 1, entry.len - (size_t)(colon - entry.p) - 1});
            int i = 0;
            while (i < NPREFIXES && !span_is(name, prefixes[i].name)) i++;
            if (i == NPREFIXES)
                return TT_ERROR(ncclInvalidArgument,
                                "%s=\"%s\": unknown collective \"%.*s\"; valid: AllReduce, "
                                "Broadcast, Reduce, AllGather, ReduceScatter (any case; "
                                "SendRecv, Send, Recv, AlltoAll, Gather, Scatter are ignored)",
                                v->env, text, (int)name.len, name.p);
            target = prefixes[i].coll;
            if (target == PREFIX_IGNORED)
                TT_INFO(TT_SUB_TUNING | TT_SUB_ENV,
                        "%s: entry \"%.*s\" ignored: %s is not selected by the cost model", v->env,
                        (int)entry.len, entry.p, prefixes[i].name);
        } else if (!first) {
            return TT_ERROR(ncclInvalidArgument,
                            "%s=\"%s\": only the first entry may omit the collective; write "
                            "\"collective:list\" for \"%.*s\"",
                            v->env, text, (int)entry.len, entry.p);
        }
        first = false;
        uint32_t mask = 0;
        TT_TRY(parse_list(v, text, list, &mask, seen));
        for (int c = 0; c < TT_COLL_COUNT_; c++)
            if (target == c || (target == PREFIX_ALL && tt_tune_selectable((enum tt_coll)c)))
                masks[c] = mask;
    }
    return ncclSuccess;
}

static bool has_text(const char *text)
{
    for (; *text != '\0'; text++)
        if (*text != ' ' && *text != '\t' && *text != ';') return true;
    return false;
}

/* Whether some pair Tutti implements for `coll` is allowed by both variables. */
static bool some_pair_allowed(const struct tt_tune *tune, enum tt_coll coll)
{
    for (int a = 0; a < TT_ALGO_COUNT; a++)
        if (tt_tune_implements((enum tt_algo_id)a, coll) && tune->algo_allowed[coll][a] &&
            tune->proto_allowed[coll][tt_tune_proto_of((enum tt_algo_id)a)])
            return true;
    return false;
}

/* "AllReduce Ring,OneShot/Simple,LL; Broadcast ..." for the INFO summary. */
static void describe(const struct tt_tune *tune, char *buf, size_t bytes)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int c = 0; c < TT_COLL_COUNT_; c++) {
        if (!tt_tune_selectable((enum tt_coll)c)) continue;
        append(buf, bytes, &used, "%s%s", used ? "; " : "", tt_coll_name((enum tt_coll)c));
        char sep = ' ';
        for (int a = 0; a < TT_ALGO_COUNT; a++) {
            if (!tune->algo_allowed[c][a] || !tt_tune_implements((enum tt_algo_id)a, (enum tt_coll)c))
                continue;
            append(buf, bytes, &used, "%c%s", sep, tt_algo_name((enum tt_algo_id)a));
            sep = ',';
        }
        sep = '/';
        for (int p = 0; p < TT_PROTO_COUNT; p++) {
            if (!tune->proto_allowed[c][p]) continue;
            append(buf, bytes, &used, "%c%s", sep, tt_proto_name((enum tt_proto_id)p));
            sep = ',';
        }
    }
}

ncclResult_t tt_tune_init(struct tt_tune *tune)
{
    const char *algo_text = tt_param_algo(), *proto_text = tt_param_proto();
    uint32_t algo_masks[TT_COLL_COUNT_], proto_masks[TT_COLL_COUNT_];
    uint32_t algo_seen = 0;
    TT_TRY(parse_var(&algo_var, algo_text, algo_masks, &algo_seen));
    TT_TRY(parse_var(&proto_var, proto_text, proto_masks, NULL));

    memset(tune, 0, sizeof *tune);
    tune->algo_forced = has_text(algo_text);
    tune->proto_forced = has_text(proto_text);
    for (int c = 0; c < TT_COLL_COUNT_; c++) {
        if (!tt_tune_selectable((enum tt_coll)c)) {
            tune->algo_allowed[c][TT_ALGO_RING] = true;
            tune->proto_allowed[c][TT_PROTO_SIMPLE] = true;
            continue;
        }
        for (int a = 0; a < TT_ALGO_COUNT; a++)
            tune->algo_allowed[c][a] = (algo_masks[c] >> a) & 1;
        for (int p = 0; p < TT_PROTO_COUNT; p++)
            tune->proto_allowed[c][p] = (proto_masks[c] >> p) & 1;
    }

    uint32_t foreign = algo_seen & ~((1u << algo_var.ntutti) - 1);
    if (foreign != 0) {
        const char *names[NALGO_NAMES];
        int count = 0;
        for (int i = algo_var.ntutti; i < algo_var.count; i++)
            if ((foreign >> i) & 1) names[count++] = algo_names[i];
        char list[128], ours[128];
        join_names(names, count, list, sizeof list);
        join_names(algo_names, algo_var.ntutti, ours, sizeof ours);
        TT_INFO(TT_SUB_TUNING | TT_SUB_ENV,
                "NCCL_ALGO: %s ignored (no Tutti implementation; Tutti has %s)", list, ours);
    }

    /* A collective left with no pair it can use runs on Ring/Simple, said once here. */
    char empty[96];
    size_t used = 0;
    empty[0] = '\0';
    for (int c = 0; c < TT_COLL_COUNT_; c++) {
        if (!tt_tune_selectable((enum tt_coll)c) || some_pair_allowed(tune, (enum tt_coll)c)) continue;
        memset(tune->algo_allowed[c], 0, sizeof tune->algo_allowed[c]);
        memset(tune->proto_allowed[c], 0, sizeof tune->proto_allowed[c]);
        tune->algo_allowed[c][TT_ALGO_RING] = true;
        tune->proto_allowed[c][TT_PROTO_SIMPLE] = true;
        append(empty, sizeof empty, &used, "%s%s", used ? ", " : "",
               tt_coll_name((enum tt_coll)c));
    }
    /* Every communicator parses the same variables: warn once per process, then say it at
     * INFO (an 8-rank job with 21 communicators printed 168 identical warnings). */
    static _Atomic int warned;
    if (used > 0 && atomic_exchange(&warned, 1) == 0) {
        char pairs[160];
        size_t at = 0;
        pairs[0] = '\0';
        for (int a = 0; a < TT_ALGO_COUNT; a++)
            append(pairs, sizeof pairs, &at, "%s%s/%s", a ? ", " : "",
                   tt_algo_name((enum tt_algo_id)a), tt_proto_name(tt_tune_proto_of(a)));
        TT_WARN("NCCL_ALGO=\"%s\" NCCL_PROTO=\"%s\" allow nothing Tutti implements for %s "
                "(Tutti's pairs: %s): using Ring/Simple there (said once per process)",
                algo_text, proto_text, empty, pairs);
    }
    else if (used > 0)
        TT_INFO(TT_SUB_TUNING | TT_SUB_ENV,
                "NCCL_ALGO=\"%s\" NCCL_PROTO=\"%s\": Ring/Simple for %s", algo_text,
                proto_text, empty);

    if (tune->algo_forced || tune->proto_forced) {
        char summary[512];
        describe(tune, summary, sizeof summary);
        TT_INFO(TT_SUB_TUNING | TT_SUB_ENV, "NCCL_ALGO=\"%s\" NCCL_PROTO=\"%s\" allow: %s",
                algo_text, proto_text, summary);
    }
    return ncclSuccess;
}
