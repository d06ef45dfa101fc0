/* Socket helpers: interface choice, addresses, listen/connect/accept with deadlines and
 * whole-buffer I/O over nonblocking sockets. Every wait is a poll() of at most
 * TT_SOCK_POLL_SLICE_MS, so the deadline and the abort flag are re-checked at least that often.
 * Errors are reported here, once, with the peer's address and strerror; callers propagate. */
#include "util/sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/time.h"

#define IF_SPEC_MAX 32
/* Pause between connection attempts while the peer refuses, doubling up to the cap. */
#define CONNECT_RETRY_FIRST_MS 5
#define CONNECT_RETRY_MAX_MS 100

static bool aborted(const _Atomic int *abort)
{
    return abort != NULL && atomic_load_explicit(abort, memory_order_acquire) != 0;
}

/* Waits up to one slice for `events` on fd; returns poll()'s revents (0 on timeout or EINTR). */
static short poll_slice(int fd, short events, uint64_t deadline_ns)
{
    struct pollfd pfd = {.fd = fd, .events = events, .revents = 0};
    int ms = tt_deadline_left_ms(deadline_ns, TT_SOCK_POLL_SLICE_MS);
    if (poll(&pfd, 1, ms) <= 0) return 0;
    return pfd.revents;
}

static void set_nodelay(int fd)
{
    int one = 1;
    /* Failure only costs latency (e.g. a non-TCP socket), so it is not an error. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void tt_sock_close(int *fd)
{
    if (fd != NULL && *fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* ---- the descriptor limit ------------------------------------------------------------------ */

static void raise_nofile(void)
{
    struct rlimit rl;
    if (tt_param_raise_nofile() == 0 || getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    rlim_t want = rl.rlim_max;
    if (want == RLIM_INFINITY) { /* the kernel caps the limit at fs.nr_open */
        FILE *f = fopen("/proc/sys/fs/nr_open", "r");
        unsigned long long nr_open = 0;
        if (f == NULL) return;
        if (fscanf(f, "%llu", &nr_open) != 1) nr_open = 0;
        fclose(f);
        want = (rlim_t)nr_open;
    }
    if (rl.rlim_cur == RLIM_INFINITY || want <= rl.rlim_cur) return; /* never lowered */
    struct rlimit raised = {.rlim_cur = want, .rlim_max = rl.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &raised) != 0) {
        TT_INFO(TT_SUB_INIT, "cannot raise the limit on open files from %llu to %llu: %s",
                (unsigned long long)rl.rlim_cur, (unsigned long long)want, strerror(errno));
        return;
    }
    TT_INFO(TT_SUB_INIT, "raised the limit on open files from %llu to %llu, the hard limit "
            "(TUTTI_RAISE_NOFILE=0 leaves it)", (unsigned long long)rl.rlim_cur,
            (unsigned long long)want);
}

void tt_sock_raise_nofile(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, raise_nofile);
}

/* ---- addresses ---------------------------------------------------------------------------- */

socklen_t tt_sock_addr_len(const struct sockaddr_storage *addr)
{
    if (addr->ss_family == AF_INET) return sizeof(struct sockaddr_in);
    if (addr->ss_family == AF_INET6) return sizeof(struct sockaddr_in6);
    return 0;
}

uint16_t tt_sock_addr_port(const struct sockaddr_storage *addr)
{
    if (addr->ss_family == AF_INET) return ntohs(((const struct sockaddr_in *)addr)->sin_port);
    if (addr->ss_family == AF_INET6) return ntohs(((const struct sockaddr_in6 *)addr)->sin6_port);
    return 0;
}

void tt_sock_addr_set_port(struct sockaddr_storage *addr, uint16_t port)
{
    if (addr->ss_family == AF_INET) ((struct sockaddr_in *)addr)->sin_port = htons(port);
    if (addr->ss_family == AF_INET6) ((struct sockaddr_in6 *)addr)->sin6_port = htons(port);
}

bool tt_sock_addr_equal(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family) return false;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *x = (const struct sockaddr_in *)a;
        const struct sockaddr_in *y = (const struct sockaddr_in *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)a;
        const struct sockaddr_in6 *y = (const struct sockaddr_in6 *)b;
        return x->sin6_port == y->sin6_port && x->sin6_scope_id == y->sin6_scope_id &&
               memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
    }
    return false;
}

