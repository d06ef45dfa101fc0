/* tcp_shapes.c - what a 2-rank AllReduce of S bytes of float32 can cost over one TCP connection,
 * by the shape of its schedule, with nothing of Tutti in the way (issue 18's "80% of the raw TCP
 * exchange" target at 1 MiB). One process per end, one nonblocking socket between them
 * (TCP_NODELAY, reno), both ends running the same shape in lock step:
 *
 *   0 exchange  send S while receiving S, no arithmetic, from and into S-byte buffers: what
 *               bench/hosts' "exchange, S-byte buffers" column runs (its "TCP exchange limit",
 *               the anchors' tcp_limit, cycles through 1 MiB buffers, which stay in the cache)
 * Every send and recv asks for at most 1 MiB, as tcp_limit's do: one call of 16 MiB or more
 * throws a burst at the veth pair that often sends the connection into its slow mode
 * (docs/performance.md, "Spurious retransmissions on the veth pair"): 10-11 ms against 3.3 ms
 * at 16 MiB in two of three runs.
 *   1 rd        exchange S, then sum it with the local S (recursive doubling at 2 ranks)
 *   2 ring      the ring at 2 ranks with no copy but the kernel's: exchange half, sum the
 *               received half with the local one straight into the output, exchange the summed
 *               halves straight from and into the output
 *   3 staged    the same ring through staging buffers, as a transport with a FIFO of slots
 *               does: copy into a slot, the kernel copies out of it, the kernel copies into a
 *               slot, then the sum (written both to the output and to the next slot) and a
 *               final copy out; the slots rotate over 8 S of memory
 *   4 rd4       rd in four pieces, each summed once it has arrived
 *
 *   tcp_shapes server ADDR PORT S ITERS SHAPE    (on one host, first)
 *   tcp_shapes client ADDR PORT S ITERS SHAPE    (on the other; prints the time per call)
 *
 * bench/tcp_shapes runs it between two network namespaces, the shapes interleaved. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int fd;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Most bytes one send or recv asks for, as the anchors' tcp_limit does (its CHUNK). */
#define CALL_BYTES ((size_t)1 << 20)
static size_t at_most(size_t n) { return n < CALL_BYTES ? n : CALL_BYTES; }

/* Send n bytes from s while receiving n bytes into r; poll() only when neither moves. */
static void exchange(const char *s, char *r, size_t n)
{
    size_t sent = 0, got = 0;
    while (sent < n || got < n) {
        int moved = 0;
        if (sent < n) {
            ssize_t k = send(fd, s + sent, at_most(n - sent), MSG_DONTWAIT);
            if (k > 0) sent += (size_t)k, moved = 1;
        }
        if (got < n) {
            ssize_t k = recv(fd, r + got, at_most(n - got), MSG_DONTWAIT);
            if (k > 0) got += (size_t)k, moved = 1;
            if (k == 0) {
                fprintf(stderr, "tcp_shapes: peer closed\n");
                exit(1);
            }
        }
        if (!moved) {
            struct pollfd p = {fd, (short)((got < n ? POLLIN : 0) | (sent < n ? POLLOUT : 0)), 0};
            poll(&p, 1, -1);
        }
    }
}

static void sum(float *d, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) d[i] = a[i] + b[i];
}

static void sum2(float *d, float *e, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) d[i] = e[i] = a[i] + b[i];
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: tcp_shapes server|client ADDR PORT BYTES ITERS SHAPE(0-4)\n");
        return 2;
    }
    int server = strcmp(argv[1], "server") == 0, one = 1;
    size_t S = strtoull(argv[4], NULL, 0) & ~(size_t)7, h = S / 2;
    int iters = atoi(argv[5]), shape = atoi(argv[6]);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3]))};
    if (inet_pton(AF_INET, argv[2], &sa.sin_addr) != 1) return 2;
    if (server) {
        int ls = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(ls, (struct sockaddr *)&sa, sizeof sa) || listen(ls, 1)) return perror("bind"), 1;
        fd = accept(ls, NULL, NULL);
    } else {
        for (int tries = 0;; tries++) {
            fd = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) break;
            close(fd);
            if (tries == 100) return perror("connect"), 1;
            usleep(50000);
        }
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "reno", 4);
    /* Only the staged shape uses the 8 S of slots (2 GiB at 256 MiB). */
    size_t stage_bytes = shape == 3 ? 8 * S : 4096;
    char *src = aligned_alloc(4096, S), *dst = aligned_alloc(4096, S),
         *tmp = aligned_alloc(4096, S), *stage = aligned_alloc(4096, stage_bytes);
    if (src == NULL || dst == NULL || tmp == NULL || stage == NULL) return perror("alloc"), 1;
    memset(src, 0, S), memset(dst, 0, S), memset(tmp, 0, S), memset(stage, 0, stage_bytes);
    /* Ring halves: the server reduces the first half, the client the second. */
    char *mine = server ? src : src + h, *theirs = server ? src + h : src;
    char *out_mine = server ? dst : dst + h, *out_theirs = server ? dst + h : dst;
    size_t at = 0;
#define SLOT() (at = (at + h) % (8 * S), stage + at)
    double t0 = 0;
    for (int i = -iters / 4 - 1; i < iters; i++) {
        if (i == 0) t0 = now();
        switch (shape) {
        case 0:
            exchange(src, tmp, S);
            break;
        case 1:
            exchange(src, tmp, S);
            sum((float *)dst, (float *)src, (float *)tmp, S / 4);
            break;
        case 2:
            exchange(theirs, tmp, h);
            sum((float *)out_mine, (float *)mine, (float *)tmp, h / 4);
            exchange(out_mine, out_theirs, h);
            break;
        case 3: {
            char *s1 = SLOT(), *r1 = SLOT();
            memcpy(s1, theirs, h);
            exchange(s1, r1, h);
            char *s2 = SLOT(), *r2 = SLOT();
            sum2((float *)out_mine, (float *)s2, (float *)mine, (float *)r1, h / 4);
            exchange(s2, r2, h);
            memcpy(out_theirs, r2, h);
            break;
        }
        default: {
            size_t q = S / 4;
            for (int j = 0; j < 4; j++) {
                exchange(src + j * q, tmp + j * q, q);
                sum((float *)(dst + j * q), (float *)(src + j * q), (float *)(tmp + j * q), q / 4);
            }
        }
        }
    }
    static const char *names[] = {"exchange", "rd", "ring", "staged", "rd4"};
    if (!server)
        printf("%s %zu %.1f\n", names[shape > 4 ? 4 : shape], S, (now() - t0) / iters * 1e6);
    return 0;
}
