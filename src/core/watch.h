/* The device watchdog (core/watch.c), part of the lifecycle: device-direct work (CUDA builds)
 * waits for its peers inside the GPU, where no host wait sees a peer fail. These calls fail a
 * communicator whose peer failed or died under its device work, and release its CUDA streams
 * (device/device.h, tt_device_team_release), marking the local team failed first so that the
 * peers those releases also let through learn it. Communicators that never queued device work
 * are never touched. */
#ifndef TT_CORE_WATCH_H
#define TT_CORE_WATCH_H

#include <stdbool.h>

struct ncclComm;

/* At the end of a successful init, for a communicator with a device team: from now on the
 * watchdog (one thread per process, started by the first call) looks at it every 100 ms. */
void tt_watch_device(struct ncclComm *comm);
/* ncclCommAbort's release, first thing and again in the teardown (work another thread queued
 * meanwhile). A stream that is merely slow gets 0.2 s first, so that an abort at a healthy
 * shutdown fails nobody. */
void tt_watch_release_for_abort(struct ncclComm *comm);
/* ncclCommDestroy's wait, before the communicator leaves the watchdog's sight: while this
 * rank's own device work still waits (at most 10 s), so that a peer that died under it is
 * seen and the streams are released, instead of destroy returning with them waiting for
 * ever. Destroy does not release otherwise: a live peer that is merely late still comes. */
void tt_watch_settle_for_destroy(struct ncclComm *comm);
/* ncclCommGetAsyncError's look, with no process check and no CUDA call: when a peer's team
 * mark says it failed (it may have released flags under this rank's device work), fails the
 * communicator naming it and returns true. */
bool tt_watch_peer_failed(struct ncclComm *comm);

#endif