const char *tt_sock_addr_str(const struct sockaddr_storage *addr, char *buf, size_t buf_bytes)
{
    char host[INET6_ADDRSTRLEN] = "";
    if (addr->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)addr;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        snprintf(buf, buf_bytes, "%s:%u", host, (unsigned)ntohs(a->sin_port));
    } else if (addr->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)addr;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        char scope[IF_NAMESIZE + 1] = "";
        char ifname[IF_NAMESIZE] = "";
        if (a->sin6_scope_id != 0) {
            if (if_indextoname(a->sin6_scope_id, ifname) != NULL)
                snprintf(scope, sizeof scope, "%%%s", ifname);
            else
                snprintf(scope, sizeof scope, "%%%u", (unsigned)a->sin6_scope_id);
        }
        snprintf(buf, buf_bytes, "[%s%s]:%u", host, scope, (unsigned)ntohs(a->sin6_port));
    } else if (addr->ss_family == AF_UNIX) {
        snprintf(buf, buf_bytes, "a unix socket");
    } else {
        snprintf(buf, buf_bytes, "<family %d>", (int)addr->ss_family);
    }
    return buf;
}

const char *tt_sock_peer_str(int fd, char *buf, size_t buf_bytes)
{
    struct sockaddr_storage peer;
    socklen_t len = sizeof peer;
    memset(&peer, 0, sizeof peer);
    if (getpeername(fd, (struct sockaddr *)&peer, &len) != 0) {
        snprintf(buf, buf_bytes, "unknown peer");
        return buf;
    }
    return tt_sock_addr_str(&peer, buf, buf_bytes);
}

/* NCCL_SOCKET_FAMILY as AF_INET, AF_INET6 or AF_UNSPEC (unset or not understood). */
static int wanted_family(void)
{
    const char *s = tt_param_socket_family();
    if (s == NULL || *s == '\0') return AF_UNSPEC;
    if (strcasecmp(s, "AF_INET") == 0 || strcasecmp(s, "inet") == 0) return AF_INET;
    if (strcasecmp(s, "AF_INET6") == 0 || strcasecmp(s, "inet6") == 0) return AF_INET6;
    TT_WARN("NCCL_SOCKET_FAMILY=%s is not AF_INET or AF_INET6; using either", s);
    return AF_UNSPEC;
}

