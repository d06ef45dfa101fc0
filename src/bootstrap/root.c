/* The bootstrap root: the rendezvous thread (unique ids, which start it: unique_id.c).
 *
 * The root is one detached thread per id, serving one listening socket with a single poll()
 * loop, so that no connection, however slow or hostile, can stall the others. Each accepted
 * connection passes the gate (gate.c: the job's tag earns a challenge, any other a refusal) and
 * must answer the challenge with an authenticated hello, all within TUTTI_HANDSHAKE_MS, else it
 * is dropped and logged; at most TT_BS_MAX_PENDING connections wait, and one more evicts the
 * oldest without the job's tag (so a flood costs a bounded number of fds, and never a rank's
 * connection that has sent its tag). Once all nranks have said hello, each
 * rank learns its ring successor's address and the thread exits; if TUTTI_TIMEOUT_MS passes
 * first, every rank that did arrive is told which ranks are missing. It also ends, telling the
 * ranks that arrived why, when a rank of its own process fails (tt_bootstrap_root_cancel), when
 * an arrived rank hangs up, when it has had no descriptor for TUTTI_HANDSHAKE_MS, and after a
 * withdrawal (a rank whose init failed before it joined) once every rank has been told or
 * TUTTI_HANDSHAKE_MS after its own process's rank failed. The thread owns everything it uses
 * and frees it on exit. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "bootstrap/proto.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/sock.h"
#include "util/time.h"

/* Time given to each send of a reply; a rank's socket buffer is empty, so this never waits
 * unless the rank's host is gone. */
#define REPLY_TIMEOUT_MS 2000

/* A connection's way: its tag (CONN_TAG), then, challenged, its hello (CONN_HELLO), then a
 * rank of the job waiting for its reply (CONN_ARRIVED). */
/* CONN_TOLD: a rank told that another withdrew, dropped once the poll round is over. */
enum conn_state { CONN_TAG, CONN_HELLO, CONN_ARRIVED, CONN_TOLD };

struct root_conn {
    int fd;
    enum conn_state state;
    uint64_t hello_deadline_ns; /* for the tag and the hello */
    struct tt_bs_gate gate;     /* the tag, and the challenge sent for it */
    size_t got;                 /* of the hello */
    struct tt_bs_root_hello hello;
    char peer[TT_SOCK_ADDR_STR_BYTES];
};

struct root {
    struct root *next; /* in the process's list of live roots */
    atomic_int cancel; /* set by tt_bootstrap_root_cancel */
    struct tt_unique_id id;
    int listen_fd;
    char addr_text[TT_SOCK_ADDR_STR_BYTES];
    int64_t timeout_ms;
    int64_t handshake_ms; /* TUTTI_HANDSHAKE_MS */
    uint64_t deadline_ns;
    int nranks; /* from the first valid hello; 0 until then */
    int arrived;
    struct root_conn *conns;
    int nconns;
    int conns_cap;
    int *rank_conn; /* nranks entries: index into conns, or -1 */
    unsigned long dropped; /* connections dropped so far (the first is a WARN, the rest INFO) */
    uint64_t no_fds_since_ns; /* accepts have failed for want of fds since then (0: they work) */
    /* Once a rank withdrew (its init failed before it joined): what every rank is told, which
     * ranks have been told or withdrew (nranks flags) and how many; the root ends when that is
     * all of them, or TUTTI_HANDSHAKE_MS after its own process's rank failed (linger_ns). */
    char failed[TT_BS_REPLY_TEXT_BYTES];
    bool *accounted_rank;
    int accounted;
    uint64_t linger_ns;
    /* Set under roots_lock by tt_bs_root_withdraw: a rank of this process withdrew. */
    atomic_int local_withdrawn;
    int local_rank, local_nranks;
    ncclResult_t local_code;
};

/* The first dropped connection is a WARN, later ones INFO, so a flood cannot flood the log. */
#define DROP_LOG(root, fmt, ...)                                                                \
    do {                                                                                        \
        if ((root)->dropped++ == 0)                                                             \
            TT_WARN("bootstrap root at %s: " fmt " (further drops are logged at INFO)",         \
                    (root)->addr_text, __VA_ARGS__);                                            \
        else                                                                                    \
            TT_INFO(TT_SUB_BOOTSTRAP, "bootstrap root at %s: " fmt, (root)->addr_text,          \
                    __VA_ARGS__);                                                               \
    } while (0)

