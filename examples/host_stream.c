/* Communication overlapping computation on the CPU, with a host stream (tutti.h).
 *
 * A training step computes gradients layer by layer, from the last layer to the first. As soon
 * as one layer's gradients are ready, their AllReduce is issued on a host stream: the call
 * returns at once and Tutti's progress thread runs it while this thread computes the next
 * layer. One tuttiStreamSynchronize at the end waits for all of them. The gradients must not be
 * touched between issuing their AllReduce and that synchronisation.
 *
 *   cc -Iinclude examples/host_stream.c -Lbuild/release -ltutti \
 *      -Wl,-rpath,"$PWD/build/release" -o host_stream
 *   build/release/tutti-run -n 4 ./host_stream
 *
 * Every value is a small integer, so the sums are exact and checked bit for bit. */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <tutti.h>

enum { LAYERS = 4, COUNT = 1 << 20 };

#define CHECK_NCCL(call)                                                                       \
    do {                                                                                       \
        ncclResult_t r_ = (call);                                                              \
        if (r_ != ncclSuccess) {                                                               \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, ncclGetErrorString(r_),             \
                    ncclGetLastError(NULL));                                                   \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* Stands for a layer's backward pass: fills its gradients with rank + layer + i % 8. */
static void compute_gradients(float *grad, int layer, int rank)
{
    for (int i = 0; i < COUNT; i++) grad[i] = (float)(rank + layer + i % 8);
}

int main(void)
{
    ncclComm_t comm;
    CHECK_NCCL(tuttiCommInitFromEnv(&comm));
    int rank, nranks;
    CHECK_NCCL(ncclCommUserRank(comm, &rank));
    CHECK_NCCL(ncclCommCount(comm, &nranks));
    cudaStream_t stream;
    CHECK_NCCL(tuttiStreamCreate(&stream));

    float *grads[LAYERS];
    for (int layer = LAYERS - 1; layer >= 0; layer--) {
        grads[layer] = malloc(COUNT * sizeof(float));
        if (grads[layer] == NULL) return 1;
        compute_gradients(grads[layer], layer, rank);
        /* Returns at once; the next layer is computed while this AllReduce runs. */
        CHECK_NCCL(ncclAllReduce(grads[layer], grads[layer], COUNT, ncclFloat32, ncclSum, comm,
                                 stream));
        if (layer == LAYERS - 1 && rank == 0)
            printf("first AllReduce %s when the call returned\n",
                   tuttiStreamQuery(stream) == ncclInProgress ? "still running" : "done");
    }
    CHECK_NCCL(tuttiStreamSynchronize(stream));

    /* Sum over ranks r of (r + layer + i % 8). */
    int wrong = 0;
    for (int layer = 0; layer < LAYERS; layer++) {
        for (int i = 0; i < COUNT; i++) {
            float want = (float)(nranks * (nranks - 1) / 2 + nranks * (layer + i % 8));
            if (grads[layer][i] != want && wrong++ < 5)
                fprintf(stderr, "rank %d layer %d [%d]: got %g, want %g\n", rank, layer, i,
                        grads[layer][i], want);
        }
        free(grads[layer]);
    }
    printf("rank %d of %d: %d layers of %d gradients reduced while computing, %s\n", rank,
           nranks, LAYERS, COUNT, wrong ? "WRONG" : "all correct");

    CHECK_NCCL(tuttiStreamDestroy(stream));
    CHECK_NCCL(ncclCommDestroy(comm));
    return wrong ? 1 : 0;
}
