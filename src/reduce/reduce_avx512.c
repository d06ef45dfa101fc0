/* Reduction loops for the AVX-512 level (F, BW and DQ), bit-identical to the scalar loops of
 * reduce_scalar.c. The file compiles with the baseline flags: every function carries a target
 * attribute, and the dispatcher calls one only after detecting the features.
 *
 * The algorithms are those of reduce_avx2.c (see there for why each is exact), on 512-bit
 * vectors, with what AVX-512 adds: 64-bit multiply, max and min; unsigned conversions; per-lane
 * masks for selection; and narrowing stores. */
#include "reduce/kernels.h"

#ifdef TT_REDUCE_X86

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512dq")))

/* The loops' tails (simd.h) move their last bytes (fewer than 64) with masked byte loads and
 * stores, which never touch the bytes masked off: no library call, and the masked load fills
 * the rest of the buffer with zeros. */
#define TT_SIMD_TAIL_MASK(bytes) ((__mmask64)((((uint64_t)1) << (bytes)) - 1))
#define TT_SIMD_TAIL_IN(buf, src, bytes)                                                        \
    do {                                                                                        \
        _Static_assert(sizeof(buf) == 64, "a tail is less than one 64-byte vector");            \
        _mm512_storeu_si512((void *)(buf), _mm512_maskz_loadu_epi8(TT_SIMD_TAIL_MASK(bytes),    \
                                                                   (const void *)(src)));       \
    } while (0)
#define TT_SIMD_TAIL_OUT(dst, buf, bytes)                                                       \
    _mm512_mask_storeu_epi8((void *)(dst), TT_SIMD_TAIL_MASK(bytes),                            \
                            _mm512_maskz_loadu_epi8(TT_SIMD_TAIL_MASK(bytes),                   \
                                                    (const void *)(buf)))

#include "reduce/simd.h"

/* ---------------------------------------------------------------------------------------------
 * Integers. */

#define LDI(p) _mm512_loadu_si512((const void *)(p))
#define STI(p, v) _mm512_storeu_si512((void *)(p), (v))
#define LD16B(p) _mm_loadu_si128((const void *)(p))
#define ST16B(p, v) _mm_storeu_si128((void *)(p), (v))

/* 8-bit products: the low byte of a 16-bit product depends only on the factors' low bytes. */
TARGET static inline __m512i mul_epi8(__m512i x, __m512i y)
{
    const __m512i even = _mm512_mullo_epi16(x, y);
    const __m512i odd = _mm512_mullo_epi16(_mm512_srli_epi16(x, 8), _mm512_srli_epi16(y, 8));
    return _mm512_mask_blend_epi8(0xaaaaaaaaaaaaaaaaull, even, _mm512_slli_epi16(odd, 8));
}

/* Integer division in floating lanes, exact (see reduce_avx2.c): 32-bit lanes in double, 8-bit
 * lanes in float. */
TARGET static inline __m512i div_epi32(__m512i v, __m512d d)
{
    const __m256i lo = _mm512_cvttpd_epi32(
        _mm512_div_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(v)), d));
    const __m256i hi = _mm512_cvttpd_epi32(
        _mm512_div_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(v, 1)), d));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

TARGET static inline __m512i div_epu32(__m512i v, __m512d d)
{
    const __m256i lo = _mm512_cvttpd_epu32(
        _mm512_div_pd(_mm512_cvtepu32_pd(_mm512_castsi512_si256(v)), d));
    const __m256i hi = _mm512_cvttpd_epu32(
        _mm512_div_pd(_mm512_cvtepu32_pd(_mm512_extracti64x4_epi64(v, 1)), d));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

TARGET static inline __m128i div_epi8(__m128i v, __m512 d)
{
    const __m512 a = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v));
    return _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(_mm512_div_ps(a, d)));
}

TARGET static inline __m128i div_epu8(__m128i v, __m512 d)
{
    const __m512 a = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v));
    return _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(_mm512_div_ps(a, d)));
}

/* The op's scalar broadcast to each lane width (its low bits, as the scalar loops take them). */
#define PREP_S(SET1, CAST)                                                                      \
    const __m512i s = SET1((CAST)op->scalar.u);                                                 \
    (void)s;
