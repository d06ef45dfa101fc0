/* Attacks on the bootstrap's authentication by a stranger without the job's secret, against a
 * live 2-rank job, which must go on unaffected (its allgathers, barriers and all-pairs messages
 * checked byte for byte afterwards).
 *
 *   observe   what a root sends before the stranger proves anything, for jobs with different
 *             secrets alike: nothing to a connection that sends nothing; to one that sends a
 *             guessed tag, the same fixed 24-byte refusal; to one that sends the job's tag (an
 *             eavesdropper's), 8 zero bytes and a 16-byte nonce, fresh on every connection;
 *             then nothing more: nothing to test a guess against.
 *   join      N hellos to the root for a free rank, MAC'd under a guessed secret;
 *   replay    N replays of rank 0's genuine hello to the root, as recorded on the wire, as is
 *             and edited to claim rank 1;
 *   peer      N peer hellos to rank 0's listener under a guessed secret, claiming rank 1, and
 *             N replays of rank 1's genuine ring hello to rank 0, as is and edited (p2p kind).
 *
 * The attempts below pass the gate with the job's tag (the magic, which an eavesdropper sees on
 * the wire); every one must then be closed without a reply. The wire is recorded with an AF_PACKET socket
 * on the loopback interface (needs CAP_NET_RAW); without it the replays are skipped and said so.
 * `test_auth N` (N attempts of each kind). */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* A library call that must succeed; its last error says why it did not. */
#define CHECK_OK_AUTH(expr)                                                                     \
    do {                                                                                        \
        ncclResult_t res_ = (expr);                                                             \
        if (res_ != ncclSuccess) {                                                              \
            FAIL("%s: got %d (%s)", #expr, (int)res_, tt_error_last());                         \
            return 1;                                                                           \
        }                                                                                       \
    } while (0)

/* ---- the wire recorder -------------------------------------------------------------------- */

struct recorded {
    uint16_t dport;
    size_t bytes;
    uint8_t data[TT_BS_REPLY_TEXT_BYTES + 128];
};

#define MAX_RECORDED 4096
static struct recorded recorded[MAX_RECORDED];
static int nrecorded;
static int capture_fd = -1;

static void capture_open(void)
{
    capture_fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_IP));
    if (capture_fd < 0) return;
    struct sockaddr_ll ll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP),
                             .sll_ifindex = (int)if_nametoindex("lo")};
    int big = 16 << 20;
    /* The recorder sees all loopback traffic, other jobs' bulk transfers included: a buffer
     * beyond rmem_max (SO_RCVBUFFORCE, root) keeps the hellos from being dropped under it, and
     * the recording is drained as soon as each hello was sent. */
    if (setsockopt(capture_fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) != 0)
        setsockopt(capture_fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    /* And a filter in the kernel keeps only IP packets whose total length (at offset 16,
     * after loopback's 14-byte link header) is 80..200 bytes: a hello is 40 or 80 bytes of
     * payload behind 40 to 80 of headers, and neither other tests' bulk segments nor their
     * pure acknowledgements (52 bytes) reach the buffer. */
    struct sock_filter small_only[] = {
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 16),
        BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 200, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 80, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, 65535),
        BPF_STMT(BPF_RET | BPF_K, 0),
    };
    struct sock_fprog prog = {.len = sizeof small_only / sizeof small_only[0],
                              .filter = small_only};
    (void)setsockopt(capture_fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog);
    if (bind(capture_fd, (struct sockaddr *)&ll, sizeof ll) != 0) {
        close(capture_fd);
        capture_fd = -1;
    }
}