/* The roots running in this process, so that a rank whose init fails can end its job's root
 * (tt_bootstrap_root_cancel; after a withdrawal, TUTTI_HANDSHAKE_MS later) or withdraw from it
 * (tt_bs_root_withdraw) instead of leaving it until TUTTI_TIMEOUT_MS. */
static pthread_mutex_t roots_lock = PTHREAD_MUTEX_INITIALIZER;
static struct root *roots;

/* Why the last few roots of this process ended without forming their job, under roots_lock:
 * a rank of this process whose connection such a root never took (it ran out of fds) learns
 * the reason from here (tt_bs_root_failure), where the other ranks only see a refusal. */
#define ENDED_ROOTS 4
static struct {
    uint64_t magic; /* 0: empty */
    char text[TT_BS_REPLY_TEXT_BYTES];
} ended[ENDED_ROOTS];
static unsigned ended_next;

static void remember_failure(const struct root *root, const char *text)
{
    pthread_mutex_lock(&roots_lock);
    ended[ended_next].magic = root->id.magic;
    snprintf(ended[ended_next].text, sizeof ended[ended_next].text, "%s", text);
    ended_next = (ended_next + 1) % ENDED_ROOTS;
    pthread_mutex_unlock(&roots_lock);
}

bool tt_bs_root_failure(uint64_t magic, char *buf, size_t bytes)
{
    bool found = false;
    pthread_mutex_lock(&roots_lock);
    for (int i = 0; i < ENDED_ROOTS && !found; i++)
        if (ended[i].magic == magic && magic != 0) {
            snprintf(buf, bytes, "%s", ended[i].text);
            found = true;
        }
    pthread_mutex_unlock(&roots_lock);
    return found;
}

/* ---- the root thread ---------------------------------------------------------------------- */

/* Stops listening for every process that holds the socket, then closes this one's. A copy
 * may live elsewhere: tutti-run's socket (TUTTI_ROOT_FD) is inherited by whatever rank 0
 * forked or exec'd before its first init, and such a copy would otherwise keep the port in
 * LISTEN, taking the next root's connections into a backlog nobody accepts. Not listening,
 * the socket keeps the port bound but lets the next root bind it (SO_REUSEADDR on both). */
static void close_listener(int *fd)
{
    if (*fd >= 0) (void)shutdown(*fd, SHUT_RDWR);
    tt_sock_close(fd);
}

static void drop_conn(struct root *root, int i)
{
    tt_sock_close(&root->conns[i].fd);
    root->conns[i] = root->conns[--root->nconns];
    /* The moved connection's rank slot must follow it. */
    struct root_conn *moved = &root->conns[i];
    if (i < root->nconns && moved->state == CONN_ARRIVED) root->rank_conn[moved->hello.rank] = i;
}

/* Sends one reply (status and text, or the successor's address) to an arrived rank. A rank
 * that is gone by now only costs a log line: the others must still get their replies. */
static void send_reply(struct root *root, const struct root_conn *c, ncclResult_t status,
                       const uint8_t session[TT_BS_NONCE_BYTES],
                       const struct sockaddr_storage *next, const char *text)
{
    struct tt_bs_root_reply reply;
    memset(&reply, 0, sizeof reply);
    reply.magic = root->id.magic;
    reply.status = (int32_t)status;
    if (session != NULL) memcpy(reply.session, session, sizeof reply.session);
    if (next != NULL) tt_bs_addr_to_wire(next, &reply.next_addr);
    if (text != NULL) snprintf(reply.text, sizeof reply.text, "%s", text);
    tt_bs_mac(root->id.secret, c->hello.nonce, sizeof c->hello.nonce, &reply,
              offsetof(struct tt_bs_root_reply, mac), reply.mac);
    if (tt_sock_send_all(c->fd, &reply, sizeof reply, tt_deadline_after_ms(REPLY_TIMEOUT_MS),
                         NULL) != ncclSuccess)
        TT_WARN("bootstrap root at %s: could not reply to %s", root->addr_text, c->peer);
}

/* Tells every rank that arrived why the job cannot form (the root ends next). */
static void tell_arrived(struct root *root, ncclResult_t status, const char *text)
{
    for (int i = 0; i < root->nconns; i++)
        if (root->conns[i].state == CONN_ARRIVED)
            send_reply(root, &root->conns[i], status, NULL, NULL, text);
}

