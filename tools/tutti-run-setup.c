/* tutti-run's command line and addresses: the options, the one-host secret, and NCCL_COMM_ID,
 * MASTER_ADDR and MASTER_PORT (tools/tutti-run.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tutti-run.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tutti-run -n N [options] [--] prog [args...]\n"
            "Starts N ranks of prog on this host with RANK, WORLD_SIZE, LOCAL_RANK,\n"
            "LOCAL_WORLD_SIZE, NODE_RANK and NCCL_COMM_ID set, and MASTER_ADDR and\n"
            "MASTER_PORT for torch.distributed (with --rdzv: NCCL_COMM_ID's port - 1).\n"
            "\n"
            "  -n, --nproc N        ranks on this host (required)\n"
            "      --nnodes M       hosts in the job (default 1); run one tutti-run per host\n"
            "      --node-rank K    this host's index, 0..M-1; it runs ranks K*N..K*N+N-1\n"
            "      --rdzv HOST:PORT bootstrap address, reachable from every host, where global\n"
            "                       rank 0 listens (required with --nnodes > 1; default: a\n"
            "                       free port on 127.0.0.1)\n"
            "                       One host: a fresh random TUTTI_SECRET unless set, and\n"
            "                       NCCL_SOCKET_IFNAME==lo unless set. Several hosts: set\n"
            "                       the same TUTTI_SECRET on each\n"
            "      --tag-output     prefix each output line with \"[rank] \" (default when N > 1)\n"
            "      --no-tag         pass output through untouched\n"
            "      --timeout SEC    stop every rank after SEC seconds and exit 124\n"
            "      --bind           pin each rank to its own cores: ranks in contiguous blocks\n"
            "                       per package (socket), disjoint cores within one (hwloc's\n"
            "                       topology; tutti-info --placement N shows the layout)\n"
            "  -x VAR=VALUE         set VAR in every rank's environment (repeatable)\n"
            "  -h, --help           this text\n"
            "\n"
            "SIGINT, SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 are forwarded to every rank. When a\n"
            "rank exits non-zero or by a signal, the others get SIGTERM, then SIGKILL 2 s later,\n"
            "and tutti-run exits with that rank's status (128+signal for a signal). Ranks read\n"
            "stdin from /dev/null. Exit status: 0 when every rank exits 0, 2 for a usage error,\n"
            "124 on --timeout, 127 when prog cannot be executed.\n");
}

/* Strict decimal integer in [lo, hi]: an optional '-' and digits, nothing else (strtol alone
 * takes leading blanks and '+'). */
