/* tutti-perf's shared declarations: one call of a collective, the table of collectives
 * (tutti-perf.c) and the command line (tutti-perf-options.c). */
#ifndef TUTTI_PERF_H
#define TUTTI_PERF_H

#include <stdbool.h>
#include <stddef.h>

#include "harness.h"
#include "nccl.h"

/* One call of a collective: `count` is NCCL's count argument. */
struct call {
    ncclComm_t comm;
    const struct th_dtype *type;
    ncclRedOp_t op;
    int root;
    size_t count;
    int rank;
    int nranks;
};

struct coll_desc {
    const char *name;   /* nccl-tests' name: "all_reduce" */
    enum th_coll model; /* the harness's model, for -c */
    bool has_op;
    bool has_root;
    /* The size covers every rank's block: NCCL's count argument is total / nranks. */
    bool per_rank;
    bool has_inplace; /* false: NCCL defines no in-place form, printed as N/A */
    double (*bus_factor)(int nranks);
    ncclResult_t (*run)(const struct call *c, const void *send, void *recv);
};

/* The collectives tutti-perf knows, in nccl-tests' order (tutti-perf.c). */
extern const struct coll_desc tp_colls[];
extern const size_t tp_ncolls;

struct options {
    size_t min_bytes;
    size_t max_bytes;
    size_t step_bytes; /* additive steps when non-zero, else step_factor */
    double step_factor;
    int iters;
    int warmup;
    int check;
    int average; /* 0: rank 0's time, 1: average, 2: min, 3: max */
    int blocking;
    int root;
    int local_register; /* -R: 1 ordinary buffers registered; 2 symmetric windows */
    const struct coll_desc *coll;
    const struct th_dtype *dtypes[TH_NUM_DTYPES];
    int ndtypes;
    ncclRedOp_t ops[TH_NUM_OPS];
    int nops;
    const char *json_path;
    bool csv;
    bool malloc_windows; /* --malloc: -R 2 windows over ordinary buffers */
    bool device;         /* -G: device buffers on a CUDA stream (CUDA builds) */
    bool help;           /* -h, --help: the usage was printed on stdout */
};

/* Device buffers (-G), tools/tutti-perf-cuda.c in CUDA builds; without CUDA tp_dev_init
 * fails with a message and nothing else is called. The stream is the one every call of the
 * benchmark is issued on (NULL: host mode). */
extern cudaStream_t tp_stream;
bool tp_dev_init(char *why, size_t why_bytes);
void *tp_dev_alloc(size_t bytes);
void tp_dev_free(void *p);
void tp_dev_put(void *dst, const void *src, size_t bytes);
void tp_dev_get(void *dst, const void *src, size_t bytes);
void tp_dev_sync(void);
/* Starts and stops a CUDA-event timing on tp_stream; stop synchronises and returns us. */
void tp_dev_timer_start(void);
double tp_dev_timer_stop_us(void);
/* The device-to-device copy bandwidth (GB/s: bytes copied per ns) of `bytes` copies. */
double tp_dev_copy_gbs(size_t bytes, int iters);
/* The device's name, for the header. */
const char *tp_dev_name(void);

/* Parses the command line into *o (defaults first); prints the usage and returns false on a bad
 * option or value, and also after printing it for -h/--help (then o->help is set: exit 0). */
bool tp_parse_options(int argc, char **argv, struct options *o);

#endif
