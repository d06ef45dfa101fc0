/* A rank's bootstrap listener: one thread per bootstrap that serves the rank's listening socket
 * for as long as the bootstrap lives, so that no connection, however slow or hostile, costs the
 * rank's own calls anything, and a peer opening a connection never waits for this rank to be
 * inside a bootstrap call.
 *
 * Every accepted connection passes the gate (gate.c): once it has sent the job's tag it
 * receives a fresh random challenge (nothing derived from the secret; any other tag gets a
 * refusal and is closed) and must answer with a peer hello MAC'd over the job's session value
 * and that challenge; all of this within TUTTI_HANDSHAKE_MS of the accept, else it is closed.
 * At most TT_BS_MAX_PENDING connections wait; a new one beyond that (or one that finds the
 * process out of fds) evicts the oldest of those without the job's tag, and only when there is
 * none the oldest of the rest (sparing hellos held for the session): a blind flood can never
 * evict a connection of the job that has sent its tag.
 * A connection that proves itself is filed under (kind, sending rank) for the bootstrap to take;
 * each such slot is filled at most once, so a second hello for it, genuine or replayed, is
 * refused. The thread touches only the listener's own state; the slots are shared with the
 * bootstrap under `lock`.
 *
 * The thread starts as soon as the rank listens, before the root has told it the session value,
 * so that connections queued while the rank waits for the root (a flood that found the port)
 * are accepted and disposed of meanwhile, not in front of its peers' connections afterwards. A
 * hello that is complete before the session is known, with the job's magic, is held (no longer
 * polled, exempt from its deadline) and checked once tt_bs_listener_set_session gives the
 * session: a peer may learn the session from the root a moment before this rank does. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "bootstrap/proto.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/sock.h"
#include "util/time.h"

/* A slot taken by the bootstrap: later hellos for it are refused. */
#define SLOT_TAKEN (-2)

struct pending {
    int fd;
    uint64_t deadline_ns;
    struct tt_bs_gate gate; /* the tag, and the challenge sent for it */
    bool open;              /* the job's tag came and the challenge went out */
    size_t got;             /* of the hello */
    struct tt_bs_peer_hello hello;
    bool held; /* complete, with the job's magic; waits for the session */
};

struct tt_bs_listener {
    int listen_fd; /* borrowed from the bootstrap */
    int wake_fd;   /* eventfd: stop */
    int rank;
    int nranks;
    uint64_t magic;
    uint8_t secret[32];
    uint8_t session[TT_BS_NONCE_BYTES];
    int64_t handshake_ms;
    atomic_bool have_session; /* `session` is set (release/acquire) */
    atomic_bool stopping;     /* with a wake-up: the thread returns */
    pthread_t thread;
    bool started;
    atomic_bool ended; /* the thread stopped serving on its own (poll failed): takes fail */
    /* The thread's own. */
    struct pending pending[TT_BS_MAX_PENDING];
    int npending;
    unsigned long dropped; /* connections refused so far (the first is a WARN, the rest INFO) */
    bool warned_no_fds;    /* an accept has failed for want of fds (said once) */
    /* Shared with the bootstrap. */
    pthread_mutex_t lock;
    pthread_cond_t filed;
    int ring_fd;   /* the ring predecessor's connection, -1, or SLOT_TAKEN */
    int *p2p_fd;   /* nranks: each peer's p2p connection, -1, or SLOT_TAKEN */
};

/* Logs why a connection is refused: the first refusal at WARN, later ones at INFO, so that a
 * flood of hostile connections cannot flood the log. */
#define REFUSE_LOG(l, fmt, ...)                                                                 \
    do {                                                                                        \
        if ((l)->dropped++ == 0)                                                                \
            TT_WARN("bootstrap rank %d: " fmt " (further refusals are logged at INFO)",         \
                    (l)->rank, __VA_ARGS__);                                                    \
        else                                                                                    \
            TT_INFO(TT_SUB_BOOTSTRAP, "bootstrap rank %d: " fmt, (l)->rank, __VA_ARGS__);       \
    } while (0)

static void drop_pending(struct tt_bs_listener *l, int i)
{
    tt_sock_close(&l->pending[i].fd);
    l->pending[i] = l->pending[--l->npending];
}

/* How readily a pending connection is evicted: one still without the job's tag first (blind
 * junk, or a rank's connection in the instant before its tag arrives, which then connects
 * again), then one past the gate, and a held hello last. */
static int keep_rank(const struct pending *p)
{
    return p->held ? 2 : p->open ? 1 : 0;
}

/* Closes the oldest pending connection of the lowest keep_rank, of those up to `max_keep`;
 * `why` says what needs the room. False when there is none to close. */
