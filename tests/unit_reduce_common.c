/* The independent reference shared by the unit tests of src/reduce (see unit_reduce_common.h):
 * the failure count, the generator, the small float formats' tables, and the dtype table with its
 * raw-bit accessors and input generator. Nothing here calls the library. */
#include "unit_reduce_common.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int failures;

void fail(const char *fmt, ...)
{
    if (++failures > 40)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
}

uint64_t rng_state = RNG_SEED;

uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1du;
}

/* ---------------------------------------------------------------------------------------------
 * Reference small-float formats. */

struct fmt fmt_half = {"float16", 16, 10, 15, 1, 0, NULL, NULL, 0};
struct fmt fmt_bf16 = {"bfloat16", 16, 7, 127, 1, 0, NULL, NULL, 0};
struct fmt fmt_e4m3 = {"float8e4m3", 8, 3, 7, 0, 1, NULL, NULL, 0};
struct fmt fmt_e5m2 = {"float8e5m2", 8, 2, 15, 1, 1, NULL, NULL, 0};

uint32_t fmt_exp_all(const struct fmt *f)
{
    return (1u << (f->bits - 1 - f->man)) - 1;
}

uint32_t fmt_sign(const struct fmt *f)
{
    return 1u << (f->bits - 1);
}

int ref_is_nan(const struct fmt *f, uint32_t code)
{
    uint32_t e = (code >> f->man) & fmt_exp_all(f), m = code & ((1u << f->man) - 1);
    if (f->ieee)
        return e == fmt_exp_all(f) && m != 0;
    return e == fmt_exp_all(f) && m == (1u << f->man) - 1;
}

int ref_is_inf(const struct fmt *f, uint32_t code)
{
    uint32_t e = (code >> f->man) & fmt_exp_all(f), m = code & ((1u << f->man) - 1);
    return f->ieee && e == fmt_exp_all(f) && m == 0;
}

double ref_decode(const struct fmt *f, uint32_t code)
{
    int neg = (code & fmt_sign(f)) != 0;
    if (ref_is_nan(f, code))
        return neg ? -NAN : NAN;
    if (ref_is_inf(f, code))
        return neg ? -INFINITY : INFINITY;
    int e = (int)((code >> f->man) & fmt_exp_all(f));
    double m = code & ((1u << f->man) - 1);
    double v = e == 0 ? ldexp(m, 1 - f->bias - f->man)
                      : ldexp(m + ldexp(1, f->man), e - f->bias - f->man);
    return neg ? -v : v;
}

static int by_value(const void *x, const void *y)
{
    const double *a = x, *b = y;
    return (*a > *b) - (*a < *b);
}

static void fmt_build(struct fmt *f)
{
    uint32_t n = fmt_sign(f);
    double(*pairs)[2] = calloc(n + 1, sizeof(*pairs));
    f->value = calloc(n + 1, sizeof(double));
    f->code = calloc(n + 1, sizeof(uint32_t));
    if (!pairs || !f->value || !f->code) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    int count = 0;
    for (uint32_t c = 0; c < n; c++) {
        if (ref_is_nan(f, c) || ref_is_inf(f, c))
            continue;
        pairs[count][0] = ref_decode(f, c);
        pairs[count][1] = c;
        count++;
    }
    qsort(pairs, (size_t)count, sizeof(*pairs), by_value);
    if (f->ieee && !f->saturate) {
        pairs[count][0] = ldexp(1, (int)fmt_exp_all(f) - f->bias);
        pairs[count][1] = fmt_exp_all(f) << f->man;
        count++;
    }
    for (int i = 0; i < count; i++) {
        f->value[i] = pairs[i][0];
        f->code[i] = (uint32_t)pairs[i][1];
    }
    f->count = count;
    free(pairs);
}

uint32_t ref_encode(const struct fmt *f, double v)
{
    uint32_t sign = signbit(v) ? fmt_sign(f) : 0;
    double a = fabs(v);
    int lo = 0, hi = f->count - 1;
    if (a >= f->value[hi])
        return sign | f->code[hi];
    while (hi - lo > 1) { /* invariant: value[lo] <= a < value[hi] */
        int mid = (lo + hi) / 2;
        if (f->value[mid] <= a)
            lo = mid;
        else
            hi = mid;
    }
    /* Compare a - value[lo] with value[hi] - a exactly: 2a against their sum (both exact). */
    double twice = 2 * a, sum = f->value[lo] + f->value[hi];
    uint32_t c;
    if (twice < sum)
        c = f->code[lo];
    else if (twice > sum)
        c = f->code[hi];
    else
        c = (f->code[lo] & 1) ? f->code[hi] : f->code[lo];
    return sign | c;
}

void fmts_build(void)
{
    fmt_build(&fmt_half);
    fmt_build(&fmt_bf16);
    fmt_build(&fmt_e4m3);
    fmt_build(&fmt_e5m2);
}

