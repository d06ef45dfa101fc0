/* The device watchdog (core/watch.h). Device-direct work (CUDA builds) waits for its peers
 * inside the GPU, where no host wait sees a peer die. Once a process has a communicator on
 * that path, a thread looks every 100 ms at every such communicator that queued device work:
 * it marks itself in a call (so none it looks at is freed under it), picks under the
 * registry's lock those that failed or have a gone peer (tt_state_gone_peer: its process ended
 * or its communicator failed; one poll over pidfds, no CUDA), and outside the lock fails those
 * whose peer failed, or whose work involving a dead peer still waits (ncclRemoteError), and
 * releases their streams (tt_device_team_release). */
#include "core/watch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/lifecycle.h"
#include "core/state.h"
#include "device/device.h"
#include "transport/team.h"
#include "util/err.h"
#include "util/log.h"
#include "util/time.h"

#define WATCH_PERIOD_NS 100000000L
#define SETTLE_WAIT_NS 10000000000ull
#define WATCH_BATCH 16

/* Before a release forces flags (which lets the peers' streams past them too), the peers must
 * be able to learn that this rank failed: its team mark, once. A latched error marked it
 * already (tt_state_fail); else this is an abort, or work that raced one. */
static void mark_failed(void *arg)
{
    struct ncclComm *comm = arg;
    if (atomic_exchange(&comm->dev_marked, true) || comm->st.async_error != ncclSuccess) return;
    char reason[96];
    snprintf(reason, sizeof reason, "rank %d aborted with device-direct work queued",
             comm->st.rank);
    tt_team_set_failed(comm->st.team, ncclRemoteError, reason);
}

/* Releases the device streams of `comm` (tt_device_team_release, marking the team first if it
 * forces anything). From here on device work is refused, and work that raced in is released
 * too (core/coll.c calls comm->dev_release). */
static void release_device(struct ncclComm *comm)
{
    atomic_store(&comm->dev_released, true);
    tt_device_team_release(comm->dev_team, mark_failed, comm);
}

void tt_watch_release_for_abort(struct ncclComm *comm)
{
    if (!atomic_load_explicit(&comm->dev_watched, memory_order_acquire) ||
        !tt_device_team_used(comm->dev_team))
        return;
    for (int i = 0; i < 4 && tt_device_team_state(comm->dev_team) == TT_DEVICE_TEAM_WAITING;
         i++)
        usleep(50000);
    release_device(comm);
}

void tt_watch_settle_for_destroy(struct ncclComm *comm)
{
    if (!atomic_load_explicit(&comm->dev_watched, memory_order_acquire) ||
        !tt_device_team_used(comm->dev_team))
        return;
    uint64_t deadline = tt_time_ns() + SETTLE_WAIT_NS;
    while (!atomic_load(&comm->dev_released) &&
           tt_device_team_state(comm->dev_team) == TT_DEVICE_TEAM_WAITING &&
           tt_time_ns() < deadline)
        usleep(10000);
}

/* A peer of `c` whose communicator failed (its mark in the local team; no process check, no
 * CUDA): -1 if none. A peer that released its device streams marked itself so, and its
 * forced flags may have let this rank's device work past data not yet there. */
static int device_peer_failed(const struct ncclComm *c, ncclResult_t *code, char *why,
                              size_t bytes)
{
    for (int p = 0; p < c->st.nranks; p++) {
        int failed = tt_team_peer_failed(c->st.team, p, why, bytes);
        if (failed != 0) {
            *code = failed == ncclInvalidUsage ? ncclInvalidUsage : ncclRemoteError;
            return p;
        }
    }
    return -1;
}

/* Fails `c` for peer `peer` that `why` (ncclRemoteError or the peer's own code). */
static void device_fail(struct ncclComm *c, int peer, ncclResult_t code, const char *why)
{
    (void)TT_ERROR(code, "comm %p rank %d: rank %d %s with device-direct work queued on the "
                         "GPU: the communicator fails and its CUDA streams are released "
                         "(results of the device work since are undefined)",
                   (void *)c, c->st.rank, peer, why);
    tt_state_fail(&c->st, code);
}

bool tt_watch_peer_failed(struct ncclComm *c)
{
    if (!atomic_load_explicit(&c->dev_watched, memory_order_acquire) ||
        !tt_device_team_used(c->dev_team))
        return false;
    char why[TT_TEAM_REASON_BYTES], text[TT_TEAM_REASON_BYTES + 16];
    ncclResult_t code = ncclRemoteError;
    int peer = device_peer_failed(c, &code, why, sizeof why);
    if (peer < 0) return false;
    snprintf(text, sizeof text, "failed (%s)", why);
    device_fail(c, peer, code, text);
    return true;
}

/* The watchdog's look at one communicator that queued device work: a peer that failed (it
 * may have released flags under this rank's work) fails it at once; a peer whose process
 * ended fails it when its device work is not all done (a peer that destroyed its
 * communicator and exited after the last operation is no failure). Then releases. */
static void watch_comm(struct ncclComm *c)
{
    if (c->st.async_error == ncclSuccess && !tt_watch_peer_failed(c)) {
        /* A peer that exited after its last operation is no failure: only work of this rank
         * that involves it, still waiting on two looks 0.2 s apart (a read that did not run
         * in time counts as waiting), fails the communicator. */
        char why[TT_TEAM_REASON_BYTES + 16];
        ncclResult_t code = ncclRemoteError;
        int peer = tt_state_gone_peer(&c->st, -1, &code, why, sizeof why);
        if (peer < 0 || !tt_device_team_waits_on(c->dev_team, peer)) return;
        usleep(200000);
        if (!tt_device_team_waits_on(c->dev_team, peer)) return;
        device_fail(c, peer, code, why);
    }
    release_device(c);
}

/* Under the registry's lock (no CUDA call): a watched communicator that queued device work,
 * is not released yet, and has failed or has a gone peer. */
static bool wants_a_look(struct ncclComm *c)
{
    if (!atomic_load_explicit(&c->dev_watched, memory_order_acquire) ||
        atomic_load(&c->dev_released) || !tt_device_team_used(c->dev_team))
        return false;
    ncclResult_t code;
    char why[8];
    return c->st.async_error != ncclSuccess ||
           tt_state_gone_peer(&c->st, -1, &code, why, sizeof why) >= 0;
}

static void watch_pass(void)
{
    TT_CALL_SCOPE;
    static size_t cursor; /* this thread's alone: where the last pass stopped */
    struct ncclComm *picked[WATCH_BATCH];
    size_t n = tt_comm_pick(wants_a_look, picked, WATCH_BATCH, &cursor);
    for (size_t i = 0; i < n; i++) watch_comm(picked[i]);
}

static void *device_watch(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec ts = {0, WATCH_PERIOD_NS};
        nanosleep(&ts, NULL);
        watch_pass();
    }
    return NULL;
}

static void watch_start(void)
{
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &attr, device_watch, NULL) != 0)
        TT_WARN("cannot start the device watchdog: a dead peer leaves device-direct streams "
                "waiting until ncclCommAbort");
    pthread_attr_destroy(&attr);
}

void tt_watch_device(struct ncclComm *comm)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, watch_start);
    comm->dev_release = release_device;
    atomic_store_explicit(&comm->dev_watched, true, memory_order_release);
}
