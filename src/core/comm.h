/* The communicator. It owns its module objects (bootstrap, transport context, ring
 * connections) rather than absorbing their fields. Live communicators are kept in a registry
 * (comm.c), so a destroyed or forged handle is recognised without touching its memory. */
#ifndef TT_CORE_COMM_H
#define TT_CORE_COMM_H

#include <stdatomic.h>
#include <stdint.h>

#include "algo/algo.h"
#include "bootstrap/bootstrap.h"
#include "transport/transport.h"

/* What every rank tells every other at init (allgathered over the bootstrap). */
struct tt_peer_info {
    uint32_t version;
    int32_t rank;
    int32_t pid;
    uint32_t reserved;
    uint64_t host_hash;
    uint64_t slot_bytes;
    uint64_t nonce;
};

struct tt_ring {
    int prev;
    int next;
    struct tt_conn send; /* to next */
    struct tt_conn recv; /* from prev */
};

struct ncclComm {
    int rank;
    int nranks;
    struct tt_bootstrap *bootstrap;
    struct tt_peer_info *peers;
    struct tt_transport_ctx tctx;
    struct tt_ring ring;
    size_t slot_bytes;
    int64_t timeout_ms;
    uint32_t spin_limit; /* polls before a blocked wait yields (see choose_spin_limit) */
    _Atomic int abort;
    ncclResult_t async_error;
    uint64_t op_seq;
};

#endif
