/* User-defined reduction operators (core/redop.c): the per-communicator table behind
 * ncclRedOpCreatePreMulSum. Resolving turns a built-in or user op into the kernels' form for a
 * dtype, or fails with a message (unknown op, dtype mismatch). The table is guarded by the
 * communicator's tables_lock, so operators may be created while other threads issue. */
#ifndef TT_CORE_REDOP_H
#define TT_CORE_REDOP_H

#include "nccl.h"
#include "reduce/reduce.h"

struct ncclComm;
struct tt_redop_table;

ncclResult_t tt_redop_create_premulsum(struct ncclComm *comm, ncclRedOp_t *op,
                                       const void *scalar, ncclDataType_t dtype,
                                       ncclScalarResidence_t residence);
ncclResult_t tt_redop_destroy(struct ncclComm *comm, ncclRedOp_t op);
ncclResult_t tt_redop_resolve(struct ncclComm *comm, ncclRedOp_t op, ncclDataType_t dtype,
                              struct tt_redop *out);
/* Frees a communicator's table (accepts NULL). */
void tt_redop_table_destroy(struct tt_redop_table *table);

#endif
