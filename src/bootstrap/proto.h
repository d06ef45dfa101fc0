/* The bootstrap's wire format and authentication, shared by the root (root.c, unique_id.c),
 * the ranks (bootstrap.c, p2p.c) and the listeners of both (gate.c, listener.c). Private to
 * src/bootstrap/.
 *
 * Every message is a fixed-layout struct of fixed-width fields (both ends run this same code on
 * little-endian hosts) that starts with the job's magic; every field read from the network is
 * range-checked before use. Every connection opens at the gate (gate.c): the connecting side
 * sends the job's tag (its magic) at once, and the listener answers the job's tag with a fresh
 * challenge and anything else with a refusal, so that a listener can tell its job's
 * connections from blind junk before anyone has proved anything, and evicts only junk under a
 * flood. Authentication: the 256-bit job secret never crosses the network. A rank proves it to
 * the root by a MAC over the root's fresh challenge, and the root proves it back by a MAC over
 * the rank's own nonce; the root's reply carries a fresh session value, and every rank-to-rank
 * hello is MAC'd over it, so a hello captured in one job is refused in any other. The MAC is
 * libsodium's HMAC-SHA-512-256 truncated to 128 bits (auth.c). */
#ifndef TT_BOOTSTRAP_PROTO_H
#define TT_BOOTSTRAP_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "bootstrap/bootstrap.h"
#include "nccl.h"

#define TT_BS_NONCE_BYTES 16
#define TT_BS_MAC_BYTES 16
/* Argon2id cost for a passphrase TUTTI_SECRET: 3 passes over 64 MiB (libsodium's "moderate"
 * is 3 x 256 MiB; every rank pays this once per init, so it stays below a second). */
#define TT_BS_KDF_OPSLIMIT 3
#define TT_BS_KDF_MEMLIMIT_BYTES (64u << 20)
#define TT_BS_REPLY_TEXT_BYTES 400
/* The most ranks a root accepts in one job: a bound on what a hello (even an authenticated
 * one, from a buggy or hostile rank) can make the root allocate. */
#define TT_BS_MAX_RANKS (1 << 20)
/* Connections a listener (root or rank) keeps waiting for their tag or hello; one more evicts
 * the oldest of those still without the job's tag (only when there is none, the oldest of the
 * rest), so a flood of idle connections costs at most this many fds and a few KiB, and never
 * costs a connection of the job that sent its tag. */
#define TT_BS_MAX_PENDING 128
/* Connections a listener accepts per turn before it reads the tags and hellos that have
 * arrived. */
#define TT_BS_ACCEPT_BATCH 16

/* A socket address on the wire. */
struct tt_bs_wire_addr {
    uint16_t family; /* AF_INET or AF_INET6 */
    uint16_t port;   /* network byte order */
    uint32_t scope_id;
    uint8_t addr[16];
};

/* Connector -> listener (root or rank), the first bytes on every bootstrap connection, sent
 * without waiting for anything: the job's magic, which tells a listener that the connection
 * belongs to its job (a stranger who has not seen the job's traffic cannot produce it) and
 * which the connector's hello carries anyway. A blind keyed hash of the secret, or random with
 * an id from ncclGetUniqueId: nothing an observer can test a guessed secret against without
 * first paying the key derivation. */
struct tt_bs_tag {
    uint64_t magic;
};

/* challenge.status */
#define TT_BS_CHALLENGE 0ull
#define TT_BS_REFUSED 0x6465737566657221ull /* "!refused": the tag is not this job's */

/* Listener -> connector, once the connector's tag has arrived. A challenge (status
 * TT_BS_CHALLENGE, a fresh random nonce) answers the job's tag; a refusal (TT_BS_REFUSED, a zero
 * nonce, then the connection is closed) any other. Neither holds anything derived from the
 * secret; the connector proves itself first, then the root (docs/security.md). */
struct tt_bs_challenge {
    uint64_t status;
    uint8_t nonce[TT_BS_NONCE_BYTES];
};

/* Rank -> root. mac = MAC(challenge nonce || this struct up to mac). A hello whose `failed`
 * is not 0 is a withdrawal: the rank's init failed with that ncclResult_t before it could join
 * (listen_addr is then unset), and the root tells every other rank so at once. */
