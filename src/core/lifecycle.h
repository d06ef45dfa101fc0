/* Communicator lifecycle (core/comm.c, core/comm_split.c): init, destroy, abort, finalize,
 * revoke, and communicators made from communicators. The api layer validated every argument;
 * `comm` is live unless said otherwise. */
#ifndef TT_CORE_LIFECYCLE_H
#define TT_CORE_LIFECYCLE_H

#include <stdbool.h>
#include <stddef.h>

#include "nccl.h"
#include "tutti.h"

struct ncclComm;

/* ncclCommInitRank(Config): `id` was checked non-NULL, 0 <= rank < nranks; `config` (NULL
 * for defaults) was validated. With config->blocking == 0 the communicator is returned at once
 * and finishes initialising in the background: ncclCommGetAsyncError reports ncclInProgress
 * until it is ready, and the call returns ncclInProgress. */
ncclResult_t tt_comm_init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank,
                               const ncclConfig_t *config);
/* ncclCommDestroy / ncclCommAbort: free everything. `outermost` when no other public call
 * encloses this one (TT_CALL_OUTERMOST): the thread then touches nothing else while it waits
 * for other threads to leave their calls. */
ncclResult_t tt_comm_destroy(ncclComm_t comm, bool outermost);
ncclResult_t tt_comm_abort(ncclComm_t comm, bool outermost);
/* ncclSuccess when `comm` is a live communicator, else ncclInvalidArgument with a message
 * (NULL, never created, or already destroyed). */
ncclResult_t tt_comm_check(ncclComm_t comm, const char *caller);
/* The same for a handle kept since an operation was added: still registered with the same id
 * (not another communicator made since at the same address), and usable (not aborted or
 * revoked meanwhile). */
ncclResult_t tt_comm_check_same(ncclComm_t comm, uint64_t id, const char *caller);
int tt_comm_rank(ncclComm_t comm);
/* The CUDA device current when the communicator was made (-1: none, or a host build). */
int tt_comm_cuda_device(ncclComm_t comm);
int tt_comm_nranks(ncclComm_t comm);
/* The first error latched on the communicator (ncclCommGetAsyncError). */
ncclResult_t tt_comm_async_error(ncclComm_t comm);
/* Why the communicator failed ("" while it has not, or when no reason was recorded). */
const char *tt_comm_fail_reason(ncclComm_t comm);
/* Waits for a background init to end and returns its result. */
ncclResult_t tt_comm_wait_ready(struct ncclComm *comm);
ncclResult_t tt_comm_finalize(ncclComm_t comm);
/* ncclCommRevoke: operations in flight fail, new ones are refused; the communicator may still
 * be shrunk, split from, destroyed or aborted. */
ncclResult_t tt_comm_revoke(ncclComm_t comm);

/* Up to `max` live communicators for which want(comm) holds (called under the registry's lock:
 * no blocking there), taken from `*cursor` on, which moves on by `max`. The caller must be in
 * a call (TT_CALL_SCOPE) so that none is freed under it. */
size_t tt_comm_pick(bool (*want)(struct ncclComm *comm), struct ncclComm **out, size_t max,
                    size_t *cursor);

/* tuttiCommDump: logs the communicator's stalled operations (core/state.h). */
ncclResult_t tt_comm_dump(ncclComm_t comm);
/* TUTTI_DUMP_SIGNAL=1: once per process, makes SIGUSR1 dump every live communicator
 * (core/dump.c). */
void tt_dump_signal_start(void);
/* tuttiCommStats (include/tutti.h), arguments checked. */
ncclResult_t tt_comm_stats(ncclComm_t comm, tuttiCommStat_t *rows, int max_rows, int *nrows);

/* Communicators made from communicators, and several at once (core/comm_split.c). */
ncclResult_t tt_comm_split(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           const ncclConfig_t *config);
ncclResult_t tt_comm_shrink(ncclComm_t comm, const int *exclude_ranks, int exclude_count,
                            ncclComm_t *newcomm, const ncclConfig_t *config, int flags);
/* ncclCommGetUniqueId and ncclCommGrow; a new rank of a grow passes comm NULL. */
ncclResult_t tt_comm_get_unique_id(ncclComm_t comm, ncclUniqueId *id);
ncclResult_t tt_comm_grow(ncclComm_t comm, int nranks, const ncclUniqueId *id, int rank,
                          ncclComm_t *newcomm, const ncclConfig_t *config);
ncclResult_t tt_comm_init_all(ncclComm_t *comms, int ndev);
ncclResult_t tt_comm_init_rank_scalable(ncclComm_t *out, int nranks, int rank, int id_count,
                                        const ncclUniqueId *ids, const ncclConfig_t *config);

#endif
