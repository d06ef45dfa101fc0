/* Tests of the socket helpers and the bootstrap's MAC (CTest bootstrap_sock), split from
 * test_bootstrap.c: the MAC against a reference from Python's hmac module, host:port parsing
 * and printing, interface choice under NCCL_SOCKET_IFNAME and NCCL_SOCKET_FAMILY,
 * TUTTI_PORT_RANGE, a connect that retries a listener appearing late, 1 MiB through a socket
 * from a child process, and receives that end at their deadline, on the abort flag and when the
 * peer closes. Every check prints what it got and what it wanted. */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/proto.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/sock.h"
#include "util/time.h"

#include "bs_env.h"
#include "check.h"

struct late_listener {
    struct sockaddr_storage addr;
    int delay_ms;
    int fd;
};

/* l->fd is bound already (connects to it are refused, and no other process can take its
 * port meanwhile): it starts listening after delay_ms. */
static void *listen_late(void *arg)
{
    struct late_listener *l = arg;
    struct timespec ts = {0, (long)l->delay_ms * 1000000L};
    nanosleep(&ts, NULL);
    if (listen(l->fd, 16) != 0) tt_sock_close(&l->fd);
    return NULL;
}

static void check_parse(const char *text, ncclResult_t want_res, const char *want_str)
{
    struct sockaddr_storage a;
    char buf[TT_SOCK_ADDR_STR_BYTES];
    ncclResult_t res = tt_sock_parse_host_port(text, &a);
    if (res != want_res) {
        FAIL("parse '%s': got %d, want %d", text, (int)res, (int)want_res);
        return;
    }
    if (want_str != NULL && strcmp(tt_sock_addr_str(&a, buf, sizeof buf), want_str) != 0)
        FAIL("parse '%s' then print: got '%s', want '%s'", text, buf, want_str);
}

