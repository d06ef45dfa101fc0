/* Groups: between ncclGroupStart and the outermost ncclGroupEnd, operations issued by this
 * thread are collected (thread-local state) and then submitted and progressed together, which
 * makes matching sends and receives, and one thread driving several communicators, free of
 * deadlock. Communicator inits issued inside a group run in the background and the outermost
 * end waits for them, so one thread can initialise several ranks. */
#ifndef TT_CORE_GROUP_H
#define TT_CORE_GROUP_H

#include "core/task.h"

typedef ncclResult_t (*tt_group_expand_fn)(struct tt_batch *b, struct ncclComm *comm,
                                           const struct tt_coll_args *args);

int tt_group_depth(void);
/* Defers an operation to the group end; `expand` turns it into tasks. */
ncclResult_t tt_group_add(struct ncclComm *comm, const struct tt_coll_args *args,
                          tt_group_expand_fn expand);
/* Makes the outermost end wait for `comm`'s background init. */
ncclResult_t tt_group_add_init(struct ncclComm *comm);

#endif
