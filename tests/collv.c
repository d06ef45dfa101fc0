/* tuttiAllGatherV and tuttiReduceScatterV (include/tutti.h) through the public
 * API, run as every rank under tutti-run. Rank p's block has count(p) elements:
 * (p + 1) * k, but none for every third rank (p % 3 == 2), so that empty blocks
 * are covered from 3 ranks up; blocks lie in reverse rank order with gaps that
 * must stay untouched. The data and the expected bits are tests/harness.c's,
 * computed without the library: a block is the first count(p) elements of block
 * p of the equal-block AllGather or ReduceScatter with count max(count), whose
 * inputs make every partial reduction exact.
 *
 *   allgatherv      every datatype at k 3; int8, float32 and float64 at k 1,
 *                   700 and 100000 (many pipeline chunks)
 *   reducescatterv  every datatype x every operator at k 3; float32 sum, int32
 *                   max and bfloat16 avg at k 100000
 *   inplace         both, in place (sendbuff = recvbuff + displs[rank], and
 *                   recvbuff = sendbuff + displs[rank])
 *   stream          both on a host stream, then tuttiStreamSynchronize
 *   group           both inside one ncclGroupStart/End, with an AllReduce
 *   premulsum       ReduceScatterV with ncclRedOpCreatePreMulSum(2.0), float64
 *   args            NULL counts or displs, a NULL buffer with a nonzero count,
 *                   an overflowing displacement, a bad datatype, operator or
 *                   communicator: ncclInvalidArgument, nothing issued (a correct
 *                   call follows); inside a group, the whole group fails
 *   mismatch        (only when named) rank 0 alone thinks rank 1's block is one
 *                   element longer: ncclInvalidUsage there, an error on every
 *                   rank, on a communicator split off for it
 *
 * `collv [NAME...]` runs the named tests, by default all but mismatch. Exit 1
 * when any check failed. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "tutti.h"

#include "harness.h"
#include "world.h"

static int rank, nranks;
static ncclComm_t comm;

#define GAP 2      /* elements between two blocks, that must stay untouched */
#define SENTINEL 0xA5

struct layout {
  size_t counts[64], displs[64], max, total;
};

static void layout_make(struct layout *l, size_t k) {
  size_t off = GAP;
  l->max = 0;
  for (int p = nranks - 1; p >= 0; p--) {
    l->counts[p] = p % 3 == 2 ? 0 : (size_t)(p + 1) * k;
    l->displs[p] = off;
    off += l->counts[p] + GAP;
    if (l->counts[p] > l->max)
      l->max = l->counts[p];
  }
  l->total = off;
}

/* A buffer of n elements of `t`, every byte SENTINEL. */
static void *sentinel_buf(const struct th_dtype *t, size_t n) {
  void *b = malloc(n * t->bytes + 1);
  if (b != NULL)
    memset(b, SENTINEL, n * t->bytes);
  return b;
}

/* Compares n elements of got with want; elements outside every block (mask 0)
 * must still hold SENTINEL bytes. */
static void compare(const char *what, const struct th_dtype *t, const void *got,
                    const void *want, size_t n) {
  int shown = 0;
  for (size_t i = 0; i < n * t->bytes && shown < 3; i++) {
    unsigned char g = ((const unsigned char *)got)[i];
    unsigned char w = ((const unsigned char *)want)[i];
    if (g != w) {
      FAIL("%s: byte %zu (element %zu) is 0x%02x, want 0x%02x", what, i,
           i / t->bytes, g, w);
      shown++;
    }
  }
}

struct plan {
  struct layout l;
  struct th_case c; /* the equal-block collective the data comes from */
  void *send, *recv, *want;
  size_t send_n, recv_n;
};

static void plan_free(struct plan *pl) {
  free(pl->send);
  free(pl->recv);
  free(pl->want);
}

/* AllGatherV: this rank's sendbuff is the first counts[rank] elements of its
 * AllGather input; block p of the result the first counts[p] of block p of the
 * AllGather's. With inplace, sendbuff is recvbuff's own block. */
