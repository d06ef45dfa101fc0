/* The independent reference shared by the two unit tests of src/reduce: unit_reduce_dtypes (the
 * small-float conversions and the resolution of ops and dtypes) and unit_reduce (every kernel at
 * every level). It shares no code with the library: the small float formats are described from
 * their definitions, decoded with ldexp and encoded by searching a sorted table of every
 * representable value for the nearest one (ties to the even code). It also holds the failure
 * count, a deterministic generator, and the dtype table with raw-bit accessors and inputs. */
#ifndef TUTTI_TESTS_UNIT_REDUCE_COMMON_H
#define TUTTI_TESTS_UNIT_REDUCE_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nccl.h"

/* Failed checks so far; fail() prints the first 40 of them. */
extern int failures;
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* xorshift64*: deterministic, so a failure reproduces. Reseed by assigning rng_state. */
#define RNG_SEED UINT64_C(0x9e3779b97f4a7c15)
extern uint64_t rng_state;
uint64_t rnd(void);

static inline uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint64_t d2u(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

static inline double u2d(uint64_t u)
{
    double d;
    memcpy(&d, &u, 8);
    return d;
}

/* A small float format. */
struct fmt {
    const char *name;
    int bits;     /* storage width */
    int man;      /* explicit mantissa bits */
    int bias;
    int ieee;     /* all-ones exponent means inf (mantissa 0) or NaN; else only S.1111.111 is NaN */
    int saturate; /* overflow goes to the largest finite value, not to inf */
    /* Every non-negative finite value, sorted, with its code; IEEE formats that overflow to inf
     * end with inf's code standing for 2^(emax + 1), which is what rounding to nearest sees. */
    double *value;
    uint32_t *code;
    int count;
};

extern struct fmt fmt_half, fmt_bf16, fmt_e4m3, fmt_e5m2;

/* Builds the value tables of the four formats; fmts_free releases them. */
void fmts_build(void);
void fmts_free(void);

uint32_t fmt_exp_all(const struct fmt *f);
uint32_t fmt_sign(const struct fmt *f);
int ref_is_nan(const struct fmt *f, uint32_t code);
int ref_is_inf(const struct fmt *f, uint32_t code);
/* The exact value of a code, NaN and inf included. */
double ref_decode(const struct fmt *f, uint32_t code);
/* The code nearest to the non-NaN value v, ties to the even code; saturating formats never go
 * past their largest finite value. */
uint32_t ref_encode(const struct fmt *f, double v);

/* The dtypes, by how the reference computes them. */
enum family { INT_SIGNED, INT_UNSIGNED, FLOAT32, FLOAT64, SMALL };

struct type {
    ncclDataType_t dtype;
    const char *name;
    size_t bytes;
    enum family family;
    const struct fmt *fmt; /* SMALL only */
};

#define NUM_TYPES 12
extern const struct type types[NUM_TYPES];

/* All ones in the low `bytes` bytes. */
uint64_t mask_of(size_t bytes);
int64_t sign_extend(uint64_t v, size_t bytes);

/* A float dtype's bits as a double and back (rounding to nearest even); bits_of gives a NaN's
 * bits for a NaN. */
double value_of(const struct type *t, uint64_t bits);
uint64_t bits_of(const struct type *t, double v);
int is_nan_bits(const struct type *t, uint64_t bits);
/* One operation in the compute type: double for float64, float (rounded from double, which is
 * exact for a single +, *, /) for the others. */
double rnd_op(const struct type *t, double v);

/* Element `i` of a buffer of `bytes`-wide elements, as the low bits of a uint64_t. */
uint64_t load(const void *buf, size_t i, size_t bytes);
void store(void *buf, size_t i, size_t bytes, uint64_t v);

/* An input element: for floats a mix of ordinary values, specials and raw bit patterns; for
 * integers a mix of small values, extremes and raw bits. */
uint64_t gen(const struct type *t);

#endif
