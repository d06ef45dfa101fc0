/* The checks every entry point makes on a communicator's run-time state before it takes an
 * operation (core/state.h). */
#include "core/state.h"

#include <linux/membarrier.h>
#include <poll.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "reduce/reduce.h"
#include "transport/team.h"
#include "util/err.h"
#include "util/log.h"
#include "util/time.h"

ncclResult_t tt_state_check_usable(const struct tt_comm_state *st, const char *caller)
{
    return tt_state_check_usable_as(st, caller, false);
}

ncclResult_t tt_state_check_usable_as(const struct tt_comm_state *st, const char *caller,
                                      bool revoked_ok)
{
    int phase = atomic_load(&st->phase);
    if (phase == TT_COMM_INITIALIZING) /* NCCL's code for this misuse (ncclCommEnsureReady) */
        return TT_ERROR(ncclInvalidArgument,
                        "%s: rank %d's communicator is still initialising; poll "
                        "ncclCommGetAsyncError until it returns ncclSuccess",
                        caller, st->rank);
    if (phase == TT_COMM_FAILED)
        return TT_ERROR(st->init_result, "%s: rank %d's communicator failed to initialise",
                        caller, st->rank);
    if (atomic_load(&st->abort))
        return TT_ERROR(ncclInvalidUsage, "%s: rank %d's communicator was aborted", caller,
                        st->rank);
    if (!revoked_ok && atomic_load(&st->revoked))
        return TT_ERROR(ncclInvalidUsage, "%s: rank %d's communicator was revoked", caller,
                        st->rank);
    if (atomic_load(&st->finalized))
        return TT_ERROR(ncclInvalidUsage, "%s: rank %d's communicator was finalized", caller,
                        st->rank);
    return ncclSuccess;
}

static int dead_peer(const struct tt_comm_state *st, int peer)
{
    if (st->pidfds == NULL || st->npidfds == 0) return -1;
    struct pollfd one, all[64], *fds = all;
    int *ranks = NULL, nfds = 0, found = -1;
    if (peer >= 0) {
        if (peer >= st->nranks || st->pidfds[peer] < 0) return -1;
        one = (struct pollfd){.fd = st->pidfds[peer], .events = POLLIN};
        fds = &one;
        nfds = 1;
    } else {
        if (st->npidfds > 64) {
            fds = calloc((size_t)st->npidfds, sizeof *fds);
            if (fds == NULL) return -1;
        }
        ranks = calloc((size_t)st->npidfds, sizeof *ranks);
        if (ranks == NULL) goto out;
        for (int r = 0; r < st->nranks; r++) {
            if (st->pidfds[r] < 0) continue;
            fds[nfds] = (struct pollfd){.fd = st->pidfds[r], .events = POLLIN};
            ranks[nfds++] = r;
        }
    }
    /* A pidfd becomes readable when its process has ended. */
    if (poll(fds, (nfds_t)nfds, 0) > 0) {
        for (int i = 0; i < nfds && found < 0; i++)
            if (fds[i].revents & (POLLIN | POLLHUP)) found = peer >= 0 ? peer : ranks[i];
    }
out:
    free(ranks);
    if (fds != all && fds != &one) free(fds);
    return found;
}

/* ---- Calls in progress ---------------------------------------------------------------------- */

_Thread_local struct tt_call_rec *tt_call_self __attribute__((tls_model("initial-exec")));
bool tt_call_fence_each;

/* Every thread that ever made a call has a record here, for the life of the process (a few
 * bytes per thread). */
static pthread_mutex_t calls_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tt_call_rec *calls;
static pthread_once_t membarrier_once = PTHREAD_ONCE_INIT;

/* The process registers for expedited private membarriers once, before its first call marks
 * anything; where the kernel refuses, every entry fences instead. */
static void register_membarrier(void)
{
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) != 0)
        tt_call_fence_each = true;
}

struct tt_call_rec *tt_call_register(void)
{
    pthread_once(&membarrier_once, register_membarrier);
    struct tt_call_rec *r = calloc(1, sizeof *r);
    if (r == NULL) {
        /* Out of memory for 24 bytes: this thread's calls go unseen by tt_call_quiesce. */
        static _Thread_local struct tt_call_rec unlisted;
        tt_call_self = &unlisted;
        return &unlisted;
    }
    pthread_mutex_lock(&calls_lock);
    r->next = calls;
    calls = r;
    pthread_mutex_unlock(&calls_lock);
    tt_call_self = r;
    return r;
}

bool tt_call_quiesce(uint64_t deadline_ns)
{
    pthread_once(&membarrier_once, register_membarrier);
    if (!tt_call_fence_each) syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
#if !defined(__SANITIZE_THREAD__)
    atomic_thread_fence(memory_order_seq_cst);
#endif
    struct busy {
        struct tt_call_rec *rec;
        uint64_t calls;
    } *busy = NULL;
    size_t nbusy = 0, cap = 0;
    pthread_mutex_lock(&calls_lock);
    for (struct tt_call_rec *r = calls; r != NULL; r = r->next) {
        uint64_t now_calls = atomic_load_explicit(&r->calls, memory_order_acquire);
        if (r == tt_call_self || (now_calls & 1) == 0) continue;
        if (nbusy == cap) {
            size_t grown = cap ? 2 * cap : 8;
            struct busy *b = realloc(busy, grown * sizeof *b);
            if (b == NULL) break;
            busy = b;
            cap = grown;
        }
        busy[nbusy++] = (struct busy){r, now_calls};
    }
    pthread_mutex_unlock(&calls_lock);
    bool quiet = false;
    for (;;) {
        quiet = true;
        for (size_t i = 0; i < nbusy && quiet; i++)
            quiet = atomic_load_explicit(&busy[i].rec->calls, memory_order_acquire) !=
                    busy[i].calls;
        if (quiet || tt_time_ns() >= deadline_ns) break;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 100000};
        nanosleep(&ts, NULL);
    }
    free(busy);
    return quiet;
}

