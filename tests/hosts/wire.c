/* tt_wire: a userspace Ethernet switch with impaired links, for the multi-host test bed
 * (tests/hosts/bed.sh) on kernels without netem.
 *
 * It owns the switch ends of the hosts' veth pairs: it reads every frame arriving on a port
 * through a packet socket, learns which port each source MAC address lives behind, and forwards
 * the frame to the port of its destination (every other port for broadcasts and unknown
 * addresses), after dropping it with probability LOSS and holding it DELAY, and no faster than
 * RATE per egress port. Frames keep their virtio-net header (PACKET_VNET_HDR), so the hosts'
 * checksum and segmentation offloads pass through untouched: a frame may be a 64 KiB TCP
 * super-segment, dropped or delayed as one, as netem does with such frames. Each egress port is
 * a FIFO whose release times never decrease, so frames of one link are never reordered.
 *
 *   tt_wire --ports IF[,IF...] [--delay 20ms] [--loss 1%] [--rate 100mbit] [--ready FILE]
 *           [--seed N]
 *
 * It runs until SIGTERM or SIGINT, then prints what it forwarded and dropped:
 *   tt_wire: FRAMES frames in, DROPPED dropped (loss), FULL dropped (queue full)
 * --ready names a file created once every port is open. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PORTS 64
#define MAX_MACS 1024
#define FRAME_MAX (256 * 1024)
#define VNET_HDR_BYTES 10
#define QUEUE_BYTES_MAX (64u << 20) /* a port's queue beyond this drops the newest frame */

#ifndef PACKET_VNET_HDR
#define PACKET_VNET_HDR 15
#endif
#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

struct frame {
    struct frame *next;
    uint64_t release_ns;
    size_t bytes;
    unsigned char data[];
};

struct port {
    char name[IF_NAMESIZE];
    int fd;
    struct frame *head, *tail;
    size_t queued_bytes;
    uint64_t last_release_ns;
};

struct mac_entry {
    unsigned char mac[ETH_ALEN];
    int port;
};

