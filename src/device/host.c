/* The host implementation of the memory and stream kinds (device/device.h): plain memory and
 * Tutti's own host streams. A build without a device has nothing else, so every pointer is host
 * memory, no foreign stream is recognised and nothing is ever staged; a CUDA build adds the
 * device kind from device/cuda/. */
#include <stdio.h>
#include <string.h>

#include "device/device.h"

#include "util/err.h"

static void host_copy(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
}

static const struct tt_mem_ops host_mem = {.name = "host", .copy = host_copy};

#ifdef TUTTI_CUDA
extern const struct tt_mem_ops tt_device_cuda_mem;
#endif

const struct tt_mem_ops *const tt_mem_kinds[TT_MEM_KIND_COUNT] = {
    [TT_MEM_HOST] = &host_mem,
#ifdef TUTTI_CUDA
    [TT_MEM_DEVICE] = &tt_device_cuda_mem,
#else
    [TT_MEM_DEVICE] = NULL,
#endif
};

/* Host streams are recognised by core/stream.c's list of live streams, not here. */
static bool host_owns(cudaStream_t stream)
{
    return false;
}

const struct tt_device_stream_kind tt_device_host_stream = {.name = "host", .owns = host_owns};

#ifndef TUTTI_CUDA
const struct tt_device_stream_kind *tt_device_stream_kind(cudaStream_t stream)
{
    return NULL;
}

void tt_device_probe(bool load)
{
}

const char *tt_device_describe(char *buf, size_t bytes)
{
    snprintf(buf, bytes, "none (built without CUDA)");
    return buf;
}

int tt_device_current(void)
{
    return -1;
}

ncclResult_t tt_device_mem_alloc(void **ptr, size_t bytes)
{
    *ptr = NULL;
    return ncclSuccess;
}

bool tt_device_mem_free(void *ptr, ncclResult_t *res)
{
    return false;
}

/* Nothing is device memory in a host build, so nothing is staged. */
ncclResult_t tt_device_stage_buffers(struct tt_device_stage **stages, const void **send,
                                     size_t send_bytes, void **recv, size_t recv_bytes)
{
    return ncclSuccess;
}

void tt_device_stage_free(struct tt_device_stage *stages)
{
}

void tt_device_stage_join(struct tt_device_stage **into, struct tt_device_stage *more)
{
}

ncclResult_t tt_device_team_create(int device, size_t bytes, struct tt_device_team **out,
                                   struct tt_device_team_info *info)
{
    *out = NULL;
    return TT_ERROR(ncclInvalidUsage, "the device-direct path needs a CUDA build of Tutti");
}

ncclResult_t tt_device_team_attach(struct tt_device_team *t, int rank, int nranks,
                                   const struct tt_device_team_info *infos)
{
    return TT_ERROR(ncclInvalidUsage, "the device-direct path needs a CUDA build of Tutti");
}

void tt_device_team_destroy(struct tt_device_team *t)
{
}

void tt_device_team_release(struct tt_device_team *t, void (*mark)(void *), void *arg)
{
}

bool tt_device_team_waits_on(struct tt_device_team *t, int peer)
{
    return false;
}

int tt_device_team_state(struct tt_device_team *t)
{
    return TT_DEVICE_TEAM_IDLE;
}

bool tt_device_team_used(const struct tt_device_team *t)
{
    return false;
}

ncclResult_t tt_device_team_allreduce(struct tt_device_team *t, cudaStream_t stream,
                                      const void *send, void *recv, size_t count,
                                      const struct tt_device_redop *op, size_t oneshot_bytes)
{
    return TT_ERROR(ncclInvalidUsage, "the device-direct path needs a CUDA build of Tutti");
}

ncclResult_t tt_device_team_allreduce_ring(struct tt_device_team *t, cudaStream_t stream,
                                           const void *send, void *recv, size_t count,
                                           const struct tt_device_redop *op)
{
    return TT_ERROR(ncclInvalidUsage, "the device-direct path needs a CUDA build of Tutti");
}

ncclResult_t tt_device_team_reduce_scatter(struct tt_device_team *t, cudaStream_t stream,
                                           const void *send, void *recv, size_t count,
                                           const struct tt_device_redop *op)
{
    return TT_ERROR(ncclInvalidUsage, "the device-direct path needs a CUDA build of Tutti");
}

ncclResult_t tt_device_team_all_gather(struct tt_device_team *t, cudaStream_t stream,
                                       const void *send, void *recv, size_t count,
                                       ncclDataType_t dtype)
{
    return TT_ERROR(ncclInvalidUsage, "the device-direct path needs a CUDA build of Tutti");
}

ncclResult_t tt_device_team_broadcast(struct tt_device_team *t, cudaStream_t stream,
                                      const void *send, void *recv, size_t count,
                                      ncclDataType_t dtype, int root)
{
    return TT_ERROR(ncclInvalidUsage, "the device-direct path needs a CUDA build of Tutti");
}

