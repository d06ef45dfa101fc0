/* Reduction loops for the AVX2 level (AVX2 and F16C), bit-identical to the scalar loops of
 * reduce_scalar.c. The file compiles with the baseline flags: every function carries a target
 * attribute, and the dispatcher calls one only after detecting the features.
 *
 * Integers use the native lane operations, with 8-bit and 64-bit products built from 16-bit and
 * 32-bit multiplies; integer division runs in double (or float) lanes, exact as shown below.
 * float16 goes through F16C both ways, e4m3 and e5m2 through it on the way in; bfloat16 widens by
 * a shift, in pairs of codes per 32-bit lane. bfloat16 and fp8 are rounded back with the scalar
 * code's own integer algorithm, lane by lane. Max and min of the small formats compare the codes
 * themselves, as signed magnitudes, and select one input's bits. */
#include "reduce/kernels.h"

#ifdef TT_REDUCE_X86

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "reduce/simd.h"

#define TARGET __attribute__((target("avx2,f16c")))

/* ---------------------------------------------------------------------------------------------
 * Integers. */

#define LDI(p) _mm256_loadu_si256((const void *)(p))
#define STI(p, v) _mm256_storeu_si256((void *)(p), (v))

/* Products keep the low bits, as the scalar loops' unsigned arithmetic does. 8-bit lanes: the
 * low byte of a 16-bit product depends only on the factors' low bytes, so one multiply gives the
 * even bytes and one of the inputs shifted down gives the odd ones. */
TARGET static inline __m256i mul_epi8(__m256i x, __m256i y)
{
    const __m256i even = _mm256_mullo_epi16(x, y);
    const __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(x, 8), _mm256_srli_epi16(y, 8));
    return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0xff)),
                           _mm256_slli_epi16(odd, 8));
}

/* 64-bit lanes: x * y mod 2^64 = xl * yl + ((xh * yl + xl * yh) << 32). */
TARGET static inline __m256i mul_epi64(__m256i x, __m256i y)
{
    const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(x, 32), y),
                                           _mm256_mul_epu32(x, _mm256_srli_epi64(y, 32)));
    return _mm256_add_epi64(_mm256_mul_epu32(x, y), _mm256_slli_epi64(cross, 32));
}

/* 64-bit max and min select with a signed compare; the unsigned ones flip the sign bits first. */
TARGET static inline __m256i max_epi64(__m256i x, __m256i y)
{
    return _mm256_blendv_epi8(x, y, _mm256_cmpgt_epi64(y, x));
}

TARGET static inline __m256i min_epi64(__m256i x, __m256i y)
{
    return _mm256_blendv_epi8(x, y, _mm256_cmpgt_epi64(x, y));
}

TARGET static inline __m256i max_epu64(__m256i x, __m256i y)
{
    const __m256i flip = _mm256_set1_epi64x(INT64_MIN);
    const __m256i y_above =
        _mm256_cmpgt_epi64(_mm256_xor_si256(y, flip), _mm256_xor_si256(x, flip));
    return _mm256_blendv_epi8(x, y, y_above);
}

TARGET static inline __m256i min_epu64(__m256i x, __m256i y)
{
    const __m256i flip = _mm256_set1_epi64x(INT64_MIN);
    const __m256i y_below =
        _mm256_cmpgt_epi64(_mm256_xor_si256(x, flip), _mm256_xor_si256(y, flip));
    return _mm256_blendv_epi8(x, y, y_below);
}

/* Integer division in floating lanes. The quotient t = a / d of integers with |a| < 2^p (p the
 * precision: 53 for double, 24 for float) truncates exactly through one correctly rounded
 * division: if t is not an integer, it lies at least 1/d from every integer, while rounding moves
 * it by at most |t| 2^-p = |a| 2^-p / d < 1/d; so no integer lies between t and its rounding.
 * int32 and uint32 use double; int8 and uint8 use float, where a divisor past 2^24 may round but
 * the quotient of |a| <= 255 by it truncates to 0 either way. int64 stays scalar. */