static bool drop_oldest_pending(struct tt_bs_listener *l, int max_keep, const char *why)
{
    int oldest = -1;
    for (int i = 0; i < l->npending; i++) {
        const struct pending *p = &l->pending[i], *o = oldest < 0 ? NULL : &l->pending[oldest];
        if (keep_rank(p) > max_keep) continue;
        if (o == NULL || keep_rank(p) < keep_rank(o) ||
            (keep_rank(p) == keep_rank(o) && p->deadline_ns < o->deadline_ns))
            oldest = i;
    }
    if (oldest < 0) return false;
    char who[TT_SOCK_ADDR_STR_BYTES];
    REFUSE_LOG(l, "%s; closing the oldest connection %s, from %s", why,
               l->pending[oldest].open ? "past the gate" : "without a tag",
               tt_sock_peer_str(l->pending[oldest].fd, who, sizeof who));
    drop_pending(l, oldest);
    return true;
}

/* Passes pending connection i through the gate as far as its bytes allow: challenged when its
 * tag is the job's, dropped when it is another (refused) or the connection failed. */
static void read_gate(struct tt_bs_listener *l, int i)
{
    struct pending *p = &l->pending[i];
    enum tt_bs_gate_step step = tt_bs_gate_read(p->fd, l->magic, &p->gate);
    if (step == TT_BS_GATE_WAIT) return;
    if (step == TT_BS_GATE_OPEN) {
        p->open = true;
        return;
    }
    if (p->gate.got == sizeof p->gate.tag) {
        char who[TT_SOCK_ADDR_STR_BYTES];
        REFUSE_LOG(l, "refusing the connection from %s: not this job's tag (another job, or "
                   "not a Tutti rank)", tt_sock_peer_str(p->fd, who, sizeof who));
    }
    drop_pending(l, i);
}

/* Accepts up to TT_BS_ACCEPT_BATCH queued connections and reads the tag of each that has
 * already sent it (a rank's comes right after its connect). */
static void accept_batch(struct tt_bs_listener *l)
{
    for (int batch = 0; batch < TT_BS_ACCEPT_BATCH; batch++) {
        int fd = accept4(l->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int err = errno;
            if (err == EINTR || err == ECONNABORTED) continue;
            if (err != EMFILE && err != ENFILE) return;
            /* Out of fds: make room by closing the oldest connection without the job's tag
             * (blind junk); one past the gate is most likely a peer's, and is kept. */
            char why[224];
            snprintf(why, sizeof why, "out of file descriptors: %s", tt_strerror(err));
            if (drop_oldest_pending(l, 0, why)) continue;
            /* Nothing to close: the connection stays queued (its rank's connect fails at
             * its handshake deadline), and the listening socket readable; a pause keeps the
             * poll loop from spinning until fds free up. */
            if (!l->warned_no_fds) {
                l->warned_no_fds = true;
                TT_WARN("bootstrap rank %d: %s; peers' connections wait until some are closed",
                        l->rank, why);
            }
            nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
            return;
        }
        if (l->npending == TT_BS_MAX_PENDING) {
            char why[64];
            snprintf(why, sizeof why, "%d connections wait for their tag or hello",
                     TT_BS_MAX_PENDING);
            drop_oldest_pending(l, 2, why);
        }
        struct pending *p = &l->pending[l->npending];
        memset(p, 0, sizeof *p);
        p->fd = fd;
        p->deadline_ns = tt_deadline_after_ms(l->handshake_ms);
        l->npending++;
        read_gate(l, l->npending - 1);
    }
}

/* A complete hello: file the connection, or close it. Returns true when filed. */
static bool file_hello(struct tt_bs_listener *l, struct pending *p)
{
    const struct tt_bs_peer_hello *h = &p->hello;
    char who[TT_SOCK_ADDR_STR_BYTES];
    uint8_t mac[TT_BS_MAC_BYTES];
    tt_bs_peer_hello_mac(l->secret, l->session, p->gate.challenge, h, mac);
    if (h->magic != l->magic || !tt_bs_mac_equal(mac, h->mac)) {
        REFUSE_LOG(l, "closing the connection from %s: wrong magic or failed authentication "
                   "(another job, or a replayed hello?)", tt_sock_peer_str(p->fd, who, sizeof who));
        return false;
    }
    int src = h->from_rank;
    int prev = (l->rank + l->nranks - 1) % l->nranks;
    if (src < 0 || src >= l->nranks || h->to_rank != l->rank ||
        (h->kind == TT_BS_CONN_RING && src != prev) ||
        (h->kind != TT_BS_CONN_RING && h->kind != TT_BS_CONN_P2P)) {
        REFUSE_LOG(l, "closing the connection from %s: an authenticated hello of kind %u from "
                   "rank %d to rank %d, which this rank does not expect",
                   tt_sock_peer_str(p->fd, who, sizeof who), (unsigned)h->kind, src,
                   (int)h->to_rank);
        return false;
    }
    pthread_mutex_lock(&l->lock);
    int *slot = h->kind == TT_BS_CONN_RING ? &l->ring_fd : &l->p2p_fd[src];
    bool free_slot = *slot == -1;
    if (free_slot) {
        *slot = p->fd;
        pthread_cond_broadcast(&l->filed);
    }
    pthread_mutex_unlock(&l->lock);
    if (!free_slot) {
        REFUSE_LOG(l, "closing a second %s connection from rank %d (%s)",
                   h->kind == TT_BS_CONN_RING ? "ring" : "p2p", src,
                   tt_sock_peer_str(p->fd, who, sizeof who));
        return false;
    }
    TT_TRACE(TT_SUB_BOOTSTRAP, "bootstrap rank %d: accepted %s connection from rank %d",
             l->rank, h->kind == TT_BS_CONN_RING ? "ring" : "p2p", src);
    return true;
}

