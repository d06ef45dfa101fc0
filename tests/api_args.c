/* Tests of the public entry points' argument checking, through the public headers only. One
 * process, no peers.
 *
 *   api_args            checks that need no communicator: version, error strings, NULL and
 *                       out-of-range arguments of init, NULL communicators, group brackets,
 *                       and that no not-yet-implemented function reports success.
 *   api_args one_rank   creates a communicator of one rank (ncclGetUniqueId +
 *                       ncclCommInitRank) and checks what needs a live communicator: datatype,
 *                       operator, root, buffers, streams, the queries, every collective on one
 *                       rank against the identity it must compute, and use after destroy.
 *
 * Each check prints what it got and what it wanted; the exit code is 1 when any check failed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl.h"
#include "tutti.h"

#include "check.h"

static void test_version(void)
{
    int version = 0;
    CHECK_RES(ncclGetVersion(&version), ncclSuccess);
    CHECK_EQ(version, NCCL_VERSION_CODE);
    CHECK_EQ(version, 22809);
    CHECK_EQ(NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), 22809);
    CHECK_EQ(NCCL_VERSION(2, 8, 4), 2804);
    version = 0;
    CHECK_RES(pncclGetVersion(&version), ncclSuccess);
    CHECK_EQ(version, NCCL_VERSION_CODE);
    CHECK_ERR(ncclGetVersion(NULL), ncclInvalidArgument, "version");
    const char *text = tuttiVersionString();
    if (text == NULL || text[0] == '\0') FAIL("tuttiVersionString() is empty");
}

/* Every result code has its own non-empty text; out-of-range codes share the "unknown" one. */
static void test_error_strings(void)
{
    const char *unknown = ncclGetErrorString(ncclNumResults);
    if (unknown == NULL || strstr(unknown, "unknown") == NULL)
        FAIL("ncclGetErrorString(ncclNumResults) = \"%s\", want an \"unknown\" text",
             unknown ? unknown : "(NULL)");
    const char *negative = ncclGetErrorString((ncclResult_t)-1);
    if (negative == NULL || unknown == NULL || strcmp(negative, unknown) != 0)
        FAIL("ncclGetErrorString(-1) = \"%s\", want \"%s\"", negative ? negative : "(NULL)",
             unknown ? unknown : "(NULL)");
    for (int r = 0; r < (int)ncclNumResults; r++) {
        const char *text = ncclGetErrorString((ncclResult_t)r);
        if (text == NULL || text[0] == '\0') {
            FAIL("ncclGetErrorString(%d) is empty", r);
            continue;
        }
        if (unknown != NULL && strcmp(text, unknown) == 0)
            FAIL("ncclGetErrorString(%d) = \"%s\", the text of unknown codes", r, text);
        for (int s = 0; s < r; s++)
            if (strcmp(text, ncclGetErrorString((ncclResult_t)s)) == 0)
                FAIL("ncclGetErrorString(%d) and (%d) are both \"%s\"", r, s, text);
        const char *twin = pncclGetErrorString((ncclResult_t)r);
        if (twin == NULL || strcmp(twin, text) != 0)
            FAIL("pncclGetErrorString(%d) = \"%s\", want \"%s\"", r, twin ? twin : "(NULL)", text);
    }
    if (strstr(ncclGetErrorString(ncclSuccess), "no error") == NULL)
        FAIL("ncclGetErrorString(ncclSuccess) = \"%s\", want \"no error\"",
             ncclGetErrorString(ncclSuccess));
}

/* Init's own arguments are all checked before anyone is contacted, so none of these calls
 * needs a peer or a network. */