TARGET static inline __m256i div_epi32(__m256i v, __m256d d)
{
    const __m128i lo = _mm256_cvttpd_epi32(
        _mm256_div_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(v)), d));
    const __m128i hi = _mm256_cvttpd_epi32(
        _mm256_div_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(v, 1)), d));
    return _mm256_set_m128i(hi, lo);
}

/* uint32 lanes convert as signed after flipping the top bit, plus 2^31; the quotient, truncated
 * in double, converts back the same way (cvttpd only produces signed 32-bit integers). */
TARGET static inline __m128i div_epu32_half(__m128i flipped, __m256d d)
{
    const __m256d bias = _mm256_set1_pd(2147483648.0);
    const __m256d a = _mm256_add_pd(_mm256_cvtepi32_pd(flipped), bias);
    const __m256d q = _mm256_round_pd(_mm256_div_pd(a, d), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    return _mm256_cvttpd_epi32(_mm256_sub_pd(q, bias));
}

TARGET static inline __m256i div_epu32(__m256i v, __m256d d)
{
    const __m256i flip = _mm256_set1_epi32(INT32_MIN);
    const __m256i w = _mm256_xor_si256(v, flip);
    const __m128i lo = div_epu32_half(_mm256_castsi256_si128(w), d);
    const __m128i hi = div_epu32_half(_mm256_extracti128_si256(w, 1), d);
    return _mm256_xor_si256(_mm256_set_m128i(hi, lo), flip);
}

/* Eight 8-bit lanes (the low half of a 128-bit vector) divided in float lanes. */
TARGET static inline __m128i div_epi8(__m128i v, __m256 d)
{
    const __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
    const __m256i q = _mm256_cvttps_epi32(_mm256_div_ps(a, d));
    const __m128i q16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    return _mm_packs_epi16(q16, q16);
}

TARGET static inline __m128i div_epu8(__m128i v, __m256 d)
{
    const __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
    const __m256i q = _mm256_cvttps_epi32(_mm256_div_ps(a, d));
    const __m128i q16 = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    return _mm_packus_epi16(q16, q16);
}

#define LD8(p) _mm_loadl_epi64((const void *)(p))
#define ST8(p, v) _mm_storel_epi64((void *)(p), (v))

/* The op's scalar broadcast to each lane width (its low bits, as the scalar loops take them). */
#define PREP_S(SET1, CAST)                                                                      \
    const __m256i s = SET1((CAST)op->scalar.u);                                                 \
    (void)s;
#define PREP_S8 PREP_S(_mm256_set1_epi8, char)
#define PREP_S32 PREP_S(_mm256_set1_epi32, int)
#define PREP_S64 PREP_S(_mm256_set1_epi64x, long long)
#define PREP_DF const __m256 d = _mm256_set1_ps((float)op->divisor);
#define PREP_DD const __m256d d = _mm256_set1_pd((double)op->divisor);

#define INT_KERNELS(NAME, T, W, PREP, ADD, MUL, MAX, MIN)                                       \
    TT_SIMD_COMBINE(TARGET, NAME##_sum, T, W, __m256i, LDI, STI, , ADD(x, y))                   \
    TT_SIMD_COMBINE(TARGET, NAME##_prod, T, W, __m256i, LDI, STI, , MUL(x, y))                  \
    TT_SIMD_COMBINE(TARGET, NAME##_max, T, W, __m256i, LDI, STI, , MAX(x, y))                   \
    TT_SIMD_COMBINE(TARGET, NAME##_min, T, W, __m256i, LDI, STI, , MIN(x, y))                   \
    TT_SIMD_COMBINE(TARGET, NAME##_premulsum, T, W, __m256i, LDI, STI, PREP, ADD(MUL(s, x), y)) \
    TT_SIMD_APPLY(TARGET, NAME##_premul, T, W, __m256i, LDI, STI, PREP, MUL(s, x))

INT_KERNELS(int8, int8_t, 32, PREP_S8, _mm256_add_epi8, mul_epi8, _mm256_max_epi8,
            _mm256_min_epi8)
INT_KERNELS(uint8, uint8_t, 32, PREP_S8, _mm256_add_epi8, mul_epi8, _mm256_max_epu8,
            _mm256_min_epu8)
INT_KERNELS(int32, int32_t, 8, PREP_S32, _mm256_add_epi32, _mm256_mullo_epi32, _mm256_max_epi32,
            _mm256_min_epi32)
INT_KERNELS(uint32, uint32_t, 8, PREP_S32, _mm256_add_epi32, _mm256_mullo_epi32,
            _mm256_max_epu32, _mm256_min_epu32)
INT_KERNELS(int64, int64_t, 4, PREP_S64, _mm256_add_epi64, mul_epi64, max_epi64, min_epi64)
INT_KERNELS(uint64, uint64_t, 4, PREP_S64, _mm256_add_epi64, mul_epi64, max_epu64, min_epu64)

/* The divisions: the sum wraps in the element type before it is divided. */
TT_SIMD_COMBINE(TARGET, int8_sumdiv, int8_t, 8, __m128i, LD8, ST8, PREP_DF,
                div_epi8(_mm_add_epi8(x, y), d))
TT_SIMD_APPLY(TARGET, int8_div, int8_t, 8, __m128i, LD8, ST8, PREP_DF, div_epi8(x, d))
TT_SIMD_COMBINE(TARGET, uint8_sumdiv, uint8_t, 8, __m128i, LD8, ST8, PREP_DF,
                div_epu8(_mm_add_epi8(x, y), d))
TT_SIMD_APPLY(TARGET, uint8_div, uint8_t, 8, __m128i, LD8, ST8, PREP_DF, div_epu8(x, d))
TT_SIMD_COMBINE(TARGET, int32_sumdiv, int32_t, 8, __m256i, LDI, STI, PREP_DD,
                div_epi32(_mm256_add_epi32(x, y), d))
TT_SIMD_APPLY(TARGET, int32_div, int32_t, 8, __m256i, LDI, STI, PREP_DD, div_epi32(x, d))
TT_SIMD_COMBINE(TARGET, uint32_sumdiv, uint32_t, 8, __m256i, LDI, STI, PREP_DD,
                div_epu32(_mm256_add_epi32(x, y), d))
TT_SIMD_APPLY(TARGET, uint32_div, uint32_t, 8, __m256i, LDI, STI, PREP_DD, div_epu32(x, d))

/* ---------------------------------------------------------------------------------------------
 * Floating types: loads widen to float (or stay double), stores round back. */

#define I32(v) _mm256_set1_epi32((int)(v))

TARGET static inline __m256 ld_f32(const float *p) { return _mm256_loadu_ps(p); }
TARGET static inline void st_f32(float *p, __m256 v) { _mm256_storeu_ps(p, v); }
TARGET static inline __m256d ld_f64(const double *p) { return _mm256_loadu_pd(p); }
TARGET static inline void st_f64(double *p, __m256d v) { _mm256_storeu_pd(p, v); }

/* F16C gives the scalar conversions' results: it rounds to nearest even with IEEE overflow to
 * inf, converts subnormals exactly both ways whatever the flush modes, and turns a NaN into a
 * quiet one with its sign and the top of its payload. (On the way in it also quiets a signalling
 * NaN, which the scalar decoding does not; but a decoded value only feeds arithmetic, which
 * quiets it all the same.) */
TARGET static inline __m256 ld_f16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const void *)p));
}

TARGET static inline void st_f16(uint16_t *p, __m256 v)
{
    _mm_storeu_si128((void *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

/* bfloat16 in pairs: a 32-bit lane holds two codes, and each is a float once it sits in the
 * lane's top half (the low code shifted up, the high one with the low half cleared), so 16 codes
 * compute as two float vectors, with no widening or narrowing shuffle. */
struct bf16x2 {
    __m256 lo, hi;
};

TARGET static inline struct bf16x2 ld_bf16x2(const uint16_t *p)
{
    const __m256i v = _mm256_loadu_si256((const void *)p);
    const struct bf16x2 r = {_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)),
                             _mm256_castsi256_ps(_mm256_and_si256(v, I32(0xffff0000)))};
    return r;
}

/* The scalar float_to_bf16, lane by lane, leaving the code in the lane's top half: round the low
 * 16 bits off to nearest even, NaNs made quiet. (AVX512-BF16's conversion would flush
 * subnormals, so it is not used.) */
TARGET static inline __m256i round_bf16(__m256 v)
{
    const __m256i x = _mm256_castps_si256(v);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), I32(1));
    const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(x, I32(0x7fff)), odd);
    const __m256i nan = _mm256_or_si256(x, I32(0x400000));
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, I32(0x7fffffff)),
                                              I32(0x7f800000));
    return _mm256_blendv_epi8(rounded, nan, is_nan);
}