/* Reads what has arrived of pending connection i: its tag, then its hello; files or drops the
 * hello when complete, or holds it while the session is not known (a hello without the job's
 * magic is dropped at once). */
static void read_peer_hello(struct tt_bs_listener *l, int i)
{
    struct pending *p = &l->pending[i];
    if (!p->open) {
        read_gate(l, i);
        return;
    }
    if (tt_sock_recv_some(p->fd, &p->hello, sizeof p->hello, &p->got) != ncclSuccess) {
        drop_pending(l, i);
        return;
    }
    if (p->got < sizeof p->hello) return;
    if (p->hello.magic == l->magic &&
        !atomic_load_explicit(&l->have_session, memory_order_acquire)) {
        p->held = true;
        return;
    }
    if (file_hello(l, p)) p->fd = -1; /* now the slot's */
    drop_pending(l, i);
}

/* The session is known: files or drops every held hello. */
static void check_held(struct tt_bs_listener *l)
{
    for (int i = l->npending - 1; i >= 0; i--) {
        struct pending *p = &l->pending[i];
        if (!p->held) continue;
        if (file_hello(l, p)) p->fd = -1;
        drop_pending(l, i);
    }
}

static void *listener_main(void *arg)
{
    struct tt_bs_listener *l = arg;
    struct pollfd pfds[2 + TT_BS_MAX_PENDING];
    int which[2 + TT_BS_MAX_PENDING];
    for (;;) {
        for (int i = l->npending - 1; i >= 0; i--) {
            if (l->pending[i].held || !tt_deadline_passed(l->pending[i].deadline_ns)) continue;
            char who[TT_SOCK_ADDR_STR_BYTES];
            REFUSE_LOG(l, "closing the connection from %s: no hello within %lld ms "
                       "(TUTTI_HANDSHAKE_MS)", tt_sock_peer_str(l->pending[i].fd, who, sizeof who),
                       (long long)l->handshake_ms);
            drop_pending(l, i);
        }
        int n = 0;
        pfds[n++] = (struct pollfd){.fd = l->wake_fd, .events = POLLIN};
        pfds[n++] = (struct pollfd){.fd = l->listen_fd, .events = POLLIN};
        uint64_t next_ns = TT_NO_DEADLINE;
        for (int i = 0; i < l->npending; i++) {
            if (l->pending[i].held) continue;
            which[n] = i;
            pfds[n++] = (struct pollfd){.fd = l->pending[i].fd, .events = POLLIN};
            if (l->pending[i].deadline_ns < next_ns) next_ns = l->pending[i].deadline_ns;
        }
        if (poll(pfds, (nfds_t)n, tt_deadline_left_ms(next_ns, 1000)) < 0 && errno != EINTR) {
            /* Never a silent stop: the rank's waits learn of it (tt_bs_listener_take). */
            TT_WARN("bootstrap rank %d: the listener stops: poll failed: %s", l->rank,
                    strerror(errno));
            break;
        }
        if (pfds[0].revents & POLLIN) {
            uint64_t count;
            ssize_t got = read(l->wake_fd, &count, sizeof count);
            (void)got; /* nonblocking: a concurrent read cannot exist, an empty one is harmless */
            if (atomic_load(&l->stopping)) return NULL;
            if (atomic_load_explicit(&l->have_session, memory_order_acquire)) check_held(l);
            continue;
        }
        if (pfds[0].revents != 0 || (pfds[1].revents & POLLNVAL)) {
            TT_WARN("bootstrap rank %d: the listener stops: its %s is no longer valid", l->rank,
                    pfds[0].revents != 0 ? "wake-up fd" : "listening socket");
            break;
        }
        /* Highest index first: drop() moves the last entry into the hole, already visited. */
        for (int k = n - 1; k >= 2; k--)
            if (pfds[k].revents != 0) read_peer_hello(l, which[k]);
        if (pfds[1].revents != 0) accept_batch(l);
    }
    atomic_store(&l->ended, true);
    pthread_mutex_lock(&l->lock);
    pthread_cond_broadcast(&l->filed);
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

ncclResult_t tt_bs_listener_start(int listen_fd, int rank, int nranks, uint64_t magic,
                                  const uint8_t secret[32], struct tt_bs_listener **out)
{
    ncclResult_t res = ncclSuccess;
    struct tt_bs_listener *l = NULL;
    *out = NULL;
    TT_TRY(TT_CALLOC(&l, 1));
    l->listen_fd = listen_fd;
    l->rank = rank;
    l->nranks = nranks;
    l->magic = magic;
    memcpy(l->secret, secret, sizeof l->secret);
    l->handshake_ms = tt_param_handshake_ms();
    l->ring_fd = -1;
    pthread_mutex_init(&l->lock, NULL);
    /* Waits are bounded by monotonic deadlines (util/time.h). */
    pthread_condattr_t cattr;
    pthread_condattr_init(&cattr);
    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
    pthread_cond_init(&l->filed, &cattr);
    pthread_condattr_destroy(&cattr);
    l->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (l->wake_fd < 0) {
        res = TT_ERROR(ncclSystemError, "bootstrap listener: eventfd failed: %s",
                       tt_strerror(errno));
        goto fail;
    }
    TT_TRY_GOTO(TT_CALLOC(&l->p2p_fd, (size_t)nranks), res, fail);
    for (int r = 0; r < nranks; r++) l->p2p_fd[r] = -1;
    /* A small stack: the thread's frames hold the poll set and little else. */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 << 10);
    int err = pthread_create(&l->thread, &attr, listener_main, l);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        res = TT_ERROR(ncclSystemError, "cannot start the bootstrap listener thread: %s",
                       strerror(err));
        goto fail;
    }
    l->started = true;
    *out = l;
    return ncclSuccess;