static bool plan_allgatherv(struct plan *pl, const struct th_dtype *t, size_t k,
                            bool inplace) {
  memset(pl, 0, sizeof *pl);
  layout_make(&pl->l, k);
  size_t m = pl->l.max;
  pl->c = (struct th_case){.coll = TH_ALLGATHER, .type = t, .op = ncclSum,
                           .count = m, .rank = rank, .nranks = nranks,
                           .seed = 7 + k};
  void *full_send = malloc(m * t->bytes + 1);
  void *full_want = malloc(m * (size_t)nranks * t->bytes + 1);
  pl->recv_n = pl->l.total;
  pl->send_n = pl->l.counts[rank];
  pl->send = sentinel_buf(t, pl->send_n);
  pl->recv = sentinel_buf(t, pl->recv_n);
  pl->want = sentinel_buf(t, pl->recv_n);
  bool ok = full_send && full_want && pl->send && pl->recv && pl->want;
  if (ok) {
    th_fill_send(&pl->c, full_send);
    th_fill_expect(&pl->c, full_want, 0, m * (size_t)nranks);
    char *own = inplace ? (char *)pl->recv + pl->l.displs[rank] * t->bytes
                        : (char *)pl->send;
    memcpy(own, full_send, pl->send_n * t->bytes);
    for (int p = 0; p < nranks; p++)
      memcpy((char *)pl->want + pl->l.displs[p] * t->bytes,
             (char *)full_want + (size_t)p * m * t->bytes,
             pl->l.counts[p] * t->bytes);
  }
  free(full_send);
  free(full_want);
  if (!ok)
    FAIL("out of memory");
  return ok;
}

/* ReduceScatterV: block p of sendbuff is the first counts[p] elements of block
 * p of the ReduceScatter input; this rank's result the first counts[rank] of
 * its ReduceScatter result. With inplace, recvbuff is sendbuff's own block. */
static bool plan_reducescatterv(struct plan *pl, const struct th_dtype *t,
                                ncclRedOp_t op, size_t k, bool inplace) {
  memset(pl, 0, sizeof *pl);
  layout_make(&pl->l, k);
  size_t m = pl->l.max;
  pl->c = (struct th_case){.coll = TH_REDUCESCATTER, .type = t, .op = op,
                           .count = m, .rank = rank, .nranks = nranks,
                           .seed = 11 + k + (size_t)op};
  void *full_send = malloc(m * (size_t)nranks * t->bytes + 1);
  void *full_want = malloc(m * t->bytes + 1);
  pl->send_n = pl->l.total;
  pl->recv_n = inplace ? pl->l.total : pl->l.counts[rank];
  pl->send = sentinel_buf(t, pl->send_n);
  pl->recv = inplace ? NULL : sentinel_buf(t, pl->recv_n);
  pl->want = sentinel_buf(t, pl->recv_n);
  bool ok = full_send && full_want && pl->send && (inplace || pl->recv) &&
            pl->want;
  if (ok) {
    th_fill_send(&pl->c, full_send);
    th_fill_expect(&pl->c, full_want, 0, m);
    for (int p = 0; p < nranks; p++)
      memcpy((char *)pl->send + pl->l.displs[p] * t->bytes,
             (char *)full_send + (size_t)p * m * t->bytes,
             pl->l.counts[p] * t->bytes);
    size_t at = 0;
    if (inplace) {
      /* The whole sendbuff is checked: every other block stays as it was. */
      memcpy(pl->want, pl->send, pl->send_n * t->bytes);
      at = pl->l.displs[rank];
    }
    memcpy((char *)pl->want + at * t->bytes, full_want,
           pl->l.counts[rank] * t->bytes);
  }
  free(full_send);
  free(full_want);
  if (!ok)
    FAIL("out of memory");
  return ok;
}

