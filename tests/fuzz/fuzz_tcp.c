/* libFuzzer harness for the TCP transport's receive side (transport/tcp.c): whatever bytes a
 * peer's socket delivers — frame headers with any length and check word, descriptors, payloads,
 * an early end of stream — the receiver must hand out only whole frames that passed their
 * checks and otherwise fail with an error, never read or write out of bounds. The input's first
 * byte picks the slot size; the rest is written to one end of a socketpair whose other end is
 * the connection's socket, then closed. The receiver drains it with recv_peek/recv_release as
 * an algorithm would. Also decodes the info blob and hello. It includes tcp.c and tcp_setup.c
 * for their static functions (tests/fuzz/run.sh leaves them out of the library it links).
 * fuzz-includes: src/transport/tcp.c src/transport/tcp_setup.c */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/transport/tcp.c"
#include "../../src/transport/tcp_setup.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    if (size >= TT_CONN_INFO_BYTES) {
        uint64_t nonce;
        struct sockaddr_storage addr;
        int nsocks;
        (void)decode_info(data, 1, &nonce, &addr, &nsocks);
    }
    if (size >= TCP_HELLO_BYTES) {
        struct tcp_hello h;
        decode_hello(data, &h);
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 0;
    int big = 1 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    struct tt_conn conn;
    memset(&conn, 0, sizeof conn);
    conn.dir = TT_CONN_RECV;
    conn.peer = 1;
    conn.slot_bytes = 1 + data[0] % 128;
    struct tcp_conn *tc = calloc(1, sizeof *tc);
    size_t ring_bytes = TT_CONN_SLOTS * tt_conn_slot_stride(conn.slot_bytes);
    if (tc == NULL || posix_memalign((void **)&tc->staging, 64, ring_bytes) != 0) {
        free(tc);
        close(sv[0]);
        close(sv[1]);
        return 0;
    }
    for (int k = 0; k < TCP_MAX_SOCKS; k++) tc->socks[k].fd = -1; /* as tt_tcp_setup leaves them */
    tc->ctl_fd = -1;
    tc->nsocks = 1; /* one stripe: every frame arrives on the socketpair */
    tc->socks[0].fd = sv[0];
    conn.priv = tc;
    (void)!write(sv[1], data + 1, size - 1);
    close(sv[1]);
    /* Drain as an algorithm would: every byte of every frame handed out is read. */
    volatile uint8_t sum = 0;
    for (int guard = 0; guard < 100000; guard++) {
        const void *msg = NULL;
        size_t bytes = 0;
        struct tt_op_desc desc;
        struct tt_wait_hint hint;
        if (tcp_recv_peek(&conn, &msg, &bytes, &desc, &hint) != ncclSuccess) break;
        if (msg == NULL) {
            if (tc->socks[0].eof || tc->failed != ncclSuccess) break;
            continue;
        }
        if (bytes > conn.slot_bytes) abort(); /* a frame longer than its slot got through */
        for (size_t i = 0; i < bytes; i++) sum += ((const uint8_t *)msg)[i];
        if (tcp_recv_release(&conn) != ncclSuccess) break;
    }
    close(sv[0]);
    free(tc->staging);
    free(tc);
    return 0;
}
