/* A stand-in for the CUDA driver (libcuda.so.1) on a machine without a GPU, for tests only: it
 * lets the device-direct path (src/device/cuda/direct.c) and its init exchange run end to end
 * on the CPU, across real processes, before any GPU was ever lent. It is NOT CUDA: it models
 * the few semantics Tutti relies on, on host memory, and nothing else.
 *
 *   - "device memory" (cuMemAlloc) is a shared memory file (memfd) mapped into the process;
 *     cuPointerGetAttributes calls it device memory, anything else host memory;
 *   - an IPC handle names the owner's pid and the file's descriptor; cuIpcOpenMemHandle maps
 *     /proc/<pid>/fd/<fd> (same user), so peers share the bytes as on one GPU;
 *   - a stream is a worker thread running its queued commands in order: copies, 32-bit writes
 *     (release) and waits (acquire, wrapping >=) on words of that memory, host functions, and
 *     "kernels", which are the host builds of the device reduction kernels' element functions
 *     (device/cuda/elementwise.h, the very functions reduce.cu compiles for the GPU);
 *   - one device, one context, the legacy stream for NULL;
 *   - the calls that wait for the whole context's work on a GPU wait here for every stream of
 *     the process to run out (context_drain): cuMemFree and cuMemFreeHost, cuModuleLoadData,
 *     and the first cuModuleGetFunction of each kernel, which loads its code under CUDA's lazy
 *     loading (the default since CUDA 12.2). So a call made while a stream waits for a peer
 *     that never comes hangs here as it does on a GPU (docs/cuda.md).
 * Every entry point Tutti looks up (device/cuda/driver.h) exists, with CUDA's prototype
 * (checked at compile time against cuda.h); most of the unused ones are trivial. */
#include <stdbool.h>
#include <cuda.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device/cuda/elementwise.h"
#include "device/cuda/sym.h"

#define EXPORT __attribute__((visibility("default")))

/* --- memory ------------------------------------------------------------------------------- */

struct region {
    uintptr_t base;
    size_t bytes;
    int fd;          /* the owner's memfd (-1 for mappings opened from a handle) */
    bool device;     /* device memory (else pinned host memory from cuMemHostAlloc) */
};
#define MAX_REGIONS 4096
static struct region regions[MAX_REGIONS];
static int nregions;
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;

static void region_add(uintptr_t base, size_t bytes, int fd, bool device)
{
    pthread_mutex_lock(&mem_lock);
    if (nregions < MAX_REGIONS) regions[nregions++] = (struct region){base, bytes, fd, device};
    pthread_mutex_unlock(&mem_lock);
}

static bool region_find(uintptr_t p, struct region *out)
{
    bool found = false;
    pthread_mutex_lock(&mem_lock);
    for (int i = 0; i < nregions && !found; i++)
        if (p >= regions[i].base && p < regions[i].base + regions[i].bytes) {
            *out = regions[i];
            found = true;
        }
    pthread_mutex_unlock(&mem_lock);
    return found;
}

static bool region_remove(uintptr_t base, struct region *out)
{
    bool found = false;
    pthread_mutex_lock(&mem_lock);
    for (int i = 0; i < nregions; i++)
        if (regions[i].base == base) {
            *out = regions[i];
            regions[i] = regions[--nregions];
            found = true;
            break;
        }
    pthread_mutex_unlock(&mem_lock);
    return found;
}

/* --- streams ------------------------------------------------------------------------------ */

enum cmd_kind { CMD_COPY, CMD_WRITE, CMD_WAIT, CMD_HOST, CMD_KERNEL, CMD_SYM };
typedef void (*kernel_fn)(void *dst, const void *a, const void *b, unsigned long long n,
                          double sf, unsigned long long su, unsigned long long div);
typedef void (*sym_fn)(const struct tt_sym_args *a);
struct cmd {
    enum cmd_kind kind;
    void *dst;
    const void *src;
    size_t bytes;
    uint32_t value;
    void (*host)(void *);
    void *arg;
    kernel_fn kernel;
    const void *b;
    unsigned long long n, su, div;
    double sf;
    sym_fn sym;
    struct tt_sym_args *sym_args; /* a copy, freed with the command */
    struct cmd *next;
};
struct fstream {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct cmd *head, *tail;
    bool busy, stop;
    pthread_t thread;
    int drains; /* context_drain calls draining it now (under streams_lock) */
};