static int parse_int(const char *opt, const char *text, long lo, long hi, int *out)
{
    char *end = NULL;
    errno = 0;
    const char *digits = text[0] == '-' ? text + 1 : text;
    long v = *digits >= '0' && *digits <= '9' ? strtol(text, &end, 10) : 0;
    if (errno != 0 || end == NULL || end == text || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "tutti-run: %s wants an integer in [%ld, %ld], got '%s'\n", opt, lo, hi,
                text);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* HOST:PORT, HOST a name, an IPv4 address or a bracketed IPv6 address. */
static int check_host_port(const char *opt, const char *text)
{
    const char *colon = strrchr(text, ':');
    int port = 0;
    bool ok = colon != NULL && colon != text;
    if (ok && text[0] == '[') ok = colon[-1] == ']' && colon - text > 2;
    else if (ok) ok = memchr(text, ':', (size_t)(colon - text)) == NULL;
    if (!ok) {
        fprintf(stderr, "tutti-run: %s wants HOST:PORT (IPv6 as [ADDR]:PORT), got '%s'\n", opt,
                text);
        return -1;
    }
    return parse_int(opt, colon + 1, 1, 65535, &port);
}

enum { OPT_NNODES = 256, OPT_NODE_RANK, OPT_RDZV, OPT_TAG, OPT_NO_TAG, OPT_TIMEOUT, OPT_BIND };

/* 0: run the program; 1: help was printed, exit 0; -1: usage error, said why. */
int parse_options(int argc, char **argv, struct options *opt)
{
    static const struct option longopts[] = {
        {"nproc", required_argument, NULL, 'n'},
        {"nnodes", required_argument, NULL, OPT_NNODES},
        {"node-rank", required_argument, NULL, OPT_NODE_RANK},
        {"rdzv", required_argument, NULL, OPT_RDZV},
        {"tag-output", no_argument, NULL, OPT_TAG},
        {"no-tag", no_argument, NULL, OPT_NO_TAG},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"bind", no_argument, NULL, OPT_BIND},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *opt = (struct options){.nproc = 0, .nnodes = 1, .node_rank = 0, .tag = -1};
    opt->env_sets = calloc((size_t)argc, sizeof(char *));
    if (opt->env_sets == NULL) {
        fprintf(stderr, "tutti-run: out of memory\n");
        return -1;
    }
    /* "+": stop at the program's name, so its own options are left alone. */
    int c;
    while ((c = getopt_long(argc, argv, "+hn:x:", longopts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'h':
            usage(stdout);
            return 1;
        case 'n':
            if (parse_int("-n", optarg, 1, MAX_NPROC, &opt->nproc) != 0) return -1;
            break;
        case OPT_NNODES:
            if (parse_int("--nnodes", optarg, 1, INT_MAX, &opt->nnodes) != 0) return -1;
            break;
        case OPT_NODE_RANK:
            if (parse_int("--node-rank", optarg, 0, INT_MAX, &opt->node_rank) != 0) return -1;
            break;
        case OPT_RDZV:
            if (check_host_port("--rdzv", optarg) != 0) return -1;
            opt->rdzv = optarg;
            break;
        case OPT_TAG:
            opt->tag = 1;
            break;
        case OPT_NO_TAG:
            opt->tag = 0;
            break;
        case OPT_BIND:
            opt->bind = true;
            break;
        case OPT_TIMEOUT:
            errno = 0;
            opt->timeout_s = strtod(optarg, &end);
            if (errno != 0 || end == optarg || *end != '\0' || !(opt->timeout_s > 0) ||
                !isfinite(opt->timeout_s) || opt->timeout_s > 1e9) {
                fprintf(stderr, "tutti-run: --timeout wants a positive number of seconds, "
                                "got '%s'\n", optarg);
                return -1;
            }
            break;
        case 'x':
            /* A bare VAR (mpirun's habit) keeps the inherited value: nothing to do. */
            if (optarg[0] == '=') {
                fprintf(stderr, "tutti-run: -x wants VAR=VALUE, got '%s'\n", optarg);
                return -1;
            }
            if (strchr(optarg, '=') != NULL) opt->env_sets[opt->env_count++] = optarg;
            break;
        default:
            return -1; /* getopt has printed why */
        }
    }
    if (opt->nproc == 0) {
        fprintf(stderr, "tutti-run: -n N is required\n");
        return -1;
    }
    if (optind >= argc) {
        fprintf(stderr, "tutti-run: no program to run\n");
        return -1;
    }
    if (opt->node_rank >= opt->nnodes) {
        fprintf(stderr, "tutti-run: --node-rank %d is not below --nnodes %d\n", opt->node_rank,
                opt->nnodes);
        return -1;
    }
    if (opt->nnodes > 1 && opt->rdzv == NULL) {
        fprintf(stderr, "tutti-run: --nnodes %d needs --rdzv HOST:PORT, an address of node 0 "
                        "that every host can reach\n", opt->nnodes);
        return -1;
    }
    if ((long long)opt->nnodes * opt->nproc > INT_MAX) {
        fprintf(stderr, "tutti-run: --nnodes %d x -n %d ranks is too many\n", opt->nnodes,
                opt->nproc);
        return -1;
    }
    opt->argv = argv + optind;
    return 0;
}

/* A fresh 256-bit job secret as "key:" + 64 hex digits: the marker tells the library it is a
 * full-entropy key, used as is rather than stretched like a passphrase (docs/security.md). A
 * job across hosts needs one secret on every host, so there the user sets TUTTI_SECRET. */
int make_secret(char out[4 + 64 + 1])
{
    uint8_t key[32];
    size_t done = 0;
    while (done < sizeof key) {
        ssize_t n = getrandom(key + done, sizeof key - done, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            fprintf(stderr, "tutti-run: getrandom failed: %s\n", strerror(errno));
            return -1;
        }
        done += (size_t)n;
    }
    memcpy(out, "key:", 4);
    for (size_t i = 0; i < sizeof key; i++) snprintf(out + 4 + 2 * i, 3, "%02x", key[i]);
    return 0;
}

/* Binds a TCP socket to 127.0.0.1:port (0: any free port); returns it, or -1. */
static int bind_local(unsigned port, unsigned *bound)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    *bound = ntohs(a.sin_port);
    return fd;
}

/* Two free TCP ports on 127.0.0.1, both bound to port 0 at once so that they differ: one for
 * Tutti's root (NCCL_COMM_ID), one for torch's store (MASTER_PORT). Ports the kernel picks for
 * bind() have the parity that it avoids for connect()'s ephemeral ports; a neighbour P+1 would
 * have connect()'s parity and be taken by some outgoing connection far more often (seen on a
 * busy machine). The root's port stays bound: its socket listens from here on and is handed to
 * rank 0 (TUTTI_ROOT_FD), so no other process can take the port before rank 0 starts the root;
 * ranks that connect first wait in its backlog. The store's port is closed for torch's store to
 * bind it later; another process could take it in between (init then fails with a clear
 * error rather than joining a wrong job). */
static int pick_local_ports(unsigned *root_port, unsigned *store_port, int *root_fd)
{
    int fd = bind_local(0, root_port);
    int fd2 = fd >= 0 ? bind_local(0, store_port) : -1;
    int err = errno;
    if (fd2 >= 0 && listen(fd, SOMAXCONN) != 0) {
        err = errno;
        close(fd2);
        fd2 = -1;
    }
    /* As the library's own listeners (util/sock.c): the connections the root accepted on it
     * inherit the flag, and their TIME_WAIT then does not stop a later root (a second
     * communicator from the same NCCL_COMM_ID) from binding the port again. Set after listen,
     * so nobody shares the port meanwhile. */
    int one = 1;
    if (fd2 >= 0) (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    /* Started with stdin or stdout closed, the socket could be descriptor 0..2, which the
     * ranks' set-up replaces (stdin from /dev/null) or writes to (output). */
    if (fd2 >= 0 && fd <= STDERR_FILENO) {
        int moved = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
        err = errno;
        close(fd);
        fd = moved;
        if (fd < 0) {
            close(fd2);
            fd2 = -1;
        }
    }
    if (fd2 >= 0) close(fd2);
    if (fd2 < 0) {
        if (fd >= 0) close(fd);
        fprintf(stderr, "tutti-run: cannot pick two free ports on 127.0.0.1: %s; use --rdzv\n",
                strerror(err));
        return -1;
    }
    *root_fd = fd;
    return 0;
}

/* Across hosts, a rendezvous host that resolves to a loopback address here (Debian's
 * /etc/hosts maps the machine's own name to 127.0.1.1) is where node 0's rank 0 listens, and no
 * other host reaches it: init would wait for its deadline. Said at once; not refused, since
 * several "nodes" on one machine may share loopback on purpose. */
static void warn_loopback_rdzv(const struct launcher *l)
{
    if (l->opt.nnodes < 2) return;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(l->master_addr, NULL, &hints, &res) != 0 || res == NULL) return;
    bool loopback = false;
    if (res->ai_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(void *)res->ai_addr;
        loopback = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else if (res->ai_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(void *)res->ai_addr;
        loopback = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    }
    char text[INET6_ADDRSTRLEN] = "";
    if (loopback)
        getnameinfo(res->ai_addr, res->ai_addrlen, text, sizeof text, NULL, 0, NI_NUMERICHOST);
    freeaddrinfo(res);
    if (loopback)
        fprintf(stderr, "tutti-run: warning: --rdzv host '%s' is %s here, a loopback address: "
                        "ranks on other hosts cannot reach it (fine only if every node runs on "
                        "this machine); give an address of a network interface instead\n",
                l->master_addr, text);
}

/* The job's addresses: NCCL_COMM_ID (where rank 0's bootstrap root listens) and, for a c10d
 * store, MASTER_ADDR and MASTER_PORT. With --rdzv HOST:PORT every host derives the same values
 * from it: MASTER_PORT = PORT - 1, so that MASTER_ADDR:MASTER_PORT+1 is NCCL_COMM_ID, as under
 * torchrun. Without, two free ports on 127.0.0.1. Tutti reads NCCL_COMM_ID first either way. */
int make_addresses(struct launcher *l)
{
    const char *rdzv = l->opt.rdzv;
    unsigned port = 0, store_port = 0;
    if (rdzv == NULL) {
        if (pick_local_ports(&port, &store_port, &l->root_fd) != 0) return -1;
        snprintf(l->comm_id, sizeof l->comm_id, "127.0.0.1:%u", port);
        snprintf(l->master_addr, sizeof l->master_addr, "127.0.0.1");
        snprintf(l->master_port, sizeof l->master_port, "%u", store_port);
        return 0;
    }
    snprintf(l->comm_id, sizeof l->comm_id, "%s", rdzv);
    const char *colon = strrchr(rdzv, ':'); /* check_host_port accepted it */
    port = (unsigned)strtoul(colon + 1, NULL, 10);
    if (port < 2) {
        fprintf(stderr, "tutti-run: --rdzv port %u leaves no MASTER_PORT (port - 1); use a "
                        "port above 1\n", port);
        return -1;
    }
    const char *host = rdzv;
    size_t len = (size_t)(colon - rdzv);
    if (host[0] == '[') { /* [IPv6]:PORT: MASTER_ADDR is the bare address */
        host++;
        len -= 2;
    }
    snprintf(l->master_addr, sizeof l->master_addr, "%.*s", (int)len, host);
    snprintf(l->master_port, sizeof l->master_port, "%u", port - 1);
    warn_loopback_rdzv(l);
    return 0;
}
