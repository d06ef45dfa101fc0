/* The bootstrap: out-of-band TCP rendezvous that turns (unique id, rank, nranks) into a set of
 * ranks that can exchange small messages before any transport exists.
 *
 * ncclUniqueId (128 bytes) holds a format version, the root's socket address, a random 64-bit
 * magic and a 256-bit job secret (see struct tt_unique_id). ncclGetUniqueId starts the root: a
 * thread listening on that address. Each rank connects to the root and sends its own listening
 * address; once all nranks have arrived the root tells each rank the address of its ring
 * successor, so the ranks form a ring over which allgather runs (the root then exits). With
 * NCCL_COMM_ID=host:port every rank derives the same id, and rank 0 starts the root inside
 * ncclCommInitRank.
 *
 * Every wait has a deadline (TUTTI_TIMEOUT_MS) and checks the abort flag; a rank that never
 * arrives makes the root report, to every rank that did, which ranks are missing, so init fails
 * with an error naming them. Every message carries the magic and a length that is checked
 * before use. Calls on one bootstrap are not thread-safe (the core serialises them). */
#ifndef TT_BOOTSTRAP_H
#define TT_BOOTSTRAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "nccl.h"

#define TT_UNIQUE_ID_VERSION 1
/* tt_unique_id.flags: the root listened before the id existed (ncclGetUniqueId), so a refused
 * connection to it means it has ended and will not come back. Without it (NCCL_COMM_ID) rank 0
 * may start the root after the others try it, and refusals are retried until the deadline. */
#define TT_UNIQUE_ID_LISTENING 1u

/* The layout of ncclUniqueId's 128 bytes (static-asserted to fit). */
struct tt_unique_id {
    uint32_t version;
    uint32_t flags;
    uint64_t magic;
    uint8_t secret[32];
    uint16_t family;  /* AF_INET or AF_INET6 */
    uint16_t port;    /* network byte order */
    uint8_t addr[16]; /* IPv4 in the first 4 bytes, or IPv6 */
    uint32_t scope_id;
};

struct tt_bootstrap;

/* Creates a fresh id and starts its root thread (ncclGetUniqueId without NCCL_COMM_ID). */
ncclResult_t tt_bootstrap_get_unique_id(ncclUniqueId *out);
/* Derives the id every rank shares from "host:port" (NCCL_COMM_ID) and TUTTI_SECRET. */
ncclResult_t tt_bootstrap_id_from_string(const char *host_port, ncclUniqueId *out);
/* Starts the root for an id derived from NCCL_COMM_ID (rank 0 does this in init). The root
 * thread ends by itself once every rank has been told its successor, or at its deadline, or
 * early on a failure it tells the arrived ranks of (root.c says which). */
ncclResult_t tt_bootstrap_root_start(const ncclUniqueId *id);

/* Ends the root of `id` if it runs in this process (nothing otherwise), telling the ranks that
 * arrived that the job cannot form. Called when a rank's init fails after it joined, so that an
 * aborted init leaves no root thread behind. A root that a rank has withdrawn from stays
 * TUTTI_HANDSHAKE_MS more, to tell the ranks still to come. */
void tt_bootstrap_root_cancel(const ncclUniqueId *id);

/* Joins the job: connects to the root, learns the ring successor, builds the ring. */
ncclResult_t tt_bootstrap_create(const ncclUniqueId *id, int rank, int nranks,
                                 const _Atomic int *abort, struct tt_bootstrap **out);
void tt_bootstrap_destroy(struct tt_bootstrap *bs);

/* Allgather: `data` holds nranks blocks of `bytes`; this rank's block is filled on entry. */
ncclResult_t tt_bootstrap_allgather(struct tt_bootstrap *bs, void *data, size_t bytes);
ncclResult_t tt_bootstrap_barrier(struct tt_bootstrap *bs);
/* Point-to-point messages between any two ranks, matched by (peer, tag); sizes must agree. */
ncclResult_t tt_bootstrap_send(struct tt_bootstrap *bs, int peer, int tag, const void *data,
                               size_t bytes);
ncclResult_t tt_bootstrap_recv(struct tt_bootstrap *bs, int peer, int tag, void *data,
                               size_t bytes);
/* The same, sealed (crypto_secretbox, under a key derived from the communicator's secret and
 * session, the tag and both ranks; a fresh nonce per message): for what must stay secret on the
 * wire, such as a child communicator's unique id, which holds its secret. At most
 * TT_BOOTSTRAP_SEALED_MAX bytes. A message that does not open is ncclRemoteError. */
#define TT_BOOTSTRAP_SEALED_MAX 1024
ncclResult_t tt_bootstrap_send_sealed(struct tt_bootstrap *bs, int peer, int tag,
                                      const void *data, size_t bytes);
ncclResult_t tt_bootstrap_recv_sealed(struct tt_bootstrap *bs, int peer, int tag, void *data,
                                      size_t bytes);
/* Called about every TT_BOOTSTRAP_WATCH_MS while a watched receive waits: ncclSuccess to go
 * on waiting, else the error the receive returns at once (a peer known to have failed). */
typedef ncclResult_t (*tt_bootstrap_watch_fn)(void *arg);
#define TT_BOOTSTRAP_WATCH_MS 5
/* tt_bootstrap_recv that also asks `watch` (NULL: nobody) while it waits. */
ncclResult_t tt_bootstrap_recv_watched(struct tt_bootstrap *bs, int peer, int tag, void *data,
                                       size_t bytes, tt_bootstrap_watch_fn watch, void *arg);
/* The same for a sealed message. */
ncclResult_t tt_bootstrap_recv_sealed_watched(struct tt_bootstrap *bs, int peer, int tag,
                                              void *data, size_t bytes,
                                              tt_bootstrap_watch_fn watch, void *arg);

/* Whether `peer` is known to be gone: a connection to its bootstrap listener, which lives as
 * long as its communicator, was refused (its process ended, or it destroyed the communicator).
 * Cheap to call in a wait loop: it probes at most every 250 ms (false in between) and waits at
 * most 10 ms for an answer, so false means "not known", not "alive"; it says true once the
 * peer's probes have been refused for a second (what the peer sent before it went gets that
 * long to arrive). Serves peers on other hosts, whose processes cannot be watched, and peers
 * anywhere that destroyed the communicator and live on. */
bool tt_bootstrap_peer_gone(struct tt_bootstrap *bs, int peer);

/* The address of the interface this rank uses (NCCL_SOCKET_IFNAME); transports listen on it. */
const struct sockaddr_storage *tt_bootstrap_local_addr(const struct tt_bootstrap *bs);
/* The address (with its port) this rank's bootstrap listens on, for logs and tests. */
const struct sockaddr_storage *tt_bootstrap_listen_addr(const struct tt_bootstrap *bs);

#endif
