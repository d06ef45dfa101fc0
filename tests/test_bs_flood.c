/* The bootstrap's gate under a flood: a listener keeps TT_BS_MAX_PENDING unproven connections
 * and evicts the oldest when more come, and a connection of the job must never be the one.
 *
 *   root       a connection that passed the root's gate (sent the job's tag, got its challenge)
 *              survives N idle connections arriving between its challenge and its hello, the
 *              moment a descheduled rank spends computing its MAC (this is what failed about
 *              1 run in 25 with 1,000 connections per port: the rank's connection was evicted);
 *              its hello is then admitted and answered. A connection that never sent a tag,
 *              the oldest, is evicted first, and no evicted connection received a byte.
 *   listener   the same against a rank's listener thread: the p2p connection is filed.
 *   retry      a listener that closes the first connections before answering (an eviction
 *              before the tag was read): the connector connects again and gets in; one that
 *              closes every connection: the connector fails at its deadline, saying so.
 *   stranger   a rank whose id has another job's tag and secret is refused at the root's gate
 *              at once (ncclInvalidUsage naming the cause), not after its timeout.
 *   starved    a root whose process runs out of descriptors (room for 3 of 6 ranks'
 *              connections): TUTTI_HANDSHAKE_MS later it tells the ranks that arrived why and
 *              ends, and the ranks still queued find its port refused and fail at once (their
 *              id says the root listened before the id was made), not at their deadline.
 *   self       the same where the root's own process has the only rank (a job of one): for
 *              some limit the rank's sockets fit and the root's accepted one does not; that
 *              rank is told the root's reason, which it shares a process with, not a refusal.
 *
 * `test_bs_flood [N]` (idle connections per flood, 1000 by default; RLIMIT_NOFILE must allow
 * 2N + 64, else the test is skipped). About 2.5 s, two of them the root's TUTTI_HANDSHAKE_MS of
 * 1 s in "starved" and "self". */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/proto.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/sock.h"
#include "util/time.h"

#include "check.h"

static int nflood = 1000;

static struct sockaddr_storage loopback(uint16_t port)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return ss;
}

/* An idle connection to addr (the TCP handshake completes on loopback without the listener's
 * help); -1 when the socket cannot be made. */
static int idle_conn(const struct sockaddr_storage *addr)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (const struct sockaddr *)addr, tt_sock_addr_len(addr)) != 0 &&
        errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Waits (at most 10 s) until at least `want` of fds[0..n) are closed by the listener; an fd
 * seen closed becomes -1. A listener must send nothing to a connection that sent nothing: a
 * byte on any of them is a failure. Returns how many were closed. */
static int wait_closed(int *fds, int n, int want)
{
    int closed = 0;
    struct pollfd *p = calloc((size_t)n, sizeof *p);
    uint64_t deadline_ns = tt_deadline_after_ms(10000);
    if (p == NULL) return 0;
    while (closed < want && !tt_deadline_passed(deadline_ns)) {
        for (int i = 0; i < n; i++) p[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
        if (poll(p, (nfds_t)n, 100) <= 0) continue;
        for (int i = 0; i < n; i++) {
            if (fds[i] < 0 || p[i].revents == 0) continue;
            uint8_t b;
            ssize_t got = recv(fds[i], &b, 1, MSG_DONTWAIT);
            if (got > 0) FAIL("connection %d got a byte before it sent anything", i);
            if (got > 0 || got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
                close(fds[i]);
                fds[i] = -1;
                closed++;
            }
        }
    }
    free(p);
    return closed;
}

/* Opens `silent` (a connection that sends nothing, opened first so that it is the oldest) and
 * nflood idle connections to addr, and waits until the listener has evicted all but
 * TT_BS_MAX_PENDING - `kept` of them. Checks that the silent one went. Closes them all. */
static void flood(const struct sockaddr_storage *addr, int silent, int kept, const char *what)
{
    int n = nflood + 1;
    int *fds = calloc((size_t)n, sizeof *fds);
    if (fds == NULL) return;
    fds[0] = silent;
    for (int i = 1; i < n; i++) fds[i] = idle_conn(addr);
    int want = n - (TT_BS_MAX_PENDING - kept);
    int closed = wait_closed(fds, n, want);
    CHECK(closed >= want, "%s: %d of %d idle connections evicted, want at least %d", what,
          closed, n, want);
    CHECK(fds[0] < 0, "%s: the oldest connection without a tag was not evicted", what);
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) close(fds[i]);
    free(fds);
    printf("%s: %d idle connections: %d evicted, the connection past the gate kept\n", what, n,
           closed);
}