ncclResult_t tt_sock_parse_host_port(const char *text, struct sockaddr_storage *out)
{
    char host[256];
    const char *port_text = NULL;
    size_t len = strlen(text);
    if (len == 0 || len >= sizeof host)
        return TT_ERROR(ncclInvalidArgument, "'%s' is not host:port (empty or too long)", text);
    if (text[0] == '[') {
        const char *close_bracket = strchr(text, ']');
        if (close_bracket == NULL || close_bracket[1] != ':')
            return TT_ERROR(ncclInvalidArgument, "'%s' is not [ipv6]:port", text);
        memcpy(host, text + 1, (size_t)(close_bracket - text - 1));
        host[close_bracket - text - 1] = '\0';
        port_text = close_bracket + 2;
    } else {
        const char *colon = strrchr(text, ':');
        if (colon == NULL || memchr(text, ':', (size_t)(colon - text)) != NULL)
            return TT_ERROR(ncclInvalidArgument,
                            "'%s' is not host:port (write an IPv6 address as [addr]:port)", text);
        memcpy(host, text, (size_t)(colon - text));
        host[colon - text] = '\0';
        port_text = colon + 1;
    }
    char *end = NULL;
    errno = 0;
    long port = strtol(port_text, &end, 10);
    if (errno != 0 || end == port_text || *end != '\0' || port < 1 || port > 65535)
        return TT_ERROR(ncclInvalidArgument, "'%s': the port must be a number in 1..65535", text);
    if (host[0] == '\0')
        return TT_ERROR(ncclInvalidArgument, "'%s' has no host before the port", text);

    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = wanted_family();
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || res == NULL)
        return TT_ERROR(ncclInvalidArgument, "cannot resolve host '%s' of '%s': %s", host, text,
                        rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    memset(out, 0, sizeof *out);
    memcpy(out, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    tt_sock_addr_set_port(out, (uint16_t)port);
    return ncclSuccess;
}

/* ---- interface choice --------------------------------------------------------------------- */

/* NCCL_SOCKET_IFNAME parsed: a list of prefixes (or exact names), to keep or to exclude. */
struct if_spec {
    bool exclude;
    bool exact;
    int count;
    char names[IF_SPEC_MAX][TT_SOCK_IFNAME_BYTES];
};

static void parse_if_spec(const char *text, struct if_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    if (text == NULL) return;
    if (*text == '^') {
        spec->exclude = true;
        text++;
    }
    if (*text == '=') {
        spec->exact = true;
        text++;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL && spec->count < IF_SPEC_MAX;
         tok = strtok_r(NULL, ",", &save)) {
        snprintf(spec->names[spec->count++], TT_SOCK_IFNAME_BYTES, "%s", tok);
    }
}

static bool spec_lists(const struct if_spec *spec, const char *ifname)
{
    for (int i = 0; i < spec->count; i++) {
        if (spec->exact ? strcmp(ifname, spec->names[i]) == 0
                        : strncmp(ifname, spec->names[i], strlen(spec->names[i])) == 0)
            return true;
    }
    return false;
}

/* Rank of an interface by name, lower is better; -1 excludes it. With a list of names to keep
 * only those count; otherwise ordinary interfaces come before docker and virbr bridges, and
 * loopback comes last. */
static int name_rank(const struct if_spec *spec, const char *ifname)
{
    if (spec->count > 0 && !spec->exclude) return spec_lists(spec, ifname) ? 0 : -1;
    if (spec->count > 0 && spec_lists(spec, ifname)) return -1;
    if (strncmp(ifname, "lo", 2) == 0) return 2;
    if (strncmp(ifname, "docker", 6) == 0 || strncmp(ifname, "virbr", 5) == 0) return 1;
    return 0;
}

ncclResult_t tt_sock_pick_addr(struct sockaddr_storage *out, char *ifname_out,
                               size_t ifname_bytes)
{
    const char *ifname_param = tt_param_socket_ifname();
    int family = wanted_family();
    struct if_spec spec;
    parse_if_spec(ifname_param, &spec);

    struct ifaddrs *list = NULL;
    if (getifaddrs(&list) != 0) {
        return TT_ERROR(ncclSystemError, "getifaddrs failed: %s", tt_strerror(errno));
    }

    /* Score each candidate: name rank first, then IPv4 before global IPv6; link-local IPv6
     * (which needs a scope to be reachable) only after every other address. Ties keep the
     * order of getifaddrs. */
    const struct ifaddrs *best = NULL;
    int best_score = 0;
    for (const struct ifaddrs *ifa = list; ifa != NULL; ifa = ifa->ifa_next) {
        if (ifa->ifa_addr == NULL || !(ifa->ifa_flags & IFF_UP)) continue;
        int fam = ifa->ifa_addr->sa_family;
        if (fam != AF_INET && fam != AF_INET6) continue;
        if (family != AF_UNSPEC && fam != family) continue;
        int rank = name_rank(&spec, ifa->ifa_name);
        if (rank < 0) continue;
        int score = rank * 2 + (fam == AF_INET6);
        if (fam == AF_INET6 &&
            IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr))
            score += 100;
        if (best == NULL || score < best_score) {
            best = ifa;
            best_score = score;
        }
    }
    if (best == NULL) {
        freeifaddrs(list);
        return TT_ERROR(ncclSystemError,
                        "no usable network interface (NCCL_SOCKET_IFNAME='%s', "
                        "NCCL_SOCKET_FAMILY='%s'); check these variables against `ip addr`",
                        ifname_param, tt_param_socket_family());
    }
    memset(out, 0, sizeof *out);
    memcpy(out, best->ifa_addr,
           best->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                : sizeof(struct sockaddr_in6));
    tt_sock_addr_set_port(out, 0);
    if (ifname_out != NULL && ifname_bytes > 0)
        snprintf(ifname_out, ifname_bytes, "%s", best->ifa_name);
    freeifaddrs(list);
    return ncclSuccess;
}

/* ---- listen / connect / accept ------------------------------------------------------------ */

