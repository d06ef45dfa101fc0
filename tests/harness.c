/* The test harness's datatypes, conversions and exact-input generators (see harness.h).
 *
 * How inputs stay exact. Every dtype has an integer bound L such that all integers of magnitude
 * up to L are representable (int8: 127, float16: 2048, bfloat16: 256, fp8 e4m3: 16, e5m2: 8,
 * wide types: 2^20). Sum and integer average: each of the contributing ranks sends a value of
 * magnitude at most L / nranks, so every partial sum stays within L. Max and min: values up to
 * L. Product: factors are 0, +-1 and +-2, and at most log2(L) (and 4) ranks may send a 2.
 * Floating-point average multiplies each input by the dtype-rounded 1/nranks before summing, as
 * NCCL does: when nranks is a power of two that scalar is exact and the sum rule applies; when it
 * is not, each element has at most one contributing rank, or two whose inputs have equal
 * magnitude (a power of two), so the rounded terms t, 2t or 0 are the only partial sums. Floats
 * wider than fp8 also scale each element by 2^-2..2^2 (one scale per element, all ranks), and
 * 64-bit integers add 2^40 at random, so that exponents and high bits are exercised. */
#include "harness.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const struct th_dtype th_dtypes[TH_NUM_DTYPES] = {
    {ncclInt8, "int8", "int8", 1, false, true, 0, 0, false},
    {ncclUint8, "uint8", "uint8", 1, false, false, 0, 0, false},
    {ncclInt32, "int32", "int32", 4, false, true, 0, 0, false},
    {ncclUint32, "uint32", "uint32", 4, false, false, 0, 0, false},
    {ncclInt64, "int64", "int64", 8, false, true, 0, 0, false},
    {ncclUint64, "uint64", "uint64", 8, false, false, 0, 0, false},
    {ncclFloat16, "float16", "half", 2, true, true, 5, 10, true},
    {ncclFloat32, "float32", "float", 4, true, true, 8, 23, true},
    {ncclFloat64, "float64", "double", 8, true, true, 11, 52, true},
    {ncclBfloat16, "bfloat16", "bfloat16", 2, true, true, 8, 7, true},
    {ncclFloat8e4m3, "fp8e4m3", "f8e4m3", 1, true, true, 4, 3, false},
    {ncclFloat8e5m2, "fp8e5m2", "f8e5m2", 1, true, true, 5, 2, true},
};

static const char *const dtype_aliases[TH_NUM_DTYPES][4] = {
    {"char", "i8", NULL, NULL},
    {"u8", NULL, NULL, NULL},
    {"int", "i32", NULL, NULL},
    {"u32", NULL, NULL, NULL},
    {"i64", NULL, NULL, NULL},
    {"u64", NULL, NULL, NULL},
    {"fp16", "f16", NULL, NULL},
    {"fp32", "f32", NULL, NULL},
    {"fp64", "f64", NULL, NULL},
    {"bf16", NULL, NULL, NULL},
    {"e4m3", "fp8_e4m3", "float8e4m3", NULL},
    {"e5m2", "fp8_e5m2", "float8e5m2", NULL},
};

static const char *const op_names[TH_NUM_OPS] = {"sum", "prod", "max", "min", "avg"};

static const char *const coll_names[TH_NUM_ALL_COLLS][2] = {
    {"allreduce", "all_reduce"},         {"broadcast", "broadcast"}, {"reduce", "reduce"},
    {"allgather", "all_gather"},         {"reducescatter", "reduce_scatter"},
    {"alltoall", "all_to_all"},          {"gather", "gather"},       {"scatter", "scatter"},
    {"sendrecv", "send_recv"},
};

const struct th_dtype *th_dtype_find(ncclDataType_t dtype)
{
    for (int i = 0; i < TH_NUM_DTYPES; i++) {
        if (th_dtypes[i].dtype == dtype) {
            return &th_dtypes[i];
        }
    }
    return NULL;
}

const struct th_dtype *th_dtype_parse(const char *name)
{
    for (int i = 0; i < TH_NUM_DTYPES; i++) {
        if (strcasecmp(name, th_dtypes[i].name) == 0 ||
            strcasecmp(name, th_dtypes[i].perf_name) == 0) {
            return &th_dtypes[i];
        }
        for (int a = 0; a < 4 && dtype_aliases[i][a] != NULL; a++) {
            if (strcasecmp(name, dtype_aliases[i][a]) == 0) {
                return &th_dtypes[i];
            }
        }
    }
    return NULL;
}

