/* bench/gpu_fold.cu: what a window AllReduce of two ranks on one GPU can reach, in one process.
 *
 * The window AllReduce of two ranks that share a GPU reads both inputs and writes both outputs:
 * 4N bytes of memory traffic per N-byte AllReduce, where a device-to-device copy of N bytes moves
 * 2N. So a fold kernel at the copy's efficiency gives a busbw (= algbw at 2 ranks) of exactly half
 * the copy bandwidth, and the acceptance's 50% asks the fold to move its bytes as efficiently as
 * cudaMemcpy does. This program times, on one stream with CUDA events, in one run:
 *   - cudaMemcpyAsync device to device (the limit tutti-perf -G reports), and a plain copy kernel;
 *   - fold kernels over two float inputs into two outputs (sum), with the shape of
 *     src/device/cuda/reduce.cu's tt_cuda_sym_* (16-byte accesses, grid stride, the member count
 *     at run time) and variants: several 16-byte vectors in flight per thread, evict-first
 *     (streaming) loads and stores, and grid sizes in multiples of the SM count.
 *   - on sm_90 and newer, the same fold through the tensor memory accelerator's bulk copies
 *     (cp.async.bulk into shared memory, and out again or by plain stores).
 * Each fold's result is checked against the inputs' exact sum. Prints one row per variant: time
 * per call, N / time, and that as a percentage of half the memcpy bandwidth (100% = the bound).
 * Exits 1 when a result is wrong, 77 without a GPU. Built by the cuda preset (build/cuda/gpu_fold)
 * and packed by tools/gpu-pack.sh:
 *
 *   gpu_fold [MiB [iters]]          default 256 MiB per buffer, 20 calls per row
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

struct args {
    const float *src[2];
    float *dst[2];
    size_t nvec; /* 16-byte vectors */
    int n;
};

__device__ __forceinline__ float4 add4(float4 a, float4 b)
{
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

/* As reduce.cu today: one vector per thread per step, members looped at run time. */
__global__ void fold_base(const struct args a)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x; v < a.nvec; v += stride) {
        float4 acc = ((const float4 *)a.src[0])[v];
        for (int p = 1; p < a.n; p++) acc = add4(((const float4 *)a.src[p])[v], acc);
        for (int p = 0; p < a.n; p++) ((float4 *)a.dst[p])[v] = acc;
    }
}

/* U vectors per thread per step, every load issued before the first add; CS: evict-first. */
template <int U, bool CS>
__global__ void fold_unroll(const struct args a)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; v + (U - 1) * stride < a.nvec; v += U * stride) {
        float4 x[U], y[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const float4 *p0 = (const float4 *)a.src[0] + v + u * stride;
            const float4 *p1 = (const float4 *)a.src[1] + v + u * stride;
            x[u] = CS ? __ldcs(p0) : *p0;
            y[u] = CS ? __ldcs(p1) : *p1;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            float4 s = add4(y[u], x[u]);
            float4 *d0 = (float4 *)a.dst[0] + v + u * stride;
            float4 *d1 = (float4 *)a.dst[1] + v + u * stride;
            if (CS) {
                __stcs(d0, s);
                __stcs(d1, s);
            } else {
                *d0 = s;
                *d1 = s;
            }
        }
    }
    for (; v < a.nvec; v += stride) {
        float4 s = add4(((const float4 *)a.src[1])[v], ((const float4 *)a.src[0])[v]);
        ((float4 *)a.dst[0])[v] = s;
        ((float4 *)a.dst[1])[v] = s;
    }
}

