/* Point-to-point at first contact, outside any group (label coll): two ranks that each send to
 * the other first, on one host stream, and only then receive, on another. A connection made for
 * the one direction an operation needs waited for a Recv the peer had not issued yet (both
 * ranks stuck in their Send until TUTTI_TIMEOUT_MS); the first operation between two ranks now
 * connects both directions, so the two exchanges meet. The pairs are ranks (0, 1), (2, 3), ...
 * of the job, first on the whole communicator and then on a split one (nothing connected yet),
 * 12 MiB each way (more than a FIFO holds) and again 1031 elements over the connections made.
 * A cycle of three or more ranks sending first still waits (docs/semantics.md, "Groups"). Data
 * checked exactly (integers); the run is bounded by a short TUTTI_TIMEOUT_MS
 * (tests/conformance.cmake). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "tutti.h"

#define CK(x)                                                                                      \
    do {                                                                                           \
        ncclResult_t r_ = (x);                                                                     \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "%s: %s: %s\n", #x, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static int failures;

/* Sends `count` int32 to `to` on one stream, then receives as many from `from` on another. */
static void send_then_recv(ncclComm_t comm, int rank, int to, int from, size_t count,
                           cudaStream_t ss, cudaStream_t rs)
{
    int32_t *out = malloc(count * sizeof *out), *got = malloc(count * sizeof *got);
    if (out == NULL || got == NULL) exit(1);
    for (size_t i = 0; i < count; i++) {
        out[i] = (int32_t)(rank * 1000003 + (int)(i % 1000));
        got[i] = -1;
    }
    CK(ncclSend(out, count, ncclInt32, to, comm, ss));
    CK(ncclRecv(got, count, ncclInt32, from, comm, rs));
    CK(tuttiStreamSynchronize(ss));
    CK(tuttiStreamSynchronize(rs));
    for (size_t i = 0; i < count; i++)
        if (got[i] != (int32_t)(from * 1000003 + (int)(i % 1000))) {
            fprintf(stderr, "rank %d: element %zu from rank %d is %d\n", rank, i, from, got[i]);
            failures++;
            break;
        }
    free(out);
    free(got);
}

int main(void)
{
    ncclComm_t comm;
    CK(tuttiCommInitFromEnv(&comm));
    int rank, n;
    CK(ncclCommUserRank(comm, &rank));
    CK(ncclCommCount(comm, &n));
    cudaStream_t ss, rs;
    CK(tuttiStreamCreate(&ss));
    CK(tuttiStreamCreate(&rs));
    size_t big = (size_t)3 << 20; /* 12 MiB: more than any FIFO holds */
    int partner = rank ^ 1;
    if (partner < n) {
        send_then_recv(comm, rank, partner, partner, big, ss, rs);
        send_then_recv(comm, rank, partner, partner, 1031, ss, rs);
    }
    ncclComm_t pairs;
    CK(ncclCommSplit(comm, rank / 2, rank, &pairs, NULL));
    int prank, pn;
    CK(ncclCommUserRank(pairs, &prank));
    CK(ncclCommCount(pairs, &pn));
    if (pn == 2) send_then_recv(pairs, prank, 1 - prank, 1 - prank, big, ss, rs);
    CK(ncclCommDestroy(pairs));
    long long total = failures;
    CK(ncclAllReduce(&total, &total, 1, ncclInt64, ncclSum, comm, NULL));
    CK(tuttiStreamDestroy(ss));
    CK(tuttiStreamDestroy(rs));
    CK(ncclCommDestroy(comm));
    if (rank == 0) printf("p2p_first_contact: %d ranks, %lld failures\n", n, total);
    return total == 0 ? 0 : 1;
}