static void test_init_args(void)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclComm_t comm = (ncclComm_t)(uintptr_t)0x1;

    CHECK_ERR(ncclGetUniqueId(NULL), ncclInvalidArgument, "uniqueId");
    CHECK_ERR(pncclGetUniqueId(NULL), ncclInvalidArgument, "uniqueId");
    CHECK_ERR(ncclCommInitRank(NULL, 1, id, 0), ncclInvalidArgument, "comm");
    CHECK_ERR(ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument, "nranks 0");
    if (comm != NULL) FAIL("failed ncclCommInitRank left *comm = %p, want NULL", (void *)comm);
    CHECK_ERR(ncclCommInitRank(&comm, -3, id, 0), ncclInvalidArgument, "nranks -3");
    CHECK_ERR(ncclCommInitRank(&comm, 4, id, -1), ncclInvalidArgument, "rank -1");
    CHECK_ERR(ncclCommInitRank(&comm, 4, id, 4), ncclInvalidArgument, "rank 4");
    CHECK_ERR(pncclCommInitRank(&comm, 4, id, 4), ncclInvalidArgument, "rank 4");

    ncclConfig_t good = NCCL_CONFIG_INITIALIZER;
    CHECK_ERR(ncclCommInitRankConfig(NULL, 1, id, 0, &good), ncclInvalidArgument, "comm");
    CHECK_ERR(ncclCommInitRankConfig(&comm, 2, id, 2, &good), ncclInvalidArgument, "rank 2");
    ncclConfig_t config = good;
    config.magic = 0;
    CHECK_ERR(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument,
              "NCCL_CONFIG_INITIALIZER");
    config = good;
    config.version = 21300;
    CHECK_ERR(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument, "version");
    config = good;
    config.size = 8;
    CHECK_ERR(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument, "size");
    config = good;
    config.blocking = 7;
    CHECK_ERR(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument, "blocking");
    config = good;
    config.splitShare = -2;
    CHECK_ERR(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument,
              "splitShare");
    config = good;
    config.minCTAs = 8;
    config.maxCTAs = 4;
    CHECK_ERR(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument, "minCTAs");
    config = good;
    config.CTAPolicy = 99;
    CHECK_ERR(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument,
              "CTAPolicy");
    config = good;
    config.cgaClusterSize = -2; /* negative: refused; above 8: capped, as NCCL does */
    CHECK_ERR(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument,
              "cgaClusterSize");
}

/* Integer variables outside their range (or not integers) fail init naming the variable,
 * instead of being taken silently (TUTTI_TIMEOUT_MS=-5 used to turn every deadline off). */
static void test_env_ranges(void)
{
    static const struct {
        const char *var, *value;
    } bad[] = {{"TUTTI_TIMEOUT_MS", "-5"},  {"TUTTI_SPIN", "-1"},
               {"NCCL_COMM_BLOCKING", "7"}, {"NCCL_BUFFSIZE", "12"},
               {"NCCL_SHM_DISABLE", "2"},   {"TUTTI_ONESHOT_BYTES", "1e9"},
               {"TUTTI_CHUNK_BYTES", "x"},  {"TUTTI_MAP_PEERS", "-1"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv(bad[i].var, bad[i].value, 1);
        ncclUniqueId id;
        memset(&id, 0, sizeof id);
        ncclComm_t comm = NULL;
        CHECK_ERR(ncclCommInitRank(&comm, 1, id, 0), ncclInvalidArgument, bad[i].var);
        unsetenv(bad[i].var);
    }
}

/* Every call on a NULL communicator is refused, except destroy and abort, which accept NULL as
 * NCCL does. */
static void test_null_comm(void)
{
    float buf[4] = {0};
    int value = 0;
    ncclResult_t async = ncclSuccess;
    CHECK_ERR(ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, NULL, NULL), ncclInvalidArgument,
              "ncclAllReduce");
    CHECK_ERR(pncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, NULL, NULL), ncclInvalidArgument,
              "ncclAllReduce");
    CHECK_ERR(ncclBroadcast(buf, buf, 4, ncclFloat, 0, NULL, NULL), ncclInvalidArgument,
              "ncclBroadcast");
    CHECK_ERR(ncclBcast(buf, 4, ncclFloat, 0, NULL, NULL), ncclInvalidArgument, "ncclBcast");
    CHECK_ERR(ncclReduce(buf, buf, 4, ncclFloat, ncclSum, 0, NULL, NULL), ncclInvalidArgument,
              "ncclReduce");
    CHECK_ERR(ncclAllGather(buf, buf, 1, ncclFloat, NULL, NULL), ncclInvalidArgument,
              "ncclAllGather");
    CHECK_ERR(ncclReduceScatter(buf, buf, 1, ncclFloat, ncclSum, NULL, NULL), ncclInvalidArgument,
              "ncclReduceScatter");
    CHECK_ERR(ncclCommCount(NULL, &value), ncclInvalidArgument, "ncclCommCount");
    CHECK_ERR(ncclCommUserRank(NULL, &value), ncclInvalidArgument, "ncclCommUserRank");
    CHECK_ERR(ncclCommCuDevice(NULL, &value), ncclInvalidArgument, "ncclCommCuDevice");
    CHECK_ERR(ncclCommGetAsyncError(NULL, &async), ncclInvalidArgument, "ncclCommGetAsyncError");
    CHECK_RES(ncclCommDestroy(NULL), ncclSuccess);
    CHECK_RES(ncclCommAbort(NULL), ncclSuccess);
}