static void run_cmd(struct cmd *c)
{
    switch (c->kind) {
    case CMD_COPY: memmove(c->dst, c->src, c->bytes); break;
    case CMD_WRITE:
        atomic_thread_fence(memory_order_seq_cst);
        __atomic_store_n((uint32_t *)c->dst, c->value, __ATOMIC_RELEASE);
        break;
    case CMD_WAIT:
        while ((int32_t)(__atomic_load_n((const uint32_t *)c->src, __ATOMIC_ACQUIRE) -
                         c->value) < 0)
            usleep(20);
        break;
    case CMD_HOST: c->host(c->arg); break;
    case CMD_KERNEL: c->kernel(c->dst, c->src, c->b, c->n, c->sf, c->su, c->div); break;
    case CMD_SYM: c->sym(c->sym_args); break;
    }
}

static void *stream_main(void *arg)
{
    struct fstream *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (s->head == NULL && !s->stop) pthread_cond_wait(&s->cond, &s->lock);
        if (s->head == NULL) break;
        struct cmd *c = s->head;
        s->head = c->next;
        if (s->head == NULL) s->tail = NULL;
        s->busy = true;
        pthread_mutex_unlock(&s->lock);
        run_cmd(c);
        free(c->sym_args);
        free(c);
        pthread_mutex_lock(&s->lock);
        s->busy = false;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Every stream of the process, for context_drain. */
#define MAX_STREAMS 256
static struct fstream *all_streams[MAX_STREAMS];
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t streams_cond = PTHREAD_COND_INITIALIZER; /* a drain ended */

static struct fstream *stream_new(void)
{
    struct fstream *s = calloc(1, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    pthread_create(&s->thread, NULL, stream_main, s);
    pthread_mutex_lock(&streams_lock);
    int i = 0;
    while (i < MAX_STREAMS && all_streams[i] != NULL) i++;
    if (i == MAX_STREAMS) {
        fprintf(stderr, "fake_cuda: more than %d streams\n", MAX_STREAMS);
        abort();
    }
    all_streams[i] = s;
    pthread_mutex_unlock(&streams_lock);
    return s;
}

/* Takes `s` out of the registry, once no context_drain uses it any more. */
static void stream_forget(struct fstream *s)
{
    pthread_mutex_lock(&streams_lock);
    for (int i = 0; i < MAX_STREAMS; i++)
        if (all_streams[i] == s) all_streams[i] = NULL;
    while (s->drains > 0) pthread_cond_wait(&streams_cond, &streams_lock);
    pthread_mutex_unlock(&streams_lock);
}

static void stream_drain(struct fstream *s);

/* Waits until every stream of the process ran out of work, as a GPU's context-wide waits do.
 * The streams are pinned (drains) rather than the registry held, so that making and
 * destroying other streams goes on meanwhile, as on a GPU. */
static void context_drain(void)
{
    struct fstream *list[MAX_STREAMS];
    int n = 0;
    pthread_mutex_lock(&streams_lock);
    for (int i = 0; i < MAX_STREAMS; i++)
        if (all_streams[i] != NULL) {
            all_streams[i]->drains++;
            list[n++] = all_streams[i];
        }
    pthread_mutex_unlock(&streams_lock);
    for (int i = 0; i < n; i++) stream_drain(list[i]);
    pthread_mutex_lock(&streams_lock);
    for (int i = 0; i < n; i++) list[i]->drains--;
    pthread_cond_broadcast(&streams_cond);
    pthread_mutex_unlock(&streams_lock);
}

static struct fstream *legacy;
static pthread_once_t legacy_once = PTHREAD_ONCE_INIT;
static void legacy_make(void)
{
    legacy = stream_new();
}

static struct fstream *stream_of(CUstream h)
{
    if ((uintptr_t)h <= 0x2) {
        pthread_once(&legacy_once, legacy_make);
        return legacy;
    }
    return (struct fstream *)h;
}

static CUresult enqueue(CUstream h, struct cmd c)
{
    struct fstream *s = stream_of(h);
    struct cmd *p = malloc(sizeof *p);
    if (p == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    *p = c;
    p->next = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->tail != NULL) s->tail->next = p;
    else s->head = p;
    s->tail = p;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return CUDA_SUCCESS;
}

static void stream_drain(struct fstream *s)
{
    pthread_mutex_lock(&s->lock);
    while (s->head != NULL || s->busy) pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

/* --- kernels: the host builds of reduce.cu's element functions ----------------------------- */

#define FK(stem, T, op)                                                                            \
    static void fk_##stem##_##op(void *d, const void *a, const void *b, unsigned long long n,     \
                                 double sf, unsigned long long su, unsigned long long div)         \
    {                                                                                              \
        T *dst = d;                                                                                \
        const T *x = a, *y = b;                                                                    \
        for (unsigned long long i = 0; i < n; i++)                                                 \
            dst[i] = tt_el_##stem##_##op(x[i], y != NULL ? y[i] : x[i], sf, su, div);            \
    }
#define FKS(stem, T)                                                                               \
    FK(stem, T, sum) FK(stem, T, prod) FK(stem, T, max) FK(stem, T, min) FK(stem, T, premulsum)   \
    FK(stem, T, sumdiv) FK(stem, T, premul) FK(stem, T, div)
TT_EL_DTYPES(FKS)

/* The window collectives' folds (sym.h), one element at a time. */
#define FKSYM(stem, T, op, first, step, last)                                                      \
    static void fksym_##stem##_##op(const struct tt_sym_args *a)                                  \
    {                                                                                              \
        for (unsigned long long i = a->lo; i < a->hi; i++) {                                       \
            T acc = tt_sym_first_##stem##_##op(((const T *)a->src[0])[i], a->sf, a->su, a->div);  \
            for (int p = 1; p < a->n; p++)                                                         \
                acc = tt_sym_step_##stem##_##op(((const T *)a->src[p])[i], acc, p == a->n - 1,     \
                                                a->sf, a->su, a->div);                             \
            for (int p = 0; p < a->ndst; p++) ((T *)a->dst[p])[i] = acc;                           \
        }                                                                                          \
    }
#define FKSYMS(stem, T) TT_SYM_REDS(FKSYM, stem, T)
TT_EL_DTYPES(FKSYMS)

struct kernel_entry {
    const char *name;
    kernel_fn fn;
    sym_fn sym;
};
#define KE(stem, T, op) {"tt_cuda_" #stem "_" #op, fk_##stem##_##op, NULL},
#define KESYM(stem, T, op, first, step, last) {"tt_cuda_sym_" #stem "_" #op, NULL, fksym_##stem##_##op},
#define KESYMS(stem, T) TT_SYM_REDS(KESYM, stem, T)
#define KES(stem, T)                                                                               \
    KE(stem, T, sum) KE(stem, T, prod) KE(stem, T, max) KE(stem, T, min) KE(stem, T, premulsum)   \
    KE(stem, T, sumdiv) KE(stem, T, premul) KE(stem, T, div)
static const struct kernel_entry kernels[] = {TT_EL_DTYPES(KES) TT_EL_DTYPES(KESYMS)};

/* --- the entry points ---------------------------------------------------------------------- */

static int the_ctx_storage;
#define THE_CTX ((CUcontext)(void *)&the_ctx_storage)
static __thread CUcontext current;

static CUresult f_cuInit(unsigned int flags) { (void)flags; return CUDA_SUCCESS; }
static CUresult f_cuDriverGetVersion(int *v) { *v = 12040; return CUDA_SUCCESS; }
static CUresult f_cuGetErrorString(CUresult e, const char **s)
{
    *s = e == CUDA_SUCCESS ? "no error" : "fake CUDA driver error";
    return CUDA_SUCCESS;
}
static CUresult f_cuGetErrorName(CUresult e, const char **s)
{
    *s = e == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
    return CUDA_SUCCESS;
}
static CUresult f_cuDeviceGet(CUdevice *d, int ordinal)
{
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}
static CUresult f_cuDeviceGetCount(int *n) { *n = 1; return CUDA_SUCCESS; }
static CUresult f_cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    (void)a; (void)d;
    *v = 0;
    return CUDA_SUCCESS;
}
static CUresult f_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    (void)d;
    *c = THE_CTX;
    return CUDA_SUCCESS;
}
static CUresult f_cuDevicePrimaryCtxRelease(CUdevice d) { (void)d; return CUDA_SUCCESS; }
static CUresult f_cuCtxGetCurrent(CUcontext *c) { *c = current; return CUDA_SUCCESS; }
static CUresult f_cuCtxSetCurrent(CUcontext c) { current = c; return CUDA_SUCCESS; }
static CUresult f_cuCtxGetDevice(CUdevice *d)
{
    if (current == NULL) return CUDA_ERROR_INVALID_CONTEXT;
    *d = 0;
    return CUDA_SUCCESS;
}
static CUresult f_cuStreamGetCtx(CUstream s, CUcontext *c) { (void)s; *c = THE_CTX; return CUDA_SUCCESS; }
static CUresult f_cuStreamQuery(CUstream h)
{
    struct fstream *s = stream_of(h);
    pthread_mutex_lock(&s->lock);
    bool idle = s->head == NULL && !s->busy;
    pthread_mutex_unlock(&s->lock);
    return idle ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
static CUresult f_cuPointerGetAttribute(void *data, CUpointer_attribute a, CUdeviceptr p)
{
    struct region r;
    if (!region_find((uintptr_t)p, &r)) return CUDA_ERROR_INVALID_VALUE;
    if (a == CU_POINTER_ATTRIBUTE_CONTEXT) *(CUcontext *)data = THE_CTX;
    else if (a == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
        *(unsigned int *)data = r.device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    else return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}
static CUresult f_cuPointerGetAttributes(unsigned int n, CUpointer_attribute *a, void **data,
                                         CUdeviceptr p)
{
    struct region r = {0, 0, -1, false};
    bool known = region_find((uintptr_t)p, &r);
    for (unsigned i = 0; i < n; i++) {
        if (a[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
            *(unsigned int *)data[i] = !known ? 0u
                                       : r.device ? (unsigned)CU_MEMORYTYPE_DEVICE
                                                  : (unsigned)CU_MEMORYTYPE_HOST;
        else if (a[i] == CU_POINTER_ATTRIBUTE_IS_MANAGED)
            *(unsigned int *)data[i] = 0;
        else if (a[i] == CU_POINTER_ATTRIBUTE_CONTEXT)
            *(CUcontext *)data[i] = known ? THE_CTX : NULL;
    }
    return CUDA_SUCCESS;
}
static CUresult f_cuMemHostGetDevicePointer(CUdeviceptr *d, void *p, unsigned int flags)
{
    (void)flags;
    *d = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}
static CUresult f_cuMemGetAddressRange(CUdeviceptr *base, size_t *bytes, CUdeviceptr p)
{
    struct region r;
    if (!region_find((uintptr_t)p, &r)) return CUDA_ERROR_INVALID_VALUE;
    if (base != NULL) *base = (CUdeviceptr)r.base;
    if (bytes != NULL) *bytes = r.bytes;
    return CUDA_SUCCESS;
}
static CUresult f_cuMemHostAlloc(void **p, size_t bytes, unsigned int flags)
{
    (void)flags;
    if (posix_memalign(p, 4096, bytes) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    region_add((uintptr_t)*p, bytes, -1, false);
    return CUDA_SUCCESS;
}
static CUresult f_cuMemFreeHost(void *p)
{
    context_drain();
    struct region r;
    if (region_remove((uintptr_t)p, &r)) free(p);
    return CUDA_SUCCESS;
}
static CUresult f_cuMemAlloc(CUdeviceptr *d, size_t bytes)
{
    int fd = memfd_create("tutti-fake-cuda", MFD_CLOEXEC);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    if (ftruncate(fd, (off_t)bytes) != 0) {
        close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    region_add((uintptr_t)p, bytes, fd, true);
    *d = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}
static CUresult f_cuMemFree(CUdeviceptr d)
{
    context_drain();
    struct region r;
    if (!region_remove((uintptr_t)d, &r)) return CUDA_ERROR_INVALID_VALUE;
    munmap((void *)r.base, r.bytes);
    if (r.fd >= 0) close(r.fd);
    return CUDA_SUCCESS;
}
static CUresult f_cuMemsetD32(CUdeviceptr d, unsigned int v, size_t n)
{
    uint32_t *p = (uint32_t *)(uintptr_t)d;
    for (size_t i = 0; i < n; i++) p[i] = v;
    return CUDA_SUCCESS;
}
static CUresult f_cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t bytes)
{
    stream_drain(stream_of(NULL));
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
    return CUDA_SUCCESS;
}
static CUresult f_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s)
{
    return enqueue(s, (struct cmd){.kind = CMD_COPY, .dst = (void *)(uintptr_t)dst,
                                   .src = (const void *)(uintptr_t)src, .bytes = bytes});
}
static CUresult f_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes, CUstream s)
{
    return f_cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, src, bytes, s);
}
static CUresult f_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes, CUstream s)
{
    return f_cuMemcpyAsync(dst, (CUdeviceptr)(uintptr_t)src, bytes, s);
}
static CUresult f_cuStreamWriteValue32(CUstream s, CUdeviceptr addr, cuuint32_t v,
                                       unsigned int flags)
{
    (void)flags;
    return enqueue(s, (struct cmd){.kind = CMD_WRITE, .dst = (void *)(uintptr_t)addr, .value = v});
}
static CUresult f_cuStreamWaitValue32(CUstream s, CUdeviceptr addr, cuuint32_t v,
                                      unsigned int flags)
{
    if (flags != CU_STREAM_WAIT_VALUE_GEQ) return CUDA_ERROR_NOT_SUPPORTED;
    return enqueue(s, (struct cmd){.kind = CMD_WAIT, .src = (const void *)(uintptr_t)addr,
                                   .value = v});
}
static CUresult f_cuLaunchHostFunc(CUstream s, CUhostFn fn, void *arg)
{
    return enqueue(s, (struct cmd){.kind = CMD_HOST, .host = fn, .arg = arg});
}

struct fake_handle {
    uint64_t magic;
    int32_t pid, fd;
    uint64_t bytes;
};
#define HANDLE_MAGIC 0x7474666b63756461ull
_Static_assert(sizeof(struct fake_handle) <= sizeof(CUipcMemHandle), "handle size");

static CUresult f_cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr d)
{
    struct region r;
    if (!region_find((uintptr_t)d, &r) || r.fd < 0 || r.base != (uintptr_t)d)
        return CUDA_ERROR_INVALID_VALUE;
    struct fake_handle f = {HANDLE_MAGIC, (int32_t)getpid(), r.fd, r.bytes};
    memset(h, 0, sizeof *h);
    memcpy(h, &f, sizeof f);
    return CUDA_SUCCESS;
}
static CUresult f_cuIpcOpenMemHandle(CUdeviceptr *d, CUipcMemHandle h, unsigned int flags)
{
    (void)flags;
    struct fake_handle f;
    memcpy(&f, &h, sizeof f);
    if (f.magic != HANDLE_MAGIC) return CUDA_ERROR_INVALID_VALUE;
    if (f.pid == (int32_t)getpid()) return CUDA_ERROR_INVALID_CONTEXT; /* as CUDA: not here */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)f.pid, (int)f.fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return CUDA_ERROR_INVALID_HANDLE;
    void *p = mmap(NULL, f.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    region_add((uintptr_t)p, f.bytes, -1, true);
    *d = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}