/* TUTTI_PORT_RANGE "lo-hi" into [*lo, *hi]; both 0 when unset. */
static ncclResult_t port_range(unsigned *lo, unsigned *hi)
{
    const char *s = tt_param_port_range();
    *lo = *hi = 0;
    if (s == NULL || *s == '\0') return ncclSuccess;
    unsigned a = 0, b = 0;
    char tail = 0;
    if (sscanf(s, "%u-%u%c", &a, &b, &tail) != 2 || a < 1 || b > 65535 || a > b)
        return TT_ERROR(ncclInvalidArgument,
                        "TUTTI_PORT_RANGE=%s is not lo-hi with 1 <= lo <= hi <= 65535", s);
    *lo = a;
    *hi = b;
    return ncclSuccess;
}

int tt_sock_socket(int family)
{
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    return fd;
}

/* Binds and listens on `addr` as given; *err_out receives errno on failure. */
static int try_listen(const struct sockaddr_storage *addr, int *err_out)
{
    int fd = tt_sock_socket(addr->ss_family);
    if (fd < 0) {
        *err_out = errno;
        return -1;
    }
    if (bind(fd, (const struct sockaddr *)addr, tt_sock_addr_len(addr)) != 0 ||
        listen(fd, SOMAXCONN) != 0) {
        *err_out = errno;
        close(fd);
        return -1;
    }
    return fd;
}

/* Whether `port` is in `list` ("8080,9000-9010", net.ipv4.ip_local_reserved_ports' form). */
static bool port_listed(unsigned port, const char *list)
{
    while (list != NULL && *list != '\0') {
        unsigned a = 0, b = 0;
        int used = 0;
        if (sscanf(list, "%u%n", &a, &used) != 1) return false;
        list += used;
        b = a;
        if (*list == '-' && sscanf(list + 1, "%u%n", &b, &used) == 1) list += 1 + used;
        if (port >= a && port <= b) return true;
        while (*list == ',' || *list == ' ' || *list == '\n') list++;
    }
    return false;
}

/* Tries the ports lo..hi of `a` once each, from `start` on, skipping those in `skip` (a list
 * as port_listed reads; NULL: none): the first that listens, or -1 with *err_out set
 * (EADDRINUSE when every port was taken). Errors other than a taken or forbidden port end the
 * walk at once. */
static int walk_ports(struct sockaddr_storage *a, unsigned lo, unsigned hi, unsigned start,
                      const char *skip, int *err_out)
{
    unsigned span = hi - lo + 1;
    int fd = -1;
    *err_out = EADDRINUSE;
    for (unsigned i = 0; i < span && fd < 0; i++) {
        unsigned port = lo + (start + i) % span;
        if (skip != NULL && port_listed(port, skip)) continue;
        tt_sock_addr_set_port(a, (uint16_t)port);
        fd = try_listen(a, err_out);
        if (fd < 0 && *err_out != EADDRINUSE && *err_out != EACCES) break;
    }
    return fd;
}

/* The kernel's ephemeral port range (net.ipv4.ip_local_port_range, which IPv6 shares), and
 * into reserved[] the ports it keeps out of its own choices (ip_local_reserved_ports; "" when
 * none or unreadable). */
static void ephemeral_range(unsigned *lo, unsigned *hi, char *reserved, size_t reserved_bytes)
{
    *lo = 32768;
    *hi = 60999; /* Linux's default */
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
    unsigned a = 0, b = 0;
    if (f != NULL && fscanf(f, "%u %u", &a, &b) == 2 && a >= 1 && a <= b && b <= 65535) {
        *lo = a;
        *hi = b;
    }
    if (f != NULL) fclose(f);
    reserved[0] = '\0';
    f = fopen("/proc/sys/net/ipv4/ip_local_reserved_ports", "re");
    if (f != NULL && fgets(reserved, (int)reserved_bytes, f) == NULL) reserved[0] = '\0';
    if (f != NULL) fclose(f);
}

