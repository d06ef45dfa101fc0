/* Groups (core/group.c): between ncclGroupStart and the outermost ncclGroupEnd, operations issued
 * by this thread are collected (thread-local state) and then dispatched together, which makes
 * matching sends and receives, and one thread driving several communicators, free of deadlock.
 * Communicator inits issued inside a group run in the background and the outermost end waits
 * for them (through tt_group_add_wait), so one thread can initialise several ranks. */
#ifndef TT_CORE_GROUP_H
#define TT_CORE_GROUP_H

#include "core/task.h"

typedef ncclResult_t (*tt_group_expand_fn)(struct tt_batch *b, struct ncclComm *comm,
                                           const struct tt_coll_args *args);
typedef ncclResult_t (*tt_group_wait_fn)(void *arg);

ncclResult_t tt_group_start(void);
ncclResult_t tt_group_end(void);
/* Estimates the group's time with the selection model and ends it without running anything. */
ncclResult_t tt_group_simulate_end(ncclSimInfo_t *sim);
/* Records an error of a call made inside a group, which then fails as a whole. */
void tt_group_note_error(ncclResult_t res);
int tt_group_depth(void);
/* Defers an operation to the group end; `expand` turns it into tasks. The group takes the
 * operation's staged device buffers (`stages`, may be NULL) in any case; `device` makes the
 * whole group go through its device stream (core/coll.c). */
ncclResult_t tt_group_add(struct ncclComm *comm, const struct tt_coll_args *args,
                          tt_group_expand_fn expand, struct tt_device_stage *stages,
                          bool device);
/* Defers a device-direct Send or Recv (core/coll.c) to the group end, which queues a
 * communicator's such operations together, in issue order, before the group's other operations
 * (tt_coll_device_p2p); the same rules on streams as tt_group_add. */
struct tt_device_p2p;
ncclResult_t tt_group_add_device_p2p(struct ncclComm *comm, const struct tt_coll_args *args,
                                     const struct tt_device_p2p *op);
/* Defers a device-direct collective to the group end. There, when the group's device-direct
 * collectives all belong to one communicator, they are queued in issue order after its
 * device-direct Sends and Recvs; across several communicators ranks could queue them in
 * different orders and wait on each other, so they are then staged instead. */
ncclResult_t tt_group_add_device_coll(struct ncclComm *comm, const struct tt_coll_args *args);
/* Makes the outermost end call fn(arg) and wait for it before it runs the group (a background
 * init); its error fails the group. */
ncclResult_t tt_group_add_wait(tt_group_wait_fn fn, void *arg);

#endif
