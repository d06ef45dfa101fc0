/* User-defined reduction operators: the per-communicator table behind ncclRedOpCreatePreMulSum.
 * Operator value ncclNumOps + i names slot i of the table; a slot holds the operator already
 * resolved into the kernels' form (struct tt_redop), so the scalar is copied once, at creation,
 * and later collectives never read the user's memory again. A destroyed slot may be reused by
 * the next creation. Invariant: a value resolves only while its slot is live, and only for the
 * datatype it was created for (NCCL's rule). The table belongs to one communicator and is
 * guarded by its tables_lock; built-in operators never touch it. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "core/comm.h"
#include "core/redop.h"
#include "core/state.h"
#include "device/device.h"
#include "reduce/reduce.h"
#include "util/err.h"
#include "util/log.h"

#define FIRST_SLOTS 4

struct user_op {
    bool live;
    struct tt_redop redop;
    /* ncclScalarDevice: where the scalar lives, read again at every collective that uses the
     * operator (NULL: ncclScalarHostImmediate, read once at creation into redop). */
    const void *scalar_at;
};

struct tt_redop_table {
    struct user_op *slots;
    size_t nslots;
};

void tt_redop_table_destroy(struct tt_redop_table *table)
{
    if (table == NULL) return;
    free(table->slots);
    free(table);
}

/* Values from ncclNumOps up to ncclMaxRedOp name user operators. */
static size_t max_slots(void)
{
    return (size_t)ncclMaxRedOp - (size_t)ncclNumOps + 1;
}

/* A free slot of comm's table (created or grown as needed) in *index. */
static ncclResult_t find_free_slot(struct ncclComm *comm, size_t *index)
{
    if (comm->redops == NULL) TT_TRY(TT_CALLOC(&comm->redops, 1));
    struct tt_redop_table *table = comm->redops;
    for (size_t i = 0; i < table->nslots; i++) {
        if (!table->slots[i].live) {
            *index = i;
            return ncclSuccess;
        }
    }
    if (table->nslots == max_slots())
        return TT_ERROR(ncclInvalidUsage,
                        "ncclRedOpCreatePreMulSum: all %zu user operators of this communicator "
                        "are in use; destroy some with ncclRedOpDestroy",
                        table->nslots);
    size_t grown = table->nslots == 0 ? FIRST_SLOTS : 2 * table->nslots;
    if (grown > max_slots()) grown = max_slots();
    struct user_op *slots = realloc(table->slots, grown * sizeof *slots);
    if (slots == NULL)
        return TT_ERROR(ncclSystemError, "out of memory growing the user operator table to %zu",
                        grown);
    for (size_t i = table->nslots; i < grown; i++) slots[i].live = false;
    *index = table->nslots;
    table->slots = slots;
    table->nslots = grown;
    return ncclSuccess;
}

/* The live slot named by `op`, or NULL. */
static struct user_op *find_live(const struct ncclComm *comm, ncclRedOp_t op)
{
    if ((int)op < (int)ncclNumOps || comm->redops == NULL) return NULL;
    size_t index = (size_t)op - (size_t)ncclNumOps;
    if (index >= comm->redops->nslots || !comm->redops->slots[index].live) return NULL;
    return &comm->redops->slots[index];
}

/* Copies a device-resident scalar (ncclScalarDevice) of `dtype` into `out`: host memory as it
 * is, device memory (CUDA builds) through the driver. NCCL reads it when the collective runs on
 * its stream; Tutti when the collective is issued (docs/semantics.md). */
static void read_scalar(const void *at, ncclDataType_t dtype, unsigned char out[8])
{
    tt_device_copy(tt_device_mem_kind(at), out, at, tt_dtype_bytes(dtype));
}

ncclResult_t tt_redop_create_premulsum(ncclComm_t comm, ncclRedOp_t *op, const void *scalar,
                                       ncclDataType_t dtype, ncclScalarResidence_t residence)
{
    TT_TRY(tt_state_check_usable(&comm->st, "ncclRedOpCreatePreMulSum"));
    /* A device-resident scalar is read at each collective (read_scalar); this checks the
     * datatype and reads it once now, so that a pointer nothing can read fails here. */
    unsigned char now[8];
    bool device = residence == ncclScalarDevice;
    if (device) read_scalar(scalar, dtype, now);
    struct tt_redop redop;
    TT_TRY(tt_redop_init_premulsum(&redop, dtype, device ? now : scalar));
    size_t index = 0;
    pthread_mutex_lock(&comm->tables_lock);
    ncclResult_t res = find_free_slot(comm, &index);
    if (res == ncclSuccess) {
        comm->redops->slots[index].redop = redop;
        comm->redops->slots[index].scalar_at = device ? scalar : NULL;
        comm->redops->slots[index].live = true;
    }
    pthread_mutex_unlock(&comm->tables_lock);
    TT_TRY(res);
    *op = (ncclRedOp_t)((size_t)ncclNumOps + index);
    TT_INFO(TT_SUB_COLL, "user operator %d: PreMulSum on %s", (int)*op, tt_dtype_name(dtype));
    return ncclSuccess;
}

ncclResult_t tt_redop_destroy(ncclComm_t comm, ncclRedOp_t op)
{
    pthread_mutex_lock(&comm->tables_lock);
    struct user_op *slot = find_live(comm, op);
    if (slot != NULL) slot->live = false;
    pthread_mutex_unlock(&comm->tables_lock);
    if (slot == NULL)
        return TT_ERROR(ncclInvalidArgument,
                        "ncclRedOpDestroy: op %d is not a live operator of this communicator "
                        "(never created on it, or already destroyed)",
                        (int)op);
    TT_INFO(TT_SUB_COLL, "user operator %d destroyed", (int)op);
    return ncclSuccess;
}

ncclResult_t tt_redop_resolve(ncclComm_t comm, ncclRedOp_t op, ncclDataType_t dtype,
                                   struct tt_redop *out)
{
    if ((int)op < 0)
        return TT_ERROR(ncclInvalidArgument, "op %d is not an ncclRedOp_t", (int)op);
    if ((int)op < (int)ncclNumOps) return tt_redop_init(out, op, dtype, comm->st.nranks);
    pthread_mutex_lock(&comm->tables_lock);
    const struct user_op *found = find_live(comm, op);
    struct user_op slot_copy = found ? *found : (struct user_op){0};
    pthread_mutex_unlock(&comm->tables_lock);
    const struct user_op *slot = found ? &slot_copy : NULL;
    if (slot == NULL)
        return TT_ERROR(ncclInvalidArgument,
                        "op %d is neither a built-in operator (0 to %d) nor a live operator "
                        "created by ncclRedOpCreatePreMulSum on this communicator",
                        (int)op, (int)ncclNumOps - 1);
    if (slot->redop.dtype != dtype)
        return TT_ERROR(ncclInvalidArgument,
                        "op %d was created for datatype %s but is used with %s; a PreMulSum "
                        "operator serves only the datatype it was created for",
                        (int)op, tt_dtype_name(slot->redop.dtype), tt_dtype_name(dtype));
    *out = slot->redop;
    if (slot->scalar_at != NULL) {
        unsigned char now[8];
        read_scalar(slot->scalar_at, dtype, now);
        TT_TRY(tt_redop_init_premulsum(out, dtype, now));
    }
    return ncclSuccess;
}