/* Checks a complete hello. Returns false when the connection is to be dropped silently
 * (logged): not one of ours. Sets *reject to an error status (with text) for a rank of this
 * job whose hello conflicts with the others. */
static bool check_hello(struct root *root, struct root_conn *c, ncclResult_t *reject,
                        char *text, size_t text_bytes)
{
    const struct tt_bs_root_hello *h = &c->hello;
    uint8_t mac[TT_BS_MAC_BYTES];
    *reject = ncclSuccess;
    if (h->magic != root->id.magic || h->version != TT_UNIQUE_ID_VERSION) {
        DROP_LOG(root, "dropping connection from %s: wrong magic or version (another job, or "
                 "not a Tutti rank)", c->peer);
        return false;
    }
    tt_bs_mac(root->id.secret, c->gate.challenge, sizeof c->gate.challenge, h,
              offsetof(struct tt_bs_root_hello, mac), mac);
    if (!tt_bs_mac_equal(mac, h->mac)) {
        DROP_LOG(root, "dropping connection from %s: authentication failed (its unique id has "
                 "another secret; check TUTTI_SECRET)", c->peer);
        return false;
    }
    struct sockaddr_storage addr;
    if (h->failed == 0 && tt_bs_addr_from_wire(&h->listen_addr, c->peer, &addr) != ncclSuccess)
        return false;
    if (h->nranks < 1 || h->nranks > TT_BS_MAX_RANKS || h->rank < 0 || h->rank >= h->nranks) {
        *reject = ncclInvalidArgument;
        snprintf(text, text_bytes, "rank %d with nranks %d is out of range (at most %d ranks)",
                 (int)h->rank, (int)h->nranks, TT_BS_MAX_RANKS);
    } else if (root->nranks != 0 && h->nranks != root->nranks) {
        *reject = ncclInvalidUsage;
        snprintf(text, text_bytes, "rank %d called init with nranks=%d but other ranks used "
                 "nranks=%d", (int)h->rank, (int)h->nranks, root->nranks);
    } else if (root->nranks != 0 && root->rank_conn[h->rank] >= 0) {
        *reject = ncclInvalidUsage;
        snprintf(text, text_bytes, "rank %d joined twice (from %s and from %s)", (int)h->rank,
                 root->conns[root->rank_conn[h->rank]].peer, c->peer);
    }
    return true;
}

/* Makes the rank table for a job of nranks (from its first hello, or a local withdrawal). */
static ncclResult_t set_nranks(struct root *root, int nranks)
{
    int *rank_conn = NULL;
    bool *accounted = NULL;
    if (TT_CALLOC(&rank_conn, (size_t)nranks) != ncclSuccess ||
        TT_CALLOC(&accounted, (size_t)nranks) != ncclSuccess) {
        free(rank_conn);
        return ncclSystemError; /* TT_CALLOC said why */
    }
    for (int r = 0; r < nranks; r++) rank_conn[r] = -1;
    root->rank_conn = rank_conn;
    root->accounted_rank = accounted;
    root->nranks = nranks;
    /* The job's deadline runs from its first rank, as NCCL's root waits until its id is used:
     * an id may be made long before the ranks call init. */
    root->deadline_ns = tt_deadline_after_ms(root->timeout_ms);
    return ncclSuccess;
}

static void account(struct root *root, int rank)
{
    if (root->accounted_rank[rank]) return;
    root->accounted_rank[rank] = true;
    root->accounted++;
}

/* Rank `rank` withdrew with `code`: tell every rank that arrived, and from now on every rank
 * that arrives (admit), that the job cannot form. They fail with ncclRemoteError: the code is
 * the withdrawing rank's, named in the text. */