static ncclResult_t run_agv(struct plan *pl, bool inplace, cudaStream_t s) {
  const void *send = inplace ? (char *)pl->recv +
                                   pl->l.displs[rank] * pl->c.type->bytes
                             : pl->send;
  return tuttiAllGatherV(send, pl->recv, pl->l.counts, pl->l.displs,
                         pl->c.type->dtype, comm, s);
}

static ncclResult_t run_rsv(struct plan *pl, ncclRedOp_t op, bool inplace,
                            cudaStream_t s) {
  void *recv = inplace ? (char *)pl->send +
                             pl->l.displs[rank] * pl->c.type->bytes
                       : pl->recv;
  return tuttiReduceScatterV(pl->send, recv, pl->l.counts, pl->l.displs,
                             pl->c.type->dtype, op, comm, s);
}

static void check_agv(const char *what, struct plan *pl) {
  compare(what, pl->c.type, pl->recv, pl->want, pl->recv_n);
}

static void check_rsv(const char *what, struct plan *pl, bool inplace) {
  compare(what, pl->c.type, inplace ? pl->send : pl->recv, pl->want,
          pl->recv_n);
}

static void agv_case(const struct th_dtype *t, size_t k, bool inplace) {
  struct plan pl;
  if (!plan_allgatherv(&pl, t, k, inplace)) {
    plan_free(&pl);
    return;
  }
  char what[96];
  snprintf(what, sizeof what, "AllGatherV %s k %zu%s", t->name, k,
           inplace ? " in place" : "");
  if (CHECK_RES(run_agv(&pl, inplace, NULL), ncclSuccess))
    check_agv(what, &pl);
  plan_free(&pl);
}

static void rsv_case(const struct th_dtype *t, ncclRedOp_t op, size_t k,
                     bool inplace) {
  struct plan pl;
  if (!plan_reducescatterv(&pl, t, op, k, inplace)) {
    plan_free(&pl);
    return;
  }
  char what[96];
  snprintf(what, sizeof what, "ReduceScatterV %s %s k %zu%s", t->name,
           th_op_name(op), k, inplace ? " in place" : "");
  if (CHECK_RES(run_rsv(&pl, op, inplace, NULL), ncclSuccess))
    check_rsv(what, &pl, inplace);
  plan_free(&pl);
}

static void test_allgatherv(void) {
  for (int d = 0; d < TH_NUM_DTYPES; d++)
    agv_case(&th_dtypes[d], 3, false);
  const ncclDataType_t big[] = {ncclInt8, ncclFloat32, ncclFloat64};
  const size_t ks[] = {1, 700, 100000};
  for (size_t d = 0; d < 3; d++)
    for (size_t j = 0; j < 3; j++)
      agv_case(th_dtype_find(big[d]), ks[j], false);
}

static void test_reducescatterv(void) {
  for (int d = 0; d < TH_NUM_DTYPES; d++)
    for (int op = 0; op < TH_NUM_OPS; op++)
      rsv_case(&th_dtypes[d], (ncclRedOp_t)op, 3, false);
  rsv_case(th_dtype_find(ncclFloat32), ncclSum, 100000, false);
  rsv_case(th_dtype_find(ncclInt32), ncclMax, 100000, false);
  rsv_case(th_dtype_find(ncclBfloat16), ncclAvg, 100000, false);
}

static void test_inplace(void) {
  agv_case(th_dtype_find(ncclInt32), 5, true);
  agv_case(th_dtype_find(ncclFloat64), 100000, true);
  rsv_case(th_dtype_find(ncclInt32), ncclSum, 5, true);
  rsv_case(th_dtype_find(ncclFloat32), ncclMin, 100000, true);
}

