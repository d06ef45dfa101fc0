/* Socket helpers shared by the bootstrap and the TCP transport: interface choice
 * (NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY), address parsing and printing, listen
 * (TUTTI_PORT_RANGE), connect and accept with a deadline, and whole-buffer send/recv that never
 * block past a deadline.
 *
 * Every fd these functions create is nonblocking and close-on-exec, and every socket has
 * SO_REUSEADDR; connected TCP sockets have TCP_NODELAY. Sends use MSG_NOSIGNAL, so a vanished peer is an error (ncclRemoteError naming
 * the peer's address), never SIGPIPE. Blocking helpers wait in poll() slices of at most
 * TT_SOCK_POLL_SLICE_MS, re-checking their deadline and abort flag between slices; a passed
 * deadline or a set abort flag is ncclSystemError. All functions are thread-safe. */
#ifndef TT_UTIL_SOCK_H
#define TT_UTIL_SOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "nccl.h"

/* Longest poll() of a blocking helper before it re-checks deadline and abort flag. */
#define TT_SOCK_POLL_SLICE_MS 50
/* Room for any address printed by tt_sock_addr_str ("[v6%ifname]:port"). */
#define TT_SOCK_ADDR_STR_BYTES 80
/* Room for an interface name (IFNAMSIZ). */
#define TT_SOCK_IFNAME_BYTES 16

/* Picks the address of the interface this process should use. NCCL_SOCKET_IFNAME is a comma
 * list of name prefixes; a leading '^' turns it into a list to exclude and a leading '=' (after
 * any '^') makes the names exact. NCCL_SOCKET_FAMILY (AF_INET or AF_INET6) restricts the family.
 * Without NCCL_SOCKET_IFNAME the order is: any up interface other than docker*, lo* and virbr*,
 * then docker*, then lo*. IPv4 is preferred to IPv6 on one interface; link-local IPv6 is used
 * only when nothing else matches. The port of *out is 0. ifname_out (may be NULL) receives the
 * interface name. ncclSystemError, naming the variables, when nothing matches. */
ncclResult_t tt_sock_pick_addr(struct sockaddr_storage *out, char *ifname_out,
                               size_t ifname_bytes);

/* "a.b.c.d:port" or "[v6]:port" (with "%scope" for link-local); returns buf. Never fails:
 * AF_UNIX prints "a unix socket", an unknown family "<family N>". */
const char *tt_sock_addr_str(const struct sockaddr_storage *addr, char *buf, size_t buf_bytes);
/* The length to pass to bind/connect for this address's family (0 for an unknown family). */
socklen_t tt_sock_addr_len(const struct sockaddr_storage *addr);
/* Port in host byte order (0 for an unknown family). */
uint16_t tt_sock_addr_port(const struct sockaddr_storage *addr);
void tt_sock_addr_set_port(struct sockaddr_storage *addr, uint16_t port);
/* True when family, address and port are equal (IPv6 scope included). */
bool tt_sock_addr_equal(const struct sockaddr_storage *a, const struct sockaddr_storage *b);

/* Parses "host:port" or "[v6addr]:port" (an IPv6 address must be bracketed); host may be a name,
 * resolved with getaddrinfo honouring NCCL_SOCKET_FAMILY. The port must be 1..65535.
 * ncclInvalidArgument quoting the text when it does not parse or resolve. */
ncclResult_t tt_sock_parse_host_port(const char *text, struct sockaddr_storage *out);

/* A nonblocking, close-on-exec TCP socket of `family` with SO_REUSEADDR (-1 and errno on
 * failure). Every socket Tutti listens or connects with is made so: the TIME_WAIT a closed
 * connection leaves on its port then keeps no listener from binding that port by number. */
int tt_sock_socket(int family);

/* Opens a listening TCP socket bound to `addr` (SO_REUSEADDR set). Port 0 means any port: the
 * ports of TUTTI_PORT_RANGE ("lo-hi") when set, else one the kernel chooses, or, when the
 * kernel finds none free (closed connections in TIME_WAIT can hold them all), a port of the
 * ephemeral range bound by number, from a random start, skipping ip_local_reserved_ports.
 * *bound receives the address actually bound
 * (with its port). ncclSystemError with strerror on failure. */