static CUresult f_cuIpcCloseMemHandle(CUdeviceptr d)
{
    struct region r;
    if (!region_remove((uintptr_t)d, &r)) return CUDA_ERROR_INVALID_VALUE;
    munmap((void *)r.base, r.bytes);
    return CUDA_SUCCESS;
}
static int the_module_storage;
static CUresult f_cuModuleLoadData(CUmodule *m, const void *image)
{
    (void)image;
    context_drain();
    *m = (CUmodule)(void *)&the_module_storage;
    return CUDA_SUCCESS;
}
static CUresult f_cuModuleGetFunction(CUfunction *fn, CUmodule m, const char *name)
{
    (void)m;
    static _Atomic bool loaded[sizeof kernels / sizeof kernels[0]];
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (strcmp(kernels[i].name, name) == 0) {
            if (!atomic_exchange(&loaded[i], true)) context_drain(); /* lazy loading */
            *fn = (CUfunction)(void *)&kernels[i];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_NOT_FOUND;
}
static CUresult f_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned shmem, CUstream s,
                                 void **params, void **extra)
{
    (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shmem; (void)extra;
    const struct kernel_entry *k = (const struct kernel_entry *)(void *)f;
    if (k->sym != NULL) {
        struct tt_sym_args *copy = malloc(sizeof *copy);
        if (copy == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
        memcpy(copy, params[0], sizeof *copy);
        CUresult r = enqueue(s, (struct cmd){.kind = CMD_SYM, .sym = k->sym, .sym_args = copy});
        if (r != CUDA_SUCCESS) free(copy);
        return r;
    }
    return enqueue(s, (struct cmd){.kind = CMD_KERNEL, .kernel = k->fn,
                                   .dst = *(void **)params[0],
                                   .src = *(const void **)params[1],
                                   .b = *(const void **)params[2],
                                   .n = *(unsigned long long *)params[3],
                                   .sf = *(double *)params[4],
                                   .su = *(unsigned long long *)params[5],
                                   .div = *(unsigned long long *)params[6]});
}
static CUresult f_cuStreamCreate(CUstream *s, unsigned int flags)
{
    (void)flags;
    *s = (CUstream)(void *)stream_new();
    return CUDA_SUCCESS;
}
static CUresult f_cuStreamDestroy(CUstream h)
{
    if ((uintptr_t)h <= 0x2) return CUDA_ERROR_INVALID_HANDLE;
    struct fstream *s = (struct fstream *)h;
    stream_drain(s);
    stream_forget(s);
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    free(s);
    return CUDA_SUCCESS;
}
static CUresult f_cuStreamSynchronize(CUstream h)
{
    stream_drain(stream_of(h));
    return CUDA_SUCCESS;
}

/* Each entry checked against cuda.h's prototype of the version Tutti looks up. */
#define ENTRIES(X)                                                                                 \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorString) X(cuGetErrorName) X(cuDeviceGet)          \
    X(cuDeviceGetCount) X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain)                        \
    X(cuDevicePrimaryCtxRelease) X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxGetDevice)           \
    X(cuStreamGetCtx) X(cuStreamQuery) X(cuPointerGetAttribute) X(cuPointerGetAttributes)          \
    X(cuMemHostGetDevicePointer) X(cuMemGetAddressRange) X(cuMemHostAlloc) X(cuMemFreeHost)        \
    X(cuMemcpy) X(cuMemcpyAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyHtoDAsync)                         \
    X(cuStreamWriteValue32) X(cuStreamWaitValue32) X(cuLaunchHostFunc) X(cuIpcGetMemHandle)        \
    X(cuIpcOpenMemHandle) X(cuIpcCloseMemHandle) X(cuModuleLoadData) X(cuModuleGetFunction)        \
    X(cuLaunchKernel) X(cuMemAlloc) X(cuMemFree) X(cuMemsetD32) X(cuStreamCreate)                  \
    X(cuStreamDestroy) X(cuStreamSynchronize)
