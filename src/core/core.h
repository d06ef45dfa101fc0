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
#include "reduce/reduce.h"

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
    int peer; /* ncclSend / ncclRecv */
    cudaStream_t stream;
};

/* ncclCommInitRank(Config): `id` was checked non-NULL, 0 <= rank < nranks; `config` (NULL
 * for defaults) was validated. With config->blocking == 0 the communicator is returned at once
 * and finishes initialising in the background: ncclCommGetAsyncError reports ncclInProgress
 * until it is ready, and the call returns ncclInProgress. */
ncclResult_t tt_comm_init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank,
                               const ncclConfig_t *config);
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

/* Issues a collective, a send or a receive (args->coll). Arguments were validated by the
 * caller, the stream included. Inside a group the operation is deferred to the outermost
 * ncclGroupEnd; on a host stream it is queued and ncclSuccess returned; on a nonblocking
 * communicator it runs in the background and ncclInProgress is returned; otherwise it is
 * complete on return. */
ncclResult_t tt_coll_run(ncclComm_t comm, const struct tt_coll_args *args);

/* Groups (core/group.c): thread-local nesting; operations deferred to the outermost end. */
ncclResult_t tt_group_start(void);
ncclResult_t tt_group_end(void);
ncclResult_t tt_group_simulate_end(ncclSimInfo_t *sim);
/* Records an error of a call made inside a group, which then fails as a whole. */
void tt_group_note_error(ncclResult_t res);

/* Host streams (core/stream.c). */
ncclResult_t tt_stream_create(cudaStream_t *out);
ncclResult_t tt_stream_destroy(cudaStream_t stream);
ncclResult_t tt_stream_synchronize(cudaStream_t stream);
ncclResult_t tt_stream_query(cudaStream_t stream);
/* ncclSuccess when `stream` is NULL or a live host stream, else ncclInvalidUsage. */
ncclResult_t tt_stream_check(cudaStream_t stream, const char *caller);

/* Lifecycle beyond init (core/comm.c). */
ncclResult_t tt_comm_finalize(ncclComm_t comm);
/* ncclCommRevoke: operations in flight fail, new ones are refused; the communicator may still
 * be shrunk, split from, destroyed or aborted. */
ncclResult_t tt_comm_revoke(ncclComm_t comm);

/* Communicators made from communicators, and several at once (core/comm_split.c). */
ncclResult_t tt_comm_split(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           const ncclConfig_t *config);
ncclResult_t tt_comm_shrink(ncclComm_t comm, const int *exclude_ranks, int exclude_count,
                            ncclComm_t *newcomm, const ncclConfig_t *config, int flags);
ncclResult_t tt_comm_init_all(ncclComm_t *comms, int ndev);
ncclResult_t tt_comm_init_rank_scalable(ncclComm_t *out, int nranks, int rank, int id_count,
                                        const ncclUniqueId *ids, const ncclConfig_t *config);

/* User-defined reduction operators (core/redop.c). Resolving turns a built-in or user op into
 * the kernels' form for this dtype, or fails with a message (unknown op, dtype mismatch). */
ncclResult_t tt_redop_create_premulsum(ncclComm_t comm, ncclRedOp_t *op, const void *scalar,
                                       ncclDataType_t dtype, ncclScalarResidence_t residence);
ncclResult_t tt_redop_destroy(ncclComm_t comm, ncclRedOp_t op);
ncclResult_t tt_comm_redop_resolve(ncclComm_t comm, ncclRedOp_t op, ncclDataType_t dtype,
                                   struct tt_redop *out);

/* Memory (core/mem.c): ncclMemAlloc memory is shared memory other ranks of the host can map, and
 * registering ordinary memory moves its whole pages into such memory; registrations and windows
 * are recorded per communicator for the zero-copy paths. */
ncclResult_t tt_mem_alloc(void **ptr, size_t bytes);
ncclResult_t tt_mem_free(void *ptr);
/* Whether part of [ptr, ptr + bytes) lies in shareable memory: an ncclMemAlloc block, which must
 * hold all of it, or pages a registration moved into a memory file, which may leave a head and a
 * tail outside. Fills *out for peers to map that part (out->fd = -1 otherwise). */
struct tt_host_region;
bool tt_mem_region(const void *ptr, size_t bytes, struct tt_host_region *out);
ncclResult_t tt_comm_register(ncclComm_t comm, void *buff, size_t bytes, void **handle);
ncclResult_t tt_comm_deregister(ncclComm_t comm, void *handle);
ncclResult_t tt_comm_window_register(ncclComm_t comm, void *buff, size_t bytes,
                                     ncclWindow_t *win, int flags);
ncclResult_t tt_comm_window_deregister(ncclComm_t comm, ncclWindow_t win);
/* Whether [ptr, ptr + bytes) lies inside one of the communicator's symmetric windows
 * (NCCL_WIN_COLL_SYMMETRIC) that every rank put in shareable memory: NCCL's contract is that the
 * other ranks then pass window buffers too, so the cost model may count on their peers mapping
 * them. */
bool tt_comm_sym_window(const struct ncclComm *comm, const void *ptr, size_t bytes);

#endif