/* Contiguous tiles per block: block b owns vectors [b*T, (b+1)*T), threads stride within it. */
template <int U>
__global__ void fold_tiled(const struct args a, size_t tile)
{
    size_t lo = (size_t)blockIdx.x * tile, hi = lo + tile < a.nvec ? lo + tile : a.nvec;
    for (size_t v = lo + threadIdx.x; v < hi; v += U * blockDim.x) {
        float4 x[U], y[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            size_t i = v + u * blockDim.x;
            if (i < hi) {
                x[u] = __ldcs((const float4 *)a.src[0] + i);
                y[u] = __ldcs((const float4 *)a.src[1] + i);
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            size_t i = v + u * blockDim.x;
            if (i < hi) {
                float4 s = add4(y[u], x[u]);
                __stcs((float4 *)a.dst[0] + i, s);
                __stcs((float4 *)a.dst[1] + i, s);
            }
        }
    }
}


/* ---- sm_90: the tensor memory accelerator's 1-D bulk copies (cp.async.bulk) ---------------- */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TMA_OK 1
#else
#define TMA_OK 0
#endif

__device__ __forceinline__ unsigned smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(unsigned long long *bar)
{
#if TMA_OK
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)));
#endif
}
__device__ __forceinline__ void mbar_wait(unsigned long long *bar, unsigned parity)
{
#if TMA_OK
    unsigned done = 0;
    while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
                     "selp.u32 %0, 1, 0, p; }"
                     : "=r"(done)
                     : "r"(smem_addr(bar)), "r"(parity)
                     : "memory");
#endif
}
/* Thread 0: arm the barrier for `bytes` more, and bring a tile into shared memory against it. */
__device__ __forceinline__ void mbar_expect(unsigned long long *bar, unsigned bytes)
{
#if TMA_OK
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
                 "r"(bytes)
                 : "memory");
#endif
}
__device__ __forceinline__ void tma_load(void *s, const void *g, unsigned bytes,
                                         unsigned long long *bar)
{
#if TMA_OK
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
                 "%2, [%3];" ::"r"(smem_addr(s)),
                 "l"(g), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
#endif
}
__device__ __forceinline__ void tma_load2(void *s0, const void *g0, void *s1, const void *g1,
                                          unsigned bytes, unsigned long long *bar)
{
    mbar_expect(bar, 2 * bytes);
    tma_load(s0, g0, bytes, bar);
    tma_load(s1, g1, bytes, bar);
}
__device__ __forceinline__ void tma_store(void *g, const void *s, unsigned bytes)
{
#if TMA_OK
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(g),
                 "r"(smem_addr(s)), "r"(bytes)
                 : "memory");