/* ---- root --------------------------------------------------------------------------------- */

static void scenario_root(void)
{
    ncclUniqueId id;
    struct tt_unique_id tid;
    struct sockaddr_storage root;
    uint8_t challenge[TT_BS_NONCE_BYTES];
    int fd = -1;
    CHECK_OK(tt_bootstrap_get_unique_id(&id));
    memcpy(&tid, &id, sizeof tid);
    CHECK_OK(tt_bs_id_addr(&tid, &root));
    uint64_t deadline_ns = tt_deadline_after_ms(10000);
    int silent = idle_conn(&root);
    CHECK_OK(tt_bs_gate_enter(&root, tid.magic, deadline_ns, NULL, "the root", false, &fd,
                              challenge));
    if (fd < 0) return;
    /* The hello this connection owes is late: the flood arrives first. */
    flood(&root, silent, 1, "root");
    struct tt_bs_root_hello hello;
    memset(&hello, 0, sizeof hello);
    hello.magic = tid.magic;
    hello.version = TT_UNIQUE_ID_VERSION;
    hello.rank = 0;
    hello.nranks = 1;
    tt_bs_addr_to_wire(&root, &hello.listen_addr);
    for (size_t i = 0; i < sizeof hello.nonce; i++) hello.nonce[i] = (uint8_t)(i * 3 + 1);
    tt_bs_mac(tid.secret, challenge, sizeof challenge, &hello,
              offsetof(struct tt_bs_root_hello, mac), hello.mac);
    struct tt_bs_root_reply reply;
    uint8_t mac[TT_BS_MAC_BYTES];
    CHECK_OK(tt_sock_send_all(fd, &hello, sizeof hello, deadline_ns, NULL));
    CHECK_OK(tt_sock_recv_all(fd, &reply, sizeof reply, deadline_ns, NULL));
    tt_bs_mac(tid.secret, hello.nonce, sizeof hello.nonce, &reply,
              offsetof(struct tt_bs_root_reply, mac), mac);
    CHECK(tt_bs_mac_equal(mac, reply.mac), "root: the reply's MAC does not verify");
    CHECK_EQ_MSG(reply.status, ncclSuccess, "root: the reply's status");
    tt_sock_close(&fd);
}

/* ---- listener ----------------------------------------------------------------------------- */

static void scenario_listener(void)
{
    struct sockaddr_storage want = loopback(0), addr;
    uint8_t secret[32], session[TT_BS_NONCE_BYTES], challenge[TT_BS_NONCE_BYTES];
    uint64_t magic = 0;
    int lfd = -1, fd = -1, filed = -1;
    struct tt_bs_listener *l = NULL;
    CHECK_OK(tt_bs_random(secret, sizeof secret));
    CHECK_OK(tt_bs_random(session, sizeof session));
    CHECK_OK(tt_bs_random(&magic, sizeof magic));
    CHECK_OK(tt_sock_listen(&want, &lfd, &addr));
    CHECK_OK(tt_bs_listener_start(lfd, 0, 2, magic, secret, &l));
    if (l == NULL) return;
    tt_bs_listener_set_session(l, session);
    uint64_t deadline_ns = tt_deadline_after_ms(10000);
    int silent = idle_conn(&addr);
    CHECK_OK(tt_bs_gate_enter(&addr, magic, deadline_ns, NULL, "rank 0", false, &fd,
                              challenge));
    if (fd >= 0) {
        flood(&addr, silent, 1, "listener");
        struct tt_bs_peer_hello h;
        memset(&h, 0, sizeof h);
        h.magic = magic;
        h.kind = TT_BS_CONN_P2P;
        h.from_rank = 1;
        h.to_rank = 0;
        tt_bs_peer_hello_mac(secret, session, challenge, &h, h.mac);
        CHECK_OK(tt_sock_send_all(fd, &h, sizeof h, deadline_ns, NULL));
        CHECK_OK(tt_bs_listener_take(l, TT_BS_CONN_P2P, 1, deadline_ns, &filed));
        CHECK(filed >= 0, "listener: the p2p connection from rank 1 was not filed");
        /* The filed connection is this one: a byte sent here arrives there. */
        uint8_t b = 0x5a, got = 0;
        if (filed >= 0) {
            CHECK_OK(tt_sock_send_all(fd, &b, 1, deadline_ns, NULL));
            CHECK_OK(tt_sock_recv_all(filed, &got, 1, deadline_ns, NULL));
            CHECK_EQ_MSG(got, b, "listener: the byte through the filed connection");
        }
    }
    tt_sock_close(&filed);
    tt_sock_close(&fd);
    tt_bs_listener_stop(l);
    tt_sock_close(&lfd);
}

