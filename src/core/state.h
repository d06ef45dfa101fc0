/* The communicator's run-time state that every part of the core shares, the engine included:
 * who this rank is, the flags that stop work (abort, revoke), the first error, the deadline and
 * the spin budget. This is all the engine sees of a communicator; the rest (connections,
 * bootstrap, tuning) belongs to struct ncclComm (core/comm.h), which embeds this.
 *
 * Thread-safety: every field that changes after init is atomic, so any thread may read it while
 * another issues, progresses or aborts. */
#ifndef TT_CORE_STATE_H
#define TT_CORE_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl.h"
#include "util/err.h"

struct tt_team;

/* The flight recorder: the operations of a communicator that are stalled right now (a wait
 * that went past its first stall check), what they wait for and since when. Only the slow path
 * writes it, so the fast path pays nothing; tuttiCommDump, SIGUSR1 (TUTTI_DUMP_SIGNAL=1) and a
 * timeout print it. */
#define TT_FLIGHT_SLOTS 32
struct tt_flight_entry {
    bool used;
    uint64_t seq;
    int coll;          /* enum tt_coll */
    size_t count;
    int dtype;         /* ncclDataType_t */
    const char *waits; /* "data from", "free buffer space at", ... (static text) */
    int peer;          /* -1: its turn on its lane */
    uint64_t since_ns; /* when it was first seen stalled */
};
struct tt_flight {
    pthread_mutex_t lock;
    struct tt_flight_entry entries[TT_FLIGHT_SLOTS];
};

enum tt_comm_phase { TT_COMM_INITIALIZING, TT_COMM_READY, TT_COMM_FAILED };

struct tt_comm_state {
    int rank;
    int nranks;
    int64_t timeout_ms;         /* TUTTI_TIMEOUT_MS: a stall longer than this fails */
    bool check_rooted;          /* TUTTI_CHECK_ROOTED: rooted collectives verify their peers */
    _Atomic uint32_t spin_limit; /* polls before a blocked wait yields, adapted (core/engine.c) */
    uint32_t spin_max;           /* its ceiling */
    /* When this rank last moved a thread off a peer's CPU (core/engine.c). */
    _Atomic uint64_t moved_off_ns;
    _Atomic int abort;
    _Atomic int revoked;
    _Atomic int phase;          /* enum tt_comm_phase */
    _Atomic int async_error;    /* the first error (ncclResult_t), latched */
    /* Why it failed: the failing thread's last error, written once after async_error, and
     * readable once fail_reason_set is. */
    char fail_reason[TT_REASON_BYTES];
    _Atomic bool fail_reason_set;
    ncclResult_t init_result;   /* written before phase leaves INITIALIZING */
    _Atomic bool finalized;
    struct tt_team *team;       /* the local team, for the waiters' CPU records (or NULL) */
    /* The host's team whether or not it spans the communicator, for failures only: this
     * rank's failure goes into its mailbox, and a stalled wait looks at its local peers'
     * (tt_state_gone_peer). fail_member[r] is rank r's member index, -1 off this host; NULL
     * when the team spans the communicator (members are ranks). */
    struct tt_team *fail_team;
    int *fail_member;
    int *pidfds;                /* [nranks]: a pidfd of each peer on this host, else -1 */
    int npidfds;                /* how many of them are open */
    struct tt_flight *flight;   /* stalled operations (NULL: none recorded) */
    /* Called once with the first error (tt_state_fail): the communicator tells its peers over
     * its connections that it is gone (core/comm.c shuts its sockets down). */
    void (*on_fail)(void *arg);
    void *on_fail_arg;
    /* Called by the thread that ran a failed collective, before tt_state_fail, with its
     * error: the communicator tells the peers across sockets the code and why (core/comm.c:
     * an error frame on the collectives' connections), so that they report the same. */
    void (*on_coll_error)(void *arg, ncclResult_t res, const char *reason);
    /* Whether this rank has issued its point-to-point operation `ticket` with `peer` (a Send
     * to it when `send`, else a Recv from it), or may be issuing it now (a connection is being
     * made); slow path only (core/comm.c reads the lanes the engine does not see). */
    bool (*p2p_issued)(void *arg, int peer, bool send, uint64_t ticket);
};

/* Records or updates a stalled operation; *slot is 0 before its first record and the slot + 1
 * after it. Releases it when done. Both lock the recorder: slow path only. */
void tt_state_flight_record(struct tt_comm_state *st, int *slot,
                            const struct tt_flight_entry *entry);
void tt_state_flight_release(struct tt_comm_state *st, int *slot);
/* Writes the stalled operations to the log at WARN (`why` says what asked). */
void tt_state_flight_dump(struct tt_comm_state *st, const char *why);

static inline ncclResult_t tt_state_error(const struct tt_comm_state *st)
{
    return (ncclResult_t)atomic_load_explicit(&st->async_error, memory_order_acquire);
}

/* Whether work must stop: the communicator was aborted or revoked. */
static inline bool tt_state_stopped(const struct tt_comm_state *st)
{
    return atomic_load_explicit(&st->abort, memory_order_relaxed) ||
           atomic_load_explicit(&st->revoked, memory_order_relaxed);
}

/* Latches `res` as the first error and, the first time, tells the local team's members
 * (transport/team.h) why, so that their waits on this rank fail at once. */
void tt_state_fail(struct tt_comm_state *st, ncclResult_t res);
/* The same with the reason given (tt_state_fail's is this thread's last error). */
void tt_state_fail_because(struct tt_comm_state *st, ncclResult_t res, const char *why);

