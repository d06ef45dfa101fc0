/* Tests of the bootstrap (the socket helpers and the MAC: test_sock.c). Each scenario is one CTest test (the first
 * argument names it); rank scenarios start one process per rank: the test forks and the child
 * re-executes this binary as "child BODY RANK NRANKS ID", with the unique id the parent made
 * in hex (a fresh process image, so leak checkers see only the rank's own memory). The parent
 * collects exit codes under a watchdog. Every check prints what it got and what it wanted,
 * with the rank. */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/proto.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/sock.h"
#include "util/time.h"

#include "bs_env.h"
#include "check.h"
#include "root_port.h"

#define WATCHDOG_MS 90000
#define MAX_RANKS 16

/* ---- the rank body: allgather, barrier, all-pairs send/recv ------------------------------- */

static uint8_t block_byte(int rank, size_t i) { return (uint8_t)(rank * 31 + i * 7 + 1); }

static void check_allgather(struct tt_bootstrap *bs, int rank, int nranks, size_t block_bytes)
{
    if (nranks < 1 || block_bytes == 0) return;
    uint8_t *data = calloc((size_t)nranks, block_bytes);
    if (data == NULL) {
        fprintf(stderr, "rank %d: out of memory for the allgather\n", rank);
        exit(1);
    }
    for (size_t i = 0; i < block_bytes; i++)
        data[(size_t)rank * block_bytes + i] = block_byte(rank, i);
    CHECK_OK(tt_bootstrap_allgather(bs, data, block_bytes));
    int bad = 0;
    for (int r = 0; r < nranks && bad < 5; r++) {
        for (size_t i = 0; i < block_bytes && bad < 5; i++) {
            uint8_t got = data[(size_t)r * block_bytes + i], want = block_byte(r, i);
            if (got != want) {
                FAIL("allgather of %zu-byte blocks: block %d byte %zu: got %u, "
                     "want %u",
                     block_bytes, r, i, got, want);
                bad++;
            }
        }
    }
    free(data);
}

/* Message k from `from` to `to`: distinct tag and size per (from, to, k). */
static int msg_tag(int from, int to, int k) { return (k + 1) * 1000 + from * 16 + to; }
static size_t msg_bytes(int from, int to, int k)
{
    static const size_t sizes[] = {5, 0, 20000};
    return sizes[k] + (size_t)(from + to);
}
static uint8_t msg_byte(int from, int to, int k, size_t i)
{
    return (uint8_t)(from * 53 + to * 19 + k * 101 + i);
}

/* Every rank sends three messages to every rank (itself included) in increasing order, then
 * receives them in the opposite order of peers and of messages, so that most arrive before
 * they are asked for and must be stashed. */
/* Sealed messages (a child communicator's id goes so): what crosses the wire is not the
 * plaintext (read as a plain message of the sealed size: nonce and MAC add 40 bytes), a sealed
 * message opens to it, and a message not sealed under this communicator's key is refused. */
#define SEALED_BYTES 128
static void check_sealed(struct tt_bootstrap *bs, int rank, int nranks)
{
    int peer = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    uint8_t plain[SEALED_BYTES], wire[SEALED_BYTES + 40], got[SEALED_BYTES];
    for (int i = 0; i < SEALED_BYTES; i++) plain[i] = (uint8_t)(rank * 7 + i);
    CHECK_OK(tt_bootstrap_send_sealed(bs, peer, 77001, plain, sizeof plain));
    CHECK_OK(tt_bootstrap_send_sealed(bs, peer, 77002, plain, sizeof plain));
    memset(wire, 0x5a, sizeof wire);
    CHECK_OK(tt_bootstrap_send(bs, peer, 77003, wire, sizeof wire));
    CHECK_OK(tt_bootstrap_recv(bs, prev, 77001, wire, sizeof wire));
    for (int i = 0; i < SEALED_BYTES; i++) plain[i] = (uint8_t)(prev * 7 + i);
    for (size_t at = 0; at + 16 <= SEALED_BYTES; at++)
        if (memmem(wire, sizeof wire, plain + at, 16) != NULL) {
            FAIL("the sealed message carries its plaintext (bytes %zu-%zu)", at, at + 15);
            break;
        }
    memset(got, 0, sizeof got);
    CHECK_OK(tt_bootstrap_recv_sealed(bs, prev, 77002, got, sizeof got));
    CHECK_EQ_MSG(memcmp(got, plain, sizeof got), 0, "the sealed message opened to its plaintext");
    CHECK_EQ_MSG(tt_bootstrap_recv_sealed(bs, prev, 77003, got, sizeof got), ncclRemoteError,
                 "a message not sealed under this communicator's key");
}

