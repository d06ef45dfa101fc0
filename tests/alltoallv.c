/* tuttiAlltoAllV (include/tutti.h) through the public API, run as every rank
 * under tutti-run:
 *
 *   uneven   rank r sends (r + p) % 4 * k + s elements to rank p, for counts k
 * of 1, 7, and a few FIFO slots' worth, with gaps between the blocks of both
 * buffers that must stay untouched; every element received is compared with the
 * value its sender computed from (sender, receiver, index). Datatypes int8,
 * int32, float64. stream   the same on a host stream, then
 * tuttiStreamSynchronize. group    two AlltoAllVs inside one
 * ncclGroupStart/End. args     NULL arrays, a NULL buffer with a nonzero count,
 * a bad datatype, a NULL communicator and overlapping buffers are
 * ncclInvalidArgument, and issue nothing (a correct call follows).
 *
 * `alltoallv [NAME...]` runs the named tests, by default all. Exit 1 when any
 * check failed. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "tutti.h"

#include "world.h"

static int rank, nranks;
static ncclComm_t comm;

#define GAP 3 /* elements left between two blocks, that must stay untouched */

/* The value element i of the block `from` sends `to` carries (exact in every
 * datatype used). */
static int value(int from, int to, size_t i) {
  return (int)((from * 31 + to * 7 + i) % 101) - 50;
}

static size_t count_for(int from, int to, size_t k) {
  return (size_t)((from + to) % 4) * k + 1;
}

static void put(void *buf, ncclDataType_t dt, size_t i, int v) {
  if (dt == ncclInt8)
    ((int8_t *)buf)[i] = (int8_t)v;
  else if (dt == ncclInt32)
    ((int32_t *)buf)[i] = v;
  else
    ((double *)buf)[i] = v;
}

static int get(const void *buf, ncclDataType_t dt, size_t i) {
  if (dt == ncclInt8)
    return ((const int8_t *)buf)[i];
  if (dt == ncclInt32)
    return ((const int32_t *)buf)[i];
  return (int)((const double *)buf)[i];
}

static size_t dt_bytes(ncclDataType_t dt) {
  return dt == ncclInt8 ? 1 : dt == ncclInt32 ? 4 : 8;
}

struct plan {
  size_t sc[64], sd[64], rc[64], rd[64], send_total, recv_total;
  void *send, *recv;
};

/* Blocks laid out in reverse peer order with gaps, so displacements are not the
 * counts' sums. */
static bool plan_make(struct plan *pl, size_t k, ncclDataType_t dt) {
  size_t so = GAP, ro = GAP;
  for (int p = nranks - 1; p >= 0; p--) {
    pl->sc[p] = count_for(rank, p, k);
    pl->rc[p] = count_for(p, rank, k);
    pl->sd[p] = so;
    pl->rd[p] = ro;
    so += pl->sc[p] + GAP;
    ro += pl->rc[p] + GAP;
  }
  pl->send_total = so;
  pl->recv_total = ro;
  pl->send = malloc(so * dt_bytes(dt));
  pl->recv = malloc(ro * dt_bytes(dt));
  if (pl->send == NULL || pl->recv == NULL)
    return false;
  for (size_t i = 0; i < so; i++)
    put(pl->send, dt, i, 77);
  for (size_t i = 0; i < ro; i++)
    put(pl->recv, dt, i, -77);
  for (int p = 0; p < nranks; p++)
    for (size_t i = 0; i < pl->sc[p]; i++)
      put(pl->send, dt, pl->sd[p] + i, value(rank, p, i));
  return true;
}

static void plan_check(const char *what, struct plan *pl, ncclDataType_t dt) {
  int bad = 0;
  char *inside = calloc(pl->recv_total, 1);
  for (int p = 0; p < nranks && bad < 5; p++) {
    for (size_t i = 0; i < pl->rc[p] && bad < 5; i++) {
      inside[pl->rd[p] + i] = 1;
      int got = get(pl->recv, dt, pl->rd[p] + i), want = value(p, rank, i);
      if (got != want) {
        FAIL("%s: from rank %d element %zu is %d, want %d", what, p, i, got,
             want);
        bad++;
      }
    }
  }
  for (size_t i = 0; i < pl->recv_total && bad < 5; i++) {
    if (!inside[i] && get(pl->recv, dt, i) != -77) {
      FAIL("%s: element %zu outside every block was written", what, i);
      bad++;
    }
  }
  free(inside);
}

static void plan_free(struct plan *pl) {
  free(pl->send);
  free(pl->recv);
}

static ncclResult_t run(struct plan *pl, ncclDataType_t dt, cudaStream_t s) {
  return tuttiAlltoAllV(pl->send, pl->sc, pl->sd, pl->recv, pl->rc, pl->rd, dt,
                        comm, s);
}