/* Keeps the TCP payloads of 40 and 80 bytes seen on loopback (peer and root hellos). */
static void capture_drain(void)
{
    uint8_t pkt[65536];
    for (;;) {
        struct sockaddr_ll from;
        socklen_t len = sizeof from;
        ssize_t n = recvfrom(capture_fd, pkt, sizeof pkt, 0, (struct sockaddr *)&from, &len);
        if (n <= 0) return;
        if (from.sll_pkttype == PACKET_OUTGOING) continue; /* loopback shows each packet twice */
        size_t off = from.sll_hatype == 772 /* ARPHRD_LOOPBACK */ ? 14 : 0;
        if ((size_t)n < off + sizeof(struct iphdr)) continue;
        /* Copied out: the headers sit at any alignment in the packet buffer. */
        struct iphdr ip_copy, *ip = &ip_copy;
        memcpy(ip, pkt + off, sizeof *ip);
        if (ip->protocol != IPPROTO_TCP) continue;
        size_t ip_bytes = (size_t)ip->ihl * 4;
        if ((size_t)n < off + ip_bytes + sizeof(struct tcphdr)) continue;
        struct tcphdr tcp_copy, *tcp = &tcp_copy;
        memcpy(tcp, pkt + off + ip_bytes, sizeof *tcp);
        size_t hdr = off + ip_bytes + (size_t)tcp->doff * 4;
        size_t total = off + ntohs(ip->tot_len);
        if (total > (size_t)n || hdr > total) continue;
        size_t payload = total - hdr;
        if ((payload != sizeof(struct tt_bs_peer_hello) &&
             payload != sizeof(struct tt_bs_root_hello)) || nrecorded == MAX_RECORDED)
            continue;
        struct recorded *r = &recorded[nrecorded++];
        r->dport = ntohs(tcp->dest);
        r->bytes = payload;
        memcpy(r->data, pkt + hdr, payload);
    }
}

static const struct recorded *find_recorded(uint16_t dport, size_t bytes)
{
    capture_drain();
    for (int i = 0; i < nrecorded; i++)
        if (recorded[i].dport == dport && recorded[i].bytes == bytes) return &recorded[i];
    return NULL;
}

/* ---- the stranger ------------------------------------------------------------------------- */

static int connect_to(const struct sockaddr_storage *addr)
{
    int fd = -1;
    if (tt_sock_connect(addr, tt_deadline_after_ms(5000), NULL, &fd) != ncclSuccess) return -1;
    return fd;
}

/* The job's tag, which the attacks send to pass the gate. */
static uint64_t job_tag;

/* Sends a tag and reads what the listener answers before anything is proved (24 bytes: a
 * challenge or a refusal). */
static bool read_challenge(int fd, uint64_t tag, struct tt_bs_challenge *ch)
{
    struct tt_bs_tag t = {.magic = tag};
    return tt_sock_send_all(fd, &t, sizeof t, tt_deadline_after_ms(5000), NULL) == ncclSuccess &&
           tt_sock_recv_all(fd, ch, sizeof *ch, tt_deadline_after_ms(5000), NULL) == ncclSuccess;
}

