/* Memory: registrations and windows (ncclCommRegister, ncclCommWindowRegister); the memory
 * files under them are core/mem.c's.
 *
 * Registrations and windows are recorded in the communicator's table; their handles are the
 * records themselves, accepted back only when found in that table, so a stale or forged handle
 * is never dereferenced. The Direct algorithm asks tt_mem_region which part of a buffer lies in
 * a memory file, so that its peers map the file and read that part with plain loads. A symmetric
 * window (NCCL_WIN_COLL_SYMMETRIC) also steers the cost model when every rank put it in
 * shareable memory (ncclMemAlloc memory, or ordinary memory whose pages moved), which the ranks
 * settle among themselves when they register it, as NCCL makes window registration collective:
 * NCCL's contract for such windows is that every rank passes window buffers to the same
 * collective, so the model may count on Direct mapping the peers' buffers (docs/tuning.md,
 * "Symmetric windows"). */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/mem.h"
#include "device/device.h"
#include "util/err.h"
#include "util/log.h"

/* One registration or window of a communicator. */
struct tt_reg {
    void *buff;
    size_t bytes;
    int flags;
    struct tt_mem_block *pages; /* its pages, moved into a memory file (NULL: not moved) */
    bool is_window;
    bool shared; /* a symmetric window in shareable memory on every rank */
    struct tt_device_window *dev; /* a symmetric window on device memory, mapped by every rank */
    struct tt_reg *next;
};

/* A window handle is its record; the record comes first, so the two addresses are equal. */
struct ncclWindow_vidmem {
    struct tt_reg reg;
};

struct tt_reg_table {
    struct tt_reg *head;
};

void tt_mem_table_destroy(struct tt_reg_table *table, bool quick)
{
    if (table == NULL) return;
    struct tt_reg *reg = table->head;
    while (reg != NULL) {
        struct tt_reg *next = reg->next;
        /* A window's record is the start of its ncclWindow_vidmem allocation. */
        if (quick)
            tt_mem_leave_pages(reg->pages);
        else
            tt_mem_unshare_pages(reg->pages);
        free(reg);
        reg = next;
    }
    free(table);
}

static ncclResult_t add_reg(struct ncclComm *comm, struct tt_reg *reg)
{
    ncclResult_t res = ncclSuccess;
    pthread_mutex_lock(&comm->tables_lock);
    if (comm->regs == NULL) res = TT_CALLOC(&comm->regs, 1);
    if (res == ncclSuccess) {
        reg->next = comm->regs->head;
        comm->regs->head = reg;
    }
    pthread_mutex_unlock(&comm->tables_lock);
    return res;
}

