/* The CUDA memory and stream kinds (device/device.h): device pointers recognised with
 * cuPointerGetAttributes, copies with cuMemcpy, and host work ordered inside CUDA streams.
 *
 * An operation on device buffers runs on pinned host copies of them ("staging"): on the user's
 * stream Tutti queues the copies in, a write of the batch's sequence number to a `start` word in
 * pinned memory, a wait until the engine wrote the same number to a `done` word, the copies out,
 * and a host function that returns the pinned buffers to a pool. The engine starts the batch once
 * `start` reached it and writes `done` when it ended, so the operation is ordered on the stream
 * like any kernel (a later cudaStreamSynchronize sees the result, work queued behind it waits),
 * the calling thread never blocks, and the host transports (shared memory, TCP) move the bytes.
 * Nothing here runs while no device pointer or CUDA stream appeared: the driver is only taken
 * once the process loaded it itself (device/cuda/driver.c). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "device/device.h"

#include "device/cuda/driver.h"
#include "util/err.h"
#include "util/log.h"

/* While the driver is not in use, the process is looked at again (has it loaded the driver
 * since?) once per RECHECK_CALLS operations and at most every RECHECK_NS: it may start using
 * CUDA after its communicators were made. Between checks an operation pays one relaxed load
 * and store (about 1 ns); a check costs a walk of the loaded objects (microseconds). */
#define RECHECK_CALLS 256u
#define RECHECK_NS 10000000ull

static _Atomic uint64_t next_recheck_ns;
static _Atomic unsigned calls_since_check;

static uint64_t coarse_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool tt_device_active(void)
{
    if (tt_cuda_loaded()) return true;
    /* Not a read-modify-write: a lost count between threads only delays a check a little. */
    unsigned calls = atomic_load_explicit(&calls_since_check, memory_order_relaxed) + 1;
    atomic_store_explicit(&calls_since_check, calls, memory_order_relaxed);
    if (calls % RECHECK_CALLS != 0) return false;
    uint64_t now = coarse_now_ns();
    if (now < atomic_load_explicit(&next_recheck_ns, memory_order_relaxed)) return false;
    atomic_store_explicit(&next_recheck_ns, now + RECHECK_NS, memory_order_relaxed);
    return tt_cuda_load(false);
}

void tt_device_probe(bool load)
{
    (void)tt_cuda_load(load);
}

const char *tt_device_describe(char *buf, size_t bytes)
{
    if (tt_cuda_loaded()) {
        int v = tt_cuda_driver_version(), count = 0;
        (void)tt_cu.cuDeviceGetCount(&count);
        snprintf(buf, bytes, "CUDA (driver %d.%d, %d device%s)", v / 1000, (v % 1000) / 10,
                 count, count == 1 ? "" : "s");
    } else {
        snprintf(buf, bytes, "CUDA build, host-only now: %s", tt_cuda_why_not());
    }
    return buf;
}

int tt_device_current(void)
{
    if (!tt_device_active()) return -1;
    CUcontext ctx = NULL;
    CUdevice dev;
    if (tt_cu.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == NULL) return -1;
    if (tt_cu.cuCtxGetDevice(&dev) != CUDA_SUCCESS) return -1;
    return (int)dev;
}

/* ncclMemAlloc's device allocations, so that ncclMemFree knows them (and frees each once). */
struct mem_block {
    void *ptr;
    size_t bytes;
    struct mem_block *next;
};
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mem_block *mem_blocks;