#define PREP_S8 PREP_S(_mm512_set1_epi8, char)
#define PREP_S32 PREP_S(_mm512_set1_epi32, int)
#define PREP_S64 PREP_S(_mm512_set1_epi64, long long)
#define PREP_DF const __m512 d = _mm512_set1_ps((float)op->divisor);
#define PREP_DD const __m512d d = _mm512_set1_pd((double)op->divisor);

#define INT_KERNELS(NAME, T, W, PREP, ADD, MUL, MAX, MIN)                                       \
    TT_SIMD_COMBINE(TARGET, NAME##_sum, T, W, __m512i, LDI, STI, , ADD(x, y))                   \
    TT_SIMD_COMBINE(TARGET, NAME##_prod, T, W, __m512i, LDI, STI, , MUL(x, y))                  \
    TT_SIMD_COMBINE(TARGET, NAME##_max, T, W, __m512i, LDI, STI, , MAX(x, y))                   \
    TT_SIMD_COMBINE(TARGET, NAME##_min, T, W, __m512i, LDI, STI, , MIN(x, y))                   \
    TT_SIMD_COMBINE(TARGET, NAME##_premulsum, T, W, __m512i, LDI, STI, PREP, ADD(MUL(s, x), y)) \
    TT_SIMD_APPLY(TARGET, NAME##_premul, T, W, __m512i, LDI, STI, PREP, MUL(s, x))

INT_KERNELS(int8, int8_t, 64, PREP_S8, _mm512_add_epi8, mul_epi8, _mm512_max_epi8,
            _mm512_min_epi8)
INT_KERNELS(uint8, uint8_t, 64, PREP_S8, _mm512_add_epi8, mul_epi8, _mm512_max_epu8,
            _mm512_min_epu8)
INT_KERNELS(int32, int32_t, 16, PREP_S32, _mm512_add_epi32, _mm512_mullo_epi32,
            _mm512_max_epi32, _mm512_min_epi32)
INT_KERNELS(uint32, uint32_t, 16, PREP_S32, _mm512_add_epi32, _mm512_mullo_epi32,
            _mm512_max_epu32, _mm512_min_epu32)
INT_KERNELS(int64, int64_t, 8, PREP_S64, _mm512_add_epi64, _mm512_mullo_epi64, _mm512_max_epi64,
            _mm512_min_epi64)
INT_KERNELS(uint64, uint64_t, 8, PREP_S64, _mm512_add_epi64, _mm512_mullo_epi64,
            _mm512_max_epu64, _mm512_min_epu64)

/* The divisions: the sum wraps in the element type before it is divided. */
TT_SIMD_COMBINE(TARGET, int8_sumdiv, int8_t, 16, __m128i, LD16B, ST16B, PREP_DF,
                div_epi8(_mm_add_epi8(x, y), d))
TT_SIMD_APPLY(TARGET, int8_div, int8_t, 16, __m128i, LD16B, ST16B, PREP_DF, div_epi8(x, d))
TT_SIMD_COMBINE(TARGET, uint8_sumdiv, uint8_t, 16, __m128i, LD16B, ST16B, PREP_DF,
                div_epu8(_mm_add_epi8(x, y), d))
TT_SIMD_APPLY(TARGET, uint8_div, uint8_t, 16, __m128i, LD16B, ST16B, PREP_DF, div_epu8(x, d))
TT_SIMD_COMBINE(TARGET, int32_sumdiv, int32_t, 16, __m512i, LDI, STI, PREP_DD,
                div_epi32(_mm512_add_epi32(x, y), d))
TT_SIMD_APPLY(TARGET, int32_div, int32_t, 16, __m512i, LDI, STI, PREP_DD, div_epi32(x, d))
TT_SIMD_COMBINE(TARGET, uint32_sumdiv, uint32_t, 16, __m512i, LDI, STI, PREP_DD,
                div_epu32(_mm512_add_epi32(x, y), d))
TT_SIMD_APPLY(TARGET, uint32_div, uint32_t, 16, __m512i, LDI, STI, PREP_DD, div_epu32(x, d))

/* ---------------------------------------------------------------------------------------------
 * Floating types: loads widen to float (or stay double), stores round back. */

#define I32(v) _mm512_set1_epi32((int)(v))

TARGET static inline __m512 ld_f32(const float *p) { return _mm512_loadu_ps(p); }
TARGET static inline void st_f32(float *p, __m512 v) { _mm512_storeu_ps(p, v); }
TARGET static inline __m512d ld_f64(const double *p) { return _mm512_loadu_pd(p); }
TARGET static inline void st_f64(double *p, __m512d v) { _mm512_storeu_pd(p, v); }

TARGET static inline __m512 ld_f16(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const void *)p));
}

TARGET static inline void st_f16(uint16_t *p, __m512 v)
{
    _mm256_storeu_si256((void *)p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

/* bfloat16 in pairs of codes per 32-bit lane (see reduce_avx2.c). */
struct bf16x2 {
    __m512 lo, hi;
};

TARGET static inline struct bf16x2 ld_bf16x2(const uint16_t *p)
{
    const __m512i v = _mm512_loadu_si512((const void *)p);
    const struct bf16x2 r = {_mm512_castsi512_ps(_mm512_slli_epi32(v, 16)),
                             _mm512_castsi512_ps(_mm512_and_si512(v, I32(0xffff0000)))};
    return r;
}

/* The scalar float_to_bf16, lane by lane, leaving the code in the lane's top half (AVX512-BF16's
 * conversion would flush subnormals, so it is not used). */
TARGET static inline __m512i round_bf16(__m512 v)
{
    const __m512i x = _mm512_castps_si512(v);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(x, 16), I32(1));
    const __m512i rounded = _mm512_add_epi32(_mm512_add_epi32(x, I32(0x7fff)), odd);
    const __mmask16 is_nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, I32(0x7fffffff)),
                                                     I32(0x7f800000));
    return _mm512_mask_or_epi32(rounded, is_nan, x, I32(0x400000));
}

TARGET static inline void st_bf16x2(uint16_t *p, struct bf16x2 v)
{
    const __m512i lo = _mm512_srli_epi32(round_bf16(v.lo), 16);
    const __m512i hi = _mm512_and_si512(round_bf16(v.hi), I32(0xffff0000));
    _mm512_storeu_si512((void *)p, _mm512_or_si512(lo, hi));
}

TARGET static inline struct bf16x2 splat_x2(float f)
{
    const struct bf16x2 r = {_mm512_set1_ps(f), _mm512_set1_ps(f)};
    return r;
}

#define PAIR_OP(NAME, OP)                                                                       \
    TARGET static inline struct bf16x2 NAME(struct bf16x2 x, struct bf16x2 y)                  \
    {                                                                                           \
        const struct bf16x2 r = {OP(x.lo, y.lo), OP(x.hi, y.hi)};                               \
        return r;                                                                               \
    }

PAIR_OP(add_x2, _mm512_add_ps)
PAIR_OP(mul_x2, _mm512_mul_ps)
PAIR_OP(div_x2, _mm512_div_ps)

/* e4m3 decodes through float16 (see reduce_avx2.c). */
TARGET static inline __m512 ld_e4m3(const uint8_t *p)
{
    const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128((const void *)p));
    const __m256i em = _mm256_and_si256(v, _mm256_set1_epi16(0x7f));
    const __m256i nan = _mm256_and_si256(_mm256_cmpeq_epi16(em, _mm256_set1_epi16(0x7f)),
                                         _mm256_set1_epi16(0x7c00));
    const __m256i sign = _mm256_and_si256(_mm256_slli_epi16(v, 8), _mm256_set1_epi16(INT16_MIN));
    const __m256i h = _mm256_or_si256(_mm256_or_si256(_mm256_slli_epi16(em, 7), sign), nan);
    return _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
}

TARGET static inline __m512 ld_e5m2(const uint8_t *p)
{
    const __m256i h = _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const void *)p)), 8);
    return _mm512_cvtph_ps(h);
}

