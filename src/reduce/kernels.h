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

/* One datatype's loops: the combine forms dst = a OP b, and the unary forms for the copy. */
struct tt_reduce_kernels {
    tt_combine_fn sum, prod, max, min;
    tt_combine_fn premulsum; /* s * a + b */
    tt_combine_fn sumdiv;    /* (a + b) / d */
    tt_apply_fn premul;      /* s * a */
    tt_apply_fn div;         /* a / d */
};

/* A table entry whose loops are named NAME_sum, NAME_prod, ... */
#define TT_REDUCE_KERNELS_OF(NAME)                                                              \
    {                                                                                           \
        .sum = NAME##_sum, .prod = NAME##_prod, .max = NAME##_max, .min = NAME##_min,           \
        .premulsum = NAME##_premulsum, .sumdiv = NAME##_sumdiv, .premul = NAME##_premul,        \
        .div = NAME##_div,                                                                      \
    }

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
