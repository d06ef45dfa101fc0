/* The gate every bootstrap connection passes before anyone proves anything: the connecting side
 * sends the job's tag (its magic) as soon as the connection is up, without waiting for a word,
 * and the listener answers it with a fresh challenge when it is the job's tag and with a
 * refusal otherwise.
 *
 * Why: a listener keeps a bounded number of unproven connections and must evict some under a
 * flood. The tag lets it evict blind junk (no tag yet, or a partial one) and never a connection
 * of its job, which would otherwise be lost whenever the connecting rank, descheduled between
 * the challenge and its hello, let TT_BS_MAX_PENDING newer connections arrive first. What the
 * tag cannot cover is the moment between the accept and the tag's arrival; a connection evicted
 * then is closed before its answer, which the connector recognises and repairs by connecting
 * again. A refusal says "not this job" at once, so a rank with a stale id or another secret
 * fails fast instead of retrying; it holds nothing derived from the secret. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/proto.h"
#include "util/err.h"
#include "util/log.h"
#include "util/sock.h"
#include "util/time.h"

/* The connector's pause before it connects again after an eviction: short, since a flooded
 * listener makes room fast, and growing, so that a listener that closes every connection (not
 * a Tutti bootstrap) is not hammered. */
#define GATE_RETRY_FIRST_MS 1
#define GATE_RETRY_MAX_MS 64

enum tt_bs_gate_step tt_bs_gate_read(int fd, uint64_t magic, struct tt_bs_gate *g)
{
    while (g->got < sizeof g->tag) {
        ssize_t n = recv(fd, (uint8_t *)&g->tag + g->got, sizeof g->tag - g->got, MSG_DONTWAIT);
        if (n > 0) {
            g->got += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return TT_BS_GATE_WAIT;
        return TT_BS_GATE_SHUT; /* closed, or reset */
    }
    struct tt_bs_challenge ch;
    memset(&ch, 0, sizeof ch);
    bool ours = g->tag.magic == magic;
    if (ours) {
        if (tt_bs_random(g->challenge, sizeof g->challenge) != ncclSuccess) return TT_BS_GATE_SHUT;
        ch.status = TT_BS_CHALLENGE;
        memcpy(ch.nonce, g->challenge, sizeof ch.nonce);
    } else {
        ch.status = TT_BS_REFUSED;
    }
    /* 24 bytes into a socket that has sent nothing back yet: all or nothing. */
    if (send(fd, &ch, sizeof ch, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof ch)
        return TT_BS_GATE_SHUT;
    return ours ? TT_BS_GATE_OPEN : TT_BS_GATE_SHUT;
}

/* How one attempt at the gate ended. */
enum attempt { ATTEMPT_OPEN, ATTEMPT_CLOSED, ATTEMPT_REFUSED, ATTEMPT_BAD, ATTEMPT_EXPIRED };

/* Sends the tag on a fresh connection and reads the 24-byte answer. Reports nothing: the
 * caller decides what a closed connection means. */
static enum attempt knock(int fd, uint64_t magic, uint64_t deadline_ns, const _Atomic int *abort,
                          struct tt_bs_challenge *ch)
{
    struct tt_bs_tag tag = {.magic = magic};
    /* 8 bytes into a fresh socket's empty buffer: all or nothing. */
    if (send(fd, &tag, sizeof tag, MSG_NOSIGNAL) != (ssize_t)sizeof tag) return ATTEMPT_CLOSED;
    size_t got = 0;
    while (got < sizeof *ch) {
        ssize_t n = recv(fd, (uint8_t *)ch + got, sizeof *ch - got, MSG_DONTWAIT);
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        if (n == 0) return ATTEMPT_CLOSED;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return ATTEMPT_CLOSED;
        if ((abort != NULL && atomic_load(abort)) || tt_deadline_passed(deadline_ns))
            return ATTEMPT_EXPIRED;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        (void)poll(&p, 1, tt_deadline_left_ms(deadline_ns, TT_SOCK_POLL_SLICE_MS));
    }
    if (ch->status == TT_BS_REFUSED) return ATTEMPT_REFUSED;
    return ch->status == TT_BS_CHALLENGE ? ATTEMPT_OPEN : ATTEMPT_BAD;
}

ncclResult_t tt_bs_gate_enter(const struct sockaddr_storage *addr, uint64_t magic,
                              uint64_t deadline_ns, const _Atomic int *abort, const char *who,
                              bool listening, int *fd_out, uint8_t challenge[TT_BS_NONCE_BYTES])
{
    const struct tt_sock_connect_how how = {.published = listening, .who = who};
    char text[TT_SOCK_ADDR_STR_BYTES];
    unsigned pause_ms = GATE_RETRY_FIRST_MS;
    int closed = 0;
    *fd_out = -1;
    tt_sock_addr_str(addr, text, sizeof text);
    for (;;) {
        int fd = -1;
        struct tt_bs_challenge ch;
        TT_TRY(tt_sock_connect_how(addr, deadline_ns, abort, &how, &fd));
        enum attempt a = knock(fd, magic, deadline_ns, abort, &ch);
        if (a == ATTEMPT_OPEN) {
            memcpy(challenge, ch.nonce, TT_BS_NONCE_BYTES);
            *fd_out = fd;
            if (closed > 0)
                TT_INFO(TT_SUB_BOOTSTRAP, "%s at %s: in after %d connections were closed "
                        "before their challenge", who, text, closed);
            return ncclSuccess;
        }
        close(fd);
        if (a == ATTEMPT_REFUSED)
            return TT_ERROR(ncclInvalidUsage, "%s at %s refused this rank's job tag: it serves "
                            "another job (a stale unique id, or ranks with different "
                            "NCCL_COMM_ID or TUTTI_SECRET?)", who, text);
        if (a == ATTEMPT_BAD)
            return TT_ERROR(ncclRemoteError, "%s at %s did not answer with a bootstrap "
                            "challenge (is it a Tutti bootstrap listener?)", who, text);
        if (a == ATTEMPT_CLOSED) {
            /* Closed before its answer: evicted by a flooded listener before it read the
             * tag. Connect again after a pause (never past the deadline). */
            closed++;
            TT_TRACE(TT_SUB_BOOTSTRAP, "%s at %s closed the connection before its challenge; "
                     "connecting again", who, text);
            struct timespec ts = {0, (long)tt_deadline_left_ms(deadline_ns, (int)pause_ms) *
                                         1000000L};
            nanosleep(&ts, NULL);
            if (pause_ms < GATE_RETRY_MAX_MS) pause_ms *= 2;
        }
        if (abort != NULL && atomic_load(abort))
            return TT_ERROR(ncclSystemError, "connecting to %s at %s: aborted", who, text);
        if (tt_deadline_passed(deadline_ns))
            return TT_ERROR(ncclSystemError, "%s at %s: no challenge before the deadline "
                            "(TUTTI_TIMEOUT_MS)%s", who, text, closed > 0 ?
                            "; every connection was closed before its challenge (a flooded "
                            "listener, or not a Tutti bootstrap listener?)" : "");
    }
}
