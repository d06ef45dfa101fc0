/* The CUDA driver, opened with dlopen and looked up with cuGetProcAddress (driver.h).
 *
 * Why the driver API and not the runtime: libcudart is a toolkit library that a machine with a
 * GPU need not have, where libcuda.so.1 comes with every driver; its handles are the runtime's
 * (a cudaStream_t is a CUstream, a device pointer is a CUdeviceptr), so programs written against
 * the runtime work unchanged. Entry points are requested at the CUDA 12.0 ABI, the oldest
 * driver Tutti accepts, whose prototypes are those of cuda.h for every function in the table. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "device/cuda/driver.h"

#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

#define TT_CU_ABI 12000

struct tt_cu_table tt_cu;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool loaded;
static bool failed_for_good; /* opened but unusable: never try again */
static char why_not[256] = "the process has not used CUDA";
static int driver_version;

bool tt_cuda_loaded(void)
{
    return atomic_load_explicit(&loaded, memory_order_acquire);
}

const char *tt_cuda_why_not(void)
{
    return tt_cuda_loaded() ? "" : why_not;
}

int tt_cuda_driver_version(void)
{
    return tt_cuda_loaded() ? driver_version : 0;
}

typedef CUresult (*get_proc_fn)(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                CUdriverProcAddressQueryResult *status);