static void withdrawn(struct root *root, int rank, uint32_t code)
{
    account(root, rank);
    if (root->failed[0] != '\0') return; /* another rank withdrew before: all were told */
    static const char *const names[ncclNumResults] = {
        "ncclSuccess",         "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
        "ncclInvalidArgument", "ncclInvalidUsage",       "ncclRemoteError", "ncclInProgress"};
    snprintf(root->failed, sizeof root->failed, "rank %d's init failed (%s) before it joined "
             "the bootstrap root at %s, so the job cannot form; rank %d's own error says why",
             rank, code < ncclNumResults ? names[code] : "unknown error", root->addr_text, rank);
    TT_WARN("%s", root->failed);
    for (int k = 0; k < root->nconns; k++) {
        if (root->conns[k].state != CONN_ARRIVED) continue;
        send_reply(root, &root->conns[k], ncclRemoteError, NULL, NULL, root->failed);
        root->rank_conn[root->conns[k].hello.rank] = -1;
        root->conns[k].state = CONN_TOLD; /* dropped by serve (drop_conn moves entries) */
        root->arrived--;
        account(root, (int)root->conns[k].hello.rank);
    }
}

/* A rank of this process withdrew (tt_bs_root_withdraw): as a withdrawal over the wire, and
 * the root lingers TUTTI_HANDSHAKE_MS more to tell the ranks still to come, then ends. */
static ncclResult_t local_withdrawal(struct root *root)
{
    pthread_mutex_lock(&roots_lock);
    int rank = root->local_rank, nranks = root->local_nranks;
    ncclResult_t code = root->local_code;
    pthread_mutex_unlock(&roots_lock);
    if (root->nranks == 0) TT_TRY(set_nranks(root, nranks));
    if (rank < root->nranks) withdrawn(root, rank, (uint32_t)code);
    root->linger_ns = tt_deadline_after_ms(root->handshake_ms);
    return ncclSuccess;
}

/* A hello is complete: admit the rank, or reject it (with a reply) or drop it. */
static ncclResult_t admit(struct root *root, int i)
{
    struct root_conn *c = &root->conns[i];
    char text[TT_BS_REPLY_TEXT_BYTES];
    ncclResult_t reject = ncclSuccess;
    if (!check_hello(root, c, &reject, text, sizeof text)) {
        drop_conn(root, i);
        return ncclSuccess;
    }
    if (reject != ncclSuccess) {
        TT_WARN("bootstrap root at %s: refusing %s: %s", root->addr_text, c->peer, text);
        send_reply(root, c, reject, NULL, NULL, text);
        drop_conn(root, i);
        return ncclSuccess;
    }
    if (root->nranks == 0) TT_TRY(set_nranks(root, c->hello.nranks));
    if (c->hello.failed != 0 || root->failed[0] != '\0') {
        if (c->hello.failed != 0) {
            withdrawn(root, (int)c->hello.rank, c->hello.failed);
        } else {
            send_reply(root, c, ncclRemoteError, NULL, NULL, root->failed);
            account(root, (int)c->hello.rank);
        }
        drop_conn(root, i);
        return ncclSuccess;
    }
    c->state = CONN_ARRIVED;
    root->rank_conn[c->hello.rank] = i;
    root->arrived++;
    TT_TRACE(TT_SUB_BOOTSTRAP, "bootstrap root at %s: rank %d of %d arrived from %s",
             root->addr_text, (int)c->hello.rank, root->nranks, c->peer);
    return ncclSuccess;
}

/* Closes the connection that has waited longest for its tag, or when there is none and
 * `tagless_only` is false (only a stranger who knows the job's tag can fill the root with
 * challenged connections) the one that has waited longest for its hello. `why` says what
 * needs the room. False when there is none to close. */
static bool drop_oldest(struct root *root, bool tagless_only, const char *why)
{
    int oldest = -1;
    for (int i = 0; i < root->nconns; i++) {
        const struct root_conn *c = &root->conns[i], *o = oldest < 0 ? NULL : &root->conns[oldest];
        if (c->state == CONN_ARRIVED || (tagless_only && c->state != CONN_TAG)) continue;
        if (o == NULL || (c->state == CONN_TAG && o->state == CONN_HELLO) ||
            (c->state == o->state && c->hello_deadline_ns < o->hello_deadline_ns))
            oldest = i;
    }
    if (oldest < 0) return false;
    DROP_LOG(root, "%s; closing the oldest connection %s, from %s", why,
             root->conns[oldest].state == CONN_TAG ? "without a tag" : "past the gate",
             root->conns[oldest].peer);
    drop_conn(root, oldest);
    return true;
}

/* Passes connection i through the gate as far as its bytes allow: challenged when its tag is
 * the job's, dropped when it is another (refused) or the connection failed. */
