/* Reduction kernels for every NCCL datatype x operation on host memory.
 *
 * A struct tt_redop is the resolved form of (ncclRedOp_t, dtype, nranks): ncclAvg becomes
 * PREMULSUM with scalar 1/nranks for floating types (each input is multiplied first, as NCCL
 * does) and SUMPOSTDIV by nranks for integers (sum, then divide, truncating toward zero).
 * Integer sum and product wrap (two's complement). max/min on floats ignore NaN (fmax/fmin).
 * float16, bfloat16 and fp8 compute in float and round to nearest even once per operation (a
 * PREMULSUM's product is one: rounded to the datatype before the sum, in every kernel, so that
 * every algorithm gives the same bits);
 * fp8 conversions saturate to the largest finite value (NCCL's SATFINITE); a PREMULSUM scalar is
 * rounded to the datatype first, as NCCL stores it.
 *
 * Kernels are pure functions over element arrays; dst may alias either input exactly (but not
 * partially overlap), and with count 0 the pointers are not touched (they may be NULL). They
 * never fail: callers validated the dtype and op.
 *
 * The details, each checked bit for bit by tests/unit_reduce*.c:
 * - max/min return one input's own bits: the non-NaN one if exactly one is NaN, `in` if both
 *   are, `local` on equal operands (so max(+0, -0) keeps local's zero).
 * - PREMULSUM on integers multiplies and adds with wrap-around; SUMPOSTDIV on floating types
 *   divides in the compute type. A divisor lies in 1..INT32_MAX (it is nranks).
 * - float16 and bfloat16 overflow to inf as IEEE does; fp8 saturates infinities too (e5m2's
 *   included), as NCCL's SATFINITE conversions do. A NaN converted to float16 or bfloat16 keeps
 *   its sign and the top of its payload, made quiet; to fp8 it becomes 0x7f. Decoding keeps a
 *   NaN's sign and payload (e4m3's one NaN per sign decodes to a quiet NaN).
 * - 1/nranks for ncclAvg is rounded correctly into the dtype directly, not through float.
 * - A NaN produced by arithmetic (sum, prod, premulsum, division) is a quiet NaN whose sign and
 *   payload are unspecified: with two NaN operands, which one's payload survives may differ
 *   between kernel levels. Every other result is bit-identical at every level.
 * - The kernels run in IEEE's default floating-point mode whatever the caller's (x86: FTZ, DAZ
 *   and rounding cleared, every exception masked; reduce.c, fp_mode_enter): subnormals are
 *   computed and compared exactly, and no input makes a kernel trap.
 *
 * Kernel levels: the loops exist as portable C (SCALAR, which the compiler may still vectorise
 * with the baseline instruction set), AVX2 with F16C, and AVX-512 (F, BW, DQ). The best level the
 * CPU supports is detected once, on first use, and logged at INFO; the binary runs on any x86-64
 * (and other architectures get SCALAR). Tests and benchmarks may force a level. */
#ifndef TT_REDUCE_H
#define TT_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

enum tt_redop_kind {
    TT_RED_SUM,
    TT_RED_PROD,
    TT_RED_MAX,
    TT_RED_MIN,
    TT_RED_PREMULSUM,  /* sum of (scalar * x) */
    TT_RED_SUMPOSTDIV, /* sum, then integer divide by `divisor` at the end */
};

struct tt_redop {
    enum tt_redop_kind kind;
    ncclDataType_t dtype;
    union {
        double f;    /* floating dtypes: already rounded to the dtype's precision */
        int64_t i;   /* signed integer dtypes */
        uint64_t u;  /* unsigned integer dtypes */
    } scalar;
    uint64_t divisor;
};

/* Flags for the kernels below. */
#define TT_REDUCE_PRE 0x1  /* apply the pre-operation (PREMULSUM's scalar) to `local` */
#define TT_REDUCE_POST 0x2 /* apply the post-operation (SUMPOSTDIV's division) to the result */

/* Bytes per element, or 0 for an invalid datatype. */
size_t tt_dtype_bytes(ncclDataType_t dtype);
/* "float32", "bfloat16", ... or "invalid". */
const char *tt_dtype_name(ncclDataType_t dtype);
int tt_dtype_is_float(ncclDataType_t dtype);

/* Resolves a built-in op (sum, prod, max, min, avg) for nranks ranks. */
ncclResult_t tt_redop_init(struct tt_redop *op, ncclRedOp_t red, ncclDataType_t dtype, int nranks);
/* A PREMULSUM op with a host scalar given in the dtype's own representation. */
ncclResult_t tt_redop_init_premulsum(struct tt_redop *op, ncclDataType_t dtype,
                                     const void *scalar);

/* dst[i] = post(pre(src[i])): the first touch of a rank's own data. Without flags or when the
 * op has no pre/post operation it is a plain copy (bits unchanged, NaN payloads included). */
void tt_reduce_copy(const struct tt_redop *op, void *dst, const void *src, size_t count,
                    unsigned flags);
/* dst[i] = post(pre(local[i]) OP in[i]): `in` is a partial result, already pre-multiplied. */
void tt_reduce_combine(const struct tt_redop *op, void *dst, const void *local, const void *in,
                       size_t count, unsigned flags);

/* dst1[i] = dst2[i] = post(pre(local[i]) OP in[i]) in one pass over the inputs: the result goes
 * to the output buffer and to the next send slot at once. Either destination may alias an input
 * exactly, or the other destination. */
void tt_reduce_combine2(const struct tt_redop *op, void *dst1, void *dst2, const void *local,
                        const void *in, size_t count, unsigned flags);

/* dst = src (bytes, bit for bit; the ranges do not overlap) with non-temporal stores that
 * bypass the caches, at the levels that have them (a plain memcpy at the scalar level). For
 * copies far larger than the last-level cache, whose destination will not be read again soon:
 * they then cost no read of the destination lines and evict nothing useful. Ends with a store
 * fence, so a release store that follows (a published flag) is ordered after the data. */
void tt_copy_stream(void *dst, const void *src, size_t bytes);

enum tt_reduce_level {
    TT_REDUCE_LEVEL_SCALAR,
    TT_REDUCE_LEVEL_AVX2,   /* AVX2 and F16C */
    TT_REDUCE_LEVEL_AVX512, /* AVX-512 F, BW and DQ */
    TT_REDUCE_LEVEL_COUNT,
};

/* The best level this CPU and build support (detected once, thread-safe). */
int tt_reduce_level_best(void);
/* The level the kernels use now: the best one unless a test forced another. */
int tt_reduce_level(void);
/* "scalar", "avx2", "avx512" or "invalid". */
const char *tt_reduce_level_name(int level);
/* For tests and benchmarks: run every later call at `level`, which must not exceed
 * tt_reduce_level_best() (ncclInvalidArgument otherwise). Process-wide and safe at any time: a
 * call in flight finishes at the level it started with. */
ncclResult_t tt_reduce_force_level(int level);

/* Conversions (round to nearest even; fp8 saturating). */
float tt_half_to_float(uint16_t h);
uint16_t tt_float_to_half(float f);
float tt_bf16_to_float(uint16_t b);
uint16_t tt_float_to_bf16(float f);
float tt_e4m3_to_float(uint8_t v);
uint8_t tt_float_to_e4m3(float f);
float tt_e5m2_to_float(uint8_t v);
uint8_t tt_float_to_e5m2(float f);

#endif
