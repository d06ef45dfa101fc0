/* The rank side's state, shared by bootstrap.c (join, ring, allgather, liveness probes) and
 * p2p.c (point-to-point messages). Not for use outside src/bootstrap. */
#ifndef TT_BOOTSTRAP_RANK_H
#define TT_BOOTSTRAP_RANK_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/proto.h"
#include "nccl.h"

/* Largest point-to-point message accepted from a peer (a bound on what a bad header can make
 * us allocate). */
#define MAX_P2P_BYTES ((uint64_t)1 << 30)

/* A message received before it was asked for. */
struct stashed {
    struct stashed *next;
    int from;
    int tag;
    size_t bytes;
    uint8_t *data;
};

struct tt_bootstrap {
    int rank;
    int nranks;
    uint64_t magic;
    uint8_t secret[32];
    uint8_t session[TT_BS_NONCE_BYTES];
    const _Atomic int *abort;
    bool root_listening; /* the id's TT_UNIQUE_ID_LISTENING: a refusing root has ended */
    int64_t timeout_ms;
    int listen_fd;
    struct tt_bs_listener *listener; /* serves listen_fd from the start */
    struct sockaddr_storage listen_addr; /* with its port */
    struct sockaddr_storage local_addr;  /* the same, port 0 */
    int ring_next_fd;
    int ring_prev_fd;
    uint64_t ring_seq; /* allgather steps so far; both ring neighbours count alike */
    bool ring_broken;  /* an allgather failed here and shut the ring (tt_bootstrap_allgather) */
    struct sockaddr_storage *peer_addrs; /* nranks listen addresses */
    int *p2p_out_fd; /* nranks: connections this rank opened (owns the array of both) */
    int *p2p_in_fd;  /* nranks: connections peers opened to this rank */
    struct stashed *stash;
    /* tt_bootstrap_peer_gone's state, under probe_lock. */
    pthread_mutex_t probe_lock;
    uint64_t probe_next_ns;    /* no probe sooner */
    uint64_t *refused_since_ns; /* nranks: since when each peer's probes have been refused,
                                   with no answer in between (0: not refused) */
};

/* Opens a connection to rank `to` at `addr`: passes the peer's gate and answers its challenge
 * with a hello proving the secret for this job, this pair of ranks and this connection. */
ncclResult_t tt_bs_open_peer(struct tt_bootstrap *bs, const struct sockaddr_storage *addr,
                             enum tt_bs_conn_kind kind, int to, uint64_t deadline_ns, int *fd_out);
/* Waits until the listener hands over the authenticated connection of `kind` from rank `from`
 * (see bootstrap.c). */
ncclResult_t tt_bs_take_peer(struct tt_bootstrap *bs, enum tt_bs_conn_kind kind, int from,
                             uint64_t deadline_ns, const char *waiting_for,
                             tt_bootstrap_watch_fn watch, void *arg, int *fd_out);

#endif
