/* Shared state, checks and helpers of the API conformance test, whose tests are spread over
 * api_conformance.c (the driver and the communicator tests), api_conformance_colls.c (the
 * collectives' contracts) and api_conformance_groups.c (point to point and groups). A failed check
 * counts against the test that is running and prints file:line, the rank, and got and want. Every
 * value helper is exact in int64, so results compare with ==. */
#ifndef TUTTI_TESTS_API_CONFORMANCE_COMMON_H
#define TUTTI_TESTS_API_CONFORMANCE_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

/* The checks are tests/check.h's, their state shared by the test's files. */
#define CHECK_EXTERN
#include "check.h"

#define SENTINEL INT64_C(-777)

/* This process's rank and the number of ranks, in `comm`, the communicator of every rank that
 * the driver creates before the first test. */
extern int rank, nranks;
extern ncclComm_t comm;
/* Seconds on the monotonic clock. */
double now_s(void);
/* calloc that exits on failure, and never asks for 0 elements. */
void *xcalloc(size_t count, size_t bytes);
/* `count` int64 elements, each set to `fill`. */
int64_t *alloc_i64(size_t count, int64_t fill);

/* A distinct value for element `i` of rank `r`'s data. */
int64_t val(int r, size_t i);
/* The value rank `src` sends to rank `dst` at index `i` (AlltoAll, point to point). */
int64_t pair_val(int src, int dst, size_t i);

/* Compares `count` elements; prints the first three mismatches with rank, index, got, want. */
void check_i64(const char *what, const int64_t *got, const int64_t *want, size_t count);
/* The same against one value for every element. */
void check_all_equal(const char *what, const int64_t *got, int64_t want, size_t count);

/* Every rank waits for every other on `c` (an AllReduce of one element). */
void barrier(ncclComm_t c);
/* Polls ncclCommGetAsyncError until the communicator's pending work has finished; returns its
 * final state (ncclInProgress only after a minute). */
ncclResult_t wait_comm(ncclComm_t c);
/* A fresh communicator of all ranks, through ncclGetUniqueId and ncclCommInitRankConfig; NULL,
 * with the failure counted, when that fails. */
ncclComm_t make_comm(ncclConfig_t *config);

/* The tests of api_conformance_colls.c. */
void test_allgather_in_place(void);
void test_reducescatter_in_place(void);
void test_reduce_root_only(void);
void test_avg(void);
void test_fp_mode(void);
void test_broadcast_every_root(void);
void test_alltoall(void);
void test_gather_every_root(void);
void test_scatter_every_root(void);
void test_movement_dtypes(void);
void test_count_zero(void);

/* The tests of api_conformance_groups.c. */
void test_sendrecv_ring(void);
void test_sendrecv_all_pairs(void);
void test_send_to_self(void);
void test_group_errors(void);
void test_nested_groups(void);
void test_multi_comm_group(void);
void test_multi_stream_group(void);
void test_mixed_group(void);
void test_aggregated_group(void);
void test_uneven_grouping(void);
void test_thread_groups(void);
void test_sendrecv_bidirectional(void);
void test_simulate_end(void);

#endif
