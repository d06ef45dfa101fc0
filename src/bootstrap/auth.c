/* The bootstrap's small building blocks: random bytes, the MAC, the key derivation from a
 * human-chosen TUTTI_SECRET, and conversion of socket addresses to and from their wire form.
 * All cryptography is libsodium's: randombytes_buf for nonces and secrets, HMAC-SHA-512-256
 * (crypto_auth) truncated to 128 bits for the MAC, and Argon2id (crypto_pwhash) to stretch a
 * passphrase so that a weak TUTTI_SECRET is costly to guess offline. */
#include <netinet/in.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "bootstrap/proto.h"
#include "util/err.h"
#include "util/sock.h"

/* sodium_init is thread-safe and idempotent, but takes a global lock on every call; once it
 * succeeded it is not called again, so that a root or listener thread generating challenges
 * holds no lock a fork() could copy in its locked state into a child that then initialises a
 * rank. It fails only when no entropy source exists. */
static atomic_bool sodium_ok;

static ncclResult_t sodium_ready(void)
{
    if (atomic_load_explicit(&sodium_ok, memory_order_acquire)) return ncclSuccess;
    if (sodium_init() < 0)
        return TT_ERROR(ncclSystemError, "libsodium failed to initialise (no entropy source?)");
    atomic_store_explicit(&sodium_ok, true, memory_order_release);
    return ncclSuccess;
}

ncclResult_t tt_bs_random(void *buf, size_t bytes)
{
    TT_TRY(sodium_ready());
    randombytes_buf(buf, bytes);
    return ncclSuccess;
}

void tt_bs_mac(const uint8_t secret[32], const void *prefix, size_t prefix_bytes, const void *msg,
               size_t msg_bytes, uint8_t mac[TT_BS_MAC_BYTES])
{
    /* crypto_auth_hmacsha512256 with a 32-byte key; the streaming interface avoids a copy of
     * prefix || msg. The tag is truncated to TT_BS_MAC_BYTES (128 bits), as RFC 2104 allows. */
    crypto_auth_hmacsha512256_state st;
    uint8_t full[crypto_auth_hmacsha512256_BYTES];
    crypto_auth_hmacsha512256_init(&st, secret, 32);
    crypto_auth_hmacsha512256_update(&st, prefix, prefix_bytes);
    crypto_auth_hmacsha512256_update(&st, msg, msg_bytes);
    crypto_auth_hmacsha512256_final(&st, full);
    memcpy(mac, full, TT_BS_MAC_BYTES);
    sodium_memzero(&st, sizeof st);
}

void tt_bs_peer_hello_mac(const uint8_t secret[32], const uint8_t session[TT_BS_NONCE_BYTES],
                          const uint8_t challenge[TT_BS_NONCE_BYTES],
                          const struct tt_bs_peer_hello *hello, uint8_t mac[TT_BS_MAC_BYTES])
{
    uint8_t prefix[2 * TT_BS_NONCE_BYTES];
    memcpy(prefix, session, TT_BS_NONCE_BYTES);
    memcpy(prefix + TT_BS_NONCE_BYTES, challenge, TT_BS_NONCE_BYTES);
    tt_bs_mac(secret, prefix, sizeof prefix, hello, offsetof(struct tt_bs_peer_hello, mac), mac);
}

bool tt_bs_mac_equal(const uint8_t a[TT_BS_MAC_BYTES], const uint8_t b[TT_BS_MAC_BYTES])
{
    return crypto_verify_16(a, b) == 0;
}

ncclResult_t tt_bs_derive(const char *passphrase, const char *host_port, uint8_t secret[32],
                          uint64_t *magic)
{
    TT_TRY(sodium_ready());
    /* A secret written as "key:" followed by 64 hex digits is already a full-entropy key (what
     * tutti-run hands its children) and is used as is; anything else is a passphrase, stretched
     * by Argon2id with host:port as salt (hashed to the 16 bytes Argon2id takes). */
    size_t len = strlen(passphrase);
    if (len == 0) {
        /* No secret: nothing to stretch, and anyone can derive it from host:port (NCCL's own
         * model); the caller warns. */
        crypto_generichash(secret, 32, (const uint8_t *)host_port, strlen(host_port), NULL, 0);
    } else if (strncmp(passphrase, "key:", 4) == 0) {
        /* A damaged key must fail loudly, never fall back to being a (weak) passphrase. */
        size_t got = 0;
        if (len != 4 + 64 ||
            sodium_hex2bin(secret, 32, passphrase + 4, 64, NULL, &got, NULL) != 0 || got != 32)
            return TT_ERROR(ncclInvalidArgument, "TUTTI_SECRET starts with 'key:' but is not "
                            "followed by 64 hexadecimal digits");
    } else {
        uint8_t salt[crypto_pwhash_SALTBYTES];
        crypto_generichash(salt, sizeof salt, (const uint8_t *)host_port, strlen(host_port),
                           NULL, 0);
        if (crypto_pwhash(secret, 32, passphrase, len, salt, TT_BS_KDF_OPSLIMIT,
                          TT_BS_KDF_MEMLIMIT_BYTES, crypto_pwhash_ALG_ARGON2ID13) != 0)
            return TT_ERROR(ncclSystemError, "Argon2id could not stretch TUTTI_SECRET (out of "
                            "memory? it needs %u MiB)", (unsigned)(TT_BS_KDF_MEMLIMIT_BYTES >> 20));
    }
    /* The magic only tells jobs apart; it is a keyed hash of the secret, so it reveals nothing
     * an observer could test a guess against without first running Argon2id. */
    static const uint8_t label[] = "tutti-bootstrap-magic";
    uint8_t m[8];
    crypto_generichash(m, sizeof m, label, sizeof label, secret, 32);
    memcpy(magic, m, sizeof *magic);
    return ncclSuccess;
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
