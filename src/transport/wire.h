/* Little-endian wire encoding shared by the network transports (tcp.c, ucx.c): integers and the
 * 24-byte operation descriptor every frame carries for mismatch detection (TT_WIRE_DESC_BYTES:
 * ticket 8, count 8, root 4, coll 1, dtype 1, op 2). */
#ifndef TT_TRANSPORT_WIRE_H
#define TT_TRANSPORT_WIRE_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

#include "transport/transport.h"

#define TT_WIRE_DESC_BYTES 24

static inline void tt_wire_put_u32(uint8_t *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}

static inline void tt_wire_put_u64(uint8_t *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}

static inline uint32_t tt_wire_get_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return le32toh(v);
}

static inline uint64_t tt_wire_get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return le64toh(v);
}

/* Writes `d` (all zeros when NULL) in TT_WIRE_DESC_BYTES bytes at p. */
static inline void tt_wire_put_desc(uint8_t *p, const struct tt_op_desc *d)
{
    static const struct tt_op_desc none;
    if (d == NULL) d = &none;
    tt_wire_put_u64(p, d->ticket);
    tt_wire_put_u64(p + 8, d->count);
    tt_wire_put_u32(p + 16, (uint32_t)d->root);
    p[20] = d->coll;
    p[21] = d->dtype;
    p[22] = (uint8_t)(d->op & 0xff);
    p[23] = (uint8_t)(d->op >> 8);
}

static inline void tt_wire_get_desc(const uint8_t *p, struct tt_op_desc *d)
{
    *d = (struct tt_op_desc){.ticket = tt_wire_get_u64(p), .count = tt_wire_get_u64(p + 8),
                             .root = (int32_t)tt_wire_get_u32(p + 16), .coll = p[20],
                             .dtype = p[21], .op = (uint16_t)(p[22] | p[23] << 8)};
}

#endif
