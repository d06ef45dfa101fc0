/* Helpers shared by the API tests that run as every rank of a 4-rank job under tutti-run
 * (api_lifecycle.c, api_memory.c): the world communicator and a checked AllReduce. The checks
 * themselves are tests/check.h's. */
#ifndef TUTTI_TESTS_API_CHECKS_H
#define TUTTI_TESTS_API_CHECKS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nccl.h"
#include "tutti.h"

#include "world.h"

#define NRANKS 4
#define COUNT 7

static int world_rank = -1;

/* The data each world rank contributes to the AllReduce checks: element i of world rank r. */
static inline int32_t input_of(int r, int i) { return (r + 1) * 1000 + i; }

/* Fills v[0..count) with this rank's input, runs an in-place int32 sum AllReduce over it and
 * checks every element against the sum computed here. */
static inline void allreduce_checked(ncclComm_t world, int32_t *v, size_t count, const char *what)
{
    for (size_t i = 0; i < count; i++) v[i] = input_of(world_rank, (int)(i % 100000));
    CHECK_RES(ncclAllReduce(v, v, count, ncclInt32, ncclSum, world, NULL), ncclSuccess);
    for (size_t i = 0; i < count; i++) {
        int32_t want = 0;
        for (int r = 0; r < NRANKS; r++) want += input_of(r, (int)(i % 100000));
        if (v[i] != want) {
            FAIL("AllReduce on %s: element %zu = %d, want %d", what, i, v[i], want);
            return;
        }
    }
}

/* The job's world communicator (world.h's world_open), with world_rank set. NULL when there is
 * none to test: *exit_code is then 1 (init failed) or 77 (not NRANKS ranks: skipped). */
static inline ncclComm_t api_world(const char *prog, int *exit_code)
{
    int nranks = 0;
    ncclComm_t world = world_open(prog, &world_rank, &nranks);
    if (world == NULL) {
        *exit_code = 1;
        return NULL;
    }
    if (nranks != NRANKS) {
        printf("%s: skipped: needs %d ranks (tutti-run -n %d), got %d\n", prog, NRANKS, NRANKS,
               nranks);
        ncclCommDestroy(world);
        *exit_code = 77;
        return NULL;
    }
    return world;
}

#endif
