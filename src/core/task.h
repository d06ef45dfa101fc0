/* Tasks from operations: what the submission layer hands the engine. Initialising a task
 * resolves its reduction, binds it to its lane and its connections, and, for a collective, asks
 * selection (algo/tune.c) which algorithm runs it and binds the op to that algorithm. */
#ifndef TT_CORE_TASK_H
#define TT_CORE_TASK_H

#include <stdbool.h>
#include <stddef.h>

#include "core/engine.h"
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
    int peer; /* ncclSend / ncclRecv */
    cudaStream_t stream;
};

/* Bytes of sendbuff and recvbuff that `rank` of `nranks` reads and writes (0: the buffer is
 * ignored there), by NCCL's rules: Broadcast reads sendbuff at the root only, Reduce writes
 * recvbuff at the root only; AllGather's recvbuff and ReduceScatter's sendbuff hold nranks
 * blocks; AlltoAll's both; Gather's recvbuff and Scatter's sendbuff at the root. */
void tt_task_buffer_counts(const struct tt_coll_args *args, int rank, int nranks,
                           size_t *send_count, size_t *recv_count);

/* Fills `task` for a validated operation: a collective, TT_COLL_SEND/RECV with `peer`, or
 * TT_COLL_COPY. Resolves the reduction (built-in or user op). Allocates nothing. */
ncclResult_t tt_task_init(struct tt_task *task, struct ncclComm *comm,
                          const struct tt_coll_args *args, int peer);
/* The same on the heap, for groups and streams. */
ncclResult_t tt_task_create(struct ncclComm *comm, const struct tt_coll_args *args, int peer,
                            struct tt_task **out);
/* The cost model's estimate of one task, in microseconds (ncclGroupSimulateEnd). */
float tt_task_estimate_us(const struct tt_task *t);

/* How an AlltoAll of `block_bytes` per peer runs: whole as one OneShot task (every rank's input
 * fits its mailbox slot), whole as one Direct task, or as sends and receives. It depends on the
 * communicator, the size and the buffers' windows only, so every rank decides alike. */
enum tt_alltoall_path { TT_ALLTOALL_P2P, TT_ALLTOALL_ONESHOT, TT_ALLTOALL_DIRECT };
enum tt_alltoall_path tt_task_alltoall_path(const struct ncclComm *comm, const void *sendbuff,
                                            const void *recvbuff, size_t block_bytes);

#endif
