/* bench/lat8: the 8-byte AllReduce latency, finer than tutti-perf's 10 ns steps, and the
 * instruction count of the call's path (docs/performance.md, "The 8-byte path taken back").
 *
 *   tutti-run -n 2 ./lat8 [calls per batch] [batches]    best and every batch's ns per call
 *   tutti-run -n 2 ./lat8 --late [calls]                  rank 0 arrives late to every call (busy
 *       work outside the library), so its calls never wait: run rank 0 under
 *       `valgrind --tool=callgrind --toggle-collect=ncclAllReduce` to count the path alone.
 *
 * Build against the library to measure: cc -O2 -I include bench/lat8.c -L build/release -ltutti */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tutti.h"

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    bool late = argc > 1 && strcmp(argv[1], "--late") == 0;
    int first = late ? 2 : 1;
    int calls = argc > first ? atoi(argv[first]) : 100000;
    int batches = argc > first + 1 ? atoi(argv[first + 1]) : 10;
    if (calls <= 0 || batches <= 0 || batches > 1000) {
        fprintf(stderr, "usage: lat8 [--late] [calls] [batches (1-1000)]\n");
        return 2;
    }
    ncclComm_t comm;
    if (tuttiCommInitFromEnv(&comm) != ncclSuccess) {
        fprintf(stderr, "lat8: init failed: %s\n", ncclGetLastError(NULL));
        return 1;
    }
    int rank, nranks;
    ncclCommUserRank(comm, &rank);
    ncclCommCount(comm, &nranks);
    float in[2] = {1, 2}, out[2];
    int wrong = 0;
    if (late) {
        volatile double sink = 0;
        for (int i = 0; i < calls; i++) {
            if (rank == 0)
                for (int k = 0; k < 200000; k++) sink += k;
            if (ncclAllReduce(in, out, 2, ncclFloat, ncclSum, comm, NULL) != ncclSuccess ||
                out[0] != (float)nranks || out[1] != 2.0f * (float)nranks)
                wrong++;
        }
    } else {
        double best = 1e30;
        for (int b = 0; b < batches; b++) {
            double t0 = now_ns();
            for (int i = 0; i < calls; i++)
                if (ncclAllReduce(in, out, 2, ncclFloat, ncclSum, comm, NULL) != ncclSuccess)
                    wrong++;
            double per = (now_ns() - t0) / calls;
            if (per < best) best = per;
            if (rank == 0) printf("%.1f ", per);
        }
        if (out[0] != (float)nranks || out[1] != 2.0f * (float)nranks) wrong++;
        if (rank == 0) printf("\nbest %.1f ns per 8-byte AllReduce\n", best);
    }
    ncclCommDestroy(comm);
    if (wrong) fprintf(stderr, "lat8: rank %d: %d calls failed or were wrong\n", rank, wrong);
    return wrong != 0;
}
