/* Arguments that differ across ranks, run as every rank under tutti-run: every rank must get
 * ncclInvalidUsage, never wrong data with ncclSuccess, and never a hang (the test runs with a
 * short TUTTI_TIMEOUT_MS, whose expiry would show as ncclRemoteError and fail the check).
 *
 * Each case runs on a fresh communicator split from the world, so one failure does not touch the
 * next case; the last rank is the odd one out:
 *   count     AllReduce of n elements, the last rank n/2;
 *   dtype     AllReduce as float32, the last rank as int32 (same bytes: only the descriptor can
 *             tell);
 *   op        AllReduce sum, the last rank max;
 *   root      Broadcast from rank 0, the last rank believes rank 1 is the root;
 *   coll      AllReduce, the last rank Reduce to rank 0;
 *   zero      AllReduce of n elements, the last rank of none (which sends nothing a receiver
 *             could compare: before, it returned ncclSuccess at once and the others waited);
 * at 8 B, 1 MiB and 64 MiB. `fault_mismatch [--max-bytes N] [--kinds count,dtype,...]
 * [--skip root@67108864,...]`; the default kinds are all six, --skip leaves cases out. Every
 * rank prints the error it got. Exit 1 on any failure. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "tutti.h"

#include "world.h"

enum kind { COUNT, DTYPE, OP, ROOT, COLL, ZERO, NKINDS };
static const char *const kind_names[NKINDS] = {"count", "dtype", "op", "root", "coll", "zero"};

static int rank, nranks;

static ncclResult_t run_case(ncclComm_t c, enum kind kind, size_t bytes, void *send, void *recv)
{
    bool odd = rank == nranks - 1;
    size_t n = bytes / 4;
    switch (kind) {
    case COUNT:
        return ncclAllReduce(send, recv, odd ? n / 2 : n, ncclFloat, ncclSum, c, NULL);
    case DTYPE:
        return ncclAllReduce(send, recv, n, odd ? ncclInt32 : ncclFloat, ncclSum, c, NULL);
    case OP:
        return ncclAllReduce(send, recv, n, ncclFloat, odd ? ncclMax : ncclSum, c, NULL);
    case ROOT:
        return ncclBroadcast(send, recv, n, ncclFloat, odd ? 1 : 0, c, NULL);
    case ZERO:
        return ncclAllReduce(send, recv, odd ? 0 : n, ncclFloat, ncclSum, c, NULL);
    default:
        if (odd) return ncclReduce(send, recv, n, ncclFloat, ncclSum, 0, c, NULL);
        return ncclAllReduce(send, recv, n, ncclFloat, ncclSum, c, NULL);
    }
}

int main(int argc, char **argv)
{
    size_t max_bytes = 64u << 20;
    const char *kinds = "count,dtype,op,root,coll,zero";
    const char *skip = ""; /* "root@67108864,...": cases left out */
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--max-bytes") == 0) max_bytes = strtoull(argv[i + 1], NULL, 0);
        if (strcmp(argv[i], "--kinds") == 0) kinds = argv[i + 1];
        if (strcmp(argv[i], "--skip") == 0) skip = argv[i + 1];
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    ncclComm_t world = world_open("fault_mismatch", &rank, &nranks);
    if (world == NULL) return 1;
    const size_t sizes[] = {8, 1u << 20, 64u << 20};
    float *send = calloc(max_bytes / 4 + 2, 4), *recv = calloc(max_bytes / 4 + 2, 4);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        if (sizes[s] > max_bytes) continue;
        for (int k = 0; k < NKINDS; k++) {
            if (strstr(kinds, kind_names[k]) == NULL || (k == ROOT && nranks < 2)) continue;
            char case_name[48];
            snprintf(case_name, sizeof case_name, "%s@%zu", kind_names[k], sizes[s]);
            if (strstr(skip, case_name) != NULL) continue;
            ncclComm_t c = NULL;
            if (ncclCommSplit(world, 0, rank, &c, NULL) != ncclSuccess) {
                fprintf(stderr, "rank %d: split: %s\n", rank, ncclGetLastError(NULL));
                return 1;
            }
            char where[64];
            snprintf(where, sizeof where, "%s mismatch at %zu bytes", kind_names[k], sizes[s]);
            check_where = where;
            bool ok = CHECK_RES(run_case(c, (enum kind)k, sizes[s], send, recv), ncclInvalidUsage);
            if (ok)
                printf("rank %d: %s mismatch at %zu bytes: ncclInvalidUsage: %s\n", rank,
                       kind_names[k], sizes[s], ncclGetLastError(c));
            /* Every rank has returned from the case before any aborts: an abort closes its
             * sockets, and a peer still reading would lose the frames that tell it the
             * mismatch (the failing rank only half-closes them). */
            int64_t one = 1, sum = 0;
            if (ncclAllReduce(&one, &sum, 1, ncclInt64, ncclSum, world, NULL) != ncclSuccess ||
                sum != nranks) {
                fprintf(stderr, "rank %d: the world communicator failed after a case\n", rank);
                return 1;
            }
            ncclCommAbort(c);
        }
    }
    check_where = NULL;
    free(send);
    free(recv);
    ncclCommDestroy(world);
    printf("rank %d: %d failures\n", rank, (int)check_failures);
    return check_failures ? 1 : 0;
}
