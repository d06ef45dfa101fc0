/* Bad input, table-driven, on a communicator of one rank (no peer needed): every public call
 * with one bad argument returns NCCL's code and a message naming the argument, and nothing
 * else goes wrong. The cases are generated from small tables (every collective x every kind of
 * bad argument, every config field, every integer variable with values below, above and not a
 * number), and the test fails when fewer than MIN_CASES ran, so the suite cannot shrink
 * unnoticed. Run it under ASan/UBSan to see that no bad argument is read past. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "tutti.h"

#include "check.h"

#define MIN_CASES 150

static int cases;

#define CASE(expr, want, needle)                                                                \
    do {                                                                                        \
        cases++;                                                                                \
        CHECK_ERR(expr, want, needle);                                                          \
    } while (0)

enum coll { ALLREDUCE, BROADCAST, REDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, GATHER, SCATTER,
            SEND, RECV, NCOLLS };
static const char *const coll_names[NCOLLS] = {"AllReduce", "Broadcast", "Reduce", "AllGather",
                                               "ReduceScatter", "AlltoAll", "Gather", "Scatter",
                                               "Send", "Recv"};

/* One call of collective `c` with these arguments (peer = root for Send/Recv). */
static ncclResult_t call(enum coll c, const void *send, void *recv, size_t count,
                         ncclDataType_t dtype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream)
{
    switch (c) {
    case ALLREDUCE: return ncclAllReduce(send, recv, count, dtype, op, comm, stream);
    case BROADCAST: return ncclBroadcast(send, recv, count, dtype, root, comm, stream);
    case REDUCE: return ncclReduce(send, recv, count, dtype, op, root, comm, stream);
    case ALLGATHER: return ncclAllGather(send, recv, count, dtype, comm, stream);
    case REDUCESCATTER: return ncclReduceScatter(send, recv, count, dtype, op, comm, stream);
    case ALLTOALL: return ncclAlltoAll(send, recv, count, dtype, comm, stream);
    case GATHER: return ncclGather(send, recv, count, dtype, root, comm, stream);
    case SCATTER: return ncclScatter(send, recv, count, dtype, root, comm, stream);
    case SEND: return ncclSend(send, count, dtype, root, comm, stream);
    default: return ncclRecv(recv, count, dtype, root, comm, stream);
    }
}

static bool has_root(enum coll c)
{
    return c == BROADCAST || c == REDUCE || c == GATHER || c == SCATTER || c == SEND || c == RECV;
}

static bool reduces(enum coll c)
{
    return c == ALLREDUCE || c == REDUCE || c == REDUCESCATTER;
}

static void collectives(ncclComm_t comm)
{
    static char buf[256];
    int not_a_stream = 0;
    for (int c = 0; c < NCOLLS; c++) {
        check_where = coll_names[c];
        enum coll k = (enum coll)c;
        CASE(call(k, buf, buf, 1, ncclInt8, ncclSum, 0, NULL, NULL), ncclInvalidArgument,
             "comm");
        CASE(call(k, buf, buf, 1, ncclInt8, ncclSum, 0, (ncclComm_t)(void *)buf, NULL),
             ncclInvalidArgument, "not a live communicator");
        CASE(call(k, buf, buf, 1, (ncclDataType_t)-1, ncclSum, 0, comm, NULL),
             ncclInvalidArgument, "datatype");
        CASE(call(k, buf, buf, 1, (ncclDataType_t)99, ncclSum, 0, comm, NULL),
             ncclInvalidArgument, "datatype");
        CASE(call(k, buf, buf, 1, ncclInt8, ncclSum, 0, comm, (cudaStream_t)(void *)&not_a_stream),
             ncclInvalidUsage, "stream");
        if (reduces(k)) {
            CASE(call(k, buf, buf, 1, ncclInt8, (ncclRedOp_t)-1, 0, comm, NULL),
                 ncclInvalidArgument, "op");
            CASE(call(k, buf, buf, 1, ncclInt8, (ncclRedOp_t)77, 0, comm, NULL),
                 ncclInvalidArgument, "op");
        }
        if (has_root(k)) {
            CASE(call(k, buf, buf, 1, ncclInt8, ncclSum, -1, comm, NULL), ncclInvalidArgument,
                 k == SEND || k == RECV ? "peer" : "root");
            CASE(call(k, buf, buf, 1, ncclInt8, ncclSum, 1, comm, NULL), ncclInvalidArgument,
                 k == SEND || k == RECV ? "peer" : "root");
        }
        /* A NULL buffer with elements to move (the one this rank uses). */
        if (k != RECV)
            CASE(call(k, NULL, buf, 4, ncclInt8, ncclSum, 0, comm, NULL), ncclInvalidArgument,
                 "sendbuff");
        if (k != SEND)
            CASE(call(k, buf, NULL, 4, ncclInt8, ncclSum, 0, comm, NULL), ncclInvalidArgument,
                 "recvbuff");
    }
    check_where = NULL;
}

