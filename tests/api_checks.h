/* Checks shared by the API tests that run as every rank of a 4-rank job under tutti-run
 * (api_lifecycle.c, api_memory.c): each failed check prints file, line, rank, got and want, and
 * counts in `failures`. */
#ifndef TUTTI_TESTS_API_CHECKS_H
#define TUTTI_TESTS_API_CHECKS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nccl.h"

#define NRANKS 4
#define COUNT 7

static int failures;
static int world_rank = -1;

#define FAIL(...)                                                                               \
    do {                                                                                        \
        failures++;                                                                             \
        fprintf(stderr, "%s:%d: rank %d: ", __FILE__, __LINE__, world_rank);                   \
        fprintf(stderr, __VA_ARGS__);                                                           \
        fputc('\n', stderr);                                                                    \
    } while (0)

/* Checks a call's result, and, when `needle` is not NULL, that ncclGetLastError mentions it. */
#define CHECK_RES(expr, want, needle) check_res(__FILE__, __LINE__, #expr, (expr), (want), (needle))

static inline void check_res(const char *file, int line, const char *text, ncclResult_t got,
                             ncclResult_t want, const char *needle)
{
    if (got != want) {
        failures++;
        fprintf(stderr,
                "%s:%d: rank %d: %s\n    got %d (%s), want %d (%s); last error: \"%s\"\n",
                file, line, world_rank, text, (int)got, ncclGetErrorString(got), (int)want,
                ncclGetErrorString(want), ncclGetLastError(NULL));
        return;
    }
    if (needle == NULL) return;
    const char *last = ncclGetLastError(NULL);
    if (last == NULL || strstr(last, needle) == NULL)
        FAIL("%s\n    last error \"%s\" does not mention \"%s\"", text, last ? last : "(NULL)",
             needle);
}

#define CHECK_INT(what, got, want)                                                              \
    do {                                                                                        \
        long long got_ = (long long)(got), want_ = (long long)(want);                           \
        if (got_ != want_) FAIL("%s: %s = %lld, want %lld", what, #got, got_, want_);          \
    } while (0)

/* The data each world rank contributes to the AllReduce checks: element i of world rank r. */
static inline int32_t input_of(int r, int i) { return (r + 1) * 1000 + i; }

#endif