static void test_uneven(void) {
  const ncclDataType_t dts[] = {ncclInt8, ncclInt32, ncclFloat64};
  const size_t ks[] = {1, 7, 300000};
  for (size_t d = 0; d < 3; d++) {
    for (size_t j = 0; j < 3; j++) {
      struct plan pl;
      if (!plan_make(&pl, ks[j], dts[d])) {
        FAIL("out of memory");
        return;
      }
      char what[64];
      snprintf(what, sizeof what, "dtype %d k %zu", (int)dts[d], ks[j]);
      if (CHECK_RES(run(&pl, dts[d], NULL), ncclSuccess))
        plan_check(what, &pl, dts[d]);
      plan_free(&pl);
    }
  }
}

static void test_stream(void) {
  cudaStream_t s = NULL;
  if (!CHECK_RES(tuttiStreamCreate(&s), ncclSuccess))
    return;
  struct plan pl = {0};
  if (plan_make(&pl, 1000, ncclInt32)) {
    CHECK_RES(run(&pl, ncclInt32, s), ncclSuccess);
    if (CHECK_RES(tuttiStreamSynchronize(s), ncclSuccess))
      plan_check("stream", &pl, ncclInt32);
  }
  plan_free(&pl);
  CHECK_RES(tuttiStreamDestroy(s), ncclSuccess);
}

static void test_group(void) {
  struct plan a = {0}, b = {0};
  bool ok = plan_make(&a, 5, ncclInt32) && plan_make(&b, 9, ncclFloat64);
  if (ok) {
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(run(&a, ncclInt32, NULL), ncclSuccess);
    CHECK_RES(run(&b, ncclFloat64, NULL), ncclSuccess);
    if (CHECK_RES(ncclGroupEnd(), ncclSuccess)) {
      plan_check("group, first", &a, ncclInt32);
      plan_check("group, second", &b, ncclFloat64);
    }
  }
  plan_free(&a);
  plan_free(&b);
}

static void test_args(void) {
  struct plan pl = {0};
  if (!plan_make(&pl, 3, ncclInt32))
    return;
  CHECK_RES(tuttiAlltoAllV(pl.send, NULL, pl.sd, pl.recv, pl.rc, pl.rd,
                           ncclInt32, comm, NULL),
            ncclInvalidArgument);
  CHECK_RES(tuttiAlltoAllV(pl.send, pl.sc, pl.sd, pl.recv, pl.rc, NULL,
                           ncclInt32, comm, NULL),
            ncclInvalidArgument);
  if (strstr(ncclGetLastError(comm), "rdispls") == NULL)
    FAIL("the message does not name rdispls: %s", ncclGetLastError(comm));
  CHECK_RES(tuttiAlltoAllV(NULL, pl.sc, pl.sd, pl.recv, pl.rc, pl.rd, ncclInt32,
                           comm, NULL),
            ncclInvalidArgument);
  CHECK_RES(tuttiAlltoAllV(pl.send, pl.sc, pl.sd, pl.recv, pl.rc, pl.rd,
                           (ncclDataType_t)99, comm, NULL),
            ncclInvalidArgument);
  CHECK_RES(tuttiAlltoAllV(pl.send, pl.sc, pl.sd, pl.recv, pl.rc, pl.rd,
                           ncclInt32, NULL, NULL),
            ncclInvalidArgument);
  size_t huge[64];
  for (int p = 0; p < nranks; p++)
    huge[p] = SIZE_MAX / 2;
  CHECK_RES(tuttiAlltoAllV(pl.send, pl.sc, huge, pl.recv, pl.rc, pl.rd,
                           ncclInt32, comm, NULL),
            ncclInvalidArgument);
  /* In place, or any overlap of the two buffers' blocks: refused as ncclAlltoAll
   * refuses it (a block one peer reads while another writes it). */
  if (nranks > 1) {
    CHECK_RES(tuttiAlltoAllV(pl.recv, pl.rc, pl.rd, pl.recv, pl.rc, pl.rd,
                             ncclInt32, comm, NULL),
              ncclInvalidArgument);
    if (strstr(ncclGetLastError(comm), "overlap") == NULL)
      FAIL("the message does not say overlap: %s", ncclGetLastError(comm));
  }
  /* Nothing was issued: a correct call still matches the peers' and is right.
   */
  if (CHECK_RES(run(&pl, ncclInt32, NULL), ncclSuccess))
    plan_check("after errors", &pl, ncclInt32);
  plan_free(&pl);
}

static void barrier(void) {
  int one = 1;
  ncclAllReduce(&one, &one, 1, ncclInt32, ncclSum, comm, NULL);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  comm = world_open("alltoallv", &rank, &nranks);
  if (comm == NULL)
    return 1;
  if (nranks > 64) {
    printf("skipped: more than 64 ranks\n");
    return 77;
  }
  static const struct world_test tests[] = {
      {"uneven", test_uneven, false},
      {"stream", test_stream, false},
      {"group", test_group, false},
      {"args", test_args, false},
  };
  int failed = world_run_tests(tests, sizeof tests / sizeof tests[0], argc,
                               argv, 1, barrier);
  ncclCommDestroy(comm);
  return failed == 0 ? 0 : failed < 0 ? 2 : 1;
}