TARGET static inline void st_bf16x2(uint16_t *p, struct bf16x2 v)
{
    const __m256i lo = _mm256_srli_epi32(round_bf16(v.lo), 16);
    const __m256i hi = _mm256_and_si256(round_bf16(v.hi), I32(0xffff0000));
    _mm256_storeu_si256((void *)p, _mm256_or_si256(lo, hi));
}

TARGET static inline struct bf16x2 splat_x2(float f)
{
    const struct bf16x2 r = {_mm256_set1_ps(f), _mm256_set1_ps(f)};
    return r;
}

#define PAIR_OP(NAME, OP)                                                                       \
    TARGET static inline struct bf16x2 NAME(struct bf16x2 x, struct bf16x2 y)                  \
    {                                                                                           \
        const struct bf16x2 r = {OP(x.lo, y.lo), OP(x.hi, y.hi)};                               \
        return r;                                                                               \
    }

PAIR_OP(add_x2, _mm256_add_ps)
PAIR_OP(mul_x2, _mm256_mul_ps)
PAIR_OP(div_x2, _mm256_div_ps)

/* e4m3 decodes through float16: its exponent and mantissa fields, moved into float16's places,
 * make a float16 of 2^-8 times its value (normal or subnormal alike, as the biases differ by 8),
 * which F16C widens exactly and one multiplication by 2^8 rescales. S.1111.111 gets float16's
 * all-ones exponent on top: a NaN, as the scalar e4m3_to_float gives (its payload only ever
 * feeds arithmetic). */
