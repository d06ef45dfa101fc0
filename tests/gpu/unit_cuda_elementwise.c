/* The CUDA reduction's element functions (src/device/cuda/elementwise.h), run on the host and
 * compared bit for bit with the scalar host kernels (src/reduce/reduce_scalar.c) for every
 * datatype x operation, on random bits plus the awkward values (zeros of both signs,
 * subnormals, infinities, NaNs, the largest finite values). The device kernels apply the same
 * functions, so this checks their arithmetic without a GPU; tests/gpu/gpu_reduce.c checks the
 * kernels themselves on one. Label cuda, runs everywhere. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/elementwise.h"
#include "reduce/kernels.h"
#include "reduce/reduce.h"

#define N 8192

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_bits(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Element i of a test input of `bytes`-wide elements: awkward values first, then random. */
static uint64_t input_bits(size_t i, size_t bytes, int which)
{
    static const uint64_t f32[] = {0, 0x80000000, 1, 0x807fffff, 0x7f800000, 0xff800000,
                                   0x7fc00001, 0xffc00000, 0x7f7fffff, 0x3f800000};
    static const uint64_t f16[] = {0, 0x8000, 1, 0x83ff, 0x7c00, 0xfc00, 0x7e01, 0xfe00,
                                   0x7bff, 0x3c00};
    static const uint64_t f8[] = {0, 0x80, 1, 0x87, 0x7f, 0xff, 0x7e, 0x7b, 0x7c, 0x38};
    static const uint64_t f64[] = {0, 0x8000000000000000ull, 1, 0x7ff0000000000000ull,
                                   0x7ff8000000000001ull, 0x7fefffffffffffffull,
                                   0x3ff0000000000000ull};
    const uint64_t *special = bytes == 8 ? f64 : bytes == 4 ? f32 : bytes == 2 ? f16 : f8;
    size_t nspecial = bytes == 8 ? 7 : 10;
    if (i < nspecial * nspecial)
        return special[which == 0 ? i % nspecial : i / nspecial];
    return next_bits();
}

static int failures;
static int checked;

/* Compares the element function of (stem, op) with the host kernel's result in `want`. */
/* A NaN made by arithmetic from two NaNs may carry either one's payload (reduce.h), so there
 * any NaN matches any NaN; max and min must return an input's exact bits. */
#define COMPARE(stem, op, nan_ok)                                                                  \
    for (size_t i = 0; i < N; i++) {                                                               \
        elt_t got = tt_el_##stem##_##op(a[i], b[i], red.scalar.f, red.scalar.u, red.divisor);     \
        if (nan_ok && is_nan(got) && is_nan(want[i])) continue;                                    \
        if (memcmp(&got, &want[i], sizeof(elt_t)) != 0) {                                          \
            uint64_t g = 0, w = 0, x = 0, y = 0;                                                   \
            memcpy(&g, &got, sizeof(elt_t));                                                           \
            memcpy(&w, &want[i], sizeof(elt_t));                                                       \
            memcpy(&x, &a[i], sizeof(elt_t));                                                          \
            memcpy(&y, &b[i], sizeof(elt_t));                                                          \
            fprintf(stderr, "FAIL %s %s [%zu]: a %#llx b %#llx: got %#llx, want %#llx\n", #stem,  \
                    #op, i, (unsigned long long)x, (unsigned long long)y,                         \
                    (unsigned long long)g, (unsigned long long)w);                                 \
            failures++;                                                                            \
            break;                                                                                 \
        }                                                                                          \
    }                                                                                              \
    checked++;

#define COMBINE(stem, op, nan_ok)                                                                  \
    k->op(want, NULL, a, b, N, &red);                                                              \
    COMPARE(stem, op, nan_ok)
#define APPLY(stem, op)                                                                            \
    k->op(want, a, N, &red);                                                                       \
    COMPARE(stem, op, 1)

