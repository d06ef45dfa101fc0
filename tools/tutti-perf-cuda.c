/* tutti-perf's device mode (-G): CUDA runtime calls, built only in CUDA builds (linked with
 * the static CUDA runtime, so tutti-perf needs no libcudart at run time; libtutti.so itself
 * links no CUDA library at all). Every collective is issued on one non-blocking CUDA stream
 * and timed with CUDA events around the timed loop, as nccl-tests does. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "tutti-perf.h"

cudaStream_t tp_stream;
static cudaEvent_t ev_start, ev_stop;
static struct cudaDeviceProp prop;

static void die(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return;
    fprintf(stderr, "tutti-perf: %s failed: %s\n", what, cudaGetErrorString(e));
    exit(1);
}

bool tp_dev_init(char *why, size_t why_bytes)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(why, why_bytes, "no usable CUDA device (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return false;
    }
    /* Every rank of the host uses device 0 unless LOCAL_RANK spreads them: Tutti lets several
     * ranks share one GPU. */
    const char *local = getenv("TUTTI_PERF_DEVICE");
    int dev = local != NULL ? atoi(local) % n : 0;
    die(cudaSetDevice(dev), "cudaSetDevice");
    die(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
    die(cudaStreamCreateWithFlags(&tp_stream, cudaStreamNonBlocking), "cudaStreamCreate");
    die(cudaEventCreate(&ev_start), "cudaEventCreate");
    die(cudaEventCreate(&ev_stop), "cudaEventCreate");
    return true;
}

const char *tp_dev_name(void)
{
    return prop.name;
}

void *tp_dev_alloc(size_t bytes)
{
    void *p = NULL;
    die(cudaMalloc(&p, bytes > 0 ? bytes : 1), "cudaMalloc");
    die(cudaMemset(p, 0, bytes > 0 ? bytes : 1), "cudaMemset");
    return p;
}

void tp_dev_free(void *p)
{
    die(cudaFree(p), "cudaFree");
}

/* Copies to and from the device go on tp_stream, in order with the collectives. A plain
 * cudaMemcpy runs on the legacy default stream, which the non-blocking tp_stream does not wait
 * for, and from pageable memory it may return before its DMA ends: on an H100 shared by two
 * ranks, in-place checks then read stale bytes now and then. */
void tp_dev_put(void *dst, const void *src, size_t bytes)
{
    die(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, tp_stream),
        "cudaMemcpyAsync to the device");
    die(cudaStreamSynchronize(tp_stream), "cudaStreamSynchronize");
}

void tp_dev_get(void *dst, const void *src, size_t bytes)
{
    die(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, tp_stream),
        "cudaMemcpyAsync from the device");
    die(cudaStreamSynchronize(tp_stream), "cudaStreamSynchronize");
}

void tp_dev_sync(void)
{
    die(cudaStreamSynchronize(tp_stream), "cudaStreamSynchronize");
}

void tp_dev_timer_start(void)
{
    die(cudaEventRecord(ev_start, tp_stream), "cudaEventRecord");
}

double tp_dev_timer_stop_us(void)
{
    die(cudaEventRecord(ev_stop, tp_stream), "cudaEventRecord");
    die(cudaEventSynchronize(ev_stop), "cudaEventSynchronize");
    float ms = 0;
    die(cudaEventElapsedTime(&ms, ev_start, ev_stop), "cudaEventElapsedTime");
    return (double)ms * 1e3;
}

double tp_dev_copy_gbs(size_t bytes, int iters)
{
    void *a = tp_dev_alloc(bytes), *b = tp_dev_alloc(bytes);
    die(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, tp_stream), "cudaMemcpyAsync");
    tp_dev_timer_start();
    for (int i = 0; i < iters; i++)
        die(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, tp_stream),
            "cudaMemcpyAsync");
    double us = tp_dev_timer_stop_us();
    tp_dev_free(a);
    tp_dev_free(b);
    return us > 0 ? (double)bytes * iters / us / 1e3 : 0.0;
}
