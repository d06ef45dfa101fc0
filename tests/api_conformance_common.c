/* The shared state and helpers of the API conformance test (see api_conformance_common.h). */
#include "api_conformance_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WAIT_S 60.0

int rank, nranks;
ncclComm_t comm;
/* tests/check.h's state, shared by the test's files (CHECK_EXTERN): the driver clears the
 * counter before each test. */
atomic_int check_failures;
int check_rank = -1;
const char *check_where;

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void *xcalloc(size_t count, size_t bytes)
{
    void *p = calloc(count == 0 ? 1 : count, bytes);
    if (p == NULL) {
        fprintf(stderr, "rank %d: out of memory (%zu x %zu bytes)\n", rank, count, bytes);
        exit(1);
    }
    return p;
}

int64_t *alloc_i64(size_t count, int64_t fill)
{
    int64_t *p = xcalloc(count, sizeof *p);
    for (size_t i = 0; i < count; i++) p[i] = fill;
    return p;
}

int64_t val(int r, size_t i)
{
    return (int64_t)r * 1000003 + (int64_t)i * 7 + 1;
}

int64_t pair_val(int src, int dst, size_t i)
{
    return (int64_t)src * 100000000 + (int64_t)dst * 1000000 + (int64_t)i;
}

void check_i64(const char *what, const int64_t *got, const int64_t *want, size_t count)
{
    int shown = 0;
    for (size_t i = 0; i < count; i++) {
        if (got[i] == want[i]) continue;
        if (shown++ < 3)
            FAIL("%s: index %zu: got %lld, want %lld", what, i, (long long)got[i],
                 (long long)want[i]);
    }
    if (shown > 3) FAIL("%s: %d mismatched elements in all", what, shown);
}

void check_all_equal(const char *what, const int64_t *got, int64_t want, size_t count)
{
    int shown = 0;
    for (size_t i = 0; i < count; i++) {
        if (got[i] == want) continue;
        if (shown++ < 3)
            FAIL("%s: index %zu: got %lld, want %lld", what, i, (long long)got[i],
                 (long long)want);
    }
}

void barrier(ncclComm_t c)
{
    int64_t one = 1, sum = 0;
    if (CHECK_RES(ncclAllReduce(&one, &sum, 1, ncclInt64, ncclSum, c, NULL), ncclSuccess))
        CHECK(sum == nranks, "barrier: sum %lld, want %d", (long long)sum, nranks);
}

ncclResult_t wait_comm(ncclComm_t c)
{
    double deadline = now_s() + WAIT_S;
    ncclResult_t state = ncclInProgress;
    while (now_s() < deadline) {
        ncclResult_t res = ncclCommGetAsyncError(c, &state);
        if (res != ncclSuccess) return res;
        if (state != ncclInProgress) return state;
        usleep(200);
    }
    return state;
}

/* Every rank has left the previous rendezvous before the next starts (the barrier), since under
 * tutti-run every rank derives the same id from NCCL_COMM_ID. */
ncclComm_t make_comm(ncclConfig_t *config)
{
    barrier(comm);
    ncclUniqueId id;
    ncclComm_t c = NULL;
    if (!CHECK_RES(ncclGetUniqueId(&id), ncclSuccess)) return NULL;
    ncclResult_t res = ncclCommInitRankConfig(&c, nranks, id, rank, config);
    if (res == ncclInProgress) res = wait_comm(c);
    if (!CHECK_RES(res, ncclSuccess)) return NULL;
    return c;
}
