/* The device-direct path's failure handling (device/device.h, tt_device_team_release): the
 * host reads the team's flags on the team's own stream, tells whether this member's queued work
 * ran out or still waits for a peer, and releases streams that wait for a failed one by writing
 * the peers' flags past anything queued. The protocol and the flags are in direct.c. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "device/device.h"

#include "device/cuda/driver.h"
#include "device/cuda/direct.h"
#include "util/log.h"
#include "util/time.h"

/* Waits, at most POLL_WAIT_NS, for the team's own stream to run out: 1 it did, 0 not yet,
 * -1 CUDA failed. Queried, not synchronized: on a GPU whose streams share few hardware queues
 * (CUDA_DEVICE_MAX_CONNECTIONS) it may sit behind a user stream's wait that never ends. */
static int poll_done(const struct tt_device_team *t)
{
    uint64_t start = tt_time_ns();
    for (unsigned i = 0;; i++) {
        CUresult rc = tt_cu.cuStreamQuery(t->poll);
        if (rc == CUDA_SUCCESS) return 1;
        if (rc != CUDA_ERROR_NOT_READY) return -1;
        if (tt_time_ns() - start > POLL_WAIT_NS) return 0;
        if (i > 64) usleep(50);
    }
}

enum { READ_FAILED = -1, READ_UNKNOWN = 0, READ_OK = 1 };

/* Reads member p's flag `which` on the team's own stream into *v, through a pinned word of the
 * team (a copy into pageable memory would block the caller until it ran). READ_UNKNOWN when the
 * stream did not get to it in time (the copy stays pending, and the word is not reused until
 * the stream ran out), READ_FAILED when CUDA failed. Any thread: one read at a time. */
static int read_flag(const struct tt_device_team *t, int p, int which, uint32_t *v)
{
    struct tt_dteam_reader *rd = t->reader;
    pthread_mutex_lock(&rd->lock);
    int res = READ_UNKNOWN;
    if (rd->pending) {
        int done = poll_done(t);
        if (done < 0) res = READ_FAILED;
        rd->pending = done == 0;
    }
    if (!rd->pending && res != READ_FAILED) {
        if (tt_cu.cuMemcpyDtoHAsync(rd->word, tt_dteam_flag_at(t, p, which), sizeof *rd->word,
                                    t->poll) != CUDA_SUCCESS) {
            res = READ_FAILED;
        } else {
            int done = poll_done(t);
            rd->pending = done == 0;
            res = done > 0 ? READ_OK : done == 0 ? READ_UNKNOWN : READ_FAILED;
            if (done > 0) *v = *(volatile uint32_t *)rd->word;
        }
    }
    pthread_mutex_unlock(&rd->lock);
    return res;
}

/* Whether a flag read `v` shows a real count of at least `count`. A value far ahead of it
 * (2^29 or more) was written by a release (tt_device_team_release), not by a stream, and says
 * nothing about the stream's progress. */
static bool reached(uint32_t v, uint64_t count)
{
    return v - (uint32_t)count < 0x20000000u;
}

bool tt_dteam_all_done(const struct tt_device_team *t)
{
    for (int p = 0; p < t->nranks; p++) {
        if (t->base[p] == 0) continue;
        uint32_t v = 0;
        int r = read_flag(t, p, FLAG_DONE, &v);
        if (r == READ_FAILED)
            return p != t->rank; /* a peer's memory gone: nobody reads ours through it */
        if (r == READ_UNKNOWN || !reached(v, t->chunks)) return false;
        if (t->sent[p] == 0) continue;
        r = read_flag(t, p, FLAG_ACK(t->rank), &v);
        if (r == READ_FAILED) return p != t->rank;
        if (r == READ_UNKNOWN || !reached(v, t->sent[p])) return false;
    }
    return true;
}

/* Everything queued so far, as one count that grows with every chunk, step and slot. */
static uint64_t queued_total(const struct tt_device_team *t)
{
    uint64_t n = t->chunks + t->steps;
    for (int p = 0; p < t->nranks; p++) n += t->sent[p] + t->received[p];
    return n;
}

bool tt_dteam_any_queued(const struct tt_device_team *t)
{
    bool any = t->chunks > 0;
    for (int p = 0; p < t->nranks; p++) any = any || t->sent[p] > 0 || t->received[p] > 0;
    return any;
}

/* A value past every wait on a count of n (the waits compare wrapping, GEQ). */
static uint32_t ahead(uint64_t n)
{
    return (uint32_t)n + 0x40000000u;
}

/* Writes, on the team's own stream, every peer flag that this member's queued work may wait
 * for, past anything queued: the collectives' READY, REDUCED, DONE and STEP, and the
 * point-to-point SENT and ACK towards this member. False once CUDA failed. */
static bool force_peers(const struct tt_device_team *t)
{
    CUresult rc = CUDA_SUCCESS;
    for (int p = 0; p < t->nranks && rc == CUDA_SUCCESS; p++) {
        if (p == t->rank || t->base[p] == 0) continue;
        const struct { int which; uint32_t v; } w[] = {
            {FLAG_READY, ahead(t->chunks)}, {FLAG_REDUCED, ahead(t->chunks)},
            {FLAG_DONE, ahead(t->chunks)}, {FLAG_STEP, ahead(t->steps)},
            {FLAG_SENT(t->rank), ahead(t->received[p])}, {FLAG_ACK(t->rank), ahead(t->sent[p])}};
        for (size_t i = 0; i < sizeof w / sizeof w[0] && rc == CUDA_SUCCESS; i++)
            rc = tt_cu.cuStreamWriteValue32(t->poll, tt_dteam_flag_at(t, p, w[i].which), w[i].v,
                                            CU_STREAM_WRITE_VALUE_DEFAULT);
    }
    /* Not waited for again when it does not run in time: the next pass writes again. */
    return rc == CUDA_SUCCESS && poll_done(t) >= 0;
}