static void test_groups(void)
{
    CHECK_ERR(ncclGroupEnd(), ncclInvalidUsage, "ncclGroupStart");
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(pncclGroupStart(), ncclSuccess);
    CHECK_RES(pncclGroupEnd(), ncclSuccess);
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    CHECK_ERR(ncclGroupEnd(), ncclInvalidUsage, "ncclGroupStart");
}

/* Functions that are not implemented yet must say so rather than succeed. This also holds once
 * they are implemented, since every call below passes NULL where a live object is needed. */
static void test_nothing_silently_succeeds(void)
{
    int ranks[1] = {0};
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclRedOp_t op = ncclSum;
    float scalar = 1.0f;
/* An error, with a message in ncclGetLastError saying why. */
#define CHECK_FAILS_WITH_MESSAGE(expr)                                                          \
    do {                                                                                        \
        if (CHECK_FAILS(expr) && ncclGetLastError(NULL)[0] == '\0')                             \
            FAIL("%s returned an error with no message in ncclGetLastError", #expr);            \
    } while (0)
    CHECK_FAILS_WITH_MESSAGE(ncclMemAlloc(NULL, 64));
    CHECK_FAILS_WITH_MESSAGE(ncclCommInitAll(NULL, 1, NULL));
    CHECK_FAILS_WITH_MESSAGE(ncclCommInitRankScalable(NULL, 1, 0, 1, &id, NULL));
    CHECK_FAILS_WITH_MESSAGE(ncclCommFinalize(NULL));
    CHECK_FAILS_WITH_MESSAGE(ncclCommRevoke(NULL, NCCL_REVOKE_DEFAULT));
    CHECK_FAILS_WITH_MESSAGE(ncclCommSplit(NULL, 0, 0, NULL, NULL));
    CHECK_FAILS_WITH_MESSAGE(ncclCommShrink(NULL, ranks, 1, NULL, NULL, NCCL_SHRINK_DEFAULT));
    CHECK_FAILS_WITH_MESSAGE(ncclCommGetUniqueId(NULL, &id));
    CHECK_FAILS_WITH_MESSAGE(ncclCommGrow(NULL, 2, &id, 1, NULL, NULL));
    CHECK_FAILS_WITH_MESSAGE(ncclCommRegister(NULL, NULL, 0, NULL));
    CHECK_FAILS_WITH_MESSAGE(ncclCommDeregister(NULL, NULL));
    CHECK_FAILS_WITH_MESSAGE(ncclCommWindowRegister(NULL, NULL, 0, NULL, NCCL_WIN_DEFAULT));
    CHECK_FAILS_WITH_MESSAGE(ncclCommWindowDeregister(NULL, NULL));
    CHECK_FAILS_WITH_MESSAGE(
        ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, NULL));
    CHECK_FAILS_WITH_MESSAGE(ncclRedOpDestroy(ncclNumOps, NULL));
    CHECK_FAILS_WITH_MESSAGE(ncclAlltoAll(NULL, NULL, 1, ncclFloat, NULL, NULL));
    CHECK_FAILS_WITH_MESSAGE(ncclGather(NULL, NULL, 1, ncclFloat, 0, NULL, NULL));
    CHECK_FAILS_WITH_MESSAGE(ncclScatter(NULL, NULL, 1, ncclFloat, 0, NULL, NULL));
    CHECK_FAILS_WITH_MESSAGE(ncclSend(NULL, 1, ncclFloat, 0, NULL, NULL));
    CHECK_FAILS_WITH_MESSAGE(ncclRecv(NULL, 1, ncclFloat, 0, NULL, NULL));
    CHECK_FAILS_WITH_MESSAGE(pncclRecv(NULL, 1, ncclFloat, 0, NULL, NULL));
    CHECK_FAILS_WITH_MESSAGE(ncclGroupSimulateEnd(NULL));
#undef CHECK_FAILS
}

