/* Unit test of src/reduce: the small-float conversions and every (dtype, op, flags) kernel,
 * compared bit for bit with a reference written here from the formats' definitions and sharing
 * no code with the library. The reference decodes with ldexp, encodes by searching a sorted table
 * of every representable value for the nearest one (ties to the even code), wraps integers with
 * masks and computes float16, bfloat16, fp8 and float32 in double, rounding to float after each
 * operation (exact: double holds more than twice float's precision plus two bits). float64 is
 * computed in double as it stands. A NaN produced by arithmetic may carry any payload and sign,
 * so there any NaN is accepted; everywhere else the bits must match. The kernels are checked at
 * every level the CPU has (scalar, AVX2, AVX-512), forced one after the other, through
 * tt_reduce_copy, tt_reduce_combine and tt_reduce_combine2; then, with flush-to-zero and
 * denormals-are-zero on, every level must still match the scalar one. Exit 0 when every check
 * passes, 1 otherwise, after printing each mismatch (level, dtype, op, index, got, want). */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce.h"
#include "util/err.h"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

static int failures;
static const char *level_name = "scalar"; /* the kernel level under test, for messages */
static uint64_t checked; /* elements compared, reported at the end */

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
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

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

/* xorshift64*: deterministic, so a failure reproduces. */
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1du;
}

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint64_t d2u(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

static double u2d(uint64_t u)
{
    double d;
    memcpy(&d, &u, 8);
    return d;
}

/* ---------------------------------------------------------------------------------------------
 * Reference small-float formats. */

struct fmt {
    const char *name;
    int bits;     /* storage width */
    int man;      /* explicit mantissa bits */
    int bias;
    int ieee;     /* all-ones exponent means inf (mantissa 0) or NaN; else only S.1111.111 is NaN */
    int saturate; /* overflow goes to the largest finite value, not to inf */
    /* Every non-negative finite value, sorted, with its code; IEEE formats that overflow to inf
     * end with inf's code standing for 2^(emax + 1), which is what rounding to nearest sees. */
    double *value;
    uint32_t *code;
    int count;
};

static struct fmt fmt_half = {"float16", 16, 10, 15, 1, 0, NULL, NULL, 0};
static struct fmt fmt_bf16 = {"bfloat16", 16, 7, 127, 1, 0, NULL, NULL, 0};
static struct fmt fmt_e4m3 = {"float8e4m3", 8, 3, 7, 0, 1, NULL, NULL, 0};
static struct fmt fmt_e5m2 = {"float8e5m2", 8, 2, 15, 1, 1, NULL, NULL, 0};

static uint32_t fmt_exp_all(const struct fmt *f)
{
    return (1u << (f->bits - 1 - f->man)) - 1;
}

static uint32_t fmt_sign(const struct fmt *f)
{
    return 1u << (f->bits - 1);
}

static int ref_is_nan(const struct fmt *f, uint32_t code)
{
    uint32_t e = (code >> f->man) & fmt_exp_all(f), m = code & ((1u << f->man) - 1);
    if (f->ieee)
        return e == fmt_exp_all(f) && m != 0;
    return e == fmt_exp_all(f) && m == (1u << f->man) - 1;
}

static int ref_is_inf(const struct fmt *f, uint32_t code)
{
    uint32_t e = (code >> f->man) & fmt_exp_all(f), m = code & ((1u << f->man) - 1);
    return f->ieee && e == fmt_exp_all(f) && m == 0;
}

static double ref_decode(const struct fmt *f, uint32_t code)
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

/* The code nearest to the non-NaN value v, ties to the even code; saturating formats never go
 * past their largest finite value. */
static uint32_t ref_encode(const struct fmt *f, double v)
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

/* The library's documented NaN results for a float NaN input. */
static uint32_t expected_nan(const struct fmt *f, uint32_t float_nan_bits)
{
    if (f == &fmt_half)
        return ((float_nan_bits >> 16) & 0x8000) | 0x7e00 | ((float_nan_bits >> 13) & 0x3ff);
    if (f == &fmt_bf16)
        return (float_nan_bits >> 16) | 0x40;
    return 0x7f;
}

static float lib_decode(const struct fmt *f, uint32_t c)
{
    if (f == &fmt_half)
        return tt_half_to_float((uint16_t)c);
    if (f == &fmt_bf16)
        return tt_bf16_to_float((uint16_t)c);
    if (f == &fmt_e4m3)
        return tt_e4m3_to_float((uint8_t)c);
    return tt_e5m2_to_float((uint8_t)c);
}

static uint32_t lib_encode(const struct fmt *f, float x)
{
    if (f == &fmt_half)
        return tt_float_to_half(x);
    if (f == &fmt_bf16)
        return tt_float_to_bf16(x);
    if (f == &fmt_e4m3)
        return tt_float_to_e4m3(x);
    return tt_float_to_e5m2(x);
}

/* Every code of the format decodes to its exact value; a NaN keeps its sign and (but for e4m3,
 * which has one NaN per sign) its payload. */
static void test_decode(const struct fmt *f)
{
    for (uint32_t c = 0; c < 2 * fmt_sign(f); c++) {
        uint32_t got = f2u(lib_decode(f, c)), want;
        if (ref_is_nan(f, c)) {
            uint32_t sign = (c & fmt_sign(f)) ? 0x80000000u : 0;
            uint32_t payload = (c & ((1u << f->man) - 1)) << (23 - f->man);
            want = f == &fmt_e4m3 ? sign | 0x7fc00000u : sign | 0x7f800000u | payload;
        } else {
            want = f2u((float)ref_decode(f, c));
        }
        if (got != want)
            fail("%s to float: code 0x%x: got 0x%08x (%g), want 0x%08x (%g)", f->name, c, got,
                 (double)u2f(got), want, (double)u2f(want));
    }
}

static void check_encode(const struct fmt *f, float x)
{
    uint32_t got = lib_encode(f, x);
    uint32_t want = isnan(x) ? expected_nan(f, f2u(x)) : ref_encode(f, x);
    if (got != want)
        fail("float to %s: %a (0x%08x): got 0x%x, want 0x%x", f->name, (double)x, f2u(x), got,
             want);
}

static void check_encode_both_signs(const struct fmt *f, float x)
{
    check_encode(f, x);
    check_encode(f, -x);
    check_encode(f, nextafterf(x, INFINITY));
    check_encode(f, -nextafterf(x, INFINITY));
    check_encode(f, nextafterf(x, 0));
    check_encode(f, -nextafterf(x, 0));
}

/* Every rounding boundary of the format (each value and each midpoint between neighbours, and
 * their float neighbours), the specials, and random floats of every kind and of the format's
 * range. */
static void test_encode(const struct fmt *f)
{
    for (int i = 0; i < f->count; i++) {
        check_encode_both_signs(f, (float)f->value[i]);
        if (i + 1 < f->count) {
            double mid = (f->value[i] + f->value[i + 1]) / 2;
            if ((double)(float)mid != mid)
                fail("%s: midpoint %a is not a float (test bug)", f->name, mid);
            check_encode_both_signs(f, (float)mid);
        }
    }
    const uint32_t specials[] = {0x00000000, 0x00000001, 0x007fffff, 0x00800000, 0x7f7fffff,
                                 0x7f800000, 0x7f800001, 0x7fc00000, 0x7fa00000, 0x7fffffff,
                                 0x7fc02000, 0x3f800000, 0x33800000, 0x33000000, 0x33000001};
    for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]); i++) {
        check_encode(f, u2f(specials[i]));
        check_encode(f, u2f(specials[i] | 0x80000000u));
    }
    int emin = 1 - f->bias - f->man - 3, emax = (int)fmt_exp_all(f) - f->bias + 2;
    for (int i = 0; i < 400000; i++) {
        uint64_t r = rnd();
        check_encode(f, u2f((uint32_t)r));
        int e = emin + (int)((r >> 32) % (uint64_t)(emax - emin + 1));
        if (e + 127 >= 1 && e + 127 <= 254)
            check_encode(f, u2f((uint32_t)(r >> 40) << 31 | (uint32_t)(e + 127) << 23 |
                                ((uint32_t)r & 0x7fffff)));
    }
}

