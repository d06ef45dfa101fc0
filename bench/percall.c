/* bench/percall: Tutti's AllReduce timed the way ../shared/anchors/deepspeed_shm/ds_shm_bench.cc
 * times DeepSpeed's, so that bench/deepspeed can set the two side by side with one method as
 * well as with tutti-perf's: float32 sum, in place, on ordinary (aligned_alloc) buffers, the same
 * inputs, warmup and call counts; each call timed on its own, the slower rank's time per call
 * kept, and the median, mean and minimum over the calls printed, with the result checked.
 *
 *   tutti-run -n 2 ./percall [sizes in bytes, comma-separated]     (default 64K,1M,16M,256M)
 *
 * Build: cc -O2 -I include bench/percall.c -L build/release -ltutti -lm (bench/deepspeed does). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tutti.h"

#define MAX_ITERS 64

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The anchor's inputs: rank r, element i holds (r+1) * (i%7 + 1); sums of these are exact. */
static void fill(float *p, size_t n, int rank)
{
    for (size_t i = 0; i < n; i++) p[i] = (float)((rank + 1) * ((i % 7) + 1));
}

/* After k in-place AllReduces of n ranks: n(n+1)/2 * (i%7 + 1) * n^(k-1). */
static long check(const float *p, size_t n, int nranks, int k)
{
    long bad = 0;
    double s = nranks * (nranks + 1) / 2.0, scale = pow((double)nranks, k - 1);
    for (size_t i = 0; i < n; i++)
        if ((double)p[i] != s * (double)((i % 7) + 1) * scale) bad++;
    return bad;
}

int main(int argc, char **argv)
{
    size_t sizes[64];
    int nsizes = 0;
    const char *list = argc > 1 ? argv[1] : "65536,1048576,16777216,268435456";
    char *copy = strdup(list);
    for (char *tok = strtok(copy, ","); tok != NULL && nsizes < 64; tok = strtok(NULL, ",")) {
        char *end;
        sizes[nsizes] = strtoull(tok, &end, 10);
        if (*end != '\0' || sizes[nsizes] < sizeof(float)) {
            fprintf(stderr, "usage: percall [sizes in bytes, comma-separated, each >= 4]\n");
            return 2;
        }
        nsizes++;
    }
    free(copy);
    ncclComm_t comm;
    if (tuttiCommInitFromEnv(&comm) != ncclSuccess) {
        fprintf(stderr, "percall: init failed: %s\n", ncclGetLastError(NULL));
        return 1;
    }
    int rank, nranks;
    ncclCommUserRank(comm, &rank);
    ncclCommCount(comm, &nranks);
    int failed = 0;
    for (int z = 0; z < nsizes && !failed; z++) {
        size_t bytes = sizes[z], n = bytes / sizeof(float);
        int warm = bytes >= (64u << 20) ? 2 : 5;
        int iters = bytes >= (64u << 20) ? 10 : (bytes >= (8u << 20) ? 30 : 50);
        float *buf = aligned_alloc(64, ((bytes + 63) / 64) * 64);
        double t[MAX_ITERS];
        if (buf == NULL) {
            fprintf(stderr, "percall: out of memory for %zu bytes\n", bytes);
            return 1;
        }
        fill(buf, n, rank);
        failed |= ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, NULL) != ncclSuccess;
        long bad = check(buf, n, nranks, 1);
        for (int i = 0; i < warm; i++)
            failed |= ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, NULL) != ncclSuccess;
        for (int i = 0; i < iters; i++) {
            double t0 = now_us();
            failed |= ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, NULL) != ncclSuccess;
            t[i] = now_us() - t0;
        }
        bad += check(buf, n, nranks, 1 + warm + iters);
        /* The slower rank's time per call, and whether any rank saw a wrong value. */
        double badd = (double)bad;
        failed |= ncclAllReduce(t, t, (size_t)iters, ncclFloat64, ncclMax, comm, NULL) !=
                  ncclSuccess;
        failed |= ncclAllReduce(&badd, &badd, 1, ncclFloat64, ncclSum, comm, NULL) !=
                  ncclSuccess;
        if (failed) {
            fprintf(stderr, "percall: rank %d: %s\n", rank, ncclGetLastError(comm));
            break;
        }
        double mean = 0;
        for (int i = 0; i < iters; i++) mean += t[i];
        mean /= iters;
        qsort(t, (size_t)iters, sizeof t[0], cmp_double);
        double med = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
        if (rank == 0)
            printf("RESULT tutti bytes=%zu iters=%d median_us=%.2f mean_us=%.2f min_us=%.2f "
                   "check=%s\n", bytes, iters, med, mean, t[0], badd != 0 ? "FAIL" : "ok");
        fflush(stdout);
        failed |= badd != 0;
        free(buf);
    }
    ncclCommDestroy(comm);
    return failed != 0;
}