TARGET static inline __m256 ld_e4m3(const uint8_t *p)
{
    const __m128i v = _mm_cvtepu8_epi16(_mm_loadl_epi64((const void *)p));
    const __m128i em = _mm_and_si128(v, _mm_set1_epi16(0x7f));
    const __m128i nan = _mm_and_si128(_mm_cmpeq_epi16(em, _mm_set1_epi16(0x7f)),
                                      _mm_set1_epi16(0x7c00));
    const __m128i sign = _mm_and_si128(_mm_slli_epi16(v, 8), _mm_set1_epi16(INT16_MIN));
    const __m128i h = _mm_or_si128(_mm_or_si128(_mm_slli_epi16(em, 7), sign), nan);
    return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
}

/* e5m2 is the top byte of a float16. */
TARGET static inline __m256 ld_e5m2(const uint8_t *p)
{
    const __m128i h = _mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const void *)p)), 8);
    return _mm256_cvtph_ps(h);
}

/* The scalar round_magnitude, lane by lane (same integer steps, same float addition). */
TARGET static inline __m256i round_magnitude(__m256i ax, int man, int bias)
{
    const int drop = 23 - man;
    const __m256i r = _mm256_sub_epi32(ax, I32((127 - bias) << 23));
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(r, drop), I32(1));
    const __m256i normal = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(r, I32((1 << (drop - 1)) - 1)), odd), drop);
    const __m256 magic = _mm256_set1_ps((float)(1u << (24 - man)) / (float)(1u << bias));
    const __m256i subnormal = _mm256_sub_epi32(
        _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(ax), magic)),
        _mm256_castps_si256(magic));
    return _mm256_blendv_epi8(normal, subnormal, _mm256_cmpgt_epi32(I32((128 - bias) << 23), ax));
}