static void test_stream(void) {
  cudaStream_t s = NULL;
  if (!CHECK_RES(tuttiStreamCreate(&s), ncclSuccess))
    return;
  struct plan a, b;
  bool ok = plan_allgatherv(&a, th_dtype_find(ncclInt32), 1000, false);
  ok = plan_reducescatterv(&b, th_dtype_find(ncclFloat32), ncclSum, 1000,
                           false) && ok;
  if (ok && CHECK_RES(run_agv(&a, false, s), ncclSuccess) &&
      CHECK_RES(run_rsv(&b, ncclSum, false, s), ncclSuccess) &&
      CHECK_RES(tuttiStreamSynchronize(s), ncclSuccess)) {
    check_agv("AllGatherV on a stream", &a);
    check_rsv("ReduceScatterV on a stream", &b, false);
  }
  plan_free(&a);
  plan_free(&b);
  CHECK_RES(tuttiStreamDestroy(s), ncclSuccess);
}

static void test_group(void) {
  struct plan a, b;
  bool ok = plan_allgatherv(&a, th_dtype_find(ncclInt32), 9, false);
  ok = plan_reducescatterv(&b, th_dtype_find(ncclFloat64), ncclProd, 9,
                           false) && ok;
  int one = 1, sum = 0;
  if (ok) {
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(run_agv(&a, false, NULL), ncclSuccess);
    CHECK_RES(ncclAllReduce(&one, &sum, 1, ncclInt32, ncclSum, comm, NULL),
              ncclSuccess);
    CHECK_RES(run_rsv(&b, ncclProd, false, NULL), ncclSuccess);
    if (CHECK_RES(ncclGroupEnd(), ncclSuccess)) {
      check_agv("AllGatherV in a group", &a);
      check_rsv("ReduceScatterV in a group", &b, false);
      CHECK(sum == nranks, "AllReduce in the group: %d, want %d", sum, nranks);
    }
  }
  plan_free(&a);
  plan_free(&b);
}

static void test_premulsum(void) {
  struct plan pl;
  const struct th_dtype *t = th_dtype_find(ncclFloat64);
  if (!plan_reducescatterv(&pl, t, ncclSum, 4, false)) {
    plan_free(&pl);
    return;
  }
  /* The harness's sums are exact and far from overflow: doubling each is exact. */
  for (size_t i = 0; i < pl.recv_n; i++)
    ((double *)pl.want)[i] *= 2.0;
  double two = 2.0;
  ncclRedOp_t op;
  if (CHECK_RES(ncclRedOpCreatePreMulSum(&op, &two, ncclFloat64,
                                         ncclScalarHostImmediate, comm),
                ncclSuccess)) {
    if (CHECK_RES(run_rsv(&pl, op, false, NULL), ncclSuccess))
      check_rsv("ReduceScatterV premulsum(2)", &pl, false);
    CHECK_RES(ncclRedOpDestroy(op, comm), ncclSuccess);
  }
  plan_free(&pl);
}

