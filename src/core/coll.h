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

/* Queues device-direct Sends and Recvs on `stream`: for each of `ncomms` communicators, its
 * counts[c] operations at ops[c] (a group's, each communicator's in issue order, or one alone),
 * in rounds across all of them (device/device.h); a failure half-way fails the communicator. */
struct tt_device_p2p;
ncclResult_t tt_coll_device_p2p(ncclComm_t *comms, int ncomms, cudaStream_t stream,
                                struct tt_device_p2p *const *ops, const int *counts);

#endif