/* ---------------------------------------------------------------------------------------------
 * Reference kernels. */

enum family { INT_SIGNED, INT_UNSIGNED, FLOAT32, FLOAT64, SMALL };

struct type {
    ncclDataType_t dtype;
    const char *name;
    size_t bytes;
    enum family family;
    const struct fmt *fmt; /* SMALL only */
};

static const struct type types[] = {
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
#define NUM_TYPES (sizeof(types) / sizeof(types[0]))

/* What one element of a call computes, resolved from (kind, flags) by the header's rules. */
enum ref_op { R_COPY, R_PREMUL, R_DIV, R_SUM, R_PROD, R_MAX, R_MIN, R_PREMULSUM, R_SUMDIV };

static const char *const ref_op_names[] = {"copy", "premul", "div", "sum", "prod",
                                           "max", "min", "premulsum", "sumdiv"};

static const char *const kind_names[] = {"SUM", "PROD", "MAX", "MIN", "PREMULSUM", "SUMPOSTDIV"};

static uint64_t mask_of(size_t bytes)
{
    return bytes == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * bytes)) - 1;
}

static int64_t sign_extend(uint64_t v, size_t bytes)
{
    if (bytes == 8)
        return (int64_t)v;
    uint64_t sign = UINT64_C(1) << (8 * bytes - 1);
    return (int64_t)((v ^ sign) - sign);
}

