/* Memory: ncclMemAlloc blocks, buffer registrations and windows.
 *
 * An ncclMemAlloc block is an anonymous memory file (memfd) mapped shared, so that other ranks
 * of the host can later map the very same pages; a process-wide registry (under a mutex) maps
 * each block's address to its file and size, and ncclMemFree accepts only addresses found there.
 * Registrations (ncclCommRegister) and windows (ncclCommWindowRegister) are recorded in the
 * communicator's table; their handles are the records themselves, accepted back only when found
 * in that table, so a stale or forged handle is never dereferenced. The Direct algorithm asks
 * tt_mem_region whether a buffer lies in a block, so that its peers map the block and read the
 * buffer with plain loads. Registrations are bookkeeping only. A symmetric window
 * (NCCL_WIN_COLL_SYMMETRIC) in ncclMemAlloc memory also steers the cost model: NCCL's contract
 * for such windows is that every rank passes window buffers to the same collective, so the model
 * may count on Direct mapping the peers' buffers (docs/tuning.md, "Symmetric windows"). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/core.h"
#include "transport/host.h"
#include "util/err.h"
#include "util/log.h"

/* ---- ncclMemAlloc blocks ------------------------------------------------------------------ */

struct mem_block {
    void *ptr;
    size_t bytes;
    int fd;
    uint64_t id; /* process-unique, never reused: peers cache their mappings by it */
    struct mem_block *next;
};

static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mem_block *blocks;
static uint64_t next_block_id = 1;
static _Atomic size_t live_blocks; /* lets tt_mem_region skip the lock when there are none */

ncclResult_t tt_mem_alloc(void **ptr, size_t bytes)
{
    ncclResult_t res = ncclSuccess;
    struct mem_block *block = NULL;
    void *map = MAP_FAILED;
    int fd = memfd_create("tutti-mem", MFD_CLOEXEC);
    if (fd < 0)
        return TT_ERROR(ncclSystemError, "ncclMemAlloc: memfd_create for %zu bytes failed: %s",
                        bytes, strerror(errno));
    if (ftruncate(fd, (off_t)bytes) != 0) {
        res = TT_ERROR(ncclSystemError, "ncclMemAlloc: sizing the memory file to %zu bytes "
                       "failed: %s", bytes, strerror(errno));
        goto fail;
    }
    map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        res = TT_ERROR(ncclSystemError, "ncclMemAlloc: mapping %zu bytes failed: %s", bytes,
                       strerror(errno));
        goto fail;
    }
    TT_TRY_GOTO(TT_CALLOC(&block, 1), res, fail);
    block->ptr = map;
    block->bytes = bytes;
    block->fd = fd;
    pthread_mutex_lock(&blocks_lock);
    block->id = next_block_id++;
    block->next = blocks;
    blocks = block;
    atomic_fetch_add(&live_blocks, 1);
    pthread_mutex_unlock(&blocks_lock);
    TT_INFO(TT_SUB_ALLOC, "ncclMemAlloc: %zu bytes at %p (memfd %d)", bytes, map, fd);
    *ptr = map;
    return ncclSuccess;
fail:
    if (map != MAP_FAILED) munmap(map, bytes);
    close(fd);
    return res;
}

ncclResult_t tt_mem_free(void *ptr)
{
    struct mem_block *block = NULL;
    pthread_mutex_lock(&blocks_lock);
    for (struct mem_block **p = &blocks; *p != NULL; p = &(*p)->next) {
        if ((*p)->ptr == ptr) {
            block = *p;
            *p = block->next;
            atomic_fetch_sub(&live_blocks, 1);
            break;
        }
    }
    pthread_mutex_unlock(&blocks_lock);
    if (block == NULL)
        return TT_ERROR(ncclInvalidArgument,
                        "ncclMemFree: %p was not returned by ncclMemAlloc (or was freed already)",
                        ptr);
    TT_INFO(TT_SUB_ALLOC, "ncclMemFree: %zu bytes at %p", block->bytes, ptr);
    munmap(block->ptr, block->bytes);
    close(block->fd);
    free(block);
    return ncclSuccess;
}

bool tt_mem_region(const void *ptr, size_t bytes, struct tt_host_region *out)
{
    *out = (struct tt_host_region){.fd = -1};
    if (ptr == NULL || atomic_load_explicit(&live_blocks, memory_order_relaxed) == 0)
        return false;
    uintptr_t lo = (uintptr_t)ptr;
    pthread_mutex_lock(&blocks_lock);
    for (const struct mem_block *b = blocks; b != NULL; b = b->next) {
        uintptr_t base = (uintptr_t)b->ptr;
        if (lo >= base && lo - base <= b->bytes && bytes <= b->bytes - (lo - base)) {
            *out = (struct tt_host_region){.fd = b->fd, .id = b->id, .offset = lo - base,
                                           .bytes = b->bytes};
            break;
        }
    }
    pthread_mutex_unlock(&blocks_lock);
    return out->fd >= 0;
}