/* The scalar round_magnitude, lane by lane (same integer steps, same float addition). */
TARGET static inline __m512i round_magnitude(__m512i ax, int man, int bias)
{
    const unsigned drop = 23u - (unsigned)man;
    const __m512i r = _mm512_sub_epi32(ax, I32((127 - bias) << 23));
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(r, drop), I32(1));
    const __m512i normal = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(r, I32((1u << (drop - 1)) - 1)), odd), drop);
    const __m512 magic = _mm512_set1_ps((float)(1u << (24 - man)) / (float)(1u << bias));
    const __m512i subnormal = _mm512_sub_epi32(
        _mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(ax), magic)),
        _mm512_castps_si512(magic));
    return _mm512_mask_blend_epi32(_mm512_cmplt_epi32_mask(ax, I32((128 - bias) << 23)), normal,
                                   subnormal);
}

/* The scalar float_to_e4m3 / float_to_e5m2: saturate to the largest finite code `top`, NaN to
 * 0x7f. */
TARGET static inline void st_fp8(uint8_t *p, __m512 v, int man, int bias, int top)
{
    const __m512i x = _mm512_castps_si512(v);
    const __m512i ax = _mm512_and_si512(x, I32(0x7fffffff));
    const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(x, 24), I32(0x80));
    __m512i q = _mm512_or_si512(_mm512_min_epu32(round_magnitude(ax, man, bias), I32(top)), sign);
    q = _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(ax, I32(0x7f800000)), q, I32(0x7f));
    _mm_storeu_si128((void *)p, _mm512_cvtepi32_epi8(q));
}