/* Why the communicator failed ("" when no reason was recorded, or it has not failed). */
static inline const char *tt_state_fail_reason(const struct tt_comm_state *st)
{
    return atomic_load_explicit(&st->fail_reason_set, memory_order_acquire) ? st->fail_reason
                                                                            : "";
}

/* A peer of this host that is gone: `peer` itself when peer >= 0, else any of them. Gone means
 * its process ended (one poll over the pidfds) or its communicator failed (its team mailbox).
 * Returns the rank, with what happened in `why` and the error this rank should return in
 * *code (the peer's own ncclInvalidUsage for a misuse every rank shares, else
 * ncclRemoteError), or -1 while they all may be fine. Peers on
 * other hosts are taken as fine: their connections tell. */
int tt_state_gone_peer(const struct tt_comm_state *st, int peer, ncclResult_t *code, char *why,
                       size_t bytes);
/* Whether `peer`, a rank of this host, has died (its process ended); a failed communicator
 * does not count, as it does for tt_state_gone_peer. */
bool tt_state_peer_died(const struct tt_comm_state *st, int peer);

/* ---- Calls in progress -------------------------------------------------------------------
 *
 * ncclCommAbort (and Destroy) may run while other threads are inside calls on the same
 * communicator; it must not free anything they may still touch. Every public call marks its
 * thread "in a call" for its duration (TT_CALL_SCOPE in api/): one plain store on entry and one
 * on exit to the thread's own record, no atomic read-modify-write on the fast path. The freeing
 * side makes the marks visible with one process-wide barrier (membarrier; a full fence on every
 * entry where the kernel lacks it) and then waits for the threads that were in a call to leave it. A thread that
 * entered after the barrier sees the communicator gone from the registry and never touches it. */
struct tt_call_rec {
    /* Odd while the thread is inside a public call (the outermost one); every entry and every
     * exit adds one, so a waiter also sees a call end and another begin. */
    _Atomic uint64_t calls;
    struct tt_call_rec *next;
};

extern _Thread_local struct tt_call_rec *tt_call_self __attribute__((tls_model("initial-exec")));
extern bool tt_call_fence_each;
struct tt_call_rec *tt_call_register(void);

/* Marks the thread in a call; returns its record, or NULL inside a call already (nested). */
static inline struct tt_call_rec *tt_call_enter(void)
{
    struct tt_call_rec *r = tt_call_self;
    if (r == NULL) r = tt_call_register();
    uint64_t calls = atomic_load_explicit(&r->calls, memory_order_relaxed);
    if (calls & 1) return NULL;
#if defined(__SANITIZE_THREAD__)
    /* ThreadSanitizer models neither fences nor membarrier: a sequentially consistent store
     * gives it the same order to see. */
    atomic_store_explicit(&r->calls, calls + 1, memory_order_seq_cst);
#else
    atomic_store_explicit(&r->calls, calls + 1, memory_order_relaxed);
    if (tt_call_fence_each)
        atomic_thread_fence(memory_order_seq_cst);
    else
        atomic_signal_fence(memory_order_seq_cst);
#endif
    return r;
}

static inline void tt_call_leave(struct tt_call_rec *const *rp)
{
    struct tt_call_rec *r = *rp;
    if (r == NULL) return;
    atomic_store_explicit(&r->calls, atomic_load_explicit(&r->calls, memory_order_relaxed) + 1,
                          memory_order_release);
}

/* The first statement of every public entry point: the thread is in a call until it returns. */
#define TT_CALL_SCOPE                                                                           \
    struct tt_call_rec *tt_call_scope_ __attribute__((cleanup(tt_call_leave), unused)) =        \
        tt_call_enter()

/* True in an outermost call (one that no other public call encloses). */
#define TT_CALL_OUTERMOST (tt_call_scope_ != NULL)

/* Makes every thread's marks visible, then waits until each other thread that was in a call
 * has left it, or until `deadline_ns`. True when they all did. */
bool tt_call_quiesce(uint64_t deadline_ns);

/* An outermost Destroy or Abort whose communicator is out of the registry touches no live
 * communicator any more: it steps out of its call for the rest of the release, so that threads
 * releasing communicators at once do not wait for each other. Only in an outermost call; the
 * record returned goes back to tt_call_step_in before the call returns. */
static inline struct tt_call_rec *tt_call_step_out(void)
{
    struct tt_call_rec *r = tt_call_self;
    tt_call_leave(&r);
    return r;
}
static inline void tt_call_step_in(struct tt_call_rec *r)
{
    if (r != NULL) tt_call_enter();
}

/* ncclSuccess when the communicator may take operations, else the reason (initialising, failed
 * init, revoked, finalized, aborted) as an error naming `caller`. */
ncclResult_t tt_state_check_usable(const struct tt_comm_state *st, const char *caller);
/* The same, letting a revoked communicator pass when `revoked_ok` (ncclCommShrink's parent). */
ncclResult_t tt_state_check_usable_as(const struct tt_comm_state *st, const char *caller,
                                      bool revoked_ok);
/* The common case of tt_state_check_usable, inline on every call's path: ready, neither aborted,
 * revoked nor finalized. Only when it is false does the caller need the full check (and its
 * error message). */
static inline bool tt_state_usable(const struct tt_comm_state *st)
{
    return atomic_load_explicit(&st->phase, memory_order_acquire) == TT_COMM_READY &&
           !atomic_load_explicit(&st->abort, memory_order_acquire) &&
           !atomic_load_explicit(&st->revoked, memory_order_acquire) &&
           !atomic_load_explicit(&st->finalized, memory_order_acquire);
}

#endif