/* C's integer division, truncating toward zero, written without relying on it for negatives. */
static uint64_t div_trunc(const struct type *t, uint64_t v, uint64_t n)
{
    if (t->family == INT_UNSIGNED)
        return v / n;
    int64_t s = sign_extend(v, t->bytes);
    uint64_t mag = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
    uint64_t q = mag / n;
    return s < 0 ? (uint64_t)0 - q : q;
}

static int int_less(const struct type *t, uint64_t a, uint64_t b)
{
    if (t->family == INT_UNSIGNED)
        return a < b;
    return sign_extend(a, t->bytes) < sign_extend(b, t->bytes);
}

static uint64_t ref_int(const struct type *t, enum ref_op op, uint64_t a, uint64_t b, uint64_t s,
                        uint64_t n)
{
    uint64_t m = mask_of(t->bytes);
    switch (op) {
    case R_COPY:
        return a;
    case R_PREMUL:
        return (s * a) & m;
    case R_DIV:
        return div_trunc(t, a, n) & m;
    case R_SUM:
        return (a + b) & m;
    case R_PROD:
        return (a * b) & m;
    case R_MAX:
        return int_less(t, a, b) ? b : a;
    case R_MIN:
        return int_less(t, b, a) ? b : a;
    case R_PREMULSUM:
        return (s * a + b) & m;
    case R_SUMDIV:
        return div_trunc(t, (a + b) & m, n) & m;
    }
    return 0;
}

static double value_of(const struct type *t, uint64_t bits)
{
    if (t->family == FLOAT32)
        return u2f((uint32_t)bits);
    if (t->family == FLOAT64)
        return u2d(bits);
    return ref_decode(t->fmt, (uint32_t)bits);
}

static uint64_t bits_of(const struct type *t, double v)
{
    if (t->family == FLOAT32)
        return f2u((float)v);
    if (t->family == FLOAT64)
        return d2u(v);
    if (isnan(v)) /* all ones: a NaN in every small format */
        return fmt_exp_all(t->fmt) << t->fmt->man | ((1u << t->fmt->man) - 1);
    return ref_encode(t->fmt, v);
}

static int is_nan_bits(const struct type *t, uint64_t bits)
{
    if (t->family == SMALL)
        return ref_is_nan(t->fmt, (uint32_t)bits);
    return isnan(value_of(t, bits));
}

/* One operation in the compute type: double for float64, float (rounded from double, which is
 * exact for a single +, *, /) for the others. */
static double rnd_op(const struct type *t, double v)
{
    return t->family == FLOAT64 ? v : (double)(float)v;
}

/* Returns the expected bits; *any_nan says that any NaN is acceptable instead. */
static uint64_t ref_float(const struct type *t, enum ref_op op, uint64_t a, uint64_t b,
                          double s, uint64_t n, int *any_nan)
{
    double x = value_of(t, a), y = value_of(t, b), r = 0;
    *any_nan = 0;
    switch (op) {
    case R_COPY:
        return a;
    case R_MAX:
        return isnan(x) ? b : isnan(y) ? a : y > x ? b : a;
    case R_MIN:
        return isnan(x) ? b : isnan(y) ? a : y < x ? b : a;
    case R_PREMUL:
        r = rnd_op(t, s * x);
        break;
    case R_DIV:
        r = rnd_op(t, x / (double)n);
        break;
    case R_SUM:
        r = rnd_op(t, x + y);
        break;
    case R_PROD:
        r = rnd_op(t, x * y);
        break;
    case R_PREMULSUM:
        r = rnd_op(t, rnd_op(t, s * x) + y);
        break;
    case R_SUMDIV:
        r = rnd_op(t, rnd_op(t, x + y) / (double)n);
        break;
    }
    *any_nan = isnan(r);
    return bits_of(t, r);
}

/* ---------------------------------------------------------------------------------------------
 * Kernel checks. */

static uint64_t load(const void *buf, size_t i, size_t bytes)
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

static void store(void *buf, size_t i, size_t bytes, uint64_t v)
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

/* An input element: for floats a mix of ordinary values, specials and raw bit patterns; for
 * integers a mix of small values, extremes and raw bits. */
static uint64_t gen(const struct type *t)
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

struct call {
    const struct type *t;
    struct tt_redop op;
    unsigned flags;
    int alias;    /* 0: dst apart, 1: dst == local (or src), 2: dst == in */
    int unary;    /* tt_reduce_copy instead of tt_reduce_combine */
    size_t count;
    int second;   /* combine only: 0: no second destination; tt_reduce_combine2 with 1: a second
                   * buffer, 2: dst2 == dst, 3: dst2 == in */
};

