/* The timeline trace (TUTTI_TRACE_FILE): each communicator records what its rank did, every
 * operation and the steps inside it, with their start and end times, and writes them as one
 * Chrome trace-event JSON file when it is destroyed or aborted (`tutti-trace` merges the files of
 * all ranks into one timeline and draws it; docs/observe.md).
 *
 * Cost: a communicator without a trace has none (its operations hold a NULL trace pointer, and
 * every hook is one branch on it). A traced one records into a buffer of TUTTI_TRACE_EVENTS
 * entries allocated at init: recording is a clock read and an atomic increment, never a lock,
 * an allocation or a system call; events past the buffer's end are counted and dropped.
 *
 * Thread-safety: any thread may record at any time (slots are claimed atomically); the file is
 * written by tt_trace_close, once no thread records any more. */
#ifndef TT_UTIL_TRACE_H
#define TT_UTIL_TRACE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "nccl.h"

enum tt_trace_kind { TT_TRACE_OP = 1, TT_TRACE_STEP = 2 };

/* One interval of the timeline. Every text is static (a name table's entry) or NULL. */
struct tt_trace_event {
    uint64_t start;    /* tt_trace_now's clock */
    uint64_t end;
    const char *name;  /* operation: "AllReduce", "Send"...; step: "RecvReduceSend", "publish" */
    const char *algo;  /* operation: the algorithm and protocol that ran it */
    const char *proto;
    const char *dtype; /* operation: datatype and reduction */
    const char *redop;
    uint64_t seq;      /* the operation's sequence number on its lane (a step: its operation's) */
    uint64_t count;    /* operation: NCCL's count */
    uint64_t bytes;    /* operation: its buffer's bytes; step: the bytes it moved */
    int32_t lane;      /* the timeline's row: TT_TRACE_LANE_COLL, or one per peer and direction */
    int32_t send_to;   /* step: the peer it sent to, -1 none; operation: the peer of a send */
    int32_t recv_from; /* step: the peer it received from; operation: the peer of a receive */
    int32_t root;      /* operation: root of Broadcast/Reduce, else -1 */
    int32_t step;      /* step: its index within the operation, from 0 */
    uint8_t kind;      /* enum tt_trace_kind; 0: claimed, never filled */
};

/* Rows of the timeline: collectives on one, and each peer's sends and receives on their own. */
#define TT_TRACE_LANE_COLL 0
#define TT_TRACE_LANE_SEND(peer) (1 + 2 * (peer))
#define TT_TRACE_LANE_RECV(peer) (2 + 2 * (peer))

/* Counters (TUTTI_STATS=1, or with the trace): operations, bytes and time per collective and
 * algorithm. `ticks` is in tt_trace_now's clock; tt_trace_stats converts it. */
#define TT_TRACE_STATS 64
struct tt_trace_stat {
    const char *name; /* static text, as in events */
    const char *algo;
    uint64_t ops;
    uint64_t bytes;
    uint64_t ticks;
};

struct tt_trace {
    pthread_mutex_t stats_lock;
    int nstats;
    struct tt_trace_stat stats[TT_TRACE_STATS];
    bool tsc;              /* times are TSC ticks (an invariant TSC), else CLOCK_MONOTONIC ns */
    uint64_t tsc0, mono0;  /* one reading of both clocks at create, to convert ticks to ns */
    struct tt_trace_event *events;
    uint64_t capacity;
    _Atomic uint64_t used; /* slots claimed; more than capacity: the rest were dropped */
    int rank;
    int nranks;
    uint64_t comm_id;      /* the communicator's number in this process */
    int owner;             /* the process that made it: a child of fork() writes no file */
    _Atomic bool written;  /* its file is written (at close, or at exit) */
    char path[4096];       /* the file, its pattern expanded */
};

/* A trace for the communicator of `rank`, or *out = NULL when neither TUTTI_TRACE_FILE nor
 * TUTTI_STATS is set (with TUTTI_STATS alone it keeps counters and no events).
 * Fails (ncclSystemError) only when the buffer cannot be allocated. */
ncclResult_t tt_trace_create(struct tt_trace **out, int rank, int nranks, uint64_t comm_id);
/* Writes the trace's file (a failure is logged at WARN, not returned) and frees it. NULL is
 * fine. No thread may record into it any more. */
void tt_trace_close(struct tt_trace *trace);
/* Writes the file now, once, for a communicator the process ends without destroying (at exit):
 * what was recorded so far (an event another thread is filling at that moment may be
 * incomplete). Only in the process that made the trace; NULL is fine. */
void tt_trace_write_now(struct tt_trace *trace);

/* The trace's clock: the TSC where the CPU has an invariant one (a few nanoseconds to read),
 * else, or with TUTTI_TRACE_CLOCK=monotonic, CLOCK_MONOTONIC (over a hundred nanoseconds in some
 * virtual machines). Ticks become nanoseconds when the file is written. */
static inline uint64_t tt_trace_now(const struct tt_trace *trace)
{
#if defined(__x86_64__) || defined(__i386__)
    if (trace->tsc) return __builtin_ia32_rdtsc();
#endif
    (void)trace;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Claims the next slot, or NULL when the buffer is full (counted as dropped). The caller fills
 * it; the file is written only once every recording thread is done (tt_trace_close). */
static inline struct tt_trace_event *tt_trace_claim(struct tt_trace *trace)
{
    uint64_t i = atomic_fetch_add_explicit(&trace->used, 1, memory_order_relaxed);
    return i < trace->capacity ? &trace->events[i] : NULL;
}

/* Adds one finished operation to the counters (takes a lock: only when counting is on). */
void tt_trace_count(struct tt_trace *trace, const char *name, const char *algo, uint64_t bytes,
                    uint64_t ticks);
/* Copies up to `max` counter rows, time converted to nanoseconds (in `ticks`); returns how many
 * rows there are. */
int tt_trace_stats(struct tt_trace *trace, struct tt_trace_stat *out, int max);

/* Expands a TUTTI_TRACE_FILE pattern: %r rank, %p pid, %h host name, %c the communicator's
 * number in this process, %% a percent sign. Returns false when it does not fit. */
bool tt_trace_expand(const char *pattern, int rank, uint64_t comm_id, char *out, size_t bytes);

#endif
