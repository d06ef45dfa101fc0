/* TCP transport, shared by its two files: tcp_setup.c (the listener, the handshake and
 * connection setup) and tcp.c (the data path and the transport table).
 *
 * TCP transport: one or more sockets per connection (NCCL_NSOCKS_PERTHREAD x
 * NCCL_SOCKET_NTHREADS, as the receiver says in its info blob), a staging ring of TT_CONN_SLOTS
 * slots on each side, and length-checked frames striped across the sockets: frame k travels on
 * socket k mod nsocks, so several frames are on the wire at once and a loss on one stream does
 * not stall the others. The sender's ring holds committed messages until the socket has
 * taken them; the receiver's ring holds frames read from the socket until they are released.
 * Receive connections of a communicator share one listener (its state in the context); accepted
 * sockets are matched to connections by a random nonce carried in the info blob and echoed in
 * the hello, so a stranger's connection never becomes a data stream (and a complete hello whose
 * nonce no waiting connection of the listener has is closed as soon as it is read, so strangers
 * cannot crowd out the job's sockets that wait to be claimed). Invariants per side:
 * done <= posted <= done + TT_CONN_SLOTS (frames numbered from 0; frame k uses slot
 * k % TT_CONN_SLOTS). Frames finish out of order across sockets: `done` (sender: written) and
 * `posted` (receiver: read) advance over the frames finished in a row.
 *
 * Wire format (all integers little-endian unless said otherwise):
 *   Info blob of the receiver (exchanged over the bootstrap, 48 bytes used):
 *     0 u64 magic TCP_INFO_MAGIC | 8 u64 nonce | 16 u16 family (AF_INET 2, AF_INET6 10)
 *     18 u16 port (network byte order) | 20 u32 IPv6 scope id | 24 u8[16] address (IPv4 in the
 *     first 4 bytes) | 40 u32 nsocks (1..TCP_MAX_SOCKS; 0 from older peers means 1)
 *     44 u32 flags (TCP_INFO_PAIRED: this side has a pair, transport.h)
 *   Info blob of the sender: 0 u64 magic | 40 u32 nsocks of its pair's receive side | 44 u32
 *     flags; zeros from older peers.
 * Shared sockets: when both ranks made both directions of a connection at once (both sides'
 * blobs say TCP_INFO_PAIRED) and ask for as many sockets, the two directions share the lower
 * rank's send sockets: that rank connects them as usual and its receive side holds them too;
 * the higher rank's receive side accepts them and its send side holds them too (the last side
 * to close closes them: a pair costs as many descriptors as two one-way sockets). Each
 * direction's frames then travel beside the other's, which carry their acknowledgements
 * (a one-way socket answers every small frame with a packet of its own: 8 B AllReduce between
 * two namespaces 7.5 us instead of 6.1). The lower rank connects one more socket (hello index
 * nsocks), the control socket, which carries nothing but each receive side's error frame back
 * to the peer's send side, both ways: what socket 0's idle direction carries otherwise, so a
 * sender stalled on a receiver that stopped reading still learns why at once. A receive side
 * whose stream breaks writes its error frame there too and ends that direction (its data
 * sockets stay up: the pair sends on them); a send side that finds the control socket ended
 * while frames wait to go fails (peer_error), where a one-way socket's reset would have told
 * it. A stalled op's senders ask (core/engine.c, tt_algo_peer_errors): ring, Tree and
 * point-to-point; on a one-way socket an end of socket 0 while frames wait to go means the
 * same (the receive side shut down).
 *   Hello, the first 40 bytes the sender writes on each socket:
 *     0 u64 magic TCP_HELLO_MAGIC | 8 u64 nonce | 16 u64 slot_bytes | 24 u32 from rank
 *     28 u32 to rank | 32 u32 tag | 36 u32 socket index (0..nsocks-1; nsocks: the control
 *     socket of a shared pair)
 *   Then, on socket i, frames i, i + nsocks, i + 2 nsocks, ..., frame k being one committed
 *   message:
 *     0 u32 payload bytes (<= slot_bytes) | 4 u32 (k mod 2^32) XOR TCP_FRAME_MAGIC
 *     8 the operation's descriptor (struct tt_op_desc): u64 ticket | u64 count | u32 root |
 *     u8 coll | u8 dtype | u16 op | payload
 * A frame whose length or check word is wrong is a ncclRemoteError and closes the connection;
 * its payload is never handed out. A sender whose communicator fails ends its stream with an
 * error frame: check word (k mod 2^32) XOR TCP_ERROR_MAGIC, the descriptor's count holding the
 * ncclResult_t it failed with (2..7), and its reason (at most TCP_ERROR_BYTES, not
 * terminated) as the payload; the receiver fails with that code and reason. A receive side
 * whose communicator fails writes one such frame (frame number 0) back up socket 0, which
 * otherwise carries nothing that way (every receive side when its communicator fails,
 * notify_back, from the thread that failed it; one whose own stream broke, as it fails): a
 * sender stalled on a receiver that stopped reading learns why. A sender reads only the first
 * such frame. */
#ifndef TT_TRANSPORT_TCP_H
#define TT_TRANSPORT_TCP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transport/transport.h"