ncclResult_t tt_sock_listen(const struct sockaddr_storage *addr, int *fd_out,
                            struct sockaddr_storage *bound)
{
    char text[TT_SOCK_ADDR_STR_BYTES];
    *fd_out = -1;
    if (tt_sock_addr_len(addr) == 0)
        return TT_ERROR(ncclInternalError, "listen on an address of unknown family %d",
                        (int)addr->ss_family);
    unsigned lo = 0, hi = 0;
    TT_TRY(port_range(&lo, &hi));
    struct sockaddr_storage a = *addr;
    int fd = -1, err = 0;
    if (tt_sock_addr_port(addr) != 0) {
        fd = try_listen(&a, &err);
    } else if (lo == 0) {
        fd = try_listen(&a, &err);
        if (fd < 0 && err == EADDRINUSE) {
            /* The kernel picks a port only where no socket of this address is bound, not even
             * a closed connection in TIME_WAIT; after many communicators in a minute those can
             * hold every ephemeral port. Every socket of Tutti's has SO_REUSEADDR, so such a
             * port can still be bound by its number: walk the range from a random port. */
            char reserved[1024];
            ephemeral_range(&lo, &hi, reserved, sizeof reserved);
            unsigned start = (unsigned)(tt_time_ns() ^ (uint64_t)getpid()) % (hi - lo + 1);
            fd = walk_ports(&a, lo, hi, start, reserved, &err);
        }
    } else {
        /* Start at a pid-dependent port of the range, so that ranks starting together do not
         * all race for the same first port, and walk the range once. */
        fd = walk_ports(&a, lo, hi, (unsigned)getpid() % (hi - lo + 1), NULL, &err);
        if (fd < 0 && (err == EADDRINUSE || err == EACCES))
            return TT_ERROR(ncclSystemError,
                            "no free port in TUTTI_PORT_RANGE=%s on %s (last error: %s); widen "
                            "the range", tt_param_port_range(),
                            tt_sock_addr_str(addr, text, sizeof text), strerror(err));
    }
    if (fd < 0)
        return TT_ERROR(ncclSystemError, "cannot listen on %s: %s",
                        tt_sock_addr_str(&a, text, sizeof text), tt_strerror(err));
    socklen_t len = sizeof *bound;
    memset(bound, 0, sizeof *bound);
    if (getsockname(fd, (struct sockaddr *)bound, &len) != 0) {
        err = errno;
        close(fd);
        return TT_ERROR(ncclSystemError, "getsockname on a listening socket failed: %s",
                        strerror(err));
    }
    *fd_out = fd;
    return ncclSuccess;
}

/* True for connect errors that mean "not there yet": the peer may still be starting. */
static bool retry_connect_error(int err)
{
    return err == ECONNREFUSED || err == ECONNRESET || err == ECONNABORTED || err == ETIMEDOUT ||
           err == EAGAIN;
}

bool tt_sock_self_connected(int fd)
{
    struct sockaddr_storage local, peer;
    socklen_t l1 = sizeof local, l2 = sizeof peer;
    memset(&local, 0, sizeof local);
    memset(&peer, 0, sizeof peer);
    if (getsockname(fd, (struct sockaddr *)&local, &l1) != 0) return false;
    if (getpeername(fd, (struct sockaddr *)&peer, &l2) != 0) return false;
    return tt_sock_addr_equal(&local, &peer);
}

/* One connection attempt: 0 and *fd_out on success, else the errno that ended it (ETIMEDOUT
 * when the deadline passed, ECANCELED on abort while the handshake was in flight, EIO with
 * *stop set when how->check ended it). */
static int connect_once(const struct sockaddr_storage *addr, uint64_t deadline_ns,
                        const _Atomic int *abort, const struct tt_sock_connect_how *how,
                        ncclResult_t *stop, int *fd_out)
{
    int fd = tt_sock_socket(addr->ss_family);
    if (fd < 0) return errno;
    tt_sock_set_buffers(fd, how->bufsize);
    int err = 0;
    if (connect(fd, (const struct sockaddr *)addr, tt_sock_addr_len(addr)) != 0) {
        err = errno;
        if (err == EINPROGRESS || err == EINTR) {
            err = ETIMEDOUT;
            while (!tt_deadline_passed(deadline_ns)) {
                if (aborted(abort)) {
                    err = ECANCELED;
                    break;
                }
                if (how->check != NULL && (*stop = how->check(how->check_arg)) != ncclSuccess) {
                    err = EIO;
                    break;
                }
                if (poll_slice(fd, POLLOUT, deadline_ns) == 0) continue;
                socklen_t len = sizeof err;
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
                break;
            }
        }
    }
    if (err == 0 && tt_sock_self_connected(fd)) err = ECONNREFUSED;
    if (err != 0) {
        close(fd);
        return err;
    }
    set_nodelay(fd);
    *fd_out = fd;
    return 0;
}

