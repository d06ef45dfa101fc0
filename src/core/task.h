/* Tasks and batches: the engine's units of work.
 *
 * A task is one operation of one communicator (a collective, a send, a receive, a local copy):
 * an algorithm op plus the lane it runs on. A lane is a set of connections that must carry
 * operations one at a time and in the same order on both of their ends: the ring of a
 * communicator, or one direction of one peer pair. At submission a task takes the lane's next
 * ticket; it starts only when the lane serves that ticket, and serves the next one when it ends.
 * Tickets are taken in program order, so operations issued from different threads or streams
 * keep the order the ranks agreed on, whichever thread drives them.
 *
 * A batch is the set of tasks that progress together: one blocking call, one group, one
 * operation queued on a host stream. Progressing a batch never blocks; running it drives it to
 * completion, failing it when nothing has moved for TUTTI_TIMEOUT_MS or on abort. */
#ifndef TT_CORE_TASK_H
#define TT_CORE_TASK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "algo/algo.h"
#include "algo/tune.h"
#include "core/core.h"

struct ncclComm;
struct tt_stream;

struct tt_lane {
    _Atomic uint64_t next_ticket;
    _Atomic uint64_t serving;
};

struct tt_task {
    struct ncclComm *comm;
    struct tt_op op;
    struct tt_lane *lane; /* NULL: local work that needs no lane */
    int peer;             /* send/recv: the peer */
    uint64_t ticket;
    uint64_t seq;
    bool started;
    bool done;
    bool heap;            /* allocated by tt_task_create (freed with its batch) */
    ncclResult_t result;
    struct tt_task *next;
    /* Last, so that tt_task_init clears everything before it and only the head of the reason. */
    struct tt_tune_choice choice; /* collectives: the algorithm chosen and why */
};

struct tt_batch {
    struct tt_task *head;
    struct tt_task *tail;
    int count;
    int pending;
    uint64_t last_progress_ns;
    struct tt_batch *next; /* in a stream's queue */
};

/* Fills `task` for a validated operation: a collective, TT_COLL_SEND/RECV with `peer`, or
 * TT_COLL_COPY. Resolves the reduction (built-in or user op). Allocates only once per
 * communicator: Tree Reduce's staging, at its first use. */
ncclResult_t tt_task_init(struct tt_task *task, struct ncclComm *comm,
                          const struct tt_coll_args *args, int peer);
/* The same on the heap, for groups and streams. */
ncclResult_t tt_task_create(struct ncclComm *comm, const struct tt_coll_args *args, int peer,
                            struct tt_task **out);

static inline void tt_batch_init(struct tt_batch *b)
{
    *b = (struct tt_batch){0};
}
void tt_batch_add(struct tt_batch *b, struct tt_task *task);
/* Frees the heap tasks of `b` (not `b` itself). */
void tt_batch_clear(struct tt_batch *b);

/* Connects what the batch's point-to-point tasks need and gives every task its ticket. Must be
 * called in program order (the order the operations were issued in). */
ncclResult_t tt_batch_submit(struct tt_batch *b);
/* Advances every startable task once. *done when all tasks ended; the batch's result is the
 * first task error. Never blocks. */
ncclResult_t tt_batch_progress(struct tt_batch *b, bool *done, bool *progressed,
                               struct tt_wait_hint *hint);
/* Drives a submitted batch to its end on the calling thread. */
ncclResult_t tt_batch_run(struct tt_batch *b);
/* Submits and runs one blocking task (a collective that needs no connecting) on the calling
 * thread: polled directly while its lane is free, through tt_batch_run otherwise. */
ncclResult_t tt_task_run(struct tt_task *t);
/* Fails the batch when it has not moved for the timeout or a communicator was aborted. */
ncclResult_t tt_batch_check_stall(struct tt_batch *b);
/* Whether the peer the batch waits for runs on the calling thread's CPU (then the caller
 * should yield rather than spin); moves the thread off that CPU when it may (core/engine.c).
 * Records the caller's CPU in its mailbox for its peers' waiters. */
bool tt_batch_peer_on_my_cpu(const struct tt_batch *b);

/* The cost model's estimate of one task, in microseconds (ncclGroupSimulateEnd). */
float tt_task_estimate_us(const struct tt_task *t);

/* How an AlltoAll of `block_bytes` per peer runs (core/coll.c): whole as one OneShot task (every
 * rank's input fits its mailbox slot), whole as one Direct task, or as sends and receives. It
 * depends on the communicator, the size and the buffers' windows only, so every rank decides
 * alike. */
enum tt_alltoall_path { TT_ALLTOALL_P2P, TT_ALLTOALL_ONESHOT, TT_ALLTOALL_DIRECT };
enum tt_alltoall_path tt_alltoall_path(const struct ncclComm *comm, const void *sendbuff,
                                       const void *recvbuff, size_t block_bytes);

/* Connects the point-to-point connections the batch's tasks need (core/p2p.c). */
ncclResult_t tt_p2p_connect(struct tt_batch *b);
/* Makes Tree's connections (comm->tree) to every peer any Tree operation of this rank may use,
 * at init, when every rank takes part: a connection made later, inside the first Tree
 * operation, would wait for peers that may be busy with other operations (ranks need not group
 * collectives alike). */
ncclResult_t tt_tree_connect(struct ncclComm *comm);

#endif