static void config_fields(void)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    static const struct {
        const char *field;
        size_t offset;
        int value;
    } bad[] = {
        {"blocking", offsetof(ncclConfig_t, blocking), 2},
        {"blocking", offsetof(ncclConfig_t, blocking), -7},
        {"cgaClusterSize", offsetof(ncclConfig_t, cgaClusterSize), -1},
        {"minCTAs", offsetof(ncclConfig_t, minCTAs), 0},
        {"minCTAs", offsetof(ncclConfig_t, minCTAs), 70000},
        {"maxCTAs", offsetof(ncclConfig_t, maxCTAs), 0},
        {"maxCTAs", offsetof(ncclConfig_t, maxCTAs), -3},
        {"splitShare", offsetof(ncclConfig_t, splitShare), 3},
        {"collnetEnable", offsetof(ncclConfig_t, collnetEnable), 5},
        {"CTAPolicy", offsetof(ncclConfig_t, CTAPolicy), 99},
        {"CTAPolicy", offsetof(ncclConfig_t, CTAPolicy), 4},
        {"shrinkShare", offsetof(ncclConfig_t, shrinkShare), -5},
        {"nvlsCTAs", offsetof(ncclConfig_t, nvlsCTAs), 0},
        {"nChannelsPerNetPeer", offsetof(ncclConfig_t, nChannelsPerNetPeer), 0},
        {"nvlinkCentricSched", offsetof(ncclConfig_t, nvlinkCentricSched), 2},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        check_where = bad[i].field;
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        memcpy((char *)&config + bad[i].offset, &bad[i].value, sizeof(int));
        ncclComm_t comm = NULL;
        CASE(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument,
             bad[i].field);
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.minCTAs = 8;
    config.maxCTAs = 4;
    ncclComm_t comm = NULL;
    check_where = "minCTAs > maxCTAs";
    CASE(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument, "minCTAs");
    check_where = NULL;
}

/* Every integer variable of docs/env.md: below its range, above it, and not a number. */
static void variables(void)
{
    static const struct {
        const char *var, *below, *above;
    } vars[] = {
        {"NCCL_BUFFSIZE", "63", "536870913"},     {"NCCL_SHM_DISABLE", "-1", "2"},
        {"NCCL_P2P_DISABLE", "-1", "2"},          {"NCCL_COMM_BLOCKING", "-2", "2"},
        {"TUTTI_TIMEOUT_MS", "-5", "99999999999999"}, {"TUTTI_ONESHOT_BYTES", "-1", "67108865"},
        {"TUTTI_CHUNK_BYTES", "-8", "67108865"},  {"TUTTI_SPIN", "-1", "1000000001"},
        {"TUTTI_MAP_PEERS", "-1", "2"},           {"TUTTI_STREAM_FOOTPRINT", "-1", "9e99"},
        {"TUTTI_DUMP_SIGNAL", "-1", "2"},         {"TUTTI_REGISTER_REMAP", "-1", "3"},
    };
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *values[] = {vars[i].below, vars[i].above, "twelve", "12abc"};
        for (int v = 0; v < 4; v++) {
            check_where = vars[i].var;
            setenv(vars[i].var, values[v], 1);
            ncclComm_t comm = NULL;
            CASE(ncclCommInitRank(&comm, 1, id, 0), ncclInvalidArgument, vars[i].var);
            unsetenv(vars[i].var);
        }
    }
    check_where = NULL;
}