static void test_args(void) {
  struct plan pl;
  const struct th_dtype *t = th_dtype_find(ncclInt32);
  if (!plan_allgatherv(&pl, t, 3, false)) {
    plan_free(&pl);
    return;
  }
  size_t *c = pl.l.counts, *d = pl.l.displs;
  ncclDataType_t dt = ncclInt32;
  CHECK_ERR(tuttiAllGatherV(pl.send, pl.recv, NULL, d, dt, comm, NULL),
            ncclInvalidArgument, "counts");
  CHECK_ERR(tuttiAllGatherV(pl.send, pl.recv, c, NULL, dt, comm, NULL),
            ncclInvalidArgument, "displs");
  /* Own buffers are checked with a block on every rank, so that all ranks fail
   * alike (a rank without a block would issue a correct call). */
  size_t ones[64], seq[64];
  for (int p = 0; p < nranks; p++) {
    ones[p] = 1;
    seq[p] = (size_t)p;
  }
  CHECK_ERR(tuttiAllGatherV(pl.send, NULL, c, d, dt, comm, NULL),
            ncclInvalidArgument, "recvbuff");
  CHECK_ERR(tuttiAllGatherV(NULL, pl.recv, ones, seq, dt, comm, NULL),
            ncclInvalidArgument, "sendbuff");
  CHECK_ERR(tuttiReduceScatterV(pl.recv, NULL, ones, seq, dt, ncclSum, comm,
                                NULL),
            ncclInvalidArgument, "recvbuff");
  CHECK_ERR(tuttiReduceScatterV(NULL, pl.recv, c, d, dt, ncclSum, comm, NULL),
            ncclInvalidArgument, "sendbuff");
  CHECK_RES(tuttiAllGatherV(pl.send, pl.recv, c, d, (ncclDataType_t)99, comm,
                            NULL),
            ncclInvalidArgument);
  CHECK_RES(tuttiAllGatherV(pl.send, pl.recv, c, d, dt, NULL, NULL),
            ncclInvalidArgument);
  size_t huge[64];
  for (int p = 0; p < nranks; p++)
    huge[p] = SIZE_MAX / 2;
  CHECK_ERR(tuttiAllGatherV(pl.send, pl.recv, c, huge, dt, comm, NULL),
            ncclInvalidArgument, "overflow");
  CHECK_RES(tuttiReduceScatterV(pl.recv, pl.send, c, d, dt, (ncclRedOp_t)77,
                                comm, NULL),
            ncclInvalidArgument);
  CHECK_RES(tuttiReduceScatterV(pl.recv, pl.send, c, NULL, dt, ncclSum, comm,
                                NULL),
            ncclInvalidArgument);
  /* Inside a group, an argument error fails the whole group on every rank: the
   * AllReduce before it is not issued either. */
  int one = 1, sum = -1;
  CHECK_RES(ncclGroupStart(), ncclSuccess);
  CHECK_RES(ncclAllReduce(&one, &sum, 1, ncclInt32, ncclSum, comm, NULL),
            ncclSuccess);
  CHECK_RES(tuttiAllGatherV(pl.send, pl.recv, c, NULL, dt, comm, NULL),
            ncclInvalidArgument);
  CHECK(ncclGroupEnd() != ncclSuccess, "the group with a failed AllGatherV ran");
  CHECK(sum == -1, "the AllReduce of the failed group ran (sum %d)", sum);
  /* Nothing was issued: a correct call still matches the peers' and is right. */
  if (CHECK_RES(run_agv(&pl, false, NULL), ncclSuccess))
    check_agv("AllGatherV after errors", &pl);
  plan_free(&pl);
}

static void test_mismatch(void) {
  if (nranks < 2)
    return;
  ncclComm_t sub = NULL;
  if (!CHECK_RES(ncclCommSplit(comm, 0, rank, &sub, NULL), ncclSuccess))
    return;
  ncclComm_t keep = comm;
  comm = sub;
  struct plan pl;
  if (plan_allgatherv(&pl, th_dtype_find(ncclInt32), 3, false)) {
    if (rank == 0)
      pl.l.counts[1]++; /* the gap after block 1 has room for one more */
    ncclResult_t res = run_agv(&pl, false, NULL);
    if (rank == 0)
      CHECK_ERR(res, ncclInvalidUsage, "count");
    else
      CHECK_FAILS(res);
  }
  plan_free(&pl);
  comm = keep;
  CHECK_RES(ncclCommAbort(sub), ncclSuccess);
}

static void barrier(void) {
  int one = 1;
  ncclAllReduce(&one, &one, 1, ncclInt32, ncclSum, comm, NULL);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  comm = world_open("collv", &rank, &nranks);
  if (comm == NULL)
    return 1;
  if (nranks > 64) {
    printf("skipped: more than 64 ranks\n");
    return 77;
  }
  static const struct world_test tests[] = {
      {"allgatherv", test_allgatherv, false},
      {"reducescatterv", test_reducescatterv, false},
      {"inplace", test_inplace, false},
      {"stream", test_stream, false},
      {"group", test_group, false},
      {"premulsum", test_premulsum, false},
      {"args", test_args, false},
      {"mismatch", test_mismatch, true},
  };
  int failed = world_run_tests(tests, sizeof tests / sizeof tests[0], argc,
                               argv, 1, barrier);
  ncclCommDestroy(comm);
  return failed == 0 ? 0 : failed < 0 ? 2 : 1;
}