static void check_p2p(struct tt_bootstrap *bs, int rank, int nranks)
{
    uint8_t *buf = malloc(20000 + 2 * MAX_RANKS);
    for (int d = 0; d < nranks; d++) {
        int to = (rank + d) % nranks;
        for (int k = 0; k < 3; k++) {
            size_t n = msg_bytes(rank, to, k);
            for (size_t i = 0; i < n; i++) buf[i] = msg_byte(rank, to, k, i);
            CHECK_OK(tt_bootstrap_send(bs, to, msg_tag(rank, to, k), buf, n));
        }
    }
    for (int d = nranks - 1; d >= 0; d--) {
        int from = (rank + d) % nranks;
        for (int k = 2; k >= 0; k--) {
            size_t n = msg_bytes(from, rank, k);
            memset(buf, 0xee, n);
            ncclResult_t res = tt_bootstrap_recv(bs, from, msg_tag(from, rank, k), buf, n);
            if (res != ncclSuccess) {
                FAIL("recv from rank %d message %d: got %d (%s), want success", from, k, (int)res,
                     tt_error_last());
                continue;
            }
            for (size_t i = 0; i < n; i++) {
                if (buf[i] != msg_byte(from, rank, k, i)) {
                    FAIL("message %d from rank %d, byte %zu: got %u, want %u", k, from, i, buf[i],
                         msg_byte(from, rank, k, i));
                    break;
                }
            }
        }
    }
    /* A size that disagrees with the sender's is the caller's error, reported as such. */
    int peer = (rank + 1) % nranks;
    CHECK_OK(tt_bootstrap_send(bs, peer, 99999, buf, 3));
    int prev = (rank + nranks - 1) % nranks;
    CHECK_OK(tt_bootstrap_send(bs, peer, 99998, buf, 2));
    CHECK_EQ_MSG(tt_bootstrap_recv(bs, prev, 99999, buf, 4), ncclInvalidUsage,
                 "recv with a size differing from the send's");
    /* The refused message is kept, and the connection stays in step. */
    CHECK_OK(tt_bootstrap_recv(bs, prev, 99999, buf, 3));
    CHECK_OK(tt_bootstrap_recv(bs, prev, 99998, buf, 2));
    check_sealed(bs, rank, nranks);
    free(buf);
}

static int run_rank_body(const ncclUniqueId *id, int rank, int nranks)
{
    struct tt_bootstrap *bs = NULL;
    static const _Atomic int no_abort = 0;
    ncclResult_t res = tt_bootstrap_create(id, rank, nranks, &no_abort, &bs);
    if (res != ncclSuccess) {
        FAIL("tt_bootstrap_create: got %d (%s), want success", (int)res, tt_error_last());
        return 1;
    }
    const struct sockaddr_storage *local = tt_bootstrap_local_addr(bs);
    CHECK_EQ_MSG(tt_sock_addr_port(local), 0, "port of tt_bootstrap_local_addr");
    check_allgather(bs, rank, nranks, 37);
    check_allgather(bs, rank, nranks, 1);
    check_allgather(bs, rank, nranks, 300000);
    for (int i = 0; i < 3; i++) CHECK_OK(tt_bootstrap_barrier(bs));
    check_p2p(bs, rank, nranks);
    CHECK_OK(tt_bootstrap_barrier(bs));
    tt_bootstrap_destroy(bs);
    return check_failures != 0;
}

/* ---- process management ------------------------------------------------------------------- */

static void id_to_hex(const ncclUniqueId *id, char *hex)
{
    const uint8_t *b = (const uint8_t *)id;
    for (size_t i = 0; i < sizeof *id; i++) sprintf(hex + 2 * i, "%02x", b[i]);
}