/* ---- retry -------------------------------------------------------------------------------- */

struct fake {
    int lfd;
    int close_first; /* connections closed before their tag is read; -1: all */
    uint8_t nonce[TT_BS_NONCE_BYTES];
    int served; /* the connection answered, kept open until the fake ends */
};

/* A listener that evicts its first connections before reading their tag, then answers one
 * with a challenge. */
static void *fake_main(void *arg)
{
    struct fake *f = arg;
    f->served = -1;
    for (int k = 0;; k++) {
        int fd = -1;
        if (tt_sock_accept(f->lfd, tt_deadline_after_ms(5000), NULL, &fd, NULL) != ncclSuccess)
            return NULL;
        if (f->close_first < 0 || k < f->close_first) {
            close(fd);
            continue;
        }
        struct tt_bs_tag tag;
        struct tt_bs_challenge ch = {.status = TT_BS_CHALLENGE};
        memcpy(ch.nonce, f->nonce, sizeof ch.nonce);
        if (tt_sock_recv_all(fd, &tag, sizeof tag, tt_deadline_after_ms(5000), NULL) ==
                ncclSuccess &&
            tt_sock_send_all(fd, &ch, sizeof ch, tt_deadline_after_ms(5000), NULL) == ncclSuccess)
            f->served = fd;
        else
            close(fd);
        return NULL;
    }
}

static void scenario_retry(void)
{
    struct sockaddr_storage want = loopback(0), addr;
    struct fake f = {.close_first = 3};
    pthread_t t;
    uint8_t challenge[TT_BS_NONCE_BYTES];
    int fd = -1;
    for (size_t i = 0; i < sizeof f.nonce; i++) f.nonce[i] = (uint8_t)(0xa0 + i);
    CHECK_OK(tt_sock_listen(&want, &f.lfd, &addr));
    pthread_create(&t, NULL, fake_main, &f);
    CHECK_OK(tt_bs_gate_enter(&addr, 42, tt_deadline_after_ms(5000), NULL, "the fake", false, &fd,
                              challenge));
    pthread_join(t, NULL);
    CHECK_EQ_MSG(memcmp(challenge, f.nonce, sizeof challenge), 0,
                 "retry: the challenge after 3 evictions");
    tt_sock_close(&fd);
    tt_sock_close(&f.served);
    tt_sock_close(&f.lfd);
    printf("retry: in after 3 connections closed before their challenge\n");

    /* A listener that closes everything: the deadline ends the retries, with the reason. */
    f.close_first = -1;
    CHECK_OK(tt_sock_listen(&want, &f.lfd, &addr));
    pthread_create(&t, NULL, fake_main, &f);
    uint64_t start_ns = tt_time_ns();
    ncclResult_t res = tt_bs_gate_enter(&addr, 42, tt_deadline_after_ms(300), NULL, "the fake",
                                        false, &fd, challenge);
    int64_t ms = (int64_t)((tt_time_ns() - start_ns) / 1000000);
    CHECK_EQ_MSG(res, ncclSystemError, "retry: a listener that closes every connection");
    CHECK(strstr(tt_error_last(), "closed before its challenge") != NULL,
          "retry: the error '%s' does not say why", tt_error_last());
    CHECK(ms >= 250 && ms < 2000, "retry: gave up after %lld ms, want ~300", (long long)ms);
    CHECK_EQ_MSG(fd, -1, "retry: the fd after failing");
    shutdown(f.lfd, SHUT_RDWR); /* the fake's accept fails and it ends */
    pthread_join(t, NULL);
    tt_sock_close(&f.lfd);
    printf("retry: a listener that closes everything: failed after %lld ms (deadline 300)\n",
           (long long)ms);
}

/* ---- stranger ----------------------------------------------------------------------------- */

