/* Hostile connections to every listening port of a job, during init and during its
 * collectives: the job must not notice (every operation succeeds with exact results) and init
 * must not be delayed much (measured, printed, not asserted).
 *
 * The parent forks 2 ranks of a job on loopback (NCCL_COMM_ID with a random key:... secret,
 * rank 0 runs the root). While the attack is on, a thread of the parent finds every TCP port the
 * ranks listen on (their socket inodes in /proc/PID/fd matched against /proc/net/tcp) as soon as
 * it appears, and keeps `--conns` connections open to each: most idle, some sending an HTTP
 * request, random bytes, huge length fields, or one byte per second (slowloris); connections the
 * job closes are reopened every 2 s. Rank 1 starts only once rank 0's root and listener are
 * flooded, so its init runs against the flood. Each rank runs `--ops` AllReduces (4 B to 64 KiB,
 * int32 sums compared exactly) and reports its init time and its count of correct operations.
 * The test runs the job once without and once with the attack and prints both init times.
 *
 * `fault_hostile [--conns N] [--ops M] [--runs R]`; NCCL_SHM_DISABLE=1 runs the job over TCP
 * (so the TCP transport's listener is attacked too). With R > 1 the pair of jobs runs R times
 * and the minimum, median and maximum of rank 1's init times are printed, with the count of
 * failed runs. TUTTI_TIMEOUT_MS is 30 s unless set, so that a failed init ends a run soon.
 * Exit 1 when any operation fails or is wrong. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "root_port.h"
#include "now_s.h"

#define NRANKS 2
#define MAX_PORTS 32
#define MAX_BYTES (64u << 10)

/* ---- a rank ------------------------------------------------------------------------------- */

static int rank_main(int rank, int ops, int report_fd)
{
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    double t0 = now_s();
    if (ncclGetUniqueId(&id) != ncclSuccess ||
        ncclCommInitRank(&comm, NRANKS, id, rank) != ncclSuccess) {
        fprintf(stderr, "rank %d: init failed: %s\n", rank, ncclGetLastError(NULL));
        return 1;
    }
    double init_ms = (now_s() - t0) * 1e3;
    int32_t *buf = malloc(MAX_BYTES);
    int ok = 0;
    for (int k = 0; k < ops && buf != NULL; k++) {
        size_t count = (size_t)1 << (k % 15); /* 1 to 16384 int32: 4 B to 64 KiB */
        for (size_t i = 0; i < count; i++) buf[i] = (int32_t)((rank + 1) * (int)(i % 1000 + 1));
        ncclResult_t res = ncclAllReduce(buf, buf, count, ncclInt32, ncclSum, comm, NULL);
        if (res != ncclSuccess) {
            fprintf(stderr, "rank %d: AllReduce %d failed: %s\n", rank, k,
                    ncclGetLastError(comm));
            break;
        }
        bool right = true;
        for (size_t i = 0; i < count && right; i++) {
            int32_t want = (int32_t)((int)(i % 1000 + 1) * NRANKS * (NRANKS + 1) / 2);
            if (buf[i] != want) {
                fprintf(stderr, "rank %d: AllReduce %d of %zu: element %zu is %d, want %d\n",
                        rank, k, count, i, (int)buf[i], (int)want);
                right = false;
            }
        }
        ok += right;
    }
    free(buf);
    ncclCommDestroy(comm);
    dprintf(report_fd, "%d %.3f %d\n", rank, init_ms, ok);
    return ok == ops ? 0 : 1;
}

/* ---- the attacker ------------------------------------------------------------------------- */

enum kind { IDLE, HTTP, RANDOM, HUGE_LENGTH, SLOW, NKINDS };

struct port {
    uint16_t port;
    int *fds; /* conns of them, -1 when closed */
};

static struct {
    _Atomic pid_t pids[NRANKS]; /* written by the main thread, read by the attacker */
    int conns;
    atomic_int stop;
    atomic_int nports;
    struct port ports[MAX_PORTS];
    long opened;
} att;

static enum kind kind_of(int i)
{
    /* 70% idle, then 10% HTTP, 10% random bytes, 5% huge lengths, 5% slowloris. */
    int m = i % 20;
    return m < 14 ? IDLE : m < 16 ? HTTP : m < 18 ? RANDOM : m < 19 ? HUGE_LENGTH : SLOW;
}

static int open_conn(uint16_t port, enum kind kind)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    att.opened++;
    /* On loopback the handshake completes at once; a send that finds it unfinished is lost,
     * which only makes that connection an idle one. */
    uint8_t junk[256];
    switch (kind) {
    case HTTP: {
        static const char req[] = "GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: x\r\n\r\n";
        (void)!send(fd, req, sizeof req - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        break;
    }
    case RANDOM:
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)rand();
        (void)!send(fd, junk, sizeof junk, MSG_DONTWAIT | MSG_NOSIGNAL);
        break;
    case HUGE_LENGTH:
        memset(junk, 0xff, sizeof junk);
        (void)!send(fd, junk, sizeof junk, MSG_DONTWAIT | MSG_NOSIGNAL);
        break;
    default:
        break;
    }
    return fd;
}

