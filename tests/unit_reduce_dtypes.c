/* Unit test of src/reduce's small-float conversions and of its op and dtype resolution, compared
 * bit for bit with the reference of unit_reduce_common.c, which shares no code with the library.
 * Every code of float16, bfloat16 and both fp8 formats must decode to its exact value (a NaN
 * keeping its sign and payload); encoding is checked at every rounding boundary, on the specials
 * and on random floats. Then each dtype's size, name and float-ness, each op's kind, Avg's exact
 * 1/n (or integer divisor) up to millions of ranks, PreMulSum's scalar read in the dtype, and the
 * refusal of invalid arguments. Exit 0 when every check passes, 1 otherwise. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "reduce/reduce.h"
#include "unit_reduce_common.h"
#include "util/err.h"

/* ---------------------------------------------------------------------------------------------
 * Conversions. */

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
    fmts_build();
    struct fmt *fmts[] = {&fmt_half, &fmt_bf16, &fmt_e4m3, &fmt_e5m2};
    for (int i = 0; i < 4; i++) {
        test_decode(fmts[i]);
        test_encode(fmts[i]);
    }
    printf("conversions: %d failures\n", failures);
    test_ops();
    printf("ops: %d failures\n", failures);
    fmts_free();
    if (failures) {
        printf("unit_reduce_dtypes: %d failures\n", failures);
        return 1;
    }
    printf("unit_reduce_dtypes: all checks passed\n");
    return 0;
}
