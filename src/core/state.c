/* The checks every entry point makes on a communicator's run-time state before it takes an
 * operation (core/state.h). */
#include "core/state.h"

#include <poll.h>
#include <stdlib.h>

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

int tt_state_dead_peer(const struct tt_comm_state *st, int peer)
{
    if (st->pidfds == NULL || st->npidfds == 0) return -1;
    struct pollfd one, all[64], *fds = all;
    int *ranks = NULL, nfds = 0, found = -1;
    if (peer >= 0) {
        if (peer >= st->nranks || st->pidfds[peer] < 0) return -1;
        one = (struct pollfd){.fd = st->pidfds[peer], .events = POLLIN};
        fds = &one;
        nfds = 1;
    } else {
        if (st->npidfds > 64) {
            fds = calloc((size_t)st->npidfds, sizeof *fds);
            if (fds == NULL) return -1;
        }
        ranks = calloc((size_t)st->npidfds, sizeof *ranks);
        if (ranks == NULL) goto out;
        for (int r = 0; r < st->nranks; r++) {
            if (st->pidfds[r] < 0) continue;
            fds[nfds] = (struct pollfd){.fd = st->pidfds[r], .events = POLLIN};
            ranks[nfds++] = r;
        }
    }
    /* A pidfd becomes readable when its process has ended. */
    if (poll(fds, (nfds_t)nfds, 0) > 0) {
        for (int i = 0; i < nfds && found < 0; i++)
            if (fds[i].revents & (POLLIN | POLLHUP)) found = peer >= 0 ? peer : ranks[i];
    }
out:
    free(ranks);
    if (fds != all && fds != &one) free(fds);
    return found;
}