#define CHECK_PROTO(name) static __typeof__(name) *const check_##name = f_##name;
ENTRIES(CHECK_PROTO)
struct entry {
    const char *name;
    void (*fn)(void);
};
#define ENTRY(name) {#name, (void (*)(void))check_##name},
static const struct entry entries[] = {ENTRIES(ENTRY)};

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *status);
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    (void)version; (void)flags;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        if (strcmp(entries[i].name, symbol) == 0) {
            _Static_assert(sizeof entries[i].fn == sizeof *pfn, "function pointer size");
            memcpy(pfn, &entries[i].fn, sizeof *pfn);
            if (status != NULL) *status = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    *pfn = NULL;
    if (status != NULL) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}

/* For the test program: what a CUDA program would do through the runtime. */
EXPORT int fake_cuda_make_current(void);
EXPORT void *fake_cuda_malloc(size_t bytes);
EXPORT void fake_cuda_free(void *p);
EXPORT void *fake_cuda_stream_create(void);
EXPORT void fake_cuda_stream_sync(void *s);
EXPORT int fake_cuda_is_device(const void *p);
EXPORT int fake_cuda_make_current(void)
{
    current = THE_CTX;
    return 0;
}
EXPORT void *fake_cuda_malloc(size_t bytes)
{
    CUdeviceptr d = 0;
    return f_cuMemAlloc(&d, bytes) == CUDA_SUCCESS ? (void *)(uintptr_t)d : NULL;
}
EXPORT void fake_cuda_free(void *p)
{
    (void)f_cuMemFree((CUdeviceptr)(uintptr_t)p);
}
EXPORT int fake_cuda_is_device(const void *p)
{
    struct region r = {0, 0, -1, false};
    return region_find((uintptr_t)p, &r) && r.device;
}
EXPORT void *fake_cuda_stream_create(void)
{
    return stream_new();
}
EXPORT void fake_cuda_stream_sync(void *s)
{
    stream_drain(stream_of((CUstream)s));
}