ncclResult_t tt_sock_listen(const struct sockaddr_storage *addr, int *fd_out,
                            struct sockaddr_storage *bound);

/* Connects to `addr`, retrying while the peer refuses (it may not be listening yet) until
 * deadline_ns. *fd_out is a connected, nonblocking, TCP_NODELAY socket. abort may be NULL.
 * ncclSystemError naming the address and TUTTI_TIMEOUT_MS when the deadline passes. */
ncclResult_t tt_sock_connect(const struct sockaddr_storage *addr, uint64_t deadline_ns,
                             const _Atomic int *abort, int *fd_out);
/* What a connect may know beyond its address, deadline and abort flag (zeroed: nothing). */
struct tt_sock_connect_how {
    /* The socket's send and receive buffers, set before it connects (0: the kernel's
     * autotuning): TCP fixes its window scale in the handshake, so a buffer set afterwards
     * cannot open the window past what the default allowed then. */
    int bufsize;
    /* The address was listening when the peer published it: a refusal then means that nothing
     * listens there any more (the peer closed it or its process ended), and the connect fails
     * with ncclRemoteError at once instead of retrying until the deadline. */
    bool published;
    /* Asked between attempts and while one is in flight: an error ends the connect with it. */
    ncclResult_t (*check)(void *arg);
    void *check_arg;
    const char *who; /* names the peer in errors ("peer rank 3"); NULL: the address only */
};
/* tt_sock_connect with `how` (NULL: as tt_sock_connect). */
ncclResult_t tt_sock_connect_how(const struct sockaddr_storage *addr, uint64_t deadline_ns,
                                 const _Atomic int *abort, const struct tt_sock_connect_how *how,
                                 int *fd_out);
/* Whether connected socket `fd` connected to itself (possible on loopback when the target port
 * is an unused ephemeral port: nothing listens there): its local and peer addresses are equal. */
bool tt_sock_self_connected(int fd);
/* SO_SNDBUF and SO_RCVBUF of `fd` to `bytes` (nothing when bytes <= 0). */
void tt_sock_set_buffers(int fd, int bytes);

/* Accepts one connection on `listen_fd` (from tt_sock_listen) by deadline_ns. *fd_out is
 * nonblocking with TCP_NODELAY; *peer (may be NULL) receives the peer's address. */
ncclResult_t tt_sock_accept(int listen_fd, uint64_t deadline_ns, const _Atomic int *abort,
                            int *fd_out, struct sockaddr_storage *peer);

/* Sends / receives exactly `bytes`, handling partial I/O, EINTR and EAGAIN. A peer that closes
 * or resets is ncclRemoteError naming its address; the deadline or the abort flag (may be
 * NULL) ends the wait with ncclSystemError. On error the stream position is unknown: close. */
ncclResult_t tt_sock_send_all(int fd, const void *buf, size_t bytes, uint64_t deadline_ns,
                              const _Atomic int *abort);
ncclResult_t tt_sock_recv_all(int fd, void *buf, size_t bytes, uint64_t deadline_ns,
                              const _Atomic int *abort);

/* Nonblocking partial I/O: moves as much of buf[*done, bytes) as the socket takes now (possibly
 * nothing) and advances *done. ncclRemoteError naming the peer when it closed or reset the
 * connection (a receive of end-of-stream before `bytes` counts as closed). */
ncclResult_t tt_sock_send_some(int fd, const void *buf, size_t bytes, size_t *done);
ncclResult_t tt_sock_recv_some(int fd, void *buf, size_t bytes, size_t *done);

/* Prints the peer address of a connected socket ("unknown peer" when it has none). */
const char *tt_sock_peer_str(int fd, char *buf, size_t buf_bytes);

/* Closes *fd when it is >= 0 and sets it to -1. */
/* Once per process (TUTTI_RAISE_NOFILE): raises the soft limit on open files to the hard one,
 * so that many communicators' sockets fit under a shell's default of 1024 (NCCL does the
 * same). Fds are numbered lowest first, so a program whose select() worked still does. */
void tt_sock_raise_nofile(void);
void tt_sock_close(int *fd);

#endif