struct tt_bs_root_hello {
    uint64_t magic;
    uint32_t version;
    int32_t rank;
    int32_t nranks;
    uint32_t failed;
    struct tt_bs_wire_addr listen_addr;
    uint8_t nonce[TT_BS_NONCE_BYTES];
    uint8_t mac[TT_BS_MAC_BYTES];
};

/* Root -> rank. status is ncclSuccess, or an error with its explanation in text (NUL
 * terminated). mac = MAC(the hello's nonce || this struct up to mac). */
struct tt_bs_root_reply {
    uint64_t magic;
    int32_t status;
    uint32_t pad;
    uint8_t session[TT_BS_NONCE_BYTES];
    struct tt_bs_wire_addr next_addr;
    char text[TT_BS_REPLY_TEXT_BYTES];
    uint8_t mac[TT_BS_MAC_BYTES];
};

enum tt_bs_conn_kind { TT_BS_CONN_RING = 1, TT_BS_CONN_P2P = 2 };

/* Rank -> rank. The accepting rank answers the connecting rank's tag with a challenge (struct
 * tt_bs_challenge, fresh nonce); the connecting rank answers with this hello,
 * mac = MAC(session || challenge nonce || this struct up to mac) (tt_bs_peer_hello_mac): bound
 * to the job, to both ranks and to this one connection, so a recorded hello is worthless. */
struct tt_bs_peer_hello {
    uint64_t magic;
    uint32_t kind;
    int32_t from_rank;
    int32_t to_rank;
    uint32_t pad;
    uint8_t mac[TT_BS_MAC_BYTES];
};

/* Header of each allgather step on the ring. */
struct tt_bs_ring_header {
    uint64_t magic;
    uint64_t seq;
    uint64_t bytes;
};

/* Header of each point-to-point message. */
struct tt_bs_p2p_header {
    uint64_t magic;
    int32_t from_rank;
    int32_t tag;
    uint64_t bytes;
};

_Static_assert(sizeof(struct tt_unique_id) <= sizeof(ncclUniqueId),
               "struct tt_unique_id must fit in ncclUniqueId");
_Static_assert(sizeof(struct tt_bs_tag) == 8, "tag layout");
_Static_assert(sizeof(struct tt_bs_challenge) == 24, "challenge layout");
_Static_assert(sizeof(struct tt_bs_root_hello) == 80, "root hello layout");
_Static_assert(sizeof(struct tt_bs_root_reply) == 472, "root reply layout");
_Static_assert(sizeof(struct tt_bs_peer_hello) == 40, "peer hello layout");

/* Fills buf with cryptographically random bytes (libsodium's randombytes_buf). */
ncclResult_t tt_bs_random(void *buf, size_t bytes);
/* Derives the 256-bit secret and the magic from TUTTI_SECRET ("key:" + 64 hex digits is used as
 * is; any other text is stretched by Argon2id salted with host_port). */
ncclResult_t tt_bs_derive(const char *passphrase, const char *host_port, uint8_t secret[32],
                          uint64_t *magic);
/* The 128-bit MAC of prefix || msg under the 256-bit secret (any lengths). */
void tt_bs_mac(const uint8_t secret[32], const void *prefix, size_t prefix_bytes, const void *msg,
               size_t msg_bytes, uint8_t mac[TT_BS_MAC_BYTES]);
/* Compares two MACs in time independent of where they differ. */
bool tt_bs_mac_equal(const uint8_t a[TT_BS_MAC_BYTES], const uint8_t b[TT_BS_MAC_BYTES]);

/* The MAC of a peer hello answering `challenge` in the job whose session value is `session`. */
void tt_bs_peer_hello_mac(const uint8_t secret[32], const uint8_t session[TT_BS_NONCE_BYTES],
                          const uint8_t challenge[TT_BS_NONCE_BYTES],
                          const struct tt_bs_peer_hello *hello, uint8_t mac[TT_BS_MAC_BYTES]);