static void lifecycle_and_misc(ncclComm_t comm)
{
    int v = 0;
    CASE(ncclCommCount(comm, NULL), ncclInvalidArgument, "count");
    CASE(ncclCommUserRank(comm, NULL), ncclInvalidArgument, "rank");
    CASE(ncclCommCuDevice(comm, NULL), ncclInvalidArgument, "device");
    CASE(ncclCommGetAsyncError(comm, NULL), ncclInvalidArgument, "asyncError");
    CASE(ncclCommCount(NULL, &v), ncclInvalidArgument, "comm");
    CASE(ncclCommSplit(comm, 0, 0, NULL, NULL), ncclInvalidArgument, "newcomm");
    CASE(ncclCommSplit(NULL, 0, 0, NULL, NULL), ncclInvalidArgument, "comm");
    ncclUniqueId gid;
    ncclComm_t grown = NULL;
    memset(&gid, 0, sizeof gid);
    CASE(ncclCommGetUniqueId(NULL, &gid), ncclInvalidArgument, "comm");
    CASE(ncclCommGetUniqueId(comm, NULL), ncclInvalidArgument, "uniqueId");
    CASE(ncclCommGrow(comm, 2, &gid, -1, NULL, NULL), ncclInvalidArgument, "newcomm");
    CASE(ncclCommGrow(comm, 1, &gid, -1, &grown, NULL), ncclInvalidArgument, "nRanks 1");
    CASE(ncclCommGrow(comm, 2, &gid, 0, &grown, NULL), ncclInvalidArgument, "passes -1");
    CASE(ncclCommGrow(NULL, 3, NULL, 2, &grown, NULL), ncclInvalidArgument, "uniqueId");
    CASE(ncclCommGrow(NULL, 3, &gid, 0, &grown, NULL), ncclInvalidArgument, "[1, 3)");
    CASE(ncclCommGrow(NULL, 3, &gid, 3, &grown, NULL), ncclInvalidArgument, "[1, 3)");
    CASE(ncclCommGrow(NULL, 1, &gid, 0, &grown, NULL), ncclInvalidArgument, "nRanks 1");
    /* No existing rank passed the id (this communicator's only rank passed NULL). */
    CASE(ncclCommGrow(comm, 2, NULL, -1, &grown, NULL), ncclInvalidUsage, "exactly one");
    if (grown != NULL) FAIL("a failed ncclCommGrow left *newcomm set");
    CASE(ncclRedOpCreatePreMulSum(NULL, &v, ncclInt32, ncclScalarHostImmediate, comm),
         ncclInvalidArgument, "op");
    CASE(ncclRedOpDestroy((ncclRedOp_t)1000, comm), ncclInvalidArgument, "op 1000");
    CASE(ncclCommRegister(comm, NULL, 16, (void **)&v), ncclInvalidArgument, "buff");
    CASE(ncclCommRegister(comm, (void *)&v, 16, NULL), ncclInvalidArgument, "handle");
    CASE(ncclCommDeregister(comm, NULL), ncclInvalidArgument, "handle");
    CASE(ncclMemAlloc(NULL, 16), ncclInvalidArgument, "ptr");
    CASE(ncclMemFree((void *)&v), ncclInvalidArgument, "ncclMemAlloc");
    CASE(tuttiStreamCreate(NULL), ncclInvalidArgument, "stream");
    CASE(tuttiStreamDestroy(NULL), ncclInvalidArgument, "stream");
    CASE(tuttiStreamSynchronize((cudaStream_t)(void *)&v), ncclInvalidUsage, "host stream");
    CASE(tuttiEventCreate(NULL), ncclInvalidArgument, "event");
    CASE(tuttiEventRecord(NULL, comm, NULL), ncclInvalidArgument, "event");
    CASE(tuttiEventQuery(NULL), ncclInvalidArgument, "event");
    CASE(tuttiEventSynchronize(NULL), ncclInvalidArgument, "event");
    CASE(tuttiCommDump(NULL), ncclInvalidArgument, "comm");
    CASE(ncclGroupEnd(), ncclInvalidUsage, "without a matching");
}

int main(void)
{
    unsetenv("NCCL_COMM_ID");
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    if (!CHECK_RES(ncclGetUniqueId(&id), ncclSuccess) ||
        !CHECK_RES(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess))
        return 1;
    collectives(comm);
    config_fields();
    variables();
    lifecycle_and_misc(comm);
    ncclCommDestroy(comm);
    CHECK(cases >= MIN_CASES, "only %d cases ran, want at least %d", cases, MIN_CASES);
    printf("api_bad_inputs: %d cases, %d failed\n", cases, (int)check_failures);
    return check_failures ? 1 : 0;
}