/* Looks every entry point up; false (with why_not set) when one is missing. */
static bool look_up_all(get_proc_fn get_proc)
{
#define TT_CU_LOOKUP(name)                                                                         \
    {                                                                                              \
        void *fn = NULL;                                                                           \
        CUdriverProcAddressQueryResult status;                                                     \
        if (get_proc(#name, &fn, TT_CU_ABI, CU_GET_PROC_ADDRESS_DEFAULT, &status) !=               \
                CUDA_SUCCESS ||                                                                    \
            fn == NULL) {                                                                          \
            snprintf(why_not, sizeof why_not, "the CUDA driver lacks %s", #name);                  \
            return false;                                                                          \
        }                                                                                          \
        memcpy(&tt_cu.name, &fn, sizeof fn);                                                       \
    }
    TT_CU_FUNCTIONS(TT_CU_LOOKUP)
#undef TT_CU_LOOKUP
    return true;
}

struct find_loaded {
    const char *base; /* the file name looked for */
    char path[512];   /* the loaded object's path, when found */
};

static int match_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct find_loaded *f = arg;
    const char *name = info->dlpi_name, *slash = name != NULL ? strrchr(name, '/') : NULL;
    const char *base = slash != NULL ? slash + 1 : name;
    if (base == NULL || strcmp(base, f->base) != 0) return 0;
    snprintf(f->path, sizeof f->path, "%s", name);
    return 1;
}

/* Opens the library and initialises the driver (load_lock held). Whether the process loaded
 * the driver is read from the list of loaded objects (dl_iterate_phdr): a dlopen with
 * RTLD_NOLOAD would search the library path on disk first, about 2.5 ms here, which made an
 * operation every 10 ms pay for it. */
static bool open_driver(bool force)
{
    const char *path = tt_param_cuda_library();
    if (path[0] == '\0') path = "libcuda.so.1";
    const char *slash = strrchr(path, '/');
    struct find_loaded f = {.base = slash != NULL ? slash + 1 : path, .path = ""};
    void *lib = NULL;
    if (dl_iterate_phdr(match_loaded, &f) != 0)
        lib = dlopen(f.path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (lib == NULL && !force) return false; /* the process does not use CUDA (yet) */
    if (lib == NULL) lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(why_not, sizeof why_not, "no CUDA driver: %s", dlerror());
        failed_for_good = true;
        return false;
    }
    void *sym = dlsym(lib, "cuGetProcAddress_v2");
    if (sym == NULL) {
        snprintf(why_not, sizeof why_not,
                 "the CUDA driver in %s is older than 12.0 (no cuGetProcAddress_v2)", path);
        failed_for_good = true;
        return false;
    }
    get_proc_fn get_proc;
    memcpy(&get_proc, &sym, sizeof sym);
    if (!look_up_all(get_proc)) {
        failed_for_good = true;
        return false;
    }
    CUresult res = tt_cu.cuInit(0);
    if (res != CUDA_SUCCESS) {
        const char *msg = NULL;
        if (tt_cu.cuGetErrorString(res, &msg) != CUDA_SUCCESS || msg == NULL) msg = "unknown";
        snprintf(why_not, sizeof why_not, "cuInit failed: %s (error %d): no usable GPU", msg,
                 (int)res);
        failed_for_good = true;
        return false;
    }
    if (tt_cu.cuDriverGetVersion(&driver_version) != CUDA_SUCCESS || driver_version < TT_CU_ABI) {
        snprintf(why_not, sizeof why_not, "the CUDA driver (version %d) is older than 12.0",
                 driver_version);
        failed_for_good = true;
        return false;
    }
    /* The library stays open for the life of the process: device memory and streams may be in
     * use anywhere. */
    return true;
}

bool tt_cuda_load(bool force)
{
    if (tt_cuda_loaded()) return true;
    if (tt_param_cuda() == 0) {
        snprintf(why_not, sizeof why_not, "disabled by TUTTI_CUDA=0");
        return false;
    }
    force = force || tt_param_cuda() == 1;
    pthread_mutex_lock(&load_lock);
    bool ok = tt_cuda_loaded();
    if (!ok && !failed_for_good) {
        ok = open_driver(force);
        if (ok) {
            atomic_store_explicit(&loaded, true, memory_order_release);
            TT_INFO(TT_SUB_INIT, "CUDA driver %d.%d loaded: device buffers and CUDA streams "
                                 "are accepted", driver_version / 1000,
                    (driver_version % 1000) / 10);
        } else if (failed_for_good) {
            if (tt_param_cuda() == 1)
                TT_WARN("CUDA unavailable, running host-only: %s", why_not);
            else
                TT_INFO(TT_SUB_INIT, "CUDA unavailable, running host-only: %s", why_not);
        }
    }
    pthread_mutex_unlock(&load_lock);
    return ok;
}

ncclResult_t tt_cuda_error_at(CUresult res, const char *call, const char *file, int line)
{
    if (res == CUDA_SUCCESS) return ncclSuccess;
    const char *msg = NULL, *name = NULL;
    if (tt_cu.cuGetErrorString == NULL || tt_cu.cuGetErrorString(res, &msg) != CUDA_SUCCESS)
        msg = "unknown error";
    if (tt_cu.cuGetErrorName == NULL || tt_cu.cuGetErrorName(res, &name) != CUDA_SUCCESS)
        name = "?";
    return tt_error_at(ncclUnhandledCudaError, file, line, "CUDA call failed: %s: %s (%s, %d)",
                       call, msg, name, (int)res);
}

ncclResult_t tt_cuda_ensure_context(const void *ptr, CUstream stream)
{
    CUcontext ctx = NULL;
    TT_TRY(TT_CU(tt_cu.cuCtxGetCurrent(&ctx)));
    if (ctx != NULL) return ncclSuccess;
    if (ptr != NULL &&
        tt_cu.cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)ptr) ==
            CUDA_SUCCESS &&
        ctx != NULL)
        return TT_CU(tt_cu.cuCtxSetCurrent(ctx));
    if ((uintptr_t)stream > 0x2 && tt_cu.cuStreamGetCtx(stream, &ctx) == CUDA_SUCCESS &&
        ctx != NULL)
        return TT_CU(tt_cu.cuCtxSetCurrent(ctx));
    CUdevice dev;
    TT_TRY(TT_CU(tt_cu.cuDeviceGet(&dev, 0)));
    TT_TRY(TT_CU(tt_cu.cuDevicePrimaryCtxRetain(&ctx, dev)));
    return TT_CU(tt_cu.cuCtxSetCurrent(ctx));
}
