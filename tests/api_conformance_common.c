/* The shared state, checks and helpers of the API conformance test (see api_conformance_common.h).
 * Messages name the file and line of the failed check, never a path, so that they read the same
 * from any build directory. */
#include "api_conformance_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WAIT_S 60.0

int rank, nranks;
ncclComm_t comm;
int test_failures;

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

void conformance_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    test_failures++;
    fprintf(stderr, "%s:%d: rank %d: ", base_name(file), line, rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

bool conformance_expect(const char *file, int line, const char *text, ncclResult_t got,
                        ncclResult_t want)
{
    if (got == want) return true;
    test_failures++;
    fprintf(stderr, "%s:%d: rank %d: %s\n    got %d (%s), want %d (%s); last error: %s\n",
            base_name(file), line, rank, text, (int)got, ncclGetErrorString(got), (int)want,
            ncclGetErrorString(want), ncclGetLastError(NULL));
    return false;
}

bool conformance_expect_error(const char *file, int line, const char *text, ncclResult_t got)
{
    if (got != ncclSuccess && got != ncclInProgress) return true;
    test_failures++;
    fprintf(stderr, "%s:%d: rank %d: %s\n    got %d (%s), want an error\n", base_name(file), line,
            rank, text, (int)got, ncclGetErrorString(got));
    return false;
}

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
    if (EXPECT(ncclAllReduce(&one, &sum, 1, ncclInt64, ncclSum, c, NULL), ncclSuccess))
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
    if (!EXPECT(ncclGetUniqueId(&id), ncclSuccess)) return NULL;
    ncclResult_t res = ncclCommInitRankConfig(&c, nranks, id, rank, config);
    if (res == ncclInProgress) res = wait_comm(c);
    if (!EXPECT(res, ncclSuccess)) return NULL;
    return c;
}
