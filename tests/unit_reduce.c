/* Unit test of src/reduce's kernels: every (dtype, op, flags) call of tt_reduce_copy,
 * tt_reduce_combine and tt_reduce_combine2, compared bit for bit with a reference written here on
 * top of unit_reduce_common.c, which shares no code with the library. Integers wrap with masks;
 * float16, bfloat16, fp8 and float32 are computed in double, rounding to float after each
 * operation (exact: double holds more than twice float's precision plus two bits), and float64 in
 * double as it stands. A NaN produced by arithmetic may carry any payload and sign, so there any
 * NaN is accepted; everywhere else the bits must match, and nothing outside dst may be written.
 * The kernels are checked at every level the CPU has (scalar, AVX2, AVX-512), forced one after
 * the other; then, with flush-to-zero and denormals-are-zero on, every level must still match the
 * scalar one. Exit 0 when every check passes, 1 otherwise, after printing each mismatch (level,
 * dtype, op, index, got, want). The conversions and the op resolution are unit_reduce_dtypes's. */
#include <inttypes.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce.h"
#include "unit_reduce_common.h"
#include "util/err.h"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

static const char *level_name = "scalar"; /* the kernel level under test, for messages */
static uint64_t checked; /* elements compared, reported at the end */

/* ---------------------------------------------------------------------------------------------
 * Reference kernels. */

/* What one element of a call computes, resolved from (kind, flags) by the header's rules. */
enum ref_op { R_COPY, R_PREMUL, R_DIV, R_SUM, R_PROD, R_MAX, R_MIN, R_PREMULSUM, R_SUMDIV };

static const char *const ref_op_names[] = {"copy", "premul", "div", "sum", "prod",
                                           "max", "min", "premulsum", "sumdiv"};

static const char *const kind_names[] = {"SUM", "PROD", "MAX", "MIN", "PREMULSUM", "SUMPOSTDIV"};

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
        /* NCCL's pre-multiplication yields the element type: the product is rounded to it
         * before the sum, as in R_PREMUL (one rank's own input is combined this way). */
        r = rnd_op(t, value_of(t, bits_of(t, rnd_op(t, s * x))) + y);
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

/* With every floating-point exception unmasked in the caller's thread (feenableexcept), no
 * kernel traps at any level: float16 sums that overflow (a SIMD conversion raises overflow),
 * e5m2 max over a signalling-NaN code, integer Avg (float lanes), every op of every type on
 * ordinary values. A trap ends the test with SIGFPE. The caller's mode is back afterwards. */
static void test_fp_traps(int level)
{
#if defined(__x86_64__)
    const size_t n = 100;
    const unsigned csr = _mm_getcsr();
    unsigned char *a = malloc(n * 8), *b = malloc(n * 8), *out = malloc(n * 8);
    if (!a || !b || !out) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    tt_reduce_force_level(level);
    unsigned now = csr;
    for (size_t ti = 0; ti < NUM_TYPES; ti++) {
        /* Operators and inputs made with the exceptions masked: this test's own float code
         * would trap. */
        const struct type *t = &types[ti];
        struct tt_redop ops[16], sum;
        int nops = make_ops(t, ops, 3);
        tt_redop_init(&sum, ncclSum, t->dtype, 2);
        for (size_t i = 0; i < n; i++) {
            uint64_t big = t->dtype == ncclFloat16 ? 0x7b53 /* 60000 */
                           : t->dtype == ncclFloat8e5m2 ? (i % 2 ? 0x7d : 0x7b)
                                                        : gen(t);
            store(a, i, t->bytes, big);
            store(b, i, t->bytes, t->dtype == ncclFloat16 ? 0x7b53 : gen(t));
        }
        _mm_setcsr(csr & ~0x1f80u); /* bits 7-12: the exception masks */
        for (int o = 0; o < nops; o++) tt_reduce_combine(&ops[o], out, a, b, n, 0);
        tt_reduce_combine(&sum, out, a, b, n, 0);
        now = _mm_getcsr();
        _mm_setcsr(csr);
        checked++;
        if (t->dtype == ncclFloat16 && load(out, 0, 2) != 0x7c00)
            fail("[%s, traps unmasked] float16 60000 + 60000: got 0x%" PRIx64 ", want 0x7c00",
                 level_name, load(out, 0, 2));
    }
    checked++;
    if ((now & 0xff80u) != (csr & ~0x1f80u & 0xff80u))
        fail("[%s] the caller's MXCSR control bits were not put back: 0x%x", level_name, now);
    free(a);
    free(b);
    free(out);
#else
    (void)level;
#endif
}

/* tt_copy_stream at the active level: every length around the 64-byte lines and the 128/256-byte
 * loop steps, at every destination and source misalignment within a line, copies exactly the
 * source bytes and touches nothing on either side (checked byte by byte against the source). */
static void test_copy_stream(void)
{
    enum { SIDE = 64, MAXLEN = 1100 };
    static unsigned char src[MAXLEN + 64], dst[SIDE + MAXLEN + 64 + SIDE];
    const size_t lens[] = {0, 1, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 700, 1024, 1099};
    for (size_t i = 0; i < sizeof src; i++) src[i] = (unsigned char)(rnd() >> 24);
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (size_t doff = 0; doff < 64; doff += 7)
            for (size_t soff = 0; soff < 64; soff += 13) {
                size_t len = lens[li];
                memset(dst, 0xa5, sizeof dst);
                unsigned char *d = dst + SIDE + doff;
                tt_copy_stream(d, src + soff, len);
                for (size_t k = 0; k < sizeof dst; k++) {
                    unsigned char *at = dst + k;
                    bool inside = at >= d && at < d + len;
                    unsigned char want = inside ? src[soff + (size_t)(at - d)] : 0xa5;
                    if (*at != want) {
                        fail("[%s] tt_copy_stream len %zu dst+%zu src+%zu: byte %td is 0x%02x, "
                             "want 0x%02x", level_name, len, doff, soff, at - d, *at, want);
                        return;
                    }
                }
            }
}

int main(void)
{
    fmts_build();
    int best = tt_reduce_level_best();
    for (int level = 0; level < TT_REDUCE_LEVEL_COUNT; level++) {
        level_name = tt_reduce_level_name(level);
        if (level > best) {
            printf("kernels [%s]: skipped, this CPU (or build) lacks it\n", level_name);
            continue;
        }
        if (tt_reduce_force_level(level) != ncclSuccess || tt_reduce_level() != level)
            fail("tt_reduce_force_level(%d) failed: level now %d", level, tt_reduce_level());
        rng_state = RNG_SEED + (uint64_t)level; /* other inputs at each level */
        for (size_t i = 0; i < NUM_TYPES; i++) {
            int before = failures;
            test_kernels(&types[i]);
            printf("kernels [%s] %-10s: %d failures\n", level_name, types[i].name,
                   failures - before);
        }
        int copy_before = failures;
        test_copy_stream();
        printf("copy_stream [%s]: %d failures\n", level_name, failures - copy_before);
        int traps_before = failures;
        test_fp_traps(level);
        printf("kernels [%s] with every FP exception unmasked: %d failures\n", level_name,
               failures - traps_before);
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
    fmts_free();
    if (failures) {
        printf("unit_reduce: %d failures\n", failures);
        return 1;
    }
    printf("unit_reduce: all checks passed (%" PRIu64 " kernel elements)\n", checked);
    return 0;
}