static bool id_from_hex(const char *hex, ncclUniqueId *id)
{
    uint8_t *b = (uint8_t *)id;
    if (strlen(hex) != 2 * sizeof *id) return false;
    for (size_t i = 0; i < sizeof *id; i++) {
        unsigned v = 0;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) return false;
        b[i] = (uint8_t)v;
    }
    return true;
}

/* Starts one process per entry of ranks[] running `body` with nranks, and waits for all,
 * killing them at the watchdog. Returns the number of processes that failed. */
static int run_ranks(const ncclUniqueId *id, const int *ranks, int nchildren, int nranks,
                     const char *body)
{
    pid_t pids[MAX_RANKS];
    char hex[2 * sizeof(ncclUniqueId) + 1];
    id_to_hex(id, hex);
    fflush(stdout);
    fflush(stderr);
    for (int i = 0; i < nchildren; i++) {
        pids[i] = fork();
        if (pids[i] < 0) {
            perror("fork");
            exit(1);
        }
        if (pids[i] == 0) {
            char rank_text[16], nranks_text[16];
            snprintf(rank_text, sizeof rank_text, "%d", ranks[i]);
            snprintf(nranks_text, sizeof nranks_text, "%d", nranks);
            execl("/proc/self/exe", "test_bootstrap", "child", body, rank_text, nranks_text,
                  hex, (char *)NULL);
            perror("exec /proc/self/exe");
            _exit(127);
        }
    }
    int bad = 0, left = nchildren;
    uint64_t deadline_ns = tt_deadline_after_ms(WATCHDOG_MS);
    while (left > 0) {
        int status = 0;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid == 0) {
            if (tt_deadline_passed(deadline_ns)) {
                fprintf(stderr, "FAIL: watchdog: %d rank(s) still running after %d ms; "
                        "killing them\n", left, WATCHDOG_MS);
                for (int i = 0; i < nchildren; i++)
                    if (pids[i] > 0) kill(pids[i], SIGKILL);
                deadline_ns = TT_NO_DEADLINE;
            }
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (pid < 0) break;
        for (int i = 0; i < nchildren; i++) {
            if (pids[i] != pid) continue;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "FAIL: rank %d exited with %s %d\n", ranks[i],
                        WIFEXITED(status) ? "status" : "signal",
                        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
                bad++;
            }
            pids[i] = -1;
            left--;
        }
    }
    return bad;
}

static int all_ranks(const ncclUniqueId *id, int nranks, const char *body)
{
    int ranks[MAX_RANKS];
    for (int r = 0; r < nranks; r++) ranks[r] = r;
    return run_ranks(id, ranks, nranks, nranks, body);
}

/* ---- scenarios ---------------------------------------------------------------------------- */

static int scenario_ranks(int nranks)
{
    ncclUniqueId id;
    set_env("TUTTI_TIMEOUT_MS", "30000");
    CHECK_OK(tt_bootstrap_get_unique_id(&id));
    if (check_failures) return 1;
    return all_ranks(&id, nranks, "full");
}

/* An id used long after it was made (as NCCL allows: its root waits until the id is used):
 * made under a 1 s deadline, used 2 s later, and the job still forms. */
static int scenario_late(void)
{
    ncclUniqueId id;
    set_env("TUTTI_TIMEOUT_MS", "1000");
    CHECK_OK(tt_bootstrap_get_unique_id(&id));
    if (check_failures) return 1;
    usleep(2000000);
    return all_ranks(&id, 3, "full");
}

/* Ranks 0 and 1 of 3 start; both must fail within about TUTTI_TIMEOUT_MS, naming rank 2. */
static int missing_rank_body(const ncclUniqueId *id, int rank, int nranks)
{
    struct tt_bootstrap *bs = NULL;
    uint64_t start_ns = tt_time_ns();
    ncclResult_t res = tt_bootstrap_create(id, rank, nranks, NULL, &bs);
    int64_t ms = elapsed_ms(start_ns);
    CHECK_EQ_MSG(res, ncclSystemError, "tt_bootstrap_create with a rank missing");
    if (ms < 1000 || ms > 4500) FAIL("failed after %lld ms, want 1000..4500 ms", (long long)ms);
    if (strstr(tt_error_last(), "rank 2 of 3 never reached") == NULL)
        FAIL("error text: got '%s', want it to name 'rank 2 of 3'", tt_error_last());
    printf("rank %d: failed as expected after %lld ms: %s\n", rank, (long long)ms,
           tt_error_last());
    tt_bootstrap_destroy(bs);
    return check_failures != 0;
}

