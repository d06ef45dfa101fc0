/* The loop shapes shared by the SIMD kernel levels (reduce_avx2.c, reduce_avx512.c): each file
 * supplies, per datatype, a vector type, a load that brings W elements into the compute vector,
 * a store that rounds them back, and the expression of the operation; these macros wrap them into
 * the loops of kernels.h.
 *
 * The bulk runs one vector of W elements per step, reading all of a step's inputs before writing
 * its outputs, so that dst may alias an input exactly. The last count % W elements go through
 * buffers of one vector, zero-filled, so no load or store ever reaches past `count` (zeros are
 * harmless inputs to every operation: no trap, no division by zero). The second destination of
 * a fused combine gets the very vector stored to the first one. */
#ifndef TT_REDUCE_SIMD_H
#define TT_REDUCE_SIMD_H

#include <string.h>

#include "reduce/kernels.h"

/* ATTR: the target attribute; fn: the loop's name; T: element type; W: elements per step;
 * V: vector type; LD(p) / ST(p, v): load and store of W elements; PREP: declarations of the
 * op's operands (vectors `s`, `d`), made once before the loop; EXPR: the result `r` computed from
 * vectors `x` (from a) and `y` (from b). */
#define TT_SIMD_COMBINE(ATTR, fn, T, W, V, LD, ST, PREP, EXPR)                                  \
    ATTR static void fn(void *dst_v, void *dst2_v, const void *a_v, const void *b_v,            \
                        size_t count, const struct tt_redop *op)                                \
    {                                                                                           \
        T *dst = dst_v, *dst2 = dst2_v;                                                         \
        const T *a = a_v, *b = b_v;                                                             \
        PREP                                                                                    \
        size_t i = 0;                                                                           \
        if (dst2 == NULL) {                                                                     \
            for (; count - i >= (W); i += (W)) {                                                \
                const V x = LD(a + i), y = LD(b + i);                                           \
                ST(dst + i, EXPR);                                                              \
            }                                                                                   \
        } else {                                                                                \
            for (; count - i >= (W); i += (W)) {                                                \
                const V x = LD(a + i), y = LD(b + i);                                           \
                const V r = EXPR;                                                               \
                ST(dst + i, r);                                                                 \
                ST(dst2 + i, r);                                                                \
            }                                                                                   \
        }                                                                                       \
        if (i < count) {                                                                        \
            T ta[W] = {0}, tb[W] = {0}, tr[W];                                                  \
            const size_t rest = (count - i) * sizeof(T);                                        \
            memcpy(ta, a + i, rest);                                                            \
            memcpy(tb, b + i, rest);                                                            \
            const V x = LD(ta), y = LD(tb);                                                     \
            ST(tr, EXPR);                                                                       \
            memcpy(dst + i, tr, rest);                                                          \
            if (dst2 != NULL)                                                                   \
                memcpy(dst2 + i, tr, rest);                                                     \
        }                                                                                       \
    }

/* The unary form: EXPR computes the result from `x` alone. */
#define TT_SIMD_APPLY(ATTR, fn, T, W, V, LD, ST, PREP, EXPR)                                    \
    ATTR static void fn(void *dst_v, const void *a_v, size_t count, const struct tt_redop *op)  \
    {                                                                                           \
        T *dst = dst_v;                                                                         \
        const T *a = a_v;                                                                       \
        PREP                                                                                    \
        size_t i = 0;                                                                           \
        for (; count - i >= (W); i += (W)) {                                                    \
            const V x = LD(a + i);                                                              \
            ST(dst + i, EXPR);                                                                  \
        }                                                                                       \
        if (i < count) {                                                                        \
            T ta[W] = {0}, tr[W];                                                               \
            const size_t rest = (count - i) * sizeof(T);                                        \
            memcpy(ta, a + i, rest);                                                            \
            const V x = LD(ta);                                                                 \
            ST(tr, EXPR);                                                                       \
            memcpy(dst + i, tr, rest);                                                          \
        }                                                                                       \
    }

#endif
