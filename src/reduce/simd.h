/* The loop shapes shared by the SIMD kernel levels (reduce_avx2.c, reduce_avx512.c): each file
 * supplies, per datatype, a vector type, a load that brings W elements into the compute vector,
 * a store that rounds them back, and the expression of the operation; these macros wrap them into
 * the loops of kernels.h.
 *
 * The bulk runs one vector of W elements per step, reading all of a step's inputs before writing
 * its outputs, so that dst may alias an input exactly. The last count % W elements go through
 * buffers of one vector (at least 64 bytes), zero-filled, so no load or store ever reaches past
 * `count` (zeros are harmless inputs to every operation: no trap, no division by zero). The
 * second destination of a fused combine gets the very vector stored to the first one.
 *
 * The tail's moves are TT_SIMD_TAIL_IN and TT_SIMD_TAIL_OUT, which a level may define before
 * including this file: the default is memcpy, AVX-512's are masked byte loads and stores. A
 * small operation is all tail (an 8-byte AllReduce reduces two floats), and there two library
 * calls of variable size cost more than the arithmetic. */
#ifndef TT_REDUCE_SIMD_H
#define TT_REDUCE_SIMD_H

#include <string.h>

#include "reduce/kernels.h"

/* The tail buffers hold a whole vector and at least 64 bytes, so that a level may move 64 bytes
 * at a time into and out of them. */
#define TT_SIMD_TAIL_LEN(T, W) ((W) * sizeof(T) >= 64 ? (W) : 64 / sizeof(T))
#ifndef TT_SIMD_TAIL_IN
/* buf (TT_SIMD_TAIL_LEN elements) = the `bytes` bytes at src, then zeros. */
#define TT_SIMD_TAIL_IN(buf, src, bytes)                                                        \
    do {                                                                                        \
        memset((buf), 0, sizeof(buf));                                                          \
        memcpy((buf), (src), (bytes));                                                          \
    } while (0)
/* The first `bytes` bytes of buf to dst. */
#define TT_SIMD_TAIL_OUT(dst, buf, bytes) memcpy((dst), (buf), (bytes))
#endif

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
            T ta[TT_SIMD_TAIL_LEN(T, W)], tb[TT_SIMD_TAIL_LEN(T, W)], tr[TT_SIMD_TAIL_LEN(T, W)]; \
            const size_t rest = (count - i) * sizeof(T);                                        \
            TT_SIMD_TAIL_IN(ta, a + i, rest);                                                   \
            TT_SIMD_TAIL_IN(tb, b + i, rest);                                                   \
            const V x = LD(ta), y = LD(tb);                                                     \
            ST(tr, EXPR);                                                                       \
            TT_SIMD_TAIL_OUT(dst + i, tr, rest);                                                \
            if (dst2 != NULL)                                                                   \
                TT_SIMD_TAIL_OUT(dst2 + i, tr, rest);                                           \
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
            T ta[TT_SIMD_TAIL_LEN(T, W)], tr[TT_SIMD_TAIL_LEN(T, W)];                           \
            const size_t rest = (count - i) * sizeof(T);                                        \
            TT_SIMD_TAIL_IN(ta, a + i, rest);                                                   \
            const V x = LD(ta);                                                                 \
            ST(tr, EXPR);                                                                       \
            TT_SIMD_TAIL_OUT(dst + i, tr, rest);                                                \
        }                                                                                       \
    }

/* A value rounded to the element type and back (ST then LD through a register-sized buffer):
 * NCCL's pre-multiplication yields the element type, so PreMulSum (and Avg) round a rank's own
 * product before adding it, whichever kernel (fused or not) takes that rank's input.
 * TT_SIMD_SAME is the identity, for float32 and float64. */
#define TT_SIMD_SAME(v) (v)
#define TT_SIMD_ROUND_TRIP(ATTR, fn, T, W, V, LD, ST)                                           \
    ATTR static inline V fn(V v)                                                                \
    {                                                                                           \
        T t[W];                                                                                 \
        ST(t, v);                                                                               \
        return LD(t);                                                                           \
    }

#endif
