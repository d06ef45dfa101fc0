/* AlltoAll against its grouped Send/Recv form on one host (core/forms.c): what a stalled
 * point-to-point task publishes, and the check a stalled team AlltoAll makes. */
#ifndef TT_CORE_FORMS_H
#define TT_CORE_FORMS_H

#include <stdbool.h>
#include <stdint.h>

#include "nccl.h"

struct tt_task;
struct tt_batch;

/* ncclInvalidUsage once a peer that has not reached the team AlltoAll `t` has waited, for a
 * grace period, in a grouped Send and Recv of its block with this rank that this rank has not
 * issued; ncclSuccess otherwise (b keeps the peer seen and since when). */
ncclResult_t tt_forms_check(const struct tt_task *t, struct tt_batch *b, uint64_t now);
/* Publishes in the team mailbox what the stalled point-to-point task `t` waits for: the task
 * whose peer waits for this rank, if one does, else the first (*published says one was). */
void tt_forms_publish_wait(const struct tt_batch *b, const struct tt_task *t, bool *published);
/* Whether the batch holds, besides the point-to-point task `t`, the opposite operation with
 * t's peer, of the same count and datatype (one block of an AlltoAll's grouped form). */
bool tt_forms_both_ways(const struct tt_batch *b, const struct tt_task *t);

#endif