#define CHECK_DTYPE(stem, T, DT, SCALAR, ISNAN)                                                        \
    static void check_##stem(void)                                                                 \
    {                                                                                              \
        typedef T elt_t;                                                                           \
        bool (*is_nan)(elt_t) = ISNAN;                                                             \
        T *a = malloc(N * sizeof(elt_t)), *b = malloc(N * sizeof(elt_t)), *want = malloc(N * sizeof(elt_t));  \
        for (size_t i = 0; i < N; i++) {                                                           \
            uint64_t x = input_bits(i, sizeof(elt_t), 0), y = input_bits(i, sizeof(elt_t), 1);             \
            memcpy(&a[i], &x, sizeof(elt_t));                                                          \
            memcpy(&b[i], &y, sizeof(elt_t));                                                          \
        }                                                                                          \
        struct tt_redop red;                                                                       \
        memset(&red, 0, sizeof red);                                                               \
        red.dtype = DT;                                                                            \
        red.divisor = 3;                                                                           \
        SCALAR;                                                                                    \
        const struct tt_reduce_kernels *k = &tt_reduce_scalar_kernels[DT];                        \
        COMBINE(stem, sum, 1)                                                                      \
        COMBINE(stem, prod, 1)                                                                     \
        COMBINE(stem, max, 0)                                                                      \
        COMBINE(stem, min, 0)                                                                      \
        COMBINE(stem, premulsum, 1)                                                                \
        COMBINE(stem, sumdiv, 1)                                                                   \
        APPLY(stem, premul)                                                                        \
        APPLY(stem, div)                                                                           \
        free(a);                                                                                   \
        free(b);                                                                                   \
        free(want);                                                                                \
    }

/* PREMULSUM scalars as tt_redop holds them: integers wrap, floats are rounded to the dtype
 * (1/3 where the dtype can round it, 0.25 for the small formats, exact in all of them). */
#define INT_SCALAR red.scalar.u = 0xfffffffffffffffdull
#define F32_SCALAR red.scalar.f = (double)(float)(1.0 / 3)
#define F64_SCALAR red.scalar.f = 1.0 / 3
#define SMALL_SCALAR red.scalar.f = 0.25

static bool nan_i8(int8_t x) { return false; }
static bool nan_u8(uint8_t x) { return false; }
static bool nan_i32(int32_t x) { return false; }
static bool nan_u32(uint32_t x) { return false; }
static bool nan_i64(int64_t x) { return false; }
static bool nan_u64(uint64_t x) { return false; }
static bool nan_f16(uint16_t x) { return isnan(tt_el_half_to_float(x)); }
static bool nan_f32(float x) { return isnan(x); }
static bool nan_f64(double x) { return isnan(x); }
static bool nan_bf16(uint16_t x) { return isnan(tt_el_bf16_to_float(x)); }
static bool nan_e4m3(uint8_t x) { return isnan(tt_el_e4m3_to_float(x)); }
static bool nan_e5m2(uint8_t x) { return isnan(tt_el_e5m2_to_float(x)); }

CHECK_DTYPE(int8, int8_t, ncclInt8, INT_SCALAR, nan_i8)
CHECK_DTYPE(uint8, uint8_t, ncclUint8, INT_SCALAR, nan_u8)
CHECK_DTYPE(int32, int32_t, ncclInt32, INT_SCALAR, nan_i32)
CHECK_DTYPE(uint32, uint32_t, ncclUint32, INT_SCALAR, nan_u32)
CHECK_DTYPE(int64, int64_t, ncclInt64, INT_SCALAR, nan_i64)
CHECK_DTYPE(uint64, uint64_t, ncclUint64, INT_SCALAR, nan_u64)
CHECK_DTYPE(float16, uint16_t, ncclFloat16, SMALL_SCALAR, nan_f16)
CHECK_DTYPE(float32, float, ncclFloat32, F32_SCALAR, nan_f32)
CHECK_DTYPE(float64, double, ncclFloat64, F64_SCALAR, nan_f64)
CHECK_DTYPE(bfloat16, uint16_t, ncclBfloat16, SMALL_SCALAR, nan_bf16)
CHECK_DTYPE(e4m3, uint8_t, ncclFloat8e4m3, SMALL_SCALAR, nan_e4m3)
CHECK_DTYPE(e5m2, uint8_t, ncclFloat8e5m2, SMALL_SCALAR, nan_e5m2)

int main(void)
{
    check_int8();
    check_uint8();
    check_int32();
    check_uint32();
    check_int64();
    check_uint64();
    check_float16();
    check_float32();
    check_float64();
    check_bfloat16();
    check_e4m3();
    check_e5m2();
    printf("unit_cuda_elementwise: %d datatype x operation pairs, %d elements each: %d failed\n",
           checked, N, failures);
    return failures == 0 ? 0 : 1;
}