static int scenario_sock(void)
{
    /* The MAC is HMAC-SHA-512 truncated to 128 bits; reference from Python's hmac module:
     * hmac.new(bytes(range(32)), b"ab" + b"cde", "sha512").hexdigest()[:32]. */
    uint8_t key[32], mac[TT_BS_MAC_BYTES], want[TT_BS_MAC_BYTES];
    for (int i = 0; i < 32; i++) key[i] = (uint8_t)i;
    static const char want_hex[] = "2daaf5481ba1c074f7de047ce8a98663";
    for (int i = 0; i < TT_BS_MAC_BYTES; i++) {
        unsigned v;
        sscanf(want_hex + 2 * i, "%2x", &v);
        want[i] = (uint8_t)v;
    }
    tt_bs_mac(key, "ab", 2, "cde", 3, mac);
    if (!tt_bs_mac_equal(mac, want)) FAIL("HMAC-SHA-512-256 reference vector");
    key[0] ^= 1;
    tt_bs_mac(key, "ab", 2, "cde", 3, mac);
    if (tt_bs_mac_equal(mac, want)) FAIL("the MAC ignores its key");

    check_parse("127.0.0.1:80", ncclSuccess, "127.0.0.1:80");
    check_parse("[::1]:5", ncclSuccess, "[::1]:5");
    check_parse("localhost:1234", ncclSuccess, NULL);
    check_parse("::1:5", ncclInvalidArgument, NULL);
    check_parse("127.0.0.1", ncclInvalidArgument, NULL);
    check_parse("127.0.0.1:0", ncclInvalidArgument, NULL);
    check_parse("127.0.0.1:65536", ncclInvalidArgument, NULL);
    check_parse(":80", ncclInvalidArgument, NULL);
    check_parse("[::1:80", ncclInvalidArgument, NULL);

    struct sockaddr_storage a;
    char ifname[TT_SOCK_IFNAME_BYTES];
    set_env("NCCL_SOCKET_IFNAME", "=lo");
    CHECK_OK(tt_sock_pick_addr(&a, ifname, sizeof ifname));
    CHECK_EQ_MSG(strcmp(ifname, "lo"), 0, "NCCL_SOCKET_IFNAME==lo picks lo");
    set_env("NCCL_SOCKET_FAMILY", "AF_INET");
    CHECK_OK(tt_sock_pick_addr(&a, ifname, sizeof ifname));
    CHECK_EQ_MSG(a.ss_family, AF_INET, "NCCL_SOCKET_FAMILY=AF_INET");
    set_env("NCCL_SOCKET_IFNAME", "=nosuchif0,nosuchif1");
    CHECK_EQ_MSG(tt_sock_pick_addr(&a, ifname, sizeof ifname), ncclSystemError,
                 "NCCL_SOCKET_IFNAME naming no interface");
    set_env("NCCL_SOCKET_IFNAME", "^lo");
    ncclResult_t res = tt_sock_pick_addr(&a, ifname, sizeof ifname);
    if (res == ncclSuccess && strncmp(ifname, "lo", 2) == 0)
        FAIL("NCCL_SOCKET_IFNAME=^lo picked '%s'", ifname);
    unsetenv("NCCL_SOCKET_IFNAME");
    unsetenv("NCCL_SOCKET_FAMILY");
    tt_param_reload();

    /* TUTTI_PORT_RANGE: the bound port lies in the range. */
    int fd = -1;
    struct sockaddr_storage bound;
    CHECK_OK(tt_sock_parse_host_port("127.0.0.1:1", &a));
    tt_sock_addr_set_port(&a, 0);
    set_env("TUTTI_PORT_RANGE", "47100-47199");
    if (tt_sock_listen(&a, &fd, &bound) == ncclSuccess) {
        unsigned port = tt_sock_addr_port(&bound);
        if (port < 47100 || port > 47199) FAIL("port %u outside 47100-47199", port);
    }
    tt_sock_close(&fd);
    set_env("TUTTI_PORT_RANGE", "9-3");
    CHECK_EQ_MSG(tt_sock_listen(&a, &fd, &bound), ncclInvalidArgument, "TUTTI_PORT_RANGE=9-3");
    unsetenv("TUTTI_PORT_RANGE");
    tt_param_reload();

    /* Connect retries while refused: the listener appears 300 ms late. */
    struct late_listener late = {.delay_ms = 300, .fd = -1};
    late.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    tt_sock_addr_set_port(&a, 0);
    socklen_t bound_len = sizeof bound;
    if (late.fd < 0 || bind(late.fd, (struct sockaddr *)&a, tt_sock_addr_len(&a)) != 0 ||
        getsockname(late.fd, (struct sockaddr *)&bound, &bound_len) != 0)
        FAIL("bind for the late listener: %s", strerror(errno));
    late.addr = bound;
    pthread_t thread;
    pthread_create(&thread, NULL, listen_late, &late);
    uint64_t start_ns = tt_time_ns();
    int cfd = -1, afd = -1;
    CHECK_OK(tt_sock_connect(&bound, tt_deadline_after_ms(5000), NULL, &cfd));
    pthread_join(thread, NULL);
    if (elapsed_ms(start_ns) < 250)
        FAIL("connected after %lld ms, before the listener existed",
             (long long)elapsed_ms(start_ns));
    CHECK_OK(tt_sock_accept(late.fd, tt_deadline_after_ms(5000), NULL, &afd, NULL));
    tt_sock_close(&late.fd);

    /* Data both ways, a receive that times out, an abort, a peer that closes. */
    static uint8_t big[1 << 20];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 7);
    static uint8_t got[1 << 20];
    pid_t child = fork();
    if (child == 0) {
        tt_sock_close(&afd);
        int rc = tt_sock_send_all(cfd, big, sizeof big, tt_deadline_after_ms(10000), NULL);
        _exit(rc != ncclSuccess);
    }
    tt_sock_close(&cfd);
    CHECK_OK(tt_sock_recv_all(afd, got, sizeof got, tt_deadline_after_ms(10000), NULL));
    CHECK_EQ_MSG(memcmp(got, big, sizeof big), 0, "1 MiB through a socket");
    int status = 0;
    waitpid(child, &status, 0);
    CHECK_EQ_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, 1, "sender child's exit");
    CHECK_EQ_MSG(tt_sock_recv_all(afd, got, 1, tt_deadline_after_ms(1000), NULL), ncclRemoteError,
                 "recv after the peer closed");
    tt_sock_close(&afd);

    int pair[2];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pair);
    start_ns = tt_time_ns();
    CHECK_EQ_MSG(tt_sock_recv_all(pair[0], got, 1, tt_deadline_after_ms(200), NULL),
                 ncclSystemError, "recv past its deadline");
    int64_t ms = elapsed_ms(start_ns);
    if (ms < 190 || ms > 1000) FAIL("timed out after %lld ms, want ~200", (long long)ms);
    _Atomic int abort_flag = 1;
    start_ns = tt_time_ns();
    CHECK_EQ_MSG(tt_sock_recv_all(pair[0], got, 1, TT_NO_DEADLINE, &abort_flag), ncclSystemError,
                 "recv with the abort flag set");
    ms = elapsed_ms(start_ns);
    if (ms > 500) FAIL("abort took %lld ms, want at once", (long long)ms);
    close(pair[0]);
    close(pair[1]);
    return check_failures != 0;
}

int main(void)
{
    int rc = scenario_sock() != 0 || check_failures != 0;
    printf("%s sock\n", rc ? "FAILED" : "PASSED");
    return rc;
}
