/* The steps of communicator init (core/setup.c), in the order core/comm.c runs them. Each
 * works on a communicator whose bootstrap exists and leaves what it made in it for
 * comm_free to release. */
#ifndef TT_CORE_SETUP_H
#define TT_CORE_SETUP_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

struct ncclComm;

/* Bytes per FIFO slot: TUTTI_CHUNK_BYTES when set (a test knob), else NCCL_BUFFSIZE / 8. */
ncclResult_t tt_setup_slot_bytes(size_t *out);
/* Allgathers every rank's struct tt_peer_info and checks it (version, slot size). */
ncclResult_t tt_setup_peers(struct ncclComm *comm);
/* A pidfd of every other rank of this host (core/state.h). */
void tt_setup_pidfds(struct ncclComm *comm);
/* Polls a blocked wait spins before it yields. */
uint32_t tt_setup_spin_limit(const struct ncclComm *comm);
/* Hosts, ranks on this host, CPUs, the ring's slowest link. */
ncclResult_t tt_setup_shape(struct ncclComm *comm);
/* The transport towards every peer, from the transport table. */
ncclResult_t tt_setup_transports(struct ncclComm *comm);
/* The local team and, where it spans the communicator, OneShot's and Direct's resources. */
ncclResult_t tt_setup_team(struct ncclComm *comm);
/* The device-direct path: where the team spans the communicator and every rank is a GPU rank,
 * each maps every other's device scratch (CUDA builds; TUTTI_CUDA_DIRECT). */
ncclResult_t tt_setup_device_team(struct ncclComm *comm);
/* Connects the ring. */
ncclResult_t tt_setup_ring(struct ncclComm *comm);

#endif