void tt_bs_addr_to_wire(const struct sockaddr_storage *addr, struct tt_bs_wire_addr *wire);
/* ncclRemoteError (naming `who`) when the wire address has no valid family or port. */
ncclResult_t tt_bs_addr_from_wire(const struct tt_bs_wire_addr *wire, const char *who,
                                  struct sockaddr_storage *addr);
/* The root's address held in an id. */
ncclResult_t tt_bs_id_addr(const struct tt_unique_id *id, struct sockaddr_storage *addr);

/* The listener's side of the gate (gate.c): a connection's tag, read as it arrives. */
struct tt_bs_gate {
    struct tt_bs_tag tag;
    size_t got;
    uint8_t challenge[TT_BS_NONCE_BYTES]; /* sent once the job's tag came */
};
enum tt_bs_gate_step {
    TT_BS_GATE_WAIT, /* the tag is not complete yet */
    TT_BS_GATE_OPEN, /* the job's tag came and the challenge went out: the hello may follow */
    TT_BS_GATE_SHUT, /* another tag (refused), or the connection failed: close it */
};
/* Reads what has arrived of the tag on `fd` (nonblocking) and, once it is complete, answers it:
 * a fresh challenge (kept in g->challenge) for `magic`, a refusal for anything else. */
enum tt_bs_gate_step tt_bs_gate_read(int fd, uint64_t magic, struct tt_bs_gate *g);

/* The connector's side: connects to the listener of `who` at `addr`, sends the tag `magic` and
 * waits for the challenge, whose nonce goes to `challenge`. A connection closed before its
 * answer (a flooded listener evicted it before it read the tag) is opened again until
 * deadline_ns; a refusal of the tag is ncclInvalidUsage (the listener serves another job). A
 * refused connect is retried until deadline_ns too, unless `listening` says the listener was
 * listening before its address was known (then it has ended: ncclRemoteError at once). */
ncclResult_t tt_bs_gate_enter(const struct sockaddr_storage *addr, uint64_t magic,
                              uint64_t deadline_ns, const _Atomic int *abort, const char *who,
                              bool listening, int *fd_out, uint8_t challenge[TT_BS_NONCE_BYTES]);

/* Runs the root for `id` on the listening socket `listen_fd` (which it takes over) in a
 * detached thread that ends once every rank has its reply, or at TUTTI_TIMEOUT_MS, or early on
 * a failure it tells the arrived ranks of (root.c says which). */
ncclResult_t tt_bs_root_spawn(const struct tt_unique_id *id, int listen_fd);
/* True, with the reason in buf, when a root of this process for the id tagged `magic` ended
 * without forming its job for a reason the ranks it never took cannot learn (it ran out of
 * fds): its own process's rank then reports that reason rather than a bare refusal. */
bool tt_bs_root_failure(uint64_t magic, char *buf, size_t bytes);
/* A rank of this process (rank of nranks) whose init failed with `code` before it joined
 * withdraws from the root of `id` when that runs in this process: true when it does (the
 * root then tells the other ranks, as for a withdrawal over the wire). */
bool tt_bs_root_withdraw(const ncclUniqueId *id, int rank, int nranks, ncclResult_t code);

/* A rank's listener thread (listener.c): accepts connections on listen_fd (which stays the
 * caller's), challenges each, and files those whose hello proves the secret under (kind, sending
 * rank). Started as soon as the rank listens; hellos complete before set_session gives the
 * session value are held until then. Stop joins the thread and closes every connection not
 * taken. */
struct tt_bs_listener;
ncclResult_t tt_bs_listener_start(int listen_fd, int rank, int nranks, uint64_t magic,
                                  const uint8_t secret[32], struct tt_bs_listener **out);
void tt_bs_listener_set_session(struct tt_bs_listener *l, const uint8_t session[TT_BS_NONCE_BYTES]);
void tt_bs_listener_stop(struct tt_bs_listener *l);
/* Takes the authenticated connection of `kind` from rank `from` (the ring's is from the
 * predecessor, `from` ignored), waiting for it until wait_until_ns at most; *fd_out is -1 when
 * it has not come. Each connection is handed out once. */
ncclResult_t tt_bs_listener_take(struct tt_bs_listener *l, enum tt_bs_conn_kind kind, int from,
                                 uint64_t wait_until_ns, int *fd_out);

#endif
