/* The bootstrap's small building blocks: random bytes, SipHash-2-4 and the MAC built on it,
 * and conversion of socket addresses to and from their wire form. SipHash is written here
 * from its published specification (Aumasson and Bernstein, 2012) so the bootstrap needs no
 * crypto library; the MAC runs it under each half of the 256-bit secret for a 128-bit tag. */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/random.h>

#include "bootstrap/proto.h"
#include "util/err.h"
#include "util/sock.h"

#define MAC_INPUT_MAX_BYTES 1024

ncclResult_t tt_bs_random(void *buf, size_t bytes)
{
    size_t done = 0;
    while (done < bytes) {
        ssize_t n = getrandom((char *)buf + done, bytes - done, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return TT_ERROR(ncclSystemError, "getrandom failed: %s", strerror(errno));
        done += (size_t)n;
    }
    return ncclSuccess;
}

static uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

static uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* One SipRound on the four state words. */
static void sip_round(uint64_t v[4])
{
    v[0] += v[1];
    v[1] = rotl(v[1], 13);
    v[1] ^= v[0];
    v[0] = rotl(v[0], 32);
    v[2] += v[3];
    v[3] = rotl(v[3], 16);
    v[3] ^= v[2];
    v[0] += v[3];
    v[3] = rotl(v[3], 21);
    v[3] ^= v[0];
    v[2] += v[1];
    v[1] = rotl(v[1], 17);
    v[1] ^= v[2];
    v[2] = rotl(v[2], 32);
}

uint64_t tt_bs_siphash(const uint8_t key[16], const void *data, size_t bytes)
{
    const uint8_t *in = data;
    uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
    uint64_t v[4] = {k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
                     k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull};
    /* Compression: two rounds per 8-byte word; the last word holds the tail bytes and the
     * message length in its top byte. */
    size_t full = bytes & ~(size_t)7;
    for (size_t i = 0; i < full; i += 8) {
        uint64_t m = load_le64(in + i);
        v[3] ^= m;
        sip_round(v);
        sip_round(v);
        v[0] ^= m;
    }
    uint64_t last = (uint64_t)(bytes & 0xff) << 56;
    for (size_t i = 0; i < (bytes & 7); i++) last |= (uint64_t)in[full + i] << (8 * i);
    v[3] ^= last;
    sip_round(v);
    sip_round(v);
    v[0] ^= last;
    /* Finalisation: four rounds. */
    v[2] ^= 0xff;
    for (int i = 0; i < 4; i++) sip_round(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

void tt_bs_mac(const uint8_t secret[32], const void *prefix, size_t prefix_bytes, const void *msg,
               size_t msg_bytes, uint8_t mac[TT_BS_MAC_BYTES])
{
    uint8_t input[MAC_INPUT_MAX_BYTES];
    TT_ASSERT(prefix_bytes + msg_bytes <= sizeof input);
    memcpy(input, prefix, prefix_bytes);
    memcpy(input + prefix_bytes, msg, msg_bytes);
    uint64_t lo = tt_bs_siphash(secret, input, prefix_bytes + msg_bytes);
    uint64_t hi = tt_bs_siphash(secret + 16, input, prefix_bytes + msg_bytes);
    memcpy(mac, &lo, 8);
    memcpy(mac + 8, &hi, 8);
}

bool tt_bs_mac_equal(const uint8_t a[TT_BS_MAC_BYTES], const uint8_t b[TT_BS_MAC_BYTES])
{
    uint8_t diff = 0;
    for (int i = 0; i < TT_BS_MAC_BYTES; i++) diff |= (uint8_t)(a[i] ^ b[i]);
    return diff == 0;
}

void tt_bs_addr_to_wire(const struct sockaddr_storage *addr, struct tt_bs_wire_addr *wire)
{
    memset(wire, 0, sizeof *wire);
    wire->family = addr->ss_family;
    if (addr->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)addr;
        wire->port = a->sin_port;
        memcpy(wire->addr, &a->sin_addr, 4);
    } else if (addr->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)addr;
        wire->port = a->sin6_port;
        wire->scope_id = a->sin6_scope_id;
        memcpy(wire->addr, &a->sin6_addr, 16);
    }
}

ncclResult_t tt_bs_addr_from_wire(const struct tt_bs_wire_addr *wire, const char *who,
                                  struct sockaddr_storage *addr)
{
    memset(addr, 0, sizeof *addr);
    if (wire->port == 0)
        return TT_ERROR(ncclRemoteError, "%s sent an address with port 0", who);
    if (wire->family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)addr;
        a->sin_family = AF_INET;
        a->sin_port = wire->port;
        memcpy(&a->sin_addr, wire->addr, 4);
    } else if (wire->family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)addr;
        a->sin6_family = AF_INET6;
        a->sin6_port = wire->port;
        a->sin6_scope_id = wire->scope_id;
        memcpy(&a->sin6_addr, wire->addr, 16);
    } else {
        return TT_ERROR(ncclRemoteError, "%s sent an address of unknown family %u", who,
                        (unsigned)wire->family);
    }
    return ncclSuccess;
}

ncclResult_t tt_bs_id_addr(const struct tt_unique_id *id, struct sockaddr_storage *addr)
{
    if (id->version != TT_UNIQUE_ID_VERSION)
        return TT_ERROR(ncclInvalidArgument,
                        "the unique id has format version %u, this library expects %u (was it "
                        "made by ncclGetUniqueId of the same Tutti version?)",
                        (unsigned)id->version, (unsigned)TT_UNIQUE_ID_VERSION);
    struct tt_bs_wire_addr wire;
    memset(&wire, 0, sizeof wire);
    wire.family = id->family;
    wire.port = id->port;
    wire.scope_id = id->scope_id;
    memcpy(wire.addr, id->addr, sizeof wire.addr);
    if ((wire.family != AF_INET && wire.family != AF_INET6) || wire.port == 0)
        return TT_ERROR(ncclInvalidArgument,
                        "the unique id holds no valid root address (family %u, port %u); was it "
                        "filled by ncclGetUniqueId?", (unsigned)wire.family,
                        (unsigned)ntohs(wire.port));
    return tt_bs_addr_from_wire(&wire, "the unique id", addr);
}