ncclResult_t tt_device_mem_alloc(void **ptr, size_t bytes)
{
    *ptr = NULL;
    /* A process that made a context has its driver loaded: take it now, not in 10 ms. */
    if (!tt_cuda_loaded()) tt_device_probe(false);
    if (tt_device_current() < 0) return ncclSuccess;
    struct mem_block *m = calloc(1, sizeof *m);
    if (m == NULL) return TT_ERROR(ncclSystemError, "ncclMemAlloc: out of memory");
    CUdeviceptr d = 0;
    ncclResult_t res = TT_CU(tt_cu.cuMemAlloc(&d, bytes));
    if (res != ncclSuccess) {
        free(m);
        return res;
    }
    m->ptr = (void *)(uintptr_t)d;
    m->bytes = bytes;
    pthread_mutex_lock(&mem_lock);
    m->next = mem_blocks;
    mem_blocks = m;
    pthread_mutex_unlock(&mem_lock);
    TT_INFO(TT_SUB_ALLOC, "ncclMemAlloc: %zu bytes of device memory at %p", bytes, m->ptr);
    *ptr = m->ptr;
    return ncclSuccess;
}

bool tt_device_mem_free(void *ptr, ncclResult_t *res)
{
    struct mem_block *m = NULL;
    pthread_mutex_lock(&mem_lock);
    for (struct mem_block **p = &mem_blocks; *p != NULL; p = &(*p)->next) {
        if ((*p)->ptr == ptr) {
            m = *p;
            *p = m->next;
            break;
        }
    }
    pthread_mutex_unlock(&mem_lock);
    if (m == NULL) return false;
    TT_INFO(TT_SUB_ALLOC, "ncclMemFree: %zu bytes of device memory at %p", m->bytes, ptr);
    *res = TT_CU(tt_cu.cuMemFree((CUdeviceptr)(uintptr_t)ptr));
    free(m);
    return true;
}

enum tt_mem_kind tt_device_mem_kind(const void *ptr)
{
    if (ptr == NULL || !tt_device_active()) return TT_MEM_HOST;
    /* Host memory, pinned or not, is read by the host in place; managed memory too (the host
     * may touch it while no kernel does, which stream order guarantees here). */
    unsigned int type = 0, managed = 0;
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_IS_MANAGED};
    void *values[2] = {&type, &managed};
    if (tt_cu.cuPointerGetAttributes(2, attrs, values, (CUdeviceptr)(uintptr_t)ptr) !=
        CUDA_SUCCESS)
        return TT_MEM_HOST;
    return type == CU_MEMORYTYPE_DEVICE && !managed ? TT_MEM_DEVICE : TT_MEM_HOST;
}

bool tt_device_host_pinned(const void *ptr)
{
    if (ptr == NULL || !tt_device_active()) return false;
    unsigned int type = 0;
    /* Unknown memory (plain malloc) makes the query fail; anything the driver knows succeeds. */
    return tt_cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                       (CUdeviceptr)(uintptr_t)ptr) == CUDA_SUCCESS &&
           type != CU_MEMORYTYPE_DEVICE;
}

/* The executor copies device memory only through staging today; this serves any caller that
 * holds a device pointer (synchronous, on the legacy stream's order). */
static void cuda_copy(void *dst, const void *src, size_t bytes)
{
    CUresult res = tt_cu.cuMemcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src,
                                  bytes);
    if (res != CUDA_SUCCESS) (void)TT_CU(res);
}

const struct tt_mem_ops tt_device_cuda_mem = {.name = "cuda", .copy = cuda_copy};

/* --- Streams ------------------------------------------------------------------------------- */

static bool cuda_owns(cudaStream_t stream)
{
    if (!tt_device_active()) return false;
    /* cudaStreamLegacy and cudaStreamPerThread are handles, not objects. */
    if ((uintptr_t)stream == 0x1 || (uintptr_t)stream == 0x2) return true;
    CUresult res = tt_cu.cuStreamQuery((CUstream)stream);
    return res == CUDA_SUCCESS || res == CUDA_ERROR_NOT_READY;
}

static const struct tt_device_stream_kind cuda_stream = {.name = "CUDA", .owns = cuda_owns};

const struct tt_device_stream_kind *tt_device_stream_kind(cudaStream_t stream)
{
    /* A handle Tutti does not know is the first sign that the process uses CUDA. */
    if (!tt_cuda_loaded()) tt_device_probe(false);
    return cuda_owns(stream) ? &cuda_stream : NULL;
}

