/* The device reduction kernels (reduce.cu), embedded in libtutti.so as a fatbin and loaded
 * through the driver on first use: nvcc builds the fatbin at build time, the assembler's
 * .incbin places it in .rodata, and cuModuleLoadData picks the code for the GPU at hand (sm_80,
 * sm_90 machine code, PTX for newer ones). One module per CUDA context, as the driver wants. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "device/device.h"

#include "device/cuda/driver.h"
#include "device/cuda/sym.h"
#include "util/err.h"

#ifndef TT_CUDA_FATBIN_PATH
#error "TT_CUDA_FATBIN_PATH names the fatbin nvcc built from reduce.cu (cmake/cuda.cmake)"
#endif

__asm__(".section .rodata\n"
        ".balign 64\n"
        ".globl tt_cuda_reduce_fatbin\n"
        ".hidden tt_cuda_reduce_fatbin\n"
        "tt_cuda_reduce_fatbin:\n"
        ".incbin \"" TT_CUDA_FATBIN_PATH "\"\n"
        ".byte 0\n"
        ".previous\n");
extern const unsigned char tt_cuda_reduce_fatbin[];

/* The kernels' names, indexed [dtype][red]: tt_cuda_<dtype>_<op>. */
static const char *const dtype_stems[ncclNumTypes] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64",
    "float16", "float32", "float64", "bfloat16", "e4m3", "e5m2",
};
static const char *const red_names[TT_DEVICE_RED_COUNT] = {
    "sum", "prod", "max", "min", "premulsum", "sumdiv", "premul", "div",
};

#define MAX_CONTEXTS 16

/* Modules and functions per context; contexts are few (one per device in the usual case). */
static struct {
    CUcontext ctx;
    CUmodule module;
    CUfunction fn[ncclNumTypes][TT_DEVICE_RED_COUNT];
    CUfunction sym[ncclNumTypes][TT_DEVICE_RED_COUNT]; /* tt_cuda_sym_<dtype>_<op> (sym.h) */
} loaded[MAX_CONTEXTS];
static int nloaded;
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

/* Looks kernel [dtype][red] up in loaded[i] (load_lock held); the driver loads its code now.
 * Its name goes to `name` (64 bytes). */
static CUresult get_function(int i, int dtype, int red, bool sym, char *name)
{
    CUfunction *fn = sym ? &loaded[i].sym[dtype][red] : &loaded[i].fn[dtype][red];
    snprintf(name, 64, "tt_cuda_%s%s_%s", sym ? "sym_" : "", dtype_stems[dtype],
             red_names[red]);
    if (*fn != NULL) return CUDA_SUCCESS;
    return tt_cu.cuModuleGetFunction(fn, loaded[i].module, name);
}

/* The index in `loaded` of the current context's module, loading it and every kernel in it on
 * first use (load_lock held). Every kernel at once: under lazy loading (CUDA_MODULE_LOADING,
 * the default since CUDA 12.2) a kernel's code is loaded when its function is looked up, and
 * that may wait for the context's work to finish. Looked up between a stream's wait for a
 * peer's flag and the launch behind it, it would then wait for the peer inside the call: a
 * peer that never comes (a dead rank, the failure tests) would hold the host thread forever,
 * out of reach of the watchdog and of ncclCommAbort. */
static ncclResult_t module_for(CUcontext ctx, int *out)
{
    int i = 0;
    while (i < nloaded && loaded[i].ctx != ctx) i++;
    if (i < nloaded) {
        *out = i;
        return ncclSuccess;
    }
    if (nloaded == MAX_CONTEXTS)
        return TT_ERROR(ncclInternalError, "more than %d CUDA contexts in one process",
                        MAX_CONTEXTS);
    TT_TRY(TT_CU(tt_cu.cuModuleLoadData(&loaded[i].module, tt_cuda_reduce_fatbin)));
    loaded[i].ctx = ctx;
    nloaded++;
    char name[64];
    for (int t = 0; t < ncclNumTypes; t++)
        for (int red = 0; red < TT_DEVICE_RED_COUNT; red++) {
            /* A missing kernel fails later, where it is asked for, with its name. */
            (void)get_function(i, t, red, false, name);
            if (red <= TT_DEVICE_RED_SUMDIV) (void)get_function(i, t, red, true, name);
        }
    *out = i;
    return ncclSuccess;
}