void tt_state_fail(struct tt_comm_state *st, ncclResult_t res)
{
    tt_state_fail_because(st, res, tt_error_last());
}

void tt_state_fail_because(struct tt_comm_state *st, ncclResult_t res, const char *why)
{
    int expected = ncclSuccess;
    if (atomic_compare_exchange_strong(&st->async_error, &expected, (int)res)) {
        snprintf(st->fail_reason, sizeof st->fail_reason, "%s", why);
        atomic_store_explicit(&st->fail_reason_set, true, memory_order_release);
        tt_team_set_failed(st->fail_team, (int)res, why);
        if (st->on_fail != NULL) st->on_fail(st->on_fail_arg);
    }
}

bool tt_state_peer_died(const struct tt_comm_state *st, int peer)
{
    return peer >= 0 && dead_peer(st, peer) >= 0;
}

int tt_state_gone_peer(const struct tt_comm_state *st, int peer, ncclResult_t *code, char *why,
                       size_t bytes)
{
    int dead = dead_peer(st, peer);
    *code = ncclRemoteError;
    if (dead >= 0) {
        snprintf(why, bytes, "died (its process ended)");
        return dead;
    }
    if (st->fail_team == NULL) return -1;
    char reason[TT_TEAM_REASON_BYTES];
    for (int p = peer >= 0 ? peer : 0; p < st->nranks; p++) {
        int member = st->fail_member != NULL ? st->fail_member[p] : p;
        int failed = member < 0 ? 0 : tt_team_peer_failed(st->fail_team, member, reason,
                                                          sizeof reason);
        if (failed != 0) {
            snprintf(why, bytes, "failed: %s", reason);
            if (failed == ncclInvalidUsage) *code = ncclInvalidUsage;
            return p;
        }
        if (peer >= 0) break;
    }
    return -1;
}

/* ---- The flight recorder --------------------------------------------------------------------- */

void tt_state_flight_record(struct tt_comm_state *st, int *slot,
                            const struct tt_flight_entry *entry)
{
    struct tt_flight *f = st->flight;
    if (f == NULL) return;
    pthread_mutex_lock(&f->lock);
    if (*slot == 0) {
        for (int i = 0; i < TT_FLIGHT_SLOTS && *slot == 0; i++)
            if (!f->entries[i].used) *slot = i + 1;
    }
    if (*slot > 0) {
        struct tt_flight_entry *e = &f->entries[*slot - 1];
        uint64_t since = e->used ? e->since_ns : entry->since_ns;
        *e = *entry;
        e->used = true;
        e->since_ns = since;
    }
    pthread_mutex_unlock(&f->lock);
}

void tt_state_flight_release(struct tt_comm_state *st, int *slot)
{
    struct tt_flight *f = st->flight;
    if (f == NULL || *slot <= 0) return;
    pthread_mutex_lock(&f->lock);
    f->entries[*slot - 1].used = false;
    pthread_mutex_unlock(&f->lock);
    *slot = 0;
}

/* The names the recorder prints; the core's enum tt_coll order. */
static const char *coll_text(int coll)
{
    static const char *const names[] = {"AllReduce", "Broadcast", "Reduce", "AllGather",
                                        "ReduceScatter", "Send", "Recv", "Copy", "AlltoAll"};
    return coll >= 0 && coll < (int)(sizeof names / sizeof names[0]) ? names[coll] : "?";
}

void tt_state_flight_dump(struct tt_comm_state *st, const char *why)
{
    struct tt_flight *f = st->flight;
    if (f == NULL) return;
    /* Copied under the lock and logged after it: a log that blocks (stderr into a full pipe)
     * must not hold the engine, which records under the same lock. */
    struct tt_flight_entry copy[TT_FLIGHT_SLOTS];
    int n = 0;
    pthread_mutex_lock(&f->lock);
    uint64_t now = tt_time_ns();
    for (int i = 0; i < TT_FLIGHT_SLOTS; i++)
        if (f->entries[i].used) copy[n++] = f->entries[i];
    pthread_mutex_unlock(&f->lock);
    TT_WARN("rank %d of %d (%s): %d operation%s stalled%s", st->rank, st->nranks, why, n,
            n == 1 ? "" : "s", n ? ":" : "");
    for (int i = 0; i < n; i++) {
        const struct tt_flight_entry *e = &copy[i];
        if (e->peer >= 0)
            TT_WARN("  #%llu %s of %zu elements of %s, stalled %.1f ms, waiting for %s rank %d",
                    (unsigned long long)e->seq, coll_text(e->coll), e->count,
                    tt_dtype_name((ncclDataType_t)e->dtype),
                    (double)(now - e->since_ns) / 1e6, e->waits, e->peer);
        else
            TT_WARN("  #%llu %s of %zu elements of %s, stalled %.1f ms, waiting for %s",
                    (unsigned long long)e->seq, coll_text(e->coll), e->count,
                    tt_dtype_name((ncclDataType_t)e->dtype),
                    (double)(now - e->since_ns) / 1e6, e->waits);
    }
}
