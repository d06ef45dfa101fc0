/* libFuzzer harness for the bootstrap's message checks: the root's check of a rank's hello
 * (root.c: admit and check_hello, two hellos in a row so that the checks between ranks run,
 * a withdrawal among them when the hello's `failed` word is not 0), a
 * rank listener's check of a peer hello (listener.c: file_hello), the decoding of wire
 * addresses and unique ids (auth.c), and the gate's reading of a connection's first bytes
 * (gate.c, over a socket pair, in pieces as they may arrive). A flag byte makes the harness give a hello the job's magic
 * and a valid MAC, which a stranger cannot, so that the checks behind authentication are
 * reached too: what an authenticated but buggy or malicious rank may send must not crash or
 * exhaust the root either. It includes root.c and listener.c for their static functions
 * (tests/fuzz/run.sh leaves them out of the library it links: "fuzz-includes" below).
 * fuzz-includes: src/bootstrap/root.c src/bootstrap/listener.c */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/bootstrap/listener.c"
#include "../../src/bootstrap/root.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t secret[32] = {7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
                                   7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7};
#define MAGIC 0x1122334455667788ull

/* Copies up to `bytes` from the input (zeros past its end). */
static void take(const uint8_t **data, size_t *size, void *out, size_t bytes)
{
    size_t n = *size < bytes ? *size : bytes;
    memset(out, 0, bytes);
    memcpy(out, *data, n);
    *data += n;
    *size -= n;
}

/* A sink for replies: sends to it fail (not a socket), as to a vanished rank. */
static int sink(void)
{
    return open("/dev/null", O_RDWR | O_CLOEXEC);
}

static void fuzz_root(uint8_t flags, const uint8_t **data, size_t *size)
{
    struct root root;
    memset(&root, 0, sizeof root);
    root.id.version = TT_UNIQUE_ID_VERSION;
    root.id.magic = MAGIC;
    memcpy(root.id.secret, secret, sizeof secret);
    snprintf(root.addr_text, sizeof root.addr_text, "fuzz");
    root.conns_cap = 2;
    root.conns = calloc(2, sizeof *root.conns);
    for (int k = 0; k < 2 && root.conns != NULL; k++) {
        struct root_conn *c = &root.conns[root.nconns];
        memset(c, 0, sizeof *c);
        c->fd = sink();
        c->state = CONN_HELLO;
        take(data, size, c->gate.challenge, sizeof c->gate.challenge);
        take(data, size, &c->hello, sizeof c->hello);
        snprintf(c->peer, sizeof c->peer, "fuzz peer %d", k);
        if (flags & (1u << k)) {
            c->hello.magic = MAGIC;
            c->hello.version = TT_UNIQUE_ID_VERSION;
            tt_bs_mac(secret, c->gate.challenge, sizeof c->gate.challenge, &c->hello,
                      offsetof(struct tt_bs_root_hello, mac), c->hello.mac);
        }
        c->got = sizeof c->hello;
        root.nconns++;
        (void)admit(&root, root.nconns - 1);
    }
    if (root.nranks > 0 && (flags & 4)) {
        char missing[200];
        format_missing(&root, missing, sizeof missing);
    }
    for (int i = 0; i < root.nconns; i++) tt_sock_close(&root.conns[i].fd);
    free(root.conns);
    free(root.rank_conn);
    free(root.accounted_rank);
}

static void fuzz_listener(uint8_t flags, const uint8_t **data, size_t *size)
{
    static struct tt_bs_listener l;
    static bool ready;
    if (!ready) {
        pthread_mutex_init(&l.lock, NULL);
        pthread_cond_init(&l.filed, NULL);
        ready = true;
    }
    uint8_t shape[2];
    take(data, size, shape, sizeof shape);
    l.nranks = 1 + shape[0] % 64;
    l.rank = shape[1] % l.nranks;
    l.magic = MAGIC;
    memcpy(l.secret, secret, sizeof secret);
    take(data, size, l.session, sizeof l.session);
    l.ring_fd = -1;
    l.p2p_fd = calloc((size_t)l.nranks, sizeof *l.p2p_fd);
    if (l.p2p_fd == NULL) return;
    for (int r = 0; r < l.nranks; r++) l.p2p_fd[r] = -1;
    for (int k = 0; k < 2; k++) {
        struct pending p;
        memset(&p, 0, sizeof p);
        p.fd = sink();
        take(data, size, p.gate.challenge, sizeof p.gate.challenge);
        take(data, size, &p.hello, sizeof p.hello);
        if (flags & (8u << k)) {
            p.hello.magic = MAGIC;
            tt_bs_peer_hello_mac(secret, l.session, p.gate.challenge, &p.hello, p.hello.mac);
        }
        p.got = sizeof p.hello;
        if (!file_hello(&l, &p)) tt_sock_close(&p.fd);
    }
    if (l.ring_fd >= 0) tt_sock_close(&l.ring_fd);
    for (int r = 0; r < l.nranks; r++)
        if (l.p2p_fd[r] >= 0) tt_sock_close(&l.p2p_fd[r]);
    free(l.p2p_fd);
    l.p2p_fd = NULL;
}

/* The gate reads a tag that arrives in pieces (the input's first byte cuts it), or the job's
 * tag when flag 0x40 is set, and must challenge exactly the job's tag and refuse any other. */
static void fuzz_gate(uint8_t flags, const uint8_t **data, size_t *size)
{
    uint8_t cut = 0;
    struct tt_bs_tag tag;
    take(data, size, &cut, 1);
    take(data, size, &tag, sizeof tag);
    if (flags & 0x40) tag.magic = MAGIC;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return;
    struct tt_bs_gate g;
    memset(&g, 0, sizeof g);
    size_t first = cut % (sizeof tag + 1);
    enum tt_bs_gate_step step = TT_BS_GATE_WAIT;
    if (send(sv[0], &tag, first, MSG_NOSIGNAL) == (ssize_t)first) {
        step = tt_bs_gate_read(sv[1], MAGIC, &g);
        if (first < sizeof tag && step != TT_BS_GATE_WAIT) abort();
        if (first < sizeof tag &&
            send(sv[0], (uint8_t *)&tag + first, sizeof tag - first, MSG_NOSIGNAL) ==
                (ssize_t)(sizeof tag - first))
            step = tt_bs_gate_read(sv[1], MAGIC, &g);
    }
    struct tt_bs_challenge ch;
    if (step != TT_BS_GATE_WAIT) {
        if (recv(sv[0], &ch, sizeof ch, MSG_DONTWAIT) != (ssize_t)sizeof ch) abort();
        bool ours = tag.magic == MAGIC;
        if ((step == TT_BS_GATE_OPEN) != ours) abort();
        if (ch.status != (ours ? TT_BS_CHALLENGE : TT_BS_REFUSED)) abort();
        if (ours && memcmp(ch.nonce, g.challenge, sizeof ch.nonce) != 0) abort();
    }
    close(sv[0]);
    close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t flags = 0;
    take(&data, &size, &flags, 1);
    fuzz_root(flags, &data, &size);
    fuzz_listener(flags, &data, &size);
    struct tt_bs_wire_addr wire;
    struct sockaddr_storage addr;
    take(&data, &size, &wire, sizeof wire);
    (void)tt_bs_addr_from_wire(&wire, "fuzz", &addr);
    struct tt_unique_id id;
    take(&data, &size, &id, sizeof id);
    (void)tt_bs_id_addr(&id, &addr);
    fuzz_gate(flags, &data, &size);
    return 0;
}