/* Socket inodes of every fd of `pid` (at most `cap`). */
static int socket_inodes(pid_t pid, unsigned long *inodes, int cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (d == NULL) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < cap) {
        char link[384], target[128];
        snprintf(link, sizeof link, "%s/%s", path, e->d_name);
        ssize_t len = readlink(link, target, sizeof target - 1);
        if (len <= 0) continue;
        target[len] = '\0';
        unsigned long ino;
        if (sscanf(target, "socket:[%lu]", &ino) == 1) inodes[n++] = ino;
    }
    closedir(d);
    return n;
}

/* The same from /proc/net/tcp, where netlink is not allowed. */
static int proc_net_listeners(uint16_t *ports, unsigned long *inodes, int cap)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    if (f == NULL) return 0;
    char line[512];
    int n = 0;
    while (n < cap && fgets(line, sizeof line, f) != NULL) {
        unsigned ip, port, st;
        unsigned long ino;
        if (sscanf(line, " %*d: %x:%x %*x:%*x %x %*x:%*x %*x:%*x %*x %*d %*d %lu", &ip, &port,
                   &st, &ino) == 4 && st == 0x0A) {
            ports[n] = (uint16_t)port;
            inodes[n++] = ino;
        }
    }
    fclose(f);
    return n;
}

/* The IPv4 TCP sockets in state LISTEN on this host (port and inode each), from the kernel's
 * sock_diag netlink interface, which filters by state itself: reading /proc/net/tcp instead
 * costs tens of milliseconds once the attack's own thousands of connections are in it, and a
 * scan every few milliseconds would take a whole core from the job on a small machine, which
 * an attacker on another host does not. Returns how many, or -1 when netlink is unavailable. */
static int listening_sockets(uint16_t *ports, unsigned long *inodes, int cap)
{
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0) return -1;
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 req;
    } msg = {
        .nlh = {.nlmsg_len = sizeof msg, .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
        .req = {.sdiag_family = AF_INET, .sdiag_protocol = IPPROTO_TCP,
                .idiag_states = 1u << TCP_LISTEN},
    };
    if (send(fd, &msg, sizeof msg, 0) != (ssize_t)sizeof msg) {
        close(fd);
        return -1;
    }
    int n = 0;
    static char buf[32768] __attribute__((aligned(NLMSG_ALIGNTO)));
    for (bool done = false; !done;) {
        ssize_t len = recv(fd, buf, sizeof buf, 0);
        if (len <= 0) {
            n = -1;
            break;
        }
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)len);
             h = NLMSG_NEXT(h, len)) {
            if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
                if (h->nlmsg_type == NLMSG_ERROR) n = -1;
                done = true;
                break;
            }
            const struct inet_diag_msg *m = NLMSG_DATA(h);
            if (n < cap) {
                ports[n] = ntohs(m->id.idiag_sport);
                inodes[n++] = m->idiag_inode;
            }
        }
    }
    close(fd);
    return n;
}

/* Whether `ino` is a socket of one of the ranks. */
static bool rank_socket(unsigned long ino)
{
    static unsigned long inodes[65536];
    for (int r = 0; r < NRANKS; r++) {
        pid_t pid = atomic_load(&att.pids[r]);
        if (pid <= 0) continue;
        int n = socket_inodes(pid, inodes, (int)(sizeof inodes / sizeof *inodes));
        for (int i = 0; i < n; i++)
            if (inodes[i] == ino) return true;
    }
    return false;
}

/* Floods port `port` with att.conns connections. */
static void add_port(uint16_t port)
{
    int n = atomic_load(&att.nports);
    for (int i = 0; i < n; i++)
        if (att.ports[i].port == port) return;
    if (n == MAX_PORTS) return;
    struct port *p = &att.ports[n];
    p->port = port;
    p->fds = malloc((size_t)att.conns * sizeof *p->fds);
    for (int i = 0; i < att.conns; i++) p->fds[i] = open_conn(p->port, kind_of(i));
    atomic_store(&att.nports, n + 1);
}

/* Adds every port the ranks listen on that is not known yet. Listening sockets already judged
 * are remembered (by inode), so the ranks' fd tables, which the attack fills, are read only
 * when a new listener appears; the verdicts are forgotten when the ranks change, since a rank
 * may listen before its pid is recorded. */
