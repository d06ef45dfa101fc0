/* NCCL 2.30's parameter API (include/tutti.h) over Tutti's parameter table (util/param.h): a
 * handle is the address of a table entry, a key is the entry's variable name. Values are read
 * from the environment at each call, as tutti-info reads them, so both always agree. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "tutti.h"
#include "util/err.h"
#include "util/param.h"

/* The entry behind a handle, or NULL (reported) when it is not one of ours. */
static const struct tt_param_desc *entry(ncclParamHandle_t h, const char *caller, int *index)
{
    int count;
    const struct tt_param_desc *table = tt_param_table(&count);
    /* Compared as integers: `h` may point anywhere. */
    uintptr_t at = (uintptr_t)(void *)h, lo = (uintptr_t)table;
    if (h == NULL || at < lo || at >= lo + (uintptr_t)count * sizeof *table ||
        (at - lo) % sizeof *table != 0) {
        TT_ERROR(ncclInvalidArgument, "%s: %p is not a handle from ncclParamBind", caller,
                 (void *)h);
        return NULL;
    }
    *index = (int)((at - lo) / sizeof *table);
    return &table[*index];
}

TT_API ncclResult_t ncclParamBind(ncclParamHandle_t *out, const char *key)
{
    tt_error_clear();
    TT_TRY(tt_api_check_ptr(out, "ncclParamBind", "out"));
    TT_TRY(tt_api_check_ptr(key, "ncclParamBind", "key"));
    int i = tt_param_find(key);
    if (i < 0)
        return TT_ERROR(ncclInvalidArgument, "ncclParamBind: no parameter %s (tutti-info lists "
                                             "them)", key);
    int count;
    *out = (ncclParamHandle_t)(void *)(uintptr_t)&tt_param_table(&count)[i];
    return ncclSuccess;
}

/* An integer parameter's value within [lo, hi]. */
static ncclResult_t get_int(ncclParamHandle_t h, const char *caller, int64_t lo, uint64_t hi,
                            const void *out, int64_t *value)
{
    int i;
    const struct tt_param_desc *d = entry(h, caller, &i);
    if (d == NULL) return ncclInvalidArgument;
    TT_TRY(tt_api_check_ptr(out, caller, "out"));
    if (d->type != TT_PARAM_INT)
        return TT_ERROR(ncclInvalidArgument, "%s: %s is a string parameter (ncclParamGetStr)",
                        caller, d->env);
    int64_t v = tt_param_int_now(i);
    if (v < lo || (v >= 0 && (uint64_t)v > hi))
        return TT_ERROR(ncclInvalidArgument, "%s: %s=%" PRId64 " does not fit the type asked",
                        caller, d->env, v);
    *value = v;
    return ncclSuccess;
}

