/* bench/between_calls: does what a caller does between collectives slow them down? A 1 MiB
 * AllReduce float32 sum, in place, on a symmetric window of ncclMemAlloc memory (what
 * `tutti-perf -R 2` times), with the caller writing K KiB of other memory between calls, K from
 * 0 to 2048 (this machine's L2 is 2 MiB per CPU): the cache lines the caller takes are those
 * the collective's buffers and its peers' mappings lose. Two passes, each K 3000 calls after
 * 300 of warmup; rank 0 prints the AllReduce's time per call (the writes not counted) and the
 * writes' own. docs/python.md ("Measuring") says what it showed about calls from Python.
 *
 *   cc -O2 -I include bench/between_calls.c -L build/release -ltutti \
 *      -Wl,-rpath,$PWD/build/release -o /tmp/between_calls
 *   build/release/tutti-run -n 2 /tmp/between_calls */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl.h"

#define BYTES ((size_t)1 << 20)
#define CALLS 3000
#define WARMUP 300

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int die(const char *what)
{
    fprintf(stderr, "between_calls: %s: %s\n", what, ncclGetLastError(NULL));
    return 1;
}

int main(void)
{
    const char *r = getenv("RANK"), *w = getenv("WORLD_SIZE");
    if (r == NULL || w == NULL) {
        fprintf(stderr, "between_calls: run under tutti-run (RANK, WORLD_SIZE, NCCL_COMM_ID)\n");
        return 2;
    }
    int rank = atoi(r), nranks = atoi(w);
    ncclUniqueId id; /* tutti-run's NCCL_COMM_ID: every rank derives the same id */
    ncclComm_t comm;
    if (ncclGetUniqueId(&id) != ncclSuccess) return die("ncclGetUniqueId");
    if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return die("init");
    size_t count = BYTES / sizeof(float);
    float *buf = NULL;
    ncclWindow_t win;
    if (ncclMemAlloc((void **)&buf, BYTES) != ncclSuccess) return die("ncclMemAlloc");
    if (ncclCommWindowRegister(comm, buf, BYTES, &win, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess)
        return die("ncclCommWindowRegister");
    memset(buf, 0, BYTES); /* zeros stay zeros: nothing to overflow */
    static const int kib[] = {0, 64, 256, 512, 1024, 2048};
    size_t most = (size_t)kib[sizeof kib / sizeof kib[0] - 1] << 10;
    unsigned char *other = malloc(most);
    if (other == NULL) return 1;
    memset(other, 1, most);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < sizeof kib / sizeof kib[0]; k++) {
            size_t touch = (size_t)kib[k] << 10;
            double coll = 0, writes = 0;
            for (int i = -WARMUP; i < CALLS; i++) {
                double a = now_us();
                if (touch) memset(other, i & 0xff, touch);
                double b = now_us();
                if (ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, NULL) !=
                    ncclSuccess)
                    return die("ncclAllReduce");
                double c = now_us();
                if (i >= 0) coll += c - b, writes += b - a;
            }
            if (rank == 0)
                printf("pass %d: %4d KiB written between calls: AllReduce %6.2f us per call "
                       "(the writes %6.2f us)\n",
                       pass + 1, kib[k], coll / CALLS, writes / CALLS);
        }
    }
    for (size_t i = 0; i < count; i++)
        if (buf[i] != 0.0f) return die("wrong result");
    ncclCommWindowDeregister(comm, win);
    ncclMemFree(buf);
    free(other);
    ncclCommDestroy(comm);
    return 0;
}
