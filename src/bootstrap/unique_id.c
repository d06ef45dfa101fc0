/* Unique ids: a fresh one with its root listening (ncclGetUniqueId), one derived from
 * NCCL_COMM_ID, and the start of the root for the latter (rank 0's init), which takes the socket
 * tutti-run listened on for it when there is one. The root thread itself: root.c. */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/proto.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/sock.h"

static void id_set_addr(struct tt_unique_id *id, const struct sockaddr_storage *addr)
{
    struct tt_bs_wire_addr wire;
    tt_bs_addr_to_wire(addr, &wire);
    id->family = wire.family;
    id->port = wire.port;
    id->scope_id = wire.scope_id;
    memcpy(id->addr, wire.addr, sizeof id->addr);
}

ncclResult_t tt_bootstrap_get_unique_id(ncclUniqueId *out)
{
    ncclResult_t res = ncclSuccess;
    struct tt_unique_id id;
    struct sockaddr_storage addr, bound;
    char ifname[TT_SOCK_IFNAME_BYTES] = "";
    char text[TT_SOCK_ADDR_STR_BYTES];
    int fd = -1;
    memset(&id, 0, sizeof id);
    id.version = TT_UNIQUE_ID_VERSION;
    TT_TRY(tt_bs_random(&id.magic, sizeof id.magic));
    TT_TRY(tt_bs_random(id.secret, sizeof id.secret));
    id.flags = TT_UNIQUE_ID_LISTENING;
    TT_TRY(tt_sock_pick_addr(&addr, ifname, sizeof ifname));
    tt_sock_raise_nofile(); /* the root holds a connection per rank */
    TT_TRY(tt_sock_listen(&addr, &fd, &bound));
    id_set_addr(&id, &bound);
    TT_INFO(TT_SUB_BOOTSTRAP, "bootstrap root listening on %s (interface %s)",
            tt_sock_addr_str(&bound, text, sizeof text), ifname);
    TT_TRY_GOTO(tt_bs_root_spawn(&id, fd), res, fail);
    memset(out, 0, sizeof *out);
    memcpy(out, &id, sizeof id);
    return ncclSuccess;
fail:
    return res;
}

ncclResult_t tt_bootstrap_id_from_string(const char *host_port, ncclUniqueId *out)
{
    /* The same string and TUTTI_SECRET give the same id on every rank (tt_bs_derive). Without
     * TUTTI_SECRET anyone who knows host:port can compute the secret, as in NCCL. */
    struct tt_unique_id id;
    struct sockaddr_storage addr;
    const char *secret = tt_param_secret();
    memset(&id, 0, sizeof id);
    TT_TRY(tt_sock_parse_host_port(host_port, &addr));
    id.version = TT_UNIQUE_ID_VERSION;
    id_set_addr(&id, &addr);
    TT_TRY(tt_bs_derive(secret, host_port, id.secret, &id.magic));
    if (secret[0] == '\0')
        TT_WARN("NCCL_COMM_ID=%s without TUTTI_SECRET: any local process that knows this "
                "address can join the job (tutti-run sets a random secret)", host_port);
    memset(out, 0, sizeof *out);
    memcpy(out, &id, sizeof id);
    return ncclSuccess;
}

/* The socket tutti-run has listened on since it picked NCCL_COMM_ID's port (TUTTI_ROOT_FD),
 * taken by the first root started on that address; -1 when there is none or it is not one.
 * Between the pick and rank 0's start no other process can take the port. */
static int inherited_listener(const struct sockaddr_storage *addr, struct sockaddr_storage *bound)
{
    static _Atomic bool looked;
    int fd = tt_param_root_fd();
    /* Taken once: after that (or once it is found not to be a listening socket, which a
     * process that closed it may have reused) the number may be any other descriptor of this
     * process. A root at another address leaves it for a later one at its own. */
    if (fd < 0 || atomic_load(&looked)) return -1;
    socklen_t len = sizeof *bound;
    int listening = 0;
    socklen_t opt_len = sizeof listening;
    memset(bound, 0, sizeof *bound);
    if (getsockname(fd, (struct sockaddr *)bound, &len) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &opt_len) != 0 || !listening) {
        atomic_store(&looked, true);
        return -1;
    }
    if (!tt_sock_addr_equal(bound, addr) || atomic_exchange(&looked, true)) return -1;
    /* Not for the processes this one starts; the root polls it. */
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

ncclResult_t tt_bootstrap_root_start(const ncclUniqueId *id_bytes)
{
    struct tt_unique_id id;
    struct sockaddr_storage addr, bound;
    char text[TT_SOCK_ADDR_STR_BYTES];
    memcpy(&id, id_bytes, sizeof id);
    TT_TRY(tt_bs_id_addr(&id, &addr));
    int fd = inherited_listener(&addr, &bound);
    bool inherited = fd >= 0;
    if (!inherited) TT_TRY(tt_sock_listen(&addr, &fd, &bound));
    TT_INFO(TT_SUB_BOOTSTRAP, "bootstrap root listening on %s (NCCL_COMM_ID%s)",
            tt_sock_addr_str(&bound, text, sizeof text),
            inherited ? ", inherited socket TUTTI_ROOT_FD" : "");
    return tt_bs_root_spawn(&id, fd);
}
