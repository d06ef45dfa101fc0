/* Issuing operations (core/coll.c): the API's operation expanded into tasks and dispatched. */
#ifndef TT_CORE_COLL_H
#define TT_CORE_COLL_H

#include "core/task.h"

/* Issues a collective, a send or a receive (args->coll). Arguments were validated by the
 * caller, the stream included. Inside a group the operation is deferred to the outermost
 * ncclGroupEnd; on a host stream it is queued and ncclSuccess returned; on a nonblocking
 * communicator it runs in the background and ncclInProgress is returned; otherwise it is
 * complete on return. */
ncclResult_t tt_coll_run(ncclComm_t comm, const struct tt_coll_args *args);

/* Queues a collective on the device-direct path (its eligibility decided by tt_coll_run); a
 * failure half-way fails the communicator, whose peers' streams may wait on it. */
ncclResult_t tt_coll_device_direct(ncclComm_t comm, const struct tt_coll_args *args);
/* Adds a collective to the current group on the staged path (its device buffers copied through
 * pinned host memory): what tt_coll_run does inside a group for one not device-direct. */
ncclResult_t tt_coll_group_staged(ncclComm_t comm, const struct tt_coll_args *args);

/* A device-direct operation a group deferred to its end (core/group.c); comm NULL once it was
 * queued or staged. */
struct tt_coll_deferred {
    struct ncclComm *comm;
    uint64_t comm_id; /* comm->id when added (tt_group_live_fn) */
    struct tt_coll_args args;
};
/* Queues the device-direct Sends and Recvs among `ops` (the others are skipped) on `stream`:
 * each communicator's in issue order, in rounds across all of them (device/device.h), and marks
 * them queued; a failure half-way fails the communicator. */
ncclResult_t tt_coll_device_p2p(struct tt_coll_deferred *ops, int n, cudaStream_t stream);

#endif
