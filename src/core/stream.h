/* Host streams and the progress thread (core/stream.c). A host stream is an in-order queue of
 * batches; one engine thread per process drives the head batch of every stream, so streams
 * progress independently of each other and of the threads that issued the work. Nonblocking
 * communicators use a stream of their own (struct ncclComm's `background`). Every stream knows
 * its kind (device/device.h); a handle that is not a live host stream is asked of the device
 * kinds. Thread-safe: any thread may enqueue, query or synchronize any stream. */
#ifndef TT_CORE_STREAM_H
#define TT_CORE_STREAM_H

#include <stdint.h>

#include "core/engine.h"

struct ncclComm;
struct tt_event_rec;

ncclResult_t tt_stream_create(cudaStream_t *out);
ncclResult_t tt_stream_destroy(cudaStream_t stream);
ncclResult_t tt_stream_synchronize(cudaStream_t stream);
ncclResult_t tt_stream_query(cudaStream_t stream);
/* ncclSuccess when `stream` is NULL or a live host stream, else ncclInvalidUsage. */
ncclResult_t tt_stream_check(cudaStream_t stream, const char *caller);

/* For an operation's stream: ncclSuccess for NULL, a live host stream or a device stream (CUDA
 * builds, once the process uses CUDA), else as tt_stream_check. */
ncclResult_t tt_stream_check_op(cudaStream_t stream, const char *caller);
/* Whether `stream` is a live host stream (not NULL, not a device stream). */
bool tt_stream_is_host(cudaStream_t stream);
/* Orders the heap batch `b` (connected, not yet submitted; b->device) on device stream
 * `stream` (NULL: the legacy default stream): its staged buffers are copied in and out on the
 * stream, and the batch is submitted and queued on the stream's shadow, gated by it. Owns `b`
 * from the call on. Returns at once; CUDA failures are ncclUnhandledCudaError. */
ncclResult_t tt_stream_enqueue_device(cudaStream_t stream, struct tt_batch *b);
/* Queues a submitted heap batch on `stream`, which owns it from now on. */
ncclResult_t tt_stream_enqueue(cudaStream_t stream, struct tt_batch *b);
/* Batches queued on `stream` and not yet finished. */
uint64_t tt_stream_pending(cudaStream_t stream);
/* Whether a batch queued by a nonblocking call on a background stream (its first
 * communicator's) has a task of `comm`: a group over several nonblocking communicators runs on
 * one of their background streams, and the others must still say ncclInProgress. */
bool tt_stream_comm_in_background(const struct ncclComm *comm);
/* Whether any stream still holds a batch with a task of `comm` (never waits). */
bool tt_stream_comm_queued(const struct ncclComm *comm);
/* The background stream whose queue holds the batch with a task of `comm` queued last (a
 * nonblocking group over several communicators runs on its first one's), else `own`: where an
 * event recorded on a nonblocking communicator with no stream goes. */
cudaStream_t tt_stream_comm_background_last(const struct ncclComm *comm, cudaStream_t own);
/* Returns once no queued batch references `comm` (destroy and abort call it; with the abort
 * flag set the engine fails such batches at its next pass). */
void tt_stream_wait_comm_idle(const struct ncclComm *comm);
/* Returns once every pause of the streams' progress that began before the call has ended: such
 * a pause may sleep on a word of a communicator's shared memory, and touches it as it wakes. */
void tt_stream_wait_pauses(void);
/* Returns once no queued operation (on any stream, of any communicator) may still read or
 * write the `bytes` at `ptr`, driving the engine meanwhile: registration moves a buffer's pages,
 * which must not happen under an operation (its writes would be lost, or its peers would map a
 * memory file emptied under them). Host operations that cannot end fail at their deadline; one
 * a device stream holds back may not, so the wait ends at TUTTI_TIMEOUT_MS: false then (the
 * pages must stay where they are). */
bool tt_stream_wait_range_idle(const void *ptr, size_t bytes);
/* For a stopped (aborted or revoked) communicator: its host batches that wait behind another
 * batch of their stream, and hold tasks of `comm` alone, fail now (tt_engine_cancel) instead of
 * when the stream reaches them, which another communicator's stuck operation could put off
 * until its deadline. They stay queued, so what was recorded after them still waits for what
 * came before. */
void tt_stream_cancel_comm(const struct ncclComm *comm, const struct tt_comm_state *st);

/* Called for each queued batch `b` of stream `s` (`head`: the one the engine runs), with the
 * stream's lock held; true stops the scan. */
typedef bool (*tt_stream_visit)(cudaStream_t s, struct tt_batch *b, bool head, void *arg);
/* Visits every queued batch, stream by stream, oldest first, under the engine lock (taken
 * unless `engine_locked`: the caller holds it, as a tt_stream_drive_until condition does), so
 * no engine pass runs meanwhile. Returns whether a visit stopped it (core/stream_scan.c asks
 * its questions this way). */
bool tt_stream_scan(bool engine_locked, tt_stream_visit visit, void *arg);
/* Waits until until(arg) holds, driving the streams meanwhile as a synchronize does; until is
 * asked once before the engine lock is taken, then under it. */
void tt_stream_drive_until(bool (*until)(void *), void *arg);

/* Records `rec` after the last batch queued on `stream`: it completes with that batch's result
 * when the batch ends, or at once (ncclSuccess) when nothing is queued. */
void tt_stream_record(cudaStream_t stream, struct tt_event_rec *rec);
/* Takes `rec` off the batch it was recorded on, if it is still pending. */
void tt_stream_unrecord(cudaStream_t stream, struct tt_event_rec *rec);
/* Waits until `rec` completed, driving the streams meanwhile like a synchronize. */
void tt_stream_wait_event(cudaStream_t stream, struct tt_event_rec *rec);
/* Sleeps until `rec` completed or timeout_us passed (< 0: no limit), without driving: woken by
 * the completion of a batch of `stream`. */
void tt_stream_sleep_event(cudaStream_t stream, struct tt_event_rec *rec, int64_t timeout_us);

#endif
