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
    TT_COLL_COUNT_,
};

/* "AllReduce", "Broadcast", ... for logs and errors. */
const char *tt_coll_name(enum tt_coll coll);

#endif
