/* reduce-bench: the speed of the reduction kernels (src/reduce) on one core, per datatype x op x
 * kernel level, in ns per element and GB/s. It is a measuring tool, not a test: nothing is
 * checked here (tests/unit_reduce.c does that).
 *
 * Each line times tt_reduce_combine(op, dst, a, b, count) out of place (or tt_reduce_combine2
 * with -2, or the unary tt_reduce_copy with a pre/post operation for op "premul"/"div"), on
 * buffers of the given bytes each, warmed and already faulted in. GB/s counts the bytes the call
 * must move: both inputs read and the destination written (3 x bytes; 4 x with a second
 * destination; 2 x for the unary forms). A line's figure is the best of -r runs, each run
 * repeating the call for at least 20 ms: on a shared machine the best is the least disturbed. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce.h"
#include "util/time.h"

#define MAX_LIST 32

struct list {
    const char *item[MAX_LIST];
    int count;
};

/* Splits a comma-separated argument in place. */
static void split(struct list *l, char *arg)
{
    l->count = 0;
    for (char *save = NULL, *tok = strtok_r(arg, ",", &save); tok && l->count < MAX_LIST;
         tok = strtok_r(NULL, ",", &save))
        l->item[l->count++] = tok;
}

/* "64M", "1K", "4096" to bytes; 0 when malformed. */
static size_t parse_bytes(const char *s)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'G':
    case 'g':
        v <<= 10; /* fall through */
    case 'M':
    case 'm':
        v <<= 10; /* fall through */
    case 'K':
    case 'k':
        v <<= 10;
        end++;
        break;
    default:
        break;
    }
    return *end == '\0' ? (size_t)v : 0;
}

static int parse_dtype(const char *name)
{
    for (int d = 0; d < ncclNumTypes; d++)
        if (strcmp(tt_dtype_name((ncclDataType_t)d), name) == 0)
            return d;
    return -1;
}

enum bench_op { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_AVG, OP_PREMUL, OP_DIV, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"sum", "prod", "max", "min", "avg", "premul",
                                               "div"};

static int parse_op(const char *name)
{
    for (int o = 0; o < OP_COUNT; o++)
        if (strcmp(op_names[o], name) == 0)
            return o;
    return -1;
}

/* Inputs near 1 (products and sums stay normal numbers, never subnormal), in the dtype's own
 * representation. */
static void fill(void *buf, ncclDataType_t dtype, size_t count, unsigned salt)
{
    for (size_t i = 0; i < count; i++) {
        float f = 1.0f + (float)((i * 7 + salt) % 64) / 128.0f;
        uint64_t bits = (i * 2654435761u + salt) & 0xffff;
        switch (dtype) {
        case ncclInt8:
        case ncclUint8:
            ((uint8_t *)buf)[i] = (uint8_t)bits;
            break;
        case ncclInt32:
        case ncclUint32:
            ((uint32_t *)buf)[i] = (uint32_t)bits;
            break;
        case ncclInt64:
        case ncclUint64:
            ((uint64_t *)buf)[i] = bits;
            break;
        case ncclFloat16:
            ((uint16_t *)buf)[i] = tt_float_to_half(f);
            break;
        case ncclBfloat16:
            ((uint16_t *)buf)[i] = tt_float_to_bf16(f);
            break;
        case ncclFloat32:
            ((float *)buf)[i] = f;
            break;
        case ncclFloat64:
            ((double *)buf)[i] = f;
            break;
        case ncclFloat8e4m3:
            ((uint8_t *)buf)[i] = tt_float_to_e4m3(f);
            break;
        default:
            ((uint8_t *)buf)[i] = tt_float_to_e5m2(f);
            break;
        }
    }
}

struct run {
    struct tt_redop op;
    unsigned flags;
    int unary, second;
    void *dst, *dst2;
    const void *a, *b;
    size_t count;
};

static void run_once(const struct run *r)
{
    if (r->unary)
        tt_reduce_copy(&r->op, r->dst, r->a, r->count, r->flags);
    else if (r->second)
        tt_reduce_combine2(&r->op, r->dst, r->dst2, r->a, r->b, r->count, r->flags);
    else
        tt_reduce_combine(&r->op, r->dst, r->a, r->b, r->count, r->flags);
}

/* Best time of one call, in ns, over `repeats` runs of at least 20 ms each. */
static double time_call(const struct run *r, int repeats)
{
    run_once(r); /* warm: caches, and the level's detection */
    double best = 0;
    for (int rep = 0; rep < repeats; rep++) {
        uint64_t start = tt_time_ns(), now;
        unsigned long calls = 0;
        do {
            run_once(r);
            calls++;
            now = tt_time_ns();
        } while (now - start < 20000000u);
        double ns = (double)(now - start) / (double)calls;
        if (rep == 0 || ns < best)
            best = ns;
    }
    return best;
}

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [-b bytes,...] [-t dtype,...] [-o op,...] [-l level,...] [-r runs] [-2]\n"
            "  -b  bytes per buffer, with K/M/G suffixes (default 1M,64M)\n"
            "  -t  datatypes: int8 uint8 int32 uint32 int64 uint64 float16 float32 float64\n"
            "      bfloat16 float8e4m3 float8e5m2 (default float32,float16,bfloat16,int32,"
            "float8e4m3)\n"
            "  -o  ops: sum prod max min avg premul div (default sum,max); avg is ncclAvg over\n"
            "      4 ranks with its pre- and post-operations, premul/div its unary forms\n"
            "  -l  levels: scalar avx2 avx512 (default: every level this CPU has)\n"
            "  -r  runs per line, the best kept (default 5)\n"
            "  -2  time tt_reduce_combine2 (two destinations) instead of tt_reduce_combine\n",
            argv0);
}