static enum ref_op resolve(const struct call *c)
{
    enum tt_redop_kind k = c->op.kind;
    if (c->unary) {
        if (k == TT_RED_PREMULSUM && (c->flags & TT_REDUCE_PRE))
            return R_PREMUL;
        if (k == TT_RED_SUMPOSTDIV && (c->flags & TT_REDUCE_POST))
            return R_DIV;
        return R_COPY;
    }
    switch (k) {
    case TT_RED_PROD:
        return R_PROD;
    case TT_RED_MAX:
        return R_MAX;
    case TT_RED_MIN:
        return R_MIN;
    case TT_RED_PREMULSUM:
        return (c->flags & TT_REDUCE_PRE) ? R_PREMULSUM : R_SUM;
    case TT_RED_SUMPOSTDIV:
        return (c->flags & TT_REDUCE_POST) ? R_SUMDIV : R_SUM;
    default:
        return R_SUM;
    }
}

#define GUARD 8

/* Runs one call on inputs `a` and `b` (b unused for the copy), at element offsets that vary the
 * alignment, and checks every element of the result (in both destinations of a combine2), that
 * nothing past `count` was written and that an input not aliased by dst is left intact. */
static void run_call(const struct call *c, const uint64_t *a, const uint64_t *b)
{
    const struct type *t = c->t;
    size_t n = c->count, w = t->bytes, len = n + 2 * GUARD;
    unsigned char *buf_a = malloc(len * w), *buf_b = malloc(len * w), *buf_d = malloc(len * w);
    unsigned char *buf_d2 = malloc(len * w);
    if (!buf_a || !buf_b || !buf_d || !buf_d2) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    size_t off_a = 1 + n % 3, off_b = 2 + n % 5, off_d = 3; /* elements, all within GUARD */
    size_t off_d2 = 1 + n % 7;
    for (size_t i = 0; i < len; i++) {
        store(buf_a, i, w, 0xa5a5a5a5a5a5a5a5u);
        store(buf_b, i, w, 0x5a5a5a5a5a5a5a5au);
        store(buf_d, i, w, 0xc3c3c3c3c3c3c3c3u);
        store(buf_d2, i, w, 0x3c3c3c3c3c3c3c3cu);
    }
    void *pa = buf_a + off_a * w, *pb = buf_b + off_b * w;
    for (size_t i = 0; i < n; i++) {
        store(pa, i, w, a[i]);
        store(pb, i, w, b[i]);
    }
    unsigned char *dst_buf = c->alias == 1 ? buf_a : c->alias == 2 ? buf_b : buf_d;
    void *pd = c->alias == 1 ? pa : c->alias == 2 ? pb : buf_d + off_d * w;
    void *pd2 = c->second == 1 ? buf_d2 + off_d2 * w : c->second == 3 ? pb : pd;
    if (c->unary)
        tt_reduce_copy(&c->op, pd, pa, n, c->flags);
    else if (c->second)
        tt_reduce_combine2(&c->op, pd, pd2, pa, pb, n, c->flags);
    else
        tt_reduce_combine(&c->op, pd, pa, pb, n, c->flags);

    enum ref_op rop = resolve(c);
    double s = c->op.scalar.f;
    int reported = 0;
    for (size_t i = 0; i < n && reported < 3; i++) {
        uint64_t got = load(pd, i, w), got2 = load(pd2, i, w), want;
        int any_nan = 0;
        checked++;
        if (t->family == INT_SIGNED || t->family == INT_UNSIGNED)
            want = ref_int(t, rop, a[i], b[i], c->op.scalar.u, c->op.divisor);
        else
            want = ref_float(t, rop, a[i], b[i], s, c->op.divisor, &any_nan);
        if ((got == want || (any_nan && is_nan_bits(t, got))) && got2 == got)
            continue;
        reported++;
        fail("[%s] %s %s (%s, %s, flags %u, alias %d, second %d, count %zu, scalar %a = 0x%" PRIx64
             ", divisor %" PRIu64 ") index %zu: a 0x%" PRIx64 " b 0x%" PRIx64 ": got 0x%" PRIx64
             " (second destination 0x%" PRIx64 "), want 0x%" PRIx64 "%s",
             level_name, t->name, ref_op_names[rop],
             c->unary ? "copy" : c->second ? "combine2" : "combine", kind_names[c->op.kind],
             c->flags, c->alias, c->second, n, s, c->op.scalar.u, c->op.divisor, i, a[i],
             c->unary ? 0 : b[i], got, got2, want, any_nan ? " (or any NaN)" : "");
    }
    /* Guards around dst, and the inputs dst does not alias. */
    size_t off_dst = c->alias == 1 ? off_a : c->alias == 2 ? off_b : off_d;
    for (size_t i = 0; i < len; i++) {
        if (i >= off_dst && i < off_dst + n)
            continue;
        uint64_t fill = c->alias == 1 ? 0xa5a5a5a5a5a5a5a5u
                        : c->alias == 2 ? 0x5a5a5a5a5a5a5a5au : 0xc3c3c3c3c3c3c3c3u;
        if (load(dst_buf, i, w) != (fill & mask_of(w)))
            fail("[%s] %s %s: count %zu: element %td outside dst was written", level_name,
                 t->name, ref_op_names[rop], n, (ptrdiff_t)i - (ptrdiff_t)off_dst);
        if (c->second == 1 && (i < off_d2 || i >= off_d2 + n) &&
            load(buf_d2, i, w) != (0x3c3c3c3c3c3c3c3cu & mask_of(w)))
            fail("[%s] %s %s: count %zu: element %td outside dst2 was written", level_name,
                 t->name, ref_op_names[rop], n, (ptrdiff_t)i - (ptrdiff_t)off_d2);
    }
    for (size_t i = 0; i < n; i++) {
        if (c->alias != 1 && load(pa, i, w) != a[i])
            fail("[%s] %s %s: count %zu: input a[%zu] was modified", level_name, t->name,
                 ref_op_names[rop], n, i);
        if (c->alias != 2 && c->second != 3 && load(pb, i, w) != b[i])
            fail("[%s] %s %s: count %zu: input b[%zu] was modified", level_name, t->name,
                 ref_op_names[rop], n, i);
    }
    free(buf_a);
    free(buf_b);
    free(buf_d);
    free(buf_d2);
}

