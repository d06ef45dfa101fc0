/* The reduction kernels on the device: one kernel per datatype x operation, each applying the
 * element function of elementwise.h (checked bit for bit against the host kernels by
 * tests/gpu/unit_cuda_elementwise.c) with a grid-stride loop:
 *     dst[i] = f(a[i], b[i])   (b ignored by the unary premul and div)
 * dst may alias a or b exactly. Built by nvcc into a fatbin (sm_80, sm_90 and PTX for newer)
 * that the library embeds and loads through the driver (module.c): libtutti.so links no CUDA
 * runtime. Compiled with -fmad=false: a multiply-add must round twice, as on the host. */
#include "device/cuda/elementwise.h"
#include "device/cuda/sym.h"

#define TT_CU_KERNEL(stem, T, op)                                                                  \
    extern "C" __global__ void tt_cuda_##stem##_##op(T *dst, const T *a, const T *b,              \
                                                     unsigned long long count, double sf,         \
                                                     unsigned long long su,                        \
                                                     unsigned long long div)                       \
    {                                                                                              \
        const size_t stride = (size_t)gridDim.x * blockDim.x;                                      \
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)   \
            dst[i] = tt_el_##stem##_##op(a[i], b != NULL ? b[i] : a[i], sf, su, div);            \
    }

#define TT_CU_KERNELS(stem, T)                                                                     \
    TT_CU_KERNEL(stem, T, sum)                                                                     \
    TT_CU_KERNEL(stem, T, prod)                                                                    \
    TT_CU_KERNEL(stem, T, max)                                                                     \
    TT_CU_KERNEL(stem, T, min)                                                                     \
    TT_CU_KERNEL(stem, T, premulsum)                                                               \
    TT_CU_KERNEL(stem, T, sumdiv)                                                                  \
    TT_CU_KERNEL(stem, T, premul)                                                                  \
    TT_CU_KERNEL(stem, T, div)

TT_EL_DTYPES(TT_CU_KERNELS)

/* The window collectives' kernels (sym.h states the contract): elements of every input, folded
 * in rank order, written to every output. With `vec`, each
 * thread moves TT_SYM_UNROLL vectors of 16 bytes per member at a time, every load of a member
 * issued before the first fold, with evict-first loads and stores (the data is used once): on an
 * H200 that took the 2-rank fold of 256 MiB from 88% to 94% of the memory's bound
 * (bench/gpu_fold.cu, docs/cuda.md; 4 vectors did no better and made the kernels 1.2 MB larger).
 * Vectors left over, the tail, and unaligned buffers go one vector or one element per thread. */
#define TT_SYM_UNROLL 2
#define TT_CU_SYM_KERNEL(stem, T, op, first, step, last)                                           \
    extern "C" __global__ void tt_cuda_sym_##stem##_##op(const struct tt_sym_args a)              \
    {                                                                                              \
        enum { V = 16 / sizeof(T), U = TT_SYM_UNROLL };                                            \
        union vec {                                                                                \
            uint4 u;                                                                               \
            T e[V];                                                                                \
        };                                                                                         \
        const size_t stride = (size_t)gridDim.x * blockDim.x;                                      \
        const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;                          \
        const size_t body = a.vec ? (a.hi - a.lo) / V * V : 0;                                     \
        size_t v = tid * V;                                                                        \
        for (; v + (U - 1) * stride * V < body; v += U * stride * V) {                            \
            union vec acc[U], x[U];                                                                \
            _Pragma("unroll") for (int u = 0; u < U; u++) acc[u].u =                               \
                __ldcs((const uint4 *)((const T *)a.src[0] + a.lo + v + u * stride * V));         \
            _Pragma("unroll") for (int u = 0; u < U; u++)                                          \
                _Pragma("unroll") for (int k = 0; k < V; k++) acc[u].e[k] =                        \
                    tt_sym_first_##stem##_##op(acc[u].e[k], a.sf, a.su, a.div);                    \
            for (int p = 1; p < a.n; p++) {                                                        \
                const int is_last = p == a.n - 1;                                                  \
                _Pragma("unroll") for (int u = 0; u < U; u++) x[u].u =                             \
                    __ldcs((const uint4 *)((const T *)a.src[p] + a.lo + v + u * stride * V));     \
                _Pragma("unroll") for (int u = 0; u < U; u++)                                      \
                    _Pragma("unroll") for (int k = 0; k < V; k++) acc[u].e[k] =                    \
                        tt_sym_step_##stem##_##op(x[u].e[k], acc[u].e[k], is_last, a.sf, a.su,    \
                                                  a.div);                                          \
            }                                                                                      \
            for (int p = 0; p < a.ndst; p++)                                                       \
                _Pragma("unroll") for (int u = 0; u < U; u++)                                      \
                    __stcs((uint4 *)((T *)a.dst[p] + a.lo + v + u * stride * V), acc[u].u);       \
        }                                                                                          \
        for (; v < body; v += stride * V) {                                                        \
            const size_t i = a.lo + v;                                                             \
            union vec acc, x;                                                                      \
            acc.u = *(const uint4 *)((const T *)a.src[0] + i);                                     \
            _Pragma("unroll") for (int k = 0; k < V; k++) acc.e[k] =                               \
                tt_sym_first_##stem##_##op(acc.e[k], a.sf, a.su, a.div);                           \
            for (int p = 1; p < a.n; p++) {                                                        \
                x.u = *(const uint4 *)((const T *)a.src[p] + i);                                   \
                const int is_last = p == a.n - 1;                                                  \
                _Pragma("unroll") for (int k = 0; k < V; k++) acc.e[k] =                           \
                    tt_sym_step_##stem##_##op(x.e[k], acc.e[k], is_last, a.sf, a.su, a.div);       \
            }                                                                                      \
            for (int p = 0; p < a.ndst; p++) *(uint4 *)((T *)a.dst[p] + i) = acc.u;                \
        }                                                                                          \
        for (size_t i = a.lo + body + tid; i < a.hi; i += stride) {                                \
            T acc = tt_sym_first_##stem##_##op(((const T *)a.src[0])[i], a.sf, a.su, a.div);      \
            for (int p = 1; p < a.n; p++)                                                          \
                acc = tt_sym_step_##stem##_##op(((const T *)a.src[p])[i], acc, p == a.n - 1,       \
                                                a.sf, a.su, a.div);                                \
            for (int p = 0; p < a.ndst; p++) ((T *)a.dst[p])[i] = acc;                             \
        }                                                                                          \
    }
#define TT_CU_SYM_KERNELS(stem, T) TT_SYM_REDS(TT_CU_SYM_KERNEL, stem, T)
TT_EL_DTYPES(TT_CU_SYM_KERNELS)
