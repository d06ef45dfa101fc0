/* The engine: tasks on lanes, batches progressed together, and the blocking driver.
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
 * completion, failing it when nothing has moved for TUTTI_TIMEOUT_MS or on abort.
 *
 * The engine sees of a communicator only its run-time state (core/state.h): a task's `comm` is
 * an opaque handle for the layers above. */
#ifndef TT_CORE_ENGINE_H
#define TT_CORE_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "algo/algo.h"
#include "algo/tune.h"
#include "core/state.h"

struct ncclComm;

enum tt_event_state { TT_EVENT_IDLE, TT_EVENT_PENDING, TT_EVENT_DONE };

/* The part of an event (core/event.h) that a batch holds while the event is pending: the
 * stream that queued the batch completes it when the batch ends. */
struct tt_event_rec {
    _Atomic int state;             /* enum tt_event_state */
    _Atomic(cudaStream_t) stream;  /* where it is recorded, while PENDING */
    struct tt_event_rec *next;     /* in its batch's list */
    /* Guards result and reason: a record anew rewrites them while another thread may be
     * reading the last record's (tt_event_rec_finish, and the query in core/event.c). */
    pthread_mutex_t lock;
    ncclResult_t result;           /* set with state DONE */
    char reason[TT_REASON_BYTES];  /* why, when result is an error */
};

/* Completes `rec` with `result` (and `reason`, when an error; NULL: none recorded). */
void tt_event_rec_finish(struct tt_event_rec *rec, ncclResult_t result, const char *reason);

struct tt_lane {
    _Atomic uint64_t next_ticket;
    _Atomic uint64_t serving;
};

struct tt_task {
    struct ncclComm *comm;    /* opaque here */
    uint64_t comm_id;         /* its id when the task was made (tt_group_live_fn) */
    struct tt_comm_state *st; /* the communicator's run-time state */
    struct tt_op op;
    struct tt_lane *lane; /* NULL: local work that needs no lane */
    int peer;             /* send/recv: the peer */
    uint64_t ticket;
    uint64_t seq;
    bool started;
    bool done;
    bool verifying;       /* its part is done; it checks that every peer ran the same op */
    bool heap;            /* allocated on the heap (freed with its batch) */
    int flight_slot;      /* its flight recorder slot + 1 while recorded stalled, else 0 */
    ncclResult_t result;
    struct tt_task *next;
    /* The host stream a group's operation was issued on, where a group spans several (its
     * batch is split over them at the group's end, core/dispatch.c); else unused. */
    cudaStream_t stream;
    /* Last, so that task init clears everything before it and only the head of the reason. */
    struct tt_tune_choice choice; /* collectives: the algorithm chosen and why */
};

struct tt_batch {
    struct tt_task *head;
    struct tt_task *tail;
    int count;
    int pending;
    uint64_t last_progress_ns;
    uint64_t last_alive_ns;       /* the last liveness check of the peers waited for */
    uint64_t gone_since_ns;       /* a peer it depends on was first seen gone (0: none) */
    bool published_wait;          /* it published whom it waits for in the team mailbox */
    bool in_flight_recorder;      /* a task of it is in the flight recorder (stalled) */
    int forms_peer;               /* the peer last seen waiting in point-to-point for an
                                     operation this rank never issued (tt_forms_check)... */
    uint64_t forms_since_ns;      /* ...since when (0: none seen) */
    ncclResult_t result;          /* the first task error, once the batch ended */
    char *reason;                 /* why its first task failed (heap; NULL: none failed) */
    struct tt_event_rec *events;  /* events recorded on this batch (core/event.c) */
    bool background;              /* queued on its first communicator's background stream (a
                                     nonblocking call): its other communicators' async error
                                     says ncclInProgress until it ends */
    struct tt_batch *next;        /* in a stream's queue */
    uint64_t enqueued;            /* its place among every stream's enqueues (core/stream.c) */
    /* Device work (CUDA builds, core/stream.c): the batch was issued with device buffers or on
     * a device stream. It starts once gate[0] reached gate_seq (the stream got there) and
     * writes gate_seq to gate[1] when it ends (the stream goes on); NULL: no gate. */
    bool device;
    uint32_t gate_seq;
    uint32_t *gate;
    struct tt_device_stage *stages; /* device buffers staged for it, until the stream owns them */
};

static inline void tt_engine_batch_init(struct tt_batch *b)
{
    *b = (struct tt_batch){0};
}
void tt_engine_batch_add(struct tt_batch *b, struct tt_task *task);
/* Frees the heap tasks of `b` and stages it still owns (not `b` itself). */
void tt_engine_batch_clear(struct tt_batch *b);

/* Gives every task of the batch its sequence number and its ticket, and logs it. Must be called
 * in program order (the order the operations were issued in), after their connections exist. */
void tt_engine_submit(struct tt_batch *b);
/* Advances every startable task once. *done when all tasks ended; the batch's result is the
 * first task error. Never blocks. */
ncclResult_t tt_engine_progress(struct tt_batch *b, bool *done, bool *progressed,
                                struct tt_wait_hint *hint);
/* Drives a submitted batch to its end on the calling thread. */
ncclResult_t tt_engine_run(struct tt_batch *b);
/* Submits and runs one blocking task (a collective that needs no connecting) on the calling
 * thread: polled directly while its lane is free, through tt_engine_run otherwise. */
ncclResult_t tt_engine_run_task(struct tt_task *t);
/* Fails the batch when it has not moved for the timeout or a communicator was aborted. */
ncclResult_t tt_engine_check_stall(struct tt_batch *b);
/* Fails every task of a queued batch that has not started (its communicator is stopped) with
 * `res`, and lets go of the communicator: the batch then ends as soon as its stream reaches it,
 * without touching what ncclCommAbort frees. */
void tt_engine_cancel(struct tt_batch *b, ncclResult_t res);
/* Completes every event recorded on the ended batch `b` with its result, and its reason when
 * it failed (under the lock of the stream that owns the batch). */
void tt_engine_complete_events(struct tt_batch *b);
/* Whether the peer the batch waits for runs on the calling thread's CPU (then the caller
 * should yield rather than spin); moves the thread off that CPU when it may. Records the
 * caller's CPU in its team mailbox for its peers' waiters. */
bool tt_engine_peer_on_my_cpu(const struct tt_batch *b);

#endif
