/* The names of the collectives, for logs and error messages. */
#include "algo/coll.h"

const char *tt_coll_name(enum tt_coll coll)
{
    static const char *names[TT_COLL_SCATTER + 1] = {
        [TT_COLL_ALLREDUCE] = "AllReduce",   [TT_COLL_BROADCAST] = "Broadcast",
        [TT_COLL_REDUCE] = "Reduce",         [TT_COLL_ALLGATHER] = "AllGather",
        [TT_COLL_REDUCESCATTER] = "ReduceScatter", [TT_COLL_SEND] = "Send",
        [TT_COLL_RECV] = "Recv",           [TT_COLL_COPY] = "Copy",
        [TT_COLL_ALLTOALL] = "AlltoAll",   [TT_COLL_GATHER] = "Gather",
        [TT_COLL_SCATTER] = "Scatter",
    };
    return (unsigned)coll <= TT_COLL_SCATTER ? names[coll] : "Unknown";
}