/* --- Pinned staging buffers ---------------------------------------------------------------- */

/* A pinned host buffer; free ones wait in the pool, by size class (powers of two). */
struct pinned {
    void *ptr;
    size_t bytes;
    struct pinned *next;
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pinned *pool;
static size_t pool_bytes; /* pinned bytes waiting in the pool */

/* Free pinned buffers beyond this are given back to CUDA by the next allocation that misses
 * (the host functions that return buffers may not call CUDA): a benchmark that walks sizes up
 * to 256 MiB would otherwise keep every size's buffers pinned. */
#define POOL_KEEP_BYTES (2ull << 30)

struct tt_device_stage {
    struct pinned *buf;
    const void *in_dev; /* copied into buf at in_off before the operation (NULL: none) */
    size_t in_off, in_bytes;
    void *out_dev;      /* copied from buf at out_off after it (NULL: none) */
    size_t out_off, out_bytes;
    struct tt_device_stage *next;
};

static size_t size_class(size_t bytes)
{
    size_t c = 4096;
    while (c < bytes) c <<= 1;
    return c;
}

static ncclResult_t pinned_get(size_t bytes, const void *dev, struct pinned **out)
{
    size_t want = size_class(bytes);
    struct pinned *trim = NULL;
    pthread_mutex_lock(&pool_lock);
    for (struct pinned **it = &pool; *it != NULL; it = &(*it)->next) {
        if ((*it)->bytes == want) {
            *out = *it;
            *it = (*it)->next;
            pool_bytes -= want;
            pthread_mutex_unlock(&pool_lock);
            return ncclSuccess;
        }
    }
    while (pool != NULL && pool_bytes > POOL_KEEP_BYTES) {
        struct pinned *p = pool;
        pool = p->next;
        pool_bytes -= p->bytes;
        p->next = trim;
        trim = p;
    }
    pthread_mutex_unlock(&pool_lock);
    while (trim != NULL) {
        struct pinned *next = trim->next;
        (void)tt_cu.cuMemFreeHost(trim->ptr);
        free(trim);
        trim = next;
    }
    struct pinned *p = calloc(1, sizeof *p);
    if (p == NULL) return TT_ERROR(ncclSystemError, "out of memory staging a device buffer");
    ncclResult_t res = tt_cuda_ensure_context(dev, NULL);
    if (res == ncclSuccess)
        res = TT_CU(tt_cu.cuMemHostAlloc(&p->ptr, want, CU_MEMHOSTALLOC_PORTABLE));
    if (res != ncclSuccess) {
        free(p);
        return res;
    }
    p->bytes = want;
    *out = p;
    return ncclSuccess;
}

/* Returns the stages' buffers to the pool. Runs on CUDA's callback thread after the copies
 * out, so it may not call CUDA: it only moves list entries. */
static void release_stages(void *arg)
{
    struct tt_device_stage *s = arg;
    while (s != NULL) {
        struct tt_device_stage *next = s->next;
        if (s->buf != NULL) {
            pthread_mutex_lock(&pool_lock);
            s->buf->next = pool;
            pool = s->buf;
            pool_bytes += s->buf->bytes;
            pthread_mutex_unlock(&pool_lock);
        }
        free(s);
        s = next;
    }
}

void tt_device_stage_free(struct tt_device_stage *stages)
{
    release_stages(stages);
}

void tt_device_stage_join(struct tt_device_stage **into, struct tt_device_stage *more)
{
    if (more == NULL) return;
    struct tt_device_stage *last = more;
    while (last->next != NULL) last = last->next;
    last->next = *into;
    *into = more;
}

static ncclResult_t add_stage(struct tt_device_stage **stages, size_t bytes, const void *dev,
                              struct tt_device_stage **out)
{
    struct tt_device_stage *s = calloc(1, sizeof *s);
    if (s == NULL) return TT_ERROR(ncclSystemError, "out of memory staging a device buffer");
    ncclResult_t res = pinned_get(bytes, dev, &s->buf);
    if (res != ncclSuccess) {
        free(s);
        return res;
    }
    s->next = *stages;
    *stages = s;
    *out = s;
    return ncclSuccess;
}

ncclResult_t tt_device_stage_buffers(struct tt_device_stage **stages, const void **send,
                                     size_t send_bytes, void **recv, size_t recv_bytes)
{
    bool send_dev = send_bytes > 0 && tt_device_mem_kind(*send) == TT_MEM_DEVICE;
    bool recv_dev = recv_bytes > 0 && tt_device_mem_kind(*recv) == TT_MEM_DEVICE;
    uintptr_t s0 = (uintptr_t)*send, r0 = (uintptr_t)*recv;
    struct tt_device_stage *st;
    if (send_dev && recv_dev && s0 < r0 + recv_bytes && r0 < s0 + send_bytes) {
        /* In place (or overlapping): one host buffer over both, at the same offsets, so the
         * algorithms see the same aliasing as on the device. */
        uintptr_t lo = s0 < r0 ? s0 : r0;
        uintptr_t hi = s0 + send_bytes > r0 + recv_bytes ? s0 + send_bytes : r0 + recv_bytes;
        TT_TRY(add_stage(stages, hi - lo, *send, &st));
        st->in_dev = *send;
        st->in_off = s0 - lo;
        st->in_bytes = send_bytes;
        st->out_dev = *recv;
        st->out_off = r0 - lo;
        st->out_bytes = recv_bytes;
        *send = (char *)st->buf->ptr + st->in_off;
        *recv = (char *)st->buf->ptr + st->out_off;
        return ncclSuccess;
    }
    if (send_dev) {
        TT_TRY(add_stage(stages, send_bytes, *send, &st));
        st->in_dev = *send;
        st->in_bytes = send_bytes;
        *send = st->buf->ptr;
    }
    if (recv_dev) {
        TT_TRY(add_stage(stages, recv_bytes, *recv, &st));
        st->out_dev = *recv;
        st->out_bytes = recv_bytes;
        *recv = st->buf->ptr;
    }
    return ncclSuccess;
}

/* --- Ordering host work in a stream -------------------------------------------------------- */

/* The words' block: [0] start, [1] done, then the device address of [0] (64-bit, at word 2). */
ncclResult_t tt_device_words_create(uint32_t **words)
{
    if (!tt_device_active())
        return TT_ERROR(ncclInvalidUsage, "a CUDA stream was given but CUDA is not in use: %s",
                        tt_cuda_why_not());
    TT_TRY(tt_cuda_ensure_context(NULL, NULL));
    void *p = NULL;
    TT_TRY(TT_CU(tt_cu.cuMemHostAlloc(&p, 64, CU_MEMHOSTALLOC_PORTABLE |
                                                  CU_MEMHOSTALLOC_DEVICEMAP)));
    memset(p, 0, 64);
    CUdeviceptr dev = 0;
    ncclResult_t res = TT_CU(tt_cu.cuMemHostGetDevicePointer(&dev, p, 0));
    if (res != ncclSuccess) {
        (void)tt_cu.cuMemFreeHost(p);
        return res;
    }
    uint64_t dev64 = (uint64_t)dev;
    memcpy((uint32_t *)p + 2, &dev64, sizeof dev64);
    *words = p;
    return ncclSuccess;
}

ncclResult_t tt_device_stream_order(cudaStream_t stream, uint32_t *words, uint32_t seq,
                                    struct tt_device_stage *stages, bool *waits)
{
    CUstream s = (CUstream)stream;
    uint64_t dev64;
    memcpy(&dev64, words + 2, sizeof dev64);
    CUdeviceptr start = (CUdeviceptr)dev64, done = start + sizeof(uint32_t);
    const void *first = NULL;
    if (stages != NULL) first = stages->in_dev != NULL ? stages->in_dev : stages->out_dev;
    *waits = false;
    int queued = 0;
    ncclResult_t res = tt_cuda_ensure_context(first, s);
    for (struct tt_device_stage *st = stages; st != NULL && res == ncclSuccess; st = st->next) {
        if (st->in_dev == NULL) continue;
        res = TT_CU(tt_cu.cuMemcpyDtoHAsync((char *)st->buf->ptr + st->in_off,
                                            (CUdeviceptr)(uintptr_t)st->in_dev, st->in_bytes,
                                            s));
        queued += res == ncclSuccess;
    }
    if (res == ncclSuccess)
        res = TT_CU(tt_cu.cuStreamWriteValue32(s, start, seq, CU_STREAM_WRITE_VALUE_DEFAULT));
    if (res == ncclSuccess) {
        res = TT_CU(tt_cu.cuStreamWaitValue32(s, done, seq, CU_STREAM_WAIT_VALUE_GEQ));
        *waits = res == ncclSuccess;
    }
    if (res != ncclSuccess) {
        /* A copy already queued may still write into the stages: they are leaked then rather
         * than reused under it (an error path that CUDA itself reports as unrecoverable). */
        if (queued == 0) release_stages(stages);
        return res;
    }
    /* From here the stream waits for `done`: the caller lets the engine reach seq whatever
     * happens below, in order. */
    for (struct tt_device_stage *st = stages; st != NULL && res == ncclSuccess; st = st->next)
        if (st->out_dev != NULL)
            res = TT_CU(tt_cu.cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)st->out_dev,
                                                (char *)st->buf->ptr + st->out_off,
                                                st->out_bytes, s));
    if (stages != NULL && res == ncclSuccess)
        res = TT_CU(tt_cu.cuLaunchHostFunc(s, release_stages, stages));
    return res;
}

