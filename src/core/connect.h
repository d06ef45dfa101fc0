/* Connections made after the ring (core/connect.c): point-to-point ones on first use, from a
 * batch's sends and receives, and Tree's at init. Both exchange connection infos over the
 * bootstrap under each communicator's bootstrap_lock. */
#ifndef TT_CORE_CONNECT_H
#define TT_CORE_CONNECT_H

#include "core/engine.h"

struct ncclComm;

/* Connects the point-to-point connections the batch's tasks need. */
ncclResult_t tt_connect_batch(struct tt_batch *b);
/* Whether a transport's connect wait for `peer` must end (transport.h, connect_check; `comm`
 * is the communicator): it was aborted or revoked, or the peer is gone. */
ncclResult_t tt_connect_check(void *comm, int peer);
/* Makes Tree's connections (comm->tree) to every peer any Tree operation of this rank may use,
 * at init, when every rank takes part: a connection made later, inside the first Tree
 * operation, would wait for peers that may be busy with other operations (ranks need not group
 * collectives alike). */
ncclResult_t tt_connect_tree(struct ncclComm *comm);

#endif