const char *th_op_name(ncclRedOp_t op)
{
    return (unsigned)op < TH_NUM_OPS ? op_names[op] : "invalid";
}

bool th_parse_size(const char *text, size_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno != 0 || end == text || v < 0) {
        return false;
    }
    switch (*end) {
    case 'k':
    case 'K':
        v *= 1024.0;
        end++;
        break;
    case 'm':
    case 'M':
        v *= 1024.0 * 1024.0;
        end++;
        break;
    case 'g':
    case 'G':
        v *= 1024.0 * 1024.0 * 1024.0;
        end++;
        break;
    default:
        break;
    }
    if (*end != '\0') {
        return false;
    }
    *out = (size_t)v;
    return true;
}

bool th_op_parse(const char *name, ncclRedOp_t *op)
{
    for (int i = 0; i < TH_NUM_OPS; i++) {
        if (strcasecmp(name, op_names[i]) == 0) {
            *op = (ncclRedOp_t)i;
            return true;
        }
    }
    return false;
}

const char *th_coll_name(enum th_coll coll)
{
    return (unsigned)coll < TH_NUM_ALL_COLLS ? coll_names[coll][0] : "invalid";
}

bool th_coll_parse(const char *name, enum th_coll *coll)
{
    for (int i = 0; i < TH_NUM_ALL_COLLS; i++) {
        if (strcasecmp(name, coll_names[i][0]) == 0 || strcasecmp(name, coll_names[i][1]) == 0) {
            *coll = (enum th_coll)i;
            return true;
        }
    }
    return false;
}

bool th_coll_has_op(enum th_coll coll)
{
    return coll == TH_ALLREDUCE || coll == TH_REDUCE || coll == TH_REDUCESCATTER;
}

bool th_coll_has_root(enum th_coll coll)
{
    return coll == TH_BROADCAST || coll == TH_REDUCE || coll == TH_GATHER || coll == TH_SCATTER;
}

/* Small float formats (float16, bfloat16, fp8), from the bits of the double: the significand
 * (53 bits with the hidden one) is shifted right to the target's precision, and to fewer bits in
 * the target's subnormal range, rounding to nearest even on the dropped bits. The result is laid
 * out as ((E - emin) << man_bits) + q, which also carries a mantissa overflow into the exponent
 * and makes subnormals (E == emin, q < 2^man_bits) come out with exponent field 0. */
static inline __attribute__((always_inline)) uint64_t encode_small(double v, int eb, int mb,
                                                                  bool has_inf)
{
    uint64_t sign_bit = (signbit(v) ? 1ull : 0ull) << (eb + mb);
    int bias = (1 << (eb - 1)) - 1;
    int emin = 1 - bias;
    uint64_t exp_all = (1ull << eb) - 1;
    /* The largest finite magnitude: IEEE formats keep the all-ones exponent for inf/NaN; e4m3
     * keeps only the all-ones mantissa of it for NaN. */
    uint64_t max_bits = has_inf ? ((exp_all - 1) << mb) | ((1ull << mb) - 1)
                                : (exp_all << mb) | ((1ull << mb) - 2);
    bool saturate = eb + mb == 7; /* fp8 saturates (NCCL's SATFINITE), the others overflow to inf */
    if (isnan(v)) {
        return (exp_all << mb) | (has_inf ? 1ull << (mb - 1) : (1ull << mb) - 1);
    }
    uint64_t u;
    memcpy(&u, &v, sizeof(u));
    int dexp = (int)((u >> 52) & 0x7ff);
    uint64_t bits;
    if (dexp == 0) {
        /* Zero, or a double subnormal: far below every small format's range. */
        return sign_bit;
    } else if (dexp == 0x7ff) {
        bits = max_bits + 1;
    } else {
        int E = dexp - 1023;
        int Ec = E < emin ? emin : E;
        int shift = 52 - mb + (Ec - E);
        uint64_t sig = (u & ((1ull << 52) - 1)) | (1ull << 52);
        uint64_t q = 0;
        if (shift < 64) {
            uint64_t rem = sig & ((1ull << shift) - 1);
            uint64_t half = 1ull << (shift - 1);
            q = sig >> shift;
            q += rem > half || (rem == half && (q & 1));
        }
        bits = ((uint64_t)(Ec - emin) << mb) + q;
    }
    if (bits > max_bits) {
        bits = saturate ? max_bits : exp_all << mb;
    }
    return sign_bit | bits;
}