static void pass_gate(struct root *root, int i)
{
    struct root_conn *c = &root->conns[i];
    enum tt_bs_gate_step step = tt_bs_gate_read(c->fd, root->id.magic, &c->gate);
    if (step == TT_BS_GATE_WAIT) return;
    if (step == TT_BS_GATE_OPEN) {
        c->state = CONN_HELLO;
        return;
    }
    if (c->gate.got == sizeof c->gate.tag)
        DROP_LOG(root, "refusing %s: not this job's tag (another job, or not a Tutti rank)",
                 c->peer);
    drop_conn(root, i);
}

/* Accepts up to TT_BS_ACCEPT_BATCH queued connections and reads the tag of each that has
 * already sent it (a rank's comes right after its connect). */
static ncclResult_t accept_all(struct root *root)
{
    for (int batch = 0; batch < TT_BS_ACCEPT_BATCH; batch++) {
        struct sockaddr_storage peer;
        socklen_t len = sizeof peer;
        int fd = accept4(root->listen_fd, (struct sockaddr *)&peer, &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int err = errno;
            if (err == EINTR || err == ECONNABORTED) continue;
            if (err != EMFILE && err != ENFILE) return ncclSuccess;
            /* Out of fds: make room by closing the oldest connection without the job's tag
             * (blind junk); one past the gate is most likely a rank's, and is kept. */
            char why[224];
            snprintf(why, sizeof why, "out of file descriptors: %s", tt_strerror(err));
            if (drop_oldest(root, true, why)) continue;
            /* Nothing to close: the connections wait in the listen queue. A pause keeps the
             * poll loop from spinning on the listening socket, readable until fds free up;
             * serve() gives up when none has for TUTTI_HANDSHAKE_MS. */
            if (root->no_fds_since_ns == 0) {
                root->no_fds_since_ns = tt_time_ns();
                TT_WARN("bootstrap root at %s: %s; ranks' connections wait until some are "
                        "closed", root->addr_text, why);
            }
            nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
            return ncclSuccess;
        }
        root->no_fds_since_ns = 0;
        if (root->nconns - root->arrived >= TT_BS_MAX_PENDING) {
            char why[64];
            snprintf(why, sizeof why, "%d connections wait for their tag or hello",
                     TT_BS_MAX_PENDING);
            drop_oldest(root, false, why);
        }
        if (root->nconns == root->conns_cap) {
            int cap = root->conns_cap ? 2 * root->conns_cap : 16;
            struct root_conn *grown = realloc(root->conns, (size_t)cap * sizeof *grown);
            if (grown == NULL) {
                close(fd);
                return TT_ERROR(ncclSystemError, "bootstrap root: out of memory for %d "
                                "connections", cap);
            }
            root->conns = grown;
            root->conns_cap = cap;
        }
        struct root_conn *c = &root->conns[root->nconns];
        memset(c, 0, sizeof *c);
        c->fd = fd;
        c->state = CONN_TAG;
        c->hello_deadline_ns = tt_deadline_after_ms(root->handshake_ms);
        tt_sock_addr_str(&peer, c->peer, sizeof c->peer);
        root->nconns++;
        pass_gate(root, root->nconns - 1);
    }
    return ncclSuccess;
}

/* Reads whatever bytes have arrived on connection i: its tag, then its hello; admits the rank
 * when the hello is complete. */
static ncclResult_t read_hello(struct root *root, int i)
{
    struct root_conn *c = &root->conns[i];
    if (c->state == CONN_TAG) {
        pass_gate(root, i);
        return ncclSuccess;
    }
    if (tt_sock_recv_some(c->fd, &c->hello, sizeof c->hello, &c->got) != ncclSuccess) {
        DROP_LOG(root, "dropping %s, which closed before its hello", c->peer);
        drop_conn(root, i);
        return ncclSuccess;
    }
    if (c->got == sizeof c->hello) return admit(root, i);
    return ncclSuccess;
}

