/* Shared helpers of the collective tests (coll_matrix) and of tutti-perf's checker: a table of
 * NCCL's datatypes, bit-exact conversions between double and the small float formats, and for
 * each collective the inputs every rank sends and the exact bits every rank must receive.
 * Nothing here uses the library's own code (src/reduce): the reference must be able to disagree
 * with it. Invariant: for every (collective, dtype, op, nranks) the inputs are chosen so that every
 * partial result of the reduction, taken in any order, is exactly representable in the dtype, so
 * the expected bits do not depend on the order in which the library reduces. */
#ifndef TUTTI_TESTS_HARNESS_H
#define TUTTI_TESTS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#define TH_NUM_DTYPES 12
#define TH_NUM_OPS 5

struct th_dtype {
    ncclDataType_t dtype;
    const char *name;      /* the matrix's name: "float16", "fp8e4m3" */
    const char *perf_name; /* nccl-tests' name: "half", "f8e4m3" */
    size_t bytes;
    bool is_float;
    bool is_signed;
    int exp_bits; /* float formats: exponent and explicit mantissa bits */
    int man_bits;
    bool has_inf; /* an all-ones exponent means inf/NaN (IEEE); false for fp8 e4m3 */
};

/* The 12 datatypes in ncclDataType_t order. */
extern const struct th_dtype th_dtypes[TH_NUM_DTYPES];

/* The entry of `dtype`, or NULL when it is not one of the 12. */
const struct th_dtype *th_dtype_find(ncclDataType_t dtype);
/* Accepts both name sets and the usual aliases (char, int, half, float, double, bf16, e4m3 ...);
 * NULL when unknown. */
const struct th_dtype *th_dtype_parse(const char *name);
/* "sum", "prod", "max", "min", "avg". */
const char *th_op_name(ncclRedOp_t op);
bool th_op_parse(const char *name, ncclRedOp_t *op);
/* A byte count with an optional K, M or G suffix (powers of 1024; "1.5M" is allowed), as
 * nccl-tests reads -b and -e; false when the text is not one. */
bool th_parse_size(const char *text, size_t *out);

/* Float formats: `v` rounded to nearest even into the dtype's bits (fp8 saturates to the largest
 * finite value); and back. Only for dtypes with is_float. */
uint64_t th_float_encode(double v, const struct th_dtype *type);
double th_float_decode(uint64_t bits, const struct th_dtype *type);

/* Element `index` of a buffer of `bytes`-wide elements, as the low bits of a uint64_t. */
uint64_t th_load(const void *buf, size_t index, size_t bytes);
void th_store(void *buf, size_t index, size_t bytes, uint64_t bits);

/* The collectives the harness models, with NCCL's meaning of `count`: AllReduce, Broadcast and
 * Reduce: elements of the buffer; AllGather and Gather: elements each rank sends; ReduceScatter
 * and Scatter: elements each rank receives; AlltoAll: elements each rank sends to each peer;
 * SendRecv (every rank sends to rank + 1 and receives from rank - 1 in one group): elements of
 * each message. The first TH_NUM_COLLS form coll_matrix's default matrix; the movement-only
 * ones after them join it on request (--colls every) and are tutti-perf's too. */
enum th_coll {
    TH_ALLREDUCE,
    TH_BROADCAST,
    TH_REDUCE,
    TH_ALLGATHER,
    TH_REDUCESCATTER,
    TH_NUM_COLLS,
    TH_ALLTOALL = TH_NUM_COLLS,
    TH_GATHER,
    TH_SCATTER,
    TH_SENDRECV,
    TH_NUM_ALL_COLLS,
};

/* "allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall", "gather",
 * "scatter", "sendrecv". */
const char *th_coll_name(enum th_coll coll);
/* Accepts every collective's name and nccl-tests' ("all_reduce", "reduce_scatter" ...). */
bool th_coll_parse(const char *name, enum th_coll *coll);
bool th_coll_has_op(enum th_coll coll);
bool th_coll_has_root(enum th_coll coll);

/* One collective call as seen by one rank. Equal `seed`s give equal data on every rank. */
struct th_case {
    enum th_coll coll;
    const struct th_dtype *type;
    ncclRedOp_t op; /* ignored by Broadcast and AllGather */
    size_t count;
    int root; /* used by Broadcast, Reduce, Gather and Scatter only */
    int rank;
    int nranks;
    uint64_t seed;
};

/* Elements of the send and the receive buffer of this case. */
size_t th_send_count(const struct th_case *c);
size_t th_recv_count(const struct th_case *c);
/* Element offset of the send (AllGather, Gather) or receive (ReduceScatter, Scatter) data
 * inside the other buffer for the in-place form; 0 for the other collectives. */
size_t th_inplace_offset(const struct th_case *c);

/* Writes this rank's send buffer (th_send_count elements). For Broadcast every rank gets data
 * of its own, so that a non-root's send buffer read by mistake is noticed. */
void th_fill_send(const struct th_case *c, void *send);
/* Writes the expected receive buffer (th_recv_count elements), elements [first, first + count)
 * of it only. Returns false, writing nothing, when this rank's receive buffer must be left as it
 * was (Reduce and Gather on a non-root). */
bool th_fill_expect(const struct th_case *c, void *recv, size_t first, size_t count);

/* A byte pattern that depends on its position and `salt`: sentinels and guards. */
void th_fill_pattern(void *buf, size_t bytes, uint32_t salt);

/* splitmix64's finaliser: a cheap well-mixed hash. */
uint64_t th_mix64(uint64_t x);

#endif
