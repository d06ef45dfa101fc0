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
typedef ncclResult_t (*tt_group_wait_fn)(void *arg, uint64_t tag);

/* ncclSuccess when `comm` is still the live, usable communicator whose id was `id` when the
 * operation was added (another one made later at the same address is not); the lifecycle
 * layer's tt_comm_check_same, passed in from above. */
typedef ncclResult_t (*tt_group_live_fn)(ncclComm_t comm, uint64_t id, const char *caller);

ncclResult_t tt_group_start(void);
/* Ends the outermost group: checks with `live` that no communicator of its operations was
 * destroyed or aborted since (by another thread) and runs them all, or none. */
ncclResult_t tt_group_end(tt_group_live_fn live);
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
/* Defers a device-direct operation (core/coll.c decided it) to the group end, with the same
 * rules on streams as tt_group_add. There, before the staged operations, the Sends and Recvs
 * are queued in rounds (tt_coll_device_p2p), then the collectives in issue order; but when the
 * collectives span several communicators, ranks could queue them in different orders and wait
 * on each other, so they are staged instead. */
ncclResult_t tt_group_add_device(struct ncclComm *comm, const struct tt_coll_args *args);
/* Makes the outermost end call fn(arg) and wait for it before it runs the group (a background
 * init); its error fails the group. */
ncclResult_t tt_group_add_wait(tt_group_wait_fn fn, void *arg, uint64_t tag);

#endif