static int scenario_missing(void)
{
    ncclUniqueId id;
    set_env("TUTTI_TIMEOUT_MS", "2000");
    CHECK_OK(tt_bootstrap_get_unique_id(&id));
    if (check_failures) return 1;
    const int ranks[] = {0, 1};
    return run_ranks(&id, ranks, 2, 3, "missing");
}

/* Rank 0 (nranks 2) arrives first; then a rank claiming nranks 3 is refused at once. */
static int mismatch_body(const ncclUniqueId *id, int rank, int nranks)
{
    struct tt_bootstrap *bs = NULL;
    int claimed = rank == 0 ? 2 : 3;
    if (rank == 1) { /* a second: rank 0 arrives first even on a loaded machine */
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
    uint64_t start_ns = tt_time_ns();
    ncclResult_t res = tt_bootstrap_create(id, rank, claimed, NULL, &bs);
    int64_t ms = elapsed_ms(start_ns);
    if (rank == 1) {
        CHECK_EQ_MSG(res, ncclInvalidUsage, "create with nranks differing from rank 0's");
        if (strstr(tt_error_last(), "nranks=3 but other ranks used nranks=2") == NULL)
            FAIL("error text: got '%s', want it to explain the nranks mismatch", tt_error_last());
        if (ms > 1500) FAIL("refused after %lld ms, want at once", (long long)ms);
    } else {
        CHECK_EQ_MSG(res, ncclSystemError, "create while the only other rank was refused");
        if (strstr(tt_error_last(), "rank 1 of 2 never reached") == NULL)
            FAIL("error text: got '%s', want it to name 'rank 1 of 2'", tt_error_last());
    }
    tt_bootstrap_destroy(bs);
    return check_failures != 0;
}

static int scenario_mismatch(void)
{
    ncclUniqueId id;
    set_env("TUTTI_TIMEOUT_MS", "2000");
    CHECK_OK(tt_bootstrap_get_unique_id(&id));
    if (check_failures) return 1;
    return all_ranks(&id, 2, "mismatch");
}

/* parent_id is the id the parent derived: every rank must derive the same. */
static int commid_body(const ncclUniqueId *parent_id, int rank, int nranks)
{
    ncclUniqueId id;
    CHECK_OK(tt_bootstrap_id_from_string(getenv("NCCL_COMM_ID"), &id));
    if (memcmp(&id, parent_id, sizeof id) != 0)
        FAIL("the id derived from NCCL_COMM_ID differs from the parent's");
    if (rank == 0) CHECK_OK(tt_bootstrap_root_start(&id));
    if (check_failures) return 1;
    return run_rank_body(&id, rank, nranks);
}

static int scenario_commid(void)
{
    /* A free port, held for rank 0's root (root_port.h; the other ranks ignore the socket). */
    int fd = -1, port = root_port_hold(&fd);
    char text[64];
    if (port < 0) return 1;
    snprintf(text, sizeof text, "127.0.0.1:%d", port);
    set_env("NCCL_COMM_ID", text);
    set_env("TUTTI_SECRET", "test-secret");
    set_env("TUTTI_TIMEOUT_MS", "30000");
    ncclUniqueId parent_id;
    CHECK_OK(tt_bootstrap_id_from_string(text, &parent_id));
    /* A different secret must give a different id. */
    ncclUniqueId other;
    set_env("TUTTI_SECRET", "other-secret");
    CHECK_OK(tt_bootstrap_id_from_string(text, &other));
    set_env("TUTTI_SECRET", "test-secret");
    if (memcmp(&other, &parent_id, sizeof other) == 0)
        FAIL("TUTTI_SECRET does not change the derived id");
    /* A "key:" secret is used as is: its bytes are the id's secret, not a stretched value. */
    static const char key_text[] =
        "key:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    set_env("TUTTI_SECRET", key_text);
    CHECK_OK(tt_bootstrap_id_from_string(text, &other));
    struct tt_unique_id key_id;
    memcpy(&key_id, &other, sizeof key_id);
    for (int i = 0; i < 32; i++)
        if (key_id.secret[i] != (uint8_t)i) FAIL("key: secret byte %d changed", i);
    set_env("TUTTI_SECRET", "key:00zz");
    if (tt_bootstrap_id_from_string(text, &other) == ncclSuccess)
        FAIL("a malformed key: secret was accepted");
    set_env("TUTTI_SECRET", "test-secret");
    if (check_failures) return 1;
    int res = all_ranks(&parent_id, 4, "commid");
    root_port_release(&fd);
    return res;
}

/* Before the ranks come, the root gets a connection that sends garbage, one that closes at
 * once, one with another job's tag (refused at once: a fixed refusal, no nonce), and one with
 * the job's tag but a forged MAC claiming rank 0. The root must drop all four and still serve
 * the real ranks (a counted forgery would make rank 0 a duplicate). */
/* The root out of descriptors, with no unproven connection to close for room: it pauses
 * between accepts instead of spinning on its listening socket, which stays readable while a
 * connection it cannot accept waits (this process's CPU time over one second, the root's thread
 * being the only one awake). */
static int scenario_emfile(void)
{
    ncclUniqueId id;
    struct tt_unique_id tid;
    struct sockaddr_storage root;
    set_env("TUTTI_TIMEOUT_MS", "30000");
    CHECK_OK(tt_bootstrap_get_unique_id(&id));
    memcpy(&tid, &id, sizeof tid);
    CHECK_OK(tt_bs_id_addr(&tid, &root));
    int go[2];
    if (pipe(go) != 0) return 1;
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) { /* connects once told, then holds the connection */
        char c;
        int fd = -1;
        if (read(go[0], &c, 1) != 1) _exit(1);
        if (tt_sock_connect(&root, tt_deadline_after_ms(5000), NULL, &fd) != ncclSuccess)
            _exit(2);
        pause();
        _exit(0);
    }
    struct rlimit old, low;
    getrlimit(RLIMIT_NOFILE, &old);
    int lowest_free = dup(0);
    close(lowest_free);
    low = old;
    low.rlim_cur = (rlim_t)lowest_free; /* no new descriptor in this process from now on */
    setrlimit(RLIMIT_NOFILE, &low);
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    if (write(go[1], "g", 1) != 1) FAIL("cannot start the connecting child");
    sleep(1);
    getrusage(RUSAGE_SELF, &r1);
    setrlimit(RLIMIT_NOFILE, &old);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    double cpu = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) +
                 (double)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
                 (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) * 1e-6 +
                 (double)(r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) * 1e-6;
    printf("emfile: %.3f s of CPU in 1 s with a connection the root could not accept\n", cpu);
    if (cpu > 0.25) FAIL("the root spun on its listening socket: %.3f s of CPU in 1 s", cpu);
    return check_failures != 0;
}