/* The ops a dtype is tested with: the four plain ones, Avg as tt_redop_init resolves it,
 * PreMulSum with several scalars, and SUMPOSTDIV with several divisors. */
static int make_ops(const struct type *t, struct tt_redop *ops, int nranks)
{
    int n = 0;
    const ncclRedOp_t reds[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
    for (int i = 0; i < 5; i++)
        if (tt_redop_init(&ops[n++], reds[i], t->dtype, nranks) != ncclSuccess)
            fail("%s: tt_redop_init(op %d, nranks %d) failed", t->name, (int)reds[i], nranks);
    for (int i = 0; i < 3; i++) {
        uint64_t scalar = gen(t);
        if (i == 0 && t->family != INT_SIGNED && t->family != INT_UNSIGNED)
            scalar = bits_of(t, rnd_op(t, -1.0 / 3.0));
        unsigned char raw[8];
        store(raw, 0, t->bytes, scalar);
        if (tt_redop_init_premulsum(&ops[n++], t->dtype, raw) != ncclSuccess)
            fail("%s: tt_redop_init_premulsum failed", t->name);
    }
    /* For integers, also divisors past 2^24 (no longer exact in float, which the SIMD kernels
     * divide 8-bit integers in) up to INT32_MAX, the largest allowed. Floating types divide in
     * their compute type, float for most, where such divisors would round first. */
    const uint64_t divisors[] = {1, 3, 8, 7, 255, (1u << 24) + 1, INT32_MAX};
    int is_int = t->family == INT_SIGNED || t->family == INT_UNSIGNED;
    for (int i = 0; i < (is_int ? 7 : 5); i++) {
        struct tt_redop *op = &ops[n++];
        memset(op, 0, sizeof(*op));
        op->kind = TT_RED_SUMPOSTDIV;
        op->dtype = t->dtype;
        op->divisor = divisors[i];
    }
    return n;
}

static void test_kernels(const struct type *t)
{
    const size_t counts[] = {0, 1, 2, 7, 31, 63, 64, 65, 129, 1000, 4099};
    const size_t max_count = 4099;
    uint64_t *a = malloc(max_count * sizeof(uint64_t)), *b = malloc(max_count * sizeof(uint64_t));
    if (!a || !b) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    struct tt_redop ops[16];
    int nops = make_ops(t, ops, 5);
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
        size_t n = counts[ci];
        for (size_t i = 0; i < n; i++) {
            a[i] = gen(t);
            b[i] = gen(t);
        }
        for (int o = 0; o < nops; o++)
            for (unsigned flags = 0; flags < 4; flags++)
                for (int unary = 0; unary < 2; unary++)
                    for (int alias = 0; alias < (unary ? 2 : 3); alias++)
                        for (int second = 0; second < (unary ? 1 : 4); second++) {
                            if (second == 3 && alias == 2)
                                continue; /* the same call as second == 2 */
                            struct call c = {t, ops[o], flags, alias, unary, n, second};
                            run_call(&c, a, b);
                        }
    }
    /* fp8: every pair of codes, through every op. */
    if (t->bytes == 1 && t->family == SMALL) {
        free(a);
        free(b);
        a = malloc(65536 * sizeof(uint64_t));
        b = malloc(65536 * sizeof(uint64_t));
        if (!a || !b) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        for (size_t i = 0; i < 65536; i++) {
            a[i] = i & 0xff;
            b[i] = i >> 8;
        }
        for (int o = 0; o < nops; o++)
            for (int unary = 0; unary < 2; unary++) {
                struct call c = {t, ops[o], TT_REDUCE_PRE | TT_REDUCE_POST, 0, unary, 65536,
                                 !unary};
                run_call(&c, a, b);
            }
    }
    /* count 0 must not touch its pointers. */
    tt_reduce_combine(&ops[0], NULL, NULL, NULL, 0, TT_REDUCE_PRE | TT_REDUCE_POST);
    tt_reduce_combine2(&ops[0], NULL, NULL, NULL, NULL, 0, TT_REDUCE_PRE | TT_REDUCE_POST);
    tt_reduce_copy(&ops[5], NULL, NULL, 0, TT_REDUCE_PRE | TT_REDUCE_POST);
    free(a);
    free(b);
}