#endif
}
__device__ __forceinline__ void tma_commit(void)
{
#if TMA_OK
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}
__device__ __forceinline__ void tma_wait_read(void)
{
#if TMA_OK
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#endif
}
__device__ __forceinline__ void tma_wait_all(void)
{
#if TMA_OK
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}
__device__ __forceinline__ void fence_async(void)
{
#if TMA_OK
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

/* Tiles of T bytes, S stages; block b takes tiles b, b + grid, ... Thread 0 drives the copies.
 * TSTORE: the sum goes back through shared memory and two bulk stores; otherwise each thread
 * stores its vectors itself (evict-first). */
template <int T, int S, bool TSTORE>
__global__ void fold_tma(const struct args a)
{
    extern __shared__ __align__(128) unsigned char sm[];
    unsigned long long *bar = (unsigned long long *)sm;
    unsigned char *buf = sm + 128;
    const size_t bytes = a.nvec * 16, ntiles = (bytes + T - 1) / T;
    if (threadIdx.x == 0) {
        for (int s = 0; s < S; s++) mbar_init(&bar[s]);
#if TMA_OK
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
    }
    __syncthreads();
    auto tile_bytes = [&](size_t t) -> unsigned {
        size_t off = t * T;
        return (unsigned)(bytes - off < (size_t)T ? bytes - off : (size_t)T);
    };
    auto issue = [&](size_t t, int s) {
        unsigned n = tile_bytes(t);
        tma_load2(buf + (size_t)s * 2 * T, (const char *)a.src[0] + t * T,
                  buf + (size_t)s * 2 * T + T, (const char *)a.src[1] + t * T, n, &bar[s]);
    };
    if (threadIdx.x == 0)
        for (int s = 0; s < S; s++) {
            size_t t = blockIdx.x + (size_t)s * gridDim.x;
            if (t < ntiles) issue(t, s);
        }
    for (size_t j = 0;; j++) {
        size_t t = blockIdx.x + j * gridDim.x;
        if (t >= ntiles) break;
        int s = (int)(j % S);
        mbar_wait(&bar[s], (unsigned)((j / S) & 1));
        float4 *x = (float4 *)(buf + (size_t)s * 2 * T), *y = (float4 *)(buf + (size_t)s * 2 * T + T);
        unsigned n = tile_bytes(t), nv = n / 16;
        if (TSTORE) {
            for (unsigned v = threadIdx.x; v < nv; v += blockDim.x) x[v] = add4(y[v], x[v]);
            fence_async();
            __syncthreads();
            if (threadIdx.x == 0) {
                tma_store((char *)a.dst[0] + t * T, x, n);
                tma_store((char *)a.dst[1] + t * T, x, n);
                tma_commit();
                tma_wait_read();
                size_t next = t + (size_t)S * gridDim.x;
                if (next < ntiles) issue(next, s);
            }
        } else {
            float4 *d0 = (float4 *)((char *)a.dst[0] + t * T), *d1 = (float4 *)((char *)a.dst[1] + t * T);
            for (unsigned v = threadIdx.x; v < nv; v += blockDim.x) {
                float4 r = add4(y[v], x[v]);
                __stcs(d0 + v, r);
                __stcs(d1 + v, r);
            }
            fence_async(); /* the shared reads above come before the next bulk load's writes */
            __syncthreads();
            if (threadIdx.x == 0) {
                size_t next = t + (size_t)S * gridDim.x;
                if (next < ntiles) issue(next, s);
            }
        }
    }
    if (TSTORE && threadIdx.x == 0) tma_wait_all();
}

/* A plain copy through the same machinery, to compare with cudaMemcpy. */
template <int T, int S>
__global__ void copy_tma(float4 *dst, const float4 *src, size_t nvec)
{
    extern __shared__ __align__(128) unsigned char sm[];
    unsigned long long *bar = (unsigned long long *)sm;
    unsigned char *buf = sm + 128;
    const size_t bytes = nvec * 16, ntiles = (bytes + T - 1) / T;
    if (threadIdx.x == 0) {
        for (int s = 0; s < S; s++) mbar_init(&bar[s]);
#if TMA_OK
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
        for (int s = 0; s < S; s++) {
            size_t t = blockIdx.x + (size_t)s * gridDim.x;
            if (t < ntiles) {
                mbar_expect(&bar[s], T);
                tma_load(buf + (size_t)s * T, (const char *)src + t * T, T, &bar[s]);
            }
        }
        for (size_t j = 0;; j++) {
            size_t t = blockIdx.x + j * gridDim.x;
            if (t >= ntiles) break;
            int s = (int)(j % S);
            mbar_wait(&bar[s], (unsigned)((j / S) & 1));
            tma_store((char *)dst + t * T, buf + (size_t)s * T, T);
            tma_commit();
            tma_wait_read();
            size_t next = t + (size_t)S * gridDim.x;
            if (next < ntiles) {
                mbar_expect(&bar[s], T);
                tma_load(buf + (size_t)s * T, (const char *)src + next * T, T, &bar[s]);
            }
        }
        tma_wait_all();
    }
}

__global__ void copy_kernel(float4 *dst, const float4 *src, size_t nvec)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x; v < nvec; v += stride)
        dst[v] = src[v];
}

__global__ void fill(float *p, size_t n, int k)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = (float)((i * 7 + k) % 1024); /* small integers: sums are exact */
}