static void scenario_stranger(void)
{
    ncclUniqueId id, other;
    struct tt_bootstrap *bs = NULL;
    CHECK_OK(tt_bootstrap_get_unique_id(&id));
    /* Another job's id for the same root: its own tag and secret. */
    memcpy(&other, &id, sizeof other);
    struct tt_unique_id *o = (struct tt_unique_id *)&other;
    o->magic ^= 0x0101010101010101ull;
    o->secret[0] ^= 1;
    uint64_t start_ns = tt_time_ns();
    ncclResult_t res = tt_bootstrap_create(&other, 0, 2, NULL, &bs);
    int64_t ms = (int64_t)((tt_time_ns() - start_ns) / 1000000);
    CHECK_EQ_MSG(res, ncclInvalidUsage, "stranger: init with another job's id");
    CHECK(strstr(tt_error_last(), "refused") != NULL, "stranger: the error '%s' does not say "
          "the root refused", tt_error_last());
    CHECK(ms < 5000, "stranger: refused after %lld ms, want at once", (long long)ms);
    tt_bootstrap_destroy(bs);
    printf("stranger: another job's rank refused at the root's gate after %lld ms\n",
           (long long)ms);
}

#define STARVED_RANKS 6

struct starved_rank {
    ncclUniqueId id;
    int rank;
    ncclResult_t res;
    char why[TT_REASON_BYTES];
    int64_t ms;
};

static void *starved_main(void *arg)
{
    struct starved_rank *r = arg;
    struct tt_bootstrap *bs = NULL;
    uint64_t start_ns = tt_time_ns();
    r->res = tt_bootstrap_create(&r->id, r->rank, STARVED_RANKS, NULL, &bs);
    r->ms = (int64_t)((tt_time_ns() - start_ns) / 1000000);
    snprintf(r->why, sizeof r->why, "%s", tt_error_last());
    tt_bootstrap_destroy(bs);
    return NULL;
}

/* Runs first, while this process has no thread to fork beside (tests/fork_rank.h says why). */
static void scenario_starved(void)
{
    int p[2];
    CHECK(pipe(p) == 0, "starved: pipe");
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        /* Only 0-2 and the pipe (as 3) stay open, and the limit leaves 4-6: one for the
         * root's listening socket and two for ranks, three when the pipe is closed below. */
        if (dup2(p[1], 3) < 0) _exit(3);
        for (int fd = 4; fd < 4096; fd++) close(fd);
        p[1] = 3;
        struct rlimit rl = {.rlim_cur = 7, .rlim_max = 7};
        ncclUniqueId id;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || tt_bootstrap_get_unique_id(&id) != ncclSuccess)
            _exit(3);
        if (write(p[1], &id, sizeof id) != (ssize_t)sizeof id) _exit(3);
        close(p[1]);
        for (;;) pause(); /* the root's thread serves */
    }
    close(p[1]);
    struct starved_rank ranks[STARVED_RANKS];
    ssize_t got = read(p[0], &ranks[0].id, sizeof ranks[0].id);
    close(p[0]);
    CHECK(pid > 0 && got == (ssize_t)sizeof ranks[0].id, "starved: the root's process made no id");
    if (pid <= 0 || got != (ssize_t)sizeof ranks[0].id) {
        if (pid > 0) kill(pid, SIGKILL);
        return;
    }
    pthread_t threads[STARVED_RANKS];
    for (int r = 0; r < STARVED_RANKS; r++) {
        ranks[r].id = ranks[0].id;
        ranks[r].rank = r;
        pthread_create(&threads[r], NULL, starved_main, &ranks[r]);
    }
    int told = 0, refused = 0;
    int64_t slowest = 0;
    for (int r = 0; r < STARVED_RANKS; r++) {
        pthread_join(threads[r], NULL);
        const struct starved_rank *k = &ranks[r];
        bool fds = strstr(k->why, "ran out of file descriptors") != NULL;
        bool ref = strstr(k->why, "refused") != NULL;
        told += fds;
        refused += ref;
        if (k->ms > slowest) slowest = k->ms;
        CHECK(k->res != ncclSuccess, "starved: rank %d joined a root that had no room for it", r);
        CHECK(fds || ref, "starved: rank %d's error names neither the root's want of "
              "descriptors nor its closed port: %s", r, k->why);
        CHECK(k->ms < 10000, "starved: rank %d failed after %lld ms (TUTTI_TIMEOUT_MS is 30 s)",
              r, (long long)k->ms);
    }
    CHECK(told > 0, "starved: no rank was told that the root ran out of descriptors");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    printf("starved: %d ranks told of the root's want of descriptors, %d refused; the slowest "
           "failed after %lld ms\n", told, refused, (long long)slowest);
}

