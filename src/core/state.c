/* The checks every entry point makes on a communicator's run-time state before it takes an
 * operation (core/state.h). */
#include "core/state.h"

#include "util/err.h"

ncclResult_t tt_state_check_usable(const struct tt_comm_state *st, const char *caller)
{
    int phase = atomic_load(&st->phase);
    if (phase == TT_COMM_INITIALIZING)
        return TT_ERROR(ncclInvalidUsage,
                        "%s: rank %d's communicator is still initialising; poll "
                        "ncclCommGetAsyncError until it returns ncclSuccess",
                        caller, st->rank);
    if (phase == TT_COMM_FAILED)
        return TT_ERROR(st->init_result, "%s: rank %d's communicator failed to initialise",
                        caller, st->rank);
    if (atomic_load(&st->abort))
        return TT_ERROR(ncclInvalidUsage, "%s: rank %d's communicator was aborted", caller,
                        st->rank);
    if (atomic_load(&st->revoked))
        return TT_ERROR(ncclInvalidUsage, "%s: rank %d's communicator was revoked", caller,
                        st->rank);
    if (atomic_load(&st->finalized))
        return TT_ERROR(ncclInvalidUsage, "%s: rank %d's communicator was finalized", caller,
                        st->rank);
    return ncclSuccess;
}