void tt_sock_set_buffers(int fd, int bytes)
{
    if (bytes <= 0) return;
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

ncclResult_t tt_sock_connect(const struct sockaddr_storage *addr, uint64_t deadline_ns,
                             const _Atomic int *abort, int *fd_out)
{
    return tt_sock_connect_how(addr, deadline_ns, abort, NULL, fd_out);
}

ncclResult_t tt_sock_connect_how(const struct sockaddr_storage *addr, uint64_t deadline_ns,
                                 const _Atomic int *abort, const struct tt_sock_connect_how *how,
                                 int *fd_out)
{
    static const struct tt_sock_connect_how plain = {0};
    if (how == NULL) how = &plain;
    char text[TT_SOCK_ADDR_STR_BYTES];
    const char *who = how->who != NULL ? how->who : "";
    const char *at = how->who != NULL ? " at " : "";
    uint64_t start_ns = tt_time_ns();
    unsigned pause_ms = CONNECT_RETRY_FIRST_MS;
    int tries = 0;
    *fd_out = -1;
    for (;;) {
        if (aborted(abort))
            return TT_ERROR(ncclSystemError, "connecting to %s%s%s: aborted", who, at,
                            tt_sock_addr_str(addr, text, sizeof text));
        ncclResult_t stop = ncclSuccess;
        int err = connect_once(addr, deadline_ns, abort, how, &stop, fd_out);
        tries++;
        if (err == 0) return ncclSuccess;
        if (stop != ncclSuccess) return stop;
        if (err == ECANCELED) continue;
        if (err == ECONNREFUSED && how->published)
            return TT_ERROR(ncclRemoteError, "connecting to %s%s%s: refused; nothing listens "
                            "there any more (whoever listened closed its socket, or its process "
                            "ended)",
                            who, at, tt_sock_addr_str(addr, text, sizeof text));
        if (!retry_connect_error(err))
            return TT_ERROR(ncclSystemError, "cannot connect to %s%s%s: %s", who, at,
                            tt_sock_addr_str(addr, text, sizeof text), tt_strerror(err));
        if (tt_deadline_passed(deadline_ns))
            return TT_ERROR(ncclSystemError,
                            "cannot connect to %s%s%s: still '%s' after %llu ms and %d attempts; "
                            "is the peer running? (deadline: TUTTI_TIMEOUT_MS)", who, at,
                            tt_sock_addr_str(addr, text, sizeof text), strerror(err),
                            (unsigned long long)((tt_time_ns() - start_ns) / 1000000ull), tries);
        if (how->check != NULL && (stop = how->check(how->check_arg)) != ncclSuccess)
            return stop;
        /* The peer is not listening yet: wait a little (never past the deadline) and retry. */
        struct timespec ts = {0, 0};
        int ms = tt_deadline_left_ms(deadline_ns, (int)pause_ms);
        ts.tv_nsec = (long)ms * 1000000L;
        nanosleep(&ts, NULL);
        if (pause_ms < CONNECT_RETRY_MAX_MS) pause_ms *= 2;
    }
}

ncclResult_t tt_sock_accept(int listen_fd, uint64_t deadline_ns, const _Atomic int *abort,
                            int *fd_out, struct sockaddr_storage *peer)
{
    struct sockaddr_storage from;
    *fd_out = -1;
    for (;;) {
        socklen_t len = sizeof from;
        memset(&from, 0, sizeof from);
        int fd = accept4(listen_fd, (struct sockaddr *)&from, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            set_nodelay(fd);
            if (peer != NULL) *peer = from;
            *fd_out = fd;
            return ncclSuccess;
        }
        int err = errno;
        /* A connection that was reset while queued is not our error: keep waiting. */
        if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR && err != ECONNABORTED &&
            err != EPROTO)
            return TT_ERROR(ncclSystemError, "accept failed: %s", tt_strerror(err));
        if (aborted(abort)) return TT_ERROR(ncclSystemError, "waiting for a connection: aborted");
        if (tt_deadline_passed(deadline_ns))
            return TT_ERROR(ncclSystemError,
                            "no connection arrived before the deadline (TUTTI_TIMEOUT_MS)");
        poll_slice(listen_fd, POLLIN, deadline_ns);
    }
}