void fmts_free(void)
{
    struct fmt *fmts[] = {&fmt_half, &fmt_bf16, &fmt_e4m3, &fmt_e5m2};
    for (int i = 0; i < 4; i++) {
        free(fmts[i]->value);
        free(fmts[i]->code);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Dtypes. */

const struct type types[NUM_TYPES] = {
    {ncclInt8, "int8", 1, INT_SIGNED, NULL},
    {ncclUint8, "uint8", 1, INT_UNSIGNED, NULL},
    {ncclInt32, "int32", 4, INT_SIGNED, NULL},
    {ncclUint32, "uint32", 4, INT_UNSIGNED, NULL},
    {ncclInt64, "int64", 8, INT_SIGNED, NULL},
    {ncclUint64, "uint64", 8, INT_UNSIGNED, NULL},
    {ncclFloat16, "float16", 2, SMALL, &fmt_half},
    {ncclFloat32, "float32", 4, FLOAT32, NULL},
    {ncclFloat64, "float64", 8, FLOAT64, NULL},
    {ncclBfloat16, "bfloat16", 2, SMALL, &fmt_bf16},
    {ncclFloat8e4m3, "float8e4m3", 1, SMALL, &fmt_e4m3},
    {ncclFloat8e5m2, "float8e5m2", 1, SMALL, &fmt_e5m2},
};

uint64_t mask_of(size_t bytes)
{
    return bytes == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * bytes)) - 1;
}

int64_t sign_extend(uint64_t v, size_t bytes)
{
    if (bytes == 8)
        return (int64_t)v;
    uint64_t sign = UINT64_C(1) << (8 * bytes - 1);
    return (int64_t)((v ^ sign) - sign);
}


double value_of(const struct type *t, uint64_t bits)
{
    if (t->family == FLOAT32)
        return u2f((uint32_t)bits);
    if (t->family == FLOAT64)
        return u2d(bits);
    return ref_decode(t->fmt, (uint32_t)bits);
}

uint64_t bits_of(const struct type *t, double v)
{
    if (t->family == FLOAT32)
        return f2u((float)v);
    if (t->family == FLOAT64)
        return d2u(v);
    if (isnan(v)) /* all ones: a NaN in every small format */
        return fmt_exp_all(t->fmt) << t->fmt->man | ((1u << t->fmt->man) - 1);
    return ref_encode(t->fmt, v);
}

int is_nan_bits(const struct type *t, uint64_t bits)
{
    if (t->family == SMALL)
        return ref_is_nan(t->fmt, (uint32_t)bits);
    return isnan(value_of(t, bits));
}

double rnd_op(const struct type *t, double v)
{
    return t->family == FLOAT64 ? v : (double)(float)v;
}


uint64_t load(const void *buf, size_t i, size_t bytes)
{
    const unsigned char *p = (const unsigned char *)buf + i * bytes;
    uint8_t v8;
    uint16_t v16;
    uint32_t v32;
    uint64_t v64;
    switch (bytes) {
    case 1:
        memcpy(&v8, p, 1);
        return v8;
    case 2:
        memcpy(&v16, p, 2);
        return v16;
    case 4:
        memcpy(&v32, p, 4);
        return v32;
    default:
        memcpy(&v64, p, 8);
        return v64;
    }
}

void store(void *buf, size_t i, size_t bytes, uint64_t v)
{
    unsigned char *p = (unsigned char *)buf + i * bytes;
    uint8_t v8 = (uint8_t)v;
    uint16_t v16 = (uint16_t)v;
    uint32_t v32 = (uint32_t)v;
    switch (bytes) {
    case 1:
        memcpy(p, &v8, 1);
        break;
    case 2:
        memcpy(p, &v16, 2);
        break;
    case 4:
        memcpy(p, &v32, 4);
        break;
    default:
        memcpy(p, &v, 8);
        break;
    }
}

uint64_t gen(const struct type *t)
{
    uint64_t r = rnd(), m = mask_of(t->bytes);
    unsigned pick = (unsigned)(r >> 58); /* 0..63 */
    if (t->family == INT_SIGNED || t->family == INT_UNSIGNED) {
        if (pick < 16)
            return (uint64_t)((int64_t)(r % 9) - 4) & m;
        if (pick < 24) {
            const uint64_t ext[] = {0, 1, m, m >> 1, (m >> 1) + 1};
            return ext[r % 5];
        }
        return r & m;
    }
    if (t->family == SMALL) {
        if (pick < 8) {
            const struct fmt *f = t->fmt;
            uint32_t top = f->code[f->count - 1];
            const uint32_t ext[] = {0, fmt_sign(f), 1, top, top - 1, (1u << f->man) - 1,
                                    1u << f->man};
            return ext[r % 7] | ((r >> 20) & 1 ? fmt_sign(f) : 0);
        }
        return r & m;
    }
    if (pick < 6) {
        const double ext[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, 1.0, -1.0,
                              t->family == FLOAT32 ? FLT_MAX : DBL_MAX,
                              t->family == FLOAT32 ? FLT_MIN : DBL_MIN,
                              t->family == FLOAT32 ? 0x1p-149 : 0x1p-1074};
        return bits_of(t, ext[r % 11]);
    }
    if (pick < 12)
        return r & m;
    /* A moderate value: random sign and mantissa, exponent within +-40. */
    double v = ldexp((double)(r & 0xffffffffffu) / 0x1p40 + 1.0, (int)((r >> 40) % 81) - 40);
    return bits_of(t, rnd_op(t, (r >> 57) & 1 ? -v : v));
}