/* True when the listener closes `fd` without sending a byte more (within 5 s). */
static bool closed_without_reply(int fd)
{
    uint8_t b;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 5000) <= 0) return false;
    ssize_t n = recv(fd, &b, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* One attempt: connect, take the challenge, send `msg`, expect to be closed without reply. */
static void attempt(const struct sockaddr_storage *addr, const void *msg, size_t bytes,
                    const char *what, int k)
{
    struct tt_bs_challenge ch;
    int fd = connect_to(addr);
    if (fd < 0 || !read_challenge(fd, job_tag, &ch) || ch.status != TT_BS_CHALLENGE) {
        FAIL("%s attempt %d: no challenge from the listener", what, k);
        if (fd >= 0) close(fd);
        return;
    }
    if (tt_sock_send_all(fd, msg, bytes, tt_deadline_after_ms(5000), NULL) == ncclSuccess &&
        !closed_without_reply(fd))
        FAIL("%s attempt %d: the listener did not close the connection without a reply", what,
             k);
    close(fd);
}

/* Fills `mac` with a MAC under a guessed secret. */
static void guess_mac(const void *msg, size_t bytes, uint8_t mac[TT_BS_MAC_BYTES])
{
    uint8_t guess[32], nonce[TT_BS_NONCE_BYTES];
    for (size_t i = 0; i < sizeof guess; i++) guess[i] = (uint8_t)rand();
    for (size_t i = 0; i < sizeof nonce; i++) nonce[i] = (uint8_t)rand();
    tt_bs_mac(guess, nonce, sizeof nonce, msg, bytes, mac);
}

/* ---- the job ------------------------------------------------------------------------------ */

/* A rank: joins, reports its listen port on fd 3, waits for a byte on fd 4, then exchanges and
 * checks data with the other rank. */
static int rank_main(const ncclUniqueId *id, int rank)
{
    struct tt_bootstrap *bs = NULL;
    static const _Atomic int no_abort = 0;
    check_rank = rank;
    tt_log_set_rank(rank);
    ncclResult_t res = tt_bootstrap_create(id, rank, 2, &no_abort, &bs);
    if (res != ncclSuccess) {
        FAIL("tt_bootstrap_create: %s", tt_error_last());
        return 1;
    }
    dprintf(3, "%u\n", (unsigned)tt_sock_addr_port(tt_bootstrap_listen_addr(bs)));
    char go;
    if (read(4, &go, 1) != 1) return 1;
    /* The job after the attacks: an allgather, a barrier, messages both ways. */
    uint32_t all[2] = {0, 0};
    all[rank] = 0x1000u + (uint32_t)rank;
    if (tt_bootstrap_allgather(bs, all, sizeof all[0]) != ncclSuccess)
        FAIL("allgather: %s", tt_error_last());
    CHECK_EQ_MSG(all[0], 0x1000u, "allgather block 0");
    CHECK_EQ_MSG(all[1], 0x1001u, "allgather block 1");
    uint8_t msg[1000], got[1000];
    for (size_t i = 0; i < sizeof msg; i++) msg[i] = (uint8_t)(i * 7 + (size_t)rank);
    if (tt_bootstrap_send(bs, 1 - rank, 5, msg, sizeof msg) != ncclSuccess ||
        tt_bootstrap_recv(bs, 1 - rank, 5, got, sizeof got) != ncclSuccess)
        FAIL("send/recv: %s", tt_error_last());
    for (size_t i = 0; i < sizeof got; i++)
        if (got[i] != (uint8_t)(i * 7 + (size_t)(1 - rank))) {
            FAIL("message byte %zu: got %u want %u", i, got[i], (uint8_t)(i * 7 + (1 - rank)));
            break;
        }
    if (tt_bootstrap_barrier(bs) != ncclSuccess) FAIL("barrier: %s", tt_error_last());
    tt_bootstrap_destroy(bs);
    return check_failures != 0;
}

static pid_t spawn_rank(const ncclUniqueId *id, int rank, int port_fd, int go_fd)
{
    char hex[2 * sizeof(ncclUniqueId) + 1], r[8];
    for (size_t i = 0; i < sizeof *id; i++)
        sprintf(hex + 2 * i, "%02x", ((const uint8_t *)id)[i]);
    snprintf(r, sizeof r, "%d", rank);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(port_fd, 3);
        dup2(go_fd, 4);
        execl("/proc/self/exe", "test_auth", "rank", r, hex, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static unsigned read_port(FILE *f)
{
    unsigned port = 0;
    if (fscanf(f, "%u", &port) != 1) FAIL("a rank did not report its listen port");
    return port;
}

/* ---- observe: the bytes before authentication ------------------------------------------- */

static int observe(void)
{
    /* Two jobs with different secrets (two ids); to each root 30 connections: 10 silent, 10
     * with a guessed tag, 10 with the job's tag. */
    enum { PER = 10 };
    uint8_t nonces[2 * PER][TT_BS_NONCE_BYTES];
    static const uint8_t zero_nonce[TT_BS_NONCE_BYTES];
    int n = 0, refusals = 0;
    for (int job = 0; job < 2; job++) {
        ncclUniqueId id;
        struct sockaddr_storage root;
        CHECK_OK_AUTH(tt_bootstrap_get_unique_id(&id));
        CHECK_OK_AUTH(tt_bs_id_addr((const struct tt_unique_id *)&id, &root));
        uint64_t magic = ((const struct tt_unique_id *)&id)->magic;
        /* All at once, so that waiting out TUTTI_HANDSHAKE_MS costs once. */
        int fds[3 * PER];
        for (int k = 0; k < 3 * PER; k++) fds[k] = connect_to(&root);
        for (int k = PER; k < 3 * PER; k++) {
            struct tt_bs_challenge ch;
            bool ours = k >= 2 * PER;
            uint64_t guess = ((uint64_t)rand() << 32) ^ (uint64_t)rand();
            if (fds[k] < 0 || !read_challenge(fds[k], ours ? magic : guess, &ch)) {
                FAIL("observe: no 24 bytes from the root of job %d", job);
                continue;
            }
            if (ours) {
                CHECK_EQ_MSG(ch.status, TT_BS_CHALLENGE, "the 8 bytes before the root's nonce");
                memcpy(nonces[n++], ch.nonce, sizeof ch.nonce);
            } else {
                CHECK_EQ_MSG(ch.status, TT_BS_REFUSED, "the root's answer to a guessed tag");
                CHECK_EQ_MSG(memcmp(ch.nonce, zero_nonce, sizeof zero_nonce), 0,
                             "the nonce of a refusal");
                refusals++;
            }
        }
        /* Nothing (more) comes until the stranger proves itself: a refused connection is
         * closed at once, the others at TUTTI_HANDSHAKE_MS. */
        for (int k = 0; k < 3 * PER; k++) {
            if (fds[k] < 0) continue;
            if (!closed_without_reply(fds[k]))
                FAIL("observe: the root sent more than %s", k < PER ? "nothing" : "24 bytes");
            close(fds[k]);
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (memcmp(nonces[i], nonces[j], TT_BS_NONCE_BYTES) == 0)
                FAIL("observe: connections %d and %d got the same nonce", i, j);
    printf("observe: to the roots of 2 jobs with different secrets, %d silent connections got "
           "nothing, %d with a guessed tag the same 24-byte refusal, %d with the job's tag 8 "
           "zero bytes and a distinct 16-byte nonce; then nothing\n", 2 * PER, refusals, n);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "rank") == 0) {
        ncclUniqueId id;
        for (size_t i = 0; i < sizeof id; i++) {
            unsigned v = 0;
            sscanf(argv[3] + 2 * i, "%2x", &v);
            ((uint8_t *)&id)[i] = (uint8_t)v;
        }
        return rank_main(&id, atoi(argv[2]));
    }
    int attempts = argc > 1 ? atoi(argv[1]) : 50;
    signal(SIGPIPE, SIG_IGN);
    srand((unsigned)getpid());
    setenv("NCCL_SOCKET_IFNAME", "=lo", 1);
    setenv("NCCL_SOCKET_FAMILY", "AF_INET", 1);
    setenv("TUTTI_HANDSHAKE_MS", "300", 1);
    setenv("TUTTI_TIMEOUT_MS", "120000", 1);
    tt_param_reload();

    if (observe() != 0) return 1;

    capture_open();
    if (capture_fd < 0)
        printf("no CAP_NET_RAW: the wire cannot be recorded, the replay attacks are skipped\n");
    int port_pipe[2], go_pipe[2];
    if (pipe(port_pipe) != 0 || pipe(go_pipe) != 0) return 1;
    FILE *ports = fdopen(port_pipe[0], "r");
    ncclUniqueId id;
    struct sockaddr_storage root, rank0;
    CHECK_OK_AUTH(tt_bootstrap_get_unique_id(&id));
    CHECK_OK_AUTH(tt_bs_id_addr((const struct tt_unique_id *)&id, &root));
    const struct tt_unique_id *tid = (const struct tt_unique_id *)&id;
    job_tag = tid->magic;
    pid_t pid0 = spawn_rank(&id, 0, port_pipe[1], go_pipe[0]);

    /* Rank 0 joins (its hello on the wire) before the fakes below, which the recorder must
     * not take for it; rank 1 has not, so the root still serves. With the recorder, until its
     * hello is seen (a loaded machine may start rank 0 late); without, 300 ms. */
    if (capture_fd < 0) usleep(300000);
    for (int waited = 0; capture_fd >= 0 && waited < 30000; waited += 10) {
        if (find_recorded(tt_sock_addr_port(&root), sizeof(struct tt_bs_root_hello)) != NULL)
            break;
        usleep(10000);
    }
    struct tt_bs_root_hello fake;
    memset(&fake, 0, sizeof fake);
    fake.magic = tid->magic; /* the magic is not secret: it only tells jobs apart */
    fake.version = TT_UNIQUE_ID_VERSION;
    fake.rank = 1;
    fake.nranks = 2;
    tt_bs_addr_to_wire(&root, &fake.listen_addr);
    for (int k = 0; k < attempts; k++) {
        guess_mac(&fake, offsetof(struct tt_bs_root_hello, mac), fake.mac);
        attempt(&root, &fake, sizeof fake, "join without the secret", k);
    }
    printf("join: %d hellos to the root under guessed secrets, all closed without a reply\n",
           attempts);
    const struct recorded *r0 = NULL;
    if (capture_fd >= 0) {
        r0 = find_recorded(tt_sock_addr_port(&root), sizeof(struct tt_bs_root_hello));
        if (r0 == NULL) FAIL("the recorder did not see rank 0's hello to the root");
    }
    if (r0 != NULL) {
        struct tt_bs_root_hello replay;
        memcpy(&replay, r0->data, sizeof replay);
        CHECK_EQ_MSG(replay.rank, 0, "rank field of the recorded hello");
        for (int k = 0; k < attempts; k++) {
            replay.rank = k % 2; /* as recorded, and edited to claim the free rank 1 */
            attempt(&root, &replay, sizeof replay, "replay to the root", k);
        }
        printf("replay: %d recorded hellos of rank 0 replayed to the root (half edited to claim "
               "rank 1), all closed without a reply\n", attempts);
    }

    /* Forget what the attacks put on the wire; keep the ring hellos to come. */
    if (capture_fd >= 0) capture_drain();
    nrecorded = 0;
    pid_t pid1 = spawn_rank(&id, 1, port_pipe[1], go_pipe[0]);
    close(port_pipe[1]);
    unsigned port_a = read_port(ports), port_b = read_port(ports);
    /* Which port is rank 0's: rank 1's ring hello went to it. */
    usleep(100000);
    const struct recorded *ring = NULL;
    unsigned port0 = port_a;
    if (capture_fd >= 0) {
        ring = find_recorded((uint16_t)port_a, sizeof(struct tt_bs_peer_hello));
        const struct recorded *other =
            find_recorded((uint16_t)port_b, sizeof(struct tt_bs_peer_hello));
        /* Each rank got one ring hello; the one from rank 1 says from_rank 1. */
        if (ring == NULL || ((const struct tt_bs_peer_hello *)ring->data)->from_rank != 1) {
            ring = other;
            port0 = port_b;
        }
        if (ring == NULL) FAIL("the recorder did not see rank 1's ring hello to rank 0");
    } else {
        /* Without the recorder either port will do: both are ranks of the job. */
    }
    tt_sock_addr_set_port(&root, (uint16_t)port0); /* same host: rank 0's listener */
    rank0 = root;

    struct tt_bs_peer_hello peer;
    memset(&peer, 0, sizeof peer);
    peer.magic = tid->magic;
    peer.kind = TT_BS_CONN_P2P;
    peer.from_rank = 1;
    peer.to_rank = 0;
    for (int k = 0; k < attempts; k++) {
        guess_mac(&peer, offsetof(struct tt_bs_peer_hello, mac), peer.mac);
        attempt(&rank0, &peer, sizeof peer, "peer hello without the secret", k);
    }
    printf("peer: %d p2p hellos claiming rank 1 to a rank's listener under guessed secrets, all "
           "closed without a reply\n", attempts);
    if (ring != NULL) {
        struct tt_bs_peer_hello replay;
        memcpy(&replay, ring->data, sizeof replay);
        for (int k = 0; k < attempts; k++) {
            replay.kind = k % 2 ? TT_BS_CONN_P2P : TT_BS_CONN_RING;
            attempt(&rank0, &replay, sizeof replay, "replayed peer hello", k);
        }
        printf("peer replay: %d recorded ring hellos of rank 1 replayed to rank 0 (half edited "
               "to p2p), all closed without a reply\n", attempts);
    }

    /* The job goes on. */
    if (write(go_pipe[1], "gg", 2) != 2) return 1;
    int bad = 0;
    for (int i = 0; i < 2; i++) {
        int status = 0;
        pid_t pid = wait(&status);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            FAIL("rank process %d (%s) ended with status 0x%x", (int)pid,
                 pid == pid0 ? "rank 0" : pid == pid1 ? "rank 1" : "?", status);
            bad++;
        }
    }
    if (bad == 0) printf("the job then ran its allgather, messages and barrier unaffected\n");
    printf("%s\n", check_failures ? "FAILED" : "PASSED");
    return check_failures != 0;
}