/* ---- data --------------------------------------------------------------------------------- */

ncclResult_t tt_sock_send_some(int fd, const void *buf, size_t bytes, size_t *done)
{
    char text[TT_SOCK_ADDR_STR_BYTES];
    while (*done < bytes) {
        ssize_t n = send(fd, (const char *)buf + *done, bytes - *done, MSG_NOSIGNAL);
        if (n > 0) {
            *done += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ncclSuccess;
        int err = n < 0 ? errno : EPIPE;
        if (err == EPIPE || err == ECONNRESET || err == ENOTCONN || err == ETIMEDOUT)
            return TT_ERROR(ncclRemoteError, "sending to %s: %s (the peer closed the connection "
                            "or died)", tt_sock_peer_str(fd, text, sizeof text), strerror(err));
        return TT_ERROR(ncclSystemError, "sending to %s: %s",
                        tt_sock_peer_str(fd, text, sizeof text), strerror(err));
    }
    return ncclSuccess;
}

ncclResult_t tt_sock_recv_some(int fd, void *buf, size_t bytes, size_t *done)
{
    char text[TT_SOCK_ADDR_STR_BYTES];
    while (*done < bytes) {
        ssize_t n = recv(fd, (char *)buf + *done, bytes - *done, 0);
        if (n > 0) {
            *done += (size_t)n;
            continue;
        }
        if (n == 0)
            return TT_ERROR(ncclRemoteError, "connection closed by %s with %zu of %zu bytes "
                            "still to come", tt_sock_peer_str(fd, text, sizeof text),
                            bytes - *done, bytes);
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return ncclSuccess;
        int err = errno;
        if (err == ECONNRESET || err == ETIMEDOUT || err == ENOTCONN)
            return TT_ERROR(ncclRemoteError, "receiving from %s: %s (the peer died?)",
                            tt_sock_peer_str(fd, text, sizeof text), strerror(err));
        return TT_ERROR(ncclSystemError, "receiving from %s: %s",
                        tt_sock_peer_str(fd, text, sizeof text), strerror(err));
    }
    return ncclSuccess;
}

/* Shared loop of send_all / recv_all: move bytes, else wait one slice, until done. */
static ncclResult_t transfer_all(int fd, void *buf, size_t bytes, uint64_t deadline_ns,
                                 const _Atomic int *abort, bool sending)
{
    char text[TT_SOCK_ADDR_STR_BYTES];
    size_t done = 0;
    for (;;) {
        if (sending)
            TT_TRY(tt_sock_send_some(fd, buf, bytes, &done));
        else
            TT_TRY(tt_sock_recv_some(fd, buf, bytes, &done));
        if (done == bytes) return ncclSuccess;
        if (aborted(abort))
            return TT_ERROR(ncclSystemError, "%s %zu bytes %s %s: aborted after %zu",
                            sending ? "sending" : "receiving", bytes, sending ? "to" : "from",
                            tt_sock_peer_str(fd, text, sizeof text), done);
        if (tt_deadline_passed(deadline_ns))
            return TT_ERROR(ncclSystemError,
                            "timed out %s %zu bytes %s %s (%zu done); the peer is stuck or slow "
                            "(deadline: TUTTI_TIMEOUT_MS)", sending ? "sending" : "receiving",
                            bytes, sending ? "to" : "from",
                            tt_sock_peer_str(fd, text, sizeof text), done);
        poll_slice(fd, sending ? POLLOUT : POLLIN, deadline_ns);
    }
}

ncclResult_t tt_sock_send_all(int fd, const void *buf, size_t bytes, uint64_t deadline_ns,
                              const _Atomic int *abort)
{
    return transfer_all(fd, (void *)(uintptr_t)buf, bytes, deadline_ns, abort, true);
}

ncclResult_t tt_sock_recv_all(int fd, void *buf, size_t bytes, uint64_t deadline_ns,
                              const _Atomic int *abort)
{
    return transfer_all(fd, buf, bytes, deadline_ns, abort, false);
}