/* Small float formats to double, by laying out the double's bits directly (every value of
 * these formats is a normal double). */
static inline __attribute__((always_inline)) double decode_small(uint64_t bits, int eb, int mb,
                                                                 bool has_inf)
{
    int bias = (1 << (eb - 1)) - 1;
    uint64_t exp_all = (1ull << eb) - 1;
    uint64_t sign = (bits >> (eb + mb)) & 1;
    uint64_t ex = (bits >> mb) & exp_all;
    uint64_t man = bits & ((1ull << mb) - 1);
    double d;
    if ((has_inf && ex == exp_all) || (!has_inf && ex == exp_all && man == (1ull << mb) - 1)) {
        d = man == 0 && has_inf ? INFINITY : NAN;
    } else if (ex == 0) {
        d = ldexp((double)man, 1 - bias - mb);
    } else {
        uint64_t u = ((ex - (uint64_t)bias + 1023) << 52) | (man << (52 - mb));
        memcpy(&d, &u, sizeof(d));
    }
    return sign ? -d : d;
}

uint64_t th_float_encode(double v, const struct th_dtype *type)
{
    if (type->dtype == ncclFloat32) {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, sizeof(u));
        return u;
    }
    if (type->dtype == ncclFloat64) {
        uint64_t u;
        memcpy(&u, &v, sizeof(u));
        return u;
    }
    /* Constant format parameters let the compiler specialise each conversion. */
    switch (type->dtype) {
    case ncclFloat16:
        return encode_small(v, 5, 10, true);
    case ncclBfloat16:
        return encode_small(v, 8, 7, true);
    case ncclFloat8e4m3:
        return encode_small(v, 4, 3, false);
    default:
        return encode_small(v, 5, 2, true);
    }
}

double th_float_decode(uint64_t bits, const struct th_dtype *type)
{
    if (type->dtype == ncclFloat32) {
        uint32_t u = (uint32_t)bits;
        float f;
        memcpy(&f, &u, sizeof(f));
        return f;
    }
    if (type->dtype == ncclFloat64) {
        double d;
        memcpy(&d, &bits, sizeof(d));
        return d;
    }
    switch (type->dtype) {
    case ncclFloat16:
        return decode_small(bits, 5, 10, true);
    case ncclBfloat16:
        return decode_small(bits, 8, 7, true);
    case ncclFloat8e4m3:
        return decode_small(bits, 4, 3, false);
    default:
        return decode_small(bits, 5, 2, true);
    }
}

