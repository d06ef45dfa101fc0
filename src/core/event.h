/* Per-operation events (core/event.c): tuttiEvent_t. An event recorded after an operation tells
 * when that operation (and every one queued before it on the same stream) completed, and with
 * what error, whichever way it was issued: on a host stream, on a nonblocking communicator's
 * queue, inside a group (the group's batch), or blocking (complete at once). This is what a
 * PyTorch Work waits on. */
#ifndef TT_CORE_EVENT_H
#define TT_CORE_EVENT_H

#include "core/engine.h"
#include "nccl.h"

struct ncclComm;
struct tuttiEvent_st;

ncclResult_t tt_event_create(struct tuttiEvent_st **out);
/* ncclSuccess when `ev` looks like a live event (its magic), else ncclInvalidArgument. */
ncclResult_t tt_event_check(const struct tuttiEvent_st *ev, const char *caller);
ncclResult_t tt_event_destroy(struct tuttiEvent_st *ev);
/* Records `ev` after the operations issued so far by `comm` on `stream` (NULL: the
 * communicator's own queue when it is nonblocking; complete at once when it is blocking). */
ncclResult_t tt_event_record(struct tuttiEvent_st *ev, struct ncclComm *comm,
                             cudaStream_t stream);
/* ncclInProgress while pending; then the result of the operations it follows. */
ncclResult_t tt_event_query(struct tuttiEvent_st *ev);
ncclResult_t tt_event_synchronize(struct tuttiEvent_st *ev);
/* Sleeps until `ev` is no longer pending, at most timeout_us (< 0: no limit); then as query. */
ncclResult_t tt_event_wait(struct tuttiEvent_st *ev, int64_t timeout_us);

#endif