TARGET static inline void st_e4m3(uint8_t *p, __m512 v) { st_fp8(p, v, 3, 7, 0x7e); }
TARGET static inline void st_e5m2(uint8_t *p, __m512 v) { st_fp8(p, v, 2, 15, 0x7b); }

#define PREP_F32                                                                                \
    const __m512 s = _mm512_set1_ps((float)op->scalar.f);                                       \
    const __m512 d = _mm512_set1_ps((float)op->divisor);                                        \
    (void)s;                                                                                    \
    (void)d;
#define PREP_X2                                                                                 \
    const struct bf16x2 s = splat_x2((float)op->scalar.f);                                      \
    const struct bf16x2 d = splat_x2((float)op->divisor);                                       \
    (void)s;                                                                                    \
    (void)d;
#define PREP_F64                                                                                \
    const __m512d s = _mm512_set1_pd(op->scalar.f);                                             \
    const __m512d d = _mm512_set1_pd((double)op->divisor);                                      \
    (void)s;                                                                                    \
    (void)d;

/* Each operation rounds on its own (no fused multiply-add), as in the scalar loops. */
#define FLOAT_KERNELS(NAME, T, W, V, LD, ST, PREP, ADD, MUL, DIV, RT)                           \
    TT_SIMD_COMBINE(TARGET, NAME##_sum, T, W, V, LD, ST, , ADD(x, y))                           \
    TT_SIMD_COMBINE(TARGET, NAME##_prod, T, W, V, LD, ST, , MUL(x, y))                          \
    TT_SIMD_COMBINE(TARGET, NAME##_premulsum, T, W, V, LD, ST, PREP, ADD(RT(MUL(s, x)), y))     \
    TT_SIMD_COMBINE(TARGET, NAME##_sumdiv, T, W, V, LD, ST, PREP, DIV(ADD(x, y), d))            \
    TT_SIMD_APPLY(TARGET, NAME##_premul, T, W, V, LD, ST, PREP, MUL(s, x))                      \
    TT_SIMD_APPLY(TARGET, NAME##_div, T, W, V, LD, ST, PREP, DIV(x, d))

/* The products of PreMulSum rounded to the element type (simd.h). */
TT_SIMD_ROUND_TRIP(TARGET, rt_f16, uint16_t, 16, __m512, ld_f16, st_f16)
TT_SIMD_ROUND_TRIP(TARGET, rt_e4m3, uint8_t, 16, __m512, ld_e4m3, st_e4m3)
TT_SIMD_ROUND_TRIP(TARGET, rt_e5m2, uint8_t, 16, __m512, ld_e5m2, st_e5m2)
TT_SIMD_ROUND_TRIP(TARGET, rt_bf16x2, uint16_t, 32, struct bf16x2, ld_bf16x2, st_bf16x2)

#define FLOAT32_KERNELS(NAME, T, LD, ST, RT)                                                    \
    FLOAT_KERNELS(NAME, T, 16, __m512, LD, ST, PREP_F32, _mm512_add_ps, _mm512_mul_ps,          \
                  _mm512_div_ps, RT)

FLOAT32_KERNELS(float32, float, ld_f32, st_f32, TT_SIMD_SAME)
FLOAT32_KERNELS(float16, uint16_t, ld_f16, st_f16, rt_f16)
FLOAT32_KERNELS(e4m3, uint8_t, ld_e4m3, st_e4m3, rt_e4m3)
FLOAT32_KERNELS(e5m2, uint8_t, ld_e5m2, st_e5m2, rt_e5m2)
FLOAT_KERNELS(float64, double, 8, __m512d, ld_f64, st_f64, PREP_F64, _mm512_add_pd,
              _mm512_mul_pd, _mm512_div_pd, TT_SIMD_SAME)
FLOAT_KERNELS(bfloat16, uint16_t, 32, struct bf16x2, ld_bf16x2, st_bf16x2, PREP_X2, add_x2,
              mul_x2, div_x2, rt_bf16x2)

/* Max and min of float and double: take y when x < y (y < x for min) or x is NaN, else x. */
#define FLOAT_MINMAX(NAME, V, MASK, SFX)                                                        \
    TARGET static inline V max_##NAME(V x, V y)                                                 \
    {                                                                                           \
        const MASK take_y = _mm512_cmp_##SFX##_mask(x, y, _CMP_LT_OQ) |                         \
                            _mm512_cmp_##SFX##_mask(x, x, _CMP_UNORD_Q);                        \
        return _mm512_mask_blend_##SFX(take_y, x, y);                                           \
    }                                                                                           \
    TARGET static inline V min_##NAME(V x, V y)                                                 \
    {                                                                                           \
        const MASK take_y = _mm512_cmp_##SFX##_mask(y, x, _CMP_LT_OQ) |                         \
                            _mm512_cmp_##SFX##_mask(x, x, _CMP_UNORD_Q);                        \
        return _mm512_mask_blend_##SFX(take_y, x, y);                                           \
    }

FLOAT_MINMAX(f32, __m512, __mmask16, ps)
FLOAT_MINMAX(f64, __m512d, __mmask8, pd)

TT_SIMD_COMBINE(TARGET, float32_max, float, 16, __m512, ld_f32, st_f32, , max_f32(x, y))
TT_SIMD_COMBINE(TARGET, float32_min, float, 16, __m512, ld_f32, st_f32, , min_f32(x, y))
TT_SIMD_COMBINE(TARGET, float64_max, double, 8, __m512d, ld_f64, st_f64, , max_f64(x, y))
TT_SIMD_COMBINE(TARGET, float64_min, double, 8, __m512d, ld_f64, st_f64, , min_f64(x, y))

/* Max and min of the small formats on their codes, keyed by signed magnitude, with bfloat16's
 * subnormals as zeros under denormals-are-zero (see reduce_avx2.c): y wins when x is NaN, or when
 * y is not NaN and its key beats x's. */
#define SMALL_MINMAX(BITS, MASK)                                                                \
    TARGET static inline __m512i pick##BITS(__m512i x, __m512i y, int nan_above,               \
                                            int flush_below, int want_max)                      \
    {                                                                                           \
        const __m512i mag_mask = _mm512_set1_epi##BITS(INT##BITS##_MAX);                        \
        const __m512i above = _mm512_set1_epi##BITS(nan_above), zero = _mm512_setzero_si512();  \
        const __m512i below = _mm512_set1_epi##BITS(flush_below);                               \
        const __m512i mx = _mm512_and_si512(x, mag_mask), my = _mm512_and_si512(y, mag_mask);  \
        const __m512i fx = _mm512_maskz_mov_epi##BITS(_mm512_cmpge_epi##BITS##_mask(mx, below),   \
                                                      mx);                                      \
        const __m512i fy = _mm512_maskz_mov_epi##BITS(_mm512_cmpge_epi##BITS##_mask(my, below),   \
                                                      my);                                      \
        const __m512i kx = _mm512_mask_sub_epi##BITS(fx, _mm512_movepi##BITS##_mask(x), zero,     \
                                                     fx);                                       \
        const __m512i ky = _mm512_mask_sub_epi##BITS(fy, _mm512_movepi##BITS##_mask(y), zero,     \
                                                     fy);                                       \
        const MASK beats = want_max ? _mm512_cmpgt_epi##BITS##_mask(ky, kx)                     \
                                    : _mm512_cmpgt_epi##BITS##_mask(kx, ky);                    \
        const MASK take_y = (MASK)((beats & ~_mm512_cmpgt_epi##BITS##_mask(my, above)) |        \
                                   _mm512_cmpgt_epi##BITS##_mask(mx, above));                   \
        return _mm512_mask_blend_epi##BITS(take_y, x, y);                                       \
    }

SMALL_MINMAX(16, __mmask32)
SMALL_MINMAX(8, __mmask64)

/* MXCSR bit 6 is denormals-are-zero. */
#define PREP_NO_FLUSH const int flush_below = 0;
#define PREP_BF16_FLUSH const int flush_below = (_mm_getcsr() & 0x40) ? 0x80 : 0;

#define SMALL_MINMAX_KERNELS(NAME, T, W, BITS, NAN_ABOVE, PREP)                                 \
    TT_SIMD_COMBINE(TARGET, NAME##_max, T, W, __m512i, LDI, STI, PREP,                          \
                    pick##BITS(x, y, NAN_ABOVE, flush_below, 1))                                \
    TT_SIMD_COMBINE(TARGET, NAME##_min, T, W, __m512i, LDI, STI, PREP,                          \
                    pick##BITS(x, y, NAN_ABOVE, flush_below, 0))

SMALL_MINMAX_KERNELS(float16, uint16_t, 32, 16, 0x7c00, PREP_NO_FLUSH)
SMALL_MINMAX_KERNELS(bfloat16, uint16_t, 32, 16, 0x7f80, PREP_BF16_FLUSH)
SMALL_MINMAX_KERNELS(e4m3, uint8_t, 64, 8, 0x7e, PREP_NO_FLUSH)
SMALL_MINMAX_KERNELS(e5m2, uint8_t, 64, 8, 0x7c, PREP_NO_FLUSH)

/* int64 division stays scalar (double cannot hold every 64-bit dividend): its entries are
 * NULL, and the dispatcher runs the scalar loops. */
#define int64_sumdiv NULL
#define int64_div NULL
#define uint64_sumdiv NULL
#define uint64_div NULL
TT_REDUCE_TABLE(tt_reduce_avx512_kernels);

/* ---------------------------------------------------------------------------------------------
 * Streaming copy: plain copies up to dst's first line boundary and after its last whole line,
 * non-temporal stores of whole lines in between (256 bytes per iteration), then a store fence. */

TARGET void tt_copy_stream_avx512(void *dst, const void *src, size_t bytes)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    size_t head = (size_t)(-(uintptr_t)d & 63);
    if (head > bytes) head = bytes;
    memcpy(d, s, head);
    d += head;
    s += head;
    bytes -= head;
    size_t body = bytes & ~(size_t)255;
    for (size_t i = 0; i < body; i += 256) {
        __m512i a = _mm512_loadu_si512((const void *)(s + i));
        __m512i b = _mm512_loadu_si512((const void *)(s + i + 64));
        __m512i c = _mm512_loadu_si512((const void *)(s + i + 128));
        __m512i e = _mm512_loadu_si512((const void *)(s + i + 192));
        _mm512_stream_si512((void *)(d + i), a);
        _mm512_stream_si512((void *)(d + i + 64), b);
        _mm512_stream_si512((void *)(d + i + 128), c);
        _mm512_stream_si512((void *)(d + i + 192), e);
    }
    memcpy(d + body, s + body, bytes - body);
    _mm_sfence();
}

#else

/* ISO C wants a declaration in every translation unit. */
extern int tt_reduce_avx512_absent;

#endif