/* Unlinks the record at `reg` of the given kind; false when the table has no such record. */
static bool remove_reg(struct ncclComm *comm, const void *reg, bool is_window)
{
    bool found = false;
    pthread_mutex_lock(&comm->tables_lock);
    for (struct tt_reg **p = comm->regs ? &comm->regs->head : NULL; p && *p; p = &(*p)->next) {
        if ((const void *)*p == reg && (*p)->is_window == is_window) {
            *p = (*p)->next;
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&comm->tables_lock);
    return found;
}

ncclResult_t tt_mem_register(ncclComm_t comm, void *buff, size_t bytes, void **handle)
{
    ncclResult_t res = ncclSuccess;
    struct tt_reg *reg = NULL;
    TT_TRY(TT_CALLOC(&reg, 1));
    reg->buff = buff;
    reg->bytes = bytes;
    TT_TRY_GOTO(add_reg(comm, reg), res, fail);
    reg->pages = tt_mem_share_pages(buff, bytes);
    TT_INFO(TT_SUB_REG, "registered %zu bytes at %p: handle %p", bytes, buff, (void *)reg);
    *handle = reg;
    return ncclSuccess;
fail:
    free(reg);
    return res;
}

ncclResult_t tt_mem_deregister(ncclComm_t comm, void *handle)
{
    if (!remove_reg(comm, handle, false))
        return TT_ERROR(ncclInvalidArgument,
                        "ncclCommDeregister: handle %p is not a registration of this "
                        "communicator (never registered here, or deregistered already)",
                        handle);
    TT_INFO(TT_SUB_REG, "deregistered handle %p", handle);
    tt_mem_unshare_pages(((struct tt_reg *)handle)->pages);
    free(handle);
    return ncclSuccess;
}

/* Sets *flag to whether it is true on every rank of the communicator (a collective call). */
static ncclResult_t agree_all(struct ncclComm *comm, bool *flag)
{
    if (comm->st.nranks == 1) return ncclSuccess;
    uint8_t *all = NULL;
    TT_TRY(TT_CALLOC(&all, (size_t)comm->st.nranks));
    all[comm->st.rank] = *flag;
    pthread_mutex_lock(&comm->bootstrap_lock);
    ncclResult_t res = tt_bootstrap_allgather(comm->bootstrap, all, 1);
    pthread_mutex_unlock(&comm->bootstrap_lock);
    for (int r = 0; r < comm->st.nranks; r++) *flag = *flag && all[r];
    free(all);
    return res;
}

/* What each rank tells the others when a window is registered. */
struct window_info {
    uint8_t shareable; /* symmetric, in shareable host memory */
    uint8_t reserved[7];
    struct tt_device_team_info dev; /* symmetric, on device memory (dev.ok) */
};

/* A symmetric window on device memory: every rank exported its buffer (or said it cannot); when
 * all did, each maps the others' and the ranks agree that every mapping worked. Every rank of
 * a communicator with the device-direct path takes the same steps, whatever its own answer. */
static ncclResult_t open_device_window(ncclComm_t comm, struct tt_reg *reg,
                                       const struct window_info *all)
{
    int n = comm->st.nranks;
    bool every = true;
    for (int r = 0; r < n; r++)
        every = every && all[r].dev.ok && all[r].dev.bytes == all[comm->st.rank].dev.bytes;
    if (!every) return ncclSuccess;
    struct tt_device_team_info *infos = NULL;
    TT_TRY(TT_CALLOC(&infos, (size_t)n));
    for (int r = 0; r < n; r++) infos[r] = all[r].dev;
    ncclResult_t opened = tt_device_window_open(comm->dev_team, reg->buff, infos, &reg->dev);
    free(infos);
    bool ok = opened == ncclSuccess;
    if (!ok)
        TT_WARN("symmetric window at %p: the peers' device buffers could not be mapped (%s); "
                "AllReduce on it is not device-direct", reg->buff, tt_error_last());
    TT_TRY(agree_all(comm, &ok));
    if (!ok) {
        tt_device_window_close(comm->dev_team, reg->dev);
        reg->dev = NULL;
    }
    return ncclSuccess;
}

ncclResult_t tt_mem_window_register(ncclComm_t comm, void *buff, size_t bytes,
                                    ncclWindow_t *win, int flags)
{
    ncclResult_t res = ncclSuccess;
    struct ncclWindow_vidmem *w = NULL;
    struct window_info *all = NULL;
    TT_TRY(TT_CALLOC(&w, 1));
    w->reg.buff = buff;
    w->reg.bytes = bytes;
    w->reg.flags = flags;
    w->reg.is_window = true;
    bool symmetric = (flags & NCCL_WIN_COLL_SYMMETRIC) != 0;
    bool device = tt_device_mem_kind(buff) == TT_MEM_DEVICE;
    /* Device memory is never moved into a memory file (its addresses hold no host pages). */
    w->reg.pages = device ? NULL : tt_mem_share_pages(buff, bytes);
    /* Registering a window is collective (NCCL's rule), so the ranks settle here, alike,
     * whether every one of them put it in shareable memory: only then may the cost model count
     * on Direct mapping it. Each rank's own answer may differ (ordinary memory moves only where
     * its buffer covers enough whole pages; a rank may pass ordinary memory where the others
     * pass ncclMemAlloc memory), and the ranks must never choose differently. The same
     * exchange carries the device window's export when the device-direct path is on. */
    TT_TRY_GOTO(TT_CALLOC(&all, (size_t)comm->st.nranks), res, fail);
    struct window_info *mine = &all[comm->st.rank];
    mine->shareable = symmetric && !device &&
                      (w->reg.pages != NULL || tt_mem_in_allocated_block(buff, bytes));
    if (symmetric && device && comm->dev_team != NULL &&
        tt_device_window_export(buff, bytes, &mine->dev) != ncclSuccess) {
        /* Told to the peers (dev.ok 0), not returned: every rank must take part in the
         * exchange below, or the others would wait in it until their deadline; the window is
         * then device-direct on no rank. */
        TT_WARN("symmetric window at %p: exporting the device buffer failed (%s); AllReduce on "
                "it is not device-direct", buff, tt_error_last());
        memset(&mine->dev, 0, sizeof mine->dev);
    }
    if (comm->st.nranks > 1) {
        pthread_mutex_lock(&comm->bootstrap_lock);
        res = tt_bootstrap_allgather(comm->bootstrap, all, sizeof *all);
        pthread_mutex_unlock(&comm->bootstrap_lock);
        if (res != ncclSuccess) goto fail;
    }
    bool shared = true;
    for (int r = 0; r < comm->st.nranks; r++) shared = shared && all[r].shareable;
    w->reg.shared = shared;
    if (comm->dev_team != NULL)
        TT_TRY_GOTO(open_device_window(comm, &w->reg, all), res, fail);
    free(all);
    all = NULL;
    TT_TRY_GOTO(add_reg(comm, &w->reg), res, fail);
    comm->sym_windows += w->reg.shared;
    TT_INFO(TT_SUB_REG, "window of %zu bytes at %p (flags 0x%x%s): %p", bytes, buff,
            (unsigned)flags,
            w->reg.shared ? ", symmetric in shareable memory"
            : w->reg.dev  ? ", symmetric on device memory, mapped by every rank"
                          : "",
            (void *)w);
    *win = w;
    return ncclSuccess;
fail:
    if (w->reg.dev != NULL) tt_device_window_close(comm->dev_team, w->reg.dev);
    free(all);
    tt_mem_unshare_pages(w->reg.pages);
    free(w);
    return res;
}

ncclResult_t tt_mem_window_deregister(ncclComm_t comm, ncclWindow_t win)
{
    if (!remove_reg(comm, win, true))
        return TT_ERROR(ncclInvalidArgument,
                        "ncclCommWindowDeregister: window %p is not a window of this "
                        "communicator (never registered here, or deregistered already)",
                        (void *)win);
    TT_INFO(TT_SUB_REG, "window %p deregistered", (void *)win);
    comm->sym_windows -= win->reg.shared;
    tt_device_window_close(comm->dev_team, win->reg.dev);
    tt_mem_unshare_pages(win->reg.pages);
    free(win);
    return ncclSuccess;
}

void tt_mem_close_device_windows(ncclComm_t comm)
{
    pthread_mutex_lock(&comm->tables_lock);
    for (struct tt_reg *r = comm->regs ? comm->regs->head : NULL; r != NULL; r = r->next) {
        tt_device_window_close(comm->dev_team, r->dev);
        r->dev = NULL;
    }
    pthread_mutex_unlock(&comm->tables_lock);
}

/* Finds the window holding [ptr, ptr + bytes): a symmetric one in shareable host memory, or
 * (`device`) one on device memory that every rank mapped; *win and *offset say which and where
 * (may be NULL). */
static bool find_window(const struct ncclComm *comm, const void *ptr, size_t bytes, bool device,
                        const struct tt_device_window **win, size_t *offset)
{
    uintptr_t lo = (uintptr_t)ptr;
    bool found = false;
    /* The lock is the table's, not part of the communicator's value. */
    pthread_mutex_t *lock = (pthread_mutex_t *)&comm->tables_lock;
    pthread_mutex_lock(lock);
    for (const struct tt_reg *r = comm->regs ? comm->regs->head : NULL; r && !found;
         r = r->next) {
        uintptr_t base = (uintptr_t)r->buff;
        found = (device ? r->dev != NULL : r->shared) && lo >= base && lo - base <= r->bytes &&
                bytes <= r->bytes - (lo - base);
        if (found && win != NULL) {
            *win = r->dev;
            *offset = lo - base;
        }
    }
    pthread_mutex_unlock(lock);
    return found;
}

bool tt_mem_device_window(const struct ncclComm *comm, const void *ptr, size_t bytes,
                          const struct tt_device_window **win, size_t *offset)
{
    return comm->dev_team != NULL && ptr != NULL &&
           find_window(comm, ptr, bytes, true, win, offset);
}

bool tt_mem_sym_window(const struct ncclComm *comm, const void *ptr, size_t bytes)
{
    return atomic_load_explicit(&comm->sym_windows, memory_order_relaxed) != 0 && ptr != NULL &&
           find_window(comm, ptr, bytes, false, NULL, NULL);
}
