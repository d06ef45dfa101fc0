/* Memory and stream kinds: the seam through which the executor copies and the core queues work,
 * so that a device build (CUDA) adds an implementation instead of edits all over.
 *
 * A memory kind says where a buffer lives and how bytes move in and out of it; the host kind is
 * plain memory (memcpy), and the executor's fast path tests for it inline, so host builds pay
 * nothing for the seam. A stream kind says what a stream handle is and how work is queued on
 * it: host streams are Tutti's own queues (core/stream.c); a device build registers its
 * streams' kind, which tt_device_stream_kind recognises. Only this folder may mention CUDA. */
#ifndef TT_DEVICE_H
#define TT_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "nccl.h"

enum tt_mem_kind { TT_MEM_HOST, TT_MEM_DEVICE, TT_MEM_KIND_COUNT };

struct tt_mem_ops {
    const char *name;
    /* Copies `bytes` from src to dst, both of this kind (or host). */
    void (*copy)(void *dst, const void *src, size_t bytes);
};

/* The implementations, indexed by kind; NULL where this build has none (device on a host
 * build). */
extern const struct tt_mem_ops *const tt_mem_kinds[TT_MEM_KIND_COUNT];

/* The kind of memory at `ptr`. Host builds: always TT_MEM_HOST, inline, without a look-up. */
#ifdef TUTTI_CUDA
enum tt_mem_kind tt_device_mem_kind(const void *ptr);
#else
static inline enum tt_mem_kind tt_device_mem_kind(const void *ptr)
{
    (void)ptr;
    return TT_MEM_HOST;
}
#endif

/* Copies through the kind: host memory inline, the others through their implementation. */
static inline void tt_device_copy(enum tt_mem_kind kind, void *dst, const void *src,
                                  size_t bytes)
{
    if (kind == TT_MEM_HOST)
        memcpy(dst, src, bytes);
    else
        tt_mem_kinds[kind]->copy(dst, src, bytes);
}

struct tt_device_stream_kind {
    const char *name;
    /* Whether `stream` is a live stream of this kind. */
    bool (*owns)(cudaStream_t stream);
};

/* Tutti's host streams (their queues live in core/stream.c). */
extern const struct tt_device_stream_kind tt_device_host_stream;
/* The device kind that claims `stream` (not a host stream), or NULL: host builds have none. */
const struct tt_device_stream_kind *tt_device_stream_kind(cudaStream_t stream);

#endif
