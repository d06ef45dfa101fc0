/* The host implementation of the memory and stream kinds (device/device.h): plain memory and
 * Tutti's own host streams. A build without a device has nothing else, so every pointer is host
 * memory and no foreign stream is recognised. */
#include "device/device.h"

static void host_copy(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
}

static const struct tt_mem_ops host_mem = {.name = "host", .copy = host_copy};

const struct tt_mem_ops *const tt_mem_kinds[TT_MEM_KIND_COUNT] = {
    [TT_MEM_HOST] = &host_mem,
    [TT_MEM_DEVICE] = NULL,
};

/* Host streams are recognised by core/stream.c's list of live streams, not here. */
static bool host_owns(cudaStream_t stream)
{
    return false;
}

const struct tt_device_stream_kind tt_device_host_stream = {.name = "host", .owns = host_owns};

const struct tt_device_stream_kind *tt_device_stream_kind(cudaStream_t stream)
{
    return NULL;
}
