/* The reductions of src/reduce (reduce.h states the semantics) as one function per element,
 * written once for the host C compiler and for nvcc: the CUDA kernels (reduce.cu) apply them on
 * the device, and tests/gpu/unit_cuda_elementwise.c checks every one of them on the host, bit
 * for bit, against the scalar host kernels, so the device results can be trusted before a GPU
 * ever ran them. Each function mirrors its loop in reduce/reduce_scalar.c: same compute type,
 * same rounding (no contraction into FMA: nvcc builds this with -fmad=false), same NaN rules.
 *
 * tt_el_<dtype>_<op>(a, b, sf, su, div): a, b are elements (b unused by the unary premul and
 * div); sf is the PREMULSUM scalar of floating types (already rounded to the dtype), su that of
 * integer types, div the SUMPOSTDIV divisor. */
#ifndef TT_DEVICE_CUDA_ELEMENTWISE_H
#define TT_DEVICE_CUDA_ELEMENTWISE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TT_HD static inline __host__ __device__
#else
#define TT_HD static inline
#endif

TT_HD uint32_t tt_el_float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

TT_HD float tt_el_bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

TT_HD uint32_t tt_el_decode_magnitude(uint32_t em, unsigned man, int bias, float unit)
{
    const uint32_t normal = (em << (23 - man)) + ((uint32_t)(127 - bias) << 23);
    const uint32_t subnormal = tt_el_float_bits((float)(int32_t)em * unit);
    return em < (1u << man) ? subnormal : normal;
}

TT_HD uint32_t tt_el_round_magnitude(uint32_t ax, unsigned man, int bias)
{
    const unsigned drop = 23 - man;
    const uint32_t r = ax - ((uint32_t)(127 - bias) << 23);
    const uint32_t normal = (r + (1u << (drop - 1)) - 1 + ((r >> drop) & 1)) >> drop;
    const float magic = (float)(1u << (24 - man)) / (float)(1u << bias);
    const uint32_t subnormal =
        tt_el_float_bits(tt_el_bits_float(ax) + magic) - tt_el_float_bits(magic);
    return ax < (uint32_t)(128 - bias) << 23 ? subnormal : normal;
}

TT_HD float tt_el_half_to_float(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16, em = h & 0x7fffu;
    const uint32_t special = 0x7f800000 | em << 13;
    return tt_el_bits_float(
        sign | (em >= 0x7c00 ? special : tt_el_decode_magnitude(em, 10, 15, 0x1p-24f)));
}

TT_HD uint16_t tt_el_float_to_half(float f)
{
    const uint32_t x = tt_el_float_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffff;
    const uint32_t nan = 0x7e00 | ((ax >> 13) & 0x3ff);
    const uint32_t q = tt_el_round_magnitude(ax, 10, 15);
    return (uint16_t)(sign | (ax > 0x7f800000 ? nan : q < 0x7c00 ? q : 0x7c00));
}

TT_HD float tt_el_bf16_to_float(uint16_t b)
{
    return tt_el_bits_float((uint32_t)b << 16);
}

TT_HD uint16_t tt_el_float_to_bf16(float f)
{
    const uint32_t x = tt_el_float_bits(f);
    const uint32_t nan = (x >> 16) | 0x40;
    const uint32_t rounded = (x + 0x7fff + ((x >> 16) & 1)) >> 16;
    return (uint16_t)((x & 0x7fffffff) > 0x7f800000 ? nan : rounded);
}

TT_HD float tt_el_e4m3_to_float(uint8_t v)
{
    const uint32_t sign = (uint32_t)(v & 0x80) << 24, em = v & 0x7fu;
    return tt_el_bits_float(
        sign | (em == 0x7f ? 0x7fc00000 : tt_el_decode_magnitude(em, 3, 7, 0x1p-9f)));
}

