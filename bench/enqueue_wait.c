/* bench/enqueue_wait: how long issuing work on a host stream takes while another stream moves
 * a large operation. Each of ROUNDS rounds queues a 64 MiB AllReduce float32 on stream 1,
 * sleeps 2 ms (so it is well under way), then times one call: an 8 KiB AllReduce queued on
 * stream 2 ("enqueue"), or a tuttiStreamQuery of the idle stream 2 ("query"); then both streams
 * are synchronized. Every rank prints the mean and the worst of its calls. A call that only
 * queues or checks should cost microseconds whatever else runs (docs/design.md, "A thread that
 * issues work never waits for other work's progress").
 *
 *   cc -O2 -I include bench/enqueue_wait.c -L build/release -ltutti \
 *      -Wl,-rpath,$PWD/build/release -o /tmp/enqueue_wait
 *   build/release/tutti-run -n 2 /tmp/enqueue_wait */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nccl.h"
#include "tutti.h"

#define ROUNDS 20
#define BIG (16u << 20)  /* elements: 64 MiB */
#define SMALL 2048u      /* elements: 8 KiB */

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int main(void)
{
    ncclComm_t comm;
    if (tuttiCommInitFromEnv(&comm) != ncclSuccess) {
        fprintf(stderr, "init: %s\n", ncclGetLastError(NULL));
        return 1;
    }
    int rank;
    ncclCommUserRank(comm, &rank);
    float *big = calloc(BIG, sizeof *big), *small = calloc(SMALL, sizeof *small);
    cudaStream_t s1, s2;
    if (big == NULL || small == NULL || tuttiStreamCreate(&s1) != ncclSuccess ||
        tuttiStreamCreate(&s2) != ncclSuccess)
        return 1;
    for (int what = 0; what < 2; what++) {
        double sum = 0, worst = 0;
        for (int k = 0; k < ROUNDS; k++) {
            if (ncclAllReduce(big, big, BIG, ncclFloat, ncclSum, comm, s1) != ncclSuccess)
                return 1;
            nanosleep(&(struct timespec){0, 2000000}, NULL);
            double t0 = now_us();
            ncclResult_t res = what == 0
                                   ? ncclAllReduce(small, small, SMALL, ncclFloat, ncclSum,
                                                   comm, s2)
                                   : tuttiStreamQuery(s2);
            double dt = now_us() - t0;
            if (res != ncclSuccess) return 1;
            sum += dt;
            if (dt > worst) worst = dt;
            if (tuttiStreamSynchronize(s1) != ncclSuccess ||
                tuttiStreamSynchronize(s2) != ncclSuccess)
                return 1;
        }
        printf("rank %d: %-7s while a 64 MiB AllReduce runs: mean %.1f us, worst %.1f us\n",
               rank, what == 0 ? "enqueue" : "query", sum / ROUNDS, worst);
    }
    tuttiStreamDestroy(s1);
    tuttiStreamDestroy(s2);
    ncclCommDestroy(comm);
    free(big);
    free(small);
    return 0;
}
