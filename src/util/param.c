/* Parameter getters generated from TT_PARAMS. An integer variable that does not parse is
 * reported once at WARN and the default is used, so a typo never goes unnoticed. */
#include "util/param.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

static int param_epoch = 1;

static int64_t parse_int(const char *env, int64_t def)
{
    const char *s = getenv(env);
    if (s == NULL || *s == '\0') return def;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0') {
        TT_WARN("%s=%s is not an integer; using the default %lld", env, s, (long long)def);
        return def;
    }
    return (int64_t)v;
}

static const char *read_str(const char *env, const char *def)
{
    const char *s = getenv(env);
    return (s != NULL && *s != '\0') ? s : def;
}

/* Each getter caches its value with the epoch it was read in. */
#define TT_PARAM_DEFINE_INT(name, env, def)                                                     \
    int64_t tt_param_##name(void)                                                               \
    {                                                                                           \
        static int64_t value;                                                                   \
        static int epoch;                                                                       \
        int now = __atomic_load_n(&param_epoch, __ATOMIC_ACQUIRE);                              \
        if (__atomic_load_n(&epoch, __ATOMIC_ACQUIRE) != now) {                                 \
            __atomic_store_n(&value, parse_int(env, (int64_t)(def)), __ATOMIC_RELAXED);         \
            __atomic_store_n(&epoch, now, __ATOMIC_RELEASE);                                    \
        }                                                                                       \
        return __atomic_load_n(&value, __ATOMIC_RELAXED);                                       \
    }
#define TT_PARAM_DEFINE_STR(name, env, def)                                                     \
    const char *tt_param_##name(void) { return read_str(env, (const char *)(def)); }
#define TT_PARAM_DEFINE(name, env, type, def, doc) TT_PARAM_DEFINE_##type(name, env, def)
TT_PARAMS(TT_PARAM_DEFINE)
#undef TT_PARAM_DEFINE

#define TT_PARAM_TEXT_INT(def) #def
#define TT_PARAM_TEXT_STR(def) def
#define TT_PARAM_ROW(name, env, type, def, doc)                                                 \
    {#name, env, TT_PARAM_##type, TT_PARAM_TEXT_##type(def), doc},
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
    snprintf(buf, buf_bytes, "%s", (s != NULL && *s != '\0') ? s : param_table[i].default_text);
    return buf;
}

void tt_param_reload(void) { __atomic_add_fetch(&param_epoch, 1, __ATOMIC_ACQ_REL); }