static struct port ports[MAX_PORTS];
static int nports;
static struct mac_entry macs[MAX_MACS];
static int nmacs;
static uint64_t delay_ns;
static double loss; /* probability, 0..1 */
static double rate_bps; /* bits per second, 0 = unlimited */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t frames_in, frames_lost, frames_full;
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: uniform in [0, 1). */
static double uniform(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

static void die(const char *what)
{
    fprintf(stderr, "tt_wire: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* "20ms", "500us", "1s", "0". */
static bool parse_delay(const char *s, uint64_t *out)
{
    char *end;
    double v = strtod(s, &end);
    double scale = strcmp(end, "s") == 0    ? 1e9
                   : strcmp(end, "ms") == 0 ? 1e6
                   : strcmp(end, "us") == 0 ? 1e3
                   : strcmp(end, "ns") == 0 || (*end == '\0' && v == 0) ? 1
                                                                      : -1;
    if (end == s || scale < 0 || v < 0) return false;
    *out = (uint64_t)(v * scale);
    return true;
}

/* "1%", "0.5%", "0". */
static bool parse_loss(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || (strcmp(end, "%") != 0 && !(*end == '\0' && v == 0)) || v < 0 || v > 100)
        return false;
    *out = v / 100.0;
    return true;
}

/* tc's units: bit, kbit, mbit, gbit (powers of 1000) and bps, kbps, mbps, gbps (bytes). */
static bool parse_rate(const char *s, double *out)
{
    static const struct {
        const char *unit;
        double scale;
    } units[] = {{"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9},
                 {"bps", 8}, {"kbps", 8e3}, {"mbps", 8e6}, {"gbps", 8e9}};
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0) return false;
    if (*end == '\0' && v == 0) {
        *out = 0;
        return true;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcasecmp(end, units[i].unit) == 0) {
            *out = v * units[i].scale;
            return true;
        }
    }
    return false;
}

static void open_port(struct port *p)
{
    p->fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
    if (p->fd < 0) die("packet socket");
    int one = 1;
    if (setsockopt(p->fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) != 0)
        die("PACKET_VNET_HDR");
    /* Frames this process sends out of a port must not come back in on it. */
    if (setsockopt(p->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0)
        die("PACKET_IGNORE_OUTGOING");
    struct sockaddr_ll sll;
    memset(&sll, 0, sizeof sll);
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = (int)if_nametoindex(p->name);
    if (sll.sll_ifindex == 0) die(p->name);
    if (bind(p->fd, (struct sockaddr *)&sll, sizeof sll) != 0) die("bind");
}

static void learn(const unsigned char *mac, int port)
{
    if (mac[0] & 1) return; /* a group address is never a source */
    for (int i = 0; i < nmacs; i++) {
        if (memcmp(macs[i].mac, mac, ETH_ALEN) == 0) {
            macs[i].port = port;
            return;
        }
    }
    if (nmacs < MAX_MACS) {
        memcpy(macs[nmacs].mac, mac, ETH_ALEN);
        macs[nmacs++].port = port;
    }
}

static int lookup(const unsigned char *mac)
{
    if (mac[0] & 1) return -1;
    for (int i = 0; i < nmacs; i++)
        if (memcmp(macs[i].mac, mac, ETH_ALEN) == 0) return macs[i].port;
    return -1;
}

/* Queues a copy of the frame on port `out`: released after the delay, and no sooner than the
 * previous frame of the port has been serialised at the link's rate. */
static void enqueue(int out, const unsigned char *data, size_t bytes, uint64_t now)
{
    struct port *p = &ports[out];
    struct frame *f = NULL;
    if (p->queued_bytes + bytes > QUEUE_BYTES_MAX || (f = malloc(sizeof *f + bytes)) == NULL) {
        frames_full++;
        return;
    }
    memcpy(f->data, data, bytes);
    f->bytes = bytes;
    f->next = NULL;
    uint64_t release = now + delay_ns;
    if (rate_bps > 0) {
        uint64_t start = release > p->last_release_ns ? release : p->last_release_ns;
        size_t wire_bytes = bytes > VNET_HDR_BYTES ? bytes - VNET_HDR_BYTES : 0;
        release = start + (uint64_t)((double)wire_bytes * 8.0 * 1e9 / rate_bps);
    } else if (release < p->last_release_ns) {
        release = p->last_release_ns;
    }
    p->last_release_ns = release;
    f->release_ns = release;
    if (p->tail != NULL)
        p->tail->next = f;
    else
        p->head = f;
    p->tail = f;
    p->queued_bytes += bytes;
}

static void receive(int in, unsigned char *buf, uint64_t now)
{
    for (;;) {
        ssize_t n = recv(ports[in].fd, buf, FRAME_MAX, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) return;
            die("recv");
        }
        if ((size_t)n < VNET_HDR_BYTES + ETH_HLEN) continue;
        const unsigned char *eth = buf + VNET_HDR_BYTES;
        learn(eth + ETH_ALEN, in);
        frames_in++;
        if (loss > 0 && uniform() < loss) {
            frames_lost++;
            continue;
        }
        int out = lookup(eth);
        if (out == in) continue;
        if (out >= 0) {
            enqueue(out, buf, (size_t)n, now);
        } else {
            for (int p = 0; p < nports; p++)
                if (p != in) enqueue(p, buf, (size_t)n, now);
        }
    }
}

/* Sends every frame whose time has come; returns the earliest release still pending. */
static uint64_t release_due(uint64_t now)
{
    uint64_t next = UINT64_MAX;
    for (int i = 0; i < nports; i++) {
        struct port *p = &ports[i];
        while (p->head != NULL && p->head->release_ns <= now) {
            struct frame *f = p->head;
            if (send(p->fd, f->data, f->bytes, 0) < 0 && (errno == EAGAIN || errno == ENOBUFS)) {
                /* The port's socket buffer is full: try again shortly, without spinning. */
                if (now + 100000 < next) next = now + 100000;
                break;
            }
            p->head = f->next;
            if (p->head == NULL) p->tail = NULL;
            p->queued_bytes -= f->bytes;
            free(f);
        }
        if (p->head != NULL && p->head->release_ns > now && p->head->release_ns < next)
            next = p->head->release_ns;
    }
    return next;
}

static void usage(void)
{
    fprintf(stderr, "usage: tt_wire --ports IF[,IF...] [--delay 20ms] [--loss 1%%] "
                    "[--rate 100mbit] [--ready FILE] [--seed N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *ready = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) usage();
        if (strcmp(argv[i], "--ports") == 0) {
            char buf[4096];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL;
                 t = strtok_r(NULL, ",", &save)) {
                if (nports == MAX_PORTS) usage();
                snprintf(ports[nports++].name, IF_NAMESIZE, "%s", t);
            }
        } else if (strcmp(argv[i], "--delay") == 0) {
            if (!parse_delay(v, &delay_ns)) usage();
        } else if (strcmp(argv[i], "--loss") == 0) {
            if (!parse_loss(v, &loss)) usage();
        } else if (strcmp(argv[i], "--rate") == 0) {
            if (!parse_rate(v, &rate_bps)) usage();
        } else if (strcmp(argv[i], "--ready") == 0) {
            ready = v;
        } else if (strcmp(argv[i], "--seed") == 0) {
            rng_state = strtoull(v, NULL, 0) | 1;
        } else {
            usage();
        }
        i++;
    }
    if (nports < 1) usage();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: ppoll returns EINTR */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    for (int i = 0; i < nports; i++) open_port(&ports[i]);
    if (ready != NULL) {
        int fd = open(ready, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) die(ready);
        close(fd);
    }
    unsigned char *buf = malloc(FRAME_MAX);
    if (buf == NULL) die("malloc");
    struct pollfd pfd[MAX_PORTS];
    for (int i = 0; i < nports; i++) pfd[i] = (struct pollfd){.fd = ports[i].fd, .events = POLLIN};
    /* The loop: wait for a frame or the next release time, take in every frame that arrived,
     * then send every frame that is due. */
    while (!stop) {
        uint64_t now = now_ns();
        uint64_t next = release_due(now);
        struct timespec wait_ts, *wait = NULL;
        if (next != UINT64_MAX) {
            uint64_t d = next > now ? next - now : 0;
            wait_ts.tv_sec = (time_t)(d / 1000000000ull);
            wait_ts.tv_nsec = (long)(d % 1000000000ull);
            wait = &wait_ts;
        }
        int n = ppoll(pfd, (nfds_t)nports, wait, NULL);
        if (n < 0 && errno != EINTR) die("ppoll");
        now = now_ns();
        for (int i = 0; i < nports && n > 0; i++)
            if (pfd[i].revents & POLLIN) receive(i, buf, now);
    }
    printf("tt_wire: %llu frames in, %llu dropped (loss), %llu dropped (queue full)\n",
           (unsigned long long)frames_in, (unsigned long long)frames_lost,
           (unsigned long long)frames_full);
    return 0;
}
