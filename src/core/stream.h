/* Host streams and the progress thread (core/stream.c). A host stream is an in-order queue of
 * batches; one engine thread per process drives the head batch of every stream, so streams
 * progress independently of each other and of the threads that issued the work. Nonblocking
 * communicators use a stream of their own (struct ncclComm's `background`). */
#ifndef TT_CORE_STREAM_H
#define TT_CORE_STREAM_H

#include "core/task.h"

/* Queues a submitted heap batch on `stream`, which owns it from now on. */
ncclResult_t tt_stream_enqueue(cudaStream_t stream, struct tt_batch *b);
/* Batches queued on `stream` and not yet finished. */
uint64_t tt_stream_pending(cudaStream_t stream);

/* Returns once no queued batch references `comm` (destroy and abort call it; with the abort
 * flag set the engine fails such batches at its next pass). */
void tt_stream_wait_comm_idle(const struct ncclComm *comm);

#endif