/* The scalar float_to_e4m3 / float_to_e5m2: saturate to the largest finite code `top`, NaN to
 * 0x7f. */
TARGET static inline void st_fp8(uint8_t *p, __m256 v, int man, int bias, int top)
{
    const __m256i x = _mm256_castps_si256(v);
    const __m256i ax = _mm256_and_si256(x, I32(0x7fffffff));
    const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(x, 24), I32(0x80));
    __m256i q = _mm256_or_si256(_mm256_min_epu32(round_magnitude(ax, man, bias), I32(top)), sign);
    q = _mm256_blendv_epi8(q, I32(0x7f), _mm256_cmpgt_epi32(ax, I32(0x7f800000)));
    const __m128i q16 = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    _mm_storel_epi64((void *)p, _mm_packus_epi16(q16, q16));
}

TARGET static inline void st_e4m3(uint8_t *p, __m256 v) { st_fp8(p, v, 3, 7, 0x7e); }
TARGET static inline void st_e5m2(uint8_t *p, __m256 v) { st_fp8(p, v, 2, 15, 0x7b); }

#define PREP_F32                                                                                \
    const __m256 s = _mm256_set1_ps((float)op->scalar.f);                                       \
    const __m256 d = _mm256_set1_ps((float)op->divisor);                                        \
    (void)s;                                                                                    \
    (void)d;
#define PREP_X2                                                                                 \
    const struct bf16x2 s = splat_x2((float)op->scalar.f);                                      \
    const struct bf16x2 d = splat_x2((float)op->divisor);                                       \
    (void)s;                                                                                    \
    (void)d;
#define PREP_F64                                                                                \
    const __m256d s = _mm256_set1_pd(op->scalar.f);                                             \
    const __m256d d = _mm256_set1_pd((double)op->divisor);                                      \
    (void)s;                                                                                    \
    (void)d;

/* The arithmetic of every floating type, in its compute vector V: each operation rounds on its
 * own (no fused multiply-add), as in the scalar loops. */