ncclResult_t tt_device_team_reduce(struct tt_device_team *t, cudaStream_t stream,
                                   const void *send, void *recv, size_t count,
                                   const struct tt_device_redop *op, int root, bool recv_device)
{
    return TT_ERROR(ncclInvalidUsage, "the device-direct path needs a CUDA build of Tutti");
}

ncclResult_t tt_device_team_gather(struct tt_device_team *t, cudaStream_t stream,
                                   const void *send, void *recv, size_t count,
                                   ncclDataType_t dtype, int root)
{
    return TT_ERROR(ncclInvalidUsage, "the device-direct path needs a CUDA build of Tutti");
}

ncclResult_t tt_device_team_scatter(struct tt_device_team *t, cudaStream_t stream,
                                    const void *send, void *recv, size_t count,
                                    ncclDataType_t dtype, int root)
{
    return TT_ERROR(ncclInvalidUsage, "the device-direct path needs a CUDA build of Tutti");
}

ncclResult_t tt_device_team_alltoall(struct tt_device_team *t, cudaStream_t stream,
                                     const void *send, void *recv, size_t count,
                                     ncclDataType_t dtype)
{
    return TT_ERROR(ncclInvalidUsage, "the device-direct path needs a CUDA build of Tutti");
}

ncclResult_t tt_device_team_p2p_round(struct tt_device_team *t, cudaStream_t stream,
                                      const struct tt_device_p2p *ops, int nops, size_t round,
                                      bool send, bool *any)
{
    *any = false;
    return TT_ERROR(ncclInvalidUsage, "the device-direct path needs a CUDA build of Tutti");
}

ncclResult_t tt_device_window_export(const void *buff, size_t bytes,
                                     struct tt_device_team_info *info)
{
    memset(info, 0, sizeof *info);
    return ncclSuccess;
}

ncclResult_t tt_device_window_open(struct tt_device_team *t, const void *buff,
                                   const struct tt_device_team_info *infos,
                                   struct tt_device_window **out)
{
    *out = NULL;
    return TT_ERROR(ncclInvalidUsage, "device windows need a CUDA build of Tutti");
}

void tt_device_window_close(struct tt_device_team *t, struct tt_device_window *w)
{
}

ncclResult_t tt_device_team_allreduce_window(struct tt_device_team *t, cudaStream_t stream,
                                             const struct tt_device_window *ws, size_t send_off,
                                             const struct tt_device_window *wr, size_t recv_off,
                                             size_t count, const struct tt_device_redop *op)
{
    return TT_ERROR(ncclInvalidUsage, "the device-direct path needs a CUDA build of Tutti");
}

ncclResult_t tt_device_team_reduce_scatter_window(struct tt_device_team *t, cudaStream_t stream,
                                                  const struct tt_device_window *ws,
                                                  size_t send_off,
                                                  const struct tt_device_window *wr,
                                                  size_t recv_off, size_t count,
                                                  const struct tt_device_redop *op)
{
    return TT_ERROR(ncclInvalidUsage, "the device-direct path needs a CUDA build of Tutti");
}

ncclResult_t tt_device_team_all_gather_window(struct tt_device_team *t, cudaStream_t stream,
                                              const struct tt_device_window *ws, size_t send_off,
                                              const struct tt_device_window *wr, size_t recv_off,
                                              size_t count, ncclDataType_t dtype)
{
    return TT_ERROR(ncclInvalidUsage, "the device-direct path needs a CUDA build of Tutti");
}

ncclResult_t tt_device_reduce(cudaStream_t stream, ncclDataType_t dtype, enum tt_device_red red,
                              double scalar_f, uint64_t scalar_u, uint64_t divisor, void *dst,
                              const void *a, const void *b, size_t count)
{
    return TT_ERROR(ncclInvalidUsage, "device reductions need a CUDA build of Tutti");
}

ncclResult_t tt_device_ipc_export(const void *ptr, struct tt_device_ipc_handle *out)
{
    return TT_ERROR(ncclInvalidUsage, "device peer memory needs a CUDA build of Tutti");
}

ncclResult_t tt_device_ipc_open(const struct tt_device_ipc_handle *h, void **ptr)
{
    return TT_ERROR(ncclInvalidUsage, "device peer memory needs a CUDA build of Tutti");
}

ncclResult_t tt_device_ipc_close(void *ptr, const struct tt_device_ipc_handle *h)
{
    return TT_ERROR(ncclInvalidUsage, "device peer memory needs a CUDA build of Tutti");
}

ncclResult_t tt_device_words_create(uint32_t **words)
{
    return TT_ERROR(ncclInvalidUsage, "device streams need a CUDA build of Tutti");
}

ncclResult_t tt_device_stream_order(cudaStream_t stream, uint32_t *words, uint32_t seq,
                                    struct tt_device_stage *stages, bool *waits)
{
    *waits = false;
    return TT_ERROR(ncclInvalidUsage, "device streams need a CUDA build of Tutti");
}
#endif