ncclResult_t tt_device_kernels_load(void)
{
    CUcontext ctx = NULL;
    TT_TRY(TT_CU(tt_cu.cuCtxGetCurrent(&ctx)));
    pthread_mutex_lock(&load_lock);
    int i;
    ncclResult_t res = module_for(ctx, &i);
    pthread_mutex_unlock(&load_lock);
    return res;
}

static ncclResult_t kernel_for(ncclDataType_t dtype, enum tt_device_red red, bool sym,
                               CUfunction *out)
{
    CUcontext ctx = NULL;
    TT_TRY(TT_CU(tt_cu.cuCtxGetCurrent(&ctx)));
    pthread_mutex_lock(&load_lock);
    int i;
    ncclResult_t res = module_for(ctx, &i);
    char name[64], call[96];
    if (res == ncclSuccess) {
        CUresult r = get_function(i, dtype, red, sym, name);
        snprintf(call, sizeof call, "cuModuleGetFunction(%s)", name);
        res = tt_cuda_error_at(r, call, __FILE__, __LINE__);
    }
    if (res == ncclSuccess) *out = sym ? loaded[i].sym[dtype][red] : loaded[i].fn[dtype][red];
    pthread_mutex_unlock(&load_lock);
    return res;
}

ncclResult_t tt_device_reduce(cudaStream_t stream, ncclDataType_t dtype, enum tt_device_red red,
                              double scalar_f, uint64_t scalar_u, uint64_t divisor, void *dst,
                              const void *a, const void *b, size_t count)
{
    if (count == 0) return ncclSuccess;
    if (!tt_device_active())
        return TT_ERROR(ncclInvalidUsage, "device reduction without CUDA: %s",
                        tt_cuda_why_not());
    TT_TRY(tt_cuda_ensure_context(dst, (CUstream)stream));
    CUfunction fn;
    TT_TRY(kernel_for(dtype, red, false, &fn));
    unsigned long long n = count, su = scalar_u, div = divisor;
    void *args[] = {&dst, &a, &b, &n, &scalar_f, &su, &div};
    /* Enough blocks to fill an H100 several times over; the loop strides over the rest. */
    const unsigned threads = 512;
    size_t blocks = (count + threads - 1) / threads;
    if (blocks > 4096) blocks = 4096;
    return TT_CU(tt_cu.cuLaunchKernel(fn, (unsigned)blocks, 1, 1, threads, 1, 1, 0,
                                      (CUstream)stream, args, NULL));
}

ncclResult_t tt_device_sym_reduce(cudaStream_t stream, ncclDataType_t dtype,
                                  enum tt_device_red red, size_t elt,
                                  const struct tt_sym_args *args)
{
    if (args->hi <= args->lo) return ncclSuccess;
    if (red > TT_DEVICE_RED_SUMDIV)
        return TT_ERROR(ncclInternalError, "window AllReduce: reduction %d has no fold",
                        (int)red);
    CUfunction fn;
    TT_TRY(kernel_for(dtype, red, true, &fn));
    void *params[] = {(void *)args};
    /* Threads move 16 bytes each with `vec`; the grid strides over the rest. */
    const unsigned threads = 512;
    size_t per = args->vec ? 16 / elt : 1;
    size_t items = (size_t)(args->hi - args->lo + per - 1) / per;
    size_t blocks = (items + threads - 1) / threads;
    if (blocks > 2048) blocks = 2048;
    return TT_CU(tt_cu.cuLaunchKernel(fn, (unsigned)blocks, 1, 1, threads, 1, 1, 0,
                                      (CUstream)stream, params, NULL));
}