/* ---------------------------------------------------------------------------------------------
 * Flush modes. */

#if defined(__x86_64__)
/* An input for the flush-mode check: half of the floats (float32, float64, bfloat16) sit in the
 * lowest binades, so that inputs and results are subnormal; the rest as gen() makes them. */
static uint64_t gen_tiny(const struct type *t)
{
    uint64_t r = rnd();
    if (r >> 63)
        return gen(t);
    if (t->family == FLOAT32)
        return (r & 0x807fffffu) | ((r >> 40) % 3) << 23;
    if (t->family == FLOAT64)
        return (r & 0x800fffffffffffffu) | ((r >> 40) % 3) << 52;
    if (t->fmt == &fmt_bf16)
        return (r & 0x807fu) | ((r >> 40) % 3) << 7;
    return gen(t);
}
#endif

/* With flush-to-zero and denormals-are-zero on, the reference no longer applies (the float
 * arithmetic flushes), but every level must still compute the scalar level's bits: each (dtype,
 * op, flags) runs at both levels on the same inputs, and the results must match but for NaNs made
 * by arithmetic, whose payload may differ. */
static void test_flush_modes(int level)
{
#if defined(__x86_64__)
    const size_t n = 777;
    const unsigned csr = _mm_getcsr();
    unsigned char *in_a = malloc(n * 8), *in_b = malloc(n * 8), *want = malloc(n * 8);
    unsigned char *got = malloc(n * 8);
    if (!in_a || !in_b || !want || !got) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    _mm_setcsr(csr | 0x8040); /* FTZ is bit 15, DAZ bit 6 */
    for (size_t ti = 0; ti < NUM_TYPES; ti++) {
        const struct type *t = &types[ti];
        struct tt_redop ops[16];
        int nops = make_ops(t, ops, 7);
        for (size_t i = 0; i < n; i++) {
            store(in_a, i, t->bytes, gen_tiny(t));
            store(in_b, i, t->bytes, gen_tiny(t));
        }
        for (int o = 0; o < nops; o++)
            for (unsigned flags = 0; flags < 4; flags++)
                for (int unary = 0; unary < 2; unary++) {
                    struct call c = {t, ops[o], flags, 0, unary, n, 0};
                    enum ref_op rop = resolve(&c);
                    int bits_exact = rop == R_COPY || rop == R_MAX || rop == R_MIN ||
                                     t->family == INT_SIGNED || t->family == INT_UNSIGNED;
                    for (int pass = 0; pass < 2; pass++) {
                        unsigned char *out = pass ? got : want;
                        tt_reduce_force_level(pass ? level : TT_REDUCE_LEVEL_SCALAR);
                        if (unary)
                            tt_reduce_copy(&c.op, out, in_a, n, flags);
                        else
                            tt_reduce_combine(&c.op, out, in_a, in_b, n, flags);
                    }
                    for (size_t i = 0; i < n; i++) {
                        uint64_t g = load(got, i, t->bytes), wv = load(want, i, t->bytes);
                        checked++;
                        if (g == wv || (!bits_exact && is_nan_bits(t, g) && is_nan_bits(t, wv)))
                            continue;
                        fail("[%s, FTZ+DAZ] %s %s (%s, flags %u) index %zu: a 0x%" PRIx64
                             " b 0x%" PRIx64 ": got 0x%" PRIx64 ", scalar level 0x%" PRIx64,
                             level_name, t->name, ref_op_names[rop], kind_names[c.op.kind], flags,
                             i, load(in_a, i, t->bytes), unary ? 0 : load(in_b, i, t->bytes), g,
                             wv);
                        break;
                    }
                }
    }
    _mm_setcsr(csr);
    free(in_a);
    free(in_b);
    free(want);
    free(got);
#else
    (void)level;
#endif
}

/* ---------------------------------------------------------------------------------------------
 * Ops and datatypes. */

/* 1/n rounded to nearest even in the format, found exactly: c <= 1/n iff c * n <= 1, and 1/n is
 * nearer to lo than to hi iff n * (lo + hi) > 2; every product is exact in double for the
 * n < 2^22 tested here. */