static int scenario_garbage(void)
{
    ncclUniqueId id;
    struct tt_unique_id tid;
    struct sockaddr_storage root;
    int fd = -1;
    set_env("TUTTI_TIMEOUT_MS", "30000");
    CHECK_OK(tt_bootstrap_get_unique_id(&id));
    memcpy(&tid, &id, sizeof tid);
    CHECK_OK(tt_bs_id_addr(&tid, &root));
    uint64_t deadline_ns = tt_deadline_after_ms(5000);

    CHECK_OK(tt_sock_connect(&root, deadline_ns, NULL, &fd));
    uint8_t junk[200];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(i * 13 + 5);
    CHECK_OK(tt_sock_send_all(fd, junk, sizeof junk, deadline_ns, NULL));
    tt_sock_close(&fd);

    CHECK_OK(tt_sock_connect(&root, deadline_ns, NULL, &fd));
    tt_sock_close(&fd);

    struct tt_bs_challenge ch;
    struct tt_bs_tag other = {.magic = tid.magic ^ 1};
    CHECK_OK(tt_sock_connect(&root, deadline_ns, NULL, &fd));
    CHECK_OK(tt_sock_send_all(fd, &other, sizeof other, deadline_ns, NULL));
    CHECK_OK(tt_sock_recv_all(fd, &ch, sizeof ch, deadline_ns, NULL));
    static const uint8_t zero_nonce[TT_BS_NONCE_BYTES];
    CHECK_EQ_MSG(ch.status == TT_BS_REFUSED, 1, "the root's answer to another job's tag");
    CHECK_EQ_MSG(memcmp(ch.nonce, zero_nonce, sizeof zero_nonce), 0, "a refusal's nonce");
    CHECK_EQ_MSG(tt_sock_recv_all(fd, &ch, 1, deadline_ns, NULL), ncclRemoteError,
                 "reading past a refusal");
    tt_sock_close(&fd);
    /* The gate refuses the same way when the tag is another job's. */
    uint8_t challenge[TT_BS_NONCE_BYTES];
    CHECK_EQ_MSG(tt_bs_gate_enter(&root, tid.magic ^ 1, deadline_ns, NULL, "the root", false,
                                  &fd, challenge),
                 ncclInvalidUsage, "passing the gate with another tag");
    CHECK_EQ_MSG(fd, -1, "the fd after a refusal");

    struct tt_bs_root_hello forged;
    CHECK_OK(tt_bs_gate_enter(&root, tid.magic, deadline_ns, NULL, "the root", false, &fd,
                              challenge));
    memset(&forged, 0, sizeof forged);
    forged.magic = tid.magic;
    forged.version = TT_UNIQUE_ID_VERSION;
    forged.rank = 0;
    forged.nranks = 3;
    tt_bs_addr_to_wire(&root, &forged.listen_addr);
    memset(forged.mac, 0x5a, sizeof forged.mac);
    CHECK_OK(tt_sock_send_all(fd, &forged, sizeof forged, deadline_ns, NULL));
    /* The root closes the forged connection without a reply. */
    struct tt_bs_root_reply reply;
    CHECK_EQ_MSG(tt_sock_recv_all(fd, &reply, sizeof reply, deadline_ns, NULL), ncclRemoteError,
                 "reading a reply to a forged hello");
    tt_sock_close(&fd);
    if (check_failures) return 1;
    return all_ranks(&id, 3, "full");
}