fail:
    tt_bs_listener_stop(l);
    return res;
}

void tt_bs_listener_set_session(struct tt_bs_listener *l, const uint8_t session[TT_BS_NONCE_BYTES])
{
    memcpy(l->session, session, sizeof l->session);
    atomic_store_explicit(&l->have_session, true, memory_order_release);
    uint64_t one = 1;
    ssize_t n = write(l->wake_fd, &one, sizeof one);
    (void)n; /* an eventfd write of 1 cannot fail short of overflow */
}

void tt_bs_listener_stop(struct tt_bs_listener *l)
{
    if (l == NULL) return;
    if (l->started) {
        atomic_store(&l->stopping, true);
        uint64_t one = 1;
        ssize_t n = write(l->wake_fd, &one, sizeof one);
        (void)n; /* an eventfd write of 1 cannot fail short of overflow */
        pthread_join(l->thread, NULL);
    }
    for (int i = 0; i < l->npending; i++) tt_sock_close(&l->pending[i].fd);
    if (l->ring_fd >= 0) tt_sock_close(&l->ring_fd);
    for (int r = 0; l->p2p_fd != NULL && r < l->nranks; r++)
        if (l->p2p_fd[r] >= 0) tt_sock_close(&l->p2p_fd[r]);
    if (l->wake_fd >= 0) close(l->wake_fd);
    pthread_cond_destroy(&l->filed);
    pthread_mutex_destroy(&l->lock);
    free(l->p2p_fd);
    sodium_memzero(l->secret, sizeof l->secret); /* freed memory keeps no secret */
    free(l);
}

ncclResult_t tt_bs_listener_take(struct tt_bs_listener *l, enum tt_bs_conn_kind kind, int from,
                                 uint64_t wait_until_ns, int *fd_out)
{
    *fd_out = -1;
    if (kind == TT_BS_CONN_P2P && (from < 0 || from >= l->nranks))
        return TT_ERROR(ncclInternalError, "bootstrap listener: no rank %d", from);
    pthread_mutex_lock(&l->lock);
    int *slot = kind == TT_BS_CONN_RING ? &l->ring_fd : &l->p2p_fd[from];
    if (*slot == -1 && wait_until_ns != TT_NO_DEADLINE) {
        struct timespec until = {.tv_sec = (time_t)(wait_until_ns / 1000000000ull),
                                 .tv_nsec = (long)(wait_until_ns % 1000000000ull)};
        pthread_cond_timedwait(&l->filed, &l->lock, &until);
    }
    if (*slot >= 0) {
        *fd_out = *slot;
        *slot = SLOT_TAKEN;
    }
    pthread_mutex_unlock(&l->lock);
    if (*fd_out < 0 && atomic_load(&l->ended))
        return TT_ERROR(ncclSystemError, "bootstrap rank %d: the listener thread stopped (see "
                        "the warning before); no connection can reach this rank", l->rank);
    return ncclSuccess;
}
