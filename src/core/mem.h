/* Memory (core/mem.c): ncclMemAlloc memory is shared memory other ranks of the host can map, and
 * registering ordinary memory moves its whole pages into such memory; registrations and windows
 * are recorded per communicator (under its tables_lock) for the zero-copy paths. */
#ifndef TT_CORE_MEM_H
#define TT_CORE_MEM_H

#include <stdbool.h>
#include <stddef.h>

#include "nccl.h"

struct ncclComm;
struct tt_team_region;
struct tt_reg_table;

/* ncclMemAlloc: device memory on a thread with a current CUDA device (CUDA builds), else host
 * memory as tt_mem_alloc_host. */
ncclResult_t tt_mem_alloc(void **ptr, size_t bytes);
/* tuttiMemAllocHost: a shareable host memory file, mapped. */
ncclResult_t tt_mem_alloc_host(void **ptr, size_t bytes);
/* ncclMemFree: either kind. */
ncclResult_t tt_mem_free(void *ptr);
/* Whether part of [ptr, ptr + bytes) lies in shareable memory: an ncclMemAlloc block, which must
 * hold all of it, or pages a registration moved into a memory file, which may leave a head and a
 * tail outside. Fills *out for peers to map that part (out->fd = -1 otherwise). */
bool tt_mem_region(const void *ptr, size_t bytes, struct tt_team_region *out);
ncclResult_t tt_mem_register(struct ncclComm *comm, void *buff, size_t bytes, void **handle);
ncclResult_t tt_mem_deregister(struct ncclComm *comm, void *handle);
ncclResult_t tt_mem_window_register(struct ncclComm *comm, void *buff, size_t bytes,
                                    ncclWindow_t *win, int flags);
ncclResult_t tt_mem_window_deregister(struct ncclComm *comm, ncclWindow_t win);
/* Whether [ptr, ptr + bytes) lies inside one of the communicator's symmetric windows
 * (NCCL_WIN_COLL_SYMMETRIC) that every rank put in shareable memory: NCCL's contract is that the
 * other ranks then pass window buffers too, so the cost model may count on their peers mapping
 * them. */
bool tt_mem_sym_window(const struct ncclComm *comm, const void *ptr, size_t bytes);
/* Whether [ptr, ptr + bytes) lies inside one of the communicator's symmetric windows on device
 * memory (mapped by every rank at registration): then *win is its device window and *offset
 * the offset of ptr in it. */
struct tt_device_window;
bool tt_mem_device_window(const struct ncclComm *comm, const void *ptr, size_t bytes,
                          const struct tt_device_window **win, size_t *offset);
/* Unmaps every device window's peers (the communicator's teardown, before its device team). */
void tt_mem_close_device_windows(struct ncclComm *comm);
/* Frees a communicator's registration table (accepts NULL). `quick` (a communicator that was
 * aborted or failed, whose teardown must not wait): registered pages are left where they are
 * (tt_mem_leave_pages) instead of being moved back. */
void tt_mem_table_destroy(struct tt_reg_table *table, bool quick);

/* For the registrations (core/mem_reg.c): tt_mem_share_pages moves the whole pages of
 * [buff, buff + bytes) into a memory file and returns the block now holding them, or NULL where
 * they stay (fewer than 64 KiB of whole pages, not private anonymous memory, ncclMemAlloc memory
 * or overlapping another block, pinned for a device, TUTTI_REGISTER_REMAP=0, or the move
 * failed); the very range moved before gets the same block, counted. tt_mem_unshare_pages
 * gives one such count back, the last swapping private pages back in (accepts NULL).
 * tt_mem_in_allocated_block: whether [ptr, ptr + bytes) lies inside one ncclMemAlloc block. */
struct tt_mem_block;
struct tt_mem_block *tt_mem_share_pages(void *buff, size_t bytes);
void tt_mem_unshare_pages(struct tt_mem_block *block);
/* Gives one count back without moving anything: the last leaves the pages shared, the block
 * known and its file open, so the memory keeps working as it is; no wait, no copy. */
void tt_mem_leave_pages(struct tt_mem_block *block);
bool tt_mem_in_allocated_block(const void *ptr, size_t bytes);

/* Installs what waits until no queued operation may touch a range (core/stream.c, with its
 * first stream: until then nothing can be queued); registration and deregistration call it
 * before they move pages; false: the wait ran out, and the pages stay where they are. */
void tt_mem_set_range_waiter(bool (*wait)(const void *ptr, size_t bytes));

#endif