/* Writes "rank 2" or "ranks 2-5,7" into buf: the ranks that have not arrived. */
static void format_missing(const struct root *root, char *buf, size_t buf_bytes)
{
    size_t used = 0;
    int missing = 0;
    buf[0] = '\0';
    for (int r = 0; r < root->nranks; r++) missing += root->rank_conn[r] < 0;
    used += (size_t)snprintf(buf, buf_bytes, "%s ", missing == 1 ? "rank" : "ranks");
    /* Runs of consecutive missing ranks print as "a-b". */
    for (int r = 0; r < root->nranks && used + 16 < buf_bytes; r++) {
        if (root->rank_conn[r] >= 0) continue;
        int end = r;
        while (end + 1 < root->nranks && root->rank_conn[end + 1] < 0) end++;
        const char *sep = used > 6 && buf[used - 1] != ' ' ? "," : "";
        if (end > r)
            used += (size_t)snprintf(buf + used, buf_bytes - used, "%s%d-%d", sep, r, end);
        else
            used += (size_t)snprintf(buf + used, buf_bytes - used, "%s%d", sep, r);
        r = end;
    }
}

/* The deadline passed: tell every arrived rank which ranks are missing. */
static void report_missing(struct root *root)
{
    if (root->nranks == 0) {
        TT_WARN("bootstrap root at %s: no rank arrived within %lld ms (TUTTI_TIMEOUT_MS); "
                "giving up", root->addr_text, (long long)root->timeout_ms);
        return;
    }
    char missing[200], text[TT_BS_REPLY_TEXT_BYTES];
    format_missing(root, missing, sizeof missing);
    snprintf(text, sizeof text, "%s of %d never reached the bootstrap root at %s within %lld ms "
             "(TUTTI_TIMEOUT_MS); did every rank start, with the same unique id?", missing,
             root->nranks, root->addr_text, (long long)root->timeout_ms);
    TT_WARN("%s", text);
    tell_arrived(root, ncclSystemError, text);
}

/* Accepts have failed for want of fds for TUTTI_HANDSHAKE_MS: the ranks still in the listen
 * queue cannot be served, so tell the arrived ones why the job cannot form. */
static void report_no_fds(struct root *root)
{
    char text[TT_BS_REPLY_TEXT_BYTES];
    char arrived[48] = "before any rank arrived";
    if (root->nranks > 0)
        snprintf(arrived, sizeof arrived, "with %d of %d ranks arrived", root->arrived,
                 root->nranks);
    snprintf(text, sizeof text, "the bootstrap root at %s ran out of file descriptors and could "
             "not take the ranks' connections for %lld ms (TUTTI_HANDSHAKE_MS), %s: %s",
             root->addr_text, (long long)root->handshake_ms, arrived, tt_strerror(EMFILE));
    TT_WARN("%s; root done", text);
    remember_failure(root, text);
    tell_arrived(root, ncclSystemError, text);
}