#define FLOAT_KERNELS(NAME, T, W, V, LD, ST, PREP, ADD, MUL, DIV, RT)                           \
    TT_SIMD_COMBINE(TARGET, NAME##_sum, T, W, V, LD, ST, , ADD(x, y))                           \
    TT_SIMD_COMBINE(TARGET, NAME##_prod, T, W, V, LD, ST, , MUL(x, y))                          \
    TT_SIMD_COMBINE(TARGET, NAME##_premulsum, T, W, V, LD, ST, PREP, ADD(RT(MUL(s, x)), y))     \
    TT_SIMD_COMBINE(TARGET, NAME##_sumdiv, T, W, V, LD, ST, PREP, DIV(ADD(x, y), d))            \
    TT_SIMD_APPLY(TARGET, NAME##_premul, T, W, V, LD, ST, PREP, MUL(s, x))                      \
    TT_SIMD_APPLY(TARGET, NAME##_div, T, W, V, LD, ST, PREP, DIV(x, d))

/* The products of PreMulSum rounded to the element type (simd.h). */
TT_SIMD_ROUND_TRIP(TARGET, rt_f16, uint16_t, 8, __m256, ld_f16, st_f16)
TT_SIMD_ROUND_TRIP(TARGET, rt_e4m3, uint8_t, 8, __m256, ld_e4m3, st_e4m3)
TT_SIMD_ROUND_TRIP(TARGET, rt_e5m2, uint8_t, 8, __m256, ld_e5m2, st_e5m2)
TT_SIMD_ROUND_TRIP(TARGET, rt_bf16x2, uint16_t, 16, struct bf16x2, ld_bf16x2, st_bf16x2)

#define FLOAT32_KERNELS(NAME, T, LD, ST, RT)                                                    \
    FLOAT_KERNELS(NAME, T, 8, __m256, LD, ST, PREP_F32, _mm256_add_ps, _mm256_mul_ps,           \
                  _mm256_div_ps, RT)

FLOAT32_KERNELS(float32, float, ld_f32, st_f32, TT_SIMD_SAME)
FLOAT32_KERNELS(float16, uint16_t, ld_f16, st_f16, rt_f16)
FLOAT32_KERNELS(e4m3, uint8_t, ld_e4m3, st_e4m3, rt_e4m3)
FLOAT32_KERNELS(e5m2, uint8_t, ld_e5m2, st_e5m2, rt_e5m2)
FLOAT_KERNELS(float64, double, 4, __m256d, ld_f64, st_f64, PREP_F64, _mm256_add_pd,
              _mm256_mul_pd, _mm256_div_pd, TT_SIMD_SAME)
FLOAT_KERNELS(bfloat16, uint16_t, 16, struct bf16x2, ld_bf16x2, st_bf16x2, PREP_X2, add_x2,
              mul_x2, div_x2, rt_bf16x2)

/* Max and min of float and double: take y when x < y (y < x for min) or x is NaN, else x; a
 * blend moves the chosen input's bits unchanged. */
TARGET static inline __m256 max_f32(__m256 x, __m256 y)
{
    return _mm256_blendv_ps(x, y, _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_LT_OQ),
                                               _mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
}

TARGET static inline __m256 min_f32(__m256 x, __m256 y)
{
    return _mm256_blendv_ps(x, y, _mm256_or_ps(_mm256_cmp_ps(y, x, _CMP_LT_OQ),
                                               _mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
}

TARGET static inline __m256d max_f64(__m256d x, __m256d y)
{
    return _mm256_blendv_pd(x, y, _mm256_or_pd(_mm256_cmp_pd(x, y, _CMP_LT_OQ),
                                               _mm256_cmp_pd(x, x, _CMP_UNORD_Q)));
}

TARGET static inline __m256d min_f64(__m256d x, __m256d y)
{
    return _mm256_blendv_pd(x, y, _mm256_or_pd(_mm256_cmp_pd(y, x, _CMP_LT_OQ),
                                               _mm256_cmp_pd(x, x, _CMP_UNORD_Q)));
}

TT_SIMD_COMBINE(TARGET, float32_max, float, 8, __m256, ld_f32, st_f32, , max_f32(x, y))
TT_SIMD_COMBINE(TARGET, float32_min, float, 8, __m256, ld_f32, st_f32, , min_f32(x, y))
TT_SIMD_COMBINE(TARGET, float64_max, double, 4, __m256d, ld_f64, st_f64, , max_f64(x, y))
TT_SIMD_COMBINE(TARGET, float64_min, double, 4, __m256d, ld_f64, st_f64, , min_f64(x, y))

/* Max and min of the small formats on their codes. A code's magnitude bits order its non-NaN
 * values, so key = +-magnitude (the sign applied: both zeros get key 0, equal) orders them as
 * signed integers; a magnitude above that of infinity (or of 448 for e4m3) is a NaN. As in the
 * scalar loops, y wins when x is NaN, or when y is not NaN and its key beats x's. bfloat16's
 * subnormals are float's own, which the scalar loops' float compare sees as zeros when the
 * denormals-are-zero mode is on: magnitudes below `flush_below` count as zero too. */
#define SMALL_MINMAX(BITS)                                                                      \
    TARGET static inline __m256i pick##BITS(__m256i x, __m256i y, int nan_above,               \
                                            int flush_below, int want_max)                      \
    {                                                                                           \
        const __m256i mag_mask = _mm256_set1_epi##BITS(INT##BITS##_MAX);                        \
        const __m256i above = _mm256_set1_epi##BITS(nan_above);                                 \
        const __m256i below = _mm256_set1_epi##BITS(flush_below);                               \
        const __m256i mx = _mm256_and_si256(x, mag_mask), my = _mm256_and_si256(y, mag_mask);  \
        const __m256i fx = _mm256_andnot_si256(_mm256_cmpgt_epi##BITS(below, mx), mx);          \
        const __m256i fy = _mm256_andnot_si256(_mm256_cmpgt_epi##BITS(below, my), my);          \
        const __m256i kx = _mm256_sign_epi##BITS(fx, x), ky = _mm256_sign_epi##BITS(fy, y);     \
        const __m256i beats = want_max ? _mm256_cmpgt_epi##BITS(ky, kx)                         \
                                       : _mm256_cmpgt_epi##BITS(kx, ky);                        \
        const __m256i y_nan = _mm256_cmpgt_epi##BITS(my, above);                                \
        const __m256i take_y = _mm256_or_si256(_mm256_andnot_si256(y_nan, beats),               \
                                               _mm256_cmpgt_epi##BITS(mx, above));              \
        return _mm256_blendv_epi8(x, y, take_y);                                                \
    }

SMALL_MINMAX(16)
SMALL_MINMAX(8)

/* MXCSR bit 6 is denormals-are-zero. */
#define PREP_NO_FLUSH const int flush_below = 0;
#define PREP_BF16_FLUSH const int flush_below = (_mm_getcsr() & 0x40) ? 0x80 : 0;

#define SMALL_MINMAX_KERNELS(NAME, T, W, BITS, NAN_ABOVE, PREP)                                 \
    TT_SIMD_COMBINE(TARGET, NAME##_max, T, W, __m256i, LDI, STI, PREP,                          \
                    pick##BITS(x, y, NAN_ABOVE, flush_below, 1))                                \
    TT_SIMD_COMBINE(TARGET, NAME##_min, T, W, __m256i, LDI, STI, PREP,                          \
                    pick##BITS(x, y, NAN_ABOVE, flush_below, 0))

SMALL_MINMAX_KERNELS(float16, uint16_t, 16, 16, 0x7c00, PREP_NO_FLUSH)
SMALL_MINMAX_KERNELS(bfloat16, uint16_t, 16, 16, 0x7f80, PREP_BF16_FLUSH)
SMALL_MINMAX_KERNELS(e4m3, uint8_t, 32, 8, 0x7e, PREP_NO_FLUSH)
SMALL_MINMAX_KERNELS(e5m2, uint8_t, 32, 8, 0x7c, PREP_NO_FLUSH)

/* int64 division stays scalar (double cannot hold every 64-bit dividend): its entries are
 * NULL, and the dispatcher runs the scalar loops. */
#define int64_sumdiv NULL
#define int64_div NULL
#define uint64_sumdiv NULL
#define uint64_div NULL
TT_REDUCE_TABLE(tt_reduce_avx2_kernels);

/* ---------------------------------------------------------------------------------------------
 * Streaming copy: plain copies up to dst's first line boundary and after its last whole line,
 * non-temporal stores of whole lines in between (128 bytes per iteration), then a store fence. */

TARGET void tt_copy_stream_avx2(void *dst, const void *src, size_t bytes)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    size_t head = (size_t)(-(uintptr_t)d & 63);
    if (head > bytes) head = bytes;
    memcpy(d, s, head);
    d += head;
    s += head;
    bytes -= head;
    size_t body = bytes & ~(size_t)127;
    for (size_t i = 0; i < body; i += 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(s + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(s + i + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(s + i + 64));
        __m256i e = _mm256_loadu_si256((const __m256i *)(s + i + 96));
        _mm256_stream_si256((__m256i *)(d + i), a);
        _mm256_stream_si256((__m256i *)(d + i + 32), b);
        _mm256_stream_si256((__m256i *)(d + i + 64), c);
        _mm256_stream_si256((__m256i *)(d + i + 96), e);
    }
    memcpy(d + body, s + body, bytes - body);
    _mm_sfence();
}

#else

/* ISO C wants a declaration in every translation unit. */
extern int tt_reduce_avx2_absent;

#endif