__global__ void check(const float *d, size_t n, unsigned long long *bad)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float want = (float)((i * 7 + 1) % 1024) + (float)((i * 7 + 2) % 1024);
        if (d[i] != want) atomicAdd(bad, 1ULL);
    }
}

static cudaStream_t st;
static cudaEvent_t e0, e1;
static size_t bytes;
static int iters;
static double memcpy_gbs;

template <typename F>
static double time_us(F launch)
{
    for (int i = 0; i < 3; i++) launch();
    CK(cudaStreamSynchronize(st));
    CK(cudaEventRecord(e0, st));
    for (int i = 0; i < iters; i++) launch();
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return 1000.0 * ms / iters;
}

static void row(const char *name, double us, bool fold)
{
    double gbs = bytes / us / 1000.0;
    if (fold)
        printf("%-34s %9.1f us %8.1f GB/s  %5.1f%% of copy  %5.1f%% of the bound\n", name, us, gbs,
               100.0 * gbs / memcpy_gbs, 200.0 * gbs / memcpy_gbs);
    else
        printf("%-34s %9.1f us %8.1f GB/s\n", name, us, gbs);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 256;
    iters = argc > 2 ? atoi(argv[2]) : 20;
    bytes = mib << 20;
    size_t n = bytes / 4, nvec = bytes / 16;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("gpu_fold: no CUDA device here: skipped\n");
        return 77;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int sms = prop.multiProcessorCount;
    printf("# %s, %d SMs, L2 %d MiB; %zu MiB per buffer, %d calls per row\n", prop.name, sms,
           prop.l2CacheSize >> 20, mib, iters);
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float *s0, *s1, *d0, *d1;
    CK(cudaMalloc(&s0, bytes));
    CK(cudaMalloc(&s1, bytes));
    CK(cudaMalloc(&d0, bytes));
    CK(cudaMalloc(&d1, bytes));
    fill<<<1024, 256, 0, st>>>(s0, n, 1);
    fill<<<1024, 256, 0, st>>>(s1, n, 2);
    unsigned long long *bad;
    CK(cudaMalloc(&bad, sizeof *bad));
    CK(cudaStreamSynchronize(st));

    double mc = time_us([&] { CK(cudaMemcpyAsync(d0, s0, bytes, cudaMemcpyDeviceToDevice, st)); });
    memcpy_gbs = bytes / mc / 1000.0;
    row("cudaMemcpyAsync D2D", mc, false);
    row("copy kernel 2048x512", time_us([&] {
            copy_kernel<<<2048, 512, 0, st>>>((float4 *)d0, (const float4 *)s0, nvec);
        }), false);

    struct args a = {{s0, s1}, {d0, d1}, nvec, 2};
    int wrong = 0;
    auto verify = [&](const char *name) {
        CK(cudaMemsetAsync(bad, 0, sizeof *bad, st));
        check<<<1024, 256, 0, st>>>(d0, n, bad);
        check<<<1024, 256, 0, st>>>(d1, n, bad);
        unsigned long long h;
        CK(cudaMemcpyAsync(&h, bad, sizeof h, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        if (h != 0) {
            printf("  WRONG: %s: %llu elements\n", name, h);
            wrong = 1;
        }
        CK(cudaMemsetAsync(d0, 0, bytes, st));
        CK(cudaMemsetAsync(d1, 0, bytes, st));
    };
    char name[96];
    /* Today's kernel and launch shape (module.c: 512 threads, blocks up to 2048). */
    row("base 2048x512 (today)", time_us([&] { fold_base<<<2048, 512, 0, st>>>(a); }), true);
    verify("base");
    for (int k = 1; k <= 8; k *= 2) {
        snprintf(name, sizeof name, "base %dx512 (SMs x %d)", sms * k, k);
        row(name, time_us([&] { fold_base<<<sms * k, 512, 0, st>>>(a); }), true);
    }
#define UNROLL(U, CS, B, T)                                                                        \
    snprintf(name, sizeof name, "unroll %d%s %dx%d", U, CS ? " cs" : "", B, T);                    \
    row(name, time_us([&] { fold_unroll<U, CS><<<B, T, 0, st>>>(a); }), true);                      \
    verify(name);
    UNROLL(2, false, 2048, 512)
    UNROLL(2, true, 2048, 512)
    UNROLL(4, false, 2048, 512)
    UNROLL(4, true, 2048, 512)
    UNROLL(2, true, sms * 4, 512)
    UNROLL(4, true, sms * 2, 512)
    UNROLL(4, true, sms * 4, 256)
    UNROLL(4, true, sms * 8, 256)
    UNROLL(8, true, sms * 4, 256)
    UNROLL(4, false, sms * 4, 256)
    for (int blocks = sms * 2; blocks <= sms * 16; blocks *= 2) {
        size_t tile = (nvec + blocks - 1) / blocks;
        snprintf(name, sizeof name, "tiled 4 cs %dx512", blocks);
        row(name, time_us([&] { fold_tiled<4><<<blocks, 512, 0, st>>>(a, tile); }), true);
        verify(name);
    }

#define TMA(T, S, TS, BPS, TH)                                                                     \
    {                                                                                              \
        size_t smem = 128 + (size_t)S * 2 * T;                                                     \
        CK(cudaFuncSetAttribute(fold_tma<T, S, TS>, cudaFuncAttributeMaxDynamicSharedMemorySize,  \
                                (int)smem));                                                       \
        snprintf(name, sizeof name, "tma %dK x%d %s %dx%d", T >> 10, S, TS ? "tma-st" : "st.cs",   \
                 sms * BPS, TH);                                                                   \
        row(name, time_us([&] { fold_tma<T, S, TS><<<sms * BPS, TH, smem, st>>>(a); }), true);    \
        verify(name);                                                                              \
    }
    if (prop.major >= 9) {
    TMA(8192, 4, true, 1, 256)
    TMA(8192, 4, true, 2, 256)
    TMA(16384, 3, true, 1, 256)
    TMA(16384, 3, true, 2, 256)
    TMA(4096, 8, true, 2, 256)
    TMA(8192, 6, true, 1, 512)
    TMA(8192, 4, false, 2, 256)
    TMA(16384, 3, false, 2, 512)
    TMA(4096, 8, false, 3, 256)
#define TCOPY(T, S, BPS)                                                                           \
    {                                                                                              \
        size_t smem = 128 + (size_t)S * T;                                                         \
        CK(cudaFuncSetAttribute(copy_tma<T, S>, cudaFuncAttributeMaxDynamicSharedMemorySize,      \
                                (int)smem));                                                       \
        snprintf(name, sizeof name, "copy tma %dK x%d %dx32", T >> 10, S, sms * BPS);              \
        row(name, time_us([&] {                                                                    \
                copy_tma<T, S><<<sms * BPS, 32, smem, st>>>((float4 *)d0, (const float4 *)s0,      \
                                                            nvec);                                 \
            }), false);                                                                            \
    }
    TCOPY(16384, 4, 1)
    TCOPY(16384, 4, 2)
    TCOPY(32768, 4, 2)
    }
    /* In place: the outputs are the inputs. */
    struct args ip = {{s0, s1}, {s0, s1}, nvec, 2};
    row("in place: base 2048x512", time_us([&] { fold_base<<<2048, 512, 0, st>>>(ip); }), true);
    row("in place: unroll 4 cs SMsx4x256",
        time_us([&] { fold_unroll<4, true><<<sms * 4, 256, 0, st>>>(ip); }), true);
    double mc2 = time_us([&] { CK(cudaMemcpyAsync(d0, s0, bytes, cudaMemcpyDeviceToDevice, st)); });
    printf("# cudaMemcpyAsync again at the end: %.1f us (%.1f GB/s)\n", mc2, bytes / mc2 / 1000.0);
    return wrong;
}
