/* The collectives Tutti schedules, shared by the core (which submits them) and the algorithms
 * (which schedule them). */
#ifndef TT_ALGO_COLL_H
#define TT_ALGO_COLL_H

enum tt_coll {
    TT_COLL_ALLREDUCE,
    TT_COLL_BROADCAST,
    TT_COLL_REDUCE,
    TT_COLL_ALLGATHER,
    TT_COLL_REDUCESCATTER,
    TT_COLL_SEND, /* point-to-point halves; AlltoAll, Gather and Scatter are made of these */
    TT_COLL_RECV,
    TT_COLL_COPY, /* local copy of a rank's own block (Gather, Scatter, AlltoAll) */
    TT_COLL_COUNT_,
    /* Expanded by the core into sends, receives and copies; never scheduled themselves. */
    TT_COLL_ALLTOALL = TT_COLL_COUNT_,
    TT_COLL_GATHER,
    TT_COLL_SCATTER,
};

/* "AllReduce", "Broadcast", ... for logs and errors. */
const char *tt_coll_name(enum tt_coll coll);

#endif