uint64_t th_load(const void *buf, size_t index, size_t bytes)
{
    const unsigned char *p = (const unsigned char *)buf + index * bytes;
    switch (bytes) {
    case 1:
        return p[0];
    case 2: {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    default: {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    }
}

void th_store(void *buf, size_t index, size_t bytes, uint64_t bits)
{
    unsigned char *p = (unsigned char *)buf + index * bytes;
    switch (bytes) {
    case 1:
        p[0] = (unsigned char)bits;
        break;
    case 2: {
        uint16_t v = (uint16_t)bits;
        memcpy(p, &v, 2);
        break;
    }
    case 4: {
        uint32_t v = (uint32_t)bits;
        memcpy(p, &v, 4);
        break;
    }
    default:
        memcpy(p, &bits, 8);
        break;
    }
}

uint64_t th_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Hashes are drawn from streams: a stream's key mixes (seed, stream number), and element b of
 * the stream is one more mix of key + b * golden ratio (splitmix64's sequence). */
static uint64_t stream_key(uint64_t seed, uint64_t stream)
{
    return th_mix64(seed ^ (stream * 0xd1b54a32d192ed03ull));
}

static uint64_t stream_hash(uint64_t key, uint64_t index)
{
    return th_mix64(key + index * 0x9e3779b97f4a7c15ull);
}

void th_fill_pattern(void *buf, size_t bytes, uint32_t salt)
{
    unsigned char *p = buf;
    uint64_t key = stream_key(salt, 0x9a77e51);
    for (size_t k = 0; k < bytes; k += 8) {
        uint64_t h = stream_hash(key, k);
        size_t n = bytes - k < 8 ? bytes - k : 8;
        memcpy(p + k, &h, n);
    }
}

/* The stream every rank agrees on (per element), and the salt of raw (movement-only) data. */
#define ELEMENT_STREAM UINT64_C(0xe1e3e47)
#define RAW_SALT UINT64_C(0x5a3c96e1f00dcafe)
/* Ranks whose stream keys are precomputed; others compute theirs on each use. */
#define KEYED_RANKS 256

/* A reduction's input model for one (dtype, op, nranks, seed); see the file comment. */
struct gen {
    const struct th_dtype *type;
    ncclRedOp_t op;
    int nranks;
    uint64_t seed;
    int64_t limit;     /* L: integers up to L are exact */
    int64_t active;    /* sum-like ops: ranks that contribute to an element */
    int64_t bound;     /* magnitude bound of one input */
    int64_t two_ranks; /* prod: ranks that may send a factor 2 */
    int log2_limit;
    bool scaled;       /* element scale 2^-2..2^2 */
    bool hi_bit;       /* 64-bit integers: add 2^40 at random */
    bool avg_sparse;   /* float avg with nranks not a power of two */
    bool element_hash; /* inputs depend on the per-element stream */
    double avg_scalar; /* the dtype-rounded 1/nranks */
    double avg_exact;  /* products x * avg_scalar of this magnitude or more need no rounding */
    uint64_t element_key;
    uint64_t rank_keys[KEYED_RANKS];
};

struct value {
    int64_t i;
    double f;
};

static int64_t dtype_limit(const struct th_dtype *t)
{
    switch (t->dtype) {
    case ncclInt8:
        return 127;
    case ncclUint8:
        return 255;
    case ncclFloat16:
        return 2048;
    case ncclBfloat16:
        return 256;
    case ncclFloat8e4m3:
        return 16;
    case ncclFloat8e5m2:
        return 8;
    default:
        return 1 << 20;
    }
}

static double round_to_dtype(double v, const struct th_dtype *t)
{
    if (t->dtype == ncclFloat64) {
        return v;
    }
    return th_float_decode(th_float_encode(v, t), t);
}

static uint64_t rank_key(const struct gen *g, int rank)
{
    return rank < KEYED_RANKS ? g->rank_keys[rank] : stream_key(g->seed, (uint64_t)rank + 1);
}

static void gen_init(struct gen *g, const struct th_case *c)
{
    memset(g, 0, offsetof(struct gen, rank_keys));
    g->type = c->type;
    g->op = c->op;
    g->nranks = c->nranks;
    g->seed = c->seed;
    g->limit = dtype_limit(c->type);
    g->active = c->nranks < g->limit ? c->nranks : g->limit;
    g->bound = g->limit / g->active;
    while ((INT64_C(2) << g->log2_limit) <= g->limit) {
        g->log2_limit++;
    }
    g->two_ranks = g->log2_limit < 4 ? g->log2_limit : 4;
    g->scaled = c->type->is_float && c->type->bytes > 1 && c->op != ncclProd;
    g->hi_bit = !c->type->is_float && c->type->bytes == 8 && c->op != ncclProd;
    if (c->op == ncclAvg && c->type->is_float) {
        g->avg_sparse = (c->nranks & (c->nranks - 1)) != 0;
        g->avg_scalar = round_to_dtype(1.0 / c->nranks, c->type);
        /* A power-of-two scalar scales exactly, down to the smallest normal number. */
        g->avg_exact = g->avg_sparse ? INFINITY : ldexp(1.0, 2 - (1 << (c->type->exp_bits - 1)));
    }
    g->element_hash = g->scaled || g->avg_sparse;
    g->element_key = stream_key(c->seed, ELEMENT_STREAM);
    for (int r = 0; r < c->nranks && r < KEYED_RANKS; r++) {
        g->rank_keys[r] = stream_key(c->seed, (uint64_t)r + 1);
    }
}

/* A number in [0, n) from 32 bits of a hash, by multiplication instead of a slow modulo. */
static uint64_t below(uint64_t hash32, uint64_t n)
{
    return ((hash32 & 0xffffffffu) * n) >> 32;
}

/* Sum-like inputs: the rank is one of `active` consecutive contributors of this element (all
 * ranks when nranks <= L) and sends a value of magnitude <= bound. */
static int64_t sum_input(const struct gen *g, int rank, size_t index, uint64_t hr, int64_t bound)
{
    if (g->active < g->nranks && (int64_t)((rank + index) % (size_t)g->nranks) >= g->active) {
        return 0;
    }
    int64_t v = (int64_t)below(hr, (uint64_t)bound + 1);
    return g->type->is_signed && ((hr >> 32) & 1) ? -v : v;
}

static int64_t prod_input(const struct gen *g, int rank, size_t index, uint64_t hr)
{
    if (hr % 32 == 0) {
        return 0;
    }
    bool may_two = g->two_ranks >= g->nranks ||
                   (int64_t)((rank + index) % (size_t)g->nranks) < g->two_ranks;
    int64_t v = may_two && ((hr >> 8) & 1) ? 2 : 1;
    return g->type->is_signed && ((hr >> 9) & 1) ? -v : v;
}

/* Float average with nranks not a power of two: per element, no contributor (1 in 8), a single
 * one with any value up to L (4 in 8), or two with equal magnitudes 2^j (3 in 8). */
static int64_t sparse_avg_input(const struct gen *g, int rank, uint64_t he, uint64_t hr)
{
    int pattern = (int)(he % 8);
    int first = (int)((he >> 8) % (uint64_t)g->nranks);
    int second = (first + 1 + (int)((he >> 24) % (uint64_t)(g->nranks - 1))) % g->nranks;
    int64_t v;
    if (pattern == 0) {
        return 0;
    } else if (pattern <= 4) {
        if (rank != first) {
            return 0;
        }
        v = 1 + (int64_t)below(hr, (uint64_t)g->limit);
    } else {
        if (rank != first && rank != second) {
            return 0;
        }
        v = INT64_C(1) << ((he >> 32) % (uint64_t)(g->log2_limit + 1));
    }
    return (hr >> 33) & 1 ? -v : v;
}

/* The input of `rank` for element `index`; hr is the rank's hash of the element and he the
 * element's own (0 unless g->element_hash). */
static struct value gen_input(const struct gen *g, int rank, size_t index, uint64_t hr,
                              uint64_t he)
{
    static const double scales[5] = {0.25, 0.5, 1.0, 2.0, 4.0};
    int64_t v;
    if (g->op == ncclProd) {
        v = prod_input(g, rank, index, hr);
    } else if (g->avg_sparse) {
        v = sparse_avg_input(g, rank, he, hr);
    } else if (g->op == ncclMax || g->op == ncclMin) {
        v = sum_input(g, rank, index, hr, g->limit);
    } else {
        v = sum_input(g, rank, index, hr, g->bound);
    }
    struct value out = {v, 0.0};
    if (g->type->is_float) {
        out.f = g->scaled ? (double)v * scales[below(he >> 32, 5)] : (double)v;
    } else if (g->hi_bit && ((hr >> 40) & 1)) {
        out.i += INT64_C(1) << 40;
    }
    return out;
}

static uint64_t int_mask(size_t bytes)
{
    return bytes == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * bytes)) - 1;
}

static uint64_t value_bits(const struct gen *g, struct value v)
{
    if (g->type->is_float) {
        return th_float_encode(v.f, g->type);
    }
    return (uint64_t)v.i & int_mask(g->type->bytes);
}

/* The reference reduction: integers in 64-bit two's complement (wrapping, as the dtypes do;
 * the inputs never wrap), floats in double, where every step is exact by construction. */
static uint64_t gen_expect(const struct gen *g, size_t index)
{
    uint64_t he = g->element_hash ? stream_hash(g->element_key, index) : 0;
    if (!g->type->is_float) {
        int64_t acc = 0;
        uint64_t uacc = g->op == ncclProd ? 1 : 0;
        for (int r = 0; r < g->nranks; r++) {
            int64_t x = gen_input(g, r, index, stream_hash(rank_key(g, r), index), he).i;
            switch (g->op) {
            case ncclSum:
            case ncclAvg:
                uacc += (uint64_t)x;
                break;
            case ncclProd:
                uacc *= (uint64_t)x;
                break;
            case ncclMax:
                acc = r == 0 || x > acc ? x : acc;
                break;
            default:
                acc = r == 0 || x < acc ? x : acc;
                break;
            }
        }
        if (g->op == ncclMax || g->op == ncclMin) {
            uacc = (uint64_t)acc;
        } else if (g->op == ncclAvg) {
            uacc = g->type->is_signed ? (uint64_t)((int64_t)uacc / g->nranks)
                                      : uacc / (uint64_t)g->nranks;
        }
        return uacc & int_mask(g->type->bytes);
    }
    double acc = g->op == ncclProd ? 1.0 : g->op == ncclMax ? -INFINITY
                                       : g->op == ncclMin ? INFINITY : 0.0;
    for (int r = 0; r < g->nranks; r++) {
        double x = gen_input(g, r, index, stream_hash(rank_key(g, r), index), he).f;
        switch (g->op) {
        case ncclSum:
            acc += x;
            break;
        case ncclProd:
            acc *= x;
            break;
        case ncclMax:
            acc = fmax(acc, x);
            break;
        case ncclMin:
            acc = fmin(acc, x);
            break;
        default:
            x *= g->avg_scalar;
            acc += fabs(x) >= g->avg_exact ? x : round_to_dtype(x, g->type);
            break;
        }
    }
    return th_float_encode(acc, g->type);
}

size_t th_send_count(const struct th_case *c)
{
    bool all_ranks = c->coll == TH_REDUCESCATTER || c->coll == TH_SCATTER ||
                     c->coll == TH_ALLTOALL;
    return all_ranks ? c->count * (size_t)c->nranks : c->count;
}

size_t th_recv_count(const struct th_case *c)
{
    bool all_ranks = c->coll == TH_ALLGATHER || c->coll == TH_GATHER || c->coll == TH_ALLTOALL;
    return all_ranks ? c->count * (size_t)c->nranks : c->count;
}

size_t th_inplace_offset(const struct th_case *c)
{
    if (c->coll == TH_ALLGATHER || c->coll == TH_REDUCESCATTER || c->coll == TH_GATHER ||
        c->coll == TH_SCATTER) {
        return (size_t)c->rank * c->count;
    }
    return 0;
}

/* Movement-only data (every collective without an op): elements [first, first + count) of `rank`'s
 * stream, any bit pattern at all (NaNs included), since the library must copy bytes without
 * interpreting them. */
static void fill_raw(const struct th_case *c, int rank, void *buf, size_t at, size_t first,
                     size_t count)
{
    size_t bytes = c->type->bytes;
    uint64_t mask = int_mask(bytes);
    uint64_t key = stream_key(c->seed ^ RAW_SALT, (uint64_t)rank);
    for (size_t j = 0; j < count; j++) {
        th_store(buf, at + j, bytes, stream_hash(key, first + j) & mask);
    }
}

void th_fill_send(const struct th_case *c, void *send)
{
    size_t bytes = c->type->bytes;
    size_t n = th_send_count(c);
    if (!th_coll_has_op(c->coll)) {
        fill_raw(c, c->rank, send, 0, 0, n);
        return;
    }
    struct gen *g = malloc(sizeof(*g));
    if (g == NULL) {
        abort();
    }
    gen_init(g, c);
    uint64_t key = rank_key(g, c->rank);
    for (size_t j = 0; j < n; j++) {
        uint64_t he = g->element_hash ? stream_hash(g->element_key, j) : 0;
        struct value v = gen_input(g, c->rank, j, stream_hash(key, j), he);
        th_store(send, j, bytes, value_bits(g, v));
    }
    free(g);
}

bool th_fill_expect(const struct th_case *c, void *recv, size_t first, size_t count)
{
    size_t bytes = c->type->bytes;
    switch (c->coll) {
    case TH_REDUCE:
        if (c->rank != c->root) {
            return false;
        }
        /* fall through */
    case TH_ALLREDUCE:
    case TH_REDUCESCATTER: {
        size_t base = c->coll == TH_REDUCESCATTER ? (size_t)c->rank * c->count : 0;
        struct gen *g = malloc(sizeof(*g));
        if (g == NULL) {
            abort();
        }
        gen_init(g, c);
        for (size_t j = 0; j < count; j++) {
            th_store(recv, first + j, bytes, gen_expect(g, base + first + j));
        }
        free(g);
        return true;
    }
    case TH_BROADCAST:
        fill_raw(c, c->root, recv, first, first, count);
        return true;
    case TH_SCATTER:
        /* Block `rank` of the root's send buffer. */
        fill_raw(c, c->root, recv, first, (size_t)c->rank * c->count + first, count);
        return true;
    case TH_SENDRECV:
        fill_raw(c, (c->rank + c->nranks - 1) % c->nranks, recv, first, first, count);
        return true;
    case TH_GATHER:
        if (c->rank != c->root) {
            return false;
        }
        /* fall through */
    default:
        /* AllGather, Gather and AlltoAll: block r of the receive buffer comes from rank r; its
         * whole send buffer, or for AlltoAll the block of it addressed to this rank. */
        for (size_t k = first; k < first + count;) {
            size_t r = k / c->count;
            size_t j = k % c->count;
            size_t n = c->count - j < first + count - k ? c->count - j : first + count - k;
            size_t from = c->coll == TH_ALLTOALL ? (size_t)c->rank * c->count + j : j;
            fill_raw(c, (int)r, recv, k, from, n);
            k += n;
        }
        return true;
    }
}
