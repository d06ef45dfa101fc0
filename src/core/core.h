/* The core's contract towards the public entry points (api/): communicator lifecycle and
 * collective submission. The api layer validates every argument once (pointers, counts, dtype,
 * op, root, communicator validity) and then calls these; the core trusts its arguments.
 *
 * Blocking: with stream == NULL on host buffers a collective returns when it is complete on this
 * rank. Thread-safety: one communicator must not be used by two threads at once (as in NCCL);
 * different communicators may be used concurrently from different threads. */
#ifndef TT_CORE_H
#define TT_CORE_H

#include <stdbool.h>
#include <stddef.h>

#include "algo/coll.h"
#include "nccl.h"

/* One collective call. `count` follows NCCL: AllReduce/Broadcast/Reduce: elements of the
 * buffer; AllGather: elements each rank sends; ReduceScatter: elements each rank receives. */
struct tt_coll_args {
    enum tt_coll coll;
    const void *sendbuff;
    void *recvbuff;
    size_t count;
    ncclDataType_t dtype;
    ncclRedOp_t op;
    int root;
    cudaStream_t stream;
};

/* ncclCommInitRank: `id` was checked non-NULL, 0 <= rank < nranks. */
ncclResult_t tt_comm_init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank);
/* ncclCommDestroy / ncclCommAbort: free everything; `comm` is valid. */
ncclResult_t tt_comm_destroy(ncclComm_t comm);
ncclResult_t tt_comm_abort(ncclComm_t comm);
/* ncclSuccess when `comm` is a live communicator, else ncclInvalidArgument with a message
 * (NULL, never created, or already destroyed). */
ncclResult_t tt_comm_check(ncclComm_t comm, const char *caller);
int tt_comm_rank(ncclComm_t comm);
int tt_comm_nranks(ncclComm_t comm);
/* The first error latched on the communicator (ncclCommGetAsyncError). */
ncclResult_t tt_comm_async_error(ncclComm_t comm);

/* Runs a collective. Arguments were validated by the caller. */
ncclResult_t tt_coll_run(ncclComm_t comm, const struct tt_coll_args *args);

#endif