#define TCP_INFO_MAGIC 0x6f666e6970637474ull  /* "ttcpinfo" */
#define TCP_HELLO_MAGIC 0x6f6c6c6568706374ull /* "tcphello" */
#define TCP_FRAME_MAGIC 0x54544652u           /* "RFTT" */
#define TCP_ERROR_MAGIC 0x54544552u           /* "RETT": the stream's last frame, an error */
#define TCP_ERROR_BYTES 255
#define TCP_INFO_PAIRED 1u
/* How long a failing sender pushes its error frame at a peer that reads slowly. */
#define TCP_ERROR_FLUSH_NS 50000000ull
#define TCP_HELLO_BYTES 40
#define TCP_FRAME_HEADER_BYTES 32
/* Accepted sockets whose connection has not asked for them yet; one more evicts the oldest
 * (a socket still without its hello first), so a flood costs a bounded number of fds. Room for
 * every data socket (up to TCP_MAX_SOCKS per connection) of dozens of peers arriving at once. */
#define TCP_MAX_PENDING 1024
/* Sockets accepted per turn before the hellos that have arrived are read. */
#define TCP_ACCEPT_BATCH 16
/* A connection whose handshake's round trip (TCP_INFO) is shorter than this is on a local
 * network: TUTTI_SOCKET_CC=auto gives its data sockets reno (transport/tcp_setup.c). */
#define TCP_LAN_RTT_US 1000u
/* Most data sockets of one connection. */
#define TCP_MAX_SOCKS 16

/* An accepted socket and the part of its hello read so far. A socket whose hello is not
 * complete by deadline_ns (TUTTI_HANDSHAKE_MS after its accept) is closed. */
struct tcp_pending {
    int fd;
    uint64_t deadline_ns;
    size_t got;
    uint8_t hello[TCP_HELLO_BYTES];
};

/* Per-communicator state: the listener shared by every receive connection. `nonces` are those
 * of the receive connections set up and not yet connected: a complete hello naming any other
 * is a stranger's and is closed at once, so strangers cannot fill the pending list and push out
 * the job's own sockets, which wait there until their connection asks for them. */
struct tcp_listener {
    int fd;
    struct sockaddr_storage addr;
    struct tcp_pending *pending;
    size_t npending;
    size_t cap;
    uint64_t *nonces;
    size_t nnonces;
    size_t nonces_cap;
};

struct tcp_hello {
    uint64_t magic;
    uint64_t nonce;
    uint64_t slot_bytes;
    uint32_t from;
    uint32_t to;
    uint32_t tag;
    uint32_t index; /* the socket's place among the connection's sockets */
};

/* One data socket of a connection. Sender: `next` is the first frame of this socket not fully
 * written and tx_off how much of it is. Receiver: `next` is the frame being read, with the
 * state of its header and payload (see fill_sock). */
struct tcp_sock {
    int fd;
    uint64_t next;
    size_t tx_off;
    bool eof; /* receiver: the peer closed between two frames */
    bool rx_err; /* receiver: the frame being read is the peer's error frame */
    char rx_err_text[TCP_ERROR_BYTES + 1];
    uint8_t rx_hdr[TCP_FRAME_HEADER_BYTES];
    size_t rx_hdr_got;
    bool rx_have_len;
    uint32_t rx_len;
    struct tt_op_desc rx_desc;
    size_t rx_got;
};

struct tcp_conn {
    int nsocks;
    struct tcp_sock socks[TCP_MAX_SOCKS];
    uint64_t nonce;
    ncclResult_t failed; /* sticky: once the stream is broken every call returns this */
    bool shared;         /* the sockets carry the pair's frames the other way */
    int ctl_fd;          /* shared: the control socket, carrying error frames back only */
    _Atomic int *holders; /* shared: the sides holding the sockets; the last to close closes
                             them (the two sides share the descriptors, not copies of them) */
    enum tt_conn_dir dir;
    bool peer_said;      /* receiver: the stream ended with the peer's error frame */
    _Atomic bool back_said; /* receiver: its one error frame back up the stream was written
                               (by any thread: tcp_notify_back) */
    uint8_t *staging;    /* TT_CONN_SLOTS slots, tt_conn_slot_stride(slot_bytes) apart */
    uint32_t len[TT_CONN_SLOTS];
    bool full[TT_CONN_SLOTS]; /* receiver: the slot holds a whole frame not yet released */
    /* Sender: frames committed (posted) and written in a row from frame 0 (done), and each
     * queued frame's encoded header. Receiver: frames read in a row (posted) and released
     * (done). */
    uint64_t posted;
    uint64_t done;
    uint8_t tx_hdr[TT_CONN_SLOTS][TCP_FRAME_HEADER_BYTES];
    /* Sender: the receiver's error frame read back up socket 0 so far (see peer_error). */
    uint8_t back[TCP_FRAME_HEADER_BYTES + TCP_ERROR_BYTES + 1];
    size_t back_got;
    struct tt_op_desc desc[TT_CONN_SLOTS]; /* receiver: each complete frame's descriptor */
};

/* Connection setup and teardown (tcp_setup.c), the transport table's entries. */
ncclResult_t tt_tcp_setup(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                          struct tt_conn_info *info);
ncclResult_t tt_tcp_connect(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                            const struct tt_conn_info *remote, uint64_t deadline_ns);
bool tt_tcp_send_after_recv(const struct tt_transport_ctx *ctx, const struct tt_conn *conn,
                            const struct tt_conn_info *remote);
void tt_tcp_close(struct tt_conn *conn);
void tt_tcp_ctx_fini(struct tt_transport_ctx *ctx);

#endif
