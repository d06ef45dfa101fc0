/* The CUDA driver, loaded at run time (device/cuda/driver.c). libtutti.so links no CUDA library:
 * the driver (libcuda.so.1) is opened with dlopen when the process turns out to use CUDA, and
 * every entry point Tutti calls is looked up once with cuGetProcAddress into `tt_cu`. A machine
 * without a GPU or a driver never gets here and runs host-only.
 *
 * Thread-safety: tt_cuda_load is idempotent and thread-safe; after it succeeded the table is
 * read-only. */
#ifndef TT_DEVICE_CUDA_DRIVER_H
#define TT_DEVICE_CUDA_DRIVER_H

#include <cuda.h>
#include <stdbool.h>

#include "device/device.h"
#include "nccl.h"

/* X(name): every driver entry point Tutti calls, as cuda.h names it. */
#define TT_CU_FUNCTIONS(X)                                                                         \
    X(cuInit)                                                                                      \
    X(cuDriverGetVersion)                                                                          \
    X(cuGetErrorString)                                                                            \
    X(cuGetErrorName)                                                                              \
    X(cuDeviceGet)                                                                                 \
    X(cuDeviceGetCount)                                                                            \
    X(cuDeviceGetAttribute)                                                                        \
    X(cuDevicePrimaryCtxRetain)                                                                    \
    X(cuCtxGetCurrent)                                                                             \
    X(cuCtxSetCurrent)                                                                             \
    X(cuCtxGetDevice)                                                                              \
    X(cuStreamGetCtx)                                                                              \
    X(cuStreamQuery)                                                                               \
    X(cuPointerGetAttribute)                                                                       \
    X(cuPointerGetAttributes)                                                                      \
    X(cuMemHostGetDevicePointer)                                                                   \
    X(cuMemGetAddressRange)                                                                        \
    X(cuMemHostAlloc)                                                                              \
    X(cuMemFreeHost)                                                                               \
    X(cuMemcpy)                                                                                    \
    X(cuMemcpyAsync)                                                                               \
    X(cuMemcpyDtoHAsync)                                                                           \
    X(cuMemcpyHtoDAsync)                                                                           \
    X(cuStreamWriteValue32)                                                                        \
    X(cuStreamWaitValue32)                                                                         \
    X(cuLaunchHostFunc)                                                                            \
    X(cuIpcGetMemHandle)                                                                           \
    X(cuIpcOpenMemHandle)                                                                          \
    X(cuIpcCloseMemHandle)                                                                         \
    X(cuModuleLoadData)                                                                            \
    X(cuModuleGetFunction)                                                                         \
    X(cuLaunchKernel)                                                                              \
    X(cuMemAlloc)                                                                                  \
    X(cuMemFree)                                                                                   \
    X(cuMemsetD32)                                                                                 \
    X(cuStreamCreate)                                                                              \
    X(cuStreamDestroy)                                                                             \
    X(cuStreamSynchronize)                                                                         \
    X(cuDevicePrimaryCtxRelease)

/* cuda.h maps each name to its versioned symbol (cuMemcpyDtoHAsync_v2, ...), so __typeof__
 * gives the prototype of the version looked up. */
#define TT_CU_FIELD(name) __typeof__(name) *name;
struct tt_cu_table {
    TT_CU_FUNCTIONS(TT_CU_FIELD)
};
#undef TT_CU_FIELD

extern struct tt_cu_table tt_cu;

/* Opens and initialises the driver once: `force` loads it even when the process has not
 * (TUTTI_CUDA=1 or an explicit device request), otherwise only when it is already loaded.
 * Returns whether it is usable. Failures are logged once at INFO (at WARN when forced) and
 * remembered in tt_cuda_why_not. */
bool tt_cuda_load(bool force);
/* Whether tt_cuda_load succeeded (one acquire load). */
bool tt_cuda_loaded(void);
/* Why the driver is not in use ("" once it is). */
const char *tt_cuda_why_not(void);
/* The driver's version (e.g. 12040), 0 before it loaded. */
int tt_cuda_driver_version(void);

/* Makes `res` an ncclUnhandledCudaError naming the call and CUDA's message; ncclSuccess for
 * CUDA_SUCCESS. */
ncclResult_t tt_cuda_error_at(CUresult res, const char *call, const char *file, int line);
#define TT_CU(call) tt_cuda_error_at((call), #call, __FILE__, __LINE__)

/* Makes a context current on the calling thread if none is: the one of `ptr` (a device pointer,
 * may be NULL), else that of `stream` (a stream object, not NULL or a special handle), else
 * device 0's primary context, as the runtime would. */
ncclResult_t tt_cuda_ensure_context(const void *ptr, CUstream stream);

/* Loads the reduction kernels (module.c) into the current context, every one of them, unless
 * done already: before anything is queued that waits for a peer (direct.c). */
ncclResult_t tt_device_kernels_load(void);

/* Queues the window AllReduce's fold of `args` (sym.h) on `stream`: the kernel
 * tt_cuda_sym_<dtype>_<op> (module.c). `red` is one of SUM .. SUMDIV; `elt` the dtype's size. */
struct tt_sym_args;
ncclResult_t tt_device_sym_reduce(cudaStream_t stream, ncclDataType_t dtype,
                                  enum tt_device_red red, size_t elt,
                                  const struct tt_sym_args *args);

#endif