/* One try of scenario_self under a limit of `limit` fds (0-2 and the pipe open): the job of
 * one rank's result, its error (why) and how long it took (ms). */
static ncclResult_t self_try(int limit, char *why, size_t why_bytes, int64_t *ms)
{
    int p[2];
    if (pipe(p) != 0) return ncclSystemError;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        if (dup2(p[1], 3) < 0) _exit(3);
        for (int fd = 4; fd < 4096; fd++) close(fd);
        struct rlimit rl = {.rlim_cur = (rlim_t)limit, .rlim_max = (rlim_t)limit};
        struct starved_rank r = {.rank = 0, .res = ncclSystemError};
        uint64_t start_ns = tt_time_ns();
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(3);
        r.res = tt_bootstrap_get_unique_id(&r.id);
        snprintf(r.why, sizeof r.why, "%s", tt_error_last());
        if (r.res == ncclSuccess) {
            struct tt_bootstrap *bs = NULL;
            r.res = tt_bootstrap_create(&r.id, 0, 1, NULL, &bs);
            snprintf(r.why, sizeof r.why, "%s", tt_error_last());
            tt_bootstrap_destroy(bs);
        }
        r.ms = (int64_t)((tt_time_ns() - start_ns) / 1000000);
        _exit(write(3, &r, sizeof r) == (ssize_t)sizeof r ? 0 : 3);
    }
    close(p[1]);
    struct starved_rank r;
    ssize_t got = pid > 0 ? read(p[0], &r, sizeof r) : -1;
    close(p[0]);
    if (pid > 0) waitpid(pid, NULL, 0);
    if (got != (ssize_t)sizeof r) return ncclInternalError;
    snprintf(why, why_bytes, "%s", r.why);
    *ms = r.ms;
    return r.res;
}

/* Raises the limit one fd at a time until the job of one forms; on the way, some limit leaves
 * the root no room for the rank's connection. */
static void scenario_self(void)
{
    bool told = false, formed = false;
    for (int limit = 5; limit < 40 && !formed; limit++) {
        char why[TT_REASON_BYTES] = "";
        int64_t ms = 0;
        ncclResult_t res = self_try(limit, why, sizeof why, &ms);
        CHECK(res != ncclInternalError, "self: the child under limit %d reported nothing", limit);
        if (res == ncclInternalError) return;
        formed = res == ncclSuccess;
        bool root_fds = strstr(why, "bootstrap root") != NULL &&
                        strstr(why, "ran out of file descriptors") != NULL;
        if (root_fds) {
            told = true;
            printf("self: under a limit of %d fds the rank failed after %lld ms: %s\n", limit,
                   (long long)ms, why);
        }
        CHECK(formed || ms < 10000, "self: under limit %d the rank failed after %lld ms",
              limit, (long long)ms);
    }
    CHECK(formed, "self: no limit under 40 fds let a job of one form");
    CHECK(told, "self: under no limit was the rank told that its own process's root ran out "
          "of descriptors");
}

int main(int argc, char **argv)
{
    if (argc > 1) nflood = atoi(argv[1]);
    if (nflood < TT_BS_MAX_PENDING) nflood = TT_BS_MAX_PENDING;
    signal(SIGPIPE, SIG_IGN);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    /* The flood's own ends and the listener's: two fds per connection in this process. */
    if (rl.rlim_cur < (rlim_t)(2 * nflood + 64)) {
        printf("SKIP: %d connections need RLIMIT_NOFILE >= %d (hard limit %llu)\n", nflood,
               2 * nflood + 64, (unsigned long long)rl.rlim_max);
        return 77;
    }
    setenv("NCCL_SOCKET_IFNAME", "=lo", 1);
    setenv("NCCL_SOCKET_FAMILY", "AF_INET", 1);
    /* Long enough that only eviction, never the handshake deadline, closes the flood. */
    setenv("TUTTI_HANDSHAKE_MS", "20000", 1);
    setenv("TUTTI_TIMEOUT_MS", "30000", 1);
    tt_param_reload();
    setenv("TUTTI_HANDSHAKE_MS", "1000", 1); /* how long the starved root waits for room */
    tt_param_reload();
    scenario_starved();
    scenario_self();
    setenv("TUTTI_HANDSHAKE_MS", "20000", 1);
    tt_param_reload();
    scenario_root();
    scenario_listener();
    scenario_retry();
    scenario_stranger();
    printf("%s\n", check_failures ? "FAILED" : "PASSED");
    return check_failures != 0;
}