static double ref_reciprocal(const struct type *t, double n)
{
    if (t->family == FLOAT64)
        return 1.0 / n;
    double lo, hi;
    int lo_odd;
    if (t->family == FLOAT32) {
        float c = (float)(1.0 / n);
        while ((double)c * n > 1)
            c = nextafterf(c, 0);
        while ((double)nextafterf(c, INFINITY) * n <= 1)
            c = nextafterf(c, INFINITY);
        lo = c;
        hi = nextafterf(c, INFINITY);
        lo_odd = f2u(c) & 1;
    } else {
        /* The last table entry with value * n <= 1 (entry 0 is zero). */
        const struct fmt *f = t->fmt;
        int j = 0, k = f->count - 1;
        while (k - j > 1) {
            int mid = (j + k) / 2;
            if (f->value[mid] * n <= 1)
                j = mid;
            else
                k = mid;
        }
        lo = f->value[j];
        hi = f->value[j + 1];
        lo_odd = f->code[j] & 1;
    }
    double twice = n * (lo + hi);
    if (lo * n == 1 || twice > 2)
        return lo;
    if (twice < 2)
        return hi;
    return lo_odd ? hi : lo;
}

static void test_ops(void)
{
    const ncclRedOp_t reds[] = {ncclSum, ncclProd, ncclMax, ncclMin};
    const enum tt_redop_kind kinds[] = {TT_RED_SUM, TT_RED_PROD, TT_RED_MAX, TT_RED_MIN};
    for (size_t ti = 0; ti < NUM_TYPES; ti++) {
        const struct type *t = &types[ti];
        struct tt_redop op;
        int is_float = t->family != INT_SIGNED && t->family != INT_UNSIGNED;
        if (tt_dtype_bytes(t->dtype) != t->bytes || strcmp(tt_dtype_name(t->dtype), t->name) ||
            tt_dtype_is_float(t->dtype) != is_float)
            fail("%s: dtype info: bytes %zu name %s is_float %d", t->name,
                 tt_dtype_bytes(t->dtype), tt_dtype_name(t->dtype), tt_dtype_is_float(t->dtype));
        for (int i = 0; i < 4; i++)
            if (tt_redop_init(&op, reds[i], t->dtype, 3) != ncclSuccess || op.kind != kinds[i] ||
                op.dtype != t->dtype)
                fail("%s: op %d resolves to kind %d", t->name, (int)reds[i], (int)op.kind);
        /* Beyond 1..3000, powers of two and their neighbours, and counts at which rounding 1/n
         * to float first and then to the dtype would be wrong (double rounding). */
        const double nranks[] = {4095, 4097, 8283, 18631, 55831, 65535, 65537, 99999, 133683,
                                 555767, 704555, 1 << 20, (1 << 20) + 1, 1058917, (1 << 21) - 1,
                                 2117834, 3050403};
        for (int n = 1; n <= 3000 + (int)(sizeof(nranks) / sizeof(nranks[0])); n++) {
            double nr = n <= 3000 ? n : nranks[n - 3001];
            if (tt_redop_init(&op, ncclAvg, t->dtype, (int)nr) != ncclSuccess) {
                fail("%s: avg over %g ranks failed", t->name, nr);
                continue;
            }
            if (!is_float) {
                if (op.kind != TT_RED_SUMPOSTDIV || op.divisor != (uint64_t)nr)
                    fail("%s: avg over %g ranks: kind %d divisor %" PRIu64, t->name, nr,
                         (int)op.kind, op.divisor);
                continue;
            }
            double want = ref_reciprocal(t, nr);
            if (op.kind != TT_RED_PREMULSUM || d2u(op.scalar.f) != d2u(want))
                fail("%s: avg over %g ranks: kind %d scalar %a, want %a", t->name, nr,
                     (int)op.kind, op.scalar.f, want);
        }
        /* The PreMulSum scalar is read in the dtype's representation. */
        for (int i = 0; i < 64; i++) {
            uint64_t bits = gen(t);
            unsigned char raw[9];
            store(raw + 1, 0, t->bytes, bits); /* unaligned on purpose */
            if (tt_redop_init_premulsum(&op, t->dtype, raw + 1) != ncclSuccess) {
                fail("%s: tt_redop_init_premulsum failed", t->name);
                continue;
            }
            int ok;
            if (t->family == INT_SIGNED)
                ok = op.scalar.i == sign_extend(bits, t->bytes);
            else if (t->family == INT_UNSIGNED)
                ok = op.scalar.u == bits;
            else if (is_nan_bits(t, bits))
                ok = isnan(op.scalar.f);
            else
                ok = d2u(op.scalar.f) == d2u(value_of(t, bits));
            if (!ok || op.kind != TT_RED_PREMULSUM)
                fail("%s: premulsum scalar 0x%" PRIx64 " read as %a / %" PRId64, t->name, bits,
                     op.scalar.f, op.scalar.i);
        }
    }
    /* Invalid arguments are refused with a message. */
    struct tt_redop op;
    const struct {
        ncclRedOp_t red;
        int dtype, nranks;
    } bad[] = {{ncclSum, ncclNumTypes, 2}, {ncclSum, -1, 2}, {ncclSum, 1000, 2},
               {ncclNumOps, ncclFloat32, 2}, {(ncclRedOp_t)-1, ncclFloat32, 2},
               {(ncclRedOp_t)77, ncclInt8, 2}, {ncclAvg, ncclFloat32, 0},
               {ncclSum, ncclInt32, -3}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tt_error_clear();
        ncclResult_t res = tt_redop_init(&op, bad[i].red, (ncclDataType_t)bad[i].dtype,
                                         bad[i].nranks);
        if (res != ncclInvalidArgument || tt_error_last()[0] == '\0')
            fail("tt_redop_init(op %d, dtype %d, nranks %d): got %d (message \"%s\"), want %d",
                 (int)bad[i].red, bad[i].dtype, bad[i].nranks, (int)res, tt_error_last(),
                 (int)ncclInvalidArgument);
    }
    float one = 1;
    if (tt_redop_init_premulsum(&op, (ncclDataType_t)ncclNumTypes, &one) != ncclInvalidArgument ||
        tt_redop_init_premulsum(&op, ncclFloat32, NULL) != ncclInvalidArgument)
        fail("tt_redop_init_premulsum accepted an invalid dtype or a NULL scalar");
    if (tt_dtype_bytes((ncclDataType_t)ncclNumTypes) != 0 ||
        strcmp(tt_dtype_name((ncclDataType_t)-1), "invalid") ||
        tt_dtype_is_float((ncclDataType_t)99))
        fail("invalid dtypes: bytes %zu name %s", tt_dtype_bytes((ncclDataType_t)ncclNumTypes),
             tt_dtype_name((ncclDataType_t)-1));
}