/* Whether this member's own flag `which` reached `count` (its low 32 bits); true for 0. */
static bool own_reached(const struct tt_device_team *t, int which, uint64_t count)
{
    uint32_t v = 0;
    return count == 0 || (read_flag(t, t->rank, which, &v) == READ_OK && reached(v, count));
}

/* Whether this member's own queued work has ended: its own flags reached everything it
 * queued. Only its streams write them real counts; a peer's release may have written them far
 * ahead, which reads as not ended (the release then goes on to its bound). */
static bool own_drained(const struct tt_device_team *t)
{
    if (!own_reached(t, FLAG_DONE, t->chunks) || !own_reached(t, FLAG_STEP, t->steps))
        return false;
    for (int p = 0; p < t->nranks; p++)
        if (!own_reached(t, FLAG_SENT(p), t->sent[p]) ||
            !own_reached(t, FLAG_ACK(p), t->received[p]))
            return false;
    return true;
}

bool tt_device_team_used(const struct tt_device_team *t)
{
    return t != NULL && t->nranks > 0 && tt_dteam_any_queued(t);
}

int tt_device_team_state(struct tt_device_team *t)
{
    if (!tt_device_team_used(t)) return TT_DEVICE_TEAM_IDLE;
    CUcontext cur = tt_dteam_enter(t);
    int state = !own_drained(t)        ? TT_DEVICE_TEAM_WAITING
                : !tt_dteam_all_done(t) ? TT_DEVICE_TEAM_READ
                                        : TT_DEVICE_TEAM_IDLE;
    tt_dteam_leave(t, cur);
    return state;
}

bool tt_device_team_waits_on(struct tt_device_team *t, int peer)
{
    if (!tt_device_team_used(t) || peer < 0 || peer >= t->nranks) return false;
    CUcontext cur = tt_dteam_enter(t);
    bool waits = !own_reached(t, FLAG_DONE, t->chunks) || !own_reached(t, FLAG_STEP, t->steps) ||
                 !own_reached(t, FLAG_SENT(peer), t->sent[peer]) ||
                 !own_reached(t, FLAG_ACK(peer), t->received[peer]);
    tt_dteam_leave(t, cur);
    return waits;
}

void tt_device_team_release(struct tt_device_team *t, void (*mark)(void *), void *arg)
{
    if (t == NULL || t->nranks == 0 || !tt_dteam_any_queued(t)) return;
    /* The watchdog and an abort may release at once: one after the other. */
    pthread_mutex_lock(&t->release_lock);
    CUcontext cur = tt_dteam_enter(t);
    bool waiting = !own_drained(t);
    if (waiting) {
        /* Forcing lets the peers' streams past too: they must learn first (the caller's mark).
         * A live peer's stream may write its flags lower again as its work goes on: forced
         * until this member's own streams have run out, bounded. */
        if (mark != NULL) mark(arg);
        /* An earlier release forced to its bound (or CUDA failed under it), and nothing was
         * queued since: forcing again for as long would most likely learn nothing more (the
         * usual cause is that a peer's release wrote this member's flags far ahead, which
         * then read "unknown"). One pass, then; the allocation is kept already. */
        uint64_t queued = queued_total(t);
        uint64_t bound = t->released_upto == queued ? 0 : ABORT_RELEASE_NS;
        uint64_t start = tt_time_ns();
        bool drained = false, forced = true;
        unsigned passes = 0;
        do {
            passes++;
            forced = force_peers(t);
            if (!forced) break; /* CUDA failed (a peer's memory gone?): so do streams */
            drained = own_drained(t);
            if (!drained && bound > 0) usleep(1000);
        } while (!drained && tt_time_ns() - start < bound);
        t->released_upto = drained ? 0 : queued;
        uint32_t done = 0;
        int read = read_flag(t, t->rank, FLAG_DONE, &done);
        TT_INFO(TT_SUB_RAS, "device-direct release: rank %d, %u passes in %.1f ms, forcing %s, "
                "own streams %s; own DONE %s %u of %llu chunks", t->rank, passes,
                (double)(tt_time_ns() - start) / 1e6, forced ? "queued" : "failed",
                drained ? "ran out" : "still waiting",
                read == READ_OK ? "reads" : read == READ_UNKNOWN ? "unknown, last" : "failed,",
                done, (unsigned long long)t->chunks);
        atomic_store(&t->keep, true);
        if (!atomic_exchange(&t->warned, true))
            TT_WARN("device-direct path: released with work queued (its streams %s; results "
                    "undefined); this rank's device scratch is left allocated, a peer may still "
                    "read it", drained ? "ran out" : "may not all have ended");
    } else if (!atomic_load(&t->keep)) {
        /* Nothing of this member waits, but a peer may still read its scratch, or never come
         * (the failure that brought this release): the destroy would wait DESTROY_WAIT_NS for
         * it. Briefly here instead; then the scratch is left allocated, and destroy waits not. */
        uint64_t start = tt_time_ns();
        bool done;
        while (!(done = tt_dteam_all_done(t)) && tt_time_ns() - start < ABORT_RELEASE_NS)
            usleep(1000);
        if (!done) {
            atomic_store(&t->keep, true);
            TT_WARN("device-direct path: released; a peer may still read this rank's device "
                    "scratch (or never came): it is left allocated");
        }
        TT_INFO(TT_SUB_RAS, "device-direct release: rank %d, own streams ran out already; the "
                "peers' %s", t->rank, done ? "too" : "may not have");
    }
    tt_dteam_leave(t, cur);
    pthread_mutex_unlock(&t->release_lock);
}