/* True when an arrived rank closed its connection (it sends nothing after its hello). */
static bool rank_hung_up(const struct root_conn *c)
{
    uint8_t b;
    ssize_t n = recv(c->fd, &b, 1, MSG_DONTWAIT | MSG_PEEK);
    return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* An arrived rank hung up before the others came: tell the rest, who cannot form a job now. */
static void report_gone(struct root *root, int gone)
{
    char text[TT_BS_REPLY_TEXT_BYTES];
    int rank = (int)root->conns[gone].hello.rank;
    snprintf(text, sizeof text, "rank %d (%s) left the bootstrap root at %s before every rank "
             "had arrived (its init was aborted, or it died)", rank, root->conns[gone].peer,
             root->addr_text);
    TT_INFO(TT_SUB_BOOTSTRAP, "%s; root done", text);
    root->conns[gone].state = CONN_TOLD; /* nothing to tell it */
    tell_arrived(root, ncclRemoteError, text);
}

/* Everyone is here: tell each rank its successor on the ring and the session value. */
static void reply_all(struct root *root)
{
    uint8_t session[TT_BS_NONCE_BYTES];
    if (tt_bs_random(session, sizeof session) != ncclSuccess) return;
    for (int r = 0; r < root->nranks; r++) {
        const struct root_conn *c = &root->conns[root->rank_conn[r]];
        const struct root_conn *next = &root->conns[root->rank_conn[(r + 1) % root->nranks]];
        struct sockaddr_storage next_addr;
        /* Checked when the hello was admitted. */
        (void)tt_bs_addr_from_wire(&next->hello.listen_addr, next->peer, &next_addr);
        send_reply(root, c, ncclSuccess, session, &next_addr, NULL);
    }
}

/* The poll loop: listen socket first, then every connection still owing its hello. */
static ncclResult_t serve(struct root *root)
{
    struct pollfd *pfds = NULL;
    int *which = NULL;
    int cap = 0;
    ncclResult_t res = ncclSuccess;
    while (root->nranks == 0 || root->arrived < root->nranks) {
        if (atomic_load(&root->local_withdrawn) == 1) {
            atomic_store(&root->local_withdrawn, 2);
            TT_TRY_GOTO(local_withdrawal(root), res, out);
        }
        /* After a withdrawal its own rank fails because of it: the root stays a little to tell
         * the ranks still to come. */
        if (atomic_load(&root->cancel) && root->failed[0] != '\0' && root->linger_ns == 0)
            root->linger_ns = tt_deadline_after_ms(root->handshake_ms);
        if (atomic_load(&root->cancel) && root->failed[0] == '\0') {
            char text[TT_BS_REPLY_TEXT_BYTES];
            snprintf(text, sizeof text, "a rank in the process hosting the bootstrap root at %s "
                     "failed or aborted its init; the job cannot form", root->addr_text);
            TT_INFO(TT_SUB_BOOTSTRAP, "%s; root done", text);
            tell_arrived(root, ncclRemoteError, text);
            break;
        }
        if (root->no_fds_since_ns != 0 &&
            tt_time_ns() - root->no_fds_since_ns > (uint64_t)root->handshake_ms * 1000000ull) {
            report_no_fds(root);
            break;
        }
        if (root->failed[0] != '\0' &&
            (root->accounted >= root->nranks ||
             (root->linger_ns != 0 && tt_deadline_passed(root->linger_ns)))) {
            TT_INFO(TT_SUB_BOOTSTRAP, "bootstrap root at %s: %d of %d ranks told of the "
                    "withdrawal or withdrawn; root done", root->addr_text, root->accounted,
                    root->nranks);
            break;
        }
        if (tt_deadline_passed(root->deadline_ns)) {
            if (root->failed[0] == '\0') report_missing(root);
            break;
        }
        /* Drop connections that never finished their hello, newest first so indices hold. */
        for (int i = root->nconns - 1; i >= 0; i--) {
            if (root->conns[i].state != CONN_ARRIVED &&
                tt_deadline_passed(root->conns[i].hello_deadline_ns)) {
                DROP_LOG(root, "dropping %s: no %s within %lld ms (TUTTI_HANDSHAKE_MS)",
                         root->conns[i].peer, root->conns[i].state == CONN_TAG ? "tag" : "hello",
                         (long long)root->handshake_ms);
                drop_conn(root, i);
            }
        }
        if (cap < root->nconns + 1) {
            cap = 2 * (root->nconns + 1);
            free(pfds);
            free(which);
            pfds = calloc((size_t)cap, sizeof *pfds);
            which = calloc((size_t)cap, sizeof *which);
            if (pfds == NULL || which == NULL) {
                res = TT_ERROR(ncclSystemError, "bootstrap root: out of memory for poll set");
                break;
            }
        }
        int n = 0;
        pfds[n++] = (struct pollfd){.fd = root->listen_fd, .events = POLLIN};
        /* Arrived ranks are watched too: one that hangs up (its init was aborted, or it died)
         * can never be told its successor, so the job cannot form; the root then ends at once
         * instead of holding its thread and sockets until TUTTI_TIMEOUT_MS. */
        for (int i = 0; i < root->nconns; i++) {
            which[n] = i;
            pfds[n++] = (struct pollfd){.fd = root->conns[i].fd, .events = POLLIN};
        }
        if (poll(pfds, (nfds_t)n, tt_deadline_left_ms(root->deadline_ns, 100)) <= 0) continue;
        int gone = -1;
        for (int k = 1; k < n && gone < 0; k++)
            if (pfds[k].revents != 0 && root->conns[which[k]].state == CONN_ARRIVED &&
                rank_hung_up(&root->conns[which[k]]))
                gone = which[k];
        if (gone >= 0) {
            report_gone(root, gone);
            break;
        }
        /* Read hellos from the highest index down: drop_conn moves the last entry into the
         * dropped slot, which then has already been visited. */
        for (int k = n - 1; k >= 1; k--) {
            if (pfds[k].revents == 0 || root->conns[which[k]].state >= CONN_ARRIVED) continue;
            TT_TRY_GOTO(read_hello(root, which[k]), res, out);
        }
        for (int i = root->nconns - 1; i >= 0; i--)
            if (root->conns[i].state == CONN_TOLD) drop_conn(root, i);
        if (pfds[0].revents != 0) TT_TRY_GOTO(accept_all(root), res, out);
    }
    if (root->nranks != 0 && root->arrived == root->nranks) {
        /* Free the port before anyone learns that init can finish: a process that creates its
         * next communicator from the same NCCL_COMM_ID at once must be able to listen there. */
        close_listener(&root->listen_fd);
        reply_all(root);
        TT_INFO(TT_SUB_BOOTSTRAP, "bootstrap root at %s: all %d ranks arrived; root done",
                root->addr_text, root->nranks);
    }
out:
    free(pfds);
    free(which);
    return res;
}

static void *root_main(void *arg)
{
    struct root *root = arg;
    (void)serve(root);
    pthread_mutex_lock(&roots_lock);
    for (struct root **p = &roots; *p != NULL; p = &(*p)->next)
        if (*p == root) {
            *p = root->next;
            break;
        }
    pthread_mutex_unlock(&roots_lock);
    for (int i = 0; i < root->nconns; i++) tt_sock_close(&root->conns[i].fd);
    close_listener(&root->listen_fd);
    free(root->conns);
    free(root->rank_conn);
    free(root->accounted_rank);
    sodium_memzero(&root->id, sizeof root->id); /* freed memory keeps no secret */
    free(root);
    return NULL;
}

void tt_bootstrap_root_cancel(const ncclUniqueId *id_bytes)
{
    struct tt_unique_id id;
    memcpy(&id, id_bytes, sizeof id);
    pthread_mutex_lock(&roots_lock);
    for (struct root *r = roots; r != NULL; r = r->next)
        if (r->id.magic == id.magic && r->id.port == id.port &&
            memcmp(r->id.addr, id.addr, sizeof id.addr) == 0)
            atomic_store(&r->cancel, 1);
    pthread_mutex_unlock(&roots_lock);
}

bool tt_bs_root_withdraw(const ncclUniqueId *id_bytes, int rank, int nranks, ncclResult_t code)
{
    struct tt_unique_id id;
    bool found = false;
    memcpy(&id, id_bytes, sizeof id);
    pthread_mutex_lock(&roots_lock);
    for (struct root *r = roots; r != NULL && !found; r = r->next)
        if (r->id.magic == id.magic && r->id.port == id.port &&
            memcmp(r->id.addr, id.addr, sizeof id.addr) == 0 &&
            atomic_load(&r->local_withdrawn) == 0) {
            r->local_rank = rank;
            r->local_nranks = nranks;
            r->local_code = code;
            atomic_store(&r->local_withdrawn, 1);
            found = true;
        }
    pthread_mutex_unlock(&roots_lock);
    return found;
}

ncclResult_t tt_bs_root_spawn(const struct tt_unique_id *id, int listen_fd)
{
    ncclResult_t res = ncclSuccess;
    struct root *root = NULL;
    pthread_attr_t attr;
    pthread_t thread;
    TT_TRY_GOTO(TT_CALLOC(&root, 1), res, fail);
    root->id = *id;
    root->listen_fd = listen_fd;
    root->timeout_ms = tt_param_timeout_ms();
    root->handshake_ms = tt_param_handshake_ms();
    root->deadline_ns = TT_NO_DEADLINE; /* set when the first rank arrives (admit) */
    struct sockaddr_storage addr;
    TT_TRY_GOTO(tt_bs_id_addr(id, &addr), res, fail);
    tt_sock_addr_str(&addr, root->addr_text, sizeof root->addr_text);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_mutex_lock(&roots_lock);
    for (int i = 0; i < ENDED_ROOTS; i++) /* an NCCL_COMM_ID id's magic recurs */
        if (ended[i].magic == id->magic) ended[i].magic = 0;
    int err = pthread_create(&thread, &attr, root_main, root);
    if (err == 0) {
        root->next = roots;
        roots = root;
    }
    pthread_mutex_unlock(&roots_lock);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        res = TT_ERROR(ncclSystemError, "cannot start the bootstrap root thread: %s",
                       strerror(err));
        goto fail;
    }
    return ncclSuccess;
fail:
    if (root != NULL) sodium_memzero(&root->id, sizeof root->id);
    free(root);
    tt_sock_close(&listen_fd);
    return res;
}