/* --- Peer memory (CUDA IPC) ---------------------------------------------------------------- */

_Static_assert(sizeof(CUipcMemHandle) == TT_DEVICE_IPC_HANDLE_BYTES, "CUDA's IPC handle size");

ncclResult_t tt_device_ipc_export(const void *ptr, struct tt_device_ipc_handle *out)
{
    if (!tt_device_active() || tt_device_mem_kind(ptr) != TT_MEM_DEVICE)
        return TT_ERROR(ncclInvalidArgument, "%p is not device memory: it cannot be exported",
                        ptr);
    TT_TRY(tt_cuda_ensure_context(ptr, NULL));
    CUdeviceptr base = 0;
    size_t bytes = 0;
    TT_TRY(TT_CU(tt_cu.cuMemGetAddressRange(&base, &bytes, (CUdeviceptr)(uintptr_t)ptr)));
    CUipcMemHandle h;
    TT_TRY(TT_CU(tt_cu.cuIpcGetMemHandle(&h, base)));
    memcpy(out->bytes, &h, sizeof h);
    out->offset = (uint64_t)((CUdeviceptr)(uintptr_t)ptr - base);
    return ncclSuccess;
}

ncclResult_t tt_device_ipc_open(const struct tt_device_ipc_handle *h, void **ptr)
{
    if (!tt_device_active())
        return TT_ERROR(ncclInvalidUsage, "device peer memory without CUDA: %s",
                        tt_cuda_why_not());
    TT_TRY(tt_cuda_ensure_context(NULL, NULL));
    CUipcMemHandle handle;
    memcpy(&handle, h->bytes, sizeof handle);
    CUdeviceptr base = 0;
    TT_TRY(TT_CU(tt_cu.cuIpcOpenMemHandle(&base, handle,
                                          CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)));
    *ptr = (void *)(uintptr_t)(base + h->offset);
    return ncclSuccess;
}

ncclResult_t tt_device_ipc_close(void *ptr, const struct tt_device_ipc_handle *h)
{
    CUdeviceptr base = (CUdeviceptr)(uintptr_t)ptr - h->offset;
    return TT_CU(tt_cu.cuIpcCloseMemHandle(base));
}