/* ---- registrations and windows ------------------------------------------------------------ */

/* One registration or window of a communicator. */
struct tt_reg {
    void *buff;
    size_t bytes;
    int flags;
    bool is_window;
    bool shared; /* a symmetric window inside an ncclMemAlloc block */
    struct tt_reg *next;
};

/* A window handle is its record; the record comes first, so the two addresses are equal. */
struct ncclWindow_vidmem {
    struct tt_reg reg;
};

struct tt_reg_table {
    struct tt_reg *head;
};

void tt_reg_table_destroy(struct tt_reg_table *table)
{
    if (table == NULL) return;
    struct tt_reg *reg = table->head;
    while (reg != NULL) {
        struct tt_reg *next = reg->next;
        /* A window's record is the start of its ncclWindow_vidmem allocation. */
        free(reg);
        reg = next;
    }
    free(table);
}

static ncclResult_t add_reg(struct ncclComm *comm, struct tt_reg *reg)
{
    if (comm->regs == NULL) TT_TRY(TT_CALLOC(&comm->regs, 1));
    reg->next = comm->regs->head;
    comm->regs->head = reg;
    return ncclSuccess;
}

/* Unlinks the record at `reg` of the given kind; false when the table has no such record. */
static bool remove_reg(struct ncclComm *comm, const void *reg, bool is_window)
{
    if (comm->regs == NULL) return false;
    for (struct tt_reg **p = &comm->regs->head; *p != NULL; p = &(*p)->next) {
        if ((const void *)*p == reg && (*p)->is_window == is_window) {
            *p = (*p)->next;
            return true;
        }
    }
    return false;
}

ncclResult_t tt_comm_register(ncclComm_t comm, void *buff, size_t bytes, void **handle)
{
    ncclResult_t res = ncclSuccess;
    struct tt_reg *reg = NULL;
    TT_TRY(TT_CALLOC(&reg, 1));
    reg->buff = buff;
    reg->bytes = bytes;
    TT_TRY_GOTO(add_reg(comm, reg), res, fail);
    TT_INFO(TT_SUB_REG, "registered %zu bytes at %p: handle %p", bytes, buff, (void *)reg);
    *handle = reg;
    return ncclSuccess;
fail:
    free(reg);
    return res;
}

ncclResult_t tt_comm_deregister(ncclComm_t comm, void *handle)
{
    if (!remove_reg(comm, handle, false))
        return TT_ERROR(ncclInvalidArgument,
                        "ncclCommDeregister: handle %p is not a registration of this "
                        "communicator (never registered here, or deregistered already)",
                        handle);
    TT_INFO(TT_SUB_REG, "deregistered handle %p", handle);
    free(handle);
    return ncclSuccess;
}

ncclResult_t tt_comm_window_register(ncclComm_t comm, void *buff, size_t bytes,
                                     ncclWindow_t *win, int flags)
{
    ncclResult_t res = ncclSuccess;
    struct ncclWindow_vidmem *w = NULL;
    TT_TRY(TT_CALLOC(&w, 1));
    w->reg.buff = buff;
    w->reg.bytes = bytes;
    w->reg.flags = flags;
    w->reg.is_window = true;
    struct tt_host_region region;
    w->reg.shared = (flags & NCCL_WIN_COLL_SYMMETRIC) && tt_mem_region(buff, bytes, &region);
    TT_TRY_GOTO(add_reg(comm, &w->reg), res, fail);
    comm->sym_windows += w->reg.shared;
    TT_INFO(TT_SUB_REG, "window of %zu bytes at %p (flags 0x%x%s): %p", bytes, buff,
            (unsigned)flags, w->reg.shared ? ", symmetric in ncclMemAlloc memory" : "",
            (void *)w);
    *win = w;
    return ncclSuccess;
fail:
    free(w);
    return res;
}

ncclResult_t tt_comm_window_deregister(ncclComm_t comm, ncclWindow_t win)
{
    if (!remove_reg(comm, win, true))
        return TT_ERROR(ncclInvalidArgument,
                        "ncclCommWindowDeregister: window %p is not a window of this "
                        "communicator (never registered here, or deregistered already)",
                        (void *)win);
    TT_INFO(TT_SUB_REG, "window %p deregistered", (void *)win);
    comm->sym_windows -= win->reg.shared;
    free(win);
    return ncclSuccess;
}

bool tt_comm_sym_window(const struct ncclComm *comm, const void *ptr, size_t bytes)
{
    if (comm->sym_windows == 0 || ptr == NULL) return false;
    uintptr_t lo = (uintptr_t)ptr;
    for (const struct tt_reg *r = comm->regs->head; r != NULL; r = r->next) {
        uintptr_t base = (uintptr_t)r->buff;
        if (r->shared && lo >= base && lo - base <= r->bytes && bytes <= r->bytes - (lo - base))
            return true;
    }
    return false;
}