TT_HD uint8_t tt_el_float_to_e4m3(float f)
{
    const uint32_t x = tt_el_float_bits(f);
    const uint32_t sign = (x >> 24) & 0x80, ax = x & 0x7fffffff;
    const uint32_t q = tt_el_round_magnitude(ax, 3, 7);
    return (uint8_t)(ax > 0x7f800000 ? 0x7f : sign | (q < 0x7e ? q : 0x7e));
}

TT_HD float tt_el_e5m2_to_float(uint8_t v)
{
    return tt_el_half_to_float((uint16_t)(v << 8));
}

TT_HD uint8_t tt_el_float_to_e5m2(float f)
{
    const uint32_t x = tt_el_float_bits(f);
    const uint32_t sign = (x >> 24) & 0x80, ax = x & 0x7fffffff;
    const uint32_t q = tt_el_round_magnitude(ax, 2, 15);
    return (uint8_t)(ax > 0x7f800000 ? 0x7f : sign | (q < 0x7b ? q : 0x7b));
}

TT_HD float tt_el_code_float(uint32_t u)
{
    return tt_el_bits_float(u);
}

TT_HD double tt_el_code_double(uint64_t u)
{
    double f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#define TT_EL_SAME(x) (x)

/* One element function: T element type, body computes from a, b and the operands. */
#define TT_EL_FN(stem, op, T, OPERANDS, EXPR)                                                      \
    TT_HD T tt_el_##stem##_##op(T a, T b, double sf, uint64_t su, uint64_t div)                   \
    {                                                                                              \
        OPERANDS                                                                                   \
        (void)a, (void)b;                                                                          \
        return EXPR;                                                                               \
    }

#define TT_EL_INT_OPERANDS(U, D)                                                                   \
    const U s = (U)su;                                                                             \
    const D d = (D)div;                                                                            \
    (void)s, (void)d, (void)sf;

#define TT_EL_INT(stem, T, U, D)                                                                   \
    TT_EL_FN(stem, sum, T, TT_EL_INT_OPERANDS(U, D), (T)((U)a + (U)b))                             \
    TT_EL_FN(stem, prod, T, TT_EL_INT_OPERANDS(U, D), (T)((U)a * (U)b))                            \
    TT_EL_FN(stem, max, T, TT_EL_INT_OPERANDS(U, D), a < b ? b : a)                                \
    TT_EL_FN(stem, min, T, TT_EL_INT_OPERANDS(U, D), b < a ? b : a)                                \
    TT_EL_FN(stem, premulsum, T, TT_EL_INT_OPERANDS(U, D), (T)(s * (U)a + (U)b))                   \
    TT_EL_FN(stem, sumdiv, T, TT_EL_INT_OPERANDS(U, D), (T)((D)(T)((U)a + (U)b) / d))              \
    TT_EL_FN(stem, premul, T, TT_EL_INT_OPERANDS(U, D), (T)(s * (U)a))                             \
    TT_EL_FN(stem, div, T, TT_EL_INT_OPERANDS(U, D), (T)((D)a / d))

#define TT_EL_FLOAT_OPERANDS(C)                                                                    \
    const C s = (C)sf;                                                                             \
    const C d = (C)div;                                                                            \
    (void)s, (void)d, (void)su;

/* Max and min select one input's own bits (see reduce_scalar.c). */
#define TT_EL_FLOAT(stem, T, C, LOAD, STORE, S, LOAD_S)                                            \
    TT_EL_FN(stem, sum, T, TT_EL_FLOAT_OPERANDS(C), STORE(LOAD(a) + LOAD(b)))                      \
    TT_EL_FN(stem, prod, T, TT_EL_FLOAT_OPERANDS(C), STORE(LOAD(a) * LOAD(b)))                     \
    TT_EL_FN(stem, premulsum, T, TT_EL_FLOAT_OPERANDS(C),                                          \
             STORE(LOAD(STORE(s * LOAD(a))) + LOAD(b)))                                            \
    TT_EL_FN(stem, sumdiv, T, TT_EL_FLOAT_OPERANDS(C), STORE((LOAD(a) + LOAD(b)) / d))             \
    TT_EL_FN(stem, premul, T, TT_EL_FLOAT_OPERANDS(C), STORE(s * LOAD(a)))                         \
    TT_EL_FN(stem, div, T, TT_EL_FLOAT_OPERANDS(C), STORE(LOAD(a) / d))                            \
    TT_HD T tt_el_##stem##_max(T a, T b, double sf, uint64_t su, uint64_t div)                    \
    {                                                                                              \
        S ca, cb;                                                                                  \
        memcpy(&ca, &a, sizeof ca);                                                                \
        memcpy(&cb, &b, sizeof cb);                                                                \
        C x = LOAD_S(ca), y = LOAD_S(cb);                                                          \
        (void)sf, (void)su, (void)div;                                                             \
        return x < y || isnan(x) ? b : a;                                                          \
    }                                                                                              \
    TT_HD T tt_el_##stem##_min(T a, T b, double sf, uint64_t su, uint64_t div)                    \
    {                                                                                              \
        S ca, cb;                                                                                  \
        memcpy(&ca, &a, sizeof ca);                                                                \
        memcpy(&cb, &b, sizeof cb);                                                                \
        C x = LOAD_S(ca), y = LOAD_S(cb);                                                          \
        (void)sf, (void)su, (void)div;                                                             \
        return y < x || isnan(x) ? b : a;                                                          \
    }

/* X(stem, T): every datatype, in ncclDataType_t order. */
#define TT_EL_DTYPES(X)                                                                            \
    X(int8, int8_t)                                                                                \
    X(uint8, uint8_t)                                                                              \
    X(int32, int32_t)                                                                              \
    X(uint32, uint32_t)                                                                            \
    X(int64, int64_t)                                                                              \
    X(uint64, uint64_t)                                                                            \
    X(float16, uint16_t)                                                                           \
    X(float32, float)                                                                              \
    X(float64, double)                                                                             \
    X(bfloat16, uint16_t)                                                                          \
    X(e4m3, uint8_t)                                                                               \
    X(e5m2, uint8_t)

/* X(ARG, op): every operation, in the order of reduce/kernels.h's TT_REDUCE_OPS (and of enum
 * tt_device_red in device/device.h). */
#define TT_EL_OPS(X, ARG)                                                                          \
    X(ARG, sum)                                                                                    \
    X(ARG, prod)                                                                                   \
    X(ARG, max)                                                                                    \
    X(ARG, min)                                                                                    \
    X(ARG, premulsum)                                                                              \
    X(ARG, sumdiv)                                                                                 \
    X(ARG, premul)                                                                                 \
    X(ARG, div)

TT_EL_INT(int8, int8_t, uint8_t, int32_t)
TT_EL_INT(uint8, uint8_t, uint8_t, uint32_t)
TT_EL_INT(int32, int32_t, uint32_t, int32_t)
TT_EL_INT(uint32, uint32_t, uint32_t, uint32_t)
TT_EL_INT(int64, int64_t, uint64_t, int64_t)
TT_EL_INT(uint64, uint64_t, uint64_t, uint64_t)
TT_EL_FLOAT(float16, uint16_t, float, tt_el_half_to_float, tt_el_float_to_half, uint16_t,
            tt_el_half_to_float)
TT_EL_FLOAT(float32, float, float, TT_EL_SAME, TT_EL_SAME, uint32_t, tt_el_code_float)
TT_EL_FLOAT(float64, double, double, TT_EL_SAME, TT_EL_SAME, uint64_t, tt_el_code_double)
TT_EL_FLOAT(bfloat16, uint16_t, float, tt_el_bf16_to_float, tt_el_float_to_bf16, uint16_t,
            tt_el_bf16_to_float)
TT_EL_FLOAT(e4m3, uint8_t, float, tt_el_e4m3_to_float, tt_el_float_to_e4m3, uint8_t,
            tt_el_e4m3_to_float)
TT_EL_FLOAT(e5m2, uint8_t, float, tt_el_e5m2_to_float, tt_el_float_to_e5m2, uint8_t,
            tt_el_e5m2_to_float)

#endif