int main(int argc, char **argv)
{
    char def_bytes[] = "1M,64M", def_types[] = "float32,float16,bfloat16,int32,float8e4m3";
    char def_ops[] = "sum,max";
    struct list bytes_list, type_list, op_list, level_list = {{0}, 0};
    split(&bytes_list, def_bytes);
    split(&type_list, def_types);
    split(&op_list, def_ops);
    int repeats = 5, second = 0;
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (strcmp(flag, "-2") == 0) {
            second = 1;
            continue;
        }
        if (i + 1 >= argc || flag[0] != '-' || strlen(flag) != 2) {
            usage(argv[0]);
            return 2;
        }
        char *val = argv[++i];
        switch (flag[1]) {
        case 'b':
            split(&bytes_list, val);
            break;
        case 't':
            split(&type_list, val);
            break;
        case 'o':
            split(&op_list, val);
            break;
        case 'l':
            split(&level_list, val);
            break;
        case 'r':
            repeats = atoi(val) > 0 ? atoi(val) : 1;
            break;
        default:
            usage(argv[0]);
            return 2;
        }
    }
    int best = tt_reduce_level_best();
    int levels[TT_REDUCE_LEVEL_COUNT], nlevels = 0;
    if (level_list.count == 0) {
        for (int l = 0; l <= best; l++)
            levels[nlevels++] = l;
    } else {
        for (int i = 0; i < level_list.count && nlevels < TT_REDUCE_LEVEL_COUNT; i++) {
            int l = 0;
            while (l < TT_REDUCE_LEVEL_COUNT && strcmp(tt_reduce_level_name(l), level_list.item[i]))
                l++;
            if (l > best) {
                fprintf(stderr, "level %s: not available here (best: %s)\n", level_list.item[i],
                        tt_reduce_level_name(best));
                return 2;
            }
            levels[nlevels++] = l;
        }
    }
    printf("# reduce-bench: best level %s; %s; best of %d runs\n", tt_reduce_level_name(best),
           second ? "tt_reduce_combine2 (GB/s counts 4 x bytes)"
                  : "tt_reduce_combine (GB/s counts 3 x bytes)",
           repeats);
    printf("%12s %-11s %-6s %-7s %10s %9s\n", "bytes", "dtype", "op", "level", "ns/elem", "GB/s");
    for (int bi = 0; bi < bytes_list.count; bi++) {
        size_t bytes = parse_bytes(bytes_list.item[bi]);
        if (bytes == 0) {
            fprintf(stderr, "bad size: %s\n", bytes_list.item[bi]);
            return 2;
        }
        size_t alloc = (bytes + 63) / 64 * 64;
        unsigned char *a = aligned_alloc(64, alloc), *b = aligned_alloc(64, alloc);
        unsigned char *dst = aligned_alloc(64, alloc), *dst2 = aligned_alloc(64, alloc);
        if (!a || !b || !dst || !dst2) {
            fprintf(stderr, "out of memory for 4 buffers of %zu bytes\n", bytes);
            return 1;
        }
        memset(dst, 0, alloc);
        memset(dst2, 0, alloc);
        for (int ti = 0; ti < type_list.count; ti++) {
            int dtype = parse_dtype(type_list.item[ti]);
            if (dtype < 0) {
                fprintf(stderr, "bad dtype: %s\n", type_list.item[ti]);
                return 2;
            }
            size_t count = bytes / tt_dtype_bytes((ncclDataType_t)dtype);
            fill(a, (ncclDataType_t)dtype, count, 1);
            fill(b, (ncclDataType_t)dtype, count, 2);
            for (int oi = 0; oi < op_list.count; oi++) {
                int bop = parse_op(op_list.item[oi]);
                if (bop < 0) {
                    fprintf(stderr, "bad op: %s\n", op_list.item[oi]);
                    return 2;
                }
                const ncclRedOp_t reds[OP_COUNT] = {ncclSum, ncclProd, ncclMax, ncclMin,
                                                    ncclAvg, ncclAvg, ncclAvg};
                struct run r = {.flags = bop >= OP_AVG ? TT_REDUCE_PRE | TT_REDUCE_POST : 0,
                                .unary = bop >= OP_PREMUL, .second = second, .dst = dst,
                                .dst2 = dst2, .a = a, .b = b, .count = count};
                if (tt_redop_init(&r.op, reds[bop], (ncclDataType_t)dtype, 4) != ncclSuccess)
                    return 1;
                /* "premul" and "div" are the unary forms that apply to this dtype's avg. */
                int is_float = tt_dtype_is_float((ncclDataType_t)dtype);
                if ((bop == OP_PREMUL && !is_float) || (bop == OP_DIV && is_float))
                    continue;
                double moved = (double)bytes * (r.unary ? 2 : second ? 4 : 3);
                for (int li = 0; li < nlevels; li++) {
                    if (tt_reduce_force_level(levels[li]) != ncclSuccess)
                        return 1;
                    double ns = time_call(&r, repeats);
                    printf("%12zu %-11s %-6s %-7s %10.4f %9.2f\n", bytes, type_list.item[ti],
                           op_names[bop], tt_reduce_level_name(levels[li]), ns / (double)count,
                           moved / ns);
                    fflush(stdout);
                }
            }
        }
        free(a);
        free(b);
        free(dst);
        free(dst2);
    }
    return 0;
}
