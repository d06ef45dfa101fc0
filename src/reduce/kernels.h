/* The reduction module's inside: one table of loops per kernel level, indexed by datatype, that
 * reduce.c dispatches through. Every level computes the same bits (reduce.h states them); a
 * level may leave an entry NULL, and the dispatcher then runs the scalar loop instead.
 *
 * A combine loop writes its result to dst and, when dst2 is not NULL, to dst2 as well; dst and
 * dst2 may alias a or b exactly. Loops are called with count > 0 and a valid dtype only. */
#ifndef TT_REDUCE_KERNELS_H
#define TT_REDUCE_KERNELS_H

#include <stddef.h>

#include "reduce/reduce.h"

typedef void (*tt_combine_fn)(void *dst, void *dst2, const void *a, const void *b, size_t count,
                              const struct tt_redop *op);
typedef void (*tt_apply_fn)(void *dst, const void *src, size_t count, const struct tt_redop *op);

/* Every datatype the kernels serve, one line each: X(dtype, stem, T, name, is_float) gives the
 * enum value, the stem of its loops' names (stem_sum, stem_prod ...), the element type (the
 * code's type for the small float formats), the name tt_dtype_name returns, and whether it is a
 * floating type. reduce.c's datatype table and every level's kernel table (TT_REDUCE_TABLE)
 * expand this one list, so a datatype is added here once, plus its loops in each level. */
#define TT_REDUCE_DTYPES(X)                                                                     \
    X(ncclInt8, int8, int8_t, "int8", 0)                                                        \
    X(ncclUint8, uint8, uint8_t, "uint8", 0)                                                    \
    X(ncclInt32, int32, int32_t, "int32", 0)                                                    \
    X(ncclUint32, uint32, uint32_t, "uint32", 0)                                                \
    X(ncclInt64, int64, int64_t, "int64", 0)                                                    \
    X(ncclUint64, uint64, uint64_t, "uint64", 0)                                                \
    X(ncclFloat16, float16, uint16_t, "float16", 1)                                             \
    X(ncclFloat32, float32, float, "float32", 1)                                                \
    X(ncclFloat64, float64, double, "float64", 1)                                               \
    X(ncclBfloat16, bfloat16, uint16_t, "bfloat16", 1)                                          \
    X(ncclFloat8e4m3, e4m3, uint8_t, "float8e4m3", 1)                                           \
    X(ncclFloat8e5m2, e5m2, uint8_t, "float8e5m2", 1)

/* Every loop of one datatype: X(ARG, op, form), form `combine` (dst = a OP b) or `apply` (the
 * unary form, for the copy); ARG is passed through, so that a list of datatypes can expand
 * this one with its stem. */
#define TT_REDUCE_OPS(X, ARG)                                                                   \
    X(ARG, sum, combine)       /* a + b */                                                      \
    X(ARG, prod, combine)      /* a * b */                                                      \
    X(ARG, max, combine)       /* max(a, b) */                                                  \
    X(ARG, min, combine)       /* min(a, b) */                                                  \
    X(ARG, premulsum, combine) /* s * a + b */                                                  \
    X(ARG, sumdiv, combine)    /* (a + b) / d */                                                \
    X(ARG, premul, apply)      /* s * a */                                                      \
    X(ARG, div, apply)         /* a / d */

/* One datatype's loops, one field per op of TT_REDUCE_OPS. */
#define TT_REDUCE_FIELD(ARG, op, form) tt_##form##_fn op;
struct tt_reduce_kernels {
    TT_REDUCE_OPS(TT_REDUCE_FIELD, )
};

/* A level's table `table`, every datatype's entry filled with the loops named stem_op in the
 * file that expands it, which must define them all. A level that leaves a loop to the scalar
 * one defines its name as NULL before the table (reduce_avx2.c: int64_div). */
#define TT_REDUCE_LOOP(stem, op, form) .op = stem##_##op,
#define TT_REDUCE_ENTRY(dtype, stem, T, name, is_float)                                         \
    [dtype] = {TT_REDUCE_OPS(TT_REDUCE_LOOP, stem)},
#define TT_REDUCE_TABLE(table)                                                                  \
    const struct tt_reduce_kernels table[ncclNumTypes] = {TT_REDUCE_DTYPES(TT_REDUCE_ENTRY)}

extern const struct tt_reduce_kernels tt_reduce_scalar_kernels[ncclNumTypes];
#if defined(__x86_64__) && defined(__GNUC__)
#define TT_REDUCE_X86 1
extern const struct tt_reduce_kernels tt_reduce_avx2_kernels[ncclNumTypes];
extern const struct tt_reduce_kernels tt_reduce_avx512_kernels[ncclNumTypes];
/* dst = src with non-temporal stores from the first 64-byte line of dst on, then a store fence
 * (tt_copy_stream in reduce.h); bytes > 0. */
void tt_copy_stream_avx2(void *dst, const void *src, size_t bytes);
void tt_copy_stream_avx512(void *dst, const void *src, size_t bytes);
#endif

#endif