#define PARAM_GET_INT(suffix, type, lo, hi)                                                     \
    TT_API ncclResult_t ncclParamGet##suffix(ncclParamHandle_t h, type *out)                    \
    {                                                                                           \
        tt_error_clear();                                                                       \
        int64_t v = 0;                                                                          \
        TT_TRY(get_int(h, "ncclParamGet" #suffix, lo, hi, out, &v));                            \
        *out = (type)v;                                                                         \
        return ncclSuccess;                                                                     \
    }
PARAM_GET_INT(I8, int8_t, INT8_MIN, INT8_MAX)
PARAM_GET_INT(I16, int16_t, INT16_MIN, INT16_MAX)
PARAM_GET_INT(I32, int32_t, INT32_MIN, INT32_MAX)
PARAM_GET_INT(I64, int64_t, INT64_MIN, INT64_MAX)
PARAM_GET_INT(U8, uint8_t, 0, UINT8_MAX)
PARAM_GET_INT(U16, uint16_t, 0, UINT16_MAX)
PARAM_GET_INT(U32, uint32_t, 0, UINT32_MAX)
PARAM_GET_INT(U64, uint64_t, 0, UINT64_MAX)

/* A string parameter's value as the API shows it: the job's secret is said to be set, never
 * returned (tt_param_value_text does the same for the text forms). */
static const char *shown_str(const struct tt_param_desc *d, int i)
{
    const char *s = tt_param_str_now(i);
    if (s != NULL && *s != '\0' && strcmp(d->env, "TUTTI_SECRET") == 0) return "(set, not shown)";
    return s;
}

TT_API ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char **out)
{
    tt_error_clear();
    int i;
    const struct tt_param_desc *d = entry(h, "ncclParamGetStr", &i);
    if (d == NULL) return ncclInvalidArgument;
    TT_TRY(tt_api_check_ptr(out, "ncclParamGetStr", "out"));
    if (d->type != TT_PARAM_STR)
        return TT_ERROR(ncclInvalidArgument, "ncclParamGetStr: %s is an integer parameter "
                                             "(ncclParamGetI64)", d->env);
    *out = shown_str(d, i);
    return ncclSuccess;
}

TT_API ncclResult_t ncclParamGet(ncclParamHandle_t h, void *out, int maxLen, int *len)
{
    tt_error_clear();
    int i;
    const struct tt_param_desc *d = entry(h, "ncclParamGet", &i);
    if (d == NULL) return ncclInvalidArgument;
    TT_TRY(tt_api_check_ptr(len, "ncclParamGet", "len"));
    int64_t v = 0;
    const void *bytes = &v;
    size_t need = sizeof v;
    if (d->type == TT_PARAM_INT) {
        v = tt_param_int_now(i);
    } else {
        bytes = shown_str(d, i);
        need = strlen(bytes) + 1;
    }
    *len = (int)need;
    if (maxLen < 0 || (size_t)maxLen < need)
        return TT_ERROR(ncclInvalidArgument, "ncclParamGet: %s's value needs %zu bytes, maxLen is "
                                             "%d", d->env, need, maxLen);
    TT_TRY(tt_api_check_ptr(out, "ncclParamGet", "out"));
    memcpy(out, bytes, need);
    return ncclSuccess;
}

/* Each thread's text buffer for ncclParamGetParameter: from the heap, freed when the thread
 * ends. (A _Thread_local array would take its 4 KiB from the static TLS space, which a library
 * loaded with dlopen, as Python loads it, may not get.) */
#define TEXT_BYTES 4096
static pthread_key_t text_key;
static pthread_once_t text_once = PTHREAD_ONCE_INIT;

static void make_text_key(void) { (void)pthread_key_create(&text_key, free); }

static char *thread_text(void)
{
    pthread_once(&text_once, make_text_key);
    char *text = pthread_getspecific(text_key);
    if (text == NULL) {
        text = malloc(TEXT_BYTES);
        if (text != NULL && pthread_setspecific(text_key, text) != 0) {
            free(text);
            text = NULL;
        }
    }
    return text;
}

TT_API ncclResult_t ncclParamGetParameter(const char *key, const char **value, int *valueLen)
{
    tt_error_clear();
    TT_TRY(tt_api_check_ptr(key, "ncclParamGetParameter", "key"));
    TT_TRY(tt_api_check_ptr(value, "ncclParamGetParameter", "value"));
    TT_TRY(tt_api_check_ptr(valueLen, "ncclParamGetParameter", "valueLen"));
    int i = tt_param_find(key);
    if (i < 0)
        return TT_ERROR(ncclInvalidArgument, "ncclParamGetParameter: no parameter %s", key);
    char *text = thread_text();
    if (text == NULL)
        return TT_ERROR(ncclSystemError, "ncclParamGetParameter: out of memory");
    tt_param_value_text(i, text, TEXT_BYTES);
    *value = text;
    *valueLen = (int)strlen(text);
    return ncclSuccess;
}

static const char **keys;
static int nkeys;
static pthread_once_t keys_once = PTHREAD_ONCE_INIT;

static void make_keys(void)
{
    int count;
    const struct tt_param_desc *table = tt_param_table(&count);
    static const char *names[256];
    if (count > (int)(sizeof names / sizeof names[0])) count = sizeof names / sizeof names[0];
    for (int i = 0; i < count; i++) names[i] = table[i].env;
    keys = names;
    nkeys = count;
}

TT_API ncclResult_t ncclParamGetAllParameterKeys(const char ***table, int *tableLen)
{
    tt_error_clear();
    TT_TRY(tt_api_check_ptr(table, "ncclParamGetAllParameterKeys", "table"));
    TT_TRY(tt_api_check_ptr(tableLen, "ncclParamGetAllParameterKeys", "tableLen"));
    pthread_once(&keys_once, make_keys);
    *table = keys;
    *tableLen = nkeys;
    return ncclSuccess;
}

TT_API void ncclParamDumpAll(void)
{
    tt_error_clear();
    int count;
    tt_param_table(&count);
    char text[4096];
    for (int i = 0; i < count; i++) {
        int n;
        const struct tt_param_desc *d = &tt_param_table(&n)[i];
        printf("%s=%s\n", d->env, tt_param_value_text(i, text, sizeof text));
    }
    fflush(stdout);
}