/* A rank process: "child BODY RANK NRANKS ID". */
static int child_main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(const ncclUniqueId *id, int rank, int nranks);
    } bodies[] = {
        {"full", run_rank_body},
        {"missing", missing_rank_body},
        {"mismatch", mismatch_body},
        {"commid", commid_body},
    };
    ncclUniqueId id;
    if (argc != 6 || !id_from_hex(argv[5], &id)) {
        fprintf(stderr, "child: bad arguments\n");
        return 2;
    }
    check_rank = atoi(argv[3]);
    tt_log_set_rank(check_rank);
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++)
        if (strcmp(argv[2], bodies[i].name) == 0)
            return bodies[i].fn(&id, check_rank, atoi(argv[4])) != 0 || check_failures != 0;
    fprintf(stderr, "child: unknown body '%s'\n", argv[2]);
    return 2;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    int rc;
    if (strcmp(what, "child") == 0) return child_main(argc, argv);
    if (strcmp(what, "ranks") == 0 && argc > 2 && atoi(argv[2]) >= 1 &&
        atoi(argv[2]) <= MAX_RANKS)
        rc = scenario_ranks(atoi(argv[2]));
    else if (strcmp(what, "missing") == 0)
        rc = scenario_missing();
    else if (strcmp(what, "late") == 0)
        rc = scenario_late();
    else if (strcmp(what, "mismatch") == 0)
        rc = scenario_mismatch();
    else if (strcmp(what, "commid") == 0)
        rc = scenario_commid();
    else if (strcmp(what, "garbage") == 0)
        rc = scenario_garbage();
    else if (strcmp(what, "emfile") == 0)
        rc = scenario_emfile();
    else {
        fprintf(stderr, "usage: %s ranks N | missing | late | mismatch | commid | garbage | "
                        "emfile\n", argv[0]);
        return 2;
    }
    rc = rc != 0 || check_failures != 0;
    printf("%s %s\n", rc ? "FAILED" : "PASSED", what);
    return rc;
}