/* ---- One-rank communicator ----------------------------------------------------------------- */

/* Arguments that only a live communicator lets the entry points reach. */
static void test_comm_args(ncclComm_t comm)
{
    int32_t buf[8] = {0};
    CHECK_ERR(ncclAllReduce(buf, buf, 8, ncclNumTypes, ncclSum, comm, NULL), ncclInvalidArgument,
              "datatype 12");
    CHECK_ERR(ncclAllReduce(buf, buf, 8, (ncclDataType_t)-1, ncclSum, comm, NULL),
              ncclInvalidArgument, "datatype -1");
    CHECK_ERR(ncclAllReduce(buf, buf, 8, ncclInt32, ncclNumOps, comm, NULL), ncclInvalidArgument,
              "op 5");
    CHECK_ERR(ncclReduceScatter(buf, buf, 8, ncclInt32, (ncclRedOp_t)-1, comm, NULL),
              ncclInvalidArgument, "op -1");
    CHECK_ERR(ncclReduce(buf, buf, 8, ncclInt32, (ncclRedOp_t)77, 0, comm, NULL),
              ncclInvalidArgument, "op 77");
    CHECK_ERR(ncclBroadcast(buf, buf, 8, ncclInt32, 1, comm, NULL), ncclInvalidArgument, "root 1");
    CHECK_ERR(ncclBcast(buf, 8, ncclInt32, -1, comm, NULL), ncclInvalidArgument, "root -1");
    CHECK_ERR(ncclReduce(buf, buf, 8, ncclInt32, ncclSum, 1, comm, NULL), ncclInvalidArgument,
              "root 1");
    CHECK_ERR(ncclAllReduce(NULL, buf, 8, ncclInt32, ncclSum, comm, NULL), ncclInvalidArgument,
              "sendbuff");
    CHECK_ERR(ncclAllReduce(buf, NULL, 8, ncclInt32, ncclSum, comm, NULL), ncclInvalidArgument,
              "recvbuff");
    CHECK_ERR(ncclBcast(NULL, 8, ncclInt32, 0, comm, NULL), ncclInvalidArgument, "NULL");
    CHECK_ERR(ncclAllGather(NULL, buf, 8, ncclInt32, comm, NULL), ncclInvalidArgument, "sendbuff");
    CHECK_ERR(ncclReduceScatter(buf, NULL, 8, ncclInt32, ncclSum, comm, NULL), ncclInvalidArgument,
              "recvbuff");
    CHECK_ERR(ncclAllGather(buf, buf, SIZE_MAX / 2, ncclInt32, comm, NULL), ncclInvalidArgument,
              "overflow");
    CHECK_ERR(ncclAllReduce(buf, buf, 8, ncclInt32, ncclSum, comm, (cudaStream_t)buf),
              ncclInvalidUsage, "stream");
    CHECK_ERR(ncclCommCount(comm, NULL), ncclInvalidArgument, "count");
    CHECK_ERR(ncclCommUserRank(comm, NULL), ncclInvalidArgument, "rank");
    CHECK_ERR(ncclCommCuDevice(comm, NULL), ncclInvalidArgument, "device");
    CHECK_ERR(ncclCommGetAsyncError(comm, NULL), ncclInvalidArgument, "asyncError");
    /* With count 0 no buffer is read or written, so NULL is fine. */
    CHECK_RES(ncclAllReduce(NULL, NULL, 0, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
    CHECK_RES(ncclAllGather(NULL, NULL, 0, ncclFloat64, comm, NULL), ncclSuccess);
}

static void test_comm_queries(ncclComm_t comm)
{
    int value = -7;
    ncclResult_t async = ncclInternalError;
    CHECK_RES(ncclCommCount(comm, &value), ncclSuccess);
    CHECK_EQ(value, 1);
    value = -7;
    CHECK_RES(ncclCommUserRank(comm, &value), ncclSuccess);
    CHECK_EQ(value, 0);
    value = 7;
    CHECK_RES(ncclCommCuDevice(comm, &value), ncclSuccess);
    CHECK_EQ(value, -1);
    CHECK_RES(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    CHECK_EQ(async, ncclSuccess);
}

#define N 7

static void check_buf(const char *what, const int32_t *got, const int32_t *want, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (got[i] != want[i]) {
            FAIL("%s: rank 0 index %zu int32: got %d, want %d", what, i, got[i], want[i]);
            return;
        }
}

/* On one rank every collective is a copy of this rank's data: the reduction of one
 * contribution is itself (avg included, with integers), and rank 0 owns the only block. */
static void test_one_rank_colls(ncclComm_t comm)
{
    int32_t in[N], want[N], out[N];
    for (int i = 0; i < N; i++) in[i] = want[i] = 3 * i - 5;
    const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        memset(out, 0x5a, sizeof out);
        CHECK_RES(ncclAllReduce(in, out, N, ncclInt32, ops[k], comm, NULL), ncclSuccess);
        check_buf("AllReduce", out, want, N);
    }
    memcpy(out, in, sizeof out);
    CHECK_RES(ncclAllReduce(out, out, N, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
    check_buf("AllReduce in place", out, want, N);
    memset(out, 0x5a, sizeof out);
    CHECK_RES(ncclBroadcast(in, out, N, ncclInt32, 0, comm, NULL), ncclSuccess);
    check_buf("Broadcast", out, want, N);
    memcpy(out, in, sizeof out);
    CHECK_RES(ncclBcast(out, N, ncclInt32, 0, comm, NULL), ncclSuccess);
    check_buf("Bcast", out, want, N);
    memset(out, 0x5a, sizeof out);
    CHECK_RES(ncclReduce(in, out, N, ncclInt32, ncclMax, 0, comm, NULL), ncclSuccess);
    check_buf("Reduce", out, want, N);
    memset(out, 0x5a, sizeof out);
    CHECK_RES(ncclAllGather(in, out, N, ncclInt32, comm, NULL), ncclSuccess);
    check_buf("AllGather", out, want, N);
    memset(out, 0x5a, sizeof out);
    CHECK_RES(ncclReduceScatter(in, out, N, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
    check_buf("ReduceScatter", out, want, N);
    /* Inside a group the operation still completes by ncclGroupEnd. */
    memset(out, 0x5a, sizeof out);
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclAllReduce(in, out, N, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    check_buf("AllReduce in a group", out, want, N);
}

static int run_one_rank(void)
{
    /* A fresh id with a root of its own, whatever the environment says. */
    unsetenv("NCCL_COMM_ID");
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    CHECK_RES(ncclGetUniqueId(&id), ncclSuccess);
    CHECK_RES(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
    if (comm == NULL) {
        FAIL("ncclCommInitRank(nranks 1) gave no communicator; the remaining checks need one");
        return 1;
    }
    test_comm_queries(comm);
    test_comm_args(comm);
    test_one_rank_colls(comm);
    CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
    int value = 0;
    CHECK_RES(ncclCommCount(comm, &value), ncclInvalidArgument);
    CHECK_RES(ncclAllReduce(&value, &value, 1, ncclInt32, ncclSum, comm, NULL),
              ncclInvalidArgument);

    /* A nonblocking config: init may return ncclInProgress; polling ncclCommGetAsyncError
     * reaches ncclSuccess, and abort works. */
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    config.commName = "api_args";
    comm = NULL;
    CHECK_RES(ncclGetUniqueId(&id), ncclSuccess);
    ncclResult_t init = ncclCommInitRankConfig(&comm, 1, id, 0, &config);
    if (init != ncclInProgress) CHECK_RES(init, ncclSuccess);
    if (comm != NULL) {
        ncclResult_t async = ncclInProgress;
        for (int polls = 0; async == ncclInProgress && polls < 100000; polls++) {
            CHECK_RES(ncclCommGetAsyncError(comm, &async), ncclSuccess);
            if (async == ncclInProgress) usleep(100);
        }
        CHECK_EQ(async, ncclSuccess);
        CHECK_RES(ncclCommAbort(comm), ncclSuccess);
    }
    return check_failures != 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "one_rank") == 0) {
        int res = run_one_rank();
        printf("api_args one_rank: %s (%d failed checks)\n", res ? "FAILED" : "passed",
               check_failures);
        return res;
    }
    test_version();
    test_error_strings();
    test_init_args();
    test_env_ranges();
    test_null_comm();
    test_groups();
    test_nothing_silently_succeeds();
    printf("api_args: %s (%d failed checks)\n", check_failures ? "FAILED" : "passed",
           check_failures);
    return check_failures != 0;
}
