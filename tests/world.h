/* What the tests that run as every rank under tutti-run share: the job's world communicator,
 * and a driver that runs named test functions one after the other, printing PASS or FAIL for
 * each with the rank and the time it took. Failures are tests/check.h's. */
#ifndef TUTTI_TESTS_WORLD_H
#define TUTTI_TESTS_WORLD_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "nccl.h"
#include "tutti.h"

#include "check.h"

/* The world's size, for the driver's lines (check_rank holds the rank). */
static int world_nranks;

/* The job's world communicator (tuttiCommInitFromEnv), its rank and size in *rank_out and
 * *nranks_out, and check_rank set to the rank. NULL, after saying why on stderr, when there is none. */
static inline ncclComm_t world_open(const char *prog, int *rank_out, int *nranks_out)
{
    ncclComm_t world = NULL;
    ncclResult_t res = tuttiCommInitFromEnv(&world);
    if (res != ncclSuccess) {
        fprintf(stderr, "%s: tuttiCommInitFromEnv: %s (%s)\n", prog, ncclGetErrorString(res),
                ncclGetLastError(NULL));
        return NULL;
    }
    ncclCommUserRank(world, rank_out);
    ncclCommCount(world, nranks_out);
    check_rank = *rank_out;
    world_nranks = *nranks_out;
    return world;
}

struct world_test {
    const char *name;
    void (*run)(void);
    bool only_when_named; /* not run by default */
};

static inline double world_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs the tests named in argv[first..argc), or when none is named every test but those run
 * only when named; `after`, when not NULL, runs after each test (a barrier). Returns the number
 * of tests that failed, or -1 (having listed the tests) when the names matched none. */
static inline int world_run_tests(const struct world_test *tests, size_t ntests, int argc,
                                  char **argv, int first, void (*after)(void))
{
    int failed = 0, run = 0;
    for (size_t t = 0; t < ntests; t++) {
        bool chosen = first >= argc && !tests[t].only_when_named;
        for (int i = first; i < argc && !chosen; i++) chosen = strcmp(argv[i], tests[t].name) == 0;
        if (!chosen) continue;
        int before = check_failures;
        double t0 = world_now_s();
        tests[t].run();
        if (after != NULL) after();
        bool ok = check_failures == before;
        failed += !ok;
        run++;
        printf("%s %s (rank %d of %d, %.2f s)\n", ok ? "PASS" : "FAIL", tests[t].name, check_rank,
               world_nranks, world_now_s() - t0);
    }
    if (run == 0) {
        fprintf(stderr, "no test matched; the tests are:");
        for (size_t t = 0; t < ntests; t++) fprintf(stderr, " %s", tests[t].name);
        fputc('\n', stderr);
        return -1;
    }
    return failed;
}

#endif
