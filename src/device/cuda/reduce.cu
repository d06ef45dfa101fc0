/* The reduction kernels on the device: one kernel per datatype x operation, each applying the
 * element function of elementwise.h (checked bit for bit against the host kernels by
 * tests/gpu/unit_cuda_elementwise.c) with a grid-stride loop:
 *     dst[i] = f(a[i], b[i])   (b ignored by the unary premul and div)
 * dst may alias a or b exactly. Built by nvcc into a fatbin (sm_80, sm_90 and PTX for newer)
 * that the library embeds and loads through the driver (module.c): libtutti.so links no CUDA
 * runtime. Compiled with -fmad=false: a multiply-add must round twice, as on the host. */
#include "device/cuda/elementwise.h"

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
