/* Parameter getters generated from TT_PARAMS. An integer variable that does not parse, or lies
 * outside its range, is reported at WARN and the default is used by the getter, and
 * tt_param_check fails communicator init on it, so a typo never goes unnoticed and never turns
 * a deadline off. */
#include "util/param.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/log.h"

static int param_epoch = 1;

/* The variable's value when it is set to an integer within [lo, hi]; false otherwise (unset
 * included: *out is then untouched). */
static bool read_int(const char *env, int64_t lo, int64_t hi, int64_t *out, bool *set)
{
    const char *s = getenv(env);
    *set = s != NULL && *s != '\0';
    if (!*set) return false;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
    *out = (int64_t)v;
    return true;
}

static int64_t parse_int(const char *env, int64_t def, int64_t lo, int64_t hi)
{
    int64_t v = def;
    bool set;
    if (read_int(env, lo, hi, &v, &set) || !set) return v;
    TT_WARN("%s=%s is not an integer in [%lld, %lld]; using the default %lld (communicator init "
            "fails on it)", env, getenv(env), (long long)lo, (long long)hi, (long long)def);
    return def;
}

static const char *read_str(const char *env, const char *def)
{
    const char *s = getenv(env);
    return (s != NULL && *s != '\0') ? s : def;
}

/* Each getter caches its value with the epoch it was read in. */
#define TT_PARAM_DEFINE_INT(name, env, def, lo, hi)                                             \
    int64_t tt_param_##name(void)                                                               \
    {                                                                                           \
        static int64_t value;                                                                   \
        static int epoch;                                                                       \
        int now = __atomic_load_n(&param_epoch, __ATOMIC_ACQUIRE);                              \
        if (__atomic_load_n(&epoch, __ATOMIC_ACQUIRE) != now) {                                 \
            __atomic_store_n(&value, parse_int(env, (int64_t)(def), lo, hi), __ATOMIC_RELAXED); \
            __atomic_store_n(&epoch, now, __ATOMIC_RELEASE);                                    \
        }                                                                                       \
        return __atomic_load_n(&value, __ATOMIC_RELAXED);                                       \
    }
#define TT_PARAM_DEFINE_STR(name, env, def, lo, hi)                                             \
    const char *tt_param_##name(void) { return read_str(env, (const char *)(def)); }
#define TT_PARAM_DEFINE(name, env, type, def, lo, hi, doc)                                      \
    TT_PARAM_DEFINE_##type(name, env, def, lo, hi)
TT_PARAMS(TT_PARAM_DEFINE)
#undef TT_PARAM_DEFINE

#define TT_PARAM_TEXT_INT(def) #def
#define TT_PARAM_TEXT_STR(def) def
#define TT_PARAM_ROW(name, env, type, def, lo, hi, doc)                                         \
    {#name, env, TT_PARAM_##type, TT_PARAM_TEXT_##type(def), lo, hi, doc},
static const struct tt_param_desc param_table[] = {TT_PARAMS(TT_PARAM_ROW)};
#undef TT_PARAM_ROW

const struct tt_param_desc *tt_param_table(int *count)
{
    *count = (int)(sizeof param_table / sizeof param_table[0]);
    return param_table;
}

const char *tt_param_value_text(int i, char *buf, unsigned buf_bytes)
{
    const char *s = getenv(param_table[i].env);
    bool set = s != NULL && *s != '\0';
    /* Text ends up in logs and bug reports: the job's secret is said to be set, not shown. */
    if (set && strcmp(param_table[i].env, "TUTTI_SECRET") == 0) s = "(set, not shown)";
    snprintf(buf, buf_bytes, "%s", set ? s : param_table[i].default_text);
    return buf;
}

void tt_param_reload(void) { __atomic_add_fetch(&param_epoch, 1, __ATOMIC_ACQ_REL); }

ncclResult_t tt_param_check(void)
{
    for (size_t i = 0; i < sizeof param_table / sizeof param_table[0]; i++) {
        const struct tt_param_desc *d = &param_table[i];
        int64_t v;
        bool set;
        if (d->type != TT_PARAM_INT || read_int(d->env, d->min, d->max, &v, &set) || !set)
            continue;
        return TT_ERROR(ncclInvalidArgument, "%s=%s is not an integer in [%lld, %lld] (%s)",
                        d->env, getenv(d->env), (long long)d->min, (long long)d->max, d->doc);
    }
    return ncclSuccess;
}

int tt_param_find(const char *env)
{
    for (size_t i = 0; i < sizeof param_table / sizeof param_table[0]; i++)
        if (strcmp(param_table[i].env, env) == 0) return (int)i;
    return -1;
}

int64_t tt_param_int_now(int i)
{
    const struct tt_param_desc *d = &param_table[i];
    int64_t def = strtoll(d->default_text, NULL, 0);
    int64_t v = def;
    bool set;
    return read_int(d->env, d->min, d->max, &v, &set) ? v : def;
}

const char *tt_param_str_now(int i)
{
    return read_str(param_table[i].env, param_table[i].default_text);
}
