/* The device reduction kernels (tt_device_reduce, src/device/cuda/reduce.cu) on a GPU, checked
 * bit for bit against the host's scalar kernels for every datatype x operation, on the same
 * awkward and random inputs as unit_cuda_elementwise (any NaN matches any NaN where arithmetic
 * made it from two NaNs). Also in place (dst aliasing a). Exits 77 without a usable GPU. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "reduce/kernels.h"
#include "reduce/reduce.h"

#define N 100003 /* odd, more than one block of the kernels' grid */

static int failures, checked;
static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next_bits(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void die_cuda(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return;
    fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(e));
    exit(1);
}

static bool is_nan_bits(ncclDataType_t dt, const unsigned char *p)
{
    uint16_t h;
    float f;
    double d;
    switch (dt) {
    case ncclFloat16: memcpy(&h, p, 2); return isnan(tt_half_to_float(h));
    case ncclBfloat16: memcpy(&h, p, 2); return isnan(tt_bf16_to_float(h));
    case ncclFloat32: memcpy(&f, p, 4); return isnan(f);
    case ncclFloat64: memcpy(&d, p, 8); return isnan(d);
    case ncclFloat8e4m3: return isnan(tt_e4m3_to_float(*p));
    case ncclFloat8e5m2: return isnan(tt_e5m2_to_float(*p));
    default: return false;
    }
}

static void check(ncclDataType_t dt, enum tt_device_red red, bool inplace, void *da, void *db,
                  void *dd, const unsigned char *a, const unsigned char *b, unsigned char *got,
                  unsigned char *want)
{
    static const char *const names[] = {"sum", "prod", "max", "min", "premulsum", "sumdiv",
                                        "premul", "div"};
    size_t elt = tt_dtype_bytes(dt);
    struct tt_redop op;
    memset(&op, 0, sizeof op);
    op.dtype = dt;
    op.divisor = 3;
    op.scalar.u = 0xfffffffffffffffdull;
    op.scalar.f = dt == ncclFloat64 ? 1.0 / 3 : dt == ncclFloat32 ? (double)(float)(1.0 / 3)
                                                                  : 0.25;
    const struct tt_reduce_kernels *k = &tt_reduce_scalar_kernels[dt];
    tt_combine_fn combine[] = {k->sum, k->prod, k->max, k->min, k->premulsum, k->sumdiv};
    if (red == TT_DEVICE_RED_PREMUL) k->premul(want, a, N, &op);
    else if (red == TT_DEVICE_RED_DIV) k->div(want, a, N, &op);
    else combine[red](want, NULL, a, b, N, &op);

    die_cuda(cudaMemcpy(da, a, N * elt, cudaMemcpyHostToDevice), "cudaMemcpy");
    void *dst = inplace ? da : dd;
    ncclResult_t res = tt_device_reduce(NULL, dt, red, op.scalar.f, op.scalar.u, op.divisor,
                                        dst, da, db, N);
    if (res != ncclSuccess) {
        fprintf(stderr, "tt_device_reduce failed: %d\n", (int)res);
        exit(1);
    }
    die_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    die_cuda(cudaMemcpy(got, dst, N * elt, cudaMemcpyDeviceToHost), "cudaMemcpy");
    bool nan_ok = red != TT_DEVICE_RED_MAX && red != TT_DEVICE_RED_MIN;
    checked++;
    for (size_t i = 0; i < N; i++) {
        if (memcmp(got + i * elt, want + i * elt, elt) == 0) continue;
        if (nan_ok && is_nan_bits(dt, got + i * elt) && is_nan_bits(dt, want + i * elt))
            continue;
        uint64_t g = 0, w = 0;
        memcpy(&g, got + i * elt, elt);
        memcpy(&w, want + i * elt, elt);
        fprintf(stderr, "FAIL %s %s%s [%zu]: got %#llx, want %#llx\n", tt_dtype_name(dt),
                names[red], inplace ? " in place" : "", i, (unsigned long long)g,
                (unsigned long long)w);
        failures++;
        return;
    }
}

int main(void)
{
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP: no usable CUDA device (%s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    die_cuda(cudaSetDevice(0), "cudaSetDevice");
    /* No communicator here: the library takes the driver this process just loaded, as a
     * communicator's init would. */
    tt_device_probe(false);
    if (!tt_device_active()) {
        fprintf(stderr, "gpu_reduce: the library did not take the CUDA driver\n");
        return 1;
    }
    unsigned char *a = malloc(N * 8), *b = malloc(N * 8), *got = malloc(N * 8),
                  *want = malloc(N * 8);
    void *da, *db, *dd;
    die_cuda(cudaMalloc(&da, N * 8), "cudaMalloc");
    die_cuda(cudaMalloc(&db, N * 8), "cudaMalloc");
    die_cuda(cudaMalloc(&dd, N * 8), "cudaMalloc");
    for (int dt = 0; dt < ncclNumTypes; dt++) {
        size_t elt = tt_dtype_bytes((ncclDataType_t)dt);
        for (size_t i = 0; i < N * elt; i++) {
            a[i] = (unsigned char)next_bits();
            b[i] = (unsigned char)next_bits();
        }
        die_cuda(cudaMemcpy(db, b, N * elt, cudaMemcpyHostToDevice), "cudaMemcpy");
        for (int red = 0; red < TT_DEVICE_RED_COUNT; red++)
            for (int inplace = 0; inplace < 2; inplace++)
                check((ncclDataType_t)dt, (enum tt_device_red)red, inplace, da, db, dd, a, b,
                      got, want);
    }
    printf("gpu_reduce: %d datatype x operation x form checks of %d elements: %d failed\n",
           checked, N, failures);
    return failures == 0 ? 0 : 1;
}
