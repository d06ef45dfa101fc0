/* The window collectives' kernel contract (device/cuda/window.c, "Symmetric windows"), shared by
 * reduce.cu, which builds the kernels, module.c, which launches them, and the stand-in driver
 * of the tests, which runs the same folds on the host.
 *
 * One kernel per datatype x reduction, tt_cuda_sym_<dtype>_<op>, takes a struct tt_sym_args by
 * value. For every element i in [lo, hi) it folds the members' inputs in rank order, exactly as
 * direct.c's chained binary reductions do (and so as the host kernels of reduce/ do):
 *     acc = first(src[0][i]);  acc = step(src[p][i], acc) for p = 1 .. n-1
 * where first is the identity, or the premultiplication for PREMULSUM, and step is the
 * operation, except that SUMDIV adds until its last step, which adds and divides. It then
 * writes acc to dst[q][i] for every output q < ndst: every member's output for AllReduce, the
 * one owner's for a ReduceScatter block, and every member's block for an AllGather, which folds
 * one input (n = 1: a copy). Each element is read and written by one thread, which reads every
 * input before it writes, so an output may equal an input exactly (in place). */
#ifndef TT_DEVICE_CUDA_SYM_H
#define TT_DEVICE_CUDA_SYM_H

#include "device/cuda/elementwise.h"

#define TT_SYM_MAX 64 /* members; device.h's TT_DEVICE_TEAM_MAX */

struct tt_sym_args {
    const void *src[TT_SYM_MAX]; /* every member's input, mapped in this process */
    void *dst[TT_SYM_MAX];       /* the outputs, dst[0 .. ndst - 1] */
    unsigned long long lo, hi;   /* the elements this member folds */
    double sf;                   /* PREMULSUM's scalar, floating dtypes */
    unsigned long long su, div;  /* PREMULSUM's scalar, integer dtypes; SUMDIV's divisor */
    int n;                       /* inputs folded */
    int ndst;                    /* outputs written */
    int vec;                     /* every pointer is 16-byte aligned: 16-byte loads and stores */
};

/* The identity, as an element function, for the reductions whose first step leaves x_0 alone. */
#define TT_SYM_ID(stem, T)                                                                         \
    TT_HD T tt_el_##stem##_id(T a, T b, double sf, uint64_t su, uint64_t div)                     \
    {                                                                                              \
        (void)b, (void)sf, (void)su, (void)div;                                                    \
        return a;                                                                                  \
    }
TT_EL_DTYPES(TT_SYM_ID)

/* X(stem, T, op, first, step, last): the six reductions of enum tt_device_red that a collective
 * uses, in its order, with the element functions of their first, middle and last steps. */
#define TT_SYM_REDS(X, stem, T)                                                                    \
    X(stem, T, sum, id, sum, sum)                                                                  \
    X(stem, T, prod, id, prod, prod)                                                               \
    X(stem, T, max, id, max, max)                                                                  \
    X(stem, T, min, id, min, min)                                                                  \
    X(stem, T, premulsum, premul, premulsum, premulsum)                                            \
    X(stem, T, sumdiv, id, sum, sumdiv)

/* tt_sym_first_<dtype>_<op>(x, ...) and tt_sym_step_<dtype>_<op>(x, acc, last, ...). */
#define TT_SYM_STEP_FNS(stem, T, op, first, step, last)                                            \
    TT_HD T tt_sym_first_##stem##_##op(T x, double sf, uint64_t su, uint64_t div)                 \
    {                                                                                              \
        return tt_el_##stem##_##first(x, x, sf, su, div);                                          \
    }                                                                                              \
    TT_HD T tt_sym_step_##stem##_##op(T x, T acc, int is_last, double sf, uint64_t su,            \
                                      uint64_t div)                                                \
    {                                                                                              \
        return is_last ? tt_el_##stem##_##last(x, acc, sf, su, div)                                \
                       : tt_el_##stem##_##step(x, acc, sf, su, div);                               \
    }
#define TT_SYM_DTYPE_FNS(stem, T) TT_SYM_REDS(TT_SYM_STEP_FNS, stem, T)
TT_EL_DTYPES(TT_SYM_DTYPE_FNS)

#endif