static void scan_ports(void)
{
    enum { MAX_LISTENERS = 4096 };
    static uint16_t ports[MAX_LISTENERS];
    static unsigned long inodes[MAX_LISTENERS], judged[MAX_LISTENERS];
    static int njudged;
    static pid_t judged_for[NRANKS];
    for (int r = 0; r < NRANKS; r++) {
        pid_t pid = atomic_load(&att.pids[r]);
        if (judged_for[r] != pid) njudged = 0; /* a new rank: its ports are judged afresh */
        judged_for[r] = pid;
    }
    int n = listening_sockets(ports, inodes, MAX_LISTENERS);
    if (n < 0) n = proc_net_listeners(ports, inodes, MAX_LISTENERS);
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int k = 0; k < njudged && !seen; k++) seen = judged[k] == inodes[i];
        if (seen) continue;
        if (rank_socket(inodes[i])) add_port(ports[i]);
        if (njudged < MAX_LISTENERS) judged[njudged++] = inodes[i];
    }
}

/* Reopens the connections of port p that the job closed. */
static void top_up(struct port *p)
{
    for (int i = 0; i < att.conns; i++) {
        if (p->fds[i] >= 0) {
            char c;
            ssize_t n = recv(p->fds[i], &c, 1, MSG_DONTWAIT | MSG_PEEK);
            if (n != 0 && !(n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) continue;
            close(p->fds[i]);
        }
        p->fds[i] = open_conn(p->port, kind_of(i));
    }
}

static void *attacker(void *arg)
{
    (void)arg;
    double last_slow = now_s(), last_top = now_s();
    while (!atomic_load(&att.stop)) {
        scan_ports();
        double t = now_s();
        int n = atomic_load(&att.nports);
        if (t - last_slow >= 1.0) {
            /* Slowloris: one byte per second. */
            for (int k = 0; k < n; k++)
                for (int i = 0; i < att.conns; i++)
                    if (kind_of(i) == SLOW && att.ports[k].fds[i] >= 0)
                        (void)!send(att.ports[k].fds[i], "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
            last_slow = t;
        }
        if (t - last_top >= 2.0) {
            for (int k = 0; k < n; k++) top_up(&att.ports[k]);
            last_top = t;
        }
        usleep(2000);
    }
    return NULL;
}

static void attack_end(void)
{
    int n = atomic_load(&att.nports);
    for (int k = 0; k < n; k++) {
        for (int i = 0; i < att.conns; i++)
            if (att.ports[k].fds[i] >= 0) close(att.ports[k].fds[i]);
        free(att.ports[k].fds);
    }
    atomic_store(&att.nports, 0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- one run of the job ------------------------------------------------------------------- */

static pid_t spawn_rank(const char *self, int rank, int ops, int report_fd)
{
    pid_t pid = fork();
    if (pid == 0) {
        char r[16], o[16], fd[16];
        snprintf(r, sizeof r, "%d", rank);
        snprintf(o, sizeof o, "%d", ops);
        snprintf(fd, sizeof fd, "%d", report_fd);
        execl(self, self, "rank", r, o, fd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Runs the job; returns 0 when every rank did all `ops` right. *init_ms gets rank 1's init
 * time (the rank that initialises against the flood). */
static int run_job(const char *self, bool attack, int ops, double *init_ms)
{
    int fds[2];
    if (pipe(fds) != 0) return 1;
    /* A fresh port for the root, held for rank 0 (root_port.h), and a fresh secret for each
     * run. */
    int root_fd = -1, port = root_port_hold(&root_fd);
    if (port < 0) return 1;
    char comm_id[64], secret[80] = "key:";
    snprintf(comm_id, sizeof comm_id, "127.0.0.1:%d", port);
    for (int i = 0; i < 64; i++) secret[4 + i] = "0123456789abcdef"[rand() % 16];
    secret[68] = '\0';
    setenv("NCCL_COMM_ID", comm_id, 1);
    setenv("TUTTI_SECRET", secret, 1);

    pthread_t thread;
    for (int r = 0; r < NRANKS; r++) atomic_store(&att.pids[r], 0);
    atomic_store(&att.stop, 0);
    atomic_store(&att.pids[0], spawn_rank(self, 0, ops, fds[1]));
    root_port_release(&root_fd); /* rank 0 has it */
    att.opened = 0;
    if (attack) {
        pthread_create(&thread, NULL, attacker, NULL);
        /* Wait until rank 0's root and listener are flooded (or 2 s). */
        double t0 = now_s();
        while (atomic_load(&att.nports) < 2 && now_s() - t0 < 2.0) usleep(1000);
        printf("  rank 0's %d listening ports flooded after %.0f ms\n",
               atomic_load(&att.nports), (now_s() - t0) * 1e3);
    }
    atomic_store(&att.pids[1], spawn_rank(self, 1, ops, fds[1]));
    close(fds[1]);

    int failed = 0;
    for (int r = 0; r < NRANKS; r++) {
        int status = 0;
        pid_t pid = wait(&status);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "FAIL: rank process %d ended with status 0x%x\n", (int)pid, status);
            failed = 1;
        }
    }
    if (attack) {
        atomic_store(&att.stop, 1);
        pthread_join(thread, NULL);
        printf("  %d listening ports attacked, %ld connections opened\n",
               atomic_load(&att.nports), att.opened);
        attack_end();
    }
    FILE *f = fdopen(fds[0], "r");
    int rank, ok, reports = 0;
    double ms;
    while (f != NULL && fscanf(f, "%d %lf %d", &rank, &ms, &ok) == 3) {
        reports++;
        printf("  rank %d: init %.1f ms, %d of %d AllReduces right\n", rank, ms, ok, ops);
        if (ok != ops) failed = 1;
        if (rank == 1) *init_ms = ms;
    }
    if (f != NULL) fclose(f);
    if (reports != NRANKS) {
        fprintf(stderr, "FAIL: %d of %d ranks reported\n", reports, NRANKS);
        failed = 1;
    }
    return failed;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "rank") == 0)
        return rank_main(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
    int conns = 100, ops = 200, runs = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--conns") == 0) conns = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--ops") == 0) ops = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--runs") == 0) runs = atoi(argv[i + 1]);
    }
    if (runs < 1) runs = 1;
    att.conns = conns;
    srand((unsigned)getpid());
    /* The attacker holds conns connections to each of up to MAX_PORTS ports. */
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < (rlim_t)conns * 8 + 64) {
        printf("SKIP: %d connections per port need RLIMIT_NOFILE >= %d (hard limit %llu)\n",
               conns, conns * 8 + 64, (unsigned long long)rl.rlim_max);
        return 77;
    }
    signal(SIGPIPE, SIG_IGN);
    setenv("NCCL_SOCKET_IFNAME", "=lo", 1);
    setenv("NCCL_SOCKET_FAMILY", "AF_INET", 1);
    const char *self = "/proc/self/exe";
    char exe[4096];
    ssize_t n = readlink(self, exe, sizeof exe - 1);
    if (n <= 0) return 1;
    exe[n] = '\0';
    if (getenv("TUTTI_TIMEOUT_MS") == NULL) setenv("TUTTI_TIMEOUT_MS", "30000", 1);
    double *quiet = calloc((size_t)runs, sizeof *quiet);
    double *hostile = calloc((size_t)runs, sizeof *hostile);
    if (quiet == NULL || hostile == NULL) return 1;
    int nquiet = 0, nhostile = 0, failed_runs = 0;
    for (int run = 0; run < runs; run++) {
        double quiet_ms = 0, hostile_ms = 0;
        if (runs > 1) printf("run %d of %d\n", run + 1, runs);
        printf("without attack (%s):\n", getenv("NCCL_SHM_DISABLE") ? "TCP" : "shared memory");
        int failed = run_job(exe, false, ops, &quiet_ms);
        if (failed == 0) quiet[nquiet++] = quiet_ms;
        printf("with %d connections per listening port:\n", conns);
        int failed_attack = run_job(exe, true, ops, &hostile_ms);
        if (failed_attack == 0) hostile[nhostile++] = hostile_ms;
        printf("rank 1 init: %.1f ms quiet, %.1f ms under attack (%+.1f ms; noisy machine)\n",
               quiet_ms, hostile_ms, hostile_ms - quiet_ms);
        failed_runs += (failed | failed_attack) != 0;
    }
    if (runs > 1) {
        double load[3] = {0, 0, 0};
        FILE *f = fopen("/proc/loadavg", "r");
        if (f != NULL) {
            if (fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
            fclose(f);
        }
        qsort(quiet, (size_t)nquiet, sizeof *quiet, cmp_double);
        qsort(hostile, (size_t)nhostile, sizeof *hostile, cmp_double);
        printf("%d runs of %d connections per port, %d AllReduces (%s): %d failed\n", runs,
               conns, ops, getenv("NCCL_SHM_DISABLE") ? "TCP" : "shared memory", failed_runs);
        if (nquiet > 0 && nhostile > 0)
            printf("rank 1 init, min/median/max: quiet %.1f/%.1f/%.1f ms, under attack "
                   "%.1f/%.1f/%.1f ms (load average %.1f %.1f %.1f)\n", quiet[0],
                   quiet[nquiet / 2], quiet[nquiet - 1], hostile[0], hostile[nhostile / 2],
                   hostile[nhostile - 1], load[0], load[1], load[2]);
    }
    free(quiet);
    free(hostile);
    printf("%s\n", failed_runs ? "FAIL" : "PASS");
    return failed_runs != 0;
}