int main(void)
{
    struct fmt *fmts[] = {&fmt_half, &fmt_bf16, &fmt_e4m3, &fmt_e5m2};
    for (int i = 0; i < 4; i++) {
        fmt_build(fmts[i]);
        test_decode(fmts[i]);
        test_encode(fmts[i]);
    }
    printf("conversions: %d failures\n", failures);
    test_ops();
    printf("ops: %d failures so far\n", failures);
    int best = tt_reduce_level_best();
    for (int level = 0; level < TT_REDUCE_LEVEL_COUNT; level++) {
        level_name = tt_reduce_level_name(level);
        if (level > best) {
            printf("kernels [%s]: skipped, this CPU (or build) lacks it\n", level_name);
            continue;
        }
        if (tt_reduce_force_level(level) != ncclSuccess || tt_reduce_level() != level)
            fail("tt_reduce_force_level(%d) failed: level now %d", level, tt_reduce_level());
        rng_state = 0x9e3779b97f4a7c15u + (uint64_t)level; /* other inputs at each level */
        for (size_t i = 0; i < NUM_TYPES; i++) {
            int before = failures;
            test_kernels(&types[i]);
            printf("kernels [%s] %-10s: %d failures\n", level_name, types[i].name,
                   failures - before);
        }
        if (level > TT_REDUCE_LEVEL_SCALAR) {
            int before = failures;
            test_flush_modes(level);
            printf("kernels [%s] under FTZ+DAZ match the scalar level: %d failures\n", level_name,
                   failures - before);
        }
    }
    /* Levels past the CPU's, and nonsense, are refused with a message. */
    const int bad_levels[] = {-1, best + 1, TT_REDUCE_LEVEL_COUNT};
    for (size_t i = 0; i < sizeof(bad_levels) / sizeof(bad_levels[0]); i++) {
        tt_error_clear();
        if (tt_reduce_force_level(bad_levels[i]) != ncclInvalidArgument ||
            tt_error_last()[0] == '\0')
            fail("tt_reduce_force_level(%d) was accepted (best level %d)", bad_levels[i], best);
    }
    if (strcmp(tt_reduce_level_name(TT_REDUCE_LEVEL_AVX512), "avx512") ||
        strcmp(tt_reduce_level_name(7), "invalid"))
        fail("tt_reduce_level_name: %s, %s", tt_reduce_level_name(TT_REDUCE_LEVEL_AVX512),
             tt_reduce_level_name(7));
    for (int i = 0; i < 4; i++) {
        free(fmts[i]->value);
        free(fmts[i]->code);
    }
    if (failures) {
        printf("unit_reduce: %d failures\n", failures);
        return 1;
    }
    printf("unit_reduce: all checks passed (%" PRIu64 " kernel elements)\n", checked);
    return 0;
}
